/*
 * config.c - libetch's configs.
 *
 * Every config option is declared once in `options[]` (name, type, bounds,
 * help); etch_config_set, etch_config_parse and the ETCH_* environment
 * variables all go through it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sdk/core/sdk.h"

enum { OPT_STRING, OPT_UINT, OPT_ENUM };

typedef struct option {
  const char *name;
  int type;
  size_t off;
  uint64_t min, max;
  const char *const *values; /* OPT_ENUM: index = stored value */
  const char *help;
} option;

static const char *const fill_values[] = {"ring", "discard", "stall", NULL};
static const char *const compression_values[] = {"none", "deflate", NULL};

#define OFF(f) offsetof(struct etch_config, f)
static const option options[] = {
    {"categories", OPT_STRING, OFF(categories), 0, 0, NULL,
     "category patterns: name, prefix*, *, -excluded"},
    {"buffer_kb", OPT_UINT, OFF(buffer_kb), 16, 4194304, NULL,
     "trace buffer size in KiB"},
    {"fill", OPT_ENUM, OFF(fill), 0, 0, fill_values,
     "what a full buffer does: ring, discard or stall"},
    {"duration_ms", OPT_UINT, OFF(duration_ms), 0, 86400000ull * 365, NULL,
     "stop after this many ms (0: until stopped)"},
    {"reset_interval_ms", OPT_UINT, OFF(reset_interval_ms), 0,
     86400000ull, NULL, "incremental-state reset period in ms (0: never)"},
    {"output", OPT_STRING, OFF(output), 0, 0, NULL,
     "file written when the session stops"},
    {"compression", OPT_ENUM, OFF(compression), 0, 0, compression_values,
     "output compression: none or deflate"},
    {"interceptor", OPT_STRING, OFF(interceptor), 0, 0, NULL,
     "give packets to this interceptor instead of the buffer "
     "(interceptor.KEY=VALUE: its options)"},
    {"flight", OPT_STRING, OFF(flight), 0, 0, NULL,
     "flight recorder: the ring in this file, left behind by a process "
     "that dies (a name: in /dev/shm; 1: /dev/shm/etch-%p.flight; "
     "etch recover reads it)"},
    {"flight_keep", OPT_UINT, OFF(flight_keep), 0, 1, NULL,
     "1: keep the flight file after a normal end too"},
    {"write_period_ms", OPT_UINT, OFF(write_period_ms), 0, 86400000ull, NULL,
     "write the output while recording, this often in ms and whenever a "
     "quarter of the buffer is full (0: when the session stops)"},
    {"sample_hz", OPT_UINT, OFF(sample_hz), 0, 100000, NULL,
     "sample every thread's call stack this many times a second with "
     "perf events (0: off)"},
};
#undef OFF

int etch_config_new(etch_config **out) {
  if (!out) return etch__error(ETCH_EINVAL, "etch_config_new: out is NULL");
  etch__global_init();
  etch_config *c = (etch_config *)etch__calloc(1, sizeof *c);
  if (!c) return ETCH_ENOMEM;
  c->categories = etch__strdup("*");
  if (!c->categories) {
    free(c);
    return ETCH_ENOMEM;
  }
  c->buffer_kb = 8192;
  c->fill = ETCH_FILL_RING;
  c->reset_interval_ms = 1000;
  c->compression = 1;
  *out = c;
  return ETCH_OK;
}

void etch__config_release(etch_config *c) {
  free(c->categories);
  free(c->output);
  free(c->interceptor);
  free(c->flight);
  for (size_t i = 0; i < c->n_iopts; i++) {
    free(c->iopt_keys[i]);
    free(c->iopt_values[i]);
  }
  free(c->iopt_keys);
  free(c->iopt_values);
}

void etch_config_free(etch_config *c) {
  if (!c) return;
  etch__config_release(c);
  free(c);
}

static char *dup_or_null(const char *s, bool *failed) {
  if (!s) return NULL;
  char *d = etch__strdup(s);
  if (!d) *failed = true;
  return d;
}

int etch__config_copy(etch_config *dst, const etch_config *src) {
  *dst = *src;
  bool failed = false;
  dst->categories = dup_or_null(src->categories, &failed);
  dst->output = dup_or_null(src->output, &failed);
  dst->interceptor = dup_or_null(src->interceptor, &failed);
  dst->flight = dup_or_null(src->flight, &failed);
  dst->iopt_keys = dst->iopt_values = NULL;
  dst->n_iopts = 0;
  if (src->n_iopts) {
    dst->iopt_keys = (char **)etch__calloc(src->n_iopts, sizeof(char *));
    dst->iopt_values = (char **)etch__calloc(src->n_iopts, sizeof(char *));
    if (!dst->iopt_keys || !dst->iopt_values) failed = true;
    for (size_t i = 0; !failed && i < src->n_iopts; i++) {
      dst->iopt_keys[i] = dup_or_null(src->iopt_keys[i], &failed);
      dst->iopt_values[i] = dup_or_null(src->iopt_values[i], &failed);
      dst->n_iopts = i + 1;
    }
  }
  if (failed) {
    etch__config_release(dst);
    return etch__error(ETCH_ENOMEM, "config: out of memory");
  }
  return ETCH_OK;
}

/* interceptor.KEY=VALUE: kept for the interceptor's setup, which judges
 * it; a key set again replaces its value. */
static int set_interceptor_option(etch_config *cfg, const char *key,
                                  const char *value) {
  if (!*key)
    return etch__error(ETCH_EOPTION, "config: 'interceptor.' names no option");
  for (size_t i = 0; i < cfg->n_iopts; i++) {
    if (strcmp(cfg->iopt_keys[i], key) == 0) {
      char *v = etch__strdup(value);
      if (!v) return ETCH_ENOMEM;
      free(cfg->iopt_values[i]);
      cfg->iopt_values[i] = v;
      return ETCH_OK;
    }
  }
  char **k = (char **)etch__realloc(cfg->iopt_keys,
                              (cfg->n_iopts + 1) * sizeof(char *));
  if (!k) return ETCH_ENOMEM;
  cfg->iopt_keys = k;
  char **v = (char **)etch__realloc(cfg->iopt_values,
                              (cfg->n_iopts + 1) * sizeof(char *));
  if (!v) return ETCH_ENOMEM;
  cfg->iopt_values = v;
  char *kd = etch__strdup(key), *vd = etch__strdup(value);
  if (!kd || !vd) {
    free(kd);
    free(vd);
    return ETCH_ENOMEM;
  }
  k[cfg->n_iopts] = kd;
  v[cfg->n_iopts] = vd;
  cfg->n_iopts++;
  return ETCH_OK;
}

int etch_config_set(etch_config *cfg, const char *key, const char *value) {
  if (!cfg || !key || !value)
    return etch__error(ETCH_EINVAL, "etch_config_set: NULL argument");
  if (strncmp(key, "interceptor.", 12) == 0)
    return set_interceptor_option(cfg, key + 12, value);
  const option *o = NULL;
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(options); i++)
    if (strcmp(options[i].name, key) == 0) o = &options[i];
  if (!o) {
    char known[256] = "";
    for (size_t i = 0; i < ETCH_ARRAY_SIZE(options); i++) {
      strncat(known, options[i].name, sizeof known - strlen(known) - 1);
      if (i + 1 < ETCH_ARRAY_SIZE(options))
        strncat(known, ", ", sizeof known - strlen(known) - 1);
    }
    return etch__error(ETCH_EOPTION, "config: unknown option '%s' (known: %s)",
                       key, known);
  }
  char *base = (char *)cfg;
  switch (o->type) {
    case OPT_STRING: {
      if (strcmp(key, "categories") == 0) {
        etch_cat_filter f;
        int rc = etch__filter_parse(&f, value);
        if (rc) return rc;
        etch__filter_free(&f);
      }
      if (strcmp(key, "output") == 0 && !*value)
        return etch__error(ETCH_ECONFIG, "config: output: empty path");
      if (strcmp(key, "flight") == 0 && !*value)
        return etch__error(ETCH_ECONFIG, "config: flight: empty path");
      if (strcmp(key, "interceptor") == 0 && !*value)
        return etch__error(ETCH_ECONFIG, "config: interceptor: empty name");
      char *copy = etch__strdup(value);
      if (!copy) return ETCH_ENOMEM;
      char **slot = (char **)(base + o->off);
      free(*slot);
      *slot = copy;
      return ETCH_OK;
    }
    case OPT_UINT: {
      uint64_t x;
      if (etch__parse_u64(value, strlen(value), &x) != 0)
        return etch__error(ETCH_ECONFIG,
                           "config: %s: '%s' is not a non-negative integer",
                           key, value);
      if (x < o->min || x > o->max)
        return etch__error(ETCH_ECONFIG,
                           "config: %s: %llu is out of range [%llu, %llu]",
                           key, (unsigned long long)x,
                           (unsigned long long)o->min,
                           (unsigned long long)o->max);
      *(uint64_t *)(base + o->off) = x;
      return ETCH_OK;
    }
    case OPT_ENUM:
      for (uint32_t i = 0; o->values[i]; i++) {
        if (strcmp(o->values[i], value) == 0) {
          *(uint32_t *)(base + o->off) = i;
          return ETCH_OK;
        }
      }
      return etch__error(ETCH_ECONFIG, "config: %s: '%s' is not one of %s%s%s",
                         key, value, o->values[0], o->values[1] ? " | " : "",
                         o->values[1] ? o->values[1] : "");
  }
  return ETCH_EINVAL;
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t' || *s == '\r') s++;
  char *e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) *--e = '\0';
  return s;
}

int etch_config_parse(etch_config *cfg, const char *text) {
  if (!cfg || !text)
    return etch__error(ETCH_EINVAL, "etch_config_parse: NULL argument");
  char *copy = etch__strdup(text);
  if (!copy) return ETCH_ENOMEM;
  int rc = ETCH_OK;
  char *save = NULL;
  for (char *item = strtok_r(copy, ";\n", &save); item && rc == ETCH_OK;
       item = strtok_r(NULL, ";\n", &save)) {
    char *hash = strchr(item, '#');
    if (hash) *hash = '\0';
    item = trim(item);
    if (!*item) continue;
    char *eq = strchr(item, '=');
    if (!eq) {
      rc = etch__error(ETCH_ECONFIG, "config: '%s' is not key=value", item);
      break;
    }
    *eq = '\0';
    rc = etch_config_set(cfg, trim(item), trim(eq + 1));
  }
  free(copy);
  return rc;
}

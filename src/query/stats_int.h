/*
 * stats_int.h - what the etch stats report's files share (stats.c, and
 * stats_samples.c for its CPU-sample sections): the report being written,
 * its section titles, its JSON members and its tables' endings.
 */
#ifndef ETCH_QUERY_STATS_INT_H
#define ETCH_QUERY_STATS_INT_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "query/query.h"

typedef struct report {
  etch__db *db;
  FILE *out;
  const etch__stats_opts *o;
  const etch__stats_data *d;
  int rc;
  int64_t start, end; /* trace bounds; start > end: no events */
  bool first_section;
  bool json_first; /* no member written yet in the current JSON object */
} report;

static inline void section(report *r, const char *title) {
  if (!r->first_section) fputc('\n', r->out);
  r->first_section = false;
  fprintf(r->out, "%s\n", title);
}

/* ---- JSON helpers ------------------------------------------------------------ */

static inline void jkey(report *r, const char *key) {
  if (!r->json_first) fputc(',', r->out);
  r->json_first = false;
  etch__json_string(r->out, key, strlen(key));
  fputc(':', r->out);
}

static inline void jint(report *r, const char *key, int64_t v) {
  jkey(r, key);
  fprintf(r->out, "%lld", (long long)v);
}

static inline void jnum(report *r, const char *key, double v) {
  jkey(r, key);
  if (isfinite(v))
    fprintf(r->out, "%.17g", v);
  else
    fputs("null", r->out);
}

static inline void jstr(report *r, const char *key, const char *s) {
  jkey(r, key);
  if (s)
    etch__json_string(r->out, s, strlen(s));
  else
    fputs("null", r->out);
}

static inline void jopen(report *r, const char *key, char bracket) {
  if (key) jkey(r, key);
  else if (!r->json_first) fputc(',', r->out);
  fputc(bracket, r->out);
  r->json_first = true;
}

static inline void jclose(report *r, char bracket) {
  fputc(bracket, r->out);
  r->json_first = false;
}

static inline void list_end(report *r, etch__tt *t, const char *empty) {
  if (r->o->json) {
    jclose(r, ']');
    return;
  }
  if (etch__tt_rows(t))
    etch__tt_print(t, r->out, "  ", true);
  else
    fprintf(r->out, "  %s\n", empty);
  etch__tt_free(t);
}

/* The CPU samples' sections, when the trace has samples (stats_samples.c). */
void etch__stats_samples_section(report *r);

#endif /* ETCH_QUERY_STATS_INT_H */

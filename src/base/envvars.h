/*
 * envvars.h - every environment variable etch reads (libetch, etchd and
 * the etch command), in one table (envvars.c), and the one accessor its
 * readers use. Private.
 */
#ifndef ETCH_BASE_ENVVARS_H
#define ETCH_BASE_ENVVARS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The variables, in the table's order. */
typedef enum etch_env {
  ETCH_ENV_OUT,
  ETCH_ENV_CATEGORIES,
  ETCH_ENV_BUFFER_KB,
  ETCH_ENV_FILL,
  ETCH_ENV_DURATION_MS,
  ETCH_ENV_COMPRESSION,
  ETCH_ENV_FLIGHT,
  ETCH_ENV_FLIGHT_KEEP,
  ETCH_ENV_WRITE_PERIOD_MS,
  ETCH_ENV_SAMPLE,
  ETCH_ENV_CONFIG,
  ETCH_ENV_CHANNELS,
  ETCH_ENV_CONSOLE,
  ETCH_ENV_CONSOLE_COLOR,
  ETCH_ENV_CRASH_WAIT_MS,
  ETCH_ENV_IMPORTANT_KB,
  ETCH_ENV_CLOCK,
  ETCH_ENV_BACKEND,
  ETCH_ENV_SYSTEM_PAGE_KB,
  ETCH_ENV_SYSTEM_SMB_KB,
  ETCH_ENV_SYSTEM_EXIT_WAIT_MS,
  ETCH_ENV_SYSTEM_STALL_MS,
  ETCH_ENV_SYSTEM_WAIT_MS,
  ETCH_ENV_RECORD_DIR,
  ETCH_ENV__JOIN,
  ETCH_ENV_RELAY_CLOCK_SKEW_NS,
  ETCH_ENV_STORE,
  ETCH_ENV_CACHE_DIR,
  ETCH_ENV_PRODUCER_SOCK_NAME,
  ETCH_ENV_CONSUMER_SOCK_NAME,
  ETCH_ENV_RELAY_SOCK_NAME,
  ETCH_ENV_MACHINE_NAME,
  ETCH_ENV_MALLOC_LIB,
  ETCH_ENV_MALLOC_STACKS,
  ETCH_ENV_COUNT_
} etch_env;

typedef enum etch_env_type {
  ETCH_ENV_STRING,
  ETCH_ENV_BOOL,
  ETCH_ENV_NUM_COUNT,
  ETCH_ENV_SIZE,     /* KiB */
  ETCH_ENV_DURATION, /* ms */
  ETCH_ENV_ENUM,
} etch_env_type;

/* How a number's text is read (etch__env_number). Set by what each
 * variable always accepted. */
enum {
  /* Not read by etch__env_number: the value is a config option's and
   * etch_config_set judges it (a bad one is an error that stops
   * tracing). */
  ETCH_ENV_CONFIG_KEY = 1u << 0,
  /* The leading number counts and the rest is ignored (no digits: 0),
   * as strtol/strtoull read it; otherwise the whole value must be the
   * number. */
  ETCH_ENV_PREFIX = 1u << 1,
  /* Read as a signed long: a number too large is LONG_MAX. */
  ETCH_ENV_SIGNED = 1u << 2,
  /* An empty value is the default rather than a number. */
  ETCH_ENV_EMPTY_DEFAULT = 1u << 3,
  /* Set by libetch (or etch record) for itself, not by hand. */
  ETCH_ENV_PRIVATE = 1u << 4,
};

typedef struct etch_envvar {
  const char *name;
  etch_env_type type;
  unsigned flags;
  const char *config_key; /* ETCH_ENV_CONFIG_KEY: the option it sets */
  /* Numbers: the range; a value outside it (or unreadable) is the
   * default, unless the config judges it. */
  uint64_t min, max, dflt;
  const char *dflt_text; /* the default, as `etch env` shows it */
  const char *range;     /* enums and strings: what it may be; NULL for
                            numbers (min..max) */
  const char *doc;       /* one line */
} etch_envvar;

/* The table: ETCH_ENV_COUNT_ entries, in etch_env's order. */
extern const etch_envvar etch__envvars[ETCH_ENV_COUNT_];

/* The variable's value in the environment, or NULL when it is unset. */
const char *etch__env(etch_env id);
/* Whether it is set and not empty. */
bool etch__env_nonempty(etch_env id);
/* A number variable's value (the default when unset, unreadable or out of
 * range). */
uint64_t etch__env_number(etch_env id);
/* The number `text` gives variable `v`, as etch__env_number reads it: 0,
 * or -1 when the default applies. */
int etch__env_parse(const etch_envvar *v, const char *text, uint64_t *out);
/* "16..4194304", or the table's range text; into buf. */
const char *etch__env_range(const etch_envvar *v, char *buf, size_t cap);
/* "string", "size", ... */
const char *etch__env_type_name(etch_env_type t);

#endif

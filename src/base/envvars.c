/*
 * envvars.c - the environment variables etch reads: one table (name,
 * type, range, default, a line of doc) and the accessor every reader in
 * src/ and tools/ goes through. `etch env` prints the table and
 * docs/sdk.md lists it (tests/cli checks that they agree).
 *
 * Numbers are read by the options' parser (etch__parse_u64). How much of
 * the text counts and what a bad value does are each variable's own, as
 * they always were: a config option's variable is judged by
 * etch_config_set (an error stops tracing); the others fall back to their
 * default.
 *
 * In base, so that every part and tool (ipc's socket names, the query
 * part's cache, etchd's relay) reads its variables through it.
 */
#include "base/envvars.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"

#define NUM(lo, hi, d) (lo), (hi), (d)
#define NONUM 0, 0, 0

const etch_envvar etch__envvars[ETCH_ENV_COUNT_] = {
    [ETCH_ENV_OUT] = {"ETCH_OUT", ETCH_ENV_STRING, 0, NULL, NONUM, "unset",
                      "a path; %p: the pid",
                      "record the run into this file (unset: etch_init() "
                      "records nothing)"},
    [ETCH_ENV_CATEGORIES] = {"ETCH_CATEGORIES", ETCH_ENV_STRING,
                             ETCH_ENV_CONFIG_KEY, "categories", NONUM, "*",
                             "name, prefix*, *, -excluded, comma-separated",
                             "the categories recorded (option categories)"},
    [ETCH_ENV_BUFFER_KB] = {"ETCH_BUFFER_KB", ETCH_ENV_SIZE,
                            ETCH_ENV_CONFIG_KEY, "buffer_kb",
                            NUM(16, 4194304, 8192), "8192", NULL,
                            "the trace buffer in KiB (option buffer_kb)"},
    [ETCH_ENV_FILL] = {"ETCH_FILL", ETCH_ENV_ENUM, ETCH_ENV_CONFIG_KEY, "fill",
                       NONUM, "ring", "ring|discard|stall",
                       "what a full buffer does (option fill)"},
    [ETCH_ENV_DURATION_MS] = {"ETCH_DURATION_MS", ETCH_ENV_DURATION,
                              ETCH_ENV_CONFIG_KEY, "duration_ms",
                              NUM(0, 86400000ull * 365, 0), "0", NULL,
                              "stop recording after this many ms, 0: at exit "
                              "(option duration_ms)"},
    [ETCH_ENV_COMPRESSION] = {"ETCH_COMPRESSION", ETCH_ENV_ENUM,
                              ETCH_ENV_CONFIG_KEY, "compression", NONUM,
                              "deflate", "none|deflate",
                              "the trace file's compression (option "
                              "compression)"},
    [ETCH_ENV_FLIGHT] = {"ETCH_FLIGHT", ETCH_ENV_STRING, ETCH_ENV_CONFIG_KEY,
                         "flight", NONUM, "unset",
                         "a path; a name: in /dev/shm; 1: etch-%p.flight",
                         "flight recorder: the ring in this file, which a "
                         "process that dies leaves for etch recover (option "
                         "flight)"},
    [ETCH_ENV_FLIGHT_KEEP] = {"ETCH_FLIGHT_KEEP", ETCH_ENV_ENUM,
                              ETCH_ENV_CONFIG_KEY, "flight_keep", NONUM, "0",
                              "0|1",
                              "1: keep the flight file after a normal end "
                              "too (option flight_keep)"},
    [ETCH_ENV_WRITE_PERIOD_MS] = {"ETCH_WRITE_PERIOD_MS", ETCH_ENV_DURATION,
                                  ETCH_ENV_CONFIG_KEY, "write_period_ms",
                                  NUM(0, 86400000, 0), "0", NULL,
                                  "write ETCH_OUT while recording, this often "
                                  "in ms, 0: at exit (option "
                                  "write_period_ms)"},
    [ETCH_ENV_SAMPLE] = {"ETCH_SAMPLE", ETCH_ENV_NUM_COUNT, ETCH_ENV_CONFIG_KEY,
                         "sample_hz", NUM(0, 100000, 0), "0", NULL,
                         "sample the program's call stacks this many times a "
                         "second per thread, 0: off (option sample_hz)"},
    [ETCH_ENV_CONFIG] = {"ETCH_CONFIG", ETCH_ENV_STRING, 0, NULL, NONUM,
                         "unset", "key=value;key=value",
                         "any config options; the variables above are "
                         "applied after it"},
    [ETCH_ENV_CHANNELS] = {"ETCH_CHANNELS", ETCH_ENV_STRING, 0, NULL, NONUM,
                           "unset", "names and patterns, comma-separated",
                           "channels switched on for the whole run"},
    [ETCH_ENV_CONSOLE] = {"ETCH_CONSOLE", ETCH_ENV_ENUM, 0, NULL, NONUM, "0",
                          "0|1|stderr|stdout|fd:N",
                          "print the events as they happen (1: on stderr)"},
    [ETCH_ENV_CONSOLE_COLOR] = {"ETCH_CONSOLE_COLOR", ETCH_ENV_ENUM,
                                ETCH_ENV_CONFIG_KEY, "interceptor.color",
                                NONUM, "auto", "auto|always|never",
                                "colours of ETCH_CONSOLE (auto: on a "
                                "terminal, NO_COLOR unset)"},
    [ETCH_ENV_CRASH_WAIT_MS] = {"ETCH_CRASH_WAIT_MS", ETCH_ENV_DURATION,
                                ETCH_ENV_PREFIX | ETCH_ENV_EMPTY_DEFAULT, NULL,
                                NUM(0, UINT64_MAX, 2000), "2000", NULL,
                                "how long a crashing process waits for its "
                                "trace to be written"},
    [ETCH_ENV_IMPORTANT_KB] = {"ETCH_IMPORTANT_KB", ETCH_ENV_SIZE, 0, NULL,
                               NUM(0, 1ull << 22, 1024), "1024", NULL,
                               "memory kept for important events, in KiB"},
    [ETCH_ENV_CLOCK] = {"ETCH_CLOCK", ETCH_ENV_ENUM, 0, NULL, NONUM, "auto",
                        "auto|boottime",
                        "the timestamps' clock (boottime: never the TSC)"},
    [ETCH_ENV_BACKEND] = {"ETCH_BACKEND", ETCH_ENV_ENUM, 0, NULL, NONUM,
                          "inproc", "inproc|system",
                          "system: also trace into the etchd service's "
                          "sessions"},
    [ETCH_ENV_SYSTEM_PAGE_KB] = {"ETCH_SYSTEM_PAGE_KB", ETCH_ENV_SIZE,
                                 ETCH_ENV_PREFIX | ETCH_ENV_SIGNED, NULL,
                                 NUM(4, 32, 32), "32", "4|8|16|32",
                                 "system mode: the shared memory's page size "
                                 "asked for, in KiB"},
    [ETCH_ENV_SYSTEM_SMB_KB] = {"ETCH_SYSTEM_SMB_KB", ETCH_ENV_SIZE,
                                ETCH_ENV_PREFIX | ETCH_ENV_SIGNED, NULL,
                                NUM(256, 32768, 2048), "2048", NULL,
                                "system mode: the shared memory's size asked "
                                "for, in KiB"},
    [ETCH_ENV_SYSTEM_EXIT_WAIT_MS] = {"ETCH_SYSTEM_EXIT_WAIT_MS",
                                      ETCH_ENV_DURATION,
                                      ETCH_ENV_PREFIX | ETCH_ENV_SIGNED, NULL,
                                      NUM(0, 600000, 2000), "2000", NULL,
                                      "system mode: how long exit waits for "
                                      "room to report drops"},
    [ETCH_ENV_SYSTEM_STALL_MS] = {"ETCH_SYSTEM_STALL_MS", ETCH_ENV_DURATION,
                                  ETCH_ENV_PREFIX | ETCH_ENV_SIGNED, NULL,
                                  NUM(0, 10000, 0), "0", NULL,
                                  "system mode: how long a writer waits for "
                                  "room before it drops"},
    [ETCH_ENV_SYSTEM_WAIT_MS] = {"ETCH_SYSTEM_WAIT_MS", ETCH_ENV_DURATION,
                                 ETCH_ENV_PREFIX | ETCH_ENV_SIGNED, NULL,
                                 NUM(0, LONG_MAX, 0), "0", NULL,
                                 "system mode: how long the start waits for a "
                                 "session (etch record sets it)"},
    [ETCH_ENV_RECORD_DIR] = {"ETCH_RECORD_DIR", ETCH_ENV_STRING,
                             ETCH_ENV_PRIVATE, NULL, NONUM, "unset",
                             "an absolute path",
                             "etch record's run directory (etch record sets "
                             "it)"},
    [ETCH_ENV__JOIN] = {"ETCH__JOIN", ETCH_ENV_STRING, ETCH_ENV_PRIVATE, NULL,
                        NONUM, "unset", "private",
                        "the copy of libetch that records ETCH_OUT (libetch "
                        "sets it)"},
    [ETCH_ENV_RELAY_CLOCK_SKEW_NS] = {
        "ETCH_RELAY_CLOCK_SKEW_NS", ETCH_ENV_STRING, ETCH_ENV_PRIVATE, NULL,
        NONUM, "unset", "ns, signed",
        "a test hook of etchd --relay (not libetch's): its clock reads for "
        "SyncClock are off by this much"},
    [ETCH_ENV_STORE] = {"ETCH_STORE", ETCH_ENV_STRING, 0, NULL, NONUM,
                        "unset", "a path",
                        "the trace store of etch record, ls and ui (unset: "
                        "$XDG_DATA_HOME/etch/traces)"},
    [ETCH_ENV_CACHE_DIR] = {"ETCH_CACHE_DIR", ETCH_ENV_STRING, 0, NULL, NONUM,
                            "unset", "a path",
                            "the etch command's cache of tables (unset: "
                            "$XDG_CACHE_HOME/etch)"},
    [ETCH_ENV_PRODUCER_SOCK_NAME] = {
        "PERFETTO_PRODUCER_SOCK_NAME", ETCH_ENV_STRING, 0, NULL, NONUM,
        "unset", "NAME[,NAME...]",
        "the service's producer socket(s) (unset: "
        "$XDG_RUNTIME_DIR/etch/producer.sock)"},
    [ETCH_ENV_CONSUMER_SOCK_NAME] = {
        "PERFETTO_CONSUMER_SOCK_NAME", ETCH_ENV_STRING, 0, NULL, NONUM,
        "unset", "a path or @NAME",
        "the service's consumer socket (unset: "
        "$XDG_RUNTIME_DIR/etch/consumer.sock)"},
    [ETCH_ENV_RELAY_SOCK_NAME] = {"PERFETTO_RELAY_SOCK_NAME", ETCH_ENV_STRING,
                                  0, NULL, NONUM, "unset", "HOST:PORT",
                                  "etchd --relay's host service when the flag "
                                  "names none"},
    [ETCH_ENV_MACHINE_NAME] = {"PERFETTO_MACHINE_NAME", ETCH_ENV_STRING, 0,
                               NULL, NONUM, "unset", "a name",
                               "the machine's name etchd reports, as host or "
                               "relay (unset: the kernel's)"},
    [ETCH_ENV_MALLOC_LIB] = {"ETCH_MALLOC_LIB", ETCH_ENV_STRING, 0, NULL,
                             NONUM, "unset", "a path",
                             "the libetch_malloc.so etch record --malloc "
                             "preloads (unset: the one beside etch)"},
    [ETCH_ENV_MALLOC_STACKS] = {"ETCH_MALLOC_STACKS", ETCH_ENV_BOOL, 0, NULL,
                                NONUM, "1", "0|1",
                                "libetch_malloc.so: a call stack on every "
                                "allocation"},
};

const char *etch__env(etch_env id) {
  return etch__getenv(etch__envvars[id].name);
}

bool etch__env_nonempty(etch_env id) {
  const char *v = etch__env(id);
  return v && *v;
}

/*
 * What strtoull (or strtol, ETCH_ENV_SIGNED) reads of `text`, with the
 * digits read by etch__parse_u64: spaces, a sign, the digits; the whole
 * text, or (ETCH_ENV_PREFIX) its leading number, where no digits are 0.
 */
int etch__env_parse(const etch_envvar *v, const char *text, uint64_t *out) {
  if (!*text && (v->flags & ETCH_ENV_EMPTY_DEFAULT)) return -1;
  const char *p = text;
  while (*p == ' ' || (*p >= '\t' && *p <= '\r')) p++;
  bool neg = false;
  if (*p == '+' || *p == '-') neg = *p++ == '-';
  size_t n = strspn(p, "0123456789");
  if (!(v->flags & ETCH_ENV_PREFIX) && (!n || p[n])) return -1;
  uint64_t x = 0;
  if (n && etch__parse_u64(p, n, &x) != 0) { /* too large */
    if (v->flags & ETCH_ENV_SIGNED) {
      if (neg) return -1;
      x = LONG_MAX;
    } else {
      x = UINT64_MAX; /* strtoull: even with a sign */
      neg = false;
    }
  } else if ((v->flags & ETCH_ENV_SIGNED) && x > (uint64_t)LONG_MAX + neg) {
    if (neg) return -1;
    x = LONG_MAX;
  }
  if (neg && x) { /* strtol: below every range; strtoull: wraps around */
    if (v->flags & ETCH_ENV_SIGNED) return -1;
    x = 0 - x;
  }
  *out = x;
  return 0;
}

uint64_t etch__env_number(etch_env id) {
  const etch_envvar *v = &etch__envvars[id];
  const char *text = etch__getenv(v->name);
  uint64_t x;
  if (!text || etch__env_parse(v, text, &x) != 0 || x < v->min || x > v->max)
    return v->dflt;
  return x;
}

const char *etch__env_range(const etch_envvar *v, char *buf, size_t cap) {
  if (v->range) return v->range;
  if (v->max == UINT64_MAX)
    snprintf(buf, cap, "%llu..", (unsigned long long)v->min);
  else
    snprintf(buf, cap, "%llu..%llu", (unsigned long long)v->min,
             (unsigned long long)v->max);
  return buf;
}

const char *etch__env_type_name(etch_env_type t) {
  switch (t) {
    case ETCH_ENV_STRING: return "string";
    case ETCH_ENV_BOOL: return "bool";
    case ETCH_ENV_NUM_COUNT: return "count";
    case ETCH_ENV_SIZE: return "size";
    case ETCH_ENV_DURATION: return "duration";
    case ETCH_ENV_ENUM: return "enum";
  }
  return "?";
}

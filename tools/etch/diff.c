/*
 * diff.c - etch diff: two traces compared slice name by slice name, the
 * largest change first (the query part's etch__diff_files).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

typedef struct diff_args {
  bool json, no_cache;
  int limit; /* 0: all */
  etch__diff_sort sort;
} diff_args;

static int diff_limit(const command *cmd, const char *opt, const char *value,
                      void *args) {
  return cli_count(cmd, opt, value, 0, &((diff_args *)args)->limit);
}

static int diff_sort(const command *cmd, const char *opt, const char *value,
                     void *args) {
  if (etch__diff_sort_parse(value, &((diff_args *)args)->sort) != ETCH_OK)
    return usage_error(cmd, "%s: '%s' is not a sort key (total, self, count, "
                            "mean, p50, p99, name)", opt, value);
  return 0;
}

/* A trace of the store may be named by its name alone, with or without
 * its ".pftrace". */
static const char *resolve(const char *arg, char *buf, size_t n) {
  if (access(arg, F_OK) == 0 || !etch__store_name_ok(arg)) return arg;
  char dir[4096], name[300];
  if (etch__store_dir(dir, sizeof dir) != ETCH_OK) return arg;
  if (etch__store_path(dir, arg, buf, n) == ETCH_OK && access(buf, F_OK) == 0)
    return buf;
  int k = snprintf(name, sizeof name, "%s.pftrace", arg);
  if (k > 0 && (size_t)k < sizeof name &&
      etch__store_path(dir, name, buf, n) == ETCH_OK && access(buf, F_OK) == 0)
    return buf;
  return arg;
}

/* B's cache, on a thread of its own (build_caches). */
typedef struct cache_job {
  const char *trace;
  etch__import_opts o;
} cache_job;

static void *build_cache(void *arg) {
  cache_job *j = (cache_job *)arg;
  char file[4300];
  bool imported;
  etch__query_cache_file(j->trace, NULL, &j->o, file, sizeof file, &imported);
  return NULL;
}

/*
 * The caches of A and B built at once, B's on a second thread while this
 * one builds A's (two DuckDB databases, one per thread): on two cores the
 * first diff of two new traces takes about one import's time, not two.
 * Errors are not reported here: whatever fails, the diff then builds that
 * cache itself and says why. Only for two different trace files (a
 * database written by --db has no cache).
 */
static void build_caches(const char *a, const char *b,
                         const etch__import_opts *io) {
  char ra[PATH_MAX], rb[PATH_MAX];
  if (!realpath(a, ra) || !realpath(b, rb) || !strcmp(ra, rb) ||
      etch__query_is_db_file(a) || etch__query_is_db_file(b))
    return;
  char file[4300];
  bool imported;
  /* A trace cut short is said once, by the diff that reads its cache. */
  etch__import_opts o = *io;
  o.quiet = true;
  cache_job jb = {b, o};
  jb.o.progress = false; /* one progress line: this thread's */
  pthread_t th;
  bool started = pthread_create(&th, NULL, build_cache, &jb) == 0;
  etch__query_cache_file(a, NULL, &o, file, sizeof file, &imported);
  if (started) pthread_join(th, NULL);
}

static int cmd_diff(int argc, char **argv) {
  const command *cmd = &cli_diff;
  diff_args da = {.limit = 20};
  opts o;
  int rc = 0;
  if (!cli_parse(cmd, argc, argv, &da, &o, &rc)) return rc;
  if (o.noperands != 2)
    rc = usage_error(cmd, o.noperands < 2 ? "diff takes two traces, A and B"
                                          : "too many arguments");
  char pa[4352], pb[4352];
  const char *a = NULL, *b = NULL;
  if (!rc) {
    a = resolve(o.operands[0], pa, sizeof pa);
    b = resolve(o.operands[1], pb, sizeof pb);
    rc = check_readable(a);
    if (!rc) rc = check_readable(b);
  }
  etch__diff d = {0};
  if (!rc) {
    etch__import_opts io = {.all_args = true,
                            .progress = isatty(STDERR_FILENO) != 0,
                            .allow_truncated = !g_strict,
                            .strict = g_strict};
    if (!da.no_cache && !g_strict) build_caches(a, b, &io);
    const char *failed = NULL;
    int st = etch__diff_files(a, b, NULL, da.no_cache || g_strict, &io,
                              da.sort, &d, &failed);
    if (st != ETCH_OK)
      rc = failed ? trace_error(failed, st)
                  : runtime_error("%s", etch_last_error());
  }
  if (!rc)
    etch__diff_print(&d, stdout, da.limit ? (size_t)da.limit : SIZE_MAX,
                     da.json, o.operands[0], o.operands[1], da.sort);
  etch__diff_free(&d);
  opts_free(&o);
  return rc;
}

static const cli_opt kDiffOpts[] = {
    {0, "--sort", "KEY",
     "order by the change of: total (default), self\n"
     "(total minus the time in child slices), count,\n"
     "mean, p50, p99; or by name",
     CLI_FN(diff_sort)},
    {'n', "--limit", "N", "rows shown (default 20; 0: all)",
     CLI_FN(diff_limit)},
    {0, "--json", NULL, "machine-readable output (every row unless --limit)",
     CLI_BOOL(diff_args, json)},
    {0, "--no-cache", NULL,
     "read the traces into memory; neither use nor write\n"
     "their caches",
     CLI_BOOL(diff_args, no_cache)},
    CLI_STRICT("a trace cut short or a malformed packet is an error,\n"
               "not a warning"),
    {0},
};

const command cli_diff = {
    .name = "diff",
    .fn = cmd_diff,
    .summary = "compare two traces: slices by name, largest change first",
    .synopsis = "etch diff [--sort KEY] [--limit N] [--json] [--no-cache] "
                "[--strict] A B\n",
    .about =
        "Compares trace B with trace A slice name by slice name: count, total,\n"
        "self time, mean, p50 and p99 of the durations in each, and the\n"
        "change of the total, the largest change first, so that what got\n"
        "slower (or faster, or appeared, or went away) between two runs is\n"
        "at the top. A slice's self time is its duration minus its child\n"
        "slices': --sort self puts the function that got slower above its\n"
        "callers, whose totals grew as much.\n"
        "Slices count when they ended (an instant as a slice of 0 ns; one\n"
        "still open at the end of its trace is left out). A and B are trace\n"
        "files, databases written by etch query --db, or names of traces in\n"
        "the trace store (etch ls; \".pftrace\" may be left out). The\n"
        "traces' tables are cached as etch query caches them, so a second\n"
        "diff of the same traces reads neither.\n",
    .opts = kDiffOpts,
    .more = "Example:\n"
            "  etch diff before.pftrace after.pftrace\n"
            "  etch diff --sort p99 --limit 5 before.pftrace after.pftrace\n"
            "  etch diff --sort self 20261127-031500-app 20261128-101010-app\n",
};

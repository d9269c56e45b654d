/*
 * stats.c - etch stats: where the time went (top slices, threads,
 * counters, data loss).
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "cli.h"
#include "query/zone.h"

/* etch stats' options: the report's, and --slice's. */
typedef struct stats_args {
  etch__stats_opts so; /* first: --top's parser takes it as the whole */
  const char *slice;
  int buckets;
} stats_args;

static int stats_report(const char *path, FILE *out, const void *arg) {
  return etch__query_stats_file(path, out, (const etch__stats_opts *)arg);
}

/*
 * The stats report of a database written by `etch query --db` (from its
 * tables), or of a trace (computed while reading it, without a database).
 * `to`: stdout for etch stats, stderr for etch record's summary.
 */
int stats_of(const char *path, const etch__stats_opts *so, FILE *to) {
  int rc = check_readable(path);
  if (rc) return rc;
  if (etch__query_is_db_file(path)) {
    etch__db *db = NULL;
    rc = load(path, NULL, false, &db);
    if (!rc && etch__query_stats(db, to, so) != ETCH_OK)
      rc = runtime_error("%s", etch_last_error());
    etch__db_close(db);
    return rc;
  }
  etch__stats_opts sopts = *so;
  sopts.allow_truncated = !g_strict;
  sopts.strict = g_strict;
  return print_whole(stats_report, path, &sopts, to);
}

static int stats_top(const command *cmd, const char *opt, const char *value,
                     void *args) {
  return cli_count(cmd, opt, value, 1, &((etch__stats_opts *)args)->top);
}

static int stats_buckets(const command *cmd, const char *opt,
                         const char *value, void *args) {
  stats_args *a = args;
  int rc = cli_count(cmd, opt, value, 1, &a->buckets);
  if (!rc && a->buckets > ETCH__ZONE_MAX_BUCKETS)
    return usage_error(cmd, "%s: at most %d", opt, ETCH__ZONE_MAX_BUCKETS);
  return rc;
}

/*
 * --slice NAME: the durations of the slices of that name (query/zone.h),
 * from the trace's tables (its cache), printed whole once computed.
 */
static int slice_zone(const char *path, const stats_args *a) {
  int rc = check_readable(path);
  if (rc) return rc;
  etch__db *db = NULL;
  rc = load(path, NULL, false, &db);
  if (rc) return rc;
  etch__zone z;
  if (etch__zone_of(db, a->slice, a->buckets, &z) != ETCH_OK)
    rc = runtime_error("%s", etch_last_error());
  etch__db_close(db);
  if (rc) return rc;
  if (a->so.json) {
    etch__zone_json(&z, a->slice, stdout);
    fputc('\n', stdout);
  } else {
    etch__zone_print(&z, a->slice, stdout);
  }
  etch__zone_free(&z);
  return 0;
}

static int cmd_stats(int argc, char **argv) {
  stats_args a = {.so = {.top = 10}, .buckets = ETCH__ZONE_BUCKETS};
  opts o;
  int rc = 0;
  if (!cli_parse(&cli_stats, argc, argv, &a, &o, &rc)) return rc;
  rc = cli_one_trace(&cli_stats, &o);
  if (!rc && a.slice) rc = slice_zone(o.operands[0], &a);
  else if (!rc) rc = stats_of(o.operands[0], &a.so, stdout);
  opts_free(&o);
  return rc;
}

static const cli_opt kStatsOpts[] = {
    {'n', "--top", "N", "rows in the top-slices tables (default 10)",
     CLI_FN(stats_top)},
    {0, "--compact", NULL,
     "only the summary, top slices by total time, data loss",
     CLI_BOOL(stats_args, so.compact)},
    {0, "--json", NULL, "machine-readable output",
     CLI_BOOL(stats_args, so.json)},
    {0, "--slice", "NAME",
     "the durations of the slices named NAME instead: count, min,\n"
     "p50, p90, p99 (nearest rank), max and a histogram",
     CLI_STR(stats_args, slice)},
    {0, "--buckets", "N",
     "--slice's histogram: at most N buckets of equal width (default 40)",
     CLI_FN(stats_buckets)},
    CLI_STRICT("a trace cut short or a malformed packet is an error\n"
               "(default: a warning, and the rest is read)"),
    {0},
};

const command cli_stats = {
    .name = "stats",
    .fn = cmd_stats,
    .summary = "where the time went: top slices, threads, counters, data loss",
    .synopsis = "etch stats [--top N] [--compact] [--json] [--strict] TRACE\n"
                "etch stats --slice NAME [--buckets N] [--json] TRACE\n",
    .about =
        "Prints the trace's duration and contents, the top slices by total and\n"
        "by self time, busy time per thread, counter summaries and every data\n"
        "loss the trace records. A trace with CPU samples (etch record\n"
        "--sample) adds the functions they were in, by self samples (the\n"
        "innermost frame) and by total samples (anywhere on the stack).\n"
        "\n"
        "With --slice NAME, the durations of the slices of that name that\n"
        "ended (as the viewer's Find zone shows them): count, min, p50, p90,\n"
        "p99 and max in ns, pK the ceil(K * count / 100)-th smallest duration\n"
        "(nearest rank: a duration that occurs), and a histogram of buckets of\n"
        "equal width from min to max, each [lo, hi) (the last one's hi is\n"
        "max + 1), their counts adding up to the count.\n",
    .opts = kStatsOpts,
};

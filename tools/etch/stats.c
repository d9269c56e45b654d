/*
 * stats.c - etch stats: where the time went (top slices, threads,
 * counters, data loss).
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "cli.h"

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

static int cmd_stats(int argc, char **argv) {
  etch__stats_opts so = {.top = 10};
  opts o;
  int rc = 0;
  if (!cli_parse(&cli_stats, argc, argv, &so, &o, &rc)) return rc;
  rc = cli_one_trace(&cli_stats, &o);
  if (!rc) rc = stats_of(o.operands[0], &so, stdout);
  opts_free(&o);
  return rc;
}

static const cli_opt kStatsOpts[] = {
    {'n', "--top", "N", "rows in the top-slices tables (default 10)",
     CLI_FN(stats_top)},
    {0, "--compact", NULL,
     "only the summary, top slices by total time, data loss",
     CLI_BOOL(etch__stats_opts, compact)},
    {0, "--json", NULL, "machine-readable output",
     CLI_BOOL(etch__stats_opts, json)},
    CLI_STRICT("a trace cut short or a malformed packet is an error\n"
               "(default: a warning, and the rest is read)"),
    {0},
};

const command cli_stats = {
    .name = "stats",
    .fn = cmd_stats,
    .summary = "where the time went: top slices, threads, counters, data loss",
    .synopsis = "etch stats [--top N] [--compact] [--json] [--strict] TRACE\n",
    .about =
        "Prints the trace's duration and contents, the top slices by total and\n"
        "by self time, busy time per thread, counter summaries and every data\n"
        "loss the trace records.\n",
    .opts = kStatsOpts,
};

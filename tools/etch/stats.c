/*
 * stats.c - etch stats: where the time went (top slices, threads,
 * counters, data loss).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  if (etch__query_is_sqlite_file(path)) {
    sqlite3 *db = NULL;
    rc = load(path, NULL, false, false, &db);
    if (!rc && etch__query_stats(db, to, so) != ETCH_OK)
      rc = runtime_error("%s", etch_last_error());
    sqlite3_close(db);
    return rc;
  }
  etch__stats_opts sopts = *so;
  sopts.allow_truncated = !g_strict;
  return print_whole(stats_report, path, &sopts, to);
}

static int cmd_stats(int argc, char **argv) {
  const command *cmd = &cli_stats;
  opts o;
  int rc = opts_init(&o, argc, argv, false);
  if (rc) return rc;
  etch__stats_opts so = {.top = 10};
  const char *opt;
  while (!rc && (opt = next_opt(&o))) {
    if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
      free(o.operands);
      return print_help(cmd);
    } else if (!strcmp(opt, "--json")) {
      so.json = true;
    } else if (!strcmp(opt, "--compact")) {
      so.compact = true;
    } else if (!strcmp(opt, "--strict")) {
      g_strict = true;
    } else if (is_opt(opt, "-n") || is_opt(opt, "--top")) {
      rc = top_value(&o, opt, cmd, 1, &so.top);
    } else {
      rc = usage_error(cmd, "unknown option %s", opt);
    }
  }
  if (!rc && o.noperands != 1)
    rc = usage_error(cmd, o.noperands ? "too many arguments"
                                      : "missing the trace file");
  if (!rc) rc = stats_of(o.operands[0], &so, stdout);
  free(o.operands);
  return rc;
}

const command cli_stats = {
    "stats", cmd_stats,
    "where the time went: top slices, threads, counters, data loss",
    "etch stats [--top N] [--compact] [--json] [--strict] TRACE\n"
    "\n"
    "Prints the trace's duration and contents, the top slices by total and\n"
    "by self time, busy time per thread, counter summaries and every data\n"
    "loss the trace records.\n"
    "\n"
    "  -n, --top N   rows in the top-slices tables (default 10)\n"
    "  --compact     only the summary, top slices by total time, data loss\n"
    "  --json        machine-readable output\n"
    "  --strict      a trace cut short is an error (default: a warning, and\n"
    "                what precedes the cut is read)\n"};

/*
 * load.c - etch load: traces into ClickHouse tables shaped like etch
 * query's, for SQL across a fleet's traces (etch query --clickhouse).
 * The work is the fleet part's (src/fleet).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#ifdef ETCH_HAVE_FLEET
#include "fleet/fleet.h"
#endif

typedef struct load_args {
  const char *url, *database, *host, *cluster;
  int jobs;
  size_t batch;
  bool schema, quiet;
} load_args;

static int set_jobs(const command *cmd, const char *opt, const char *value,
                    void *args) {
  int rc = cli_count(cmd, opt, value, 1, &((load_args *)args)->jobs);
  if (!rc && ((load_args *)args)->jobs > 64)
    rc = usage_error(cmd, "%s: at most 64", opt);
  return rc;
}

/* --batch BYTES: 4 KiB to 1 GiB, in bytes or with a unit (128MB). */
static int set_batch(const command *cmd, const char *opt, const char *value,
                     void *args) {
  uint64_t v;
  if (etch__parse_size(value, 1, 4096, 1ull << 30, &v) != 0)
    return usage_error(cmd, "%s: a size from 4KB to 1GB (bytes, or with a "
                            "unit: 128MB), not '%s'", opt, value);
  ((load_args *)args)->batch = (size_t)v;
  return 0;
}

static int cmd_load(int argc, char **argv) {
  const command *cmd = &cli_load;
  load_args la = {0};
  opts o;
  int rc = 0;
  if (!cli_parse(cmd, argc, argv, &la, &o, &rc)) return rc;
#ifndef ETCH_HAVE_FLEET
  (void)la;
  rc = runtime_error("this etch was built without libcurl: no etch load "
                     "(install libcurl's development files and rebuild)");
#else
  const char *db = la.database ? la.database : "etch";
  if (!etch__ch_ident_ok(db))
    rc = usage_error(cmd, "%s: not a database name (letters, digits, _)", db);
  if (!rc && la.cluster && !etch__ch_ident_ok(la.cluster))
    rc = usage_error(cmd, "%s: not a cluster name (letters, digits, _)",
                     la.cluster);
  if (!rc && la.schema) {
    if (o.noperands)
      rc = usage_error(cmd, "--print-schema takes no trace");
    else
      etch__ch_schema_sql(stdout, db,
                          la.cluster ? ETCH__CH_SHARDED : ETCH__CH_LOCAL,
                          la.cluster);
    opts_free(&o);
    return rc;
  }
  if (!rc && la.cluster) rc = usage_error(cmd, "--cluster goes with --print-schema");
  if (!rc && !la.url) rc = usage_error(cmd, "missing --clickhouse URL");
  if (!rc && o.noperands < 1) rc = usage_error(cmd, "missing the traces");
  if (!rc) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    etch__load_opts lo = {
        .url = la.url,
        .database = db,
        .host = la.host,
        .jobs = la.jobs ? la.jobs : (int)(ncpu > 4 ? 4 : ncpu < 1 ? 1 : ncpu),
        .progress = !la.quiet && isatty(STDERR_FILENO),
        .allow_truncated = !g_strict,
        .batch_bytes = la.batch,
    };
    etch__load_totals tot;
    int st = etch__fleet_load((const char *const *)o.operands,
                              (size_t)o.noperands, &lo, &tot);
    if (!la.quiet && (tot.loaded || tot.present || tot.failed))
      fprintf(stderr,
              "etch: load: %zu loaded, %zu there already, %zu failed; %" PRIu64
              " events, %" PRIu64 " rows in %.2f s (%.2f M events/s)\n",
              tot.loaded, tot.present, tot.failed, tot.events, tot.rows,
              tot.seconds,
              tot.seconds > 0 ? (double)tot.events / tot.seconds / 1e6 : 0.0);
    if (st != ETCH_OK) rc = runtime_error("%s", etch_last_error());
  }
#endif
  opts_free(&o);
  return rc;
}

static const cli_opt kLoadOpts[] = {
    {0, "--clickhouse", "URL",
     "the server's HTTP interface, http://HOST:8123 (a user and\n"
     "password: http://USER:PASSWORD@HOST:8123)",
     CLI_STR(load_args, url)},
    {0, "--database", "NAME", "the database (default etch), created if missing",
     CLI_STR(load_args, database)},
    {0, "--host", "NAME", "the host the traces were recorded on (their\n"
                          "`host` in the trace table)",
     CLI_STR(load_args, host)},
    {'j', "--jobs", "N", "files loaded at once (default: the cores, at most 4)",
     CLI_FN(set_jobs)},
    {0, "--batch", "BYTES",
     "rows sent per INSERT and table, in RowBinary bytes, or\n"
     "with a unit: 64MB (default 128MB; 4KB to 1GB)",
     CLI_FN(set_batch)},
    {'q', "--quiet", NULL, "no progress and no summary on stderr",
     CLI_BOOL(load_args, quiet)},
    {0, "--print-schema", NULL,
     "print the tables' CREATE statements, load nothing",
     CLI_BOOL(load_args, schema)},
    {0, "--cluster", "NAME",
     "with --print-schema: the tables of the sharded cluster\n"
     "NAME (remote_servers): <table>_local on every shard and\n"
     "a Distributed <table> over them",
     CLI_STR(load_args, cluster)},
    CLI_STRICT("a trace cut short or a malformed packet is an error,\n"
               "not a warning"),
    {0},
};

const command cli_load = {
    .name = "load",
    .fn = cmd_load,
    .summary = "load traces into ClickHouse, for SQL across many",
    .synopsis = "etch load --clickhouse URL [--database NAME] [--host NAME] "
                "[-j N] [--batch BYTES] [-q] [--strict] TRACE...\n"
                "       etch load --print-schema [--database NAME] "
                "[--cluster NAME]\n",
    .about =
        "Imports each TRACE as etch query does and inserts its rows into\n"
        "ClickHouse tables of the same names and columns plus a first column\n"
        "trace_id (a hash of the trace's bytes), and a row of metadata in the\n"
        "table `trace` (file name, host, start, duration, etch version, size,\n"
        "events). Creates the database and tables on first use. A trace\n"
        "loaded before is skipped; one that fails to load is reported by name\n"
        "and the others still load. Exit status 1 unless every trace loaded\n"
        "(or was there already). Query them with etch query --clickhouse URL.\n",
    .opts = kLoadOpts,
    .more =
        "Example:\n"
        "  etch load --clickhouse http://127.0.0.1:8123 traces/*.pftrace\n"
        "  etch query --clickhouse http://127.0.0.1:8123 \\\n"
        "    \"select trace_id, count() from slice group by trace_id\"\n",
};

/*
 * query.c - etch query: SQL over the trace's tables.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/containers.h"
#include "cli.h"
#ifdef ETCH_HAVE_FLEET
#include "fleet/fleet.h"
#endif

static char *read_all(FILE *f) {
  etch_vec v = {0};
  size_t r;
  do {
    if (etch__vec_reserve(&v, 4096)) {
      etch__vec_free(&v);
      return NULL;
    }
    r = fread(v.data + v.len, 1, v.cap - v.len, f);
    v.len += r;
  } while (r > 0);
  if (etch__vec_cstr(&v)) {
    etch__vec_free(&v);
    return NULL;
  }
  return (char *)v.data;
}

typedef struct query_args {
  bool csv, no_cache;
  const char *file, *db_path;
  const char *clickhouse, *database;
} query_args;

/* After a trace, an argument with blanks is the SQL even when it starts
 * with '-' (an SQL comment: "-- why\nselect ..."); options have none. */
static bool sql_operand(const char *arg, int noperands) {
  return noperands >= 1 && strpbrk(arg, " \t\n\r");
}

/* Whether the operand is a file (a trace or a database) rather than SQL. */
static bool is_file(const char *arg) {
  struct stat sb;
  return stat(arg, &sb) == 0;
}

/* Several traces: their tables side by side, with a `trace` column. */
static int load_several(const char *const *paths, size_t n, bool no_cache,
                        etch__db **db) {
  for (size_t i = 0; i < n; i++) {
    int rc = check_readable(paths[i]);
    if (rc) return rc;
  }
  etch__import_opts o = {.all_args = true,
                         .progress = isatty(STDERR_FILENO) != 0,
                         .allow_truncated = !g_strict,
                         .strict = g_strict};
  const char *failed = NULL;
  int st = etch__query_open_traces(paths, n, NULL, no_cache || g_strict, &o,
                                   db, &failed);
  if (st == ETCH_OK) return EXIT_OK;
  return failed ? trace_error(failed, st)
                : runtime_error("%s", etch_last_error());
}

/* etch query --clickhouse URL [SQL]: the statements run on the server, in
 * the database etch load fills. */
static int query_clickhouse(const command *cmd, const query_args *qa,
                            const opts *o, etch__out_mode mode) {
#ifndef ETCH_HAVE_FLEET
  (void)cmd, (void)qa, (void)o, (void)mode;
  return runtime_error("this etch was built without libcurl: no --clickhouse "
                       "(install libcurl's development files and rebuild)");
#else
  if (o->noperands > 1)
    return usage_error(cmd, "--clickhouse takes the SQL only, no trace");
  if (o->noperands == 1 && qa->file)
    return usage_error(cmd, "give the SQL either as an argument or with -f");
  if (qa->db_path || qa->no_cache)
    return usage_error(cmd, "--db and --no-cache are for traces, not --clickhouse");
  const char *db = qa->database ? qa->database : "etch";
  if (!etch__ch_ident_ok(db))
    return usage_error(cmd, "%s: not a database name (letters, digits, _)", db);
  char *sql = NULL;
  int rc = 0;
  if (qa->file || o->noperands == 0) {
    const char *file = qa->file ? qa->file : "-";
    FILE *f = !strcmp(file, "-") ? stdin : fopen(file, "r");
    if (!f) return runtime_error("%s: %s", file, strerror(errno));
    sql = read_all(f);
    if (f != stdin) fclose(f);
    if (!sql) return runtime_error("%s: cannot read", file);
  }
  etch__ch *ch = NULL;
  if (etch__ch_global_init() != ETCH_OK ||
      etch__ch_open(&ch, qa->clickhouse, db) != ETCH_OK)
    rc = runtime_error("%s", etch_last_error());
  if (!rc && etch__fleet_query(ch, sql ? sql : o->operands[0], stdout, mode) !=
                 ETCH_OK)
    rc = runtime_error("%s", etch_last_error());
  etch__ch_close(ch);
  free(sql);
  return rc;
#endif
}

static int cmd_query(int argc, char **argv) {
  const command *cmd = &cli_query;
  query_args qa = {0};
  opts o;
  int rc = 0;
  if (!cli_parse(cmd, argc, argv, &qa, &o, &rc)) return rc;
  etch__out_mode mode = qa.csv ? ETCH__OUT_CSV : ETCH__OUT_TABLE;
  g_no_cache = qa.no_cache;
  if (qa.clickhouse) {
    rc = query_clickhouse(cmd, &qa, &o, mode);
    opts_free(&o);
    return rc;
  }
  if (qa.database)
    rc = usage_error(cmd, "--database goes with --clickhouse");
  if (!rc && o.noperands < 1) rc = usage_error(cmd, "missing the trace file");
  /* The last operand is the SQL when there are several and it names no
   * file; the others are traces. */
  int ntraces = o.noperands;
  if (!rc && o.noperands >= 2 && !is_file(o.operands[o.noperands - 1]))
    ntraces--;
  if (!rc && ntraces < o.noperands && qa.file)
    rc = usage_error(cmd, "give the SQL either as an argument or with -f");
  if (!rc && qa.db_path && ntraces > 1)
    rc = usage_error(cmd, "--db takes one trace");
  /* Words of unquoted SQL look like traces that do not exist. */
  for (int i = 1; !rc && i < ntraces; i++)
    if (!is_file(o.operands[i]))
      rc = usage_error(cmd, "%s: no such trace (quote the SQL)",
                       o.operands[i]);
  char *sql = NULL;
  if (!rc && qa.file) {
    const char *file = qa.file;
    FILE *f = !strcmp(file, "-") ? stdin : fopen(file, "r");
    if (!f) {
      rc = runtime_error("%s: %s", file, strerror(errno));
    } else {
      sql = read_all(f);
      if (f != stdin) fclose(f);
      if (!sql) rc = runtime_error("%s: cannot read", file);
    }
  }
  etch__db *db = NULL;
  if (!rc && ntraces == 1) rc = load(o.operands[0], qa.db_path, true, &db);
  if (!rc && ntraces > 1)
    rc = load_several((const char *const *)o.operands, (size_t)ntraces,
                      qa.no_cache, &db);
  if (!rc) {
    const char *text = sql                      ? sql
                       : ntraces < o.noperands ? o.operands[ntraces]
                                               : NULL;
    if (!text && isatty(STDIN_FILENO)) {
      etch__query_shell(db, stdin, stdout, mode);
    } else {
      if (!text) text = sql = read_all(stdin);
      if (text && etch__query_run_sql(db, text, stdout, mode) != ETCH_OK)
        rc = runtime_error("%s", etch_last_error());
    }
  }
  if (etch__db_close(db) != ETCH_OK && !rc)
    rc = runtime_error("closing the database: %s", etch_last_error());
  free(sql);
  opts_free(&o);
  return rc;
}

static const cli_opt kQueryOpts[] = {
    {0, "--csv", NULL, "CSV output (RFC 4180 quoting) instead of a table",
     CLI_BOOL(query_args, csv)},
    {'f', "--file", "FILE", "run the statements in FILE ('-' = stdin)",
     CLI_STR(query_args, file)},
    {0, "--db", "PATH", "build the database in PATH and keep it",
     CLI_STR(query_args, db_path)},
    {0, "--no-cache", NULL,
     "read the trace into memory; neither use nor write its cache",
     CLI_BOOL(query_args, no_cache)},
    CLI_STRICT("a trace cut short or a malformed packet is an error,\n"
               "not a warning"),
    {0, "--clickhouse", "URL",
     "run the SQL on a ClickHouse server instead, over the\n"
     "traces etch load put there (docs/fleet.md)",
     CLI_STR(query_args, clickhouse)},
    {0, "--database", "NAME", "with --clickhouse: the database (default etch)",
     CLI_STR(query_args, database)},
    {0},
};

const command cli_query = {
    .name = "query",
    .fn = cmd_query,
    .summary = "SQL over the trace's tables",
    .synopsis = "etch query [--csv] [-f FILE.sql] [--db OUT.duckdb] [--no-cache] "
                "[--strict] TRACE... [SQL]\n"
                "       etch query --clickhouse URL [--database NAME] [--csv] "
                "[-f FILE.sql] [SQL]\n",
    .about =
        "Imports TRACE into DuckDB tables shaped like trace_processor's (process,\n"
        "thread, track, slice, counter, args, flow, stats, trace_bounds) and\n"
        "runs SQL on them. The tables are cached: the first query of a trace\n"
        "writes them to a file in ETCH_CACHE_DIR (else $XDG_CACHE_HOME/etch,\n"
        "else ~/.cache/etch), the next ones of the same trace read that file.\n"
        "A trace still being recorded is read on: each query reads only what\n"
        "was appended since the last (table etch_live says from and to which\n"
        "offset).\n"
        "With several traces every table has a first column `trace` (the path\n"
        "as given), to compare runs in one query. Without SQL, reads statements\n"
        "from stdin, or opens a prompt when stdin is a terminal. TRACE may also\n"
        "be a database written with --db. SQL that starts with '-' (a comment)\n"
        "is taken as SQL when it holds a blank or a newline, or after --.\n",
    .opts = kQueryOpts,
    .more =
        "Example:\n"
        "  etch query app.pftrace \"select name, count(*), sum(dur) from slice group by name\"\n"
        "  etch query a.pftrace b.pftrace \"select trace, count(*) from slice group by trace\"\n"
        "  etch query --clickhouse http://127.0.0.1:8123 \"select trace_id, count() from slice group by trace_id\"\n",
    .is_operand = sql_operand,
};

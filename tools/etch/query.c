/*
 * query.c - etch query: SQL over the trace's tables.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static char *read_all(FILE *f) {
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  if (!buf) return NULL;
  size_t r;
  while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += r;
    if (n + 1 == cap) {
      char *g = realloc(buf, cap *= 2);
      if (!g) {
        free(buf);
        return NULL;
      }
      buf = g;
    }
  }
  buf[n] = '\0';
  return buf;
}

typedef struct query_args {
  bool csv;
  const char *file, *db_path;
} query_args;

/* After the trace, an argument with blanks is the SQL even when it starts
 * with '-' (an SQL comment: "-- why\nselect ..."); options have none. */
static bool sql_operand(const char *arg, int noperands) {
  return noperands == 1 && strpbrk(arg, " \t\n\r");
}

static int cmd_query(int argc, char **argv) {
  const command *cmd = &cli_query;
  query_args qa = {0};
  opts o;
  int rc = 0;
  if (!cli_parse(cmd, argc, argv, &qa, &o, &rc)) return rc;
  etch__out_mode mode = qa.csv ? ETCH__OUT_CSV : ETCH__OUT_TABLE;
  if (o.noperands < 1) rc = usage_error(cmd, "missing the trace file");
  if (!rc && o.noperands > 2) rc = usage_error(cmd, "too many arguments (quote the SQL)");
  if (!rc && o.noperands == 2 && qa.file)
    rc = usage_error(cmd, "give the SQL either as an argument or with -f");
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
  if (!rc) rc = load(o.operands[0], qa.db_path, true, &db);
  if (!rc) {
    const char *text = sql ? sql : o.noperands == 2 ? o.operands[1] : NULL;
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
    CLI_STRICT("a trace cut short is an error, not a warning"),
    {0},
};

const command cli_query = {
    .name = "query",
    .fn = cmd_query,
    .summary = "SQL over the trace's tables",
    .synopsis = "etch query [--csv] [-f FILE.sql] [--db OUT.duckdb] [--strict] "
                "TRACE [SQL]\n",
    .about =
        "Imports TRACE into DuckDB tables shaped like trace_processor's (process,\n"
        "thread, track, slice, counter, args, flow, stats, trace_bounds) and\n"
        "runs SQL on them. Without SQL, reads statements from stdin, or opens a\n"
        "prompt when stdin is a terminal. TRACE may also be a database written\n"
        "with --db. SQL that starts with '-' (a comment) is taken as SQL when it\n"
        "holds a blank or a newline, or after --.\n",
    .opts = kQueryOpts,
    .more =
        "Example:\n"
        "  etch query app.pftrace \"select name, count(*), sum(dur) from slice group by name\"\n",
    .is_operand = sql_operand,
};

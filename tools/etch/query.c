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

static int cmd_query(int argc, char **argv) {
  const command *cmd = &cli_query;
  opts o;
  int rc = opts_init(&o, argc, argv, false);
  if (rc) return rc;
  etch__out_mode mode = ETCH__OUT_TABLE;
  const char *file = NULL, *db_path = NULL;
  const char *opt;
  while (!rc && (opt = next_opt(&o))) {
    if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
      free(o.operands);
      return print_help(cmd);
    } else if (!strcmp(opt, "--csv")) {
      mode = ETCH__OUT_CSV;
    } else if (!strcmp(opt, "--strict")) {
      g_strict = true;
    } else if (is_opt(opt, "-f") || is_opt(opt, "--file")) {
      file = opt_value(&o, opt, cmd, &rc);
    } else if (is_opt(opt, "--db")) {
      db_path = opt_value(&o, opt, cmd, &rc);
    } else if (o.noperands == 1 && strpbrk(opt, " \t\n\r")) {
      /* After the trace, an argument with blanks is the SQL even when it
       * starts with '-' (an SQL comment: "-- why\nselect ..."); options
       * have none. */
      o.operands[o.noperands++] = (char *)opt;
    } else {
      rc = usage_error(cmd, "unknown option %s", opt);
    }
  }
  if (!rc && o.noperands < 1) rc = usage_error(cmd, "missing the trace file");
  if (!rc && o.noperands > 2) rc = usage_error(cmd, "too many arguments (quote the SQL)");
  if (!rc && o.noperands == 2 && file)
    rc = usage_error(cmd, "give the SQL either as an argument or with -f");
  char *sql = NULL;
  if (!rc && file) {
    FILE *f = !strcmp(file, "-") ? stdin : fopen(file, "r");
    if (!f) {
      rc = runtime_error("%s: %s", file, strerror(errno));
    } else {
      sql = read_all(f);
      if (f != stdin) fclose(f);
      if (!sql) rc = runtime_error("%s: cannot read", file);
    }
  }
  sqlite3 *db = NULL;
  if (!rc) rc = load(o.operands[0], db_path, true, true, &db);
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
  if (db && sqlite3_close(db) != SQLITE_OK && !rc)
    rc = runtime_error("closing the database: %s", sqlite3_errmsg(db));
  free(sql);
  free(o.operands);
  return rc;
}

const command cli_query = {
    "query", cmd_query,
    "SQL over the trace's tables",
    "etch query [--csv] [-f FILE.sql] [--db OUT.sqlite] [--strict] TRACE [SQL]\n"
    "\n"
    "Imports TRACE into SQLite tables shaped like trace_processor's (process,\n"
    "thread, track, slice, counter, args, flow, stats, trace_bounds) and\n"
    "runs SQL on them. Without SQL, reads statements from stdin, or opens a\n"
    "prompt when stdin is a terminal. TRACE may also be a database written\n"
    "with --db. SQL that starts with '-' (a comment) is taken as SQL when it\n"
    "holds a blank or a newline, or after --.\n"
    "\n"
    "  --csv            CSV output (RFC 4180 quoting) instead of a table\n"
    "  -f, --file FILE  run the statements in FILE ('-' = stdin)\n"
    "  --db PATH        build the database in PATH and keep it\n"
    "  --strict         a trace cut short is an error, not a warning\n"
    "\n"
    "Example:\n"
    "  etch query app.pftrace \"select name, count(*), sum(dur) from slice group by name\"\n"};

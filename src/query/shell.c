/*
 * shell.c - running SQL text: scripts of several statements, and the
 * interactive prompt of `etch query` (a plain line reader: no readline).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/containers.h"
#include "query/query.h"

/* Skips a quoted string or a comment at `p`, if one starts there. */
static const char *skip_quoted(const char *p) {
  if (*p == '\'' || *p == '"') {
    char q = *p++;
    while (*p && *p != q) p++;
    return *p ? p + 1 : p;
  }
  if (p[0] == '-' && p[1] == '-') {
    while (*p && *p != '\n') p++;
    return p;
  }
  if (p[0] == '/' && p[1] == '*') {
    const char *e = strstr(p + 2, "*/");
    return e ? e + 2 : p + strlen(p);
  }
  return NULL;
}

/* Runs one statement (`sql` holds one, its ';' included or not). */
static int run_one(etch__db *db, const char *sql, FILE *out,
                   etch__out_mode mode, bool *printed) {
  duckdb_result res;
  int rc = ETCH_OK;
  if (duckdb_query(etch__db_con(db), sql, &res) != DuckDBSuccess) {
    const char *msg = duckdb_result_error(&res);
    rc = etch__error(ETCH_ESQL, "SQL error: %s", msg ? msg : "failed");
  } else if (duckdb_result_return_type(res) ==
                 DUCKDB_RESULT_TYPE_QUERY_RESULT &&
             duckdb_column_count(&res)) {
    /* Statements that return no rows of their own (CREATE; INSERT, which
     * returns a count) print nothing. */
    if (*printed && mode == ETCH__OUT_TABLE) fputc('\n', out);
    etch__query_print_result(&res, out, mode);
    *printed = true;
  }
  duckdb_destroy_result(&res);
  return rc;
}

/*
 * Statements run one at a time, in order, each up to its ';' (outside
 * quotes and comments): those before an error have run and printed, as a
 * script runs; what follows the error does not run.
 */
int etch__query_run_sql(etch__db *db, const char *sql, FILE *out,
                        etch__out_mode mode) {
  bool printed = false;
  const char *start = sql, *p = sql;
  for (;;) {
    const char *q = *p ? skip_quoted(p) : NULL;
    if (q) {
      p = q;
      continue;
    }
    if (*p && *p != ';') {
      p++;
      continue;
    }
    /* A statement ends here: run it unless it is only blanks/comments. */
    bool blank = true;
    for (const char *k = start; k < p && blank;) {
      const char *e = skip_quoted(k);
      if (e && *k != '\'' && *k != '"') {
        k = e;
        continue;
      }
      if (!isspace((unsigned char)*k)) blank = false;
      k++;
    }
    if (!blank) {
      size_t n = (size_t)(p - start);
      char *one = etch__malloc(n + 1);
      if (!one) return etch__error(ETCH_ENOMEM, "out of memory");
      memcpy(one, start, n);
      one[n] = '\0';
      int rc = run_one(db, one, out, mode, &printed);
      free(one);
      if (rc) return rc;
    }
    if (!*p) break;
    start = ++p;
  }
  return ETCH_OK;
}

bool etch__query_sql_complete(const char *sql) {
  bool done = false;
  for (const char *p = sql; *p;) {
    const char *q = skip_quoted(p);
    if (q) {
      /* An unterminated string or comment: not complete. */
      if (!*q && (q[-1] != *p || q - p < 2) && *p != '-') return false;
      p = q;
      continue;
    }
    if (*p == ';')
      done = true;
    else if (!isspace((unsigned char)*p))
      done = false;
    p++;
  }
  return done;
}

static const char kShellHelp[] =
    "Enter SQL ending with ';' (a statement may span lines). Commands:\n"
    "  .tables           list tables and views\n"
    "  .schema [NAME]    show CREATE statements\n"
    "  .mode table|csv   output format\n"
    "  .help             this text\n"
    "  .quit             leave (also Ctrl-D)\n";

/* Handles a dot command; returns false to leave the shell. */
static bool dot_command(etch__db *db, char *line, FILE *out,
                        etch__out_mode *mode) {
  char *cmd = strtok(line, " \t\r\n");
  char *arg = strtok(NULL, " \t\r\n");
  if (!cmd) return true;
  int rc = ETCH_OK;
  if (!strcmp(cmd, ".quit") || !strcmp(cmd, ".exit") || !strcmp(cmd, ".q")) {
    return false;
  } else if (!strcmp(cmd, ".help")) {
    fputs(kShellHelp, out);
  } else if (!strcmp(cmd, ".tables")) {
    rc = etch__query_run_sql(
        db,
        "SELECT table_name AS name, CASE table_type WHEN 'VIEW' THEN 'view' "
        "ELSE 'table' END AS type FROM information_schema.tables "
        "WHERE table_catalog = current_database() ORDER BY name;",
        out, ETCH__OUT_TABLE);
  } else if (!strcmp(cmd, ".schema")) {
    duckdb_prepared_statement p = NULL;
    duckdb_result res;
    const char *sql =
        "SELECT sql FROM (SELECT table_name AS name, sql, 1 AS k FROM "
        "duckdb_tables() WHERE database_name = current_database() UNION ALL "
        "SELECT view_name, sql, 0 FROM duckdb_views() WHERE NOT internal "
        "AND database_name = current_database()) "
        "WHERE $1 IS NULL OR name = $1 ORDER BY k DESC, name";
    if (duckdb_prepare(etch__db_con(db), sql, &p) != DuckDBSuccess) {
      rc = etch__error(ETCH_ESQL, "SQL error: %s", duckdb_prepare_error(p));
    } else {
      if (arg)
        duckdb_bind_varchar(p, 1, arg);
      else
        duckdb_bind_null(p, 1);
      if (duckdb_execute_prepared(p, &res) == DuckDBSuccess) {
        for (idx_t r = 0; r < duckdb_row_count(&res); r++) {
          char *v = duckdb_value_varchar(&res, 0, r);
          size_t n = v ? strlen(v) : 0;
          /* DuckDB keeps the ';' in the text; one per statement. */
          fprintf(out, "%.*s;\n", (int)(n && v[n - 1] == ';' ? n - 1 : n),
                  v ? v : "");
          duckdb_free(v);
        }
      }
      duckdb_destroy_result(&res);
    }
    duckdb_destroy_prepare(&p);
  } else if (!strcmp(cmd, ".mode")) {
    if (arg && !strcmp(arg, "csv"))
      *mode = ETCH__OUT_CSV;
    else if (arg && !strcmp(arg, "table"))
      *mode = ETCH__OUT_TABLE;
    else
      fprintf(out, "usage: .mode table|csv\n");
  } else {
    fprintf(out, "unknown command %s (try .help)\n", cmd);
  }
  if (rc) fprintf(out, "%s\n", etch_last_error());
  return true;
}

static bool blank(const char *s) {
  while (*s && isspace((unsigned char)*s)) s++;
  return *s == '\0';
}

int etch__query_shell(etch__db *db, FILE *in, FILE *out,
                      etch__out_mode mode) {
  etch_vec stmt = {0}; /* the statement so far, lines joined */
  char *line = NULL;
  size_t line_cap = 0;
  fputs("etch query: SQL ending with ';', .help for commands, .quit to "
        "leave\n",
        out);
  for (;;) {
    fputs(stmt.len ? "   ...> " : "etch> ", out);
    fflush(out);
    ssize_t n = getline(&line, &line_cap, in);
    if (n < 0) {
      fputc('\n', out);
      break;
    }
    if (!stmt.len) {
      const char *s = line;
      while (*s == ' ' || *s == '\t') s++;
      if (*s == '.') {
        if (!dot_command(db, line, out, &mode)) break;
        continue;
      }
      if (blank(line)) continue;
    }
    if (etch__vec_push(&stmt, line, (size_t)n) || etch__vec_cstr(&stmt))
      break;
    const char *sql = (const char *)stmt.data;
    if (!etch__query_sql_complete(sql)) continue;
    if (etch__query_run_sql(db, sql, out, mode) != ETCH_OK)
      fprintf(out, "%s\n", etch_last_error());
    stmt.len = 0;
  }
  etch__vec_free(&stmt);
  free(line);
  return ETCH_OK;
}

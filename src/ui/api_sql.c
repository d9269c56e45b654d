/*
 * api_sql.c - the viewer's SQL box (/api/sql?id=&q=): one statement, a
 * query by its first word and by what DuckDB prepares it as, run on the
 * trace's locked-down connection, its first MAX_SQL_ROWS rows answered.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ui/api_int.h"

/* From DuckDB's C API (duckdb_api.h lacks it): what kind of statement a
 * prepared one is; SELECT 1, EXPLAIN 4. */
int duckdb_prepared_statement_type(duckdb_prepared_statement p);
enum { STMT_SELECT = 1, STMT_EXPLAIN = 4 };

enum { MAX_SQL_ROWS = 5000 };

typedef etch__ui_req req;

__attribute__((format(printf, 3, 4))) static int fail(req *r, int status,
                                                      const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int st = etch__ui_req_vfail(r, status, fmt, ap);
  va_end(ap);
  return st;
}

static void jstr(FILE *out, const char *s) {
  if (!s)
    fputs("null", out);
  else
    etch__json_string(out, s, strlen(s));
}

/* ---- the SQL box ---------------------------------------------------------------- */

/* The first word of `sql` after blanks and comments, upper-cased. */
static void first_word(const char *sql, char *w, size_t n) {
  const char *p = sql;
  for (;;) {
    while (isspace((unsigned char)*p)) p++;
    if (p[0] == '-' && p[1] == '-') {
      while (*p && *p != '\n') p++;
    } else if (p[0] == '/' && p[1] == '*') {
      const char *e = strstr(p + 2, "*/");
      p = e ? e + 2 : p + strlen(p);
    } else {
      break;
    }
  }
  size_t i = 0;
  while (i + 1 < n && isalpha((unsigned char)p[i])) {
    w[i] = (char)toupper((unsigned char)p[i]);
    i++;
  }
  w[i] = '\0';
}

/* One statement only, a query: SELECT, WITH or EXPLAIN by its first word,
 * and by what DuckDB makes of it (a WITH may lead an INSERT). */
static int check_sql(req *r, etch__db *db, const char *sql,
                     duckdb_prepared_statement *out) {
  *out = NULL;
  char w[16];
  first_word(sql, w, sizeof w);
  if (strcmp(w, "SELECT") && strcmp(w, "WITH") && strcmp(w, "EXPLAIN"))
    return fail(r, 403, "only a SELECT, WITH or EXPLAIN statement runs here "
                        "(the tables are read only)");
  duckdb_extracted_statements ex = NULL;
  idx_t n = duckdb_extract_statements(etch__db_con(db), sql, &ex);
  if (n == 0) {
    const char *m = ex ? duckdb_extract_statements_error(ex) : NULL;
    int st = fail(r, 400, "SQL error: %s", m ? m : "no statement");
    duckdb_destroy_extracted(&ex);
    return st;
  }
  if (n != 1) {
    duckdb_destroy_extracted(&ex);
    return fail(r, 403, "one statement at a time");
  }
  duckdb_prepared_statement p = NULL;
  duckdb_state s = duckdb_prepare_extracted_statement(etch__db_con(db), ex, 0, &p);
  duckdb_destroy_extracted(&ex);
  if (s != DuckDBSuccess) {
    const char *m = duckdb_prepare_error(p);
    int st = fail(r, 400, "SQL error: %s", m ? m : "failed");
    duckdb_destroy_prepare(&p);
    return st;
  }
  int type = duckdb_prepared_statement_type(p);
  if (type != STMT_SELECT && type != STMT_EXPLAIN) {
    duckdb_destroy_prepare(&p);
    return fail(r, 403, "only a SELECT, WITH or EXPLAIN statement runs here "
                        "(the tables are read only)");
  }
  *out = p;
  return 0;
}

int etch__ui_api_sql(req *r) {
  int st;
  etch__ui_trace *t = etch__ui_req_trace(r, &st);
  if (!t) return st;
  const char *sql = r->get(r->ctx, "q");
  if (!sql || !*sql) return fail(r, 400, "q is the SQL");
  duckdb_prepared_statement p;
  if ((st = check_sql(r, t->db, sql, &p))) return st;
  /* A query's rows past the first MAX_SQL_ROWS are not shown: ask for
   * one more than that, not for all (SELECT * FROM slice would hold the
   * whole table). The query, checked above, runs as a subquery (on lines
   * of its own: a trailing comment stays one); the wrapped text is checked
   * again. EXPLAIN runs as it is. */
  char w[16];
  first_word(sql, w, sizeof w);
  char *wrapped = NULL;
  if (strcmp(w, "EXPLAIN")) {
    size_t n = strlen(sql);
    while (n && (isspace((unsigned char)sql[n - 1]) || sql[n - 1] == ';')) n--;
    wrapped = etch__aprintf("SELECT * FROM (\n%.*s\n) LIMIT %d", (int)n,
                               sql, MAX_SQL_ROWS + 1);
    duckdb_prepared_statement q = NULL;
    etch__ui_membuf mb;
    FILE *sink = wrapped ? etch__ui_membuf_open(&mb) : NULL;
    if (!sink) {
      free(wrapped);
      duckdb_destroy_prepare(&p);
      return fail(r, 500, "out of memory");
    }
    req quiet = *r;
    quiet.out = sink;
    /* Where the wrapped text does not prepare the same way, the query runs
     * as it is. */
    if (check_sql(&quiet, t->db, wrapped, &q) == 0) {
      duckdb_destroy_prepare(&p);
      p = q;
    }
    etch__ui_membuf_free(&mb);
    free(wrapped);
  }
  duckdb_result res;
  duckdb_state s = duckdb_execute_prepared(p, &res);
  duckdb_destroy_prepare(&p);
  if (s != DuckDBSuccess) {
    const char *m = duckdb_result_error(&res);
    st = fail(r, 400, "SQL error: %s", m ? m : "failed");
    duckdb_destroy_result(&res);
    return st;
  }
  FILE *o = r->out;
  idx_t nc = duckdb_column_count(&res), nr = duckdb_row_count(&res);
  fputs("{\"columns\":[", o);
  for (idx_t c = 0; c < nc; c++) {
    if (c) fputc(',', o);
    jstr(o, duckdb_column_name(&res, c));
  }
  fputs("],\"rows\":[", o);
  idx_t shown = nr < MAX_SQL_ROWS ? nr : MAX_SQL_ROWS;
  for (idx_t i = 0; i < shown; i++) {
    fprintf(o, "%s[", i ? "," : "");
    for (idx_t c = 0; c < nc; c++) {
      if (c) fputc(',', o);
      if (duckdb_value_is_null(&res, c, i)) {
        fputs("null", o);
        continue;
      }
      char *v = duckdb_value_varchar(&res, c, i);
      jstr(o, v ? v : "");
      duckdb_free(v);
    }
    fputc(']', o);
  }
  if (nr > MAX_SQL_ROWS)
    fprintf(o, "],\"more\":true}");
  else
    fprintf(o, "],\"total\":%llu}", (unsigned long long)nr);
  duckdb_destroy_result(&res);
  return 200;
}

/*
 * run.c - queries with bound values (run.h): prepared, each value bound
 * with its type, the rows streamed.
 */
#include <string.h>

#include "base/base.h"
#include "query/run.h"

/* From DuckDB's C API, besides duckdb_api.h's binds. */
duckdb_state duckdb_bind_double(duckdb_prepared_statement p, idx_t param,
                                double val);
duckdb_state duckdb_bind_boolean(duckdb_prepared_statement p, idx_t param,
                                 bool val);
duckdb_state duckdb_bind_varchar_length(duckdb_prepared_statement p,
                                        idx_t param, const char *val,
                                        idx_t length);

static duckdb_state bind(duckdb_prepared_statement p, idx_t at,
                         const etch__sql_arg *a) {
  switch (a->kind) {
    case ETCH__SQL_AUTO:
      return a->s ? duckdb_bind_varchar(p, at, a->s)
                  : duckdb_bind_int64(p, at, a->i);
    case ETCH__SQL_INT: return duckdb_bind_int64(p, at, a->i);
    case ETCH__SQL_REAL: return duckdb_bind_double(p, at, a->f);
    case ETCH__SQL_BOOL: return duckdb_bind_boolean(p, at, a->i != 0);
    case ETCH__SQL_NULL: return duckdb_bind_null(p, at);
    case ETCH__SQL_TEXT:
      if (!a->s) return duckdb_bind_null(p, at);
      return duckdb_bind_varchar_length(p, at, a->s,
                                        a->len ? a->len : strlen(a->s));
  }
  return DuckDBError;
}

int etch__query_run(etch__db *db, const char *sql, const etch__sql_arg *args,
                    size_t n, etch__res *res) {
  memset(res, 0, sizeof *res);
  ETCH_DCHECK(sql != NULL && (n == 0 || args != NULL));
  duckdb_prepared_statement p = NULL;
  if (duckdb_prepare(etch__db_con(db), sql, &p) != DuckDBSuccess) {
    const char *msg = duckdb_prepare_error(p);
    int rc = etch__error(ETCH_ESQL, "%s", msg ? msg : "SQL error");
    duckdb_destroy_prepare(&p);
    return rc;
  }
  for (size_t i = 0; i < n; i++) {
    if (bind(p, i + 1, &args[i]) != DuckDBSuccess) {
      const char *msg = duckdb_prepare_error(p);
      int rc = etch__error(ETCH_ESQL, "cannot bind parameter $%zu: %s", i + 1,
                           msg ? msg : "refused");
      duckdb_destroy_prepare(&p);
      return rc;
    }
  }
  duckdb_state st = duckdb_execute_prepared_streaming(p, &res->r);
  duckdb_destroy_prepare(&p);
  if (st != DuckDBSuccess) {
    const char *msg = duckdb_result_error(&res->r);
    int rc = etch__error(ETCH_ESQL, "%s", msg ? msg : "SQL error");
    duckdb_destroy_result(&res->r);
    return rc;
  }
  res->open = true;
  res->ncols = duckdb_column_count(&res->r);
  return ETCH_OK;
}

int etch__query_ints(etch__db *db, const char *sql, const etch__sql_arg *args,
                     size_t n, int64_t *out, size_t nout) {
  memset(out, 0, nout * sizeof *out);
  etch__res r;
  int rc = etch__query_run(db, sql, args, n, &r);
  if (rc) return rc;
  if (r.ncols < nout) {
    r.err = etch__error(ETCH_ESQL, "%zu columns asked for, the query has %llu",
                        nout, (unsigned long long)r.ncols);
  } else if (etch__res_next(&r)) {
    for (size_t c = 0; c < nout; c++) out[c] = etch__res_i64(&r, c);
  }
  return etch__res_close(&r);
}

int etch__query_each(etch__db *db, const char *sql, const etch__sql_arg *args,
                     size_t n, etch__query_row_fn fn, void *ctx) {
  etch__res r;
  int rc = etch__query_run(db, sql, args, n, &r);
  if (rc) return rc;
  while (etch__res_next(&r)) {
    int st = fn(ctx, &r);
    if (st) {
      if (!r.err) r.err = st;
      break;
    }
  }
  return etch__res_close(&r);
}

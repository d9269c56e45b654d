/*
 * db.c - the DuckDB database a trace's tables live in: opening (in memory
 * or a file), running SQL, and the cursor internal queries read rows with.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "query/query.h"

struct etch__db {
  duckdb_database db;
  duckdb_connection con;
  bool file; /* not in memory */
  bool holds_fd; /* held_fd is closed with it (etch__db_hold_fd) */
  int held_fd;
};

void etch__db_hold_fd(etch__db *db, int fd) {
  db->holds_fd = true;
  db->held_fd = fd;
}

bool etch__db_is_file(const etch__db *db) { return db->file; }

int etch__db_connect(etch__db *db, duckdb_connection *out) {
  if (duckdb_connect(db->db, out) != DuckDBSuccess)
    return etch__error(ETCH_EIO, "cannot connect to the database");
  return ETCH_OK;
}

duckdb_connection etch__db_con(const etch__db *db) { return db->con; }

static int open_path(etch__db **out, const char *path, bool read_only) {
  *out = NULL;
  etch__db *d = etch__calloc(1, sizeof *d);
  if (!d) return etch__error(ETCH_ENOMEM, "out of memory");
  duckdb_config cfg = NULL;
  if (duckdb_create_config(&cfg) != DuckDBSuccess) {
    free(d);
    return etch__error(ETCH_ENOMEM, "database: out of memory");
  }
  /* Nothing fetched from the network, no extension loaded behind the
   * user's back; a read-only open lets several etch read one cache. */
  duckdb_set_config(cfg, "autoinstall_known_extensions", "false");
  duckdb_set_config(cfg, "autoload_known_extensions", "false");
  if (read_only) duckdb_set_config(cfg, "access_mode", "READ_ONLY");
  char *err = NULL;
  duckdb_state st = duckdb_open_ext(path, &d->db, cfg, &err);
  duckdb_destroy_config(&cfg);
  if (st != DuckDBSuccess) {
    int rc = etch__error(ETCH_EIO, "%s: cannot open database: %s",
                         path ? path : ":memory:", err ? err : "error");
    duckdb_free(err);
    free(d);
    return rc;
  }
  if (duckdb_connect(d->db, &d->con) != DuckDBSuccess) {
    duckdb_close(&d->db);
    free(d);
    return etch__error(ETCH_EIO, "%s: cannot connect to the database",
                       path ? path : ":memory:");
  }
  d->file = path != NULL;
  *out = d;
  return ETCH_OK;
}

int etch__db_open(etch__db **out, const char *path) {
  *out = NULL;
  if (path) {
    if (unlink(path) != 0 && errno != ENOENT)
      return etch__error(ETCH_EIO, "%s: cannot replace: %s", path,
                         strerror(errno));
    /* DuckDB's write-ahead log beside it, if a crash left one. */
    char wal[4096];
    if ((size_t)snprintf(wal, sizeof wal, "%s.wal", path) < sizeof wal)
      unlink(wal);
  }
  return open_path(out, path, false);
}

int etch__db_open_existing(etch__db **out, const char *path, bool read_only) {
  int rc = open_path(out, path, read_only);
  if (rc) return rc;
  /* Fail now, not at the first query, if the tables are not there. */
  etch__res r;
  rc = etch__res_query(*out, "SELECT count(*) FROM trace_bounds", path, &r);
  if (!rc) rc = etch__res_close(&r);
  if (rc) {
    etch__db_close(*out);
    *out = NULL;
    /* Memory that ran out says nothing of the file. */
    if (rc == ETCH_ENOMEM)
      return etch__error(ETCH_ENOMEM, "%s: out of memory opening the "
                                      "database", path);
    return etch__error(ETCH_EFORMAT, "%s: not a usable database: %s", path,
                       etch_last_error());
  }
  return ETCH_OK;
}

int etch__db_close(etch__db *db) {
  if (!db) return ETCH_OK;
  duckdb_disconnect(&db->con);
  duckdb_close(&db->db);
  if (db->holds_fd) close(db->held_fd);
  free(db);
  return ETCH_OK;
}

int etch__db_exec(etch__db *db, const char *sql) {
  duckdb_result r;
  int rc = ETCH_OK;
  if (duckdb_query(db->con, sql, &r) != DuckDBSuccess) {
    const char *msg = duckdb_result_error(&r);
    rc = etch__error(ETCH_ESQL, "SQL error: %s", msg ? msg : "failed");
  }
  duckdb_destroy_result(&r);
  return rc;
}

/*
 * DuckDB's file header: a checksum (8 bytes), then the magic "DUCK" at
 * offset 8.
 */
bool etch__query_is_db_file(const char *path) {
  char head[12];
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  size_t n = fread(head, 1, sizeof head, f);
  fclose(f);
  return n == sizeof head && memcmp(head + 8, "DUCK", 4) == 0;
}

/* ---- the cursor ----------------------------------------------------------- */

int etch__res_query(etch__db *db, const char *sql, const char *what,
                    etch__res *res) {
  memset(res, 0, sizeof *res);
  duckdb_prepared_statement p = NULL;
  if (duckdb_prepare(db->con, sql, &p) != DuckDBSuccess) {
    const char *msg = duckdb_prepare_error(p);
    int rc = etch__error(ETCH_ESQL, "%s: %s", what, msg ? msg : "SQL error");
    duckdb_destroy_prepare(&p);
    return rc;
  }
  duckdb_state st = duckdb_execute_prepared_streaming(p, &res->r);
  duckdb_destroy_prepare(&p);
  if (st != DuckDBSuccess) {
    const char *msg = duckdb_result_error(&res->r);
    int rc = etch__error(ETCH_ESQL, "%s: %s", what, msg ? msg : "SQL error");
    duckdb_destroy_result(&res->r);
    return rc;
  }
  res->open = true;
  res->ncols = duckdb_column_count(&res->r);
  for (idx_t c = 0; c < res->ncols; c++) {
    duckdb_type t = duckdb_column_type(&res->r, c);
    if (t != DUCKDB_TYPE_BIGINT && t != DUCKDB_TYPE_INTEGER &&
        t != DUCKDB_TYPE_HUGEINT && t != DUCKDB_TYPE_DOUBLE &&
        t != DUCKDB_TYPE_BOOLEAN && t != DUCKDB_TYPE_VARCHAR) {
      res->err = etch__error(ETCH_ESQL, "%s: column %llu has type %d", what,
                             (unsigned long long)c, t);
      etch__res_close(res);
      return res->err;
    }
  }
  return ETCH_OK;
}

bool etch__res_next(etch__res *res) {
  if (!res->open) return false;
  if (res->chunk && ++res->row < res->nrows) return true;
  if (res->chunk) duckdb_destroy_data_chunk(&res->chunk);
  res->chunk = NULL;
  for (;;) {
    res->chunk = duckdb_fetch_chunk(res->r);
    if (!res->chunk) {
      const char *msg = duckdb_result_error(&res->r);
      if (msg && !res->err) res->err = etch__error(ETCH_ESQL, "%s", msg);
      return false;
    }
    res->nrows = duckdb_data_chunk_get_size(res->chunk);
    res->row = 0;
    if (res->nrows) return true;
    duckdb_destroy_data_chunk(&res->chunk);
  }
}

static duckdb_vector vec(const etch__res *res, idx_t col) {
  ETCH_DCHECK(res->chunk && col < res->ncols && res->row < res->nrows);
  return duckdb_data_chunk_get_vector(res->chunk, col);
}

bool etch__res_null(const etch__res *res, idx_t col) {
  uint64_t *v = duckdb_vector_get_validity(vec(res, col));
  return v && !(v[res->row / 64] >> (res->row % 64) & 1);
}

int64_t etch__res_i64(const etch__res *res, idx_t col) {
  if (etch__res_null(res, col)) return 0;
  const void *d = duckdb_vector_get_data(vec(res, col));
  switch (duckdb_column_type((duckdb_result *)&res->r, col)) {
    case DUCKDB_TYPE_BIGINT: return ((const int64_t *)d)[res->row];
    case DUCKDB_TYPE_INTEGER: return ((const int32_t *)d)[res->row];
    case DUCKDB_TYPE_BOOLEAN: return ((const bool *)d)[res->row];
    case DUCKDB_TYPE_HUGEINT: /* lower 64 bits, then upper 64 bits */
      return (int64_t)((const uint64_t *)d)[res->row * 2];
    case DUCKDB_TYPE_DOUBLE: return (int64_t)((const double *)d)[res->row];
    default: return 0;
  }
}

double etch__res_f64(const etch__res *res, idx_t col) {
  if (etch__res_null(res, col)) return NAN;
  if (duckdb_column_type((duckdb_result *)&res->r, col) == DUCKDB_TYPE_DOUBLE)
    return ((const double *)duckdb_vector_get_data(vec(res, col)))[res->row];
  return (double)etch__res_i64(res, col);
}

/*
 * A VARCHAR value is 16 bytes: a 32-bit length, then either the string
 * itself (up to 12 bytes, inline) or a 4-byte prefix and a pointer.
 */
const char *etch__res_str(const etch__res *res, idx_t col, size_t *len) {
  if (etch__res_null(res, col) ||
      duckdb_column_type((duckdb_result *)&res->r, col) != DUCKDB_TYPE_VARCHAR)
    return NULL;
  const char *s =
      (const char *)duckdb_vector_get_data(vec(res, col)) + res->row * 16;
  uint32_t n;
  memcpy(&n, s, 4);
  *len = n;
  if (n <= 12) return s + 4;
  const char *p;
  memcpy(&p, s + 8, sizeof p);
  return p;
}

char *etch__res_strdup(const etch__res *res, idx_t col) {
  size_t n;
  const char *s = etch__res_str(res, col, &n);
  if (!s) return NULL;
  char *c = etch__malloc(n + 1);
  if (!c) return NULL;
  memcpy(c, s, n);
  c[n] = '\0';
  return c;
}

int etch__res_close(etch__res *res) {
  if (res->chunk) duckdb_destroy_data_chunk(&res->chunk);
  if (res->open) duckdb_destroy_result(&res->r);
  res->open = false;
  return res->err;
}

/*
 * tiles.c - what the timeline shows of a time window: the slices of some
 * tracks at the screen's resolution, computed by DuckDB from the slice
 * table, and the one way the ui part runs a query with bound values.
 *
 * A tile never holds more than about two rectangles per pixel column per
 * depth of a track: a slice at least a pixel wide is its own rectangle
 * (slices of one depth do not overlap, so there are at most as many as
 * pixels), and the slices narrower than a pixel that start in the same
 * column are one rectangle. So its size follows the screen, never the
 * trace.
 *
 * The window's filter is `ts < end AND ts + dur >= start`, with also
 * `ts >= start - max_dur` (the longest slice of the trace): DuckDB skips
 * the row groups whose ts range lies wholly before that (its zone maps),
 * so a narrow window late in a long trace reads little.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "ui/ui.h"

int etch__ui_query(etch__db *db, const char *sql, const etch__ui_bind *b,
                   size_t nb, etch__res *res) {
  memset(res, 0, sizeof *res);
  duckdb_prepared_statement p = NULL;
  if (duckdb_prepare(etch__db_con(db), sql, &p) != DuckDBSuccess) {
    const char *msg = duckdb_prepare_error(p);
    int rc = etch__error(ETCH_ESQL, "%s", msg ? msg : "SQL error");
    duckdb_destroy_prepare(&p);
    return rc;
  }
  for (size_t i = 0; i < nb; i++) {
    duckdb_state st;
    if (b[i].s)
      st = duckdb_bind_varchar(p, i + 1, b[i].s);
    else
      st = duckdb_bind_int64(p, i + 1, b[i].i);
    if (st != DuckDBSuccess) {
      duckdb_destroy_prepare(&p);
      return etch__error(ETCH_ESQL, "cannot bind parameter %zu", i + 1);
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

/* The longest slice of the trace (0 for none), for the window's filter. */
/* The duration a slice is drawn with: one still open at the end (-1) lasts
 * to the trace's end. */
#define DRAWN_DUR                                                          \
  "CASE WHEN dur < 0 THEN greatest((SELECT max(end_ts) FROM trace_bounds)" \
  " - ts, 0) ELSE dur END"

int64_t etch__ui_max_dur(etch__db *db) {
  etch__res r;
  int64_t m = 0;
  if (etch__ui_query(db,
                     "SELECT CAST(coalesce(max(" DRAWN_DUR "), 0) AS BIGINT)"
                     " FROM slice",
                     NULL, 0, &r) != ETCH_OK)
    return INT64_MAX / 4;
  if (etch__res_next(&r)) m = etch__res_i64(&r, 0);
  etch__res_close(&r);
  return m;
}

int etch__ui_tile_slices(etch__db *db, const int64_t *tracks, size_t n,
                         int64_t start, int64_t end, double ns_per_px,
                         int64_t md, etch__ui_tile *out) {
  memset(out, 0, sizeof *out);
  if (!n || end <= start) return ETCH_OK;
  if (!(ns_per_px >= 1)) ns_per_px = 1;
  if (ns_per_px > 1e15) ns_per_px = 1e15;
  int64_t px = (int64_t)ceil(ns_per_px);
  if (md < 0) md = etch__ui_max_dur(db);
  /* The track list is ours (numbers), never the request's text. */
  char *in = NULL;
  size_t inlen = 0;
  FILE *f = open_memstream(&in, &inlen);
  if (!f) return etch__error(ETCH_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%s%lld", i ? "," : "", (long long)tracks[i]);
  fclose(f);
  char *sql = NULL;
  int len = asprintf(
      &sql,
      "WITH v AS (SELECT id, ts, " DRAWN_DUR " AS d, track_id, depth, name"
      " FROM slice WHERE track_id IN (%s) AND ts < $1 AND ts >= $2 - $3 - 1),"
      " w AS (SELECT * FROM v WHERE ts + d >= $2)"
      " SELECT track_id, depth, ts, ts + d, 1, id, name FROM w WHERE d >= $4"
      " UNION ALL"
      " SELECT track_id, depth, min(ts), max(ts + d), count(*), min(id),"
      " arg_max(name, d) FROM w WHERE d < $4"
      " GROUP BY track_id, depth, (ts - $2 + $5) // $4"
      " ORDER BY 1, 2, 3, 6",
      in);
  free(in);
  if (len < 0) return etch__error(ETCH_ENOMEM, "out of memory");
  /* Integer division rounds towards zero: the column of a slice that
   * starts before the window is counted from a start far enough before
   * it that every such slice has a column of its own (below k0). */
  int64_t k0 = (md / px + 2) * px;
  etch__ui_bind b[] = {{.i = end}, {.i = start}, {.i = md}, {.i = px},
                       {.i = k0}};
  etch__res r;
  int rc = etch__ui_query(db, sql, b, 5, &r);
  free(sql);
  if (rc) return rc;
  size_t cap = 0;
  while (etch__res_next(&r)) {
    if (out->n == cap) {
      size_t nc = cap ? cap * 2 : 256;
      etch__ui_rect *g = etch__realloc(out->rects, nc * sizeof *g);
      if (!g) {
        r.err = etch__error(ETCH_ENOMEM, "out of memory");
        break;
      }
      out->rects = g;
      cap = nc;
    }
    etch__ui_rect *x = &out->rects[out->n++];
    x->track_id = etch__res_i64(&r, 0);
    x->depth = etch__res_i64(&r, 1);
    x->ts = etch__res_i64(&r, 2);
    x->end = etch__res_i64(&r, 3);
    x->count = etch__res_i64(&r, 4);
    x->id = etch__res_i64(&r, 5);
    x->name = etch__res_strdup(&r, 6);
  }
  rc = etch__res_close(&r);
  if (rc) etch__ui_tile_free(out);
  return rc;
}

void etch__ui_tile_free(etch__ui_tile *t) {
  for (size_t i = 0; i < t->n; i++) free(t->rects[i].name);
  free(t->rects);
  memset(t, 0, sizeof *t);
}

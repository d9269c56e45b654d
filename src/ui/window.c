/*
 * window.c - what answers a window of an open trace (the API's tile, and
 * the report's): a big trace's coarse windows from its overview, finer
 * ones from the overviews of its stretches, the others by the exact tile
 * (tiles.c); its counters from the values in memory (counters.c) or by the
 * query that answers the same rows.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "ui/app.h"

/* A trace's counter values are held in memory up to this many (16 bytes
 * each). */
enum { kCountersInMemory = 4000000 };

/*
 * A big trace's windows finer than its overview but no finer than a
 * stretch's (the trace in kStretches stretches, each with columns 16 times
 * finer than the overview's): merged from the stretches that hold the
 * slices reaching the window, each built the first time it is needed (a
 * build reads 1/kStretches of the trace, about what the window's own tile
 * would). True when it answered
 * (*st: 0, or an error), false when the window is too fine for them or
 * needs more than kStretchBuilds of them built (the window's own tile
 * answers).
 */
enum { kStretches = 64, kStretchBuilds = 2 };

static bool fine_tile(etch__ui_trace *t, const int64_t *tracks, size_t nt,
                      int64_t start, int64_t end, double ns_per_px,
                      etch__ui_tile *tile, int *st) {
  *st = 0;
  _Static_assert(kStretches <= ETCH_ARRAY_SIZE(t->fine), "room for them");
  int64_t s0 = t->span_start, span = t->span_end - t->span_start;
  if (span <= 0) return false;
  int64_t w = (span + kStretches - 1) / kStretches;
  /* A stretch's columns: 16 times finer than the overview's. */
  int64_t r0 = etch__ui_lod_resolution(t->lod);
  int64_t cols = r0 > 0 ? (w * 16 + r0 - 1) / r0 : 1;
  if (cols < 1) cols = 1;
  int64_t r1 = (w + cols - 1) / cols; /* a stretch's column, at most */
  if (ns_per_px < (double)(r1 < 1 ? 1 : r1)) return false;
  /* Slices that start up to the longest slice before the window reach it. */
  int64_t from = etch__sat_sub(start, t->max_dur);
  int64_t k0 = from <= s0 ? 0 : (from - s0) / w;
  int64_t k1 = end - 1 <= s0 ? 0 : (end - 1 - s0) / w;
  if (k1 >= kStretches) k1 = kStretches - 1;
  if (k0 > k1) k0 = k1;
  /* A window over more stretches not built yet than kStretchBuilds is
   * answered exactly instead (it reads only the window: 17 - 23 ms of CPU
   * for 0.088 of the 10 M-event trace, where building its 6 stretches took
   * 37 ms); narrower windows and pans build them a few at a time. */
  int64_t unbuilt = 0;
  for (int64_t k = k0; k <= k1; k++) unbuilt += !t->fine[k];
  if (unbuilt > kStretchBuilds) return false;
  etch__ui_lod *use[kStretches];
  size_t n = 0;
  for (int64_t k = k0; k <= k1; k++) {
    if (!t->fine[k]) {
      int64_t a = s0 + k * w, b = k == kStretches - 1 ? t->span_end : a + w;
      if (b > t->span_end) b = t->span_end;
      if (a >= b) continue;
      if ((*st = etch__ui_lod_build_stretch_named(t->db, t->names, a, b, cols,
                                                  t->max_dur, &t->fine[k])))
        return true;
    }
    use[n++] = t->fine[k];
  }
  *st = etch__ui_lods_tile(use, n, tracks, nt, start, end, ns_per_px, tile);
  return true;
}

int etch__ui_trace_tile(etch__ui *ui, etch__ui_trace *t,
                        const int64_t *tracks, size_t nt, int64_t start,
                        int64_t end, double ns_per_px, etch__ui_tile *out) {
  memset(out, 0, sizeof *out);
  ETCH_DCHECK(t->db != NULL && start < end && ns_per_px > 0);
  /* The names of slices, read once. */
  int rc;
  if (!t->names && (rc = etch__ui_names_load(t->db, false, &t->names)))
    return rc;
  /* A big trace's coarse windows come from its overview (lod.c). */
  if (!t->lod && t->slices >= ui->lod_min) {
    rc = etch__ui_lod_build_named(t->db, t->names, 0, t->max_dur, &t->lod);
    int64_t span[2];
    if (!rc)
      rc = etch__query_ints(t->db,
                            "SELECT CAST(coalesce(min(start_ts), 0) AS BIGINT),"
                            " CAST(coalesce(max(end_ts), 0) AS BIGINT) + 1"
                            " FROM trace_bounds",
                            NULL, 0, span, 2);
    if (rc) return rc;
    t->span_start = span[0];
    t->span_end = span[1];
  }
  int st;
  if (t->lod && ns_per_px >= (double)etch__ui_lod_resolution(t->lod))
    return etch__ui_lod_tile(t->lod, tracks, nt, start, end, ns_per_px, out);
  if (t->lod && fine_tile(t, tracks, nt, start, end, ns_per_px, out, &st))
    return st;
  return etch__ui_tile_slices_named(t->db, t->names, tracks, nt, start, end,
                                    ns_per_px, t->max_dur, out);
}

/* Per track and pixel column of p ns: the first time, min, max and the
 * last value; and the value in force at the window's start. */
static int counters_query(etch__db *db, const int64_t *ids, size_t n,
                          int64_t start, int64_t end, int64_t p,
                          etch__ui_counter_row **rows, size_t *nrows) {
  char *in = etch__ui_ids_text(ids, n);
  if (!in) return etch__error(ETCH_ENOMEM, "out of memory");
  etch__sql_arg b[] = {ETCH__SQL_I64(start), ETCH__SQL_I64(end),
                       ETCH__SQL_I64(p), ETCH__SQL_STR(in)};
  etch__res q;
  int rc = etch__query_run(
      db,
      "WITH w AS (SELECT unnest(CAST($4 AS BIGINT[])) AS id)"
      " SELECT track_id, min(ts), min(value), max(value),"
      " arg_max(value, ts) FROM counter WHERE track_id IN (SELECT id FROM w)"
      " AND ts >= $1 AND ts < $2"
      " GROUP BY track_id, CAST(floor((ts - $1) / $3) AS BIGINT)"
      " UNION ALL SELECT track_id, max(ts), arg_max(value, ts),"
      " arg_max(value, ts), arg_max(value, ts) FROM counter"
      " WHERE track_id IN (SELECT id FROM w) AND ts < $1 GROUP BY track_id"
      " ORDER BY 1, 2",
      b, 4, &q);
  free(in);
  if (rc) return rc;
  etch_vec v = {0};
  while (etch__res_next(&q)) {
    etch__ui_counter_row x = {
        .track = etch__res_i64(&q, 0), .ts = etch__res_i64(&q, 1),
        .lo = etch__res_f64(&q, 2),    .hi = etch__res_f64(&q, 3),
        .last = etch__res_f64(&q, 4)};
    if (etch__vec_push(&v, &x, sizeof x)) {
      q.err = ETCH_ENOMEM;
      break;
    }
  }
  if ((rc = etch__res_close(&q))) {
    free(v.data);
    return rc;
  }
  *rows = (etch__ui_counter_row *)v.data;
  *nrows = v.len / sizeof **rows;
  return ETCH_OK;
}

int etch__ui_trace_counters(etch__ui_trace *t, const int64_t *ids, size_t n,
                            int64_t start, int64_t end, double ns_per_px,
                            etch__ui_counter_row **rows, size_t *nrows) {
  *rows = NULL;
  *nrows = 0;
  if (!n) return ETCH_OK;
  /* The counter values in memory when they are not too many (counters.c):
   * the same rows as the query's. */
  if (!t->counters_tried) {
    t->counters_tried = true;
    if (etch__ui_counters_load(t->db, kCountersInMemory, &t->counters))
      t->counters = NULL; /* the query answers */
  }
  int64_t p = (int64_t)(ns_per_px < 1 ? 1 : ns_per_px + 0.999999);
  if (t->counters)
    return etch__ui_counters_tile(t->counters, ids, n, start, end, p, rows,
                                  nrows);
  return counters_query(t->db, ids, n, start, end, p, rows, nrows);
}

/*
 * tiles.c - what the timeline shows of a time window: the slices of some
 * tracks at the screen's resolution.
 *
 * A tile never holds more than about two rectangles per pixel column per
 * depth of a track: a slice at least a pixel wide is its own rectangle
 * (slices of one depth do not overlap, so there are at most as many as
 * pixels), and the slices narrower than a pixel that start in the same
 * column are one rectangle, named after the longest (on a tie, the first:
 * DuckDB's arg_max picks any). So its size follows the screen, never the
 * trace.
 *
 * The rows are slice_data's integer columns, merged here in C as DuckDB
 * streams them (tile_c says why they come in the order that needs), the
 * names looked up by key_id afterwards; DuckDB's own aggregation over the
 * slice view (tile_sql) answers when they do not. The window's filter is
 * `ts < end AND ts >= start - max_dur - 1` (the longest slice of the
 * trace): DuckDB skips the row groups whose ts range lies wholly before
 * that (its zone maps), so a narrow window late in a long trace reads
 * little; a slice that ends before `start` is dropped here.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/containers.h"
#include "base/map.h"
#include "ui/str.h"
#include "ui/ui.h"

/* The duration a slice is drawn with: one still open at the end (-1) lasts
 * to the trace's end. */
#define DRAWN_DUR                                                          \
  "CASE WHEN dur < 0 THEN greatest((SELECT max(end_ts) FROM trace_bounds)" \
  " - ts, 0) ELSE dur END"

/* The trace's end, where a slice still open at the end is drawn to. */
static int64_t trace_end(etch__db *db) {
  etch__res r;
  int64_t e = 0;
  if (etch__query_run(db,
                     "SELECT CAST(coalesce(max(end_ts), 0) AS BIGINT)"
                     " FROM trace_bounds",
                     NULL, 0, &r) != ETCH_OK)
    return 0;
  if (etch__res_next(&r)) e = etch__res_i64(&r, 0);
  etch__res_close(&r);
  return e;
}

int64_t etch__ui_max_dur(etch__db *db) {
  /* max(DRAWN_DUR) over slice_data, in two steps: DuckDB answers the
   * column's max and min from its statistics (under a millisecond, where
   * the CASE over 5 M rows took 21 - 38 ms of CPU); only slices still
   * open at the end (dur < 0) need a scan of their own. */
  etch__res r;
  int64_t mx = 0, mn = 0;
  bool any = false;
  if (etch__query_run(db,
                     "SELECT CAST(max(dur) AS BIGINT), CAST(min(dur) AS BIGINT)"
                     " FROM slice_data",
                     NULL, 0, &r) != ETCH_OK)
    return INT64_MAX / 4;
  if (etch__res_next(&r) && !etch__res_null(&r, 0)) {
    any = true;
    mx = etch__res_i64(&r, 0);
    mn = etch__res_i64(&r, 1);
  }
  if (etch__res_close(&r)) return INT64_MAX / 4;
  if (!any) return 0;
  if (mx < 0) mx = 0;
  if (mn >= 0) return mx;
  int64_t open = 0;
  if (etch__query_run(db,
                     "SELECT CAST(coalesce(max(" DRAWN_DUR "), 0) AS BIGINT)"
                     " FROM slice_data WHERE dur < 0",
                     NULL, 0, &r) != ETCH_OK)
    return INT64_MAX / 4;
  if (etch__res_next(&r)) open = etch__res_i64(&r, 0);
  if (etch__res_close(&r)) return INT64_MAX / 4;
  return open > mx ? open : mx;
}

/*
 * The tile as one DuckDB query over the slice view: one scan, one
 * aggregation. A slice at least a pixel wide is a group of its own (keyed
 * by -id, below every column), the others group by column. Integer
 * division rounds towards zero: columns are counted from k0 before the
 * window, far enough that every slice the filter lets in has a column >=
 * 0, so the rounding is a floor. What the C aggregation below answers when
 * it cannot (tiles.c's head says when), and its reference in the tests.
 */
static int tile_sql(etch__db *db, const int64_t *tracks, size_t n,
                    int64_t start, int64_t end, int64_t px, int64_t md,
                    int64_t tend, etch__ui_tile *out) {
  char *in = etch__ui_ids_text(tracks, n);
  if (!in) return etch__error(ETCH_ENOMEM, "out of memory");
  int64_t k0 = (md / px + 2) * px;
  etch__sql_arg b[] = {ETCH__SQL_I64(end), ETCH__SQL_I64(start),
                       ETCH__SQL_I64(md),  ETCH__SQL_I64(px),
                       ETCH__SQL_I64(k0),  ETCH__SQL_I64(tend),
                       ETCH__SQL_STR(in)};
  etch__res r;
  int rc = etch__query_run(
      db,
      "WITH v AS (SELECT id, ts, CASE WHEN dur < 0 THEN greatest($6 - ts, 0)"
      " ELSE dur END AS d, track_id, depth, name FROM slice"
      " WHERE track_id IN (SELECT unnest(CAST($7 AS BIGINT[])))"
      " AND ts < $1 AND ts >= $2 - $3 - 1)"
      " SELECT track_id, depth, min(ts), max(ts + d), count(*), min(id),"
      " arg_max(name, d) FROM v WHERE ts + d >= $2"
      " GROUP BY track_id, depth,"
      " CASE WHEN d >= $4 THEN -id ELSE (ts - $2 + $5) // $4 END"
      " ORDER BY 1, 2, 3, 6",
      b, 7, &r);
  free(in);
  if (rc) return rc;
  etch_vec v = {0};
  while (etch__res_next(&r)) {
    etch__ui_rect *x = ETCH_VEC_NEW(&v, etch__ui_rect);
    if (!x) {
      r.err = ETCH_ENOMEM;
      break;
    }
    out->rects = (etch__ui_rect *)v.data;
    out->n++;
    x->track_id = etch__res_i64(&r, 0);
    x->depth = etch__res_i64(&r, 1);
    x->ts = etch__res_i64(&r, 2);
    x->end = etch__res_i64(&r, 3);
    x->count = etch__res_i64(&r, 4);
    x->id = etch__res_i64(&r, 5);
    x->name = etch__res_strdup(&r, 6);
    x->key = -1;
    if (!x->name && !etch__res_null(&r, 6)) { /* not copied: no NULL name */
      out->n--;
      r.err = etch__error(ETCH_ENOMEM, "out of memory");
      break;
    }
  }
  rc = etch__res_close(&r);
  if (rc) etch__ui_tile_free(out);
  return rc;
}

/* ---- the tile aggregated in C ---------------------------------------------------- */

/*
 * The same answer from slice_data's integer columns, aggregated here as
 * DuckDB streams them: a scan of slice_data without ORDER BY reads its
 * rows in the order they were stored, which is id order (query/rows.c),
 * and a track's slices of one depth do not overlap and got their ids in
 * the order they began, so that each (track, depth)'s rows come in time
 * order. Then the slices narrower than a pixel that start in one column
 * come one after another (slices a pixel wide may come between them,
 * rectangles of their own), and one group open per (track, depth) merges
 * them. A row that comes before its (track, depth)'s open column (a store
 * not in that order) gives up: the tile is DuckDB's (tile_sql). The names
 * come from the key_id of the longest slice, looked up once per tile.
 */
enum { kMaxDepth = 1 << 16 };

typedef struct agg_list { /* one (track, depth)'s rectangles */
  etch_vec rects;  /* of etch__ui_rect */
  size_t open; /* the narrow group being grown, or SIZE_MAX */
  int64_t col, glen;
  int64_t cstart, cend; /* its column's times, [cstart, cend) (or empty) */
} agg_list;

typedef struct agg_track {
  int64_t track;
  etch_vec depths; /* of agg_list, by depth */
} agg_track;

typedef struct agg {
  etch_vec tracks;  /* of agg_track */
  etch_u64map slot; /* track id -> index in tracks */
  bool all;         /* every track (no list given) */
} agg;

static void agg_free(agg *a) {
  agg_track *t = ETCH_VEC_AT(&a->tracks, agg_track);
  for (size_t i = 0; i < ETCH_VEC_COUNT(&a->tracks, agg_track); i++) {
    agg_list *d = ETCH_VEC_AT(&t[i].depths, agg_list);
    for (size_t k = 0; k < ETCH_VEC_COUNT(&t[i].depths, agg_list); k++)
      etch__vec_free(&d[k].rects);
    etch__vec_free(&t[i].depths);
  }
  etch__vec_free(&a->tracks);
  etch__u64map_free(&a->slot);
}

static agg_track *agg_add_track(agg *a, int64_t track) {
  int64_t k;
  if (etch__u64map_get(&a->slot, (uint64_t)track, &k))
    return &ETCH_VEC_AT(&a->tracks, agg_track)[k];
  size_t n = ETCH_VEC_COUNT(&a->tracks, agg_track);
  if (ETCH_VEC_RESERVE(&a->tracks, agg_track, 1) ||
      !etch__u64map_put(&a->slot, (uint64_t)track, (int64_t)n))
    return NULL;
  agg_track *t = ETCH_VEC_NEW(&a->tracks, agg_track); /* room made above */
  *t = (agg_track){.track = track};
  return t;
}

static agg_list *agg_depth(agg_track *t, int64_t depth) {
  while (ETCH_VEC_COUNT(&t->depths, agg_list) <= (size_t)depth)
    if (ETCH_VEC_PUSH(&t->depths, agg_list, {.open = SIZE_MAX})) return NULL;
  return &ETCH_VEC_AT(&t->depths, agg_list)[depth];
}

static int cmp_track(const void *x, const void *y) {
  const agg_track *a = x, *b = y;
  return (a->track > b->track) - (a->track < b->track);
}

static int cmp_ts_id(const void *x, const void *y) {
  const etch__ui_rect *a = x, *b = y;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  return (a->id > b->id) - (a->id < b->id);
}

/* DuckDB's validity mask: a bit a row, set when the row is not NULL. */
static inline bool is_valid(const uint64_t *v, idx_t row) {
  return !v || ((v[row / 64] >> (row % 64)) & 1);
}

/* The rows of the query (id, ts, dur, track_id, depth, key_id) into `a`;
 * *unordered when they did not come in the order needed. */
static int agg_rows(etch__res *r, agg *a, int64_t start, int64_t px,
                    int64_t tend, bool *unordered) {
  duckdb_data_chunk chunk;
  agg_track *last = NULL;
  int rc = ETCH_OK;
  while (!rc && !*unordered && (chunk = duckdb_fetch_chunk(r->r)) != NULL) {
    idx_t n = duckdb_data_chunk_get_size(chunk);
    const int64_t *col[6];
    /* The rows with no NULL (the columns are NOT NULL: every row, but the
     * masks are read anyway), one mask for the six columns. */
    uint64_t valid[(2048 + 63) / 64];
    bool all_valid = n <= 2048;
    size_t words = (n + 63) / 64;
    if (all_valid) memset(valid, 0xff, words * sizeof *valid);
    for (idx_t c = 0; c < 6; c++) {
      duckdb_vector v = duckdb_data_chunk_get_vector(chunk, c);
      col[c] = duckdb_vector_get_data(v);
      const uint64_t *m = duckdb_vector_get_validity(v);
      if (m && n <= 2048)
        for (size_t w = 0; w < words; w++) valid[w] &= m[w];
      else if (m)
        all_valid = false;
    }
    if (!all_valid) { /* a chunk bigger than DuckDB's own: row by row */
      for (idx_t c = 0; c < 6 && !*unordered; c++) {
        const uint64_t *m = duckdb_vector_get_validity(
            duckdb_data_chunk_get_vector(chunk, c));
        for (idx_t i = 0; m && i < n && !*unordered; i++)
          if (!is_valid(m, i)) *unordered = true; /* DuckDB's answer */
      }
      if (*unordered) {
        duckdb_destroy_data_chunk(&chunk);
        break;
      }
    }
    for (idx_t i = 0; i < n; i++) {
      if (n <= 2048 && !((valid[i / 64] >> (i % 64)) & 1)) continue;
      int64_t id = col[0][i], ts = col[1][i], dur = col[2][i];
      int64_t track = col[3][i], depth = col[4][i], key = col[5][i];
      int64_t d = dur < 0 ? etch__sat_sub(tend, ts) : dur;
      if (d < 0) d = 0;
      int64_t e;
      if (__builtin_add_overflow(ts, d, &e)) e = INT64_MAX;
      if (e < start) continue;
      if (depth < 0 || depth >= kMaxDepth) {
        *unordered = true; /* not a depth the importer gives: DuckDB's */
        break;
      }
      if (!last || last->track != track) {
        int64_t k;
        if (etch__u64map_get(&a->slot, (uint64_t)track, &k)) {
          last = &ETCH_VEC_AT(&a->tracks, agg_track)[k];
        } else if (a->all) {
          last = agg_add_track(a, track);
          if (!last) {
            rc = etch__error(ETCH_ENOMEM, "out of memory");
            break;
          }
        } else {
          continue;
        }
      }
      agg_list *l = agg_depth(last, depth);
      if (!l) {
        rc = etch__error(ETCH_ENOMEM, "out of memory");
        break;
      }
      if (d < px) {
        /* The column: the open one's when ts lies in it (most rows: no
         * division), else by division. */
        int64_t c = l->open != SIZE_MAX && ts >= l->cstart && ts < l->cend
                        ? l->col
                        : etch__ui_floor_div(etch__sat_sub(ts, start), px);
        if (l->open != SIZE_MAX && c == l->col) {
          etch__ui_rect *g = &ETCH_VEC_AT(&l->rects, etch__ui_rect)[l->open];
          if (e > g->end) g->end = e;
          g->count++;
          if (id < g->id) g->id = id;
          if (d > l->glen) {
            l->glen = d;
            g->key = key;
          }
          continue;
        }
        if (l->open != SIZE_MAX && c < l->col) {
          *unordered = true;
          break;
        }
        l->open = ETCH_VEC_COUNT(&l->rects, etch__ui_rect);
        l->col = c;
        l->glen = d;
        int64_t off;
        if (__builtin_mul_overflow(c, px, &off) ||
            __builtin_add_overflow(start, off, &l->cstart) ||
            __builtin_add_overflow(l->cstart, px, &l->cend)) {
          l->cstart = 1; /* an empty range: the division decides */
          l->cend = 0;
        }
      }
      if (ETCH_VEC_PUSH(&l->rects, etch__ui_rect,
                        {.track_id = track, .depth = depth, .ts = ts,
                         .end = e, .count = 1, .id = id, .key = key})) {
        rc = etch__error(ETCH_ENOMEM, "out of memory");
        break;
      }
    }
    duckdb_destroy_data_chunk(&chunk);
  }
  if (!rc && !*unordered) {
    const char *msg = duckdb_result_error(&r->r);
    if (msg) rc = etch__error(ETCH_ESQL, "%s", msg);
  }
  r->err = rc;
  return etch__res_close(r);
}

/* `tracks` NULL: every track. */
static int tile_c(etch__db *db, etch__ui_names *names, const int64_t *tracks,
                  size_t n, int64_t start, int64_t end, int64_t px,
                  int64_t md, int64_t tend, etch__ui_tile *out,
                  bool *unordered) {
  *unordered = false;
  agg a = {.all = !tracks};
  int rc = ETCH_OK;
  for (size_t i = 0; i < n && tracks && !rc; i++)
    if (!agg_add_track(&a, tracks[i]))
      rc = etch__error(ETCH_ENOMEM, "out of memory");
  /* The tracks by their range only: an IN list of five or more is a join
   * to DuckDB, whose rows do not come in the order stored; the rows of
   * tracks in the range but not in the list are left out here. */
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (size_t i = 0; tracks && i < n; i++) {
    if (tracks[i] < lo) lo = tracks[i];
    if (tracks[i] > hi) hi = tracks[i];
  }
  /* Slices that start up to the longest slice before the window reach it. */
  int64_t from = etch__sat_sub(etch__sat_sub(start, md), 1);
  etch__sql_arg b[] = {{.i = end}, {.i = from}, {.i = lo}, {.i = hi}};
  etch__res r;
  if (!rc)
    rc = etch__query_run(db,
                        tracks ? "SELECT id, ts, dur, track_id, depth, key_id"
                                 " FROM slice_data WHERE ts < $1 AND ts >= $2"
                                 " AND track_id >= $3 AND track_id <= $4"
                               : "SELECT id, ts, dur, track_id, depth, key_id"
                                 " FROM slice_data WHERE ts < $1 AND ts >= $2",
                        b, tracks ? 4 : 2, &r);
  if (!rc) rc = agg_rows(&r, &a, start, px, tend, unordered);
  if (rc || *unordered) {
    agg_free(&a);
    return rc;
  }
  /* By track, depth, start, id: each list is in that order but for ties
   * of start (sorted then). */
  size_t total = 0, nt = ETCH_VEC_COUNT(&a.tracks, agg_track);
  agg_track *at = ETCH_VEC_AT(&a.tracks, agg_track);
  if (nt) qsort(at, nt, sizeof *at, cmp_track);
  for (size_t i = 0; i < nt; i++) {
    const agg_list *d = ETCH_VEC_AT(&at[i].depths, agg_list);
    for (size_t k = 0; k < ETCH_VEC_COUNT(&at[i].depths, agg_list); k++)
      total += ETCH_VEC_COUNT(&d[k].rects, etch__ui_rect);
  }
  out->rects = total ? etch__malloc(total * sizeof *out->rects) : NULL;
  if (total && !out->rects) {
    agg_free(&a);
    return etch__error(ETCH_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < nt; i++) {
    agg_list *d = ETCH_VEC_AT(&at[i].depths, agg_list);
    for (size_t k = 0; k < ETCH_VEC_COUNT(&at[i].depths, agg_list); k++) {
      etch__ui_rect *lr = ETCH_VEC_AT(&d[k].rects, etch__ui_rect);
      size_t ln = ETCH_VEC_COUNT(&d[k].rects, etch__ui_rect);
      bool sorted = true;
      for (size_t j = 1; j < ln && sorted; j++)
        sorted = cmp_ts_id(&lr[j - 1], &lr[j]) <= 0;
      if (!sorted) qsort(lr, ln, sizeof *lr, cmp_ts_id);
      for (size_t j = 0; j < ln; j++) {
        ETCH_DCHECK(out->n < total);
        etch__ui_rect *x = &out->rects[out->n++];
        *x = lr[j];
        int64_t ni = etch__ui_names_index(names, x->key);
        x->name = ni >= 0 ? names->text[ni] : NULL;
      }
    }
  }
  agg_free(&a);
  out->borrowed = true;
  out->names = etch__ui_names_ref(names);
  return ETCH_OK;
}

/* What a tile is, checked in a checking build: each rectangle ends at or
 * after its start and stands for at least one slice, in (track, depth,
 * start) order. */
static void tile_check(const etch__ui_tile *t) {
#ifdef ETCH_DCHECKS
  for (size_t i = 0; i < t->n; i++) {
    const etch__ui_rect *x = &t->rects[i];
    ETCH_DCHECK(x->ts <= x->end && x->count >= 1 && x->depth >= 0);
    if (i) {
      const etch__ui_rect *p = &t->rects[i - 1];
      ETCH_DCHECK(p->track_id < x->track_id ||
                  (p->track_id == x->track_id &&
                   (p->depth < x->depth ||
                    (p->depth == x->depth && p->ts <= x->ts))));
    }
  }
#else
  (void)t;
#endif
}

/* The tile of `tracks` (NULL: every track), names from `names` (NULL: read
 * here). */
static int tile_any(etch__db *db, etch__ui_names *names, const int64_t *tracks,
                    size_t n, int64_t start, int64_t end, double ns_per_px,
                    int64_t md, etch__ui_tile *out) {
  memset(out, 0, sizeof *out);
  if ((tracks && !n) || end <= start) return ETCH_OK;
  if (!(ns_per_px >= 1)) ns_per_px = 1;
  if (ns_per_px > 1e15) ns_per_px = 1e15;
  int64_t px = (int64_t)ceil(ns_per_px);
  if (md < 0) md = etch__ui_max_dur(db);
  int64_t tend = trace_end(db);
  etch__ui_names *own = NULL;
  int rc = ETCH_OK;
  if (!names) {
    rc = etch__ui_names_load(db, false, &own);
    names = own;
  }
  bool unordered = false;
  if (!rc)
    rc = tile_c(db, names, tracks, n, start, end, px, md, tend, out,
                &unordered);
  etch__ui_names_unref(own);
  if (!rc && !unordered) tile_check(out);
  if (rc || !unordered) return rc;
  /* DuckDB's answer, for the tracks it has. */
  etch_vec all = {0};
  if (!tracks) {
    etch__res r;
    etch__sql_arg tb[] = {{.i = etch__sat_sub(start, md)}, {.i = end}};
    rc = etch__query_run(db,
                        "SELECT DISTINCT track_id FROM slice_data"
                        " WHERE ts >= $1 AND ts < $2 ORDER BY 1",
                        tb, 2, &r);
    if (rc) return rc;
    while (etch__res_next(&r)) {
      int64_t *x = ETCH_VEC_NEW(&all, int64_t);
      if (!x) {
        r.err = ETCH_ENOMEM;
        break;
      }
      *x = etch__res_i64(&r, 0);
    }
    if ((rc = etch__res_close(&r))) {
      free(all.data);
      return rc;
    }
    tracks = (const int64_t *)all.data;
    n = ETCH_VEC_COUNT(&all, int64_t);
  }
  rc = n ? tile_sql(db, tracks, n, start, end, px, md, tend, out) : ETCH_OK;
  free(all.data);
  if (!rc) tile_check(out);
  return rc;
}

int etch__ui_tile_slices(etch__db *db, const int64_t *tracks, size_t n,
                         int64_t start, int64_t end, double ns_per_px,
                         int64_t md, etch__ui_tile *out) {
  return tile_any(db, NULL, tracks, n, start, end, ns_per_px, md, out);
}

int etch__ui_tile_slices_named(etch__db *db, etch__ui_names *names,
                               const int64_t *tracks, size_t n, int64_t start,
                               int64_t end, double ns_per_px, int64_t md,
                               etch__ui_tile *out) {
  return tile_any(db, names, tracks, n, start, end, ns_per_px, md, out);
}

int etch__ui_tile_all(etch__db *db, etch__ui_names *names, int64_t start,
                      int64_t end, double ns_per_px, int64_t max_dur,
                      etch__ui_tile *out) {
  return tile_any(db, names, NULL, 0, start, end, ns_per_px, max_dur, out);
}

int etch__ui_tile_slices_sql(etch__db *db, const int64_t *tracks, size_t n,
                             int64_t start, int64_t end, double ns_per_px,
                             etch__ui_tile *out) {
  memset(out, 0, sizeof *out);
  if (!n || end <= start) return ETCH_OK;
  if (!(ns_per_px >= 1)) ns_per_px = 1;
  if (ns_per_px > 1e15) ns_per_px = 1e15;
  return tile_sql(db, tracks, n, start, end, (int64_t)ceil(ns_per_px),
                  etch__ui_max_dur(db), trace_end(db), out);
}

void etch__ui_tile_free(etch__ui_tile *t) {
  if (!t->borrowed)
    for (size_t i = 0; i < t->n; i++) free(t->rects[i].name);
  free(t->rects);
  etch__ui_names_unref(t->names);
  memset(t, 0, sizeof *t);
}

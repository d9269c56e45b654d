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
    x->key = -1;
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
  etch__ui_rect *r;
  size_t n, cap;
  size_t open; /* the narrow group being grown, or SIZE_MAX */
  int64_t col, glen;
  int64_t cstart, cend; /* its column's times, [cstart, cend) (or empty) */
} agg_list;

typedef struct agg_track {
  int64_t track;
  agg_list *d; /* by depth */
  size_t nd;
} agg_track;

typedef struct agg {
  agg_track *t;
  size_t nt;
  etch_u64map slot; /* track id -> index in t */
  bool all;         /* every track (no list given) */
} agg;

static void agg_free(agg *a) {
  for (size_t i = 0; i < a->nt; i++) {
    for (size_t k = 0; k < a->t[i].nd; k++) free(a->t[i].d[k].r);
    free(a->t[i].d);
  }
  free(a->t);
  etch__u64map_free(&a->slot);
}

static agg_track *agg_add_track(agg *a, int64_t track) {
  int64_t k;
  if (etch__u64map_get(&a->slot, (uint64_t)track, &k)) return &a->t[k];
  agg_track *g = etch__realloc(a->t, (a->nt + 1) * sizeof *g);
  if (!g) return NULL;
  a->t = g;
  if (!etch__u64map_put(&a->slot, (uint64_t)track, (int64_t)a->nt)) return NULL;
  a->t[a->nt] = (agg_track){.track = track};
  return &a->t[a->nt++];
}

static agg_list *agg_depth(agg_track *t, int64_t depth) {
  if ((size_t)depth >= t->nd) {
    size_t nc = t->nd ? t->nd : 8;
    while (nc <= (size_t)depth) nc *= 2;
    agg_list *g = etch__realloc(t->d, nc * sizeof *g);
    if (!g) return NULL;
    for (size_t i = t->nd; i < nc; i++) g[i] = (agg_list){.open = SIZE_MAX};
    t->d = g;
    t->nd = nc;
  }
  return &t->d[depth];
}

static etch__ui_rect *agg_push(agg_list *l) {
  if (l->n == l->cap) {
    size_t nc = l->cap ? l->cap * 2 : 64;
    etch__ui_rect *g = etch__realloc(l->r, nc * sizeof *g);
    if (!g) return NULL;
    l->r = g;
    l->cap = nc;
  }
  return &l->r[l->n++];
}

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
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
          last = &a->t[k];
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
                        : floor_div(etch__sat_sub(ts, start), px);
        if (l->open != SIZE_MAX && c == l->col) {
          etch__ui_rect *g = &l->r[l->open];
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
        l->open = l->n;
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
      etch__ui_rect *x = agg_push(l);
      if (!x) {
        rc = etch__error(ETCH_ENOMEM, "out of memory");
        break;
      }
      *x = (etch__ui_rect){.track_id = track, .depth = depth, .ts = ts,
                           .end = e, .count = 1, .id = id, .key = key};
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
  size_t total = 0;
  qsort(a.t, a.nt, sizeof *a.t, cmp_track);
  for (size_t i = 0; i < a.nt; i++)
    for (size_t k = 0; k < a.t[i].nd; k++) total += a.t[i].d[k].n;
  out->rects = total ? etch__malloc(total * sizeof *out->rects) : NULL;
  if (total && !out->rects) {
    agg_free(&a);
    return etch__error(ETCH_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < a.nt; i++) {
    for (size_t k = 0; k < a.t[i].nd; k++) {
      agg_list *l = &a.t[i].d[k];
      bool sorted = true;
      for (size_t j = 1; j < l->n && sorted; j++)
        sorted = cmp_ts_id(&l->r[j - 1], &l->r[j]) <= 0;
      if (!sorted) qsort(l->r, l->n, sizeof *l->r, cmp_ts_id);
      for (size_t j = 0; j < l->n; j++) {
        etch__ui_rect *x = &out->rects[out->n++];
        *x = l->r[j];
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
  if (rc || !unordered) return rc;
  /* DuckDB's answer, for the tracks it has. */
  int64_t *all = NULL;
  size_t na = 0;
  if (!tracks) {
    etch__res r;
    etch__sql_arg tb[] = {{.i = etch__sat_sub(start, md)}, {.i = end}};
    rc = etch__query_run(db,
                        "SELECT DISTINCT track_id FROM slice_data"
                        " WHERE ts >= $1 AND ts < $2 ORDER BY 1",
                        tb, 2, &r);
    if (rc) return rc;
    size_t cap = 0;
    while (etch__res_next(&r)) {
      if (na == cap) {
        size_t nc = cap ? cap * 2 : 64;
        int64_t *g = etch__realloc(all, nc * sizeof *g);
        if (!g) {
          r.err = etch__error(ETCH_ENOMEM, "out of memory");
          break;
        }
        all = g;
        cap = nc;
      }
      all[na++] = etch__res_i64(&r, 0);
    }
    if ((rc = etch__res_close(&r))) {
      free(all);
      return rc;
    }
    tracks = all;
    n = na;
  }
  rc = n ? tile_sql(db, tracks, n, start, end, px, md, tend, out) : ETCH_OK;
  free(all);
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

/* ---- the overview of a big trace ------------------------------------------------ */

/*
 * A trace of many slices gets an overview when its first coarse tile is
 * asked for: the whole trace's tile at kLodColumns columns (R0 ns a
 * column), held in memory with its names interned. A window at least R0
 * ns a pixel is then merged from it in C, without DuckDB: a rectangle of
 * the overview at least a pixel wide (a slice alone) is kept, the others
 * are merged by the column their start falls in, as tiles merge slices.
 * The answer differs from the exact tile only in which column a merged
 * run of the overview counts in (all of it in the column of its first
 * slice): by at most R0 ns, under a pixel.
 */
enum { kLodColumns = 16384 };

/* The rectangles of one track and depth: rects[begin, end), the widest
 * `maxw` ns (so a window's first one is found by bisection). */
typedef struct lod_run {
  int64_t track, maxw;
  size_t begin, end;
} lod_run;

struct etch__ui_lod {
  int64_t r0;
  etch__ui_rect *rects; /* by track, depth, ts; names point into `names` */
  size_t n;
  etch__ui_names *names;
  lod_run *runs;
  size_t nruns;
};

void etch__ui_lod_free(etch__ui_lod *lod) {
  if (!lod) return;
  etch__ui_names_unref(lod->names);
  free(lod->rects);
  free(lod->runs);
  free(lod);
}

int64_t etch__ui_lod_resolution(const etch__ui_lod *lod) { return lod->r0; }

/* The whole trace's [start, end): the last event's end inside. */
static int trace_window(etch__db *db, int64_t *start, int64_t *end) {
  etch__res r;
  *start = *end = 0;
  int rc = etch__query_run(db,
                          "SELECT CAST(coalesce(min(start_ts), 0) AS BIGINT),"
                          " CAST(coalesce(max(end_ts), 0) AS BIGINT) FROM trace_bounds",
                          NULL, 0, &r);
  if (rc) return rc;
  if (etch__res_next(&r)) {
    *start = etch__res_i64(&r, 0);
    *end = etch__res_i64(&r, 1) + 1;
  }
  if ((rc = etch__res_close(&r))) return rc;
  if (*end <= *start) *end = *start + 1;
  return ETCH_OK;
}

static int lod_build(etch__db *db, etch__ui_names *names, int64_t start,
                     int64_t end, int64_t columns, int64_t max_dur,
                     bool starting_only, etch__ui_lod **out);

int etch__ui_lod_build(etch__db *db, int64_t columns, int64_t max_dur,
                       etch__ui_lod **out) {
  return etch__ui_lod_build_named(db, NULL, columns, max_dur, out);
}

int etch__ui_lod_build_named(etch__db *db, etch__ui_names *names,
                             int64_t columns, int64_t max_dur,
                             etch__ui_lod **out) {
  *out = NULL;
  int64_t start, end;
  int rc = trace_window(db, &start, &end);
  if (rc) return rc;
  return lod_build(db, names, start, end, columns, max_dur, false, out);
}

int etch__ui_lod_build_stretch(etch__db *db, int64_t start, int64_t end,
                               int64_t columns, int64_t max_dur,
                               etch__ui_lod **out) {
  return etch__ui_lod_build_stretch_named(db, NULL, start, end, columns,
                                          max_dur, out);
}

int etch__ui_lod_build_stretch_named(etch__db *db, etch__ui_names *names,
                                     int64_t start, int64_t end,
                                     int64_t columns, int64_t max_dur,
                                     etch__ui_lod **out) {
  *out = NULL;
  if (end <= start) return etch__error(ETCH_EINVAL, "an empty stretch");
  return lod_build(db, names, start, end, columns, max_dur, true, out);
}

/*
 * The overview of [start, end) at `columns` columns; `starting_only`: of
 * the slices that start in it (the rectangles of those that start before
 * are left out: their columns are before the first, so no rectangle mixes
 * the two).
 */
static int lod_build(etch__db *db, etch__ui_names *names, int64_t start,
                     int64_t end, int64_t columns, int64_t max_dur,
                     bool starting_only, etch__ui_lod **out) {
  *out = NULL;
  if (columns <= 0) columns = kLodColumns;
  int rc;
  if (max_dur < 0) max_dur = etch__ui_max_dur(db);
  etch__ui_names *own = NULL;
  if (!names) {
    if ((rc = etch__ui_names_load(db, false, &own))) return rc;
    names = own;
  }
  etch__ui_lod *lod = etch__calloc(1, sizeof *lod);
  if (!lod) {
    etch__ui_names_unref(own);
    return etch__error(ETCH_ENOMEM, "out of memory");
  }
  double r0 = (double)(end - start) / (double)columns;
  lod->r0 = r0 < 1 ? 1 : (int64_t)ceil(r0);
  /* Every track with slices there. */
  etch__ui_tile t;
  rc = tile_any(db, names, NULL, 0, start, end, (double)lod->r0, max_dur, &t);
  etch__ui_names_unref(own);
  if (rc) {
    free(lod);
    return rc;
  }
  if (starting_only) {
    size_t k = 0;
    for (size_t i = 0; i < t.n; i++) {
      if (t.rects[i].ts < start) {
        if (!t.borrowed) free(t.rects[i].name);
        continue;
      }
      t.rects[k++] = t.rects[i];
    }
    t.n = k;
  }
  /* The names: the tile's (DuckDB's answer owns its strings: they are
   * given the names' texts instead). */
  if (!t.borrowed) {
    for (size_t i = 0; i < t.n && !rc; i++) {
      const char *nm = t.rects[i].name;
      int64_t k = etch__ui_names_find(names, nm, nm ? strlen(nm) : 0);
      free(t.rects[i].name);
      t.rects[i].name = k >= 0 ? names->text[k] : NULL;
    }
    t.borrowed = true;
    t.names = etch__ui_names_ref(names);
  }
  lod->names = t.names;
  t.names = NULL;
  lod->rects = t.rects;
  lod->n = t.n;
  /* The runs of a track and depth. */
  size_t rcap = 0;
  for (size_t i = 0; i < t.n && !rc; i++) {
    const etch__ui_rect *x = &t.rects[i];
    lod_run *last = lod->nruns ? &lod->runs[lod->nruns - 1] : NULL;
    if (!last || last->track != x->track_id ||
        t.rects[last->begin].depth != x->depth) {
      if (lod->nruns == rcap) {
        size_t nc = rcap ? rcap * 2 : 64;
        lod_run *g = etch__realloc(lod->runs, nc * sizeof *g);
        if (!g) {
          rc = etch__error(ETCH_ENOMEM, "out of memory");
          break;
        }
        lod->runs = g;
        rcap = nc;
      }
      last = &lod->runs[lod->nruns++];
      *last = (lod_run){.track = x->track_id, .begin = i};
    }
    last->end = i + 1;
    if (x->end - x->ts > last->maxw) last->maxw = x->end - x->ts;
  }
  if (rc) {
    etch__ui_lod_free(lod);
    return rc;
  }
  *out = lod;
  return ETCH_OK;
}

static int cmp_rect(const void *a, const void *b) {
  const etch__ui_rect *x = a, *y = b;
  if (x->track_id != y->track_id) return x->track_id < y->track_id ? -1 : 1;
  if (x->depth != y->depth) return x->depth < y->depth ? -1 : 1;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

int etch__ui_lod_tile(const etch__ui_lod *lod, const int64_t *tracks,
                      size_t n, int64_t start, int64_t end, double ns_per_px,
                      etch__ui_tile *out) {
  memset(out, 0, sizeof *out);
  if (!n || end <= start) return ETCH_OK;
  int64_t px = ns_per_px < 1 ? 1 : (int64_t)ceil(ns_per_px);
  size_t cap = 0;
  size_t group = SIZE_MAX;      /* the merged rectangle being grown */
  int64_t gcol = 0, glen = 0;   /* its column, its longest part */
  for (size_t ri = 0; ri < lod->nruns; ri++) {
   const lod_run *run = &lod->runs[ri];
   bool wanted = false;
   for (size_t k = 0; k < n && !wanted; k++) wanted = tracks[k] == run->track;
   if (!wanted) continue;
   /* The first rectangle that can reach the window: none before it does
    * (none is wider than maxw). */
   size_t lo = run->begin, hi = run->end;
   while (lo < hi) {
     size_t mid = lo + (hi - lo) / 2;
     if (lod->rects[mid].ts < etch__sat_sub(start, run->maxw)) lo = mid + 1;
     else hi = mid;
   }
   group = SIZE_MAX;
   for (size_t i = lo; i < run->end && lod->rects[i].ts < end; i++) {
    const etch__ui_rect *x = &lod->rects[i];
    if (x->end < start) continue;
    int64_t w = x->end - x->ts;
    bool alone = x->count == 1 && w >= px;
    int64_t col = floor_div(etch__sat_sub(x->ts, start), px);
    if (!alone && group != SIZE_MAX) {
      etch__ui_rect *g = &out->rects[group];
      if (g->track_id == x->track_id && g->depth == x->depth && gcol == col) {
        if (x->end > g->end) g->end = x->end;
        g->count += x->count;
        if (x->id < g->id) g->id = x->id;
        if (w > glen) {
          glen = w;
          g->name = x->name;
        }
        continue;
      }
    }
    if (out->n == cap) {
      size_t nc = cap ? cap * 2 : 1024;
      etch__ui_rect *g = etch__realloc(out->rects, nc * sizeof *g);
      if (!g) {
        free(out->rects);
        memset(out, 0, sizeof *out);
        return etch__error(ETCH_ENOMEM, "out of memory");
      }
      out->rects = g;
      cap = nc;
    }
    out->rects[out->n] = *x;
    if (!alone) {
      group = out->n;
      gcol = col;
      glen = w;
    }
    out->n++;
   }
  }
  if (out->n) qsort(out->rects, out->n, sizeof *out->rects, cmp_rect);
  out->borrowed = true;
  return ETCH_OK;
}

int etch__ui_lods_tile(etch__ui_lod *const *lods, size_t nlods,
                       const int64_t *tracks, size_t n, int64_t start,
                       int64_t end, double ns_per_px, etch__ui_tile *out) {
  memset(out, 0, sizeof *out);
  out->borrowed = true;
  size_t cap = 0;
  for (size_t i = 0; i < nlods; i++) {
    etch__ui_tile part;
    int rc = etch__ui_lod_tile(lods[i], tracks, n, start, end, ns_per_px, &part);
    if (rc) {
      free(out->rects);
      memset(out, 0, sizeof *out);
      return rc;
    }
    if (out->n + part.n > cap) {
      size_t nc = cap ? cap : 1024;
      while (nc < out->n + part.n) nc *= 2;
      etch__ui_rect *g = etch__realloc(out->rects, nc * sizeof *g);
      if (!g) {
        free(part.rects);
        free(out->rects);
        memset(out, 0, sizeof *out);
        return etch__error(ETCH_ENOMEM, "out of memory");
      }
      out->rects = g;
      cap = nc;
    }
    if (part.n) memcpy(out->rects + out->n, part.rects, part.n * sizeof *part.rects);
    out->n += part.n;
    free(part.rects);
  }
  if (out->n) qsort(out->rects, out->n, sizeof *out->rects, cmp_rect);
  return ETCH_OK;
}

/* ---- counters in memory ------------------------------------------------------------ */

/*
 * A trace's counter values, held in memory (by track, then time) when they
 * are few enough: a tile's counters are then read here, not queried. The
 * answer is the query's (api.c): per track and pixel column the first
 * time, the least and greatest value and the last value (the latest time's;
 * on a tie of times, the last stored), and before the window the value in
 * force at its start.
 */
struct etch__ui_counters {
  int64_t *track; /* sorted */
  size_t *begin;  /* track i's values: [begin[i], begin[i + 1]) */
  size_t ntracks;
  int64_t *ts;
  double *v;
  size_t n;
};

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* (ts, id, value) triples by ts, then id. */
static int cmp_ts_id_value(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
  return (x[1] > y[1]) - (x[1] < y[1]);
}

void etch__ui_counters_free(etch__ui_counters *c) {
  if (!c) return;
  free(c->track);
  free(c->begin);
  free(c->ts);
  free(c->v);
  free(c);
}

int etch__ui_counters_load(etch__db *db, int64_t max_values,
                           etch__ui_counters **out) {
  *out = NULL;
  etch__res r;
  int64_t n = 0, odd = 0;
  /* NULL or NaN values: min, max and arg_max as DuckDB has them are not
   * worth copying; such a trace keeps the query. */
  int rc = etch__query_run(db,
                          "SELECT count(*), count(*) FILTER (WHERE value IS NULL"
                          " OR isnan(value)) FROM counter",
                          NULL, 0, &r);
  if (rc) return rc;
  if (etch__res_next(&r)) {
    n = etch__res_i64(&r, 0);
    odd = etch__res_i64(&r, 1);
  }
  if ((rc = etch__res_close(&r))) return rc;
  if (n > max_values || odd) return ETCH_OK;
  etch__ui_counters *c = etch__calloc(1, sizeof *c);
  if (!c) return etch__error(ETCH_ENOMEM, "out of memory");
  size_t cap = (size_t)n + 1;
  c->ts = etch__malloc(cap * sizeof *c->ts);
  c->v = etch__malloc(cap * sizeof *c->v);
  c->track = etch__malloc(cap * sizeof *c->track);
  c->begin = etch__malloc((cap + 1) * sizeof *c->begin);
  if (!c->ts || !c->v || !c->track || !c->begin) {
    etch__ui_counters_free(c);
    return etch__error(ETCH_ENOMEM, "out of memory");
  }
  /* Read as stored (DuckDB's ORDER BY cost 20 - 45 ms of CPU for 215 K
   * values), then put by track here, each track's values kept in the order
   * read; a track whose values were not in (ts, id) order is sorted. */
  int64_t *id = etch__malloc(cap * sizeof *id);
  int64_t *tr = etch__malloc(cap * sizeof *tr);
  int64_t *ts = etch__malloc(cap * sizeof *ts);
  double *v = etch__malloc(cap * sizeof *v);
  if (!id || !tr || !ts || !v) rc = etch__error(ETCH_ENOMEM, "out of memory");
  if (!rc)
    rc = etch__query_run(db, "SELECT track_id, ts, value, id FROM counter",
                        NULL, 0, &r);
  size_t m = 0;
  if (!rc) {
    duckdb_data_chunk chunk;
    while ((chunk = duckdb_fetch_chunk(r.r)) != NULL) {
      idx_t k = duckdb_data_chunk_get_size(chunk);
      if (m + k > cap) { /* rows added since the count: not this cache */
        r.err = etch__error(ETCH_EINVAL, "counter changed while read");
        duckdb_destroy_data_chunk(&chunk);
        break;
      }
      const int64_t *c0 = duckdb_vector_get_data(duckdb_data_chunk_get_vector(chunk, 0));
      const int64_t *c1 = duckdb_vector_get_data(duckdb_data_chunk_get_vector(chunk, 1));
      const double *c2 = duckdb_vector_get_data(duckdb_data_chunk_get_vector(chunk, 2));
      const int64_t *c3 = duckdb_vector_get_data(duckdb_data_chunk_get_vector(chunk, 3));
      memcpy(tr + m, c0, k * sizeof *tr);
      memcpy(ts + m, c1, k * sizeof *ts);
      memcpy(v + m, c2, k * sizeof *v);
      memcpy(id + m, c3, k * sizeof *id);
      m += k;
      duckdb_destroy_data_chunk(&chunk);
    }
    if (!r.err) {
      const char *msg = duckdb_result_error(&r.r);
      if (msg) r.err = etch__error(ETCH_ESQL, "%s", msg);
    }
    rc = etch__res_close(&r);
  }
  /* The tracks, sorted; each value's place by a counting sort. */
  etch_u64map slot = {0};
  size_t *at = NULL;
  for (size_t i = 0; !rc && i < m; i++) {
    int64_t k;
    if (etch__u64map_get(&slot, (uint64_t)tr[i], &k)) continue;
    c->track[c->ntracks++] = tr[i];
    if (!etch__u64map_put(&slot, (uint64_t)tr[i], 0))
      rc = etch__error(ETCH_ENOMEM, "out of memory");
  }
  if (!rc) {
    qsort(c->track, c->ntracks, sizeof *c->track, cmp_i64);
    for (size_t i = 0; i < c->ntracks && !rc; i++)
      if (!etch__u64map_put(&slot, (uint64_t)c->track[i], (int64_t)i))
        rc = etch__error(ETCH_ENOMEM, "out of memory");
    at = etch__calloc(c->ntracks + 1, sizeof *at);
    if (!at) rc = etch__error(ETCH_ENOMEM, "out of memory");
  }
  int64_t *ids = NULL;
  if (!rc) {
    ids = etch__malloc(cap * sizeof *ids);
    if (!ids) rc = etch__error(ETCH_ENOMEM, "out of memory");
  }
  if (!rc) {
    for (size_t i = 0; i < m; i++) {
      int64_t k = 0;
      etch__u64map_get(&slot, (uint64_t)tr[i], &k);
      at[k + 1]++;
      tr[i] = k; /* the track's index from now on */
    }
    for (size_t i = 0; i < c->ntracks; i++) at[i + 1] += at[i];
    memcpy(c->begin, at, (c->ntracks + 1) * sizeof *at);
    for (size_t i = 0; i < m; i++) {
      size_t j = at[tr[i]]++;
      c->ts[j] = ts[i];
      c->v[j] = v[i];
      ids[j] = id[i];
    }
    c->n = m;
    for (size_t k = 0; k < c->ntracks; k++) {
      size_t b = c->begin[k], e = c->begin[k + 1];
      bool sorted = true;
      for (size_t i = b + 1; i < e && sorted; i++)
        sorted = c->ts[i - 1] < c->ts[i] ||
                 (c->ts[i - 1] == c->ts[i] && ids[i - 1] <= ids[i]);
      if (sorted) continue;
      /* (ts, id, value) triples sorted together. */
      struct tv {
        int64_t ts, id;
        double v;
      } *x = etch__malloc((e - b) * sizeof *x);
      if (!x) {
        rc = etch__error(ETCH_ENOMEM, "out of memory");
        break;
      }
      for (size_t i = b; i < e; i++)
        x[i - b] = (struct tv){c->ts[i], ids[i], c->v[i]};
      qsort(x, e - b, sizeof *x, cmp_ts_id_value);
      for (size_t i = b; i < e; i++) {
        c->ts[i] = x[i - b].ts;
        c->v[i] = x[i - b].v;
      }
      free(x);
    }
  }
  etch__u64map_free(&slot);
  free(at);
  free(ids);
  free(id);
  free(tr);
  free(ts);
  free(v);
  if (rc) {
    etch__ui_counters_free(c);
    return rc;
  }
  *out = c;
  return ETCH_OK;
}

int etch__ui_counters_tile(const etch__ui_counters *c, const int64_t *tracks,
                           size_t n, int64_t start, int64_t end, int64_t p,
                           etch__ui_counter_row **rows, size_t *nrows) {
  *rows = NULL;
  *nrows = 0;
  if (!n || p < 1) return ETCH_OK;
  int64_t *want = etch__malloc(n * sizeof *want);
  if (!want) return etch__error(ETCH_ENOMEM, "out of memory");
  memcpy(want, tracks, n * sizeof *want);
  qsort(want, n, sizeof *want, cmp_i64);
  size_t cap = 0;
  etch__ui_counter_row *out = NULL;
  int rc = ETCH_OK;
#define PUSH(...)                                                        \
  do {                                                                   \
    if (*nrows == cap) {                                                 \
      size_t nc_ = cap ? cap * 2 : 256;                                  \
      etch__ui_counter_row *g_ = etch__realloc(out, nc_ * sizeof *g_);   \
      if (!g_) {                                                         \
        rc = etch__error(ETCH_ENOMEM, "out of memory");                  \
        goto done;                                                       \
      }                                                                  \
      out = g_;                                                          \
      cap = nc_;                                                         \
    }                                                                    \
    out[(*nrows)++] = (etch__ui_counter_row){__VA_ARGS__};               \
  } while (0)
  for (size_t w = 0; w < n; w++) {
    if (w && want[w] == want[w - 1]) continue;
    /* The track among the loaded ones (by bisection). */
    size_t lo = 0, hi = c->ntracks;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (c->track[mid] < want[w]) lo = mid + 1;
      else hi = mid;
    }
    if (lo == c->ntracks || c->track[lo] != want[w]) continue;
    size_t b = c->begin[lo], e = c->begin[lo + 1];
    /* The first value at or after start. */
    size_t a = b, z = e;
    while (a < z) {
      size_t mid = a + (z - a) / 2;
      if (c->ts[mid] < start) a = mid + 1;
      else z = mid;
    }
    if (a > b) {
      double v = c->v[a - 1];
      PUSH(.track = want[w], .ts = c->ts[a - 1], .lo = v, .hi = v, .last = v);
    }
    /* ts >= start here: (ts - start) / p is the column, held at INT64_MAX
     * for a window that starts absurdly early (the query errs there). */
    for (size_t i = a; i < e && c->ts[i] < end;) {
      int64_t col = etch__sat_sub(c->ts[i], start) / p;
      etch__ui_counter_row x = {.track = want[w], .ts = c->ts[i],
                                .lo = c->v[i], .hi = c->v[i], .last = c->v[i]};
      for (i++; i < e && c->ts[i] < end &&
                etch__sat_sub(c->ts[i], start) / p == col;
           i++) {
        if (c->v[i] < x.lo) x.lo = c->v[i];
        if (c->v[i] > x.hi) x.hi = c->v[i];
        x.last = c->v[i];
      }
      PUSH(x.track, x.ts, x.lo, x.hi, x.last);
    }
  }
#undef PUSH
done:
  free(want);
  if (rc) {
    free(out);
    *nrows = 0;
    return rc;
  }
  *rows = out;
  return ETCH_OK;
}

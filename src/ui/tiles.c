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
#include "base/map.h"
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

/* The trace's end, where a slice still open at the end is drawn to. */
static int64_t trace_end(etch__db *db) {
  etch__res r;
  int64_t e = 0;
  if (etch__ui_query(db,
                     "SELECT CAST(coalesce(max(end_ts), 0) AS BIGINT)"
                     " FROM trace_bounds",
                     NULL, 0, &r) != ETCH_OK)
    return 0;
  if (etch__res_next(&r)) e = etch__res_i64(&r, 0);
  etch__res_close(&r);
  return e;
}

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
  /* One scan, one aggregation: a slice at least a pixel wide is a group
   * of its own (keyed by -id, below every column), the others group by
   * column. Integer division rounds towards zero: columns are counted
   * from k0 before the window, far enough that every slice the filter
   * lets in has a column >= 0, so the rounding is a floor. */
  char *sql = NULL;
  int len = asprintf(
      &sql,
      "WITH v AS (SELECT id, ts, CASE WHEN dur < 0 THEN greatest($6 - ts, 0)"
      " ELSE dur END AS d, track_id, depth, name"
      " FROM slice WHERE track_id IN (%s) AND ts < $1 AND ts >= $2 - $3 - 1)"
      " SELECT track_id, depth, min(ts), max(ts + d), count(*), min(id),"
      " arg_max(name, d) FROM v WHERE ts + d >= $2"
      " GROUP BY track_id, depth,"
      " CASE WHEN d >= $4 THEN -id ELSE (ts - $2 + $5) // $4 END"
      " ORDER BY 1, 2, 3, 6",
      in);
  free(in);
  if (len < 0) return etch__error(ETCH_ENOMEM, "out of memory");
  int64_t k0 = (md / px + 2) * px;
  etch__ui_bind b[] = {{.i = end},  {.i = start}, {.i = md},
                       {.i = px},   {.i = k0},    {.i = trace_end(db)}};
  etch__res r;
  int rc = etch__ui_query(db, sql, b, 6, &r);
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
  if (!t->borrowed)
    for (size_t i = 0; i < t->n; i++) free(t->rects[i].name);
  free(t->rects);
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
  char **names;
  size_t nnames;
  lod_run *runs;
  size_t nruns;
};

void etch__ui_lod_free(etch__ui_lod *lod) {
  if (!lod) return;
  for (size_t i = 0; i < lod->nnames; i++) free(lod->names[i]);
  free(lod->names);
  free(lod->rects);
  free(lod->runs);
  free(lod);
}

int64_t etch__ui_lod_resolution(const etch__ui_lod *lod) { return lod->r0; }

/* The whole trace's [start, end): the last event's end inside. */
static int trace_window(etch__db *db, int64_t *start, int64_t *end) {
  etch__res r;
  *start = *end = 0;
  int rc = etch__ui_query(db,
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

static int lod_build(etch__db *db, int64_t start, int64_t end,
                     int64_t columns, int64_t max_dur, bool starting_only,
                     etch__ui_lod **out);

int etch__ui_lod_build(etch__db *db, int64_t columns, int64_t max_dur,
                       etch__ui_lod **out) {
  *out = NULL;
  int64_t start, end;
  int rc = trace_window(db, &start, &end);
  if (rc) return rc;
  return lod_build(db, start, end, columns, max_dur, false, out);
}

int etch__ui_lod_build_stretch(etch__db *db, int64_t start, int64_t end,
                               int64_t columns, int64_t max_dur,
                               etch__ui_lod **out) {
  *out = NULL;
  if (end <= start) return etch__error(ETCH_EINVAL, "an empty stretch");
  return lod_build(db, start, end, columns, max_dur, true, out);
}

/*
 * The overview of [start, end) at `columns` columns; `starting_only`: of
 * the slices that start in it (the rectangles of those that start before
 * are left out: their columns are before the first, so no rectangle mixes
 * the two).
 */
static int lod_build(etch__db *db, int64_t start, int64_t end,
                     int64_t columns, int64_t max_dur, bool starting_only,
                     etch__ui_lod **out) {
  *out = NULL;
  if (columns <= 0) columns = kLodColumns;
  etch__res r;
  int rc;
  int64_t *tracks = NULL;
  size_t nt = 0, cap = 0;
  /* The tracks with slices in the stretch (the filter lets DuckDB skip the
   * row groups outside it). */
  if (max_dur < 0) max_dur = etch__ui_max_dur(db);
  etch__ui_bind tb[] = {{.i = etch__sat_sub(start, max_dur)}, {.i = end}};
  rc = etch__ui_query(db,
                      "SELECT DISTINCT track_id FROM slice"
                      " WHERE ts >= $1 AND ts < $2 ORDER BY 1",
                      tb, 2, &r);
  if (rc) return rc;
  while (etch__res_next(&r)) {
    if (nt == cap) {
      size_t nc = cap ? cap * 2 : 64;
      int64_t *g = etch__realloc(tracks, nc * sizeof *g);
      if (!g) {
        r.err = etch__error(ETCH_ENOMEM, "out of memory");
        break;
      }
      tracks = g;
      cap = nc;
    }
    tracks[nt++] = etch__res_i64(&r, 0);
  }
  if ((rc = etch__res_close(&r))) {
    free(tracks);
    return rc;
  }
  etch__ui_lod *lod = etch__calloc(1, sizeof *lod);
  if (!lod) {
    free(tracks);
    return etch__error(ETCH_ENOMEM, "out of memory");
  }
  double r0 = (double)(end - start) / (double)columns;
  lod->r0 = r0 < 1 ? 1 : (int64_t)ceil(r0);
  etch__ui_tile t;
  rc = etch__ui_tile_slices(db, tracks, nt, start, end, (double)lod->r0,
                            max_dur, &t);
  free(tracks);
  if (rc) {
    free(lod);
    return rc;
  }
  if (starting_only) {
    size_t k = 0;
    for (size_t i = 0; i < t.n; i++) {
      if (t.rects[i].ts < start) {
        free(t.rects[i].name);
        continue;
      }
      t.rects[k++] = t.rects[i];
    }
    t.n = k;
  }
  /* Intern the names: the tile's strings move into the table. */
  etch_u64map seen = {0};
  size_t ncap = 0;
  for (size_t i = 0; i < t.n && !rc; i++) {
    char *nm = t.rects[i].name ? t.rects[i].name : etch__strdup("");
    t.rects[i].name = NULL;
    uint64_t h = nm ? etch__hash_bytes(nm, strlen(nm), 0) : 0;
    int64_t k;
    for (;;) { /* the next key on a clash of hashes */
      if (!nm || !etch__u64map_get(&seen, h, &k) || !strcmp(lod->names[k], nm))
        break;
      h++;
    }
    if (!nm) {
      rc = etch__error(ETCH_ENOMEM, "out of memory");
      break;
    }
    if (etch__u64map_get(&seen, h, &k)) {
      free(nm);
    } else {
      if (lod->nnames == ncap) {
        size_t nc = ncap ? ncap * 2 : 64;
        char **g = etch__realloc(lod->names, nc * sizeof *g);
        if (!g) {
          free(nm);
          rc = etch__error(ETCH_ENOMEM, "out of memory");
          break;
        }
        lod->names = g;
        ncap = nc;
      }
      k = (int64_t)lod->nnames;
      lod->names[lod->nnames++] = nm;
      if (!etch__u64map_put(&seen, h, k)) {
        rc = etch__error(ETCH_ENOMEM, "out of memory");
        break;
      }
    }
    t.rects[i].name = lod->names[k];
  }
  etch__u64map_free(&seen);
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
    for (size_t i = 0; i < t.n; i++)
      if (t.rects[i].name && !lod->nnames) free(t.rects[i].name);
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
    int64_t col = x->ts >= start ? (x->ts - start) / px
                                 : -((start - x->ts + px - 1) / px);
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

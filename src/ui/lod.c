/*
 * lod.c - the overview of a big trace (its level of detail): the whole
 * trace's tile at a coarse resolution, held in memory, from which the
 * timeline's coarse windows are merged without DuckDB; and the finer
 * overviews of stretches of the trace, built as windows need them.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "ui/str.h"
#include "ui/ui.h"

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
  rc = etch__ui_tile_all(db, names, start, end, (double)lod->r0, max_dur, &t);
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
  etch_vec runs = {0};
  for (size_t i = 0; i < t.n && !rc; i++) {
    const etch__ui_rect *x = &t.rects[i];
    lod_run *last = lod->nruns ? &lod->runs[lod->nruns - 1] : NULL;
    if (!last || last->track != x->track_id ||
        t.rects[last->begin].depth != x->depth) {
      if (!(last = ETCH_VEC_NEW(&runs, lod_run))) {
        rc = ETCH_ENOMEM;
        break;
      }
      lod->runs = (lod_run *)runs.data;
      lod->nruns++;
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
  etch_vec v = {0};
  size_t group = SIZE_MAX;      /* the merged rectangle being grown */
  int64_t gcol = 0, glen = 0;   /* its column, its longest part */
  for (size_t ri = 0; ri < lod->nruns; ri++) {
   const lod_run *run = &lod->runs[ri];
   ETCH_DCHECK(run->begin < run->end && run->end <= lod->n);
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
    int64_t col = etch__ui_floor_div(etch__sat_sub(x->ts, start), px);
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
    etch__ui_rect *y = ETCH_VEC_NEW(&v, etch__ui_rect);
    if (!y) {
      free(v.data);
      memset(out, 0, sizeof *out);
      return ETCH_ENOMEM;
    }
    out->rects = (etch__ui_rect *)v.data;
    *y = *x;
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
  etch_vec v = {0};
  for (size_t i = 0; i < nlods; i++) {
    etch__ui_tile part;
    int rc = etch__ui_lod_tile(lods[i], tracks, n, start, end, ns_per_px, &part);
    if (!rc && etch__vec_push(&v, part.rects, part.n * sizeof *part.rects))
      rc = ETCH_ENOMEM;
    free(part.rects);
    if (rc) {
      free(v.data);
      memset(out, 0, sizeof *out);
      return rc;
    }
    out->rects = (etch__ui_rect *)v.data;
    out->n += part.n;
  }
  if (out->n) qsort(out->rects, out->n, sizeof *out->rects, cmp_rect);
  return ETCH_OK;
}

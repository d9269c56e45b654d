/*
 * counters.c - counter values for the timeline: a trace's values held in
 * memory when they are few enough (a tile's counters then need no query),
 * and the query that answers the same rows otherwise.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "ui/str.h"
#include "ui/ui.h"

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
  etch_vec out = {0};
  int rc = ETCH_OK;
#define PUSH(...)                                                           \
  do {                                                                      \
    etch__ui_counter_row *x_ = ETCH_VEC_NEW(&out, etch__ui_counter_row);   \
    if (!x_) {                                                              \
      rc = ETCH_ENOMEM;                                                     \
      goto done;                                                            \
    }                                                                       \
    *x_ = (etch__ui_counter_row){__VA_ARGS__};                              \
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
    ETCH_DCHECK(b <= e && e <= c->n);
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
    free(out.data);
    return rc;
  }
  *rows = (etch__ui_counter_row *)out.data;
  *nrows = ETCH_VEC_COUNT(&out, etch__ui_counter_row);
  return ETCH_OK;
}

/*
 * zone.c - one slice name's durations (zone.h): read sorted from the
 * slice table, then counted, ranked and bucketed in C.
 */
#define _GNU_SOURCE
#include "query/zone.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/containers.h"
#include "query/run.h"

int64_t etch__zone_pct(const int64_t *sorted, size_t n, int k) {
  /* The smallest rank r with r >= k * n / 100, 1-based. */
  size_t r = (size_t)(((unsigned __int128)n * (unsigned)k + 99) / 100);
  if (r < 1) r = 1;
  return sorted[r - 1];
}

static int buckets_of(etch__zone *z, const int64_t *d, size_t n, int want) {
  uint64_t range = (uint64_t)z->max - (uint64_t)z->min + 1; /* >= 1 */
  uint64_t w = range / (uint64_t)want + (range % (uint64_t)want != 0);
  if (w == 0) w = 1; /* range wrapped: max - min == UINT64_MAX cannot be */
  size_t nb = (size_t)(range / w + (range % w != 0));
  z->b = etch__calloc(nb, sizeof *z->b);
  if (!z->b) return ETCH_ENOMEM;
  z->nb = nb;
  for (size_t k = 0; k < nb; k++) {
    uint64_t lo = (uint64_t)z->min + k * w;
    uint64_t hi = k + 1 == nb ? (uint64_t)z->max + 1 : lo + w;
    z->b[k].lo = (int64_t)lo;
    z->b[k].hi = hi > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)hi;
  }
  for (size_t i = 0; i < n; i++)
    z->b[((uint64_t)d[i] - (uint64_t)z->min) / w].count++;
  return ETCH_OK;
}

int etch__zone_of(etch__db *db, const char *name, int buckets, etch__zone *z) {
  memset(z, 0, sizeof *z);
  if (buckets < 1 || buckets > ETCH__ZONE_MAX_BUCKETS)
    return etch__error(ETCH_EINVAL, "buckets: 1 to %d",
                           ETCH__ZONE_MAX_BUCKETS);
  etch__sql_arg a[] = {ETCH__SQL_STR(name)};
  etch__res q;
  int rc = etch__query_run(db,
                           "SELECT dur FROM slice WHERE name = $1"
                           " AND dur >= 0 ORDER BY dur",
                           a, 1, &q);
  if (rc) return rc;
  etch_vec durs = {0}; /* of int64_t, in order */
  while (etch__res_next(&q)) {
    if (ETCH_VEC_PUSH(&durs, int64_t, etch__res_i64(&q, 0))) {
      etch__vec_free(&durs);
      etch__res_close(&q);
      return ETCH_ENOMEM;
    }
  }
  int64_t *d = ETCH_VEC_AT(&durs, int64_t);
  size_t n = ETCH_VEC_COUNT(&durs, int64_t);
  /* The percentiles and buckets take them sorted, none negative: the
   * query's ORDER BY and WHERE. */
  ETCH_DCHECK(!n || (d[0] >= 0 && d[0] <= d[n - 1]));
  rc = etch__res_close(&q);
  if (!rc && n) {
    z->count = (int64_t)n;
    z->min = d[0];
    z->max = d[n - 1];
    z->p50 = etch__zone_pct(d, n, 50);
    z->p90 = etch__zone_pct(d, n, 90);
    z->p99 = etch__zone_pct(d, n, 99);
    rc = buckets_of(z, d, n, buckets);
  }
  etch__vec_free(&durs);
  if (rc) etch__zone_free(z);
  return rc;
}

void etch__zone_free(etch__zone *z) {
  free(z->b);
  memset(z, 0, sizeof *z);
}

void etch__zone_json(const etch__zone *z, const char *name, FILE *out) {
  fputs("{\"name\":", out);
  etch__json_string(out, name, strlen(name));
  fprintf(out, ",\"count\":%" PRId64, z->count);
  if (z->count)
    fprintf(out,
            ",\"min\":%" PRId64 ",\"p50\":%" PRId64 ",\"p90\":%" PRId64
            ",\"p99\":%" PRId64 ",\"max\":%" PRId64,
            z->min, z->p50, z->p90, z->p99, z->max);
  else
    fputs(",\"min\":null,\"p50\":null,\"p90\":null,\"p99\":null,\"max\":null",
          out);
  fputs(",\"histogram\":[", out);
  for (size_t k = 0; k < z->nb; k++)
    fprintf(out, "%s{\"lo\":%" PRId64 ",\"hi\":%" PRId64 ",\"count\":%" PRId64 "}",
            k ? "," : "", z->b[k].lo, z->b[k].hi, z->b[k].count);
  fputs("]}", out);
}

void etch__zone_print(const etch__zone *z, const char *name, FILE *out) {
  fprintf(out, "slice %s: %" PRId64 " with a duration\n", name, z->count);
  if (!z->count) return;
  const char *what[] = {"min", "p50", "p90", "p99", "max"};
  const int64_t v[] = {z->min, z->p50, z->p90, z->p99, z->max};
  char buf[64];
  for (size_t i = 0; i < 5; i++) {
    etch__fmt_dur(buf, sizeof buf, v[i]);
    fprintf(out, "  %-4s %14" PRId64 " ns  %s\n", what[i], v[i], buf);
  }
  fputs("histogram (duration from, to; slices):\n", out);
  int64_t top = 1;
  for (size_t k = 0; k < z->nb; k++)
    if (z->b[k].count > top) top = z->b[k].count;
  for (size_t k = 0; k < z->nb; k++) {
    int bar = (int)(z->b[k].count * 40 / top);
    if (z->b[k].count && !bar) bar = 1;
    fprintf(out, "  %14" PRId64 " .. %14" PRId64 " ns %8" PRId64 " %.*s\n",
            z->b[k].lo, z->b[k].hi, z->b[k].count, bar,
            "########################################");
  }
}

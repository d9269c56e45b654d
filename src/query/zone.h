/*
 * zone.h - one slice name's durations: count, min, percentiles, max and a
 * histogram (Tracy's "find zone"), for `etch stats --slice` and the
 * viewer's Find zone tab, which print the same JSON.
 *
 * The durations are the slices of that name that ended (dur >= 0: an
 * instant counts, with 0), read sorted. Percentiles are nearest-rank on
 * the recorded durations: pK is the ceil(K * count / 100)-th smallest, a
 * duration that occurs. The histogram has at most `buckets` buckets of
 * equal width (whole nanoseconds, at least 1) from min to max: bucket k
 * holds [lo, hi), the last one's hi being max + 1; their counts add up to
 * count.
 */
#ifndef ETCH_QUERY_ZONE_H
#define ETCH_QUERY_ZONE_H

#include <stdint.h>
#include <stdio.h>

#include "query/query.h"

enum { ETCH__ZONE_BUCKETS = 40, ETCH__ZONE_MAX_BUCKETS = 1000 };

typedef struct etch__zone_bucket {
  int64_t lo, hi, count;
} etch__zone_bucket;

typedef struct etch__zone {
  int64_t count, min, p50, p90, p99, max;
  etch__zone_bucket *b; /* etch's heap */
  size_t nb;
} etch__zone;

/* The statistics of the slices named `name` (count 0 and no bucket when
 * there is none); `buckets` in [1, ETCH__ZONE_MAX_BUCKETS]. */
int etch__zone_of(etch__db *db, const char *name, int buckets, etch__zone *z);
void etch__zone_free(etch__zone *z);

/* The nearest-rank K-th percentile (1 <= K <= 100) of n >= 1 sorted
 * durations. */
int64_t etch__zone_pct(const int64_t *sorted, size_t n, int k);

/* {"name":...,"count":...,"min":...,"p50":...,"p90":...,"p99":...,
 *  "max":...,"histogram":[{"lo":...,"hi":...,"count":...},...]}
 * (min, percentiles and max null when count is 0). */
void etch__zone_json(const etch__zone *z, const char *name, FILE *out);
/* The same as text for people. */
void etch__zone_print(const etch__zone *z, const char *name, FILE *out);

#endif /* ETCH_QUERY_ZONE_H */

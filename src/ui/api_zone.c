/*
 * api_zone.c - the Find zone tab's request (Tracy's find zone):
 *
 *   /api/zone?id=                        the names of the slices that
 *                                        ended, most frequent first
 *   /api/zone?id=&name=[&buckets=]       that name's durations: count,
 *                                        min, p50, p90, p99, max and the
 *                                        histogram (query/zone.h: what
 *                                        `etch stats --slice` prints)
 *   ...&lo=&hi=                          and its slices with lo <= dur <
 *                                        hi: the first MAX_INSTANCES by
 *                                        time, and how many there are
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/run.h"
#include "query/zone.h"
#include "ui/api_int.h"

enum { MAX_NAMES = 5000, MAX_INSTANCES = 1000 };

typedef etch__ui_req req;

__attribute__((format(printf, 3, 4))) static int fail(req *r, int status,
                                                      const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int st = etch__ui_req_vfail(r, status, fmt, ap);
  va_end(ap);
  return st;
}

/* An integer argument: 1 when it is there, 0 when not, -1 when it is no
 * integer. */
static int arg_int(req *r, const char *key, int64_t *v) {
  const char *s = r->get(r->ctx, key);
  if (!s || !*s) return 0;
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || *end) return -1;
  *v = x;
  return 1;
}

static int zone_names(req *r, etch__ui_trace *t) {
  etch__sql_arg b[] = {ETCH__SQL_I64(MAX_NAMES)};
  etch__res q;
  if (etch__query_run(t->db,
                      "SELECT name, count(*) FROM slice"
                      " WHERE dur >= 0 AND name IS NOT NULL"
                      " GROUP BY name ORDER BY 2 DESC, 1 LIMIT $1",
                      b, 1, &q))
    return fail(r, 500, "%s", etch_last_error());
  fputs("{\"names\":[", r->out);
  for (size_t i = 0; etch__res_next(&q); i++) {
    size_t n = 0;
    const char *s = etch__res_str(&q, 0, &n);
    fputs(i ? ",[" : "[", r->out);
    etch__json_string(r->out, s ? s : "", n);
    fprintf(r->out, ",%" PRId64 "]", etch__res_i64(&q, 1));
  }
  fputs("]}", r->out);
  return etch__res_close(&q) ? 500 : 200;
}

/* The slices of the name with lo <= dur < hi, by time. */
static int zone_instances(req *r, etch__ui_trace *t, const char *name,
                          int64_t lo, int64_t hi) {
  etch__sql_arg b[] = {ETCH__SQL_STR(name), ETCH__SQL_I64(lo),
                       ETCH__SQL_I64(hi), ETCH__SQL_I64(MAX_INSTANCES)};
  etch__res q;
  if (etch__query_run(t->db,
                      "SELECT id, ts, dur, track_id, depth, count(*) OVER ()"
                      " FROM slice WHERE name = $1 AND dur >= $2"
                      " AND dur < $3 ORDER BY ts, id LIMIT $4",
                      b, 4, &q))
    return 500;
  int64_t total = 0;
  fputs(",\"instances\":[", r->out);
  for (size_t i = 0; etch__res_next(&q); i++) {
    fprintf(r->out, "%s[%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
                    ",%" PRId64 "]",
            i ? "," : "", etch__res_i64(&q, 0), etch__res_i64(&q, 1),
            etch__res_i64(&q, 2), etch__res_i64(&q, 3), etch__res_i64(&q, 4));
    total = etch__res_i64(&q, 5);
  }
  fprintf(r->out, "],\"instances_total\":%" PRId64, total);
  return etch__res_close(&q) ? 500 : 200;
}

int etch__ui_api_zone(req *r) {
  int st;
  etch__ui_trace *t = etch__ui_req_trace(r, &st);
  if (!t) return st;
  const char *name = r->get(r->ctx, "name");
  if (!name) return zone_names(r, t);
  if (strlen(name) > 1000) return fail(r, 400, "name is too long");
  int64_t buckets = ETCH__ZONE_BUCKETS, lo = 0, hi = 0;
  int has_b = arg_int(r, "buckets", &buckets);
  int has_lo = arg_int(r, "lo", &lo), has_hi = arg_int(r, "hi", &hi);
  if (has_b < 0 || buckets < 1 || buckets > ETCH__ZONE_MAX_BUCKETS)
    return fail(r, 400, "buckets is an integer from 1 to %d",
                ETCH__ZONE_MAX_BUCKETS);
  if (has_lo < 0 || has_hi < 0 || has_lo != has_hi || (has_lo && hi <= lo))
    return fail(r, 400, "lo and hi (lo < hi) are integers, both or neither");
  etch__zone z;
  if (etch__zone_of(t->db, name, (int)buckets, &z))
    return fail(r, 500, "%s", etch_last_error());
  fputs("{\"zone\":", r->out);
  etch__zone_json(&z, name, r->out);
  etch__zone_free(&z);
  if (has_lo && (st = zone_instances(r, t, name, lo, hi)) != 200) return st;
  fputc('}', r->out);
  return 200;
}

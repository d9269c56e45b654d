/*
 * diff.c - two traces compared slice name by slice name (`etch diff`, and
 * the viewer's comparison): count, total, self time, mean, p50 and p99 of
 * each name's durations in A and in B, and the change, largest first.
 *
 * The numbers come from the query part's tables: each trace in a catalog
 * of its own (etch__query_open_traces: the cache when there is one, so a
 * second diff of the same traces reads no trace), one aggregate query per
 * catalog, joined by name. Slices count when they ended (dur >= 0; an
 * instant is a slice of duration 0); slices still open at the end of the
 * trace have no duration and are left out. p50 and p99 are durations that
 * occur (quantile_disc: the smallest duration with at least that share of
 * the slices at or below it), not interpolations.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/containers.h"
#include "query/query.h"

static const char *const kSortNames[] = {"total", "self", "count", "mean",
                                         "p50",   "p99",  "name"};

int etch__diff_sort_parse(const char *s, etch__diff_sort *out) {
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(kSortNames); i++)
    if (!strcmp(s, kSortNames[i])) {
      *out = (etch__diff_sort)i;
      return ETCH_OK;
    }
  return ETCH_EINVAL;
}

const char *etch__diff_sort_name(etch__diff_sort s) {
  return (size_t)s < ETCH_ARRAY_SIZE(kSortNames) ? kSortNames[s] : "?";
}

void etch__diff_free(etch__diff *d) {
  for (size_t i = 0; i < d->n; i++) free(d->rows[i].name);
  free(d->rows);
  memset(d, 0, sizeof *d);
}

/* The size of a change, for ordering: |b - a|, held at INT64_MAX. */
static uint64_t abs_change(int64_t a, int64_t b) {
  int64_t d = etch__sat_sub(b, a);
  return d == INT64_MIN ? (uint64_t)INT64_MAX + 1 : (uint64_t)(d < 0 ? -d : d);
}

/* The change of one row under the sort key, as a double (means are). */
static double row_change(const etch__diff_row *r, etch__diff_sort s) {
  switch (s) {
    case ETCH__DIFF_BY_COUNT: return (double)abs_change(r->a.count, r->b.count);
    case ETCH__DIFF_BY_MEAN: {
      double a = r->a.count ? r->a.mean : 0, b = r->b.count ? r->b.mean : 0;
      return fabs(b - a);
    }
    case ETCH__DIFF_BY_P50: return (double)abs_change(r->a.p50, r->b.p50);
    case ETCH__DIFF_BY_P99: return (double)abs_change(r->a.p99, r->b.p99);
    case ETCH__DIFF_BY_SELF: return (double)abs_change(r->a.self, r->b.self);
    default: return (double)abs_change(r->a.total, r->b.total);
  }
}

/* NULL names (slices without one) sort after every name. */
static int cmp_name(const char *a, const char *b) {
  if (!a || !b) return (a == NULL) - (b == NULL);
  return strcmp(a, b);
}

static int cmp_row(const void *x, const void *y, void *ctx) {
  const etch__diff_row *a = x, *b = y;
  etch__diff_sort g_sort = *(const etch__diff_sort *)ctx;
  if (g_sort != ETCH__DIFF_BY_NAME) {
    /* Total changes compare exactly (doubles lose the last ns above
     * 2^53). */
    if (g_sort == ETCH__DIFF_BY_TOTAL || g_sort == ETCH__DIFF_BY_SELF) {
      bool self = g_sort == ETCH__DIFF_BY_SELF;
      uint64_t ca = self ? abs_change(a->a.self, a->b.self)
                         : abs_change(a->a.total, a->b.total);
      uint64_t cb = self ? abs_change(b->a.self, b->b.self)
                         : abs_change(b->a.total, b->b.total);
      if (ca != cb) return ca < cb ? 1 : -1;
    } else {
      double ca = row_change(a, g_sort), cb = row_change(b, g_sort);
      if (ca != cb) return ca < cb ? 1 : -1;
    }
  }
  return cmp_name(a->name, b->name);
}

void etch__diff_sort_rows(etch__diff *d, etch__diff_sort sort) {
  if (d->n > 1) qsort_r(d->rows, d->n, sizeof *d->rows, cmp_row, &sort);
}

/* Per name in one catalog: count, total and self (held to int64), mean,
 * p50, p99 (both quantiles from one sort of the group: a list of two).
 * Self is the slice table's self_dur: each slice's duration minus its
 * direct children's, as the importer computed it. */
#define SIDE_SQL(cat)                                                        \
  "SELECT name, n, total, mean, q[1] AS p50, q[2] AS p99, self FROM ("       \
  "SELECT name, count(*) AS n,"                                              \
  " CAST(greatest(least(sum(dur), 9223372036854775807),"                    \
  " -9223372036854775808) AS BIGINT) AS total,"                              \
  " avg(dur) AS mean, quantile_disc(dur, [0.5, 0.99]) AS q,"                 \
  " CAST(greatest(least(sum(self_dur), 9223372036854775807),"               \
  " -9223372036854775808) AS BIGINT) AS self"                                \
  " FROM " cat ".slice WHERE dur >= 0 GROUP BY name)"

int etch__diff_from_db(etch__db *db, const char *cat_a, const char *cat_b,
                       etch__diff_sort sort, etch__diff *out) {
  memset(out, 0, sizeof *out);
  /* Catalog names are etch's own (t0, t1, ...), never a user's text. */
  for (const char *c = cat_a; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')))
      return etch__error(ETCH_EINVAL, "diff: bad catalog name");
  for (const char *c = cat_b; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')))
      return etch__error(ETCH_EINVAL, "diff: bad catalog name");
  char sql[4096];
  snprintf(sql, sizeof sql,
           "WITH a AS (" SIDE_SQL("%s") "), b AS (" SIDE_SQL("%s") ") "
           "SELECT coalesce(a.name, b.name),"
           " coalesce(a.n, 0), a.total, a.mean, a.p50, a.p99, a.self,"
           " coalesce(b.n, 0), b.total, b.mean, b.p50, b.p99, b.self"
           " FROM a FULL OUTER JOIN b ON a.name IS NOT DISTINCT FROM b.name",
           cat_a, cat_b);
  etch__res r;
  int rc = etch__res_query(db, sql, "diff", &r);
  if (rc) return rc;
  etch_vec rows = {0}; /* etch__diff_row; out->rows is its data */
  while (!rc && etch__res_next(&r)) {
    if (ETCH_VEC_PUSH(&rows, etch__diff_row, {0})) {
      rc = ETCH_ENOMEM;
      break;
    }
    out->rows = ETCH_VEC_AT(&rows, etch__diff_row);
    etch__diff_row *row = &out->rows[out->n];
    if (!etch__res_null(&r, 0) && !(row->name = etch__res_strdup(&r, 0))) {
      rc = etch__error(ETCH_ENOMEM, "out of memory");
      break;
    }
    etch__diff_side *side[2] = {&row->a, &row->b};
    for (int s = 0; s < 2; s++) {
      idx_t c = (idx_t)(1 + 6 * s);
      side[s]->count = etch__res_i64(&r, c);
      side[s]->total = etch__res_i64(&r, c + 1);
      side[s]->mean = side[s]->count ? etch__res_f64(&r, c + 2) : 0;
      side[s]->p50 = etch__res_i64(&r, c + 3);
      side[s]->p99 = etch__res_i64(&r, c + 4);
      side[s]->self = etch__res_i64(&r, c + 5);
    }
    out->n++;
  }
  int rc2 = etch__res_close(&r);
  if (!rc) rc = rc2;
  if (rc) {
    etch__diff_free(out);
    return rc;
  }
  etch__diff_sort_rows(out, sort);
  return ETCH_OK;
}

int etch__diff_files(const char *a, const char *b, const char *cache_dir,
                     bool no_cache, const etch__import_opts *opts,
                     etch__diff_sort sort, etch__diff *out,
                     const char **failed) {
  memset(out, 0, sizeof *out);
  const char *paths[2] = {a, b};
  etch__db *db = NULL;
  int rc = etch__query_open_traces(paths, 2, cache_dir, no_cache, opts, &db,
                                   failed);
  if (rc) return rc;
  rc = etch__diff_from_db(db, "t0", "t1", sort, out);
  etch__db_close(db);
  return rc;
}

/* ---- printing ------------------------------------------------------------------------ */

/* "+12.5%", "-3.0%", "0%" (no change), "new" (nothing in A), "gone"
 * (nothing in B), "-" (from a total of 0). */
static void fmt_pct(char *buf, size_t n, int64_t a, int64_t b, int64_t ca,
                    int64_t cb) {
  if (ca == 0 && cb > 0) {
    snprintf(buf, n, "new");
  } else if (cb == 0 && ca > 0) {
    snprintf(buf, n, "gone");
  } else if (a == b) {
    snprintf(buf, n, "0%%");
  } else if (a == 0) {
    snprintf(buf, n, "-");
  } else {
    snprintf(buf, n, "%+.1f%%", ((double)b - (double)a) / fabs((double)a) * 100);
  }
}

/* A duration, "-" for a side without slices of the name. */
static void cell_dur(etch__tt *t, int64_t count, int64_t ns) {
  char d[32];
  if (!count) {
    etch__tt_cell(t, "-");
    return;
  }
  etch__fmt_dur(d, sizeof d, ns);
  etch__tt_cell(t, d);
}

static void cell_delta(etch__tt *t, int64_t a, int64_t b) {
  char d[32];
  int64_t x = etch__sat_sub(b, a);
  etch__fmt_dur(d, sizeof d, x);
  etch__tt_cellf(t, "%s%s", x > 0 ? "+" : "", d);
}

static void print_json(const etch__diff *d, size_t limit, FILE *out,
                       const char *name_a, const char *name_b,
                       etch__diff_sort sort) {
  fputs("{\"a\":", out);
  etch__json_string(out, name_a, strlen(name_a));
  fputs(",\"b\":", out);
  etch__json_string(out, name_b, strlen(name_b));
  fprintf(out, ",\"sort\":\"%s\",\"rows\":[", etch__diff_sort_name(sort));
  for (size_t i = 0; i < d->n && i < limit; i++) {
    const etch__diff_row *r = &d->rows[i];
    fputs(i ? ",\n {\"name\":" : "\n {\"name\":", out);
    if (r->name)
      etch__json_string(out, r->name, strlen(r->name));
    else
      fputs("null", out);
    const etch__diff_side *s[2] = {&r->a, &r->b};
    for (int k = 0; k < 2; k++) {
      fprintf(out, ",\"%c\":", k ? 'b' : 'a');
      if (!s[k]->count) {
        fputs("{\"count\":0,\"total\":0,\"self\":0,\"mean\":null,"
              "\"p50\":null,\"p99\":null}",
              out);
        continue;
      }
      fprintf(out,
              "{\"count\":%" PRId64 ",\"total\":%" PRId64 ",\"self\":%" PRId64
              ",\"mean\":%.17g,\"p50\":%" PRId64 ",\"p99\":%" PRId64 "}",
              s[k]->count, s[k]->total, s[k]->self,
              isfinite(s[k]->mean) ? s[k]->mean : 0, s[k]->p50, s[k]->p99);
    }
    fprintf(out,
            ",\"change\":{\"count\":%" PRId64 ",\"total\":%" PRId64
            ",\"self\":%" PRId64,
            etch__sat_sub(r->b.count, r->a.count),
            etch__sat_sub(r->b.total, r->a.total),
            etch__sat_sub(r->b.self, r->a.self));
    if (r->a.count && r->b.count)
      fprintf(out, ",\"mean\":%.17g,\"p50\":%" PRId64 ",\"p99\":%" PRId64 "}}",
              r->b.mean - r->a.mean, etch__sat_sub(r->b.p50, r->a.p50),
              etch__sat_sub(r->b.p99, r->a.p99));
    else
      fputs(",\"mean\":null,\"p50\":null,\"p99\":null}}", out);
  }
  fprintf(out, "%s],\"names\":%zu}\n", d->n && limit ? "\n" : "", d->n);
}

void etch__diff_print(const etch__diff *d, FILE *out, size_t limit, bool json,
                      const char *name_a, const char *name_b,
                      etch__diff_sort sort) {
  if (json) {
    print_json(d, limit, out, name_a, name_b, sort);
    return;
  }
  fprintf(out, "A: %s\nB: %s\n", name_a, name_b);
  if (d->n == 0) {
    fputs("\nno slices in either trace\n", out);
    return;
  }
  fprintf(out, "\nslices by name, largest change of %s first\n",
          sort == ETCH__DIFF_BY_NAME ? "total (sorted by name)"
                                     : etch__diff_sort_name(sort));
  static const char *const head[] = {
      "name",   "count A", "count B", "total A", "total B", "change",
      "change%", "self A", "self B",  "mean A",  "mean B",  "p50 A",
      "p50 B",  "p99 A",   "p99 B"};
  etch__tt *t = etch__tt_new(ETCH_ARRAY_SIZE(head));
  if (!t) return;
  for (size_t c = 0; c < ETCH_ARRAY_SIZE(head); c++)
    etch__tt_header(t, c, head[c], c > 0);
  size_t shown = 0;
  for (size_t i = 0; i < d->n && i < limit; i++, shown++) {
    const etch__diff_row *r = &d->rows[i];
    etch__tt_cell(t, r->name ? r->name : "(no name)");
    etch__tt_cellf(t, "%" PRId64, r->a.count);
    etch__tt_cellf(t, "%" PRId64, r->b.count);
    cell_dur(t, r->a.count, r->a.total);
    cell_dur(t, r->b.count, r->b.total);
    cell_delta(t, r->a.total, r->b.total);
    char pct[32];
    fmt_pct(pct, sizeof pct, r->a.total, r->b.total, r->a.count, r->b.count);
    etch__tt_cell(t, pct);
    cell_dur(t, r->a.count, r->a.self);
    cell_dur(t, r->b.count, r->b.self);
    cell_dur(t, r->a.count, (int64_t)llround(r->a.mean));
    cell_dur(t, r->b.count, (int64_t)llround(r->b.mean));
    cell_dur(t, r->a.count, r->a.p50);
    cell_dur(t, r->b.count, r->b.p50);
    cell_dur(t, r->a.count, r->a.p99);
    cell_dur(t, r->b.count, r->b.p99);
  }
  etch__tt_print(t, out, "  ", true);
  etch__tt_free(t);
  if (shown < d->n)
    fprintf(out, "  ... %zu more name%s (--limit 0 shows all)\n",
            d->n - shown, d->n - shown == 1 ? "" : "s");
}

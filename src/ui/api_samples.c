/*
 * api_samples.c - CPU samples and allocation sites in the viewer (the
 * stats also in etch report's page):
 *
 *   /api/stats's "cpu_samples" and "functions": the samples' count and
 *   the functions they were in ([name, self, total], by self samples, the
 *   first 100), as etch stats lists them (query/stats_samples.c);
 *
 *   /api/leaks?id=   etch leaks --hotspots --json of the trace: the
 *   allocations by call site with the bytes still live (query/leaks.c),
 *   {"sites": []} when no allocation has a call stack;
 *
 *   /api/sample_flame, /api/alloc_flame   flame graphs of CPU samples
 *   and of allocation stacks (bytes allocated, still live);
 *
 *   /api/samples   the sampled threads, the samples per thread and time
 *   bucket of a window (the ticks on the timeline), one sample's stack.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/containers.h"
#include "base/map.h"
#include "query/leaks_sites.h"
#include "ui/api_int.h"

void etch__ui_stats_samples(FILE *o, const etch__stats_data *d) {
  fprintf(o, ",\"cpu_samples\":%lld,\"functions\":[", (long long)d->samples);
  for (size_t i = 0; i < d->nfns && i < 100; i++) {
    fputs(i ? ",[" : "[", o);
    etch__json_string(o, d->fns[i].name, strlen(d->fns[i].name));
    fprintf(o, ",%lld,%lld]", (long long)d->fns[i].self,
            (long long)d->fns[i].total);
  }
  fputc(']', o);
}

int etch__ui_api_leaks(etch__ui_req *r) {
  int st;
  etch__ui_trace *t = etch__ui_req_trace(r, &st);
  if (!t) return st;
  if (!t->path) {
    fputs("{\"sites\":[]}", r->out);
    return 200;
  }
  etch__ui_membuf mb;
  FILE *f = etch__ui_membuf_open(&mb);
  if (!f) {
    fputs("{\"error\":\"out of memory\"}", r->out);
    return 500;
  }
  bool lost = false;
  int rc = etch__query_leaks_file(t->path, f, 50,
                                  ETCH__LEAKS_HOTSPOTS | ETCH__LEAKS_JSON,
                                  true, &lost);
  int crc = etch__ui_membuf_close(&mb);
  if (!rc && !crc && mb.v.len)
    fwrite(mb.v.data, 1, mb.v.len, r->out);
  else
    fputs("{\"sites\":[]}", r->out); /* a trace without memory events */
  etch__ui_membuf_free(&mb);
  return 200;
}

/* ---- the flame graph of CPU samples -------------------------------------------- */

/*
 * /api/sample_flame?id=[&slice=ID | &utid=U][&start=S&end=E]: the samples
 * of a selection merged by their stacks (function names from the
 * outermost frame down), in /api/flame's form ({"names", "nodes":
 * [parent, name, total, self, count], ...}, node 0 the whole): total the
 * samples with the node's path on their stack, self those whose innermost
 * frame it is, count = total. A slice selects its thread's samples inside
 * its time range ("what the CPU did inside this slice"); utid a thread;
 * start and end a range [start, end). Samples without a stack are left
 * out.
 */

typedef struct sf_node {
  int64_t parent, name, total, self, count;
} sf_node;

typedef struct sf_tree {
  etch_vec nodes; /* of sf_node */
  sf_node *n;     /* its array (set as it moves) */
  size_t len;
  etch_u64map kids; /* (parent << 32 | name) + 1 -> node */
  etch_vec namev;   /* of char *, owned */
  char **names;     /* its array (set as it moves) */
  size_t nnames;
  etch_u64map name_ix; /* hash -> name (probing on collision) */
} sf_tree;

static int64_t sf_name(sf_tree *t, const char *s) {
  uint64_t h = etch__hash_bytes(s, strlen(s), 0x51f3);
  for (;; h++) {
    int64_t v;
    if (!etch__u64map_get(&t->name_ix, h, &v)) break;
    if (!strcmp(t->names[v], s)) return v;
  }
  if (ETCH_VEC_RESERVE(&t->namev, char *, 1)) return -1;
  t->names = ETCH_VEC_AT(&t->namev, char *); /* it may have moved */
  char *copy = etch__strdup(s);
  if (!copy || !etch__u64map_put(&t->name_ix, h, (int64_t)t->nnames)) {
    free(copy);
    return -1;
  }
  (void)ETCH_VEC_PUSH(&t->namev, char *, copy); /* room made above */
  t->names = ETCH_VEC_AT(&t->namev, char *);
  return (int64_t)t->nnames++;
}

static int64_t sf_child(sf_tree *t, int64_t parent, int64_t name) {
  ETCH_DCHECK(parent >= 0 && (size_t)parent < t->len); /* a node made */
  uint64_t key = ((uint64_t)parent << 32 | (uint64_t)name) + 1;
  int64_t v;
  if (etch__u64map_get(&t->kids, key, &v)) return v;
  if (ETCH_VEC_RESERVE(&t->nodes, sf_node, 1)) return -1;
  t->n = ETCH_VEC_AT(&t->nodes, sf_node); /* it may have moved */
  if (!etch__u64map_put(&t->kids, key, (int64_t)t->len)) return -1;
  (void)ETCH_VEC_PUSH(&t->nodes, sf_node, /* room made above */
                      {parent, name, 0, 0, 0});
  t->n = ETCH_VEC_AT(&t->nodes, sf_node);
  return (int64_t)t->len++;
}

static void sf_free(sf_tree *t) {
  for (size_t i = 0; i < t->nnames; i++) free(t->names[i]);
  etch__vec_free(&t->namev);
  etch__vec_free(&t->nodes);
  etch__u64map_free(&t->kids);
  etch__u64map_free(&t->name_ix);
}

static bool arg_int(etch__ui_req *r, const char *key, int64_t *v, bool *bad) {
  const char *s = r->get(r->ctx, key);
  if (!s) return false;
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (!*s || *end || errno) {
    *bad = true;
    return false;
  }
  *v = x;
  return true;
}

/* The callsites (ids 0..n-1: import_stacks.c) with their parent, function
 * and what `weights` (a query of callsite_id, n, c: the weight and the
 * count of the events whose innermost frame it is) gives them. */
static int sf_build(etch__db *db, const char *weights, sf_tree *t) {
  char sql[4096];
  snprintf(sql, sizeof sql,
           "SELECT c.id, c.parent_id, %s, coalesce(k.n, 0), "
           "coalesce(k.c, 0) FROM stack_profile_callsite c "
           "JOIN stack_profile_frame f ON f.id = c.frame_id "
           "LEFT JOIN stack_profile_mapping m ON m.id = f.mapping "
           "LEFT JOIN (%s) k ON k.callsite_id = c.id ORDER BY c.id",
           ETCH__SAMPLE_FN_SQL, weights);
  etch__res res;
  int rc = etch__query_run(db, sql, NULL, 0, &res);
  if (rc) return rc;
  size_t n = 0;
  /* Per callsite, four vectors of int64_t of the same length. */
  etch_vec parentv = {0}, namev = {0}, countv = {0}, eventv = {0};
  while (!rc && etch__res_next(&res)) {
    if (etch__res_i64(&res, 0) != (int64_t)n) break; /* not ours: stop */
    if (ETCH_VEC_RESERVE(&parentv, int64_t, 1) ||
        ETCH_VEC_RESERVE(&namev, int64_t, 1) ||
        ETCH_VEC_RESERVE(&countv, int64_t, 1) ||
        ETCH_VEC_RESERVE(&eventv, int64_t, 1)) {
      rc = etch__error(ETCH_ENOMEM, "out of memory");
      break;
    }
    char *s = etch__res_strdup(&res, 2);
    int64_t nm = sf_name(t, s ? s : "?");
    free(s);
    /* Room made above: none of these fails. */
    (void)ETCH_VEC_PUSH(&parentv, int64_t,
                        etch__res_null(&res, 1) ? -1 : etch__res_i64(&res, 1));
    (void)ETCH_VEC_PUSH(&namev, int64_t, nm);
    (void)ETCH_VEC_PUSH(&countv, int64_t, etch__res_i64(&res, 3));
    (void)ETCH_VEC_PUSH(&eventv, int64_t, etch__res_i64(&res, 4));
    if (nm < 0) rc = etch__error(ETCH_ENOMEM, "out of memory");
    n++;
  }
  const int64_t *parent = ETCH_VEC_AT(&parentv, int64_t);
  const int64_t *name = ETCH_VEC_AT(&namev, int64_t);
  const int64_t *count = ETCH_VEC_AT(&countv, int64_t);
  const int64_t *events = ETCH_VEC_AT(&eventv, int64_t);
  int crc = etch__res_close(&res);
  if (!rc) rc = crc;
  int64_t *path = n ? etch__malloc(n * sizeof *path) : NULL;
  if (!rc && n && !path) rc = etch__error(ETCH_ENOMEM, "out of memory");
  if (!rc && ETCH_VEC_PUSH(&t->nodes, sf_node, {-1, -1, 0, 0, 0}))
    rc = etch__error(ETCH_ENOMEM, "out of memory");
  if (!rc) { /* the whole */
    t->n = ETCH_VEC_AT(&t->nodes, sf_node);
    t->len = 1;
  }
  for (size_t i = 0; !rc && i < n; i++) {
    if (!count[i]) continue;
    size_t depth = 0; /* the stack, innermost first; a loop stops it */
    for (int64_t c = (int64_t)i; c >= 0 && (size_t)c < n && depth < n;
         c = parent[c])
      path[depth++] = c;
    int64_t node = 0;
    t->n[0].total += count[i];
    t->n[0].count += events[i];
    while (depth-- > 0 && node >= 0) {
      node = sf_child(t, node, name[path[depth]]);
      if (node >= 0) {
        t->n[node].total += count[i];
        t->n[node].count += events[i];
      }
    }
    if (node < 0)
      rc = etch__error(ETCH_ENOMEM, "out of memory");
    else
      t->n[node].self += count[i];
  }
  free(path);
  etch__vec_free(&parentv);
  etch__vec_free(&namev);
  etch__vec_free(&countv);
  etch__vec_free(&eventv);
  return rc;
}

static void sf_write(const sf_tree *t, FILE *o, const char *unit) {
  fputs("{\"names\":[", o);
  for (size_t i = 0; i < t->nnames; i++) {
    if (i) fputc(',', o);
    etch__json_string(o, t->names[i], strlen(t->names[i]));
  }
  fputs("],\"nodes\":[", o);
  for (size_t i = 0; i < t->len; i++) {
    const sf_node *x = &t->n[i];
    /* A parent before its children, and a name of the table (the whole,
     * node 0, has neither): what the page's flame graph assumes. */
    ETCH_DCHECK(i == 0 ? x->parent == -1
                       : x->parent >= 0 && x->parent < (int64_t)i &&
                             x->name >= 0 && x->name < (int64_t)t->nnames);
    fprintf(o, "%s[%lld,%lld,%lld,%lld,%lld]", i ? "," : "",
            (long long)x->parent, (long long)x->name, (long long)x->total,
            (long long)x->self, (long long)x->count);
  }
  fprintf(o, "],\"pruned\":0,\"unit\":\"%s\"}", unit);
}

int etch__ui_api_sample_flame(etch__ui_req *r) {
  int st;
  etch__ui_trace *t = etch__ui_req_trace(r, &st);
  if (!t) return st;
  int64_t slice = -1, utid = -1, start = 0, end = 0;
  bool bad = false;
  bool has_slice = arg_int(r, "slice", &slice, &bad);
  bool has_utid = arg_int(r, "utid", &utid, &bad);
  bool has_start = arg_int(r, "start", &start, &bad);
  bool range = arg_int(r, "end", &end, &bad) && has_start;
  if (bad || (range && end <= start) || (has_slice && has_utid)) {
    fputs("{\"error\":\"slice or utid, start and end (start < end) are "
          "integers\"}", r->out);
    return 400;
  }
  if (has_slice) { /* its thread's samples inside its time */
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT s.ts, greatest(s.dur, 0), t.utid FROM slice s "
             "JOIN thread_track t ON t.id = s.track_id WHERE s.id = %lld",
             (long long)slice);
    etch__res res;
    if (etch__query_run(t->db, sql, NULL, 0, &res)) return 500;
    bool found = etch__res_next(&res) && !etch__res_null(&res, 2);
    if (found) {
      int64_t ts = etch__res_i64(&res, 0), dur = etch__res_i64(&res, 1);
      utid = etch__res_i64(&res, 2);
      has_utid = true;
      if (!range || start < ts) start = ts;
      if (!range || end > ts + dur + 1) end = ts + dur + 1;
      range = true;
    }
    etch__res_close(&res);
    if (!found) {
      fputs("{\"error\":\"no slice of that id on a thread\"}", r->out);
      return 404;
    }
  }
  char where[160] = "", weights[512];
  int k = 0;
  if (has_utid) k = snprintf(where, sizeof where, " AND s.utid = %lld",
                             (long long)utid);
  if (range)
    snprintf(where + k, sizeof where - (size_t)k,
             " AND s.ts >= %lld AND s.ts < %lld", (long long)start,
             (long long)end);
  snprintf(weights, sizeof weights,
           "SELECT callsite_id, count(*) AS n, count(*) AS c "
           "FROM perf_sample s WHERE callsite_id IS NOT NULL%s GROUP BY 1",
           where);
  sf_tree tree = {0};
  int rc = sf_build(t->db, weights, &tree);
  if (!rc) sf_write(&tree, r->out, "samples");
  sf_free(&tree);
  if (rc) {
    fputs("{\"error\":\"", r->out);
    fputs(rc == ETCH_ENOMEM ? "out of memory" : "the samples cannot be read",
          r->out);
    fputs("\"}", r->out);
    return 500;
  }
  return 200;
}

/* ---- samples on their thread's track ------------------------------------------- */

/*
 * /api/samples?id=: the sampled threads, {"threads": [[utid, samples],
 * ...], "total": N, "allocation_stacks": A} (the page draws a row of
 * ticks under these threads; A: the allocations with a call stack, for
 * the flame graph of bytes).
 *
 * /api/samples?id=&start=S&end=E&buckets=N (1 <= N <= 8192): the samples
 * of [S, E) per thread and per bucket of (E - S) / N, the non-empty
 * buckets only (at most N a thread, however many samples):
 * {"buckets": [[utid, bucket, samples, first, ts, leaf], ...]} with the
 * first sample of the bucket (its id, time and innermost function).
 *
 * /api/samples?id=&sample=ID: one sample and its whole stack, {"id",
 * "ts", "utid", "tid", "cpu", "frames": [innermost first]}.
 */

static void json_str(FILE *o, const char *s) {
  etch__json_string(o, s ? s : "?", strlen(s ? s : "?"));
}

static int samples_threads(FILE *o, etch__db *db) {
  etch__res res;
  if (etch__query_run(db,
                      "SELECT utid, count(*) FROM perf_sample GROUP BY 1 "
                      "ORDER BY 1", NULL, 0, &res))
    return 500;
  int64_t total = 0;
  fputs("{\"threads\":[", o);
  for (int k = 0; etch__res_next(&res); k++) {
    int64_t n = etch__res_i64(&res, 1);
    fprintf(o, "%s[%lld,%lld]", k ? "," : "",
            (long long)etch__res_i64(&res, 0), (long long)n);
    total += n;
  }
  fprintf(o, "],\"total\":%lld", (long long)total);
  if (etch__res_close(&res)) return 500;
  if (etch__query_run(db,
                      "SELECT count(*) FROM __intrinsic_track_event_callstacks",
                      NULL, 0, &res))
    return 500;
  fprintf(o, ",\"allocation_stacks\":%lld}",
          (long long)(etch__res_next(&res) ? etch__res_i64(&res, 0) : 0));
  return etch__res_close(&res) ? 500 : 200;
}

static int samples_buckets(FILE *o, etch__db *db, int64_t start,
                           int64_t end, int64_t buckets) {
  char sql[1536];
  snprintf(sql, sizeof sql,
           "WITH w AS (SELECT id, ts, utid, least(%lld, CAST(floor((ts - "
           "%lld)::DOUBLE * %lld / %lld::DOUBLE) AS BIGINT)) AS b "
           "FROM perf_sample WHERE ts >= %lld AND ts < %lld), "
           "g AS (SELECT utid, b, count(*) AS n, arg_min(id, ts) AS first "
           "FROM w GROUP BY 1, 2) "
           "SELECT g.utid, g.b, g.n, g.first, s.ts, %s "
           "FROM g JOIN perf_sample s ON s.id = g.first "
           "LEFT JOIN stack_profile_callsite c ON c.id = s.callsite_id "
           "LEFT JOIN stack_profile_frame f ON f.id = c.frame_id "
           "LEFT JOIN stack_profile_mapping m ON m.id = f.mapping "
           "ORDER BY 1, 2",
           (long long)(buckets - 1), (long long)start, (long long)buckets,
           (long long)(end - start), (long long)start, (long long)end,
           ETCH__SAMPLE_FN_SQL);
  etch__res res;
  if (etch__query_run(db, sql, NULL, 0, &res)) return 500;
  fputs("{\"buckets\":[", o);
  for (int k = 0; etch__res_next(&res); k++) {
    fprintf(o, "%s[%lld,%lld,%lld,%lld,%lld,", k ? "," : "",
            (long long)etch__res_i64(&res, 0),
            (long long)etch__res_i64(&res, 1),
            (long long)etch__res_i64(&res, 2),
            (long long)etch__res_i64(&res, 3),
            (long long)etch__res_i64(&res, 4));
    if (etch__res_null(&res, 5)) {
      fputs("null]", o);
    } else {
      size_t len;
      const char *s = etch__res_str(&res, 5, &len);
      etch__json_string(o, s ? s : "", s ? len : 0);
      fputc(']', o);
    }
  }
  fputs("]}", o);
  return etch__res_close(&res) ? 500 : 200;
}

static int samples_one(FILE *o, etch__db *db, int64_t id) {
  char sql[1536];
  snprintf(sql, sizeof sql,
           "SELECT s.id, s.ts, s.utid, t.tid, s.cpu FROM perf_sample s "
           "LEFT JOIN thread t ON t.utid = s.utid WHERE s.id = %lld",
           (long long)id);
  etch__res res;
  if (etch__query_run(db, sql, NULL, 0, &res)) return 500;
  if (!etch__res_next(&res)) {
    etch__res_close(&res);
    return 404;
  }
  fprintf(o, "{\"id\":%lld,\"ts\":%lld,\"utid\":%lld,\"tid\":",
          (long long)etch__res_i64(&res, 0), (long long)etch__res_i64(&res, 1),
          (long long)etch__res_i64(&res, 2));
  if (etch__res_null(&res, 3))
    fputs("null", o);
  else
    fprintf(o, "%lld", (long long)etch__res_i64(&res, 3));
  if (etch__res_null(&res, 4))
    fputs(",\"cpu\":null", o);
  else
    fprintf(o, ",\"cpu\":%lld", (long long)etch__res_i64(&res, 4));
  if (etch__res_close(&res)) return 500;
  /* the stack, innermost first (a loop in the callsites stops at 1000) */
  snprintf(sql, sizeof sql,
           "WITH RECURSIVE up(cs, k) AS (SELECT callsite_id, 0 FROM "
           "perf_sample WHERE id = %lld AND callsite_id IS NOT NULL "
           "UNION ALL SELECT c.parent_id, up.k + 1 FROM up "
           "JOIN stack_profile_callsite c ON c.id = up.cs "
           "WHERE c.parent_id IS NOT NULL AND up.k < 1000) "
           "SELECT %s FROM up JOIN stack_profile_callsite c ON c.id = up.cs "
           "JOIN stack_profile_frame f ON f.id = c.frame_id "
           "LEFT JOIN stack_profile_mapping m ON m.id = f.mapping "
           "ORDER BY up.k",
           (long long)id, ETCH__SAMPLE_FN_SQL);
  if (etch__query_run(db, sql, NULL, 0, &res)) return 500;
  fputs(",\"frames\":[", o);
  for (int k = 0; etch__res_next(&res); k++) {
    if (k) fputc(',', o);
    size_t len;
    const char *s = etch__res_str(&res, 0, &len);
    if (s)
      etch__json_string(o, s, len);
    else
      json_str(o, NULL);
  }
  fputs("]}", o);
  return etch__res_close(&res) ? 500 : 200;
}

int etch__ui_api_samples(etch__ui_req *r) {
  int st;
  etch__ui_trace *t = etch__ui_req_trace(r, &st);
  if (!t) return st;
  int64_t sample = 0, start = 0, end = 0, buckets = 0;
  bool bad = false;
  bool one = arg_int(r, "sample", &sample, &bad);
  bool has_start = arg_int(r, "start", &start, &bad);
  bool has_end = arg_int(r, "end", &end, &bad);
  bool has_buckets = arg_int(r, "buckets", &buckets, &bad);
  bool window = has_start || has_end || has_buckets;
  if (bad || (one && window) ||
      (window && (!has_start || !has_end || !has_buckets || end <= start ||
                  buckets < 1 || buckets > 8192))) {
    fputs("{\"error\":\"sample=ID, or start, end and buckets (start < end, "
          "1 <= buckets <= 8192), integers\"}", r->out);
    return 400;
  }
  etch__ui_membuf mb;
  FILE *o = etch__ui_membuf_open(&mb);
  if (!o) {
    fputs("{\"error\":\"out of memory\"}", r->out);
    return 500;
  }
  int rc = one      ? samples_one(o, t->db, sample)
           : window ? samples_buckets(o, t->db, start, end, buckets)
                    : samples_threads(o, t->db);
  if (etch__ui_membuf_close(&mb) && rc == 200) rc = 500;
  if (rc == 200)
    fwrite(mb.v.data, 1, mb.v.len, r->out);
  else if (rc == 404)
    fputs("{\"error\":\"no sample of that id\"}", r->out);
  else
    fputs("{\"error\":\"the samples cannot be read\"}", r->out);
  etch__ui_membuf_free(&mb);
  return rc;
}

/* ---- the flame graph of allocation stacks -------------------------------------- */

/*
 * /api/alloc_flame?id=&mode=allocated|live: the allocations with a call
 * stack (etch record --malloc: instants of category "memory" with
 * debug.ptr and debug.size, their stacks in
 * __intrinsic_track_event_callstacks) merged by their stacks' functions
 * as /api/sample_flame's, in bytes: "allocated" every allocation's bytes,
 * "live" those never freed. A block is never freed, as etch leaks counts
 * it, when its allocation is the last event of its address in its
 * process (a free, or an allocation at the same address without a free,
 * ends it); count is the allocations.
 */
#define ALLOC_EVENTS                                                          \
  "WITH ev AS (SELECT s.id, s.ts, coalesce(th.upid, tr.upid, -1) AS up, "     \
  "p.int_value AS ptr, z.int_value AS size FROM slice s "                     \
  "JOIN track tr ON tr.id = s.track_id "                                      \
  "LEFT JOIN thread th ON th.utid = tr.utid "                                 \
  "LEFT JOIN args p ON p.arg_set_id = s.arg_set_id AND p.key = 'debug.ptr' "  \
  "LEFT JOIN args z ON z.arg_set_id = s.arg_set_id "                          \
  "AND z.key = 'debug.size' WHERE s.category = 'memory' AND s.dur = 0 "       \
  "AND p.int_value IS NOT NULL AND p.int_value != 0 "                         \
  "AND (z.int_value IS NOT NULL OR s.name = 'free')), "                       \
  "live AS (SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY up, "    \
  "ptr ORDER BY ts DESC, id DESC) AS rn FROM ev) WHERE rn = 1) "

int etch__ui_api_alloc_flame(etch__ui_req *r) {
  int st;
  etch__ui_trace *t = etch__ui_req_trace(r, &st);
  if (!t) return st;
  const char *mode = r->get(r->ctx, "mode");
  bool live = mode && !strcmp(mode, "live");
  if (!mode || (!live && strcmp(mode, "allocated"))) {
    fputs("{\"error\":\"mode is allocated or live\"}", r->out);
    return 400;
  }
  char weights[2048];
  snprintf(weights, sizeof weights,
           ALLOC_EVENTS
           "SELECT cs.callsite_id, sum(e.size)::BIGINT AS n, count(*) AS c "
           "FROM %s e JOIN __intrinsic_track_event_callstacks cs "
           "ON cs.slice_id = e.id WHERE e.size IS NOT NULL GROUP BY 1",
           live ? "live" : "ev");
  sf_tree tree = {0};
  int rc = sf_build(t->db, weights, &tree);
  if (!rc) sf_write(&tree, r->out, "bytes");
  sf_free(&tree);
  if (rc) {
    fputs(rc == ETCH_ENOMEM ? "{\"error\":\"out of memory\"}"
                            : "{\"error\":\"the allocations cannot be read\"}",
          r->out);
    return 500;
  }
  return 200;
}

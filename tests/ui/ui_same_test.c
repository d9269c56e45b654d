/*
 * ui_same_test.c - the ui's fast paths give the answers of the plain ones,
 * on a generated trace big enough to have them differ if they could: three
 * threads of nested slices (30 names in two categories, so that one name
 * has two key_ids), instants, a slice left open at the end, durations all
 * different (so that "the longest" of a merged run is one slice).
 *
 *  - tiles: the C aggregation over slice_data equals DuckDB's aggregation
 *    over the slice view, rectangle for rectangle, names included, for
 *    windows from the whole trace to a few slices;
 *  - a tile's counters from memory equal the query's, byte for byte;
 *  - the flame graph (read from slice_data, names by key) equals a
 *    recursive SQL query's stacks over the slice view: every node kept
 *    with its total, self and count, and no other.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "trace_build.h"
#include "ui/app.h"

enum { kThreads = 3, kNames = 30 };

static uint64_t g_rng = 0x243f6a8885a308d3ull;
static uint64_t rnd(uint64_t n) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng % n;
}

static uint64_t g_unique; /* makes every duration different */

/* A slice at `ts` with children inside; its end. */
static int64_t gen_slice(tb *t, uint64_t track, int64_t ts, int depth,
                         int64_t room) {
  char name[16];
  snprintf(name, sizeof name, "n%d", (int)rnd(kNames));
  const char *cat = rnd(2) ? "a" : "b";
  int64_t dur = 1000 * (1 + (int64_t)rnd((uint64_t)room / 3000 + 1)) +
                (int64_t)(++g_unique % 1000);
  if (dur > room) dur = room;
  tb_event(t, 1, ts, track, ETCH_TE_TYPE_SLICE_BEGIN, cat, name);
  int64_t at = ts + 1 + (int64_t)rnd(50);
  while (depth < 5 && at < ts + dur - 2000 && rnd(4)) {
    int64_t r = ts + dur - 1000 - at;
    at = gen_slice(t, track, at, depth + 1, r) + 1 + (int64_t)rnd(300);
  }
  tb_event(t, 1, ts + dur, track, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  return ts + dur;
}

static const char *gen_trace(void) {
  tb t;
  tb_init(&t);
  tb_process(&t, 1, 1, 20, "gen");
  for (int k = 0; k < kThreads; k++) {
    char nm[16];
    snprintf(nm, sizeof nm, "t%d", k);
    tb_thread(&t, 1, (uint64_t)(10 + k), 20, 20 + k, nm);
  }
  /* Each thread its own stretch of events in turn would not interleave:
   * the threads take turns a top-level slice at a time, in time order. */
  int64_t at[kThreads] = {1000000, 1000000, 1000000};
  for (int i = 0; i < 600; i++) {
    int k = 0;
    for (int j = 1; j < kThreads; j++)
      if (at[j] < at[k]) k = j;
    uint64_t track = (uint64_t)(10 + k);
    if (i % 60 == 59) /* an instant, alone among the top-level slices */
      tb_event(&t, 1, at[k] + 10, track, ETCH_TE_TYPE_INSTANT, "a", "mark");
    at[k] = gen_slice(&t, track, at[k] + 20 + (int64_t)rnd(20000), 0,
                      400000 + (int64_t)rnd(400000)) +
            100;
  }
  /* Two counters, values at times all different. */
  tb_counter_track(&t, 1, 30, 1, "load", ETCH_CD_UNIT_SIZE_BYTES);
  tb_counter_track(&t, 1, 31, 1, "queue", ETCH_CD_UNIT_SIZE_BYTES);
  for (int k = 0; k < 2; k++) {
    int64_t ts = 1000000 + k * 77;
    for (int i = 0; i < 3000; i++) {
      ts += 1 + (int64_t)rnd(90000);
      tb_counter_double(&t, 1, ts, (uint64_t)(30 + k),
                        (double)rnd(100000) / 7.0 - 5000);
    }
  }
  /* Open at the end, with a child. */
  tb_event(&t, 1, at[0] + 500, 10, ETCH_TE_TYPE_SLICE_BEGIN, "a", "open");
  tb_event(&t, 1, at[0] + 700, 10, ETCH_TE_TYPE_SLICE_BEGIN, "a", "n1");
  tb_event(&t, 1, at[0] + 900, 10, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  tb_event(&t, 1, at[0] + 5000, 11, ETCH_TE_TYPE_INSTANT, "a", "last");
  const char *p = tb_write_file(&t, "gen.pftrace");
  tb_free(&t);
  return p;
}

static etch__db *gen_db(void) {
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  etch__import_opts o = {.all_args = true};
  ASSERT_OK(etch__query_import_file(db, NULL, gen_trace(), &o, NULL));
  return db;
}

static int64_t one_i64(etch__db *db, const char *q) {
  etch__res r;
  ASSERT_OK(etch__ui_query(db, q, NULL, 0, &r));
  ASSERT_TRUE(etch__res_next(&r));
  int64_t v = etch__res_i64(&r, 0);
  ASSERT_OK(etch__res_close(&r));
  return v;
}

/* ---- tiles ----------------------------------------------------------------------- */

static void assert_same_tile(etch__db *db, const int64_t *tracks, size_t n,
                             int64_t s, int64_t e, double px) {
  etch__ui_tile a, b;
  ASSERT_OK(etch__ui_tile_slices(db, tracks, n, s, e, px, -1, &a));
  ASSERT_OK(etch__ui_tile_slices_sql(db, tracks, n, s, e, px, &b));
  if (a.n != b.n)
    FAIL("[%lld, %lld) at %g: %zu rectangles, DuckDB's %zu", (long long)s,
         (long long)e, px, a.n, b.n);
  for (size_t i = 0; i < a.n; i++) {
    const etch__ui_rect *x = &a.rects[i], *y = &b.rects[i];
    if (x->track_id != y->track_id || x->depth != y->depth || x->ts != y->ts ||
        x->end != y->end || x->count != y->count || x->id != y->id ||
        strcmp(x->name ? x->name : "(null)", y->name ? y->name : "(null)"))
      FAIL("[%lld, %lld) at %g, rectangle %zu: %lld %lld %lld %lld %lld %lld "
           "%s, DuckDB's %lld %lld %lld %lld %lld %lld %s",
           (long long)s, (long long)e, px, i, (long long)x->track_id,
           (long long)x->depth, (long long)x->ts, (long long)x->end,
           (long long)x->count, (long long)x->id, x->name,
           (long long)y->track_id, (long long)y->depth, (long long)y->ts,
           (long long)y->end, (long long)y->count, (long long)y->id, y->name);
  }
  etch__ui_tile_free(&a);
  etch__ui_tile_free(&b);
}

TEST(ui_tiles_in_c_are_duckdbs) {
  etch__db *db = gen_db();
  int64_t s0 = one_i64(db, "SELECT min(start_ts) FROM trace_bounds");
  int64_t e0 = one_i64(db, "SELECT max(end_ts) FROM trace_bounds") + 1;
  ASSERT_TRUE(one_i64(db, "SELECT count(*) FROM slice") > 5000);
  /* The same name in two categories: two keys. */
  ASSERT_TRUE(one_i64(db, "SELECT count(*) - count(DISTINCT name)"
                          " FROM slice_name") > 0);
  int64_t tracks[kThreads];
  etch__res r;
  ASSERT_OK(etch__ui_query(db, "SELECT id FROM thread_track ORDER BY id", NULL,
                           0, &r));
  size_t nt = 0;
  while (etch__res_next(&r) && nt < kThreads) tracks[nt++] = etch__res_i64(&r, 0);
  ASSERT_OK(etch__res_close(&r));
  ASSERT_EQ_INT(nt, kThreads);
  static const double kWidth[] = {1, 0.3, 0.1, 0.01, 0.001, 0.0001};
  for (size_t w = 0; w < sizeof kWidth / sizeof *kWidth; w++) {
    int64_t span = (int64_t)((double)(e0 - s0) * kWidth[w]);
    for (int k = 0; k < 4; k++) {
      int64_t s = s0 + (int64_t)((double)(e0 - s0 - span) * k / 3.0);
      for (int px = 300; px <= 2400; px *= 2) {
        assert_same_tile(db, tracks, nt, s, s + span, (double)span / px);
        assert_same_tile(db, tracks + 1, 1, s, s + span, (double)span / px);
      }
    }
  }
  /* Lists that leave a track of their range out, and a long one (DuckDB
   * makes an IN list of five or more a join) with ids of no track and
   * one twice. */
  int64_t gap[2] = {tracks[0], tracks[2]};
  int64_t many[7] = {1, tracks[2], 99999, tracks[0], tracks[2], 0, -5};
  for (int k = 0; k < 3; k++) {
    int64_t span = (e0 - s0) / (k * 40 + 1);
    assert_same_tile(db, gap, 2, s0 + span / 7, s0 + span / 7 + span, (double)span / 1000);
    assert_same_tile(db, many, 7, s0 + span / 7, s0 + span / 7 + span, (double)span / 700);
  }
  /* Windows before, after and across the end (the open slice). */
  assert_same_tile(db, tracks, nt, s0 - 100000, s0 + 1000, 10);
  assert_same_tile(db, tracks, nt, e0 - 100000, e0 + 100000, 100);
  assert_same_tile(db, tracks, nt, e0 + 10, e0 + 100000, 100);
  etch__db_close(db);
}

/* ---- the flame graph --------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The flame JSON's nodes as "path\ttotal self count" lines, a path the
 * names from the root joined by '/', sorted. */
static char *flame_lines(const char *json) {
  const char *p = strstr(json, "\"names\":[");
  ASSERT_TRUE(p);
  p += 9;
  char *names[4096];
  size_t nn = 0;
  while (*p == '"') {
    const char *q = strchr(p + 1, '"');
    ASSERT_TRUE(q && nn < 4096);
    names[nn++] = strndup(p + 1, (size_t)(q - p - 1));
    p = q + 1;
    if (*p == ',') p++;
  }
  p = strstr(p, "\"nodes\":[");
  ASSERT_TRUE(p);
  p += 9;
  size_t cap = 1024, n = 0;
  char **path = malloc(cap * sizeof *path);
  char **line = malloc(cap * sizeof *line);
  while (*p == '[') {
    long long par, nm, total, self, count;
    int used = 0;
    ASSERT_EQ_INT(sscanf(p, "[%lld,%lld,%lld,%lld,%lld]%n", &par, &nm, &total,
                         &self, &count, &used),
                  5);
    p += used;
    if (*p == ',') p++;
    if (n == cap) {
      cap *= 2;
      path = realloc(path, cap * sizeof *path);
      line = realloc(line, cap * sizeof *line);
    }
    if (par < 0) {
      path[n] = strdup("");
    } else {
      ASSERT_TRUE(par < (long long)n && nm >= 0 && nm < (long long)nn);
      ASSERT_TRUE(asprintf(&path[n], "%s/%s", path[par], names[nm]) > 0);
    }
    ASSERT_TRUE(asprintf(&line[n], "%s\t%lld %lld %lld", path[n], total,
                         par < 0 ? 0 : self, par < 0 ? 0 : count) > 0);
    n++;
  }
  qsort(line, n, sizeof *line, cmp_str);
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  for (size_t i = 0; i < n; i++) {
    fprintf(f, "%s\n", line[i]);
    free(line[i]);
    free(path[i]);
  }
  fclose(f);
  for (size_t i = 0; i < nn; i++) free(names[i]);
  free(path);
  free(line);
  return out;
}

/* The same lines from SQL: each slice's stack by a recursive query over the
 * slice view (a slice whose parent is not selected starts a stack), the
 * totals by stack, self from the children's totals, and only the nodes the
 * flame graph keeps (at least 1/20000 of the whole, as are all above). */
static char *sql_lines(etch__db *db, int64_t s, int64_t e, int64_t utid) {
  bool range = s <= e;
  char *q = NULL;
  ASSERT_TRUE(asprintf(
                  &q,
                  "WITH RECURSIVE sel AS (SELECT id, parent_id,"
                  " coalesce(name, '') AS name, %s AS d FROM slice"
                  " WHERE dur > 0 %s %s),"
                  " st(id, path, d) AS ("
                  "  SELECT id, '/' || name, d FROM sel WHERE parent_id IS NULL"
                  "   OR parent_id NOT IN (SELECT id FROM sel)"
                  "  UNION ALL SELECT c.id, st.path || '/' || c.name, c.d"
                  "  FROM sel c JOIN st ON c.parent_id = st.id)"
                  " SELECT path, sum(d), count(*) FROM st GROUP BY path",
                  range ? "least(ts + dur, $1) - greatest(ts, $2)" : "dur",
                  range ? "AND ts < $1 AND ts + dur > $2" : "AND $1 = $1 AND $2 = $2",
                  utid >= 0 ? "AND track_id IN (SELECT id FROM track WHERE utid = $3)"
                            : "AND $3 = $3") > 0);
  etch__ui_bind b[] = {{.i = e}, {.i = s}, {.i = utid}};
  etch__res r;
  ASSERT_OK(etch__ui_query(db, q, b, 3, &r));
  free(q);
  size_t cap = 1024, n = 0;
  char **path = malloc(cap * sizeof *path);
  int64_t *total = malloc(cap * sizeof *total), *count = malloc(cap * sizeof *count);
  while (etch__res_next(&r)) {
    if (n == cap) {
      cap *= 2;
      path = realloc(path, cap * sizeof *path);
      total = realloc(total, cap * sizeof *total);
      count = realloc(count, cap * sizeof *count);
    }
    path[n] = etch__res_strdup(&r, 0);
    total[n] = etch__res_i64(&r, 1);
    count[n] = etch__res_i64(&r, 2);
    n++;
  }
  ASSERT_OK(etch__res_close(&r));
  int64_t whole = 0;
  for (size_t i = 0; i < n; i++)
    if (!strchr(path[i] + 1, '/')) whole += total[i];
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  char **lines = malloc((n + 1) * sizeof *lines);
  size_t nl = 0;
  ASSERT_TRUE(asprintf(&lines[nl++], "\t%lld 0 0", (long long)whole) > 0);
  for (size_t i = 0; i < n; i++) {
    /* Kept: this node and every node above it. */
    bool keep = true;
    int64_t kids = 0;
    size_t pl = strlen(path[i]);
    for (size_t j = 0; j < n && keep; j++) {
      size_t l = strlen(path[j]);
      if (l < pl && !strncmp(path[i], path[j], l) && path[i][l] == '/' &&
          total[j] * 20000 < whole)
        keep = false;
      if (l > pl && !strncmp(path[j], path[i], pl) && path[j][pl] == '/' &&
          !strchr(path[j] + pl + 1, '/'))
        kids += total[j];
    }
    if (!keep || total[i] * 20000 < whole) continue;
    ASSERT_TRUE(asprintf(&lines[nl++], "%s\t%lld %lld %lld", path[i],
                         (long long)total[i], (long long)(total[i] - kids),
                         (long long)count[i]) > 0);
  }
  qsort(lines, nl, sizeof *lines, cmp_str);
  for (size_t i = 0; i < nl; i++) {
    fprintf(f, "%s\n", lines[i]);
    free(lines[i]);
  }
  fclose(f);
  for (size_t i = 0; i < n; i++) free(path[i]);
  free(path);
  free(total);
  free(count);
  free(lines);
  return out;
}

static void assert_same_flame(etch__db *db, int64_t s, int64_t e,
                              int64_t utid) {
  char *json = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&json, &len);
  ASSERT_OK(etch__ui_flame(db, s, e, utid, f));
  fclose(f);
  char *got = flame_lines(json), *want = sql_lines(db, s, e, utid);
  if (strcmp(got, want))
    FAIL("flame graph [%lld, %lld) utid %lld\n--- SQL ---\n%.3000s\n--- "
         "flame ---\n%.3000s",
         (long long)s, (long long)e, (long long)utid, want, got);
  free(got);
  free(want);
  free(json);
}

TEST(ui_flame_from_keys_is_sqls_stacks) {
  etch__db *db = gen_db();
  int64_t s0 = one_i64(db, "SELECT min(start_ts) FROM trace_bounds");
  int64_t e0 = one_i64(db, "SELECT max(end_ts) FROM trace_bounds") + 1;
  assert_same_flame(db, 0, -1, -1);
  for (int64_t u = 1; u <= kThreads; u++) assert_same_flame(db, 0, -1, u);
  int64_t span = e0 - s0;
  assert_same_flame(db, s0 + span / 3, s0 + span / 3 + span / 10, -1);
  assert_same_flame(db, s0 + span / 2, s0 + span / 2 + span / 1000, 2);
  assert_same_flame(db, e0 - span / 50, e0 + 1000, -1);
  /* Some nodes are left out (under 1/20000 of the whole). */
  char *json = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&json, &len);
  ASSERT_OK(etch__ui_flame(db, 0, -1, -1, f));
  fclose(f);
  ASSERT_FALSE(strstr(json, "\"pruned\":0,"));
  free(json);
  /* Told to stop (the thread ahead, when a request computes the graph
   * itself): an error, no answer. */
  atomic_bool stop;
  atomic_init(&stop, true);
  json = NULL;
  f = open_memstream(&json, &len);
  ASSERT_TRUE(etch__ui_flame_until(db, 0, -1, -1, &stop, f) != ETCH_OK);
  fclose(f);
  ASSERT_EQ_INT(len, 0);
  free(json);
  etch__db_close(db);
}

/* ---- counters ----------------------------------------------------------------------- */

typedef struct kv {
  const char *k[8], *v[8];
} kv;

static const char *get(void *ctx, const char *key) {
  kv *a = ctx;
  for (int i = 0; i < 8 && a->k[i]; i++)
    if (!strcmp(a->k[i], key)) return a->v[i];
  return NULL;
}

static char *tile_body(etch__ui *ui, int64_t s, int64_t e, int px,
                       const char *counters) {
  char ss[32], es[32], ps[32];
  snprintf(ss, sizeof ss, "%lld", (long long)s);
  snprintf(es, sizeof es, "%lld", (long long)e);
  snprintf(ps, sizeof ps, "%d", px);
  kv a = {{"id", "start", "end", "px", "tracks", "counters"},
          {ui->t[0].id, ss, es, ps, "", counters}};
  char *body = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&body, &len);
  ASSERT_EQ_INT(etch__ui_api(ui, "/api/tile", get, &a, f), 200);
  fclose(f);
  return body;
}

TEST(ui_counters_in_memory_are_the_querys) {
  etch__ui *ui;
  ASSERT_OK(etch__ui_new(&ui));
  etch__ui_set_cache_dir(ui, etch_test_tmpdir());
  ASSERT_OK(etch__ui_add_path(ui, gen_trace()));
  char *first = tile_body(ui, 0, 1, 10, "");
  free(first);
  etch__ui_trace *t = &ui->t[0];
  etch__res r;
  ASSERT_OK(etch__ui_query(t->db,
                           "SELECT string_agg(CAST(id AS VARCHAR), ',' ORDER BY id),"
                           " min(start_ts), max(end_ts) FROM track, trace_bounds"
                           " WHERE type = 'counter'",
                           NULL, 0, &r));
  ASSERT_TRUE(etch__res_next(&r));
  char *list = etch__res_strdup(&r, 0);
  int64_t s0 = etch__res_i64(&r, 1), e0 = etch__res_i64(&r, 2) + 1;
  ASSERT_OK(etch__res_close(&r));
  /* Windows from the whole trace to a few values, lists with one track,
   * both, one twice and one that is no counter. */
  char both_twice[128], with_other[128];
  snprintf(both_twice, sizeof both_twice, "%s,%s", list, list);
  snprintf(with_other, sizeof with_other, "%s,1,99999", list);
  const char *lists[] = {list, both_twice, with_other, strchr(list, ',') + 1};
  char *memory[6 * 4 * 4];
  int64_t win[6 * 4][2];
  int pxs[4] = {1, 37, 800, 3000};
  size_t n = 0;
  for (int w = 0; w < 6; w++) {
    int64_t span = (e0 - s0) / (int64_t)(w * w * 7 + 1);
    int64_t s = s0 - 1000 + (e0 - s0 - span) / 3 * (w % 3);
    win[w][0] = s;
    win[w][1] = s + span;
    for (int k = 0; k < 4; k++)
      memory[n++] = tile_body(ui, s, s + span, pxs[k], lists[(w + k) % 4]);
  }
  ASSERT_TRUE(t->counters != NULL);
  ASSERT_TRUE(strstr(memory[0], "\"counters\":[["));
  /* Now by the query. */
  etch__ui_counters_free(t->counters);
  t->counters = NULL;
  n = 0;
  for (int w = 0; w < 6; w++)
    for (int k = 0; k < 4; k++) {
      char *q = tile_body(ui, win[w][0], win[w][1], pxs[k], lists[(w + k) % 4]);
      if (strcmp(q, memory[n]))
        FAIL("window %d, px %d: from memory\n%.2000s\nfrom the query\n%.2000s", w,
             pxs[k], memory[n], q);
      free(q);
      free(memory[n++]);
    }
  free(list);
  etch__ui_free(ui);
}

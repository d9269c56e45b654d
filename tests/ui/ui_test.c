/*
 * ui_test.c - the ui part's C tests: tiles (exact rectangles at given
 * resolutions), the flame graph's totals, the API's refusals (SQL that
 * writes or reads files, ids it never gave, bad numbers), a trace that is
 * corrupt or removed while open, the report's data, and the server's
 * checks over a real socket (token, Host, method).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "ui/app.h"
#include "ui_trace.h"

static const char *trace_file(void) {
  tb t;
  tb_init(&t);
  ui_test_trace(&t);
  const char *p = tb_write_file(&t, "ui.pftrace");
  tb_free(&t);
  return p;
}

static etch__db *trace_db(void) {
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  etch__import_opts o = {.all_args = true};
  ASSERT_OK(etch__query_import_file(db, NULL, trace_file(), &o, NULL));
  return db;
}

static int64_t track_of(etch__db *db, const char *thread) {
  etch__res r;
  etch__ui_bind b[] = {{.s = thread}};
  ASSERT_OK(etch__ui_query(db,
                           "SELECT t.id FROM track t JOIN thread th USING (utid)"
                           " WHERE th.name = $1 AND t.type = 'thread'",
                           b, 1, &r));
  ASSERT_TRUE(etch__res_next(&r));
  int64_t id = etch__res_i64(&r, 0);
  ASSERT_OK(etch__res_close(&r));
  return id;
}

/* The tile as lines "depth ts end count name". */
static char *tile_text(etch__db *db, int64_t track, int64_t start,
                       int64_t end, double ns_per_px) {
  etch__ui_tile tile;
  ASSERT_OK(etch__ui_tile_slices(db, &track, 1, start, end, ns_per_px, -1,
                                 &tile));
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  for (size_t i = 0; i < tile.n; i++) {
    const etch__ui_rect *x = &tile.rects[i];
    ASSERT_EQ_INT(x->track_id, track);
    fprintf(f, "%lld %lld %lld %lld %s\n", (long long)x->depth,
            (long long)x->ts, (long long)x->end, (long long)x->count,
            x->name ? x->name : "NULL");
  }
  fclose(f);
  etch__ui_tile_free(&tile);
  return buf;
}

#define ASSERT_TILE(db, track, s, e, r, expected)                        \
  do {                                                                   \
    char *got_ = tile_text((db), (track), (s), (e), (r));                \
    if (strcmp(got_, (expected)) != 0)                                   \
      FAIL("tile [%d, %d) at %g ns/px\n--- expected ---\n%s--- got ---\n%s", \
           (int)(s), (int)(e), (double)(r), (expected), got_);           \
    free(got_);                                                          \
  } while (0)

TEST(ui_tile_merges_slices_under_a_pixel) {
  etch__db *db = trace_db();
  int64_t main_ = track_of(db, "main"), worker = track_of(db, "worker");
  /* 1 us a pixel: the three tiny slices start in column 95 and are one
   * rectangle named after the longest; vsync (an instant) is alone in its
   * column. */
  ASSERT_TILE(db, main_, 0, 200000, 1000,
              "0 1000 101000 1 frame\n"
              "0 110000 200000 1 frame\n"
              "1 2000 42000 1 draw\n"
              "1 45000 45000 1 vsync\n"
              "1 50000 90000 1 draw\n"
              "1 95000 95600 3 tiny_b\n"
              "1 120000 180000 1 draw\n");
  /* 400 ns a pixel from 94000: tiny_a and tiny_b share column 2, tiny_c
   * is column 3; frame began before the window and is in it. */
  ASSERT_TILE(db, main_, 94000, 98000, 400,
              "0 1000 101000 1 frame\n"
              "1 95000 95450 2 tiny_b\n"
              "1 95500 95600 1 tiny_c\n");
  /* 100 ns a pixel: every slice is at least a pixel wide. */
  ASSERT_TILE(db, main_, 95000, 96000, 100,
              "0 1000 101000 1 frame\n"
              "1 95000 95100 1 tiny_a\n"
              "1 95150 95450 1 tiny_b\n"
              "1 95500 95600 1 tiny_c\n");
  /* Coarse: 50 us a pixel keeps both jobs (55 and 80 us); at 100 us a
   * pixel both start in column 0 and are one, named after the longer. */
  ASSERT_TILE(db, worker, 0, 200000, 50000,
              "0 5000 60000 1 job\n"
              "0 65000 65000 1 etch.dropped_events\n"
              "0 70000 150000 1 job\n"
              "1 80000 100000 1 io\n");
  ASSERT_TILE(db, worker, 0, 200000, 100000,
              "0 5000 150000 3 job\n"
              "1 80000 100000 1 io\n");
  /* A window after everything, one ending where a slice begins, one
   * between an end and an instant. */
  ASSERT_TILE(db, worker, 160000, 170000, 10, "");
  ASSERT_TILE(db, worker, 65001, 70000, 10, "");
  ASSERT_TILE(db, worker, 60001, 65000, 10, "");
  ASSERT_TILE(db, worker, 60001, 65001, 10,
              "0 65000 65000 1 etch.dropped_events\n");
  etch__db_close(db);
}

TEST(ui_tile_ids_are_the_slices) {
  etch__db *db = trace_db();
  int64_t main_ = track_of(db, "main");
  etch__ui_tile tile;
  ASSERT_OK(etch__ui_tile_slices(db, &main_, 1, 0, 200000, 1000, -1, &tile));
  for (size_t i = 0; i < tile.n; i++) {
    etch__ui_rect *x = &tile.rects[i];
    /* A rectangle's id is its (first) slice: same start, and the slice's
     * name when it is alone. */
    etch__res r;
    etch__ui_bind b[] = {{.i = x->id}};
    ASSERT_OK(etch__ui_query(db, "SELECT ts, name FROM slice WHERE id = $1",
                             b, 1, &r));
    ASSERT_TRUE(etch__res_next(&r));
    ASSERT_EQ_INT(etch__res_i64(&r, 0), x->ts);
    char *n = etch__res_strdup(&r, 1);
    if (x->count == 1) ASSERT_EQ_STR(n, x->name);
    free(n);
    ASSERT_OK(etch__res_close(&r));
  }
  etch__ui_tile_free(&tile);
  etch__db_close(db);
}

/* The tile as text, from an overview. */
static char *lod_text(const etch__ui_lod *lod, int64_t track, int64_t start,
                      int64_t end, double ns_per_px) {
  etch__ui_tile tile;
  ASSERT_OK(etch__ui_lod_tile(lod, &track, 1, start, end, ns_per_px, &tile));
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  for (size_t i = 0; i < tile.n; i++) {
    const etch__ui_rect *x = &tile.rects[i];
    fprintf(f, "%lld %lld %lld %lld %s\n", (long long)x->depth,
            (long long)x->ts, (long long)x->end, (long long)x->count,
            x->name ? x->name : "NULL");
  }
  fclose(f);
  etch__ui_tile_free(&tile);
  return buf;
}

TEST(ui_overview_tiles_are_the_exact_tiles_here) {
  etch__db *db = trace_db();
  int64_t tracks[] = {track_of(db, "main"), track_of(db, "worker")};
  /* 2000 columns over [1000, 200001): 100 ns a column. Every slice of this
   * trace starts on a multiple of 50 ns, so the overview's columns hold
   * the same runs as the tiles' columns of 100 ns and more. */
  etch__ui_lod *lod;
  ASSERT_OK(etch__ui_lod_build(db, 2000, -1, &lod));
  ASSERT_EQ_INT(etch__ui_lod_resolution(lod), 100);
  static const int64_t kWin[][3] = {{0, 200000, 1000},   {94000, 98000, 400},
                                    {95000, 96000, 100}, {0, 200000, 100000},
                                    {0, 200000, 50000},  {160000, 170000, 100},
                                    {1000, 200001, 99500}};
  for (size_t k = 0; k < 2; k++)
    for (size_t i = 0; i < sizeof kWin / sizeof *kWin; i++) {
      char *want = tile_text(db, tracks[k], kWin[i][0], kWin[i][1],
                             (double)kWin[i][2]);
      char *got = lod_text(lod, tracks[k], kWin[i][0], kWin[i][1],
                           (double)kWin[i][2]);
      if (strcmp(want, got))
        FAIL("window %zu of track %zu\n--- tile ---\n%s--- overview ---\n%s",
             i, k, want, got);
      free(want);
      free(got);
    }
  etch__ui_lod_free(lod);
  etch__db_close(db);
}

TEST(ui_stretch_overviews_make_the_exact_tiles_here) {
  etch__db *db = trace_db();
  int64_t tracks[] = {track_of(db, "main"), track_of(db, "worker")};
  /* Two stretches, 1000 columns each (100 ns): a stretch holds only the
   * slices that start in it; frame and the second job cross the border. */
  etch__ui_lod *st[2];
  ASSERT_OK(etch__ui_lod_build_stretch(db, 1000, 101000, 1000, -1, &st[0]));
  ASSERT_OK(etch__ui_lod_build_stretch(db, 101000, 200001, 1000, -1, &st[1]));
  ASSERT_EQ_INT(etch__ui_lod_resolution(st[0]), 100);
  static const int64_t kWin[][3] = {{90000, 120000, 1000}, {100500, 101500, 100},
                                    {0, 200001, 2000},     {60000, 160000, 500},
                                    {150000, 160000, 100}};
  for (size_t k = 0; k < 2; k++)
    for (size_t i = 0; i < sizeof kWin / sizeof *kWin; i++) {
      char *want = tile_text(db, tracks[k], kWin[i][0], kWin[i][1],
                             (double)kWin[i][2]);
      etch__ui_tile tile;
      ASSERT_OK(etch__ui_lods_tile(st, 2, &tracks[k], 1, kWin[i][0],
                                   kWin[i][1], (double)kWin[i][2], &tile));
      char *got = NULL;
      size_t len = 0;
      FILE *f = open_memstream(&got, &len);
      for (size_t j = 0; j < tile.n; j++)
        fprintf(f, "%lld %lld %lld %lld %s\n", (long long)tile.rects[j].depth,
                (long long)tile.rects[j].ts, (long long)tile.rects[j].end,
                (long long)tile.rects[j].count, tile.rects[j].name);
      fclose(f);
      etch__ui_tile_free(&tile);
      if (strcmp(want, got))
        FAIL("window %zu of track %zu\n--- tile ---\n%s--- stretches ---\n%s",
             i, k, want, got);
      free(want);
      free(got);
    }
  /* Each slice is in one stretch: no rectangle twice. */
  etch__ui_tile all;
  ASSERT_OK(etch__ui_lods_tile(st, 2, tracks, 2, 0, 200001, 1, &all));
  ASSERT_EQ_INT(all.n, 13);
  etch__ui_tile_free(&all);
  etch__ui_lod_free(st[0]);
  etch__ui_lod_free(st[1]);
  etch__db_close(db);
}

/* ---- the flame graph ------------------------------------------------------------ */

/* The index of `name` in the flame JSON's names. */
static int name_index(const char *json, const char *name) {
  const char *p = strstr(json, "\"names\":[");
  ASSERT_TRUE(p);
  p += 9;
  char want[64];
  snprintf(want, sizeof want, "\"%s\"", name);
  for (int i = 0; *p && *p != ']'; i++) {
    if (!strncmp(p, want, strlen(want))) return i;
    p = strchr(p + 1, '"');
    ASSERT_TRUE(p);
    p++;
    if (*p == ',') p++;
  }
  FAIL("no name %s in %s", name, json);
}

static char *flame(etch__db *db, int64_t s, int64_t e, int64_t utid) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ASSERT_OK(etch__ui_flame(db, s, e, utid, f));
  fclose(f);
  return buf;
}

/* node [parent, name, total, self, count] is in the JSON. */
static void assert_node(const char *json, int parent, const char *name,
                        long total, long self, long count) {
  char want[128];
  snprintf(want, sizeof want, "[%d,%d,%ld,%ld,%ld]", parent,
           name_index(json, name), total, self, count);
  if (!strstr(json, want)) FAIL("no node %s (%s) in %s", want, name, json);
}

TEST(ui_flame_whole_thread_and_range) {
  etch__db *db = trace_db();
  char *j = flame(db, 0, -1, -1);
  /* Root (0): frame 100000 + 90000, job 55000 + 80000. frame's children:
   * draw x3 (140000), tiny_a/b/c (500); vsync, an instant, is no time.
   * Nodes are numbered level by level, each level in id order: 0 root,
   * 1 frame, 2 job, then 3 draw, 4 io, 5..7 tiny. */
  ASSERT_TRUE(strstr(j, "[-1,-1,325000,0,0]"));
  assert_node(j, 0, "frame", 190000, 49500, 2);
  assert_node(j, 1, "draw", 140000, 140000, 3);
  assert_node(j, 0, "job", 135000, 115000, 2);
  assert_node(j, 2, "io", 20000, 20000, 1);
  assert_node(j, 1, "tiny_b", 300, 300, 1);
  free(j);
  /* The worker alone (utid 2). */
  j = flame(db, 0, -1, 2);
  ASSERT_TRUE(strstr(j, "[-1,-1,135000,0,0]"));
  assert_node(j, 0, "job", 135000, 115000, 2);
  ASSERT_FALSE(strstr(j, "\"frame\""));
  free(j);
  /* [40000, 60000): clipped durations. frame 20000 > draw 2000 + 10000;
   * job 20000. */
  j = flame(db, 40000, 60000, -1);
  ASSERT_TRUE(strstr(j, "[-1,-1,40000,0,0]"));
  assert_node(j, 0, "frame", 20000, 8000, 1);
  assert_node(j, 1, "draw", 12000, 12000, 2);
  assert_node(j, 0, "job", 20000, 20000, 1);
  free(j);
  etch__db_close(db);
}

/* ---- the API --------------------------------------------------------------------- */

typedef struct args {
  const char *k[8], *v[8];
} args;

static const char *get(void *ctx, const char *key) {
  args *a = ctx;
  for (int i = 0; i < 8 && a->k[i]; i++)
    if (!strcmp(a->k[i], key)) return a->v[i];
  return NULL;
}

static int call(etch__ui *ui, const char *path, args *a, char **body) {
  size_t len = 0;
  FILE *f = open_memstream(body, &len);
  int st = etch__ui_api(ui, path, get, a, f);
  fclose(f);
  return st;
}

static etch__ui *app_of(const char *path) {
  etch__ui *ui;
  ASSERT_OK(etch__ui_new(&ui));
  etch__ui_set_cache_dir(ui, etch_test_tmpdir());
  ASSERT_OK(etch__ui_add_path(ui, path));
  return ui;
}

static int sql(etch__ui *ui, const char *q, char **body) {
  args a = {{"id", "q"}, {ui->t[0].id, q}};
  return call(ui, "/api/sql", &a, body);
}

TEST(ui_api_sql_reads_only) {
  etch__ui *ui = app_of(trace_file());
  char *b;
  ASSERT_EQ_INT(sql(ui, "select name, dur from slice where name = 'io'", &b),
                200);
  ASSERT_EQ_STR(b, "{\"columns\":[\"name\",\"dur\"],\"rows\":[[\"io\",\"20000\"]],"
                   "\"total\":1}");
  free(b);
  ASSERT_EQ_INT(sql(ui, "  -- a comment\n with x as (select 1 as one) select * from x -- end", &b), 200);
  ASSERT_EQ_STR(b, "{\"columns\":[\"one\"],\"rows\":[[\"1\"]],\"total\":1}");
  free(b);
  /* At most 5000 rows, and that there were more. */
  ASSERT_EQ_INT(sql(ui, "select * from range(7000);", &b), 200);
  ASSERT_TRUE(strstr(b, "[\"4999\"]],\"more\":true}"));
  ASSERT_FALSE(strstr(b, "[\"5000\"]"));
  free(b);
  ASSERT_EQ_INT(sql(ui, "explain select 1", &b), 200);
  free(b);
  static const char *const kRefused[] = {
      "insert into stats values ('x', 0, 'info', 'trace', 1, '')",
      "delete from slice",
      "with x as (select 1) delete from slice_rows",
      "with x as (select 1) insert into stats select * from stats",
      "copy (select 1) to 'out.csv'",
      "attach 'other.duckdb' as o",
      "create table t (a int)",
      "select 1; drop table slice",
      "pragma version",
      "set enable_external_access = true",
      "install httpfs",
      "/* select */ update slice set dur = 0",
  };
  for (size_t i = 0; i < sizeof kRefused / sizeof *kRefused; i++) {
    int st = sql(ui, kRefused[i], &b);
    if (st != 403) FAIL("%s: status %d, %s", kRefused[i], st, b);
    ASSERT_TRUE(strstr(b, "\"error\""));
    free(b);
  }
  /* A SELECT that would read a file: no access outside the tables. */
  int st = sql(ui, "select * from read_csv('/etc/passwd')", &b);
  ASSERT_EQ_INT(st, 400);
  ASSERT_TRUE(strstr(b, "disabled"));
  free(b);
  /* The tables are as they were. */
  ASSERT_EQ_INT(sql(ui, "select count(*) from slice", &b), 200);
  ASSERT_TRUE(strstr(b, "[[\"13\"]]"));
  free(b);
  etch__ui_free(ui);
}

TEST(ui_api_ids_and_arguments) {
  etch__ui *ui = app_of(trace_file());
  const char *id = ui->t[0].id;
  char *b;
  args list = {{0}};
  ASSERT_EQ_INT(call(ui, "/api/traces", &list, &b), 200);
  ASSERT_TRUE(strstr(b, id));
  free(b);
  /* Ids the app never gave, paths, nothing. */
  static const char *const kIds[] = {"0000000000000000", "../../etc/passwd",
                                     "", "ui.pftrace"};
  for (size_t i = 0; i < 4; i++) {
    args a = {{"id"}, {kIds[i]}};
    ASSERT_EQ_INT(call(ui, "/api/trace", &a, &b), 404);
    free(b);
  }
  args none = {{0}};
  ASSERT_EQ_INT(call(ui, "/api/trace", &none, &b), 404);
  free(b);
  ASSERT_EQ_INT(call(ui, "/api/nothing", &none, &b), 404);
  free(b);
  /* Numbers that are not. */
  static const char *const kBad[][3] = {
      {"abc", "100", "10"}, {"0", "1e9", "10"}, {"0", "100", "0"},
      {"100", "0", "10"},   {"0", "100", "99999999999999999999"},
      {"0", "100", "-1"}};
  for (size_t i = 0; i < 6; i++) {
    args a = {{"id", "start", "end", "px", "tracks"},
              {id, kBad[i][0], kBad[i][1], kBad[i][2], "1"}};
    ASSERT_EQ_INT(call(ui, "/api/tile", &a, &b), 400);
    free(b);
  }
  args t = {{"id", "start", "end", "px", "tracks"},
            {id, "0", "100", "10", "1;drop table slice"}};
  ASSERT_EQ_INT(call(ui, "/api/tile", &t, &b), 400);
  free(b);
  /* The trace's rows and its data loss, where it happened. */
  args tr = {{"id"}, {id}};
  ASSERT_EQ_INT(call(ui, "/api/trace", &tr, &b), 200);
  char loss[64];
  snprintf(loss, sizeof loss, "\"loss\":[[65000,%lld,5]]",
           (long long)track_of(ui->t[0].db, "worker"));
  if (!strstr(b, loss)) FAIL("no %s in %s", loss, b);
  ASSERT_TRUE(strstr(b, "\"name\":\"heap\",\"type\":\"counter\""));
  ASSERT_TRUE(strstr(b, "\"thread\":\"main\",\"maxdepth\":1,\"count\":9"));
  ASSERT_TRUE(strstr(b, "\"thread\":\"worker\",\"maxdepth\":1,\"count\":4"));
  free(b);
  /* A good one: the slice's details with its arg and flow. */
  args s = {{"id", "slice"}, {id, "1"}};
  ASSERT_EQ_INT(call(ui, "/api/slice", &s, &b), 200);
  ASSERT_TRUE(strstr(b, "\"name\":\"frame\""));
  ASSERT_TRUE(strstr(b, "\"args\":[[\"debug.n\",\"3\"]]"));
  ASSERT_TRUE(strstr(b, "\"flows_out\":[{\"id\":3,\"ts\":5000,"));
  free(b);
  etch__ui_free(ui);
}

TEST(ui_api_corrupt_and_removed_traces) {
  char bad[512];
  snprintf(bad, sizeof bad, "%s/bad.pftrace", etch_test_tmpdir());
  FILE *f = fopen(bad, "wb");
  fputs("\x0a\x05zz", f); /* a packet of 5 bytes that holds 2, then nothing */
  fputs("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", f);
  fclose(f);
  etch__ui *ui = app_of(bad);
  char *b;
  args a = {{"id"}, {ui->t[0].id}};
  int st = call(ui, "/api/trace", &a, &b);
  ASSERT_EQ_INT(st, 422);
  ASSERT_TRUE(strstr(b, "cannot be read"));
  free(b);
  etch__ui_free(ui);

  /* Opened, then removed: a clear message, not stale answers. */
  char copy[512];
  snprintf(copy, sizeof copy, "%s/gone.pftrace", etch_test_tmpdir());
  tb t;
  tb_init(&t);
  ui_test_trace(&t);
  f = fopen(copy, "wb");
  fwrite(tb_data(&t), 1, tb_len(&t), f);
  fclose(f);
  tb_free(&t);
  ui = app_of(copy);
  args b1 = {{"id"}, {ui->t[0].id}};
  ASSERT_EQ_INT(call(ui, "/api/trace", &b1, &b), 200);
  free(b);
  ASSERT_EQ_INT(unlink(copy), 0);
  ASSERT_EQ_INT(call(ui, "/api/trace", &b1, &b), 410);
  ASSERT_TRUE(strstr(b, "no longer there"));
  free(b);
  etch__ui_free(ui);
}

TEST(ui_report_data_and_page) {
  etch__ui *ui = app_of(trace_file());
  char *data = NULL, *page = NULL;
  size_t len = 0, plen = 0;
  FILE *f = open_memstream(&data, &len);
  ASSERT_OK(etch__ui_report_data(ui, 0, 200, f));
  fclose(f);
  ASSERT_TRUE(strstr(data, "\"tile\":{"));
  ASSERT_TRUE(strstr(data, "\"flame\":{"));
  ASSERT_TRUE(strstr(data, "\"stats\":{"));
  /* 200 columns over [1000, 200001): the tiny slices are one. */
  ASSERT_TRUE(strstr(data, ",95000,95600,3,"));
  f = open_memstream(&page, &plen);
  const char *hostile = "{\"s\":\"</script><b>\"}";
  etch__ui_page(f, hostile, strlen(hostile));
  fclose(f);
  ASSERT_TRUE(strstr(page, "\\u003c/script>\\u003cb>"));
  ASSERT_FALSE(strstr(page, "</script><b>"));
  /* Nothing loaded from anywhere: no URL in the page. */
  ASSERT_FALSE(strstr(page, "http:"));
  ASSERT_FALSE(strstr(page, "https:"));
  ASSERT_FALSE(strstr(page, " src="));
  free(page);
  free(data);
  etch__ui_free(ui);
}

/* ---- the server over a socket ------------------------------------------------------ */

/* Sends `req` to port and returns the status of the answer. */
static int http(unsigned port, const char *req, char *body, size_t n) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_TRUE(fd >= 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ASSERT_EQ_INT(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  size_t len = strlen(req);
  ASSERT_EQ_INT(write(fd, req, len), (ssize_t)len);
  size_t got = 0;
  ssize_t r;
  while (got + 1 < n && (r = read(fd, body + got, n - 1 - got)) > 0)
    got += (size_t)r;
  body[got] = '\0';
  close(fd);
  int status = 0;
  ASSERT_EQ_INT(sscanf(body, "HTTP/1.%*d %d", &status), 1);
  return status;
}

TEST(ui_server_refuses_without_token_host_or_id) {
  etch__ui *ui = app_of(trace_file());
  const char *tok = "0123456789abcdef0123456789abcdef";
  etch__ui_server_opts o = {.token = tok};
  etch__ui_server *s;
  ASSERT_OK(etch__ui_server_start(ui, &o, &s));
  unsigned port = 0;
  ASSERT_EQ_INT(sscanf(etch__ui_server_url(s), "http://127.0.0.1:%u/", &port),
                1);
  char host[64], req[1024];
  static char body[1 << 20];
  snprintf(host, sizeof host, "127.0.0.1:%u", port);
#define REQ(fmt, ...) (snprintf(req, sizeof req, fmt, __VA_ARGS__), req)
  const char *C = "Connection: close\r\n";
  /* Good: the token as a header or as ?token=, the page at /. */
  ASSERT_EQ_INT(http(port, REQ("GET /api/traces HTTP/1.1\r\nHost: %s\r\nX-Etch-Token: %s\r\n%s\r\n", host, tok, C), body, sizeof body), 200);
  ASSERT_TRUE(strstr(body, ui->t[0].id));
  ASSERT_EQ_INT(http(port, REQ("GET /?token=%s HTTP/1.1\r\nHost: %s\r\n%s\r\n", tok, host, C), body, sizeof body), 200);
  ASSERT_TRUE(strstr(body, "<canvas id=\"tl\""));
  ASSERT_TRUE(strstr(body, "Referrer-Policy: no-referrer"));
  ASSERT_EQ_INT(http(port, REQ("GET /?token=%s HTTP/1.1\r\nHost: localhost:%u\r\n%s\r\n", tok, port, C), body, sizeof body), 200);
  /* No token, a wrong one, one a character short. The page without one:
   * served (no data in it; what it asks for needs the token). */
  ASSERT_EQ_INT(http(port, REQ("GET /api/traces HTTP/1.1\r\nHost: %s\r\n%s\r\n", host, C), body, sizeof body), 401);
  ASSERT_EQ_INT(http(port, REQ("GET /api/trace?id=%s HTTP/1.1\r\nHost: %s\r\n%s\r\n", ui->t[0].id, host, C), body, sizeof body), 401);
  ASSERT_EQ_INT(http(port, REQ("GET /nothing HTTP/1.1\r\nHost: %s\r\n%s\r\n", host, C), body, sizeof body), 401);
  ASSERT_EQ_INT(http(port, REQ("GET / HTTP/1.1\r\nHost: %s\r\n%s\r\n", host, C), body, sizeof body), 200);
  ASSERT_TRUE(strstr(body, "<canvas id=\"tl\""));
  ASSERT_FALSE(strstr(body, tok));
  ASSERT_EQ_INT(http(port, REQ("GET / HTTP/1.1\r\nHost: evil.example:%u\r\n%s\r\n", port, C), body, sizeof body), 403);
  ASSERT_FALSE(strstr(body, ui->t[0].id));
  ASSERT_EQ_INT(http(port, REQ("GET /?token=%.31s HTTP/1.1\r\nHost: %s\r\n%s\r\n", tok, host, C), body, sizeof body), 401);
  ASSERT_EQ_INT(http(port, REQ("GET /api/traces HTTP/1.1\r\nHost: %s\r\nX-Etch-Token: x%s\r\n%s\r\n", host, tok, C), body, sizeof body), 401);
  /* A foreign Host (DNS rebinding), another port, none at all. */
  ASSERT_EQ_INT(http(port, REQ("GET /api/traces HTTP/1.1\r\nHost: evil.example:%u\r\nX-Etch-Token: %s\r\n%s\r\n", port, tok, C), body, sizeof body), 403);
  ASSERT_EQ_INT(http(port, REQ("GET /api/traces HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nX-Etch-Token: %s\r\n%s\r\n", port + 1, tok, C), body, sizeof body), 403);
  ASSERT_EQ_INT(http(port, REQ("GET /api/traces HTTP/1.0\r\nX-Etch-Token: %s\r\n%s\r\n", tok, C), body, sizeof body), 403);
  /* A trace id it never gave; SQL that writes; a POST. */
  ASSERT_EQ_INT(http(port, REQ("GET /api/trace?id=0123456789abcdef HTTP/1.1\r\nHost: %s\r\nX-Etch-Token: %s\r\n%s\r\n", host, tok, C), body, sizeof body), 404);
  ASSERT_EQ_INT(http(port, REQ("GET /api/sql?id=%s&q=delete%%20from%%20slice HTTP/1.1\r\nHost: %s\r\nX-Etch-Token: %s\r\n%s\r\n", ui->t[0].id, host, tok, C), body, sizeof body), 403);
  ASSERT_EQ_INT(http(port, REQ("POST /api/traces HTTP/1.1\r\nHost: %s\r\nX-Etch-Token: %s\r\nContent-Length: 2\r\n%s\r\nab", host, tok, C), body, sizeof body), 405);
  ASSERT_EQ_INT(http(port, REQ("GET /etc/passwd HTTP/1.1\r\nHost: %s\r\nX-Etch-Token: %s\r\n%s\r\n", host, tok, C), body, sizeof body), 404);
#undef REQ
  etch__ui_server_stop(s);
  etch__ui_free(ui);
}

/* ---- the list: the store's traces as etch ls lists them ---------------------- */

static void put_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) FAIL("cannot write %s", path);
  if (n && fwrite(p, 1, n, f) != n) FAIL("short write to %s", path);
  fclose(f);
}

static void copy_file(const char *from, const char *to) {
  size_t n;
  uint8_t *d = etch_test_read_file(from, &n);
  if (!d) FAIL("cannot read %s", from);
  put_file(to, d, n);
  free(d);
}

static size_t count_of(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

/* What etch ls --json says of each trace of `store` (etch__store_write_json
 * of its listing), each entry's members after "path" checked to be in
 * `body` after the same path, "in_store":true and "open":false. */
static void check_as_ls(const char *store, const char *body, size_t want) {
  etch__store_list l;
  ASSERT_OK(etch__store_list_dir(store, &l));
  ASSERT_EQ_U64(l.n, want);
  char *ls = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&ls, &len);
  etch__store_write_json(store, l.e, l.n, f);
  fclose(f);
  const char *p = ls;
  for (size_t i = 0; i < l.n; i++) {
    p = strstr(p, "\"path\":");
    ASSERT_TRUE(p != NULL);
    const char *members = strchr(p + 8, '"') + 1; /* after the path */
    const char *end = strchr(members, '\n');
    size_t n = end ? (size_t)(end - members) : strlen(members);
    while (n && (members[n - 1] == ',' || members[n - 1] == '}')) n--;
    char want_text[4096];
    snprintf(want_text, sizeof want_text, "%.*s,\"in_store\":true,"
             "\"open\":false%.*s}", (int)(members - p), p, (int)n, members);
    if (!strstr(body, want_text))
      FAIL("/api/traces lacks %s:\n%s", want_text, body);
    p = members;
  }
  free(ls);
  etch__store_list_free(&l);
}

TEST(ui_api_traces_lists_the_store_as_etch_ls_does) {
  const char *trace = trace_file();
  char store[512], cache[512], app[700], bad[700], later[700], metadir[600];
  snprintf(store, sizeof store, "%s/store", etch_test_tmpdir());
  snprintf(cache, sizeof cache, "%s/cache", etch_test_tmpdir());
  snprintf(metadir, sizeof metadir, "%s/meta", cache);
  snprintf(app, sizeof app, "%s/20261127-040000-app.pftrace", store);
  snprintf(bad, sizeof bad, "%s/20261127-050000-bad.pftrace", store);
  snprintf(later, sizeof later, "%s/20261127-060000-later.pftrace", store);
  ASSERT_EQ_INT(mkdir(store, 0755), 0);
  copy_file(trace, app);
  /* A record whose length varint never ends: broken framing (a malformed
   * packet would be left out and the trace listed). */
  static const uint8_t kBad[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                 0xff, 0xff, 0xff, 0xff, 0x01, 0x00};
  put_file(bad, kBad, sizeof kBad);
  etch__ui *ui;
  ASSERT_OK(etch__ui_new(&ui));
  etch__ui_set_cache_dir(ui, cache);
  ASSERT_OK(etch__ui_set_store(ui, store));
  ASSERT_OK(etch__ui_add_path(ui, trace));
  ASSERT_OK(etch__ui_add_path(ui, app)); /* the store's: listed once */
  char *b;
  args none = {{0}};
  ASSERT_EQ_INT(call(ui, "/api/traces", &none, &b), 200);
  ASSERT_EQ_U64(count_of(b, "\"id\":"), 3);
  check_as_ls(store, b, 2);
  ASSERT_TRUE(strstr(b, "\"error\":\"corrupt trace"));
  /* The trace named first, then the store's. */
  char path_json[800];
  snprintf(path_json, sizeof path_json, "\"path\":\"%s\",\"in_store\":false",
           trace);
  const char *named = strstr(b, path_json);
  ASSERT_TRUE(named != NULL);
  ASSERT_TRUE(named < strstr(b, "\"in_store\":true"));
  /* Its counts are those of the store's copy (the same bytes), computed
   * once and cached in CACHE/meta. */
  const char *copy = strstr(strstr(b, "20261127-040000-app.pftrace\",\"in_store"),
                            ",\"duration\"");
  const char *mine = strstr(named, ",\"duration\"");
  ASSERT_TRUE(copy && mine);
  ASSERT_EQ_U64(strcspn(mine, "}"), strcspn(copy, "}"));
  ASSERT_TRUE(!strncmp(mine, copy, strcspn(copy, "}")));
  ASSERT_TRUE(strstr(mine, "\"events\":") != NULL);
  DIR *d = opendir(metadir);
  ASSERT_TRUE(d != NULL);
  int files = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (de->d_name[0] != '.') files++;
  closedir(d);
  ASSERT_EQ_INT(files, 1);
  char first_ids[3][17];
  for (size_t i = 0; i < 3; i++) memcpy(first_ids[i], ui->t[i].id, 17);
  free(b);
  /* A trace recorded into the store meanwhile is listed at the next look
   * (the ids given stay), one removed from it no longer. */
  copy_file(trace, later);
  ASSERT_EQ_INT(unlink(bad), 0);
  ASSERT_EQ_INT(call(ui, "/api/traces", &none, &b), 200);
  ASSERT_EQ_U64(count_of(b, "\"id\":"), 3);
  check_as_ls(store, b, 2);
  ASSERT_TRUE(strstr(b, "20261127-060000-later.pftrace") != NULL);
  ASSERT_TRUE(strstr(b, "20261127-050000-bad.pftrace") == NULL);
  /* The trace named, the store's app (named too) and the corrupt one. */
  ASSERT_TRUE(strstr(b, first_ids[0]) != NULL);
  ASSERT_TRUE(strstr(b, first_ids[1]) != NULL);
  ASSERT_TRUE(strstr(b, first_ids[2]) == NULL);
  ASSERT_EQ_STR(ui->t[2].name, "20261127-050000-bad.pftrace");
  free(b);
  /* A store that cannot be listed: said, the trace named still listed. */
  ASSERT_OK(etch__ui_set_store(ui, trace));
  ASSERT_EQ_INT(call(ui, "/api/traces", &none, &b), 200);
  ASSERT_TRUE(strstr(b, "\"store_error\":\"trace store ") != NULL);
  ASSERT_TRUE(strstr(b, path_json) != NULL);
  ASSERT_EQ_U64(count_of(b, "\"id\":"), 1);
  free(b);
  etch__ui_free(ui);
}

TEST(ui_api_traces_an_empty_store) {
  char store[512];
  snprintf(store, sizeof store, "%s/not-yet", etch_test_tmpdir());
  etch__ui *ui;
  ASSERT_OK(etch__ui_new(&ui));
  ASSERT_OK(etch__ui_set_store(ui, store));
  char *b;
  args none = {{0}};
  ASSERT_EQ_INT(call(ui, "/api/traces", &none, &b), 200);
  char want[700];
  snprintf(want, sizeof want,
           "{\"store\":\"%s\",\"store_error\":null,\"traces\":[]}", store);
  ASSERT_EQ_STR(b, want);
  free(b);
  etch__ui_free(ui);
}

/* /api/diff: etch diff's JSON of two traces named by their ids, nothing
 * else. */
TEST(ui_api_diff_by_ids_only) {
  const char *trace = trace_file();
  char copy[600];
  snprintf(copy, sizeof copy, "%s/copy.pftrace", etch_test_tmpdir());
  copy_file(trace, copy);
  etch__ui *ui = app_of(trace);
  ASSERT_OK(etch__ui_add_path(ui, copy));
  char *b;
  args ab = {{"a", "b"}, {ui->t[0].id, ui->t[1].id}};
  ASSERT_EQ_INT(call(ui, "/api/diff", &ab, &b), 200);
  ASSERT_TRUE(!strncmp(b, "{\"a\":\"ui.pftrace\",\"b\":\"copy.pftrace\","
                          "\"sort\":\"total\",\"rows\":[", 60));
  /* The same slices on both sides: no change anywhere. frame: 2 slices,
   * 100000 + 90000 ns. */
  ASSERT_TRUE(strstr(b, "{\"name\":\"frame\",\"a\":{\"count\":2,\"total\":190000,"));
  ASSERT_EQ_U64(count_of(b, "\"change\":{\"count\":0,\"total\":0,"),
                count_of(b, "\"change\":"));
  free(b);
  static const char *const kBad[][2] = {
      {"0000000000000000", NULL}, {NULL, "../../etc/passwd"}, {"", ""},
      {"ui.pftrace", NULL}};
  for (size_t i = 0; i < 4; i++) {
    args x = {{"a", "b"},
              {kBad[i][0] ? kBad[i][0] : ui->t[0].id,
               kBad[i][1] ? kBad[i][1] : ui->t[1].id}};
    ASSERT_EQ_INT(call(ui, "/api/diff", &x, &b), 404);
    free(b);
  }
  /* A trace gone since it was listed. */
  ASSERT_EQ_INT(unlink(copy), 0);
  ASSERT_EQ_INT(call(ui, "/api/diff", &ab, &b), 410);
  ASSERT_TRUE(strstr(b, "copy.pftrace is no longer there"));
  free(b);
  etch__ui_free(ui);
}

/* A trace of two machines with the same pid and tid: /api/trace says how
 * many machines and puts each row under its machine, the host's first,
 * each machine's process and thread apart. */
TEST(ui_rows_grouped_by_machine) {
  tb t;
  tb_init(&t);
  for (uint64_t m = 0; m < 2; m++) {
    t.machine = m ? 42 : 0;
    tb_process(&t, 1 + (uint32_t)m, 1, 10, m ? "remote-app" : "app");
    tb_thread(&t, 1 + (uint32_t)m, 2, 10, 11, "main");
    tb_event(&t, 1 + (uint32_t)m, 1000, 2, ETCH_TE_TYPE_SLICE_BEGIN, "c", "s");
    tb_event(&t, 1 + (uint32_t)m, 2000, 2, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  }
  const char *path = tb_write_file(&t, "two-machines.pftrace");
  tb_free(&t);
  etch__ui *ui = app_of(path);
  char *b;
  args tr = {{"id"}, {ui->t[0].id}};
  ASSERT_EQ_INT(call(ui, "/api/trace", &tr, &b), 200);
  ASSERT_TRUE(strstr(b, "\"machines\":2,"));
  const char *host = strstr(b, "\"process\":\"app\",\"thread\":\"main\"");
  const char *remote = strstr(b, "\"process\":\"remote-app\",\"thread\":\"main\"");
  if (!host || !remote || host > remote) FAIL("rows out of order: %s", b);
  ASSERT_TRUE(strstr(host, "\"machine\":0,\"machine_label\":\"host\"}"));
  ASSERT_TRUE(strstr(remote, "\"machine\":1,\"machine_label\":\"machine 1\"}"));
  free(b);
  etch__ui_free(ui);
}

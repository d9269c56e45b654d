/*
 * ui_fault_test.c - the ui (src/ui) with each of etch's own allocations
 * failing in turn: etch ui's API requests over a small trace (the list,
 * the trace's rows, tiles exact and from the overview, counters, a slice,
 * search, range, flows, the flame graph, the SQL box; a trace being
 * recorded stepped) and the trace
 * store's listing, with its metadata computed and
 * cached, and read back from the cache. Each request answers what it
 * answers without a fault, byte for byte, or an error body that says
 * "out of memory" (never a body cut short as if whole, never another
 * error); the store lists what it lists without a fault, or fails with
 * ETCH_ENOMEM, and what it cached reads back the same. (DuckDB's own
 * allocations are its library's, not etch's: they are not failed here.)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "fault.h"
#include "test.h"
#include "ui/app.h"
#include "ui/store.h"
#include "ui_trace.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UI_FAULT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define UI_FAULT_SANITIZED 1
#endif
#endif

static const char *write_trace(const char *name) {
  tb t;
  tb_init(&t);
  ui_test_trace(&t);
  const char *p = tb_write_file(&t, name);
  tb_free(&t);
  return p;
}

/* A stream into a fault_str (open_memstream's buffer is the C library's
 * own allocation, which the heap count does not see made, only freed). */
static ssize_t str_write(void *cookie, const char *p, size_t n) {
  fault_printf(cookie, "%.*s", (int)n, p);
  return (ssize_t)n;
}

static FILE *str_stream(fault_str *b) {
  b->len = 0;
  if (b->s) b->s[0] = '\0';
  cookie_io_functions_t io = {.write = str_write};
  FILE *f = fopencookie(b, "w", io);
  ASSERT_TRUE(f != NULL);
  return f;
}

/* One request: its path and arguments ("ID" stands for the trace's). */
typedef struct request {
  const char *path;
  const char *k[6], *v[6];
} request;

typedef struct ui_case {
  const char *trace, *cache;
  int64_t lod_min; /* 0: the app's own */
  const request *req;
  size_t nreq;
  /* The trace's tables, opened once for every run (the open itself is
   * swept with the list and the trace's rows): a run opening them anew
   * takes a tenth of a second. */
  etch__db *shared;
  bool recording; /* the run without a fault: `want` is made */
  fault_str want, got;
} ui_case;

typedef struct req_args {
  const request *r;
  const char *id;
} req_args;

static const char *get(void *ctx, const char *key) {
  const req_args *a = ctx;
  for (int i = 0; i < 6 && a->r->k[i]; i++)
    if (!strcmp(a->r->k[i], key))
      return strcmp(a->r->v[i], "ID") ? a->r->v[i] : a->id;
  return NULL;
}

/* The answer's body, the trace's id (a new one each run) written ID: an
 * error that is not running out of memory is recorded as it is (and so
 * differs from the run without a fault). */
static int answer(ui_case *c, const char *what, const char *id, int st,
                  const char *body, size_t len) {
  if (st != 200 && strstr(body, "out of memory"))
    return etch__error(ETCH_ENOMEM, "%s: %.*s", what, (int)len, body);
  fault_printf(&c->got, "%s %d ", what, st);
  size_t idlen = strlen(id);
  /* Whether the open imported the trace: the query part's cache takes an
   * open of the cache that ran out of memory for an unusable cache, and
   * imports the trace again (query/cache.c; said on stderr), so that a
   * run may say true where the others say false. */
  static const char kImported[] = "\"imported\":true";
  for (size_t i = 0; i < len; i++) {
    if (idlen && i + idlen <= len && !memcmp(body + i, id, idlen)) {
      fault_printf(&c->got, "ID");
      i += idlen - 1;
    } else if (i + sizeof kImported - 1 <= len &&
               !memcmp(body + i, kImported, sizeof kImported - 1)) {
      fault_printf(&c->got, "\"imported\":false");
      i += sizeof kImported - 2;
    } else {
      fault_printf(&c->got, "%c", body[i]);
    }
  }
  fault_printf(&c->got, "\n");
  return ETCH_OK;
}

static int ui_op(void *ctx) {
  ui_case *c = ctx;
  c->got.len = 0;
  if (c->got.s) c->got.s[0] = '\0';
  etch__ui *ui;
  int rc = etch__ui_new(&ui);
  if (rc) return rc;
  rc = etch__ui_set_cache_dir(ui, c->cache);
  if (!rc) rc = etch__ui_add_path(ui, c->trace);
  if (!rc && c->lod_min) ui->lod_min = c->lod_min;
  if (!rc && c->shared) {
    etch__ui_trace *t = &ui->t[0];
    int64_t v[2];
    t->db = c->shared;
    t->max_dur = etch__ui_max_dur(t->db);
    rc = etch__query_ints(t->db,
                          "SELECT (SELECT count(*) FROM slice_data),"
                          " (SELECT count(*) FROM flow)",
                          NULL, 0, v, 2);
    t->slices = v[0];
    t->flows = v[1];
  }
  for (size_t i = 0; !rc && i < c->nreq; i++) {
    fault_str body = {0};
    FILE *f = str_stream(&body);
    req_args a = {&c->req[i], ui->t[0].id};
    int st = etch__ui_api(ui, c->req[i].path, get, &a, f);
    fclose(f);
    rc = answer(c, c->req[i].path, ui->t[0].id, st, body.s ? body.s : "",
                body.len);
    fault_str_free(&body);
  }
  if (c->shared && ui->n) ui->t[0].db = NULL; /* not this run's to close */
  etch__ui_free(ui);
  if (rc) return rc;
  etch__error_clear(); /* a message kept from a request that refused */
  if (c->recording) {
    fault_printf(&c->want, "%s", c->got.s ? c->got.s : "");
  } else if (strcmp(c->got.s ? c->got.s : "", c->want.s ? c->want.s : "")) {
    FAIL("%s: answered\n%s\ninstead of\n%s", fault_now, c->got.s, c->want.s);
  }
  return ETCH_OK;
}

static void sweep(const char *what, ui_case *c) {
  /* Twice before, without a fault: the cache built, then the answers
   * from it kept. */
  c->recording = true;
  ASSERT_OK(ui_op(c));
  fault_str_free(&c->want);
  ASSERT_OK(ui_op(c));
  c->recording = false;
  fault_result r = fault_sweep(what, ui_op, c);
  ASSERT_TRUE(r.failed > 0);
  printf("  %s: %llu allocations, %llu runs, %llu failed\n", what,
         (unsigned long long)r.allocs, (unsigned long long)r.runs,
         (unsigned long long)r.failed);
  fault_str_free(&c->want);
  fault_str_free(&c->got);
}

static const char *cache_dir(const char *name) {
  static char buf[4][4096];
  static int k;
  char *p = buf[k++ % 4];
  snprintf(p, 4096, "%s/%s", etch_test_tmpdir(), name);
  mkdir(p, 0755);
  return p;
}

/* The API's requests, a few at a time (each sweep opens the trace once a
 * run: a run of all of them at once would take minutes). */
static void sweep_requests(const char *what, const request *req, size_t n,
                           int64_t lod_min) {
  ui_case c = {.trace = write_trace("ui_fault.pftrace"),
               .cache = cache_dir("ui_fault_cache"),
               .lod_min = lod_min,
               .req = req,
               .nreq = n};
#ifdef UI_FAULT_SANITIZED
  /* A sanitizer's heap count sees DuckDB's own allocations too, and a
   * connection used run after run keeps a little more after each (about
   * 200 bytes a tile): every run opens the trace itself there instead. */
  sweep(what, &c);
  return;
#endif
  ASSERT_OK(etch__db_open(&c.shared, NULL));
  etch__import_opts o = {.all_args = true, .allow_truncated = true};
  ASSERT_OK(etch__query_import_file(c.shared, NULL, c.trace, &o, NULL));
  ASSERT_OK(etch__db_exec(c.shared, "SET enable_external_access = false;"
                                    "SET lock_configuration = true;"));
  sweep(what, &c);
  etch__db_close(c.shared);
}

TEST(ui_fault_api_list_and_trace) {
  static const request kReq[] = {
      {"/api/traces", {NULL}, {NULL}},
      {"/api/trace", {"id"}, {"ID"}},
  };
  /* The trace opened (its cache) in each run. */
  ui_case c = {.trace = write_trace("ui_fault.pftrace"),
               .cache = cache_dir("ui_fault_cache"),
               .req = kReq,
               .nreq = ETCH_ARRAY_SIZE(kReq)};
  sweep("ui API list, trace", &c);
}

TEST(ui_fault_api_tile) {
  static const request kReq[] = {
      {"/api/tile",
       {"id", "start", "end", "px", "tracks", "counters"},
       {"ID", "0", "200001", "300", "1,2,4", "3"}},
  };
  sweep_requests("ui API tile", kReq, ETCH_ARRAY_SIZE(kReq), 0);
}

TEST(ui_fault_api_slice_search_range_flows) {
  static const request kReq[] = {
      {"/api/slice", {"id", "slice"}, {"ID", "1"}},
      {"/api/search", {"id", "q"}, {"ID", "dra"}},
      {"/api/range", {"id", "start", "end"}, {"ID", "0", "200001"}},
      {"/api/flows", {"id", "start", "end"}, {"ID", "0", "200001"}},
  };
  sweep_requests("ui API slice, search, range, flows", kReq,
                 ETCH_ARRAY_SIZE(kReq), 0);
}

TEST(ui_fault_api_flame) {
  static const request kReq[] = {
      {"/api/flame", {"id"}, {"ID"}},
      {"/api/flame", {"id", "start", "end", "utid"},
       {"ID", "40000", "60000", "1"}},
  };
  sweep_requests("ui API flame", kReq, ETCH_ARRAY_SIZE(kReq), 0);
}

TEST(ui_fault_api_sql_and_stats) {
  static const request kReq[] = {
      {"/api/sql", {"id", "q"}, {"ID", "select name from slice limit 3"}},
      {"/api/stats", {"id"}, {"ID"}},
  };
  sweep_requests("ui API sql", kReq, ETCH_ARRAY_SIZE(kReq), 0);
}

TEST(ui_fault_api_zone) {
  static const request kReq[] = {
      {"/api/zone", {"id"}, {"ID"}},
      {"/api/zone", {"id", "name", "lo", "hi"}, {"ID", "draw", "0", "50000"}},
  };
  sweep_requests("ui API zone", kReq, ETCH_ARRAY_SIZE(kReq), 0);
}

TEST(ui_fault_overview_tiles) {
  /* Every trace big enough for an overview: coarse windows from it, finer
   * ones from its stretches. (No /api/trace: it would start the flame
   * graph on a thread of its own, whose allocations are not this run's.) */
  static const request kReq[] = {
      {"/api/tile", {"id", "start", "end", "px", "tracks"},
       {"ID", "0", "200001", "100", "1,2"}},
      {"/api/tile", {"id", "start", "end", "px", "tracks"},
       {"ID", "90000", "100000", "100", "1,2"}},
      {"/api/tile", {"id", "start", "end", "px", "tracks", "counters"},
       {"ID", "95000", "95700", "700", "1", "3"}},
  };
  sweep_requests("ui overview", kReq, ETCH_ARRAY_SIZE(kReq), 1);
}

/* ---- a trace being recorded -------------------------------------------------- */

/* A trace being recorded, stepped (live.c): the app holds it live from
 * the first half of its file (the open outside the sweep: a run importing
 * it twice, as a trace being recorded has no cache, would take the sweep
 * minutes; the open is the list-and-trace sweep's), the second half is
 * appended under the writer's lock (the case's, held through every run),
 * and /api/live reads it on. */
typedef struct live_case {
  ui_case c;
  int fd;
  const uint8_t *data; /* the trace: its first half read when the trace */
  size_t len;          /* opens, the second by the swept step */
  int64_t whole[6];    /* a cold import's counts of the whole trace */
} live_case;

/* What a live trace's tables are compared by: every table's row count,
 * and the slices whole. */
static const char kLiveCounts[] =
    "SELECT (SELECT count(*) FROM slice), (SELECT count(*) FROM counter),"
    " (SELECT count(*) FROM track), (SELECT count(*) FROM args),"
    " (SELECT count(*) FROM flow),"
    " (SELECT coalesce(sum(hash(id, ts, dur, track_id, name, depth)), 0)"
    "  FROM slice)";

/* After a step that failed (faults held): the next step reads what it
 * could not, and the tables are a cold import's of the whole trace. */
static void live_check_next_step(live_case *l, etch__ui *ui,
                                 etch__ui_trace *t) {
  bool changed = false;
  ASSERT_OK(etch__ui_trace_refresh(ui, t, &changed));
  ASSERT_TRUE(t->live != NULL && t->recording);
  int64_t got[6];
  ASSERT_OK(etch__query_ints(t->db, kLiveCounts, NULL, 0, got, 6));
  for (int i = 0; i < 6; i++)
    if (got[i] != l->whole[i])
      FAIL("%s: after the failed step, the next one's count %d is %lld, a "
           "cold import's %lld",
           fault_now, i, (long long)got[i], (long long)l->whole[i]);
  ASSERT_EQ_INT(t->slices, got[0]);
}

static int live_op(void *ctx) {
  live_case *l = ctx;
  ui_case *c = &l->c;
  c->got.len = 0;
  if (c->got.s) c->got.s[0] = '\0';
  etch__fault_hold(true);
  etch__ui *ui;
  ASSERT_OK(etch__ui_new(&ui));
  ASSERT_OK(etch__ui_set_cache_dir(ui, c->cache));
  ASSERT_OK(etch__ui_add_path(ui, c->trace));
  etch__ui_trace *t = &ui->t[0];
  ASSERT_OK(etch__db_open(&t->db, NULL));
  t->recording = true;
  size_t half = l->len / 2;
  ASSERT_EQ_INT(ftruncate(l->fd, 0), 0);
  ASSERT_EQ_INT(pwrite(l->fd, l->data, half, 0), (ssize_t)half);
  ASSERT_OK(etch__ui_live_open(ui, t, 0, 0));
  ASSERT_EQ_INT(pwrite(l->fd, l->data + half, l->len - half, (off_t)half),
                (ssize_t)(l->len - half));
  etch__fault_hold(false);
  static const request kReq = {"/api/live", {"id"}, {"ID"}};
  fault_str body = {0};
  FILE *f = str_stream(&body);
  req_args a = {&kReq, t->id};
  int st = etch__ui_api(ui, kReq.path, get, &a, f);
  fclose(f);
  int rc = answer(c, kReq.path, t->id, st, body.s ? body.s : "", body.len);
  fault_str_free(&body);
  if (rc) {
    /* Failed: the failure kept (the sweep checks it), the next step
     * without a fault checked. */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", etch_last_error());
    etch__fault_hold(true);
    live_check_next_step(l, ui, t);
    etch__ui_free(ui);
    etch__fault_hold(false);
    return etch__error(rc, "%s", msg);
  }
  etch__ui_free(ui);
  etch__error_clear();
  if (c->recording) {
    fault_printf(&c->want, "%s", c->got.s ? c->got.s : "");
  } else if (strcmp(c->got.s ? c->got.s : "", c->want.s ? c->want.s : "")) {
    FAIL("%s: answered\n%s\ninstead of\n%s", fault_now, c->got.s, c->want.s);
  }
  return ETCH_OK;
}

TEST(ui_fault_live_trace_step) {
#ifdef UI_FAULT_SANITIZED
  /* An import a run, each several times slower under a sanitizer: over
   * the test's minute. The sweep runs in the plain build. */
  return;
#endif
  tb t;
  tb_init(&t);
  ui_test_trace(&t);
  live_case l = {.c = {.cache = cache_dir("ui_fault_live_cache")}};
  static char path[4096];
  snprintf(path, sizeof path, "%s/ui_fault_live.pftrace", etch_test_tmpdir());
  l.c.trace = path;
  l.fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(l.fd >= 0);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  ASSERT_EQ_INT(fcntl(l.fd, F_OFD_SETLK, &fl), 0);
  l.data = tb_data(&t);
  l.len = tb_len(&t);
  etch__db *cold;
  ASSERT_OK(etch__db_open(&cold, NULL));
  etch__import_opts o = {.all_args = true, .allow_truncated = true,
                         .quiet = true};
  ASSERT_OK(etch__query_import_memory(cold, l.data, l.len, NULL, &o, NULL));
  ASSERT_OK(etch__query_ints(cold, kLiveCounts, NULL, 0, l.whole, 6));
  etch__db_close(cold);
  ASSERT_TRUE(l.whole[0] > 0);
  l.c.recording = true;
  ASSERT_OK(live_op(&l));
  /* Without a fault: stepped to the whole trace, still recording. */
  ASSERT_TRUE(strstr(l.c.want.s, "/api/live 200 {\"recording\":true,"
                                 "\"generation\":2,") != NULL);
  l.c.recording = false;
  fault_result r = fault_sweep("ui live trace", live_op, &l);
  ASSERT_TRUE(r.failed > 0);
  printf("  ui live trace: %llu allocations, %llu runs, %llu failed\n",
         (unsigned long long)r.allocs, (unsigned long long)r.runs,
         (unsigned long long)r.failed);
  fault_str_free(&l.c.want);
  fault_str_free(&l.c.got);
  close(l.fd);
  unlink(path);
  tb_free(&t);
}

/* ---- the store --------------------------------------------------------------- */

typedef struct store_case {
  char dir[4096];
  bool drop_meta; /* each run computes the metadata again */
  bool recording;
  fault_str want, got;
} store_case;

static void drop_meta(const char *dir) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s/.meta'", dir);
  ASSERT_EQ_INT(system(cmd), 0);
}

static int store_op(void *ctx) {
  store_case *c = ctx;
  if (c->drop_meta) {
    etch__fault_hold(true);
    drop_meta(c->dir);
    etch__fault_hold(false);
  }
  etch__store_list l;
  int rc = etch__store_list_dir(c->dir, &l);
  if (rc) return rc;
  c->got.len = 0;
  if (c->got.s) c->got.s[0] = '\0';
  fault_str body = {0};
  FILE *f = str_stream(&body);
  etch__store_write_json(c->dir, l.e, l.n, f);
  fclose(f);
  fault_printf(&c->got, "%zu %s\n", l.n, body.s ? body.s : "");
  fault_str_free(&body);
  etch__store_list_free(&l);
  etch__error_clear(); /* the message of the trace that is no trace */
  if (c->recording)
    fault_printf(&c->want, "%s", c->got.s);
  else if (strcmp(c->got.s, c->want.s))
    FAIL("%s: listed\n%s\ninstead of\n%s", fault_now, c->got.s, c->want.s);
  return ETCH_OK;
}

static void store_sweep(const char *what, bool drop) {
  store_case c = {.drop_meta = drop};
  snprintf(c.dir, sizeof c.dir, "%s/ui_fault_store_%d", etch_test_tmpdir(),
           drop);
  mkdir(c.dir, 0755);
  char path[4200];
  static const char *const kNames[] = {"a.pftrace", "b.pftrace"};
  for (int i = 0; i < 2; i++) {
    const char *t = write_trace(kNames[i]);
    snprintf(path, sizeof path, "%s/%s", c.dir, kNames[i]);
    char cmd[8500];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", t, path);
    ASSERT_EQ_INT(system(cmd), 0);
  }
  /* And one that is no trace: listed with its error. */
  snprintf(path, sizeof path, "%s/c.pftrace", c.dir);
  FILE *f = fopen(path, "w");
  fputs("not a trace at all", f);
  fclose(f);
  c.recording = true;
  ASSERT_OK(store_op(&c));
  c.recording = false;
  fault_result r = fault_sweep(what, store_op, &c);
  ASSERT_TRUE(r.failed > 0);
  printf("  %s: %llu allocations, %llu runs, %llu failed\n", what,
         (unsigned long long)r.allocs, (unsigned long long)r.runs,
         (unsigned long long)r.failed);
  /* What the last runs cached reads back the same. */
  c.drop_meta = false;
  ASSERT_OK(store_op(&c));
  fault_str_free(&c.want);
  fault_str_free(&c.got);
}

TEST(ui_fault_store_listing_from_the_cache) { store_sweep("store, cached", false); }

TEST(ui_fault_store_listing_computed) { store_sweep("store, computed", true); }

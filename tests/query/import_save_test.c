/*
 * import_save_test.c - a live import saved between two steps and restored
 * into a new one (import_save.c, reader/save.c), as `etch query` does from
 * one process to the next on a trace being recorded: at each of many cuts
 * the live import is saved, closed with its database, the database opened
 * again and the state restored into a fresh reader and importer, which
 * step on; every table is compared with a cold import of the same bytes.
 * And saved state that is cut short or damaged gives an error, never a
 * crash (fuzz/fuzz_live_state.c goes further).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/containers.h"
#include "query/query.h"
#include "query_test_util.h"
#include "reader/tbuild.h"
#include "test.h"
#include "trace_build.h"

enum { B = 1, E = 2, I = 3 }; /* TrackEvent.type */
enum { kProc = 100, kMain = 101, kWorker = 102, kQueue = 103, kBytes = 104 };

static void temp_path(char *buf, size_t n, const char *what) {
  const char *dir = getenv("TMPDIR");
  snprintf(buf, n, "%s/etch_import_save_%s_%ld", dir && *dir ? dir : "/tmp",
           what, (long)getpid());
}

static void hold(int fd) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  ASSERT_EQ_INT(fcntl(fd, F_OFD_SETLK, &fl), 0);
}

/* Every table, each sorted on all its columns (args.id left out: it
 * follows the order events came in). */
static char *dump(etch__db *db) {
  char *all = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&all, &n);
  ASSERT_TRUE(f != NULL);
  size_t len;
  const char *t;
  for (size_t i = 0; (t = etch__query_table_name(i, &len)); i++) {
    char sql[256];
    bool args = len == 4 && memcmp(t, "args", 4) == 0;
    snprintf(sql, sizeof sql, "SELECT *%s FROM %.*s ORDER BY ALL",
             args ? " EXCLUDE (id)" : "", (int)len, t);
    char *got = qt_query(db, sql);
    fprintf(f, "== %.*s\n%s", (int)len, t, got);
    free(got);
  }
  fclose(f);
  return all;
}

static void same_as_cold(etch__db *live, const char *path, size_t len) {
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  etch__import_opts o = {.all_args = true, .allow_truncated = true,
                         .quiet = true};
  ASSERT_OK(etch__query_import_file(db, NULL, path, &o, NULL));
  char *want = dump(db);
  etch__db_close(db);
  char *got = dump(live);
  if (strcmp(want, got) != 0)
    FAIL("after %zu bytes\n--- cold ---\n%s--- restored ---\n%s", len, want,
         got);
  free(want);
  free(got);
}

static void descriptors(tb *t) {
  tb_process(t, 1, kProc, 10, "app");
  tb_thread(t, 1, kMain, 10, 10, "main");
  tb_thread(t, 2, kWorker, 10, 11, "worker");
  tb_named_track(t, 1, kQueue, kProc, "io queue");
  tb_counter_track(t, 1, kBytes, kProc, "bytes", 3);
}

/* Slices open across cuts on both threads, a named track's, instants,
 * counters, flows from one thread to the other, and a track described
 * only near the end. */
static void live_trace(tb *t) {
  descriptors(t);
  tb_event(t, 1, 1000, kQueue, B, "io", "req");
  tb_event(t, 1, 1100, kMain, B, "app", "frame");
  for (int i = 0; i < 6; i++) {
    int64_t ts = 1200 + 100 * i;
    tb_event(t, 1, ts, kMain, B, "app", "step");
    tb_event_open(t, 2, ts + 10, kWorker, B, "app", "job");
    tb_u(t, 47 /* flow_ids */, 500 + (uint64_t)i);
    tb_event_close(t);
    tb_counter(t, 1, ts + 20, kBytes, 64 * (i + 1));
    tb_event(t, 2, ts + 30, kWorker, I, "app", "tick");
    tb_event_open(t, 1, ts + 40, kMain, E, NULL, NULL);
    tb_u(t, 48 /* terminating_flow_ids */, 500 + (uint64_t)i);
    tb_event_close(t);
    tb_event(t, 2, ts + 50, kWorker, E, NULL, NULL);
  }
  tb_event(t, 1, 1900, kQueue, E, NULL, NULL);
  tb_event(t, 1, 2000, kMain, E, NULL, NULL);
  tb_named_track(t, 1, 105, kProc, "late track");
  tb_event(t, 2, 2100, kWorker, B, "app", "left open");
}

/* The trace appended `step` bytes at a time to a file its writer holds;
 * after each append the live import is saved, everything closed, the
 * database opened again, the state restored and stepped: the tables equal
 * a cold import's. */
/* Returns false when the state is one not saved (ETCH_EUNSUPPORTED). */
static bool save_restore_steps(const tb *tp, size_t step, const char *what) {
  const tb t = *tp;
  char path[512], dbpath[600];
  temp_path(path, sizeof path, what);
  snprintf(dbpath, sizeof dbpath, "%s.duckdb", path);
  unlink(dbpath);
  int w = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(w >= 0);
  hold(w);
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, dbpath));
  etch__import_opts o = {.all_args = true};
  etch__import_live *l;
  ASSERT_OK(etch__import_live_open(&l, db, path, &o));
  int nsaves = 0;
  for (size_t at = 0;;) {
    etch_vec state = {0};
    int src = etch__import_live_save(l, &state);
    if (src == ETCH_EUNSUPPORTED) {
      etch__import_live_close(l);
      etch__db_close(db);
      close(w);
      unlink(path);
      unlink(dbpath);
      return false;
    }
    ASSERT_OK(src);
    etch__import_live_close(l);
    /* The database closed and opened again every few steps (a DuckDB
     * checkpoint each time: slow), the same one kept between. */
    if (++nsaves % 4 == 1) {
      ASSERT_OK(etch__db_close(db));
      ASSERT_OK(etch__db_open_existing(&db, dbpath, false));
    }
    ASSERT_OK(etch__import_live_restore(&l, db, path, &o, state.data,
                                        state.len));
    etch__vec_free(&state);
    if (at == t.len) break;
    size_t n = t.len - at < step ? t.len - at : step;
    ASSERT_EQ_INT((int)write(w, t.data + at, n), (int)n);
    at += n;
    ASSERT_OK(etch__import_live_step(l, NULL));
    same_as_cold(db, path, at);
  }
  /* The writer gone: the restored import sees it. */
  close(w);
  ASSERT_OK(etch__import_live_step(l, NULL));
  ASSERT_TRUE(!etch__import_live_recording(l));
  same_as_cold(db, path, t.len);
  etch__import_live_close(l);
  etch__db_close(db);
  unlink(path);
  unlink(dbpath);
  return true;
}

TEST(import_save_small_steps) {
  tb t;
  tb_init(&t);
  live_trace(&t);
  ASSERT_TRUE(save_restore_steps(&t, 41, "small"));
  tb_free(&t);
}

TEST(import_save_large_steps) {
  tb t;
  tb_init(&t);
  live_trace(&t);
  ASSERT_TRUE(save_restore_steps(&t, 151, "large"));
  tb_free(&t);
}

/* The reader's sample traces: interned data, incremental clocks and
 * incremental-state resets, compressed packets, lost packets; those with
 * call stacks or custom events are not saved (a cold import then). */
static int samples(int from, int to) {
  int saved = 0;
  for (int s = from; s < to; s++) {
    tb t;
    tb_init(&t);
    tb_sample(&t, s);
    saved += save_restore_steps(&t, 53, tb_sample_name(s));
    tb_free(&t);
  }
  return saved;
}

TEST(import_save_reader_samples) {
  int half = tb_sample_count() / 2;
  ASSERT_TRUE(samples(0, half) >= half / 2);
}

TEST(import_save_reader_samples_second_half) {
  int half = tb_sample_count() / 2, n = tb_sample_count();
  ASSERT_TRUE(samples(half, n) >= (n - half) / 2);
}

/* A saved state cut anywhere, or with any byte changed, is refused with an
 * error or (a change that still adds up) restored: never a crash. */
TEST(import_save_damaged_state) {
  tb t;
  tb_init(&t);
  live_trace(&t);
  char path[512];
  temp_path(path, sizeof path, "damaged");
  int w = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(w >= 0);
  hold(w);
  ASSERT_EQ_INT((int)write(w, t.data, t.len / 2), (int)(t.len / 2));
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  etch__import_opts o = {.all_args = true};
  etch__import_live *l;
  ASSERT_OK(etch__import_live_open(&l, db, path, &o));
  etch_vec state = {0};
  ASSERT_OK(etch__import_live_save(l, &state));
  etch__import_live_close(l);
  uint8_t *copy = malloc(state.len);
  ASSERT_TRUE(copy != NULL);
  for (size_t cut = 0; cut < state.len; cut += 1 + cut / 16) {
    memcpy(copy, state.data, cut);
    etch__import_live *r = NULL;
    ASSERT_TRUE(etch__import_live_restore(&r, db, path, &o, copy, cut) ==
                ETCH_EFORMAT);
    ASSERT_TRUE(r == NULL);
  }
  int refused = 0;
  for (size_t at = 0; at < state.len; at += 1 + at / 32) {
    memcpy(copy, state.data, state.len);
    copy[at] ^= 0xa5;
    etch__import_live *r = NULL;
    if (etch__import_live_restore(&r, db, path, &o, copy, state.len))
      refused++;
    etch__import_live_close(r);
  }
  ASSERT_TRUE(refused > 0);
  free(copy);
  etch__vec_free(&state);
  etch__db_close(db);
  close(w);
  unlink(path);
  tb_free(&t);
}

/*
 * import_live_test.c - an import that reads on (import_live.c) compared
 * with a cold import of the same bytes, every table row for row, after
 * every step of a trace file that grows while its writer holds it: packet
 * by packet and cut inside packets, with slices open across steps, flows,
 * counters, incremental-state resets, lost packets, and a track that goes
 * back in time from one step to the next.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "query/query.h"
#include "query/table_writer.h"
#include "query_test_util.h"
#include "reader/tbuild.h"
#include "test.h"
#include "trace_build.h"

enum { B = 1, E = 2, I = 3 }; /* TrackEvent.type */

/* A file of the test's own, removed at the end. */
static void temp_path(char *buf, size_t n, const char *what) {
  const char *dir = getenv("TMPDIR");
  snprintf(buf, n, "%s/etch_import_live_%s_%ld.pftrace",
           dir && *dir ? dir : "/tmp", what, (long)getpid());
}

/* The writer's lock, as etch's writers take it (buffer/sink.h). */
static void hold(int fd) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  ASSERT_EQ_INT(fcntl(fd, F_OFD_SETLK, &fl), 0);
}

/* Every table as queries see it, each sorted on all its columns. args.id
 * follows the order events came in (query.h): left out. */
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

static char *cold_dump(const char *path) {
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  etch__import_opts o = {.all_args = true, .allow_truncated = true,
                         .quiet = true};
  ASSERT_OK(etch__query_import_file(db, NULL, path, &o, NULL));
  char *d = dump(db);
  etch__db_close(db);
  return d;
}

static void same_as_cold(etch__db *live, const char *path, size_t len) {
  char *want = cold_dump(path);
  char *got = dump(live);
  if (strcmp(want, got) != 0)
    FAIL("after %zu bytes\n--- cold ---\n%s--- live ---\n%s", len, want, got);
  free(want);
  free(got);
}

/*
 * The trace `t` appended `step` bytes at a time to a file its writer
 * holds, a live import stepped and compared with a cold import after every
 * append; then the writer lets go. Returns the live import's restarts.
 */
/* Appends t in pieces of `step` bytes, but bytes [lo, hi) in pieces of
 * `small` (the bytes before lo in one piece), comparing with a cold
 * import after each. */
static uint64_t grow_compare_mixed(const tb *t, size_t small, size_t lo,
                                   size_t hi, size_t step, const char *what);
static uint64_t grow_compare(const tb *t, size_t step, const char *what) {
  return grow_compare_mixed(t, step, 0, 0, step, what);
}

static uint64_t grow_compare_mixed(const tb *t, size_t small, size_t lo,
                                   size_t hi, size_t step, const char *what) {
  char path[512];
  temp_path(path, sizeof path, what);
  int w = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(w >= 0);
  hold(w);
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  etch__import_opts o = {.all_args = true};
  etch__import_live *l;
  ASSERT_OK(etch__import_live_open(&l, db, path, &o));
  ASSERT_TRUE(etch__import_live_recording(l));
  ASSERT_EQ_U64(etch__tw_pipes_running(), 0);
  same_as_cold(db, path, 0);
  for (size_t at = 0; at < t->len;) {
    size_t want = at < lo ? lo - at : at < hi ? small : step;
    size_t n = t->len - at < want ? t->len - at : want;
    ASSERT_EQ_INT((int)write(w, t->data + at, n), (int)n);
    at += n;
    bool changed;
    ASSERT_OK(etch__import_live_step(l, &changed));
    /* Between steps no statement of the import runs (import.c,
     * etch__imp_pause: one left running deadlocked a later step). */
    ASSERT_EQ_U64(etch__tw_pipes_running(), 0);
    same_as_cold(db, path, at);
  }
  /* The writer gone: the same bytes, no longer recording. */
  close(w);
  bool changed = false;
  ASSERT_OK(etch__import_live_step(l, &changed));
  ASSERT_TRUE(!etch__import_live_recording(l));
  same_as_cold(db, path, t->len);
  /* Nothing new: nothing changes. */
  ASSERT_OK(etch__import_live_step(l, &changed));
  ASSERT_TRUE(!changed);
  uint64_t restarts = etch__import_live_restarts(l);
  etch__import_live_close(l);
  etch__db_close(db);
  unlink(path);
  return restarts;
}

/* ---- traces ------------------------------------------------------------------------ */

enum {
  kProc = 100, kMain = 101, kWorker = 102, kQueue = 103, kBytes = 104
};

/* A process, two threads on sequences 1 and 2, a named track under the
 * process and a counter track. */
static void descriptors(tb *t) {
  tb_process(t, 1, kProc, 10, "app");
  tb_thread(t, 1, kMain, 10, 10, "main");
  tb_thread(t, 2, kWorker, 10, 11, "worker");
  tb_named_track(t, 1, kQueue, kProc, "io queue");
  tb_counter_track(t, 1, kBytes, kProc, "bytes", 3);
}

/* Slices nested and open across many packets on both threads, the named
 * track's slices begun before thread slices that follow them in the file,
 * instants, counters, and flows from one thread to the other. */
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
  tb_event(t, 2, 2100, kWorker, B, "app", "left open");
}

/* The named track written by both sequences, sequence 2's older event
 * after sequence 1's newer one in the file. */
static void back_trace(tb *t) {
  descriptors(t);
  tb_event(t, 1, 1000, kMain, B, "app", "a");
  tb_event(t, 1, 1600, kQueue, B, "io", "late");
  tb_event(t, 2, 1500, kQueue, B, "io", "early");
  tb_event(t, 2, 1550, kQueue, E, NULL, NULL);
  tb_event(t, 1, 1700, kQueue, E, NULL, NULL);
  tb_event(t, 1, 1800, kMain, E, NULL, NULL);
}

/* ---- tests -------------------------------------------------------------------------- */

/* Slice ids follow the file, not the order tracks are delivered in: the
 * named track's slice, begun first in the file, is 1, although the
 * importer gets it after the thread's (import_reader.c holds it). */
TEST(import_live_slice_ids_follow_the_file) {
  tb t;
  tb_init(&t);
  descriptors(&t);
  tb_event(&t, 1, 1000, kQueue, B, "io", "req");
  tb_event(&t, 1, 1100, kMain, B, "app", "work");
  tb_event(&t, 1, 1200, kMain, E, NULL, NULL);
  tb_event(&t, 1, 1300, kQueue, E, NULL, NULL);
  const char *path = tb_write_file(&t, "ids.pftrace");
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  ASSERT_OK(etch__query_import_file(db, NULL, path, NULL, NULL));
  QT_ASSERT(db, "SELECT id, name, dur FROM slice ORDER BY id",
            "id,name,dur\n1,req,300\n2,work,100\n");
  etch__db_close(db);
  tb_free(&t);
}

/* 13 bytes at a time (cuts inside nearly every packet), the trace's
 * first half in one test and its second in another: a cold import after
 * every piece costs too much for one test's time under load. */
TEST(import_live_small_steps_first_half) {
  tb t;
  tb_init(&t);
  live_trace(&t);
  ASSERT_EQ_U64(grow_compare_mixed(&t, 13, 0, t.len / 2, t.len, "small1"), 0);
  tb_free(&t);
}

TEST(import_live_small_steps_second_half) {
  tb t;
  tb_init(&t);
  live_trace(&t);
  ASSERT_EQ_U64(
      grow_compare_mixed(&t, 13, t.len / 2, t.len, t.len, "small2"), 0);
  tb_free(&t);
}

TEST(import_live_uneven_steps) {
  tb t;
  tb_init(&t);
  live_trace(&t);
  static const size_t steps[] = {31, 301};
  for (size_t i = 0; i < sizeof steps / sizeof *steps; i++)
    ASSERT_EQ_U64(grow_compare(&t, steps[i], "uneven"), 0);
  tb_free(&t);
}

/* The reader's sample traces: interned data and incremental-state resets
 * (etch, misc), compressed packets, lost packets, the fast path's shapes. */
TEST(import_live_reader_samples) {
  for (int s = 0; s < tb_sample_count(); s++) {
    tb t;
    tb_init(&t);
    tb_sample(&t, s);
    grow_compare(&t, 37, tb_sample_name(s));
    tb_free(&t);
  }
}

/* A track whose older slice comes in a later step: the import starts over
 * (a cold read), and is still the cold import's at every step. */
TEST(import_live_track_back_in_time) {
  tb t;
  tb_init(&t);
  back_trace(&t);
  ASSERT_TRUE(grow_compare(&t, 3, "back") >= 1);
  tb_free(&t);
}

/* A file cut inside a packet whose writer is gone: what its whole packets
 * hold, as a cold import with allow_truncated reads it. */
TEST(import_live_cut_short) {
  tb t;
  tb_init(&t);
  live_trace(&t);
  char path[512];
  temp_path(path, sizeof path, "cut");
  int w = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(w >= 0);
  hold(w);
  size_t half = t.len / 2 + 3;
  ASSERT_EQ_INT((int)write(w, t.data, half), (int)half);
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  etch__import_live *l;
  ASSERT_OK(etch__import_live_open(&l, db, path, NULL));
  same_as_cold(db, path, half);
  ASSERT_EQ_INT((int)write(w, t.data + half, t.len - half - 2),
                (int)(t.len - half - 2));
  ASSERT_OK(etch__import_live_step(l, NULL));
  same_as_cold(db, path, t.len - 2);
  close(w);
  ASSERT_OK(etch__import_live_step(l, NULL));
  ASSERT_TRUE(!etch__import_live_recording(l));
  same_as_cold(db, path, t.len - 2);
  etch__import_live_close(l);
  etch__db_close(db);
  unlink(path);
  tb_free(&t);
}

/* Into a database file: each step committed, read by another connection
 * as a cold import's. */
TEST(import_live_into_a_file) {
  tb t;
  tb_init(&t);
  live_trace(&t);
  char path[512], dbpath[512];
  temp_path(path, sizeof path, "file");
  temp_path(dbpath, sizeof dbpath, "file_db");
  unlink(dbpath);
  int w = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(w >= 0);
  hold(w);
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, dbpath));
  etch__import_live *l;
  ASSERT_OK(etch__import_live_open(&l, db, path, NULL));
  for (size_t at = 0; at < t.len; at += 97) {
    size_t n = t.len - at < 97 ? t.len - at : 97;
    ASSERT_EQ_INT((int)write(w, t.data + at, n), (int)n);
    ASSERT_OK(etch__import_live_step(l, NULL));
    same_as_cold(db, path, at + n);
  }
  close(w);
  etch__import_live_close(l);
  etch__db_close(db);
  unlink(path);
  unlink(dbpath);
  tb_free(&t);
}


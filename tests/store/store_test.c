/*
 * store_test.c - the trace store module (src/ui/store.c): its directory,
 * names, new paths, listing with cached metadata (cached, reused, redone
 * when the trace or the metadata file changes or is hostile), traces that
 * cannot be read, removal, JSON.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "etch/common.h"
#include "test.h"
#include "trace_build.h"
#include "ui/store.h"

/* DIR/NAME in a buffer that lives until the next few calls. */
static const char *in(const char *dir, const char *name) {
  static char buf[8][600];
  static int k;
  char *p = buf[k++ % 8];
  snprintf(p, 600, "%s/%s", dir, name);
  return p;
}

static const char *store_dir(void) {
  static char dir[400];
  snprintf(dir, sizeof dir, "%s/store", etch_test_tmpdir());
  mkdir(dir, 0755);
  return dir;
}

static void write_bytes(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) FAIL("cannot write %s: %s", path, strerror(errno));
  if (n && fwrite(p, 1, n, f) != n) FAIL("short write to %s", path);
  fclose(f);
}

static void write_text(const char *path, const char *s) {
  write_bytes(path, s, strlen(s));
}

/* Sets a file's modification time to `sec` seconds since the epoch. */
static void set_mtime(const char *path, time_t sec) {
  struct timespec ts[2] = {{sec, 0}, {sec, 0}};
  if (utimensat(AT_FDCWD, path, ts, 0) != 0)
    FAIL("utimensat %s: %s", path, strerror(errno));
}

/*
 * A trace of process `pid` with `nthreads` threads, thread k (tid pid+k)
 * holding k+1 slices "s" of 100 ns, and a clock snapshot saying that
 * trace-clock time 0 is wall-clock `wall0` ns (0: no snapshot). With
 * `lost`, one end without a begin (misplaced_end_event 1).
 */
static void trace_at(const char *path, int pid, int nthreads, int64_t wall0,
                     bool lost) {
  tb t;
  tb_init(&t);
  if (wall0) {
    tb_begin(&t);
    tb_open(&t, ETCH_PKT_CLOCK_SNAPSHOT);
    tb_open(&t, ETCH_CLOCKSNAP_CLOCKS);
    tb_u(&t, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
    tb_u(&t, ETCH_SNAPCLOCK_TIMESTAMP, 1000000);
    tb_close(&t);
    tb_open(&t, ETCH_CLOCKSNAP_CLOCKS);
    tb_u(&t, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_REALTIME);
    tb_u(&t, ETCH_SNAPCLOCK_TIMESTAMP, (uint64_t)wall0 + 1000000);
    tb_close(&t);
    tb_close(&t);
    tb_end(&t);
  }
  tb_process(&t, 1, 1, pid, "app");
  int64_t ts = 1000;
  for (int k = 0; k < nthreads; k++) {
    uint64_t uuid = 10 + (uint64_t)k;
    tb_thread(&t, (uint32_t)(k + 1), uuid, pid, pid + k, "worker");
    for (int s = 0; s <= k; s++) {
      tb_event(&t, (uint32_t)(k + 1), ts, uuid, ETCH_TE_TYPE_SLICE_BEGIN,
               "c", "s");
      tb_event(&t, (uint32_t)(k + 1), ts + 100, uuid, ETCH_TE_TYPE_SLICE_END,
               NULL, NULL);
      ts += 200;
    }
  }
  if (lost)
    tb_event(&t, 1, ts, 10, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  write_bytes(path, tb_data(&t), tb_len(&t));
  tb_free(&t);
}

static const etch__store_entry *find(const etch__store_list *l,
                                     const char *name) {
  for (size_t i = 0; i < l->n; i++)
    if (!strcmp(l->e[i].name, name)) return &l->e[i];
  FAIL("no entry %s in the list", name);
  return NULL;
}

TEST(store_dir_from_the_environment) {
  char buf[512];
  setenv("ETCH_STORE", "/x/store", 1);
  setenv("XDG_DATA_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  ASSERT_OK(etch__store_dir(buf, sizeof buf));
  ASSERT_EQ_STR(buf, "/x/store");
  unsetenv("ETCH_STORE");
  ASSERT_OK(etch__store_dir(buf, sizeof buf));
  ASSERT_EQ_STR(buf, "/xdg/etch/traces");
  /* A relative XDG_DATA_HOME is ignored, as the XDG spec says. */
  setenv("XDG_DATA_HOME", "rel", 1);
  ASSERT_OK(etch__store_dir(buf, sizeof buf));
  ASSERT_EQ_STR(buf, "/home/u/.local/share/etch/traces");
  unsetenv("XDG_DATA_HOME");
  ASSERT_OK(etch__store_dir(buf, sizeof buf));
  ASSERT_EQ_STR(buf, "/home/u/.local/share/etch/traces");
  unsetenv("HOME");
  ASSERT_EQ_INT(etch__store_dir(buf, sizeof buf), ETCH_EINVAL);
  setenv("ETCH_STORE", "/x/store", 1);
  char small[4];
  ASSERT_EQ_INT(etch__store_dir(small, sizeof small), ETCH_EINVAL);
}

TEST(store_names_never_leave_the_directory) {
  static const char *const good[] = {"a.pftrace", "20261127-031500-app.pftrace",
                                     "x", "a.b.c", "with space", "é.pftrace"};
  static const char *const bad[] = {"",      ".",        "..",     "../x",
                                    "a/b",   "/abs",     ".hidden", "a..b",
                                    "x/..",  "tab\there", "nl\n",   ".meta"};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++)
    if (!etch__store_name_ok(good[i])) FAIL("'%s' refused", good[i]);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (etch__store_name_ok(bad[i])) FAIL("'%s' accepted", bad[i]);
  char longname[300];
  memset(longname, 'a', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  ASSERT_FALSE(etch__store_name_ok(longname));
  char buf[512];
  ASSERT_EQ_INT(etch__store_path("/s", "../etc/passwd", buf, sizeof buf),
                ETCH_EINVAL);
  ASSERT_OK(etch__store_path("/s", "t.pftrace", buf, sizeof buf));
  ASSERT_EQ_STR(buf, "/s/t.pftrace");
}

/* The names of the parts etch record writes, and names that only look
 * like one: a part name never leads out of the store either. */
TEST(store_part_names) {
  static const struct {
    const char *name;
    long pid;
  } good[] = {
      {".20261127-031500-app.pftrace.4242.part", 4242},
      {".x.1.part", 1},
      {".a.b.c.123456789.part", 123456789},
  };
  static const char *const bad[] = {
      "", ".part", "..1.part", ".x.part", ".x..part", "x.1.part",
      ".x.1.part.", ".x.-1.part", ".x.1234567890.part", "../x.1.part",
      ".a/b.1.part", "...1.part", "..x.1.part", ".x.12a.part",
      ".tab\there.1.part", ".x.1.Part", ".x.1"};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
    long pid = -1;
    if (!etch__store_part_name(good[i].name, &pid))
      FAIL("'%s' refused", good[i].name);
    ASSERT_EQ_INT(pid, good[i].pid);
  }
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (etch__store_part_name(bad[i], NULL)) FAIL("'%s' accepted", bad[i]);
  char longname[300];
  memset(longname, 'a', sizeof longname - 1);
  memcpy(longname, ".", 1);
  memcpy(longname + sizeof longname - 8, ".1.part", 8);
  ASSERT_FALSE(etch__store_part_name(longname, NULL));
  /* Not a part: etch__store_part_abandoned says no, whatever is there. */
  ASSERT_FALSE(etch__store_part_abandoned("/", "etc"));
}

TEST(store_new_path_names_by_time_and_program) {
  char dir[512], buf[700];
  snprintf(dir, sizeof dir, "%s/new/store", etch_test_tmpdir());
  setenv("TZ", "UTC", 1);
  tzset();
  int64_t when = 1795748100; /* 2026-11-27 02:55:00 UTC */
  ASSERT_OK(etch__store_new_path(dir, "/usr/bin/my app", when, buf,
                                 sizeof buf));
  ASSERT_EQ_STR(buf, in(dir, "20261127-025500-my_app.pftrace"));
  struct stat sb;
  ASSERT_TRUE(stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)); /* made */
  ASSERT_EQ_INT(sb.st_mode & 0777, 0700); /* the user's alone */
  write_text(buf, "");
  ASSERT_OK(etch__store_new_path(dir, "/usr/bin/my app", when, buf,
                                 sizeof buf));
  ASSERT_EQ_STR(buf, in(dir, "20261127-025500-my_app-2.pftrace"));
  write_text(buf, "");
  ASSERT_OK(etch__store_new_path(dir, "my app", when, buf, sizeof buf));
  ASSERT_EQ_STR(buf, in(dir, "20261127-025500-my_app-3.pftrace"));
  /* Hostile program names make store names. */
  ASSERT_OK(etch__store_new_path(dir, "..", when, buf, sizeof buf));
  ASSERT_EQ_STR(buf, in(dir, "20261127-025500-__.pftrace"));
  ASSERT_TRUE(etch__store_name_ok(buf + strlen(dir) + 1));
  ASSERT_OK(etch__store_new_path(dir, "a/", when, buf, sizeof buf));
  ASSERT_EQ_STR(buf, in(dir, "20261127-025500-trace.pftrace"));
  ASSERT_OK(etch__store_new_path(dir, NULL, when, buf, sizeof buf));
  ASSERT_EQ_STR(buf, in(dir, "20261127-025500-trace.pftrace"));
  ASSERT_OK(etch__store_new_path(dir, "x\n\x01..y", when, buf, sizeof buf));
  ASSERT_EQ_STR(buf, in(dir, "20261127-025500-x___.y.pftrace"));
}

TEST(store_list_of_a_missing_directory_is_empty) {
  etch__store_list l;
  char dir[512];
  snprintf(dir, sizeof dir, "%s/none", etch_test_tmpdir());
  ASSERT_OK(etch__store_list_dir(dir, &l));
  ASSERT_EQ_U64(l.n, 0);
  etch__store_list_free(&l);
}

TEST(store_list_counts_orders_and_caches) {
  const char *dir = store_dir();
  int64_t wall_a = 1795748100000000000, wall_b = wall_a + 60000000000;
  trace_at(in(dir, "a.pftrace"), 100, 2, wall_a, false);
  trace_at(in(dir, "b.pftrace"), 200, 3, wall_b, true);
  trace_at(in(dir, "c.pftrace"), 300, 1, 0, false); /* no snapshot */
  set_mtime(in(dir, "c.pftrace"), 1000);           /* 1970: oldest */
  write_text(in(dir, ".hidden"), "not listed");
  mkdir(in(dir, "subdir"), 0755);

  etch__store_list l;
  ASSERT_OK(etch__store_list_dir(dir, &l));
  ASSERT_EQ_U64(l.n, 3);
  ASSERT_EQ_U64(l.computed, 3);
  /* Newest first. */
  ASSERT_EQ_STR(l.e[0].name, "b.pftrace");
  ASSERT_EQ_STR(l.e[1].name, "a.pftrace");
  ASSERT_EQ_STR(l.e[2].name, "c.pftrace");
  const etch__store_entry *a = find(&l, "a.pftrace");
  ASSERT_TRUE(a->error == NULL);
  ASSERT_EQ_INT(a->processes, 1);
  ASSERT_EQ_INT(a->threads, 2);
  ASSERT_EQ_INT(a->events, 6); /* 1 + 2 slices, a begin and an end each */
  ASSERT_EQ_INT(a->slices, 3);
  ASSERT_EQ_INT(a->start, 1000);
  ASSERT_EQ_INT(a->end, 1000 + 2 * 200 + 100);
  ASSERT_EQ_INT(etch__store_entry_dur(a), 500);
  ASSERT_TRUE(a->wall_from_trace);
  ASSERT_EQ_INT(a->wall_start_ns, wall_a + 1000);
  ASSERT_EQ_U64(a->nloss, 0);
  const etch__store_entry *b = find(&l, "b.pftrace");
  ASSERT_EQ_INT(b->threads, 3);
  ASSERT_EQ_INT(b->events, 13);
  ASSERT_EQ_U64(b->nloss, 1);
  ASSERT_EQ_STR(b->loss[0].name, "misplaced_end_event");
  ASSERT_EQ_INT(b->loss[0].value, 1);
  const etch__store_entry *c = find(&l, "c.pftrace");
  ASSERT_FALSE(c->wall_from_trace);
  ASSERT_EQ_INT(c->mtime_ns, 1000 * 1000000000LL);
  ASSERT_EQ_INT(c->wall_start_ns, 1000 * 1000000000LL - 100);
  etch__store_list_free(&l);

  /* The second listing reads no trace, and gives the same. */
  ASSERT_OK(etch__store_list_dir(dir, &l));
  ASSERT_EQ_U64(l.n, 3);
  ASSERT_EQ_U64(l.computed, 0);
  b = find(&l, "b.pftrace");
  ASSERT_EQ_INT(b->threads, 3);
  ASSERT_EQ_INT(b->events, 13);
  ASSERT_EQ_U64(b->nloss, 1);
  ASSERT_EQ_STR(b->loss[0].name, "misplaced_end_event");
  ASSERT_TRUE(find(&l, "a.pftrace")->wall_from_trace);
  ASSERT_EQ_INT(find(&l, "a.pftrace")->wall_start_ns, wall_a + 1000);
  ASSERT_EQ_INT(find(&l, "c.pftrace")->wall_start_ns,
                1000 * 1000000000LL - 100);
  etch__store_list_free(&l);

  /* A trace rewritten (another size) is read again; so is one touched. */
  trace_at(in(dir, "a.pftrace"), 100, 4, wall_a, false);
  set_mtime(in(dir, "c.pftrace"), 2000);
  ASSERT_OK(etch__store_list_dir(dir, &l));
  ASSERT_EQ_U64(l.computed, 2);
  ASSERT_EQ_INT(find(&l, "a.pftrace")->threads, 4);
  ASSERT_EQ_INT(find(&l, "c.pftrace")->mtime_ns, 2000 * 1000000000LL);
  etch__store_list_free(&l);
}

TEST(store_hostile_metadata_is_read_again) {
  const char *dir = store_dir();
  trace_at(in(dir, "a.pftrace"), 100, 2, 0, false);
  etch__store_list l;
  ASSERT_OK(etch__store_list_dir(dir, &l));
  ASSERT_EQ_U64(l.computed, 1);
  int64_t size = l.e[0].size, mtime = l.e[0].mtime_ns;
  etch__store_list_free(&l);
  const char *meta = in(dir, ".meta/a.pftrace");
  char head[200];
  snprintf(head, sizeof head, "etch-store-meta 1\nsize %lld\nmtime_ns %lld\n",
           (long long)size, (long long)mtime);
  /* Each of these must be refused (the trace read again), none may crash
   * or be believed. */
  const char *const tails[] = {
      "",                                               /* no counts */
      "start 1\nend 2\nwall 3 1\nevents 4\nslices 5\nprocesses 6\n",
      "start 1\nend 2\nwall 3 1\nevents x\nslices 5\nprocesses 6\nthreads 7\n",
      "start 1\nend 2\nwall 3 2\nevents 4\nslices 5\nprocesses 6\nthreads 7\n",
      "start 1\nend 2\nwall 3 1\nevents 4\nslices 5\nprocesses 6\nthreads 7\n"
      "events 4\n",                                     /* twice */
      "start 1\nend 2\nwall 3 1\nevents 99999999999999999999\nslices 5\n"
      "processes 6\nthreads 7\n",
      "start 1\nend 2\nwall 3 1\nevents 4\nslices 5\nprocesses 6\nthreads 7\n"
      "loss ../x 1\n",
      "start 1\nend 2\nwall 3 1\nevents 4\nslices 5\nprocesses 6\nthreads 7\n"
      "what 1\n",
      "error oops\nstart 1\n",
      "error \n",
  };
  for (size_t i = 0; i < sizeof tails / sizeof *tails; i++) {
    char text[600];
    snprintf(text, sizeof text, "%s%s", head, tails[i]);
    write_text(meta, text);
    ASSERT_OK(etch__store_list_dir(dir, &l));
    if (l.computed != 1) FAIL("metadata %zu believed:\n%s", i, text);
    ASSERT_EQ_INT(l.e[0].threads, 2);
    etch__store_list_free(&l);
  }
  /* Another size or version, a NUL, a directory in its place. */
  write_text(meta, "etch-store-meta 2\nsize 1\n");
  ASSERT_OK(etch__store_list_dir(dir, &l));
  ASSERT_EQ_U64(l.computed, 1);
  etch__store_list_free(&l);
  write_bytes(meta, "etch-store-meta 1\n\0size 1\n", 26);
  ASSERT_OK(etch__store_list_dir(dir, &l));
  ASSERT_EQ_U64(l.computed, 1);
  etch__store_list_free(&l);
  unlink(meta);
  mkdir(meta, 0755);
  ASSERT_OK(etch__store_list_dir(dir, &l));
  ASSERT_EQ_U64(l.computed, 1);
  ASSERT_EQ_INT(l.e[0].threads, 2);
  etch__store_list_free(&l);
  rmdir(meta);
  /* Well-formed metadata for this size and mtime is what is shown. */
  char text[600];
  snprintf(text, sizeof text,
           "%sstart 1\nend 2\nwall 3 1\nevents 4\nslices 5\nprocesses 6\n"
           "threads 7\nloss x_y 8\n",
           head);
  write_text(meta, text);
  ASSERT_OK(etch__store_list_dir(dir, &l));
  ASSERT_EQ_U64(l.computed, 0);
  ASSERT_EQ_INT(l.e[0].threads, 7);
  ASSERT_EQ_STR(l.e[0].loss[0].name, "x_y");
  etch__store_list_free(&l);
}

TEST(store_lists_what_cannot_be_read_with_its_error) {
  const char *dir = store_dir();
  trace_at(in(dir, "good.pftrace"), 100, 1, 0, false);
  write_text(in(dir, "text.pftrace"), "hello, world\n");
  /* A packet, then a record whose length varint never ends (11 bytes,
   * more after it): framing no reader gets past (a malformed packet would
   * be left out and the trace read). */
  static const uint8_t bad[] = {0x0a, 0x02, 0x08, 0x01, 0x0a, 0xff, 0xff,
                                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                0xff, 0x01, 0x00};
  write_bytes(in(dir, "corrupt.pftrace"), bad, sizeof bad);
  write_text(in(dir, "empty.pftrace"), "");
  if (symlink("/nonexistent/trace", in(dir, "gone.pftrace")) != 0)
    FAIL("symlink: %s", strerror(errno));
  if (mkfifo(in(dir, "fifo.pftrace"), 0644) != 0)
    FAIL("mkfifo: %s", strerror(errno));
  etch__store_list l;
  ASSERT_OK(etch__store_list_dir(dir, &l));
  ASSERT_EQ_U64(l.n, 6);
  ASSERT_TRUE(find(&l, "good.pftrace")->error == NULL);
  const etch__store_entry *e = find(&l, "text.pftrace");
  ASSERT_TRUE(e->error && strstr(e->error, "not a Perfetto protobuf trace"));
  ASSERT_EQ_INT(e->size, 13);
  e = find(&l, "corrupt.pftrace");
  ASSERT_TRUE(e->error && !strncmp(e->error, "corrupt trace", 13));
  e = find(&l, "empty.pftrace");
  ASSERT_TRUE(e->error == NULL);
  ASSERT_EQ_INT(e->events, 0);
  ASSERT_EQ_STR(find(&l, "gone.pftrace")->error,
                "missing: No such file or directory");
  ASSERT_EQ_STR(find(&l, "fifo.pftrace")->error, "not a regular file");
  etch__store_list_free(&l);
  /* The errors are cached too, and the same the second time. */
  ASSERT_OK(etch__store_list_dir(dir, &l));
  ASSERT_EQ_U64(l.n, 6);
  e = find(&l, "text.pftrace");
  ASSERT_TRUE(e->error && strstr(e->error, "not a Perfetto protobuf trace"));
  etch__store_list_free(&l);
}

TEST(store_remove_and_prune) {
  const char *dir = store_dir();
  trace_at(in(dir, "a.pftrace"), 100, 1, 0, false);
  trace_at(in(dir, "b.pftrace"), 100, 1, 0, false);
  etch__store_list l;
  ASSERT_OK(etch__store_list_dir(dir, &l));
  etch__store_list_free(&l);
  struct stat sb;
  ASSERT_TRUE(stat(in(dir, ".meta/a.pftrace"), &sb) == 0);
  ASSERT_OK(etch__store_remove(dir, "a.pftrace"));
  ASSERT_TRUE(stat(in(dir, "a.pftrace"), &sb) != 0);
  ASSERT_TRUE(stat(in(dir, ".meta/a.pftrace"), &sb) != 0);
  ASSERT_EQ_INT(etch__store_remove(dir, "a.pftrace"), ETCH_ENOTFOUND);
  /* Names outside the store are refused, and nothing there is touched. */
  write_text(in(etch_test_tmpdir(), "outside.pftrace"), "x");
  ASSERT_EQ_INT(etch__store_remove(dir, "../outside.pftrace"), ETCH_EINVAL);
  ASSERT_EQ_INT(etch__store_remove(dir, ".meta"), ETCH_EINVAL);
  ASSERT_TRUE(stat(in(etch_test_tmpdir(), "outside.pftrace"), &sb) == 0);
  mkdir(in(dir, "d"), 0755);
  ASSERT_EQ_INT(etch__store_remove(dir, "d"), ETCH_EINVAL);
  /* A trace deleted by hand: its metadata goes at the next listing. */
  unlink(in(dir, "b.pftrace"));
  ASSERT_TRUE(stat(in(dir, ".meta/b.pftrace"), &sb) == 0);
  ASSERT_OK(etch__store_list_dir(dir, &l));
  ASSERT_EQ_U64(l.n, 0);
  etch__store_list_free(&l);
  ASSERT_TRUE(stat(in(dir, ".meta/b.pftrace"), &sb) != 0);
}

TEST(store_json) {
  const char *dir = store_dir();
  trace_at(in(dir, "a.pftrace"), 100, 2, 1795748100000000000, true);
  write_text(in(dir, "q\"uote.pftrace"), "junk");
  set_mtime(in(dir, "q\"uote.pftrace"), 5);
  etch__store_list l;
  ASSERT_OK(etch__store_list_dir(dir, &l));
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  etch__store_write_json("/s", l.e, l.n, f);
  fclose(f);
  char want[2048];
  snprintf(want, sizeof want,
           "[\n"
           " {\"name\":\"a.pftrace\",\"path\":\"/s/a.pftrace\",\"size\":%lld,"
           "\"mtime_ns\":%lld,\"start\":1795748100000001000,"
           "\"start_from_trace\":true,\"duration\":600,\"events\":7,"
           "\"slices\":3,\"processes\":1,\"threads\":2,\"data_loss\":"
           "[{\"name\":\"misplaced_end_event\",\"value\":1}],\"error\":null},\n"
           " {\"name\":\"q\\\"uote.pftrace\",\"path\":\"/s/q\\\"uote.pftrace\","
           "\"size\":4,\"mtime_ns\":5000000000,\"start\":5000000000,"
           "\"start_from_trace\":false,\"duration\":null,\"events\":null,"
           "\"slices\":null,\"processes\":null,\"threads\":null,"
           "\"data_loss\":null,\"error\":\"%s\"}\n"
           "]\n",
           (long long)find(&l, "a.pftrace")->size,
           (long long)find(&l, "a.pftrace")->mtime_ns,
           find(&l, "q\"uote.pftrace")->error);
  ASSERT_EQ_STR(buf, want);
  free(buf);
  buf = NULL;
  f = open_memstream(&buf, &len);
  etch__store_write_json("/s", l.e, 0, f);
  fclose(f);
  ASSERT_EQ_STR(buf, "[]\n");
  free(buf);
  etch__store_list_free(&l);
}

TEST(store_entry_get) {
  const char *dir = store_dir();
  trace_at(in(dir, "a.pftrace"), 100, 2, 0, false);
  etch__store_entry e;
  ASSERT_OK(etch__store_entry_get(dir, "a.pftrace", &e));
  ASSERT_EQ_INT(e.threads, 2);
  etch__store_entry_free(&e);
  ASSERT_EQ_INT(etch__store_entry_get(dir, "none.pftrace", &e),
                ETCH_ENOTFOUND);
  ASSERT_EQ_INT(etch__store_entry_get(dir, "../a.pftrace", &e), ETCH_EINVAL);
  /* Cached by the call: the listing reads nothing. */
  etch__store_list l;
  ASSERT_OK(etch__store_list_dir(dir, &l));
  ASSERT_EQ_U64(l.computed, 0);
  etch__store_list_free(&l);
}

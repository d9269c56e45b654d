/*
 * sdk_stream_test.c - a session that writes its trace while it records
 * (write_period_ms): a small buffer records a long run with nothing lost,
 * the file holds what was flushed at every moment (a SIGKILL leaves it),
 * threads, a ring that falls behind, a second process on the same file, a
 * write that fails, and the options' errors.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sdk_common.h"

ETCH_CATEGORY_DEFINE(work, "work", "", "");

/* A path in the test's own directory (a file of its own per test). */
static void out_path(char *buf, size_t n, const char *name) {
  const char *dir = getenv("ETCH_TEST_OUT");
  if (dir && *dir)
    snprintf(buf, n, "%s/stream_%s.pftrace", dir, name);
  else
    snprintf(buf, n, "%s/stream_%s.pftrace", etch_test_tmpdir(), name);
}

static etch_session *stream_session(const char *path, const char *extra) {
  char cfgtext[1024];
  snprintf(cfgtext, sizeof cfgtext, "output=%s;%s", path, extra);
  return start_session(cfgtext);
}

/* The "tick" instants' `i` args in file order, checked to be 0..n-1. */
static size_t ticks_in_order(const td_trace *t, const char *name) {
  size_t k = 0;
  for (size_t i = 0; i < t->nev; i++) {
    const td_event *e = &t->ev[i];
    if (!e->name || strcmp(e->name, name) != 0) continue;
    ASSERT_EQ_INT(td_arg_of(e, "i")->i, (int64_t)k);
    k++;
  }
  return k;
}

static void decode_file(const char *path, td_trace *t) {
  if (td_decode_file(path, t) != 0) FAIL("%s: %s", path, t->error);
  ASSERT_EQ_U64(t->unresolved, 0);
  ASSERT_EQ_U64(t->skipped, 0);
  ASSERT_EQ_U64(t->no_seq_id, 0);
}

TEST(small_buffer_records_a_long_run_and_the_file_grows_as_it_goes) {
  char path[512];
  out_path(path, sizeof path, "long");
  /* 64 KiB that fills in about 3 000 ticks; the period never comes: the
   * flushes and the buffer's own wake-ups move the data. */
  etch_session *s = stream_session(
      path, "buffer_kb=64;fill=discard;compression=none;"
            "write_period_ms=3600000");
  const int N = 200000;
  for (int i = 0; i < N; i++) {
    ETCH_INSTANT(work, "tick", ETCH_ARG_INT("i", i));
    if (i % 1000 == 999) ASSERT_OK(etch_session_flush(s));
    if (i == 99999) {
      /* Mid-run, the file is a trace of exactly what was flushed. */
      td_trace mid;
      decode_file(path, &mid);
      ASSERT_EQ_U64(ticks_in_order(&mid, "tick"), 100000);
      ASSERT_TRUE(mid.clock_snapshots > 0);
      ASSERT_TRUE(!mid.has_stats);
      td_free(&mid);
    }
  }
  ASSERT_OK(etch_session_stop(s));
  etch_session_stats st;
  ASSERT_OK(etch_session_get_stats(s, &st));
  ASSERT_EQ_U64(st.events_dropped, 0);
  ASSERT_EQ_U64(st.chunks_overwritten, 0);
  /* Far more chunks went through the buffer than it has. */
  ASSERT_TRUE(st.chunks_written > 10 * (64 * 1024 / 4096));
  td_trace t;
  decode_file(path, &t);
  ASSERT_EQ_U64(ticks_in_order(&t, "tick"), (uint64_t)N);
  ASSERT_EQ_U64(t.prev_dropped, 0);
  ASSERT_TRUE(t.has_stats);
  ASSERT_EQ_U64(t.stat_chunks_written, st.chunks_written);
  ASSERT_EQ_U64(t.stat_discarded, 0);
  td_free(&t);
  /* Its trace is in the file only. */
  uint8_t *data;
  size_t len;
  ASSERT_EQ_INT(etch_session_read(s, &data, &len), ETCH_EINVAL);
  ASSERT_EQ_INT(etch_session_write_file(s, "/dev/null"), ETCH_EINVAL);
  etch_session_free(s);
}

#define NTHREADS 4
#define PER_THREAD 30000

typedef struct worker {
  etch_session *s;
  int index;
} worker;

static void *work_main(void *arg) {
  worker *w = (worker *)arg;
  char name[16];
  snprintf(name, sizeof name, "w%d", w->index);
  for (int i = 0; i < PER_THREAD; i++) {
    ETCH_SLICE_BEGIN(work, "step", ETCH_ARG_INT("i", i),
                     ETCH_ARG_STRING("who", name));
    ETCH_SLICE_END(work);
    /* Each thread flushes in its turn: flushes from several threads at
     * once, each waiting for a write that covers its own events. */
    if (i % 500 == 499 && etch_session_flush(w->s) != ETCH_OK) return arg;
  }
  return NULL;
}

TEST(threads_stream_every_event_in_order) {
  char path[512];
  out_path(path, sizeof path, "threads");
  /* Each thread's 500 slices between flushes take under 16 KiB; four of
   * them under the 256 KiB discard buffer. */
  etch_session *s = stream_session(
      path, "buffer_kb=256;fill=discard;compression=deflate;"
            "write_period_ms=5");
  pthread_t th[NTHREADS];
  worker w[NTHREADS];
  for (int k = 0; k < NTHREADS; k++) {
    w[k] = (worker){s, k};
    ASSERT_EQ_INT(pthread_create(&th[k], NULL, work_main, &w[k]), 0);
  }
  for (int k = 0; k < NTHREADS; k++) {
    void *r;
    pthread_join(th[k], &r);
    ASSERT_TRUE(r == NULL);
  }
  ASSERT_OK(etch_session_stop(s));
  etch_session_stats st;
  ASSERT_OK(etch_session_get_stats(s, &st));
  ASSERT_EQ_U64(st.events_dropped, 0);
  td_trace t;
  decode_file(path, &t);
  ASSERT_TRUE(t.compressed > 1); /* a batch per write at least */
  int64_t next[NTHREADS] = {0};
  size_t ends = 0;
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *e = &t.ev[i];
    if (e->type == 2) ends++;
    if (e->type != 1) continue;
    const td_arg *who = td_arg_of(e, "who");
    ASSERT_TRUE(who && who->s);
    int k = who->s[1] - '0';
    ASSERT_TRUE(k >= 0 && k < NTHREADS);
    ASSERT_EQ_INT(td_arg_of(e, "i")->i, next[k]);
    next[k]++;
  }
  for (int k = 0; k < NTHREADS; k++) ASSERT_EQ_INT(next[k], PER_THREAD);
  ASSERT_EQ_U64(ends, (uint64_t)NTHREADS * PER_THREAD);
  ASSERT_EQ_U64(t.prev_dropped, 0);
  td_free(&t);
  etch_session_free(s);
}

/* fill=stall: a writer that finds the buffer full waits for the write
 * instead of dropping. 64 KiB fill in about 3 000 ticks, nobody flushes and
 * the period never comes: only the writers' wake-ups move the data, and
 * every tick of one thread, then of four at once, is in the file. */
TEST(stall_loses_nothing_however_fast_the_program_records) {
  char path[512];
  out_path(path, sizeof path, "stall");
  etch_session *s = stream_session(
      path, "buffer_kb=64;fill=stall;compression=none;"
            "write_period_ms=3600000");
  const int N = 300000;
  for (int i = 0; i < N; i++) ETCH_INSTANT(work, "tick", ETCH_ARG_INT("i", i));
  ASSERT_OK(etch_session_stop(s));
  etch_session_stats st;
  ASSERT_OK(etch_session_get_stats(s, &st));
  ASSERT_EQ_U64(st.events_dropped, 0);
  ASSERT_TRUE(st.chunks_written > 10 * (64 * 1024 / 4096));
  td_trace t;
  decode_file(path, &t);
  ASSERT_EQ_U64(ticks_in_order(&t, "tick"), (uint64_t)N);
  ASSERT_EQ_U64(t.prev_dropped, 0);
  ASSERT_EQ_U64(t.stat_discarded, 0);
  td_free(&t);
  etch_session_free(s);
}

static void *flood_main(void *arg) {
  worker *w = (worker *)arg;
  char name[16];
  snprintf(name, sizeof name, "w%d", w->index);
  for (int i = 0; i < PER_THREAD * 3; i++) {
    ETCH_SLICE_BEGIN(work, "step", ETCH_ARG_INT("i", i),
                     ETCH_ARG_STRING("who", name));
    ETCH_SLICE_END(work);
  }
  return NULL;
}

TEST(stall_threads_lose_nothing) {
  char path[512];
  out_path(path, sizeof path, "stall_threads");
  etch_session *s = stream_session(
      path, "buffer_kb=64;fill=stall;compression=deflate;"
            "write_period_ms=3600000");
  pthread_t th[NTHREADS];
  worker w[NTHREADS];
  for (int k = 0; k < NTHREADS; k++) {
    w[k] = (worker){s, k};
    ASSERT_EQ_INT(pthread_create(&th[k], NULL, flood_main, &w[k]), 0);
  }
  for (int k = 0; k < NTHREADS; k++) pthread_join(th[k], NULL);
  ASSERT_OK(etch_session_stop(s));
  etch_session_stats st;
  ASSERT_OK(etch_session_get_stats(s, &st));
  ASSERT_EQ_U64(st.events_dropped, 0);
  td_trace t;
  decode_file(path, &t);
  int64_t next[NTHREADS] = {0};
  size_t ends = 0;
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *e = &t.ev[i];
    if (e->type == 2) ends++;
    if (e->type != 1) continue;
    int k = td_arg_of(e, "who")->s[1] - '0';
    ASSERT_TRUE(k >= 0 && k < NTHREADS);
    ASSERT_EQ_INT(td_arg_of(e, "i")->i, next[k]);
    next[k]++;
  }
  for (int k = 0; k < NTHREADS; k++) ASSERT_EQ_INT(next[k], PER_THREAD * 3);
  ASSERT_EQ_U64(ends, (uint64_t)NTHREADS * PER_THREAD * 3);
  ASSERT_EQ_U64(t.prev_dropped, 0);
  td_free(&t);
  etch_session_free(s);
}

/* Without streaming there is no write to wait for: stall drops and counts
 * as discard does. */
TEST(stall_without_streaming_drops_as_discard) {
  etch_session *s = start_session("buffer_kb=64;fill=stall");
  for (int i = 0; i < 20000; i++) ETCH_INSTANT(work, "tick", ETCH_ARG_INT("i", i));
  ASSERT_OK(etch_session_stop(s));
  etch_session_stats st;
  ASSERT_OK(etch_session_get_stats(s, &st));
  ASSERT_TRUE(st.events_dropped > 0);
  etch_session_free(s);
}

TEST(a_ring_that_falls_behind_keeps_order_and_the_end) {
  char path[512];
  out_path(path, sizeof path, "ring");
  /* No flushes: the writing thread may outrun the stream's, and the ring
   * then overwrites; what reaches the file is still in order, decodes,
   * and ends with the last event (the stop collects the rest). */
  etch_session *s = stream_session(
      path, "buffer_kb=32;fill=ring;compression=none;write_period_ms=1;"
            "reset_interval_ms=0");
  const int N = 100000;
  for (int i = 0; i < N; i++) ETCH_INSTANT(work, "tick", ETCH_ARG_INT("i", i));
  ASSERT_OK(etch_session_stop(s));
  td_trace t;
  decode_file(path, &t);
  int64_t last = -1;
  size_t n = 0;
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *e = &t.ev[i];
    if (!e->name || strcmp(e->name, "tick") != 0) continue;
    int64_t v = td_arg_of(e, "i")->i;
    ASSERT_TRUE(v > last);
    last = v;
    n++;
  }
  ASSERT_EQ_INT(last, N - 1);
  etch_session_stats st;
  ASSERT_OK(etch_session_get_stats(s, &st));
  /* Whatever the ring overwrote is what is missing, and said. */
  if (n < (size_t)N) ASSERT_TRUE(st.chunks_overwritten > 0 && t.prev_dropped > 0);
  else ASSERT_EQ_U64(t.prev_dropped, 0);
  td_free(&t);
  etch_session_free(s);
}

/* A child that streams K ticks, flushes, tells the parent, and waits to
 * be killed. */
static void child_streams_then_waits(const char *path, int k, int tell) {
  etch_session *s = stream_session(
      path, "buffer_kb=64;fill=discard;compression=none;"
            "write_period_ms=3600000");
  for (int i = 0; i < k; i++) {
    ETCH_INSTANT(work, "tick", ETCH_ARG_INT("i", i));
    if (i % 1000 == 999 && etch_session_flush(s) != ETCH_OK) _exit(3);
  }
  if (etch_session_flush(s) != ETCH_OK) _exit(4);
  char c = 'k';
  if (write(tell, &c, 1) != 1) _exit(5);
  for (;;) pause();
}

TEST(a_process_killed_leaves_what_it_flushed) {
  char path[512];
  out_path(path, sizeof path, "killed");
  int p[2];
  ASSERT_EQ_INT(pipe(p), 0);
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    close(p[0]);
    child_streams_then_waits(path, 12345, p[1]);
  }
  close(p[1]);
  char c;
  ASSERT_EQ_INT(read(p[0], &c, 1), 1);
  close(p[0]);
  kill(pid, SIGKILL);
  int status;
  ASSERT_EQ_INT(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  td_trace t;
  decode_file(path, &t);
  ASSERT_EQ_U64(ticks_in_order(&t, "tick"), 12345);
  ASSERT_TRUE(!t.has_stats); /* it never stopped */
  td_free(&t);
}

TEST(a_second_process_on_the_same_file_writes_its_own) {
  char path[512], other[600];
  out_path(path, sizeof path, "shared");
  snprintf(other, sizeof other, "%.*s", (int)(strlen(path) - 8), path);
  int p[2];
  ASSERT_EQ_INT(pipe(p), 0);
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    close(p[0]);
    child_streams_then_waits(path, 700, p[1]);
  }
  close(p[1]);
  char c;
  ASSERT_EQ_INT(read(p[0], &c, 1), 1);
  close(p[0]);
  /* The child holds `path`: this session goes to PATH.PID.pftrace. */
  etch_session *s = stream_session(path, "compression=none;write_period_ms=50");
  for (int i = 0; i < 300; i++) ETCH_INSTANT(work, "mine", ETCH_ARG_INT("i", i));
  ASSERT_OK(etch_session_stop(s));
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  snprintf(other + strlen(other), sizeof other - strlen(other),
           ".%ld.pftrace", (long)getpid());
  td_trace a, b;
  decode_file(path, &a);
  ASSERT_EQ_U64(ticks_in_order(&a, "tick"), 700);
  ASSERT_EQ_U64(td_count(&a, 3, "mine"), 0);
  decode_file(other, &b);
  ASSERT_EQ_U64(ticks_in_order(&b, "mine"), 300);
  ASSERT_EQ_U64(td_count(&b, 3, "tick"), 0);
  td_free(&a);
  td_free(&b);
  unlink(other);
  etch_session_free(s);
}

TEST(a_write_that_fails_keeps_whole_packets_and_says_so) {
  char path[512];
  out_path(path, sizeof path, "limit");
  unlink(path);
  int p[2];
  ASSERT_EQ_INT(pipe(p), 0);
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    close(p[0]);
    /* Files of this process end at 40 000 bytes: the stream hits it. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {40000, 40000};
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(2);
    etch_session *s = stream_session(
        path, "buffer_kb=64;fill=discard;compression=none;"
              "write_period_ms=3600000");
    for (int i = 0; i < 20000; i++) {
      ETCH_INSTANT(work, "tick", ETCH_ARG_INT("i", i));
      if (i % 1000 == 999) etch_session_flush(s);
    }
    int rc = etch_session_stop(s);
    char msg[512];
    snprintf(msg, sizeof msg, "%d %s", rc, etch_last_error());
    if (write(p[1], msg, strlen(msg)) < 0) _exit(3);
    _exit(0);
  }
  close(p[1]);
  char msg[512] = {0};
  size_t got = 0;
  ssize_t r;
  while ((r = read(p[0], msg + got, sizeof msg - 1 - got)) > 0) got += (size_t)r;
  close(p[0]);
  int status;
  ASSERT_EQ_INT(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char expect[64];
  snprintf(expect, sizeof expect, "%d ", ETCH_EIO);
  ASSERT_TRUE(strncmp(msg, expect, strlen(expect)) == 0);
  ASSERT_TRUE(strstr(msg, "File too large") != NULL);
  ASSERT_TRUE(strstr(msg, "ends at its last whole packet") != NULL);
  struct stat sb;
  ASSERT_EQ_INT(stat(path, &sb), 0);
  ASSERT_TRUE(sb.st_size > 0 && sb.st_size <= 40000);
  td_trace t;
  decode_file(path, &t);
  size_t n = ticks_in_order(&t, "tick");
  ASSERT_TRUE(n > 0 && n < 20000);
  td_free(&t);
}

TEST(options_that_cannot_stream_are_refused) {
  etch_config *cfg;
  ASSERT_OK(etch_config_new(&cfg));
  ASSERT_OK(etch_config_set(cfg, "write_period_ms", "100"));
  etch_session *s = NULL;
  ASSERT_EQ_INT(etch_session_new(cfg, &s), ETCH_ECONFIG);
  ASSERT_TRUE(strstr(etch_last_error(), "output") != NULL);
  ASSERT_EQ_INT(etch_config_set(cfg, "write_period_ms", "-1"), ETCH_ECONFIG);
  ASSERT_EQ_INT(etch_config_set(cfg, "write_period_ms", "86400001"),
                ETCH_ECONFIG);
  /* An output that cannot be opened (a directory) fails the start, not
   * the run. */
  char dir[512];
  out_path(dir, sizeof dir, "dir");
  mkdir(dir, 0755);
  ASSERT_OK(etch_config_set(cfg, "output", dir));
  ASSERT_OK(etch_session_new(cfg, &s));
  ASSERT_EQ_INT(etch_session_start(s), ETCH_EIO);
  ASSERT_TRUE(strstr(etch_last_error(), "Is a directory") != NULL);
  etch_session_free(s);
  rmdir(dir);
  etch_config_free(cfg);
}



/*
 * sdk_threads_test.c - many threads, exiting threads, fork.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sdk/core/sdk.h" /* etch__writer_reset_hook */
#include "sdk_common.h"

ETCH_CATEGORY_DEFINE(work, "work", "", "");

#define NTHREADS 4
#define PER_THREAD 20000

static void *worker(void *arg) {
  long id = (long)arg;
  char name[16];
  snprintf(name, sizeof name, "worker-%ld", id);
  etch_thread_set_name(name);
  for (int i = 0; i < PER_THREAD; i++) {
    ETCH_SLICE_BEGIN(work, "job", ETCH_ARG_INT("n", i));
    ETCH_COUNTER(work, "progress", i);
    ETCH_SLICE_END(work);
  }
  return (void *)(long)gettid();
}

TEST(threads_each_write_their_own_sequence) {
  etch_session *s = start_session("buffer_kb=32768;compression=none");
  pthread_t th[NTHREADS];
  long tids[NTHREADS];
  for (long i = 0; i < NTHREADS; i++)
    pthread_create(&th[i], NULL, worker, (void *)i);
  for (int i = 0; i < NTHREADS; i++) {
    void *r;
    pthread_join(th[i], &r); /* threads are gone before the read */
    tids[i] = (long)r;
  }
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "threads", &t);
  for (int k = 0; k < NTHREADS; k++) {
    /* Find this thread's track and check its events, in order. */
    const td_track *tr = NULL;
    for (size_t i = 0; i < t.ntracks; i++)
      if (t.tracks[i].is_thread && t.tracks[i].tid == tids[k]) tr = &t.tracks[i];
    ASSERT_TRUE(tr != NULL);
    char name[16];
    snprintf(name, sizeof name, "worker-%d", k);
    ASSERT_EQ_STR(tr->name, name);
    int64_t next_n = 0;
    size_t ends = 0;
    uint64_t last_ts = 0;
    uint32_t seq = 0;
    for (size_t i = 0; i < t.nev; i++) {
      const td_event *e = &t.ev[i];
      if (e->track != tr->uuid) continue;
      if (!seq) seq = e->seq;
      ASSERT_EQ_U64(e->seq, seq); /* one sequence per thread */
      ASSERT_TRUE(e->ts >= last_ts);
      last_ts = e->ts;
      if (e->type == 1) ASSERT_EQ_INT(td_arg_of(e, "n")->i, next_n++);
      if (e->type == 2) ends++;
    }
    ASSERT_EQ_INT(next_n, PER_THREAD);
    ASSERT_EQ_U64(ends, PER_THREAD);
  }
  ASSERT_EQ_U64(td_count(&t, 4, NULL), (size_t)NTHREADS * PER_THREAD);
  td_free(&t);
  etch_session_free(s);
}

/* Reads while threads write: every read decodes. */
static volatile int stop_flag;
static void *spinner(void *arg) {
  (void)arg;
  while (!__atomic_load_n(&stop_flag, __ATOMIC_RELAXED)) {
    ETCH_SLICE_BEGIN(work, "spin", ETCH_ARG_STRING("s", "some text to make packets longer"));
    ETCH_SLICE_END(work);
  }
  return NULL;
}

TEST(read_while_writing) {
  etch_session *s = start_session("buffer_kb=256;compression=none");
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, spinner, NULL);
  for (int r = 0; r < 20; r++) {
    uint8_t *d;
    size_t n;
    ASSERT_OK(etch_session_read(s, &d, &n));
    td_trace t;
    ASSERT_EQ_INT(td_decode(d, n, &t), 0);
    ASSERT_EQ_U64(t.unresolved, 0);
    ASSERT_EQ_U64(t.skipped, 0);
    td_free(&t);
    etch_free(d);
    usleep(2000);
  }
  __atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  etch_session_free(s);
}

/* Sessions freed while other threads still hold writers for them. */
TEST(free_session_while_threads_write) {
  for (int round = 0; round < 20; round++) {
    etch_session *s = start_session("buffer_kb=64");
    __atomic_store_n(&stop_flag, 0, __ATOMIC_RELAXED);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, spinner, NULL);
    usleep(1000);
    etch_session_free(s);
    usleep(500);
    __atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  }
}

TEST(fork_child_does_not_inherit_or_corrupt) {
  etch_session *s = start_session("compression=none");
  ETCH_INSTANT(work, "parent before");
  pid_t pid = fork();
  if (pid == 0) {
    /* No session here: the parent's is not ours. */
    if (etch_category_enabled(&ETCH_CAT(work))) _exit(1);
    for (int i = 0; i < 1000; i++) ETCH_INSTANT(work, "child ignored");
    /* A session of its own works. */
    etch_config *c;
    etch_config_new(&c);
    etch_config_set(c, "compression", "none");
    etch_session *cs;
    if (etch_session_new(c, &cs) || etch_session_start(cs)) _exit(2);
    etch_config_free(c);
    ETCH_INSTANT(work, "child own");
    etch_session_stop(cs);
    uint8_t *d;
    size_t n;
    if (etch_session_read(cs, &d, &n)) _exit(3);
    td_trace t;
    if (td_decode(d, n, &t) || t.nev != 1 || strcmp(t.ev[0].name, "child own"))
      _exit(4);
    const td_track *tr = td_track_of(&t, t.ev[0].track);
    if (!tr || tr->pid != getpid()) _exit(5);
    _exit(0);
  }
  for (int i = 0; i < 10; i++) ETCH_INSTANT(work, "parent during");
  int st;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ_INT(WEXITSTATUS(st), 0);
  ETCH_INSTANT(work, "parent after");
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "fork_parent", &t);
  ASSERT_EQ_U64(t.nev, 12);
  ASSERT_EQ_STR(t.ev[0].name, "parent before");
  ASSERT_EQ_STR(t.ev[11].name, "parent after");
  for (size_t i = 0; i < t.nev; i++)
    ASSERT_EQ_INT(td_track_of(&t, t.ev[i].track)->pid, getpid());
  td_free(&t);
  etch_session_free(s);
}

/* A thread holds a writer for a session that another thread frees; a new
 * session takes the same slot. The thread's next events must reach the new
 * session, not the stale writer. */
static int phase;
static void *phased(void *arg) {
  (void)arg;
  ETCH_INSTANT(work, "to a");
  __atomic_store_n(&phase, 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(&phase, __ATOMIC_SEQ_CST) != 2) usleep(100);
  for (int i = 0; i < 100; i++) ETCH_INSTANT(work, "to b");
  return NULL;
}

TEST(freed_session_slot_reused_while_thread_holds_writer) {
  etch_session *a = start_session("compression=none");
  pthread_t th;
  pthread_create(&th, NULL, phased, NULL);
  while (__atomic_load_n(&phase, __ATOMIC_SEQ_CST) != 1) usleep(100);
  etch_session_free(a);
  etch_session *b = start_session("compression=none");
  __atomic_store_n(&phase, 2, __ATOMIC_SEQ_CST);
  pthread_join(th, NULL);
  etch_session_stop(b);
  td_trace t;
  read_trace(b, "slot_reuse_threads", &t);
  ASSERT_EQ_U64(td_count(&t, 3, "to b"), 100);
  ASSERT_EQ_U64(td_count(&t, 3, "to a"), 0);
  td_free(&t);
  etch_session_free(b);
}

/* A discard session that is dropping events while it is read, threads
 * being named meanwhile: the drop report reads other threads' writers
 * (counts, times, names). Run under ThreadSanitizer by the test script. */
static void *named_dropper(void *arg) {
  char name[16];
  snprintf(name, sizeof name, "dropper-%d", (int)(intptr_t)arg);
  for (int i = 0; !__atomic_load_n(&stop_flag, __ATOMIC_RELAXED); i++) {
    if (i % 512 == 0) etch_thread_set_name(name);
    ETCH_INSTANT(work, "drop-me", ETCH_ARG_INT("i", i));
  }
  return NULL;
}

TEST(read_while_dropping) {
  etch_session *s = start_session("buffer_kb=64;fill=discard;compression=none");
  __atomic_store_n(&stop_flag, 0, __ATOMIC_RELAXED);
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&th[i], NULL, named_dropper, (void *)(intptr_t)i);
  uint64_t dropped = 0;
  for (int r = 0; r < 20 || !dropped; r++) {
    uint8_t *d;
    size_t n;
    ASSERT_OK(etch_session_read(s, &d, &n));
    td_trace t;
    ASSERT_EQ_INT(td_decode(d, n, &t), 0);
    ASSERT_EQ_U64(t.unresolved, 0);
    dropped = td_count(&t, 3, "etch.dropped_events");
    td_free(&t);
    etch_free(d);
    usleep(1000);
    ASSERT_TRUE(r < 5000);
  }
  __atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  etch_session_free(s);
}

/* The first slice of a thread on a session must not contain etch's setup
 * of that thread's writer (its creation, the first reset and its
 * descriptors). The setup is made to last 1 ms through the library's reset
 * hook, which then notes the time: a begin stamped after the setup is not
 * before that time; one stamped at the call is 1 ms before it. No run time
 * of the machine is compared with another, so a busy machine cannot fail
 * it. */
#define SETUP_MAX 8
static struct {
  pid_t tid;
  uint64_t done_ns; /* etch_now() when the thread's first setup ended */
} setups[SETUP_MAX];
static int nsetups;

static void slow_setup(void) {
  pid_t tid = gettid();
  for (int i = 0; i < nsetups; i++)
    if (setups[i].tid == tid) return; /* only a thread's first setup */
  struct timespec d = {0, 1000000};
  nanosleep(&d, NULL);
  if (nsetups < SETUP_MAX) {
    setups[nsetups].tid = tid;
    setups[nsetups].done_ns = etch_now();
    nsetups++;
  }
}

static void *empty_slices(void *arg) {
  (void)arg;
  for (int i = 0; i < 50; i++) {
    ETCH_SLICE_BEGIN(work, "empty");
    ETCH_SLICE_END(work);
  }
  return NULL;
}

TEST(first_slice_excludes_writer_setup) {
  nsetups = 0;
  etch__writer_reset_hook = slow_setup;
  etch_session *s = start_session("compression=none");
  empty_slices(NULL); /* the main thread: a new writer for this session */
  for (int k = 0; k < 4; k++) { /* one at a time: the hook's table */
    pthread_t th;
    pthread_create(&th, NULL, empty_slices, NULL);
    pthread_join(th, NULL);
  }
  etch_session_stop(s);
  etch__writer_reset_hook = NULL;
  td_trace t;
  read_trace(s, "first_slice", &t);
  ASSERT_EQ_INT(nsetups, 5);
  for (int k = 0; k < nsetups; k++) {
    /* The thread's track, and the first begin on it. */
    uint64_t uuid = 0;
    for (size_t i = 0; i < t.ntracks; i++)
      if (t.tracks[i].is_thread && t.tracks[i].tid == setups[k].tid)
        uuid = t.tracks[i].uuid;
    ASSERT_TRUE(uuid != 0);
    const td_event *first = NULL;
    int begins = 0;
    for (size_t i = 0; i < t.nev; i++) {
      const td_event *e = &t.ev[i];
      if (e->track != uuid || e->type != 1) continue;
      if (!first) first = e;
      ASSERT_EQ_STR(e->name, "empty");
      begins++;
    }
    ASSERT_EQ_INT(begins, 50);
    /* 1 us of slack for the clock (docs/format.md: within 100 ns). */
    if (first->ts + 1000 < setups[k].done_ns)
      FAIL("thread %d: first begin at %llu, %llu ns before its setup ended",
           (int)setups[k].tid, (unsigned long long)first->ts,
           (unsigned long long)(setups[k].done_ns - first->ts));
  }
  td_free(&t);
  etch_session_free(s);
}

/* Threads emitting before etch's global init while another thread starts
 * the first session (which calibrates the clock): under TSan, no race on the
 * clock's state; in the trace, the counters recorded once the session ran,
 * in order, in BOOTTIME. */
static volatile int early_stop;
static volatile int early_started;  /* set once the session runs */
static volatile int early_recorded; /* emitters that emitted after that */

static void *early_emitter(void *arg) {
  (void)arg;
  int64_t i = 0;
  bool counted = false;
  while (!__atomic_load_n(&early_stop, __ATOMIC_ACQUIRE)) {
    bool running = __atomic_load_n(&early_started, __ATOMIC_ACQUIRE);
    ETCH_COUNTER(work, "early", i++);
    (void)etch_now();
    /* A counter whose category check came after the session started: it is
     * in the trace. */
    if (running && !counted) {
      counted = true;
      __atomic_add_fetch(&early_recorded, 1, __ATOMIC_ACQ_REL);
    }
  }
  return NULL;
}

TEST(emitting_while_the_clock_is_calibrated) {
  pthread_t th[2];
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, early_emitter, NULL);
  uint64_t t0 = etch_now();
  etch_session *s = start_session("compression=none");
  __atomic_store_n(&early_started, 1, __ATOMIC_RELEASE);
  /* Until each emitter has a counter in the session, however long the
   * machine takes to run them. */
  while (__atomic_load_n(&early_recorded, __ATOMIC_ACQUIRE) < 2) {
    struct timespec d = {0, 100000};
    nanosleep(&d, NULL);
  }
  etch_session_stop(s);
  __atomic_store_n(&early_stop, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  /* After the joins: an event whose category check came before the stop
   * may still be written (and stamped) after it. */
  uint64_t t1 = etch_now();
  td_trace t;
  read_trace(s, "early", &t);
  size_t n = 0;
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *e = &t.ev[i];
    if (e->type != 4) continue;
    ASSERT_EQ_STR(e->name, "early");
    if (e->ts < t0 || e->ts > t1)
      FAIL("counter at %llu, outside the session [%llu, %llu]",
           (unsigned long long)e->ts, (unsigned long long)t0,
           (unsigned long long)t1);
    n++;
  }
  ASSERT_TRUE(n >= 2); /* one at least from each emitter */
  td_free(&t);
  etch_session_free(s);
}

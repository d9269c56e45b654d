/*
 * sdk_loss_test.c - full buffers: a ring keeps the newest data decodable,
 * a discard buffer counts what it drops, per thread, in stats and trace.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "sdk_common.h"

ETCH_CATEGORY_DEFINE(work, "work", "", "");

TEST(ring_wraps_and_newest_events_decode) {
  etch_session *s =
      start_session("buffer_kb=64;fill=ring;compression=none;reset_interval_ms=0");
  const int N = 20000; /* ~20 bytes each with the arg: far more than 64 KiB */
  for (int i = 0; i < N; i++) {
    ETCH_SLICE_BEGIN(work, "step", ETCH_ARG_INT("i", i));
    ETCH_SLICE_END(work);
  }
  etch_session_stop(s);
  etch_session_stats st;
  etch_session_get_stats(s, &st);
  ASSERT_TRUE(st.chunks_overwritten > 0);
  ASSERT_EQ_U64(st.events_dropped, 0);
  td_trace t;
  read_trace(s, "ring", &t); /* asserts: nothing unresolved or skipped */
  size_t begins = td_count(&t, 1, "step");
  ASSERT_TRUE(begins > 100);
  ASSERT_TRUE(begins < (size_t)N);
  /* The kept events are the newest ones, consecutive, ending at N-1. */
  const td_event *last = NULL, *first = NULL;
  for (size_t i = 0; i < t.nev; i++)
    if (t.ev[i].type == 1) {
      if (!first) first = &t.ev[i];
      last = &t.ev[i];
    }
  ASSERT_EQ_INT(td_arg_of(last, "i")->i, N - 1);
  int64_t expect = td_arg_of(first, "i")->i;
  for (size_t i = 0; i < t.nev; i++)
    if (t.ev[i].type == 1) ASSERT_EQ_INT(td_arg_of(&t.ev[i], "i")->i, expect++);
  /* Every end has its begin (orphans were left out), loss is flagged. */
  ASSERT_EQ_U64(td_count(&t, 2, NULL), begins);
  ASSERT_TRUE(t.ev[0].type == 1);
  ASSERT_EQ_U64(t.prev_dropped, 1);
  ASSERT_TRUE(t.stat_overwritten > 0);
  td_free(&t);
  etch_session_free(s);
}

TEST(discard_counts_drops_in_stats_and_trace) {
  etch_session *s = start_session("buffer_kb=64;fill=discard;compression=none");
  const int N = 50000;
  for (int i = 0; i < N; i++) ETCH_INSTANT(work, "tick", ETCH_ARG_INT("i", i));
  etch_session_stop(s);
  etch_session_stats st;
  ASSERT_OK(etch_session_get_stats(s, &st));
  ASSERT_TRUE(st.events_dropped > 0);
  ASSERT_EQ_U64(st.writers_with_drops, 1);
  td_trace t;
  read_trace(s, "discard", &t);
  size_t kept = td_count(&t, 3, "tick");
  /* Nothing lost silently: kept + dropped = emitted. */
  ASSERT_EQ_U64(kept + st.events_dropped, (uint64_t)N);
  /* The oldest events are kept, in order. */
  for (size_t i = 0, k = 0; i < t.nev; i++)
    if (t.ev[i].name && strcmp(t.ev[i].name, "tick") == 0)
      ASSERT_EQ_INT(td_arg_of(&t.ev[i], "i")->i, (int64_t)k++);
  /* The trace says so, on the thread's track. */
  const td_event *d = NULL;
  for (size_t i = 0; i < t.nev; i++)
    if (t.ev[i].name && strcmp(t.ev[i].name, "etch.dropped_events") == 0)
      d = &t.ev[i];
  ASSERT_TRUE(d != NULL);
  ASSERT_EQ_STR(d->cat, "etch");
  ASSERT_EQ_U64(td_arg_of(d, "count")->i, st.events_dropped);
  const td_track *tr = td_track_of(&t, d->track);
  ASSERT_TRUE(tr && tr->is_thread);
  ASSERT_EQ_INT(tr->tid, gettid());
  ASSERT_TRUE(t.stat_discarded > 0);
  ASSERT_EQ_U64(t.stat_writer_loss, 1);
  td_free(&t);
  etch_session_free(s);
}

/* A thread whose first event already finds the discard buffer full never
 * gets a chunk (nor a clock anchor): its drop report still carries the
 * times of its drops, on BOOTTIME. */
static void *late_dropper(void *arg) {
  uint64_t *bounds = (uint64_t *)arg;
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  bounds[0] = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  for (int i = 0; i < 10; i++) ETCH_INSTANT(work, "late");
  clock_gettime(CLOCK_BOOTTIME, &ts);
  bounds[1] = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  return NULL;
}

TEST(drop_report_of_a_thread_that_never_had_a_chunk) {
  etch_session *s = start_session("buffer_kb=64;fill=discard;compression=none");
  for (int i = 0; i < 50000; i++) ETCH_INSTANT(work, "tick", ETCH_ARG_INT("i", i));
  uint64_t bounds[2];
  pthread_t th;
  pthread_create(&th, NULL, late_dropper, bounds);
  pthread_join(th, NULL);
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "discard_late", &t);
  ASSERT_EQ_U64(td_count(&t, 3, "late"), 0);
  int reports = 0;
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *d = &t.ev[i];
    if (!d->name || strcmp(d->name, "etch.dropped_events") != 0) continue;
    const td_track *tr = td_track_of(&t, d->track);
    ASSERT_TRUE(tr && tr->is_thread);
    if (tr->tid == gettid()) continue;
    reports++;
    ASSERT_EQ_INT(td_arg_of(d, "count")->i, 10);
    uint64_t last = td_arg_of(d, "last_drop_ns")->u;
    /* first drop = the report's time; both inside the thread's run. */
    ASSERT_TRUE(d->ts >= bounds[0] && d->ts <= bounds[1]);
    ASSERT_TRUE(last >= d->ts && last <= bounds[1]);
  }
  ASSERT_EQ_INT(reports, 1);
  td_free(&t);
  etch_session_free(s);
}

/* A writer that dropped events and then got a chunk again reports the drops
 * itself, on its own sequence (as it must under a service, which cannot
 * look into a producer's writers), and the end of the file does not report
 * them again. A 16 KiB ring has 4 chunks: 4 threads holding one each leave
 * none for the main thread until they exit. */
static pthread_barrier_t hold_bar;

static void *holder(void *arg) {
  (void)arg;
  ETCH_INSTANT(work, "hold");
  pthread_barrier_wait(&hold_bar); /* chunks taken */
  pthread_barrier_wait(&hold_bar); /* main thread dropped */
  return NULL;
}

TEST(drops_reported_on_the_writers_own_sequence) {
  etch_session *s = start_session("buffer_kb=16;fill=ring;compression=none");
  pthread_barrier_init(&hold_bar, NULL, 5);
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, holder, NULL);
  pthread_barrier_wait(&hold_bar);
  for (int i = 0; i < 3; i++) ETCH_INSTANT(work, "dropped");
  pthread_barrier_wait(&hold_bar);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL); /* chunks back */
  ETCH_INSTANT(work, "after");
  etch_session_stop(s);
  etch_session_stats st;
  ASSERT_OK(etch_session_get_stats(s, &st));
  ASSERT_EQ_U64(st.events_dropped, 3);
  td_trace t;
  read_trace(s, "drops_in_band", &t);
  pthread_barrier_destroy(&hold_bar);
  /* The main thread's chunk is the ring's oldest: one holder's, overwritten. */
  ASSERT_EQ_U64(td_count(&t, 3, "hold"), 3);
  ASSERT_EQ_U64(td_count(&t, 3, "dropped"), 0);
  ASSERT_EQ_U64(td_count(&t, 3, "after"), 1);
  ASSERT_EQ_U64(td_count(&t, 3, "etch.dropped_events"), 1);
  const td_event *after = NULL, *rep = NULL;
  for (size_t i = 0; i < t.nev; i++) {
    if (!t.ev[i].name) continue;
    if (!strcmp(t.ev[i].name, "after")) after = &t.ev[i];
    if (!strcmp(t.ev[i].name, "etch.dropped_events")) rep = &t.ev[i];
  }
  ASSERT_EQ_U64(rep->seq, after->seq); /* the main thread's own sequence */
  ASSERT_TRUE(rep->seq != 1);
  ASSERT_EQ_U64(rep->track, after->track);
  ASSERT_EQ_INT(td_arg_of(rep, "count")->i, 3);
  ASSERT_TRUE(rep->ts <= td_arg_of(rep, "last_drop_ns")->u);
  ASSERT_TRUE(td_arg_of(rep, "last_drop_ns")->u <= after->ts);
  ASSERT_TRUE(t.prev_dropped >= 1); /* the reset after the loss says so */
  td_free(&t);
  etch_session_free(s);
}

/*
 * insights_test.c - declared counters (every operation, several threads
 * adding at once, values kept while nothing records), bookmarks and
 * frames, decoded from the trace with exact values.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <unistd.h>

#include "base/clock.h" /* etch__clock_check_hook, etch__ticks_raw */
#include "sdk_common.h"

ETCH_CATEGORY_DEFINE(timers, "timers", "", "");

ETCH_COUNTER_DEFINE_INT(hits, "Alien/Hits");
ETCH_COUNTER_DEFINE_MEMORY(bytes, "Alien/Bytes");
ETCH_COUNTER_DEFINE_FLOAT(load, "Load");
ETCH_COUNTER_DEFINE_UNIT(reqs, "Requests", "requests");
ETCH_COUNTER_DEFINE_INT(shared, "Shared");
ETCH_COUNTER_DEFINE_MEMORY(pool, "Pool");

static size_t values_of(const td_trace *t, const char *name, double *out,
                        size_t cap, const td_track **track) {
  return counter_values(t, name, out, cap, NULL, track);
}

TEST(counter_operations_record_exact_values_and_units) {
  etch_session *s = start_session("compression=none");
  ETCH_COUNTER_SET(hits, 10);
  ETCH_COUNTER_ADD(hits, 5);
  ETCH_COUNTER_SUB(hits, 3);
  ETCH_COUNTER_INC(hits);
  ETCH_COUNTER_DEC(hits);
  ETCH_COUNTER_DEC(hits);
  ETCH_COUNTER_ADD(bytes, 4096);
  ETCH_COUNTER_ADD(bytes, 1 << 20);
  ETCH_COUNTER_SUB(bytes, 4096);
  ETCH_COUNTER_SET_FLOAT(load, 1.5);
  ETCH_COUNTER_ADD_FLOAT(load, 0.25);
  ETCH_COUNTER_ADD(load, 2); /* an int operation on a float counter */
  ETCH_COUNTER_INC(reqs);
  ETCH_COUNTER_INC(reqs);
  etch_session_stop(s);
  ASSERT_EQ_INT((int)etch_counter_get(ETCH_COUNTER_REF(hits)), 11);
  ASSERT_EQ_DBL(etch_counter_get_float(ETCH_COUNTER_REF(load)), 3.75);
  td_trace t;
  read_trace(s, "insights_counters", &t);
  double v[16];
  const td_track *k;
  ASSERT_EQ_U64(values_of(&t, "Alien/Hits", v, 16, &k), 6);
  double want_hits[] = {10, 15, 12, 13, 12, 11};
  for (int i = 0; i < 6; i++) ASSERT_EQ_DBL(v[i], want_hits[i]);
  ASSERT_TRUE(k->is_counter);
  ASSERT_EQ_INT(k->unit, 0);
  ASSERT_EQ_U64(values_of(&t, "Alien/Bytes", v, 16, &k), 3);
  ASSERT_EQ_DBL(v[0], 4096);
  ASSERT_EQ_DBL(v[1], 4096 + (1 << 20));
  ASSERT_EQ_DBL(v[2], 1 << 20);
  ASSERT_EQ_INT(k->unit, 3); /* UNIT_SIZE_BYTES */
  ASSERT_EQ_U64(values_of(&t, "Load", v, 16, &k), 3);
  ASSERT_EQ_DBL(v[0], 1.5);
  ASSERT_EQ_DBL(v[1], 1.75);
  ASSERT_EQ_DBL(v[2], 3.75);
  ASSERT_EQ_U64(values_of(&t, "Requests", v, 16, &k), 2);
  ASSERT_EQ_DBL(v[1], 2);
  ASSERT_EQ_STR(k->unit_name, "requests");
  td_free(&t);
  etch_session_free(s);
}

/* Four threads change two counters at once: the recorded values, in time
 * order, are every running total once (1, 2, ..., 4n for the increments). */
enum { THREADS = 4, PER_THREAD = 20000 };

static void *adder(void *arg) {
  long id = (long)arg;
  for (int i = 0; i < PER_THREAD; i++) {
    ETCH_COUNTER_INC(shared);
    ETCH_COUNTER_ADD(pool, id + 1);
    if (i % 2) ETCH_COUNTER_SUB(pool, id + 1);
  }
  return NULL;
}

TEST(counters_from_many_threads_record_the_running_totals) {
  etch_counter_set(ETCH_COUNTER_REF(shared), 0);
  etch_counter_set(ETCH_COUNTER_REF(pool), 0);
  etch_session *s =
      start_session("compression=none;buffer_kb=65536;fill=discard");
  pthread_t th[THREADS];
  for (long i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, adder, (void *)i);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "insights_threads", &t);
  ASSERT_EQ_U64(t.prev_dropped, 0);
  static double v[THREADS * PER_THREAD * 2];
  const td_track *k;
  ASSERT_EQ_U64(values_of(&t, "Shared", v, THREADS * PER_THREAD, &k),
                THREADS * PER_THREAD);
  for (int i = 0; i < THREADS * PER_THREAD; i++)
    if (v[i] != i + 1) FAIL("Shared value %d is %.0f, not %d", i, v[i], i + 1);
  /* Pool: each thread adds then half the time takes it back; the last
   * recorded value is what the program ends with. */
  size_t n = values_of(&t, "Pool", v, THREADS * PER_THREAD * 2, &k);
  ASSERT_EQ_U64(n, THREADS * PER_THREAD * 3 / 2);
  int64_t end = etch_counter_get(ETCH_COUNTER_REF(pool));
  ASSERT_EQ_INT((int)end, (1 + 2 + 3 + 4) * PER_THREAD / 2);
  ASSERT_EQ_DBL(v[n - 1], (double)end);
  td_free(&t);
  etch_session_free(s);
}

TEST(a_counter_keeps_counting_while_nothing_records) {
  etch_counter_set(ETCH_COUNTER_REF(hits), 0);
  ETCH_COUNTER_ADD(hits, 5); /* no session */
  etch_session *s = start_session("compression=none");
  ETCH_COUNTER_INC(hits);
  etch_session_stop(s);
  ETCH_COUNTER_INC(hits);
  ASSERT_EQ_INT((int)etch_counter_get(ETCH_COUNTER_REF(hits)), 7);
  td_trace t;
  read_trace(s, "insights_late", &t);
  double v[4];
  const td_track *k;
  ASSERT_EQ_U64(values_of(&t, "Alien/Hits", v, 4, &k), 1);
  ASSERT_EQ_DBL(v[0], 6);
  td_free(&t);
  etch_session_free(s);
  /* A session without the "counters" category records none. */
  s = start_session("compression=none;categories=*,-counters");
  ETCH_COUNTER_INC(hits);
  etch_session_stop(s);
  read_trace(s, "insights_off", &t);
  ASSERT_EQ_U64(values_of(&t, "Alien/Hits", v, 4, &k), 0);
  td_free(&t);
  etch_session_free(s);
}

TEST(bookmarks_are_instants_on_the_bookmarks_track) {
  etch_session *s = start_session("compression=none");
  ETCH_BOOKMARK("Inventory.Open");
  ETCH_BOOKMARKF("Level %d: %s", 3, "caves");
  ETCH_BOOKMARK("Inventory.Close");
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "insights_bookmarks", &t);
  const char *want[] = {"Inventory.Open", "Level 3: caves", "Inventory.Close"};
  int n = 0;
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *e = &t.ev[i];
    const td_track *k = td_track_of(&t, e->track);
    if (!k || !k->name || strcmp(k->name, "Bookmarks")) continue;
    ASSERT_EQ_INT(e->type, 3);
    ASSERT_TRUE(n < 3);
    ASSERT_EQ_STR(e->name, want[n]);
    ASSERT_EQ_STR(e->cat, "bookmarks");
    n++;
  }
  ASSERT_EQ_INT(n, 3);
  td_free(&t);
  etch_session_free(s);
}

/* Frames at known times: slices "Frame" with their index, back to back on
 * the Frames track; marks, begin/end pairs, a frame from another thread. */
static uint64_t frame_base;

static void *other_thread_frame(void *arg) {
  (void)arg;
  etch_frame_begin_at(frame_base + 10000000);
  etch_frame_end_at(frame_base + 14000000);
  return NULL;
}

TEST(frames_are_slices_on_the_frames_track) {
  etch_session *s = start_session("compression=none");
  uint64_t first = etch_frame_index();
  frame_base = etch_now() + 1000000;
  etch_frame_mark_at(frame_base);           /* frame +1 begins */
  etch_frame_mark_at(frame_base + 2000000); /* +1 ends, +2 begins */
  etch_frame_mark_at(frame_base + 5000000); /* +2 ends, +3 begins */
  etch_frame_end_at(frame_base + 6000000);  /* +3 ends */
  etch_frame_end_at(frame_base + 7000000);  /* nothing open: nothing */
  pthread_t th;
  pthread_create(&th, NULL, other_thread_frame, NULL); /* +4 */
  pthread_join(th, NULL);
  /* +5 begins at +4's end: moved 1 ns after it, so that no reader can take
   * the begin on one sequence for earlier than the end on the other. */
  etch_frame_mark_at(frame_base + 14000000);
  ASSERT_EQ_U64(etch_frame_index(), first + 5);
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "insights_frames", &t);
  uint64_t want_b[] = {0, 2000000, 5000000, 10000000, 14000001};
  uint64_t want_e[] = {2000000, 5000000, 6000000, 14000000};
  /* Two sequences wrote them: compare in time order. */
  uint64_t b[8], e_ts[8], idx[8];
  int nb = 0, ne = 0;
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *e = &t.ev[i];
    const td_track *k = td_track_of(&t, e->track);
    if (!k || !k->name || strcmp(k->name, "Frames")) continue;
    if (e->type == 1 && nb < 8) {
      ASSERT_EQ_STR(e->name, "Frame");
      b[nb] = e->ts;
      idx[nb++] = td_arg_of(e, "index")->u;
    } else if (e->type == 2 && ne < 8) {
      e_ts[ne++] = e->ts;
    }
  }
  for (int i = 0; i < nb; i++) /* sort begins (with their index) by time */
    for (int j = i + 1; j < nb; j++)
      if (b[j] < b[i]) {
        uint64_t x = b[i]; b[i] = b[j]; b[j] = x;
        x = idx[i]; idx[i] = idx[j]; idx[j] = x;
      }
  for (int i = 0; i < ne; i++)
    for (int j = i + 1; j < ne; j++)
      if (e_ts[j] < e_ts[i]) {
        uint64_t x = e_ts[i]; e_ts[i] = e_ts[j]; e_ts[j] = x;
      }
  for (int i = 0; i < nb && i < 5; i++) {
    if (b[i] != frame_base + want_b[i]) FAIL("begin %d at base+%lld, want +%llu", i, (long long)(b[i] - frame_base), (unsigned long long)want_b[i]);
    ASSERT_EQ_U64(idx[i], first + 1 + (uint64_t)i);
  }
  for (int i = 0; i < ne && i < 4; i++)
    ASSERT_EQ_U64(e_ts[i], frame_base + want_e[i]);
  ASSERT_EQ_INT(nb, 5);
  ASSERT_EQ_INT(ne, 4);
  td_free(&t);
  etch_session_free(s);
  etch_frame_end();
}

/* Names built at run time: each written once per sequence (interned),
 * every event decoding to its own name; past the table's bound, names are
 * written inline and still decode. */
static size_t occurrences(const uint8_t *d, size_t n, const char *s) {
  size_t k = 0, len = strlen(s);
  for (size_t i = 0; i + len <= n; i++)
    if (!memcmp(d + i, s, len)) k++;
  return k;
}

TEST(dynamic_names_are_interned_per_sequence) {
  etch_session *s = start_session("compression=none;reset_interval_ms=0");
  const char *names[] = {"Load level_7", "Spawn wave 3", "Save slot-2"};
  char buf[32];
  for (int i = 0; i < 999; i++) {
    snprintf(buf, sizeof buf, "%s", names[i % 3]); /* a new string each time */
    ETCH_SCOPE_STR(timers, buf);
  }
  for (int i = 0; i < 5000; i++) { /* more distinct names than the table */
    snprintf(buf, sizeof buf, "unique-%d", i);
    ETCH_SCOPE_STR(timers, buf, ETCH_ARG_INT("i", i));
  }
  etch_session_stop(s);
  uint8_t *d;
  size_t n;
  ASSERT_OK(etch_session_read(s, &d, &n));
  for (int k = 0; k < 3; k++) ASSERT_EQ_U64(occurrences(d, n, names[k]), 1);
  ASSERT_EQ_U64(occurrences(d, n, "unique-4999"), 1);
  td_trace t;
  ASSERT_EQ_INT(td_decode(d, n, &t), 0);
  ASSERT_EQ_U64(t.unresolved, 0);
  int b = 0;
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *e = &t.ev[i];
    if (e->type != 1) continue;
    if (b < 999) {
      ASSERT_EQ_STR(e->name, names[b % 3]);
    } else {
      snprintf(buf, sizeof buf, "unique-%d", b - 999);
      ASSERT_EQ_STR(e->name, buf);
      ASSERT_EQ_INT((int)td_arg_of(e, "i")->i, b - 999);
    }
    b++;
  }
  ASSERT_EQ_INT(b, 999 + 5000);
  ASSERT_EQ_U64(td_count(&t, 2, NULL), 999 + 5000);
  td_free(&t);
  etch_free(d);
  etch_session_free(s);
}

/* A thread that records only events with explicit times (declared
 * counters) does not take a fresh clock anchor for each of them once its
 * anchor has expired (its sequence's clock never moves on, so it would:
 * 600 ns an event). Anchors are counted through the clock check's hook,
 * which every anchor of the TSC clock reads once. */
static uint64_t anchor_reads;

static void counting_pair(uint64_t *ticks, uint64_t *ns) {
  __atomic_fetch_add(&anchor_reads, 1, __ATOMIC_RELAXED);
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 3; i++) {
    uint64_t t0 = etch__ticks_raw(), n = etch__boottime_ns();
    uint64_t t1 = etch__ticks_raw();
    if (t1 - t0 < best) {
      best = t1 - t0;
      *ticks = t0 + (t1 - t0) / 2;
      *ns = n;
    }
  }
}

static void *explicit_only(void *arg) {
  (void)arg;
  for (int round = 0; round < 40; round++) {
    for (int i = 0; i < 500; i++) ETCH_COUNTER_INC(hits);
    usleep(2000); /* 80 ms and more in all: the anchor expires (10 ms) */
  }
  return NULL;
}

TEST(explicit_times_do_not_re_anchor_every_event) {
  etch_counter_set(ETCH_COUNTER_REF(hits), 0);
  etch_session *s = start_session("compression=none;buffer_kb=16384");
  if (!etch__clock_is_tsc()) { /* no anchors to count */
    etch_session_free(s);
    return;
  }
  __atomic_store_n(&etch__clock_check_hook, counting_pair, __ATOMIC_RELEASE);
  pthread_t th;
  pthread_create(&th, NULL, explicit_only, NULL);
  pthread_join(th, NULL);
  __atomic_store_n(&etch__clock_check_hook, NULL, __ATOMIC_RELEASE);
  etch_session_stop(s);
  uint64_t reads = __atomic_load_n(&anchor_reads, __ATOMIC_RELAXED);
  if (reads > 20) FAIL("%llu clock anchors for 20000 counter changes",
                       (unsigned long long)reads);
  td_trace t;
  read_trace(s, "insights_explicit", &t);
  double v[4];
  const td_track *k;
  ASSERT_EQ_U64(values_of(&t, "Alien/Hits", v, 4, &k), 20000);
  td_free(&t);
  etch_session_free(s);
}

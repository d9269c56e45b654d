/*
 * bench_insights.c - what declared counters, bookmarks, frames and
 * run-time-named scopes cost, in one run:
 *
 *   bench_insights [OPS_PER_THREAD] [REPS]
 *
 * ns per operation (a scope is a begin and an end: per event), median of
 * REPS runs, the slowest thread's, into an in-process session; the same
 * operations with no session recording them; and their peers: a plain
 * ETCH_COUNTER (its value computed by the caller), a static-named scope,
 * and etch_now() (the clock counters and frames read).
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

ETCH_CATEGORY_DEFINE(bench, "bench", "insights benchmark", "");
ETCH_COUNTER_DEFINE_INT(hits, "hits");
ETCH_COUNTER_DEFINE_MEMORY(bytes, "bytes");

static long n_ops = 1000000;
static int reps = 5;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

enum {
  C_COUNTER_INC,
  C_COUNTER_ADD_SUB,
  C_PLAIN_COUNTER,
  C_BOOKMARK,
  C_FRAME_MARK,
  C_SCOPE_STATIC,
  C_SCOPE_STR,
  C_NOW,
  C_N
};
static const char *const names[C_N] = {
    "ETCH_COUNTER_INC",
    "ETCH_COUNTER_ADD + SUB (per op)",
    "peer: ETCH_COUNTER (plain)",
    "ETCH_BOOKMARK",
    "ETCH_FRAME_MARK",
    "peer: ETCH_SCOPE, static name",
    "ETCH_SCOPE_STR (3 names)",
    "floor: etch_now()",
};

typedef struct run {
  pthread_barrier_t *start;
  int what;
  uint64_t ns;
} run;

static void *worker(void *arg) {
  run *r = (run *)arg;
  static const char *const dyn[3] = {"Load level", "Spawn wave", "Save slot"};
  volatile uint64_t sink = 0;
  pthread_barrier_wait(r->start);
  uint64_t t0 = now_ns();
  long n = n_ops;
  switch (r->what) {
    case C_COUNTER_INC:
      for (long i = 0; i < n; i++) ETCH_COUNTER_INC(hits);
      break;
    case C_COUNTER_ADD_SUB:
      for (long i = 0; i < n / 2; i++) {
        ETCH_COUNTER_ADD(bytes, 64);
        ETCH_COUNTER_SUB(bytes, 64);
      }
      break;
    case C_PLAIN_COUNTER:
      for (long i = 0; i < n; i++) ETCH_COUNTER(bench, "plain", i);
      break;
    case C_BOOKMARK:
      for (long i = 0; i < n; i++) ETCH_BOOKMARK("Inventory.Open");
      break;
    case C_FRAME_MARK:
      for (long i = 0; i < n; i++) ETCH_FRAME_MARK();
      break;
    case C_SCOPE_STATIC:
      for (long i = 0; i < n / 2; i++) {
        ETCH_SCOPE(bench, "scope");
      }
      break;
    case C_SCOPE_STR:
      for (long i = 0; i < n / 2; i++) {
        ETCH_SCOPE_STR(bench, dyn[i % 3]);
      }
      break;
    case C_NOW:
      for (long i = 0; i < n; i++) sink += etch_now();
      break;
  }
  r->ns = now_ns() - t0;
  (void)sink;
  return NULL;
}

static double once(int threads, int what) {
  pthread_barrier_t b;
  pthread_barrier_init(&b, NULL, (unsigned)threads);
  pthread_t th[2];
  run r[2] = {{&b, what, 0}, {&b, what, 0}};
  for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, worker, &r[i]);
  uint64_t worst = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(th[i], NULL);
    if (r[i].ns > worst) worst = r[i].ns;
  }
  pthread_barrier_destroy(&b);
  return (double)worst / (double)n_ops;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double timed(bool record, int threads, int what) {
  double v[32];
  int n = reps < 32 ? reps : 32;
  for (int k = 0; k < n; k++) {
    etch_session *s = NULL;
    if (record) {
      etch_config *c;
      if (etch_config_new(&c) ||
          etch_config_parse(c, "buffer_kb=262144;fill=ring") ||
          etch_session_new(c, &s) || etch_session_start(s)) {
        fprintf(stderr, "bench_insights: %s\n", etch_last_error());
        exit(1);
      }
      etch_config_free(c);
    }
    v[k] = once(threads, what);
    if (s) etch_session_free(s);
  }
  qsort(v, (size_t)n, sizeof v[0], cmp_double);
  return v[n / 2];
}

int main(int argc, char **argv) {
  if (argc > 1) n_ops = atol(argv[1]);
  if (argc > 2) reps = atoi(argv[2]);
  if (n_ops < 1000 || reps < 1) {
    fprintf(stderr, "usage: bench_insights [OPS>=1000] [REPS>=1]\n");
    return 2;
  }
  printf("%ld ops per thread, median of %d runs, ns per op\n\n", n_ops, reps);
  printf("%-34s %10s %10s %12s\n", "", "recording", "recording", "no session");
  printf("%-34s %10s %10s %12s\n", "", "1 thread", "2 threads", "1 thread");
  for (int w = 0; w < C_N; w++)
    printf("%-34s %10.1f %10.1f %12.1f\n", names[w], timed(true, 1, w),
           timed(true, 2, w), timed(false, 1, w));
  return 0;
}

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

#include "bench_threads.h"

ETCH_CATEGORY_DEFINE(bench, "bench", "insights benchmark", "");
ETCH_COUNTER_DEFINE_INT(hits, "hits");
ETCH_COUNTER_DEFINE_MEMORY(bytes, "bytes");

static long n_ops = 1000000;
static int reps = 5;

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

static void body(int what) {
  static const char *const dyn[3] = {"Load level", "Spawn wave", "Save slot"};
  volatile uint64_t sink = 0;
  long n = n_ops;
  switch (what) {
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
  (void)sink;
}

static double timed(bool record, int threads, int what) {
  const bench_job job = {NULL, body, what};
  return bench_session_median(record ? "buffer_kb=262144;fill=ring" : NULL,
                              threads, &job, n_ops, reps);
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

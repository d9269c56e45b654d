/*
 * bench_custom.c - what a custom event (etch/event.h) costs against a slice
 * with the same args, in one run:
 *
 *   bench_custom [OPS_PER_THREAD] [REPS]
 *
 * ns per event, median of REPS runs, the slowest thread's, into an
 * in-process session: a custom event with 3 fields (an int, a float, a
 * short string), the same with the serial (one atomic counter shared by
 * every thread), and the peer: ETCH_INSTANT with the same three args; with
 * no session recording, the cost of the channel check alone.
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_threads.h"

ETCH_CATEGORY_DEFINE(bench, "bench", "custom event benchmark", "");
ETCH_CHANNEL_DEFINE(BenchChannel, "BenchChannel");

#define HIT_FIELDS(F) F(int32, id) F(float, damage) F(str, weapon)
ETCH_EVENT_DECLARE(Bench, Hit, HIT_FIELDS);
ETCH_EVENT_DEFINE(Bench, Hit, HIT_FIELDS, 0);
ETCH_EVENT_DECLARE(Bench, SerialHit, HIT_FIELDS);
ETCH_EVENT_DEFINE(Bench, SerialHit, HIT_FIELDS, ETCH_EVENT_SERIAL);

static long n_ops = 1000000;
static int reps = 5;

enum { C_CUSTOM, C_CUSTOM_SERIAL, C_INSTANT_ARGS, C_INSTANT, C_N };
static const char *const names[C_N] = {
    "custom event, 3 fields",
    "custom event, 3 fields + serial",
    "peer: ETCH_INSTANT + same 3 args",
    "peer: ETCH_INSTANT, no args",
};

static void body(int what) {
  long n = n_ops;
  switch (what) {
    case C_CUSTOM:
      for (long i = 0; i < n; i++)
        ETCH_LOG(Bench, Hit, BenchChannel, ETCH_SET(id, (int32_t)i),
                 ETCH_SET(damage, 12.5f), ETCH_SET(weapon, "sword"));
      break;
    case C_CUSTOM_SERIAL:
      for (long i = 0; i < n; i++)
        ETCH_LOG(Bench, SerialHit, BenchChannel, ETCH_SET(id, (int32_t)i),
                 ETCH_SET(damage, 12.5f), ETCH_SET(weapon, "sword"));
      break;
    case C_INSTANT_ARGS:
      for (long i = 0; i < n; i++)
        ETCH_INSTANT(bench, "hit", ETCH_ARG_INT("id", i),
                     ETCH_ARG_DOUBLE("damage", 12.5),
                     ETCH_ARG_STRING("weapon", "sword"));
      break;
    case C_INSTANT:
      for (long i = 0; i < n; i++) ETCH_INSTANT(bench, "hit");
      break;
  }
}

static double timed(bool record, int threads, int what) {
  const bench_job job = {NULL, body, what};
  return bench_session_median(record ? "buffer_kb=262144;fill=ring;"
                                       "categories=bench,BenchChannel"
                                     : NULL,
                              threads, &job, n_ops, reps);
}

int main(int argc, char **argv) {
  if (argc > 1) n_ops = atol(argv[1]);
  if (argc > 2) reps = atoi(argv[2]);
  if (n_ops < 1000 || reps < 1) {
    fprintf(stderr, "usage: bench_custom [OPS>=1000] [REPS>=1]\n");
    return 2;
  }
  printf("%ld events per thread, median of %d runs, ns per event\n\n", n_ops,
         reps);
  printf("%-36s %10s %10s %12s\n", "", "recording", "recording", "no session");
  printf("%-36s %10s %10s %12s\n", "", "1 thread", "2 threads", "1 thread");
  for (int w = 0; w < C_N; w++)
    printf("%-36s %10.1f %10.1f %12.1f\n", names[w], timed(true, 1, w),
           timed(true, 2, w), timed(false, 1, w));
  return 0;
}

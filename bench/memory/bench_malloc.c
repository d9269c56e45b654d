/*
 * bench_malloc.c - what memory tracing adds to malloc and free.
 *
 *   bench_malloc PAIRS            (run as is, and under libetch_malloc.so)
 *
 * Two measures, each on 1 and 2 threads, the median of 5 runs:
 *
 *   "1 X", "2 X"                  ns per malloc(n) + free pair (n cycling
 *                                 over 16..1024 bytes, so that the
 *                                 allocator's fast path is what is timed)
 *   "malloc 1 X", "free 1 X" ...  ns per malloc and per free alone: batches
 *                                 of 256 blocks allocated, then freed, each
 *                                 half timed on its own (two clock reads a
 *                                 batch)
 *
 * scripts/bench.sh memory runs it without the preload, with it but no
 * session (ETCH_OUT unset), and recording, and prints the three side by
 * side: the difference between rows is what the preload adds.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench_threads.h"

#define BATCH 256

static long pairs = 2000000;
/* Summed over the threads of a run: ns in malloc, ns in free. */
static uint64_t split_ns[2];

static void pairs_body(int what) {
  (void)what;
  void *volatile sink;
  for (long i = 0; i < pairs; i++) {
    void *p = malloc(16 + (size_t)(i & 63) * 16);
    sink = p;
    free(p);
  }
  (void)sink;
}

static void split_body(int what) {
  (void)what;
  void *blocks[BATCH];
  uint64_t in_malloc = 0, in_free = 0;
  for (long done = 0; done < pairs; done += BATCH) {
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < BATCH; i++)
      blocks[i] = malloc(16 + (size_t)((done + i) & 63) * 16);
    uint64_t t1 = bench_now_ns();
    for (int i = 0; i < BATCH; i++) free(blocks[i]);
    uint64_t t2 = bench_now_ns();
    in_malloc += t1 - t0;
    in_free += t2 - t1;
  }
  __atomic_add_fetch(&split_ns[0], in_malloc, __ATOMIC_RELAXED);
  __atomic_add_fetch(&split_ns[1], in_free, __ATOMIC_RELAXED);
}

/* `bench_malloc PAIRS pairs`: only the pairs, on 1 and 4 threads, the
 * threads' CPU time and waits, and the process's peak memory (scripts/bench.sh's side-by-side run with
 * heaptrack). */
static int pairs_only(void) {
  const bench_job job = {NULL, pairs_body, 0};
  const int threads[] = {1, 4};
  for (int t = 0; t < 2; t++) {
    double v[5], cpu[5];
    long waits = 0;
    for (int k = 0; k < 5; k++) {
      v[k] = bench_threads_once(threads[t], &job, pairs);
      cpu[k] = bench_last_cpu_per_op;
      waits += bench_last_waits;
    }
    printf("%d %.1f\n", threads[t], bench_median(v, 5));
    /* The program threads' own CPU time per pair (the busiest thread's,
     * median of the 5 runs) and their waits (voluntary context switches,
     * all 5 runs): wall time above CPU time is time spent waiting. */
    printf("cpu %d %.1f\n", threads[t], bench_median(cpu, 5));
    printf("waits %d %ld\n", threads[t], waits);
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("maxrss_kb %ld\n", ru.ru_maxrss);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1) pairs = atol(argv[1]);
  if (pairs < 1000) return 2;
  pairs -= pairs % BATCH;
  if (argc > 2 && !strcmp(argv[2], "pairs")) return pairs_only();
  const bench_job job = {NULL, pairs_body, 0};
  for (int threads = 1; threads <= 2; threads++) {
    double v[5];
    for (int k = 0; k < 5; k++) v[k] = bench_threads_once(threads, &job, pairs);
    printf("%d %.1f\n", threads, bench_median(v, 5));
  }
  const bench_job split = {NULL, split_body, 0};
  for (int threads = 1; threads <= 2; threads++) {
    double m[5], f[5];
    for (int k = 0; k < 5; k++) {
      split_ns[0] = split_ns[1] = 0;
      bench_threads_once(threads, &split, pairs);
      m[k] = (double)split_ns[0] / (double)(pairs * threads);
      f[k] = (double)split_ns[1] / (double)(pairs * threads);
    }
    printf("malloc %d %.1f\n", threads, bench_median(m, 5));
    printf("free %d %.1f\n", threads, bench_median(f, 5));
  }
  return 0;
}

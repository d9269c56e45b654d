/*
 * bench_malloc.c - what memory tracing adds to a malloc/free pair.
 *
 *   bench_malloc PAIRS            (run as is, and under libetch_malloc.so)
 *
 * Times PAIRS malloc(n) + free pairs (n cycling over 16..1024 bytes, so the
 * allocator's fast path is what is measured) on 1 and 2 threads and prints
 * ns per pair, the median of 5 runs. scripts/bench.sh memory runs it
 * without the preload, with it but no session (ETCH_OUT unset), and
 * recording, and prints the three side by side.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "bench_threads.h"

static long pairs = 2000000;

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

int main(int argc, char **argv) {
  if (argc > 1) pairs = atol(argv[1]);
  if (pairs < 1000) return 2;
  const bench_job job = {NULL, pairs_body, 0};
  for (int threads = 1; threads <= 2; threads++) {
    double v[5];
    for (int k = 0; k < 5; k++) v[k] = bench_threads_once(threads, &job, pairs);
    printf("%d %.1f\n", threads, bench_median(v, 5));
  }
  return 0;
}

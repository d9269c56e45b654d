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
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long pairs = 2000000;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct run {
  pthread_barrier_t *start;
  uint64_t ns;
} run;

static void *worker(void *arg) {
  run *r = (run *)arg;
  void *volatile sink;
  pthread_barrier_wait(r->start);
  uint64_t t0 = now_ns();
  for (long i = 0; i < pairs; i++) {
    void *p = malloc(16 + (size_t)(i & 63) * 16);
    sink = p;
    free(p);
  }
  (void)sink;
  r->ns = now_ns() - t0;
  return NULL;
}

static double once(int threads) {
  pthread_barrier_t b;
  pthread_barrier_init(&b, NULL, (unsigned)threads);
  pthread_t th[2];
  run r[2] = {{&b, 0}, {&b, 0}};
  for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, worker, &r[i]);
  uint64_t worst = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(th[i], NULL);
    if (r[i].ns > worst) worst = r[i].ns;
  }
  pthread_barrier_destroy(&b);
  return (double)worst / (double)pairs;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc > 1) pairs = atol(argv[1]);
  if (pairs < 1000) return 2;
  for (int threads = 1; threads <= 2; threads++) {
    double v[5];
    for (int k = 0; k < 5; k++) v[k] = once(threads);
    qsort(v, 5, sizeof v[0], cmp_double);
    printf("%d %.1f\n", threads, v[2]);
  }
  return 0;
}

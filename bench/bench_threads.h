/*
 * bench_threads.h - the timing harness the benchmarks share: run a body on
 * 1 or 2 threads started together at a barrier, take the slowest thread's
 * time per operation, and the median of several runs.
 */
#ifndef ETCH_BENCH_THREADS_H
#define ETCH_BENCH_THREADS_H

#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static inline uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A thread's part: `warm` runs before the barrier (untimed), `body` after
 * it; both get `what`. */
typedef struct bench_job {
  void (*warm)(int what);
  void (*body)(int what);
  int what;
} bench_job;

typedef struct bench_thread {
  pthread_barrier_t *start;
  const bench_job *job;
  uint64_t ns;
  uint64_t cpu_ns; /* the thread's own CPU time (user + system) in body */
  long waits;      /* its voluntary context switches in body: waits */
} bench_thread;

/* Of the last bench_threads_once: the most CPU time a thread took per
 * operation (ns), and the voluntary context switches of all its threads
 * (each a wait: for a lock, or for room in a tracer's full buffer). */
static double bench_last_cpu_per_op;
static long bench_last_waits;

static inline void bench_thread_usage(uint64_t *cpu_ns, long *waits) {
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  *cpu_ns = ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
                1000000000ull +
            ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) *
                1000ull;
  *waits = ru.ru_nvcsw;
}

static void *bench_thread_main(void *arg) {
  bench_thread *t = (bench_thread *)arg;
  if (t->job->warm) t->job->warm(t->job->what);
  pthread_barrier_wait(t->start);
  uint64_t c0, c1;
  long w0, w1;
  bench_thread_usage(&c0, &w0);
  uint64_t t0 = bench_now_ns();
  t->job->body(t->job->what);
  t->ns = bench_now_ns() - t0;
  bench_thread_usage(&c1, &w1);
  t->cpu_ns = c1 - c0;
  t->waits = w1 - w0;
  return NULL;
}

/* ns per operation (`ops` per thread) of the slowest of `threads` (1-4). */
static inline double bench_threads_once(int threads, const bench_job *job,
                                        long ops) {
  pthread_barrier_t b;
  pthread_barrier_init(&b, NULL, (unsigned)threads);
  pthread_t th[4];
  bench_thread t[4];
  for (int i = 0; i < threads; i++) {
    t[i] = (bench_thread){&b, job, 0, 0, 0};
    pthread_create(&th[i], NULL, bench_thread_main, &t[i]);
  }
  uint64_t worst = 0, worst_cpu = 0;
  bench_last_waits = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(th[i], NULL);
    if (t[i].ns > worst) worst = t[i].ns;
    if (t[i].cpu_ns > worst_cpu) worst_cpu = t[i].cpu_ns;
    bench_last_waits += t[i].waits;
  }
  bench_last_cpu_per_op = (double)worst_cpu / (double)ops;
  pthread_barrier_destroy(&b);
  return (double)worst / (double)ops;
}

static int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorts v). */
static inline double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof v[0], bench_cmp_double);
  return v[n / 2];
}

#ifdef ETCH_ETCH_H
/* ns per operation of `job` on `threads` threads, the median of `reps`
 * runs, each into a fresh in-process session made from `config` (NULL: no
 * session at all). Exits with the error when a session cannot be had. */
static inline double bench_session_median(const char *config, int threads,
                                          const bench_job *job, long ops,
                                          int reps) {
  double v[32];
  int n = reps < 32 ? reps : 32;
  for (int k = 0; k < n; k++) {
    etch_session *s = NULL;
    if (config) {
      etch_config *c;
      if (etch_config_new(&c) || etch_config_parse(c, config) ||
          etch_session_new(c, &s) || etch_session_start(s)) {
        fprintf(stderr, "bench: %s\n", etch_last_error());
        exit(1);
      }
      etch_config_free(c);
    }
    v[k] = bench_threads_once(threads, job, ops);
    if (s) etch_session_free(s);
  }
  return bench_median(v, n);
}
#endif

#endif /* ETCH_BENCH_THREADS_H */

/*
 * bench_sample.c - what CPU sampling costs the program it samples: two
 * threads run a fixed amount of work (a few nested calls, -O2 without
 * frame pointers), and the run's wall time and the process's CPU time are
 * compared without sampling, with etch's sampler (a session with
 * sample_hz) and under `perf record -g` at the same rates. Each row is the
 * run with the least CPU time of a few (the machine may be busy with other
 * work, which stretches the wall time but not the CPU time).
 *
 *   bench_sample [REPS]            every configuration, a table
 *   bench_sample run MODE [HZ]     one run (MODE none|etch|plain), a line
 *
 * "plain" is the work with no session at all, what `perf record` runs.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <etch/etch.h>

#define THREADS 2
#define WORK 400000000L /* iterations per thread: about a second */

uint64_t etch__sample_written(void); /* libetch's test hook */
uint64_t leaf(uint64_t x, long n);
uint64_t middle(uint64_t x, long n);
uint64_t outer(uint64_t x, long n);

__attribute__((noinline)) uint64_t leaf(uint64_t x, long n) {
  for (long i = 0; i < n; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}
__attribute__((noinline)) uint64_t middle(uint64_t x, long n) {
  return leaf(x, n) ^ 1;
}
__attribute__((noinline)) uint64_t outer(uint64_t x, long n) {
  for (long done = 0; done < n; done += 100000) x = middle(x, 100000);
  return x;
}

static void *work(void *arg) {
  uint64_t *x = arg;
  *x = outer(*x, WORK);
  return NULL;
}

static double now_ms(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* One run: "wall_ms cpu_ms samples bytes". */
static int run_one(const char *mode, unsigned hz) {
  etch_session *s = NULL;
  if (strcmp(mode, "plain") != 0) {
    etch_config *cfg;
    char text[128];
    snprintf(text, sizeof text, "buffer_kb=65536;compression=none;"
             "sample_hz=%u", strcmp(mode, "etch") == 0 ? hz : 0);
    if (etch_config_new(&cfg) || etch_config_parse(cfg, text) ||
        etch_session_new(cfg, &s) || etch_session_start(s)) {
      fprintf(stderr, "bench_sample: %s\n", etch_last_error());
      return 1;
    }
    etch_config_free(cfg);
  }
  double w0 = now_ms(CLOCK_MONOTONIC), c0 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
  pthread_t th[THREADS];
  uint64_t x[THREADS];
  for (int i = 0; i < THREADS; i++) {
    x[i] = (uint64_t)i + 1;
    pthread_create(&th[i], NULL, work, &x[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  double w1 = now_ms(CLOCK_MONOTONIC), c1 = now_ms(CLOCK_PROCESS_CPUTIME_ID);
  uint64_t samples = s ? etch__sample_written() : 0;
  size_t bytes = 0;
  if (s) {
    etch_session_stop(s);
    uint8_t *data;
    if (etch_session_read(s, &data, &bytes) == ETCH_OK) free(data);
    etch_session_free(s);
  }
  printf("%.1f %.1f %llu %zu %llu\n", w1 - w0, c1 - c0,
         (unsigned long long)samples, bytes,
         (unsigned long long)(x[0] ^ x[1]) & 0);
  return 0;
}

typedef struct best {
  double wall, cpu;
  unsigned long long samples, bytes;
} best;

static best run_best(const char *self, const char *prefix, const char *mode,
                     unsigned hz, int reps) {
  best b = {1e18, 1e18, 0, 0};
  for (int r = 0; r < reps; r++) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s%s run %s %u", prefix, self, mode, hz);
    FILE *f = popen(cmd, "r");
    double w, c;
    unsigned long long n, by, z;
    if (!f || fscanf(f, "%lf %lf %llu %llu %llu", &w, &c, &n, &by, &z) != 5) {
      fprintf(stderr, "bench_sample: %s failed\n", cmd);
      exit(1);
    }
    pclose(f);
    if (c < b.cpu) b = (best){w, c, n, by};
  }
  return b;
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "run"))
    return run_one(argv[2], argc > 3 ? (unsigned)atoi(argv[3]) : 0);
  int reps = argc > 1 ? atoi(argv[1]) : 3;
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 1;
  self[n] = 0;
  best base = run_best(self, "", "none", 0, reps);
  best plain = run_best(self, "", "plain", 0, reps);
  printf("%d threads, %ld iterations each, best of %d runs; cpu: the "
         "program's own (its threads, etch's sampler thread; not perf's "
         "process)\n", THREADS, WORK, reps);
  printf("%-22s %9s %9s %8s %8s %9s %8s %11s\n", "configuration", "wall ms",
         "cpu ms", "+wall %", "+cpu %", "samples", "B/sample",
         "B/cpu-sec");
  printf("%-22s %9.1f %9.1f %8s %8s %9s %8s %11s\n", "no sampling",
         base.wall, base.cpu, "-", "-", "-", "-", "-");
  const unsigned rates[] = {1000, 10000};
  for (int i = 0; i < 2; i++) {
    best e = run_best(self, "", "etch", rates[i], reps);
    char name[64];
    snprintf(name, sizeof name, "etch sample_hz=%u", rates[i]);
    double by = (double)(e.bytes - base.bytes);
    printf("%-22s %9.1f %9.1f %+8.1f %+8.1f %9llu %8.1f %11.0f\n", name,
           e.wall, e.cpu, 100.0 * (e.wall - base.wall) / base.wall,
           100.0 * (e.cpu - base.cpu) / base.cpu, e.samples,
           e.samples ? by / (double)e.samples : 0.0,
           by / (e.cpu / 1000.0));
    char prefix[128];
    snprintf(prefix, sizeof prefix,
             "perf record -q -g -F %u "
             "-o ${TMPDIR:-/tmp}/bench_sample.perf.data -- ",
             rates[i]);
    if (system("perf --version >/dev/null 2>&1") == 0) {
      best p = run_best(self, prefix, "plain", 0, reps);
      snprintf(name, sizeof name, "perf record -g -F %u", rates[i]);
      printf("%-22s %9.1f %9.1f %+8.1f %+8.1f %9s %8s %11s\n", name, p.wall,
             p.cpu, 100.0 * (p.wall - plain.wall) / plain.wall,
             100.0 * (p.cpu - plain.cpu) / plain.cpu, "-", "-", "-");
    }
  }
  if (system("rm -f ${TMPDIR:-/tmp}/bench_sample.perf.data") != 0) return 1;
  return 0;
}

/*
 * bench_flight.c - the flight recorder (ETCH_FLIGHT) against the ordinary
 * ring, in the same run:
 *
 *   bench_flight [N] [REPS] [DIR]     (default 2000000 pairs, 7 runs,
 *                                      /dev/shm)
 *
 * 1. ns per event of N slice begin/end pairs on one thread into an 8 MiB
 *    ring of anonymous memory and into the same ring in a flight file in
 *    DIR, the two alternated REPS times (medians): the hot path is the
 *    same code, the memory a shared file mapping instead.
 * 2. etch recover of a 64 MiB flight ring that wrapped (kept with
 *    flight_keep): seconds to turn it into a trace in memory and into a
 *    file as etch recover does (medians of REPS), against a floor:
 *    copying the file's bytes once.
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buffer/flight.h"

ETCH_CATEGORY_DEFINE(bench, "bench", "benchmark", "");

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return v[n / 2];
}

__attribute__((noreturn)) static void die(const char *what) {
  fprintf(stderr, "bench_flight: %s: %s\n", what, etch_last_error());
  exit(1);
}

static etch_session *start(const char *config) {
  etch_config *c;
  etch_session *s;
  if (etch_config_new(&c) || etch_config_parse(c, config) ||
      etch_session_new(c, &s) || etch_session_start(s))
    die(config);
  etch_config_free(c);
  return s;
}

/* ns per event of n begin/end pairs. */
static double pairs(long n) {
  double t0 = now_s();
  for (long i = 0; i < n; i++) {
    ETCH_SLICE_BEGIN(bench, "pair");
    ETCH_SLICE_END(bench);
  }
  return (now_s() - t0) * 1e9 / (double)(2 * n);
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  int reps = argc > 2 ? atoi(argv[2]) : 7;
  const char *dir = argc > 3 ? argv[3] : "/dev/shm";
  if (reps < 1 || reps > 99) reps = 7;
  char flight[512], cfg_ring[256], cfg_flight[1024];
  snprintf(flight, sizeof flight, "%s/bench_flight.%d.flight", dir, (int)getpid());
  snprintf(cfg_ring, sizeof cfg_ring, "categories=bench;buffer_kb=8192;fill=ring");
  snprintf(cfg_flight, sizeof cfg_flight, "%s;flight=%s", cfg_ring, flight);

  double ring[99], fl[99];
  for (int r = 0; r < reps; r++) {
    for (int k = 0; k < 2; k++) {
      etch_session *s = start(k ? cfg_flight : cfg_ring);
      pairs(n / 4); /* the ring's pages mapped, the writer set up */
      double v = pairs(n);
      (k ? fl : ring)[r] = v;
      etch_session_free(s);
    }
  }
  double mr = median(ring, reps), mf = median(fl, reps);
  printf("== 1. hot path: ns per event (begin/end pairs, 1 thread, 8 MiB ring, "
         "median of %d)\n\n", reps);
  printf("%-34s %10s\n", "ring", "ns/event");
  printf("%-34s %10.2f\n", "anonymous memory (ordinary)", mr);
  printf("%-34s %10.2f\n", "flight file", mf);
  printf("%-34s %10.3f\n\n", "flight / ordinary", mf / mr);

  /* 2. recover: a 64 MiB ring that wrapped, kept. */
  char cfg_big[1024];
  snprintf(cfg_big, sizeof cfg_big,
           "categories=bench;buffer_kb=65536;fill=ring;flight=%s;flight_keep=1",
           flight);
  etch_session *s = start(cfg_big);
  etch_session_stats st;
  do {
    pairs(200000);
    if (etch_session_get_stats(s, &st)) die("stats");
  } while (st.chunks_overwritten == 0);
  etch_session_free(s);
  FILE *f = fopen(flight, "rb");
  if (!f) die("flight file");
  fseek(f, 0, SEEK_END);
  size_t len = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *file = (uint8_t *)malloc(len), *copy = (uint8_t *)malloc(len);
  if (!file || !copy || fread(file, 1, len, f) != len) die("read");
  fclose(f);
  unlink(flight);
  double rec[99], rec_fd[99], floor_s[99];
  int null_fd = open("/dev/null", O_WRONLY);
  size_t out_len = 0;
  uint64_t events = 0;
  for (int r = 0; r < reps; r++) {
    double t0 = now_s();
    memcpy(copy, file, len);
    floor_s[r] = now_s() - t0;
    etch_flight_report rep;
    uint8_t *out;
    t0 = now_s();
    if (etch__flight_recover(file, len, false, -1, &out, &out_len, &rep))
      die("recover");
    rec[r] = now_s() - t0;
    events = 0;
    for (size_t i = 0; i < rep.nthreads; i++) events += rep.threads[i].events;
    etch__flight_report_free(&rep);
    free(out);
    size_t fd_len;
    t0 = now_s();
    if (etch__flight_recover(file, len, false, null_fd, &out, &fd_len, NULL))
      die("recover");
    rec_fd[r] = now_s() - t0;
  }
  printf("== 2. etch recover of a %zu MiB flight ring (median of %d)\n\n",
         len >> 20, reps);
  printf("%-34s %10s %12s\n", "", "seconds", "MB/s");
  double mrec = median(rec, reps), mfl = median(floor_s, reps);
  printf("%-34s %10.3f %12.0f   (%llu events, a %zu-byte trace)\n",
         "recover into a trace", mrec, (double)len / mrec / 1e6,
         (unsigned long long)events, out_len);
  double mfd = median(rec_fd, reps);
  printf("%-34s %10.3f %12.0f   (etch recover's way: 1 MiB at a time)\n",
         "recover into a file (/dev/null)", mfd, (double)len / mfd / 1e6);
  printf("%-34s %10.3f %12.0f\n", "floor: memcpy of the file", mfl,
         (double)len / mfl / 1e6);
  free(file);
  free(copy);
  return 0;
}

/*
 * bench_intercept.c - what an intercepted event costs, in one run:
 *
 *   bench_intercept [EVENTS_PER_THREAD] [REPS]
 *
 * Times an instant with one int arg and an empty scope (a begin and an
 * end) on 1 and 2 threads into
 *
 *   in-process   a normal session (the fast path, the floor etch has)
 *   no-op        a custom interceptor whose packet callback does nothing
 *                (the cost of handing over every packet)
 *   console      the console interceptor writing to /dev/null
 *
 * and, as the console's physical floor, one write() of a 64-byte line to
 * /dev/null (what the console does per event at least). The median of
 * REPS runs, ns per event (per begin or end for the scope), the slowest
 * thread's.
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <etch/interceptor.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_threads.h"

ETCH_CATEGORY_DEFINE(bench, "bench", "interceptor benchmark", "");

static long n_events = 200000;
static int reps = 5;
static int null_fd = -1;

enum { W_INSTANT, W_SCOPE, W_WRITE };

static void warm(int what) {
  (void)what;
  ETCH_INSTANT(bench, "warm", ETCH_ARG_INT("i", 0));
  ETCH_SCOPE(bench, "warm-scope");
}

static void body(int what) {
  static const char line[64] =
      "    0.001234 app/worker-1            * tick [bench] i=12345678\n";
  switch (what) {
    case W_INSTANT:
      for (long i = 0; i < n_events; i++)
        ETCH_INSTANT(bench, "tick", ETCH_ARG_INT("i", i));
      break;
    case W_SCOPE:
      for (long i = 0; i < n_events / 2; i++) {
        ETCH_SCOPE(bench, "scope");
      }
      break;
    case W_WRITE:
      for (long i = 0; i < n_events; i++)
        if (write(null_fd, line, sizeof line) != sizeof line) abort();
      break;
  }
}

/* The median over reps, each in a fresh session made from `cfg` (NULL: no
 * session, for the write floor). */
static double timed(const char *cfg, int threads, int what) {
  double v[32];
  int n = reps < 32 ? reps : 32;
  for (int k = 0; k < n; k++) {
    etch_session *s = NULL;
    if (cfg) {
      etch_config *c;
      if (etch_config_new(&c) || etch_config_parse(c, cfg) ||
          etch_session_new(c, &s) || etch_session_start(s)) {
        fprintf(stderr, "bench_intercept: %s: %s\n", cfg, etch_last_error());
        exit(1);
      }
      etch_config_free(c);
    }
    const bench_job job = {warm, body, what};
    v[k] = bench_threads_once(threads, &job, n_events);
    if (s) etch_session_free(s);
  }
  return bench_median(v, n);
}

static int noop_setup(void *g, const etch_interceptor_config *c, void **in) {
  (void)g, (void)c, (void)in;
  return ETCH_OK;
}
static void noop_packet(const etch_intercepted *p) { (void)p; }

int main(int argc, char **argv) {
  if (argc > 1) n_events = atol(argv[1]);
  if (argc > 2) reps = atoi(argv[2]);
  if (n_events < 1000 || reps < 1) {
    fprintf(stderr, "usage: bench_intercept [EVENTS>=1000] [REPS>=1]\n");
    return 2;
  }
  null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  etch_interceptor noop = {.name = "noop", .setup = noop_setup,
                           .packet = noop_packet};
  if (etch_interceptor_register(&noop) != ETCH_OK) return 1;
  char console[96];
  snprintf(console, sizeof console,
           "interceptor=console;interceptor.fd=%d;interceptor.color=never",
           null_fd);
  static const struct {
    const char *name, *cfg;
  } modes[] = {
      {"in-process (buffer)", "buffer_kb=262144;fill=ring"},
      {"no-op interceptor", "interceptor=noop"},
      {"console -> /dev/null", NULL},
  };
  printf("%ld events per thread, median of %d runs, ns per event\n\n",
         n_events, reps);
  printf("%-28s %12s %12s %12s %12s\n", "", "instant+arg", "instant+arg",
         "begin/end", "begin/end");
  printf("%-28s %12s %12s %12s %12s\n", "", "1 thread", "2 threads",
         "1 thread", "2 threads");
  double base[4] = {0};
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    const char *cfg = modes[m].cfg ? modes[m].cfg : console;
    double v[4] = {timed(cfg, 1, W_INSTANT), timed(cfg, 2, W_INSTANT),
                   timed(cfg, 1, W_SCOPE), timed(cfg, 2, W_SCOPE)};
    printf("%-28s %12.1f %12.1f %12.1f %12.1f\n", modes[m].name, v[0], v[1],
           v[2], v[3]);
    if (m == 0) memcpy(base, v, sizeof base);
    else
      printf("%-28s %11.1fx %11.1fx %11.1fx %11.1fx\n", "  vs in-process",
             v[0] / base[0], v[1] / base[1], v[2] / base[2], v[3] / base[3]);
  }
  double w1 = timed(NULL, 1, W_WRITE), w2 = timed(NULL, 2, W_WRITE);
  printf("%-28s %12.1f %12.1f %12s %12s\n", "floor: write(64 B) to /dev/null",
         w1, w2, "", "");
  return 0;
}

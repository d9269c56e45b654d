/*
 * clock.c - TSC calibration against CLOCK_BOOTTIME.
 *
 * At first use we spin ~2 ms to get a multiplier; afterwards every call to
 * etch__clock_anchor_now() re-derives it from the span between the very
 * first anchor and now, so its error shrinks as the process lives on (50 ns
 * of read jitter over 1 s is 5e-8). Anchors are re-taken at every writer
 * reset, which bounds the drift any event can accumulate.
 */
#define _GNU_SOURCE
#include "base/clock.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

int etch__clock_tsc;

uint64_t etch__ticks_slow(void) { return etch__boottime_ns(); }

static pthread_once_t clock_once = PTHREAD_ONCE_INIT;
static etch_clock_anchor clock_origin;
static uint64_t clock_mult; /* atomically updated */

/* Reads (ticks, boottime) pairs and keeps the one with the tightest window. */
static void read_pair(uint64_t *ticks, uint64_t *ns) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 5; i++) {
    uint64_t t0 = etch__ticks();
    uint64_t n = etch__boottime_ns();
    uint64_t t1 = etch__ticks();
    if (t1 - t0 < best) {
      best = t1 - t0;
      *ticks = t0 + (t1 - t0) / 2;
      *ns = n;
    }
  }
}

static int cpu_has_invariant_tsc(void) {
#if ETCH_HAVE_TSC
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return 0;
  char line[4096];
  int ok = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "flags", 5) == 0) {
      ok = strstr(line, " constant_tsc") && strstr(line, " nonstop_tsc");
      break;
    }
  }
  fclose(f);
  return ok;
#else
  return 0;
#endif
}

static uint64_t mult_between(uint64_t t0, uint64_t n0, uint64_t t1,
                             uint64_t n1) {
  if (t1 <= t0 || n1 <= n0) return 1ull << 32;
  return (uint64_t)(((unsigned __int128)(n1 - n0) << 32) / (t1 - t0));
}

static void clock_calibrate(void) {
  const char *force = getenv("ETCH_CLOCK");
  etch__clock_tsc = cpu_has_invariant_tsc();
  if (force && strcmp(force, "boottime") == 0) etch__clock_tsc = 0;
  if (!etch__clock_tsc) {
    clock_mult = 1ull << 32;
    clock_origin.ticks = clock_origin.ns = etch__boottime_ns();
    clock_origin.mult = clock_mult;
    return;
  }
  uint64_t t0, n0, t1, n1;
  read_pair(&t0, &n0);
  do {
    read_pair(&t1, &n1);
  } while (n1 - n0 < 2000000);
  clock_origin.ticks = t0;
  clock_origin.ns = n0;
  clock_mult = mult_between(t0, n0, t1, n1);
  clock_origin.mult = clock_mult;
}

void etch__clock_init(void) { pthread_once(&clock_once, clock_calibrate); }

void etch__clock_anchor_now(etch_clock_anchor *a) {
  etch__clock_init();
  read_pair(&a->ticks, &a->ns);
  if (!etch__clock_tsc) {
    a->mult = 1ull << 32;
    return;
  }
  uint64_t mult = __atomic_load_n(&clock_mult, __ATOMIC_RELAXED);
  /* Refine once the baseline is long enough to beat the first estimate. */
  if (a->ns - clock_origin.ns > 50000000ull) {
    mult = mult_between(clock_origin.ticks, clock_origin.ns, a->ticks, a->ns);
    __atomic_store_n(&clock_mult, mult, __ATOMIC_RELAXED);
  }
  a->mult = mult;
}

uint64_t etch__clock_ticks_to_boottime(uint64_t ticks) {
  etch_clock_anchor a;
  etch__clock_anchor_now(&a);
  if (ticks >= a.ticks) return etch__ticks_to_ns(&a, ticks);
  return a.ns - (uint64_t)(((unsigned __int128)(a.ticks - ticks) * a.mult) >> 32);
}

/*
 * clock.c - TSC calibration against CLOCK_BOOTTIME.
 *
 * At first use we spin ~2 ms to get a multiplier, after checking that the
 * CPU and the kernel trust the TSC (else ticks are BOOTTIME ns). Every later
 * anchor re-derives the multiplier from the span between the very first
 * anchor and itself, so its error shrinks as the process lives on (50 ns of
 * read jitter over 1 s is 5e-8). An anchor is used only for as long as the
 * multiplier's error keeps its conversions within a few tens of ns of
 * BOOTTIME (etch__clock_anchor_span): writers re-anchor after that.
 *
 * Anchors also watch the TSC while the process runs: at most once a
 * millisecond an anchor compares the TSC's rate since the previous check
 * with the calibrated one. A disagreement is measured again, twice, over
 * fresh spans of 2 ms: a TSC whose rate still disagrees both times (a VM moved to a host with
 * another TSC rate, a frequency change) is given up for clock_gettime for
 * the rest of the process; one whose rate agrees only jumped (a suspend, a
 * TSC written by the hypervisor), and the long baseline starts afresh.
 */
#define _GNU_SOURCE
#include "base/clock.h"
#include "base/envvars.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int etch__clock_tsc;
const char *etch__clock_root = "";
void (*etch__clock_check_hook)(uint64_t *ticks, uint64_t *ns);

uint64_t etch__ticks_slow(void) {
  return etch__boottime_ns() | ETCH_TICKS_NS_TAG;
}

static pthread_once_t clock_once = PTHREAD_ONCE_INIT;
/* The long baseline's start, the multiplier, the last run-time check and
 * the note: read and written under clock_lock after calibration. */
static pthread_mutex_t clock_lock = PTHREAD_MUTEX_INITIALIZER;
static etch_clock_anchor clock_origin;
static uint64_t clock_mult;
static uint64_t check_ticks, check_ns;
static etch_clock_anchor last_tsc; /* the TSC's last view, once given up */
static const char *clock_note; /* why the TSC is not used, or NULL */
static uint64_t clock_note_ns; /* since when */
static char clock_note_buf[160];

/* Reads (ticks, boottime) pairs and keeps the one with the tightest window.
 * Both outputs are written on every path (the first pair always fits). */
static void read_pair(uint64_t *ticks, uint64_t *ns) {
  uint64_t best = UINT64_MAX, best_ticks = 0, best_ns = 0;
  for (int i = 0; i < 5; i++) {
    uint64_t t0 = etch__ticks_raw();
    uint64_t n = etch__boottime_ns();
    uint64_t t1 = etch__ticks_raw();
    if (i == 0 || t1 - t0 < best) {
      best = t1 - t0;
      best_ticks = t0 + (t1 - t0) / 2;
      best_ns = n;
    }
  }
  *ticks = best_ticks;
  *ns = best_ns;
}

/* Reads a small file under etch__clock_root into buf (NUL-terminated);
 * false when it cannot be read. */
static bool read_text(const char *path, char *buf, size_t cap) {
  char full[512];
  snprintf(full, sizeof full, "%s%s", etch__clock_root, path);
  FILE *f = fopen(full, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = 0;
  fclose(f);
  return true;
}

/* Whether `word` is one of the blank-separated words of `list`. */
static bool has_word(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *p = list; (p = strstr(p, word)) != NULL; p += n)
    if ((p == list || p[-1] == ' ' || p[-1] == '\t') &&
        (p[n] == 0 || p[n] == ' ' || p[n] == '\n' || p[n] == '\t'))
      return true;
  return false;
}

/* NULL when the TSC can be trusted, else why not. */
static const char *tsc_distrust(void) {
#if ETCH_HAVE_TSC
  static char cpuinfo[1 << 16];
  if (!read_text("/proc/cpuinfo", cpuinfo, sizeof cpuinfo))
    return "the CPU's flags cannot be read (/proc/cpuinfo)";
  char *flags = strstr(cpuinfo, "\nflags");
  if (!flags) flags = strncmp(cpuinfo, "flags", 5) == 0 ? cpuinfo : NULL;
  if (!flags) return "the CPU's flags cannot be read (/proc/cpuinfo)";
  char *eol = strchr(flags + 1, '\n');
  if (eol) *eol = 0;
  if (!has_word(flags, "constant_tsc") || !has_word(flags, "nonstop_tsc"))
    return "the CPU has no invariant TSC (constant_tsc, nonstop_tsc)";
  /* The kernel takes the TSC off its clock sources when it finds it
   * unstable (unsynchronized across CPUs, stopped in idle, rate changes). */
  char avail[512];
  if (read_text("/sys/devices/system/clocksource/clocksource0/"
                "available_clocksource",
                avail, sizeof avail) &&
      !has_word(avail, "tsc"))
    return "the kernel marked the TSC unstable (not among its clock sources)";
  return NULL;
#else
  return "no TSC on this architecture";
#endif
}

static uint64_t mult_between(uint64_t t0, uint64_t n0, uint64_t t1,
                             uint64_t n1) {
  if (t1 <= t0 || n1 <= n0) return 1ull << 32;
  return (uint64_t)(((unsigned __int128)(n1 - n0) << 32) / (t1 - t0));
}

/* Multipliers over two consecutive spans of ~1 ms; the TSC's rate must
 * agree with BOOTTIME's to within 2e-4 (a changing rate, or a TSC that
 * does not count, fails). */
static bool calibrate_tsc(void) {
  uint64_t t0, n0, t1, n1, t2, n2;
  read_pair(&t0, &n0);
  do {
    read_pair(&t1, &n1);
  } while (n1 - n0 < 1000000);
  do {
    read_pair(&t2, &n2);
  } while (n2 - n1 < 1000000);
  uint64_t m1 = mult_between(t0, n0, t1, n1);
  uint64_t m2 = mult_between(t1, n1, t2, n2);
  if (t1 <= t0 || t2 <= t1) return false;
  uint64_t d = m1 > m2 ? m1 - m2 : m2 - m1;
  if (d > m1 / 5000) return false;
  clock_origin.ticks = t0;
  clock_origin.ns = n0;
  clock_mult = mult_between(t0, n0, t2, n2);
  clock_origin.mult = clock_mult;
  check_ticks = t2;
  check_ns = n2;
  return true;
}

static void clock_calibrate(void) {
  /* Named in base/envvars.c's table; base reads it by name. */
  const char *force = etch__env(ETCH_ENV_CLOCK);
  bool boottime = false;
  if (force && strcmp(force, "boottime") == 0) {
    boottime = true;
  } else if (force && *force && strcmp(force, "auto") != 0) {
    fprintf(stderr,
            "etch: ETCH_CLOCK=%s is not a clock etch knows (auto or "
            "boottime); using auto\n",
            force);
  }
  const char *why = boottime ? NULL : tsc_distrust();
  bool tsc = !boottime && !why;
  if (tsc && !calibrate_tsc()) {
    tsc = false;
    why = "the TSC's rate did not match BOOTTIME's during calibration";
  }
#if ETCH_HAVE_TSC
  clock_note = why;
#endif
  if (!tsc) {
    clock_mult = 1ull << 32;
    clock_origin.ns = etch__boottime_ns();
    clock_origin.ticks = clock_origin.ns | ETCH_TICKS_NS_TAG;
    clock_origin.mult = clock_mult;
  }
  clock_note_ns = etch__boottime_ns();
  /* Published last: the hot path reads it without taking the once. */
  __atomic_store_n(&etch__clock_tsc, tsc ? 1 : 0, __ATOMIC_RELEASE);
}

const char *etch__clock_fallback_note(uint64_t *since_ns) {
  etch__clock_init();
  pthread_mutex_lock(&clock_lock);
  const char *note = clock_note;
  if (since_ns) *since_ns = clock_note_ns;
  pthread_mutex_unlock(&clock_lock);
  return note;
}

static void check_pair(uint64_t *ticks, uint64_t *ns) {
  void (*hook)(uint64_t *, uint64_t *) =
      __atomic_load_n(&etch__clock_check_hook, __ATOMIC_ACQUIRE);
  if (hook)
    hook(ticks, ns);
  else
    read_pair(ticks, ns);
}

/* The run-time check (see the top of the file), under clock_lock with a
 * TSC in use; false when the TSC was given up. */
static bool tsc_check(void) {
  uint64_t t, n;
  check_pair(&t, &n);
  if (n < check_ns + 1000000ull) return true;
  uint64_t want = clock_mult;
  uint64_t got = mult_between(check_ticks, check_ns, t, n);
  uint64_t d = got > want ? got - want : want - got;
  bool forward = t > check_ticks;
  check_ticks = t;
  check_ns = n;
  /* 2e-3: four times what NTP may slew BOOTTIME's rate by. */
  if (forward && d <= want / 500) return true;
  /* Measured again, twice over 2 ms: a reading delayed by preemption
   * (microseconds on a loaded machine) must not pass for a new rate. The
   * TSC is given up only when both measurements disagree. */
  uint64_t fresh = want;
  for (int attempt = 0; attempt < 2; attempt++) {
    uint64_t t0, n0, t1, n1;
    check_pair(&t0, &n0);
    do {
      check_pair(&t1, &n1);
    } while (n1 - n0 < 2000000ull);
    fresh = mult_between(t0, n0, t1, n1);
    d = fresh > want ? fresh - want : want - fresh;
    if (t1 > t0 && d <= want / 500) {
      /* Same rate, new offset: the long baseline restarts here. */
      read_pair(&clock_origin.ticks, &clock_origin.ns);
      check_ticks = t1;
      check_ns = n1;
      return true;
    }
  }
  snprintf(clock_note_buf, sizeof clock_note_buf,
           "the TSC's rate changed while the process ran (%.6f ns per tick "
           "calibrated, %.6f measured)",
           (double)want / 4294967296.0, (double)fresh / 4294967296.0);
  clock_note = clock_note_buf;
  clock_note_ns = etch__boottime_ns();
  /* Events read the TSC until they see it given up: their readings are
   * converted through this last view. */
  read_pair(&last_tsc.ticks, &last_tsc.ns);
  last_tsc.mult = want;
  __atomic_store_n(&etch__clock_tsc, 0, __ATOMIC_RELEASE);
  return false;
}

void etch__clock_init(void) { pthread_once(&clock_once, clock_calibrate); }

static void anchor_ns(etch_clock_anchor *a) {
  a->ns = etch__boottime_ns();
  a->ticks = a->ns | ETCH_TICKS_NS_TAG;
  a->mult = 1ull << 32;
}

void etch__clock_anchor_now(etch_clock_anchor *a) {
  etch__clock_init();
  if (!etch__clock_is_tsc()) {
    anchor_ns(a);
    return;
  }
  pthread_mutex_lock(&clock_lock);
  if (!etch__clock_is_tsc() || !tsc_check()) {
    pthread_mutex_unlock(&clock_lock);
    anchor_ns(a);
    return;
  }
  read_pair(&a->ticks, &a->ns);
  /* The longest baseline there is: from the first anchor to this one. */
  if (a->ns > clock_origin.ns && a->ticks > clock_origin.ticks &&
      a->ns - clock_origin.ns > 2000000ull)
    clock_mult =
        mult_between(clock_origin.ticks, clock_origin.ns, a->ticks, a->ns);
  a->mult = clock_mult;
  pthread_mutex_unlock(&clock_lock);
}

uint64_t etch__clock_anchor_span(const etch_clock_anchor *a) {
  if (!etch__clock_is_tsc()) return UINT64_MAX / 4; /* exact: no limit */
  /* The multiplier's error is about 40 ns over its baseline (two readings'
   * jitter), so conversions up to one baseline past the anchor stay within
   * ~40 ns of BOOTTIME; 10 ms at most, which also bounds what a change in
   * the kernel's (NTP-adjusted) rate can add. */
  pthread_mutex_lock(&clock_lock);
  uint64_t origin = clock_origin.ns;
  pthread_mutex_unlock(&clock_lock);
  uint64_t base = a->ns > origin ? a->ns - origin : 0;
  if (base < 1000000ull) base = 1000000ull;
  return base < ETCH_ANCHOR_SPAN_MAX ? base : ETCH_ANCHOR_SPAN_MAX;
}

static uint64_t convert(const etch_clock_anchor *a, uint64_t ticks) {
  if (ticks >= a->ticks) return etch__ticks_to_ns(a, ticks);
  uint64_t back = (uint64_t)(((unsigned __int128)(a->ticks - ticks) * a->mult) >> 32);
  return back < a->ns ? a->ns - back : 0;
}

uint64_t etch__clock_ticks_to_boottime(uint64_t ticks) {
  if (ticks & ETCH_TICKS_NS_TAG) return ticks & ~ETCH_TICKS_NS_TAG;
  etch_clock_anchor a;
  etch__clock_anchor_now(&a);
  if (a.ticks & ETCH_TICKS_NS_TAG) { /* the TSC was given up */
    pthread_mutex_lock(&clock_lock);
    a = last_tsc;
    pthread_mutex_unlock(&clock_lock);
    if (!a.mult) return ticks; /* never had one: cannot happen */
  }
  return convert(&a, ticks);
}

/*
 * clock.h - the event clock.
 *
 * Events are stamped with a raw tick counter read in a single instruction
 * (rdtsc on x86-64 with an invariant TSC, else CLOCK_BOOTTIME in ns) and
 * converted to nanoseconds with a per-writer anchor:
 *
 *   ns = anchor_ns + ((ticks - anchor_ticks) * mult) >> 32
 *
 * The anchor pairs a tick reading with a CLOCK_BOOTTIME reading taken at the
 * same moment; writers refresh it at every incremental-state reset and write
 * it into the trace as a ClockSnapshot, so readers map the trace back onto
 * BOOTTIME exactly at each snapshot. `mult` is calibrated against BOOTTIME
 * and refined over the life of the process (docs/format.md, "Time").
 */
#ifndef ETCH_BASE_CLOCK_H
#define ETCH_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "base/base.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define ETCH_HAVE_TSC 1
#else
#define ETCH_HAVE_TSC 0
#endif

/* True when ticks come from the TSC; false when they are BOOTTIME ns (also
 * before the clock is calibrated). Read it with etch__clock_is_tsc(). */
extern ETCH_HIDDEN int etch__clock_tsc;
/* Prefix of the /proc and /sys files the calibration reads ("" but in
 * tests, which point it at made-up ones before the first calibration). */
extern ETCH_HIDDEN const char *etch__clock_root;

ETCH_INLINE int etch__clock_is_tsc(void) {
  return __atomic_load_n(&etch__clock_tsc, __ATOMIC_RELAXED);
}

/* How long an anchor may be used at most (ns), whatever its baseline. */
#define ETCH_ANCHOR_SPAN_MAX 10000000ull

/* A clock_gettime clock in ns: every part reads clocks through these. */
static inline uint64_t etch__clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t etch__boottime_ns(void) {
  return etch__clock_ns(CLOCK_BOOTTIME);
}

static inline uint64_t etch__monotonic_ns(void) {
  return etch__clock_ns(CLOCK_MONOTONIC);
}

/* Ticks read from clock_gettime carry this bit on top of BOOTTIME ns, so
 * that a reading says which clock it came from: once the TSC is given up
 * while the process runs, a writer still anchored on it converts the new
 * readings exactly instead of taking them for TSC counts (a TSC reaches
 * 2^63 only after decades). */
#define ETCH_TICKS_NS_TAG (1ull << 63)

/* The fallback when there is no invariant TSC (out of line: keeps the
 * callers' hot path free of the clock_gettime call frame): BOOTTIME ns
 * with ETCH_TICKS_NS_TAG. */
uint64_t etch__ticks_slow(void);

ETCH_INLINE uint64_t etch__ticks(void) {
#if ETCH_HAVE_TSC
  if (ETCH_LIKELY(etch__clock_is_tsc())) return __rdtsc();
#endif
  return etch__ticks_slow();
}

/* The TSC itself, for calibration (0 without one). */
ETCH_INLINE uint64_t etch__ticks_raw(void) {
#if ETCH_HAVE_TSC
  return __rdtsc();
#else
  return 0;
#endif
}

/* A tick reading paired with the BOOTTIME ns of the same moment. */
typedef struct etch_clock_anchor {
  uint64_t ticks;
  uint64_t ns;
  uint64_t mult; /* ns per tick, fixed point 32.32 */
} etch_clock_anchor;

/* Ticks to BOOTTIME ns without an anchor (slow; for out-of-line users): a
 * clock_gettime reading is its own time, a TSC reading is converted through
 * a fresh view (or, once the TSC was given up, through the last one). */
uint64_t etch__clock_ticks_to_boottime(uint64_t ticks);

ETCH_INLINE uint64_t etch__ticks_to_ns(const etch_clock_anchor *a,
                                       uint64_t ticks) {
  /* A reading from the other clock than the anchor's (the TSC was given
   * up between the two): converted on its own. */
  if (ETCH_UNLIKELY((ticks ^ a->ticks) & ETCH_TICKS_NS_TAG))
    return etch__clock_ticks_to_boottime(ticks);
  /* Ticks read on another core can trail the anchor by a few cycles. */
  if (ETCH_UNLIKELY(ticks < a->ticks)) return a->ns;
  return a->ns +
         (uint64_t)(((unsigned __int128)(ticks - a->ticks) * a->mult) >> 32);
}

/* Calibrates the clock once per process; idempotent and thread-safe. */
void etch__clock_init(void);
/* Takes a fresh anchor with the best multiplier known now. */
void etch__clock_anchor_now(etch_clock_anchor *a);
/* How long (ns past a->ns) conversions through anchor `a` stay within a
 * few tens of ns of BOOTTIME; writers take a new anchor after that. */
uint64_t etch__clock_anchor_span(const etch_clock_anchor *a);
/* Why ticks are BOOTTIME ns on a CPU that has a TSC, or NULL (the TSC is
 * used, there is none, or ETCH_CLOCK=boottime asked for it); *since_ns
 * (if not NULL) gets the BOOTTIME ns when etch stopped using the TSC. */
const char *etch__clock_fallback_note(uint64_t *since_ns);
/* Test hook: when set, the run-time check of the TSC's rate reads its
 * (ticks, BOOTTIME) pairs through it instead of the clocks. */
extern ETCH_HIDDEN void (*etch__clock_check_hook)(uint64_t *ticks,
                                                  uint64_t *ns);

#endif /* ETCH_BASE_CLOCK_H */

/*
 * insights.c - declared counters, bookmarks and frames (etch/insights.h).
 *
 * They are written through the general emitter with explicit timestamps:
 * what matters here is order, not the last nanoseconds. A counter's change
 * and its time are taken together under the counter's lock, and each time
 * is later than the previous one, so however many threads change a counter
 * at once, its values in the trace are the running totals in the order the
 * program made them (per-writer clock anchors could otherwise swap two
 * changes a few nanoseconds apart). Frames are ordered the same way by one
 * process-wide lock.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sdk/core/sdk.h"

ETCH_CATEGORY_DEFINE(etch_counters, "counters",
                     "declared counters (ETCH_COUNTER_DEFINE_*)", "");
ETCH_CATEGORY_DEFINE(etch_bookmarks, "bookmarks", "ETCH_BOOKMARK", "");
ETCH_CATEGORY_DEFINE(etch_frames, "frames", "ETCH_FRAME_*", "");

static uint64_t ordered_now(uint64_t *last) {
  return etch__ordered_ts(last, etch_now());
}

/* ---- counters ------------------------------------------------------------ */

static double as_double(int64_t bits) {
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

static int64_t as_bits(double d) {
  int64_t b;
  memcpy(&b, &d, sizeof b);
  return b;
}

/* Makes the counter's track, with its unit, before its site would make one
 * without (the site finds this one by name). Counter lock held. */
static void counter_track(etch_counter *c) {
  if (__atomic_load_n(&c->site.id, __ATOMIC_ACQUIRE)) return;
  etch_counter_unit unit = c->kind == ETCH_COUNTER_KIND_MEMORY
                               ? ETCH_UNIT_SIZE_BYTES
                               : ETCH_UNIT_NONE;
  etch_counter_track_new(c->name ? c->name : "", unit, c->unit_name, NULL);
}

static void record(etch_counter *c, uint32_t mask, int64_t bits) {
  counter_track(c);
  etch_extra xs[2];
  xs[0] = c->kind == ETCH_COUNTER_KIND_FLOAT
              ? etch__x_counter_double(as_double(bits))
              : etch__x_counter_int(bits);
  xs[1] = etch_x_timestamp(ordered_now(&c->last_ts));
  etch__emit(&c->site, mask, xs, 2);
}

/* Applies `op` (set or add, int or double) and records the result. */
static void change(etch_counter *c, bool add, int64_t n, double d) {
  if (!c) return;
  bool is_float = c->kind == ETCH_COUNTER_KIND_FLOAT;
  uint32_t mask =
      __atomic_load_n(&etch_cat_etch_counters.enabled, __ATOMIC_RELAXED);
  if (mask) etch__spin_lock(&c->lock);
  int64_t now;
  if (!is_float && add) {
    now = __atomic_add_fetch(&c->value, n, __ATOMIC_RELAXED);
  } else if (!is_float) {
    now = n;
    __atomic_store_n(&c->value, n, __ATOMIC_RELAXED);
  } else {
    int64_t old = __atomic_load_n(&c->value, __ATOMIC_RELAXED);
    do {
      now = as_bits(add ? as_double(old) + d : d);
    } while (!__atomic_compare_exchange_n(&c->value, &old, now, true,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  }
  if (mask) {
    record(c, mask, now);
    etch__spin_unlock(&c->lock);
  }
}

void etch_counter_set(etch_counter *c, int64_t v) {
  change(c, false, v, (double)v);
}

void etch_counter_add(etch_counter *c, int64_t n) {
  change(c, true, n, (double)n);
}

void etch_counter_set_float(etch_counter *c, double v) {
  change(c, false, (int64_t)v, v);
}

void etch_counter_add_float(etch_counter *c, double n) {
  change(c, true, (int64_t)n, n);
}

int64_t etch_counter_get(const etch_counter *c) {
  if (!c) return 0;
  int64_t v = __atomic_load_n(&c->value, __ATOMIC_RELAXED);
  return c->kind == ETCH_COUNTER_KIND_FLOAT ? (int64_t)as_double(v) : v;
}

double etch_counter_get_float(const etch_counter *c) {
  if (!c) return 0;
  int64_t v = __atomic_load_n(&c->value, __ATOMIC_RELAXED);
  return c->kind == ETCH_COUNTER_KIND_FLOAT ? as_double(v) : (double)v;
}

/* ---- bookmarks ----------------------------------------------------------- */

static const etch_track *named_track(const etch_track **slot,
                                     const char *name) {
  const etch_track *t = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (!t) {
    t = etch_track_new(name, 0, NULL); /* the same track for every caller */
    __atomic_store_n(slot, t, __ATOMIC_RELEASE);
  }
  return t;
}

static const etch_track *bookmarks_track;

void etch_bookmark(const char *name) {
  uint32_t mask =
      __atomic_load_n(&etch_cat_etch_bookmarks.enabled, __ATOMIC_RELAXED);
  if (!mask) return;
  const etch_track *t = named_track(&bookmarks_track, "Bookmarks");
  if (!t) return;
  etch_extra x = etch_x_track(t);
  etch__emit_dyn(&etch_cat_etch_bookmarks, mask, ETCH_TYPE_INSTANT,
                 name ? name : "", &x, 1);
}

void etch_bookmarkf(const char *fmt, ...) {
  if (!__atomic_load_n(&etch_cat_etch_bookmarks.enabled, __ATOMIC_RELAXED))
    return;
  char name[256] = "";
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
  }
  etch_bookmark(name);
}

/* ---- frames -------------------------------------------------------------- */

static struct {
  uint32_t lock;
  bool open;
  uint64_t index; /* of the last frame begun */
  uint64_t last_ts;
  const etch_track *track;
} frames;

static etch_site frame_site =
    ETCH__SITE_INIT(etch_cat_etch_frames, "Frame", ETCH_TYPE_SLICE_BEGIN);

/* Frame lock held. */
static void frame_end_at(uint32_t mask, uint64_t ts) {
  if (!frames.open) return;
  frames.open = false;
  const etch_track *t = named_track(&frames.track, "Frames");
  if (!mask || !t) return;
  etch_extra xs[2] = {etch_x_track(t), etch_x_timestamp(ts)};
  etch__emit_end_x(&etch_cat_etch_frames, mask, xs, 2);
}

static void frame_begin_at(uint32_t mask, uint64_t ts) {
  frames.index++;
  frames.open = true;
  const etch_track *t = named_track(&frames.track, "Frames");
  if (!mask || !t) return;
  etch_extra xs[3] = {etch_arg_uint("index", frames.index), etch_x_track(t),
                      etch_x_timestamp(ts)};
  etch__emit(&frame_site, mask, xs, 3);
}

/* at: the time to use, 0 for now. */
static void frame_op(bool end, bool begin, uint64_t at) {
  uint32_t mask =
      __atomic_load_n(&etch_cat_etch_frames.enabled, __ATOMIC_RELAXED);
  etch__spin_lock(&frames.lock);
  uint64_t ts = at ? etch__ordered_ts(&frames.last_ts, at)
                   : ordered_now(&frames.last_ts);
  if (end) frame_end_at(mask, ts);
  if (begin) frame_begin_at(mask, ts);
  etch__spin_unlock(&frames.lock);
}

void etch_frame_mark(void) { frame_op(true, true, 0); }
void etch_frame_begin(void) { frame_op(true, true, 0); }
void etch_frame_end(void) { frame_op(true, false, 0); }
void etch_frame_mark_at(uint64_t ts) { frame_op(true, true, ts ? ts : 1); }
void etch_frame_begin_at(uint64_t ts) { frame_op(true, true, ts ? ts : 1); }
void etch_frame_end_at(uint64_t ts) { frame_op(true, false, ts ? ts : 1); }

uint64_t etch_frame_index(void) {
  etch__spin_lock(&frames.lock);
  uint64_t i = frames.index;
  etch__spin_unlock(&frames.lock);
  return i;
}

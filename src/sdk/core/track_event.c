/*
 * track_event.c - the emitters behind the ETCH_* macros.
 *
 * Fast paths, taken when the thread has a writer for the session, its chunk
 * has room, no reset is due and the call site is interned on the sequence:
 *
 *   begin/instant/end  <site template: [size] 68 02 5A len 48 type 18 cat
 *                      50 name 40> <ts delta>  (end: a fixed template)
 *   counter            <site template, no 40> 58 <track uuid> F0 01
 *                      <value> 40 <delta>
 *   1-2 scalar args    [size] 68 02 5A len <site TrackEvent> 22 len 08
 *                      <key iid> <value> ... 40 <delta>
 *
 * i.e. a one-byte fragment size, sequence_flags = NEEDS_INCREMENTAL_STATE,
 * the TrackEvent and TracePacket.timestamp (a delta on the sequence's
 * incremental clock; field order is free in protobuf). The thread track
 * comes from the sequence's TracePacketDefaults; the sequence id is added
 * when the buffer is read out.
 * Everything else goes through emit_general(), which interns, writes
 * descriptors and encodes any extras into the writer's scratch buffer.
 */
#include <stdlib.h>
#include <string.h>

#include "sdk/core/encode.h"
#include "sdk/core/sdk.h"
#include "stack/stack.h"

/* ---- sites ---------------------------------------------------------------- */

ETCH_COLD void etch__site_prepare(etch_site *site) {
  etch_category *cat = site->cat;
  if (cat && !__atomic_load_n(&cat->id, __ATOMIC_RELAXED))
    etch_category_register(cat);
  const etch_track *ctrack = NULL;
  if (site->type == ETCH_TYPE_COUNTER)
    ctrack = etch__counter_track_for(site->name ? site->name : "");
  pthread_mutex_lock(&etch__g.lock);
  if (!site->id) {
    uint32_t id = ++etch__g.next_site_id;
    uint8_t body[20];
    uint8_t *q = body;
    *q++ = (uint8_t)etch__pb_tag(ETCH_TE_TYPE, ETCH_PB_VARINT);
    *q++ = site->type;
    if (cat) {
      *q++ = (uint8_t)etch__pb_tag(ETCH_TE_CATEGORY_IIDS, ETCH_PB_VARINT);
      q = etch__pb_put_varint(q, cat->id);
    }
    *q++ = (uint8_t)etch__pb_tag(ETCH_TE_NAME_IID, ETCH_PB_VARINT);
    q = etch__pb_put_varint(q, id);
    /* [size] 68 02 5A len <body> 40: fast_put's template; the size counts
     * a one-byte timestamp delta after it. */
    size_t blen = (size_t)(q - body);
    bool fits = 6 + blen <= sizeof site->tmpl;
    if (fits) {
      uint8_t *t = site->tmpl;
      *t++ = (uint8_t)(6 + blen);
      *t++ = (uint8_t)etch__pb_tag(ETCH_PKT_SEQUENCE_FLAGS, ETCH_PB_VARINT);
      *t++ = ETCH_SEQ_NEEDS_INCREMENTAL_STATE;
      *t++ = (uint8_t)etch__pb_tag(ETCH_PKT_TRACK_EVENT, ETCH_PB_LEN);
      *t++ = (uint8_t)blen;
      memcpy(t, body, blen);
      t += blen;
      *t++ = (uint8_t)etch__pb_tag(ETCH_PKT_TIMESTAMP, ETCH_PB_VARINT);
      site->tmpl_len = (uint8_t)(t - site->tmpl);
    }
    site->counter_track = ctrack;
    /* Sites past the inline bitset point at its always-zero last word and
     * so always take the general path; so does a counter whose track
     * could not be made (out of memory), which the fast path would need. */
    bool fast = id < ETCH_FAST_SITES && fits &&
                (site->type != ETCH_TYPE_COUNTER || ctrack);
    /* Read by the fast path of other threads before they know the site
     * is ready (the mask then 0 makes what it reads irrelevant): atomic,
     * a plain store and load all the same. */
    __atomic_store_n(&site->seen_word,
                     (uint16_t)(fast ? id >> 6 : ETCH_FAST_SITES / 64),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&site->id, id, __ATOMIC_RELEASE);
    __atomic_store_n(&site->seen_mask, 1ull << (id & 63), __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&etch__g.lock);
}

/* ---- fast path ------------------------------------------------------------- */

/* Whether w's sequence has site interned (`bit` its seen_mask, loaded
 * first). */
ETCH_INLINE bool site_seen(const etch_writer *w, const etch_site *site,
                           uint64_t bit) {
  return w->seen_fast[__atomic_load_n(&site->seen_word, __ATOMIC_RELAXED)] & bit;
}

/*
 * The fast paths' clock. rel is the ticks since the writer's anchor; it is
 * below lim only when no reset is due and rel * mult cannot overflow. The
 * event is then (rel * mult) >> 32 ns past the anchor, and its timestamp
 * delta that less the previous event's: consecutive deltas telescope to the
 * exact conversion. A reading behind the previous event (a TSC that
 * differs a little between cores) gives a "negative" delta, which only the
 * out-of-line tails see and clamp to 0.
 */
ETCH_INLINE uint64_t fast_rel(const etch_writer *w, uint64_t ticks) {
  uint64_t rel = ticks - w->anchor.ticks;
#if defined(__GNUC__) && !defined(__clang__)
  /* Keeps GCC from rebuilding rel from the anchor later, which costs it a
   * register and a move on the fast path. */
  __asm__("" : "+r"(rel));
#endif
  return rel;
}

ETCH_INLINE bool fast_ok(const etch_writer *w, uint64_t rel) {
  return etch__writer_has_room(w) && rel < w->lim;
}

/* The event's time in ns since the anchor. */
ETCH_INLINE uint64_t fast_ns(const etch_writer *w, uint64_t rel) {
  return (rel * w->anchor.mult) >> 32;
}

/* Its delta from the previous event, never negative: *ns is moved up to
 * the previous event's time when the reading was behind it. */
ETCH_INLINE uint64_t fast_delta(const etch_writer *w, uint64_t *ns) {
  uint64_t delta = *ns - w->rel_ns;
  if (ETCH_UNLIKELY((int64_t)delta < 0)) {
    *ns = w->rel_ns;
    delta = 0;
  }
  return delta;
}

/* Moves the clock to the event (ns since the anchor) and publishes its
 * packet, ending at q. */
ETCH_INLINE void fast_commit(etch_writer *w, uint64_t ns, uint8_t *q) {
  w->rel_ns = ns;
  w->st.cur = q;
  __atomic_store_n(&w->chunk->used, (uint32_t)((uintptr_t)q - w->pub_base),
                   __ATOMIC_RELEASE);
}

/*
 * Writes a template and the timestamp delta after it: the template is
 * [size] 68 02 5A len <TrackEvent> 40, its size byte counting a one-byte
 * delta. `copy` bytes are copied whatever its length, a constant the
 * compiler turns into one or two moves (the chunk has room to spare).
 */
/* fast_put's tail for a delta of three bytes or more (16 us and longer) or
 * a reading behind the previous event, out of line so that the common
 * cases need no loop and no saved register. */
static ETCH_NOINLINE void fast_put_long(etch_writer *w, uint64_t ns,
                                        uint8_t *p, uint8_t *q) {
  uint64_t delta = fast_delta(w, &ns);
  q = etch__pb_put_varint(q, delta);
  p[0] = (uint8_t)(q - p - 1);
  fast_commit(w, ns, q);
}

ETCH_INLINE void fast_put(etch_writer *w, uint64_t rel, const uint8_t *tmpl,
                          uint32_t tmpl_len, size_t copy) {
  uint64_t ns = fast_ns(w, rel);
  uint64_t delta = ns - w->rel_ns;
  uint8_t *p = w->st.cur;
  memcpy(p, tmpl, copy);
  uint8_t *q = p + tmpl_len;
  if (ETCH_LIKELY(delta < 0x80)) {
    *q++ = (uint8_t)delta;
  } else if (delta < 0x4000) { /* 128 ns to 16 us: two bytes */
    q[0] = (uint8_t)(delta | 0x80);
    q[1] = (uint8_t)(delta >> 7);
    q += 2;
    p[0]++;
  } else {
    fast_put_long(w, ns, p, q);
    return;
  }
  fast_commit(w, ns, q);
}

static void emit_general(etch_writer *w, etch_site *site, etch_category *cat,
                         uint32_t type, const char *dyn_name,
                         const etch_extra *x, uint32_t n, uint64_t ticks);

/* What dropping an event of `type` with these extras loses (drop_at). */
static uint8_t kind_of_drop(uint32_t type, const etch_extra *x, uint32_t n) {
  if (type != ETCH_TYPE_SLICE_BEGIN && type != ETCH_TYPE_SLICE_END)
    return ETCH_DROP_OTHER;
  for (uint32_t i = 0; i < n; i++)
    if (x[i].kind == ETCH_X_TRACK && x[i].v.t) return ETCH_DROP_OTHER;
  return type == ETCH_TYPE_SLICE_BEGIN ? ETCH_DROP_BEGIN : ETCH_DROP_END;
}

/* [08] 68 02 5A 02 48 02 40, then the delta. */
static const uint8_t end_tmpl[8] = {
    8,
    (ETCH_PKT_SEQUENCE_FLAGS << 3) | ETCH_PB_VARINT,
    ETCH_SEQ_NEEDS_INCREMENTAL_STATE,
    (ETCH_PKT_TRACK_EVENT << 3) | ETCH_PB_LEN, 2,
    (ETCH_TE_TYPE << 3) | ETCH_PB_VARINT, ETCH_TE_TYPE_SLICE_END,
    (ETCH_PKT_TIMESTAMP << 3) | ETCH_PB_VARINT};

/*
 * A site event on one writer: written when the writer has room, no reset is
 * due and the site is interned on its sequence. `begin` is a compile-time
 * constant.
 */
ETCH_INLINE bool site_put(etch_writer *w, etch_site *site, uint64_t ticks,
                          bool begin) {
  /* The mask is published last: once seen, the template is complete. */
  uint64_t bit = __atomic_load_n(&site->seen_mask, __ATOMIC_ACQUIRE);
  uint64_t rel = fast_rel(w, ticks);
  if (ETCH_LIKELY(fast_ok(w, rel) && site_seen(w, site, bit))) {
    if (begin) w->depth++;
    fast_put(w, rel, site->tmpl, site->tmpl_len, 16);
    return true;
  }
  return false;
}

ETCH_INLINE bool end_put(etch_writer *w, uint64_t ticks) {
  uint64_t rel = fast_rel(w, ticks);
  if (ETCH_LIKELY(fast_ok(w, rel))) {
    if (w->depth) { /* else its begin was never recorded */
      w->depth--;
      fast_put(w, rel, end_tmpl, 8, 8);
    }
    return true;
  }
  return false;
}

/* Several sessions, or a writer that needs more than the fast path. */
static ETCH_NOINLINE void site_slow(etch_site *site, uintptr_t mask,
                                    uint64_t ticks) {
  if (!__atomic_load_n(&site->seen_mask, __ATOMIC_ACQUIRE)) etch__site_prepare(site);
  bool begin = site->type == ETCH_TYPE_SLICE_BEGIN;
  etch__tls.drop_kind = kind_of_drop(site->type, NULL, 0);
  do {
    uint32_t i = (uint32_t)__builtin_ctz((uint32_t)mask);
    mask &= mask - 1;
    if (begin ? site_put(etch__tls.w[i], site, ticks, true)
              : site_put(etch__tls.w[i], site, ticks, false))
      continue;
    etch_writer *w = etch__writer_prepare(i, ticks);
    if (w) emit_general(w, site, site->cat, site->type, NULL, NULL, 0, ticks);
  } while (mask);
  etch__tls.drop_kind = ETCH_DROP_OTHER;
}

static ETCH_NOINLINE void end_slow(etch_category *cat, uintptr_t mask,
                                   uint64_t ticks) {
  etch__tls.drop_kind = ETCH_DROP_END;
  do {
    uint32_t i = (uint32_t)__builtin_ctz((uint32_t)mask);
    mask &= mask - 1;
    if (end_put(etch__tls.w[i], ticks)) continue;
    etch_writer *w = etch__writer_prepare(i, ticks);
    if (w)
      emit_general(w, NULL, cat, ETCH_TYPE_SLICE_END, NULL, NULL, 0, ticks);
  } while (mask);
  etch__tls.drop_kind = ETCH_DROP_OTHER;
}

/*
 * When the fast path declines, the slow path reads the category's mask
 * again instead of being handed the one the call site read, so the fast
 * path need not keep it in a register. The two differ only when a session
 * started or stopped in between, and then the event goes to the sessions
 * enabled now.
 */
static ETCH_NOINLINE void site_miss(etch_site *site, uint64_t ticks) {
  uint32_t mask = __atomic_load_n(&site->cat->enabled, __ATOMIC_RELAXED);
  if (mask) site_slow(site, mask, ticks);
}

static ETCH_NOINLINE void end_miss(etch_category *cat, uint64_t ticks) {
  uint32_t mask = __atomic_load_n(&cat->enabled, __ATOMIC_RELAXED);
  if (mask) end_slow(cat, mask, ticks);
}

/* One session's event, its writer found with one table load (an event for
 * several sessions finds the null writer, whose room check fails). */
ETCH_INLINE void site_fast(etch_site *site, uintptr_t mask, uint64_t ticks,
                           bool begin) {
  if (!site_put(etch__tls.w[etch__mask_slot[mask]], site, ticks, begin))
    site_miss(site, ticks);
}

ETCH_INLINE void end_fast(etch_category *cat, uintptr_t mask, uint64_t ticks) {
  if (!end_put(etch__tls.w[etch__mask_slot[mask]], ticks))
    end_miss(cat, ticks);
}

/*
 * The exported emitters read the TSC inline and hand everything else to tail
 * calls, so they need no stack frame. Without an invariant TSC they pass the
 * whole event to a twin that reads CLOCK_BOOTTIME.
 */
#if ETCH_HAVE_TSC
#define FAST_TICKS() __rdtsc()
#define CLOCK_IS_FAST() ETCH_LIKELY(etch__clock_is_tsc())
#else
#define FAST_TICKS() 0
#define CLOCK_IS_FAST() 0
#endif

static ETCH_NOINLINE void site_boottime(etch_site *site, uintptr_t mask) {
  site_slow(site, mask, etch__ticks_slow());
}

static ETCH_NOINLINE void end_boottime(etch_category *cat, uintptr_t mask) {
  end_slow(cat, mask, etch__ticks_slow());
}

void etch__emit_site(etch_site *site, uintptr_t mask) {
  if (!CLOCK_IS_FAST()) {
    site_boottime(site, mask);
    return;
  }
  site_fast(site, mask, FAST_TICKS(), false);
}

void etch__emit_begin(etch_site *site, uintptr_t mask) {
  if (!CLOCK_IS_FAST()) {
    site_boottime(site, mask);
    return;
  }
  site_fast(site, mask, FAST_TICKS(), true);
}

void etch__emit_end(etch_category *cat, uintptr_t mask) {
  if (!CLOCK_IS_FAST()) {
    end_boottime(cat, mask);
    return;
  }
  end_fast(cat, mask, FAST_TICKS());
}

/*
 * Counters: [size] 68 02 5A <len> 48 04 18 <cat> 50 <name> 58 <track uuid>
 * F0 01 <int64> (or E1 02 <double>) 40 <delta>, once the site's name and
 * its track's descriptor are on the sequence (the site's bit, set by the
 * general path).
 */
/* The value travels as its bits so that the fast path builds no etch_extra
 * and the call stays a tail call. */
static ETCH_NOINLINE void counter_slow(etch_site *site, uintptr_t mask,
                                       uint64_t ticks, uint64_t raw,
                                       bool is_double) {
  etch_extra x;
  if (is_double) {
    double v;
    memcpy(&v, &raw, sizeof v);
    x = etch__x_counter_double(v);
  } else {
    x = etch__x_counter_int((int64_t)raw);
  }
  if (!__atomic_load_n(&site->seen_mask, __ATOMIC_ACQUIRE)) etch__site_prepare(site);
  do {
    uint32_t i = (uint32_t)__builtin_ctz(mask);
    mask &= mask - 1;
    etch_writer *w = etch__writer_prepare(i, ticks);
    if (w) emit_general(w, site, site->cat, ETCH_TYPE_COUNTER, NULL, &x, 1, ticks);
  } while (mask);
}

ETCH_INLINE void counter_one(etch_site *site, uintptr_t mask, uint64_t ticks,
                             uint64_t raw, bool is_double) {
  etch_writer *w = etch__tls.w[etch__mask_slot[mask]]; /* never NULL */
  uint64_t bit = __atomic_load_n(&site->seen_mask, __ATOMIC_ACQUIRE);
  uint64_t rel = fast_rel(w, ticks);
  if (ETCH_LIKELY(fast_ok(w, rel) && site_seen(w, site, bit))) {
    uint64_t ns = fast_ns(w, rel);
    uint64_t delta = fast_delta(w, &ns);
    /* The site template without its timestamp tag, then the track. */
    uint8_t *p = w->st.cur;
    memcpy(p, site->tmpl, 16);
    uint8_t *q = p + site->tmpl_len - 1;
    uint8_t *te = p + 4; /* [size] 68 02 5A <len> */
    *q++ = (uint8_t)etch__pb_tag(ETCH_TE_TRACK_UUID, ETCH_PB_VARINT);
    memcpy(q, site->counter_track->uuid_enc, 16);
    q += site->counter_track->uuid_len;
    if (is_double) {
      q = etch__pb_put_tag(q, ETCH_TE_DOUBLE_COUNTER_VALUE, ETCH_PB_FIXED64);
      q = etch__pb_put_fixed64(q, raw);
    } else {
      q = etch__pb_put_tag(q, ETCH_TE_COUNTER_VALUE, ETCH_PB_VARINT);
      q = etch__pb_put_varint(q, raw);
    }
    *te = (uint8_t)(q - te - 1);
    *q++ = (uint8_t)etch__pb_tag(ETCH_PKT_TIMESTAMP, ETCH_PB_VARINT);
    q = etch__pb_put_varint(q, delta);
    p[0] = (uint8_t)(q - p - 1);
    fast_commit(w, ns, q);
    return;
  }
  counter_slow(site, mask, ticks, raw, is_double);
}

/* Without an invariant TSC the whole event goes to the slow path, out of
 * line, so that the fast path makes no call and saves no register. */
static ETCH_NOINLINE void counter_boottime(etch_site *site, uintptr_t mask,
                                           uint64_t raw, bool is_double) {
  counter_slow(site, mask, etch__ticks_slow(), raw, is_double);
}

void etch__emit_counter(etch_site *site, uintptr_t mask, int64_t v) {
  if (!CLOCK_IS_FAST()) {
    counter_boottime(site, mask, (uint64_t)v, false);
    return;
  }
  counter_one(site, mask, FAST_TICKS(), (uint64_t)v, false);
}

void etch__emit_counter_double(etch_site *site, uintptr_t mask, double v) {
  uint64_t raw;
  memcpy(&raw, &v, sizeof raw);
  if (!CLOCK_IS_FAST()) {
    counter_boottime(site, mask, raw, true);
    return;
  }
  counter_one(site, mask, FAST_TICKS(), raw, true);
}

/* ---- general path ---------------------------------------------------------- */

#define MAX_ARGS 64

typedef struct parsed {
  bool has_ts;
  uint64_t ts;
  const etch_track *track;
  const char *dyn_name;
  int counter_kind; /* 0 none, 1 int, 2 double */
  int64_t counter_i;
  double counter_d;
  uint32_t nargs;
  const etch_extra *args[MAX_ARGS];
  uint32_t da_iid[MAX_ARGS];
} parsed;

static void parse_extras(parsed *p, const etch_extra *x, uint32_t n) {
  memset(p, 0, offsetof(parsed, args));
  for (uint32_t i = 0; i < n; i++) {
    switch (x[i].kind) {
      case ETCH_X_TIMESTAMP:
        p->has_ts = true;
        p->ts = x[i].v.u;
        break;
      case ETCH_X_TRACK:
        p->track = x[i].v.t;
        break;
      case ETCH_X_DYNAMIC_NAME:
        p->dyn_name = x[i].v.s ? x[i].v.s : "";
        break;
      case ETCH_X_COUNTER_INT:
        p->counter_kind = 1;
        p->counter_i = x[i].v.i;
        break;
      case ETCH_X_COUNTER_DOUBLE:
        p->counter_kind = 2;
        p->counter_d = x[i].v.d;
        break;
      case ETCH_X_ARG_BOOL:
      case ETCH_X_ARG_INT:
      case ETCH_X_ARG_UINT:
      case ETCH_X_ARG_DOUBLE:
      case ETCH_X_ARG_STRING:
      case ETCH_X_ARG_POINTER:
        if (p->nargs < MAX_ARGS) p->args[p->nargs++] = &x[i];
        break;
      default:
        break;
    }
  }
}

static uint8_t *raw_arg(uint8_t *q, const etch_extra *a, uint32_t iid,
                        uint32_t slen) {
  uint8_t *l = etch__pb_put_open(&q, ETCH_TE_DEBUG_ANNOTATIONS);
  const char *name = a->name ? a->name : "";
  if (iid)
    q = etch__pb_put_varint_field(q, ETCH_DA_NAME_IID, iid);
  else
    q = etch__pb_put_bytes_field(q, ETCH_DA_NAME, name, etch__clamp_len(name));
  switch (a->kind) {
    case ETCH_X_ARG_BOOL:
      q = etch__pb_put_varint_field(q, ETCH_DA_BOOL_VALUE, a->v.b ? 1 : 0);
      break;
    case ETCH_X_ARG_INT:
      q = etch__pb_put_varint_field(q, ETCH_DA_INT_VALUE, (uint64_t)a->v.i);
      break;
    case ETCH_X_ARG_UINT:
      q = etch__pb_put_varint_field(q, ETCH_DA_UINT_VALUE, a->v.u);
      break;
    case ETCH_X_ARG_DOUBLE: {
      uint64_t u;
      memcpy(&u, &a->v.d, sizeof u);
      q = etch__pb_put_fixed64_field(q, ETCH_DA_DOUBLE_VALUE, u);
      break;
    }
    case ETCH_X_ARG_STRING:
      q = etch__pb_put_bytes_field(q, ETCH_DA_STRING_VALUE, a->v.s ? a->v.s : "(null)", slen);
      break;
    case ETCH_X_ARG_POINTER:
      q = etch__pb_put_varint_field(q, ETCH_DA_POINTER_VALUE, (uint64_t)(uintptr_t)a->v.p);
      break;
  }
  return etch__pb_put_close(l, q);
}

enum { DYN_MAX = 4096, DYN_MAX_LEN = 256 };

static void emit_general(etch_writer *w, etch_site *site, etch_category *cat,
                         uint32_t type, const char *dyn_name,
                         const etch_extra *x, uint32_t n, uint64_t ticks) {
  parsed p;
  parse_extras(&p, x, n);
  if (dyn_name) p.dyn_name = dyn_name;
  if (cat && !__atomic_load_n(&cat->id, __ATOMIC_RELAXED))
    etch_category_register(cat);

  const etch_track *track = p.track;
  if (!track && type == ETCH_TYPE_COUNTER) {
    if (site && !p.dyn_name)
      track = site->counter_track;
    if (!track)
      track = etch__counter_track_for(
          p.dyn_name ? p.dyn_name : site && site->name ? site->name : "");
    if (!track) { /* could not be made (out of memory): dropped, counted */
      etch__writer_drop(w, ticks);
      return;
    }
  }
  /* An end whose begin was never recorded is not written. Thread tracks
   * count their open slices in the writer, named tracks (where a slice may
   * end on another thread) in the session. */
  bool thread_track = track == NULL;
  uint32_t *track_open = NULL;
  if (type == ETCH_TYPE_SLICE_END) {
    if (thread_track) {
      /* The end of a begin that was dropped would close its parent. */
      if (ETCH_UNLIKELY(w->phantoms) && etch__writer_end_is_phantom(w)) {
        etch__writer_drop_unwritten(w, ticks);
        return;
      }
      if (w->depth == 0) return;
    } else if (!etch__session_track_close(w->sess, track)) {
      return;
    }
  } else if (type == ETCH_TYPE_SLICE_BEGIN && !thread_track) {
    track_open = etch__session_track_open(w->sess, track);
    if (!track_open) {
      etch__writer_drop(w, ticks);
      return;
    }
  }

  if (track) etch__writer_ensure_track(w, track);
  /* An allocation's call stack (mem_slow): its interned data first. */
  uint32_t stack = etch__tls.callstack;
  if (stack && !etch__stack_seen(w, stack) && !etch__stack_put_interned(w, stack))
    stack = 0;

  /* Counters keep their name and category too, so readers can route them
   * like any other event (the track carries the name as well). */
  bool counter = type == ETCH_TYPE_COUNTER;
  bool with_name = type != ETCH_TYPE_SLICE_END || p.dyn_name;
  bool with_cat = cat && type != ETCH_TYPE_SLICE_END;
  bool new_name = with_name && site && !p.dyn_name &&
                  !etch__writer_seen_name(w, site->id);
  bool new_cat = with_cat && !etch__bitset_has(&w->seen_cats, cat->id);

  /* An upper bound of the packet, so the raw writes need no checks. */
  size_t bound = 128 + (stack ? 8 : 0);
  uint32_t name_len = 0, cat_len = 0, dyn_len = 0;
  if (new_name) {
    name_len = etch__clamp_len(site->name ? site->name : "");
    bound += name_len + 24;
  }
  if (new_cat) {
    cat_len = etch__clamp_len(cat->name);
    bound += cat_len + 24;
  }
  /* A dynamic name is interned on the sequence (written once, then
   * referred to by iid); inline when the table is full. */
  uint32_t dyn_iid = 0;
  bool new_dyn = false;
  if (p.dyn_name) {
    dyn_len = etch__clamp_len(p.dyn_name);
    /* Bounded: a program that names every event differently costs a
     * sequence at most DYN_MAX names of DYN_MAX_LEN bytes until its next
     * reset. */
    if (dyn_len <= DYN_MAX_LEN && w->dyn_names.count < DYN_MAX)
      dyn_iid =
          etch__strtab_intern(&w->dyn_names, p.dyn_name, dyn_len, &new_dyn);
    bound += 2 * dyn_len + 32;
  }
  for (uint32_t i = 0; i < n; i++)
    if (x[i].kind == ETCH_X_FLOW || x[i].kind == ETCH_X_TERMINATING_FLOW)
      bound += 10;
  bool new_da[MAX_ARGS];
  uint32_t slen[MAX_ARGS];
  for (uint32_t i = 0; i < p.nargs; i++) {
    const etch_extra *a = p.args[i];
    const char *an = a->name ? a->name : "";
    slen[i] = a->kind == ETCH_X_ARG_STRING
                  ? etch__clamp_len(a->v.s ? a->v.s : "(null)")
                  : 0;
    bound += 48 + slen[i];
    bool cached;
    p.da_iid[i] = etch__arg_key_iid(w, an, &new_da[i], &cached);
    if (!cached) bound += 2 * etch__clamp_len(an) + 24;
  }
  uint8_t *buf = etch__writer_scratch(w, bound);
  if (!buf) {
    etch__writer_drop(w, ticks);
    return;
  }

  /* A begin is stamped after etch's own work for it (the writer's setup,
   * interning, the track's descriptor, the scratch buffer, the bitsets
   * that remember what this sequence has seen), so that work
   * is not billed to the slice; other events keep the time of the call. */
  if (new_cat) etch__bitset_reserve(&w->seen_cats, cat->id);
  if (new_name && site->id >= ETCH_FAST_SITES)
    etch__bitset_reserve(&w->seen_names_more, site->id);
  if (type == ETCH_TYPE_SLICE_BEGIN && !p.has_ts) ticks = etch__ticks();
  uint64_t ns = p.has_ts ? p.ts : etch__next_ts(w, ticks);

  uint8_t *q = buf;
  uint64_t last_ns = etch__writer_last_ns(w);
  if (p.has_ts) {
    q = etch__pb_put_varint_field(q, ETCH_PKT_TIMESTAMP, p.ts);
    q = etch__pb_put_varint_field(q, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  } else {
    q = etch__pb_put_varint_field(q, ETCH_PKT_TIMESTAMP, ns - last_ns);
  }
  q = etch__pb_put_varint_field(q, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  bool any_new_da = false;
  for (uint32_t i = 0; i < p.nargs; i++) any_new_da |= new_da[i];
  if (new_name || new_cat || any_new_da || new_dyn) {
    uint8_t *l = etch__pb_put_open(&q, ETCH_PKT_INTERNED_DATA);
    if (new_cat)
      q = etch__proto_put_interned(q, ETCH_ID_EVENT_CATEGORIES, cat->id, cat->name, cat_len);
    if (new_name)
      q = etch__proto_put_interned(q, ETCH_ID_EVENT_NAMES, site->id,
                       site->name ? site->name : "", name_len);
    if (new_dyn)
      q = etch__proto_put_interned(q, ETCH_ID_EVENT_NAMES, ETCH_DYN_IID_BASE + dyn_iid,
                       p.dyn_name, dyn_len);
    for (uint32_t i = 0; i < p.nargs; i++) {
      if (!new_da[i]) continue;
      const char *an = p.args[i]->name ? p.args[i]->name : "";
      q = etch__proto_put_interned(q, ETCH_ID_DEBUG_ANNOTATION_NAMES, p.da_iid[i], an,
                       etch__clamp_len(an));
    }
    q = etch__pb_put_close(l, q);
  }

  uint8_t *te = etch__pb_put_open(&q, ETCH_PKT_TRACK_EVENT);
  q = etch__pb_put_varint_field(q, ETCH_TE_TYPE, type);
  if (with_cat) q = etch__pb_put_varint_field(q, ETCH_TE_CATEGORY_IIDS, cat->id);
  if (with_name) {
    if (p.dyn_name && dyn_iid)
      q = etch__pb_put_varint_field(q, ETCH_TE_NAME_IID, ETCH_DYN_IID_BASE + dyn_iid);
    else if (p.dyn_name)
      q = etch__pb_put_bytes_field(q, ETCH_TE_NAME, p.dyn_name, dyn_len);
    else if (site)
      q = etch__pb_put_varint_field(q, ETCH_TE_NAME_IID, site->id);
  }
  if (track) q = etch__pb_put_varint_field(q, ETCH_TE_TRACK_UUID, etch__track_uuid(track));
  if (type == ETCH_TYPE_COUNTER) {
    if (p.counter_kind == 2) {
      uint64_t u;
      memcpy(&u, &p.counter_d, sizeof u);
      q = etch__pb_put_fixed64_field(q, ETCH_TE_DOUBLE_COUNTER_VALUE, u);
    } else {
      q = etch__pb_put_varint_field(q, ETCH_TE_COUNTER_VALUE, (uint64_t)p.counter_i);
    }
  }
  for (uint32_t i = 0; i < n; i++) {
    if (x[i].kind == ETCH_X_FLOW)
      q = etch__pb_put_fixed64_field(q, ETCH_TE_FLOW_IDS, x[i].v.u);
    else if (x[i].kind == ETCH_X_TERMINATING_FLOW)
      q = etch__pb_put_fixed64_field(q, ETCH_TE_TERMINATING_FLOW_IDS, x[i].v.u);
  }
  for (uint32_t i = 0; i < p.nargs; i++)
    q = raw_arg(q, p.args[i], p.da_iid[i], slen[i]);
  if (stack) q = etch__pb_put_varint_field(q, ETCH_TE_CALLSTACK_IID, stack);
  q = etch__pb_put_close(te, q);
  ETCH_DCHECK((size_t)(q - buf) <= bound);

  if (!etch__writer_put_packet(w, buf, (size_t)(q - buf))) {
    /* Interning recorded in the strtab for a lost packet is void. */
    etch__writer_drop(w, ticks);
    return;
  }
  if (!p.has_ts) etch__writer_advance(w, ticks);
  if (new_name) etch__writer_mark_name(w, site->id);
  /* A counter site's bit: its track's descriptor is on this sequence. */
  if (counter && site && !p.dyn_name && !p.track && !p.has_ts)
    etch__writer_mark_name(w, site->id);
  if (new_cat) etch__bitset_set(&w->seen_cats, cat->id);
  if (thread_track && (type == ETCH_TYPE_SLICE_BEGIN ||
                       type == ETCH_TYPE_SLICE_END))
    etch__writer_level_written(w, type == ETCH_TYPE_SLICE_BEGIN ? 1 : -1);
  if (track_open) __atomic_fetch_add(track_open, 1, __ATOMIC_RELAXED);
}

/* This thread's writer for slot `i`, ready for a packet: the quick checks
 * inline, everything else in etch__writer_prepare. */
ETCH_INLINE etch_writer *ready_writer(uint32_t i, uint64_t ticks,
                                      bool explicit_ts) {
  etch_writer *w = etch__tls.w[i]; /* never NULL */
  if (ETCH_LIKELY(fast_ok(w, fast_rel(w, ticks)))) return w;
  return explicit_ts ? etch__writer_prepare_explicit(i, ticks)
                     : etch__writer_prepare(i, ticks);
}

/* Whether the extras give the event its time (ETCH_TS). */
static bool has_explicit_ts(const etch_extra *x, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (x[i].kind == ETCH_X_TIMESTAMP) return true;
  return false;
}


/*
 * Site events whose extras are one or two scalar args (bool, int, uint,
 * double, pointer) with keys this sequence has interned (the arg-key cache
 * hit): the site template plus the annotations, written in place.
 *
 *   [size] 68 02 5A <len+args> <site TrackEvent bytes>
 *     22 <len> 08 <key iid> <value field>     (per arg)
 *   40 <delta>
 *
 * Returns false, having written nothing, when any condition fails.
 */
/* A key this sequence has interned: the arg-key cache holds its iid for
 * the current reset. */
ETCH_INLINE bool key_iid(const etch_writer *w, const char *key,
                         uint32_t *iid) {
  typeof(&w->da_cache[0]) c = &w->da_cache[etch__da_slot(key)];
  if (c->ptr != key || c->gen != w->reset_gen || !key) return false;
  *iid = c->iid;
  return true;
}

/* An arg the fast path can write: a scalar with such a key. */
ETCH_INLINE bool arg_iid(const etch_writer *w, const etch_extra *a,
                         uint32_t *iid) {
  uint32_t k = a->kind;
  if (k < ETCH_X_ARG_BOOL || k > ETCH_X_ARG_POINTER || k == ETCH_X_ARG_STRING)
    return false;
  return key_iid(w, a->name, iid);
}

/* 22 <len> 08 <key iid> <field> <v>: an annotation with a varint value. */
ETCH_INLINE uint8_t *arg_put_varint(uint8_t *q, uint32_t iid, uint32_t field,
                                    uint64_t v) {
  q[0] = (uint8_t)etch__pb_tag(ETCH_TE_DEBUG_ANNOTATIONS, ETCH_PB_LEN);
  uint8_t *len = q + 1;
  q[2] = (uint8_t)etch__pb_tag(ETCH_DA_NAME_IID, ETCH_PB_VARINT);
  q = etch__pb_put_varint(q + 3, iid);
  *q++ = (uint8_t)etch__pb_tag(field, ETCH_PB_VARINT);
  q = etch__pb_put_varint(q, v);
  *len = (uint8_t)(q - len - 1);
  return q;
}

/* 22 <len> 08 <key iid> <value field>: one debug annotation. */
ETCH_INLINE uint8_t *arg_put(uint8_t *q, uint32_t iid, const etch_extra *a) {
  uint32_t k = a->kind;
  if (k == ETCH_X_ARG_DOUBLE) {
    q[0] = (uint8_t)etch__pb_tag(ETCH_TE_DEBUG_ANNOTATIONS, ETCH_PB_LEN);
    uint8_t *len = q + 1;
    q[2] = (uint8_t)etch__pb_tag(ETCH_DA_NAME_IID, ETCH_PB_VARINT);
    q = etch__pb_put_varint(q + 3, iid);
    uint64_t u;
    memcpy(&u, &a->v.d, sizeof u);
    *q++ = (uint8_t)etch__pb_tag(ETCH_DA_DOUBLE_VALUE, ETCH_PB_FIXED64);
    q = etch__pb_put_fixed64(q, u);
    *len = (uint8_t)(q - len - 1);
    return q;
  }
  if (k == ETCH_X_ARG_INT)
    return arg_put_varint(q, iid, ETCH_DA_INT_VALUE, (uint64_t)a->v.i);
  if (k == ETCH_X_ARG_UINT)
    return arg_put_varint(q, iid, ETCH_DA_UINT_VALUE, a->v.u);
  if (k == ETCH_X_ARG_BOOL)
    return arg_put_varint(q, iid, ETCH_DA_BOOL_VALUE, a->v.b ? 1 : 0);
  return arg_put_varint(q, iid, ETCH_DA_POINTER_VALUE,
                        (uint64_t)(uintptr_t)a->v.p);
}

/* The args fast path's frame around the annotations: args_open checks that
 * the writer can take the site's event on its fast path and writes the
 * site template without its size byte and timestamp tag (NULL, having
 * written nothing, when it cannot); args_close adds the timestamp, the
 * sizes and publishes the packet. */
typedef struct args_frame {
  uint8_t *p, *te_len, *args;
  uint64_t ns, delta;
} args_frame;

ETCH_INLINE uint8_t *args_open(etch_writer *w, etch_site *site,
                               uint64_t ticks, args_frame *f) {
  uint64_t bit = __atomic_load_n(&site->seen_mask, __ATOMIC_ACQUIRE);
  uint64_t rel = fast_rel(w, ticks);
  if (!(fast_ok(w, rel) && site_seen(w, site, bit)))
    return NULL;
  f->ns = fast_ns(w, rel);
  f->delta = fast_delta(w, &f->ns);
  f->p = w->st.cur;
  uint8_t *q = f->p + 1;
  f->te_len = q + 3; /* 68 02 5A <len> ... */
  memcpy(q, site->tmpl + 1, 15);
  f->args = q + site->tmpl_len - 2;
  return f->args;
}

ETCH_INLINE void args_close(etch_writer *w, etch_site *site,
                            const args_frame *f, uint8_t *q) {
  *f->te_len = (uint8_t)(*f->te_len + (q - f->args));
  *q++ = (uint8_t)etch__pb_tag(ETCH_PKT_TIMESTAMP, ETCH_PB_VARINT);
  q = etch__pb_put_varint(q, f->delta);
  if (site->type == ETCH_TYPE_SLICE_BEGIN) w->depth++;
  f->p[0] = (uint8_t)(q - f->p - 1);
  fast_commit(w, f->ns, q);
}

ETCH_INLINE bool args_fast(etch_writer *w, etch_site *site, const etch_extra *x,
                           uint32_t n, uint64_t ticks) {
  uint32_t iid0, iid1 = 0;
  if (n - 1 > 1 || !arg_iid(w, &x[0], &iid0) ||
      (n == 2 && !arg_iid(w, &x[1], &iid1)))
    return false;
  args_frame f;
  uint8_t *q = args_open(w, site, ticks, &f);
  if (!q) return false;
  q = arg_put(q, iid0, &x[0]);
  if (n == 2) q = arg_put(q, iid1, &x[1]);
  args_close(w, site, &f, q);
  return true;
}

static ETCH_NOINLINE void emit_slow(etch_site *site, uintptr_t mask,
                                    const etch_extra *extras,
                                    uint32_t n_extras, uint64_t ticks) {
  if (!__atomic_load_n(&site->seen_mask, __ATOMIC_ACQUIRE)) etch__site_prepare(site);
  bool explicit_ts = has_explicit_ts(extras, n_extras);
  etch__tls.drop_kind = kind_of_drop(site->type, extras, n_extras);
  do {
    uint32_t i = (uint32_t)__builtin_ctz(mask);
    mask &= mask - 1;
    etch_writer *w = ready_writer(i, ticks, explicit_ts);
    if (w)
      emit_general(w, site, site->cat, site->type, NULL, extras, n_extras,
                   ticks);
  } while (mask);
  etch__tls.drop_kind = ETCH_DROP_OTHER;
}

/* The args fast path inline, everything else in emit_slow: the common case
 * then saves no registers. */
ETCH_INLINE void emit_any(etch_site *site, uintptr_t mask,
                          const etch_extra *extras, uint32_t n_extras,
                          uint64_t ticks) {
  if (!args_fast(etch__tls.w[etch__mask_slot[mask]], site, extras, n_extras,
                 ticks))
    emit_slow(site, mask, extras, n_extras, ticks);
}

static ETCH_NOINLINE void emit_boottime(etch_site *site, uintptr_t mask,
                                        const etch_extra *extras,
                                        uint32_t n_extras) {
  emit_any(site, mask, extras, n_extras, etch__ticks_slow());
}

void etch__emit(etch_site *site, uintptr_t mask, const etch_extra *extras,
                uint32_t n_extras) {
  if (!CLOCK_IS_FAST()) {
    emit_boottime(site, mask, extras, n_extras);
    return;
  }
  emit_any(site, mask, extras, n_extras, FAST_TICKS());
}

/*
 * Memory tracing's two events (memory.c): an allocation's "ptr" and "size",
 * a free's "ptr". The args fast path written for exactly these args (their
 * keys and value fields fixed here); the general path builds the extras
 * only when the fast path cannot take the event.
 */
static const char mem_ptr_key[] = "ptr", mem_size_key[] = "size";

/* The two keys' iids from the arg-key cache, kept in the writer for the
 * events after this one when both are there. */
static ETCH_NOINLINE bool mem_keys(etch_writer *w, bool has_size,
                                   uint32_t *pi, uint32_t *si) {
  if (!key_iid(w, mem_ptr_key, pi)) return false;
  if (!key_iid(w, mem_size_key, si)) return !has_size; /* a free needs none */
  w->mem_ptr_iid = *pi;
  w->mem_size_iid = *si;
  w->mem_gen = w->reset_gen + 1;
  return true;
}

ETCH_INLINE bool mem_fast(etch_site *site, uintptr_t mask, const void *ptr,
                          uint64_t size, bool has_size, uint32_t stack,
                          uint64_t ticks) {
  etch_writer *w = etch__tls.w[etch__mask_slot[mask]];
  uint32_t pi, si = 0;
  if (ETCH_LIKELY(w->mem_gen == w->reset_gen + 1)) {
    pi = w->mem_ptr_iid;
    si = w->mem_size_iid;
  } else if (!mem_keys(w, has_size, &pi, &si)) {
    return false;
  }
  /* A stack new to the sequence: the general path writes it first. */
  if (stack && !etch__bitset_has(&w->seen_stacks, stack)) return false;
  args_frame f;
  uint8_t *q = args_open(w, site, ticks, &f);
  if (!q) return false;
  q = arg_put_varint(q, pi, ETCH_DA_POINTER_VALUE, (uint64_t)(uintptr_t)ptr);
  if (has_size) q = arg_put_varint(q, si, ETCH_DA_UINT_VALUE, size);
  if (stack) q = etch__pb_put_varint_field(q, ETCH_TE_CALLSTACK_IID, stack);
  args_close(w, site, &f, q);
  return true;
}

static ETCH_NOINLINE void mem_slow(etch_site *site, uintptr_t mask,
                                   const void *ptr, uint64_t size,
                                   bool has_size, uint32_t stack,
                                   uint64_t ticks) {
  const etch_extra xs[2] = {etch_arg_pointer(mem_ptr_key, ptr),
                            etch_arg_uint(mem_size_key, size)};
  etch__tls.callstack = stack; /* emit_general writes it */
  emit_slow(site, mask, xs, has_size ? 2 : 1, ticks);
  etch__tls.callstack = 0;
}

void etch__emit_alloc(etch_site *site, uintptr_t mask, const void *ptr,
                      uint64_t size, uint32_t stack) {
  uint64_t ticks = CLOCK_IS_FAST() ? FAST_TICKS() : etch__ticks_slow();
  if (!mem_fast(site, mask, ptr, size, true, stack, ticks))
    mem_slow(site, mask, ptr, size, true, stack, ticks);
}

void etch__emit_free(etch_site *site, uintptr_t mask, const void *ptr) {
  uint64_t ticks = CLOCK_IS_FAST() ? FAST_TICKS() : etch__ticks_slow();
  if (!mem_fast(site, mask, ptr, 0, false, 0, ticks))
    mem_slow(site, mask, ptr, 0, false, 0, ticks);
}

void etch__emit_end_x(etch_category *cat, uintptr_t mask,
                      const etch_extra *extras, uint32_t n_extras) {
  uint64_t ticks = etch__ticks();
  bool explicit_ts = has_explicit_ts(extras, n_extras);
  etch__tls.drop_kind = kind_of_drop(ETCH_TYPE_SLICE_END, extras, n_extras);
  do {
    uint32_t i = (uint32_t)__builtin_ctz(mask);
    mask &= mask - 1;
    etch_writer *w = ready_writer(i, ticks, explicit_ts);
    if (w)
      emit_general(w, NULL, cat, ETCH_TYPE_SLICE_END, NULL, extras, n_extras,
                   ticks);
  } while (mask);
  etch__tls.drop_kind = ETCH_DROP_OTHER;
}

void etch__emit_dyn(etch_category *cat, uintptr_t mask, uint32_t type,
                    const char *name, const etch_extra *extras,
                    uint32_t n_extras) {
  if (type < ETCH_TYPE_SLICE_BEGIN || type > ETCH_TYPE_COUNTER) return;
  uint64_t ticks = etch__ticks();
  const char *dn = type == ETCH_TYPE_SLICE_END ? NULL : (name ? name : "");
  bool explicit_ts = has_explicit_ts(extras, n_extras);
  etch__tls.drop_kind = kind_of_drop(type, extras, n_extras);
  do {
    uint32_t i = (uint32_t)__builtin_ctz(mask);
    mask &= mask - 1;
    etch_writer *w = ready_writer(i, ticks, explicit_ts);
    if (w) emit_general(w, NULL, cat, type, dn, extras, n_extras, ticks);
  } while (mask);
  etch__tls.drop_kind = ETCH_DROP_OTHER;
}

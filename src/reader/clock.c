/*
 * clock.c - clock snapshots and conversion of timestamps to the trace clock.
 *
 * A ClockSnapshot says "at this instant clock A read a, clock B read b, ...".
 * To convert a value v of clock C to the trace clock T (BOOTTIME unless the
 * first snapshot names another primary_trace_clock), the reader looks for the
 * snapshot nearest to v among those holding both C and T: the one with the
 * largest C value <= v, or the first one when v precedes them all, and
 * assumes both clocks run at the same rate: t = t_snap + (v - c_snap). When no
 * snapshot holds C and T together it goes through one intermediate clock X
 * (C -> X in one snapshot, X -> T in another), the same way.
 *
 * Clocks 64..127 are sequence-scoped: clock 64 of sequence 3 and clock 64 of
 * sequence 4 are different clocks (keys made with RD_SEQ_CLOCK_KEY). The
 * other clocks are each machine's own (RD_MACHINE_CLOCK_KEY): a relayed
 * machine's timestamps convert to its own trace clock through its own
 * snapshots, and machine.c moves them onto the host's timeline.
 * Values are in the clock's unit (unit_multiplier_ns, default 1 ns) on the
 * wire and in ns here.
 */
#include <stdlib.h>
#include <string.h>

#include "proto/perfetto.h"
#include "reader/clock.h"
#include "reader/errors.h"
#include "reader/reader_int.h"
#include "reader/reader_priv.h"

int etch__rd_clocks_init(rd_clocks *c) {
  memset(c, 0, sizeof *c);
  c->trace_clock = ETCH_CLOCK_BOOTTIME;
  etch__arena_init(&c->arena, 16 * 1024);
  return 0;
}

void etch__rd_clocks_free(rd_clocks *c) {
  for (size_t i = 0; i < c->nall; i++) {
    etch__vec_free(&c->all[i]->pairv);
    etch__vec_free(&c->all[i]->refv);
    free(c->all[i]);
  }
  etch__vec_free(&c->allv);
  etch__vec_free(&c->snapv);
  etch__ptrmap_free(&c->by_key);
  etch__arena_free(&c->arena);
  memset(c, 0, sizeof *c);
}

/* Room for one more `size`-byte item in v of n items (written in place
 * at *arr, which follows v's bytes). */
static int grow(etch_vec *v, void **arr, size_t n, size_t size) {
  v->len = n * size; /* the items held */
  if (etch__vec_reserve(v, size)) return ETCH_ENOMEM;
  *arr = v->data;
  return 0;
}

rd_clock *etch__rd_clock_get(etch_reader *r, uint64_t key, bool create) {
  rd_clocks *c = &r->clocks;
  rd_clock *k = (rd_clock *)etch__ptrmap_get(&c->by_key, key);
  if (k || !create) return k;
  if (c->nall >= RD_MAX_CLOCKS) {
    etch__error(ETCH_ELIMIT, "more than %u clocks", RD_MAX_CLOCKS);
    return NULL;
  }
  k = (rd_clock *)etch__calloc(1, sizeof *k);
  if (!k) return NULL;
  k->key = key;
  k->unit_ns = 1;
  if (grow(&c->allv, (void **)&c->all, c->nall, sizeof *c->all) ||
      etch__ptrmap_put(&c->by_key, key, k)) {
    free(k);
    return NULL;
  }
  c->all[c->nall++] = k;
  return k;
}

/* Caches pairs[hint] as the range [src, next src) for rd_clock_convert. */
static void clock_cache(rd_clock *k) {
  size_t i = k->hint, n = k->npairs;
  if (i >= n) {
    k->c_lo = k->c_span = k->c_dst = 0;
    return;
  }
  k->c_lo = k->pairs[i].src;
  k->c_dst = k->pairs[i].dst;
  /* The last pair reaches to the end of the range: 2^64 - src, which is 0
   * (no range, the slow path) only for src 0. */
  k->c_span = (i + 1 < n ? k->pairs[i + 1].src : 0) - k->c_lo;
}

/* Inserts (src, dst) keeping pairs sorted by src (snapshots mostly come in
 * increasing order, so this is an append). */
static int add_pair(rd_clock *k, uint64_t src, uint64_t dst) {
  if (grow(&k->pairv, (void **)&k->pairs, k->npairs, sizeof *k->pairs))
    return ETCH_ENOMEM;
  size_t i = k->npairs;
  while (i > 0 && k->pairs[i - 1].src > src) {
    k->pairs[i] = k->pairs[i - 1];
    i--;
  }
  k->pairs[i].src = src;
  k->pairs[i].dst = dst;
  k->npairs++;
  /* Sorted by src, which the conversion's binary search assumes. */
  ETCH_DCHECK(i == 0 || k->pairs[i - 1].src <= src);
  ETCH_DCHECK(i + 1 == k->npairs || src < k->pairs[i + 1].src);
  clock_cache(k);
  return 0;
}

/* Rebuilds every clock's direct pairs for a new trace clock. */
static int rebuild_pairs(rd_clocks *c) {
  for (size_t i = 0; i < c->nall; i++) {
    c->all[i]->npairs = 0;
    clock_cache(c->all[i]);
  }
  for (size_t s = 0; s < c->nsnaps; s++) {
    const rd_snap *sn = &c->snaps[s];
    const rd_snap_entry *t = NULL;
    for (uint32_t j = 0; j < sn->n; j++)
      if (RD_CLOCK_IS_TRACE(sn->e[j].clock->key, c->trace_clock))
        t = &sn->e[j];
    if (!t) continue;
    for (uint32_t j = 0; j < sn->n; j++)
      if (&sn->e[j] != t && add_pair(sn->e[j].clock, sn->e[j].value, t->value))
        return ETCH_ENOMEM;
  }
  return 0;
}

int etch__rd_clock_snapshot(etch_reader *r, const rd_src *src, rd_seq *seq,
                            const uint8_t *msg, size_t len) {
  rd_clocks *c = &r->clocks;
  /* Pass 1: count clocks and read primary_trace_clock. */
  etch__pb_dec d;
  etch__pb_field f;
  uint32_t n = 0;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next(&d, &f)) {
    if (f.id == ETCH_CLOCKSNAP_CLOCKS && f.wt == ETCH_PB_LEN) {
      n++;
    } else if (f.id == ETCH_CLOCKSNAP_PRIMARY_TRACE_CLOCK &&
               f.wt == ETCH_PB_VARINT) {
      /* The host's word only: a relayed machine's clocks follow it. */
      if (!c->converted && r->cur_machine == 0 && f.u > 0 && f.u < 64 &&
          (uint32_t)f.u != c->trace_clock) {
        c->trace_clock = (uint32_t)f.u;
        if (rebuild_pairs(c)) return ETCH_ENOMEM;
      }
    }
  }
  if (d.err) return etch__rd_fail_dec(r, src, &d);
  if (n == 0) return 0;
  if (c->nsnaps >= UINT32_MAX ||
      grow(&c->snapv, (void **)&c->snaps, c->nsnaps, sizeof *c->snaps))
    return ETCH_ENOMEM;
  rd_snap_entry *e =
      (rd_snap_entry *)etch__arena_alloc(&c->arena, (size_t)n * sizeof *e);
  if (!e) return ETCH_ENOMEM;
  uint32_t snap_idx = (uint32_t)c->nsnaps;
  uint32_t m = 0;
  const rd_snap_entry *t = NULL;

  /* Pass 2: the clocks. */
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next(&d, &f)) {
    if (f.id != ETCH_CLOCKSNAP_CLOCKS || f.wt != ETCH_PB_LEN) continue;
    etch__pb_dec cd;
    etch__pb_field cf;
    uint64_t id = 0, ts = 0, unit = 0;
    bool incr = false;
    etch__pb_dec_init(&cd, f.data, f.len);
    while (etch__pb_next(&cd, &cf)) {
      if (cf.wt != ETCH_PB_VARINT) continue;
      switch (cf.id) {
        case ETCH_SNAPCLOCK_CLOCK_ID: id = cf.u; break;
        case ETCH_SNAPCLOCK_TIMESTAMP: ts = cf.u; break;
        case ETCH_SNAPCLOCK_IS_INCREMENTAL: incr = cf.u != 0; break;
        case ETCH_SNAPCLOCK_UNIT_MULTIPLIER_NS: unit = cf.u; break;
        default: break;
      }
    }
    if (cd.err) return etch__rd_fail_dec(r, src, &cd);
    if (id > UINT32_MAX) continue;
    uint64_t key = RD_MACHINE_CLOCK_KEY(r->cur_machine, id);
    if (id >= ETCH_CLOCK_SEQ_SCOPED_FIRST && id <= ETCH_CLOCK_SEQ_SCOPED_LAST) {
      /* Sequence-scoped: without a sequence it cannot be referenced. */
      if (!seq || seq->id == 0) continue;
      key = RD_SEQ_CLOCK_KEY(seq->id, id);
    }
    rd_clock *k = etch__rd_clock_get(r, key, true);
    if (!k) return ETCH_ENOMEM;
    if (key >> 63) seq->clocks[id - ETCH_CLOCK_SEQ_SCOPED_FIRST] = k;
    if (unit) k->unit_ns = unit;
    k->incremental = incr;
    if (incr) {
      k->last = ts;
      k->has_last = true;
    }
    /* A clock listed twice in one snapshot: keep the first. */
    bool dup = false;
    for (uint32_t j = 0; j < m; j++)
      if (e[j].clock == k) dup = true;
    if (dup) continue;
    e[m].clock = k;
    e[m].value = ts * k->unit_ns;
    if (RD_CLOCK_IS_TRACE(key, c->trace_clock)) t = &e[m];
    m++;
  }
  if (d.err) return etch__rd_fail_dec(r, src, &d);
  c->snaps[c->nsnaps].e = e;
  c->snaps[c->nsnaps].n = m;
  c->nsnaps++;
  for (uint32_t j = 0; j < m; j++) {
    rd_clock *k = e[j].clock;
    if (grow(&k->refv, (void **)&k->refs, k->nrefs, sizeof *k->refs))
      return ETCH_ENOMEM;
    k->refs[k->nrefs].snap = snap_idx;
    k->refs[k->nrefs].value = e[j].value;
    k->nrefs++;
    if (t && &e[j] != t && add_pair(k, e[j].value, t->value))
      return ETCH_ENOMEM;
  }
  return 0;
}

/* Direct conversion through the nearest snapshot with the trace clock. */
static bool convert_direct(rd_clock *k, uint64_t v, uint64_t *out) {
  size_t n = k->npairs;
  if (!n) return false;
  size_t i = k->hint;
  if (!(i < n && k->pairs[i].src <= v && (i + 1 == n || k->pairs[i + 1].src > v))) {
    if (v < k->pairs[0].src) {
      i = 0;
    } else {
      /* Largest src <= v. */
      size_t lo = 0, hi = n; /* pairs[lo].src <= v < pairs[hi].src */
      while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (k->pairs[mid].src <= v)
          lo = mid;
        else
          hi = mid;
      }
      i = lo;
    }
    k->hint = i;
    clock_cache(k);
  }
  *out = k->pairs[i].dst + (v - k->pairs[i].src);
  return true;
}

/* Value of snapshot `s`'s entry for clock `k`, if present. */
static bool snap_value(const rd_snap *s, const rd_clock *k, uint64_t *out) {
  for (uint32_t j = 0; j < s->n; j++) {
    if (s->e[j].clock == k) {
      *out = s->e[j].value;
      return true;
    }
  }
  return false;
}

bool etch__rd_clock_convert(etch_reader *r, rd_clock *k, uint64_t v,
                            int64_t *out) {
  rd_clocks *c = &r->clocks;
  uint64_t res;
  c->converted = true;
  if (RD_CLOCK_IS_TRACE(k->key, c->trace_clock)) {
    *out = (int64_t)v;
    return true;
  }
  if (convert_direct(k, v, &res)) {
    *out = (int64_t)res;
    return true;
  }
  /* One intermediate clock: the nearest snapshot holding k and some clock x
   * that itself has pairs with the trace clock. */
  const rd_clock_ref *best = NULL;
  for (size_t i = 0; i < k->nrefs; i++) {
    const rd_clock_ref *ref = &k->refs[i];
    const rd_snap *s = &c->snaps[ref->snap];
    bool usable = false;
    for (uint32_t j = 0; j < s->n; j++)
      if (s->e[j].clock != k && s->e[j].clock->npairs) usable = true;
    if (!usable) continue;
    if (!best) {
      best = ref;
    } else if (ref->value <= v) {
      if (best->value > v || ref->value >= best->value) best = ref;
    } else if (best->value > v && ref->value < best->value) {
      best = ref;
    }
  }
  if (!best) return false;
  const rd_snap *s = &c->snaps[best->snap];
  for (uint32_t j = 0; j < s->n; j++) {
    rd_clock *x = s->e[j].clock;
    if (x == k || !x->npairs) continue;
    uint64_t xv;
    if (!snap_value(s, x, &xv)) continue;
    if (convert_direct(x, xv + (v - best->value), &res)) {
      *out = (int64_t)res;
      return true;
    }
  }
  return false;
}

bool etch__reader_realtime_offset(const etch_reader *r, int64_t *offset) {
  const rd_clocks *c = &r->clocks;
  for (size_t i = 0; i < c->nsnaps; i++) {
    const rd_snap *s = &c->snaps[i];
    const rd_snap_entry *rt = NULL, *tc = NULL;
    for (uint32_t j = 0; j < s->n; j++) {
      if (s->e[j].clock->key == ETCH_CLOCK_REALTIME) rt = &s->e[j];
      if (s->e[j].clock->key == c->trace_clock) tc = &s->e[j];
    }
    if (!rt || !tc) continue;
    /* Wrapping difference: both are ns, and whatever a hostile snapshot
     * holds the result is some int64. */
    *offset = (int64_t)(rt->value - tc->value);
    return true;
  }
  return false;
}

/*
 * deliver.c - ordering and delivery of events: subscriptions, the track
 * callback (a track announced before its first event, ancestors first),
 * SLICE_END matching, events held per sequence and sorted for timestamp
 * order, and held tracks for per-track order, delivered at the end.
 */
#include <stdlib.h>
#include <string.h>

#include "reader/deliver.h"
#include "reader/progress.h"

/* ---- subscriptions -------------------------------------------------------------------- */

int etch__rd_subscribe(etch_reader *r, const char *category, const char *name,
                       etch_event_cb cb, void *user) {
  if (ETCH_VEC_RESERVE(&r->subv, rd_sub, 1)) return ETCH_ENOMEM;
  r->subs = ETCH_VEC_AT(&r->subv, rd_sub);
  rd_sub *s = &r->subs[r->nsubs]; /* counted below, once it is whole */
  s->category = category ? etch__strpool_get(&r->pool, category, strlen(category))
                         : NULL;
  s->name = name ? etch__strpool_get(&r->pool, name, strlen(name)) : NULL;
  if ((category && !s->category) || (name && !s->name)) return ETCH_ENOMEM;
  s->cb = cb;
  s->user = user;
  r->subv.len += sizeof *s;
  r->nsubs++;
  return 0;
}

/* ---- delivery ------------------------------------------------------------------------- */

bool etch__rd_cat_match(const char *want, const char *cats) {
  if (want == cats) return true;
  if (!strchr(cats, ',')) return false;
  size_t wl = strlen(want);
  const char *p = cats;
  for (;;) {
    const char *c = strchr(p, ',');
    size_t n = c ? (size_t)(c - p) : strlen(p);
    if (n == wl && memcmp(p, want, n) == 0) return true;
    if (!c) return false;
    p = c + 1;
  }
}

void etch__rd_announce_track(etch_reader *r, rd_track *t, int depth) {
  if (t->delivered) return;
  t->delivered = true;
  etch__rd_track_resolve(r, t);
  /* Ancestors first, so a consumer can build the hierarchy. */
  if (t->info.parent_uuid && depth < RD_MAX_NESTING) {
    rd_track *p =
        etch__rd_track_in(r, t->info.machine_id, t->info.parent_uuid, false);
    if (p && p != t) etch__rd_announce_track(r, p, depth + 1);
  }
  t->announce_no = ++r->nannounced;
  if (r->track_cb) r->track_cb(&t->info, r->track_user);
}

void etch__rd_deliver(etch_reader *r, etch_event *ev, rd_track *t) {
  rd_deliver(r, ev, t);
}

/* A self-contained copy of an event in `arena`, or NULL. */
static rd_rec *rec_make(etch_arena *arena, const etch_event *ev,
                        rd_track *t) {
  size_t size = sizeof(rd_rec);
  bool extra = ev->flow_ids_count || ev->terminating_flow_ids_count ||
               ev->args_count || ev->callsite_id >= 0;
  size_t strbytes = 0;
  if (extra) {
    size += sizeof(rd_rec_extra) +
            8 * (ev->flow_ids_count + ev->terminating_flow_ids_count) +
            sizeof(etch_arg) * ev->args_count;
    for (size_t i = 0; i < ev->args_count; i++)
      if (ev->args[i].type == ETCH_VALUE_STRING ||
          ev->args[i].type == ETCH_VALUE_JSON)
        strbytes += strlen(ev->args[i].v.s) + 1;
  }
  rd_rec *rec = (rd_rec *)etch__arena_alloc(arena, size + strbytes);
  if (!rec) return NULL;
  rec->ts = ev->ts;
  rec->gidx = ev->index;
  rec->track = t;
  rec->name = ev->name;
  rec->category = ev->category;
  rec->packet_offset = ev->packet_offset;
  /* A counter's value, or another event's slice_index (the union's other
   * use: 64 bytes a record). */
  if (ev->type != ETCH_EVENT_COUNTER)
    rec->counter.i = (int64_t)ev->slice_index;
  else if (ev->counter_is_double)
    rec->counter.d = ev->counter_double;
  else
    rec->counter.i = ev->counter_int;
  rec->type = (uint8_t)ev->type;
  rec->counter_is_double = ev->counter_is_double;
  rec->extra = extra;
  rec->after_loss = ev->after_loss;
  rec->seq = ev->sequence_id;
  if (extra) {
    rd_rec_extra *x = (rd_rec_extra *)(rec + 1);
    x->nflows = (uint32_t)ev->flow_ids_count;
    x->nterm = (uint32_t)ev->terminating_flow_ids_count;
    x->nargs = (uint32_t)ev->args_count;
    x->callsite = (uint32_t)(ev->callsite_id + 1);
    uint64_t *u = (uint64_t *)(x + 1);
    if (x->nflows) memcpy(u, ev->flow_ids, 8 * x->nflows);
    u += x->nflows;
    if (x->nterm) memcpy(u, ev->terminating_flow_ids, 8 * x->nterm);
    u += x->nterm;
    etch_arg *a = (etch_arg *)u;
    if (x->nargs) memcpy(a, ev->args, sizeof(etch_arg) * x->nargs);
    char *s = (char *)(a + x->nargs);
    for (size_t i = 0; i < x->nargs; i++) {
      if (a[i].type != ETCH_VALUE_STRING && a[i].type != ETCH_VALUE_JSON)
        continue;
      size_t n = strlen(a[i].v.s) + 1;
      memcpy(s, a[i].v.s, n);
      a[i].v.s = s;
      s += n;
    }
    /* Exactly the bytes rec_make sized: the strings end the record. */
    ETCH_DCHECK(s == (char *)rec + size + strbytes);
  }
  return rec;
}

/* Holds an event in its sequence's records (timestamp order). */
static int hold(rd_seq *seq, const etch_event *ev, rd_track *t) {
  rd_rec *rec = rec_make(&seq->recs, ev, t);
  if (!rec || etch__vec_push(&seq->idx, &rec, sizeof rec)) return ETCH_ENOMEM;
  if (ev->ts < seq->last_ts) seq->unsorted = true;
  if (ev->ts > seq->last_ts) seq->last_ts = ev->ts;
  seq->nrecs++;
  return 0;
}

void etch__rd_track_order_decide(etch_reader *r, rd_track *t) {
  if (t->res_gen != r->track_gen) etch__rd_track_resolve(r, t);
  /* A thread track has one writer, its thread, whose events come in time
   * order; any other track may be written by several sequences. */
  bool hold = t->info.kind != ETCH_TRACK_COUNTER &&
              (r->hold_all || t->info.kind != ETCH_TRACK_THREAD);
  t->order_state = hold ? RD_ORDER_HOLD : RD_ORDER_STREAM;
  t->order_last = INT64_MIN;
}

int etch__rd_hold_track(etch_reader *r, const etch_event *ev, rd_track *t) {
  if (!t->held.len) {
    if (ETCH_VEC_PUSH(&r->held_trackv, rd_track *, t)) return ETCH_ENOMEM;
    r->held_tracks = ETCH_VEC_AT(&r->held_trackv, rd_track *);
    r->nheld_tracks++;
  }
  /* Announced now, in file order, as if delivered. */
  if (!t->delivered) etch__rd_announce_track(r, t, 0);
  rd_rec *rec = rec_make(&r->track_recs, ev, t);
  if (!rec || etch__vec_push(&t->held, &rec, sizeof rec)) return ETCH_ENOMEM;
  if (ev->ts < t->order_last) t->held_unsorted = true;
  else t->order_last = ev->ts;
  return 0;
}

int etch__rd_emit(etch_reader *r, rd_seq *seq, etch_event *ev,
                  rd_track *t) {
  if (seq->loss_pending) { /* the callers start with after_loss false */
    ev->after_loss = true;
    seq->loss_pending = false;
  }
  rd_number(r, ev);
  if (r->obs) {
    r->obs->event(r, ev, r->obs->user);
    return 0;
  }
  if (r->order == ETCH_ORDER_FILE) {
    if (r->per_track) return rd_deliver_per_track(r, ev, t);
    etch__rd_deliver(r, ev, t); /* fills ev->pid and ev->tid in */
    return 0;
  }
  return hold(seq, ev, t);
}

static void rec_event(const rd_rec *rec, etch_event *ev) {
  memset(ev, 0, sizeof *ev);
  ev->type = (etch_event_type)rec->type;
  ev->ts = rec->ts;
  ev->sequence_id = rec->seq;
  ev->track = &rec->track->info;
  ev->category = rec->category;
  ev->name = rec->name;
  ev->counter_is_double = rec->counter_is_double;
  if (rec->type != ETCH_EVENT_COUNTER)
    ev->slice_index = (uint64_t)rec->counter.i;
  else if (rec->counter_is_double)
    ev->counter_double = rec->counter.d;
  else
    ev->counter_int = rec->counter.i;
  ev->packet_offset = rec->packet_offset;
  ev->after_loss = rec->after_loss;
  ev->index = rec->gidx;
  ev->callsite_id = -1;
  if (rec->extra) {
    const rd_rec_extra *x = (const rd_rec_extra *)(rec + 1);
    ev->callsite_id = (int64_t)x->callsite - 1;
    const uint64_t *u = (const uint64_t *)(x + 1);
    if (x->nflows) ev->flow_ids = u;
    ev->flow_ids_count = x->nflows;
    u += x->nflows;
    if (x->nterm) ev->terminating_flow_ids = u;
    ev->terminating_flow_ids_count = x->nterm;
    u += x->nterm;
    if (x->nargs) ev->args = (const etch_arg *)u;
    ev->args_count = x->nargs;
  }
}

static bool rec_less(const rd_rec *a, const rd_rec *b) {
  return a->ts < b->ts || (a->ts == b->ts && a->gidx < b->gidx);
}

/* Stable merge sort of record pointers by (ts, gidx). */
static int sort_recs(rd_rec **a, size_t n) {
  rd_rec **tmp = (rd_rec **)etch__malloc(n * sizeof *tmp);
  if (!tmp) return ETCH_ENOMEM;
  for (size_t w = 1; w < n; w *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * w) {
      size_t mid = lo + w < n ? lo + w : n;
      size_t hi = lo + 2 * w < n ? lo + 2 * w : n;
      size_t i = lo, j = mid, k = lo;
      if (mid == hi || !rec_less(a[mid], a[mid - 1])) {
        memcpy(tmp + lo, a + lo, (hi - lo) * sizeof *a);
        continue;
      }
      while (i < mid && j < hi) tmp[k++] = rec_less(a[j], a[i]) ? a[j++] : a[i++];
      while (i < mid) tmp[k++] = a[i++];
      while (j < hi) tmp[k++] = a[j++];
    }
    rd_rec **t = a;
    memcpy(t, tmp, n * sizeof *a);
  }
  free(tmp);
  return 0;
}

typedef struct rd_cursor {
  rd_rec **cur, **end;
} rd_cursor;

static void heap_down(rd_cursor *h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    if (l < n && rec_less(*h[l].cur, *h[m].cur)) m = l;
    if (l + 1 < n && rec_less(*h[l + 1].cur, *h[m].cur)) m = l + 1;
    if (m == i) return;
    rd_cursor t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

/* Sorts each sequence's held events and merges them into timestamp order. */
int etch__rd_deliver_held(etch_reader *r) {
  size_t k = 0;
  uint64_t total = 0, done = 0;
  rd_cursor *h = (rd_cursor *)etch__calloc(r->nseq ? r->nseq : 1, sizeof *h);
  if (!h) return ETCH_ENOMEM;
  for (size_t i = 0; i < r->nseq; i++) {
    rd_seq *s = r->seq_list[i];
    if (!s->nrecs) continue;
    rd_rec **a = (rd_rec **)s->idx.data;
    if (s->unsorted && sort_recs(a, s->nrecs)) {
      free(h);
      return ETCH_ENOMEM;
    }
    h[k].cur = a;
    h[k].end = a + s->nrecs;
    k++;
    total += s->nrecs;
  }
  for (size_t i = k; i-- > 0;) heap_down(h, k, i);
  etch_event ev;
  while (k) {
    rd_rec *rec = *h[0].cur;
    rec_event(rec, &ev);
    etch__rd_deliver(r, &ev, rec->track);
    etch__rd_progress(r, ++done, total, "delivering");
    if (++h[0].cur == h[0].end) h[0] = h[--k];
    heap_down(h, k, 0);
  }
  free(h);
  for (size_t i = 0; i < r->nseq; i++) {
    rd_seq *s = r->seq_list[i];
    etch__arena_free(&s->recs);
    free(s->idx.data);
    memset(&s->idx, 0, sizeof s->idx);
    s->nrecs = 0;
  }
  return 0;
}

static bool announced_before(const rd_track *a, const rd_track *b) {
  return a->announce_no < b->announce_no;
}

/* Delivers the held tracks (per-track order), each in timestamp order, in
 * the order they were announced. */
int etch__rd_deliver_track_held(etch_reader *r) {
  rd_track **h = r->held_tracks;
  size_t n = r->nheld_tracks;
  uint64_t total = 0, done = 0;
  for (size_t i = 1; i < n; i++) { /* insertion sort: usually in order */
    rd_track *t = h[i];
    size_t j = i;
    for (; j > 0 && announced_before(t, h[j - 1]); j--) h[j] = h[j - 1];
    h[j] = t;
  }
  for (size_t i = 0; i < n; i++) total += h[i]->held.len / sizeof(rd_rec *);
  int rc = 0;
  etch_event ev;
  for (size_t i = 0; i < n && !rc; i++) {
    rd_track *t = h[i];
    ETCH_DCHECK(i == 0 || !announced_before(t, h[i - 1])); /* sorted */
    rd_rec **a = (rd_rec **)t->held.data;
    size_t m = t->held.len / sizeof *a;
    if (t->held_unsorted && (rc = sort_recs(a, m))) break;
    for (size_t k = 0; k < m && !r->stop; k++) {
      rec_event(a[k], &ev);
      etch__rd_deliver(r, &ev, t);
      etch__rd_progress(r, ++done, total, "delivering");
    }
  }
  for (size_t i = 0; i < n; i++) {
    free(h[i]->held.data);
    memset(&h[i]->held, 0, sizeof h[i]->held);
  }
  r->nheld_tracks = 0;
  r->held_trackv.len = 0;
  etch__arena_free(&r->track_recs);
  return rc;
}

/*
 * deliver.h - ordering and delivery of events (deliver.c), which the
 * decoders call down into: an event built is handed to etch__rd_emit, which
 * holds it (timestamp order, or a held track of per-track order) or
 * delivers it to the track callback and the subscribers; what was held is
 * delivered at the end of the read.
 */
#ifndef ETCH_READER_DELIVER_H
#define ETCH_READER_DELIVER_H

#include "reader/reader_int.h"
#include "reader/track.h"

/* Adds a subscription (etch_reader_on, custom events' routes). */
int etch__rd_subscribe(etch_reader *r, const char *category, const char *name,
                       etch_event_cb cb, void *user);

/* Hands a fully built event to ordering (hold) or delivery (which sets its
 * pid and tid). */
int etch__rd_emit(etch_reader *r, rd_seq *seq, etch_event *ev,
                  rd_track *track);
/* Delivers one event to the track callback and the subscribers. */
void etch__rd_deliver(etch_reader *r, etch_event *ev, rd_track *track);
/* Announces a track (and its ancestors first) to the track callback. */
void etch__rd_announce_track(etch_reader *r, rd_track *t, int depth);
/* `cats` (categories joined by ",") holds the pooled category `want`. */
bool etch__rd_cat_match(const char *want, const char *cats);

/* Holds an event of a track whose events are put in order (per-track
 * order). */
int etch__rd_hold_track(etch_reader *r, const etch_event *ev, rd_track *t);
/* Decides whether a track's slices stream or are held (per-track order). */
void etch__rd_track_order_decide(etch_reader *r, rd_track *t);

/* Numbers a decoded event: its index, and a slice begin's or instant's
 * slice_index. */
ETCH_INLINE void rd_number(etch_reader *r, etch_event *ev) {
  ev->index = r->gidx++;
  ev->slice_index = 0;
  if (ev->type == ETCH_EVENT_SLICE_BEGIN || ev->type == ETCH_EVENT_INSTANT)
    ev->slice_index = r->nslices++;
}

/* etch__rd_deliver, inline. SLICE_END events are matched per track in
 * delivery order unless the consumer matches them itself. */
ETCH_INLINE void rd_deliver(etch_reader *r, etch_event *ev, rd_track *t) {
  if (ev->type == ETCH_EVENT_SLICE_BEGIN) {
    t->open++;
  } else if (ev->type == ETCH_EVENT_SLICE_END && !r->no_end_matching) {
    if (t->open == 0) {
      r->stats.misplaced_end_event++;
      return;
    }
    t->open--;
  }
  if (ETCH_UNLIKELY(!r->have_bounds)) {
    r->have_bounds = true;
    r->first_ts = r->last_ts = ev->ts;
  } else if (ev->ts < r->first_ts) {
    r->first_ts = ev->ts;
  } else if (ev->ts > r->last_ts) {
    r->last_ts = ev->ts;
  }
  if (ETCH_UNLIKELY(!t->delivered)) etch__rd_announce_track(r, t, 0);
  if (ETCH_UNLIKELY(t->res_gen != r->track_gen)) etch__rd_track_resolve(r, t);
  ev->pid = t->ev_pid;
  ev->tid = t->ev_tid;
  if (ETCH_LIKELY(r->sub_all)) { /* one subscription, to everything */
    r->subs[0].cb(ev, r->subs[0].user);
    return;
  }
  if (!r->nsubs) return; /* (no subscriptions: subs is NULL) */
  const rd_sub *s = r->subs, *e = r->subs + r->nsubs;
  for (; s < e; s++) {
    if (s->name && s->name != ev->name) continue;
    if (s->category && !etch__rd_cat_match(s->category, ev->category)) continue;
    s->cb(ev, s->user);
  }
}

/*
 * Delivery in per-track order: slices and instants of a held track wait
 * for the end of the trace; those of a streamed track (a thread track, one
 * sequence writing it in time order) go now, unless the track goes back in
 * time, which stops the read (etch__reader_went_back). Counters go now.
 */
ETCH_INLINE int rd_deliver_per_track(etch_reader *r, etch_event *ev,
                                     rd_track *t) {
  if (ev->type != ETCH_EVENT_COUNTER) {
    if (ETCH_UNLIKELY(t->order_state != RD_ORDER_STREAM)) {
      if (t->order_state == RD_ORDER_UNDECIDED)
        etch__rd_track_order_decide(r, t);
      if (t->order_state == RD_ORDER_HOLD) return etch__rd_hold_track(r, ev, t);
    }
    if (ETCH_UNLIKELY(ev->ts < t->order_last)) {
      r->went_back = true;
      r->stop = true;
      return 0;
    }
    t->order_last = ev->ts;
  }
  rd_deliver(r, ev, t);
  return 0;
}

/* The end of the read: sorts each sequence's held events and merges them
 * into timestamp order (etch__rd_deliver_held), or delivers the held
 * tracks of per-track order, each in timestamp order, in the order they
 * were announced (etch__rd_deliver_track_held). */
int etch__rd_deliver_held(etch_reader *r);
int etch__rd_deliver_track_held(etch_reader *r);

#endif /* ETCH_READER_DELIVER_H */

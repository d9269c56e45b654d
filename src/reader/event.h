/*
 * event.h - track events and their debug annotations (event.c), for the
 * generic decoder and the fast path.
 */
#ifndef ETCH_READER_EVENT_H
#define ETCH_READER_EVENT_H

#include <string.h>

#include "reader/reader_int.h"

/* Appends one element, or a packed run, of a repeated integer field. */
int etch__rd_repeated(etch_reader *r, const rd_src *src, const uint8_t *msg,
                      const etch__pb_field *f, bool fixed64, uint64_t **arr,
                      size_t *n, size_t *cap);
/* Decodes a TrackEvent at `ts` and emits the resulting event(s). */
int etch__rd_track_event(etch_reader *r, const rd_src *src, rd_seq *seq,
                         const uint8_t *msg, size_t len, int64_t ts,
                         uint64_t pkt_off);
/* The track of an event's track_uuid (0: the global track), created and
 * counted in unknown_track when no descriptor came first. */
rd_track *etch__rd_event_track(etch_reader *r, uint64_t uuid);
/* Applies a counter track's unit multiplier and incremental accumulation. */
void etch__rd_counter_value(rd_seq *seq, rd_track *t, etch_event *ev);

/* etch's own drop reports: an instant named etch.dropped_events adds its
 * debug.count to the stats (both decoders). */
ETCH_INLINE void etch__rd_count_dropped(etch_reader *r, etch_event_type type,
                                        const char *name, const etch_arg *args,
                                        size_t nargs) {
  if (ETCH_LIKELY(type != ETCH_EVENT_INSTANT || name[0] != 'e' ||
                  strcmp(name, "etch.dropped_events") != 0))
    return;
  for (size_t i = 0; i < nargs; i++) {
    const etch_arg *a = &args[i];
    if (strcmp(a->key, "debug.count") != 0) continue;
    if (a->type == ETCH_VALUE_INT && a->v.i > 0)
      r->stats.etch_dropped_events += (uint64_t)a->v.i;
    else if (a->type == ETCH_VALUE_UINT)
      r->stats.etch_dropped_events += a->v.u;
  }
}

#endif /* ETCH_READER_EVENT_H */

/*
 * clock.h - clock snapshots and conversion of timestamps to the trace clock
 * (clock.c), for the decoders.
 */
#ifndef ETCH_READER_CLOCK_H
#define ETCH_READER_CLOCK_H

#include "reader/reader_int.h"

int etch__rd_clocks_init(rd_clocks *c);
void etch__rd_clocks_free(rd_clocks *c);
rd_clock *etch__rd_clock_get(etch_reader *r, uint64_t key, bool create);
/* Adds one ClockSnapshot message. */
int etch__rd_clock_snapshot(etch_reader *r, const rd_src *src, rd_seq *seq,
                            const uint8_t *msg, size_t len);
/* Converts `value_ns` of `clock` to the trace clock of its machine; false
 * if no path. */
bool etch__rd_clock_convert(etch_reader *r, rd_clock *clock, uint64_t value_ns,
                            int64_t *out);
/* The same, inline when the value falls in the last snapshot pair used. */
ETCH_INLINE bool rd_clock_convert(etch_reader *r, rd_clock *k, uint64_t v,
                                  int64_t *out) {
  if (ETCH_LIKELY(v - k->c_lo < k->c_span &&
                  !RD_CLOCK_IS_TRACE(k->key, r->clocks.trace_clock))) {
    r->clocks.converted = true;
    *out = (int64_t)(k->c_dst + (v - k->c_lo));
    return true;
  }
  return etch__rd_clock_convert(r, k, v, out);
}

#endif /* ETCH_READER_CLOCK_H */

/*
 * packet.h - the generic decoder of one TracePacket and its sequences
 * (packet.c), for the source, the API (a fed packet) and the fast path.
 */
#ifndef ETCH_READER_PACKET_H
#define ETCH_READER_PACKET_H

#include "reader/reader_int.h"

/* Decodes one TracePacket whose record starts at `rec_off` of src. */
int etch__rd_packet(etch_reader *r, const rd_src *src, uint64_t rec_off,
                    const uint8_t *pkt, size_t len);

/* The sequence of `id`, made when it is not known yet (NULL: out of memory
 * or too many sequences). */
rd_seq *etch__rd_seq_get(etch_reader *r, uint32_t id);
ETCH_INLINE rd_seq *rd_seq_get(etch_reader *r, uint32_t id) {
  rd_seq *s = r->last_seq;
  if (ETCH_LIKELY(s && s->id == id)) return s;
  return etch__rd_seq_get(r, id);
}
/* Resolves a packet timestamp to the trace clock; false when it cannot be
 * converted (incremental clocks advance even then). `clock_id` 0: the
 * packet names no clock (its value is taken as it is). */
bool etch__rd_packet_time(etch_reader *r, rd_seq *seq, bool has_ts,
                          uint64_t raw, uint32_t clock_id, int64_t *out);

#endif /* ETCH_READER_PACKET_H */

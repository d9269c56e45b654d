/*
 * fast.h - the fast path (fast.c), tried by the source on every record
 * before the generic decoder.
 */
#ifndef ETCH_READER_FAST_H
#define ETCH_READER_FAST_H

#include "reader/reader_int.h"

/*
 * The fast path decodes packets of the shapes libetch's fast paths write
 * (a track event with its timestamp, flags and sequence id, fields in any
 * order) and delivers their events as etch__rd_packet would. For any other
 * packet, and for malformed ones (so that the generic decoder reports
 * them), it stops having changed nothing that etch__rd_packet does not do
 * the same way.
 */
/*
 * The Trace records from *pp on (Trace field 1, bytes of `src`) while they
 * are such packets: *pp is left at the first record it did not take (or
 * `end`, or after the packet that asked to stop). 0 or a negative status.
 */
int etch__rd_fast_records(etch_reader *r, const rd_src *src,
                          const uint8_t **pp, const uint8_t *end);

#endif /* ETCH_READER_FAST_H */

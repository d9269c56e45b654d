/*
 * machine.h - the machines of a multi-machine trace (machine.c), for the
 * decoders.
 */
#ifndef ETCH_READER_MACHINE_H
#define ETCH_READER_MACHINE_H

#include "reader/reader_int.h"

/* Machine 0, the host (reader_new); everything of every machine freed. */
int etch__rd_machines_init(etch_reader *r);
void etch__rd_machines_free(etch_reader *r);
/* The index of the machine with TracePacket.machine_id `raw` (0: the
 * host), added when new; ETCH_ELIMIT past RD_MAX_MACHINES. */
int etch__rd_machine_of(etch_reader *r, uint64_t raw, uint32_t *out);
/* The tracks of machine `m` by uuid. */
ETCH_INLINE etch_ptrmap *rd_machine_tracks(etch_reader *r, uint32_t m) {
  return m ? &r->machines[m].tracks : &r->tracks;
}
/* A SystemInfo of the current machine (r->cur_machine). */
int etch__rd_system_info(etch_reader *r, const rd_src *src, const uint8_t *msg,
                         size_t len);
/* A RemoteClockSync of the current machine: its client snapshots join the
 * machine's clocks, and the offset of its trace clock to the host's is
 * estimated from them as trace_processor does. */
int etch__rd_remote_clock_sync(etch_reader *r, const rd_src *src, rd_seq *seq,
                               const uint8_t *msg, size_t len);
/* `ts` of machine `m`'s trace clock on the host's timeline. */
ETCH_INLINE int64_t rd_machine_to_host(const etch_reader *r, uint32_t m,
                                       int64_t ts) {
  if (ETCH_LIKELY(m == 0) || !r->machines[m].info.has_clock_offset) return ts;
  return (int64_t)((uint64_t)ts - (uint64_t)r->machines[m].info.clock_offset);
}

#endif /* ETCH_READER_MACHINE_H */

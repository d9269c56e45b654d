/*
 * samples.h - CPU samples (samples.c): TracePacket.perf_sample read in the
 * packet's first pass (so a malformed one leaves the packet out before
 * anything of it is applied) and delivered to etch_reader_on_sample's
 * callback once the packet's interned data and timestamp are known.
 */
#ifndef ETCH_READER_SAMPLES_H
#define ETCH_READER_SAMPLES_H

#include "reader/reader_int.h"

/* The PerfSample fields the reader reads (the last of each wins). */
typedef struct rd_perf_sample {
  bool has_cpu, has_stack;
  uint32_t cpu, cpu_mode;
  int32_t pid, tid;
  uint64_t callstack_iid;
} rd_perf_sample;

/* Reads PerfSample `msg` into *out (zeroed first): EFORMAT naming the
 * field for a known one of the wrong wire type, or bytes that do not
 * decode. */
int etch__rd_perf_sample_read(etch_reader *r, const rd_src *src,
                              const uint8_t *msg, size_t len,
                              rd_perf_sample *out);
/* Resolves the sample's stack on `seq` and calls the sample callback, if
 * any. `ts_ok` false: the timestamp did not convert (counted, nothing
 * delivered). ETCH_ENOMEM / ETCH_ELIMIT from the stack tables. */
int etch__rd_perf_sample_deliver(etch_reader *r, rd_seq *seq,
                                 const rd_perf_sample *ps, bool ts_ok,
                                 int64_t ts, uint64_t rec_off);

#endif /* ETCH_READER_SAMPLES_H */

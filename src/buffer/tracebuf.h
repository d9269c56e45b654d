/*
 * tracebuf.h - the service's trace buffer: chunks that producers committed,
 * copied out of their shared memory buffers, kept until a consumer reads
 * them.
 *
 * Chunks are keyed by (sequence, chunk id), where the service gives every
 * (producer, writer) pair a sequence of its own, and kept in arrival order
 * with their exact size (no slots: a producer with small chunks uses as
 * much buffer as its data). When the buffer is full, a ring buffer drops
 * its oldest chunks and a discard buffer refuses new ones; either way the
 * loss is counted and shows on the sequence as a gap in chunk ids.
 *
 * A chunk whose id is already stored replaces it when it holds more: a
 * producer's flush sends a copy of a chunk still being written, and the
 * whole chunk later. Patches rewrite bytes of a stored chunk (a packet's
 * size that was not known when its chunk left the producer).
 *
 * Reading consumes: each whole packet is handed out once, sequence by
 * sequence in chunk id order; what was read is freed. A packet whose
 * fragments are not all there yet stays for the next read. A sequence with
 * a missing chunk goes on after the gap with `dropped_before` set on its
 * next packet; other sequences are untouched. Every size in a chunk is
 * checked against the chunk: the bytes come from a producer, which may
 * lie.
 */
#ifndef ETCH_BUFFER_TRACEBUF_H
#define ETCH_BUFFER_TRACEBUF_H

#include <stdbool.h>
#include <stdint.h>

#include "buffer/buffer.h"

typedef struct etch_tracebuf etch_tracebuf;

typedef struct etch_tracebuf_stats {
  uint64_t buffer_size;
  uint64_t bytes_written;      /* payload bytes of chunks stored */
  uint64_t chunks_written;
  uint64_t chunks_rewritten;   /* replaced by a longer copy */
  uint64_t chunks_overwritten; /* dropped by the ring before being read */
  uint64_t bytes_overwritten;
  uint64_t chunks_discarded;   /* refused: discard buffer full */
  uint64_t chunks_stale;       /* copies of chunks already read */
  uint64_t patches_succeeded;
  uint64_t patches_failed;     /* chunk gone or bytes out of range */
  uint64_t chunks_read;
  uint64_t bytes_read;
  uint64_t abi_violations;     /* fragments that did not fit their chunk */
  uint64_t sequence_gaps;      /* places where a sequence lost chunks */
  uint64_t read_stalls;        /* budgeted reads that got no further
                                  (a bug: never seen since fixed) */
} etch_tracebuf_stats;

int etch__tracebuf_new(uint64_t size, etch_buffer_fill fill,
                       etch_tracebuf **out);
void etch__tracebuf_free(etch_tracebuf *tb);

/* In put's flags: the copy was taken while its writer was still writing
 * the chunk (a flush's scrape, an in-process collect), so more of it
 * may follow. A sequence read up to such a copy, whose next chunk then
 * comes without the whole copy first, lost the copy's tail: the next
 * packet read says so (dropped_before), as after a gap in chunk ids. */
#define ETCH_TRACEBUF_PARTIAL (1u << 16)

/* Stores a copy of a chunk: `count` fragments in `payload`, `flags` the
 * SMB's FIRST/LAST_CONTINUES bits (and ETCH_TRACEBUF_PARTIAL). ETCH_ELIMIT when a discard buffer is
 * full, ETCH_EINVAL for a chunk larger than the whole buffer. */
int etch__tracebuf_put(etch_tracebuf *tb, uint32_t seq, uint32_t chunk_id,
                       uint32_t flags, uint32_t count, const uint8_t *payload,
                       uint32_t len);
/* Rewrites `len` bytes at `offset` of a stored chunk's payload;
 * ETCH_ENOTFOUND when the chunk is not (or no longer) there, ETCH_EINVAL
 * when the bytes fall outside it. */
int etch__tracebuf_patch(etch_tracebuf *tb, uint32_t seq, uint32_t chunk_id,
                         uint32_t offset, const uint8_t *data, uint32_t len);
/* Hands out every whole packet not read yet and frees what was read. */
int etch__tracebuf_read(etch_tracebuf *tb, etch_packet_fn emit, void *ctx);
/* The same, stopping at a packet's end once `budget` bytes of packets were
 * handed out (*more: there is more to read), so that a large buffer can
 * be read in pieces. */
int etch__tracebuf_read_some(etch_tracebuf *tb, etch_packet_fn emit,
                             void *ctx, uint64_t budget, bool *more);
/* The same, handing the runs of whole packets of a chunk to `run` at once
 * (the packets after lost data, and those of several chunks, still go to
 * `emit`): the same packets in the same order, fewer calls. */
int etch__tracebuf_read_runs(etch_tracebuf *tb, etch_packet_fn emit,
                             etch_packets_fn run, void *ctx, uint64_t budget,
                             bool *more);
void etch__tracebuf_stats(const etch_tracebuf *tb, etch_tracebuf_stats *out);
/* Grows with every read that moved a sequence's read position on: a read
 * that said *more without growing it made no progress. */
uint64_t etch__tracebuf_progress(const etch_tracebuf *tb);
/* Bytes held now. */
uint64_t etch__tracebuf_used(const etch_tracebuf *tb);
/* Per sequence, the track events in chunks the buffer discarded (full) or
 * overwrote before they were read, and when the first went. */
typedef struct etch_tracebuf_loss {
  uint32_t seq;
  uint64_t events;
  uint64_t first_ns; /* BOOTTIME */
  /* A discard buffer's: slices on the sequence's default track left open
   * where what it kept ends (0 when unknown: part was read before). */
  uint32_t open_depth;
} etch_tracebuf_loss;
/* Up to `cap` of them into out; returns how many sequences lost any. */
uint32_t etch__tracebuf_losses(const etch_tracebuf *tb,
                               etch_tracebuf_loss *out, uint32_t cap);

/* The sequences read from the buffer so far, in the order first read:
 * up to `cap` ids into out; returns how many there are. */
uint32_t etch__tracebuf_sequences(const etch_tracebuf *tb, uint32_t *out,
                                  uint32_t cap);

#endif /* ETCH_BUFFER_TRACEBUF_H */

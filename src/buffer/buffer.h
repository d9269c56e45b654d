/*
 * buffer.h - chunks and the trace buffer.
 *
 * A trace buffer is one block of memory cut into equal chunks:
 *
 *   +--------+--------+--------+--------+ ... +--------+
 *   | chunk0 | chunk1 | chunk2 | chunk3 |     | chunkN |
 *   +--------+--------+--------+--------+ ... +--------+
 *   chunk = [header 32 bytes][payload: fragment fragment fragment ...]
 *   fragment = [varint size][size bytes of one TracePacket, or part of one]
 *
 * A writer (one per thread and session) owns one chunk at a time and appends
 * fragments to it with no lock: after each complete packet it publishes the
 * payload length with a release store to `used`, so a reader can copy the
 * chunk's committed prefix at any moment. A packet too large for the rest of
 * a chunk continues in the writer's next chunk: the first chunk gets
 * LAST_CONTINUES, the next FIRST_CONTINUES, and the writer keeps every chunk
 * of the packet until it ends (nested lengths are patched in place).
 *
 * Chunk ids count up per writer, so the reader sees where chunks are missing
 * (overwritten in a ring, or never written) and marks the next packet of that
 * sequence with previous_packet_dropped.
 *
 * The header holds only fixed-width integers: the same layout can live in
 * shared memory between processes (no pointers, no size_t).
 */
#ifndef ETCH_BUFFER_H
#define ETCH_BUFFER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"

enum {
  ETCH_CHUNK_FREE = 0,
  ETCH_CHUNK_WRITING = 1,
  ETCH_CHUNK_COMPLETE = 2,
};

enum {
  ETCH_CHUNK_FIRST_CONTINUES = 1, /* first fragment continues a packet */
  ETCH_CHUNK_LAST_CONTINUES = 2,  /* last fragment continues in next chunk */
};

typedef struct etch_chunk {
  uint32_t state;     /* ETCH_CHUNK_*, atomic */
  uint32_t writer_id; /* trusted_packet_sequence_id of the writer */
  uint32_t chunk_id;  /* counts up per writer from 0 */
  /*
   * Committed payload bytes in the low 28 bits and ETCH_CHUNK_*_CONTINUES
   * in bits 28-29: one word, so a reader never sees flags that do not match
   * the length. Written by the owning writer with release stores.
   */
  uint32_t used;
  uint32_t reserved[4];
} etch_chunk;

#define ETCH_CHUNK_USED_MASK 0x0fffffffu
#define ETCH_CHUNK_FLAGS_SHIFT 28

ETCH_INLINE void etch__chunk_publish(etch_chunk *c, uint32_t used,
                                     uint32_t flags) {
  __atomic_store_n(&c->used, used | (flags << ETCH_CHUNK_FLAGS_SHIFT),
                   __ATOMIC_RELEASE);
}

#define ETCH_CHUNK_HEADER_SIZE ((uint32_t)sizeof(etch_chunk))

typedef enum etch_buffer_fill {
  ETCH_BUFFER_RING = 0,
  ETCH_BUFFER_DISCARD = 1,
} etch_buffer_fill;

typedef struct etch_buffer_stats {
  uint64_t buffer_size;
  uint64_t chunks_written;     /* chunks handed to writers */
  uint64_t chunks_overwritten; /* complete chunks reused by the ring */
  uint64_t bytes_overwritten;
  uint64_t chunks_discarded;   /* times a writer found no chunk and began
                                  dropping (etch__buffer_note_discard) */
  uint64_t write_wrap_count;
} etch_buffer_stats;

typedef struct etch_buffer {
  uint8_t *mem;
  uint32_t nchunks;
  uint32_t chunk_size; /* including header */
  etch_buffer_fill fill;
  pthread_mutex_t lock;
  uint32_t next;       /* ring cursor */
  uint32_t full;       /* discard: no free chunk left (atomic) */
  uint64_t acquired;   /* total acquisitions, atomic read */
  uint64_t discarded;  /* acquisitions refused, atomic */
  etch_buffer_stats stats;
  bool borrowed;       /* mem is someone else's (a flight file's mapping) */
  /* mem is not populated (a flight file's mapping): an acquired chunk's
   * pages are written once each there, out of line, so that no writer
   * takes a page fault on the hot path. */
  bool prefault;
  /* Chunks are taken back while the session records (etch__buffer_collect):
   * a discard buffer hands out freed chunks again. */
  bool recycle;
  /* A recycled discard buffer's freed chunks, the last freed on top: it
   * hands out the chunk freed last first, so a streaming session writes
   * over memory still in the cache and touches only as many chunks as it
   * holds at once (nchunks entries; NULL until recycled). */
  uint32_t *free_stack;
  uint32_t nfree;
} etch_buffer;

/* Chunk size used for a buffer of `size` bytes. */
uint32_t etch__buffer_chunk_size(uint64_t size);

/* The chunks a buffer of `size` bytes is cut into. */
void etch__buffer_geometry(uint64_t size, uint32_t *chunk_size,
                           uint32_t *nchunks);
int etch__buffer_init(etch_buffer *b, uint64_t size, etch_buffer_fill fill);
/* A buffer over memory the caller maps and unmaps (zeroed: every chunk
 * free), `nchunks` chunks of `chunk_size` bytes. */
void etch__buffer_init_at(etch_buffer *b, void *mem, uint32_t chunk_size,
                          uint32_t nchunks, etch_buffer_fill fill);
void etch__buffer_destroy(etch_buffer *b);

ETCH_INLINE etch_chunk *etch__buffer_chunk(const etch_buffer *b, uint32_t i) {
  return (etch_chunk *)(b->mem + (uint64_t)i * b->chunk_size);
}
ETCH_INLINE uint8_t *etch__chunk_payload(etch_chunk *c) {
  return (uint8_t *)c + ETCH_CHUNK_HEADER_SIZE;
}
ETCH_INLINE uint32_t etch__buffer_payload_size(const etch_buffer *b) {
  return b->chunk_size - ETCH_CHUNK_HEADER_SIZE;
}

/*
 * Hands a chunk to a writer (state WRITING, used 0). Ring: the oldest chunk
 * not being written, overwriting it if complete. Discard: a free chunk, or
 * NULL when none is left. NULL too when every chunk is being written.
 */
etch_chunk *etch__buffer_acquire(etch_buffer *b, uint32_t writer_id,
                                 uint32_t chunk_id, uint32_t flags);
/* Counts a writer that found no chunk and starts dropping events. */
ETCH_INLINE void etch__buffer_note_discard(etch_buffer *b) {
  __atomic_fetch_add(&b->discarded, 1, __ATOMIC_RELAXED);
}

/* Marks a chunk complete (the writer is done with it). */
void etch__buffer_complete(etch_chunk *c);

/*
 * Reading. etch__buffer_read() copies every chunk's committed data (under the
 * buffer lock) and calls `emit` for each whole packet, sequence by sequence
 * in chunk-id order. `dropped_before` is true for the first packet after
 * data of that sequence went missing. Packets cut by missing chunks are
 * counted in *lost_fragments.
 */
typedef int (*etch_packet_fn)(void *ctx, uint32_t writer_id,
                              const uint8_t *data, uint32_t len,
                              bool dropped_before);
/*
 * Optional beside an etch_packet_fn: `count` whole packets of sequence
 * `writer_id` at once, as a chunk stores them: each its size as a varint,
 * then its bytes (size 0: padding, no packet). None of them comes after
 * lost data (those go one by one). The sizes were checked: they fit in
 * data[0..len).
 */
typedef int (*etch_packets_fn)(void *ctx, uint32_t writer_id,
                               const uint8_t *data, uint32_t len,
                               uint32_t count);
int etch__buffer_read(etch_buffer *b, etch_packet_fn emit, void *ctx,
                      uint64_t *lost_fragments);

void etch__buffer_get_stats(etch_buffer *b, etch_buffer_stats *out);

/*
 * Streaming: a session that writes its trace while it records takes what
 * was committed out of its buffer as it goes. etch__buffer_collect copies
 * the committed bytes of every chunk into `tb` (the service's trace
 * buffer, which keeps a sequence's place from one read to the next and
 * reassembles packets across them); a chunk whose writer is done with it
 * is FREE again, for a ring to reuse before it overwrites anything and
 * for a discard buffer (etch__buffer_recycle) to hand out again. A chunk
 * still being written is copied as far as it is committed and copied
 * again, with more, next time (the trace buffer delivers only what is
 * new). The copies go into `tb` under the buffer's lock, with nothing in
 * between. *freed: the chunks freed.
 */
struct etch_tracebuf;
/* Makes a buffer streaming: a discard buffer then hands out the chunks
 * its collects free, the one freed last first, and gives back to the
 * system the memory of chunks it has not handed out yet (their pages are
 * faulted in again, out of line, when a chunk is first taken). */
void etch__buffer_recycle(etch_buffer *b);
int etch__buffer_collect(etch_buffer *b, struct etch_tracebuf *tb,
                         uint32_t *freed);

#endif /* ETCH_BUFFER_H */

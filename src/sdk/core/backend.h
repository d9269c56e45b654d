/*
 * backend.h - where a session's chunks come from and where they go.
 *
 * A writer fills chunks without locks; everything else about them goes
 * through its session's backend: handing a chunk out, taking a finished one
 * back, counting a writer that found none, and reading what was committed.
 * The in-process backend (backends/inproc.c) keeps the chunks in a trace
 * buffer of the process's own memory. Every call here is off the fast path
 * (one per chunk, not per event).
 */
#ifndef ETCH_SDK_BACKEND_H
#define ETCH_SDK_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "buffer/buffer.h"

typedef struct etch_backend etch_backend;
struct etch_tracebuf;

typedef struct etch_backend_ops {
  /* A chunk for writer `writer_id`'s chunk `chunk_id` (state WRITING,
   * nothing committed, `flags` its ETCH_CHUNK_*_CONTINUES bits), or NULL
   * when there is none to be had: the writer drops events. */
  etch_chunk *(*acquire)(etch_backend *b, uint32_t writer_id,
                         uint32_t chunk_id, uint32_t flags);
  /* Takes back a chunk the writer is done with (all it holds committed). */
  void (*complete)(etch_backend *b, etch_chunk *c);
  /* A writer found no chunk and starts dropping events. */
  void (*note_drop)(etch_backend *b);
  /* Chunks handed out so far, any writer (the ring's reset cadence). */
  uint64_t (*chunks_handed)(etch_backend *b);
  /* Calls `emit` for every whole packet committed, as etch__buffer_read. */
  int (*read)(etch_backend *b, etch_packet_fn emit, void *ctx,
              uint64_t *lost_fragments);
  void (*stats)(etch_backend *b, etch_buffer_stats *out);
  void (*destroy)(etch_backend *b);
  /* Optional. Set: the backend takes every packet as it is finished. The
   * writer calls it after each packet it publishes in `c` (its current
   * chunk) and never writes on the fast path. */
  void (*packet_done)(etch_backend *b, etch_chunk *c);
  /* Optional: the session starts (before its first event) and stops. */
  void (*start)(etch_backend *b);
  void (*stop)(etch_backend *b);
  /* Optional: writer `writer_id` is gone (its thread exited or its
   * session was freed), after its last chunk came back. */
  void (*writer_done)(etch_backend *b, uint32_t writer_id);
  /* Optional: in a fork child, frees the backend of a session of the
   * parent without touching its locks, threads, sockets or callbacks
   * (they are the parent's). A backend without it is kept, unused, where
   * LeakSanitizer sees it (etch__session_forget_inherited). */
  void (*forget)(etch_backend *b);
  /* Optional: the session's trace was written (its output file), so
   * nothing kept for a recovery (a flight file) is needed any more. */
  void (*trace_written)(etch_backend *b);
  /* Optional, both or neither: a session that writes its trace while it
   * records (stream.c). stream() says so before the session starts:
   * chunks that collect() freed are handed out again, and `wake(ctx)` is
   * called (from a writer taking a chunk, once per collect at most) when
   * a quarter of the buffer went out since the last collect. collect()
   * moves what was committed since the last one into `tb` (as
   * etch__buffer_collect). */
  void (*stream)(etch_backend *b, void (*wake)(void *ctx), void *ctx);
  int (*collect)(etch_backend *b, struct etch_tracebuf *tb);
} etch_backend_ops;

struct etch_backend {
  const etch_backend_ops *ops;
  uint32_t payload_size; /* bytes of payload in every chunk */
  /* Where a chunk's payload is, from its header, in bytes; 0: right after
   * it (etch__chunk_payload). The system backend's header follows its
   * payload in the shared memory (a negative offset). */
  int32_t payload_at;
  uint32_t chunk_size;   /* the same with the header */
  /* A writer resets its incremental state after this many chunks were
   * handed out since its last reset (0: never), so that a ring that wraps
   * quickly keeps a reset in its newest part. */
  uint64_t reset_span;
  /* The process's important events are written again after this many
   * chunks (0: after the session's reset interval, in time). */
  uint64_t replay_span;
};

/* An in-process backend with a trace buffer of `size` bytes; with
 * `flight`, in that flight file (removed when the session ends normally,
 * unless `keep`). */
int etch__backend_inproc_new(uint64_t size, etch_buffer_fill fill,
                             const char *flight, bool keep,
                             etch_backend **out);

/* fill=stall: once the session streams, a writer that finds the in-process
 * backend `b`'s buffer full waits for a collect instead of dropping. */
void etch__backend_inproc_stall(etch_backend *b);

/* A backend that gives every packet to the interceptor the config names
 * (intercept.c); its setup runs here and may fail the session. */
struct etch_config;
int etch__backend_intercept_new(const struct etch_config *cfg,
                                etch_backend **out);

#endif /* ETCH_SDK_BACKEND_H */

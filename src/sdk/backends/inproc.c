/*
 * inproc.c - the in-process backend: a session's chunks in a trace
 * buffer of the process's own memory (src/buffer), read back by the session
 * itself; with a flight file, that memory is the file's shared mapping
 * (buffer/flight.h), which outlives a process that dies.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "buffer/flight.h"
#include "sdk/core/backend.h"
#include "sdk/core/sdk.h"

typedef struct inproc {
  etch_backend base;
  etch_buffer buf;
  etch_flight flight; /* map NULL: anonymous memory */
  bool keep;          /* the flight file stays after a normal end */
} inproc;

static etch_chunk *inproc_acquire(etch_backend *b, uint32_t writer_id,
                                  uint32_t chunk_id, uint32_t flags) {
  return etch__buffer_acquire(&((inproc *)b)->buf, writer_id, chunk_id, flags);
}

static void inproc_complete(etch_backend *b, etch_chunk *c) {
  (void)b;
  etch__buffer_complete(c);
}

static void inproc_note_drop(etch_backend *b) {
  etch__buffer_note_discard(&((inproc *)b)->buf);
}

static uint64_t inproc_chunks_handed(etch_backend *b) {
  return __atomic_load_n(&((inproc *)b)->buf.acquired, __ATOMIC_RELAXED);
}

static int inproc_read(etch_backend *b, etch_packet_fn emit, void *ctx,
                       uint64_t *lost_fragments) {
  return etch__buffer_read(&((inproc *)b)->buf, emit, ctx, lost_fragments);
}

static void inproc_stats(etch_backend *b, etch_buffer_stats *out) {
  etch__buffer_get_stats(&((inproc *)b)->buf, out);
}

static void inproc_destroy(etch_backend *b) {
  if (!b) return;
  inproc *p = (inproc *)b;
  etch__buffer_destroy(&p->buf);
  etch__flight_close(&p->flight, p->keep);
  free(b);
}

/* The trace is written: the flight file is not needed to recover it. Its
 * name goes; the mapping stays until the session is freed (a thread may
 * still write an event it began before the stop). */
static void inproc_trace_written(etch_backend *b) {
  inproc *p = (inproc *)b;
  if (p->flight.path && !p->keep) unlink(p->flight.path);
}

/* Memory only: the buffer's lock may have been held by a thread of the
 * parent when it forked; the flight file is the parent's. */
static void inproc_forget(etch_backend *b) {
  inproc *p = (inproc *)b;
  if (p->flight.map)
    etch__flight_forget(&p->flight);
  else if (p->buf.mem)
    munmap(p->buf.mem, (size_t)p->buf.nchunks * p->buf.chunk_size);
  free(p);
}

static const etch_backend_ops inproc_ops = {
    .acquire = inproc_acquire,
    .complete = inproc_complete,
    .note_drop = inproc_note_drop,
    .chunks_handed = inproc_chunks_handed,
    .read = inproc_read,
    .stats = inproc_stats,
    .destroy = inproc_destroy,
    .forget = inproc_forget,
    .trace_written = inproc_trace_written,
};

int etch__backend_inproc_new(uint64_t size, etch_buffer_fill fill,
                             const char *flight, bool keep,
                             etch_backend **out) {
  *out = NULL;
  inproc *p = (inproc *)etch__calloc(1, sizeof *p);
  if (!p) return ETCH_ENOMEM;
  p->flight.fd = -1;
  p->keep = keep;
  int rc;
  if (flight) {
    etch_flight_id id = {.pid = etch__g.pid,
                         .process_uuid = etch__process_uuid(),
                         .process_name = program_invocation_short_name};
    rc = etch__flight_create(&p->flight, flight, size, fill, &id, &p->buf);
  } else {
    rc = etch__buffer_init(&p->buf, size, fill);
  }
  if (rc) {
    free(p);
    return rc;
  }
  p->base.ops = &inproc_ops;
  p->base.chunk_size = p->buf.chunk_size;
  p->base.payload_size = etch__buffer_payload_size(&p->buf);
  if (fill == ETCH_BUFFER_RING)
    p->base.reset_span = p->buf.nchunks / 4 ? p->buf.nchunks / 4 : 1;
  p->base.replay_span = p->base.reset_span;
  *out = &p->base;
  return ETCH_OK;
}

/*
 * inproc.c - the in-process backend: a session's chunks in a trace
 * buffer of the process's own memory (src/buffer), read back by the session
 * itself.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "sdk/core/backend.h"

typedef struct inproc {
  etch_backend base;
  etch_buffer buf;
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
  etch__buffer_destroy(&((inproc *)b)->buf);
  free(b);
}

/* Memory only: the buffer's lock may have been held by a thread of the
 * parent when it forked. */
static void inproc_forget(etch_backend *b) {
  inproc *p = (inproc *)b;
  if (p->buf.mem) munmap(p->buf.mem, (size_t)p->buf.nchunks * p->buf.chunk_size);
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
};

int etch__backend_inproc_new(uint64_t size, etch_buffer_fill fill,
                             etch_backend **out) {
  *out = NULL;
  inproc *p = (inproc *)etch__calloc(1, sizeof *p);
  if (!p) return ETCH_ENOMEM;
  int rc = etch__buffer_init(&p->buf, size, fill);
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

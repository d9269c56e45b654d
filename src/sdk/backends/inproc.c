/*
 * inproc.c - the in-process backend: a session's chunks in a trace
 * buffer of the process's own memory (src/buffer), read back by the session
 * itself; with a flight file, that memory is the file's shared mapping
 * (buffer/flight.h), which outlives a process that dies.
 *
 * Stall (fill=stall, a session that streams): a writer that finds the
 * buffer full wakes the session's streaming thread and waits until a
 * collect has freed chunks, then takes one, so nothing is dropped however
 * fast the program records. It waits on `collects`, a count of collects
 * (a futex); it gives up, and drops as with fill=discard, only when the
 * session stops, when two collects in a row after it asked freed nothing
 * (every chunk is being written by some thread: no collect can help), and
 * on etch's own threads (the streaming thread must never wait for itself).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/containers.h"
#include "buffer/flight.h"
#include "sdk/core/backend.h"
#include "sdk/core/sdk.h"

typedef struct inproc {
  etch_backend base;
  etch_buffer buf;
  etch_flight flight; /* map NULL: anonymous memory */
  bool keep;          /* the flight file stays after a normal end */
  /* A session that streams (stream.c): who to wake, when. */
  void (*wake)(void *ctx);
  void *wake_ctx;
  uint64_t wake_at;   /* chunks handed out (buf.acquired) to wake at */
  uint32_t woken;     /* atomic: woken since the last collect */
  bool stall;         /* fill=stall: a writer waits for room */
  uint32_t collects;  /* atomic, a futex: collects done (stall waiters) */
  uint32_t freed;     /* atomic: chunks the last collect freed */
  uint32_t stopped;   /* atomic: no more waiting (the session stops) */
} inproc;

static void futex_wait(uint32_t *addr, uint32_t val) {
  /* A bounded wait, so that a missed wake-up costs a tick, not a hang. */
  struct timespec t = {0, 50 * 1000000L};
  syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, &t, NULL, 0);
}

static void futex_wake_all(uint32_t *addr) {
  syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* The buffer is full and the session streams with fill=stall: waits for
 * collects until one frees a chunk this writer gets (see the top). */
static ETCH_NOINLINE etch_chunk *acquire_stall(inproc *p, uint32_t writer_id,
                                               uint32_t chunk_id,
                                               uint32_t flags) {
  int barren = 0; /* collects in a row that freed nothing */
  while (!__atomic_load_n(&p->stopped, __ATOMIC_ACQUIRE)) {
    uint32_t gen = __atomic_load_n(&p->collects, __ATOMIC_ACQUIRE);
    __atomic_store_n(&p->woken, 1, __ATOMIC_RELAXED);
    p->wake(p->wake_ctx);
    while (__atomic_load_n(&p->collects, __ATOMIC_ACQUIRE) == gen &&
           !__atomic_load_n(&p->stopped, __ATOMIC_ACQUIRE))
      futex_wait(&p->collects, gen);
    etch_chunk *c = etch__buffer_acquire(&p->buf, writer_id, chunk_id, flags);
    if (c) return c;
    /* The collect after the wake is the second one seen at most. */
    if (__atomic_load_n(&p->freed, __ATOMIC_RELAXED)) barren = 0;
    else if (++barren == 3) break;
  }
  return NULL;
}

static etch_chunk *inproc_acquire(etch_backend *b, uint32_t writer_id,
                                  uint32_t chunk_id, uint32_t flags) {
  inproc *p = (inproc *)b;
  etch_chunk *c = etch__buffer_acquire(&p->buf, writer_id, chunk_id, flags);
  if (ETCH_UNLIKELY(!c) && p->stall && p->wake && !etch__tls.internal)
    c = acquire_stall(p, writer_id, chunk_id, flags);
  if (ETCH_UNLIKELY(p->wake != NULL) &&
      (!c || __atomic_load_n(&p->buf.acquired, __ATOMIC_RELAXED) >=
                 __atomic_load_n(&p->wake_at, __ATOMIC_RELAXED)) &&
      !__atomic_exchange_n(&p->woken, 1, __ATOMIC_RELAXED))
    p->wake(p->wake_ctx);
  return c;
}

static void inproc_stream(etch_backend *b, void (*wake)(void *ctx),
                          void *ctx) {
  inproc *p = (inproc *)b;
  etch__buffer_recycle(&p->buf);
  p->wake_ctx = ctx;
  __atomic_store_n(&p->wake_at, (uint64_t)(p->buf.nchunks / 4 + 1),
                   __ATOMIC_RELAXED);
  p->wake = wake;
}

static int inproc_collect(etch_backend *b, struct etch_tracebuf *tb) {
  inproc *p = (inproc *)b;
  /* Woken again a quarter of the buffer after what this collect sees. */
  __atomic_store_n(&p->wake_at,
                   __atomic_load_n(&p->buf.acquired, __ATOMIC_RELAXED) +
                       p->buf.nchunks / 4 + 1,
                   __ATOMIC_RELAXED);
  __atomic_store_n(&p->woken, 0, __ATOMIC_RELAXED);
  uint32_t freed;
  int rc = etch__buffer_collect(&p->buf, tb, &freed);
  __atomic_store_n(&p->freed, freed, __ATOMIC_RELAXED);
  __atomic_add_fetch(&p->collects, 1, __ATOMIC_RELEASE);
  futex_wake_all(&p->collects);
  return rc;
}

/* The session stops: a writer waiting for room waits no more (its event
 * is dropped and counted, as with fill=discard). */
static void inproc_stop(etch_backend *b) {
  inproc *p = (inproc *)b;
  __atomic_store_n(&p->stopped, 1, __ATOMIC_RELEASE);
  futex_wake_all(&p->collects);
}

void etch__backend_inproc_stall(etch_backend *b) {
  ((inproc *)b)->stall = true;
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
    .stream = inproc_stream,
    .collect = inproc_collect,
    .stop = inproc_stop,
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

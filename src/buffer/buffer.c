/*
 * buffer.c - the trace buffer: chunk hand-out (ring or discard) and reading
 * whole packets back out of the chunks.
 */
#define _GNU_SOURCE
#include "buffer/buffer.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/containers.h"
#include "buffer/fragment.h"
#include "buffer/tracebuf.h"
#include "pb/pb.h"

uint32_t etch__buffer_chunk_size(uint64_t size) {
  if (size >= (4u << 20)) return 16384;
  if (size >= (256u << 10)) return 8192;
  return 4096;
}

void etch__buffer_geometry(uint64_t size, uint32_t *chunk_size,
                           uint32_t *nchunks) {
  *chunk_size = etch__buffer_chunk_size(size);
  uint64_t n = size / *chunk_size;
  if (n < 2) n = 2;
  if (n > UINT32_MAX / 2) n = UINT32_MAX / 2;
  *nchunks = (uint32_t)n;
}

static void init_common(etch_buffer *b, uint8_t *mem, uint32_t chunk_size,
                        uint32_t nchunks, etch_buffer_fill fill) {
  b->mem = mem;
  b->chunk_size = chunk_size;
  b->nchunks = nchunks;
  b->fill = fill;
  b->stats.buffer_size = (uint64_t)nchunks * chunk_size;
  pthread_mutex_init(&b->lock, NULL);
}

int etch__buffer_init(etch_buffer *b, uint64_t size, etch_buffer_fill fill) {
  memset(b, 0, sizeof *b);
  uint32_t cs, n;
  etch__buffer_geometry(size, &cs, &n);
  size_t bytes = (size_t)n * cs;
  void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (mem == MAP_FAILED)
    return etch__error(ETCH_ENOMEM, "cannot map a trace buffer of %zu bytes",
                       bytes);
  init_common(b, (uint8_t *)mem, cs, n, fill);
  return ETCH_OK;
}

void etch__buffer_init_at(etch_buffer *b, void *mem, uint32_t chunk_size,
                          uint32_t nchunks, etch_buffer_fill fill) {
  memset(b, 0, sizeof *b);
  init_common(b, (uint8_t *)mem, chunk_size, nchunks, fill);
  b->borrowed = true;
}

void etch__buffer_destroy(etch_buffer *b) {
  if (b->mem && !b->borrowed)
    munmap(b->mem, (size_t)b->nchunks * b->chunk_size);
  b->mem = NULL;
  free(b->free_stack);
  b->free_stack = NULL;
  pthread_mutex_destroy(&b->lock);
}

/* A chunk changes hands in an order that memory others read after this
 * process died (a flight file) can trust: FREE first, so that a death
 * half way leaves a chunk a reader skips, never the old payload under the
 * new writer's name; then who owns it, its length and flags, and WRITING
 * last, with release. Its states: FREE -> WRITING (acquire) -> COMPLETE
 * (complete) -> WRITING again when a ring reuses it; a read copies chunks
 * in any state under the lock. */
static void chunk_init(etch_chunk *c, uint32_t writer_id, uint32_t chunk_id,
                       uint32_t flags) {
  ETCH_DCHECK(__atomic_load_n(&c->state, __ATOMIC_RELAXED) !=
              ETCH_CHUNK_WRITING);
  ETCH_DCHECK((flags & ~3u) == 0);
  /* Release stores: each is seen after every store before it (on x86
   * plain moves). */
  __atomic_store_n(&c->state, ETCH_CHUNK_FREE, __ATOMIC_RELAXED);
  __atomic_store_n(&c->writer_id, writer_id, __ATOMIC_RELEASE);
  __atomic_store_n(&c->chunk_id, chunk_id, __ATOMIC_RELEASE);
  __atomic_store_n(&c->used, flags << ETCH_CHUNK_FLAGS_SHIFT, __ATOMIC_RELEASE);
  __atomic_store_n(&c->state, ETCH_CHUNK_WRITING, __ATOMIC_RELEASE);
}

etch_chunk *etch__buffer_acquire(etch_buffer *b, uint32_t writer_id,
                                 uint32_t chunk_id, uint32_t flags) {
  if (b->fill == ETCH_BUFFER_DISCARD &&
      __atomic_load_n(&b->full, __ATOMIC_RELAXED))
    return NULL;
  etch_chunk *got = NULL;
  pthread_mutex_lock(&b->lock);
  if (b->fill == ETCH_BUFFER_DISCARD && b->free_stack) {
    /* The chunk freed last (warm in the cache), else one never used. */
    if (b->nfree) {
      got = etch__buffer_chunk(b, b->free_stack[--b->nfree]);
      ETCH_DCHECK(__atomic_load_n(&got->state, __ATOMIC_RELAXED) ==
                  ETCH_CHUNK_FREE);
    } else if (b->next < b->nchunks) {
      got = etch__buffer_chunk(b, b->next++);
    } else {
      __atomic_store_n(&b->full, 1, __ATOMIC_RELAXED);
    }
  } else if (b->fill == ETCH_BUFFER_DISCARD && !b->recycle) {
    if (b->next < b->nchunks) {
      got = etch__buffer_chunk(b, b->next++);
      /* Handed out in order, once each. */
      ETCH_DCHECK(__atomic_load_n(&got->state, __ATOMIC_RELAXED) ==
                  ETCH_CHUNK_FREE);
    } else {
      __atomic_store_n(&b->full, 1, __ATOMIC_RELAXED);
    }
  } else {
    for (uint32_t k = 0; k < b->nchunks; k++) {
      etch_chunk *c = etch__buffer_chunk(b, b->next);
      if (++b->next == b->nchunks) {
        b->next = 0;
        b->stats.write_wrap_count++;
      }
      uint32_t st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
      if (st == ETCH_CHUNK_WRITING) continue;
      /* A discard buffer that is collected waits for its chunks to be
       * freed; it never overwrites one. */
      if (st == ETCH_CHUNK_COMPLETE && b->fill == ETCH_BUFFER_DISCARD)
        continue;
      if (st == ETCH_CHUNK_COMPLETE) {
        b->stats.chunks_overwritten++;
        b->stats.bytes_overwritten +=
            __atomic_load_n(&c->used, __ATOMIC_RELAXED) & ETCH_CHUNK_USED_MASK;
      }
      got = c;
      break;
    }
    if (!got && b->fill == ETCH_BUFFER_DISCARD)
      __atomic_store_n(&b->full, 1, __ATOMIC_RELAXED);
  }
  if (got) {
    chunk_init(got, writer_id, chunk_id, flags);
    /* Past `used` (0 now): bytes no reader reads, which the writer
     * overwrites; the store faults the page in the first time round. */
    if (b->prefault)
      for (uint32_t off = 4096; off < b->chunk_size; off += 4096)
        ((volatile uint8_t *)got)[off] = 0;
    b->stats.chunks_written++;
    __atomic_store_n(&b->acquired, b->acquired + 1, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&b->lock);
  return got;
}

void etch__buffer_complete(etch_chunk *c) {
  ETCH_DCHECK(__atomic_load_n(&c->state, __ATOMIC_RELAXED) ==
              ETCH_CHUNK_WRITING);
  __atomic_store_n(&c->state, ETCH_CHUNK_COMPLETE, __ATOMIC_RELEASE);
}

void etch__buffer_get_stats(etch_buffer *b, etch_buffer_stats *out) {
  pthread_mutex_lock(&b->lock);
  *out = b->stats;
  out->chunks_discarded =
      __atomic_load_n(&b->discarded, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&b->lock);
}

/* ---- reading ---------------------------------------------------------------- */

typedef struct snap_chunk {
  uint32_t writer_id;
  uint32_t chunk_id;
  uint32_t index; /* in the buffer */
} snap_chunk;

static int snap_cmp(const void *a, const void *b) {
  const snap_chunk *x = (const snap_chunk *)a, *y = (const snap_chunk *)b;
  if (x->writer_id != y->writer_id) return x->writer_id < y->writer_id ? -1 : 1;
  if (x->chunk_id != y->chunk_id) return x->chunk_id < y->chunk_id ? -1 : 1;
  return 0;
}

/* Copies chunk s's committed bytes into `into` (a chunk's payload of
 * room), under the lock; false when the chunk is no longer the one the
 * listing saw (a ring gave it to another writer meanwhile: its data is
 * lost, as if overwritten before the read). */
static bool copy_chunk(etch_buffer *b, const snap_chunk *s, uint8_t *into,
                       uint32_t *used, uint32_t *flags) {
  pthread_mutex_lock(&b->lock);
  etch_chunk *c = etch__buffer_chunk(b, s->index);
  bool same = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != ETCH_CHUNK_FREE &&
              c->writer_id == s->writer_id && c->chunk_id == s->chunk_id;
  if (same) {
    uint32_t word = __atomic_load_n(&c->used, __ATOMIC_ACQUIRE);
    *used = word & ETCH_CHUNK_USED_MASK;
    if (*used > etch__buffer_payload_size(b)) *used = 0; /* never trust */
    *flags = word >> ETCH_CHUNK_FLAGS_SHIFT;
    memcpy(into, etch__chunk_payload(c), *used);
  }
  pthread_mutex_unlock(&b->lock);
  return same;
}

int etch__buffer_read(etch_buffer *b, etch_packet_fn emit, void *ctx,
                      uint64_t *lost_fragments) {
  *lost_fragments = 0;
  /* The chunks' names first, then each chunk's bytes one at a time: what
   * the read holds besides the buffer is one chunk, not a copy of it. */
  snap_chunk *chunks = (snap_chunk *)etch__calloc(b->nchunks, sizeof *chunks);
  uint8_t *data = (uint8_t *)etch__malloc(etch__buffer_payload_size(b));
  if (!chunks || !data) {
    free(chunks);
    free(data);
    return ETCH_ENOMEM;
  }
  uint32_t n = 0;
  pthread_mutex_lock(&b->lock);
  for (uint32_t i = 0; i < b->nchunks; i++) {
    etch_chunk *c = etch__buffer_chunk(b, i);
    if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == ETCH_CHUNK_FREE)
      continue;
    chunks[n++] = (snap_chunk){c->writer_id, c->chunk_id, i};
  }
  pthread_mutex_unlock(&b->lock);

  qsort(chunks, n, sizeof *chunks, snap_cmp);

  int rc = ETCH_OK;
  etch_reasm r;
  etch__reasm_init(&r);
  for (uint32_t i = 0; i < n && rc == ETCH_OK; i++) {
    snap_chunk *s = &chunks[i];
    if (i == 0 || s->writer_id != chunks[i - 1].writer_id) {
      if (etch__reasm_lose(&r)) (*lost_fragments)++;
      etch__reasm_start(&r, 0, false);
    }
    uint32_t used, flags;
    if (!copy_chunk(b, s, data, &used, &flags)) continue; /* a gap */
    bool cut;
    if (!etch__reasm_chunk(&r, s->chunk_id, &cut) && cut) (*lost_fragments)++;

    etch_frag_cursor cur;
    etch__frag_init(&cur, data, used, ETCH_FRAG_UNCOUNTED, flags);
    const uint8_t *frag;
    uint32_t size;
    int k;
    while (rc == ETCH_OK &&
           (k = etch__frag_next(&cur, &frag, &size)) != ETCH_FRAG_END) {
      if (k != ETCH_FRAG_OK) { /* corrupt chunk: drop the rest of it */
        (*lost_fragments)++;
        etch__reasm_lose(&r);
        break;
      }
      const uint8_t *pkt;
      uint32_t plen;
      bool dropped, lost = false;
      rc = etch__reasm_fragment(&r, frag, size, etch__frag_cont_prev(&cur),
                                etch__frag_cont_next(&cur), &pkt, &plen,
                                &dropped, &lost);
      if (lost) (*lost_fragments)++;
      if (rc == ETCH_OK && plen)
        rc = emit(ctx, s->writer_id, pkt, plen, dropped);
    }
  }
  if (etch__reasm_lose(&r)) (*lost_fragments)++;
  etch__reasm_free(&r);
  free(data);
  free(chunks);
  return rc;
}

/* ---- streaming --------------------------------------------------------------- */

void etch__buffer_recycle(etch_buffer *b) {
  /* Without memory for the stack, the hand-out looks for a free chunk
   * round the buffer instead, as a ring does. */
  uint32_t *stack =
      b->fill == ETCH_BUFFER_DISCARD
          ? (uint32_t *)etch__malloc((size_t)b->nchunks * sizeof *stack)
          : NULL;
  pthread_mutex_lock(&b->lock);
  b->recycle = true;
  if (stack && !b->free_stack) {
    b->free_stack = stack;
    stack = NULL;
    b->nfree = 0;
    /* Chunks past `next` were never handed out (a discard buffer hands
     * them out in order): their pages go back, and come again one chunk
     * at a time, faulted in by the hand-out rather than by a writer. */
    if (!b->borrowed && b->next < b->nchunks) {
      size_t at = (size_t)b->next * b->chunk_size;
      madvise(b->mem + at, (size_t)b->nchunks * b->chunk_size - at,
              MADV_DONTNEED);
      b->prefault = true;
    }
  }
  pthread_mutex_unlock(&b->lock);
  free(stack);
}

int etch__buffer_collect(etch_buffer *b, etch_tracebuf *tb, uint32_t *freed) {
  *freed = 0;
  int rc = ETCH_OK;
  /* Straight into the trace buffer, under the lock, in the order the
   * chunks lie (it sorts them by sequence and chunk id when it is read):
   * no copy of the whole buffer in between, which doubled a streaming
   * session's memory when a drain took all of it. */
  pthread_mutex_lock(&b->lock);
  for (uint32_t i = 0; i < b->nchunks; i++) {
    etch_chunk *c = etch__buffer_chunk(b, i);
    uint32_t st = __atomic_load_n(&c->state, __ATOMIC_ACQUIRE);
    if (st == ETCH_CHUNK_FREE) continue;
    uint32_t word = __atomic_load_n(&c->used, __ATOMIC_ACQUIRE);
    uint32_t used = word & ETCH_CHUNK_USED_MASK;
    if (used > etch__buffer_payload_size(b)) used = 0; /* never trust */
    uint32_t flags = word >> ETCH_CHUNK_FLAGS_SHIFT;
    /* A chunk its writer still writes: what follows comes with a later
     * collect, or is lost if the ring takes the chunk first. */
    if (st == ETCH_CHUNK_WRITING) flags |= ETCH_TRACEBUF_PARTIAL;
    const uint8_t *payload = etch__chunk_payload(c);
    int prc = etch__tracebuf_put(tb, c->writer_id, c->chunk_id, flags,
                                 etch__frag_count(payload, used), payload,
                                 used);
    if (prc == ETCH_ENOMEM) {
      /* This chunk and the rest stay for the next collect. A full trace
       * buffer counts what it could not keep (a gap the read marks); only
       * memory is this caller's failure. */
      rc = ETCH_ENOMEM;
      break;
    }
    if (st == ETCH_CHUNK_COMPLETE) {
      /* Its writer is done with it, and its bytes are in the copy. */
      __atomic_store_n(&c->state, ETCH_CHUNK_FREE, __ATOMIC_RELEASE);
      if (b->free_stack) {
        ETCH_DCHECK(b->nfree < b->nchunks);
        b->free_stack[b->nfree++] = i;
      }
      (*freed)++;
    }
  }
  if (*freed) __atomic_store_n(&b->full, 0, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&b->lock);
  return rc;
}

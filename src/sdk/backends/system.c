/*
 * system.c - the system backend: the process is a producer of a
 * tracing service (etchd, or Perfetto's traced) and its sessions are the
 * data source instances the service starts.
 *
 * One background thread per process holds the connection: it binds the
 * producer port, initializes the connection, registers the `track_event`
 * data source with the process's categories and listens for the service's
 * commands (SetupTracing brings the shared memory buffer, Start/Stop
 * DataSource make and end an etch session with this backend, Flush asks
 * for what writers hold). When there is no service it waits and tries
 * again; when the service goes away its sessions end and it reconnects.
 *
 * Writers fill chunks exactly as in process (one encoder, one fast path),
 * in place in the shared memory buffer: taking a chunk reserves a free
 * chunk of it (Perfetto's layout) and puts etch's own chunk header in the
 * last 32 bytes of its payload, where the writer publishes what it
 * committed after every packet (smb.h: chunks written in place), so a
 * service that salvages a producer killed with SIGKILL finds every event
 * it had published. Completing it (once per chunk, on the writer's slow
 * path) sets the count (the fragments are where Perfetto's layout has
 * them: no copy) and queues a CommitData that the thread sends in
 * batches. Only that thread touches
 * the connection (at exit too: the exit handler asks it for a last flush
 * and waits a bounded time). Nothing here waits for the service: with no
 * free chunk in the shared buffer the writer gets none and drops events,
 * counted and reported on its sequence as in process. A flush copies the published part of every
 * chunk still being written (the service keeps the longer copy when the
 * whole chunk follows). See docs/backends.md.
 *
 * This file has the backend's ops and the shared memory; the thread that
 * talks to the service is in system_ipc.c; system.h has what they share.
 */
#define _GNU_SOURCE
#ifndef ETCH_NO_SYSTEM_BACKEND /* else nothing: see system_ipc.c */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buffer/fragment.h"
#include "buffer/smb.h"
#include "pb/pb.h"
#include "sdk/core/sdk.h"
#include "sdk/backends/system.h"

/* etch_chunk as smb.h's chunks written in place read it. */
_Static_assert(sizeof(etch_chunk) == ETCH_SMB_INPLACE_HEADER &&
                   offsetof(etch_chunk, writer_id) == 4 &&
                   offsetof(etch_chunk, chunk_id) == 8 &&
                   offsetof(etch_chunk, used) == 12 &&
                   offsetof(etch_chunk, reserved) + 3 * 4 == 28,
               "etch_chunk's layout in the shared memory");
/* How long writers drop without looking once the shared memory is full. */
#define FULL_BACKOFF_NS 200000ull

struct etch__sys_producer P = {.lock = PTHREAD_MUTEX_INITIALIZER,
                               .smb_rw = PTHREAD_RWLOCK_INITIALIZER,
                               .exit_cond = PTHREAD_COND_INITIALIZER,
                               .wake = -1};

/* ---- the shared buffer (under P.lock) ---- */

/* Takes a free chunk of the shared memory (state being written, its
 * header's ids and flags set) and says where in res: page, chunk, mapping
 * generation, 1. Under `smb_rw` for reading: writers take chunks in
 * parallel, each one it won by compare-and-swap. */
static bool smb_reserve(uint32_t writer_id, uint32_t chunk_id, uint32_t flags,
                        uint32_t res[4]) {
  pthread_rwlock_rdlock(&P.smb_rw);
  bool ok = false;
  uint32_t nchunks = P.have_smb ? etch__smb_layout_chunks(SYS_LAYOUT) : 0;
  uint32_t start = __atomic_load_n(&P.cursor, __ATOMIC_RELAXED);
  for (uint32_t k = 0; nchunks && k < P.smb.npages && !ok; k++) {
    uint32_t page = (start + k) % P.smb.npages;
    uint32_t layout = etch__smb_bitmap_layout(etch__smb_bitmap(&P.smb, page));
    if (layout == ETCH_SMB_NOT_PARTITIONED) {
      etch__smb_try_partition(&P.smb, page, SYS_LAYOUT);
      layout = etch__smb_bitmap_layout(etch__smb_bitmap(&P.smb, page));
    }
    if (layout != SYS_LAYOUT) continue;
    for (uint32_t i = 0; i < nchunks && !ok; i++) {
      if (!etch__smb_try_acquire_write(
              &P.smb, page, i, (uint16_t)writer_id, chunk_id,
              (uint16_t)(flags & (ETCH_SMB_FIRST_CONTINUES |
                                  ETCH_SMB_LAST_CONTINUES))))
        continue;
      res[0] = page;
      res[1] = i;
      res[2] = P.smb_gen;
      res[3] = 1;
      __atomic_store_n(&P.cursor, page, __ATOMIC_RELAXED);
      ok = true;
    }
  }
  pthread_rwlock_unlock(&P.smb_rw);
  return ok;
}

/* Fills the chunk reserved at res with `used` bytes of fragments from src
 * and marks it complete; *cm says what to commit. False when the mapping
 * it was reserved in is gone (the service went away meanwhile). */
static bool smb_fill(sysb *b, const uint8_t *src, uint32_t used,
                     uint32_t flags, const uint32_t res[4], commit *cm,
                     uint32_t *gen) {
  pthread_rwlock_rdlock(&P.smb_rw);
  bool ok = P.have_smb && res[3] && res[2] == P.smb_gen;
  if (ok) {
    uint32_t csize = etch__smb_chunk_size(P.smb.page_size, SYS_LAYOUT);
    uint8_t *dst = etch__smb_chunk_at(&P.smb, res[0], SYS_LAYOUT, res[1]);
    /* The writer's chunk has the mapping's chunk size; only a writer of an
     * instance of an older mapping that raced a reconnect (it reserved in
     * the new one) could hold more: not an ETCH_NEVER. */
    if (used > csize - ETCH_SMB_CHUNK_HEADER) used = 0;
    /* A chunk of an instance that ended goes whole too: the service drops
     * it (the session is gone) or keeps it; one committed empty after a
     * flush copied part of it would have fewer packets than that copy,
     * which Perfetto's service counts as an ABI violation. */
    /* The writer's own chunk (in place: its bytes are there) or another's
     * (a flush's copy). */
    if (src != dst + ETCH_SMB_CHUNK_HEADER)
      memcpy(dst + ETCH_SMB_CHUNK_HEADER, src, used);
    /* The fragments in the published payload, the shared memory's walk
     * (a fragment whose bytes run past it is not counted). */
    uint32_t count = etch__frag_count(dst + ETCH_SMB_CHUNK_HEADER, used);
    if (count > ETCH_SMB_MAX_COUNT) count = ETCH_SMB_MAX_COUNT;
    uint16_t f = (uint16_t)(flags & (ETCH_SMB_FIRST_CONTINUES |
                                     ETCH_SMB_LAST_CONTINUES));
    etch_smb_chunk_header *h = (etch_smb_chunk_header *)dst;
    /* After the bytes: a service scraping the chunk meanwhile sees a count
     * only for fragments that are there. */
    __atomic_store_n(&h->packets, (uint16_t)(count | (uint32_t)f << 10),
                     __ATOMIC_RELEASE);
    etch__smb_release_complete(&P.smb, res[0], res[1]);
    cm->page = res[0];
    cm->chunk = res[1];
    cm->buffer = b->target_buffer;
    *gen = P.smb_gen;
  }
  pthread_rwlock_unlock(&P.smb_rw);
  return ok;
}

/* A writer's payload: before its header (smb.h's chunks written in
 * place). */
static const uint8_t *payload_of(const sysb *b, const etch_chunk *c) {
  return (const uint8_t *)c + b->base.payload_at;
}

/* The writer's chunk header in the shared memory's chunk reserved at res:
 * its last 32 bytes (under smb_rw, the mapping of generation res[2]). */
static etch_chunk *chunk_in_place(const uint32_t res[4]) {
  return (etch_chunk *)(etch__smb_chunk_at(&P.smb, res[0], SYS_LAYOUT, res[1]) +
                        etch__smb_chunk_size(P.smb.page_size, SYS_LAYOUT) -
                        ETCH_CHUNK_HEADER_SIZE);
}

/* A copy of a chunk's published part in a chunk of the shared memory of
 * its own (a flush's copy of a chunk still being written). */
static bool copy_out(sysb *b, const etch_chunk *c, uint32_t used,
                     uint32_t flags, commit *cm, uint32_t *gen) {
  uint32_t res[4];
  if (__atomic_load_n(&b->dead, __ATOMIC_ACQUIRE) ||
      !smb_reserve(c->writer_id, c->chunk_id, flags, res))
    return false;
  return smb_fill(b, payload_of(b, c), used, flags, res, cm, gen);
}

/* Reserves the shared memory's chunk for a writer's chunk when the writer
 * takes it, so that completing it can never find the shared memory full:
 * a writer that gets none drops events (counted and reported, as in
 * process) instead of losing a whole chunk it already wrote. The
 * reservation is kept in the private chunk's reserved words. */
uint64_t etch__sys_full_until; /* atomic: no free chunk was found before this */

/* ETCH_SYSTEM_STALL_MS: how long a writer may wait for a free chunk of a
 * full shared memory before it drops (0, the default: it drops at once). */
uint64_t etch__sys_stall_ns;

static etch_chunk *reserve_chunk(sysb *b, uint32_t writer_id,
                                 uint32_t chunk_id, uint32_t flags,
                                 uint64_t now) {
  /* Once the shared memory was found full, writers drop for a while
   * instead of each scanning it again for every event (sys_acquire checks
   * `etch__sys_full_until` with `now` first). */
  uint64_t until = now + etch__sys_stall_ns;
  uint32_t res[4];
  for (;;) {
    if (__atomic_load_n(&b->dead, __ATOMIC_RELAXED)) return NULL;
    if (smb_reserve(writer_id, chunk_id, flags, res)) {
      /* Its header, in the payload: published before the writer has it. A
       * reconnect may have replaced the mapping since the reservation
       * (the chunk is then in memory of this process's own). */
      pthread_rwlock_rdlock(&P.smb_rw);
      etch_chunk *c = NULL;
      if (P.have_smb && res[2] == P.smb_gen) {
        c = chunk_in_place(res);
        memset(c, 0, ETCH_CHUNK_HEADER_SIZE);
        c->writer_id = writer_id;
        c->chunk_id = chunk_id;
        c->reserved[0] = res[0];
        c->reserved[1] = res[1];
        c->reserved[2] = res[2];
        etch__chunk_publish(c, 0, flags);
        __atomic_store_n(&c->reserved[3], ETCH_SMB_INPLACE_MAGIC,
                         __ATOMIC_RELEASE);
        __atomic_store_n(&c->state, ETCH_CHUNK_WRITING, __ATOMIC_RELEASE);
      }
      pthread_rwlock_unlock(&P.smb_rw);
      if (c) return c;
      continue;
    }
    if (!etch__sys_stall_ns || now >= until) break;
    /* Asked to wait: the commits waiting for a batch go now, and the
     * writer looks again in a while. */
    etch__sys_wake_thread();
    struct timespec d = {0, 20000};
    nanosleep(&d, NULL);
    now = etch__monotonic_ns();
  }
  __atomic_store_n(&etch__sys_full_until, now + FULL_BACKOFF_NS,
                   __ATOMIC_RELAXED);
  return NULL;
}

/* Completes the writer's chunk in place with its published part (see
 * smb_fill). */
static bool fill_reserved(sysb *b, const etch_chunk *c, uint32_t used,
                          uint32_t flags, commit *cm, uint32_t *gen) {
  uint32_t res[4] = {c->reserved[0], c->reserved[1], c->reserved[2],
                     c->reserved[3]};
  return smb_fill(b, payload_of(b, c), used, flags, res, cm, gen);
}

/* The fewest chunks to a page whose payload stays at most 5115 bytes: a
 * chunk's header counts at most 1023 fragments and no packet etch writes
 * is under 5 bytes (4 KiB pages: 1 chunk, 8 KiB: 2, 16 KiB: 4, 32 KiB: 7,
 * 64 KiB: 14). */
uint32_t etch__sys_layout(uint32_t page_size) {
  for (uint32_t l = ETCH_SMB_DIV1; l <= ETCH_SMB_DIV14; l++)
    if (etch__smb_chunk_size(page_size, l) - ETCH_SMB_CHUNK_HEADER <=
        ETCH_SMB_MAX_COUNT * 5u)
      return l;
  return ETCH_SMB_DIV14;
}

/* Queues a commit (under P.lock); false when it is for an older mapping. */
static bool push_commit(const commit *cm, uint32_t gen) {
  if (gen != P.smb_gen || P.ncommits == P.capcommits) return false;
  P.commits[P.ncommits++] = *cm;
  return true;
}

/* ---- backend ops ---- */

static void sys_complete(etch_backend *be, etch_chunk *c);

static etch_chunk *sys_acquire(etch_backend *be, uint32_t writer_id,
                               uint32_t chunk_id, uint32_t flags) {
  sysb *b = (sysb *)be;
  /* While the shared memory is full (or the instance gone) a writer asks
   * for a chunk at every event it drops: answered before any lock. */
  uint64_t now = etch__monotonic_ns();
  if (__atomic_load_n(&b->dead, __ATOMIC_RELAXED) ||
      (!etch__sys_stall_ns &&
       now < __atomic_load_n(&etch__sys_full_until, __ATOMIC_RELAXED)))
    return NULL;
  etch_chunk *c = reserve_chunk(b, writer_id, chunk_id, flags, now);
  if (!c) return NULL; /* the writer drops, counts and reports */
  pthread_mutex_lock(&P.lock);
  if (b->nout == b->capout) {
    uint32_t cap = b->capout ? b->capout * 2 : 16;
    etch_chunk **n = (etch_chunk **)etch__realloc(b->out, cap * sizeof *n);
    if (!n) { /* keep the reservation: completed at once, empty */
      pthread_mutex_unlock(&P.lock);
      etch__chunk_publish(c, 0, flags);
      sys_complete(be, c);
      return NULL;
    }
    b->out = n;
    b->capout = cap;
  }
  b->out[b->nout++] = c;
  __atomic_store_n(&b->handed, b->handed + 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&P.lock);
  return c;
}

static void sys_complete(etch_backend *be, etch_chunk *c) {
  sysb *b = (sysb *)be;
  uint32_t word = __atomic_load_n(&c->used, __ATOMIC_ACQUIRE);
  pthread_mutex_lock(&P.lock);
  for (uint32_t i = 0; i < b->nout; i++)
    if (b->out[i] == c) {
      b->out[i] = b->out[--b->nout];
      break;
    }
  pthread_mutex_unlock(&P.lock);
  commit cm;
  uint32_t gen = 0;
  bool ok = fill_reserved(b, c, word & ETCH_CHUNK_USED_MASK,
                          word >> ETCH_CHUNK_FLAGS_SHIFT, &cm, &gen);
  pthread_mutex_lock(&P.lock);
  if (ok) ok = push_commit(&cm, gen);
  if (!ok && !__atomic_load_n(&b->dead, __ATOMIC_RELAXED)) P.chunks_lost++;
  if (ok && P.ncommits == P.commit_batch) etch__sys_wake_thread();
  pthread_mutex_unlock(&P.lock);
}

static void sys_note_drop(etch_backend *be) {
  sysb *b = (sysb *)be;
  __atomic_fetch_add(&b->drops, 1, __ATOMIC_RELAXED);
}

static uint64_t sys_chunks_handed(etch_backend *be) {
  return __atomic_load_n(&((sysb *)be)->handed, __ATOMIC_RELAXED);
}

static int sys_read(etch_backend *be, etch_packet_fn emit, void *ctx,
                    uint64_t *lost) {
  (void)be, (void)emit, (void)ctx;
  *lost = 0;
  return etch__error(ETCH_EUNSUPPORTED, "a session of the system backend is "
                     "read by the tracing service's consumer, not here");
}

static void sys_stats(etch_backend *be, etch_buffer_stats *out) {
  sysb *b = (sysb *)be;
  memset(out, 0, sizeof *out);
  out->chunks_written = __atomic_load_n(&b->handed, __ATOMIC_RELAXED);
  out->chunks_discarded = __atomic_load_n(&b->drops, __ATOMIC_RELAXED);
}

static void sys_destroy(etch_backend *be) {
  sysb *b = (sysb *)be;
  if (!b) return;
  pthread_mutex_lock(&P.lock);
  for (uint32_t i = 0; i < P.ninst; i++)
    if (P.inst[i].b == b) P.inst[i].b = NULL;
  pthread_mutex_unlock(&P.lock);
  free(b->out);
  free(b);
}

const etch_backend_ops etch__sys_ops = {
    .acquire = sys_acquire,
    .complete = sys_complete,
    .note_drop = sys_note_drop,
    .chunks_handed = sys_chunks_handed,
    .read = sys_read,
    .stats = sys_stats,
    .destroy = sys_destroy,
};

/* ---- emulated shared memory: the thread's queue ---- */

static bool outq_push(const commit *cm, uint8_t *copy) {
  if (P.outq_head && P.outq_head == P.outq_len) P.outq_head = P.outq_len = 0;
  if (P.outq_len == P.outq_cap) {
    if (P.outq_head) { /* room at the front: move the queue there */
      memmove(P.outq, P.outq + P.outq_head,
              (P.outq_len - P.outq_head) * sizeof *P.outq);
      P.outq_len -= P.outq_head;
      P.outq_head = 0;
    } else {
      uint32_t cap = P.outq_cap ? P.outq_cap * 2 : 64;
      outgoing *n = (outgoing *)etch__realloc(P.outq, cap * sizeof *n);
      if (!n) return false;
      P.outq = n;
      P.outq_cap = cap;
    }
  }
  P.outq[P.outq_len].cm = *cm;
  P.outq[P.outq_len].copy = copy;
  P.outq_len++;
  return true;
}

void etch__sys_queue_commits(void) {
  uint32_t k = 0;
  for (; k < P.ncommits; k++)
    if (!outq_push(&P.commits[k], NULL)) break;
  /* Out of memory for the queue: the rest waits in P.commits (the
   * chunks stay COMPLETE meanwhile). */
  if (k) memmove(P.commits, P.commits + k, (P.ncommits - k) * sizeof *P.commits);
  P.ncommits -= k;
}

void etch__sys_outq_clear(void) {
  for (uint32_t i = P.outq_head; i < P.outq_len; i++) free(P.outq[i].copy);
  P.outq_head = P.outq_len = 0;
}

/*
 * A flush's copy of a chunk still being written, for a service that
 * emulates shared memory: the whole chunk (its size never changes between
 * the copies the service gets of it) with what the writer published, sent
 * with chunk_incomplete. Such a service, as Perfetto's, leaves out the
 * last fragment the header counts (it may be the one being written): so
 * the copy ends with an empty fragment that counts as that one (a size
 * reserved, as a writer's next packet starts), unless the last published
 * fragment goes on in the next chunk (then it is the one left out, whole
 * when the chunk comes complete).
 */
static void emul_scrape(sysb *b, const etch_chunk *c, uint32_t used,
                        uint32_t flags) {
  uint32_t csize = etch__smb_chunk_size(P.smb.page_size, SYS_LAYOUT);
  if (used > csize - ETCH_SMB_CHUNK_HEADER - ETCH_FRAG_SIZE_BYTES) return;
  uint8_t *copy = (uint8_t *)etch__malloc(csize);
  if (!copy) {
    P.chunks_lost++;
    return;
  }
  uint8_t *payload = copy + ETCH_SMB_CHUNK_HEADER;
  memcpy(payload, payload_of(b, c), used);
  uint32_t count = etch__frag_count(payload, used);
  uint32_t f = flags & (ETCH_SMB_FIRST_CONTINUES | ETCH_SMB_LAST_CONTINUES);
  uint32_t end = used;
  if (!(f & ETCH_SMB_LAST_CONTINUES) && count < ETCH_SMB_MAX_COUNT) {
    etch__pb_put_redundant4(payload + used, 0);
    end += ETCH_FRAG_SIZE_BYTES;
    count++;
  }
  memset(payload + end, 0, csize - ETCH_SMB_CHUNK_HEADER - end);
  etch_smb_chunk_header h = {
      .chunk_id = c->chunk_id,
      .writer_id = (uint16_t)c->writer_id,
      .packets = (uint16_t)(count | f << 10),
  };
  memcpy(copy, &h, sizeof h);
  commit cm = {c->reserved[0], c->reserved[1], b->target_buffer};
  if (!outq_push(&cm, copy)) {
    free(copy);
    P.chunks_lost++;
  }
}

/* Copies what every chunk being written has published (under P.lock). */
void etch__sys_scrape(sysb *b) {
  if (P.emulate) {
    /* What completed before goes first: a chunk completed after this
     * copy must reach the service after it (a later copy of a chunk may
     * only have more fragments). */
    etch__sys_queue_commits();
    for (uint32_t i = 0; i < b->nout; i++) {
      etch_chunk *c = b->out[i];
      uint32_t word = __atomic_load_n(&c->used, __ATOMIC_ACQUIRE);
      uint32_t used = word & ETCH_CHUNK_USED_MASK;
      if (used) emul_scrape(b, c, used, word >> ETCH_CHUNK_FLAGS_SHIFT);
    }
    return;
  }
  for (uint32_t i = 0; i < b->nout; i++) {
    etch_chunk *c = b->out[i];
    uint32_t word = __atomic_load_n(&c->used, __ATOMIC_ACQUIRE);
    uint32_t used = word & ETCH_CHUNK_USED_MASK;
    /* A chunk that ends in a packet still open is copied with that flag:
     * the service keeps the packet until its end comes. */
    commit cm;
    uint32_t gen = 0;
    if (used && !(copy_out(b, c, used, word >> ETCH_CHUNK_FLAGS_SHIFT, &cm,
                           &gen) &&
                  push_commit(&cm, gen)))
      P.chunks_lost++;
  }
}

#endif /* ETCH_NO_SYSTEM_BACKEND */

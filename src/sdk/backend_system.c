/*
 * backend_system.c - the system backend: the process is a producer of a
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
 * Writers fill chunks of their own memory exactly as in process (one
 * encoder, one fast path). Taking a chunk reserves a free chunk of the
 * shared memory buffer (Perfetto's layout) for it; completing it (once per
 * chunk, on the writer's slow path) copies it there and queues a
 * CommitData that the thread sends in batches. Only that thread touches
 * the connection (at exit too: the exit handler asks it for a last flush
 * and waits a bounded time). Nothing here waits for the service: with no
 * free chunk in the shared buffer the writer gets none and drops events,
 * counted and reported on its sequence as in process. A flush copies the published part of every
 * chunk still being written (the service keeps the longer copy when the
 * whole chunk follows). See docs/backends.md.
 */
#define _GNU_SOURCE
#ifdef ETCH_NO_SYSTEM_BACKEND
#include "sdk/sdk.h"

int etch_system_start(const char *producer_name) {
  (void)producer_name;
  return etch__error(ETCH_EUNSUPPORTED, "this libetch was built without the "
                     "system backend (ETCH_SYSTEM_BACKEND=OFF)");
}
#else
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buffer/smb.h"
#include "ipc/ipc.h"
#include "proto/ipc.h"
#include "sdk/envvars.h"
#include "sdk/sdk.h"

/* The page layout used: set with the shared memory (sys_layout). */
#define SYS_LAYOUT P.layout
#define MAX_INSTANCES ETCH_MAX_SESSIONS
#define RETRY_MS 500
/* Commits wait for a batch of chunks (a sixteenth of the shared memory's
 * chunks, between COMMIT_BATCH_MIN and COMMIT_BATCH_MAX), or for the
 * thread's next round (at most COMMIT_PERIOD_MS), so that a busy writer
 * does not wake the thread (and the service) for every few chunks: each
 * wake is a system call on the writer's slow path and a round trip of two
 * threads and etchd, which, at 16 chunks a batch, could not keep up with
 * one thread writing instants (it lost a sixth of them). */
#define COMMIT_BATCH_MIN 16u
#define COMMIT_BATCH_MAX 256u
#define COMMIT_PERIOD_MS 10
#define POOL_MAX 64u
/* A writer resets its incremental state (descriptors, interned names)
 * after this many chunks of the process were handed out since its last
 * reset: the service's ring, whose size the producer cannot see, then
 * keeps a reset of every writer that wrote in its newest ~75 KiB (16
 * chunks of at most 4.6 KiB), and what a wrap leaves decodes (Perfetto's
 * service drops every packet of a sequence that lost its incremental
 * state). A ring of less than ~4 times that can still lose all of a
 * thread that stopped writing while others went on. Costs one set of
 * descriptors and names per 16 chunks. */
#define RESET_SPAN 16u
/* How long writers drop without looking once the shared memory is full. */
#define FULL_BACKOFF_NS 200000ull

typedef struct sysb sysb;

typedef struct commit {
  uint32_t page, chunk, buffer;
} commit;

typedef struct sys_instance {
  uint64_t id;
  etch_session *s;
  sysb *b;
} sys_instance;

/* The process's producer. The connection is the thread's alone; the shared
 * memory's mapping is held by `smb_rw` (read: a chunk being copied in;
 * write: mapping or unmapping it); the rest is under `lock`, taken before
 * `smb_rw` when both are. */
static struct {
  pthread_mutex_t lock;
  pthread_rwlock_t smb_rw;
  pthread_cond_t exit_cond;
  bool started, exit_req, exit_done;
  pthread_t thread;
  int wake; /* eventfd */
  char name[128];
  etch_ipc_conn conn;
  bool connected;
  uint32_t svc;
  uint32_t m_init, m_register, m_commit, m_async, m_stopped, m_started;
  uint64_t next_req, async_req;
  uint8_t *smb_mem;
  uint64_t smb_size;
  uint32_t layout; /* how pages are cut, for this mapping */
  etch_smb smb;
  bool have_smb;
  uint32_t smb_gen;   /* counts mappings: a commit is for one of them */
  uint32_t cursor;    /* atomic: the page to look at first */
  commit *commits;    /* one per chunk of the shared memory at most */
  uint32_t ncommits, capcommits;
  uint32_t commit_batch; /* wake the thread at this many commits */
  uint64_t flush_id; /* to acknowledge with the next commit */
  sys_instance inst[MAX_INSTANCES];
  uint32_t ninst;
  uint64_t chunks_lost; /* no free chunk in the shared buffer */
  /* Chunks of writers' memory given back, for the next acquire. */
  etch_chunk *pool[64];
  uint32_t npool, pool_size;
} P = {.lock = PTHREAD_MUTEX_INITIALIZER,
       .smb_rw = PTHREAD_RWLOCK_INITIALIZER,
       .exit_cond = PTHREAD_COND_INITIALIZER,
       .wake = -1};

struct sysb {
  etch_backend base;
  uint32_t target_buffer;
  bool dead;                /* its instance ended: chunks go nowhere */
  etch_chunk **out;         /* chunks being written, for flushes */
  uint32_t nout, capout;
  uint64_t handed, drops;
};

/* ---- the shared buffer (under P.lock) ---- */

/* Fragments in a chunk's published payload: a size varint and its bytes
 * each. Once per chunk, over every packet in it (~480 instants in 4.6
 * KiB), so one-byte sizes, nearly all of them, take a two-instruction
 * step; a fragment whose bytes run past the payload is not counted. */
static uint32_t count_fragments(const uint8_t *p, uint32_t len) {
  uint32_t n = 0;
  uint64_t off = 0;
  while (off < len) {
    uint32_t b = p[off];
    if (ETCH_LIKELY(b < 0x80)) {
      off += 1 + (uint64_t)b;
      n++;
      continue;
    }
    uint64_t size = 0;
    uint32_t shift = 0;
    do {
      if (off >= len || shift > 21) return n;
      b = p[off++];
      size |= (uint64_t)(b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80);
    off += size;
    n++;
  }
  /* The last one claimed more bytes than there are. */
  return off > len ? n - 1 : n;
}

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
    if (used > csize - ETCH_SMB_CHUNK_HEADER) used = 0; /* cannot happen */
    /* A chunk of an instance that ended goes whole too: the service drops
     * it (the session is gone) or keeps it; one committed empty after a
     * flush copied part of it would have fewer packets than that copy,
     * which Perfetto's service counts as an ABI violation. */
    memcpy(dst + ETCH_SMB_CHUNK_HEADER, src, used);
    uint32_t count = count_fragments(src, used);
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

static const uint8_t *payload_of(const etch_chunk *c) {
  return (const uint8_t *)c + ETCH_CHUNK_HEADER_SIZE;
}

/* A copy of a chunk's published part in a chunk of the shared memory of
 * its own (a flush's copy of a chunk still being written). */
static bool copy_out(sysb *b, const etch_chunk *c, uint32_t used,
                     uint32_t flags, commit *cm, uint32_t *gen) {
  uint32_t res[4];
  if (__atomic_load_n(&b->dead, __ATOMIC_ACQUIRE) ||
      !smb_reserve(c->writer_id, c->chunk_id, flags, res))
    return false;
  return smb_fill(b, payload_of(c), used, flags, res, cm, gen);
}

/* Reserves the shared memory's chunk for a writer's chunk when the writer
 * takes it, so that completing it can never find the shared memory full:
 * a writer that gets none drops events (counted and reported, as in
 * process) instead of losing a whole chunk it already wrote. The
 * reservation is kept in the private chunk's reserved words. */
static uint64_t full_until; /* atomic: no free chunk was found before this */

static void wake_thread(void);

/* ETCH_SYSTEM_STALL_MS: how long a writer may wait for a free chunk of a
 * full shared memory before it drops (0, the default: it drops at once). */
static uint64_t stall_ns;

static bool reserve_chunk(sysb *b, etch_chunk *c, uint32_t flags,
                          uint64_t now) {
  /* Once the shared memory was found full, writers drop for a while
   * instead of each scanning it again for every event (sys_acquire checks
   * `full_until` with `now` first). */
  uint64_t until = now + stall_ns;
  for (;;) {
    if (__atomic_load_n(&b->dead, __ATOMIC_RELAXED)) return false;
    if (smb_reserve(c->writer_id, c->chunk_id, flags, c->reserved))
      return true;
    if (!stall_ns || now >= until) break;
    /* Asked to wait: the commits waiting for a batch go now, and the
     * writer looks again in a while. */
    wake_thread();
    struct timespec d = {0, 20000};
    nanosleep(&d, NULL);
    now = etch__monotonic_ns();
  }
  __atomic_store_n(&full_until, now + FULL_BACKOFF_NS, __ATOMIC_RELAXED);
  return false;
}

/* Fills the chunk reserved for c with its published part (see smb_fill). */
static bool fill_reserved(sysb *b, const etch_chunk *c, uint32_t used,
                          uint32_t flags, commit *cm, uint32_t *gen) {
  return smb_fill(b, payload_of(c), used, flags, c->reserved, cm, gen);
}

/* The fewest chunks to a page whose payload stays at most 5115 bytes: a
 * chunk's header counts at most 1023 fragments and no packet etch writes
 * is under 5 bytes (4 KiB pages: 1 chunk, 8 KiB: 2, 16 KiB: 4, 32 KiB: 7,
 * 64 KiB: 14). */
static uint32_t sys_layout(uint32_t page_size) {
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

static void wake_thread(void) {
  uint64_t one = 1;
  if (P.wake >= 0 && write(P.wake, &one, sizeof one) < 0) { /* full: awake */
  }
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
      (!stall_ns && now < __atomic_load_n(&full_until, __ATOMIC_RELAXED)))
    return NULL;
  etch_chunk *c = NULL;
  pthread_mutex_lock(&P.lock);
  if (P.pool_size != be->chunk_size) { /* a new geometry: drop the pool */
    while (P.npool) free(P.pool[--P.npool]);
    P.pool_size = be->chunk_size;
  }
  if (P.npool) c = P.pool[--P.npool];
  pthread_mutex_unlock(&P.lock);
  if (!c) c = (etch_chunk *)etch__malloc(be->chunk_size);
  if (!c) return NULL;
  memset(c, 0, ETCH_CHUNK_HEADER_SIZE);
  c->writer_id = writer_id;
  c->chunk_id = chunk_id;
  if (!reserve_chunk(b, c, flags, now)) {
    pthread_mutex_lock(&P.lock);
    if (P.npool < POOL_MAX && be->chunk_size == P.pool_size) {
      P.pool[P.npool++] = c;
      c = NULL;
    }
    pthread_mutex_unlock(&P.lock);
    free(c);
    return NULL; /* the writer drops, counts and reports */
  }
  etch__chunk_publish(c, 0, flags);
  __atomic_store_n(&c->state, ETCH_CHUNK_WRITING, __ATOMIC_RELEASE);
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
  if (ok && P.ncommits == P.commit_batch) wake_thread();
  if (P.npool < POOL_MAX && be->chunk_size == P.pool_size) {
    P.pool[P.npool++] = c;
    c = NULL;
  }
  pthread_mutex_unlock(&P.lock);
  free(c);
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

static const etch_backend_ops sys_ops = {
    .acquire = sys_acquire,
    .complete = sys_complete,
    .note_drop = sys_note_drop,
    .chunks_handed = sys_chunks_handed,
    .read = sys_read,
    .stats = sys_stats,
    .destroy = sys_destroy,
};

/* Copies what every chunk being written has published (under P.lock). */
static void scrape(sysb *b) {
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

/* ---- talking to the service (the thread) ---- */

static int invoke(uint32_t method, const etch__pb_buf *args, bool drop_reply,
                  uint64_t *req_out) {
  etch_ipc_frame f;
  memset(&f, 0, offsetof(etch_ipc_frame, methods));
  f.kind = ETCH_IPC_INVOKE;
  f.request_id = ++P.next_req;
  f.service_id = P.svc;
  f.method_id = method;
  f.drop_reply = drop_reply;
  if (args) {
    f.body.data = etch__pb_buf_data(args);
    f.body.len = (uint32_t)etch__pb_buf_len(args);
  }
  if (req_out) *req_out = f.request_id;
  return etch__ipc_conn_send(&P.conn, &f, -1);
}

/* Sends the queued commits (on the thread, P.lock not held). */
static void send_commits(void) {
  pthread_mutex_lock(&P.lock);
  uint32_t n = P.ncommits;
  uint64_t flush_id = P.flush_id;
  commit *mine = NULL;
  if (P.connected && P.m_commit && (n || flush_id)) {
    mine = (commit *)etch__malloc((n ? n : 1) * sizeof *mine);
    if (mine) {
      if (n) memcpy(mine, P.commits, n * sizeof *mine);
      P.ncommits = 0;
      P.flush_id = 0;
    }
  }
  pthread_mutex_unlock(&P.lock);
  if (!mine) return;
  etch__pb_buf b;
  etch__pb_buf_init(&b, 256, ETCH_IPC_MAX_FRAME - 256);
  uint32_t i = 0;
  while (i < n || flush_id) {
    etch__pb_buf_reset(&b);
    for (; i < n && etch__pb_buf_len(&b) < ETCH_IPC_MAX_FRAME / 2; i++) {
      etch__pb_nested m;
      etch__pb_nested_begin(&b.s, ETCH_CDR_CHUNKS_TO_MOVE, &m);
      etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_PAGE, mine[i].page);
      etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_CHUNK, mine[i].chunk);
      etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_TARGET_BUFFER,
                                 mine[i].buffer);
      etch__pb_nested_end(&b.s, &m);
    }
    if (i == n && flush_id) {
      etch__pb_write_varint_field(&b.s, ETCH_CDR_FLUSH_REQUEST_ID, flush_id);
      flush_id = 0;
    }
    invoke(P.m_commit, &b, true, NULL);
  }
  etch__pb_buf_free(&b);
  free(mine);
}

/* The RegisterDataSourceRequest for track_event (takes etch__g.lock: never
 * called under P.lock, which etch__g.lock's holders may take). */
static void register_args(etch__pb_buf *bp) {
  etch__pb_nested d, t, c;
  etch__pb_nested_begin(&bp->s, ETCH_RDS_DESCRIPTOR, &d);
  etch__pb_write_string_field(&bp->s, ETCH_DSD_NAME, "track_event");
  etch__pb_write_varint_field(&bp->s, ETCH_DSD_WILL_NOTIFY_ON_STOP, 1);
  etch__pb_write_varint_field(&bp->s, ETCH_DSD_HANDLES_INCREMENTAL_STATE_CLEAR,
                             1);
  etch__pb_nested_begin(&bp->s, ETCH_DSD_TRACK_EVENT_DESCRIPTOR, &t);
  pthread_mutex_lock(&etch__g.lock);
  for (etch_category *cat = etch__g.cats; cat; cat = cat->next) {
    etch__pb_nested_begin(&bp->s, ETCH_TED_AVAILABLE_CATEGORIES, &c);
    etch__pb_write_string_field(&bp->s, ETCH_TEC_NAME, cat->name);
    if (cat->description && *cat->description)
      etch__pb_write_string_field(&bp->s, ETCH_TEC_DESCRIPTION, cat->description);
    etch__pb_nested_end(&bp->s, &c);
  }
  pthread_mutex_unlock(&etch__g.lock);
  etch__pb_nested_end(&bp->s, &t);
  etch__pb_nested_end(&bp->s, &d);
}

/* etch's category filter for a track_event config (docs/backends.md):
 * with "*" among the disabled categories only the enabled ones record;
 * else everything but the disabled ones that are not also enabled. */
static char *filter_of(const uint8_t *te, size_t len) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 1 << 16);
  bool all_off = false, any_enabled = false;
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, te, len);
  while (etch__pb_next(&d, &f))
    if (f.id == ETCH_TEC_DISABLED_CATEGORIES && f.wt == 2 && f.len == 1 &&
        f.data[0] == '*')
      all_off = true;
  if (!all_off) etch__pb_write_bytes(&b.s, "*", 1);
  etch__pb_dec_init(&d, te, len);
  while (etch__pb_next(&d, &f)) {
    if (f.wt != 2) continue;
    if (f.id == ETCH_TEC_ENABLED_CATEGORIES && all_off) {
      if (etch__pb_buf_len(&b)) etch__pb_write_bytes(&b.s, ",", 1);
      etch__pb_write_bytes(&b.s, f.data, f.len);
      any_enabled = true;
    } else if (f.id == ETCH_TEC_DISABLED_CATEGORIES && !all_off) {
      /* Unless also enabled by name. */
      bool en = false;
      etch__pb_dec e;
      etch__pb_field g;
      etch__pb_dec_init(&e, te, len);
      while (etch__pb_next(&e, &g))
        if (g.id == ETCH_TEC_ENABLED_CATEGORIES && g.wt == 2 &&
            g.len == f.len && !memcmp(g.data, f.data, f.len))
          en = true;
      if (en) continue;
      etch__pb_write_bytes(&b.s, ",-", 2);
      etch__pb_write_bytes(&b.s, f.data, f.len);
    }
  }
  if (all_off && !any_enabled) etch__pb_write_bytes(&b.s, "-*", 2);
  etch__pb_write_bytes(&b.s, "", 1);
  size_t n;
  char *s = b.s.failed ? NULL : (char *)etch__pb_buf_take(&b, &n);
  etch__pb_buf_free(&b);
  return s;
}

/*
 * An interceptor_config: the session's packets go to that interceptor in
 * this process instead of the service (its console_config as the console's
 * options). Sets `c`'s interceptor options; false when the config has
 * none.
 */
static int interceptor_of(const uint8_t *ic, size_t len, etch_config *c) {
  char name[64] = "";
  int output = 0, colors = -1;
  etch__pb_dec d, e;
  etch__pb_field f, g;
  etch__pb_dec_init(&d, ic, len);
  while (etch__pb_next(&d, &f)) {
    if (f.id == ETCH_ICC_NAME && f.wt == 2 && f.len < sizeof name) {
      memcpy(name, f.data, f.len);
      name[f.len] = 0;
    } else if (f.id == ETCH_ICC_CONSOLE_CONFIG && f.wt == 2) {
      etch__pb_dec_init(&e, f.data, f.len);
      while (etch__pb_next(&e, &g)) {
        if (g.id == ETCH_CONSOLE_OUTPUT && g.wt == 0) output = (int)g.u;
        if (g.id == ETCH_CONSOLE_ENABLE_COLORS && g.wt == 0) colors = g.u != 0;
      }
    }
  }
  if (!name[0])
    return etch__error(ETCH_ECONFIG, "interceptor_config without a name");
  int rc = etch_config_set(c, "interceptor", name);
  if (!rc && strcmp(name, "console") == 0) {
    /* etch's console writes to stderr unless told stdout. */
    rc = etch_config_set(c, "interceptor.fd", output == 1 ? "1" : "2");
    if (!rc && colors >= 0)
      rc = etch_config_set(c, "interceptor.color", colors ? "always" : "never");
  }
  return rc;
}

static void start_instance(uint64_t id, const uint8_t *cfg, size_t len) {
  uint32_t buffer = 0;
  const uint8_t *te = NULL, *ic = NULL;
  size_t te_len = 0, ic_len = 0;
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, cfg, len);
  char name[64] = "";
  while (etch__pb_next(&d, &f)) {
    if (f.id == ETCH_DSC_TARGET_BUFFER && f.wt == 0) buffer = (uint32_t)f.u;
    else if (f.id == ETCH_DSC_TRACK_EVENT_CONFIG && f.wt == 2) {
      te = f.data;
      te_len = f.len;
    } else if (f.id == ETCH_DSC_INTERCEPTOR_CONFIG && f.wt == 2) {
      ic = f.data;
      ic_len = f.len;
    } else if (f.id == ETCH_DSC_NAME && f.wt == 2 && f.len < sizeof name) {
      memcpy(name, f.data, f.len);
      name[f.len] = 0;
    }
  }
  if (strcmp(name, "track_event") != 0) return;
  pthread_mutex_lock(&P.lock);
  bool have = P.have_smb;
  bool dup = false;
  for (uint32_t i = 0; i < P.ninst; i++) dup |= P.inst[i].id == id;
  pthread_mutex_unlock(&P.lock);
  if (!have || dup || P.ninst == MAX_INSTANCES) return;
  char *filter = te ? filter_of(te, te_len) : etch__strdup("*");
  sysb *b = (sysb *)etch__calloc(1, sizeof *b);
  etch_config *c = NULL;
  etch_session *s = NULL;
  int rc = filter && b ? etch_config_new(&c) : ETCH_ENOMEM;
  if (!rc) rc = etch_config_set(c, "categories", filter);
  if (!rc && ic) {
    /* Intercepted: an ordinary in-process session with the interceptor;
     * nothing of it reaches the shared memory. */
    rc = interceptor_of(ic, ic_len, c);
    if (!rc) rc = etch_session_new(c, &s);
    free(b);
    b = NULL;
  } else if (!rc) {
    b->base.ops = &sys_ops;
    b->base.chunk_size = etch__smb_chunk_size(P.smb.page_size, SYS_LAYOUT) -
                         ETCH_SMB_CHUNK_HEADER + ETCH_CHUNK_HEADER_SIZE;
    b->base.payload_size = b->base.chunk_size - ETCH_CHUNK_HEADER_SIZE;
    b->target_buffer = buffer;
    b->base.reset_span = RESET_SPAN;
    rc = etch__session_new_with_backend(c, &b->base, &s);
    b = NULL; /* the session's now, or destroyed */
  }
  if (!rc) rc = etch_session_start(s);
  if (rc) {
    fprintf(stderr, "etch: the service's session %llu cannot start here: %s\n",
            (unsigned long long)id, etch_last_error());
    if (s) etch_session_free(s);
    free(b);
  } else {
    pthread_mutex_lock(&P.lock);
    P.inst[P.ninst].id = id;
    P.inst[P.ninst].s = s;
    P.inst[P.ninst].b = ic ? NULL : (sysb *)s->backend;
    P.ninst++;
    pthread_mutex_unlock(&P.lock);
  }
  etch_config_free(c);
  free(filter);
}

/* Ends instance i: stops its session, sends what its writers hold, says
 * so to the service (notify) and frees it. */
static void end_instance(uint32_t i, bool notify) {
  pthread_mutex_lock(&P.lock);
  sys_instance in = P.inst[i];
  P.inst[i] = P.inst[--P.ninst];
  pthread_mutex_unlock(&P.lock);
  etch_session_stop(in.s);
  if (in.b) { /* not intercepted */
    /* Drops of writers whose thread left while the shared memory was full. */
    etch__session_report_orphans(in.s);
    pthread_mutex_lock(&P.lock);
    scrape(in.b);
    /* Chunks completed from now on go nowhere. */
    __atomic_store_n(&in.b->dead, true, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&P.lock);
    send_commits();
  }
  if (notify && P.connected && P.m_stopped) {
    etch__pb_buf a;
    etch__pb_buf_init(&a, 16, 0);
    etch__pb_write_varint_field(&a.s, ETCH_NDS_DATA_SOURCE_ID, in.id);
    invoke(P.m_stopped, &a, true, NULL);
    etch__pb_buf_free(&a);
  }
  etch_session_free(in.s);
}

static void on_command(const uint8_t *p, size_t n) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, p, n);
  while (etch__pb_next(&d, &f)) {
    if (f.wt != 2) continue;
    etch__pb_dec m;
    etch__pb_field g;
    uint64_t id = 0;
    const uint8_t *cfg = NULL;
    size_t cl = 0;
    switch (f.id) {
    case ETCH_GAC_SETUP_TRACING: {
      int fd = etch__ipc_conn_take_fd(&P.conn);
      uint32_t page_kb = 0;
      etch__pb_dec_init(&m, f.data, f.len);
      while (etch__pb_next(&m, &g))
        if (g.id == ETCH_GAC_SETUP_PAGE_SIZE_KB && g.wt == 0 && g.u <= 64)
          page_kb = (uint32_t)g.u;
      struct stat st;
      pthread_mutex_lock(&P.lock);
      if (fd >= 0 && !P.have_smb && fstat(fd, &st) == 0 && st.st_size > 0 &&
          (uint64_t)st.st_size <= (256u << 20)) {
        void *mem = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                         MAP_SHARED, fd, 0);
        if (mem != MAP_FAILED) {
          etch_smb sm;
          uint32_t cap = 0;
          commit *cms = NULL;
          if (etch__smb_init(&sm, mem, (uint64_t)st.st_size,
                             (page_kb ? page_kb : 4) * 1024) == ETCH_OK) {
            cap = sm.npages *
                  etch__smb_layout_chunks(sys_layout(sm.page_size));
            cms = (commit *)etch__malloc(cap * sizeof *cms);
          }
          if (cms) {
            pthread_rwlock_wrlock(&P.smb_rw);
            P.smb = sm;
            P.layout = sys_layout(sm.page_size);
            P.smb_mem = (uint8_t *)mem;
            P.smb_size = (uint64_t)st.st_size;
            P.have_smb = true;
            P.smb_gen++;
            free(P.commits);
            P.commits = cms;
            P.capcommits = cap;
            P.ncommits = 0;
            /* A sixteenth, within bounds, and never more than half of
             * what the queue holds (a small shared memory). */
            uint32_t batch = cap / 16;
            if (batch < COMMIT_BATCH_MIN) batch = COMMIT_BATCH_MIN;
            if (batch > COMMIT_BATCH_MAX) batch = COMMIT_BATCH_MAX;
            if (batch > cap / 2) batch = cap / 2 ? cap / 2 : 1;
            P.commit_batch = batch;
            pthread_rwlock_unlock(&P.smb_rw);
          } else {
            munmap(mem, (size_t)st.st_size);
          }
        }
      }
      pthread_mutex_unlock(&P.lock);
      if (fd >= 0) close(fd);
      break;
    }
    case ETCH_GAC_START_DATA_SOURCE:
      etch__pb_dec_init(&m, f.data, f.len);
      while (etch__pb_next(&m, &g)) {
        if (g.id == ETCH_GAC_DS_INSTANCE_ID && g.wt == 0) id = g.u;
        if (g.id == ETCH_GAC_DS_CONFIG && g.wt == 2) {
          cfg = g.data;
          cl = g.len;
        }
      }
      if (id && cfg) start_instance(id, cfg, cl);
      break;
    case ETCH_GAC_STOP_DATA_SOURCE:
      etch__pb_dec_init(&m, f.data, f.len);
      while (etch__pb_next(&m, &g))
        if (g.id == ETCH_GAC_STOP_INSTANCE_ID && g.wt == 0) id = g.u;
      for (uint32_t i = 0; i < P.ninst; i++)
        if (P.inst[i].id == id) {
          end_instance(i, true);
          break;
        }
      break;
    case ETCH_GAC_FLUSH: {
      uint64_t req = 0;
      etch__pb_dec_init(&m, f.data, f.len);
      while (etch__pb_next(&m, &g))
        if (g.id == ETCH_GAC_FLUSH_REQUEST_ID && g.wt == 0) req = g.u;
      /* Sessions stay while this thread runs: it is the one ending them. */
      for (uint32_t i = 0; i < P.ninst; i++)
        if (P.inst[i].b) etch__session_report_orphans(P.inst[i].s);
      pthread_mutex_lock(&P.lock);
      for (uint32_t i = 0; i < P.ninst; i++)
        if (P.inst[i].b) scrape(P.inst[i].b);
      P.flush_id = req ? req : P.flush_id;
      pthread_mutex_unlock(&P.lock);
      send_commits();
      break;
    }
    case ETCH_GAC_CLEAR_INCREMENTAL_STATE:
      /* Every writer of the process starts over at its next event (more
       * than the instances named, which costs nothing but the reset). */
      __atomic_fetch_add(&etch__g.names_gen, 1, __ATOMIC_RELAXED);
      break;
    default: /* SetupDataSource (Start has the same config) */
      break;
    }
  }
}

static void on_frame(const etch_ipc_frame *f) {
  if (f->kind == ETCH_IPC_BIND_REPLY) {
    if (!f->success) {
      etch__ipc_conn_fail(&P.conn, "the service has no producer port");
      return;
    }
    P.svc = f->service_id;
    P.m_init = etch__ipc_method_id(f, "InitializeConnection");
    P.m_register = etch__ipc_method_id(f, "RegisterDataSource");
    P.m_commit = etch__ipc_method_id(f, "CommitData");
    P.m_async = etch__ipc_method_id(f, "GetAsyncCommand");
    P.m_stopped = etch__ipc_method_id(f, "NotifyDataSourceStopped");
    P.m_started = etch__ipc_method_id(f, "NotifyDataSourceStarted");
    if (!P.m_init || !P.m_register || !P.m_commit || !P.m_async) {
      etch__ipc_conn_fail(&P.conn, "the producer port lacks methods");
      return;
    }
    etch__pb_buf b, r;
    etch__pb_buf_init(&b, 128, 0);
    etch__pb_buf_init(&r, 1024, ETCH_IPC_MAX_FRAME - 256);
    /* 32 KiB pages unless ETCH_SYSTEM_PAGE_KB says (4, 8, 16 or 32). */
    long page_kb = (long)etch__env_number(ETCH_ENV_SYSTEM_PAGE_KB);
    if (page_kb != 4 && page_kb != 8 && page_kb != 16) page_kb = 32;
    etch__pb_write_varint_field(&b.s, ETCH_ICR_PAGE_SIZE_HINT,
                               (uint64_t)page_kb * 1024);
    /* 2 MiB of shared memory unless ETCH_SYSTEM_SMB_KB asks for another
     * size (256 KiB to 32 MiB; the service has the last word). */
    long smb_kb = (long)etch__env_number(ETCH_ENV_SYSTEM_SMB_KB);
    etch__pb_write_varint_field(&b.s, ETCH_ICR_SIZE_HINT,
                               (uint64_t)smb_kb * 1024);
    etch__pb_write_string_field(&b.s, ETCH_ICR_PRODUCER_NAME, P.name);
    /* Chunks being written hold nothing in the shared memory (a writer
     * fills a chunk of its own and copies it in when done): nothing for
     * the service to scrape, and a scrape of the empty reservation after
     * a flush's copy would look like a chunk that lost packets. */
    etch__pb_write_varint_field(&b.s, ETCH_ICR_SMB_SCRAPING_MODE,
                               ETCH_ICR_SMB_SCRAPING_DISABLED);
    etch__pb_write_string_field(&b.s, ETCH_ICR_SDK_VERSION, "etch");
    register_args(&r);
    /* GetAsyncCommand before RegisterDataSource, as Perfetto's own client
     * does: traced matches a registered data source against the running
     * sessions at once and drops the commands (SetupTracing,
     * StartDataSource) of a producer that has not asked for them yet, so
     * a producer registering while a session ran never recorded. */
    pthread_mutex_lock(&P.lock);
    invoke(P.m_init, &b, false, NULL);
    invoke(P.m_async, NULL, false, &P.async_req);
    invoke(P.m_register, &r, false, NULL);
    pthread_mutex_unlock(&P.lock);
    etch__pb_buf_free(&b);
    etch__pb_buf_free(&r);
    return;
  }
  if (f->kind == ETCH_IPC_REPLY && f->request_id == P.async_req &&
      f->success)
    on_command(f->body.data, f->body.len);
}

static void disconnect(void) {
  while (P.ninst) end_instance(P.ninst - 1, false);
  pthread_mutex_lock(&P.lock);
  etch__ipc_conn_close(&P.conn);
  P.connected = false;
  pthread_rwlock_wrlock(&P.smb_rw);
  if (P.smb_mem) munmap(P.smb_mem, P.smb_size);
  P.smb_mem = NULL;
  P.have_smb = false;
  P.smb_gen++;
  P.ncommits = 0;
  pthread_rwlock_unlock(&P.smb_rw);
  P.flush_id = 0;
  pthread_mutex_unlock(&P.lock);
}

static void try_connect(void) {
  char prod[512], cons[512];
  int fd;
  int rc = etch__ipc_default_paths(prod, cons, sizeof prod, false);
  if (!rc) rc = etch__ipc_connect_service(prod, true, &fd);
  if (rc) {
    /* A service that is not there is tried again later, silently; one
     * that is refused (the directory or the peer is not the user's) is
     * said once. */
    static bool said;
    if (rc != ETCH_EIO &&
        !__atomic_exchange_n(&said, true, __ATOMIC_RELAXED)) {
      fprintf(stderr, "etch: not recording into the tracing service: %s\n",
              etch_last_error());
    }
    return;
  }
  pthread_mutex_lock(&P.lock);
  etch__ipc_conn_init(&P.conn, fd, 16u << 20);
  P.connected = true;
  P.next_req = 0;
  P.async_req = 0;
  etch_ipc_frame f;
  memset(&f, 0, offsetof(etch_ipc_frame, methods));
  f.kind = ETCH_IPC_BIND;
  f.request_id = ++P.next_req;
  f.name.data = (const uint8_t *)ETCH_IPC_PRODUCER_PORT;
  f.name.len = sizeof ETCH_IPC_PRODUCER_PORT - 1;
  etch__ipc_conn_send(&P.conn, &f, -1);
  pthread_mutex_unlock(&P.lock);
}

/* The last flush, on the thread at the exit handler's request: what every
 * writer holds goes to the service, best effort. */
/* How long exit waits for room in a full shared memory to report drops
 * (ETCH_SYSTEM_EXIT_WAIT_MS, default 2000): the service, given the
 * commits, frees chunks as it copies them. */
static uint64_t exit_wait_ns(void) {
  return etch__env_number(ETCH_ENV_SYSTEM_EXIT_WAIT_MS) *
         1000000u;
}

static void last_flush(void) {
  /* Drops of threads that left while the shared memory was full: each
   * report needs a chunk, which the service frees as it takes the commits
   * sent meanwhile. */
  uint64_t deadline = etch__monotonic_ns() + exit_wait_ns();
  for (;;) {
    bool all = true;
    for (uint32_t i = 0; i < P.ninst; i++)
      if (P.inst[i].b) all &= etch__session_report_orphans(P.inst[i].s);
    if (all || !P.connected || etch__monotonic_ns() >= deadline) break;
    send_commits();
    if (etch__ipc_conn_want_write(&P.conn)) etch__ipc_conn_flush(&P.conn);
    __atomic_store_n(&full_until, 0, __ATOMIC_RELAXED);
    struct timespec d = {0, 1000000};
    nanosleep(&d, NULL);
  }
  pthread_mutex_lock(&P.lock);
  for (uint32_t i = 0; i < P.ninst; i++)
    if (P.inst[i].b) scrape(P.inst[i].b);
  pthread_mutex_unlock(&P.lock);
  send_commits();
  for (int k = 0; k < 50 && P.connected && etch__ipc_conn_want_write(&P.conn);
       k++) {
    struct pollfd pf = {P.conn.fd, POLLOUT, 0};
    poll(&pf, 1, 20);
    if (etch__ipc_conn_flush(&P.conn)) break;
  }
  pthread_mutex_lock(&P.lock);
  P.exit_done = true;
  pthread_cond_broadcast(&P.exit_cond);
  pthread_mutex_unlock(&P.lock);
}

static void *producer_main(void *arg) {
  (void)arg;
  /* Kept in a global: a forked child's copy stays reachable. */
  static etch_ipc_frame *f;
  if (!f) f = (etch_ipc_frame *)etch__malloc(sizeof *f);
  if (!f) return NULL;
  for (;;) {
    if (!P.connected) try_connect();
    struct pollfd pf[2] = {{P.wake, POLLIN, 0}, {-1, POLLIN, 0}};
    if (P.connected) {
      pf[1].fd = P.conn.fd;
      if (etch__ipc_conn_want_write(&P.conn)) pf[1].events |= POLLOUT;
    }
    pthread_mutex_lock(&P.lock);
    bool pending = P.ncommits > 0;
    pthread_mutex_unlock(&P.lock);
    int r = poll(pf, 2, !P.connected ? RETRY_MS : pending ? COMMIT_PERIOD_MS
                                                          : 1000);
    if (r < 0) continue;
    if (pf[0].revents & POLLIN) {
      uint64_t v;
      if (read(P.wake, &v, sizeof v) < 0) { /* nothing */
      }
    }
    pthread_mutex_lock(&P.lock);
    bool exiting = P.exit_req;
    pthread_mutex_unlock(&P.lock);
    if (exiting) {
      last_flush();
      break;
    }
    if (!P.connected) continue;
    send_commits();
    if (pf[1].revents & POLLOUT) etch__ipc_conn_flush(&P.conn);
    if (pf[1].revents & (POLLIN | POLLHUP | POLLERR))
      etch__ipc_conn_read(&P.conn);
    int n;
    while ((n = etch__ipc_conn_next(&P.conn, f)) == 1) on_frame(f);
    if (P.conn.failed) disconnect();
  }
  return NULL;
}

/* At exit: this thread's drops are reported (its TLS destructor does not
 * run at exit), waiting for room if the shared memory is full; then the
 * producer thread sends what every writer holds and the drops of threads
 * that left (waiting at most ETCH_SYSTEM_EXIT_WAIT_MS and a second). */
static void flush_at_exit(void) {
  pthread_mutex_lock(&P.lock);
  if (!P.started || P.exit_done) {
    pthread_mutex_unlock(&P.lock);
    return;
  }
  pthread_mutex_unlock(&P.lock);
  uint64_t wait = exit_wait_ns();
  uint64_t deadline = etch__monotonic_ns() + wait;
  while (!etch__tls_report_drops()) {
    pthread_mutex_lock(&P.lock);
    bool connected = P.connected;
    pthread_mutex_unlock(&P.lock);
    if (!connected || etch__monotonic_ns() >= deadline) break;
    wake_thread(); /* the commits go, the service frees their chunks */
    __atomic_store_n(&full_until, 0, __ATOMIC_RELAXED);
    struct timespec d = {0, 1000000};
    nanosleep(&d, NULL);
  }
  pthread_mutex_lock(&P.lock);
  P.exit_req = true;
  wake_thread();
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 1 + (time_t)(wait / 1000000000u);
  while (!P.exit_done &&
         pthread_cond_timedwait(&P.exit_cond, &P.lock, &until) == 0) {
  }
  pthread_mutex_unlock(&P.lock);
}

static void start_thread_locked(void);

static etch_session *left_behind[MAX_INSTANCES * 4];
static uint32_t left_behind_n;

static void sys_atfork_prepare(void) { pthread_mutex_lock(&P.lock); }
static void sys_atfork_parent(void) { pthread_mutex_unlock(&P.lock); }

/*
 * A forked child is a producer of its own: it drops the parent's
 * connection and shared memory (the parent's, not to be written by
 * another process) and the sessions (gone with the SDK's own fork
 * handling, src/sdk/track.c), then connects afresh with its own pid.
 */
static void sys_atfork_child(void) {
  pthread_mutex_init(&P.lock, NULL);
  if (!P.started) return;
  if (P.connected) etch__ipc_conn_close(&P.conn);
  P.connected = false;
  pthread_rwlock_init(&P.smb_rw, NULL);
  if (P.smb_mem) munmap(P.smb_mem, P.smb_size);
  P.smb_mem = NULL;
  P.have_smb = false;
  P.smb_gen++;
  /* The parent's sessions: never used here, and not freed either (a
   * parent thread may have held their locks at the fork); kept reachable. */
  for (uint32_t i = 0; i < P.ninst && left_behind_n < MAX_INSTANCES * 4; i++)
    left_behind[left_behind_n++] = P.inst[i].s;
  P.ninst = 0;
  P.ncommits = 0;
  P.flush_id = 0;
  if (P.wake >= 0) close(P.wake);
  P.wake = -1;
  P.started = false;
  P.exit_req = P.exit_done = false;
  pthread_cond_init(&P.exit_cond, NULL);
  pthread_mutex_lock(&P.lock);
  start_thread_locked();
  pthread_mutex_unlock(&P.lock);
}

/* Starts the producer thread (under P.lock). */
static void start_thread_locked(void) {
  P.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (P.wake < 0) return;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  int e = pthread_create(&P.thread, &a, producer_main, NULL);
  pthread_attr_destroy(&a);
  if (e) {
    close(P.wake);
    P.wake = -1;
    return;
  }
  P.started = true;
}

int etch_system_start(const char *producer_name) {
  etch__global_init();
  pthread_mutex_lock(&P.lock);
  if (P.started) {
    pthread_mutex_unlock(&P.lock);
    return ETCH_OK;
  }
  if (producer_name && *producer_name) {
    snprintf(P.name, sizeof P.name, "%s", producer_name);
  } else {
    char comm[64] = "";
    int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t n = read(fd, comm, sizeof comm - 1);
      close(fd);
      if (n > 0) comm[n - (comm[n - 1] == '\n')] = 0;
    }
    snprintf(P.name, sizeof P.name, "%s", comm[0] ? comm : "etch");
  }
  start_thread_locked();
  if (!P.started) {
    pthread_mutex_unlock(&P.lock);
    return etch__error(ETCH_EIO, "cannot start the producer thread: %s",
                       strerror(errno));
  }
  static bool once;
  bool first = !once;
  once = true;
  pthread_mutex_unlock(&P.lock);
  if (first) {
    etch__atexit(flush_at_exit);
    pthread_atfork(sys_atfork_prepare, sys_atfork_parent, sys_atfork_child);
  }
  stall_ns = etch__env_number(ETCH_ENV_SYSTEM_STALL_MS) * 1000000u;
  /* A program started by `etch record` waits (a bounded time) for the
   * session that is already waiting for it, so its first events count. */
  long wait_ms = (long)etch__env_number(ETCH_ENV_SYSTEM_WAIT_MS);
  for (long k = 0; k < wait_ms; k++) {
    pthread_mutex_lock(&P.lock);
    bool ready = P.ninst > 0;
    pthread_mutex_unlock(&P.lock);
    if (ready) break;
    struct timespec d = {0, 1000000};
    nanosleep(&d, NULL);
  }
  return ETCH_OK;
}
#endif /* ETCH_NO_SYSTEM_BACKEND */

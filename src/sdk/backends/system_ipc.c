/*
 * system_ipc.c - the system backend's producer thread: the one thread of
 * the process that talks to the tracing service. It connects (and
 * reconnects), initializes the connection and registers `track_event`,
 * maps the shared memory SetupTracing brings, makes and ends sessions at
 * StartDataSource and StopDataSource, sends the commits the writers queue
 * (CommitData) and answers flushes; at exit it sends what writers hold,
 * and a forked child starts over as a producer of its own. The backend's
 * ops and the shared memory are in system.c (see there).
 */
#define _GNU_SOURCE
#ifdef ETCH_NO_SYSTEM_BACKEND
#include "sdk/core/sdk.h"

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
#include "base/envvars.h"
#include "sdk/core/sdk.h"
#include "sdk/backends/system.h"

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

/* ---- talking to the service (the thread) ---- */

void etch__sys_wake_thread(void) {
  uint64_t one = 1;
  if (P.wake >= 0 && write(P.wake, &one, sizeof one) < 0) { /* full: awake */
  }
}

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

/* Bytes queued on the socket beyond which no more chunks are put in
 * frames (emulation): chunks wait COMPLETE in the process's buffer, not in
 * the connection's queue, so a slow socket fills the buffer and writers
 * meet its stall or drop policy. */
#define EMUL_BACKLOG (256u << 10)

/*
 * Sends the thread's queue of chunks when the service emulates shared
 * memory: each chunk's bytes in ChunksToMove.data (a flush's copies with
 * chunk_incomplete), as many to a CommitData as a frame holds; a completed
 * chunk is free again as soon as its bytes are in a frame (the service
 * keeps no pointer into it). The flush's id goes with the frame that
 * empties the queue.
 */
static void send_emulated(void) {
  pthread_mutex_lock(&P.lock);
  etch__sys_queue_commits();
  uint64_t flush_id = P.flush_id;
  pthread_mutex_unlock(&P.lock);
  if (!P.connected || !P.m_commit) return;
  uint32_t csize = etch__smb_chunk_size(P.smb.page_size, SYS_LAYOUT);
  etch__pb_buf b;
  etch__pb_buf_init(&b, 4096, ETCH_IPC_MAX_FRAME - 256);
  while ((P.outq_head < P.outq_len || flush_id) && !P.conn.failed &&
         P.conn.tx_len - P.conn.tx_off < EMUL_BACKLOG) {
    etch__pb_buf_reset(&b);
    while (P.outq_head < P.outq_len &&
           etch__pb_buf_len(&b) + csize + 64 <= ETCH_IPC_MAX_FRAME - 256) {
      outgoing *o = &P.outq[P.outq_head++];
      const uint8_t *data = o->copy;
      if (!data) /* a completed chunk: the thread's to read and free */
        data = etch__smb_chunk_at(&P.smb, o->cm.page, SYS_LAYOUT, o->cm.chunk);
      etch__pb_nested m;
      etch__pb_nested_begin(&b.s, ETCH_CDR_CHUNKS_TO_MOVE, &m);
      etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_PAGE, o->cm.page);
      etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_CHUNK, o->cm.chunk);
      etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_TARGET_BUFFER,
                                 o->cm.buffer);
      etch__pb_write_bytes_field(&b.s, ETCH_CDR_MOVE_DATA, data, csize);
      if (o->copy)
        etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_CHUNK_INCOMPLETE, 1);
      etch__pb_nested_end(&b.s, &m);
      if (o->copy) {
        free(o->copy);
        o->copy = NULL;
      } else if (etch__smb_try_acquire_read(&P.smb, o->cm.page, o->cm.chunk)) {
        etch__smb_release_free(&P.smb, o->cm.page, o->cm.chunk);
      }
    }
    if (P.outq_head == P.outq_len) {
      P.outq_head = P.outq_len = 0;
      if (flush_id) {
        etch__pb_write_varint_field(&b.s, ETCH_CDR_FLUSH_REQUEST_ID, flush_id);
        pthread_mutex_lock(&P.lock);
        if (P.flush_id == flush_id) P.flush_id = 0;
        pthread_mutex_unlock(&P.lock);
        flush_id = 0;
      }
    }
    invoke(P.m_commit, &b, true, NULL);
  }
  etch__pb_buf_free(&b);
}

/* Whether chunks wait in the thread's queue (emulation). */
static bool outq_waiting(void) { return P.outq_head < P.outq_len; }

/* Sends the queued commits (on the thread, P.lock not held). */
static void send_commits(void) {
  if (P.emulate) {
    send_emulated();
    return;
  }
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
    b->base.ops = &etch__sys_ops;
    /* A chunk of the shared memory, its header aside: the payload and
     * etch's header after it, written in place. */
    b->base.chunk_size = etch__smb_chunk_size(P.smb.page_size, SYS_LAYOUT) -
                         ETCH_SMB_CHUNK_HEADER;
    b->base.payload_size = b->base.chunk_size - ETCH_CHUNK_HEADER_SIZE;
    b->base.payload_at = -(int32_t)b->base.payload_size;
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
    etch__sys_scrape(in.b);
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

/* Makes `mem` (size bytes, pages of page_kb KiB) the buffer writers take
 * chunks of (P.lock held): shared with the service, or the process's own
 * when `emulated`. False when its geometry does not hold or memory runs
 * out (the caller unmaps it). */
static bool install_smb(void *mem, uint64_t size, uint32_t page_kb,
                        bool emulated) {
  etch_smb sm;
  if (etch__smb_init(&sm, mem, size, (page_kb ? page_kb : 4) * 1024) !=
      ETCH_OK)
    return false;
  uint32_t cap =
      sm.npages * etch__smb_layout_chunks(etch__sys_layout(sm.page_size));
  commit *cms = (commit *)etch__malloc(cap * sizeof *cms);
  if (!cms) return false;
  pthread_rwlock_wrlock(&P.smb_rw);
  P.smb = sm;
  P.layout = etch__sys_layout(sm.page_size);
  P.smb_mem = (uint8_t *)mem;
  P.smb_size = size;
  P.have_smb = true;
  P.emulate = emulated;
  P.smb_gen++;
  free(P.commits);
  P.commits = cms;
  P.capcommits = cap;
  P.ncommits = 0;
  /* A sixteenth, within bounds, and never more than half of what the
   * queue holds (a small shared memory). */
  uint32_t batch = cap / 16;
  if (batch < COMMIT_BATCH_MIN) batch = COMMIT_BATCH_MIN;
  if (batch > COMMIT_BATCH_MAX) batch = COMMIT_BATCH_MAX;
  if (batch > cap / 2) batch = cap / 2 ? cap / 2 : 1;
  P.commit_batch = batch;
  pthread_rwlock_unlock(&P.smb_rw);
  return true;
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
        if (mem != MAP_FAILED &&
            !install_smb(mem, (uint64_t)st.st_size, page_kb, false))
          munmap(mem, (size_t)st.st_size);
      } else if (fd < 0 && !P.have_smb && (P.emul_asked || P.conn.remote)) {
        /* No memory to share (a network connection, or a relay that
         * forwards one): the buffer is the process's own, as large as
         * asked of the service, and its chunks go in CommitData. */
        uint64_t page = (uint64_t)(page_kb ? page_kb : 4) * 1024;
        uint64_t size = etch__env_number(ETCH_ENV_SYSTEM_SMB_KB) * 1024;
        size = size < page ? page : size - size % page;
        void *mem = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem != MAP_FAILED && !install_smb(mem, size, page_kb, true))
          munmap(mem, (size_t)size);
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
        if (P.inst[i].b) etch__sys_scrape(P.inst[i].b);
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
    invoke(P.m_init, &b, false, &P.init_req);
    invoke(P.m_async, NULL, false, &P.async_req);
    invoke(P.m_register, &r, false, NULL);
    pthread_mutex_unlock(&P.lock);
    etch__pb_buf_free(&b);
    etch__pb_buf_free(&r);
    return;
  }
  if (f->kind == ETCH_IPC_REPLY && f->request_id == P.init_req &&
      f->success) {
    /* InitializeConnectionResponse: whether the service emulates shared
     * memory (a TCP or vsock producer socket, or one a relay forwards). */
    etch__pb_dec d;
    etch__pb_field g;
    etch__pb_dec_init(&d, f->body.data, f->body.len);
    while (etch__pb_next(&d, &g))
      if (g.id == ETCH_ICRESP_USE_SHMEM_EMULATION && g.wt == 0)
        P.emul_asked = g.u != 0;
    return;
  }
  if (f->kind == ETCH_IPC_REPLY && f->request_id == P.async_req &&
      f->success)
    on_command(f->body.data, f->body.len);
}

/* The shared memory goes (the service went away, or a fork child lets go
 * of the parent's). Writers may still be writing chunks in it (in place),
 * so its addresses stay, over memory of this process's own: what they
 * write there goes nowhere, and completing such a chunk finds its mapping
 * gone (an older generation). Pages never written cost nothing; the
 * addresses are never given back. */
static void smb_let_go(void) {
  if (!P.smb_mem) return;
  void *m = mmap(P.smb_mem, P.smb_size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
                 0);
  if (m == MAP_FAILED) munmap(P.smb_mem, P.smb_size);
  P.smb_mem = NULL;
}

static void disconnect(void) {
  while (P.ninst) end_instance(P.ninst - 1, false);
  pthread_mutex_lock(&P.lock);
  etch__ipc_conn_close(&P.conn);
  P.connected = false;
  pthread_rwlock_wrlock(&P.smb_rw);
  smb_let_go();
  P.have_smb = false;
  P.emulate = false;
  P.smb_gen++;
  P.ncommits = 0;
  pthread_rwlock_unlock(&P.smb_rw);
  P.flush_id = 0;
  P.emul_asked = false;
  P.init_req = 0;
  etch__sys_outq_clear();
  pthread_mutex_unlock(&P.lock);
}

static void try_connect(void) {
  char prod[512], cons[512], first[512];
  int fd;
  int rc = etch__ipc_default_paths(prod, cons, sizeof prod, false);
  /* A service may listen on several names; a producer takes the first. */
  if (!rc && !etch__ipc_name_at(prod, 0, first, sizeof first))
    rc = etch__error(ETCH_EINVAL, "no producer socket in '%s'", prod);
  if (!rc) rc = etch__ipc_connect_service(first, true, &fd);
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
  P.init_req = 0;
  P.emul_asked = false;
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

/*
 * At exit with emulated shared memory: one more CommitData, empty, whose
 * reply says the service has taken every chunk sent before it (it handles
 * a connection's requests in order). Without it the process could close
 * its socket with chunks still on their way through a relay (traced_relay
 * forwards what it read after the producer is gone, or not, and a session
 * stopped meanwhile has ended without them). Waits until `until` at most;
 * other frames that come meanwhile are left unanswered (the process is
 * going).
 */
static void await_service(uint64_t until) {
  uint64_t req = 0;
  if (!P.connected || P.conn.failed || !P.m_commit ||
      invoke(P.m_commit, NULL, false, &req) != ETCH_OK)
    return;
  etch_ipc_frame *f = (etch_ipc_frame *)etch__malloc(sizeof *f);
  if (!f) return;
  bool done = false;
  while (!done && P.connected && !P.conn.failed &&
         etch__monotonic_ns() < until) {
    struct pollfd pf = {P.conn.fd, POLLIN, 0};
    if (etch__ipc_conn_want_write(&P.conn)) pf.events |= POLLOUT;
    poll(&pf, 1, 20);
    if (pf.revents & POLLOUT) etch__ipc_conn_flush(&P.conn);
    if (pf.revents & (POLLIN | POLLHUP | POLLERR)) etch__ipc_conn_read(&P.conn);
    while (!done && etch__ipc_conn_next(&P.conn, f) == 1)
      done = f->kind == ETCH_IPC_REPLY && f->request_id == req;
  }
  free(f);
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
    __atomic_store_n(&etch__sys_full_until, 0, __ATOMIC_RELAXED);
    struct timespec d = {0, 1000000};
    nanosleep(&d, NULL);
  }
  pthread_mutex_lock(&P.lock);
  for (uint32_t i = 0; i < P.ninst; i++)
    if (P.inst[i].b) etch__sys_scrape(P.inst[i].b);
  pthread_mutex_unlock(&P.lock);
  send_commits();
  /* What is queued goes (the socket's queue, and with emulated shared
   * memory the chunks waiting for room in it), for a bounded time. */
  uint64_t until = etch__monotonic_ns() + exit_wait_ns();
  for (int k = 0; P.connected && !P.conn.failed &&
                  (etch__ipc_conn_want_write(&P.conn) || outq_waiting());
       k++) {
    /* A second, as ever; with emulation until ETCH_SYSTEM_EXIT_WAIT_MS
     * (chunks may still wait for room on the socket). */
    if (k >= 50 && (!P.emulate || etch__monotonic_ns() >= until)) break;
    struct pollfd pf = {P.conn.fd, POLLOUT, 0};
    poll(&pf, 1, 20);
    if (etch__ipc_conn_flush(&P.conn)) break;
    if (P.emulate) send_commits();
  }
  if (P.emulate) await_service(until);
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
    bool pending = P.ncommits > 0 || outq_waiting();
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
    if (pf[1].revents & POLLOUT) {
      etch__ipc_conn_flush(&P.conn);
      /* Emulation: chunks that waited for room on the socket. */
      if (P.emulate && outq_waiting()) send_commits();
    }
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
    /* The commits go, the service frees their chunks. */
    etch__sys_wake_thread();
    __atomic_store_n(&etch__sys_full_until, 0, __ATOMIC_RELAXED);
    struct timespec d = {0, 1000000};
    nanosleep(&d, NULL);
  }
  pthread_mutex_lock(&P.lock);
  P.exit_req = true;
  etch__sys_wake_thread();
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
 * handling, src/sdk/core/track.c), then connects afresh with its own pid.
 */
static void sys_atfork_child(void) {
  pthread_mutex_init(&P.lock, NULL);
  if (!P.started) return;
  if (P.connected) etch__ipc_conn_close(&P.conn);
  P.connected = false;
  pthread_rwlock_init(&P.smb_rw, NULL);
  smb_let_go();
  P.have_smb = false;
  P.smb_gen++;
  /* The parent's sessions: never used here, and not freed either (a
   * parent thread may have held their locks at the fork); kept reachable. */
  for (uint32_t i = 0; i < P.ninst && left_behind_n < MAX_INSTANCES * 4; i++)
    left_behind[left_behind_n++] = P.inst[i].s;
  P.ninst = 0;
  P.ncommits = 0;
  P.flush_id = 0;
  P.emulate = P.emul_asked = false;
  etch__sys_outq_clear();
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
  etch__sys_stall_ns = etch__env_number(ETCH_ENV_SYSTEM_STALL_MS) * 1000000u;
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

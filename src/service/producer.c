/*
 * producer.c - the producer port: a producer's calls (InitializeConnection,
 * RegisterDataSource, CommitData, ...) and what it leaves behind when it
 * goes (see ports.h and docs/service.md). What is kept of its writing
 * (sequences, its shared memory buffer, the commands it is sent) is
 * shmem.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "buffer/fragment.h"
#include "proto/ipc.h"
#include "proto/perfetto.h"
#include "service/machine.h"
#include "service/methods.h"
#include "service/ports.h"
#include "service/service_int.h"
#include "service/session.h"
#include "service/shmem.h"

/* ---- the port ---- */

static int producer_init(etch_service *s, producer *p, const etch_ipc_frame *f) {
  if (p->initialized) return etch__error(ETCH_ESTATE, "initialized twice");
  bool provided = false;
  etch__pb_dec d;
  etch__pb_field fl;
  etch__pb_dec_init(&d, f->body.data, f->body.len);
  while (etch__pb_next(&d, &fl)) {
    if (fl.id == ETCH_ICR_PAGE_SIZE_HINT && fl.wt == 0)
      p->page_hint = fl.u <= 65536 ? (uint32_t)fl.u : 0;
    else if (fl.id == ETCH_ICR_SIZE_HINT && fl.wt == 0)
      p->size_hint = fl.u <= SMB_MAX ? (uint32_t)fl.u : SMB_MAX;
    else if (fl.id == ETCH_ICR_SMB_SCRAPING_MODE && fl.wt == 0)
      p->no_scrape = fl.u == ETCH_ICR_SMB_SCRAPING_DISABLED;
    else if (fl.id == ETCH_ICR_PRODUCER_NAME && fl.wt == 2)
      snprintf(p->name, sizeof p->name, "%.*s", (int)fl.len,
               (const char *)fl.data);
    else if (fl.id == ETCH_ICR_PRODUCER_PROVIDED_SHMEM && fl.wt == 0)
      provided = fl.u != 0;
  }
  if (d.err) return etch__error(ETCH_EFORMAT, "bad InitializeConnectionRequest");
  p->initialized = true;
  bool using_provided = false;
  int fd = etch__ipc_conn_take_fd(&p->conn);
  if (provided && fd >= 0 && !p->emulated) {
    struct stat st;
    uint32_t page = p->page_hint;
    /* Memory whose size the producer can still change is never mapped: a
     * truncation would turn our next read into a SIGBUS. The seals are
     * read before the size, so the size read stays true. */
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
      etch__svc_logf(
          s,
          "producer %u: its shared memory refused: %s; the service makes "
          "one",
          p->id,
          seals < 0 ? "not a memfd that allows sealing"
                    : "not sealed against shrinking (F_SEAL_SHRINK)");
    } else if (fstat(fd, &st) == 0 && st.st_size > 0 &&
               page >= ETCH_SMB_PAGE_MIN && page <= 32768 &&
               page % 4096 == 0 && (uint64_t)st.st_size % page == 0 &&
               (uint64_t)st.st_size <= SMB_MAX) {
      void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                     MAP_SHARED, fd, 0);
      if (m != MAP_FAILED) {
        p->smb_mem = (uint8_t *)m;
        p->smb_size = (uint64_t)st.st_size;
        if (etch__smb_init(&p->smb, m, p->smb_size, page) == ETCH_OK) {
          using_provided = true;
          p->smb_sent = true; /* nothing to send: it is theirs */
        } else {
          munmap(m, p->smb_size);
          p->smb_mem = NULL;
        }
      }
    }
  }
  if (fd >= 0) close(fd);
  etch__pb_buf b;
  etch__pb_buf_init(&b, 16, 0);
  etch__pb_write_varint_field(&b.s, ETCH_ICRESP_USING_PRODUCER_SHMEM,
                             using_provided);
  etch__pb_write_varint_field(&b.s, ETCH_ICRESP_DIRECT_SMB_PATCHING, 0);
  /* A network peer shares no memory: it sends its chunks' bytes. */
  if (p->emulated)
    etch__pb_write_varint_field(&b.s, ETCH_ICRESP_USE_SHMEM_EMULATION, 1);
  if (!f->drop_reply)
    etch__svc_send_reply(&p->conn, f->request_id, true, &b, false, -1);
  etch__pb_buf_free(&b);
  etch__svc_logf(s, "producer %u: '%s' pid %d uid %d machine %u%s", p->id,
                 p->name, (int)p->conn.peer_pid, (int)p->conn.peer_uid,
                 p->machine,
                 using_provided ? " (its own shared memory)"
                 : p->emulated  ? " (shared memory emulated)"
                                : "");
  return ETCH_OK;
}

static int producer_register(etch_service *s, producer *p,
                             const etch_ipc_frame *f) {
  etch__pb_dec d;
  etch__pb_field fl;
  const uint8_t *desc = NULL;
  size_t desc_len = 0;
  etch__pb_dec_init(&d, f->body.data, f->body.len);
  while (etch__pb_next(&d, &fl))
    if (fl.id == ETCH_RDS_DESCRIPTOR && fl.wt == 2) {
      desc = fl.data;
      desc_len = fl.len;
    }
  if (d.err || !desc) return etch__error(ETCH_EFORMAT, "bad RegisterDataSourceRequest");
  ds_reg r;
  memset(&r, 0, sizeof r);
  etch__pb_dec_init(&d, desc, desc_len);
  while (etch__pb_next(&d, &fl)) {
    if (fl.id == ETCH_DSD_NAME && fl.wt == 2 && fl.len < sizeof r.name) {
      memcpy(r.name, fl.data, fl.len);
      r.name[fl.len] = 0;
    } else if (fl.id == ETCH_DSD_WILL_NOTIFY_ON_STOP && fl.wt == 0) {
      r.notify_stop = fl.u != 0;
    } else if (fl.id == ETCH_DSD_WILL_NOTIFY_ON_START && fl.wt == 0) {
      r.notify_start = fl.u != 0;
    } else if (fl.id == ETCH_DSD_HANDLES_INCREMENTAL_STATE_CLEAR &&
               fl.wt == 0) {
      r.handles_clear = fl.u != 0;
    }
  }
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  const char *err = NULL;
  if (d.err || !r.name[0]) err = "a data source needs a name";
  else if (p->nds == MAX_DS_PER_PRODUCER) err = "too many data sources";
  for (uint32_t i = 0; i < p->nds && !err; i++)
    if (!strcmp(p->ds[i].name, r.name)) err = "data source registered twice";
  if (!err) {
    r.desc = (uint8_t *)etch__malloc(desc_len ? desc_len : 1);
    if (!r.desc) err = "out of memory";
  }
  if (err) {
    etch__pb_write_string_field(&b.s, ETCH_RDS_RESP_ERROR, err);
  } else {
    memcpy(r.desc, desc, desc_len);
    r.desc_len = (uint32_t)desc_len;
    p->ds[p->nds++] = r;
  }
  if (!f->drop_reply)
    etch__svc_send_reply(&p->conn, f->request_id, true, &b, false, -1);
  etch__pb_buf_free(&b);
  if (!err) {
    etch__svc_logf(s, "producer %u: data source '%s'", p->id, r.name);
    for (session *x = s->sessions; x; x = x->next)
      etch__svc_match_producer(s, x, p);
  }
  return ETCH_OK;
}

static int producer_commit(etch_service *s, producer *p,
                           const etch_ipc_frame *f) {
  etch__pb_dec d;
  etch__pb_field fl;
  uint64_t flush_id = 0;
  etch__pb_dec_init(&d, f->body.data, f->body.len);
  while (etch__pb_next(&d, &fl)) {
    etch__pb_dec m;
    etch__pb_field g;
    if (fl.id == ETCH_CDR_CHUNKS_TO_MOVE && fl.wt == 2) {
      uint64_t page = UINT64_MAX, chunk = UINT64_MAX, buf = UINT64_MAX;
      const uint8_t *data = NULL;
      size_t dlen = 0;
      bool incomplete = false;
      etch__pb_dec_init(&m, fl.data, fl.len);
      while (etch__pb_next(&m, &g)) {
        if (g.id == ETCH_CDR_MOVE_DATA && g.wt == 2) {
          data = g.data;
          dlen = g.len;
        }
        if (g.wt != 0) continue;
        if (g.id == ETCH_CDR_MOVE_PAGE) page = g.u;
        else if (g.id == ETCH_CDR_MOVE_CHUNK) chunk = g.u;
        else if (g.id == ETCH_CDR_MOVE_TARGET_BUFFER) buf = g.u;
        else if (g.id == ETCH_CDR_MOVE_CHUNK_INCOMPLETE) incomplete = g.u != 0;
      }
      if (p->emulated) {
        /* The chunk's bytes came with the call (its page and index say
         * nothing then): checked as a chunk of shared memory is. A
         * producer with shared memory cannot send bytes instead. */
        if (m.err || !data)
          return etch__error(ETCH_EFORMAT,
                             "a chunk to move without its bytes (the "
                             "service emulates shared memory)");
        int rc = etch__svc_emulated_chunk(s, data, dlen);
        if (rc) return rc;
        if (buf > UINT32_MAX || !etch__svc_may_write(s, p, (uint32_t)buf))
          continue;
        uint32_t seq = etch__svc_seq_of(s, p, s->chunk->writer_id);
        if (!seq && p->nwriters < MAX_WRITERS) return ETCH_ENOMEM;
        if (!seq) return etch__error(ETCH_ELIMIT, "too many writers");
        if (incomplete)
          etch__svc_put_partial_chunk(s, (uint32_t)buf, seq);
        else
          etch__tracebuf_put(s->bufs[buf], seq, s->chunk->chunk_id,
                             s->chunk->flags & 3u, s->chunk->count,
                             s->chunk->payload, s->chunk->payload_len);
        continue;
      }
      if (data)
        return etch__error(ETCH_EFORMAT, "chunk bytes inside CommitData from "
                           "a producer that shares memory");
      if (m.err || !p->smb_mem || page >= p->smb.npages ||
          chunk >= ETCH_SMB_MAX_CHUNKS)
        return etch__error(ETCH_EFORMAT, "chunk to move outside the shared "
                           "memory (page %llu, chunk %llu)",
                           (unsigned long long)page, (unsigned long long)chunk);
      if (!etch__smb_try_acquire_read(&p->smb, (uint32_t)page, (uint32_t)chunk))
        continue; /* not complete: nothing to move (Perfetto does the same) */
      int rc = etch__smb_chunk_read(&p->smb, (uint32_t)page, (uint32_t)chunk,
                                    s->chunk);
      etch__smb_release_free(&p->smb, (uint32_t)page, (uint32_t)chunk);
      if (rc) return rc;
      if (buf > UINT32_MAX || !etch__svc_may_write(s, p, (uint32_t)buf))
        continue; /* a buffer it may not write: dropped (a session ended) */
      uint32_t seq = etch__svc_seq_of(s, p, s->chunk->writer_id);
      if (!seq && p->nwriters < MAX_WRITERS)
        return ETCH_ENOMEM; /* the error slot says so */
      if (!seq) return etch__error(ETCH_ELIMIT, "too many writers");
      etch__tracebuf_put(s->bufs[buf], seq, s->chunk->chunk_id,
                         s->chunk->flags & 3u, s->chunk->count,
                         s->chunk->payload, s->chunk->payload_len);
    } else if (fl.id == ETCH_CDR_CHUNKS_TO_PATCH && fl.wt == 2) {
      uint64_t buf = UINT64_MAX, writer = UINT64_MAX, chunk_id = UINT64_MAX;
      etch__pb_dec_init(&m, fl.data, fl.len);
      while (etch__pb_next(&m, &g)) {
        if (g.id == ETCH_CDR_PATCH_TARGET_BUFFER && g.wt == 0) buf = g.u;
        else if (g.id == ETCH_CDR_PATCH_WRITER_ID && g.wt == 0) writer = g.u;
        else if (g.id == ETCH_CDR_PATCH_CHUNK_ID && g.wt == 0) chunk_id = g.u;
      }
      if (m.err || writer > 0xffff || chunk_id > UINT32_MAX)
        return etch__error(ETCH_EFORMAT, "bad chunk to patch");
      if (buf > UINT32_MAX || !etch__svc_may_write(s, p, (uint32_t)buf))
        continue;
      uint32_t seq = etch__svc_seq_of(s, p, (uint16_t)writer);
      etch__pb_dec_init(&m, fl.data, fl.len);
      while (etch__pb_next(&m, &g)) {
        if (g.id != ETCH_CDR_PATCH_PATCHES || g.wt != 2) continue;
        etch__pb_dec pd;
        etch__pb_field h;
        uint64_t off = UINT64_MAX;
        const uint8_t *data = NULL;
        size_t dlen = 0;
        etch__pb_dec_init(&pd, g.data, g.len);
        while (etch__pb_next(&pd, &h)) {
          if (h.id == ETCH_CDR_PATCH_OFFSET && h.wt == 0) off = h.u;
          else if (h.id == ETCH_CDR_PATCH_DATA && h.wt == 2) {
            data = h.data;
            dlen = h.len;
          }
        }
        if (pd.err || off > UINT32_MAX || !data || dlen > 1024)
          return etch__error(ETCH_EFORMAT, "bad patch");
        /* Out of range or for a chunk that is gone: counted, not fatal. */
        etch__tracebuf_patch(s->bufs[buf], seq, (uint32_t)chunk_id,
                             (uint32_t)off, data, (uint32_t)dlen);
      }
    } else if (fl.id == ETCH_CDR_FLUSH_REQUEST_ID && fl.wt == 0) {
      flush_id = fl.u;
    }
  }
  if (d.err) return etch__error(ETCH_EFORMAT, "bad CommitDataRequest");
  etch__svc_reply_empty(&p->conn, f, true);
  if (flush_id) etch__svc_flush_acked(s, p, flush_id);
  return ETCH_OK;
}

static void instance_stopped(etch_service *s, producer *p, uint64_t id) {
  for (session *x = s->sessions; x; x = x->next)
    for (uint32_t i = 0; i < x->ninst; i++) {
      instance *in = &x->inst[i];
      if (in->id != id || in->producer_id != p->id) continue;
      in->stopped = true;
      if (x->state != S_STOPPING) return;
      for (uint32_t k = 0; k < x->ninst; k++)
        if (!x->inst[k].stopped &&
            etch__svc_find_producer(s, x->inst[k].producer_id))
          return;
      if (!x->flushing) etch__svc_finish_disable(s, x);
      return;
    }
}

static int on_producer_frame(etch_service *s, producer *p,
                             const etch_ipc_frame *f) {
  if (etch__svc_peer_identity(s, p, f)) return ETCH_OK;
  if (f->kind == ETCH_IPC_BIND) {
    uint32_t sid = 0;
    bool ok = etch__svc_bind(&p->conn, f, true, p->relay_port, &sid);
    p->bound = p->bound || ok;
    if (sid == RELAY_SERVICE_ID) p->relay_bound = true;
    return ETCH_OK;
  }
  if (f->kind != ETCH_IPC_INVOKE) return ETCH_OK;
  if (f->service_id == RELAY_SERVICE_ID && p->relay_bound)
    return etch__svc_relay_call(s, p, f);
  if (!p->bound || f->service_id != PRODUCER_SERVICE_ID) {
    etch__svc_reply_empty(&p->conn, f, false);
    return ETCH_OK;
  }
  if (f->method_id != PM_INIT && !p->initialized)
    return etch__error(ETCH_ESTATE, "a call before InitializeConnection");
  etch__pb_dec d;
  etch__pb_field fl;
  switch (f->method_id) {
  case PM_INIT: return producer_init(s, p, f);
  case PM_REGISTER: return producer_register(s, p, f);
  case PM_UNREGISTER: {
    etch__pb_dec_init(&d, f->body.data, f->body.len);
    while (etch__pb_next(&d, &fl))
      if (fl.id == ETCH_UDS_NAME && fl.wt == 2)
        for (uint32_t i = 0; i < p->nds; i++)
          if (strlen(p->ds[i].name) == fl.len &&
              !memcmp(p->ds[i].name, fl.data, fl.len)) {
            free(p->ds[i].desc);
            p->ds[i] = p->ds[--p->nds];
            break;
          }
    etch__svc_reply_empty(&p->conn, f, true);
    return ETCH_OK;
  }
  case PM_COMMIT: return producer_commit(s, p, f);
  case PM_ASYNC:
    p->has_async = true;
    p->async_req = f->request_id;
    for (session *x = s->sessions; x; x = x->next)
      etch__svc_match_producer(s, x, p);
    return ETCH_OK;
  case PM_STARTED:
    etch__svc_reply_empty(&p->conn, f, true);
    return ETCH_OK;
  case PM_STOPPED:
    etch__pb_dec_init(&d, f->body.data, f->body.len);
    while (etch__pb_next(&d, &fl))
      if (fl.id == ETCH_NDS_DATA_SOURCE_ID && fl.wt == 0) {
        etch__svc_reply_empty(&p->conn, f, true);
        instance_stopped(s, p, fl.u);
        return ETCH_OK;
      }
    etch__svc_reply_empty(&p->conn, f, true);
    return ETCH_OK;
  case PM_REG_WRITER: {
    uint64_t w = 0, buf = 0;
    etch__pb_dec_init(&d, f->body.data, f->body.len);
    while (etch__pb_next(&d, &fl)) {
      if (fl.id == ETCH_RTW_WRITER_ID && fl.wt == 0) w = fl.u;
      if (fl.id == ETCH_RTW_TARGET_BUFFER && fl.wt == 0) buf = fl.u;
    }
    uint32_t seq = w && w <= 0xffff && buf && buf < s->nbufs
                       ? etch__svc_seq_of(s, p, (uint16_t)w)
                       : 1;
    if (!seq && p->nwriters < MAX_WRITERS)
      return ETCH_ENOMEM; /* not registered: the producer goes */
    if (seq && w && w <= 0xffff && buf && buf < s->nbufs)
      for (uint32_t i = 0; i < p->nwriters; i++)
        if (p->writers[i].writer_id == w) p->writers[i].buffer = (uint32_t)buf;
    etch__svc_reply_empty(&p->conn, f, true);
    return ETCH_OK;
  }
  case PM_UNREG_WRITER:
  case PM_SYNC:
  case PM_UPDATE:
    etch__svc_reply_empty(&p->conn, f, true);
    return ETCH_OK;
  default: /* ActivateTriggers: etch runs no triggers */
    etch__svc_reply_empty(&p->conn, f, false);
    return ETCH_OK;
  }
}

/* A network peer's bytes, counted against its rate: over it, the peer is
 * not read until its next second (loop.c). */
static void count_rate(etch_service *s, producer *p, size_t got) {
  uint64_t now = etch__monotonic_ns();
  if (now - p->rate_ns >= 1000000000ull) {
    p->rate_ns = now;
    p->rate_bytes = 0;
  }
  p->rate_bytes += got;
  if (p->rate_bytes > s->o.net_bytes_per_s) {
    p->throttled_until_ns = p->rate_ns + 1000000000ull;
    etch__svc_warnf(s, W_RATE,
                    "producer %u (%s) sends more than %llu bytes a second "
                    "(--net-mb-per-s): read again in a moment",
                    p->id, p->conn.peer_addr,
                    (unsigned long long)s->o.net_bytes_per_s);
  }
}

void etch__svc_service_producer(etch_service *s, producer *p, short rev) {
  if (rev & POLLOUT) etch__ipc_conn_flush(&p->conn);
  size_t before = p->conn.rx_len - p->conn.rx_off;
  if (rev & (POLLIN | POLLHUP | POLLERR)) etch__ipc_conn_read(&p->conn);
  if (p->conn.remote && p->conn.rx_len - p->conn.rx_off > before)
    count_rate(s, p, p->conn.rx_len - p->conn.rx_off - before);
  /* On the stack: a frame that could not be allocated left what was read
   * unprocessed until more came, which may be never. */
  etch_ipc_frame frame;
  etch_ipc_frame *f = &frame;
  int r;
  while ((r = etch__ipc_conn_next(&p->conn, f)) == 1) {
    int rc = on_producer_frame(s, p, f);
    p->frames++;
    if (rc != ETCH_OK) {
      p->conn.eof = false;
      etch__ipc_conn_fail(&p->conn, "%s", etch_last_error());
      break;
    }
    if (p->bound) p->conn.max_frame = ETCH_IPC_MAX_FRAME;
  }
  etch__svc_conn_account(s, &p->conn, &p->partial);
  if (p->conn.failed) etch__svc_drop_producer(s, p, p->conn.err);
}

/* ---- a producer that goes ---- */

/*
 * What a producer that is going (it disconnected, or was killed) left in
 * its shared memory: chunks it completed but had not asked to move yet
 * (its last CommitData never came) go into the buffer of their writer in
 * the sessions it records for, as a commit would have put them, and then
 * the published part of chunks it was still writing is scraped as at a
 * flush (unless it asked not to be). Perfetto's service does the same.
 */
static void salvage_producer(etch_service *s, producer *p) {
  if (!p->smb_mem) return;
  for (uint32_t page = 0; page < p->smb.npages; page++) {
    uint32_t bm = etch__smb_bitmap(&p->smb, page);
    uint32_t n = etch__smb_layout_chunks(etch__smb_bitmap_layout(bm));
    for (uint32_t i = 0; i < n; i++) {
      if (etch__smb_bitmap_state(bm, i) != ETCH_SMB_COMPLETE ||
          !etch__smb_try_acquire_read(&p->smb, page, i))
        continue;
      int rc = etch__smb_chunk_read(&p->smb, page, i, s->chunk);
      etch__smb_release_free(&p->smb, page, i);
      if (rc) continue; /* a chunk that lies: its own loss */
      for (session *x = s->sessions; x; x = x->next) {
        if (x->state == S_DISABLED) continue;
        uint32_t buf = etch__svc_writer_buffer(s, x, p, s->chunk->writer_id);
        if (!buf) continue;
        uint32_t seq = etch__svc_seq_of(s, p, s->chunk->writer_id);
        if (seq)
          etch__tracebuf_put(s->bufs[buf], seq, s->chunk->chunk_id,
                             s->chunk->flags & 3u, s->chunk->count,
                             s->chunk->payload, s->chunk->payload_len);
        break;
      }
    }
  }
  /* libetch writes its chunks in place, with a header of its own after
   * them that says what it published (smb.h): taken whatever it asked
   * about scraping, as a commit of that much would have put it. */
  for (uint32_t page = 0; page < p->smb.npages; page++) {
    uint32_t bm = etch__smb_bitmap(&p->smb, page);
    uint32_t n = etch__smb_layout_chunks(etch__smb_bitmap_layout(bm));
    for (uint32_t i = 0; i < n; i++) {
      uint32_t off, len, flags;
      if (etch__smb_bitmap_state(bm, i) != ETCH_SMB_WRITING ||
          etch__smb_chunk_read(&p->smb, page, i, s->chunk) != ETCH_OK ||
          !etch__smb_inplace_committed(s->chunk, &off, &len, &flags) || !len)
        continue;
      const uint8_t *d = s->chunk->payload + off;
      etch__svc_logf(s, "producer %u: chunk %u of writer %u written in place, "
                     "%u bytes published", p->id, s->chunk->chunk_id,
                     s->chunk->writer_id, len);
      for (session *x = s->sessions; x; x = x->next) {
        if (x->state == S_DISABLED) continue;
        uint32_t buf = etch__svc_writer_buffer(s, x, p, s->chunk->writer_id);
        if (!buf) continue;
        uint32_t seq = etch__svc_seq_of(s, p, s->chunk->writer_id);
        if (seq)
          etch__tracebuf_put(s->bufs[buf], seq, s->chunk->chunk_id,
                             flags | ETCH_TRACEBUF_PARTIAL,
                             etch__frag_count(d, len), d, len);
        break;
      }
    }
  }
  for (session *x = s->sessions; x; x = x->next)
    if (x->state != S_DISABLED) etch__svc_scrape_producer(s, x, p);
}

void etch__svc_drop_producer(etch_service *s, producer *p, const char *why) {
  etch__svc_logf(s, "producer %u (%s, pid %d) gone: %s", p->id, p->name,
                 (int)p->conn.peer_pid, why);
  salvage_producer(s, p);
  for (producer **pp = &s->producers; *pp; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      break;
    }
  /* Sessions waiting on it stop waiting. */
  for (session *x = s->sessions; x; x = x->next) {
    if (x->flushing)
      for (uint32_t i = 0; i < x->nflush_wait; i++)
        if (x->flush_wait[i] == p->id) {
          x->flush_wait[i] = x->flush_wait[--x->nflush_wait];
          if (x->nflush_wait == 0) etch__svc_end_flush(s, x, true);
          break;
        }
    for (uint32_t i = 0; i < x->ninst; i++)
      if (x->inst[i].producer_id == p->id) x->inst[i].stopped = true;
  }
  etch__svc_conn_forget(s, &p->conn, p->partial);
  etch__ipc_conn_close(&p->conn);
  if (p->smb_mem) munmap(p->smb_mem, p->smb_size);
  if (p->smb_fd >= 0) close(p->smb_fd);
  for (uint32_t i = 0; i < p->nds; i++) free(p->ds[i].desc);
  etch__vec_free(&p->writerv);
  free(p);
  for (session *x = s->sessions; x; x = x->next) {
    if (x->state != S_STOPPING || x->flushing) continue;
    bool all = true;
    for (uint32_t k = 0; k < x->ninst; k++)
      if (!x->inst[k].stopped) all = false;
    if (all) etch__svc_finish_disable(s, x);
  }
}

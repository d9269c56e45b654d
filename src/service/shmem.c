/*
 * shmem.c - what the service keeps of a producer's writing (see
 * shmem.h): its writers' sequences, which buffers it may write, its
 * shared memory buffer (made here, sealed), the chunks a network producer
 * sends inside CommitData, and the async commands it is sent. Below the
 * sessions (session.c) and the producer port (producer.c), which both use
 * it; it calls only core.c and methods.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "buffer/fragment.h"
#include "service/methods.h"
#include "service/service_int.h"
#include "service/shmem.h"

/* ---- sequences and buffers ---- */

/* The service's sequence id for a producer's writer. */
uint32_t etch__svc_seq_of(etch_service *s, producer *p, uint16_t writer_id) {
  for (uint32_t i = 0; i < p->nwriters; i++)
    if (p->writers[i].writer_id == writer_id) return p->writers[i].seq;
  if (p->nwriters == MAX_WRITERS) return 0;
  if (ETCH_VEC_RESERVE(&p->writerv, wmap, 1)) return 0;
  p->writers = ETCH_VEC_AT(&p->writerv, wmap); /* it may have moved */
  /* seqinfo is indexed by sequence id: entries up to next_seq. */
  while (s->nseqinfo <= s->next_seq) {
    if (ETCH_VEC_PUSH(&s->seqinfov, seq_info, {0})) return 0;
    s->seqinfo = ETCH_VEC_AT(&s->seqinfov, seq_info);
    s->nseqinfo++;
  }
  s->seqinfo[s->next_seq] = (seq_info){.pid = (int32_t)p->conn.peer_pid,
                                       .uid = (int32_t)p->conn.peer_uid,
                                       .same_pidns = p->same_pidns,
                                       .producer = p->id,
                                       .machine = p->machine};
  uint32_t seq = s->next_seq++;
  (void)ETCH_VEC_PUSH(&p->writerv, wmap, /* room made above */
                      {.writer_id = writer_id, .seq = seq, .buffer = 0});
  p->writers = ETCH_VEC_AT(&p->writerv, wmap);
  p->nwriters++;
  return seq;
}

/* Whether producer p may write into global buffer `buf`: one of its data
 * source instances targets it. */
bool etch__svc_may_write(etch_service *s, const producer *p, uint32_t buf) {
  if (buf >= s->nbufs || !s->bufs[buf]) return false;
  session *x = etch__svc_find_session(s, s->buf_session[buf]);
  if (!x) return false;
  for (uint32_t i = 0; i < x->ninst; i++) {
    const instance *in = &x->inst[i];
    if (in->producer_id != p->id) continue;
    if (x->buf_ids[x->cfg->sources[in->source_index].target_buffer] == buf)
      return true;
  }
  return false;
}

/* ---- async commands, shared memory ---- */

void etch__svc_send_command(producer *p, const etch__pb_buf *cmd, int fd) {
  if (!p->has_async) return;
  etch__svc_send_reply(&p->conn, p->async_req, true, cmd, true, fd);
}

int etch__svc_make_smb(etch_service *s, producer *p) {
  uint32_t page = p->page_hint ? p->page_hint : s->o.smb_page_kb * 1024;
  if (page < ETCH_SMB_PAGE_MIN || page > 32768 || page % 4096) page = 32768;
  uint64_t size = p->size_hint ? p->size_hint : (uint64_t)s->o.smb_kb * 1024;
  if (size < 4u * page) size = 4u * page;
  if (size > SMB_MAX) size = SMB_MAX;
  size -= size % page;
  int fd = memfd_create("etch-smb", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return etch__error(ETCH_EIO, "memfd: %s", strerror(errno));
  if (ftruncate(fd, (off_t)size) != 0) {
    close(fd);
    return etch__error(ETCH_EIO, "ftruncate: %s", strerror(errno));
  }
  /* The producer gets this descriptor: sealed, it can neither shrink the
   * memory under our mapping (a read past the end would be a SIGBUS in
   * the service) nor unseal it. */
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    return etch__error(ETCH_EIO, "sealing the shared memory: %s",
                       strerror(errno));
  }
  void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    close(fd);
    return etch__error(ETCH_EIO, "mmap: %s", strerror(errno));
  }
  p->smb_mem = (uint8_t *)m;
  p->smb_size = size;
  p->smb_fd = fd;
  return etch__smb_init(&p->smb, m, size, page);
}

/* ---- shared memory emulated ---- */

int etch__svc_emulated_chunk(etch_service *s, const uint8_t *data,
                             size_t len) {
  /* What a chunk of shared memory can be: its header and at most the
   * largest page's payload (etch__smb_chunk_read copies no more). */
  if (len < ETCH_SMB_CHUNK_HEADER ||
      len - ETCH_SMB_CHUNK_HEADER > sizeof s->chunk->payload)
    return etch__error(ETCH_EFORMAT,
                       "a chunk of %zu bytes inside CommitData (a chunk "
                       "holds %u to %u)",
                       len, ETCH_SMB_CHUNK_HEADER,
                       (unsigned)(ETCH_SMB_CHUNK_HEADER +
                                  sizeof s->chunk->payload));
  etch_smb_chunk_header h;
  memcpy(&h, data, sizeof h);
  s->chunk->chunk_id = h.chunk_id;
  s->chunk->writer_id = h.writer_id;
  s->chunk->count = h.packets & 0x3ffu;
  s->chunk->flags = (uint16_t)(h.packets >> 10);
  s->chunk->payload_len = (uint32_t)(len - ETCH_SMB_CHUNK_HEADER);
  memcpy(s->chunk->payload, data + ETCH_SMB_CHUNK_HEADER,
         s->chunk->payload_len);
  return ETCH_OK;
}

void etch__svc_put_partial_chunk(etch_service *s, uint32_t buf,
                                 uint32_t seq) {
  if (s->chunk->count < 2) return;
  uint32_t idx = 0, off = 0, len, keep = 0;
  const uint8_t *d;
  while (idx + 1 < s->chunk->count &&
         etch__smb_next_fragment(s->chunk, &idx, &off, &d, &len) == 1)
    keep = off;
  if (idx + 1 != s->chunk->count) return; /* did not parse: its loss */
  etch__tracebuf_put(s->bufs[buf], seq, s->chunk->chunk_id,
                     (s->chunk->flags & ETCH_SMB_FIRST_CONTINUES) |
                         ETCH_TRACEBUF_PARTIAL,
                     idx, s->chunk->payload, keep);
}

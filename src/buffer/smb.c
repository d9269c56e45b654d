/*
 * smb.c - the shared memory buffer's pages and chunks (layout in smb.h).
 */
#include "buffer/smb.h"
#include "buffer/fragment.h"

#include <string.h>

static const uint8_t layout_chunks[8] = {0, 1, 2, 4, 7, 14, 0, 0};

uint32_t etch__smb_layout_chunks(uint32_t layout) {
  return layout < 8 ? layout_chunks[layout] : 0;
}

uint32_t etch__smb_chunk_size(uint32_t page_size, uint32_t layout) {
  uint32_t n = etch__smb_layout_chunks(layout);
  if (!n || page_size < ETCH_SMB_PAGE_HEADER) return 0;
  return ((page_size - ETCH_SMB_PAGE_HEADER) / n) & ~3u;
}

int etch__smb_init(etch_smb *m, void *base, uint64_t size, uint32_t page_size) {
  memset(m, 0, sizeof *m);
  if (page_size < ETCH_SMB_PAGE_MIN || page_size > ETCH_SMB_PAGE_MAX ||
      page_size % ETCH_SMB_PAGE_MIN)
    return etch__error(ETCH_EINVAL,
                       "shared memory buffer: page size %u is not a multiple "
                       "of 4 KiB between 4 and 64 KiB",
                       page_size);
  if (!size || size % page_size || size / page_size > UINT32_MAX)
    return etch__error(ETCH_EINVAL,
                       "shared memory buffer: size %llu is not a non-zero "
                       "multiple of the page size %u",
                       (unsigned long long)size, page_size);
  m->base = (uint8_t *)base;
  m->size = size;
  m->page_size = page_size;
  m->npages = (uint32_t)(size / page_size);
  return ETCH_OK;
}

static uint32_t *bitmap_of(const etch_smb *m, uint32_t page) {
  return (uint32_t *)(m->base + (uint64_t)page * m->page_size);
}

uint8_t *etch__smb_chunk_at(const etch_smb *m, uint32_t page, uint32_t layout,
                            uint32_t chunk) {
  ETCH_DCHECK(page < m->npages && chunk < etch__smb_layout_chunks(layout));
  return m->base + (uint64_t)page * m->page_size + ETCH_SMB_PAGE_HEADER +
         (uint64_t)chunk * etch__smb_chunk_size(m->page_size, layout);
}

bool etch__smb_try_partition(etch_smb *m, uint32_t page, uint32_t layout) {
  if (page >= m->npages || layout < ETCH_SMB_DIV1 || layout > ETCH_SMB_DIV14)
    return false;
  uint32_t expect = 0;
  return __atomic_compare_exchange_n(bitmap_of(m, page), &expect,
                                     layout << ETCH_SMB_LAYOUT_SHIFT, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

/* Moves chunk `chunk` of `page` from state `from` to `to` with a CAS of
 * the bitmap; *layout_out gets the page's layout. False when the page is
 * out of range, not partitioned (or reserved), the chunk beyond its layout,
 * or the chunk not in `from`. */
static bool transition(const etch_smb *m, uint32_t page, uint32_t chunk,
                       uint32_t from, uint32_t to, uint32_t *layout_out) {
  /* etch's own calls: only the ABI's four moves. */
  ETCH_DCHECK((from == ETCH_SMB_FREE && to == ETCH_SMB_WRITING) ||
              (from == ETCH_SMB_WRITING && to == ETCH_SMB_COMPLETE) ||
              (from == ETCH_SMB_COMPLETE && to == ETCH_SMB_READING) ||
              (from == ETCH_SMB_READING && to == ETCH_SMB_FREE));
  ETCH_DCHECK(m->page_size >= ETCH_SMB_PAGE_MIN && m->npages > 0);
  if (page >= m->npages || chunk >= ETCH_SMB_MAX_CHUNKS) return false;
  uint32_t *bm = bitmap_of(m, page);
  uint32_t old = __atomic_load_n(bm, __ATOMIC_ACQUIRE);
  for (;;) {
    uint32_t layout = etch__smb_bitmap_layout(old);
    if (chunk >= etch__smb_layout_chunks(layout)) return false;
    if (etch__smb_bitmap_state(old, chunk) != from) return false;
    uint32_t nu = (old & ~(3u << (2 * chunk))) | (to << (2 * chunk));
    if (to == ETCH_SMB_FREE &&
        (nu & ETCH_SMB_STATES_MASK) == 0) /* every chunk free: unpartition */
      nu = 0;
    if (__atomic_compare_exchange_n(bm, &old, nu, true, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      if (layout_out) *layout_out = layout;
      return true;
    }
  }
}

uint8_t *etch__smb_try_acquire_write(etch_smb *m, uint32_t page, uint32_t chunk,
                                     uint16_t writer_id, uint32_t chunk_id,
                                     uint16_t flags) {
  uint32_t layout;
  if (!transition(m, page, chunk, ETCH_SMB_FREE, ETCH_SMB_WRITING, &layout))
    return NULL;
  uint8_t *c = etch__smb_chunk_at(m, page, layout, chunk);
  etch_smb_chunk_header *h = (etch_smb_chunk_header *)c;
  __atomic_store_n(&h->chunk_id, chunk_id, __ATOMIC_RELAXED);
  __atomic_store_n(&h->writer_id, writer_id, __ATOMIC_RELAXED);
  __atomic_store_n(&h->packets, (uint16_t)((flags & 0x3fu) << 10),
                   __ATOMIC_RELEASE);
  return c;
}

bool etch__smb_release_complete(etch_smb *m, uint32_t page, uint32_t chunk) {
  return transition(m, page, chunk, ETCH_SMB_WRITING, ETCH_SMB_COMPLETE, NULL);
}

bool etch__smb_try_acquire_read(etch_smb *m, uint32_t page, uint32_t chunk) {
  return transition(m, page, chunk, ETCH_SMB_COMPLETE, ETCH_SMB_READING, NULL);
}

bool etch__smb_release_free(etch_smb *m, uint32_t page, uint32_t chunk) {
  return transition(m, page, chunk, ETCH_SMB_READING, ETCH_SMB_FREE, NULL);
}

int etch__smb_chunk_read(const etch_smb *m, uint32_t page, uint32_t chunk,
                         etch_smb_chunk *out) {
  if (page >= m->npages)
    return etch__error(ETCH_EFORMAT, "shared memory buffer: page %u of %u",
                       page, m->npages);
  /* The layout as it is now: the chunk is READING, so an honest producer
   * cannot change it; a dishonest one only garbles its own data. */
  uint32_t bitmap = etch__smb_bitmap(m, page);
  uint32_t layout = etch__smb_bitmap_layout(bitmap);
  uint32_t n = etch__smb_layout_chunks(layout);
  if (!n)
    return etch__error(ETCH_EFORMAT,
                       "shared memory buffer: page %u has layout %u", page,
                       layout);
  if (chunk >= n)
    return etch__error(ETCH_EFORMAT,
                       "shared memory buffer: chunk %u of a page of %u chunks",
                       chunk, n);
  uint32_t size = etch__smb_chunk_size(m->page_size, layout);
  /* A valid layout of a page checked by etch__smb_init: a chunk of 292 to
   * 65528 bytes, whose payload fits out->payload. */
  if (ETCH_NEVER(size <= ETCH_SMB_CHUNK_HEADER ||
                 size - ETCH_SMB_CHUNK_HEADER > sizeof out->payload))
    return etch__error(ETCH_EFORMAT, "shared memory buffer: chunk of %u "
                       "bytes", size);
  const uint8_t *c = etch__smb_chunk_at(m, page, layout, chunk);
  etch_smb_chunk_header h;
  memcpy(&h, c, sizeof h); /* once: the producer may rewrite it meanwhile */
  out->chunk_id = h.chunk_id;
  out->writer_id = h.writer_id;
  out->count = h.packets & 0x3ffu;
  out->flags = (uint16_t)(h.packets >> 10);
  out->payload_len = size - ETCH_SMB_CHUNK_HEADER;
  memcpy(out->payload, c + ETCH_SMB_CHUNK_HEADER, out->payload_len);
  return ETCH_OK;
}

int etch__smb_next_fragment(const etch_smb_chunk *c, uint32_t *index,
                            uint32_t *off, const uint8_t **data,
                            uint32_t *len) {
  etch_frag_cursor cur;
  etch__frag_init(&cur, c->payload, c->payload_len, c->count, c->flags);
  cur.index = *index;
  cur.off = *off;
  if (cur.index < cur.count && cur.off > cur.len) cur.off = cur.len;
  switch (etch__frag_next(&cur, data, len)) {
  case ETCH_FRAG_END:
    return 0;
  case ETCH_FRAG_OK:
  case ETCH_FRAG_DROP:
    *index = cur.index;
    *off = cur.off;
    return 1;
  case ETCH_FRAG_MISSING:
    return etch__error(ETCH_EFORMAT,
                       "chunk %u of writer %u: fragment %u of %u starts at "
                       "%u, past the chunk's %u bytes",
                       c->chunk_id, c->writer_id, *index, c->count, *off,
                       c->payload_len);
  case ETCH_FRAG_OVERRUN: {
    /* Where its bytes would start: past the size varint. */
    uint32_t start = *off + 1;
    while (start - *off < ETCH_FRAG_SIZE_BYTES && c->payload[start - 1] & 0x80)
      start++;
    return etch__error(ETCH_EFORMAT,
                       "chunk %u of writer %u: fragment %u of %u bytes at %u "
                       "overruns the chunk's %u bytes",
                       c->chunk_id, c->writer_id, *index, *len, start,
                       c->payload_len);
  }
  default:
    return etch__error(ETCH_EFORMAT,
                       "chunk %u of writer %u: fragment %u's size is not a "
                       "varint of at most 4 bytes within the chunk",
                       c->chunk_id, c->writer_id, *index);
  }
}

bool etch__smb_inplace_committed(const etch_smb_chunk *c, uint32_t *off,
                                 uint32_t *len, uint32_t *flags) {
  /* etch_chunk's words, read as the bytes they are (the producer's). */
  uint32_t w[8];
  if (c->payload_len < ETCH_SMB_INPLACE_HEADER) return false;
  uint32_t room = c->payload_len - ETCH_SMB_INPLACE_HEADER;
  memcpy(w, c->payload + room, sizeof w);
  uint32_t writer_id = w[1], chunk_id = w[2], used_word = w[3];
  if (w[7] != ETCH_SMB_INPLACE_MAGIC || writer_id != c->writer_id ||
      chunk_id != c->chunk_id)
    return false;
  uint32_t used = used_word & 0x0fffffffu;
  if (used > room) return false;
  *off = 0;
  *len = used;
  *flags = (used_word >> 28) & (ETCH_SMB_FIRST_CONTINUES | ETCH_SMB_LAST_CONTINUES);
  return true;
}

/*
 * fragment.h - reading a chunk's fragments and putting packets back
 * together across the chunks of a sequence: the one walk that the
 * in-process buffer (buffer.c), the service's trace buffer (tracebuf.c),
 * the shared memory's checks (smb.c) and the system backend (its chunks'
 * fragment counts) share.
 *
 * A chunk's payload is a run of fragments, each a size varint and that
 * many bytes: a whole TracePacket, or a piece of one when it is the first
 * fragment and the chunk's FIRST_CONTINUES flag is set (the packet began
 * in the chunk before) or the last fragment and LAST_CONTINUES is set (it
 * goes on in the next). A size 0 fragment is padding. Both chunk layouts
 * (etch's in-process one and Perfetto's shared-memory one) give these two
 * flags the same bits (1 and 2).
 *
 * The sizes are read as the shared memory's ABI has them: a varint of at
 * most 4 bytes (etch's writers pad theirs to exactly 4 so that they can be
 * patched), which holds any size a chunk can (under 2^28). A chunk whose
 * header counts its fragments (the shared memory's) ends after that many;
 * one that does not (etch's in-process chunk) where its bytes end.
 *
 * Every byte may come from a hostile producer: the cursor reads nothing
 * outside [base, base + len) and says how a chunk lies (a size past the
 * end, a size that is no varint, fewer fragments than counted); the
 * reassembler hands out only whole packets and says what was lost. What a
 * store does about a lie (count it, drop the rest of the chunk) is its own.
 */
#ifndef ETCH_BUFFER_FRAGMENT_H
#define ETCH_BUFFER_FRAGMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "pb/pb.h"

/* The chunk flags the walk reads (ETCH_CHUNK_* and ETCH_SMB_* alike). */
#define ETCH_FRAG_FIRST_CONTINUES 1u
#define ETCH_FRAG_LAST_CONTINUES 2u
/* The largest size varint, in bytes. */
#define ETCH_FRAG_SIZE_BYTES 4u
/* A size that means "drop the packet this fragment ends" (Perfetto's
 * shared-memory ABI; ETCH_SMB_DROP_PACKET). */
#define ETCH_FRAG_DROP_SIZE 0x0fffffffu
/* `count` of a chunk whose header does not count its fragments. */
#define ETCH_FRAG_UNCOUNTED UINT32_MAX

/* What etch__frag_next found. */
enum {
  ETCH_FRAG_OK = 1,   /* a fragment: (*data, *len) */
  ETCH_FRAG_END = 0,  /* no more: the count reached, or the bytes ended */
  ETCH_FRAG_DROP = 2, /* a size of ETCH_FRAG_DROP_SIZE: no bytes */
  /* Lies: the cursor does not move. */
  ETCH_FRAG_MISSING = -1, /* counted fragments past the chunk's end */
  ETCH_FRAG_BAD_SIZE = -2, /* the size is no varint of at most 4 bytes
                              within the chunk */
  ETCH_FRAG_OVERRUN = -3, /* the size runs past the chunk (*len: it) */
};

/* A walk over one chunk's fragments. */
typedef struct etch_frag_cursor {
  const uint8_t *base; /* the payload */
  uint32_t len;        /* its bytes */
  uint32_t off;        /* where the next fragment's size starts */
  uint32_t index;      /* fragments read */
  uint32_t count;      /* fragments the header counts, or UNCOUNTED */
  uint32_t flags;      /* the chunk's FIRST/LAST_CONTINUES */
} etch_frag_cursor;

ETCH_INLINE void etch__frag_init(etch_frag_cursor *c, const uint8_t *base,
                                 uint32_t len, uint32_t count,
                                 uint32_t flags) {
  c->base = base;
  c->len = len;
  c->off = 0;
  c->index = 0;
  c->count = count;
  c->flags = flags;
}

/* The rest of etch__frag_read: a size of 2 to 4 bytes, or a lie. Inline
 * too, so that what the caller keeps in registers stays there. */
ETCH_INLINE int etch__frag_read_long(const uint8_t *base, uint32_t blen,
                                     uint32_t *off, const uint8_t **data,
                                     uint32_t *len) {
  ETCH_DCHECK(*off < blen);
  const uint8_t *p = base + *off;
  uint32_t room = blen - *off;
  uint32_t v = 0, i = 0;
  for (;; i++) {
    if (i == ETCH_FRAG_SIZE_BYTES || i == room) return ETCH_FRAG_BAD_SIZE;
    v |= (uint32_t)(p[i] & 0x7f) << (7 * i);
    if (!(p[i] & 0x80)) break;
  }
  uint32_t start = *off + i + 1; /* <= blen: i < room */
  if (v == ETCH_FRAG_DROP_SIZE) {
    *data = NULL;
    *len = v;
    *off = start;
    return ETCH_FRAG_DROP;
  }
  if (v > blen - start) {
    *len = v;
    return ETCH_FRAG_OVERRUN;
  }
  *data = base + start;
  *len = v;
  *off = start + v;
  return ETCH_FRAG_OK;
}

/*
 * The cursor's one step, on the payload (base, blen) and the offset *off
 * of the next size alone, for a caller that keeps them in registers over
 * a run of fragments: ETCH_FRAG_OK with the fragment in (*data, *len) and
 * *off past it; ETCH_FRAG_END when *off is at the end; ETCH_FRAG_DROP (*len
 * the drop size, *data NULL, *off past it); or a lie (*off unmoved). A
 * one-byte size, nearly every packet's, takes the short way.
 */
ETCH_INLINE int etch__frag_read(const uint8_t *base, uint32_t blen,
                                uint32_t *off, const uint8_t **data,
                                uint32_t *len) {
  if (*off >= blen) return ETCH_FRAG_END;
  const uint8_t *p = base + *off;
  uint32_t b0 = *p;
  if (ETCH_LIKELY(b0 < 0x80)) {
    if (b0 >= blen - *off) {
      *len = b0;
      return ETCH_FRAG_OVERRUN;
    }
    *data = p + 1;
    *len = b0;
    *off += 1 + b0;
    return ETCH_FRAG_OK;
  }
  return etch__frag_read_long(base, blen, off, data, len);
}

/*
 * The next fragment: ETCH_FRAG_OK with its bytes in (*data, *len) and the
 * cursor past it; ETCH_FRAG_END after the counted ones, or at the end of an
 * uncounted chunk's bytes; ETCH_FRAG_DROP (*len the drop size, *data NULL;
 * the cursor past it); or a lie (negative, the cursor unmoved).
 */
ETCH_INLINE int etch__frag_next(etch_frag_cursor *c, const uint8_t **data,
                                uint32_t *len) {
  ETCH_DCHECK(c->off <= c->len);
  if (c->index >= c->count) return ETCH_FRAG_END;
  int k = etch__frag_read(c->base, c->len, &c->off, data, len);
  if (ETCH_LIKELY(k == ETCH_FRAG_OK || k == ETCH_FRAG_DROP)) {
    c->index++;
    return k;
  }
  if (k == ETCH_FRAG_END && c->count != ETCH_FRAG_UNCOUNTED)
    return ETCH_FRAG_MISSING; /* counted fragments past the end */
  return k;
}

/* Of the fragment just read: it continues a packet of the chunk before
 * (the chunk's first, with FIRST_CONTINUES), it goes on in the next (its
 * last, with LAST_CONTINUES: the counted last, or the one that ends the
 * bytes of an uncounted chunk). */
ETCH_INLINE bool etch__frag_cont_prev(const etch_frag_cursor *c) {
  return c->index == 1 && (c->flags & ETCH_FRAG_FIRST_CONTINUES);
}
ETCH_INLINE bool etch__frag_cont_next(const etch_frag_cursor *c) {
  if (!(c->flags & ETCH_FRAG_LAST_CONTINUES)) return false;
  return c->count == ETCH_FRAG_UNCOUNTED ? c->off == c->len
                                         : c->index == c->count;
}

/* The whole fragments in len bytes of an uncounted chunk, up to the first
 * that does not fit (the system backend's count for a chunk's header, over
 * its own writer's bytes: a tighter loop than etch__frag_next's). */
uint32_t etch__frag_count(const uint8_t *base, uint32_t len);

/*
 * A sequence's packets put back together: chunks in chunk id order, their
 * fragments in order. A packet cut by lost data (a gap in chunk ids, a
 * chunk that lied, a first fragment that continues a packet whose start is
 * gone, a packet that never ended) is never handed out; the next packet
 * handed out says `dropped` (previous_packet_dropped).
 */
typedef struct etch_reasm {
  etch__pb_buf pend; /* the packet being put together */
  uint32_t expect;   /* the chunk id that follows without a gap */
  bool again;        /* the next chunk may also be expect - 1 (read in part
                        before) */
  bool pending;      /* a packet goes on in the next chunk */
  bool dropped;      /* data was lost since the last packet handed out */
} etch_reasm;

void etch__reasm_init(etch_reasm *r);
void etch__reasm_free(etch_reasm *r);

/* A sequence from the start: its first chunk is `first_id` (0: the
 * sequence's first), or `first_id - 1` again when `again` (a chunk read in
 * part before). Nothing pending, nothing dropped; a packet pending from
 * the sequence before is let go (etch__reasm_lose first to count it). */
void etch__reasm_start(etch_reasm *r, uint32_t first_id, bool again);

/* Data of the sequence was lost (a chunk that lied, the end of what will
 * be read): the pending packet goes, the next one is marked dropped.
 * True when a pending packet went. */
ETCH_INLINE bool etch__reasm_lose(etch_reasm *r) {
  bool had = r->pending;
  r->pending = false;
  r->dropped = true;
  return had;
}

/* The next chunk of the sequence, by id: true when it follows the last
 * one without a gap. After a gap the data between is lost
 * (etch__reasm_lose: *cut says whether a pending packet went). */
ETCH_INLINE bool etch__reasm_chunk(etch_reasm *r, uint32_t chunk_id,
                                   bool *cut) {
  bool ok = chunk_id == r->expect || (r->again && chunk_id == r->expect - 1);
  r->again = false;
  r->expect = chunk_id + 1;
  *cut = ok ? false : etch__reasm_lose(r);
  return ok;
}

/* Appends a piece to the pending packet (out of line: the copy). */
int etch__reasm_append(etch_reasm *r, const uint8_t *d, uint32_t n);

/*
 * One fragment (cont_prev, cont_next: etch__frag_cont_prev/next of it).
 * Returns ETCH_ENOMEM, or ETCH_OK with *plen > 0 and (*pkt, *plen, *dropped)
 * a whole packet to hand out (valid until the next call), *plen 0 for none;
 * *lost is set when this fragment shows a packet lost (the start of the one
 * it continues is gone, or the one pending never ended), else untouched.
 */
ETCH_INLINE int etch__reasm_fragment(etch_reasm *r, const uint8_t *d,
                                     uint32_t n, bool cont_prev,
                                     bool cont_next, const uint8_t **pkt,
                                     uint32_t *plen, bool *dropped,
                                     bool *lost) {
  *plen = 0;
  if (cont_prev) {
    if (!r->pending) { /* its beginning is gone */
      r->dropped = true;
      *lost = true;
      return ETCH_OK;
    }
    int rc = etch__reasm_append(r, d, n);
    if (rc || cont_next) return rc;
    r->pending = false;
    size_t len = etch__pb_buf_len(&r->pend);
    if (!len) return ETCH_OK; /* only empty pieces: padding */
    *pkt = etch__pb_buf_data(&r->pend);
    *plen = (uint32_t)len;
    *dropped = r->dropped;
    r->dropped = false;
    return ETCH_OK;
  }
  if (r->pending) { /* the previous packet never ended */
    r->pending = false;
    r->dropped = true;
    *lost = true;
  }
  if (cont_next) {
    etch__pb_buf_reset(&r->pend);
    r->pending = true;
    return etch__reasm_append(r, d, n);
  }
  if (!n) return ETCH_OK; /* padding */
  *pkt = d;
  *plen = n;
  *dropped = r->dropped;
  r->dropped = false;
  return ETCH_OK;
}

#endif /* ETCH_BUFFER_FRAGMENT_H */

/*
 * fragment.c - the out-of-line half of the fragment cursor and the
 * reassembler (fragment.h): the count of a chunk's fragments, the pending
 * packet's bytes.
 */
#include "buffer/fragment.h"

/* Once per chunk over every packet in it (~480 instants in 4.6 KiB), so a
 * one-byte size, nearly every one, takes a two-instruction step; a
 * fragment whose bytes run past the end is not counted. */
uint32_t etch__frag_count(const uint8_t *base, uint32_t len) {
  uint32_t n = 0;
  uint64_t off = 0;
  while (off < len) {
    uint32_t b = base[off];
    if (ETCH_LIKELY(b < 0x80)) {
      off += 1 + (uint64_t)b;
      n++;
      continue;
    }
    uint32_t o = (uint32_t)off;
    const uint8_t *d;
    uint32_t l;
    if (etch__frag_read_long(base, len, &o, &d, &l) != ETCH_FRAG_OK) return n;
    off = o;
    n++;
  }
  /* The last one claimed more bytes than there are. */
  return off > len ? n - 1 : n;
}

void etch__reasm_init(etch_reasm *r) {
  etch__pb_buf_init(&r->pend, 0, 0);
  r->expect = 0;
  r->again = false;
  r->pending = false;
  r->dropped = false;
}

void etch__reasm_free(etch_reasm *r) { etch__pb_buf_free(&r->pend); }

void etch__reasm_start(etch_reasm *r, uint32_t first_id, bool again) {
  etch__pb_buf_reset(&r->pend);
  r->expect = first_id;
  r->again = again;
  r->pending = false;
  r->dropped = false;
}

int etch__reasm_append(etch_reasm *r, const uint8_t *d, uint32_t n) {
  ETCH_DCHECK(r->pending);
  etch__pb_write_bytes(&r->pend.s, d, n);
  return r->pend.s.failed ? ETCH_ENOMEM : ETCH_OK;
}

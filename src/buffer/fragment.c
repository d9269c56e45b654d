/*
 * fragment.c - the out-of-line half of the fragment cursor and the
 * reassembler (fragment.h): sizes of more than one byte, the count of a
 * chunk's fragments, the pending packet's bytes.
 */
#include "buffer/fragment.h"

int etch__frag_next_slow(etch_frag_cursor *c, const uint8_t **data,
                         uint32_t *len) {
  ETCH_DCHECK(c->index < c->count && c->off < c->len);
  const uint8_t *p = c->base + c->off;
  uint32_t room = c->len - c->off;
  uint32_t v = 0, i = 0;
  for (;; i++) {
    if (i == ETCH_FRAG_SIZE_BYTES || i == room) return ETCH_FRAG_BAD_SIZE;
    v |= (uint32_t)(p[i] & 0x7f) << (7 * i);
    if (!(p[i] & 0x80)) break;
  }
  uint32_t start = c->off + i + 1; /* <= len: i < room */
  if (v == ETCH_FRAG_DROP_SIZE) {
    *data = NULL;
    *len = v;
    c->off = start;
    c->index++;
    return ETCH_FRAG_DROP;
  }
  if (v > c->len - start) {
    *len = v;
    return ETCH_FRAG_OVERRUN;
  }
  *data = c->base + start;
  *len = v;
  c->off = start + v;
  c->index++;
  return ETCH_FRAG_OK;
}

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
    etch_frag_cursor c;
    etch__frag_init(&c, base, len, ETCH_FRAG_UNCOUNTED, 0);
    c.off = (uint32_t)off;
    const uint8_t *d;
    uint32_t l;
    if (etch__frag_next_slow(&c, &d, &l) != ETCH_FRAG_OK) return n;
    off = c.off;
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

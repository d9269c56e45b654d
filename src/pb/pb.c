/*
 * pb.c - protobuf stream encoder and in-place decoder.
 */
#include "pb/pb.h"

#include "base/containers.h"

#include <stdlib.h>
#include <string.h>

/* ---- encoder --------------------------------------------------------------- */

void etch__pb_write_bytes(etch__pb_stream *s, const void *data, size_t len) {
  const uint8_t *src = (const uint8_t *)data;
  while (len > 0) {
    if (s->cur == s->end && !etch__pb_reserve(s, 1)) return;
    if (s->failed) return;
    size_t room = (size_t)(s->end - s->cur);
    size_t n = len < room ? len : room;
    memcpy(s->cur, src, n);
    s->cur += n;
    src += n;
    len -= n;
  }
}

void etch__pb_write_varint_field(etch__pb_stream *s, uint32_t field,
                                uint64_t v) {
  if (!etch__pb_reserve(s, 5 + ETCH_PB_MAX_VARINT)) return;
  s->cur = etch__pb_put_tag(s->cur, field, ETCH_PB_VARINT);
  s->cur = etch__pb_put_varint(s->cur, v);
}

void etch__pb_write_sint_field(etch__pb_stream *s, uint32_t field, int64_t v) {
  etch__pb_write_varint_field(s, field, etch__pb_zigzag(v));
}

void etch__pb_write_fixed64_field(etch__pb_stream *s, uint32_t field,
                                 uint64_t v) {
  if (!etch__pb_reserve(s, 5 + 8)) return;
  s->cur = etch__pb_put_tag(s->cur, field, ETCH_PB_FIXED64);
  s->cur = etch__pb_put_fixed64(s->cur, v);
}

void etch__pb_write_fixed32_field(etch__pb_stream *s, uint32_t field,
                                 uint32_t v) {
  if (!etch__pb_reserve(s, 5 + 4)) return;
  s->cur = etch__pb_put_tag(s->cur, field, ETCH_PB_FIXED32);
  s->cur = etch__pb_put_fixed32(s->cur, v);
}

void etch__pb_write_double_field(etch__pb_stream *s, uint32_t field, double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  etch__pb_write_fixed64_field(s, field, u);
}

void etch__pb_write_bytes_field(etch__pb_stream *s, uint32_t field,
                               const void *data, size_t len) {
  if (!etch__pb_reserve(s, 5 + ETCH_PB_MAX_VARINT)) return;
  s->cur = etch__pb_put_tag(s->cur, field, ETCH_PB_LEN);
  s->cur = etch__pb_put_varint(s->cur, len);
  etch__pb_write_bytes(s, data, len);
}

void etch__pb_write_string_field(etch__pb_stream *s, uint32_t field,
                                const char *str) {
  etch__pb_write_bytes_field(s, field, str, strlen(str));
}

void etch__pb_nested_begin(etch__pb_stream *s, uint32_t field,
                          etch__pb_nested *n) {
  if (!etch__pb_reserve(s, 5 + ETCH_PB_NESTED_LEN)) {
    n->len_off = UINT64_MAX;
    return;
  }
  s->cur = etch__pb_put_tag(s->cur, field, ETCH_PB_LEN);
  n->len_off = etch__pb_stream_pos(s);
  s->cur += ETCH_PB_NESTED_LEN;
}

void etch__pb_nested_end(etch__pb_stream *s, const etch__pb_nested *n) {
  if (s->failed || n->len_off == UINT64_MAX) {
    s->failed = true;
    return;
  }
  uint64_t len = etch__pb_stream_pos(s) - n->len_off - ETCH_PB_NESTED_LEN;
  if (len > ETCH_PB_NESTED_MAX) {
    s->failed = true;
    return;
  }
  uint8_t *p;
  if (n->len_off >= s->seg_off) {
    p = s->seg + (n->len_off - s->seg_off);
  } else {
    p = s->resolve ? s->resolve(s, n->len_off) : NULL;
    if (!p) {
      s->failed = true;
      return;
    }
  }
  etch__pb_put_redundant4(p, (uint32_t)len);
}

/* ---- heap buffer ------------------------------------------------------------ */

/* The memory is base's byte vector's (doubling from 256, never past the
 * limit: a write past it fails). */
static bool buf_grow(etch__pb_stream *s, size_t need) {
  etch__pb_buf *b = (etch__pb_buf *)s;
  etch_vec v = {s->seg, (size_t)(s->cur - s->seg), (size_t)(s->end - s->seg)};
  if (etch__vec_reserve_max(&v, need, b->limit)) {
    /* Past the limit, or out of memory: nomem says which. */
    b->nomem = !b->limit || (v.len <= b->limit && b->limit - v.len >= need);
    return false;
  }
  s->seg = v.data;
  s->cur = v.data + v.len;
  s->end = v.data + v.cap;
  return true;
}

void etch__pb_buf_init(etch__pb_buf *b, size_t initial, size_t limit) {
  memset(b, 0, sizeof *b);
  b->s.grow = buf_grow;
  b->limit = limit;
  if (initial) buf_grow(&b->s, initial);
}

static bool fixed_grow(etch__pb_stream *s, size_t need) {
  (void)s;
  (void)need;
  return false;
}

void etch__pb_fixed_init(etch__pb_stream *s, uint8_t *buf, size_t cap) {
  memset(s, 0, sizeof *s);
  s->seg = s->cur = buf;
  s->end = buf + cap;
  s->grow = fixed_grow;
}

void etch__pb_buf_free(etch__pb_buf *b) {
  free(b->s.seg);
  memset(&b->s, 0, sizeof b->s);
}

uint8_t *etch__pb_buf_take(etch__pb_buf *b, size_t *len) {
  uint8_t *p = b->s.seg;
  *len = etch__pb_buf_len(b);
  b->s.seg = b->s.cur = b->s.end = NULL;
  return p;
}

/* ---- decoder ---------------------------------------------------------------- */

/* 1: read, 0: input ends inside the varint, -1: longer than 10 bytes. */
static int varint_read(const uint8_t **pp, const uint8_t *end, uint64_t *out) {
  const uint8_t *p = *pp;
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (p >= end) return 0;
    uint8_t b = *p++;
    if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      *pp = p;
      return 1;
    }
  }
  return -1;
}

bool etch__pb_read_varint(const uint8_t **pp, const uint8_t *end,
                         uint64_t *out) {
  return varint_read(pp, end, out) == 1;
}

static bool dec_fail(etch__pb_dec *d, const uint8_t *at, int err,
                     const char *msg) {
  d->err = err;
  d->err_off = (size_t)(at - d->start);
  d->err_msg = msg;
  d->p = d->end;
  return false;
}

bool etch__pb_next(etch__pb_dec *d, etch__pb_field *f) {
  if (d->p >= d->end || d->err) return false;
  const uint8_t *at = d->p;
  const uint8_t *p = d->p;
  uint64_t tag;
  int vr = varint_read(&p, d->end, &tag);
  if (vr != 1)
    return dec_fail(d, at, vr == 0 ? ETCH_ETRUNC : ETCH_EFORMAT,
                    vr == 0 ? "truncated field tag" : "overlong field tag");
  uint64_t id = tag >> 3;
  if (id == 0 || id > 536870911u)
    return dec_fail(d, at, ETCH_EFORMAT, "invalid field number");
  f->id = (uint32_t)id;
  f->wt = (uint8_t)(tag & 7);
  f->off = (size_t)(at - d->start);
  f->data = NULL;
  f->len = 0;
  f->u = 0;
  switch (f->wt) {
    case ETCH_PB_VARINT:
      vr = varint_read(&p, d->end, &f->u);
      if (vr != 1)
        return dec_fail(d, at, vr == 0 ? ETCH_ETRUNC : ETCH_EFORMAT,
                        vr == 0 ? "truncated varint" : "overlong varint");
      break;
    case ETCH_PB_FIXED64:
      if ((size_t)(d->end - p) < 8)
        return dec_fail(d, at, ETCH_ETRUNC, "truncated fixed64");
      for (int i = 7; i >= 0; i--) f->u = (f->u << 8) | p[i];
      p += 8;
      break;
    case ETCH_PB_FIXED32:
      if ((size_t)(d->end - p) < 4)
        return dec_fail(d, at, ETCH_ETRUNC, "truncated fixed32");
      for (int i = 3; i >= 0; i--) f->u = (f->u << 8) | p[i];
      p += 4;
      break;
    case ETCH_PB_LEN: {
      uint64_t len;
      vr = varint_read(&p, d->end, &len);
      if (vr != 1)
        return dec_fail(d, at, vr == 0 ? ETCH_ETRUNC : ETCH_EFORMAT,
                        vr == 0 ? "truncated length" : "overlong length");
      if (len > (uint64_t)(d->end - p))
        return dec_fail(d, at, ETCH_ETRUNC,
                        "length field larger than the remaining data");
      f->data = p;
      f->len = (size_t)len;
      p += len;
      break;
    }
    default:
      return dec_fail(d, at, ETCH_EFORMAT, "unsupported wire type");
  }
  d->p = p;
  return true;
}

/*
 * pb.h - the protobuf wire format, without libprotobuf.
 *
 * Encoding has two levels:
 *  - raw helpers (etch__pb_put_*) that write into memory the caller has
 *    already bounds-checked; the hot path uses these directly;
 *  - a stream (etch__pb_stream) that writes into a run of segments (a chunk of
 *    a trace buffer, a growing heap buffer). When a segment is full the
 *    stream's `grow` callback hands out the next one, so one message can
 *    cross chunk boundaries. Nested messages reserve a 4-byte redundant
 *    varint for their length and patch it when they end; the length is
 *    tracked by logical offsets, so the patch works even after the stream
 *    moved on to another segment.
 *
 * Decoding (etch__pb_dec) walks fields in place, never copies, and reports
 * malformed input (truncated varints, lengths beyond the buffer, invalid
 * wire types) as an error with the byte offset.
 */
#ifndef ETCH_PB_H
#define ETCH_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/base.h"

enum {
  ETCH_PB_VARINT = 0,
  ETCH_PB_FIXED64 = 1,
  ETCH_PB_LEN = 2,
  ETCH_PB_SGROUP = 3,
  ETCH_PB_EGROUP = 4,
  ETCH_PB_FIXED32 = 5,
};

#define ETCH_PB_MAX_VARINT 10
/* Size of the reserved length field of a nested message. */
#define ETCH_PB_NESTED_LEN 4
/* Largest length a reserved 4-byte varint can hold. */
#define ETCH_PB_NESTED_MAX ((1u << 28) - 1)

/* ---- raw helpers: caller guarantees room ---------------------------------- */

ETCH_INLINE uint8_t *etch__pb_put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

ETCH_INLINE uint32_t etch__pb_tag(uint32_t field, uint32_t wt) {
  return (field << 3) | wt;
}

ETCH_INLINE uint8_t *etch__pb_put_tag(uint8_t *p, uint32_t field, uint32_t wt) {
  return etch__pb_put_varint(p, etch__pb_tag(field, wt));
}

ETCH_INLINE uint64_t etch__pb_zigzag(int64_t v) {
  return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

ETCH_INLINE int64_t etch__pb_unzigzag(uint64_t v) {
  return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Fixed-width fields are little-endian on the wire: one store on
 * little-endian machines, bytes in order elsewhere. */
ETCH_INLINE uint8_t *etch__pb_put_fixed64(uint8_t *p, uint64_t v) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(p, &v, 8);
#else
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
#endif
  return p + 8;
}

ETCH_INLINE uint8_t *etch__pb_put_fixed32(uint8_t *p, uint32_t v) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(p, &v, 4);
#else
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
#endif
  return p + 4;
}

ETCH_INLINE size_t etch__pb_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

/* Writes `v` as a varint padded to exactly 4 bytes (v < 2^28). */
ETCH_INLINE void etch__pb_put_redundant4(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v | 0x80);
  p[1] = (uint8_t)((v >> 7) | 0x80);
  p[2] = (uint8_t)((v >> 14) | 0x80);
  p[3] = (uint8_t)((v >> 21) & 0x7f);
}

/* Fields, into memory the caller has sized (the SDK's general path). */
ETCH_INLINE uint8_t *etch__pb_put_varint_field(uint8_t *q, uint32_t field,
                                               uint64_t v) {
  return etch__pb_put_varint(etch__pb_put_tag(q, field, ETCH_PB_VARINT), v);
}
ETCH_INLINE uint8_t *etch__pb_put_fixed64_field(uint8_t *q, uint32_t field,
                                                uint64_t v) {
  return etch__pb_put_fixed64(etch__pb_put_tag(q, field, ETCH_PB_FIXED64), v);
}
ETCH_INLINE uint8_t *etch__pb_put_bytes_field(uint8_t *q, uint32_t field,
                                              const void *d, uint32_t n) {
  q = etch__pb_put_varint(etch__pb_put_tag(q, field, ETCH_PB_LEN), n);
  memcpy(q, d, n);
  return q + n;
}
/* A nested message in memory: _open writes its tag and leaves one byte for
 * its length (returned); _close writes the length, moving the body in the
 * rare case it needs more than one byte (the caller's bound has room for
 * that), and returns the message's end. */
ETCH_INLINE uint8_t *etch__pb_put_open(uint8_t **q, uint32_t field) {
  uint8_t *len = etch__pb_put_tag(*q, field, ETCH_PB_LEN);
  *q = len + 1;
  return len;
}
ETCH_INLINE uint8_t *etch__pb_put_close(uint8_t *len, uint8_t *end) {
  size_t n = (size_t)(end - (len + 1));
  if (ETCH_LIKELY(n < 128)) {
    *len = (uint8_t)n;
    return end;
  }
  size_t vs = etch__pb_varint_size(n);
  memmove(len + vs, len + 1, n);
  etch__pb_put_varint(len, n);
  return len + vs + n;
}

/* ---- streams --------------------------------------------------------------- */

typedef struct etch__pb_stream etch__pb_stream;

struct etch__pb_stream {
  uint8_t *cur;      /* next byte to write */
  uint8_t *end;      /* end of the current segment */
  uint8_t *seg;      /* start of the current segment */
  uint64_t seg_off;  /* logical offset of `seg` */
  /*
   * Makes at least `need` contiguous bytes available (switching segment or
   * reallocating). Returns false when no more space can be had; the stream
   * then sets `failed` and swallows further writes.
   */
  bool (*grow)(etch__pb_stream *s, size_t need);
  /* Maps a logical offset in an earlier segment back to memory (may be NULL
   * for single-segment streams). */
  uint8_t *(*resolve)(etch__pb_stream *s, uint64_t off);
  void *ctx;
  bool failed;
};

/* A nested message in progress. */
typedef struct etch__pb_nested {
  uint64_t len_off; /* logical offset of the reserved length */
} etch__pb_nested;

ETCH_INLINE uint64_t etch__pb_stream_pos(const etch__pb_stream *s) {
  return s->seg_off + (uint64_t)(s->cur - s->seg);
}

/* Ensures `n` contiguous bytes; false if the stream failed. */
ETCH_INLINE bool etch__pb_reserve(etch__pb_stream *s, size_t n) {
  if (ETCH_LIKELY((size_t)(s->end - s->cur) >= n)) return true;
  if (s->failed) return false;
  if (!s->grow(s, n)) {
    s->failed = true;
    return false;
  }
  return true;
}

void etch__pb_write_bytes(etch__pb_stream *s, const void *data, size_t len);
void etch__pb_write_varint_field(etch__pb_stream *s, uint32_t field, uint64_t v);
void etch__pb_write_sint_field(etch__pb_stream *s, uint32_t field, int64_t v);
void etch__pb_write_fixed64_field(etch__pb_stream *s, uint32_t field, uint64_t v);
void etch__pb_write_fixed32_field(etch__pb_stream *s, uint32_t field, uint32_t v);
void etch__pb_write_double_field(etch__pb_stream *s, uint32_t field, double v);
void etch__pb_write_bytes_field(etch__pb_stream *s, uint32_t field,
                               const void *data, size_t len);
void etch__pb_write_string_field(etch__pb_stream *s, uint32_t field,
                                const char *str);
/* Starts a nested message `field`; its length is patched by _end. */
void etch__pb_nested_begin(etch__pb_stream *s, uint32_t field,
                          etch__pb_nested *n);
void etch__pb_nested_end(etch__pb_stream *s, const etch__pb_nested *n);

/*
 * A growable heap buffer as a single-segment stream. Owns `data` (free with
 * etch__pb_buf_free); `len` is valid after any write.
 */
typedef struct etch__pb_buf {
  etch__pb_stream s;
  size_t limit; /* 0 = unlimited; else max bytes */
  bool nomem;   /* failed for want of memory, not for the limit */
} etch__pb_buf;

void etch__pb_buf_init(etch__pb_buf *b, size_t initial, size_t limit);
/* A stream over `cap` bytes of the caller's memory (the stack): it fails,
 * and swallows further writes, when they do not fit. */
void etch__pb_fixed_init(etch__pb_stream *s, uint8_t *buf, size_t cap);
void etch__pb_buf_free(etch__pb_buf *b);
ETCH_INLINE size_t etch__pb_buf_len(const etch__pb_buf *b) {
  return (size_t)(b->s.cur - b->s.seg);
}
ETCH_INLINE uint8_t *etch__pb_buf_data(const etch__pb_buf *b) { return b->s.seg; }
/* Drops the contents, keeps the memory. */
ETCH_INLINE void etch__pb_buf_reset(etch__pb_buf *b) {
  b->s.cur = b->s.seg;
  b->s.failed = false;
  b->nomem = false;
}
/* Takes ownership of the bytes; the buffer is left empty. */
uint8_t *etch__pb_buf_take(etch__pb_buf *b, size_t *len);

/* ---- decoding -------------------------------------------------------------- */

typedef struct etch__pb_field {
  uint32_t id;
  uint8_t wt;
  uint64_t u;          /* varint, fixed64 or fixed32 value */
  const uint8_t *data; /* LEN payload */
  size_t len;
  size_t off;          /* offset of the field's tag from the decoder start */
} etch__pb_field;

typedef struct etch__pb_dec {
  const uint8_t *start;
  const uint8_t *p;
  const uint8_t *end;
  int err;        /* 0 or ETCH_EFORMAT / ETCH_ETRUNC */
  size_t err_off; /* offset of the offending byte from `start` */
  const char *err_msg;
} etch__pb_dec;

ETCH_INLINE void etch__pb_dec_init(etch__pb_dec *d, const void *data,
                                  size_t len) {
  /* No bytes at all (a call without arguments): an empty message. */
  static const uint8_t empty[1];
  if (!data) {
    data = empty;
    len = 0;
  }
  d->start = d->p = (const uint8_t *)data;
  d->end = d->start + len;
  d->err = 0;
  d->err_off = 0;
  d->err_msg = NULL;
}

/*
 * Reads the next field. Returns true with *f filled, false at the end of
 * input or on error (then d->err is non-zero and d->err_off/err_msg say
 * where and what).
 */
bool etch__pb_next(etch__pb_dec *d, etch__pb_field *f);

/* Reads a varint at *p (bounded by end); returns false on truncation or
 * overlong encoding. */
bool etch__pb_read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out);

ETCH_INLINE double etch__pb_field_double(const etch__pb_field *f) {
  double d;
  uint64_t u = f->u;
  memcpy(&d, &u, sizeof d);
  return d;
}

ETCH_INLINE float etch__pb_field_float(const etch__pb_field *f) {
  float x;
  uint32_t u = (uint32_t)f->u;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* ---- inline decoding (the reader's hot path) ------------------------------------------------------------------ */

/*
 * A varint of at most 5 bytes at q (bounded by end), inline: the values of
 * a track event (deltas, iids, small uuids, lengths) and the 4-byte
 * redundant lengths libetch reserves for nested messages. NULL when longer
 * or truncated (the caller falls back to the full decoder).
 */
ETCH_INLINE const uint8_t *etch__pb_varint5(const uint8_t *q, const uint8_t *end,
                                      uint64_t *out) {
  if (ETCH_LIKELY(q < end && q[0] < 0x80)) {
    *out = q[0];
    return q + 1;
  }
  if (ETCH_LIKELY(end - q >= 5)) {
    uint64_t b = q[0], v = b & 0x7f;
    if (b < 0x80) goto done1;
    b = q[1];
    v |= (b & 0x7f) << 7;
    if (b < 0x80) goto done2;
    b = q[2];
    v |= (b & 0x7f) << 14;
    if (b < 0x80) goto done3;
    b = q[3];
    v |= (b & 0x7f) << 21;
    if (b < 0x80) goto done4;
    b = q[4];
    if (b >= 0x80) return NULL;
    v |= b << 28;
    *out = v;
    return q + 5;
  done1:
    *out = v;
    return q + 1;
  done2:
    *out = v;
    return q + 2;
  done3:
    *out = v;
    return q + 3;
  done4:
    *out = v;
    return q + 4;
  }
  uint64_t v = 0;
  for (unsigned i = 0; q + i < end; i++) {
    uint64_t b = q[i];
    v |= (b & 0x7f) << (7 * i);
    if (b < 0x80) {
      *out = v;
      return q + i + 1;
    }
  }
  return NULL;
}

/*
 * etch__pb_next with an inline fast path for the common shapes (tags of one
 * or two bytes; varints and lengths of up to 5 bytes, redundant ones
 * included; fixed64), which are every field of the packets libetch writes.
 * Same results as etch__pb_next in every case.
 */
/* etch__pb_next through copies, so that the callers' decoder and field do
 * not escape and can live in registers. */
ETCH_INLINE bool etch__pb_next_copy(etch__pb_dec *d, etch__pb_field *f) {
  etch__pb_dec dd = *d;
  etch__pb_field ff;
  bool ok = etch__pb_next(&dd, &ff);
  *d = dd;
  if (ok) *f = ff;
  return ok;
}

ETCH_INLINE bool etch__pb_next_fast(etch__pb_dec *d, etch__pb_field *f) {
  const uint8_t *p = d->p, *end = d->end;
  if (ETCH_UNLIKELY(p >= end)) return false;
  if (ETCH_LIKELY(end - p >= 2)) {
    const uint8_t *q = p + 1;
    uint32_t tag = p[0];
    if (tag >= 0x80) {
      if (q[0] >= 0x80) goto slow;
      tag = (tag & 0x7f) | (uint32_t)q[0] << 7;
      q++;
    }
    if (ETCH_UNLIKELY(tag < 8)) goto slow; /* field 0 */
    uint32_t wt = tag & 7;
    uint64_t v;
    if (wt == ETCH_PB_VARINT) {
      if (!(q = etch__pb_varint5(q, end, &v))) goto slow;
      f->u = v;
      f->data = NULL;
      f->len = 0;
    } else if (wt == ETCH_PB_LEN) {
      if (!(q = etch__pb_varint5(q, end, &v)) || v > (uint64_t)(end - q)) goto slow;
      f->u = 0;
      f->data = q;
      f->len = (size_t)v;
      q += v;
    } else if (wt == ETCH_PB_FIXED64 && end - q >= 8) {
      v = 0;
      for (int i = 7; i >= 0; i--) v = (v << 8) | q[i];
      f->u = v;
      f->data = NULL;
      f->len = 0;
      q += 8;
    } else {
      goto slow;
    }
    f->id = tag >> 3;
    f->wt = (uint8_t)wt;
    f->off = (size_t)(p - d->start);
    d->p = q;
    return true;
  }
slow:
  return etch__pb_next_copy(d, f);
}


#endif /* ETCH_PB_H */

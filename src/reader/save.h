/*
 * save.h - a reader's state as bytes and back (save.c), for a query that
 * reads on a trace being recorded from one process to the next
 * (import_save.c), and the little encoding both use.
 *
 * The encoding: fixed-width little-endian integers, doubles as their
 * bits, strings as a u32 length (0xffffffff: NULL) and their bytes. The
 * decoder checks every length against what is left, so that state read
 * back from disk (corrupt, cut short, or lying) gives an error, never a
 * read past its end or an allocation its bytes cannot back.
 */
#ifndef ETCH_READER_SAVE_H
#define ETCH_READER_SAVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/base.h"
#include "base/containers.h"
#include "etch/reader.h"

/* ---- writing ----------------------------------------------------------------- */

typedef struct etch__sv_w {
  etch_vec v;
  bool oom;
} etch__sv_w;

ETCH_INLINE void etch__sv_bytes(etch__sv_w *w, const void *p, size_t n) {
  if (!w->oom && n && etch__vec_push(&w->v, p, n)) w->oom = true;
}
ETCH_INLINE void etch__sv_u64(etch__sv_w *w, uint64_t x) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(x >> (8 * i));
  etch__sv_bytes(w, b, 8);
}
ETCH_INLINE void etch__sv_i64(etch__sv_w *w, int64_t x) {
  etch__sv_u64(w, (uint64_t)x);
}
ETCH_INLINE void etch__sv_u32(etch__sv_w *w, uint32_t x) {
  uint8_t b[4];
  for (int i = 0; i < 4; i++) b[i] = (uint8_t)(x >> (8 * i));
  etch__sv_bytes(w, b, 4);
}
ETCH_INLINE void etch__sv_u8(etch__sv_w *w, uint8_t x) {
  etch__sv_bytes(w, &x, 1);
}
ETCH_INLINE void etch__sv_f64(etch__sv_w *w, double d) {
  uint64_t x;
  memcpy(&x, &d, 8);
  etch__sv_u64(w, x);
}
ETCH_INLINE void etch__sv_str(etch__sv_w *w, const char *s) {
  if (!s) {
    etch__sv_u32(w, UINT32_MAX);
    return;
  }
  size_t n = strlen(s);
  if (n >= UINT32_MAX) {
    w->oom = true;
    return;
  }
  etch__sv_u32(w, (uint32_t)n);
  etch__sv_bytes(w, s, n);
}

/* ---- reading ----------------------------------------------------------------- */

typedef struct etch__sv_r {
  const uint8_t *p;
  size_t left;
  bool bad; /* read past the end, or a value out of its range */
} etch__sv_r;

ETCH_INLINE bool etch__sv_take(etch__sv_r *r, void *out, size_t n) {
  if (r->bad || r->left < n) {
    r->bad = true;
    if (out) memset(out, 0, n);
    return false;
  }
  if (out) memcpy(out, r->p, n);
  r->p += n;
  r->left -= n;
  return true;
}
ETCH_INLINE uint64_t etch__sv_get_u64(etch__sv_r *r) {
  uint8_t b[8];
  if (!etch__sv_take(r, b, 8)) return 0;
  uint64_t x = 0;
  for (int i = 0; i < 8; i++) x |= (uint64_t)b[i] << (8 * i);
  return x;
}
ETCH_INLINE int64_t etch__sv_get_i64(etch__sv_r *r) {
  return (int64_t)etch__sv_get_u64(r);
}
ETCH_INLINE uint32_t etch__sv_get_u32(etch__sv_r *r) {
  uint8_t b[4];
  if (!etch__sv_take(r, b, 4)) return 0;
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
         (uint32_t)b[3] << 24;
}
ETCH_INLINE uint8_t etch__sv_get_u8(etch__sv_r *r) {
  uint8_t b = 0;
  etch__sv_take(r, &b, 1);
  return b;
}
/* A bool: 0 or 1, anything else is bad. */
ETCH_INLINE bool etch__sv_get_bool(etch__sv_r *r) {
  uint8_t b = etch__sv_get_u8(r);
  if (b > 1) r->bad = true;
  return b == 1;
}
ETCH_INLINE double etch__sv_get_f64(etch__sv_r *r) {
  uint64_t x = etch__sv_get_u64(r);
  double d;
  memcpy(&d, &x, 8);
  return d;
}
/* A count of items of at least `min_size` bytes each: bad when the bytes
 * left cannot hold them (or it passes `max`). */
ETCH_INLINE size_t etch__sv_get_count(etch__sv_r *r, size_t min_size,
                                      size_t max) {
  uint64_t n = etch__sv_get_u64(r);
  if (r->bad || n > max || (min_size && n > r->left / min_size)) {
    r->bad = true;
    return 0;
  }
  return (size_t)n;
}
/* A string's bytes in place (*len of them, no NUL); *is_null for NULL. */
ETCH_INLINE const char *etch__sv_get_str(etch__sv_r *r, size_t *len,
                                         bool *is_null) {
  uint32_t n = etch__sv_get_u32(r);
  *len = 0;
  *is_null = false;
  if (r->bad) return NULL;
  if (n == UINT32_MAX) {
    *is_null = true;
    return NULL;
  }
  if (n > r->left) {
    r->bad = true;
    return NULL;
  }
  const char *s = (const char *)r->p;
  if (memchr(s, 0, n)) { /* a NUL inside would cut it: not etch's */
    r->bad = true;
    return NULL;
  }
  r->p += n;
  r->left -= n;
  *len = n;
  return s;
}

/* ---- the reader's state ------------------------------------------------------ */

/*
 * After a read of a file (etch_reader_run or etch__reader_resume) that
 * ended well, in the configuration a live import reads in (file order,
 * per-track order, nothing held): everything etch__reader_resume needs, as
 * bytes appended to `w`. ETCH_EUNSUPPORTED for state it does not save
 * (call stacks, custom events, several machines): the caller reads cold.
 */
int etch__reader_save(const etch_reader *r, etch__sv_w *w);

/*
 * Into `r`, opened on the same file (etch_reader_open_file) with its
 * callbacks and options set and not run: the state saved, read from `in`.
 * Then etch__reader_resume reads on from where the saved read ended (the
 * file must be the same one, at least as long). ETCH_EFORMAT for state
 * that is not a whole, consistent save (r is then only fit to close).
 */
int etch__reader_restore(etch_reader *r, etch__sv_r *in);

#endif /* ETCH_READER_SAVE_H */

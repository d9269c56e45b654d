/*
 * containers.h - base's small containers besides the arena and string pool
 * (arena.h) and the u64 map (map.h): a growable bitset, a table that gives
 * strings small ids (1, 2, ...) in the order they come, and a growable
 * byte vector. One copy for every part (the SDK and the reader had their
 * own).
 */
#ifndef ETCH_BASE_CONTAINERS_H
#define ETCH_BASE_CONTAINERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/base.h"

/* ---- bitset ----------------------------------------------------------------- */

typedef struct etch_bitset {
  uint64_t *w;
  uint32_t nbits;
} etch_bitset;

ETCH_INLINE bool etch__bitset_has(const etch_bitset *b, uint32_t i) {
  return i < b->nbits && ((b->w[i >> 6] >> (i & 63)) & 1);
}
/* Sets bit i (false when out of memory). */
bool etch__bitset_set(etch_bitset *b, uint32_t i);
void etch__bitset_clear(etch_bitset *b);
/* Makes room for bit i without setting it (false when out of memory). */
bool etch__bitset_reserve(etch_bitset *b, uint32_t i);
void etch__bitset_free(etch_bitset *b);

/* ---- string ids ------------------------------------------------------------ */

/* Most strings one table holds; past it etch__strtab_intern says 0. */
#define ETCH_STRTAB_MAX 65536

typedef struct etch_strtab_slot {
  uint64_t hash;
  uint32_t iid;
  uint32_t len;
  char *str;
} etch_strtab_slot;

typedef struct etch_strtab {
  etch_strtab_slot *slots;
  uint32_t cap;
  uint32_t count;
} etch_strtab;

/* The id of s[0..len) (1, 2, ... in the order strings came); *is_new
 * tells whether it was added now. 0 when out of memory or full. */
uint32_t etch__strtab_intern(etch_strtab *t, const char *s, uint32_t len,
                             bool *is_new);
/* Forgets every string (ids start again from 1). */
void etch__strtab_clear(etch_strtab *t);

/* ---- byte vector ------------------------------------------------------------ */

typedef struct etch_vec {
  uint8_t *data;
  size_t len, cap;
} etch_vec;

/* Room for `extra` more bytes; ETCH_ENOMEM (error set) when it cannot. */
int etch__vec_reserve(etch_vec *v, size_t extra);
/* Appends n bytes of p; nothing (and no memcpy) when n is 0 or p is NULL. */
ETCH_INLINE int etch__vec_push(etch_vec *v, const void *p, size_t n) {
  if (n == 0 || !p) return 0;
  if (ETCH_UNLIKELY(v->cap - v->len < n) && etch__vec_reserve(v, n))
    return ETCH_ENOMEM;
  memcpy(v->data + v->len, p, n);
  v->len += n;
  return 0;
}

#endif /* ETCH_BASE_CONTAINERS_H */

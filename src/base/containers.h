/*
 * containers.h - base's small containers besides the arena and string pool
 * (arena.h) and the u64 map (map.h): a growable bitset, a table that gives
 * strings small ids (1, 2, ...) in the order they come, a growable byte
 * vector, a map from u64 keys to pointers and a table from interned ids to
 * pointers. One copy for every part (the SDK and the reader had their
 * own).
 */
#ifndef ETCH_BASE_CONTAINERS_H
#define ETCH_BASE_CONTAINERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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

/* Room for `extra` more bytes, the capacity doubling from 256 but never
 * past `max` bytes (0: no limit); ETCH_ENOMEM (error set) when it cannot. */
int etch__vec_reserve_max(etch_vec *v, size_t extra, size_t max);
ETCH_INLINE int etch__vec_reserve(etch_vec *v, size_t extra) {
  if (ETCH_LIKELY(v->cap - v->len >= extra)) return 0;
  return etch__vec_reserve_max(v, extra, 0);
}
/* Appends n bytes of p; nothing (and no memcpy) when n is 0 or p is NULL. */
ETCH_INLINE int etch__vec_push(etch_vec *v, const void *p, size_t n) {
  if (n == 0 || !p) return 0;
  if (ETCH_UNLIKELY(v->cap - v->len < n) && etch__vec_reserve(v, n))
    return ETCH_ENOMEM;
  memcpy(v->data + v->len, p, n);
  v->len += n;
  return 0;
}

/* The vector as an array of T: a pointer to its first element, and how
 * many whole elements it holds. */
#define ETCH_VEC_AT(v, T) ((T *)(void *)(v)->data)
#define ETCH_VEC_COUNT(v, T) ((v)->len / sizeof(T))
/* Appends one element of the array's type T, given as a value or as a
 * braced initializer: 0 or ETCH_ENOMEM, as etch__vec_push. */
#define ETCH_VEC_PUSH(v, T, ...)                      \
  __extension__({                                     \
    T etch__vec_elem_ = __VA_ARGS__;                  \
    etch__vec_push((v), &etch__vec_elem_, sizeof(T)); \
  })
/* Room for one more element of `size` bytes at the end, counted in len:
 * a pointer to it, or NULL (the error set) out of memory.
 * ETCH_VEC_NEW(v, T) is one more T, to fill in place. */
ETCH_INLINE void *etch__vec_new(etch_vec *v, size_t size) {
  if (etch__vec_reserve(v, size)) return NULL;
  void *p = v->data + v->len;
  v->len += size;
  return p;
}
#define ETCH_VEC_NEW(v, T) ((T *)etch__vec_new((v), sizeof(T)))
/* Room for `extra` more elements of T. */
#define ETCH_VEC_RESERVE(v, T, extra) \
  (((size_t)(extra) > SIZE_MAX / sizeof(T))                          \
       ? etch__error(ETCH_ENOMEM, "vector overflow")                 \
       : etch__vec_reserve((v), (size_t)(extra) * sizeof(T)))
/* Appends a NUL and takes it back out of len: data is then a C string of
 * the bytes held (0 or ETCH_ENOMEM). */
int etch__vec_cstr(etch_vec *v);
/* Frees the bytes; the vector is empty again (and can be used again). */
void etch__vec_free(etch_vec *v);
/* A stdio stream whose writes append to `v` through etch's allocator (in
 * place of open_memstream): write to it, fclose it, then v holds the
 * bytes. A write that finds no memory fails (ferror, and fclose says EOF).
 * NULL when out of memory. */
FILE *etch__vec_file(etch_vec *v);

/* ---- u64 -> pointer map ------------------------------------------------------ */

/*
 * The u64 map of map.h holds any value, 0 included, so it keeps a byte per
 * slot saying it is used and its keys and values in arrays of their own
 * (deletion by backward shift). Where the values are pointers, NULL can
 * mean empty: a slot is a key and its pointer side by side, one cache line
 * per probe, and a lookup is inline. For the reader's sequences, tracks,
 * clocks and large iids (found on its hot path). No deletion.
 */
typedef struct etch_ptrmap_slot {
  uint64_t key;
  void *val; /* NULL = empty */
} etch_ptrmap_slot;

typedef struct etch_ptrmap {
  etch_ptrmap_slot *slots;
  size_t mask;
  size_t count;
} etch_ptrmap;

ETCH_INLINE void *etch__ptrmap_get(const etch_ptrmap *m, uint64_t key) {
  if (!m->slots) return NULL;
  size_t i = (size_t)etch__mix64(key) & m->mask;
  for (;;) {
    const etch_ptrmap_slot *s = &m->slots[i];
    if (!s->val) return NULL;
    if (s->key == key) return s->val;
    i = (i + 1) & m->mask;
  }
}

/* Inserts or replaces; val must not be NULL. Returns 0 or ETCH_ENOMEM. */
int etch__ptrmap_put(etch_ptrmap *m, uint64_t key, void *val);
void etch__ptrmap_clear(etch_ptrmap *m);
void etch__ptrmap_free(etch_ptrmap *m);

/* ---- interned id -> pointer table ------------------------------------------ */

/* The direct array covers ids below this at most; larger ones are mapped. */
#define ETCH_IDTAB_MAX_DIRECT (1u << 20)

/*
 * id -> value of one kind of interned data on one sequence. Writers number
 * their ids densely from 1, so small ids live in a direct array (no
 * hashing); an id far past the entries seen so far goes to a hash map, so
 * that memory stays proportional to the entries (the array grows to cover
 * an id only while id < 2 * entries + 16). Ids below `cap` are only in
 * the array, the others only in the map.
 */
typedef struct etch_idtab {
  void **dir;       /* values of ids < cap; NULL = none */
  const char **aux; /* optional, same indexing: a value derived from dir[id]
                       (the reader's debug annotation names: the pooled
                       "debug.<name>"); reset whenever dir[id] is set */
  uint32_t cap;     /* entries of dir (and aux), 0 or a power of two */
  uint32_t hi;      /* dir[hi..cap) are NULL */
  size_t count;     /* distinct ids held */
  etch_ptrmap big;  /* ids >= cap */
} etch_idtab;

ETCH_INLINE void *etch__idtab_get(const etch_idtab *t, uint64_t id) {
  if (ETCH_LIKELY(id < t->cap)) return t->dir[id];
  return t->big.count ? etch__ptrmap_get(&t->big, id) : NULL;
}

/* Inserts or replaces; val must not be NULL. Returns 0 or ETCH_ENOMEM. */
int etch__idtab_put(etch_idtab *t, uint64_t id, void *val);
/* Allocates `aux` (all NULL) if it is not yet. Returns 0 or ETCH_ENOMEM. */
int etch__idtab_want_aux(etch_idtab *t);
void etch__idtab_clear(etch_idtab *t);
void etch__idtab_free(etch_idtab *t);

#endif /* ETCH_BASE_CONTAINERS_H */

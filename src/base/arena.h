/*
 * arena.h - the containers every part of etch that reads traces shares: a
 * bump allocator over a list of blocks (etch_arena) and a pool of
 * deduplicated, NUL-terminated strings with stable addresses
 * (etch_strpool). One copy, used by the reader and the importer (they had
 * one each); the reader's layout, so its speed and memory stay as measured
 * in docs/analysis.md.
 */
#ifndef ETCH_BASE_ARENA_H
#define ETCH_BASE_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* ---- arena ------------------------------------------------------------------ */

typedef struct etch_arena_block etch_arena_block;

/* A bump allocator over a list of blocks; etch__arena_reset keeps the
 * blocks for reuse, etch__arena_free gives them back. */
typedef struct etch_arena {
  etch_arena_block *first; /* all blocks, in allocation order */
  etch_arena_block *cur;   /* block being filled */
  uint8_t *p, *end;
  uint8_t *first_p; /* start of the first block's data */
  size_t block_size;
  size_t total; /* bytes of all blocks */
} etch_arena;

void etch__arena_init(etch_arena *a, size_t block_size);
/* True when nothing was allocated since the last reset (or ever). */
ETCH_INLINE bool etch__arena_empty(const etch_arena *a) {
  return a->cur == a->first && (!a->cur || a->p == a->first_p);
}
void etch__arena_free(etch_arena *a);
void etch__arena_reset(etch_arena *a);
void *etch__arena_alloc_slow(etch_arena *a, size_t n);

/* 8-byte aligned allocation; NULL (error set) when out of memory. */
ETCH_INLINE void *etch__arena_alloc(etch_arena *a, size_t n) {
  n = (n + 7) & ~(size_t)7;
  if (ETCH_LIKELY((size_t)(a->end - a->p) >= n)) {
    void *r = a->p;
    a->p += n;
    return r;
  }
  return etch__arena_alloc_slow(a, n);
}

/* Copies `len` bytes and a NUL. */
char *etch__arena_strdup(etch_arena *a, const void *s, size_t len);

/* ---- string pool ------------------------------------------------------------ */

typedef struct etch_strpool_slot {
  uint64_t hash;
  const char *s;
  uint32_t len;
} etch_strpool_slot;

/* Deduplicated NUL-terminated strings with stable addresses: the same
 * bytes give the same pointer, so pooled strings compare by address. */
typedef struct etch_strpool {
  etch_arena arena;
  etch_strpool_slot *slots;
  size_t mask; /* capacity - 1 */
  size_t count;
  size_t bytes;
  size_t max_bytes; /* distinct bytes held at most */
} etch_strpool;

/* ETCH_ENOMEM when the first table cannot be had. */
int etch__strpool_init(etch_strpool *p, size_t max_bytes);
void etch__strpool_free(etch_strpool *p);
/* The pooled copy of s[0..len); NULL (error set) when out of memory or
 * past max_bytes. */
const char *etch__strpool_get(etch_strpool *p, const void *s, size_t len);

#endif /* ETCH_BASE_ARENA_H */

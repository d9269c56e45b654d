/*
 * arena.c - see arena.h.
 */
#include "base/arena.h"

#include <stdlib.h>
#include <string.h>

/* ---- arena -------------------------------------------------------------------- */

struct etch_arena_block {
  etch_arena_block *next;
  size_t size; /* bytes after the header */
  uint64_t data[];
};

void etch__arena_init(etch_arena *a, size_t block_size) {
  memset(a, 0, sizeof *a);
  a->block_size = block_size;
}

void etch__arena_free(etch_arena *a) {
  etch_arena_block *b = a->first;
  while (b) {
    etch_arena_block *n = b->next;
    free(b);
    b = n;
  }
  size_t bs = a->block_size;
  etch__arena_init(a, bs);
}

void etch__arena_reset(etch_arena *a) {
  if (etch__arena_empty(a)) return;
  a->cur = a->first;
  if (a->cur) {
    a->p = (uint8_t *)a->cur->data;
    a->end = a->p + a->cur->size;
  } else {
    a->p = a->end = NULL;
  }
}

void *etch__arena_alloc_slow(etch_arena *a, size_t n) {
  /* Reuse the following blocks kept by a reset, if one is large enough. */
  while (a->cur && a->cur->next) {
    a->cur = a->cur->next;
    if (a->cur->size >= n) {
      a->p = (uint8_t *)a->cur->data + n;
      a->end = (uint8_t *)a->cur->data + a->cur->size;
      return a->cur->data;
    }
  }
  size_t size = a->block_size;
  if (size < n) size = n;
  etch_arena_block *b = (etch_arena_block *)etch__malloc(sizeof(etch_arena_block) + size);
  if (!b) return NULL;
  b->next = NULL;
  b->size = size;
  if (a->cur) {
    a->cur->next = b;
  } else {
    /* Empty arena, or reset arena whose first block is too small: append at
     * the end of the list. */
    etch_arena_block **pp = &a->first;
    while (*pp) pp = &(*pp)->next;
    *pp = b;
  }
  if (a->first == b) a->first_p = (uint8_t *)b->data;
  a->cur = b;
  a->total += size;
  a->p = (uint8_t *)b->data + n;
  a->end = (uint8_t *)b->data + size;
  return b->data;
}

char *etch__arena_strdup(etch_arena *a, const void *s, size_t len) {
  char *p = (char *)etch__arena_alloc(a, len + 1);
  if (!p) return NULL;
  if (len) memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

/* ---- string pool ------------------------------------------------------------------ */

int etch__strpool_init(etch_strpool *p, size_t max_bytes) {
  memset(p, 0, sizeof *p);
  etch__arena_init(&p->arena, 64 * 1024);
  p->slots = (etch_strpool_slot *)etch__calloc(1024, sizeof(etch_strpool_slot));
  if (!p->slots) return ETCH_ENOMEM;
  p->mask = 1023;
  p->max_bytes = max_bytes;
  return 0;
}

void etch__strpool_free(etch_strpool *p) {
  etch__arena_free(&p->arena);
  free(p->slots);
  memset(p, 0, sizeof *p);
}

static uint64_t pool_hash(const void *s, size_t len) {
  /* FNV-1a over 8-byte words, then a finalizer: fast for short strings. */
  const uint8_t *b = (const uint8_t *)s;
  uint64_t h = 0xcbf29ce484222325ull ^ len;
  while (len >= 8) {
    uint64_t w;
    memcpy(&w, b, 8);
    h = (h ^ w) * 0x100000001b3ull;
    b += 8;
    len -= 8;
  }
  uint64_t w = 0;
  if (len) memcpy(&w, b, len);
  h = (h ^ w) * 0x100000001b3ull;
  return etch__mix64(h);
}

static int pool_grow(etch_strpool *p) {
  size_t cap = (p->mask + 1) * 2;
  etch_strpool_slot *s = (etch_strpool_slot *)etch__calloc(cap, sizeof(etch_strpool_slot));
  if (!s) return ETCH_ENOMEM;
  for (size_t i = 0; i <= p->mask; i++) {
    if (!p->slots[i].s) continue;
    size_t j = (size_t)p->slots[i].hash & (cap - 1);
    while (s[j].s) j = (j + 1) & (cap - 1);
    s[j] = p->slots[i];
  }
  free(p->slots);
  p->slots = s;
  p->mask = cap - 1;
  return 0;
}

const char *etch__strpool_get(etch_strpool *p, const void *str, size_t len) {
  if (len > UINT32_MAX) {
    etch__error(ETCH_ELIMIT, "string of %zu bytes", len);
    return NULL;
  }
  uint64_t h = pool_hash(str, len);
  size_t i = (size_t)h & p->mask;
  for (;;) {
    etch_strpool_slot *s = &p->slots[i];
    if (!s->s) break;
    if (s->hash == h && s->len == len && memcmp(s->s, str, len) == 0)
      return s->s;
    i = (i + 1) & p->mask;
  }
  if (p->bytes + len + 1 > p->max_bytes) {
    etch__error(ETCH_ELIMIT, "more than %zu bytes of distinct strings",
                p->max_bytes);
    return NULL;
  }
  char *copy = etch__arena_strdup(&p->arena, str, len);
  if (!copy) return NULL;
  p->bytes += len + 1;
  p->slots[i].hash = h;
  p->slots[i].s = copy;
  p->slots[i].len = (uint32_t)len;
  if (++p->count * 2 > p->mask + 1 && pool_grow(p)) return NULL;
  return copy;
}


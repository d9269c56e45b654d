/*
 * util.c - the reader's containers: block arenas, the deduplicating string
 * pool, a u64 -> pointer open-addressing hash map and a byte vector.
 */
#include <stdlib.h>
#include <string.h>

#include "reader/reader_int.h"

/* ---- arena -------------------------------------------------------------------- */

struct rd_block {
  rd_block *next;
  size_t size; /* bytes after the header */
  uint64_t data[];
};

void etch__rd_arena_init(rd_arena *a, size_t block_size) {
  memset(a, 0, sizeof *a);
  a->block_size = block_size;
}

void etch__rd_arena_free(rd_arena *a) {
  rd_block *b = a->first;
  while (b) {
    rd_block *n = b->next;
    free(b);
    b = n;
  }
  size_t bs = a->block_size;
  etch__rd_arena_init(a, bs);
}

void etch__rd_arena_reset(rd_arena *a) {
  if (rd_arena_empty(a)) return;
  a->cur = a->first;
  if (a->cur) {
    a->p = (uint8_t *)a->cur->data;
    a->end = a->p + a->cur->size;
  } else {
    a->p = a->end = NULL;
  }
}

void *etch__rd_arena_alloc_slow(rd_arena *a, size_t n) {
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
  rd_block *b = (rd_block *)etch__malloc(sizeof(rd_block) + size);
  if (!b) return NULL;
  b->next = NULL;
  b->size = size;
  if (a->cur) {
    a->cur->next = b;
  } else {
    /* Empty arena, or reset arena whose first block is too small: append at
     * the end of the list. */
    rd_block **pp = &a->first;
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

char *etch__rd_arena_strdup(rd_arena *a, const void *s, size_t len) {
  char *p = (char *)rd_alloc(a, len + 1);
  if (!p) return NULL;
  if (len) memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

/* ---- string pool ------------------------------------------------------------------ */

int etch__rd_pool_init(rd_pool *p) {
  memset(p, 0, sizeof *p);
  etch__rd_arena_init(&p->arena, 64 * 1024);
  p->slots = (rd_pool_slot *)etch__calloc(1024, sizeof(rd_pool_slot));
  if (!p->slots) return ETCH_ENOMEM;
  p->mask = 1023;
  return 0;
}

void etch__rd_pool_free(rd_pool *p) {
  etch__rd_arena_free(&p->arena);
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

static int pool_grow(rd_pool *p) {
  size_t cap = (p->mask + 1) * 2;
  rd_pool_slot *s = (rd_pool_slot *)etch__calloc(cap, sizeof(rd_pool_slot));
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

const char *etch__rd_pool_get(rd_pool *p, const void *str, size_t len) {
  if (len > UINT32_MAX) {
    etch__error(ETCH_ELIMIT, "string of %zu bytes", len);
    return NULL;
  }
  uint64_t h = pool_hash(str, len);
  size_t i = (size_t)h & p->mask;
  for (;;) {
    rd_pool_slot *s = &p->slots[i];
    if (!s->s) break;
    if (s->hash == h && s->len == len && memcmp(s->s, str, len) == 0)
      return s->s;
    i = (i + 1) & p->mask;
  }
  if (p->bytes + len + 1 > RD_MAX_POOL_BYTES) {
    etch__error(ETCH_ELIMIT, "more than %zu bytes of distinct strings",
                (size_t)RD_MAX_POOL_BYTES);
    return NULL;
  }
  char *copy = etch__rd_arena_strdup(&p->arena, str, len);
  if (!copy) return NULL;
  p->bytes += len + 1;
  p->slots[i].hash = h;
  p->slots[i].s = copy;
  p->slots[i].len = (uint32_t)len;
  if (++p->count * 2 > p->mask + 1 && pool_grow(p)) return NULL;
  return copy;
}

/* ---- hash map ------------------------------------------------------------------------ */

static int map_grow(rd_map *m) {
  size_t cap = m->slots ? (m->mask + 1) * 2 : 16;
  rd_map_slot *s = (rd_map_slot *)etch__calloc(cap, sizeof(rd_map_slot));
  if (!s) return ETCH_ENOMEM;
  if (m->slots) {
    for (size_t i = 0; i <= m->mask; i++) {
      if (!m->slots[i].val) continue;
      size_t j = (size_t)etch__mix64(m->slots[i].key) & (cap - 1);
      while (s[j].val) j = (j + 1) & (cap - 1);
      s[j] = m->slots[i];
    }
    free(m->slots);
  }
  m->slots = s;
  m->mask = cap - 1;
  return 0;
}

int etch__rd_map_put(rd_map *m, uint64_t key, void *val) {
  if (!m->slots && map_grow(m)) return ETCH_ENOMEM;
  size_t i = (size_t)etch__mix64(key) & m->mask;
  for (;;) {
    rd_map_slot *s = &m->slots[i];
    if (!s->val) break;
    if (s->key == key) {
      s->val = val;
      return 0;
    }
    i = (i + 1) & m->mask;
  }
  m->slots[i].key = key;
  m->slots[i].val = val;
  if (++m->count * 4 > (m->mask + 1) * 3 && map_grow(m)) return ETCH_ENOMEM;
  return 0;
}

void etch__rd_map_clear(rd_map *m) {
  if (m->slots && m->count) memset(m->slots, 0, (m->mask + 1) * sizeof *m->slots);
  m->count = 0;
}

void etch__rd_map_free(rd_map *m) {
  free(m->slots);
  memset(m, 0, sizeof *m);
}

/* ---- interning tables ------------------------------------------------------------- */

/* Grows the direct array to `cap` entries and moves the map's iids below it
 * into it (the map is rebuilt with the others). */
static int itab_grow(rd_itab *t, uint32_t cap) {
  void **d = (void **)etch__realloc(t->dir, (size_t)cap * sizeof *d);
  if (!d) return ETCH_ENOMEM;
  memset(d + t->cap, 0, (size_t)(cap - t->cap) * sizeof *d);
  t->dir = d;
  if (t->aux) {
    const char **a =
        (const char **)etch__realloc((void *)t->aux, (size_t)cap * sizeof *a);
    if (!a) return ETCH_ENOMEM;
    memset((void *)(a + t->cap), 0, (size_t)(cap - t->cap) * sizeof *a);
    t->aux = a;
  }
  t->cap = cap;
  if (t->big.count) {
    rd_map old = t->big;
    memset(&t->big, 0, sizeof t->big);
    int rc = 0;
    for (size_t i = 0; i <= old.mask; i++) {
      const rd_map_slot *s = &old.slots[i];
      if (!s->val) continue;
      if (s->key < cap) {
        t->dir[s->key] = s->val;
        if (s->key >= t->hi) t->hi = (uint32_t)s->key + 1;
      } else if (!rc) {
        rc = etch__rd_map_put(&t->big, s->key, s->val);
      }
    }
    etch__rd_map_free(&old);
    if (rc) return rc;
  }
  return 0;
}

int etch__rd_itab_put(rd_itab *t, uint64_t iid, void *val) {
  if (iid >= t->cap && iid < 2 * (uint64_t)t->count + 16 &&
      iid < RD_MAX_INTERNED) {
    uint32_t cap = t->cap ? t->cap : 16;
    while (cap <= iid) cap *= 2;
    if (itab_grow(t, cap)) return ETCH_ENOMEM;
  }
  if (iid < t->cap) {
    if (!t->dir[iid]) t->count++;
    t->dir[iid] = val;
    if (t->aux) t->aux[iid] = NULL;
    if (iid >= t->hi) t->hi = (uint32_t)iid + 1;
    return 0;
  }
  size_t before = t->big.count;
  if (etch__rd_map_put(&t->big, iid, val)) return ETCH_ENOMEM;
  t->count += t->big.count - before;
  return 0;
}

int etch__rd_itab_want_aux(rd_itab *t) {
  if (t->aux || !t->cap) return 0;
  t->aux = (const char **)etch__calloc(t->cap, sizeof *t->aux);
  return t->aux ? 0 : ETCH_ENOMEM;
}

void etch__rd_itab_clear(rd_itab *t) {
  if (t->hi) {
    memset(t->dir, 0, (size_t)t->hi * sizeof *t->dir);
    if (t->aux) memset((void *)t->aux, 0, (size_t)t->hi * sizeof *t->aux);
  }
  t->hi = 0;
  t->count = 0;
  etch__rd_map_clear(&t->big);
}

void etch__rd_itab_free(rd_itab *t) {
  free(t->dir);
  free((void *)t->aux);
  etch__rd_map_free(&t->big);
  memset(t, 0, sizeof *t);
}

/* ---- vector ---------------------------------------------------------------------------- */

int etch__rd_vec_reserve(rd_vec *v, size_t extra) {
  if (v->cap - v->len >= extra) return 0;
  size_t cap = v->cap ? v->cap : 256;
  while (cap - v->len < extra) {
    if (cap > SIZE_MAX / 2) return etch__error(ETCH_ENOMEM, "vector overflow");
    cap *= 2;
  }
  uint8_t *d = (uint8_t *)etch__realloc(v->data, cap);
  if (!d) return ETCH_ENOMEM;
  v->data = d;
  v->cap = cap;
  return 0;
}

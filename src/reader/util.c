/*
 * util.c - the reader's containers: a u64 -> pointer open-addressing hash
 * map and the interning tables (arenas, the string pool and the byte
 * vector are base's, base/arena.h and base/containers.h).
 */
#include <stdlib.h>
#include <string.h>

#include "reader/reader_int.h"

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

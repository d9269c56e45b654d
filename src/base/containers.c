/*
 * containers.c - see containers.h.
 */
#define _GNU_SOURCE
#include "base/containers.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

bool etch__bitset_reserve(etch_bitset *b, uint32_t i) {
  if (i >= b->nbits) {
    uint32_t words = b->nbits / 64;
    uint32_t need = i / 64 + 1;
    uint32_t nw = words ? words : 4;
    while (nw < need) nw *= 2;
    uint64_t *w = (uint64_t *)etch__realloc(b->w, (size_t)nw * 8);
    if (!w) return false;
    memset(w + words, 0, (size_t)(nw - words) * 8);
    b->w = w;
    b->nbits = nw * 64;
  }
  return true;
}

bool etch__bitset_set(etch_bitset *b, uint32_t i) {
  if (!etch__bitset_reserve(b, i)) return false;
  b->w[i >> 6] |= 1ull << (i & 63);
  return true;
}

void etch__bitset_clear(etch_bitset *b) {
  if (b->w) memset(b->w, 0, (size_t)(b->nbits / 64) * 8);
}

void etch__bitset_free(etch_bitset *b) {
  free(b->w);
  b->w = NULL;
  b->nbits = 0;
}

static bool strtab_grow(etch_strtab *t) {
  uint32_t ncap = t->cap ? t->cap * 2 : 64;
  etch_strtab_slot *ns = (etch_strtab_slot *)etch__calloc(ncap, sizeof *ns);
  if (!ns) return false;
  for (uint32_t i = 0; i < t->cap; i++) {
    etch_strtab_slot *s = &t->slots[i];
    if (!s->str) continue;
    uint32_t j = (uint32_t)s->hash & (ncap - 1);
    while (ns[j].str) j = (j + 1) & (ncap - 1);
    ns[j] = *s;
  }
  free(t->slots);
  t->slots = ns;
  t->cap = ncap;
  return true;
}

uint32_t etch__strtab_intern(etch_strtab *t, const char *s, uint32_t len,
                             bool *is_new) {
  *is_new = false;
  if (t->count >= ETCH_STRTAB_MAX) return 0;
  if ((t->count + 1) * 2 > t->cap && !strtab_grow(t)) return 0;
  uint64_t h = etch__hash_bytes(s, len, 0);
  uint32_t j = (uint32_t)h & (t->cap - 1);
  while (t->slots[j].str) {
    etch_strtab_slot *e = &t->slots[j];
    if (e->hash == h && e->len == len && memcmp(e->str, s, len) == 0)
      return e->iid;
    j = (j + 1) & (t->cap - 1);
  }
  char *copy = (char *)etch__malloc(len + 1);
  if (!copy) return 0;
  memcpy(copy, s, len);
  copy[len] = '\0';
  etch_strtab_slot *e = &t->slots[j];
  e->hash = h;
  e->len = len;
  e->str = copy;
  e->iid = ++t->count;
  *is_new = true;
  return e->iid;
}

void etch__strtab_clear(etch_strtab *t) {
  for (uint32_t i = 0; i < t->cap; i++) free(t->slots[i].str);
  free(t->slots);
  t->slots = NULL;
  t->cap = t->count = 0;
}

/* ---- byte vector ------------------------------------------------------------ */

int etch__vec_reserve_max(etch_vec *v, size_t extra, size_t max) {
  if (v->cap - v->len >= extra) return 0;
  if (max && (v->len > max || max - v->len < extra))
    return etch__error(ETCH_ENOMEM, "vector over its limit of %zu bytes", max);
  size_t cap = v->cap ? v->cap : 256;
  while (cap - v->len < extra) {
    if (cap > SIZE_MAX / 2) return etch__error(ETCH_ENOMEM, "vector overflow");
    cap *= 2;
  }
  if (max && cap > max) cap = max;
  uint8_t *d = (uint8_t *)etch__realloc(v->data, cap);
  if (!d) return ETCH_ENOMEM;
  v->data = d;
  v->cap = cap;
  return 0;
}

int etch__vec_cstr(etch_vec *v) {
  if (etch__vec_reserve(v, 1)) return ETCH_ENOMEM;
  v->data[v->len] = 0;
  return 0;
}

void etch__vec_free(etch_vec *v) {
  free(v->data);
  *v = (etch_vec){0};
}

static ssize_t vec_file_write(void *cookie, const char *buf, size_t n) {
  if (etch__vec_push((etch_vec *)cookie, buf, n)) {
    errno = ENOMEM;
    return -1;
  }
  return (ssize_t)n;
}

FILE *etch__vec_file(etch_vec *v) {
  cookie_io_functions_t io = {.write = vec_file_write};
  FILE *f = fopencookie(v, "w", io);
  if (!f) etch__error(ETCH_ENOMEM, "out of memory");
  return f;
}

/* ---- u64 -> pointer map ------------------------------------------------------ */

static int map_grow(etch_ptrmap *m) {
  size_t cap = m->slots ? (m->mask + 1) * 2 : 16;
  etch_ptrmap_slot *s = (etch_ptrmap_slot *)etch__calloc(cap, sizeof(etch_ptrmap_slot));
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

int etch__ptrmap_put(etch_ptrmap *m, uint64_t key, void *val) {
  if (!m->slots && map_grow(m)) return ETCH_ENOMEM;
  size_t i = (size_t)etch__mix64(key) & m->mask;
  for (;;) {
    etch_ptrmap_slot *s = &m->slots[i];
    if (!s->val) break;
    if (s->key == key) {
      s->val = val;
      return 0;
    }
    i = (i + 1) & m->mask;
  }
  /* A new key: room first, so that a map that cannot grow is never left
   * full (a lookup would probe for ever) nor holds what the caller was
   * told it does not. */
  if ((m->count + 1) * 4 > (m->mask + 1) * 3) {
    if (map_grow(m)) return ETCH_ENOMEM;
    i = (size_t)etch__mix64(key) & m->mask;
    while (m->slots[i].val) i = (i + 1) & m->mask;
  }
  m->slots[i].key = key;
  m->slots[i].val = val;
  m->count++;
  return 0;
}

void etch__ptrmap_clear(etch_ptrmap *m) {
  if (m->slots && m->count) memset(m->slots, 0, (m->mask + 1) * sizeof *m->slots);
  m->count = 0;
}

void etch__ptrmap_free(etch_ptrmap *m) {
  free(m->slots);
  memset(m, 0, sizeof *m);
}

/* ---- interned id -> pointer table ------------------------------------------ */

/* Grows the direct array to `cap` entries and moves the map's ids below it
 * into it (the map is rebuilt with the others). */
static int itab_grow(etch_idtab *t, uint32_t cap) {
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
    etch_ptrmap old = t->big;
    memset(&t->big, 0, sizeof t->big);
    int rc = 0;
    for (size_t i = 0; i <= old.mask; i++) {
      const etch_ptrmap_slot *s = &old.slots[i];
      if (!s->val) continue;
      if (s->key < cap) {
        t->dir[s->key] = s->val;
        if (s->key >= t->hi) t->hi = (uint32_t)s->key + 1;
      } else if (!rc) {
        rc = etch__ptrmap_put(&t->big, s->key, s->val);
      }
    }
    etch__ptrmap_free(&old);
    if (rc) return rc;
  }
  return 0;
}

int etch__idtab_put(etch_idtab *t, uint64_t iid, void *val) {
  if (iid >= t->cap && iid < 2 * (uint64_t)t->count + 16 &&
      iid < ETCH_IDTAB_MAX_DIRECT) {
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
  if (etch__ptrmap_put(&t->big, iid, val)) return ETCH_ENOMEM;
  t->count += t->big.count - before;
  return 0;
}

int etch__idtab_want_aux(etch_idtab *t) {
  if (t->aux || !t->cap) return 0;
  t->aux = (const char **)etch__calloc(t->cap, sizeof *t->aux);
  return t->aux ? 0 : ETCH_ENOMEM;
}

void etch__idtab_clear(etch_idtab *t) {
  if (t->hi) {
    memset(t->dir, 0, (size_t)t->hi * sizeof *t->dir);
    if (t->aux) memset((void *)t->aux, 0, (size_t)t->hi * sizeof *t->aux);
  }
  t->hi = 0;
  t->count = 0;
  etch__ptrmap_clear(&t->big);
}

void etch__idtab_free(etch_idtab *t) {
  free(t->dir);
  free((void *)t->aux);
  etch__ptrmap_free(&t->big);
  memset(t, 0, sizeof *t);
}

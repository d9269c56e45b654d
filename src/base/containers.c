/*
 * containers.c - see containers.h.
 */
#include "base/containers.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

bool etch__bitset_reserve(etch_bitset *b, uint32_t i) {
  if (i >= b->nbits) {
    uint32_t words = b->nbits / 64;
    uint32_t need = i / 64 + 1;
    uint32_t nw = words ? words : 4;
    while (nw < need) nw *= 2;
    uint64_t *w = (uint64_t *)realloc(b->w, (size_t)nw * 8);
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
  etch_strtab_slot *ns = (etch_strtab_slot *)calloc(ncap, sizeof *ns);
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
  char *copy = (char *)malloc(len + 1);
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

int etch__vec_reserve(etch_vec *v, size_t extra) {
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

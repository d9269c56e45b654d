/*
 * util.c - the sdk's small containers (growable bitsets, a writer-local
 * string interning table) and the instants etch writes about itself.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/sdk.h"

/* Limit of one writer's string table; past it names are written inline. */
#define STRTAB_MAX 65536

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
  if (t->count >= STRTAB_MAX) return 0;
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

void etch__put_etch_instant(etch__pb_stream *s, const char *name,
                            uint64_t track_uuid, const etch_note_arg *args,
                            uint32_t nargs) {
  etch__pb_nested te, da;
  etch__pb_nested_begin(s, ETCH_PKT_TRACK_EVENT, &te);
  etch__pb_write_varint_field(s, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  etch__pb_write_string_field(s, ETCH_TE_CATEGORIES, "etch");
  etch__pb_write_string_field(s, ETCH_TE_NAME, name);
  if (track_uuid) etch__pb_write_varint_field(s, ETCH_TE_TRACK_UUID, track_uuid);
  for (uint32_t i = 0; i < nargs; i++) {
    const etch_note_arg *a = &args[i];
    etch__pb_nested_begin(s, ETCH_TE_DEBUG_ANNOTATIONS, &da);
    etch__pb_write_string_field(s, ETCH_DA_NAME, a->name);
    if (a->str)
      etch__pb_write_string_field(s, ETCH_DA_STRING_VALUE, a->str);
    else
      etch__pb_write_varint_field(
          s, a->is_uint ? ETCH_DA_UINT_VALUE : ETCH_DA_INT_VALUE, a->value);
    etch__pb_nested_end(s, &da);
  }
  etch__pb_nested_end(s, &te);
}

void etch__spin_lock(uint32_t *l) {
  for (unsigned k = 0; __atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE);) {
    while (__atomic_load_n(l, __ATOMIC_RELAXED)) {
      if (++k > 100) {
        sched_yield();
        k = 0;
      } else {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
    }
  }
}

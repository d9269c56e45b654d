/*
 * order.c - see order.h: each insert's rows in the table's key order.
 */
#define _GNU_SOURCE
#include "fleet/order.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* Room for n elements of `size` bytes in v, counted in its length. */
static bool room_for(etch_vec *v, size_t n, size_t size) {
  size_t have = v->len / size;
  if (have >= n) return true;
  if (n > SIZE_MAX / size || etch__vec_reserve(v, (n - have) * size))
    return false;
  v->len = n * size;
  return true;
}

bool etch__fl_keys_reserve(keys *k, size_t n) {
  bool ok = room_for(&k->recs, n, sizeof(keyrec)) &&
            room_for(&k->offs, n, sizeof(uint64_t));
  k->rec = ETCH_VEC_AT(&k->recs, keyrec);
  k->off = ETCH_VEC_AT(&k->offs, uint64_t);
  return ok;
}

void etch__fl_keys_free(keys *k) {
  etch__vec_free(&k->recs);
  etch__vec_free(&k->offs);
  *k = (keys){0};
}

static uint32_t str_hash(const char *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 16777619u;
  return h;
}

static bool sdict_grow(sdict *d) {
  size_t nslot = d->nslot ? d->nslot * 2 : 1024;
  uint32_t *slot = etch__calloc(nslot, sizeof *slot);
  if (!slot) return false;
  for (size_t i = 0; i < d->n; i++) {
    size_t j = ETCH_VEC_AT(&d->ent, etch__fl_sent)[i].hash & (nslot - 1);
    while (slot[j]) j = (j + 1) & (nslot - 1);
    slot[j] = (uint32_t)i + 1;
  }
  free(d->slot);
  d->slot = slot;
  d->nslot = nslot;
  return true;
}

bool etch__fl_sdict_id(sdict *d, const char *p, size_t n, uint64_t *id) {
  if (n > UINT32_MAX) return false;
  if (2 * (d->n + 1) > d->nslot && !sdict_grow(d)) return false;
  uint32_t h = str_hash(p, n);
  size_t j = h & (d->nslot - 1);
  const etch__fl_sent *ent = ETCH_VEC_AT(&d->ent, etch__fl_sent);
  for (uint32_t s; (s = d->slot[j]); j = (j + 1) & (d->nslot - 1)) {
    const etch__fl_sent *e = &ent[s - 1];
    if (e->hash == h && e->len == n &&
        !memcmp(d->arena.data + e->off, p, n)) {
      *id = s - 1;
      return true;
    }
  }
  size_t off = d->arena.len;
  if (ETCH_VEC_PUSH(&d->ent, etch__fl_sent,
                    {.off = off, .len = (uint32_t)n, .hash = h}))
    return false;
  if (etch__vec_push(&d->arena, p, n)) {
    d->ent.len -= sizeof(etch__fl_sent);
    return false;
  }
  d->slot[j] = (uint32_t)d->n + 1;
  *id = d->n++;
  return true;
}

/* ClickHouse's order of Strings: bytes as unsigned, a prefix first. */
static int sdict_cmp(const void *a, const void *b, void *ctx) {
  const sdict *d = ctx;
  const etch__fl_sent *ent = ETCH_VEC_AT(&d->ent, etch__fl_sent);
  const etch__fl_sent *x = &ent[*(const uint32_t *)a];
  const etch__fl_sent *y = &ent[*(const uint32_t *)b];
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(d->arena.data + x->off, d->arena.data + y->off, n);
  if (c) return c;
  return (x->len > y->len) - (x->len < y->len);
}

bool etch__fl_sdict_rank(sdict *d) {
  if (!d->n) return true;
  uint32_t *order = etch__calloc(d->n, sizeof *order);
  bool room = order && room_for(&d->ranks, d->n, sizeof(uint32_t));
  d->rank = ETCH_VEC_AT(&d->ranks, uint32_t);
  if (!room) {
    free(order);
    return false;
  }
  uint32_t *rank = d->rank;
  for (size_t i = 0; i < d->n; i++) order[i] = (uint32_t)i;
  qsort_r(order, d->n, sizeof *order, sdict_cmp, d);
  for (size_t i = 0; i < d->n; i++) rank[order[i]] = (uint32_t)i;
  free(order);
  return true;
}

void etch__fl_sdict_clear(sdict *d) {
  d->n = d->ent.len = d->arena.len = 0;
  if (d->slot) memset(d->slot, 0, d->nslot * sizeof *d->slot);
}

void etch__fl_sdict_free(sdict *d) {
  free(d->slot);
  etch__vec_free(&d->ent);
  etch__vec_free(&d->arena);
  etch__vec_free(&d->ranks);
  d->rank = NULL;
}

static inline bool rec_lt(const keyrec *a, const keyrec *b) {
  if (a->tid != b->tid) return a->tid < b->tid;
  if (a->k[0] != b->k[0]) return a->k[0] < b->k[0];
  if (a->k[1] != b->k[1]) return a->k[1] < b->k[1];
  return a->idx < b->idx;
}

/* Merge sort of a[0..n) (tmp: room for n/2 + 1); runs already in order
 * are not merged, so rows appended in order cost one comparison each. */
static void rec_sort(keyrec *a, keyrec *tmp, size_t n) {
  if (n <= 16) {
    for (size_t i = 1; i < n; i++) {
      keyrec x = a[i];
      size_t j = i;
      for (; j && rec_lt(&x, &a[j - 1]); j--) a[j] = a[j - 1];
      a[j] = x;
    }
    return;
  }
  size_t h = n / 2;
  rec_sort(a, tmp, h);
  rec_sort(a + h, tmp, n - h);
  if (!rec_lt(&a[h], &a[h - 1])) return;
  memcpy(tmp, a, h * sizeof *a);
  size_t i = 0, j = h, k = 0;
  while (i < h && j < n) a[k++] = rec_lt(&a[j], &tmp[i]) ? a[j++] : tmp[i++];
  while (i < h) a[k++] = tmp[i++];
}

typedef struct seg {
  uint64_t tid;
  size_t start, len;
} seg;

static int seg_cmp(const void *a, const void *b) {
  const seg *x = a, *y = b;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  return (x->start > y->start) - (x->start < y->start);
}

/* Room for n records in s->tmp (n + n / 2 + 1: a sorted copy, then
 * rec_sort's), and for ncnt counters. */
static bool sort_room(etch__fl_sorter *s, size_t n, size_t ncnt) {
  return !ETCH_VEC_RESERVE(&s->tmp, keyrec, n + n / 2 + 1) &&
         !ETCH_VEC_RESERVE(&s->cnt, size_t, ncnt);
}

int etch__fl_sort_rows(etch__fl_sorter *room, const etch__ch_table *t, keys *k,
                       size_t n, const sdict *dict, const keyrec **out) {
  *out = NULL;
  if (!t->key_ok || n < 2) return ETCH_OK;
  for (size_t j = 0; j < t->nkey; j++) {
    if (t->col[t->key[j]].kind != ETCH__COL_STR) continue;
    for (size_t i = 0; i < n; i++) k->rec[i].k[j] = dict->rank[k->rec[i].k[j]];
  }
  bool by_rank =
      t->nkey && t->col[t->key[0]].kind == ETCH__COL_STR && dict->n;
  size_t nseg = 0;
  for (size_t i = 0; i < n; i++)
    if (!i || k->rec[i].tid != k->rec[i - 1].tid) nseg++;
  seg *segs = etch__calloc(nseg, sizeof *segs);
  if (!segs || !sort_room(room, n, by_rank ? dict->n + 1 : 0)) {
    free(segs);
    return etch__error(ETCH_ENOMEM, "load: out of memory");
  }
  nseg = 0;
  for (size_t i = 0; i < n; i++) {
    if (!i || k->rec[i].tid != k->rec[i - 1].tid)
      segs[nseg++] = (seg){.tid = k->rec[i].tid, .start = i};
    segs[nseg - 1].len++;
  }
  qsort(segs, nseg, sizeof *segs, seg_cmp);
  keyrec *sorted = ETCH_VEC_AT(&room->tmp, keyrec), *mtmp = sorted + n;
  size_t pos = 0;
  for (size_t s = 0; s < nseg; s++) {
    const keyrec *in = k->rec + segs[s].start;
    keyrec *o = sorted + pos;
    size_t len = segs[s].len;
    /* The counting pass costs the dictionary's size: for runs that are
     * not much smaller than it. */
    if (!by_rank || len < 64 || dict->n > 4 * len) {
      memcpy(o, in, len * sizeof *o);
      rec_sort(o, mtmp, len);
      pos += len;
      continue;
    }
    size_t nd = dict->n, *cnt = ETCH_VEC_AT(&room->cnt, size_t);
    memset(cnt, 0, (nd + 1) * sizeof *cnt);
    for (size_t i = 0; i < len; i++) cnt[in[i].k[0] + 1]++;
    for (size_t r = 0; r < nd; r++) cnt[r + 1] += cnt[r];
    for (size_t i = 0; i < len; i++) o[cnt[in[i].k[0]]++] = in[i];
    /* cnt[r] is now where rank r's records end */
    for (size_t r = 0, a = 0; r < nd; a = cnt[r], r++)
      if (cnt[r] - a > 1) rec_sort(o + a, mtmp, cnt[r] - a);
    pos += len;
  }
  free(segs);
  size_t i = 0;
  while (i < n && sorted[i].idx == i) i++;
  if (i < n) *out = sorted;
  return ETCH_OK;
}

void etch__fl_sorter_free(etch__fl_sorter *s) {
  etch__vec_free(&s->tmp);
  etch__vec_free(&s->cnt);
}

/*
 * map.c - the uint64 -> int64 hash map of map.h.
 */
#include "base/map.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"

static inline size_t home(const etch_u64map *m, uint64_t key) {
  return (size_t)etch__mix64(key) & (m->cap - 1);
}

static inline size_t slot(const etch_u64map *m, uint64_t key) {
  size_t mask = m->cap - 1, i = home(m, key);
  while (m->used[i] && m->keys[i] != key) i = (i + 1) & mask;
  return i;
}

bool etch__u64map_get(const etch_u64map *m, uint64_t key, int64_t *val) {
  if (!m->cap) return false;
  size_t i = slot(m, key);
  if (!m->used[i]) return false;
  *val = m->vals[i];
  return true;
}

static bool grow(etch_u64map *m) {
  etch_u64map g = {0};
  g.cap = m->cap ? m->cap * 2 : 64;
  g.keys = etch__malloc(g.cap * sizeof *g.keys);
  g.vals = etch__malloc(g.cap * sizeof *g.vals);
  g.used = etch__calloc(g.cap, 1);
  if (!g.keys || !g.vals || !g.used) {
    free(g.keys);
    free(g.vals);
    free(g.used);
    return false;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->used[i]) continue;
    size_t j = slot(&g, m->keys[i]);
    g.used[j] = 1;
    g.keys[j] = m->keys[i];
    g.vals[j] = m->vals[i];
    g.n++;
  }
  free(m->keys);
  free(m->vals);
  free(m->used);
  *m = g;
  return true;
}

bool etch__u64map_swap(etch_u64map *m, uint64_t key, int64_t val,
                       int64_t *old, bool *had) {
  if ((m->n + 1) * 4 > m->cap * 3 && !grow(m)) return false;
  size_t i = slot(m, key);
  bool h = m->used[i] != 0;
  if (h) {
    if (old) *old = m->vals[i];
  } else {
    m->used[i] = 1;
    m->keys[i] = key;
    m->n++;
  }
  if (had) *had = h;
  m->vals[i] = val;
  return true;
}

bool etch__u64map_put(etch_u64map *m, uint64_t key, int64_t val) {
  return etch__u64map_swap(m, key, val, NULL, NULL);
}

bool etch__u64map_del(etch_u64map *m, uint64_t key, int64_t *val) {
  if (!m->cap) return false;
  size_t mask = m->cap - 1, hole = slot(m, key);
  if (!m->used[hole]) return false;
  if (val) *val = m->vals[hole];
  /* Move back each following entry of the run that may not stay behind
   * the hole: one whose home lies cyclically outside (hole, k]. */
  for (size_t k = (hole + 1) & mask; m->used[k]; k = (k + 1) & mask) {
    size_t h = home(m, m->keys[k]);
    bool stays = hole <= k ? (h > hole && h <= k) : (h > hole || h <= k);
    if (stays) continue;
    m->keys[hole] = m->keys[k];
    m->vals[hole] = m->vals[k];
    hole = k;
  }
  m->used[hole] = 0;
  m->n--;
  return true;
}

bool etch__u64map_at(const etch_u64map *m, size_t i, uint64_t *key,
                     int64_t *val) {
  if (i >= m->cap || !m->used[i]) return false;
  if (key) *key = m->keys[i];
  if (val) *val = m->vals[i];
  return true;
}

void etch__u64map_free(etch_u64map *m) {
  free(m->keys);
  free(m->vals);
  free(m->used);
  memset(m, 0, sizeof *m);
}

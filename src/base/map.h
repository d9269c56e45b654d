/*
 * map.h - uint64 -> int64 hash map: open addressing with linear probing,
 * a byte per slot saying it is used (so every key, 0 included, is a key),
 * three quarters full at most, and deletion by backward shift (no
 * tombstones). One copy for every part of etch (the importer's layout, so
 * its speed and memory stay as measured in docs/analysis.md).
 */
#ifndef ETCH_BASE_MAP_H
#define ETCH_BASE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct etch_u64map {
  uint64_t *keys;
  int64_t *vals;
  uint8_t *used;
  size_t cap, n; /* cap: 0 or a power of two */
} etch_u64map;

/* The value of `key` in *val; false when absent. */
bool etch__u64map_get(const etch_u64map *m, uint64_t key, int64_t *val);
/* Adds or replaces; false (map unchanged) when it cannot grow. */
bool etch__u64map_put(etch_u64map *m, uint64_t key, int64_t val);
/* The same, the replaced value in *old and whether there was one in *had
 * (either may be NULL): one probe for both. */
bool etch__u64map_swap(etch_u64map *m, uint64_t key, int64_t val,
                       int64_t *old, bool *had);
/* Removes `key`, its value in *val if val; false when absent. */
bool etch__u64map_del(etch_u64map *m, uint64_t key, int64_t *val);
/* Slot i (0 <= i < cap): false when empty, else its key and value. */
bool etch__u64map_at(const etch_u64map *m, size_t i, uint64_t *key,
                     int64_t *val);
void etch__u64map_free(etch_u64map *m);

#endif /* ETCH_BASE_MAP_H */

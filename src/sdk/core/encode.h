/*
 * encode.h - what the SDK's general path needs to encode a packet into a
 * writer's scratch buffer (track_event.c, and the custom events of
 * event.c): the arg-key cache, the slow paths' clock, the scratch buffer.
 * The fields themselves are pb.h's raw writers and proto/encode.h's
 * messages.
 *
 * Sizes are bounded up front (so no write is checked), nested messages
 * assume a one-byte length and move their body in the rare case it is
 * longer, and the finished packet is copied into the chunk in one go
 * (etch__writer_put_packet crosses chunks when it has to).
 */
#ifndef ETCH_SDK_ENCODE_H
#define ETCH_SDK_ENCODE_H

#include <stdlib.h>
#include <string.h>

#include "proto/encode.h"
#include "sdk/core/sdk.h"

/* The arg-key cache's slot for a key's address: multiplied, so that keys a
 * few bytes apart ("ptr" and "size" side by side in .rodata) do not share
 * a slot and evict each other on every event. */
ETCH_INLINE uint32_t etch__da_slot(const char *key) {
  return (uint32_t)(((uintptr_t)key * 0x9e3779b97f4a7c15ull) >> 58);
}

/* Prepares a call site: its event-name iid and fast-path template. */
void etch__site_prepare(etch_site *site);

/* The slow paths' clock: never behind the previous event. */
ETCH_INLINE uint64_t etch__next_ts(etch_writer *w, uint64_t ticks) {
  uint64_t rel = etch__writer_rel_ns(w, ticks);
  return w->anchor.ns + (rel > w->rel_ns ? rel : w->rel_ns);
}

ETCH_INLINE uint32_t etch__clamp_len(const char *s) {
  size_t n = strlen(s);
  return n > ETCH_MAX_STRING ? ETCH_MAX_STRING : (uint32_t)n;
}

/*
 * An arg key's iid on w's sequence (keys are static strings, like event
 * names): from the writer's arg-key cache by address (*cached), else
 * interned in the sequence's table and cached; *is_new when added now. 0
 * when the table is full: the key is then written inline.
 */
ETCH_INLINE uint32_t etch__arg_key_iid(etch_writer *w, const char *key,
                                       bool *is_new, bool *cached) {
  *is_new = false;
  typeof(&w->da_cache[0]) c = &w->da_cache[etch__da_slot(key)];
  *cached = c->ptr == key && c->gen == w->reset_gen;
  if (*cached) return c->iid;
  uint32_t iid =
      etch__strtab_intern(&w->da_names, key, etch__clamp_len(key), is_new);
  if (iid) {
    c->ptr = key;
    c->iid = iid;
    c->gen = w->reset_gen;
  }
  return iid;
}

/* The writer's scratch buffer with room for `bound` bytes (base's byte
 * vector, grown by doubling); NULL when out of memory. */
ETCH_INLINE uint8_t *etch__writer_scratch(etch_writer *w, size_t bound) {
  w->scratch.len = 0;
  return etch__vec_reserve(&w->scratch, bound) ? NULL : w->scratch.data;
}

#endif /* ETCH_SDK_ENCODE_H */

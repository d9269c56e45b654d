/*
 * fuzz_tracebuf.c - libFuzzer target for the service's trace buffer: the
 * input is a stream of operations a hostile producer could cause (chunks
 * with any ids, flags, counts and bytes; patches anywhere; reads in
 * between, whole or in pieces). Nothing may crash or read outside a
 * chunk, the buffer never holds more than its size, a packet is never
 * longer than what was put in, and reading in pieces ends.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buffer/tracebuf.h"
#include "etch/etch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t total_in;

static int sink(void *ctx, uint32_t seq, const uint8_t *d, uint32_t len,
                bool dropped) {
  (void)ctx, (void)seq, (void)dropped;
  if (len > total_in) abort();
  if (len) {
    volatile uint8_t x = d[0] ^ d[len - 1]; /* touch both ends */
    (void)x;
  }
  return ETCH_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  etch_tracebuf *tb;
  uint64_t cap = 64 + (uint64_t)data[0] * 16;
  if (etch__tracebuf_new(cap, (data[1] & 1) ? ETCH_BUFFER_DISCARD
                                            : ETCH_BUFFER_RING,
                         &tb) != ETCH_OK)
    abort();
  total_in = 0;
  size_t p = 2;
  while (p + 4 <= size) {
    uint8_t op = data[p], a = data[p + 1], b = data[p + 2], n = data[p + 3];
    p += 4;
    size_t len = n < size - p ? n : size - p;
    if (op % 4 == 0 || op % 4 == 1) { /* put */
      total_in += len;
      int rc = etch__tracebuf_put(tb, a % 4, b % 8, (op >> 2) & 3,
                                  (op >> 4) & 7, data + p, (uint32_t)len);
      if (rc != ETCH_OK && etch_last_error()[0] == '\0') abort();
      p += len;
    } else if (op % 4 == 2) { /* patch */
      int rc = etch__tracebuf_patch(tb, a % 4, b % 8, n, data + p,
                                    (uint32_t)(len < 8 ? len : 8));
      if (rc != ETCH_OK && etch_last_error()[0] == '\0') abort();
    } else if (op & 0x80) { /* a read in pieces of n bytes */
      bool more = true;
      for (int k = 0; k < 10000 && more; k++)
        if (etch__tracebuf_read_some(tb, sink, NULL, n, &more) != ETCH_OK)
          abort();
      if (more) abort(); /* pieces must make progress */
    } else if (etch__tracebuf_read(tb, sink, NULL) != ETCH_OK) {
      abort();
    }
    if (etch__tracebuf_used(tb) > cap) abort();
  }
  if (etch__tracebuf_read(tb, sink, NULL) != ETCH_OK) abort();
  etch__tracebuf_free(tb);
  return 0;
}

/*
 * fuzz_buffer.c - libFuzzer target for reading an in-process trace buffer
 * back (src/buffer/buffer.c, etch__buffer_read): every chunk's header and
 * payload come from the input (state, writer id, chunk id, continuation
 * flags, a committed length that may lie, fragments of any sizes), as a
 * buffer shared with someone hostile would hold them. Nothing may crash or
 * read outside a chunk, and no packet is longer than the payloads together.
 *
 * Input: byte 0 picks 2..9 chunks (a 4 KiB chunk each, the buffer's
 * smallest), then per chunk: state, writer id, chunk id, flags, the
 * committed length (2 bytes, little endian; may exceed the payload), and
 * as many payload bytes as the input still has, up to that length.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buffer/buffer.h"
#include "etch/etch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t payloads;

static int sink(void *ctx, uint32_t writer, const uint8_t *d, uint32_t len,
                bool dropped) {
  (void)ctx, (void)writer, (void)dropped;
  if (len > payloads) abort();
  if (len) {
    volatile uint8_t x = d[0] ^ d[len - 1]; /* touch both ends */
    (void)x;
  }
  return ETCH_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint32_t nchunks = 2 + data[0] % 8;
  etch_buffer b;
  if (etch__buffer_init(&b, (uint64_t)nchunks * 4096, ETCH_BUFFER_RING) !=
      ETCH_OK)
    abort();
  size_t p = 1;
  payloads = 0;
  uint32_t room = etch__buffer_payload_size(&b);
  for (uint32_t i = 0; i < b.nchunks && p + 6 <= size; i++) {
    etch_chunk *c = etch__buffer_chunk(&b, i);
    c->state = data[p] % 3;
    c->writer_id = data[p + 1] % 4;
    c->chunk_id = data[p + 2] % 8;
    uint32_t flags = data[p + 3] & 3;
    uint32_t used = (uint32_t)data[p + 4] | (uint32_t)data[p + 5] << 8;
    p += 6;
    size_t n = size - p;
    if (n > used) n = used;
    if (n > room) n = room;
    memcpy(etch__chunk_payload(c), data + p, n);
    p += n;
    payloads += room;
    etch__chunk_publish(c, used & ETCH_CHUNK_USED_MASK, flags);
  }
  uint64_t lost;
  etch__buffer_read(&b, sink, NULL, &lost);
  etch__buffer_destroy(&b);
  return 0;
}

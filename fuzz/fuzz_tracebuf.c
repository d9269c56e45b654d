/*
 * fuzz_tracebuf.c - libFuzzer target for the service's trace buffer: the
 * input is a stream of operations a hostile producer could cause (chunks
 * with any ids, flags, counts and bytes; patches anywhere; reads in
 * between, whole or in pieces). Nothing may crash or read outside a
 * chunk, the buffer never holds more than its size, a packet is never
 * longer than what was put in, and reading in pieces ends. Every packet
 * read goes on to the trace-file writer (records, or a consumer's slices,
 * by the input), whose output must parse back into as many packets as it
 * did not leave out (lost, invalid, or a later copy of an important
 * event). The same operations run twice, reading packet by
 * packet and then by runs of whole packets: the two outputs must be the
 * same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buffer/tracebuf.h"
#include "buffer/tracefile.h"
#include "etch/etch.h"
#include "pb/pb.h"
#include "proto/ipc.h"
#include "proto/perfetto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t total_in, packets_read;
static etch_tracefile tf;

static bool trust(void *ctx, uint32_t seq, int32_t *pid, int32_t *uid,
                  bool *same_pidns) {
  *same_pidns = seq % 3 == 0; /* descriptors checked against the pid */
  (void)ctx;
  *pid = (int32_t)seq * 1000;
  *uid = -1;
  return seq % 2 != 0;
}

static int sink(void *ctx, uint32_t seq, const uint8_t *d, uint32_t len,
                bool dropped) {
  (void)ctx;
  if (len > total_in) abort();
  if (len) {
    volatile uint8_t x = d[0] ^ d[len - 1]; /* touch both ends */
    (void)x;
  }
  packets_read++;
  return etch__tracefile_on_packet(&tf, seq, d, len, dropped);
}

/* A run of whole packets (etch__tracebuf_read_runs): sizes checked by the
 * buffer, packets counted, then the writer's own run path. */
static int sink_run(void *ctx, uint32_t seq, const uint8_t *d, uint32_t len,
                    uint32_t count) {
  (void)ctx;
  if (len > total_in || !count) abort();
  const uint8_t *p = d, *end = d + len;
  uint32_t frags = 0;
  while (p < end) {
    uint64_t n = 0;
    int shift = 0;
    uint8_t b;
    do {
      if (p >= end || shift > 28) abort();
      b = *p++;
      n |= (uint64_t)(b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80);
    if (n > (uint64_t)(end - p)) abort();
    if (n) packets_read++;
    p += n;
    frags++;
  }
  if (frags != count) abort();
  return etch__tracefile_on_run(&tf, seq, d, len, count);
}

/* The packets in the trace-file writer's output. */
static uint64_t count_output(void) {
  etch__pb_dec dec;
  etch__pb_field f;
  etch__pb_dec_init(&dec, etch__pb_buf_data(&tf.out), etch__pb_buf_len(&tf.out));
  uint64_t n = 0;
  while (etch__pb_next(&dec, &f)) {
    if (f.wt != ETCH_PB_LEN) abort();
    if (!tf.slices) {
      if (f.id != ETCH_TRACE_PACKET) abort();
      n++;
      continue;
    }
    if (f.id != ETCH_RBR_SLICES) abort();
    etch__pb_dec sd;
    etch__pb_field g;
    etch__pb_dec_init(&sd, f.data, f.len);
    while (etch__pb_next(&sd, &g))
      if (g.id == ETCH_RBR_SLICE_LAST && g.u) n++;
    if (sd.err) abort();
  }
  if (dec.err) abort();
  return n;
}

/* Runs the operations; the trace-file writer's output in tf (to free). */
static void run_ops(const uint8_t *data, size_t size, bool runs) {
  etch_tracebuf *tb;
  uint64_t cap = 64 + (uint64_t)data[0] * 16;
  if (etch__tracebuf_new(cap, (data[1] & 1) ? ETCH_BUFFER_DISCARD
                                            : ETCH_BUFFER_RING,
                         &tb) != ETCH_OK)
    abort();
  total_in = 0;
  packets_read = 0;
  etch__tracefile_init(&tf, false);
  tf.trust = trust;
  tf.slices = (data[1] & 2) != 0;
  tf.validate = (data[1] & 4) != 0; /* a service's read: packets checked */
  etch_packets_fn run = runs ? sink_run : NULL;
  size_t p = 2;
  while (p + 4 <= size) {
    uint8_t op = data[p], a = data[p + 1], b = data[p + 2], n = data[p + 3];
    p += 4;
    size_t len = n < size - p ? n : size - p;
    if (op % 4 == 0 || op % 4 == 1) { /* put */
      total_in += len;
      /* Bit 7: a copy of a chunk still being written. */
      uint32_t flags = ((op >> 2) & 3u) | (op & 0x80 ? ETCH_TRACEBUF_PARTIAL : 0);
      int rc = etch__tracebuf_put(tb, a % 4, b % 8, flags, (op >> 4) & 7,
                                  data + p, (uint32_t)len);
      if (rc != ETCH_OK && etch_last_error()[0] == '\0') abort();
      p += len;
    } else if (op % 4 == 2) { /* patch */
      int rc = etch__tracebuf_patch(tb, a % 4, b % 8, n, data + p,
                                    (uint32_t)(len < 8 ? len : 8));
      if (rc != ETCH_OK && etch_last_error()[0] == '\0') abort();
    } else if (op & 0x80) { /* a read in pieces of n bytes */
      bool more = true;
      for (int k = 0; k < 10000 && more; k++)
        if (etch__tracebuf_read_runs(tb, sink, run, NULL, n, &more) != ETCH_OK)
          abort();
      if (more) abort(); /* pieces must make progress */
    } else {
      bool more;
      if (etch__tracebuf_read_runs(tb, sink, run, NULL, UINT64_MAX, &more) !=
          ETCH_OK)
        abort();
    }
    if (etch__tracebuf_used(tb) > cap) abort();
  }
  bool more;
  if (etch__tracebuf_read_runs(tb, sink, run, NULL, UINT64_MAX, &more) !=
      ETCH_OK)
    abort();
  etch__tracebuf_free(tb);
  if (tf.out.s.failed ||
      count_output() + tf.skipped + tf.invalid_packets +
              tf.important_left_out !=
          packets_read)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  run_ops(data, size, false);
  size_t n = etch__pb_buf_len(&tf.out);
  uint8_t *one = (uint8_t *)malloc(n ? n : 1);
  if (!one) abort();
  memcpy(one, etch__pb_buf_data(&tf.out), n);
  etch__tracefile_free(&tf);
  run_ops(data, size, true);
  if (etch__pb_buf_len(&tf.out) != n ||
      memcmp(etch__pb_buf_data(&tf.out), one, n) != 0)
    abort(); /* by runs is not packet by packet */
  free(one);
  etch__tracefile_free(&tf);
  return 0;
}

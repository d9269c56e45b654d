/*
 * fuzz_reader_fast.c - differential libFuzzer target: reads the input with
 * the reader's fast path for libetch's packet shapes on and off, in both
 * delivery orders, and aborts if anything the reader hands out differs
 * (events field by field, tracks, stats, status and message, time bounds).
 * The fast path must give up on whatever it does not fully understand and
 * leave it to the generic decoder, so any difference is a bug; crashes and
 * sanitizer reports are caught as in fuzz_reader.c.
 *
 *   CC=clang cmake -B build-fuzz -DETCH_BUILD_FUZZ=ON && make -C build-fuzz fuzz_reader_fast
 *   build-fuzz/fuzz/fuzz_reader_fast -max_len=65536 corpus-copy/ fuzz/corpus/reader/
 */
#include <stdio.h>
#include <stdlib.h>

#include "reader/rdtwice.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char why[1 << 16];
  for (int order = 0; order < 2; order++) {
    res f, g;
    if (rd_read(data, size, (etch_reader_order)order, true, 0, &f)) return 0;
    if (rd_read(data, size, (etch_reader_order)order, false, 0, &g)) {
      rd_free(&f);
      return 0;
    }
    int diff = rd_compare(&f, &g, why, sizeof why);
    bool used_when_off = g.fast_packets != 0;
    rd_free(&f);
    rd_free(&g);
    if (diff) {
      fprintf(stderr, "fast path differs from the generic decoder (%s order): %s\n",
              order ? "timestamp" : "file", why);
      abort();
    }
    if (used_when_off) {
      fprintf(stderr, "fast path used while switched off\n");
      abort();
    }
  }
  return 0;
}

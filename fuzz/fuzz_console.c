/*
 * fuzz_console.c - libFuzzer target for the console interceptor's decoder:
 * the input is a Trace (TracePacket in field 1, as a trace file holds
 * them), every packet given to the console as one sequence's, printed to
 * /dev/null. Whatever the bytes, it prints a line or nothing and never
 * reads outside a packet.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "pb/pb.h"
#include "sdk/core/sdk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int fd = -1;
  if (fd < 0) fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  enum { MAX = 256 };
  const uint8_t *pk[MAX];
  size_t len[MAX], n = 0;
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, data, size);
  while (n < MAX && etch__pb_next(&d, &f))
    if (f.id == 1 && f.wt == ETCH_PB_LEN) {
      pk[n] = f.data;
      len[n++] = f.len;
    }
  if (n && etch__console_feed(pk, len, n, fd) != ETCH_OK) abort();
  return 0;
}

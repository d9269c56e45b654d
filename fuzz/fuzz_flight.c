/*
 * fuzz_flight.c - libFuzzer target for etch recover: the bytes of a flight
 * file as a dead (or hostile) process could leave them. With the first
 * byte even the input is the whole file (its header fuzzed too); odd, the
 * input is the chunk area behind a valid header of 2 to 8 chunks of 4 KiB,
 * so that chunk states, ids, lengths and fragments are what varies. Either
 * it is refused with a message, or a trace comes out that etch's own
 * reader decodes; never a read outside the file.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "buffer/flight.h"
#include "etch/common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t *file = NULL;
  size_t len;
  if (!(data[0] & 1)) {
    len = size - 1;
    file = (uint8_t *)malloc(len ? len : 1);
    memcpy(file, data + 1, len);
  } else {
    uint32_t n = 2 + (uint32_t)(size > 1 ? data[1] % 7 : 0);
    len = ETCH_FLIGHT_HEADER_SIZE + (size_t)n * 4096;
    file = (uint8_t *)calloc(1, len);
    etch_flight_header *h = (etch_flight_header *)file;
    memcpy(h->magic, ETCH_FLIGHT_MAGIC, 8);
    h->version = ETCH_FLIGHT_VERSION;
    h->header_size = ETCH_FLIGHT_HEADER_SIZE;
    h->chunk_size = 4096;
    h->chunk_header_size = ETCH_CHUNK_HEADER_SIZE;
    h->nchunks = n;
    h->fill = size > 2 ? data[2] & 1 : 0;
    h->state = ETCH_FLIGHT_RECORDING;
    size_t body = size > 3 ? size - 3 : 0;
    if (body > (size_t)n * 4096) body = (size_t)n * 4096;
    if (body) memcpy(file + ETCH_FLIGHT_HEADER_SIZE, data + 3, body);
  }
  etch_flight_report rep;
  uint8_t *out = NULL;
  size_t olen = 0;
  int rc = etch__flight_recover(file, len, (size & 2) != 0, -1, &out, &olen,
                                &rep);
  if (rc == ETCH_OK) {
    if (!out || !olen) abort();
    etch__flight_report_free(&rep);
  } else if (!etch_last_error()[0] || out) {
    abort();
  }
  free(out);
  free(file);
  return 0;
}

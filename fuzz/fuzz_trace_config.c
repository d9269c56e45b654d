/*
 * fuzz_trace_config.c - libFuzzer target for TraceConfig: the first byte
 * picks the binary message (what a consumer sends) or the text format
 * (what a config file holds); either gives ETCH_OK or an error with a
 * message, never a crash. What was accepted encodes and decodes back to
 * the very same config.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etch/etch.h"
#include "proto/trace_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static etch_trace_config a, b;
  if (size < 1) return 0;
  int rc = (data[0] & 1)
               ? etch__trace_config_parse_text((const char *)data + 1,
                                               size - 1, &a)
               : etch__trace_config_decode(data + 1, size - 1, &a);
  if (rc != ETCH_OK) {
    if (etch_last_error()[0] == '\0') abort();
    return 0;
  }
  (void)etch__trace_config_check(&a);
  etch__pb_buf buf;
  etch__pb_buf_init(&buf, 256, 0);
  etch__trace_config_encode(&a, &buf);
  if (etch__trace_config_decode(etch__pb_buf_data(&buf), etch__pb_buf_len(&buf),
                                &b) != ETCH_OK)
    abort();
  if (memcmp(&a, &b, sizeof a) != 0) abort();
  etch__pb_buf_free(&buf);
  return 0;
}

/*
 * fuzz_leaks.c - libFuzzer target for `etch leaks`: any bytes as a trace,
 * read and matched (allocation and free instants of category "memory" with
 * args of any type), the report printed to /dev/null. An error gets a
 * message; nothing crashes, hangs or reads outside the input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "etch/etch.h"
#include "query/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *out;
  if (!out) out = fopen("/dev/null", "w");
  int rc = etch__query_leaks_memory(data, size, out, 0);
  if (rc && etch_last_error()[0] == '\0') abort();
  return 0;
}

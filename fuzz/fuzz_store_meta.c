/*
 * fuzz_store_meta.c - the trace store's metadata files (src/ui/store.c):
 * DIR/.meta/NAME is read back by etch ls and etch ui, and anyone who can
 * write the store can write it. Its text goes to etch__store_meta_parse;
 * the first 16 bytes of the input are the file size and mtime the metadata
 * must name. What it accepts must be whole and consistent; nothing it is
 * given may crash it, leak or read outside the buffer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ui/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 16) return 0;
  int64_t fsize, mtime;
  memcpy(&fsize, data, 8);
  memcpy(&mtime, data + 8, 8);
  size -= 16;
  char *buf = (char *)malloc(size + 1);
  if (!buf) return 0;
  memcpy(buf, data + 16, size);
  buf[size] = '\0';
  etch__store_entry e;
  memset(&e, 0, sizeof e);
  if (etch__store_meta_parse(buf, fsize, mtime, &e)) {
    /* Accepted: it names this file, and it is either an error alone or
     * every count. */
    if (e.size != fsize || e.mtime_ns != mtime) abort();
    if (e.error && (!e.error[0] || e.nloss || e.events || e.slices))
      abort();
    for (size_t i = 0; i < e.nloss; i++)
      if (!e.loss[i].name || !e.loss[i].name[0]) abort();
  }
  etch__store_entry_free(&e);
  free(buf);
  return 0;
}

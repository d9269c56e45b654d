/*
 * fuzz_smb.c - libFuzzer target for what a service reads out of a
 * producer's shared memory buffer: the input is two 4 KiB pages exactly as
 * a (hostile) producer could leave them. Every chunk is taken for reading
 * when complete, copied, and its fragments walked; anything that does not
 * fit gives an error with a message, never a read outside the buffer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "buffer/fragment.h"
#include "buffer/smb.h"
#include "etch/etch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  enum { PAGES = 2, PAGE = 4096 };
  static uint8_t mem[PAGES * PAGE] __attribute__((aligned(8)));
  static etch_smb_chunk chunk;
  memset(mem, 0, sizeof mem);
  memcpy(mem, data, size < sizeof mem ? size : sizeof mem);
  etch_smb m;
  if (etch__smb_init(&m, mem, sizeof mem, PAGE) != ETCH_OK) abort();
  for (uint32_t pg = 0; pg < PAGES; pg++) {
    for (uint32_t i = 0; i < ETCH_SMB_MAX_CHUNKS; i++) {
      if (!etch__smb_try_acquire_read(&m, pg, i)) continue;
      if (etch__smb_chunk_read(&m, pg, i, &chunk) == ETCH_OK) {
        uint32_t idx = 0, off = 0, len;
        const uint8_t *d;
        int rc;
        uint64_t sum = 0;
        while ((rc = etch__smb_next_fragment(&chunk, &idx, &off, &d, &len)) ==
               1) {
          if (d && len) sum += d[0] + d[len - 1]; /* touch both ends */
        }
        if (rc < 0 && etch_last_error()[0] == '\0') abort();
        /* As a chunk written in place that a dead producer left: what its
         * own header says it published stays inside the chunk. */
        uint32_t ioff, ilen, iflags;
        if (etch__smb_inplace_committed(&chunk, &ioff, &ilen, &iflags)) {
          if ((uint64_t)ioff + ilen > chunk.payload_len || (iflags & ~3u))
            abort();
          uint32_t n = etch__frag_count(chunk.payload + ioff, ilen);
          sum += n;
          if (ilen) sum += chunk.payload[ioff] + chunk.payload[ioff + ilen - 1];
        }
        (void)sum;
      } else if (etch_last_error()[0] == '\0') {
        abort();
      }
      if (!etch__smb_release_free(&m, pg, i)) abort();
    }
  }
  return 0;
}

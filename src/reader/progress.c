/*
 * progress.c - the progress line of a long read on a terminal: shown once
 * the read has taken a while, at most every so often, and cleared at the
 * end (etch_reader_set_progress).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/mman.h>

#include "base/clock.h"
#include "reader/progress.h"

static void progress_line(etch_reader *r, uint64_t done, uint64_t total,
                          const char *what) {
  uint64_t t = etch__monotonic_ns();
  if (t - r->progress_t0 < r->progress_delay) return;
  if (r->progress_shown && t - r->progress_last < r->progress_every) return;
  r->progress_last = t;
  r->progress_shown = true;
  double pct = total ? 100.0 * (double)done / (double)total : 0;
  /* The line is rewritten whole: \033[K clears what a longer one left. */
  dprintf(r->progress_fd, "\retch: %s %5.1f%%\033[K", what, pct);
}

void etch__rd_progress(etch_reader *r, uint64_t done, uint64_t total,
                       const char *what) {
  if (!r->progress || (++r->progress_tick & 1023)) return;
  progress_line(r, done, total, what);
}

/* Given back in steps of this much, this far behind the reading. */
#define RELEASE_STEP (32ull << 20)
#define RELEASE_LAG (4ull << 20)
#define WATCH_STEP (256ull << 10)

void etch__rd_watch(etch_reader *r, uint64_t off, uint64_t total) {
  if (r->progress) progress_line(r, off, total, "reading");
  if (r->map && r->map_len >= ETCH_RD_RELEASE_MIN &&
      off >= r->map_released + RELEASE_STEP + RELEASE_LAG) {
    size_t upto = (size_t)(off - RELEASE_LAG) & ~((size_t)4095);
    madvise((uint8_t *)r->map + r->map_released, upto - r->map_released,
            MADV_DONTNEED);
    r->map_released = upto;
  }
  r->watch_at = off + WATCH_STEP;
}

void etch__rd_progress_end(etch_reader *r) {
  if (r->progress_shown) dprintf(r->progress_fd, "\r\033[K");
  r->progress_shown = false;
}

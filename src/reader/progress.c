/*
 * progress.c - the progress line of a long read on a terminal: shown once
 * the read has taken a while, at most every so often, and cleared at the
 * end (etch_reader_set_progress).
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "base/clock.h"
#include "reader/progress.h"

void etch__rd_progress(etch_reader *r, uint64_t done, uint64_t total,
                       const char *what) {
  if (!r->progress || (++r->progress_tick & 1023)) return;
  uint64_t t = etch__monotonic_ns();
  if (t - r->progress_t0 < r->progress_delay) return;
  if (r->progress_shown && t - r->progress_last < r->progress_every) return;
  r->progress_last = t;
  r->progress_shown = true;
  double pct = total ? 100.0 * (double)done / (double)total : 0;
  /* The line is rewritten whole: \033[K clears what a longer one left. */
  dprintf(r->progress_fd, "\retch: %s %5.1f%%\033[K", what, pct);
}

void etch__rd_progress_end(etch_reader *r) {
  if (r->progress_shown) dprintf(r->progress_fd, "\r\033[K");
  r->progress_shown = false;
}

/*
 * progress.h - the progress line of a long read on a terminal (progress.c),
 * for the framing and the fast path (reading) and for delivery at the end.
 */
#ifndef ETCH_READER_PROGRESS_H
#define ETCH_READER_PROGRESS_H

#include "reader/reader_int.h"

/* Progress on stderr (no-op unless enabled). */
/* The top level's reading reached offset `off` of `total` (when off >=
 * r->watch_at): the progress line, and the pages of the file's mapping well
 * behind `off` given back (MADV_DONTNEED: a file's pages are read again
 * from it if needed), so that a large file does not stay resident. Sets the
 * next watch_at. */
void etch__rd_watch(etch_reader *r, uint64_t off, uint64_t total);
/* Mapped files at least this long are given back as they are read. */
#define ETCH_RD_RELEASE_MIN (64ull << 20)
void etch__rd_progress(etch_reader *r, uint64_t done, uint64_t total,
                       const char *what);
/* Clears the progress line, if one was shown. */
void etch__rd_progress_end(etch_reader *r);

#endif /* ETCH_READER_PROGRESS_H */

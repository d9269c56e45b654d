/*
 * progress.h - the progress line of a long read on a terminal (progress.c),
 * for the framing and the fast path (reading) and for delivery at the end.
 */
#ifndef ETCH_READER_PROGRESS_H
#define ETCH_READER_PROGRESS_H

#include "reader/reader_int.h"

/* Progress on stderr (no-op unless enabled). */
void etch__rd_progress(etch_reader *r, uint64_t done, uint64_t total,
                       const char *what);
/* Clears the progress line, if one was shown. */
void etch__rd_progress_end(etch_reader *r);

#endif /* ETCH_READER_PROGRESS_H */

/*
 * rdtwice.h - reads a trace with the reader's fast path on or off and keeps
 * everything the reader hands out as text (each field of each event, the
 * track announcements, stats, status, time bounds), so that two readings
 * can be compared exactly. Used by reader_fast_test.c and by the
 * differential fuzz target fuzz/fuzz_reader_fast.c.
 */
#ifndef ETCH_TESTS_RDTWICE_H
#define ETCH_TESTS_RDTWICE_H

#include <etch/reader.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct res {
  char *events;
  size_t events_len;
  char *tracks;
  size_t tracks_len;
  etch_reader_stats stats;
  int rc;
  char error[512];
  int bounds_rc;
  int64_t first, last;
  uint64_t fast_packets;
} res;

/* Reads `data` once (fast path on or off; stop after `stop_after` events if
 * not 0) into `o`. Returns -1 when the reader cannot even be opened. */
int rd_read(const uint8_t *data, size_t len, etch_reader_order order,
            bool fast, uint64_t stop_after, res *o);
void rd_free(res *o);
/* 0 when both readings handed out the same; else 1 and `why` says what
 * differs. */
int rd_compare(const res *a, const res *b, char *why, size_t why_len);

#endif /* ETCH_TESTS_RDTWICE_H */

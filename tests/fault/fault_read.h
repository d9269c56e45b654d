/*
 * fault_read.h - a trace read through the public reader (etch/reader.h)
 * into text, every status checked: tracks, events, custom events, stats.
 */
#ifndef ETCH_TESTS_FAULT_READ_H
#define ETCH_TESTS_FAULT_READ_H

#include <etch/reader.h>

#include "fault.h"

typedef struct fault_read_ctx {
  const char *path;           /* a file, or: */
  const void *data;           /* bytes in memory */
  size_t len;
  etch_reader_order order;
  const char *named;          /* a second subscription, to this category */
  /* Leaves out what changes from run to run of a program (timestamps,
   * ids, thread ids, byte counts): for traces libetch wrote. */
  bool stable;
  fault_str out;              /* the text of the last reading */
} fault_read_ctx;

/* Reads as `c` says into c->out; the reader's status. */
int fault_read(fault_read_ctx *c);

#endif /* ETCH_TESTS_FAULT_READ_H */

/*
 * tbuild.h - the reader tests' read-back helper and sample traces, on the
 * tests' trace builder (trace_build.h): traces built byte by byte, read
 * back into text that tests compare exactly.
 *
 *   tb_read(t.data, t.len, ETCH_ORDER_TIMESTAMP, &out);
 *   ASSERT_EQ_STR(out.events, "I 1000 seq=0 track=0 ... name=hello\n");
 */
#ifndef ETCH_TESTS_READER_TBUILD_H
#define ETCH_TESTS_READER_TBUILD_H

#include <etch/reader.h>

#include "trace_build.h"

/* ---- reading back ------------------------------------------------------------ */

typedef struct tb_out {
  char *events; /* one line per delivered event */
  char *tracks; /* one line per announced track */
  etch_reader_stats stats;
  int rc;
  char error[512];
  int64_t first, last;
} tb_out;

/* Runs the reader on data[0..len) with every event subscribed. */
int tb_read(const void *data, size_t len, etch_reader_order order,
            tb_out *out);
void tb_out_free(tb_out *out);
/* Formats one event as tb_read does (for custom subscriptions). */
void tb_format_event(const etch_event *ev, char *buf, size_t cap);

/* ---- sample traces (tests and the fuzz corpus) ------------------------------------ */

/* Fills `t` with a sample trace; `which` in [0, tb_sample_count()). */
int tb_sample_count(void);
const char *tb_sample_name(int which);
void tb_sample(tb *t, int which);

#endif /* ETCH_TESTS_READER_TBUILD_H */

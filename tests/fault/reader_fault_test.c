/*
 * reader_fault_test.c - the reader under allocation failure: each sample
 * trace of the reader tests (interned data, nested tracks, deflate, zstd
 * and gzip compressed packets, losses, clocks and packet defaults, the
 * fast decoder's shapes) and a trace with custom events, opened and read
 * through the public API with every one of its allocations failing in
 * turn. Each reading either gives the same text as without a fault or
 * fails with ETCH_ENOMEM; nothing leaks.
 */
#include <stdio.h>
#include <string.h>

#include "fault_read.h"
#include "reader/tbuild.h"
#include "test.h"

typedef struct rd_case {
  fault_read_ctx rd;
  char *want;
} rd_case;

static int read_op(void *ctx) {
  rd_case *c = (rd_case *)ctx;
  int rc = fault_read(&c->rd);
  if (rc == ETCH_OK && strcmp(c->rd.out.s, c->want) != 0)
    FAIL("%s: the reading differs:\n--- want\n%s--- got\n%s", fault_now,
         c->want, c->rd.out.s);
  fault_str_free(&c->rd.out);
  return rc;
}

static void sweep_case(rd_case *c, const char *what) {
  if (fault_read(&c->rd)) FAIL("%s: %s", what, etch_last_error());
  c->want = strdup(c->rd.out.s);
  fault_str_free(&c->rd.out);
  fault_result r = fault_sweep(what, read_op, c);
  printf("  %s: %llu allocations, %llu runs failed of %llu\n", what,
         (unsigned long long)r.allocs, (unsigned long long)r.failed,
         (unsigned long long)r.runs);
  free(c->want);
  fault_str_free(&c->rd.out);
}

TEST(fault_reader_samples_in_memory) {
  for (int i = 0; i < tb_sample_count(); i++) {
    tb t;
    tb_init(&t);
    tb_sample(&t, i);
    for (int order = 0; order < 2; order++) {
      rd_case c;
      memset(&c, 0, sizeof c);
      c.rd.data = tb_data(&t);
      c.rd.len = tb_len(&t);
      c.rd.order = order ? ETCH_ORDER_FILE : ETCH_ORDER_TIMESTAMP;
      c.rd.named = "cat";
      char what[128];
      snprintf(what, sizeof what, "reading sample %s (%s order)",
               tb_sample_name(i), order ? "file" : "timestamp");
      sweep_case(&c, what);
    }
    tb_free(&t);
  }
}

TEST(fault_reader_compressed_file) {
  for (int i = 0; i < tb_sample_count(); i++) {
    if (strcmp(tb_sample_name(i), "zstd") && strcmp(tb_sample_name(i), "misc"))
      continue;
    tb t;
    tb_init(&t);
    tb_sample(&t, i);
    rd_case c;
    memset(&c, 0, sizeof c);
    c.rd.path = tb_write_file(&t, tb_sample_name(i));
    c.rd.order = ETCH_ORDER_TIMESTAMP;
    char what[128];
    snprintf(what, sizeof what, "reading file %s", tb_sample_name(i));
    sweep_case(&c, what);
    tb_free(&t);
  }
}

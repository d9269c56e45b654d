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

#include "base/base.h"
#include "fault_read.h"
#include "pb/pb.h"
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

/* ---- a stream fed packet by packet ------------------------------------- */

typedef struct st_case {
  const uint8_t *data;
  size_t len;
  char *want;
  fault_str out;
} st_case;

static void on_st_event(const etch_event *ev, void *user) {
  fault_printf((fault_str *)user, "ev %d %lld %s %s\n", ev->type,
               (long long)ev->ts, ev->category, ev->name);
}

/* Feeds the trace's packets to a stream reader. A feed that fails must
 * fail for want of memory, and the same reader then takes the rest of the
 * packets with no fault (what the lost packet carried is missing from
 * them, not a reason to refuse them). */
static int stream_op(void *ctx) {
  st_case *c = (st_case *)ctx;
  etch_reader *r;
  int rc = etch_reader_open_stream(&r);
  if (rc) return rc;
  fault_printf(&c->out, "%s", "");
  rc = etch_reader_on(r, NULL, NULL, on_st_event, &c->out);
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, c->data, c->len);
  int first = rc;
  while (!rc && etch__pb_next(&d, &f)) {
    if (f.id != 1 || f.wt != 2) continue;
    int frc = etch_reader_feed(r, f.data, f.len, 9);
    if (frc && !first) {
      fault_check_enomem(fault_now, frc);
      first = frc;
      etch__fault_hold(true); /* the rest, with no fault */
    } else if (frc) {
      FAIL("%s: a feed after the fault: %s", fault_now, etch_last_error());
    }
  }
  if (first && !rc) etch__fault_hold(false);
  etch_reader_close(r);
  if (!first && strcmp(c->out.s, c->want))
    FAIL("%s: the stream gave:\n%s\nnot:\n%s", fault_now, c->out.s, c->want);
  fault_str_free(&c->out);
  return first;
}

TEST(fault_reader_stream) {
  for (int i = 0; i < tb_sample_count(); i++) {
    tb t;
    tb_init(&t);
    tb_sample(&t, i);
    st_case c;
    memset(&c, 0, sizeof c);
    c.data = tb_data(&t);
    c.len = tb_len(&t);
    fault_printf(&c.out, "%s", ""); /* what it gives without a fault */
    etch_reader *r;
    ASSERT_OK(etch_reader_open_stream(&r));
    ASSERT_OK(etch_reader_on(r, NULL, NULL, on_st_event, &c.out));
    etch__pb_dec d;
    etch__pb_field f;
    etch__pb_dec_init(&d, c.data, c.len);
    while (etch__pb_next(&d, &f))
      if (f.id == 1 && f.wt == 2) etch_reader_feed(r, f.data, f.len, 9);
    etch_reader_close(r);
    c.want = strdup(c.out.s);
    fault_str_free(&c.out);
    char what[128];
    snprintf(what, sizeof what, "feeding sample %s", tb_sample_name(i));
    fault_result fr = fault_sweep(what, stream_op, &c);
    printf("  %s: %llu allocations, %llu runs failed of %llu\n", what,
           (unsigned long long)fr.allocs, (unsigned long long)fr.failed,
           (unsigned long long)fr.runs);
    free(c.want);
    tb_free(&t);
  }
}

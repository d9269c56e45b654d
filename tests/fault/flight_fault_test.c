/*
 * flight_fault_test.c - the flight recorder (src/buffer/flight.c) under
 * allocation failure: its file made, and the file a session left (events
 * in its ring) recovered into a trace in memory, deflated or not.
 * Each run either recovers the trace it should (compared with the one a
 * run without a fault recovers) or fails with ETCH_ENOMEM; nothing leaks,
 * and a flight file that could not be made is not left.
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "buffer/buffer.h"
#include "buffer/flight.h"
#include "fault.h"
#include "fault_read.h"
#include "test.h"

ETCH_CATEGORY_DEFINE(flt_cat, "flt", "flight recorder fault tests", "");

typedef struct flight_case {
  char path[600];
  uint8_t *file; /* the flight file's bytes, taken once */
  size_t len;
  char *want; /* the recovered trace's reading (no timestamps) */
} flight_case;

/* The reading of a recovered trace, the allocator held. */
static char *reading(const uint8_t *data, size_t len) {
  etch__fault_hold(true);
  fault_read_ctx rd;
  memset(&rd, 0, sizeof rd);
  rd.data = data;
  rd.len = len;
  rd.stable = true;
  if (fault_read(&rd)) FAIL("%s: reading the trace: %s", fault_now,
                            etch_last_error());
  etch__fault_hold(false);
  return rd.out.s;
}
/* The flight file made and closed, kept. */
static int make_op(void *ctx) {
  flight_case *c = (flight_case *)ctx;
  unlink(c->path);
  etch_flight f;
  etch_buffer b;
  etch_flight_id id = {.pid = 42, .process_uuid = 7, .process_name = "fl"};
  int rc =
      etch__flight_create(&f, c->path, 64 * 1024, ETCH_BUFFER_RING, &id, &b);
  if (rc) {
    if (access(c->path, F_OK) == 0)
      FAIL("%s: a flight file that failed to be made is left", fault_now);
    return rc;
  }
  etch__buffer_destroy(&b);
  etch__flight_close(&f, true);
  return ETCH_OK;
}

/* Its bytes recovered into a trace in memory, deflated or not. */
static bool compress_now;
static int recover_op(void *ctx) {
  flight_case *c = (flight_case *)ctx;
  uint8_t *out = NULL;
  size_t out_len = 0;
  etch_flight_report rep;
  memset(&rep, 0, sizeof rep);
  int rc = etch__flight_recover(c->file, c->len, compress_now, -1, &out,
                                &out_len, &rep);
  if (!rc) {
    char *got = reading(out, out_len);
    if (strcmp(got, c->want))
      FAIL("%s: the recovered trace differs:\n--- want\n%s--- got\n%s",
           fault_now, c->want, got);
    free(got);
    etch__flight_report_free(&rep);
  }
  free(out);
  return rc;
}

TEST(fault_flight_file_made) {
  flight_case c;
  memset(&c, 0, sizeof c);
  snprintf(c.path, sizeof c.path, "%s/f.flight", etch_test_tmpdir());
  fault_result r = fault_sweep("flight file made", make_op, &c);
  printf("  %llu allocations, %llu runs failed of %llu\n",
         (unsigned long long)r.allocs, (unsigned long long)r.failed,
         (unsigned long long)r.runs);
}

/* A session's flight file, kept after its end, with events in its ring. */
static void record_flight(const char *path) {
  char conf[800];
  snprintf(conf, sizeof conf, "categories=flt;buffer_kb=256;flight=%s;"
           "flight_keep=1", path);
  etch_config *cfg;
  ASSERT_OK(etch_config_new(&cfg));
  ASSERT_OK(etch_config_parse(cfg, conf));
  etch_session *s;
  ASSERT_OK(etch_session_new(cfg, &s));
  etch_config_free(cfg);
  ASSERT_OK(etch_session_start(s));
  for (int i = 0; i < 20; i++) {
    ETCH_SLICE_BEGIN(flt_cat, "flown", ETCH_ARG_INT("i", i));
    ETCH_SLICE_END(flt_cat);
  }
  ASSERT_OK(etch_session_stop(s));
  etch_session_free(s);
}

TEST(fault_flight_recovered) {
  flight_case c;
  memset(&c, 0, sizeof c);
  snprintf(c.path, sizeof c.path, "%s/f.flight", etch_test_tmpdir());
  record_flight(c.path);
  c.file = etch_test_read_file(c.path, &c.len);
  ASSERT_TRUE(c.file != NULL);
  for (int z = 0; z < 2; z++) {
    compress_now = z;
    uint8_t *out = NULL;
    size_t out_len = 0;
    ASSERT_OK(etch__flight_recover(c.file, c.len, compress_now, -1, &out,
                                   &out_len, NULL));
    c.want = reading(out, out_len);
    free(out);
    if (!strstr(c.want, "name=flown")) FAIL("the recovered trace:\n%s", c.want);
    fault_result r = fault_sweep(z ? "flight recovered, deflated"
                                   : "flight recovered",
                                 recover_op, &c);
    printf("  %s: %llu allocations, %llu runs failed of %llu\n",
           z ? "deflated" : "plain", (unsigned long long)r.allocs,
           (unsigned long long)r.failed, (unsigned long long)r.runs);
    free(c.want);
  }
  free(c.file);
}

/*
 * trace_config_fault_test.c - the TraceConfig parser (src/proto) under
 * allocation failure: text to binary, and text to the decoded config,
 * each allocation failing in turn; each run gives the same bytes and the
 * same config as without a fault, or fails with ETCH_ENOMEM.
 */
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "pb/pb.h"
#include "proto/trace_config.h"
#include "test.h"

static const char config_text[] =
    "# every kind of field the parser reads\n"
    "buffers { size_kb: 1024 fill_policy: RING_BUFFER }\n"
    "buffers: { size_kb: 256 fill_policy: DISCARD }\n"
    "data_sources {\n"
    "  config {\n"
    "    name: \"track_event\" target_buffer: 1\n"
    "    track_event_config {\n"
    "      enabled_categories: \"render\" enabled_categories: \"io*\"\n"
    "      disabled_categories: \"*\" enabled_tags: \"slow\"\n"
    "    }\n"
    "  }\n"
    "  producer_name_filter: \"app\"\n"
    "}\n"
    "data_sources { config { name: \"other\" } }\n"
    "duration_ms: 10000\n"
    "write_into_file: true\n"
    "file_write_period_ms: 2500\n"
    "max_file_size_bytes: 100000000\n"
    "flush_period_ms: 1000\n"
    "incremental_state_config { clear_period_ms: 500 }\n"
    "unique_session_name: \"a name that is long enough to need the "
    "buffer to grow more than once, and then some more text\"\n";

typedef struct tc_case {
  uint8_t *want_bin;
  size_t want_len;
  etch_trace_config *want, *got;
} tc_case;

static int tc_op(void *ctx) {
  tc_case *c = (tc_case *)ctx;
  etch__pb_buf b;
  etch__pb_buf_init(&b, 16, 0);
  int rc = etch__trace_config_text_to_binary(config_text,
                                             strlen(config_text), &b);
  if (rc == ETCH_OK && c->want_bin &&
      (etch__pb_buf_len(&b) != c->want_len ||
       memcmp(etch__pb_buf_data(&b), c->want_bin, c->want_len)))
    FAIL("%s: other bytes", fault_now);
  if (rc == ETCH_OK && !c->want_bin) {
    c->want_len = etch__pb_buf_len(&b);
    c->want_bin = malloc(c->want_len);
    memcpy(c->want_bin, etch__pb_buf_data(&b), c->want_len);
  }
  etch__pb_buf_free(&b);
  if (rc) return rc;
  memset(c->got, 0, sizeof *c->got);
  rc = etch__trace_config_parse_text(config_text, strlen(config_text),
                                     c->got);
  if (rc == ETCH_OK && memcmp(c->got, c->want, sizeof *c->want))
    FAIL("%s: another config", fault_now);
  return rc;
}

TEST(fault_trace_config_parser) {
  tc_case c;
  memset(&c, 0, sizeof c);
  c.want = calloc(1, sizeof *c.want);
  c.got = calloc(1, sizeof *c.got);
  ASSERT_OK(etch__trace_config_parse_text(config_text, strlen(config_text),
                                          c.want));
  ASSERT_EQ_INT(c.want->nbuffers, 2);
  ASSERT_EQ_INT(c.want->nsources, 2);
  ASSERT_EQ_STR(c.want->sources[0].enabled_categories.item[1], "io*");
  fault_result r = fault_sweep("TraceConfig text", tc_op, &c);
  printf("  %llu allocations, %llu runs failed of %llu\n",
         (unsigned long long)r.allocs, (unsigned long long)r.failed,
         (unsigned long long)r.runs);
  free(c.want_bin);
  free(c.want);
  free(c.got);
}

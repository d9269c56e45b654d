/*
 * reader_malformed_test.c - one malformed packet in a trace: left out whole
 * and counted in malformed_packets, its neighbours on its own sequence and
 * on another read exactly, in both orders; etch_reader_set_strict refuses
 * the trace at that packet. And packets that decode but break their
 * sequence's state (an interned id never defined, a track never described,
 * a parent never described): degraded and counted, never an error.
 *
 * Every trace is: seq 2 "A"@100, seq 3 "C"@200, <the bad packet on seq 2
 * at 250>, seq 2 "B"@300, seq 3 "D"@400.
 */
#define _GNU_SOURCE
#include <etch/reader.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb/pb.h"
#include "proto/check.h"
#include "proto/perfetto.h"
#include "reader/reader_priv.h"
#include "reader/tbuild.h"
#include "test.h"

typedef struct rlog {
  char s[4096];
} rlog;

static void on_ev(const etch_event *ev, void *user) {
  rlog *l = (rlog *)user;
  size_t n = strlen(l->s);
  snprintf(l->s + n, sizeof l->s - n, "%s%u:%lld:%s", n ? " " : "",
           ev->sequence_id, (long long)ev->ts, ev->name);
}

/* Reads `t`; the events as "seq:ts:name ..." in *l, the stats in *st. */
static int read_tb(const tb *t, etch_reader_order order, bool strict, rlog *l,
                   etch_reader_stats *st) {
  etch_reader *r;
  memset(l, 0, sizeof *l);
  ASSERT_OK(etch_reader_open_memory(&r, t->data, t->len));
  ASSERT_OK(etch_reader_set_order(r, order));
  ASSERT_OK(etch_reader_set_strict(r, strict));
  ASSERT_OK(etch_reader_on(r, NULL, NULL, on_ev, l));
  int rc = etch_reader_run(r);
  etch_reader_get_stats(r, st);
  if (!rc && st->malformed_packets) {
    const char *first = etch__reader_malformed_first(r);
    ASSERT_TRUE(first && strncmp(first, "offset ", 7) == 0);
  }
  etch_reader_close(r);
  return rc;
}

typedef void (*bad_fn)(tb *t);

static void build(tb *t, bad_fn bad) {
  tb_init(t);
  tb_event(t, 2, 100, 0, ETCH_TE_TYPE_INSTANT, "c", "A");
  tb_event(t, 3, 200, 0, ETCH_TE_TYPE_INSTANT, "c", "C");
  bad(t);
  tb_event(t, 2, 300, 0, ETCH_TE_TYPE_INSTANT, "c", "B");
  tb_event(t, 3, 400, 0, ETCH_TE_TYPE_INSTANT, "c", "D");
}

#define NEIGHBOURS_TS "2:100:A 3:200:C 2:300:B 3:400:D"
#define NEIGHBOURS_FILE NEIGHBOURS_TS

/* The packet left out, the rest exact; strict refuses with `strict_rc`. */
static void expect_left_out(bad_fn bad, int strict_rc, const char *what) {
  tb t;
  build(&t, bad);
  rlog l;
  etch_reader_stats st;
  for (int order = 0; order < 2; order++) {
    ASSERT_OK(read_tb(&t, (etch_reader_order)order, false, &l, &st));
    if (strcmp(l.s, NEIGHBOURS_TS) != 0)
      FAIL("%s: events \"%s\"", what, l.s);
    ASSERT_EQ_U64(st.malformed_packets, 1);
    ASSERT_EQ_U64(st.track_events, 4);
    ASSERT_EQ_U64(st.interned_data_missing, 0);
  }
  int rc = read_tb(&t, ETCH_ORDER_TIMESTAMP, true, &l, &st);
  if (rc != strict_rc)
    FAIL("%s: strict gave %d (%s)", what, rc, etch_last_error());
  ASSERT_TRUE(strncmp(etch_last_error(), "offset ", 7) == 0);
  /* What came before the bad packet was delivered. */
  ASSERT_EQ_STR(l.s, "2:100:A 3:200:C");
  /* The service's check refuses it too. */
  const uint8_t *p = t.data;
  size_t left = t.len;
  int refused = 0;
  while (left) {
    const uint8_t *q = p + 1;
    uint64_t n;
    ASSERT_TRUE(etch__pb_read_varint(&q, p + left, &n));
    etch__pkt_fault why;
    if (!etch__packet_check(q, (size_t)n, &why)) refused++;
    left -= (size_t)(q + n - p);
    p = q + n;
  }
  if (refused != 1) FAIL("%s: check refused %d", what, refused);
  tb_free(&t);
}

/* ---- malformed shapes ------------------------------------------------------------ */

static void bad_top_wire_type(tb *t) {
  tb_packet(t, 2, 250);
  tb_u(t, ETCH_PKT_TRACK_EVENT, 5);
  tb_end(t);
}

static void bad_event_field(tb *t) {
  tb_packet(t, 2, 250);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  tb_u(t, ETCH_TE_NAME, 7); /* a string as a varint */
  tb_close(t);
  tb_end(t);
}

static void bad_annotation(tb *t) {
  tb_event_open(t, 2, 250, 0, ETCH_TE_TYPE_INSTANT, "c", "X");
  tb_open(t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_s(t, ETCH_DA_NAME, "n");
  tb_s(t, ETCH_DA_INT_VALUE, "not an int");
  tb_close(t);
  tb_event_close(t);
}

static void bad_nesting(tb *t) {
  tb_event_open(t, 2, 250, 0, ETCH_TE_TYPE_INSTANT, "c", "X");
  tb_open(t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_s(t, ETCH_DA_NAME, "n");
  for (int i = 0; i < 100; i++) tb_open(t, ETCH_DA_ARRAY_VALUES);
  tb_u(t, ETCH_DA_INT_VALUE, 1);
  for (int i = 0; i < 100; i++) tb_close(t);
  tb_close(t);
  tb_event_close(t);
}

static void bad_packed_flows(tb *t) {
  tb_event_open(t, 2, 250, 0, ETCH_TE_TYPE_INSTANT, "c", "X");
  tb_b(t, ETCH_TE_FLOW_IDS, "1234567", 7); /* fixed64s cut short */
  tb_event_close(t);
}

static void bad_nested_length(tb *t) {
  tb_packet(t, 2, 250);
  tb_varint(t, etch__pb_tag(ETCH_PKT_TRACK_EVENT, ETCH_PB_LEN));
  tb_varint(t, 4);
  tb_varint(t, etch__pb_tag(ETCH_TE_NAME, ETCH_PB_LEN));
  tb_varint(t, 100); /* past the track event's end */
  tb_raw(t, "ab", 2);
  tb_end(t);
}

/* Interned data and an event in one packet, an entry broken: the names it
 * defines are not applied either (the event after uses iid 7: missing). */
static void bad_interned(tb *t) {
  tb_packet(t, 2, 250);
  tb_open(t, ETCH_PKT_INTERNED_DATA);
  tb_interned(t, ETCH_ID_EVENT_NAMES, 7, "seven");
  tb_u(t, ETCH_ID_EVENT_NAMES, 8); /* an entry as a varint */
  tb_close(t);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  tb_u(t, ETCH_TE_NAME_IID, 7);
  tb_close(t);
  tb_end(t);
}

static void bad_descriptor(tb *t) {
  tb_packet(t, 2, 250);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_s(t, ETCH_TD_UUID, "uuid"); /* a varint as a string */
  tb_s(t, ETCH_TD_NAME, "T");
  tb_close(t);
  tb_end(t);
}

static void bad_snapshot(tb *t) {
  tb_packet(t, 2, 250);
  tb_open(t, ETCH_PKT_CLOCK_SNAPSHOT);
  tb_open(t, ETCH_CLOCKSNAP_CLOCKS);
  tb_u(t, ETCH_SNAPCLOCK_CLOCK_ID, 6);
  tb_varint(t, etch__pb_tag(ETCH_SNAPCLOCK_TIMESTAMP, ETCH_PB_VARINT));
  tb_raw(t, "\xff\xff", 2); /* a varint cut short */
  tb_close(t);
  tb_close(t);
  tb_end(t);
}

static void bad_defaults(tb *t) {
  tb_packet(t, 2, 250);
  tb_open(t, ETCH_PKT_TRACE_PACKET_DEFAULTS);
  tb_u(t, ETCH_DEFAULTS_TRACK_EVENT_DEFAULTS, 1);
  tb_close(t);
  tb_end(t);
}

static void bad_compressed_garbage(tb *t) {
  tb_packet(t, 2, 250);
  tb_s(t, ETCH_PKT_COMPRESSED_PACKETS, "not deflate data");
  tb_end(t);
}

/* Call stacks (stacks.c): a ModuleSymbols path as a varint, a frame's
 * rel_pc as a string, a callstack's packed frames cut short and one
 * deeper than the reader takes, a Line's name as a varint. */
static void bad_module_path(tb *t) {
  tb_packet(t, 2, 250);
  tb_open(t, ETCH_PKT_MODULE_SYMBOLS);
  tb_u(t, ETCH_MODSYM_PATH, 3);
  tb_close(t);
  tb_end(t);
}

static void bad_symbol_line(tb *t) {
  tb_packet(t, 2, 250);
  tb_open(t, ETCH_PKT_MODULE_SYMBOLS);
  tb_s(t, ETCH_MODSYM_PATH, "/lib/x.so");
  tb_open(t, ETCH_MODSYM_ADDRESS_SYMBOLS);
  tb_u(t, ETCH_ADDRSYM_ADDRESS, 0x40);
  tb_open(t, ETCH_ADDRSYM_LINES);
  tb_u(t, ETCH_LINE_FUNCTION_NAME, 1);
  tb_close(t);
  tb_close(t);
  tb_close(t);
  tb_end(t);
}

static void bad_frame(tb *t) {
  tb_packet(t, 2, 250);
  tb_open(t, ETCH_PKT_INTERNED_DATA);
  tb_open(t, ETCH_ID_FRAMES);
  tb_u(t, ETCH_FRAME_IID, 1);
  tb_s(t, ETCH_FRAME_REL_PC, "pc");
  tb_close(t);
  tb_close(t);
  tb_end(t);
}

static void bad_packed_stack(tb *t) {
  tb_packet(t, 2, 250);
  tb_open(t, ETCH_PKT_INTERNED_DATA);
  tb_open(t, ETCH_ID_CALLSTACKS);
  tb_u(t, ETCH_CALLSTACK_IID, 1);
  tb_b(t, ETCH_CALLSTACK_FRAME_IDS, "\x01\x82", 2);
  tb_close(t);
  tb_close(t);
  tb_end(t);
}

static void deep_stack(tb *t) {
  static uint8_t frames[ETCH_PKT_MAX_STACK_FRAMES + 1];
  memset(frames, 1, sizeof frames);
  tb_packet(t, 2, 250);
  tb_open(t, ETCH_PKT_INTERNED_DATA);
  tb_open(t, ETCH_ID_CALLSTACKS);
  tb_u(t, ETCH_CALLSTACK_IID, 1);
  tb_b(t, ETCH_CALLSTACK_FRAME_IDS, frames, sizeof frames);
  tb_close(t);
  tb_close(t);
  tb_end(t);
}

static void bad_callstack_iid(tb *t) {
  tb_event_open(t, 2, 250, 0, ETCH_TE_TYPE_INSTANT, "c", "X");
  tb_s(t, ETCH_TE_CALLSTACK_IID, "cs");
  tb_event_close(t);
}

TEST(reader_malformed_left_out_each_shape) {
  expect_left_out(bad_top_wire_type, ETCH_EFORMAT, "top-level wire type");
  expect_left_out(bad_event_field, ETCH_EFORMAT, "track_event field");
  expect_left_out(bad_annotation, ETCH_EFORMAT, "debug annotation");
  expect_left_out(bad_nesting, ETCH_ELIMIT, "nesting");
  expect_left_out(bad_packed_flows, ETCH_EFORMAT, "packed flow ids");
  expect_left_out(bad_nested_length, ETCH_ETRUNC, "nested length");
  expect_left_out(bad_interned, ETCH_EFORMAT, "interned data");
  expect_left_out(bad_descriptor, ETCH_EFORMAT, "descriptor");
  expect_left_out(bad_snapshot, ETCH_ETRUNC, "clock snapshot");
  expect_left_out(bad_defaults, ETCH_EFORMAT, "packet defaults");
  expect_left_out(bad_module_path, ETCH_EFORMAT, "module symbols path");
  expect_left_out(bad_symbol_line, ETCH_EFORMAT, "symbol line");
  expect_left_out(bad_frame, ETCH_EFORMAT, "interned frame");
  expect_left_out(bad_packed_stack, ETCH_EFORMAT, "packed callstack");
  expect_left_out(deep_stack, ETCH_ELIMIT, "deep callstack");
  expect_left_out(bad_callstack_iid, ETCH_EFORMAT, "callstack_iid");
}

TEST(reader_malformed_compressed) {
  /* Garbage that is not deflate: the wrapper is left out. */
  tb t;
  build(&t, bad_compressed_garbage);
  rlog l;
  etch_reader_stats st;
  ASSERT_OK(read_tb(&t, ETCH_ORDER_TIMESTAMP, false, &l, &st));
  ASSERT_EQ_STR(l.s, NEIGHBOURS_TS);
  ASSERT_EQ_U64(st.malformed_packets, 1);
  ASSERT_EQ_INT(read_tb(&t, ETCH_ORDER_TIMESTAMP, true, &l, &st), ETCH_EFORMAT);
  tb_free(&t);

  /* Inside compressed packets: a good event, a bad one, a good one. */
  tb in;
  tb_init(&in);
  tb_event(&in, 2, 250, 0, ETCH_TE_TYPE_INSTANT, "c", "E");
  bad_event_field(&in);
  tb_event(&in, 3, 260, 0, ETCH_TE_TYPE_INSTANT, "c", "F");
  tb_init(&t);
  tb_event(&t, 2, 100, 0, ETCH_TE_TYPE_INSTANT, "c", "A");
  tb_compressed(&t, in.data, in.len, false, false);
  tb_event(&t, 2, 300, 0, ETCH_TE_TYPE_INSTANT, "c", "B");
  for (int order = 0; order < 2; order++) {
    ASSERT_OK(read_tb(&t, (etch_reader_order)order, false, &l, &st));
    ASSERT_EQ_STR(l.s, "2:100:A 2:250:E 3:260:F 2:300:B");
    ASSERT_EQ_U64(st.malformed_packets, 1);
  }
  ASSERT_EQ_INT(read_tb(&t, ETCH_ORDER_FILE, true, &l, &st), ETCH_EFORMAT);
  ASSERT_TRUE(strstr(etch_last_error(), "in compressed packets") != NULL);
  tb_free(&t);
  tb_free(&in);
}

/* An incremental clock: the left-out packet's delta is not added. */
TEST(reader_malformed_incremental_clock) {
  tb t;
  tb_init(&t);
  tb_etch_seq_start(&t, 2, 1000, 0, false);
  for (int i = 0; i < 3; i++) {
    tb_begin(&t);
    tb_u(&t, ETCH_PKT_TIMESTAMP, i == 1 ? 50 : 10);
    tb_open(&t, ETCH_PKT_TRACK_EVENT);
    tb_u(&t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
    if (i == 1)
      tb_u(&t, ETCH_TE_NAME, 1); /* malformed */
    else
      tb_s(&t, ETCH_TE_NAME, i ? "second" : "first");
    tb_close(&t);
    tb_u(&t, ETCH_PKT_TRUSTED_SEQ_ID, 2);
    tb_end(&t);
  }
  rlog l;
  etch_reader_stats st;
  for (int order = 0; order < 2; order++) {
    ASSERT_OK(read_tb(&t, (etch_reader_order)order, false, &l, &st));
    ASSERT_EQ_STR(l.s, "2:1010:first 2:1020:second");
    ASSERT_EQ_U64(st.malformed_packets, 1);
  }
  tb_free(&t);
}

/* A stream: the packet is refused alone and counted; the next one reads. */
TEST(reader_malformed_fed) {
  tb t;
  tb_init(&t);
  bad_interned(&t);
  tb good;
  tb_init(&good);
  tb_event(&good, 2, 300, 0, ETCH_TE_TYPE_INSTANT, "c", "B");
  etch_reader *r;
  rlog l;
  memset(&l, 0, sizeof l);
  ASSERT_OK(etch_reader_open_stream(&r));
  ASSERT_OK(etch_reader_on(r, NULL, NULL, on_ev, &l));
  /* Skip the record framing: tag byte and length. */
  const uint8_t *q = t.data + 1;
  uint64_t n;
  ASSERT_TRUE(etch__pb_read_varint(&q, t.data + t.len, &n));
  ASSERT_EQ_INT(etch_reader_feed(r, q, (size_t)n, 2), ETCH_EFORMAT);
  ASSERT_TRUE(strstr(etch_last_error(), "InternedData entry") != NULL);
  q = good.data + 1;
  ASSERT_TRUE(etch__pb_read_varint(&q, good.data + good.len, &n));
  ASSERT_OK(etch_reader_feed(r, q, (size_t)n, 2));
  etch_reader_stats st;
  etch_reader_get_stats(r, &st);
  ASSERT_EQ_U64(st.malformed_packets, 1);
  ASSERT_EQ_STR(l.s, "2:300:B");
  etch_reader_close(r);
  tb_free(&t);
  tb_free(&good);
}

/* ---- packets that decode but break their sequence's state ------------------------ */

static void undefined_iid(tb *t) {
  tb_packet(t, 2, 250);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  tb_u(t, ETCH_TE_NAME_IID, 99);
  tb_u(t, ETCH_TE_CATEGORY_IIDS, 98);
  tb_close(t);
  tb_end(t);
}

static void undescribed_track(tb *t) {
  tb_event(t, 2, 250, 777, ETCH_TE_TYPE_INSTANT, "c", "U");
}

static void unknown_parent(tb *t) {
  tb_named_track(t, 2, 55, 66 /* never described */, "child");
  tb_event(t, 2, 250, 55, ETCH_TE_TYPE_INSTANT, "c", "P");
}

TEST(reader_malformed_state_degraded) {
  rlog l;
  etch_reader_stats st;
  tb t;
  for (int strict = 0; strict < 2; strict++) {
    build(&t, undefined_iid);
    ASSERT_OK(read_tb(&t, ETCH_ORDER_TIMESTAMP, strict, &l, &st));
    ASSERT_EQ_STR(l.s, "2:100:A 3:200:C 2:250: 2:300:B 3:400:D");
    ASSERT_EQ_U64(st.interned_data_missing, 2);
    ASSERT_EQ_U64(st.malformed_packets, 0);
    tb_free(&t);

    build(&t, undescribed_track);
    ASSERT_OK(read_tb(&t, ETCH_ORDER_TIMESTAMP, strict, &l, &st));
    ASSERT_EQ_STR(l.s, "2:100:A 3:200:C 2:250:U 2:300:B 3:400:D");
    ASSERT_EQ_U64(st.unknown_track, 1);
    tb_free(&t);

    build(&t, unknown_parent);
    ASSERT_OK(read_tb(&t, ETCH_ORDER_TIMESTAMP, strict, &l, &st));
    ASSERT_EQ_STR(l.s, "2:100:A 3:200:C 2:250:P 2:300:B 3:400:D");
    ASSERT_EQ_U64(st.unknown_parent_track, 1);
    ASSERT_EQ_U64(st.unknown_track, 0);
    tb_free(&t);
  }
}

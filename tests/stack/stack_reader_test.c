/*
 * stack_reader_test.c - the reader's call stacks (src/reader/stacks.c) on
 * traces written byte by byte: InternedData mappings, frames and
 * callstacks in any order, resolved when an event names its stack;
 * ModuleSymbols matched by build id or path; one row per distinct
 * mapping, frame and stack across sequences; what a sequence does not
 * define, an incremental-state reset, and hostile bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/reader.h"
#include "test.h"
#include "trace_build.h"

#define SEQ 7
#define TRACK 100
#define PID 42

typedef struct seen {
  int64_t callsite[16];
  int n;
} seen;

static void on_event(const etch_event *ev, void *user) {
  seen *s = user;
  if (ev->type == ETCH_EVENT_INSTANT && s->n < 16)
    s->callsite[s->n++] = ev->callsite_id;
}

/* A sequence with a process and thread track (TRACK) on `seq`. */
static void start(tb *t, uint32_t seq) {
  tb_process(t, seq, 1, PID, "app");
  tb_thread(t, seq, TRACK + seq, PID, PID + (int32_t)seq, "main");
}

/* InternedString {iid, str} (bytes) under InternedData field `kind`. */
static void istr(tb *t, uint32_t kind, uint64_t iid, const void *s, size_t n) {
  tb_open(t, kind);
  tb_u(t, ETCH_ISTR_IID, iid);
  tb_b(t, ETCH_ISTR_STR, s, n);
  tb_close(t);
}

static void mapping(tb *t, uint64_t iid, uint64_t build, uint64_t start_,
                    uint64_t end, const uint64_t *path, int npath) {
  tb_open(t, ETCH_ID_MAPPINGS);
  tb_u(t, ETCH_MAPPING_IID, iid);
  if (build) tb_u(t, ETCH_MAPPING_BUILD_ID, build);
  tb_u(t, ETCH_MAPPING_START, start_);
  tb_u(t, ETCH_MAPPING_END, end);
  for (int i = 0; i < npath; i++) tb_u(t, ETCH_MAPPING_PATH_STRING_IDS, path[i]);
  tb_close(t);
}

static void frame(tb *t, uint64_t iid, uint64_t name, uint64_t map,
                  uint64_t rel_pc) {
  tb_open(t, ETCH_ID_FRAMES);
  tb_u(t, ETCH_FRAME_IID, iid);
  if (name) tb_u(t, ETCH_FRAME_FUNCTION_NAME_ID, name);
  if (map) tb_u(t, ETCH_FRAME_MAPPING_ID, map);
  tb_u(t, ETCH_FRAME_REL_PC, rel_pc);
  tb_close(t);
}

/* Callstack {iid, frame_ids}, outermost first; packed when asked. */
static void callstack(tb *t, uint64_t iid, const uint64_t *frames, int n,
                      bool packed) {
  tb_open(t, ETCH_ID_CALLSTACKS);
  tb_u(t, ETCH_CALLSTACK_IID, iid);
  if (packed) {
    tb_open(t, ETCH_CALLSTACK_FRAME_IDS);
    for (int i = 0; i < n; i++) tb_varint(t, frames[i]);
    tb_close(t);
  } else {
    for (int i = 0; i < n; i++) tb_u(t, ETCH_CALLSTACK_FRAME_IDS, frames[i]);
  }
  tb_close(t);
}

static const uint8_t kBuild[] = {0x01, 0x02, 0xab, 0xff};

/* The stack main -> inner in /usr/lib/libx.so, interned on `seq` with iids
 * from `base`, the fields in field-number order (the frames before the
 * mapping they are in, the stack before the build id and the path). */
static void intern_stack(tb *t, uint32_t seq, int64_t ts, uint64_t base,
                         bool packed) {
  tb_packet(t, seq, ts);
  tb_open(t, ETCH_PKT_INTERNED_DATA);
  istr(t, ETCH_ID_FUNCTION_NAMES, base + 1, "interned_main", 13);
  frame(t, base + 1, base + 1, base + 1, 0x100); /* outermost */
  frame(t, base + 2, 0, base + 1, 0x200);
  uint64_t fr[] = {base + 1, base + 2};
  callstack(t, base + 1, fr, 2, packed);
  istr(t, ETCH_ID_BUILD_IDS, base + 1, kBuild, sizeof kBuild);
  istr(t, ETCH_ID_MAPPING_PATHS, base + 1, "usr", 3);
  istr(t, ETCH_ID_MAPPING_PATHS, base + 2, "lib", 3);
  istr(t, ETCH_ID_MAPPING_PATHS, base + 3, "libx.so", 7);
  uint64_t path[] = {base + 1, base + 2, base + 3};
  mapping(t, base + 1, base + 1, 0x7000, 0x9000, path, 3);
  tb_close(t);
  tb_end(t);
}

static void alloc(tb *t, uint32_t seq, int64_t ts, uint64_t callstack_iid) {
  tb_event_open(t, seq, ts, TRACK + seq, 3, "memory", "untagged");
  tb_u(t, ETCH_TE_CALLSTACK_IID, callstack_iid);
  tb_event_close(t);
}

/* ModuleSymbols naming `addr` of the module with build id kBuild (or, when
 * by_path, of /usr/lib/libx.so with no build id). */
static void symbols(tb *t, uint32_t seq, bool by_path, uint64_t addr,
                    const char *fn, const char *file, uint32_t line) {
  tb_packet(t, seq, -1);
  tb_open(t, ETCH_PKT_MODULE_SYMBOLS);
  if (by_path)
    tb_s(t, ETCH_MODSYM_PATH, "/usr/lib/libx.so");
  else
    tb_b(t, ETCH_MODSYM_BUILD_ID, kBuild, sizeof kBuild);
  tb_open(t, ETCH_MODSYM_ADDRESS_SYMBOLS);
  tb_u(t, ETCH_ADDRSYM_ADDRESS, addr);
  tb_open(t, ETCH_ADDRSYM_LINES);
  tb_s(t, ETCH_LINE_FUNCTION_NAME, fn);
  if (file) tb_s(t, ETCH_LINE_SOURCE_FILE_NAME, file);
  if (line) tb_u(t, ETCH_LINE_LINE_NUMBER, line);
  tb_close(t);
  tb_close(t);
  tb_close(t);
  tb_end(t);
}

/* Reads `t` (in `order`): the instants' callsites in *s, the tables in
 * *st, the stats in *rs; the reader, to close. */
static etch_reader *read_trace(const tb *t, etch_reader_order order, seen *s,
                               etch_stacks *st, etch_reader_stats *rs) {
  /* ETCH_STACK_SEEDS=DIR: each trace also written there (seeds for
   * fuzz_reader). */
  const char *seeds = getenv("ETCH_STACK_SEEDS");
  static int nseed;
  if (seeds) {
    char path[4096];
    snprintf(path, sizeof path, "%s/stacks%zu-%d.pb", seeds, tb_len(t), nseed++);
    FILE *f = fopen(path, "wb");
    if (f) {
      fwrite(tb_data(t), 1, tb_len(t), f);
      fclose(f);
    }
  }
  etch_reader *r = NULL;
  ASSERT_OK(etch_reader_open_memory(&r, tb_data(t), tb_len(t)));
  ASSERT_OK(etch_reader_set_order(r, order));
  memset(s, 0, sizeof *s);
  ASSERT_OK(etch_reader_on(r, NULL, NULL, on_event, s));
  ASSERT_OK(etch_reader_run(r));
  ASSERT_OK(etch_reader_stacks(r, st));
  etch_reader_get_stats(r, rs);
  return r;
}

static void check_one_stack(const etch_stacks *st) {
  ASSERT_EQ_U64(st->nmappings, 1);
  ASSERT_EQ_STR(st->mappings[0].build_id, "0102abff");
  ASSERT_EQ_STR(st->mappings[0].name, "/usr/lib/libx.so");
  ASSERT_EQ_U64(st->mappings[0].start, 0x7000);
  ASSERT_EQ_U64(st->mappings[0].end, 0x9000);
  ASSERT_EQ_U64(st->nframes, 2);
  ASSERT_EQ_STR(st->frames[0].name, "interned_main");
  ASSERT_EQ_U64(st->frames[0].rel_pc, 0x100);
  ASSERT_EQ_STR(st->frames[1].name, "");
  ASSERT_EQ_U64(st->frames[1].rel_pc, 0x200);
  ASSERT_EQ_U64(st->ncallsites, 2);
  ASSERT_EQ_INT(st->callsites[0].parent_id, -1);
  ASSERT_EQ_INT(st->callsites[0].depth, 0);
  ASSERT_EQ_INT(st->callsites[0].frame_id, 0);
  ASSERT_EQ_INT(st->callsites[1].parent_id, 0);
  ASSERT_EQ_INT(st->callsites[1].depth, 1);
  ASSERT_EQ_INT(st->callsites[1].frame_id, 1);
}

TEST(stack_resolved_in_any_field_order_and_named_by_symbols) {
  for (int order = 0; order < 2; order++) {
    tb t;
    tb_init(&t);
    start(&t, SEQ);
    intern_stack(&t, SEQ, 1000, 0, order == 1);
    alloc(&t, SEQ, 1100, 1);
    alloc(&t, SEQ, 1050, 1); /* out of order: held in timestamp order */
    symbols(&t, SEQ, false, 0x200, "inner", "x.c", 7); /* by build id */
    symbols(&t, SEQ, true, 0x100, "main", NULL, 0);    /* by path */
    symbols(&t, SEQ, true, 0x200, "not_this", "y.c", 1); /* named already */
    seen s;
    etch_stacks st;
    etch_reader_stats rs;
    etch_reader *r = read_trace(
        &t, order ? ETCH_ORDER_TIMESTAMP : ETCH_ORDER_FILE, &s, &st, &rs);
    ASSERT_EQ_INT(s.n, 2);
    ASSERT_EQ_INT(s.callsite[0], 1);
    ASSERT_EQ_INT(s.callsite[1], 1);
    check_one_stack(&st);
    ASSERT_EQ_U64(st.frames[1].nsymbols, 1);
    const etch_stack_symbol *y = &st.symbols[st.frames[1].symbol];
    ASSERT_EQ_STR(y->name, "inner");
    ASSERT_EQ_STR(y->source_file, "x.c");
    ASSERT_EQ_INT(y->line_number, 7);
    ASSERT_EQ_U64(st.frames[0].nsymbols, 1);
    y = &st.symbols[st.frames[0].symbol];
    ASSERT_EQ_STR(y->name, "main");
    ASSERT_EQ_STR(y->source_file, "");
    ASSERT_EQ_INT(y->line_number, 0);
    ASSERT_EQ_U64(rs.interned_data_missing, 0);
    ASSERT_EQ_U64(rs.malformed_packets, 0);
    etch_reader_close(r);
    tb_free(&t);
  }
}

/* The same stack interned by two sequences with other iids: one mapping,
 * two frames, two callsites; both events on the same callsite. */
TEST(same_stack_on_two_sequences_is_one_row) {
  tb t;
  tb_init(&t);
  start(&t, SEQ);
  start(&t, SEQ + 1);
  intern_stack(&t, SEQ, 1000, 0, false);
  intern_stack(&t, SEQ + 1, 1000, 50, true);
  alloc(&t, SEQ, 1100, 1);
  alloc(&t, SEQ + 1, 1200, 51);
  seen s;
  etch_stacks st;
  etch_reader_stats rs;
  etch_reader *r = read_trace(&t, ETCH_ORDER_FILE, &s, &st, &rs);
  ASSERT_EQ_INT(s.n, 2);
  ASSERT_EQ_INT(s.callsite[0], 1);
  ASSERT_EQ_INT(s.callsite[1], 1);
  check_one_stack(&st);
  etch_reader_close(r);
  tb_free(&t);
}

/* What the sequence does not define gives no stack, counted; so does
 * what an incremental-state reset forgot. */
TEST(undefined_stacks_frames_and_mappings_give_none) {
  tb t;
  tb_init(&t);
  start(&t, SEQ);
  tb_packet(&t, SEQ, 1000);
  tb_open(&t, ETCH_PKT_INTERNED_DATA);
  frame(&t, 1, 0, 9, 0x10); /* mapping 9: none */
  frame(&t, 2, 0, 0, 0x20); /* no mapping: an empty one */
  uint64_t a[] = {1}, b[] = {3}, c[] = {2};
  callstack(&t, 1, a, 1, false);
  callstack(&t, 2, b, 1, false); /* frame 3: none */
  callstack(&t, 3, c, 1, false);
  tb_close(&t);
  tb_end(&t);
  alloc(&t, SEQ, 1100, 1);
  alloc(&t, SEQ, 1200, 2);
  alloc(&t, SEQ, 1300, 4); /* no such stack */
  alloc(&t, SEQ, 1400, 3);
  /* The sequence's state cleared: stack 3 is gone. */
  tb_packet(&t, SEQ, 1500);
  tb_u(&t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_INCREMENTAL_STATE_CLEARED);
  tb_end(&t);
  alloc(&t, SEQ, 1600, 3);
  seen s;
  etch_stacks st;
  etch_reader_stats rs;
  etch_reader *r = read_trace(&t, ETCH_ORDER_FILE, &s, &st, &rs);
  ASSERT_EQ_INT(s.n, 5);
  ASSERT_EQ_INT(s.callsite[0], -1);
  ASSERT_EQ_INT(s.callsite[1], -1);
  ASSERT_EQ_INT(s.callsite[2], -1);
  ASSERT_EQ_INT(s.callsite[3], 0);
  ASSERT_EQ_INT(s.callsite[4], -1);
  ASSERT_EQ_U64(rs.interned_data_missing, 4);
  ASSERT_EQ_U64(st.ncallsites, 1);
  ASSERT_EQ_U64(st.nmappings, 1);
  ASSERT_EQ_STR(st.mappings[0].name, "");
  ASSERT_EQ_STR(st.mappings[0].build_id, "");
  etch_reader_close(r);
  tb_free(&t);
}

/* Hostile bytes: a stack deeper than the reader takes, a frame field of
 * the wrong wire type, a packed list cut short, ModuleSymbols with a bad
 * line: each packet is left out whole (malformed_packets), the rest read. */
TEST(hostile_stacks_are_malformed_packets) {
  tb t;
  tb_init(&t);
  start(&t, SEQ);
  tb_packet(&t, SEQ, 1000);
  tb_open(&t, ETCH_PKT_INTERNED_DATA);
  static uint64_t deep[4097];
  for (int i = 0; i < 4097; i++) deep[i] = 1;
  callstack(&t, 1, deep, 4097, true);
  tb_close(&t);
  tb_end(&t);
  tb_packet(&t, SEQ, 1001);
  tb_open(&t, ETCH_PKT_INTERNED_DATA);
  tb_open(&t, ETCH_ID_FRAMES);
  tb_u(&t, ETCH_FRAME_IID, 2);
  tb_s(&t, ETCH_FRAME_REL_PC, "x"); /* a varint field as bytes */
  tb_close(&t);
  tb_close(&t);
  tb_end(&t);
  tb_packet(&t, SEQ, 1002);
  tb_open(&t, ETCH_PKT_INTERNED_DATA);
  tb_open(&t, ETCH_ID_CALLSTACKS);
  tb_u(&t, ETCH_CALLSTACK_IID, 3);
  tb_b(&t, ETCH_CALLSTACK_FRAME_IDS, "\x80", 1); /* a varint cut short */
  tb_close(&t);
  tb_close(&t);
  tb_end(&t);
  tb_packet(&t, SEQ, -1);
  tb_open(&t, ETCH_PKT_MODULE_SYMBOLS);
  tb_s(&t, ETCH_MODSYM_PATH, "/a.so");
  tb_open(&t, ETCH_MODSYM_ADDRESS_SYMBOLS);
  tb_u(&t, ETCH_ADDRSYM_ADDRESS, 1);
  tb_u(&t, ETCH_ADDRSYM_LINES, 5); /* a message as a varint */
  tb_close(&t);
  tb_close(&t);
  tb_end(&t);
  alloc(&t, SEQ, 1100, 1);
  alloc(&t, SEQ, 1200, 3);
  seen s;
  etch_stacks st;
  etch_reader_stats rs;
  etch_reader *r = read_trace(&t, ETCH_ORDER_FILE, &s, &st, &rs);
  ASSERT_EQ_U64(rs.malformed_packets, 4);
  ASSERT_EQ_INT(s.n, 2);
  ASSERT_EQ_INT(s.callsite[0], -1);
  ASSERT_EQ_INT(s.callsite[1], -1);
  ASSERT_EQ_U64(st.ncallsites, 0);
  ASSERT_EQ_U64(st.nsymbols, 0);
  etch_reader_close(r);
  tb_free(&t);
}

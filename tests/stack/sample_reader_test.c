/*
 * sample_reader_test.c - CPU samples read back (src/reader/samples.c):
 * TracePacket.perf_sample on traces written byte by byte, delivered to
 * etch_reader_on_sample with the packet's time on the trace clock, the
 * pid, tid, cpu and cpu mode written, and the stack resolved into the
 * same stack_profile rows an allocation's stack is; a stack the sequence
 * does not define; hostile bytes left out as the service's packet check
 * refuses them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etch/reader.h"
#include "proto/check.h"
#include "test.h"
#include "trace_build.h"

#define SEQ 7
#define TRACK 100
#define PID 42

typedef struct got {
  etch_sample s[16];
  int n;
  int64_t alloc_cs[4];
  int nalloc;
} got;

static void on_sample(const etch_sample *s, void *user) {
  got *g = user;
  if (g->n < 16) g->s[g->n++] = *s;
}

static void on_event(const etch_event *ev, void *user) {
  got *g = user;
  if (ev->type == ETCH_EVENT_INSTANT && g->nalloc < 4)
    g->alloc_cs[g->nalloc++] = ev->callsite_id;
}

/* InternedData: main -> leaf in /bin/app, callstack 1 (two frames) and
 * callstack 2 (main alone), function names interned with the frames. */
static void intern(tb *t, uint32_t seq, int64_t ts) {
  tb_packet(t, seq, ts);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_INCREMENTAL_STATE_CLEARED);
  tb_open(t, ETCH_PKT_INTERNED_DATA);
  const char *names[] = {"main", "leaf"};
  for (int i = 0; i < 2; i++) {
    tb_open(t, ETCH_ID_FUNCTION_NAMES);
    tb_u(t, ETCH_ISTR_IID, (uint64_t)i + 1);
    tb_b(t, ETCH_ISTR_STR, names[i], strlen(names[i]));
    tb_close(t);
  }
  tb_open(t, ETCH_ID_MAPPING_PATHS);
  tb_u(t, ETCH_ISTR_IID, 1);
  tb_b(t, ETCH_ISTR_STR, "app", 3);
  tb_close(t);
  tb_open(t, ETCH_ID_MAPPINGS);
  tb_u(t, ETCH_MAPPING_IID, 1);
  tb_u(t, ETCH_MAPPING_START, 0x1000);
  tb_u(t, ETCH_MAPPING_END, 0x5000);
  tb_u(t, ETCH_MAPPING_PATH_STRING_IDS, 1);
  tb_close(t);
  for (uint64_t i = 1; i <= 2; i++) {
    tb_open(t, ETCH_ID_FRAMES);
    tb_u(t, ETCH_FRAME_IID, i);
    tb_u(t, ETCH_FRAME_FUNCTION_NAME_ID, i);
    tb_u(t, ETCH_FRAME_MAPPING_ID, 1);
    tb_u(t, ETCH_FRAME_REL_PC, 0x100 * i);
    tb_close(t);
  }
  tb_open(t, ETCH_ID_CALLSTACKS);
  tb_u(t, ETCH_CALLSTACK_IID, 1);
  tb_u(t, ETCH_CALLSTACK_FRAME_IDS, 1);
  tb_u(t, ETCH_CALLSTACK_FRAME_IDS, 2);
  tb_close(t);
  tb_open(t, ETCH_ID_CALLSTACKS);
  tb_u(t, ETCH_CALLSTACK_IID, 2);
  tb_u(t, ETCH_CALLSTACK_FRAME_IDS, 1);
  tb_close(t);
  tb_close(t);
  tb_end(t);
}

/* A PerfSample packet; a field < 0 is left out. */
static void sample(tb *t, uint32_t seq, int64_t ts, int64_t cpu, int64_t pid,
                   int64_t tid, int64_t iid, int64_t mode) {
  tb_packet(t, seq, ts);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_PERF_SAMPLE);
  if (cpu >= 0) tb_u(t, ETCH_PERF_SAMPLE_CPU, (uint64_t)cpu);
  if (pid >= 0) tb_u(t, ETCH_PERF_SAMPLE_PID, (uint64_t)pid);
  if (tid >= 0) tb_u(t, ETCH_PERF_SAMPLE_TID, (uint64_t)tid);
  if (iid >= 0) tb_u(t, ETCH_PERF_SAMPLE_CALLSTACK_IID, (uint64_t)iid);
  if (mode >= 0) tb_u(t, ETCH_PERF_SAMPLE_CPU_MODE, (uint64_t)mode);
  tb_u(t, 6, 1234); /* timebase_count: not read */
  tb_close(t);
  tb_end(t);
}

static etch_reader *read_trace(const tb *t, etch_reader_order order, got *g,
                               etch_reader_stats *rs) {
  const char *seeds = getenv("ETCH_STACK_SEEDS"); /* seeds for fuzz_reader */
  static int nseed;
  if (seeds) {
    char path[4096];
    snprintf(path, sizeof path, "%s/samples%zu-%d.pb", seeds, tb_len(t),
             nseed++);
    FILE *f = fopen(path, "wb");
    if (f) {
      fwrite(tb_data(t), 1, tb_len(t), f);
      fclose(f);
    }
  }
  etch_reader *r = NULL;
  ASSERT_OK(etch_reader_open_memory(&r, tb_data(t), tb_len(t)));
  ASSERT_OK(etch_reader_set_order(r, order));
  memset(g, 0, sizeof *g);
  ASSERT_OK(etch_reader_on_sample(r, on_sample, g));
  ASSERT_OK(etch_reader_on(r, NULL, NULL, on_event, g));
  ASSERT_OK(etch_reader_run(r));
  etch_reader_get_stats(r, rs);
  return r;
}

/* Each packet of `t` as the service's check takes it: accepted must mean
 * read (fuzz_check asserts it at large). */
static int check_refusals(const tb *t) {
  const uint8_t *p = tb_data(t), *end = p + tb_len(t);
  int refused = 0;
  while (p < end) {
    p++; /* the Trace.packet tag */
    uint64_t len = 0;
    int shift = 0;
    while (*p & 0x80) len |= (uint64_t)(*p++ & 0x7f) << shift, shift += 7;
    len |= (uint64_t)*p++ << shift;
    etch__pkt_fault why;
    if (!etch__packet_check_full(p, len, &why)) refused++;
    if (!etch__packet_check(p, len, &why)) refused += 100;
    p += len;
  }
  return refused;
}

TEST(samples_delivered_with_their_thread_cpu_and_stack) {
  for (int order = 0; order < 2; order++) {
    tb t;
    tb_init(&t);
    tb_process(&t, SEQ, 1, PID, "app");
    tb_thread(&t, SEQ, TRACK, PID, PID + 1, "main");
    intern(&t, SEQ, 1000);
    sample(&t, SEQ, 2000, 3, PID, PID + 1, 1, 2);
    sample(&t, SEQ, 1500, 0, PID, PID + 2, 2, -1); /* earlier, as written */
    sample(&t, SEQ, 2500, -1, PID, PID + 1, -1, -1); /* no stack, no cpu */
    /* an allocation with the sample's stack: the same callsite */
    tb_event_open(&t, SEQ, 2600, TRACK, 3, "memory", "untagged");
    tb_u(&t, ETCH_TE_CALLSTACK_IID, 1);
    tb_event_close(&t);
    got g;
    etch_reader_stats rs;
    etch_reader *r = read_trace(
        &t, order ? ETCH_ORDER_TIMESTAMP : ETCH_ORDER_FILE, &g, &rs);
    ASSERT_EQ_INT(g.n, 3);
    ASSERT_EQ_INT(g.s[0].ts, 2000);
    ASSERT_EQ_INT(g.s[0].pid, PID);
    ASSERT_EQ_INT(g.s[0].tid, PID + 1);
    ASSERT_EQ_INT(g.s[0].cpu, 3);
    ASSERT_TRUE(g.s[0].has_cpu);
    ASSERT_EQ_INT(g.s[0].cpu_mode, ETCH_CPU_MODE_USER);
    ASSERT_EQ_INT(g.s[0].sequence_id, SEQ);
    ASSERT_EQ_INT(g.s[1].ts, 1500);
    ASSERT_EQ_INT(g.s[1].tid, PID + 2);
    ASSERT_EQ_INT(g.s[1].cpu, 0);
    ASSERT_TRUE(g.s[1].has_cpu);
    ASSERT_EQ_INT(g.s[1].cpu_mode, ETCH_CPU_MODE_UNKNOWN);
    ASSERT_EQ_INT(g.s[2].ts, 2500);
    ASSERT_FALSE(g.s[2].has_cpu);
    ASSERT_EQ_INT(g.s[2].callsite_id, -1);
    ASSERT_TRUE(g.s[1].packet_offset < g.s[2].packet_offset);

    etch_stacks st;
    ASSERT_OK(etch_reader_stacks(r, &st));
    /* callstack 1: main (callsite 0) -> leaf (callsite 1); callstack 2:
     * main alone, the same callsite 0. */
    ASSERT_EQ_U64(st.ncallsites, 2);
    ASSERT_EQ_INT(g.s[0].callsite_id, 1);
    ASSERT_EQ_INT(g.s[1].callsite_id, 0);
    ASSERT_EQ_STR(st.frames[st.callsites[1].frame_id].name, "leaf");
    ASSERT_EQ_INT(st.callsites[1].parent_id, 0);
    ASSERT_EQ_STR(st.frames[st.callsites[0].frame_id].name, "main");
    ASSERT_EQ_STR(st.mappings[0].name, "/app");
    ASSERT_EQ_INT(g.nalloc, 1);
    ASSERT_EQ_INT(g.alloc_cs[0], 1);
    ASSERT_EQ_U64(rs.interned_data_missing, 0);
    ASSERT_EQ_U64(rs.malformed_packets, 0);
    ASSERT_EQ_INT(check_refusals(&t), 0);
    etch_reader_close(r);
    tb_free(&t);
  }
}

/* A stack its sequence does not define (or another sequence's): the
 * sample comes without one, counted; a sample on a sequence whose state
 * was lost is skipped as any packet needing it. */
TEST(sample_stack_undefined_gives_none) {
  tb t;
  tb_init(&t);
  intern(&t, SEQ, 1000);
  sample(&t, SEQ, 2000, 1, PID, PID, 9, -1);       /* no callstack 9 */
  sample(&t, SEQ + 1, 2100, 1, PID, PID, 1, -1);   /* not its sequence's */
  tb_packet(&t, SEQ, 2200);
  tb_u(&t, ETCH_PKT_PREVIOUS_PACKET_DROPPED, 1); /* SEQ's state lost */
  tb_end(&t);
  sample(&t, SEQ, 2300, 1, PID, PID, 1, -1); /* skipped */
  got g;
  etch_reader_stats rs;
  etch_reader *r = read_trace(&t, ETCH_ORDER_FILE, &g, &rs);
  ASSERT_EQ_INT(g.n, 2);
  ASSERT_EQ_INT(g.s[0].callsite_id, -1);
  ASSERT_EQ_INT(g.s[1].callsite_id, -1);
  ASSERT_EQ_INT(g.s[1].sequence_id, SEQ + 1);
  ASSERT_EQ_U64(rs.interned_data_missing, 2);
  ASSERT_EQ_U64(rs.packet_skipped_seq_needs_incremental_state_invalid, 1);
  etch_reader_close(r);
  tb_free(&t);
}

/* Hostile bytes: a PerfSample field of the wrong wire type, a PerfSample
 * that is a varint, one cut short: each packet left out whole
 * (malformed_packets; a strict reader stops with EFORMAT), and the
 * service's check refuses exactly those. */
TEST(hostile_samples_are_malformed_packets) {
  for (int strict = 0; strict < 2; strict++) {
    tb t;
    tb_init(&t);
    intern(&t, SEQ, 1000);
    sample(&t, SEQ, 1100, 1, PID, PID, 1, -1); /* good */
    tb_packet(&t, SEQ, 1200);
    tb_open(&t, ETCH_PKT_PERF_SAMPLE);
    tb_s(&t, ETCH_PERF_SAMPLE_TID, "x"); /* a varint field as bytes */
    tb_close(&t);
    tb_end(&t);
    tb_packet(&t, SEQ, 1300);
    tb_u(&t, ETCH_PKT_PERF_SAMPLE, 5); /* a message as a varint */
    tb_end(&t);
    tb_packet(&t, SEQ, 1400);
    tb_b(&t, ETCH_PKT_PERF_SAMPLE, "\x08\x80", 2); /* cpu cut short */
    tb_end(&t);
    tb_packet(&t, SEQ, 1500);
    tb_open(&t, ETCH_PKT_PERF_SAMPLE);
    tb_d(&t, ETCH_PERF_SAMPLE_CPU_MODE, 1.0); /* fixed64 */
    tb_close(&t);
    tb_end(&t);
    ASSERT_EQ_INT(check_refusals(&t), 4 * 101);
    etch_reader *r = NULL;
    ASSERT_OK(etch_reader_open_memory(&r, tb_data(&t), tb_len(&t)));
    got g;
    memset(&g, 0, sizeof g);
    ASSERT_OK(etch_reader_on_sample(r, on_sample, &g));
    ASSERT_OK(etch_reader_set_strict(r, strict));
    int rc = etch_reader_run(r);
    etch_reader_stats rs;
    etch_reader_get_stats(r, &rs);
    ASSERT_EQ_INT(g.n, 1);
    ASSERT_EQ_INT(g.s[0].callsite_id, 1);
    if (strict) {
      ASSERT_EQ_INT(rc, ETCH_EFORMAT);
      ASSERT_TRUE(strstr(etch_last_error(), "PerfSample.tid") != NULL);
    } else {
      ASSERT_OK(rc);
      ASSERT_EQ_U64(rs.malformed_packets, 4);
    }
    ASSERT_EQ_INT(etch_reader_on_sample(r, on_sample, &g), ETCH_ESTATE);
    etch_reader_close(r);
    tb_free(&t);
  }
}

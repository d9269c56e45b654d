/*
 * reader_fast_test.c - the reader's fast path (src/reader/fast.c) against
 * the generic decoder.
 *
 * Every trace here is read four times - fast path on and off, in file and
 * timestamp order - and everything the reader hands out must be the same:
 * each field of each event (names, categories, args by type and bits,
 * counter values, pid/tid, packet offsets), the track announcements, every
 * stat, the status and error message, the time bounds. The traces are
 * built byte by byte in libetch's layouts (timestamp last or first,
 * minimal or redundant 4- and 5-byte lengths) and then bent: fields in
 * every order, fields twice, unknown fields, flags, missing interned data,
 * lost state, truncation at every byte of a fast-path packet (file cut
 * there, packet cut there, track event cut there), random byte changes.
 */
#define _GNU_SOURCE
#include <etch/reader.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb/pb.h"
#include "proto/perfetto.h"
#include "reader/reader_priv.h"
#include "reader/tbuild.h"
#include "reader/rdtwice.h"
#include "test.h"

/* ---- reading a trace both ways (rdtwice.c) -------------------------------------- */

static void read_one(const uint8_t *data, size_t len, etch_reader_order order,
                     bool fast, uint64_t stop_after, res *o) {
  if (rd_read(data, len, order, fast, stop_after, o))
    FAIL("open: %s", etch_last_error());
}

static void res_free(res *o) { rd_free(o); }

static void expect_same(const res *a, const res *b, const char *what) {
  static char why[1 << 16];
  if (rd_compare(a, b, why, sizeof why)) FAIL("%s: %s", what, why);
}

/*
 * Reads `data` fast and generic in both orders and fails on any
 * difference. Returns the packets the fast path took (file order).
 */
static uint64_t same_both_ways(const uint8_t *data, size_t len,
                               const char *what) {
  uint64_t fast_packets = 0;
  for (int order = 0; order < 2; order++) {
    res f, g;
    read_one(data, len, (etch_reader_order)order, true, 0, &f);
    read_one(data, len, (etch_reader_order)order, false, 0, &g);
    expect_same(&f, &g, what);
    if (g.fast_packets) FAIL("%s: fast path used while off", what);
    if (order == ETCH_ORDER_FILE) fast_packets = f.fast_packets;
    res_free(&f);
    res_free(&g);
  }
  return fast_packets;
}

/* ---- bytes ------------------------------------------------------------------------ */

typedef struct bb {
  uint8_t b[512];
  size_t n;
} bb;

static void bb_raw(bb *x, const void *p, size_t n) {
  if (x->n + n > sizeof x->b) abort();
  memcpy(x->b + x->n, p, n);
  x->n += n;
}
static void bb_byte(bb *x, uint8_t v) { bb_raw(x, &v, 1); }
static void bb_varint(bb *x, uint64_t v) {
  uint8_t t[ETCH_PB_MAX_VARINT];
  bb_raw(x, t, (size_t)(etch__pb_put_varint(t, v) - t));
}
/* A varint padded to `width` bytes (redundant continuation bytes). */
static void bb_varint_w(bb *x, uint64_t v, int width) {
  for (int i = 0; i < width - 1; i++) {
    bb_byte(x, (uint8_t)((v & 0x7f) | 0x80));
    v >>= 7;
  }
  bb_byte(x, (uint8_t)v);
}
static void bb_tag(bb *x, uint32_t field, uint32_t wt) {
  bb_varint(x, etch__pb_tag(field, wt));
}
static void bb_u(bb *x, uint32_t field, uint64_t v) {
  bb_tag(x, field, ETCH_PB_VARINT);
  bb_varint(x, v);
}
static void bb_f64(bb *x, uint32_t field, uint64_t v) {
  uint8_t t[8];
  bb_tag(x, field, ETCH_PB_FIXED64);
  etch__pb_put_fixed64(t, v);
  bb_raw(x, t, 8);
}
/* Field `field` holding `body`, its length `width` bytes long (0: minimal). */
static void bb_msg(bb *x, uint32_t field, const bb *body, int width) {
  bb_tag(x, field, ETCH_PB_LEN);
  if (width)
    bb_varint_w(x, body->n, width);
  else
    bb_varint(x, body->n);
  bb_raw(x, body->b, body->n);
}

/* A Trace record holding `pkt`, its length `width` bytes long (0: minimal). */
static void put_record(tb *t, const bb *pkt, int width) {
  bb rec = {0};
  bb_msg(&rec, 1, pkt, width);
  tb_raw(t, rec.b, rec.n);
}

/* ---- the traces ------------------------------------------------------------------- */

enum { SEQ = 2, SEQ2 = 3, PROC = 1000, THREAD = 1001, THREAD2 = 1002,
       CTR = 2000, CTR_INCR = 2001, CTR_DBL = 2002 };

static void counter_track(tb *t, uint64_t uuid, const char *name, int64_t mult,
                          bool incr) {
  tb_begin(t);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(t, ETCH_TD_UUID, uuid);
  tb_u(t, ETCH_TD_PARENT_UUID, PROC);
  tb_s(t, ETCH_TD_NAME, name);
  tb_open(t, ETCH_TD_COUNTER);
  tb_u(t, ETCH_CD_UNIT, ETCH_CD_UNIT_COUNT);
  if (mult) tb_u(t, ETCH_CD_UNIT_MULTIPLIER, (uint64_t)mult);
  if (incr) tb_u(t, ETCH_CD_IS_INCREMENTAL, 1);
  tb_close(t);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ);
  tb_end(t);
}

/* Interned data on `seq` (generic path): categories, names, arg names. */
static void interning(tb *t, uint32_t seq, uint64_t ts) {
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, ts);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_INTERNED_DATA);
  tb_interned(t, ETCH_ID_EVENT_CATEGORIES, 1, "render");
  tb_interned(t, ETCH_ID_EVENT_CATEGORIES, 2, "io");
  tb_interned(t, ETCH_ID_EVENT_NAMES, 1, "draw");
  tb_interned(t, ETCH_ID_EVENT_NAMES, 2, "frame");
  tb_interned(t, ETCH_ID_EVENT_NAMES, 3, "etch.dropped_events");
  tb_interned(t, ETCH_ID_EVENT_NAMES, 4, "queue");
  tb_interned(t, ETCH_ID_EVENT_NAMES, 200, "far");
  tb_interned(t, ETCH_ID_EVENT_NAMES, 1ull << 40, "very far");
  tb_interned(t, ETCH_ID_DEBUG_ANNOTATION_NAMES, 1, "frame");
  tb_interned(t, ETCH_ID_DEBUG_ANNOTATION_NAMES, 2, "count");
  tb_interned(t, ETCH_ID_DEBUG_ANNOTATION_NAMES, 3, "ptr");
  tb_interned(t, ETCH_ID_DEBUG_ANNOTATION_NAMES, 1ull << 33, "far_arg");
  tb_close(t);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  tb_u(t, ETCH_TE_CATEGORY_IIDS, 1);
  tb_u(t, ETCH_TE_NAME_IID, 2);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, seq);
  tb_end(t);
}

/* Two writer sequences with their tracks, counter tracks, interned data. */
static void prelude(tb *t) {
  tb_etch_seq_start(t, SEQ, 1000, THREAD, false);
  tb_process_track(t, SEQ, 1000, PROC, 42, "app");
  tb_thread_track(t, SEQ, 1000, THREAD, PROC, 42, 43, "main");
  counter_track(t, CTR, "queue", 3, false);
  counter_track(t, CTR_INCR, "bytes", 0, true);
  counter_track(t, CTR_DBL, "load", 0, false);
  tb_etch_seq_start(t, SEQ2, 1000, THREAD2, false);
  tb_thread_track(t, SEQ2, 1000, THREAD2, PROC, 42, 44, "worker");
  interning(t, SEQ, 5);
  interning(t, SEQ2, 6);
}

/* TrackEvent bodies in the SDK's field order. */
static void te_site(bb *te, int type, uint64_t cat, uint64_t name) {
  bb_u(te, ETCH_TE_TYPE, (uint64_t)type);
  if (cat) bb_u(te, ETCH_TE_CATEGORY_IIDS, cat);
  if (name) bb_u(te, ETCH_TE_NAME_IID, name);
}
static void te_arg(bb *te, uint64_t iid, uint32_t field, uint64_t v, int width) {
  bb da = {0};
  bb_u(&da, ETCH_DA_NAME_IID, iid);
  if (field == ETCH_DA_DOUBLE_VALUE)
    bb_f64(&da, field, v);
  else
    bb_u(&da, field, v);
  bb_msg(te, ETCH_TE_DEBUG_ANNOTATIONS, &da, width);
}

/* A packet in the new layout: 68 02 5A len <te> 40 <delta> 50 <seq>. */
static void pkt_new(bb *p, const bb *te, uint64_t delta, uint32_t seq,
                    int width) {
  bb_u(p, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  bb_msg(p, ETCH_PKT_TRACK_EVENT, te, width);
  bb_u(p, ETCH_PKT_TIMESTAMP, delta);
  bb_u(p, ETCH_PKT_TRUSTED_SEQ_ID, seq);
}

/* The events libetch's fast paths write, each in the new layout. */
static void fast_events(tb *t, uint32_t seq, int width) {
  bb te, p;
  static const struct {
    int type;
    uint64_t cat, name;
  } sites[] = {
      {ETCH_TE_TYPE_SLICE_BEGIN, 1, 1}, {ETCH_TE_TYPE_SLICE_BEGIN, 2, 2},
      {ETCH_TE_TYPE_INSTANT, 1, 2},     {ETCH_TE_TYPE_SLICE_END, 0, 0},
      {ETCH_TE_TYPE_SLICE_END, 0, 0},   {ETCH_TE_TYPE_SLICE_END, 0, 0},
      {ETCH_TE_TYPE_INSTANT, 0, 200},   {ETCH_TE_TYPE_INSTANT, 1, 1ull << 40},
  };
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(sites); i++) {
    te = (bb){0};
    p = (bb){0};
    te_site(&te, sites[i].type, sites[i].cat, sites[i].name);
    pkt_new(&p, &te, 10 + i * 300, seq, width);
    put_record(t, &p, width);
  }
  /* Counters: int with a multiplier, incremental, double, big values. */
  static const struct {
    uint64_t uuid;
    uint64_t v;
    bool dbl;
  } ctrs[] = {{CTR, 5, false},        {CTR, (uint64_t)-7, false},
              {CTR_INCR, 100, false}, {CTR_INCR, 23, false},
              {CTR_DBL, 0x400921fb54442d18ull, true},
              {CTR, 1ull << 62, false}};
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(ctrs); i++) {
    te = (bb){0};
    p = (bb){0};
    te_site(&te, ETCH_TE_TYPE_COUNTER, 1, 4);
    bb_u(&te, ETCH_TE_TRACK_UUID, ctrs[i].uuid);
    if (ctrs[i].dbl)
      bb_f64(&te, ETCH_TE_DOUBLE_COUNTER_VALUE, ctrs[i].v);
    else
      bb_u(&te, ETCH_TE_COUNTER_VALUE, ctrs[i].v);
    pkt_new(&p, &te, 7, seq, width);
    put_record(t, &p, width);
  }
  /* Args: one or two scalars of every kind. */
  static const struct {
    uint32_t field;
    uint64_t v;
  } args[] = {{ETCH_DA_INT_VALUE, 7},
              {ETCH_DA_INT_VALUE, (uint64_t)-1},
              {ETCH_DA_UINT_VALUE, 1ull << 63},
              {ETCH_DA_BOOL_VALUE, 1},
              {ETCH_DA_BOOL_VALUE, 2},
              {ETCH_DA_DOUBLE_VALUE, 0xbff0000000000000ull},
              {ETCH_DA_POINTER_VALUE, 0xdeadbeefull}};
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(args); i++) {
    te = (bb){0};
    p = (bb){0};
    te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
    te_arg(&te, 1 + i % 3, args[i].field, args[i].v, width);
    if (i & 1) te_arg(&te, 2, ETCH_DA_INT_VALUE, i, width);
    pkt_new(&p, &te, 3, seq, width);
    put_record(t, &p, width);
  }
  /* An arg whose name iid is past the direct array. */
  te = (bb){0};
  p = (bb){0};
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  te_arg(&te, 1ull << 33, ETCH_DA_INT_VALUE, 9, width);
  pkt_new(&p, &te, 3, seq, width);
  put_record(t, &p, width);
  /* etch's drop report: an instant with a "count" arg. */
  te = (bb){0};
  p = (bb){0};
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 3);
  te_arg(&te, 2, ETCH_DA_INT_VALUE, 12, width);
  pkt_new(&p, &te, 3, seq, width);
  put_record(t, &p, width);
  te = (bb){0};
  p = (bb){0};
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 3);
  te_arg(&te, 2, ETCH_DA_UINT_VALUE, 30, width);
  pkt_new(&p, &te, 3, seq, width);
  put_record(t, &p, width);
}

/* ---- tests ------------------------------------------------------------------------- */

TEST(reader_fast_takes_libetch_packets) {
  /* Minimal lengths, then redundant 4- and 5-byte lengths (packet, track
   * event, annotations) as the general path and older writers write them. */
  int widths[] = {0, 4, 5};
  for (size_t w = 0; w < ETCH_ARRAY_SIZE(widths); w++) {
    tb t;
    tb_init(&t);
    prelude(&t);
    fast_events(&t, SEQ, widths[w]);
    fast_events(&t, SEQ2, widths[w]);
    fast_events(&t, SEQ, widths[w]);
    uint64_t n = same_both_ways(t.data, t.len, "libetch packets");
    /* Every event packet above but the one on the far arg name (cached
     * keys only for direct iids, but it is still taken) - all of them. */
    ASSERT_EQ_U64(n, 3 * (8 + 6 + 7 + 1 + 2));
    tb_free(&t);
  }
}

/* Lengths of 128 bytes and more: two-byte minimal varints, and redundant
 * 4- and 5-byte ones holding more than seven bits. */
TEST(reader_fast_long_lengths) {
  int widths[] = {0, 4, 5};
  for (size_t w = 0; w < ETCH_ARRAY_SIZE(widths); w++) {
    tb t;
    tb_init(&t);
    prelude(&t);
    for (int k = 0; k < 3; k++) {
      bb te = {0}, p = {0};
      te_site(&te, ETCH_TE_TYPE_SLICE_BEGIN, 1, 2);
      bb_u(&te, ETCH_TE_TRACK_UUID, THREAD);
      for (int i = 0; i < 8; i++)
        te_arg(&te, 1 + (uint64_t)i % 3, ETCH_DA_INT_VALUE,
               (uint64_t)-1 - (uint64_t)i, widths[w]);
      ASSERT_TRUE(te.n >= 128);
      if (k == 1) {
        bb_u(&p, ETCH_PKT_TIMESTAMP, 9);
        bb_u(&p, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
        bb_msg(&p, ETCH_PKT_TRACK_EVENT, &te, widths[w]);
        bb_u(&p, ETCH_PKT_TRUSTED_SEQ_ID, SEQ);
      } else {
        pkt_new(&p, &te, 9, SEQ, widths[w]);
      }
      put_record(&t, &p, widths[w]);
    }
    ASSERT_EQ_U64(same_both_ways(t.data, t.len, "long lengths"), 3);
    tb_free(&t);
  }
}

TEST(reader_fast_old_layout_and_counts) {
  /* Timestamp first, as the general path and the old layout write it. */
  tb t;
  tb_init(&t);
  prelude(&t);
  for (int i = 0; i < 50; i++) {
    bb te = {0}, p = {0};
    te_site(&te, i % 3 == 2 ? ETCH_TE_TYPE_SLICE_END : ETCH_TE_TYPE_SLICE_BEGIN,
            1, 1 + i % 2);
    bb_u(&p, ETCH_PKT_TIMESTAMP, 100 + i);
    bb_u(&p, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
    bb_msg(&p, ETCH_PKT_TRACK_EVENT, &te, 4);
    bb_u(&p, ETCH_PKT_TRUSTED_SEQ_ID, i % 2 ? SEQ : SEQ2);
    put_record(&t, &p, 4);
  }
  ASSERT_EQ_U64(same_both_ways(t.data, t.len, "old layout"), 50);
  tb_free(&t);
}

/* All orders of the packet's four fields and of the track event's. */
static void permute(int *a, int n, int k, void (*fn)(const int *, int, void *),
                    void *u) {
  if (k == n) {
    fn(a, n, u);
    return;
  }
  for (int i = k; i < n; i++) {
    int x = a[k];
    a[k] = a[i];
    a[i] = x;
    permute(a, n, k + 1, fn, u);
    a[i] = a[k];
    a[k] = x;
  }
}

typedef struct perm_ctx {
  tb *t;
  int n;
} perm_ctx;

static void packet_order(const int *a, int n, void *u) {
  perm_ctx *c = (perm_ctx *)u;
  bb te = {0}, p = {0};
  te_site(&te, ETCH_TE_TYPE_INSTANT, 2, 1);
  te_arg(&te, 1, ETCH_DA_INT_VALUE, (uint64_t)c->n, 0);
  for (int i = 0; i < n; i++) {
    switch (a[i]) {
      case 0: bb_u(&p, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE); break;
      case 1: bb_msg(&p, ETCH_PKT_TRACK_EVENT, &te, c->n & 1 ? 4 : 0); break;
      case 2: bb_u(&p, ETCH_PKT_TIMESTAMP, 1000 + (uint64_t)c->n); break;
      case 3: bb_u(&p, ETCH_PKT_TRUSTED_SEQ_ID, SEQ); break;
    }
  }
  put_record(c->t, &p, 0);
  c->n++;
}

static void te_order(const int *a, int n, void *u) {
  perm_ctx *c = (perm_ctx *)u;
  bb te = {0}, p = {0};
  for (int i = 0; i < n; i++) {
    switch (a[i]) {
      case 0: bb_u(&te, ETCH_TE_TYPE, ETCH_TE_TYPE_COUNTER); break;
      case 1: bb_u(&te, ETCH_TE_CATEGORY_IIDS, 1); break;
      case 2: bb_u(&te, ETCH_TE_NAME_IID, 4); break;
      case 3: bb_u(&te, ETCH_TE_TRACK_UUID, CTR); break;
      case 4: bb_u(&te, ETCH_TE_COUNTER_VALUE, (uint64_t)c->n); break;
      case 5: te_arg(&te, 3, ETCH_DA_POINTER_VALUE, 0x1000 + (uint64_t)c->n, 0); break;
    }
  }
  pkt_new(&p, &te, 5, c->n & 1 ? SEQ : SEQ2, 0);
  put_record(c->t, &p, 0);
  c->n++;
}

TEST(reader_fast_fields_in_any_order) {
  tb t;
  tb_init(&t);
  prelude(&t);
  perm_ctx c = {&t, 0};
  int a4[] = {0, 1, 2, 3};
  permute(a4, 4, 0, packet_order, &c);
  ASSERT_EQ_INT(c.n, 24);
  int a6[] = {0, 1, 2, 3, 4, 5};
  c.n = 0;
  permute(a6, 6, 0, te_order, &c);
  ASSERT_EQ_INT(c.n, 720);
  ASSERT_EQ_U64(same_both_ways(t.data, t.len, "orders"), 24 + 720);
  tb_free(&t);
}

/* One packet after the prelude and a good fast packet, then another good
 * one: the generic and fast paths must agree on the odd one. Returns the
 * packets the fast path took. */
static uint64_t one_odd_packet(const bb *p, const char *what) {
  tb t;
  tb_init(&t);
  prelude(&t);
  bb te = {0}, good = {0};
  te_site(&te, ETCH_TE_TYPE_SLICE_BEGIN, 1, 1);
  pkt_new(&good, &te, 4, SEQ, 0);
  put_record(&t, &good, 0);
  put_record(&t, p, 0);
  put_record(&t, &good, 0);
  uint64_t n = same_both_ways(t.data, t.len, what);
  tb_free(&t);
  return n;
}

TEST(reader_fast_odd_packets) {
  bb te, p, da;
  /* The packets around the odd one are taken (the second one unless the
   * odd one is an error); the odd one by the fast path or not. */
#define ODD(desc, taken)                                         \
  do {                                                           \
    uint64_t n_ = one_odd_packet(&p, desc);                      \
    if ((taken) ? n_ != 3 : (n_ < 1 || n_ > 2))                  \
      FAIL("%s: %llu packets by the fast path", desc,            \
           (unsigned long long)n_);                              \
  } while (0)
#define RESET() (te = (bb){0}, p = (bb){0}, da = (bb){0})

  /* Fields twice: the last one wins (packet fields, type, name, uuid). */
  RESET();
  te_site(&te, ETCH_TE_TYPE_SLICE_BEGIN, 1, 1);
  bb_u(&te, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  bb_u(&te, ETCH_TE_NAME_IID, 2);
  bb_u(&te, ETCH_TE_TRACK_UUID, THREAD2);
  bb_u(&te, ETCH_TE_TRACK_UUID, THREAD);
  bb_u(&p, ETCH_PKT_TIMESTAMP, 77);
  pkt_new(&p, &te, 5, SEQ2, 0);
  bb_u(&p, ETCH_PKT_TRUSTED_SEQ_ID, SEQ);
  ODD("fields twice", true);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  bb_msg(&p, ETCH_PKT_TRACK_EVENT, &te, 0);
  te = (bb){0};
  te_site(&te, ETCH_TE_TYPE_INSTANT, 2, 2);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("two track events", true);
  RESET();
  bb_u(&te, ETCH_TE_COUNTER_VALUE, 5);
  bb_f64(&te, ETCH_TE_DOUBLE_COUNTER_VALUE, 0x3ff0000000000000ull);
  bb_u(&te, ETCH_TE_COUNTER_VALUE, 6);
  te_site(&te, ETCH_TE_TYPE_COUNTER, 1, 4);
  bb_u(&te, ETCH_TE_TRACK_UUID, CTR_DBL);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("counter values twice", true);
  /* Redundant varints in values (2 bytes for 1). */
  RESET();
  bb_tag(&te, ETCH_TE_TYPE, ETCH_PB_VARINT);
  bb_varint_w(&te, 1, 2);
  bb_tag(&te, ETCH_TE_CATEGORY_IIDS, ETCH_PB_VARINT);
  bb_varint_w(&te, 1, 3);
  bb_tag(&te, ETCH_TE_NAME_IID, ETCH_PB_VARINT);
  bb_varint_w(&te, 2, 10);
  bb_u(&p, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  bb_msg(&p, ETCH_PKT_TRACK_EVENT, &te, 0);
  bb_tag(&p, ETCH_PKT_TIMESTAMP, ETCH_PB_VARINT);
  bb_varint_w(&p, 3, 10);
  bb_tag(&p, ETCH_PKT_TRUSTED_SEQ_ID, ETCH_PB_VARINT);
  bb_varint_w(&p, SEQ, 4);
  ODD("redundant varints", true);
  /* Varints past 10 bytes: malformed. */
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  bb_u(&p, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  bb_msg(&p, ETCH_PKT_TRACK_EVENT, &te, 0);
  bb_tag(&p, ETCH_PKT_TIMESTAMP, ETCH_PB_VARINT);
  bb_varint_w(&p, 3, 11);
  ODD("overlong varint", false);
  RESET();
  bb_tag(&te, ETCH_TE_TYPE, ETCH_PB_VARINT);
  bb_varint_w(&te, 3, 11);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("overlong varint in the event", false);
  /* A length of 6 bytes. */
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  bb_u(&p, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  bb_msg(&p, ETCH_PKT_TRACK_EVENT, &te, 6);
  ODD("six-byte length", false);

  /* Unknown or other fields: the generic decoder takes the packet. */
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  pkt_new(&p, &te, 5, SEQ, 0);
  bb_u(&p, ETCH_PKT_FOR_TESTING, 1);
  ODD("unknown packet field", false);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  pkt_new(&p, &te, 5, SEQ, 0);
  bb_u(&p, ETCH_PKT_TRUSTED_UID, 1);
  ODD("trusted uid", false);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  bb_u(&te, 99, 1);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("unknown event field", false);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  bb_tag(&te, ETCH_TE_TYPE, ETCH_PB_FIXED64);
  bb_raw(&te, "\1\0\0\0\0\0\0\0", 8);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("type with the wrong wire type", false);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  bb_tag(&p, ETCH_PKT_TIMESTAMP, ETCH_PB_LEN);
  bb_varint(&p, 0);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("timestamp with the wrong wire type", false);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 0, 0);
  bb_tag(&te, ETCH_TE_NAME, ETCH_PB_LEN);
  bb_varint(&te, 3);
  bb_raw(&te, "dyn", 3);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("inline name", false);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  bb_u(&te, ETCH_TE_CATEGORY_IIDS, 2);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("two categories", false);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  bb_f64(&te, ETCH_TE_FLOW_IDS, 7);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("flow", false);
  RESET();
  te_site(&te, ETCH_TE_TYPE_UNSPECIFIED, 1, 1);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("type 0", false);
  RESET();
  te_site(&te, 9, 1, 1);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("type 9", false);
  RESET();
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("empty track event", false);
  RESET();
  bb_u(&p, ETCH_PKT_TIMESTAMP, 5);
  bb_u(&p, ETCH_PKT_TRUSTED_SEQ_ID, SEQ);
  ODD("no track event", false);
  RESET();
  ODD("empty packet", false);

  /* Annotations other than {interned name, one scalar}. */
  static const int kinds[] = {0, 1, 2, 3, 4, 5, 6};
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(kinds); i++) {
    RESET();
    switch (kinds[i]) {
      case 0: /* inline name */
        bb_tag(&da, ETCH_DA_NAME, ETCH_PB_LEN);
        bb_varint(&da, 1);
        bb_byte(&da, 'x');
        bb_u(&da, ETCH_DA_INT_VALUE, 1);
        break;
      case 1: /* string value */
        bb_u(&da, ETCH_DA_NAME_IID, 1);
        bb_tag(&da, ETCH_DA_STRING_VALUE, ETCH_PB_LEN);
        bb_varint(&da, 2);
        bb_raw(&da, "hi", 2);
        break;
      case 2: /* two values */
        bb_u(&da, ETCH_DA_NAME_IID, 1);
        bb_u(&da, ETCH_DA_INT_VALUE, 1);
        bb_u(&da, ETCH_DA_UINT_VALUE, 2);
        break;
      case 3: /* no value */
        bb_u(&da, ETCH_DA_NAME_IID, 1);
        break;
      case 4: /* no name */
        bb_u(&da, ETCH_DA_INT_VALUE, 1);
        break;
      case 5: /* name twice */
        bb_u(&da, ETCH_DA_NAME_IID, 1);
        bb_u(&da, ETCH_DA_NAME_IID, 2);
        bb_u(&da, ETCH_DA_INT_VALUE, 1);
        break;
      case 6: /* value first, interned string */
        bb_u(&da, ETCH_DA_STRING_VALUE_IID, 1);
        bb_u(&da, ETCH_DA_NAME_IID, 1);
        break;
    }
    te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
    bb_msg(&te, ETCH_TE_DEBUG_ANNOTATIONS, &da, 0);
    pkt_new(&p, &te, 5, SEQ, 0);
    ODD("annotation", false);
  }
  /* Nine annotations: more than the fast path holds. */
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  for (int i = 0; i < 9; i++) te_arg(&te, 1 + i % 3, ETCH_DA_INT_VALUE, 1, 0);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("nine annotations", false);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  for (int i = 0; i < 8; i++) te_arg(&te, 1 + i % 3, ETCH_DA_INT_VALUE, 1, 0);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("eight annotations", true);

  /* Interned data not defined. */
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 77);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("missing name", false);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 77, 1);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("missing category", false);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  te_arg(&te, 77, ETCH_DA_INT_VALUE, 1, 0);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("missing arg name", false);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  pkt_new(&p, &te, 5, 99, 0);
  ODD("sequence without interned data", false);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  bb_u(&te, ETCH_TE_TRACK_UUID, 31337);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("unknown track", true);

  /* Flags. */
  static const uint64_t flags[] = {0, 1, 3, 4, 6, 1ull << 32 | 2};
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(flags); i++) {
    RESET();
    te_site(&te, ETCH_TE_TYPE_INSTANT, 0, 0);
    bb_u(&p, ETCH_PKT_SEQUENCE_FLAGS, flags[i]);
    bb_msg(&p, ETCH_PKT_TRACK_EVENT, &te, 0);
    bb_u(&p, ETCH_PKT_TIMESTAMP, 5);
    bb_u(&p, ETCH_PKT_TRUSTED_SEQ_ID, SEQ);
    ODD("flags", flags[i] == 0 || flags[i] == (1ull << 32 | 2));
  }
  /* No sequence id, no timestamp, timestamp on the trace clock. */
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 0, 0);
  bb_u(&p, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  bb_msg(&p, ETCH_PKT_TRACK_EVENT, &te, 0);
  bb_u(&p, ETCH_PKT_TIMESTAMP, 5);
  ODD("no sequence id", false);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 0, 0);
  bb_msg(&p, ETCH_PKT_TRACK_EVENT, &te, 0);
  bb_u(&p, ETCH_PKT_TIMESTAMP, 5000);
  ODD("sequence 0, no flags", true);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  bb_u(&p, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  bb_msg(&p, ETCH_PKT_TRACK_EVENT, &te, 0);
  bb_u(&p, ETCH_PKT_TRUSTED_SEQ_ID, SEQ);
  ODD("no timestamp", true);
  RESET();
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  bb_u(&p, ETCH_PKT_TIMESTAMP, 5);
  bb_u(&p, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  pkt_new(&p, &te, 5, SEQ, 0);
  ODD("clock id", false);
#undef ODD
#undef RESET
}

/* A sequence whose state was lost, a clock that cannot be converted, a
 * reset that redefines interned names (the cached arg keys must follow). */
TEST(reader_fast_state_changes) {
  tb t;
  tb_init(&t);
  prelude(&t);
  fast_events(&t, SEQ, 0);
  /* Loss: the sequence's packets are skipped until it is cleared again. */
  tb_begin(&t);
  tb_u(&t, ETCH_PKT_PREVIOUS_PACKET_DROPPED, 1);
  tb_u(&t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ);
  tb_end(&t);
  fast_events(&t, SEQ, 0);
  fast_events(&t, SEQ2, 0);
  /* Cleared, with other names for the same iids and no clock snapshot:
   * its clock 64 is gone (clock_conversion_failed). */
  tb_begin(&t);
  tb_u(&t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_INCREMENTAL_STATE_CLEARED);
  tb_open(&t, ETCH_PKT_TRACE_PACKET_DEFAULTS);
  tb_u(&t, ETCH_DEFAULTS_TIMESTAMP_CLOCK_ID, 65);
  tb_close(&t);
  tb_open(&t, ETCH_PKT_INTERNED_DATA);
  tb_interned(&t, ETCH_ID_EVENT_CATEGORIES, 1, "net");
  tb_interned(&t, ETCH_ID_EVENT_NAMES, 1, "send");
  tb_interned(&t, ETCH_ID_DEBUG_ANNOTATION_NAMES, 1, "bytes");
  tb_close(&t);
  tb_u(&t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ);
  tb_end(&t);
  bb te = {0}, p = {0};
  te_site(&te, ETCH_TE_TYPE_INSTANT, 1, 1);
  te_arg(&te, 1, ETCH_DA_INT_VALUE, 4, 0);
  pkt_new(&p, &te, 5, SEQ, 0);
  put_record(&t, &p, 0);
  /* Clock 64 again, and the arg name redefined without a reset. */
  tb_etch_seq_start(&t, SEQ, 9000, THREAD, true);
  tb_begin(&t);
  tb_u(&t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(&t, ETCH_PKT_INTERNED_DATA);
  tb_interned(&t, ETCH_ID_EVENT_CATEGORIES, 1, "net");
  tb_interned(&t, ETCH_ID_EVENT_NAMES, 1, "send");
  tb_interned(&t, ETCH_ID_DEBUG_ANNOTATION_NAMES, 1, "bytes");
  tb_close(&t);
  tb_u(&t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ);
  tb_end(&t);
  put_record(&t, &p, 0);
  tb_begin(&t);
  tb_u(&t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(&t, ETCH_PKT_INTERNED_DATA);
  tb_interned(&t, ETCH_ID_DEBUG_ANNOTATION_NAMES, 1, "packets");
  tb_close(&t);
  tb_u(&t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ);
  tb_end(&t);
  put_record(&t, &p, 0);
  uint64_t n = same_both_ways(t.data, t.len, "state changes");
  ASSERT_TRUE(n > 0);
  res f;
  read_one(t.data, t.len, ETCH_ORDER_FILE, true, 0, &f);
  ASSERT_TRUE(f.stats.packet_skipped_seq_needs_incremental_state_invalid > 0);
  ASSERT_EQ_U64(f.stats.clock_conversion_failed, 1);
  ASSERT_TRUE(strstr(f.events, "[debug.bytes|debug.bytes|2|4]") != NULL);
  ASSERT_TRUE(strstr(f.events, "[debug.packets|debug.packets|2|4]") != NULL);
  ASSERT_EQ_U64(f.stats.etch_dropped_events, 84);
  res_free(&f);
  tb_free(&t);
}

/* Dense iids past the direct array's first size, then sparse ones. */
TEST(reader_fast_many_iids) {
  tb t;
  tb_init(&t);
  prelude(&t);
  tb_begin(&t);
  tb_u(&t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(&t, ETCH_PKT_INTERNED_DATA);
  for (uint64_t i = 1; i <= 3000; i++) {
    char name[32];
    snprintf(name, sizeof name, "n%llu", (unsigned long long)i);
    uint64_t iid = i <= 2000 ? i : i * 1000;
    tb_interned(&t, ETCH_ID_EVENT_NAMES, iid, name);
    tb_interned(&t, ETCH_ID_DEBUG_ANNOTATION_NAMES, iid, name);
  }
  tb_close(&t);
  tb_u(&t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ2);
  tb_end(&t);
  for (uint64_t i = 1; i <= 3000; i += 7) {
    uint64_t iid = i <= 2000 ? i : i * 1000;
    bb te = {0}, p = {0};
    te_site(&te, ETCH_TE_TYPE_INSTANT, 1, iid);
    te_arg(&te, iid, ETCH_DA_INT_VALUE, i, 0);
    pkt_new(&p, &te, 1, SEQ2, 0);
    put_record(&t, &p, 0);
  }
  ASSERT_EQ_U64(same_both_ways(t.data, t.len, "many iids"), (3000 + 6) / 7);
  tb_free(&t);
}

/* A small trace whose last packets are fast-path packets, for cutting. */
static void small_trace(tb *t, size_t *fast_start) {
  tb_init(t);
  tb_etch_seq_start(t, SEQ, 1000, THREAD, false);
  tb_thread_track(t, SEQ, 1000, THREAD, 0, 42, 43, "main");
  counter_track(t, CTR, "queue", 3, false);
  interning(t, SEQ, 5);
  *fast_start = t->len;
  bb te = {0}, p = {0};
  te_site(&te, ETCH_TE_TYPE_SLICE_BEGIN, 1, 1);
  te_arg(&te, 1, ETCH_DA_INT_VALUE, 300, 0);
  te_arg(&te, 2, ETCH_DA_DOUBLE_VALUE, 0x4000000000000000ull, 0);
  pkt_new(&p, &te, 200, SEQ, 0);
  put_record(t, &p, 0);
  te = (bb){0};
  p = (bb){0};
  te_site(&te, ETCH_TE_TYPE_COUNTER, 1, 4);
  bb_u(&te, ETCH_TE_TRACK_UUID, CTR);
  bb_u(&te, ETCH_TE_COUNTER_VALUE, 1ull << 40);
  bb_u(&p, ETCH_PKT_TIMESTAMP, 3);
  bb_u(&p, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  bb_msg(&p, ETCH_PKT_TRACK_EVENT, &te, 4);
  bb_u(&p, ETCH_PKT_TRUSTED_SEQ_ID, SEQ);
  put_record(t, &p, 4);
  te = (bb){0};
  p = (bb){0};
  te_site(&te, ETCH_TE_TYPE_SLICE_END, 0, 0);
  pkt_new(&p, &te, 1, SEQ, 0);
  put_record(t, &p, 0);
}

TEST(reader_fast_file_cut_everywhere) {
  tb t;
  size_t start;
  small_trace(&t, &start);
  ASSERT_EQ_U64(same_both_ways(t.data, t.len, "whole"), 3);
  for (size_t cut = start; cut < t.len; cut++) {
    char what[64];
    snprintf(what, sizeof what, "file cut at %zu", cut);
    same_both_ways(t.data, cut, what);
  }
  tb_free(&t);
}

/* Each fast-path packet of the small trace with its own length shortened
 * to every value below the real one (the packet ends early, inside any of
 * its fields), then with its track event's length shortened the same way
 * (the event ends early, inside an annotation). */
TEST(reader_fast_packet_cut_everywhere) {
  tb t;
  size_t start;
  small_trace(&t, &start);
  const uint8_t *d = t.data;
  size_t at = start;
  int packets = 0;
  while (at < t.len) {
    /* The record: 0A <len> <packet>. */
    const uint8_t *q = d + at + 1, *end = d + t.len;
    uint64_t plen;
    ASSERT_TRUE(etch__pb_read_varint(&q, end, &plen));
    const uint8_t *pkt = q;
    size_t next = (size_t)(pkt - d) + plen;
    for (uint64_t cut = 0; cut < plen; cut++) {
      tb u;
      tb_init(&u);
      tb_raw(&u, d, at);
      bb rec = {0};
      bb_byte(&rec, 0x0A);
      bb_varint(&rec, cut);
      bb_raw(&rec, pkt, cut);
      tb_raw(&u, rec.b, rec.n);
      tb_raw(&u, d + next, t.len - next); /* the packets after it */
      char what[64];
      snprintf(what, sizeof what, "packet %d cut at %llu", packets,
               (unsigned long long)cut);
      same_both_ways(u.data, u.len, what);
      tb_free(&u);
    }
    /* The track event inside it, shortened: find 5A <len>. */
    etch__pb_dec dec;
    etch__pb_field f;
    etch__pb_dec_init(&dec, pkt, plen);
    while (etch__pb_next(&dec, &f)) {
      if (f.id != ETCH_PKT_TRACK_EVENT) continue;
      for (size_t cut = 0; cut < f.len; cut++) {
        bb np = {0};
        bb_raw(&np, pkt, f.off);
        bb te = {0};
        bb_raw(&te, f.data, cut);
        bb_msg(&np, ETCH_PKT_TRACK_EVENT, &te, 0);
        size_t after = (size_t)(f.data + f.len - pkt);
        bb_raw(&np, pkt + after, plen - after);
        tb u;
        tb_init(&u);
        tb_raw(&u, d, at);
        put_record(&u, &np, 0);
        tb_raw(&u, d + next, t.len - next);
        char what[64];
        snprintf(what, sizeof what, "event of packet %d cut at %zu", packets,
                 cut);
        same_both_ways(u.data, u.len, what);
        tb_free(&u);
      }
    }
    ASSERT_EQ_INT(dec.err, 0);
    at = next;
    packets++;
  }
  ASSERT_EQ_INT(packets, 3);
  tb_free(&t);
}

/* Random changes of one to three bytes of the fast-path packets. */
TEST(reader_fast_random_bytes) {
  tb t;
  size_t start;
  small_trace(&t, &start);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  uint8_t *copy = malloc(t.len);
  static const uint8_t interesting[] = {0x00, 0x01, 0x02, 0x08, 0x10, 0x18,
                                        0x22, 0x29, 0x40, 0x48, 0x50, 0x58,
                                        0x5A, 0x68, 0x7f, 0x80, 0xE1, 0xF0,
                                        0xff};
  for (int iter = 0; iter < 3000; iter++) {
    memcpy(copy, t.data, t.len);
    int n = 1 + iter % 3;
    for (int k = 0; k < n; k++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      size_t pos = start + (size_t)(x % (t.len - start));
      copy[pos] = (x >> 32) & 1 ? interesting[(x >> 40) % sizeof interesting]
                                : (uint8_t)(x >> 48);
    }
    char what[64];
    snprintf(what, sizeof what, "random bytes, iteration %d", iter);
    same_both_ways(copy, t.len, what);
  }
  free(copy);
  tb_free(&t);
}

/* The fast path inside compressed packets, and stopping from a callback. */
TEST(reader_fast_compressed_and_stop) {
  tb inner;
  tb_init(&inner);
  fast_events(&inner, SEQ, 0);
  fast_events(&inner, SEQ2, 4);
  tb t;
  tb_init(&t);
  prelude(&t);
  tb_compressed(&t, inner.data, inner.len, false, false);
  tb_compressed(&t, inner.data, inner.len, true, false);
  fast_events(&t, SEQ, 0);
  ASSERT_EQ_U64(same_both_ways(t.data, t.len, "compressed"), 2 * 48 + 24);
  for (uint64_t stop = 1; stop < 80; stop += 3) {
    res f, g;
    read_one(t.data, t.len, ETCH_ORDER_FILE, true, stop, &f);
    read_one(t.data, t.len, ETCH_ORDER_FILE, false, stop, &g);
    expect_same(&f, &g, "stop");
    res_free(&f);
    res_free(&g);
  }
  tb_free(&inner);
  tb_free(&t);
}

/* The corpus sample of libetch's current layout: read exactly (times are
 * the sequence start, 1000, plus the deltas 3, then 25, 300, 20000, 90 per
 * round, then 5), and every event after the interning packet goes through
 * the fast path. */
TEST(reader_fast_corpus_sample) {
  int which = -1;
  for (int i = 0; i < tb_sample_count(); i++)
    if (strcmp(tb_sample_name(i), "fast") == 0) which = i;
  ASSERT_TRUE(which >= 0);
  tb t;
  tb_init(&t);
  tb_sample(&t, which);
  ASSERT_EQ_U64(same_both_ways(t.data, t.len, "fast sample"), 13);
  tb_out o;
  ASSERT_EQ_INT(tb_read(t.data, t.len, ETCH_ORDER_FILE, &o), 0);
  const char *want =
      "B 1003 seq=2 track=1001 pid=42 tid=43 cat=render name=frame\n"
      "B 1028 seq=2 track=1001 pid=42 tid=43 cat=render name=draw\n"
      "I 1328 seq=2 track=1001 pid=42 tid=43 cat=render name=mark "
      "debug.v=i:-7\n"
      "C 21328 seq=2 track=2100 pid=42 tid=0 cat=render name=depth value=-1\n"
      "E 21418 seq=2 track=1001 pid=42 tid=43\n"
      "B 21443 seq=2 track=1001 pid=42 tid=43 cat=render name=draw\n"
      "I 21743 seq=2 track=1001 pid=42 tid=43 cat=render name=mark "
      "debug.v=i:993\n"
      "C 41743 seq=2 track=2100 pid=42 tid=0 cat=render name=depth value=0\n"
      "E 41833 seq=2 track=1001 pid=42 tid=43\n"
      "B 41858 seq=2 track=1001 pid=42 tid=43 cat=render name=draw\n"
      "I 42158 seq=2 track=1001 pid=42 tid=43 cat=render name=mark "
      "debug.v=i:1993\n"
      "C 62158 seq=2 track=2100 pid=42 tid=0 cat=render name=depth value=1\n"
      "E 62248 seq=2 track=1001 pid=42 tid=43\n"
      "E 62253 seq=2 track=1001 pid=42 tid=43\n";
  ASSERT_EQ_STR(o.events, want);
  tb_out_free(&o);
  tb_free(&t);
}

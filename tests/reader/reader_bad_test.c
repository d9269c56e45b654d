/*
 * reader_bad_test.c - bad input: truncated and corrupted traces, random
 * bytes, huge lengths, deep nesting, decompression bombs. The reader must
 * return an error naming a byte offset, or succeed; never crash, hang or
 * grow without bound (the suite also runs under ASan/UBSan).
 */
#define _GNU_SOURCE
#include <etch/reader.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "pb/pb.h"
#include "proto/perfetto.h"
#include "reader/dump.h"
#include "reader/tbuild.h"
#include "test.h"

static void nop_event(const etch_event *ev, void *user) {
  /* Touch everything handed out, so ASan sees bad pointers. */
  size_t *n = (size_t *)user;
  *n += strlen(ev->name) + strlen(ev->category) + strlen(ev->track->name);
  for (size_t i = 0; i < ev->args_count; i++) {
    *n += strlen(ev->args[i].key) + strlen(ev->args[i].flat_key);
    if (ev->args[i].type == ETCH_VALUE_STRING ||
        ev->args[i].type == ETCH_VALUE_JSON)
      *n += strlen(ev->args[i].v.s);
  }
  for (size_t i = 0; i < ev->flow_ids_count; i++) *n += ev->flow_ids[i] & 1;
}

/* Runs the reader (both orders) and the dump; returns the TIMESTAMP-order
 * status. Errors must name an offset. */
static int run_all(const uint8_t *data, size_t len) {
  int first_rc = 0;
  /* Strict in both orders (the status returned is the first's), then
   * leaving malformed packets out. */
  for (int order = 0; order < 3; order++) {
    etch_reader *r;
    size_t n = 0;
    if (etch_reader_open_memory(&r, data, len)) FAIL("open");
    etch_reader_set_order(r, (etch_reader_order)(order & 1));
    if (order < 2) etch_reader_set_strict(r, 1);
    etch_reader_on(r, NULL, NULL, nop_event, &n);
    int rc = etch_reader_run(r);
    if (rc && !strstr(etch_last_error(), "offset "))
      FAIL("error without an offset: %s", etch_last_error());
    if (order == 0) first_rc = rc;
    etch_reader_close(r);
  }
  FILE *f = fopen("/dev/null", "w");
  etch__reader_dump(data, len, f);
  fclose(f);
  return first_rc;
}

TEST(reader_bad_truncated_everywhere) {
  for (int s = 0; s < tb_sample_count(); s++) {
    tb t;
    tb_init(&t);
    tb_sample(&t, s);
    ASSERT_OK(run_all(t.data, t.len));
    size_t errors = 0;
    for (size_t cut = 0; cut < t.len; cut++) {
      /* A copy of exactly `cut` bytes, so ASan catches any overread. */
      uint8_t *copy = malloc(cut ? cut : 1);
      memcpy(copy, t.data, cut);
      if (run_all(copy, cut)) errors++;
      free(copy);
    }
    /* Most cuts fall inside a packet. */
    ASSERT_TRUE(errors > t.len / 2);
    tb_free(&t);
  }
}

/* With etch_reader_set_allow_truncated, every cut of a sample reads the
 * packets before the cut, and the stats say where the cut is: the offset
 * of the last whole packet's end and the bytes after it. Without, the same
 * cuts fail with ETCH_ETRUNC. */
static void count_event(const etch_event *ev, void *user) {
  (void)ev;
  ++*(size_t *)user;
}

TEST(reader_allow_truncated_reads_the_prefix) {
  tb t;
  tb_init(&t);
  tb_sample(&t, 0);
  /* Packet boundaries: walk the top-level records. */
  size_t bounds[4096], nb = 0, off = 0;
  while (off < t.len && nb < 4096) {
    const uint8_t *p = t.data + off + 1, *end = t.data + t.len;
    uint64_t plen;
    ASSERT_TRUE(etch__pb_read_varint(&p, end, &plen));
    off = (size_t)(p - t.data) + (size_t)plen;
    bounds[nb++] = off;
  }
  size_t whole_events = 0;
  {
    etch_reader *r;
    ASSERT_OK(etch_reader_open_memory(&r, t.data, t.len));
    etch_reader_on(r, NULL, NULL, count_event, &whole_events);
    ASSERT_OK(etch_reader_run(r));
    etch_reader_close(r);
  }
  for (size_t cut = 1; cut < t.len; cut++) {
    size_t last = 0; /* the end of the last whole packet before the cut */
    for (size_t i = 0; i < nb && bounds[i] <= cut; i++) last = bounds[i];
    for (int allow = 0; allow <= 1; allow++) {
      etch_reader *r;
      size_t n = 0;
      ASSERT_OK(etch_reader_open_memory(&r, t.data, cut));
      ASSERT_OK(etch_reader_set_allow_truncated(r, allow));
      etch_reader_on(r, NULL, NULL, count_event, &n);
      int rc = etch_reader_run(r);
      etch_reader_stats st;
      etch_reader_get_stats(r, &st);
      if (last == cut) { /* a cut between packets: a complete trace */
        ASSERT_OK(rc);
        ASSERT_EQ_U64(st.truncated_bytes, 0);
      } else if (allow) {
        ASSERT_OK(rc);
        ASSERT_EQ_U64(st.truncated_offset, last);
        ASSERT_EQ_U64(st.truncated_bytes, cut - last);
        ASSERT_TRUE(n <= whole_events);
      } else {
        ASSERT_EQ_INT(rc, ETCH_ETRUNC);
      }
      etch_reader_close(r);
    }
  }
  tb_free(&t);
}

TEST(reader_bad_corrupted_bytes) {
  static const uint8_t patterns[] = {0x00, 0xff, 0x80, 0x01};
  for (int s = 0; s < tb_sample_count(); s++) {
    tb t;
    tb_init(&t);
    tb_sample(&t, s);
    uint8_t *copy = malloc(t.len);
    for (size_t i = 0; i < t.len; i++) {
      for (size_t p = 0; p < sizeof patterns; p++) {
        memcpy(copy, t.data, t.len);
        copy[i] = patterns[p];
        run_all(copy, t.len);
        copy[i] = (uint8_t)(t.data[i] ^ patterns[p]);
        run_all(copy, t.len);
      }
    }
    free(copy);
    tb_free(&t);
  }
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

TEST(reader_bad_random_bytes) {
  uint8_t buf[2048];
  size_t errors = 0;
  for (int i = 0; i < 3000; i++) {
    size_t len = 1 + next_rand() % sizeof buf;
    for (size_t j = 0; j < len; j++) buf[j] = (uint8_t)next_rand();
    if (i & 1) buf[0] = 0x0A; /* looks like a packet record */
    uint8_t *copy = malloc(len);
    memcpy(copy, buf, len);
    if (run_all(copy, len)) errors++;
    free(copy);
  }
  ASSERT_TRUE(errors > 2900);
}

TEST(reader_bad_not_a_trace) {
  static const char json[] = "{\"traceEvents\": []}";
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, json, sizeof json - 1));
  ASSERT_EQ_INT(etch_reader_run(r), ETCH_EFORMAT);
  ASSERT_EQ_STR(etch_last_error(),
                "offset 0: not a Perfetto protobuf trace: field 15 with wire "
                "type 3 where a packet (field 1) was expected");
  etch_reader_close(r);
}

TEST(reader_bad_huge_length) {
  uint8_t buf[16] = {0x0A};
  size_t n = 1 + (size_t)(etch__pb_put_varint(buf + 1, 1ull << 40) - (buf + 1));
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, buf, n));
  ASSERT_OK(etch_reader_set_strict(r, 1));
  ASSERT_EQ_INT(etch_reader_run(r), ETCH_ETRUNC);
  ASSERT_EQ_STR(etch_last_error(),
                "offset 0: packet length 1099511627776 larger than the 0 "
                "bytes left in the file");
  etch_reader_close(r);

  /* A length inside a packet, past the packet's end. */
  tb t;
  tb_init(&t);
  tb_sample(&t, 0);
  size_t good = t.len;
  tb_begin(&t);
  tb_u(&t, ETCH_PKT_TIMESTAMP, 1);
  tb_varint(&t, etch__pb_tag(ETCH_PKT_TRACK_EVENT, ETCH_PB_LEN));
  tb_varint(&t, 1000);
  tb_u(&t, ETCH_TE_TYPE, 3);
  tb_end(&t);
  ASSERT_OK(etch_reader_open_memory(&r, t.data, t.len));
  ASSERT_OK(etch_reader_set_strict(r, 1));
  ASSERT_EQ_INT(etch_reader_run(r), ETCH_ETRUNC);
  char want[128];
  /* record tag + length byte + timestamp field (2 bytes) */
  snprintf(want, sizeof want,
           "offset %zu: length field larger than the remaining data",
           good + 2 + 2);
  ASSERT_EQ_STR(etch_last_error(), want);
  /* Events before the error were delivered. */
  etch_reader_stats st;
  etch_reader_get_stats(r, &st);
  ASSERT_EQ_U64(st.track_events, 6);
  etch_reader_close(r);
  tb_free(&t);
}

TEST(reader_bad_wire_type) {
  tb t;
  tb_init(&t);
  tb_begin(&t);
  tb_u(&t, ETCH_PKT_TRACK_EVENT, 5);
  tb_end(&t);
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, t.data, t.len));
  ASSERT_OK(etch_reader_set_strict(r, 1));
  ASSERT_EQ_INT(etch_reader_run(r), ETCH_EFORMAT);
  ASSERT_EQ_STR(etch_last_error(),
                "offset 2: TracePacket.track_event (field 11) has wire type "
                "varint");
  etch_reader_close(r);
  tb_free(&t);
}

/* 1000 levels of dicts, arrays and legacy nested values. */
TEST(reader_bad_deep_nesting) {
  for (int kind = 0; kind < 3; kind++) {
    tb t;
    tb_init(&t);
    tb_begin(&t);
    tb_open(&t, ETCH_PKT_TRACK_EVENT);
    tb_u(&t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
    tb_open(&t, ETCH_TE_DEBUG_ANNOTATIONS);
    tb_s(&t, ETCH_DA_NAME, "a");
    if (kind == 2) tb_open(&t, ETCH_DA_NESTED_VALUE);
    for (int i = 0; i < 1000; i++) {
      if (kind == 0) {
        tb_open(&t, ETCH_DA_DICT_ENTRIES);
        tb_s(&t, ETCH_DA_NAME, "b");
      } else if (kind == 1) {
        tb_open(&t, ETCH_DA_ARRAY_VALUES);
      } else {
        tb_u(&t, 1, 2); /* ARRAY */
        tb_open(&t, 4);
      }
    }
    tb_u(&t, kind == 2 ? 5 : ETCH_DA_INT_VALUE, 1);
    for (int i = 0; i < 1000; i++) tb_close(&t);
    if (kind == 2) tb_close(&t);
    tb_close(&t);
    tb_close(&t);
    tb_end(&t);
    etch_reader *r;
    ASSERT_OK(etch_reader_open_memory(&r, t.data, t.len));
    ASSERT_OK(etch_reader_set_strict(r, 1));
    int rc = etch_reader_run(r);
    /* Dicts of "b" hit the key length limit or the depth limit first. */
    ASSERT_EQ_INT(rc, ETCH_ELIMIT);
    ASSERT_TRUE(strncmp(etch_last_error(), "offset ", 7) == 0);
    ASSERT_TRUE(strstr(etch_last_error(), "nested deeper than 64") ||
                strstr(etch_last_error(), "key longer than"));
    etch_reader_close(r);
    ASSERT_EQ_INT(run_all(t.data, t.len), ETCH_ELIMIT);
    tb_free(&t);
  }
}

/* 256 MiB of zeros, compressed: the reader stops at its 64 MiB limit. */
TEST(reader_bad_decompression_bomb) {
  for (int zstd = 0; zstd < 2; zstd++) {
    size_t cap = 2 << 20, n = 0;
    uint8_t *comp = malloc(cap);
    uint8_t *zeros = calloc(1, 1 << 20);
    if (zstd) {
      ZSTD_CCtx *c = ZSTD_createCCtx();
      ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3);
      ZSTD_outBuffer out = {comp, cap, 0};
      for (int i = 0; i < 256; i++) {
        ZSTD_inBuffer in = {zeros, 1 << 20, 0};
        while (in.pos < in.size)
          ZSTD_compressStream2(c, &out, &in, ZSTD_e_continue);
      }
      ZSTD_inBuffer in = {zeros, 0, 0};
      while (ZSTD_compressStream2(c, &out, &in, ZSTD_e_end) != 0) {
      }
      n = out.pos;
      ZSTD_freeCCtx(c);
    } else {
      z_stream zs;
      memset(&zs, 0, sizeof zs);
      deflateInit(&zs, 6);
      zs.next_out = comp;
      zs.avail_out = (uInt)cap;
      for (int i = 0; i < 256; i++) {
        zs.next_in = zeros;
        zs.avail_in = 1 << 20;
        deflate(&zs, i == 255 ? Z_FINISH : Z_NO_FLUSH);
      }
      n = zs.total_out;
      deflateEnd(&zs);
    }
    tb t;
    tb_init(&t);
    tb_begin(&t);
    tb_b(&t,
         zstd ? ETCH_PKT_ZSTD_COMPRESSED_PACKETS : ETCH_PKT_COMPRESSED_PACKETS,
         comp, n);
    tb_end(&t);
    etch_reader *r;
    ASSERT_OK(etch_reader_open_memory(&r, t.data, t.len));
    ASSERT_OK(etch_reader_set_strict(r, 1));
    ASSERT_EQ_INT(etch_reader_run(r), ETCH_ELIMIT);
    /* The offset is the compressed_packets field's, inside packet 0. */
    char want[128];
    snprintf(want, sizeof want,
             "offset %d: compressed packets expand to more than 64 MiB",
             1 + (int)etch__pb_varint_size(t.len - 1 - etch__pb_varint_size(t.len)));
    ASSERT_EQ_STR(etch_last_error(), want);
    etch_reader_close(r);
    free(comp);
    free(zeros);
    tb_free(&t);
  }
}

TEST(reader_bad_compressed_nesting_and_garbage) {
  /* compressed(compressed(compressed(packet))): deeper than 2 levels. */
  tb t;
  tb_init(&t);
  tb_sample(&t, 0);
  for (int i = 0; i < 3; i++) {
    tb w;
    tb_init(&w);
    tb_compressed(&w, t.data, t.len, i == 1, false);
    tb_free(&t);
    t = w;
  }
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, t.data, t.len));
  ASSERT_OK(etch_reader_set_strict(r, 1));
  ASSERT_EQ_INT(etch_reader_run(r), ETCH_ELIMIT);
  ASSERT_TRUE(strstr(etch_last_error(), "in compressed packets") != NULL);
  etch_reader_close(r);
  tb_free(&t);

  /* Garbage that is not deflate data. */
  tb_init(&t);
  tb_begin(&t);
  tb_s(&t, ETCH_PKT_COMPRESSED_PACKETS, "not deflate");
  tb_end(&t);
  ASSERT_OK(etch_reader_open_memory(&r, t.data, t.len));
  ASSERT_OK(etch_reader_set_strict(r, 1));
  ASSERT_EQ_INT(etch_reader_run(r), ETCH_EFORMAT);
  ASSERT_TRUE(strncmp(etch_last_error(), "offset 2: compressed packets: corrupt",
                      37) == 0);
  etch_reader_close(r);
  tb_free(&t);

  /* A valid deflate stream holding a truncated record: the offset points
   * into the decompressed data. */
  tb inner;
  tb_init(&inner);
  tb_sample(&inner, 0);
  tb_init(&t);
  tb_compressed(&t, inner.data, inner.len - 1, false, false);
  ASSERT_OK(etch_reader_open_memory(&r, t.data, t.len));
  ASSERT_OK(etch_reader_set_strict(r, 1));
  ASSERT_EQ_INT(etch_reader_run(r), ETCH_ETRUNC);
  ASSERT_TRUE(strncmp(etch_last_error(), "offset 3: in compressed packets: "
                                         "decompressed offset ", 52) == 0);
  etch_reader_close(r);
  tb_free(&t);
  tb_free(&inner);
}

/* Extreme clock values wrap without undefined behaviour (UBSan). */
TEST(reader_bad_extreme_values) {
  tb t;
  tb_init(&t);
  tb_begin(&t);
  tb_u(&t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_INCREMENTAL_STATE_CLEARED);
  tb_open(&t, ETCH_PKT_CLOCK_SNAPSHOT);
  tb_open(&t, ETCH_CLOCKSNAP_CLOCKS);
  tb_u(&t, ETCH_SNAPCLOCK_CLOCK_ID, 64);
  tb_u(&t, ETCH_SNAPCLOCK_TIMESTAMP, UINT64_MAX - 1);
  tb_u(&t, ETCH_SNAPCLOCK_IS_INCREMENTAL, 1);
  tb_u(&t, ETCH_SNAPCLOCK_UNIT_MULTIPLIER_NS, UINT64_MAX);
  tb_close(&t);
  tb_open(&t, ETCH_CLOCKSNAP_CLOCKS);
  tb_u(&t, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  tb_u(&t, ETCH_SNAPCLOCK_TIMESTAMP, UINT64_MAX);
  tb_close(&t);
  tb_close(&t);
  tb_u(&t, ETCH_PKT_TRUSTED_SEQ_ID, 4);
  tb_end(&t);
  for (int i = 0; i < 3; i++) {
    tb_begin(&t);
    tb_u(&t, ETCH_PKT_TIMESTAMP, UINT64_MAX);
    tb_u(&t, ETCH_PKT_TIMESTAMP_CLOCK_ID, 64);
    tb_open(&t, ETCH_PKT_TRACK_DESCRIPTOR);
    tb_u(&t, ETCH_TD_UUID, 5);
    tb_open(&t, ETCH_TD_COUNTER);
    tb_u(&t, ETCH_CD_UNIT_MULTIPLIER, INT64_MAX);
    tb_u(&t, ETCH_CD_IS_INCREMENTAL, 1);
    tb_close(&t);
    tb_close(&t);
    tb_open(&t, ETCH_PKT_TRACK_EVENT);
    tb_u(&t, ETCH_TE_TYPE, ETCH_TE_TYPE_COUNTER);
    tb_u(&t, ETCH_TE_TRACK_UUID, 5);
    tb_i(&t, ETCH_TE_COUNTER_VALUE, INT64_MIN);
    tb_close(&t);
    tb_u(&t, ETCH_PKT_TRUSTED_SEQ_ID, 4);
    tb_end(&t);
  }
  ASSERT_OK(run_all(t.data, t.len));
  tb_free(&t);
}

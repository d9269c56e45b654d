/*
 * pb_test.c - the protobuf wire format of src/pb: exact bytes of every
 * encoding, nested messages with patched 4-byte lengths (also across
 * segments of a custom stream), and the decoder on valid and malformed input
 * with exact error codes and offsets.
 */
#include "pb/pb.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

/* ---- helpers ---------------------------------------------------------------- */

#define BYTES(...) ((const uint8_t[]){__VA_ARGS__}), \
                   sizeof((const uint8_t[]){__VA_ARGS__})

static void hexdump(char *out, size_t cap, const uint8_t *p, size_t n) {
  size_t o = 0;
  out[0] = '\0';
  for (size_t i = 0; i < n && o + 4 < cap; i++)
    o += (size_t)snprintf(out + o, cap - o, "%02x ", p[i]);
}

static void expect_bytes_at(const char *file, int line, const uint8_t *got,
                            size_t got_len, const uint8_t *want,
                            size_t want_len) {
  if (got_len == want_len && (want_len == 0 || memcmp(got, want, want_len) == 0))
    return;
  char g[512], w[512];
  hexdump(g, sizeof g, got, got_len);
  hexdump(w, sizeof w, want, want_len);
  etch_test_fail(file, line, "bytes differ:\n  got  (%zu): %s\n  want (%zu): %s",
                 got_len, g, want_len, w);
}
#define EXPECT_BYTES(got, got_len, ...) \
  expect_bytes_at(__FILE__, __LINE__, got, got_len, BYTES(__VA_ARGS__))

/* Checks that a heap buffer holds exactly the given bytes. */
#define EXPECT_BUF(b, ...) \
  EXPECT_BYTES(etch__pb_buf_data(b), etch__pb_buf_len(b), __VA_ARGS__)

/* Decodes one whole varint from a byte string; fails the test if invalid. */
static uint64_t decode_varint_all(const uint8_t *p, size_t n) {
  const uint8_t *q = p;
  uint64_t v = 0;
  if (!etch__pb_read_varint(&q, p + n, &v)) FAIL("varint did not decode");
  if ((size_t)(q - p) != n) FAIL("varint used %zu of %zu bytes", (size_t)(q - p), n);
  return v;
}

/* Decodes a whole message: `nfields` top-level fields and no error; with
 * `depth` > 0, LEN fields whose payload starts like a message are decoded
 * the same way (nested messages). Returns the number of fields seen at all
 * levels. */
static size_t decode_all(const uint8_t *data, size_t n, int depth) {
  etch__pb_dec d;
  etch__pb_field f;
  size_t count = 0;
  etch__pb_dec_init(&d, data, n);
  while (etch__pb_next(&d, &f)) {
    count++;
    if (f.wt == ETCH_PB_LEN && depth > 0 && f.len > 0) {
      etch__pb_dec probe;
      etch__pb_field g;
      etch__pb_dec_init(&probe, f.data, f.len);
      while (etch__pb_next(&probe, &g)) {
      }
      if (probe.err == 0) count += decode_all(f.data, f.len, depth - 1);
    }
  }
  if (d.err) FAIL("decode error %d at %zu: %s", d.err, d.err_off, d.err_msg);
  return count;
}
#define EXPECT_DECODES(b, depth, nfields) \
  ASSERT_EQ_U64(decode_all(etch__pb_buf_data(b), etch__pb_buf_len(b), depth), nfields)

/* ---- varints ------------------------------------------------------------------ */

static void check_varint(uint64_t v, const uint8_t *want, size_t want_len) {
  uint8_t buf[16];
  memset(buf, 0xee, sizeof buf);
  uint8_t *end = etch__pb_put_varint(buf, v);
  expect_bytes_at(__FILE__, __LINE__, buf, (size_t)(end - buf), want, want_len);
  ASSERT_EQ_U64(buf[want_len], 0xee); /* nothing written beyond */
  ASSERT_EQ_U64(etch__pb_varint_size(v), want_len);
  ASSERT_EQ_U64(decode_varint_all(buf, want_len), v);
}

TEST(pb_varint_exact_bytes) {
  check_varint(0, BYTES(0x00));
  check_varint(1, BYTES(0x01));
  check_varint(127, BYTES(0x7f));
  check_varint(128, BYTES(0x80, 0x01));
  check_varint(300, BYTES(0xac, 0x02));
  check_varint(16383, BYTES(0xff, 0x7f));
  check_varint(16384, BYTES(0x80, 0x80, 0x01));
  check_varint(UINT32_MAX, BYTES(0xff, 0xff, 0xff, 0xff, 0x0f));
  check_varint(UINT64_C(1) << 63, BYTES(0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                        0x80, 0x80, 0x80, 0x01));
  check_varint(UINT64_MAX, BYTES(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                 0xff, 0xff, 0x01));
}

TEST(pb_varint_roundtrip_all_sizes) {
  /* Every power of two and its neighbours: all 10 encoded sizes. */
  for (int bit = 0; bit < 64; bit++) {
    uint64_t base = UINT64_C(1) << bit;
    uint64_t vals[3] = {base - 1, base, base + 1};
    for (int k = 0; k < 3; k++) {
      uint8_t buf[ETCH_PB_MAX_VARINT];
      size_t n = (size_t)(etch__pb_put_varint(buf, vals[k]) - buf);
      ASSERT_EQ_U64(n, etch__pb_varint_size(vals[k]));
      ASSERT_EQ_U64(n, vals[k] == 0 ? 1 : (64 - __builtin_clzll(vals[k]) + 6) / 7);
      ASSERT_EQ_U64(decode_varint_all(buf, n), vals[k]);
    }
  }
}

TEST(pb_varint_read_redundant_and_limits) {
  /* Redundant (padded) encodings are valid: this is how nested lengths are
   * reserved. */
  ASSERT_EQ_U64(decode_varint_all(BYTES(0x80, 0x00)), 0);
  ASSERT_EQ_U64(decode_varint_all(BYTES(0x83, 0x80, 0x80, 0x00)), 3);
  /* Ten bytes is the maximum. */
  ASSERT_EQ_U64(decode_varint_all(BYTES(0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                        0x80, 0x80, 0x80, 0x00)), 0);
  /* Eleven bytes: overlong. Truncated: fails. Neither moves the cursor. */
  static const uint8_t overlong[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                     0x80, 0x80, 0x80, 0x80, 0x00};
  const uint8_t *p = overlong;
  uint64_t v = 42;
  ASSERT_FALSE(etch__pb_read_varint(&p, overlong + sizeof overlong, &v));
  ASSERT_TRUE(p == overlong);
  static const uint8_t trunc[] = {0xff, 0xff};
  p = trunc;
  ASSERT_FALSE(etch__pb_read_varint(&p, trunc + sizeof trunc, &v));
  ASSERT_TRUE(p == trunc);
  ASSERT_FALSE(etch__pb_read_varint(&p, trunc, &v)); /* empty */
  /* Reads stop at the first byte without the continuation bit. */
  static const uint8_t two[] = {0x96, 0x01, 0x05};
  p = two;
  ASSERT_TRUE(etch__pb_read_varint(&p, two + 3, &v));
  ASSERT_EQ_U64(v, 150);
  ASSERT_TRUE(p == two + 2);
}

TEST(pb_zigzag) {
  ASSERT_EQ_U64(etch__pb_zigzag(0), 0);
  ASSERT_EQ_U64(etch__pb_zigzag(-1), 1);
  ASSERT_EQ_U64(etch__pb_zigzag(1), 2);
  ASSERT_EQ_U64(etch__pb_zigzag(-2), 3);
  ASSERT_EQ_U64(etch__pb_zigzag(2147483647), UINT64_C(4294967294));
  ASSERT_EQ_U64(etch__pb_zigzag(-2147483648LL), UINT64_C(4294967295));
  ASSERT_EQ_U64(etch__pb_zigzag(INT64_MAX), UINT64_MAX - 1);
  ASSERT_EQ_U64(etch__pb_zigzag(INT64_MIN), UINT64_MAX);
  int64_t vals[] = {0, 1, -1, 63, -64, 64, -65, 1000000, -1000000,
                    INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN,
                    INT64_MAX - 1, INT64_MIN + 1};
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(vals); i++)
    ASSERT_EQ_INT(etch__pb_unzigzag(etch__pb_zigzag(vals[i])), vals[i]);
  /* sint field: tag 3 varint, zigzag value. */
  etch__pb_buf b;
  etch__pb_buf_init(&b, 0, 0);
  etch__pb_write_sint_field(&b.s, 3, -1);
  etch__pb_write_sint_field(&b.s, 3, -64);
  etch__pb_write_sint_field(&b.s, 3, INT64_MIN);
  EXPECT_BUF(&b, 0x18, 0x01, 0x18, 0x7f, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff,
             0xff, 0xff, 0xff, 0xff, 0x01);
  EXPECT_DECODES(&b, 0, 3);
  ASSERT_FALSE(b.s.failed);
  etch__pb_buf_free(&b);
}

/* ---- fixed-width and tags ------------------------------------------------------ */

TEST(pb_fixed_raw) {
  uint8_t buf[8];
  ASSERT_TRUE(etch__pb_put_fixed32(buf, 0x01020304u) == buf + 4);
  EXPECT_BYTES(buf, 4, 0x04, 0x03, 0x02, 0x01);
  ASSERT_TRUE(etch__pb_put_fixed64(buf, UINT64_C(0x0102030405060708)) == buf + 8);
  EXPECT_BYTES(buf, 8, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01);
}

TEST(pb_fixed_fields) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 0, 0);
  etch__pb_write_fixed64_field(&b.s, 1, UINT64_C(0x0102030405060708));
  etch__pb_write_fixed32_field(&b.s, 2, 0xdeadbeefu);
  etch__pb_write_double_field(&b.s, 3, 1.5);  /* 0x3FF8000000000000 */
  etch__pb_write_double_field(&b.s, 4, -0.0); /* sign bit only */
  EXPECT_BUF(&b,
             0x09, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
             0x15, 0xef, 0xbe, 0xad, 0xde,
             0x19, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x3f,
             0x21, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80);
  EXPECT_DECODES(&b, 0, 4);
  etch__pb_buf_free(&b);
}

TEST(pb_tags) {
  ASSERT_EQ_U64(etch__pb_tag(1, ETCH_PB_VARINT), 0x08);
  ASSERT_EQ_U64(etch__pb_tag(2, ETCH_PB_LEN), 0x12);
  ASSERT_EQ_U64(etch__pb_tag(15, ETCH_PB_FIXED32), 0x7d);
  uint8_t buf[8];
  EXPECT_BYTES(buf, (size_t)(etch__pb_put_tag(buf, 16, ETCH_PB_VARINT) - buf),
               0x80, 0x01);
  /* The largest field number: a 5-byte tag. */
  EXPECT_BYTES(buf,
               (size_t)(etch__pb_put_tag(buf, 536870911u, ETCH_PB_LEN) - buf),
               0xfa, 0xff, 0xff, 0xff, 0x0f);
  etch__pb_buf b;
  etch__pb_buf_init(&b, 0, 0);
  etch__pb_write_varint_field(&b.s, 1, 150);
  etch__pb_write_varint_field(&b.s, 2047, 0);
  etch__pb_write_varint_field(&b.s, 536870911u, UINT64_MAX);
  EXPECT_BUF(&b, 0x08, 0x96, 0x01,
             0xf8, 0x7f, 0x00,
             0xf8, 0xff, 0xff, 0xff, 0x0f,
             0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
  EXPECT_DECODES(&b, 0, 3);
  etch__pb_buf_free(&b);
}

/* ---- length-delimited ------------------------------------------------------------ */

TEST(pb_length_delimited) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 0, 0);
  etch__pb_write_string_field(&b.s, 2, "abc");
  etch__pb_write_string_field(&b.s, 3, "");
  etch__pb_write_bytes_field(&b.s, 4, NULL, 0);
  etch__pb_write_bytes_field(&b.s, 5, "\0\xff", 2);
  EXPECT_BUF(&b, 0x12, 0x03, 'a', 'b', 'c', 0x1a, 0x00, 0x22, 0x00, 0x2a, 0x02,
             0x00, 0xff);
  EXPECT_DECODES(&b, 0, 4);
  etch__pb_buf_reset(&b);
  ASSERT_EQ_U64(etch__pb_buf_len(&b), 0);
  /* 200 bytes: a 2-byte length, and the buffer grows past its first 256. */
  uint8_t big[300];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)i;
  etch__pb_write_bytes_field(&b.s, 1, big, 200);
  etch__pb_write_bytes_field(&b.s, 1, big, 300);
  ASSERT_FALSE(b.s.failed);
  ASSERT_EQ_U64(etch__pb_buf_len(&b), 3 + 200 + 3 + 300);
  const uint8_t *d = etch__pb_buf_data(&b);
  EXPECT_BYTES(d, 3, 0x0a, 0xc8, 0x01);
  ASSERT_TRUE(memcmp(d + 3, big, 200) == 0);
  EXPECT_BYTES(d + 203, 3, 0x0a, 0xac, 0x02);
  ASSERT_TRUE(memcmp(d + 206, big, 300) == 0);
  EXPECT_DECODES(&b, 0, 2);
  /* Raw bytes, no tag. */
  etch__pb_buf_reset(&b);
  etch__pb_write_bytes(&b.s, "xyz", 3);
  EXPECT_BUF(&b, 'x', 'y', 'z');
  size_t len = 0;
  uint8_t *taken = etch__pb_buf_take(&b, &len);
  ASSERT_EQ_U64(len, 3);
  ASSERT_TRUE(memcmp(taken, "xyz", 3) == 0);
  free(taken);
  ASSERT_EQ_U64(etch__pb_buf_len(&b), 0);
  etch__pb_buf_free(&b);
}

TEST(pb_buf_limit) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 8, 32);
  etch__pb_write_bytes(&b.s, "0123456789abcdef", 16);
  ASSERT_FALSE(b.s.failed);
  etch__pb_write_bytes(&b.s, "0123456789abcdef", 16);
  ASSERT_FALSE(b.s.failed);
  ASSERT_EQ_U64(etch__pb_buf_len(&b), 32);
  etch__pb_write_bytes(&b.s, "!", 1);
  ASSERT_TRUE(b.s.failed);
  ASSERT_EQ_U64(etch__pb_buf_len(&b), 32);
  /* Failure is sticky until reset. */
  etch__pb_nested n;
  etch__pb_nested_begin(&b.s, 1, &n);
  etch__pb_nested_end(&b.s, &n);
  ASSERT_TRUE(b.s.failed);
  etch__pb_buf_reset(&b);
  ASSERT_FALSE(b.s.failed);
  etch__pb_write_varint_field(&b.s, 1, 1);
  EXPECT_BUF(&b, 0x08, 0x01);
  etch__pb_buf_free(&b);
}

/* ---- nested messages --------------------------------------------------------------- */

TEST(pb_nested_patched_length) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 0, 0);
  etch__pb_nested n;
  etch__pb_nested_begin(&b.s, 1, &n);
  ASSERT_EQ_U64(n.len_off, 1);
  etch__pb_write_varint_field(&b.s, 2, 150);
  etch__pb_nested_end(&b.s, &n);
  EXPECT_BUF(&b, 0x0a, 0x83, 0x80, 0x80, 0x00, 0x08 + 8, 0x96, 0x01);
  EXPECT_DECODES(&b, 1, 2);

  /* Empty, and nested three deep. */
  etch__pb_buf_reset(&b);
  etch__pb_nested a, c, d, e;
  etch__pb_nested_begin(&b.s, 1, &e);
  etch__pb_nested_end(&b.s, &e);
  etch__pb_nested_begin(&b.s, 2, &a);
  etch__pb_nested_begin(&b.s, 3, &c);
  etch__pb_nested_begin(&b.s, 4, &d);
  etch__pb_write_string_field(&b.s, 5, "hi");
  etch__pb_nested_end(&b.s, &d);
  etch__pb_write_varint_field(&b.s, 6, 1);
  etch__pb_nested_end(&b.s, &c);
  etch__pb_nested_end(&b.s, &a);
  ASSERT_FALSE(b.s.failed);
  EXPECT_BUF(&b, 0x0a, 0x80, 0x80, 0x80, 0x00,
             0x12, 0x90, 0x80, 0x80, 0x00,         /* 16 */
             0x1a, 0x8b, 0x80, 0x80, 0x00,         /* 11 */
             0x22, 0x84, 0x80, 0x80, 0x00,         /* 4 */
             0x2a, 0x02, 'h', 'i',
             0x30, 0x01);
  /* 2 top-level fields, 1 in the outer message, 2 in the middle one, 1 in
   * the inner one. */
  EXPECT_DECODES(&b, 3, 6);
  etch__pb_buf_free(&b);

  /* The largest and the smallest reserved values. */
  uint8_t r[4];
  etch__pb_put_redundant4(r, ETCH_PB_NESTED_MAX);
  EXPECT_BYTES(r, 4, 0xff, 0xff, 0xff, 0x7f);
  ASSERT_EQ_U64(decode_varint_all(r, 4), ETCH_PB_NESTED_MAX);
  etch__pb_put_redundant4(r, 0);
  EXPECT_BYTES(r, 4, 0x80, 0x80, 0x80, 0x00);
  etch__pb_put_redundant4(r, 128);
  ASSERT_EQ_U64(decode_varint_all(r, 4), 128);
}

/* ---- a segmented stream --------------------------------------------------------------
 *
 * Segments of `seg_size` bytes (more when a write needs more contiguous
 * room), each allocated on its own, as chunks of a trace buffer would be.
 * A segment's unused tail is not part of the message: logical offsets count
 * used bytes only, so the bytes are the concatenation of the used parts.
 */
#define SEG_MAX 4096

typedef struct seg_stream {
  etch__pb_stream s;
  size_t seg_size;
  size_t max_segs;   /* grow fails beyond this */
  uint64_t jump;     /* logical bytes skipped at the next switch (tests) */
  size_t n;
  uint8_t *base[SEG_MAX];
  uint64_t off[SEG_MAX];
  size_t used[SEG_MAX];
  int grows, resolves;
} seg_stream;

static bool seg_grow(etch__pb_stream *s, size_t need) {
  seg_stream *ss = (seg_stream *)s->ctx;
  if (ss->n > 0) ss->used[ss->n - 1] = (size_t)(s->cur - s->seg);
  if (ss->n >= ss->max_segs || ss->n >= SEG_MAX) return false;
  size_t size = ss->seg_size > need ? ss->seg_size : need;
  uint8_t *p = (uint8_t *)malloc(size);
  if (!p) return false;
  memset(p, 0xcc, size);
  uint64_t off = ss->n ? ss->off[ss->n - 1] + ss->used[ss->n - 1] : 0;
  off += ss->jump;
  ss->jump = 0;
  ss->base[ss->n] = p;
  ss->off[ss->n] = off;
  ss->used[ss->n] = 0;
  ss->n++;
  s->seg = s->cur = p;
  s->end = p + size;
  s->seg_off = off;
  ss->grows++;
  return true;
}

static uint8_t *seg_resolve(etch__pb_stream *s, uint64_t off) {
  seg_stream *ss = (seg_stream *)s->ctx;
  ss->resolves++;
  /* Only earlier (closed) segments are resolved; the reserved 4 bytes must
   * lie entirely inside one of them. */
  for (size_t i = 0; i + 1 < ss->n; i++) {
    if (off >= ss->off[i] && off + ETCH_PB_NESTED_LEN <= ss->off[i] + ss->used[i])
      return ss->base[i] + (off - ss->off[i]);
  }
  FAIL("resolve(%llu): not inside a closed segment", (unsigned long long)off);
}

static void seg_init(seg_stream *ss, size_t seg_size, size_t max_segs) {
  memset(ss, 0, sizeof *ss);
  ss->seg_size = seg_size;
  ss->max_segs = max_segs;
  ss->s.grow = seg_grow;
  ss->s.resolve = seg_resolve;
  ss->s.ctx = ss;
}

/* The concatenated used bytes of all segments (caller frees). */
static uint8_t *seg_join(seg_stream *ss, size_t *len) {
  if (ss->n > 0) ss->used[ss->n - 1] = (size_t)(ss->s.cur - ss->s.seg);
  size_t total = 0;
  for (size_t i = 0; i < ss->n; i++) total += ss->used[i];
  uint8_t *out = (uint8_t *)malloc(total ? total : 1);
  size_t o = 0;
  for (size_t i = 0; i < ss->n; i++) {
    ASSERT_EQ_U64(ss->off[i], o); /* logical offsets are contiguous */
    memcpy(out + o, ss->base[i], ss->used[i]);
    o += ss->used[i];
  }
  *len = total;
  return out;
}

static void seg_free(seg_stream *ss) {
  for (size_t i = 0; i < ss->n; i++) free(ss->base[i]);
  ss->n = 0;
}

/* A message using every kind of field, nested three deep, with strings
 * longer than small segments. */
static const char lorem_text[] =
    "a string much longer than any of the small segments used below, "
    "so that its bytes are split over many of them";

static void encode_sample(etch__pb_stream *s) {
  const char *lorem = lorem_text;
  uint8_t blob[100];
  for (size_t i = 0; i < sizeof blob; i++) blob[i] = (uint8_t)(i * 7);
  etch__pb_nested pkt, ev, ann, emp, dbg;
  etch__pb_write_varint_field(s, 1, 0);
  etch__pb_nested_begin(s, 2, &pkt);                /* TracePacket-like */
  etch__pb_write_varint_field(s, 8, UINT64_C(123456789012345));
  etch__pb_write_varint_field(s, 10, 7);
  etch__pb_nested_begin(s, 11, &ev);                /* TrackEvent-like */
  etch__pb_write_varint_field(s, 9, 1);
  etch__pb_write_string_field(s, 23, lorem);
  etch__pb_nested_begin(s, 4, &ann);                /* annotation */
  etch__pb_write_varint_field(s, 10, 3);
  etch__pb_write_sint_field(s, 4, -123456);
  etch__pb_write_double_field(s, 5, 3.25);
  etch__pb_nested_end(s, &ann);
  etch__pb_nested_begin(s, 4, &emp);                /* empty */
  etch__pb_nested_end(s, &emp);
  etch__pb_write_fixed32_field(s, 6, 0x11223344u);
  etch__pb_write_fixed64_field(s, 7, UINT64_MAX);
  etch__pb_nested_end(s, &ev);
  etch__pb_write_bytes_field(s, 12, blob, sizeof blob);
  etch__pb_nested_end(s, &pkt);
  etch__pb_nested_begin(s, 3, &dbg);
  etch__pb_write_string_field(s, 1, "tail");
  etch__pb_write_varint_field(s, 536870911u, UINT64_C(1) << 63);
  etch__pb_nested_end(s, &dbg);
}

static uint8_t *sample_single(size_t *len) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 0, 0);
  encode_sample(&b.s);
  ASSERT_FALSE(b.s.failed);
  return etch__pb_buf_take(&b, len);
}

TEST(pb_nested_across_segments) {
  size_t ref_len;
  uint8_t *ref = sample_single(&ref_len);
  ASSERT_TRUE(ref_len > 200);
  for (size_t seg = 1; seg <= 64; seg++) {
    seg_stream ss;
    seg_init(&ss, seg, SEG_MAX);
    encode_sample(&ss.s);
    if (ss.s.failed) FAIL("segment size %zu: stream failed", seg);
    size_t len;
    uint8_t *got = seg_join(&ss, &len);
    if (len != ref_len || memcmp(got, ref, len) != 0) {
      size_t i = 0;
      while (i < len && i < ref_len && got[i] == ref[i]) i++;
      FAIL("segment size %zu: %zu bytes, want %zu; first difference at %zu",
           seg, len, ref_len, i);
    }
    if (seg <= 16) {
      ASSERT_TRUE(ss.n > 10);
      ASSERT_TRUE(ss.resolves > 0); /* lengths patched in earlier segments */
    }
    free(got);
    seg_free(&ss);
  }
  free(ref);
}

TEST(pb_seven_byte_segments) {
  /* The case from the design: 7-byte segments, a nested message whose body
   * spans many of them, its length patched through resolve(). */
  seg_stream ss;
  seg_init(&ss, 7, SEG_MAX);
  etch__pb_nested n;
  etch__pb_nested_begin(&ss.s, 1, &n);
  ASSERT_EQ_U64(ss.n, 1);
  etch__pb_write_bytes(&ss.s, "0123456789abcdefghijklmnopqrstuvwxyz", 36);
  etch__pb_nested_end(&ss.s, &n);
  ASSERT_FALSE(ss.s.failed);
  ASSERT_EQ_INT(ss.resolves, 1);
  size_t len;
  uint8_t *got = seg_join(&ss, &len);
  ASSERT_EQ_U64(len, 5 + 36);
  EXPECT_BYTES(got, 5, 0x0a, 0xa4, 0x80, 0x80, 0x00);
  ASSERT_TRUE(memcmp(got + 5, "0123456789abcdefghijklmnopqrstuvwxyz", 36) == 0);
  ASSERT_EQ_U64(decode_all(got, len, 0), 1);
  /* Segment 0 was grown to the 9 bytes nested_begin needs: 5 bytes of
   * header and the first 4 bytes of the body, then 32 bytes in five 7-byte
   * segments. */
  ASSERT_EQ_U64(ss.used[0], 9);
  ASSERT_EQ_U64(ss.n, 6);
  free(got);
  seg_free(&ss);
}

TEST(pb_segment_grow_failure) {
  /* The stream runs out of segments in the middle of a nested message: it
   * fails, swallows later writes, and the nested end reports failure. */
  seg_stream ss;
  seg_init(&ss, 16, 3);
  etch__pb_nested n;
  etch__pb_nested_begin(&ss.s, 1, &n);
  for (int i = 0; i < 20; i++) etch__pb_write_varint_field(&ss.s, 2, 300);
  ASSERT_TRUE(ss.s.failed);
  size_t used = (size_t)(ss.s.cur - ss.s.seg);
  etch__pb_write_string_field(&ss.s, 3, "more");
  etch__pb_write_bytes(&ss.s, "x", 1);
  ASSERT_EQ_U64(ss.n, 3);
  etch__pb_nested_end(&ss.s, &n);
  ASSERT_TRUE(ss.s.failed);
  /* Writes after the failure did not go past the segment's end. */
  ASSERT_TRUE(ss.s.cur <= ss.s.end);
  ASSERT_TRUE((size_t)(ss.s.cur - ss.s.seg) >= used);
  seg_free(&ss);

  /* No first segment at all: nested_begin fails cleanly. */
  seg_init(&ss, 16, 0);
  etch__pb_nested_begin(&ss.s, 1, &n);
  ASSERT_TRUE(ss.s.failed);
  ASSERT_EQ_U64(n.len_off, UINT64_MAX);
  etch__pb_nested_end(&ss.s, &n);
  ASSERT_TRUE(ss.s.failed);
  seg_free(&ss);
}

TEST(pb_nested_size_limit) {
  /* Lengths are tracked by logical offset: a body of exactly
   * ETCH_PB_NESTED_MAX bytes is patched as ff ff ff 7f, one byte more fails.
   * The segment switch skips the bulk of the body instead of writing it. */
  for (int extra = 0; extra <= 1; extra++) {
    seg_stream ss;
    seg_init(&ss, 16, SEG_MAX);
    etch__pb_nested n;
    etch__pb_nested_begin(&ss.s, 1, &n);
    ss.jump = ETCH_PB_NESTED_MAX - 59 + (uint64_t)extra;
    etch__pb_write_bytes(&ss.s, "0123456789abcdefghijklmnopqrstuvwxyz0123456789"
                               "abcdefghijklmnopqrstuvwxyz", 59);
    ASSERT_TRUE(ss.n >= 2);
    etch__pb_nested_end(&ss.s, &n);
    if (extra) {
      ASSERT_TRUE(ss.s.failed);
    } else {
      ASSERT_FALSE(ss.s.failed);
      EXPECT_BYTES(ss.base[0], 5, 0x0a, 0xff, 0xff, 0xff, 0x7f);
    }
    seg_free(&ss);
  }
}

/* ---- decoder ------------------------------------------------------------------------ */

typedef struct want_field {
  uint32_t id;
  uint8_t wt;
  uint64_t u;
  size_t len;
  size_t off;
} want_field;

/* Decodes `data` and checks the fields one by one, then a clean end. */
static void check_fields(const uint8_t *data, size_t n, const want_field *w,
                         size_t nw) {
  etch__pb_dec d;
  etch__pb_dec_init(&d, data, n);
  etch__pb_field f;
  for (size_t i = 0; i < nw; i++) {
    if (!etch__pb_next(&d, &f))
      FAIL("field %zu: no field (err %d at %zu: %s)", i, d.err, d.err_off,
           d.err_msg ? d.err_msg : "");
    ASSERT_EQ_U64(f.id, w[i].id);
    ASSERT_EQ_U64(f.wt, w[i].wt);
    ASSERT_EQ_U64(f.off, w[i].off);
    if (f.wt == ETCH_PB_LEN) {
      ASSERT_EQ_U64(f.len, w[i].len);
      ASSERT_TRUE(f.data >= data && f.data + f.len <= data + n);
    } else {
      ASSERT_EQ_U64(f.u, w[i].u);
    }
  }
  ASSERT_FALSE(etch__pb_next(&d, &f));
  ASSERT_EQ_INT(d.err, 0);
}

TEST(pb_decode_encodings) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 0, 0);
  etch__pb_write_varint_field(&b.s, 1, 0);
  etch__pb_write_varint_field(&b.s, 1, UINT64_MAX);
  etch__pb_write_sint_field(&b.s, 2, -3);
  etch__pb_write_fixed64_field(&b.s, 3, UINT64_C(0x0102030405060708));
  etch__pb_write_fixed32_field(&b.s, 4, 0xdeadbeefu);
  etch__pb_write_double_field(&b.s, 5, -2.5);
  etch__pb_write_string_field(&b.s, 6, "abc");
  etch__pb_write_bytes_field(&b.s, 7, NULL, 0);
  etch__pb_write_varint_field(&b.s, 536870911u, 5);
  uint64_t dbl;
  double m25 = -2.5;
  memcpy(&dbl, &m25, 8);
  const want_field w[] = {
      {1, ETCH_PB_VARINT, 0, 0, 0},
      {1, ETCH_PB_VARINT, UINT64_MAX, 0, 2},
      {2, ETCH_PB_VARINT, 5, 0, 13},
      {3, ETCH_PB_FIXED64, UINT64_C(0x0102030405060708), 0, 15},
      {4, ETCH_PB_FIXED32, 0xdeadbeefu, 0, 24},
      {5, ETCH_PB_FIXED64, dbl, 0, 29},
      {6, ETCH_PB_LEN, 0, 3, 38},
      {7, ETCH_PB_LEN, 0, 0, 43},
      {536870911u, ETCH_PB_VARINT, 5, 0, 45},
  };
  check_fields(etch__pb_buf_data(&b), etch__pb_buf_len(&b), w, ETCH_ARRAY_SIZE(w));
  ASSERT_EQ_U64(etch__pb_buf_len(&b), 51);

  /* Typed accessors. */
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, etch__pb_buf_data(&b) + 29, 9);
  ASSERT_TRUE(etch__pb_next(&d, &f));
  ASSERT_EQ_DBL(etch__pb_field_double(&f), -2.5);
  ASSERT_EQ_INT(etch__pb_unzigzag(5), -3);
  etch__pb_buf_reset(&b);
  float fl = 0.75f;
  uint32_t flu;
  memcpy(&flu, &fl, 4);
  etch__pb_write_fixed32_field(&b.s, 1, flu);
  etch__pb_dec_init(&d, etch__pb_buf_data(&b), etch__pb_buf_len(&b));
  ASSERT_TRUE(etch__pb_next(&d, &f));
  ASSERT_EQ_DBL(etch__pb_field_float(&f), 0.75);
  /* Decoding the string field yields the bytes in place. */
  etch__pb_buf_reset(&b);
  etch__pb_write_string_field(&b.s, 6, "abc");
  etch__pb_dec_init(&d, etch__pb_buf_data(&b), etch__pb_buf_len(&b));
  ASSERT_TRUE(etch__pb_next(&d, &f));
  ASSERT_TRUE(f.data == etch__pb_buf_data(&b) + 2);
  ASSERT_TRUE(memcmp(f.data, "abc", 3) == 0);
  etch__pb_buf_free(&b);

  /* Empty input: no field, no error. */
  etch__pb_dec_init(&d, NULL, 0);
  ASSERT_FALSE(etch__pb_next(&d, &f));
  ASSERT_EQ_INT(d.err, 0);
}

/* Walks the sample message recursively and checks every value. */
TEST(pb_decode_sample) {
  size_t len;
  uint8_t *data = sample_single(&len);
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, data, len);
  ASSERT_TRUE(etch__pb_next(&d, &f));
  ASSERT_EQ_U64(f.id, 1);
  ASSERT_EQ_U64(f.u, 0);
  ASSERT_TRUE(etch__pb_next(&d, &f));
  ASSERT_EQ_U64(f.id, 2);
  ASSERT_EQ_U64(f.wt, ETCH_PB_LEN);
  ASSERT_EQ_U64(f.off, 2);
  /* The packet body. */
  etch__pb_dec pd;
  etch__pb_dec_init(&pd, f.data, f.len);
  etch__pb_field g;
  int seen = 0;
  while (etch__pb_next(&pd, &g)) {
    switch (g.id) {
      case 8: ASSERT_EQ_U64(g.u, UINT64_C(123456789012345)); seen |= 1; break;
      case 10: ASSERT_EQ_U64(g.u, 7); seen |= 2; break;
      case 12:
        ASSERT_EQ_U64(g.len, 100);
        for (size_t i = 0; i < 100; i++) ASSERT_EQ_U64(g.data[i], (uint8_t)(i * 7));
        seen |= 4;
        break;
      case 11: {
        etch__pb_dec ed;
        etch__pb_field h;
        etch__pb_dec_init(&ed, g.data, g.len);
        int anns = 0;
        while (etch__pb_next(&ed, &h)) {
          if (h.id == 4 && anns++ == 0) {
            etch__pb_dec ad;
            etch__pb_field a;
            etch__pb_dec_init(&ad, h.data, h.len);
            ASSERT_TRUE(etch__pb_next(&ad, &a));
            ASSERT_EQ_U64(a.u, 3);
            ASSERT_TRUE(etch__pb_next(&ad, &a));
            ASSERT_EQ_INT(etch__pb_unzigzag(a.u), -123456);
            ASSERT_TRUE(etch__pb_next(&ad, &a));
            ASSERT_EQ_DBL(etch__pb_field_double(&a), 3.25);
            ASSERT_FALSE(etch__pb_next(&ad, &a));
            ASSERT_EQ_INT(ad.err, 0);
          } else if (h.id == 4) {
            ASSERT_EQ_U64(h.len, 0);
          } else if (h.id == 6) {
            ASSERT_EQ_U64(h.wt, ETCH_PB_FIXED32);
            ASSERT_EQ_U64(h.u, 0x11223344u);
          } else if (h.id == 7) {
            ASSERT_EQ_U64(h.u, UINT64_MAX);
          } else if (h.id == 23) {
            ASSERT_EQ_U64(h.len, sizeof lorem_text - 1);
          }
        }
        ASSERT_EQ_INT(ed.err, 0);
        ASSERT_EQ_INT(anns, 2);
        seen |= 8;
        break;
      }
      default: FAIL("unexpected field %u", g.id);
    }
  }
  ASSERT_EQ_INT(pd.err, 0);
  ASSERT_EQ_INT(seen, 15);
  ASSERT_TRUE(etch__pb_next(&d, &f));
  ASSERT_EQ_U64(f.id, 3);
  ASSERT_FALSE(etch__pb_next(&d, &f));
  ASSERT_EQ_INT(d.err, 0);
  free(data);
}

/* Decodes until an error and checks its code and offset (the offset of the
 * tag of the field that is malformed). */
static void expect_error_at(const char *file, int line, const uint8_t *data,
                            size_t n, int want_err, size_t want_off,
                            int want_fields) {
  etch__pb_dec d;
  etch__pb_dec_init(&d, data, n);
  etch__pb_field f;
  int fields = 0;
  while (etch__pb_next(&d, &f)) fields++;
  if (d.err != want_err || d.err_off != want_off || fields != want_fields)
    etch_test_fail(file, line,
                   "got err %d (%s) at %zu after %d fields, want err %d at "
                   "%zu after %d fields",
                   d.err, d.err_msg ? d.err_msg : "", d.err_off, fields,
                   want_err, want_off, want_fields);
  if (!d.err_msg || !*d.err_msg) etch_test_fail(file, line, "no error message");
  /* The error is sticky. */
  if (etch__pb_next(&d, &f) || d.err != want_err)
    etch_test_fail(file, line, "decoder continued after an error");
}
#define EXPECT_ERROR(err, off, nfields, ...) \
  expect_error_at(__FILE__, __LINE__, BYTES(__VA_ARGS__), err, off, nfields)

TEST(pb_decode_truncated) {
  /* Truncated varint value, after a good field. */
  EXPECT_ERROR(ETCH_ETRUNC, 2, 1, 0x08, 0x01, 0x10, 0x80);
  EXPECT_ERROR(ETCH_ETRUNC, 0, 0, 0x08);
  /* Truncated tag. */
  EXPECT_ERROR(ETCH_ETRUNC, 2, 1, 0x08, 0x01, 0x80);
  EXPECT_ERROR(ETCH_ETRUNC, 0, 0, 0xff, 0xff);
  /* Truncated length, length beyond the data. */
  EXPECT_ERROR(ETCH_ETRUNC, 0, 0, 0x0a);
  EXPECT_ERROR(ETCH_ETRUNC, 0, 0, 0x0a, 0x80);
  EXPECT_ERROR(ETCH_ETRUNC, 3, 1, 0x0a, 0x01, 'x', 0x12, 0x05, 'a', 'b');
  EXPECT_ERROR(ETCH_ETRUNC, 0, 0, 0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 'a');
  /* A nested length reserved but the body cut short. */
  EXPECT_ERROR(ETCH_ETRUNC, 0, 0, 0x0a, 0x83, 0x80, 0x80, 0x00, 0x08, 0x01);
  /* Truncated fixed64 / fixed32. */
  EXPECT_ERROR(ETCH_ETRUNC, 0, 0, 0x09, 1, 2, 3, 4, 5, 6, 7);
  EXPECT_ERROR(ETCH_ETRUNC, 2, 1, 0x08, 0x00, 0x15, 1, 2, 3);
}

TEST(pb_decode_overlong) {
  /* Varints of more than 10 bytes are malformed, not truncated. */
  EXPECT_ERROR(ETCH_EFORMAT, 2, 1, 0x08, 0x01,
               0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
               0xff, 0x01);
  EXPECT_ERROR(ETCH_EFORMAT, 0, 0,
               0x8a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
               0x00);
  EXPECT_ERROR(ETCH_EFORMAT, 0, 0,
               0x0a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
               0x80, 0x00);
  /* Ten bytes is still fine. */
  check_fields(BYTES(0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                     0x80, 0x00),
               (const want_field[]){{1, ETCH_PB_VARINT, 0, 0, 0}}, 1);
}

TEST(pb_decode_bad_wire_types_and_ids) {
  /* Groups (3, 4) and the undefined wire types 6, 7. */
  EXPECT_ERROR(ETCH_EFORMAT, 0, 0, 0x0b, 0x0c);
  EXPECT_ERROR(ETCH_EFORMAT, 2, 1, 0x08, 0x05, 0x0c);
  EXPECT_ERROR(ETCH_EFORMAT, 3, 1, 0x12, 0x01, 0x00, 0x1e, 0x00);
  EXPECT_ERROR(ETCH_EFORMAT, 5, 1, 0x0d, 1, 2, 3, 4, 0xff, 0x01);
  /* Field number 0. */
  EXPECT_ERROR(ETCH_EFORMAT, 0, 0, 0x00, 0x00);
  EXPECT_ERROR(ETCH_EFORMAT, 2, 1, 0x08, 0x00, 0x02, 0x00);
  /* Field number above 2^29-1. */
  EXPECT_ERROR(ETCH_EFORMAT, 0, 0, 0x80, 0x80, 0x80, 0x80, 0x10, 0x00);
}

TEST(pb_decode_segmented_output) {
  /* The output of every segment size decodes the same as the reference. */
  size_t ref_len;
  uint8_t *ref = sample_single(&ref_len);
  seg_stream ss;
  seg_init(&ss, 3, SEG_MAX);
  encode_sample(&ss.s);
  size_t len;
  uint8_t *got = seg_join(&ss, &len);
  etch__pb_dec a, b;
  etch__pb_field fa, fb;
  etch__pb_dec_init(&a, ref, ref_len);
  etch__pb_dec_init(&b, got, len);
  int n = 0;
  while (etch__pb_next(&a, &fa)) {
    ASSERT_TRUE(etch__pb_next(&b, &fb));
    ASSERT_EQ_U64(fa.id, fb.id);
    ASSERT_EQ_U64(fa.off, fb.off);
    ASSERT_EQ_U64(fa.len, fb.len);
    n++;
  }
  ASSERT_FALSE(etch__pb_next(&b, &fb));
  ASSERT_EQ_INT(a.err, 0);
  ASSERT_EQ_INT(b.err, 0);
  ASSERT_EQ_INT(n, 3);
  free(got);
  free(ref);
  seg_free(&ss);
}

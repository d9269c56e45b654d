/*
 * fragment_test.c - the fragment cursor and the reassembler
 * (src/buffer/fragment.[ch]): exact fragments of counted and uncounted
 * chunks, every lie a chunk can tell, the continuation flags, and packets
 * put together across chunks with what is lost on the way.
 */
#include <string.h>

#include "buffer/fragment.h"
#include "etch/etch.h"
#include "test.h"

TEST(cursor_walks_counted_and_uncounted_chunks) {
  /* "ab" with a 1-byte size, "xyz" with a 4-byte padded size, padding. */
  static const uint8_t p[] = {2, 'a', 'b', 0x83, 0x80, 0x80, 0x00,
                              'x', 'y', 'z', 0};
  etch_frag_cursor c;
  const uint8_t *d;
  uint32_t n;
  etch__frag_init(&c, p, sizeof p, 3, ETCH_FRAG_FIRST_CONTINUES);
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_OK);
  ASSERT_TRUE(n == 2 && d == p + 1);
  ASSERT_TRUE(etch__frag_cont_prev(&c));
  ASSERT_FALSE(etch__frag_cont_next(&c));
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_OK);
  ASSERT_TRUE(n == 3 && d == p + 7 && c.off == 10 && c.index == 2);
  ASSERT_FALSE(etch__frag_cont_prev(&c));
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_OK);
  ASSERT_EQ_INT(n, 0);
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_END);

  /* Counted 2: the third is not read, and the second is the last. */
  etch__frag_init(&c, p, sizeof p, 2, ETCH_FRAG_LAST_CONTINUES);
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_OK);
  ASSERT_FALSE(etch__frag_cont_prev(&c) || etch__frag_cont_next(&c));
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_OK);
  ASSERT_TRUE(etch__frag_cont_next(&c));
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_END);

  /* Uncounted: ends with the bytes; the last is the one that ends them. */
  etch__frag_init(&c, p, sizeof p, ETCH_FRAG_UNCOUNTED,
                  ETCH_FRAG_LAST_CONTINUES);
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_OK);
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_OK);
  ASSERT_FALSE(etch__frag_cont_next(&c));
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_OK);
  ASSERT_TRUE(etch__frag_cont_next(&c));
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_END);
  ASSERT_EQ_INT(etch__frag_count(p, sizeof p), 3);
}

TEST(cursor_says_how_a_chunk_lies) {
  etch_frag_cursor c;
  const uint8_t *d;
  uint32_t n;
  /* More fragments counted than there are. */
  static const uint8_t one[] = {1, 'a'};
  etch__frag_init(&c, one, sizeof one, 2, 0);
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_OK);
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_MISSING);
  ASSERT_TRUE(c.off == 2 && c.index == 1); /* unmoved */
  /* A one-byte size past the end, a longer one past the end. */
  static const uint8_t past[] = {2, 'a'};
  etch__frag_init(&c, past, sizeof past, 1, 0);
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_OVERRUN);
  ASSERT_EQ_INT(n, 2);
  static const uint8_t past2[] = {0x80 | 0x7f, 0x02, 'a'};
  etch__frag_init(&c, past2, sizeof past2, ETCH_FRAG_UNCOUNTED, 0);
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_OVERRUN);
  ASSERT_EQ_INT(n, 383);
  ASSERT_TRUE(c.off == 0 && c.index == 0);
  /* A size of 5 bytes, a size cut by the end. */
  static const uint8_t five[] = {0x80, 0x80, 0x80, 0x80, 0x00, 0};
  etch__frag_init(&c, five, sizeof five, 1, 0);
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_BAD_SIZE);
  ASSERT_EQ_INT(etch__frag_count(five, sizeof five), 0);
  static const uint8_t cut[] = {0x81, 0x81};
  etch__frag_init(&c, cut, sizeof cut, 1, 0);
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_BAD_SIZE);
  /* The drop size: no bytes, the cursor past it. */
  static const uint8_t drop[] = {0xff, 0xff, 0xff, 0x7f, 1, 'z'};
  etch__frag_init(&c, drop, sizeof drop, 2, 0);
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_DROP);
  ASSERT_TRUE(d == NULL && n == ETCH_FRAG_DROP_SIZE && c.off == 4);
  ASSERT_EQ_INT(etch__frag_next(&c, &d, &n), ETCH_FRAG_OK);
  ASSERT_TRUE(n == 1 && d[0] == 'z');
  /* Counting stops before the first fragment that does not fit. */
  static const uint8_t tail[] = {1, 'a', 0, 5, 'b'};
  ASSERT_EQ_INT(etch__frag_count(tail, sizeof tail), 2);
  ASSERT_EQ_INT(etch__frag_count(drop, sizeof drop), 0);
  ASSERT_EQ_INT(etch__frag_count(tail, 0), 0);
}

/* Feeds a chunk's fragments to r; the packets out, '|' after each and
 * '!' before one marked dropped, into out; lost counted. */
static int feed(etch_reasm *r, const uint8_t *p, uint32_t len, uint32_t count,
                uint32_t flags, char *out, uint32_t *lost) {
  etch_frag_cursor c;
  etch__frag_init(&c, p, len, count, flags);
  const uint8_t *d;
  uint32_t n;
  int k;
  while ((k = etch__frag_next(&c, &d, &n)) == ETCH_FRAG_OK) {
    const uint8_t *pkt;
    uint32_t plen;
    bool dropped, l = false;
    int rc = etch__reasm_fragment(r, d, n, etch__frag_cont_prev(&c),
                                  etch__frag_cont_next(&c), &pkt, &plen,
                                  &dropped, &l);
    if (rc) return rc;
    if (l) (*lost)++;
    if (plen) {
      if (dropped) strcat(out, "!");
      strncat(out, (const char *)pkt, plen);
      strcat(out, "|");
    }
  }
  if (k != ETCH_FRAG_END && etch__reasm_lose(r)) (*lost)++;
  return ETCH_OK;
}

TEST(reassembler_puts_packets_together_across_chunks) {
  etch_reasm r;
  etch__reasm_init(&r);
  etch__reasm_start(&r, 0, false);
  char out[256] = "";
  uint32_t lost = 0;
  bool cut;
  /* "ab", then "cd" + "ef" + "gh" across three chunks, then padding
   * pieces only, then "ij". */
  static const uint8_t c0[] = {2, 'a', 'b', 2, 'c', 'd'};
  static const uint8_t c1[] = {2, 'e', 'f'};
  static const uint8_t c2[] = {2, 'g', 'h', 0};
  static const uint8_t c3[] = {0, 2, 'i', 'j'};
  ASSERT_TRUE(etch__reasm_chunk(&r, 0, &cut));
  ASSERT_OK(feed(&r, c0, sizeof c0, 2, ETCH_FRAG_LAST_CONTINUES, out, &lost));
  ASSERT_TRUE(etch__reasm_chunk(&r, 1, &cut));
  ASSERT_OK(feed(&r, c1, sizeof c1, ETCH_FRAG_UNCOUNTED,
                 ETCH_FRAG_FIRST_CONTINUES | ETCH_FRAG_LAST_CONTINUES, out,
                 &lost));
  ASSERT_TRUE(etch__reasm_chunk(&r, 2, &cut));
  ASSERT_OK(feed(&r, c2, sizeof c2, 2,
                 ETCH_FRAG_FIRST_CONTINUES | ETCH_FRAG_LAST_CONTINUES, out,
                 &lost));
  ASSERT_TRUE(etch__reasm_chunk(&r, 3, &cut));
  ASSERT_OK(feed(&r, c3, sizeof c3, 2, ETCH_FRAG_FIRST_CONTINUES, out,
                 &lost));
  ASSERT_EQ_STR(out, "ab|cdefgh|ij|");
  ASSERT_EQ_INT(lost, 0);

  /* A gap cuts the pending packet; the next packet says dropped. */
  out[0] = '\0';
  ASSERT_TRUE(etch__reasm_chunk(&r, 4, &cut));
  ASSERT_OK(feed(&r, c0, sizeof c0, 2, ETCH_FRAG_LAST_CONTINUES, out, &lost));
  ASSERT_FALSE(etch__reasm_chunk(&r, 6, &cut));
  ASSERT_TRUE(cut);
  ASSERT_OK(feed(&r, c3, sizeof c3, 2, ETCH_FRAG_FIRST_CONTINUES, out,
                 &lost));
  ASSERT_EQ_STR(out, "ab|!ij|");
  ASSERT_EQ_INT(lost, 1); /* the continuation whose start went */

  /* A packet that never ends, then a whole one: lost, dropped. */
  out[0] = '\0';
  lost = 0;
  ASSERT_TRUE(etch__reasm_chunk(&r, 7, &cut));
  ASSERT_OK(feed(&r, c0, sizeof c0, 2, ETCH_FRAG_LAST_CONTINUES, out, &lost));
  ASSERT_TRUE(etch__reasm_chunk(&r, 8, &cut));
  ASSERT_OK(feed(&r, c1, sizeof c1, 1, 0, out, &lost));
  ASSERT_EQ_STR(out, "ab|!ef|");
  ASSERT_EQ_INT(lost, 1);

  /* A chunk read in part before: the same id again is no gap. */
  etch__reasm_start(&r, 9, true);
  ASSERT_TRUE(etch__reasm_chunk(&r, 8, &cut));
  ASSERT_TRUE(etch__reasm_chunk(&r, 9, &cut));
  ASSERT_FALSE(etch__reasm_chunk(&r, 9, &cut));
  ASSERT_FALSE(cut);
  etch__reasm_start(&r, 0, false);
  ASSERT_FALSE(etch__reasm_chunk(&r, 1, &cut));
  etch__reasm_free(&r);
}

/* The checks of src/base/base.h that guard the walk: ETCH_NEVER is its
 * condition; ETCH_DCHECK evaluates its own only in a checking build. */
TEST(checks_cost_nothing_unless_built_in) {
  int n = 0;
  ETCH_DCHECK(++n > 0);
#ifdef ETCH_DCHECKS
  ASSERT_EQ_INT(n, 1);
#else
  ASSERT_EQ_INT(n, 0);
#endif
  int taken = 0;
  if (ETCH_NEVER(n < 0)) taken = 1;
  ASSERT_EQ_INT(taken, 0);
}

/*
 * tracebuf_test.c - the service's trace buffer (src/buffer/tracebuf.c):
 * packets across chunks, consuming reads, copies that grow, losses, ring
 * and discard, patches, and chunks that lie.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer/smb.h"
#include "buffer/tracebuf.h"
#include "pb/pb.h"
#include "test.h"

typedef struct chunk_b {
  uint8_t data[4096];
  uint32_t len, count;
} chunk_b;

/* Appends a fragment: a 1-byte size (or the 4-byte padded form) and text. */
static void frag(chunk_b *c, const char *text, bool padded) {
  uint32_t n = (uint32_t)strlen(text);
  if (padded) {
    etch__pb_put_redundant4(c->data + c->len, n);
    c->len += 4;
  } else {
    c->data[c->len++] = (uint8_t)n;
  }
  memcpy(c->data + c->len, text, n);
  c->len += n;
  c->count++;
}

typedef struct got {
  char text[64][64];
  uint32_t seq[64];
  bool dropped[64];
  int n;
} got;

static int collect(void *ctx, uint32_t seq, const uint8_t *d, uint32_t len,
                   bool dropped) {
  got *g = (got *)ctx;
  if (g->n == 64 || len >= 64) return ETCH_ELIMIT;
  memcpy(g->text[g->n], d, len);
  g->text[g->n][len] = 0;
  g->seq[g->n] = seq;
  g->dropped[g->n] = dropped;
  g->n++;
  return ETCH_OK;
}

static void read_all(etch_tracebuf *tb, got *g) {
  memset(g, 0, sizeof *g);
  ASSERT_OK(etch__tracebuf_read(tb, collect, g));
}

static void put(etch_tracebuf *tb, uint32_t seq, uint32_t id, uint32_t flags,
                const chunk_b *c) {
  ASSERT_OK(etch__tracebuf_put(tb, seq, id, flags, c->count, c->data, c->len));
}

TEST(packets_across_chunks_read_once) {
  etch_tracebuf *tb;
  ASSERT_OK(etch__tracebuf_new(1 << 20, ETCH_BUFFER_RING, &tb));
  chunk_b a = {0}, b = {0};
  frag(&a, "one", false);
  frag(&a, "two", true);
  frag(&a, "thr", true); /* continues */
  put(tb, 7, 0, ETCH_SMB_LAST_CONTINUES, &a);
  got g;
  read_all(tb, &g);
  ASSERT_EQ_INT(g.n, 2);
  ASSERT_EQ_STR(g.text[0], "one");
  ASSERT_EQ_STR(g.text[1], "two");
  ASSERT_FALSE(g.dropped[0]);
  frag(&b, "ee", false);
  frag(&b, "four", false);
  put(tb, 7, 1, ETCH_SMB_FIRST_CONTINUES, &b);
  read_all(tb, &g);
  ASSERT_EQ_INT(g.n, 2);
  ASSERT_EQ_STR(g.text[0], "three");
  ASSERT_EQ_STR(g.text[1], "four");
  ASSERT_EQ_INT((int)g.seq[0], 7);
  ASSERT_FALSE(g.dropped[0]);
  read_all(tb, &g);
  ASSERT_EQ_INT(g.n, 0);
  ASSERT_EQ_U64(etch__tracebuf_used(tb), 0);
  etch__tracebuf_free(tb);
}

/* A flush's copy of a chunk still being written, read, then the whole
 * chunk: only what the copy did not have comes out. */
TEST(a_longer_copy_adds_only_what_is_new) {
  etch_tracebuf *tb;
  ASSERT_OK(etch__tracebuf_new(1 << 20, ETCH_BUFFER_RING, &tb));
  chunk_b c = {0};
  frag(&c, "a", false);
  put(tb, 1, 0, 0, &c);
  got g;
  read_all(tb, &g);
  ASSERT_EQ_INT(g.n, 1);
  frag(&c, "b", false);
  frag(&c, "c", false);
  put(tb, 1, 0, 0, &c);
  /* The same copy again, and an older shorter one: nothing new. */
  put(tb, 1, 0, 0, &c);
  read_all(tb, &g);
  ASSERT_EQ_INT(g.n, 2);
  ASSERT_EQ_STR(g.text[0], "b");
  ASSERT_EQ_STR(g.text[1], "c");
  ASSERT_FALSE(g.dropped[0]);
  chunk_b shorter = {0};
  frag(&shorter, "a", false);
  put(tb, 1, 0, 0, &shorter);
  read_all(tb, &g);
  ASSERT_EQ_INT(g.n, 0);
  etch_tracebuf_stats st;
  etch__tracebuf_stats(tb, &st);
  ASSERT_EQ_U64(st.chunks_stale, 2);
  /* Before a read, a longer copy replaces the stored one. */
  chunk_b d = {0};
  frag(&d, "x", false);
  put(tb, 1, 1, 0, &d);
  frag(&d, "y", false);
  put(tb, 1, 1, 0, &d);
  read_all(tb, &g);
  ASSERT_EQ_INT(g.n, 2);
  ASSERT_EQ_STR(g.text[1], "y");
  etch__tracebuf_stats(tb, &st);
  ASSERT_EQ_U64(st.chunks_rewritten, 1);
  etch__tracebuf_free(tb);
}

TEST(a_missing_chunk_cuts_only_its_sequence) {
  etch_tracebuf *tb;
  ASSERT_OK(etch__tracebuf_new(1 << 20, ETCH_BUFFER_RING, &tb));
  chunk_b c0 = {0}, c1 = {0}, c3 = {0}, o = {0};
  frag(&c0, "s0", false);
  frag(&c1, "s1", false);
  frag(&c1, "half", false);
  frag(&c3, "s3", false);
  frag(&o, "other", false);
  put(tb, 5, 0, 0, &c0);
  put(tb, 5, 1, ETCH_SMB_LAST_CONTINUES, &c1); /* its end was in chunk 2 */
  put(tb, 5, 3, 0, &c3);
  put(tb, 6, 0, 0, &o);
  got g;
  read_all(tb, &g);
  ASSERT_EQ_INT(g.n, 4);
  ASSERT_EQ_STR(g.text[0], "s0");
  ASSERT_EQ_STR(g.text[1], "s1");
  ASSERT_EQ_STR(g.text[2], "s3");
  ASSERT_TRUE(g.dropped[2]);
  ASSERT_EQ_STR(g.text[3], "other");
  ASSERT_FALSE(g.dropped[3]);
  /* A sequence whose first chunk is not chunk 0 lost its start. */
  chunk_b late = {0};
  frag(&late, "late", false);
  put(tb, 9, 4, 0, &late);
  read_all(tb, &g);
  ASSERT_EQ_INT(g.n, 1);
  ASSERT_TRUE(g.dropped[0]);
  etch__tracebuf_free(tb);
}

/* A chunk read from a copy taken while it was being written (a flush's
 * scrape, an in-process collect): when the next chunk comes before its
 * whole copy, the tail is lost and the next packet says so; when the
 * whole copy comes, with more in it or not, nothing was lost. */
TEST(a_partial_copy_whose_rest_never_comes_marks_a_loss) {
  const uint32_t P = ETCH_TRACEBUF_PARTIAL;
  for (int how = 0; how < 4; how++) {
    etch_tracebuf *tb;
    ASSERT_OK(etch__tracebuf_new(1 << 20, ETCH_BUFFER_RING, &tb));
    chunk_b c0 = {0}, c1 = {0};
    frag(&c0, "a", false);
    put(tb, 1, 0, P, &c0);
    got g;
    read_all(tb, &g);
    ASSERT_EQ_INT(g.n, 1);
    ASSERT_FALSE(g.dropped[0]);
    if (how == 1) { /* the whole copy, with more in it */
      frag(&c0, "b", false);
      put(tb, 1, 0, 0, &c0);
    } else if (how == 2) { /* the whole copy, nothing more in it */
      put(tb, 1, 0, 0, &c0);
    } else if (how == 3) { /* a longer copy, still partial: then lost */
      frag(&c0, "b", false);
      put(tb, 1, 0, P, &c0);
    }
    frag(&c1, "c", false);
    put(tb, 1, 1, 0, &c1);
    read_all(tb, &g);
    if (how == 1 || how == 3) {
      ASSERT_EQ_INT(g.n, 2);
      ASSERT_EQ_STR(g.text[0], "b");
      ASSERT_FALSE(g.dropped[0]);
      ASSERT_EQ_STR(g.text[1], "c");
      ASSERT_EQ_INT(g.dropped[1], how == 3);
    } else {
      ASSERT_EQ_INT(g.n, 1);
      ASSERT_EQ_STR(g.text[0], "c");
      ASSERT_EQ_INT(g.dropped[0], how == 0);
    }
    etch_tracebuf_stats st;
    etch__tracebuf_stats(tb, &st);
    ASSERT_EQ_U64(st.sequence_gaps, how == 0 || how == 3 ? 1 : 0);
    etch__tracebuf_free(tb);
  }
}

TEST(ring_overwrites_oldest_discard_refuses) {
  etch_tracebuf *tb;
  ASSERT_OK(etch__tracebuf_new(100, ETCH_BUFFER_RING, &tb));
  for (uint32_t i = 0; i < 10; i++) {
    chunk_b c = {0};
    char t[32];
    snprintf(t, sizeof t, "chunk-%u-padding-padding--", i); /* 26 bytes with its size */
    frag(&c, t, false);
    put(tb, 2, i, 0, &c);
  }
  got g;
  read_all(tb, &g);
  ASSERT_EQ_INT(g.n, 3); /* 3 x 26 bytes fit in 100, 4 do not */
  ASSERT_EQ_STR(g.text[0], "chunk-7-padding-padding--");
  ASSERT_TRUE(g.dropped[0]);
  ASSERT_FALSE(g.dropped[1]);
  etch_tracebuf_stats st;
  etch__tracebuf_stats(tb, &st);
  ASSERT_EQ_U64(st.chunks_overwritten, 7);
  ASSERT_EQ_U64(st.bytes_overwritten, 7 * 26);
  etch__tracebuf_free(tb);

  ASSERT_OK(etch__tracebuf_new(100, ETCH_BUFFER_DISCARD, &tb));
  int refused = 0;
  for (uint32_t i = 0; i < 10; i++) {
    chunk_b c = {0};
    frag(&c, "chunk-x-padding-padding..", false);
    int rc = etch__tracebuf_put(tb, 2, i, 0, c.count, c.data, c.len);
    if (rc == ETCH_ELIMIT) refused++;
    else ASSERT_OK(rc);
  }
  ASSERT_EQ_INT(refused, 7);
  read_all(tb, &g);
  ASSERT_EQ_INT(g.n, 3);
  ASSERT_FALSE(g.dropped[0]);
  etch__tracebuf_stats(tb, &st);
  ASSERT_EQ_U64(st.chunks_discarded, 7);
  /* Bigger than the whole buffer. */
  static uint8_t big[200];
  ASSERT_EQ_INT(etch__tracebuf_put(tb, 3, 0, 0, 1, big, sizeof big),
                ETCH_EINVAL);
  etch__tracebuf_free(tb);
}

TEST(patches_in_range_only) {
  etch_tracebuf *tb;
  ASSERT_OK(etch__tracebuf_new(1 << 20, ETCH_BUFFER_RING, &tb));
  chunk_b c = {0};
  frag(&c, "hello", true);
  put(tb, 4, 0, 0, &c);
  ASSERT_OK(etch__tracebuf_patch(tb, 4, 0, 4, (const uint8_t *)"J", 1));
  ASSERT_EQ_INT(etch__tracebuf_patch(tb, 4, 0, 8, (const uint8_t *)"xy", 2),
                ETCH_EINVAL);
  ASSERT_TRUE(strstr(etch_last_error(), "outside chunk 0") != NULL);
  ASSERT_EQ_INT(
      etch__tracebuf_patch(tb, 4, 0, 0xffffffffu, (const uint8_t *)"x", 1),
      ETCH_EINVAL);
  ASSERT_EQ_INT(etch__tracebuf_patch(tb, 4, 1, 0, (const uint8_t *)"x", 1),
                ETCH_ENOTFOUND);
  got g;
  read_all(tb, &g);
  ASSERT_EQ_INT(g.n, 1);
  ASSERT_EQ_STR(g.text[0], "Jello");
  etch_tracebuf_stats st;
  etch__tracebuf_stats(tb, &st);
  ASSERT_EQ_U64(st.patches_succeeded, 1);
  ASSERT_EQ_U64(st.patches_failed, 3);
  etch__tracebuf_free(tb);
}

/* A chunk whose count or sizes lie loses its own data, nothing else. */
TEST(lying_chunks_are_contained) {
  etch_tracebuf *tb;
  ASSERT_OK(etch__tracebuf_new(1 << 20, ETCH_BUFFER_RING, &tb));
  chunk_b ok = {0}, liar = {0}, after = {0};
  frag(&ok, "fine", false);
  put(tb, 1, 0, 0, &ok);
  frag(&liar, "good", false);
  liar.data[liar.len++] = 0x7f; /* 127 bytes claimed, none there */
  liar.count = 5;
  put(tb, 2, 0, 0, &liar);
  /* 5 continuation bytes: no varint of at most 4 bytes */
  chunk_b bad = {0};
  memset(bad.data, 0x80, 5);
  bad.len = 5;
  bad.count = 1;
  put(tb, 3, 0, 0, &bad);
  frag(&after, "next", false);
  put(tb, 2, 1, 0, &after);
  got g;
  read_all(tb, &g);
  ASSERT_EQ_INT(g.n, 3);
  ASSERT_EQ_STR(g.text[0], "fine");
  ASSERT_EQ_STR(g.text[1], "good");
  ASSERT_EQ_STR(g.text[2], "next");
  ASSERT_TRUE(g.dropped[2]);
  etch_tracebuf_stats st;
  etch__tracebuf_stats(tb, &st);
  ASSERT_EQ_U64(st.abi_violations, 2);
  etch__tracebuf_free(tb);
}

typedef struct order {
  uint32_t n, bad, patched, seq, next;
} order;

/* Each sequence's packets "seq.id" in id order, once each. */
static int in_order(void *ctx, uint32_t seq, const uint8_t *d, uint32_t len,
                    bool dropped) {
  order *o = (order *)ctx;
  char t[32];
  if (len >= sizeof t || dropped) {
    o->bad++;
    return ETCH_OK;
  }
  memcpy(t, d, len);
  t[len] = 0;
  if (seq != o->seq) {
    o->seq = seq;
    o->next = 0;
  }
  char want[32];
  snprintf(want, sizeof want, "%u.%u", seq, o->next);
  if (o->next == 250) want[0] = 'X'; /* the patch: offset 1 is the text's
                                          first byte, after its size */
  if (strcmp(t, want) == 0) {
    if (o->next == 250) o->patched++;
  } else {
    o->bad++;
  }
  o->next++;
  o->n++;
  return ETCH_OK;
}

/* Many sequences and chunks: the index keeps finding each one. */
TEST(thousands_of_chunks) {
  etch_tracebuf *tb;
  ASSERT_OK(etch__tracebuf_new(64 << 20, ETCH_BUFFER_RING, &tb));
  for (uint32_t id = 0; id < 500; id++)
    for (uint32_t seq = 1; seq <= 20; seq++) {
      chunk_b c = {0};
      char t[16];
      snprintf(t, sizeof t, "%u.%u", seq, id);
      frag(&c, t, false);
      put(tb, seq, id, 0, &c);
    }
  for (uint32_t seq = 1; seq <= 20; seq++)
    ASSERT_OK(etch__tracebuf_patch(tb, seq, 250, 1, (const uint8_t *)"X", 1));
  etch_tracebuf_stats st;
  etch__tracebuf_stats(tb, &st);
  ASSERT_EQ_U64(st.chunks_written, 10000);
  ASSERT_EQ_U64(st.patches_succeeded, 20);
  order o = {0};
  ASSERT_OK(etch__tracebuf_read(tb, in_order, &o));
  ASSERT_EQ_INT((int)o.n, 10000);
  ASSERT_EQ_INT((int)o.bad, 0);
  ASSERT_EQ_INT((int)o.patched, 20);
  etch__tracebuf_free(tb);
}

/* A packet made of empty fragments across two chunks is padding, not a
 * packet (the fuzzer found it reached the packet callback with no bytes). */
TEST(an_empty_packet_across_chunks_is_padding) {
  etch_tracebuf *tb;
  ASSERT_OK(etch__tracebuf_new(1 << 20, ETCH_BUFFER_RING, &tb));
  chunk_b a = {0}, b = {0};
  frag(&a, "", false);
  frag(&b, "", false);
  frag(&b, "real", false);
  put(tb, 1, 0, ETCH_SMB_LAST_CONTINUES, &a);
  put(tb, 1, 1, ETCH_SMB_FIRST_CONTINUES, &b);
  got g;
  read_all(tb, &g);
  ASSERT_EQ_INT(g.n, 1);
  ASSERT_EQ_STR(g.text[0], "real");
  ASSERT_FALSE(g.dropped[0]);
  etch__tracebuf_free(tb);
}

/* Reading in pieces of a few bytes hands out the same packets in the same
 * order, each once, as one read does (packets across chunks included). */
static void fill_mixed(etch_tracebuf *tb) {
  for (uint32_t seq = 1; seq <= 3; seq++) {
    chunk_b a = {0}, b = {0}, c = {0};
    char t[32];
    for (int k = 0; k < 3; k++) {
      snprintf(t, sizeof t, "s%u-a%d", seq, k);
      frag(&a, t, k == 1);
    }
    frag(&a, "split-", false); /* continues in b */
    frag(&b, "end", false);
    for (int k = 0; k < 2; k++) {
      snprintf(t, sizeof t, "s%u-b%d", seq, k);
      frag(&b, t, false);
    }
    snprintf(t, sizeof t, "s%u-c0", seq);
    frag(&c, t, false);
    put(tb, seq, 0, ETCH_SMB_LAST_CONTINUES, &a);
    put(tb, seq, 1, ETCH_SMB_FIRST_CONTINUES, &b);
    put(tb, seq, 2, 0, &c);
  }
}

TEST(reading_in_pieces_is_reading_once) {
  etch_tracebuf *whole, *pieces;
  ASSERT_OK(etch__tracebuf_new(1 << 20, ETCH_BUFFER_RING, &whole));
  ASSERT_OK(etch__tracebuf_new(1 << 20, ETCH_BUFFER_RING, &pieces));
  fill_mixed(whole);
  fill_mixed(pieces);
  got one, many, part;
  read_all(whole, &one);
  ASSERT_EQ_INT(one.n, 3 * 7);
  memset(&many, 0, sizeof many);
  bool more = true;
  int reads = 0;
  while (more && reads < 100) {
    memset(&part, 0, sizeof part);
    ASSERT_OK(etch__tracebuf_read_some(pieces, collect, &part, 7, &more));
    for (int k = 0; k < part.n; k++) {
      memcpy(many.text[many.n], part.text[k], sizeof part.text[k]);
      many.seq[many.n] = part.seq[k];
      many.dropped[many.n] = part.dropped[k];
      many.n++;
    }
    reads++;
  }
  ASSERT_TRUE(reads > 5);
  ASSERT_EQ_INT(many.n, one.n);
  for (int k = 0; k < one.n; k++) {
    ASSERT_EQ_STR(many.text[k], one.text[k]);
    ASSERT_EQ_INT((int)many.seq[k], (int)one.seq[k]);
    ASSERT_FALSE(many.dropped[k]);
  }
  ASSERT_EQ_U64(etch__tracebuf_used(pieces), 0);
  etch__tracebuf_free(whole);
  etch__tracebuf_free(pieces);
}

/* A drop mark: the size Perfetto's writers put on a fragment whose packet
 * they dropped (no bytes follow). */
static void drop_mark(chunk_b *c) {
  etch__pb_put_redundant4(c->data + c->len, ETCH_SMB_DROP_PACKET);
  c->len += 4;
  c->count++;
}

/* Reads in pieces of `budget` bytes until there is nothing more, at most
 * `limit` reads; the packets into g. Returns the reads it took. */
static int read_pieces(etch_tracebuf *tb, uint64_t budget, got *g, int limit) {
  memset(g, 0, sizeof *g);
  bool more = true;
  int reads = 0;
  while (more && reads < limit) {
    if (etch__tracebuf_read_some(tb, collect, g, budget, &more) != ETCH_OK)
      return -1;
    reads++;
  }
  return more ? -1 : reads;
}

/* A drop mark among a chunk's fragments: the packet it ends is gone and the
 * next says so; read in pieces, every other packet comes out once and the
 * reads end (a read after a drop mark went back before it, handing the
 * same packets out for ever). */
TEST(drop_marks_read_in_pieces_once) {
  etch_tracebuf *tb;
  ASSERT_OK(etch__tracebuf_new(1 << 16, ETCH_BUFFER_RING, &tb));
  chunk_b c = {0};
  drop_mark(&c);
  frag(&c, "a", false);
  drop_mark(&c);
  frag(&c, "b", false);
  frag(&c, "c", false);
  put(tb, 1, 0, 0, &c);
  got g;
  int reads = read_pieces(tb, 1, &g, 100);
  ASSERT_TRUE(reads > 0);
  ASSERT_EQ_INT(g.n, 3);
  ASSERT_EQ_STR(g.text[0], "a");
  ASSERT_EQ_STR(g.text[1], "b");
  ASSERT_EQ_STR(g.text[2], "c");
  ASSERT_TRUE(g.dropped[0]);  /* after the first drop mark */
  ASSERT_TRUE(g.dropped[1]);  /* after the second */
  ASSERT_FALSE(g.dropped[2]);
  ASSERT_EQ_U64(etch__tracebuf_used(tb), 0);
  etch_tracebuf_stats st;
  etch__tracebuf_stats(tb, &st);
  ASSERT_EQ_U64(st.read_stalls, 0);
  etch__tracebuf_free(tb);
}

/* The layout fuzz_tracebuf found (fuzz/corpus/tracebuf/read-pieces-stall):
 * a ring that overwrites a chunk unread (its packets counted lost), the
 * same chunk stored again, its first fragment a drop mark; read in pieces
 * of a byte or two. What was counted lost is not handed out again, and
 * the reads end. */
TEST(a_chunk_counted_lost_and_stored_again_reads_nothing_twice) {
  etch_tracebuf *tb;
  ASSERT_OK(etch__tracebuf_new(128, ETCH_BUFFER_RING, &tb));
  chunk_b x = {0}, y = {0};
  drop_mark(&x);
  for (int k = 0; k < 5; k++) frag(&x, k % 2 ? "p" : "q", false);
  frag(&x, "continued", false);
  while (x.len < 100) { /* padding to take most of the ring */
    x.data[x.len++] = 0;
    x.count++;
  }
  frag(&y, "other", false);
  while (y.len < 40) frag(&y, "", false);
  ASSERT_TRUE(x.len + y.len > 128); /* each put overwrites the other */
  uint32_t both = ETCH_SMB_FIRST_CONTINUES | ETCH_SMB_LAST_CONTINUES;
  put(tb, 1, 3, both, &x);
  put(tb, 0, 3, 0, &y); /* overwrites x unread */
  put(tb, 1, 3, both, &x); /* x again: overwrites y */
  for (uint64_t budget = 1; budget <= 2; budget++) {
    got g;
    int reads = read_pieces(tb, budget, &g, 1000);
    ASSERT_TRUE(reads > 0);
    ASSERT_EQ_INT(g.n, 0); /* all of x was counted lost */
  }
  etch_tracebuf_stats st;
  etch__tracebuf_stats(tb, &st);
  ASSERT_EQ_U64(st.chunks_overwritten, 2);
  ASSERT_EQ_U64(st.read_stalls, 0);
  etch__tracebuf_free(tb);
}

/* Chunks that arrive between the pieces of a read (a new sequence, the
 * next chunk of one being read, a longer copy of one not read yet): the
 * next piece reads them in their place, every packet once. */
TEST(chunks_arriving_between_pieces_are_read_in_order) {
  etch_tracebuf *tb;
  ASSERT_OK(etch__tracebuf_new(1 << 20, ETCH_BUFFER_RING, &tb));
  char t[32];
  for (uint32_t seq = 2; seq <= 4; seq++) {
    chunk_b a = {0};
    for (int k = 0; k < 3; k++) {
      snprintf(t, sizeof t, "s%u-0-%d", seq, k);
      frag(&a, t, false);
    }
    put(tb, seq, 0, 0, &a);
  }
  chunk_b short4 = {0};
  frag(&short4, "s4-1-0", false);
  put(tb, 4, 1, 0, &short4);
  got part;
  bool more;
  memset(&part, 0, sizeof part);
  ASSERT_OK(etch__tracebuf_read_some(tb, collect, &part, 7, &more));
  ASSERT_TRUE(more);
  ASSERT_EQ_INT(part.n, 2); /* 6 + 6 bytes: past the budget at the 2nd */
  ASSERT_EQ_STR(part.text[0], "s2-0-0");
  ASSERT_EQ_STR(part.text[1], "s2-0-1");
  /* Meanwhile: sequence 1 (read before the others now), sequence 2's next
   * chunk, and a longer copy of sequence 4's chunk 1. */
  chunk_b s1 = {0}, s2 = {0}, long4 = {0};
  frag(&s1, "s1-0-0", false);
  put(tb, 1, 0, 0, &s1);
  frag(&s2, "s2-1-0", false);
  put(tb, 2, 1, 0, &s2);
  frag(&long4, "s4-1-0", false);
  frag(&long4, "s4-1-1", false);
  put(tb, 4, 1, 0, &long4);
  got rest;
  memset(&rest, 0, sizeof rest);
  for (int reads = 0; reads < 50; reads++) {
    memset(&part, 0, sizeof part);
    ASSERT_OK(etch__tracebuf_read_some(tb, collect, &part, 7, &more));
    for (int k = 0; k < part.n; k++) {
      memcpy(rest.text[rest.n], part.text[k], sizeof part.text[k]);
      rest.seq[rest.n++] = part.seq[k];
    }
    if (!more) break;
  }
  ASSERT_FALSE(more);
  static const char *const want[] = {"s1-0-0", "s2-0-2", "s2-1-0", "s3-0-0",
                                     "s3-0-1", "s3-0-2", "s4-0-0", "s4-0-1",
                                     "s4-0-2", "s4-1-0", "s4-1-1"};
  ASSERT_EQ_INT(rest.n, (int)(sizeof want / sizeof want[0]));
  for (int k = 0; k < rest.n; k++) ASSERT_EQ_STR(rest.text[k], want[k]);
  ASSERT_EQ_U64(etch__tracebuf_used(tb), 0);
  etch__tracebuf_free(tb);
}

/* ---- the trace-file writer's two outputs ---- */

#include "buffer/tracefile.h"
#include "proto/ipc.h"
#include "proto/perfetto.h"
#include <zlib.h>

static bool test_trust(void *ctx, uint32_t seq, int32_t *pid, int32_t *uid,
                       bool *same_pidns) {
  *same_pidns = false;
  (void)ctx;
  if (seq != 2) return false;
  *pid = 4242;
  *uid = 1001;
  return true;
}

typedef struct packets {
  uint8_t *data[8];
  size_t len[8];
  int n;
  int slices, max_slice;
} packets;

static void packets_free(packets *p) {
  for (int i = 0; i < p->n; i++) free(p->data[i]);
}

static void append(packets *p, const uint8_t *d, size_t n) {
  ASSERT_TRUE(p->n < 8);
  uint8_t *b = (uint8_t *)realloc(p->data[p->n], p->len[p->n] + n + 1);
  ASSERT_TRUE(b != NULL);
  memcpy(b + p->len[p->n], d, n);
  p->data[p->n] = b;
  p->len[p->n] += n;
}

/* Trace.packet records, or ReadBuffersResponse slices put together. */
static void parse_output(const uint8_t *d, size_t n, bool slices, packets *p) {
  memset(p, 0, sizeof *p);
  etch__pb_dec dec;
  etch__pb_field f;
  etch__pb_dec_init(&dec, d, n);
  while (etch__pb_next(&dec, &f)) {
    ASSERT_EQ_INT((int)f.wt, ETCH_PB_LEN);
    if (!slices) {
      ASSERT_EQ_INT((int)f.id, ETCH_TRACE_PACKET);
      append(p, f.data, f.len);
      p->n++;
      continue;
    }
    ASSERT_EQ_INT((int)f.id, ETCH_RBR_SLICES);
    etch__pb_dec sd;
    etch__pb_field g;
    etch__pb_dec_init(&sd, f.data, f.len);
    bool last = false;
    while (etch__pb_next(&sd, &g)) {
      if (g.id == ETCH_RBR_SLICE_DATA) {
        append(p, g.data, g.len);
        p->slices++;
        if ((int)g.len > p->max_slice) p->max_slice = (int)g.len;
      } else if (g.id == ETCH_RBR_SLICE_LAST) {
        last = g.u != 0;
      }
    }
    ASSERT_FALSE(sd.err);
    if (last) p->n++;
  }
  ASSERT_FALSE(dec.err);
}

static void write_packets(etch_tracefile *o, const uint8_t *big, size_t nbig) {
  o->trust = test_trust;
  ASSERT_OK(etch__tracefile_on_packet(o, 2, (const uint8_t *)"\x08\x01", 2,
                                      false));
  /* After a loss: previous_packet_dropped (a reset, so it is kept). */
  uint8_t reset[2] = {(ETCH_PKT_SEQUENCE_FLAGS << 3), 1};
  ASSERT_OK(etch__tracefile_on_packet(o, 2, reset, 2, true));
  ASSERT_OK(etch__tracefile_on_packet(o, 3, big, (uint32_t)nbig, false));
  ASSERT_OK(etch__tracefile_on_packet(o, 2, (const uint8_t *)"\x08\x02", 2,
                                      false));
}

TEST(tracefile_slices_hold_what_records_hold) {
  /* A packet of 200 000 bytes: one string field. */
  size_t nbig = 200000;
  uint8_t *big = (uint8_t *)malloc(nbig);
  ASSERT_TRUE(big != NULL);
  uint8_t *q = big;
  *q++ = 0x0a; /* field 1, 199 996 bytes */
  q = etch__pb_put_varint(q, nbig - 4);
  ASSERT_EQ_INT((int)(q - big), 4);
  for (size_t i = 4; i < nbig; i++) big[i] = (uint8_t)(i * 7);
  etch_tracefile rec, sl;
  etch__tracefile_init(&rec, false);
  etch__tracefile_init(&sl, false);
  sl.slices = true;
  write_packets(&rec, big, nbig);
  write_packets(&sl, big, nbig);
  packets a, b;
  parse_output(etch__pb_buf_data(&rec.out), etch__pb_buf_len(&rec.out), false,
               &a);
  parse_output(etch__pb_buf_data(&sl.out), etch__pb_buf_len(&sl.out), true,
               &b);
  ASSERT_EQ_INT(a.n, 4);
  ASSERT_EQ_INT(b.n, 4);
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ_U64(b.len[i], a.len[i]);
    ASSERT_TRUE(memcmp(a.data[i], b.data[i], a.len[i]) == 0);
  }
  /* The packets and what the writer appended, exactly. */
  static const uint8_t p0[] = {0x08, 0x01,
                               0x18, 0xe9, 0x07,       /* trusted_uid 1001 */
                               0xf8, 0x04, 0x92, 0x21, /* trusted_pid 4242 */
                               0x50, 0x02};            /* sequence 2 */
  ASSERT_EQ_U64(a.len[0], sizeof p0);
  ASSERT_TRUE(memcmp(a.data[0], p0, sizeof p0) == 0);
  static const uint8_t p1[] = {0x68, 0x01, 0x18, 0xe9, 0x07,
                               0xf8, 0x04, 0x92, 0x21, 0x50, 0x02,
                               0xd0, 0x02, 0x01}; /* previous_packet_dropped */
  ASSERT_EQ_U64(a.len[1], sizeof p1);
  ASSERT_TRUE(memcmp(a.data[1], p1, sizeof p1) == 0);
  ASSERT_EQ_U64(a.len[2], nbig + 2); /* sequence 3, unknown: its id only */
  ASSERT_TRUE(memcmp(a.data[2], big, nbig) == 0);
  ASSERT_EQ_INT(a.data[2][nbig], 0x50);
  ASSERT_EQ_INT(a.data[2][nbig + 1], 3);
  /* The large one in slices of at most 64 KiB: 4 of them, 7 in all. */
  ASSERT_EQ_INT(b.slices, 3 + 4);
  ASSERT_EQ_INT(b.max_slice, (int)ETCH_TRACEFILE_SLICE_MAX);
  packets_free(&a);
  packets_free(&b);
  etch__tracefile_free(&rec);
  etch__tracefile_free(&sl);
  free(big);
}

static uint32_t test_machine(void *ctx, uint32_t seq) {
  (void)ctx;
  return seq == 2 ? 0x5540c10fu : 0; /* seq 2 on another machine */
}

/* A service's machine per sequence: stamped after the sequence id on the
 * packets of a machine other than the host, nothing on the host's; a
 * producer's packet that sets machine_id, system_info or remote_clock_sync
 * itself is left out and counted. */
TEST(tracefile_machine_id_stamped_and_never_the_producers) {
  etch_tracefile o;
  etch__tracefile_init(&o, false);
  o.trust = test_trust;
  o.machine = test_machine;
  o.validate = true;
  ASSERT_OK(etch__tracefile_on_packet(&o, 2, (const uint8_t *)"\x08\x01", 2,
                                      false));
  ASSERT_OK(etch__tracefile_on_packet(&o, 3, (const uint8_t *)"\x08\x02", 2,
                                      false));
  /* timestamp 3, machine_id (98) 1: the producer's claim */
  static const uint8_t claim[] = {0x08, 0x03, 0x90, 0x06, 0x01};
  ASSERT_OK(etch__tracefile_on_packet(&o, 3, claim, sizeof claim, false));
  /* A producer's system_info (45) or remote_clock_sync (107) would speak
   * for a machine (its utsname, its clock's offset): the service's too. */
  static const uint8_t sysinfo[] = {0x08, 0x04, 0xea, 0x02, 0x02, 0x0a, 0x00};
  ASSERT_OK(etch__tracefile_on_packet(&o, 3, sysinfo, sizeof sysinfo, false));
  static const uint8_t rcs[] = {0x08, 0x05, 0xda, 0x06, 0x02, 0x0a, 0x00};
  ASSERT_OK(etch__tracefile_on_packet(&o, 3, rcs, sizeof rcs, false));
  packets a;
  parse_output(etch__pb_buf_data(&o.out), etch__pb_buf_len(&o.out), false, &a);
  ASSERT_EQ_INT(a.n, 2);
  static const uint8_t p0[] = {0x08, 0x01,
                               0x18, 0xe9, 0x07,       /* trusted_uid 1001 */
                               0xf8, 0x04, 0x92, 0x21, /* trusted_pid 4242 */
                               0x50, 0x02,             /* sequence 2 */
                               0x90, 0x06,             /* machine_id */
                               0x8f, 0x82, 0x83, 0xaa, 0x05};
  ASSERT_EQ_U64(a.len[0], sizeof p0);
  ASSERT_TRUE(memcmp(a.data[0], p0, sizeof p0) == 0);
  static const uint8_t p1[] = {0x08, 0x02, 0x50, 0x03}; /* the host's */
  ASSERT_EQ_U64(a.len[1], sizeof p1);
  ASSERT_TRUE(memcmp(a.data[1], p1, sizeof p1) == 0);
  ASSERT_EQ_U64(o.invalid_packets, 3);
  packets_free(&a);
  etch__tracefile_free(&o);
}

/* Deflate batches: a file of records; each compressed_packets packet's
 * records inflated into `p` (at most 256 KiB a piece, Perfetto's readers
 * take them under 512 KiB), a plain packet kept as it is. */
static void parse_compressed(const uint8_t *d, size_t n, packets *p,
                             int *pieces, int *plain) {
  packets top;
  parse_output(d, n, false, &top);
  memset(p, 0, sizeof *p);
  *pieces = *plain = 0;
  for (int i = 0; i < top.n; i++) {
    etch__pb_dec dec;
    etch__pb_field f;
    etch__pb_dec_init(&dec, top.data[i], top.len[i]);
    ASSERT_TRUE(etch__pb_next(&dec, &f));
    if (f.id != ETCH_PKT_COMPRESSED_PACKETS) {
      (*plain)++;
      ASSERT_TRUE(p->n < 8);
      append(p, top.data[i], top.len[i]);
      p->n++;
      continue;
    }
    ASSERT_FALSE(etch__pb_next(&dec, &f)); /* its only field */
    (*pieces)++;
    uLongf cap = ETCH_TRACEFILE_BATCH;
    uint8_t *z = (uint8_t *)malloc(cap);
    ASSERT_TRUE(z != NULL);
    etch__pb_dec_init(&dec, top.data[i], top.len[i]);
    ASSERT_TRUE(etch__pb_next(&dec, &f));
    ASSERT_EQ_INT(uncompress(z, &cap, f.data, (uLong)f.len), Z_OK);
    packets in;
    parse_output(z, cap, false, &in);
    for (int k = 0; k < in.n; k++) {
      ASSERT_TRUE(p->n < 8);
      append(p, in.data[k], in.len[k]);
      p->n++;
    }
    packets_free(&in);
    free(z);
  }
  packets_free(&top);
}

/* A packet larger than a deflate batch between small ones: the batch
 * before it is written, then it alone as a plain record, then the rest in
 * a batch of their own; no compressed piece holds more than a batch, and
 * the packets come out in their order, whole. */
TEST(tracefile_deflate_pieces_hold_at_most_a_batch) {
  size_t nbig = 600 * 1024;
  uint8_t *big = (uint8_t *)malloc(nbig);
  ASSERT_TRUE(big != NULL);
  uint8_t *q = big;
  *q++ = 0x0a;
  q = etch__pb_put_varint(q, nbig - 4);
  ASSERT_EQ_INT((int)(q - big), 4);
  for (size_t i = 4; i < nbig; i++) big[i] = (uint8_t)(i * 7);
  etch_tracefile o;
  etch__tracefile_init(&o, true);
  write_packets(&o, big, nbig);
  uint8_t *file;
  size_t len;
  ASSERT_OK(etch__tracefile_finish(&o, &file, &len));
  packets a;
  int pieces, plain;
  parse_compressed(file, len, &a, &pieces, &plain);
  ASSERT_EQ_INT(pieces, 2);
  ASSERT_EQ_INT(plain, 1);
  ASSERT_EQ_INT(a.n, 4);
  static const uint8_t p0[] = {0x08, 0x01, 0x18, 0xe9, 0x07, 0xf8,
                               0x04, 0x92, 0x21, 0x50, 0x02};
  ASSERT_EQ_U64(a.len[0], sizeof p0);
  ASSERT_TRUE(memcmp(a.data[0], p0, sizeof p0) == 0);
  ASSERT_EQ_U64(a.len[2], nbig + 2);
  ASSERT_TRUE(memcmp(a.data[2], big, nbig) == 0);
  ASSERT_EQ_INT(a.data[2][nbig], 0x50);
  ASSERT_EQ_INT(a.data[2][nbig + 1], 3);
  static const uint8_t p3[] = {0x08, 0x02, 0x18, 0xe9, 0x07, 0xf8,
                               0x04, 0x92, 0x21, 0x50, 0x02};
  ASSERT_EQ_U64(a.len[3], sizeof p3);
  ASSERT_TRUE(memcmp(a.data[3], p3, sizeof p3) == 0);
  packets_free(&a);
  free(file);
  free(big);
}

/* ---- reading by runs ---------------------------------------------------------- */

static uint64_t rng_next(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

/*
 * Random chunks of four sequences (fragments of 0 to 300 bytes, so one- and
 * two-byte sizes; packets across chunks; now and then a chunk missing, a
 * fragment size that runs past the chunk, a count of 0, a chunk of padding
 * alone, a chunk sent twice) put into two
 * buffers. One is read packet by packet, the other by runs, each in pieces
 * of a random budget into a trace file (with trusted fields; a packet that
 * follows lost data goes the general way), as records or as reply slices:
 * the files must be the same bytes, and so must what the two buffers
 * count. Then the same for a packet larger than a slice among small ones.
 */
TEST(reading_by_runs_is_reading_packet_by_packet) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  static uint8_t data[8192];
  for (int round = 0; round < 300; round++) {
    etch_tracebuf *a, *b;
    ASSERT_OK(etch__tracebuf_new(1 << 24, ETCH_BUFFER_DISCARD, &a));
    ASSERT_OK(etch__tracebuf_new(1 << 24, ETCH_BUFFER_DISCARD, &b));
    uint32_t next_id[4] = {0, 0, 0, 0};
    bool cont[4] = {false, false, false, false};
    int nchunks = 1 + (int)(rng_next(&x) % 60);
    for (int k = 0; k < nchunks; k++) {
      uint32_t seq = 1 + (uint32_t)(rng_next(&x) % 4);
      uint32_t id = next_id[seq - 1]++;
      if (rng_next(&x) % 40 == 0) id = next_id[seq - 1]++; /* one missing */
      uint32_t flags = cont[seq - 1] ? ETCH_SMB_FIRST_CONTINUES : 0;
      uint32_t len = 0, count = 0, nfrag = 1 + (uint32_t)(rng_next(&x) % 40);
      for (uint32_t f = 0; f < nfrag; f++) {
        uint32_t n = (uint32_t)(rng_next(&x) % (rng_next(&x) % 4 ? 40 : 300));
        if (len + 3 + n > sizeof data) break;
        data[len] = (uint8_t)(n < 0x80 ? n : (n & 0x7f) | 0x80);
        if (n >= 0x80) data[++len] = (uint8_t)(n >> 7);
        len++;
        for (uint32_t i = 0; i < n; i++) data[len + i] = (uint8_t)rng_next(&x);
        len += n;
        count++;
      }
      if (count && rng_next(&x) % 50 == 0) data[0] = 0x7f; /* runs past */
      if (rng_next(&x) % 30 == 0) { /* padding alone */
        data[0] = 0;
        len = count = 1;
      }
      if (rng_next(&x) % 40 == 0) count = 0; /* a count that lies */
      cont[seq - 1] = rng_next(&x) % 4 == 0;
      if (cont[seq - 1]) flags |= ETCH_SMB_LAST_CONTINUES;
      for (int twice = 0; twice < (rng_next(&x) % 30 ? 1 : 2); twice++) {
        ASSERT_OK(etch__tracebuf_put(a, seq, id, flags, count, data, len));
        ASSERT_OK(etch__tracebuf_put(b, seq, id, flags, count, data, len));
      }
    }
    etch_tracefile fa, fb;
    etch__tracefile_init(&fa, false);
    etch__tracefile_init(&fb, false);
    fa.trust = fb.trust = test_trust;
    fa.slices = fb.slices = round % 2; /* a consumer's reply slices */
    uint64_t budget = 1 + rng_next(&x) % 3000;
    bool more_a = true, more_b = true;
    while (more_a || more_b) { /* piece by piece, the same pieces */
      ASSERT_OK(etch__tracebuf_read_some(a, etch__tracefile_on_packet, &fa,
                                         budget, &more_a));
      ASSERT_OK(etch__tracebuf_read_runs(b, etch__tracefile_on_packet,
                                         etch__tracefile_on_run, &fb, budget,
                                         &more_b));
      ASSERT_TRUE(more_a == more_b);
      ASSERT_EQ_U64(etch__pb_buf_len(&fa.out), etch__pb_buf_len(&fb.out));
    }
    size_t la = etch__pb_buf_len(&fa.out), lb = etch__pb_buf_len(&fb.out);
    if (la != lb ||
        memcmp(etch__pb_buf_data(&fa.out), etch__pb_buf_data(&fb.out), la))
      FAIL("round %d: %zu bytes packet by packet, %zu by runs", round, la, lb);
    ASSERT_EQ_U64(fa.skipped, fb.skipped);
    etch_tracebuf_stats sa, sb;
    etch__tracebuf_stats(a, &sa);
    etch__tracebuf_stats(b, &sb);
    ASSERT_TRUE(memcmp(&sa, &sb, sizeof sa) == 0);
    etch__tracefile_free(&fa);
    etch__tracefile_free(&fb);
    etch__tracebuf_free(a);
    etch__tracebuf_free(b);
  }
  /* 3 small packets, one of 70 000 bytes (two slices), 2 small ones. */
  size_t big = 70000, len = 0;
  uint8_t *d = (uint8_t *)malloc(big + 64);
  ASSERT_TRUE(d != NULL);
  for (int k = 0; k < 6; k++) {
    size_t n = k == 3 ? big : 5;
    len = (size_t)(etch__pb_put_varint(d + len, n) - d);
    for (size_t i = 0; i < n; i++) d[len + i] = (uint8_t)(i + (size_t)k);
    len += n;
  }
  etch_tracefile f[2];
  for (int runs = 0; runs < 2; runs++) {
    etch_tracebuf *tb;
    ASSERT_OK(etch__tracebuf_new(1 << 20, ETCH_BUFFER_DISCARD, &tb));
    ASSERT_OK(etch__tracebuf_put(tb, 2, 0, 0, 6, d, (uint32_t)len));
    etch__tracefile_init(&f[runs], false);
    f[runs].trust = test_trust;
    f[runs].slices = true;
    bool more;
    ASSERT_OK(etch__tracebuf_read_runs(tb, etch__tracefile_on_packet,
                                       runs ? etch__tracefile_on_run : NULL,
                                       &f[runs], UINT64_MAX, &more));
    etch__tracebuf_free(tb);
  }
  ASSERT_EQ_U64(etch__pb_buf_len(&f[0].out), etch__pb_buf_len(&f[1].out));
  ASSERT_TRUE(memcmp(etch__pb_buf_data(&f[0].out), etch__pb_buf_data(&f[1].out),
                     etch__pb_buf_len(&f[0].out)) == 0);
  packets pk;
  parse_output(etch__pb_buf_data(&f[1].out), etch__pb_buf_len(&f[1].out), true,
               &pk);
  ASSERT_EQ_INT(pk.n, 6);
  ASSERT_EQ_U64(pk.len[3], big + 9); /* and sequence 2's trusted fields */
  ASSERT_EQ_INT(pk.slices, 5 + 2);
  packets_free(&pk);
  etch__tracefile_free(&f[0]);
  etch__tracefile_free(&f[1]);
  free(d);
}

/*
 * A chunk of padding alone between two reads of a sequence that lost data:
 * no packet, so the trace-file writer still knows that sequence 3 lost its
 * incremental state, and leaves out the packet that needs it, both ways.
 */
TEST(padding_between_reads_changes_nothing) {
  for (int runs = 0; runs < 2; runs++) {
    etch_tracebuf *tb;
    ASSERT_OK(etch__tracebuf_new(1 << 20, ETCH_BUFFER_DISCARD, &tb));
    etch_tracefile o;
    etch__tracefile_init(&o, false);
    static const uint8_t first[] = {2, 0x08, 0x01};     /* after a loss */
    static const uint8_t pad[] = {0};                   /* padding */
    static const uint8_t needs[] = {2, 0x68, 0x02};     /* needs the state */
    ASSERT_OK(etch__tracebuf_put(tb, 3, 1, 0, 1, first, sizeof first));
    bool more;
    ASSERT_OK(etch__tracebuf_read_runs(tb, etch__tracefile_on_packet,
                                       runs ? etch__tracefile_on_run : NULL,
                                       &o, UINT64_MAX, &more));
    ASSERT_OK(etch__tracebuf_put(tb, 1, 0, 0, 1, pad, sizeof pad));
    ASSERT_OK(etch__tracebuf_put(tb, 3, 2, 0, 1, needs, sizeof needs));
    ASSERT_OK(etch__tracebuf_read_runs(tb, etch__tracefile_on_packet,
                                       runs ? etch__tracefile_on_run : NULL,
                                       &o, UINT64_MAX, &more));
    /* 0a 07 | 08 01 | 50 03 | d0 02 01: the first packet, its sequence and
     * the loss; the second is left out. */
    static const uint8_t want[] = {0x0a, 0x07, 0x08, 0x01, 0x50,
                                   0x03, 0xd0, 0x02, 0x01};
    ASSERT_EQ_U64(etch__pb_buf_len(&o.out), sizeof want);
    ASSERT_TRUE(memcmp(etch__pb_buf_data(&o.out), want, sizeof want) == 0);
    ASSERT_EQ_U64(o.skipped, 1);
    etch__tracefile_free(&o);
    etch__tracebuf_free(tb);
  }
}

/* ---- important events: the first copy of each ---------------------------- */

/* A TracePacket as etch writes an important event: timestamp_clock_id first
 * (the writer's mark; `marked` false: the timestamp first, as any other
 * packet), sequence flags, interned data if `interned`, then a track event
 * with debug annotation etch.important = id. */
static size_t important_packet(uint8_t *buf, size_t cap, bool marked,
                               uint64_t flags, bool interned, uint64_t id) {
  etch__pb_stream s;
  etch__pb_fixed_init(&s, buf, cap);
  if (marked) etch__pb_write_varint_field(&s, ETCH_PKT_TIMESTAMP_CLOCK_ID, 6);
  etch__pb_write_varint_field(&s, ETCH_PKT_TIMESTAMP, 1000);
  if (!marked) etch__pb_write_varint_field(&s, ETCH_PKT_TIMESTAMP_CLOCK_ID, 6);
  etch__pb_write_varint_field(&s, ETCH_PKT_SEQUENCE_FLAGS, flags);
  etch__pb_nested n, a;
  if (interned) {
    etch__pb_nested_begin(&s, ETCH_PKT_INTERNED_DATA, &n);
    etch__pb_write_bytes_field(&s, 2, "\x08\x01\x12\x01x", 5);
    etch__pb_nested_end(&s, &n);
  }
  etch__pb_nested_begin(&s, ETCH_PKT_TRACK_EVENT, &n);
  etch__pb_write_varint_field(&s, ETCH_TE_TYPE, 3);
  etch__pb_nested_begin(&s, ETCH_TE_DEBUG_ANNOTATIONS, &a);
  etch__pb_write_bytes_field(&s, ETCH_DA_NAME, "etch.important", 14);
  etch__pb_write_varint_field(&s, ETCH_DA_UINT_VALUE, id);
  etch__pb_nested_end(&s, &a);
  etch__pb_nested_end(&s, &n);
  ASSERT_FALSE(s.failed);
  return (size_t)(s.cur - buf);
}

/* One record of the file: its important id (0: no track event), whether
 * it has interned data and previous_packet_dropped. */
typedef struct imp_rec {
  uint64_t id;
  bool interned, dropped;
} imp_rec;

static size_t imp_records(etch_tracefile *o, imp_rec *out, size_t cap) {
  etch__pb_dec d, p;
  etch__pb_field f, g;
  size_t n = 0;
  etch__pb_dec_init(&d, etch__pb_buf_data(&o->out), etch__pb_buf_len(&o->out));
  while (etch__pb_next(&d, &f)) {
    ASSERT_TRUE(f.id == ETCH_TRACE_PACKET && n < cap);
    imp_rec r = {etch__packet_important_id(f.data, f.len), false, false};
    etch__pb_dec_init(&p, f.data, f.len);
    while (etch__pb_next(&p, &g)) {
      if (g.id == ETCH_PKT_INTERNED_DATA) r.interned = true;
      if (g.id == ETCH_PKT_PREVIOUS_PACKET_DROPPED) r.dropped = true;
    }
    ASSERT_EQ_INT(p.err, 0);
    out[n++] = r;
  }
  ASSERT_EQ_INT(d.err, 0);
  return n;
}

/* Copies of important event 7 on two sequences: the first goes in whole, a
 * later one with interned data goes in without its track event, a later one
 * without goes nowhere (the loss it carried moves to the next packet), and
 * a packet without the mark is not looked at. Through a run of packets the
 * same. With the service's trust, copies of two processes are two events. */
TEST(tracefile_keeps_the_first_copy_of_an_important_event) {
  static uint8_t p[5][128];
  size_t l[5];
  const uint64_t S = ETCH_SEQ_NEEDS_INCREMENTAL_STATE;
  const uint64_t C = S | ETCH_SEQ_INCREMENTAL_STATE_CLEARED;
  l[0] = important_packet(p[0], sizeof p[0], true, S, false, 7); /* seq 2 */
  l[1] = important_packet(p[1], sizeof p[1], true, C, true, 7);  /* seq 3 */
  l[2] = important_packet(p[2], sizeof p[2], true, C, false, 7); /* seq 3 */
  l[3] = important_packet(p[3], sizeof p[3], true, S, false, 8); /* seq 3 */
  l[4] = important_packet(p[4], sizeof p[4], false, S, false, 7); /* seq 2 */
  static const uint32_t seq[5] = {2, 3, 3, 3, 2};
  for (int mode = 0; mode < 3; mode++) {
    etch_tracefile o;
    etch__tracefile_init(&o, false);
    if (mode == 2) o.trust = test_trust; /* seq 2: pid 4242, 3: unknown */
    for (int i = 0; i < 5; i++) {
      if (mode == 1) { /* as a run of whole packets */
        uint8_t run[160];
        run[0] = (uint8_t)l[i];
        memcpy(run + 1, p[i], l[i]);
        ASSERT_OK(etch__tracefile_on_run(&o, seq[i], run,
                                         (uint32_t)l[i] + 1, 1));
      } else {
        ASSERT_OK(etch__tracefile_on_packet(&o, seq[i], p[i], (uint32_t)l[i],
                                            i == 2));
      }
    }
    imp_rec r[8];
    size_t n = imp_records(&o, r, 8);
    ASSERT_EQ_U64(o.important_left_out, 1); /* C */
    if (mode == 2) { /* two processes: both kept whole, then as above */
      ASSERT_EQ_U64(n, 4);
      ASSERT_TRUE(r[0].id == 7 && r[1].id == 7 && r[1].interned);
      ASSERT_TRUE(r[2].id == 8 && r[2].dropped);
      ASSERT_EQ_U64(r[3].id, 7);
    } else {
      ASSERT_EQ_U64(n, 4);
      ASSERT_TRUE(r[0].id == 7 && !r[0].interned);
      ASSERT_TRUE(r[1].id == 0 && r[1].interned); /* the track event out */
      ASSERT_EQ_U64(r[2].id, 8);
      ASSERT_EQ_INT(r[2].dropped, mode == 0); /* C's loss, moved */
      ASSERT_EQ_U64(r[3].id, 7); /* unmarked: not looked at */
    }
    etch__tracefile_free(&o);
  }
}

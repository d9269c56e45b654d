/*
 * inproc_test.c - the in-process trace buffer (src/buffer/buffer.c): chunks
 * handed out in a ring or until full, packets read back across chunks in
 * chunk-id order per writer, losses marked, and chunks whose header or
 * fragments lie read without harm.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer/buffer.h"
#include "test.h"

/* Appends a fragment (a one-byte size, then the text) to a chunk. */
static uint32_t frag(etch_chunk *c, uint32_t used, const char *text) {
  uint8_t *p = etch__chunk_payload(c) + used;
  uint32_t n = (uint32_t)strlen(text);
  p[0] = (uint8_t)n;
  memcpy(p + 1, text, n);
  return used + 1 + n;
}

typedef struct got {
  char log[1024];
} got;

static int collect(void *ctx, uint32_t writer, const uint8_t *d, uint32_t len,
                   bool dropped) {
  got *g = (got *)ctx;
  size_t l = strlen(g->log);
  snprintf(g->log + l, sizeof g->log - l, "%u:%.*s%s ", writer, (int)len,
           (const char *)d, dropped ? "!" : "");
  return ETCH_OK;
}

static void read_all(etch_buffer *b, got *g, uint64_t *lost) {
  memset(g, 0, sizeof *g);
  ASSERT_OK(etch__buffer_read(b, collect, g, lost));
}

/* 16 KiB: four chunks of 4 KiB. */
TEST(inproc_packets_across_chunks_in_order_per_writer) {
  etch_buffer b;
  ASSERT_OK(etch__buffer_init(&b, 16384, ETCH_BUFFER_DISCARD));
  ASSERT_EQ_U64(b.nchunks, 4);
  ASSERT_EQ_U64(b.chunk_size, 4096);
  /* Writer 7's chunk 1 is handed out before its chunk 0 is read: reading
   * goes by chunk id, not by place in memory. */
  etch_chunk *w2 = etch__buffer_acquire(&b, 9, 0, 0);
  etch_chunk *c1 = etch__buffer_acquire(&b, 7, 1, ETCH_CHUNK_FIRST_CONTINUES);
  etch_chunk *c0 = etch__buffer_acquire(&b, 7, 0, 0);
  ASSERT_TRUE(w2 && c1 && c0);
  uint32_t u = frag(c0, 0, "alpha");
  u = frag(c0, u, "be"); /* "be" + "ta": one packet across two chunks */
  etch__chunk_publish(c0, u, ETCH_CHUNK_LAST_CONTINUES);
  u = frag(c1, 0, "ta");
  u = frag(c1, u, "gamma");
  etch__chunk_publish(c1, u, ETCH_CHUNK_FIRST_CONTINUES);
  etch__chunk_publish(w2, frag(w2, 0, "other"), 0);
  etch__buffer_complete(c0);
  etch__buffer_complete(c1);
  /* w2 is still being written: its committed part is read. */
  got g;
  uint64_t lost;
  read_all(&b, &g, &lost);
  ASSERT_EQ_STR(g.log, "7:alpha 7:beta 7:gamma 9:other ");
  ASSERT_EQ_U64(lost, 0);
  /* Full: a fifth chunk is refused. */
  ASSERT_TRUE(etch__buffer_acquire(&b, 9, 1, 0) != NULL);
  ASSERT_TRUE(etch__buffer_acquire(&b, 9, 2, 0) == NULL);
  etch__buffer_destroy(&b);
}

TEST(inproc_ring_overwrites_oldest_and_marks_the_loss) {
  etch_buffer b;
  ASSERT_OK(etch__buffer_init(&b, 8192, ETCH_BUFFER_RING));
  ASSERT_EQ_U64(b.nchunks, 2);
  char text[3][16];
  for (uint32_t id = 0; id < 3; id++) {
    etch_chunk *c = etch__buffer_acquire(&b, 5, id,
                                         id == 2 ? ETCH_CHUNK_FIRST_CONTINUES
                                                 : 0);
    ASSERT_TRUE(c != NULL);
    snprintf(text[id], sizeof text[id], "p%u", id);
    uint32_t u = 0;
    /* Chunk 2 starts with the end of a packet that began in chunk 1, which
     * did not say so: a continuation with no start, counted as lost. */
    if (id == 2) u = frag(c, u, "tail");
    u = frag(c, u, text[id]);
    etch__chunk_publish(c, u, id == 2 ? ETCH_CHUNK_FIRST_CONTINUES : 0);
    etch__buffer_complete(c);
  }
  etch_buffer_stats st;
  etch__buffer_get_stats(&b, &st);
  ASSERT_EQ_U64(st.chunks_written, 3);
  ASSERT_EQ_U64(st.chunks_overwritten, 1);
  got g;
  uint64_t lost;
  read_all(&b, &g, &lost);
  /* Chunk 0 is gone: the first packet read says data was lost before it;
   * so does p2, after the orphan tail (a packet lost). */
  ASSERT_EQ_STR(g.log, "5:p1! 5:p2! ");
  ASSERT_EQ_U64(lost, 1);
  etch__buffer_destroy(&b);
}

TEST(inproc_lying_chunks_are_contained) {
  etch_buffer b;
  ASSERT_OK(etch__buffer_init(&b, 16384, ETCH_BUFFER_DISCARD));
  etch_chunk *a = etch__buffer_acquire(&b, 1, 0, 0);
  etch_chunk *c = etch__buffer_acquire(&b, 2, 0, 0);
  etch_chunk *d = etch__buffer_acquire(&b, 3, 0, 0);
  ASSERT_TRUE(a && c && d);
  /* A length past the payload: the chunk is read as empty. */
  etch__chunk_publish(a, frag(a, 0, "fine"), 0);
  __atomic_store_n(&a->used, ETCH_CHUNK_USED_MASK, __ATOMIC_RELEASE);
  /* A fragment that claims more bytes than the chunk committed: what is
   * before it is read, the rest of the chunk dropped and counted. */
  uint32_t u = frag(c, 0, "ok");
  uint8_t *p = etch__chunk_payload(c) + u;
  p[0] = 100;
  memcpy(p + 1, "short", 5);
  etch__chunk_publish(c, u + 6, 0);
  /* A truncated varint as the last byte. */
  u = frag(d, 0, "kept");
  etch__chunk_payload(d)[u] = 0x80;
  etch__chunk_publish(d, u + 1, 0);
  got g;
  uint64_t lost;
  read_all(&b, &g, &lost);
  ASSERT_EQ_STR(g.log, "2:ok 3:kept ");
  ASSERT_EQ_U64(lost, 2);
  etch__buffer_destroy(&b);
}

/* A packet made only of empty fragments across two chunks (a writer that
 * cut a packet where nothing was left to write): padding, as one empty
 * fragment is and as the service's buffer reads it; the packet after it
 * whole (the empty copy once reached memcpy with a null
 * pointer, found by fuzz_buffer under UBSan). */
TEST(inproc_empty_fragments_across_chunks) {
  etch_buffer b;
  ASSERT_OK(etch__buffer_init(&b, 16384, ETCH_BUFFER_DISCARD));
  etch_chunk *c0 = etch__buffer_acquire(&b, 4, 0, 0);
  etch_chunk *c1 = etch__buffer_acquire(&b, 4, 1, ETCH_CHUNK_FIRST_CONTINUES);
  ASSERT_TRUE(c0 && c1);
  uint32_t u = frag(c0, 0, "first");
  u = frag(c0, u, "");
  etch__chunk_publish(c0, u, ETCH_CHUNK_LAST_CONTINUES);
  u = frag(c1, 0, "");
  u = frag(c1, u, "after");
  etch__chunk_publish(c1, u, ETCH_CHUNK_FIRST_CONTINUES);
  got g;
  uint64_t lost;
  read_all(&b, &g, &lost);
  ASSERT_EQ_STR(g.log, "4:first 4:after ");
  ASSERT_EQ_U64(lost, 0);
  etch__buffer_destroy(&b);
}

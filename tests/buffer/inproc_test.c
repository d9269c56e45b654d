/*
 * inproc_test.c - the in-process trace buffer (src/buffer/buffer.c): chunks
 * handed out in a ring or until full, packets read back across chunks in
 * chunk-id order per writer, losses marked, chunks whose header or
 * fragments lie read without harm, and a streaming discard buffer that
 * hands out the chunk its collect freed last.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/containers.h"
#include "buffer/buffer.h"
#include "buffer/tracebuf.h"
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

static uint32_t index_of(const etch_buffer *b, const etch_chunk *c) {
  return (uint32_t)(((const uint8_t *)c - b->mem) / b->chunk_size);
}

/* A streaming discard buffer (collected while it records) hands out the
 * chunk the last collect freed before one it never used, and one never
 * used before saying it is full: a session that keeps up writes over the
 * same few chunks (warm in the cache, the rest of the buffer never
 * touched). Every packet still comes out once, in order. */
TEST(inproc_recycled_buffer_reuses_the_chunk_freed_last) {
  etch_buffer b;
  ASSERT_OK(etch__buffer_init(&b, 8 * 4096, ETCH_BUFFER_DISCARD));
  ASSERT_EQ_U64(b.nchunks, 8);
  etch_chunk *a = etch__buffer_acquire(&b, 1, 0, 0); /* before streaming */
  ASSERT_TRUE(a != NULL);
  ASSERT_EQ_U64(index_of(&b, a), 0);
  etch__buffer_recycle(&b);
  etch_tracebuf *tb;
  ASSERT_OK(etch__tracebuf_new(1 << 20, ETCH_BUFFER_RING, &tb));
  uint32_t freed;

  /* Writer 1 fills chunk 0 and takes a fresh one (1). */
  etch__chunk_publish(a, frag(a, 0, "p0"), 0);
  etch__buffer_complete(a);
  etch_chunk *c = etch__buffer_acquire(&b, 1, 1, 0);
  ASSERT_EQ_U64(index_of(&b, c), 1);
  ASSERT_OK(etch__buffer_collect(&b, tb, &freed));
  ASSERT_EQ_U64(freed, 1); /* chunk 0; chunk 1 is being written */
  for (uint32_t id = 1; id < 40; id++) {
    char text[8];
    snprintf(text, sizeof text, "p%u", id);
    etch__chunk_publish(c, frag(c, 0, text), 0);
    etch__buffer_complete(c);
    etch_chunk *n = etch__buffer_acquire(&b, 1, id + 1, 0);
    ASSERT_TRUE(n != NULL);
    /* The chunk freed by the last collect: 0 and 1 in turn, never 2. */
    ASSERT_EQ_U64(index_of(&b, n), id % 2 ? 0 : 1);
    ASSERT_OK(etch__buffer_collect(&b, tb, &freed));
    ASSERT_EQ_U64(freed, 1);
    c = n;
  }
  ASSERT_EQ_U64(b.next, 2); /* chunks 2..7 never handed out */

  /* Without a collect: the chunk the last collect freed (1), then the
   * never-used ones in order, then the buffer is full. */
  etch__chunk_publish(c, frag(c, 0, "p40"), 0);
  etch__buffer_complete(c);
  for (uint32_t k = 0; k < 7; k++) {
    etch_chunk *n = etch__buffer_acquire(&b, 2, k, 0);
    ASSERT_TRUE(n != NULL);
    ASSERT_EQ_U64(index_of(&b, n), 1 + k);
    char text[8];
    snprintf(text, sizeof text, "q%u", k);
    etch__chunk_publish(n, frag(n, 0, text), 0);
    etch__buffer_complete(n);
  }
  ASSERT_TRUE(etch__buffer_acquire(&b, 3, 0, 0) == NULL);
  ASSERT_OK(etch__buffer_collect(&b, tb, &freed));
  ASSERT_EQ_U64(freed, 8);
  /* Free again: the last chunk this collect freed comes first. */
  etch_chunk *n = etch__buffer_acquire(&b, 3, 0, 0);
  ASSERT_TRUE(n != NULL);
  ASSERT_EQ_U64(index_of(&b, n), 7);

  got g;
  memset(&g, 0, sizeof g);
  ASSERT_OK(etch__tracebuf_read(tb, collect, &g));
  char want[1024] = "";
  for (uint32_t id = 0; id <= 40; id++)
    snprintf(want + strlen(want), sizeof want - strlen(want), "1:p%u ", id);
  for (uint32_t k = 0; k < 7; k++)
    snprintf(want + strlen(want), sizeof want - strlen(want), "2:q%u ", k);
  ASSERT_EQ_STR(g.log, want);
  etch__tracebuf_free(tb);
  etch__buffer_destroy(&b);
}

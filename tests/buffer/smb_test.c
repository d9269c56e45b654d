/*
 * smb_test.c - the shared memory buffer in Perfetto's layout: exact offsets,
 * sizes and header bytes, every state change, hostile chunk contents, and a
 * producer/service pair moving chunks through it from two threads.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "buffer/smb.h"
#include "etch/etch.h"
#include "test.h"

TEST(chunk_sizes_per_layout) {
  ASSERT_EQ_INT(etch__smb_chunk_size(4096, ETCH_SMB_DIV1), 4088);
  ASSERT_EQ_INT(etch__smb_chunk_size(4096, ETCH_SMB_DIV2), 2044);
  ASSERT_EQ_INT(etch__smb_chunk_size(4096, ETCH_SMB_DIV4), 1020);
  ASSERT_EQ_INT(etch__smb_chunk_size(4096, ETCH_SMB_DIV7), 584);
  ASSERT_EQ_INT(etch__smb_chunk_size(4096, ETCH_SMB_DIV14), 292);
  ASSERT_EQ_INT(etch__smb_chunk_size(65536, ETCH_SMB_DIV14), 4680);
  ASSERT_EQ_INT(etch__smb_chunk_size(4096, 0), 0);
  ASSERT_EQ_INT(etch__smb_chunk_size(4096, 6), 0);
  ASSERT_EQ_INT(etch__smb_chunk_size(4096, 7), 0);
  ASSERT_EQ_INT(etch__smb_layout_chunks(ETCH_SMB_DIV7), 7);
}

TEST(geometry_is_checked) {
  static uint8_t mem[8192];
  etch_smb m;
  ASSERT_EQ_INT(etch__smb_init(&m, mem, sizeof mem, 3000), ETCH_EINVAL);
  ASSERT_EQ_STR(etch_last_error(),
                "shared memory buffer: page size 3000 is not a multiple of 4 "
                "KiB between 4 and 64 KiB");
  ASSERT_EQ_INT(etch__smb_init(&m, mem, 1u << 20, 69632), ETCH_EINVAL);
  ASSERT_EQ_INT(etch__smb_init(&m, mem, 6000, 4096), ETCH_EINVAL);
  ASSERT_EQ_STR(etch_last_error(),
                "shared memory buffer: size 6000 is not a non-zero multiple "
                "of the page size 4096");
  ASSERT_OK(etch__smb_init(&m, mem, sizeof mem, 4096));
  ASSERT_EQ_INT(m.npages, 2);
}

TEST(states_change_as_the_abi_says) {
  static uint8_t mem[8192] __attribute__((aligned(8)));
  memset(mem, 0, sizeof mem);
  etch_smb m;
  ASSERT_OK(etch__smb_init(&m, mem, sizeof mem, 4096));
  /* Not partitioned: no chunk can be had. */
  ASSERT_TRUE(etch__smb_try_acquire_write(&m, 1, 0, 1, 0, 0) == NULL);
  ASSERT_TRUE(etch__smb_try_partition(&m, 1, ETCH_SMB_DIV4));
  ASSERT_FALSE(etch__smb_try_partition(&m, 1, ETCH_SMB_DIV2)); /* taken */
  ASSERT_FALSE(etch__smb_try_partition(&m, 0, 6));              /* reserved */
  ASSERT_FALSE(etch__smb_try_partition(&m, 2, ETCH_SMB_DIV1));  /* no page */
  ASSERT_EQ_U64(etch__smb_bitmap(&m, 1), 3u << 28);
  uint8_t *c = etch__smb_try_acquire_write(&m, 1, 2, 5, 7,
                                           ETCH_SMB_FIRST_CONTINUES);
  ASSERT_TRUE(c == mem + 4096 + 8 + 2 * 1020);
  ASSERT_EQ_U64(etch__smb_bitmap(&m, 1), (3u << 28) | (1u << 4));
  static const uint8_t hdr[8] = {7, 0, 0, 0, 5, 0, 0x00, 0x04};
  ASSERT_TRUE(memcmp(c, hdr, 8) == 0);
  ASSERT_TRUE(etch__smb_try_acquire_write(&m, 1, 2, 6, 0, 0) == NULL);
  ASSERT_TRUE(etch__smb_try_acquire_write(&m, 1, 4, 6, 0, 0) == NULL);
  ASSERT_FALSE(etch__smb_try_acquire_read(&m, 1, 2)); /* being written */
  uint8_t *c0 = etch__smb_try_acquire_write(&m, 1, 0, 6, 0, 0);
  ASSERT_TRUE(c0 == mem + 4096 + 8);
  ASSERT_TRUE(etch__smb_release_complete(&m, 1, 2));
  ASSERT_FALSE(etch__smb_release_complete(&m, 1, 2));
  ASSERT_EQ_U64(etch__smb_bitmap(&m, 1), (3u << 28) | (3u << 4) | 1u);
  ASSERT_TRUE(etch__smb_try_acquire_read(&m, 1, 2));
  ASSERT_EQ_U64(etch__smb_bitmap(&m, 1), (3u << 28) | (2u << 4) | 1u);
  ASSERT_TRUE(etch__smb_release_free(&m, 1, 2));
  ASSERT_EQ_U64(etch__smb_bitmap(&m, 1), (3u << 28) | 1u); /* chunk 0 left */
  ASSERT_TRUE(etch__smb_release_complete(&m, 1, 0));
  ASSERT_TRUE(etch__smb_try_acquire_read(&m, 1, 0));
  ASSERT_TRUE(etch__smb_release_free(&m, 1, 0));
  ASSERT_EQ_U64(etch__smb_bitmap(&m, 1), 0); /* all free: not partitioned */
  ASSERT_TRUE(etch__smb_try_partition(&m, 1, ETCH_SMB_DIV14));
}

/* Puts a fragment at *p: its size as a 4-byte padded varint (or `short_len`
 * bytes), then `len` bytes of `fill`. */
static uint8_t *put_fragment(uint8_t *p, uint32_t len, int short_len,
                             uint8_t fill) {
  if (short_len) {
    p[0] = (uint8_t)len; /* < 128 */
    p += 1;
  } else {
    p[0] = (uint8_t)(0x80 | (len & 0x7f));
    p[1] = (uint8_t)(0x80 | ((len >> 7) & 0x7f));
    p[2] = (uint8_t)(0x80 | ((len >> 14) & 0x7f));
    p[3] = (uint8_t)((len >> 21) & 0x7f);
    p += 4;
  }
  memset(p, fill, len);
  return p + len;
}

static void set_count(uint8_t *chunk, uint16_t count, uint16_t flags) {
  uint16_t v = (uint16_t)(count | flags << 10);
  memcpy(chunk + 6, &v, 2);
}

static etch_smb_chunk *read_chunk(etch_smb *m, uint32_t page, uint32_t chunk) {
  static etch_smb_chunk c;
  ASSERT_OK(etch__smb_chunk_read(m, page, chunk, &c));
  return &c;
}

TEST(fragments_are_read_and_checked) {
  static uint8_t mem[4096] __attribute__((aligned(8)));
  memset(mem, 0, sizeof mem);
  etch_smb m;
  ASSERT_OK(etch__smb_init(&m, mem, sizeof mem, 4096));
  ASSERT_TRUE(etch__smb_try_partition(&m, 0, ETCH_SMB_DIV14)); /* 292 B */
  uint8_t *c = etch__smb_try_acquire_write(&m, 0, 3, 9, 41,
                                           ETCH_SMB_LAST_CONTINUES);
  uint8_t *p = c + 8;
  p = put_fragment(p, 200, 0, 0xaa);
  p = put_fragment(p, 5, 1, 0xbb);
  static const uint8_t drop[4] = {0xff, 0xff, 0xff, 0x7f}; /* 0x0fffffff */
  memcpy(p, drop, 4);
  p += 4;
  p = put_fragment(p, 292 - 8 - (uint32_t)(p - (c + 8)) - 4, 0, 0xcc);
  set_count(c, 4, ETCH_SMB_LAST_CONTINUES);
  ASSERT_TRUE(etch__smb_release_complete(&m, 0, 3));
  ASSERT_TRUE(etch__smb_try_acquire_read(&m, 0, 3));
  etch_smb_chunk *k = read_chunk(&m, 0, 3);
  ASSERT_EQ_INT(k->chunk_id, 41);
  ASSERT_EQ_INT(k->writer_id, 9);
  ASSERT_EQ_INT(k->count, 4);
  ASSERT_EQ_INT(k->flags, ETCH_SMB_LAST_CONTINUES);
  ASSERT_EQ_INT(k->payload_len, 284);
  uint32_t idx = 0, off = 0, len;
  const uint8_t *d;
  ASSERT_EQ_INT(etch__smb_next_fragment(k, &idx, &off, &d, &len), 1);
  ASSERT_EQ_INT(len, 200);
  ASSERT_TRUE(d[0] == 0xaa && d[199] == 0xaa);
  ASSERT_EQ_INT(etch__smb_next_fragment(k, &idx, &off, &d, &len), 1);
  ASSERT_EQ_INT(len, 5);
  ASSERT_TRUE(d[0] == 0xbb && off == 204 + 6);
  ASSERT_EQ_INT(etch__smb_next_fragment(k, &idx, &off, &d, &len), 1);
  ASSERT_EQ_INT(len, ETCH_SMB_DROP_PACKET);
  ASSERT_TRUE(d == NULL);
  ASSERT_EQ_INT(etch__smb_next_fragment(k, &idx, &off, &d, &len), 1);
  ASSERT_EQ_INT(off, 284); /* the last fragment fills the chunk */
  ASSERT_TRUE(d[0] == 0xcc);
  ASSERT_EQ_INT(etch__smb_next_fragment(k, &idx, &off, &d, &len), 0);

  /* Lies: a count beyond the fragments there, a size past the chunk, a
   * size varint of 5 bytes. */
  k->count = 5;
  ASSERT_EQ_INT(etch__smb_next_fragment(k, &idx, &off, &d, &len), ETCH_EFORMAT);
  ASSERT_EQ_STR(etch_last_error(),
                "chunk 41 of writer 9: fragment 4 of 5 starts at 284, past "
                "the chunk's 284 bytes");
  idx = 0;
  off = 0;
  k->payload[0] = 0x80 | 0x7f;
  k->payload[1] = 0x02; /* 383 bytes */
  ASSERT_EQ_INT(etch__smb_next_fragment(k, &idx, &off, &d, &len), ETCH_EFORMAT);
  ASSERT_EQ_STR(etch_last_error(),
                "chunk 41 of writer 9: fragment 0 of 383 bytes at 2 overruns "
                "the chunk's 284 bytes");
  idx = off = 0;
  memset(k->payload, 0x80, 4);
  ASSERT_EQ_INT(etch__smb_next_fragment(k, &idx, &off, &d, &len), ETCH_EFORMAT);
  ASSERT_EQ_STR(etch_last_error(),
                "chunk 41 of writer 9: fragment 0's size is not a varint of "
                "at most 4 bytes within the chunk");
  /* A page whose layout a producer set to a reserved value. */
  uint32_t bad = 6u << 28;
  memcpy(mem, &bad, 4);
  etch_smb_chunk tmp;
  ASSERT_EQ_INT(etch__smb_chunk_read(&m, 0, 0, &tmp), ETCH_EFORMAT);
  ASSERT_EQ_STR(etch_last_error(), "shared memory buffer: page 0 has layout 6");
  ASSERT_FALSE(etch__smb_try_acquire_read(&m, 0, 3));
  ASSERT_EQ_INT(etch__smb_chunk_read(&m, 1, 0, &tmp), ETCH_EFORMAT);
}

/* A producer thread and a service thread: every chunk written arrives
 * once, in chunk-id order, with the bytes written. */
#define MOVES 20000
static etch_smb g_smb;
static volatile int g_done;

static void *producer(void *arg) {
  (void)arg;
  uint32_t next_id = 0;
  while (next_id < MOVES) {
    uint8_t *c = NULL;
    for (uint32_t pg = 0; pg < g_smb.npages && !c; pg++) {
      if (etch__smb_bitmap(&g_smb, pg) == 0)
        etch__smb_try_partition(&g_smb, pg, ETCH_SMB_DIV4);
      for (uint32_t k = 0; k < 4 && !c; k++) {
        c = etch__smb_try_acquire_write(&g_smb, pg, k, 3, next_id, 0);
        if (c) {
          uint8_t *p = put_fragment(c + 8, 16, 0, (uint8_t)next_id);
          (void)p;
          set_count(c, 1, 0);
          ASSERT_TRUE(etch__smb_release_complete(&g_smb, pg, k));
          next_id++;
        }
      }
    }
  }
  __atomic_store_n(&g_done, 1, __ATOMIC_RELEASE);
  return NULL;
}

TEST(producer_and_service_move_chunks) {
  size_t size = 4 * 4096;
  uint8_t *mem = aligned_alloc(4096, size);
  memset(mem, 0, size);
  ASSERT_OK(etch__smb_init(&g_smb, mem, size, 4096));
  pthread_t th;
  pthread_create(&th, NULL, producer, NULL);
  static uint8_t seen[MOVES];
  uint32_t got = 0;
  etch_smb_chunk *k = malloc(sizeof *k);
  for (;;) {
    bool any = false;
    for (uint32_t pg = 0; pg < g_smb.npages; pg++)
      for (uint32_t i = 0; i < 4; i++) {
        if (!etch__smb_try_acquire_read(&g_smb, pg, i)) continue;
        any = true;
        ASSERT_OK(etch__smb_chunk_read(&g_smb, pg, i, k));
        ASSERT_TRUE(etch__smb_release_free(&g_smb, pg, i));
        ASSERT_EQ_INT(k->writer_id, 3);
        ASSERT_TRUE(k->chunk_id < MOVES);
        ASSERT_EQ_INT(seen[k->chunk_id], 0);
        seen[k->chunk_id] = 1;
        uint32_t idx = 0, off = 0, len;
        const uint8_t *d;
        ASSERT_EQ_INT(etch__smb_next_fragment(k, &idx, &off, &d, &len), 1);
        ASSERT_EQ_INT(len, 16);
        ASSERT_EQ_INT(d[15], (uint8_t)k->chunk_id);
        got++;
      }
    if (!any && __atomic_load_n(&g_done, __ATOMIC_ACQUIRE)) {
      /* One more pass picks up what completed after the last scan. */
      bool more = false;
      for (uint32_t pg = 0; pg < g_smb.npages && !more; pg++)
        more = (etch__smb_bitmap(&g_smb, pg) & ETCH_SMB_STATES_MASK) != 0;
      if (!more) break;
    }
  }
  pthread_join(th, NULL);
  ASSERT_EQ_INT(got, MOVES);
  free(k);
  free(mem);
}

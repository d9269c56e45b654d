/*
 * reader_perf.c - measures the reader on a synthetic trace shaped like what
 * the etch SDK writes (fast-path begin/end packets, interned names, several
 * writer sequences interleaved in chunks, optionally deflate-compressed).
 *
 *   reader_perf [events_millions] [threads]
 *   reader_perf --callgrind fast|generic|state [events_thousands]
 *
 * Not a ctest: run it by hand; it prints events/s for both delivery orders.
 * With --callgrind it reads the trace once in file order between callgrind's
 * toggles (valgrind --tool=callgrind --collect-atstart=no): `fast` as
 * libetch's packets are read, `generic` the same packets through the
 * generic decoder (fast path off), `state` through the generic decoder with
 * interned data in every 16th packet (an interning miss, as Perfetto's SDK
 * writes them). Instructions per event = Ir / events.
 */
#define _GNU_SOURCE
#include <etch/reader.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pb/pb.h"
#include "proto/perfetto.h"
#include "reader/reader_priv.h"
#include "reader/tbuild.h"

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_TOGGLE_COLLECT
#endif

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One fast-path packet: 40 dt 68 02 5A n 48 type [18 cat 50 name] 50 seq */
static size_t fast_packet(uint8_t *p, uint32_t seq, uint64_t dt, int begin,
                          uint32_t name) {
  uint8_t body[32], *b = body;
  b = etch__pb_put_tag(b, ETCH_PKT_TIMESTAMP, ETCH_PB_VARINT);
  b = etch__pb_put_varint(b, dt);
  b = etch__pb_put_tag(b, ETCH_PKT_SEQUENCE_FLAGS, ETCH_PB_VARINT);
  b = etch__pb_put_varint(b, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  b = etch__pb_put_tag(b, ETCH_PKT_TRACK_EVENT, ETCH_PB_LEN);
  *b++ = begin ? 6 : 2;
  b = etch__pb_put_tag(b, ETCH_TE_TYPE, ETCH_PB_VARINT);
  *b++ = begin ? ETCH_TE_TYPE_SLICE_BEGIN : ETCH_TE_TYPE_SLICE_END;
  if (begin) {
    b = etch__pb_put_tag(b, ETCH_TE_CATEGORY_IIDS, ETCH_PB_VARINT);
    *b++ = 1;
    b = etch__pb_put_tag(b, ETCH_TE_NAME_IID, ETCH_PB_VARINT);
    *b++ = (uint8_t)name;
  }
  b = etch__pb_put_tag(b, ETCH_PKT_TRUSTED_SEQ_ID, ETCH_PB_VARINT);
  b = etch__pb_put_varint(b, seq);
  size_t n = (size_t)(b - body);
  p[0] = 0x0A;
  p[1] = (uint8_t)n;
  memcpy(p + 2, body, n);
  return n + 2;
}

/* The same begin as a generic packet carrying an interned name (the
 * `state` case): interned_data { event_names { iid name } } first. */
static size_t state_packet(uint8_t *p, uint32_t seq, uint64_t dt,
                           uint32_t name) {
  uint8_t body[64], *b = body;
  b = etch__pb_put_tag(b, ETCH_PKT_TIMESTAMP, ETCH_PB_VARINT);
  b = etch__pb_put_varint(b, dt);
  b = etch__pb_put_tag(b, ETCH_PKT_INTERNED_DATA, ETCH_PB_LEN);
  *b++ = 9;
  b = etch__pb_put_tag(b, ETCH_ID_EVENT_NAMES, ETCH_PB_LEN);
  *b++ = 7;
  b = etch__pb_put_tag(b, ETCH_INTERNED_IID, ETCH_PB_VARINT);
  *b++ = (uint8_t)name;
  b = etch__pb_put_tag(b, ETCH_INTERNED_NAME, ETCH_PB_LEN);
  *b++ = 3;
  *b++ = 'f';
  *b++ = 'n';
  *b++ = (uint8_t)('a' + name % 16);
  b = etch__pb_put_tag(b, ETCH_PKT_SEQUENCE_FLAGS, ETCH_PB_VARINT);
  b = etch__pb_put_varint(b, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  b = etch__pb_put_tag(b, ETCH_PKT_TRACK_EVENT, ETCH_PB_LEN);
  *b++ = 6;
  b = etch__pb_put_tag(b, ETCH_TE_TYPE, ETCH_PB_VARINT);
  *b++ = ETCH_TE_TYPE_SLICE_BEGIN;
  b = etch__pb_put_tag(b, ETCH_TE_CATEGORY_IIDS, ETCH_PB_VARINT);
  *b++ = 1;
  b = etch__pb_put_tag(b, ETCH_TE_NAME_IID, ETCH_PB_VARINT);
  *b++ = (uint8_t)name;
  b = etch__pb_put_tag(b, ETCH_PKT_TRUSTED_SEQ_ID, ETCH_PB_VARINT);
  b = etch__pb_put_varint(b, seq);
  size_t n = (size_t)(b - body);
  p[0] = 0x0A;
  p[1] = (uint8_t)n;
  memcpy(p + 2, body, n);
  return n + 2;
}

static bool g_state; /* every 16th begin carries interned data */

static void build(tb *t, long events, int threads) {
  for (int th = 0; th < threads; th++) {
    uint32_t seq = (uint32_t)(2 + th);
    tb_etch_seq_start(t, seq, 1000000, 5000 + (uint64_t)th, false);
    tb_thread_track(t, seq, 1000000, 5000 + (uint64_t)th, 0, 1, 100 + th, "w");
    tb_begin(t);
    tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
    tb_open(t, ETCH_PKT_INTERNED_DATA);
    tb_interned(t, ETCH_ID_EVENT_CATEGORIES, 1, "render");
    for (int i = 1; i < 16; i++) {
      char name[16];
      snprintf(name, sizeof name, "fn%d", i);
      tb_interned(t, ETCH_ID_EVENT_NAMES, (uint64_t)i, name);
    }
    tb_close(t);
    tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, seq);
    tb_end(t);
  }
  /* Chunks of 256 events per thread, round robin. */
  uint8_t chunk[256 * 40];
  long done = 0;
  while (done < events) {
    for (int th = 0; th < threads && done < events; th++) {
      size_t n = 0;
      for (int i = 0; i < 256; i++)
        n += g_state && i % 16 == 0
                 ? state_packet(chunk + n, (uint32_t)(2 + th),
                                1 + (uint64_t)(i % 7), 1 + (uint32_t)(i / 2 % 15))
                 : fast_packet(chunk + n, (uint32_t)(2 + th),
                               1 + (uint64_t)(i % 7), !(i & 1),
                               1 + (uint32_t)(i / 2 % 15));
      tb_raw(t, chunk, n);
      done += 256;
    }
  }
}

static void on_event(const etch_event *ev, void *user) {
  *(uint64_t *)user += (uint64_t)ev->ts;
}

static void run(const char *what, const uint8_t *data, size_t len,
                etch_reader_order order) {
  etch_reader *r;
  uint64_t sum = 0;
  etch_reader_open_memory(&r, data, len);
  etch_reader_set_order(r, order);
  etch_reader_on(r, NULL, NULL, on_event, &sum);
  double t0 = now();
  int rc = etch_reader_run(r);
  double dt = now() - t0;
  etch_reader_stats st;
  etch_reader_get_stats(r, &st);
  printf("%-12s %-9s rc=%d %8.1f MB %10llu events %6.3f s %6.2f M events/s\n",
         what, order == ETCH_ORDER_FILE ? "file" : "timestamp", rc,
         (double)len / 1e6, (unsigned long long)st.track_events, dt,
         (double)st.track_events / dt / 1e6);
  etch_reader_close(r);
}

/* One read in file order between callgrind's toggles. */
static int callgrind(const char *mode, long events) {
  bool generic = strcmp(mode, "generic") == 0 || strcmp(mode, "state") == 0;
  g_state = strcmp(mode, "state") == 0;
  if (!generic && strcmp(mode, "fast") != 0) {
    fprintf(stderr, "reader_perf: --callgrind fast|generic|state\n");
    return 2;
  }
  static tb t;
  tb_init(&t);
  build(&t, events, 8);
  etch_reader *r;
  uint64_t sum = 0;
  etch_reader_open_memory(&r, t.data, t.len);
  etch_reader_set_order(r, ETCH_ORDER_FILE);
  if (generic) etch__reader_set_fast(r, false);
  etch_reader_on(r, NULL, NULL, on_event, &sum);
  CALLGRIND_TOGGLE_COLLECT;
  int rc = etch_reader_run(r);
  CALLGRIND_TOGGLE_COLLECT;
  etch_reader_stats st;
  etch_reader_get_stats(r, &st);
  printf("%s rc=%d events %llu\n", mode, rc,
         (unsigned long long)st.track_events);
  etch_reader_close(r);
  tb_free(&t);
  return rc ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[1], "--callgrind") == 0)
    return callgrind(argv[2], (argc > 3 ? atol(argv[3]) : 200) * 1000L);
  long events = (argc > 1 ? atol(argv[1]) : 10) * 1000000L;
  int threads = argc > 2 ? atoi(argv[2]) : 8;
  static tb t;
  tb_init(&t);
  build(&t, events, threads);
  run("plain", t.data, t.len, ETCH_ORDER_FILE);
  run("plain", t.data, t.len, ETCH_ORDER_TIMESTAMP);
  /* Deflate in 256 KiB batches of whole records, as etch writes. */
  static tb z;
  tb_init(&z);
  const uint8_t *p = t.data, *end = t.data + t.len, *batch = p;
  while (p < end) {
    const uint8_t *q = p + 1;
    uint64_t l;
    etch__pb_read_varint(&q, end, &l);
    if ((size_t)(q + l - batch) > 256 * 1024) {
      tb_compressed(&z, batch, (size_t)(p - batch), false, false);
      batch = p;
    }
    p = q + l;
  }
  tb_compressed(&z, batch, (size_t)(end - batch), false, false);
  run("deflate", z.data, z.len, ETCH_ORDER_FILE);
  run("deflate", z.data, z.len, ETCH_ORDER_TIMESTAMP);
  tb_free(&t);
  tb_free(&z);
  return 0;
}

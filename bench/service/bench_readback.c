/*
 * bench_readback.c - etchd's read-back alone: committed chunks in the
 * service's trace buffer turned into trace-file bytes, as for ReadBuffers
 * and write_into_file.
 *
 *   bench_readback [MB] [REPS]      (default 256 MB, 5 runs; median)
 *
 * Fills a trace buffer with chunks of 4.6 KiB holding what a libetch
 * writer commits in system mode (instants of ~20 bytes, one packet in
 * 30 split across two chunks), from 8 writer sequences, then reads it in
 * pieces of 4 MiB through the trace-file writer (trusted uid, pid and
 * sequence id appended to each packet), as etchd does. Prints MB of
 * packets per second read, against a floor: memcpy of the same bytes.
 * Under callgrind (--n small) it gives instructions per packet. With
 * BENCH_VALIDATE=1 in the environment each packet is also checked as
 * etchd checks a producer's (etch_tracefile.validate: proto/check.c).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_threads.h"
#include "buffer/smb.h"
#include "buffer/tracebuf.h"
#include "buffer/tracefile.h"
#include "pb/pb.h"

#define CHUNK 4600u
#define SEQS 8u
#define PIECE (4u << 20)

static bool trust(void *ctx, uint32_t seq, int32_t *pid, int32_t *uid,
                  bool *same_pidns) {
  *same_pidns = false;
  (void)ctx;
  *pid = (int32_t)(1000 + seq);
  *uid = 1000;
  return true;
}

/* A packet like a libetch instant: flags, a track event, a timestamp. */
static uint32_t packet(uint8_t *p, uint32_t i) {
  uint8_t *q = p;
  *q++ = 0x68; /* sequence_flags */
  *q++ = 2;
  *q++ = 0x5a; /* track_event */
  *q++ = 10;
  *q++ = 0x48; /* type: INSTANT */
  *q++ = 3;
  *q++ = 0x50; /* name_iid */
  *q++ = (uint8_t)(1 + i % 100);
  *q++ = 0x1a; /* category_iids, packed */
  *q++ = 2;
  *q++ = 1;
  *q++ = 2;
  *q++ = 0x58; /* track_uuid */
  *q++ = (uint8_t)(1 + i % 7);
  *q++ = 0x40; /* timestamp (a delta) */
  q = etch__pb_put_varint(q, 100 + i % 300);
  return (uint32_t)(q - p);
}

/* Fills tb with `bytes` of chunks; the packet count and packet bytes. */
static void fill(etch_tracebuf *tb, uint64_t bytes, uint64_t *npackets,
                 uint64_t *pbytes) {
  uint8_t chunk[CHUNK];
  uint32_t ids[SEQS] = {0};
  uint8_t carry[SEQS][64];
  uint32_t carry_len[SEQS] = {0};
  uint64_t done = 0, np = 0, pb = 0;
  uint32_t i = 0;
  while (done < bytes) {
    uint32_t seq = 2 + (uint32_t)((done / CHUNK) % SEQS), s = seq - 2;
    uint32_t len = 0, count = 0, flags = 0;
    if (carry_len[s]) { /* the rest of a packet split last time */
      chunk[len++] = (uint8_t)carry_len[s];
      memcpy(chunk + len, carry[s], carry_len[s]);
      len += carry_len[s];
      count++;
      flags |= ETCH_SMB_FIRST_CONTINUES;
      carry_len[s] = 0;
    }
    for (;;) {
      uint8_t p[64];
      uint32_t n = packet(p, i++);
      if (len + 1 + n > CHUNK - 32) {
        if (i % 30 == 0) { /* split this one across chunks */
          uint32_t head = n / 2;
          chunk[len++] = (uint8_t)head;
          memcpy(chunk + len, p, head);
          len += head;
          count++;
          memcpy(carry[s], p + head, n - head);
          carry_len[s] = n - head;
          flags |= ETCH_SMB_LAST_CONTINUES;
          np++;
          pb += n;
        }
        break;
      }
      chunk[len++] = (uint8_t)n;
      memcpy(chunk + len, p, n);
      len += n;
      count++;
      np++;
      pb += n;
    }
    if (etch__tracebuf_put(tb, seq, ids[s]++, flags, count, chunk, len)) {
      fprintf(stderr, "put: %s\n", etch_last_error());
      exit(1);
    }
    done += len;
  }
  *npackets = np;
  *pbytes = pb;
}

static int main_run(uint64_t bytes, double *mbps, double *ns_packet,
                    double *floor_mbps, uint64_t *np) {
  etch_tracebuf *tb;
  if (etch__tracebuf_new(bytes + (1u << 20), ETCH_BUFFER_DISCARD, &tb))
    return 1;
  uint64_t pbytes;
  fill(tb, bytes, np, &pbytes);
  etch_tracefile o;
  etch__tracefile_init(&o, false);
  o.trust = trust;
  const char *v = getenv("BENCH_VALIDATE");
  o.validate = v && *v == '1';
  uint64_t out = 0;
  uint64_t t0 = bench_now_ns();
  bool more = true;
  while (more) {
    etch__pb_buf_reset(&o.out);
    if (etch__tracebuf_read_runs(tb, etch__tracefile_on_packet,
                                 etch__tracefile_on_run, &o, PIECE,
                                 &more))
      return 1;
    out += etch__pb_buf_len(&o.out);
  }
  uint64_t t1 = bench_now_ns();
  etch__tracefile_free(&o);
  etch__tracebuf_free(tb);
  if (out < pbytes) {
    fprintf(stderr, "read %llu bytes for %llu of packets\n",
            (unsigned long long)out, (unsigned long long)pbytes);
    return 1;
  }
  /* The floor: the packet bytes copied once, in pieces. */
  uint8_t *src = malloc(PIECE), *dst = malloc(PIECE);
  memset(src, 1, PIECE);
  memset(dst, 0, PIECE);
  uint64_t f0 = bench_now_ns();
  for (uint64_t left = pbytes; left;) {
    size_t n = left < PIECE ? (size_t)left : PIECE;
    memcpy(dst, src, n);
    __asm__ volatile("" : : "r"(dst) : "memory");
    left -= n;
  }
  uint64_t f1 = bench_now_ns();
  free(src);
  free(dst);
  *mbps = (double)pbytes / 1e6 / ((double)(t1 - t0) / 1e9);
  *ns_packet = (double)(t1 - t0) / (double)*np;
  *floor_mbps = (double)pbytes / 1e6 / ((double)(f1 - f0) / 1e9);
  return 0;
}

int main(int argc, char **argv) {
  uint64_t mb = argc > 1 ? strtoull(argv[1], NULL, 10) : 256;
  int reps = argc > 2 ? atoi(argv[2]) : 5;
  if (!mb || reps < 1 || reps > 50) return 2;
  double v[50], ns[50], f[50];
  uint64_t np = 0;
  for (int k = 0; k < reps; k++)
    if (main_run(mb << 20, &v[k], &ns[k], &f[k], &np)) return 1;
  printf("%-34s %10s %14s\n", "", "MB/s", "ns a packet");
  printf("%-34s %10.0f %14.1f   (%llu packets, median of %d)\n",
         "trace buffer -> trace file", bench_median(v, reps),
         bench_median(ns, reps), (unsigned long long)np, reps);
  printf("%-34s %10.0f\n", "floor: memcpy of the packet bytes",
         bench_median(f, reps));
  return 0;
}

/*
 * fuzz_check.c - libFuzzer target: the input is one TracePacket (no
 * framing). Three promises are held:
 *
 *   - the check etchd and the reader share (proto/check.h) answers, its
 *     quick pass as its long way, and a refusal names an offset inside
 *     the packet;
 *   - a packet the check accepts (and that holds no compressed packets,
 *     which it does not open) is read by a fresh strict reader without an
 *     error, but for a key made too long by names it interns itself: the
 *     check is never laxer than the reader on the packet's own bytes;
 *   - in a trace [A][the packet][B], the reader, not strict, reads A and B
 *     whatever the packet is, in both orders, and counts the packet in
 *     malformed_packets exactly when a strict read of the trace fails (or
 *     when the strict read dropped its event undecoded, its timestamp not
 *     convertible: checked first, the packet is left out whole).
 *
 *   CC=clang cmake -B build-fuzz -DETCH_BUILD_FUZZ=ON && make -C build-fuzz fuzz_check
 *   build-fuzz/fuzz/fuzz_check -max_len=4096 corpus-copy/ fuzz/corpus/check/
 */
#include <etch/reader.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb/pb.h"
#include "proto/check.h"
#include "proto/perfetto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t sink;
static int seen_a, seen_b;

static void on_event(const etch_event *ev, void *user) {
  (void)user;
  sink += strlen(ev->name) + strlen(ev->category) + strlen(ev->track->name);
  for (size_t i = 0; i < ev->args_count; i++)
    sink += strlen(ev->args[i].key) + strlen(ev->args[i].flat_key);
  if (strcmp(ev->name, "fuzz.A") == 0) seen_a++;
  if (strcmp(ev->name, "fuzz.B") == 0) seen_b++;
}

static bool has_compressed(const uint8_t *p, size_t n) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, p, n);
  while (etch__pb_next(&d, &f))
    if (f.id == ETCH_PKT_COMPRESSED_PACKETS ||
        f.id == ETCH_PKT_ZSTD_COMPRESSED_PACKETS)
      return true;
  return d.err != 0;
}

/* A packet record holding an instant named `name` on sequence 7, at `ts`
 * on BOOTTIME (clock 6), with an inline name. */
static size_t good_packet(uint8_t *out, const char *name, uint64_t ts) {
  uint8_t body[64], *b = body, te[32], *t = te;
  t = etch__pb_put_tag(t, ETCH_TE_TYPE, ETCH_PB_VARINT);
  *t++ = ETCH_TE_TYPE_INSTANT;
  t = etch__pb_put_tag(t, ETCH_TE_NAME, ETCH_PB_LEN);
  *t++ = (uint8_t)strlen(name);
  memcpy(t, name, strlen(name));
  t += strlen(name);
  b = etch__pb_put_tag(b, ETCH_PKT_TIMESTAMP, ETCH_PB_VARINT);
  b = etch__pb_put_varint(b, ts);
  b = etch__pb_put_tag(b, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_PB_VARINT);
  *b++ = ETCH_CLOCK_BOOTTIME;
  b = etch__pb_put_tag(b, ETCH_PKT_TRACK_EVENT, ETCH_PB_LEN);
  *b++ = (uint8_t)(t - te);
  memcpy(b, te, (size_t)(t - te));
  b += t - te;
  b = etch__pb_put_tag(b, ETCH_PKT_TRUSTED_SEQ_ID, ETCH_PB_VARINT);
  *b++ = 7;
  out[0] = 0x0A;
  out[1] = (uint8_t)(b - body);
  memcpy(out + 2, body, (size_t)(b - body));
  return (size_t)(b - body) + 2;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 20)) return 0;
  etch__pkt_fault why;
  memset(&why, 0, sizeof why);
  bool ok = etch__packet_check(data, size, &why);
  if (!ok && (why.off > size || !why.msg[0] || why.status >= 0)) abort();
  if (ok != etch__packet_check_full(data, size, NULL)) abort(); /* quick */

  /* A fresh strict reader, the packet fed alone. */
  etch_reader *r;
  if (etch_reader_open_stream(&r)) return 0;
  etch_reader_set_strict(r, 1);
  etch_reader_on(r, NULL, NULL, on_event, NULL);
  int strict_rc = etch_reader_feed(r, data, size, 2);
  etch_reader_close(r);
  /* A key made too long by names the packet interns itself is the one
   * thing the check cannot see (it counts interned names as empty). */
  if (ok && strict_rc && !has_compressed(data, size) &&
      !(strict_rc == ETCH_ELIMIT && strstr(etch_last_error(), "key longer"))) {
    fprintf(stderr, "checked but refused: %s\n", etch_last_error());
    abort();
  }

  /* [A][packet][B], not strict. */
  size_t cap = size + 128;
  uint8_t *trace = malloc(cap);
  if (!trace) return 0;
  size_t n = good_packet(trace, "fuzz.A", 1000);
  trace[n++] = 0x0A;
  n = (size_t)(etch__pb_put_varint(trace + n, size) - trace);
  memcpy(trace + n, data, size);
  n += size;
  n += good_packet(trace + n, "fuzz.B", 2000);
  /* Strict, the read stops at the packet if it is malformed there (in
   * the trace it may also be skipped undecoded: a sequence state lost). */
  int file_rc = 0;
  etch_reader_stats strict_st;
  memset(&strict_st, 0, sizeof strict_st);
  if (!etch_reader_open_memory(&r, trace, n)) {
    etch_reader_set_strict(r, 1);
    file_rc = etch_reader_run(r);
    etch_reader_get_stats(r, &strict_st);
    etch_reader_close(r);
  }
  for (int order = 0; order < 2; order++) {
    if (etch_reader_open_memory(&r, trace, n)) break;
    etch_reader_set_order(r, (etch_reader_order)order);
    etch_reader_on(r, NULL, NULL, on_event, NULL);
    seen_a = seen_b = 0;
    int rc = etch_reader_run(r);
    etch_reader_stats st;
    etch_reader_get_stats(r, &st);
    etch_reader_close(r);
    if (rc || seen_a != 1 || seen_b != 1) {
      fprintf(stderr, "not read past the packet: rc %d (%s), A %d B %d\n", rc,
              etch_last_error(), seen_a, seen_b);
      abort();
    }
    bool compressed = has_compressed(data, size);
    /* A strict read does not decode an event whose timestamp it cannot
     * convert: a malformed one there passes (and its packet's state with
     * it), where checked first it is left out whole. */
    bool undecoded = file_rc == 0 && strict_st.clock_conversion_failed;
    if (((file_rc != 0) != (st.malformed_packets != 0) && !undecoded) ||
        (!compressed && st.malformed_packets > 1)) {
      fprintf(stderr, "strict %d (%s) but %llu left out\n", file_rc,
              etch_last_error(), (unsigned long long)st.malformed_packets);
      abort();
    }
  }
  free(trace);
  return 0;
}

/*
 * tbuild.h - builds Perfetto traces byte by byte for the reader tests, and
 * reads them back into text that tests compare exactly.
 *
 *   tb t;
 *   tb_init(&t);
 *   tb_begin(&t);                       // TracePacket (Trace field 1)
 *   tb_u(&t, 8, 1000);                  //   timestamp
 *   tb_open(&t, 11);                    //   track_event {
 *   tb_u(&t, 9, 3);                     //     type: INSTANT
 *   tb_s(&t, 23, "hello");              //     name
 *   tb_close(&t);                       //   }
 *   tb_end(&t);
 *   tb_read(t.data, t.len, ETCH_ORDER_TIMESTAMP, &out);
 *   ASSERT_EQ_STR(out.events, "I 1000 seq=0 track=0 ... name=hello\n");
 *
 * Nested messages are written with plain minimal varint lengths (each level
 * is built in its own buffer and copied into its parent on close), so the
 * bytes are what any protobuf encoder would write.
 */
#ifndef ETCH_TESTS_READER_TBUILD_H
#define ETCH_TESTS_READER_TBUILD_H

#include <etch/reader.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TB_MAX_DEPTH 2100

typedef struct tb_level {
  uint8_t *data;
  size_t len, cap;
  uint32_t field;
} tb_level;

typedef struct tb {
  tb_level lv[TB_MAX_DEPTH]; /* lv[0] is the trace itself */
  int depth;
  /* The finished trace (valid after any tb_end; points into lv[0]). */
  const uint8_t *data;
  size_t len;
} tb;

void tb_init(tb *t);
void tb_free(tb *t);
/* Raw bytes at the current level. */
void tb_raw(tb *t, const void *p, size_t n);
void tb_varint(tb *t, uint64_t v);
/* Fields at the current level. */
void tb_u(tb *t, uint32_t field, uint64_t v);  /* varint */
void tb_i(tb *t, uint32_t field, int64_t v);   /* int64 as varint */
void tb_s(tb *t, uint32_t field, const char *s);
void tb_b(tb *t, uint32_t field, const void *p, size_t n);
void tb_d(tb *t, uint32_t field, double v);    /* fixed64 double */
void tb_f64(tb *t, uint32_t field, uint64_t v);
/* Nested message `field`; tb_close writes it into the parent. */
void tb_open(tb *t, uint32_t field);
void tb_close(tb *t);
/* A TracePacket: Trace field 1. */
void tb_begin(tb *t);
void tb_end(tb *t);

/* ---- common packets ------------------------------------------------------------ */

/*
 * The first packet of an etch writer sequence: CLEARED, defaults
 * {timestamp_clock_id 64, track_event_defaults.track_uuid = thread_uuid},
 * clock snapshot {6: ts, 64: ts incremental}, explicit ts on clock 6,
 * then the sequence id last.
 */
void tb_etch_seq_start(tb *t, uint32_t seq, uint64_t ts, uint64_t thread_uuid,
                       bool prev_dropped);
/* Process / thread track descriptors in their own packet (explicit BOOTTIME
 * timestamp, sequence id last). */
void tb_process_track(tb *t, uint32_t seq, uint64_t ts, uint64_t uuid,
                      int32_t pid, const char *name);
void tb_thread_track(tb *t, uint32_t seq, uint64_t ts, uint64_t uuid,
                     uint64_t parent, int32_t pid, int32_t tid,
                     const char *name);
/* InternedData entry {iid, name} under InternedData field `kind`. */
void tb_interned(tb *t, uint32_t kind, uint64_t iid, const char *name);

/* Appends a compressed_packets (zlib; gzip when `gzip`) or
 * zstd_compressed_packets packet holding `records` (Trace packet records). */
void tb_compressed(tb *t, const uint8_t *records, size_t len, bool zstd,
                   bool gzip);

/* ---- reading back ------------------------------------------------------------ */

typedef struct tb_out {
  char *events; /* one line per delivered event */
  char *tracks; /* one line per announced track */
  etch_reader_stats stats;
  int rc;
  char error[512];
  int64_t first, last;
} tb_out;

/* Runs the reader on data[0..len) with every event subscribed. */
int tb_read(const void *data, size_t len, etch_reader_order order,
            tb_out *out);
void tb_out_free(tb_out *out);
/* Formats one event as tb_read does (for custom subscriptions). */
void tb_format_event(const etch_event *ev, char *buf, size_t cap);

/* ---- sample traces (tests and the fuzz corpus) ------------------------------------ */

/* Fills `t` with a sample trace; `which` in [0, tb_sample_count()). */
int tb_sample_count(void);
const char *tb_sample_name(int which);
void tb_sample(tb *t, int which);

#endif /* ETCH_TESTS_READER_TBUILD_H */

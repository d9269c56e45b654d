/*
 * trace_build.h - the one trace builder of the tests: Perfetto traces
 * written byte by byte, so that every field is under the test's control
 * (the reader, query and CLI tests; the reader's read-back helpers and
 * sample traces are in reader/tbuild.h).
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
 *   ... tb_data(&t), tb_len(&t)
 *
 * Nested messages are written with plain minimal varint lengths (each level
 * is built in its own buffer and copied into its parent on close), so the
 * bytes are what any protobuf encoder would write.
 */
#ifndef ETCH_TESTS_TRACE_BUILD_H
#define ETCH_TESTS_TRACE_BUILD_H

#include "proto/perfetto.h" /* the field numbers the tests write */

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
  /* TracePacket.machine_id that tb_packet (and the helpers built on it)
   * writes: 0, none (the host's packets). */
  uint64_t machine;
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

/* ---- events and tracks in one call (the query and CLI tests) ---------------------- */

/* The finished trace. */
static inline const uint8_t *tb_data(const tb *t) { return t->data; }
static inline size_t tb_len(const tb *t) { return t->len; }

/* Opens a TracePacket on sequence `seq` (0: no sequence id) with a
 * timestamp (ts < 0: none); close it with tb_end. */
void tb_packet(tb *t, uint32_t seq, int64_t ts);
/* Track descriptors without a timestamp (a NULL name is left out; the
 * process has no command line). */
void tb_process(tb *t, uint32_t seq, uint64_t uuid, int32_t pid,
                const char *name);
void tb_thread(tb *t, uint32_t seq, uint64_t uuid, int32_t pid, int32_t tid,
               const char *name);
void tb_named_track(tb *t, uint32_t seq, uint64_t uuid, uint64_t parent,
                    const char *name);
void tb_counter_track(tb *t, uint32_t seq, uint64_t uuid, uint64_t parent,
                      const char *name, int unit);
/* A track event with inline category and name (either may be NULL) on
 * track `track` (0: none): tb_event_open leaves it open for more fields,
 * tb_event_close closes it and its packet. */
void tb_event_open(tb *t, uint32_t seq, int64_t ts, uint64_t track, int type,
                   const char *cat, const char *name);
void tb_event_close(tb *t);
void tb_event(tb *t, uint32_t seq, int64_t ts, uint64_t track, int type,
              const char *cat, const char *name);
void tb_counter(tb *t, uint32_t seq, int64_t ts, uint64_t track, int64_t v);
void tb_counter_double(tb *t, uint32_t seq, int64_t ts, uint64_t track,
                       double v);

/* Writes the trace into the test's directory as `name`; returns the path
 * (valid until four more calls). trace_build_file.c: tests only. */
const char *tb_write_file(const tb *t, const char *name);

#endif /* ETCH_TESTS_TRACE_BUILD_H */

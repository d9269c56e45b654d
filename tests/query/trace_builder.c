/* trace_builder.c - see trace_builder.h. */
#define _GNU_SOURCE
#include "trace_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

#include "test.h"

void tb_init(tb *t) {
  etch__pb_buf_init(&t->b, 4096, 0);
  t->depth = 0;
}

void tb_free(tb *t) { etch__pb_buf_free(&t->b); }

void tb_open(tb *t, uint32_t field) {
  if (t->depth == 16) FAIL("trace builder: nested too deep");
  etch__pb_nested_begin(&t->b.s, field, &t->stack[t->depth++]);
}

void tb_close(tb *t) {
  if (!t->depth) FAIL("trace builder: close without open");
  etch__pb_nested_end(&t->b.s, &t->stack[--t->depth]);
}

void tb_varint(tb *t, uint32_t field, uint64_t v) {
  etch__pb_write_varint_field(&t->b.s, field, v);
}
void tb_fixed64(tb *t, uint32_t field, uint64_t v) {
  etch__pb_write_fixed64_field(&t->b.s, field, v);
}
void tb_double(tb *t, uint32_t field, double v) {
  etch__pb_write_double_field(&t->b.s, field, v);
}
void tb_string(tb *t, uint32_t field, const char *s) {
  etch__pb_write_string_field(&t->b.s, field, s);
}
void tb_bytes(tb *t, uint32_t field, const void *data, size_t len) {
  etch__pb_write_bytes_field(&t->b.s, field, data, len);
}

void tb_packet(tb *t, uint32_t seq, int64_t ts) {
  tb_open(t, ETCH_TRACE_PACKET);
  if (ts >= 0) tb_varint(t, ETCH_PKT_TIMESTAMP, (uint64_t)ts);
  if (seq) tb_varint(t, ETCH_PKT_TRUSTED_SEQ_ID, seq);
}

void tb_process_track(tb *t, uint32_t seq, uint64_t uuid, int32_t pid,
                      const char *name) {
  tb_packet(t, seq, -1);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_varint(t, ETCH_TD_UUID, uuid);
  tb_open(t, ETCH_TD_PROCESS);
  tb_varint(t, ETCH_PD_PID, (uint64_t)pid);
  if (name) tb_string(t, ETCH_PD_PROCESS_NAME, name);
  tb_close(t);
  tb_close(t);
  tb_close(t);
}

void tb_thread_track(tb *t, uint32_t seq, uint64_t uuid, int32_t pid,
                     int32_t tid, const char *name) {
  tb_packet(t, seq, -1);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_varint(t, ETCH_TD_UUID, uuid);
  tb_open(t, ETCH_TD_THREAD);
  tb_varint(t, ETCH_THD_PID, (uint64_t)pid);
  tb_varint(t, ETCH_THD_TID, (uint64_t)tid);
  if (name) tb_string(t, ETCH_THD_THREAD_NAME, name);
  tb_close(t);
  tb_close(t);
  tb_close(t);
}

void tb_named_track(tb *t, uint32_t seq, uint64_t uuid, uint64_t parent,
                    const char *name) {
  tb_packet(t, seq, -1);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_varint(t, ETCH_TD_UUID, uuid);
  if (parent) tb_varint(t, ETCH_TD_PARENT_UUID, parent);
  if (name) tb_string(t, ETCH_TD_NAME, name);
  tb_close(t);
  tb_close(t);
}

void tb_counter_track(tb *t, uint32_t seq, uint64_t uuid, uint64_t parent,
                      const char *name, int unit) {
  tb_packet(t, seq, -1);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_varint(t, ETCH_TD_UUID, uuid);
  if (parent) tb_varint(t, ETCH_TD_PARENT_UUID, parent);
  if (name) tb_string(t, ETCH_TD_NAME, name);
  tb_open(t, ETCH_TD_COUNTER);
  if (unit) tb_varint(t, ETCH_CD_UNIT, (uint64_t)unit);
  tb_close(t);
  tb_close(t);
  tb_close(t);
}

void tb_event_open(tb *t, uint32_t seq, int64_t ts, uint64_t track, int type,
                   const char *cat, const char *name) {
  tb_packet(t, seq, ts);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_varint(t, ETCH_TE_TYPE, (uint64_t)type);
  if (track) tb_varint(t, ETCH_TE_TRACK_UUID, track);
  if (cat) tb_string(t, ETCH_TE_CATEGORIES, cat);
  if (name) tb_string(t, ETCH_TE_NAME, name);
}

void tb_end(tb *t) {
  tb_close(t);
  tb_close(t);
}

void tb_event(tb *t, uint32_t seq, int64_t ts, uint64_t track, int type,
              const char *cat, const char *name) {
  tb_event_open(t, seq, ts, track, type, cat, name);
  tb_end(t);
}

void tb_counter(tb *t, uint32_t seq, int64_t ts, uint64_t track, int64_t v) {
  tb_event_open(t, seq, ts, track, ETCH_TE_TYPE_COUNTER, NULL, NULL);
  tb_varint(t, ETCH_TE_COUNTER_VALUE, (uint64_t)v);
  tb_end(t);
}

void tb_counter_double(tb *t, uint32_t seq, int64_t ts, uint64_t track,
                       double v) {
  tb_event_open(t, seq, ts, track, ETCH_TE_TYPE_COUNTER, NULL, NULL);
  tb_double(t, ETCH_TE_DOUBLE_COUNTER_VALUE, v);
  tb_end(t);
}

void tb_compressed(tb *t, const tb *inner) {
  uLongf cap = compressBound((uLong)tb_len(inner));
  uint8_t *z = malloc(cap);
  if (!z || compress2(z, &cap, tb_data(inner), (uLong)tb_len(inner), 6) != Z_OK)
    FAIL("trace builder: compress failed");
  tb_packet(t, 0, -1);
  tb_bytes(t, ETCH_PKT_COMPRESSED_PACKETS, z, cap);
  tb_close(t);
  free(z);
}

const char *tb_write_file(const tb *t, const char *name) {
  static char path[4][512];
  static int next;
  char *p = path[next++ & 3];
  snprintf(p, 512, "%s/%s", etch_test_tmpdir(), name);
  FILE *f = fopen(p, "wb");
  if (!f || fwrite(tb_data(t), 1, tb_len(t), f) != tb_len(t))
    FAIL("cannot write %s", p);
  fclose(f);
  return p;
}

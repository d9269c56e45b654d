/*
 * trace_build.c - see trace_build.h.
 */
#include "trace_build.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "pb/pb.h"
#include "proto/perfetto.h"


/* ---- building --------------------------------------------------------------------- */

static void lv_put(tb_level *l, const void *p, size_t n) {
  if (l->cap - l->len < n) {
    size_t cap = l->cap ? l->cap : 256;
    while (cap - l->len < n) cap *= 2;
    l->data = realloc(l->data, cap);
    if (!l->data) abort();
    l->cap = cap;
  }
  if (n) memcpy(l->data + l->len, p, n);
  l->len += n;
}

void tb_init(tb *t) {
  memset(t, 0, sizeof *t);
}

void tb_free(tb *t) {
  for (int i = 0; i < TB_MAX_DEPTH; i++) free(t->lv[i].data);
  memset(t, 0, sizeof *t);
}

void tb_raw(tb *t, const void *p, size_t n) {
  lv_put(&t->lv[t->depth], p, n);
  t->data = t->lv[0].data;
  t->len = t->lv[0].len;
}

void tb_varint(tb *t, uint64_t v) {
  uint8_t b[ETCH_PB_MAX_VARINT];
  tb_raw(t, b, (size_t)(etch__pb_put_varint(b, v) - b));
}

static void tag(tb *t, uint32_t field, uint32_t wt) {
  tb_varint(t, etch__pb_tag(field, wt));
}

void tb_u(tb *t, uint32_t field, uint64_t v) {
  tag(t, field, ETCH_PB_VARINT);
  tb_varint(t, v);
}

void tb_i(tb *t, uint32_t field, int64_t v) { tb_u(t, field, (uint64_t)v); }

void tb_b(tb *t, uint32_t field, const void *p, size_t n) {
  tag(t, field, ETCH_PB_LEN);
  tb_varint(t, n);
  tb_raw(t, p, n);
}

void tb_s(tb *t, uint32_t field, const char *s) { tb_b(t, field, s, strlen(s)); }

void tb_f64(tb *t, uint32_t field, uint64_t v) {
  uint8_t b[8];
  tag(t, field, ETCH_PB_FIXED64);
  etch__pb_put_fixed64(b, v);
  tb_raw(t, b, 8);
}

void tb_d(tb *t, uint32_t field, double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  tb_f64(t, field, u);
}

void tb_open(tb *t, uint32_t field) {
  if (t->depth + 1 >= TB_MAX_DEPTH) abort();
  t->depth++;
  t->lv[t->depth].len = 0;
  t->lv[t->depth].field = field;
}

void tb_close(tb *t) {
  tb_level *l = &t->lv[t->depth];
  t->depth--;
  tb_b(t, l->field, l->data, l->len);
}

void tb_begin(tb *t) { tb_open(t, ETCH_TRACE_PACKET); }
void tb_end(tb *t) { tb_close(t); }

/* ---- common packets ------------------------------------------------------------------ */

void tb_etch_seq_start(tb *t, uint32_t seq, uint64_t ts, uint64_t thread_uuid,
                       bool prev_dropped) {
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, ts);
  tb_u(t, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_INCREMENTAL_STATE_CLEARED);
  if (prev_dropped) tb_u(t, ETCH_PKT_PREVIOUS_PACKET_DROPPED, 1);
  tb_open(t, ETCH_PKT_TRACE_PACKET_DEFAULTS);
  tb_u(t, ETCH_DEFAULTS_TIMESTAMP_CLOCK_ID, 64);
  tb_open(t, ETCH_DEFAULTS_TRACK_EVENT_DEFAULTS);
  tb_u(t, ETCH_TEDEFAULTS_TRACK_UUID, thread_uuid);
  tb_close(t);
  tb_close(t);
  tb_open(t, ETCH_PKT_CLOCK_SNAPSHOT);
  tb_open(t, ETCH_CLOCKSNAP_CLOCKS);
  tb_u(t, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  tb_u(t, ETCH_SNAPCLOCK_TIMESTAMP, ts);
  tb_close(t);
  tb_open(t, ETCH_CLOCKSNAP_CLOCKS);
  tb_u(t, ETCH_SNAPCLOCK_CLOCK_ID, 64);
  tb_u(t, ETCH_SNAPCLOCK_TIMESTAMP, ts);
  tb_u(t, ETCH_SNAPCLOCK_IS_INCREMENTAL, 1);
  tb_close(t);
  tb_close(t);
  if (!prev_dropped) tb_u(t, ETCH_PKT_FIRST_PACKET_ON_SEQUENCE, 1);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, seq);
  tb_end(t);
}

void tb_process_track(tb *t, uint32_t seq, uint64_t ts, uint64_t uuid,
                      int32_t pid, const char *name) {
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, ts);
  tb_u(t, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(t, ETCH_TD_UUID, uuid);
  tb_open(t, ETCH_TD_PROCESS);
  tb_i(t, ETCH_PD_PID, pid);
  tb_s(t, ETCH_PD_PROCESS_NAME, name);
  tb_s(t, ETCH_PD_CMDLINE, name);
  tb_close(t);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, seq);
  tb_end(t);
}

void tb_thread_track(tb *t, uint32_t seq, uint64_t ts, uint64_t uuid,
                     uint64_t parent, int32_t pid, int32_t tid,
                     const char *name) {
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, ts);
  tb_u(t, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(t, ETCH_TD_UUID, uuid);
  if (parent) tb_u(t, ETCH_TD_PARENT_UUID, parent);
  tb_open(t, ETCH_TD_THREAD);
  tb_i(t, ETCH_THD_PID, pid);
  tb_i(t, ETCH_THD_TID, tid);
  tb_s(t, ETCH_THD_THREAD_NAME, name);
  tb_close(t);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, seq);
  tb_end(t);
}

void tb_interned(tb *t, uint32_t kind, uint64_t iid, const char *name) {
  tb_open(t, kind);
  tb_u(t, ETCH_INTERNED_IID, iid);
  tb_s(t, ETCH_INTERNED_NAME, name);
  tb_close(t);
}

void tb_compressed(tb *t, const uint8_t *records, size_t len, bool zstd,
                   bool gzip) {
  size_t cap = len + len / 2 + 1024;
  uint8_t *buf = malloc(cap);
  size_t n;
  if (zstd) {
    n = ZSTD_compress(buf, cap, records, len, 3);
    if (ZSTD_isError(n)) abort();
  } else {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, 6, Z_DEFLATED, gzip ? 15 + 16 : 15, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
      abort();
    zs.next_in = (Bytef *)(uintptr_t)records;
    zs.avail_in = (uInt)len;
    zs.next_out = buf;
    zs.avail_out = (uInt)cap;
    if (deflate(&zs, Z_FINISH) != Z_STREAM_END) abort();
    n = zs.total_out;
    deflateEnd(&zs);
  }
  tb_begin(t);
  tb_b(t, zstd ? ETCH_PKT_ZSTD_COMPRESSED_PACKETS : ETCH_PKT_COMPRESSED_PACKETS,
       buf, n);
  tb_end(t);
  free(buf);
}

/* ---- events and tracks in one call --------------------------------------------------- */

void tb_packet(tb *t, uint32_t seq, int64_t ts) {
  tb_begin(t);
  if (ts >= 0) tb_u(t, ETCH_PKT_TIMESTAMP, (uint64_t)ts);
  if (seq) tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, seq);
  if (t->machine) tb_u(t, ETCH_PKT_MACHINE_ID, t->machine);
}

void tb_process(tb *t, uint32_t seq, uint64_t uuid, int32_t pid,
                const char *name) {
  tb_packet(t, seq, -1);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(t, ETCH_TD_UUID, uuid);
  tb_open(t, ETCH_TD_PROCESS);
  tb_i(t, ETCH_PD_PID, pid);
  if (name) tb_s(t, ETCH_PD_PROCESS_NAME, name);
  tb_close(t);
  tb_close(t);
  tb_end(t);
}

void tb_thread(tb *t, uint32_t seq, uint64_t uuid, int32_t pid, int32_t tid,
               const char *name) {
  tb_packet(t, seq, -1);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(t, ETCH_TD_UUID, uuid);
  tb_open(t, ETCH_TD_THREAD);
  tb_i(t, ETCH_THD_PID, pid);
  tb_i(t, ETCH_THD_TID, tid);
  if (name) tb_s(t, ETCH_THD_THREAD_NAME, name);
  tb_close(t);
  tb_close(t);
  tb_end(t);
}

void tb_named_track(tb *t, uint32_t seq, uint64_t uuid, uint64_t parent,
                    const char *name) {
  tb_packet(t, seq, -1);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(t, ETCH_TD_UUID, uuid);
  if (parent) tb_u(t, ETCH_TD_PARENT_UUID, parent);
  if (name) tb_s(t, ETCH_TD_NAME, name);
  tb_close(t);
  tb_end(t);
}

void tb_counter_track(tb *t, uint32_t seq, uint64_t uuid, uint64_t parent,
                      const char *name, int unit) {
  tb_packet(t, seq, -1);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(t, ETCH_TD_UUID, uuid);
  if (parent) tb_u(t, ETCH_TD_PARENT_UUID, parent);
  if (name) tb_s(t, ETCH_TD_NAME, name);
  tb_open(t, ETCH_TD_COUNTER);
  if (unit) tb_u(t, ETCH_CD_UNIT, (uint64_t)unit);
  tb_close(t);
  tb_close(t);
  tb_end(t);
}

void tb_event_open(tb *t, uint32_t seq, int64_t ts, uint64_t track, int type,
                   const char *cat, const char *name) {
  tb_packet(t, seq, ts);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, (uint64_t)type);
  if (track) tb_u(t, ETCH_TE_TRACK_UUID, track);
  if (cat) tb_s(t, ETCH_TE_CATEGORIES, cat);
  if (name) tb_s(t, ETCH_TE_NAME, name);
}

void tb_event_close(tb *t) {
  tb_close(t);
  tb_end(t);
}

void tb_event(tb *t, uint32_t seq, int64_t ts, uint64_t track, int type,
              const char *cat, const char *name) {
  tb_event_open(t, seq, ts, track, type, cat, name);
  tb_event_close(t);
}

void tb_counter(tb *t, uint32_t seq, int64_t ts, uint64_t track, int64_t v) {
  tb_event_open(t, seq, ts, track, ETCH_TE_TYPE_COUNTER, NULL, NULL);
  tb_i(t, ETCH_TE_COUNTER_VALUE, v);
  tb_event_close(t);
}

void tb_counter_double(tb *t, uint32_t seq, int64_t ts, uint64_t track,
                       double v) {
  tb_event_open(t, seq, ts, track, ETCH_TE_TYPE_COUNTER, NULL, NULL);
  tb_d(t, ETCH_TE_DOUBLE_COUNTER_VALUE, v);
  tb_event_close(t);
}

/*
 * tbuild.c - the reader tests' read-back helper and sample traces (also
 * written out as the fuzz seed corpus by reader_gen_corpus), on the tests'
 * trace builder (trace_build.c).
 */
#define _GNU_SOURCE
#include "tbuild.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "pb/pb.h"
#include "proto/perfetto.h"

#define PKT_INCREMENTAL_STATE_CLEARED_FIELD 41

/* ---- reading back ---------------------------------------------------------------------- */

typedef struct strbuf {
  char *s;
  size_t len, cap;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    size_t room = b->cap - b->len;
    va_start(ap, fmt);
    int n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < room) {
      b->len += (size_t)n;
      return;
    }
    b->cap = b->cap ? b->cap * 2 : 1024;
    while (b->cap - b->len <= (size_t)n) b->cap *= 2;
    b->s = realloc(b->s, b->cap);
    if (!b->s) abort();
  }
}

static const char *type_code(etch_event_type t) {
  switch (t) {
    case ETCH_EVENT_SLICE_BEGIN: return "B";
    case ETCH_EVENT_SLICE_END: return "E";
    case ETCH_EVENT_INSTANT: return "I";
    case ETCH_EVENT_COUNTER: return "C";
    default: return "?";
  }
}

static void format_event(strbuf *b, const etch_event *ev) {
  sb_printf(b, "%s %" PRId64 " seq=%u track=%" PRIu64 " pid=%d tid=%d",
            type_code(ev->type), ev->ts, ev->sequence_id, ev->track->uuid,
            ev->pid, ev->tid);
  if (ev->category[0]) sb_printf(b, " cat=%s", ev->category);
  if (ev->name[0]) sb_printf(b, " name=%s", ev->name);
  if (ev->type == ETCH_EVENT_COUNTER) {
    if (ev->counter_is_double)
      sb_printf(b, " value=%g", ev->counter_double);
    else
      sb_printf(b, " value=%" PRId64, ev->counter_int);
  }
  for (size_t i = 0; i < ev->flow_ids_count; i++)
    sb_printf(b, "%s%" PRIu64, i ? "," : " flows=", ev->flow_ids[i]);
  for (size_t i = 0; i < ev->terminating_flow_ids_count; i++)
    sb_printf(b, "%s%" PRIu64, i ? "," : " term=", ev->terminating_flow_ids[i]);
  for (size_t i = 0; i < ev->args_count; i++) {
    const etch_arg *a = &ev->args[i];
    if (strcmp(a->key, a->flat_key) != 0)
      sb_printf(b, " %s|%s=", a->flat_key, a->key);
    else
      sb_printf(b, " %s=", a->key);
    switch (a->type) {
      case ETCH_VALUE_BOOL: sb_printf(b, "b:%d", a->v.b); break;
      case ETCH_VALUE_INT: sb_printf(b, "i:%" PRId64, a->v.i); break;
      case ETCH_VALUE_UINT: sb_printf(b, "u:%" PRIu64, a->v.u); break;
      case ETCH_VALUE_DOUBLE: sb_printf(b, "d:%g", a->v.d); break;
      case ETCH_VALUE_STRING: sb_printf(b, "s:%s", a->v.s); break;
      case ETCH_VALUE_POINTER: sb_printf(b, "p:0x%" PRIx64, a->v.u); break;
      case ETCH_VALUE_JSON: sb_printf(b, "j:%s", a->v.s); break;
      default: sb_printf(b, "null"); break;
    }
  }
  sb_printf(b, "\n");
}

void tb_format_event(const etch_event *ev, char *buf, size_t cap) {
  strbuf b = {0};
  format_event(&b, ev);
  snprintf(buf, cap, "%s", b.s);
  free(b.s);
}

static void on_event(const etch_event *ev, void *user) {
  format_event((strbuf *)user, ev);
}

static void on_track(const etch_track_info *ti, void *user) {
  static const char *const kinds[] = {"global", "process", "thread", "named",
                                      "counter"};
  strbuf *b = (strbuf *)user;
  sb_printf(b, "%" PRIu64 " %s \"%s\" pid=%d tid=%d parent=%" PRIu64, ti->uuid,
            kinds[ti->kind], ti->name, ti->pid, ti->tid, ti->parent_uuid);
  if (ti->kind == ETCH_TRACK_COUNTER)
    sb_printf(b, " unit=%d unit_name=%s mult=%" PRId64 " incr=%d",
              ti->counter_unit, ti->counter_unit_name, ti->unit_multiplier,
              ti->is_incremental);
  sb_printf(b, "\n");
}

int tb_read(const void *data, size_t len, etch_reader_order order,
            tb_out *out) {
  memset(out, 0, sizeof *out);
  strbuf ev = {0}, tr = {0};
  sb_printf(&ev, "%s", "");
  sb_printf(&tr, "%s", "");
  etch_reader *r;
  int rc = etch_reader_open_memory(&r, data, len);
  if (rc) {
    out->rc = rc;
    snprintf(out->error, sizeof out->error, "%s", etch_last_error());
    return rc;
  }
  etch_reader_set_order(r, order);
  etch_reader_on(r, NULL, NULL, on_event, &ev);
  etch_reader_on_track(r, on_track, &tr);
  rc = etch_reader_run(r);
  out->rc = rc;
  if (rc) snprintf(out->error, sizeof out->error, "%s", etch_last_error());
  etch_reader_get_stats(r, &out->stats);
  etch_reader_time_bounds(r, &out->first, &out->last);
  etch_reader_close(r);
  out->events = ev.s;
  out->tracks = tr.s;
  return rc;
}

void tb_out_free(tb_out *out) {
  free(out->events);
  free(out->tracks);
  memset(out, 0, sizeof *out);
}

/* ---- samples --------------------------------------------------------------------------- */

enum { SEQ_A = 2, SEQ_B = 3 };
#define PROC_UUID 1000
#define THREAD_A 1001
#define THREAD_B 1002

/* An etch writer sequence: first packet, descriptors, interned events. */
static void sample_etch(tb *t) {
  tb_etch_seq_start(t, SEQ_A, 1000, THREAD_A, false);
  tb_process_track(t, SEQ_A, 1000, PROC_UUID, 42, "app");
  tb_thread_track(t, SEQ_A, 1000, THREAD_A, PROC_UUID, 42, 43, "main");
  /* SLICE_BEGIN "draw" in "render", interned in the same packet, +10 ns */
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 10);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_INTERNED_DATA);
  tb_interned(t, ETCH_ID_EVENT_CATEGORIES, 1, "render");
  tb_interned(t, ETCH_ID_EVENT_NAMES, 1, "draw");
  tb_interned(t, ETCH_ID_DEBUG_ANNOTATION_NAMES, 1, "frame");
  tb_close(t);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_SLICE_BEGIN);
  tb_u(t, ETCH_TE_CATEGORY_IIDS, 1);
  tb_u(t, ETCH_TE_NAME_IID, 1);
  tb_open(t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_u(t, ETCH_DA_NAME_IID, 1);
  tb_i(t, ETCH_DA_INT_VALUE, 7);
  tb_close(t);
  tb_f64(t, ETCH_TE_FLOW_IDS, 77);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ_A);
  tb_end(t);
  /* INSTANT "draw" with an explicit BOOTTIME timestamp: does not move the
   * incremental clock. */
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 5000);
  tb_u(t, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  tb_u(t, ETCH_TE_CATEGORY_IIDS, 1);
  tb_u(t, ETCH_TE_NAME_IID, 1);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ_A);
  tb_end(t);
  /* SLICE_END +5 ns (fast path shape) */
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 5);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_SLICE_END);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ_A);
  tb_end(t);
  /* Counter on a counter track +1 ns. */
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 1);
  tb_u(t, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(t, ETCH_TD_UUID, 2000);
  tb_u(t, ETCH_TD_PARENT_UUID, PROC_UUID);
  tb_s(t, ETCH_TD_NAME, "queue");
  tb_open(t, ETCH_TD_COUNTER);
  tb_u(t, ETCH_CD_UNIT, ETCH_CD_UNIT_COUNT);
  tb_close(t);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ_A);
  tb_end(t);
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 1);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_INTERNED_DATA);
  tb_interned(t, ETCH_ID_EVENT_NAMES, 2, "queue");
  tb_close(t);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_COUNTER);
  tb_u(t, ETCH_TE_TRACK_UUID, 2000);
  tb_u(t, ETCH_TE_NAME_IID, 2);
  tb_u(t, ETCH_TE_CATEGORY_IIDS, 1);
  tb_i(t, ETCH_TE_COUNTER_VALUE, -3);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ_A);
  tb_end(t);
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 4);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_COUNTER);
  tb_u(t, ETCH_TE_TRACK_UUID, 2000);
  tb_u(t, ETCH_TE_NAME_IID, 2);
  tb_d(t, ETCH_TE_DOUBLE_COUNTER_VALUE, 2.5);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ_A);
  tb_end(t);
  /* An instant ending the flow, +100. */
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 100);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  tb_u(t, ETCH_TE_NAME_IID, 1);
  tb_f64(t, ETCH_TE_TERMINATING_FLOW_IDS, 77);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ_A);
  tb_end(t);
}

/* Nested debug annotations: dicts, arrays, arrays of dicts, legacy
 * NestedValue, every value type, interned names and string values. */
static void sample_nested(tb *t) {
  tb_etch_seq_start(t, SEQ_A, 100, THREAD_A, false);
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 1);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_INTERNED_DATA);
  tb_interned(t, ETCH_ID_DEBUG_ANNOTATION_NAMES, 1, "req");
  tb_interned(t, ETCH_ID_DEBUG_ANNOTATION_NAMES, 2, "ids");
  tb_open(t, ETCH_ID_DEBUG_ANNOTATION_STRING_VALUES);
  tb_u(t, ETCH_INTERNED_IID, 1);
  tb_s(t, ETCH_INTERNED_STR, "GET");
  tb_close(t);
  tb_close(t);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  tb_s(t, ETCH_TE_NAME, "request");
  /* req: {method: "GET" (interned), ids: [1, 2, {x: true}], nested: {deep: 1.5}} */
  tb_open(t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_u(t, ETCH_DA_NAME_IID, 1);
  tb_open(t, ETCH_DA_DICT_ENTRIES);
  tb_s(t, ETCH_DA_NAME, "method");
  tb_u(t, ETCH_DA_STRING_VALUE_IID, 1);
  tb_close(t);
  tb_open(t, ETCH_DA_DICT_ENTRIES);
  tb_u(t, ETCH_DA_NAME_IID, 2);
  tb_open(t, ETCH_DA_ARRAY_VALUES);
  tb_u(t, ETCH_DA_UINT_VALUE, 1);
  tb_close(t);
  tb_open(t, ETCH_DA_ARRAY_VALUES);
  tb_u(t, ETCH_DA_UINT_VALUE, 2);
  tb_close(t);
  tb_open(t, ETCH_DA_ARRAY_VALUES);
  tb_open(t, ETCH_DA_DICT_ENTRIES);
  tb_s(t, ETCH_DA_NAME, "x");
  tb_u(t, ETCH_DA_BOOL_VALUE, 1);
  tb_close(t);
  tb_close(t);
  tb_close(t);
  tb_open(t, ETCH_DA_DICT_ENTRIES);
  tb_s(t, ETCH_DA_NAME, "nested");
  tb_open(t, ETCH_DA_DICT_ENTRIES);
  tb_d(t, ETCH_DA_DOUBLE_VALUE, 1.5); /* value before the name */
  tb_s(t, ETCH_DA_NAME, "deep");
  tb_close(t);
  tb_close(t);
  tb_close(t);
  /* Plain values. */
  tb_open(t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_s(t, ETCH_DA_NAME, "s");
  tb_s(t, ETCH_DA_STRING_VALUE, "hi");
  tb_close(t);
  tb_open(t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_s(t, ETCH_DA_NAME, "neg");
  tb_i(t, ETCH_DA_INT_VALUE, -5);
  tb_close(t);
  tb_open(t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_s(t, ETCH_DA_NAME, "ptr");
  tb_u(t, ETCH_DA_POINTER_VALUE, 0xdead);
  tb_close(t);
  tb_open(t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_s(t, ETCH_DA_NAME, "json");
  tb_s(t, ETCH_DA_LEGACY_JSON_VALUE, "{\"a\":1}");
  tb_close(t);
  /* Legacy NestedValue: {k: [3, "v"]} */
  tb_open(t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_s(t, ETCH_DA_NAME, "legacy");
  tb_open(t, ETCH_DA_NESTED_VALUE);
  tb_u(t, 1, 1); /* DICT */
  tb_s(t, 2, "k");
  tb_open(t, 3);
  tb_u(t, 1, 2); /* ARRAY */
  tb_open(t, 4);
  tb_i(t, 5, 3);
  tb_close(t);
  tb_open(t, 4);
  tb_s(t, 8, "v");
  tb_close(t);
  tb_close(t);
  tb_close(t);
  tb_close(t);
  tb_close(t); /* track_event */
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ_A);
  tb_end(t);
}

/* Records of sample_etch, compressed. */
static void sample_compressed(tb *t, bool zstd, bool gzip) {
  tb inner;
  tb_init(&inner);
  sample_etch(&inner);
  /* Split in two compressed packets to cross a boundary mid-sequence. */
  size_t half = 0;
  {
    /* find a record boundary near the middle */
    const uint8_t *p = inner.data, *end = inner.data + inner.len;
    while (p < end) {
      const uint8_t *q = p + 1;
      uint64_t l;
      etch__pb_read_varint(&q, end, &l);
      if ((size_t)(q + l - inner.data) > inner.len / 2 && !half)
        half = (size_t)(p - inner.data);
      p = q + l;
    }
  }
  tb_compressed(t, inner.data, half, zstd, gzip);
  tb_compressed(t, inner.data + half, inner.len - half, zstd, gzip);
  tb_free(&inner);
}

/* Data loss: events, loss, skipped packets, a packet without NEEDS, another
 * sequence unaffected, recovery at CLEARED. */
static void loss_event(tb *t, uint32_t seq, uint64_t delta, uint64_t type,
                       uint64_t name_iid) {
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, delta);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, type);
  if (name_iid) tb_u(t, ETCH_TE_NAME_IID, name_iid);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, seq);
  tb_end(t);
}

static void loss_names(tb *t, uint32_t seq) {
  tb_begin(t);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_INTERNED_DATA);
  tb_interned(t, ETCH_ID_EVENT_NAMES, 1, "work");
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, seq);
  tb_end(t);
}

static void sample_loss(tb *t) {
  tb_etch_seq_start(t, SEQ_A, 1000, THREAD_A, false);
  tb_thread_track(t, SEQ_A, 1000, THREAD_A, 0, 10, 11, "a");
  loss_names(t, SEQ_A);
  tb_etch_seq_start(t, SEQ_B, 1000, THREAD_B, false);
  tb_thread_track(t, SEQ_B, 1000, THREAD_B, 0, 10, 12, "b");
  loss_names(t, SEQ_B);
  loss_event(t, SEQ_A, 10, ETCH_TE_TYPE_SLICE_BEGIN, 1); /* 1010 */
  loss_event(t, SEQ_B, 20, ETCH_TE_TYPE_SLICE_BEGIN, 1); /* 1020 */
  /* Loss on A: this packet and the next NEEDS packets are skipped. */
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 5);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_u(t, ETCH_PKT_PREVIOUS_PACKET_DROPPED, 1);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_SLICE_END);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ_A);
  tb_end(t);
  loss_event(t, SEQ_A, 5, ETCH_TE_TYPE_INSTANT, 1);
  loss_event(t, SEQ_B, 10, ETCH_TE_TYPE_SLICE_END, 0); /* 1030 */
  /* No NEEDS flag: parsed although A's state is invalid. */
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 1500);
  tb_u(t, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  tb_u(t, ETCH_TE_TRACK_UUID, THREAD_A);
  tb_s(t, ETCH_TE_NAME, "marker");
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ_A);
  tb_end(t);
  /* NEEDS without a sequence id: an error, counted. */
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 1600);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  tb_s(t, ETCH_TE_NAME, "orphan");
  tb_close(t);
  tb_end(t);
  /* Recovery on A. */
  tb_etch_seq_start(t, SEQ_A, 2000, THREAD_A, true);
  loss_names(t, SEQ_A);
  loss_event(t, SEQ_A, 1, ETCH_TE_TYPE_SLICE_BEGIN, 1); /* 2001 */
  loss_event(t, SEQ_A, 1, ETCH_TE_TYPE_SLICE_END, 0);   /* 2002 */
  /* Closes the slice begun at 1010, whose end was lost. */
  loss_event(t, SEQ_A, 1, ETCH_TE_TYPE_SLICE_END, 0);   /* 2003 */
  /* An unmatched end on A's track: counted, not delivered. */
  loss_event(t, SEQ_A, 1, ETCH_TE_TYPE_SLICE_END, 0);   /* 2004 */
}

/* Packet defaults, a non-BOOTTIME clock, deprecated and packed fields,
 * inline names and several categories, source locations, trace stats and
 * etch drop reports, extra counter values. */
static void sample_misc(tb *t) {
  /* File clock snapshot: BOOTTIME 10000 = MONOTONIC 4000 = REALTIME 90000. */
  tb_begin(t);
  tb_open(t, ETCH_PKT_CLOCK_SNAPSHOT);
  tb_open(t, ETCH_CLOCKSNAP_CLOCKS);
  tb_u(t, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  tb_u(t, ETCH_SNAPCLOCK_TIMESTAMP, 10000);
  tb_close(t);
  tb_open(t, ETCH_CLOCKSNAP_CLOCKS);
  tb_u(t, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_MONOTONIC);
  tb_u(t, ETCH_SNAPCLOCK_TIMESTAMP, 4000);
  tb_close(t);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, 1);
  tb_end(t);
  /* REALTIME only paired with MONOTONIC: converted in two hops. */
  tb_begin(t);
  tb_open(t, ETCH_PKT_CLOCK_SNAPSHOT);
  tb_open(t, ETCH_CLOCKSNAP_CLOCKS);
  tb_u(t, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_MONOTONIC);
  tb_u(t, ETCH_SNAPCLOCK_TIMESTAMP, 5000);
  tb_close(t);
  tb_open(t, ETCH_CLOCKSNAP_CLOCKS);
  tb_u(t, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_REALTIME);
  tb_u(t, ETCH_SNAPCLOCK_TIMESTAMP, 900000);
  tb_close(t);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, 1);
  tb_end(t);

  /* Sequence 5: defaults put events on MONOTONIC and a named track. */
  tb_begin(t);
  tb_u(t, PKT_INCREMENTAL_STATE_CLEARED_FIELD, 1);
  tb_open(t, ETCH_PKT_TRACE_PACKET_DEFAULTS);
  tb_u(t, ETCH_DEFAULTS_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_MONOTONIC);
  tb_open(t, ETCH_DEFAULTS_TRACK_EVENT_DEFAULTS);
  tb_u(t, ETCH_TEDEFAULTS_TRACK_UUID, 3000);
  tb_u(t, ETCH_TEDEFAULTS_EXTRA_COUNTER_TRACK_UUIDS, 3001);
  tb_close(t);
  tb_close(t);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(t, ETCH_TD_UUID, 3000);
  tb_s(t, ETCH_TD_NAME, "jobs");
  tb_u(t, ETCH_TD_PARENT_UUID, 3002);
  tb_close(t);
  tb_open(t, ETCH_PKT_INTERNED_DATA);
  tb_open(t, ETCH_ID_SOURCE_LOCATIONS);
  tb_u(t, ETCH_SRCLOC_IID, 1);
  tb_s(t, ETCH_SRCLOC_FILE_NAME, "a.c");
  tb_s(t, ETCH_SRCLOC_FUNCTION_NAME, "f");
  tb_u(t, ETCH_SRCLOC_LINE_NUMBER, 12);
  tb_close(t);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, 5);
  tb_end(t);
  /* Parent process and a counter track described after first use. */
  tb_begin(t);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(t, ETCH_TD_UUID, 3002);
  tb_open(t, ETCH_TD_PROCESS);
  tb_i(t, ETCH_PD_PID, 77);
  tb_s(t, ETCH_PD_PROCESS_NAME, "srv");
  tb_close(t);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, 5);
  tb_end(t);
  tb_begin(t);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(t, ETCH_TD_UUID, 3001);
  tb_u(t, ETCH_TD_PARENT_UUID, 3002);
  tb_s(t, ETCH_TD_NAME, "mem");
  tb_open(t, ETCH_TD_COUNTER);
  tb_u(t, ETCH_CD_UNIT, ETCH_CD_UNIT_SIZE_BYTES);
  tb_u(t, ETCH_CD_UNIT_MULTIPLIER, 1024);
  tb_u(t, ETCH_CD_IS_INCREMENTAL, 1);
  tb_s(t, ETCH_CD_UNIT_NAME, "KiB");
  tb_close(t);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, 5);
  tb_end(t);
  /* MONOTONIC 4100 -> BOOTTIME 10100; inline name, two categories, deprecated
   * varint flows (one plain, two packed), source location, extra counter. */
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 4100);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_SLICE_BEGIN);
  tb_s(t, ETCH_TE_NAME, "job");
  tb_s(t, ETCH_TE_CATEGORIES, "io");
  tb_s(t, ETCH_TE_CATEGORIES, "net");
  tb_u(t, ETCH_TE_FLOW_IDS_OLD, 5);
  {
    uint8_t packed[2] = {6, 7};
    tb_b(t, ETCH_TE_FLOW_IDS_OLD, packed, 2);
    tb_b(t, ETCH_TE_TERMINATING_FLOW_IDS_OLD, packed, 1);
  }
  tb_u(t, ETCH_TE_SOURCE_LOCATION_IID, 1);
  tb_u(t, ETCH_TE_EXTRA_COUNTER_VALUES, 3);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, 5);
  tb_end(t);
  /* REALTIME 900050 -> MONOTONIC 5050 -> BOOTTIME 11050; packed fixed64
   * terminating flows; extra counter accumulates. */
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 900050);
  tb_u(t, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_REALTIME);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_SLICE_END);
  {
    uint8_t packed[16];
    etch__pb_put_fixed64(packed, 8);
    etch__pb_put_fixed64(packed + 8, 9);
    tb_b(t, ETCH_TE_TERMINATING_FLOW_IDS, packed, 16);
  }
  tb_u(t, ETCH_TE_EXTRA_COUNTER_VALUES, 2);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, 5);
  tb_end(t);
  /* A clock nobody converts: dropped and counted. */
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 1);
  tb_u(t, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_MONOTONIC_RAW);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  tb_s(t, ETCH_TE_NAME, "lost");
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, 5);
  tb_end(t);
  /* An unknown track uuid, and an event with no track at all (global). */
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 12000);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  tb_u(t, ETCH_TE_TRACK_UUID, 999);
  tb_s(t, ETCH_TE_NAME, "stray");
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, 6);
  tb_end(t);
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 12001);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  tb_s(t, ETCH_TE_NAME, "global");
  tb_u(t, 999, 5); /* an unknown field, ignored */
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, 6);
  tb_end(t);
  /* etch's end of file: a drop report and trace stats. */
  tb_thread_track(t, 1, 12002, 4000, 3002, 77, 78, "worker");
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 12003);
  tb_u(t, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  tb_u(t, ETCH_TE_TRACK_UUID, 4000);
  tb_s(t, ETCH_TE_CATEGORIES, "etch");
  tb_s(t, ETCH_TE_NAME, "etch.dropped_events");
  tb_open(t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_s(t, ETCH_DA_NAME, "count");
  tb_i(t, ETCH_DA_INT_VALUE, 17);
  tb_close(t);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, 1);
  tb_end(t);
  tb_begin(t);
  tb_open(t, ETCH_PKT_TRACE_STATS);
  tb_open(t, ETCH_TS_BUFFER_STATS);
  tb_u(t, ETCH_BS_BUFFER_SIZE, 65536);
  tb_u(t, ETCH_BS_CHUNKS_DISCARDED, 4);
  tb_u(t, ETCH_BS_CHUNKS_OVERWRITTEN, 2);
  tb_u(t, ETCH_BS_TRACE_WRITER_PACKET_LOSS, 1);
  tb_u(t, ETCH_BS_PATCHES_FAILED, 3);
  tb_u(t, ETCH_BS_ABI_VIOLATIONS, 5);
  tb_close(t);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, 1);
  tb_end(t);
}

/* One fast-path packet of libetch's current layout: flags, the track event,
 * then the timestamp delta, then the sequence id (added at read-out). */
static void fast_event(tb *t, uint64_t delta, uint64_t type, uint64_t name,
                       int64_t arg) {
  tb_begin(t);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, type);
  if (type != ETCH_TE_TYPE_SLICE_END) {
    tb_u(t, ETCH_TE_CATEGORY_IIDS, 1);
    tb_u(t, ETCH_TE_NAME_IID, name);
  }
  if (type == ETCH_TE_TYPE_COUNTER) {
    tb_u(t, ETCH_TE_TRACK_UUID, 2100);
    tb_i(t, ETCH_TE_COUNTER_VALUE, arg);
  } else if (arg) {
    tb_open(t, ETCH_TE_DEBUG_ANNOTATIONS);
    tb_u(t, ETCH_DA_NAME_IID, 1);
    tb_i(t, ETCH_DA_INT_VALUE, arg);
    tb_close(t);
  }
  tb_close(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, delta);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ_A);
  tb_end(t);
}

/* What libetch's fast paths write today (timestamp last), after a general
 * path packet that interns the names: nested slices, an instant with an int
 * arg, counters, 1-, 2- and 3-byte deltas. */
static void sample_fast(tb *t) {
  tb_etch_seq_start(t, SEQ_A, 1000, THREAD_A, false);
  tb_process_track(t, SEQ_A, 1000, PROC_UUID, 42, "app");
  tb_thread_track(t, SEQ_A, 1000, THREAD_A, PROC_UUID, 42, 43, "main");
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 1000);
  tb_u(t, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(t, ETCH_TD_UUID, 2100);
  tb_u(t, ETCH_TD_PARENT_UUID, PROC_UUID);
  tb_s(t, ETCH_TD_NAME, "depth");
  tb_open(t, ETCH_TD_COUNTER);
  tb_close(t);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ_A);
  tb_end(t);
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, 3);
  tb_u(t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(t, ETCH_PKT_INTERNED_DATA);
  tb_interned(t, ETCH_ID_EVENT_CATEGORIES, 1, "render");
  tb_interned(t, ETCH_ID_EVENT_NAMES, 1, "frame");
  tb_interned(t, ETCH_ID_EVENT_NAMES, 2, "draw");
  tb_interned(t, ETCH_ID_EVENT_NAMES, 3, "mark");
  tb_interned(t, ETCH_ID_EVENT_NAMES, 4, "depth");
  tb_interned(t, ETCH_ID_DEBUG_ANNOTATION_NAMES, 1, "v");
  tb_close(t);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_SLICE_BEGIN);
  tb_u(t, ETCH_TE_CATEGORY_IIDS, 1);
  tb_u(t, ETCH_TE_NAME_IID, 1);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, SEQ_A);
  tb_end(t);
  for (int i = 0; i < 3; i++) {
    fast_event(t, 25, ETCH_TE_TYPE_SLICE_BEGIN, 2, 0);
    fast_event(t, 300, ETCH_TE_TYPE_INSTANT, 3, 1000 * i - 7);
    fast_event(t, 20000, ETCH_TE_TYPE_COUNTER, 4, i - 1);
    fast_event(t, 90, ETCH_TE_TYPE_SLICE_END, 0, 0);
  }
  fast_event(t, 5, ETCH_TE_TYPE_SLICE_END, 0, 0);
}

static const char *const sample_names[] = {
    "etch", "nested", "zlib", "zstd", "gzip", "loss", "misc", "fast",
};

int tb_sample_count(void) { return (int)(sizeof sample_names / sizeof *sample_names); }
const char *tb_sample_name(int which) { return sample_names[which]; }

void tb_sample(tb *t, int which) {
  switch (which) {
    case 0: sample_etch(t); break;
    case 1: sample_nested(t); break;
    case 2: sample_compressed(t, false, false); break;
    case 3: sample_compressed(t, true, false); break;
    case 4: sample_compressed(t, false, true); break;
    case 5: sample_loss(t); break;
    case 6: sample_misc(t); break;
    case 7: sample_fast(t); break;
    default: abort();
  }
}

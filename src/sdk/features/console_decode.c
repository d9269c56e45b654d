/*
 * console_decode.c - the console interceptor's decoder (console.c makes
 * the lines): a sequence's packets read into its state (console_int.h),
 * each on its own. Interned strings by iid, the tracks that descriptors
 * named, the packet defaults, the incremental clock from the snapshot,
 * and of a packet's TrackEvent its fields, its debug annotations and
 * flows written as text. A malformed message stops where it breaks and
 * says so (derr); nothing past a field's bytes is read.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb/pb.h"
#include "proto/perfetto.h"
#include "sdk/core/sdk.h"
#include "sdk/features/console_int.h"

/* ---- interned strings and tracks ---------------------------------------------- */

/* An index + 1 kept in a map; 0 when absent. */
static uint32_t idx_get(const etch_u64map *m, uint64_t k) {
  int64_t v;
  return etch__u64map_get(m, k, &v) ? (uint32_t)v : 0;
}

/* iid -> string (owned), in base's pointer map. */
static void imap_clear(etch_ptrmap *m) {
  for (size_t i = 0; m->slots && i <= m->mask; i++) free(m->slots[i].val);
  etch__ptrmap_free(m);
}

static const char *imap_get(const etch_ptrmap *m, uint64_t k) {
  return k ? (const char *)etch__ptrmap_get(m, k) : NULL;
}

/* The trace may send an iid again (after a reset): the last one wins. A
 * map that cannot grow keeps what it has (the string shows as ?). */
static void imap_set(etch_ptrmap *m, uint64_t k, const uint8_t *s, size_t n) {
  if (!k) return;
  if (n > 1024) n = 1024;
  char *v = (char *)etch__malloc(n + 1);
  if (!v) return;
  memcpy(v, s, n);
  v[n] = '\0';
  char *old = (char *)etch__ptrmap_get(m, k);
  if (etch__ptrmap_put(m, k, v)) {
    free(v);
    return;
  }
  free(old);
}

void etch__console_seq_reset(cseq *q) {
  imap_clear(&q->names);
  imap_clear(&q->cats);
  imap_clear(&q->da_names);
  imap_clear(&q->da_strings);
}

void etch__console_seq_free(cseq *q) {
  etch__console_seq_reset(q);
  etch__u64map_free(&q->track_idx);
  free(q->tracks.data);
  free(q->line.v.data);
  free(q->args.v.data);
  free(q->flows.v.data);
}

ctrack *etch__console_track(cseq *q, uint64_t uuid) {
  uint32_t i = uuid ? idx_get(&q->track_idx, uuid) : 0;
  size_t n = q->tracks.len / sizeof(ctrack);
  return i && i <= n ? &((ctrack *)q->tracks.data)[i - 1] : NULL;
}

/* The track of uuid, made when it is new; NULL for uuid 0, past 65536
 * tracks (a sequence that lies about tracks) or out of memory. */
static ctrack *track_get(cseq *q, uint64_t uuid) {
  ctrack *t = etch__console_track(q, uuid);
  if (t || !uuid) return t;
  size_t n = q->tracks.len / sizeof *t;
  if (n >= 65536 || etch__vec_reserve(&q->tracks, sizeof *t)) return NULL;
  t = (ctrack *)(q->tracks.data + q->tracks.len);
  memset(t, 0, sizeof *t);
  t->uuid = uuid;
  if (!etch__u64map_put(&q->track_idx, uuid, (int64_t)n + 1)) return NULL;
  q->tracks.len += sizeof *t;
  return t;
}

/* ---- decoding --------------------------------------------------------------- */

static bool dec_ok(const etch__pb_dec *d, derr *e, size_t base) {
  if (!d->err) return true;
  if (!e->msg) {
    e->msg = d->err_msg ? d->err_msg : "malformed field";
    e->off = base + d->err_off;
  }
  return false;
}

static void interned(etch_ptrmap *m, const etch__pb_field *f, uint32_t str_field,
                     derr *e, size_t base) {
  etch__pb_dec d;
  etch__pb_field g;
  uint64_t iid = 0;
  const uint8_t *s = NULL;
  size_t n = 0;
  etch__pb_dec_init(&d, f->data, f->len);
  while (etch__pb_next(&d, &g)) {
    if (g.id == ETCH_INTERNED_IID && g.wt == ETCH_PB_VARINT) iid = g.u;
    if (g.id == str_field && g.wt == ETCH_PB_LEN) {
      s = g.data;
      n = g.len;
    }
  }
  if (dec_ok(&d, e, base) && s)
    imap_set(m, iid, s, n);
}

static void interned_data(cseq *q, const etch__pb_field *f, derr *e) {
  etch__pb_dec d;
  etch__pb_field g;
  etch__pb_dec_init(&d, f->data, f->len);
  while (etch__pb_next(&d, &g)) {
    if (g.wt != ETCH_PB_LEN) continue;
    if (g.id == ETCH_ID_EVENT_CATEGORIES)
      interned(&q->cats, &g, ETCH_INTERNED_NAME, e, f->off);
    else if (g.id == ETCH_ID_EVENT_NAMES)
      interned(&q->names, &g, ETCH_INTERNED_NAME, e, f->off);
    else if (g.id == ETCH_ID_DEBUG_ANNOTATION_NAMES)
      interned(&q->da_names, &g, ETCH_INTERNED_NAME, e, f->off);
    else if (g.id == ETCH_ID_DEBUG_ANNOTATION_STRING_VALUES)
      interned(&q->da_strings, &g, ETCH_INTERNED_STR, e, f->off);
  }
  dec_ok(&d, e, f->off);
}

static void track_descriptor(cseq *q, const etch__pb_field *f, derr *e) {
  etch__pb_dec d;
  etch__pb_field g, h;
  uint64_t uuid = 0;
  const uint8_t *name = NULL;
  size_t name_len = 0;
  etch__pb_field proc = {0}, thr = {0}, ctr = {0};
  etch__pb_dec_init(&d, f->data, f->len);
  while (etch__pb_next(&d, &g)) {
    if (g.id == ETCH_TD_UUID && g.wt == ETCH_PB_VARINT) uuid = g.u;
    if ((g.id == ETCH_TD_NAME || g.id == ETCH_TD_STATIC_NAME) &&
        g.wt == ETCH_PB_LEN) {
      name = g.data;
      name_len = g.len;
    }
    if (g.wt != ETCH_PB_LEN) continue;
    if (g.id == ETCH_TD_PROCESS) proc = g;
    if (g.id == ETCH_TD_THREAD) thr = g;
    if (g.id == ETCH_TD_COUNTER) ctr = g;
  }
  if (!dec_ok(&d, e, f->off)) return;
  ctrack *t = track_get(q, uuid);
  if (!t) return;
  if (name) copy_str(t->name, sizeof t->name, name, name_len);
  if (proc.data) {
    t->process = true;
    etch__pb_dec_init(&d, proc.data, proc.len);
    while (etch__pb_next(&d, &h)) {
      if (h.id == ETCH_PD_PID && h.wt == ETCH_PB_VARINT) t->pid = (int32_t)h.u;
      if (h.id == ETCH_PD_PROCESS_NAME && h.wt == ETCH_PB_LEN) {
        copy_str(t->name, sizeof t->name, h.data, h.len);
        copy_str(q->process_name, sizeof q->process_name, h.data, h.len);
      }
    }
    dec_ok(&d, e, f->off);
  }
  if (thr.data) {
    t->thread = true;
    etch__pb_dec_init(&d, thr.data, thr.len);
    while (etch__pb_next(&d, &h)) {
      if (h.wt == ETCH_PB_VARINT && h.id == ETCH_THD_PID) t->pid = (int32_t)h.u;
      if (h.wt == ETCH_PB_VARINT && h.id == ETCH_THD_TID) t->tid = (int32_t)h.u;
      if (h.id == ETCH_THD_THREAD_NAME && h.wt == ETCH_PB_LEN)
        copy_str(t->name, sizeof t->name, h.data, h.len);
    }
    dec_ok(&d, e, f->off);
  }
  if (ctr.data) {
    t->counter = true;
    etch__pb_dec_init(&d, ctr.data, ctr.len);
    while (etch__pb_next(&d, &h)) {
      if (h.id == ETCH_CD_UNIT && h.wt == ETCH_PB_VARINT && !t->unit[0]) {
        const char *u = h.u == ETCH_CD_UNIT_TIME_NS     ? "ns"
                        : h.u == ETCH_CD_UNIT_SIZE_BYTES ? "bytes"
                                                         : "";
        snprintf(t->unit, sizeof t->unit, "%s", u);
      }
      if (h.id == ETCH_CD_UNIT_NAME && h.wt == ETCH_PB_LEN)
        copy_str(t->unit, sizeof t->unit, h.data, h.len);
    }
    dec_ok(&d, e, f->off);
  }
}

static void defaults(cseq *q, const etch__pb_field *f, derr *e) {
  etch__pb_dec d, d2;
  etch__pb_field g, h;
  etch__pb_dec_init(&d, f->data, f->len);
  while (etch__pb_next(&d, &g)) {
    if (g.id == ETCH_DEFAULTS_TIMESTAMP_CLOCK_ID && g.wt == ETCH_PB_VARINT)
      q->default_clock = g.u;
    if (g.id == ETCH_DEFAULTS_TRACK_EVENT_DEFAULTS && g.wt == ETCH_PB_LEN) {
      etch__pb_dec_init(&d2, g.data, g.len);
      while (etch__pb_next(&d2, &h))
        if (h.id == ETCH_TEDEFAULTS_TRACK_UUID && h.wt == ETCH_PB_VARINT)
          q->default_track = h.u;
      dec_ok(&d2, e, f->off);
    }
  }
  dec_ok(&d, e, f->off);
}

/* Incremental clocks (ids 64-127) and their BOOTTIME offsets. */
static void clock_snapshot(cseq *q, const etch__pb_field *f, derr *e) {
  etch__pb_dec d, d2;
  etch__pb_field g, h;
  uint64_t boot = 0, incr_id = 0, incr_ts = 0;
  bool have_boot = false;
  etch__pb_dec_init(&d, f->data, f->len);
  while (etch__pb_next(&d, &g)) {
    if (g.id != ETCH_CLOCKSNAP_CLOCKS || g.wt != ETCH_PB_LEN) continue;
    uint64_t id = 0, ts = 0;
    bool incremental = false;
    etch__pb_dec_init(&d2, g.data, g.len);
    while (etch__pb_next(&d2, &h)) {
      if (h.wt != ETCH_PB_VARINT) continue;
      if (h.id == ETCH_SNAPCLOCK_CLOCK_ID) id = h.u;
      if (h.id == ETCH_SNAPCLOCK_TIMESTAMP) ts = h.u;
      if (h.id == ETCH_SNAPCLOCK_IS_INCREMENTAL) incremental = h.u != 0;
    }
    dec_ok(&d2, e, f->off);
    if (id == ETCH_CLOCK_BOOTTIME) {
      boot = ts;
      have_boot = true;
    } else if (incremental && id >= ETCH_CLOCK_SEQ_SCOPED_FIRST &&
               id <= ETCH_CLOCK_SEQ_SCOPED_LAST) {
      incr_id = id;
      incr_ts = ts;
    }
  }
  if (!dec_ok(&d, e, f->off) || !incr_id) return;
  q->incr_clock = incr_id;
  q->incr_value = incr_ts;
  q->incr_offset = have_boot ? (int64_t)(boot - incr_ts) : 0;
}

/* A NestedValue of type ARRAY (2) with no elements (field 4). */
static bool nested_is_empty_array(const uint8_t *data, size_t len) {
  etch__pb_dec d;
  etch__pb_field g;
  bool array = false;
  etch__pb_dec_init(&d, data, len);
  while (etch__pb_next(&d, &g)) {
    if (g.id == 1 && g.wt == ETCH_PB_VARINT) array = g.u == 2;
    if (g.id == 4) return false;
  }
  return array && !d.err;
}

/* One debug annotation's value, or a nested one's, into b. */
static void annotation_value(cseq *q, sbuf *b, const uint8_t *data,
                             size_t len, int depth, derr *e, size_t base);

static void annotation(cseq *q, sbuf *b, const uint8_t *data, size_t len,
                       int depth, derr *e, size_t base, bool with_name) {
  etch__pb_dec d;
  etch__pb_field g;
  const char *name = NULL;
  const uint8_t *lit = NULL;
  size_t lit_len = 0;
  etch__pb_dec_init(&d, data, len);
  while (etch__pb_next(&d, &g)) {
    if (g.id == ETCH_DA_NAME_IID && g.wt == ETCH_PB_VARINT)
      name = imap_get(&q->da_names, g.u);
    if (g.id == ETCH_DA_NAME && g.wt == ETCH_PB_LEN) {
      lit = g.data;
      lit_len = g.len;
    }
  }
  if (!dec_ok(&d, e, base)) return;
  if (with_name) {
    if (lit)
      etch__console_text(b, lit, lit_len, 64, false);
    else
      sb_puts(b, name ? name : "?");
    sb_put(b, "=", 1);
  }
  annotation_value(q, b, data, len, depth, e, base);
}

static void annotation_value(cseq *q, sbuf *b, const uint8_t *data,
                             size_t len, int depth, derr *e, size_t base) {
  etch__pb_dec d;
  etch__pb_field g;
  bool any = false;
  if (depth > 8) {
    sb_puts(b, "...");
    return;
  }
  etch__pb_dec_init(&d, data, len);
  while (etch__pb_next(&d, &g)) {
    bool v = g.wt == ETCH_PB_VARINT, l = g.wt == ETCH_PB_LEN;
    switch (g.id) {
      case ETCH_DA_BOOL_VALUE:
        if (v) sb_puts(b, g.u ? "true" : "false"), any = true;
        break;
      case ETCH_DA_UINT_VALUE:
        if (v) sb_u64(b, g.u), any = true;
        break;
      case ETCH_DA_INT_VALUE:
        if (v) sb_i64(b, (int64_t)g.u), any = true;
        break;
      case ETCH_DA_DOUBLE_VALUE:
        if (g.wt == ETCH_PB_FIXED64)
          sb_printf(b, "%.17g", etch__pb_field_double(&g)), any = true;
        break;
      case ETCH_DA_POINTER_VALUE:
        if (v) sb_printf(b, "0x%" PRIx64, g.u), any = true;
        break;
      case ETCH_DA_STRING_VALUE:
      case ETCH_DA_LEGACY_JSON_VALUE:
        if (l) etch__console_text(b, g.data, g.len, 256, true), any = true;
        break;
      case ETCH_DA_STRING_VALUE_IID:
        if (v) {
          const char *s = imap_get(&q->da_strings, g.u);
          if (s)
            etch__console_text(b, (const uint8_t *)s, strlen(s), 256, true);
          else
            sb_puts(b, "?");
          any = true;
        }
        break;
      case ETCH_DA_DICT_ENTRIES:
        if (!l) break;
        sb_puts(b, any ? ", " : "{");
        any = true;
        annotation(q, b, g.data, g.len, depth + 1, e, base, true);
        break;
      case ETCH_DA_ARRAY_VALUES:
        if (!l) break;
        sb_puts(b, any ? ", " : "[");
        any = true;
        annotation_value(q, b, g.data, g.len, depth + 1, e, base);
        break;
      case ETCH_DA_NESTED_VALUE:
        /* Only the empty array of custom events (docs/format.md) is
         * written in this older form; others print as "?". */
        if (l && !any && nested_is_empty_array(g.data, g.len))
          sb_puts(b, "[]"), any = true;
        break;
      default:
        break;
    }
  }
  dec_ok(&d, e, base);
  /* Close what the entries opened: a dict's or an array's bracket. */
  etch__pb_dec_init(&d, data, len);
  int kind = 0;
  while (etch__pb_next(&d, &g)) {
    if (g.id == ETCH_DA_DICT_ENTRIES && g.wt == ETCH_PB_LEN) kind = 1;
    if (g.id == ETCH_DA_ARRAY_VALUES && g.wt == ETCH_PB_LEN) kind = 2;
  }
  if (kind) sb_puts(b, kind == 1 ? "}" : "]");
  if (!any) sb_puts(b, "?");
}

/* ---- the packet ------------------------------------------------------------ */

static void track_event(cseq *q, const etch__pb_field *f, tevent *ev,
                        derr *e) {
  etch__pb_dec d;
  etch__pb_field g;
  sbuf *args = &q->args, *flows = &q->flows;
  args->v.len = flows->v.len = 0;
  etch__pb_dec_init(&d, f->data, f->len);
  while (etch__pb_next(&d, &g)) {
    bool v = g.wt == ETCH_PB_VARINT, l = g.wt == ETCH_PB_LEN;
    switch (g.id) {
      case ETCH_TE_TYPE:
        if (v) ev->type = g.u;
        break;
      case ETCH_TE_NAME_IID:
        if (v) ev->name = imap_get(&q->names, g.u), ev->lit = NULL;
        if (v && !ev->name) ev->name = "?";
        break;
      case ETCH_TE_NAME:
        if (l) ev->lit = g.data, ev->lit_len = g.len, ev->name = NULL;
        break;
      case ETCH_TE_CATEGORY_IIDS:
        if (v && !ev->cat) ev->cat = imap_get(&q->cats, g.u);
        break;
      case ETCH_TE_TRACK_UUID:
        if (v) ev->track = g.u, ev->has_track = true;
        break;
      case ETCH_TE_COUNTER_VALUE:
        if (v) ev->counter_i = (int64_t)g.u, ev->has_counter = true;
        break;
      case ETCH_TE_DOUBLE_COUNTER_VALUE:
        if (g.wt == ETCH_PB_FIXED64) {
          ev->counter_d = etch__pb_field_double(&g);
          ev->counter_is_double = ev->has_counter = true;
        }
        break;
      case ETCH_TE_DEBUG_ANNOTATIONS:
        if (!l) break;
        sb_put(args, " ", 1);
        annotation(q, args, g.data, g.len, 0, e, f->off, true);
        break;
      case ETCH_TE_FLOW_IDS:
      case ETCH_TE_TERMINATING_FLOW_IDS:
        if (g.wt == ETCH_PB_FIXED64)
          sb_printf(flows, " %s0x%" PRIx64,
                    g.id == ETCH_TE_FLOW_IDS ? "->" : "|>", g.u);
        break;
      case ETCH_TE_FLOW_IDS_OLD:
      case ETCH_TE_TERMINATING_FLOW_IDS_OLD:
        if (v)
          sb_printf(flows, " %s0x%" PRIx64,
                    g.id == ETCH_TE_FLOW_IDS_OLD ? "->" : "|>", g.u);
        break;
      default:
        break;
    }
  }
  dec_ok(&d, e, f->off);
}

void etch__console_decode(cseq *q, const uint8_t *data, size_t size,
                          cpacket *out) {
  etch__pb_dec d;
  etch__pb_field f, te = {0};
  uint64_t clock = 0;
  bool has_clock = false;
  memset(out, 0, sizeof *out);

  /* Everything but the TrackEvent first: its names may be interned in the
   * same packet, after it. */
  etch__pb_dec_init(&d, data, size);
  while (etch__pb_next(&d, &f)) {
    switch (f.id) {
      case ETCH_PKT_TIMESTAMP:
        if (f.wt == ETCH_PB_VARINT) out->ts = f.u, out->has_ts = true;
        break;
      case ETCH_PKT_TIMESTAMP_CLOCK_ID:
        if (f.wt == ETCH_PB_VARINT) clock = f.u, has_clock = true;
        break;
      case ETCH_PKT_TRACE_PACKET_DEFAULTS:
        if (f.wt == ETCH_PB_LEN) defaults(q, &f, &out->e);
        break;
      case ETCH_PKT_CLOCK_SNAPSHOT:
        if (f.wt == ETCH_PB_LEN) clock_snapshot(q, &f, &out->e);
        break;
      case ETCH_PKT_INTERNED_DATA:
        if (f.wt == ETCH_PB_LEN) interned_data(q, &f, &out->e);
        break;
      case ETCH_PKT_TRACK_DESCRIPTOR:
        if (f.wt == ETCH_PB_LEN) track_descriptor(q, &f, &out->e);
        break;
      case ETCH_PKT_TRACK_EVENT:
        if (f.wt == ETCH_PB_LEN) te = f, out->has_te = true;
        break;
      default:
        break;
    }
  }
  dec_ok(&d, &out->e, 0);

  /* The time in BOOTTIME ns. */
  if (!has_clock) clock = q->default_clock ? q->default_clock : ETCH_CLOCK_BOOTTIME;
  if (out->has_ts && q->incr_clock && clock == q->incr_clock) {
    q->incr_value += out->ts;
    out->ts = q->incr_value + (uint64_t)q->incr_offset;
  } else if (out->has_ts && clock >= ETCH_CLOCK_SEQ_SCOPED_FIRST &&
             clock <= ETCH_CLOCK_SEQ_SCOPED_LAST) {
    out->has_ts = false; /* a clock this sequence never defined */
  }

  if (out->has_te && !out->e.msg) track_event(q, &te, &out->ev, &out->e);
}

/*
 * fast.c - a decoder for the packets libetch's fast paths write, tried on
 * every packet before the generic one (packet.c).
 *
 * Those packets are a track event and its timestamp:
 *
 *   [size] 68 02 5A len <TrackEvent> 40 <delta> 50 <sequence id>
 *
 * (sequence_flags NEEDS_INCREMENTAL_STATE, track_event, timestamp, then the
 * sequence id that the buffer adds on the way out), the TrackEvent being
 * 48 type, 18 category iid, 50 name iid, maybe 58 track uuid and F0 01
 * counter value (or E1 02 double), and debug annotations of one interned
 * name and one scalar value (22 len 08 iid <value>). The general path
 * writes the same fields with the timestamp first, some nested lengths as
 * redundant 4-byte varints.
 *
 * This decoder takes exactly those fields, in any order, with lengths and
 * varints of any (valid) size; anything else - another field, a field twice
 * where that matters, an interned iid not defined, a flag other than
 * NEEDS_INCREMENTAL_STATE, a sequence whose state is lost, malformed or
 * truncated bytes - makes it give up before it has changed anything, and
 * the generic decoder reads the packet from scratch. So its results are
 * those of the generic decoder by construction; tests/reader compare the
 * two on traces built byte by byte.
 *
 * What makes it cheaper: one pass over each message with a switch on the
 * whole tag byte, no per-event scratch resets, interned names and
 * categories from the direct arrays of etch_idtab, debug annotation keys
 * ("debug.<name>") cached per sequence and iid, the incremental clock and
 * the delivery inline.
 */
#include <string.h>

#include "proto/perfetto.h"
#include "reader/clock.h"
#include "reader/deliver.h"
#include "reader/event.h"
#include "reader/fast.h"
#include "reader/packet.h"
#include "reader/progress.h"
#include "reader/reader_int.h"

/* Tags (field << 3 | wire type) of the fields taken. */
enum {
  T_PKT_TIMESTAMP = (ETCH_PKT_TIMESTAMP << 3) | ETCH_PB_VARINT,          /* 40 */
  T_PKT_SEQ_ID = (ETCH_PKT_TRUSTED_SEQ_ID << 3) | ETCH_PB_VARINT,        /* 50 */
  T_PKT_TRACK_EVENT = (ETCH_PKT_TRACK_EVENT << 3) | ETCH_PB_LEN,         /* 5A */
  T_PKT_FLAGS = (ETCH_PKT_SEQUENCE_FLAGS << 3) | ETCH_PB_VARINT,         /* 68 */
  T_TE_CATEGORY_IID = (ETCH_TE_CATEGORY_IIDS << 3) | ETCH_PB_VARINT,     /* 18 */
  T_TE_DEBUG_ANNOTATION = (ETCH_TE_DEBUG_ANNOTATIONS << 3) | ETCH_PB_LEN, /* 22 */
  T_TE_TYPE = (ETCH_TE_TYPE << 3) | ETCH_PB_VARINT,                      /* 48 */
  T_TE_NAME_IID = (ETCH_TE_NAME_IID << 3) | ETCH_PB_VARINT,              /* 50 */
  T_TE_TRACK_UUID = (ETCH_TE_TRACK_UUID << 3) | ETCH_PB_VARINT,          /* 58 */
  /* Two-byte tags: the low 7 bits with the continuation bit, then the rest. */
  T_TE_COUNTER_VALUE = (ETCH_TE_COUNTER_VALUE << 3) | ETCH_PB_VARINT,    /* F0 01 */
  T_TE_DOUBLE_COUNTER = (ETCH_TE_DOUBLE_COUNTER_VALUE << 3) | ETCH_PB_FIXED64, /* E1 02 */
  T_DA_NAME_IID = (ETCH_DA_NAME_IID << 3) | ETCH_PB_VARINT,              /* 08 */
  T_DA_BOOL = (ETCH_DA_BOOL_VALUE << 3) | ETCH_PB_VARINT,                /* 10 */
  T_DA_UINT = (ETCH_DA_UINT_VALUE << 3) | ETCH_PB_VARINT,                /* 18 */
  T_DA_INT = (ETCH_DA_INT_VALUE << 3) | ETCH_PB_VARINT,                  /* 20 */
  T_DA_DOUBLE = (ETCH_DA_DOUBLE_VALUE << 3) | ETCH_PB_FIXED64,           /* 29 */
  T_DA_POINTER = (ETCH_DA_POINTER_VALUE << 3) | ETCH_PB_VARINT,          /* 38 */
};

#define TAG2_LO(t) (uint8_t)(((t) & 0x7f) | 0x80)
#define TAG2_HI(t) (uint8_t)((t) >> 7)

/* fast_packet's answer for a packet it does not take. */
#define RD_FAST_NO 1

/* Debug annotations of one event taken here (more: the generic decoder). */
#define FAST_MAX_ARGS 8

/* A varint as etch__pb_next reads it (up to 10 bytes, bits past 64
 * dropped); NULL when truncated or longer. */
static ETCH_NOINLINE const uint8_t *varint_long(const uint8_t *q,
                                                const uint8_t *end,
                                                uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (q >= end) return NULL;
    uint8_t b = *q++;
    if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return q;
    }
  }
  return NULL;
}

/* The same, one- and two-byte varints inline. */
ETCH_INLINE const uint8_t *varint(const uint8_t *q, const uint8_t *end,
                                  uint64_t *out) {
  if (ETCH_LIKELY(q < end && q[0] < 0x80)) {
    *out = q[0];
    return q + 1;
  }
  if (ETCH_LIKELY(end - q >= 2 && q[1] < 0x80)) {
    *out = (uint64_t)(q[0] & 0x7f) | (uint64_t)q[1] << 7;
    return q + 2;
  }
  return varint_long(q, end, out);
}

ETCH_INLINE uint32_t load_le32(const uint8_t *q) {
  return (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
         (uint32_t)q[3] << 24;
}

/* etch__pb_varint5 with the two shapes of lengths libetch writes inline: one
 * byte, and the 4-byte redundant varint of a length reserved and patched
 * (three bytes with the continuation bit, then one without). */
ETCH_INLINE const uint8_t *len_varint(const uint8_t *q, const uint8_t *end,
                                      uint64_t *out) {
  if (ETCH_LIKELY(q < end && q[0] < 0x80)) {
    *out = q[0];
    return q + 1;
  }
  if (end - q >= 4) {
    uint32_t w = load_le32(q);
    if ((w & 0xffffff80u) == 0x00808080u) { /* below 128, the usual case */
      *out = w & 0x7f;
      return q + 4;
    }
    if ((w & 0x80808080u) == 0x00808080u) {
      *out = (w & 0x7f) | (w >> 1 & 0x3f80) | (w >> 2 & 0x1fc000) |
             (w >> 3 & 0xfe00000);
      return q + 4;
    }
  }
  return etch__pb_varint5(q, end, out);
}

/* A length (up to 5 bytes, redundant ones included) that fits in [q, end);
 * NULL otherwise. */
ETCH_INLINE const uint8_t *length(const uint8_t *q, const uint8_t *end,
                                  const uint8_t **body_end) {
  uint64_t n;
  if (!(q = len_varint(q, end, &n)) || n > (uint64_t)(end - q)) return NULL;
  *body_end = q + n;
  return q;
}

ETCH_INLINE uint64_t load_le64(const uint8_t *q) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | q[i];
  return v;
}

/* 68 02 5A (flags NEEDS_INCREMENTAL_STATE, then a track event), read as
 * the low three bytes of a little-endian word. */
#define PREFIX                                                      \
  ((uint32_t)T_PKT_FLAGS | (uint32_t)ETCH_SEQ_NEEDS_INCREMENTAL_STATE << 8 | \
   (uint32_t)T_PKT_TRACK_EVENT << 16)

typedef struct fast_arg {
  uint64_t iid;
  uint64_t v;
  etch_value_type type;
} fast_arg;

/* One DebugAnnotation {name_iid, one scalar value}, fields in any order. */
static const uint8_t *debug_annotation(const uint8_t *q, const uint8_t *end,
                                       fast_arg *a) {
  bool has_iid = false, has_value = false;
  while (q < end) {
    uint8_t tag = *q++;
    uint64_t v;
    if (tag == T_DA_DOUBLE) {
      if (end - q < 8 || has_value) return NULL;
      a->v = load_le64(q);
      a->type = ETCH_VALUE_DOUBLE;
      has_value = true;
      q += 8;
      continue;
    }
    if (!(q = varint(q, end, &v))) return NULL;
    etch_value_type type;
    switch (tag) {
      case T_DA_NAME_IID:
        if (has_iid) return NULL;
        has_iid = true;
        a->iid = v;
        continue;
      case T_DA_BOOL: type = ETCH_VALUE_BOOL; break;
      case T_DA_UINT: type = ETCH_VALUE_UINT; break;
      case T_DA_INT: type = ETCH_VALUE_INT; break;
      case T_DA_POINTER: type = ETCH_VALUE_POINTER; break;
      default: return NULL;
    }
    if (has_value) return NULL;
    has_value = true;
    a->type = type;
    a->v = v;
  }
  return has_iid && has_value ? q : NULL;
}

/*
 * The pooled "debug.<name>" of an interned annotation name, as the generic
 * decoder keys it, cached beside the name (etch_idtab.aux: reset when the iid
 * is defined again or the state cleared). NULL when the iid is not defined
 * or the key would be long.
 */
static const char *arg_key(etch_reader *r, rd_seq *seq, uint64_t iid) {
  etch_idtab *t = &seq->da_names;
  if (iid < t->cap && t->aux && t->aux[iid]) return t->aux[iid];
  const char *name = (const char *)etch__idtab_get(t, iid);
  if (!name) return NULL;
  size_t n = strlen(name);
  if (n > RD_MAX_KEY / 2) return NULL;
  ETCH_DCHECK(6 + n <= sizeof r->flat);
  memcpy(r->flat, "debug.", 6);
  memcpy(r->flat + 6, name, n);
  const char *key = etch__strpool_get(&r->pool, r->flat, 6 + n);
  if (!key) return NULL;
  if (iid < t->cap && !etch__idtab_want_aux(t) && t->aux) t->aux[iid] = key;
  return key;
}

static int grow_args(etch_reader *r, size_t n) {
  size_t nc = r->cap_args ? r->cap_args : 16;
  while (nc < n) nc *= 2;
  etch_arg *a = (etch_arg *)etch__realloc(r->args, nc * sizeof *a);
  if (!a) return ETCH_ENOMEM;
  r->args = a;
  r->cap_args = nc;
  return 0;
}

/* Fills the sequence's fast-path view in (see rd_seq.fgen). */
static ETCH_NOINLINE void seq_look(etch_reader *r, rd_seq *seq) {
  seq->fgen = r->gen;
  seq->fok = seq->id != 0 && seq->valid;
  seq->fclk = NULL;
  /* A sequence-scoped clock (64..127) is never the trace clock (< 64). */
  uint32_t idx = seq->clock_default - ETCH_CLOCK_SEQ_SCOPED_FIRST;
  if (seq->has_clock_default && idx < 64) {
    rd_clock *k = seq->clocks[idx];
    if (k && k->incremental && k->has_last) seq->fclk = k;
  }
  seq->fuuid = seq->has_track_default ? seq->track_default : 0;
}

/* etch__rd_packet_time, the sequence's incremental clock inline. */
ETCH_INLINE bool packet_time(etch_reader *r, rd_seq *seq, bool has_ts,
                             uint64_t raw, int64_t *out) {
  rd_clock *k = seq->fclk;
  if (ETCH_LIKELY(has_ts && k)) {
    uint64_t v = (k->last + raw);
    k->last = v;
    v *= k->unit_ns;
    /* rd_clock_convert: the pair last used, if v still falls in it (the
     * key of a sequence-scoped clock is never the trace clock's). */
    if (ETCH_LIKELY(v - k->c_lo < k->c_span)) {
      r->clocks.converted = true;
      *out = (int64_t)(k->c_dst + (v - k->c_lo));
    } else if (!etch__rd_clock_convert(r, k, v, out)) {
      return false;
    }
    if (*out > r->latest_ts) r->latest_ts = *out;
    return true;
  }
  uint32_t clock_id = seq->has_clock_default ? seq->clock_default : 0;
  return etch__rd_packet_time(r, seq, has_ts, raw, clock_id, out);
}

/* A track event this decoder took, its names found. */
typedef struct fast_event {
  uint64_t type, counter, uuid;
  const char *name, *category;
  bool counter_is_double;
} fast_event;

/* The last step of fast_packet: what etch__rd_packet and
 * etch__rd_track_event do with a track event - its time, its track, the
 * event delivered (the args are in r->args already). */
ETCH_INLINE int fast_deliver(etch_reader *r, rd_seq *seq, uint64_t rec_off,
                             bool has_ts, uint64_t raw_ts, size_t nargs,
                             const fast_event *fe) {
  r->fast_packets++;
  r->stats.packets++;
  int64_t ts;
  if (!packet_time(r, seq, has_ts, raw_ts, &ts)) {
    r->stats.clock_conversion_failed++;
    return 0;
  }
  r->stats.track_events++;
  r->nargs = nargs;

  uint64_t uuid = fe->uuid;
  rd_track *t = seq->last_track;
  if (ETCH_UNLIKELY(!t || t->info.uuid != uuid)) {
    if (!(t = etch__rd_event_track(r, uuid))) return ETCH_ENOMEM;
    seq->last_track = t;
  }

  bool is_double = fe->counter_is_double;
  etch_event ev;
  ev.type = (etch_event_type)fe->type;
  ev.ts = ts;
  ev.sequence_id = seq->id;
  ev.track = &t->info;
  ev.pid = 0;
  ev.tid = 0;
  ev.category = fe->category;
  ev.name = fe->name;
  ev.counter_is_double = is_double;
  ev.counter_int = is_double ? 0 : (int64_t)fe->counter;
  ev.counter_double = 0;
  if (is_double) memcpy(&ev.counter_double, &fe->counter, sizeof fe->counter);
  ev.flow_ids = NULL;
  ev.flow_ids_count = 0;
  ev.terminating_flow_ids = NULL;
  ev.terminating_flow_ids_count = 0;
  ev.args = nargs ? r->args : NULL;
  ev.args_count = nargs;
  ev.packet_offset = rec_off;
  ev.after_loss = false;
  ev.callsite_id = -1;
  if (ev.type == ETCH_EVENT_COUNTER) etch__rd_counter_value(seq, t, &ev);
  etch__rd_count_dropped(r, ev.type, fe->name, r->args, nargs);

  if (ETCH_LIKELY(r->order == ETCH_ORDER_FILE)) {
    if (ETCH_UNLIKELY(seq->loss_pending)) {
      ev.after_loss = true;
      seq->loss_pending = false;
    }
    rd_number(r, &ev);
    if (r->per_track) return rd_deliver_per_track(r, &ev, t);
    rd_deliver(r, &ev, t);
    return 0;
  }
  return etch__rd_emit(r, seq, &ev, t);
}

ETCH_INLINE int fast_packet(etch_reader *r, uint64_t rec_off,
                            const uint8_t *pkt, size_t len) {
  const uint8_t *p = pkt, *end = pkt + len;
  const uint8_t *te = NULL, *te_end = NULL;
  uint64_t raw_ts = 0, flags = 0, seq_id = 0;
  bool has_ts = false;

  /* The packet: last one wins, as in etch__rd_packet. libetch's orders
   * first, straight on - [40 ts] 68 02 5A len <te> [40 ts] [50 seq], the
   * timestamp first (general path, older writers) or after the event (fast
   * path) - then the loop for whatever is left, in any order. */
  bool prefix = end - p >= 4 && (load_le32(p) & 0xffffffu) == PREFIX;
  if (!prefix && p < end && p[0] == T_PKT_TIMESTAMP) {
    if (!(p = varint(p + 1, end, &raw_ts))) return RD_FAST_NO;
    has_ts = true;
    prefix = end - p >= 4 && (load_le32(p) & 0xffffffu) == PREFIX;
  }
  if (ETCH_LIKELY(prefix)) {
    flags = ETCH_SEQ_NEEDS_INCREMENTAL_STATE;
    te = p + 4;
    if (ETCH_LIKELY(p[3] < 0x80)) {
      if (p[3] > end - te) return RD_FAST_NO;
      te_end = te + p[3];
    } else if (!(te = length(p + 3, end, &te_end))) {
      return RD_FAST_NO;
    }
    p = te_end;
    if (ETCH_LIKELY(p < end && p[0] == T_PKT_TIMESTAMP)) {
      if (!(p = varint(p + 1, end, &raw_ts))) return RD_FAST_NO;
      has_ts = true;
    }
    if (ETCH_LIKELY(p < end && p[0] == T_PKT_SEQ_ID)) {
      if (!(p = varint(p + 1, end, &seq_id))) return RD_FAST_NO;
    }
  }
  while (p < end) {
    uint8_t tag = *p++;
    uint64_t v;
    switch (tag) {
      case T_PKT_TRACK_EVENT:
        if (!(p = length(p, end, &te_end))) return RD_FAST_NO;
        te = p;
        p = te_end;
        continue;
      case T_PKT_TIMESTAMP:
      case T_PKT_FLAGS:
      case T_PKT_SEQ_ID:
        break;
      default:
        return RD_FAST_NO;
    }
    if (!(p = varint(p, end, &v))) return RD_FAST_NO;
    if (tag == T_PKT_TIMESTAMP) {
      raw_ts = v;
      has_ts = true;
    } else if (tag == T_PKT_FLAGS) {
      flags = v;
    } else {
      seq_id = v;
    }
  }
  if (!te) return RD_FAST_NO;
  uint32_t fl = (uint32_t)flags;
  if (fl & ~(uint32_t)ETCH_SEQ_NEEDS_INCREMENTAL_STATE) return RD_FAST_NO;
  /* No machine_id (another field): the host's packet. */
  r->cur_machine = 0;
  /* Finding (or creating) the sequence is what etch__rd_packet does first
   * either way. */
  rd_seq *seq = rd_seq_get(r, (uint32_t)seq_id);
  if (!seq) return RD_FAST_NO;
  if (ETCH_UNLIKELY(seq->fgen != r->gen)) seq_look(r, seq);
  if (fl && !seq->fok) return RD_FAST_NO;

  /* The track event. */
  uint64_t type = 0, name_iid = 0, cat_iid = 0, uuid = 0, counter = 0;
  bool has_name = false, has_cat = false, has_uuid = false,
       counter_is_double = false;
  fast_arg args[FAST_MAX_ARGS];
  size_t nargs = 0;
  const uint8_t *q = te;
  /* 48 type 18 category 50 name straight on, as above. */
  if (ETCH_LIKELY(te_end - q >= 2 && q[0] == T_TE_TYPE && q[1] < 0x80)) {
    type = q[1];
    q += 2;
    if (ETCH_LIKELY(te_end - q >= 2 && q[0] == T_TE_CATEGORY_IID &&
                    q[1] < 0x80)) {
      has_cat = true;
      cat_iid = q[1];
      q += 2;
    }
    if (ETCH_LIKELY(q < te_end && q[0] == T_TE_NAME_IID)) {
      has_name = true;
      if (!(q = varint(q + 1, te_end, &name_iid))) return RD_FAST_NO;
    }
  }
  while (q < te_end) {
    uint8_t tag = *q++;
    switch (tag) {
      case T_TE_TYPE:
        q = varint(q, te_end, &type);
        break;
      case T_TE_CATEGORY_IID:
        if (has_cat) return RD_FAST_NO; /* several: joined by the generic */
        has_cat = true;
        q = varint(q, te_end, &cat_iid);
        break;
      case T_TE_NAME_IID:
        has_name = true;
        q = varint(q, te_end, &name_iid);
        break;
      case T_TE_TRACK_UUID:
        has_uuid = true;
        q = varint(q, te_end, &uuid);
        break;
      case TAG2_LO(T_TE_COUNTER_VALUE):
        if (q == te_end || *q != TAG2_HI(T_TE_COUNTER_VALUE)) return RD_FAST_NO;
        counter_is_double = false;
        q = varint(q + 1, te_end, &counter);
        break;
      case TAG2_LO(T_TE_DOUBLE_COUNTER):
        if (te_end - q < 9 || *q != TAG2_HI(T_TE_DOUBLE_COUNTER))
          return RD_FAST_NO;
        counter_is_double = true;
        counter = load_le64(q + 1);
        q += 9;
        break;
      case T_TE_DEBUG_ANNOTATION: {
        const uint8_t *da_end;
        if (nargs == FAST_MAX_ARGS || !(q = length(q, te_end, &da_end)) ||
            !debug_annotation(q, da_end, &args[nargs]))
          return RD_FAST_NO;
        nargs++;
        q = da_end;
        break;
      }
      default:
        return RD_FAST_NO;
    }
    if (!q) return RD_FAST_NO;
  }
  if (type < ETCH_TE_TYPE_SLICE_BEGIN || type > ETCH_TE_TYPE_COUNTER)
    return RD_FAST_NO;
  const char *name = r->empty, *category = r->empty;
  if (has_name && !(name = (const char *)etch__idtab_get(&seq->names, name_iid)))
    return RD_FAST_NO;
  if (has_cat && !(category = (const char *)etch__idtab_get(&seq->cats, cat_iid)))
    return RD_FAST_NO;
  if (nargs) {
    if (r->cap_args < nargs && grow_args(r, nargs)) return RD_FAST_NO;
    for (size_t i = 0; i < nargs; i++) {
      etch_arg *a = &r->args[i];
      if (!(a->flat_key = arg_key(r, seq, args[i].iid))) return RD_FAST_NO;
      a->key = a->flat_key;
      a->type = args[i].type;
      if (args[i].type == ETCH_VALUE_BOOL)
        a->v.b = args[i].v != 0;
      else if (args[i].type == ETCH_VALUE_INT)
        a->v.i = (int64_t)args[i].v;
      else if (args[i].type == ETCH_VALUE_DOUBLE)
        memcpy(&a->v.d, &args[i].v, sizeof a->v.d);
      else
        a->v.u = args[i].v;
    }
  }

  /* From here on, what etch__rd_packet and etch__rd_track_event do. */
  fast_event fe = {.type = type, .counter = counter, .name = name,
                   .category = category, .uuid = has_uuid ? uuid : seq->fuuid,
                   .counter_is_double = counter_is_double};
  return fast_deliver(r, seq, rec_off, has_ts, raw_ts, nargs, &fe);
}

int etch__rd_fast_records(etch_reader *r, const rd_src *src,
                          const uint8_t **pp, const uint8_t *end) {
  const uint8_t *start = src->start, *p = *pp;
  bool top = src->depth == 0;
  while (p < end) {
    const uint8_t *rec = p;
    uint64_t plen;
    const uint8_t *q;
    if (*p != 0x0A || !(q = len_varint(p + 1, end, &plen)) ||
        plen > (uint64_t)(end - q))
      break;
    if (ETCH_UNLIKELY(top && (uint64_t)(rec - start) >= r->watch_at))
      etch__rd_watch(r, (uint64_t)(rec - start), (uint64_t)(end - start));
    int rc = fast_packet(r, (uint64_t)(rec - start), q, (size_t)plen);
    if (rc == RD_FAST_NO) break;
    if (ETCH_UNLIKELY(rc)) {
      if (top) r->cur_off = (uint64_t)(rec - start);
      *pp = rec;
      return rc;
    }
    p = q + plen;
    if (ETCH_UNLIKELY(r->stop)) break;
  }
  *pp = p;
  return 0;
}

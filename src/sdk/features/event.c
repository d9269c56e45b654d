/*
 * event.c - self-describing custom events (etch/event.h): registration, the
 * encoder, channels switched on and off, the important-event cache and its
 * replay into sessions.
 *
 * A custom event is a TrackEvent named "Logger.Event" whose categories are
 * its channels and whose set fields are debug annotations with interned
 * names; arrays are array_values, wide strings are written as UTF-8. The
 * schema (every field's name and declared type) is interned on the sequence
 * with the event's name, in InternedData field 900 under the same iid
 * (docs/format.md), so readers decode by name and type.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buffer/tracefile.h"
#include "sdk/core/encode.h"
#include "base/envvars.h"
#include "sdk/core/sdk.h"


/* Longest array written; longer ones are cut to it. */
#define MAX_ARRAY 16384u
#define MAX_CHANNELS 8u
/* Most fields an event type may have (readers take as many). */
#define MAX_FIELDS 256u

static etch_event_def *g_defs;
static uint64_t g_serial;  /* next serial (atomic) */
static uint64_t g_imp_ids; /* last important-event id (atomic) */

/* ---- types ----------------------------------------------------------------- */

static bool type_valid(uint32_t t) {
  if (t & ETCH_FIELD_ARRAY) {
    uint32_t e = t & ~(uint32_t)ETCH_FIELD_ARRAY;
    return e >= ETCH_FIELD_INT8 && e <= ETCH_FIELD_DOUBLE;
  }
  return t >= ETCH_FIELD_INT8 && t <= ETCH_FIELD_U16STR;
}

/* Where a slot's value is: after its `set` byte, at the value's alignment. */
static uint32_t value_offset(uint32_t t) {
  if (t & ETCH_FIELD_ARRAY) return offsetof(etch_fv_uint8_array, v);
  switch (t) {
    case ETCH_FIELD_INT8: return offsetof(etch_fv_int8, v);
    case ETCH_FIELD_UINT8: return offsetof(etch_fv_uint8, v);
    case ETCH_FIELD_BOOL: return offsetof(etch_fv_bool, v);
    case ETCH_FIELD_INT16: return offsetof(etch_fv_int16, v);
    case ETCH_FIELD_UINT16: return offsetof(etch_fv_uint16, v);
    case ETCH_FIELD_INT32: return offsetof(etch_fv_int32, v);
    case ETCH_FIELD_UINT32: return offsetof(etch_fv_uint32, v);
    case ETCH_FIELD_FLOAT: return offsetof(etch_fv_float, v);
    case ETCH_FIELD_STR: return offsetof(etch_fv_str, v);
    case ETCH_FIELD_WSTR: return offsetof(etch_fv_wstr, v);
    case ETCH_FIELD_U16STR: return offsetof(etch_fv_u16str, v);
    default: return offsetof(etch_fv_uint64, v);
  }
}

/* Pointer-and-length slots (strings, arrays) share one layout. */
typedef struct plen_slot {
  uint8_t set;
  const void *v;
  size_t len;
} plen_slot;

/* A number as the debug annotation carries it: 0 int, 1 uint, 2 double,
 * 3 bool. */
static int num_kind(uint32_t e) {
  if (e >= ETCH_FIELD_INT8 && e <= ETCH_FIELD_INT64) return 0;
  if (e >= ETCH_FIELD_UINT8 && e <= ETCH_FIELD_UINT64) return 1;
  if (e == ETCH_FIELD_BOOL) return 3;
  return 2;
}

static uint64_t load_num(uint32_t e, const uint8_t *p) {
  switch (e) {
    case ETCH_FIELD_INT8: { int8_t v; memcpy(&v, p, 1); return (uint64_t)(int64_t)v; }
    case ETCH_FIELD_INT16: { int16_t v; memcpy(&v, p, 2); return (uint64_t)(int64_t)v; }
    case ETCH_FIELD_INT32: { int32_t v; memcpy(&v, p, 4); return (uint64_t)(int64_t)v; }
    case ETCH_FIELD_UINT8: return p[0];
    case ETCH_FIELD_BOOL: return p[0] ? 1 : 0;
    case ETCH_FIELD_UINT16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case ETCH_FIELD_UINT32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case ETCH_FIELD_FLOAT: {
      float f;
      memcpy(&f, p, 4);
      double d = (double)f;
      uint64_t u;
      memcpy(&u, &d, 8);
      return u;
    }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
  }
}

/* ---- registration ------------------------------------------------------------ */

void etch_event_register(etch_event_def *def, const etch_event_field *fields,
                         uint32_t nfields) {
  if (!def || !def->logger || !def->event) return;
  if (__atomic_load_n(&def->fields, __ATOMIC_ACQUIRE)) return;
  /* A type etch cannot write is never registered: its logs do nothing,
   * and the program hears why once, at start-up. */
  const char *why = NULL;
  if (nfields > MAX_FIELDS) why = "more than 256 fields";
  for (uint32_t i = 0; !why && i < nfields; i++) {
    if (!fields[i].name || !type_valid(fields[i].type)) why = "a bad field";
    for (uint32_t j = 0; !why && j < i; j++)
      if (strcmp(fields[i].name, fields[j].name) == 0) why = "a field twice";
  }
  if (why) {
    fprintf(stderr, "etch: custom event %s.%s not registered: %s\n",
            def->logger, def->event, why);
    return;
  }
  size_t ll = strlen(def->logger), el = strlen(def->event);
  char *full = (char *)etch__malloc(ll + el + 2);
  etch_site *site = (etch_site *)etch__calloc(1, sizeof *site);
  if (!full || !site) {
    free(full);
    free(site);
    return;
  }
  memcpy(full, def->logger, ll);
  full[ll] = '.';
  memcpy(full + ll + 1, def->event, el + 1);
  site->name = full;
  site->type = ETCH_TYPE_INSTANT;
  etch__site_prepare(site);
  pthread_mutex_lock(&etch__g.lock);
  if (def->fields) { /* registered meanwhile */
    pthread_mutex_unlock(&etch__g.lock);
    free(full);
    free(site);
    return;
  }
  def->full_name = full;
  def->etch_site = site;
  def->nfields = nfields;
  def->next = g_defs;
  g_defs = def;
  /* Published last: a def with fields is complete. */
  __atomic_store_n(&def->fields, fields ? fields : (const etch_event_field *)def,
                   __ATOMIC_RELEASE);
  if (!fields) def->nfields = 0;
  pthread_mutex_unlock(&etch__g.lock);
}

/* ---- UTF-8 ----------------------------------------------------------------- */

static uint8_t *put_cp(uint8_t *q, uint32_t c) {
  if ((c >= 0xD800 && c < 0xE000) || c > 0x10FFFF) c = 0xFFFD;
  if (c < 0x80) {
    *q++ = (uint8_t)c;
  } else if (c < 0x800) {
    *q++ = (uint8_t)(0xC0 | (c >> 6));
    *q++ = (uint8_t)(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    *q++ = (uint8_t)(0xE0 | (c >> 12));
    *q++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
    *q++ = (uint8_t)(0x80 | (c & 0x3F));
  } else {
    *q++ = (uint8_t)(0xF0 | (c >> 18));
    *q++ = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
    *q++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
    *q++ = (uint8_t)(0x80 | (c & 0x3F));
  }
  return q;
}

/* Writes code units as UTF-8 (at most `cap` bytes, whole characters). */
static uint8_t *put_wide(uint8_t *q, uint32_t t, const void *s, size_t n,
                         size_t cap) {
  uint8_t *start = q;
  for (size_t i = 0; i < n; i++) {
    uint32_t c;
    if (t == ETCH_FIELD_WSTR) {
      c = (uint32_t)((const wchar_t *)s)[i];
    } else {
      c = ((const uint16_t *)s)[i];
      if (c >= 0xD800 && c < 0xDC00 && i + 1 < n) {
        uint32_t lo = ((const uint16_t *)s)[i + 1];
        if (lo >= 0xDC00 && lo < 0xE000) {
          c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
          i++;
        }
      }
    }
    if ((size_t)(q - start) + 4 > cap) break;
    q = put_cp(q, c);
  }
  return q;
}

/* A string field's code units (strlen-like when no length was given). */
static size_t str_units(uint32_t t, const plen_slot *s) {
  if (!s->v) return 0;
  if (s->set == 2) return s->len;
  size_t n = 0;
  if (t == ETCH_FIELD_STR) return strlen((const char *)s->v);
  if (t == ETCH_FIELD_WSTR)
    while (((const wchar_t *)s->v)[n]) n++;
  else
    while (((const uint16_t *)s->v)[n]) n++;
  return n;
}

/* ---- annotations -------------------------------------------------------------- */

/* The bytes a set field's annotation may take (its name aside). */
static size_t field_bound(const etch_event_field *f, const uint8_t *slot) {
  uint32_t t = f->type;
  if (t & ETCH_FIELD_ARRAY) {
    const plen_slot *a = (const plen_slot *)(const void *)slot;
    size_t n = a->v ? (a->len < MAX_ARRAY ? a->len : MAX_ARRAY) : 0;
    return 24 + n * 14;
  }
  if (t == ETCH_FIELD_STR || t == ETCH_FIELD_WSTR || t == ETCH_FIELD_U16STR) {
    /* Each code unit is at most 4 bytes of UTF-8 (a UTF-16 pair 4 for 2). */
    size_t n = str_units(t, (const plen_slot *)(const void *)slot);
    if (t != ETCH_FIELD_STR) n = n > ETCH_MAX_STRING / 4 ? ETCH_MAX_STRING : 4 * n;
    return 24 + (n < ETCH_MAX_STRING ? n : ETCH_MAX_STRING);
  }
  return 24;
}

/* Writes one field's annotation: its name (interned `iid`, or inline when
 * 0) and value. */
static uint8_t *put_field(uint8_t *q, const etch_event_field *f,
                          const uint8_t *slot, uint32_t iid) {
  uint8_t *l = etch__pb_put_open(&q, ETCH_TE_DEBUG_ANNOTATIONS);
  if (iid)
    q = etch__pb_put_varint_field(q, ETCH_DA_NAME_IID, iid);
  else
    q = etch__pb_put_bytes_field(q, ETCH_DA_NAME, f->name, etch__clamp_len(f->name));
  uint32_t t = f->type;
  const uint8_t *v = slot + value_offset(t);
  if (t & ETCH_FIELD_ARRAY) {
    uint32_t e = t & ~(uint32_t)ETCH_FIELD_ARRAY;
    const plen_slot *a = (const plen_slot *)(const void *)slot;
    size_t n = a->v ? (a->len < MAX_ARRAY ? a->len : MAX_ARRAY) : 0;
    size_t es = etch__field_elem_size(e);
    int k = num_kind(e);
    /* An empty array is an array_values field of no elements: a
     * DebugAnnotation with only its name would read as no value at all,
     * so it carries an empty nested array instead. */
    if (n == 0) {
      uint8_t *nl = etch__pb_put_open(&q, ETCH_DA_NESTED_VALUE);
      q = etch__pb_put_varint_field(q, 1 /* NestedValue.nested_type */, 2 /* ARRAY */);
      q = etch__pb_put_close(nl, q);
    }
    for (size_t i = 0; i < n; i++) {
      uint64_t x = load_num(e, (const uint8_t *)a->v + i * es);
      uint8_t *el = etch__pb_put_open(&q, ETCH_DA_ARRAY_VALUES);
      if (k == 2)
        q = etch__pb_put_fixed64_field(q, ETCH_DA_DOUBLE_VALUE, x);
      else
        q = etch__pb_put_varint_field(q, k == 0 ? ETCH_DA_INT_VALUE : ETCH_DA_UINT_VALUE, x);
      q = etch__pb_put_close(el, q);
    }
  } else if (t == ETCH_FIELD_STR) {
    const plen_slot *s = (const plen_slot *)(const void *)slot;
    size_t n = str_units(t, s);
    if (n > ETCH_MAX_STRING) n = ETCH_MAX_STRING;
    q = etch__pb_put_bytes_field(q, ETCH_DA_STRING_VALUE, s->v ? s->v : "", (uint32_t)n);
  } else if (t == ETCH_FIELD_WSTR || t == ETCH_FIELD_U16STR) {
    const plen_slot *s = (const plen_slot *)(const void *)slot;
    size_t n = str_units(t, s);
    uint8_t *sl = etch__pb_put_open(&q, ETCH_DA_STRING_VALUE);
    q = put_wide(q, t, s->v, n, ETCH_MAX_STRING);
    q = etch__pb_put_close(sl, q);
  } else {
    uint64_t x = load_num(t, v);
    switch (num_kind(t)) {
      case 0: q = etch__pb_put_varint_field(q, ETCH_DA_INT_VALUE, x); break;
      case 1: q = etch__pb_put_varint_field(q, ETCH_DA_UINT_VALUE, x); break;
      case 3: q = etch__pb_put_varint_field(q, ETCH_DA_BOOL_VALUE, x); break;
      default: q = etch__pb_put_fixed64_field(q, ETCH_DA_DOUBLE_VALUE, x); break;
    }
  }
  return etch__pb_put_close(l, q);
}

static uint8_t *put_uint_annotation(uint8_t *q, const char *name,
                                    uint32_t iid, uint64_t v) {
  uint8_t *l = etch__pb_put_open(&q, ETCH_TE_DEBUG_ANNOTATIONS);
  if (iid)
    q = etch__pb_put_varint_field(q, ETCH_DA_NAME_IID, iid);
  else
    q = etch__pb_put_bytes_field(q, ETCH_DA_NAME, name, (uint32_t)strlen(name));
  q = etch__pb_put_varint_field(q, ETCH_DA_UINT_VALUE, v);
  return etch__pb_put_close(l, q);
}

static const char k_serial[] = "etch.serial";
static const char k_important[] = "etch.important";

/* ---- the encoder ------------------------------------------------------------- */

/* One event to write: live values, or an important event's cached
 * annotations (written with their names inline). */
typedef struct ev_src {
  etch_event_def *def;
  etch_category *const *chans;
  uint32_t nchans;
  uint32_t type;
  const uint8_t *values; /* live: the value struct */
  const uint8_t *ann;    /* cached: encoded annotations */
  size_t ann_len;
  bool has_ts;
  uint64_t ts;
  uint64_t track_uuid; /* 0: the sequence's default (the thread) */
  bool has_serial;
  uint64_t serial;
  uint64_t imp_id; /* 0: not important */
} ev_src;

static uint8_t *put_schema(uint8_t *q, const etch_event_def *d, uint32_t iid) {
  uint8_t *l = etch__pb_put_open(&q, ETCH_ID_EVENT_SCHEMAS);
  q = etch__pb_put_varint_field(q, ETCH_SCHEMA_IID, iid);
  q = etch__pb_put_bytes_field(q, ETCH_SCHEMA_NAME, d->full_name, (uint32_t)strlen(d->full_name));
  q = etch__pb_put_bytes_field(q, ETCH_SCHEMA_LOGGER, d->logger, etch__clamp_len(d->logger));
  q = etch__pb_put_bytes_field(q, ETCH_SCHEMA_EVENT, d->event, etch__clamp_len(d->event));
  if (d->flags) q = etch__pb_put_varint_field(q, ETCH_SCHEMA_FLAGS, d->flags);
  for (uint32_t i = 0; i < d->nfields; i++) {
    uint8_t *fl = etch__pb_put_open(&q, ETCH_SCHEMA_FIELD);
    q = etch__pb_put_bytes_field(q, ETCH_SFIELD_NAME, d->fields[i].name,
                  etch__clamp_len(d->fields[i].name));
    q = etch__pb_put_varint_field(q, ETCH_SFIELD_TYPE, d->fields[i].type);
    q = etch__pb_put_close(fl, q);
  }
  return etch__pb_put_close(l, q);
}

static size_t schema_bound(const etch_event_def *d) {
  size_t b = 64 + 2 * strlen(d->full_name);
  for (uint32_t i = 0; i < d->nfields; i++)
    b += 24 + strlen(d->fields[i].name);
  return b;
}

static void encode(etch_writer *w, const ev_src *e, uint64_t ticks) {
  etch_event_def *d = e->def;
  etch_site *site = (etch_site *)d->etch_site;
  const etch_event_field *fs = d->fields;

  bool new_name = !etch__writer_seen_name(w, site->id);
  bool new_cat[MAX_CHANNELS];
  size_t bound = 160 + e->ann_len;
  if (new_name) bound += strlen(d->full_name) + 24 + schema_bound(d);
  for (uint32_t c = 0; c < e->nchans; c++) {
    new_cat[c] = !etch__bitset_has(&w->seen_cats, e->chans[c]->id);
    if (new_cat[c]) bound += strlen(e->chans[c]->name) + 24;
  }
  /* Field names: interned for live events. */
  uint32_t fiid[MAX_FIELDS];
  bool fnew[MAX_FIELDS];
  uint32_t nf = d->nfields;
  if (e->values) {
    for (uint32_t i = 0; i < nf; i++) {
      const uint8_t *slot = e->values + fs[i].offset;
      fiid[i] = 0;
      fnew[i] = false;
      if (!slot[0]) continue;
      bool cached;
      fiid[i] = etch__arg_key_iid(w, fs[i].name, &fnew[i], &cached);
      bound += field_bound(&fs[i], slot) + 24;
      /* Written with the name: interned now, or inline (table full). */
      if (!cached) bound += 2 * strlen(fs[i].name) + 24;
    }
  }
  uint32_t serial_iid = 0;
  bool serial_new = false;
  bool cached;
  if (e->has_serial)
    serial_iid = etch__arg_key_iid(w, k_serial, &serial_new, &cached);
  /* etch.important is never interned: the trace-file writer finds it
   * without the sequence's state (tracefile.h). */
  bound += 96 + sizeof k_important;
  uint8_t *buf = etch__writer_scratch(w, bound);
  if (!buf) {
    etch__writer_drop(w, ticks);
    return;
  }
  for (uint32_t c = 0; c < e->nchans; c++)
    if (new_cat[c]) etch__bitset_reserve(&w->seen_cats, e->chans[c]->id);
  if (new_name && site->id >= ETCH_FAST_SITES)
    etch__bitset_reserve(&w->seen_names_more, site->id);

  uint8_t *q = buf;
  if (e->has_ts) {
    /* The clock first: an important event's packet opens with it, which
     * is how the trace-file writer tells it from others at one compare
     * (ETCH_TRACEFILE_IMPORTANT_MARK0 and 1). */
    q = etch__pb_put_varint_field(q, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
    q = etch__pb_put_varint_field(q, ETCH_PKT_TIMESTAMP, e->ts);
  } else {
    if (e->type == ETCH_TYPE_SLICE_BEGIN) ticks = etch__ticks();
    uint64_t ns = etch__next_ts(w, ticks);
    q = etch__pb_put_varint_field(q, ETCH_PKT_TIMESTAMP, ns - etch__writer_last_ns(w));
  }
  q = etch__pb_put_varint_field(q, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  bool any_new = new_name || serial_new;
  for (uint32_t c = 0; c < e->nchans; c++) any_new |= new_cat[c];
  if (e->values)
    for (uint32_t i = 0; i < nf; i++) any_new |= fnew[i];
  if (any_new) {
    uint8_t *l = etch__pb_put_open(&q, ETCH_PKT_INTERNED_DATA);
    for (uint32_t c = 0; c < e->nchans; c++)
      if (new_cat[c])
        q = etch__proto_put_interned(q, ETCH_ID_EVENT_CATEGORIES, e->chans[c]->id,
                         e->chans[c]->name,
                         etch__clamp_len(e->chans[c]->name));
    if (new_name) {
      q = etch__proto_put_interned(q, ETCH_ID_EVENT_NAMES, site->id, d->full_name,
                       etch__clamp_len(d->full_name));
      q = put_schema(q, d, site->id);
    }
    if (e->values)
      for (uint32_t i = 0; i < nf; i++)
        if (fnew[i])
          q = etch__proto_put_interned(q, ETCH_ID_DEBUG_ANNOTATION_NAMES, fiid[i],
                           fs[i].name, etch__clamp_len(fs[i].name));
    if (serial_new)
      q = etch__proto_put_interned(q, ETCH_ID_DEBUG_ANNOTATION_NAMES, serial_iid, k_serial,
                       sizeof k_serial - 1);
    q = etch__pb_put_close(l, q);
  }

  uint8_t *te = etch__pb_put_open(&q, ETCH_PKT_TRACK_EVENT);
  q = etch__pb_put_varint_field(q, ETCH_TE_TYPE, e->type);
  for (uint32_t c = 0; c < e->nchans; c++)
    q = etch__pb_put_varint_field(q, ETCH_TE_CATEGORY_IIDS, e->chans[c]->id);
  q = etch__pb_put_varint_field(q, ETCH_TE_NAME_IID, site->id);
  if (e->track_uuid) q = etch__pb_put_varint_field(q, ETCH_TE_TRACK_UUID, e->track_uuid);
  if (e->values) {
    for (uint32_t i = 0; i < nf; i++) {
      const uint8_t *slot = e->values + fs[i].offset;
      if (slot[0]) q = put_field(q, &fs[i], slot, fiid[i]);
    }
  } else if (e->ann_len) {
    memcpy(q, e->ann, e->ann_len);
    q += e->ann_len;
  }
  if (e->has_serial) q = put_uint_annotation(q, k_serial, serial_iid, e->serial);
  if (e->imp_id) q = put_uint_annotation(q, k_important, 0, e->imp_id);
  q = etch__pb_put_close(te, q);
  ETCH_DCHECK((size_t)(q - buf) <= bound);
  ETCH_DCHECK(!e->imp_id || (buf[0] == ETCH_TRACEFILE_IMPORTANT_MARK0 &&
                             buf[1] == ETCH_TRACEFILE_IMPORTANT_MARK1));

  if (!etch__writer_put_packet(w, buf, (size_t)(q - buf))) {
    etch__writer_drop(w, ticks);
    return;
  }
  if (!e->has_ts) etch__writer_advance(w, ticks);
  if (new_name) etch__writer_mark_name(w, site->id);
  for (uint32_t c = 0; c < e->nchans; c++)
    if (new_cat[c]) etch__bitset_set(&w->seen_cats, e->chans[c]->id);
  if (e->type == ETCH_TYPE_SLICE_BEGIN && !e->track_uuid)
    etch__writer_level_written(w, 1);
}

/* This thread's writer for slot `i`, ready for a packet. */
static etch_writer *writer_for(uint32_t i, uint64_t ticks, bool explicit_ts) {
  etch_writer *w = etch__tls.w[i];
  if (etch__writer_has_room(w) && ticks - w->anchor.ticks < w->lim) return w;
  return explicit_ts ? etch__writer_prepare_explicit(i, ticks)
                     : etch__writer_prepare(i, ticks);
}

/* ---- the important-event cache ------------------------------------------------- */

typedef struct imp_entry {
  struct imp_entry *next;
  etch_event_def *def;
  etch_category *chans[MAX_CHANNELS];
  uint32_t nchans;
  int32_t tid;
  uint64_t ts;
  uint64_t id;
  bool has_serial;
  uint64_t serial;
  char *thread_name; /* "" when the thread had none */
  size_t ann_len;
  uint8_t *ann;
  size_t cost; /* bytes of memory it holds */
} imp_entry;

static struct {
  pthread_mutex_t lock;
  imp_entry *head, *tail;
  uint64_t count, bytes, dropped;
  uint64_t limit; /* bytes; set on first use */
  bool limit_set;
} g_imp = {PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0, 0, 0, 0, false};

static uint64_t imp_limit(void) {
  if (!g_imp.limit_set) {
    g_imp.limit = etch__env_number(ETCH_ENV_IMPORTANT_KB) * 1024;
    g_imp.limit_set = true;
  }
  return g_imp.limit;
}

/* The cache's figures in a session's stats (a feature hook). */
static void imp_stats(etch_session_stats *out) {
  pthread_mutex_lock(&g_imp.lock);
  out->important_events = g_imp.count;
  out->important_bytes = g_imp.bytes;
  out->important_dropped = g_imp.dropped;
  pthread_mutex_unlock(&g_imp.lock);
}

/* Keeps an important event: its annotations encoded with inline names. */
static void imp_add(etch_event_def *d, etch_category *const *chans,
                    uint32_t nchans, const uint8_t *values, uint64_t ts,
                    uint64_t id, bool has_serial, uint64_t serial) {
  size_t bound = 0;
  uint32_t nf = d->nfields;
  for (uint32_t i = 0; i < nf; i++) {
    const uint8_t *slot = values + d->fields[i].offset;
    if (slot[0])
      bound += field_bound(&d->fields[i], slot) + 2 * strlen(d->fields[i].name) + 24;
  }
  const char *tn = etch__tls.thread_name_set ? etch__tls.thread_name : "";
  size_t tnl = strlen(tn);
  uint8_t *buf = (uint8_t *)etch__malloc(bound ? bound : 1);
  imp_entry *e = (imp_entry *)etch__calloc(1, sizeof *e + tnl + 1);
  if (!buf || !e) {
    free(buf);
    free(e);
    pthread_mutex_lock(&g_imp.lock);
    g_imp.dropped++;
    pthread_mutex_unlock(&g_imp.lock);
    return;
  }
  uint8_t *q = buf;
  for (uint32_t i = 0; i < nf; i++) {
    const uint8_t *slot = values + d->fields[i].offset;
    if (slot[0]) q = put_field(q, &d->fields[i], slot, 0);
  }
  e->ann_len = (size_t)(q - buf);
  uint8_t *shrunk = (uint8_t *)etch__realloc(buf, e->ann_len ? e->ann_len : 1);
  e->ann = shrunk ? shrunk : buf;
  e->def = d;
  e->nchans = nchans < MAX_CHANNELS ? nchans : MAX_CHANNELS;
  memcpy(e->chans, chans, e->nchans * sizeof chans[0]);
  e->tid = etch__gettid();
  e->ts = ts;
  e->id = id;
  e->has_serial = has_serial;
  e->serial = serial;
  e->thread_name = (char *)(e + 1);
  memcpy(e->thread_name, tn, tnl + 1);
  e->cost = sizeof *e + tnl + 1 + e->ann_len;
  pthread_mutex_lock(&g_imp.lock);
  if (g_imp.bytes + e->cost > imp_limit()) {
    g_imp.dropped++;
    pthread_mutex_unlock(&g_imp.lock);
    free(e->ann);
    free(e);
    return;
  }
  /* Both links are read without the lock by a replay (imp_replay). */
  if (g_imp.tail)
    __atomic_store_n(&g_imp.tail->next, e, __ATOMIC_RELEASE);
  else
    __atomic_store_n(&g_imp.head, e, __ATOMIC_RELEASE);
  g_imp.tail = e;
  g_imp.count++;
  g_imp.bytes += e->cost;
  pthread_mutex_unlock(&g_imp.lock);
}

/* The session records every one of these channels. */
static bool chans_on(const imp_entry *e, uint32_t slot) {
  for (uint32_t c = 0; c < e->nchans; c++)
    if (!(__atomic_load_n(&e->chans[c]->enabled, __ATOMIC_RELAXED) &
          (1u << slot)))
      return false;
  return true;
}

static void put_thread_descriptor(etch_writer *w, const imp_entry *e) {
  uint8_t buf[160];
  etch__pb_stream s;
  etch__pb_fixed_init(&s, buf, sizeof buf);
  etch__pb_write_varint_field(&s, ETCH_PKT_TIMESTAMP, e->ts);
  etch__pb_write_varint_field(&s, ETCH_PKT_TIMESTAMP_CLOCK_ID,
                              ETCH_CLOCK_BOOTTIME);
  size_t n = strlen(e->thread_name);
  if (n > 63) n = 63;
  etch__proto_thread_track(&s, etch__thread_uuid(e->tid), etch__g.pid, e->tid,
                           e->thread_name, n);
  if (!s.failed) etch__writer_put_packet(w, buf, (size_t)(s.cur - buf));
}

/* Writes the cached important events into `w`'s sequence (after a reset),
 * each on its thread's track at its own time. */
static void imp_replay(etch_writer *w) {
  pthread_mutex_lock(&g_imp.lock);
  imp_entry *head = g_imp.head;
  uint64_t n = g_imp.count;
  pthread_mutex_unlock(&g_imp.lock);
  /* Entries are never removed: the first n stay valid without the lock. */
  int32_t last_tid = 0;
  /* The last entry's link may be being written meanwhile (imp_add): it
   * is loaded atomically, and not used. */
  for (imp_entry *e = head; e && n;
       e = __atomic_load_n(&e->next, __ATOMIC_ACQUIRE), n--) {
    if (w->need_reset) {
      /* One was dropped (no room, or no memory): what the sequence
       * interned for it went with it, so nothing more can be written
       * before the sequence's next reset, which writes the cache again. */
      pthread_mutex_lock(&w->sess->lock);
      w->sess->imp_replayed = false;
      pthread_mutex_unlock(&w->sess->lock);
      break;
    }
    if (!chans_on(e, w->slot)) continue;
    if (e->tid != last_tid && e->tid != w->tid) {
      put_thread_descriptor(w, e);
      last_tid = e->tid;
    }
    ev_src s = {0};
    s.def = e->def;
    s.chans = e->chans;
    s.nchans = e->nchans;
    s.type = ETCH_TYPE_INSTANT;
    s.ann = e->ann;
    s.ann_len = e->ann_len;
    s.has_ts = true;
    s.ts = e->ts;
    s.track_uuid = etch__thread_uuid(e->tid);
    s.has_serial = e->has_serial;
    s.serial = e->serial;
    s.imp_id = e->id;
    encode(w, &s, etch__ticks());
  }
}

/* Called at the end of a writer's reset. The session's first reset writes
 * the cache; later ones write it again once the data written since the last
 * copy could have pushed it out: a ring's worth of chunks (the backend's
 * reset span) when the backend counts them, else a reset interval (a
 * service's buffer, whose ring etch cannot see). One writer per session
 * does it. */
void etch__important_after_reset(etch_writer *w) {
  etch_session *s = w->sess;
  if (!__atomic_load_n(&g_imp.head, __ATOMIC_ACQUIRE)) return;
  etch_backend *b = s->backend;
  uint64_t handed = b->ops->chunks_handed(b);
  uint64_t now = etch__writer_last_ns(w);
  bool go = false;
  pthread_mutex_lock(&s->lock);
  bool again = b->replay_span
                   ? handed - s->imp_replay_at >= b->replay_span
                   : s->reset_interval_ns &&
                         now >= s->imp_replay_ns + s->reset_interval_ns;
  if (!s->imp_replayed || again) {
    s->imp_replayed = true;
    s->imp_replay_at = handed;
    s->imp_replay_ns = now;
    go = true;
  }
  pthread_mutex_unlock(&s->lock);
  if (go) imp_replay(w);
}

/* ---- logging ------------------------------------------------------------------ */

/* Sequences that start over replay the cached important events: the
 * writer calls back at each reset once there are any. */
static const etch_feature_hooks imp_hooks = {
    .after_reset = etch__important_after_reset,
    .stats = imp_stats,
};
static pthread_once_t imp_hooks_once = PTHREAD_ONCE_INIT;
static void imp_hooks_register(void) { etch__feature_hooks_add(&imp_hooks); }

void etch__log(etch_event_def *d, etch_category *const *chans, uint32_t nchans,
               uintptr_t mask, const void *values, uint32_t type) {
  if (!d || !__atomic_load_n(&d->fields, __ATOMIC_ACQUIRE)) return;
  if (etch__tls.in_intercept) return;
  if (nchans > MAX_CHANNELS) nchans = MAX_CHANNELS;
  for (uint32_t c = 0; c < nchans; c++)
    if (!__atomic_load_n(&chans[c]->id, __ATOMIC_RELAXED))
      etch_category_register(chans[c]);
  if (type != ETCH_TYPE_SLICE_BEGIN) type = ETCH_TYPE_INSTANT;
  bool important = (d->flags & ETCH_EVENT_IMPORTANT) && type == ETCH_TYPE_INSTANT;
  if (important) pthread_once(&imp_hooks_once, imp_hooks_register);
  ev_src s = {0};
  s.def = d;
  s.chans = chans;
  s.nchans = nchans;
  s.type = type;
  s.values = (const uint8_t *)values;
  if (d->flags & ETCH_EVENT_SERIAL) {
    s.has_serial = true;
    s.serial = __atomic_fetch_add(&g_serial, 1, __ATOMIC_RELAXED);
  }
  uint64_t ticks = etch__ticks();
  if (important) {
    s.imp_id = __atomic_add_fetch(&g_imp_ids, 1, __ATOMIC_RELAXED);
    s.has_ts = true;
    s.ts = etch_now();
  }
  etch__tls.drop_kind =
      type == ETCH_TYPE_SLICE_BEGIN ? ETCH_DROP_BEGIN : ETCH_DROP_OTHER;
  while (mask) {
    uint32_t i = (uint32_t)__builtin_ctz(mask);
    mask &= mask - 1;
    etch_writer *w = writer_for(i, ticks, s.has_ts);
    if (w) encode(w, &s, ticks);
  }
  etch__tls.drop_kind = ETCH_DROP_OTHER;
  /* Cached after it is written, so that a replay its own write set off
   * (a session's first reset) does not write it twice. */
  if (important)
    imp_add(d, chans, nchans, s.values, s.ts, s.imp_id, s.has_serial,
            s.serial);
}

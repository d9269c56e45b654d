/*
 * event.c - track events: names, categories, tracks, counters, flows, and
 * debug annotations flattened into args the way trace_processor keys them
 * ("debug.a.b" flat key, "debug.a[1].b" key).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/perfetto.h"
#include "reader/deliver.h"
#include "reader/errors.h"
#include "reader/event.h"
#include "reader/stacks.h"
#include "reader/track.h"
#include "reader/reader_int.h"

/* ---- repeated fields ----------------------------------------------------------------- */

static int push_u64(uint64_t **arr, size_t *n, size_t *cap, uint64_t v) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 8;
    if (nc > ETCH_PKT_MAX_REPEATED) return ETCH_ELIMIT;
    uint64_t *p = (uint64_t *)etch__realloc(*arr, nc * sizeof *p);
    if (!p) return ETCH_ENOMEM;
    *arr = p;
    *cap = nc;
  }
  (*arr)[(*n)++] = v;
  return 0;
}

/* Reads one element or a packed run of a repeated integer field. */
int etch__rd_repeated(etch_reader *r, const rd_src *src, const uint8_t *msg,
                    const etch__pb_field *f, bool fixed64, uint64_t **arr,
                    size_t *n, size_t *cap) {
  if (f->wt == (fixed64 ? ETCH_PB_FIXED64 : ETCH_PB_VARINT)) {
    int rc = push_u64(arr, n, cap, f->u);
    if (rc == ETCH_ELIMIT) /* a limit of the packet: its message names it */
      return etch__rd_fail(r, src, msg + f->off, ETCH_ELIMIT,
                           "repeated field with more than %u values",
                           ETCH_PKT_MAX_REPEATED);
    return rc;
  }
  if (f->wt != ETCH_PB_LEN) return etch__rd_bad_wt(r, src, msg, f, "repeated field");
  const uint8_t *p = f->data, *end = f->data + f->len;
  while (p < end) {
    uint64_t v = 0;
    if (fixed64) {
      if (end - p < 8)
        return etch__rd_fail(r, src, p, ETCH_EFORMAT, "truncated packed fixed64");
      for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
      p += 8;
    } else if (!etch__pb_read_varint(&p, end, &v)) {
      return etch__rd_fail(r, src, p, ETCH_EFORMAT, "truncated packed varint");
    }
    int rc = push_u64(arr, n, cap, v);
    if (rc == ETCH_ELIMIT)
      return etch__rd_fail(r, src, f->data, ETCH_ELIMIT,
                           "repeated field with more than %u values",
                           ETCH_PKT_MAX_REPEATED);
    if (rc) return rc;
  }
  return 0;
}

/* ---- debug annotations --------------------------------------------------------------- */

static int push_arg(etch_reader *r, size_t flat_len, size_t key_len,
                    etch_value_type type, const etch_arg *val) {
  if (r->nargs == r->cap_args) {
    if (r->nargs >= RD_MAX_ARGS) { /* a limit of the packet: at its offset */
      char msg[64];
      snprintf(msg, sizeof msg, "more than %u args in one event", RD_MAX_ARGS);
      etch__rd_fail_at(r, ETCH_ELIMIT, r->cur_off, msg);
      return ETCH_ELIMIT;
    }
    size_t nc = r->cap_args ? r->cap_args * 2 : 16;
    etch_arg *a = (etch_arg *)etch__realloc(r->args, nc * sizeof *a);
    if (!a) return ETCH_ENOMEM;
    r->args = a;
    r->cap_args = nc;
  }
  etch_arg *a = &r->args[r->nargs];
  a->flat_key = etch__strpool_get(&r->pool, r->flat, flat_len);
  if (!a->flat_key) return ETCH_ELIMIT;
  if (key_len == flat_len && memcmp(r->key, r->flat, key_len) == 0)
    a->key = a->flat_key;
  else if (!(a->key = etch__strpool_get(&r->pool, r->key, key_len)))
    return ETCH_ELIMIT;
  a->type = type;
  a->v = val->v;
  r->nargs++;
  return 0;
}

/* Appends ".name" (or "name" at the root) to a key buffer. */
static bool key_append(char *buf, size_t *len, const char *s, size_t n,
                       bool dot) {
  if (*len + n + 1 > RD_MAX_KEY) return false;
  ETCH_DCHECK(*len <= RD_MAX_KEY);
  if (dot) buf[(*len)++] = '.';
  memcpy(buf + *len, s, n);
  *len += n;
  return true;
}

static int key_too_long(etch_reader *r, const rd_src *src, const uint8_t *at) {
  return etch__rd_fail(r, src, at, ETCH_ELIMIT,
                       "debug annotation key longer than %d bytes", RD_MAX_KEY);
}

static int nested_value(etch_reader *r, const rd_src *src, rd_seq *seq,
                        const uint8_t *msg, size_t len, size_t flat_len,
                        size_t key_len, int depth);

/* Emits a leaf value held by field `f` of a DebugAnnotation, if it is one. */
static int da_value(etch_reader *r, const rd_src *src, rd_seq *seq,
                    const uint8_t *msg, const etch__pb_field *f,
                    size_t flat_len, size_t key_len, bool *handled) {
  etch_arg v;
  etch_value_type type;
  *handled = true;
  switch (f->id) {
    case ETCH_DA_BOOL_VALUE:
      if (f->wt != ETCH_PB_VARINT) return etch__rd_bad_wt(r, src, msg, f, "bool_value");
      type = ETCH_VALUE_BOOL;
      v.v.b = f->u != 0;
      break;
    case ETCH_DA_UINT_VALUE:
      if (f->wt != ETCH_PB_VARINT) return etch__rd_bad_wt(r, src, msg, f, "uint_value");
      type = ETCH_VALUE_UINT;
      v.v.u = f->u;
      break;
    case ETCH_DA_INT_VALUE:
      if (f->wt != ETCH_PB_VARINT) return etch__rd_bad_wt(r, src, msg, f, "int_value");
      type = ETCH_VALUE_INT;
      v.v.i = (int64_t)f->u;
      break;
    case ETCH_DA_POINTER_VALUE:
      if (f->wt != ETCH_PB_VARINT)
        return etch__rd_bad_wt(r, src, msg, f, "pointer_value");
      type = ETCH_VALUE_POINTER;
      v.v.u = f->u;
      break;
    case ETCH_DA_DOUBLE_VALUE:
      if (f->wt != ETCH_PB_FIXED64)
        return etch__rd_bad_wt(r, src, msg, f, "double_value");
      type = ETCH_VALUE_DOUBLE;
      v.v.d = etch__pb_field_double(f);
      break;
    case ETCH_DA_STRING_VALUE:
    case ETCH_DA_LEGACY_JSON_VALUE:
      if (f->wt != ETCH_PB_LEN) return etch__rd_bad_wt(r, src, msg, f, "string_value");
      type = f->id == ETCH_DA_STRING_VALUE ? ETCH_VALUE_STRING : ETCH_VALUE_JSON;
      if (!(v.v.s = etch__arena_strdup(&r->scratch, f->data, f->len)))
        return ETCH_ENOMEM;
      break;
    case ETCH_DA_STRING_VALUE_IID: {
      if (f->wt != ETCH_PB_VARINT)
        return etch__rd_bad_wt(r, src, msg, f, "string_value_iid");
      const char *s = (const char *)etch__idtab_get(&seq->da_strings, f->u);
      if (!s) {
        r->stats.interned_data_missing++;
        s = "";
      }
      type = ETCH_VALUE_STRING;
      v.v.s = s;
      break;
    }
    default:
      *handled = false;
      return 0;
  }
  return push_arg(r, flat_len, key_len, type, &v);
}

/*
 * Flattens one DebugAnnotation. The keys so far are r->flat[0..flat_len) and
 * r->key[0..key_len); `named` entries (the event's annotations and dict
 * entries) append their name, array elements arrive with "[i]" appended.
 */
static int debug_annotation(etch_reader *r, const rd_src *src, rd_seq *seq,
                            const uint8_t *msg, size_t len, size_t flat_len,
                            size_t key_len, int depth, bool named) {
  if (depth > RD_MAX_NESTING)
    return etch__rd_fail(r, src, msg, ETCH_ELIMIT,
                         "debug annotations nested deeper than %d",
                         RD_MAX_NESTING);
  etch__pb_dec d;
  etch__pb_field f;
  if (named) {
    const char *name = NULL;
    size_t nlen = 0;
    etch__pb_dec_init(&d, msg, len);
    while (etch__pb_next_fast(&d, &f)) {
      if (f.id == ETCH_DA_NAME_IID && f.wt == ETCH_PB_VARINT) {
        const char *s = (const char *)etch__idtab_get(&seq->da_names, f.u);
        if (!s) {
          r->stats.interned_data_missing++;
          s = "";
        }
        name = s;
        nlen = strlen(s);
      } else if (f.id == ETCH_DA_NAME && f.wt == ETCH_PB_LEN) {
        name = (const char *)f.data;
        nlen = f.len;
      }
    }
    if (d.err) return etch__rd_fail_dec(r, src, &d);
    if (!name) name = "";
    if (!key_append(r->flat, &flat_len, name, nlen, true) ||
        !key_append(r->key, &key_len, name, nlen, true))
      return key_too_long(r, src, msg);
  }
  size_t index = 0;
  size_t nargs_before = r->nargs;
  bool container = false; /* an array or dict value */
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    bool handled;
    int rc = da_value(r, src, seq, d.start, &f, flat_len, key_len, &handled);
    if (rc) return rc;
    if (handled) continue;
    if (f.id == ETCH_DA_DICT_ENTRIES) {
      RD_EXPECT(f, ETCH_PB_LEN, "dict_entries");
      rc = debug_annotation(r, src, seq, f.data, f.len, flat_len, key_len,
                            depth + 1, true);
    } else if (f.id == ETCH_DA_ARRAY_VALUES) {
      RD_EXPECT(f, ETCH_PB_LEN, "array_values");
      char idx[32];
      int n = snprintf(idx, sizeof idx, "[%zu]", index++);
      size_t kl = key_len;
      if (!key_append(r->key, &kl, idx, (size_t)n, false))
        return key_too_long(r, src, f.data);
      rc = debug_annotation(r, src, seq, f.data, f.len, flat_len, kl,
                            depth + 1, false);
    } else if (f.id == ETCH_DA_NESTED_VALUE) {
      RD_EXPECT(f, ETCH_PB_LEN, "nested_value");
      rc = nested_value(r, src, seq, f.data, f.len, flat_len, key_len,
                        depth + 1);
    }
    container |= f.id == ETCH_DA_ARRAY_VALUES || f.id == ETCH_DA_NESTED_VALUE;
    if (rc) return rc;
  }
  if (d.err) return etch__rd_fail_dec(r, src, &d);
  /* An empty array (or dict) is still a value: one NULL arg under its
   * name, so that "set and empty" differs from "not there". */
  if (named && container && r->nargs == nargs_before) {
    etch_arg v;
    v.v.u = 0;
    return push_arg(r, flat_len, key_len, ETCH_VALUE_NULL, &v);
  }
  return 0;
}

/* DebugAnnotation.NestedValue, the older form of dicts and arrays. */
static int nested_value(etch_reader *r, const rd_src *src, rd_seq *seq,
                        const uint8_t *msg, size_t len, size_t flat_len,
                        size_t key_len, int depth) {
  enum { NV_TYPE = 1, NV_KEYS = 2, NV_DVALS = 3, NV_AVALS = 4, NV_INT = 5,
         NV_DOUBLE = 6, NV_BOOL = 7, NV_STRING = 8 };
  if (depth > RD_MAX_NESTING)
    return etch__rd_fail(r, src, msg, ETCH_ELIMIT,
                         "debug annotations nested deeper than %d",
                         RD_MAX_NESTING);
  etch__pb_dec d, kd;
  etch__pb_field f, kf;
  uint64_t type = 0;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f))
    if (f.id == NV_TYPE && f.wt == ETCH_PB_VARINT) type = f.u;
  if (d.err) return etch__rd_fail_dec(r, src, &d);

  size_t index = 0;
  etch__pb_dec_init(&kd, msg, len); /* walks dict_keys alongside dict_values */
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    int rc = 0;
    etch_arg v;
    if (type == 1 && f.id == NV_DVALS && f.wt == ETCH_PB_LEN) {
      bool found = false;
      while (etch__pb_next(&kd, &kf)) {
        if (kf.id == NV_KEYS && kf.wt == ETCH_PB_LEN) {
          found = true;
          break;
        }
      }
      if (!found) continue; /* a value without a key */
      size_t fl = flat_len, kl = key_len;
      if (!key_append(r->flat, &fl, (const char *)kf.data, kf.len, true) ||
          !key_append(r->key, &kl, (const char *)kf.data, kf.len, true))
        return key_too_long(r, src, f.data);
      rc = nested_value(r, src, seq, f.data, f.len, fl, kl, depth + 1);
    } else if (type == 2 && f.id == NV_AVALS && f.wt == ETCH_PB_LEN) {
      char idx[32];
      int n = snprintf(idx, sizeof idx, "[%zu]", index++);
      size_t kl = key_len;
      if (!key_append(r->key, &kl, idx, (size_t)n, false))
        return key_too_long(r, src, f.data);
      rc = nested_value(r, src, seq, f.data, f.len, flat_len, kl, depth + 1);
    } else if (type == 0 && f.id == NV_INT && f.wt == ETCH_PB_VARINT) {
      v.v.i = (int64_t)f.u;
      rc = push_arg(r, flat_len, key_len, ETCH_VALUE_INT, &v);
    } else if (type == 0 && f.id == NV_DOUBLE && f.wt == ETCH_PB_FIXED64) {
      v.v.d = etch__pb_field_double(&f);
      rc = push_arg(r, flat_len, key_len, ETCH_VALUE_DOUBLE, &v);
    } else if (type == 0 && f.id == NV_BOOL && f.wt == ETCH_PB_VARINT) {
      v.v.b = f.u != 0;
      rc = push_arg(r, flat_len, key_len, ETCH_VALUE_BOOL, &v);
    } else if (type == 0 && f.id == NV_STRING && f.wt == ETCH_PB_LEN) {
      if (!(v.v.s = etch__arena_strdup(&r->scratch, f.data, f.len)))
        return ETCH_ENOMEM;
      rc = push_arg(r, flat_len, key_len, ETCH_VALUE_STRING, &v);
    }
    if (rc) return rc;
  }
  if (d.err) return etch__rd_fail_dec(r, src, &d);
  if (kd.err) return etch__rd_fail_dec(r, src, &kd);
  return 0;
}

/* ---- track events ---------------------------------------------------------------------- */

static int source_location_args(etch_reader *r, const rd_srcloc *sl) {
  static const char *const keys[] = {"source.file_name",
                                     "source.function_name",
                                     "source.line_number"};
  for (int i = 0; i < 3; i++) {
    size_t n = strlen(keys[i]);
    ETCH_DCHECK(n < sizeof r->flat && n < sizeof r->key);
    memcpy(r->flat, keys[i], n);
    memcpy(r->key, keys[i], n);
    etch_arg v;
    int rc;
    if (i == 2) {
      v.v.i = sl->line;
      rc = push_arg(r, n, n, ETCH_VALUE_INT, &v);
    } else {
      v.v.s = i == 0 ? sl->file : sl->function;
      rc = push_arg(r, n, n, ETCH_VALUE_STRING, &v);
    }
    if (rc) return rc;
  }
  return 0;
}

/* Applies a counter track's unit multiplier and incremental accumulation. */
void etch__rd_counter_value(rd_seq *seq, rd_track *t, etch_event *ev) {
  if (t->info.kind != ETCH_TRACK_COUNTER) return;
  int64_t m = t->info.unit_multiplier;
  if (m > 1) {
    if (ev->counter_is_double)
      ev->counter_double *= (double)m;
    else
      ev->counter_int = (int64_t)((uint64_t)ev->counter_int * (uint64_t)m);
  }
  if (t->info.is_incremental) {
    if (t->acc_seq != seq->id || t->acc_gen != seq->gen) {
      t->acc_seq = seq->id;
      t->acc_gen = seq->gen;
      t->acc_i = 0;
      t->acc_d = 0;
    }
    if (ev->counter_is_double) {
      t->acc_d += ev->counter_double;
      ev->counter_double = t->acc_d;
    } else {
      t->acc_i = (int64_t)((uint64_t)t->acc_i + (uint64_t)ev->counter_int);
      ev->counter_int = t->acc_i;
    }
  }
}

rd_track *etch__rd_event_track(etch_reader *r, uint64_t uuid) {
  if (uuid == 0) return &r->global_track;
  rd_track *t = etch__rd_track_get(r, uuid, false);
  if (t) return t;
  t = etch__rd_track_get(r, uuid, true);
  if (t) r->stats.unknown_track++;
  return t;
}

static int extra_counters(etch_reader *r, rd_seq *seq, etch_event *base,
                          const uint64_t *uuids, size_t nu,
                          const uint64_t *vals, size_t nv, bool dbl) {
  if (nv == 0) return 0;
  if (nu == 0) {
    uuids = dbl ? seq->extra_dcounter_default : seq->extra_counter_default;
    nu = dbl ? seq->n_extra_dcounter_default : seq->n_extra_counter_default;
  }
  for (size_t i = 0; i < nv && i < nu; i++) {
    rd_track *t = etch__rd_event_track(r, uuids[i]);
    if (!t) return ETCH_ENOMEM;
    etch_event ev = *base;
    ev.after_loss = false;
    ev.callsite_id = -1;
    ev.type = ETCH_EVENT_COUNTER;
    ev.name = r->empty;
    ev.track = &t->info;
    ev.counter_is_double = dbl;
    if (dbl) {
      double d;
      memcpy(&d, &vals[i], sizeof d);
      ev.counter_double = d;
      ev.counter_int = 0;
    } else {
      ev.counter_int = (int64_t)vals[i];
      ev.counter_double = 0;
    }
    ev.flow_ids = ev.terminating_flow_ids = NULL;
    ev.flow_ids_count = ev.terminating_flow_ids_count = 0;
    ev.args = NULL;
    ev.args_count = 0;
    etch__rd_counter_value(seq, t, &ev);
    int rc = etch__rd_emit(r, seq, &ev, t);
    if (rc) return rc;
  }
  return 0;
}

enum { REP_CAT, REP_XC_U, REP_XC_V, REP_XD_U, REP_XD_V };

/* What a TrackEvent's fields say (te_fields_read); repeated fields go to
 * the reader's arrays (r->rep, r->flows, r->terms), args to r->args. */
typedef struct te_fields {
  uint64_t type, name_iid, uuid, srcloc_iid, callstack_iid;
  bool has_uuid, has_name_iid, has_name_inline;
  const uint8_t *name_inline;
  size_t name_inline_len;
  const char *inline_cats[8];
  size_t n_inline_cats; /* more than 8 are left out */
  bool counter_is_double;
  int64_t counter_int;
  double counter_double;
} te_fields;

/* One repeated field of a TrackEvent into rep[i]. */
ETCH_INLINE int te_rep(etch_reader *r, const rd_src *src, const uint8_t *msg,
                       const etch__pb_field *f, bool fixed64, int i) {
  etch__pb_field fr = *f; /* a copy: its address is taken */
  return etch__rd_repeated(r, src, msg, &fr, fixed64, &r->rep[i].a,
                           &r->rep[i].n, &r->rep[i].cap);
}

/* Step 1: the event's fields, one pass; its debug annotations flattened
 * into args on the way. */
ETCH_INLINE int te_fields_read(etch_reader *r, const rd_src *src,
                               rd_seq *seq, const uint8_t *msg, size_t len,
                               te_fields *tf) {
  etch__pb_dec d;
  etch__pb_field f;
  int rc;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    etch__pb_field fr; /* a copy for the calls taking a field's address */
    switch (f.id) {
      case ETCH_TE_TYPE:
        RD_EXPECT(f, ETCH_PB_VARINT, "TrackEvent.type");
        tf->type = f.u;
        break;
      case ETCH_TE_NAME_IID:
        RD_EXPECT(f, ETCH_PB_VARINT, "TrackEvent.name_iid");
        tf->name_iid = f.u;
        tf->has_name_iid = true;
        tf->has_name_inline = false;
        break;
      case ETCH_TE_NAME:
        RD_EXPECT(f, ETCH_PB_LEN, "TrackEvent.name");
        tf->name_inline = f.data;
        tf->name_inline_len = f.len;
        tf->has_name_inline = true;
        tf->has_name_iid = false;
        break;
      case ETCH_TE_CATEGORY_IIDS:
        if (f.wt == ETCH_PB_VARINT && r->rep[REP_CAT].n < r->rep[REP_CAT].cap) {
          r->rep[REP_CAT].a[r->rep[REP_CAT].n++] = f.u;
          break;
        }
        if ((rc = te_rep(r, src, d.start, &f, false, REP_CAT))) return rc;
        break;
      case ETCH_TE_CATEGORIES:
        RD_EXPECT(f, ETCH_PB_LEN, "TrackEvent.categories");
        if (tf->n_inline_cats < ETCH_ARRAY_SIZE(tf->inline_cats) &&
            !(tf->inline_cats[tf->n_inline_cats++] = rd_pool_field(r, &f)))
          return ETCH_ELIMIT;
        break;
      case ETCH_TE_TRACK_UUID:
        RD_EXPECT(f, ETCH_PB_VARINT, "TrackEvent.track_uuid");
        tf->uuid = f.u;
        tf->has_uuid = true;
        break;
      case ETCH_TE_COUNTER_VALUE:
        RD_EXPECT(f, ETCH_PB_VARINT, "TrackEvent.counter_value");
        tf->counter_int = (int64_t)f.u;
        tf->counter_is_double = false;
        break;
      case ETCH_TE_DOUBLE_COUNTER_VALUE:
        RD_EXPECT(f, ETCH_PB_FIXED64, "TrackEvent.double_counter_value");
        tf->counter_double = etch__pb_field_double(&f);
        tf->counter_is_double = true;
        break;
      case ETCH_TE_DEBUG_ANNOTATIONS:
        RD_EXPECT(f, ETCH_PB_LEN, "TrackEvent.debug_annotations");
        memcpy(r->flat, "debug", 5);
        memcpy(r->key, "debug", 5);
        rc = debug_annotation(r, src, seq, f.data, f.len, 5, 5, 1, true);
        if (rc) return rc;
        break;
      case ETCH_TE_FLOW_IDS:
      case ETCH_TE_FLOW_IDS_OLD:
        fr = f;
        rc = etch__rd_repeated(r, src, d.start, &fr, f.id == ETCH_TE_FLOW_IDS,
                               &r->flows, &r->nflows, &r->cap_flows);
        if (rc) return rc;
        break;
      case ETCH_TE_TERMINATING_FLOW_IDS:
      case ETCH_TE_TERMINATING_FLOW_IDS_OLD:
        fr = f;
        rc = etch__rd_repeated(r, src, d.start, &fr,
                               f.id == ETCH_TE_TERMINATING_FLOW_IDS, &r->terms,
                               &r->nterms, &r->cap_terms);
        if (rc) return rc;
        break;
      case ETCH_TE_EXTRA_COUNTER_TRACK_UUIDS:
        if ((rc = te_rep(r, src, d.start, &f, false, REP_XC_U))) return rc;
        break;
      case ETCH_TE_EXTRA_COUNTER_VALUES:
        if ((rc = te_rep(r, src, d.start, &f, false, REP_XC_V))) return rc;
        break;
      case ETCH_TE_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS:
        if ((rc = te_rep(r, src, d.start, &f, false, REP_XD_U))) return rc;
        break;
      case ETCH_TE_EXTRA_DOUBLE_COUNTER_VALUES:
        if ((rc = te_rep(r, src, d.start, &f, true, REP_XD_V))) return rc;
        break;
      case ETCH_TE_SOURCE_LOCATION_IID:
        RD_EXPECT(f, ETCH_PB_VARINT, "TrackEvent.source_location_iid");
        tf->srcloc_iid = f.u;
        break;
      case ETCH_TE_CALLSTACK_IID:
        RD_EXPECT(f, ETCH_PB_VARINT, "TrackEvent.callstack_iid");
        tf->callstack_iid = f.u;
        break;
      default:
        break;
    }
  }
  if (d.err) RD_DEC_FAIL(d);
  return 0;
}

/* Step 2: the event's name: interned, inline or none. */
ETCH_INLINE int te_name(etch_reader *r, rd_seq *seq, const te_fields *tf,
                        const char **out) {
  if (tf->has_name_iid) {
    const char *s = (const char *)etch__idtab_get(&seq->names, tf->name_iid);
    if (!s) {
      r->stats.interned_data_missing++;
      s = r->empty;
    }
    *out = s;
  } else if (tf->has_name_inline) {
    if (!(*out = etch__strpool_get(&r->pool, tf->name_inline,
                                   tf->name_inline_len)))
      return ETCH_ELIMIT;
  } else {
    *out = r->empty;
  }
  return 0;
}

/* Several categories joined by ",": interned ones first, then inline ones
 * (an interned one not defined is left out). */
static int te_categories_joined(etch_reader *r, rd_seq *seq,
                                const te_fields *tf, const char **out) {
  size_t ncat_iids = r->rep[REP_CAT].n;
  const char *single = NULL;
  size_t ncat = 0;
  r->catbuf.len = 0;
  for (size_t i = 0; i < ncat_iids + tf->n_inline_cats; i++) {
    const char *c;
    if (i < ncat_iids) {
      c = (const char *)etch__idtab_get(&seq->cats, r->rep[REP_CAT].a[i]);
      if (!c) {
        r->stats.interned_data_missing++;
        continue;
      }
    } else {
      c = tf->inline_cats[i - ncat_iids];
    }
    if (ncat == 0) {
      single = c;
    } else if (etch__vec_push(&r->catbuf, ",", 1)) {
      return ETCH_ENOMEM;
    }
    if (etch__vec_push(&r->catbuf, c, strlen(c))) return ETCH_ENOMEM;
    ncat++;
  }
  if (ncat == 0)
    *out = r->empty;
  else if (ncat == 1)
    *out = single;
  else if (!(*out = etch__strpool_get(&r->pool, r->catbuf.data,
                                      r->catbuf.len)))
    return ETCH_ELIMIT;
  return 0;
}

/* Step 3: the event's category: one interned or inline, else joined. */
ETCH_INLINE int te_category(etch_reader *r, rd_seq *seq, const te_fields *tf,
                            const char **out) {
  size_t ncat_iids = r->rep[REP_CAT].n;
  if (ncat_iids == 1 && tf->n_inline_cats == 0) {
    const char *c =
        (const char *)etch__idtab_get(&seq->cats, r->rep[REP_CAT].a[0]);
    if (!c) {
      r->stats.interned_data_missing++;
      c = r->empty;
    }
    *out = c;
    return 0;
  }
  if (ncat_iids == 0 && tf->n_inline_cats <= 1) {
    *out = tf->n_inline_cats ? tf->inline_cats[0] : r->empty;
    return 0;
  }
  return te_categories_joined(r, seq, tf, out);
}

int etch__rd_track_event(etch_reader *r, const rd_src *src, rd_seq *seq,
                         const uint8_t *msg, size_t len, int64_t ts,
                         uint64_t pkt_off) {
  te_fields tf;
  tf.type = tf.name_iid = tf.uuid = tf.srcloc_iid = tf.callstack_iid = 0;
  tf.has_uuid = tf.has_name_iid = tf.has_name_inline = false;
  tf.name_inline = NULL;
  tf.name_inline_len = 0;
  tf.n_inline_cats = 0;
  tf.counter_is_double = false;
  tf.counter_int = 0;
  tf.counter_double = 0;
  int rc;

  r->nargs = 0;
  r->nflows = 0;
  r->nterms = 0;
  for (int i = 0; i < RD_NREP; i++) r->rep[i].n = 0;
  etch__arena_reset(&r->scratch);
  r->stats.track_events++;

  if ((rc = te_fields_read(r, src, seq, msg, len, &tf))) return rc;
  if (tf.type < ETCH_TE_TYPE_SLICE_BEGIN || tf.type > ETCH_TE_TYPE_COUNTER)
    return 0; /* unspecified / legacy events are not read */

  etch_event ev;
  ev.type = (etch_event_type)tf.type;
  ev.ts = ts;
  ev.sequence_id = seq->id;
  ev.packet_offset = pkt_off;
  ev.after_loss = false;
  if ((rc = te_name(r, seq, &tf, &ev.name))) return rc;
  if ((rc = te_category(r, seq, &tf, &ev.category))) return rc;

  /* Track. */
  uint64_t uuid = tf.has_uuid                ? tf.uuid
                  : seq->has_track_default ? seq->track_default
                                           : 0;
  rd_track *t = seq->last_track;
  if (!t || t->info.uuid != uuid) {
    if (!(t = etch__rd_event_track(r, uuid))) return ETCH_ENOMEM;
    seq->last_track = t;
  }
  ev.track = &t->info;

  if (tf.srcloc_iid) {
    const rd_srcloc *sl =
        (const rd_srcloc *)etch__idtab_get(&seq->srclocs, tf.srcloc_iid);
    if (!sl) {
      r->stats.interned_data_missing++;
    } else if ((rc = source_location_args(r, sl))) {
      return rc;
    }
  }

  ev.callsite_id = -1;
  if (tf.callstack_iid) { /* stacks.c */
    ev.callsite_id = etch__rd_stack_callsite(r, seq, tf.callstack_iid, &rc);
    if (rc) return rc;
  }

  ev.pid = 0;
  ev.tid = 0;
  ev.counter_is_double = tf.counter_is_double;
  ev.counter_int = tf.counter_is_double ? 0 : tf.counter_int;
  ev.counter_double = tf.counter_is_double ? tf.counter_double : 0;
  if (ev.type == ETCH_EVENT_COUNTER) etch__rd_counter_value(seq, t, &ev);
  ev.flow_ids = r->nflows ? r->flows : NULL;
  ev.flow_ids_count = r->nflows;
  ev.terminating_flow_ids = r->nterms ? r->terms : NULL;
  ev.terminating_flow_ids_count = r->nterms;
  ev.args = r->nargs ? r->args : NULL;
  ev.args_count = r->nargs;
  etch__rd_count_dropped(r, ev.type, ev.name, ev.args, ev.args_count);

  rc = etch__rd_emit(r, seq, &ev, t);
  if (rc) return rc;

  /* Extra counter values become counter events on their tracks. */
  if (ETCH_LIKELY(!r->rep[REP_XC_V].n && !r->rep[REP_XD_V].n)) return 0;
  rc = extra_counters(r, seq, &ev, r->rep[REP_XC_U].a, r->rep[REP_XC_U].n,
                      r->rep[REP_XC_V].a, r->rep[REP_XC_V].n, false);
  if (rc) return rc;
  return extra_counters(r, seq, &ev, r->rep[REP_XD_U].a, r->rep[REP_XD_U].n,
                        r->rep[REP_XD_V].a, r->rep[REP_XD_V].n, true);
}

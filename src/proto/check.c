/*
 * check.c - a TracePacket checked as etch's reader reads it (check.h).
 *
 * Each function below mirrors one decoder of the reader (src/reader:
 * packet.c, event.c, clock.c, custom.c, stacks.c) and refuses what it
 * refuses; none keeps any state beyond the counts of one event. The args of an event are
 * counted as an upper bound (every container as one more), so this is
 * stricter there, never laxer.
 */
#include <stdarg.h>
#include <stdio.h>

#include "base/base.h"
#include "pb/pb.h"
#include "proto/check.h"
#include "proto/perfetto.h"

/* TracePacket.incremental_state_cleared (the older bool form). */
#define PKT_INCREMENTAL_STATE_CLEARED 41

/* Repeated fields of one event the reader keeps in one array each. */
enum { R_CAT, R_FLOWS, R_TERMS, R_XC_U, R_XC_V, R_XD_U, R_XD_V, R_N };

typedef struct ck {
  const uint8_t *pkt;
  etch__pkt_fault *why;
  uint64_t nargs;      /* args of the event being checked (an upper bound) */
  uint64_t nrep[R_N];  /* its repeated values */
} ck;

ETCH_PRINTF(4, 5)
static bool fail(ck *c, const uint8_t *at, int status, const char *fmt, ...) {
  if (c->why) {
    c->why->off = (size_t)(at - c->pkt);
    c->why->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why->msg, sizeof c->why->msg, fmt, ap);
    va_end(ap);
  }
  return false;
}

static bool dec_fail(ck *c, const etch__pb_dec *d) {
  return fail(c, d->start + d->err_off, d->err ? d->err : ETCH_EFORMAT, "%s",
              d->err_msg ? d->err_msg : "malformed protobuf");
}

static const char *wt_name(unsigned wt) {
  switch (wt) {
    case ETCH_PB_VARINT: return "varint";
    case ETCH_PB_FIXED64: return "fixed64";
    case ETCH_PB_LEN: return "length-delimited";
    case ETCH_PB_FIXED32: return "fixed32";
    default: return "group";
  }
}

/* A known field of the message at `msg` must have wire type `wt`. */
static bool want(ck *c, const uint8_t *msg, const etch__pb_field *f,
                 unsigned wt, const char *what) {
  if (ETCH_LIKELY(f->wt == wt)) return true;
  return fail(c, msg + f->off, ETCH_EFORMAT, "%s (field %u) has wire type %s",
              what, f->id, wt_name(f->wt));
}

/* A message of which only well-formedness matters. */
static bool walk(ck *c, const uint8_t *p, size_t n) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, p, n);
  while (etch__pb_next_fast(&d, &f)) {
  }
  return d.err ? dec_fail(c, &d) : true;
}

/* A repeated integer field, one value or a packed run (the reader's
 * etch__rd_repeated); `count` adds up the values of one array. */
static bool repeated(ck *c, const uint8_t *msg, const etch__pb_field *f,
                     bool fixed64, uint64_t *count) {
  if (f->wt == (fixed64 ? ETCH_PB_FIXED64 : ETCH_PB_VARINT)) {
    ++*count;
  } else if (f->wt != ETCH_PB_LEN) {
    return want(c, msg, f, fixed64 ? ETCH_PB_FIXED64 : ETCH_PB_VARINT,
                "repeated field");
  } else if (fixed64) {
    if (f->len % 8)
      return fail(c, f->data + f->len / 8 * 8, ETCH_EFORMAT,
                  "truncated packed fixed64");
    *count += f->len / 8;
  } else {
    const uint8_t *p = f->data, *end = f->data + f->len;
    while (p < end) {
      uint64_t v;
      const uint8_t *at = p;
      if (!etch__pb_read_varint(&p, end, &v))
        return fail(c, at, ETCH_EFORMAT, "truncated packed varint");
      ++*count;
    }
  }
  if (*count > ETCH_PKT_MAX_REPEATED)
    return fail(c, f->data, ETCH_ELIMIT,
                "repeated field with more than %u values", ETCH_PKT_MAX_REPEATED);
  return true;
}

/* ---- debug annotations (event.c) -------------------------------------------- */

static bool arg(ck *c, const uint8_t *at) {
  if (++c->nargs <= ETCH_PKT_MAX_ARGS) return true;
  return fail(c, at, ETCH_ELIMIT, "more than %u args in one event",
              ETCH_PKT_MAX_ARGS);
}

static bool too_deep(ck *c, const uint8_t *at) {
  return fail(c, at, ETCH_ELIMIT, "debug annotations nested deeper than %d",
              ETCH_PKT_MAX_NESTING);
}

/* The reader's key_append: `n` more bytes (and a dot) on a flattened key
 * of *len bytes, within ETCH_PKT_MAX_KEY. */
static bool key_add(ck *c, const uint8_t *at, size_t *len, size_t n,
                    bool dot) {
  if (*len + n + 1 > ETCH_PKT_MAX_KEY)
    return fail(c, at, ETCH_ELIMIT, "debug annotation key longer than %d bytes",
                ETCH_PKT_MAX_KEY);
  *len += n + dot;
  return true;
}

static size_t index_len(size_t i) {
  char idx[32];
  return (size_t)snprintf(idx, sizeof idx, "[%zu]", i);
}

/* DebugAnnotation.NestedValue: dict values (each with the next key),
 * array values, scalars. */
static bool nested_value(ck *c, const uint8_t *msg, size_t len, size_t flat,
                         size_t key, int depth) {
  enum { NV_TYPE = 1, NV_KEYS = 2, NV_DVALS = 3, NV_AVALS = 4, NV_INT = 5,
         NV_DOUBLE = 6, NV_BOOL = 7, NV_STRING = 8 };
  if (depth > ETCH_PKT_MAX_NESTING) return too_deep(c, msg);
  etch__pb_dec d, kd;
  etch__pb_field f, kf;
  uint64_t type = 0;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f))
    if (f.id == NV_TYPE && f.wt == ETCH_PB_VARINT) type = f.u;
  if (d.err) return dec_fail(c, &d);
  size_t index = 0;
  etch__pb_dec_init(&kd, msg, len);
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    if (type == 1 && f.id == NV_DVALS && f.wt == ETCH_PB_LEN) {
      bool found = false;
      while (etch__pb_next_fast(&kd, &kf))
        if (kf.id == NV_KEYS && kf.wt == ETCH_PB_LEN) {
          found = true;
          break;
        }
      if (!found) continue; /* a value without a key: not read */
      size_t fl = flat, kl = key;
      if (!key_add(c, f.data, &fl, kf.len, true) ||
          !key_add(c, f.data, &kl, kf.len, true) ||
          !nested_value(c, f.data, f.len, fl, kl, depth + 1))
        return false;
    } else if (type == 2 && f.id == NV_AVALS && f.wt == ETCH_PB_LEN) {
      size_t kl = key;
      if (!key_add(c, f.data, &kl, index_len(index++), false) ||
          !nested_value(c, f.data, f.len, flat, kl, depth + 1))
        return false;
    } else if (type == 0 &&
               ((f.id == NV_INT && f.wt == ETCH_PB_VARINT) ||
                (f.id == NV_DOUBLE && f.wt == ETCH_PB_FIXED64) ||
                (f.id == NV_BOOL && f.wt == ETCH_PB_VARINT) ||
                (f.id == NV_STRING && f.wt == ETCH_PB_LEN))) {
      if (!arg(c, msg + f.off)) return false;
    }
  }
  return true;
}

/* A DebugAnnotation; `named` ones (an event's, dict entries) add their
 * name to the keys so far. An interned name counts as empty here: its
 * length is known only to a reader that has seen its definition (which
 * then judges the key's length itself). */
static bool debug_annotation(ck *c, const uint8_t *msg, size_t len,
                             size_t flat, size_t key, int depth, bool named) {
  if (depth > ETCH_PKT_MAX_NESTING) return too_deep(c, msg);
  etch__pb_dec d;
  etch__pb_field f;
  if (named) {
    size_t n = 0;
    etch__pb_dec_init(&d, msg, len);
    while (etch__pb_next_fast(&d, &f)) {
      if (f.id == ETCH_DA_NAME_IID && f.wt == ETCH_PB_VARINT) n = 0;
      else if (f.id == ETCH_DA_NAME && f.wt == ETCH_PB_LEN) n = f.len;
    }
    if (d.err) return dec_fail(c, &d);
    if (!key_add(c, msg, &flat, n, true) || !key_add(c, msg, &key, n, true))
      return false;
  }
  size_t index = 0;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    const char *scalar = NULL;
    unsigned wt = ETCH_PB_VARINT;
    switch (f.id) {
      case ETCH_DA_BOOL_VALUE: scalar = "bool_value"; break;
      case ETCH_DA_UINT_VALUE: scalar = "uint_value"; break;
      case ETCH_DA_INT_VALUE: scalar = "int_value"; break;
      case ETCH_DA_POINTER_VALUE: scalar = "pointer_value"; break;
      case ETCH_DA_STRING_VALUE_IID: scalar = "string_value_iid"; break;
      case ETCH_DA_DOUBLE_VALUE:
        scalar = "double_value";
        wt = ETCH_PB_FIXED64;
        break;
      case ETCH_DA_STRING_VALUE:
      case ETCH_DA_LEGACY_JSON_VALUE:
        scalar = "string_value";
        wt = ETCH_PB_LEN;
        break;
      case ETCH_DA_DICT_ENTRIES:
        if (!want(c, msg, &f, ETCH_PB_LEN, "dict_entries") ||
            !arg(c, msg + f.off) || /* an empty one is a NULL arg */
            !debug_annotation(c, f.data, f.len, flat, key, depth + 1, true))
          return false;
        break;
      case ETCH_DA_ARRAY_VALUES: {
        size_t kl = key;
        if (!want(c, msg, &f, ETCH_PB_LEN, "array_values") ||
            !key_add(c, f.data, &kl, index_len(index++), false) ||
            !arg(c, msg + f.off) ||
            !debug_annotation(c, f.data, f.len, flat, kl, depth + 1, false))
          return false;
        break;
      }
      case ETCH_DA_NESTED_VALUE:
        if (!want(c, msg, &f, ETCH_PB_LEN, "nested_value") ||
            !arg(c, msg + f.off) ||
            !nested_value(c, f.data, f.len, flat, key, depth + 1))
          return false;
        break;
      default:
        break;
    }
    if (scalar && (!want(c, msg, &f, wt, scalar) || !arg(c, msg + f.off)))
      return false;
  }
  return d.err ? dec_fail(c, &d) : true;
}

/* ---- track events (event.c) ------------------------------------------------- */

static bool track_event(ck *c, const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  c->nargs = 0;
  for (int i = 0; i < R_N; i++) c->nrep[i] = 0;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    bool ok = true;
    switch (f.id) {
      case ETCH_TE_TYPE:
        ok = want(c, msg, &f, ETCH_PB_VARINT, "TrackEvent.type");
        break;
      case ETCH_TE_NAME_IID:
        ok = want(c, msg, &f, ETCH_PB_VARINT, "TrackEvent.name_iid");
        break;
      case ETCH_TE_NAME:
        ok = want(c, msg, &f, ETCH_PB_LEN, "TrackEvent.name");
        break;
      case ETCH_TE_CATEGORY_IIDS:
        ok = repeated(c, msg, &f, false, &c->nrep[R_CAT]);
        break;
      case ETCH_TE_CATEGORIES:
        ok = want(c, msg, &f, ETCH_PB_LEN, "TrackEvent.categories");
        break;
      case ETCH_TE_TRACK_UUID:
        ok = want(c, msg, &f, ETCH_PB_VARINT, "TrackEvent.track_uuid");
        break;
      case ETCH_TE_COUNTER_VALUE:
        ok = want(c, msg, &f, ETCH_PB_VARINT, "TrackEvent.counter_value");
        break;
      case ETCH_TE_DOUBLE_COUNTER_VALUE:
        ok = want(c, msg, &f, ETCH_PB_FIXED64, "TrackEvent.double_counter_value");
        break;
      case ETCH_TE_DEBUG_ANNOTATIONS:
        /* Keys start as "debug". */
        ok = want(c, msg, &f, ETCH_PB_LEN, "TrackEvent.debug_annotations") &&
             debug_annotation(c, f.data, f.len, 5, 5, 1, true);
        break;
      case ETCH_TE_FLOW_IDS:
      case ETCH_TE_FLOW_IDS_OLD:
        ok = repeated(c, msg, &f, f.id == ETCH_TE_FLOW_IDS, &c->nrep[R_FLOWS]);
        break;
      case ETCH_TE_TERMINATING_FLOW_IDS:
      case ETCH_TE_TERMINATING_FLOW_IDS_OLD:
        ok = repeated(c, msg, &f, f.id == ETCH_TE_TERMINATING_FLOW_IDS,
                      &c->nrep[R_TERMS]);
        break;
      case ETCH_TE_EXTRA_COUNTER_TRACK_UUIDS:
        ok = repeated(c, msg, &f, false, &c->nrep[R_XC_U]);
        break;
      case ETCH_TE_EXTRA_COUNTER_VALUES:
        ok = repeated(c, msg, &f, false, &c->nrep[R_XC_V]);
        break;
      case ETCH_TE_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS:
        ok = repeated(c, msg, &f, false, &c->nrep[R_XD_U]);
        break;
      case ETCH_TE_EXTRA_DOUBLE_COUNTER_VALUES:
        ok = repeated(c, msg, &f, true, &c->nrep[R_XD_V]);
        break;
      case ETCH_TE_CALLSTACK_IID:
        ok = want(c, msg, &f, ETCH_PB_VARINT, "TrackEvent.callstack_iid");
        break;
      case ETCH_TE_SOURCE_LOCATION_IID:
        /* Its file, function and line become three args. */
        ok = want(c, msg, &f, ETCH_PB_VARINT, "TrackEvent.source_location_iid") &&
             arg(c, msg + f.off) && arg(c, msg + f.off) && arg(c, msg + f.off);
        break;
      default:
        break;
    }
    if (!ok) return false;
  }
  return d.err ? dec_fail(c, &d) : true;
}

/* ---- state: interned data, defaults, snapshots, descriptors (packet.c) ------- */

static bool schema(ck *c, const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  unsigned nfields = 0;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    if (f.id != ETCH_SCHEMA_FIELD) continue;
    if (!want(c, msg, &f, ETCH_PB_LEN, "EventSchema.field")) return false;
    if (nfields++ == ETCH_PKT_MAX_SCHEMA_FIELDS)
      return fail(c, f.data, ETCH_ELIMIT,
                  "custom event schema with more than %d fields",
                  ETCH_PKT_MAX_SCHEMA_FIELDS);
    if (!walk(c, f.data, f.len)) return false;
  }
  return d.err ? dec_fail(c, &d) : true;
}

/* ---- call stacks (stacks.c) ------------------------------------------------ */

/* A message whose fields `ids` (a 0-ended list) are varints, `packed` (0:
 * none) a repeated varint, plain or packed; `limit` bounds how many values
 * `packed` holds (0: no bound). */
static bool varints(ck *c, const uint8_t *msg, size_t len, const char *what,
                    const uint8_t *ids, uint32_t packed, uint64_t limit) {
  etch__pb_dec d;
  etch__pb_field f;
  uint64_t n = 0;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    if (packed && f.id == packed && f.wt != ETCH_PB_VARINT) {
      if (!want(c, msg, &f, ETCH_PB_LEN, what)) return false;
      const uint8_t *p = f.data, *end = f.data + f.len;
      uint64_t x;
      while (p < end) {
        if (!etch__pb_read_varint(&p, end, &x))
          return fail(c, f.data, ETCH_EFORMAT,
                      "%s: a packed varint cut short", what);
        n++;
      }
    } else if (packed && f.id == packed) {
      n++;
    } else {
      for (const uint8_t *i = ids; *i; i++)
        if (f.id == *i && !want(c, msg, &f, ETCH_PB_VARINT, what)) return false;
    }
    if (limit && n > limit)
      return fail(c, msg, ETCH_ELIMIT, "%s: more than %llu values", what,
                  (unsigned long long)limit);
  }
  return d.err ? dec_fail(c, &d) : true;
}

/* InternedString { iid 1, str 2 }. */
static bool interned_string(ck *c, const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    if (f.id == ETCH_ISTR_IID &&
        !want(c, msg, &f, ETCH_PB_VARINT, "InternedString.iid"))
      return false;
    if (f.id == ETCH_ISTR_STR &&
        !want(c, msg, &f, ETCH_PB_LEN, "InternedString.str"))
      return false;
  }
  return d.err ? dec_fail(c, &d) : true;
}

static bool stack_entry(ck *c, uint32_t id, const uint8_t *msg, size_t len) {
  /* Mapping: iid 1, build_id 2, start_offset 3, start 4, end 5,
   * load_bias 6, exact_offset 8; path_string_ids 7. */
  static const uint8_t kMapping[] = {1, 2, 3, 4, 5, 6, 8, 0};
  static const uint8_t kFrame[] = {ETCH_FRAME_IID, ETCH_FRAME_FUNCTION_NAME_ID,
                                   ETCH_FRAME_MAPPING_ID, ETCH_FRAME_REL_PC, 0};
  static const uint8_t kCallstack[] = {ETCH_CALLSTACK_IID, 0};
  switch (id) {
    case ETCH_ID_MAPPINGS:
      return varints(c, msg, len, "Mapping field", kMapping,
                     ETCH_MAPPING_PATH_STRING_IDS, 0);
    case ETCH_ID_FRAMES:
      return varints(c, msg, len, "Frame field", kFrame, 0, 0);
    case ETCH_ID_CALLSTACKS:
      return varints(c, msg, len, "Callstack field", kCallstack,
                     ETCH_CALLSTACK_FRAME_IDS, ETCH_PKT_MAX_STACK_FRAMES);
    default:
      return interned_string(c, msg, len);
  }
}

/* Line { function_name 1, source_file_name 2, line_number 3 }. */
static bool symbol_line(ck *c, const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    bool ok = true;
    if (f.id == ETCH_LINE_FUNCTION_NAME || f.id == ETCH_LINE_SOURCE_FILE_NAME)
      ok = want(c, msg, &f, ETCH_PB_LEN, "Line name");
    else if (f.id == ETCH_LINE_LINE_NUMBER)
      ok = want(c, msg, &f, ETCH_PB_VARINT, "Line.line_number");
    if (!ok) return false;
  }
  return d.err ? dec_fail(c, &d) : true;
}

/* AddressSymbols { address 1, repeated lines 2 }. */
static bool address_symbols(ck *c, const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    bool ok = true;
    if (f.id == ETCH_ADDRSYM_ADDRESS)
      ok = want(c, msg, &f, ETCH_PB_VARINT, "AddressSymbols.address");
    else if (f.id == ETCH_ADDRSYM_LINES)
      ok = want(c, msg, &f, ETCH_PB_LEN, "AddressSymbols.lines") &&
           symbol_line(c, f.data, f.len);
    if (!ok) return false;
  }
  return d.err ? dec_fail(c, &d) : true;
}

/* PerfSample { cpu 1, pid 2, tid 3, callstack_iid 4, cpu_mode 5 }: the
 * fields the reader reads (src/reader/samples.c), each a varint. */
static bool perf_sample(ck *c, const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f))
    if (f.id >= ETCH_PERF_SAMPLE_CPU && f.id <= ETCH_PERF_SAMPLE_CPU_MODE &&
        !want(c, msg, &f, ETCH_PB_VARINT, "PerfSample field"))
      return false;
  return d.err ? dec_fail(c, &d) : true;
}

/* ModuleSymbols { path 1, build_id 2, repeated address_symbols 3 }. */
static bool module_symbols(ck *c, const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    bool ok = true;
    if (f.id == ETCH_MODSYM_PATH || f.id == ETCH_MODSYM_BUILD_ID)
      ok = want(c, msg, &f, ETCH_PB_LEN, "ModuleSymbols path or build_id");
    else if (f.id == ETCH_MODSYM_ADDRESS_SYMBOLS)
      ok = want(c, msg, &f, ETCH_PB_LEN, "ModuleSymbols.address_symbols") &&
           address_symbols(c, f.data, f.len);
    if (!ok) return false;
  }
  return d.err ? dec_fail(c, &d) : true;
}

static bool interned_data(ck *c, const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    switch (f.id) {
      case ETCH_ID_EVENT_CATEGORIES:
      case ETCH_ID_EVENT_NAMES:
      case ETCH_ID_DEBUG_ANNOTATION_NAMES:
      case ETCH_ID_DEBUG_ANNOTATION_STRING_VALUES:
      case ETCH_ID_SOURCE_LOCATIONS:
        if (!want(c, msg, &f, ETCH_PB_LEN, "InternedData entry") ||
            !walk(c, f.data, f.len))
          return false;
        break;
      case ETCH_ID_FUNCTION_NAMES:
      case ETCH_ID_FRAMES:
      case ETCH_ID_CALLSTACKS:
      case ETCH_ID_BUILD_IDS:
      case ETCH_ID_MAPPING_PATHS:
      case ETCH_ID_MAPPINGS:
        if (!want(c, msg, &f, ETCH_PB_LEN, "InternedData call-stack entry") ||
            !stack_entry(c, f.id, f.data, f.len))
          return false;
        break;
      case ETCH_ID_EVENT_SCHEMAS:
        if (!want(c, msg, &f, ETCH_PB_LEN, "InternedData.etch_event_schemas") ||
            !schema(c, f.data, f.len))
          return false;
        break;
      default:
        break;
    }
  }
  return d.err ? dec_fail(c, &d) : true;
}

static bool packet_defaults(ck *c, const uint8_t *msg, size_t len) {
  etch__pb_dec d, td;
  etch__pb_field f, tf;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    if (f.id == ETCH_DEFAULTS_TIMESTAMP_CLOCK_ID) {
      if (!want(c, msg, &f, ETCH_PB_VARINT,
                "TracePacketDefaults.timestamp_clock_id"))
        return false;
    } else if (f.id == ETCH_DEFAULTS_TRACK_EVENT_DEFAULTS) {
      if (!want(c, msg, &f, ETCH_PB_LEN,
                "TracePacketDefaults.track_event_defaults"))
        return false;
      uint64_t xc = 0, xd = 0; /* each occurrence starts the arrays again */
      etch__pb_dec_init(&td, f.data, f.len);
      while (etch__pb_next_fast(&td, &tf)) {
        if ((tf.id == ETCH_TEDEFAULTS_EXTRA_COUNTER_TRACK_UUIDS &&
             !repeated(c, f.data, &tf, false, &xc)) ||
            (tf.id == ETCH_TEDEFAULTS_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS &&
             !repeated(c, f.data, &tf, false, &xd)))
          return false;
      }
      if (td.err) return dec_fail(c, &td);
    }
  }
  return d.err ? dec_fail(c, &d) : true;
}

/* ClockSnapshot, TraceStats: their entries must decode. */
static bool entries(ck *c, const uint8_t *msg, size_t len, uint32_t id) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f))
    if (f.id == id && f.wt == ETCH_PB_LEN && !walk(c, f.data, f.len))
      return false;
  return d.err ? dec_fail(c, &d) : true;
}

/* RemoteClockSync: its synced clocks, each two ClockSnapshots. */
static bool remote_clock_sync(ck *c, const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    if (f.id != ETCH_RCS_SYNCED_CLOCKS || f.wt != ETCH_PB_LEN) continue;
    etch__pb_dec sd;
    etch__pb_field sf;
    etch__pb_dec_init(&sd, f.data, f.len);
    while (etch__pb_next_fast(&sd, &sf))
      if ((sf.id == ETCH_RCS_CLIENT_CLOCKS || sf.id == ETCH_RCS_HOST_CLOCKS) &&
          sf.wt == ETCH_PB_LEN &&
          !entries(c, sf.data, sf.len, ETCH_CLOCKSNAP_CLOCKS))
        return false;
    if (sd.err) return dec_fail(c, &sd);
  }
  return d.err ? dec_fail(c, &d) : true;
}

static bool track_descriptor(ck *c, const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    bool ok = true;
    switch (f.id) {
      case ETCH_TD_UUID:
        ok = want(c, msg, &f, ETCH_PB_VARINT, "TrackDescriptor.uuid");
        break;
      case ETCH_TD_PARENT_UUID:
        ok = want(c, msg, &f, ETCH_PB_VARINT, "TrackDescriptor.parent_uuid");
        break;
      case ETCH_TD_NAME:
      case ETCH_TD_STATIC_NAME:
        ok = want(c, msg, &f, ETCH_PB_LEN, "TrackDescriptor.name");
        break;
      case ETCH_TD_PROCESS:
      case ETCH_TD_THREAD:
        ok = want(c, msg, &f, ETCH_PB_LEN, "TrackDescriptor.process/thread") &&
             walk(c, f.data, f.len);
        break;
      case ETCH_TD_COUNTER:
        ok = want(c, msg, &f, ETCH_PB_LEN, "TrackDescriptor.counter") &&
             walk(c, f.data, f.len);
        break;
      default:
        break;
    }
    if (!ok) return false;
  }
  return d.err ? dec_fail(c, &d) : true;
}

/* ---- the common packet, quickly ------------------------------------------------ */

/*
 * Most packets are a track event with scalar fields: this takes those (and
 * unknown fields of any decodable shape) in one lean pass - tags of one
 * byte looked up in a table, varints and lengths of up to five bytes - and
 * answers 1 (it reads) or 0 (look the long way: anything else, sound or
 * not). It never says 1 where the long way would refuse
 * (fuzz/fuzz_check.c compares the two).
 */
enum { QUICK_MAX_REPEATED = 256 }; /* repeated values of one event, in all */

/* What a one-byte tag is: */
enum {
  Q_SKIP = 0, /* unknown to the reader: skipped if it decodes */
  Q_OK,       /* known, with its wire type */
  Q_LONG,     /* anything else the reader reads: the long way */
  Q_TE,       /* TracePacket.track_event */
  Q_REP,      /* one value of a repeated field */
  Q_PACKED,   /* packed varints of a repeated field */
};

#define TAG(field, wt) (((field) << 3) | (wt))
/* Every wire type of `field` (< 16) the long way; the right one set after. */
#define LONG8(field)                                                      \
  [TAG(field, 0)] = Q_LONG, [TAG(field, 1)] = Q_LONG,                      \
  [TAG(field, 2)] = Q_LONG, [TAG(field, 3)] = Q_LONG,                      \
  [TAG(field, 4)] = Q_LONG, [TAG(field, 5)] = Q_LONG,                      \
  [TAG(field, 6)] = Q_LONG, [TAG(field, 7)] = Q_LONG

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wunknown-warning-option"
#pragma GCC diagnostic ignored "-Winitializer-overrides"
/* TracePacket fields 1..15 (timestamp 8, trusted_packet_sequence_id 10,
 * track_event 11, interned_data 12, sequence_flags 13, clock_snapshot 6,
 * trusted_uid 3: the service's). */
#define PACKET_TAGS                                                        \
  LONG8(0), LONG8(3), LONG8(6), LONG8(8), LONG8(10), LONG8(11), LONG8(12),  \
      LONG8(13), [TAG(ETCH_PKT_TIMESTAMP, ETCH_PB_VARINT)] = Q_OK,          \
      [TAG(ETCH_PKT_SEQUENCE_FLAGS, ETCH_PB_VARINT)] = Q_OK,                \
      [TAG(ETCH_PKT_TRACK_EVENT, ETCH_PB_LEN)] = Q_TE
static const uint8_t kPacket[128] = {
    PACKET_TAGS, [TAG(ETCH_PKT_TRUSTED_SEQ_ID, ETCH_PB_VARINT)] = Q_OK};
/* A producer's: its trusted_packet_sequence_id is the service's to write. */
static const uint8_t kProducerPacket[128] = {PACKET_TAGS};
/* TrackEvent fields 1..15 (category_iids 3, debug_annotations 4, type 9,
 * name_iid 10, track_uuid 11, extra_counter_values 12; 1 and 2 are not
 * read). */
static const uint8_t kEvent[128] = {
    LONG8(0), LONG8(3), LONG8(4), LONG8(9), LONG8(10), LONG8(11), LONG8(12),
    [TAG(ETCH_TE_TYPE, ETCH_PB_VARINT)] = Q_OK,
    [TAG(ETCH_TE_NAME_IID, ETCH_PB_VARINT)] = Q_OK,
    [TAG(ETCH_TE_TRACK_UUID, ETCH_PB_VARINT)] = Q_OK,
    [TAG(ETCH_TE_CATEGORY_IIDS, ETCH_PB_VARINT)] = Q_REP,
    [TAG(ETCH_TE_CATEGORY_IIDS, ETCH_PB_LEN)] = Q_PACKED,
};
#pragma GCC diagnostic pop

/* A two-byte tag (fields 16..2047) of the packet or the event. */
static int quick_tag2(uint32_t tag, bool event, bool producer) {
  uint32_t id = tag >> 3, wt = tag & 7;
  if (!event) {
    switch (id) {
      case ETCH_PKT_TRUSTED_PID:
      case ETCH_PKT_TIMESTAMP_CLOCK_ID:
      case ETCH_PKT_PREVIOUS_PACKET_DROPPED:
      case ETCH_PKT_FIRST_PACKET_ON_SEQUENCE:
      case PKT_INCREMENTAL_STATE_CLEARED:
      case ETCH_PKT_MACHINE_ID:
        /* trusted_pid and machine_id are the service's to write: a
         * producer's goes to the full check, which refuses it */
        return wt == ETCH_PB_VARINT &&
                       !(producer && (id == ETCH_PKT_TRUSTED_PID ||
                                      id == ETCH_PKT_MACHINE_ID))
                   ? Q_OK
                   : Q_LONG;
      case ETCH_PKT_SYSTEM_INFO: case ETCH_PKT_REMOTE_CLOCK_SYNC:
      case ETCH_PKT_TRACE_PACKET_DEFAULTS: case ETCH_PKT_TRACK_DESCRIPTOR:
      case ETCH_PKT_TRACE_STATS: case ETCH_PKT_COMPRESSED_PACKETS:
      case ETCH_PKT_ZSTD_COMPRESSED_PACKETS: case ETCH_PKT_TRACE_CONFIG:
      case ETCH_PKT_SYNCHRONIZATION_MARKER: case ETCH_PKT_MODULE_SYMBOLS:
      case ETCH_PKT_PERF_SAMPLE:
        return Q_LONG;
      default:
        return Q_SKIP;
    }
  }
  switch (id) {
    case ETCH_TE_NAME:
    case ETCH_TE_CATEGORIES:
      return wt == ETCH_PB_LEN ? Q_OK : Q_LONG;
    case ETCH_TE_COUNTER_VALUE:
    case ETCH_TE_CALLSTACK_IID:
      return wt == ETCH_PB_VARINT ? Q_OK : Q_LONG;
    case ETCH_TE_DOUBLE_COUNTER_VALUE:
      return wt == ETCH_PB_FIXED64 ? Q_OK : Q_LONG;
    case ETCH_TE_FLOW_IDS: case ETCH_TE_TERMINATING_FLOW_IDS:
      return wt == ETCH_PB_FIXED64 ? Q_REP : Q_LONG;
    case ETCH_TE_FLOW_IDS_OLD: case ETCH_TE_TERMINATING_FLOW_IDS_OLD:
      return wt == ETCH_PB_VARINT ? Q_REP : Q_LONG;
    case ETCH_TE_EXTRA_COUNTER_TRACK_UUIDS:
    case ETCH_TE_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS:
    case ETCH_TE_EXTRA_DOUBLE_COUNTER_VALUES:
    case ETCH_TE_SOURCE_LOCATION_IID:
      return Q_LONG;
    default:
      return Q_SKIP;
  }
}

/* One message of the quick pass: the packet (`event` false) or its track
 * event. */
static int quick_message(const uint8_t *p, const uint8_t *end, bool event,
                         bool producer) {
  const uint8_t *te = NULL, *te_end = NULL;
  uint32_t reps = 0;
  const uint8_t *table = event ? kEvent : producer ? kProducerPacket : kPacket;
  while (p < end) {
    uint32_t tag = *p++;
    if (ETCH_UNLIKELY(tag >= 0x80)) {
      if (p >= end || *p >= 0x80) return 0;
      tag = (tag & 0x7f) | (uint32_t)*p++ << 7;
    }
    /* (a one-byte tag written in two, ending in 0, is still its field) */
    int kind = ETCH_LIKELY(tag < 0x80) ? table[tag]
                                       : quick_tag2(tag, event, producer);
    if (ETCH_UNLIKELY(kind == Q_LONG)) return 0; /* (field 0 too) */
    uint64_t v;
    switch (tag & 7) {
      case ETCH_PB_VARINT:
        if (ETCH_LIKELY(p < end && *p < 0x80))
          p++;
        else if (!(p = etch__pb_varint5(p, end, &v)))
          return 0;
        break;
      case ETCH_PB_LEN:
        if (!(p = etch__pb_varint5(p, end, &v)) || v > (uint64_t)(end - p))
          return 0;
        if (kind == Q_TE) {
          te = p;
          te_end = p + v;
        } else if (kind == Q_PACKED) {
          const uint8_t *q = p, *qe = p + v;
          uint64_t x;
          while (q < qe)
            if (!(q = etch__pb_varint5(q, qe, &x)) ||
                ++reps > QUICK_MAX_REPEATED)
              return 0;
        }
        p += v;
        break;
      case ETCH_PB_FIXED64:
        if (end - p < 8) return 0;
        p += 8;
        break;
      case ETCH_PB_FIXED32:
        if (end - p < 4) return 0;
        p += 4;
        break;
      default:
        return 0;
    }
    if (kind == Q_REP && ++reps > QUICK_MAX_REPEATED) return 0;
  }
  return !te || quick_message(te, te_end, true, producer);
}

/* ---- the packet ---------------------------------------------------------------- */

static bool check_full(const uint8_t *pkt, size_t len, bool producer,
                       etch__pkt_fault *why, bool *descriptors);

bool etch__packet_check(const uint8_t *pkt, size_t len, etch__pkt_fault *why) {
  if (ETCH_LIKELY(quick_message(pkt, pkt + len, false, false))) return true;
  return check_full(pkt, len, false, why, NULL);
}

bool etch__packet_check_producer(const uint8_t *pkt, size_t len,
                                 etch__pkt_fault *why, bool *descriptors) {
  *descriptors = false;
  if (ETCH_LIKELY(quick_message(pkt, pkt + len, false, true))) return true;
  return check_full(pkt, len, true, why, descriptors);
}

bool etch__packet_check_full(const uint8_t *pkt, size_t len,
                             etch__pkt_fault *why) {
  return check_full(pkt, len, false, why, NULL);
}

static bool check_full(const uint8_t *pkt, size_t len, bool producer,
                       etch__pkt_fault *why, bool *descriptors) {
  ck c;
  c.pkt = pkt;
  c.why = why;
  etch__pb_dec d;
  etch__pb_field f;
  const uint8_t *te = NULL;
  size_t te_len = 0;
  etch__pb_dec_init(&d, pkt, len);
  while (etch__pb_next_fast(&d, &f)) {
    bool ok = true;
    if (producer) {
      switch (f.id) {
        case ETCH_PKT_TRUSTED_UID:
        case ETCH_PKT_TRUSTED_SEQ_ID:
        case ETCH_PKT_TRUSTED_PID:
        case ETCH_PKT_COMPRESSED_PACKETS:
        case ETCH_PKT_ZSTD_COMPRESSED_PACKETS:
        case ETCH_PKT_TRACE_CONFIG:
        case ETCH_PKT_TRACE_STATS:
        case ETCH_PKT_SYNCHRONIZATION_MARKER:
        case ETCH_PKT_MACHINE_ID:
        case ETCH_PKT_SYSTEM_INFO:
        case ETCH_PKT_REMOTE_CLOCK_SYNC:
          return fail(&c, pkt + f.off, ETCH_EFORMAT,
                      "TracePacket field %u is the service's to write", f.id);
        case ETCH_PKT_TRACK_DESCRIPTOR:
          if (descriptors) *descriptors = true;
          break;
        default:
          break;
      }
    }
    switch (f.id) {
      case ETCH_PKT_TIMESTAMP:
        ok = want(&c, pkt, &f, ETCH_PB_VARINT, "TracePacket.timestamp");
        break;
      case ETCH_PKT_SEQUENCE_FLAGS:
        ok = want(&c, pkt, &f, ETCH_PB_VARINT, "TracePacket.sequence_flags");
        break;
      case ETCH_PKT_TRUSTED_SEQ_ID:
        ok = want(&c, pkt, &f, ETCH_PB_VARINT,
                  "TracePacket.trusted_packet_sequence_id");
        break;
      case ETCH_PKT_TRUSTED_PID:
        ok = want(&c, pkt, &f, ETCH_PB_VARINT, "TracePacket.trusted_pid");
        break;
      case ETCH_PKT_TIMESTAMP_CLOCK_ID:
        ok = want(&c, pkt, &f, ETCH_PB_VARINT, "TracePacket.timestamp_clock_id");
        break;
      case ETCH_PKT_PREVIOUS_PACKET_DROPPED:
        ok = want(&c, pkt, &f, ETCH_PB_VARINT,
                  "TracePacket.previous_packet_dropped");
        break;
      case ETCH_PKT_FIRST_PACKET_ON_SEQUENCE:
        ok = want(&c, pkt, &f, ETCH_PB_VARINT,
                  "TracePacket.first_packet_on_sequence");
        break;
      case PKT_INCREMENTAL_STATE_CLEARED:
        ok = want(&c, pkt, &f, ETCH_PB_VARINT,
                  "TracePacket.incremental_state_cleared");
        break;
      case ETCH_PKT_TRACK_EVENT: /* the last one is the packet's */
        ok = want(&c, pkt, &f, ETCH_PB_LEN, "TracePacket.track_event");
        te = f.data;
        te_len = f.len;
        break;
      case ETCH_PKT_INTERNED_DATA:
        ok = want(&c, pkt, &f, ETCH_PB_LEN, "TracePacket.interned_data") &&
             interned_data(&c, f.data, f.len);
        break;
      case ETCH_PKT_TRACE_PACKET_DEFAULTS:
        ok = want(&c, pkt, &f, ETCH_PB_LEN, "TracePacket.trace_packet_defaults") &&
             packet_defaults(&c, f.data, f.len);
        break;
      case ETCH_PKT_CLOCK_SNAPSHOT:
        ok = want(&c, pkt, &f, ETCH_PB_LEN, "TracePacket.clock_snapshot") &&
             entries(&c, f.data, f.len, ETCH_CLOCKSNAP_CLOCKS);
        break;
      case ETCH_PKT_TRACK_DESCRIPTOR:
        ok = want(&c, pkt, &f, ETCH_PB_LEN, "TracePacket.track_descriptor") &&
             track_descriptor(&c, f.data, f.len);
        break;
      case ETCH_PKT_TRACE_STATS:
        ok = want(&c, pkt, &f, ETCH_PB_LEN, "TracePacket.trace_stats") &&
             entries(&c, f.data, f.len, ETCH_TS_BUFFER_STATS);
        break;
      case ETCH_PKT_COMPRESSED_PACKETS:
      case ETCH_PKT_ZSTD_COMPRESSED_PACKETS:
        ok = want(&c, pkt, &f, ETCH_PB_LEN, "TracePacket.compressed_packets");
        break;
      case ETCH_PKT_MACHINE_ID:
        ok = want(&c, pkt, &f, ETCH_PB_VARINT, "TracePacket.machine_id");
        break;
      case ETCH_PKT_SYSTEM_INFO:
        ok = want(&c, pkt, &f, ETCH_PB_LEN, "TracePacket.system_info") &&
             entries(&c, f.data, f.len, ETCH_SYSINFO_UTSNAME);
        break;
      case ETCH_PKT_MODULE_SYMBOLS:
        ok = want(&c, pkt, &f, ETCH_PB_LEN, "TracePacket.module_symbols") &&
             module_symbols(&c, f.data, f.len);
        break;
      case ETCH_PKT_PERF_SAMPLE:
        ok = want(&c, pkt, &f, ETCH_PB_LEN, "TracePacket.perf_sample") &&
             perf_sample(&c, f.data, f.len);
        break;
      case ETCH_PKT_REMOTE_CLOCK_SYNC:
        ok = want(&c, pkt, &f, ETCH_PB_LEN, "TracePacket.remote_clock_sync") &&
             remote_clock_sync(&c, f.data, f.len);
        break;
      default:
        break;
    }
    if (!ok) return false;
  }
  if (d.err) return dec_fail(&c, &d);
  return !te || track_event(&c, te, te_len);
}

/*
 * dump.c - the readable dump behind `etch print`.
 *
 * The reader runs with this file's observer (reader_int.h): it sees every
 * packet after the state the packet depends on was applied, and every track
 * event the reader resolved, instead of the subscribers. Fields are printed
 * from a small schema of the messages etch knows; anything else is printed
 * generically ("field N: varint 5").
 */
#include <inttypes.h>
#include <string.h>

#include "proto/perfetto.h"
#include "reader/dump.h"
#include "reader/reader_priv.h"
#include "reader/track.h"
#include "reader/reader_int.h"

/* The listing's state: where it goes, how deep in compressed packets. */
typedef struct dump_state {
  FILE *out;
  int depth;
} dump_state;

enum {
  K_U,      /* unsigned varint */
  K_I,      /* int64 varint */
  K_B,      /* bool */
  K_S,      /* string */
  K_M,      /* message */
  K_D,      /* double (fixed64) */
  K_F64,    /* fixed64 integer */
  K_TYPE,   /* TrackEvent.Type */
  K_FLAGS,  /* sequence_flags */
  K_CLOCK,  /* clock id */
  K_COMP,   /* compressed payload: size only (expanded by the reader) */
  K_BYTES,  /* opaque bytes */
};

typedef struct mdef mdef;
typedef struct fdef {
  uint32_t id;
  const char *name;
  uint8_t kind;
  const mdef *sub;
} fdef;
struct mdef {
  const fdef *f;
  size_t n;
};

#define MDEF(name, ...)                          \
  static const fdef name##_f[] = {__VA_ARGS__};  \
  static const mdef name = {name##_f, ETCH_ARRAY_SIZE(name##_f)}

MDEF(m_interned, {ETCH_INTERNED_IID, "iid", K_U, NULL},
     {ETCH_INTERNED_NAME, "name", K_S, NULL});
MDEF(m_interned_str, {ETCH_INTERNED_IID, "iid", K_U, NULL},
     {ETCH_INTERNED_STR, "str", K_S, NULL});
MDEF(m_srcloc, {ETCH_SRCLOC_IID, "iid", K_U, NULL},
     {ETCH_SRCLOC_FILE_NAME, "file_name", K_S, NULL},
     {ETCH_SRCLOC_FUNCTION_NAME, "function_name", K_S, NULL},
     {ETCH_SRCLOC_LINE_NUMBER, "line_number", K_U, NULL});
MDEF(m_interned_data,
     {ETCH_ID_EVENT_CATEGORIES, "event_categories", K_M, &m_interned},
     {ETCH_ID_EVENT_NAMES, "event_names", K_M, &m_interned},
     {ETCH_ID_DEBUG_ANNOTATION_NAMES, "debug_annotation_names", K_M,
      &m_interned},
     {ETCH_ID_SOURCE_LOCATIONS, "source_locations", K_M, &m_srcloc},
     {ETCH_ID_DEBUG_ANNOTATION_STRING_VALUES, "debug_annotation_string_values",
      K_M, &m_interned_str});

static const mdef m_nested;
static const fdef m_nested_f[] = {
    {1, "nested_type", K_U, NULL},      {2, "dict_keys", K_S, NULL},
    {3, "dict_values", K_M, &m_nested}, {4, "array_values", K_M, &m_nested},
    {5, "int_value", K_I, NULL},        {6, "double_value", K_D, NULL},
    {7, "bool_value", K_B, NULL},       {8, "string_value", K_S, NULL}};
static const mdef m_nested = {m_nested_f, ETCH_ARRAY_SIZE(m_nested_f)};

static const mdef m_da;
static const fdef m_da_f[] = {
    {ETCH_DA_NAME_IID, "name_iid", K_U, NULL},
    {ETCH_DA_NAME, "name", K_S, NULL},
    {ETCH_DA_BOOL_VALUE, "bool_value", K_B, NULL},
    {ETCH_DA_UINT_VALUE, "uint_value", K_U, NULL},
    {ETCH_DA_INT_VALUE, "int_value", K_I, NULL},
    {ETCH_DA_DOUBLE_VALUE, "double_value", K_D, NULL},
    {ETCH_DA_STRING_VALUE, "string_value", K_S, NULL},
    {ETCH_DA_POINTER_VALUE, "pointer_value", K_U, NULL},
    {ETCH_DA_NESTED_VALUE, "nested_value", K_M, &m_nested},
    {ETCH_DA_LEGACY_JSON_VALUE, "legacy_json_value", K_S, NULL},
    {ETCH_DA_DICT_ENTRIES, "dict_entries", K_M, &m_da},
    {ETCH_DA_ARRAY_VALUES, "array_values", K_M, &m_da},
    {ETCH_DA_PROTO_TYPE_NAME, "proto_type_name", K_S, NULL},
    {ETCH_DA_PROTO_VALUE, "proto_value", K_BYTES, NULL},
    {ETCH_DA_STRING_VALUE_IID, "string_value_iid", K_U, NULL}};
static const mdef m_da = {m_da_f, ETCH_ARRAY_SIZE(m_da_f)};

MDEF(m_track_event, {ETCH_TE_TYPE, "type", K_TYPE, NULL},
     {ETCH_TE_NAME_IID, "name_iid", K_U, NULL},
     {ETCH_TE_NAME, "name", K_S, NULL},
     {ETCH_TE_CATEGORY_IIDS, "category_iids", K_U, NULL},
     {ETCH_TE_CATEGORIES, "categories", K_S, NULL},
     {ETCH_TE_TRACK_UUID, "track_uuid", K_U, NULL},
     {ETCH_TE_COUNTER_VALUE, "counter_value", K_I, NULL},
     {ETCH_TE_DOUBLE_COUNTER_VALUE, "double_counter_value", K_D, NULL},
     {ETCH_TE_EXTRA_COUNTER_TRACK_UUIDS, "extra_counter_track_uuids", K_U, NULL},
     {ETCH_TE_EXTRA_COUNTER_VALUES, "extra_counter_values", K_I, NULL},
     {ETCH_TE_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS,
      "extra_double_counter_track_uuids", K_U, NULL},
     {ETCH_TE_EXTRA_DOUBLE_COUNTER_VALUES, "extra_double_counter_values", K_D,
      NULL},
     {ETCH_TE_DEBUG_ANNOTATIONS, "debug_annotations", K_M, &m_da},
     {ETCH_TE_FLOW_IDS, "flow_ids", K_F64, NULL},
     {ETCH_TE_TERMINATING_FLOW_IDS, "terminating_flow_ids", K_F64, NULL},
     {ETCH_TE_FLOW_IDS_OLD, "flow_ids_old", K_U, NULL},
     {ETCH_TE_TERMINATING_FLOW_IDS_OLD, "terminating_flow_ids_old", K_U, NULL},
     {ETCH_TE_SOURCE_LOCATION_IID, "source_location_iid", K_U, NULL},
     {ETCH_TE_SOURCE_LOCATION, "source_location", K_M, &m_srcloc},
     {ETCH_TE_TIMESTAMP_DELTA_US, "timestamp_delta_us", K_I, NULL},
     {ETCH_TE_TIMESTAMP_ABSOLUTE_US, "timestamp_absolute_us", K_I, NULL},
     {ETCH_TE_THREAD_TIME_DELTA_US, "thread_time_delta_us", K_I, NULL},
     {ETCH_TE_LEGACY_EVENT, "legacy_event", K_BYTES, NULL});

MDEF(m_process, {ETCH_PD_PID, "pid", K_I, NULL},
     {ETCH_PD_CMDLINE, "cmdline", K_S, NULL},
     {ETCH_PD_PROCESS_NAME, "process_name", K_S, NULL});
MDEF(m_thread, {ETCH_THD_PID, "pid", K_I, NULL},
     {ETCH_THD_TID, "tid", K_I, NULL},
     {ETCH_THD_THREAD_NAME, "thread_name", K_S, NULL});
MDEF(m_counter, {ETCH_CD_TYPE, "type", K_U, NULL},
     {ETCH_CD_CATEGORIES, "categories", K_S, NULL},
     {ETCH_CD_UNIT, "unit", K_U, NULL},
     {ETCH_CD_UNIT_MULTIPLIER, "unit_multiplier", K_I, NULL},
     {ETCH_CD_IS_INCREMENTAL, "is_incremental", K_B, NULL},
     {ETCH_CD_UNIT_NAME, "unit_name", K_S, NULL});
MDEF(m_track_desc, {ETCH_TD_UUID, "uuid", K_U, NULL},
     {ETCH_TD_NAME, "name", K_S, NULL},
     {ETCH_TD_STATIC_NAME, "static_name", K_S, NULL},
     {ETCH_TD_DESCRIPTION, "description", K_S, NULL},
     {ETCH_TD_PROCESS, "process", K_M, &m_process},
     {ETCH_TD_THREAD, "thread", K_M, &m_thread},
     {ETCH_TD_PARENT_UUID, "parent_uuid", K_U, NULL},
     {ETCH_TD_COUNTER, "counter", K_M, &m_counter},
     {ETCH_TD_CHILD_ORDERING, "child_ordering", K_U, NULL},
     {ETCH_TD_SIBLING_ORDER_RANK, "sibling_order_rank", K_I, NULL});

MDEF(m_clock, {ETCH_SNAPCLOCK_CLOCK_ID, "clock_id", K_CLOCK, NULL},
     {ETCH_SNAPCLOCK_TIMESTAMP, "timestamp", K_U, NULL},
     {ETCH_SNAPCLOCK_IS_INCREMENTAL, "is_incremental", K_B, NULL},
     {ETCH_SNAPCLOCK_UNIT_MULTIPLIER_NS, "unit_multiplier_ns", K_U, NULL});
MDEF(m_clock_snapshot, {ETCH_CLOCKSNAP_CLOCKS, "clocks", K_M, &m_clock},
     {ETCH_CLOCKSNAP_PRIMARY_TRACE_CLOCK, "primary_trace_clock", K_CLOCK,
      NULL});

MDEF(m_te_defaults, {ETCH_TEDEFAULTS_TRACK_UUID, "track_uuid", K_U, NULL},
     {ETCH_TEDEFAULTS_EXTRA_COUNTER_TRACK_UUIDS, "extra_counter_track_uuids",
      K_U, NULL},
     {ETCH_TEDEFAULTS_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS,
      "extra_double_counter_track_uuids", K_U, NULL});
MDEF(m_defaults,
     {ETCH_DEFAULTS_TIMESTAMP_CLOCK_ID, "timestamp_clock_id", K_CLOCK, NULL},
     {ETCH_DEFAULTS_TRACK_EVENT_DEFAULTS, "track_event_defaults", K_M,
      &m_te_defaults});

MDEF(m_buffer_stats, {ETCH_BS_BUFFER_SIZE, "buffer_size", K_U, NULL},
     {ETCH_BS_BYTES_WRITTEN, "bytes_written", K_U, NULL},
     {ETCH_BS_BYTES_OVERWRITTEN, "bytes_overwritten", K_U, NULL},
     {ETCH_BS_BYTES_READ, "bytes_read", K_U, NULL},
     {ETCH_BS_CHUNKS_WRITTEN, "chunks_written", K_U, NULL},
     {ETCH_BS_CHUNKS_OVERWRITTEN, "chunks_overwritten", K_U, NULL},
     {ETCH_BS_CHUNKS_DISCARDED, "chunks_discarded", K_U, NULL},
     {ETCH_BS_CHUNKS_READ, "chunks_read", K_U, NULL},
     {ETCH_BS_WRITE_WRAP_COUNT, "write_wrap_count", K_U, NULL},
     {ETCH_BS_PATCHES_SUCCEEDED, "patches_succeeded", K_U, NULL},
     {ETCH_BS_PATCHES_FAILED, "patches_failed", K_U, NULL},
     {ETCH_BS_ABI_VIOLATIONS, "abi_violations", K_U, NULL},
     {ETCH_BS_TRACE_WRITER_PACKET_LOSS, "trace_writer_packet_loss", K_U, NULL});
MDEF(m_trace_stats, {ETCH_TS_BUFFER_STATS, "buffer_stats", K_M, &m_buffer_stats},
     {ETCH_TS_PRODUCERS_CONNECTED, "producers_connected", K_U, NULL},
     {ETCH_TS_TRACING_SESSIONS, "tracing_sessions", K_U, NULL},
     {ETCH_TS_TOTAL_BUFFERS, "total_buffers", K_U, NULL},
     {ETCH_TS_CHUNKS_DISCARDED, "chunks_discarded", K_U, NULL},
     {ETCH_TS_INVALID_PACKETS, "invalid_packets", K_U, NULL},
     {ETCH_TS_FLUSHES_REQUESTED, "flushes_requested", K_U, NULL},
     {ETCH_TS_FLUSHES_SUCCEEDED, "flushes_succeeded", K_U, NULL},
     {ETCH_TS_FLUSHES_FAILED, "flushes_failed", K_U, NULL});

MDEF(m_utsname, {ETCH_UTSNAME_SYSNAME, "sysname", K_S, NULL},
     {ETCH_UTSNAME_VERSION, "version", K_S, NULL},
     {ETCH_UTSNAME_RELEASE, "release", K_S, NULL},
     {ETCH_UTSNAME_MACHINE, "machine", K_S, NULL});
MDEF(m_system_info, {ETCH_SYSINFO_UTSNAME, "utsname", K_M, &m_utsname},
     {ETCH_SYSINFO_ANDROID_BUILD_FINGERPRINT, "android_build_fingerprint",
      K_S, NULL},
     {ETCH_SYSINFO_ANDROID_SDK_VERSION, "android_sdk_version", K_U, NULL},
     {4, "tracing_service_version", K_S, NULL},
     {6, "page_size", K_U, NULL},
     {7, "timezone_off_mins", K_I, NULL},
     {ETCH_SYSINFO_NUM_CPUS, "num_cpus", K_U, NULL},
     {ETCH_SYSINFO_SYSTEM_RAM_BYTES, "system_ram_bytes", K_U, NULL});
MDEF(m_synced_clocks,
     {ETCH_RCS_CLIENT_CLOCKS, "client_clocks", K_M, &m_clock_snapshot},
     {ETCH_RCS_HOST_CLOCKS, "host_clocks", K_M, &m_clock_snapshot});
MDEF(m_remote_clock_sync,
     {ETCH_RCS_SYNCED_CLOCKS, "synced_clocks", K_M, &m_synced_clocks});

MDEF(m_packet, {ETCH_PKT_TIMESTAMP, "timestamp", K_U, NULL},
     {ETCH_PKT_TIMESTAMP_CLOCK_ID, "timestamp_clock_id", K_CLOCK, NULL},
     {ETCH_PKT_TRUSTED_SEQ_ID, "trusted_packet_sequence_id", K_U, NULL},
     {ETCH_PKT_TRUSTED_UID, "trusted_uid", K_I, NULL},
     {ETCH_PKT_TRUSTED_PID, "trusted_pid", K_I, NULL},
     {ETCH_PKT_SEQUENCE_FLAGS, "sequence_flags", K_FLAGS, NULL},
     {41, "incremental_state_cleared", K_B, NULL},
     {ETCH_PKT_PREVIOUS_PACKET_DROPPED, "previous_packet_dropped", K_U, NULL},
     {ETCH_PKT_FIRST_PACKET_ON_SEQUENCE, "first_packet_on_sequence", K_B, NULL},
     {ETCH_PKT_TRACE_PACKET_DEFAULTS, "trace_packet_defaults", K_M,
      &m_defaults},
     {ETCH_PKT_INTERNED_DATA, "interned_data", K_M, &m_interned_data},
     {ETCH_PKT_TRACK_EVENT, "track_event", K_M, &m_track_event},
     {ETCH_PKT_TRACK_DESCRIPTOR, "track_descriptor", K_M, &m_track_desc},
     {ETCH_PKT_CLOCK_SNAPSHOT, "clock_snapshot", K_M, &m_clock_snapshot},
     {ETCH_PKT_TRACE_STATS, "trace_stats", K_M, &m_trace_stats},
     {ETCH_PKT_MACHINE_ID, "machine_id", K_U, NULL},
     {ETCH_PKT_SYSTEM_INFO, "system_info", K_M, &m_system_info},
     {ETCH_PKT_REMOTE_CLOCK_SYNC, "remote_clock_sync", K_M,
      &m_remote_clock_sync},
     {ETCH_PKT_TRACE_CONFIG, "trace_config", K_BYTES, NULL},
     {ETCH_PKT_SERVICE_EVENT, "service_event", K_BYTES, NULL},
     {ETCH_PKT_SYNC_MARKER, "synchronization_marker", K_BYTES, NULL},
     {ETCH_PKT_EXTENSION_DESCRIPTOR, "extension_descriptor", K_BYTES, NULL},
     {ETCH_PKT_COMPRESSED_PACKETS, "compressed_packets", K_COMP, NULL},
     {ETCH_PKT_ZSTD_COMPRESSED_PACKETS, "zstd_compressed_packets", K_COMP,
      NULL},
     {ETCH_PKT_FOR_TESTING, "for_testing", K_BYTES, NULL});

/* ---- printing helpers ------------------------------------------------------------------ */

static void indent(FILE *o, int n) {
  for (int i = 0; i < n; i++) fputs("  ", o);
}

static void put_str(FILE *o, const void *s, size_t len) {
  const uint8_t *p = (const uint8_t *)s;
  size_t max = len > 160 ? 160 : len;
  fputc('"', o);
  for (size_t i = 0; i < max; i++) {
    uint8_t c = p[i];
    if (c == '"' || c == '\\')
      fprintf(o, "\\%c", c);
    else if (c == '\n')
      fputs("\\n", o);
    else if (c < 0x20 || c == 0x7f)
      fprintf(o, "\\x%02x", c);
    else
      fputc(c, o);
  }
  fputc('"', o);
  if (max < len) fprintf(o, "...(%zu bytes)", len);
}

static const char *clock_name(uint64_t id) {
  switch (id) {
    case ETCH_CLOCK_REALTIME: return "REALTIME";
    case ETCH_CLOCK_REALTIME_COARSE: return "REALTIME_COARSE";
    case ETCH_CLOCK_MONOTONIC: return "MONOTONIC";
    case ETCH_CLOCK_MONOTONIC_COARSE: return "MONOTONIC_COARSE";
    case ETCH_CLOCK_MONOTONIC_RAW: return "MONOTONIC_RAW";
    case ETCH_CLOCK_BOOTTIME: return "BOOTTIME";
    default:
      return id >= ETCH_CLOCK_SEQ_SCOPED_FIRST &&
                     id <= ETCH_CLOCK_SEQ_SCOPED_LAST
                 ? "sequence-scoped"
                 : NULL;
  }
}

static const char *type_name(uint64_t t) {
  switch (t) {
    case ETCH_TE_TYPE_SLICE_BEGIN: return "SLICE_BEGIN";
    case ETCH_TE_TYPE_SLICE_END: return "SLICE_END";
    case ETCH_TE_TYPE_INSTANT: return "INSTANT";
    case ETCH_TE_TYPE_COUNTER: return "COUNTER";
    default: return "UNSPECIFIED";
  }
}

static void put_flags(FILE *o, uint64_t f) {
  fprintf(o, "%" PRIu64, f);
  if (!f) return;
  fputs(" (", o);
  const char *sep = "";
  if (f & ETCH_SEQ_INCREMENTAL_STATE_CLEARED) {
    fputs("INCREMENTAL_STATE_CLEARED", o);
    sep = "|";
  }
  if (f & ETCH_SEQ_NEEDS_INCREMENTAL_STATE) fprintf(o, "%sNEEDS_INCREMENTAL_STATE", sep);
  fputc(')', o);
}

static bool printable(const uint8_t *p, size_t n) {
  if (!n) return false;
  for (size_t i = 0; i < n && i < 64; i++)
    if (p[i] < 0x20 || p[i] >= 0x7f) return false;
  return true;
}

static const char *wt_str(unsigned wt) {
  switch (wt) {
    case ETCH_PB_VARINT: return "varint";
    case ETCH_PB_FIXED64: return "fixed64";
    case ETCH_PB_LEN: return "bytes";
    case ETCH_PB_FIXED32: return "fixed32";
    default: return "?";
  }
}

static void put_unknown(FILE *o, const etch__pb_field *f) {
  fprintf(o, "field %u: %s ", f->id, wt_str(f->wt));
  if (f->wt == ETCH_PB_LEN) {
    fprintf(o, "[%zu]", f->len);
    if (printable(f->data, f->len)) {
      fputc(' ', o);
      put_str(o, f->data, f->len);
    } else {
      for (size_t i = 0; i < f->len && i < 24; i++)
        fprintf(o, "%s%02x", i ? "" : " ", f->data[i]);
      if (f->len > 24) fputs("...", o);
    }
  } else if (f->wt == ETCH_PB_FIXED64) {
    fprintf(o, "0x%016" PRIx64, f->u);
  } else if (f->wt == ETCH_PB_FIXED32) {
    fprintf(o, "0x%08" PRIx64, f->u);
  } else {
    fprintf(o, "%" PRIu64, f->u);
  }
  fputc('\n', o);
}

/* Prints a message's fields at `ind`; never fails (malformed input noted). */
static void put_msg(FILE *o, const mdef *m, const uint8_t *data, size_t len,
                    int ind, int depth) {
  if (depth > RD_MAX_NESTING) {
    indent(o, ind);
    fputs("... (nested too deep)\n", o);
    return;
  }
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, data, len);
  while (etch__pb_next(&d, &f)) {
    const fdef *fd = NULL;
    for (size_t i = 0; m && i < m->n; i++)
      if (m->f[i].id == f.id) fd = &m->f[i];
    indent(o, ind);
    if (!fd) {
      put_unknown(o, &f);
      continue;
    }
    switch (fd->kind) {
      case K_U:
      case K_I:
      case K_B:
      case K_TYPE:
      case K_FLAGS:
      case K_CLOCK:
        if (f.wt == ETCH_PB_LEN && (fd->kind == K_U || fd->kind == K_I)) {
          /* packed repeated */
          fprintf(o, "%s: [", fd->name);
          const uint8_t *p = f.data, *end = f.data + f.len;
          uint64_t v;
          bool first = true;
          while (p < end && etch__pb_read_varint(&p, end, &v)) {
            fprintf(o, first ? "%" PRIu64 : ", %" PRIu64, v);
            first = false;
          }
          fputs("]\n", o);
          continue;
        }
        if (f.wt != ETCH_PB_VARINT) break;
        fprintf(o, "%s: ", fd->name);
        if (fd->kind == K_I)
          fprintf(o, "%" PRId64, (int64_t)f.u);
        else if (fd->kind == K_B)
          fputs(f.u ? "true" : "false", o);
        else if (fd->kind == K_TYPE)
          fprintf(o, "%s", type_name(f.u));
        else if (fd->kind == K_FLAGS)
          put_flags(o, f.u);
        else if (fd->kind == K_CLOCK && clock_name(f.u))
          fprintf(o, "%" PRIu64 " (%s)", f.u, clock_name(f.u));
        else
          fprintf(o, "%" PRIu64, f.u);
        fputc('\n', o);
        continue;
      case K_D:
      case K_F64:
        if (f.wt == ETCH_PB_LEN) {
          fprintf(o, "%s: [", fd->name);
          for (size_t i = 0; i + 8 <= f.len; i += 8) {
            etch__pb_field e;
            e.u = 0;
            for (int b = 7; b >= 0; b--) e.u = (e.u << 8) | f.data[i + (size_t)b];
            if (fd->kind == K_D)
              fprintf(o, i ? ", %.17g" : "%.17g", etch__pb_field_double(&e));
            else
              fprintf(o, i ? ", %" PRIu64 : "%" PRIu64, e.u);
          }
          fputs("]\n", o);
          continue;
        }
        if (f.wt != ETCH_PB_FIXED64) break;
        if (fd->kind == K_D)
          fprintf(o, "%s: %.17g\n", fd->name, etch__pb_field_double(&f));
        else
          fprintf(o, "%s: %" PRIu64 "\n", fd->name, f.u);
        continue;
      case K_S:
        if (f.wt != ETCH_PB_LEN) break;
        fprintf(o, "%s: ", fd->name);
        put_str(o, f.data, f.len);
        fputc('\n', o);
        continue;
      case K_M:
        if (f.wt != ETCH_PB_LEN) break;
        fprintf(o, "%s {\n", fd->name);
        put_msg(o, fd->sub, f.data, f.len, ind + 1, depth + 1);
        indent(o, ind);
        fputs("}\n", o);
        continue;
      case K_COMP:
        if (f.wt != ETCH_PB_LEN) break;
        fprintf(o, "%s: %zu bytes, expanded below\n", fd->name, f.len);
        continue;
      case K_BYTES:
        if (f.wt != ETCH_PB_LEN) break;
        fprintf(o, "%s: %zu bytes\n", fd->name, f.len);
        continue;
      default:
        break;
    }
    /* Known field, unexpected wire type. */
    fprintf(o, "%s (unexpected wire type) ", fd->name);
    put_unknown(o, &f);
  }
  if (d.err) {
    indent(o, ind);
    fprintf(o, "<malformed at +%zu: %s>\n", d.err_off,
            d.err_msg ? d.err_msg : "?");
  }
}

/* ---- hooks ----------------------------------------------------------------------------- */

static void dump_packet(etch_reader *r, const rd_packet_view *p, void *user) {
  dump_state *ds = (dump_state *)user;
  const rd_src *src = p->src;
  uint64_t rec_off = p->rec_off;
  const uint8_t *pkt = p->pkt;
  size_t len = p->len;
  rd_seq *seq = p->seq;
  uint32_t flags = p->flags;
  bool has_ts = p->has_ts, ts_ok = p->ts_ok, skipped = p->skipped;
  uint64_t raw_ts = p->raw_ts;
  uint32_t clock_id = p->clock_id;
  int64_t ts = p->ts;
  FILE *o = ds->out;
  int ind = ds->depth * 2;
  indent(o, ind);
  fprintf(o, "packet #%" PRIu64 " %soffset %" PRIu64 " (%zu bytes) seq %u",
          r->stats.packets, src->depth ? "decompressed " : "", rec_off, len,
          seq ? seq->id : 0);
  if (flags) {
    fputs(" flags ", o);
    put_flags(o, flags);
  }
  if (has_ts) {
    fprintf(o, " ts %" PRIu64 " clock %u", raw_ts, clock_id);
    if (skipped)
      ;
    else if (ts_ok)
      fprintf(o, " -> %" PRId64, ts);
    else
      fputs(" -> (no clock conversion)", o);
  }
  if (skipped)
    fputs(seq && seq->id ? " SKIPPED: incremental state invalid after data loss"
                         : " SKIPPED: needs incremental state but has no "
                           "sequence id",
          o);
  fputc('\n', o);
  put_msg(o, &m_packet, pkt, len, ind + 1, 0);
}

static void put_value(FILE *o, const etch_arg *a) {
  switch (a->type) {
    case ETCH_VALUE_BOOL: fputs(a->v.b ? "true" : "false", o); break;
    case ETCH_VALUE_INT: fprintf(o, "%" PRId64, a->v.i); break;
    case ETCH_VALUE_UINT: fprintf(o, "%" PRIu64, a->v.u); break;
    case ETCH_VALUE_POINTER: fprintf(o, "0x%" PRIx64, a->v.u); break;
    case ETCH_VALUE_DOUBLE: fprintf(o, "%.17g", a->v.d); break;
    case ETCH_VALUE_STRING:
    case ETCH_VALUE_JSON: put_str(o, a->v.s, strlen(a->v.s)); break;
    default: fputs("null", o); break;
  }
}

static void dump_event(etch_reader *r, const etch_event *ev, void *user) {
  dump_state *ds = (dump_state *)user;
  static const char *const kinds[] = {"global", "process", "thread", "named",
                                      "counter"};
  FILE *o = ds->out;
  rd_track *t = (rd_track *)(uintptr_t)ev->track;
  etch__rd_track_resolve(r, t);
  indent(o, ds->depth * 2 + 1);
  fprintf(o, "=> %s ts %" PRId64 " track %" PRIu64 " (%s \"%s\") pid %d tid %d",
          type_name((uint64_t)ev->type), ev->ts, ev->track->uuid,
          (unsigned)ev->track->kind < 5 ? kinds[ev->track->kind] : "?",
          ev->track->name, t->ev_pid, t->ev_tid);
  if (ev->category[0]) fprintf(o, " cat \"%s\"", ev->category);
  if (ev->name[0]) fprintf(o, " name \"%s\"", ev->name);
  if (ev->type == ETCH_EVENT_COUNTER) {
    if (ev->counter_is_double)
      fprintf(o, " value %.17g", ev->counter_double);
    else
      fprintf(o, " value %" PRId64, ev->counter_int);
  }
  for (size_t i = 0; i < ev->flow_ids_count; i++)
    fprintf(o, " flow %" PRIu64, ev->flow_ids[i]);
  for (size_t i = 0; i < ev->terminating_flow_ids_count; i++)
    fprintf(o, " flow_end %" PRIu64, ev->terminating_flow_ids[i]);
  fputc('\n', o);
  for (size_t i = 0; i < ev->args_count; i++) {
    indent(o, ds->depth * 2 + 2);
    fprintf(o, "%s = ", ev->args[i].key);
    put_value(o, &ev->args[i]);
    fputc('\n', o);
  }
}

static void dump_nest(etch_reader *r, int step, void *user) {
  (void)r;
  ((dump_state *)user)->depth += step;
}

/* ---- dump entry point ---------------------------------------------------------------- */

int etch__reader_dump(const void *data, size_t len, FILE *out) {
  return etch__reader_dump_ex(data, len, out, false, NULL);
}

int etch__reader_dump_ex(const void *data, size_t len, FILE *out,
                         bool allow_truncated, etch_reader_stats *st_out) {
  etch_reader *r;
  int rc = etch_reader_open_memory(&r, data, len);
  if (rc) return rc;
  etch_reader_set_allow_truncated(r, allow_truncated);
  etch_reader_set_strict(r, !allow_truncated);
  dump_state ds = {out, 0};
  const rd_observer obs = {dump_packet, dump_event, dump_nest, &ds};
  r->obs = &obs;
  r->order = ETCH_ORDER_FILE;
  rc = etch_reader_run(r);
  /* An error is the caller's to report (etch print says it once, on
   * stderr); the listing stops where it happened. */
  etch_reader_stats st = r->stats;
  fprintf(out,
          "-- %llu packets, %llu track events, %llu sequences, %llu "
          "compressed, %llu skipped (incremental state lost), %llu "
          "interned data missing\n",
          (unsigned long long)st.packets, (unsigned long long)st.track_events,
          (unsigned long long)st.sequences,
          (unsigned long long)st.compressed_packets,
          (unsigned long long)
              st.packet_skipped_seq_needs_incremental_state_invalid,
          (unsigned long long)st.interned_data_missing);
  if (st.truncated_bytes)
    fprintf(out,
            "-- cut short: the %llu bytes from offset %llu are an incomplete "
            "packet\n",
            (unsigned long long)st.truncated_bytes,
            (unsigned long long)st.truncated_offset);
  if (st.malformed_packets)
    fprintf(out, "-- %llu malformed packets left out; the first: %s\n",
            (unsigned long long)st.malformed_packets,
            etch__reader_malformed_first(r));
  if (st_out) *st_out = st;
  etch_reader_close(r);
  return rc;
}

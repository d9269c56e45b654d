/*
 * trace_config.c - TraceConfig: binary decoding, the text format, encoding.
 * Field numbers and names from protos/perfetto/config/trace_config.proto,
 * data_source_config.proto and track_event/track_event_config.proto.
 */
#include "proto/trace_config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/containers.h"

/* ---- schema ---- */

enum { T_U32, T_U64, T_I32, T_I64, T_BOOL, T_STRING, T_ENUM, T_MSG };
/*
 * What etch does with a field (docs/config.md, "the policy"):
 *   SUPPORTED    run as Perfetto runs it
 *   IGNORED      accepted and dropped: it does not change what is recorded
 *                (what Perfetto's own tools send routinely: guardrails,
 *                statsd and upload settings, uuids, file-writing details)
 *   FORWARDED    a data source's own config: the service does not read it
 *                and passes it on to the producers unchanged
 *   UNSUPPORTED  refused by name: ignoring it would change what is recorded
 */
enum { UNSUPPORTED = 0, SUPPORTED = 1, IGNORED = 2, FORWARDED = 3 };

typedef struct enumval {
  const char *name;
  int value;
} enumval;

typedef struct mdesc mdesc;
typedef struct fdesc {
  const char *name;
  uint32_t num;
  uint8_t type;
  uint8_t support;
  const mdesc *msg;
  const enumval *enums; /* NULL-terminated */
} fdesc;

struct mdesc {
  const char *name;
  const fdesc *fields;
  uint32_t n;
};

static const enumval fill_policies[] = {
    {"UNSPECIFIED", 0}, {"RING_BUFFER", 1}, {"DISCARD", 2}, {NULL, 0}};

static const fdesc buffer_fields[] = {
    {"size_kb", 1, T_U32, SUPPORTED, NULL, NULL},
    {"fill_policy", 4, T_ENUM, SUPPORTED, NULL, fill_policies},
    {"transfer_on_clone", 5, T_BOOL, UNSUPPORTED, NULL, NULL},
    {"clear_before_clone", 6, T_BOOL, UNSUPPORTED, NULL, NULL},
    {"name", 7, T_STRING, SUPPORTED, NULL, NULL},
    {"experimental_mode", 8, T_ENUM, UNSUPPORTED, NULL, NULL},
};
static const mdesc buffer_msg = {"TraceConfig.BufferConfig", buffer_fields, 6};

static const fdesc te_fields[] = {
    {"disabled_categories", 1, T_STRING, SUPPORTED, NULL, NULL},
    {"enabled_categories", 2, T_STRING, SUPPORTED, NULL, NULL},
    {"disabled_tags", 3, T_STRING, SUPPORTED, NULL, NULL},
    {"enabled_tags", 4, T_STRING, SUPPORTED, NULL, NULL},
    {"disable_incremental_timestamps", 5, T_BOOL, UNSUPPORTED, NULL, NULL},
    {"timestamp_unit_multiplier", 6, T_U64, UNSUPPORTED, NULL, NULL},
    {"filter_debug_annotations", 7, T_BOOL, UNSUPPORTED, NULL, NULL},
    {"enable_thread_time_sampling", 8, T_BOOL, UNSUPPORTED, NULL, NULL},
    {"filter_dynamic_event_names", 9, T_BOOL, UNSUPPORTED, NULL, NULL},
    {"thread_time_subsampling_ns", 10, T_U64, UNSUPPORTED, NULL, NULL},
};
static const mdesc te_msg = {"TrackEventConfig", te_fields, 10};

static const enumval console_outputs[] = {{"OUTPUT_UNSPECIFIED", 0},
                                          {"OUTPUT_STDOUT", 1},
                                          {"OUTPUT_STDERR", 2},
                                          {NULL, 0}};

static const fdesc console_fields[] = {
    {"output", 1, T_ENUM, SUPPORTED, NULL, console_outputs},
    {"enable_colors", 2, T_BOOL, SUPPORTED, NULL, NULL},
};
static const mdesc console_msg = {"ConsoleConfig", console_fields, 2};

static const fdesc icpt_fields[] = {
    {"name", 1, T_STRING, SUPPORTED, NULL, NULL},
    {"console_config", 100, T_MSG, SUPPORTED, &console_msg, NULL},
};
static const mdesc icpt_msg = {"InterceptorConfig", icpt_fields, 2};

static const fdesc dsc_fields[] = {
    {"name", 1, T_STRING, SUPPORTED, NULL, NULL},
    {"target_buffer", 2, T_U32, SUPPORTED, NULL, NULL},
    /* Set by the service when it passes the config on; ignored in. */
    {"trace_duration_ms", 3, T_U32, IGNORED, NULL, NULL},
    {"tracing_session_id", 4, T_U64, IGNORED, NULL, NULL},
    {"enable_extra_guardrails", 6, T_BOOL, IGNORED, NULL, NULL},
    {"stop_timeout_ms", 7, T_U32, IGNORED, NULL, NULL},
    {"session_initiator", 8, T_ENUM, IGNORED, NULL, NULL},
    {"buffer_exhausted_policy", 9, T_ENUM, UNSUPPORTED, NULL, NULL},
    {"priority_boost", 10, T_MSG, IGNORED, NULL, NULL},
    {"target_buffer_name", 11, T_STRING, SUPPORTED, NULL, NULL},
    {"protovm_config", 12, T_MSG, UNSUPPORTED, NULL, NULL},
    {"track_event_config", 113, T_MSG, SUPPORTED, &te_msg, NULL},
    {"interceptor_config", 115, T_MSG, SUPPORTED, &icpt_msg, NULL},
    {"prefer_suspend_clock_for_duration", 122, T_BOOL, IGNORED, NULL, NULL},
    /* Every other field from 100 on is a data source's own config (ftrace,
     * chrome, a Perfetto SDK program's custom data source): FORWARDED. */
    {"legacy_config", 1000, T_STRING, FORWARDED, NULL, NULL},
    {"for_testing", 1001, T_MSG, FORWARDED, NULL, NULL},
};
static const mdesc dsc_msg = {"DataSourceConfig", dsc_fields,
                              sizeof dsc_fields / sizeof dsc_fields[0]};

static const fdesc ds_fields[] = {
    {"config", 1, T_MSG, SUPPORTED, &dsc_msg, NULL},
    {"producer_name_filter", 2, T_STRING, SUPPORTED, NULL, NULL},
    {"producer_name_regex_filter", 3, T_STRING, UNSUPPORTED, NULL, NULL},
    {"machine_name_filter", 4, T_STRING, SUPPORTED, NULL, NULL},
};
static const mdesc ds_msg = {"TraceConfig.DataSource", ds_fields, 4};

static const fdesc isc_fields[] = {
    {"clear_period_ms", 1, T_U32, SUPPORTED, NULL, NULL},
};
static const mdesc isc_msg = {"TraceConfig.IncrementalStateConfig",
                              isc_fields, 1};

/* The perfetto command line adds enable_extra_guardrails, statsd_metadata,
 * statsd_logging and the trace uuid to every config it sends (v58), and
 * flush_period_ms, max_file_size_bytes with its short options. */
static const fdesc tc_fields[] = {
    {"buffers", 1, T_MSG, SUPPORTED, &buffer_msg, NULL},
    {"data_sources", 2, T_MSG, SUPPORTED, &ds_msg, NULL},
    {"duration_ms", 3, T_U32, SUPPORTED, NULL, NULL},
    {"enable_extra_guardrails", 4, T_BOOL, IGNORED, NULL, NULL},
    {"lockdown_mode", 5, T_ENUM, UNSUPPORTED, NULL, NULL},
    {"producers", 6, T_MSG, UNSUPPORTED, NULL, NULL},
    {"statsd_metadata", 7, T_MSG, IGNORED, NULL, NULL},
    {"write_into_file", 8, T_BOOL, SUPPORTED, NULL, NULL},
    {"file_write_period_ms", 9, T_U32, SUPPORTED, NULL, NULL},
    {"max_file_size_bytes", 10, T_U64, SUPPORTED, NULL, NULL},
    {"guardrail_overrides", 11, T_MSG, UNSUPPORTED, NULL, NULL},
    {"deferred_start", 12, T_BOOL, SUPPORTED, NULL, NULL},
    {"flush_period_ms", 13, T_U32, SUPPORTED, NULL, NULL},
    {"flush_timeout_ms", 14, T_U32, SUPPORTED, NULL, NULL},
    {"notify_traceur", 16, T_BOOL, IGNORED, NULL, NULL},
    {"trigger_config", 17, T_MSG, UNSUPPORTED, NULL, NULL},
    {"activate_triggers", 18, T_STRING, UNSUPPORTED, NULL, NULL},
    {"allow_user_build_tracing", 19, T_BOOL, IGNORED, NULL, NULL},
    {"builtin_data_sources", 20, T_MSG, UNSUPPORTED, NULL, NULL},
    {"incremental_state_config", 21, T_MSG, SUPPORTED, &isc_msg, NULL},
    {"unique_session_name", 22, T_STRING, SUPPORTED, NULL, NULL},
    {"data_source_stop_timeout_ms", 23, T_U32, SUPPORTED, NULL, NULL},
    {"compression_type", 24, T_ENUM, IGNORED, NULL, NULL},
    {"incident_report_config", 25, T_MSG, IGNORED, NULL, NULL},
    {"trace_uuid_msb", 27, T_I64, IGNORED, NULL, NULL},
    {"trace_uuid_lsb", 28, T_I64, IGNORED, NULL, NULL},
    {"output_path", 29, T_STRING, UNSUPPORTED, NULL, NULL},
    {"bugreport_score", 30, T_I32, IGNORED, NULL, NULL},
    {"statsd_logging", 31, T_ENUM, IGNORED, NULL, NULL},
    {"trace_filter", 33, T_MSG, UNSUPPORTED, NULL, NULL},
    {"android_report_config", 34, T_MSG, IGNORED, NULL, NULL},
    {"cmd_trace_start_delay", 35, T_MSG, IGNORED, NULL, NULL},
    {"prefer_suspend_clock_for_duration", 36, T_BOOL, IGNORED, NULL, NULL},
    {"bugreport_filename", 38, T_STRING, IGNORED, NULL, NULL},
    {"session_semaphores", 39, T_MSG, UNSUPPORTED, NULL, NULL},
    {"priority_boost", 40, T_MSG, IGNORED, NULL, NULL},
    {"exclusive_prio", 41, T_U32, UNSUPPORTED, NULL, NULL},
    {"no_flush_before_write_into_file", 42, T_BOOL, IGNORED, NULL, NULL},
    {"trace_all_machines", 43, T_BOOL, SUPPORTED, NULL, NULL},
    {"write_flush_mode", 44, T_ENUM, IGNORED, NULL, NULL},
    {"fflush_post_write", 45, T_ENUM, IGNORED, NULL, NULL},
    {"compression", 47, T_MSG, IGNORED, NULL, NULL},
    {"trace_attributes", 48, T_MSG, IGNORED, NULL, NULL},
};
static const mdesc tc_msg = {"TraceConfig", tc_fields,
                             sizeof tc_fields / sizeof tc_fields[0]};

static const fdesc *by_num(const mdesc *m, uint32_t num) {
  for (uint32_t i = 0; i < m->n; i++)
    if (m->fields[i].num == num) return &m->fields[i];
  return NULL;
}

static const fdesc *by_name(const mdesc *m, const char *name, size_t len) {
  for (uint32_t i = 0; i < m->n; i++)
    if (strlen(m->fields[i].name) == len &&
        memcmp(m->fields[i].name, name, len) == 0)
      return &m->fields[i];
  return NULL;
}

static int unsupported(const mdesc *m, const fdesc *f) {
  return etch__error(ETCH_EUNSUPPORTED,
                     "option '%s' of %s is not supported by etch", f->name,
                     m->name);
}

/* ---- binary ---- */

static int bad(const mdesc *m, const char *what) {
  return etch__error(ETCH_EFORMAT, "malformed %s: %s", m->name, what);
}

static int copy_name(const mdesc *m, const char *field, char *dst,
                     const etch__pb_field *f) {
  if (f->wt != 2) return bad(m, "a string field is not length-delimited");
  if (f->len >= ETCH_TC_MAX_NAME)
    return etch__error(ETCH_ELIMIT, "%s.%s is longer than %u bytes", m->name,
                       field, ETCH_TC_MAX_NAME - 1);
  if (memchr(f->data, 0, f->len))
    return bad(m, "a string holds a NUL byte");
  /* A name given twice: the last wins, nothing of the first stays. */
  memset(dst, 0, ETCH_TC_MAX_NAME);
  memcpy(dst, f->data, f->len);
  return ETCH_OK;
}

static int list_add(const mdesc *m, const char *field, etch_tc_list *l,
                    const etch__pb_field *f) {
  if (l->n == ETCH_TC_MAX_FILTERS)
    return etch__error(ETCH_ELIMIT, "more than %u entries in %s.%s",
                       ETCH_TC_MAX_FILTERS, m->name, field);
  int rc = copy_name(m, field, l->item[l->n], f);
  if (!rc) l->n++;
  return rc;
}

/* A field the switch did not take: skipped when etch ignores it, else an
 * error naming it. */
static int other(const mdesc *m, const etch__pb_field *f) {
  const fdesc *d = by_num(m, f->id);
  if (d && d->support == IGNORED) return ETCH_OK;
  if (d) return unsupported(m, d);
  return etch__error(ETCH_EUNSUPPORTED,
                     "field %u of %s is not known to etch", f->id, m->name);
}

/* A DataSourceConfig field that is the data source's own: from 100 on (but
 * the two etch reads), or one the schema marks FORWARDED. */
static bool forwarded(uint32_t id) {
  const fdesc *d = by_num(&dsc_msg, id);
  if (d) return d->support == FORWARDED;
  return id >= 100;
}

/* Keeps the field's bytes, tag and all ([tag, end) of the message being
 * walked), to pass on. */
static int forward(etch_tc_source *s, const uint8_t *tag, const uint8_t *end) {
  size_t n = (size_t)(end - tag);
  if (n > ETCH_TC_MAX_FORWARD - s->forward_len)
    return etch__error(ETCH_ELIMIT,
                       "data source '%s': its own config is larger than %u "
                       "bytes", s->name, ETCH_TC_MAX_FORWARD);
  memcpy(s->forward + s->forward_len, tag, n);
  s->forward_len += (uint32_t)n;
  return ETCH_OK;
}

static int want_varint(const mdesc *m, const etch__pb_field *f) {
  return f->wt == 0 ? ETCH_OK : bad(m, "an integer field is not a varint");
}

#define WALK(msg, data, len, body)                                          \
  do {                                                                      \
    etch__pb_dec d_;                                                         \
    etch__pb_field f;                                                        \
    etch__pb_dec_init(&d_, data, len);                                       \
    while (etch__pb_next(&d_, &f)) {                                         \
      int rc_ = ETCH_OK;                                                    \
      body;                                                                 \
      if (rc_) return rc_;                                                  \
    }                                                                       \
    if (d_.err) return bad(msg, d_.err_msg ? d_.err_msg : "bad encoding"); \
  } while (0)

static int decode_te(const uint8_t *p, size_t n, etch_tc_source *s) {
  const mdesc *m = &te_msg;
  WALK(m, p, n, {
    switch (f.id) {
    case 1: rc_ = list_add(m, "disabled_categories", &s->disabled_categories, &f); break;
    case 2: rc_ = list_add(m, "enabled_categories", &s->enabled_categories, &f); break;
    case 3: rc_ = list_add(m, "disabled_tags", &s->disabled_tags, &f); break;
    case 4: rc_ = list_add(m, "enabled_tags", &s->enabled_tags, &f); break;
    default: rc_ = other(m, &f);
    }
  });
  return ETCH_OK;
}

static int decode_console(const uint8_t *p, size_t n, etch_tc_source *s) {
  const mdesc *m = &console_msg;
  WALK(m, p, n, {
    switch (f.id) {
    case 1:
      rc_ = want_varint(m, &f);
      if (!rc_ && f.u > 2)
        rc_ = etch__error(ETCH_EUNSUPPORTED,
                          "output %llu of %s is not known to etch",
                          (unsigned long long)f.u, m->name);
      s->console_output = (uint32_t)f.u;
      break;
    case 2:
      rc_ = want_varint(m, &f);
      s->console_colors = f.u ? 1 : 0;
      break;
    default: rc_ = other(m, &f);
    }
  });
  return ETCH_OK;
}

static int decode_icpt(const uint8_t *p, size_t n, etch_tc_source *s) {
  const mdesc *m = &icpt_msg;
  WALK(m, p, n, {
    switch (f.id) {
    case 1: rc_ = copy_name(m, "name", s->interceptor, &f); break;
    case 100:
      if (f.wt != 2) { rc_ = bad(m, "console_config is not a message"); break; }
      s->has_console_config = true;
      rc_ = decode_console(f.data, f.len, s);
      break;
    default: rc_ = other(m, &f);
    }
  });
  return ETCH_OK;
}

static int decode_dsc(const uint8_t *p, size_t n, etch_tc_source *s) {
  const mdesc *m = &dsc_msg;
  WALK(m, p, n, {
    switch (f.id) {
    case 1: rc_ = copy_name(m, "name", s->name, &f); break;
    case 2:
      rc_ = want_varint(m, &f);
      s->target_buffer = (uint32_t)f.u;
      if (!rc_ && f.u > UINT32_MAX) rc_ = bad(m, "target_buffer too large");
      break;
    case 11:
      rc_ = copy_name(m, "target_buffer_name", s->target_buffer_name, &f);
      break;
    case 113:
      if (f.wt != 2) { rc_ = bad(m, "track_event_config is not a message"); break; }
      s->has_track_event_config = true;
      rc_ = decode_te(f.data, f.len, s);
      break;
    case 115:
      if (f.wt != 2) { rc_ = bad(m, "interceptor_config is not a message"); break; }
      s->has_interceptor_config = true;
      s->console_colors = -1;
      rc_ = decode_icpt(f.data, f.len, s);
      break;
    default:
      rc_ = forwarded(f.id) ? forward(s, d_.start + f.off, d_.p)
                            : other(m, &f);
    }
  });
  return ETCH_OK;
}

static int decode_ds(const uint8_t *p, size_t n, etch_tc_source *s) {
  const mdesc *m = &ds_msg;
  WALK(m, p, n, {
    switch (f.id) {
    case 1:
      if (f.wt != 2) { rc_ = bad(m, "config is not a message"); break; }
      rc_ = decode_dsc(f.data, f.len, s);
      break;
    case 2: rc_ = list_add(m, "producer_name_filter", &s->producer_name_filter, &f); break;
    case 4: rc_ = list_add(m, "machine_name_filter", &s->machine_name_filter, &f); break;
    default: rc_ = other(m, &f);
    }
  });
  return ETCH_OK;
}

static int decode_buffer(const uint8_t *p, size_t n, etch_trace_config *c) {
  const mdesc *m = &buffer_msg;
  uint32_t i = c->nbuffers;
  WALK(m, p, n, {
    switch (f.id) {
    case 1:
      rc_ = want_varint(m, &f);
      if (!rc_ && f.u > UINT32_MAX) rc_ = bad(m, "size_kb too large");
      c->buffers[i].size_kb = (uint32_t)f.u;
      break;
    case 4:
      rc_ = want_varint(m, &f);
      if (!rc_ && f.u > ETCH_TC_FILL_DISCARD)
        rc_ = etch__error(ETCH_EUNSUPPORTED,
                          "fill_policy %llu of %s is not known to etch",
                          (unsigned long long)f.u, m->name);
      c->buffers[i].fill_policy = (uint32_t)f.u;
      break;
    case 7: rc_ = copy_name(m, "name", c->buffers[i].name, &f); break;
    default: rc_ = other(m, &f);
    }
  });
  return ETCH_OK;
}

static int u32_field(const mdesc *m, const etch__pb_field *f, uint32_t *out) {
  int rc = want_varint(m, f);
  if (rc) return rc;
  if (f->u > UINT32_MAX) {
    const fdesc *d = by_num(m, f->id);
    return etch__error(ETCH_EFORMAT, "%s.%s = %llu does not fit 32 bits",
                       m->name, d ? d->name : "?", (unsigned long long)f->u);
  }
  *out = (uint32_t)f->u;
  return ETCH_OK;
}

static int decode_isc(const uint8_t *p, size_t n, etch_trace_config *c) {
  const mdesc *m = &isc_msg;
  WALK(m, p, n, {
    if (f.id == 1) rc_ = u32_field(m, &f, &c->clear_period_ms);
    else rc_ = other(m, &f);
  });
  return ETCH_OK;
}

int etch__trace_config_decode(const uint8_t *data, size_t len,
                              etch_trace_config *c) {
  memset(c, 0, sizeof *c);
  const mdesc *m = &tc_msg;
  WALK(m, data, len, {
    switch (f.id) {
    case 1:
      if (f.wt != 2) { rc_ = bad(m, "buffers is not a message"); break; }
      if (c->nbuffers == ETCH_TC_MAX_BUFFERS) {
        rc_ = etch__error(ETCH_ELIMIT, "more than %u buffers",
                          ETCH_TC_MAX_BUFFERS);
        break;
      }
      rc_ = decode_buffer(f.data, f.len, c);
      if (!rc_) c->nbuffers++;
      break;
    case 2:
      if (f.wt != 2) { rc_ = bad(m, "data_sources is not a message"); break; }
      if (c->nsources == ETCH_TC_MAX_SOURCES) {
        rc_ = etch__error(ETCH_ELIMIT, "more than %u data sources",
                          ETCH_TC_MAX_SOURCES);
        break;
      }
      rc_ = decode_ds(f.data, f.len, &c->sources[c->nsources]);
      if (!rc_) c->nsources++;
      break;
    case 3: rc_ = u32_field(m, &f, &c->duration_ms); break;
    case 8: rc_ = want_varint(m, &f); c->write_into_file = f.u != 0; break;
    case 9: rc_ = u32_field(m, &f, &c->file_write_period_ms); break;
    case 10: rc_ = want_varint(m, &f); c->max_file_size_bytes = f.u; break;
    case 12: rc_ = want_varint(m, &f); c->deferred_start = f.u != 0; break;
    case 13: rc_ = u32_field(m, &f, &c->flush_period_ms); break;
    case 14: rc_ = u32_field(m, &f, &c->flush_timeout_ms); break;
    case 21:
      if (f.wt != 2) { rc_ = bad(m, "incremental_state_config is not a message"); break; }
      rc_ = decode_isc(f.data, f.len, c);
      break;
    case 22: rc_ = copy_name(m, "unique_session_name", c->unique_session_name, &f); break;
    case 23: rc_ = u32_field(m, &f, &c->data_source_stop_timeout_ms); break;
    case 43: rc_ = want_varint(m, &f); c->trace_all_machines = f.u != 0; break;
    default: rc_ = other(m, &f);
    }
  });
  /* target_buffer_name names a buffer (buffers may come after). */
  for (uint32_t i = 0; i < c->nsources; i++) {
    etch_tc_source *s = &c->sources[i];
    if (!s->target_buffer_name[0]) continue;
    uint32_t k = 0;
    while (k < c->nbuffers && strcmp(c->buffers[k].name, s->target_buffer_name))
      k++;
    if (k == c->nbuffers)
      return etch__error(ETCH_ECONFIG,
                         "data source '%s': no buffer is named '%s'", s->name,
                         s->target_buffer_name);
    s->target_buffer = k;
  }
  return ETCH_OK;
}

int etch__trace_config_check(const etch_trace_config *c) {
  if (c->nbuffers == 0)
    return etch__error(ETCH_ECONFIG, "the config has no buffers");
  for (uint32_t i = 0; i < c->nbuffers; i++)
    if (c->buffers[i].size_kb == 0)
      return etch__error(ETCH_ECONFIG, "buffer %u has size_kb 0", i);
  for (uint32_t i = 0; i < c->nsources; i++) {
    const etch_tc_source *s = &c->sources[i];
    if (!s->name[0])
      return etch__error(ETCH_ECONFIG, "data source %u has no name", i);
    if (s->has_interceptor_config && !s->interceptor[0])
      return etch__error(ETCH_ECONFIG,
                         "data source '%s': interceptor_config has no name",
                         s->name);
    if (s->target_buffer >= c->nbuffers)
      return etch__error(ETCH_ECONFIG,
                         "data source '%s' targets buffer %u but the config "
                         "has %u",
                         s->name, s->target_buffer, c->nbuffers);
  }
  return ETCH_OK;
}

/* ---- encoding ---- */

void etch__tc_put_interceptor(etch__pb_stream *s, const etch_tc_source *d) {
  etch__pb_nested i, c;
  etch__pb_nested_begin(s, 115, &i);
  etch__pb_write_string_field(s, 1, d->interceptor);
  if (d->has_console_config) {
    etch__pb_nested_begin(s, 100, &c);
    if (d->console_output) etch__pb_write_varint_field(s, 1, d->console_output);
    if (d->console_colors >= 0)
      etch__pb_write_varint_field(s, 2, (uint64_t)d->console_colors);
    etch__pb_nested_end(s, &c);
  }
  etch__pb_nested_end(s, &i);
}

static void put_list(etch__pb_stream *s, uint32_t field, const etch_tc_list *l) {
  for (uint32_t i = 0; i < l->n; i++)
    etch__pb_write_string_field(s, field, l->item[i]);
}

void etch__tc_put_source_body(etch__pb_stream *s, const etch_tc_source *d) {
  etch__pb_nested t;
  if (d->target_buffer_name[0])
    etch__pb_write_string_field(s, 11, d->target_buffer_name);
  if (d->has_track_event_config) {
    etch__pb_nested_begin(s, 113, &t);
    put_list(s, 1, &d->disabled_categories);
    put_list(s, 2, &d->enabled_categories);
    put_list(s, 3, &d->disabled_tags);
    put_list(s, 4, &d->enabled_tags);
    etch__pb_nested_end(s, &t);
  }
  if (d->has_interceptor_config) etch__tc_put_interceptor(s, d);
  etch__pb_write_bytes(s, d->forward, d->forward_len);
}

void etch__trace_config_encode(const etch_trace_config *c, etch__pb_buf *out) {
  etch__pb_stream *s = &out->s;
  etch__pb_nested a, b;
  for (uint32_t i = 0; i < c->nbuffers; i++) {
    etch__pb_nested_begin(s, 1, &a);
    etch__pb_write_varint_field(s, 1, c->buffers[i].size_kb);
    if (c->buffers[i].fill_policy)
      etch__pb_write_varint_field(s, 4, c->buffers[i].fill_policy);
    if (c->buffers[i].name[0])
      etch__pb_write_string_field(s, 7, c->buffers[i].name);
    etch__pb_nested_end(s, &a);
  }
  for (uint32_t i = 0; i < c->nsources; i++) {
    const etch_tc_source *d = &c->sources[i];
    etch__pb_nested_begin(s, 2, &a);
    etch__pb_nested_begin(s, 1, &b);
    etch__pb_write_string_field(s, 1, d->name);
    etch__pb_write_varint_field(s, 2, d->target_buffer);
    etch__tc_put_source_body(s, d);
    etch__pb_nested_end(s, &b);
    put_list(s, 2, &d->producer_name_filter);
    put_list(s, 4, &d->machine_name_filter);
    etch__pb_nested_end(s, &a);
  }
  if (c->duration_ms) etch__pb_write_varint_field(s, 3, c->duration_ms);
  if (c->write_into_file) etch__pb_write_varint_field(s, 8, 1);
  if (c->file_write_period_ms)
    etch__pb_write_varint_field(s, 9, c->file_write_period_ms);
  if (c->max_file_size_bytes)
    etch__pb_write_varint_field(s, 10, c->max_file_size_bytes);
  if (c->deferred_start) etch__pb_write_varint_field(s, 12, 1);
  if (c->flush_period_ms) etch__pb_write_varint_field(s, 13, c->flush_period_ms);
  if (c->flush_timeout_ms)
    etch__pb_write_varint_field(s, 14, c->flush_timeout_ms);
  if (c->clear_period_ms) {
    etch__pb_nested_begin(s, 21, &a);
    etch__pb_write_varint_field(s, 1, c->clear_period_ms);
    etch__pb_nested_end(s, &a);
  }
  if (c->unique_session_name[0])
    etch__pb_write_string_field(s, 22, c->unique_session_name);
  if (c->data_source_stop_timeout_ms)
    etch__pb_write_varint_field(s, 23, c->data_source_stop_timeout_ms);
  if (c->trace_all_machines) etch__pb_write_varint_field(s, 43, 1);
}

/* ---- text format ---- */

typedef struct lex {
  const char *p, *end, *start;
  int line;
  etch_vec sbuf; /* the decoded string, its NUL included */
} lex;

static int lerr(const lex *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int lerr(const lex *l, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return etch__error(ETCH_ECONFIG, "line %d: %s", l->line, msg);
}

static void skip_space(lex *l) {
  while (l->p < l->end) {
    char ch = *l->p;
    if (ch == '\n') {
      l->line++;
      l->p++;
    } else if (isspace((unsigned char)ch)) {
      l->p++;
    } else if (ch == '#') {
      while (l->p < l->end && *l->p != '\n') l->p++;
    } else {
      break;
    }
  }
}

static bool is_ident(char ch) {
  return isalnum((unsigned char)ch) || ch == '_' || ch == '.' || ch == '-' ||
         ch == '+';
}

/* A bare token (name, number, enum value, bool): [p, p+*n). */
static const char *token(lex *l, size_t *n) {
  const char *t = l->p;
  while (l->p < l->end && is_ident(*l->p)) l->p++;
  *n = (size_t)(l->p - t);
  return t;
}

static int sput(lex *l, char ch) {
  return etch__vec_push(&l->sbuf, &ch, 1);
}

/* A quoted string (adjacent ones concatenate), decoded into l->sbuf. */
static int qstring(lex *l) {
  l->sbuf.len = 0;
  while (l->p < l->end && (*l->p == '"' || *l->p == '\'')) {
    char q = *l->p++;
    for (;;) {
      if (l->p >= l->end || *l->p == '\n')
        return lerr(l, "unterminated string");
      char ch = *l->p++;
      if (ch == q) break;
      if (ch == '\\') {
        if (l->p >= l->end) return lerr(l, "unterminated string");
        char e = *l->p++;
        switch (e) {
        case 'n': ch = '\n'; break;
        case 't': ch = '\t'; break;
        case 'r': ch = '\r'; break;
        case '\\': case '"': case '\'': ch = e; break;
        case 'x': {
          int v = 0, k = 0;
          while (k < 2 && l->p < l->end && isxdigit((unsigned char)*l->p)) {
            char h = *l->p++;
            v = v * 16 + (isdigit((unsigned char)h) ? h - '0' : (tolower((unsigned char)h) - 'a' + 10));
            k++;
          }
          if (!k) return lerr(l, "bad \\x escape");
          ch = (char)v;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            int v = e - '0', k = 1;
            while (k < 3 && l->p < l->end && *l->p >= '0' && *l->p <= '7') {
              v = v * 8 + (*l->p++ - '0');
              k++;
            }
            ch = (char)v;
          } else {
            char b[2] = {e, 0};
            return lerr(l, "unknown escape \\%s", b);
          }
        }
      }
      int rc = sput(l, ch);
      if (rc) return rc;
    }
    skip_space(l);
  }
  return sput(l, 0) ? ETCH_ENOMEM : ETCH_OK;
}

static int parse_uint(const char *t, size_t n, uint64_t max, uint64_t *out) {
  if (n == 0 || n > 20) return -1;
  char b[24];
  memcpy(b, t, n);
  b[n] = 0;
  char *e;
  int base = (n > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X')) ? 16 : 10;
  if (!isdigit((unsigned char)b[0])) return -1;
  unsigned long long v = strtoull(b, &e, base);
  if (*e || v > max) return -1;
  *out = v;
  return 0;
}

static int parse_msg(lex *l, const mdesc *m, etch__pb_stream *s, char close,
                     int depth);

/* Reads past the value of an option etch ignores: a token, a string or a
 * message in braces (its contents only checked for balance and strings). */
static int skip_value(lex *l, const fdesc *f) {
  if (l->p < l->end && (*l->p == '"' || *l->p == '\''))
    return qstring(l);
  if (l->p < l->end && (*l->p == '{' || *l->p == '<')) {
    int depth = 0;
    while (l->p < l->end) {
      char ch = *l->p;
      if (ch == '"' || ch == '\'') {
        int rc = qstring(l);
        if (rc) return rc;
        continue;
      }
      if (ch == '#') {
        skip_space(l);
        continue;
      }
      if (ch == '\n') l->line++;
      l->p++;
      if (ch == '{' || ch == '<') depth++;
      if ((ch == '}' || ch == '>') && --depth == 0) return ETCH_OK;
      if (depth > 16) return lerr(l, "nesting too deep");
    }
    return lerr(l, "missing '}' at the end of '%s'", f->name);
  }
  size_t n;
  token(l, &n);
  if (n == 0) return lerr(l, "'%s' has no value", f->name);
  return ETCH_OK;
}

static int parse_field(lex *l, const fdesc *f, etch__pb_stream *s,
                       int depth) {
  if (f->support == IGNORED) return skip_value(l, f);
  if (f->type == T_MSG && !f->msg)
    return lerr(l, "etch's text format does not know the fields of '%s' "
                "(give the config in binary)", f->name);
  if (f->type == T_MSG) {
    if (l->p < l->end && (*l->p == '{' || *l->p == '<')) {
      char close = *l->p == '{' ? '}' : '>';
      l->p++;
      etch__pb_nested n;
      etch__pb_nested_begin(s, f->num, &n);
      int rc = parse_msg(l, f->msg, s, close, depth + 1);
      etch__pb_nested_end(s, &n);
      return rc;
    }
    return lerr(l, "'%s' is a message: expected '{'", f->name);
  }
  if (f->type == T_STRING) {
    if (l->p >= l->end || (*l->p != '"' && *l->p != '\''))
      return lerr(l, "'%s' takes a quoted string", f->name);
    int rc = qstring(l);
    if (rc) return rc;
    etch__pb_write_bytes_field(s, f->num, l->sbuf.data, l->sbuf.len - 1);
    return ETCH_OK;
  }
  size_t n;
  const char *t = token(l, &n);
  char shown[64];
  snprintf(shown, sizeof shown, "%.*s", (int)(n < 60 ? n : 60), t);
  uint64_t v = 0;
  switch (f->type) {
  case T_BOOL:
    if (n == 4 && !memcmp(t, "true", 4)) v = 1;
    else if (n == 5 && !memcmp(t, "false", 5)) v = 0;
    else if (parse_uint(t, n, 1, &v) != 0)
      return lerr(l, "'%s' takes true or false, not '%s'", f->name, shown);
    break;
  case T_ENUM: {
    bool found = false;
    for (const enumval *e = f->enums; e && e->name; e++)
      if (strlen(e->name) == n && !memcmp(e->name, t, n)) {
        v = (uint64_t)e->value;
        found = true;
      }
    uint64_t max = f->enums ? 0 : 0x7fffffff;
    for (const enumval *e = f->enums; e && e->name; e++)
      if ((uint64_t)e->value > max) max = (uint64_t)e->value;
    if (!found && parse_uint(t, n, max, &v) != 0)
      return lerr(l, "'%s' is not a value of '%s'", shown, f->name);
    break;
  }
  case T_U32:
    if (parse_uint(t, n, UINT32_MAX, &v) != 0)
      return lerr(l, "'%s' takes an unsigned 32-bit number, not '%s'",
                  f->name, shown);
    break;
  default: /* T_U64 (the signed ones are all unsupported) */
    if (parse_uint(t, n, UINT64_MAX, &v) != 0)
      return lerr(l, "'%s' takes an unsigned number, not '%s'", f->name,
                  shown);
    break;
  }
  etch__pb_write_varint_field(s, f->num, v);
  return ETCH_OK;
}

static int parse_msg(lex *l, const mdesc *m, etch__pb_stream *s, char close,
                     int depth) {
  if (depth > 16) return lerr(l, "nesting too deep");
  for (;;) {
    skip_space(l);
    if (l->p >= l->end) {
      if (close) {
        char b[2] = {close, 0};
        return lerr(l, "missing '%s' at the end of the text", b);
      }
      return ETCH_OK;
    }
    if (*l->p == close && close) {
      l->p++;
      return ETCH_OK;
    }
    size_t n;
    const char *name = token(l, &n);
    if (n == 0) {
      char b[2] = {*l->p, 0};
      return lerr(l, "unexpected '%s'", b);
    }
    char shown[80];
    snprintf(shown, sizeof shown, "%.*s", (int)(n < 76 ? n : 76), name);
    const fdesc *f = by_name(m, name, n);
    if (!f) return lerr(l, "unknown option '%s' in %s", shown, m->name);
    if (f->support == UNSUPPORTED)
      return etch__error(ETCH_EUNSUPPORTED,
                         "line %d: option '%s' of %s is not supported by etch",
                         l->line, f->name, m->name);
    skip_space(l);
    bool colon = l->p < l->end && *l->p == ':';
    if (colon) {
      l->p++;
      skip_space(l);
    } else if (f->type != T_MSG) {
      return lerr(l, "expected ':' after '%s'", shown);
    }
    if (l->p < l->end && *l->p == '[') { /* a list of values */
      l->p++;
      for (;;) {
        skip_space(l);
        if (l->p < l->end && *l->p == ']') {
          l->p++;
          break;
        }
        int rc = parse_field(l, f, s, depth);
        if (rc) return rc;
        skip_space(l);
        if (l->p < l->end && *l->p == ',') l->p++;
        else if (l->p >= l->end || *l->p != ']')
          return lerr(l, "expected ',' or ']' in the list of '%s'", shown);
      }
    } else {
      int rc = parse_field(l, f, s, depth);
      if (rc) return rc;
    }
    skip_space(l);
    if (l->p < l->end && (*l->p == ';' || *l->p == ',')) l->p++;
  }
}

int etch__trace_config_text_to_binary(const char *text, size_t len,
                                      etch__pb_buf *out) {
  lex l = {.p = text, .end = text + len, .start = text, .line = 1};
  int rc = parse_msg(&l, &tc_msg, &out->s, 0, 0);
  etch__vec_free(&l.sbuf);
  if (!rc && out->s.failed)
    rc = etch__error(ETCH_ENOMEM, "config too large to encode");
  return rc;
}

int etch__trace_config_parse_text(const char *text, size_t len,
                                  etch_trace_config *out) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 1024, 16u << 20);
  int rc = etch__trace_config_text_to_binary(text, len, &b);
  if (!rc) rc = etch__trace_config_decode(etch__pb_buf_data(&b),
                                          etch__pb_buf_len(&b), out);
  etch__pb_buf_free(&b);
  return rc;
}

/*
 * trace_config.h - Perfetto's TraceConfig (protos/perfetto/config/
 * trace_config.proto), the subset etch's service runs: buffers (size and
 * fill policy), data sources (name, target buffer, producer name filter,
 * the track_event config's category and tag filters), duration, deferred
 * start, write into file (period, size limit), flush period and timeouts,
 * the incremental state's clear period and a unique session name.
 *
 * Two ways in: the binary message (what a consumer sends in EnableTracing)
 * and Perfetto's text format (what `perfetto --txt -c` and `etch record
 * --config` read). Both refuse what etch would not honour: an option that
 * would change what is recorded if etch ignored it, or a field it does not
 * know, is an error that names it, never silently dropped. Options that do
 * not change the recording (what Perfetto's own command line adds to every
 * config: guardrails, statsd settings, the trace uuid) are accepted and
 * ignored; a data source's own config (DataSourceConfig fields from 100 on)
 * is kept as it came and passed on to the producers. docs/config.md has
 * the list. One way out: the binary message, as etch's consumer sends it.
 */
#ifndef ETCH_PROTO_TRACE_CONFIG_H
#define ETCH_PROTO_TRACE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pb/pb.h"

#define ETCH_TC_MAX_BUFFERS 16u
#define ETCH_TC_MAX_SOURCES 32u
#define ETCH_TC_MAX_FILTERS 64u /* per list */
#define ETCH_TC_MAX_NAME 128u   /* bytes of a name or pattern, with the NUL */
#define ETCH_TC_MAX_FORWARD 8192u /* bytes of a data source's own config */

enum {
  ETCH_TC_FILL_UNSPECIFIED = 0,
  ETCH_TC_FILL_RING = 1,
  ETCH_TC_FILL_DISCARD = 2,
};

typedef struct etch_tc_list {
  uint32_t n;
  char item[ETCH_TC_MAX_FILTERS][ETCH_TC_MAX_NAME];
} etch_tc_list;

typedef struct etch_tc_source {
  char name[ETCH_TC_MAX_NAME];
  uint32_t target_buffer;
  /* target_buffer_name: the buffer of that name (resolved into
   * target_buffer by the decoder). */
  char target_buffer_name[ETCH_TC_MAX_NAME];
  etch_tc_list producer_name_filter;
  /* Only producers of a machine of one of these names (etchd's own is its
   * PERFETTO_MACHINE_NAME, else its uname's sysname, as traced). */
  etch_tc_list machine_name_filter;
  bool has_track_event_config;
  etch_tc_list enabled_categories, disabled_categories;
  etch_tc_list enabled_tags, disabled_tags;
  /* interceptor_config: the packets go to this interceptor in the
   * producer instead of the buffer (console_config for "console"). */
  bool has_interceptor_config;
  char interceptor[ETCH_TC_MAX_NAME];
  bool has_console_config;
  uint32_t console_output; /* 0 unspecified, 1 stdout, 2 stderr */
  int console_colors;      /* -1 unset, 0, 1 */
  /* The DataSourceConfig's fields that are the data source's own (field
   * numbers from 100 on but track_event_config and interceptor_config:
   * ftrace_config, chrome_config, a custom data source's config, ...),
   * encoded as they came, in order: the service does not read them and
   * passes them on to the producers unchanged. */
  uint32_t forward_len;
  uint8_t forward[ETCH_TC_MAX_FORWARD];
} etch_tc_source;

typedef struct etch_trace_config {
  uint32_t nbuffers;
  struct {
    uint32_t size_kb;
    uint32_t fill_policy; /* ETCH_TC_FILL_* */
    char name[ETCH_TC_MAX_NAME]; /* for target_buffer_name, may be empty */
  } buffers[ETCH_TC_MAX_BUFFERS];
  uint32_t nsources;
  etch_tc_source sources[ETCH_TC_MAX_SOURCES];
  uint32_t duration_ms;
  bool deferred_start;
  bool write_into_file;
  uint32_t file_write_period_ms;
  uint64_t max_file_size_bytes;
  uint32_t flush_period_ms;
  uint32_t flush_timeout_ms;
  uint32_t data_source_stop_timeout_ms;
  uint32_t clear_period_ms; /* incremental_state_config */
  char unique_session_name[ETCH_TC_MAX_NAME];
  /* Producers of other machines (relayed, or over the network) record
   * too; without it only the host's do. */
  bool trace_all_machines;
} etch_trace_config;

/* Decodes a binary TraceConfig into *out (heap-sized: ~0.5 MB); ETCH_EFORMAT
 * for bytes that are not one, ETCH_EUNSUPPORTED naming the field etch does
 * not run, ETCH_ELIMIT past the limits above. */
int etch__trace_config_decode(const uint8_t *data, size_t len,
                              etch_trace_config *out);
/* Parses the text format into the binary message (appended to out);
 * ETCH_ECONFIG with "line L: ..." for text that is not a TraceConfig,
 * ETCH_EUNSUPPORTED naming an option etch does not support. */
int etch__trace_config_text_to_binary(const char *text, size_t len,
                                      etch__pb_buf *out);
/* Both steps: text to *out. */
int etch__trace_config_parse_text(const char *text, size_t len,
                                  etch_trace_config *out);
/* Appends the binary TraceConfig for *c to out. */
void etch__trace_config_encode(const etch_trace_config *c, etch__pb_buf *out);
/* The fields of source d's DataSourceConfig that a producer gets as they
 * were configured: the track_event and interceptor configs and the data
 * source's own (forwarded) fields; the service adds name, target buffer
 * and what it fills in itself. */
void etch__tc_put_source_body(etch__pb_stream *s, const etch_tc_source *d);
/* A source's InterceptorConfig as DataSourceConfig field 115. */
void etch__tc_put_interceptor(etch__pb_stream *s, const etch_tc_source *d);
/* Checks what the decoders cannot: at least one buffer, sizes, every data
 * source's target buffer within the buffers. ETCH_ECONFIG naming it. */
int etch__trace_config_check(const etch_trace_config *c);

#endif /* ETCH_PROTO_TRACE_CONFIG_H */

/*
 * trace_config_test.c - Perfetto's TraceConfig in binary and text form:
 * every supported option read exactly, what etch does not run refused by
 * name, and encoding that decodes back to the same config.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "proto/trace_config.h"
#include "test.h"

static const char full[] =
    "# a config as the perfetto command line takes it\n"
    "buffers { size_kb: 1024 fill_policy: DISCARD }\n"
    "buffers: { size_kb: 64; fill_policy: RING_BUFFER }\n"
    "data_sources {\n"
    "  config {\n"
    "    name: \"track_event\"\n"
    "    target_buffer: 1\n"
    "    track_event_config {\n"
    "      enabled_categories: \"render\"\n"
    "      enabled_categories: [\"io\", 'net*']\n"
    "      disabled_categories: \"*\"\n"
    "      enabled_tags: \"slow\"\n"
    "      disabled_tags: \"debug\"\n"
    "    }\n"
    "    interceptor_config { name: \"console\"\n"
    "      console_config { output: OUTPUT_STDERR enable_colors: true } }\n"
    "  }\n"
    "  producer_name_filter: \"game\"\n"
    "  machine_name_filter: \"board1\"\n"
    "  machine_name_filter: \"vm2\"\n"
    "}\n"
    "data_sources < config < name: \"other\" > >\n"
    "duration_ms: 10000  # ten seconds\n"
    "deferred_start: false\n"
    "write_into_file: true\n"
    "file_write_period_ms: 2500\n"
    "max_file_size_bytes: 0x40000000\n"
    "flush_period_ms: 1000\n"
    "flush_timeout_ms: 3000\n"
    "data_source_stop_timeout_ms: 700\n"
    "incremental_state_config { clear_period_ms: 5000 }\n"
    "unique_session_name: \"a\\\"b\" \"c\"\n"
    "allow_user_build_tracing: true\n"
    "trace_all_machines: true\n";

static etch_trace_config *cfg(void) {
  etch_trace_config *c = malloc(sizeof *c);
  ASSERT_TRUE(c != NULL);
  return c;
}

static void check_full(const etch_trace_config *c) {
  ASSERT_EQ_INT((int)c->nbuffers, 2);
  ASSERT_EQ_INT((int)c->buffers[0].size_kb, 1024);
  ASSERT_EQ_INT((int)c->buffers[0].fill_policy, ETCH_TC_FILL_DISCARD);
  ASSERT_EQ_INT((int)c->buffers[1].size_kb, 64);
  ASSERT_EQ_INT((int)c->buffers[1].fill_policy, ETCH_TC_FILL_RING);
  ASSERT_EQ_INT((int)c->nsources, 2);
  const etch_tc_source *s = &c->sources[0];
  ASSERT_EQ_STR(s->name, "track_event");
  ASSERT_EQ_INT((int)s->target_buffer, 1);
  ASSERT_TRUE(s->has_track_event_config);
  ASSERT_EQ_INT((int)s->enabled_categories.n, 3);
  ASSERT_EQ_STR(s->enabled_categories.item[0], "render");
  ASSERT_EQ_STR(s->enabled_categories.item[1], "io");
  ASSERT_EQ_STR(s->enabled_categories.item[2], "net*");
  ASSERT_EQ_INT((int)s->disabled_categories.n, 1);
  ASSERT_EQ_STR(s->disabled_categories.item[0], "*");
  ASSERT_EQ_STR(s->enabled_tags.item[0], "slow");
  ASSERT_EQ_STR(s->disabled_tags.item[0], "debug");
  ASSERT_EQ_INT((int)s->producer_name_filter.n, 1);
  ASSERT_EQ_STR(s->producer_name_filter.item[0], "game");
  ASSERT_EQ_INT((int)s->machine_name_filter.n, 2);
  ASSERT_EQ_STR(s->machine_name_filter.item[0], "board1");
  ASSERT_EQ_STR(s->machine_name_filter.item[1], "vm2");
  ASSERT_EQ_INT((int)c->sources[1].machine_name_filter.n, 0);
  ASSERT_TRUE(c->trace_all_machines);
  ASSERT_TRUE(s->has_interceptor_config);
  ASSERT_EQ_STR(s->interceptor, "console");
  ASSERT_TRUE(s->has_console_config);
  ASSERT_EQ_INT((int)s->console_output, 2);
  ASSERT_EQ_INT(s->console_colors, 1);
  ASSERT_FALSE(c->sources[1].has_interceptor_config);
  ASSERT_EQ_STR(c->sources[1].name, "other");
  ASSERT_FALSE(c->sources[1].has_track_event_config);
  ASSERT_EQ_INT((int)c->sources[1].target_buffer, 0);
  ASSERT_EQ_INT((int)c->duration_ms, 10000);
  ASSERT_FALSE(c->deferred_start);
  ASSERT_TRUE(c->write_into_file);
  ASSERT_EQ_INT((int)c->file_write_period_ms, 2500);
  ASSERT_EQ_U64(c->max_file_size_bytes, 1ull << 30);
  ASSERT_EQ_INT((int)c->flush_period_ms, 1000);
  ASSERT_EQ_INT((int)c->flush_timeout_ms, 3000);
  ASSERT_EQ_INT((int)c->data_source_stop_timeout_ms, 700);
  ASSERT_EQ_INT((int)c->clear_period_ms, 5000);
  ASSERT_EQ_STR(c->unique_session_name, "a\"bc");
}

TEST(text_format_every_supported_option) {
  etch_trace_config *c = cfg();
  ASSERT_OK(etch__trace_config_parse_text(full, strlen(full), c));
  check_full(c);
  ASSERT_OK(etch__trace_config_check(c));
  free(c);
}

TEST(encoding_decodes_to_the_same_config) {
  etch_trace_config *c = cfg(), *d = cfg();
  ASSERT_OK(etch__trace_config_parse_text(full, strlen(full), c));
  etch__pb_buf b;
  etch__pb_buf_init(&b, 256, 0);
  etch__trace_config_encode(c, &b);
  ASSERT_OK(etch__trace_config_decode(etch__pb_buf_data(&b),
                                      etch__pb_buf_len(&b), d));
  check_full(d);
  ASSERT_TRUE(memcmp(c, d, sizeof *c) == 0);
  etch__pb_buf_free(&b);
  free(c);
  free(d);
}

/* The text's binary form carries the fields by Perfetto's numbers: the
 * first bytes of a one-buffer config are buffers (1) { size_kb (1) }. */
TEST(text_becomes_perfettos_field_numbers) {
  const char *t = "buffers { size_kb: 300 } duration_ms: 2";
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  ASSERT_OK(etch__trace_config_text_to_binary(t, strlen(t), &b));
  const uint8_t *p = etch__pb_buf_data(&b);
  size_t n = etch__pb_buf_len(&b);
  /* 0a <len> 08 ac 02 ... 18 02 */
  ASSERT_EQ_INT(p[0], 0x0a);
  ASSERT_TRUE(n >= 4);
  ASSERT_EQ_INT(p[n - 2], 0x18);
  ASSERT_EQ_INT(p[n - 1], 0x02);
  ASSERT_TRUE(memmem(p, n, "\x08\xac\x02", 3) != NULL);
  etch__pb_buf_free(&b);
}

static void text_error(const char *text, int want, const char *msg) {
  etch_trace_config *c = cfg();
  int rc = etch__trace_config_parse_text(text, strlen(text), c);
  free(c);
  if (rc != want)
    FAIL("'%s': got %d, want %d (%s)", text, rc, want, etch_last_error());
  if (!strstr(etch_last_error(), msg))
    FAIL("'%s': message '%s' does not say '%s'", text, etch_last_error(), msg);
}

TEST(text_errors_name_the_option_and_line) {
  text_error("buffers { size_kb: 1 }\nbogus: 3", ETCH_ECONFIG,
             "line 2: unknown option 'bogus' in TraceConfig");
  text_error("trigger_config { trigger_timeout_ms: 5 }", ETCH_EUNSUPPORTED,
             "option 'trigger_config' of TraceConfig is not supported");
  text_error("data_sources { config { name: \"x\" "
             "buffer_exhausted_policy: 1 } }",
             ETCH_EUNSUPPORTED, "option 'buffer_exhausted_policy' of "
             "DataSourceConfig is not supported");
  text_error("exclusive_prio: 3", ETCH_EUNSUPPORTED,
             "option 'exclusive_prio' of TraceConfig is not supported");
  text_error("data_sources { config { track_event_config { "
             "filter_debug_annotations: true } } }", ETCH_EUNSUPPORTED,
             "option 'filter_debug_annotations' of TrackEventConfig");
  text_error("data_sources { config { for_testing { } } }", ETCH_ECONFIG,
             "does not know the fields of 'for_testing'");
  text_error("statsd_metadata { triggering_alert_id: 1 ", ETCH_ECONFIG,
             "missing '}' at the end of 'statsd_metadata'");
  text_error("data_sources { config { ftrace_config { } } }", ETCH_ECONFIG,
             "unknown option 'ftrace_config' in DataSourceConfig");
  text_error("buffers { size_kb: -4 }", ETCH_ECONFIG,
             "'size_kb' takes an unsigned 32-bit number, not '-4'");
  text_error("buffers { size_kb: 4294967296 }", ETCH_ECONFIG, "32-bit");
  text_error("buffers { fill_policy: SOMETIMES }", ETCH_ECONFIG,
             "'SOMETIMES' is not a value of 'fill_policy'");
  text_error("write_into_file: maybe", ETCH_ECONFIG, "true or false");
  text_error("unique_session_name: \"abc\n\"", ETCH_ECONFIG,
             "unterminated string");
  text_error("unique_session_name: abc", ETCH_ECONFIG, "quoted string");
  text_error("buffers { size_kb: 1", ETCH_ECONFIG, "missing '}'");
  text_error("buffers: 3", ETCH_ECONFIG, "is a message");
  text_error("duration_ms 3", ETCH_ECONFIG, "expected ':'");
  text_error("} ", ETCH_ECONFIG, "unexpected '}'");
  text_error("buffers { buffers { } }", ETCH_ECONFIG,
             "unknown option 'buffers' in TraceConfig.BufferConfig");
}

TEST(check_finds_what_decoding_cannot) {
  etch_trace_config *c = cfg();
  ASSERT_OK(etch__trace_config_parse_text("duration_ms: 1", 14, c));
  ASSERT_EQ_INT(etch__trace_config_check(c), ETCH_ECONFIG);
  ASSERT_TRUE(strstr(etch_last_error(), "no buffers") != NULL);
  const char *t = "buffers { size_kb: 8 } data_sources { config { name: "
                  "\"track_event\" target_buffer: 1 } }";
  ASSERT_OK(etch__trace_config_parse_text(t, strlen(t), c));
  ASSERT_EQ_INT(etch__trace_config_check(c), ETCH_ECONFIG);
  ASSERT_TRUE(strstr(etch_last_error(),
                     "'track_event' targets buffer 1 but the config has 1") !=
              NULL);
  t = "buffers { size_kb: 8 } data_sources { config { name: \"x\" "
      "interceptor_config { } } }";
  ASSERT_OK(etch__trace_config_parse_text(t, strlen(t), c));
  ASSERT_EQ_INT(etch__trace_config_check(c), ETCH_ECONFIG);
  ASSERT_TRUE(strstr(etch_last_error(),
                     "'x': interceptor_config has no name") != NULL);
  t = "buffers { } data_sources { config { } }";
  ASSERT_OK(etch__trace_config_parse_text(t, strlen(t), c));
  ASSERT_EQ_INT(etch__trace_config_check(c), ETCH_ECONFIG);
  ASSERT_TRUE(strstr(etch_last_error(), "size_kb 0") != NULL);
  free(c);
}

static void binary_error(const uint8_t *p, size_t n, int want,
                         const char *msg) {
  etch_trace_config *c = cfg();
  int rc = etch__trace_config_decode(p, n, c);
  free(c);
  if (rc != want) FAIL("got %d, want %d (%s)", rc, want, etch_last_error());
  if (!strstr(etch_last_error(), msg))
    FAIL("message '%s' does not say '%s'", etch_last_error(), msg);
}

TEST(binary_errors) {
  /* data_sources { config { interceptor_config { console_config {
   * output: 7 } } } } */
  binary_error((const uint8_t *)"\x12\x0a\x0a\x08\x9a\x07\x05\xa2\x06\x02\x08\x07",
               12, ETCH_EUNSUPPORTED, "output 7 of ConsoleConfig is not known");
  /* field 17 (trigger_config), empty */
  binary_error((const uint8_t *)"\x8a\x01\x00", 3, ETCH_EUNSUPPORTED,
               "'trigger_config' of TraceConfig is not supported");
  /* field 99, a varint etch has never heard of */
  binary_error((const uint8_t *)"\x98\x06\x01", 3, ETCH_EUNSUPPORTED,
               "field 99 of TraceConfig is not known to etch");
  /* duration_ms as a string */
  binary_error((const uint8_t *)"\x1a\x01x", 3, ETCH_EFORMAT, "not a varint");
  /* buffers { fill_policy: 7 } */
  binary_error((const uint8_t *)"\x0a\x02\x20\x07", 4, ETCH_EUNSUPPORTED,
               "fill_policy 7");
  /* a length past the end */
  binary_error((const uint8_t *)"\x0a\x09\x08", 3, ETCH_EFORMAT,
               "malformed TraceConfig");
  /* a data source name with a NUL in it */
  binary_error((const uint8_t *)"\x12\x05\x0a\x03\x0a\x01\x00", 7,
               ETCH_EFORMAT, "NUL");
  /* 17 buffers */
  uint8_t many[17 * 4];
  for (int i = 0; i < 17; i++) memcpy(many + 4 * i, "\x0a\x02\x08\x01", 4);
  binary_error(many, sizeof many, ETCH_ELIMIT, "more than 16 buffers");
  /* Fields etch ignores on purpose are accepted: trace_uuid_msb (27). */
  etch_trace_config *c = cfg();
  ASSERT_OK(etch__trace_config_decode((const uint8_t *)"\xd8\x01\x05", 3, c));
  free(c);
}

/* A field given twice: the last value wins and nothing of the first stays
 * (the fuzzer found a longer first name's tail left after the second). */
TEST(the_last_of_a_repeated_field_wins) {
  const char *t = "data_sources { config { name: \"track_event\" "
                  "name: \"abc\" target_buffer: 3 target_buffer: 0 } } "
                  "buffers { size_kb: 1 }";
  etch_trace_config *c = cfg(), *d = cfg();
  ASSERT_OK(etch__trace_config_parse_text(t, strlen(t), c));
  ASSERT_EQ_STR(c->sources[0].name, "abc");
  ASSERT_EQ_INT((int)c->sources[0].target_buffer, 0);
  ASSERT_EQ_INT(c->sources[0].name[4], 0);
  ASSERT_EQ_INT(c->sources[0].name[7], 0);
  etch__pb_buf b;
  etch__pb_buf_init(&b, 256, 0);
  etch__trace_config_encode(c, &b);
  ASSERT_OK(etch__trace_config_decode(etch__pb_buf_data(&b),
                                      etch__pb_buf_len(&b), d));
  ASSERT_TRUE(memcmp(c, d, sizeof *c) == 0);
  etch__pb_buf_free(&b);
  free(c);
  free(d);
}

/* What Perfetto's `perfetto` command line (v58) sends, as it sent it to a
 * recording socket: `--txt -c` of a track_event config adds
 * enable_extra_guardrails, statsd_metadata, statsd_logging and the trace
 * uuid; `-t 2s -s 8mb` adds flush_period_ms and max_file_size_bytes (and
 * the data sources linux.process_stats and linux.system_info); an
 * --add-attribute adds trace_attributes. All accepted; what etch runs is
 * read exactly. */
TEST(what_the_perfetto_command_line_sends_is_accepted) {
  static const uint8_t txt_c[] = {
      0x0a, 0x06, 0x08, 0x80, 0x80, 0x02, 0x20, 0x02, 0x12, 0x0f, 0x0a, 0x0d,
      0x0a, 0x0b, 0x74, 0x72, 0x61, 0x63, 0x6b, 0x5f, 0x65, 0x76, 0x65, 0x6e,
      0x74, 0x18, 0xa0, 0x1f, 0x20, 0x00, 0x3a, 0x00, 0xf8, 0x01, 0x02, 0xd8,
      0x01, 0xc1, 0x95, 0xf1, 0x9d, 0xc5, 0xe9, 0x82, 0x93, 0x11, 0xe0, 0x01,
      0x97, 0x90, 0x99, 0xb3, 0xe5, 0x86, 0xea, 0xca, 0x4b,
  };
  etch_trace_config *c = cfg();
  ASSERT_OK(etch__trace_config_decode(txt_c, sizeof txt_c, c));
  ASSERT_OK(etch__trace_config_check(c));
  ASSERT_EQ_INT((int)c->nbuffers, 1);
  ASSERT_EQ_INT((int)c->buffers[0].size_kb, 32768);
  ASSERT_EQ_INT((int)c->buffers[0].fill_policy, ETCH_TC_FILL_DISCARD);
  ASSERT_EQ_STR(c->sources[0].name, "track_event");
  ASSERT_EQ_INT((int)c->duration_ms, 4000);
  /* -t 2s -s 8mb --add-attribute foo=bar: data sources
   * linux.process_stats and linux.system_info, write_into_file 1,
   * max_file_size_bytes 8 MiB, flush_period_ms 30000, trace_attributes */
  static const uint8_t short_form[] = {
      0x0a, 0x04, 0x08, 0x80, 0x80, 0x02, 0x12, 0x19, 0x0a, 0x17, 0x0a, 0x13,
      0x6c, 0x69, 0x6e, 0x75, 0x78, 0x2e, 0x70, 0x72, 0x6f, 0x63, 0x65, 0x73,
      0x73, 0x5f, 0x73, 0x74, 0x61, 0x74, 0x73, 0x10, 0x00, 0x12, 0x17, 0x0a,
      0x15, 0x0a, 0x11, 0x6c, 0x69, 0x6e, 0x75, 0x78, 0x2e, 0x73, 0x79, 0x73,
      0x74, 0x65, 0x6d, 0x5f, 0x69, 0x6e, 0x66, 0x6f, 0x10, 0x00, 0x18, 0xd0,
      0x0f, 0x20, 0x00, 0x3a, 0x00, 0x40, 0x01, 0x50, 0x80, 0x80, 0x80, 0x04,
      0x68, 0xb0, 0xea, 0x01, 0xf8, 0x01, 0x02, 0xd8, 0x01, 0xf0, 0xc7, 0xc4,
      0x9e, 0xfd, 0xd7, 0x9e, 0xde, 0xfd, 0x01, 0xe0, 0x01, 0xcf, 0xb7, 0xa4,
      0xc1, 0xa3, 0xef, 0xeb, 0xd0, 0x25, 0x82, 0x03, 0x0c, 0x0a, 0x0a, 0x0a,
      0x03, 0x66, 0x6f, 0x6f, 0x1a, 0x03, 0x62, 0x61, 0x72,
  };
  ASSERT_OK(etch__trace_config_decode(short_form, sizeof short_form, c));
  ASSERT_TRUE(c->write_into_file);
  ASSERT_EQ_U64(c->max_file_size_bytes, 8u << 20);
  ASSERT_EQ_INT((int)c->flush_period_ms, 30000);
  ASSERT_EQ_INT((int)c->duration_ms, 2000);
  ASSERT_EQ_INT((int)c->nsources, 2);
  ASSERT_EQ_STR(c->sources[1].name, "linux.system_info");
  ASSERT_OK(etch__trace_config_check(c));
  /* The same options in the text format: read past, nothing encoded. */
  const char *t =
      "buffers { size_kb: 64 }\n"
      "enable_extra_guardrails: true\n"
      "statsd_metadata { triggering_alert_id: -3 triggering_config_id: 7 }\n"
      "statsd_logging: STATSD_LOGGING_DISABLED\n"
      "trace_uuid_msb: -5 trace_uuid_lsb: 6\n"
      "trace_attributes { attributes { key: \"a}\" str_value: \"{b\" } }\n"
      "compression_type: COMPRESSION_TYPE_DEFLATE\n";
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  ASSERT_OK(etch__trace_config_text_to_binary(t, strlen(t), &b));
  /* buffers { size_kb: 64 } (its length in 4 bytes), nothing else */
  static const uint8_t want[] = {0x0a, 0x82, 0x80, 0x80, 0x00, 0x08, 0x40};
  ASSERT_EQ_INT((int)etch__pb_buf_len(&b), (int)sizeof want);
  ASSERT_TRUE(memcmp(etch__pb_buf_data(&b), want, sizeof want) == 0);
  etch__pb_buf_free(&b);
  free(c);
}

/* A data source's own config (here ftrace_config, 100, and chrome_config,
 * 101) is kept byte for byte, in order, and encoded again as it came; a
 * buffer named by target_buffer_name is the target. */
TEST(a_data_sources_own_config_is_passed_on) {
  static const uint8_t in[] = {
      0x0a, 0x04, 0x08, 0x01, 0x3a, 0x00,             /* buffers (unnamed) */
      0x0a, 0x07, 0x08, 0x02, 0x3a, 0x03, 'b', 'i', 'g', /* buffers "big" */
      0x12, 0x1c, 0x0a, 0x1a,
      0x0a, 0x01, 'x',                                /* name "x" */
      0xa2, 0x06, 0x04, 0x0a, 0x02, 's', 's',         /* 100 { 1: "ss" } */
      0x5a, 0x03, 'b', 'i', 'g',                      /* target_buffer_name */
      0xaa, 0x06, 0x05, 0x12, 0x03, '{', '}', ' ',    /* 101 { 2: "{} " } */
      0x98, 0x3f, 0x09,                               /* 1011: 9 */
  };
  etch_trace_config *c = cfg(), *d = cfg();
  ASSERT_OK(etch__trace_config_decode(in, sizeof in, c));
  ASSERT_OK(etch__trace_config_check(c));
  ASSERT_EQ_STR(c->buffers[1].name, "big");
  ASSERT_EQ_INT((int)c->sources[0].target_buffer, 1);
  static const uint8_t fwd[] = {0xa2, 0x06, 0x04, 0x0a, 0x02, 's', 's',
                                0xaa, 0x06, 0x05, 0x12, 0x03, '{', '}', ' ',
                                0x98, 0x3f, 0x09};
  ASSERT_EQ_INT((int)c->sources[0].forward_len, (int)sizeof fwd);
  ASSERT_TRUE(memcmp(c->sources[0].forward, fwd, sizeof fwd) == 0);
  etch__pb_buf b;
  etch__pb_buf_init(&b, 256, 0);
  etch__trace_config_encode(c, &b);
  ASSERT_OK(etch__trace_config_decode(etch__pb_buf_data(&b),
                                      etch__pb_buf_len(&b), d));
  ASSERT_TRUE(memcmp(c, d, sizeof *c) == 0);
  etch__pb_buf_free(&b);
  /* A name no buffer has. */
  const char *t = "buffers { size_kb: 4 name: \"a\" } data_sources { config { "
                  "name: \"x\" target_buffer_name: \"b\" } }";
  ASSERT_EQ_INT(etch__trace_config_parse_text(t, strlen(t), c), ETCH_ECONFIG);
  ASSERT_TRUE(strstr(etch_last_error(), "no buffer is named 'b'") != NULL);
  /* A field under 100 etch does not know is still an error. */
  binary_error((const uint8_t *)"\x12\x04\x0a\x02\x48\x01", 6,
               ETCH_EUNSUPPORTED, "'buffer_exhausted_policy'");
  binary_error((const uint8_t *)"\x12\x05\x0a\x03\xf8\x03\x01", 7,
               ETCH_EUNSUPPORTED, "field 63 of DataSourceConfig");
  free(c);
  free(d);
}

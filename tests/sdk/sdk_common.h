/*
 * sdk_common.h - helpers shared by the SDK tests: start a session from a
 * config string, read its trace back, keep a copy for the protobuf check,
 * and decode it with the independent test decoder.
 */
#ifndef ETCH_TESTS_SDK_COMMON_H
#define ETCH_TESTS_SDK_COMMON_H

#include <etch/etch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tdecode.h"
#include "test.h"

/* Writes a copy of a trace into $ETCH_TEST_OUT (checked by protoc later). */
static inline void save_trace(const char *name, const uint8_t *d, size_t n) {
  const char *dir = getenv("ETCH_TEST_OUT");
  if (!dir || !*dir) return;
  char path[512];
  snprintf(path, sizeof path, "%s/%s.pftrace", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fwrite(d, 1, n, f);
  fclose(f);
}

static inline etch_session *start_session(const char *config) {
  etch_config *cfg;
  ASSERT_OK(etch_config_new(&cfg));
  if (config) ASSERT_OK(etch_config_parse(cfg, config));
  etch_session *s;
  ASSERT_OK(etch_session_new(cfg, &s));
  etch_config_free(cfg);
  ASSERT_OK(etch_session_start(s));
  return s;
}

/* Reads the session's trace, saves it as `name`, decodes it and checks it
 * is complete: every iid resolved, nothing skipped, every packet on a
 * sequence. */
static inline void read_trace(etch_session *s, const char *name, td_trace *t) {
  uint8_t *data;
  size_t len;
  ASSERT_OK(etch_session_read(s, &data, &len));
  save_trace(name, data, len);
  if (td_decode(data, len, t) != 0) FAIL("trace %s: %s", name, t->error);
  etch_free(data);
  ASSERT_EQ_U64(t->unresolved, 0);
  ASSERT_EQ_U64(t->skipped, 0);
  ASSERT_EQ_U64(t->no_seq_id, 0);
}

#endif

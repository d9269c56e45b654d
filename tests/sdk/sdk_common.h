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


typedef struct td_tv {
  uint64_t ts;
  double v;
} td_tv;

static inline int td_cmp_tv(const void *a, const void *b) {
  const td_tv *x = (const td_tv *)a, *y = (const td_tv *)b;
  return (x->ts > y->ts) - (x->ts < y->ts);
}

/*
 * The values recorded on the counter track named `name`, in time order:
 * the first `cap` into out, the last into *last (either may be NULL), the
 * track into *track. Two values at the same time fail the test (etch
 * stamps each change of a declared or live-bytes counter after the last).
 */
static inline size_t counter_values(const td_trace *t, const char *name,
                                    double *out, size_t cap, double *last,
                                    const td_track **track) {
  td_tv *all = (td_tv *)malloc((t->nev + 1) * sizeof *all);
  ASSERT_TRUE(all != NULL);
  size_t n = 0;
  *track = NULL;
  for (size_t i = 0; i < t->nev; i++) {
    const td_event *e = &t->ev[i];
    if (e->type != 4) continue;
    const td_track *k = td_track_of(t, e->track);
    if (!k || !k->name || strcmp(k->name, name) != 0) continue;
    *track = k;
    all[n].ts = e->ts;
    all[n++].v = e->counter_is_double ? e->counter_d : (double)e->counter_i;
  }
  qsort(all, n, sizeof *all, td_cmp_tv);
  for (size_t i = 0; i < n; i++) {
    if (i && all[i].ts == all[i - 1].ts)
      FAIL("%s: values %zu and %zu at the same time", name, i - 1, i);
    if (out && i < cap) out[i] = all[i].v;
  }
  if (last && n) *last = all[n - 1].v;
  free(all);
  return n;
}

#endif

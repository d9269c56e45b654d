/*
 * reader_sdk_test.c - traces written by libetch itself, read back by the
 * reader: names, categories, args, flows, counters, threads, timestamps in
 * BOOTTIME, with and without deflate, and no data-loss stats.
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <etch/reader.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "test.h"

ETCH_CATEGORY_DEFINE(render, "render", "Rendering", "");
ETCH_CATEGORY_DEFINE(io, "io", "I/O", "");

typedef struct seen {
  char text[8192];
  size_t len;
  int64_t min_ts, max_ts, last_ts;
  int32_t pid, main_tid, other_tid;
  size_t main_events, other_events, scoped;
  bool order_ok;
  char cmdline[4096]; /* of the process track */
  int processes;
} seen;

static void on_track(const etch_track_info *t, void *user) {
  seen *s = (seen *)user;
  if (t->kind != ETCH_TRACK_PROCESS) return;
  s->processes++;
  snprintf(s->cmdline, sizeof s->cmdline, "%s", t->cmdline);
}

/* /proc/self/cmdline with its NULs turned into spaces: what the process
 * track's cmdline must read. */
static void own_cmdline(char *out, size_t cap) {
  FILE *f = fopen("/proc/self/cmdline", "rb");
  ASSERT_TRUE(f != NULL);
  size_t n = fread(out, 1, cap - 1, f);
  fclose(f);
  while (n && out[n - 1] == '\0') n--;
  for (size_t i = 0; i < n; i++)
    if (out[i] == '\0') out[i] = ' ';
  out[n] = '\0';
}

static void on_event(const etch_event *ev, void *user) {
  seen *s = (seen *)user;
  if (ev->ts < s->min_ts) s->min_ts = ev->ts;
  if (ev->ts > s->max_ts) s->max_ts = ev->ts;
  if (ev->ts < s->last_ts) s->order_ok = false;
  s->last_ts = ev->ts;
  if (ev->pid != s->pid) s->order_ok = false;
  if (ev->tid == s->main_tid) s->main_events++;
  if (ev->tid == s->other_tid) {
    /* The other thread's 500 scopes: counted, not listed. */
    s->other_events++;
    if (strcmp(ev->name, "scoped") == 0) s->scoped++;
    return;
  }
  s->len += (size_t)snprintf(s->text + s->len, sizeof s->text - s->len,
                             "%c %s/%s", "?BEIC"[ev->type], ev->category,
                             ev->name);
  if (ev->type == ETCH_EVENT_COUNTER)
    s->len += (size_t)snprintf(s->text + s->len, sizeof s->text - s->len,
                               " =%lld", (long long)ev->counter_int);
  for (size_t i = 0; i < ev->flow_ids_count; i++)
    s->len += (size_t)snprintf(s->text + s->len, sizeof s->text - s->len,
                               " flow %llu", (unsigned long long)ev->flow_ids[i]);
  for (size_t i = 0; i < ev->args_count; i++) {
    const etch_arg *a = &ev->args[i];
    s->len += (size_t)snprintf(s->text + s->len, sizeof s->text - s->len,
                               " %s=", a->key);
    if (a->type == ETCH_VALUE_STRING)
      s->len += (size_t)snprintf(s->text + s->len, sizeof s->text - s->len,
                                 "%s", a->v.s);
    else
      s->len += (size_t)snprintf(s->text + s->len, sizeof s->text - s->len,
                                 "%lld", (long long)a->v.i);
  }
  s->len += (size_t)snprintf(s->text + s->len, sizeof s->text - s->len, "\n");
}

static void *other_thread(void *arg) {
  *(int32_t *)arg = (int32_t)gettid();
  for (int i = 0; i < 500; i++) {
    ETCH_SCOPE(io, "scoped");
  }
  return NULL;
}

static void record(const char *config, uint8_t **data, size_t *len,
                   int64_t *t0, int64_t *t1, int32_t *other_tid) {
  etch_config *cfg;
  ASSERT_OK(etch_config_new(&cfg));
  ASSERT_OK(etch_config_parse(cfg, config));
  etch_session *s;
  ASSERT_OK(etch_session_new(cfg, &s));
  etch_config_free(cfg);
  *t0 = (int64_t)etch_now();
  ASSERT_OK(etch_session_start(s));
  ETCH_SLICE_BEGIN(render, "frame", ETCH_ARG_INT("n", 1), ETCH_FLOW(5));
  ETCH_INSTANT(io, "read", ETCH_ARG_STRING("path", "/x"));
  ETCH_COUNTER(render, "queue", 3);
  ETCH_SLICE_END(render);
  pthread_t th;
  pthread_create(&th, NULL, other_thread, other_tid);
  pthread_join(th, NULL);
  ETCH_INSTANT(render, "late", ETCH_FLOW_END(5));
  ASSERT_OK(etch_session_stop(s));
  *t1 = (int64_t)etch_now();
  ASSERT_OK(etch_session_read(s, data, len));
  etch_session_free(s);
}

static void check(const char *config) {
  uint8_t *data;
  size_t len;
  int64_t t0, t1;
  int32_t other = 0;
  record(config, &data, &len, &t0, &t1, &other);
  for (int order = 0; order < 2; order++) {
    seen s;
    memset(&s, 0, sizeof s);
    s.min_ts = INT64_MAX;
    s.max_ts = INT64_MIN;
    s.last_ts = INT64_MIN;
    s.pid = (int32_t)getpid();
    s.main_tid = (int32_t)gettid();
    s.other_tid = other;
    s.order_ok = true;
    etch_reader *r;
    ASSERT_OK(etch_reader_open_memory(&r, data, len));
    ASSERT_OK(etch_reader_set_order(r, (etch_reader_order)order));
    ASSERT_OK(etch_reader_on(r, NULL, NULL, on_event, &s));
    ASSERT_OK(etch_reader_on_track(r, on_track, &s));
    ASSERT_OK(etch_reader_run(r));
    etch_reader_stats st;
    etch_reader_get_stats(r, &st);
    etch_reader_close(r);
    if (order == ETCH_ORDER_TIMESTAMP) ASSERT_TRUE(s.order_ok);
    ASSERT_EQ_STR(s.text,
                  "B render/frame flow 5 debug.n=1\n"
                  "I io/read debug.path=/x\n"
                  "C render/queue =3\n"
                  "E /\n"
                  "I render/late\n");
    ASSERT_EQ_U64(s.scoped, 500);
    ASSERT_EQ_U64(s.main_events, 4); /* the counter is on a process track */
    ASSERT_EQ_U64(s.other_events, 1000);
    ASSERT_TRUE(s.min_ts >= t0);
    ASSERT_TRUE(s.max_ts <= t1);
    ASSERT_EQ_U64(st.packet_skipped_seq_needs_incremental_state_invalid, 0);
    ASSERT_EQ_U64(st.interned_data_missing, 0);
    ASSERT_EQ_U64(st.unknown_track, 0);
    ASSERT_EQ_U64(st.misplaced_end_event, 0);
    ASSERT_EQ_U64(st.clock_conversion_failed, 0);
    ASSERT_EQ_U64(st.packet_sequence_id_missing, 0);
    ASSERT_EQ_U64(st.previous_packet_dropped, 0);
    ASSERT_EQ_U64(st.track_events, 1005);
    char want[4096];
    own_cmdline(want, sizeof want);
    ASSERT_TRUE(s.processes >= 1);
    ASSERT_TRUE(want[0] != '\0');
    ASSERT_EQ_STR(s.cmdline, want);
  }
  free(data);
}

TEST(reader_sdk_uncompressed) { check("categories=render,io;compression=none"); }
TEST(reader_sdk_deflate) { check("categories=render,io"); }

/* ---- a deflate trace cut short ------------------------------------------------ */

typedef struct ticks {
  uint8_t *seen; /* seen[i]: tick i was read */
  size_t n, count, dup;
} ticks;

static void on_tick(const etch_event *ev, void *user) {
  ticks *t = (ticks *)user;
  if (strcmp(ev->name, "tick") != 0 || ev->args_count != 1) return;
  uint64_t i = (uint64_t)ev->args[0].v.i;
  if (i >= t->n) return;
  if (t->seen[i]) t->dup++;
  t->seen[i] = 1;
  t->count++;
}

/* The ticks a reader finds in the first `len` bytes of `data`, truncated
 * reading allowed; how many, and that they are 0..count-1 exactly. */
static size_t read_ticks(const uint8_t *data, size_t len, size_t n,
                         uint64_t *truncated_at) {
  ticks t = {.seen = (uint8_t *)calloc(n, 1), .n = n};
  ASSERT_TRUE(t.seen != NULL);
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, data, len));
  ASSERT_OK(etch_reader_set_allow_truncated(r, 1));
  ASSERT_OK(etch_reader_on(r, "io", "tick", on_tick, &t));
  ASSERT_OK(etch_reader_run(r));
  etch_reader_stats st;
  etch_reader_get_stats(r, &st);
  etch_reader_close(r);
  *truncated_at = st.truncated_bytes ? st.truncated_offset : len;
  ASSERT_EQ_U64(t.dup, 0);
  for (size_t i = 0; i < t.count; i++) ASSERT_TRUE(t.seen[i]);
  free(t.seen);
  return t.count;
}

static uint64_t varint(const uint8_t **p, const uint8_t *end) {
  uint64_t v = 0;
  for (int shift = 0; *p < end && shift < 64; shift += 7) {
    uint8_t b = *(*p)++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
  }
  return v;
}

/* The uncompressed size of a top-level packet that is only
 * compressed_packets (50); 0 for any other packet. */
static size_t inflated_size(const uint8_t *pkt, size_t len) {
  const uint8_t *p = pkt, *end = pkt + len;
  if (varint(&p, end) != ((50u << 3) | 2)) return 0;
  size_t zlen = (size_t)varint(&p, end);
  ASSERT_EQ_U64(zlen, (size_t)(end - p));
  size_t cap = 4u << 20;
  uint8_t *out = (uint8_t *)malloc(cap);
  ASSERT_TRUE(out != NULL);
  uLongf n = (uLongf)cap;
  ASSERT_EQ_INT(uncompress(out, &n, p, (uLong)zlen), Z_OK);
  free(out);
  return (size_t)n;
}

/*
 * A deflate trace of many events cut at the start, middle and end of each
 * of its top-level packets and read with truncation allowed: every event
 * of every whole packet before the cut is read, exactly as when the file
 * ends at that packet's end. The trace is many compressed pieces, none
 * holding more than 256 KiB of records (Perfetto's readers take pieces
 * under 512 KiB).
 */
TEST(reader_sdk_deflate_cut_short_keeps_whole_pieces) {
  enum { N = 200000 };
  etch_config *cfg;
  ASSERT_OK(etch_config_new(&cfg));
  ASSERT_OK(etch_config_parse(cfg, "categories=io;buffer_kb=65536;fill=discard"));
  etch_session *s;
  ASSERT_OK(etch_session_new(cfg, &s));
  etch_config_free(cfg);
  ASSERT_OK(etch_session_start(s));
  for (int i = 0; i < N; i++) ETCH_INSTANT(io, "tick", ETCH_ARG_INT("i", i));
  ASSERT_OK(etch_session_stop(s));
  uint8_t *data;
  size_t len;
  ASSERT_OK(etch_session_read(s, &data, &len));
  etch_session_free(s);
  uint64_t at;
  ASSERT_EQ_U64(read_ticks(data, len, N, &at), N);
  ASSERT_EQ_U64(at, len);
  /* The top-level packets: where each ends, how much each inflates to. */
  size_t bounds[4096], nb = 0, off = 0, npieces = 0;
  while (off < len) {
    ASSERT_TRUE(nb < 4096);
    ASSERT_EQ_INT(data[off], 0x0A);
    const uint8_t *p = data + off + 1;
    size_t plen = (size_t)varint(&p, data + len);
    size_t inflated = inflated_size(p, plen);
    if (inflated) npieces++;
    ASSERT_TRUE(inflated <= 256u * 1024u);
    off = (size_t)(p - data) + plen;
    bounds[nb++] = off;
  }
  ASSERT_EQ_U64(off, len);
  ASSERT_TRUE(npieces >= 8);
  size_t before = 0; /* ticks in the packets before packet i */
  for (size_t i = 0; i < nb; i++) {
    size_t start = i ? bounds[i - 1] : 0;
    size_t whole = read_ticks(data, start, N, &at);
    ASSERT_EQ_U64(at, start);
    ASSERT_TRUE(whole >= before);
    before = whole;
    size_t cuts[3] = {start + 1, start + (bounds[i] - start) / 2, bounds[i] - 1};
    for (int c = 0; c < 3; c++) {
      if (cuts[c] <= start || cuts[c] >= bounds[i]) continue;
      ASSERT_EQ_U64(read_ticks(data, cuts[c], N, &at), whole);
      ASSERT_EQ_U64(at, start);
    }
  }
  ASSERT_EQ_U64(read_ticks(data, bounds[nb - 1], N, &at), N);
  free(data);
}

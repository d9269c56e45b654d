/*
 * custom_test.c - custom events (etch/event.h) recorded by libetch and read
 * back both by the independent test decoder and by the reader's analyzer
 * API: every field type, schemas, channels, important events, serials.
 */
#include <etch/reader.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <unistd.h>

#include "custom_tu.h"
#include "sdk_common.h"

#include <sys/syscall.h>

static int32_t etch__test_gettid(void) { return (int32_t)syscall(SYS_gettid); }

ETCH_CHANNEL_DEFINE(ChanA, "ChanA");
ETCH_CHANNEL_DEFINE(ChanB, "ChanB");
ETCH_CATEGORY_DEFINE(plain, "plain", "", "");

#define ALL_FIELDS(F)     \
  F(int8, i8)             \
  F(int16, i16)           \
  F(int32, i32)           \
  F(int64, i64)           \
  F(uint8, u8)            \
  F(uint16, u16)          \
  F(uint32, u32)          \
  F(uint64, u64)          \
  F(float, f32)           \
  F(double, f64)          \
  F(bool, flag)           \
  F(str, text)            \
  F(str, cut)             \
  F(wstr, wide)           \
  F(u16str, utf16)        \
  F(int8_array, a_i8)     \
  F(int16_array, a_i16)   \
  F(int32_array, a_i32)   \
  F(int64_array, a_i64)   \
  F(uint8_array, a_u8)    \
  F(uint16_array, a_u16)  \
  F(uint32_array, a_u32)  \
  F(uint64_array, a_u64)  \
  F(float_array, a_f32)   \
  F(double_array, a_f64)  \
  F(uint8_array, empty)   \
  F(double_array, large)  \
  F(int32, never)
ETCH_EVENT_DECLARE(T, All, ALL_FIELDS);
ETCH_EVENT_DEFINE(T, All, ALL_FIELDS, 0);

#define SMALL_FIELDS(F) F(uint32, n) F(str, tag) F(double, x)
ETCH_EVENT_DECLARE(T, Small, SMALL_FIELDS);
ETCH_EVENT_DEFINE(T, Small, SMALL_FIELDS, 0);

#define SETTING_FIELDS(F) F(str, key) F(int64, value)
ETCH_EVENT_DECLARE(T, Setting, SETTING_FIELDS);
ETCH_EVENT_DEFINE(T, Setting, SETTING_FIELDS, ETCH_EVENT_IMPORTANT);

#define JOB_FIELDS(F) F(uint32, thread) F(uint32, i)
ETCH_EVENT_DECLARE(T, Job, JOB_FIELDS);
ETCH_EVENT_DEFINE(T, Job, JOB_FIELDS, ETCH_EVENT_SERIAL);

ETCH_EVENT_DEFINE(Tu, Shared, SHARED_FIELDS, 0);

#define EMPTY_FIELDS(F)
ETCH_EVENT_DECLARE(Other, Ping, EMPTY_FIELDS);
ETCH_EVENT_DEFINE(Other, Ping, EMPTY_FIELDS, 0);

/* ---- reading routed events back -------------------------------------------- */

typedef void (*check_fn)(const etch_custom_event *ev, void *user);

typedef struct routed {
  size_t n;
  uint32_t routes[64];
  char names[64][32];
  int64_t vals[64]; /* field "n" / "value" / "i", whichever the event has */
  int32_t tids[64];
  int64_t ts[64];
  check_fn check;
  void *check_user;
  size_t stop_after; /* 0: never */
} routed;

static void on_routed(const etch_custom_event *ev, void *user) {
  routed *r = (routed *)user;
  if (r->check) r->check(ev, r->check_user);
  if (r->n < 64) {
    r->routes[r->n] = ev->route;
    snprintf(r->names[r->n], sizeof r->names[0], "%s", ev->name);
    int64_t v = etch_event_get_i64(ev, "n");
    if (etch_event_has(ev, "value")) v = etch_event_get_i64(ev, "value");
    r->vals[r->n] = v;
    r->tids[r->n] = ev->tid;
    r->ts[r->n] = ev->ts;
  }
  r->n++;
  if (r->stop_after && r->n == r->stop_after) etch_reader_stop(ev->reader);
}

/* Reads a trace with one route per (logger, event) pair given. */
static void read_routes(const uint8_t *data, size_t len, routed *out,
                        const char *logger, const char *event) {
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, data, len));
  ASSERT_OK(etch_reader_route(r, 7, logger, event, on_routed, out));
  ASSERT_OK(etch_reader_run(r));
  etch_reader_close(r);
}

static uint8_t *session_bytes(etch_session *s, size_t *len) {
  uint8_t *data;
  ASSERT_OK(etch_session_read(s, &data, len));
  return data;
}

/* ---- every field type ---------------------------------------------------------- */

static double large_vals[20000];

static uint64_t bits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static void check_all(const etch_custom_event *ev, void *user) {
  (void)user;
  ASSERT_EQ_STR(ev->logger, "T");
  ASSERT_EQ_STR(ev->event, "All");
  ASSERT_EQ_STR(ev->name, "T.All");
  ASSERT_EQ_STR(ev->category, "ChanA");
  ASSERT_EQ_INT(ev->type, ETCH_EVENT_INSTANT);
  ASSERT_EQ_INT(ev->tid, etch__test_gettid());
  ASSERT_TRUE(ev->thread_id != 0);
  ASSERT_FALSE(ev->has_serial);
  ASSERT_EQ_U64(ev->important_id, 0);
  /* The schema: every field, declared order and types, set or not. */
  static const char *const names[] = {
      "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64",
      "flag", "text", "cut", "wide", "utf16", "a_i8", "a_i16", "a_i32",
      "a_i64", "a_u8", "a_u16", "a_u32", "a_u64", "a_f32", "a_f64", "empty",
      "large", "never"};
  static const uint32_t types[] = {
      1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 12, 13, 14, 0x41, 0x42, 0x43,
      0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x45, 0x4a, 3};
  ASSERT_EQ_U64(ev->nfields, 28);
  for (size_t i = 0; i < 28; i++) {
    ASSERT_EQ_STR(ev->fields[i].name, names[i]);
    ASSERT_EQ_U64(ev->fields[i].type, types[i]);
    ASSERT_EQ_INT(ev->fields[i].set, i != 27);
  }
  ASSERT_EQ_INT(etch_event_get_i8(ev, "i8"), INT8_MIN);
  ASSERT_EQ_INT(etch_event_get_i16(ev, "i16"), INT16_MIN);
  ASSERT_EQ_INT(etch_event_get_i32(ev, "i32"), INT32_MIN);
  ASSERT_TRUE(etch_event_get_i64(ev, "i64") == INT64_MIN);
  ASSERT_EQ_INT(etch_event_get_u8(ev, "u8"), 255);
  ASSERT_EQ_INT(etch_event_get_u16(ev, "u16"), 65535);
  ASSERT_EQ_U64(etch_event_get_u32(ev, "u32"), UINT32_MAX);
  ASSERT_EQ_U64(etch_event_get_u64(ev, "u64"), UINT64_MAX);
  ASSERT_TRUE(etch_event_get_f32(ev, "f32") == 1.25f);
  ASSERT_EQ_U64(bits(etch_event_get_f64(ev, "f64")), bits(-0.1));
  ASSERT_TRUE(etch_event_get_bool(ev, "flag"));
  size_t len;
  ASSERT_EQ_STR(etch_event_get_str(ev, "text", &len), "naïve text");
  ASSERT_EQ_U64(len, strlen("naïve text"));
  ASSERT_EQ_STR(etch_event_get_str(ev, "cut", &len), "abc");
  ASSERT_EQ_U64(len, 3);
  ASSERT_EQ_STR(etch_event_get_str(ev, "wide", NULL), "é😀x");
  /* A surrogate pair, then a lone high surrogate: U+FFFD. */
  ASSERT_EQ_STR(etch_event_get_str(ev, "utf16", NULL), "A😀\xEF\xBF\xBD" "B");
  size_t n;
  const int8_t *a8 = (const int8_t *)etch_event_get_array(ev, "a_i8", &n);
  ASSERT_EQ_U64(n, 3);
  ASSERT_EQ_INT(a8[0], -128);
  ASSERT_EQ_INT(a8[1], 0);
  ASSERT_EQ_INT(a8[2], 127);
  const int16_t *a16 = (const int16_t *)etch_event_get_array(ev, "a_i16", &n);
  ASSERT_EQ_U64(n, 2);
  ASSERT_EQ_INT(a16[0], -32768);
  ASSERT_EQ_INT(a16[1], 32767);
  const int32_t *a32 = (const int32_t *)etch_event_get_array(ev, "a_i32", &n);
  ASSERT_EQ_U64(n, 2);
  ASSERT_EQ_INT(a32[0], INT32_MIN);
  ASSERT_EQ_INT(a32[1], 5);
  const int64_t *a64 = (const int64_t *)etch_event_get_array(ev, "a_i64", &n);
  ASSERT_EQ_U64(n, 1);
  ASSERT_TRUE(a64[0] == INT64_MIN);
  const uint8_t *u8 = (const uint8_t *)etch_event_get_array(ev, "a_u8", &n);
  ASSERT_EQ_U64(n, 4);
  ASSERT_EQ_INT(u8[0], 0);
  ASSERT_EQ_INT(u8[3], 255);
  const uint16_t *u16 = (const uint16_t *)etch_event_get_array(ev, "a_u16", &n);
  ASSERT_EQ_U64(n, 1);
  ASSERT_EQ_INT(u16[0], 65535);
  const uint32_t *u32 = (const uint32_t *)etch_event_get_array(ev, "a_u32", &n);
  ASSERT_EQ_U64(n, 2);
  ASSERT_EQ_U64(u32[0], 1);
  ASSERT_EQ_U64(u32[1], UINT32_MAX);
  const uint64_t *u64 = (const uint64_t *)etch_event_get_array(ev, "a_u64", &n);
  ASSERT_EQ_U64(n, 2);
  ASSERT_EQ_U64(u64[0], UINT64_MAX);
  ASSERT_EQ_U64(u64[1], 42);
  const float *f32 = (const float *)etch_event_get_array(ev, "a_f32", &n);
  ASSERT_EQ_U64(n, 2);
  ASSERT_TRUE(f32[0] == -0.5f && f32[1] == 3.0f);
  const double *f64 = (const double *)etch_event_get_array(ev, "a_f64", &n);
  ASSERT_EQ_U64(n, 1);
  ASSERT_EQ_U64(bits(f64[0]), bits(1e300));
  /* Empty: set, no elements. */
  ASSERT_TRUE(etch_event_has(ev, "empty"));
  ASSERT_TRUE(etch_event_get_array(ev, "empty", &n) != NULL);
  ASSERT_EQ_U64(n, 0);
  /* Large: cut at 16384 elements, every one exact. */
  const double *big = (const double *)etch_event_get_array(ev, "large", &n);
  ASSERT_EQ_U64(n, 16384);
  for (size_t i = 0; i < n; i++)
    if (bits(big[i]) != bits(large_vals[i])) FAIL("large[%zu] differs", i);
  /* Unset: absent. */
  ASSERT_FALSE(etch_event_has(ev, "never"));
  ASSERT_EQ_INT(etch_event_get_i32(ev, "never"), 0);
  ASSERT_TRUE(etch_event_get_array(ev, "never", &n) == NULL);
  ASSERT_TRUE(etch_event_get_field(ev, "nope") == NULL);
}

TEST(custom_every_field_type_exact) {
  etch_session *s = start_session("categories=ChanA");
  for (size_t i = 0; i < 20000; i++) large_vals[i] = (double)i * 0.25 - 7.0;
  static const int8_t i8s[] = {-128, 0, 127};
  static const int16_t i16s[] = {-32768, 32767};
  static const int32_t i32s[] = {INT32_MIN, 5};
  static const int64_t i64s[] = {INT64_MIN};
  static const uint8_t u8s[] = {0, 1, 2, 255};
  static const uint16_t u16s[] = {65535};
  static const uint32_t u32s[] = {1, UINT32_MAX};
  static const uint64_t u64s[] = {UINT64_MAX, 42};
  static const float f32s[] = {-0.5f, 3.0f};
  static const double f64s[] = {1e300};
  static const uint16_t utf16[] = {'A', 0xD83D, 0xDE00, 0xD800, 'B', 0};
  ETCH_LOG(T, All, ChanA, ETCH_SET(i8, INT8_MIN), ETCH_SET(i16, INT16_MIN),
           ETCH_SET(i32, INT32_MIN), ETCH_SET(i64, INT64_MIN),
           ETCH_SET(u8, 255), ETCH_SET(u16, 65535), ETCH_SET(u32, UINT32_MAX),
           ETCH_SET(u64, UINT64_MAX), ETCH_SET(f32, 1.25f),
           ETCH_SET(f64, -0.1), ETCH_SET(flag, true),
           ETCH_SET(text, "naïve text"), ETCH_SET_STR(cut, "abcdef", 3),
           ETCH_SET(wide, L"\u00e9\U0001F600x"), ETCH_SET(utf16, utf16),
           ETCH_SET_ARRAY(a_i8, i8s, 3), ETCH_SET_ARRAY(a_i16, i16s, 2),
           ETCH_SET_ARRAY(a_i32, i32s, 2), ETCH_SET_ARRAY(a_i64, i64s, 1),
           ETCH_SET_ARRAY(a_u8, u8s, 4), ETCH_SET_ARRAY(a_u16, u16s, 1),
           ETCH_SET_ARRAY(a_u32, u32s, 2), ETCH_SET_ARRAY(a_u64, u64s, 2),
           ETCH_SET_ARRAY(a_f32, f32s, 2), ETCH_SET_ARRAY(a_f64, f64s, 1),
           ETCH_SET_ARRAY(empty, u8s, 0), ETCH_SET_ARRAY(large, large_vals, 20000));
  ASSERT_OK(etch_session_stop(s));
  size_t len;
  uint8_t *data = session_bytes(s, &len);
  save_trace("custom_every_field_type", data, len);
  routed got = {0};
  got.check = check_all;
  read_routes(data, len, &got, "T", "All");
  ASSERT_EQ_U64(got.n, 1);
  etch_free(data);
  etch_session_free(s);
}

/* The raw encoding: debug annotations with interned names, only the fields
 * set, the channel as category, the name "Logger.Event". */
TEST(custom_raw_annotations_only_set_fields) {
  etch_session *s = start_session("categories=ChanA");
  ETCH_LOG(T, Small, ChanA, ETCH_SET(n, 3), ETCH_SET(x, 2.5));
  ETCH_LOG(T, Small, ChanA, ETCH_SET(tag, "t"));
  ETCH_LOG(T, Small, ChanA);
  ASSERT_OK(etch_session_stop(s));
  td_trace t;
  read_trace(s, "custom_raw", &t);
  ASSERT_EQ_U64(td_count(&t, 3, "T.Small"), 3);
  int k = 0;
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *e = &t.ev[i];
    if (strcmp(e->name, "T.Small") != 0) continue;
    ASSERT_EQ_STR(e->cat, "ChanA");
    if (k == 0) {
      ASSERT_EQ_INT(e->nargs, 2);
      ASSERT_EQ_STR(e->args[0].name, "n");
      ASSERT_EQ_INT(e->args[0].type, TD_UINT);
      ASSERT_EQ_U64(e->args[0].u, 3);
      ASSERT_EQ_STR(e->args[1].name, "x");
      ASSERT_EQ_INT(e->args[1].type, TD_DOUBLE);
      ASSERT_EQ_DBL(e->args[1].d, 2.5);
    } else if (k == 1) {
      ASSERT_EQ_INT(e->nargs, 1);
      ASSERT_EQ_STR(e->args[0].name, "tag");
      ASSERT_EQ_STR(e->args[0].s, "t");
    } else {
      ASSERT_EQ_INT(e->nargs, 0);
    }
    k++;
  }
  td_free(&t);
  etch_session_free(s);
}

/* ---- channels ---------------------------------------------------------------------- */

/* Which values of "n" made it into the trace, as a string "1,3,". */
static void recorded_ns(etch_session *s, char *out, size_t cap) {
  size_t len;
  uint8_t *data = session_bytes(s, &len);
  routed got = {0};
  read_routes(data, len, &got, NULL, NULL);
  out[0] = '\0';
  for (size_t i = 0; i < got.n && i < 64; i++) {
    size_t l = strlen(out);
    snprintf(out + l, cap - l, "%s%lld,", got.names[i] + 2,
             (long long)got.vals[i]);
  }
  etch_free(data);
}

TEST(custom_channels_off_until_asked_and_combined) {
  etch_session *s = start_session("categories=*");
  ETCH_LOG(T, Small, ChanA, ETCH_SET(n, 1)); /* off by default */
  ASSERT_EQ_INT(etch_channel_set("ChanA", true), 1);
  ETCH_LOG(T, Small, ChanA, ETCH_SET(n, 2));
  ETCH_LOG(T, Small, (ChanA, ChanB), ETCH_SET(n, 3)); /* B is off */
  ASSERT_EQ_INT(etch_channel_set("Chan*", true), 2);
  ETCH_LOG(T, Small, (ChanA, ChanB), ETCH_SET(n, 4));
  ETCH_LOG(T, Small, (ChanB, ChanA), ETCH_SET(n, 5));
  ASSERT_EQ_INT(etch_channel_set("ChanB", false), 1);
  ETCH_LOG(T, Small, (ChanA, ChanB), ETCH_SET(n, 6));
  ETCH_LOG(T, Small, ChanA, ETCH_SET(n, 7));
  /* Categories are the same mechanism: switched off and on. */
  ASSERT_EQ_INT(etch_channel_set("plain", false), 1);
  ETCH_INSTANT(plain, "p1");
  ASSERT_EQ_INT(etch_channel_set("plain", true), 1);
  ETCH_INSTANT(plain, "p2");
  ASSERT_OK(etch_session_stop(s));
  char got[256];
  recorded_ns(s, got, sizeof got);
  ASSERT_EQ_STR(got, "Small2,Small4,Small5,Small7,");
  td_trace t;
  read_trace(s, "custom_channels", &t);
  ASSERT_EQ_U64(td_count(&t, 3, "p1"), 0);
  ASSERT_EQ_U64(td_count(&t, 3, "p2"), 1);
  /* The combined event carries both channels as its categories. */
  for (size_t i = 0; i < t.nev; i++)
    if (!strcmp(t.ev[i].name, "T.Small") && td_arg_of(&t.ev[i], "n")->u == 5)
      ASSERT_EQ_STR(t.ev[i].cat, "ChanB,ChanA");
  td_free(&t);
  etch_session_free(s);
}

TEST(custom_channel_named_by_a_session_is_recorded) {
  /* Not switched on, but named: recorded by that session only. */
  etch_session *named = start_session("categories=ChanB");
  etch_session *star = start_session("categories=*");
  ETCH_LOG(T, Small, ChanB, ETCH_SET(n, 1));
  ASSERT_OK(etch_session_stop(named));
  ASSERT_OK(etch_session_stop(star));
  char got[256];
  recorded_ns(named, got, sizeof got);
  ASSERT_EQ_STR(got, "Small1,");
  recorded_ns(star, got, sizeof got);
  ASSERT_EQ_STR(got, "");
  etch_session_free(named);
  etch_session_free(star);
  /* Switched off, even a session naming it records nothing. */
  ASSERT_EQ_INT(etch_channel_set("ChanB", false), 1);
  etch_session *s = start_session("categories=ChanB");
  ETCH_LOG(T, Small, ChanB, ETCH_SET(n, 2));
  ASSERT_OK(etch_session_stop(s));
  recorded_ns(s, got, sizeof got);
  ASSERT_EQ_STR(got, "");
  etch_session_free(s);
}

TEST(custom_channel_set_rules_apply_to_later_categories) {
  ASSERT_EQ_INT(etch_channel_set("Late*", true), 0);
  etch_category *late = etch_category_get("LateOne");
  ASSERT_TRUE(late != NULL);
  ASSERT_EQ_INT(etch_channel_set("Late*", false), 1);
  etch_session *s = start_session("categories=LateOne");
  ASSERT_EQ_U64(late->enabled, 0);
  etch_session_free(s);
  /* Bad patterns. */
  ASSERT_EQ_INT(etch_channel_set("a*b", true), ETCH_ECONFIG);
  ASSERT_TRUE(strstr(etch_last_error(), "bad pattern 'a*b'") != NULL);
  ASSERT_EQ_INT(etch_channel_set("-ChanA", true), ETCH_ECONFIG);
  ASSERT_EQ_INT(etch_channel_set("", true), ETCH_ECONFIG);
  ASSERT_EQ_INT(etch_channel_set(NULL, true), ETCH_EINVAL);
}

/* ---- important events ------------------------------------------------------------- */

typedef struct thread_tid {
  int32_t tid;
} thread_tid;

static void *log_setting_thread2(void *arg) {
  etch_thread_set_name("setter");
  ((thread_tid *)arg)->tid = etch__test_gettid();
  ETCH_LOG(T, Setting, ChanA, ETCH_SET(key, "from-thread"), ETCH_SET(value, 9));
  return NULL;
}

TEST(custom_important_replayed_into_a_late_session) {
  /* Logged while nothing records, on a channel that is off, one from a
   * thread that is gone by the time the session starts. */
  uint64_t t0 = etch_now();
  ETCH_LOG(T, Setting, ChanA, ETCH_SET(key, "quality"), ETCH_SET(value, 3));
  thread_tid th = {0};
  pthread_t pt;
  ASSERT_EQ_INT(pthread_create(&pt, NULL, log_setting_thread2, &th), 0);
  pthread_join(pt, NULL);
  ETCH_LOG(T, Small, ChanA, ETCH_SET(n, 1)); /* not important: not kept */
  uint64_t t1 = etch_now();
  usleep(2000);
  etch_session *s = start_session("categories=ChanA");
  ETCH_LOG(T, Small, ChanA, ETCH_SET(n, 2));
  ASSERT_OK(etch_session_stop(s));
  size_t len;
  uint8_t *data = session_bytes(s, &len);
  save_trace("custom_important_late", data, len);
  routed got = {0};
  read_routes(data, len, &got, "T", NULL);
  ASSERT_EQ_U64(got.n, 3);
  ASSERT_EQ_STR(got.names[0], "T.Setting");
  ASSERT_EQ_INT(got.vals[0], 3);
  ASSERT_EQ_INT(got.tids[0], etch__test_gettid());
  ASSERT_EQ_STR(got.names[1], "T.Setting");
  ASSERT_EQ_INT(got.vals[1], 9);
  ASSERT_EQ_INT(got.tids[1], th.tid);
  ASSERT_EQ_STR(got.names[2], "T.Small");
  ASSERT_EQ_INT(got.vals[2], 2);
  /* At the times they were logged, before the session. */
  ASSERT_TRUE((uint64_t)got.ts[0] >= t0 && (uint64_t)got.ts[1] <= t1);
  ASSERT_TRUE(got.ts[0] <= got.ts[1]);
  /* The gone thread's track says who it was. */
  td_trace t;
  if (td_decode(data, len, &t) != 0) FAIL("%s", t.error);
  bool found = false;
  for (size_t i = 0; i < t.ntracks; i++)
    if (t.tracks[i].is_thread && t.tracks[i].tid == th.tid) {
      ASSERT_EQ_STR(t.tracks[i].name, "setter");
      found = true;
    }
  ASSERT_TRUE(found);
  td_free(&t);
  etch_session_stats st;
  ASSERT_OK(etch_session_get_stats(s, &st));
  ASSERT_EQ_U64(st.important_events, 2);
  ASSERT_TRUE(st.important_bytes > 2 * 16 && st.important_bytes < 4096);
  ASSERT_EQ_U64(st.important_dropped, 0);
  etch_free(data);
  etch_session_free(s);
}

/* How many T.Setting events of each value (0..7) a trace holds: every
 * copy, as trace_processor counts them. Checks the trace decodes whole. */
static void count_settings(etch_session *s, const char *name, int got[8]) {
  td_trace t;
  read_trace(s, name, &t);
  memset(got, 0, 8 * sizeof got[0]);
  for (size_t i = 0; i < t.nev; i++) {
    if (strcmp(t.ev[i].name, "T.Setting")) continue;
    int64_t v = td_arg_of(&t.ev[i], "value")->i;
    ASSERT_TRUE(v >= 0 && v < 8);
    got[v]++;
  }
  td_free(&t);
}

static void *tick_thread(void *arg) {
  (void)arg;
  ETCH_INSTANT(plain, "tick");
  return NULL;
}

static void tick_threads(int n) {
  pthread_t th[8];
  for (int i = 0; i < n; i++)
    ASSERT_EQ_INT(pthread_create(&th[i], NULL, tick_thread, NULL), 0);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

/* The process's first important event, logged once while a session
 * records, then `n` threads start and record: each new sequence's first
 * reset may replay the cache, and the trace still has the event once
 * (with threads it had it twice). A second session, started after, has it
 * once too (replayed). */
static void once_with_threads_after(int n) {
  etch_session *s = start_session("categories=ChanA,plain");
  ETCH_LOG(T, Setting, ChanA, ETCH_SET(key, "k"), ETCH_SET(value, 1));
  tick_threads(n);
  ASSERT_OK(etch_session_stop(s));
  char name[64];
  snprintf(name, sizeof name, "custom_important_threads_%d", n);
  int got[8];
  count_settings(s, name, got);
  ASSERT_EQ_INT(got[1], 1);
  etch_session_free(s);
  s = start_session("categories=ChanA,plain");
  tick_threads(n);
  ETCH_INSTANT(plain, "tick");
  ASSERT_OK(etch_session_stop(s));
  snprintf(name, sizeof name, "custom_important_threads_%d_after", n);
  count_settings(s, name, got);
  ASSERT_EQ_INT(got[1], 1);
  etch_session_free(s);
}

TEST(custom_important_once_with_no_thread_after_it) {
  once_with_threads_after(0);
}
TEST(custom_important_once_with_a_thread_after_it) {
  once_with_threads_after(1);
}
TEST(custom_important_once_with_threads_after_it) {
  once_with_threads_after(4);
}

/* A session started while another records, after the event: the late one
 * has it once (replayed), the first one once (as logged), with threads
 * starting in both. */
TEST(custom_important_once_in_a_session_started_later) {
  etch_session *a = start_session("categories=ChanA,plain");
  ETCH_LOG(T, Setting, ChanA, ETCH_SET(key, "k"), ETCH_SET(value, 5));
  tick_threads(2);
  etch_session *b = start_session("categories=ChanA,plain");
  tick_threads(3);
  ETCH_INSTANT(plain, "tick");
  ASSERT_OK(etch_session_stop(b));
  ASSERT_OK(etch_session_stop(a));
  int got[8];
  count_settings(a, "custom_important_late_a", got);
  ASSERT_EQ_INT(got[5], 1);
  count_settings(b, "custom_important_late_b", got);
  ASSERT_EQ_INT(got[5], 1);
  etch_session_free(b);
  etch_session_free(a);
}

TEST(custom_important_survives_a_ring_that_wrapped) {
  etch_session *s = start_session("categories=ChanA,plain;buffer_kb=64");
  ETCH_LOG(T, Setting, ChanA, ETCH_SET(key, "mode"), ETCH_SET(value, 77));
  /* Many times the ring's size, with threads starting on the way (each
   * sequence's start may replay it). */
  for (int i = 0; i < 200000; i++) {
    ETCH_INSTANT(plain, "filler");
    if (i % 50000 == 0) tick_threads(2);
  }
  ASSERT_OK(etch_session_stop(s));
  etch_session_stats st;
  ASSERT_OK(etch_session_get_stats(s, &st));
  ASSERT_TRUE(st.chunks_overwritten > 0);
  size_t len;
  uint8_t *data = session_bytes(s, &len);
  save_trace("custom_important_ring", data, len);
  /* Written more than once into the ring, in the trace once: a copy the
   * ring kept, the original overwritten. */
  td_trace t;
  if (td_decode(data, len, &t) != 0) FAIL("%s", t.error);
  ASSERT_EQ_U64(td_count(&t, 3, "T.Setting"), 1);
  ASSERT_EQ_U64(t.unresolved, 0);
  td_free(&t);
  routed got = {0};
  read_routes(data, len, &got, "T", "Setting");
  ASSERT_EQ_U64(got.n, 1);
  ASSERT_EQ_INT(got.vals[0], 77);
  etch_free(data);
  etch_session_free(s);
}

TEST(custom_important_written_once_in_a_short_session) {
  etch_session *s = start_session("categories=ChanA");
  ETCH_LOG(T, Setting, ChanA, ETCH_SET(key, "k"), ETCH_SET(value, 1));
  ETCH_LOG(T, Small, ChanA, ETCH_SET(n, 1));
  ASSERT_OK(etch_session_stop(s));
  td_trace t;
  read_trace(s, "custom_important_once", &t);
  ASSERT_EQ_U64(td_count(&t, 3, "T.Setting"), 1);
  td_free(&t);
  etch_session_free(s);
}

TEST(custom_important_cache_is_bounded) {
  setenv("ETCH_IMPORTANT_KB", "1", 1);
  for (int i = 0; i < 100; i++)
    ETCH_LOG(T, Setting, ChanA, ETCH_SET(key, "some key"), ETCH_SET(value, i));
  etch_session *s = start_session("categories=ChanA");
  etch_session_stats st;
  ASSERT_OK(etch_session_get_stats(s, &st));
  ASSERT_TRUE(st.important_bytes <= 1024);
  ASSERT_TRUE(st.important_events > 0);
  ASSERT_EQ_U64(st.important_events + st.important_dropped, 100);
  ETCH_LOG(T, Small, ChanA, ETCH_SET(n, 1));
  ASSERT_OK(etch_session_stop(s));
  td_trace t;
  read_trace(s, "custom_important_bounded", &t);
  /* The first ones kept, in order. */
  ASSERT_EQ_U64(td_count(&t, 3, "T.Setting"), st.important_events);
  int64_t want = 0;
  for (size_t i = 0; i < t.nev; i++)
    if (!strcmp(t.ev[i].name, "T.Setting"))
      ASSERT_EQ_INT(td_arg_of(&t.ev[i], "value")->i, want++);
  td_free(&t);
  etch_session_free(s);
}

/* ---- serial order ------------------------------------------------------------------ */

#define SERIAL_THREADS 4
#define SERIAL_EACH 5000

static pthread_barrier_t serial_barrier;

static void *serial_thread(void *arg) {
  uint32_t k = (uint32_t)(uintptr_t)arg;
  pthread_barrier_wait(&serial_barrier);
  for (uint32_t i = 0; i < SERIAL_EACH; i++)
    ETCH_LOG(T, Job, ChanA, ETCH_SET(thread, k), ETCH_SET(i, i));
  return NULL;
}

typedef struct serial_seen {
  uint64_t n;
  uint64_t next_i[SERIAL_THREADS];
  bool bad;
  char why[128];
} serial_seen;

static void on_serial(const etch_custom_event *ev, void *user) {
  serial_seen *s = (serial_seen *)user;
  if (s->bad) return;
  uint32_t k = etch_event_get_u32(ev, "thread");
  uint32_t i = etch_event_get_u32(ev, "i");
  if (!ev->has_serial || ev->serial != s->n || k >= SERIAL_THREADS ||
      i != s->next_i[k]) {
    s->bad = true;
    snprintf(s->why, sizeof s->why, "event %llu: serial %llu thread %u i %u",
             (unsigned long long)s->n, (unsigned long long)ev->serial, k, i);
    return;
  }
  s->next_i[k]++;
  s->n++;
}

TEST(custom_serial_strict_order_across_threads) {
  ASSERT_EQ_INT(etch_channel_set("ChanA", true), 1);
  etch_session *s = start_session("categories=ChanA");
  pthread_barrier_init(&serial_barrier, NULL, SERIAL_THREADS);
  pthread_t th[SERIAL_THREADS];
  for (uintptr_t k = 0; k < SERIAL_THREADS; k++)
    ASSERT_EQ_INT(pthread_create(&th[k], NULL, serial_thread, (void *)k), 0);
  for (int k = 0; k < SERIAL_THREADS; k++) pthread_join(th[k], NULL);
  ASSERT_OK(etch_session_stop(s));
  size_t len;
  uint8_t *data = session_bytes(s, &len);
  serial_seen seen = {0};
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, data, len));
  ASSERT_OK(etch_reader_route(r, 1, "T", "Job", on_serial, &seen));
  ASSERT_OK(etch_reader_run(r));
  etch_reader_close(r);
  if (seen.bad) FAIL("%s", seen.why);
  ASSERT_EQ_U64(seen.n, SERIAL_THREADS * SERIAL_EACH);
  etch_free(data);
  etch_session_free(s);
}

/* ---- analyzers ---------------------------------------------------------------------- */

typedef struct multi {
  size_t n;
  char log[512];
} multi;

static void on_multi(const etch_custom_event *ev, void *user) {
  multi *m = (multi *)user;
  size_t l = strlen(m->log);
  snprintf(m->log + l, sizeof m->log - l, "%u:%s:%s ", ev->route, ev->name,
           ev->type == ETCH_EVENT_SLICE_BEGIN ? "B" : "I");
  m->n++;
}

TEST(custom_routes_by_name_and_stop_early) {
  ASSERT_EQ_INT(etch_channel_set("ChanA", true), 1);
  etch_session *s = start_session("categories=ChanA");
  ETCH_LOG(T, Small, ChanA, ETCH_SET(n, 1));
  ETCH_LOG(Other, Ping, ChanA);
  {
    ETCH_LOG_SCOPE(T, Small, ChanA, ETCH_SET(n, 2));
    ETCH_LOG(Other, Ping, ChanA);
  }
  ETCH_INSTANT(plain, "not custom"); /* plain is not in the session anyway */
  ASSERT_OK(etch_session_stop(s));
  size_t len;
  uint8_t *data = session_bytes(s, &len);
  etch_reader *r;
  multi m = {0};
  ASSERT_OK(etch_reader_open_memory(&r, data, len));
  ASSERT_OK(etch_reader_route(r, 1, "T", "Small", on_multi, &m));
  ASSERT_OK(etch_reader_route(r, 2, "Other", NULL, on_multi, &m));
  ASSERT_OK(etch_reader_route(r, 3, NULL, "Ping", on_multi, &m));
  ASSERT_OK(etch_reader_run(r));
  etch_reader_close(r);
  ASSERT_EQ_STR(m.log,
                "1:T.Small:I 2:Other.Ping:I 3:Other.Ping:I 1:T.Small:B "
                "2:Other.Ping:I 3:Other.Ping:I ");
  /* The scope is a slice with its end. */
  td_trace t;
  if (td_decode(data, len, &t) != 0) FAIL("%s", t.error);
  ASSERT_EQ_U64(td_count(&t, 1, "T.Small"), 1);
  ASSERT_EQ_U64(td_count(&t, 2, NULL), 1);
  td_free(&t);
  /* An analysis that found what it wanted stops the read. */
  routed got = {0};
  got.stop_after = 2;
  read_routes(data, len, &got, NULL, NULL);
  ASSERT_EQ_U64(got.n, 2);
  /* Routes need a callback and a reader that has not run. */
  ASSERT_OK(etch_reader_open_memory(&r, data, len));
  ASSERT_EQ_INT(etch_reader_route(r, 1, NULL, NULL, NULL, NULL), ETCH_EINVAL);
  ASSERT_OK(etch_reader_run(r));
  ASSERT_EQ_INT(etch_reader_route(r, 1, NULL, NULL, on_multi, &m), ETCH_ESTATE);
  etch_reader_close(r);
  etch_free(data);
  etch_session_free(s);
}

TEST(custom_schema_once_per_sequence_and_after_resets) {
  /* Resets every 20 ms: the schema and names are written again after each,
   * so every part of the trace decodes on its own. */
  etch_session *s = start_session("categories=ChanA;reset_interval_ms=20");
  for (int i = 0; i < 5; i++) {
    ETCH_LOG(T, Small, ChanA, ETCH_SET(n, i));
    usleep(30000);
  }
  ASSERT_OK(etch_session_stop(s));
  td_trace t;
  read_trace(s, "custom_resets", &t);
  ASSERT_TRUE(t.cleared >= 5);
  ASSERT_EQ_U64(td_count(&t, 3, "T.Small"), 5);
  td_free(&t);
  char got[256];
  recorded_ns(s, got, sizeof got);
  ASSERT_EQ_STR(got, "Small0,Small1,Small2,Small3,Small4,");
  etch_session_free(s);
}

/* Threads keep important events while sessions start and replay them. */
static void *imp_thread(void *arg) {
  int k = (int)(intptr_t)arg;
  for (int i = 0; i < 50; i++)
    ETCH_LOG(T, Setting, ChanA, ETCH_SET(key, "t"), ETCH_SET(value, k * 100 + i));
  return NULL;
}

TEST(custom_important_from_threads_while_sessions_replay) {
  pthread_t th[4];
  for (intptr_t k = 0; k < 4; k++)
    ASSERT_EQ_INT(pthread_create(&th[k], NULL, imp_thread, (void *)k), 0);
  for (int i = 0; i < 5; i++) {
    etch_session *s = start_session("categories=ChanA");
    ETCH_LOG(T, Small, ChanA, ETCH_SET(n, i));
    ASSERT_OK(etch_session_stop(s));
    etch_session_free(s);
  }
  for (int k = 0; k < 4; k++) pthread_join(th[k], NULL);
  etch_session *s = start_session("categories=ChanA");
  ETCH_LOG(T, Small, ChanA, ETCH_SET(n, 9));
  ASSERT_OK(etch_session_stop(s));
  size_t len;
  uint8_t *data = session_bytes(s, &len);
  routed got = {0};
  read_routes(data, len, &got, "T", "Setting");
  ASSERT_EQ_U64(got.n, 200);
  etch_free(data);
  etch_session_free(s);
}

typedef struct tu_seen {
  char log[128];
} tu_seen;

static void on_tu(const etch_custom_event *ev, void *user) {
  tu_seen *s = (tu_seen *)user;
  size_t l = strlen(s->log);
  snprintf(s->log + l, sizeof s->log - l, "%d:%s ",
           etch_event_get_i32(ev, "from"), etch_event_get_str(ev, "where", NULL));
}

/* Declared in a header, defined here, logged from two files. */
TEST(custom_event_declared_in_a_header_logged_from_two_files) {
  etch_session *s = start_session("categories=ChanA");
  ETCH_LOG(Tu, Shared, ChanA, ETCH_SET(from, 1), ETCH_SET(where, "main"));
  custom_tu2_log();
  ASSERT_OK(etch_session_stop(s));
  size_t len;
  uint8_t *data = session_bytes(s, &len);
  tu_seen seen = {{0}};
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, data, len));
  ASSERT_OK(etch_reader_route(r, 1, "Tu", "Shared", on_tu, &seen));
  ASSERT_OK(etch_reader_run(r));
  etch_reader_close(r);
  ASSERT_EQ_STR(seen.log, "1:main 2:tu2 ");
  etch_free(data);
  etch_session_free(s);
}

/* The console prints custom events with their fields, and an important
 * event replayed into the session under the thread that logged it. */
static void *console_worker(void *arg) {
  (void)arg;
  etch_thread_set_name("worker");
  static const uint8_t b[] = {1, 2};
  ETCH_LOG(T, All, ChanA, ETCH_SET(u8, 7), ETCH_SET(text, "x"),
           ETCH_SET(wide, L"\u00e9"), ETCH_SET_ARRAY(a_u8, b, 2),
           ETCH_SET_ARRAY(empty, b, 0));
  return NULL;
}

TEST(custom_events_on_the_console) {
  etch_process_set_name("ctest");
  etch_thread_set_name("main");
  ETCH_LOG(T, Setting, ChanA, ETCH_SET(key, "k"), ETCH_SET(value, 5));
  char path[512];
  snprintf(path, sizeof path, "%s/console.txt", etch_test_tmpdir());
  int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
  ASSERT_TRUE(fd >= 0);
  char cfg[256];
  snprintf(cfg, sizeof cfg,
           "categories=ChanA;interceptor=console;interceptor.fd=%d;"
           "interceptor.color=never", fd);
  etch_session *s = start_session(cfg);
  pthread_t th;
  ASSERT_EQ_INT(pthread_create(&th, NULL, console_worker, NULL), 0);
  pthread_join(th, NULL);
  ASSERT_OK(etch_session_stop(s));
  etch_session_free(s);
  close(fd);
  size_t len;
  char *out = (char *)etch_test_read_file(path, &len);
  ASSERT_TRUE(out != NULL);
  out = (char *)realloc(out, len + 1);
  out[len] = '\0';
  char *w = etch_test_console_lines(out, "ctest/worker", false);
  ASSERT_EQ_STR(w, "* T.All [ChanA] u8=7 text=\"x\" wide=\"\xc3\xa9\" "
                   "a_u8=[1, 2] empty=[]\n");
  char *m = etch_test_console_lines(out, "ctest/main", false);
  ASSERT_EQ_STR(m, "* T.Setting [ChanA] key=\"k\" value=5 etch.important=1\n");
  free(w);
  free(m);
  free(out);
}

/* ETCH_CHANNELS switches channels on for the whole run (etch_init). */
TEST(custom_channels_from_the_environment) {
  char path[512];
  snprintf(path, sizeof path, "%s/env.pftrace", etch_test_tmpdir());
  setenv("ETCH_OUT", path, 1);
  setenv("ETCH_CATEGORIES", "*", 1);
  setenv("ETCH_CHANNELS", "ChanB", 1);
  ASSERT_OK(etch_init());
  ETCH_LOG(T, Small, ChanA, ETCH_SET(n, 1)); /* off: not named anywhere */
  ETCH_LOG(T, Small, ChanB, ETCH_SET(n, 2));
  ASSERT_OK(etch_shutdown());
  td_trace t;
  if (td_decode_file(path, &t) != 0) FAIL("%s", t.error);
  ASSERT_EQ_U64(td_count(&t, 3, "T.Small"), 1);
  for (size_t i = 0; i < t.nev; i++)
    if (!strcmp(t.ev[i].name, "T.Small")) {
      ASSERT_EQ_STR(t.ev[i].cat, "ChanB");
      ASSERT_EQ_U64(td_arg_of(&t.ev[i], "n")->u, 2);
    }
  td_free(&t);
}

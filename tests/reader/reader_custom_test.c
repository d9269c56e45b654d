/*
 * reader_custom_test.c - custom events read through routes from traces
 * built byte by byte: serial order against timestamp order, schemas
 * redefined or broken, empty arrays, important events delivered once.
 */
#include <string.h>

#include "reader/tbuild.h"
#include "test.h"

/* InternedData.etch_event_schemas and EventSchema (docs/format.md). */
enum { ID_SCHEMAS = 900 };

static void schema(tb *t, uint64_t iid, const char *name, const char *logger,
                   const char *event, const char *const *fnames,
                   const uint32_t *ftypes, int n) {
  tb_open(t, ID_SCHEMAS);
  tb_u(t, 1, iid);
  tb_s(t, 2, name);
  tb_s(t, 3, logger);
  tb_s(t, 4, event);
  for (int i = 0; i < n; i++) {
    tb_open(t, 6);
    tb_s(t, 1, fnames[i]);
    tb_u(t, 2, ftypes[i]);
    tb_close(t);
  }
  tb_close(t);
}

/* One instant "L.E" {n: uint, etch.serial / etch.important: uint} on
 * sequence `seq` at `ts`; the first packet of a sequence interns the
 * names and the schema. */
static void event(tb *t, uint32_t seq, uint64_t ts, bool first, uint64_t n,
                  const char *extra, uint64_t extra_v) {
  static const char *const fn[] = {"n"};
  static const uint32_t ft[] = {7};
  tb_begin(t);
  tb_u(t, 8, ts);
  tb_u(t, 58, 6);
  tb_u(t, 13, first ? 3 : 2);
  if (first) {
    tb_open(t, 12);
    tb_interned(t, 2, 1, "L.E");
    tb_interned(t, 3, 1, "n");
    tb_interned(t, 3, 2, "etch.serial");
    tb_interned(t, 3, 3, "etch.important");
    schema(t, 1, "L.E", "L", "E", fn, ft, 1);
    tb_close(t);
  }
  tb_open(t, 11);
  tb_u(t, 9, 3);
  tb_u(t, 10, 1);
  tb_open(t, 4);
  tb_u(t, 1, 1);
  tb_u(t, 3, n);
  tb_close(t);
  if (extra) {
    tb_open(t, 4);
    tb_u(t, 1, strcmp(extra, "etch.serial") == 0 ? 2 : 3);
    tb_u(t, 3, extra_v);
    tb_close(t);
  }
  tb_close(t);
  tb_u(t, 10, seq);
  tb_end(t);
}

typedef struct seen {
  char log[1024];
  int n;
} seen;

static void on_ev(const etch_custom_event *ev, void *user) {
  seen *s = (seen *)user;
  size_t l = strlen(s->log);
  snprintf(s->log + l, sizeof s->log - l, "%sn=%u", l ? " | " : "",
           etch_event_get_u32(ev, "n"));
  l = strlen(s->log);
  if (ev->has_serial)
    snprintf(s->log + l, sizeof s->log - l, " serial=%llu",
             (unsigned long long)ev->serial);
  l = strlen(s->log);
  for (size_t i = 0; i < ev->nfields; i++) {
    const etch_custom_field *f = &ev->fields[i];
    if (strcmp(f->name, "n") == 0) continue;
    snprintf(s->log + l, sizeof s->log - l, " %s:%u:%s:%zu", f->name, f->type,
             f->set ? "set" : "unset", f->count);
    l = strlen(s->log);
  }
  s->n++;
}

static bool g_strict; /* run() reads with etch_reader_set_strict */

static int run(const tb *t, seen *s, etch_reader_order order) {
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, t->data, t->len));
  ASSERT_OK(etch_reader_set_strict(r, g_strict));
  ASSERT_OK(etch_reader_set_order(r, order));
  ASSERT_OK(etch_reader_route(r, 1, "L", "E", on_ev, s));
  int rc = etch_reader_run(r);
  etch_reader_close(r);
  return rc;
}

TEST(reader_custom_serial_order_beats_timestamps) {
  tb t;
  tb_init(&t);
  /* Two threads' sequences; serial 1 is stamped before serial 0. */
  event(&t, 1, 1000, true, 10, "etch.serial", 0);
  event(&t, 2, 999, true, 11, "etch.serial", 1);
  event(&t, 2, 1001, false, 12, "etch.serial", 2);
  event(&t, 1, 1003, false, 13, "etch.serial", 3);
  event(&t, 1, 1004, false, 14, NULL, 0); /* no serial: in time order */
  seen s = {0};
  ASSERT_OK(run(&t, &s, ETCH_ORDER_TIMESTAMP));
  ASSERT_EQ_STR(s.log,
                "n=14 | n=10 serial=0 | n=11 serial=1 | n=12 serial=2 | "
                "n=13 serial=3");
  /* The same in file order. */
  memset(&s, 0, sizeof s);
  ASSERT_OK(run(&t, &s, ETCH_ORDER_FILE));
  ASSERT_EQ_STR(s.log,
                "n=14 | n=10 serial=0 | n=11 serial=1 | n=12 serial=2 | "
                "n=13 serial=3");
  tb_free(&t);
}

TEST(reader_custom_important_once_per_id) {
  tb t;
  tb_init(&t);
  event(&t, 1, 1000, true, 1, "etch.important", 5);
  event(&t, 2, 1000, true, 1, "etch.important", 5); /* a replayed copy */
  event(&t, 2, 1001, false, 2, "etch.important", 6);
  seen s = {0};
  ASSERT_OK(run(&t, &s, ETCH_ORDER_TIMESTAMP));
  ASSERT_EQ_STR(s.log, "n=1 | n=2");
  tb_free(&t);
}

TEST(reader_custom_empty_array_and_unknown_types) {
  static const char *const fn[] = {"n", "arr", "odd"};
  static const uint32_t ft[] = {7, 0x45, 99};
  tb t;
  tb_init(&t);
  tb_begin(&t);
  tb_u(&t, 8, 100);
  tb_u(&t, 13, 3);
  tb_open(&t, 12);
  tb_interned(&t, 2, 1, "L.E");
  schema(&t, 1, "L.E", "L", "E", fn, ft, 3);
  tb_close(&t);
  tb_open(&t, 11);
  tb_u(&t, 9, 3);
  tb_u(&t, 10, 1);
  tb_open(&t, 4); /* arr: an empty nested array */
  tb_s(&t, 10, "arr");
  tb_open(&t, 8);
  tb_u(&t, 1, 2);
  tb_close(&t);
  tb_close(&t);
  tb_open(&t, 4); /* odd: a type etch does not know, kept as written */
  tb_s(&t, 10, "odd");
  tb_u(&t, 3, 4);
  tb_close(&t);
  tb_close(&t);
  tb_u(&t, 10, 1);
  tb_end(&t);
  seen s = {0};
  ASSERT_OK(run(&t, &s, ETCH_ORDER_TIMESTAMP));
  ASSERT_EQ_STR(s.log, "n=0 arr:69:set:0 odd:99:set:0");
  /* The generic view: one NULL arg for the empty array. */
  tb_out out;
  ASSERT_OK(tb_read(t.data, t.len, ETCH_ORDER_TIMESTAMP, &out));
  ASSERT_TRUE(strstr(out.events, "debug.arr=null") != NULL);
  tb_out_free(&out);
  tb_free(&t);
}

TEST(reader_custom_schema_redefined_and_broken) {
  static const char *const f1[] = {"n"};
  static const uint32_t t1[] = {7};
  static const char *const f2[] = {"n", "m"};
  static const uint32_t t2[] = {4, 7};
  tb t;
  tb_init(&t);
  event(&t, 1, 100, true, 1, NULL, 0);
  /* Another sequence says L.E has two fields, n signed. */
  tb_begin(&t);
  tb_u(&t, 8, 200);
  tb_u(&t, 58, 6);
  tb_u(&t, 13, 3);
  tb_open(&t, 12);
  tb_interned(&t, 2, 1, "L.E");
  tb_interned(&t, 3, 1, "n");
  schema(&t, 1, "L.E", "L", "E", f2, t2, 2);
  tb_close(&t);
  tb_open(&t, 11);
  tb_u(&t, 9, 3);
  tb_u(&t, 10, 1);
  tb_open(&t, 4);
  tb_u(&t, 1, 1);
  tb_i(&t, 4, -3);
  tb_close(&t);
  tb_close(&t);
  tb_u(&t, 10, 2);
  tb_end(&t);
  seen s = {0};
  ASSERT_OK(run(&t, &s, ETCH_ORDER_FILE));
  /* The later schema holds from where it appears (the first event was
   * already delivered under the first). */
  ASSERT_EQ_STR(s.log, "n=1 | n=4294967293 m:7:unset:0");
  (void)f1;
  (void)t1;
  tb_free(&t);

  /* A schema whose field is not a message: an error naming the offset. */
  tb_init(&t);
  tb_begin(&t);
  tb_u(&t, 13, 3);
  tb_open(&t, 12);
  tb_open(&t, ID_SCHEMAS);
  tb_u(&t, 1, 1);
  tb_s(&t, 2, "L.E");
  tb_u(&t, 6, 5);
  tb_close(&t);
  tb_close(&t);
  tb_u(&t, 10, 1);
  tb_end(&t);
  memset(&s, 0, sizeof s);
  g_strict = true;
  ASSERT_EQ_INT(run(&t, &s, ETCH_ORDER_TIMESTAMP), ETCH_EFORMAT);
  g_strict = false;
  ASSERT_TRUE(strstr(etch_last_error(), "EventSchema.field") != NULL);
  /* Not strict: the packet is left out whole and counted. */
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, t.data, t.len));
  ASSERT_OK(etch_reader_run(r));
  etch_reader_stats st;
  etch_reader_get_stats(r, &st);
  ASSERT_EQ_U64(st.malformed_packets, 1);
  etch_reader_close(r);
  tb_free(&t);
}

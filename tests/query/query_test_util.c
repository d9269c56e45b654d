/* query_test_util.c - see query_test_util.h. */
#define _GNU_SOURCE
#include "query_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "query/query.h"
#include "test.h"

etch__db *qt_new_db(void) {
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  ASSERT_OK(etch__query_schema_create(db, NULL));
  return db;
}

char *qt_query(etch__db *db, const char *sql) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  int rc = etch__query_run_sql(db, sql, f, ETCH__OUT_CSV);
  fclose(f);
  if (rc) FAIL("query %s: %s", sql, etch_last_error());
  return buf;
}

char *qt_capture(int (*fn)(etch__db *, FILE *), etch__db *db) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  int rc = fn(db, f);
  fclose(f);
  if (rc) FAIL("capture: %s", etch_last_error());
  return buf;
}

static const etch_track_info kFxProc = {
    .uuid = 100, .kind = ETCH_TRACK_PROCESS, .name = "app", .pid = 10};
static const etch_track_info kFxMain = {.uuid = 101, .parent_uuid = 100,
                                        .kind = ETCH_TRACK_THREAD,
                                        .name = "main", .pid = 10, .tid = 10};
static const etch_track_info kFxWorker = {.uuid = 102, .parent_uuid = 100,
                                          .kind = ETCH_TRACK_THREAD,
                                          .name = "worker", .pid = 10,
                                          .tid = 11};
static const etch_track_info kFxQueue = {.uuid = 103, .parent_uuid = 100,
                                         .kind = ETCH_TRACK_NAMED,
                                         .name = "io queue", .pid = 10};
static const etch_track_info kFxHeap = {.uuid = 104, .parent_uuid = 100,
                                        .kind = ETCH_TRACK_COUNTER,
                                        .name = "heap", .pid = 10,
                                        .counter_unit = 3};

static void fx(etch__importer *imp, const etch_track_info *t,
               etch_event_type type, int64_t ts, const char *name,
               const etch_arg *args, size_t nargs, const uint64_t *flow,
               double value) {
  etch_event e = {0};
  e.type = type;
  e.ts = ts;
  e.track = t;
  e.pid = t->pid;
  e.tid = t->tid;
  e.category = type == ETCH_EVENT_SLICE_END ? "" : "app";
  e.name = name ? name : "";
  e.args = args;
  e.args_count = nargs;
  if (flow) {
    e.flow_ids = flow;
    e.flow_ids_count = 1;
  }
  e.counter_is_double = true;
  e.counter_double = value;
  etch__importer_event(imp, &e);
}

etch__db *qt_fixture_db(bool all_args) {
  etch__db *db = qt_new_db();
  etch__importer *imp;
  etch__import_opts o = {.all_args = all_args};
  ASSERT_OK(etch__importer_new(&imp, db, NULL, &o));
  const etch_event_type B = ETCH_EVENT_SLICE_BEGIN, E = ETCH_EVENT_SLICE_END,
                        I = ETCH_EVENT_INSTANT, C = ETCH_EVENT_COUNTER;
  static const uint64_t flow = 77;
  static const etch_arg vsync_args[] = {
      {.flat_key = "debug.frame", .key = "debug.frame",
       .type = ETCH_VALUE_UINT, .v.u = 1},
      {.flat_key = "debug.pos.x", .key = "debug.pos.x",
       .type = ETCH_VALUE_DOUBLE, .v.d = 0.5},
      {.flat_key = "debug.pos.ok", .key = "debug.pos.ok",
       .type = ETCH_VALUE_BOOL, .v.b = true},
      {.flat_key = "debug.ids", .key = "debug.ids[0]",
       .type = ETCH_VALUE_INT, .v.i = -1},
      {.flat_key = "debug.ids", .key = "debug.ids[2]",
       .type = ETCH_VALUE_INT, .v.i = 3},
      {.flat_key = "debug.ptr", .key = "debug.ptr",
       .type = ETCH_VALUE_POINTER, .v.u = 0xbeef},
  };
  static const etch_arg job_args[] = {
      {.flat_key = "debug.path", .key = "debug.path",
       .type = ETCH_VALUE_STRING, .v.s = "a\"b\\c\n\x01\xff/\xc3\xa9"},
  };
  static const etch_arg drop_args[] = {
      {.flat_key = "debug.count", .key = "debug.count",
       .type = ETCH_VALUE_INT, .v.i = 5},
  };
  etch__importer_track(imp, &kFxProc);
  etch__importer_track(imp, &kFxMain);
  etch__importer_track(imp, &kFxWorker);
  etch__importer_track(imp, &kFxQueue);
  etch__importer_track(imp, &kFxHeap);
  fx(imp, &kFxMain, B, 1000, "frame", NULL, 0, &flow, 0);
  fx(imp, &kFxHeap, C, 1000, NULL, NULL, 0, NULL, 100);
  fx(imp, &kFxWorker, E, 1200, NULL, NULL, 0, NULL, 0);
  fx(imp, &kFxWorker, B, 1500, "job", job_args, 1, &flow, 0);
  fx(imp, &kFxMain, B, 2000, "draw", NULL, 0, NULL, 0);
  fx(imp, &kFxQueue, B, 2500, "req", NULL, 0, NULL, 0);
  fx(imp, &kFxMain, I, 3000, "vsync", vsync_args, ETCH_ARRAY_SIZE(vsync_args),
     NULL, 0);
  fx(imp, &kFxHeap, C, 5000, NULL, NULL, 0, NULL, 300);
  fx(imp, &kFxWorker, E, 5500, NULL, NULL, 0, NULL, 0);
  fx(imp, &kFxMain, E, 6000, NULL, NULL, 0, NULL, 0);
  fx(imp, &kFxMain, B, 7000, "draw", NULL, 0, NULL, 0);
  fx(imp, &kFxQueue, E, 8500, NULL, NULL, 0, NULL, 0);
  fx(imp, &kFxMain, E, 9000, NULL, NULL, 0, NULL, 0);
  fx(imp, &kFxMain, E, 11000, NULL, NULL, 0, NULL, 0);
  fx(imp, &kFxMain, B, 12000, "frame", NULL, 0, NULL, 0);
  fx(imp, &kFxMain, B, 13000, "draw", NULL, 0, NULL, 0);
  fx(imp, &kFxMain, E, 14000, NULL, NULL, 0, NULL, 0);
  fx(imp, &kFxHeap, C, 15000, NULL, NULL, 0, NULL, 200);
  fx(imp, &kFxWorker, B, 18000, "wait", NULL, 0, NULL, 0);
  fx(imp, &kFxWorker, I, 19000, "etch.dropped_events", drop_args, 1, NULL, 0);
  fx(imp, &kFxMain, E, 20000, NULL, NULL, 0, NULL, 0);
  etch_reader_stats st = {.track_events = 21, .misplaced_end_event = 1,
                          .previous_packet_dropped = 2};
  ASSERT_OK(etch__importer_finish(imp, &st, 1000, 20000));
  etch__importer_free(imp);
  return db;
}

/*
 * import_test.c - the importer fed with events directly (no reader): exact
 * rows for nesting, instants, open slices, unmatched ends, counters, args,
 * flows, tracks, processes, threads and stats.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "query/query.h"
#include "query/rows.h"
#include "query_test_util.h"
#include "test.h"

static const etch_track_info kProc = {
    .uuid = 1, .kind = ETCH_TRACK_PROCESS, .name = "app", .pid = 10,
    .cmdline = "app --level 3"};
static const etch_track_info kMain = {.uuid = 2,
                                      .parent_uuid = 1,
                                      .kind = ETCH_TRACK_THREAD,
                                      .name = "main",
                                      .pid = 10,
                                      .tid = 10};
static const etch_track_info kWorker = {.uuid = 3,
                                        .parent_uuid = 1,
                                        .kind = ETCH_TRACK_THREAD,
                                        .name = "worker",
                                        .pid = 10,
                                        .tid = 11};
static const etch_track_info kNamed = {.uuid = 4,
                                       .parent_uuid = 1,
                                       .kind = ETCH_TRACK_NAMED,
                                       .name = "io queue",
                                       .pid = 10};
static const etch_track_info kMem = {.uuid = 5,
                                     .parent_uuid = 1,
                                     .kind = ETCH_TRACK_COUNTER,
                                     .name = "heap",
                                     .pid = 10,
                                     .counter_unit = 3};

static etch_event mk(const etch_track_info *t, etch_event_type type,
                     int64_t ts, const char *cat, const char *name) {
  etch_event e = {0};
  e.type = type;
  e.ts = ts;
  e.track = t;
  e.pid = t->pid;
  e.tid = t->tid;
  e.category = cat ? cat : "";
  e.name = name ? name : "";
  return e;
}

static void feed(etch__importer *imp, const etch_track_info *t,
                 etch_event_type type, int64_t ts, const char *cat,
                 const char *name) {
  etch_event e = mk(t, type, ts, cat, name);
  etch__importer_event(imp, &e);
}

TEST(import_nesting_instants_open_and_unmatched) {
  etch__db *db = qt_new_db();
  etch__importer *imp;
  ASSERT_OK(etch__importer_new(&imp, db, NULL, NULL));
  etch__importer_track(imp, &kProc);
  etch__importer_track(imp, &kMain);
  feed(imp, &kMain, ETCH_EVENT_SLICE_END, 90, NULL, NULL); /* unmatched */
  feed(imp, &kMain, ETCH_EVENT_SLICE_BEGIN, 100, "render", "frame");
  feed(imp, &kMain, ETCH_EVENT_SLICE_BEGIN, 110, "render", "draw");
  feed(imp, &kMain, ETCH_EVENT_INSTANT, 115, "render", "vsync");
  feed(imp, &kMain, ETCH_EVENT_SLICE_END, 130, NULL, NULL);
  feed(imp, &kMain, ETCH_EVENT_SLICE_BEGIN, 140, "render", "draw");
  feed(imp, &kMain, ETCH_EVENT_SLICE_END, 150, NULL, NULL);
  feed(imp, &kMain, ETCH_EVENT_SLICE_END, 200, NULL, NULL);
  feed(imp, &kMain, ETCH_EVENT_SLICE_BEGIN, 300, "io", "read");
  feed(imp, &kMain, ETCH_EVENT_SLICE_BEGIN, 350, NULL, "inner");
  ASSERT_OK(etch__importer_finish(imp, NULL, 90, 400));
  etch__import_counts c;
  etch__importer_counts(imp, &c);
  ASSERT_EQ_U64(c.slices, 6);
  ASSERT_EQ_U64(c.instants, 1);
  ASSERT_EQ_U64(c.open_slices, 2);
  ASSERT_EQ_U64(c.unmatched_ends, 1);
  etch__importer_free(imp);

  QT_ASSERT(db,
            "SELECT id, ts, dur, track_id, category, name, depth, parent_id, "
            "arg_set_id, self_dur FROM slice ORDER BY id",
            "id,ts,dur,track_id,category,name,depth,parent_id,arg_set_id,"
            "self_dur\n"
            "1,100,100,2,render,frame,0,,,70\n"
            "2,110,20,2,render,draw,1,1,,20\n"
            "3,115,0,2,render,vsync,2,2,,0\n"
            "4,140,10,2,render,draw,1,1,,10\n"
            "5,300,-1,2,io,read,0,,,50\n"
            "6,350,-1,2,,inner,1,5,,50\n");
  QT_ASSERT(db,
            "SELECT value FROM stats WHERE name = 'misplaced_end_event'",
            "value\n1\n");
  QT_ASSERT(db, "SELECT value FROM stats WHERE name = 'open_slices'",
            "value\n2\n");
  QT_ASSERT(db, "SELECT * FROM trace_bounds",
            "start_ts,end_ts\n90,400\n");
  /* Per-name totals: instants left out, open slices up to the end. */
  QT_ASSERT(db, "SELECT * FROM slice_summary ORDER BY name",
            "name,count,total_dur,self_dur,max_dur\n"
            "draw,2,30,30,20\n"
            "frame,1,100,70,100\n"
            "inner,1,50,50,50\n"
            "read,1,100,50,100\n");
  etch__db_close(db);
}

TEST(import_tracks_processes_threads) {
  etch__db *db = qt_new_db();
  etch__importer *imp;
  ASSERT_OK(etch__importer_new(&imp, db, NULL, NULL));
  /* The thread's events come before its parent's descriptor. */
  feed(imp, &kWorker, ETCH_EVENT_INSTANT, 5, "a", "w");
  etch__importer_track(imp, &kProc);
  etch__importer_track(imp, &kMain);
  feed(imp, &kNamed, ETCH_EVENT_SLICE_BEGIN, 10, "io", "req");
  feed(imp, &kNamed, ETCH_EVENT_SLICE_END, 20, NULL, NULL);
  etch_track_info global = {.uuid = 0, .kind = ETCH_TRACK_GLOBAL, .name = ""};
  feed(imp, &global, ETCH_EVENT_INSTANT, 30, NULL, "g");
  etch_event e = mk(&kMem, ETCH_EVENT_COUNTER, 40, NULL, NULL);
  e.counter_int = 4096;
  etch__importer_event(imp, &e);
  e.ts = 50;
  e.counter_is_double = true;
  e.counter_double = 1.5;
  etch__importer_event(imp, &e);
  ASSERT_OK(etch__importer_finish(imp, NULL, 5, 50));
  etch__importer_free(imp);

  QT_ASSERT(db, "SELECT * FROM process",
            "upid,pid,name,cmdline,start_ts,end_ts,parent_upid,machine_id\n"
            "1,10,app,app --level 3,,,,0\n");
  QT_ASSERT(db, "SELECT * FROM thread ORDER BY utid",
            "utid,tid,name,upid,start_ts,end_ts,is_main_thread,machine_id\n"
            "1,11,worker,1,,,0,0\n"
            "2,10,main,1,,,1,0\n");
  /* No reader told it of machines: the host alone. */
  QT_ASSERT(db, "SELECT id, raw_id, name, sysname FROM machine",
            "id,raw_id,name,sysname\n0,0,,\n");
  QT_ASSERT(db,
            "SELECT id, name, type, parent_id, uuid, utid, upid, unit, "
            "unit_multiplier FROM track ORDER BY id",
            "id,name,type,parent_id,uuid,utid,upid,unit,unit_multiplier\n"
            "1,worker,thread,2,3,1,1,,\n"
            "2,app,process,,1,,1,,\n"
            "3,main,thread,2,2,2,1,,\n"
            "4,io queue,named,2,4,,1,,\n"
            "5,,global,,0,,,,\n"
            "6,heap,counter,2,5,,1,bytes,1\n");
  QT_ASSERT(db, "SELECT id FROM thread_track ORDER BY id", "id\n1\n3\n");
  QT_ASSERT(db, "SELECT id FROM process_track ORDER BY id", "id\n2\n4\n");
  QT_ASSERT(db, "SELECT id, name FROM counter_track", "id,name\n6,heap\n");
  QT_ASSERT(db, "SELECT * FROM counter",
            "id,ts,track_id,value,arg_set_id\n1,40,6,4096.0,\n"
            "2,50,6,1.5,\n");
  QT_ASSERT(db, "SELECT id, track_id, name FROM slice ORDER BY id",
            "id,track_id,name\n1,1,w\n2,4,req\n3,5,g\n");
  etch__db_close(db);
}

TEST(import_args_all_types_and_end_args) {
  etch__db *db = qt_new_db();
  etch__importer *imp;
  etch__import_opts o = {.all_args = true};
  ASSERT_OK(etch__importer_new(&imp, db, NULL, &o));
  etch_arg args[] = {
      {.flat_key = "debug.b", .key = "debug.b", .type = ETCH_VALUE_BOOL,
       .v.b = true},
      {.flat_key = "debug.i", .key = "debug.i", .type = ETCH_VALUE_INT,
       .v.i = -5},
      {.flat_key = "debug.u", .key = "debug.u", .type = ETCH_VALUE_UINT,
       .v.u = 7},
      {.flat_key = "debug.d", .key = "debug.d", .type = ETCH_VALUE_DOUBLE,
       .v.d = 0.25},
      {.flat_key = "debug.s", .key = "debug.s", .type = ETCH_VALUE_STRING,
       .v.s = "hi, \"you\""},
      {.flat_key = "debug.p", .key = "debug.p", .type = ETCH_VALUE_POINTER,
       .v.u = 0x1000},
      {.flat_key = "debug.j", .key = "debug.j", .type = ETCH_VALUE_JSON,
       .v.s = "{\"a\":1}"},
      {.flat_key = "debug.req.ids", .key = "debug.req.ids[0]",
       .type = ETCH_VALUE_INT, .v.i = 1},
      {.flat_key = "debug.req.ids", .key = "debug.req.ids[1]",
       .type = ETCH_VALUE_INT, .v.i = 2},
  };
  etch_event e = mk(&kMain, ETCH_EVENT_SLICE_BEGIN, 10, "c", "s");
  e.args = args;
  e.args_count = ETCH_ARRAY_SIZE(args);
  etch__importer_event(imp, &e);
  etch_arg end_arg = {.flat_key = "debug.result", .key = "debug.result",
                      .type = ETCH_VALUE_STRING, .v.s = "ok"};
  e = mk(&kMain, ETCH_EVENT_SLICE_END, 20, NULL, NULL);
  e.args = &end_arg;
  e.args_count = 1;
  etch__importer_event(imp, &e);
  /* An instant with args of its own. */
  e = mk(&kMain, ETCH_EVENT_INSTANT, 30, "c", "i");
  e.args = &end_arg;
  e.args_count = 1;
  etch__importer_event(imp, &e);
  ASSERT_OK(etch__importer_finish(imp, NULL, 10, 30));
  etch__importer_free(imp);

  QT_ASSERT(db, "SELECT id, arg_set_id FROM slice", "id,arg_set_id\n1,1\n2,2\n");
  QT_ASSERT(db,
            "SELECT arg_set_id, flat_key, key, int_value, string_value, "
            "real_value, value_type FROM args ORDER BY id",
            "arg_set_id,flat_key,key,int_value,string_value,real_value,"
            "value_type\n"
            "1,debug.b,debug.b,1,,,bool\n"
            "1,debug.i,debug.i,-5,,,int\n"
            "1,debug.u,debug.u,7,,,uint\n"
            "1,debug.d,debug.d,,,0.25,real\n"
            "1,debug.s,debug.s,,\"hi, \"\"you\"\"\",,string\n"
            "1,debug.p,debug.p,4096,,,pointer\n"
            "1,debug.j,debug.j,,\"{\"\"a\"\":1}\",,json\n"
            "1,debug.req.ids,debug.req.ids[0],1,,,int\n"
            "1,debug.req.ids,debug.req.ids[1],2,,,int\n"
            "1,debug.result,debug.result,,ok,,string\n"
            "2,debug.result,debug.result,,ok,,string\n");
  etch__db_close(db);
}

TEST(import_without_all_args_keeps_etch_reports_only) {
  etch__db *db = qt_new_db();
  etch__importer *imp;
  ASSERT_OK(etch__importer_new(&imp, db, NULL, NULL));
  etch_arg count = {.flat_key = "debug.count", .key = "debug.count",
                    .type = ETCH_VALUE_INT, .v.i = 42};
  etch_event e = mk(&kMain, ETCH_EVENT_INSTANT, 10, "app", "x");
  e.args = &count;
  e.args_count = 1;
  etch__importer_event(imp, &e);
  e = mk(&kMain, ETCH_EVENT_INSTANT, 20, "etch", "etch.dropped_events");
  e.args = &count;
  e.args_count = 1;
  etch__importer_event(imp, &e);
  ASSERT_OK(etch__importer_finish(imp, NULL, 10, 20));
  etch__importer_free(imp);
  QT_ASSERT(db, "SELECT name, arg_set_id FROM slice ORDER BY id",
            "name,arg_set_id\nx,\netch.dropped_events,1\n");
  QT_ASSERT(db, "SELECT count(*) FROM args", "count_star()\n1\n");
  etch__db_close(db);
}

TEST(import_flows_chain_terminate_and_end) {
  etch__db *db = qt_new_db();
  etch__importer *imp;
  ASSERT_OK(etch__importer_new(&imp, db, NULL, NULL));
  uint64_t f1 = 0xabcdef0123456789ull, f2 = 7;
  /* slice 1 (main) -> slice 2 (worker) -> instant 3 (main), which ends f1;
   * slice 4 carries f2 on its END, slice 5 receives it. */
  etch_event e = mk(&kMain, ETCH_EVENT_SLICE_BEGIN, 10, "c", "post");
  e.flow_ids = &f1;
  e.flow_ids_count = 1;
  etch__importer_event(imp, &e);
  feed(imp, &kMain, ETCH_EVENT_SLICE_END, 20, NULL, NULL);
  e = mk(&kWorker, ETCH_EVENT_SLICE_BEGIN, 30, "c", "run");
  e.flow_ids = &f1;
  e.flow_ids_count = 1;
  etch__importer_event(imp, &e);
  feed(imp, &kWorker, ETCH_EVENT_SLICE_END, 40, NULL, NULL);
  e = mk(&kMain, ETCH_EVENT_INSTANT, 50, "c", "done");
  e.terminating_flow_ids = &f1;
  e.terminating_flow_ids_count = 1;
  etch__importer_event(imp, &e);
  /* f1 ended: a new use starts a new chain, linked to nothing before. */
  e = mk(&kMain, ETCH_EVENT_INSTANT, 55, "c", "again");
  e.flow_ids = &f1;
  e.flow_ids_count = 1;
  etch__importer_event(imp, &e);
  feed(imp, &kWorker, ETCH_EVENT_SLICE_BEGIN, 60, "c", "send");
  e = mk(&kWorker, ETCH_EVENT_SLICE_END, 70, NULL, NULL);
  e.flow_ids = &f2;
  e.flow_ids_count = 1;
  etch__importer_event(imp, &e);
  e = mk(&kMain, ETCH_EVENT_SLICE_BEGIN, 80, "c", "recv");
  e.terminating_flow_ids = &f2;
  e.terminating_flow_ids_count = 1;
  etch__importer_event(imp, &e);
  feed(imp, &kMain, ETCH_EVENT_SLICE_END, 90, NULL, NULL);
  ASSERT_OK(etch__importer_finish(imp, NULL, 10, 90));
  etch__importer_free(imp);
  QT_ASSERT(db, "SELECT id, name FROM slice ORDER BY id",
            "id,name\n1,post\n2,run\n3,done\n4,again\n5,send\n6,recv\n");
  QT_ASSERT(db, "SELECT id, slice_out, slice_in FROM flow ORDER BY id",
            "id,slice_out,slice_in\n1,1,2\n2,2,3\n3,5,6\n");
  etch__db_close(db);
}

/*
 * Many rows, so that they cross the row writer's batches (8192 rows) and
 * its multi-row statements: two thread tracks interleaved in blocks, a
 * slice open from the first event to the last (its row comes after every
 * other), one still open at the end, a named track whose events come at
 * the end (as the reader's per-track order delivers them), counters, begin
 * and end args. Every slice and arg row is checked against a model.
 */
typedef struct model_row {
  int64_t ts, dur, track, depth, parent, self;
} model_row;

typedef struct model_track {
  const etch_track_info *t;
  int64_t uuid;
  int depth;
  int64_t sid[16], sts[16], child[16];
  int64_t args[16]; /* arg set id of the open slice, 0 = none */
} model_track;

typedef struct model {
  model_row *rows; /* by slice id - 1 */
  int64_t nids;    /* ids given to thread-track slices */
  int64_t held[4096][2]; /* named track: (local index, row) until finish */
  int64_t *arg_set; /* arg rows in insertion order: set id, value */
  int64_t *arg_val;
  size_t nargs;
  int64_t next_set;
} model;

static void model_close(model *m, model_track *mt, int64_t end, bool open) {
  int d = --mt->depth;
  int64_t id = mt->sid[d], dur = end - mt->sts[d];
  if (d) mt->child[d - 1] += dur;
  m->rows[id - 1] = (model_row){.ts = mt->sts[d],
                                .dur = open ? -1 : dur,
                                .track = mt->uuid,
                                .depth = d,
                                .parent = d ? mt->sid[d - 1] : 0,
                                .self = dur - mt->child[d]};
}

static void model_arg(model *m, int64_t set, int64_t v) {
  m->arg_set[m->nargs] = set;
  m->arg_val[m->nargs++] = v;
}

TEST(import_many_rows_across_chunks) {
  enum { kEvents = 60000 };
  etch__db *db = qt_new_db();
  etch__importer *imp;
  etch__import_opts o = {.all_args = true, .file_order = true};
  ASSERT_OK(etch__importer_new(&imp, db, NULL, &o));
  model *m = calloc(1, sizeof *m);
  m->rows = calloc(kEvents, sizeof *m->rows);
  m->arg_set = calloc(kEvents, sizeof *m->arg_set);
  m->arg_val = calloc(kEvents, sizeof *m->arg_val);
  ASSERT_TRUE(m->rows && m->arg_set && m->arg_val);
  /* Slices name their track by uuid. */
  model_track mt[2] = {{.t = &kMain, .uuid = 2}, {.t = &kWorker, .uuid = 3}};
  int64_t named_ts[4096], named_end[4096];
  size_t nnamed = 0;
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  int64_t ts = 100, counters = 0;
  etch_arg arg = {.flat_key = "debug.v", .key = "debug.v",
                  .type = ETCH_VALUE_INT};
  for (int i = 0; i < kEvents; i++) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    uint32_t r = (uint32_t)(rng >> 20);
    ts += 1 + (r & 7);
    /* Blocks of 700 events per thread, as chunks come. */
    model_track *t = &mt[(i / 700) & 1];
    etch_event e;
    bool first = i == 0, last = i == kEvents - 1;
    if (!first && !last && (r % 97) == 0 && nnamed < 4096) {
      /* A short slice on the named track: the reader's per-track order
       * announces the track now and delivers its events at the end. */
      if (!nnamed) etch__importer_track(imp, &kNamed);
      named_ts[nnamed] = ts;
      named_end[nnamed++] = ts + 3;
      ts += 3; /* no overlap: the next one does not nest */
      continue;
    }
    if (!first && !last && (r % 53) == 0) {
      e = mk(&kMem, ETCH_EVENT_COUNTER, ts, NULL, NULL);
      e.counter_int = (int64_t)r;
      etch__importer_event(imp, &e);
      counters++;
      continue;
    }
    /* The root of main stays open until the last event; worker's last
     * slice stays open at the end. */
    bool end = !first && t->depth > (t == &mt[0] ? 1 : 0) &&
               (t->depth >= 12 || (r & 3) < 2);
    if (last) end = true;
    if (end) {
      e = mk(t->t, ETCH_EVENT_SLICE_END, ts, NULL, NULL);
      bool with_arg = (r >> 8) % 5 == 0;
      if (with_arg) {
        arg.v.i = (int64_t)i;
        e.args = &arg;
        e.args_count = 1;
        int64_t *set = &t->args[t->depth - 1];
        if (!*set) *set = ++m->next_set;
        model_arg(m, *set, i);
      }
      etch__importer_event(imp, &e);
      model_close(m, t, ts, false);
    } else if ((r >> 4) % 16 == 0) {
      feed(imp, t->t, ETCH_EVENT_INSTANT, ts, "c", "tick");
      int64_t id = ++m->nids;
      m->rows[id - 1] = (model_row){
          .ts = ts, .track = t->uuid, .depth = t->depth,
          .parent = t->depth ? t->sid[t->depth - 1] : 0};
    } else {
      e = mk(t->t, ETCH_EVENT_SLICE_BEGIN, ts, "c", (r & 8) ? "a" : "b");
      bool with_arg = (r >> 12) % 8 == 0;
      if (with_arg) {
        arg.v.i = (int64_t)i;
        e.args = &arg;
        e.args_count = 1;
      }
      etch__importer_event(imp, &e);
      int d = t->depth++;
      t->sid[d] = ++m->nids;
      t->sts[d] = ts;
      t->child[d] = 0;
      t->args[d] = 0;
      if (with_arg) {
        t->args[d] = ++m->next_set;
        model_arg(m, t->args[d], i);
      }
      if (first) {
        /* Worker's first slice too, so that it has one open at the end. */
        e = mk(&kWorker, ETCH_EVENT_SLICE_BEGIN, ts, "c", "open");
        e.args_count = 0;
        etch__importer_event(imp, &e);
        mt[1].sid[0] = ++m->nids;
        mt[1].sts[0] = ts;
        mt[1].child[0] = 0;
        mt[1].args[0] = 0;
        mt[1].depth = 1;
      }
    }
  }
  for (size_t k = 0; k < nnamed; k++) {
    feed(imp, &kNamed, ETCH_EVENT_SLICE_BEGIN, named_ts[k], "io", "req");
    feed(imp, &kNamed, ETCH_EVENT_SLICE_END, named_end[k], NULL, NULL);
  }
  /* Open at the end: dur -1, self time up to the trace's end (ts). */
  for (int k = 0; k < 2; k++)
    while (mt[k].depth) model_close(m, &mt[k], ts, true);
  /* The named track's slices get their ids after every other. */
  for (size_t k = 0; k < nnamed; k++)
    m->rows[m->nids + (int64_t)k] = (model_row){
        .ts = named_ts[k], .dur = named_end[k] - named_ts[k], .track = 4,
        .self = named_end[k] - named_ts[k]};
  int64_t nslices = m->nids + (int64_t)nnamed;
  ASSERT_OK(etch__importer_finish(imp, NULL, 100, ts));
  etch__importer_free(imp);

  etch__res st;
  ASSERT_OK(etch__res_query(db,
                            "SELECT s.id, s.ts, s.dur, t.uuid, s.depth, "
                            "coalesce(s.parent_id, 0), s.self_dur "
                            "FROM slice s JOIN track t "
                            "ON t.id = s.track_id ORDER BY s.id",
                            "test", &st));
  int64_t n = 0;
  while (etch__res_next(&st)) {
    const model_row *w = &m->rows[n++];
    int64_t got[7], want[7] = {n,        w->ts,    w->dur,  w->track,
                               w->depth, w->parent, w->self};
    for (int c = 0; c < 7; c++) got[c] = etch__res_i64(&st, (idx_t)c);
    if (memcmp(got, want, sizeof got) != 0)
      FAIL("slice row %lld: got %lld,%lld,%lld,%lld,%lld,%lld,%lld want "
           "%lld,%lld,%lld,%lld,%lld,%lld,%lld",
           (long long)n, (long long)got[0], (long long)got[1],
           (long long)got[2], (long long)got[3], (long long)got[4],
           (long long)got[5], (long long)got[6], (long long)want[0],
           (long long)want[1], (long long)want[2], (long long)want[3],
           (long long)want[4], (long long)want[5], (long long)want[6]);
  }
  ASSERT_OK(etch__res_close(&st));
  ASSERT_EQ_INT(n, nslices);
  ASSERT_TRUE(nslices > 3 * 8192);
  /* The table holds them in id order: a scan without ORDER BY reads ids
   * 1, 2, 3... */
  ASSERT_OK(etch__res_query(db, "SELECT id FROM slice", "test", &st));
  n = 0;
  while (etch__res_next(&st)) ASSERT_EQ_INT(etch__res_i64(&st, 0), ++n);
  ASSERT_OK(etch__res_close(&st));
  ASSERT_EQ_INT(n, nslices);

  ASSERT_OK(etch__res_query(db,
                            "SELECT id, arg_set_id, int_value FROM args "
                            "ORDER BY id",
                            "test", &st));
  size_t na = 0;
  while (etch__res_next(&st)) {
    ASSERT_TRUE(na < m->nargs);
    ASSERT_EQ_INT(etch__res_i64(&st, 0), (int64_t)na + 1);
    ASSERT_EQ_INT(etch__res_i64(&st, 1), m->arg_set[na]);
    ASSERT_EQ_INT(etch__res_i64(&st, 2), m->arg_val[na]);
    na++;
  }
  ASSERT_OK(etch__res_close(&st));
  ASSERT_EQ_INT(na, m->nargs);
  /* Every slice's arg set holds its args (begin and end together). */
  char *got = qt_query(db,
                       "SELECT count(*) FROM args a LEFT JOIN slice s "
                       "ON s.arg_set_id = a.arg_set_id WHERE s.id IS NULL");
  ASSERT_EQ_STR(got, "count_star()\n0\n");
  free(got);
  char want[64];
  snprintf(want, sizeof want, "count_star()\n%lld\n", (long long)counters);
  got = qt_query(db,
                 "SELECT count(*) FROM counter c JOIN track t "
                 "ON t.id = c.track_id WHERE t.uuid = 5");
  ASSERT_EQ_STR(got, want);
  free(got);
  free(m->rows);
  free(m->arg_set);
  free(m->arg_val);
  free(m);
  etch__db_close(db);
}

TEST(import_free_without_finish) {
  /* An importer freed without finishing leaves the database usable (its
   * rows are undefined). */
  etch__db *db = qt_new_db();
  etch__importer *imp;
  ASSERT_OK(etch__importer_new(&imp, db, NULL, NULL));
  feed(imp, &kMain, ETCH_EVENT_INSTANT, 1, NULL, "a");
  etch__importer_free(imp);
  QT_ASSERT(db, "SELECT count(*) AS n FROM track", "n\n0\n");
  etch__db_close(db);
}

/* The import runs DuckDB's queries (each appender flush is one) on one
 * thread, and gives the database its threads back when it ends, finished
 * or not. */
TEST(import_runs_duckdb_on_one_thread_and_restores_it) {
  etch__db *db = qt_new_db();
  char *before = qt_query(db, "SELECT current_setting('threads') AS t");
  ASSERT_TRUE(strcmp(before, "t\n1\n") != 0 || sysconf(_SC_NPROCESSORS_ONLN) == 1);
  for (int finish = 0; finish < 2; finish++) {
    etch__importer *imp;
    ASSERT_OK(etch__importer_new(&imp, db, NULL, NULL));
    QT_ASSERT(db, "SELECT current_setting('threads') AS t", "t\n1\n");
    feed(imp, &kMain, ETCH_EVENT_INSTANT, 1, NULL, "a");
    if (finish) ASSERT_OK(etch__importer_finish(imp, NULL, 1, 1));
    etch__importer_free(imp);
    QT_ASSERT(db, "SELECT current_setting('threads') AS t", before);
  }
  free(before);
  /* A number of threads set by hand is what comes back. */
  ASSERT_OK(etch__db_exec(db, "SET threads = 3;"));
  etch__importer *imp;
  ASSERT_OK(etch__importer_new(&imp, db, NULL, NULL));
  QT_ASSERT(db, "SELECT current_setting('threads') AS t", "t\n1\n");
  ASSERT_OK(etch__importer_finish(imp, NULL, 1, 1));
  etch__importer_free(imp);
  QT_ASSERT(db, "SELECT current_setting('threads') AS t", "t\n3\n");
  etch__db_close(db);
}

/* A slice open while more than the reorder window's 65,536 later slices
 * end: the others stay in id order, its row comes after them. */
TEST(import_slice_open_past_the_window_comes_last) {
  enum { kChildren = 70000 };
  etch__db *db = qt_new_db();
  etch__importer *imp;
  ASSERT_OK(etch__importer_new(&imp, db, NULL, NULL));
  feed(imp, &kMain, ETCH_EVENT_SLICE_BEGIN, 1, "c", "root");
  for (int i = 0; i < kChildren; i++) {
    feed(imp, &kMain, ETCH_EVENT_SLICE_BEGIN, 10 + 10 * i, "c", "child");
    feed(imp, &kMain, ETCH_EVENT_SLICE_END, 15 + 10 * i, NULL, NULL);
  }
  feed(imp, &kMain, ETCH_EVENT_SLICE_END, 10 * kChildren + 20, NULL, NULL);
  ASSERT_OK(etch__importer_finish(imp, NULL, 1, 10 * kChildren + 20));
  etch__importer_free(imp);
  etch__res st;
  ASSERT_OK(etch__res_query(db, "SELECT id, depth FROM slice", "test", &st));
  int64_t n = 0;
  while (etch__res_next(&st)) {
    n++;
    int64_t want = n <= kChildren ? n + 1 : 1;
    ASSERT_EQ_INT(etch__res_i64(&st, 0), want);
    ASSERT_EQ_INT(etch__res_i64(&st, 1), want == 1 ? 0 : 1);
  }
  ASSERT_OK(etch__res_close(&st));
  ASSERT_EQ_INT(n, kChildren + 1);
  etch__db_close(db);
}

/* ---- a table writer's appending thread (table_writer.c) ------------------ */

static char *tmp_db_path(const char *name) {
  char *p;
  if (asprintf(&p, "%s/%s", etch_test_tmpdir(), name) < 0) abort();
  return p;
}

/* Rows through the pipe's chunks many times round, into a file (the
 * pipe's own transaction) and in memory: every row, in order. */
TEST(piped_writer_appends_every_row_in_order) {
  char *path = tmp_db_path("piped.duckdb");
  for (int file = 0; file < 2; file++) {
    etch__db *db;
    ASSERT_OK(etch__db_open(&db, file ? path : NULL));
    ASSERT_OK(etch__db_exec(db, "CREATE TABLE t(a BIGINT NOT NULL, s VARCHAR);"));
    static const etch__col kCols[] = {ETCH__COL_I64, ETCH__COL_STR};
    etch__tw w;
    ASSERT_OK(etch__tw_open_piped(&w, db, NULL, "t", kCols, 2));
    for (int64_t i = 0; i < 50000; i++) {
      etch__tw_i64(&w, 0, i);
      if (i % 3)
        etch__tw_cstr(&w, 1, i % 3 == 1 ? "one" : "two");
      else
        etch__tw_null(&w, 1);
      etch__tw_end_row(&w);
    }
    etch__tw_finish_start(&w);
    ASSERT_OK(etch__tw_finish(&w));
    QT_ASSERT(db,
              "SELECT count(*) AS n, sum(a) AS s, count(s) AS k, "
              "bool_and(a = r - 1) AS ordered FROM "
              "(SELECT a, s, row_number() OVER () AS r FROM t)",
              "n,s,k,ordered\n50000,1249975000,33333,1\n");
    etch__db_close(db);
  }
  free(path);
}

/* A row the table refuses: the failure on the pipe's thread comes back
 * from etch__tw_finish with DuckDB's message; into a file, nothing of the
 * pipe's transaction stays. */
TEST(piped_writer_reports_an_append_failure) {
  char *path = tmp_db_path("piped_fail.duckdb");
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, path));
  ASSERT_OK(etch__db_exec(db, "CREATE TABLE t(a BIGINT NOT NULL);"));
  static const etch__col kCols[] = {ETCH__COL_I64};
  etch__tw w;
  ASSERT_OK(etch__tw_open_piped(&w, db, NULL, "t", kCols, 1));
  for (int64_t i = 0; i < 10000; i++) {
    if (i == 5000)
      etch__tw_null(&w, 0);
    else
      etch__tw_i64(&w, 0, i);
    etch__tw_end_row(&w);
  }
  ASSERT_EQ_INT(etch__tw_finish(&w), ETCH_ESQL);
  ASSERT_TRUE(strstr(etch_last_error(), "NOT NULL") != NULL);
  QT_ASSERT(db, "SELECT count(*) AS n FROM t", "n\n0\n");
  etch__db_close(db);
  free(path);
}

/* A writer freed without finishing (the import failed elsewhere): its
 * thread stops, the pipe's transaction is dropped, the database goes on. */
TEST(piped_writer_freed_without_finish_drops_its_rows) {
  char *path = tmp_db_path("piped_free.duckdb");
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, path));
  ASSERT_OK(etch__db_exec(db, "CREATE TABLE t(a BIGINT);"));
  static const etch__col kCols[] = {ETCH__COL_I64};
  etch__tw w;
  ASSERT_OK(etch__tw_open_piped(&w, db, NULL, "t", kCols, 1));
  for (int64_t i = 0; i < 20000; i++) {
    etch__tw_i64(&w, 0, i);
    etch__tw_end_row(&w);
  }
  etch__tw_free(&w);
  QT_ASSERT(db, "SELECT count(*) AS n FROM t", "n\n0\n");
  ASSERT_OK(etch__db_exec(db, "INSERT INTO t VALUES (7);"));
  QT_ASSERT(db, "SELECT sum(a) AS n FROM t", "n\n7\n");
  etch__db_close(db);
  free(path);
}

/* A table that is not there: the open fails with its name. */
TEST(piped_writer_open_of_a_missing_table_fails) {
  etch__db *db = qt_new_db();
  static const etch__col kCols[] = {ETCH__COL_I64};
  etch__tw w;
  ASSERT_EQ_INT(etch__tw_open_piped(&w, db, NULL, "nope", kCols, 1),
                ETCH_ESQL);
  ASSERT_TRUE(strstr(etch_last_error(), "nope") != NULL);
  etch__tw_free(&w);
  etch__db_close(db);
}

/* A piped writer's rows reach DuckDB through the table function
 * etch__pipe(token); SQL that calls it with a token that names no live pipe
 * (a finished one, or any number) gets an error, not freed memory. */
TEST(piped_writer_function_refuses_other_tokens) {
  etch__db *db = qt_new_db();
  ASSERT_OK(etch__db_exec(db, "CREATE TABLE t(a BIGINT);"));
  static const etch__col kCols[] = {ETCH__COL_I64};
  etch__tw w;
  ASSERT_OK(etch__tw_open_piped(&w, db, NULL, "t", kCols, 1));
  for (int64_t i = 1; i <= 3000; i++) {
    etch__tw_i64(&w, 0, i);
    etch__tw_end_row(&w);
  }
  ASSERT_OK(etch__tw_finish(&w));
  QT_ASSERT(db, "SELECT count(*) AS n, sum(a) AS s FROM t",
            "n,s\n3000,4501500\n");
  static const char *const kCalls[] = {
      "SELECT * FROM etch__pipe(0)", "SELECT * FROM etch__pipe(1)",
      "SELECT * FROM etch__pipe(-5)", "SELECT * FROM etch__pipe(1099511627776)"};
  for (size_t i = 0; i < sizeof kCalls / sizeof kCalls[0]; i++) {
    ASSERT_EQ_INT(etch__db_exec(db, kCalls[i]), ETCH_ESQL);
    ASSERT_TRUE(strstr(etch_last_error(), "not an import's pipe") != NULL);
  }
  etch__db_close(db);
}

/* SQL run on the database while a pipe is live cannot name it by
 * guessing: its token is random, not a count (the first pipe of a process
 * had token 1, the next 2, ...). DESCRIBE binds the function without
 * running it. */
TEST(piped_writer_token_is_not_guessable) {
  etch__db *db = qt_new_db();
  ASSERT_OK(etch__db_exec(db, "CREATE TABLE t(a BIGINT);"));
  static const etch__col kCols[] = {ETCH__COL_I64};
  etch__tw w[2];
  ASSERT_OK(etch__tw_open_piped(&w[0], db, NULL, "t", kCols, 1));
  ASSERT_OK(etch__tw_open_piped(&w[1], db, NULL, "t", kCols, 1));
  for (int64_t i = -2; i <= 4096; i++) {
    char sql[96];
    snprintf(sql, sizeof sql, "DESCRIBE SELECT * FROM etch__pipe(%lld)",
             (long long)i);
    ASSERT_EQ_INT(etch__db_exec(db, sql), ETCH_ESQL);
    ASSERT_TRUE(strstr(etch_last_error(), "not an import's pipe") != NULL);
  }
  for (int k = 0; k < 2; k++) {
    etch__tw_i64(&w[k], 0, k + 1);
    etch__tw_end_row(&w[k]);
    ASSERT_OK(etch__tw_finish(&w[k]));
  }
  QT_ASSERT(db, "SELECT count(*) AS n, sum(a) AS s FROM t", "n,s\n2,3\n");
  etch__db_close(db);
}

/* While an import runs, DuckDB writes each row group into the file as
 * soon as it is full (write_buffer_row_group_count 1, not 5: a 10 M-event
 * first query peaked at 272 MB, 196 MB with it), and the setting is given
 * back after. */
TEST(import_writes_each_row_group_when_full) {
  char *path = tmp_db_path("row_group_buffer.duckdb");
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, path));
  ASSERT_OK(etch__query_schema_create(db, NULL));
  QT_ASSERT(db, "SELECT current_setting('write_buffer_row_group_count') AS w",
            "w\n5\n");
  etch__importer *imp;
  ASSERT_OK(etch__importer_new(&imp, db, NULL, NULL));
  QT_ASSERT(db, "SELECT current_setting('write_buffer_row_group_count') AS w",
            "w\n1\n");
  feed(imp, &kMain, ETCH_EVENT_SLICE_BEGIN, 10, "c", "s");
  feed(imp, &kMain, ETCH_EVENT_SLICE_END, 15, NULL, NULL);
  ASSERT_OK(etch__importer_finish(imp, NULL, 1, 20));
  etch__importer_free(imp);
  QT_ASSERT(db, "SELECT current_setting('write_buffer_row_group_count') AS w",
            "w\n5\n");
  QT_ASSERT(db, "SELECT count(*) AS n FROM slice_data", "n\n1\n");
  etch__db_close(db);
  free(path);
}

/* Into a file, the import leaves RLE out of DuckDB's choice of a
 * compression (its analysis is a twentieth of the import's CPU) for the
 * row groups it writes, and sets the choice back after: slice_data's
 * track_id, in two long runs here, is bit-packed instead. It is stored
 * as the third field of slice_rows' STRUCT x (column path [1, 3]: the
 * STRUCT's validity is [1, 0], its fields [1, 1] on). */
TEST(import_writes_its_row_groups_without_rle) {
  enum { kPerTrack = 70000 };
  char *path = tmp_db_path("no_rle.duckdb");
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, path));
  ASSERT_OK(etch__query_schema_create(db, NULL));
  etch__importer *imp;
  ASSERT_OK(etch__importer_new(&imp, db, NULL, NULL));
  QT_ASSERT(db,
            "SELECT lower(current_setting('disabled_compression_methods')) "
            "AS d",
            "d\nrle\n");
  int64_t ts = 1;
  for (int t = 0; t < 2; t++) {
    for (int i = 0; i < kPerTrack; i++, ts += 10) {
      feed(imp, t ? &kWorker : &kMain, ETCH_EVENT_SLICE_BEGIN, ts, "c", "s");
      feed(imp, t ? &kWorker : &kMain, ETCH_EVENT_SLICE_END, ts + 5, NULL,
           NULL);
    }
  }
  ASSERT_OK(etch__importer_finish(imp, NULL, 1, ts));
  etch__importer_free(imp);
  QT_ASSERT(db, "SELECT current_setting('disabled_compression_methods') AS d",
            "d\n\n");
  QT_ASSERT(db,
            "SELECT count(*) AS n, count(DISTINCT track_id) AS t "
            "FROM slice_data",
            "n,t\n140000,2\n");
  /* The first row group (122,880 rows) was written by the import. */
  QT_ASSERT(db,
            "SELECT compression AS c FROM pragma_storage_info('slice_rows') "
            "WHERE row_group_id = 0 AND column_name = 'x' "
            "AND column_path = '[1, 3]' AND segment_type = 'BIGINT'",
            "c\nBitPacking\n");
  etch__db_close(db);
  free(path);
}

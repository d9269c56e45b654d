/*
 * trace_test.c - golden traces built byte by byte, read by the reader and
 * imported: exact table contents for nesting, instants, counters, args
 * (nested dicts and arrays), flows, open slices, misplaced ends, several
 * processes and threads, named and counter tracks with parents, interning
 * and compressed packets; a corrupt trace fails with its offset.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "query/query.h"
#include "query_test_util.h"
#include "test.h"
#include "trace_build.h"

enum {
  kProc = 1,
  kMain = 2,
  kWorker = 3,
  kOther = 4,
  kT21 = 5,
  kQueue = 6,
  kHeap = 7,
  kDepth = 8
};

/* A debug annotation with an inline name, left open for its value. */
static void da_open(tb *t, const char *name) {
  tb_open(t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_s(t, ETCH_DA_NAME, name);
}

/* The trace of the big golden test; see the expected rows below. */
static void build_basic(tb *t) {
  tb_process(t, 1, kProc, 10, "app");
  tb_thread(t, 1, kMain, 10, 10, "main");
  tb_thread(t, 2, kWorker, 10, 11, "worker");
  tb_process(t, 3, kOther, 20, "other");
  tb_thread(t, 3, kT21, 20, 21, "t21");
  tb_named_track(t, 1, kQueue, kProc, "io queue");
  tb_counter_track(t, 1, kHeap, kProc, "heap", ETCH_CD_UNIT_SIZE_BYTES);
  tb_counter_track(t, 1, kDepth, kQueue, "depth", ETCH_CD_UNIT_COUNT);

  const int B = ETCH_TE_TYPE_SLICE_BEGIN, E = ETCH_TE_TYPE_SLICE_END,
            I = ETCH_TE_TYPE_INSTANT;
  tb_event_open(t, 1, 1000, kMain, B, "render", "frame");
  tb_f64(t, ETCH_TE_FLOW_IDS, 9);
  tb_event_close(t);
  tb_counter(t, 1, 1000, kHeap, 100);
  tb_counter_double(t, 1, 1000, kDepth, 1.5);
  tb_event(t, 3, 1000, kT21, B, "x", "x");
  tb_event(t, 1, 1200, kQueue, B, "io", "req");
  tb_event(t, 2, 1500, kWorker, E, NULL, NULL); /* no begin */

  tb_event_open(t, 1, 2000, kMain, B, "render", "draw");
  da_open(t, "n");
  tb_u(t, ETCH_DA_INT_VALUE, 3);
  tb_close(t);
  da_open(t, "s");
  tb_s(t, ETCH_DA_STRING_VALUE, "a,b");
  tb_close(t);
  da_open(t, "cfg");
  tb_open(t, ETCH_DA_DICT_ENTRIES);
  tb_s(t, ETCH_DA_NAME, "w");
  tb_u(t, ETCH_DA_INT_VALUE, 640);
  tb_close(t);
  tb_open(t, ETCH_DA_DICT_ENTRIES);
  tb_s(t, ETCH_DA_NAME, "tags");
  tb_open(t, ETCH_DA_ARRAY_VALUES);
  tb_s(t, ETCH_DA_STRING_VALUE, "x");
  tb_close(t);
  tb_open(t, ETCH_DA_ARRAY_VALUES);
  tb_s(t, ETCH_DA_STRING_VALUE, "y");
  tb_close(t);
  tb_close(t);
  tb_close(t);
  da_open(t, "ok");
  tb_u(t, ETCH_DA_BOOL_VALUE, 1);
  tb_close(t);
  da_open(t, "r");
  tb_d(t, ETCH_DA_DOUBLE_VALUE, 0.5);
  tb_close(t);
  da_open(t, "u");
  tb_u(t, ETCH_DA_UINT_VALUE, 7);
  tb_close(t);
  da_open(t, "p");
  tb_u(t, ETCH_DA_POINTER_VALUE, 16);
  tb_close(t);
  tb_event_close(t);

  tb_event_open(t, 2, 2000, kWorker, B, "work", "job");
  tb_f64(t, ETCH_TE_TERMINATING_FLOW_IDS, 9);
  tb_event_close(t);
  tb_counter(t, 1, 2000, kHeap, 250);
  tb_event(t, 1, 2200, kQueue, E, NULL, NULL);
  tb_event(t, 1, 2500, kMain, I, "render", "vsync");
  tb_event(t, 1, 3000, kMain, E, NULL, NULL);
  tb_event(t, 2, 3500, kWorker, E, NULL, NULL);
  tb_event(t, 3, 4000, kT21, E, NULL, NULL);
  tb_event(t, 1, 5000, kMain, E, NULL, NULL);
  tb_event(t, 1, 6000, kMain, B, "render", "open");
}

static etch__db *import(const tb *t) {
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  etch__import_opts o = {.all_args = true,
                         .timestamp_order = true};
  ASSERT_OK(etch__query_import_memory(db, tb_data(t), tb_len(t), "test", &o,
                                     NULL));
  return db;
}

TEST(trace_slices_nesting_open_and_misplaced) {
  tb t;
  tb_init(&t);
  build_basic(&t);
  etch__db *db = import(&t);
  QT_ASSERT(db,
            "SELECT s.ts, s.dur, tr.name AS track, s.category, s.name, "
            "s.depth, p.name AS parent, s.self_dur FROM slice s "
            "JOIN track tr ON s.track_id = tr.id "
            "LEFT JOIN slice p ON s.parent_id = p.id ORDER BY s.ts, s.name",
            "ts,dur,track,category,name,depth,parent,self_dur\n"
            "1000,4000,main,render,frame,0,,3000\n"
            "1000,3000,t21,x,x,0,,3000\n"
            "1200,1000,io queue,io,req,0,,1000\n"
            "2000,1000,main,render,draw,1,frame,1000\n"
            "2000,1500,worker,work,job,0,,1500\n"
            "2500,0,main,render,vsync,2,draw,0\n"
            "6000,-1,main,render,open,0,,0\n");
  /* Ids follow timestamp order. */
  QT_ASSERT(db,
            "SELECT count(*) FROM slice a JOIN slice b ON a.id < b.id "
            "WHERE a.ts > b.ts",
            "count_star()\n0\n");
  QT_ASSERT(db,
            "SELECT name, value FROM stats WHERE name IN "
            "('misplaced_end_event', 'open_slices', 'track_events') "
            "ORDER BY name",
            "name,value\nmisplaced_end_event,1\nopen_slices,1\n"
            "track_events,16\n");
  QT_ASSERT(db, "SELECT start_ts, end_ts FROM trace_bounds",
            "start_ts,end_ts\n1000,6000\n");
  etch__db_close(db);
  tb_free(&t);
}

TEST(trace_tracks_processes_threads) {
  tb t;
  tb_init(&t);
  build_basic(&t);
  etch__db *db = import(&t);
  QT_ASSERT(db, "SELECT pid, name FROM process ORDER BY pid",
            "pid,name\n10,app\n20,other\n");
  QT_ASSERT(db,
            "SELECT th.tid, th.name, p.pid, th.is_main_thread FROM thread th "
            "LEFT JOIN process p USING(upid) ORDER BY th.tid",
            "tid,name,pid,is_main_thread\n10,main,10,1\n11,worker,10,0\n"
            "21,t21,20,0\n");
  /* Thread descriptors here name no parent_uuid: parent_id stays NULL. */
  QT_ASSERT(db,
            "SELECT tr.name, tr.type, par.name AS parent, p.pid, th.tid, "
            "tr.unit FROM track tr LEFT JOIN track par ON tr.parent_id = "
            "par.id LEFT JOIN process p ON tr.upid = p.upid "
            "LEFT JOIN thread th ON tr.utid = th.utid "
            "ORDER BY tr.type, tr.name",
            "name,type,parent,pid,tid,unit\n"
            "depth,counter,io queue,10,,count\n"
            "heap,counter,app,10,,bytes\n"
            "io queue,named,app,10,,\n"
            "app,process,,10,,\n"
            "other,process,,20,,\n"
            "main,thread,,10,10,\n"
            "t21,thread,,20,21,\n"
            "worker,thread,,10,11,\n");
  QT_ASSERT(db,
            "SELECT tr.name, c.ts, c.value FROM counter c JOIN track tr ON "
            "c.track_id = tr.id ORDER BY tr.name, c.ts",
            "name,ts,value\ndepth,1000,1.5\nheap,1000,100.0\n"
            "heap,2000,250.0\n");
  QT_ASSERT(db, "SELECT name FROM counter_track ORDER BY name",
            "name\ndepth\nheap\n");
  QT_ASSERT(db, "SELECT name FROM thread_track ORDER BY name",
            "name\nmain\nt21\nworker\n");
  etch__db_close(db);
  tb_free(&t);
}

TEST(trace_args_nested_and_flows) {
  tb t;
  tb_init(&t);
  build_basic(&t);
  etch__db *db = import(&t);
  QT_ASSERT(db,
            "SELECT a.flat_key, a.key, a.int_value, a.string_value, "
            "a.real_value, a.value_type FROM args a JOIN slice s ON "
            "s.arg_set_id = a.arg_set_id WHERE s.name = 'draw' ORDER BY a.id",
            "flat_key,key,int_value,string_value,real_value,value_type\n"
            "debug.n,debug.n,3,,,int\n"
            "debug.s,debug.s,,\"a,b\",,string\n"
            "debug.cfg.w,debug.cfg.w,640,,,int\n"
            "debug.cfg.tags,debug.cfg.tags[0],,x,,string\n"
            "debug.cfg.tags,debug.cfg.tags[1],,y,,string\n"
            "debug.ok,debug.ok,1,,,bool\n"
            "debug.r,debug.r,,,0.5,real\n"
            "debug.u,debug.u,7,,,uint\n"
            "debug.p,debug.p,16,,,pointer\n");
  QT_ASSERT(db,
            "SELECT o.name AS out, i.name AS \"in\" FROM flow f "
            "JOIN slice o ON o.id = f.slice_out "
            "JOIN slice i ON i.id = f.slice_in",
            "out,in\nframe,job\n");
  etch__db_close(db);
  tb_free(&t);
}

TEST(trace_interned_and_compressed) {
  tb inner;
  tb_init(&inner);
  tb_thread(&inner, 7, 50, 30, 31, "zt");
  /* A packet that clears the incremental state and interns names. */
  tb_packet(&inner, 7, 100);
  tb_u(&inner, ETCH_PKT_SEQUENCE_FLAGS,
            ETCH_SEQ_INCREMENTAL_STATE_CLEARED |
                ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(&inner, ETCH_PKT_INTERNED_DATA);
  tb_open(&inner, ETCH_ID_EVENT_CATEGORIES);
  tb_u(&inner, ETCH_INTERNED_IID, 1);
  tb_s(&inner, ETCH_INTERNED_NAME, "icat");
  tb_close(&inner);
  tb_open(&inner, ETCH_ID_EVENT_NAMES);
  tb_u(&inner, ETCH_INTERNED_IID, 1);
  tb_s(&inner, ETCH_INTERNED_NAME, "interned");
  tb_close(&inner);
  tb_open(&inner, ETCH_ID_DEBUG_ANNOTATION_NAMES);
  tb_u(&inner, ETCH_INTERNED_IID, 1);
  tb_s(&inner, ETCH_INTERNED_NAME, "k");
  tb_close(&inner);
  tb_close(&inner);
  tb_open(&inner, ETCH_PKT_TRACK_EVENT);
  tb_u(&inner, ETCH_TE_TYPE, ETCH_TE_TYPE_SLICE_BEGIN);
  tb_u(&inner, ETCH_TE_TRACK_UUID, 50);
  tb_u(&inner, ETCH_TE_CATEGORY_IIDS, 1);
  tb_u(&inner, ETCH_TE_NAME_IID, 1);
  tb_open(&inner, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_u(&inner, ETCH_DA_NAME_IID, 1);
  tb_u(&inner, ETCH_DA_INT_VALUE, 5);
  tb_close(&inner);
  tb_close(&inner);
  tb_close(&inner);
  /* The end uses the same sequence's state. */
  tb_packet(&inner, 7, 300);
  tb_u(&inner, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_open(&inner, ETCH_PKT_TRACK_EVENT);
  tb_u(&inner, ETCH_TE_TYPE, ETCH_TE_TYPE_SLICE_END);
  tb_u(&inner, ETCH_TE_TRACK_UUID, 50);
  tb_close(&inner);
  tb_close(&inner);

  tb t;
  tb_init(&t);
  tb_compressed(&t, tb_data(&inner), tb_len(&inner), false, false);
  etch__db *db = import(&t);
  QT_ASSERT(db,
            "SELECT s.ts, s.dur, s.category, s.name, a.key, a.int_value "
            "FROM slice s LEFT JOIN args a USING(arg_set_id)",
            "ts,dur,category,name,key,int_value\n"
            "100,200,icat,interned,debug.k,5\n");
  QT_ASSERT(db, "SELECT tid, name FROM thread", "tid,name\n31,zt\n");
  QT_ASSERT(db, "SELECT value FROM stats WHERE name = 'compressed_packets'",
            "value\n1\n");
  etch__db_close(db);
  tb_free(&t);
  tb_free(&inner);
}

TEST(trace_corrupt_fails_with_offset) {
  tb t;
  tb_init(&t);
  tb_thread(&t, 1, kMain, 10, 10, "main");
  tb_event(&t, 1, 1000, kMain, ETCH_TE_TYPE_SLICE_BEGIN, "c", "a");
  size_t good = tb_len(&t);
  /* A packet record whose length runs past the end of the data. */
  tb_b(&t, ETCH_TRACE_PACKET, "\x08\x01\x08", 3);
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  etch__import_opts o = {.timestamp_order = true};
  int rc = etch__query_import_memory(db, tb_data(&t), good + 2, "test", &o,
                                     NULL);
  ASSERT_TRUE(rc < 0);
  ASSERT_TRUE(strstr(etch_last_error(), "offset") != NULL);
  etch__db_close(db);
  tb_free(&t);
}

TEST(trace_empty_is_fine) {
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  ASSERT_OK(etch__query_import_memory(db, "", 0, "empty", NULL, NULL));
  QT_ASSERT(db, "SELECT count(*) FROM slice", "count_star()\n0\n");
  QT_ASSERT(db, "SELECT * FROM trace_bounds", "start_ts,end_ts\n,\n");
  etch__db_close(db);
}

/* ---- file order: held tracks, restarts, stats without a database ------------ */

static etch__db *import_order(const tb *t, bool ts_order) {
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  etch__import_opts o = {.all_args = true,
                         .timestamp_order = ts_order};
  ASSERT_OK(etch__query_import_memory(db, tb_data(t), tb_len(t), "test", &o,
                                     NULL));
  return db;
}

/*
 * A named track written by two sequences whose chunks are in the file one
 * after the other, so its events arrive out of time order: sequence 1 has
 * a [100, 400) and c [500, 700), sequence 2 (later in the file) has
 * b [200, 300) with an instant at 250, d [600, 650) and an end at 800 with
 * nothing open. In time order b nests in a and d in c. The end of a carries
 * an arg (attached to a); a flow goes from b to c in time order although c
 * comes first in the file. A thread track is interleaved with them.
 */
static void build_interleaved(tb *t) {
  const int B = ETCH_TE_TYPE_SLICE_BEGIN, E = ETCH_TE_TYPE_SLICE_END,
            I = ETCH_TE_TYPE_INSTANT;
  tb_process(t, 1, kProc, 10, "app");
  tb_thread(t, 1, kMain, 10, 10, "main");
  tb_named_track(t, 1, kQueue, kProc, "async");
  tb_event(t, 1, 100, kQueue, B, "c", "a");
  tb_event(t, 1, 150, kMain, B, "c", "m");
  tb_event_open(t, 1, 400, kQueue, E, NULL, NULL);
  da_open(t, "status");
  tb_u(t, ETCH_DA_INT_VALUE, 7);
  tb_close(t);
  tb_event_close(t);
  tb_event_open(t, 1, 500, kQueue, B, "c", "c");
  tb_f64(t, ETCH_TE_FLOW_IDS, 5);
  tb_event_close(t);
  tb_event(t, 1, 700, kQueue, E, NULL, NULL);
  tb_event(t, 1, 900, kMain, E, NULL, NULL);
  tb_event_open(t, 2, 200, kQueue, B, "c", "b");
  tb_f64(t, ETCH_TE_FLOW_IDS, 5);
  tb_event_close(t);
  tb_event(t, 2, 250, kQueue, I, "c", "i");
  tb_event(t, 2, 300, kQueue, E, NULL, NULL);
  tb_event(t, 2, 600, kQueue, B, "c", "d");
  tb_event(t, 2, 650, kQueue, E, NULL, NULL);
  tb_event(t, 2, 800, kQueue, E, NULL, NULL);
}

TEST(stream_named_track_from_two_sequences_nests_in_time_order) {
  tb t;
  tb_init(&t);
  build_interleaved(&t);
  for (int ts_order = 0; ts_order <= 1; ts_order++) {
    etch__db *db = import_order(&t, ts_order);
    QT_ASSERT(db,
              "SELECT s.name, s.ts, s.dur, s.depth, p.name AS parent, "
              "s.self_dur, tr.name AS track FROM slice s "
              "JOIN track tr ON tr.id = s.track_id "
              "LEFT JOIN slice p ON p.id = s.parent_id ORDER BY s.ts",
              "name,ts,dur,depth,parent,self_dur,track\n"
              "a,100,300,0,,200,async\n"
              "m,150,750,0,,750,main\n"
              "b,200,100,1,a,100,async\n"
              "i,250,0,2,b,0,async\n"
              "c,500,200,0,,150,async\n"
              "d,600,50,1,c,50,async\n");
    QT_ASSERT(db,
              "SELECT s.name, a.key, a.int_value FROM slice s "
              "JOIN args a USING(arg_set_id)",
              "name,key,int_value\na,debug.status,7\n");
    QT_ASSERT(db,
              "SELECT o.name AS out, i.name AS inn FROM flow f "
              "JOIN slice o ON o.id = f.slice_out "
              "JOIN slice i ON i.id = f.slice_in",
              "out,inn\nb,c\n");
    QT_ASSERT(db, "SELECT value FROM stats WHERE name = 'misplaced_end_event'",
              "value\n1\n");
    /* Ids: unique, parents before children. */
    QT_ASSERT(db,
              "SELECT count(*) FROM slice c JOIN slice p ON p.id = c.parent_id "
              "WHERE p.id >= c.id",
              "count_star()\n0\n");
    etch__db_close(db);
  }
  tb_free(&t);
}

/*
 * A thread track whose timestamps go back (explicit timestamps): y
 * [200, 300) comes after x [100, 500) in the file but nests in it. The
 * file-order import notices and reads again with every track held.
 */
TEST(stream_thread_track_back_in_time_reads_again) {
  const int B = ETCH_TE_TYPE_SLICE_BEGIN, E = ETCH_TE_TYPE_SLICE_END;
  tb t;
  tb_init(&t);
  tb_thread(&t, 1, kMain, 10, 10, "main");
  tb_event(&t, 1, 100, kMain, B, "c", "x");
  tb_event(&t, 1, 500, kMain, E, NULL, NULL);
  tb_event(&t, 1, 200, kMain, B, "c", "y");
  tb_event(&t, 1, 300, kMain, E, NULL, NULL);
  etch__db *db = import_order(&t, false);
  QT_ASSERT(db,
            "SELECT s.name, s.ts, s.dur, s.depth, p.name AS parent "
            "FROM slice s LEFT JOIN slice p ON p.id = s.parent_id "
            "ORDER BY s.ts",
            "name,ts,dur,depth,parent\nx,100,400,0,\ny,200,100,1,x\n");
  QT_ASSERT(db, "SELECT count(*) FROM thread", "count_star()\n1\n");
  etch__db_close(db);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  etch__stats_opts so = {.top = 10};
  ASSERT_OK(etch__query_stats_memory(tb_data(&t), tb_len(&t), f, &so));
  fclose(f);
  if (!strstr(buf, "x         1  400 ns  300 ns  400 ns  400 ns"))
    FAIL("%s", buf);
  free(buf);
  tb_free(&t);
}

static char *stats_text(etch__db *db, const tb *t, bool json) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  etch__stats_opts so = {.top = 10, .json = json};
  if (db)
    ASSERT_OK(etch__query_stats(db, f, &so));
  else
    ASSERT_OK(etch__query_stats_memory(tb_data(t), tb_len(t), f, &so));
  fclose(f);
  return buf;
}

/* The report computed while reading equals the one from the tables. */
TEST(stream_stats_equal_the_tables) {
  void (*builders[])(tb *) = {build_basic, build_interleaved};
  for (size_t k = 0; k < ETCH_ARRAY_SIZE(builders); k++) {
    tb t;
    tb_init(&t);
    builders[k](&t);
    for (int json = 0; json <= 1; json++) {
      char *streamed = stats_text(NULL, &t, json);
      for (int ts_order = 0; ts_order <= 1; ts_order++) {
        etch__db *db = import_order(&t, ts_order);
        char *tables = stats_text(db, &t, json);
        ASSERT_TEXT(streamed, tables);
        free(tables);
        etch__db_close(db);
      }
      free(streamed);
    }
    tb_free(&t);
  }
}

/*
 * Flow id 9 used twice: slice a (sequence 1, t=100) starts it; its other
 * end was on sequence 2 and was lost (the next packet of sequence 2 says
 * previous_packet_dropped, at t=300); later the id is reused, c (t=500) to
 * d (t=600). a must not link to c: only c -> d is a flow. Without the loss
 * flag the same trace links a -> c -> d.
 */
static void build_flow_reuse(tb *t, bool lost) {
  const int B = ETCH_TE_TYPE_SLICE_BEGIN, E = ETCH_TE_TYPE_SLICE_END;
  tb_process(t, 1, kProc, 10, "app");
  tb_thread(t, 1, kMain, 10, 10, "main");
  tb_thread(t, 2, kQueue, 10, 11, "worker");
  tb_event_open(t, 1, 100, kMain, B, "c", "a");
  tb_f64(t, ETCH_TE_FLOW_IDS, 9);
  tb_event_close(t);
  tb_event(t, 1, 200, kMain, E, NULL, NULL);
  tb_packet(t, 2, 300);
  if (lost) tb_u(t, ETCH_PKT_PREVIOUS_PACKET_DROPPED, 1);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  tb_u(t, ETCH_TE_TRACK_UUID, kQueue);
  tb_s(t, ETCH_TE_NAME, "after");
  tb_event_close(t);
  tb_event_open(t, 2, 500, kQueue, B, "c", "c");
  tb_f64(t, ETCH_TE_FLOW_IDS, 9);
  tb_event_close(t);
  tb_event(t, 2, 550, kQueue, E, NULL, NULL);
  tb_event_open(t, 1, 600, kMain, B, "c", "d");
  tb_f64(t, ETCH_TE_TERMINATING_FLOW_IDS, 9);
  tb_event_close(t);
  tb_event(t, 1, 650, kMain, E, NULL, NULL);
}

TEST(flow_not_linked_across_lost_data) {
  for (int lost = 0; lost <= 1; lost++) {
    tb t;
    tb_init(&t);
    build_flow_reuse(&t, lost);
    for (int ts_order = 0; ts_order <= 1; ts_order++) {
      etch__db *db = import_order(&t, ts_order);
      QT_ASSERT(db,
                "SELECT o.name AS out, i.name AS inn FROM flow f "
                "JOIN slice o ON o.id = f.slice_out "
                "JOIN slice i ON i.id = f.slice_in ORDER BY o.ts",
                lost ? "out,inn\nc,d\n" : "out,inn\na,c\nc,d\n");
      QT_ASSERT(db,
                "SELECT value FROM stats WHERE name = 'flow_cut_by_data_loss'",
                lost ? "value\n1\n" : "value\n0\n");
      etch__db_close(db);
    }
    tb_free(&t);
  }
}

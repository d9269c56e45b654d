/*
 * sdk_test.c - what libetch writes, decoded and checked field by field.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sdk_common.h"

ETCH_CATEGORY_DEFINE(render, "render", "Rendering", "");
ETCH_CATEGORY_DEFINE(io, "io", "I/O", "");
ETCH_CATEGORY_DEFINE(render_gpu, "render.gpu", "GPU side", "");
ETCH_CATEGORY_DEFINE(dbg, "debug", "Verbose", "debug");
ETCH_CATEGORY_DEFINE(slowcat, "slowpath", "Expensive", "slow,extra");

static const td_event *nth(const td_trace *t, int type, const char *name,
                           size_t k) {
  for (size_t i = 0; i < t->nev; i++)
    if (t->ev[i].type == type &&
        (!name || (t->ev[i].name && strcmp(t->ev[i].name, name) == 0)) &&
        k-- == 0)
      return &t->ev[i];
  FAIL("no event %d of type %d named %s", (int)k, type, name ? name : "*");
}

/* Decoded times never go back. */
static void check_monotonic(const td_trace *t) {
  for (size_t i = 1; i < t->nev; i++)
    if (t->ev[i].ts < t->ev[i - 1].ts)
      FAIL("event %zu at %llu, before event %zu at %llu", i,
           (unsigned long long)t->ev[i].ts, i - 1,
           (unsigned long long)t->ev[i - 1].ts);
}

TEST(slices_names_categories_nesting) {
  etch_session *s = start_session("categories=render,io;compression=none");
  ETCH_SLICE_BEGIN(render, "frame");
  ETCH_SLICE_BEGIN(io, "read");
  ETCH_SLICE_END(io);
  {
    ETCH_SCOPE(render, "scoped");
    ETCH_INSTANT(render, "mark");
  }
  ETCH_SLICE_END(render);
  ETCH_SLICE_BEGIN(dbg, "hidden"); /* not enabled */
  ETCH_SLICE_END(dbg);
  ASSERT_OK(etch_session_stop(s));
  td_trace t;
  read_trace(s, "slices", &t);
  /* Exact sequence of events on this thread. */
  ASSERT_EQ_U64(t.nev, 7);
  const int types[] = {1, 1, 2, 1, 3, 2, 2};
  const char *names[] = {"frame", "read", NULL, "scoped", "mark", NULL, NULL};
  const char *cats[] = {"render", "io", NULL, "render", "render", NULL, NULL};
  for (size_t i = 0; i < 7; i++) {
    ASSERT_EQ_INT(t.ev[i].type, types[i]);
    if (names[i]) ASSERT_EQ_STR(t.ev[i].name, names[i]);
    if (cats[i]) ASSERT_EQ_STR(t.ev[i].cat, cats[i]);
    if (!names[i]) ASSERT_TRUE(t.ev[i].name == NULL);
    if (i) ASSERT_TRUE(t.ev[i].ts >= t.ev[i - 1].ts);
  }
  /* Every event is on this thread's track, which names pid and tid. */
  const td_track *tr = td_track_of(&t, t.ev[0].track);
  ASSERT_TRUE(tr != NULL);
  ASSERT_TRUE(tr->is_thread);
  ASSERT_EQ_INT(tr->pid, getpid());
  ASSERT_EQ_INT(tr->tid, gettid());
  for (size_t i = 0; i < t.nev; i++) ASSERT_EQ_U64(t.ev[i].track, tr->uuid);
  /* And the process has its descriptor. */
  int procs = 0;
  for (size_t i = 0; i < t.ntracks; i++)
    if (t.tracks[i].is_process) {
      procs++;
      ASSERT_EQ_INT(t.tracks[i].pid, getpid());
      ASSERT_TRUE(t.tracks[i].process_name && *t.tracks[i].process_name);
    }
  ASSERT_EQ_INT(procs, 1);
  ASSERT_EQ_U64(t.cleared, 1);
  ASSERT_EQ_U64(t.first_on_seq, 1);
  ASSERT_EQ_U64(t.prev_dropped, 0);
  ASSERT_TRUE(t.has_stats);
  td_free(&t);
  etch_session_free(s);
}

TEST(args_of_every_type) {
  etch_session *s = start_session("compression=none");
  int x;
  ETCH_INSTANT(render, "args", ETCH_ARG_BOOL("b", true),
               ETCH_ARG_INT("i", -42), ETCH_ARG_UINT("u", 18446744073709551615ull),
               ETCH_ARG_DOUBLE("d", 2.5), ETCH_ARG_STRING("s", "hello"),
               ETCH_ARG_POINTER("p", &x));
  /* Same arg names again: interned once, resolved again. */
  ETCH_INSTANT(render, "args2", ETCH_ARG_INT("i", 7), ETCH_ARG_STRING("s", NULL));
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "args", &t);
  ASSERT_EQ_U64(t.nev, 2);
  const td_event *e = &t.ev[0];
  ASSERT_EQ_STR(e->name, "args");
  ASSERT_EQ_INT(e->nargs, 6);
  ASSERT_EQ_INT(td_arg_of(e, "b")->type, TD_BOOL);
  ASSERT_EQ_U64(td_arg_of(e, "b")->u, 1);
  ASSERT_EQ_INT(td_arg_of(e, "i")->type, TD_INT);
  ASSERT_EQ_INT(td_arg_of(e, "i")->i, -42);
  ASSERT_EQ_INT(td_arg_of(e, "u")->type, TD_UINT);
  ASSERT_EQ_U64(td_arg_of(e, "u")->u, 18446744073709551615ull);
  ASSERT_EQ_INT(td_arg_of(e, "d")->type, TD_DOUBLE);
  ASSERT_EQ_DBL(td_arg_of(e, "d")->d, 2.5);
  ASSERT_EQ_STR(td_arg_of(e, "s")->s, "hello");
  ASSERT_EQ_INT(td_arg_of(e, "p")->type, TD_POINTER);
  ASSERT_EQ_U64(td_arg_of(e, "p")->u, (uintptr_t)&x);
  ASSERT_EQ_INT(t.ev[1].nargs, 2);
  ASSERT_EQ_INT(td_arg_of(&t.ev[1], "i")->i, 7);
  ASSERT_EQ_STR(td_arg_of(&t.ev[1], "s")->s, "(null)");
  td_free(&t);
  etch_session_free(s);
}

TEST(counters_on_counter_tracks) {
  etch_session *s = start_session("compression=none");
  /* Repeated sites: the first value takes the general path, the others the
   * counter fast path. */
  for (int i = 0; i < 3; i++) ETCH_COUNTER(render, "queue", i * 10 - 10);
  for (int i = 0; i < 3; i++) ETCH_COUNTER_DOUBLE(render, "load", 0.75 + i);
  const etch_track *mem =
      etch_counter_track_new("heap", ETCH_UNIT_SIZE_BYTES, NULL, NULL);
  ETCH_COUNTER(render, "ignored name", -5, ETCH_TRACK(mem));
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "counters", &t);
  ASSERT_EQ_U64(td_count(&t, 4, NULL), 7);
  const td_event *q0 = nth(&t, 4, NULL, 0);
  const td_track *qt = td_track_of(&t, q0->track);
  ASSERT_TRUE(qt && qt->is_counter);
  ASSERT_EQ_STR(qt->name, "queue");
  for (int i = 0; i < 3; i++) {
    const td_event *e = nth(&t, 4, NULL, (size_t)i);
    ASSERT_EQ_U64(e->track, q0->track);
    ASSERT_FALSE(e->counter_is_double);
    ASSERT_EQ_INT(e->counter_i, i * 10 - 10);
    ASSERT_EQ_STR(e->cat, "render");
  }
  const td_event *l0 = nth(&t, 4, NULL, 3);
  ASSERT_EQ_STR(td_track_of(&t, l0->track)->name, "load");
  for (int i = 0; i < 3; i++) {
    const td_event *l = nth(&t, 4, NULL, 3 + (size_t)i);
    ASSERT_TRUE(l->counter_is_double);
    ASSERT_EQ_DBL(l->counter_d, 0.75 + i);
    ASSERT_EQ_U64(l->track, l0->track);
  }
  ASSERT_TRUE(l0->track != q0->track);
  const td_event *h = nth(&t, 4, NULL, 6);
  ASSERT_EQ_INT(h->counter_i, -5);
  ASSERT_EQ_U64(h->track, etch_track_uuid(mem));
  const td_track *ht = td_track_of(&t, h->track);
  ASSERT_TRUE(ht && ht->is_counter);
  ASSERT_EQ_STR(ht->name, "heap");
  ASSERT_EQ_INT(ht->unit, ETCH_UNIT_SIZE_BYTES);
  /* Counter tracks hang under the process. */
  ASSERT_EQ_U64(ht->parent, etch_track_uuid(etch_process_track()));
  check_monotonic(&t);
  td_free(&t);
  etch_session_free(s);
}

TEST(flows_and_terminating_flows) {
  etch_session *s = start_session("compression=none");
  ETCH_SLICE_BEGIN(render, "producer", ETCH_FLOW(0xabcdef0123456789ull));
  ETCH_SLICE_END(render);
  ETCH_INSTANT(render, "consumer", ETCH_FLOW_END(0xabcdef0123456789ull),
               ETCH_FLOW(7));
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "flows", &t);
  const td_event *p = nth(&t, 1, "producer", 0);
  ASSERT_EQ_INT(p->nflows, 1);
  ASSERT_EQ_U64(p->flows[0], 0xabcdef0123456789ull);
  const td_event *c = nth(&t, 3, "consumer", 0);
  ASSERT_EQ_INT(c->ntflows, 1);
  ASSERT_EQ_U64(c->tflows[0], 0xabcdef0123456789ull);
  ASSERT_EQ_INT(c->nflows, 1);
  ASSERT_EQ_U64(c->flows[0], 7);
  td_free(&t);
  etch_session_free(s);
}

TEST(named_tracks_process_track_explicit_timestamps) {
  etch_session *s = start_session("compression=none");
  const etch_track *net = etch_track_new("network", 1, NULL);
  const etch_track *req = etch_track_new("request 42", 42, net);
  ASSERT_TRUE(net && req);
  ASSERT_TRUE(etch_track_new("network", 1, NULL) == net); /* same track */
  ASSERT_TRUE(etch_track_new("network", 2, NULL) != net);
  uint64_t t0 = etch_now();
  ETCH_SLICE_BEGIN(io, "fetch", ETCH_TRACK(req), ETCH_TS(t0));
  ETCH_SLICE_END(io, ETCH_TRACK(req), ETCH_TS(t0 + 5000));
  ETCH_INSTANT(io, "process-wide", ETCH_TRACK(etch_process_track()));
  ETCH_INSTANT(io, "dyn", ETCH_NAME("runtime name"));
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "tracks", &t);
  const td_event *b = nth(&t, 1, "fetch", 0);
  ASSERT_EQ_U64(b->ts, t0);
  ASSERT_TRUE(b->explicit_ts);
  ASSERT_EQ_U64(b->track, etch_track_uuid(req));
  const td_event *e = nth(&t, 2, NULL, 0);
  ASSERT_EQ_U64(e->ts, t0 + 5000);
  ASSERT_EQ_U64(e->track, etch_track_uuid(req));
  const td_track *rt = td_track_of(&t, etch_track_uuid(req));
  ASSERT_EQ_STR(rt->name, "request 42");
  ASSERT_EQ_U64(rt->parent, etch_track_uuid(net));
  const td_track *nt = td_track_of(&t, etch_track_uuid(net));
  ASSERT_EQ_STR(nt->name, "network");
  ASSERT_EQ_U64(nt->parent, etch_track_uuid(etch_process_track()));
  const td_event *pw = nth(&t, 3, "process-wide", 0);
  const td_track *pt = td_track_of(&t, pw->track);
  ASSERT_TRUE(pt && pt->is_process);
  ASSERT_EQ_STR(nth(&t, 3, "runtime name", 0)->cat, "io");
  td_free(&t);
  etch_session_free(s);
}

/* Sessions see only their own categories; three run at once. */
TEST(sessions_filter_categories_independently) {
  etch_session *a = start_session("categories=render*;compression=none");
  etch_session *b = start_session("categories=*,-render;compression=none");
  etch_session *c = start_session("categories=debug,slowpath;compression=none");
  ETCH_INSTANT(render, "r");
  ETCH_INSTANT(render_gpu, "g");
  ETCH_INSTANT(io, "i");
  ETCH_INSTANT(dbg, "d");
  ETCH_INSTANT(slowcat, "x");
  ASSERT_TRUE(etch_category_enabled(&ETCH_CAT(render)));
  etch_session_stop(a);
  etch_session_stop(b);
  etch_session_stop(c);
  ASSERT_FALSE(etch_category_enabled(&ETCH_CAT(render)));
  ETCH_INSTANT(render, "after stop");
  td_trace ta, tb, tc;
  read_trace(a, "sess_a", &ta);
  read_trace(b, "sess_b", &tb);
  read_trace(c, "sess_c", &tc);
  /* a: render and render.gpu */
  ASSERT_EQ_U64(ta.nev, 2);
  ASSERT_EQ_STR(ta.ev[0].name, "r");
  ASSERT_EQ_STR(ta.ev[1].name, "g");
  ASSERT_EQ_STR(ta.ev[1].cat, "render.gpu");
  /* b: everything but render and the debug/slow tagged ones; render.gpu is
   * not excluded by "-render" (an exact name). */
  ASSERT_EQ_U64(tb.nev, 2);
  ASSERT_EQ_STR(tb.ev[0].name, "g");
  ASSERT_EQ_STR(tb.ev[1].name, "i");
  /* c: the tagged ones, by name */
  ASSERT_EQ_U64(tc.nev, 2);
  ASSERT_EQ_STR(tc.ev[0].name, "d");
  ASSERT_EQ_STR(tc.ev[1].name, "x");
  td_free(&ta);
  td_free(&tb);
  td_free(&tc);
  etch_session_free(a);
  etch_session_free(b);
  etch_session_free(c);
}

TEST(dynamic_categories) {
  etch_category *dyn = etch_category_get("plugin.audio");
  ASSERT_TRUE(dyn);
  ASSERT_TRUE(etch_category_get("plugin.audio") == dyn);
  etch_session *s = start_session("categories=plugin.*;compression=none");
  ASSERT_TRUE(etch_category_enabled(dyn));
  etch_category *late = etch_category_get("plugin.video"); /* after start */
  ASSERT_TRUE(etch_category_enabled(late));
  ETCH_SLICE_BEGIN_C(dyn, "mix", ETCH_ARG_INT("ch", 2));
  ETCH_SLICE_END_C(dyn);
  ETCH_INSTANT_C(late, "decode");
  ETCH_COUNTER_C(late, "fps", 60);
  ETCH_INSTANT(render, "not enabled");
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "dyncat", &t);
  ASSERT_EQ_U64(t.nev, 4);
  ASSERT_EQ_STR(t.ev[0].name, "mix");
  ASSERT_EQ_STR(t.ev[0].cat, "plugin.audio");
  ASSERT_EQ_INT(td_arg_of(&t.ev[0], "ch")->i, 2);
  ASSERT_EQ_INT(t.ev[1].type, 2);
  ASSERT_EQ_STR(t.ev[2].cat, "plugin.video");
  ASSERT_EQ_INT(t.ev[3].counter_i, 60);
  ASSERT_EQ_STR(td_track_of(&t, t.ev[3].track)->name, "fps");
  td_free(&t);
  etch_session_free(s);
}

TEST(end_without_recorded_begin_is_not_written) {
  ETCH_SLICE_BEGIN(render, "before session"); /* no session yet */
  etch_session *s = start_session("compression=none");
  ETCH_SLICE_BEGIN(render, "inside");
  ETCH_SLICE_END(render); /* ends "inside" */
  ETCH_SLICE_END(render); /* ends "before session": not recorded */
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "unmatched", &t);
  ASSERT_EQ_U64(t.nev, 2);
  ASSERT_EQ_INT(t.ev[0].type, 1);
  ASSERT_EQ_INT(t.ev[1].type, 2);
  td_free(&t);
  etch_session_free(s);
}

/* The same rule on named tracks, where a slice may end on another thread;
 * each session keeps its own count. */
static void *end_on_track(void *arg) {
  ETCH_SLICE_END(render, ETCH_TRACK((const etch_track *)arg));
  return NULL;
}

TEST(end_on_named_track_without_recorded_begin_is_not_written) {
  const etch_track *tr = etch_track_new("jobs", 7, NULL);
  const etch_track *other = etch_track_new("other jobs", 8, NULL);
  ETCH_SLICE_BEGIN(render, "before session", ETCH_TRACK(tr));
  etch_session *s = start_session("compression=none");
  ETCH_SLICE_BEGIN(render, "inside", ETCH_TRACK(tr));
  pthread_t th;
  pthread_create(&th, NULL, end_on_track, (void *)tr); /* ends "inside" */
  pthread_join(th, NULL);
  ETCH_SLICE_END(render, ETCH_TRACK(tr));    /* "before session": dropped */
  ETCH_SLICE_END(render, ETCH_TRACK(other)); /* never begun: dropped */
  ETCH_SLICE_BEGIN(render, "again", ETCH_TRACK(tr));
  etch_session *late = start_session("compression=none");
  ETCH_SLICE_END(render, ETCH_TRACK(tr)); /* ends "again" in s only */
  etch_session_stop(s);
  etch_session_stop(late);
  td_trace t, tl;
  read_trace(s, "unmatched_track", &t);
  read_trace(late, "unmatched_track_late", &tl);
  /* Two begins and their two ends, one of them from the other thread's
   * sequence (events are listed sequence by sequence). */
  ASSERT_EQ_U64(t.nev, 4);
  ASSERT_EQ_INT(td_count(&t, 1, "inside"), 1);
  ASSERT_EQ_INT(td_count(&t, 1, "again"), 1);
  ASSERT_EQ_INT(td_count(&t, 2, NULL), 2);
  int other_seq = 0;
  for (size_t i = 0; i < t.nev; i++) {
    ASSERT_EQ_U64(t.ev[i].track, etch_track_uuid(tr));
    other_seq += t.ev[i].seq != t.ev[0].seq;
  }
  ASSERT_EQ_INT(other_seq, 1);
  ASSERT_EQ_U64(tl.nev, 0);
  td_free(&t);
  td_free(&tl);
  etch_session_free(s);
  etch_session_free(late);
}

/* A NULL config: every option at its default. */
TEST(session_with_null_config_uses_defaults) {
  etch_session *s;
  ASSERT_OK(etch_session_new(NULL, &s));
  ASSERT_OK(etch_session_start(s));
  ETCH_INSTANT(render, "r");
  ETCH_INSTANT(dbg, "tagged debug: not in *");
  etch_session_stop(s);
  etch_session_stats st;
  ASSERT_OK(etch_session_get_stats(s, &st));
  ASSERT_EQ_U64(st.buffer_size, 8192u * 1024u);
  td_trace t;
  read_trace(s, "null_config", &t);
  ASSERT_EQ_U64(t.nev, 1);
  ASSERT_EQ_STR(t.ev[0].name, "r");
  ASSERT_TRUE(t.compressed > 0); /* deflate */
  td_free(&t);
  etch_session_free(s);
}

TEST(large_packet_crosses_chunks) {
  /* 64 KiB buffer: 4 KiB chunks; a 20000-byte arg spans six of them. */
  etch_session *s = start_session("buffer_kb=64;compression=none");
  char *big = malloc(20001);
  for (int i = 0; i < 20000; i++) big[i] = (char)('a' + i % 26);
  big[20000] = 0;
  ETCH_INSTANT(render, "small1");
  ETCH_INSTANT(render, "big", ETCH_ARG_STRING("blob", big),
               ETCH_ARG_INT("after", 99));
  ETCH_INSTANT(render, "small2");
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "bigpacket", &t);
  ASSERT_EQ_U64(t.nev, 3);
  ASSERT_EQ_STR(t.ev[1].name, "big");
  ASSERT_EQ_STR(td_arg_of(&t.ev[1], "blob")->s, big);
  ASSERT_EQ_INT(td_arg_of(&t.ev[1], "after")->i, 99);
  ASSERT_EQ_STR(t.ev[2].name, "small2");
  td_free(&t);
  free(big);
  etch_session_free(s);
}

TEST(incremental_state_resets_periodically) {
  etch_session *s = start_session("reset_interval_ms=1;compression=none");
  for (int i = 0; i < 20; i++) {
    ETCH_SLICE_BEGIN(render, "tick", ETCH_ARG_INT("i", i));
    usleep(1500);
    ETCH_SLICE_END(render);
  }
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "resets", &t);
  ASSERT_EQ_U64(td_count(&t, 1, "tick"), 20);
  ASSERT_EQ_U64(td_count(&t, 2, NULL), 20);
  ASSERT_TRUE(t.cleared >= 10); /* one per interval that saw an event */
  ASSERT_EQ_U64(t.cleared, t.clock_snapshots - 1); /* + the file's own */
  check_monotonic(&t);
  for (int i = 0; i < 20; i++)
    ASSERT_EQ_INT(td_arg_of(nth(&t, 1, "tick", (size_t)i), "i")->i, i);
  /* slices last at least the sleep */
  for (size_t i = 0; i + 1 < t.nev; i += 2)
    ASSERT_TRUE(t.ev[i + 1].ts - t.ev[i].ts >= 1400000);
  td_free(&t);
  etch_session_free(s);
}

TEST(deflate_output_decodes_and_is_smaller) {
  etch_session *a = start_session("compression=none");
  etch_session *b = start_session("compression=deflate");
  for (int i = 0; i < 10000; i++) {
    ETCH_SLICE_BEGIN(render, "work");
    ETCH_SLICE_END(render);
  }
  etch_session_stop(a);
  etch_session_stop(b);
  uint8_t *da, *db;
  size_t la, lb;
  ASSERT_OK(etch_session_read(a, &da, &la));
  ASSERT_OK(etch_session_read(b, &db, &lb));
  save_trace("deflate", db, lb);
  td_trace ta, tb;
  ASSERT_EQ_INT(td_decode(da, la, &ta), 0);
  ASSERT_EQ_INT(td_decode(db, lb, &tb), 0);
  ASSERT_EQ_U64(ta.nev, 20000);
  ASSERT_EQ_U64(tb.nev, 20000);
  ASSERT_EQ_U64(ta.compressed, 0);
  ASSERT_TRUE(tb.compressed >= 1);
  ASSERT_TRUE(lb * 4 < la);
  /* Same events either way. */
  for (size_t i = 0; i < ta.nev; i++) {
    ASSERT_EQ_INT(ta.ev[i].type, tb.ev[i].type);
  }
  /* Uncompressed: begin/end pairs cost at most 16 bytes a pair on average
   * beyond the fixed per-trace overhead. */
  ASSERT_TRUE(la < 20000 * 16 + 4096);
  td_free(&ta);
  td_free(&tb);
  etch_free(da);
  etch_free(db);
  etch_session_free(a);
  etch_session_free(b);
}

TEST(write_file_and_errors) {
  char path[512];
  snprintf(path, sizeof path, "%s/out.pftrace", etch_test_tmpdir());
  etch_session *s = start_session(NULL);
  ETCH_INSTANT(render, "one");
  ASSERT_OK(etch_session_flush(s));
  ASSERT_OK(etch_session_write_file(s, path));
  td_trace t;
  ASSERT_EQ_INT(td_decode_file(path, &t), 0);
  ASSERT_EQ_U64(t.nev, 1);
  td_free(&t);
  /* Written again: replaced in one rename, no temporary file left over. */
  ETCH_INSTANT(render, "two");
  ASSERT_OK(etch_session_write_file(s, path));
  ASSERT_EQ_INT(td_decode_file(path, &t), 0);
  ASSERT_EQ_U64(t.nev, 2);
  td_free(&t);
  DIR *dir = opendir(etch_test_tmpdir());
  ASSERT_TRUE(dir != NULL);
  for (struct dirent *de; (de = readdir(dir));)
    ASSERT_TRUE(strstr(de->d_name, ".tmp") == NULL);
  closedir(dir);
  /* Not a regular file: written in place. */
  ASSERT_OK(etch_session_write_file(s, "/dev/null"));
  ASSERT_EQ_INT(etch_session_write_file(s, "/nonexistent-dir/x.pftrace"),
                ETCH_EIO);
  ASSERT_TRUE(strstr(etch_last_error(), "/nonexistent-dir/x.pftrace") != NULL);
  ASSERT_EQ_INT(etch_session_start(s), ETCH_ESTATE);
  etch_session_free(s);
}

/* A session starts once: a second start, or a start after the stop, is
 * ETCH_ESTATE with a message that says what to do; a new session records
 * again. */
TEST(a_stopped_session_cannot_start_again) {
  etch_session *s;
  ASSERT_OK(etch_session_new(NULL, &s));
  ASSERT_OK(etch_session_start(s));
  ASSERT_EQ_INT(etch_session_start(s), ETCH_ESTATE);
  ASSERT_EQ_STR(etch_last_error(),
                "etch_session_start: the session is already started");
  ASSERT_OK(etch_session_stop(s));
  ASSERT_EQ_INT(etch_session_start(s), ETCH_ESTATE);
  ASSERT_EQ_STR(etch_last_error(),
                "etch_session_start: the session was stopped, and a stopped "
                "session cannot be started again: make a new one with "
                "etch_session_new");
  etch_session_free(s);
  ASSERT_OK(etch_session_new(NULL, &s));
  ASSERT_OK(etch_session_start(s));
  ASSERT_OK(etch_session_stop(s));
  etch_session_free(s);
}

TEST(config_errors_name_the_problem) {
  etch_config *c;
  ASSERT_OK(etch_config_new(&c));
  ASSERT_EQ_INT(etch_config_set(c, "bufer_kb", "10"), ETCH_EOPTION);
  ASSERT_TRUE(strstr(etch_last_error(), "unknown option 'bufer_kb'"));
  ASSERT_EQ_INT(etch_config_set(c, "buffer_kb", "ten"), ETCH_ECONFIG);
  ASSERT_TRUE(strstr(etch_last_error(), "buffer_kb"));
  ASSERT_EQ_INT(etch_config_set(c, "buffer_kb", "1"), ETCH_ECONFIG);
  ASSERT_TRUE(strstr(etch_last_error(), "out of range"));
  ASSERT_EQ_INT(etch_config_set(c, "fill", "circular"), ETCH_ECONFIG);
  ASSERT_TRUE(strstr(etch_last_error(), "ring"));
  ASSERT_EQ_INT(etch_config_set(c, "categories", "ren*der"), ETCH_ECONFIG);
  ASSERT_TRUE(strstr(etch_last_error(), "ren*der"));
  ASSERT_EQ_INT(etch_config_parse(c, "fill=ring;nonsense"), ETCH_ECONFIG);
  ASSERT_TRUE(strstr(etch_last_error(), "nonsense"));
  ASSERT_OK(etch_config_parse(c, "# comment\nfill = discard ; buffer_kb=64\n"));
  ASSERT_EQ_INT(etch_config_set(NULL, "fill", "ring"), ETCH_EINVAL);
  ASSERT_EQ_INT(etch_session_new(c, NULL), ETCH_EINVAL);
  ASSERT_EQ_STR(etch_strerror(ETCH_EOPTION), "unknown configuration option");
  ASSERT_EQ_STR(etch_err_name(ETCH_EBUSY), "ETCH_EBUSY");
  etch_config_free(c);
}

TEST(at_most_eight_sessions) {
  etch_session *s[ETCH_MAX_SESSIONS];
  for (int i = 0; i < ETCH_MAX_SESSIONS; i++) {
    etch_config *c;
    etch_config_new(&c);
    etch_config_set(c, "buffer_kb", "64");
    ASSERT_OK(etch_session_new(c, &s[i]));
    etch_config_free(c);
  }
  etch_session *extra;
  ASSERT_EQ_INT(etch_session_new(NULL, &extra), ETCH_EBUSY);
  ASSERT_TRUE(strstr(etch_last_error(), "8"));
  etch_session_free(s[3]);
  ASSERT_OK(etch_session_new(NULL, &extra)); /* the slot is free again */
  etch_session_free(extra);
  for (int i = 0; i < ETCH_MAX_SESSIONS; i++)
    if (i != 3) etch_session_free(s[i]);
}

/* A session in a slot that an earlier, freed session used: this thread's
 * stale writer must be replaced, not reused. */
TEST(slot_reuse_gets_a_fresh_writer) {
  etch_session *a = start_session("compression=none");
  ETCH_INSTANT(render, "in a");
  etch_session_free(a);
  etch_session *b = start_session("compression=none");
  ETCH_INSTANT(render, "in b");
  etch_session_stop(b);
  td_trace t;
  read_trace(b, "slot_reuse", &t);
  ASSERT_EQ_U64(t.nev, 1);
  ASSERT_EQ_STR(t.ev[0].name, "in b");
  td_free(&t);
  etch_session_free(b);
}

/* The duration is the one time bound: "early" must be recorded before it
 * ends, right after the start; 500 ms leaves room for a loaded machine and
 * TSan. The stop and the file are waited for (up to a minute, not a
 * measure of anything: only so that a broken timer fails rather than
 * hangs). */
TEST(duration_stops_and_writes_output) {
  char cfg[600];
  snprintf(cfg, sizeof cfg, "duration_ms=500;output=%s/timed.pftrace",
           etch_test_tmpdir());
  etch_session *s = start_session(cfg);
  ETCH_INSTANT(render, "early");
  for (int i = 0; i < 6000 && etch_category_enabled(&ETCH_CAT(render)); i++)
    usleep(10000);
  ASSERT_FALSE(etch_category_enabled(&ETCH_CAT(render)));
  ETCH_INSTANT(render, "late");
  char path[600];
  snprintf(path, sizeof path, "%s/timed.pftrace", etch_test_tmpdir());
  td_trace t;
  int decoded = -1;
  for (int i = 0; i < 6000 && (decoded = td_decode_file(path, &t)) != 0; i++)
    usleep(10000);
  ASSERT_EQ_INT(decoded, 0);
  ASSERT_EQ_U64(t.nev, 1);
  ASSERT_EQ_STR(t.ev[0].name, "early");
  td_free(&t);
  etch_session_free(s);
}

TEST(environment_session_written_at_exit) {
  char path[512];
  snprintf(path, sizeof path, "%s/env.pftrace", etch_test_tmpdir());
  pid_t pid = fork();
  if (pid == 0) {
    setenv("ETCH_OUT", path, 1);
    setenv("ETCH_CATEGORIES", "render,-io", 1);
    setenv("ETCH_CONFIG", "compression=none", 1);
    if (etch_init() != 0) _exit(3);
    ETCH_SLICE_BEGIN(render, "main work", ETCH_ARG_STRING("k", "v"));
    ETCH_INSTANT(io, "excluded");
    ETCH_SLICE_END(render);
    exit(0); /* atexit writes the trace */
  }
  int st;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  td_trace t;
  ASSERT_EQ_INT(td_decode_file(path, &t), 0);
  ASSERT_EQ_U64(t.nev, 2);
  ASSERT_EQ_STR(t.ev[0].name, "main work");
  ASSERT_EQ_STR(td_arg_of(&t.ev[0], "k")->s, "v");
  ASSERT_EQ_INT(t.ev[1].type, 2);
  td_free(&t);
}

/*
 * A program tracing with ETCH_OUT forks children that exit normally
 * (exit(), so atexit handlers and, under ASan, LeakSanitizer run): each
 * exits 0 and writes nothing (the parent's session is not theirs, and it
 * is freed in them: an ASan build once reported the parent's session as
 * leaked in every child and exited 23), and the parent's trace is whole.
 */
TEST(environment_session_forked_children_exit_clean) {
  char path[512];
  snprintf(path, sizeof path, "%s/env_fork.pftrace", etch_test_tmpdir());
  pid_t pid = fork();
  if (pid == 0) {
    setenv("ETCH_OUT", path, 1);
    setenv("ETCH_CATEGORIES", "render", 1);
    setenv("ETCH_CONFIG", "compression=none", 1);
    unsetenv("ETCH_RECORD_DIR");
    if (etch_init() != 0) _exit(3);
    ETCH_INSTANT(render, "parent before");
    for (int i = 0; i < 3; i++) {
      pid_t c = fork();
      if (c < 0) _exit(4);
      if (c == 0) {
        ETCH_INSTANT(render, "child");
        char *junk = (char *)malloc(64); /* the child's own heap works */
        if (!junk) _exit(5);
        free(junk);
        exit(0);
      }
      int cst;
      if (waitpid(c, &cst, 0) != c) _exit(6);
      if (!WIFEXITED(cst)) _exit(7);
      if (WEXITSTATUS(cst) != 0) _exit(10 + WEXITSTATUS(cst) % 100);
      ETCH_INSTANT(render, "parent between");
    }
    ETCH_INSTANT(render, "parent after");
    exit(0);
  }
  int st;
  ASSERT_EQ_INT(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ_INT(WEXITSTATUS(st), 0);
  td_trace t;
  ASSERT_EQ_INT(td_decode_file(path, &t), 0);
  ASSERT_EQ_U64(t.nev, 5);
  ASSERT_EQ_STR(t.ev[0].name, "parent before");
  for (int i = 1; i <= 3; i++) ASSERT_EQ_STR(t.ev[i].name, "parent between");
  ASSERT_EQ_STR(t.ev[4].name, "parent after");
  for (size_t i = 0; i < t.nev; i++)
    ASSERT_EQ_INT(td_track_of(&t, t.ev[i].track)->pid, pid);
  td_free(&t);
}

/*
 * etch_init() in a fork child starts the child's own session: with
 * ETCH_OUT=NAME.%p.pftrace each process writes its own file; without %p the
 * child writes NAME.PID.pftrace and the parent keeps NAME. Before it, the
 * child's etch_init returned ETCH_OK and recorded nothing.
 */
static void fork_then_init(const char *out, const char *dir, char *parent_path,
                           char *child_path, size_t cap) {
  char pidfile[512];
  snprintf(pidfile, sizeof pidfile, "%s/child.pid", dir);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("ETCH_OUT", out, 1);
    setenv("ETCH_CATEGORIES", "render", 1);
    setenv("ETCH_CONFIG", "compression=none", 1);
    unsetenv("ETCH_RECORD_DIR");
    if (etch_init() != 0) _exit(3);
    ETCH_INSTANT(render, "parent before");
    pid_t c = fork();
    if (c < 0) _exit(4);
    if (c == 0) {
      ETCH_INSTANT(render, "child before init"); /* no session yet */
      if (etch_init() != 0) _exit(5);
      ETCH_INSTANT(render, "child traced");
      exit(0);
    }
    FILE *f = fopen(pidfile, "w");
    if (!f || fprintf(f, "%ld\n", (long)c) < 0 || fclose(f) != 0) _exit(6);
    int cst;
    if (waitpid(c, &cst, 0) != c || !WIFEXITED(cst) || WEXITSTATUS(cst) != 0)
      _exit(7);
    ETCH_INSTANT(render, "parent after");
    exit(0);
  }
  int st;
  ASSERT_EQ_INT(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ_INT(WEXITSTATUS(st), 0);
  FILE *f = fopen(pidfile, "r");
  ASSERT_TRUE(f != NULL);
  long child = 0;
  ASSERT_EQ_INT(fscanf(f, "%ld", &child), 1);
  fclose(f);
  if (strstr(out, "%p")) {
    snprintf(parent_path, cap, "%s/app.%ld.pftrace", dir, (long)pid);
    snprintf(child_path, cap, "%s/app.%ld.pftrace", dir, child);
  } else {
    snprintf(parent_path, cap, "%s", out);
    snprintf(child_path, cap, "%s/same.%ld.pftrace", dir, child);
  }
  td_trace t;
  ASSERT_EQ_INT(td_decode_file(parent_path, &t), 0);
  ASSERT_EQ_U64(t.nev, 2);
  ASSERT_EQ_STR(t.ev[0].name, "parent before");
  ASSERT_EQ_STR(t.ev[1].name, "parent after");
  ASSERT_EQ_INT(td_track_of(&t, t.ev[0].track)->pid, pid);
  td_free(&t);
  ASSERT_EQ_INT(td_decode_file(child_path, &t), 0);
  ASSERT_EQ_U64(t.nev, 1);
  ASSERT_EQ_STR(t.ev[0].name, "child traced");
  ASSERT_EQ_INT(td_track_of(&t, t.ev[0].track)->pid, child);
  td_free(&t);
}

TEST(environment_session_in_a_fork_child_with_pid_pattern) {
  char dir[512], out[600], a[700], b[700];
  snprintf(dir, sizeof dir, "%s/forkp", etch_test_tmpdir());
  mkdir(dir, 0755);
  snprintf(out, sizeof out, "%s/app.%%p.pftrace", dir);
  fork_then_init(out, dir, a, b, sizeof a);
}

TEST(environment_session_in_a_fork_child_without_pid_pattern) {
  char dir[512], out[600], a[700], b[700];
  snprintf(dir, sizeof dir, "%s/forks", etch_test_tmpdir());
  mkdir(dir, 0755);
  snprintf(out, sizeof out, "%s/same.pftrace", dir);
  fork_then_init(out, dir, a, b, sizeof a);
}

TEST(environment_errors_are_reported_not_fatal) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("ETCH_OUT", "/tmp/never.pftrace", 1);
    setenv("ETCH_BUFFER_KB", "lots", 1);
    int rc = etch_init();
    if (rc != ETCH_ECONFIG) _exit(1);
    if (!strstr(etch_last_error(), "ETCH_BUFFER_KB")) _exit(2);
    ETCH_INSTANT(render, "nothing records this");
    _exit(0);
  }
  int st;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ_INT(WEXITSTATUS(st), 0);
}

TEST(session_stats) {
  etch_session *s = start_session("buffer_kb=256");
  for (int i = 0; i < 1000; i++) ETCH_INSTANT(render, "x");
  etch_session_stats st;
  ASSERT_OK(etch_session_get_stats(s, &st));
  ASSERT_EQ_U64(st.buffer_size, 256 * 1024);
  ASSERT_EQ_U64(st.writers, 1);
  ASSERT_EQ_U64(st.events_dropped, 0);
  ASSERT_TRUE(st.chunks_written >= 1);
  ASSERT_EQ_INT(etch_session_get_stats(NULL, &st), ETCH_EINVAL);
  etch_session_free(s);
}

/* Garbage configs: always an error code with a message or success, never a
 * crash; a fixed seed keeps the run repeatable. */
TEST(config_parse_survives_garbage) {
  static const char alphabet[] = "=;#\n ab*-_,.0123456789categoriesbufferfillring";
  uint64_t x = 0x9e3779b97f4a7c15ull;
  etch_config *c;
  ASSERT_OK(etch_config_new(&c));
  int errors = 0;
  for (int round = 0; round < 20000; round++) {
    char text[64];
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    int n = (int)((x >> 33) % 63);
    for (int i = 0; i < n; i++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      text[i] = alphabet[x % (sizeof alphabet - 1)];
    }
    text[n] = 0;
    int rc = etch_config_parse(c, text);
    if (rc) {
      errors++;
      ASSERT_TRUE(rc == ETCH_ECONFIG || rc == ETCH_EOPTION);
      ASSERT_TRUE(etch_last_error()[0] != 0);
    }
  }
  ASSERT_TRUE(errors > 1000);
  /* Whatever was accepted still makes a session. */
  etch_session *s;
  int rc = etch_session_new(c, &s);
  ASSERT_TRUE(rc == ETCH_OK);
  etch_session_free(s);
  etch_config_free(c);
}

/* The same call site many times: after the first event its args take the
 * fast path; every encoding must decode to the same values. */
TEST(repeated_args_fast_path) {
  etch_session *s = start_session("compression=none");
  int x;
  for (int i = 0; i < 50; i++) {
    ETCH_INSTANT(render, "a2", ETCH_ARG_DOUBLE("d", i * 0.5),
                 ETCH_ARG_POINTER("p", (char *)&x + i));
    ETCH_SLICE_BEGIN(render, "a1", ETCH_ARG_UINT("u", 1000000u * (unsigned)i));
    ETCH_INSTANT(render, "b", ETCH_ARG_BOOL("flag", i % 2));
    ETCH_SLICE_END(render);
    ETCH_INSTANT(render, "neg", ETCH_ARG_INT("v", -i));
  }
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "fast_args", &t);
  ASSERT_EQ_U64(t.nev, 250);
  for (int i = 0; i < 50; i++) {
    const td_event *e = &t.ev[i * 5];
    ASSERT_EQ_STR(e->name, "a2");
    ASSERT_EQ_INT(e->nargs, 2);
    ASSERT_EQ_DBL(td_arg_of(e, "d")->d, i * 0.5);
    ASSERT_EQ_U64(td_arg_of(e, "p")->u, (uintptr_t)((char *)&x + i));
    e = &t.ev[i * 5 + 1];
    ASSERT_EQ_INT(e->type, 1);
    ASSERT_EQ_STR(e->cat, "render");
    ASSERT_EQ_U64(td_arg_of(e, "u")->u, 1000000ull * (unsigned)i);
    e = &t.ev[i * 5 + 2];
    ASSERT_EQ_INT(td_arg_of(e, "flag")->type, TD_BOOL);
    ASSERT_EQ_U64(td_arg_of(e, "flag")->u, (uint64_t)(i % 2));
    ASSERT_EQ_INT(t.ev[i * 5 + 3].type, 2);
    ASSERT_EQ_INT(td_arg_of(&t.ev[i * 5 + 4], "v")->i, -i);
  }
  td_free(&t);
  etch_session_free(s);
}

static uint64_t boottime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void spin_ns(uint64_t ns) {
  uint64_t end = boottime_ns() + ns;
  while (boottime_ns() < end) {
  }
}

/* An event's decoded time is within `tol` of the BOOTTIME readings taken
 * just before and after it. */
static void check_near(const char *what, int k, uint64_t ts, uint64_t lo,
                       uint64_t hi, uint64_t tol) {
  if (ts + tol < lo || ts > hi + tol)
    FAIL("%s %d: at %llu, not in [%llu, %llu]", what, k,
         (unsigned long long)ts, (unsigned long long)lo,
         (unsigned long long)hi);
}

/*
 * Events stamped on the fast path carry deltas of one, two and three or
 * more bytes (< 128 ns, < 16 us, longer). Each event's decoded time must
 * fall between BOOTTIME readings taken around it, also after 200,000
 * back-to-back events: rounding each delta on its own instead of carrying
 * the fraction of a ns would drift by tens of microseconds.
 */
TEST(timestamps_follow_boottime_across_delta_sizes) {
  etch_session *s =
      start_session("categories=render;compression=none;buffer_kb=16384");
  enum { BURST = 200000, GAPS = 5 };
  static const uint64_t gap_ns[GAPS] = {0, 300, 5000, 40000, 3000000};
  uint64_t lo[GAPS * 2], hi[GAPS * 2];
  ETCH_INSTANT(render, "warm"); /* writer, interning: the slow path */
  for (int g = 0; g < GAPS; g++) {
    for (int i = 0; i < BURST / GAPS; i++) {
      ETCH_SLICE_BEGIN(render, "burst");
      ETCH_SLICE_END(render);
    }
    spin_ns(gap_ns[g]);
    lo[2 * g] = boottime_ns();
    ETCH_SLICE_BEGIN(render, "probe");
    hi[2 * g] = boottime_ns();
    spin_ns(gap_ns[g]);
    lo[2 * g + 1] = boottime_ns();
    ETCH_SLICE_END(render);
    hi[2 * g + 1] = boottime_ns();
  }
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "delta_sizes", &t);
  ASSERT_EQ_U64(t.nev, 1 + 2 * (BURST + GAPS));
  ASSERT_EQ_U64(t.prev_dropped, 0);
  check_monotonic(&t);
  /* The TSC multiplier is calibrated to well under 1e-4; the test runs for
   * tens of milliseconds, so 20 us covers it. */
  const uint64_t tol = 20000;
  int k = 0;
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *e = &t.ev[i];
    bool probe = e->type == 1 && e->name && strcmp(e->name, "probe") == 0;
    if (!probe) continue;
    const td_event *end = &t.ev[i + 1];
    ASSERT_EQ_INT(end->type, 2);
    int g = k++;
    check_near("begin after gap", g, e->ts, lo[2 * g], hi[2 * g], tol);
    check_near("end after gap", g, end->ts, lo[2 * g + 1], hi[2 * g + 1], tol);
    /* The slice lasts the spin, to within the clock reads around it. */
    ASSERT_TRUE(end->ts - e->ts + tol >= gap_ns[g]);
  }
  ASSERT_EQ_INT(k, GAPS);
  td_free(&t);
  etch_session_free(s);
}

/*
 * With periodic resets off, a writer's fast path moves its anchor up to
 * the last event whenever the ticks since the anchor would overflow its
 * product (every few seconds on real clocks). A small cap here makes that
 * happen every few microseconds: times must still follow BOOTTIME, never
 * go back, and no reset may be written for it.
 */
extern uint64_t etch__rel_cap_max;

TEST(anchor_moves_without_a_reset) {
  etch__rel_cap_max = 20000; /* ticks: 7-20 us on the TSC, 20 us on BOOTTIME */
  etch_session *s = start_session(
      "categories=render;compression=none;buffer_kb=16384;reset_interval_ms=0");
  enum { N = 400 };
  static const uint64_t gap_ns[4] = {0, 3000, 30000, 200000};
  uint64_t lo[N], hi[N];
  ETCH_INSTANT(render, "warm");
  for (int i = 0; i < N; i++) {
    for (int k = 0; k < 50; k++) ETCH_INSTANT(render, "filler");
    spin_ns(gap_ns[i & 3]);
    lo[i] = boottime_ns();
    ETCH_SLICE_BEGIN(render, "probe");
    hi[i] = boottime_ns();
    ETCH_SLICE_END(render);
  }
  etch_session_stop(s);
  etch__rel_cap_max = UINT64_MAX;
  td_trace t;
  read_trace(s, "reanchor", &t);
  ASSERT_EQ_U64(t.nev, 1 + (size_t)N * 52);
  ASSERT_EQ_U64(t.cleared, 1);
  ASSERT_EQ_U64(t.prev_dropped, 0);
  check_monotonic(&t);
  int k = 0;
  for (size_t i = 0; i < t.nev; i++) {
    if (t.ev[i].type != 1) continue;
    check_near("probe", k, t.ev[i].ts, lo[k], hi[k], 20000);
    k++;
  }
  ASSERT_EQ_INT(k, N);
  td_free(&t);
  etch_session_free(s);
}

/*
 * reader_test.c - golden tests: traces built byte by byte (tbuild.c), read
 * back, and the exact events, tracks and stats compared.
 *
 * Event lines (tbuild.c format_event):
 *   <B|E|I|C> <ts> seq= track= pid= tid= [cat=] [name=] [value=] [flows=]
 *   [term=] [flat_key|key=type:value ...]
 */
#define _GNU_SOURCE
#include <etch/reader.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/perfetto.h"
#include "reader/dump.h"
#include "reader/reader_priv.h"
#include "reader/tbuild.h"
#include "test.h"

static void read_sample(int which, etch_reader_order order, tb_out *o) {
  tb t;
  tb_init(&t);
  tb_sample(&t, which);
  tb_read(t.data, t.len, order, o);
  tb_free(&t);
  if (o->rc) FAIL("sample %s: %d %s", tb_sample_name(which), o->rc, o->error);
}

/* ---- what etch writes ----------------------------------------------------------------- */

static const char etch_events[] =
    "B 1010 seq=2 track=1001 pid=42 tid=43 cat=render name=draw flows=77 "
    "debug.frame=i:7\n"
    "E 1015 seq=2 track=1001 pid=42 tid=43\n"
    "C 1016 seq=2 track=2000 pid=42 tid=0 cat=render name=queue value=-3\n"
    "C 1020 seq=2 track=2000 pid=42 tid=0 name=queue value=2.5\n"
    "I 1120 seq=2 track=1001 pid=42 tid=43 name=draw term=77\n"
    "I 5000 seq=2 track=1001 pid=42 tid=43 cat=render name=draw\n";
static const char etch_tracks[] =
    "1000 process \"app\" pid=42 tid=0 parent=0\n"
    "1001 thread \"main\" pid=42 tid=43 parent=1000\n"
    "2000 counter \"queue\" pid=42 tid=0 parent=1000 unit=2 unit_name= mult=0 "
    "incr=0\n";

static void check_etch_stats(const etch_reader_stats *s, uint64_t packets,
                             uint64_t compressed) {
  ASSERT_EQ_U64(s->packets, packets);
  ASSERT_EQ_U64(s->track_events, 6);
  ASSERT_EQ_U64(s->sequences, 1);
  ASSERT_EQ_U64(s->compressed_packets, compressed);
  ASSERT_EQ_U64(s->previous_packet_dropped, 0);
  ASSERT_EQ_U64(s->packet_skipped_seq_needs_incremental_state_invalid, 0);
  ASSERT_EQ_U64(s->interned_data_missing, 0);
  ASSERT_EQ_U64(s->misplaced_end_event, 0);
  ASSERT_EQ_U64(s->unknown_track, 0);
  ASSERT_EQ_U64(s->clock_conversion_failed, 0);
}

/* Incremental clock 64 (deltas), an explicit BOOTTIME event that does not
 * move it, defaults' thread track, interned data in the packet of first use,
 * sequence id last in the packet, counters int/double, flows. */
TEST(reader_etch_sequence) {
  tb_out o;
  read_sample(0, ETCH_ORDER_TIMESTAMP, &o);
  ASSERT_EQ_STR(o.events, etch_events);
  ASSERT_EQ_STR(o.tracks, etch_tracks);
  check_etch_stats(&o.stats, 10, 0);
  ASSERT_EQ_INT(o.first, 1010);
  ASSERT_EQ_INT(o.last, 5000);
  tb_out_free(&o);

  /* File order: as written. */
  read_sample(0, ETCH_ORDER_FILE, &o);
  ASSERT_EQ_STR(o.events,
                "B 1010 seq=2 track=1001 pid=42 tid=43 cat=render name=draw "
                "flows=77 debug.frame=i:7\n"
                "I 5000 seq=2 track=1001 pid=42 tid=43 cat=render name=draw\n"
                "E 1015 seq=2 track=1001 pid=42 tid=43\n"
                "C 1016 seq=2 track=2000 pid=42 tid=0 cat=render name=queue "
                "value=-3\n"
                "C 1020 seq=2 track=2000 pid=42 tid=0 name=queue value=2.5\n"
                "I 1120 seq=2 track=1001 pid=42 tid=43 name=draw term=77\n");
  tb_out_free(&o);
}

TEST(reader_compressed_zlib_zstd_gzip) {
  for (int which = 2; which <= 4; which++) {
    tb_out o;
    read_sample(which, ETCH_ORDER_TIMESTAMP, &o);
    ASSERT_EQ_STR(o.events, etch_events);
    ASSERT_EQ_STR(o.tracks, etch_tracks);
    check_etch_stats(&o.stats, 12, 2);
    tb_out_free(&o);
  }
}

/* ---- debug annotations ------------------------------------------------------------------ */

TEST(reader_nested_debug_annotations) {
  tb_out o;
  read_sample(1, ETCH_ORDER_TIMESTAMP, &o);
  ASSERT_EQ_STR(o.events,
                "I 101 seq=2 track=1001 pid=0 tid=0 name=request "
                "debug.req.method=s:GET "
                "debug.req.ids|debug.req.ids[0]=u:1 "
                "debug.req.ids|debug.req.ids[1]=u:2 "
                "debug.req.ids.x|debug.req.ids[2].x=b:1 "
                "debug.req.nested.deep=d:1.5 "
                "debug.s=s:hi debug.neg=i:-5 debug.ptr=p:0xdead "
                "debug.json=j:{\"a\":1} "
                "debug.legacy.k|debug.legacy.k[0]=i:3 "
                "debug.legacy.k|debug.legacy.k[1]=s:v\n");
  /* The defaults' track 1001 was never described. */
  ASSERT_EQ_STR(o.tracks, "1001 named \"\" pid=0 tid=0 parent=0\n");
  ASSERT_EQ_U64(o.stats.unknown_track, 1);
  ASSERT_EQ_U64(o.stats.interned_data_missing, 0);
  tb_out_free(&o);
}

/* ---- data loss ------------------------------------------------------------------------- */

TEST(reader_data_loss) {
  static const char want[] =
      "B 1010 seq=2 track=1001 pid=10 tid=11 name=work\n"
      "B 1020 seq=3 track=1002 pid=10 tid=12 name=work\n"
      "E 1030 seq=3 track=1002 pid=10 tid=12\n"
      "I 1500 seq=2 track=1001 pid=10 tid=11 name=marker\n"
      "B 2001 seq=2 track=1001 pid=10 tid=11 name=work\n"
      "E 2002 seq=2 track=1001 pid=10 tid=11\n"
      "E 2003 seq=2 track=1001 pid=10 tid=11\n";
  for (int order = 0; order < 2; order++) {
    tb_out o;
    read_sample(5, (etch_reader_order)order, &o);
    ASSERT_EQ_STR(o.events, want);
    const etch_reader_stats *s = &o.stats;
    ASSERT_EQ_U64(s->packets, 19);
    ASSERT_EQ_U64(s->track_events, 8);
    ASSERT_EQ_U64(s->sequences, 2);
    /* The loss packet and the recovery packet carry the flag. */
    ASSERT_EQ_U64(s->previous_packet_dropped, 2);
    /* The loss packet itself and the next NEEDS packet on sequence 2. */
    ASSERT_EQ_U64(s->packet_skipped_seq_needs_incremental_state_invalid, 2);
    ASSERT_EQ_U64(s->packet_sequence_id_missing, 1);
    ASSERT_EQ_U64(s->misplaced_end_event, 1);
    ASSERT_EQ_U64(s->interned_data_missing, 0);
    tb_out_free(&o);
  }
}

/* Perfetto's SDK marks the first packet of each sequence as "dropped" (it
 * cannot know) together with first_packet_on_sequence: not a loss. */
TEST(reader_first_packet_on_sequence_is_no_loss) {
  tb t;
  tb_init(&t);
  tb_begin(&t);
  tb_u(&t, ETCH_PKT_PREVIOUS_PACKET_DROPPED, 1);
  tb_u(&t, ETCH_PKT_FIRST_PACKET_ON_SEQUENCE, 1);
  tb_u(&t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  tb_u(&t, ETCH_PKT_TIMESTAMP, 5);
  tb_open(&t, ETCH_PKT_TRACK_EVENT);
  tb_u(&t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  tb_s(&t, ETCH_TE_NAME, "x");
  tb_close(&t);
  tb_u(&t, ETCH_PKT_TRUSTED_SEQ_ID, 3);
  tb_end(&t);
  tb_out o;
  tb_read(t.data, t.len, ETCH_ORDER_TIMESTAMP, &o);
  ASSERT_OK(o.rc);
  ASSERT_EQ_STR(o.events, "I 5 seq=3 track=0 pid=0 tid=0 name=x\n");
  ASSERT_EQ_U64(o.stats.previous_packet_dropped, 0);
  ASSERT_EQ_U64(o.stats.packet_skipped_seq_needs_incremental_state_invalid, 0);
  tb_out_free(&o);
  tb_free(&t);
}

/* ---- defaults, clocks, legacy fields, stats ---------------------------------------------- */

TEST(reader_defaults_clocks_legacy_stats) {
  tb_out o;
  read_sample(6, ETCH_ORDER_TIMESTAMP, &o);
  ASSERT_EQ_STR(
      o.events,
      /* MONOTONIC 4100 via the file snapshot (BOOTTIME 10000 = MONO 4000) */
      "B 10100 seq=5 track=3000 pid=77 tid=0 cat=io,net name=job flows=5,6,7 "
      "term=6 source.file_name=s:a.c source.function_name=s:f "
      "source.line_number=i:12\n"
      /* extra counter value 3 on the defaults' counter track: x1024 */
      "C 10100 seq=5 track=3001 pid=77 tid=0 cat=io,net value=3072\n"
      /* REALTIME -> MONOTONIC -> BOOTTIME */
      "E 11050 seq=5 track=3000 pid=77 tid=0 term=8,9\n"
      /* incremental counter: 3072 + 2048 */
      "C 11050 seq=5 track=3001 pid=77 tid=0 value=5120\n"
      "I 12000 seq=6 track=999 pid=0 tid=0 name=stray\n"
      "I 12001 seq=6 track=0 pid=0 tid=0 name=global\n"
      "I 12003 seq=1 track=4000 pid=77 tid=78 cat=etch "
      "name=etch.dropped_events debug.count=i:17\n");
  ASSERT_EQ_STR(o.tracks,
                "3002 process \"srv\" pid=77 tid=0 parent=0\n"
                "3000 named \"jobs\" pid=77 tid=0 parent=3002\n"
                "3001 counter \"mem\" pid=77 tid=0 parent=3002 unit=3 "
                "unit_name=KiB mult=1024 incr=1\n"
                "999 named \"\" pid=0 tid=0 parent=0\n"
                "0 global \"\" pid=0 tid=0 parent=0\n"
                "4000 thread \"worker\" pid=77 tid=78 parent=3002\n");
  const etch_reader_stats *s = &o.stats;
  ASSERT_EQ_U64(s->packets, 13);
  ASSERT_EQ_U64(s->track_events, 5);
  ASSERT_EQ_U64(s->sequences, 3);
  ASSERT_EQ_U64(s->unknown_track, 1);
  ASSERT_EQ_U64(s->clock_conversion_failed, 1);
  ASSERT_EQ_U64(s->trace_stats_chunks_discarded, 4);
  ASSERT_EQ_U64(s->trace_stats_chunks_overwritten, 2);
  ASSERT_EQ_U64(s->trace_stats_writer_packet_loss, 1);
  ASSERT_EQ_U64(s->trace_stats_patches_failed, 3);
  ASSERT_EQ_U64(s->trace_stats_abi_violations, 5);
  ASSERT_EQ_U64(s->etch_dropped_events, 17);
  ASSERT_EQ_U64(s->misplaced_end_event, 0);
  tb_out_free(&o);
}

/* Sequence-scoped incremental clock in µs units; a second snapshot on the
 * same sequence; TracePacketDefaults without track defaults. */
TEST(reader_clock_units_and_snapshots) {
  tb t;
  tb_init(&t);
  for (int reset = 0; reset < 2; reset++) {
    uint64_t boot = reset ? 2000000 : 1000000, base = reset ? 2000 : 1000;
    tb_begin(&t);
    tb_u(&t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_INCREMENTAL_STATE_CLEARED);
    tb_open(&t, ETCH_PKT_TRACE_PACKET_DEFAULTS);
    tb_u(&t, ETCH_DEFAULTS_TIMESTAMP_CLOCK_ID, 70);
    tb_close(&t);
    tb_open(&t, ETCH_PKT_CLOCK_SNAPSHOT);
    tb_open(&t, ETCH_CLOCKSNAP_CLOCKS);
    tb_u(&t, ETCH_SNAPCLOCK_CLOCK_ID, 70);
    tb_u(&t, ETCH_SNAPCLOCK_TIMESTAMP, base);
    tb_u(&t, ETCH_SNAPCLOCK_IS_INCREMENTAL, 1);
    tb_u(&t, ETCH_SNAPCLOCK_UNIT_MULTIPLIER_NS, 1000);
    tb_close(&t);
    tb_open(&t, ETCH_CLOCKSNAP_CLOCKS);
    tb_u(&t, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
    tb_u(&t, ETCH_SNAPCLOCK_TIMESTAMP, boot + (reset ? 7 : 0));
    tb_close(&t);
    tb_close(&t);
    tb_u(&t, ETCH_PKT_TRUSTED_SEQ_ID, 9);
    tb_end(&t);
    for (int i = 0; i < 2; i++) {
      tb_begin(&t);
      tb_u(&t, ETCH_PKT_TRUSTED_SEQ_ID, 9); /* sequence id first this time */
      tb_u(&t, ETCH_PKT_TIMESTAMP, (uint64_t)(2 + i));
      tb_u(&t, ETCH_PKT_SEQUENCE_FLAGS, ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
      tb_open(&t, ETCH_PKT_TRACK_EVENT);
      tb_u(&t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
      tb_s(&t, ETCH_TE_NAME, reset ? "second" : "first");
      tb_close(&t);
      tb_end(&t);
    }
  }
  tb_out o;
  tb_read(t.data, t.len, ETCH_ORDER_TIMESTAMP, &o);
  ASSERT_OK(o.rc);
  /* 1000+2 units = 1002000 ns; then +3 units. After the reset the
   * snapshot maps 2000 units to BOOTTIME 2000007. */
  ASSERT_EQ_STR(o.events,
                "I 1002000 seq=9 track=0 pid=0 tid=0 name=first\n"
                "I 1005000 seq=9 track=0 pid=0 tid=0 name=first\n"
                "I 2002007 seq=9 track=0 pid=0 tid=0 name=second\n"
                "I 2005007 seq=9 track=0 pid=0 tid=0 name=second\n");
  tb_out_free(&o);
  tb_free(&t);
}

/* A snapshot naming MONOTONIC the primary trace clock: BOOTTIME timestamps
 * are converted into it. */
TEST(reader_primary_trace_clock) {
  tb t;
  tb_init(&t);
  tb_begin(&t);
  tb_open(&t, ETCH_PKT_CLOCK_SNAPSHOT);
  tb_open(&t, ETCH_CLOCKSNAP_CLOCKS);
  tb_u(&t, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  tb_u(&t, ETCH_SNAPCLOCK_TIMESTAMP, 500);
  tb_close(&t);
  tb_open(&t, ETCH_CLOCKSNAP_CLOCKS);
  tb_u(&t, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_MONOTONIC);
  tb_u(&t, ETCH_SNAPCLOCK_TIMESTAMP, 100);
  tb_close(&t);
  tb_u(&t, ETCH_CLOCKSNAP_PRIMARY_TRACE_CLOCK, ETCH_CLOCK_MONOTONIC);
  tb_close(&t);
  tb_end(&t);
  for (int explicit_clock = 0; explicit_clock < 2; explicit_clock++) {
    tb_begin(&t);
    tb_u(&t, ETCH_PKT_TIMESTAMP, 600);
    if (explicit_clock)
      tb_u(&t, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
    tb_open(&t, ETCH_PKT_TRACK_EVENT);
    tb_u(&t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
    tb_s(&t, ETCH_TE_NAME, explicit_clock ? "boottime" : "no_clock_id");
    tb_close(&t);
    tb_end(&t);
  }
  tb_out o;
  tb_read(t.data, t.len, ETCH_ORDER_TIMESTAMP, &o);
  ASSERT_OK(o.rc);
  /* Without a clock id a timestamp is taken as trace time (as
   * trace_processor does); BOOTTIME 600 is MONOTONIC 200. */
  ASSERT_EQ_STR(o.events,
                "I 200 seq=0 track=0 pid=0 tid=0 name=boottime\n"
                "I 600 seq=0 track=0 pid=0 tid=0 name=no_clock_id\n");
  tb_out_free(&o);
  tb_free(&t);
}

/* ---- ordering ---------------------------------------------------------------------------- */

static void instant(tb *t, uint32_t seq, uint64_t ts, uint64_t track,
                    uint64_t type, const char *name) {
  tb_begin(t);
  tb_u(t, ETCH_PKT_TIMESTAMP, ts);
  tb_open(t, ETCH_PKT_TRACK_EVENT);
  tb_u(t, ETCH_TE_TYPE, type);
  tb_u(t, ETCH_TE_TRACK_UUID, track);
  if (name) tb_s(t, ETCH_TE_NAME, name);
  tb_close(t);
  tb_u(t, ETCH_PKT_TRUSTED_SEQ_ID, seq);
  tb_end(t);
}

/* Timestamp order is a stable sort over all sequences; begin/end matching
 * (misplaced_end_event) follows the delivery order. */
TEST(reader_order_stable_and_matching) {
  tb t;
  tb_init(&t);
  tb_begin(&t);
  tb_open(&t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(&t, ETCH_TD_UUID, 7);
  tb_s(&t, ETCH_TD_NAME, "async");
  tb_close(&t);
  tb_end(&t);
  instant(&t, 2, 30, 7, ETCH_TE_TYPE_INSTANT, "a30");
  instant(&t, 3, 20, 7, ETCH_TE_TYPE_SLICE_END, NULL);  /* end before begin */
  instant(&t, 2, 10, 7, ETCH_TE_TYPE_SLICE_BEGIN, "b");
  instant(&t, 3, 30, 7, ETCH_TE_TYPE_INSTANT, "b30"); /* tie with a30 */
  instant(&t, 2, 30, 7, ETCH_TE_TYPE_INSTANT, "c30"); /* tie, later in file */
  instant(&t, 2, 5, 7, ETCH_TE_TYPE_INSTANT, "first");
  tb_out o;
  tb_read(t.data, t.len, ETCH_ORDER_TIMESTAMP, &o);
  ASSERT_OK(o.rc);
  ASSERT_EQ_STR(o.events,
                "I 5 seq=2 track=7 pid=0 tid=0 name=first\n"
                "B 10 seq=2 track=7 pid=0 tid=0 name=b\n"
                "E 20 seq=3 track=7 pid=0 tid=0\n"
                "I 30 seq=2 track=7 pid=0 tid=0 name=a30\n"
                "I 30 seq=3 track=7 pid=0 tid=0 name=b30\n"
                "I 30 seq=2 track=7 pid=0 tid=0 name=c30\n");
  ASSERT_EQ_U64(o.stats.misplaced_end_event, 0);
  ASSERT_EQ_INT(o.first, 5);
  ASSERT_EQ_INT(o.last, 30);
  tb_out_free(&o);

  /* In file order the end comes first: not delivered, counted. */
  tb_read(t.data, t.len, ETCH_ORDER_FILE, &o);
  ASSERT_OK(o.rc);
  ASSERT_EQ_STR(o.events,
                "I 30 seq=2 track=7 pid=0 tid=0 name=a30\n"
                "B 10 seq=2 track=7 pid=0 tid=0 name=b\n"
                "I 30 seq=3 track=7 pid=0 tid=0 name=b30\n"
                "I 30 seq=2 track=7 pid=0 tid=0 name=c30\n"
                "I 5 seq=2 track=7 pid=0 tid=0 name=first\n");
  ASSERT_EQ_U64(o.stats.misplaced_end_event, 1);
  tb_out_free(&o);
  tb_free(&t);
}

/* ---- per-track order (the importer's) ------------------------------------------ */

typedef struct pt_out {
  char buf[2048];
  size_t len;
  char tracks[256];
  size_t tlen;
} pt_out;

static void pt_event(const etch_event *ev, void *user) {
  pt_out *o = user;
  char line[256];
  tb_format_event(ev, line, sizeof line);
  o->len += (size_t)snprintf(o->buf + o->len, sizeof o->buf - o->len,
                             "#%llu %s", (unsigned long long)ev->index, line);
}

static void pt_track(const etch_track_info *t, void *user) {
  pt_out *o = user;
  o->tlen += (size_t)snprintf(o->tracks + o->tlen, sizeof o->tracks - o->tlen,
                              "%llu ", (unsigned long long)t->uuid);
}

static bool pt_read(const tb *t, int order, pt_out *o) {
  memset(o, 0, sizeof *o);
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, t->data, t->len));
  if (order < 0)
    ASSERT_OK(etch_reader_set_order(r, (etch_reader_order)-order - 1));
  else
    etch__reader_set_track_order(r, order == 1);
  etch__reader_set_match_ends(r, false);
  ASSERT_OK(etch_reader_on_track(r, pt_track, o));
  ASSERT_OK(etch_reader_on(r, NULL, NULL, pt_event, o));
  ASSERT_OK(etch_reader_run(r));
  bool back = etch__reader_went_back(r);
  etch_reader_close(r);
  return back;
}

static void thread_track(tb *t, uint64_t uuid, int32_t tid) {
  tb_begin(t);
  tb_open(t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(t, ETCH_TD_UUID, uuid);
  tb_open(t, ETCH_TD_THREAD);
  tb_i(t, ETCH_THD_PID, 5);
  tb_i(t, ETCH_THD_TID, tid);
  tb_close(t);
  tb_close(t);
  tb_end(t);
}

/*
 * Per-track order: the thread track (uuid 2) streams as decoded; the named
 * tracks 7 and 8, written by two sequences out of time order, come at the
 * end, each in timestamp order (ties in file order), 7 first because it
 * was announced first. Every event keeps its file-order index; tracks are
 * announced in file order whether held or not.
 */
TEST(reader_per_track_order) {
  tb t;
  tb_init(&t);
  thread_track(&t, 2, 6);
  instant(&t, 2, 30, 7, ETCH_TE_TYPE_INSTANT, "a30");
  instant(&t, 2, 10, 2, ETCH_TE_TYPE_SLICE_BEGIN, "m");
  instant(&t, 3, 5, 8, ETCH_TE_TYPE_INSTANT, "z");
  instant(&t, 3, 10, 7, ETCH_TE_TYPE_SLICE_BEGIN, "b");
  instant(&t, 2, 20, 2, ETCH_TE_TYPE_SLICE_END, NULL);
  instant(&t, 2, 30, 7, ETCH_TE_TYPE_INSTANT, "c30");
  instant(&t, 3, 40, 7, ETCH_TE_TYPE_SLICE_END, NULL);
  pt_out o;
  ASSERT_TRUE(!pt_read(&t, 0, &o));
  ASSERT_EQ_STR(o.buf,
                "#1 B 10 seq=2 track=2 pid=5 tid=6 name=m\n"
                "#4 E 20 seq=2 track=2 pid=5 tid=6\n"
                "#3 B 10 seq=3 track=7 pid=0 tid=0 name=b\n"
                "#0 I 30 seq=2 track=7 pid=0 tid=0 name=a30\n"
                "#5 I 30 seq=2 track=7 pid=0 tid=0 name=c30\n"
                "#6 E 40 seq=3 track=7 pid=0 tid=0\n"
                "#2 I 5 seq=3 track=8 pid=0 tid=0 name=z\n");
  ASSERT_EQ_STR(o.tracks, "7 2 8 ");
  /* hold_all: the thread track is held too, in its announcement place. */
  ASSERT_TRUE(!pt_read(&t, 1, &o));
  ASSERT_EQ_STR(o.buf,
                "#3 B 10 seq=3 track=7 pid=0 tid=0 name=b\n"
                "#0 I 30 seq=2 track=7 pid=0 tid=0 name=a30\n"
                "#5 I 30 seq=2 track=7 pid=0 tid=0 name=c30\n"
                "#6 E 40 seq=3 track=7 pid=0 tid=0\n"
                "#1 B 10 seq=2 track=2 pid=5 tid=6 name=m\n"
                "#4 E 20 seq=2 track=2 pid=5 tid=6\n"
                "#2 I 5 seq=3 track=8 pid=0 tid=0 name=z\n");
  /* Timestamp order numbers the events the same way. */
  ASSERT_TRUE(!pt_read(&t, -(int)ETCH_ORDER_TIMESTAMP - 1, &o));
  ASSERT_EQ_STR(o.buf,
                "#2 I 5 seq=3 track=8 pid=0 tid=0 name=z\n"
                "#1 B 10 seq=2 track=2 pid=5 tid=6 name=m\n"
                "#3 B 10 seq=3 track=7 pid=0 tid=0 name=b\n"
                "#4 E 20 seq=2 track=2 pid=5 tid=6\n"
                "#0 I 30 seq=2 track=7 pid=0 tid=0 name=a30\n"
                "#5 I 30 seq=2 track=7 pid=0 tid=0 name=c30\n"
                "#6 E 40 seq=3 track=7 pid=0 tid=0\n");
  tb_free(&t);
}

/* A thread track going back in time stops a per-track read there (the
 * consumer reads again holding every track); with hold_all it is sorted. */
TEST(reader_per_track_order_thread_goes_back) {
  tb t;
  tb_init(&t);
  thread_track(&t, 2, 6);
  instant(&t, 2, 100, 2, ETCH_TE_TYPE_SLICE_BEGIN, "x");
  instant(&t, 2, 500, 2, ETCH_TE_TYPE_SLICE_END, NULL);
  instant(&t, 2, 200, 2, ETCH_TE_TYPE_SLICE_BEGIN, "y");
  instant(&t, 2, 300, 2, ETCH_TE_TYPE_SLICE_END, NULL);
  pt_out o;
  ASSERT_TRUE(pt_read(&t, 0, &o));
  ASSERT_EQ_STR(o.buf,
                "#0 B 100 seq=2 track=2 pid=5 tid=6 name=x\n"
                "#1 E 500 seq=2 track=2 pid=5 tid=6\n");
  ASSERT_TRUE(!pt_read(&t, 1, &o));
  ASSERT_EQ_STR(o.buf,
                "#0 B 100 seq=2 track=2 pid=5 tid=6 name=x\n"
                "#2 B 200 seq=2 track=2 pid=5 tid=6 name=y\n"
                "#3 E 300 seq=2 track=2 pid=5 tid=6\n"
                "#1 E 500 seq=2 track=2 pid=5 tid=6\n");
  tb_free(&t);
}

/* A track resolved before any descriptor existed is resolved again once
 * descriptors arrive (file order: the parent comes after the first event). */
TEST(reader_track_resolution_refreshes) {
  tb t;
  tb_init(&t);
  instant(&t, 2, 10, 50, ETCH_TE_TYPE_INSTANT, "before");
  tb_begin(&t);
  tb_open(&t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(&t, ETCH_TD_UUID, 50);
  tb_u(&t, ETCH_TD_PARENT_UUID, 60);
  tb_s(&t, ETCH_TD_NAME, "child");
  tb_close(&t);
  tb_end(&t);
  tb_begin(&t);
  tb_open(&t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(&t, ETCH_TD_UUID, 60);
  tb_open(&t, ETCH_TD_THREAD);
  tb_i(&t, ETCH_THD_PID, 5);
  tb_i(&t, ETCH_THD_TID, 6);
  tb_close(&t);
  tb_close(&t);
  tb_end(&t);
  instant(&t, 2, 20, 50, ETCH_TE_TYPE_INSTANT, "after");
  tb_out o;
  tb_read(t.data, t.len, ETCH_ORDER_FILE, &o);
  ASSERT_OK(o.rc);
  ASSERT_EQ_STR(o.events,
                "I 10 seq=2 track=50 pid=0 tid=0 name=before\n"
                "I 20 seq=2 track=50 pid=5 tid=6 name=after\n");
  ASSERT_EQ_U64(o.stats.unknown_track, 1);
  tb_out_free(&o);
  tb_free(&t);
}

/* ---- subscriptions ------------------------------------------------------------------------ */

typedef struct sub_log {
  char text[4096];
  size_t len;
} sub_log;

static void log_event(const etch_event *ev, void *user, const char *tag) {
  sub_log *l = (sub_log *)user;
  l->len += (size_t)snprintf(l->text + l->len, sizeof l->text - l->len,
                             "%s:%s/%s ", tag, ev->category, ev->name);
}
static void sub_a(const etch_event *ev, void *user) { log_event(ev, user, "a"); }
static void sub_b(const etch_event *ev, void *user) { log_event(ev, user, "b"); }
static void sub_c(const etch_event *ev, void *user) { log_event(ev, user, "c"); }

TEST(reader_subscriptions) {
  tb t;
  tb_init(&t);
  const char *cats[][2] = {{"io", NULL}, {"net", "io"}, {"gpu", NULL}};
  for (int i = 0; i < 3; i++) {
    tb_begin(&t);
    tb_u(&t, ETCH_PKT_TIMESTAMP, (uint64_t)(10 + i));
    tb_open(&t, ETCH_PKT_TRACK_EVENT);
    tb_u(&t, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
    tb_s(&t, ETCH_TE_CATEGORIES, cats[i][0]);
    if (cats[i][1]) tb_s(&t, ETCH_TE_CATEGORIES, cats[i][1]);
    tb_s(&t, ETCH_TE_NAME, i == 2 ? "draw" : "read");
    tb_close(&t);
    tb_end(&t);
  }
  etch_reader *r;
  sub_log l = {{0}, 0};
  ASSERT_OK(etch_reader_open_memory(&r, t.data, t.len));
  ASSERT_OK(etch_reader_on(r, "io", NULL, sub_a, &l));
  ASSERT_OK(etch_reader_on(r, NULL, "read", sub_b, &l));
  ASSERT_OK(etch_reader_on(r, "gpu", "read", sub_c, &l));
  ASSERT_OK(etch_reader_run(r));
  ASSERT_EQ_STR(l.text, "a:io/read b:io/read a:net,io/read b:net,io/read ");
  /* Registering or re-running after the run is a state error. */
  ASSERT_EQ_INT(etch_reader_on(r, NULL, NULL, sub_a, &l), ETCH_ESTATE);
  ASSERT_EQ_INT(etch_reader_run(r), ETCH_ESTATE);
  etch_reader_close(r);
  tb_free(&t);
}

TEST(reader_empty_trace) {
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, NULL, 0));
  ASSERT_OK(etch_reader_run(r));
  int64_t a = 1, b = 1;
  ASSERT_EQ_INT(etch_reader_time_bounds(r, &a, &b), ETCH_ENOTFOUND);
  ASSERT_EQ_INT(a, 0);
  ASSERT_EQ_INT(b, 0);
  etch_reader_stats s;
  etch_reader_get_stats(r, &s);
  ASSERT_EQ_U64(s.packets, 0);
  etch_reader_close(r);
}

/* ---- files -------------------------------------------------------------------------------- */

static void on_count(const etch_event *ev, void *user) {
  (void)ev;
  (*(int *)user)++;
}

TEST(reader_open_file) {
  tb t;
  tb_init(&t);
  tb_sample(&t, 2);
  char path[512];
  snprintf(path, sizeof path, "%s/t.pftrace", etch_test_tmpdir());
  FILE *f = fopen(path, "wb");
  ASSERT_TRUE(f != NULL);
  ASSERT_EQ_U64(fwrite(t.data, 1, t.len, f), t.len);
  fclose(f);

  etch_reader *r;
  int n = 0;
  ASSERT_OK(etch_reader_open_file(&r, path));
  ASSERT_OK(etch_reader_on(r, NULL, NULL, on_count, &n));
  ASSERT_OK(etch_reader_run(r));
  ASSERT_EQ_INT(n, 6);
  etch_reader_close(r);

  /* A truncated file: the message names the file and an offset. */
  ASSERT_EQ_INT(truncate(path, (off_t)(t.len - 3)), 0);
  ASSERT_OK(etch_reader_open_file(&r, path));
  int rc = etch_reader_run(r);
  ASSERT_EQ_INT(rc, ETCH_ETRUNC);
  char want[600];
  snprintf(want, sizeof want, "%s: offset ", path);
  ASSERT_TRUE(strncmp(etch_last_error(), want, strlen(want)) == 0);
  etch_reader_close(r);

  snprintf(path, sizeof path, "%s/missing.pftrace", etch_test_tmpdir());
  ASSERT_EQ_INT(etch_reader_open_file(&r, path), ETCH_EIO);
  ASSERT_TRUE(strstr(etch_last_error(), "missing.pftrace") != NULL);
  tb_free(&t);
}

/* ---- dump -------------------------------------------------------------------------------- */

TEST(reader_dump) {
  tb t;
  tb_init(&t);
  tb_sample(&t, 2); /* compressed etch sequence */
  tb_begin(&t);
  tb_u(&t, 900, 5); /* an unknown field */
  tb_end(&t);
  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  ASSERT_OK(etch__reader_dump(t.data, t.len, f));
  fclose(f);
  static const char *const want[] = {
      "packet #1 offset 0",
      "compressed_packets: ",
      "packet #2 decompressed offset 0",
      "flags 1 (INCREMENTAL_STATE_CLEARED)",
      "clock_id: 64 (sequence-scoped)",
      "is_incremental: true",
      "process_name: \"app\"",
      "ts 10 clock 64 -> 1010",
      "event_names {",
      "name: \"draw\"",
      "type: SLICE_BEGIN",
      "=> SLICE_BEGIN ts 1010 track 1001 (thread \"main\") pid 42 tid 43 cat "
      "\"render\" name \"draw\" flow 77",
      "debug.frame = 7",
      "=> COUNTER ts 1020 track 2000 (counter \"queue\") pid 42 tid 0 name "
      "\"queue\" value 2.5",
      "flow_ids: 77",
      "field 900: varint 5",
      "-- 13 packets, 6 track events",
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    if (!strstr(text, want[i])) FAIL("dump lacks \"%s\":\n%s", want[i], text);
  free(text);

  /* A bad trace: the error comes back to the caller, not in the listing
   * (the caller reports it once). */
  static const uint8_t bad[] = {0x0A, 0x05, 0x40};
  f = open_memstream(&text, &size);
  ASSERT_EQ_INT(etch__reader_dump(bad, sizeof bad, f), ETCH_ETRUNC);
  fclose(f);
  ASSERT_TRUE(strncmp(etch_last_error(), "offset 0: ", 10) == 0);
  ASSERT_TRUE(strstr(text, "error") == NULL);
  ASSERT_TRUE(strstr(text, "-- 0 packets") != NULL);
  free(text);
  tb_free(&t);
}

typedef struct cmd_seen {
  char process[256], thread[256];
  int n;
} cmd_seen;

static void on_cmd_track(const etch_track_info *t, void *user) {
  cmd_seen *c = (cmd_seen *)user;
  c->n++;
  if (t->kind == ETCH_TRACK_PROCESS)
    snprintf(c->process, sizeof c->process, "%s", t->cmdline);
  else
    snprintf(c->thread, sizeof c->thread, "%s", t->cmdline);
}

/* ProcessDescriptor.cmdline (repeated) joined by spaces; other tracks "". */
TEST(reader_process_cmdline) {
  tb t;
  tb_init(&t);
  tb_begin(&t);
  tb_u(&t, ETCH_PKT_TIMESTAMP, 5);
  tb_open(&t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(&t, ETCH_TD_UUID, 7);
  tb_open(&t, ETCH_TD_PROCESS);
  tb_i(&t, ETCH_PD_PID, 42);
  tb_s(&t, ETCH_PD_CMDLINE, "./app");
  tb_s(&t, ETCH_PD_CMDLINE, "--level");
  tb_s(&t, ETCH_PD_CMDLINE, "3");
  tb_s(&t, ETCH_PD_PROCESS_NAME, "app");
  tb_close(&t);
  tb_close(&t);
  tb_u(&t, ETCH_PKT_TRUSTED_SEQ_ID, 1);
  tb_end(&t);
  tb_thread_track(&t, 1, 6, 8, 7, 42, 43, "main");
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, t.data, t.len));
  cmd_seen c = {{0}, {0}, 0};
  ASSERT_OK(etch_reader_on_track(r, on_cmd_track, &c));
  ASSERT_OK(etch_reader_run(r));
  etch_reader_close(r);
  ASSERT_EQ_INT(c.n, 2);
  ASSERT_EQ_STR(c.process, "./app --level 3");
  ASSERT_EQ_STR(c.thread, "");
  tb_free(&t);
}

/* ---- progress ------------------------------------------------------------------------------ */

/* 5000 instants on one sequence, each its own packet with an inline name. */
static void progress_trace(tb *t) {
  tb_init(t);
  tb_etch_seq_start(t, 2, 1000, 1001, false);
  tb_process_track(t, 2, 1000, 1000, 42, "app");
  tb_thread_track(t, 2, 1000, 1001, 1000, 42, 43, "main");
  for (int i = 0; i < 5000; i++) {
    tb_begin(t);
    tb_u(t, 13, 2); /* SEQ_NEEDS_INCREMENTAL_STATE */
    tb_u(t, 8, 1);  /* +1 ns on the incremental clock */
    tb_open(t, 11);
    tb_u(t, 9, 3);
    tb_s(t, 23, "tick");
    tb_close(t);
    tb_u(t, 10, 2);
    tb_end(t);
  }
}

/* Reads what the reader wrote into the file behind `fd`. */
static char *read_fd(int fd) {
  off_t n = lseek(fd, 0, SEEK_END);
  char *buf = (char *)calloc(1, (size_t)n + 1);
  if (!buf || pread(fd, buf, (size_t)n, 0) != n) FAIL("read back");
  return buf;
}

/*
 * Checks progress output: lines "\retch: <what> <pct>%\033[K" with <what>
 * from `whats` in that order, percentages in 0..100 and not going down
 * within one phase, and "\r\033[K" at the end. Returns the number of lines.
 */
static int check_progress(const char *out, const char *const *whats,
                          int nwhat) {
  int lines = 0, w = 0;
  double last = -1;
  const char *p = out;
  while (strncmp(p, "\retch: ", 7) == 0) {
    p += 7;
    size_t n = strcspn(p, " ");
    while (w < nwhat && (strlen(whats[w]) != n || strncmp(p, whats[w], n)))
      w++, last = -1;
    if (w == nwhat) FAIL("unexpected progress phase in %s", out);
    p += n;
    char *end;
    double pct = strtod(p, &end);
    if (end == p || pct < last || pct < 0 || pct > 100)
      FAIL("bad percentage at %s", p);
    last = pct;
    p = end;
    if (strncmp(p, "%\033[K", 4) != 0) FAIL("line does not end: %s", p);
    p += 4;
    lines++;
  }
  ASSERT_EQ_STR(p, "\r\033[K");
  return lines;
}

TEST(reader_progress) {
  tb t;
  progress_trace(&t);
  char path[512];
  snprintf(path, sizeof path, "%s/progress.txt", etch_test_tmpdir());

  /* File order: "reading" only; the line is erased at the end. */
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(fd >= 0);
  etch_reader *r;
  int n = 0;
  ASSERT_OK(etch_reader_open_memory(&r, t.data, t.len));
  ASSERT_OK(etch_reader_set_order(r, ETCH_ORDER_FILE));
  ASSERT_OK(etch_reader_on(r, NULL, NULL, on_count, &n));
  etch__reader_set_progress_to(r, fd, 0);
  ASSERT_OK(etch_reader_run(r));
  ASSERT_EQ_INT(n, 5000);
  etch_reader_close(r);
  char *out = read_fd(fd);
  static const char *const reading[] = {"reading"};
  ASSERT_TRUE(check_progress(out, reading, 1) >= 1);
  free(out);
  close(fd);

  /* Timestamp order: "reading", then "delivering". */
  fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(fd >= 0);
  ASSERT_OK(etch_reader_open_memory(&r, t.data, t.len));
  etch__reader_set_progress_to(r, fd, 0);
  ASSERT_OK(etch_reader_run(r));
  etch_reader_close(r);
  out = read_fd(fd);
  static const char *const both[] = {"reading", "delivering"};
  ASSERT_TRUE(check_progress(out, both, 2) >= 2);
  ASSERT_TRUE(strstr(out, "delivering") != NULL);
  free(out);
  close(fd);

  /* Asked for, but stderr is not a terminal; and not asked for: nothing.
   * stderr goes to the file meanwhile. */
  fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  ASSERT_TRUE(saved >= 0);
  ASSERT_TRUE(dup2(fd, 2) == 2);
  for (int on = 0; on < 2; on++) {
    ASSERT_OK(etch_reader_open_memory(&r, t.data, t.len));
    ASSERT_OK(etch_reader_set_progress(r, on));
    ASSERT_OK(etch_reader_run(r));
    etch_reader_close(r);
  }
  ASSERT_TRUE(dup2(saved, 2) == 2);
  close(saved);
  ASSERT_EQ_INT((int)lseek(fd, 0, SEEK_END), 0);
  close(fd);

  /* Errors. */
  ASSERT_EQ_INT(etch_reader_set_progress(NULL, 1), ETCH_EINVAL);
  ASSERT_OK(etch_reader_open_memory(&r, t.data, t.len));
  ASSERT_OK(etch_reader_run(r));
  ASSERT_EQ_INT(etch_reader_set_progress(r, 1), ETCH_ESTATE);
  etch_reader_close(r);
  tb_free(&t);
}

/* A producer's descriptor claiming another process (pid 200) on a packet
 * the service stamped with the producer's own pid (trusted_pid 100): its
 * events land under the pid the service knows, and the reader counts the
 * claim. A descriptor without trusted_pid (written in process) is taken
 * as it is. */
TEST(reader_trusted_pid_wins_over_a_descriptors_claim) {
  tb t;
  tb_init(&t);
  /* Sequence 2: process and thread descriptors claiming pid 200, stamped
   * 100 by the service (after the descriptor, as services append). */
  tb_packet(&t, 2, -1);
  tb_open(&t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(&t, ETCH_TD_UUID, 500);
  tb_open(&t, ETCH_TD_PROCESS);
  tb_i(&t, ETCH_PD_PID, 200);
  tb_s(&t, ETCH_PD_PROCESS_NAME, "victim");
  tb_close(&t);
  tb_close(&t);
  tb_u(&t, ETCH_PKT_TRUSTED_PID, 100);
  tb_end(&t);
  tb_packet(&t, 2, -1);
  tb_open(&t, ETCH_PKT_TRACK_DESCRIPTOR);
  tb_u(&t, ETCH_TD_UUID, 501);
  tb_u(&t, ETCH_TD_PARENT_UUID, 500);
  tb_open(&t, ETCH_TD_THREAD);
  tb_i(&t, ETCH_PD_PID, 200);
  tb_i(&t, ETCH_THD_TID, 201);
  tb_close(&t);
  tb_close(&t);
  tb_u(&t, ETCH_PKT_TRUSTED_PID, 100);
  tb_end(&t);
  tb_event(&t, 2, 1000, 501, 3, NULL, "tick");
  /* Sequence 3, no trusted_pid: its descriptor stands. */
  tb_thread(&t, 3, 600, 300, 301, "own");
  tb_event(&t, 3, 2000, 600, 3, NULL, "tock");
  tb_out o;
  ASSERT_OK(tb_read(tb_data(&t), tb_len(&t), ETCH_ORDER_FILE, &o));
  ASSERT_EQ_STR(o.events,
                "I 1000 seq=2 track=501 pid=100 tid=201 name=tick\n"
                "I 2000 seq=3 track=600 pid=300 tid=301 name=tock\n");
  ASSERT_EQ_U64(o.stats.descriptor_pid_untrusted, 2);
  tb_out_free(&o);
  tb_free(&t);
}

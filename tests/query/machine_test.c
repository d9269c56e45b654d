/*
 * machine_test.c - a trace of two machines, built byte by byte as a host's
 * tracing service writes one (TracePacket.machine_id on the relayed
 * machine's packets, a SystemInfo per machine, a RemoteClockSync): the
 * same uuids and pids on both machines stay apart, each machine's row says
 * what its SystemInfo said, the relayed machine's timestamps move onto the
 * host's timeline as trace_processor moves them (checked against it on
 * these bytes), and SQL counts per machine. A trace of one machine has
 * the host's row alone.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "etch/reader.h"
#include "query/query.h"
#include "query_test_util.h"
#include "test.h"
#include "trace_build.h"

enum { kProc = 1, kThread = 2 };

static void system_info(tb *t, const char *release, const char *arch,
                        uint64_t cpus, uint64_t ram) {
  tb_packet(t, 0, -1);
  tb_open(t, ETCH_PKT_SYSTEM_INFO);
  tb_open(t, ETCH_SYSINFO_UTSNAME);
  tb_s(t, ETCH_UTSNAME_SYSNAME, "Linux");
  tb_s(t, ETCH_UTSNAME_RELEASE, release);
  tb_s(t, ETCH_UTSNAME_MACHINE, arch);
  tb_close(t);
  tb_u(t, ETCH_SYSINFO_NUM_CPUS, cpus);
  if (ram) tb_u(t, ETCH_SYSINFO_SYSTEM_RAM_BYTES, ram);
  tb_close(t);
  tb_end(t);
}

static void snap1(tb *t, uint32_t field, uint64_t boottime) {
  tb_open(t, field);
  tb_open(t, ETCH_CLOCKSNAP_CLOCKS);
  tb_u(t, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  tb_u(t, ETCH_SNAPCLOCK_TIMESTAMP, boottime);
  tb_close(t);
  tb_close(t);
}

/* One round of clock sync: client 100 us, host 200 us, client 110 us,
 * host 210 us: offsets (100 + 110) / 2 - 200 = -95 us and
 * 110 - (200 + 210) / 2 = -95 us, so the machine's clock is 95 us behind
 * the host's. */
static void clock_sync(tb *t) {
  tb_packet(t, 0, -1);
  tb_open(t, ETCH_PKT_REMOTE_CLOCK_SYNC);
  tb_open(t, ETCH_RCS_SYNCED_CLOCKS);
  snap1(t, ETCH_RCS_CLIENT_CLOCKS, 100000);
  snap1(t, ETCH_RCS_HOST_CLOCKS, 200000);
  tb_close(t);
  tb_open(t, ETCH_RCS_SYNCED_CLOCKS);
  snap1(t, ETCH_RCS_CLIENT_CLOCKS, 110000);
  snap1(t, ETCH_RCS_HOST_CLOCKS, 210000);
  tb_close(t);
  tb_close(t);
  tb_end(t);
}

/* A slice on track `uuid` of sequence `seq`, its timestamps naming
 * BOOTTIME (the trace clock) when `clock` is set, no clock otherwise. */
static void slice(tb *t, uint32_t seq, int64_t ts, int64_t dur, bool clock,
                  const char *name) {
  tb_event_open(t, seq, ts, kThread, ETCH_TE_TYPE_SLICE_BEGIN, "c", name);
  if (clock) {
    tb_close(t);
    tb_u(t, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
    tb_end(t);
  } else {
    tb_event_close(t);
  }
  tb_event_open(t, seq, ts + dur, kThread, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  if (clock) {
    tb_close(t);
    tb_u(t, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
    tb_end(t);
  } else {
    tb_event_close(t);
  }
}

/* The host (no machine_id) and machine 77, each with process 10 "app"
 * (track uuid 1) and its thread 11 "main" (track uuid 2). */
static void build_two(tb *t) {
  system_info(t, "6.1", "x86_64", 4, 0);
  tb_process(t, 1, kProc, 10, "app");
  tb_thread(t, 1, kThread, 10, 11, "main");
  slice(t, 1, 1000, 1000, true, "work");
  t->machine = 77;
  system_info(t, "5.15", "aarch64", 8, 4000000000ull);
  clock_sync(t);
  tb_process(t, 2, kProc, 10, "app");
  tb_thread(t, 2, kThread, 10, 11, "main");
  slice(t, 2, 1000, 1000, true, "work");  /* moves: 96000 */
  slice(t, 2, 3000, 500, false, "raw");   /* stays, as trace_processor's */
  t->machine = 0;
  slice(t, 1, 5000, 100, true, "late");
}

static etch__db *import(const tb *t) {
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  etch__import_opts o = {.timestamp_order = true};
  ASSERT_OK(etch__query_import_memory(db, tb_data(t), tb_len(t), "test", &o,
                                     NULL));
  return db;
}

TEST(machines_two_with_the_same_pids_stay_apart) {
  tb t;
  tb_init(&t);
  build_two(&t);
  etch__db *db = import(&t);
  QT_ASSERT(db, "SELECT * FROM machine ORDER BY id",
            "id,raw_id,name,sysname,release,version,arch,num_cpus,"
            "android_build_fingerprint,android_sdk_version,system_ram_bytes,"
            "system_ram_gb\n"
            "0,0,,Linux,6.1,,x86_64,4,,,,\n"
            "1,77,,Linux,5.15,,aarch64,8,,,4000000000,4\n");
  QT_ASSERT(db, "SELECT pid, name, machine_id FROM process ORDER BY machine_id",
            "pid,name,machine_id\n10,app,0\n10,app,1\n");
  QT_ASSERT(db,
            "SELECT th.tid, th.name, th.machine_id, p.machine_id AS pm "
            "FROM thread th JOIN process p USING (upid) ORDER BY th.machine_id",
            "tid,name,machine_id,pm\n11,main,0,0\n11,main,1,1\n");
  QT_ASSERT(db,
            "SELECT th.machine_id, s.name, s.ts, s.dur FROM slice s "
            "JOIN thread_track tt ON s.track_id = tt.id JOIN thread th "
            "USING (utid) ORDER BY th.machine_id, s.ts",
            "machine_id,name,ts,dur\n"
            "0,work,1000,1000\n"
            "0,late,5000,100\n"
            "1,raw,3000,500\n"
            "1,work,96000,1000\n");
  /* Counting per machine, the way docs/analysis.md shows it. */
  QT_ASSERT(db,
            "SELECT m.id, m.arch, count(*) AS slices FROM slice s "
            "JOIN thread_track tt ON s.track_id = tt.id JOIN thread th "
            "USING (utid) JOIN machine m ON m.id = th.machine_id "
            "GROUP BY m.id, m.arch ORDER BY m.id",
            "id,arch,slices\n0,x86_64,2\n1,aarch64,2\n");
  QT_ASSERT(db, "SELECT count(*) AS n FROM track WHERE type = 'thread'",
            "n\n2\n");
  etch__db_close(db);

  /* The reader's own account of the machines. */
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, tb_data(&t), tb_len(&t)));
  ASSERT_OK(etch_reader_run(r));
  ASSERT_EQ_U64(etch_reader_machine_count(r), 2);
  etch_machine_info m;
  ASSERT_OK(etch_reader_machine(r, 0, &m));
  ASSERT_EQ_INT(m.raw_id, 0);
  ASSERT_FALSE(m.has_clock_offset);
  ASSERT_OK(etch_reader_machine(r, 1, &m));
  ASSERT_EQ_U64(m.id, 1);
  ASSERT_EQ_INT(m.raw_id, 77);
  ASSERT_TRUE(m.has_clock_offset);
  ASSERT_EQ_INT(m.clock_offset, -95000);
  ASSERT_EQ_STR(m.arch, "aarch64");
  ASSERT_TRUE(m.name == NULL);
  ASSERT_EQ_INT(etch_reader_machine(r, 2, &m), ETCH_ENOTFOUND);
  etch_reader_close(r);
  tb_free(&t);
}

/* Machines are numbered as their first packet comes, whatever their raw
 * ids; a relayed machine's clock offset is its own. */
TEST(machines_numbered_in_order_of_appearance) {
  tb t;
  tb_init(&t);
  tb_process(&t, 1, kProc, 10, "host");
  t.machine = 9;
  tb_process(&t, 2, kProc, 10, "nine");
  t.machine = 3;
  tb_process(&t, 3, kProc, 10, "three");
  t.machine = 9;
  tb_thread(&t, 2, kThread, 10, 12, "nine-t");
  t.machine = 0;
  etch__db *db = import(&t);
  QT_ASSERT(db, "SELECT id, raw_id FROM machine ORDER BY id",
            "id,raw_id\n0,0\n1,9\n2,3\n");
  QT_ASSERT(db,
            "SELECT p.name, p.machine_id FROM process p ORDER BY p.machine_id",
            "name,machine_id\nhost,0\nnine,1\nthree,2\n");
  QT_ASSERT(db,
            "SELECT th.name, p.name AS process FROM thread th "
            "JOIN process p USING (upid)",
            "name,process\nnine-t,nine\n");
  etch__db_close(db);
  tb_free(&t);
}

TEST(machines_one_machine_has_the_host_alone) {
  tb t;
  tb_init(&t);
  system_info(&t, "6.1", "x86_64", 2, 0);
  tb_process(&t, 1, kProc, 10, "app");
  tb_thread(&t, 1, kThread, 10, 11, "main");
  slice(&t, 1, 1000, 10, true, "work");
  etch__db *db = import(&t);
  QT_ASSERT(db, "SELECT id, raw_id, sysname, arch, num_cpus FROM machine",
            "id,raw_id,sysname,arch,num_cpus\n0,0,Linux,x86_64,2\n");
  QT_ASSERT(db, "SELECT machine_id, count(*) AS n FROM thread GROUP BY 1",
            "machine_id,n\n0,1\n");
  QT_ASSERT(db, "SELECT ts, dur FROM slice", "ts,dur\n1000,10\n");
  etch__db_close(db);
  tb_free(&t);
}

/* Hostile bytes: a machine_id of the wrong wire type leaves its packet out;
 * more machines than the reader keeps leave the extra ones' packets out;
 * clock sync values that overflow wrap instead of failing. */
TEST(machines_hostile_bytes_are_left_out) {
  tb t;
  tb_init(&t);
  tb_packet(&t, 1, -1);
  tb_s(&t, ETCH_PKT_MACHINE_ID, "not a varint");
  tb_end(&t);
  for (uint64_t k = 1; k <= 1100; k++) {
    t.machine = k;
    tb_process(&t, 1, kProc, 10, "p");
  }
  t.machine = 5;
  tb_packet(&t, 0, -1);
  tb_open(&t, ETCH_PKT_REMOTE_CLOCK_SYNC);
  for (int i = 0; i < 2; i++) {
    tb_open(&t, ETCH_RCS_SYNCED_CLOCKS);
    snap1(&t, ETCH_RCS_CLIENT_CLOCKS, UINT64_MAX - (uint64_t)i);
    snap1(&t, ETCH_RCS_HOST_CLOCKS, 1);
    tb_close(&t);
  }
  tb_close(&t);
  tb_end(&t);
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, tb_data(&t), tb_len(&t)));
  ASSERT_OK(etch_reader_run(r));
  etch_reader_stats st;
  etch_reader_get_stats(r, &st);
  ASSERT_EQ_U64(etch_reader_machine_count(r), 1024);
  ASSERT_EQ_U64(st.malformed_packets, 1 + (1100 - 1023));
  etch_reader_close(r);
  tb_free(&t);
}

/* etch stats of a trace of two machines: a machines section, and each
 * thread under its machine; the same from the tables and without them. */
TEST(machines_stats_group_threads_by_machine) {
  tb t;
  tb_init(&t);
  build_two(&t);
  etch__stats_opts o = {.top = 10};
  char *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  FILE *f = open_memstream(&a, &na);
  ASSERT_OK(etch__query_stats_memory(tb_data(&t), tb_len(&t), f, &o));
  fclose(f);
  etch__db *db = import(&t);
  f = open_memstream(&b, &nb);
  ASSERT_OK(etch__query_stats(db, f, &o));
  fclose(f);
  etch__db_close(db);
  ASSERT_EQ_STR(a, b);
  const char *want =
      "machines\n"
      "  machine    id  raw id  system      arch     processes  threads\n"
      "  ---------  --  ------  ----------  -------  ---------  -------\n"
      "  host        0       0  Linux 6.1   x86_64           1        1\n"
      "  machine 1   1      77  Linux 5.15  aarch64          1        1\n"
      "\n"
      "threads (busy = time in depth-0 slices)\n"
      "  machine    thread  tid  process  pid     busy  of trace\n"
      "  ---------  ------  ---  -------  ---  -------  --------\n"
      "  host       main     11  app       10  1.10 us      1.1%\n"
      "  machine 1  main     11  app       10  1.50 us      1.6%\n";
  if (!strstr(a, want)) {
    fprintf(stderr, "got:\n%s\nwant (in it):\n%s\n", a, want);
    ASSERT_TRUE(false);
  }
  free(a);
  free(b);
  tb_free(&t);
}

/*
 * bench_import.c - how fast a trace goes into DuckDB.
 *
 * Generates a synthetic trace in memory shaped like what libetch writes
 * (docs/format.md): per-thread sequences that start with a cleared
 * incremental state, defaults and a clock snapshot making clock 64 an
 * incremental clock, process and thread descriptors, then small packets
 * with a time delta, interned category and name ids, and interned_data in
 * the packet of a name's first use. The mix: nested begin/end pairs, some
 * instants, counters on two counter tracks, args on one event in eight.
 * Sequences interleave in blocks of 1000 packets, as chunks do.
 *
 * Packet layout, as libetch writes it: an event whose names are already
 * interned takes the SDK's fast path,
 *   0A len 68 02 5A len <TrackEvent> 40 <delta> 50 <sequence id>
 * (sequence_flags, track_event, the timestamp last; counters add their
 * track uuid and value, args 22 len 08 <key iid> <value>); an event that
 * interns something takes the general path, timestamp first and nested
 * lengths as redundant 4-byte varints:
 *   0A len 40 <delta> 68 02 62 len <InternedData> 5A len <TrackEvent> 50 <seq>
 * With BENCH_LAYOUT=old in the environment every event is written the
 * general way, without names on counters (the generator's layout before
 * libetch moved the timestamp last), to compare with older figures.
 *
 * Each measurement runs in a forked child so that its peak RSS is its own:
 *   reader only        decode and deliver every event in file order
 *   import, no args    the streaming import (file order) without args or
 *                      indexes
 *   etch stats         the report computed while reading, no database
 *   import (query)     what `etch query` does: every arg, then indexes
 *   import, ts order   the import with the reader in timestamp order (the
 *                      C API's default: every event held and sorted)
 *
 *   bench_query_import [events (default 5000000)] [threads (default 4)]
 *                      [mode: 0..4, runs only that one, in-process (perf)]
 *
 * With BENCH_TRACE_OUT=path in the environment the trace is also written to
 * that file (to try the etch command on it).
 *
 * Then the command line on that file (a temporary one without
 * BENCH_TRACE_OUT), each in a process of its own with a private cache
 * directory: `etch query` of `select 1` and of a group-by by name as the
 * first query of the trace (its cache written), of the group-by on the
 * cached trace and with --no-cache, and `etch stats`. When
 * ETCH_PERFETTO_DIR names Perfetto's programs, trace_processor_shell's
 * time and peak RSS for the same SQL are printed beside etch's; with
 * BENCH_PAIRS=n, the first group-by of the two is then run n times in
 * turn, with CPU times, ratios pair by pair, medians and the load, and
 * etch's group-by again on the cache each first query wrote.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pb/pb.h"
#include "proto/perfetto.h"
#include "query/query.h"

enum { kNames = 64, kBlock = 1000 };
/* Counter names are interned after the slice names: iids kNames + 1, + 2. */
static const char *const kCounterNames[2] = {"queue_depth", "heap_bytes"};

typedef struct seq_state {
  uint32_t id;
  int32_t tid;
  uint64_t uuid;
  uint64_t ts;
  int depth;
  uint8_t interned[kNames + 2];
  uint8_t cat_interned;
  uint8_t arg_interned;
} seq_state;

static etch__pb_buf g_buf;
static uint64_t g_events;
static bool g_old_layout;

static void packet_begin(etch__pb_nested *n) {
  etch__pb_nested_begin(&g_buf.s, ETCH_TRACE_PACKET, n);
}

static void seq_start(seq_state *s, int32_t pid) {
  etch__pb_stream *o = &g_buf.s;
  etch__pb_nested pkt, n1, n2, n3;
  packet_begin(&pkt);
  etch__pb_write_varint_field(o, ETCH_PKT_TIMESTAMP, s->ts);
  etch__pb_write_varint_field(o, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch__pb_write_varint_field(o, ETCH_PKT_SEQUENCE_FLAGS,
                             ETCH_SEQ_INCREMENTAL_STATE_CLEARED);
  etch__pb_write_varint_field(o, ETCH_PKT_FIRST_PACKET_ON_SEQUENCE, 1);
  etch__pb_nested_begin(o, ETCH_PKT_TRACE_PACKET_DEFAULTS, &n1);
  etch__pb_write_varint_field(o, ETCH_DEFAULTS_TIMESTAMP_CLOCK_ID, 64);
  etch__pb_nested_begin(o, ETCH_DEFAULTS_TRACK_EVENT_DEFAULTS, &n2);
  etch__pb_write_varint_field(o, ETCH_TEDEFAULTS_TRACK_UUID, s->uuid);
  etch__pb_nested_end(o, &n2);
  etch__pb_nested_end(o, &n1);
  etch__pb_nested_begin(o, ETCH_PKT_CLOCK_SNAPSHOT, &n1);
  etch__pb_nested_begin(o, ETCH_CLOCKSNAP_CLOCKS, &n2);
  etch__pb_write_varint_field(o, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch__pb_write_varint_field(o, ETCH_SNAPCLOCK_TIMESTAMP, s->ts);
  etch__pb_nested_end(o, &n2);
  etch__pb_nested_begin(o, ETCH_CLOCKSNAP_CLOCKS, &n2);
  etch__pb_write_varint_field(o, ETCH_SNAPCLOCK_CLOCK_ID, 64);
  etch__pb_write_varint_field(o, ETCH_SNAPCLOCK_TIMESTAMP, s->ts);
  etch__pb_write_varint_field(o, ETCH_SNAPCLOCK_IS_INCREMENTAL, 1);
  etch__pb_nested_end(o, &n2);
  etch__pb_nested_end(o, &n1);
  etch__pb_write_varint_field(o, ETCH_PKT_TRUSTED_SEQ_ID, s->id);
  etch__pb_nested_end(o, &pkt);

  packet_begin(&pkt);
  etch__pb_nested_begin(o, ETCH_PKT_TRACK_DESCRIPTOR, &n1);
  etch__pb_write_varint_field(o, ETCH_TD_UUID, 1000);
  etch__pb_nested_begin(o, ETCH_TD_PROCESS, &n2);
  etch__pb_write_varint_field(o, ETCH_PD_PID, (uint64_t)pid);
  etch__pb_write_string_field(o, ETCH_PD_PROCESS_NAME, "bench");
  etch__pb_nested_end(o, &n2);
  etch__pb_nested_end(o, &n1);
  etch__pb_write_varint_field(o, ETCH_PKT_TRUSTED_SEQ_ID, s->id);
  etch__pb_nested_end(o, &pkt);

  packet_begin(&pkt);
  etch__pb_nested_begin(o, ETCH_PKT_TRACK_DESCRIPTOR, &n1);
  etch__pb_write_varint_field(o, ETCH_TD_UUID, s->uuid);
  etch__pb_write_varint_field(o, ETCH_TD_PARENT_UUID, 1000);
  etch__pb_nested_begin(o, ETCH_TD_THREAD, &n2);
  etch__pb_write_varint_field(o, ETCH_THD_PID, (uint64_t)pid);
  etch__pb_write_varint_field(o, ETCH_THD_TID, (uint64_t)s->tid);
  char name[32];
  snprintf(name, sizeof name, "worker-%d", s->tid);
  etch__pb_write_string_field(o, ETCH_THD_THREAD_NAME, name);
  etch__pb_nested_end(o, &n2);
  etch__pb_nested_end(o, &n1);
  etch__pb_write_varint_field(o, ETCH_PKT_TRUSTED_SEQ_ID, s->id);
  etch__pb_nested_end(o, &pkt);
  (void)n3;
}

static void counter_tracks(uint32_t seq) {
  etch__pb_stream *o = &g_buf.s;
  const char *const *names = kCounterNames;
  for (int i = 0; i < 2; i++) {
    etch__pb_nested pkt, td, cd;
    packet_begin(&pkt);
    etch__pb_nested_begin(o, ETCH_PKT_TRACK_DESCRIPTOR, &td);
    etch__pb_write_varint_field(o, ETCH_TD_UUID, 2000 + (uint64_t)i);
    etch__pb_write_varint_field(o, ETCH_TD_PARENT_UUID, 1000);
    etch__pb_write_string_field(o, ETCH_TD_NAME, names[i]);
    etch__pb_nested_begin(o, ETCH_TD_COUNTER, &cd);
    etch__pb_write_varint_field(o, ETCH_CD_UNIT,
                               i ? ETCH_CD_UNIT_SIZE_BYTES : ETCH_CD_UNIT_COUNT);
    etch__pb_nested_end(o, &cd);
    etch__pb_nested_end(o, &td);
    etch__pb_write_varint_field(o, ETCH_PKT_TRUSTED_SEQ_ID, seq);
    etch__pb_nested_end(o, &pkt);
  }
}

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)rng_state;
}

/* A packet in the SDK fast path's layout (see the top). */
static void fast_packet(seq_state *s, int type, uint32_t name_iid,
                        uint64_t delta, uint32_t r, bool with_arg) {
  uint8_t b[64], *q = b;
  *q++ = (uint8_t)etch__pb_tag(ETCH_PKT_SEQUENCE_FLAGS, ETCH_PB_VARINT);
  *q++ = ETCH_SEQ_NEEDS_INCREMENTAL_STATE;
  *q++ = (uint8_t)etch__pb_tag(ETCH_PKT_TRACK_EVENT, ETCH_PB_LEN);
  uint8_t *te = q++;
  q = etch__pb_put_tag(q, ETCH_TE_TYPE, ETCH_PB_VARINT);
  q = etch__pb_put_varint(q, (uint64_t)type);
  if (type != ETCH_TE_TYPE_SLICE_END) {
    q = etch__pb_put_tag(q, ETCH_TE_CATEGORY_IIDS, ETCH_PB_VARINT);
    q = etch__pb_put_varint(q, 1);
    q = etch__pb_put_tag(q, ETCH_TE_NAME_IID, ETCH_PB_VARINT);
    q = etch__pb_put_varint(q, name_iid);
  }
  if (type == ETCH_TE_TYPE_COUNTER) {
    q = etch__pb_put_tag(q, ETCH_TE_TRACK_UUID, ETCH_PB_VARINT);
    q = etch__pb_put_varint(q, 2000 + (r >> 30 & 1));
    q = etch__pb_put_tag(q, ETCH_TE_COUNTER_VALUE, ETCH_PB_VARINT);
    q = etch__pb_put_varint(q, r >> 12);
  }
  if (with_arg) {
    *q++ = (uint8_t)etch__pb_tag(ETCH_TE_DEBUG_ANNOTATIONS, ETCH_PB_LEN);
    uint8_t *da = q++;
    q = etch__pb_put_tag(q, ETCH_DA_NAME_IID, ETCH_PB_VARINT);
    q = etch__pb_put_varint(q, 1);
    q = etch__pb_put_tag(q, ETCH_DA_INT_VALUE, ETCH_PB_VARINT);
    q = etch__pb_put_varint(q, r & 0xffff);
    *da = (uint8_t)(q - da - 1);
  }
  *te = (uint8_t)(q - te - 1);
  q = etch__pb_put_tag(q, ETCH_PKT_TIMESTAMP, ETCH_PB_VARINT);
  q = etch__pb_put_varint(q, delta);
  q = etch__pb_put_tag(q, ETCH_PKT_TRUSTED_SEQ_ID, ETCH_PB_VARINT);
  q = etch__pb_put_varint(q, s->id);
  uint8_t hdr[2] = {(uint8_t)etch__pb_tag(ETCH_TRACE_PACKET, ETCH_PB_LEN),
                    (uint8_t)(q - b)};
  etch__pb_write_bytes(&g_buf.s, hdr, 2);
  etch__pb_write_bytes(&g_buf.s, b, (size_t)(q - b));
}

/* One event packet on sequence `s`. */
static void event(seq_state *s) {
  etch__pb_stream *o = &g_buf.s;
  uint32_t r = rnd();
  int type;
  if (s->depth > 0 && (s->depth >= 4 || (r & 3) == 0))
    type = ETCH_TE_TYPE_SLICE_END;
  else if ((r & 31) == 1)
    type = ETCH_TE_TYPE_INSTANT;
  else if ((r & 31) == 2)
    type = ETCH_TE_TYPE_COUNTER;
  else
    type = ETCH_TE_TYPE_SLICE_BEGIN;
  uint32_t name = (r >> 8) % kNames;
  bool with_arg = type == ETCH_TE_TYPE_SLICE_BEGIN && ((r >> 16) & 7) == 0;
  uint64_t delta = 50 + ((r >> 20) & 1023);
  s->ts += delta;
  /* Counters are named after their track (new layout). */
  bool named_counter = type == ETCH_TE_TYPE_COUNTER && !g_old_layout;
  if (named_counter) name = kNames + (r >> 30 & 1);

  etch__pb_nested pkt, id, e, te, da;
  bool need_name = (type == ETCH_TE_TYPE_SLICE_BEGIN ||
                    type == ETCH_TE_TYPE_INSTANT || named_counter) &&
                   !s->interned[name];
  bool need_cat = need_name && !s->cat_interned;
  bool need_arg = with_arg && !s->arg_interned;
  if (!g_old_layout && !need_name && !need_cat && !need_arg) {
    fast_packet(s, type, name + 1, delta, r, with_arg);
    if (type == ETCH_TE_TYPE_SLICE_BEGIN) s->depth++;
    if (type == ETCH_TE_TYPE_SLICE_END) s->depth--;
    return;
  }
  packet_begin(&pkt);
  etch__pb_write_varint_field(o, ETCH_PKT_TIMESTAMP, delta);
  etch__pb_write_varint_field(o, ETCH_PKT_SEQUENCE_FLAGS,
                             ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  if (need_name || need_cat || need_arg) {
    etch__pb_nested_begin(o, ETCH_PKT_INTERNED_DATA, &id);
    if (need_cat) {
      etch__pb_nested_begin(o, ETCH_ID_EVENT_CATEGORIES, &e);
      etch__pb_write_varint_field(o, ETCH_INTERNED_IID, 1);
      etch__pb_write_string_field(o, ETCH_INTERNED_NAME, "bench");
      etch__pb_nested_end(o, &e);
      s->cat_interned = 1;
    }
    if (need_name) {
      char buf[32];
      if (name < kNames)
        snprintf(buf, sizeof buf, "function_%02u", name);
      else
        snprintf(buf, sizeof buf, "%s", kCounterNames[name - kNames]);
      etch__pb_nested_begin(o, ETCH_ID_EVENT_NAMES, &e);
      etch__pb_write_varint_field(o, ETCH_INTERNED_IID, name + 1);
      etch__pb_write_string_field(o, ETCH_INTERNED_NAME, buf);
      etch__pb_nested_end(o, &e);
      s->interned[name] = 1;
    }
    if (need_arg) {
      etch__pb_nested_begin(o, ETCH_ID_DEBUG_ANNOTATION_NAMES, &e);
      etch__pb_write_varint_field(o, ETCH_INTERNED_IID, 1);
      etch__pb_write_string_field(o, ETCH_INTERNED_NAME, "item");
      etch__pb_nested_end(o, &e);
      s->arg_interned = 1;
    }
    etch__pb_nested_end(o, &id);
  }
  etch__pb_nested_begin(o, ETCH_PKT_TRACK_EVENT, &te);
  etch__pb_write_varint_field(o, ETCH_TE_TYPE, (uint64_t)type);
  if (named_counter || (type != ETCH_TE_TYPE_COUNTER &&
                        type != ETCH_TE_TYPE_SLICE_END)) {
    etch__pb_write_varint_field(o, ETCH_TE_CATEGORY_IIDS, 1);
    etch__pb_write_varint_field(o, ETCH_TE_NAME_IID, name + 1);
  }
  if (type == ETCH_TE_TYPE_COUNTER) {
    etch__pb_write_varint_field(o, ETCH_TE_TRACK_UUID, 2000 + (r >> 30 & 1));
    etch__pb_write_varint_field(o, ETCH_TE_COUNTER_VALUE, r >> 12);
  }
  if (with_arg) {
    etch__pb_nested_begin(o, ETCH_TE_DEBUG_ANNOTATIONS, &da);
    etch__pb_write_varint_field(o, ETCH_DA_NAME_IID, 1);
    etch__pb_write_varint_field(o, ETCH_DA_INT_VALUE, r & 0xffff);
    etch__pb_nested_end(o, &da);
  }
  etch__pb_nested_end(o, &te);
  etch__pb_write_varint_field(o, ETCH_PKT_TRUSTED_SEQ_ID, s->id);
  etch__pb_nested_end(o, &pkt);
  if (type == ETCH_TE_TYPE_SLICE_BEGIN) s->depth++;
  if (type == ETCH_TE_TYPE_SLICE_END) s->depth--;
}

static void generate(uint64_t events, int threads) {
  etch__pb_buf_init(&g_buf, 64u << 20, 0);
  seq_state *seqs = calloc((size_t)threads, sizeof *seqs);
  for (int i = 0; i < threads; i++) {
    seqs[i].id = (uint32_t)i + 2;
    seqs[i].tid = 1001 + i;
    seqs[i].uuid = 5000 + (uint64_t)i;
    seqs[i].ts = 1000000000;
    seq_start(&seqs[i], 1000);
  }
  counter_tracks(seqs[0].id);
  for (uint64_t n = 0; n < events;) {
    for (int i = 0; i < threads && n < events; i++)
      for (int k = 0; k < kBlock && n < events; k++, n++) event(&seqs[i]);
  }
  free(seqs);
}

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct result {
  double seconds;
  double cpu; /* process CPU time (both threads) */
  double report_seconds;
  uint64_t events;
  int rc;
} result;

static void count_event(const etch_event *ev, void *user) {
  (void)ev;
  ++*(uint64_t *)user;
}

enum { kReaderOnly, kImportStats, kStatsReport, kImportQuery, kImportTsOrder };

static result run_mode(int mode) {
  result res = {0};
  const void *data = etch__pb_buf_data(&g_buf);
  size_t len = etch__pb_buf_len(&g_buf);
  double t0 = now(), c0 = cpu_now();
  if (mode == kReaderOnly) {
    etch_reader *r;
    res.rc = etch_reader_open_memory(&r, data, len);
    if (!res.rc) {
      etch_reader_set_order(r, ETCH_ORDER_FILE);
      etch_reader_on(r, NULL, NULL, count_event, &res.events);
      res.rc = etch_reader_run(r);
      etch_reader_close(r);
    }
    res.seconds = now() - t0;
    res.cpu = cpu_now() - c0;
    return res;
  }
  if (mode == kStatsReport) {
    FILE *devnull = fopen("/dev/null", "w");
    etch__stats_opts so = {.top = 10};
    res.rc = etch__query_stats_memory(data, len, devnull, &so);
    fclose(devnull);
    res.events = g_events;
    res.seconds = now() - t0;
    res.cpu = cpu_now() - c0;
    return res;
  }
  etch__db *db;
  res.rc = etch__db_open(&db, NULL);
  if (res.rc) return res;
  etch__import_opts o = {.all_args = mode == kImportQuery,
                         .timestamp_order = mode == kImportTsOrder};
  etch__import_counts c;
  res.rc = etch__query_import_memory(db, data, len, "bench", &o, &c);
  res.events = c.events;
  res.seconds = now() - t0;
  res.cpu = cpu_now() - c0;
  etch__db_close(db);
  return res;
}

/* Runs a mode in a child; returns its result and peak RSS in KiB. */
static result run_child(int mode, long *rss_kb) {
  int fds[2];
  result res = {.rc = -1};
  if (pipe(fds) != 0) return res;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    result r = run_mode(mode);
    if (write(fds[1], &r, sizeof r) != (ssize_t)sizeof r) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  if (read(fds[0], &res, sizeof res) != (ssize_t)sizeof res) res.rc = -1;
  close(fds[0]);
  int status;
  struct rusage ru;
  wait4(pid, &status, 0, &ru);
  *rss_kb = ru.ru_maxrss;
  return res;
}

/* ---- the command line against trace_processor ----------------------------- */

static const char kGroupBy[] =
    "select name, count(*), sum(dur) from slice group by name";

/* The CPU time (user + system, s) of the last command run_cmd ran. */
static double g_cmd_cpu;

/* Runs argv (stdout and stderr to /dev/null, `env` added to the
 * environment); its wall time in s and peak RSS in MB, or wall < 0 when it
 * failed. */
static double run_cmd(char *const *argv, const char *env, double *rss_mb) {
  double t0 = now();
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    if (env) putenv((char *)env);
    execv(argv[0], argv);
    _exit(127);
  }
  int status;
  struct rusage ru;
  if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) return -1;
  double wall = now() - t0;
  *rss_mb = (double)ru.ru_maxrss / 1024;
  g_cmd_cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
              (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? wall : -1;
}

static int rm_entry(const char *p, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p);
}

static void print_cell(double wall, double rss) {
  if (wall < 0)
    printf(" %9s %9s", "-", "-");
  else
    printf(" %9.2f %6.0f MB", wall, rss);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The load average over the last minute (-1 when unknown). */
static double load1(void) {
  double l = -1;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf", &l) != 1) l = -1;
    fclose(f);
  }
  return l;
}

enum { kMaxPairs = 32 };

/*
 * With BENCH_PAIRS=n in the environment: the group-by as the first query,
 * etch then trace_processor_shell, n times (the SQL already in `qfile`),
 * each pair's wall and CPU (user + system) time and their ratios, and the
 * group-by again on the cache etch's first query wrote (the cached query
 * measured in the same run), then the medians and the load average before
 * and after: on a machine shared with other work, the two measured in turn
 * and compared pair by pair.
 */
static void compare_pairs(const char *trace, const char *cache,
                          const char *env, char *tp, char *qfile) {
  const char *np = getenv("BENCH_PAIRS");
  int n = np ? atoi(np) : 0;
  if (n <= 0) return;
  if (n > kMaxPairs) n = kMaxPairs;
  double ew[kMaxPairs], ec[kMaxPairs], er[kMaxPairs], tw[kMaxPairs],
      tc[kMaxPairs], rw[kMaxPairs], rc[kMaxPairs], cw[kMaxPairs],
      cc[kMaxPairs];
  double l0 = load1();
  printf("\ngroup by name, first query, %d pairs (load %.1f); then the "
         "same query cached\n", n, l0);
  printf("%5s %9s %9s %8s %9s %9s %8s %8s %10s %9s\n", "pair", "etch (s)",
         "CPU (s)", "RSS MB", "tp (s)", "CPU (s)", "wall x", "CPU x",
         "cached (s)", "CPU (s)");
  int k = 0;
  for (int i = 0; i < n; i++) {
    nftw(cache, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    mkdir(cache, 0700);
    char *argv[] = {(char *)ETCH_BIN, (char *)"query", (char *)trace,
                    (char *)kGroupBy, NULL};
    double rss = 0, trss = 0;
    double w = run_cmd(argv, env, &rss), c = g_cmd_cpu;
    char *targv[] = {tp, (char *)"-q", qfile, (char *)trace, NULL};
    double t = run_cmd(targv, NULL, &trss), u = g_cmd_cpu;
    /* The cache the first query wrote, read by the same query. */
    double crss = 0, cwall = run_cmd(argv, env, &crss), ccpu = g_cmd_cpu;
    if (w <= 0 || t <= 0 || c <= 0 || cwall <= 0) {
      printf("%5d failed\n", i + 1);
      continue;
    }
    ew[k] = w, ec[k] = c, er[k] = rss, tw[k] = t, tc[k] = u;
    rw[k] = t / w, rc[k] = u / c, cw[k] = cwall, cc[k] = ccpu;
    printf("%5d %9.2f %9.2f %8.0f %9.2f %9.2f %8.1f %8.1f %10.2f %9.2f\n",
           i + 1, w, c, rss, t, u, rw[k], rc[k], cwall, ccpu);
    fflush(stdout);
    k++;
  }
  if (!k) return;
  printf("%5s %9.2f %9.2f %8.0f %9.2f %9.2f %8.1f %8.1f %10.2f %9.2f"
         "  (load %.1f to %.1f)\n",
         "med", median(ew, k), median(ec, k), median(er, k), median(tw, k),
         median(tc, k), median(rw, k), median(rc, k), median(cw, k),
         median(cc, k), l0, load1());
}

/*
 * `etch query` (first query of a trace: the cache is written; a cached
 * trace; --no-cache) and `etch stats` on the trace file, beside
 * trace_processor_shell on the same SQL when ETCH_PERFETTO_DIR names
 * Perfetto's programs (bin/trace_processor_shell).
 */
static void compare_cli(const char *trace) {
  char cache[] = "/tmp/bench-query-cache-XXXXXX";
  if (!mkdtemp(cache)) return;
  static char env[64 + sizeof cache];
  snprintf(env, sizeof env, "ETCH_CACHE_DIR=%s", cache);
  char tp[4096] = "";
  const char *pdir = getenv("ETCH_PERFETTO_DIR");
  if (pdir && *pdir) {
    snprintf(tp, sizeof tp, "%s/bin/trace_processor_shell", pdir);
    if (access(tp, X_OK) != 0) tp[0] = '\0';
  }
  char qfile[] = "/tmp/bench-query-sql-XXXXXX";
  int qfd = mkstemp(qfile);
  printf("\n%-34s %9s %9s", "the command line", "etch (s)", "peak RSS");
  if (tp[0]) printf(" %9s %9s", "tp (s)", "peak RSS");
  printf("\n");
  static const struct {
    const char *what, *sql;
    int mode; /* 0 first (no cache yet), 1 cached, 2 --no-cache, 3 stats */
  } rows[] = {{"import only (select 1), first", "select 1", 0},
              {"group by name, first", kGroupBy, 0},
              {"group by name, cached", kGroupBy, 1},
              {"group by name, --no-cache", kGroupBy, 2},
              {"etch stats", NULL, 3}};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    if (rows[i].mode == 0) nftw(cache, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    mkdir(cache, 0700);
    char *argv[8];
    int n = 0;
    argv[n++] = (char *)ETCH_BIN;
    argv[n++] = (char *)(rows[i].mode == 3 ? "stats" : "query");
    if (rows[i].mode == 2) argv[n++] = (char *)"--no-cache";
    argv[n++] = (char *)trace;
    if (rows[i].sql) argv[n++] = (char *)rows[i].sql;
    argv[n] = NULL;
    double rss = 0, wall = run_cmd(argv, env, &rss);
    printf("%-34s", rows[i].what);
    print_cell(wall, rss);
    if (tp[0] && qfd >= 0 && rows[i].mode == 0) {
      if (ftruncate(qfd, 0) == 0 &&
          pwrite(qfd, rows[i].sql, strlen(rows[i].sql), 0) ==
              (ssize_t)strlen(rows[i].sql)) {
        char *targv[] = {tp, (char *)"-q", qfile, (char *)trace, NULL};
        double trss = 0, twall = run_cmd(targv, NULL, &trss);
        print_cell(twall, trss);
      }
    }
    printf("\n");
  }
  if (tp[0] && qfd >= 0) compare_pairs(trace, cache, env, tp, qfile);
  if (qfd >= 0) {
    close(qfd);
    unlink(qfile);
  }
  nftw(cache, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(int argc, char **argv) {
  uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 5000000;
  int threads = argc > 2 ? atoi(argv[2]) : 4;
  if (threads < 1) threads = 1;
  const char *layout = getenv("BENCH_LAYOUT");
  g_old_layout = layout && strcmp(layout, "old") == 0;
  double t0 = now();
  generate(events, threads);
  g_events = events;
  double gen = now() - t0;
  size_t len = etch__pb_buf_len(&g_buf);
  const char *out = getenv("BENCH_TRACE_OUT");
#ifdef ETCH_BIN
  /* The command line reads a file: the trace goes to one if not asked. */
  char tmp_trace[] = "/tmp/bench-query-trace-XXXXXX";
  if (!out && argc <= 3) {
    int fd = mkstemp(tmp_trace);
    if (fd >= 0) {
      close(fd);
      out = tmp_trace;
    }
  }
#endif
  if (out) {
    FILE *f = fopen(out, "wb");
    if (!f || fwrite(etch__pb_buf_data(&g_buf), 1, len, f) != len) {
      perror(out);
      return 1;
    }
    fclose(f);
  }
  printf("trace: %llu events on %d threads, %.1f MB (%.1f bytes/event), "
         "generated in %.2f s\n\n",
         (unsigned long long)events, threads, (double)len / 1e6,
         (double)len / (double)events, gen);
  printf("%-22s %9s %9s %11s %8s %10s\n", "what", "wall (s)", "CPU (s)",
         "events/s", "MB/s", "peak RSS");
  static const char *names[] = {"reader only", "import, no args",
                                "etch stats (no db)", "import (etch query)",
                                "import, ts order"};
  int only = argc > 3 ? atoi(argv[3]) : -1;
  for (int mode = kReaderOnly; mode <= kImportTsOrder; mode++) {
    long rss = 0;
    if (only >= 0 && mode != only) continue;
    result r = only >= 0 ? run_mode(mode) : run_child(mode, &rss);
    if (r.rc) {
      printf("%-24s failed (%d)\n", names[mode], r.rc);
      continue;
    }
    printf("%-22s %9.2f %9.2f %11.0f %8.1f %7.0f MB\n", names[mode],
           r.seconds, r.cpu, (double)r.events / r.seconds,
           (double)len / 1e6 / r.seconds, (double)rss / 1024);
  }
  etch__pb_buf_free(&g_buf);
#ifdef ETCH_BIN
  if (out && argc <= 3) compare_cli(out);
  if (out == tmp_trace) unlink(tmp_trace);
#endif
  return 0;
}

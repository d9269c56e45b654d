/*
 * bench_ls.c - how long listing a trace store takes, cold (no trace's
 * metadata cached: every trace read) and warm (every trace's metadata
 * cached in DIR/.meta), in process (etch__store_list_dir) and as the `etch
 * ls` command (a process of its own, its output to /dev/null).
 *
 *   bench_store_ls [traces (default 1000)] [events per trace (default 200)]
 *
 * The traces are small and shaped like libetch's: a clock snapshot, a
 * process and a thread descriptor, then nested slices with their names
 * in the events. They go into a temporary directory, removed at the end.
 * Warm figures are the median of 9 runs; cold ones of 3 (the metadata
 * removed before each).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pb/pb.h"
#include "proto/perfetto.h"
#include "ui/store.h"

extern char **environ;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int rm_entry(const char *p, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(p);
}

/* One small trace of `events` events into `path`. */
static int write_trace(const char *path, int k, int events) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 4096, 0);
  etch__pb_stream *o = &b.s;
  etch__pb_nested pkt, n1, n2;
  uint64_t ts = 1000000000ull + (uint64_t)k * 1000000;
  /* Clock snapshot: BOOTTIME and REALTIME. */
  etch__pb_nested_begin(o, ETCH_TRACE_PACKET, &pkt);
  etch__pb_nested_begin(o, ETCH_PKT_CLOCK_SNAPSHOT, &n1);
  etch__pb_nested_begin(o, ETCH_CLOCKSNAP_CLOCKS, &n2);
  etch__pb_write_varint_field(o, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch__pb_write_varint_field(o, ETCH_SNAPCLOCK_TIMESTAMP, ts);
  etch__pb_nested_end(o, &n2);
  etch__pb_nested_begin(o, ETCH_CLOCKSNAP_CLOCKS, &n2);
  etch__pb_write_varint_field(o, ETCH_SNAPCLOCK_CLOCK_ID, ETCH_CLOCK_REALTIME);
  etch__pb_write_varint_field(o, ETCH_SNAPCLOCK_TIMESTAMP,
                              1795700000000000000ull + ts);
  etch__pb_nested_end(o, &n2);
  etch__pb_nested_end(o, &n1);
  etch__pb_nested_end(o, &pkt);
  /* Process and thread. */
  etch__pb_nested_begin(o, ETCH_TRACE_PACKET, &pkt);
  etch__pb_nested_begin(o, ETCH_PKT_TRACK_DESCRIPTOR, &n1);
  etch__pb_write_varint_field(o, ETCH_TD_UUID, 1);
  etch__pb_nested_begin(o, ETCH_TD_PROCESS, &n2);
  etch__pb_write_varint_field(o, ETCH_PD_PID, 100 + (uint64_t)k);
  etch__pb_write_string_field(o, ETCH_PD_PROCESS_NAME, "bench");
  etch__pb_nested_end(o, &n2);
  etch__pb_nested_end(o, &n1);
  etch__pb_write_varint_field(o, ETCH_PKT_TRUSTED_SEQ_ID, 1);
  etch__pb_nested_end(o, &pkt);
  etch__pb_nested_begin(o, ETCH_TRACE_PACKET, &pkt);
  etch__pb_nested_begin(o, ETCH_PKT_TRACK_DESCRIPTOR, &n1);
  etch__pb_write_varint_field(o, ETCH_TD_UUID, 2);
  etch__pb_write_varint_field(o, ETCH_TD_PARENT_UUID, 1);
  etch__pb_nested_begin(o, ETCH_TD_THREAD, &n2);
  etch__pb_write_varint_field(o, ETCH_THD_PID, 100 + (uint64_t)k);
  etch__pb_write_varint_field(o, ETCH_THD_TID, 100 + (uint64_t)k);
  etch__pb_write_string_field(o, ETCH_THD_THREAD_NAME, "main");
  etch__pb_nested_end(o, &n2);
  etch__pb_nested_end(o, &n1);
  etch__pb_write_varint_field(o, ETCH_PKT_TRUSTED_SEQ_ID, 1);
  etch__pb_nested_end(o, &pkt);
  /* Slices two deep: outer, inner, inner end, outer end. */
  static const char *const names[] = {"frame", "draw", "update", "io"};
  for (int i = 0; i < events; i++) {
    int phase = i % 4;
    int type = phase < 2 ? ETCH_TE_TYPE_SLICE_BEGIN : ETCH_TE_TYPE_SLICE_END;
    ts += 1000;
    etch__pb_nested_begin(o, ETCH_TRACE_PACKET, &pkt);
    etch__pb_write_varint_field(o, ETCH_PKT_TIMESTAMP, ts);
    etch__pb_nested_begin(o, ETCH_PKT_TRACK_EVENT, &n1);
    etch__pb_write_varint_field(o, ETCH_TE_TYPE, (uint64_t)type);
    etch__pb_write_varint_field(o, ETCH_TE_TRACK_UUID, 2);
    if (type == ETCH_TE_TYPE_SLICE_BEGIN)
      etch__pb_write_string_field(o, ETCH_TE_NAME, names[(i / 4 + phase) % 4]);
    etch__pb_nested_end(o, &n1);
    etch__pb_write_varint_field(o, ETCH_PKT_TRUSTED_SEQ_ID, 1);
    etch__pb_nested_end(o, &pkt);
  }
  int rc = 0;
  FILE *f = fopen(path, "wb");
  size_t len = etch__pb_buf_len(&b);
  if (!f || fwrite(etch__pb_buf_data(&b), 1, len, f) != len) rc = -1;
  if (f && fclose(f) != 0) rc = -1;
  etch__pb_buf_free(&b);
  return rc;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

static void drop_meta(const char *dir) {
  char meta[4200];
  snprintf(meta, sizeof meta, "%s/.meta", dir);
  nftw(meta, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* One listing in process: seconds; *n the entries, *computed those read. */
static double list_once(const char *dir, size_t *n, size_t *computed) {
  etch__store_list l;
  double t0 = now();
  if (etch__store_list_dir(dir, &l) != 0) {
    fprintf(stderr, "listing failed\n");
    exit(1);
  }
  double t = now() - t0;
  *n = l.n;
  *computed = l.computed;
  etch__store_list_free(&l);
  return t;
}

#ifdef ETCH_BIN
/* `etch ls` (or `etch ls --json`) as a process of its own: seconds. */
static double ls_cmd(const char *dir, bool json) {
  setenv("ETCH_STORE", dir, 1);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  char *argv[] = {(char *)ETCH_BIN, (char *)"ls",
                  json ? (char *)"--json" : NULL, NULL};
  double t0 = now();
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) != 0) {
    perror(ETCH_BIN);
    exit(1);
  }
  int st;
  waitpid(pid, &st, 0);
  double t = now() - t0;
  posix_spawn_file_actions_destroy(&fa);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "etch ls failed\n");
    exit(1);
  }
  return t;
}
#endif

int main(int argc, char **argv) {
  int ntraces = argc > 1 ? atoi(argv[1]) : 1000;
  int events = argc > 2 ? atoi(argv[2]) : 200;
  if (ntraces < 1 || events < 0) {
    fprintf(stderr, "usage: bench_store_ls [traces] [events per trace]\n");
    return 2;
  }
  const char *tmp = getenv("TMPDIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/bench-store-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  double t0 = now();
  long long bytes = 0;
  for (int k = 0; k < ntraces; k++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/20261127-%06d-bench.pftrace", dir, k);
    if (write_trace(path, k, events) != 0) {
      perror(path);
      return 1;
    }
    struct stat sb;
    if (stat(path, &sb) == 0) bytes += sb.st_size;
  }
  printf("store: %d traces of %d events (%.1f KB each), written in %.2f s\n\n",
         ntraces, events, (double)bytes / ntraces / 1e3, now() - t0);

  double cold[3], warm[9];
  size_t n = 0, computed = 0;
  for (int i = 0; i < 3; i++) {
    drop_meta(dir);
    cold[i] = list_once(dir, &n, &computed);
    if (n != (size_t)ntraces || computed != n) {
      fprintf(stderr, "cold listing: %zu entries, %zu read\n", n, computed);
      return 1;
    }
  }
  for (int i = 0; i < 9; i++) {
    warm[i] = list_once(dir, &n, &computed);
    if (computed != 0) {
      fprintf(stderr, "warm listing read %zu traces\n", computed);
      return 1;
    }
  }
  printf("%-40s %10s\n", "what", "ms");
  printf("%-40s %10.1f\n", "in process, cold (every trace read)",
         median(cold, 3) * 1e3);
  printf("%-40s %10.1f\n", "in process, warm (metadata cached)",
         median(warm, 9) * 1e3);
#ifdef ETCH_BIN
  for (int i = 0; i < 3; i++) {
    drop_meta(dir);
    cold[i] = ls_cmd(dir, false);
  }
  for (int i = 0; i < 9; i++) warm[i] = ls_cmd(dir, false);
  printf("%-40s %10.1f\n", "etch ls, cold", median(cold, 3) * 1e3);
  printf("%-40s %10.1f\n", "etch ls, warm", median(warm, 9) * 1e3);
  for (int i = 0; i < 9; i++) warm[i] = ls_cmd(dir, true);
  printf("%-40s %10.1f\n", "etch ls --json, warm", median(warm, 9) * 1e3);
#endif
  nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}

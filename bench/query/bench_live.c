/*
 * bench_live.c - a query every "second" on a trace being recorded.
 *
 * Plays a recording of the trace TRACE (any etch trace; e.g. one
 * bench_query_import writes with BENCH_TRACE_OUT=FILE): a copy of it
 * grows in STEPS appends of equal size (cut anywhere, inside packets too),
 * its writer's lock held as etch's writers hold it (buffer/sink.h). After
 * each append it measures the CPU time of
 *
 *   import        what `etch query` does on a trace being recorded: every
 *                 byte written so far imported into an in-memory DuckDB
 *                 (no cache is written for it)
 *   read, cold    the reader alone over every byte so far, file order
 *   read on       one reader kept open, reading only what was appended
 *                 (etch__reader_resume)
 *   import on     one live import kept open (etch__import_live_step, what
 *                 etch ui holds for a trace being recorded): what was
 *                 appended read into the same tables
 *
 * and prints, for the first, middle and last step and in total, the CPU
 * seconds of each, then a check that the reader read on to the same
 * event count as a cold read, and the live import to the same slice
 * count as a cold import.
 *
 *   bench_query_live TRACE [STEPS (default 60)]
 *
 * With BENCH_LIVE_ONLY=on only the live import is run, into a database
 * file with a 256 MB memory limit as etch ui's: to profile its steps
 * alone (perf, callgrind); it then prints every
 * step's CPU and events, and the CPU per million events of the steps
 * after the first (the first is a cold read of what is there).
 *
 * The appends come as fast as the measurements allow, not once a second:
 * what is measured is the CPU a query costs at each size, which is what a
 * query every second for STEPS seconds costs.
 */
#define _GNU_SOURCE
#include <etch/reader.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "query/query.h"
#include "query/run.h"
#include "reader/reader_priv.h"

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void count_event(const etch_event *ev, void *user) {
  (void)ev;
  ++*(uint64_t *)user;
}

static uint64_t read_cold(const char *path) {
  etch_reader *r;
  uint64_t n = 0;
  if (etch_reader_open_file(&r, path) != ETCH_OK) return 0;
  etch_reader_set_allow_truncated(r, 1);
  etch_reader_set_order(r, ETCH_ORDER_FILE);
  etch_reader_on(r, NULL, NULL, count_event, &n);
  if (etch_reader_run(r) != ETCH_OK) n = 0;
  etch_reader_close(r);
  return n;
}

static int64_t slices_of(etch__db *db) {
  int64_t n = -1;
  if (etch__query_ints(db, "SELECT count(*) FROM slice_data", NULL, 0, &n, 1))
    return -1;
  return n;
}

/* A cold import of the file as it is; its slice count in *slices. */
/* What `etch query` does on a recording (cache.c): the recording's cache
 * opened, its state restored, what was appended read, the state saved;
 * its slice count in *slices. */
static int query_on(const char *path, const char *cache, int64_t *slices) {
  etch__db *db;
  etch__import_opts o = {.all_args = true, .allow_truncated = true,
                         .quiet = true, .read_on = true};
  int rc = etch__query_open_cached(path, cache, &o, &db, NULL);
  if (!rc) *slices = slices_of(db);
  etch__db_close(db);
  return rc;
}

static int import_cold(const char *path, int64_t *slices) {
  etch__db *db;
  if (etch__db_open(&db, NULL) != ETCH_OK) return -1;
  etch__import_opts o = {.all_args = true, .allow_truncated = true,
                         .quiet = true};
  int rc = etch__query_import_file(db, NULL, path, &o, NULL);
  if (!rc) *slices = slices_of(db);
  etch__db_close(db);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_query_live TRACE [STEPS]\n");
    return 2;
  }
  int steps = argc > 2 ? atoi(argv[2]) : 60;
  if (steps < 1) steps = 1;
  int in = open(argv[1], O_RDONLY);
  struct stat sb;
  if (in < 0 || fstat(in, &sb) != 0 || sb.st_size == 0) {
    perror(argv[1]);
    return 1;
  }
  size_t total = (size_t)sb.st_size;
  const uint8_t *src = mmap(NULL, total, PROT_READ, MAP_PRIVATE, in, 0);
  if (src == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  char path[4096];
  const char *tmp = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/bench_live_%ld.pftrace",
           tmp && *tmp ? tmp : "/tmp", (long)getpid());
  int w = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  if (w < 0 || fcntl(w, F_OFD_SETLK, &fl) != 0) {
    perror(path);
    return 1;
  }
  etch_reader *kept;
  uint64_t kept_n = 0;
  if (etch_reader_open_file(&kept, path) != ETCH_OK ||
      etch_reader_set_order(kept, ETCH_ORDER_FILE) != ETCH_OK ||
      etch_reader_on(kept, NULL, NULL, count_event, &kept_n) != ETCH_OK ||
      etch_reader_run(kept) != ETCH_OK) {
    fprintf(stderr, "reader: %s\n", etch_last_error());
    return 1;
  }
  etch__db *live_db;
  etch__import_live *live;
  etch__import_opts lo = {.all_args = true};
  /* Only the live import: its database a file with DuckDB's memory
   * limited, as etch ui keeps a live trace's (src/ui/live.c). */
  const char *only = getenv("BENCH_LIVE_ONLY");
  bool only_on = only && !strcmp(only, "on");
  char live_file[4200] = "";
  if (only_on) snprintf(live_file, sizeof live_file, "%s.duckdb", path);
  if (etch__db_open(&live_db, only_on ? live_file : NULL) != ETCH_OK ||
      (only_on &&
       etch__db_exec(live_db, "SET memory_limit = '256MB';") != ETCH_OK) ||
      (only_on && getenv("BENCH_LIVE_SQL") &&
       etch__db_exec(live_db, getenv("BENCH_LIVE_SQL")) != ETCH_OK) ||
      etch__import_live_open(&live, live_db, path, &lo) != ETCH_OK) {
    fprintf(stderr, "live import: %s\n", etch_last_error());
    return 1;
  }
  char cache[4200];
  snprintf(cache, sizeof cache, "%s.cache", path);
  if (mkdir(cache, 0700) != 0) {
    perror(cache);
    return 1;
  }
  double sum[5] = {0, 0, 0, 0, 0};
  int64_t cold_slices = -1, query_slices = -1;
  printf("%-6s %12s %12s %12s %12s %12s %12s\n", "step", "bytes", "import s",
         "read cold s", "read on s", "import on s", "query on s");
  size_t done = 0;
  uint64_t cold_n = 0;
  if (only_on) {
    double on_cpu = 0;
    int64_t on_events = 0, before = 0;
    for (int i = 1; i <= steps; i++) {
      size_t upto = i == steps ? total : total / (size_t)steps * (size_t)i;
      if (write(w, src + done, upto - done) != (ssize_t)(upto - done)) {
        perror("write");
        return 1;
      }
      done = upto;
      double t0 = cpu_now();
      if (etch__import_live_step(live, NULL) != ETCH_OK) {
        fprintf(stderr, "import on: %s\n", etch_last_error());
        return 1;
      }
      double c = cpu_now() - t0;
      int64_t ev = 0;
      if (etch__query_ints(live_db,
                           "SELECT CAST(value AS BIGINT) FROM stats"
                           " WHERE name = 'track_events'",
                           NULL, 0, &ev, 1) != ETCH_OK)
        ev = -1;
      printf("step %d: %zu bytes, %.4f s CPU, %lld events\n", i, done, c,
             (long long)(ev - before));
      if (i > 1) {
        on_cpu += c;
        on_events += ev - before;
      }
      before = ev;
    }
    if (on_events > 0)
      printf("import on: %.4f s CPU per million events (steps 2-%d)\n",
             on_cpu / ((double)on_events / 1e6), steps);
    etch__import_live_close(live);
    etch__db_close(live_db);
    etch_reader_close(kept);
    unlink(path);
    unlink(live_file);
    rmdir(cache);
    return 0;
  }
  for (int i = 1; i <= steps; i++) {
    size_t upto = i == steps ? total : total / (size_t)steps * (size_t)i;
    if (write(w, src + done, upto - done) != (ssize_t)(upto - done)) {
      perror("write");
      return 1;
    }
    done = upto;
    double t0 = cpu_now();
    if (import_cold(path, &cold_slices) != ETCH_OK) {
      fprintf(stderr, "import: %s\n", etch_last_error());
      return 1;
    }
    double t1 = cpu_now();
    cold_n = read_cold(path);
    double t2 = cpu_now();
    if (etch__reader_resume(kept, NULL) != ETCH_OK) {
      fprintf(stderr, "read on: %s\n", etch_last_error());
      return 1;
    }
    double t3 = cpu_now();
    if (etch__import_live_step(live, NULL) != ETCH_OK) {
      fprintf(stderr, "import on: %s\n", etch_last_error());
      return 1;
    }
    double t4 = cpu_now();
    if (query_on(path, cache, &query_slices) != ETCH_OK) {
      fprintf(stderr, "query on: %s\n", etch_last_error());
      return 1;
    }
    double t5 = cpu_now();
    double c[5] = {t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4};
    for (int k = 0; k < 5; k++) sum[k] += c[k];
    if (i == 1 || i == steps / 2 || i == steps)
      printf("%-6d %12zu %12.4f %12.4f %12.4f %12.4f %12.4f\n", i, done, c[0],
             c[1], c[2], c[3], c[4]);
  }
  /* The writer gone: the query that finds it ended, then the next. */
  close(w);
  w = -1;
  double e0 = cpu_now();
  int erc = query_on(path, cache, &query_slices);
  double e1 = cpu_now();
  int64_t again = -1;
  if (!erc) erc = query_on(path, cache, &again);
  double e2 = cpu_now();
  if (erc || again != query_slices) {
    fprintf(stderr, "query on, ended: %s\n", etch_last_error());
    return 1;
  }
  printf("%-6s %12zu %12.4f %12.4f %12.4f %12.4f %12.4f\n", "total", done,
         sum[0], sum[1], sum[2], sum[3], sum[4]);
  printf("query on, after the recording ended: %.4f s, the next: %.4f s\n",
         e1 - e0, e2 - e1);
  printf("events: read on %llu, cold %llu: %s\n", (unsigned long long)kept_n,
         (unsigned long long)cold_n, kept_n == cold_n ? "same" : "DIFFERENT");
  int64_t live_slices = slices_of(live_db);
  printf("slices: import on %lld, cold %lld: %s (restarts %llu)\n",
         (long long)live_slices, (long long)cold_slices,
         live_slices == cold_slices ? "same" : "DIFFERENT",
         (unsigned long long)etch__import_live_restarts(live));
  printf("slices: query on %lld, cold %lld: %s\n", (long long)query_slices,
         (long long)cold_slices,
         query_slices == cold_slices ? "same" : "DIFFERENT");
  etch__import_live_close(live);
  etch__db_close(live_db);
  etch_reader_close(kept);
  unlink(path);
  char rm[4300];
  snprintf(rm, sizeof rm, "rm -rf '%s'", cache);
  if (system(rm) != 0) fprintf(stderr, "%s: not removed\n", cache);
  return kept_n == cold_n && live_slices == cold_slices &&
                 query_slices == cold_slices
             ? 0
             : 1;
}

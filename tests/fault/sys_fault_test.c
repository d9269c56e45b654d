/*
 * sys_fault_test.c - etch's file writes with each system call failing in
 * turn (base/sys.h, sysfault.h): libetch's trace written at the end of a
 * session and as it goes (write_period_ms), the flight file made and its
 * recovered trace written, the query cache built beside a trace, the
 * store's listing and removal. Each failure is an error that names the
 * errno (or one the part goes without, as the store's metadata cache),
 * never a crash or a leak, and nothing half-written is left as if whole:
 * a trace is either not there, the whole trace, or cut at its last whole
 * packet with an error that says so; a cache file is either whole or not
 * there.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <etch/etch.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "buffer/buffer.h"
#include "buffer/flight.h"
#include "fault.h"
#include "fault_read.h"
#include "query/query.h"
#include "sysfault.h"
#include "test.h"
#include "ui/store.h"

ETCH_CATEGORY_DEFINE(sysf_cat, "sysf", "system call failure tests", "");

static void some_events(void) {
  for (int i = 0; i < 50; i++) {
    ETCH_SLICE_BEGIN(sysf_cat, "work", ETCH_ARG_INT("i", i));
    ETCH_INSTANT(sysf_cat, "mark", ETCH_ARG_STRING("what", "a string arg"));
    ETCH_SLICE_END(sysf_cat);
  }
}

/* The table as the C library's while a test looks at what an operation
 * left (its own reads are not the operation's). */
static etch__sys_calls held;
static void hold(void) {
  held = etch__sys_table;
  etch__sys_reset();
}
static void unhold(void) { etch__sys_table = held; }

/* The error of the operation, kept across the test's own reading. */
static char op_error[1024];
static void keep_error(void) {
  snprintf(op_error, sizeof op_error, "%s", etch_last_error());
}
static int put_error(int rc) {
  return rc ? etch__error(rc, "%s", op_error) : rc;
}

/* Whether `dir` holds a file whose name contains `part`. */
static bool dir_has(const char *dir, const char *part) {
  DIR *d = opendir(dir);
  if (!d) return false;
  bool found = false;
  struct dirent *de;
  while (!found && (de = readdir(d)))
    found = strstr(de->d_name, part) != NULL;
  closedir(d);
  return found;
}

/* ---- libetch's trace ---------------------------------------------------- */

typedef struct trace_case {
  char dir[600], path[700], config[900];
  char *want; /* the trace's reading */
} trace_case;

static bool cut_seen; /* a run left a trace cut short */

static int trace_op(void *ctx) {
  trace_case *c = (trace_case *)ctx;
  unlink(c->path);
  etch_config *cfg;
  int rc = etch_config_new(&cfg);
  if (rc) return rc;
  rc = etch_config_parse(cfg, c->config);
  etch_session *s = NULL;
  if (!rc) rc = etch_session_new(cfg, &s);
  etch_config_free(cfg);
  if (rc) return rc;
  rc = etch_session_start(s);
  if (!rc) {
    some_events();
    rc = etch_session_stop(s);
  }
  etch_session_free(s);
  keep_error();
  hold();
  struct stat sb;
  bool there = stat(c->path, &sb) == 0;
  if (dir_has(c->dir, ".tmp"))
    FAIL("%s: a temporary file is left beside the trace", sys_fault_now);
  if (rc == ETCH_OK || there) {
    fault_read_ctx rd;
    memset(&rd, 0, sizeof rd);
    rd.path = c->path;
    rd.stable = true;
    int rrc = fault_read(&rd);
    if (rrc)
      FAIL("%s: the trace left (%s) does not read: %s", sys_fault_now,
           rc ? "after a failure" : "after success", etch_last_error());
    if (!rc && c->want && strcmp(rd.out.s, c->want) != 0)
      FAIL("%s: the trace differs:\n--- want\n%s--- got\n%s", sys_fault_now,
           c->want, rd.out.s);
    fault_str_free(&rd.out);
    /* A trace cut short after a failure: the error says so. */
    if (rc && there && sb.st_size > 0) cut_seen = true;
    if (rc && there && sb.st_size > 0 &&
        !strstr(op_error, "last whole packet"))
      FAIL("%s: the trace is left (%lld bytes) but the error does not say "
           "it is cut: %s",
           sys_fault_now, (long long)sb.st_size, op_error);
  }
  unhold();
  return put_error(rc);
}

static void trace_setup(trace_case *c, const char *extra) {
  memset(c, 0, sizeof *c);
  snprintf(c->dir, sizeof c->dir, "%s/out", etch_test_tmpdir());
  mkdir(c->dir, 0755);
  snprintf(c->path, sizeof c->path, "%s/t.pftrace", c->dir);
  snprintf(c->config, sizeof c->config,
           "categories=sysf;buffer_kb=256;output=%s%s", c->path, extra);
  ASSERT_OK(trace_op(c));
  fault_read_ctx rd;
  memset(&rd, 0, sizeof rd);
  rd.path = c->path;
  rd.stable = true;
  ASSERT_OK(fault_read(&rd));
  c->want = rd.out.s;
  if (!strstr(c->want, "name=mark"))
    FAIL("the trace lacks events:\n%s", c->want);
}

/* `cut`: some run of the short-write sweep leaves a trace cut short (a
 * deflated trace is one packet of a few hundred bytes: half of it is no
 * whole packet, and nothing is left). */
static void sweep_trace(const char *extra, bool cut) {
  trace_case c;
  trace_setup(&c, extra);
  static const int errs[] = {ENOSPC, EIO};
  for (size_t i = 0; i < 2; i++) {
    sys_fault_result r = sys_fault_sweep(c.config, trace_op, &c, errs[i]);
    printf("  %s %s: %llu calls, %llu runs failed of %llu\n", extra,
           strerrorname_np(errs[i]), (unsigned long long)r.calls,
           (unsigned long long)r.failed, (unsigned long long)r.runs);
    if (!r.failed) FAIL("%s: no failure made the write fail", c.config);
  }
  /* A disk full in the middle of a write: the trace is cut back to its
   * last whole packet, and the error says so. */
  sys_fault_result r = sys_fault_sweep_as(c.config, trace_op, &c, ENOSPC, true);
  printf("  %s, short writes: %llu calls, %llu runs failed of %llu\n", extra,
         (unsigned long long)r.calls, (unsigned long long)r.failed,
         (unsigned long long)r.runs);
  if (cut && !cut_seen) FAIL("%s: no run left a trace cut short", c.config);
  /* EINTR on each write in turn: retried, the same trace. */
  sys_fault_arm(-1, 0, 0, false);
  ASSERT_OK(trace_op(&c));
  uint64_t writes = sys_fault_count(3);
  sys_fault_disarm();
  ASSERT_EQ_STR(etch__sys_name(3), "write");
  if (!writes) FAIL("%s: no write through the table", c.config);
  for (uint64_t n = 1; n <= writes; n++) {
    snprintf(sys_fault_now, sizeof sys_fault_now, "%.200s, write %llu EINTR",
             c.config, (unsigned long long)n);
    sys_fault_arm(3, n, EINTR, false);
    int rc = trace_op(&c);
    sys_fault_disarm();
    if (rc) FAIL("%s: %s", sys_fault_now, etch_last_error());
  }
  free(c.want);
}

TEST(sys_fault_trace_at_the_end) { sweep_trace(";compression=none", true); }

TEST(sys_fault_trace_at_the_end_deflated) {
  sweep_trace(";compression=deflate", false);
}

/* Written as it goes: the file opened at the start, written at the stop
 * (a period no run reaches: the same calls each run). */
TEST(sys_fault_trace_written_as_it_goes) {
  sweep_trace(";compression=none;write_period_ms=86400000", true);
}

/* ---- the flight file ---------------------------------------------------- */

typedef struct flight_case {
  char dir[600], path[700], out[700];
} flight_case;

static int flight_op(void *ctx) {
  flight_case *c = (flight_case *)ctx;
  unlink(c->path);
  unlink(c->out);
  etch_flight f;
  etch_buffer b;
  etch_flight_id id = {.pid = 42, .process_uuid = 7, .process_name = "sysf"};
  int rc =
      etch__flight_create(&f, c->path, 64 * 1024, ETCH_BUFFER_RING, &id, &b);
  if (rc) {
    hold();
    if (access(c->path, F_OK) == 0)
      FAIL("%s: a flight file that failed to be made is left", sys_fault_now);
    unhold();
    return rc;
  }
  etch__buffer_destroy(&b);
  etch__flight_close(&f, true);
  hold();
  size_t len;
  uint8_t *file = etch_test_read_file(c->path, &len);
  if (!file) FAIL("%s: the flight file is gone", sys_fault_now);
  int fd = open(c->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) FAIL("open %s: %s", c->out, strerror(errno));
  unhold();
  uint8_t *none = NULL;
  size_t none_len = 0;
  rc = etch__flight_recover(file, len, false, fd, &none, &none_len, NULL);
  keep_error();
  hold();
  free(none);
  close(fd);
  free(file);
  /* What was written of the recovered trace is whole packets. */
  fault_read_ctx rd;
  memset(&rd, 0, sizeof rd);
  rd.path = c->out;
  if (fault_read(&rd))
    FAIL("%s: the recovered trace left does not read: %s", sys_fault_now,
         etch_last_error());
  fault_str_free(&rd.out);
  unhold();
  return put_error(rc);
}

TEST(sys_fault_flight_file) {
  flight_case c;
  memset(&c, 0, sizeof c);
  snprintf(c.dir, sizeof c.dir, "%s", etch_test_tmpdir());
  snprintf(c.path, sizeof c.path, "%s/f.flight", c.dir);
  snprintf(c.out, sizeof c.out, "%s/f.pftrace", c.dir);
  static const int errs[] = {ENOSPC, EIO};
  for (size_t i = 0; i < 2; i++) {
    sys_fault_result r = sys_fault_sweep("flight", flight_op, &c, errs[i]);
    printf("  %s: %llu calls, %llu runs failed of %llu\n",
           strerrorname_np(errs[i]), (unsigned long long)r.calls,
           (unsigned long long)r.failed, (unsigned long long)r.runs);
    if (r.failed != r.runs) FAIL("flight: a failed call went unnoticed");
  }
  /* EINTR on the header's pwrite: retried. */
  ASSERT_EQ_STR(etch__sys_name(4), "pwrite");
  sys_fault_arm(4, 1, EINTR, false);
  int rc = flight_op(&c);
  uint64_t fails = sys_fault_fails();
  sys_fault_disarm();
  ASSERT_OK(rc);
  ASSERT_EQ_U64(fails, 1);
}

/* ---- the query cache and the store ------------------------------------- */

typedef struct cache_case {
  char trace[700], cache[700], file[4300];
  int64_t slices;
} cache_case;

static int64_t count_slices(etch__db *db) {
  etch__res r;
  if (etch__res_query(db, "SELECT count(*) FROM slice", "test", &r))
    FAIL("%s: the query: %s", sys_fault_now, etch_last_error());
  int64_t n = etch__res_next(&r) ? etch__res_i64(&r, 0) : -1;
  etch__res_close(&r);
  return n;
}

static void empty_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *de;
  while ((de = readdir(d)))
    if (de->d_name[0] != '.' || (de->d_name[1] && de->d_name[1] != '.'))
      unlinkat(dirfd(d), de->d_name, 0);
  closedir(d);
}

static int cache_op(void *ctx) {
  cache_case *c = (cache_case *)ctx;
  hold();
  empty_dir(c->cache);
  unhold();
  etch__import_opts o = {.quiet = true};
  bool imported;
  int rc = etch__query_cache_file(c->trace, c->cache, &o, c->file,
                                  sizeof c->file, &imported);
  keep_error();
  hold();
  if (!rc && !c->file[0])
    FAIL("%s: no cache and no error", sys_fault_now);
  if (dir_has(c->cache, ".tmp"))
    FAIL("%s: a temporary cache file is left", sys_fault_now);
  /* Whatever cache is there now is whole: the next open uses it (no
   * import) and it holds every slice. */
  if (dir_has(c->cache, ".duckdb")) {
    etch__db *db;
    bool again;
    if (etch__query_open_cached(c->trace, c->cache, &o, &db, &again))
      FAIL("%s: the cache left does not open: %s", sys_fault_now,
           etch_last_error());
    if (again) FAIL("%s: the cache left was not used", sys_fault_now);
    if (count_slices(db) != c->slices)
      FAIL("%s: the cache left holds other slices", sys_fault_now);
    etch__db_close(db);
  } else if (!rc) {
    FAIL("%s: success and no cache file", sys_fault_now);
  }
  unhold();
  return put_error(rc);
}

/* A trace of libetch's, written without a fault. */
static void make_trace(char *path, size_t n) {
  trace_case t;
  trace_setup(&t, ";compression=none");
  free(t.want);
  snprintf(path, n, "%s", t.path);
}

TEST(sys_fault_query_cache) {
  cache_case c;
  memset(&c, 0, sizeof c);
  make_trace(c.trace, sizeof c.trace);
  snprintf(c.cache, sizeof c.cache, "%s/cache", etch_test_tmpdir());
  mkdir(c.cache, 0700);
  etch__db *db;
  bool imported;
  etch__import_opts o = {.quiet = true};
  ASSERT_OK(etch__query_open_cached(c.trace, c.cache, &o, &db, &imported));
  c.slices = count_slices(db);
  etch__db_close(db);
  ASSERT_EQ_U64(c.slices, 100); /* the slices and the instants */
  static const int errs[] = {ENOSPC, EIO};
  for (size_t i = 0; i < 2; i++) {
    sys_fault_result r = sys_fault_sweep("query cache", cache_op, &c, errs[i]);
    printf("  %s: %llu calls, %llu runs failed of %llu\n",
           strerrorname_np(errs[i]), (unsigned long long)r.calls,
           (unsigned long long)r.failed, (unsigned long long)r.runs);
  }
}

typedef struct store_case {
  char dir[700], name[128], path[900];
  uint8_t *bytes;
  size_t len;
} store_case;

static int store_op(void *ctx) {
  store_case *c = (store_case *)ctx;
  hold();
  FILE *f = fopen(c->path, "wb");
  if (!f || fwrite(c->bytes, 1, c->len, f) != c->len) FAIL("writing the trace");
  fclose(f);
  unhold();
  /* Listed twice: the metadata computed and cached, then read back. */
  for (int k = 0; k < 2; k++) {
    etch__store_list l;
    memset(&l, 0, sizeof l);
    int rc = etch__store_list_dir(c->dir, &l);
    if (rc) return rc;
    if (l.n != 1 || l.e[0].error || l.e[0].slices != 100)
      FAIL("%s: the listing: %zu entries, error %s, %lld slices",
           sys_fault_now, l.n, l.n && l.e[0].error ? l.e[0].error : "none",
           l.n ? (long long)l.e[0].slices : -1ll);
    etch__store_list_free(&l);
  }
  int rc = etch__store_remove(c->dir, c->name);
  keep_error();
  hold();
  bool there = access(c->path, F_OK) == 0;
  if (!rc && there) FAIL("%s: removed, and still there", sys_fault_now);
  if (rc && !there) FAIL("%s: not removed, and gone", sys_fault_now);
  unhold();
  return put_error(rc);
}

TEST(sys_fault_store) {
  store_case c;
  memset(&c, 0, sizeof c);
  char trace[700];
  make_trace(trace, sizeof trace);
  c.bytes = etch_test_read_file(trace, &c.len);
  ASSERT_TRUE(c.bytes != NULL);
  snprintf(c.dir, sizeof c.dir, "%s/store", etch_test_tmpdir());
  mkdir(c.dir, 0755);
  snprintf(c.name, sizeof c.name, "prog-20261129-100000.pftrace");
  ASSERT_TRUE(etch__store_name_ok(c.name));
  snprintf(c.path, sizeof c.path, "%s/%s", c.dir, c.name);
  static const int errs[] = {ENOSPC, EIO, EACCES};
  for (size_t i = 0; i < 3; i++) {
    sys_fault_result r = sys_fault_sweep("store", store_op, &c, errs[i]);
    printf("  %s: %llu calls, %llu runs failed of %llu\n",
           strerrorname_np(errs[i]), (unsigned long long)r.calls,
           (unsigned long long)r.failed, (unsigned long long)r.runs);
  }
  free(c.bytes);
}

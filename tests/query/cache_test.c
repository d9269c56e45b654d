/*
 * cache_test.c - the cache of a trace's tables (cache.c) and several traces
 * in one database (multi.c): what a query returns and whether the trace
 * was read, in a private cache directory.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "query/query.h"
#include "query_test_util.h"
#include "test.h"
#include "trace_build.h"

enum { kProc = 1, kMain = 2 };

/* A trace with `n` slices named `name` on one thread, written to `path`. */
static void write_trace(const char *path, int n, const char *name) {
  tb t;
  tb_init(&t);
  tb_process(&t, 1, kProc, 10, "app");
  tb_thread(&t, 1, kMain, 10, 10, "main");
  for (int i = 0; i < n; i++) {
    tb_event(&t, 1, 1000 + i * 100, kMain, ETCH_TE_TYPE_SLICE_BEGIN, "c", name);
    tb_event(&t, 1, 1050 + i * 100, kMain, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  }
  FILE *f = fopen(path, "wb");
  ASSERT_TRUE(f != NULL);
  ASSERT_EQ_INT(fwrite(tb_data(&t), 1, tb_len(&t), f), tb_len(&t));
  fclose(f);
  tb_free(&t);
}

static char *path_in(const char *name) {
  char *p = NULL;
  ASSERT_TRUE(asprintf(&p, "%s/%s", etch_test_tmpdir(), name) > 0);
  return p;
}

/* Opens the trace through the cache in `dir`; returns what `sql` gives
 * and whether the trace was read. */
static char *cached_query(const char *trace, const char *dir, const char *sql,
                          bool *imported) {
  etch__db *db;
  etch__import_opts o = {0};
  ASSERT_OK(etch__query_open_cached(trace, dir, &o, &db, imported));
  char *got = qt_query(db, sql);
  etch__db_close(db);
  return got;
}

/* The one cache file in `dir` (there must be exactly one). */
static char *the_cache_file(const char *dir) {
  DIR *d = opendir(dir);
  ASSERT_TRUE(d != NULL);
  char *found = NULL;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len > 7 && !strcmp(e->d_name + len - 7, ".duckdb")) {
      n++;
      free(found);
      ASSERT_TRUE(asprintf(&found, "%s/%s", dir, e->d_name) > 0);
    }
  }
  closedir(d);
  ASSERT_EQ_INT(n, 1);
  return found;
}

static const char kCount[] =
    "SELECT name, count(*) AS n FROM slice GROUP BY name";

TEST(cache_built_once_then_opened) {
  char *trace = path_in("a.pftrace"), *dir = path_in("cache1");
  write_trace(trace, 3, "work");
  bool imported;
  char *got = cached_query(trace, dir, kCount, &imported);
  ASSERT_EQ_STR(got, "name,n\nwork,3\n");
  ASSERT_TRUE(imported);
  free(got);
  got = cached_query(trace, dir, kCount, &imported);
  ASSERT_EQ_STR(got, "name,n\nwork,3\n");
  ASSERT_TRUE(!imported);
  free(got);
  free(trace);
  free(dir);
}

TEST(cache_of_a_changed_trace_is_never_stale) {
  char *trace = path_in("b.pftrace"), *dir = path_in("cache2");
  write_trace(trace, 3, "work");
  bool imported;
  free(cached_query(trace, dir, kCount, &imported));
  ASSERT_TRUE(imported);
  /* The same size, another content (and mtime). */
  write_trace(trace, 3, "rest");
  char *got = cached_query(trace, dir, kCount, &imported);
  ASSERT_EQ_STR(got, "name,n\nrest,3\n");
  ASSERT_TRUE(imported);
  free(got);
  /* Another size. */
  write_trace(trace, 5, "more");
  got = cached_query(trace, dir, kCount, &imported);
  ASSERT_EQ_STR(got, "name,n\nmore,5\n");
  ASSERT_TRUE(imported);
  free(got);
  /* The same content again, at another mtime: read again. */
  write_trace(trace, 3, "work");
  struct timespec ts[2] = {{.tv_sec = 1000000}, {.tv_sec = 1000000}};
  ASSERT_EQ_INT(utimensat(AT_FDCWD, trace, ts, 0), 0);
  got = cached_query(trace, dir, kCount, &imported);
  ASSERT_EQ_STR(got, "name,n\nwork,3\n");
  ASSERT_TRUE(imported);
  free(got);
  free(trace);
  free(dir);
}

TEST(cache_of_another_version_is_rebuilt) {
  char *trace = path_in("c.pftrace"), *dir = path_in("cache3");
  write_trace(trace, 2, "work");
  bool imported;
  free(cached_query(trace, dir, kCount, &imported));
  ASSERT_TRUE(imported);
  /* The key another version of etch would have written. */
  char *file = the_cache_file(dir);
  etch__db *db;
  ASSERT_OK(etch__db_open_existing(&db, file, false));
  ASSERT_OK(etch__db_exec(db, "UPDATE etch_cache SET key = key || 'x'; "
                              "DELETE FROM slice_rows;"));
  etch__db_close(db);
  char *got = cached_query(trace, dir, kCount, &imported);
  ASSERT_EQ_STR(got, "name,n\nwork,2\n");
  ASSERT_TRUE(imported);
  free(got);
  got = cached_query(trace, dir, kCount, &imported);
  ASSERT_TRUE(!imported);
  free(got);
  free(file);
  free(trace);
  free(dir);
}

/* Runs the cached query with stderr going to a file; returns stderr. */
static char *stderr_of_cached_query(const char *trace, const char *dir,
                                    char **out, bool *imported) {
  char *errpath = path_in("stderr.txt");
  fflush(stderr);
  int saved = dup(2);
  int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_TRUE(saved >= 0 && fd >= 0);
  dup2(fd, 2);
  close(fd);
  *out = cached_query(trace, dir, kCount, imported);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  FILE *f = fopen(errpath, "r");
  char *text = calloc(1, 4096);
  ASSERT_TRUE(f && text);
  size_t n = fread(text, 1, 4095, f);
  text[n] = '\0';
  fclose(f);
  free(errpath);
  return text;
}

TEST(cache_corrupt_is_rebuilt_with_a_warning) {
  char *trace = path_in("d.pftrace"), *dir = path_in("cache4");
  write_trace(trace, 4, "work");
  bool imported;
  free(cached_query(trace, dir, kCount, &imported));
  char *file = the_cache_file(dir);
  /* Overwrite the middle of the file: not a database any more. */
  FILE *f = fopen(file, "r+b");
  ASSERT_TRUE(f != NULL);
  char junk[8192];
  memset(junk, 0x5a, sizeof junk);
  ASSERT_EQ_INT(fwrite(junk, 1, sizeof junk, f), sizeof junk);
  fclose(f);
  char *got;
  char *err = stderr_of_cached_query(trace, dir, &got, &imported);
  ASSERT_EQ_STR(got, "name,n\nwork,4\n");
  ASSERT_TRUE(imported);
  char want[512];
  snprintf(want, sizeof want, "etch: warning: the cache of %s is unusable (",
           trace);
  ASSERT_TRUE(strncmp(err, want, strlen(want)) == 0);
  ASSERT_TRUE(strstr(err, "); it is rebuilt\n") != NULL);
  free(err);
  free(got);
  /* Rebuilt: the next open reads it. */
  got = cached_query(trace, dir, kCount, &imported);
  ASSERT_TRUE(!imported);
  free(got);
  /* A file cut to nothing is unusable too. */
  ASSERT_EQ_INT(truncate(file, 0), 0);
  err = stderr_of_cached_query(trace, dir, &got, &imported);
  ASSERT_EQ_STR(got, "name,n\nwork,4\n");
  ASSERT_TRUE(imported);
  ASSERT_TRUE(strstr(err, "is unusable") != NULL);
  free(err);
  free(got);
  free(file);
  free(trace);
  free(dir);
}

TEST(several_traces_have_a_trace_column) {
  char *a = path_in("run1.pftrace"), *b = path_in("run2.pftrace");
  char *dir = path_in("cache5");
  write_trace(a, 2, "work");
  write_trace(b, 3, "work");
  const char *paths[] = {a, b};
  for (int no_cache = 0; no_cache < 2; no_cache++) {
    etch__db *db;
    const char *failed = NULL;
    etch__import_opts o = {0};
    ASSERT_OK(etch__query_open_traces(paths, 2, dir, no_cache, &o, &db,
                                      &failed));
    char *got = qt_query(db,
                         "SELECT replace(trace, '.pftrace', '') "
                         "LIKE '%run1' AS first, count(*) AS n, "
                         "sum(dur) AS d FROM slice GROUP BY trace "
                         "ORDER BY n");
    ASSERT_EQ_STR(got, "first,n,d\n1,2,100\n0,3,150\n");
    free(got);
    /* The views over track carry it too. */
    got = qt_query(db,
                   "SELECT count(DISTINCT trace) AS traces, count(*) AS n "
                   "FROM thread_track");
    ASSERT_EQ_STR(got, "traces,n\n2,2\n");
    free(got);
    etch__db_close(db);
  }
  /* A trace that is not one: named. */
  char *bad = path_in("bad.pftrace");
  FILE *f = fopen(bad, "wb");
  fputs("not a trace at all", f);
  fclose(f);
  const char *paths2[] = {a, bad};
  etch__db *db = NULL;
  const char *failed = NULL;
  etch__import_opts o = {0};
  ASSERT_TRUE(etch__query_open_traces(paths2, 2, dir, false, &o, &db,
                                      &failed) != ETCH_OK);
  ASSERT_TRUE(db == NULL);
  ASSERT_EQ_STR(failed, bad);
  free(bad);
  free(a);
  free(b);
  free(dir);
}

TEST(cache_directory_that_cannot_be_made_reads_into_memory) {
  char *trace = path_in("e.pftrace"), *dir = path_in("e.pftrace/cache");
  write_trace(trace, 2, "work");
  bool imported;
  char *got;
  char *err = stderr_of_cached_query(trace, dir, &got, &imported);
  ASSERT_EQ_STR(got, "name,n\nwork,2\n");
  ASSERT_TRUE(imported);
  char want[512];
  snprintf(want, sizeof want,
           "etch: warning: no cache (cache directory %s: Not a directory): "
           "the trace is read into memory\n",
           dir);
  ASSERT_EQ_STR(err, want);
  free(err);
  free(got);
  free(trace);
  free(dir);
}

/* The cache's directory: ETCH_CACHE_DIR, else $XDG_CACHE_HOME/etch when
 * that is absolute (a relative one is ignored, as the XDG spec says, and
 * as the trace store does), else ~/.cache/etch. */
TEST(cache_dir_from_the_environment) {
  char buf[512];
  setenv("ETCH_CACHE_DIR", "/x/cache", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  ASSERT_OK(etch__cache_dir(buf, sizeof buf));
  ASSERT_EQ_STR(buf, "/x/cache");
  unsetenv("ETCH_CACHE_DIR");
  ASSERT_OK(etch__cache_dir(buf, sizeof buf));
  ASSERT_EQ_STR(buf, "/xdg/etch");
  setenv("XDG_CACHE_HOME", "rel", 1);
  ASSERT_OK(etch__cache_dir(buf, sizeof buf));
  ASSERT_EQ_STR(buf, "/home/u/.cache/etch");
  unsetenv("XDG_CACHE_HOME");
  ASSERT_OK(etch__cache_dir(buf, sizeof buf));
  ASSERT_EQ_STR(buf, "/home/u/.cache/etch");
  unsetenv("HOME");
  ASSERT_EQ_INT(etch__cache_dir(buf, sizeof buf), ETCH_EINVAL);
  ASSERT_EQ_STR(etch_last_error(), "no cache directory: set ETCH_CACHE_DIR "
                                   "or HOME (or use --no-cache)");
  setenv("ETCH_CACHE_DIR", "/x/cache", 1);
  char small[4];
  ASSERT_EQ_INT(etch__cache_dir(small, sizeof small), ETCH_EINVAL);
  unsetenv("ETCH_CACHE_DIR");
}

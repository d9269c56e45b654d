/*
 * cache_fault_test.c - the query part's cache of a trace's tables (a
 * DuckDB file beside the trace: src/query/cache.c, db.c) opened with each
 * of etch's own allocations failing in turn. A cache that is there and
 * good is opened as it is, or the open fails with ETCH_ENOMEM: memory
 * that ran out never makes the cache "unusable" (it is not rebuilt, the
 * file is the same file), and never reads as a format error.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "fault.h"
#include "query/query.h"
#include "reader/tbuild.h"
#include "test.h"

typedef struct cache_case {
  char trace[4200], dir[4200], file[4300];
  ino_t ino; /* the cache file's, as built */
  int64_t slices;
} cache_case;

static int64_t count_slices(etch__db *db) {
  etch__res r;
  int64_t n = -1;
  if (etch__res_query(db, "SELECT count(*) FROM slice", "count", &r) == 0) {
    if (etch__res_next(&r)) n = etch__res_i64(&r, 0);
    if (etch__res_close(&r)) n = -1;
  }
  return n;
}

static ino_t ino_of(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? st.st_ino : 0;
}

/* A sample trace written to a file, and its cache built. */
static void make_case(cache_case *c, const char *name) {
  snprintf(c->trace, sizeof c->trace, "%s/%s.pftrace", etch_test_tmpdir(),
           name);
  snprintf(c->dir, sizeof c->dir, "%s/%s_cache", etch_test_tmpdir(), name);
  tb t;
  tb_init(&t);
  tb_sample(&t, 0);
  FILE *f = fopen(c->trace, "wb");
  ASSERT_TRUE(f != NULL);
  ASSERT_TRUE(fwrite(tb_data(&t), 1, tb_len(&t), f) == tb_len(&t));
  ASSERT_TRUE(fclose(f) == 0);
  tb_free(&t);
  etch__import_opts o = {.quiet = true};
  bool imported = false;
  ASSERT_OK(etch__query_cache_file(c->trace, c->dir, &o, c->file,
                                   sizeof c->file, &imported));
  ASSERT_TRUE(imported);
  ASSERT_TRUE(c->file[0] != '\0');
  c->ino = ino_of(c->file);
  ASSERT_TRUE(c->ino != 0);
  etch__db *db = NULL;
  ASSERT_OK(etch__db_open_existing(&db, c->file, true));
  c->slices = count_slices(db);
  etch__db_close(db);
  ASSERT_TRUE(c->slices > 0);
}

/* The cache's file opened: its tables, or ETCH_ENOMEM. */
static int open_existing_op(void *ctx) {
  cache_case *c = ctx;
  etch__db *db = NULL;
  int rc = etch__db_open_existing(&db, c->file, true);
  if (rc) {
    ASSERT_TRUE(db == NULL);
    return rc;
  }
  if (count_slices(db) != c->slices)
    FAIL("%s: %lld slices, not %lld", fault_now, (long long)count_slices(db),
         (long long)c->slices);
  etch__db_close(db);
  return ETCH_OK;
}

/* The trace opened through its cache: the cache as it was (not read
 * again, not rebuilt), or ETCH_ENOMEM with the cache still there. */
static int open_cached_op(void *ctx) {
  cache_case *c = ctx;
  etch__import_opts o = {.quiet = true};
  etch__db *db = NULL;
  bool imported = true;
  int rc = etch__query_open_cached(c->trace, c->dir, &o, &db, &imported);
  if (ino_of(c->file) != c->ino)
    FAIL("%s: the cache was rebuilt (%s)", fault_now,
         rc ? etch_last_error() : "no error");
  if (rc) return rc;
  if (imported) FAIL("%s: the trace was read again", fault_now);
  if (count_slices(db) != c->slices) FAIL("%s: other slices", fault_now);
  etch__db_close(db);
  return ETCH_OK;
}

TEST(fault_cache_open_existing) {
  cache_case c;
  make_case(&c, "fault_cache_open");
  fault_result r = fault_sweep("opening a cache", open_existing_op, &c);
  ASSERT_TRUE(r.allocs > 0);
  ASSERT_EQ_U64(r.failed, r.runs);
}

TEST(fault_cache_open_cached_keeps_the_cache) {
  cache_case c;
  make_case(&c, "fault_cache_cached");
  fault_result r = fault_sweep("a trace through its cache", open_cached_op, &c);
  printf("  %llu allocations, %llu runs failed of %llu\n",
         (unsigned long long)r.allocs, (unsigned long long)r.failed,
         (unsigned long long)r.runs);
  ASSERT_TRUE(r.allocs > 0);
}

/*
 * query_test_util.h - helpers for the query tests: a fresh database, query
 * results as CSV text, and exact comparisons of them.
 */
#ifndef ETCH_QUERY_TEST_UTIL_H
#define ETCH_QUERY_TEST_UTIL_H

#include "query/query.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* An in-memory database with the schema and no rows. */
etch__db *qt_new_db(void);
/* The result of `sql` as CSV (header + rows). Caller frees. */
char *qt_query(etch__db *db, const char *sql);
/* Runs `fn(db, out)` into a string. Caller frees. */
char *qt_capture(int (*fn)(etch__db *, FILE *), etch__db *db);

#define QT_ASSERT(db, sql, expected)                                       \
  do {                                                                     \
    char *got_ = qt_query((db), (sql));                                    \
    if (strcmp(got_, (expected)) != 0)                                     \
      FAIL("query %s\n--- expected ---\n%s--- got ---\n%s", (sql),         \
           (expected), got_);                                              \
    free(got_);                                                            \
  } while (0)

#define ASSERT_TEXT(got, expected)                                          \
  do {                                                                      \
    const char *g_ = (got), *e_ = (expected);                               \
    if (strcmp(g_, e_) != 0)                                                \
      FAIL("--- expected ---\n%s--- got ---\n%s", e_, g_);                  \
  } while (0)

#endif

/*
 * A small imported trace used by the stats and JSON tests (import_test.c
 * checks the importer itself):
 *   process app (pid 10): threads main (10) and worker (11), a named track
 *   "io queue", a counter track "heap" (bytes);
 *   main:   frame [1000, 11000) > draw [2000, 6000) > vsync instant 3000,
 *           draw [7000, 9000); frame [12000, 20000) > draw [13000, 14000)
 *   worker: an end without a begin at 1200, job [1500, 5500) with a string
 *           arg full of specials, wait [18000, open), etch.dropped_events
 *           instant at 19000 (count 5)
 *   io queue: req [2500, 8500); heap: 100 @1000, 300 @5000, 200 @15000
 *   flow: the first frame -> job. Bounds 1000..20000.
 */
etch__db *qt_fixture_db(bool all_args);

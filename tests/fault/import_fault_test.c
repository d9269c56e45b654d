/*
 * import_fault_test.c - the query part's import (src/query: the reader's
 * events into DuckDB's tables through its appender) with each of etch's
 * own allocations failing in turn, for sample traces of the reader tests:
 * the tables hold the same rows as without a fault, or the import
 * fails with ETCH_ENOMEM. (DuckDB's own allocations are its library's, not
 * etch's: they are not failed here.)
 */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "fault.h"
#include "query/query.h"
#include "reader/tbuild.h"
#include "test.h"

typedef struct imp_case {
  const tb *t;
  char *want;
  fault_str got;
} imp_case;

/* A summary of every table the import fills. */
static const char kSummary[] =
    "select 'slice', count(*), sum(ts), sum(dur), sum(depth), "
    "string_agg(name, ',' order by id) from slice "
    "union all select 'args', count(*), 0, 0, 0, "
    "string_agg(key || '=' || coalesce(display_value, ''), ',' order by arg_set_id, key) "
    "from args "
    "union all select 'track', count(*), 0, 0, 0, string_agg(coalesce(name, '-'), ',' order by id) "
    "from track "
    "union all select 'thread', count(*), sum(tid), 0, 0, "
    "string_agg(coalesce(name, '-'), ',' order by utid) from thread "
    "union all select 'counter', count(*), sum(ts), 0, 0, '' from counter";

static int import_op(void *ctx) {
  imp_case *c = (imp_case *)ctx;
  etch__db *db = NULL;
  int rc = etch__db_open(&db, NULL);
  etch__import_opts o = {.all_args = true, .timestamp_order = true};
  if (!rc)
    rc = etch__query_import_memory(db, tb_data(c->t), tb_len(c->t), "sample",
                                   &o, NULL);
  if (!rc) {
    etch__res res;
    rc = etch__res_query(db, kSummary, "summary", &res);
    while (!rc && etch__res_next(&res)) {
      size_t tn, n;
      const char *table = etch__res_str(&res, 0, &tn);
      const char *s = etch__res_str(&res, 5, &n);
      fault_printf(&c->got, "%.*s %lld %lld %lld %lld %.*s\n", (int)tn,
                   table ? table : "", (long long)etch__res_i64(&res, 1),
                   (long long)etch__res_i64(&res, 2),
                   (long long)etch__res_i64(&res, 3),
                   (long long)etch__res_i64(&res, 4), s ? (int)n : 1,
                   s ? s : "-");
    }
    if (!rc) rc = etch__res_close(&res);
  }
  if (db) etch__db_close(db);
  return rc;
}

static int sweep_op(void *ctx) {
  imp_case *c = (imp_case *)ctx;
  fault_str_free(&c->got);
  int rc = import_op(c);
  if (rc == ETCH_OK && strcmp(c->got.s, c->want) != 0)
    FAIL("%s: the tables differ:\n--- want\n%s--- got\n%s", fault_now,
         c->want, c->got.s);
  fault_str_free(&c->got);
  return rc;
}

/* Sample i of the reader tests' traces, swept. */
static void sweep_sample(int i) {
  ASSERT_TRUE(i < tb_sample_count());
  tb t;
  tb_init(&t);
  tb_sample(&t, i);
  imp_case c;
  memset(&c, 0, sizeof c);
  c.t = &t;
  if (import_op(&c))
    FAIL("importing %s: %s", tb_sample_name(i), etch_last_error());
  c.want = strdup(c.got.s);
  fault_str_free(&c.got);
  char what[128];
  snprintf(what, sizeof what, "importing sample %s", tb_sample_name(i));
  fault_result r = fault_sweep(what, sweep_op, &c);
  printf("  %s: %llu allocations, %llu runs failed of %llu\n", what,
         (unsigned long long)r.allocs, (unsigned long long)r.failed,
         (unsigned long long)r.runs);
  free(c.want);
  tb_free(&t);
}

/* One test a sample, each opening DuckDB some 120 times: the plain one,
 * zstd-compressed packets, a trace with losses and the miscellany (the
 * others go through the same import paths; the reader's sweep has them
 * all). */
TEST(fault_import_sample_etch) { sweep_sample(0); }
TEST(fault_import_sample_zstd) { sweep_sample(3); }
TEST(fault_import_sample_loss) { sweep_sample(5); }
TEST(fault_import_sample_misc) { sweep_sample(6); }
TEST(fault_import_samples_are_these) {
  ASSERT_EQ_STR(tb_sample_name(0), "etch");
  ASSERT_EQ_STR(tb_sample_name(3), "zstd");
  ASSERT_EQ_STR(tb_sample_name(5), "loss");
  ASSERT_EQ_STR(tb_sample_name(6), "misc");
}

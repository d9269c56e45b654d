/*
 * run_test.c - the query runner (query/run.h): each kind of value bound,
 * hostile text bound as it is (quotes, a semicolon, a NUL inside), rows
 * through the cursor and the callback, errors with DuckDB's message.
 */
#include <string.h>

#include "base/base.h"
#include "query/run.h"
#include "test.h"

static etch__db *scratch(void) {
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  ASSERT_OK(etch__db_exec(db,
                          "CREATE TABLE t (id BIGINT, name VARCHAR, v DOUBLE);"
                          "INSERT INTO t VALUES (1, 'plain', 0.5),"
                          " (2, 'it''s', 1.5), (3, 'a;b'')--', 2.5),"
                          " (4, NULL, NULL)"));
  return db;
}

TEST(run_binds_each_kind) {
  etch__db *db = scratch();
  etch__sql_arg a[] = {ETCH__SQL_I64(2), ETCH__SQL_F64(2.0),
                       ETCH__SQL_STR("x"), {.kind = ETCH__SQL_BOOL, .i = 1},
                       {.kind = ETCH__SQL_NULL}};
  int64_t v[5];
  ASSERT_OK(etch__query_ints(db,
                             "SELECT $1 * 10, CAST($2 * 4 AS BIGINT),"
                             " length($3), CAST($4 AS INTEGER),"
                             " coalesce($5, 7)",
                             a, 5, v, 5));
  ASSERT_EQ_INT(v[0], 20);
  ASSERT_EQ_INT(v[1], 8);
  ASSERT_EQ_INT(v[2], 1);
  ASSERT_EQ_INT(v[3], 1);
  ASSERT_EQ_INT(v[4], 7);
  /* The older form: text when s, else the integer. */
  etch__sql_arg old[] = {{.i = 3}, {.s = "it's"}};
  ASSERT_OK(etch__query_ints(db,
                             "SELECT (SELECT count(*) FROM t WHERE id < $1),"
                             " (SELECT id FROM t WHERE name = $2)",
                             old, 2, v, 2));
  ASSERT_EQ_INT(v[0], 2);
  ASSERT_EQ_INT(v[1], 2);
  etch__db_close(db);
}

TEST(run_hostile_text_is_a_value_never_sql) {
  etch__db *db = scratch();
  static const char *const kNames[] = {"it's", "a;b')--", "' OR '1'='1"};
  static const int64_t kWant[] = {2, 3, 0};
  for (size_t i = 0; i < 3; i++) {
    etch__sql_arg a[] = {ETCH__SQL_STR(kNames[i])};
    int64_t v[2];
    ASSERT_OK(etch__query_ints(db,
                               "SELECT count(*), coalesce(max(id), 0) FROM t"
                               " WHERE name = $1",
                               a, 1, v, 2));
    ASSERT_EQ_INT(v[1], kWant[i]);
    ASSERT_EQ_INT(v[0], kWant[i] ? 1 : 0);
  }
  /* Bytes with a NUL inside: the whole length is the value. */
  etch__sql_arg b[] = {ETCH__SQL_BYTES("ab\0cd", 5)};
  int64_t n;
  ASSERT_OK(etch__query_ints(db, "SELECT length($1)", b, 1, &n, 1));
  ASSERT_EQ_INT(n, 5);
  /* A text NULL pointer is SQL NULL. */
  etch__sql_arg c[] = {ETCH__SQL_STR(NULL)};
  ASSERT_OK(etch__query_ints(db, "SELECT CAST($1 IS NULL AS INTEGER)", c, 1,
                             &n, 1));
  ASSERT_EQ_INT(n, 1);
  etch__db_close(db);
}

typedef struct rows_seen {
  char text[256];
  size_t len;
  int stop_at;
} rows_seen;

static int on_row(void *ctx, const etch__res *r) {
  rows_seen *s = ctx;
  size_t n = 0;
  const char *name = etch__res_str(r, 1, &n);
  s->len += (size_t)snprintf(s->text + s->len, sizeof s->text - s->len,
                             "%lld %.*s %g\n", (long long)etch__res_i64(r, 0),
                             name ? (int)n : 1, name ? name : "-",
                             etch__res_f64(r, 2));
  if (s->stop_at && etch__res_i64(r, 0) == s->stop_at)
    return etch__error(ETCH_ESTATE, "enough");
  return ETCH_OK;
}

TEST(run_rows_through_the_cursor_and_the_callback) {
  etch__db *db = scratch();
  etch__sql_arg a[] = {ETCH__SQL_I64(1)};
  rows_seen s = {0};
  ASSERT_OK(etch__query_each(db, "SELECT id, name, v FROM t WHERE id > $1"
                                 " ORDER BY id",
                             a, 1, on_row, &s));
  ASSERT_EQ_STR(s.text, "2 it's 1.5\n3 a;b')-- 2.5\n4 - nan\n");
  rows_seen t = {.stop_at = 3};
  ASSERT_EQ_INT(etch__query_each(db, "SELECT id, name, v FROM t ORDER BY id",
                                 NULL, 0, on_row, &t),
                ETCH_ESTATE);
  ASSERT_EQ_STR(t.text, "1 plain 0.5\n2 it's 1.5\n3 a;b')-- 2.5\n");
  etch__res r;
  ASSERT_OK(etch__query_run(db, "SELECT id FROM t WHERE id >= $1 ORDER BY 1",
                            (etch__sql_arg[]){ETCH__SQL_I64(3)}, 1, &r));
  ASSERT_TRUE(etch__res_next(&r));
  ASSERT_EQ_INT(etch__res_i64(&r, 0), 3);
  ASSERT_TRUE(etch__res_next(&r));
  ASSERT_EQ_INT(etch__res_i64(&r, 0), 4);
  ASSERT_FALSE(etch__res_next(&r));
  ASSERT_OK(etch__res_close(&r));
  etch__db_close(db);
}

TEST(run_errors_carry_the_sql_message) {
  etch__db *db = scratch();
  etch__res r;
  ASSERT_EQ_INT(etch__query_run(db, "SELECT nope FROM t", NULL, 0, &r),
                ETCH_ESQL);
  ASSERT_TRUE(strstr(etch_last_error(), "nope") != NULL);
  /* A value for a parameter the SQL does not have. */
  ASSERT_EQ_INT(etch__query_run(db, "SELECT 1", (etch__sql_arg[]){{.i = 1}},
                                1, &r),
                ETCH_ESQL);
  ASSERT_TRUE(strstr(etch_last_error(), "$1") != NULL);
  /* A parameter with no value. */
  ASSERT_EQ_INT(etch__query_run(db, "SELECT $1 + 1", NULL, 0, &r), ETCH_ESQL);
  /* More columns asked for than the query has. */
  int64_t v[3];
  ASSERT_EQ_INT(etch__query_ints(db, "SELECT 1, 2", NULL, 0, v, 3), ETCH_ESQL);
  /* No row: zeros. */
  v[0] = 9;
  ASSERT_OK(etch__query_ints(db, "SELECT id FROM t WHERE id < 0", NULL, 0, v,
                             1));
  ASSERT_EQ_INT(v[0], 0);
  etch__db_close(db);
}

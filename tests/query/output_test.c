/*
 * output_test.c - exact text of query results (aligned and CSV), the
 * `etch stats` report and the Chrome JSON export, on a fixture trace.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "query/query.h"
#include "query_test_util.h"
#include "test.h"

static char *run(etch__db *db, const char *sql, etch__out_mode mode) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  int rc = etch__query_run_sql(db, sql, f, mode);
  fclose(f);
  if (rc) FAIL("%s: %s", sql, etch_last_error());
  return buf;
}

TEST(table_aligns_numbers_right_text_left_null_shown) {
  etch__db *db = qt_new_db();
  char *got = run(db,
                  "SELECT 'a' AS name, 1 AS n, 2.5 AS x, NULL AS z "
                  "UNION ALL SELECT 'longer name', 12345, NULL, 'text' "
                  "UNION ALL SELECT NULL, -7, 0.125, NULL",
                  ETCH__OUT_TABLE);
  ASSERT_TEXT(got,
              "name             n      x  z\n"
              "-----------  -----  -----  ----\n"
              "a                1  2.500  NULL\n"
              "longer name  12345   NULL  text\n"
              "NULL            -7  0.125  NULL\n");
  free(got);
  etch__db_close(db);
}

/* Non-ASCII text: widths are the columns a terminal gives it, not its
 * bytes (é 2 bytes, 1 column; 日本 6 bytes, 4 columns; 😀 4 bytes, 2
 * columns; e + a combining acute 3 bytes, 1 column). DuckDB's text is
 * UTF-8 only: no stray byte reaches the table. */
TEST(table_aligns_utf8_text_by_columns) {
  etch__db *db = qt_new_db();
  char *got = run(db,
                  "SELECT 'w\xc3\xa9" "de' AS s, 1 AS n "
                  "UNION ALL SELECT '\xe6\x97\xa5\xe6\x9c\xac', 22 "
                  "UNION ALL SELECT 'Hi\xf0\x9f\x98\x80', 333 "
                  "UNION ALL SELECT 'e\xcc\x81', 4 "
                  "UNION ALL SELECT 'plain', 6",
                  ETCH__OUT_TABLE);
  ASSERT_TEXT(got,
              "s        n\n"
              "-----  ---\n"
              "w\xc3\xa9" "de     1\n"
              "\xe6\x97\xa5\xe6\x9c\xac    22\n"
              "Hi\xf0\x9f\x98\x80   333\n"
              "e\xcc\x81        4\n"
              "plain    6\n");
  free(got);
  /* The header too. */
  got = run(db, "SELECT 1 AS '\xc3\xa9t\xc3\xa9', 'x' AS y",
            ETCH__OUT_TABLE);
  ASSERT_TEXT(got, "\xc3\xa9t\xc3\xa9  y\n---  -\n  1  x\n");
  free(got);
  etch__db_close(db);
}

/* Control characters in strings (a newline in an arg) would break the
 * table's rows: the table shows them escaped, CSV keeps the bytes. */
TEST(table_escapes_control_characters_csv_keeps_them) {
  etch__db *db = qt_new_db();
  const char *sql = "SELECT 'a' || chr(10) || 'b' AS s, 'x' || chr(9) || "
                    "'y' || chr(13) || chr(1) AS t, 2 AS n";
  char *got = run(db, sql, ETCH__OUT_TABLE);
  ASSERT_TEXT(got,
              "s     t           n\n"
              "----  ----------  -\n"
              "a\\nb  x\\ty\\r\\x01  2\n");
  free(got);
  got = run(db, sql, ETCH__OUT_CSV);
  ASSERT_TEXT(got, "s,t,n\n\"a\nb\",\"x\ty\r\x01\",2\n");
  free(got);
  etch__db_close(db);
}

TEST(table_empty_result_and_several_statements) {
  etch__db *db = qt_new_db();
  char *got = run(db,
                  "CREATE TABLE t(a INTEGER); SELECT a FROM t; "
                  "INSERT INTO t VALUES (1); SELECT a, a * 2 AS b FROM t;"
                  " -- trailing comment\n",
                  ETCH__OUT_TABLE);
  ASSERT_TEXT(got,
              "a\n"
              "-\n"
              "\n"
              "a  b\n"
              "-  -\n"
              "1  2\n");
  free(got);
  etch__db_close(db);
}

TEST(table_streams_rows_beyond_the_first_thousand) {
  etch__db *db = qt_new_db();
  char *got = run(db,
                  "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
                  "FROM n WHERE i < 1002) SELECT i FROM n",
                  ETCH__OUT_TABLE);
  /* Widths come from the first 1000 rows (4 digits), then rows stream. */
  const char *tail = strstr(got, "1000\n1001\n1002\n");
  ASSERT_TRUE(tail != NULL);
  ASSERT_TRUE(strncmp(got, "   i\n----\n   1\n", 15) == 0);
  free(got);
  etch__db_close(db);
}

TEST(csv_quotes_as_rfc4180) {
  etch__db *db = qt_new_db();
  char *got = run(db,
                  "SELECT 'plain' AS \"a,b\", 'with,comma' AS q, "
                  "'say \"hi\"' AS r, 'two' || chr(10) || 'lines' AS s, "
                  "'cr' || chr(13) AS t, NULL AS u, 1.5 AS v, "
                  "'\\x00\\xFF'::BLOB AS w",
                  ETCH__OUT_CSV);
  ASSERT_TEXT(got,
              "\"a,b\",q,r,s,t,u,v,w\n"
              "plain,\"with,comma\",\"say \"\"hi\"\"\",\"two\nlines\","
              "\"cr\r\",,1.5,\\x00\\xFF\n");
  free(got);
  etch__db_close(db);
}

TEST(sql_error_names_the_problem) {
  etch__db *db = qt_new_db();
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  int rc = etch__query_run_sql(db, "selec 1", f, ETCH__OUT_TABLE);
  fclose(f);
  ASSERT_EQ_INT(rc, ETCH_ESQL);
  ASSERT_TRUE(strncmp(etch_last_error(),
                      "SQL error: Parser Error: syntax error at or near "
                      "\"selec\"", 53) == 0);
  rc = etch__query_run_sql(db, "select nope from slice", stdout,
                           ETCH__OUT_TABLE);
  ASSERT_EQ_INT(rc, ETCH_ESQL);
  ASSERT_TRUE(strncmp(etch_last_error(),
                      "SQL error: Binder Error: Referenced column \"nope\" "
                      "not found", 56) == 0);
  free(buf);
  etch__db_close(db);
}

TEST(fmt_dur_units) {
  char b[32];
  const struct {
    int64_t ns;
    const char *want;
  } cases[] = {{0, "0 ns"},           {999, "999 ns"},
               {1000, "1.00 us"},     {1234, "1.23 us"},
               {999994, "999.99 us"}, {999999, "1.00 ms"},
               {45600000, "45.60 ms"}, {2500000000, "2.50 s"},
               {-1500, "-1.50 us"},   {7200000000000, "7200.00 s"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    etch__fmt_dur(b, sizeof b, cases[i].ns);
    ASSERT_EQ_STR(b, cases[i].want);
  }
}

static int stats_full(etch__db *db, FILE *out) {
  etch__stats_opts o = {.top = 10};
  return etch__query_stats(db, out, &o);
}

static int stats_compact(etch__db *db, FILE *out) {
  etch__stats_opts o = {.top = 2, .compact = true};
  return etch__query_stats(db, out, &o);
}

static int stats_json(etch__db *db, FILE *out) {
  etch__stats_opts o = {.top = 10, .json = true};
  return etch__query_stats(db, out, &o);
}

TEST(stats_report_exact) {
  etch__db *db = qt_fixture_db(false);
  char *got = qt_capture(stats_full, db);
  ASSERT_TEXT(got,
              "trace\n"
              "  duration   19.00 us (1000 .. 20000 ns)\n"
              "  events     21\n"
              "  slices     10 (2 instants, 1 open at the end)\n"
              "  counters   3 values on 1 track\n"
              "  flows      1\n"
              "  tracks     5\n"
              "  processes  1\n"
              "  threads    2\n"
              "\n"
              "top slices by total time\n"
              "  name   count     total      self      avg       max\n"
              "  -----  -----  --------  --------  -------  --------\n"
              "  frame      2  18.00 us  11.00 us  9.00 us  10.00 us\n"
              "  draw       3   7.00 us   7.00 us  2.33 us   4.00 us\n"
              "  req        1   6.00 us   6.00 us  6.00 us   6.00 us\n"
              "  job        1   4.00 us   4.00 us  4.00 us   4.00 us\n"
              "  wait       1   2.00 us   2.00 us  2.00 us   2.00 us\n"
              "\n"
              "top slices by self time\n"
              "  name   count     total      self      avg       max\n"
              "  -----  -----  --------  --------  -------  --------\n"
              "  frame      2  18.00 us  11.00 us  9.00 us  10.00 us\n"
              "  draw       3   7.00 us   7.00 us  2.33 us   4.00 us\n"
              "  req        1   6.00 us   6.00 us  6.00 us   6.00 us\n"
              "  job        1   4.00 us   4.00 us  4.00 us   4.00 us\n"
              "  wait       1   2.00 us   2.00 us  2.00 us   2.00 us\n"
              "\n"
              "threads (busy = time in depth-0 slices)\n"
              "  thread  tid  process  pid      busy  of trace\n"
              "  ------  ---  -------  ---  --------  --------\n"
              "  main     10  app       10  18.00 us     94.7%\n"
              "  worker   11  app       10   6.00 us     31.6%\n"
              "\n"
              "counters\n"
              "  track  unit   count  min  max  mean  last\n"
              "  -----  -----  -----  ---  ---  ----  ----\n"
              "  heap   bytes      3  100  300   200   200\n"
              "\n"
              "data loss\n"
              "  stat                     value  meaning\n"
              "  -----------------------  -----  ----------------------------------------------------------\n"
              "  previous_packet_dropped      2  packets saying earlier packets of their sequence were lost\n"
              "  misplaced_end_event          1  slice ends without a matching begin\n"
              "\n"
              "  thread  tid  pid  dropped events\n"
              "  ------  ---  ---  --------------\n"
              "  worker   11   10               5\n");
  free(got);
  etch__db_close(db);
}

TEST(stats_compact_exact) {
  etch__db *db = qt_fixture_db(false);
  char *got = qt_capture(stats_compact, db);
  ASSERT_TEXT(got,
              "trace\n"
              "  duration   19.00 us (1000 .. 20000 ns)\n"
              "  events     21\n"
              "  slices     10 (2 instants, 1 open at the end)\n"
              "  counters   3 values on 1 track\n"
              "  flows      1\n"
              "  tracks     5\n"
              "  processes  1\n"
              "  threads    2\n"
              "\n"
              "top slices by total time\n"
              "  name   count     total      self      avg       max\n"
              "  -----  -----  --------  --------  -------  --------\n"
              "  frame      2  18.00 us  11.00 us  9.00 us  10.00 us\n"
              "  draw       3   7.00 us   7.00 us  2.33 us   4.00 us\n"
              "\n"
              "data loss\n"
              "  stat                     value  meaning\n"
              "  -----------------------  -----  ----------------------------------------------------------\n"
              "  previous_packet_dropped      2  packets saying earlier packets of their sequence were lost\n"
              "  misplaced_end_event          1  slice ends without a matching begin\n"
              "\n"
              "  thread  tid  pid  dropped events\n"
              "  ------  ---  ---  --------------\n"
              "  worker   11   10               5\n");
  free(got);
  etch__db_close(db);
}

/* Writes `text` to a file and checks that python3's json module loads it. */
static void assert_valid_json(const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/out.json", etch_test_tmpdir());
  FILE *f = fopen(path, "w");
  ASSERT_TRUE(f != NULL);
  fputs(text, f);
  fclose(f);
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; json.load(open(sys.argv[1]))' %s",
           path);
  int st = system(cmd);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

TEST(stats_json_parses) {
  etch__db *db = qt_fixture_db(false);
  char *got = qt_capture(stats_json, db);
  assert_valid_json(got);
  ASSERT_TRUE(strstr(got, "\"misplaced_end_event\":1") != NULL);
  ASSERT_TRUE(strstr(got, "\"dropped\":5") != NULL);
  free(got);
  etch__db_close(db);
}

TEST(json_export_exact_and_parses) {
  etch__db *db = qt_fixture_db(true);
  char *got = qt_capture(etch__query_export_json, db);
  ASSERT_TEXT(got,
              "{\"traceEvents\":[\n"
              "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":10,\"tid\":0,\"args\":{\"name\":\"app\"}},\n"
              "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":10,\"tid\":10,\"args\":{\"name\":\"main\"}},\n"
              "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":10,\"tid\":11,\"args\":{\"name\":\"worker\"}},\n"
              "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":10,\"tid\":1073741828,\"args\":{\"name\":\"io queue\"}},\n"
              "{\"ph\":\"X\",\"name\":\"frame\",\"cat\":\"app\",\"pid\":10,\"tid\":10,\"ts\":1.000,\"dur\":10.000},\n"
              "{\"ph\":\"X\",\"name\":\"job\",\"cat\":\"app\",\"pid\":10,\"tid\":11,\"ts\":1.500,\"dur\":4.000,\"args\":{\"path\":\"a\\\"b\\\\c\\n\\u0001\xef\xbf\xbd/é\"}},\n"
              "{\"ph\":\"X\",\"name\":\"draw\",\"cat\":\"app\",\"pid\":10,\"tid\":10,\"ts\":2.000,\"dur\":4.000},\n"
              "{\"ph\":\"X\",\"name\":\"req\",\"cat\":\"app\",\"pid\":10,\"tid\":1073741828,\"ts\":2.500,\"dur\":6.000},\n"
              "{\"ph\":\"i\",\"s\":\"t\",\"name\":\"vsync\",\"cat\":\"app\",\"pid\":10,\"tid\":10,\"ts\":3.000,\"args\":{\"frame\":1,\"pos\":{\"x\":0.5,\"ok\":true},\"ids\":[-1,null,3],\"ptr\":\"0xbeef\"}},\n"
              "{\"ph\":\"X\",\"name\":\"draw\",\"cat\":\"app\",\"pid\":10,\"tid\":10,\"ts\":7.000,\"dur\":2.000},\n"
              "{\"ph\":\"X\",\"name\":\"frame\",\"cat\":\"app\",\"pid\":10,\"tid\":10,\"ts\":12.000,\"dur\":8.000},\n"
              "{\"ph\":\"X\",\"name\":\"draw\",\"cat\":\"app\",\"pid\":10,\"tid\":10,\"ts\":13.000,\"dur\":1.000},\n"
              "{\"ph\":\"B\",\"name\":\"wait\",\"cat\":\"app\",\"pid\":10,\"tid\":11,\"ts\":18.000},\n"
              "{\"ph\":\"i\",\"s\":\"t\",\"name\":\"etch.dropped_events\",\"cat\":\"app\",\"pid\":10,\"tid\":11,\"ts\":19.000,\"args\":{\"count\":5}},\n"
              "{\"ph\":\"C\",\"name\":\"heap\",\"pid\":10,\"ts\":1.000,\"args\":{\"value\":100}},\n"
              "{\"ph\":\"C\",\"name\":\"heap\",\"pid\":10,\"ts\":5.000,\"args\":{\"value\":300}},\n"
              "{\"ph\":\"C\",\"name\":\"heap\",\"pid\":10,\"ts\":15.000,\"args\":{\"value\":200}},\n"
              "{\"ph\":\"s\",\"name\":\"flow\",\"cat\":\"flow\",\"id\":1,\"pid\":10,\"tid\":10,\"ts\":1.000},\n"
              "{\"ph\":\"f\",\"name\":\"flow\",\"cat\":\"flow\",\"id\":1,\"pid\":10,\"tid\":11,\"ts\":1.500,\"bp\":\"e\"}\n"
              "],\"displayTimeUnit\":\"ns\"}\n");
  assert_valid_json(got);
  free(got);
  etch__db_close(db);
}

TEST(json_string_escapes) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  const char s[] = "q\"b\\n\n\t\x01\x1f\x7f \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"
                   " bad:\xff\xc3 \xed\xa0\x80 \xc0\xaf end";
  etch__json_string(f, s, sizeof s - 1);
  fclose(f);
  ASSERT_TEXT(buf,
              "\"q\\\"b\\\\n\\n\\t\\u0001\\u001f\x7f \xc3\xa9 \xe2\x82\xac "
              "\xf0\x9f\x98\x80 bad:\\ufffd\\ufffd \\ufffd\\ufffd\\ufffd "
              "\\ufffd\\ufffd end\"");
  free(buf);
}

TEST(shell_statements_over_lines_and_dot_commands) {
  etch__db *db = qt_new_db();
  const char input[] =
      ".tables\n"
      "select 1 as a,\n"
      "  2 as b;\n"
      ".mode csv\n"
      "select 'x,y' as c; selec;\n"
      ".schema trace_bounds\n"
      ".nope\n"
      ".quit\n"
      "select 'never';\n";
  FILE *in = fmemopen((void *)input, sizeof input - 1, "r");
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  ASSERT_OK(etch__query_shell(db, in, out, ETCH__OUT_TABLE));
  fclose(in);
  fclose(out);
  /* The name column is as wide as the longest name,
   * __intrinsic_track_event_callstacks (34). */
  static const char *const kRows[][2] = {{"slice", "view"},
                                         {"slice_data", "view"},
                                         {"slice_rows", "table"},
                                         {"thread_track", "view"},
                                         {"process_counter_track", "view"},
                                         {"stack_profile_frame", "table"}};
  for (size_t i = 0; i < sizeof kRows / sizeof kRows[0]; i++) {
    char row[100];
    snprintf(row, sizeof row, "\n%-34s  %s\n", kRows[i][0], kRows[i][1]);
    if (!strstr(buf, row)) FAIL("no row \"%s\" in:\n%s", row + 1, buf);
  }
  ASSERT_TRUE(strstr(buf, "etch>    ...> a  b\n-  -\n1  2\n") != NULL);
  ASSERT_TRUE(strstr(buf, "c\n\"x,y\"\nSQL error: Parser Error: syntax error "
                          "at or near \"selec\"") != NULL);
  ASSERT_TRUE(strstr(buf, "CREATE TABLE trace_bounds(start_ts BIGINT, end_ts BIGINT);\n") != NULL);
  ASSERT_TRUE(strstr(buf, "unknown command .nope (try .help)\n") != NULL);
  ASSERT_TRUE(strstr(buf, "never") == NULL);
  free(buf);
  etch__db_close(db);
}

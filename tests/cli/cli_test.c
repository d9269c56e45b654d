/*
 * cli_test.c - the etch command run as a program: exact output of stats,
 * query (table, CSV, -f, stdin, --db), convert; usage errors (exit 2),
 * runtime errors (exit 1) with their messages; print; record; env.
 *
 * ETCH_BIN is the path of the built etch binary, ETCH_RECORDEE a small
 * program instrumented with libetch (recordee.c).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "query_test_util.h"
#include "test.h"
#include "trace_build.h"

extern char **environ;

typedef struct run_result {
  int status; /* exit status, or 128 + signal */
  char *out, *err;
} run_result;

static char *slurp(const char *path) {
  size_t len;
  char *s = (char *)etch_test_read_file(path, &len);
  if (!s) return strdup("");
  s = realloc(s, len + 1);
  s[len] = '\0';
  return s;
}

/* Runs `argv` (argv[0] = ETCH_BIN if NULL) with stdin from `in` (NULL =
 * /dev/null). */
static run_result run_env(const char *in, char *const *envp,
                          const char *const *args) {
  const char *dir = etch_test_tmpdir();
  char out_path[512], err_path[512];
  snprintf(out_path, sizeof out_path, "%s/stdout", dir);
  snprintf(err_path, sizeof err_path, "%s/stderr", dir);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in ? in : "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path,
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path,
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  char *argv[32];
  int n = 0;
  argv[n++] = (char *)ETCH_BIN;
  for (; args[n - 1] && n < 31; n++) argv[n] = (char *)args[n - 1];
  argv[n] = NULL;
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, NULL, argv, envp) != 0)
    FAIL("cannot run %s", argv[0]);
  posix_spawn_file_actions_destroy(&fa);
  int st;
  waitpid(pid, &st, 0);
  run_result r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  return r;
}

static run_result run_in(const char *in, const char *const *args) {
  return run_env(in, environ, args);
}

#define RUN(...) run_in(NULL, (const char *const[]){__VA_ARGS__, NULL})
#define RUN_IN(in, ...) run_in(in, (const char *const[]){__VA_ARGS__, NULL})

static void done(run_result *r) {
  free(r->out);
  free(r->err);
}

#define ASSERT_CONTAINS(hay, needle)                                    \
  do {                                                                  \
    if (!strstr((hay), (needle)))                                       \
      FAIL("expected \"%s\" in:\n%s", (needle), (hay));                 \
  } while (0)

/* A small trace: process app (pid 10), thread main (10): frame [1000,
 * 5000) > draw [2000, 3000) with arg n=3, an instant at 2500, an open slice
 * at 6000; a counter "heap"; an end without a begin on thread 11. */
static const char *small_trace(void) {
  tb t;
  tb_init(&t);
  tb_process(&t, 1, 1, 10, "app");
  tb_thread(&t, 1, 2, 10, 10, "main");
  tb_thread(&t, 2, 3, 10, 11, "worker");
  tb_counter_track(&t, 1, 4, 1, "heap", ETCH_CD_UNIT_SIZE_BYTES);
  tb_event(&t, 1, 1000, 2, ETCH_TE_TYPE_SLICE_BEGIN, "render", "frame");
  tb_counter(&t, 1, 1000, 4, 100);
  tb_event(&t, 2, 1500, 3, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  tb_event_open(&t, 1, 2000, 2, ETCH_TE_TYPE_SLICE_BEGIN, "render", "draw");
  tb_open(&t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_s(&t, ETCH_DA_NAME, "n");
  tb_u(&t, ETCH_DA_INT_VALUE, 3);
  tb_close(&t);
  tb_event_close(&t);
  tb_event(&t, 1, 2500, 2, ETCH_TE_TYPE_INSTANT, "render", "vsync");
  tb_event(&t, 1, 3000, 2, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  tb_counter(&t, 1, 4000, 4, 300);
  tb_event(&t, 1, 5000, 2, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  tb_event(&t, 1, 6000, 2, ETCH_TE_TYPE_SLICE_BEGIN, "io", "open, \"quoted\"");
  const char *path = tb_write_file(&t, "small.pftrace");
  tb_free(&t);
  return path;
}

TEST(cli_usage_errors_exit_2) {
  run_result r = RUN(NULL);
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "usage: etch COMMAND");
  done(&r);
  r = RUN("frobnicate");
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_EQ_STR(r.err,
                "etch: unknown command 'frobnicate'\n"
                "Run 'etch help' for the list of commands.\n");
  done(&r);
  r = RUN("stats");
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_EQ_STR(r.err,
                "etch: missing the trace file\n"
                "usage: etch stats [--top N] [--compact] [--json] [--strict] TRACE\n"
                "Run 'etch stats --help' for details.\n");
  done(&r);
  r = RUN("query", "--bogus", "x.pftrace");
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "etch: unknown option --bogus\n");
  done(&r);
  r = RUN("stats", "--top", "zero", "x.pftrace");
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "--top: 'zero' is not a count from 1");
  done(&r);
  r = RUN("convert", "a", "b");
  ASSERT_EQ_INT(r.status, 2);
  done(&r);
  r = RUN("record");
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "missing the program to run");
  done(&r);
  r = RUN("convert", "x.pftrace", "-o");
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "option -o needs a value");
  done(&r);
}

TEST(cli_help) {
  run_result r = RUN("help");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.out, "Commands:\n  record ");
  ASSERT_CONTAINS(r.out, "  query    SQL over the trace's tables\n");
  done(&r);
  const char *verbs[] = {"record", "stats", "query", "convert", "print"};
  for (size_t i = 0; i < 5; i++) {
    r = RUN(verbs[i], "--help");
    ASSERT_EQ_INT(r.status, 0);
    char want[64];
    snprintf(want, sizeof want, "usage: etch %s", verbs[i]);
    ASSERT_TRUE(strncmp(r.out, want, strlen(want)) == 0);
    done(&r);
    r = RUN("help", verbs[i]);
    ASSERT_EQ_INT(r.status, 0);
    ASSERT_TRUE(strncmp(r.out, want, strlen(want)) == 0);
    done(&r);
  }
  r = RUN("--version");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_TRUE(strncmp(r.out, "etch ", 5) == 0);
  done(&r);
}

TEST(cli_runtime_errors_exit_1) {
  run_result r = RUN("stats", "/nonexistent/app.pftrace");
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_EQ_STR(r.err,
                "etch: /nonexistent/app.pftrace: No such file or directory\n");
  done(&r);

  /* A packet whose length runs past the end of the file. */
  tb t;
  tb_init(&t);
  tb_thread(&t, 1, 2, 10, 10, "main");
  tb_b(&t, ETCH_TRACE_PACKET, "\x08\x01", 2);
  const char *bad = tb_write_file(&t, "bad.pftrace");
  FILE *f = fopen(bad, "ab");
  fputs("\x0a\x7f\x08", f); /* says 127 bytes, has 1 */
  fclose(f);
  tb_free(&t);
  /* A trace cut short is an error with --strict (by default a warning:
   * cli_truncated_trace_reads_the_prefix). */
  const char *verbs[] = {"stats", "query", "convert"};
  for (size_t i = 0; i < 3; i++) {
    r = RUN(verbs[i], "--strict", bad);
    ASSERT_EQ_INT(r.status, 1);
    ASSERT_CONTAINS(r.err, "offset");
    ASSERT_TRUE(strncmp(r.err, "etch: ", 6) == 0);
    done(&r);
  }
  /* Corruption before the end stays an error either way. */
  tb_init(&t);
  tb_thread(&t, 1, 2, 10, 10, "main");
  tb_b(&t, ETCH_TRACE_PACKET, "\x08\x01", 2);
  tb_b(&t, 7, "\x01", 1); /* field 7 where a packet belongs */
  tb_b(&t, ETCH_TRACE_PACKET, "\x08\x01", 2);
  const char *mid = tb_write_file(&t, "mid.pftrace");
  tb_free(&t);
  for (size_t i = 0; i < 3; i++) {
    r = RUN(verbs[i], mid);
    ASSERT_EQ_INT(r.status, 1);
    ASSERT_CONTAINS(r.err, "not a Perfetto protobuf trace");
    done(&r);
  }

  const char *small = small_trace();
  r = RUN("query", small, "selec name from slice");
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_TRUE(strncmp(r.err, "etch: SQL error: Parser Error: syntax error at "
                             "or near \"selec\"\n", 61) == 0);
  ASSERT_EQ_STR(r.out, "");
  done(&r);
  r = RUN("query", small, "select nope from slice");
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_TRUE(strncmp(r.err, "etch: SQL error: Binder Error: Referenced "
                             "column \"nope\" not found", 62) == 0);
  done(&r);
  r = RUN("query", small, "-f", "/nonexistent.sql");
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_EQ_STR(r.err, "etch: /nonexistent.sql: No such file or directory\n");
  done(&r);
}

TEST(cli_query_table_csv_file_stdin) {
  const char *small = small_trace();
  run_result r = RUN("query", small,
                     "select s.name, s.ts, s.dur, s.depth, t.name as track "
                     "from slice s join track t on s.track_id = t.id "
                     "order by s.ts");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.err, "");
  ASSERT_EQ_STR(r.out,
                "name              ts   dur  depth  track\n"
                "--------------  ----  ----  -----  -----\n"
                "frame           1000  4000      0  main\n"
                "draw            2000  1000      1  main\n"
                "vsync           2500     0      2  main\n"
                "open, \"quoted\"  6000    -1      0  main\n");
  done(&r);
  r = RUN("query", "--csv", small,
          "select name, dur from slice order by ts; "
          "select key, int_value from args");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out,
                "name,dur\nframe,4000\ndraw,1000\nvsync,0\n"
                "\"open, \"\"quoted\"\"\",-1\n"
                "key,int_value\ndebug.n,3\n");
  done(&r);

  char sql_path[512];
  snprintf(sql_path, sizeof sql_path, "%s/q.sql", etch_test_tmpdir());
  FILE *f = fopen(sql_path, "w");
  fputs("-- two queries\nselect count(*) as n from slice;\n"
        "select name, value from stats where name = 'misplaced_end_event';\n",
        f);
  fclose(f);
  const char *want =
      "n\n-\n4\n\nname                 value\n"
      "-------------------  -----\nmisplaced_end_event      1\n";
  r = RUN("query", small, "-f", sql_path);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, want);
  done(&r);
  /* Without SQL and with stdin not a terminal: statements from stdin. */
  r = RUN_IN(sql_path, "query", small);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, want);
  done(&r);
}

/* SQL that starts with a comment is SQL, not an unknown option; an
 * option-looking word after the trace still is an option. */
TEST(cli_query_sql_starting_with_a_comment) {
  const char *small = small_trace();
  run_result r = RUN("query", small, "-- how many\nselect count(*) from counter");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.err, "");
  ASSERT_EQ_STR(r.out, "count_star()\n------------\n           2\n");
  done(&r);
  r = RUN("query", small, "--csv", "-- a comment, then\nselect 7");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "7\n7\n");
  done(&r);
  r = RUN("query", small, "--", "--also\nselect 1");
  ASSERT_EQ_INT(r.status, 0);
  done(&r);
  r = RUN("query", small, "-x");
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "etch: unknown option -x\n");
  done(&r);
}

TEST(cli_query_db_kept_and_reopened) {
  const char *small = small_trace();
  char db[512];
  snprintf(db, sizeof db, "%s/out.sqlite", etch_test_tmpdir());
  run_result r = RUN("query", small, "--db", db, "select count(*) from slice");
  ASSERT_EQ_INT(r.status, 0);
  done(&r);
  struct stat sb;
  ASSERT_TRUE(stat(db, &sb) == 0 && sb.st_size > 0);
  r = RUN("query", "--csv", db, "select name from slice where dur = -1");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "name\n\"open, \"\"quoted\"\"\"\n");
  done(&r);
  r = RUN("stats", "--compact", db);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.out, "top slices by total time");
  done(&r);
}

TEST(cli_stats_exact) {
  const char *small = small_trace();
  run_result r = RUN("stats", small);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.err, "");
  ASSERT_TEXT(r.out,
              "trace\n"
              "  duration   5.00 us (1000 .. 6000 ns)\n"
              "  events     9\n"
              "  slices     4 (1 instant, 1 open at the end)\n"
              "  counters   2 values on 1 track\n"
              "  flows      0\n"
              "  tracks     4\n"
              "  processes  1\n"
              "  threads    2\n"
              "\n"
              "top slices by total time\n"
              "  name            count    total     self      avg      max\n"
              "  --------------  -----  -------  -------  -------  -------\n"
              "  frame               1  4.00 us  3.00 us  4.00 us  4.00 us\n"
              "  draw                1  1.00 us  1.00 us  1.00 us  1.00 us\n"
              "  open, \"quoted\"      1     0 ns     0 ns     0 ns     0 ns\n"
              "\n"
              "top slices by self time\n"
              "  name            count    total     self      avg      max\n"
              "  --------------  -----  -------  -------  -------  -------\n"
              "  frame               1  4.00 us  3.00 us  4.00 us  4.00 us\n"
              "  draw                1  1.00 us  1.00 us  1.00 us  1.00 us\n"
              "  open, \"quoted\"      1     0 ns     0 ns     0 ns     0 ns\n"
              "\n"
              "threads (busy = time in depth-0 slices)\n"
              "  thread  tid  process  pid     busy  of trace\n"
              "  ------  ---  -------  ---  -------  --------\n"
              "  main     10  app       10  4.00 us     80.0%\n"
              "\n"
              "counters\n"
              "  track  unit   count  min  max  mean  last\n"
              "  -----  -----  -----  ---  ---  ----  ----\n"
              "  heap   bytes      2  100  300   200   300\n"
              "\n"
              "data loss\n"
              "  stat                 value  meaning\n"
              "  -------------------  -----  -----------------------------------\n"
              "  misplaced_end_event      1  slice ends without a matching begin\n");
  done(&r);
}

TEST(cli_convert_exact_and_parses) {
  const char *small = small_trace();
  char out[512];
  snprintf(out, sizeof out, "%s/small.json", etch_test_tmpdir());
  run_result r = RUN("convert", small, "-o", out);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "");
  ASSERT_EQ_STR(r.err, "");
  done(&r);
  char *json = slurp(out);
  ASSERT_TEXT(json,
              "{\"traceEvents\":[\n"
              "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":10,\"tid\":0,\"args\":{\"name\":\"app\"}},\n"
              "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":10,\"tid\":10,\"args\":{\"name\":\"main\"}},\n"
              "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":10,\"tid\":11,\"args\":{\"name\":\"worker\"}},\n"
              "{\"ph\":\"X\",\"name\":\"frame\",\"cat\":\"render\",\"pid\":10,\"tid\":10,\"ts\":1.000,\"dur\":4.000},\n"
              "{\"ph\":\"X\",\"name\":\"draw\",\"cat\":\"render\",\"pid\":10,\"tid\":10,\"ts\":2.000,\"dur\":1.000,\"args\":{\"n\":3}},\n"
              "{\"ph\":\"i\",\"s\":\"t\",\"name\":\"vsync\",\"cat\":\"render\",\"pid\":10,\"tid\":10,\"ts\":2.500},\n"
              "{\"ph\":\"B\",\"name\":\"open, \\\"quoted\\\"\",\"cat\":\"io\",\"pid\":10,\"tid\":10,\"ts\":6.000},\n"
              "{\"ph\":\"C\",\"name\":\"heap\",\"pid\":10,\"ts\":1.000,\"args\":{\"value\":100}},\n"
              "{\"ph\":\"C\",\"name\":\"heap\",\"pid\":10,\"ts\":4.000,\"args\":{\"value\":300}}\n"
              "],\"displayTimeUnit\":\"ns\"}\n");
  free(json);
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "python3 -c 'import json,sys; json.load(open(sys.argv[1]))' %s",
           out);
  int st = system(cmd);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* To stdout without -o. */
  r = RUN("convert", small);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_TRUE(strncmp(r.out, "{\"traceEvents\":[", 16) == 0);
  done(&r);
}

/* NaN counter values: "no value" (the counter table stores NULL), counted
 * but left out of min, max and mean, shown as "-" and written as null. */
TEST(cli_nan_counters) {
  tb t;
  tb_init(&t);
  tb_process(&t, 1, 1, 10, "app");
  tb_counter_track(&t, 1, 4, 1, "ratio", 0);
  tb_counter_track(&t, 1, 5, 1, "none", 0);
  tb_counter_double(&t, 1, 1000, 4, 1.5);
  tb_counter_double(&t, 1, 2000, 4, NAN);
  tb_counter_double(&t, 1, 3000, 4, 3.5);
  tb_counter_double(&t, 1, 4000, 5, NAN);
  const char *path = tb_write_file(&t, "nan.pftrace");
  tb_free(&t);
  run_result r = RUN("stats", path);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.out,
                  "counters\n"
                  "  track  unit  count  min  max  mean  last\n"
                  "  -----  ----  -----  ---  ---  ----  ----\n"
                  "  none   -         1    -    -     -     -\n"
                  "  ratio  -         3  1.5  3.5   2.5   3.5\n");
  done(&r);
  r = RUN("stats", "--json", path);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.out,
                  "\"counters\":[{\"track\":\"none\",\"unit\":null,"
                  "\"count\":1,\"min\":null,\"max\":null,\"mean\":null,"
                  "\"last\":null},{\"track\":\"ratio\",\"unit\":null,"
                  "\"count\":3,\"min\":1.5,\"max\":3.5,\"mean\":2.5,"
                  "\"last\":3.5}]");
  done(&r);
  r = RUN("convert", path);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.out,
                  "{\"ph\":\"C\",\"name\":\"ratio\",\"pid\":10,\"ts\":1.000,"
                  "\"args\":{\"value\":1.5}},\n"
                  "{\"ph\":\"C\",\"name\":\"ratio\",\"pid\":10,\"ts\":2.000,"
                  "\"args\":{\"value\":null}},\n"
                  "{\"ph\":\"C\",\"name\":\"ratio\",\"pid\":10,\"ts\":3.000,"
                  "\"args\":{\"value\":3.5}},\n"
                  "{\"ph\":\"C\",\"name\":\"none\",\"pid\":10,\"ts\":4.000,"
                  "\"args\":{\"value\":null}}\n");
  done(&r);
}

/* A slice that lasts 0 ns is a slice: counted in the top lists (which
 * count slices, not instant events) like any other. */
TEST(cli_stats_zero_length_slices_are_slices) {
  tb t;
  tb_init(&t);
  tb_process(&t, 1, 1, 10, "app");
  tb_thread(&t, 1, 2, 10, 10, "main");
  tb_event(&t, 1, 1000, 2, ETCH_TE_TYPE_SLICE_BEGIN, "c", "z");
  tb_event(&t, 1, 1000, 2, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  tb_event(&t, 1, 2000, 2, ETCH_TE_TYPE_SLICE_BEGIN, "c", "z");
  tb_event(&t, 1, 2500, 2, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  tb_event(&t, 1, 3000, 2, ETCH_TE_TYPE_INSTANT, "c", "z");
  const char *path = tb_write_file(&t, "zero.pftrace");
  tb_free(&t);
  run_result r = RUN("stats", path);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.out, "  slices     3 (1 instant, 0 open at the end)\n");
  ASSERT_CONTAINS(r.out,
                  "top slices by total time\n"
                  "  name  count   total    self     avg     max\n"
                  "  ----  -----  ------  ------  ------  ------\n"
                  "  z         2  500 ns  500 ns  250 ns  500 ns\n");
  done(&r);
}

/* An empty file: an empty trace, with a warning that says so. */
TEST(cli_empty_file_warns) {
  char path[512];
  snprintf(path, sizeof path, "%s/empty.pftrace", etch_test_tmpdir());
  FILE *f = fopen(path, "wb");
  fclose(f);
  char want[700];
  snprintf(want, sizeof want,
           "etch: warning: %s is empty (0 bytes): no trace in it\n", path);
  run_result r = RUN("stats", path);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.err, want);
  ASSERT_CONTAINS(r.out, "  events     0\n");
  done(&r);
  r = RUN("query", path, "select count(*) from slice");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.err, want);
  done(&r);
}

/* A trace cut short inside its last packet: what precedes the cut is read,
 * with a warning naming the offset and the bytes lost, and counted as data
 * loss; --strict makes it the error it used to be. */
static void cut_trace(tb *t, bool last) {
  tb_process(t, 1, 1, 10, "app");
  tb_thread(t, 1, 2, 10, 10, "main");
  tb_event(t, 1, 1000, 2, ETCH_TE_TYPE_SLICE_BEGIN, "c", "kept");
  tb_event(t, 1, 2000, 2, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  if (last) tb_event(t, 1, 3000, 2, ETCH_TE_TYPE_INSTANT, "c", "lost one");
}

TEST(cli_truncated_trace_reads_the_prefix) {
  tb whole, prefix;
  tb_init(&whole);
  tb_init(&prefix);
  cut_trace(&whole, true);
  cut_trace(&prefix, false);
  size_t cut_at = tb_len(&prefix), len = tb_len(&whole) - 3;
  char path[512];
  snprintf(path, sizeof path, "%s/cut.pftrace", etch_test_tmpdir());
  FILE *f = fopen(path, "wb");
  fwrite(tb_data(&whole), 1, len, f);
  fclose(f);
  tb_free(&whole);
  tb_free(&prefix);
  char want[800];
  snprintf(want, sizeof want,
           "etch: warning: %s is cut short: the %zu bytes from offset %zu "
           "are an incomplete packet; what precedes them is read\n",
           path, len - cut_at, cut_at);
  run_result r = RUN("stats", path);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.err, want);
  ASSERT_CONTAINS(r.out, "  slices     1 (0 instants, 0 open at the end)\n");
  ASSERT_CONTAINS(r.out, "trace_truncated_bytes");
  done(&r);
  r = RUN("query", path,
          "select name from slice; select value from stats where name = "
          "'trace_truncated_bytes'");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.err, want);
  char out[200];
  snprintf(out, sizeof out, "name\n----\nkept\n\nvalue\n-----\n%5zu\n",
           len - cut_at);
  ASSERT_EQ_STR(r.out, out);
  done(&r);
  r = RUN("stats", "--strict", path);
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.err, "bytes left in the file\n");
  done(&r);
  r = RUN("convert", "--strict", path);
  ASSERT_EQ_INT(r.status, 1);
  done(&r);
  r = RUN("convert", path);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.out, "\"name\":\"kept\"");
  done(&r);
}

TEST(cli_print) {
  const char *small = small_trace();
  run_result r = RUN("print", small);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.out, "frame");
  done(&r);
  r = RUN("print", "/nonexistent.pftrace");
  ASSERT_EQ_INT(r.status, 1);
  done(&r);
  /* A broken trace: the error once, on stderr; the listing up to it on
   * stdout. */
  char cut[512];
  snprintf(cut, sizeof cut, "%s/cut.pftrace", etch_test_tmpdir());
  size_t len;
  uint8_t *data = etch_test_read_file(small, &len);
  FILE *f = fopen(cut, "wb");
  fwrite(data, 1, len - 3, f);
  fclose(f);
  free(data);
  r = RUN("print", "--strict", cut);
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_TRUE(strncmp(r.err, "etch: ", 6) == 0);
  ASSERT_CONTAINS(r.err, "bytes left in the file\n");
  ASSERT_TRUE(strchr(r.err, '\n') == r.err + strlen(r.err) - 1); /* 1 line */
  ASSERT_TRUE(strstr(r.out, "bytes left in the file") == NULL);
  ASSERT_CONTAINS(r.out, "frame");
  done(&r);
}

/* One rule for a trace cut short in every verb that reads a trace, the
 * last packet claiming 2^64-1 bytes as much as one claiming a few more
 * than the file has: a warning and what precedes is read (exit 0);
 * --strict: the reader's error (exit 1). */
TEST(cli_every_verb_one_rule_for_a_cut_trace) {
  const char *small = small_trace();
  size_t len;
  uint8_t *data = etch_test_read_file(small, &len);
  char path[512];
  snprintf(path, sizeof path, "%s/huge-last.pftrace", etch_test_tmpdir());
  FILE *f = fopen(path, "wb");
  fwrite(data, 1, len, f);
  /* Field 1, length 2^64-1 (a ten-byte varint), then nothing. */
  fwrite("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 1, 11, f);
  fclose(f);
  free(data);
  char warn[800], strict[800];
  snprintf(warn, sizeof warn,
           "etch: warning: %s is cut short: the 11 bytes from offset %zu "
           "are an incomplete packet; what precedes them is read\n",
           path, len);
  snprintf(strict, sizeof strict,
           "etch: %s: corrupt trace, or cut short: offset %zu: packet length "
           "18446744073709551615 larger than the 0 bytes left in the file\n",
           path, len);
  const char *verbs[] = {"stats", "query", "convert", "print", "leaks"};
  for (size_t i = 0; i < 5; i++) {
    bool q = !strcmp(verbs[i], "query");
    run_result r = q ? RUN(verbs[i], path, "select count(*) from slice")
                     : RUN(verbs[i], path);
    if (r.status != 0 || strcmp(r.err, warn) != 0)
      FAIL("etch %s: exit %d, stderr:\n%s", verbs[i], r.status, r.err);
    if (q) ASSERT_EQ_STR(r.out, "count_star()\n------------\n           4\n");
    done(&r);
    r = q ? RUN(verbs[i], "--strict", path, "select count(*) from slice")
          : RUN(verbs[i], "--strict", path);
    if (r.status != 1 || strcmp(r.err, strict) != 0)
      FAIL("etch %s --strict: exit %d, stderr:\n%s", verbs[i], r.status,
           r.err);
    done(&r);
  }
  /* etch print lists what precedes and says where the cut is. */
  run_result r = RUN("print", path);
  ASSERT_CONTAINS(r.out, "name \"draw\"");
  char last[200];
  snprintf(last, sizeof last,
           "-- cut short: the 11 bytes from offset %zu are an incomplete "
           "packet\n",
           len);
  ASSERT_CONTAINS(r.out, last);
  done(&r);
  /* The rule is in the help. */
  r = RUN("help");
  ASSERT_CONTAINS(r.out, "A trace cut short (the file ends inside its last "
                         "packet, whatever\nlength that packet claims) is "
                         "read up to the cut by every command");
  done(&r);
}

/* A uint arg above INT64_MAX: int_value holds its 64 bits (SQLite's
 * integers are signed; -1 for UINT64_MAX, as in trace_processor), and
 * display_value says what convert writes, 18446744073709551615. */
TEST(cli_uint64_max_in_query_and_convert) {
  tb t;
  tb_init(&t);
  tb_process(&t, 1, 1, 10, "app");
  tb_thread(&t, 1, 2, 10, 10, "main");
  tb_event_open(&t, 1, 1000, 2, ETCH_TE_TYPE_INSTANT, "c", "big");
  tb_open(&t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_s(&t, ETCH_DA_NAME, "max");
  tb_u(&t, ETCH_DA_UINT_VALUE, UINT64_MAX);
  tb_close(&t);
  tb_open(&t, ETCH_TE_DEBUG_ANNOTATIONS);
  tb_s(&t, ETCH_DA_NAME, "p");
  tb_u(&t, ETCH_DA_POINTER_VALUE, 0xdeadbeef);
  tb_close(&t);
  tb_event_close(&t);
  const char *path = tb_write_file(&t, "umax.pftrace");
  tb_free(&t);
  run_result r = RUN("query", "--csv", path,
                     "select key, value_type, int_value, display_value from "
                     "args order by id");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out,
                "key,value_type,int_value,display_value\n"
                "debug.max,uint,-1,18446744073709551615\n"
                "debug.p,pointer,3735928559,0xdeadbeef\n");
  done(&r);
  r = RUN("convert", path);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.out, "\"max\":18446744073709551615");
  done(&r);
}

/* Bad bytes in a packet: every verb leaves the packet out with a warning
 * naming it and reads the rest; with --strict every verb says the trace is
 * corrupt, in words, before the decoder's detail; a file that is no trace
 * says that. */
TEST(cli_corrupt_trace_is_called_corrupt) {
  const char *small = small_trace();
  size_t len;
  uint8_t *data = etch_test_read_file(small, &len);
  char path[512];
  snprintf(path, sizeof path, "%s/wiretype.pftrace", etch_test_tmpdir());
  FILE *f = fopen(path, "wb");
  fwrite(data, 1, len, f);
  /* A packet of 3 bytes whose first field has wire type 7 (none). */
  fwrite("\x0a\x03\x0f\x01\x02", 1, 5, f);
  fclose(f);
  free(data);
  char want[800], warn[800], cached[800];
  snprintf(want, sizeof want,
           "etch: %s: corrupt trace: offset %zu: unsupported wire type\n",
           path, len + 2);
  snprintf(warn, sizeof warn,
           "etch: warning: %s: 1 malformed packet left out (the first: "
           "offset %zu: unsupported wire type); the rest is read\n",
           path, len + 2);
  snprintf(cached, sizeof cached,
           "etch: warning: %s: 1 malformed packet left out; the rest is read\n",
           path);
  const char *verbs[] = {"stats", "query", "convert", "print", "leaks"};
  for (size_t i = 0; i < 5; i++) {
    bool q = !strcmp(verbs[i], "query");
    run_result r = q ? RUN(verbs[i], "--strict", path, "select 1")
                     : RUN(verbs[i], "--strict", path);
    if (r.status != 1 || strcmp(r.err, want) != 0)
      FAIL("etch %s --strict: exit %d, stderr:\n%s\nwanted:\n%s", verbs[i],
           r.status, r.err, want);
    done(&r);
    r = q ? RUN(verbs[i], path, "select value from stats where name = "
                                "'malformed_packets'")
          : RUN(verbs[i], path);
    if (r.status != 0)
      FAIL("etch %s: exit %d, stderr:\n%s", verbs[i], r.status, r.err);
    /* print and leaks name the packet in their own report; a read from
     * the trace's cache (convert, after query built it) counts it without
     * naming it again. */
    if (strcmp(verbs[i], "print") && strcmp(verbs[i], "leaks") &&
        strcmp(r.err, warn) && strcmp(r.err, cached))
      FAIL("etch %s: stderr:\n%s", verbs[i], r.err);
    if (q) ASSERT_EQ_STR(r.out, "value\n-----\n    1\n");
    if (!strcmp(verbs[i], "stats")) ASSERT_CONTAINS(r.out, "malformed_packets");
    done(&r);
  }
  snprintf(path, sizeof path, "%s/text.pftrace", etch_test_tmpdir());
  f = fopen(path, "wb");
  fputs("hello world\n", f);
  fclose(f);
  snprintf(want, sizeof want,
           "etch: %s: offset 0: not a Perfetto protobuf trace: field 13 with "
           "wire type 0 where a packet (field 1) was expected\n",
           path);
  run_result r = RUN("stats", path);
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_EQ_STR(r.err, want);
  done(&r);
}

TEST(cli_record) {
  char trace[512];
  snprintf(trace, sizeof trace, "%s/rec.pftrace", etch_test_tmpdir());
  run_result r = RUN("record", "-o", trace, "-c", "test", "--", ETCH_RECORDEE,
                     "3");
  ASSERT_EQ_INT(r.status, 0);
  /* etch's own words on stderr; stdout is the program's (empty here). */
  ASSERT_EQ_STR(r.out, "");
  char want[600];
  snprintf(want, sizeof want, "trace: %s (", trace);
  ASSERT_TRUE(strncmp(r.err, want, strlen(want)) == 0);
  ASSERT_CONTAINS(r.err, "top slices by total time");
  ASSERT_CONTAINS(r.err, "  work ");
  ASSERT_CONTAINS(r.err, "data loss\n  none\n");
  done(&r);
  r = RUN("query", "--csv", trace,
          "select name, count(*) from slice group by name order by name");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "name,count_star()\nstep,3\nwork,1\n");
  done(&r);
  /* The category filter reaches the program. */
  r = RUN("record", "-o", trace, "-c", "other", ETCH_RECORDEE, "2");
  ASSERT_EQ_INT(r.status, 0);
  done(&r);
  r = RUN("query", "--csv", trace, "select count(*) from slice");
  ASSERT_EQ_STR(r.out, "count_star()\n0\n");
  done(&r);

  /* -q: where the trace is, and nothing else; the trace is the same. */
  r = RUN("record", "-q", "-o", trace, "-c", "test", "--", ETCH_RECORDEE, "4",
          "echo", "the program's output");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "the program's output\n");
  ASSERT_TRUE(strncmp(r.err, want, strlen(want)) == 0);
  ASSERT_TRUE(strchr(r.err, '\n') == r.err + strlen(r.err) - 1); /* 1 line */
  ASSERT_CONTAINS(r.err, " bytes)\n");
  done(&r);
  r = RUN("query", "--csv", trace,
          "select name, count(*) from slice group by name order by name");
  ASSERT_EQ_STR(r.out, "name,count_star()\nstep,4\nwork,1\n");
  done(&r);

  r = RUN("record", "-o", trace, "/nonexistent/program");
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.err, "cannot run /nonexistent/program");
  done(&r);
  r = RUN("record", "-o", trace, "true");
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.err, "wrote no trace");
  done(&r);
}

/* examples/custom_events recorded by etch record, its custom events read by
 * etch query: one row per event, every field in args, by name and type. */
TEST(cli_custom_events_in_query) {
  char trace[512];
  snprintf(trace, sizeof trace, "%s/custom.pftrace", etch_test_tmpdir());
  run_result r = RUN("record", "-o", trace, "--", ETCH_CUSTOM_EXAMPLE);
  ASSERT_EQ_INT(r.status, 0);
  done(&r);
  r = RUN("query", "--csv", trace,
          "select s.name, s.category, a.key, a.value_type, a.int_value, "
          "a.string_value, a.real_value from slice s join args a using "
          "(arg_set_id) where s.name = 'Demo.Sample' order by s.ts, a.id");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out,
      "name,category,key,value_type,int_value,string_value,real_value\n"
      "Demo.Sample,Demo,debug.i8,int,-8,,\n"
      "Demo.Sample,Demo,debug.i16,int,-1600,,\n"
      "Demo.Sample,Demo,debug.i32,int,-320000,,\n"
      "Demo.Sample,Demo,debug.i64,int,-6400000000,,\n"
      "Demo.Sample,Demo,debug.u8,uint,200,,\n"
      "Demo.Sample,Demo,debug.u16,uint,60000,,\n"
      "Demo.Sample,Demo,debug.u32,uint,4000000000,,\n"
      "Demo.Sample,Demo,debug.u64,uint,-446744073709551616,,\n"
      "Demo.Sample,Demo,debug.f32,real,,,1.5\n"
      "Demo.Sample,Demo,debug.f64,real,,,3.25\n"
      "Demo.Sample,Demo,debug.flag,bool,1,,\n"
      "Demo.Sample,Demo,debug.text,string,,hello,\n"
      "Demo.Sample,Demo,debug.wide,string,,w\xc3\xa9" "de,\n"
      "Demo.Sample,Demo,debug.utf16,string,,Hi\xf0\x9f\x98\x80,\n"
      "Demo.Sample,Demo,debug.bytes[0],uint,1,,\n"
      "Demo.Sample,Demo,debug.bytes[1],uint,2,,\n"
      "Demo.Sample,Demo,debug.bytes[2],uint,3,,\n"
      "Demo.Sample,Demo,debug.bytes[3],uint,250,,\n"
      "Demo.Sample,Demo,debug.ints[0],int,-1,,\n"
      "Demo.Sample,Demo,debug.ints[1],int,0,,\n"
      "Demo.Sample,Demo,debug.ints[2],int,1073741824,,\n"
      "Demo.Sample,Demo,debug.reals[0],real,,,0.5\n"
      "Demo.Sample,Demo,debug.reals[1],real,,,-2.25\n"
      "Demo.Sample,Demo,debug.u32,uint,7,,\n"
      "Demo.Sample,Demo,debug.text,string,,partial,\n");
  done(&r);
  /* The other types: the setting once, three serial jobs as slices. */
  r = RUN("query", "--csv", trace,
          "select name, count(*), sum(dur > 0) from slice where name like "
          "'Demo.%' group by name order by name");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out,
                "name,count_star(),sum((dur > 0))\n"
                "Demo.Job,3,3\n"
                "Demo.Sample,2,0\n"
                "Demo.Setting,1,0\n");
  done(&r);
}

/* A trace of two allocations and one free; with `overwritten`, a
 * TraceStats packet saying the ring buffer overwrote that many chunks. */
static const char *memory_trace(const char *name, uint64_t overwritten) {
  tb t;
  tb_init(&t);
  tb_process(&t, 1, 1, 10, "app");
  tb_thread(&t, 1, 2, 10, 10, "main");
  const uint64_t ptrs[3] = {0x1000, 0x2000, 0x1000};
  for (int i = 0; i < 3; i++) {
    tb_event_open(&t, 1, 1000 + i * 1000, 2, ETCH_TE_TYPE_INSTANT, "memory",
                  i < 2 ? "untagged" : "free");
    tb_open(&t, ETCH_TE_DEBUG_ANNOTATIONS);
    tb_s(&t, ETCH_DA_NAME, "ptr");
    tb_u(&t, ETCH_DA_POINTER_VALUE, ptrs[i]);
    tb_close(&t);
    if (i < 2) {
      tb_open(&t, ETCH_TE_DEBUG_ANNOTATIONS);
      tb_s(&t, ETCH_DA_NAME, "size");
      tb_u(&t, ETCH_DA_UINT_VALUE, 100);
      tb_close(&t);
    }
    tb_event_close(&t);
  }
  if (overwritten) {
    tb_begin(&t);
    tb_open(&t, ETCH_PKT_TRACE_STATS);
    tb_open(&t, ETCH_TS_BUFFER_STATS);
    tb_u(&t, ETCH_BS_CHUNKS_OVERWRITTEN, overwritten);
    tb_close(&t);
    tb_close(&t);
    tb_end(&t);
  }
  const char *path = tb_write_file(&t, name);
  tb_free(&t);
  return path;
}

/* etch leaks on a trace that lost data: the report says NOT EXACT and what
 * it cannot know, stderr warns, exit 1 unless --allow-loss. Without loss:
 * no word of it, exit 0. */
TEST(cli_leaks_says_when_the_trace_lost_data) {
  static const char report[] =
      "memory (category \"memory\")\n"
      "  allocations  2 (200 bytes)\n"
      "  frees        1\n"
      "  peak live    200 bytes at 1.00 us\n"
      "  never freed  1 allocation, 100 bytes\n"
      "\n"
      "never freed, by tag and size\n"
      "  tag       size  count  bytes\n"
      "  --------  ----  -----  -----\n"
      "  untagged   100      1    100\n";
  const char *exact = memory_trace("mem_exact.pftrace", 0);
  run_result r = RUN("leaks", exact);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.err, "");
  ASSERT_EQ_STR(r.out, report);
  done(&r);

  const char *lossy = memory_trace("mem_lossy.pftrace", 7);
  char out[2000], err[1000];
  snprintf(out, sizeof out,
           "%s\nNOT EXACT: the trace lost data\n"
           "  traced_buf_chunks_overwritten 7\n"
           "Allocations and frees in what was lost are not in the trace,\n"
           "and which they were cannot be known: a block listed as never\n"
           "freed may have been freed (its free was lost), blocks whose\n"
           "allocation was lost are not listed (their frees count as\n"
           "unmatched), and the counts and the peak may be off either way.\n"
           "Record with a buffer that holds the whole run (etch record\n"
           "--malloc picks one; see docs/memory.md).\n",
           report);
  snprintf(err, sizeof err,
           "etch: warning: %s lost data (traced_buf_chunks_overwritten 7): "
           "allocations and frees are missing, the leak report is not exact\n",
           lossy);
  r = RUN("leaks", lossy);
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_EQ_STR(r.out, out);
  char err1[1200];
  snprintf(err1, sizeof err1,
           "%setch: leaks: exit status 1 because the trace lost data "
           "(--allow-loss: 0)\n",
           err);
  ASSERT_EQ_STR(r.err, err1);
  done(&r);
  r = RUN("leaks", "--allow-loss", lossy);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, out);
  ASSERT_EQ_STR(r.err, err);
  done(&r);
}

/* The values of each kind (a duration, a size, an age, a count, a port,
 * bytes) go through base's parsers: one bad value of each is a usage
 * error that names the option and the value, and a good one with a unit
 * of base's (1.5s, 2MiB, 90m) is taken. */
TEST(cli_bad_value_of_each_kind) {
  static const struct {
    const char *argv[6];
    const char *want;
  } bad[] = {
      {{"record", "--time", "10x", "true"},
       "--time: '10x' is not a duration (e.g. 10s, 500ms, 2m)"},
      {{"record", "--time", "-1s", "true"},
       "--time: '-1s' is not a duration (e.g. 10s, 500ms, 2m)"},
      {{"record", "--buffer", "64XB", "true"},
       "--buffer: '64XB' is not a size (e.g. 64MB, 512KB)"},
      {{"record", "--buffer", "3k", "true"},
       "--buffer: '3k' is not a size (e.g. 64MB, 512KB)"},
      {{"ls", "--older-than", "7"},
       "--older-than: '7' is not an age (e.g. 30m, 12h, 7d, 2w)"},
      {{"stats", "--top", "-3", "x.pftrace"},
       "--top: '-3' is not a count from 1"},
      {{"stats", "--top", "1000001", "x.pftrace"},
       "--top: '1000001' is not a count from 1"},
      {{"load", "--batch", "1k", "t"},
       "--batch: a size from 4KB to 1GB (bytes, or with a unit: 128MB), "
       "not '1k'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    run_result r = run_in(NULL, bad[i].argv);
    ASSERT_EQ_INT(r.status, 2);
    ASSERT_CONTAINS(r.err, bad[i].want);
    done(&r);
  }
}

/* etch env: libetch's table of ETCH_* variables; --set, those set. */
TEST(cli_env) {
  run_result r = RUN("env");
  ASSERT_EQ_INT(r.status, 0);
  const char *head =
      "NAME                      TYPE     DEFAULT RANGE\n"
      "ETCH_OUT                  string   unset   a path; %p: the pid\n"
      "    record the run into this file (unset: etch_init() records "
      "nothing)\n"
      "ETCH_CATEGORIES           string   *       name, prefix*, *, "
      "-excluded, comma-separated\n";
  ASSERT_TRUE(strncmp(r.out, head, strlen(head)) == 0);
  ASSERT_CONTAINS(r.out,
                  "\nETCH_BUFFER_KB            size     8192    16..4194304\n"
                  "    the trace buffer in KiB (option buffer_kb)\n");
  ASSERT_CONTAINS(r.out,
                  "\nETCH_SYSTEM_PAGE_KB       size     32      4|8|16|32\n");
  ASSERT_CONTAINS(r.out,
                  "\nETCH_CRASH_WAIT_MS        duration 2000    0..\n");
  ASSERT_CONTAINS(r.out, "\nETCH_CLOCK                enum     auto    "
                         "auto|boottime\n");
  ASSERT_CONTAINS(r.out,
                  "\nETCH_STORE                string   unset   a path\n"
                  "    the trace store of etch record, ls and ui (unset: "
                  "$XDG_DATA_HOME/etch/traces)\n"
                  "ETCH_CACHE_DIR            string   unset   a path\n");
  ASSERT_CONTAINS(r.out, "\nPERFETTO_PRODUCER_SOCK_NAME string   unset   "
                         "NAME[,NAME...]\n");
  size_t lines = 0;
  for (const char *p = r.out; *p; p++) lines += *p == '\n';
  ASSERT_CONTAINS(r.out, "\nETCH_MALLOC_STACKS        bool     1       0|1\n");
  ASSERT_CONTAINS(r.out, "\nETCH_SAMPLE               count    0       "
                         "0..100000\n");
  ASSERT_EQ_INT((int)lines, 1 + 2 * 34); /* 34 variables */
  ASSERT_EQ_STR(r.err, "");
  done(&r);

  char *envp[] = {(char *)"PATH=/usr/bin:/bin", (char *)"ETCH_FILL=discard",
                  (char *)"ETCH_BUFER_KB=64", (char *)"ETCH_OUT=a b.pftrace",
                  (char *)"ETCH_CONSOLE=", NULL};
  r = run_env(NULL, envp, (const char *const[]){"env", "--set", NULL});
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out,
                "ETCH_OUT=a b.pftrace\n"
                "ETCH_FILL=discard\n"
                "ETCH_CONSOLE=\n"
                "ETCH_BUFER_KB=64  (libetch does not read it)\n");
  done(&r);
  char *none[] = {(char *)"PATH=/usr/bin:/bin", NULL};
  r = run_env(NULL, none, (const char *const[]){"env", "--set", NULL});
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "");
  done(&r);

  r = RUN("env", "extra");
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_EQ_STR(r.err,
                "etch: too many arguments\n"
                "usage: etch env [--set]\n"
                "Run 'etch env --help' for details.\n");
  done(&r);
  r = RUN("help", "env");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_TRUE(strncmp(r.out, "usage: etch env [--set]\n", 24) == 0);
  done(&r);
}

/*
 * sample_query_test.c - CPU samples on the analysis side: sample_prog
 * (70% of its work in burn_a, 30% in burn_b) recorded with etch record
 * --sample, then etch query's perf_sample rows compared with Perfetto's
 * trace_processor's on the same trace (when ETCH_TP names it), and etch
 * stats' top functions by samples compared with what a query over the
 * same tables counts.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "sample/perf.h"
#include "test.h"

static char *run(const char *cmd, int *status) {
  FILE *f = popen(cmd, "r");
  if (!f) FAIL("popen %s", cmd);
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  size_t n;
  while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (cap - len < 1024) buf = realloc(buf, cap *= 2);
  }
  buf[len] = 0;
  int st = pclose(f);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  return buf;
}

static char g_trace[600], g_sql[600];

/* The trace, recorded once: 400 samples of sample_prog; false (and the
 * reason on stderr) when perf events cannot be used here. */
static bool trace(void) {
  const char *hint = etch__perf_paranoid_hint();
  if (hint) {
    fprintf(stderr, "sample_query_test: skipped: %s\n", hint);
    return false;
  }
  if (g_trace[0]) return true;
  snprintf(g_trace, sizeof g_trace, "%s/s.pftrace", etch_test_tmpdir());
  snprintf(g_sql, sizeof g_sql, "%s/q.sql", etch_test_tmpdir());
  char cmd[3000];
  snprintf(cmd, sizeof cmd, "%s record -q --sample -o %s -- %s 400 2>&1",
           ETCH_BIN, g_trace, ETCH_SAMPLE_PROG);
  int st;
  char *out = run(cmd, &st);
  if (st) FAIL("%s: status %d\n%s", cmd, st, out);
  free(out);
  return true;
}

/* `sql` run by etch query --csv on the trace. */
static char *etch_query(const char *sql) {
  FILE *f = fopen(g_sql, "w");
  ASSERT_TRUE(f != NULL);
  fputs(sql, f);
  fclose(f);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s query --csv -f %s %s", ETCH_BIN, g_sql,
           g_trace);
  int st;
  char *out = run(cmd, &st);
  ASSERT_EQ_INT(st, 0);
  return out;
}

/* A callsite's path, outermost first: module+rel_pc of each frame. */
#define STACK_PATHS                                                         \
  "with recursive p(id, depth, path) as ("                                  \
  " select c.id, c.depth, m.name || '+' || cast(f.rel_pc as varchar)"       \
  " from stack_profile_callsite c"                                          \
  " join stack_profile_frame f on f.id = c.frame_id"                        \
  " join stack_profile_mapping m on m.id = f.mapping"                       \
  " where c.parent_id is null"                                              \
  " union all"                                                              \
  " select c.id, c.depth,"                                                  \
  " p.path || ' > ' || m.name || '+' || cast(f.rel_pc as varchar)"         \
  " from stack_profile_callsite c join p on c.parent_id = p.id"             \
  " join stack_profile_frame f on f.id = c.frame_id"                        \
  " join stack_profile_mapping m on m.id = f.mapping) "

#ifdef ETCH_TP
/* trace_processor's CSV as etch query --csv writes it: fields unquoted,
 * "[NULL]" empty (no field here holds a comma or a quote). */
static char *tp_query(const char *sql) {
  FILE *f = fopen(g_sql, "w");
  ASSERT_TRUE(f != NULL);
  fputs(sql, f);
  fclose(f);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s -q %s %s 2>/dev/null", ETCH_TP, g_sql,
           g_trace);
  int st;
  char *in = run(cmd, &st);
  ASSERT_EQ_INT(st, 0);
  char *out = malloc(strlen(in) + 1), *o = out;
  for (const char *p = in; *p; p++) {
    if (!strncmp(p, "\"[NULL]\"", 8)) {
      p += 7;
      continue;
    }
    if (*p != '"') *o++ = *p;
  }
  *o = 0;
  free(in);
  return out;
}

/* Every sample, etch's and trace_processor's: the same time, thread, cpu,
 * cpu mode, session and stack (compared by its frames, not its id:
 * trace_processor repeats a stack per sequence), the same leaf function
 * for the work's functions, and the same perf_session. (Other leaf names
 * may differ: trace_processor names only the frames it had seen when the
 * ModuleSymbols packets came, and a sample the program writes after them
 * keeps a new frame unnamed there, where etch names it.) */
TEST(etch_query_perf_sample_is_trace_processors) {
  if (!trace()) return;
  static const char *const kQueries[] = {
      STACK_PATHS
      "select s.ts, t.tid, s.cpu, s.cpu_mode, s.unwind_error, "
      "s.perf_session_id, p.depth, p.path from perf_sample s "
      "join thread t using (utid) left join p on p.id = s.callsite_id "
      "order by s.ts, t.tid;\n",
      "select t.tid, coalesce(sym.name, '?') as fn, count(*) as n "
      "from perf_sample s join thread t using (utid) "
      "left join stack_profile_callsite c on c.id = s.callsite_id "
      "left join stack_profile_frame f on f.id = c.frame_id "
      "left join stack_profile_symbol sym on sym.id = f.symbol_set_id "
      "where sym.name in ('burn_a', 'burn_b', 'run_round') "
      "group by 1, 2 order by 1, 2;\n",
      "select count(*) as n, min(t.upid is not null) as with_process "
      "from perf_sample s "
      "join thread t using (utid);\n",
      "select id, perf_session_id, cmdline from perf_session;\n",
  };
  for (size_t i = 0; i < sizeof kQueries / sizeof kQueries[0]; i++) {
    char *tp = tp_query(kQueries[i]);
    char *etch = etch_query(kQueries[i]);
    if (strcmp(etch, tp))
      FAIL("%s\netch query:\n%s\ntrace_processor:\n%s", kQueries[i], etch,
           tp);
    ASSERT_TRUE(strchr(strchr(etch, '\n') + 1, '\n') != NULL); /* rows */
    free(etch);
    free(tp);
  }
  /* the work's functions are named, on both threads */
  char *fns = etch_query(
      "select count(distinct t.tid) as n from perf_sample s "
      "join thread t using (utid) "
      "join stack_profile_callsite c on c.id = s.callsite_id "
      "join stack_profile_frame f on f.id = c.frame_id "
      "join stack_profile_symbol sym on sym.id = f.symbol_set_id "
      "where sym.name = 'burn_b';\n");
  ASSERT_EQ_STR(fns, "n\n2\n");
  free(fns);
}

/* trace_processor's stack_sample view and its context tables (v58.2's
 * common stack-sample format), row for row: each sample's time, source,
 * task context (its thread), execution context (its cpu), stack (by its
 * frames) and session; the contexts and the session themselves. */
TEST(etch_query_stack_sample_is_trace_processors) {
  if (!trace()) return;
  static const char *const kQueries[] = {
      STACK_PATHS
      "select s.id, s.ts, s.source, s.task_context_id, "
      "s.execution_context_id, s.session_id, t.tid, e.ucpu, p.path "
      "from stack_sample s "
      "join stack_sample_task_context c on c.id = s.task_context_id "
      "join thread t on t.utid = c.utid "
      "join stack_sample_execution_context e "
      "on e.id = s.execution_context_id "
      "left join p on p.id = s.callsite_id order by s.id;\n",
      "select count(*) as n, count(callsite_id) as with_stack, "
      "min(id) as lo, max(id) as hi from stack_sample;\n",
      "select c.id, c.upid is not null as with_process, t.tid, "
      "c.async_context_id from stack_sample_task_context c "
      "join thread t using (utid) order by c.id;\n",
      "select id, ucpu, cpu_mode from stack_sample_execution_context "
      "order by id;\n",
      "select id, source, timebase_unit, cmdline from stack_sample_session;\n",
      "select count(*) as n from stack_sample s join perf_sample p "
      "using (id) where s.ts != p.ts or s.callsite_id is distinct from "
      "p.callsite_id;\n",
  };
  for (size_t i = 0; i < sizeof kQueries / sizeof kQueries[0]; i++) {
    char *tp = tp_query(kQueries[i]);
    char *etch = etch_query(kQueries[i]);
    if (strcmp(etch, tp))
      FAIL("%s\netch query:\n%s\ntrace_processor:\n%s", kQueries[i], etch,
           tp);
    ASSERT_TRUE(strchr(strchr(etch, '\n') + 1, '\n') != NULL); /* rows */
    free(etch);
    free(tp);
  }
}
#endif

/* Samples whose stack holds function `fn` (innermost only when `self`),
 * counted by a query of its own over the tables (SQL that runs in etch
 * query and trace_processor alike). */
static char *count_sql_where(const char *fn, bool self, const char *where,
                             char *buf, size_t n) {
  snprintf(buf, n,
           "with recursive up(sid, cs) as (select s.id, s.callsite_id "
           "from perf_sample s where s.callsite_id is not null%s%s) "
           "select count(distinct up.sid) as n from up "
           "join stack_profile_callsite c on c.id = up.cs "
           "join stack_profile_frame f on f.id = c.frame_id "
           "join stack_profile_symbol sym on sym.id = f.symbol_set_id "
           "where sym.name = '%s';\n",
           where, self ? ""
                : " union all select up.sid, c.parent_id from up join "
                  "stack_profile_callsite c on c.id = up.cs "
                  "where c.parent_id is not null",
           fn);
  return buf;
}

static char *count_sql(const char *fn, bool self, char *buf, size_t n) {
  return count_sql_where(fn, self, "", buf, n);
}

static long query_count(const char *sql, bool tp) {
  char *out;
#ifdef ETCH_TP
  out = tp ? tp_query(sql) : etch_query(sql);
#else
  (void)tp;
  out = etch_query(sql);
#endif
  const char *nl = strchr(out, '\n');
  ASSERT_TRUE(nl != NULL);
  long v = atol(nl + 1);
  free(out);
  return v;
}

/* etch stats' CPU samples: the count, and burn_a, burn_b and their caller
 * run_round with the self and total samples a query counts (and
 * trace_processor's, when it is here); burn_a first by self samples (70%
 * of the work), burn_b second; the same report from a database written by
 * etch query --db as from the trace. */
TEST(etch_stats_top_functions_count_the_samples) {
  if (!trace()) return;
  char cmd[3000], sql[2048], want[256];
  snprintf(cmd, sizeof cmd, "%s stats --json --top 50 %s", ETCH_BIN, g_trace);
  int st;
  char *json = run(cmd, &st);
  ASSERT_EQ_INT(st, 0);
  long n = query_count("select count(*) as n from perf_sample;\n", false);
  ASSERT_TRUE(n >= 400);
  snprintf(want, sizeof want, "\"cpu_samples\":%ld,", n);
  if (!strstr(json, want)) FAIL("no %s in %s", want, json);
  static const char *const kFns[] = {"burn_a", "burn_b", "run_round"};
  for (int tp = 0; tp < 2; tp++) {
#ifndef ETCH_TP
    if (tp) break;
#endif
    for (size_t i = 0; i < 3; i++) {
      long self = query_count(count_sql(kFns[i], true, sql, sizeof sql), tp);
      long total = query_count(count_sql(kFns[i], false, sql, sizeof sql), tp);
      snprintf(want, sizeof want, "{\"function\":\"%s\",\"self\":%ld,\"total\":%ld}",
               kFns[i], self, total);
      if (!strstr(json, want)) FAIL("no %s in %s", want, json);
      ASSERT_TRUE(total >= (i == 2 ? n * 9 / 10 : 1)); /* run_round: all */
    }
  }
  ASSERT_TRUE(strstr(json, "\"top_functions_by_self\":[{\"function\":\"burn_a\""
                           ",\"self\":") != NULL);
  const char *b = strstr(json, "\"top_functions_by_self\":[");
  b = strstr(b, "},{\"function\":\"burn_b\",");
  ASSERT_TRUE(b != NULL);
  free(json);

  /* the same report from a database */
  char db[700];
  snprintf(db, sizeof db, "%s/s.duckdb", etch_test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s query --db %s %s 'select 1' >/dev/null",
           ETCH_BIN, db, g_trace);
  free(run(cmd, &st));
  ASSERT_EQ_INT(st, 0);
  snprintf(cmd, sizeof cmd, "%s stats %s", ETCH_BIN, db);
  char *from_db = run(cmd, &st);
  ASSERT_EQ_INT(st, 0);
  snprintf(cmd, sizeof cmd, "%s stats %s", ETCH_BIN, g_trace);
  char *from_trace = run(cmd, &st);
  ASSERT_EQ_INT(st, 0);
  ASSERT_EQ_STR(from_db, from_trace);
  ASSERT_TRUE(strstr(from_trace, "top functions by self samples\n") != NULL);
  free(from_db);
  free(from_trace);
}

/* etch report's page (and the viewer's stats): the samples' count and
 * burn_a's self and total samples as the query counts them. */
TEST(report_holds_the_top_functions) {
  if (!trace()) return;
  char html[700], cmd[3000], sql[2048], want[256];
  snprintf(html, sizeof html, "%s/s.html", etch_test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s report %s -o %s", ETCH_BIN, g_trace, html);
  int st;
  free(run(cmd, &st));
  ASSERT_EQ_INT(st, 0);
  FILE *f = fopen(html, "r");
  ASSERT_TRUE(f != NULL);
  char *page = calloc(1, 16 << 20);
  ASSERT_TRUE(fread(page, 1, (16 << 20) - 1, f) > 0);
  fclose(f);
  long n = query_count("select count(*) as n from perf_sample;\n", false);
  long self = query_count(count_sql("burn_a", true, sql, sizeof sql), false);
  long total = query_count(count_sql("burn_a", false, sql, sizeof sql), false);
  snprintf(want, sizeof want, "\"cpu_samples\":%ld,\"functions\":[[\"burn_a\",%ld,%ld]",
           n, self, total);
  if (!strstr(page, want)) FAIL("no %s in the report", want);
  free(page);
}

#ifdef ETCH_TEST_UI
#include "ui/app.h"

typedef struct args {
  const char *k[4], *v[4];
} args;

static const char *get(void *ctx, const char *key) {
  args *a = ctx;
  for (int i = 0; i < 4 && a->k[i]; i++)
    if (!strcmp(a->k[i], key)) return a->v[i];
  return NULL;
}

/* The node named `fn` under node `parent` (its index, -1 none): "total"
 * in *total. Nodes are [parent, name, total, self, count]. */
static int node_of(const char *j, int parent, const char *fn, long *total) {
  const char *names = strstr(j, "\"names\":[");
  ASSERT_TRUE(names != NULL);
  int name = -1, i = 0;
  char want[128];
  snprintf(want, sizeof want, "\"%s\"", fn);
  for (const char *p = names + 9; *p && *p != ']'; i++) {
    if (!strncmp(p, want, strlen(want))) name = i;
    p = strchr(p + 1, '"') + 1; /* past this name (none holds a quote) */
    if (*p == ',') p++;
  }
  if (name < 0) return -1;
  const char *p = strstr(j, "\"nodes\":[") + 9;
  for (int k = 0; *p == '['; k++) {
    long par, nm, tot;
    if (sscanf(p, "[%ld,%ld,%ld", &par, &nm, &tot) != 3) FAIL("node %s", p);
    if (par == parent && nm == name) {
      *total = tot;
      return k;
    }
    p = strchr(p, ']') + 1;
    if (*p == ',') p++;
  }
  return -1;
}

/* /api/sample_flame (the viewer's flame graph of CPU samples): a burn_a
 * slice's samples are its thread's inside it, each with burn_a innermost
 * under run_round; the thread's flame has burn_a and burn_b with the
 * samples a query counts, burn_a's the larger share (70% of the work). */
TEST(sample_flame_of_a_slice_and_of_a_thread) {
  if (!trace()) return;
  char *row = etch_query(
      "select s.id, t.utid, s.ts, s.dur from slice s join thread_track t "
      "on t.id = s.track_id where s.name = 'burn_a' order by (select "
      "count(*) from perf_sample p where p.utid = t.utid and p.ts >= s.ts "
      "and p.ts <= s.ts + s.dur) desc, s.id limit 1;\n");
  long id, utid, ts, dur;
  ASSERT_EQ_INT(sscanf(strchr(row, '\n') + 1, "%ld,%ld,%ld,%ld", &id, &utid,
                       &ts, &dur), 4);
  free(row);
  char sql[1024];
  snprintf(sql, sizeof sql,
           "select count(*) as n from perf_sample where utid = %ld and "
           "ts >= %ld and ts <= %ld and callsite_id is not null;\n",
           utid, ts, ts + dur);
  long in_slice = query_count(sql, false);
  ASSERT_TRUE(in_slice >= 1);
  etch__ui *ui;
  ASSERT_OK(etch__ui_new(&ui));
  etch__ui_set_cache_dir(ui, etch_test_tmpdir());
  ASSERT_OK(etch__ui_add_path(ui, g_trace));
  char sid[32], su[32];
  snprintf(sid, sizeof sid, "%ld", id);
  snprintf(su, sizeof su, "%ld", utid);
  args a = {{"id", "slice"}, {ui->t[0].id, sid}};
  char *j = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&j, &len);
  ASSERT_EQ_INT(etch__ui_api(ui, "/api/sample_flame", get, &a, f), 200);
  fclose(f);
  char want[64];
  snprintf(want, sizeof want, "\"nodes\":[[-1,-1,%ld,0,%ld]", in_slice,
           in_slice);
  if (!strstr(j, want)) FAIL("no %s in %s", want, j);
  long total = 0;
  /* ... > run_round > burn_a: every sample inside burn_a's slice */
  const char *nodes = strstr(j, "\"nodes\":[");
  ASSERT_TRUE(nodes != NULL);
  int rr = -1;
  for (int k = 0; k < 8 && rr < 0; k++) rr = node_of(j, k, "run_round", &total);
  ASSERT_TRUE(rr > 0);
  ASSERT_TRUE(node_of(j, rr, "burn_a", &total) > 0);
  /* The slice spans a little more than burn_a's call: the clock reads of
   * ETCH_SLICE_BEGIN and ETCH_SLICE_END in run_round. A sample taken
   * there (more likely where the library runs slower, as under
   * ThreadSanitizer) is inside the slice with run_round innermost: the
   * node counts the slice's samples that have burn_a on their stack. */
  char in[160];
  snprintf(in, sizeof in, " and s.utid = %ld and s.ts >= %ld and s.ts <= %ld",
           utid, ts, ts + dur);
  long with_a =
      query_count(count_sql_where("burn_a", false, in, sql, sizeof sql), false);
  ASSERT_TRUE(with_a >= 1 && with_a <= in_slice);
  ASSERT_EQ_INT(total, with_a);
  ASSERT_TRUE(node_of(j, rr, "burn_b", &total) < 0);
  free(j);

  /* the thread: burn_a and burn_b with the samples a query counts */
  args b = {{"id", "utid"}, {ui->t[0].id, su}};
  f = open_memstream(&j, &len);
  ASSERT_EQ_INT(etch__ui_api(ui, "/api/sample_flame", get, &b, f), 200);
  fclose(f);
  rr = -1;
  for (int k = 0; k < 8 && rr < 0; k++) rr = node_of(j, k, "run_round", &total);
  ASSERT_TRUE(rr > 0);
  long fa = 0, fb = 0;
  ASSERT_TRUE(node_of(j, rr, "burn_a", &fa) > 0);
  ASSERT_TRUE(node_of(j, rr, "burn_b", &fb) > 0);
  for (int i = 0; i < 2; i++) {
    snprintf(sql, sizeof sql,
             "select count(*) as n from perf_sample s "
             "join stack_profile_callsite c on c.id = s.callsite_id "
             "join stack_profile_frame f on f.id = c.frame_id "
             "join stack_profile_symbol sym on sym.id = f.symbol_set_id "
             "where s.utid = %ld and sym.name = '%s';\n",
             utid, i ? "burn_b" : "burn_a");
    ASSERT_EQ_INT(query_count(sql, false), i ? fb : fa);
  }
  ASSERT_TRUE(fa > fb);
  free(j);
  /* hostile arguments */
  args c = {{"id", "slice", "utid"}, {ui->t[0].id, "x", "1"}};
  f = open_memstream(&j, &len);
  ASSERT_EQ_INT(etch__ui_api(ui, "/api/sample_flame", get, &c, f), 400);
  fclose(f);
  free(j);
  args d = {{"id", "slice"}, {ui->t[0].id, "99999999"}};
  f = open_memstream(&j, &len);
  ASSERT_EQ_INT(etch__ui_api(ui, "/api/sample_flame", get, &d, f), 404);
  fclose(f);
  free(j);
  etch__ui_free(ui);
}

static char *ui_get(etch__ui *ui, args *a, int want) {
  char *j = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&j, &len);
  ASSERT_EQ_INT(etch__ui_api(ui, "/api/samples", get, a, f), want);
  fclose(f);
  return j;
}

/* /api/samples (the ticks under a thread's slices): the sampled threads
 * with their counts as a query gives them; a window in buckets: at most
 * one row a thread and bucket, their counts summing to the samples the
 * query counts in the window, each naming its first sample, whose own
 * answer has the time and a stack with run_round under its leaf. */
TEST(samples_per_thread_and_bucket) {
  if (!trace()) return;
  etch__ui *ui;
  ASSERT_OK(etch__ui_new(&ui));
  etch__ui_set_cache_dir(ui, etch_test_tmpdir());
  ASSERT_OK(etch__ui_add_path(ui, g_trace));
  args a = {{"id"}, {ui->t[0].id}};
  char *j = ui_get(ui, &a, 200);
  char *want = etch_query("select utid, count(*) as n from perf_sample "
                          "group by 1 order by 1;\n");
  /* "utid,n\nU,N\n..." against {"threads":[[U,N],...],"total":T} */
  char built[4096] = "{\"threads\":[";
  long total = 0, u, n;
  for (const char *p = strchr(want, '\n') + 1; sscanf(p, "%ld,%ld", &u, &n) == 2;
       p = strchr(p, '\n') + 1) {
    snprintf(built + strlen(built), sizeof built - strlen(built), "%s[%ld,%ld]",
             total ? "," : "", u, n);
    total += n;
  }
  snprintf(built + strlen(built), sizeof built - strlen(built),
           "],\"total\":%ld,\"allocation_stacks\":0}", total);
  ASSERT_EQ_STR(j, built);
  free(want);
  free(j);
  /* the middle half of the samples' time in 50 buckets */
  char *row = etch_query("select min(ts) as lo, max(ts) as hi from "
                         "perf_sample;\n");
  long lo, hi;
  ASSERT_EQ_INT(sscanf(strchr(row, '\n') + 1, "%ld,%ld", &lo, &hi), 2);
  free(row);
  long s0 = lo + (hi - lo) / 4, s1 = hi - (hi - lo) / 4;
  char ss[32], se[32], sql[256];
  snprintf(ss, sizeof ss, "%ld", s0);
  snprintf(se, sizeof se, "%ld", s1);
  snprintf(sql, sizeof sql, "select count(*) as n from perf_sample where "
           "ts >= %ld and ts < %ld;\n", s0, s1);
  long in_window = query_count(sql, false);
  ASSERT_TRUE(in_window > 50);
  args b = {{"id", "start", "end", "buckets"}, {ui->t[0].id, ss, se, "50"}};
  j = ui_get(ui, &b, 200);
  ASSERT_TRUE(!strncmp(j, "{\"buckets\":[[", 13));
  long sum = 0, rows = 0, prev_u = -1, prev_b = -1, bucket, cnt, first, ts;
  long first_id = -1;
  for (const char *p = j + 12; *p == '['; rows++) {
    ASSERT_EQ_INT(sscanf(p, "[%ld,%ld,%ld,%ld,%ld,", &u, &bucket, &cnt,
                         &first, &ts), 5);
    ASSERT_TRUE(bucket >= 0 && bucket < 50 && cnt >= 1);
    ASSERT_TRUE(u > prev_u || (u == prev_u && bucket > prev_b));
    ASSERT_TRUE(ts >= s0 + (s1 - s0) * bucket / 50 - 1 && ts < s1);
    prev_u = u;
    prev_b = bucket;
    sum += cnt;
    if (first_id < 0) first_id = first;
    p = strchr(p, ']') + 1;
    if (*p == ',') p++;
  }
  ASSERT_EQ_INT(sum, in_window);
  long threads = query_count("select count(distinct utid) as n from "
                             "perf_sample;\n", false);
  ASSERT_TRUE(rows <= threads * 50); /* 50 buckets a thread at most */
  free(j);
  /* the first bucket's sample: its time and its stack */
  char sid[32];
  snprintf(sid, sizeof sid, "%ld", first_id);
  args c = {{"id", "sample"}, {ui->t[0].id, sid}};
  j = ui_get(ui, &c, 200);
  snprintf(sql, sizeof sql, "select ts from perf_sample where id = %ld;\n",
           first_id);
  char wantts[64];
  snprintf(wantts, sizeof wantts, "\"ts\":%ld,", query_count(sql, false));
  if (!strstr(j, wantts)) FAIL("no %s in %s", wantts, j);
  ASSERT_TRUE(strstr(j, "\"run_round\"") != NULL);
  ASSERT_TRUE(strstr(j, "\"frames\":[\"burn_") != NULL); /* the leaf */
  free(j);
  /* hostile arguments */
  args d[] = {{{"id", "start", "end", "buckets"}, {ui->t[0].id, ss, se, "0"}},
              {{"id", "start", "end", "buckets"}, {ui->t[0].id, se, ss, "5"}},
              {{"id", "start", "buckets"}, {ui->t[0].id, ss, "5"}},
              {{"id", "start", "end", "buckets"},
               {ui->t[0].id, ss, se, "99999"}},
              {{"id", "sample", "start"}, {ui->t[0].id, "1", ss}},
              {{"id", "sample"}, {ui->t[0].id, "1x"}}};
  for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) free(ui_get(ui, &d[i], 400));
  args e = {{"id", "sample"}, {ui->t[0].id, "99999999"}};
  free(ui_get(ui, &e, 404));
  etch__ui_free(ui);
}
#endif

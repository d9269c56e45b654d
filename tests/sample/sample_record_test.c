/*
 * sample_record_test.c - CPU samples in the trace (etch record --sample,
 * src/sdk/features/sample.c): sample_prog spends 70% of its work in
 * burn_a and 30% in burn_b, each inside a slice of its name, on a thread
 * started before the session and one started after, until the samplers
 * have written a known number of samples. Perfetto's trace_processor
 * (when ETCH_TP names it) reads the samples as PerfSample packets: on both
 * threads, the innermost function named, shares within a few points,
 * every sample inside its function's slice, the caller unwound through
 * code without frame pointers. A process where perf_event_open is refused
 * records its slices all the same and says why once.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "sample/perf.h"
#include "test.h"

#define ASSERT_CONTAINS(hay, needle)                    \
  do {                                                  \
    if (!strstr((hay), (needle)))                       \
      FAIL("expected \"%s\" in:\n%s", (needle), (hay)); \
  } while (0)

/* Samples the program waits for, in all: a few hundred a thread. */
#define WANT 800

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

static char *read_file(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return strdup("");
  char *buf = calloc(1, 1 << 16);
  size_t n = fread(buf, 1, (1 << 16) - 1, f);
  buf[n] = 0;
  fclose(f);
  return buf;
}

static const char *path_in_tmp(const char *name) {
  static char p[4][600];
  static int k;
  char *q = p[k++ % 4];
  snprintf(q, 600, "%s/%s", etch_test_tmpdir(), name);
  return q;
}

typedef struct recorded {
  int early, late, rounds;
  char *err;
} recorded;

/* etch record --sample=HZ -- sample_prog ARG into NAME. */
static recorded record(const char *hz, const char *arg, const char *name) {
  char cmd[3000];
  snprintf(cmd, sizeof cmd, "%s record -q --sample%s%s -o %s -- %s %s 2>%s",
           ETCH_BIN, hz ? "=" : "", hz ? hz : "", path_in_tmp(name),
           ETCH_SAMPLE_PROG, arg, path_in_tmp("record.err"));
  int st;
  char *out = run(cmd, &st);
  recorded r = {0};
  r.err = read_file(path_in_tmp("record.err"));
  if (st != 0) FAIL("%s: status %d\n%s%s", cmd, st, out, r.err);
  if (sscanf(out, "tid early %d\ntid late %d\nrounds %d", &r.early, &r.late,
             &r.rounds) != 3)
    FAIL("sample_prog said: %s", out);
  free(out);
  return r;
}

static bool perf_usable(void) {
  const char *hint = etch__perf_paranoid_hint();
  if (hint) fprintf(stderr, "sample_record_test: skipped: %s\n", hint);
  return !hint;
}

#ifdef ETCH_TP
static char *tp_query(const char *trace, const char *sql) {
  const char *qf = path_in_tmp("q.sql");
  FILE *f = fopen(qf, "w");
  ASSERT_TRUE(f != NULL);
  fputs(sql, f);
  fclose(f);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s -q %s %s 2>/dev/null", ETCH_TP, qf, trace);
  int st;
  char *out = run(cmd, &st);
  ASSERT_EQ_INT(st, 0);
  return out;
}

/* The leaf function of a sample and what it is joined to. */
#define LEAF_JOINS                                                        \
  "from perf_sample p "                                                   \
  "join thread t using (utid) "                                           \
  "left join stack_profile_callsite cs on cs.id = p.callsite_id "         \
  "left join stack_profile_frame f on f.id = cs.frame_id "                \
  "left join stack_profile_symbol s on s.symbol_set_id = f.symbol_set_id "

/* Samples of thread `tid` in function `fn` in a CSV of tid,fn,n rows. */
static int count_of(const char *csv, int tid, const char *fn) {
  char needle[128];
  snprintf(needle, sizeof needle, "\n%d,\"%s\",", tid, fn);
  const char *p = strstr(csv, needle);
  return p ? atoi(p + strlen(needle)) : 0;
}

TEST(samples_split_as_the_work_and_land_in_their_slices) {
  if (!perf_usable()) return;
  char want[16];
  snprintf(want, sizeof want, "%d", WANT);
  recorded r = record(NULL, want, "split.pftrace"); /* 1000 Hz */
  char trace[600]; /* path_in_tmp's buffers are reused */
  snprintf(trace, sizeof trace, "%s", path_in_tmp("split.pftrace"));
  char *out = tp_query(trace,
                       "select t.tid as tid, coalesce(s.name, '?') as fn, "
                       "count(*) as n " LEAF_JOINS
                       "group by 1, 2 order by 1, 2;\n");
  fprintf(stderr, "rounds %d, early %d, late %d; samples:\n%s", r.rounds,
          r.early, r.late, out);
  /* Each thread has its samples, split 70/30 within 10 points (how the
   * CPU is shared between the threads is the scheduler's: one may have
   * fewer than the other), and all of them within 5 points. */
  int tids[2] = {r.early, r.late};
  int total_a = 0, total = 0;
  for (int i = 0; i < 2; i++) {
    int a = count_of(out, tids[i], "burn_a");
    int b = count_of(out, tids[i], "burn_b");
    total_a += a;
    total += a + b;
    ASSERT_TRUE(a + b >= 50);
    int share_a = 1000 * a / (a + b);
    if (share_a < 600 || share_a > 800)
      FAIL("thread %d: burn_a %d, burn_b %d: %d per mille in burn_a",
           tids[i], a, b, share_a);
  }
  ASSERT_TRUE(total >= WANT * 9 / 10);
  int share = 1000 * total_a / total;
  if (share < 650 || share > 750)
    FAIL("burn_a %d of %d samples: %d per mille", total_a, total, share);
  free(out);

  /* Every sample in burn_a or burn_b is inside a slice of that name on its
   * thread, and its caller, unwound from the copy of the stack through
   * -O2 code without frame pointers, is run_round. */
  out = tp_query(
      trace,
      "select s.name as fn, count(*) as n, sum(exists(select 1 from slice sl "
      "join thread_track tt on sl.track_id = tt.id where tt.utid = p.utid "
      "and sl.name = s.name and p.ts >= sl.ts and p.ts <= sl.ts + sl.dur)) "
      "as inside, sum(s2.name = 'run_round') as caller_ok " LEAF_JOINS
      "left join stack_profile_callsite c2 on c2.id = cs.parent_id "
      "left join stack_profile_frame f2 on f2.id = c2.frame_id "
      "left join stack_profile_symbol s2 on s2.symbol_set_id = "
      "f2.symbol_set_id "
      "where s.name in ('burn_a', 'burn_b') group by 1 order by 1;\n");
  fprintf(stderr, "%s", out);
  const char *fns[2] = {"burn_a", "burn_b"};
  for (int i = 0; i < 2; i++) {
    char needle[64];
    snprintf(needle, sizeof needle, "\"%s\",", fns[i]);
    const char *p = strstr(out, needle);
    ASSERT_TRUE(p != NULL);
    int n, inside, caller_ok;
    ASSERT_EQ_INT(sscanf(p + strlen(needle), "%d,%d,%d", &n, &inside,
                         &caller_ok), 3);
    ASSERT_EQ_INT(inside, n);
    ASSERT_EQ_INT(caller_ok, n);
  }
  free(out);
  /* The sampler's own thread is named, and has no samples. */
  out = tp_query(trace, "select count(*) as n from perf_sample p join "
                        "thread t using (utid) where t.name = "
                        "'etch-sampler';\n");
  ASSERT_EQ_STR(out, "\"n\"\n0\n");
  free(out);
  out = tp_query(trace, "select count(*) as n from thread "
                        "where name = 'etch-sampler';\n");
  ASSERT_EQ_STR(out, "\"n\"\n1\n");
  free(out);
  /* trace_processor's common view of stack samples takes them too. */
  out = tp_query(trace, "select count(*) as n from perf_sample p "
                        "join stack_sample ss on ss.ts = p.ts "
                        "and ss.callsite_id = p.callsite_id;\n");
  ASSERT_TRUE(atoi(strchr(out, '\n') + 1) >= total);
  free(out);
  free(r.err);
}
#endif

/* A child made by fork() that calls etch_init() samples itself, in a
 * session of its own (the parent's sampler is not its own), and the
 * parent's samples are not disturbed: both processes' samples are in the
 * trace of the run. */
TEST(a_forked_child_that_records_samples_itself) {
  if (!perf_usable()) return;
#if defined(__SANITIZE_THREAD__)
  /* ThreadSanitizer's runtime refuses a thread started after the fork of
   * a process that has threads (the child's session starts its own): the
   * child dies with its exit code 66. Run in the other builds. */
  return;
#endif
  char arg[32];
  snprintf(arg, sizeof arg, "%d fork", WANT / 2);
  char cmd[3000];
  snprintf(cmd, sizeof cmd, "%s record -q --sample -o %s -- %s %s 2>%s",
           ETCH_BIN, path_in_tmp("fork.pftrace"), ETCH_SAMPLE_PROG, arg,
           path_in_tmp("record.err"));
  int st;
  char *out = run(cmd, &st);
  char *err = read_file(path_in_tmp("record.err"));
  if (st != 0) FAIL("%s: status %d\n%s%s", cmd, st, out, err);
  const char *c = strstr(out, "child ");
  ASSERT_TRUE(c != NULL);
  int child = 0, cst = -1;
  ASSERT_EQ_INT(sscanf(c, "child %d status %d", &child, &cst), 2);
  ASSERT_EQ_INT(cst, 0);
#ifdef ETCH_TP
  char *q = tp_query(path_in_tmp("fork.pftrace"),
                     "select 'p' as k, pr.pid as pid, "
                     "count(*) as n from perf_sample p join thread t "
                     "using (utid) join process pr using (upid) "
                     "group by pr.pid order by pr.pid;\n");
  fprintf(stderr, "%s", q);
  char needle[64];
  snprintf(needle, sizeof needle, ",%d,", child);
  const char *p = strstr(q, needle);
  ASSERT_TRUE(p != NULL);
  ASSERT_TRUE(atoi(p + strlen(needle)) >= WANT / 8);
  free(q);
#endif
  free(out);
  free(err);
}

/* A process where perf_event_open is refused: the slices are recorded, the
 * reason said once on stderr, and no sample is in the trace. */
TEST(refused_perf_records_the_rest_and_says_why) {
  recorded r = record("500", "refuse", "refused.pftrace");
  ASSERT_EQ_INT(r.rounds, 20);
  ASSERT_CONTAINS(r.err, "etch: recording without CPU samples: perf: cannot "
                         "sample process");
  const char *once = strstr(r.err, "recording without CPU samples");
  ASSERT_TRUE(strstr(once + 1, "recording without CPU samples") == NULL);
#ifdef ETCH_TP
  char *out = tp_query(path_in_tmp("refused.pftrace"),
                       "select (select count(*) from perf_sample) as samples, "
                       "(select count(*) from slice where name = 'burn_a') "
                       "as a, (select count(*) from slice where name = "
                       "'burn_b') as b;\n");
  ASSERT_CONTAINS(out, "\n0,20,20\n");
  free(out);
#endif
  free(r.err);
}

/* A bad rate is a usage error that names it. */
TEST(record_sample_rejects_a_bad_rate) {
  const char *bad[] = {"0", "abc", "100001", "-5", "10x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s record --sample=%s -o %s -- true 2>&1",
             ETCH_BIN, bad[i], path_in_tmp("bad.pftrace"));
    int st;
    char *out = run(cmd, &st);
    ASSERT_EQ_INT(st, 2);
    ASSERT_CONTAINS(out, "is not a rate from 1 to 100000");
    free(out);
  }
}

/*
 * record_test.c - nothing lost between a traced program and its trace file:
 * the duration timer against a quick exit, several processes of one run,
 * a program that changes directory, an unwritable ETCH_OUT, Ctrl-C,
 * SIGPIPE, abort() and _exit() under `etch record`, and what etch record
 * says.
 *
 * ETCH_BIN is the built etch binary, ETCH_RECORDEE tests/cli/recordee.c.
 * Traces are checked with `etch query` (exact counts of each slice name).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

extern char **environ;

typedef struct proc_result {
  int status; /* exit status, or 128 + signal */
  char *out, *err;
} proc_result;

static char *slurp(const char *path) {
  size_t len;
  char *s = (char *)etch_test_read_file(path, &len);
  if (!s) return strdup("");
  s = realloc(s, len + 1);
  s[len] = '\0';
  return s;
}

static pid_t spawn(const char *const *argv, bool own_group, int *n_run) {
  const char *dir = etch_test_tmpdir();
  char out_path[512], err_path[512];
  snprintf(out_path, sizeof out_path, "%s/stdout.%d", dir, *n_run);
  snprintf(err_path, sizeof err_path, "%s/stderr.%d", dir, *n_run);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path,
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path,
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (own_group) {
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  }
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, &attr, (char *const *)argv, environ) != 0)
    FAIL("cannot run %s", argv[0]);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return pid;
}

static proc_result finish(pid_t pid, int n_run) {
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  const char *dir = etch_test_tmpdir();
  char out_path[512], err_path[512];
  snprintf(out_path, sizeof out_path, "%s/stdout.%d", dir, n_run);
  snprintf(err_path, sizeof err_path, "%s/stderr.%d", dir, n_run);
  proc_result r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  return r;
}

static int n_runs;
static proc_result run(const char *const *argv) {
  int n = n_runs++;
  return finish(spawn(argv, false, &n), n);
}
#define RUN(...) run((const char *const[]){__VA_ARGS__, NULL})

static void done(proc_result *r) {
  free(r->out);
  free(r->err);
}

#define ASSERT_CONTAINS(hay, needle)                    \
  do {                                                  \
    if (!strstr((hay), (needle)))                       \
      FAIL("expected \"%s\" in:\n%s", (needle), (hay)); \
  } while (0)

/* "step,N\nwork,1\n" for a recordee run of N steps. */
static void assert_steps(const char *trace, int steps) {
  proc_result r = RUN(ETCH_BIN, "query", "--csv", trace,
                      "select name, count(*) from slice group by name "
                      "order by name");
  if (r.status != 0) FAIL("etch query %s: %s", trace, r.err);
  char want[128];
  snprintf(want, sizeof want, "name,count_star()\nstep,%d\nwork,1\n", steps);
  ASSERT_EQ_STR(r.out, want);
  done(&r);
}

/* In a trace of several processes: "PID:step count" of each process that
 * recorded steps, in pid order, one a line; every process's "work" slice
 * once. */
static void assert_steps_by_process(const char *trace, const char *want) {
  proc_result r = RUN(ETCH_BIN, "query", "--csv", trace,
                      "select p.pid, count(*) filter (where s.name = 'step'), "
                      "count(*) filter (where s.name = 'work') "
                      "from slice s join thread_track tt on s.track_id = tt.id "
                      "join thread t using (utid) join process p using (upid) "
                      "group by p.pid order by p.pid");
  if (r.status != 0) FAIL("etch query %s: %s", trace, r.err);
  /* Drop the header; each line "pid,steps,works". */
  const char *body = strchr(r.out, '\n');
  ASSERT_TRUE(body != NULL);
  char got[512] = "";
  for (const char *l = body + 1; *l;) {
    const char *e = strchr(l, '\n');
    if (!e) e = l + strlen(l);
    long pid = 0, steps = 0, works = 0;
    if (sscanf(l, "%ld,%ld,%ld", &pid, &steps, &works) != 3)
      FAIL("etch query said %s", r.out);
    ASSERT_EQ_INT((int)works, 1);
    snprintf(got + strlen(got), sizeof got - strlen(got), "%ld:%ld\n", pid,
             steps);
    l = *e ? e + 1 : e;
  }
  ASSERT_EQ_STR(got, want);
  done(&r);
}

/* The files in `dir` but for those starting with '.', sorted by name,
 * each on a line. */
static void dir_files(const char *dir, char *out, size_t cap) {
  struct dirent **list;
  int n = scandir(dir, &list, NULL, alphasort);
  out[0] = '\0';
  for (int i = 0; i < n; i++) {
    if (list[i]->d_name[0] != '.')
      snprintf(out + strlen(out), cap - strlen(out), "%s\n", list[i]->d_name);
    free(list[i]);
  }
  if (n >= 0) free(list);
}

static const char *tmp_path(const char *name) {
  static char buf[8][512];
  static int k;
  char *p = buf[k++ % 8];
  snprintf(p, 512, "%s/%s", etch_test_tmpdir(), name);
  return p;
}

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* The duration timer fires while the program is about to return: exit
 * waits for the write in progress (a 256 MiB ring makes it long). The
 * program returns as soon as it sees its session stopped, that is while the
 * timer's thread writes. The duration is the one time bound here: the 4
 * slices must be recorded before it ends, microseconds after etch_init;
 * 1 s leaves room for a loaded machine and TSan. */
TEST(duration_timer_then_quick_exit_keeps_the_trace) {
  for (int round = 0; round < 3; round++) {
    const char *trace = tmp_path("d.pftrace");
    unlink(trace);
    setenv("ETCH_OUT", trace, 1);
    setenv("ETCH_DURATION_MS", "1000", 1);
    setenv("ETCH_BUFFER_KB", "262144", 1);
    proc_result r = RUN(ETCH_RECORDEE, "4", "stopped");
    ASSERT_EQ_INT(r.status, 0);
    ASSERT_EQ_STR(r.err, "");
    if (!exists(trace)) FAIL("round %d: no trace written", round);
    done(&r);
    assert_steps(trace, 4);
  }
}

/* The pid after the n-th (from 0) `key` in text (0: none). */
static long pid_nth(const char *text, const char *key, int n) {
  const char *p = strstr(text, key);
  for (; p && n > 0; n--) p = strstr(p + 1, key);
  return p ? strtol(p + strlen(key), NULL, 10) : 0;
}
#define pid_after(text, key) pid_nth(text, key, 0)

/* Two processes of one run, one after the other: one trace holds both,
 * each process with its own events, and it is the only file; with
 * --per-process each keeps a file of its own, listed. */
TEST(record_keeps_every_process_in_one_trace) {
  char dir[600], trace[700], script[1024], files[1024];
  snprintf(dir, sizeof dir, "%s/multi", etch_test_tmpdir());
  mkdir(dir, 0700);
  snprintf(trace, sizeof trace, "%s/multi.pftrace", dir);
  snprintf(script, sizeof script, "%s 2 && %s 3", ETCH_RECORDEE,
           ETCH_RECORDEE);
  proc_result r = RUN(ETCH_BIN, "record", "-o", trace, "--", "/bin/sh", "-c",
                      script);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "");
  char want[800];
  snprintf(want, sizeof want, "trace: %s (", trace);
  ASSERT_CONTAINS(r.err, want);
  ASSERT_CONTAINS(r.err, "), 2 processes:\n  etch_cli_record, pid ");
  ASSERT_TRUE(strstr(r.err, "etch:") == NULL); /* no error or warning */
  long a = pid_after(r.err, "etch_cli_record, pid ");
  long b = pid_nth(r.err, "etch_cli_record, pid ", 1);
  ASSERT_TRUE(a > 0 && b > a);
  done(&r);
  dir_files(dir, files, sizeof files);
  ASSERT_EQ_STR(files, "multi.pftrace\n");
  char steps[128];
  snprintf(steps, sizeof steps, "%ld:2\n%ld:3\n", a, b);
  assert_steps_by_process(trace, steps);

  /* --per-process: the first keeps the name, the second writes
   * NAME.PID.pftrace. */
  unlink(trace);
  r = RUN(ETCH_BIN, "record", "--per-process", "-o", trace, "--", "/bin/sh",
          "-c", script);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.err, "2 processes wrote traces:\n");
  char first[800];
  snprintf(first, sizeof first, "  %s (", trace);
  ASSERT_CONTAINS(r.err, first);
  const char *second = strstr(r.err, "multi.");
  ASSERT_TRUE(second != NULL);
  second = strstr(second + 1, "multi.");
  ASSERT_TRUE(second != NULL);
  long pid = strtol(second + 6, NULL, 10);
  ASSERT_TRUE(pid > 0);
  char other[800];
  snprintf(other, sizeof other, "%s/multi.%ld.pftrace", dir, pid);
  ASSERT_CONTAINS(r.err, other);
  ASSERT_TRUE(strstr(r.err, "etch:") == NULL);
  done(&r);
  assert_steps(trace, 2);
  assert_steps(other, 3);
}

/* A forked child that never calls etch_init records nothing, and etch
 * record says so, naming it and its parent; one that calls etch_init
 * records on its own, into NAME.PID.pftrace, listed with the parent's. */
TEST(record_names_forked_children_and_traces_those_that_init) {
  const char *trace = tmp_path("forky.pftrace");
  proc_result r = RUN(ETCH_BIN, "record", "-o", trace, "--", ETCH_RECORDEE,
                      "2", "fork");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "");
  const char *line = strstr(r.err, "etch: etch_cli_record (pid ");
  if (!line) FAIL("no line for the forked child in:\n%s", r.err);
  long child = strtol(line + strlen("etch: etch_cli_record (pid "), NULL, 10);
  ASSERT_TRUE(child > 0);
  char want[512];
  snprintf(want, sizeof want,
           "etch: etch_cli_record (pid %ld), forked by pid ", child);
  ASSERT_CONTAINS(r.err, want);
  ASSERT_CONTAINS(r.err, ", exited without recording: a forked child records "
                         "nothing unless it calls etch_init() itself (see "
                         "docs/sdk.md)\n");
  char listed[600];
  snprintf(listed, sizeof listed, "trace: %s (", trace);
  ASSERT_CONTAINS(r.err, listed);
  done(&r);
  assert_steps(trace, 2);

  const char *trace2 = tmp_path("forky2.pftrace");
  r = RUN(ETCH_BIN, "record", "-o", trace2, "--", ETCH_RECORDEE, "2",
          "fork_init");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "");
  ASSERT_CONTAINS(r.err, "), 2 processes:\n");
  ASSERT_TRUE(strstr(r.err, "etch:") == NULL);
  long a = pid_after(r.err, "etch_cli_record, pid ");
  long b = pid_nth(r.err, "etch_cli_record, pid ", 1);
  ASSERT_TRUE(a > 0 && b > a); /* the parent, then its child */
  done(&r);
  char steps[128];
  snprintf(steps, sizeof steps, "%ld:2\n%ld:5\n", a, b);
  assert_steps_by_process(trace2, steps);
  char other[600];
  snprintf(other, sizeof other, "%s/forky2.%ld.pftrace", etch_test_tmpdir(), b);
  ASSERT_FALSE(exists(other));
}

/* Without etch record: two processes at once with one ETCH_OUT. The one
 * that finishes second finds the file written during its run and writes
 * its own name instead, saying so. */
TEST(concurrent_processes_one_out_never_overwrite) {
  const char *trace = tmp_path("both.pftrace");
  const char *ready = tmp_path("both-ready");
  const char *go = tmp_path("both-go");
  unlink(ready);
  unlink(go);
  setenv("ETCH_OUT", trace, 1);
  int na = n_runs++, nb = n_runs++;
  /* a records, then waits while b runs from start to end. */
  pid_t a = spawn((const char *const[]){ETCH_RECORDEE, "2", "handshake",
                                        ready, go, NULL},
                  false, &na);
  for (int i = 0; !exists(ready); i++) {
    if (i > 3000) FAIL("the first program never got ready");
    usleep(10000);
  }
  pid_t b = spawn((const char *const[]){ETCH_RECORDEE, "5", NULL}, false, &nb);
  proc_result rb = finish(b, nb);
  int fd = open(go, O_WRONLY | O_CREAT, 0644);
  if (fd < 0) FAIL("cannot create %s", go);
  close(fd);
  proc_result ra = finish(a, na);
  ASSERT_EQ_INT(ra.status, 0);
  ASSERT_EQ_INT(rb.status, 0);
  ASSERT_EQ_STR(rb.err, "");
  char other[600];
  snprintf(other, sizeof other, "%s/both.%ld.pftrace", etch_test_tmpdir(),
           (long)a);
  char want[2048];
  snprintf(want, sizeof want,
           "etch: %s was written by another process while this one (pid %ld) "
           "ran; its trace goes to %s\n",
           trace, (long)a, other);
  ASSERT_EQ_STR(ra.err, want);
  done(&ra);
  done(&rb);
  assert_steps(trace, 5);
  assert_steps(other, 2);
}

TEST(out_with_pid_pattern) {
  setenv("ETCH_OUT", tmp_path("p-%p.pftrace"), 1);
  int n = n_runs++;
  pid_t pid = spawn((const char *const[]){ETCH_RECORDEE, "3", NULL}, false, &n);
  proc_result r = finish(pid, n);
  ASSERT_EQ_INT(r.status, 0);
  done(&r);
  char want[600];
  snprintf(want, sizeof want, "%s/p-%ld.pftrace", etch_test_tmpdir(), (long)pid);
  assert_steps(want, 3);
}

/* A relative ETCH_OUT means the directory the program started tracing in,
 * whatever it does after. */
TEST(relative_out_resolved_at_init) {
  if (chdir(etch_test_tmpdir()) != 0) FAIL("chdir");
  mkdir("elsewhere", 0755);
  setenv("ETCH_OUT", "rel.pftrace", 1);
  proc_result r = RUN(ETCH_RECORDEE, "2", "chdir", "elsewhere");
  ASSERT_EQ_INT(r.status, 0);
  done(&r);
  ASSERT_FALSE(exists("elsewhere/rel.pftrace"));
  assert_steps(tmp_path("rel.pftrace"), 2);
}

/* A relative -o is relative to where etch record was started, even when
 * the program changes directory before it starts tracing; so are the run
 * directory in a relative $TMPDIR and --flight's files in it (the program
 * _exit()s: its trace comes from its flight file). */
TEST(record_relative_paths_follow_etch_record_not_the_program) {
  if (chdir(etch_test_tmpdir()) != 0) FAIL("chdir");
  mkdir("sub", 0755);
  char script[1024];
  snprintf(script, sizeof script, "cd sub && exec %s 2", ETCH_RECORDEE);
  proc_result r = RUN(ETCH_BIN, "record", "-q", "-o", "rel-cd.pftrace", "--",
                      "/bin/sh", "-c", script);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.err, "trace: rel-cd.pftrace (");
  done(&r);
  ASSERT_FALSE(exists("sub/rel-cd.pftrace"));
  assert_steps(tmp_path("rel-cd.pftrace"), 2);

  mkdir("runs", 0755);
  mkdir("sub/runs", 0755); /* where a relative run directory would go */
  setenv("TMPDIR", "runs", 1);
  snprintf(script, sizeof script, "cd sub && exec %s 3 _exit", ETCH_RECORDEE);
  r = RUN(ETCH_BIN, "record", "--flight", "-q", "-o", "rel-fl.pftrace", "--",
          "/bin/sh", "-c", script);
  unsetenv("TMPDIR");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.err, "did not write its trace; recovering it from its "
                         "flight file");
  ASSERT_CONTAINS(r.err, "trace: rel-fl.pftrace (");
  done(&r);
  ASSERT_FALSE(exists("sub/rel-fl.pftrace"));
  assert_steps(tmp_path("rel-fl.pftrace"), 3);
  /* Nothing left in either run directory. */
  DIR *d = opendir("sub/runs");
  ASSERT_TRUE(d != NULL);
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') FAIL("sub/runs/%s left", e->d_name);
  closedir(d);
  d = opendir("runs");
  ASSERT_TRUE(d != NULL);
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') FAIL("runs/%s left", e->d_name);
  closedir(d);
}

/* An important event logged once, then 0, 1 or 4 threads that start and
 * record an instant: etch query counts it once (the threads' first resets
 * replayed it, and it was counted twice), also in a ring that wrapped
 * (the original overwritten, a replay kept) and in a trace recovered from
 * a flight file (the program _exit()s). */
TEST(record_important_event_once_in_etch_query) {
  static const struct {
    const char *threads, *fill;
    bool ring, flight;
  } runs[] = {{"0", "0", false, false}, {"1", "0", false, false},
              {"4", "0", false, false}, {"4", "300000", true, false},
              {"4", "0", false, true}};
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    char name[32];
    snprintf(name, sizeof name, "imp-%zu.pftrace", i);
    const char *trace = tmp_path(name);
    proc_result r =
        runs[i].ring
            ? RUN(ETCH_BIN, "record", "-q", "--buffer", "16KB", "--ring", "-o",
                  trace, "--", ETCH_RECORDEE, "1", "important",
                  runs[i].threads, runs[i].fill)
        : runs[i].flight
            ? RUN(ETCH_BIN, "record", "-q", "--flight", "-o", trace, "--",
                  ETCH_RECORDEE, "1", "important", runs[i].threads,
                  runs[i].fill, "_exit")
            : RUN(ETCH_BIN, "record", "-q", "-o", trace, "--", ETCH_RECORDEE,
                  "1", "important", runs[i].threads, runs[i].fill);
    if (r.status != 0) FAIL("run %zu: %s", i, r.err);
    done(&r);
    r = RUN(ETCH_BIN, "query", "--csv", trace,
            "select count(*) filter (where name = 'Rec.Setting') as imp, "
            "count(*) filter (where name = 'tick') as ticks, "
            "cast(coalesce((select sum(value) from stats "
            "where name = 'traced_buf_chunks_overwritten'), 0) > 0 as int) "
            "as wrapped from slice");
    if (r.status != 0) FAIL("etch query %s: %s", trace, r.err);
    char want[64];
    if (runs[i].ring) /* the ticks may be overwritten */
      snprintf(want, sizeof want, "imp,ticks,wrapped\n1,");
    else
      snprintf(want, sizeof want, "imp,ticks,wrapped\n1,%s,0\n",
               runs[i].threads);
    if (strncmp(r.out, want, strlen(want)) != 0)
      FAIL("run %zu: got\n%s\nwant\n%s", i, r.out, want);
    if (runs[i].ring) ASSERT_CONTAINS(r.out, ",1\n");
    done(&r);
  }
  /* Two processes, each logging its own once (both number it 1): the one
   * trace etch record puts together has both. */
  const char *trace = tmp_path("imp-two.pftrace");
  char script[1024];
  snprintf(script, sizeof script, "%s 1 important 1 0 && %s 1 important 2 0",
           ETCH_RECORDEE, ETCH_RECORDEE);
  proc_result r = RUN(ETCH_BIN, "record", "-q", "-o", trace, "--", "/bin/sh",
                      "-c", script);
  if (r.status != 0) FAIL("two processes: %s", r.err);
  done(&r);
  r = RUN(ETCH_BIN, "query", "--csv", trace,
          "select count(*) filter (where s.name = 'Rec.Setting') as imp, "
          "count(distinct t.upid) filter (where s.name = 'Rec.Setting') "
          "as procs, count(*) filter (where s.name = 'tick') as ticks "
          "from slice s join thread_track tt on s.track_id = tt.id "
          "join thread t using (utid)");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "imp,procs,ticks\n2,2,3\n");
  done(&r);
}

/* An unwritable ETCH_OUT is reported when the program starts tracing. */
TEST(unwritable_out_reported_at_init) {
  setenv("ETCH_OUT", "/nonexistent-dir/t.pftrace", 1);
  proc_result r = RUN(ETCH_RECORDEE, "1");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.err,
                "etch: not tracing: cannot write trace to "
                "'/nonexistent-dir/t.pftrace': No such file or directory\n");
  done(&r);
  /* etch record says so before it runs the program (which would print
   * "ran"), and before it asks a service for a session. */
  r = RUN(ETCH_BIN, "record", "-o", "/nonexistent-dir/t.pftrace", "--",
          ETCH_RECORDEE, "1", "echo", "ran");
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_EQ_STR(r.err, "etch: cannot write trace to "
                       "'/nonexistent-dir/t.pftrace': No such file or "
                       "directory\n");
  ASSERT_EQ_STR(r.out, "");
  done(&r);
  r = RUN(ETCH_BIN, "record", "--system", "-o", "/nonexistent-dir/t.pftrace");
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_EQ_STR(r.err, "etch: cannot write trace to "
                       "'/nonexistent-dir/t.pftrace': No such file or "
                       "directory\n");
  done(&r);
  /* Not a regular file, and writable: fine, and left as it is. */
  r = RUN(ETCH_BIN, "record", "-q", "-o", "/dev/null", "--", ETCH_RECORDEE,
          "1");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_TRUE(strncmp(r.err, "trace: /dev/null (", 18) == 0);
  done(&r);
  struct stat sb;
  ASSERT_TRUE(stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode));
}

/* ETCH_CHANNELS naming nothing the program defines (a typo) is said at
 * exit, with the channels there are; what matches (a category here) is
 * taken as before, and the program records as usual. */
TEST(etch_channels_naming_nothing_is_said) {
  const char *trace = tmp_path("chan.pftrace");
  setenv("ETCH_OUT", trace, 1);
  setenv("ETCH_CHANNELS", "Typo, test,Nope*", 1);
  proc_result r = RUN(ETCH_RECORDEE, "2");
  unsetenv("ETCH_CHANNELS");
  unsetenv("ETCH_OUT");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.err,
                "etch: ETCH_CHANNELS: 'Typo' matched no channel or category "
                "of this program (it defines no channel)\n"
                "etch: ETCH_CHANNELS: 'Nope*' matched no channel or category "
                "of this program (it defines no channel)\n");
  done(&r);
  assert_steps(trace, 2);
}

/* etch record's messages say what happened, not a guess. */
TEST(record_says_what_happened) {
  const char *trace = tmp_path("w.pftrace");
  proc_result r = RUN(ETCH_BIN, "record", "-o", trace, "--", "/bin/true");
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.err, "no process of it started tracing");
  done(&r);
  r = RUN(ETCH_BIN, "record", "-o", trace, "-c", "", "--", ETCH_RECORDEE);
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "-c: an empty category list records nothing");
  done(&r);
  setenv("ETCH_CATEGORIES", "", 1);
  setenv("ETCH_OUT", trace, 1);
  r = RUN(ETCH_RECORDEE, "1");
  ASSERT_CONTAINS(r.err, "etch: not tracing: ETCH_CATEGORIES: ");
  ASSERT_CONTAINS(r.err, "records nothing");
  done(&r);
  unsetenv("ETCH_CATEGORIES");
  r = RUN(ETCH_BIN, "record", "-o", trace, "-c", "[", "--", ETCH_RECORDEE);
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.err, "did not trace: ETCH_CATEGORIES: ");
  done(&r);
  /* _exit(): nothing can write the trace; etch record names the process. */
  r = RUN(ETCH_BIN, "record", "-o", trace, "--", ETCH_RECORDEE, "2", "_exit");
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.err, "ended without writing its trace");
  ASSERT_CONTAINS(r.err, "wrote no trace (see above)");
  done(&r);
}

/* Ctrl-C: SIGINT to the foreground process group (etch and the program);
 * the program's libetch writes the trace, then dies of the signal. Sent by
 * kill() to the group, etch passes its copy on too: the program's libetch
 * knows that copy for the same signal, not a second Ctrl-C. */
TEST(ctrl_c_under_record_writes_the_trace) {
  const char *trace = tmp_path("int.pftrace");
  const char *ready = tmp_path("ready");
  int n = n_runs++;
  pid_t pid = spawn((const char *const[]){ETCH_BIN, "record", "-o", trace,
                                          "--", ETCH_RECORDEE, "7", "wait",
                                          ready, NULL},
                    true, &n);
  for (int i = 0; !exists(ready); i++) {
    if (i > 3000) FAIL("the program never got ready");
    usleep(10000);
  }
  kill(-pid, SIGINT);
  proc_result r = finish(pid, n);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.err, "was interrupted (SIGINT)");
  char want[600];
  snprintf(want, sizeof want, "trace: %s (", trace);
  ASSERT_CONTAINS(r.err, want);
  ASSERT_EQ_STR(r.out, "");
  done(&r);
  assert_steps(trace, 7);
}

/* The pid the recordee wrote into `ready` ("wait" mode), once it did. */
static long wait_ready(const char *ready) {
  for (int i = 0; !exists(ready); i++) {
    if (i > 3000) FAIL("the program never got ready");
    usleep(10000);
  }
  char *text = slurp(ready);
  long pid = strtol(text, NULL, 10);
  free(text);
  if (pid <= 0) FAIL("no pid in %s", ready);
  return pid;
}

/* --flight: a program killed with SIGKILL, or one that _exit()s, leaves
 * its ring in a flight file in etch record's run directory, and etch
 * record recovers its trace from it (it was lost before). */
TEST(record_flight_recovers_a_killed_program) {
  const char *trace = tmp_path("killed.pftrace");
  const char *ready = tmp_path("ready-killed");
  int n = n_runs++;
  pid_t pid = spawn((const char *const[]){ETCH_BIN, "record", "--flight", "-o",
                                          trace, "--", ETCH_RECORDEE, "9",
                                          "wait", ready, NULL},
                    true, &n);
  long child = wait_ready(ready);
  kill((pid_t)child, SIGKILL);
  proc_result r = finish(pid, n);
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.err, "was killed by signal 9 (Killed)");
  ASSERT_CONTAINS(r.err, "did not write its trace; recovering it from its "
                         "flight file");
  ASSERT_CONTAINS(r.err, "its trace is what its flight file held");
  char want[600];
  snprintf(want, sizeof want, "trace: %s (", trace);
  ASSERT_CONTAINS(r.err, want);
  done(&r);
  assert_steps(trace, 9);

  const char *trace2 = tmp_path("exited.pftrace");
  r = RUN(ETCH_BIN, "record", "--flight", "-q", "-o", trace2, "--",
          ETCH_RECORDEE, "3", "_exit");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.err, "did not write its trace; recovering it from its "
                         "flight file");
  done(&r);
  assert_steps(trace2, 3);

  r = RUN(ETCH_BIN, "record", "--flight", "--system", "-o", trace2);
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "--flight keeps the rings of a program etch record "
                         "runs itself");
  done(&r);
}

/* --write-period: the program writes its trace while it runs, so one
 * killed with SIGKILL leaves it up to its last write (here its flush). */
TEST(record_write_period_keeps_a_killed_programs_trace) {
  const char *trace = tmp_path("streamed.pftrace");
  const char *ready = tmp_path("ready-streamed");
  int n = n_runs++;
  pid_t pid = spawn((const char *const[]){ETCH_BIN, "record", "--write-period",
                                          "1h", "-o", trace, "--",
                                          ETCH_RECORDEE, "5000", "wait", ready,
                                          NULL},
                    true, &n);
  long child = wait_ready(ready);
  kill((pid_t)child, SIGKILL);
  proc_result r = finish(pid, n);
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.err, "was killed by signal 9 (Killed)");
  ASSERT_CONTAINS(r.err, "did not finish its trace: it holds what the "
                         "process wrote up to its last write (it wrote "
                         "every 3600000 ms)");
  done(&r);
  /* Its 5000 steps are there, and the work slice around them. */
  assert_steps(trace, 5000);

  /* A program that ends normally: the whole trace, stats and all (the
   * buffer holds the run: no write has to keep up with the program). */
  const char *trace2 = tmp_path("streamed2.pftrace");
  r = RUN(ETCH_BIN, "record", "--write-period", "10ms", "-q", "-o", trace2,
          "--", ETCH_RECORDEE, "20000");
  ASSERT_EQ_INT(r.status, 0);
  done(&r);
  assert_steps(trace2, 20000);

  r = RUN(ETCH_BIN, "record", "--write-period", "0", "-o", trace2, "--",
          ETCH_RECORDEE, "1");
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "'0' is not a duration from 1ms to 24h");
  done(&r);
  r = RUN(ETCH_BIN, "record", "--write-period", "1s", "--flight", "-o", trace2,
          "--", ETCH_RECORDEE, "1");
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "--write-period and --flight");
  done(&r);
  r = RUN(ETCH_BIN, "record", "--write-period", "1s", "--system", "-o", trace2);
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "--write-period writes the trace of a program");
  done(&r);
}

/* SIGTERM, SIGHUP or SIGINT sent to etch record alone (a supervisor, kill):
 * passed on to the program, which writes its trace and ends; etch reports
 * as for Ctrl-C. The program is not left running. */
TEST(signals_to_record_are_passed_on_to_the_program) {
  const int sigs[] = {SIGTERM, SIGHUP, SIGINT};
  const char *names[] = {"SIGTERM", "SIGHUP", "SIGINT"};
  for (int k = 0; k < 3; k++) {
    char tname[64], rname[64];
    snprintf(tname, sizeof tname, "pass%d.pftrace", k);
    snprintf(rname, sizeof rname, "ready-pass%d", k);
    const char *trace = tmp_path(tname);
    const char *ready = tmp_path(rname);
    unlink(ready);
    int n = n_runs++;
    pid_t pid = spawn((const char *const[]){ETCH_BIN, "record", "-o", trace,
                                            "--", ETCH_RECORDEE, "5", "wait",
                                            ready, NULL},
                      true, &n);
    long child = wait_ready(ready);
    kill(pid, sigs[k]);
    proc_result r = finish(pid, n);
    /* Whatever happened, no program is left running. */
    bool orphan = kill((pid_t)child, 0) == 0;
    if (orphan) kill((pid_t)child, SIGKILL);
    if (r.status != 0 || orphan)
      FAIL("%s: etch record ended with %d, the program %s; stderr:\n%s",
           names[k], r.status, orphan ? "still ran" : "ended", r.err);
    char want[1200];
    if (sigs[k] == SIGINT)
      snprintf(want, sizeof want,
               "etch: %s was interrupted (SIGINT)\ntrace: %s (",
               ETCH_RECORDEE, trace);
    else
      snprintf(want, sizeof want,
               "etch: %s ended by %s, which etch record received and passed "
               "on to it\ntrace: %s (",
               ETCH_RECORDEE, names[k], trace);
    if (strncmp(r.err, want, strlen(want)) != 0)
      FAIL("etch record said:\n%s\nwanted it to start with:\n%s", r.err,
           want);
    ASSERT_EQ_STR(r.out, "");
    done(&r);
    assert_steps(trace, 5);
  }
}

/* SIGTERM without etch record: the trace is written, and the process
 * still dies of SIGTERM. */
TEST(sigterm_writes_the_trace_and_still_terminates) {
  const char *trace = tmp_path("term.pftrace");
  const char *ready = tmp_path("ready-term");
  setenv("ETCH_OUT", trace, 1);
  int n = n_runs++;
  pid_t pid = spawn((const char *const[]){ETCH_RECORDEE, "4", "wait", ready,
                                          NULL},
                    false, &n);
  for (int i = 0; !exists(ready); i++) {
    if (i > 3000) FAIL("the program never got ready");
    usleep(10000);
  }
  kill(pid, SIGTERM);
  proc_result r = finish(pid, n);
  ASSERT_EQ_INT(r.status, 128 + SIGTERM);
  done(&r);
  assert_steps(trace, 4);
}

/* Runs argv with stdout a pipe whose reader is already gone, as in
 * `prog | head -2` once head has its lines: the first write raises
 * SIGPIPE. */
static proc_result run_into_closed_pipe(const char *const *argv) {
  int n = n_runs++;
  int p[2];
  if (pipe(p) != 0) FAIL("pipe");
  close(p[0]);
  char err_path[512];
  snprintf(err_path, sizeof err_path, "%s/stderr.%d", etch_test_tmpdir(), n);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_addclose(&fa, p[1]);
  posix_spawn_file_actions_addopen(&fa, 2, err_path,
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ) != 0)
    FAIL("cannot run %s", argv[0]);
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  return finish(pid, n);
}

/* SIGPIPE is how a program in a pipeline ends: its trace is written, the
 * process still dies of SIGPIPE, and the writes that keep failing while
 * the trace is written (each raising SIGPIPE again) do not lose it. */
TEST(sigpipe_writes_the_trace) {
  const char *trace = tmp_path("pipe.pftrace");
  unlink(trace);
  setenv("ETCH_OUT", trace, 1);
  proc_result r = run_into_closed_pipe(
      (const char *const[]){ETCH_RECORDEE, "5", "spew", NULL});
  unsetenv("ETCH_OUT");
  ASSERT_EQ_INT(r.status, 128 + SIGPIPE);
  ASSERT_EQ_STR(r.err, "");
  done(&r);
  assert_steps(trace, 5);

  /* Under etch record (whose own stdout is that pipe too): the trace is
   * listed and SIGPIPE named as what it is, not a failure. */
  const char *rtrace = tmp_path("pipe-rec.pftrace");
  r = run_into_closed_pipe((const char *const[]){
      ETCH_BIN, "record", "-q", "-o", rtrace, "--", ETCH_RECORDEE, "6",
      "spew", NULL});
  ASSERT_EQ_INT(r.status, 0);
  char want[1200];
  snprintf(want, sizeof want,
           "etch: %s ended by SIGPIPE (the reader of its output closed it)\n"
           "trace: %s (",
           ETCH_RECORDEE, rtrace);
  if (strncmp(r.err, want, strlen(want)) != 0)
    FAIL("etch record said:\n%s\nwanted it to start with:\n%s", r.err, want);
  ASSERT_TRUE(strstr(r.err, "lost") == NULL);
  done(&r);
  assert_steps(rtrace, 6);
}

/* A signal libetch does not catch: etch record names it as the reason the
 * trace is missing, not SIGKILL, _exit() or exec. */
TEST(record_names_the_uncaught_signal_that_lost_the_trace) {
  const char *trace = tmp_path("usr1.pftrace");
  proc_result r = RUN(ETCH_BIN, "record", "-o", trace, "--", ETCH_RECORDEE,
                      "2", "usr1");
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.err, "was killed by signal 10 (User defined signal 1)\n");
  ASSERT_CONTAINS(r.err, ") ended without writing its trace (it was killed "
                         "by signal 10 (User defined signal 1), which libetch "
                         "does not catch, or which the program handles "
                         "itself): its events are lost\n");
  ASSERT_TRUE(strstr(r.err, "_exit()") == NULL);
  done(&r);
}

/* abort(): best effort, and here it works: the trace is written. */
TEST(abort_under_record) {
  const char *trace = tmp_path("abort.pftrace");
  proc_result r = RUN(ETCH_BIN, "record", "-o", trace, "--", ETCH_RECORDEE,
                      "3", "abort");
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.err, "Aborted: writing the trace before the process dies");
  ASSERT_CONTAINS(r.err, "was killed by signal 6");
  done(&r);
  assert_steps(trace, 3);
}

/* The console: `etch record --console` prints every event on stderr as it
 * happens and still writes the trace; ETCH_CONSOLE alone prints without a
 * trace; a wrong value is named. */
static char *console_body(const char *out) {
  return etch_test_console_lines(out, "etch_cli_record/", true);
}

TEST(record_console_prints_events_as_they_happen) {
  const char *trace = tmp_path("console.pftrace");
  proc_result r = RUN(ETCH_BIN, "record", "--console", "-o", trace, "--",
                      ETCH_RECORDEE, "2");
  ASSERT_EQ_INT(r.status, 0);
  char *body = console_body(r.err);
  ASSERT_EQ_STR(body,
                "> work [test]\n"
                "  > step [test] i=0\n"
                "  < step\n"
                "  > step [test] i=1\n"
                "  < step\n"
                "< work\n");
  free(body);
  done(&r);
  assert_steps(trace, 2);

  setenv("ETCH_CONSOLE", "stdout", 1);
  setenv("NO_COLOR", "1", 1);
  unsetenv("ETCH_OUT");
  r = RUN(ETCH_RECORDEE, "1");
  ASSERT_EQ_INT(r.status, 0);
  body = console_body(r.out);
  ASSERT_EQ_STR(body, "> work [test]\n  > step [test] i=0\n  < step\n< work\n");
  ASSERT_TRUE(strchr(r.out, '\x1b') == NULL);
  free(body);
  done(&r);
  setenv("ETCH_CONSOLE", "loud", 1);
  r = RUN(ETCH_RECORDEE, "1");
  ASSERT_EQ_STR(r.err, "etch: not printing events: ETCH_CONSOLE=loud: "
                       "expected 1, stderr, stdout or fd:N\n");
  done(&r);
  unsetenv("ETCH_CONSOLE");
  unsetenv("NO_COLOR");
  r = RUN(ETCH_BIN, "record", "--console", "--system", "-o", trace);
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "--console prints the events of a program");
  done(&r);
}

/* Frames and bookmarks through etch stats, from the file (no database) and
 * from a database: frame k of 100 lasts k ms. */
static const char *section_of(const char *out, const char *title) {
  const char *p = strstr(out, title);
  if (!p) FAIL("no section '%s' in:\n%s", title, out);
  return p;
}

TEST(stats_lists_frames_and_bookmarks) {
  const char *trace = tmp_path("frames.pftrace");
  proc_result r =
      RUN(ETCH_BIN, "record", "-o", trace, "--", ETCH_RECORDEE, "1", "frames");
  ASSERT_EQ_INT(r.status, 0);
  done(&r);
  static const char frames[] =
      "frames (slices on the Frames track)\n"
      "  count      mean       p50       p95       p99      worst\n"
      "  -----  --------  --------  --------  --------  ---------\n"
      "    100  50.50 ms  50.00 ms  95.00 ms  99.00 ms  100.00 ms\n"
      "\n"
      "  worst frames      at   duration\n"
      "  ------------  ------  ---------\n"
      "          #100  4.95 s  100.00 ms\n"
      "           #99  4.85 s   99.00 ms\n"
      "           #98  4.75 s   98.00 ms\n"
      "           #97  4.66 s   97.00 ms\n"
      "           #96  4.56 s   96.00 ms\n"
      "\n"
      "bookmarks\n";
  const char *db = tmp_path("frames.sqlite");
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) {
      r = RUN(ETCH_BIN, "query", trace, "--db", db, "select 1");
      ASSERT_EQ_INT(r.status, 0);
      done(&r);
    }
    r = RUN(ETCH_BIN, "stats", pass ? db : trace);
    ASSERT_EQ_INT(r.status, 0);
    const char *f = section_of(r.out, "frames (");
    if (strncmp(f, frames, strlen(frames)) != 0)
      FAIL("pass %d: frames section:\n%.1200s\nwanted:\n%s", pass, f, frames);
    /* The bookmarks, in order, about 10 s after the first frame. */
    const char *b = section_of(f, "bookmarks\n");
    const char *o = strstr(b, "  Inventory.Open\n");
    const char *l = strstr(b, "  Level 3\n");
    const char *c = strstr(b, "  Inventory.Close\n");
    ASSERT_TRUE(o && l && c && o < l && l < c);
    ASSERT_TRUE(strstr(b, "  10.0") != NULL);
    done(&r);
  }
  r = RUN(ETCH_BIN, "stats", "--json", trace);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.out, "\"frames\":{\"count\":100,\"mean_ns\":50500000,"
                         "\"p50_ns\":50000000,\"p95_ns\":95000000,"
                         "\"p99_ns\":99000000,\"worst_ns\":100000000,"
                         "\"worst\":[{\"frame\":100,");
  ASSERT_CONTAINS(r.out, "\"name\":\"Level 3\"");
  done(&r);
}

/* Memory tracing of unmodified programs: the leaks of tests/cli/leaky.c,
 * exactly, and Debian's sort on a large input, whose output the preload
 * must not change. A sanitizer's runtime must be the first library of a
 * process, so a sanitized libetch_malloc.so cannot be preloaded into an
 * uninstrumented program: these run in the plain build only. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PRELOAD_OK 0
#else
#define PRELOAD_OK 1
#endif
static long field(const char *out, const char *key) {
  const char *p = strstr(out, key);
  if (!p) FAIL("no '%s' in:\n%s", key, out);
  return strtol(p + strlen(key), NULL, 10);
}

/* Two million allocations and frees as fast as the program can make them
 * (about 110 MB of events, far more than --malloc's 16 MiB buffer): with
 * the defaults the trace streams and a thread that finds the buffer full
 * waits for the write, so every allocation and free is there and leaks is
 * exact; the same with a 64 KiB buffer, where the program waits thousands
 * of times. The run in an 8 MiB ring that is written only at the end says
 * what it lost and exits 1 (--allow-loss: 0). */
static void assert_exact_flood(const char *trace, long n) {
  proc_result r = RUN(ETCH_BIN, "leaks", trace);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.err, "");
  ASSERT_CONTAINS(r.out, "  never freed  9 allocations, 6459 bytes\n");
  /* n + the 6012 of leaky itself (its fork's child has no session) */
  ASSERT_EQ_INT(field(r.out, "  allocations  "), n + 6012);
  ASSERT_EQ_INT(field(r.out, "  frees        "), n + 6003);
  ASSERT_TRUE(!strstr(r.out, "NOT EXACT"));
  done(&r);
}

TEST(record_malloc_keeps_every_allocation_of_a_busy_program) {
  if (!PRELOAD_OK) return;
  const char *trace = tmp_path("busy.pftrace");
  proc_result r = RUN(ETCH_BIN, "record", "-q", "--malloc", "-o", trace,
                      "--", ETCH_LEAKY, "2000000");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "leaky: done\n");
  ASSERT_TRUE(!strstr(r.err, "drop") && !strstr(r.err, "lost"));
  done(&r);
  assert_exact_flood(trace, 2000000);

  const char *tight = tmp_path("busy_tight.pftrace");
  r = RUN(ETCH_BIN, "record", "-q", "--malloc", "--buffer", "64KB", "-o",
          tight, "--", ETCH_LEAKY, "300000");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "leaky: done\n");
  ASSERT_TRUE(!strstr(r.err, "drop") && !strstr(r.err, "lost"));
  done(&r);
  assert_exact_flood(tight, 300000);

  const char *lossy = tmp_path("busy_ring.pftrace");
  setenv("ETCH_BUFFER_KB", "8192", 1);
  setenv("ETCH_FILL", "ring", 1);
  setenv("ETCH_WRITE_PERIOD_MS", "0", 1);
  r = RUN(ETCH_BIN, "record", "-q", "--malloc", "-o", lossy, "--",
          ETCH_LEAKY, "1000000");
  unsetenv("ETCH_BUFFER_KB");
  unsetenv("ETCH_FILL");
  unsetenv("ETCH_WRITE_PERIOD_MS");
  ASSERT_EQ_INT(r.status, 0);
  done(&r);
  r = RUN(ETCH_BIN, "leaks", lossy);
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.out, "\nNOT EXACT: the trace lost data\n"
                         "  traced_buf_chunks_overwritten ");
  ASSERT_CONTAINS(r.err, "lost data (traced_buf_chunks_overwritten ");
  ASSERT_CONTAINS(r.err, "the leak report is not exact\n");
  ASSERT_CONTAINS(r.err, "etch: leaks: exit status 1 because the trace lost "
                         "data (--allow-loss: 0)\n");
  done(&r);
  r = RUN(ETCH_BIN, "leaks", "--allow-loss", lossy);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.out, "\nNOT EXACT: the trace lost data\n");
  done(&r);
}

/* A shell runs the program: the shell claims the name first, then
 * _exit()s (dash) or execs the program; the trace the user named is the
 * program's, and the run did not fail. */
TEST(record_malloc_through_a_shell_keeps_the_name) {
  if (!PRELOAD_OK) return;
  const char *forms[] = {"; true", ""};
  for (int f = 0; f < 2; f++) {
    char dir[600], trace[700], script[1200];
    snprintf(dir, sizeof dir, "%s/shrun%d", etch_test_tmpdir(), f);
    mkdir(dir, 0700);
    snprintf(trace, sizeof trace, "%s/shrun.pftrace", dir);
    snprintf(script, sizeof script, "%s%s%s", f ? "exec " : "", ETCH_LEAKY,
             forms[f]);
    proc_result r = RUN(ETCH_BIN, "record", "-q", "--malloc", "-o", trace,
                        "--", "/bin/sh", "-c", script);
    ASSERT_EQ_INT(r.status, 0);
    ASSERT_EQ_STR(r.out, "leaky: done\n");
    char want[800];
    snprintf(want, sizeof want, "trace: %s (", trace);
    ASSERT_CONTAINS(r.err, want);
    done(&r);
    /* The named file is the program's trace, and the only one. */
    r = RUN(ETCH_BIN, "leaks", trace);
    ASSERT_EQ_INT(r.status, 0);
    ASSERT_CONTAINS(r.out, "  never freed  9 allocations, 6459 bytes\n");
    done(&r);
    DIR *d = opendir(dir);
    ASSERT_TRUE(d != NULL);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)))
      if (e->d_name[0] != '.') {
        files++;
        ASSERT_EQ_STR(e->d_name, "shrun.pftrace");
      }
    closedir(d);
    ASSERT_EQ_INT(files, 1);
  }
}

/* --buffer, --ring and --discard without --system are the program's own
 * session's (ETCH_BUFFER_KB, ETCH_FILL), over --malloc's defaults and the
 * environment; no service is asked for. env(1) under --malloc prints what
 * it was given. */
static bool has_line(const char *out, const char *line) {
  size_t n = strlen(line);
  for (const char *p = out; (p = strstr(p, line)) != NULL; p += n)
    if ((p == out || p[-1] == '\n') && (p[n] == '\n' || !p[n])) return true;
  return false;
}

TEST(record_buffer_options_size_the_programs_own_buffer) {
  if (!PRELOAD_OK) return;
  const char *trace = tmp_path("envbuf.pftrace");
  setenv("ETCH_FILL", "ring", 1); /* the option wins */
  proc_result r = RUN(ETCH_BIN, "record", "-q", "--malloc", "--buffer",
                      "256MB", "--discard", "-o", trace, "--", "/usr/bin/env");
  unsetenv("ETCH_FILL");
  ASSERT_EQ_INT(r.status, 0);
  if (!has_line(r.out, "ETCH_BUFFER_KB=262144") ||
      !has_line(r.out, "ETCH_FILL=discard"))
    FAIL("env saw:\n%s", r.out);
  char want[700];
  snprintf(want, sizeof want, "trace: %s (", trace);
  ASSERT_CONTAINS(r.err, want);
  done(&r);
  r = RUN(ETCH_BIN, "record", "-q", "--malloc", "--buffer", "16KB", "--ring",
          "-o", trace, "--", "/usr/bin/env");
  ASSERT_EQ_INT(r.status, 0);
  if (!has_line(r.out, "ETCH_BUFFER_KB=16") || !has_line(r.out, "ETCH_FILL=ring"))
    FAIL("env saw:\n%s", r.out);
  done(&r);
  /* --malloc alone: 16 MiB that stream uncompressed, and a full buffer
   * waits. */
  r = RUN(ETCH_BIN, "record", "-q", "--malloc", "-o", trace, "--",
          "/usr/bin/env");
  ASSERT_EQ_INT(r.status, 0);
  if (!has_line(r.out, "ETCH_BUFFER_KB=16384") ||
      !has_line(r.out, "ETCH_FILL=stall") ||
      !has_line(r.out, "ETCH_WRITE_PERIOD_MS=250") ||
      !has_line(r.out, "ETCH_COMPRESSION=none"))
    FAIL("env saw:\n%s", r.out);
  done(&r);
  /* --discard drops instead (still streaming); the environment's period
   * wins. */
  setenv("ETCH_WRITE_PERIOD_MS", "0", 1);
  r = RUN(ETCH_BIN, "record", "-q", "--malloc", "--discard", "-o", trace,
          "--", "/usr/bin/env");
  unsetenv("ETCH_WRITE_PERIOD_MS");
  ASSERT_EQ_INT(r.status, 0);
  if (!has_line(r.out, "ETCH_FILL=discard") ||
      !has_line(r.out, "ETCH_WRITE_PERIOD_MS=0"))
    FAIL("env saw:\n%s", r.out);
  done(&r);
  /* A size the program's session cannot take. */
  r = RUN(ETCH_BIN, "record", "--buffer", "8KB", "-o", trace, "--",
          ETCH_RECORDEE);
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "etch: --buffer: the program's buffer is 16KB to 4GB "
                         "(a larger one needs --system)\n");
  done(&r);
}

/* --discard without --system and without a service: the program records
 * in its own buffer, keeping the first events. */
TEST(record_discard_without_a_service_records_in_process) {
  const char *trace = tmp_path("discard.pftrace");
  setenv("PERFETTO_CONSUMER_SOCK_NAME", "/nonexistent/etch-no-service", 1);
  proc_result r = RUN(ETCH_BIN, "record", "-q", "--discard", "-o", trace,
                      "--", ETCH_RECORDEE, "3");
  unsetenv("PERFETTO_CONSUMER_SOCK_NAME");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "");
  done(&r);
  assert_steps(trace, 3);
}

TEST(record_malloc_reports_the_leaks_of_an_unmodified_program) {
  if (!PRELOAD_OK) return;
  const char *trace = tmp_path("leaky.pftrace");
  proc_result r = RUN(ETCH_BIN, "record", "--malloc", "-o", trace, "--",
                      ETCH_LEAKY);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "leaky: done\n"); /* the program's, and only it */
  done(&r);
  r = RUN(ETCH_BIN, "leaks", trace);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.out,
                  "never freed, by tag and size\n"
                  "  tag       size  count  bytes\n"
                  "  --------  ----  -----  -----\n"
                  "  untagged  3000      2   6000\n"
                  "  untagged   100      3    300\n"
                  "  untagged    64      1     64\n"
                  "  untagged    48      1     48\n"
                  "  untagged    40      1     40\n"
                  "  untagged     7      1      7\n");
  ASSERT_CONTAINS(r.out, "  never freed  9 allocations, 6459 bytes\n");
  /* Every allocation of the run is freed or listed; the loop's 6000
   * allocations and frees are all there (and the fork's child, which has
   * no session, added nothing). */
  long allocs = field(r.out, "  allocations  ");
  long frees = field(r.out, "  frees        ");
  ASSERT_EQ_INT((int)(allocs - frees), 9);
  ASSERT_TRUE(frees >= 6002);
  done(&r);
  /* A buffer too small for the run: the program works the same, the
   * trace says what it lost. */
  setenv("ETCH_BUFFER_KB", "16", 1);
  setenv("ETCH_FILL", "discard", 1);
  setenv("ETCH_WRITE_PERIOD_MS", "0", 1);
  r = RUN(ETCH_BIN, "record", "--malloc", "-o", tmp_path("small.pftrace"),
          "--", ETCH_LEAKY);
  unsetenv("ETCH_BUFFER_KB");
  unsetenv("ETCH_FILL");
  unsetenv("ETCH_WRITE_PERIOD_MS");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "leaky: done\n");
  ASSERT_CONTAINS(r.err, "dropped");
  done(&r);
  /* --top, and errors. */
  r = RUN(ETCH_BIN, "leaks", "--top", "2", trace);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.out, "   100      3    300\n  ... and 4 more groups\n");
  done(&r);
  r = RUN(ETCH_BIN, "leaks", tmp_path("missing.pftrace"));
  ASSERT_EQ_INT(r.status, 1);
  done(&r);
  r = RUN(ETCH_BIN, "record", "--malloc", "--system", "-o", trace);
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "--malloc traces the allocations of a program");
  done(&r);
}

TEST(record_malloc_leaves_sort_working) {
  if (!PRELOAD_OK) return;
  const char *in = tmp_path("sort.in");
  FILE *f = fopen(in, "w");
  ASSERT_TRUE(f != NULL);
  unsigned x = 12345;
  for (int i = 0; i < 200000; i++) {
    x = x * 1103515245u + 12345u;
    fprintf(f, "line %u %d\n", x >> 8, i);
  }
  fclose(f);
  const char *plain = tmp_path("sort.plain"), *traced = tmp_path("sort.traced");
  const char *trace = tmp_path("sort.pftrace");
  proc_result r = RUN("/usr/bin/sort", "-o", plain, in);
  ASSERT_EQ_INT(r.status, 0);
  done(&r);
  /* sort does not call etch_init: the preload starts tracing itself. */
  r = RUN(ETCH_BIN, "record", "--malloc", "-o", trace, "--", "/usr/bin/sort",
          "-o", traced, in);
  ASSERT_EQ_INT(r.status, 0);
  done(&r);
  char *a = slurp(plain), *b = slurp(traced);
  ASSERT_TRUE(strlen(a) > 1000000);
  ASSERT_TRUE(strcmp(a, b) == 0);
  free(a);
  free(b);
  r = RUN(ETCH_BIN, "leaks", trace);
  ASSERT_EQ_INT(r.status, 0);
  long allocs = field(r.out, "  allocations  ");
  long frees = field(r.out, "  frees        ");
  long never = field(r.out, "  never freed  ");
  ASSERT_TRUE(allocs >= 10);
  ASSERT_EQ_INT((int)(allocs - frees), (int)never);
  done(&r);
}

/* C++: operator new and delete of an unmodified program. */
TEST(record_malloc_traces_cxx_new_and_delete) {
  if (!PRELOAD_OK) return;
  const char *trace = tmp_path("leaky_cxx.pftrace");
  proc_result r = RUN(ETCH_BIN, "record", "--malloc", "-o", trace, "--",
                      ETCH_LEAKY_CXX);
  ASSERT_EQ_INT(r.status, 0);
  done(&r);
  r = RUN(ETCH_BIN, "leaks", "--top", "0", trace);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.out,
                  "never freed, by tag and size\n"
                  "  tag       size  count  bytes\n"
                  "  --------  ----  -----  -----\n"
                  "  untagged   123      2    246\n"
                  "  untagged    40      1     40\n");
  ASSERT_CONTAINS(r.out, "  never freed  3 allocations, 286 bytes\n");
  long allocs = field(r.out, "  allocations  ");
  long frees = field(r.out, "  frees        ");
  long never = field(r.out, "  never freed  ");
  ASSERT_EQ_INT((int)(allocs - frees), (int)never);
  /* 500 arrays and at least 1000 vector buffers, all freed. */
  ASSERT_TRUE(frees >= 1500);
  done(&r);
}

/* ---- a full disk ---- */

/* A program under etch record whose trace does not fit on the disk (a
 * file size limit: EFBIG, as ENOSPC or EDQUOT; SIGXFSZ ignored): the
 * trace is kept to its last whole packet, etch record says what happened
 * and exits 1, and the file reads. (The trace was lost, and etch record
 * said only that the program wrote none.) */
TEST(record_on_a_full_disk_keeps_whole_packets) {
  const char *out = tmp_path("full.pftrace");
  struct rlimit old, rl;
  ASSERT_EQ_INT(getrlimit(RLIMIT_FSIZE, &old), 0);
  rl = old;
  rl.rlim_cur = 32768;
  signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ_INT(setrlimit(RLIMIT_FSIZE, &rl), 0);
  /* Uncompressed: each record is one packet. Compressed, the first record
   * is a batch of 29-31 KiB, as the timestamps let it compress, and one
   * run in eight under ThreadSanitizer on a busy machine made it larger
   * than the limit: no whole record, no file. */
  setenv("ETCH_COMPRESSION", "none", 1);
  proc_result r = RUN(ETCH_BIN, "record", "-q", "-o", out, "--",
                      ETCH_RECORDEE, "20000");
  unsetenv("ETCH_COMPRESSION");
  ASSERT_EQ_INT(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, SIG_DFL);
  ASSERT_EQ_INT(r.status, 1);
  struct stat st;
  ASSERT_TRUE(stat(out, &st) == 0);
  ASSERT_TRUE(st.st_size > 0 && st.st_size <= 32768);
  char want[1024];
  snprintf(want, sizeof want,
           "could not write all of its trace: cannot write all of the trace "
           "to '%s': File too large; it ends at its last whole packet (%lld "
           "of ",
           out, (long long)st.st_size);
  ASSERT_CONTAINS(r.err, want);
  done(&r);
  /* Whole packets: etch reads it, with some of the steps. */
  r = RUN(ETCH_BIN, "stats", out);
  if (r.status != 0) FAIL("etch stats: %s", r.err);
  done(&r);
  r = RUN(ETCH_BIN, "query", "--csv", out,
          "select count(*) > 0 from slice where name = 'step'");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "(count_star() > 0)\n1\n");
  done(&r);
}

/* The command a new user ran: tar, which runs gzip through a shell that
 * _exit()s, under --malloc. One trace of tar and gzip, no other file, exit
 * 0, and the shell named as a warning (its own events went with it). */
TEST(record_a_program_whose_child_execs_another_is_one_trace) {
  if (!PRELOAD_OK) return;
  if (access("/bin/tar", X_OK) != 0 || access("/bin/gzip", X_OK) != 0) return;
  char dir[600], trace[700], files[1024];
  snprintf(dir, sizeof dir, "%s/tarrun", etch_test_tmpdir());
  mkdir(dir, 0700);
  snprintf(trace, sizeof trace, "%s/t.pftrace", dir);
  unlink(trace);
  char sub[700], tgz[700];
  snprintf(sub, sizeof sub, "%s/in", etch_test_tmpdir());
  mkdir(sub, 0700);
  snprintf(tgz, sizeof tgz, "%s/x.tgz", etch_test_tmpdir());
  proc_result r = RUN(ETCH_BIN, "record", "-q", "--malloc", "-o", trace, "--",
                      "/bin/tar", "czf", tgz, "-C", sub, ".");
  if (r.status != 0) FAIL("etch record said:\n%s", r.err);
  ASSERT_CONTAINS(r.err, "processes:\n  tar, pid ");
  ASSERT_CONTAINS(r.err, "  gzip, pid ");
  ASSERT_TRUE(strstr(r.err, "etch: warning: ") == NULL ||
              strstr(r.err, "its own events are not in the trace\n"));
  ASSERT_TRUE(strstr(r.err, "lost") == NULL);
  long tar = pid_after(r.err, "  tar, pid ");
  long gz = pid_after(r.err, "  gzip, pid ");
  ASSERT_TRUE(tar > 0 && gz > 0);
  done(&r);
  dir_files(dir, files, sizeof files);
  ASSERT_EQ_STR(files, "t.pftrace\n");
  /* Both processes in the one trace, under their names. */
  r = RUN(ETCH_BIN, "query", "--csv", trace,
          "select pid, name from process order by pid");
  ASSERT_EQ_INT(r.status, 0);
  char want[256];
  snprintf(want, sizeof want, "%ld,tar\n", tar);
  ASSERT_CONTAINS(r.out, want);
  /* gzip records its process only if it allocates at all (it keeps to
   * static buffers); when it does, it is under its own pid. */
  snprintf(want, sizeof want, ",gzip\n");
  if (strstr(r.out, want)) {
    snprintf(want, sizeof want, "%ld,gzip\n", gz);
    ASSERT_CONTAINS(r.out, want);
  }
  done(&r);
}

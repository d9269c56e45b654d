/*
 * fork_test.c - a child made by fork() without exec records its own
 * allocations (etch record --malloc, libetch_malloc.so): fork_prog.c's
 * child starts a session of its own, and etch record merges its trace
 * with the parent's, each process's allocations under its own pid, on the
 * child's thread too, with their call stacks. Blocks the child inherited
 * are not its own: freeing one writes nothing.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PRELOAD_OK 0 /* a sanitized preload cannot go first */
#else
#define PRELOAD_OK 1
#endif

/* Runs a shell command line; its standard output. */
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

/* The row of function `fn` in the "never freed" section, its runs of
 * spaces made one, from after the function's line number ("" when none). */
static void leak_row(const char *out, const char *fn, char *row, size_t n) {
  row[0] = 0;
  const char *sec = strstr(out, "never freed, by call site");
  if (!sec) return;
  const char *end = strstr(sec, "\n\n");
  char want[200];
  snprintf(want, sizeof want, "\n  %s ", fn);
  const char *at = strstr(sec, want);
  if (!at || (end && at > end)) return;
  at += strlen(want);
  while (*at == ' ') at++;
  if (strncmp(at, "fork_prog.c:", 12)) return;
  at += 12;
  while (*at >= '0' && *at <= '9') at++;
  size_t k = 0;
  for (; *at && *at != '\n' && k + 1 < n; at++)
    if (*at != ' ' || (k && row[k - 1] != ' ')) row[k++] = *at;
  row[k] = 0;
}

static void assert_leak(const char *out, const char *fn, const char *rest) {
  char row[2000];
  leak_row(out, fn, row, sizeof row);
  if (strncmp(row, rest, strlen(rest)))
    FAIL("expected %s's row to go on \"%s\", found \"%s\" in:\n%s", fn, rest,
         row, out);
}

static char *leaks_of(const char *path) {
  char cmd[1400];
  snprintf(cmd, sizeof cmd, "%s leaks --top 0 %s", ETCH_BIN, path);
  int st;
  char *out = run(cmd, &st);
  ASSERT_EQ_INT(st, 0);
  if (strstr(out, "NOT EXACT")) FAIL("%s: not exact:\n%s", path, out);
  return out;
}

TEST(a_fork_child_records_its_own_allocations) {
  if (!PRELOAD_OK) return;
  const char *dir = etch_test_tmpdir();
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "%s record -q --malloc -o %s/fork.pftrace -- %s 2>%s/record.err",
           ETCH_BIN, dir, ETCH_FORK_PROG, dir);
  int st;
  char *out = run(cmd, &st);
  ASSERT_EQ_INT(st, 0);
  long child = 0;
  char done[64] = "";
  ASSERT_EQ_INT(sscanf(out, "%ld\n%63[^\n]", &child, done), 2);
  ASSERT_EQ_STR(done, "fork_prog: done");
  free(out);

  /* One trace of both processes (etch record merges them), each
   * process's allocations its own: the known sizes by process, in order. */
  char path[700];
  snprintf(path, sizeof path, "%s/fork.pftrace", dir);
  snprintf(cmd, sizeof cmd,
           "%s query --csv %s \"select p.pid = %ld as child, "
           "string_agg(cast(a.int_value as varchar), ',' order by s.ts) sizes "
           "from slice s join thread_track tt on s.track_id = tt.id "
           "join thread t using(utid) join process p using(upid) "
           "join args a on a.arg_set_id = s.arg_set_id "
           "and a.key = 'debug.size' "
           "where a.int_value in (222, 333, 555, 777, 4444) "
           "group by 1 order by 1\"",
           ETCH_BIN, path, child);
  out = run(cmd, &st);
  ASSERT_EQ_INT(st, 0);
  ASSERT_EQ_STR(out, "child,sizes\n"
                     "0,\"222,222,4444,777\"\n"
                     "1,\"333,333,333,555,555\"\n");
  free(out);

  /* Each process's live bytes end at what it allocated (neither frees a
   * block of its own): the child's do not start at what it inherited. */
  snprintf(cmd, sizeof cmd,
           "%s query --csv %s \"with a as (select t.upid, "
           "sum(a.int_value) bytes from slice s "
           "join thread_track tt on s.track_id = tt.id "
           "join thread t using(utid) join args a "
           "on a.arg_set_id = s.arg_set_id and a.key = 'debug.size' "
           "group by 1), l as (select t.upid, arg_max(c.value, c.ts) live "
           "from counter c join process_counter_track t "
           "on c.track_id = t.id group by 1) "
           "select p.pid = %ld as child, cast(l.live as bigint) - a.bytes "
           "as diff from a join l using(upid) join process p using(upid) "
           "order by 1\"",
           ETCH_BIN, path, child);
  out = run(cmd, &st);
  ASSERT_EQ_INT(st, 0);
  ASSERT_EQ_STR(out, "child,diff\n0,0\n1,0\n");
  free(out);

  /* By call site: the child's own, on its thread too; the 4444-byte
   * block the child inherited and freed is the parent's, never freed. */
  char *leaks = leaks_of(path);
  assert_leak(leaks, "parent_leak", "2 444 main <");
  assert_leak(leaks, "parent_late", "1 777 main <");
  assert_leak(leaks, "child_leak", "3 999 main <");
  assert_leak(leaks, "child_thread_leak", "2 1110 child_thread <");
  assert_leak(leaks, "main", "1 4444 ");
  free(leaks);
}

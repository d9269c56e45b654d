/*
 * query_live_cli_test.c - `etch query` on a trace being recorded, a
 * process each time (cache.c's cache of a recording): between appends to
 * a file whose writer holds its lock, each query's results equal those of
 * the same bytes read cold (--no-cache), and its etch_live row says it read
 * only what was appended since the query before; the first query after
 * the writer let go is the cold import's too, and the next one is served
 * from the trace's ordinary cache; two queries at once both answer right.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "trace_build.h"

extern char **environ;

enum { B = 1, E = 2, I = 3 };
enum { kProc = 100, kMain = 101, kWorker = 102, kBytes = 104 };

static char g_cache[512];

static char *slurp(const char *path) {
  size_t len;
  char *s = (char *)etch_test_read_file(path, &len);
  if (!s) return strdup("");
  s = realloc(s, len + 1);
  s[len] = '\0';
  return s;
}

/* `etch query ARGS...` started, its output into files named after `tag`. */
static pid_t start(const char *tag, const char *const *args) {
  char out[600], err[600];
  snprintf(out, sizeof out, "%s/%s.out", etch_test_tmpdir(), tag);
  snprintf(err, sizeof err, "%s/%s.err", etch_test_tmpdir(), tag);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  char *argv[16];
  int n = 0;
  argv[n++] = (char *)ETCH_BIN;
  argv[n++] = (char *)"query";
  argv[n++] = (char *)"--csv";
  for (int i = 0; args[i] && n < 15; i++) argv[n++] = (char *)args[i];
  argv[n] = NULL;
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) != 0)
    FAIL("cannot run %s", argv[0]);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

/* Its stdout, after checking it exited 0. */
static char *finish(pid_t pid, const char *tag) {
  int st;
  ASSERT_EQ_INT((int)waitpid(pid, &st, 0), (int)pid);
  char out[600], err[600];
  snprintf(out, sizeof out, "%s/%s.out", etch_test_tmpdir(), tag);
  snprintf(err, sizeof err, "%s/%s.err", etch_test_tmpdir(), tag);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    char *e = slurp(err);
    FAIL("etch query (%s) failed: %s", tag, e);
  }
  char *e = slurp(err);
  if (*e) fprintf(stderr, "  etch query (%s) said: %s", tag, e);
  free(e);
  return slurp(out);
}

static char *query(const char *tag, const char *const *args) {
  return finish(start(tag, args), tag);
}

/* Every table, sorted. */
static const char kAll[] =
    "SELECT 'slice', * FROM (SELECT * FROM slice ORDER BY ALL);"
    "SELECT 'track', * FROM (SELECT * FROM track ORDER BY ALL);"
    "SELECT 'thread', * FROM (SELECT * FROM thread ORDER BY ALL);"
    "SELECT 'process', * FROM (SELECT * FROM process ORDER BY ALL);"
    "SELECT 'counter', * FROM (SELECT * FROM counter ORDER BY ALL);"
    "SELECT 'flow', * FROM (SELECT * FROM flow ORDER BY ALL);"
    "SELECT 'args', * FROM (SELECT * EXCLUDE (id) FROM args ORDER BY ALL);"
    "SELECT 'stats', * FROM (SELECT * FROM stats ORDER BY ALL);"
    "SELECT 'bounds', * FROM trace_bounds;";

/* A query of the recording equal to the same bytes read cold; returns
 * its etch_live row's read_from and read_to. */
static void same_as_cold(const char *path, const char *tag, uint64_t *from,
                         uint64_t *to) {
  char sql[sizeof kAll + 128];
  snprintf(sql, sizeof sql,
           "SELECT read_from, read_to FROM etch_live; %s", kAll);
  char *got = query(tag, (const char *const[]){path, sql, NULL});
  char *want = query("cold", (const char *const[]){"--no-cache", path, kAll,
                                                   NULL});
  /* The first lines are etch_live's. */
  char *nl = strchr(got, '\n');
  ASSERT_TRUE(nl != NULL);
  nl = strchr(nl + 1, '\n');
  ASSERT_TRUE(nl != NULL);
  ASSERT_TRUE(sscanf(strchr(got, '\n') + 1, "%" SCNu64 ",%" SCNu64, from,
                     to) == 2);
  if (strcmp(nl + 1, want) != 0)
    FAIL("%s\n--- cold ---\n%s--- recording's cache ---\n%s", tag, want,
         nl + 1);
  free(got);
  free(want);
}

static void trace(tb *t) {
  tb_process(t, 1, kProc, 10, "app");
  tb_thread(t, 1, kMain, 10, 10, "main");
  tb_thread(t, 2, kWorker, 10, 11, "worker");
  tb_counter_track(t, 1, kBytes, kProc, "bytes", 3);
  tb_event(t, 1, 1100, kMain, B, "app", "frame");
  for (int i = 0; i < 8; i++) {
    int64_t ts = 1200 + 100 * i;
    tb_event(t, 1, ts, kMain, B, "app", "step");
    tb_event_open(t, 2, ts + 10, kWorker, B, "app", "job");
    tb_u(t, 47 /* flow_ids */, 500 + (uint64_t)i);
    tb_event_close(t);
    tb_counter(t, 1, ts + 20, kBytes, 64 * (i + 1));
    tb_event(t, 2, ts + 30, kWorker, I, "app", "tick");
    tb_event_open(t, 1, ts + 40, kMain, E, NULL, NULL);
    tb_u(t, 48 /* terminating_flow_ids */, 500 + (uint64_t)i);
    tb_event_close(t);
    tb_event(t, 2, ts + 50, kWorker, E, NULL, NULL);
  }
  tb_event(t, 1, 2000, kMain, E, NULL, NULL);
  tb_event(t, 2, 2100, kWorker, B, "app", "left open");
}

/* The databases in the cache whose names start with prefix; with `any`,
 * every file so named (locks and the rest). */
static int count_names(const char *prefix, bool any) {
  DIR *d = opendir(g_cache);
  ASSERT_TRUE(d != NULL);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (!strncmp(e->d_name, prefix, strlen(prefix)) &&
        (any || (strstr(e->d_name, ".duckdb") &&
                 !strcmp(strstr(e->d_name, ".duckdb"), ".duckdb"))))
      n++;
  closedir(d);
  return n;
}

static int count_files(const char *prefix) {
  return count_names(prefix, false);
}

TEST(query_live_reads_only_what_was_appended) {
  snprintf(g_cache, sizeof g_cache, "%s/cache", etch_test_tmpdir());
  setenv("ETCH_CACHE_DIR", g_cache, 1);
  tb t;
  tb_init(&t);
  trace(&t);
  char path[512];
  snprintf(path, sizeof path, "%s/rec.pftrace", etch_test_tmpdir());
  int w = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(w >= 0);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  ASSERT_EQ_INT(fcntl(w, F_OFD_SETLK, &fl), 0);
  uint64_t last = 0;
  size_t piece = t.len / 7 + 1;
  for (size_t at = 0; at < t.len;) {
    size_t n = t.len - at < piece ? t.len - at : piece;
    ASSERT_EQ_INT((int)write(w, t.data + at, n), (int)n);
    at += n;
    uint64_t from, to;
    same_as_cold(path, "step", &from, &to);
    /* Only what was appended since the last query. */
    ASSERT_EQ_INT((int)from, (int)last);
    ASSERT_TRUE(to >= last && to <= at);
    last = to;
  }
  ASSERT_EQ_INT((int)last, (int)t.len);
  /* Two at once, on more appended: both right (one waits for the
   * other). */
  tb more;
  tb_init(&more);
  tb_event(&more, 1, 2200, kMain, I, "app", "late");
  ASSERT_EQ_INT((int)write(w, more.data, more.len), (int)more.len);
  char sql[] = "SELECT count(*) FROM slice";
  pid_t a = start("a", (const char *const[]){path, sql, NULL});
  pid_t b = start("b", (const char *const[]){path, sql, NULL});
  char *ra = finish(a, "a"), *rb = finish(b, "b");
  char *rc = query("cold", (const char *const[]){"--no-cache", path, sql,
                                                 NULL});
  ASSERT_EQ_STR(ra, rc);
  ASSERT_EQ_STR(rb, rc);
  free(ra);
  free(rb);
  free(rc);
  ASSERT_EQ_INT(count_files("live-"), 1);
  /* The writer gone: the next query reads what is left (nothing) and the
   * cache becomes the trace's ordinary one. */
  close(w);
  uint64_t from, to;
  same_as_cold(path, "ended", &from, &to);
  ASSERT_EQ_INT((int)from, (int)(t.len + more.len));
  ASSERT_EQ_INT((int)to, (int)(t.len + more.len));
  ASSERT_EQ_INT(count_files("live-"), 0);
  ASSERT_EQ_INT(count_files(""), 1);
  /* Nothing of the recording's cache is left, its lock neither. */
  ASSERT_EQ_INT(count_names("live-", true), 0);
  /* Served from it: the ordinary cache's key is there. */
  char *k = query("cached", (const char *const[]){
                                path, "SELECT count(*) FROM etch_cache", NULL});
  ASSERT_EQ_STR(k, "count_star()\n1\n");
  free(k);
  tb_free(&more);
  tb_free(&t);
}

/* A recording replaced by another file of the same name: read again. */
TEST(query_live_file_replaced) {
  snprintf(g_cache, sizeof g_cache, "%s/cache2", etch_test_tmpdir());
  setenv("ETCH_CACHE_DIR", g_cache, 1);
  tb t;
  tb_init(&t);
  trace(&t);
  char path[512];
  snprintf(path, sizeof path, "%s/rec2.pftrace", etch_test_tmpdir());
  int w = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(w >= 0);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  ASSERT_EQ_INT(fcntl(w, F_OFD_SETLK, &fl), 0);
  ASSERT_EQ_INT((int)write(w, t.data, t.len / 2), (int)(t.len / 2));
  uint64_t from, to;
  same_as_cold(path, "half", &from, &to);
  /* Cut shorter in place (same inode): read again from the start. */
  ASSERT_EQ_INT(ftruncate(w, 0), 0);
  ASSERT_EQ_INT((int)pwrite(w, t.data, t.len / 3, 0), (int)(t.len / 3));
  same_as_cold(path, "cut", &from, &to);
  ASSERT_EQ_INT((int)from, 0);
  close(w);
  tb_free(&t);
}

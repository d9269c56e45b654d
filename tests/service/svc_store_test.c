/*
 * svc_store_test.c - etchd end to end: sessions kept in the trace store
 * (etch record --system without -o), written into a file, ended by
 * max_file_size.
 */
#define _GNU_SOURCE
#include "svc_test.h"

/* ---- sessions kept in the trace store (etch record --system without -o) ---- */

/* Runs ETCH_BIN with `args` (NULL-ended), its stdout into a string (NUL
 * ended, to free), stderr into the test's directory; its exit status into
 * *status. */
static char *etch_output(const char *const *args, int *status) {
  char out[700], err[700];
  snprintf(out, sizeof out, "%s/etch.out", etch_test_tmpdir());
  snprintf(err, sizeof err, "%s/etch.err", etch_test_tmpdir());
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
  for (; args[n - 1] && n < 15; n++) argv[n] = (char *)args[n - 1];
  argv[n] = NULL;
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) != 0)
    FAIL("cannot run %s", argv[0]);
  posix_spawn_file_actions_destroy(&fa);
  *status = wait_exit(pid);
  size_t len;
  char *text = (char *)etch_test_read_file(out, &len);
  if (!text) FAIL("no output from etch %s", args[0]);
  text = realloc(text, len + 1);
  text[len] = '\0';
  return text;
}

/* The store's entries (file names) other than ".", ".." and ".meta",
 * sorted, joined by spaces. */
static void store_files(const char *dir, char *buf, size_t cap) {
  struct dirent **de;
  int n = scandir(dir, &de, NULL, alphasort);
  buf[0] = '\0';
  for (int i = 0; i < n; i++) {
    const char *name = de[i]->d_name;
    if (strcmp(name, ".") && strcmp(name, "..") && strcmp(name, ".meta")) {
      size_t l = strlen(buf);
      snprintf(buf + l, cap - l, "%s%s", l ? " " : "", name);
    }
    free(de[i]);
  }
  if (n >= 0) free(de);
}

/* `etch ls --json` of the store (ETCH_STORE), parsed. */
static jp *store_ls(void) {
  int st;
  char *out = etch_output((const char *const[]){"ls", "--json", NULL}, &st);
  ASSERT_EQ_INT(st, 0);
  jp *v = jp_parse(out);
  if (!v || v->kind != JP_ARR) FAIL("etch ls --json is no JSON array: %s", out);
  free(out);
  return v;
}

/* One number `etch query TRACE SQL` prints (its one cell, --csv). */
static long long query_one(const char *trace, const char *sql) {
  int st;
  char *out = etch_output(
      (const char *const[]){"query", "--csv", trace, sql, NULL}, &st);
  ASSERT_EQ_INT(st, 0);
  char *nl = strchr(out, '\n'); /* the header */
  long long v = -1;
  if (!nl || sscanf(nl + 1, "%lld", &v) != 1)
    FAIL("etch query %s: no number in: %s", sql, out);
  free(out);
  return v;
}

/* Checks the store `dir` after a session of one producer `p` (2 threads of
 * `events` ticks) was kept in it: exactly one trace, named by the day and
 * "system", with its metadata already written, etch ls's counts those of
 * the events sent, and the trace's content event by event. */
static int64_t wall_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void check_kept(const char *dir, pid_t p, long events, int64_t from,
                       int64_t to) {
  char files[4096];
  store_files(dir, files, sizeof files);
  /* No hidden file left: the trace and nothing else. */
  ASSERT_TRUE(strchr(files, ' ') == NULL);
  ASSERT_EQ_U64(strlen(files), strlen("YYYYmmdd-HHMMSS-system.pftrace"));
  ASSERT_EQ_STR(files + 15, "-system.pftrace");
  char meta[1400], path[1400];
  snprintf(meta, sizeof meta, "%s/.meta/%s", dir, files);
  snprintf(path, sizeof path, "%s/%s", dir, files);
  struct stat sb;
  ASSERT_EQ_INT(stat(meta, &sb), 0); /* made by etch record, not by etch ls */
  jp *v = store_ls();
  ASSERT_EQ_U64(v->n, 1);
  const jp *e = v->items[0];
  ASSERT_EQ_STR(jp_get(e, "name")->str, files);
  ASSERT_EQ_STR(jp_get(e, "path")->str, path);
  ASSERT_TRUE(jp_get(e, "error")->kind == JP_NULL);
  /* The ticks and the producer's Svc.Start. */
  ASSERT_EQ_INT(jp_int(e, "events"), 2 * events + 1);
  ASSERT_EQ_INT(jp_int(e, "processes"), 1);
  ASSERT_EQ_U64(jp_get(e, "data_loss")->n, 0);
  /* Its start in wall-clock time from the trace's own clock snapshot (the
   * service's, first in the trace), within the recording. */
  ASSERT_TRUE(jp_get(e, "start_from_trace")->kind == JP_BOOL &&
              jp_get(e, "start_from_trace")->b);
  ASSERT_TRUE(jp_int(e, "start") >= from && jp_int(e, "start") <= to);
  ASSERT_EQ_INT(stat(path, &sb), 0);
  ASSERT_EQ_INT(jp_int(e, "size"), (int64_t)sb.st_size);
  jp_free(v);
  ASSERT_EQ_INT(query_one(path, "select count(*) from slice where name = 'tick'"),
                2 * events);
  char sql[200];
  snprintf(sql, sizeof sql,
           "select count(*) from slice s join thread_track tt on s.track_id ="
           " tt.id join thread t using (utid) join process pr using (upid)"
           " where s.name = 'tick' and pr.pid = %d",
           (int)p);
  ASSERT_EQ_INT(query_one(path, sql), 2 * events);
  td_trace t;
  static int32_t pids[4096];
  decode(path, &t, pids, 4096);
  for (int k = 0; k < 2; k++) check_ticks(&t, pids, 4096, p, k, events);
  ASSERT_EQ_INT((int)t.prev_dropped, 0);
  td_free(&t);
}

/* etch record --system without -o keeps the session in the trace store:
 * nothing under a store name while it records (only its part, written as
 * it goes, listed as recording under its hidden name), then the trace
 * under the store's name with its metadata, listed by etch ls at once. */
TEST(a_session_without_o_is_kept_in_the_store) {
  svc s;
  svc_start(&s);
  char store[700];
  snprintf(store, sizeof store, "%s/store", s.dir);
  setenv("ETCH_STORE", store, 1);
  char log[700];
  snprintf(log, sizeof log, "%s/record.log", s.dir);
  char *argv[] = {(char *)ETCH_BIN, "record", "--system", "-q", NULL};
  int before = log_sessions(&s);
  int64_t from = wall_ns();
  pid_t rec = spawn(argv, log);
  wait_session(&s, before, rec);
  pid_t p = producer("kept", 2, 3000);
  ASSERT_EQ_INT(wait_exit(p), 0);
  /* Recording: no trace in the store yet (nothing etch ls or etch ui could
   * take for a whole one). */
  jp *v = store_ls();
  ASSERT_EQ_U64(v->n, 1);
  ASSERT_TRUE(jp_get(v->items[0], "name")->str[0] == '.');
  ASSERT_TRUE(jp_get(v->items[0], "recording")->b);
  jp_free(v);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  check_kept(store, p, 3000, from, wall_ns());
  /* etch record said where it is. */
  char files[4096], want[5000];
  store_files(store, files, sizeof files);
  snprintf(want, sizeof want, "trace: %s/%s (", store, files);
  size_t len;
  char *text = (char *)etch_test_read_file(log, &len);
  ASSERT_TRUE(text != NULL && memmem(text, len, want, strlen(want)) != NULL);
  free(text);
  unsetenv("ETCH_STORE");
  svc_stop(&s);
}

/* The same with a config that has the service write the trace into the
 * consumer's file as it goes: the file grows under its hidden name, and
 * gets its store name once the session has ended. */
TEST(a_write_into_file_session_is_kept_in_the_store_once_whole) {
  svc s;
  svc_start(&s);
  char store[700], cfg[700], log[700];
  snprintf(store, sizeof store, "%s/store", s.dir);
  snprintf(cfg, sizeof cfg, "%s/file.pbtx", s.dir);
  snprintf(log, sizeof log, "%s/record.log", s.dir);
  setenv("ETCH_STORE", store, 1);
  FILE *f = fopen(cfg, "w");
  ASSERT_TRUE(f != NULL);
  fputs("buffers { size_kb: 8192 }\n"
        "data_sources { config { name: \"track_event\" } }\n"
        "write_into_file: true\nfile_write_period_ms: 100\n",
        f);
  fclose(f);
  char *argv[] = {(char *)ETCH_BIN, "record", "--config", cfg, "-q", NULL};
  int before = log_sessions(&s);
  int64_t from = wall_ns();
  pid_t rec = spawn(argv, log);
  wait_session(&s, before, rec);
  pid_t p = producer("kept", 2, 20000);
  ASSERT_EQ_INT(wait_exit(p), 0);
  /* Written while the session runs, under a hidden name only. */
  char files[4096];
  struct stat sb;
  char part[5000] = "";
  for (int i = 0; i < 3000; i++) {
    store_files(store, files, sizeof files);
    snprintf(part, sizeof part, "%s/%s", store, files);
    if (files[0] == '.' && stat(part, &sb) == 0 && sb.st_size > 100000) break;
    sleep_ms(10);
  }
  if (files[0] != '.' || strchr(files, ' ') || stat(part, &sb) != 0 ||
      sb.st_size <= 100000)
    FAIL("the store holds \"%s\" while the session runs, not one hidden file "
         "being written", files);
  /* Listed as recording, under the hidden name, read as far as it is
   * written. */
  jp *v = store_ls();
  ASSERT_EQ_U64(v->n, 1);
  ASSERT_EQ_STR(jp_get(v->items[0], "name")->str, files);
  ASSERT_EQ_STR(jp_get(v->items[0], "path")->str, part);
  ASSERT_TRUE(jp_get(v->items[0], "recording")->kind == JP_BOOL &&
              jp_get(v->items[0], "recording")->b);
  ASSERT_TRUE(jp_get(v->items[0], "error")->kind == JP_NULL);
  ASSERT_TRUE(jp_int(v->items[0], "events") > 0);
  jp_free(v);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  ASSERT_TRUE(stat(part, &sb) != 0);
  check_kept(store, p, 20000, from, wall_ns());
  unsetenv("ETCH_STORE");
  svc_stop(&s);
}

/* max_file_size_bytes ends the session by itself once reached; the file
 * stays within it. */
TEST(max_file_size_ends_the_session) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "max",
                            "buffers { size_kb: 4096 }\n"
                            "data_sources { config { name: \"track_event\" } }\n"
                            "write_into_file: true\nfile_write_period_ms: 100\n"
                            "max_file_size_bytes: 65536\n",
                            NULL, out, sizeof out);
  pid_t p = producer("endless", 1, 0);
  int rc = -1;
  for (int i = 0; i < 3000; i++) { /* it ends on its own (30 s at most) */
    int st;
    if (waitpid(rec, &st, WNOHANG) == rec) {
      rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
      break;
    }
    sleep_ms(10);
  }
  kill(p, SIGKILL);
  wait_exit(p);
  if (rc < 0) {
    kill(rec, SIGKILL);
    wait_exit(rec);
    FAIL("the session did not end at max_file_size_bytes");
  }
  ASSERT_EQ_INT(rc, 0);
  struct stat st;
  ASSERT_TRUE(stat(out, &st) == 0);
  ASSERT_TRUE(st.st_size > 0 && st.st_size <= 65536);
  /* Cut at a packet's end: it decodes whole. */
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  ASSERT_TRUE(td_count(&t, 3, "tick") > 100);
  td_free(&t);
  svc_stop(&s);
}

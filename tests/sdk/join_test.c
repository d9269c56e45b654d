/*
 * join_test.c - two copies of libetch in one process (a program and the
 * plugin it loads, each linked with libetch.a) record one trace with
 * ETCH_OUT: every way the run can end, the plugin joining by etch_init or
 * by registering a category, and a plugin that comes too late being told.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sdk_common.h"

#define N 50

/* Runs the host in MODE; its trace decoded into *t, its stderr returned
 * (malloc'd), its wait status in *status. */
static char *run_host_with(const char *mode, const char *preload,
                           td_trace *t, int *status);
static char *run_host(const char *mode, td_trace *t, int *status) {
  return run_host_with(mode, NULL, t, status);
}

static char *run_host_with(const char *mode, const char *preload,
                           td_trace *t, int *status) {
  char out[512], err[512], n[16];
  snprintf(out, sizeof out, "%s/join_%s%s.pftrace", etch_test_tmpdir(), mode,
           preload ? "_preload" : "");
  snprintf(err, sizeof err, "%s/join_%s%s.err", etch_test_tmpdir(), mode,
           preload ? "_preload" : "");
  snprintf(n, sizeof n, "%d", N);
  unlink(out);
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || dup2(fd, 2) < 0) _exit(126);
    setenv("ETCH_OUT", out, 1);
    unsetenv("ETCH__JOIN");
    if (preload) setenv("LD_PRELOAD", preload, 1);
    execl(JOIN_HOST, JOIN_HOST, JOIN_PLUGIN, n, mode, (char *)NULL);
    _exit(127);
  }
  ASSERT_EQ_INT(waitpid(pid, status, 0), pid);
  FILE *f = fopen(err, "r");
  ASSERT_TRUE(f != NULL);
  char *text = (char *)calloc(1, 65536);
  size_t got = fread(text, 1, 65535, f);
  text[got] = '\0';
  fclose(f);
  if (td_decode_file(out, t) != 0)
    FAIL("%s: trace: %s (stderr: %s)", mode, t->error, text);
  ASSERT_EQ_U64(t->unresolved, 0);
  ASSERT_EQ_U64(t->skipped, 0);
  ASSERT_EQ_U64(t->no_seq_id, 0);
  ASSERT_EQ_U64(t->prev_dropped, 0);
  return text;
}

/* Every slice of the four names, ends matched; the plugin's sequences
 * apart from the host's; the main thread's slices of both copies on one
 * thread track, nested (each plugin_slice inside the first host_slice). */
static void check_joined_seqs(const td_trace *t, const char *mode,
                              size_t plugin_main, bool seqs);
static void check_joined(const td_trace *t, const char *mode,
                         size_t plugin_main) {
  check_joined_seqs(t, mode, plugin_main, true);
}

static void check_joined_seqs(const td_trace *t, const char *mode,
                              size_t plugin_main, bool seqs) {
  ASSERT_EQ_U64(td_count(t, 1, "host_slice"), N);
  ASSERT_EQ_U64(td_count(t, 1, "host_thread_slice"), N);
  ASSERT_EQ_U64(td_count(t, 1, "plugin_slice"), plugin_main);
  ASSERT_EQ_U64(td_count(t, 1, "plugin_thread_slice"), N);
  ASSERT_EQ_U64(td_count(t, 2, NULL), 3 * N + plugin_main);
  uint64_t host_track = 0, plugin_track = 0;
  for (size_t i = 0; i < t->nev; i++) {
    const td_event *e = &t->ev[i];
    if (e->type != 1) continue;
    bool plugin = !strncmp(e->name, "plugin", 6);
    if (seqs && plugin != (e->seq >= (1u << 24)))
      FAIL("%s: %s on sequence %u", mode, e->name, e->seq);
    if (!strcmp(e->name, "host_slice")) host_track = e->track;
    if (!strcmp(e->name, "plugin_slice")) plugin_track = e->track;
  }
  const td_track *ht = td_track_of(t, host_track);
  ASSERT_TRUE(ht && ht->is_thread);
  ASSERT_EQ_U64(plugin_track, host_track);
  /* Thread names of both copies' workers. */
  bool hw = false, pw = false;
  for (size_t i = 0; i < t->ntracks; i++) {
    const td_track *k = &t->tracks[i];
    if (k->name && !strcmp(k->name, "host-worker")) hw = true;
    if (k->name && !strcmp(k->name, "plugin-worker")) pw = true;
  }
  ASSERT_TRUE(hw && pw);
}

TEST(a_plugins_copy_joins_with_etch_init_and_exit) {
  td_trace t;
  int st;
  char *err = run_host("exit", &t, &st);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  check_joined(&t, "exit", N);
  ASSERT_EQ_STR(err, "");
  td_free(&t);
  free(err);
}

TEST(a_plugins_copy_joins_without_etch_init) {
  td_trace t;
  int st;
  char *err = run_host("noinit", &t, &st);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  check_joined(&t, "noinit", N);
  ASSERT_EQ_STR(err, "");
  td_free(&t);
  free(err);
}

TEST(the_host_stopping_first_takes_the_plugins_trace) {
  td_trace t;
  int st;
  char *err = run_host("shutdown", &t, &st);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* The slice the plugin records after the host stopped is not there. */
  check_joined(&t, "shutdown", N);
  ASSERT_EQ_STR(err, "");
  td_free(&t);
  free(err);
}

TEST(an_unloaded_plugin_hands_its_trace_over) {
  td_trace t;
  int st;
  char *err = run_host("dlclose", &t, &st);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  check_joined(&t, "dlclose", N);
  ASSERT_EQ_STR(err, "");
  td_free(&t);
  free(err);
}

TEST(a_signal_writes_both_copies) {
  td_trace t;
  int st;
  char *err = run_host("signal", &t, &st);
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
  check_joined(&t, "signal", N);
  td_free(&t);
  free(err);
}

TEST(a_plugin_too_late_is_told) {
  td_trace t;
  int st;
  char *err = run_host("late", &t, &st);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  ASSERT_EQ_U64(td_count(&t, 1, "host_slice"), 0);
  ASSERT_EQ_U64(td_count(&t, 1, "plugin_slice"), 0);
  if (!strstr(err, "another copy of etch in this process has written its "
                   "trace already: this copy's events are not recorded"))
    FAIL("stderr: %s", err);
  td_free(&t);
  free(err);
}

/* Not under a sanitizer: its runtime must come first in the process, so
 * a sanitized libetch_malloc.so cannot be preloaded (docs/memory.md). */
#if defined(JOIN_MALLOC) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
/* Three copies: libetch_malloc.so (libetch.so, preloaded: it starts first
 * and owns the trace), the program's libetch.a and the plugin's. The
 * allocations and both copies' slices are in one trace. (The preloaded
 * libetch.so is in the global scope, so the plugin's calls of etch's
 * exported functions bind to it: its events go straight to the owner's
 * writers, not through a joined copy; which sequences they are on is not
 * checked.) */
TEST(a_static_program_under_the_malloc_preload_joins_its_trace) {
  td_trace t;
  int st;
  char *err = run_host_with("exit", JOIN_MALLOC, &t, &st);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  check_joined_seqs(&t, "preload", N, false);
  size_t mem = 0;
  for (size_t i = 0; i < t.nev; i++)
    if (t.ev[i].name && (!strcmp(t.ev[i].name, "free") ||
                         !strcmp(t.ev[i].name, "untagged")))
      mem++;
  ASSERT_TRUE(mem > 0);
  ASSERT_EQ_STR(err, "");
  td_free(&t);
  free(err);
}
#endif

/*
 * record_run.c - etch record: running the program, with the environment
 * that makes its libetch record as asked, the signals etch record
 * receives passed on to it, and how it ended said.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/envvars.h"
#include "record.h"

extern char **environ;

/*
 * `path` made absolute against etch record's own directory (a copy when it
 * is absolute already): the program's processes resolve what etch record
 * hands them against their own directory, which a shell in between
 * (`sh -c 'cd sub && ./prog'`) or the program itself may have changed by
 * the time they start tracing. Written into out[cap]; false when the
 * directory cannot be named or the result does not fit.
 */
bool rec_absolute(const char *path, char *out, size_t cap) {
  bool ok;
  if (path[0] == '/') {
    ok = (size_t)snprintf(out, cap, "%s", path) < cap;
  } else {
    char *cwd = getcwd(NULL, 0);
    if (!cwd) return false;
    ok = (size_t)snprintf(out, cap, "%s/%s", cwd, path) < cap;
    free(cwd);
  }
  if (!ok) errno = ENAMETOOLONG;
  return ok;
}

/*
 * libetch_malloc.so for --malloc, as LD_PRELOAD's new value in `out` (with
 * what LD_PRELOAD held before after it): $ETCH_MALLOC_LIB, else next to
 * this etch in the build tree (tools/malloc) or the installed one
 * (../LIBDIR).
 */
bool rec_malloc_lib(char *out, size_t cap) {
  char lib[PATH_MAX] = "";
  const char *env = etch__env(ETCH_ENV_MALLOC_LIB);
  if (env && *env) {
    /* Absolute: the loader finds a relative LD_PRELOAD from the directory
     * each process is in when it starts. */
    if (!rec_absolute(env, lib, sizeof lib)) return false;
  } else {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return false;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash) return false;
    *slash = '\0';
    const char *rel[] = {"/../malloc/libetch_malloc.so",
                         "/../" ETCH_INSTALL_LIBDIR "/libetch_malloc.so"};
    for (size_t i = 0; i < 2 && !lib[0]; i++) {
      char cand[PATH_MAX * 2];
      snprintf(cand, sizeof cand, "%s%s", self, rel[i]);
      char *real = realpath(cand, NULL);
      if (real && access(real, R_OK) == 0) snprintf(lib, sizeof lib, "%s", real);
      free(real);
    }
  }
  if (!lib[0] || access(lib, R_OK) != 0) return false;
  const char *prev = getenv("LD_PRELOAD");
  snprintf(out, cap, "%s%s%s", lib, prev && *prev ? ":" : "",
           prev && *prev ? prev : "");
  return true;
}

int rec_run_dir(char *run_dir, size_t cap) {
  int rc;
  const char *tmpdir = getenv("TMPDIR");
  char tmp_abs[PATH_MAX - 32];
  if (!rec_absolute(tmpdir && *tmpdir ? tmpdir : "/tmp", tmp_abs,
                    sizeof tmp_abs)) {
    rc = runtime_error("cannot make a run directory in %s: %s", tmpdir,
                       strerror(errno));
    return rc;
  }
  snprintf(run_dir, cap, "%s/etch-record.XXXXXX", tmp_abs);
  if (!mkdtemp(run_dir)) {
    rc = runtime_error("cannot make a run directory in %s: %s", tmp_abs,
                       strerror(errno));
    return rc;
  }
  return 0;
}

void rec_environment(const record_args *ra, const char *out_path,
                     const char *run_dir, const char *preload) {
  setenv("ETCH_RECORD_DIR", run_dir, 1);
  setenv("ETCH_OUT", out_path, 1);
  if (ra->cats) setenv("ETCH_CATEGORIES", ra->cats, 1);
  if (ra->console) setenv("ETCH_CONSOLE", "stderr", 1);
  if (ra->malloc_trace) {
    setenv("LD_PRELOAD", preload, 1);
    /* Every allocation and free is an event, and a lost free would read
     * as a leak: the trace streams, and a full buffer makes the thread
     * wait (--discard drops instead; a flight file cannot stream). The
     * environment's own ETCH_BUFFER_KB, ETCH_FILL and ETCH_WRITE_PERIOD_MS
     * win. */
    setenv("ETCH_BUFFER_KB", ETCH_RECORD_MALLOC_BUFFER_KB, 0);
    setenv("ETCH_FILL", ra->flight ? "discard" : "stall", 0);
    if (!ra->flight)
      setenv("ETCH_WRITE_PERIOD_MS", ETCH_RECORD_MALLOC_WRITE_PERIOD_MS, 0);
    /* The program waits for the write when it outruns it: deflate there
     * (level 6) made a malloc/free pair several times slower
     * (docs/memory.md, "Cost"). */
    setenv("ETCH_COMPRESSION", "none", 0);
  }
  /* --buffer, --ring and --discard win over the environment and --malloc. */
  if (ra->buffer_opt) {
    char kb[16];
    snprintf(kb, sizeof kb, "%u", (unsigned)ra->so.buffer_kb);
    setenv("ETCH_BUFFER_KB", kb, 1);
  }
  if (ra->fill) setenv("ETCH_FILL", ra->fill, 1);
  if (ra->sample_hz) {
    char hz[16];
    snprintf(hz, sizeof hz, "%u", (unsigned)ra->sample_hz);
    setenv("ETCH_SAMPLE", hz, 1);
  }
  if (ra->write_period) {
    char ms[24];
    snprintf(ms, sizeof ms, "%u", (unsigned)ra->write_period_ms);
    /* The default's gives way to the environment's. */
    setenv("ETCH_WRITE_PERIOD_MS", ms, !ra->write_period_default);
  }
  if (ra->flight) { /* each process its own, in the run directory */
    char fp[PATH_MAX + 16];
    snprintf(fp, sizeof fp, "%s/%%p.flight", run_dir);
    setenv("ETCH_FLIGHT", fp, 1);
  }
}

/* Passing on SIGINT, SIGTERM and SIGHUP sent to etch record to the
 * program it runs. sigqueue's value says "passed on" to the program's
 * libetch (src/sdk/core/env.c, SIG_PASSED_ON): when a kill to the whole process
 * group reached the program too, this second copy is not a second Ctrl-C
 * that gives up on the trace. */
static const int kPassed[3] = {SIGINT, SIGTERM, SIGHUP};
static const int kPassedOn = 0x65746368; /* "etch" */
static volatile sig_atomic_t g_child;  /* the program, while it runs */
static volatile sig_atomic_t g_passed; /* the last signal passed on */
static volatile sig_atomic_t g_got;    /* the last one received */

static void pass_on(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  g_got = sig;
  /* A terminal's Ctrl-C or hangup (sent by the kernel) reached the whole
   * foreground process group, the program with it. */
  if (si && si->si_code == SI_KERNEL) return;
  int saved = errno;
  pid_t child = (pid_t)g_child;
  if (child > 0 &&
      sigqueue(child, sig, (union sigval){.sival_int = kPassedOn}) == 0)
    g_passed = sig;
  errno = saved;
}

void rec_spawn(char **argv, rec_exit *ex) {
  /* Ctrl-C goes to the program (same process group), whose libetch writes
   * the trace before it ends; etch waits for it. SIGINT, SIGTERM and
   * SIGHUP sent to etch alone are passed on to the program, which then
   * ends as for Ctrl-C; etch waits for it and reports as usual. The
   * signals stay blocked until the child's pid is known, and again from
   * its end (seen without reaping it) until the handlers are gone, so
   * none is lost and none goes to a pid that is no longer the child. */
  struct sigaction ign = {.sa_handler = SIG_IGN}, old_quit;
  struct sigaction fwd = {.sa_sigaction = pass_on, .sa_flags = SA_SIGINFO};
  sigemptyset(&fwd.sa_mask);
  sigset_t passed, old_mask;
  sigemptyset(&passed);
  struct sigaction old_act[3];
  bool installed[3] = {false, false, false};
  for (int i = 0; i < 3; i++) sigaddset(&passed, kPassed[i]);
  sigprocmask(SIG_BLOCK, &passed, &old_mask);
  sigaction(SIGQUIT, &ign, &old_quit);
  sigset_t dflt;
  sigemptyset(&dflt);
  sigaddset(&dflt, SIGINT);
  sigaddset(&dflt, SIGQUIT);
  for (int i = 0; i < 3; i++) {
    int sig = kPassed[i];
    if (sigaction(sig, NULL, &old_act[i]) != 0) continue;
    /* A signal ignored when etch started (nohup: SIGHUP) stays ignored,
     * for the program too. */
    if (sig != SIGINT && !(old_act[i].sa_flags & SA_SIGINFO) &&
        old_act[i].sa_handler == SIG_IGN)
      continue;
    installed[i] = sigaction(sig, &fwd, NULL) == 0;
    sigaddset(&dflt, sig);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigdefault(&attr, &dflt);
  posix_spawnattr_setsigmask(&attr, &old_mask);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid;
  int err = posix_spawnp(&pid, argv[0], NULL, &attr, argv, environ);
  posix_spawnattr_destroy(&attr);
  int status = 0;
  if (!err) {
    g_child = pid;
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    siginfo_t si;
    while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 &&
           errno == EINTR) {
    }
    sigprocmask(SIG_BLOCK, &passed, NULL);
    g_child = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  for (int i = 0; i < 3; i++)
    if (installed[i]) sigaction(kPassed[i], &old_act[i], NULL);
  sigaction(SIGQUIT, &old_quit, NULL);
  /* A signal that came after the program's end, or with no program, is
   * etch's own: it takes its usual effect when unblocked. */
  sigprocmask(SIG_SETMASK, &old_mask, NULL);
  *ex = (rec_exit){.pid = pid,
                   .status = status,
                   .err = err,
                   .passed_sig = g_passed,
                   .got_sig = g_got};
}

bool rec_report_exit(const char *prog, const rec_exit *ex) {
  bool failed = false;
  if (WIFEXITED(ex->status) && WEXITSTATUS(ex->status) != 0) {
    fprintf(stderr, "etch: %s exited with status %d\n", prog,
            WEXITSTATUS(ex->status));
    failed = true;
  } else if (WIFSIGNALED(ex->status) && WTERMSIG(ex->status) == SIGINT) {
    fprintf(stderr, "etch: %s was interrupted (SIGINT)\n", prog);
  } else if (WIFSIGNALED(ex->status) && WTERMSIG(ex->status) == ex->passed_sig) {
    fprintf(stderr, "etch: %s ended by SIG%s, which etch record received "
                    "and passed on to it\n",
            prog, sigabbrev_np(ex->passed_sig));
  } else if (WIFSIGNALED(ex->status) && WTERMSIG(ex->status) == ex->got_sig) {
    /* A terminal's hangup, which reached etch and the program both. */
    fprintf(stderr, "etch: %s ended by SIG%s, which etch record received "
                    "too\n",
            prog, sigabbrev_np(ex->got_sig));
  } else if (WIFSIGNALED(ex->status) && WTERMSIG(ex->status) == SIGPIPE) {
    /* The ordinary end of a program in a pipeline whose reader is done
     * (prog | head -1): not a failure. */
    fprintf(stderr, "etch: %s ended by SIGPIPE (the reader of its output "
                    "closed it)\n", prog);
  } else if (WIFSIGNALED(ex->status)) {
    fprintf(stderr, "etch: %s was killed by signal %d (%s)\n", prog,
            WTERMSIG(ex->status), strsignal(WTERMSIG(ex->status)));
    failed = true;
  }
  return failed;
}

/*
 * env.c - the environment-driven session: etch_init() records the whole run
 * into the file named by ETCH_OUT, configured by the other ETCH_* variables,
 * and etch_shutdown() (or exit) writes it.
 *
 * What makes that dependable:
 *
 * - The output path is resolved and checked at etch_init (paths.c,
 *   etch__output_resolve): %p is the pid, a relative path is fixed against
 *   the directory the process started tracing in, an unwritable path is
 *   reported before the run rather than after it.
 * - Exit waits for a write already in progress (the duration timer's).
 * - Termination by SIGINT, SIGTERM, SIGHUP or SIGPIPE that the program
 *   does not handle itself writes the trace first: the handler only wakes a
 *   watcher thread, which stops the session, writes it and then re-raises
 *   the signal with its default action, so the process still ends as the
 *   signal says. SIGPIPE is how a program in a pipeline ordinarily ends
 *   (`prog | head -2`): while the trace is written the program's writes
 *   fail with EPIPE, and a repeated SIGPIPE does not cut the write short as
 *   a second Ctrl-C does.
 * - Fatal signals (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL) wake the same
 *   thread and wait for it a bounded time (ETCH_CRASH_WAIT_MS, default
 *   2000): the write is best effort, since the crashed thread may hold a
 *   lock the write needs or have corrupted memory; when it does not finish
 *   in time stderr says plainly that the trace is lost. _exit() and SIGKILL
 *   run nothing: that trace is lost, and `etch record` says so.
 * - Several processes of one `etch record` run: etch record names a run
 *   directory in ETCH_RECORD_DIR. Each process claims its output path there
 *   (the first one keeps the name, later ones write PATH.PID.ext) and leaves
 *   a status file saying what became of its trace, which etch record reads
 *   to list every trace and to explain a missing one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/envvars.h"
#include "sdk/core/sdk.h"

/* ---- the run directory's status file ------------------------------------------ */

/* <run dir>/<pid>.status, prepared at init so that a signal handler can
 * append to it (open, write and close are async-signal-safe). */
static char status_path[4096];

/* Appends one line. Async-signal-safe when `line` is prepared. */
static void status_put(const char *line, size_t len) {
  if (!status_path[0]) return;
  int fd = open(status_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ssize_t n = write(fd, line, len);
  (void)n;
  close(fd);
}

static void status_printf(const char *fmt, ...) ETCH_PRINTF(1, 2);
static void status_printf(const char *fmt, ...) {
  if (!status_path[0]) return;
  char line[4096 + 512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
  /* One line per record: a message never spans two. */
  for (int i = 0; i < n; i++)
    if (line[i] == '\n') line[i] = ' ';
  line[n++] = '\n';
  status_put(line, (size_t)n);
}

static void status_init(void) {
  const char *dir = etch__env(ETCH_ENV_RECORD_DIR);
  status_path[0] = '\0';
  if (!dir || dir[0] != '/') return;
  int n = snprintf(status_path, sizeof status_path, "%s/%ld.status", dir,
                   (long)getpid());
  if (n < 0 || (size_t)n >= sizeof status_path) status_path[0] = '\0';
}

/*
 * The output path this process may use: under etch record, the first
 * process to claim a path keeps it; the others get PATH.PID.ext. The claim
 * is a file in the run directory named after the path's hash.
 */
static char *claim_output(char *path) {
  const char *dir = etch__env(ETCH_ENV_RECORD_DIR);
  if (!dir || dir[0] != '/') return path;
  char claim[4096];
  snprintf(claim, sizeof claim, "%s/claim.%016llx", dir,
           (unsigned long long)etch__hash_bytes(path, strlen(path), 0));
  int fd = open(claim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    close(fd);
    return path;
  }
  if (errno != EEXIST) return path;
  char *own = etch__output_per_pid(path, (long)getpid());
  if (!own) return path;
  free(path);
  return own;
}

/* ---- the environment session ------------------------------------------------- */

static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;
/* Held for a whole etch_shutdown: a second caller (the signal watcher while
 * exit is writing, or the other way round) waits for the first's write. */
static pthread_mutex_t shutdown_lock = PTHREAD_MUTEX_INITIALIZER;
static bool env_inited;
static etch_session *env_session;
static etch_session *console_session; /* ETCH_CONSOLE's */

/* With a flight file the trace of a crash is in it, whole up to the death:
 * a fatal signal ends the process at once (nothing to write from a process
 * whose heap may be broken, while its other threads go on recording), and
 * this line says where the trace is. Made when the session starts. */
static char flight_note[768];
static size_t flight_note_len;
static bool atexit_set;
static pid_t env_pid;
/* In a fork child of a process that traced: the parent's pid, until the
 * child starts tracing itself (etch_init) or exits without doing so. */
static pid_t forked_from;

static void signals_atfork_child(void);

void etch__session_atfork_child(void) {
  pthread_mutex_init(&env_lock, NULL);
  pthread_mutex_init(&shutdown_lock, NULL);
  /* The parent's sessions: never stopped or written here, but freed, so
   * that a child's exit reports no leak (LeakSanitizer) and a long-lived
   * child does not keep the parent's buffers. */
  etch__session_forget_inherited(env_session);
  etch__session_forget_inherited(console_session);
  /* etch_init() may start the child's own session: it is not initialised
   * yet (the parent was). */
  forked_from = env_inited && env_pid ? env_pid : 0;
  env_inited = false;
  env_session = NULL;
  console_session = NULL;
  status_path[0] = '\0';
  signals_atfork_child();
  etch__join_atfork_child();
}

static void read_comm(char *out, size_t cap);

/*
 * At the exit of a fork child that never started tracing (the parent's
 * atexit handler, inherited): its events went nowhere. Under etch record
 * the run directory hears of it ("untraced PID COMM\tPPID"), and etch
 * record says so. A child that exec'd or called _exit() runs no atexit
 * handler and is not reported.
 */
static void env_atexit(void) {
  if (getpid() != env_pid) {
    if (forked_from && !env_inited) {
      status_init();
      char comm[64];
      read_comm(comm, sizeof comm);
      status_printf("untraced %ld %s\t%ld", (long)getpid(), comm,
                    (long)forked_from);
    }
    return;
  }
  etch_shutdown();
}

/* The session's output is written (or failed): say so on stderr (failures)
 * and in the run directory. */
static void env_on_output(etch_session *s, int rc, const char *path,
                          size_t bytes) {
  (void)s;
  if (rc) {
    fprintf(stderr, "etch: %s\n", etch_last_error());
    /* Cut short at a whole packet (a full disk): the file is there. */
    if (bytes) status_printf("wrote %zu %s", bytes, path);
    status_printf("failed %s", etch_last_error());
  } else {
    status_printf("wrote %zu %s", bytes, path);
  }
}

/* A config option's variable (envvars.c), when it is set. */
static int env_set(etch_config *cfg, etch_env id) {
  const char *v = etch__env(id);
  if (!v) return ETCH_OK;
  int rc = etch_config_set(cfg, etch__envvars[id].config_key, v);
  if (rc) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", etch_last_error());
    return etch__error(rc, "%s: %s", etch__envvars[id].name, msg);
  }
  return ETCH_OK;
}

static void signals_install(void);
static void env_atexit(void);
static void exit_hook(void);

/* The config the environment asks for, into `cfg`: ETCH_CONFIG's options
 * (the one place that reads it), then the variables vars[0..n) over
 * them, in that order. */
static int env_config(etch_config *cfg, const etch_env *vars, size_t n) {
  int rc = ETCH_OK;
  const char *text = etch__env(ETCH_ENV_CONFIG);
  if (text) {
    rc = etch_config_parse(cfg, text);
    if (rc) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s", etch_last_error());
      etch__error(rc, "ETCH_CONFIG: %s", msg);
    }
  }
  for (size_t i = 0; !rc && i < n; i++) rc = env_set(cfg, vars[i]);
  return rc;
}

/* A guest's session: the environment's config, no output of its own (its
 * packets go to the owner's file), no signal handlers (the owner's write
 * asks for them). Environment lock held. */
static int guest_init(void) {
  etch_config *cfg;
  int rc = etch_config_new(&cfg);
  if (rc) return rc;
  static const etch_env kGuestVars[] = {
      ETCH_ENV_CATEGORIES, ETCH_ENV_BUFFER_KB, ETCH_ENV_FILL,
      ETCH_ENV_COMPRESSION};
  rc = env_config(cfg, kGuestVars, ETCH_ARRAY_SIZE(kGuestVars));
  if (!rc) { /* ETCH_CONFIG's output= is the owner's */
    free(cfg->output);
    cfg->output = NULL;
    cfg->duration_ms = 0;
    cfg->write_period_ms = 0;
  }
  etch_session *s = NULL;
  if (!rc) rc = etch_session_new(cfg, &s);
  if (!rc) rc = etch_session_start(s);
  etch_config_free(cfg);
  if (rc) {
    etch_session_free(s);
    return rc;
  }
  env_session = s;
  exit_hook();
  return ETCH_OK;
}

/* Stops and frees the sessions at exit (once, in the process that made
 * them). Environment lock held. */
static void exit_hook(void) {
  env_pid = getpid();
  if (!atexit_set) etch__atexit(env_atexit);
  atexit_set = true;
}

/*
 * ETCH_CONSOLE=1 (or stderr, stdout, fd:N): a session of its own whose
 * packets the console interceptor prints as they happen, next to the
 * ETCH_OUT one if there is one. ETCH_CATEGORIES applies to it;
 * ETCH_CONSOLE_COLOR=auto|always|never to its colours. Environment lock
 * held.
 */
static int console_init(void) {
  const char *v = etch__env(ETCH_ENV_CONSOLE);
  if (!v || !*v || strcmp(v, "0") == 0) return ETCH_OK;
  const char *fd;
  if (strcmp(v, "1") == 0 || strcmp(v, "stderr") == 0)
    fd = "2";
  else if (strcmp(v, "stdout") == 0)
    fd = "1";
  else if (strncmp(v, "fd:", 3) == 0)
    fd = v + 3;
  else
    return etch__error(ETCH_ECONFIG,
                       "ETCH_CONSOLE=%s: expected 1, stderr, stdout or fd:N",
                       v);
  etch_config *cfg;
  int rc = etch_config_new(&cfg);
  if (rc) return rc;
  rc = env_set(cfg, ETCH_ENV_CATEGORIES);
  if (!rc) rc = etch_config_set(cfg, "interceptor", "console");
  if (!rc) rc = etch_config_set(cfg, "interceptor.fd", fd);
  if (!rc) rc = env_set(cfg, ETCH_ENV_CONSOLE_COLOR);
  etch_session *s = NULL;
  if (!rc) rc = etch_session_new(cfg, &s);
  if (!rc) rc = etch_session_start(s);
  etch_config_free(cfg);
  if (rc) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", etch_last_error());
    etch_session_free(s);
    return etch__error(rc, "ETCH_CONSOLE: %s", msg);
  }
  console_session = s;
  exit_hook();
  return ETCH_OK;
}

static void read_comm(char *out, size_t cap) {
  out[0] = '\0';
  int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, out, cap - 1);
  close(fd);
  if (n <= 0) return;
  out[n] = '\0';
  if (out[n - 1] == '\n') out[n - 1] = '\0';
}

/*
 * ETCH_CHANNELS: each name or pattern of the list is switched on (a bad
 * one said at once). One that matched nothing (a typo, most likely) is
 * named on stderr at exit, with the channels there are, if it still
 * matches nothing then: categories and channels register as their code is
 * loaded, and etch_init may run before (libetch_malloc.so's constructor,
 * a program's own) or a library comes later with dlopen.
 */
static char *chan_unmatched; /* "a\0b\0\0": elements that matched nothing */
static pid_t chan_pid;

static void channels_check(void) {
  if (!chan_unmatched || getpid() != chan_pid) return;
  for (char *p = chan_unmatched; *p; p += strlen(p) + 1) {
    if (etch__category_count(p) != 0) continue;
    char names[512];
    etch__channel_names(names, sizeof names);
    fprintf(stderr,
            "etch: ETCH_CHANNELS: '%s' matched no channel or category of "
            "this program (%s%s)\n",
            p, names[0] ? "its channels: " : "it defines no channel", names);
  }
  free(chan_unmatched);
  chan_unmatched = NULL;
}

static void channels_init(const char *list) {
  char *copy = etch__strdup(list);
  char *un = (char *)etch__calloc(strlen(list) + 2, 1);
  if (!copy || !un) {
    free(copy);
    free(un);
    return;
  }
  size_t len = 0;
  for (char *save = NULL, *p = strtok_r(copy, ",", &save); p;
       p = strtok_r(NULL, ",", &save)) {
    while (*p == ' ' || *p == '\t') p++;
    size_t n = strlen(p);
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) p[--n] = '\0';
    if (!n) continue;
    int m = etch_channel_set(p, true);
    if (m < 0) {
      fprintf(stderr, "etch: ETCH_CHANNELS: %s\n", etch_last_error());
    } else if (m == 0) {
      memcpy(un + len, p, n + 1);
      len += n + 1;
    }
  }
  free(copy);
  if (!len) {
    free(un);
    return;
  }
  bool registered = chan_pid != 0; /* by this process or its parent */
  free(chan_unmatched);
  chan_unmatched = un;
  chan_pid = getpid();
  if (!registered) etch__atexit(channels_check);
}

/* A guest's trace for the owner (join.c): its session stopped, its packets
 * and stats. False when it has none (given already). */
static bool guest_give(uint8_t **data, size_t *len, uint64_t *stats) {
  pthread_mutex_lock(&env_lock);
  etch_session *s = env_session;
  env_session = NULL;
  pthread_mutex_unlock(&env_lock);
  if (!s) return false;
  etch_session_stop(s);
  int rc = etch__session_serialize_part(s, data, len, stats);
  etch_session_free(s);
  if (rc) {
    fprintf(stderr, "etch: this copy of etch's trace is lost: %s\n",
            etch_last_error());
    return false;
  }
  return true;
}

void etch__join_maybe_init(void) {
  pthread_mutex_lock(&env_lock);
  bool inited = env_inited;
  pthread_mutex_unlock(&env_lock);
  if (inited || !etch__join_host_present()) return;
  const char *out = etch__env(ETCH_ENV_OUT);
  if (out && *out) etch_init();
}

int etch_init(void) {
  etch__global_init();
  pthread_mutex_lock(&env_lock);
  if (env_inited) {
    pthread_mutex_unlock(&env_lock);
    return ETCH_OK;
  }
  env_inited = true;
  /* Channels switched on for the whole run, before any session starts. */
  const char *chans = etch__env(ETCH_ENV_CHANNELS);
  if (chans && *chans) channels_init(chans);
  const char *backend = etch__env(ETCH_ENV_BACKEND);
  if (backend && !strcmp(backend, "system")) {
    int src = etch_system_start(NULL);
    if (src) fprintf(stderr, "etch: system mode: %s\n", etch_last_error());
  } else if (backend && *backend && strcmp(backend, "inproc") != 0) {
    fprintf(stderr, "etch: ETCH_BACKEND=%s is not a backend etch knows "
                    "(system or inproc)\n", backend);
  }
  int crc = console_init();
  if (crc) fprintf(stderr, "etch: not printing events: %s\n", etch_last_error());
  const char *out = etch__env(ETCH_ENV_OUT);
  if (!out || !*out) {
    pthread_mutex_unlock(&env_lock);
    return crc;
  }
  /* Another copy of etch in this process records ETCH_OUT already: this
   * one records into its trace (join.c). Not under the lock: the owner
   * takes a guest's trace (guest_give, which takes it) under its own lock,
   * which joining takes. env_inited keeps out a second etch_init. */
  pthread_mutex_unlock(&env_lock);
  int joined = etch__join_as_guest(guest_give);
  pthread_mutex_lock(&env_lock);
  if (joined) {
    int rc = joined < 0 ? ETCH_ESTATE : guest_init();
    pthread_mutex_unlock(&env_lock);
    if (joined > 0 && rc)
      fprintf(stderr, "etch: not tracing: %s\n", etch_last_error());
    return rc;
  }
  status_init();
  char comm[64];
  read_comm(comm, sizeof comm);
  etch_config *cfg;
  int rc = etch_config_new(&cfg);
  if (rc == ETCH_OK) {
    static const etch_env kVars[] = {
        ETCH_ENV_CATEGORIES, ETCH_ENV_BUFFER_KB,  ETCH_ENV_FILL,
        ETCH_ENV_DURATION_MS, ETCH_ENV_COMPRESSION, ETCH_ENV_FLIGHT,
        ETCH_ENV_FLIGHT_KEEP, ETCH_ENV_WRITE_PERIOD_MS, ETCH_ENV_SAMPLE};
    rc = env_config(cfg, kVars, ETCH_ARRAY_SIZE(kVars));
    /* A fork child's flight file is its own: without %p the name is the
     * parent's, so the child's is NAME.PID.ext. */
    if (!rc && forked_from && cfg->flight && !strstr(cfg->flight, "%p") &&
        strcmp(cfg->flight, "1") != 0) {
      char *own = etch__output_per_pid(cfg->flight, (long)getpid());
      if (!own) rc = ETCH_ENOMEM;
      else {
        free(cfg->flight);
        cfg->flight = own;
      }
    }
    char *path = NULL;
    if (!rc) {
      path = etch__output_resolve(out, &rc);
    }
    /* A fork child tracing on its own: ETCH_OUT without %p names the
     * parent's file, so the child's trace is PATH.PID.ext. */
    if (!rc && forked_from && !strstr(out, "%p")) {
      char *own = etch__output_per_pid(path, (long)getpid());
      free(path);
      path = own;
      if (!path) rc = ETCH_ENOMEM;
    }
    if (!rc) {
      path = claim_output(path);
      rc = etch_config_set(cfg, "output", path);
    }
    etch_session *s = NULL;
    if (!rc) rc = etch_session_new(cfg, &s);
    if (!rc) {
      s->on_output = env_on_output;
      s->join_owner = true;
      rc = etch_session_start(s);
    }
    if (!rc) {
      env_session = s;
      if (s->cfg.flight) {
        char *fp = NULL;
        if (etch__flight_path(s->cfg.flight, &fp) == ETCH_OK) {
          int k = snprintf(flight_note, sizeof flight_note,
                           "etch: the process died of a signal; its trace is "
                           "in its flight file: etch recover %s\n",
                           fp);
          flight_note_len = k > 0 && (size_t)k < sizeof flight_note ? (size_t)k : 0;
        }
        free(fp);
      }
      etch__join_publish(s->cfg.compression == 1);
      exit_hook();
      status_printf("tracing %ld %s\t%s", (long)env_pid, comm, s->cfg.output);
    } else if (s) {
      etch_session_free(s);
    }
    free(path);
    etch_config_free(cfg);
  }
  if (!rc) signals_install();
  pthread_mutex_unlock(&env_lock);
  if (rc) {
    fprintf(stderr, "etch: not tracing: %s\n", etch_last_error());
    status_printf("error %ld %s\t%s", (long)getpid(), comm, etch_last_error());
  }
  return rc;
}

int etch_flush(void) {
  pthread_mutex_lock(&env_lock);
  etch_session *s = env_session;
  if (s) { /* held while it flushes: a shutdown meanwhile frees it after */
    pthread_mutex_lock(&s->lock);
    s->refs++;
    pthread_mutex_unlock(&s->lock);
  }
  pthread_mutex_unlock(&env_lock);
  if (!s) return ETCH_OK;
  int rc = etch_session_flush(s);
  etch__session_release(s);
  return rc;
}

int etch_shutdown(void) {
  if (etch__join_guest()) { /* the trace goes to the copy that owns it */
    etch__join_leave();
    pthread_mutex_lock(&env_lock);
    etch_session *console = console_session;
    console_session = NULL;
    pthread_mutex_unlock(&env_lock);
    etch_session_free(console);
    return ETCH_OK;
  }
  pthread_mutex_lock(&shutdown_lock);
  pthread_mutex_lock(&env_lock);
  etch_session *s = env_session;
  etch_session *console = console_session;
  env_session = NULL;
  console_session = NULL;
  pthread_mutex_unlock(&env_lock);
  etch_session_free(console);
  int rc = ETCH_OK;
  if (s) {
    /* A failed write was reported by env_on_output, whichever thread did
     * it. */
    rc = etch_session_stop(s);
    etch_session_free(s);
  }
  pthread_mutex_unlock(&shutdown_lock);
  return rc;
}

/* ---- signals ------------------------------------------------------------------ */

static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
static const int fatal_signals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
#define NSIG_HANDLED 16

/* Which signals have etch's handler (installed over SIG_DFL only). */
static int sig_installed[NSIG_HANDLED];
static int sig_wake[2] = {-1, -1}; /* handler -> watcher */
static int sig_done[2] = {-1, -1}; /* watcher -> a waiting fatal handler */
static int sig_pending;            /* the first signal, atomic */
static pid_t watcher_tid; /* atomic */
static uint64_t crash_wait_ms = 2000;

static bool is_fatal(int sig) {
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(fatal_signals); i++)
    if (fatal_signals[i] == sig) return true;
  return false;
}

/* Async-signal-safe "etch: " + msg on stderr and in the status file. */
static void say_lost(int sig) {
  static const char msg[] =
      "etch: the trace of this process is lost (it died of a signal before "
      "the trace could be written)\n";
  ssize_t n = write(2, msg, sizeof msg - 1);
  (void)n;
  char line[64] = "lost signal ";
  size_t len = strlen(line);
  if (sig >= 10) line[len++] = (char)('0' + sig / 10);
  line[len++] = (char)('0' + sig % 10);
  line[len++] = '\n';
  status_put(line, len);
}

static void die_of(int sig) {
  signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  pthread_sigmask(SIG_UNBLOCK, &set, NULL);
  raise(sig);
}

/* sigqueue()'s value when etch record passes on a SIGINT, SIGTERM or SIGHUP
 * it received (tools/etch/record.c, kPassedOn): the same signal may reach
 * this process directly too (kill to the process group), and that copy is
 * not a second signal that gives up on the trace. */
#define SIG_PASSED_ON 0x65746368 /* "etch" */

static void on_signal(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  int saved = errno;
  if (getpid() != env_pid) { /* a forked child that kept the handler */
    die_of(sig);
    errno = saved;
    return;
  }
  int expect = 0;
  bool first = __atomic_compare_exchange_n(&sig_pending, &expect, sig, false,
                                           __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  bool fatal = is_fatal(sig);
  if (!first && si && si->si_code == SI_QUEUE &&
      si->si_value.sival_int == SIG_PASSED_ON) {
    errno = saved;
    return;
  }
  /* Every write to the closed pipe raises SIGPIPE again while the watcher
   * writes the trace: the watcher ends the process when it is done. */
  if (!first && sig == SIGPIPE) {
    errno = saved;
    return;
  }
  if (!first || (fatal && gettid() == __atomic_load_n(&watcher_tid, __ATOMIC_RELAXED))) {
    /* A second signal, or the write itself crashed: give up. */
    if (fatal || first) say_lost(sig);
    die_of(sig);
    errno = saved;
    return;
  }
  if (fatal && flight_note_len) {
    ssize_t w = write(2, flight_note, flight_note_len);
    (void)w;
    die_of(sig);
    errno = saved;
    return;
  }
  unsigned char b = (unsigned char)sig;
  ssize_t n = write(sig_wake[1], &b, 1);
  (void)n;
  if (fatal) {
    /* Wait for the watcher's write, a bounded time; then die. */
    struct pollfd p = {.fd = sig_done[0], .events = POLLIN};
    if (poll(&p, 1, (int)crash_wait_ms) <= 0) say_lost(sig);
    die_of(sig);
  }
  errno = saved;
}

/* Posted by the watcher once it runs: etch_init returns after that, so
 * the thread's start (the C library's and a sanitizer's allocations) is
 * over before the program can fork: a child forked in the middle of it
 * inherited an allocator lock held by a thread it does not have, and hung
 * in LeakSanitizer's check at its exit. */
static sem_t watcher_up;

static void *watcher_main(void *arg) {
  (void)arg;
  __atomic_store_n(&watcher_tid, gettid(), __ATOMIC_RELAXED);
  sem_post(&watcher_up);
  unsigned char b;
  ssize_t n;
  do {
    n = read(sig_wake[0], &b, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) return NULL;
  int sig = b;
  if (is_fatal(sig))
    fprintf(stderr, "etch: %s: writing the trace before the process dies\n",
            strsignal(sig));
  etch_shutdown();
  unsigned char done = 1;
  n = write(sig_done[1], &done, 1);
  if (!is_fatal(sig)) {
    status_printf("signal %d", sig);
    die_of(sig);
  }
  return NULL;
}

static void signals_install(void) {
  crash_wait_ms = etch__env_number(ETCH_ENV_CRASH_WAIT_MS);
  if (pipe2(sig_wake, O_CLOEXEC) != 0) return;
  if (pipe2(sig_done, O_CLOEXEC) != 0) {
    close(sig_wake[0]);
    close(sig_wake[1]);
    sig_wake[0] = sig_wake[1] = -1;
    return;
  }
  /* The watcher takes no asynchronous signals: they go to the program's
   * threads, whose handlers only wake it. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  sem_init(&watcher_up, 0, 0);
  int rc = pthread_create(&t, &a, watcher_main, NULL);
  pthread_attr_destroy(&a);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) return;
  while (sem_wait(&watcher_up) != 0 && errno == EINTR) {
  }
  pthread_setname_np(t, "etch-signals");
  size_t k = 0;
  const int *lists[2] = {stop_signals, fatal_signals};
  size_t lens[2] = {ETCH_ARRAY_SIZE(stop_signals),
                    ETCH_ARRAY_SIZE(fatal_signals)};
  for (int l = 0; l < 2; l++) {
    for (size_t i = 0; i < lens[l]; i++) {
      int sig = lists[l][i];
      struct sigaction cur;
      if (sigaction(sig, NULL, &cur) != 0) continue;
      /* Only where the program has not put a handler of its own. */
      if ((cur.sa_flags & SA_SIGINFO) || cur.sa_handler != SIG_DFL) continue;
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_sigaction = on_signal;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART | SA_SIGINFO;
      if (sigaction(sig, &sa, NULL) == 0 && k < NSIG_HANDLED)
        sig_installed[k++] = sig;
    }
  }
}

/* A fork child has no watcher and no session of the parent's: its signals
 * take their default action again (where etch had put its handler). */
static void signals_atfork_child(void) {
  for (size_t i = 0; i < NSIG_HANDLED && sig_installed[i]; i++) {
    struct sigaction cur;
    if (sigaction(sig_installed[i], NULL, &cur) == 0 &&
        (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_signal)
      signal(sig_installed[i], SIG_DFL);
    sig_installed[i] = 0;
  }
  for (int i = 0; i < 2; i++) {
    if (sig_wake[i] >= 0) close(sig_wake[i]);
    if (sig_done[i] >= 0) close(sig_done[i]);
    sig_wake[i] = sig_done[i] = -1;
  }
  __atomic_store_n(&sig_pending, 0, __ATOMIC_RELAXED);
}

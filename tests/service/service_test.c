/*
 * service_test.c - etchd end to end: a private etchd on sockets in the
 * test's directory, producer processes linked with libetch in system mode,
 * `etch record --system` as the consumer, the trace decoded and checked
 * event by event; then producers and peers that misbehave.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buffer/smb.h"
#include "ipc/ipc.h"
#include "pb/pb.h"
#include "proto/ipc.h"
#include "proto/perfetto.h"
#include "proto/trace_config.h"
#include "json_parse.h"
#include "tdecode.h"
#include "test.h"

extern char **environ;

typedef struct svc {
  pid_t pid;
  char dir[512], prod[600], cons[600], log[600];
} svc;

static void sleep_ms(long ms) {
  struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&d, NULL);
}

/* Runs a program that dies with the test (a failed test leaves no etchd,
 * recorder or producer behind). */
/* Set: what spawn() starts may write files of at most this many bytes
 * (RLIMIT_FSIZE, SIGXFSZ ignored: a write past it fails with EFBIG, as a
 * full disk's with ENOSPC). */
static rlim_t spawn_fsize;

static pid_t spawn(char *const argv[], const char *out) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) FAIL("fork: %s", strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (spawn_fsize) {
      struct rlimit rl;
      getrlimit(RLIMIT_FSIZE, &rl);
      rl.rlim_cur = spawn_fsize;
      signal(SIGXFSZ, SIG_IGN);
      if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(126);
    }
    if (out) {
      int fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
    }
    execve(argv[0], argv, environ);
    _exit(127);
  }
  return pid;
}

static int wait_exit(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A private etchd; the clients find it through Perfetto's variables.
 * `extra`: up to two more arguments, or NULL. */
static void svc_start_with(svc *s, const char *extra, const char *extra2);
static void svc_start(svc *s) { svc_start_with(s, NULL, NULL); }
static void svc_start_with(svc *s, const char *extra, const char *extra2) {
  snprintf(s->dir, sizeof s->dir, "%s", etch_test_tmpdir());
  snprintf(s->prod, sizeof s->prod, "%s/p.sock", s->dir);
  snprintf(s->cons, sizeof s->cons, "%s/c.sock", s->dir);
  snprintf(s->log, sizeof s->log, "%s/etchd.log", s->dir);
  setenv("PERFETTO_PRODUCER_SOCK_NAME", s->prod, 1);
  setenv("PERFETTO_CONSUMER_SOCK_NAME", s->cons, 1);
  char *argv[] = {(char *)ETCHD_BIN, "-v", (char *)extra, (char *)extra2,
                  NULL};
  s->pid = spawn(argv, s->log);
  /* Listening, not only there: a socket file left by a killed etchd is
   * there before the new one replaces it. */
  for (int i = 0; i < 3000; i++) { /* 30 s at most */
    int fd;
    if (etch__ipc_connect(s->cons, &fd) == ETCH_OK) {
      close(fd);
      return;
    }
    sleep_ms(10);
  }
  FAIL("etchd did not start (see %s)", s->log);
}

/* Lines of etchd's log that hold `needle`. */
static int log_lines(const svc *s, const char *needle) {
  FILE *f = fopen(s->log, "r");
  char line[512];
  int n = 0;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, needle)) n++;
  if (f) fclose(f);
  return n;
}

/* Waits for an event: checks `cond` every 10 ms until it holds, and fails
 * the test with the message if it still does not after 30 s (a bound that
 * only ends a hang; no test waits for a time window). */
#define WAIT_UNTIL(cond, ...)                                \
  do {                                                       \
    for (int wait_i_ = 0; wait_i_ < 3000 && !(cond); wait_i_++) \
      sleep_ms(10);                                          \
    if (!(cond)) FAIL(__VA_ARGS__);                          \
  } while (0)

/* Until etchd's log has at least `n` lines holding `needle`. */
static void wait_log(const svc *s, const char *needle, int n) {
  WAIT_UNTIL(log_lines(s, needle) >= n,
             "etchd's log (%s) has %d lines with \"%s\", not %d", s->log,
             log_lines(s, needle), needle, n);
}

/* Whether `pid`, a child, has ended (left unreaped for wait_exit). */
static bool child_ended(pid_t pid) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         si.si_pid == pid;
}

/* Consumers' sessions etchd took or refused, from its log. */
static int log_sessions(const svc *s) {
  return log_lines(s, " buffers, ") + log_lines(s, ": session refused");
}

/* Whether process `pid` catches SIGINT (/proc/PID/status, SigCgt). */
static bool catches_sigint(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  unsigned long long mask = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "SigCgt: %llx", &mask) == 1) break;
  if (f) fclose(f);
  return (mask >> (SIGINT - 1)) & 1;
}

/* Until etchd has taken or refused one more session than `before` and the
 * recorder `rec` catches SIGINT (it sets its handler after asking: a
 * SIGINT before would end it at once), or until `rec` has ended (it failed
 * before asking). */
static void wait_session(const svc *s, int before, pid_t rec) {
  WAIT_UNTIL((log_sessions(s) > before && catches_sigint(rec)) ||
                 child_ended(rec),
             "etchd's log (%s) shows no session of pid %d, or it does not "
             "catch SIGINT",
             s->log, (int)rec);
}

static void svc_stop(svc *s) {
  kill(s->pid, SIGTERM);
  int rc = wait_exit(s->pid);
  if (rc != 0) FAIL("etchd ended with %d (see %s)", rc, s->log);
  /* A sanitizer's report in etchd fails the test, though etchd went on. */
  if (log_lines(s, "runtime error") || log_lines(s, "Sanitizer"))
    FAIL("etchd's log (%s) has a sanitizer's report", s->log);
}

/* `etch record --system -o OUT` in the background, until SIGINT. */
static pid_t record_start(const svc *s, const char *out, const char *extra) {
  char log[700];
  snprintf(log, sizeof log, "%s/record.log", s->dir);
  char *argv[8] = {(char *)ETCH_BIN, "record", "--system", "-o", (char *)out,
                   NULL, NULL, NULL};
  if (extra) argv[5] = (char *)extra;
  int before = log_sessions(s);
  pid_t pid = spawn(argv, log);
  wait_session(s, before, pid); /* its session is set up */
  return pid;
}

/* `etch record --config NAME.pbtx -o NAME.pftrace [EXTRA]` with `text` as
 * the config, in the background; the trace's path into out. */
static pid_t record_config(const svc *s, const char *name, const char *text,
                           const char *extra, char *out, size_t cap) {
  char cfg[700], log[700];
  snprintf(cfg, sizeof cfg, "%s/%s.pbtx", s->dir, name);
  snprintf(log, sizeof log, "%s/record.log", s->dir);
  snprintf(out, cap, "%s/%s.pftrace", s->dir, name);
  FILE *f = fopen(cfg, "w");
  ASSERT_TRUE(f != NULL);
  fputs(text, f);
  fclose(f);
  char *argv[] = {(char *)ETCH_BIN, "record", "--config", cfg, "-o", out,
                  (char *)extra, NULL};
  int before = log_sessions(s);
  pid_t pid = spawn(argv, log);
  wait_session(s, before, pid); /* its session is set up */
  return pid;
}

static pid_t producer(const char *name, int threads, long events) {
  char t[16], e[24];
  snprintf(t, sizeof t, "%d", threads);
  snprintf(e, sizeof e, "%ld", events);
  setenv("ETCH_SYSTEM_WAIT_MS", "3000", 1);
  char *argv[] = {(char *)SVC_PRODUCER, (char *)name, t, e, NULL};
  return spawn(argv, NULL);
}

/* trusted_pid of each sequence, from the packets themselves. */
static void seq_pids(const uint8_t *d, size_t n, int32_t *pids, size_t cap) {
  etch__pb_dec dec;
  etch__pb_field f;
  etch__pb_dec_init(&dec, d, n);
  while (etch__pb_next(&dec, &f)) {
    if (f.id != 1 || f.wt != 2) continue;
    etch__pb_dec p;
    etch__pb_field g;
    uint64_t seq = 0;
    int64_t pid = -1;
    etch__pb_dec_init(&p, f.data, f.len);
    while (etch__pb_next(&p, &g)) {
      if (g.id == 10) seq = g.u;
      if (g.id == 79) pid = (int64_t)g.u;
    }
    if (seq < cap && pid >= 0) pids[seq] = (int32_t)pid;
  }
}

/* Checks that thread `k` of process `pid` recorded ticks 0..n-1 in order
 * (n < 0: a prefix 0..m-1 of any length m >= 1), returns how many. */
/* The thread track of svc_producer's thread `k` in process `pid`, or NULL. */
static const td_track *worker_track(const td_trace *t, int32_t pid, int k) {
  char name[32];
  snprintf(name, sizeof name, "worker-%d", k);
  const td_track *tr = NULL;
  for (size_t i = 0; i < t->ntracks; i++)
    if (t->tracks[i].is_thread && t->tracks[i].pid == pid &&
        t->tracks[i].name && !strcmp(t->tracks[i].name, name))
      tr = &t->tracks[i];
  return tr;
}

static long check_ticks(const td_trace *t, const int32_t *pids, size_t cap,
                        int32_t pid, int k, long n) {
  char name[32];
  snprintf(name, sizeof name, "worker-%d", k);
  const td_track *tr = worker_track(t, pid, k);
  if (!tr) FAIL("no track %s of pid %d", name, (int)pid);
  long next = 0;
  for (size_t i = 0; i < t->nev; i++) {
    const td_event *e = &t->ev[i];
    if (e->track != tr->uuid || !e->name || strcmp(e->name, "tick")) continue;
    const td_arg *a = td_arg_of(e, "i");
    if (!a || a->i != next)
      FAIL("pid %d %s: tick %ld where %ld was due", (int)pid, name,
           a ? (long)a->i : -1L, next);
    if (e->seq >= cap || pids[e->seq] != pid)
      FAIL("pid %d %s: sequence %u stamped with pid %d", (int)pid, name,
           e->seq, e->seq < cap ? (int)pids[e->seq] : -1);
    next++;
  }
  if (n >= 0 && next != n)
    FAIL("pid %d %s: %ld ticks, expected %ld", (int)pid, name, next, n);
  if (n < 0 && next < 1) FAIL("pid %d %s: no ticks", (int)pid, name);
  return next;
}

static void decode(const char *path, td_trace *t, int32_t *pids, size_t cap) {
  size_t n;
  uint8_t *d = etch_test_read_file(path, &n);
  if (!d) FAIL("no trace at %s", path);
  memset(pids, 0xff, cap * sizeof *pids);
  seq_pids(d, n, pids, cap);
  if (td_decode(d, n, t) != 0) FAIL("trace does not decode: %s", t->error);
  free(d);
}

#define NPROD 4
#define NTHREADS 2
#define NEVENTS 2000

/* Under the sanitizers every producer runs several times slower: the
 * large runs shrink so that the suite's other tests keep their timing. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#define MANY 4
#define MANY_EVENTS 5000
#else
#define SANITIZED 0
#define MANY 16
#define MANY_EVENTS 20000
#endif

/* Four processes of two threads each, started after the session: every
 * event arrives once, in order per thread, stamped with its process. */
TEST(many_producers_one_trace) {
  svc s;
  svc_start(&s);
  char out[700];
  snprintf(out, sizeof out, "%s/all.pftrace", s.dir);
  pid_t rec = record_start(&s, out, NULL);
  pid_t p[NPROD];
  for (int i = 0; i < NPROD; i++) {
    char name[16];
    snprintf(name, sizeof name, "prod-%d", i);
    p[i] = producer(name, NTHREADS, NEVENTS);
  }
  for (int i = 0; i < NPROD; i++) ASSERT_EQ_INT(wait_exit(p[i]), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  for (int i = 0; i < NPROD; i++)
    for (int k = 0; k < NTHREADS; k++)
      check_ticks(&t, pids, 4096, p[i], k, NEVENTS);
  ASSERT_EQ_INT((int)td_count(&t, 3, "tick"), NPROD * NTHREADS * NEVENTS);
  ASSERT_EQ_INT((int)t.prev_dropped, 0);
  /* Each logged an important event before its data source started: it
   * reached the service's session, on that process's sequence. */
  for (int i = 0; i < NPROD; i++) {
    int found = 0;
    for (size_t k = 0; k < t.nev; k++) {
      const td_event *e = &t.ev[k];
      if (!e->name || strcmp(e->name, "Svc.Start") || e->seq >= 4096 ||
          pids[e->seq] != p[i])
        continue;
      const td_arg *a = td_arg_of(e, "pid");
      ASSERT_TRUE(a != NULL);
      ASSERT_EQ_INT((int)a->i, (int)p[i]);
      found++;
    }
    if (found != 1) FAIL("%d Svc.Start from pid %d", found, (int)p[i]);
  }
  /* Each process is named on its own track. */
  int named = 0;
  for (size_t i = 0; i < t.ntracks; i++)
    for (int k = 0; k < NPROD; k++)
      if (t.tracks[i].is_process && t.tracks[i].pid == p[k]) named++;
  ASSERT_TRUE(named >= NPROD);
  td_free(&t);
  svc_stop(&s);
}

/* A producer killed with SIGKILL while it writes: the service goes on,
 * another producer's data is whole, the killed one's is a clean prefix. */
TEST(a_producer_killed_mid_write_harms_no_one) {
  svc s;
  svc_start(&s);
  char out[700];
  snprintf(out, sizeof out, "%s/kill.pftrace", s.dir);
  pid_t rec = record_start(&s, out, NULL);
  pid_t victim = producer("victim", 2, 0);
  wait_log(&s, "(victim), instance", 1); /* it records */
  pid_t good = producer("good", 2, NEVENTS);
  wait_log(&s, "(good), instance", 1); /* it records too */
  kill(victim, SIGKILL);
  wait_exit(victim);
  ASSERT_EQ_INT(wait_exit(good), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  for (int k = 0; k < 2; k++) {
    check_ticks(&t, pids, 4096, good, k, NEVENTS);
    check_ticks(&t, pids, 4096, victim, k, -1);
  }
  td_free(&t);
  svc_stop(&s);
}

static int raw_connect(const char *path) {
  int fd;
  if (etch__ipc_connect(path, &fd) != ETCH_OK) FAIL("%s", etch_last_error());
  return fd;
}

/* Bytes that are not frames, and a frame that lies about its length: the
 * service drops that peer and keeps serving. */
TEST(malformed_frames_cost_only_their_sender) {
  svc s;
  svc_start(&s);
  int a = raw_connect(s.prod);
  const char junk[] = "\x05\x00\x00\x00\xff\xff\xff\xff\xff";
  ASSERT_TRUE(write(a, junk, sizeof junk - 1) > 0);
  int b = raw_connect(s.prod);
  const uint8_t huge[4] = {0xff, 0xff, 0xff, 0x7f};
  ASSERT_TRUE(write(b, huge, 4) == 4);
  int c = raw_connect(s.cons);
  ASSERT_TRUE(write(c, junk, sizeof junk - 1) > 0);
  /* Each is closed by the service. */
  int fds[3] = {a, b, c};
  for (int i = 0; i < 3; i++) {
    char buf[64];
    struct timeval tv = {5, 0};
    fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) & ~O_NONBLOCK);
    setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssize_t n = read(fds[i], buf, sizeof buf);
    /* An end of stream, or a reset (the service closed with our bytes
     * unread); not a timeout. */
    if (!(n == 0 || (n < 0 && errno == ECONNRESET)))
      FAIL("peer %d: read gave %zd (%s), not a close", i, n, strerror(errno));
    close(fds[i]);
  }
  /* And the service still records. */
  char out[700];
  snprintf(out, sizeof out, "%s/after.pftrace", s.dir);
  pid_t rec = record_start(&s, out, NULL);
  pid_t p = producer("after", 1, 100);
  ASSERT_EQ_INT(wait_exit(p), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  check_ticks(&t, pids, 4096, p, 0, 100);
  td_free(&t);
  ASSERT_EQ_INT(log_lines(&s, "gone: malformed IPC frame") +
                    log_lines(&s, "larger than the limit"),
                3);
  svc_stop(&s);
}

/* ---- peers written by hand, as Perfetto's own behave ---- */

typedef struct raw {
  etch_ipc_conn c;
  etch_ipc_frame bind;
  uint8_t *names;
  uint32_t svc;
  uint64_t req;
} raw;

static void raw_close(raw *r) {
  free(r->names);
  etch__ipc_conn_close(&r->c);
}

static void raw_next(raw *r, etch_ipc_frame *f) {
  for (int i = 0; i < 200; i++) {
    int n = etch__ipc_conn_next(&r->c, f);
    if (n == 1) return;
    if (n < 0 || (r->c.failed && !r->c.eof)) FAIL("raw: %s", r->c.err);
    etch__ipc_conn_wait(&r->c, 50);
  }
  FAIL("raw: nothing from the service");
}

static void raw_invoke(raw *r, const char *method, const etch__pb_buf *b);
static void raw_last_reply(raw *r, etch_ipc_frame *g);

/* Sync, answered: etchd has handled every request sent before it (it
 * handles a connection's requests in order). */
static void raw_sync(raw *r) {
  raw_invoke(r, "Sync", NULL);
  etch_ipc_frame g;
  raw_last_reply(r, &g);
}

static void raw_invoke(raw *r, const char *method, const etch__pb_buf *b) {
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_INVOKE;
  f.request_id = ++r->req;
  f.service_id = r->svc;
  f.method_id = etch__ipc_method_id(&r->bind, method);
  ASSERT_TRUE(f.method_id != 0);
  if (b) {
    f.body.data = etch__pb_buf_data(b);
    f.body.len = (uint32_t)etch__pb_buf_len(b);
  }
  ASSERT_OK(etch__ipc_conn_send(&r->c, &f, -1));
}

/* Connects to `path` and binds `port` ("ProducerPort", "ConsumerPort"). */
static void raw_open(raw *r, const char *path, const char *port) {
  memset(r, 0, sizeof *r);
  etch__ipc_conn_init(&r->c, raw_connect(path), 1 << 20);
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_BIND;
  f.request_id = ++r->req;
  f.name.data = (const uint8_t *)port;
  f.name.len = (uint32_t)strlen(port);
  ASSERT_OK(etch__ipc_conn_send(&r->c, &f, -1));
  raw_next(r, &r->bind);
  ASSERT_EQ_INT(r->bind.kind, ETCH_IPC_BIND_REPLY);
  ASSERT_TRUE(r->bind.success);
  r->svc = r->bind.service_id;
  /* keep the method names: they point into the receive buffer */
  r->names = malloc(4096);
  size_t off = 0;
  for (uint32_t i = 0; i < r->bind.nmethods; i++) {
    memcpy(r->names + off, r->bind.methods[i].name.data,
           r->bind.methods[i].name.len);
    r->bind.methods[i].name.data = r->names + off;
    off += r->bind.methods[i].name.len;
  }
}

/* A producer that asks the service to move a chunk outside its shared
 * memory is disconnected with the reason. */
TEST(a_commit_outside_the_shared_memory_is_refused) {
  svc s;
  svc_start(&s);
  raw r;
  raw_open(&r, s.prod, "ProducerPort");
  raw_invoke(&r, "InitializeConnection", NULL);
  /* chunks_to_move { page: 1000000 chunk: 3 target_buffer: 1 } */
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_nested m;
  etch__pb_nested_begin(&b.s, ETCH_CDR_CHUNKS_TO_MOVE, &m);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_PAGE, 1000000);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_CHUNK, 3);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_TARGET_BUFFER, 1);
  etch__pb_nested_end(&b.s, &m);
  raw_invoke(&r, "CommitData", &b);
  etch__pb_buf_free(&b);
  etch_ipc_frame g;
  for (int i = 0; i < 100 && !r.c.failed; i++) {
    etch__ipc_conn_wait(&r.c, 100);
    while (etch__ipc_conn_next(&r.c, &g) == 1) {
    }
  }
  ASSERT_TRUE(r.c.failed);
  raw_close(&r);
  wait_log(&s, "outside the shared memory (page 1000000, chunk 3)", 1);
  ASSERT_EQ_INT(
      log_lines(&s, "outside the shared memory (page 1000000, chunk 3)"), 1);
  svc_stop(&s);
}

/* A consumer that leaves frees its session; --list shows the state. */
TEST(a_consumer_that_leaves_frees_its_session) {
  svc s;
  svc_start(&s);
  char out[700], list[700];
  snprintf(out, sizeof out, "%s/gone.pftrace", s.dir);
  pid_t rec = record_start(&s, out, NULL);
  pid_t p = producer("lister", 1, 0);
  wait_log(&s, "(lister), instance", 1); /* in the session */
  snprintf(list, sizeof list, "%s/list.txt", s.dir);
  char *argv[] = {(char *)ETCH_BIN, "record", "--list", NULL};
  ASSERT_EQ_INT(wait_exit(spawn(argv, list)), 0);
  size_t n;
  char *text = (char *)etch_test_read_file(list, &n);
  ASSERT_TRUE(text != NULL);
  char want[64];
  snprintf(want, sizeof want, "lister  pid %d", (int)p);
  if (!memmem(text, n, want, strlen(want))) FAIL("--list says:\n%.*s", (int)n, text);
  ASSERT_TRUE(memmem(text, n, "track_event (producer", 21) != NULL);
  ASSERT_TRUE(memmem(text, n, ": svc", 5) != NULL);
  ASSERT_TRUE(memmem(text, n, "sessions: 1", 11) != NULL);
  free(text);
  kill(rec, SIGKILL); /* no goodbye */
  wait_exit(rec);
  wait_log(&s, ": freed", 1);
  unlink(list);
  ASSERT_EQ_INT(wait_exit(spawn(argv, list)), 0);
  text = (char *)etch_test_read_file(list, &n);
  ASSERT_TRUE(memmem(text, n, "sessions: 0", 11) != NULL);
  free(text);
  kill(p, SIGKILL);
  wait_exit(p);
  svc_stop(&s);
}

/* A config with an option etch does not run is refused by name. */
TEST(record_refuses_a_config_it_would_not_honour) {
  svc s;
  svc_start(&s);
  char cfg[700], log[700];
  snprintf(cfg, sizeof cfg, "%s/c.pbtx", s.dir);
  snprintf(log, sizeof log, "%s/refuse.log", s.dir);
  FILE *f = fopen(cfg, "w");
  fputs("buffers { size_kb: 1024 }\ntrigger_config { trigger_timeout_ms: 1 }\n", f);
  fclose(f);
  char *argv[] = {(char *)ETCH_BIN, "record", "--config", cfg, "-o",
                  "/dev/null", NULL};
  ASSERT_EQ_INT(wait_exit(spawn(argv, log)), 1);
  size_t n;
  char *text = (char *)etch_test_read_file(log, &n);
  ASSERT_TRUE(text && memmem(text, n, "line 2: option 'trigger_config' of "
                                      "TraceConfig is not supported", 59));
  free(text);
  svc_stop(&s);
}

/* Writes fragments "pkt-0".."pkt-{n-1}" (each a TracePacket with only
 * for_testing = 900) into chunk (page, idx) of the shared memory, state
 * being written, as a writer in the middle of its chunk leaves it. */
static void raw_write_chunk(uint8_t *smb, uint32_t page_size, uint32_t page,
                            uint16_t writer, uint32_t chunk_id, int n) {
  etch_smb m;
  ASSERT_OK(etch__smb_init(&m, smb, (uint64_t)page_size * 4, page_size));
  if (etch__smb_bitmap_layout(etch__smb_bitmap(&m, page)) == 0)
    ASSERT_TRUE(etch__smb_try_partition(&m, page, ETCH_SMB_DIV1));
  uint8_t *c = etch__smb_try_acquire_write(&m, page, 0, writer, chunk_id, 0);
  ASSERT_TRUE(c != NULL);
  uint8_t *p = c + ETCH_SMB_CHUNK_HEADER;
  for (int i = 0; i < n; i++) {
    char text[16];
    int tl = snprintf(text, sizeof text, "pkt-%d", i);
    /* fragment: 4-byte size, then 0xa2 0x38 (field 900, LEN) len text */
    uint32_t sz = (uint32_t)(3 + tl);
    etch__pb_put_redundant4(p, sz);
    p += 4;
    *p++ = 0xa2;
    *p++ = 0x38;
    *p++ = (uint8_t)tl;
    memcpy(p, text, (size_t)tl);
    p += tl;
  }
  etch_smb_chunk_header *h = (etch_smb_chunk_header *)c;
  __atomic_store_n(&h->packets, (uint16_t)n, __ATOMIC_RELEASE);
}

/* Counts the for_testing payloads "pkt-N" in a trace file. */
static int count_testing(const char *path, int *max_n) {
  size_t n;
  uint8_t *d = etch_test_read_file(path, &n);
  if (!d) return -1;
  int count = 0;
  *max_n = -1;
  etch__pb_dec dec;
  etch__pb_field f;
  etch__pb_dec_init(&dec, d, n);
  while (etch__pb_next(&dec, &f)) {
    etch__pb_dec p;
    etch__pb_field g;
    etch__pb_dec_init(&p, f.data, f.len);
    while (etch__pb_next(&p, &g))
      if (g.id == 900 && g.wt == 2 && g.len > 4 && !memcmp(g.data, "pkt-", 4)) {
        count++;
        int k = atoi((const char *)g.data + 4);
        if (k > *max_n) *max_n = k;
      }
  }
  free(d);
  return count;
}

/* A producer that never commits its last chunk and never answers the
 * flush (Perfetto's track_event leaves the last chunk to the service): the
 * flush ends at its timeout, and the service copies that chunk's whole
 * packets out of the shared memory itself. */
/* A producer written by hand: InitializeConnection (with smb_scraping_mode
 * `scraping`, 0 unset), GetAsyncCommand, RegisterDataSource "raw.source"
 * (handles_incremental_state_clear when `clears`), then reads commands
 * until StartDataSource, mapping the shared memory on the way. Its
 * instance id in *inst. */
static void raw_started(const svc *s, raw *r, uint32_t scraping, bool clears,
                        uint8_t **smb_out, uint32_t *page_kb_out,
                        uint64_t *inst) {
  raw_open(r, s->prod, "ProducerPort");
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_write_string_field(&b.s, ETCH_ICR_PRODUCER_NAME, "raw");
  if (scraping)
    etch__pb_write_varint_field(&b.s, ETCH_ICR_SMB_SCRAPING_MODE, scraping);
  raw_invoke(r, "InitializeConnection", &b);
  raw_invoke(r, "GetAsyncCommand", NULL);
  etch__pb_buf_reset(&b);
  etch__pb_nested d;
  etch__pb_nested_begin(&b.s, ETCH_RDS_DESCRIPTOR, &d);
  etch__pb_write_string_field(&b.s, ETCH_DSD_NAME, "raw.source");
  if (clears)
    etch__pb_write_varint_field(&b.s, ETCH_DSD_HANDLES_INCREMENTAL_STATE_CLEAR,
                               1);
  etch__pb_nested_end(&b.s, &d);
  raw_invoke(r, "RegisterDataSource", &b);
  etch__pb_buf_free(&b);
  /* Until StartDataSource, taking the shared memory on the way. */
  uint8_t *smb = NULL;
  uint32_t page_kb = 0;
  bool started = false;
  for (int i = 0; i < 20 && !started; i++) {
    etch_ipc_frame g;
    raw_next(r, &g);
    if (g.kind != ETCH_IPC_REPLY || !g.has_more) continue;
    etch__pb_dec dec;
    etch__pb_field fl;
    etch__pb_dec_init(&dec, g.body.data, g.body.len);
    while (etch__pb_next(&dec, &fl)) {
      if (fl.id == ETCH_GAC_SETUP_TRACING) {
        etch__pb_dec sd;
        etch__pb_field sf;
        etch__pb_dec_init(&sd, fl.data, fl.len);
        while (etch__pb_next(&sd, &sf))
          if (sf.id == ETCH_GAC_SETUP_PAGE_SIZE_KB) page_kb = (uint32_t)sf.u;
        int fd = etch__ipc_conn_take_fd(&r->c);
        ASSERT_TRUE(fd >= 0);
        struct stat st;
        ASSERT_TRUE(fstat(fd, &st) == 0);
        smb = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                   MAP_SHARED, fd, 0);
        ASSERT_TRUE(smb != MAP_FAILED);
        close(fd);
      } else if (fl.id == ETCH_GAC_START_DATA_SOURCE) {
        started = true;
        etch__pb_dec sd;
        etch__pb_field sf;
        etch__pb_dec_init(&sd, fl.data, fl.len);
        while (etch__pb_next(&sd, &sf))
          if (sf.id == ETCH_GAC_DS_INSTANCE_ID) *inst = sf.u;
      }
    }
  }
  ASSERT_TRUE(started && smb && page_kb);
  *smb_out = smb;
  *page_kb_out = page_kb;
}

/* Leaves 5 packets (the last maybe half written) in an uncommitted chunk of
 * a producer that does (or asked not to have it done) get scraped; returns
 * the testing packets the trace holds and the largest n among them. */
static int leave_uncommitted(uint32_t scraping, int *max_n) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "scraped",
                            "buffers { size_kb: 1024 }\n"
                            "data_sources { config { name: \"raw.source\" } }\n"
                            "flush_timeout_ms: 300\ndata_source_stop_timeout_ms: 300\n",
                            NULL, out, sizeof out);
  raw r;
  uint8_t *smb;
  uint32_t page_kb;
  uint64_t inst = 0;
  raw_started(&s, &r, scraping, false, &smb, &page_kb, &inst);
  /* Writer 1 registers its buffer, as Perfetto's SDK does... */
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_WRITER_ID, 1);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_TARGET_BUFFER, 1);
  raw_invoke(&r, "RegisterTraceWriter", &b);
  /* ... and leaves 5 packets in its first chunk, the last one maybe half
   * written, uncommitted. */
  raw_write_chunk(smb, page_kb * 1024, 0, 1, 0, 5);
  etch__ipc_conn_flush(&r.c);
  raw_sync(&r); /* the writer is registered */
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  int n = count_testing(out, max_n);
  etch__pb_buf_free(&b);
  raw_close(&r);
  svc_stop(&s);
  return n;
}

/* Leaves 6 packets "pkt-0".."pkt-5" in an uncommitted chunk of writer 1,
 * of which pkt-1 also sets trusted_pid (79) and trusted_uid (3), pkt-3 has
 * a length past its end, pkt-4 carries a compressed_packets field: a
 * producer speaking for the service, or writing garbage. */
static void raw_write_hostile_chunk(uint8_t *smb, uint32_t page_size) {
  etch_smb m;
  ASSERT_OK(etch__smb_init(&m, smb, (uint64_t)page_size * 4, page_size));
  if (etch__smb_bitmap_layout(etch__smb_bitmap(&m, 0)) == 0)
    ASSERT_TRUE(etch__smb_try_partition(&m, 0, ETCH_SMB_DIV1));
  uint8_t *c = etch__smb_try_acquire_write(&m, 0, 0, 1, 0, 0);
  ASSERT_TRUE(c != NULL);
  uint8_t *p = c + ETCH_SMB_CHUNK_HEADER;
  for (int i = 0; i < 6; i++) {
    uint8_t body[64];
    uint32_t bl = 0;
    int tl = snprintf((char *)body + 3, 16, "pkt-%d", i);
    body[0] = 0xa2; /* for_testing (900), LEN */
    body[1] = 0x38;
    body[2] = (uint8_t)tl;
    bl = 3 + (uint32_t)tl;
    if (i == 1) {
      const uint8_t trusted[] = {0xf8, 0x04, 0x07, 0x18, 0x05}; /* 79: 7, 3: 5 */
      memcpy(body + bl, trusted, sizeof trusted);
      bl += sizeof trusted;
    } else if (i == 3) {
      body[bl++] = 0x0a; /* field 1, LEN ... */
      body[bl++] = 0x7f; /* ... of 127 bytes that are not there */
    } else if (i == 4) {
      const uint8_t comp[] = {0x92, 0x03, 0x01, 0x00}; /* 50: 1 byte */
      memcpy(body + bl, comp, sizeof comp);
      bl += sizeof comp;
    }
    etch__pb_put_redundant4(p, bl);
    p += 4;
    memcpy(p, body, bl);
    p += bl;
  }
  etch_smb_chunk_header *h = (etch_smb_chunk_header *)c;
  __atomic_store_n(&h->packets, (uint16_t)6, __ATOMIC_RELEASE);
}

/* TraceStats.invalid_packets in a trace file (-1: none). */
static long trace_invalid_packets(const char *path) {
  size_t n;
  uint8_t *d = etch_test_read_file(path, &n);
  if (!d) return -2;
  long v = -1;
  etch__pb_dec dec, pk, ts;
  etch__pb_field f, g, h;
  etch__pb_dec_init(&dec, d, n);
  while (etch__pb_next(&dec, &f)) {
    etch__pb_dec_init(&pk, f.data, f.len);
    while (etch__pb_next(&pk, &g)) {
      if (g.id != ETCH_PKT_TRACE_STATS || g.wt != 2) continue;
      etch__pb_dec_init(&ts, g.data, g.len);
      while (etch__pb_next(&ts, &h))
        if (h.id == ETCH_TS_INVALID_PACKETS && h.wt == 0) v = (long)h.u;
    }
  }
  free(d);
  return v;
}

/* A producer's packets that set fields only the service writes, or do not
 * decode, are left out of the trace and counted (TraceStats
 * invalid_packets); its other packets are kept. */
TEST(a_producers_packets_cannot_speak_for_the_service) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "hostile",
                            "buffers { size_kb: 1024 }\n"
                            "data_sources { config { name: \"raw.source\" } }\n"
                            "flush_timeout_ms: 300\ndata_source_stop_timeout_ms: 300\n",
                            NULL, out, sizeof out);
  raw r;
  uint8_t *smb;
  uint32_t page_kb;
  uint64_t inst = 0;
  raw_started(&s, &r, 0, false, &smb, &page_kb, &inst);
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_WRITER_ID, 1);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_TARGET_BUFFER, 1);
  raw_invoke(&r, "RegisterTraceWriter", &b);
  raw_write_hostile_chunk(smb, page_kb * 1024);
  etch__ipc_conn_flush(&r.c);
  raw_sync(&r); /* the writer is registered */
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  /* Scraped: the first 5 (the 6th may be half written); of them pkt-0 and
   * pkt-2 are sound. */
  int max_n;
  ASSERT_EQ_INT(count_testing(out, &max_n), 2);
  ASSERT_EQ_INT(max_n, 2);
  ASSERT_EQ_INT((int)trace_invalid_packets(out), 3);
  etch__pb_buf_free(&b);
  raw_close(&r);
  svc_stop(&s);
}

/* A chunk of six packets, each "pkt-i" for testing: 0 with a process
 * descriptor naming `pid` (the producer's), 1 one naming pid 1, 2 a thread
 * descriptor of pid 1, 3 a thread descriptor of `pid`, 4 nothing more. */
static void raw_write_descriptor_chunk(uint8_t *smb, uint32_t page_size,
                                       int32_t pid) {
  etch_smb m;
  ASSERT_OK(etch__smb_init(&m, smb, (uint64_t)page_size * 4, page_size));
  if (etch__smb_bitmap_layout(etch__smb_bitmap(&m, 0)) == 0)
    ASSERT_TRUE(etch__smb_try_partition(&m, 0, ETCH_SMB_DIV1));
  uint8_t *c = etch__smb_try_acquire_write(&m, 0, 0, 1, 0, 0);
  ASSERT_TRUE(c != NULL);
  uint8_t *p = c + ETCH_SMB_CHUNK_HEADER;
  for (int i = 0; i < 6; i++) {
    etch__pb_buf b;
    etch__pb_buf_init(&b, 64, 0);
    char tag[16];
    snprintf(tag, sizeof tag, "pkt-%d", i);
    etch__pb_write_bytes_field(&b.s, 900, tag, strlen(tag));
    if (i < 4) {
      etch__pb_nested td, d;
      etch__pb_nested_begin(&b.s, ETCH_PKT_TRACK_DESCRIPTOR, &td);
      etch__pb_write_varint_field(&b.s, ETCH_TD_UUID, 77 + (uint64_t)i);
      etch__pb_nested_begin(&b.s, i < 2 ? ETCH_TD_PROCESS : ETCH_TD_THREAD, &d);
      etch__pb_write_varint_field(&b.s, 1,
                                  (uint64_t)(i == 0 || i == 3 ? pid : 1));
      if (i >= 2) etch__pb_write_varint_field(&b.s, 2, 1234);
      etch__pb_nested_end(&b.s, &d);
      etch__pb_nested_end(&b.s, &td);
    }
    uint32_t bl = (uint32_t)etch__pb_buf_len(&b);
    etch__pb_put_redundant4(p, bl);
    p += 4;
    memcpy(p, etch__pb_buf_data(&b), bl);
    p += bl;
    etch__pb_buf_free(&b);
  }
  etch_smb_chunk_header *h = (etch_smb_chunk_header *)c;
  __atomic_store_n(&h->packets, (uint16_t)6, __ATOMIC_RELEASE);
}

/* A producer's process and thread descriptors that claim another pid than
 * its own (etchd knows it: SO_PEERCRED) are left out and counted as
 * invalid packets, in etch and in trace_processor: it cannot put its
 * events under another process. Its honest ones stay. */
TEST(a_producer_cannot_pass_for_another_process) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "liar",
                            "buffers { size_kb: 1024 }\n"
                            "data_sources { config { name: \"raw.source\" } }\n"
                            "flush_timeout_ms: 300\ndata_source_stop_timeout_ms: 300\n",
                            NULL, out, sizeof out);
  raw r;
  uint8_t *smb;
  uint32_t page_kb;
  uint64_t inst = 0;
  raw_started(&s, &r, 0, false, &smb, &page_kb, &inst);
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_WRITER_ID, 1);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_TARGET_BUFFER, 1);
  raw_invoke(&r, "RegisterTraceWriter", &b);
  raw_write_descriptor_chunk(smb, page_kb * 1024, (int32_t)getpid());
  etch__ipc_conn_flush(&r.c);
  raw_sync(&r); /* the writer is registered */
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  /* Scraped: the first 5 (the 6th may be half written); of them pkt-1
   * and pkt-2 lie. */
  int max_n;
  ASSERT_EQ_INT(count_testing(out, &max_n), 3);
  ASSERT_EQ_INT(max_n, 4);
  ASSERT_EQ_INT((int)trace_invalid_packets(out), 2);
  etch__pb_buf_free(&b);
  raw_close(&r);
  svc_stop(&s);
}

/* A producer that completed a chunk (5 packets) but went away before it
 * asked the service to move it (killed, say): the service takes the chunk
 * before it lets the shared memory go, every packet of it. */
TEST(a_producer_that_leaves_keeps_its_completed_chunks) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "left",
                            "buffers { size_kb: 1024 }\n"
                            "data_sources { config { name: \"raw.source\" } }\n",
                            NULL, out, sizeof out);
  raw r;
  uint8_t *smb;
  uint32_t page_kb;
  uint64_t inst = 0;
  raw_started(&s, &r, ETCH_ICR_SMB_SCRAPING_DISABLED, false, &smb, &page_kb,
              &inst);
  raw_write_chunk(smb, page_kb * 1024, 0, 1, 0, 5);
  etch_smb m;
  ASSERT_OK(etch__smb_init(&m, smb, (uint64_t)page_kb * 1024 * 4,
                           page_kb * 1024));
  ASSERT_TRUE(etch__smb_release_complete(&m, 0, 0));
  raw_close(&r); /* gone, the chunk never committed */
  /* Wait for the service's log to say it saw it go (bounded at 60 s,
   * only so that a broken service fails instead of hanging). */
  for (int i = 0; i < 6000 && !log_lines(&s, "(raw, pid"); i++) sleep_ms(10);
  ASSERT_EQ_INT(log_lines(&s, "(raw, pid"), 1);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  int max_n;
  ASSERT_EQ_INT(count_testing(out, &max_n), 5);
  ASSERT_EQ_INT(max_n, 4);
  svc_stop(&s);
}

TEST(the_service_scrapes_what_a_silent_producer_left) {
  int max_n;
  ASSERT_EQ_INT(leave_uncommitted(0, &max_n), 4);
  ASSERT_EQ_INT(max_n, 3);
}

/* smb_scraping_mode DISABLED (what libetch's producers ask: their chunks
 * being written hold nothing in the shared memory): not scraped. */
TEST(a_producer_that_asks_not_to_be_scraped_is_not) {
  int max_n = -1;
  ASSERT_EQ_INT(leave_uncommitted(ETCH_ICR_SMB_SCRAPING_DISABLED, &max_n), 0);
}

/* incremental_state_config { clear_period_ms }: the service sends
 * ClearIncrementalState naming the instance to a producer whose data
 * source handles it, again and again. */
TEST(clear_period_ms_sends_clear_incremental_state) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "cleared",
                            "buffers { size_kb: 1024 }\n"
                            "data_sources { config { name: \"raw.source\" } }\n"
                            "incremental_state_config { clear_period_ms: 20 }\n",
                            NULL, out, sizeof out);
  raw r;
  uint8_t *smb;
  uint32_t page_kb;
  uint64_t inst = 0;
  raw_started(&s, &r, 0, true, &smb, &page_kb, &inst);
  ASSERT_TRUE(inst != 0);
  int clears = 0;
  /* raw_next waits up to 10 s a frame: two clears must come. */
  for (int i = 0; i < 20 && clears < 2; i++) {
    etch_ipc_frame g;
    raw_next(&r, &g);
    if (g.kind != ETCH_IPC_REPLY || !g.has_more) continue;
    etch__pb_dec dec;
    etch__pb_field fl;
    etch__pb_dec_init(&dec, g.body.data, g.body.len);
    while (etch__pb_next(&dec, &fl)) {
      if (fl.id != ETCH_GAC_CLEAR_INCREMENTAL_STATE) continue;
      etch__pb_dec sd;
      etch__pb_field sf;
      etch__pb_dec_init(&sd, fl.data, fl.len);
      uint64_t id = 0;
      while (etch__pb_next(&sd, &sf))
        if (sf.id == ETCH_GAC_CLEAR_DATA_SOURCE_IDS) id = sf.u;
      ASSERT_EQ_U64(id, inst);
      clears++;
    }
  }
  ASSERT_EQ_INT(clears, 2);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  raw_close(&r);
  svc_stop(&s);
}

static pid_t producer_mode(const char *name, int threads, long events,
                           const char *mode) {
  char t[16], e[24];
  snprintf(t, sizeof t, "%d", threads);
  snprintf(e, sizeof e, "%ld", events);
  setenv("ETCH_SYSTEM_WAIT_MS", "3000", 1);
  char *argv[] = {(char *)SVC_PRODUCER, (char *)name, t, e, (char *)mode, NULL};
  return spawn(argv, NULL);
}

/* Records one producer (svc_producer NAME 2 EVENTS MODE, exiting 0) with
 * etch record --system into s->dir/FILE until it is done, and decodes the
 * trace into *t. The producer's pid. */
static pid_t record_producer(const svc *s, const char *file, const char *name,
                             long events, const char *mode, td_trace *t,
                             int32_t *pids, size_t npids) {
  char out[700];
  snprintf(out, sizeof out, "%s/%s", s->dir, file);
  pid_t rec = record_start(s, out, NULL);
  pid_t p = producer_mode(name, 2, events, mode);
  ASSERT_EQ_INT(wait_exit(p), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  decode(out, t, pids, npids);
  return p;
}

/* Svc.Start logged once the session records, then two threads start and
 * record: the service's trace has it once (their sequences' starts
 * replayed it, and it was there twice), in etch's decoder as in any. */
TEST(an_important_event_logged_during_a_session_is_in_its_trace_once) {
  svc s;
  svc_start(&s);
  td_trace t;
  static int32_t pids[4096];
  pid_t p = record_producer(&s, "imp.pftrace", "imp", 100, "important", &t,
                            pids, 4096);
  int found = 0;
  for (size_t k = 0; k < t.nev; k++) {
    const td_event *e = &t.ev[k];
    if (!e->name || strcmp(e->name, "Svc.Start")) continue;
    ASSERT_EQ_INT((int)td_arg_of(e, "pid")->i, (int)p);
    found++;
  }
  ASSERT_EQ_INT(found, 1);
  ASSERT_EQ_U64(t.unresolved, 0);
  for (int k = 0; k < 2; k++) check_ticks(&t, pids, 4096, p, k, 100);
  td_free(&t);
  svc_stop(&s);
}

/* A traced program that forks: the child is a producer of its own (its
 * pid, its connection, its shared memory), with none of the parent's
 * writers; both record everything. */
TEST(a_forked_child_is_a_producer_of_its_own) {
#if defined(__SANITIZE_THREAD__)
  return; /* ThreadSanitizer cannot start threads in a multi-threaded fork */
#endif
  svc s;
  svc_start(&s);
  td_trace t;
  static int32_t pids[4096];
  pid_t parent = record_producer(&s, "fork.pftrace", "forker", 1000, "fork",
                                 &t, pids, 4096);
  int32_t child = -1;
  for (size_t i = 0; i < t.ntracks; i++)
    if (t.tracks[i].is_thread && t.tracks[i].pid != parent &&
        t.tracks[i].name && !strcmp(t.tracks[i].name, "worker-0"))
      child = t.tracks[i].pid;
  ASSERT_TRUE(child > 0);
  for (int k = 0; k < 2; k++) {
    check_ticks(&t, pids, 4096, parent, k, 1000);
    check_ticks(&t, pids, 4096, child, k, 1000);
  }
  td_free(&t);
  ASSERT_EQ_INT(log_lines(&s, ": 'forker' pid "), 2);
  svc_stop(&s);
}

/* A packet of 180 000 bytes (three string args across many chunks) read
 * back through ReadBuffers: in several slices, over two replies, whole. */
TEST(a_packet_larger_than_a_reply_arrives_whole) {
  svc s;
  svc_start(&s);
  td_trace t;
  static int32_t pids[4096];
  pid_t p = record_producer(&s, "big.pftrace", "big", 1000, "big", &t, pids,
                            4096);
  for (int k = 0; k < 2; k++) check_ticks(&t, pids, 4096, p, k, 1000);
  ASSERT_EQ_INT((int)td_count(&t, 3, "big"), 1);
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *e = &t.ev[i];
    if (!e->name || strcmp(e->name, "big")) continue;
    for (int k = 0; k < 3; k++) {
      char key[4] = {'s', (char)('0' + k), 0, 0};
      const td_arg *a = td_arg_of(e, key);
      ASSERT_TRUE(a != NULL && a->s != NULL);
      ASSERT_EQ_U64(strlen(a->s), 60000);
      for (size_t b = 0; b < 60000; b++)
        if (a->s[b] != (char)('a' + (b + (size_t)k) % 26))
          FAIL("byte %zu of big arg %s", b, key);
    }
  }
  ASSERT_EQ_INT((int)t.prev_dropped, 0);
  td_free(&t);
  svc_stop(&s);
}

/* The shared memory a producer asks for: 2 MiB, or ETCH_SYSTEM_SMB_KB
 * when it is in range (256 to 32768 KiB). */
TEST(producer_asks_for_the_shared_memory_size) {
  static const struct {
    const char *env;
    long kb;
  } cases[] = {{NULL, 2048}, {"4096", 4096}, {"100", 2048}, {"x", 2048}};
  svc s;
  svc_start(&s);
  for (size_t c = 0; c < ETCH_ARRAY_SIZE(cases); c++) {
    if (cases[c].env)
      setenv("ETCH_SYSTEM_SMB_KB", cases[c].env, 1);
    else
      unsetenv("ETCH_SYSTEM_SMB_KB");
    td_trace t;
    static int32_t pids[4096];
    char file[32];
    snprintf(file, sizeof file, "smb%zu.pftrace", c);
    pid_t p = record_producer(&s, file, "smb", 100, "smb", &t, pids, 4096);
    unsetenv("ETCH_SYSTEM_SMB_KB");
    for (int k = 0; k < 2; k++) check_ticks(&t, pids, 4096, p, k, 100);
    ASSERT_EQ_INT((int)td_count(&t, 3, "smb"), 1);
    for (size_t i = 0; i < t.nev; i++) {
      const td_event *e = &t.ev[i];
      if (!e->name || strcmp(e->name, "smb")) continue;
      const td_arg *a = td_arg_of(e, "kb");
      ASSERT_TRUE(a != NULL);
      if (a->i != cases[c].kb)
        FAIL("ETCH_SYSTEM_SMB_KB=%s: %lld KiB mapped, want %ld",
             cases[c].env ? cases[c].env : "(unset)", (long long)a->i,
             cases[c].kb);
    }
    td_free(&t);
  }
  svc_stop(&s);
}

/* etchd killed and started again: a running producer reconnects by itself
 * and records into the new service's sessions. */
TEST(producers_reconnect_when_the_service_restarts) {
  svc s;
  svc_start(&s);
  char ticks[700];
  snprintf(ticks, sizeof ticks, "%s/ticks", s.dir);
  setenv("SVC_TICKS_FILE", ticks, 1);
  pid_t p = producer("survivor", 1, 0);
  unsetenv("SVC_TICKS_FILE");
  wait_log(&s, "'survivor' pid", 1); /* connected */
  kill(s.pid, SIGKILL);
  wait_exit(s.pid);
  svc_start(&s); /* a stale socket file is replaced */
  char out[700];
  snprintf(out, sizeof out, "%s/again.pftrace", s.dir);
  pid_t rec = record_start(&s, out, NULL);
  /* It retries every 0.5 s: back in the new service's session, and 1000
   * ticks recorded there. */
  wait_log(&s, "(survivor), instance", 1);
  struct stat st;
  WAIT_UNTIL(stat(ticks, &st) == 0, "the producer wrote no %s", ticks);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  kill(p, SIGKILL);
  wait_exit(p);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  size_t n = 0;
  for (size_t i = 0; i < t.nev; i++)
    if (t.ev[i].name && !strcmp(t.ev[i].name, "tick") &&
        t.ev[i].seq < 4096 && pids[t.ev[i].seq] == p)
      n++;
  ASSERT_TRUE(n > 100);
  td_free(&t);
  svc_stop(&s);
}

/* Sixteen processes of two threads into a discard buffer sized for the
 * run: every event arrives exactly once, in order per thread. */
TEST(sixteen_producers_lose_nothing) {
  svc s;
  svc_start(&s);
  char out[700];
  snprintf(out, sizeof out, "%s/sixteen.pftrace", s.dir);
  pid_t rec = record_start(&s, out, "--discard");
  pid_t p[16];
  for (int i = 0; i < MANY; i++) {
    char name[16];
    snprintf(name, sizeof name, "p%d", i);
    p[i] = producer(name, 2, MANY_EVENTS);
  }
  for (int i = 0; i < MANY; i++) ASSERT_EQ_INT(wait_exit(p[i]), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  for (int i = 0; i < MANY; i++)
    for (int k = 0; k < 2; k++)
      check_ticks(&t, pids, 4096, p[i], k, MANY_EVENTS);
  ASSERT_EQ_INT((int)t.prev_dropped, 0);
  ASSERT_TRUE(t.has_stats);
  ASSERT_EQ_U64(t.stat_discarded, 0);
  td_free(&t);
  svc_stop(&s);
}

/* The same into a buffer far too small: what is kept is each thread's
 * first events in order, the loss is counted, nothing is corrupted. */
TEST(a_full_discard_buffer_keeps_clean_prefixes) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "small",
                            "buffers { size_kb: 256 fill_policy: DISCARD }\n"
                            "data_sources { config { name: \"track_event\" } }\n",
                            NULL, out, sizeof out);
  pid_t p[4];
  for (int i = 0; i < 4; i++)
    p[i] = producer("small", 2, SANITIZED ? 20000 : 50000);
  for (int i = 0; i < 4; i++) ASSERT_EQ_INT(wait_exit(p[i]), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  long kept = 0;
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 2; k++)
      if (worker_track(&t, p[i], k))
        kept += check_ticks(&t, pids, 4096, p[i], k, -1);
  ASSERT_TRUE(kept > 1000 && kept < 4 * 2 * (SANITIZED ? 20000 : 50000));
  ASSERT_TRUE(t.has_stats);
  ASSERT_TRUE(t.stat_discarded > 0);
  td_free(&t);
  svc_stop(&s);
}

/* Ticks on the track of pid's worker-k and etch.dropped_events counts on
 * it (the writer's own reports and the service's). */
static void ticks_and_drops(const td_trace *t, int32_t pid, int k,
                            long *arrived, long *dropped) {
  *arrived = *dropped = 0;
  const td_track *tr = worker_track(t, pid, k);
  if (!tr) return;
  for (size_t i = 0; i < t->nev; i++) {
    const td_event *e = &t->ev[i];
    if (e->track != tr->uuid || !e->name) continue;
    if (!strcmp(e->name, "tick")) (*arrived)++;
    if (!strcmp(e->name, "etch.dropped_events"))
      *dropped += (long)td_arg_of(e, "count")->i;
  }
}

/*
 * Events lost in the service are counted per writer: four producers of two
 * threads flood a 256 KiB discard buffer, then a 512 KiB ring. With a
 * discard buffer every thread's ticks that did not arrive are in an
 * etch.dropped_events on its own track (the service's, where = "service"),
 * and every process's on its sequences (a thread none of whose chunks got
 * in has no track: its count is on the global track, with its pid); with
 * the ring, all of them together are.
 */
TEST(losses_in_the_service_are_counted_per_writer) {
  const long n = SANITIZED ? 20000 : 50000;
  for (int ring = 0; ring < 2; ring++) {
    svc s;
    svc_start(&s);
    char out[700];
    pid_t rec = record_config(
        &s, ring ? "ring" : "discard",
        ring ? "buffers { size_kb: 512 fill_policy: RING_BUFFER }\n"
               "data_sources { config { name: \"track_event\" } }\n"
             : "buffers { size_kb: 256 fill_policy: DISCARD }\n"
               "data_sources { config { name: \"track_event\" } }\n",
        NULL, out, sizeof out);
    pid_t p[4];
    for (int i = 0; i < 4; i++) p[i] = producer("lossy", 2, n);
    for (int i = 0; i < 4; i++) ASSERT_EQ_INT(wait_exit(p[i]), 0);
    kill(rec, SIGINT);
    ASSERT_EQ_INT(wait_exit(rec), 0);
    td_trace t;
    static int32_t pids[4096];
    decode(out, &t, pids, 4096);
    long all_arrived = 0, all_dropped = 0, service_notes = 0;
    for (size_t i = 0; i < t.nev; i++) {
      const td_event *e = &t.ev[i];
      if (!e->name || strcmp(e->name, "etch.dropped_events")) continue;
      all_dropped += (long)td_arg_of(e, "count")->i;
      const td_arg *w = td_arg_of(e, "where");
      if (w && w->s && !strcmp(w->s, "service")) service_notes++;
    }
    for (int i = 0; i < 4; i++) {
      /* Per process: its ticks and the counts on its sequences (trusted
       * pid), wherever they landed. */
      long proc = 0;
      for (size_t j = 0; j < t.nev; j++) {
        const td_event *e = &t.ev[j];
        if (!e->name || e->seq >= 4096 || pids[e->seq] != p[i]) continue;
        if (!strcmp(e->name, "etch.dropped_events"))
          proc += (long)td_arg_of(e, "count")->i;
      }
      long trackless = 0;
      for (int k = 0; k < 2; k++) {
        long arrived, dropped;
        ticks_and_drops(&t, p[i], k, &arrived, &dropped);
        all_arrived += arrived;
        proc += arrived;
        /* A thread with a track has its count on it; one without may
         * have lost the important Svc.Start replayed into its sequence
         * too. */
        trackless += !worker_track(&t, p[i], k);
        if (!ring && worker_track(&t, p[i], k) && arrived + dropped != n)
          FAIL("discard: pid %d worker-%d: %ld arrived, %ld counted lost, of "
               "%ld", (int)p[i], k, arrived, dropped, n);
      }
      if (!ring && (proc < 2 * n || proc > 2 * n + trackless))
        FAIL("discard: pid %d: %ld events arrived or counted lost, of %ld",
             (int)p[i], proc, 2 * n);
    }
    /* The ring: each sequence's Svc.Start (replayed at its start) may be
     * among what was overwritten. */
    if (all_arrived + all_dropped < 8 * n || all_arrived + all_dropped > 8 * n + 8)
      FAIL("%s: %ld arrived, %ld counted lost, of %ld", ring ? "ring" : "discard",
           all_arrived, all_dropped, 8 * n);
    ASSERT_TRUE(service_notes > 0);
    td_free(&t);
    svc_stop(&s);
  }
}

static int cmp_ts(const void *a, const void *b) {
  const td_event *x = *(const td_event *const *)a, *y = *(const td_event *const *)b;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* On pid's worker-k track, in time order: every slice end closes an open
 * slice, "outer" opens at the top, "inner" under "outer" or alone; the
 * slices open at the end in *open; the outer slices in the return. */
static long check_nesting(const td_trace *t, int32_t pid, int k, int *open) {
  const td_track *tr = worker_track(t, pid, k);
  *open = 0;
  if (!tr) return 0;
  const td_event **ev = (const td_event **)malloc((t->nev + 1) * sizeof *ev);
  ASSERT_TRUE(ev != NULL);
  size_t m = 0;
  for (size_t i = 0; i < t->nev; i++)
    if (t->ev[i].track == tr->uuid && (t->ev[i].type == 1 || t->ev[i].type == 2))
      ev[m++] = &t->ev[i];
  qsort(ev, m, sizeof *ev, cmp_ts);
  const char *stack[8];
  int depth = 0;
  long outers = 0;
  for (size_t i = 0; i < m; i++) {
    const td_event *e = ev[i];
    if (e->type == 2) {
      if (depth == 0)
        FAIL("pid %d worker-%d: an end at %llu closes nothing", (int)pid, k,
             (unsigned long long)e->ts);
      depth--;
      continue;
    }
    bool outer = !strcmp(e->name, "outer");
    if (!outer && strcmp(e->name, "inner")) FAIL("slice %s", e->name);
    if (outer ? depth != 0 : depth > 1 || (depth && strcmp(stack[0], "outer")))
      FAIL("pid %d worker-%d: %s at depth %d (at %llu)", (int)pid, k, e->name,
           depth, (unsigned long long)e->ts);
    stack[depth++] = e->name;
    outers += outer;
  }
  free(ev);
  *open = depth;
  return outers;
}

/*
 * A discard buffer that fills cuts every writer's slices where it stopped
 * keeping them: etchd ends the slices its kept data left open there, so
 * none runs on to the end of the trace (four producers of two threads
 * recording outer { inner { tick } } into 256 KiB).
 */
TEST(a_full_discard_buffer_leaves_no_slice_open) {
  const long n = SANITIZED ? 20000 : 50000;
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "cut",
                            "buffers { size_kb: 256 fill_policy: DISCARD }\n"
                            "data_sources { config { name: \"track_event\" } }\n",
                            NULL, out, sizeof out);
  pid_t p[4];
  for (int i = 0; i < 4; i++) p[i] = producer_mode("cut", 2, n, "outer");
  for (int i = 0; i < 4; i++) ASSERT_EQ_INT(wait_exit(p[i]), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  long outers = 0;
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 2; k++) {
      int open;
      outers += check_nesting(&t, p[i], k, &open);
      if (open) FAIL("pid %d worker-%d: %d slices open", (int)p[i], k, open);
    }
  ASSERT_TRUE(outers > 0 && outers < 8 * n);
  td_free(&t);
  svc_stop(&s);
}

/* What the task of `pid` named `comm` is doing: 0 when there is none, 1
 * when it is in nanosleep or clock_nanosleep, 2 otherwise (/proc's
 * task/TID/comm and syscall). */
static int task_doing(pid_t pid, const char *comm) {
  char path[400], line[256];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  int found = 0;
  struct dirent *de;
  while (d && !found && (de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "/proc/%d/task/%s/comm", (int)pid, de->d_name);
    FILE *f = fopen(path, "r");
    bool named = f && fgets(line, sizeof line, f) &&
                 strncmp(line, comm, strlen(comm)) == 0 &&
                 line[strlen(comm)] == '\n';
    if (f) fclose(f);
    if (!named) continue;
    found = 2;
    snprintf(path, sizeof path, "/proc/%d/task/%s/syscall", (int)pid,
             de->d_name);
    f = fopen(path, "r");
    long nr = -1;
    if (f && fscanf(f, "%ld", &nr) == 1 &&
        (nr == SYS_clock_nanosleep
#ifdef SYS_nanosleep
         || nr == SYS_nanosleep
#endif
         ))
      found = 1;
    if (f) fclose(f);
  }
  if (d) closedir(d);
  return found;
}

/* Until the flood that etchd, stopped, cannot take has done what it is
 * for: with `stall`, both workers seen waiting for a chunk (their only
 * sleep then); without, worker-1 has ended (dropping what did not fit)
 * and worker-0 sleeps in its pause after the flood (svc_producer's
 * "pause"). The event itself, not a time window. */
static void wait_flooded(pid_t p, bool stall) {
  bool seen[2] = {false, false};
  for (int i = 0; i < 300000; i++) { /* 30 s at most */
    if (stall) {
      for (int k = 0; k < 2; k++)
        seen[k] |= task_doing(p, k ? "worker-1" : "worker-0") == 1;
      if (seen[0] && seen[1]) return;
    } else if (task_doing(p, "worker-1") == 0 &&
               task_doing(p, "worker-0") == 1) {
      return;
    }
    struct timespec d = {0, 100000};
    nanosleep(&d, NULL);
  }
  FAIL("the producer (pid %d) did not %s", (int)p,
       stall ? "stall on its full shared memory"
             : "get to the end of its flood");
}

/*
 * Records a producer (svc_producer NAME 2 N pause) with a 256 KiB shared
 * memory, stalling for room when `stall`, while etchd is stopped (SIGSTOP)
 * from before its threads start until they have flooded it (wait_flooded;
 * the producer stops itself once its session is there, and the test lets
 * it go on); decodes the trace into *t. The producer's pid.
 */
static pid_t flood_while_stopped(svc *s, const char *name, long n, bool stall,
                                 td_trace *t, int32_t *pids) {
  char out[700];
  snprintf(out, sizeof out, "%s/%s.pftrace", s->dir, name);
  pid_t rec = record_start(s, out, NULL);
  setenv("ETCH_SYSTEM_SMB_KB", "256", 1);
  if (stall) setenv("ETCH_SYSTEM_STALL_MS", "5000", 1);
  pid_t p = producer_mode(name, 2, n, "pause");
  unsetenv("ETCH_SYSTEM_SMB_KB");
  unsetenv("ETCH_SYSTEM_STALL_MS");
  int st;
  ASSERT_EQ_INT(waitpid(p, &st, WUNTRACED), p); /* its session is there */
  ASSERT_TRUE(WIFSTOPPED(st));
  kill(s->pid, SIGSTOP);
  kill(p, SIGCONT);
  /* etchd stays stopped until the producer has flooded its shared memory
   * (every tick arrives or is counted dropped however long it is). */
  wait_flooded(p, stall);
  kill(s->pid, SIGCONT);
  ASSERT_EQ_INT(wait_exit(p), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  decode(out, t, pids, 4096);
  return p;
}

/*
 * Writers that found the shared memory full drop, counted, and record
 * again once there is room: etchd is stopped (SIGSTOP) while a producer
 * with a 256 KiB shared memory floods it from two threads, then let go
 * once thread 1 has ended and thread 0 pauses.
 * Thread 0 records again 0.8 s later (its drops reported as it starts
 * over); thread 1 ends while dropping (its drops reported for it later, on
 * its own sequence). For each, every tick either arrives, in order, or is
 * counted in its etch.dropped_events; thread 0's "after" arrives.
 */
TEST(full_shared_memory_drops_are_counted_and_writers_record_again) {
  const long n = SANITIZED ? 50000 : 200000;
  svc s;
  svc_start(&s);
  td_trace t;
  static int32_t pids[4096];
  pid_t p = flood_while_stopped(&s, "full", n, false, &t, pids);
  for (int k = 0; k < 2; k++) {
    const td_track *tr = worker_track(&t, p, k);
    ASSERT_TRUE(tr != NULL);
    long arrived = 0, last = -1, dropped = 0, after = 0;
    for (size_t i = 0; i < t.nev; i++) {
      const td_event *e = &t.ev[i];
      if (e->track != tr->uuid || !e->name) continue;
      if (e->seq >= 4096 || pids[e->seq] != p) FAIL("sequence %u", e->seq);
      if (!strcmp(e->name, "tick")) {
        const td_arg *a = td_arg_of(e, "i");
        ASSERT_TRUE(a != NULL);
        if (a->i <= last)
          FAIL("worker-%d: tick %lld after %ld", k, (long long)a->i, last);
        last = (long)a->i;
        arrived++;
      } else if (!strcmp(e->name, "etch.dropped_events")) {
        const td_arg *a = td_arg_of(e, "count");
        ASSERT_TRUE(a != NULL);
        dropped += (long)a->i;
      } else if (!strcmp(e->name, "after")) {
        after++;
      }
    }
    if (arrived + dropped != n)
      FAIL("worker-%d: %ld ticks arrived and %ld were counted dropped, of %ld",
           k, arrived, dropped, n);
    ASSERT_EQ_INT(after, k == 0 ? 1 : 0);
    fprintf(stderr, "  (worker-%d: %ld of %ld ticks dropped)\n", k, dropped, n);
  }
  td_free(&t);
  svc_stop(&s);
}

/*
 * A producer that exits with its shared memory full still counts every
 * drop: etchd is stopped while two threads and then the main thread flood
 * a 256 KiB shared memory; the producer exits as etchd goes on. The main
 * thread's drops (its writer never leaves) and the threads' (they left
 * while it was full) are reported at exit: every tick of each arrives, in
 * order, or is counted in an etch.dropped_events.
 */
TEST(a_producer_exiting_with_its_shared_memory_full_counts_every_drop) {
  const long n = SANITIZED ? 50000 : 200000;
  svc s;
  svc_start(&s);
  char out[700];
  snprintf(out, sizeof out, "%s/exitfull.pftrace", s.dir);
  pid_t rec = record_start(&s, out, NULL);
  setenv("ETCH_SYSTEM_SMB_KB", "256", 1);
  pid_t p = producer_mode("exitfull", 2, n, "xfull");
  unsetenv("ETCH_SYSTEM_SMB_KB");
  int st;
  ASSERT_EQ_INT(waitpid(p, &st, WUNTRACED), p); /* its session is there */
  ASSERT_TRUE(WIFSTOPPED(st));
  kill(s.pid, SIGSTOP);
  kill(p, SIGCONT);
  ASSERT_EQ_INT(waitpid(p, &st, WUNTRACED), p); /* flooded, about to exit */
  ASSERT_TRUE(WIFSTOPPED(st));
  kill(p, SIGCONT);
  kill(s.pid, SIGCONT);
  ASSERT_EQ_INT(wait_exit(p), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  long all_dropped = 0;
  for (int k = 0; k < 3; k++) {
    const td_track *tr = worker_track(&t, p, k);
    if (!tr) FAIL("no track worker-%d", k);
    long arrived = 0, last = -1, dropped = 0;
    for (size_t i = 0; i < t.nev; i++) {
      const td_event *e = &t.ev[i];
      if (e->track != tr->uuid || !e->name) continue;
      if (!strcmp(e->name, "tick")) {
        const td_arg *a = td_arg_of(e, "i");
        ASSERT_TRUE(a != NULL);
        if (a->i <= last)
          FAIL("worker-%d: tick %lld after %ld", k, (long long)a->i, last);
        last = (long)a->i;
        arrived++;
      } else if (!strcmp(e->name, "etch.dropped_events")) {
        dropped += (long)td_arg_of(e, "count")->i;
      }
    }
    if (arrived + dropped != n)
      FAIL("worker-%d: %ld ticks arrived and %ld were counted dropped, of %ld",
           k, arrived, dropped, n);
    all_dropped += dropped;
  }
  ASSERT_TRUE(all_dropped > 0);
  td_free(&t);
  svc_stop(&s);
}


/*
 * Nesting survives lost events (#5142): two threads record outer { inner {
 * tick } } while etchd is stopped, so that their 256 KiB shared memory fills
 * and they drop; then etchd goes on and so do they. A begin lost inside
 * the stretch of drops must not let its end close the enclosing slice, and
 * an end lost must not leave its slice open to the end of the trace. On
 * each thread's track, in time order: every end closes an open slice,
 * "outer" opens only at the top level and "inner" only inside "outer" (or
 * alone, its outer lost), nothing is left open; and some events were
 * lost.
 */
TEST(slices_nest_rightly_across_lost_events) {
  const long n = SANITIZED ? 40000 : 150000;
  svc s;
  svc_start(&s);
  char out[700];
  snprintf(out, sizeof out, "%s/nest.pftrace", s.dir);
  pid_t rec = record_start(&s, out, NULL);
  setenv("ETCH_SYSTEM_SMB_KB", "256", 1);
  pid_t p = producer_mode("nest", 2, n, "nest");
  unsetenv("ETCH_SYSTEM_SMB_KB");
  int st;
  ASSERT_EQ_INT(waitpid(p, &st, WUNTRACED), p); /* its session is there */
  ASSERT_TRUE(WIFSTOPPED(st));
  kill(s.pid, SIGSTOP);
  kill(p, SIGCONT);
  ASSERT_EQ_INT(waitpid(p, &st, WUNTRACED), p); /* half way, dropping */
  ASSERT_TRUE(WIFSTOPPED(st));
  kill(s.pid, SIGCONT);
  kill(p, SIGCONT);
  ASSERT_EQ_INT(wait_exit(p), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  long dropped = 0;
  for (size_t i = 0; i < t.nev; i++)
    if (t.ev[i].name && !strcmp(t.ev[i].name, "etch.dropped_events"))
      dropped += (long)td_arg_of(&t.ev[i], "count")->i;
  ASSERT_TRUE(dropped > 0);
  const td_event **ev = (const td_event **)malloc(t.nev * sizeof *ev);
  ASSERT_TRUE(ev != NULL);
  for (int k = 0; k < 2; k++) {
    const td_track *tr = worker_track(&t, p, k);
    if (!tr) FAIL("no track worker-%d", k);
    size_t m = 0;
    for (size_t i = 0; i < t.nev; i++)
      if (t.ev[i].track == tr->uuid && (t.ev[i].type == 1 || t.ev[i].type == 2))
        ev[m++] = &t.ev[i];
    qsort(ev, m, sizeof *ev, cmp_ts);
    const char *stack[8];
    int depth = 0;
    long outers = 0;
    for (size_t i = 0; i < m; i++) {
      const td_event *e = ev[i];
      if (e->type == 2) {
        if (depth == 0) FAIL("worker-%d: an end at %llu closes nothing", k,
                             (unsigned long long)e->ts);
        depth--;
        continue;
      }
      bool outer = !strcmp(e->name, "outer");
      if (!outer && strcmp(e->name, "inner")) FAIL("slice %s", e->name);
      /* An inner whose outer was lost stands alone; under anything
       * else it is under a wrong parent. */
      if (outer ? depth != 0 : depth > 1 || (depth && strcmp(stack[0], "outer")))
        FAIL("worker-%d: %s at depth %d (at %llu)", k, e->name, depth,
             (unsigned long long)e->ts);
      stack[depth++] = e->name;
      outers += outer;
    }
    if (depth) FAIL("worker-%d: %d slices open at the end", k, depth);
    ASSERT_TRUE(outers > 0);
    fprintf(stderr, "  (worker-%d: %ld of %ld outer slices recorded)\n", k,
            outers, n);
  }
  free(ev);
  td_free(&t);
  svc_stop(&s);
}

/*
 * With ETCH_SYSTEM_STALL_MS a writer that finds the shared memory full
 * waits for a chunk (up to that long) instead of dropping: etchd stopped
 * while two threads flood a 256 KiB shared memory, until both wait, and
 * every tick arrives, in order, none reported lost.
 */
TEST(stalling_writers_lose_nothing) {
  const long n = SANITIZED ? 50000 : 200000;
  svc s;
  svc_start(&s);
  td_trace t;
  static int32_t pids[4096];
  pid_t p = flood_while_stopped(&s, "stall", n, true, &t, pids);
  for (int k = 0; k < 2; k++) check_ticks(&t, pids, 4096, p, k, n);
  ASSERT_EQ_INT((int)td_count(&t, 3, "etch.dropped_events"), 0);
  ASSERT_EQ_INT((int)t.prev_dropped, 0);
  ASSERT_EQ_INT((int)td_count(&t, 3, "after"), 1);
  td_free(&t);
  svc_stop(&s);
}

/* A program and a plugin each linked with its own copy of libetch.a: in
 * system mode each copy is a producer, and both land in the trace. */
TEST(two_copies_of_libetch_in_one_process_both_record) {
  svc s;
  svc_start(&s);
  char out[700];
  snprintf(out, sizeof out, "%s/plugin.pftrace", s.dir);
  pid_t rec = record_start(&s, out, NULL);
  setenv("ETCH_SYSTEM_WAIT_MS", "3000", 1);
  char *argv[] = {(char *)SVC_HOST, (char *)SVC_PLUGIN, "300", NULL};
  pid_t p = spawn(argv, NULL);
  ASSERT_EQ_INT(wait_exit(p), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  ASSERT_EQ_INT((int)td_count(&t, 3, "host_tick"), 300);
  ASSERT_EQ_INT((int)td_count(&t, 3, "plugin_tick"), 300);
  /* Each from its own sequence, both stamped with the one process. */
  int host_seq = -1, plugin_seq = -1;
  for (size_t i = 0; i < t.nev; i++) {
    if (!t.ev[i].name) continue;
    if (!strcmp(t.ev[i].name, "host_tick")) host_seq = (int)t.ev[i].seq;
    if (!strcmp(t.ev[i].name, "plugin_tick")) plugin_seq = (int)t.ev[i].seq;
  }
  ASSERT_TRUE(host_seq > 0 && plugin_seq > 0 && host_seq != plugin_seq);
  ASSERT_EQ_INT(pids[host_seq], (int)p);
  ASSERT_EQ_INT(pids[plugin_seq], (int)p);
  td_free(&t);
  svc_stop(&s);
}

/* --daemon detaches and says where it went; SIGTERM ends it cleanly and
 * removes its sockets. */
TEST(etchd_as_a_daemon) {
  const char *dir = etch_test_tmpdir();
  char prod[600], cons[600], pidf[600];
  snprintf(prod, sizeof prod, "%s/dp.sock", dir);
  snprintf(cons, sizeof cons, "%s/dc.sock", dir);
  snprintf(pidf, sizeof pidf, "%s/etchd.pid", dir);
  char *argv[] = {(char *)ETCHD_BIN, "--daemon", "--pid-file", pidf,
                  "--producer-socket", prod, "--consumer-socket", cons, NULL};
  ASSERT_EQ_INT(wait_exit(spawn(argv, NULL)), 0);
  long pid = 0;
  for (int i = 0; i < 3000 && pid <= 0; i++) { /* 30 s at most */
    FILE *f = fopen(pidf, "r");
    if (f) {
      if (fscanf(f, "%ld", &pid) != 1) pid = 0;
      fclose(f);
    }
    if (pid <= 0) sleep_ms(10);
  }
  ASSERT_TRUE(pid > 0);
  ASSERT_EQ_INT(kill((pid_t)pid, 0), 0);
  struct stat st;
  ASSERT_TRUE(stat(prod, &st) == 0 && S_ISSOCK(st.st_mode));
  ASSERT_EQ_INT((int)(st.st_mode & 0777), 0600);
  ASSERT_EQ_INT(kill((pid_t)pid, SIGTERM), 0);
  for (int i = 0; i < 3000 && kill((pid_t)pid, 0) == 0; i++) sleep_ms(10);
  ASSERT_TRUE(kill((pid_t)pid, 0) != 0);
  ASSERT_TRUE(stat(prod, &st) != 0 && stat(cons, &st) != 0);
  ASSERT_TRUE(stat(pidf, &st) != 0);
}

/* write_into_file: etch record passes its output file with EnableTracing
 * and etchd writes the trace into it every file_write_period_ms; every
 * event lands once. */
TEST(the_service_writes_into_the_consumers_file) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "file",
                            "buffers { size_kb: 8192 }\n"
                            "data_sources { config { name: \"track_event\" } }\n"
                            "write_into_file: true\nfile_write_period_ms: 100\n",
                            "-q", out, sizeof out);
  pid_t p[2];
  for (int i = 0; i < 2; i++) p[i] = producer("filer", 2, 20000);
  for (int i = 0; i < 2; i++) ASSERT_EQ_INT(wait_exit(p[i]), 0);
  /* Written while the session still runs. */
  struct stat st;
  WAIT_UNTIL(stat(out, &st) == 0 && st.st_size > 100000,
             "%s not written while the session runs", out);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  char logp[700], want[800];
  snprintf(logp, sizeof logp, "%s/record.log", s.dir);
  size_t loglen;
  char *logtext = (char *)etch_test_read_file(logp, &loglen);
  ASSERT_TRUE(logtext != NULL);
  snprintf(want, sizeof want, "trace: %s (", out);
  ASSERT_TRUE(memmem(logtext, loglen, want, strlen(want)) != NULL);
  ASSERT_TRUE(memmem(logtext, loglen, "top slices", 10) == NULL);
  free(logtext);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 2; k++) check_ticks(&t, pids, 4096, p[i], k, 20000);
  ASSERT_EQ_INT((int)t.prev_dropped, 0);
  ASSERT_TRUE(t.has_stats);
  td_free(&t);
  svc_stop(&s);
}

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
 * nothing under a store name while it records, then the trace under the
 * store's name with its metadata, listed by etch ls at once. */
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
  ASSERT_EQ_U64(v->n, 0);
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
  jp *v = store_ls();
  ASSERT_EQ_U64(v->n, 0);
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

/* Every page size Perfetto allows (4, 8, 16, 32 KiB): the producer cuts
 * pages into chunks its fragment count can describe, and nothing is lost. */
TEST(every_page_size_records_everything) {
  svc s;
  svc_start(&s);
  const char *sizes[] = {"4", "8", "16", "32"};
  for (int k = 0; k < 4; k++) {
    char out[700];
    snprintf(out, sizeof out, "%s/page%s.pftrace", s.dir, sizes[k]);
    pid_t rec = record_start(&s, out, NULL);
    setenv("ETCH_SYSTEM_PAGE_KB", sizes[k], 1);
    pid_t p = producer("pages", 2, 5000);
    unsetenv("ETCH_SYSTEM_PAGE_KB");
    ASSERT_EQ_INT(wait_exit(p), 0);
    kill(rec, SIGINT);
    ASSERT_EQ_INT(wait_exit(rec), 0);
    td_trace t;
    static int32_t pids[4096];
    decode(out, &t, pids, 4096);
    for (int th = 0; th < 2; th++) check_ticks(&t, pids, 4096, p, th, 5000);
    td_free(&t);
  }
  svc_stop(&s);
}

/* A program recording in process (ETCH_OUT, a local flight recorder) and
 * for the service at once: both traces get every event. */
TEST(in_process_and_system_at_once) {
  svc s;
  svc_start(&s);
  char out[700], local[700];
  snprintf(out, sizeof out, "%s/both.pftrace", s.dir);
  snprintf(local, sizeof local, "%s/local.pftrace", s.dir);
  pid_t rec = record_start(&s, out, NULL);
  setenv("ETCH_OUT", local, 1);
  pid_t p = producer("both", 2, 3000);
  unsetenv("ETCH_OUT");
  ASSERT_EQ_INT(wait_exit(p), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  for (int k = 0; k < 2; k++) check_ticks(&t, pids, 4096, p, k, 3000);
  td_free(&t);
  /* The local file: the same events (no service, so no trusted pids). */
  td_trace l;
  ASSERT_EQ_INT(td_decode_file(local, &l), 0);
  ASSERT_EQ_INT((int)td_count(&l, 3, "tick"), 2 * 3000);
  td_free(&l);
  svc_stop(&s);
}

/* A data source with interceptor_config { name: "console" }: the producer
 * prints that instance's events (its console_config: stdout, no colours)
 * and sends none of them to the service; a second track_event source in
 * the same config records as usual. */
TEST(an_intercepted_data_source_prints_in_the_producer) {
  svc s;
  svc_start(&s);
  char out[700], printed[700];
  pid_t rec = record_config(
      &s, "console",
      "buffers { size_kb: 4096 }\n"
      "data_sources { config { name: \"track_event\"\n"
      "  interceptor_config { name: \"console\"\n"
      "    console_config { output: OUTPUT_STDOUT enable_colors: false } } } }\n"
      "data_sources { config { name: \"track_event\" } }\n",
      NULL, out, sizeof out);
  snprintf(printed, sizeof printed, "%s/printed.txt", s.dir);
  setenv("ETCH_SYSTEM_WAIT_MS", "3000", 1);
  /* "late": both instances have started before the first tick. */
  char *argv[] = {(char *)SVC_PRODUCER, "printer", "1", "5", "late", NULL};
  pid_t p = spawn(argv, printed);
  ASSERT_EQ_INT(wait_exit(p), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  /* The service's trace: the second source's ticks, once each. */
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  check_ticks(&t, pids, 4096, p, 0, 5);
  ASSERT_EQ_INT((int)td_count(&t, 3, "tick"), 5);
  td_free(&t);
  /* The producer's stdout: the first source's ticks as console lines. */
  size_t len;
  char *text = (char *)etch_test_read_file(printed, &len);
  ASSERT_TRUE(text != NULL);
  text = realloc(text, len + 1);
  text[len] = 0;
  ASSERT_TRUE(strchr(text, '\x1b') == NULL);
  int lines = 0;
  for (char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    char want[64];
    snprintf(want, sizeof want, "/worker-0 ");
    if (!strstr(l, want) || strstr(l, want) > strchr(l, '\n')) continue;
    snprintf(want, sizeof want, "* tick [svc] i=%d\n", lines);
    char *e = strchr(l, '\n');
    size_t wl = strlen(want);
    ASSERT_TRUE(e && (size_t)(e + 1 - l) >= wl &&
                !memcmp(e + 1 - wl, want, wl));
    lines++;
  }
  ASSERT_EQ_INT(lines, 5);
  free(text);
  svc_stop(&s);
}

/* QueryCapabilities answers as a service that knows the call (a consumer
 * that finds no capabilities takes the service for an old one); methods
 * etch does not run answer success: false, said rather than ignored. */
TEST(consumer_port_capabilities_and_refusals) {
  svc s;
  svc_start(&s);
  raw r;
  raw_open(&r, s.cons, "ConsumerPort");
  raw_invoke(&r, "QueryCapabilities", NULL);
  etch_ipc_frame g;
  raw_next(&r, &g);
  ASSERT_EQ_INT(g.kind, ETCH_IPC_REPLY);
  ASSERT_TRUE(g.success);
  /* capabilities { has_query_capabilities: true } */
  static const uint8_t want[] = {0x0a, 0x82, 0x80, 0x80, 0x00, 0x08, 0x01};
  ASSERT_EQ_INT((int)g.body.len, (int)sizeof want);
  ASSERT_TRUE(memcmp(g.body.data, want, sizeof want) == 0);
  raw_invoke(&r, "ObserveEvents", NULL);
  raw_next(&r, &g);
  ASSERT_EQ_INT(g.kind, ETCH_IPC_REPLY);
  ASSERT_FALSE(g.success);
  /* GetTraceStats: refused without a session; with one, its buffers. */
  raw_invoke(&r, "GetTraceStats", NULL);
  raw_next(&r, &g);
  ASSERT_FALSE(g.success);
  etch__pb_buf cfg, args;
  etch__pb_buf_init(&cfg, 128, 0);
  etch__pb_buf_init(&args, 128, 0);
  const char *text = "buffers { size_kb: 1024 } buffers { size_kb: 64 }";
  ASSERT_OK(etch__trace_config_text_to_binary(text, strlen(text), &cfg));
  etch__pb_write_bytes_field(&args.s, ETCH_ETR_TRACE_CONFIG,
                            etch__pb_buf_data(&cfg), etch__pb_buf_len(&cfg));
  raw_invoke(&r, "EnableTracing", &args);
  raw_invoke(&r, "GetTraceStats", NULL);
  raw_next(&r, &g);
  ASSERT_TRUE(g.success);
  /* trace_stats { buffer_stats { buffer_size ... } x2, tracing_sessions 1 } */
  etch__pb_dec d, ts, bs;
  etch__pb_field fl, h, k;
  uint64_t sizes[2] = {0, 0}, sessions = 0;
  int nb = 0;
  etch__pb_dec_init(&d, g.body.data, g.body.len);
  while (etch__pb_next(&d, &fl)) {
    ASSERT_EQ_INT((int)fl.id, 1);
    etch__pb_dec_init(&ts, fl.data, fl.len);
    while (etch__pb_next(&ts, &h)) {
      if (h.id == 6) sessions = h.u;
      if (h.id != 1 || nb == 2) continue;
      etch__pb_dec_init(&bs, h.data, h.len);
      while (etch__pb_next(&bs, &k))
        if (k.id == 12) sizes[nb] = k.u;
      nb++;
    }
  }
  ASSERT_EQ_INT(nb, 2);
  ASSERT_EQ_U64(sizes[0], 1024 * 1024);
  ASSERT_EQ_U64(sizes[1], 64 * 1024);
  ASSERT_EQ_U64(sessions, 1);
  etch__pb_buf_free(&cfg);
  etch__pb_buf_free(&args);
  raw_close(&r);
  svc_stop(&s);
}

/* ---- the shared memory's size is the service's, not the producer's ---- */

/* A raw producer of `source`: connects, registers it and waits for
 * StartDataSource; the shared memory the service sent, mapped, into *smb,
 * its descriptor (kept open) into *fd. */
static void raw_source(raw *r, const svc *s, const char *source, uint8_t **smb,
                       int *fd, uint32_t *page_kb) {
  raw_open(r, s->prod, "ProducerPort");
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  raw_invoke(r, "InitializeConnection", NULL);
  etch__pb_nested d;
  etch__pb_nested_begin(&b.s, ETCH_RDS_DESCRIPTOR, &d);
  etch__pb_write_string_field(&b.s, ETCH_DSD_NAME, source);
  etch__pb_nested_end(&b.s, &d);
  raw_invoke(r, "RegisterDataSource", &b);
  raw_invoke(r, "GetAsyncCommand", NULL);
  *smb = NULL;
  *fd = -1;
  *page_kb = 0;
  bool started = false;
  for (int i = 0; i < 20 && !started; i++) {
    etch_ipc_frame g;
    raw_next(r, &g);
    if (g.kind != ETCH_IPC_REPLY || !g.has_more) continue;
    etch__pb_dec dec;
    etch__pb_field fl;
    etch__pb_dec_init(&dec, g.body.data, g.body.len);
    while (etch__pb_next(&dec, &fl)) {
      if (fl.id == ETCH_GAC_SETUP_TRACING) {
        etch__pb_dec sd;
        etch__pb_field sf;
        etch__pb_dec_init(&sd, fl.data, fl.len);
        while (etch__pb_next(&sd, &sf))
          if (sf.id == ETCH_GAC_SETUP_PAGE_SIZE_KB) *page_kb = (uint32_t)sf.u;
        *fd = etch__ipc_conn_take_fd(&r->c);
        ASSERT_TRUE(*fd >= 0);
        struct stat st;
        ASSERT_TRUE(fstat(*fd, &st) == 0);
        *smb = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                    MAP_SHARED, *fd, 0);
        ASSERT_TRUE(*smb != MAP_FAILED);
      } else if (fl.id == ETCH_GAC_START_DATA_SOURCE) {
        started = true;
      }
    }
  }
  ASSERT_TRUE(started && *smb && *page_kb);
  etch__pb_buf_reset(&b);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_WRITER_ID, 1);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_TARGET_BUFFER, 1);
  raw_invoke(r, "RegisterTraceWriter", &b);
  etch__pb_buf_free(&b);
}

/* Commits chunk 0 of `page` into target buffer 1. */
static void raw_commit(raw *r, uint32_t page) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_nested m;
  etch__pb_nested_begin(&b.s, ETCH_CDR_CHUNKS_TO_MOVE, &m);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_PAGE, page);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_CHUNK, 0);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_TARGET_BUFFER, 1);
  etch__pb_nested_end(&b.s, &m);
  raw_invoke(r, "CommitData", &b);
  etch__pb_buf_free(&b);
  etch__ipc_conn_flush(&r->c);
}

/* A producer that truncates the shared memory the service gave it, then
 * commits chunks in it: the memory is sealed, so it cannot; the service
 * stays up, its session and another one record exactly. (Unsealed, the
 * service's read of the committed chunk was a SIGBUS that killed it.) */
TEST(a_producer_cannot_shrink_the_shared_memory_under_the_service) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "shrunk",
                            "buffers { size_kb: 1024 }\n"
                            "data_sources { config { name: \"raw.source\" } }\n"
                            "flush_timeout_ms: 300\n"
                            "data_source_stop_timeout_ms: 300\n",
                            NULL, out, sizeof out);
  raw r;
  uint8_t *smb;
  int fd;
  uint32_t page_kb;
  raw_source(&r, &s, "raw.source", &smb, &fd, &page_kb);
  ASSERT_EQ_INT(fcntl(fd, F_GET_SEALS),
                F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  etch_smb m;
  ASSERT_OK(etch__smb_init(&m, smb, (uint64_t)page_kb * 1024 * 4,
                           page_kb * 1024));
  raw_write_chunk(smb, page_kb * 1024, 0, 1, 0, 5);
  ASSERT_TRUE(etch__smb_release_complete(&m, 0, 0));
  raw_write_chunk(smb, page_kb * 1024, 1, 1, 1, 3);
  ASSERT_TRUE(etch__smb_release_complete(&m, 1, 0));
  /* Neither shrinking nor growing, nor unsealing. */
  errno = 0;
  ASSERT_EQ_INT(ftruncate(fd, 0), -1);
  ASSERT_EQ_INT(errno, EPERM);
  ASSERT_EQ_INT(ftruncate(fd, (off_t)page_kb * 1024), -1);
  ASSERT_EQ_INT(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
  raw_commit(&r, 0);
  raw_commit(&r, 1);
  /* Another consumer and a producer of libetch, meanwhile. */
  char out2[700];
  snprintf(out2, sizeof out2, "%s/other.pftrace", s.dir);
  pid_t rec2 = record_start(&s, out2, NULL);
  pid_t p = producer("other", 1, 100);
  ASSERT_EQ_INT(wait_exit(p), 0);
  kill(rec2, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec2), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out2, &t, pids, 4096);
  check_ticks(&t, pids, 4096, p, 0, 100);
  td_free(&t);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  int max_n;
  ASSERT_EQ_INT(count_testing(out, &max_n), 8);
  ASSERT_EQ_INT(max_n, 4);
  munmap(smb, (size_t)page_kb * 1024 * 4);
  close(fd);
  raw_close(&r);
  svc_stop(&s);
}

/* InitializeConnection offering the producer's own memory (`fd`, pages of
 * `page` bytes); whether the service took it. */
static bool raw_offer_memory(raw *r, const svc *s, int fd, uint32_t page) {
  raw_open(r, s->prod, "ProducerPort");
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_write_varint_field(&b.s, ETCH_ICR_PAGE_SIZE_HINT, page);
  etch__pb_write_varint_field(&b.s, ETCH_ICR_PRODUCER_PROVIDED_SHMEM, 1);
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_INVOKE;
  f.request_id = ++r->req;
  f.service_id = r->svc;
  f.method_id = etch__ipc_method_id(&r->bind, "InitializeConnection");
  f.body.data = etch__pb_buf_data(&b);
  f.body.len = (uint32_t)etch__pb_buf_len(&b);
  ASSERT_OK(etch__ipc_conn_send(&r->c, &f, fd));
  etch__pb_buf_free(&b);
  etch_ipc_frame g;
  raw_next(r, &g);
  ASSERT_EQ_INT(g.kind, ETCH_IPC_REPLY);
  ASSERT_TRUE(g.success);
  bool using = false;
  etch__pb_dec dec;
  etch__pb_field fl;
  etch__pb_dec_init(&dec, g.body.data, g.body.len);
  while (etch__pb_next(&dec, &fl))
    if (fl.id == ETCH_ICRESP_USING_PRODUCER_SHMEM) using = fl.u != 0;
  return using;
}

/* The service maps a producer's own memory only when it is sealed against
 * shrinking; unsealed, it is refused with the reason in the log, and the
 * service sends memory of its own with SetupTracing. */
TEST(a_producers_own_memory_must_be_sealed_against_shrinking) {
  svc s;
  svc_start(&s);
  const uint32_t page = 4096;
  int sealed = memfd_create("sealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_TRUE(sealed >= 0);
  ASSERT_EQ_INT(ftruncate(sealed, 16 * page), 0);
  ASSERT_EQ_INT(fcntl(sealed, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  raw a;
  ASSERT_TRUE(raw_offer_memory(&a, &s, sealed, page));
  int loose = memfd_create("loose", MFD_CLOEXEC);
  ASSERT_TRUE(loose >= 0);
  ASSERT_EQ_INT(ftruncate(loose, 16 * page), 0);
  raw b;
  ASSERT_FALSE(raw_offer_memory(&b, &s, loose, page));
  int grow = memfd_create("grow", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_TRUE(grow >= 0);
  ASSERT_EQ_INT(ftruncate(grow, 16 * page), 0);
  ASSERT_EQ_INT(fcntl(grow, F_ADD_SEALS, F_SEAL_GROW), 0);
  raw c;
  ASSERT_FALSE(raw_offer_memory(&c, &s, grow, page));
  ASSERT_EQ_INT(log_lines(&s, "its shared memory refused: not sealed against "
                              "shrinking (F_SEAL_SHRINK); the service makes "
                              "one"),
                2);
  /* The refused one gets the service's memory, sealed, when it starts. */
  etch__pb_buf bb;
  etch__pb_buf_init(&bb, 64, 0);
  etch__pb_nested d;
  etch__pb_nested_begin(&bb.s, ETCH_RDS_DESCRIPTOR, &d);
  etch__pb_write_string_field(&bb.s, ETCH_DSD_NAME, "raw.loose");
  etch__pb_nested_end(&bb.s, &d);
  raw_invoke(&b, "RegisterDataSource", &bb);
  raw_invoke(&b, "GetAsyncCommand", NULL);
  etch__pb_buf_free(&bb);
  char out[700];
  pid_t rec = record_config(&s, "loose",
                            "buffers { size_kb: 1024 }\n"
                            "data_sources { config { name: \"raw.loose\" } }\n"
                            "flush_timeout_ms: 300\n"
                            "data_source_stop_timeout_ms: 300\n",
                            NULL, out, sizeof out);
  int got = -1;
  for (int i = 0; i < 20 && got < 0; i++) {
    etch_ipc_frame g;
    raw_next(&b, &g);
    if (g.kind != ETCH_IPC_REPLY || !g.has_more) continue;
    etch__pb_dec dec;
    etch__pb_field fl;
    etch__pb_dec_init(&dec, g.body.data, g.body.len);
    while (etch__pb_next(&dec, &fl))
      if (fl.id == ETCH_GAC_SETUP_TRACING) got = etch__ipc_conn_take_fd(&b.c);
  }
  ASSERT_TRUE(got >= 0);
  ASSERT_EQ_INT(fcntl(got, F_GET_SEALS),
                F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  close(got);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  close(sealed);
  close(loose);
  close(grow);
  raw_close(&a);
  raw_close(&b);
  raw_close(&c);
  svc_stop(&s);
}

/* ---- the buffers' memory is capped ---- */

#define ASSERT_STR_EQ(a, b)                                      \
  do {                                                           \
    if (strcmp((a), (b)) != 0) FAIL("'%s' != '%s'", (a), (b));   \
  } while (0)

/* The reply to the last call, past replies to earlier ones. */
static void raw_last_reply(raw *r, etch_ipc_frame *g) {
  do raw_next(r, g);
  while (!(g->kind == ETCH_IPC_REPLY && g->request_id == r->req));
}

/* EnableTracing with `text` as the config; the refusal's error if the
 * service answers one at once, else "" (the session runs: a GetTraceStats
 * sent after it is answered first, with success). */
static void raw_enable(raw *r, const char *text, char *err, size_t cap) {
  etch__pb_buf cfg, args;
  etch__pb_buf_init(&cfg, 128, 0);
  etch__pb_buf_init(&args, 128, 0);
  ASSERT_OK(etch__trace_config_text_to_binary(text, strlen(text), &cfg));
  etch__pb_write_bytes_field(&args.s, ETCH_ETR_TRACE_CONFIG,
                            etch__pb_buf_data(&cfg), etch__pb_buf_len(&cfg));
  raw_invoke(r, "EnableTracing", &args);
  raw_invoke(r, "GetTraceStats", NULL);
  etch__pb_buf_free(&cfg);
  etch__pb_buf_free(&args);
  etch_ipc_frame g;
  raw_next(r, &g);
  ASSERT_EQ_INT(g.kind, ETCH_IPC_REPLY);
  err[0] = 0;
  if (g.request_id == r->req) { /* GetTraceStats: the session runs */
    ASSERT_TRUE(g.success);
    return;
  }
  ASSERT_EQ_U64(g.request_id, r->req - 1);
  etch__pb_dec d;
  etch__pb_field fl;
  bool disabled = false;
  etch__pb_dec_init(&d, g.body.data, g.body.len);
  while (etch__pb_next(&d, &fl)) {
    if (fl.id == ETCH_ETRESP_DISABLED) disabled = fl.u != 0;
    if (fl.id == ETCH_ETRESP_ERROR)
      snprintf(err, cap, "%.*s", (int)fl.len, (const char *)fl.data);
  }
  ASSERT_TRUE(disabled && err[0]);
  raw_next(r, &g); /* GetTraceStats, refused: no session */
  ASSERT_EQ_U64(g.request_id, r->req);
  ASSERT_FALSE(g.success);
}

static const char sixteen_huge[] =
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 } "
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 } "
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 } "
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 } "
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 } "
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 } "
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 } "
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 }";

/* By default the buffers of all sessions may take a quarter of physical
 * memory: 16 buffers of 4 TiB are refused with the reason. */
TEST(terabytes_of_buffers_are_refused) {
  svc s;
  svc_start(&s);
  raw r;
  raw_open(&r, s.cons, "ConsumerPort");
  char err[400], want[400];
  raw_enable(&r, sixteen_huge, err, sizeof err);
  long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  snprintf(want, sizeof want,
           "buffers of 68719476720 KiB in all are more than etchd allows: "
           "%llu KiB for all sessions' buffers, 0 KiB of it in use (etchd "
           "--max-buffer-mb)",
           (unsigned long long)pages * (unsigned long long)psz / 4 / 1024);
  ASSERT_STR_EQ(err, want);
  /* And a sane one is taken. */
  raw_enable(&r, "buffers { size_kb: 1024 }", err, sizeof err);
  ASSERT_STR_EQ(err, "");
  raw_close(&r);
  svc_stop(&s);
}

/* With --max-buffer-mb 64: 40 MiB for one session, then 30 MiB for
 * another is refused (70 in all), and taken once the first is freed. */
TEST(max_buffer_mb_caps_all_sessions_together) {
  svc s;
  svc_start_with(&s, "--max-buffer-mb", "64");
  raw a, b;
  raw_open(&a, s.cons, "ConsumerPort");
  raw_open(&b, s.cons, "ConsumerPort");
  char err[400];
  raw_enable(&a, "buffers { size_kb: 20480 } buffers { size_kb: 20480 }", err,
             sizeof err);
  ASSERT_STR_EQ(err, "");
  raw_enable(&b, "buffers { size_kb: 30720 }", err, sizeof err);
  ASSERT_STR_EQ(err, "buffers of 30720 KiB in all are more than etchd "
                     "allows: 65536 KiB for all sessions' buffers, 40960 KiB "
                     "of it in use (etchd --max-buffer-mb)");
  ASSERT_EQ_INT(log_lines(&s, "session refused: buffers of 30720 KiB"), 1);
  raw_enable(&b, "buffers { size_kb: 24576 }", err, sizeof err);
  ASSERT_STR_EQ(err, ""); /* 64 in all: at the limit is allowed */
  raw_invoke(&b, "FreeBuffers", NULL);
  etch_ipc_frame g;
  raw_last_reply(&b, &g);
  ASSERT_TRUE(g.success);
  raw_invoke(&a, "FreeBuffers", NULL);
  raw_last_reply(&a, &g);
  ASSERT_TRUE(g.success);
  raw_enable(&b, "buffers { size_kb: 65536 }", err, sizeof err);
  ASSERT_STR_EQ(err, "");
  raw_close(&a);
  raw_close(&b);
  svc_stop(&s);
}

/* ---- a squatted socket directory ---- */

/* The default socket directory owned by someone else (as root: uid 12345):
 * etchd refuses to serve there, `etch record --system` and a libetch
 * producer refuse to connect there, each saying why. */
TEST(a_squatted_socket_directory_is_refused_by_everyone) {
  if (geteuid() != 0) return; /* chown needs root */
  unsetenv("PERFETTO_PRODUCER_SOCK_NAME");
  unsetenv("PERFETTO_CONSUMER_SOCK_NAME");
  char xdg[600], dir[700], out[700], msg[1000];
  snprintf(xdg, sizeof xdg, "%s/squat", etch_test_tmpdir());
  ASSERT_EQ_INT(mkdir(xdg, 0700), 0);
  setenv("XDG_RUNTIME_DIR", xdg, 1);
  snprintf(dir, sizeof dir, "%s/etch", xdg);
  ASSERT_EQ_INT(mkdir(dir, 0700), 0);
  ASSERT_EQ_INT(chown(dir, 12345, 12345), 0);
  snprintf(msg, sizeof msg,
           "'%s' is owned by uid 12345, not by you (uid 0): refusing to use "
           "it for etch's sockets",
           dir);
  svc s; /* only for log_lines */
  memset(&s, 0, sizeof s);
  snprintf(s.log, sizeof s.log, "%s/squat.log", etch_test_tmpdir());
  char line[1200];
  char *etchd[] = {(char *)ETCHD_BIN, "-v", NULL};
  ASSERT_EQ_INT(wait_exit(spawn(etchd, s.log)), 1);
  snprintf(line, sizeof line, "etchd: %s\n", msg);
  ASSERT_EQ_INT(log_lines(&s, line), 1);
  snprintf(out, sizeof out, "%s/squat.pftrace", etch_test_tmpdir());
  char *rec[] = {(char *)ETCH_BIN, "record", "--system", "-o", out, NULL};
  ASSERT_TRUE(wait_exit(spawn(rec, s.log)) != 0);
  ASSERT_EQ_INT(log_lines(&s, msg), 2);
  svc p;
  memset(&p, 0, sizeof p);
  snprintf(p.log, sizeof p.log, "%s/producer.log", etch_test_tmpdir());
  char *prod[] = {(char *)SVC_PRODUCER, "squat", "1", "10", NULL};
  ASSERT_EQ_INT(wait_exit(spawn(prod, p.log)), 0);
  snprintf(line, sizeof line,
           "etch: not recording into the tracing service: %s\n", msg);
  ASSERT_EQ_INT(log_lines(&p, line), 1);
  ASSERT_EQ_INT(log_lines(&p, "etch:"), 1);
  /* And nothing was made in it. */
  struct stat st;
  snprintf(line, sizeof line, "%s/producer.sock", dir);
  ASSERT_EQ_INT(lstat(line, &st), -1);
}

/* ---- stopping and running under a supervisor ---- */

/* SIGTERM to etchd while `etch record --system` records: the session is
 * ended as if the consumer had stopped it, and the consumer gets its trace
 * with every event; etchd then exits 0. */
TEST(sigterm_finishes_the_sessions_before_etchd_exits) {
  svc s;
  svc_start(&s);
  char out[700];
  snprintf(out, sizeof out, "%s/term.pftrace", s.dir);
  pid_t rec = record_start(&s, out, NULL);
  pid_t p = producer("term", 2, 500);
  ASSERT_EQ_INT(wait_exit(p), 0);
  ASSERT_EQ_INT(kill(s.pid, SIGTERM), 0);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  ASSERT_EQ_INT(wait_exit(s.pid), 0);
  ASSERT_EQ_INT(log_lines(&s, "etchd: stopping: ending 1 session(s)"), 1);
  ASSERT_EQ_INT(log_lines(&s, "stopping with sessions left"), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  check_ticks(&t, pids, 4096, p, 0, 500);
  check_ticks(&t, pids, 4096, p, 1, 500);
  td_free(&t);
  /* A new session while stopping would be refused; and the sockets are
   * gone. */
  struct stat st;
  ASSERT_TRUE(stat(s.prod, &st) != 0 && stat(s.cons, &st) != 0);
}

/* --daemon with --log keeps the log (-v) in the file; with NOTIFY_SOCKET
 * set, etchd sends systemd's "READY=1" once it listens. */
TEST(log_file_and_readiness_notification) {
  const char *dir = etch_test_tmpdir();
  char prod[600], cons[600], pidf[600], logf[600], note[600];
  snprintf(prod, sizeof prod, "%s/lp.sock", dir);
  snprintf(cons, sizeof cons, "%s/lc.sock", dir);
  snprintf(pidf, sizeof pidf, "%s/etchd.pid", dir);
  snprintf(logf, sizeof logf, "%s/etchd-file.log", dir);
  snprintf(note, sizeof note, "%s/notify", dir);
  int ns = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_TRUE(ns >= 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  ASSERT_TRUE(strlen(note) < sizeof a.sun_path);
  memcpy(a.sun_path, note, strlen(note) + 1);
  ASSERT_EQ_INT(bind(ns, (struct sockaddr *)&a, sizeof a), 0);
  setenv("NOTIFY_SOCKET", note, 1);
  char *argv[] = {(char *)ETCHD_BIN, "--daemon", "--pid-file", pidf,
                  "--log", logf, "-v", "--producer-socket", prod,
                  "--consumer-socket", cons, NULL};
  ASSERT_EQ_INT(wait_exit(spawn(argv, NULL)), 0);
  unsetenv("NOTIFY_SOCKET");
  /* The notification: a bound on the wait, not a time window. */
  struct timeval tv = {30, 0};
  setsockopt(ns, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char msg[128];
  ssize_t n = recv(ns, msg, sizeof msg - 1, 0);
  ASSERT_TRUE(n > 0);
  msg[n] = 0;
  long pid = 0;
  FILE *f = fopen(pidf, "r");
  ASSERT_TRUE(f != NULL);
  ASSERT_EQ_INT(fscanf(f, "%ld", &pid), 1);
  fclose(f);
  char want[128];
  snprintf(want, sizeof want, "READY=1\nMAINPID=%ld", pid);
  if (strcmp(msg, want) != 0) FAIL("notified '%s', not '%s'", msg, want);
  close(ns);
  /* Listening by then; a refusal is logged (before its reply). */
  raw r;
  raw_open(&r, cons, "ConsumerPort");
  char err[400];
  raw_enable(&r, sixteen_huge, err, sizeof err);
  raw_close(&r);
  ASSERT_EQ_INT(kill((pid_t)pid, SIGTERM), 0);
  struct stat st;
  for (int i = 0; i < 3000 && stat(pidf, &st) == 0; i++) sleep_ms(10);
  ASSERT_TRUE(stat(pidf, &st) != 0);
  svc l;
  memset(&l, 0, sizeof l);
  snprintf(l.log, sizeof l.log, "%s", logf);
  char line[1400];
  snprintf(line, sizeof line, "etchd: producers on %s, consumers on %s\n",
           prod, cons);
  ASSERT_EQ_INT(log_lines(&l, line), 1);
  ASSERT_EQ_INT(
      log_lines(&l, "etchd: consumer 1: session refused: buffers of "
                    "68719476720 KiB in all are more than etchd allows"),
      1);
}

/* Without --daemon, the notification is READY=1 alone. */
TEST(readiness_notification_in_the_foreground) {
  const char *dir = etch_test_tmpdir();
  char note[600];
  snprintf(note, sizeof note, "%s/notify-fg", dir);
  int ns = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  ASSERT_TRUE(strlen(note) < sizeof a.sun_path);
  memcpy(a.sun_path, note, strlen(note) + 1);
  ASSERT_EQ_INT(bind(ns, (struct sockaddr *)&a, sizeof a), 0);
  setenv("NOTIFY_SOCKET", note, 1);
  svc s;
  svc_start(&s);
  unsetenv("NOTIFY_SOCKET");
  struct timeval tv = {30, 0};
  setsockopt(ns, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char msg[128];
  ssize_t n = recv(ns, msg, sizeof msg - 1, 0);
  ASSERT_EQ_INT(n, 7);
  ASSERT_TRUE(memcmp(msg, "READY=1", 7) == 0);
  close(ns);
  svc_stop(&s);
}

/* ---- bounds on what connections hold ---- */

/* A private etchd as svc_start_with() starts one, with any number of extra
 * arguments (NULL-terminated) and, unless `nofile` is 0, at most `nofile`
 * open descriptors (RLIMIT_NOFILE, set in the child before the exec). */
static void svc_start_argv(svc *s, rlim_t nofile, const char *const *extra) {
  snprintf(s->dir, sizeof s->dir, "%s", etch_test_tmpdir());
  snprintf(s->prod, sizeof s->prod, "%s/p.sock", s->dir);
  snprintf(s->cons, sizeof s->cons, "%s/c.sock", s->dir);
  snprintf(s->log, sizeof s->log, "%s/etchd.log", s->dir);
  setenv("PERFETTO_PRODUCER_SOCK_NAME", s->prod, 1);
  setenv("PERFETTO_CONSUMER_SOCK_NAME", s->cons, 1);
  char *argv[16] = {(char *)ETCHD_BIN, "-v"};
  int n = 2;
  for (; extra && *extra && n < 15; extra++) argv[n++] = (char *)*extra;
  argv[n] = NULL;
  pid_t parent = getpid();
  s->pid = fork();
  if (s->pid < 0) FAIL("fork: %s", strerror(errno));
  if (s->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int fd = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    /* Nothing else of the test's is inherited: etchd's descriptors are
     * its own, and the limit counts them alone. */
    for (int i = 3; i < 1024; i++) close(i);
    if (nofile) {
      struct rlimit rl = {nofile, nofile};
      if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(126);
    }
    execve(argv[0], argv, environ);
    _exit(127);
  }
  for (int i = 0; i < 3000; i++) { /* 30 s at most */
    int fd;
    if (etch__ipc_connect(s->cons, &fd) == ETCH_OK) {
      close(fd);
      return;
    }
    sleep_ms(10);
  }
  FAIL("etchd did not start (see %s)", s->log);
}

/* The open descriptors of process `pid`. */
static int proc_fds(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(path);
  if (!d) FAIL("cannot open %s: %s", path, strerror(errno));
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* The CPU time (user and system) process `pid` has used, in ms. */
static long proc_cpu_ms(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) FAIL("cannot open %s: %s", path, strerror(errno));
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *p = strrchr(buf, ')'); /* the name may hold spaces */
  unsigned long long ut = 0, st = 0;
  if (!p || sscanf(p + 2,
                   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                   &ut, &st) != 2)
    FAIL("cannot read the CPU times in %s", path);
  return (long)((ut + st) * 1000ull / (unsigned long long)sysconf(_SC_CLK_TCK));
}

static uint64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* Whether the service closed socket `fd` (an end of stream, or a reset when
 * it closed with our bytes unread) rather than sending something; waits for
 * one or the other at most 30 s. */
static bool closed_by_service(int fd) {
  char buf[256];
  struct timeval tv = {30, 0};
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ssize_t n = read(fd, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    FAIL("the service neither closed the socket nor answered in 30 s");
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* BindService of `port` written on socket `fd` as it is (unless the
 * service has closed it already). */
static void send_bind(int fd, const char *port) {
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_BIND;
  f.request_id = 1;
  f.name.data = (const uint8_t *)port;
  f.name.len = (uint32_t)strlen(port);
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__ipc_frame_encode(&b, &f);
  ssize_t n = send(fd, etch__pb_buf_data(&b), etch__pb_buf_len(&b),
                   MSG_NOSIGNAL);
  if (n != (ssize_t)etch__pb_buf_len(&b) && !(n < 0 && errno == EPIPE))
    FAIL("send: %zd (%s)", n, strerror(errno));
  etch__pb_buf_free(&b);
}

/* A producer and `etch record --system` record 100 events exactly. */
static void records_exactly(svc *s, const char *name) {
  char out[700];
  snprintf(out, sizeof out, "%s/%s.pftrace", s->dir, name);
  pid_t rec = record_start(s, out, NULL);
  pid_t p = producer(name, 1, 100);
  ASSERT_EQ_INT(wait_exit(p), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  check_ticks(&t, pids, 4096, p, 0, 100);
  ASSERT_EQ_INT((int)td_count(&t, 3, "tick"), 100);
  td_free(&t);
}

#define FD_LIMIT 32
#define FD_CONNS 40

/* etchd at its open-files limit: the connections it cannot take are
 * closed at once (their clients see a refusal, not a connection nobody
 * serves), etchd does not spin on the listening socket that stays
 * readable, says it is out of descriptors, and records again once some
 * are given back. */
TEST(out_of_descriptors_etchd_refuses_and_does_not_spin) {
  svc s;
  svc_start_argv(&s, FD_LIMIT, NULL);
  wait_log(&s, "consumer 1 gone: peer closed the connection", 1); /* probe */
  int base = proc_fds(s.pid); /* its stdio, sockets, spare */
  ASSERT_EQ_INT(base, 6);
  int fds[FD_CONNS];
  for (int i = 0; i < FD_CONNS; i++) {
    fds[i] = raw_connect(s.prod);
    send_bind(fds[i], "ProducerPort");
  }
  /* It has taken all it can (while it refuses one, its spare is not
   * open: the count is one short). */
  int tries = 0;
  for (; tries < 3000 && proc_fds(s.pid) != FD_LIMIT; tries++) sleep_ms(10);
  if (tries == 3000) FAIL("etchd has %d descriptors open, not %d", proc_fds(s.pid),
                      FD_LIMIT);
  /* The idle interval: a spinning etchd uses all of it. A window by
   * design, measured: the assertion compares CPU time with the wall time
   * that really passed, however long. */
  long cpu0 = proc_cpu_ms(s.pid);
  uint64_t t0 = now_ms();
  sleep_ms(1000);
  long cpu = proc_cpu_ms(s.pid) - cpu0;
  uint64_t wall = now_ms() - t0;
  if (cpu * 10 > (long)wall * 3)
    FAIL("etchd used %ld ms of CPU in %llu ms at its descriptor limit", cpu,
         (unsigned long long)wall);
  /* The first ones were taken and answered, the rest closed at once. */
  int taken = FD_LIMIT - base;
  for (int i = 0; i < FD_CONNS; i++)
    if (closed_by_service(fds[i]) != (i >= taken))
      FAIL("connection %d of %d (%d taken): %s", i, FD_CONNS, taken,
           i >= taken ? "answered" : "closed");
  wait_log(&s,
           "etchd: out of file descriptors (accept: Too many open files): "
           "refused ",
           1);
  /* Some given back: a producer and a consumer are served again. */
  for (int i = 0; i < 10; i++) close(fds[i]);
  for (int i = 0; i < 3000 && proc_fds(s.pid) > FD_LIMIT - 10; i++)
    sleep_ms(10);
  ASSERT_EQ_INT(proc_fds(s.pid), FD_LIMIT - 10);
  records_exactly(&s, "fds");
  for (int i = 10; i < FD_CONNS; i++) close(fds[i]);
  svc_stop(&s);
}

/* One uid's connections over --max-conns-per-uid are closed at once, with
 * a line in the log; its connections within the limit keep working, as do
 * another uid's (when the test runs as root and can be another), and its
 * new ones once it has let some go. */
TEST(connections_over_the_per_uid_limit_are_refused) {
  svc s;
  const char *const extra[] = {"--max-conns-per-uid", "4", NULL};
  svc_start_argv(&s, 0, extra);
  raw held[4];
  for (int i = 0; i < 3; i++) raw_open(&held[i], s.prod, "ProducerPort");
  raw_open(&held[3], s.cons, "ConsumerPort");
  int over_p = raw_connect(s.prod);
  send_bind(over_p, "ProducerPort");
  ASSERT_TRUE(closed_by_service(over_p));
  close(over_p);
  int over_c = raw_connect(s.cons);
  send_bind(over_c, "ConsumerPort");
  ASSERT_TRUE(closed_by_service(over_c));
  close(over_c);
  char line[300];
  snprintf(line, sizeof line,
           "etchd: refused a producer connection from uid %u (pid %d): uid "
           "%u has 4 connections, the limit (--max-conns-per-uid)\n",
           (unsigned)geteuid(), (int)getpid(), (unsigned)geteuid());
  ASSERT_EQ_INT(log_lines(&s, line), 1);
  /* Those within the limit were not touched. */
  etch_ipc_frame f;
  raw_invoke(&held[3], "QueryCapabilities", NULL);
  raw_next(&held[3], &f);
  ASSERT_EQ_INT(f.kind, ETCH_IPC_REPLY);
  ASSERT_TRUE(f.success);
  int gone = 1; /* svc_start_argv's probe */
  if (geteuid() == 0) {
    /* Another uid is not counted with this one. */
    ASSERT_EQ_INT(chmod(s.dir, 0711), 0);
    ASSERT_EQ_INT(chmod(s.prod, 0666), 0);
    pid_t kid = fork();
    if (kid == 0) {
      if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
      raw r;
      raw_open(&r, s.prod, "ProducerPort"); /* FAILs (exit 1) if refused */
      raw_close(&r);
      _exit(0);
    }
    ASSERT_EQ_INT(wait_exit(kid), 0);
    gone++;
  }
  /* Let go of, the uid's connections leave room for new ones. */
  for (int i = 0; i < 4; i++) raw_close(&held[i]);
  wait_log(&s, "gone: peer closed the connection", gone + 4);
  records_exactly(&s, "uid");
  /* The consumer's refusal is logged too unless it came within a second
   * of the producer's (the lines are rate-limited); no other was. */
  ASSERT_EQ_INT(log_lines(&s, "refused a producer"), 1);
  ASSERT_TRUE(log_lines(&s, "refused a") <= 2);
  svc_stop(&s);
}

/* A connection that sends nothing, or part of a frame, without binding a
 * port is closed after --bind-timeout-ms; one that has bound and leaves a
 * frame unfinished, after --frame-timeout-ms; one that has bound and sits
 * idle is kept. */
TEST(connections_that_do_not_bind_or_finish_a_frame_are_closed) {
  svc s;
  const char *const extra[] = {"--bind-timeout-ms", "300",
                               "--frame-timeout-ms", "300", NULL};
  svc_start_argv(&s, 0, extra);
  raw idle;
  raw_open(&idle, s.cons, "ConsumerPort");
  uint64_t t0 = now_ms();
  int silent = raw_connect(s.prod);
  int half = raw_connect(s.cons);
  const uint8_t part[14] = {100, 0, 0, 0, 8, 1, 0x12, 20, 10};
  ASSERT_EQ_INT(write(half, part, sizeof part), (long)sizeof part);
  raw bound;
  raw_open(&bound, s.prod, "ProducerPort");
  ASSERT_EQ_INT(write(bound.c.fd, part, sizeof part), (long)sizeof part);
  ASSERT_TRUE(closed_by_service(silent));
  ASSERT_TRUE(now_ms() - t0 >= 300); /* not before its time */
  ASSERT_TRUE(closed_by_service(half));
  ASSERT_TRUE(closed_by_service(bound.c.fd));
  wait_log(&s, "gone: bound no port within 300 ms of connecting", 2);
  wait_log(&s, "gone: sent 14 bytes of a frame and not the rest within 300 ms",
           1);
  /* The idle one, bound for longer than that, is served. */
  ASSERT_TRUE(now_ms() - t0 >= 300);
  etch_ipc_frame f;
  raw_invoke(&idle, "QueryCapabilities", NULL);
  raw_next(&idle, &f);
  ASSERT_EQ_INT(f.kind, ETCH_IPC_REPLY);
  ASSERT_TRUE(f.success);
  /* Those three, and svc_start_argv's probe. */
  ASSERT_EQ_INT(log_lines(&s, " gone: "), 4);
  ASSERT_EQ_INT(log_lines(&s, "consumer 1 gone: peer closed the connection"),
                1);
  close(silent);
  close(half);
  raw_close(&bound);
  raw_close(&idle);
  svc_stop(&s);
}

#define BIG_FRAME 120000u /* bytes after the length */
#define BIG_SENT 100000u  /* of the 4 + BIG_FRAME, before the pause */

/* A frame of BIG_FRAME bytes the service ignores (request id 1, and a
 * field no version of the protocol has), with its length. */
static uint8_t *big_frame(void) {
  uint8_t *b = malloc(4 + BIG_FRAME);
  ASSERT_TRUE(b != NULL);
  memset(b, 'x', 4 + BIG_FRAME);
  uint32_t n = BIG_FRAME, pad = BIG_FRAME - 7;
  for (int i = 0; i < 4; i++) b[i] = (uint8_t)(n >> (8 * i));
  /* request_id = 1; field 1000, length-delimited: 8002 = 0xc2 0x3e */
  const uint8_t head[7] = {8, 1, 0xc2, 0x3e, (uint8_t)(0x80 | (pad & 0x7f)),
                           (uint8_t)(0x80 | ((pad >> 7) & 0x7f)),
                           (uint8_t)(pad >> 14)};
  memcpy(b + 4, head, sizeof head);
  return b;
}

static void write_all(int fd, const uint8_t *p, size_t n) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) FAIL("write: %s", strerror(errno));
    p += k;
    n -= (size_t)k;
  }
}

/* Frames received in part hold memory until they are finished; all
 * connections together may hold --max-partial-frames-mb. Past it, the
 * connection whose frame has waited longest is closed, with a line in the
 * log; the others are served, their frames finished. */
TEST(frames_received_in_part_are_bounded_in_memory) {
  svc s;
  const char *const extra[] = {"--max-partial-frames-mb", "1", NULL};
  svc_start_argv(&s, 0, extra);
  uint8_t *frame = big_frame();
  raw q; /* a consumer whose replies say the service has read what came
            before them */
  raw_open(&q, s.cons, "ConsumerPort");
  etch_ipc_frame f;
  enum { N = 9 }; /* each holds 128 KiB: 8 fit in 1 MiB, 9 do not */
  raw r[N];
  for (int i = 0; i < N; i++) {
    raw_open(&r[i], s.prod, "ProducerPort");
    write_all(r[i].c.fd, frame, BIG_SENT);
    raw_invoke(&q, "QueryCapabilities", NULL);
    raw_next(&q, &f);
    ASSERT_TRUE(f.success);
  }
  ASSERT_TRUE(closed_by_service(r[0].c.fd));
  char line[300];
  snprintf(line, sizeof line,
           "more than the limit of 1024 KiB (--max-partial-frames-mb): "
           "closed producer 1 (uid %u, pid %d), whose frame waited longest\n",
           (unsigned)geteuid(), (int)getpid());
  ASSERT_EQ_INT(log_lines(&s, line), 1);
  ASSERT_EQ_INT(log_lines(&s, "etchd: frames received in part hold "), 1);
  /* The others finish their frames and are served. */
  for (int i = 1; i < N; i++) {
    write_all(r[i].c.fd, frame + BIG_SENT, 4 + BIG_FRAME - BIG_SENT);
    r[i].req = 0;
    etch_ipc_frame b;
    memset(&b, 0, sizeof b);
    b.kind = ETCH_IPC_BIND;
    b.request_id = 7;
    b.name.data = (const uint8_t *)"ProducerPort";
    b.name.len = 12;
    ASSERT_OK(etch__ipc_conn_send(&r[i].c, &b, -1));
    raw_next(&r[i], &f);
    ASSERT_EQ_INT(f.kind, ETCH_IPC_BIND_REPLY);
    ASSERT_EQ_INT(f.request_id, 7);
  }
  ASSERT_EQ_INT(log_lines(&s, " gone: "), 2); /* producer 1, the probe */
  for (int i = 0; i < N; i++) raw_close(&r[i]);
  raw_close(&q);
  free(frame);
  svc_stop(&s);
}

/* ---- the consumer's file never holds etchd up ---- */

/* EnableTracing with `text` as the config and `fd` as its write_into_file
 * descriptor; returns the call's request id (its answer ends the session). */
static uint64_t raw_enable_into(raw *r, const char *text, int fd) {
  etch__pb_buf cfg, args;
  etch__pb_buf_init(&cfg, 128, 0);
  etch__pb_buf_init(&args, 128, 0);
  ASSERT_OK(etch__trace_config_text_to_binary(text, strlen(text), &cfg));
  etch__pb_write_bytes_field(&args.s, ETCH_ETR_TRACE_CONFIG,
                            etch__pb_buf_data(&cfg), etch__pb_buf_len(&cfg));
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_INVOKE;
  f.request_id = ++r->req;
  f.service_id = r->svc;
  f.method_id = etch__ipc_method_id(&r->bind, "EnableTracing");
  f.body.data = etch__pb_buf_data(&args);
  f.body.len = (uint32_t)etch__pb_buf_len(&args);
  ASSERT_OK(etch__ipc_conn_send(&r->c, &f, fd));
  ASSERT_OK(etch__ipc_conn_flush(&r->c));
  etch__pb_buf_free(&cfg);
  etch__pb_buf_free(&args);
  return f.request_id;
}

/* Waits, at most `secs` seconds, for the answer to EnableTracing `req`:
 * the session's end, with its error ("" when none) in err. */
static void raw_session_end(raw *r, uint64_t req, char *err, size_t cap,
                            int secs) {
  for (int i = 0; i < secs * 20; i++) {
    etch_ipc_frame g;
    int n;
    while ((n = etch__ipc_conn_next(&r->c, &g)) == 1) {
      if (g.kind != ETCH_IPC_REPLY || g.request_id != req) continue;
      etch__pb_dec d;
      etch__pb_field fl;
      bool disabled = false;
      err[0] = 0;
      etch__pb_dec_init(&d, g.body.data, g.body.len);
      while (etch__pb_next(&d, &fl)) {
        if (fl.id == ETCH_ETRESP_DISABLED) disabled = fl.u != 0;
        if (fl.id == ETCH_ETRESP_ERROR)
          snprintf(err, cap, "%.*s", (int)fl.len, (const char *)fl.data);
      }
      ASSERT_TRUE(disabled);
      return;
    }
    if (n < 0 || r->c.failed) FAIL("raw: %s", r->c.err);
    etch__ipc_conn_wait(&r->c, 50);
  }
  FAIL("the session did not end within %d s", secs);
}

/* A consumer gives etchd a pipe whose read end it holds and never reads.
 * Once the pipe is full, etchd goes on serving: another consumer records
 * a producer's every event, the stuck session ends with its reason, and
 * what the pipe holds is whole packets. (etchd used to block in write():
 * the second consumer got no answer.) */
TEST(a_pipe_nobody_reads_holds_up_no_one) {
  svc s;
  svc_start(&s);
  int pp[2];
  ASSERT_EQ_INT(pipe2(pp, O_CLOEXEC), 0);
  raw a;
  raw_open(&a, s.cons, "ConsumerPort");
  uint64_t req = raw_enable_into(
      &a,
      "buffers { size_kb: 4096 }\n"
      "data_sources { config { name: \"track_event\" } }\n"
      "write_into_file: true\nfile_write_period_ms: 100\n",
      pp[1]);
  pid_t feeder = producer("feeder", 1, 0);
  /* The pipe is full: it holds bytes and has no room for more. */
  bool full = false;
  for (int i = 0; i < 3000 && !full; i++) {
    struct pollfd pf = {.fd = pp[1], .events = POLLOUT};
    int unread = 0;
    ioctl(pp[0], FIONREAD, &unread);
    full = poll(&pf, 1, 0) == 0 && unread > 0;
    if (!full) sleep_ms(10);
  }
  ASSERT_TRUE(full);
  /* Meanwhile, another consumer and another producer. */
  char out[700];
  snprintf(out, sizeof out, "%s/beside.pftrace", s.dir);
  pid_t rec = record_start(&s, out, NULL);
  pid_t q = producer("beside", 2, NEVENTS);
  ASSERT_EQ_INT(wait_exit(q), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  for (int k = 0; k < 2; k++) check_ticks(&t, pids, 4096, q, k, NEVENTS);
  td_free(&t);
  /* The stuck session ends, and says why. */
  char err[400];
  raw_session_end(&a, req, err, sizeof err, 30);
  ASSERT_STR_EQ(err, "the consumer's file took no bytes of the trace for "
                     "5000 ms (a pipe or socket nobody reads?)");
  ASSERT_EQ_INT(log_lines(&s, "etchd: session 1: the consumer's file took "
                              "no bytes of the trace for 5000 ms"),
                1);
  kill(feeder, SIGKILL);
  wait_exit(feeder);
  /* Once the consumer leaves, etchd lets go of the pipe: it ends after
   * whole packets, and decodes. */
  raw_close(&a);
  close(pp[1]);
  etch__pb_buf got;
  etch__pb_buf_init(&got, 1 << 16, 0);
  uint8_t buf[65536];
  ssize_t n;
  while ((n = read(pp[0], buf, sizeof buf)) > 0)
    etch__pb_write_bytes(&got.s, buf, (size_t)n);
  close(pp[0]);
  ASSERT_TRUE(etch__pb_buf_len(&got) > 0);
  if (td_decode(etch__pb_buf_data(&got), etch__pb_buf_len(&got), &t) != 0)
    FAIL("the pipe's trace does not decode: %s", t.error);
  ASSERT_TRUE(t.clock_snapshots >= 1);
  ASSERT_TRUE(td_count(&t, 3, "tick") > 0);
  td_free(&t);
  etch__pb_buf_free(&got);
  svc_stop(&s);
}

/* ---- a full disk ---- */

/* Waits at most `secs` seconds for pid's exit: its status, -1 if it did
 * not end. */
static int wait_exit_within(pid_t pid, int secs) {
  for (int i = 0; i < secs * 100; i++) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid)
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    sleep_ms(10);
  }
  return -1;
}

/* Whether `path` holds `want`. */
static bool file_has(const char *path, const char *want) {
  size_t n;
  char *text = (char *)etch_test_read_file(path, &n);
  bool has = text && memmem(text, n, want, strlen(want)) != NULL;
  if (!has) fprintf(stderr, "  %s:\n%.*s\n", path, (int)(text ? n : 0), text);
  free(text);
  return has;
}

/* `etch stats FILE` reads it: exit status 0. */
static void etch_stats_reads(const svc *s, const char *file) {
  char log[700];
  snprintf(log, sizeof log, "%s/stats.log", s->dir);
  char *argv[] = {(char *)ETCH_BIN, "stats", (char *)file, NULL};
  int rc = wait_exit(spawn(argv, log));
  if (rc != 0) {
    file_has(log, "");
    FAIL("etch stats %s: exit status %d", file, rc);
  }
}

#define WIF_CONFIG                                    \
  "buffers { size_kb: 4096 }\n"                       \
  "data_sources { config { name: \"track_event\" } }\n" \
  "write_into_file: true\nfile_write_period_ms: 100\n"

/* etchd writes a write_into_file trace on a disk that fills up (a file
 * size limit: EFBIG, as ENOSPC or EDQUOT): the session ends with the
 * reason, in etchd's log and to etch record, which exits non-zero and says
 * it; the file is cut back to its last whole packet and reads. (The
 * session went on, etch record exited 0, and the file ended mid-packet.) */
TEST(a_full_disk_ends_a_write_into_file_session_at_a_whole_packet) {
  svc s;
  spawn_fsize = 400000; /* above the shared memory etchd makes (a memfd) */
  svc_start(&s);
  spawn_fsize = 0;
  char out[700];
  pid_t rec = record_config(&s, "efbig", WIF_CONFIG, "-q", out, sizeof out);
  setenv("ETCH_SYSTEM_SMB_KB", "256", 1);
  pid_t p = producer("filler", 1, 0);
  unsetenv("ETCH_SYSTEM_SMB_KB");
  int rc = wait_exit_within(rec, 30); /* it ends on its own */
  kill(p, SIGKILL);
  wait_exit(p);
  if (rc < 0) {
    kill(rec, SIGKILL);
    wait_exit(rec);
    FAIL("the session did not end when its file took no more");
  }
  ASSERT_EQ_INT(rc, 1);
  struct stat st;
  ASSERT_TRUE(stat(out, &st) == 0);
  ASSERT_TRUE(st.st_size > 0 && st.st_size <= 400000);
  char want[1200], logp[700];
  snprintf(want, sizeof want,
           "etch: %s: the service ended the session early: cannot write the "
           "trace into the consumer's file: File too large; the file ends at "
           "its last whole packet, %lld bytes\n",
           out, (long long)st.st_size);
  snprintf(logp, sizeof logp, "%s/record.log", s.dir);
  ASSERT_TRUE(file_has(logp, want));
  ASSERT_EQ_INT(log_lines(&s, "etchd: session 1: cannot write the trace into "
                              "the consumer's file: File too large"),
                1);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  ASSERT_TRUE(t.clock_snapshots >= 1);
  ASSERT_TRUE(td_count(&t, 3, "tick") > 100);
  td_free(&t);
  etch_stats_reads(&s, out);
  svc_stop(&s);
}

/* A write_into_file descriptor that fails every write (/dev/full: ENOSPC)
 * ends the session with the reason; etch record exits non-zero. */
TEST(a_write_into_file_descriptor_that_fails_ends_the_session) {
  svc s;
  svc_start(&s);
  char cfg[700], log[700];
  snprintf(cfg, sizeof cfg, "%s/full.pbtx", s.dir);
  snprintf(log, sizeof log, "%s/record-full.log", s.dir);
  FILE *f = fopen(cfg, "w");
  ASSERT_TRUE(f != NULL);
  fputs(WIF_CONFIG, f);
  fclose(f);
  char *argv[] = {(char *)ETCH_BIN, "record", "--config", cfg, "-o",
                  "/dev/full", "-q", NULL};
  pid_t rec = spawn(argv, log);
  pid_t p = producer("full", 1, 0);
  int rc = wait_exit_within(rec, 30);
  kill(p, SIGKILL);
  wait_exit(p);
  if (rc < 0) {
    kill(rec, SIGKILL);
    wait_exit(rec);
    FAIL("the session did not end when its file failed");
  }
  ASSERT_EQ_INT(rc, 1);
  ASSERT_TRUE(file_has(log, "etch: /dev/full: the service ended the session "
                            "early: cannot write the trace into the "
                            "consumer's file: No space left on device\n"));
  ASSERT_EQ_INT(log_lines(&s, "etchd: session 1: cannot write the trace into "
                              "the consumer's file: No space left on device"),
                1);
  svc_stop(&s);
}

/* etch record --system writing the trace it read from the service on a
 * disk that fills up: exit status 1 with the reason, and the file ends
 * at its last whole packet. */
TEST(record_system_on_a_full_disk_keeps_whole_packets) {
  svc s;
  svc_start(&s);
  char out[700];
  snprintf(out, sizeof out, "%s/small.pftrace", s.dir);
  spawn_fsize = 16384;
  pid_t rec = record_start(&s, out, "-q");
  spawn_fsize = 0;
  pid_t p = producer("big", 2, NEVENTS);
  ASSERT_EQ_INT(wait_exit(p), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 1);
  struct stat st;
  ASSERT_TRUE(stat(out, &st) == 0);
  ASSERT_TRUE(st.st_size > 0 && st.st_size <= 16384);
  char want[1200], logp[700];
  snprintf(want, sizeof want,
           "etch: cannot write the trace to %s: File too large; it ends at "
           "its last whole packet (%lld bytes)\n",
           out, (long long)st.st_size);
  snprintf(logp, sizeof logp, "%s/record.log", s.dir);
  ASSERT_TRUE(file_has(logp, want));
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  ASSERT_TRUE(t.clock_snapshots >= 1);
  ASSERT_TRUE(td_count(&t, 3, "tick") > 0);
  td_free(&t);
  etch_stats_reads(&s, out);
  svc_stop(&s);
}

/* ---- chunk layouts that once held a budgeted read (issue: tracebuf) ---- */

/* Writes chunk 0 of `page` for writer 1 as chunk `chunk_id`: when `drop`,
 * a drop mark, then `n` packets "pkt-{first}".. (for_testing), then, when
 * `cont`, an empty fragment that goes on in the next chunk; both CONTINUES
 * flags when `cont`; completes it. */
static void raw_write_layout(uint8_t *smb, uint32_t page_size, uint32_t page,
                             uint32_t chunk_id, bool drop, int first, int n,
                             bool cont) {
  etch_smb m;
  ASSERT_OK(etch__smb_init(&m, smb, (uint64_t)page_size * 4, page_size));
  if (etch__smb_bitmap_layout(etch__smb_bitmap(&m, page)) == 0)
    ASSERT_TRUE(etch__smb_try_partition(&m, page, ETCH_SMB_DIV1));
  uint16_t flags =
      cont ? ETCH_SMB_FIRST_CONTINUES | ETCH_SMB_LAST_CONTINUES : 0;
  uint8_t *c = NULL;
  /* The service frees a committed chunk when it has copied it (raw_sync
   * after each commit): it is free again at once. */
  c = etch__smb_try_acquire_write(&m, page, 0, 1, chunk_id, flags);
  ASSERT_TRUE(c != NULL);
  uint8_t *p = c + ETCH_SMB_CHUNK_HEADER;
  uint16_t count = 0;
  if (drop) {
    etch__pb_put_redundant4(p, ETCH_SMB_DROP_PACKET);
    p += 4;
    count++;
  }
  for (int i = 0; i < n; i++) {
    char text[16];
    int tl = snprintf(text, sizeof text, "pkt-%d", first + i);
    etch__pb_put_redundant4(p, (uint32_t)(3 + tl));
    p += 4;
    *p++ = 0xa2;
    *p++ = 0x38;
    *p++ = (uint8_t)tl;
    memcpy(p, text, (size_t)tl);
    p += tl;
    count++;
  }
  if (cont) {
    etch__pb_put_redundant4(p, 0);
    p += 4;
    count++;
  }
  etch_smb_chunk_header *h = (etch_smb_chunk_header *)c;
  __atomic_store_n(&h->packets, (uint16_t)(count | flags << 10),
                   __ATOMIC_RELEASE);
  ASSERT_TRUE(etch__smb_release_complete(&m, page, 0));
}

/* fuzz_tracebuf's layout through etchd: chunks that begin with a drop
 * mark and continue packets, committed, then committed again longer, into
 * a ring small enough to lose some of them unread, read at the end or
 * written into the consumer's file every 100 ms, while an honest producer
 * records into another session. The recording ends with every honest
 * tick, none of the raw packets twice, and etchd serves the next session
 * exactly. Into the file, the first chunks are read before their longer
 * copy comes, which puts a drop mark before what was read: a skip over
 * the read fragments that stopped at a drop mark handed the same packets
 * out again (and, when etchd leaves such a packet out, kept a read with a
 * small budget from ever getting further). */
TEST(a_producers_chunk_layout_cannot_hold_a_read) {
  for (int mode = 0; mode < 2; mode++) {
    svc s;
    svc_start(&s);
    /* The hostile session first: its buffer is etchd's buffer 1, the one
     * raw_source's writer targets. */
    char out[700];
    pid_t rec = record_config(
        &s, mode ? "layout-file" : "layout",
        mode ? "buffers { size_kb: 64 }\n"
               "data_sources { config { name: \"raw.source\" } }\n"
               "write_into_file: true\nfile_write_period_ms: 100\n"
               "flush_timeout_ms: 300\ndata_source_stop_timeout_ms: 300\n"
             : "buffers { size_kb: 64 }\n"
               "data_sources { config { name: \"raw.source\" } }\n"
               "flush_timeout_ms: 300\ndata_source_stop_timeout_ms: 300\n",
        NULL, out, sizeof out);
    /* An honest session beside it, with a producer of libetch. */
    char out2[700];
    snprintf(out2, sizeof out2, "%s/honest.pftrace", s.dir);
    pid_t rec2 = record_start(&s, out2, NULL);
    raw r;
    uint8_t *smb;
    int fd;
    uint32_t page_kb;
    raw_source(&r, &s, "raw.source", &smb, &fd, &page_kb);
    pid_t p = producer("honest", 2, 2000);
    int next = 0;
    for (uint32_t id = 0; id < 400; id++) {
      uint32_t page = id % 4;
      int n = 1 + (int)(id % 7) * 8;
      bool read_first = mode == 1 && id < 4;
      /* The first copy: two packets, or a drop mark and one. */
      raw_write_layout(smb, page_kb * 1024, page, id, !read_first, next,
                       read_first ? 2 : 1, !read_first);
      raw_commit(&r, page);
      raw_sync(&r);
      if (read_first) { /* until etchd wrote them into the file */
        int max_n = -1;
        WAIT_UNTIL(count_testing(out, &max_n) >= 0 && max_n >= next + 1,
                   "pkt-%d never reached %s", next + 1, out);
      }
      /* The same chunk again, longer, a drop mark first: its first two
       * fragments hold what the first copy's did (and were read). */
      if (read_first)
        raw_write_layout(smb, page_kb * 1024, page, id, true, next + 1, n + 1,
                         false);
      else
        raw_write_layout(smb, page_kb * 1024, page, id, true, next, n + 1,
                         true);
      raw_commit(&r, page);
      raw_sync(&r);
      next += n + 2;
    }
    ASSERT_EQ_INT(wait_exit(p), 0);
    kill(rec2, SIGINT);
    ASSERT_EQ_INT(wait_exit(rec2), 0);
    kill(rec, SIGINT);
    ASSERT_EQ_INT(wait_exit(rec), 0);
    /* Each raw packet at most once (some went with the ring). */
    size_t len;
    uint8_t *d = etch_test_read_file(out, &len);
    ASSERT_TRUE(d != NULL);
    static uint8_t seen[40000];
    memset(seen, 0, sizeof seen);
    int raw_n = 0;
    etch__pb_dec dec, pk;
    etch__pb_field f, g;
    etch__pb_dec_init(&dec, d, len);
    while (etch__pb_next(&dec, &f)) {
      etch__pb_dec_init(&pk, f.data, f.len);
      while (etch__pb_next(&pk, &g))
        if (g.id == 900 && g.wt == 2 && g.len > 4 &&
            !memcmp(g.data, "pkt-", 4)) {
          int k = atoi((const char *)g.data + 4);
          ASSERT_TRUE(k >= 0 && k < next && k < (int)sizeof seen);
          ASSERT_EQ_INT(seen[k], 0);
          seen[k] = 1;
          raw_n++;
        }
    }
    free(d);
    ASSERT_TRUE(raw_n > 0);
    td_trace t;
    static int32_t pids[4096];
    decode(out2, &t, pids, 4096);
    check_ticks(&t, pids, 4096, p, 0, 2000);
    check_ticks(&t, pids, 4096, p, 1, 2000);
    td_free(&t);
    munmap(smb, (size_t)page_kb * 1024 * 4);
    close(fd);
    raw_close(&r);
    ASSERT_EQ_INT(log_lines(&s, "made no progress"), 0);
    records_exactly(&s, "after-layout"); /* etchd serves on */
    svc_stop(&s);
  }
}

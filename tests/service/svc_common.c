/*
 * svc_common.c - the helpers of svc_test.h.
 */
#define _GNU_SOURCE
#include "svc_test.h"

void sleep_ms(long ms) {
  struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&d, NULL);
}

/* Runs a program that dies with the test (a failed test leaves no etchd,
 * recorder or producer behind). */
/* Set: what spawn() starts may write files of at most this many bytes
 * (RLIMIT_FSIZE, SIGXFSZ ignored: a write past it fails with EFBIG, as a
 * full disk's with ENOSPC). */
rlim_t spawn_fsize;

pid_t spawn(char *const argv[], const char *out) {
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

int wait_exit(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
void svc_start(svc *s) { svc_start_with(s, NULL, NULL); }
void svc_start_with(svc *s, const char *extra, const char *extra2) {
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
int log_lines(const svc *s, const char *needle) {
  FILE *f = fopen(s->log, "r");
  char line[512];
  int n = 0;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, needle)) n++;
  if (f) fclose(f);
  return n;
}

/* Until etchd's log has at least `n` lines holding `needle`. */
void wait_log(const svc *s, const char *needle, int n) {
  WAIT_UNTIL(log_lines(s, needle) >= n,
             "etchd's log (%s) has %d lines with \"%s\", not %d", s->log,
             log_lines(s, needle), needle, n);
}

/* Whether `pid`, a child, has ended (left unreaped for wait_exit). */
bool child_ended(pid_t pid) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         si.si_pid == pid;
}

/* Consumers' sessions etchd took or refused, from its log. */
int log_sessions(const svc *s) {
  return log_lines(s, " buffers, ") + log_lines(s, ": session refused");
}

/* Whether process `pid` catches SIGINT (/proc/PID/status, SigCgt). */
bool catches_sigint(pid_t pid) {
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
void wait_session(const svc *s, int before, pid_t rec) {
  WAIT_UNTIL((log_sessions(s) > before && catches_sigint(rec)) ||
                 child_ended(rec),
             "etchd's log (%s) shows no session of pid %d, or it does not "
             "catch SIGINT",
             s->log, (int)rec);
}

void svc_stop(svc *s) {
  kill(s->pid, SIGTERM);
  int rc = wait_exit(s->pid);
  if (rc != 0) FAIL("etchd ended with %d (see %s)", rc, s->log);
  /* A sanitizer's report in etchd fails the test, though etchd went on. */
  if (log_lines(s, "runtime error") || log_lines(s, "Sanitizer"))
    FAIL("etchd's log (%s) has a sanitizer's report", s->log);
}

/* `etch record --system -o OUT` in the background, until SIGINT. */
pid_t record_start(const svc *s, const char *out, const char *extra) {
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
pid_t record_config(const svc *s, const char *name, const char *text,
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

pid_t producer(const char *name, int threads, long events) {
  char t[16], e[24];
  snprintf(t, sizeof t, "%d", threads);
  snprintf(e, sizeof e, "%ld", events);
  setenv("ETCH_SYSTEM_WAIT_MS", "3000", 1);
  char *argv[] = {(char *)SVC_PRODUCER, (char *)name, t, e, NULL};
  return spawn(argv, NULL);
}

/* trusted_pid of each sequence, from the packets themselves. */
void seq_pids(const uint8_t *d, size_t n, int32_t *pids, size_t cap) {
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
const td_track *worker_track(const td_trace *t, int32_t pid, int k) {
  char name[32];
  snprintf(name, sizeof name, "worker-%d", k);
  const td_track *tr = NULL;
  for (size_t i = 0; i < t->ntracks; i++)
    if (t->tracks[i].is_thread && t->tracks[i].pid == pid &&
        t->tracks[i].name && !strcmp(t->tracks[i].name, name))
      tr = &t->tracks[i];
  return tr;
}

long check_ticks(const td_trace *t, const int32_t *pids, size_t cap,
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

void decode(const char *path, td_trace *t, int32_t *pids, size_t cap) {
  size_t n;
  uint8_t *d = etch_test_read_file(path, &n);
  if (!d) FAIL("no trace at %s", path);
  memset(pids, 0xff, cap * sizeof *pids);
  seq_pids(d, n, pids, cap);
  if (td_decode(d, n, t) != 0) FAIL("trace does not decode: %s", t->error);
  free(d);
}

int raw_connect(const char *path) {
  int fd;
  if (etch__ipc_connect(path, &fd) != ETCH_OK) FAIL("%s", etch_last_error());
  return fd;
}

void raw_close(raw *r) {
  free(r->names);
  etch__ipc_conn_close(&r->c);
}

void raw_next(raw *r, etch_ipc_frame *f) {
  for (int i = 0; i < 200; i++) {
    int n = etch__ipc_conn_next(&r->c, f);
    if (n == 1) return;
    if (n < 0 || (r->c.failed && !r->c.eof)) FAIL("raw: %s", r->c.err);
    etch__ipc_conn_wait(&r->c, 50);
  }
  FAIL("raw: nothing from the service");
}

/* Sync, answered: etchd has handled every request sent before it (it
 * handles a connection's requests in order). */
void raw_sync(raw *r) {
  raw_invoke(r, "Sync", NULL);
  etch_ipc_frame g;
  raw_last_reply(r, &g);
}

void raw_invoke(raw *r, const char *method, const etch__pb_buf *b) {
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
void raw_open(raw *r, const char *path, const char *port) {
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

/* Writes fragments "pkt-0".."pkt-{n-1}" (each a TracePacket with only
 * for_testing = 900) into chunk (page, idx) of the shared memory, state
 * being written, as a writer in the middle of its chunk leaves it. */
void raw_write_chunk(uint8_t *smb, uint32_t page_size, uint32_t page,
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
int count_testing(const char *path, int *max_n) {
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

pid_t producer_mode(const char *name, int threads, long events,
                           const char *mode) {
  char t[16], e[24];
  snprintf(t, sizeof t, "%d", threads);
  snprintf(e, sizeof e, "%ld", events);
  setenv("ETCH_SYSTEM_WAIT_MS", "3000", 1);
  char *argv[] = {(char *)SVC_PRODUCER, (char *)name, t, e, (char *)mode, NULL};
  return spawn(argv, NULL);
}

/* The reply to the last call, past replies to earlier ones. */
void raw_last_reply(raw *r, etch_ipc_frame *g) {
  do raw_next(r, g);
  while (!(g->kind == ETCH_IPC_REPLY && g->request_id == r->req));
}

/* EnableTracing with `text` as the config; the refusal's error if the
 * service answers one at once, else "" (the session runs: a GetTraceStats
 * sent after it is answered first, with success). */
void raw_enable(raw *r, const char *text, char *err, size_t cap) {
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

const char sixteen_huge[] =
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 } "
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 } "
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 } "
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 } "
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 } "
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 } "
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 } "
    "buffers { size_kb: 4294967295 } buffers { size_kb: 4294967295 }";

/* A producer and `etch record --system` record 100 events exactly. */
void records_exactly(svc *s, const char *name) {
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

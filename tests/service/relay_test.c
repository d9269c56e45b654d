/*
 * relay_test.c - `etchd --relay` against a fake host: this process is the
 * host (a TCP listener on a port of 127.0.0.1 the system picked) and the
 * local producers (raw connections to the relay's Unix socket), and checks
 * the frames that cross, byte for byte where they are forwarded:
 *
 *   - the RelayPort connection: set_peer_identity first (the relay's pid,
 *     the boot id, the machine's name), BindService "RelayPort",
 *     InitRelay with this machine's utsname, SyncClock PING then UPDATE
 *     with the builtin clocks, offset by ETCH_RELAY_CLOCK_SKEW_NS;
 *   - a producer's connection: its own set_peer_identity (the producer's
 *     pid and uid) and then its frames unchanged, both ways;
 *   - a producer's frame over the limit, bytes that are no IPCFrame, a
 *     set_peer_identity of its own: that producer's connections close (the
 *     host never sees the frame) and the relay serves the next producer;
 *   - the host going away: the producers' connections close, a producer
 *     that comes while the host is away is closed, and when the host is
 *     back the relay binds RelayPort again and forwards new producers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "ipc/ipc.h"
#include "pb/pb.h"
#include "proto/ipc.h"
#include "test.h"

extern char **environ;

#define WAIT_MS 30000 /* only ends a hang */

static void sleep_ms(long ms) {
  struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&d, NULL);
}

#define WAIT_UNTIL(cond, ...)                                         \
  do {                                                                \
    for (int wait_i_ = 0; wait_i_ < WAIT_MS / 10 && !(cond); wait_i_++) \
      sleep_ms(10);                                                   \
    if (!(cond)) FAIL(__VA_ARGS__);                                   \
  } while (0)

static int file_has(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  char line[1024];
  int n = 0;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, needle)) n++;
  if (f) fclose(f);
  return n;
}

typedef struct fake {
  int lfd;        /* the host's listener */
  char name[128]; /* "127.0.0.1:PORT" */
  etch_ipc_conn port;
  pid_t relay;
  char dir[512], sock[600], log[600];
} fake;

static void host_listen(fake *h, const char *name) {
  int rc = ETCH_EBUSY;
  /* The same port again after a "restart": a moment may pass before the
   * system lets it go. */
  for (int i = 0; i < 300 && rc == ETCH_EBUSY; i++) {
    rc = etch__ipc_listen(name, false, &h->lfd);
    if (rc == ETCH_EBUSY) sleep_ms(10);
  }
  ASSERT_OK(rc);
  ASSERT_OK(etch__ipc_local_name(h->lfd, h->name, sizeof h->name));
}

static void host_accept(fake *h, etch_ipc_conn *c) {
  int fd = -1;
  for (int i = 0; i < WAIT_MS / 10 && fd < 0; i++) {
    ASSERT_OK(etch__ipc_accept(h->lfd, &fd));
    if (fd < 0) sleep_ms(10);
  }
  if (fd < 0) FAIL("the relay did not connect to the host (see %s)", h->log);
  etch__ipc_conn_init(c, fd, 1u << 20);
}

/* The next frame on c, or false when c ended first. */
static bool next_frame(etch_ipc_conn *c, etch_ipc_frame *f) {
  uint64_t end = etch__monotonic_ns() + (uint64_t)WAIT_MS * 1000000u;
  for (;;) {
    int n = etch__ipc_conn_next(c, f);
    if (n == 1) return true;
    if (n < 0 || c->failed) return false;
    if (etch__monotonic_ns() > end) FAIL("no frame in %d ms", WAIT_MS);
    etch__ipc_conn_wait(c, 100);
  }
}

/* Whether c ends (the peer closes) before any further frame. */
static bool ends(etch_ipc_conn *c) {
  etch_ipc_frame f;
  return !next_frame(c, &f);
}

static void boot_id(char *out, size_t cap) {
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  out[0] = 0;
  if (f) {
    if (!fgets(out, (int)cap, f)) out[0] = 0;
    fclose(f);
  }
  out[strcspn(out, "\n")] = 0;
}

static void check_identity(const etch_ipc_frame *f, pid_t pid, uid_t uid) {
  char hint[128];
  boot_id(hint, sizeof hint);
  ASSERT_EQ_INT(f->kind, ETCH_IPC_PEER_IDENTITY);
  ASSERT_EQ_U64(f->request_id, 0);
  ASSERT_TRUE(f->has_pid && f->has_uid);
  ASSERT_EQ_INT(f->pid, pid);
  ASSERT_EQ_INT(f->uid, (int)uid);
  if (hint[0]) ASSERT_TRUE(etch__ipc_bytes_eq(f->machine_id_hint, hint));
  ASSERT_TRUE(etch__ipc_bytes_eq(f->name, "testbox"));
}

static void reply(etch_ipc_conn *c, uint64_t req, bool ok) {
  etch_ipc_frame r;
  memset(&r, 0, sizeof r);
  r.request_id = req;
  r.kind = ETCH_IPC_REPLY;
  r.success = ok;
  ASSERT_OK(etch__ipc_conn_send(c, &r, -1));
}

/* The BOOTTIME reading of a SyncClockRequest with `phase`. */
static uint64_t sync_boottime(const etch_ipc_frame *f, uint32_t phase) {
  etch__pb_dec d;
  etch__pb_field x;
  uint64_t got_phase = 0, boot = 0;
  unsigned clocks = 0;
  etch__pb_dec_init(&d, f->body.data, f->body.len);
  while (etch__pb_next(&d, &x)) {
    if (x.id == ETCH_SCR_PHASE) got_phase = x.u;
    if (x.id != ETCH_SCR_CLOCKS) continue;
    clocks++;
    etch__pb_dec c;
    etch__pb_field y;
    uint64_t id = 0, ts = 0;
    etch__pb_dec_init(&c, x.data, x.len);
    while (etch__pb_next(&c, &y)) {
      if (y.id == ETCH_SCR_CLOCK_ID) id = y.u;
      if (y.id == ETCH_SCR_CLOCK_TIMESTAMP) ts = y.u;
    }
    if (id == 6) boot = ts; /* BUILTIN_CLOCK_BOOTTIME */
  }
  ASSERT_EQ_INT(d.err, 0);
  ASSERT_EQ_U64(got_phase, phase);
  ASSERT_EQ_INT(clocks, 6); /* boottime, realtime and monotonic kinds */
  return boot;
}

/* Serves the relay's RelayPort connection through one clock sync; checks
 * what it says, its clocks `offset` ns ahead of this process's. */
static void serve_port(fake *h, int64_t offset) {
  etch_ipc_frame f;
  host_accept(h, &h->port);
  ASSERT_TRUE(next_frame(&h->port, &f));
  check_identity(&f, h->relay, geteuid());
  ASSERT_TRUE(next_frame(&h->port, &f));
  ASSERT_EQ_INT(f.kind, ETCH_IPC_BIND);
  ASSERT_TRUE(etch__ipc_bytes_eq(f.name, "RelayPort"));
  etch_ipc_frame r;
  memset(&r, 0, sizeof r);
  r.request_id = f.request_id;
  r.kind = ETCH_IPC_BIND_REPLY;
  r.success = true;
  r.service_id = 7;
  r.nmethods = 2;
  r.methods[0] = (etch_ipc_method){1, {(const uint8_t *)"InitRelay", 9}};
  r.methods[1] = (etch_ipc_method){2, {(const uint8_t *)"SyncClock", 9}};
  uint64_t before = etch__boottime_ns();
  ASSERT_OK(etch__ipc_conn_send(&h->port, &r, -1));
  /* InitRelay: this machine's utsname */
  ASSERT_TRUE(next_frame(&h->port, &f));
  ASSERT_EQ_INT(f.kind, ETCH_IPC_INVOKE);
  ASSERT_EQ_INT(f.service_id, 7);
  ASSERT_EQ_INT(f.method_id, 1);
  struct utsname un;
  ASSERT_EQ_INT(uname(&un), 0);
  ASSERT_TRUE(memmem(f.body.data, f.body.len, un.release,
                     strlen(un.release)) != NULL);
  ASSERT_TRUE(memmem(f.body.data, f.body.len, un.sysname,
                     strlen(un.sysname)) != NULL);
  reply(&h->port, f.request_id, true);
  /* SyncClock: PING, then UPDATE once the PING is answered */
  ASSERT_TRUE(next_frame(&h->port, &f));
  uint64_t after = etch__boottime_ns();
  ASSERT_EQ_INT(f.method_id, 2);
  uint64_t ping = sync_boottime(&f, ETCH_SCR_PHASE_PING);
  if (ping < before + (uint64_t)offset || ping > after + (uint64_t)offset)
    FAIL("PING's boottime %llu is not within [%llu, %llu] + %lld",
         (unsigned long long)ping, (unsigned long long)before,
         (unsigned long long)after, (long long)offset);
  reply(&h->port, f.request_id, true);
  ASSERT_TRUE(next_frame(&h->port, &f));
  ASSERT_EQ_INT(f.method_id, 2);
  uint64_t update = sync_boottime(&f, ETCH_SCR_PHASE_UPDATE);
  ASSERT_TRUE(update >= ping);
  reply(&h->port, f.request_id, true);
}

static pid_t spawn_relay(fake *h) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) FAIL("fork: %s", strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int fd = open(h->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    char *argv[] = {(char *)ETCHD_BIN, "--relay",     h->name,
                    "--producer-socket", h->sock,   "--machine-name",
                    "testbox",          "-v",       NULL};
    execve(argv[0], argv, environ);
    _exit(127);
  }
  return pid;
}

static void relay_start(fake *h, int64_t offset) {
  memset(h, 0, sizeof *h);
  snprintf(h->dir, sizeof h->dir, "%s", etch_test_tmpdir());
  snprintf(h->sock, sizeof h->sock, "%s/rp.sock", h->dir);
  snprintf(h->log, sizeof h->log, "%s/relay.log", h->dir);
  host_listen(h, "127.0.0.1:0");
  char off[32];
  snprintf(off, sizeof off, "%lld", (long long)offset);
  setenv("ETCH_RELAY_CLOCK_SKEW_NS", off, 1);
  /* a test's directory (and so the log) is the same for each start */
  int synced = file_has(h->log, "clocks synced with the host");
  h->relay = spawn_relay(h);
  unsetenv("ETCH_RELAY_CLOCK_SKEW_NS");
  serve_port(h, offset);
  WAIT_UNTIL(file_has(h->log, "clocks synced with the host") == synced + 1,
             "the relay did not say it synced (see %s)", h->log);
}

static void relay_stop(fake *h) {
  kill(h->relay, SIGTERM);
  int st;
  while (waitpid(h->relay, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    FAIL("the relay ended with status %d (see %s)", st, h->log);
  if (file_has(h->log, "runtime error") || file_has(h->log, "Sanitizer"))
    FAIL("the relay's log (%s) has a sanitizer's report", h->log);
  if (h->port.fd >= 0) etch__ipc_conn_close(&h->port);
  close(h->lfd);
}

/* A local producer: connected to the relay's socket, and the host's end
 * of the connection the relay opened for it (its identity checked). */
static void producer(fake *h, etch_ipc_conn *local, etch_ipc_conn *remote) {
  int fd = -1;
  for (int i = 0; i < WAIT_MS / 10 && fd < 0; i++)
    if (etch__ipc_connect(h->sock, &fd) != ETCH_OK) {
      fd = -1;
      sleep_ms(10);
    }
  if (fd < 0) FAIL("cannot connect to the relay's socket (see %s)", h->log);
  etch__ipc_conn_init(local, fd, 1u << 20);
  host_accept(h, remote);
  etch_ipc_frame f;
  ASSERT_TRUE(next_frame(remote, &f));
  check_identity(&f, getpid(), geteuid());
}

/* One round trip through the relay: BindService one way, its reply the
 * other, with the same bytes. */
static void round_trip(etch_ipc_conn *local, etch_ipc_conn *remote) {
  etch_ipc_frame f, g;
  memset(&f, 0, sizeof f);
  f.request_id = 42;
  f.kind = ETCH_IPC_BIND;
  f.name = (etch_ipc_bytes){(const uint8_t *)"ProducerPort", 12};
  ASSERT_OK(etch__ipc_conn_send(local, &f, -1));
  ASSERT_TRUE(next_frame(remote, &g));
  ASSERT_EQ_INT(g.kind, ETCH_IPC_BIND);
  ASSERT_EQ_U64(g.request_id, 42);
  ASSERT_TRUE(etch__ipc_bytes_eq(g.name, "ProducerPort"));
  memset(&f, 0, sizeof f);
  f.request_id = 42;
  f.kind = ETCH_IPC_BIND_REPLY;
  f.success = true;
  f.service_id = 3;
  f.nmethods = 1;
  f.methods[0] = (etch_ipc_method){5, {(const uint8_t *)"CommitData", 10}};
  ASSERT_OK(etch__ipc_conn_send(remote, &f, -1));
  ASSERT_TRUE(next_frame(local, &g));
  ASSERT_EQ_INT(g.kind, ETCH_IPC_BIND_REPLY);
  ASSERT_EQ_INT(g.service_id, 3);
  ASSERT_EQ_INT(etch__ipc_method_id(&g, "CommitData"), 5);
}

TEST(relay_binds_relay_port_and_syncs_clocks) {
  fake h;
  relay_start(&h, 0);
  relay_stop(&h);
  /* the test hook: a machine whose clocks are 5 s ahead */
  relay_start(&h, 5000000000ll);
  ASSERT_EQ_INT(file_has(h.log, "test hook: clock reads offset by "
                                "5000000000 ns"),
                1);
  relay_stop(&h);
}

TEST(relay_forwards_frames_unchanged) {
  fake h;
  relay_start(&h, 0);
  etch_ipc_conn a, ha, b, hb;
  producer(&h, &a, &ha);
  producer(&h, &b, &hb);
  round_trip(&a, &ha);
  round_trip(&b, &hb);
  /* A large frame, just under the limit, arrives whole and unchanged. */
  etch_ipc_frame f, g;
  size_t big = ETCH_IPC_MAX_FRAME - 64;
  uint8_t *body = malloc(big);
  ASSERT_TRUE(body != NULL);
  for (size_t i = 0; i < big; i++) body[i] = (uint8_t)(i * 7);
  memset(&f, 0, sizeof f);
  f.request_id = 43;
  f.kind = ETCH_IPC_INVOKE;
  f.service_id = 3;
  f.method_id = 5;
  f.body = (etch_ipc_bytes){body, (uint32_t)big};
  ASSERT_OK(etch__ipc_conn_send(&a, &f, -1));
  ASSERT_TRUE(next_frame(&ha, &g));
  ASSERT_EQ_INT(g.kind, ETCH_IPC_INVOKE);
  ASSERT_EQ_U64(g.body.len, big);
  ASSERT_TRUE(memcmp(g.body.data, body, big) == 0);
  free(body);
  /* A descriptor cannot cross the network: the frame goes, without it. */
  memset(&f, 0, sizeof f);
  f.request_id = 44;
  f.kind = ETCH_IPC_INVOKE;
  f.service_id = 3;
  f.method_id = 5;
  ASSERT_OK(etch__ipc_conn_send(&a, &f, 1));
  ASSERT_TRUE(next_frame(&ha, &g));
  ASSERT_EQ_U64(g.request_id, 44);
  ASSERT_EQ_INT(etch__ipc_conn_take_fd(&ha), -1);
  WAIT_UNTIL(file_has(h.log, "sent a descriptor") == 1,
             "the relay did not log the descriptor (see %s)", h.log);
  round_trip(&a, &ha);
  /* A producer that goes: its host connection ends; the other stays. */
  etch__ipc_conn_close(&a);
  ASSERT_TRUE(ends(&ha));
  round_trip(&b, &hb);
  etch__ipc_conn_close(&ha);
  etch__ipc_conn_close(&b);
  etch__ipc_conn_close(&hb);
  relay_stop(&h);
}

/* What a hostile producer sends, raw. */
static void bad_producer(fake *h, const uint8_t *bytes, size_t n,
                         const char *logged) {
  etch_ipc_conn p, hp;
  producer(h, &p, &hp);
  ASSERT_TRUE(write(p.fd, bytes, n) == (ssize_t)n);
  ASSERT_TRUE(ends(&hp)); /* the host sees no frame, only the end */
  ASSERT_TRUE(ends(&p));
  etch__ipc_conn_close(&p);
  etch__ipc_conn_close(&hp);
  WAIT_UNTIL(file_has(h->log, logged) >= 1,
             "the relay did not log '%s' (see %s)", logged, h->log);
}

TEST(relay_closes_a_hostile_producer_and_serves_the_next) {
  fake h;
  relay_start(&h, 0);
  etch_ipc_conn ok, hok;
  producer(&h, &ok, &hok);
  /* a frame over the limit: its length alone says so */
  uint32_t n = ETCH_IPC_MAX_FRAME + 1;
  uint8_t over[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16),
                     (uint8_t)(n >> 24)};
  bad_producer(&h, over, 4, "larger than the limit");
  /* bytes that are no IPCFrame (a field of wire type 7) */
  uint8_t junk[] = {3, 0, 0, 0, 0x0f, 0xff, 0xff};
  bad_producer(&h, junk, sizeof junk, "malformed IPC frame");
  /* a producer claiming to be someone else */
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_PEER_IDENTITY;
  f.has_pid = f.has_uid = true;
  f.pid = 1;
  f.uid = 0;
  etch__ipc_frame_encode(&b, &f);
  bad_producer(&h, etch__pb_buf_data(&b), etch__pb_buf_len(&b),
               "set_peer_identity of its own");
  etch__pb_buf_free(&b);
  /* a frame begun and left: the producer goes half way through */
  {
    etch_ipc_conn p, hp;
    producer(&h, &p, &hp);
    uint8_t half[] = {100, 0, 0, 0, 0x08, 0x01};
    ASSERT_TRUE(write(p.fd, half, sizeof half) == (ssize_t)sizeof half);
    etch__ipc_conn_close(&p);
    ASSERT_TRUE(ends(&hp));
    etch__ipc_conn_close(&hp);
  }
  /* the honest producer that was there all along, and a new one */
  round_trip(&ok, &hok);
  etch_ipc_conn c, hc;
  producer(&h, &c, &hc);
  round_trip(&c, &hc);
  etch__ipc_conn_close(&ok);
  etch__ipc_conn_close(&hok);
  etch__ipc_conn_close(&c);
  etch__ipc_conn_close(&hc);
  relay_stop(&h);
}

TEST(relay_outlives_its_host) {
  fake h;
  relay_start(&h, 0);
  etch_ipc_conn p, hp;
  producer(&h, &p, &hp);
  round_trip(&p, &hp);
  /* The host goes away: every connection and the listener. */
  char name[128];
  snprintf(name, sizeof name, "%s", h.name);
  etch__ipc_conn_close(&hp);
  etch__ipc_conn_close(&h.port);
  h.port.fd = -1;
  close(h.lfd);
  ASSERT_TRUE(ends(&p)); /* the producer's connection follows */
  etch__ipc_conn_close(&p);
  /* A producer that comes meanwhile is closed: no host to forward to. */
  int fd;
  ASSERT_OK(etch__ipc_connect(h.sock, &fd));
  etch__ipc_conn_init(&p, fd, 1u << 20);
  ASSERT_TRUE(ends(&p));
  etch__ipc_conn_close(&p);
  WAIT_UNTIL(file_has(h.log, "Connection refused") >= 1,
             "the relay did not log the refusal (see %s)", h.log);
  /* The host is back on the same port: RelayPort again, then producers. */
  host_listen(&h, name);
  ASSERT_EQ_STR(h.name, name);
  serve_port(&h, 0);
  WAIT_UNTIL(file_has(h.log, "clocks synced with the host") == 2,
             "the relay did not sync again (see %s)", h.log);
  producer(&h, &p, &hp);
  round_trip(&p, &hp);
  etch__ipc_conn_close(&p);
  etch__ipc_conn_close(&hp);
  relay_stop(&h);
}

TEST(relay_goes_on_while_the_host_does_not_answer) {
  /* A host whose listener takes nobody more (its queue is full): a
   * connect to it neither succeeds nor fails. The relay goes on accepting
   * producers, and closes each when its host connection has not come in
   * 5 s; it never waits for the host. */
  fake h;
  memset(&h, 0, sizeof h);
  h.port.fd = -1;
  snprintf(h.dir, sizeof h.dir, "%s", etch_test_tmpdir());
  snprintf(h.sock, sizeof h.sock, "%s/rp.sock", h.dir);
  snprintf(h.log, sizeof h.log, "%s/relay.log", h.dir);
  h.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  ASSERT_EQ_INT(bind(h.lfd, (struct sockaddr *)&a, sizeof a), 0);
  ASSERT_EQ_INT(listen(h.lfd, 0), 0);
  ASSERT_EQ_INT(getsockname(h.lfd, (struct sockaddr *)&a, &al), 0);
  snprintf(h.name, sizeof h.name, "127.0.0.1:%u", ntohs(a.sin_port));
  int fill[4];
  for (int i = 0; i < 4; i++) {
    fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int rc = connect(fill[i], (struct sockaddr *)&a, sizeof a);
    ASSERT_TRUE(rc == 0 || errno == EINPROGRESS);
  }
  h.relay = spawn_relay(&h);
  etch_ipc_conn p[3];
  for (int i = 0; i < 3; i++) {
    int fd = -1;
    for (int k = 0; k < WAIT_MS / 10 && fd < 0; k++)
      if (etch__ipc_connect(h.sock, &fd) != ETCH_OK) {
        fd = -1;
        sleep_ms(10);
      }
    if (fd < 0) FAIL("cannot connect to the relay's socket (see %s)", h.log);
    etch__ipc_conn_init(&p[i], fd, 1u << 20);
  }
  /* All three accepted while the first still waits for the host. */
  WAIT_UNTIL(file_has(h.log, "connected") == 3,
             "the relay did not take 3 producers (see %s)", h.log);
  for (int i = 0; i < 3; i++) {
    ASSERT_TRUE(ends(&p[i]));
    etch__ipc_conn_close(&p[i]);
  }
  ASSERT_EQ_INT(file_has(h.log, "no connection to the host"), 3);
  for (int i = 0; i < 4; i++) close(fill[i]);
  relay_stop(&h);
}

/* etchd --relay with `args` and environment `env` (NULL-terminated
 * "NAME=VALUE"s, nothing else): its exit status and log. */
static int relay_run(char *const args[], char *const env[], char *log,
                     size_t cap) {
  char path[600];
  snprintf(path, sizeof path, "%s/bad.log", etch_test_tmpdir());
  pid_t pid = fork();
  if (pid < 0) FAIL("fork: %s", strerror(errno));
  if (pid == 0) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execve(ETCHD_BIN, args, env);
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(log, 1, cap - 1, f) : 0;
  log[n] = 0;
  if (f) fclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

TEST(relay_refuses_what_it_cannot_use) {
  char log[2048], sock[600], envsock[700];
  snprintf(sock, sizeof sock, "%s/rp.sock", etch_test_tmpdir());
  snprintf(envsock, sizeof envsock, "PERFETTO_PRODUCER_SOCK_NAME=%s", sock);
  /* no host at all */
  char *a1[] = {(char *)ETCHD_BIN, "--relay", NULL};
  char *e1[] = {envsock, NULL};
  ASSERT_EQ_INT(relay_run(a1, e1, log, sizeof log), 2);
  ASSERT_TRUE(strstr(log, "--relay needs the host's HOST:PORT") != NULL);
  /* a host that is a Unix path */
  char *a2[] = {(char *)ETCHD_BIN, "--relay", "/tmp/host.sock", NULL};
  ASSERT_EQ_INT(relay_run(a2, e1, log, sizeof log), 1);
  ASSERT_TRUE(strstr(log, "is not HOST:PORT") != NULL);
  /* producers on a TCP port: the relay could not tell who they are */
  char *a3[] = {(char *)ETCHD_BIN, "--relay", "127.0.0.1:1",
                "--producer-socket", "127.0.0.1:0", NULL};
  ASSERT_EQ_INT(relay_run(a3, e1, log, sizeof log), 1);
  ASSERT_TRUE(strstr(log, "must be a Unix socket") != NULL);
  /* the clock hook's value is no number */
  char *a4[] = {(char *)ETCHD_BIN, "--relay", "127.0.0.1:1", NULL};
  char *e4[] = {envsock, "ETCH_RELAY_CLOCK_SKEW_NS=5s", NULL};
  ASSERT_EQ_INT(relay_run(a4, e4, log, sizeof log), 2);
  ASSERT_TRUE(strstr(log, "ETCH_RELAY_CLOCK_SKEW_NS is not a number") != NULL);
  /* --daemon is not for a relay */
  char *a5[] = {(char *)ETCHD_BIN, "--relay", "127.0.0.1:1", "--daemon",
                NULL};
  ASSERT_EQ_INT(relay_run(a5, e1, log, sizeof log), 2);
  ASSERT_TRUE(strstr(log, "runs in the foreground") != NULL);
}

/* etchd's flags come from one option table (the etch verbs' parser,
 * tools/common/cliopt.c): each number is checked against its range with
 * the flag and the value named, an unknown option or a stray operand is
 * a usage error (status 2), and --help lists every flag. */
TEST(etchd_flags_from_its_table) {
  static const struct {
    const char *flag, *value, *want;
  } bad[] = {
      {"--smb-kb", "15", "etchd: --smb-kb takes 16 to 65536, not '15'\n"},
      {"--max-buffer-mb", "0",
       "etchd: --max-buffer-mb takes 1 to 1099511627776, not '0'\n"},
      {"--max-conns-per-uid", "1000001",
       "etchd: --max-conns-per-uid takes 1 to 1000000, not '1000001'\n"},
      {"--bind-timeout-ms", "-5",
       "etchd: --bind-timeout-ms takes 1 to 86400000, not '-5'\n"},
      {"--frame-timeout-ms", "1s",
       "etchd: --frame-timeout-ms takes 1 to 86400000, not '1s'\n"},
      {"--max-partial-frames-mb", "4097",
       "etchd: --max-partial-frames-mb takes 1 to 4096, not '4097'\n"},
      {"--max-conns-per-addr", "",
       "etchd: --max-conns-per-addr takes 1 to 1000000, not ''\n"},
      {"--net-mb-per-s", "x",
       "etchd: --net-mb-per-s takes 1 to 1000000, not 'x'\n"},
      {"--enable-relay-endpoint-on", "a,b",
       "etchd: --enable-relay-endpoint-on: bad 'a,b'\n"},
  };
  char log[4096];
  char *env[] = {NULL};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *a[] = {(char *)ETCHD_BIN, (char *)bad[i].flag,
                 (char *)bad[i].value, NULL};
    ASSERT_EQ_INT(relay_run(a, env, log, sizeof log), 2);
    char want[512];
    snprintf(want, sizeof want,
             "%susage: etchd [options]\nRun 'etchd --help' for details.\n",
             bad[i].want);
    ASSERT_EQ_STR(log, want);
  }
  char *a1[] = {(char *)ETCHD_BIN, "--bogus", NULL};
  ASSERT_EQ_INT(relay_run(a1, env, log, sizeof log), 2);
  ASSERT_TRUE(!strncmp(log, "etchd: unknown option --bogus\n", 30));
  char *a2[] = {(char *)ETCHD_BIN, "stray", NULL};
  ASSERT_EQ_INT(relay_run(a2, env, log, sizeof log), 2);
  ASSERT_TRUE(!strncmp(log, "etchd: unexpected argument 'stray'\n", 35));
  char *a3[] = {(char *)ETCHD_BIN, "--relay", "127.0.0.1:1", "extra", NULL};
  ASSERT_EQ_INT(relay_run(a3, env, log, sizeof log), 2);
  ASSERT_TRUE(!strncmp(log, "etchd: unexpected argument 'extra'\n", 35));
  char *a4[] = {(char *)ETCHD_BIN, "--smb-kb", NULL};
  ASSERT_EQ_INT(relay_run(a4, env, log, sizeof log), 2);
  ASSERT_TRUE(!strncmp(log, "etchd: option --smb-kb needs a value\n", 37));
  char *h[] = {(char *)ETCHD_BIN, "--help", NULL};
  ASSERT_EQ_INT(relay_run(h, env, log, sizeof log), 0);
  ASSERT_TRUE(!strncmp(log, "usage: etchd [options]\n", 23));
  static const char *flags[] = {
      "--producer-socket NAME[,NAME...]", "--allow-remote",
      "--enable-relay-endpoint ", "--enable-relay-endpoint-on NAME",
      "--max-conns-per-addr N", "--net-mb-per-s N", "--consumer-socket PATH",
      "--group-rw", "--smb-kb N", "--max-buffer-mb N",
      "--max-conns-per-uid N", "--bind-timeout-ms N", "--frame-timeout-ms N",
      "--max-partial-frames-mb N", "--daemon", "--log FILE", "-v, --verbose",
      "--relay [HOST:PORT]", "--machine-name NAME", "--pid-file PATH"};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    if (!strstr(log, flags[i])) FAIL("--help does not list %s", flags[i]);
}

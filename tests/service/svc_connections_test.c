/*
 * svc_connections_test.c - etchd end to end: bounds on what connections
 * hold: descriptors, per-uid connections, connections that never bind or
 * finish a frame, frames received in part.
 */
#define _GNU_SOURCE
#include "svc_test.h"

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

/* A uid whose connections all went is forgotten, and counted afresh from
 * its next connection: the limit holds as it did the first time, however
 * often the uid comes and goes. */
TEST(the_per_uid_limit_holds_after_the_uid_left) {
  svc s;
  const char *const extra[] = {"--max-conns-per-uid", "2", NULL};
  svc_start_argv(&s, 0, extra);
  int gone = 1; /* svc_start_argv's probe */
  for (int round = 0; round < 3; round++) {
    raw held[2];
    for (int i = 0; i < 2; i++) raw_open(&held[i], s.prod, "ProducerPort");
    int over = raw_connect(s.prod);
    send_bind(over, "ProducerPort");
    ASSERT_TRUE(closed_by_service(over));
    close(over);
    for (int i = 0; i < 2; i++) raw_close(&held[i]);
    gone += 2;
    wait_log(&s, "gone: peer closed the connection", gone);
  }
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

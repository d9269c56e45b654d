/*
 * svc_lifecycle_test.c - etchd end to end: etchd as a daemon, under a
 * supervisor (SIGTERM, log file, readiness notification), and a squatted
 * socket directory.
 */
#define _GNU_SOURCE
#include "svc_test.h"

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

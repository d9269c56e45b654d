/*
 * svc_files_test.c - etchd end to end: the consumer's file: written by the
 * service, a pipe nobody reads, a full disk, a descriptor that fails.
 */
#define _GNU_SOURCE
#include "svc_test.h"

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

/*
 * svc_producers_test.c - etchd end to end: producer processes of libetch in
 * system mode recorded by `etch record --system`: many at once, killed,
 * forked, reconnecting, two copies of libetch in one process, every page
 * size, in-process and system at once.
 */
#define _GNU_SOURCE
#include "svc_test.h"

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

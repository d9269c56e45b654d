/*
 * flight_system_test.c - a producer (libetch, ETCH_BACKEND=system, with
 * ETCH_FLIGHT) killed with SIGKILL mid-run while etchd records it: its
 * flight file has every event it published but the one being written (the
 * bound of flight_test.c, in system mode too), and etchd's trace holds
 * only events it published, each once.
 *
 * and etchd's trace has the same: a libetch writer writes its chunks in
 * place in the shared memory, publishing after every packet what it
 * committed in a header of its own there, so etchd, salvaging the dead
 * producer, takes complete chunks whose commit never came and the
 * published part of those being written: every thread's ticks 0..K-1 with
 * K at least the count it had published minus the one being written. The
 * writers wait for room rather than drop (ETCH_SYSTEM_STALL_MS), so that
 * nothing is missing for another reason.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sdk/tdecode.h"
#include "test.h"

static void sleep_ms(long ms) {
  struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&d, NULL);
}

static pid_t spawn(char *const argv[], const char *log) {
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    if (log) {
      int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
    }
    execv(argv[0], argv);
    _exit(127);
  }
  return pid;
}

static int lines_with(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  char line[1024];
  int n = 0;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, needle)) n++;
  if (f) fclose(f);
  return n;
}

/* Waits (60 s at most) for a line of `path` with `needle`. */
static void wait_line(const char *path, const char *needle) {
  for (int i = 0; i < 6000; i++) {
    if (lines_with(path, needle)) return;
    sleep_ms(10);
  }
  FAIL("no line with \"%s\" in %s in 60 s", needle, path);
}

/* Waits (60 s at most) until etchd accepts connections on `path`: a
 * socket file alone may be an old one. */
static void wait_listening(const char *path) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  size_t n = strlen(path);
  ASSERT_TRUE(n < sizeof a.sun_path);
  memcpy(a.sun_path, path, n + 1);
  for (int i = 0; i < 6000; i++) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_TRUE(fd >= 0);
    int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    close(fd);
    if (rc == 0) return;
    sleep_ms(10);
  }
  FAIL("etchd does not listen on %s after 60 s", path);
}

enum { THREADS = 3, CAP = 100000 };

TEST(flight_system_producer_killed_keeps_what_it_published) {
  for (int run = 0; run < 4; run++) {
    const char *dir = etch_test_tmpdir();
    char prod[600], cons[600], log[600], rlog[600], out[600], counts[600];
    snprintf(prod, sizeof prod, "%s/p%d.sock", dir, run);
    snprintf(cons, sizeof cons, "%s/c%d.sock", dir, run);
    snprintf(log, sizeof log, "%s/etchd%d.log", dir, run);
    snprintf(rlog, sizeof rlog, "%s/record%d.log", dir, run);
    snprintf(out, sizeof out, "%s/sys%d.pftrace", dir, run);
    snprintf(counts, sizeof counts, "%s/counts%d", dir, run);
    setenv("PERFETTO_PRODUCER_SOCK_NAME", prod, 1);
    setenv("PERFETTO_CONSUMER_SOCK_NAME", cons, 1);
    pid_t etchd = spawn((char *const[]){(char *)ETCHD_BIN, "-v", NULL}, log);
    wait_listening(cons);
    pid_t rec = spawn((char *const[]){(char *)ETCH_BIN, "record", "--system",
                                      "--buffer", "64MB", "-q", "-o", out,
                                      NULL},
                      rlog);
    wait_line(log, "session 1,");

    int fd = open(counts, O_RDWR | O_CREAT | O_TRUNC, 0600);
    ASSERT_TRUE(fd >= 0 && ftruncate(fd, 4096) == 0);
    volatile uint64_t *c = (volatile uint64_t *)mmap(
        NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ASSERT_TRUE(c != MAP_FAILED);
    close(fd);
    pid_t v = fork();
    ASSERT_TRUE(v >= 0);
    if (v == 0) {
      setenv("ETCH_BACKEND", "system", 1);
      setenv("ETCH_SYSTEM_WAIT_MS", "10000", 1);
      setenv("ETCH_SYSTEM_STALL_MS", "10000", 1);
      setenv("VICTIM_WAIT", "1", 1);
      char vout[700];
      snprintf(vout, sizeof vout, "%s/inproc%d.pftrace", dir, run);
      setenv("ETCH_OUT", vout, 1);
      char vflight[700];
      snprintf(vflight, sizeof vflight, "%s/v%d.flight", dir, run);
      setenv("ETCH_FLIGHT", vflight, 1);
      setenv("ETCH_BUFFER_KB", "65536", 1);
      char cap[16];
      snprintf(cap, sizeof cap, "%d", CAP);
      execl(ETCH_FLIGHT_VICTIM, ETCH_FLIGHT_VICTIM, counts, "3", "run", "0",
            cap, (char *)NULL);
      _exit(127);
    }
    /* Killed once the threads recorded between 1 000 and 250 000 events. */
    uint64_t target = 1000 + (uint64_t)run * 80000;
    for (int i = 0;; i++) {
      uint64_t sum = 0, least = UINT64_MAX;
      for (int t = 0; t < THREADS; t++) {
        uint64_t n = c[t];
        sum += n;
        if (n < least) least = n;
      }
      if (least > 0 && sum >= target) break;
      if (i > 60000) FAIL("the producer recorded %llu events in 60 s",
                          (unsigned long long)sum);
      sleep_ms(1);
    }
    kill(v, SIGKILL);
    int st;
    ASSERT_EQ_INT((int)waitpid(v, &st, 0), (int)v);
    uint64_t published[THREADS];
    for (int t = 0; t < THREADS; t++) published[t] = c[t];
    munmap((void *)c, 4096);
    /* etchd took what the dead producer left before it says so. */
    wait_line(log, ") gone:");
    kill(rec, SIGINT);
    ASSERT_EQ_INT((int)waitpid(rec, &st, 0), (int)rec);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      FAIL("etch record --system ended with %d (see %s)", st, rlog);
    kill(etchd, SIGTERM);
    ASSERT_EQ_INT((int)waitpid(etchd, &st, 0), (int)etchd);

    /* etchd's trace: each thread's ticks 0..K-1, in order, once, with K
     * the count it had published, give or take the one being written. */
    td_trace tr;
    ASSERT_EQ_INT(td_decode_file(out, &tr), 0);
    int64_t next[THREADS];
    for (int t = 0; t < THREADS; t++) next[t] = 0;
    for (size_t i = 0; i < tr.nev; i++) {
      const td_event *e = &tr.ev[i];
      if (e->type != 3 || !e->name || strcmp(e->name, "tick")) continue;
      const td_arg *k = td_arg_of(e, "k"), *t = td_arg_of(e, "t");
      ASSERT_TRUE(k && t && t->i >= 0 && t->i < THREADS);
      if (k->i != next[t->i])
        FAIL("run %d, thread %d: tick %lld where %lld was due in etchd's "
             "trace",
             run, (int)t->i, (long long)k->i, (long long)next[t->i]);
      next[t->i]++;
    }
    for (int t = 0; t < THREADS; t++) {
      uint64_t p = published[t], k = (uint64_t)next[t];
      if (k + 1 < p || k > p + 1)
        FAIL("run %d, thread %d: ticks 0..%lld in etchd's trace, %llu "
             "published",
             run, t, (long long)k - 1, (unsigned long long)p);
    }
    ASSERT_EQ_U64(tr.unresolved, 0);
    /* No slice runs on because its end was lost: on each thread, the
     * "batch" slices whose end the trace has, and at most the one the
     * producer was in when it died left open. */
    uint64_t tracks[8] = {0};
    int64_t begins[8] = {0}, ends[8] = {0};
    int ntracks = 0;
    for (size_t i = 0; i < tr.nev; i++) {
      const td_event *e = &tr.ev[i];
      if (e->type != 1 && e->type != 2) continue;
      int k = 0;
      while (k < ntracks && tracks[k] != e->track) k++;
      if (k == ntracks) {
        ASSERT_TRUE(ntracks < 8);
        tracks[ntracks++] = e->track;
      }
      if (e->type == 1) begins[k]++;
      else ends[k]++;
    }
    ASSERT_EQ_INT(ntracks, THREADS);
    int open_slices = 0;
    for (int k = 0; k < ntracks; k++) {
      if (ends[k] > begins[k] || begins[k] > ends[k] + 1)
        FAIL("run %d: %lld batch begins and %lld ends on one thread", run,
             (long long)begins[k], (long long)ends[k]);
      open_slices += (int)(begins[k] - ends[k]);
    }
    td_free(&tr);
    /* The same in the query part's slice table: those open, no more. */
    char qout[700], want[64];
    snprintf(qout, sizeof qout, "%s/query%d.csv", dir, run);
    pid_t q = spawn((char *const[]){(char *)ETCH_BIN, "query", "--csv",
                                    "--no-cache", out,
                                    "select count(*) as open from slice "
                                    "where dur < 0",
                                    NULL},
                    qout);
    ASSERT_EQ_INT((int)waitpid(q, &st, 0), (int)q);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    snprintf(want, sizeof want, "open\n%d\n", open_slices);
    ASSERT_EQ_INT(lines_with(qout, "open"), 1);
    FILE *qf = fopen(qout, "r");
    char got[64] = {0};
    ASSERT_TRUE(qf && fread(got, 1, sizeof got - 1, qf) > 0);
    fclose(qf);
    ASSERT_EQ_STR(got, want);

    /* The flight file: the whole bound. */
    char vflight[700], rout[700];
    snprintf(vflight, sizeof vflight, "%s/v%d.flight", dir, run);
    snprintf(rout, sizeof rout, "%s/rec%d.pftrace", dir, run);
    pid_t r = spawn((char *const[]){(char *)ETCH_BIN, "recover", "-q",
                                    vflight, "-o", rout, NULL},
                    rlog);
    ASSERT_EQ_INT((int)waitpid(r, &st, 0), (int)r);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ASSERT_EQ_INT(td_decode_file(rout, &tr), 0);
    for (int t = 0; t < THREADS; t++) next[t] = 0;
    for (size_t i = 0; i < tr.nev; i++) {
      const td_event *e = &tr.ev[i];
      if (e->type != 3 || !e->name || strcmp(e->name, "tick")) continue;
      const td_arg *k = td_arg_of(e, "k"), *t = td_arg_of(e, "t");
      ASSERT_TRUE(k && t && t->i >= 0 && t->i < THREADS);
      ASSERT_EQ_INT((int)k->i, (int)next[t->i]);
      next[t->i]++;
    }
    for (int t = 0; t < THREADS; t++) {
      uint64_t p = published[t], k = (uint64_t)next[t];
      if (k + 1 < p || k > p + 1)
        FAIL("run %d, thread %d: ticks 0..%lld in its flight file, %llu "
             "published",
             run, t, (long long)k - 1, (unsigned long long)p);
    }
    td_free(&tr);
  }
}

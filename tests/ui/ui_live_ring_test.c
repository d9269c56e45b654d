/*
 * ui_live_ring_test.c - a live import (the one etch ui follows a
 * recording with) of a session etchd writes into its file as it goes
 * (write_into_file) from a small ring that wraps: packets are lost between
 * the service's writes, sequences go on after gaps. The file is taken at
 * each write etchd made while the producer recorded (its size each time
 * it grew), then played back write by write under the writer's lock: a
 * live import stepped after each write holds exactly the tables a cold
 * import of the same bytes makes.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "query/query.h"
#include "query/run.h"
#include "test.h"

extern char **environ;

static void sleep_ms(long ms) {
  struct timespec d = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&d, NULL);
}

static pid_t spawn_logged(char *const argv[], const char *log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) != 0)
    FAIL("cannot run %s", argv[0]);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

static bool can_connect(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

static int wait_exit(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0) {
  }
  return st;
}

/* What is compared: every table's row count, and the slices whole. */
static const char kCounts[] =
    "SELECT (SELECT count(*) FROM slice), (SELECT count(*) FROM counter),"
    " (SELECT count(*) FROM track), (SELECT count(*) FROM thread),"
    " (SELECT count(*) FROM process), (SELECT count(*) FROM args),"
    " (SELECT count(*) FROM flow),"
    " (SELECT coalesce(sum(hash(id, ts, dur, track_id, name, depth)), 0)"
    "  FROM slice),"
    " (SELECT coalesce(sum(value), 0) FROM stats"
    "  WHERE name = 'traced_buf_chunks_overwritten')";
enum { NCOUNTS = 9 };

static const etch__import_opts kOpts = {
    .all_args = true, .allow_truncated = true, .quiet = true};

static void cold_counts(const uint8_t *data, size_t len, int64_t *v) {
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  ASSERT_OK(etch__query_import_memory(db, data, len, NULL, &kOpts, NULL));
  ASSERT_OK(etch__query_ints(db, kCounts, NULL, 0, v, NCOUNTS));
  etch__db_close(db);
}

static void write_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t k = write(fd, p, n);
    ASSERT_TRUE(k > 0);
    p += k;
    n -= (size_t)k;
  }
}

enum { kWrites = 8, kMaxCuts = 4096 };

TEST(ui_live_import_of_a_wrapping_ring_equals_a_cold_import_at_each_write) {
  const char *tmp = etch_test_tmpdir();
  char prod[600], cons[600], log[600], cfg[600], out[600], play[600];
  snprintf(prod, sizeof prod, "%s/p.sock", tmp);
  snprintf(cons, sizeof cons, "%s/c.sock", tmp);
  snprintf(log, sizeof log, "%s/ring.log", tmp);
  snprintf(cfg, sizeof cfg, "%s/ring.pbtx", tmp);
  snprintf(out, sizeof out, "%s/ring.pftrace", tmp);
  snprintf(play, sizeof play, "%s/ring_play.pftrace", tmp);
  setenv("PERFETTO_PRODUCER_SOCK_NAME", prod, 1);
  setenv("PERFETTO_CONSUMER_SOCK_NAME", cons, 1);
  setenv("ETCH_SYSTEM_WAIT_MS", "20000", 1);
  char *dargv[] = {(char *)ETCHD_BIN, "-v", NULL};
  pid_t etchd = spawn_logged(dargv, log);
  for (int i = 0; i < 3000 && !can_connect(cons); i++) sleep_ms(10);
  if (!can_connect(cons)) FAIL("etchd did not start (see %s)", log);
  /* A 16 KB ring drained every 50 ms: the producer's threads, recording
   * as fast as they can, overwrite chunks etchd has not written yet. */
  FILE *f = fopen(cfg, "w");
  ASSERT_TRUE(f != NULL);
  fputs("buffers { size_kb: 16 fill_policy: RING_BUFFER }\n"
        "data_sources { config { name: \"track_event\" } }\n"
        "write_into_file: true\nfile_write_period_ms: 50\n",
        f);
  fclose(f);
  char *rargv[] = {(char *)ETCH_BIN, "record", "--config", cfg, "-o", out,
                   "-q", NULL};
  pid_t rec = spawn_logged(rargv, log);
  /* Records until killed. */
  char *pargv[] = {(char *)SVC_PRODUCER, "ring", "2", "0", NULL};
  pid_t p = spawn_logged(pargv, log);

  /* The file's size at each write etchd makes, until kWrites of them. */
  static int64_t cuts[kMaxCuts];
  size_t ncuts = 0;
  int64_t last = 0;
  for (int i = 0; i < 60000 && ncuts < kWrites; i++) {
    struct stat sb;
    if (stat(out, &sb) == 0 && (int64_t)sb.st_size > last) {
      last = (int64_t)sb.st_size;
      cuts[ncuts++] = last;
    } else {
      sleep_ms(1);
    }
  }
  if (ncuts < kWrites) FAIL("etchd wrote %zu times (see %s)", ncuts, log);
  kill(p, SIGKILL);
  wait_exit(p);
  kill(rec, SIGINT);
  int st = wait_exit(rec);
  ASSERT_TRUE(WIFEXITED(st));
  kill(etchd, SIGTERM);
  wait_exit(etchd);
  unsetenv("PERFETTO_PRODUCER_SOCK_NAME");
  unsetenv("PERFETTO_CONSUMER_SOCK_NAME");

  size_t len;
  uint8_t *data = (uint8_t *)etch_test_read_file(out, &len);
  ASSERT_TRUE(data != NULL && len > 0);
  if ((size_t)cuts[ncuts - 1] < len) cuts[ncuts++] = (int64_t)len;
  int64_t whole[NCOUNTS];
  cold_counts(data, len, whole);
  /* The ring wrapped: chunks were overwritten before etchd wrote them. */
  if (whole[8] <= 0)
    FAIL("the ring never wrapped (%lld slices)", (long long)whole[0]);
  ASSERT_TRUE(whole[0] > 0);

  /* Played back write by write, under the writer's lock. */
  int fd = open(play, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(fd >= 0);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  ASSERT_EQ_INT(fcntl(fd, F_OFD_SETLK, &fl), 0);
  write_all(fd, data, (size_t)cuts[0]);
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  etch__import_live *live;
  ASSERT_OK(etch__import_live_open(&live, db, play, &kOpts));
  size_t at = (size_t)cuts[0];
  for (size_t k = 0; k < ncuts; k++) {
    if (k) {
      write_all(fd, data + at, (size_t)cuts[k] - at);
      at = (size_t)cuts[k];
      ASSERT_OK(etch__import_live_step(live, NULL));
    }
    int64_t got[NCOUNTS], want[NCOUNTS];
    ASSERT_OK(etch__query_ints(db, kCounts, NULL, 0, got, NCOUNTS));
    cold_counts(data, at, want);
    for (int c = 0; c < NCOUNTS; c++)
      if (got[c] != want[c])
        FAIL("write %zu (%zu bytes): count %d is %lld, a cold import's %lld",
             k, at, c, (long long)got[c], (long long)want[c]);
  }
  printf("  %zu writes, %lld slices, %lld chunks overwritten, %llu "
         "restarts\n",
         ncuts, (long long)whole[0], (long long)whole[8],
         (unsigned long long)etch__import_live_restarts(live));
  ASSERT_TRUE(etch__import_live_recording(live));
  etch__import_live_close(live);
  etch__db_close(db);
  close(fd);
  free(data);
  unlink(play);
  unlink(out);
}

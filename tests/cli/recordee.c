/*
 * recordee.c - a program for `etch record` tests: one "work" slice holding
 * N "step" slices (N from argv[1]), all in category "test". argv[2], if
 * given, says how the run ends:
 *
 *   chdir DIR     chdir(DIR) after etch_init, then return
 *   sleep MS      sleep MS milliseconds after the slices, then return
 *   wait FILE     write the pid into FILE after the slices (flushed:
 *                 etch_flush), then wait for a signal
 *   stopped       after the slices, wait until the session has stopped
 *                 (category "test" off: ETCH_DURATION_MS's timer fired),
 *                 then return at once
 *   handshake READY GO  create READY after the slices, wait until GO
 *                 exists, then return
 *   abort         abort() after the slices
 *   _exit         _exit(0) after the slices
 *   echo TEXT     write TEXT and a newline on stdout after the slices
 *   spew          write lines on stdout until a write fails (a pipe whose
 *                 reader is gone), write on 1000 times as a careless
 *                 program does, then wait for a signal
 *   usr1          raise SIGUSR1 (which libetch does not catch)
 *   fork          fork a child that records a "child" slice without
 *                 etch_init and exit()s; wait for it, then return
 *   fork_init     fork a child that calls etch_init, records a "work"
 *                 slice of 5 steps and exit()s; wait for it, then return
 *   frames        first 100 frames 10 s in the past, frame k lasting k ms
 *                 back to back, then bookmarks "Inventory.Open", "Level 3"
 *                 and "Inventory.Close"
 *   important K [FILL [_exit]]  before the slices, log the important
 *                 event Rec.Setting {value: 42} once (category "test"),
 *                 then start K threads that each record an
 *                 instant "tick" and end; then FILL instants "filler" (a
 *                 ring that wraps); with _exit, _exit(0) after the slices
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <etch/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

ETCH_CATEGORY_DEFINE(test, "test", "etch record tests", "");

#define SETTING_FIELDS(F) F(int64, value)
ETCH_EVENT_DECLARE(Rec, Setting, SETTING_FIELDS);
ETCH_EVENT_DEFINE(Rec, Setting, SETTING_FIELDS, ETCH_EVENT_IMPORTANT);

static void *tick(void *arg) {
  (void)arg;
  ETCH_INSTANT(test, "tick");
  return NULL;
}

/* The important event once, then `k` threads, then `fill` instants. */
static int important(int k, long fill) {
  ETCH_LOG(Rec, Setting, test, ETCH_SET(value, 42));
  pthread_t th[64];
  if (k > 64) k = 64;
  for (int i = 0; i < k; i++)
    if (pthread_create(&th[i], NULL, tick, NULL) != 0) return 8;
  for (int i = 0; i < k; i++) pthread_join(th[i], NULL);
  for (long i = 0; i < fill; i++) ETCH_INSTANT(test, "filler");
  return 0;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1;
  const char *mode = argc > 2 ? argv[2] : "";
  const char *arg = argc > 3 ? argv[3] : "";
  const char *arg2 = argc > 4 ? argv[4] : "";
  etch_init();
  if (!strcmp(mode, "chdir") && chdir(arg) != 0) return 3;
  if (!strcmp(mode, "important") && important(atoi(arg), atol(arg2)) != 0)
    return 8;
  if (!strcmp(mode, "frames")) {
    uint64_t t = etch_now() - 10000000000ull;
    for (uint64_t k = 1; k <= 100; k++) {
      etch_frame_mark_at(t);
      t += k * 1000000ull;
    }
    etch_frame_end_at(t);
    ETCH_BOOKMARK("Inventory.Open");
    ETCH_BOOKMARKF("Level %d", 3);
    ETCH_BOOKMARK("Inventory.Close");
  }
  ETCH_SLICE_BEGIN(test, "work");
  for (int i = 0; i < n; i++) {
    ETCH_SCOPE(test, "step", ETCH_ARG_INT("i", i));
  }
  ETCH_SLICE_END(test);
  if (!strcmp(mode, "sleep")) {
    struct timespec ts = {atoi(arg) / 1000, (atoi(arg) % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  } else if (!strcmp(mode, "stopped")) {
    struct timespec ts = {0, 100000};
    while (etch_category_enabled(&ETCH_CAT(test))) nanosleep(&ts, NULL);
  } else if (!strcmp(mode, "handshake")) {
    int fd = open(arg, O_WRONLY | O_CREAT, 0644);
    if (fd < 0) return 4;
    close(fd);
    struct timespec ts = {0, 1000000};
    while (access(arg2, F_OK) != 0) nanosleep(&ts, NULL);
  } else if (!strcmp(mode, "wait")) {
    /* The slices in the file first, when it is written while recording
     * (ETCH_WRITE_PERIOD_MS). */
    if (etch_flush() != 0) return 4;
    /* Written whole under another name, then renamed: whoever sees FILE
     * reads the whole pid. */
    char tmp[4096], pid[32];
    snprintf(tmp, sizeof tmp, "%s.tmp", arg);
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      if (write(fd, pid, (size_t)len) != len) return 4;
      close(fd);
      if (rename(tmp, arg) != 0) return 4;
    }
    for (;;) pause();
  } else if (!strcmp(mode, "abort")) {
    abort();
  } else if (!strcmp(mode, "_exit") ||
             (!strcmp(mode, "important") && argc > 5 &&
              !strcmp(argv[5], "_exit"))) {
    _exit(0);
  } else if (!strcmp(mode, "echo")) {
    puts(arg);
  } else if (!strcmp(mode, "spew")) {
    static const char line[] = "line\n";
    while (write(1, line, sizeof line - 1) > 0) {
    }
    for (int i = 0; i < 1000; i++)
      if (write(1, line, sizeof line - 1) < 0) continue;
    for (;;) pause();
  } else if (!strcmp(mode, "usr1")) {
    raise(SIGUSR1);
  } else if (!strcmp(mode, "fork") || !strcmp(mode, "fork_init")) {
    pid_t c = fork();
    if (c < 0) return 5;
    if (c == 0) {
      if (!strcmp(mode, "fork_init")) {
        if (etch_init() != 0) _exit(6);
        ETCH_SLICE_BEGIN(test, "work");
        for (int i = 0; i < 5; i++) {
          ETCH_SCOPE(test, "step", ETCH_ARG_INT("i", i));
        }
        ETCH_SLICE_END(test);
      } else {
        ETCH_SCOPE(test, "child");
      }
      exit(0);
    }
    int st;
    if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
      return 7;
  }
  return 0;
}

/*
 * svc_producer.c - a producer for the service tests: THREADS threads each
 * record EVENTS instants "tick" (category "svc") with arg i = 0, 1, ...
 * into the tracing service (system mode), then the process exits normally.
 * With EVENTS = 0 the threads record until the process is killed.
 *
 *   svc_producer NAME THREADS EVENTS [fork | late]
 *
 * With ETCH_OUT in the environment it also records in process (etch_init),
 * both backends at once. Before anything it logs the important custom event
 * Svc.Start {pid} (category "svc").
 *
 * With "fork" the process forks after starting: the child (a producer of
 * its own, its own pid) waits for its session (category "svc" on, 60 s at
 * most: exit status 8), records the same, and exits; the parent records
 * and waits for it.
 *
 * With "late" the threads start once two sessions record category "svc"
 * (the two data source instances of the test's config).
 *
 * With "big" the process also records, after its threads, one instant "big"
 * with three string args "s0", "s1", "s2" of BIG_LEN bytes each ('a' +
 * (i + k) % 26 at byte i of sk): a packet across many chunks, larger than
 * a reply of the service's can carry.
 *
 * With "pause" it stops itself (SIGSTOP) once its session is there, so
 * that the test can stop the service first; then its threads record, and
 * thread 0, done with its ticks, waits 0.8 s and records one instant
 * "after" (the others end at once).
 *
 * With "xfull" it stops itself (SIGSTOP) once its session is there, so
 * that the test can stop the service first; then its threads record,
 * the main thread records the same as "worker-THREADS", and it stops
 * itself again just before it exits.
 *
 * With "nest" each thread records, instead of ticks, EVENTS slices
 * "outer" (arg i) each holding a slice "inner" holding a tick; the process
 * stops itself (SIGSTOP) once its session is there and again half way
 * through (after thread 0's EVENTS/2-th outer: the test lets the service
 * go on meanwhile).
 *
 * With "outer" the threads record as with "nest", without stopping.
 *
 * With "important" it logs Svc.Start once its session is there (category
 * "svc" on, 60 s at most: exit status 8) instead of before anything, then
 * starts its threads (each new sequence's start may replay it).
 *
 * With "smb" it records, after its threads, one instant "smb" with an arg
 * "kb": the size of the service's shared memory as mapped in this process.
 *
 * With SVC_TICKS_FILE=PATH in the environment and EVENTS = 0, thread 0
 * creates PATH once it has recorded 1000 ticks while category "svc" was
 * enabled (the test's event that the producer records into its session).
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

ETCH_CATEGORY_DEFINE(svc, "svc", "service tests", "");

/* Logged once at start, before any session: important, so every session
 * gets it (replayed when the service starts the data source). */
#define START_FIELDS(F) F(int32, pid)
ETCH_EVENT_DECLARE(Svc, Start, START_FIELDS);
ETCH_EVENT_DEFINE(Svc, Start, START_FIELDS, ETCH_EVENT_IMPORTANT);

static long events;
static bool pause_after; /* mode "pause" */
static bool nest;        /* mode "nest" or "outer" */
static bool nest_stop;   /* mode "nest" */

#define BIG_LEN 60000

static void *work(void *arg) {
  char name[32];
  snprintf(name, sizeof name, "worker-%ld", (long)(intptr_t)arg);
  etch_thread_set_name(name);
  /* The system's name too: a test finds the thread in /proc by it. */
  pthread_setname_np(pthread_self(), name);
  if (nest) {
    for (long i = 0; i < events; i++) {
      if (nest_stop && arg == 0 && i == events / 2) raise(SIGSTOP);
      ETCH_SCOPE(svc, "outer", ETCH_ARG_INT("i", i));
      ETCH_SCOPE(svc, "inner");
      ETCH_INSTANT(svc, "tick", ETCH_ARG_INT("i", i));
    }
    return NULL;
  }
  const char *ticks_file = arg == 0 ? getenv("SVC_TICKS_FILE") : NULL;
  long enabled_ticks = 0;
  for (long i = 0; events == 0 || i < events; i++) {
    bool on = etch_category_enabled(&etch_cat_svc);
    ETCH_INSTANT(svc, "tick", ETCH_ARG_INT("i", i));
    if (ticks_file && on && ++enabled_ticks == 1000) {
      FILE *f = fopen(ticks_file, "w");
      if (f) fclose(f);
    }
    if (events == 0 && i % 64 == 0) {
      struct timespec d = {0, 100000};
      nanosleep(&d, NULL);
    }
  }
  if (pause_after && arg == 0) {
    struct timespec d = {0, 800000000};
    nanosleep(&d, NULL);
    ETCH_INSTANT(svc, "after");
  }
  return NULL;
}

/* Waits until `n` sessions record category "svc" (the service's data
 * source instances started here): false after 60 s. */
static bool wait_sessions(int n) {
  for (int i = 0; i < 600000; i++) {
    if (__builtin_popcount(__atomic_load_n(&etch_cat_svc.enabled,
                                           __ATOMIC_ACQUIRE)) >= n)
      return true;
    struct timespec d = {0, 100000};
    nanosleep(&d, NULL);
  }
  return false;
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  int threads = atoi(argv[2]);
  events = atol(argv[3]);
  bool imp_late = argc > 4 && argv[4][0] == 'i';
  if (!imp_late) ETCH_LOG(Svc, Start, svc, ETCH_SET(pid, (int32_t)getpid()));
  etch_init(); /* with ETCH_OUT: an in-process session beside the service's */
  if (etch_system_start(argv[1]) != ETCH_OK) return 3;
  pid_t child = -1;
  if (argc > 4 && argv[4][0] == 'f') {
    child = fork();
    if (child < 0) return 4;
    if (child == 0 && !wait_sessions(1)) return 8;
  }
  pause_after = argc > 4 && argv[4][0] == 'p';
  if (argc > 4 && argv[4][0] == 'l' && !wait_sessions(2)) return 8;
  if (imp_late) {
    if (!wait_sessions(1)) return 8;
    ETCH_LOG(Svc, Start, svc, ETCH_SET(pid, (int32_t)getpid()));
  }
  bool exit_full = argc > 4 && argv[4][0] == 'x';
  nest_stop = argc > 4 && argv[4][0] == 'n';
  nest = nest_stop || (argc > 4 && argv[4][0] == 'o');
  if (exit_full || nest_stop || pause_after) raise(SIGSTOP);
  pthread_t th[16];
  for (int i = 0; i < threads && i < 16; i++)
    pthread_create(&th[i], NULL, work, (void *)(intptr_t)i);
  for (int i = 0; i < threads && i < 16; i++) pthread_join(th[i], NULL);
  if (exit_full) {
    work((void *)(intptr_t)threads);
    raise(SIGSTOP);
  }
  if (argc > 4 && argv[4][0] == 'b') {
    char *big[3];
    for (int k = 0; k < 3; k++) {
      big[k] = malloc(BIG_LEN + 1);
      if (!big[k]) return 6;
      for (int i = 0; i < BIG_LEN; i++) big[k][i] = (char)('a' + (i + k) % 26);
      big[k][BIG_LEN] = '\0';
    }
    ETCH_INSTANT(svc, "big", ETCH_ARG_STRING("s0", big[0]),
                 ETCH_ARG_STRING("s1", big[1]), ETCH_ARG_STRING("s2", big[2]));
    for (int k = 0; k < 3; k++) free(big[k]);
  }
  if (argc > 4 && argv[4][0] == 's') {
    /* "start-end perms offset dev inode /memfd:etch-smb (deleted)" */
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    long kb = -1;
    while (f && fgets(line, sizeof line, f)) {
      unsigned long lo, hi;
      if (strstr(line, "etch-smb") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
        kb = (long)((hi - lo) / 1024);
    }
    if (f) fclose(f);
    ETCH_INSTANT(svc, "smb", ETCH_ARG_INT("kb", kb));
  }
  if (child > 0) {
    int st;
    if (waitpid(child, &st, 0) != child || !WIFEXITED(st) ||
        WEXITSTATUS(st) != 0)
      return 5;
  }
  return 0;
}

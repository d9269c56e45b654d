/*
 * victim.c - a program for the flight recorder's tests: THREADS threads
 * each record "tick" instants (arg k = 0, 1, 2, ..., arg t = the thread's
 * index) with every 50th inside a "batch" slice, and after each macro
 * returns write how many they recorded into slot t of COUNTS (a file the
 * test maps too). It runs until something ends it:
 *
 *   victim COUNTS THREADS run 0 [CAP]     until killed
 *   victim COUNTS THREADS segv K [CAP]    thread THREADS-1 raises SIGSEGV
 *                                         once it recorded K
 *   victim COUNTS THREADS abort K [CAP]   the main thread abort()s once
 *                                         thread 0 recorded K
 *   victim COUNTS THREADS count K         each thread records K, then the
 *                                         program ends normally
 *
 * With CAP, a thread that recorded CAP events waits (for the end) instead
 * of recording more, so that a test's ring does not wrap however late the
 * test acts.
 *
 * ETCH_OUT and ETCH_FLIGHT come from the test. With VICTIM_WAIT set the
 * threads begin once category "flight" is recorded (a service's session
 * reached the process), so that tick 0 is in the trace.
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

ETCH_CATEGORY_DEFINE(flight, "flight", "flight recorder tests", "");

static uint64_t *counts;
static int nthreads;
static const char *mode = "run";
static uint64_t limit, cap;

static void *thread_main(void *arg) {
  int t = (int)(intptr_t)arg;
  char name[16];
  snprintf(name, sizeof name, "victim-%d", t);
  etch_thread_set_name(name);
  bool segv = !strcmp(mode, "segv") && t == nthreads - 1;
  bool count = !strcmp(mode, "count");
  if (getenv("VICTIM_WAIT"))
    while (!etch_category_enabled(&ETCH_CAT(flight))) sched_yield();
  for (uint64_t k = 0; !count || k < limit; k++) {
    while (cap && k >= cap) pause();
    if (k % 50 == 0) ETCH_SLICE_BEGIN(flight, "batch");
    ETCH_INSTANT(flight, "tick", ETCH_ARG_INT("k", k), ETCH_ARG_INT("t", t));
    if (k % 50 == 49 || (count && k + 1 == limit)) ETCH_SLICE_END(flight);
    __atomic_store_n(&counts[t], k + 1, __ATOMIC_RELEASE);
    /* A segmentation fault of this thread (raised: a real bad store is
     * undefined behaviour, which the sanitizers' builds stop at). */
    if (segv && k + 1 >= limit) pthread_kill(pthread_self(), SIGSEGV);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  nthreads = atoi(argv[2]);
  mode = argv[3];
  limit = argc > 4 ? strtoull(argv[4], NULL, 10) : 0;
  cap = argc > 5 ? strtoull(argv[5], NULL, 10) : 0;
  int fd = open(argv[1], O_RDWR);
  if (fd < 0) return 3;
  counts = (uint64_t *)mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED,
                            fd, 0);
  if (counts == MAP_FAILED) return 4;
  if (etch_init() != 0) return 5;
  pthread_t th[64];
  for (int t = 0; t < nthreads && t < 64; t++)
    pthread_create(&th[t], NULL, thread_main, (void *)(intptr_t)t);
  if (!strcmp(mode, "abort")) {
    while (__atomic_load_n(&counts[0], __ATOMIC_ACQUIRE) < limit) sched_yield();
    abort();
  }
  for (int t = 0; t < nthreads && t < 64; t++) pthread_join(th[t], NULL);
  return 0;
}

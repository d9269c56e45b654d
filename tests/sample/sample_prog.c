/*
 * sample_prog.c - a program whose CPU time is known: every round calls
 * burn_a for 7 units of work and burn_b for 3, each call inside a slice of
 * its own name, on two threads: one started before etch_init() (the
 * sampler adds it) and one after (it inherits the events). Built -O2
 * without frame pointers, its functions exported so that the dynamic
 * symbol table names them.
 *
 *   sample_prog N        rounds until the samplers have written N samples
 *                        (a test hook of libetch), then the rounds stop
 *   sample_prog refuse   perf_event_open refused by a seccomp filter:
 *                        10 rounds, recorded without samples
 *   sample_prog N fork   then forks a child that calls etch_init() and
 *                        runs rounds until its own sampler has written N/4
 *
 * Prints "tid early TID", "tid late TID" and "rounds R" on stdout, and
 * "child PID status S" after a fork.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <etch/etch.h>

ETCH_CATEGORY_DEFINE(burn, "burn", "sample_prog's work", "");

uint64_t etch__sample_written(void); /* libetch's test hook (sample.c) */
/* Exported: the dynamic symbol table names them in the trace. */
uint64_t burn_a(uint64_t x, int units);
uint64_t burn_b(uint64_t x, int units);
uint64_t run_round(uint64_t x);

#define UNIT 200000 /* iterations of one unit of work */

static atomic_int go, stop;
static atomic_int rounds_done;

__attribute__((noinline)) uint64_t burn_a(uint64_t x, int units) {
  for (long i = 0; i < (long)units * UNIT; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}

__attribute__((noinline)) uint64_t burn_b(uint64_t x, int units) {
  for (long i = 0; i < (long)units * UNIT; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}

__attribute__((noinline)) uint64_t run_round(uint64_t x) {
  ETCH_SLICE_BEGIN(burn, "burn_a");
  x = burn_a(x, 7);
  ETCH_SLICE_END(burn);
  ETCH_SLICE_BEGIN(burn, "burn_b");
  x = burn_b(x, 3);
  ETCH_SLICE_END(burn);
  return x;
}

static int max_rounds; /* 0: until stop */

static void *worker(void *arg) {
  atomic_int *tid = arg;
  atomic_store(tid, (int)syscall(SYS_gettid));
  while (!atomic_load(&go)) sched_yield();
  uint64_t x = 1;
  for (int r = 0; !atomic_load(&stop) && (!max_rounds || r < max_rounds);
       r++) {
    x = run_round(x);
    atomic_fetch_add(&rounds_done, 1);
  }
  return (void *)(uintptr_t)(x & 1);
}

static void refuse_perf(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
    perror("sample_prog: seccomp");
    exit(3);
  }
}

int main(int argc, char **argv) {
  if (argc != 2 && !(argc == 3 && !strcmp(argv[2], "fork"))) {
    fprintf(stderr, "usage: sample_prog N [fork] | refuse\n");
    return 2;
  }
  bool refuse = !strcmp(argv[1], "refuse");
  uint64_t want = refuse ? 0 : strtoull(argv[1], NULL, 10);
  if (refuse) {
    refuse_perf();
    max_rounds = 10;
  }
  atomic_int early_tid = 0, late_tid = 0;
  pthread_t early, late;
  pthread_create(&early, NULL, worker, &early_tid);
  while (!atomic_load(&early_tid)) sched_yield();
  if (etch_init() != ETCH_OK) {
    fprintf(stderr, "sample_prog: etch_init: %s\n", etch_last_error());
    return 1;
  }
  pthread_create(&late, NULL, worker, &late_tid);
  while (!atomic_load(&late_tid)) sched_yield();
  atomic_store(&go, 1);
  if (!refuse) {
    /* Until the samples are in: the samplers' count, not a time. */
    while (etch__sample_written() < want) usleep(1000);
    atomic_store(&stop, 1);
  }
  pthread_join(early, NULL);
  pthread_join(late, NULL);
  printf("tid early %d\ntid late %d\nrounds %d\n", atomic_load(&early_tid),
         atomic_load(&late_tid), atomic_load(&rounds_done));
  if (argc == 3) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) { /* samples of its own, in a session of its own */
      if (etch_init() != ETCH_OK) _exit(4);
      uint64_t x = 1;
      while (etch__sample_written() < want / 4) x = run_round(x);
      /* Its trace written, out without exit's handlers: the child holds
       * what the parent's other threads allocated for themselves (the
       * sampler thread's stack cache), which LeakSanitizer would report
       * as its leaks. */
      int rc = etch_shutdown();
      _exit(rc == ETCH_OK ? (int)(x & 0) : 5);
    }
    int st = -1;
    waitpid(pid, &st, 0);
    printf("child %d status %d\n", (int)pid, st);
  }
  return 0;
}

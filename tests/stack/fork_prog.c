/*
 * fork_prog.c - a program without etch in it that forks without exec, for
 * the fork test (fork_test.c). Built with -O2 and without frame pointers.
 *
 *   parent:  parent_leak 2 x 222 before the fork, parent_late 1 x 777
 *            after it (the child gone); one block of 4444 freed in the
 *            child and kept in the parent
 *   child:   child_leak 3 x 333, on a thread of its own child_thread_leak
 *            2 x 555; frees the parent's 4444 block; ends with exit()
 *
 * Prints the child's pid, then "fork_prog: done".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif

void *volatile keep[64];
static int nkeep;

static NOINLINE void parent_leak(void) {
  keep[nkeep++] = malloc(222);
  __asm__ volatile("" ::: "memory");
}

static NOINLINE void parent_late(void) {
  keep[nkeep++] = malloc(777);
  __asm__ volatile("" ::: "memory");
}

static NOINLINE void child_leak(void) {
  keep[nkeep++] = malloc(333);
  __asm__ volatile("" ::: "memory");
}

static NOINLINE void child_thread_leak(void) {
  keep[nkeep++] = malloc(555);
  __asm__ volatile("" ::: "memory");
}

static void *child_thread(void *arg) {
  (void)arg;
  child_thread_leak();
  child_thread_leak();
  return NULL;
}

int main(void) {
  parent_leak();
  parent_leak();
  void *shared = malloc(4444);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    free(shared);
    for (int i = 0; i < 3; i++) child_leak();
    pthread_t t;
    if (pthread_create(&t, NULL, child_thread, NULL) != 0) return 1;
    pthread_join(t, NULL);
    exit(0);
  }
  int st;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
    return 1;
  parent_late();
  keep[nkeep++] = shared;
  printf("%ld\nfork_prog: done\n", (long)pid);
  return 0;
}

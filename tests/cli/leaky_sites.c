/*
 * leaky_sites.c - a program without etch in it whose leaks and hotspots are
 * known by call site, for the call-stack tests (stacks_test.c). Built with
 * -O2 and without frame pointers, as most programs are.
 *
 *   never freed:  leak_one 1 x 11, leak_two 2 x 22, leak_three 3 x 33
 *                 (called through three_caller), lib_leak 2 x 44 (in
 *                 libleaky_lib.so), plugin_leak 1 x 55 (in
 *                 leaky_plugin.so, dlopen'ed), thread_leak 4 x 66 (on a
 *                 thread of its own)
 *   freed:        hot_alloc 1000 x 16..79 (the most allocations), each a
 *                 temporary (freed before the thread allocates again);
 *                 bulk_alloc 10 x 10000 (the most bytes), held until
 *                 after the last leak (so all 10 are live at the peak),
 *                 none a temporary
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* noclone (gcc's) keeps a function's copy from taking another name;
 * clang makes no such copies. */
#if defined(__clang__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE __attribute__((noinline, noclone))
#endif

void *volatile keep[64];
static int nkeep;
void *lib_leak(int i); /* libleaky_lib.so */

/* Each keeps what it allocates where the compiler must assume it is used,
 * and does something after the call, so that no call is a tail call. */
static NOINLINE void leak_one(void) {
  keep[nkeep++] = malloc(11);
  __asm__ volatile("" ::: "memory");
}

static NOINLINE void leak_two(int i) {
  keep[nkeep++] = malloc(22);
  __asm__ volatile("" ::: "memory");
  (void)i;
}

static NOINLINE void leak_three(int i) {
  keep[nkeep++] = malloc(33);
  __asm__ volatile("" ::: "memory");
  (void)i;
}

static NOINLINE void three_caller(void) {
  for (int i = 0; i < 3; i++) leak_three(i);
  __asm__ volatile("" ::: "memory");
}

static NOINLINE void *hot_alloc(int i) {
  void *p = malloc(16 + (size_t)(i % 64));
  __asm__ volatile("" ::: "memory");
  return p;
}

static void *bulk[10];

static NOINLINE void bulk_alloc(int i) {
  bulk[i] = malloc(10000);
  __asm__ volatile("" ::: "memory");
}

static NOINLINE void thread_leak(void) {
  keep[40 + nkeep % 8] = malloc(66);
  __asm__ volatile("" ::: "memory");
}

static void *thread_main(void *arg) {
  (void)arg;
  for (int i = 0; i < 4; i++) {
    thread_leak();
    __atomic_add_fetch(&nkeep, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

int main(int argc, char **argv) {
  const char *plugin = argc > 1 ? argv[1] : NULL;
  for (int i = 0; i < 10; i++) bulk_alloc(i);
  leak_one();
  for (int i = 0; i < 2; i++) leak_two(i);
  three_caller();
  for (int i = 0; i < 2; i++) keep[nkeep++] = lib_leak(i);
  for (int i = 0; i < 1000; i++) {
    char *p = hot_alloc(i);
    p[0] = 1;
    free(p);
  }
  pthread_t t;
  if (pthread_create(&t, NULL, thread_main, NULL) != 0) return 1;
  pthread_join(t, NULL);
  if (plugin) {
    void *h = dlopen(plugin, RTLD_NOW);
    if (!h) {
      fprintf(stderr, "leaky_sites: %s\n", dlerror());
      return 2;
    }
    void *(*leak)(void) = (void *(*)(void))dlsym(h, "plugin_leak");
    if (!leak) return 3;
    keep[nkeep++] = leak();
    /* Kept loaded: the frames' object is still there when the session
     * names them. */
  }
  for (int i = 0; i < 10; i++) free(bulk[i]);
  puts("leaky_sites: done");
  return 0;
}

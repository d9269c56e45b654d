/*
 * bench_unwind.c - what one call stack costs to take, by each way the
 * malloc preload could take it: ns per stack of DEPTH frames (the median
 * of 5 rounds, the ways alternating within each round).
 *
 *   bench_unwind [STACKS]
 *
 *   fp         frame pointers (built with them here: their best case; code
 *              without them, as Debian's libc, gives a wrong stack)
 *   libunwind  unw_backtrace with its per-thread cache (libunwind-dev),
 *              what libetch_malloc.so uses
 *   backtrace  the C library's backtrace() (the compiler's unwinder, no
 *              cache: .eh_frame_hdr searched for every frame)
 *   etch       etch's own .eh_frame unwinder (src/unwind) with its cache of
 *              rules by address, over the live stack (as libetch_malloc.so
 *              would) through etch__unwind_read_mem
 */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <execinfo.h>
#include <libunwind.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <time.h>

#include "unwind/unwind.h"

#define DEPTH 12
#define MAXF 64

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static __attribute__((noinline)) int take_fp(void **out, int max) {
  uintptr_t *fp = (uintptr_t *)__builtin_frame_address(0);
  int n = 0;
  while (fp && n < max) {
    uintptr_t ret = fp[1];
    if (!ret) break;
    out[n++] = (void *)ret;
    uintptr_t *next = (uintptr_t *)fp[0];
    if (next <= fp) break;
    fp = next;
  }
  return n;
}

static __attribute__((noinline)) int take_unw(void **out, int max) {
  return unw_backtrace(out, max);
}

static __attribute__((noinline)) int take_bt(void **out, int max) {
  return backtrace(out, max);
}

static etch_unwinder *U;
static uint64_t stack_hi;

static __attribute__((noinline)) int take_etch(void **out, int max) {
  etch_unwind_regs r;
  __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
                   : "=r"(r.ip), "=r"(r.sp), "=r"(r.bp));
  etch_unwind_mem m = {r.sp, (const uint8_t *)(uintptr_t)r.sp, stack_hi - r.sp};
  return (int)etch__unwind(U, &r, etch__unwind_read_mem, &m, (uint64_t *)out,
                           (uint32_t)max);
}

typedef int (*take_fn)(void **, int);
static volatile int sink;

static __attribute__((noinline)) int descend(int d, take_fn f, long reps) {
  if (d > 0) {
    int r = descend(d - 1, f, reps);
    sink = r;
    return r + 1;
  }
  void *pcs[MAXF];
  int got = 0;
  for (long i = 0; i < reps; i++) got = f(pcs, MAXF);
  return got;
}

static double run(take_fn f, long reps, int *frames) {
  uint64_t t0 = now_ns();
  *frames = descend(DEPTH, f, reps) - DEPTH;
  return (double)(now_ns() - t0) / (double)reps;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  long reps = argc > 1 ? atol(argv[1]) : 200000;
  if (reps < 100) return 2;
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  if (etch__unwinder_new(&U) != 0) return 1;
  pthread_attr_t a;
  void *lo;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &a) != 0) return 1;
  pthread_attr_getstack(&a, &lo, &size);
  pthread_attr_destroy(&a);
  stack_hi = (uint64_t)(uintptr_t)lo + size;
  const char *names[] = {"fp", "libunwind", "backtrace", "etch"};
  take_fn fns[] = {take_fp, take_unw, take_bt, take_etch};
  enum { NWAYS = 4 };
  double v[NWAYS][5];
  int frames[NWAYS] = {0};
  for (int k = 0; k < NWAYS; k++) run(fns[k], reps / 10, &frames[k]); /* warm */
  for (int r = 0; r < 5; r++)
    for (int k = 0; k < NWAYS; k++) v[k][r] = run(fns[k], reps, &frames[k]);
  for (int k = 0; k < NWAYS; k++) {
    qsort(v[k], 5, sizeof v[k][0], cmp);
    printf("%-10s %6.1f ns per stack (%d frames)\n", names[k], v[k][2],
           frames[k]);
  }
  return 0;
}

/*
 * unwind_test.c - src/unwind: stacks of code built without frame pointers
 * (unwind_chain.c, unwind_lib.c) unwound from three registers, against
 * glibc's backtrace() (libgcc's DWARF unwinder) at the same place: the
 * same return addresses, frame for frame, from the live stack and from a
 * copy of it; in threads at once; through a library loaded with dlopen
 * after the unwinder was made; the cache used the second time. Where
 * libunwind is there (ETCH_TEST_LIBUNWIND), against its unw_backtrace too:
 * what libetch_malloc.so took its stacks with before it used this unwinder.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ETCH_TEST_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#include "test.h"
#include "unwind/unwind.h"
#include "unwind_chain.h"

#define MAXF 64

typedef struct probe_ctx {
  etch_unwinder *u;
  uint64_t live[MAXF], copied[MAXF];
  void *bt[MAXF], *unw[MAXF];
  uint32_t nlive, ncopied;
  int nbt, nunw;
  size_t copy_len;
} probe_ctx;

/* Where the stack of the calling thread ends (its highest address). */
static uint64_t stack_top(void) {
  pthread_attr_t a;
  void *addr;
  size_t size;
  if (pthread_getattr_np(pthread_self(), &a) != 0) return 0;
  pthread_attr_getstack(&a, &addr, &size);
  pthread_attr_destroy(&a);
  return (uint64_t)(uintptr_t)addr + size;
}

/* Copies n bytes of a live stack (AddressSanitizer's red zones in it
 * included, hence no checks and no memcpy). */
__attribute__((no_sanitize_address)) static void copy_stack(
    uint8_t *to, const volatile uint8_t *from, size_t n) {
  for (size_t i = 0; i < n; i++) to[i] = from[i];
}

/* Unwinds from here: live, from a copy of the stack, and by backtrace(). */
__attribute__((noinline)) static int probe(void *vctx, int depth) {
  probe_ctx *p = (probe_ctx *)vctx;
  etch_unwind_regs r;
  __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
                   : "=r"(r.ip), "=r"(r.sp), "=r"(r.bp));
  uint64_t top = stack_top();
  etch_unwind_mem live = {r.sp, (const uint8_t *)(uintptr_t)r.sp, top - r.sp};
  p->nlive = etch__unwind(p->u, &r, etch__unwind_read_mem, &live, p->live, MAXF);
  static __thread uint8_t copy[256 * 1024];
  size_t n = top - r.sp < sizeof copy ? top - r.sp : sizeof copy;
  copy_stack(copy, (const volatile uint8_t *)(uintptr_t)r.sp, n);
  p->copy_len = n;
  etch_unwind_mem cm = {r.sp, copy, n};
  p->ncopied = etch__unwind(p->u, &r, etch__unwind_read_mem, &cm, p->copied, MAXF);
  p->nbt = backtrace(p->bt, MAXF);
#ifdef ETCH_TEST_LIBUNWIND
  p->nunw = unw_backtrace(p->unw, MAXF);
#endif
  return depth;
}

static const char *name_of(uint64_t pc);

/* Where backtrace()'s frames meet the unwound ones: the frame after
 * probe's own (1; 2 under AddressSanitizer, whose backtrace adds a frame
 * of its own first). */
static int bt_offset(const probe_ctx *p) {
  for (int j = 1; j < p->nbt && j < 4; j++)
    if (p->nlive > 1 && (uint64_t)(uintptr_t)p->bt[j] == p->live[1])
      return j - 1;
  return -1;
}

/* The live unwind and backtrace() agree on every return address (frame 0
 * is where each began, both in probe), and the copy's unwind is the live
 * one. */
static void check_same(const probe_ctx *p, uint32_t at_least) {
  int d = bt_offset(p);
  if (d < 0 || p->nlive + (uint32_t)d != (uint32_t)p->nbt)
    for (int i = 0; i < MAXF && (i < (int)p->nlive || i < p->nbt); i++)
      fprintf(stderr, "  %2d %#18llx %-28s %18p %s\n", i,
              i < (int)p->nlive ? (unsigned long long)p->live[i] : 0ull,
              i < (int)p->nlive ? name_of(p->live[i]) : "",
              i < p->nbt ? p->bt[i] : NULL,
              i < p->nbt ? name_of((uint64_t)(uintptr_t)p->bt[i]) : "");
  ASSERT_TRUE(d >= 0);
  ASSERT_TRUE(p->nlive >= at_least);
  ASSERT_EQ_U64(p->nlive + (uint32_t)d, (uint64_t)p->nbt);
  for (uint32_t i = 1; i < p->nlive; i++) {
    if (p->live[i] != (uint64_t)(uintptr_t)p->bt[i + (uint32_t)d])
      FAIL("frame %u: unwound %#llx, backtrace %p", i,
           (unsigned long long)p->live[i], p->bt[i + (uint32_t)d]);
  }
  ASSERT_EQ_U64(p->ncopied, p->nlive);
  ASSERT_TRUE(memcmp(p->copied, p->live, p->nlive * sizeof p->live[0]) == 0);
}

static const char *name_of(uint64_t pc) {
  Dl_info di;
  if (!dladdr((void *)(uintptr_t)(pc - 1), &di) || !di.dli_sname) return "?";
  return di.dli_sname;
}

TEST(unwinds_code_without_frame_pointers_as_backtrace_does) {
  probe_ctx p = {0};
  ASSERT_OK(etch__unwinder_new(&p.u));
  uint64_t misses = 0;
  for (int round = 0; round < 2; round++) {
    if (round == 1) misses = etch__unwinder_stats(p.u).misses;
    ASSERT_EQ_INT(chain_a(probe, &p, 5) > 0, 1);
    check_same(&p, 5);
    /* probe, then the chain (exported: dladdr names them). */
    ASSERT_EQ_STR(name_of(p.live[1]), "chain_c");
    ASSERT_EQ_STR(name_of(p.live[2]), "chain_b");
    ASSERT_EQ_STR(name_of(p.live[3]), "chain_a");
  }
  etch_unwind_stats st = etch__unwinder_stats(p.u);
  /* The second round found every rule in the cache (the first took one
   * for each frame at most). */
  ASSERT_EQ_U64(st.misses, misses);
  ASSERT_TRUE(misses > 0 && misses <= 2 * (uint64_t)p.nlive);
  ASSERT_TRUE(st.objects >= 2);
  etch__unwinder_free(p.u);
}

TEST(a_frame_of_more_than_16_kib_unwinds_through_the_wide_table) {
  probe_ctx p = {0};
  ASSERT_OK(etch__unwinder_new(&p.u));
  for (int round = 0; round < 2; round++) {
    chain_big(probe, &p, round);
    check_same(&p, 3);
    ASSERT_EQ_STR(name_of(p.live[1]), "chain_big");
  }
  etch__unwinder_free(p.u);
}

TEST(short_copies_strange_addresses_and_max_end_the_stack) {
  probe_ctx p = {0};
  ASSERT_OK(etch__unwinder_new(&p.u));
  chain_a(probe, &p, 1);
  check_same(&p, 5);
  etch_unwind_regs r = {p.live[0], 0x2000, 0};
  uint64_t pcs[MAXF];
  /* A copy that does not hold the frame's return address: frame 0 only. */
  uint8_t tiny[8] = {0};
  etch_unwind_mem m = {0x1000, tiny, sizeof tiny};
  ASSERT_EQ_U64(etch__unwind(p.u, &r, etch__unwind_read_mem, &m, pcs, MAXF), 1);
  ASSERT_EQ_U64(pcs[0], p.live[0]);
  /* An address in no object, no frame pointer: that frame alone. */
  r.ip = 16;
  ASSERT_EQ_U64(etch__unwind(p.u, &r, etch__unwind_read_mem, &m, pcs, MAXF), 1);
  ASSERT_EQ_U64(pcs[0], 16);
  /* A stack of 8-byte words that all point back at themselves: the walk
   * through bp stops (a stack only grows down), never loops. */
  uint64_t loop[64];
  for (int i = 0; i < 64; i++) loop[i] = (uint64_t)(uintptr_t)&loop[0];
  etch_unwind_mem lm = {(uint64_t)(uintptr_t)loop, (const uint8_t *)loop,
                        sizeof loop};
  r = (etch_unwind_regs){16, (uint64_t)(uintptr_t)&loop[8],
                         (uint64_t)(uintptr_t)&loop[0]};
  ASSERT_EQ_U64(etch__unwind(p.u, &r, etch__unwind_read_mem, &lm, pcs, MAXF), 1);
  /* At most max frames: the first ones. */
  chain_a(probe, &p, 1);
  r = (etch_unwind_regs){p.live[0], 0, 0};
  ASSERT_EQ_U64(etch__unwind(p.u, &r, etch__unwind_read_mem, &m, pcs, 0), 0);
  etch__unwinder_free(p.u);
}

/* The registers and a copy of the stack at probe_keep's call. */
typedef struct kept {
  etch_unwind_regs r;
  uint8_t copy[64 * 1024];
  size_t len;
} kept;

__attribute__((noinline)) static int probe_keep(void *vctx, int depth) {
  kept *k = (kept *)vctx;
  __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
                   : "=r"(k->r.ip), "=r"(k->r.sp), "=r"(k->r.bp));
  uint64_t top = stack_top();
  k->len = top - k->r.sp < sizeof k->copy ? top - k->r.sp : sizeof k->copy;
  copy_stack(k->copy, (const volatile uint8_t *)(uintptr_t)k->r.sp, k->len);
  return depth;
}

TEST(a_memo_knows_a_walk_over_the_same_words_and_no_other) {
  etch_unwinder *u;
  ASSERT_OK(etch__unwinder_new(&u));
  kept *k = (kept *)calloc(1, sizeof *k);
  ASSERT_TRUE(k != NULL);
  chain_a(probe_keep, k, 5);
  etch_unwind_mem m = {k->r.sp, k->copy, k->len};
  uint64_t want[MAXF], got[MAXF];
  uint32_t n = etch__unwind(u, &k->r, etch__unwind_read_mem, &m, want, MAXF);
  ASSERT_TRUE(n >= 5);
  etch_unwind_memo memo;
  memset(&memo, 0xa5, sizeof memo); /* what was there before: no matter */
  /* The walk that keeps a memo gives the walk's frames. */
  ASSERT_EQ_U64(etch__unwind_memo_walk(u, &k->r, &m, &memo, got, MAXF), n);
  ASSERT_TRUE(memcmp(got, want, n * sizeof want[0]) == 0);
  ASSERT_TRUE(memo.nreads >= n - 1 && memo.nreads <= 2 * n);
  ASSERT_TRUE(etch__unwind_memo_same(&memo, &k->r, &m, MAXF));
  /* Another max, another sp or another span: not the same walk. */
  ASSERT_TRUE(!etch__unwind_memo_same(&memo, &k->r, &m, MAXF - 1));
  etch_unwind_regs r2 = k->r;
  r2.sp += 8;
  ASSERT_TRUE(!etch__unwind_memo_same(&memo, &r2, &m, MAXF));
  etch_unwind_mem m2 = {k->r.sp, k->copy, k->len - 8};
  ASSERT_TRUE(!etch__unwind_memo_same(&memo, &k->r, &m2, MAXF));
  /* Each word the memo keeps changed: not the same; back: the same. */
  for (uint32_t i = 0; i < memo.nreads; i++) {
    uint64_t off = memo.read[i].off, w;
    ASSERT_TRUE(off + 8 <= k->len);
    memcpy(&w, k->copy + off, 8);
    ASSERT_EQ_U64(w, memo.read[i].val);
    uint64_t other = w ^ 0x10;
    memcpy(k->copy + off, &other, 8);
    ASSERT_TRUE(!etch__unwind_memo_same(&memo, &k->r, &m, MAXF));
    memcpy(k->copy + off, &w, 8);
    ASSERT_TRUE(etch__unwind_memo_same(&memo, &k->r, &m, MAXF));
  }
  /* Every other word of the first 4 KiB changed: the memo says the same,
   * and a walk agrees with it. */
  size_t span = k->len < 4096 ? k->len : 4096;
  for (size_t off = 0; off + 8 <= span; off += 8) {
    bool read = false;
    for (uint32_t i = 0; i < memo.nreads; i++) read |= memo.read[i].off == off;
    if (!read) k->copy[off] ^= 0x5a;
  }
  ASSERT_TRUE(etch__unwind_memo_same(&memo, &k->r, &m, MAXF));
  ASSERT_EQ_U64(etch__unwind(u, &k->r, etch__unwind_read_mem, &m, got, MAXF),
                n);
  ASSERT_TRUE(memcmp(got, want, n * sizeof want[0]) == 0);
  /* A walk through bp (an address in no object): the memo depends on bp
   * as the registers gave it. */
  uint64_t frames[8] = {0};
  uint64_t base = (uint64_t)(uintptr_t)frames;
  frames[2] = base + 48; /* the frame at frames[2]: bp, return address */
  frames[3] = 16;
  frames[6] = 0; /* the next: its bp and a return address of 0 */
  frames[7] = 0;
  etch_unwind_mem fm = {base, (const uint8_t *)frames, sizeof frames};
  etch_unwind_regs fr = {16, base, base + 16};
  uint32_t fn = etch__unwind_memo_walk(u, &fr, &fm, &memo, got, MAXF);
  ASSERT_EQ_U64(fn, 2);
  ASSERT_TRUE(memo.bp_used);
  ASSERT_TRUE(etch__unwind_memo_same(&memo, &fr, &fm, MAXF));
  fr.bp = base + 8;
  ASSERT_TRUE(!etch__unwind_memo_same(&memo, &fr, &fm, MAXF));
  free(k);
  etch__unwinder_free(u);
}

TEST(unwinds_through_a_library_loaded_after_the_unwinder) {
  probe_ctx p = {0};
  ASSERT_OK(etch__unwinder_new(&p.u));
  uint32_t before = etch__unwinder_stats(p.u).objects;
  void *h = dlopen(UNWIND_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_TRUE(h != NULL);
  int (*outer)(chain_fn, void *, int) =
      (int (*)(chain_fn, void *, int))dlsym(h, "lib_outer");
  ASSERT_TRUE(outer != NULL);
  outer(probe, &p, 3);
  check_same(&p, 4);
  /* probe, the library's static lib_inner, lib_outer, this test. */
  Dl_info di;
  ASSERT_TRUE(dladdr((void *)(uintptr_t)(p.live[1] - 1), &di) != 0);
  ASSERT_TRUE(strstr(di.dli_fname, "unwind_lib") != NULL);
  ASSERT_EQ_STR(name_of(p.live[2]), "lib_outer");
  ASSERT_TRUE(etch__unwinder_stats(p.u).objects == before + 1);
  etch__unwinder_free(p.u);
  dlclose(h);
}

typedef struct thr {
  etch_unwinder *u;
  int iters, bad;
} thr;

static void *thread_main(void *arg) {
  thr *t = (thr *)arg;
  probe_ctx *p = (probe_ctx *)calloc(1, sizeof *p);
  p->u = t->u;
  for (int i = 0; i < t->iters; i++) {
    chain_a(probe, p, i);
    int d = bt_offset(p);
    bool same = d >= 0 && p->nlive + (uint32_t)d == (uint32_t)p->nbt &&
                p->nlive >= 5;
    for (uint32_t k = 1; same && k < p->nlive; k++)
      same = p->live[k] == (uint64_t)(uintptr_t)p->bt[k + (uint32_t)d];
    if (!same) t->bad++;
  }
  free(p);
  return NULL;
}

TEST(threads_unwind_at_once_with_one_cache) {
  etch_unwinder *u;
  ASSERT_OK(etch__unwinder_new(&u));
  pthread_t th[3];
  thr t[3];
  for (int i = 0; i < 3; i++) {
    t[i] = (thr){u, 300, 0};
    ASSERT_EQ_INT(pthread_create(&th[i], NULL, thread_main, &t[i]), 0);
  }
  for (int i = 0; i < 3; i++) {
    pthread_join(th[i], NULL);
    ASSERT_EQ_INT(t[i].bad, 0);
  }
  etch__unwinder_free(u);
}

#ifdef ETCH_TEST_LIBUNWIND
/* The live unwind and unw_backtrace agree on every return address after
 * probe's own frame: the same frames, as many. */
static bool same_as_libunwind(const probe_ctx *p) {
  if (p->nunw < 2 || p->nlive < 2 || (uint32_t)p->nunw != p->nlive) return false;
  for (uint32_t i = 1; i < p->nlive; i++)
    if (p->live[i] != (uint64_t)(uintptr_t)p->unw[i]) return false;
  return true;
}

static void *unw_thread(void *arg) {
  probe_ctx *p = (probe_ctx *)arg;
  for (int i = 0; i < 100; i++) {
    chain_a(probe, p, i);
    if (!same_as_libunwind(p)) return (void *)1;
  }
  return NULL;
}

TEST(unwinds_as_libunwind_does) {
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  probe_ctx *p = (probe_ctx *)calloc(2, sizeof *p);
  ASSERT_OK(etch__unwinder_new(&p[0].u));
  p[1].u = p[0].u;
  chain_a(probe, &p[0], 5);
  ASSERT_TRUE(same_as_libunwind(&p[0]));
  ASSERT_TRUE(p[0].nlive >= 5);
  chain_big(probe, &p[0], 1);
  ASSERT_TRUE(same_as_libunwind(&p[0]));
  void *h = dlopen(UNWIND_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_TRUE(h != NULL);
  int (*outer)(chain_fn, void *, int) =
      (int (*)(chain_fn, void *, int))dlsym(h, "lib_outer");
  ASSERT_TRUE(outer != NULL);
  outer(probe, &p[0], 3);
  ASSERT_TRUE(same_as_libunwind(&p[0]));
  ASSERT_EQ_STR(name_of(p[0].live[2]), "lib_outer");
  pthread_t th;
  void *bad = (void *)1;
  ASSERT_EQ_INT(pthread_create(&th, NULL, unw_thread, &p[1]), 0);
  pthread_join(th, &bad);
  ASSERT_TRUE(bad == NULL);
  etch__unwinder_free(p[0].u);
  free(p);
  dlclose(h);
}
#endif

/*
 * etch_malloc.c - libetch_malloc.so: memory tracing of an unmodified
 * program.
 *
 *   LD_PRELOAD=libetch_malloc.so ETCH_OUT=app.pftrace ./app
 *   etch record --malloc -o app.pftrace -- ./app
 *
 * Wraps malloc, calloc, realloc, reallocarray, free, posix_memalign,
 * aligned_alloc, memalign, valloc and pvalloc (C++ new and delete call
 * them) around the C library's own, found with dlsym(RTLD_NEXT), and
 * reports each to libetch (etch/memory.h). Its constructor calls etch_init
 * (ETCH_OUT and the other variables) and then starts reporting; reporting
 * stops before etch writes the trace at exit, so the write's own
 * allocations are not in it. The program's memory is the C library's: with
 * tracing off, or etch's buffer full, the calls behave exactly as without
 * the preload.
 *
 * Every allocation carries its call stack, unwound here over the live
 * stack with etch's own .eh_frame unwinder (src/unwind: a cache of each
 * return address's unwind rule, correct for code without frame pointers;
 * bench/memory/bench_unwind.c compares it with libunwind and the others),
 * the preload's own frames left out; ETCH_MALLOC_STACKS=0 turns stacks off.
 * An allocation made again from where one of the thread's last walks
 * started, over the same stack words that walk read, has that walk's stack
 * (etch__unwind_memo_same): it is reported by the stack's id, with no walk
 * and no hash of its frames.
 * A thread's stack is bounded by what pthread_getattr_np says (read once
 * per thread): an allocation made on another stack (a coroutine's, a
 * signal's alternate stack) has no call stack. The frames are never named
 * here: etch record names them from the binaries once the trace is written
 * (etch symbolize).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <etch/etch.h>

#include "unwind/unwind.h"

#define EXPORT __attribute__((visibility("default")))
#define STACK_MAX 64 /* frames kept, as libetch keeps */

static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);

static int reporting; /* atomic: between the constructor and exit */
static int stacks = 1; /* ETCH_MALLOC_STACKS */
static uintptr_t self_lo, self_hi; /* this library's code */
static etch_unwinder *unwinder; /* made by the constructor */
/* Inside an allocation's report: what the unwinder or etch allocate then
 * is the tracer's, not the program's, and is not reported. */
static __thread int in_report __attribute__((tls_model("initial-exec")));
/* This thread's stack: [stack_lo, stack_hi); stack_hi 1 when unknown. */
static __thread uintptr_t stack_lo __attribute__((tls_model("initial-exec")));
static __thread uintptr_t stack_hi __attribute__((tls_model("initial-exec")));

/* This thread's last walks, MEMOS of them by where they started
 * (etch__unwind_memo_same): an allocation made again from the same place
 * with the same callers, the common case in a loop, reads the few stack
 * words its walk read instead of walking, and reports the stack by its id
 * instead of hashing its frames. Made on the thread's first allocation
 * with a stack, freed when it exits; NULL when it could not be made. */
#define MEMOS 4
static __thread etch_unwind_memo *memos
    __attribute__((tls_model("initial-exec")));
static __thread bool memos_done __attribute__((tls_model("initial-exec")));
static pthread_key_t memos_key;
static bool memos_keyed;

static void memos_free(void *m) {
  memos = NULL;
  memos_done = true; /* not made again while the thread ends */
  real_free(m);
}

static __attribute__((noinline)) etch_unwind_memo *memos_make(void) {
  if (memos_done || !memos_keyed) return NULL;
  memos_done = true;
  etch_unwind_memo *m = (etch_unwind_memo *)real_malloc(MEMOS * sizeof *m);
  if (!m) return NULL;
  for (int i = 0; i < MEMOS; i++) m[i].len = 0; /* empty */
  if (pthread_setspecific(memos_key, m)) {
    real_free(m);
    return NULL;
  }
  return memos = m;
}

static __attribute__((noinline)) void find_stack(void) {
  pthread_attr_t a;
  void *lo;
  size_t size;
  stack_hi = 1;
  if (pthread_getattr_np(pthread_self(), &a)) return;
  if (!pthread_attr_getstack(&a, &lo, &size)) {
    stack_lo = (uintptr_t)lo;
    stack_hi = stack_lo + size;
  }
  pthread_attr_destroy(&a);
}

/* True when the frame record at f (a saved bp, then a return address)
 * lies in this thread's stack above `below`, and its return address is in
 * this library's code. */
static inline bool own_frame(uintptr_t f, uintptr_t below) {
  return f > below && !(f & 7) && f < stack_hi - 16 &&
         ((const uintptr_t *)f)[1] >= self_lo &&
         ((const uintptr_t *)f)[1] < self_hi;
}

/* The return addresses of the allocating code's stack, innermost first,
 * read from the live stack: 0 when it is not the thread's own. This file
 * is built with frame pointers (CMakeLists.txt), so report_alloc's frame
 * (`f`, its own bp) and the wrapper's that called it are walked through
 * bp: the walk through .eh_frame starts at the wrapper's caller. When the
 * frames are not those two (a wrapper that called report_alloc through a
 * tail call), the walk starts in report_alloc, and report_alloc leaves the
 * library's frames out. Inline in report_alloc: its frame is `f`. */
#define STACK_SAME UINT32_MAX /* take_stack: the memo's stack, in *memo */

static inline __attribute__((always_inline)) uint32_t
take_stack(uintptr_t f, uint64_t *pcs, uint32_t max,
           etch_unwind_memo **memo) {
#if defined(__x86_64__)
  etch_unwind_regs r;
  __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1"
                   : "=r"(r.ip), "=r"(r.sp));
  r.bp = f;
  if (ETCH_UNLIKELY(!stack_hi)) find_stack();
  if (!unwinder || r.sp < stack_lo || r.sp >= stack_hi) return 0;
  if (own_frame(f, r.sp - 1)) {
    uintptr_t f1 = ((const uintptr_t *)f)[0]; /* the wrapper's */
    if (f1 > f && !(f1 & 7) && f1 < stack_hi - 16) {
      r.ip = ((const uintptr_t *)f1)[1];
      r.bp = ((const uintptr_t *)f1)[0];
      r.sp = f1 + 16;
    }
  }
  etch_unwind_mem m = {r.sp, (const uint8_t *)(uintptr_t)r.sp,
                       stack_hi - r.sp};
  etch_unwind_memo *all = ETCH_LIKELY(memos != NULL) ? memos : memos_make();
  if (!all)
    return etch__unwind(unwinder, &r, etch__unwind_read_mem, &m, pcs, max);
  etch_unwind_memo *mo = &all[(r.ip >> 4 ^ r.sp >> 4) % MEMOS];
  *memo = mo;
  if (etch__unwind_memo_same(mo, &r, &m, max)) return STACK_SAME;
  return etch__unwind_memo_walk(unwinder, &r, &m, mo, pcs, max);
#else
  (void)f;
  (void)pcs;
  (void)max;
  (void)memo;
  return 0;
#endif
}

/* Reports an allocation with its call stack, the preload's frames (this
 * function, the wrapper that called it) left out. */
static __attribute__((noinline)) void report_alloc(void *p, size_t n) {
  if (!p || in_report) return;
  in_report = 1;
  if (stacks) {
    uint64_t pcs[STACK_MAX + 4];
    etch_unwind_memo *mo = NULL;
    uint32_t k = take_stack((uintptr_t)__builtin_frame_address(0), pcs,
                            STACK_MAX + 4, &mo);
    if (k == STACK_SAME) {
      etch_mem_alloc_stack_id(p, n, NULL, (uint32_t)mo->user);
    } else {
      uint32_t skip = 0;
      while (skip < k && pcs[skip] >= self_lo && pcs[skip] < self_hi) skip++;
      uint32_t id = etch_mem_alloc_stack(
          p, n, NULL, (const uintptr_t *)(pcs + skip), k - skip);
      /* Kept only with its id: an allocation not reported (or whose
       * stack could not be interned) walks again next time. */
      if (mo) {
        if (id)
          mo->user = id;
        else
          mo->len = 0;
      }
    }
  } else {
    etch_mem_alloc(p, n);
  }
  in_report = 0;
}

static void report_free(void *p) {
  if (in_report) return;
  etch_mem_free(p);
}

/* dlsym may allocate before the real functions are known: from here. */
static char boot[16384] __attribute__((aligned(16)));
static size_t boot_used;

static void *boot_alloc(size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n > sizeof boot - boot_used) return NULL;
  void *p = boot + boot_used;
  boot_used += n;
  return p;
}

static int in_boot(const void *p) {
  return (const char *)p >= boot && (const char *)p < boot + sizeof boot;
}

static void resolve(void) {
  static int resolving;
  if (resolving) return;
  resolving = 1;
  real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
  real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  real_posix_memalign =
      (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
  real_aligned_alloc =
      (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
  real_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
  real_valloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "valloc");
  real_pvalloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "pvalloc");
  resolving = 0;
}

#define READY() (real_malloc || (resolve(), real_malloc))
/* Reporting (1), and a session records "memory": checked here, so that
 * with nothing recording a call costs no call into libetch. */
#define REPORTING()                                       \
  (__atomic_load_n(&reporting, __ATOMIC_RELAXED) == 1 &&  \
   __atomic_load_n(&etch_cat_etch_memory.enabled, __ATOMIC_RELAXED))
static int child_start(void);

/* The same for an allocation, which also starts a fork child's own
 * session (reporting 2: see after_fork_child). */
static inline int reporting_alloc(void) {
  if (__builtin_expect(__atomic_load_n(&reporting, __ATOMIC_RELAXED) == 2, 0))
    child_start();
  return REPORTING();
}
#define REPORTING_ALLOC() reporting_alloc()

EXPORT void *malloc(size_t n) {
  if (!READY()) return boot_alloc(n);
  void *p = real_malloc(n);
  if (REPORTING_ALLOC()) report_alloc(p, n);
  return p;
}

EXPORT void free(void *p) {
  if (!p || in_boot(p)) return;
  /* Reported before the block can go to another thread's malloc. */
  if (REPORTING()) report_free(p);
  if (READY()) real_free(p);
}

EXPORT void *calloc(size_t n, size_t size) {
  if (!READY()) {
    if (size && n > SIZE_MAX / size) return NULL;
    void *p = boot_alloc(n * size);
    return p; /* static memory: already zero */
  }
  void *p = real_calloc(n, size);
  if (REPORTING_ALLOC() && p) report_alloc(p, n * size);
  return p;
}

EXPORT void *realloc(void *old, size_t n) {
  if (!READY() || in_boot(old)) {
    void *p = READY() ? real_malloc(n) : boot_alloc(n);
    if (p && old) memcpy(p, old, n); /* boot blocks are small */
    if (p && READY() && REPORTING_ALLOC()) report_alloc(p, n);
    return p;
  }
  int rep = REPORTING_ALLOC();
  /* The old block is reported freed first: once realloc has moved it,
   * another thread may get its address. */
  if (rep && old) report_free(old);
  void *p = real_realloc(old, n);
  if (rep) {
    if (p)
      report_alloc(p, n);
    else if (old && n) /* failed: the old block is still there */
      report_alloc(old, malloc_usable_size(old));
  }
  return p;
}

EXPORT void *reallocarray(void *old, size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(old, n * size);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n) {
  if (!READY()) return ENOMEM;
  int rc = real_posix_memalign(out, align, n);
  if (!rc && REPORTING_ALLOC()) report_alloc(*out, n);
  return rc;
}

EXPORT void *aligned_alloc(size_t align, size_t n) {
  if (!READY()) return NULL;
  void *p = real_aligned_alloc(align, n);
  if (REPORTING_ALLOC()) report_alloc(p, n);
  return p;
}

EXPORT void *memalign(size_t align, size_t n) {
  if (!READY()) return NULL;
  void *p = real_memalign(align, n);
  if (REPORTING_ALLOC()) report_alloc(p, n);
  return p;
}

EXPORT void *valloc(size_t n) {
  if (!READY()) return NULL;
  void *p = real_valloc(n);
  if (REPORTING_ALLOC()) report_alloc(p, n);
  return p;
}

EXPORT void *pvalloc(size_t n) {
  if (!READY()) return NULL;
  void *p = real_pvalloc(n);
  if (REPORTING_ALLOC()) report_alloc(p, n);
  return p;
}

/* Registered after etch_init's own exit handler, so it runs before it:
 * reporting stops before the trace is written. */
static void stop_reporting(void) {
  __atomic_store_n(&reporting, 0, __ATOMIC_RELAXED);
}

/* fork(): the unwinder's lock is held across it (a thread in the middle of
 * a rule lookup would leave it held in the child). A child made while
 * reporting records its own allocations: libetch gives it no session
 * (docs/sdk.md, fork), so its first allocation after fork() returns calls
 * etch_init, as a program linked with etch would, and the child writes a
 * trace of its own (NAME.PID.pftrace beside the parent's). Not from here:
 * libetch's own fork handlers, which run after this one, have not yet
 * put its state right. */
static void before_fork(void) {
  if (unwinder) etch__unwinder_fork_prepare(unwinder);
}

static void after_fork_parent(void) {
  if (unwinder) etch__unwinder_fork_after(unwinder);
}

static void after_fork_child(void) {
  if (unwinder) etch__unwinder_fork_after(unwinder);
  int one = 1;
  __atomic_compare_exchange_n(&reporting, &one, 2, false, __ATOMIC_RELAXED,
                              __ATOMIC_RELAXED);
}

/* A fork child's first allocation outside a report: its own session.
 * Allocations of other threads meanwhile go unreported. */
static __attribute__((noinline)) int child_start(void) {
  int two = 2;
  if (in_report || !__atomic_compare_exchange_n(&reporting, &two, 0, false,
                                                __ATOMIC_ACQ_REL,
                                                __ATOMIC_RELAXED))
    return 0;
  in_report = 1;
  etch_init();
  atexit(stop_reporting); /* before any exit handler etch_init added */
  in_report = 0;
  __atomic_store_n(&reporting, 1, __ATOMIC_RELEASE);
  return 1;
}

/* This library's code range: its frames are left out of every stack. */
static int find_self(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  if (info->dlpi_addr != (uintptr_t)arg) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    if (!self_lo || lo < self_lo) self_lo = lo;
    if (lo + ph->p_memsz > self_hi) self_hi = lo + ph->p_memsz;
  }
  return 1;
}

__attribute__((constructor)) static void etch_malloc_init(void) {
  resolve();
  const char *st = getenv("ETCH_MALLOC_STACKS");
  stacks = !(st && !strcmp(st, "0"));
  Dl_info self;
  if (dladdr((void *)report_alloc, &self))
    dl_iterate_phdr(find_self, self.dli_fbase);
  if (stacks && etch__unwinder_new(&unwinder) != 0) stacks = 0;
  if (stacks) memos_keyed = !pthread_key_create(&memos_key, memos_free);
  etch_init();
  atexit(stop_reporting);
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  __atomic_store_n(&reporting, 1, __ATOMIC_RELAXED);
}

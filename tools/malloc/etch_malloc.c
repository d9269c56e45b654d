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
 * Every allocation carries its call stack, unwound here with libunwind's
 * unw_backtrace (its per-thread cache of each return address's unwind
 * rule: correct for code without frame pointers; bench/memory/bench_unwind.c
 * compares the ways), the preload's own frames left out; ETCH_MALLOC_STACKS=0
 * turns stacks off. The frames are never named here: etch record names
 * them from the binaries once the trace is written (etch symbolize).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <etch/etch.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>


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
/* Inside an allocation's report: what libunwind or etch allocate then is
 * the tracer's, not the program's, and is not reported. */
static __thread int in_report __attribute__((tls_model("initial-exec")));

/* Reports an allocation with its call stack, the preload's frames (this
 * function and the wrapper that called it) left out. */
static __attribute__((noinline)) void report_alloc(void *p, size_t n) {
  if (!p || in_report) return;
  in_report = 1;
  if (stacks) {
    void *pcs[STACK_MAX + 4];
    int k = unw_backtrace(pcs, STACK_MAX + 4);
    int skip = 0;
    while (skip < k && (uintptr_t)pcs[skip] >= self_lo &&
           (uintptr_t)pcs[skip] < self_hi)
      skip++;
    etch_mem_alloc_stack(p, n, NULL, (const uintptr_t *)(pcs + skip),
                         (uint32_t)(k - skip));
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
/* Reporting, and a session records "memory": checked here, so that with
 * nothing recording a call costs no call into libetch. */
#define REPORTING()                                  \
  (__atomic_load_n(&reporting, __ATOMIC_RELAXED) &&  \
   __atomic_load_n(&etch_cat_etch_memory.enabled, __ATOMIC_RELAXED))

EXPORT void *malloc(size_t n) {
  if (!READY()) return boot_alloc(n);
  void *p = real_malloc(n);
  if (REPORTING()) report_alloc(p, n);
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
  if (REPORTING() && p) report_alloc(p, n * size);
  return p;
}

EXPORT void *realloc(void *old, size_t n) {
  if (!READY() || in_boot(old)) {
    void *p = READY() ? real_malloc(n) : boot_alloc(n);
    if (p && old) memcpy(p, old, n); /* boot blocks are small */
    if (p && READY() && REPORTING()) report_alloc(p, n);
    return p;
  }
  int rep = REPORTING();
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
  if (!rc && REPORTING()) report_alloc(*out, n);
  return rc;
}

EXPORT void *aligned_alloc(size_t align, size_t n) {
  if (!READY()) return NULL;
  void *p = real_aligned_alloc(align, n);
  if (REPORTING()) report_alloc(p, n);
  return p;
}

EXPORT void *memalign(size_t align, size_t n) {
  if (!READY()) return NULL;
  void *p = real_memalign(align, n);
  if (REPORTING()) report_alloc(p, n);
  return p;
}

EXPORT void *valloc(size_t n) {
  if (!READY()) return NULL;
  void *p = real_valloc(n);
  if (REPORTING()) report_alloc(p, n);
  return p;
}

EXPORT void *pvalloc(size_t n) {
  if (!READY()) return NULL;
  void *p = real_pvalloc(n);
  if (REPORTING()) report_alloc(p, n);
  return p;
}

/* Registered after etch_init's own exit handler, so it runs before it:
 * reporting stops before the trace is written. */
static void stop_reporting(void) {
  __atomic_store_n(&reporting, 0, __ATOMIC_RELAXED);
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
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  etch_init();
  atexit(stop_reporting);
  __atomic_store_n(&reporting, 1, __ATOMIC_RELAXED);
}

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
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <etch/etch.h>

#define EXPORT __attribute__((visibility("default")))

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
  if (REPORTING()) etch_mem_alloc(p, n);
  return p;
}

EXPORT void free(void *p) {
  if (!p || in_boot(p)) return;
  /* Reported before the block can go to another thread's malloc. */
  if (REPORTING()) etch_mem_free(p);
  if (READY()) real_free(p);
}

EXPORT void *calloc(size_t n, size_t size) {
  if (!READY()) {
    if (size && n > SIZE_MAX / size) return NULL;
    void *p = boot_alloc(n * size);
    return p; /* static memory: already zero */
  }
  void *p = real_calloc(n, size);
  if (REPORTING() && p) etch_mem_alloc(p, n * size);
  return p;
}

EXPORT void *realloc(void *old, size_t n) {
  if (!READY() || in_boot(old)) {
    void *p = READY() ? real_malloc(n) : boot_alloc(n);
    if (p && old) memcpy(p, old, n); /* boot blocks are small */
    if (p && READY() && REPORTING()) etch_mem_alloc(p, n);
    return p;
  }
  int rep = REPORTING();
  /* The old block is reported freed first: once realloc has moved it,
   * another thread may get its address. */
  if (rep && old) etch_mem_free(old);
  void *p = real_realloc(old, n);
  if (rep) {
    if (p)
      etch_mem_alloc(p, n);
    else if (old && n) /* failed: the old block is still there */
      etch_mem_alloc(old, malloc_usable_size(old));
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
  if (!rc && REPORTING()) etch_mem_alloc(*out, n);
  return rc;
}

EXPORT void *aligned_alloc(size_t align, size_t n) {
  if (!READY()) return NULL;
  void *p = real_aligned_alloc(align, n);
  if (REPORTING()) etch_mem_alloc(p, n);
  return p;
}

EXPORT void *memalign(size_t align, size_t n) {
  if (!READY()) return NULL;
  void *p = real_memalign(align, n);
  if (REPORTING()) etch_mem_alloc(p, n);
  return p;
}

EXPORT void *valloc(size_t n) {
  if (!READY()) return NULL;
  void *p = real_valloc(n);
  if (REPORTING()) etch_mem_alloc(p, n);
  return p;
}

EXPORT void *pvalloc(size_t n) {
  if (!READY()) return NULL;
  void *p = real_pvalloc(n);
  if (REPORTING()) etch_mem_alloc(p, n);
  return p;
}

/* Registered after etch_init's own exit handler, so it runs before it:
 * reporting stops before the trace is written. */
static void stop_reporting(void) {
  __atomic_store_n(&reporting, 0, __ATOMIC_RELAXED);
}

__attribute__((constructor)) static void etch_malloc_init(void) {
  resolve();
  etch_init();
  atexit(stop_reporting);
  __atomic_store_n(&reporting, 1, __ATOMIC_RELAXED);
}

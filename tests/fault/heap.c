/*
 * heap.c - the bytes the heap holds, counted exactly: without a sanitizer
 * this program's malloc family counts what it hands out and forwards to
 * the C library's (glibc lets a program replace them); with one, the
 * sanitizer counts. mallinfo2() would not do: chunks the allocator keeps
 * in its caches count there as in use.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>

#include "fault.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FAULT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define FAULT_SANITIZED 1
#endif
#endif

#ifdef FAULT_SANITIZED
extern size_t __sanitizer_get_current_allocated_bytes(void);
size_t fault_heap_in_use(void) {
  return __sanitizer_get_current_allocated_bytes();
}
#else
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static size_t live;

static void *counted(void *p) {
  if (p) __atomic_add_fetch(&live, malloc_usable_size(p), __ATOMIC_RELAXED);
  return p;
}
static void uncount(void *p) {
  if (p) __atomic_sub_fetch(&live, malloc_usable_size(p), __ATOMIC_RELAXED);
}

void *malloc(size_t n) { return counted(__libc_malloc(n)); }
void *calloc(size_t n, size_t m) { return counted(__libc_calloc(n, m)); }
void free(void *p) {
  uncount(p);
  __libc_free(p);
}
void *realloc(void *p, size_t n) {
  size_t old = p ? malloc_usable_size(p) : 0;
  void *q = __libc_realloc(p, n);
  if (q || !n) {
    __atomic_sub_fetch(&live, old, __ATOMIC_RELAXED);
    counted(q);
  }
  return q;
}
void *memalign(size_t a, size_t n) { return counted(__libc_memalign(a, n)); }
void *aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
  void *p = memalign(a, n);
  if (!p) return 12; /* ENOMEM */
  *out = p;
  return 0;
}
void *valloc(size_t n) { return memalign(4096, n); }
void *pvalloc(size_t n) { return memalign(4096, (n + 4095) & ~(size_t)4095); }

size_t fault_heap_in_use(void) {
  return __atomic_load_n(&live, __ATOMIC_RELAXED);
}
#endif

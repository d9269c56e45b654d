/*
 * base.h - the bottom layer of etch: compiler helpers, assertions, error
 * reporting into the thread-local message slot, thread ids.
 *
 * Internal, non-static functions are named etch__<part>_<verb> and are hidden
 * (the build uses -fvisibility=hidden); only ETCH_API symbols are exported.
 */
#ifndef ETCH_BASE_H
#define ETCH_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etch/common.h"

#define ETCH_INLINE static inline __attribute__((always_inline))
/* For internal globals read on the hot path: no GOT indirection. */
#define ETCH_HIDDEN __attribute__((visibility("hidden")))
#define ETCH_NOINLINE __attribute__((noinline))
#define ETCH_COLD __attribute__((cold, noinline))
#define ETCH_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define ETCH_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ETCH_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ETCH_MAX(a, b) ((a) > (b) ? (a) : (b))

/*
 * Invariants: etch's own state, never a byte from outside (a producer's
 * chunk, a file, a socket: those are error paths, counted and tested).
 *
 *   ETCH_CHECK(cond)   always on: aborts with file, line and the condition.
 *   ETCH_DCHECK(cond)  the same in a checking build (cmake -DETCH_DCHECKS=ON,
 *                      which defines ETCH_DCHECKS; the ASan+UBSan stage of
 *                      scripts/test.sh is one); otherwise nothing: the
 *                      condition is not evaluated and costs no instruction.
 *   ETCH_NEVER(cond)   around the condition of a branch that cannot be
 *                      taken: `if (ETCH_NEVER(x)) return error;`. A checking
 *                      build aborts when it is true; otherwise it is the
 *                      condition (marked unlikely), so the defensive branch
 *                      still runs. (SQLite's NEVER().)
 */
#define ETCH_CHECK(cond)                                                     \
  do {                                                                       \
    if (ETCH_UNLIKELY(!(cond))) etch__check_failed(__FILE__, __LINE__, #cond); \
  } while (0)
#ifdef ETCH_DCHECKS
#define ETCH_DCHECK(cond) ETCH_CHECK(cond)
#define ETCH_NEVER(cond)                                                     \
  (ETCH_UNLIKELY(cond)                                                       \
       ? (etch__check_failed(__FILE__, __LINE__, "NEVER(" #cond ")"), true)  \
       : false)
#else
#define ETCH_DCHECK(cond) ((void)sizeof(!(cond)))
#define ETCH_NEVER(cond) ETCH_UNLIKELY(cond)
#endif

__attribute__((noreturn)) void etch__check_failed(const char *file, int line,
                                                   const char *what);

/*
 * Records `status` and a formatted message in this thread's error slot and
 * returns `status`, so callers write `return etch__error(ETCH_EINVAL, ...)`.
 */
int etch__error(int status, const char *fmt, ...) ETCH_PRINTF(2, 3);
int etch__verror(int status, const char *fmt, va_list ap) ETCH_PRINTF(2, 0);
/* Clears this thread's error slot. */
void etch__error_clear(void);

/* The kernel thread id of the calling thread (cached per thread). */
int32_t etch__gettid(void);
/* atexit() for the code of the object etch is linked into: the handler
 * runs at exit, or when that object is unloaded (dlclose) if it comes
 * first. atexit() itself does the same with the C library, but a
 * sanitizer that intercepts it (ThreadSanitizer) loses which object the
 * handler belongs to and calls it after the unload. */
int etch__atexit(void (*fn)(void));
/* Forgets the cached tid (called in a fork child). */
void etch__tid_reset(void);

/* 64-bit FNV-1a over bytes; used for uuids and hash tables. */
uint64_t etch__hash_bytes(const void *data, size_t len, uint64_t seed);
/* A 64-bit finalizer mixing all input bits (splitmix64). */
static inline uint64_t etch__mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* malloc wrappers that set the error slot on failure. */
void *etch__malloc(size_t n);
void *etch__calloc(size_t n, size_t size);
void *etch__realloc(void *p, size_t n);
char *etch__strdup(const char *s);

/* ---- fault simulation (tests only; docs/building.md, "Testing") ---- */
/* From now, counts the wrappers' allocations and makes the nth fail (with
 * ETCH_ENOMEM in the error slot, as a real failure), and with `persistent`
 * every one after it too; nth 0 only counts. Off until called. */
void etch__fault_arm(uint64_t nth, bool persistent);
/* Off again: allocations neither counted nor failed. */
void etch__fault_disarm(void);
/* While held, allocations are neither counted nor failed (a test's own
 * use of etch's parts between the operations it fails). */
void etch__fault_hold(bool hold);
/* Allocations counted, and failed, since etch__fault_arm. */
uint64_t etch__fault_count(void);
uint64_t etch__fault_fails(void);

/* The unsigned decimal number `len` bytes at `s` spell: 0, or -1 when they
 * are empty, hold anything but the digits 0-9, or overflow 64 bits. The
 * number parser of libetch's options: the config table (sdk/core/session.c)
 * and the environment's numbers (sdk/core/envvars.c). */
int etch__parse_u64(const char *s, size_t len, uint64_t *out);

/* getenv(name). Every read of the environment in libetch goes through
 * here: sdk/core/envvars.c names the variables (etch__env), and base, which
 * comes before sdk, reads its one (ETCH_CLOCK, clock.c) by name. */
const char *etch__getenv(const char *name);

#endif /* ETCH_BASE_H */

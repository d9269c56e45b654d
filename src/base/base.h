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
#include <stdio.h>

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
/* The first n bytes of s (fewer at a NUL), NUL-terminated. */
char *etch__strndup(const char *s, size_t n);

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
 * number parser of libetch's options: the config table (sdk/core/config.c)
 * and the environment's numbers (base/envvars.c). */
int etch__parse_u64(const char *s, size_t len, uint64_t *out);

/* getenv(name). Every read of the environment in libetch goes through
 * here: base/envvars.c names the variables (etch__env), and base, which
 * comes before sdk, reads its one (ETCH_CLOCK, clock.c) by name. */
const char *etch__getenv(const char *name);

/* ---- text helpers: one copy for every part ------------------------------ */

/* The length of the valid UTF-8 sequence at s (1..4; `avail` bytes may be
 * read, at least 1), 0 when it is not one: a stray continuation byte, an
 * overlong form, a surrogate, past U+10FFFF or cut short. */
size_t etch__utf8_seq(const unsigned char *s, size_t avail);

/* Writes s[0..len) to `out` as a CSV field (RFC 4180): as it is, or in
 * double quotes (a quote doubled) when it holds a comma, a quote, CR or LF. */
void etch__csv_field(FILE *out, const char *s, size_t len);

/* A printf into a new string of etch's allocator (free() it); NULL with
 * ETCH_ENOMEM in the error slot when out of memory. */
char *etch__aprintf(const char *fmt, ...) ETCH_PRINTF(1, 2);
char *etch__vaprintf(const char *fmt, va_list ap) ETCH_PRINTF(1, 0);

/* ---- numbers, durations and sizes from text ------------------------------ */
/*
 * The parsers of every number a person or a peer types: flags of etch and
 * etchd, the store's metadata, the viewer's requests. Each takes the whole
 * text (no spaces, nothing after) and returns 0, or -1 with *out untouched
 * when the text is not one or lies outside [min, max]; the caller says
 * what was wanted, in its own words.
 */
/* Decimal digits with a '-' in front when min < 0 ('+' never). */
int etch__parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);
/* Decimal digits only. */
int etch__parse_uint(const char *s, uint64_t min, uint64_t max,
                     uint64_t *out);
/* A duration in ns: a number (digits, optionally a '.' and more digits)
 * and a unit, ns, us, ms, s, m (minutes), h, d or w; a bare number is in
 * `unit_ns` (0: a unit is required). The fraction of a ns is dropped. */
int etch__parse_duration_ns(const char *s, uint64_t unit_ns, uint64_t min,
                            uint64_t max, uint64_t *out);
/* A size in bytes: a number as above and a unit in powers of 1024, any
 * case: b, k/kb/kib, m/mb/mib, g/gb/gib, t/tb/tib; a bare number is in
 * `unit` bytes (0: a unit is required). */
int etch__parse_size(const char *s, uint64_t unit, uint64_t min, uint64_t max,
                     uint64_t *out);

/* ---- directories ------------------------------------------------------------ */

/*
 * The directory of etch's `what` under one of the XDG base directories:
 * "$<xdg_var>/etch<sub>" when the variable holds an absolute path (the XDG
 * Base Directory spec says a relative one is ignored, and so it is), else
 * "$HOME/<home_dflt>/etch<sub>". `sub` is "" or starts with '/'. Written
 * into buf[n]; ETCH_EINVAL (error set, naming `what`) when HOME is unset
 * too or the path does not fit. Creates nothing.
 */
int etch__xdg_dir(const char *xdg_var, const char *home_dflt, const char *sub,
                  const char *what, char *buf, size_t n);
/* mkdir -p `path` with mode 0700 for each directory it makes (an existing
 * one is left as it is); ETCH_EIO (error set, naming `what`) when one
 * cannot be made. */
int etch__mkdirs(const char *path, const char *what);

#endif /* ETCH_BASE_H */

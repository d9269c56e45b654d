/*
 * base.c - error table lookups, the thread-local error slot, thread ids,
 * hashing and checked allocation.
 */
#define _GNU_SOURCE
#include "base/base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ETCH_ERRMSG_LEN 512

static __thread char tls_errmsg[ETCH_ERRMSG_LEN];
static __thread int32_t tls_tid;

void etch__check_failed(const char *file, int line, const char *what) {
  fprintf(stderr, "etch: internal check failed at %s:%d: %s\n", file, line,
          what);
  abort();
}

const char *etch_strerror(int status) {
  switch (status) {
#define ETCH__ERR_MSG(name, value, msg) \
  case value:                           \
    return msg;
    ETCH_ERRNO_MAP(ETCH__ERR_MSG)
#undef ETCH__ERR_MSG
    default:
      return "unknown etch status";
  }
}

const char *etch_err_name(int status) {
  switch (status) {
#define ETCH__ERR_NAME(name, value, msg) \
  case value:                            \
    return "ETCH_" #name;
    ETCH_ERRNO_MAP(ETCH__ERR_NAME)
#undef ETCH__ERR_NAME
    default:
      return "ETCH_UNKNOWN";
  }
}

const char *etch_last_error(void) { return tls_errmsg; }

void etch_free(void *p) { free(p); }

/*
 * The error slot the messages go to. libetch.so and libetch_reader.so each
 * carry base, and a program may load both: each copy has its own
 * tls_errmsg, and each library's etch_last_error() would read its own. The
 * address of the exported etch_last_error, taken through the GOT, is the
 * one definition the dynamic linker chose for the whole process (the first
 * library in lookup order), so every copy of base writes where that one
 * reads: one slot per thread, whatever the link order.
 */
static char *err_slot(void) {
  const char *(*volatile last)(void) = etch_last_error;
  return (char *)last();
}

int etch__verror(int status, const char *fmt, va_list ap) {
  vsnprintf(err_slot(), ETCH_ERRMSG_LEN, fmt, ap);
  return status;
}

int etch__error(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  etch__verror(status, fmt, ap);
  va_end(ap);
  return status;
}

void etch__error_clear(void) { err_slot()[0] = '\0'; }

int32_t etch__gettid(void) {
  if (ETCH_UNLIKELY(tls_tid == 0)) tls_tid = (int32_t)syscall(SYS_gettid);
  return tls_tid;
}

void etch__tid_reset(void) { tls_tid = 0; }

uint64_t etch__hash_bytes(const void *data, size_t len, uint64_t seed) {
  const uint8_t *p = (const uint8_t *)data;
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

/* ---- allocation and its fault simulation -------------------------------- */

/*
 * A test makes the nth allocation from now fail (and, persistent, every
 * one after it), as SQLite's fault simulation does. Off, it costs the
 * allocation wrappers one load and a not-taken branch: `fault_on` is
 * zero. On, every allocation goes through fault_hit(), which counts it
 * and says whether it fails. Atomic, since a test's threads allocate too.
 */
static int fault_on;            /* armed and not held */
static bool fault_armed, fault_held, fault_persistent;
static uint64_t fault_nth;      /* 0: count only */
static uint64_t fault_count, fault_fails;

static void fault_update(void) {
  __atomic_store_n(&fault_on, fault_armed && !fault_held, __ATOMIC_SEQ_CST);
}

void etch__fault_arm(uint64_t nth, bool persistent) {
  __atomic_store_n(&fault_count, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&fault_fails, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&fault_nth, nth, __ATOMIC_SEQ_CST);
  __atomic_store_n(&fault_persistent, persistent, __ATOMIC_SEQ_CST);
  fault_armed = true;
  fault_held = false;
  fault_update();
}

void etch__fault_disarm(void) {
  fault_armed = false;
  fault_held = false;
  fault_update();
}

void etch__fault_hold(bool hold) {
  fault_held = hold;
  fault_update();
}

uint64_t etch__fault_count(void) {
  return __atomic_load_n(&fault_count, __ATOMIC_SEQ_CST);
}

uint64_t etch__fault_fails(void) {
  return __atomic_load_n(&fault_fails, __ATOMIC_SEQ_CST);
}

static ETCH_COLD bool fault_hit(void) {
  uint64_t k = __atomic_add_fetch(&fault_count, 1, __ATOMIC_SEQ_CST);
  uint64_t nth = __atomic_load_n(&fault_nth, __ATOMIC_SEQ_CST);
  if (!nth || k < nth ||
      (k > nth && !__atomic_load_n(&fault_persistent, __ATOMIC_SEQ_CST)))
    return false;
  __atomic_add_fetch(&fault_fails, 1, __ATOMIC_SEQ_CST);
  return true;
}

#define FAULT() \
  (ETCH_UNLIKELY(__atomic_load_n(&fault_on, __ATOMIC_RELAXED)) && fault_hit())

void *etch__malloc(size_t n) {
  void *p = FAULT() ? NULL : malloc(n ? n : 1);
  if (!p) etch__error(ETCH_ENOMEM, "out of memory allocating %zu bytes", n);
  return p;
}

void *etch__calloc(size_t n, size_t size) {
  void *p = FAULT() ? NULL : calloc(n ? n : 1, size ? size : 1);
  if (!p) etch__error(ETCH_ENOMEM, "out of memory allocating %zu x %zu bytes",
                      n, size);
  return p;
}

void *etch__realloc(void *old, size_t n) {
  void *p = FAULT() ? NULL : realloc(old, n ? n : 1);
  if (!p) etch__error(ETCH_ENOMEM, "out of memory allocating %zu bytes", n);
  return p;
}

char *etch__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = (char *)etch__malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

int etch__parse_u64(const char *s, size_t len, uint64_t *out) {
  if (!len) return -1;
  uint64_t x = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    uint64_t d = (uint64_t)(s[i] - '0');
    if (x > (UINT64_MAX - d) / 10) return -1;
    x = x * 10 + d;
  }
  *out = x;
  return 0;
}

const char *etch__getenv(const char *name) { return getenv(name); }

/* ---- exit handlers ------------------------------------------------------ */

extern void *__dso_handle __attribute__((visibility("hidden")));
extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

static void run_exit_fn(void *arg) {
  void (*fn)(void);
  memcpy(&fn, &arg, sizeof fn);
  fn();
}

int etch__atexit(void (*fn)(void)) {
  void *arg;
  _Static_assert(sizeof arg == sizeof fn, "function pointers are pointers");
  memcpy(&arg, &fn, sizeof arg);
  return __cxa_atexit(run_exit_fn, arg, &__dso_handle);
}

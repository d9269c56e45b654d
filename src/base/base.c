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

void *etch__malloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) etch__error(ETCH_ENOMEM, "out of memory allocating %zu bytes", n);
  return p;
}

void *etch__calloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) etch__error(ETCH_ENOMEM, "out of memory allocating %zu x %zu bytes",
                      n, size);
  return p;
}

void *etch__realloc(void *old, size_t n) {
  void *p = realloc(old, n ? n : 1);
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

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
#include <strings.h>
#include <sys/stat.h>
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

char *etch__strndup(const char *s, size_t n) {
  n = strnlen(s, n);
  char *p = (char *)etch__malloc(n + 1);
  if (p) {
    memcpy(p, s, n);
    p[n] = '\0';
  }
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

/* ---- text helpers ------------------------------------------------------- */

size_t etch__utf8_seq(const unsigned char *s, size_t avail) {
  unsigned c = s[0];
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (avail < n) return 0;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
      (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return n;
}

void etch__csv_field(FILE *out, const char *s, size_t len) {
  bool quote = false;
  for (size_t i = 0; i < len && !quote; i++)
    quote = s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r';
  if (!quote) {
    fwrite(s, 1, len, out);
    return;
  }
  fputc('"', out);
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '"') fputc('"', out);
    fputc(s[i], out);
  }
  fputc('"', out);
}

char *etch__vaprintf(const char *fmt, va_list ap) {
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  char *p = n < 0 ? NULL : (char *)etch__malloc((size_t)n + 1);
  if (p) vsnprintf(p, (size_t)n + 1, fmt, again);
  va_end(again);
  return p;
}

char *etch__aprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *p = etch__vaprintf(fmt, ap);
  va_end(ap);
  return p;
}

/* ---- numbers, durations and sizes -------------------------------------- */

int etch__parse_uint(const char *s, uint64_t min, uint64_t max,
                     uint64_t *out) {
  uint64_t x;
  if (!s || etch__parse_u64(s, strlen(s), &x) != 0 || x < min || x > max)
    return -1;
  *out = x;
  return 0;
}

int etch__parse_i64(const char *s, int64_t min, int64_t max, int64_t *out) {
  if (!s) return -1;
  bool neg = *s == '-' && min < 0;
  uint64_t x;
  if (etch__parse_u64(s + neg, strlen(s + neg), &x) != 0) return -1;
  if (x > (uint64_t)INT64_MAX + neg) return -1;
  int64_t v = neg ? (int64_t)(0 - x) : (int64_t)x;
  if (v < min || v > max) return -1;
  *out = v;
  return 0;
}

/* "12", "1.5" then a unit from `units` (any case when `fold`), or none
 * when `bare` is not 0: the value times the unit, rounded down. */
typedef struct unit_name {
  const char *name;
  uint64_t mul;
} unit_name;

static int parse_scaled(const char *s, const unit_name *units, size_t nunits,
                        bool fold, uint64_t bare, uint64_t *out) {
  if (!s) return -1;
  size_t ni = strspn(s, "0123456789");
  uint64_t ip = 0;
  if (!ni || etch__parse_u64(s, ni, &ip) != 0) return -1;
  const char *p = s + ni;
  unsigned __int128 frac = 0, den = 1;
  if (*p == '.') {
    size_t nf = strspn(++p, "0123456789");
    if (!nf) return -1;
    for (size_t i = 0; i < nf; i++) {
      if (den < 1000000000000000000ull) { /* 18 digits are plenty */
        frac = frac * 10 + (unsigned)(p[i] - '0');
        den *= 10;
      }
    }
    p += nf;
  }
  uint64_t mul = 0;
  if (!*p) {
    mul = bare;
  } else {
    for (size_t i = 0; i < nunits && !mul; i++)
      if (fold ? !strcasecmp(p, units[i].name) : !strcmp(p, units[i].name))
        mul = units[i].mul;
  }
  if (!mul) return -1;
  unsigned __int128 v = (unsigned __int128)ip * mul + frac * mul / den;
  if (v > UINT64_MAX) return -1;
  *out = (uint64_t)v;
  return 0;
}

int etch__parse_duration_ns(const char *s, uint64_t unit_ns, uint64_t min,
                            uint64_t max, uint64_t *out) {
  static const unit_name units[] = {
      {"ns", 1},
      {"us", 1000},
      {"ms", 1000000},
      {"s", 1000000000ull},
      {"m", 60 * 1000000000ull},
      {"h", 3600 * 1000000000ull},
      {"d", 86400 * 1000000000ull},
      {"w", 7 * 86400 * 1000000000ull}};
  uint64_t x;
  if (parse_scaled(s, units, ETCH_ARRAY_SIZE(units), false, unit_ns, &x) ||
      x < min || x > max)
    return -1;
  *out = x;
  return 0;
}

int etch__parse_size(const char *s, uint64_t unit, uint64_t min, uint64_t max,
                     uint64_t *out) {
  static const unit_name units[] = {
      {"b", 1},           {"k", 1ull << 10},  {"kb", 1ull << 10},
      {"kib", 1ull << 10}, {"m", 1ull << 20},  {"mb", 1ull << 20},
      {"mib", 1ull << 20}, {"g", 1ull << 30},  {"gb", 1ull << 30},
      {"gib", 1ull << 30}, {"t", 1ull << 40},  {"tb", 1ull << 40},
      {"tib", 1ull << 40}};
  uint64_t x;
  if (parse_scaled(s, units, ETCH_ARRAY_SIZE(units), true, unit, &x) ||
      x < min || x > max)
    return -1;
  *out = x;
  return 0;
}

/* ---- directories --------------------------------------------------------- */

int etch__xdg_dir(const char *xdg_var, const char *home_dflt, const char *sub,
                  const char *what, char *buf, size_t n) {
  const char *d = etch__getenv(xdg_var);
  int k;
  if (d && d[0] == '/') {
    k = snprintf(buf, n, "%s/etch%s", d, sub);
  } else if ((d = etch__getenv("HOME")) && *d) {
    k = snprintf(buf, n, "%s/%s/etch%s", d, home_dflt, sub);
  } else {
    return etch__error(ETCH_EINVAL, "no %s: HOME is not set", what);
  }
  if (k < 0 || (size_t)k >= n)
    return etch__error(ETCH_EINVAL, "%s: path too long", what);
  return ETCH_OK;
}

int etch__mkdirs(const char *dir, const char *what) {
  char path[4096];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof path)
    return etch__error(ETCH_EINVAL, "%s: bad path", what);
  memcpy(path, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (path[i] != '/' && path[i] != '\0') continue;
    char c = path[i];
    path[i] = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
      return etch__error(ETCH_EIO, "%s %s: %s", what, path, strerror(errno));
    path[i] = c;
  }
  return ETCH_OK;
}

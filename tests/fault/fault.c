/*
 * fault.c - the sweep of fault.h.
 */
#define _GNU_SOURCE
#include "fault.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "etch/common.h"
#include "test.h"

/* Present under LeakSanitizer only. */
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

void fault_leak_check(void) {
  if (__lsan_do_recoverable_leak_check && __lsan_do_recoverable_leak_check())
    FAIL("LeakSanitizer found leaks (above)");
}

void fault_check_enomem(const char *what, int rc) {
  if (rc != ETCH_ENOMEM)
    FAIL("%s: status %d (%s: %s), not ETCH_ENOMEM", what, rc,
         etch_err_name(rc), etch_last_error());
  if (!strstr(etch_last_error(), "out of memory"))
    FAIL("%s: ETCH_ENOMEM with the message \"%s\"", what, etch_last_error());
}

char fault_now[256];

fault_result fault_sweep(const char *what, fault_op op, void *ctx) {
  fault_result r = {0, 0, 0};
  snprintf(fault_now, sizeof fault_now, "%s, counting", what);
  /* Once to count (and to let first uses allocate what they keep). */
  etch__fault_arm(0, false);
  int rc = op(ctx);
  r.allocs = etch__fault_count();
  etch__fault_disarm();
  if (rc != ETCH_OK)
    FAIL("%s without a fault: %s (%s)", what, etch_err_name(rc),
         etch_last_error());
  if (!r.allocs) FAIL("%s allocates nothing: nothing to sweep", what);
  size_t heap0 = fault_heap_in_use();
  /* ETCH_FAULT_ONLY=N: only the runs failing allocation N (to debug one). */
  const char *only = getenv("ETCH_FAULT_ONLY");
  uint64_t only_n = only ? strtoull(only, NULL, 10) : 0;
  for (int persistent = 0; persistent < 2; persistent++) {
    for (uint64_t n = 1; n <= r.allocs; n++) {
      if (only_n && n != only_n) continue;
      char *name = fault_now;
      snprintf(name, sizeof fault_now, "%s, allocation %llu%s failing", what,
               (unsigned long long)n, persistent ? " and on" : "");
      etch__error_clear();
      etch__fault_arm(n, persistent);
      rc = op(ctx);
      uint64_t fails = etch__fault_fails();
      etch__fault_disarm();
      r.runs++;
      if (rc != ETCH_OK) {
        if (!fails) FAIL("%s: failed with no allocation failed: %s", name,
                         etch_last_error());
        fault_check_enomem(name, rc);
        r.failed++;
      }
      size_t heap = fault_heap_in_use();
      if (heap != heap0) {
        fault_leak_check(); /* LeakSanitizer's report says where, if any */
        FAIL("%s: the heap holds %zd bytes more than before (a leak)", name,
             (ssize_t)(heap - heap0));
      }
      /* Lifted: the operation works again. */
      rc = op(ctx);
      if (rc != ETCH_OK)
        FAIL("%s, then without a fault: %s (%s)", name, etch_err_name(rc),
             etch_last_error());
      heap = fault_heap_in_use();
      if (heap != heap0)
        FAIL("%s, then without a fault: the heap holds %zd bytes more",
             name, (ssize_t)(heap - heap0));
    }
  }
  snprintf(fault_now, sizeof fault_now, "%s", what);
  fault_leak_check();
  return r;
}

void fault_printf(fault_str *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + (size_t)n + 1) cap *= 2;
    b->s = realloc(b->s, cap);
    if (!b->s) abort();
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void fault_str_free(fault_str *b) {
  free(b->s);
  memset(b, 0, sizeof *b);
}

/*
 * sysfault.c - the sweep of sysfault.h: a replacement for each call of
 * etch's table that counts it and fails the chosen one.
 */
#define _GNU_SOURCE
#include "sysfault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "etch/common.h"
#include "fault.h"
#include "test.h"

char sys_fault_now[256];

static int f_call = -1, f_err;
static uint64_t f_nth;
static bool f_persistent, f_short, f_short_done;
static uint64_t f_count[ETCH__SYS_CALLS], f_fails;

/* Counts a call of kind `i`: true when it is to fail (errno set). */
static bool hit(int i) {
  uint64_t k = __atomic_add_fetch(&f_count[i], 1, __ATOMIC_SEQ_CST);
  if (!f_nth || (f_call >= 0 && f_call != i)) return false;
  if (f_call < 0) {
    uint64_t all = 0;
    for (int j = 0; j < ETCH__SYS_CALLS; j++)
      all += __atomic_load_n(&f_count[j], __ATOMIC_SEQ_CST);
    k = all;
  }
  if (k < f_nth || (k > f_nth && !f_persistent)) return false;
  __atomic_add_fetch(&f_fails, 1, __ATOMIC_SEQ_CST);
  errno = f_err;
  return true;
}

enum { S_OPEN, S_READ, S_PREAD, S_WRITE, S_PWRITE, S_FTRUNCATE, S_FSYNC,
       S_MMAP, S_RENAME, S_MKDIR, S_UNLINK };

static int x_open(const char *p, int fl, mode_t m) {
  return hit(S_OPEN) ? -1 : etch__sys_libc.open(p, fl, m);
}
static ssize_t x_read(int fd, void *b, size_t n) {
  return hit(S_READ) ? -1 : etch__sys_libc.read(fd, b, n);
}
static ssize_t x_pread(int fd, void *b, size_t n, off_t at) {
  return hit(S_PREAD) ? -1 : etch__sys_libc.pread(fd, b, n, at);
}
/* A full disk as it comes: the write that fails first takes part of what
 * it is given (sys_fault_short), the next one fails. */
static ssize_t x_write(int fd, const void *b, size_t n) {
  if (f_short_done) return -1; /* errno as hit() set it */
  if (!hit(S_WRITE)) return etch__sys_libc.write(fd, b, n);
  if (!f_short || n < 2) return -1;
  int e = errno;
  f_short_done = true;
  ssize_t w = etch__sys_libc.write(fd, b, n / 2);
  errno = e;
  return w;
}
static ssize_t x_pwrite(int fd, const void *b, size_t n, off_t at) {
  return hit(S_PWRITE) ? -1 : etch__sys_libc.pwrite(fd, b, n, at);
}
static int x_ftruncate(int fd, off_t len) {
  return hit(S_FTRUNCATE) ? -1 : etch__sys_libc.ftruncate(fd, len);
}
static int x_fsync(int fd) {
  return hit(S_FSYNC) ? -1 : etch__sys_libc.fsync(fd);
}
static void *x_mmap(void *a, size_t n, int prot, int fl, int fd, off_t at) {
  return hit(S_MMAP) ? MAP_FAILED : etch__sys_libc.mmap(a, n, prot, fl, fd, at);
}
static int x_rename(const char *a, const char *b) {
  return hit(S_RENAME) ? -1 : etch__sys_libc.rename(a, b);
}
static int x_mkdir(const char *p, mode_t m) {
  return hit(S_MKDIR) ? -1 : etch__sys_libc.mkdir(p, m);
}
static int x_unlink(const char *p) {
  return hit(S_UNLINK) ? -1 : etch__sys_libc.unlink(p);
}

static const etch__sys_calls kCounting = {
    .open = x_open, .read = x_read, .pread = x_pread, .write = x_write,
    .pwrite = x_pwrite, .ftruncate = x_ftruncate, .fsync = x_fsync,
    .mmap = x_mmap, .rename = x_rename, .mkdir = x_mkdir, .unlink = x_unlink,
};

void sys_fault_arm(int call, uint64_t nth, int err, bool persistent) {
  /* The indexes above are the table's order (sys.c names them). */
  if (strcmp(etch__sys_name(S_UNLINK), "unlink") ||
      strcmp(etch__sys_name(S_WRITE), "write"))
    FAIL("sysfault.c's indexes are not the table's order");
  for (int i = 0; i < ETCH__SYS_CALLS; i++)
    __atomic_store_n(&f_count[i], 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&f_fails, 0, __ATOMIC_SEQ_CST);
  f_call = call;
  f_nth = nth;
  f_err = err;
  f_persistent = persistent;
  f_short = f_short_done = false;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  etch__sys_table = kCounting;
}

void sys_fault_short(void) { f_short = true; }

void sys_fault_disarm(void) {
  etch__sys_reset();
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

uint64_t sys_fault_count(int call) {
  if (call >= 0) return __atomic_load_n(&f_count[call], __ATOMIC_SEQ_CST);
  uint64_t all = 0;
  for (int i = 0; i < ETCH__SYS_CALLS; i++) all += sys_fault_count(i);
  return all;
}

uint64_t sys_fault_fails(void) {
  return __atomic_load_n(&f_fails, __ATOMIC_SEQ_CST);
}

sys_fault_result sys_fault_sweep(const char *what, sys_fault_op op, void *ctx,
                                 int err) {
  return sys_fault_sweep_as(what, op, ctx, err, false);
}

sys_fault_result sys_fault_sweep_as(const char *what, sys_fault_op op,
                                    void *ctx, int err, bool short_writes) {
  sys_fault_result r = {0, 0, 0};
  snprintf(sys_fault_now, sizeof sys_fault_now, "%s, counting", what);
  sys_fault_arm(-1, 0, 0, false);
  int rc = op(ctx);
  uint64_t counts[ETCH__SYS_CALLS];
  for (int i = 0; i < ETCH__SYS_CALLS; i++) counts[i] = sys_fault_count(i);
  r.calls = sys_fault_count(-1);
  sys_fault_disarm();
  if (rc != ETCH_OK)
    FAIL("%s without a fault: %s (%s)", what, etch_err_name(rc),
         etch_last_error());
  if (!r.calls) FAIL("%s makes no system call through etch's table", what);
  size_t heap0 = fault_heap_in_use();
  for (int i = 0; i < ETCH__SYS_CALLS; i++) {
    for (uint64_t n = 1; n <= counts[i]; n++) {
      snprintf(sys_fault_now, sizeof sys_fault_now,
               "%s, %s %llu of %llu failing (%s)", what, etch__sys_name(i),
               (unsigned long long)n, (unsigned long long)counts[i],
               strerrorname_np(err));
      etch__error_clear();
      sys_fault_arm(i, n, err, false);
      if (short_writes) sys_fault_short();
      rc = op(ctx);
      uint64_t fails = sys_fault_fails();
      sys_fault_disarm();
      r.runs++;
      if (rc != ETCH_OK) {
        if (!fails)
          FAIL("%s: failed with no call failed: %s", sys_fault_now,
               etch_last_error());
        if (!strstr(etch_last_error(), strerror(err)))
          FAIL("%s: %s with the message \"%s\", which does not say \"%s\"",
               sys_fault_now, etch_err_name(rc), etch_last_error(),
               strerror(err));
        r.failed++;
      }
      size_t heap = fault_heap_in_use();
      if (heap != heap0) {
        fault_leak_check();
        FAIL("%s: the heap holds %zd bytes more than before (a leak)",
             sys_fault_now, (ssize_t)(heap - heap0));
      }
      rc = op(ctx);
      if (rc != ETCH_OK)
        FAIL("%s, then without a fault: %s (%s)", sys_fault_now,
             etch_err_name(rc), etch_last_error());
    }
  }
  snprintf(sys_fault_now, sizeof sys_fault_now, "%s", what);
  fault_leak_check();
  return r;
}

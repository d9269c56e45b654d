/*
 * sysfault.h - the system-call failure tests' sweep (base/sys.h): an
 * operation run once to count the calls it makes through etch's table,
 * then, for each kind of call and each N from 1 to that kind's count,
 * once with the Nth call of that kind failing with a chosen errno.
 *
 * The operation checks what it made (the files it left, what it
 * returned); the sweep checks the rest: a failure returns a status other
 * than ETCH_OK whose message names the errno's text (strerror), or the
 * operation says the failure is one it goes without (sys_fault_tolerated);
 * the heap holds what it held before (no leak); the same operation, run
 * again with no fault, succeeds.
 */
#ifndef ETCH_TESTS_SYSFAULT_H
#define ETCH_TESTS_SYSFAULT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/sys.h"

typedef int (*sys_fault_op)(void *ctx);

/* From now, counts the table's calls; the nth call of kind `call` (an
 * index of etch__sys_table; -1: any kind) fails with `err` (and with
 * `persistent` every one after it of that kind); nth 0 only counts. */
void sys_fault_arm(int call, uint64_t nth, int err, bool persistent);
/* Once armed: the write that is to fail writes half of what it is given
 * first and returns that, and the next write fails (a disk that fills up
 * in the middle of a write). */
void sys_fault_short(void);
/* The table back to the C library's. */
void sys_fault_disarm(void);
/* Calls of kind `call` counted, and failed, since sys_fault_arm. */
uint64_t sys_fault_count(int call);
uint64_t sys_fault_fails(void);

typedef struct sys_fault_result {
  uint64_t calls; /* made by one run without a fault */
  uint64_t runs;  /* with a fault */
  uint64_t failed; /* of those, runs that returned an error */
} sys_fault_result;

/* Sweeps `op` as above with `err`; `what` names it in failures. */
sys_fault_result sys_fault_sweep(const char *what, sys_fault_op op, void *ctx,
                                 int err);
/* The same, with sys_fault_short in each run. */
sys_fault_result sys_fault_sweep_as(const char *what, sys_fault_op op,
                                    void *ctx, int err, bool short_writes);
/* The run in progress, for messages: "what, write 3 failing (ENOSPC)". */
extern char sys_fault_now[256];

#endif /* ETCH_TESTS_SYSFAULT_H */

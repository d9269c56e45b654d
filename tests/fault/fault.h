/*
 * fault.h - the allocation-failure tests' sweep: an operation run once to
 * count the allocations it makes through etch's wrappers, then once for
 * every N from 1 to that count with the Nth failing (base.h's fault
 * simulation), alone and then with every one after it failing too.
 *
 * The operation checks its own result: whatever it returns other than
 * ETCH_OK must be ETCH_ENOMEM with "out of memory" in etch_last_error();
 * on ETCH_OK it has compared what it made with what it should make. After
 * each run the heap holds what it held before (no leak), and the same
 * operation, run again with no fault, succeeds.
 */
#ifndef ETCH_TESTS_FAULT_H
#define ETCH_TESTS_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int (*fault_op)(void *ctx);

typedef struct fault_result {
  uint64_t allocs;    /* made by one run without a fault */
  uint64_t runs;      /* with a fault */
  uint64_t failed;    /* of those, runs that returned ETCH_ENOMEM */
} fault_result;

/* Sweeps `op` as above; `what` names it in failures. */
fault_result fault_sweep(const char *what, fault_op op, void *ctx);
/* The run in progress, for messages: "what, allocation N failing". */
extern char fault_now[256];
/* Bytes the heap holds now (the C library's, or the sanitizer's). */
size_t fault_heap_in_use(void);
/* Under LeakSanitizer: a leak check now, failing the test on a leak. */
void fault_leak_check(void);
/* The status a failed operation must return, with its message. */
void fault_check_enomem(const char *what, int rc);

/* A growing string (the tests' own, on malloc: not counted). */
typedef struct fault_str {
  char *s;
  size_t len, cap;
} fault_str;
void fault_printf(fault_str *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void fault_str_free(fault_str *b);

#endif /* ETCH_TESTS_FAULT_H */

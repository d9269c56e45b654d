/* unwind_chain.h - functions built with -O2 -fomit-frame-pointer that
 * call each other, the innermost calling back into the test. */
#ifndef ETCH_TEST_UNWIND_CHAIN_H
#define ETCH_TEST_UNWIND_CHAIN_H

#include <stdint.h>

typedef int (*chain_fn)(void *ctx, int depth);

int chain_a(chain_fn fn, void *ctx, int x);
int chain_b(chain_fn fn, void *ctx, int x);
int chain_c(chain_fn fn, void *ctx, int x);
int chain_big(chain_fn fn, void *ctx, int x);

#endif

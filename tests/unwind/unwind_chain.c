/* unwind_chain.c - built with -O2 -fomit-frame-pointer (CMakeLists.txt):
 * each function keeps some of its own stack and does work after its call,
 * so that the call is no tail call and its frame is there. */
#include "unwind_chain.h"

#define KEEP(v) __asm__ volatile("" : : "r"(v) : "memory")

__attribute__((noinline, visibility("default"))) int chain_c(chain_fn fn, void *ctx, int x) {
  volatile int pad[7] = {x, x + 1, x + 2, x + 3, x + 4, x + 5, x + 6};
  int r = fn(ctx, 3);
  KEEP(pad);
  return r + pad[x & 3];
}

__attribute__((noinline, visibility("default"))) int chain_b(chain_fn fn, void *ctx, int x) {
  volatile char pad[40];
  for (int i = 0; i < 40; i++) pad[i] = (char)(i + x);
  int r = chain_c(fn, ctx, x + 1);
  return r + pad[x & 31];
}

__attribute__((noinline, visibility("default"))) int chain_a(chain_fn fn, void *ctx, int x) {
  int r = chain_b(fn, ctx, x * 3);
  KEEP(r);
  return r + 1;
}

/* A frame of more than 16 KiB: its rule does not fit the cache's 16-bit
 * form and goes to the unwinder's wide table. */
__attribute__((noinline, visibility("default"))) int chain_big(chain_fn fn,
                                                               void *ctx,
                                                               int x) {
  volatile char big[20000];
  big[0] = (char)x;
  big[sizeof big - 1] = (char)(x + 1);
  int r = fn(ctx, 4);
  return r + big[x & 1 ? 0 : sizeof big - 1];
}

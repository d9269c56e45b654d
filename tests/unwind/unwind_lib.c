/* unwind_lib.c - a library loaded with dlopen after the unwinder was
 * made, built with -O2 -fomit-frame-pointer: its frames are unwound from
 * the .eh_frame of an object the unwinder learns of late. */
typedef int (*lib_fn)(void *ctx, int depth);

int lib_outer(lib_fn fn, void *ctx, int x);

__attribute__((noinline)) static int lib_inner(lib_fn fn, void *ctx, int x) {
  volatile long pad[5] = {x, x, x, x, x};
  int r = fn(ctx, 2);
  return r + (int)pad[x & 3];
}

__attribute__((visibility("default"))) int lib_outer(lib_fn fn, void *ctx,
                                                     int x) {
  int r = lib_inner(fn, ctx, x + 7);
  __asm__ volatile("" : : "r"(r) : "memory");
  return r * 2;
}

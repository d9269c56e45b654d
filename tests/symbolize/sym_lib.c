/* sym_lib.c - a library sym_prog links: an allocation of 103 bytes. */
#include "sym_lib.h"

__attribute__((visibility("default"), noinline)) void sym_lib_alloc(void) {
  sym_take(103);
  __asm__ volatile("" ::: "memory");
}

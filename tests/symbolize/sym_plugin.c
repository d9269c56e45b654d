/* sym_plugin.c - a library sym_prog dlopens: an allocation of 104 bytes. */
#include "sym_lib.h"

__attribute__((visibility("default"), noinline)) void sym_plugin_alloc(void) {
  sym_take(104);
  __asm__ volatile("" ::: "memory");
}

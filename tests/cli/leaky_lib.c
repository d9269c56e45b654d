/* leaky_lib.c - libleaky_lib.so, linked by leaky_sites: a leak site in a
 * shared library. */
#include <stdlib.h>

void *lib_leak(int i);

__attribute__((noinline)) void *lib_leak(int i) {
  void *p = malloc(44);
  __asm__ volatile("" ::: "memory");
  (void)i;
  return p;
}

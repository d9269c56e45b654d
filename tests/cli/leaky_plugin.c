/* leaky_plugin.c - leaky_plugin.so, dlopen'ed by leaky_sites: a leak site
 * in a library loaded after the program started. */
#include <stdlib.h>

void *plugin_leak(void);

__attribute__((noinline)) void *plugin_leak(void) {
  void *p = malloc(55);
  __asm__ volatile("" ::: "memory");
  return p;
}

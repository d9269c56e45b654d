/*
 * sym_prog.c - a program whose allocations carry call stacks through
 * etch/memory.h, from known functions: sym_static (not exported), then
 * sym_exported (in the dynamic symbol table), sym_lib_alloc (in a library
 * it links), sym_plugin_alloc (in a library it dlopens late, argv[1]).
 * Each allocation's size says where it came from (101, 102, 103, 104).
 * Built as sym_prog and, with SYM_VARIANT, as sym_prog_v2 (the same code
 * otherwise: another build id).
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <etch/etch.h>

#include "sym_lib.h"

#ifdef SYM_VARIANT
const char sym_variant[] = "two";
#else
const char sym_variant[] = "one";
#endif

/* The blocks, never freed and still reachable (LeakSanitizer). */
void *sym_kept[8];
unsigned sym_nkept;

/* The allocation of `size` with the stack of its caller. */
__attribute__((visibility("default"), noinline)) void sym_take(size_t size) {
  void *bt[16];
  uintptr_t pcs[16];
  int n = backtrace(bt, 16);
  for (int i = 0; i < n; i++) pcs[i] = (uintptr_t)bt[i];
  void *p = malloc(size);
  sym_kept[sym_nkept++ % 8] = p;
  etch_mem_alloc_stack(p, size, NULL, pcs, (uint32_t)n);
  __asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void sym_static(void) {
  sym_take(101);
  __asm__ volatile("" ::: "memory");
}

__attribute__((visibility("default"), noinline)) void sym_exported(void) {
  sym_take(102);
  __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  etch_init();
  sym_static();
  sym_exported();
  sym_lib_alloc();
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  void (*plugin)(void) = (void (*)(void))dlsym(h, "sym_plugin_alloc");
  if (!plugin) return 1;
  plugin();
  printf("%s\n", sym_variant);
  return 0;
}

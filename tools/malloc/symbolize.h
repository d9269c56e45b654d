/*
 * symbolize.h - libetch_malloc.so's symbolizer (etch_mem_set_symbolizer):
 * a return address of this process to its function, file and line.
 */
#ifndef ETCH_MALLOC_SYMBOLIZE_H
#define ETCH_MALLOC_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>

#include <etch/etch.h>

bool etch_malloc_symbolize(void *ctx, uintptr_t pc, etch_mem_symbol *out);

#endif

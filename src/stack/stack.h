/*
 * stack.h - call stacks in the trace (libetch): a process-wide table of the
 * stacks the program reported, their frames and the loaded objects
 * (mappings, with build ids) those frames are in, and what a writer puts on
 * its sequence for them.
 *
 * A stack arrives as return addresses, innermost first (libetch_malloc.so
 * unwinds them; etch_mem_alloc_stack takes them). It is interned here once
 * per process: ids for stacks, frames and mappings are the process's, and a
 * sequence (a writer) writes a stack's InternedData (callstacks, frames,
 * mappings, build ids, paths: Perfetto's profile_common.proto messages)
 * the first time it refers to it after an incremental-state reset, in a
 * packet of its own before the event that carries `callstack_iid`. Names
 * are never looked up in the program: etch record names the frames from
 * the binaries once the trace is written (etch symbolize, src/symbolize),
 * as ModuleSymbols packets, which trace_processor applies to every frame
 * of the mapping with that build id, and so do etch's tools. Only a
 * symbolizer the program gave itself (etch_mem_set_symbolizer) is called
 * here, when the session stops.
 *
 * Locking: one short lock around the tables. dl_iterate_phdr (which takes
 * the loader's lock, held by a thread in dlopen while it allocates) is
 * never called with it held.
 */
#ifndef ETCH_STACK_STACK_H
#define ETCH_STACK_STACK_H

#include <stdint.h>

#include "sdk/core/sdk.h"

#define ETCH_STACK_MAX 64 /* frames kept of a stack, innermost first */

/* The id (1..) of the stack of `n` return addresses, innermost first;
 * 0 when there is none (n 0, or out of memory). */
uint32_t etch__stack_intern(const uintptr_t *pcs, uint32_t n);

/* Writes what `w`'s sequence lacks of stack `id` (its frames, their
 * mappings, the stack) in one packet; false if that packet was lost. */
bool etch__stack_put_interned(etch_writer *w, uint32_t id);

ETCH_INLINE bool etch__stack_seen(const etch_writer *w, uint32_t id) {
  return etch__bitset_has(&w->seen_stacks, id);
}

/* fork(): the tables' lock is held across it (memory.c's atfork
 * handlers), so a child never inherits it held. */
void etch__stack_fork_prepare(void);
void etch__stack_fork_after(void);

/* The names the program's own symbolizer (etch_mem_set_symbolizer) gives
 * the frames seen so far, as ModuleSymbols packets on `w` (a session
 * stops); nothing without one. */
void etch__stack_put_symbols(etch_writer *w);

#endif /* ETCH_STACK_STACK_H */

/*
 * etch/memory.h - memory tracing: allocations and frees as events, live
 * bytes per tag as counter tracks (included by etch/etch.h).
 *
 * A custom allocator reports what it does with etch_mem_alloc / _free /
 * _realloc; an unmodified program is traced by preloading
 * libetch_malloc.so (LD_PRELOAD, or `etch record --malloc`), which reports
 * malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign
 * (and so C++ new and delete). Allocations carry the thread's current tag,
 * set for a scope with ETCH_MEM_SCOPE; `etch leaks` lists what a trace
 * allocated and never freed.
 *
 * Recorded when a session takes the category "memory" (the default "*"
 * does). In the trace: an instant named after the tag with args ptr and
 * size for an allocation, an instant "free" with arg ptr for a free, both
 * in category "memory" on the thread's track; and a counter track "Live
 * bytes: TAG" per tag (bytes), written every 256 changes a thread makes.
 * An allocation reported with its call stack (etch_mem_alloc_stack, which
 * libetch_malloc.so uses) carries it as TrackEvent.callstack_iid, the
 * stack interned per sequence, and the frames' names are written when the
 * session stops (docs/memory.md, "Call stacks").
 * etch's own allocations are never reported.
 */
#ifndef ETCH_MEMORY_H
#define ETCH_MEMORY_H

#include <stddef.h>

#include <etch/etch.h>

#ifdef __cplusplus
extern "C" {
#endif

ETCH_API extern etch_category etch_cat_etch_memory; /* "memory" */

/* A tag: static storage, one per name. Fields after `name` are etch's. */
typedef struct etch_mem_tag {
  const char *name;
  etch_site site; /* allocations: an instant named `name` */
  uint32_t index; /* 1.. once registered (its live-bytes counter's) */
} etch_mem_tag;

/* Allocations outside any ETCH_MEM_SCOPE carry this tag ("untagged"). */
ETCH_API extern etch_mem_tag etch_memtag_untagged;

/* Makes `tag` the thread's current one; returns the one it replaces. */
ETCH_API etch_mem_tag *etch_mem_scope_push(etch_mem_tag *tag);
ETCH_API void etch_mem_scope_pop(etch_mem_tag *previous);
ETCH_API etch_mem_tag *etch_mem_current_tag(void);

/*
 * What an allocator did. NULL pointers are ignored (a failed allocation,
 * free(NULL)); a realloc to a new block reports the old one freed.
 *
 * Only the addresses matter: etch never reads or writes the memory, and
 * says so to the compiler (gcc's access attribute), so reporting a block
 * not yet written is no "maybe uninitialized" use. The old block of a
 * realloc is gone when the hook runs: it is given as the address taken
 * before the realloc, an integer (passing the pointer itself after realloc
 * is a use after free to gcc -Wall):
 *
 *   uintptr_t was = (uintptr_t)old;
 *   void *p = realloc(old, n);
 *   etch_mem_realloc(was, p, n);
 *
 * Report a free before the block goes (etch_mem_free(p); free(p)).
 */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#define ETCH__ADDR_ONLY(i) __attribute__((access(none, i)))
#else
#define ETCH__ADDR_ONLY(i)
#endif
ETCH_API ETCH__ADDR_ONLY(1) void etch_mem_alloc(const void *ptr, size_t size);
ETCH_API ETCH__ADDR_ONLY(1) void etch_mem_alloc_tagged(const void *ptr,
                                                       size_t size,
                                                       etch_mem_tag *tag);
ETCH_API ETCH__ADDR_ONLY(1) void etch_mem_free(const void *ptr);
ETCH_API ETCH__ADDR_ONLY(2) void etch_mem_realloc(uintptr_t old,
                                                  const void *ptr,
                                                  size_t size);

/*
 * Call stacks. etch_mem_alloc_stack is etch_mem_alloc_tagged with the
 * allocation's call stack: `pcs` holds `n` return addresses, innermost
 * first (the allocator's caller first; up to 64 are kept), as
 * backtrace(3) or libunwind's unw_backtrace give them. libetch_malloc.so
 * passes the stack it unwinds for every allocation. The trace carries the
 * stack as Perfetto's interned callstacks (frames as addresses in mappings
 * with build ids); nothing is resolved while the program runs.
 *
 * The frames are not named in the program: `etch record` names them from
 * the binaries when the program ends, and `etch symbolize` names those of
 * a trace written without it (symbol tables and DWARF line tables; a
 * frame nothing names is MODULE+0xOFFSET), as ModuleSymbols in the trace,
 * where trace_processor and etch's tools find them. An allocator may give
 * a symbolizer of its own here: when the session stops, the frames it
 * names are written with its names (which etch symbolize then keeps). A
 * symbolizer fills `out` for the return address `pc` (the call is the
 * instruction before it) and returns true; its strings need to last until
 * its next call. It runs on the thread that stops the session, never
 * while an allocation is traced.
 */
typedef struct etch_mem_symbol {
  const char *function;
  const char *file; /* NULL: unknown */
  uint32_t line;    /* 0: unknown */
} etch_mem_symbol;
typedef bool (*etch_mem_symbolizer)(void *ctx, uintptr_t pc,
                                    etch_mem_symbol *out);
ETCH_API ETCH__ADDR_ONLY(1) uint32_t etch_mem_alloc_stack(const void *ptr,
                                                          size_t size,
                                                          etch_mem_tag *tag,
                                                          const uintptr_t *pcs,
                                                          uint32_t n);
ETCH_API void etch_mem_set_symbolizer(etch_mem_symbolizer fn, void *ctx);
/* etch_mem_alloc_stack returns the stack's id (0 when the allocation was
 * not reported, or has no stack), valid for the life of the process;
 * etch_mem_alloc_stack_id reports an allocation with a stack so
 * identified, the frames neither hashed nor looked up again. For an
 * allocator that knows an allocation has the stack of an earlier one
 * (libetch_malloc.so: when the stack words its last walk from the same
 * place read are unchanged). An id etch_mem_alloc_stack did not return
 * reports the allocation without a stack. */
ETCH_API ETCH__ADDR_ONLY(1) void etch_mem_alloc_stack_id(const void *ptr,
                                                         size_t size,
                                                         etch_mem_tag *tag,
                                                         uint32_t stack_id);

static inline void etch__mem_scope_end(etch_mem_tag **previous) {
  etch_mem_scope_pop(*previous);
}

#ifndef ETCH_COMPILE_OUT

#define ETCH_MEM_TAG_DEFINE(var, name)                                      \
  etch_mem_tag etch_memtag_##var = {                                        \
      name, ETCH__SITE_INIT(etch_cat_etch_memory, name, ETCH_TYPE_INSTANT), \
      0}
#define ETCH_MEM_TAG_DECLARE(var) extern etch_mem_tag etch_memtag_##var
#define ETCH_MEM_TAG(var) (&etch_memtag_##var)
/* The tag of the allocations made from here to the end of the block. */
#define ETCH_MEM_SCOPE(var)                                          \
  etch_mem_tag *ETCH__UNIQ(etch__memscope_)                          \
      __attribute__((cleanup(etch__mem_scope_end), unused)) =       \
          etch_mem_scope_push(&etch_memtag_##var)

#else /* ETCH_COMPILE_OUT */

#define ETCH_MEM_TAG_DEFINE(var, name) typedef int etch__memtag_out_##var
#define ETCH_MEM_TAG_DECLARE(var) typedef int etch__memtag_out_decl_##var
#define ETCH_MEM_TAG(var) ((etch_mem_tag *)0)
#define ETCH_MEM_SCOPE(var) typedef int ETCH__UNIQ(etch__memscope_out_)

#endif /* ETCH_COMPILE_OUT */

#ifdef __cplusplus
}
#endif

#endif /* ETCH_MEMORY_H */

/*
 * unwind.h - call stacks of x86-64 code built without frame pointers,
 * unwound with the loaded objects' .eh_frame.
 *
 * A stack is unwound from three registers (ip, sp, bp) through a reader of
 * 8-byte words: the live memory of this process (a stack being unwound
 * where it runs) or a copy of the top of a stack (a perf_event_open
 * sample's, unwound later). For each return address the rule that gives the
 * caller's frame (where the canonical frame address is, where the return
 * address and the saved bp lie relative to it) is found once in the
 * object's .eh_frame_hdr / .eh_frame and kept in a cache by address; after
 * that a frame costs a cache lookup and two reads. Objects loaded after the
 * unwinder was made (dlopen) are found when an address falls outside every
 * known one.
 *
 * The rules covered are those compilers emit for ordinary x86-64 code: the
 * frame address as sp or bp plus an offset, the return address and bp
 * saved at offsets from it. A frame whose rule is anything else (an
 * expression, a signal frame, a stack realigned through another register)
 * ends the stack, as does an address in no object or a read that fails; a
 * frame with no .eh_frame entry is walked through bp when bp looks like a
 * frame pointer.
 *
 * Thread safety: etch__unwind may be called from any number of threads at
 * once; cache hits take no lock, misses one mutex.
 */
#ifndef ETCH_UNWIND_UNWIND_H
#define ETCH_UNWIND_UNWIND_H

#include <stdbool.h>
#include <stdint.h>

typedef struct etch_unwinder etch_unwinder;

typedef struct etch_unwind_regs {
  uint64_t ip, sp, bp;
} etch_unwind_regs;

/* Reads the 8-byte word at addr into *out; false when it cannot (outside
 * the copy, unmapped). */
typedef bool (*etch_unwind_read_fn)(void *ctx, uint64_t addr, uint64_t *out);

typedef struct etch_unwind_stats {
  uint64_t misses;  /* addresses whose rule was not in the cache */
  uint64_t no_rule; /* of those, the ones with no rule a walk can use */
  uint32_t objects; /* loaded objects known */
} etch_unwind_stats;

/* A new unwinder of this process's loaded objects. ETCH_EUNSUPPORTED on
 * an architecture other than x86-64. */
int etch__unwinder_new(etch_unwinder **out);
void etch__unwinder_free(etch_unwinder *u);

/* Return addresses into pcs, innermost first: pcs[0] is r->ip itself.
 * Returns how many (at most max). */
uint32_t etch__unwind(etch_unwinder *u, const etch_unwind_regs *r,
                      etch_unwind_read_fn read, void *ctx, uint64_t *pcs,
                      uint32_t max);

/* A stack's bytes: `len` bytes at `data` that were (a copy) or are (the
 * live stack) at address `addr`. etch__unwind_read_mem reads a word that
 * lies wholly inside them; pass the etch_unwind_mem as ctx. */
typedef struct etch_unwind_mem {
  uint64_t addr;
  const uint8_t *data;
  uint64_t len;
} etch_unwind_mem;

bool etch__unwind_read_mem(void *ctx, uint64_t addr, uint64_t *out);

/*
 * A walk remembered. A walk is a function of the registers it starts from,
 * the span of stack it may read and the words it reads there (each
 * address's rule is fixed): when those are all as they were, its frames
 * are the same. etch__unwind_memo_walk is etch__unwind over a live stack
 * that also keeps in `memo` the words it read (a walk of at most
 * ETCH_UNWIND_MEMO_READS reads; a longer one leaves the memo empty);
 * etch__unwind_memo_same says whether a walk from `r` over `m` would give
 * the memo's frames again, reading only those words (a few instructions a
 * frame instead of a walk's rule lookups). The memo does not keep the
 * frames: the caller keeps what it made of them in `user` (libetch_malloc:
 * the stack's interned id, so that an allocation made again from the same
 * place neither walks nor hashes its stack).
 */
#define ETCH_UNWIND_MEMO_READS 64 /* the walk's reads a bitmask can mark */
typedef struct etch_unwind_memo {
  uint64_t ip, sp, bp, lo, len; /* the registers and the span; len 0: empty */
  uint32_t max, nreads;
  bool bp_used; /* the walk used bp as the registers gave it */
  uint64_t user; /* the caller's, for the walk it remembers */
  struct {
    uint64_t off, val; /* the word at lo + off was val */
  } read[ETCH_UNWIND_MEMO_READS];
} etch_unwind_memo;

uint32_t etch__unwind_memo_walk(etch_unwinder *u, const etch_unwind_regs *r,
                                const etch_unwind_mem *m,
                                etch_unwind_memo *memo, uint64_t *pcs,
                                uint32_t max);

/* Inline: it is the whole cost of an allocation made again from the same
 * place. The stack is read as the walk reads it (no bounds: each address
 * was inside the same span when the walk read it). */
__attribute__((no_sanitize_address)) static inline bool
etch__unwind_memo_same(const etch_unwind_memo *memo,
                       const etch_unwind_regs *r, const etch_unwind_mem *m,
                       uint32_t max) {
  if (memo->ip != r->ip || memo->sp != r->sp ||
      (memo->bp_used && memo->bp != r->bp) ||
      memo->lo != m->addr || memo->len != m->len || memo->max != max ||
      !m->len)
    return false;
  for (uint32_t i = 0; i < memo->nreads; i++) {
    uint64_t v;
    __builtin_memcpy(&v, m->data + memo->read[i].off, 8);
    if (v != memo->read[i].val) return false;
  }
  return true;
}

etch_unwind_stats etch__unwinder_stats(etch_unwinder *u);

/* fork(): the lock that a cache miss takes, held across it (before, and
 * after in the parent and in the child), so that the child's unwinder is
 * never left locked by a thread the child does not have. */
void etch__unwinder_fork_prepare(etch_unwinder *u);
void etch__unwinder_fork_after(etch_unwinder *u);

#endif /* ETCH_UNWIND_UNWIND_H */

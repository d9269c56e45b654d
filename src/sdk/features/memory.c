/*
 * memory.c - memory tracing (etch/memory.h): allocation and free events,
 * live bytes per tag.
 *
 * While a session records "memory", every reported allocation goes into a
 * map of live blocks (address -> size and tag), split in 64 shards each
 * with its own short lock (a block's shard by the megabyte it is in), so
 * that a free finds its size and tag: the tag's live bytes go down by what
 * its allocation added, and a free of a block
 * allocated before recording began (or never reported) writes nothing. A
 * thread sums its changes to each tag's live bytes locally, adds them to
 * the process's totals and writes the tags' counters every 256 of its
 * changes, when it exits and when it stops a session (a counter is the sum
 * of what every thread has added so far).
 *
 * Recursion: etch allocates while it records (a writer's buffers, the map
 * growing). A thread-local flag is set around each report; a report made
 * while it is set (etch's own allocation, through libetch_malloc.so) is not
 * one.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/map.h"
#include "etch/memory.h"
#include "sdk/core/sdk.h"
#include "stack/stack.h"

ETCH_CATEGORY_DEFINE(etch_memory, "memory",
                     "allocations and frees (etch/memory.h)", "");

etch_mem_tag etch_memtag_untagged = {
    "untagged",
    ETCH__SITE_INIT(etch_cat_etch_memory, "untagged", ETCH_TYPE_INSTANT), 0};

/* ---- tags ------------------------------------------------------------------ */

#define MAX_TAGS 256 /* more share the last index's counter */
#define COUNTER_EVERY 256

static pthread_mutex_t tag_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t ntags;
static int64_t live[MAX_TAGS + 1];   /* atomic; by tag index */
static etch_site live_site[MAX_TAGS + 1];
static uint32_t live_lock[MAX_TAGS + 1]; /* orders counter values */
static uint64_t live_ts[MAX_TAGS + 1];   /* the last one's time */
static char live_name[MAX_TAGS + 1][80];

static __thread etch_mem_tag *cur_tag __attribute__((tls_model("initial-exec")));
#define LOCAL_TAGS 32 /* tags whose live bytes a thread sums locally */

static __thread struct {
  bool in;            /* inside a report: allocations are etch's */
  uint32_t countdown; /* changes until this thread writes counters */
  uint64_t dirty[(MAX_TAGS + 64) / 64];
  int64_t delta[LOCAL_TAGS + 1]; /* not yet added to live[] */
} mt __attribute__((tls_model("initial-exec")));

/* Registers a tag on its first use: its index. */
static ETCH_NOINLINE uint32_t tag_register(etch_mem_tag *t) {
  uint32_t i;
  pthread_mutex_lock(&tag_lock);
  i = t->index;
  if (!i) {
    /* The last index is shared by the tags past the others. */
    i = ntags < MAX_TAGS - 1 ? ++ntags : MAX_TAGS;
    /* The counter's track in bytes, made before its site makes one
     * without a unit (it finds this one by name); the shared one once. */
    if (!live_site[i].name) {
      if (i < MAX_TAGS)
        snprintf(live_name[i], sizeof live_name[i], "Live bytes: %s",
                 t->name ? t->name : "?");
      else
        snprintf(live_name[i], sizeof live_name[i], "Live bytes: (other tags)");
      etch_counter_track_new(live_name[i], ETCH_UNIT_SIZE_BYTES, NULL, NULL);
      live_site[i] = (etch_site)ETCH__SITE_INIT(
          etch_cat_etch_memory, live_name[i], ETCH_TYPE_COUNTER);
    }
    __atomic_store_n(&t->index, i, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&tag_lock);
  return i;
}

/* The tag's index (registering it on first use). */
ETCH_INLINE uint32_t tag_index(etch_mem_tag *t) {
  uint32_t i = __atomic_load_n(&t->index, __ATOMIC_ACQUIRE);
  return ETCH_LIKELY(i) ? i : tag_register(t);
}

etch_mem_tag *etch_mem_scope_push(etch_mem_tag *tag) {
  etch_mem_tag *prev = cur_tag;
  cur_tag = tag;
  return prev;
}

void etch_mem_scope_pop(etch_mem_tag *previous) { cur_tag = previous; }

ETCH_INLINE etch_mem_tag *current_tag(void) {
  return cur_tag ? cur_tag : &etch_memtag_untagged;
}

etch_mem_tag *etch_mem_current_tag(void) { return current_tag(); }

/* ---- the live map ------------------------------------------------------- */

#define SHARDS 64

typedef struct shard {
  uint32_t lock;
  etch_u64map blocks; /* address -> size << 16 | tag index */
} __attribute__((aligned(64))) shard;

static shard shards[SHARDS];
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static bool atfork_done; /* atomic: atfork_once has run */

static void shard_lock(shard *s) { etch__spin_lock(&s->lock); }
static void shard_unlock(shard *s) { etch__spin_unlock(&s->lock); }

/* fork() while another thread holds a shard would leave it held in the
 * child: every shard is held across the fork. */
static void fork_prepare(void) {
  etch__stack_fork_prepare();
  for (int i = 0; i < SHARDS; i++) shard_lock(&shards[i]);
}
static void fork_parent(void) {
  for (int i = SHARDS; i-- > 0;) shard_unlock(&shards[i]);
  etch__stack_fork_after();
}
/* The child starts with no session (docs/sdk.md): the blocks it inherited,
 * and the live bytes they made, are not its own. A session it starts
 * (etch_init in the child, as libetch_malloc.so does) reports its own
 * allocations from nothing; freeing an inherited block writes nothing. */
static void fork_child(void) {
  for (int i = SHARDS; i-- > 0;) {
    etch__u64map_free(&shards[i].blocks); /* empty again */
    shard_unlock(&shards[i]);
  }
  memset(live, 0, sizeof live);
  memset(live_ts, 0, sizeof live_ts);
  memset(mt.delta, 0, sizeof mt.delta);
  memset(mt.dirty, 0, sizeof mt.dirty);
  mt.countdown = 0;
  etch__stack_fork_after();
}
/* A session stops: the stopping thread's live bytes, and the names of the
 * call stacks' frames (stack.h), on every session recording memory. */
static void mem_before_stop(void) {
  etch__mem_flush_thread();
  uint32_t mask =
      __atomic_load_n(&etch_cat_etch_memory.enabled, __ATOMIC_RELAXED);
  if (!mask || mt.in) return;
  mt.in = true;
  uint64_t ticks = etch__ticks();
  while (mask) {
    uint32_t slot = (uint32_t)__builtin_ctz(mask);
    mask &= mask - 1;
    etch_writer *w = etch__writer_prepare(slot, ticks);
    if (w) etch__stack_put_symbols(w);
  }
  mt.in = false;
}

static const etch_feature_hooks mem_hooks = {
    .thread_exit = etch__mem_flush_thread, /* its last live-bytes values */
    .before_stop = mem_before_stop,
};

/* Once, at the first report. */
static void atfork_register(void) {
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  etch__feature_hooks_add(&mem_hooks);
}

/* A block's shard, by the 1 MiB of address space it is in: the C library
 * gives each thread's allocations an arena of their own, so threads that
 * allocate and free at once mostly take different shards (and their cache
 * lines), while one thread's blocks share a few. */
#define SHARD_GRAIN 20
ETCH_INLINE shard *shard_of(uintptr_t p) {
  return &shards[((uint64_t)(p >> SHARD_GRAIN) * 0x9e3779b97f4a7c15ull) >> 58];
}

/* Adds or replaces p's entry; the replaced value in *old (0 if none).
 * False when the map cannot grow (the allocation goes unreported). */
ETCH_INLINE bool map_put(uintptr_t p, uint64_t val, uint64_t *old) {
  shard *s = shard_of(p);
  int64_t prev = 0;
  bool had = false;
  shard_lock(s);
  bool ok = etch__u64map_swap(&s->blocks, p, (int64_t)val, &prev, &had);
  shard_unlock(s);
  *old = ok && had ? (uint64_t)prev : 0;
  return ok;
}

/* Removes p's entry; false when there is none. */
ETCH_INLINE bool map_take(uintptr_t p, uint64_t *val) {
  shard *s = shard_of(p);
  int64_t v = 0;
  shard_lock(s);
  bool found = etch__u64map_del(&s->blocks, p, &v);
  shard_unlock(s);
  *val = (uint64_t)v;
  return found;
}

/* ---- reports --------------------------------------------------------------- */

static etch_site free_site =
    ETCH__SITE_INIT(etch_cat_etch_memory, "free", ETCH_TYPE_INSTANT);

/* Adds `d` to tag ti's live bytes: locally for the first tags (no shared
 * cache line per change), added to the total when counters are written. */
ETCH_INLINE void live_add(uint32_t ti, int64_t d) {
  if (ti <= LOCAL_TAGS)
    mt.delta[ti] += d;
  else
    __atomic_add_fetch(&live[ti], d, __ATOMIC_RELAXED);
  mt.dirty[ti / 64] |= 1ull << (ti % 64);
}

/* This thread's tags' live bytes, every COUNTER_EVERY changes
 * (maybe_write_counters counts them inline). */
static ETCH_NOINLINE void write_counters(uint32_t mask) {
  mt.countdown = COUNTER_EVERY;
  for (uint32_t w = 0; w < sizeof mt.dirty / sizeof mt.dirty[0]; w++) {
    uint64_t bits = mt.dirty[w];
    mt.dirty[w] = 0;
    while (bits) {
      uint32_t ti = w * 64 + (uint32_t)__builtin_ctzll(bits);
      bits &= bits - 1;
      /* The total and its time together, each time after the last: the
       * counter's latest value is the latest total, however the threads
       * that write it interleave. */
      etch__spin_lock(&live_lock[ti]);
      int64_t v;
      if (ti <= LOCAL_TAGS) {
        v = __atomic_add_fetch(&live[ti], mt.delta[ti], __ATOMIC_RELAXED);
        mt.delta[ti] = 0;
      } else {
        v = __atomic_load_n(&live[ti], __ATOMIC_RELAXED);
      }
      uint64_t ts = etch__ordered_ts(&live_ts[ti], etch_now());
      etch_extra xs[2] = {etch__x_counter_int(v), etch_x_timestamp(ts)};
      etch__emit(&live_site[ti], mask, xs, 2);
      etch__spin_unlock(&live_lock[ti]);
    }
  }
}

ETCH_INLINE void maybe_write_counters(uint32_t mask) {
  if (ETCH_LIKELY(mt.countdown) && ETCH_LIKELY(--mt.countdown)) return;
  write_counters(mask);
}

ETCH_INLINE void report_alloc(uint32_t mask, const void *ptr, size_t size,
                              etch_mem_tag *tag, uint32_t stack) {
  uint32_t ti = tag_index(tag);
  uint64_t old;
  if (size > (UINT64_MAX >> 16)) size = UINT64_MAX >> 16;
  if (!map_put((uintptr_t)ptr, (uint64_t)size << 16 | ti, &old)) return;
  if (old) /* reported twice without a free: the first is gone */
    live_add((uint32_t)(old & 0xffff), -(int64_t)(old >> 16));
  live_add(ti, (int64_t)size);
  etch__emit_alloc(&tag->site, mask, ptr, (uint64_t)size, stack);
  maybe_write_counters(mask);
}

/* False when `ptr` was not a reported live block; its size in *size. */
ETCH_INLINE bool report_free(uint32_t mask, const void *ptr, uint64_t *size) {
  uint64_t val;
  if (!map_take((uintptr_t)ptr, &val)) return false;
  if (size) *size = val >> 16;
  live_add((uint32_t)(val & 0xffff), -(int64_t)(val >> 16));
  etch__emit_free(&free_site, mask, ptr);
  maybe_write_counters(mask);
  return true;
}

/* The mask of sessions recording memory, with the thread marked inside a
 * report; 0 when there is nothing to do. It takes the block's address as an
 * integer: the hooks declare that they never touch the block (access(none)
 * in memory.h), and gcc -O0 took passing it on as a pointer for a read of
 * it (-Wmaybe-uninitialized in a Debug build). */
ETCH_INLINE uint32_t report_begin(uintptr_t addr) {
  uint32_t mask =
      __atomic_load_n(&etch_cat_etch_memory.enabled, __ATOMIC_RELAXED);
  if (ETCH_LIKELY(!mask) || !addr || mt.in || etch__tls.internal) return 0;
  mt.in = true;
  if (ETCH_UNLIKELY(!__atomic_load_n(&atfork_done, __ATOMIC_ACQUIRE))) {
    pthread_once(&atfork_once, atfork_register);
    __atomic_store_n(&atfork_done, true, __ATOMIC_RELEASE);
  }
  return mask;
}

void etch_mem_alloc_tagged(const void *ptr, size_t size, etch_mem_tag *tag) {
  uint32_t mask = report_begin((uintptr_t)ptr);
  if (!mask) return;
  report_alloc(mask, ptr, size, tag ? tag : current_tag(), 0);
  mt.in = false;
}

void etch_mem_alloc_stack(const void *ptr, size_t size, etch_mem_tag *tag,
                          const uintptr_t *pcs, uint32_t n) {
  uint32_t mask = report_begin((uintptr_t)ptr);
  if (!mask) return;
  uint32_t stack = pcs ? etch__stack_intern(pcs, n) : 0;
  report_alloc(mask, ptr, size, tag ? tag : current_tag(), stack);
  mt.in = false;
}

void etch_mem_alloc(const void *ptr, size_t size) {
  etch_mem_alloc_tagged(ptr, size, NULL);
}

void etch_mem_free(const void *ptr) {
  uint32_t mask = report_begin((uintptr_t)ptr);
  if (!mask) return;
  report_free(mask, ptr, NULL);
  mt.in = false;
}

void etch_mem_realloc(uintptr_t old_addr, const void *ptr, size_t size) {
  const void *old = (const void *)old_addr;
  uint32_t mask = report_begin(ptr ? (uintptr_t)ptr : old_addr);
  if (!mask) return;
  if (old) report_free(mask, old, NULL);
  if (ptr) report_alloc(mask, ptr, size, current_tag(), 0);
  mt.in = false;
}

/* Writes this thread's pending changes (a thread's exit, a session's stop,
 * which covers the main thread at exit). */
void etch__mem_flush_thread(void) {
  uint32_t mask =
      __atomic_load_n(&etch_cat_etch_memory.enabled, __ATOMIC_RELAXED);
  bool any = false;
  for (size_t w = 0; w < sizeof mt.dirty / sizeof mt.dirty[0]; w++)
    any |= mt.dirty[w] != 0;
  if (!any || mt.in) return;
  if (!mask) { /* nobody records: the totals still take the changes */
    for (uint32_t ti = 0; ti <= LOCAL_TAGS; ti++) {
      __atomic_add_fetch(&live[ti], mt.delta[ti], __ATOMIC_RELAXED);
      mt.delta[ti] = 0;
    }
    memset(mt.dirty, 0, sizeof mt.dirty);
    return;
  }
  mt.in = true;
  mt.countdown = 1;
  maybe_write_counters(mask);
  mt.in = false;
}

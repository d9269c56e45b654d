/*
 * memory.c - memory tracing (etch/memory.h): allocation and free events,
 * live bytes per tag.
 *
 * While a session records "memory", every reported allocation goes into a
 * map of live blocks (address -> size and tag), split in 64 shards each
 * with its own short lock (a block's shard by the megabyte it is in), with
 * each thread's last blocks in a small table of its own in front of it (a
 * block freed soon by the thread that allocated it takes no lock), so
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

/* Each thread's recent blocks, in front of the map (see "a thread's
 * recent blocks" below). */
#define NEAR_SLOTS 64

typedef struct near {
  uint64_t key[NEAR_SLOTS]; /* atomic: the block's address; 0: empty */
  uint64_t val[NEAR_SLOTS]; /* atomic: size << 16 | tag index */
  struct near *next;        /* every table made, never freed */
  uint32_t owned;           /* atomic: a thread uses it */
} near;

static near *nears; /* atomic: the list's head */
static __thread near *my_near __attribute__((tls_model("initial-exec")));
static pthread_key_t near_key;
static pthread_once_t near_once = PTHREAD_ONCE_INIT;

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
  for (near *c = nears; c; c = c->next) {
    memset(c->key, 0, sizeof c->key);
    c->owned = c == my_near; /* the other threads are not in the child */
  }
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
 * False when the map cannot grow. With the shard's lock. */
ETCH_INLINE bool map_put_locked(shard *s, uintptr_t p, uint64_t val,
                                uint64_t *old) {
  int64_t prev = 0;
  bool had = false;
  bool ok = etch__u64map_swap(&s->blocks, p, (int64_t)val, &prev, &had);
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

/* Adds `d` to tag ti's live bytes: locally for the first tags (no shared
 * cache line per change), added to the total when counters are written. */
ETCH_INLINE void live_add(uint32_t ti, int64_t d) {
  if (ti <= LOCAL_TAGS)
    mt.delta[ti] += d;
  else
    __atomic_add_fetch(&live[ti], d, __ATOMIC_RELAXED);
  mt.dirty[ti / 64] |= 1ull << (ti % 64);
}

/* ---- a thread's recent blocks ------------------------------------------- */

/*
 * In front of the live map, each thread keeps the blocks it allocated last
 * in a small table of its own (a slot by address, NEAR_SLOTS of them): most
 * blocks are freed soon by the thread that allocated them, and then neither
 * the allocation nor the free takes a lock or touches the map. A block
 * whose slot another allocation of the thread needs goes to the map.
 *
 * Another thread's free finds a block in the map, else in the tables of the
 * other threads (one slot each), else in the map again: a block leaves a
 * table for the map with its shard's lock held, put into the map before it
 * leaves the table, so a free that missed it in the map finds it in one or
 * the other. A slot's address is claimed with a compare-and-swap by whoever
 * takes the block out (the owner moving it to the map, a free on another
 * thread); its value is written before its address, by the owner only,
 * while the slot is empty. While a free of p runs, p is allocated, so no
 * slot can get p again (no ABA).
 *
 * Tables are never freed: a thread's goes back to the list when it exits,
 * blocks and all, and the next thread that needs one adopts it.
 */
ETCH_INLINE uint32_t near_slot(uintptr_t p) {
  return (uint32_t)((p >> 4) ^ (p >> 10)) & (NEAR_SLOTS - 1);
}

/* At the thread's exit: its table goes back to the list as it is. */
static void near_release(void *arg) {
  near *c = (near *)arg;
  my_near = NULL;
  if (c) __atomic_store_n(&c->owned, 0, __ATOMIC_RELEASE);
}

static void near_key_make(void) { pthread_key_create(&near_key, near_release); }

/* This thread's table, adopted or made on first use; NULL out of memory
 * (the map alone then). */
static ETCH_NOINLINE near *near_make(void) {
  pthread_once(&near_once, near_key_make);
  near *c;
  for (c = __atomic_load_n(&nears, __ATOMIC_ACQUIRE); c; c = c->next) {
    uint32_t zero = 0;
    if (__atomic_compare_exchange_n(&c->owned, &zero, 1, false,
                                    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      break;
  }
  if (!c) {
    c = (near *)etch__calloc(1, sizeof *c);
    if (!c) return NULL;
    c->owned = 1;
    c->next = __atomic_load_n(&nears, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&nears, &c->next, c, true,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
  }
  my_near = c;
  pthread_setspecific(near_key, c);
  return c;
}

ETCH_INLINE near *near_get(void) {
  return ETCH_LIKELY(my_near != NULL) ? my_near : near_make();
}

/* Moves slot `i`'s block (address k) to the map, to free the slot. */
static ETCH_NOINLINE void near_evict(near *c, uint32_t i, uintptr_t k) {
  uint64_t val = __atomic_load_n(&c->val[i], __ATOMIC_RELAXED), old = 0;
  shard *s = shard_of(k);
  shard_lock(s);
  bool ok = map_put_locked(s, k, val, &old);
  uint64_t expect = k;
  if (!__atomic_compare_exchange_n(&c->key[i], &expect, 0, false,
                                   __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
    /* A free on another thread took it meanwhile. */
    int64_t dropped;
    if (ok) etch__u64map_del(&s->blocks, k, &dropped);
  } else if (!ok) {
    /* The map cannot grow: its free will find nothing, and its bytes are
     * no longer counted. */
    live_add((uint32_t)(val & 0xffff), -(int64_t)(val >> 16));
  }
  shard_unlock(s);
  if (old) /* reported twice without a free: the first is gone */
    live_add((uint32_t)(old & 0xffff), -(int64_t)(old >> 16));
}

/* Adds p's entry: in this thread's table, else in the map. *old: a
 * replaced value of the same address in this thread's table or the map
 * (0 if none). False when it could go in neither. */
ETCH_INLINE bool live_put(uintptr_t p, uint64_t val, uint64_t *old) {
  near *c = near_get();
  *old = 0;
  if (ETCH_UNLIKELY(!c)) {
    shard *s = shard_of(p);
    shard_lock(s);
    bool ok = map_put_locked(s, p, val, old);
    shard_unlock(s);
    return ok;
  }
  uint32_t i = near_slot(p);
  uintptr_t k = __atomic_load_n(&c->key[i], __ATOMIC_RELAXED);
  if (ETCH_UNLIKELY(k == p)) { /* reported twice without a free */
    *old = __atomic_load_n(&c->val[i], __ATOMIC_RELAXED);
    __atomic_store_n(&c->val[i], val, __ATOMIC_RELAXED);
    return true;
  }
  if (ETCH_UNLIKELY(k != 0)) near_evict(c, i, k);
  __atomic_store_n(&c->val[i], val, __ATOMIC_RELAXED);
  __atomic_store_n(&c->key[i], p, __ATOMIC_RELEASE);
  return true;
}

/* Takes p out of another thread's table. */
static bool near_steal(uintptr_t p, uint64_t *val) {
  uint32_t i = near_slot(p);
  for (near *c = __atomic_load_n(&nears, __ATOMIC_ACQUIRE); c; c = c->next) {
    if (c == my_near || __atomic_load_n(&c->key[i], __ATOMIC_ACQUIRE) != p)
      continue;
    uint64_t v = __atomic_load_n(&c->val[i], __ATOMIC_RELAXED);
    uint64_t expect = p;
    if (__atomic_compare_exchange_n(&c->key[i], &expect, 0, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
      *val = v;
      return true;
    }
  }
  return false;
}

static ETCH_NOINLINE bool live_take_far(uintptr_t p, uint64_t *val) {
  return map_take(p, val) || near_steal(p, val) || map_take(p, val);
}

/* Removes p's entry wherever it is; false when there is none. */
ETCH_INLINE bool live_take(uintptr_t p, uint64_t *val) {
  near *c = my_near;
  if (ETCH_LIKELY(c != NULL)) {
    uint32_t i = near_slot(p);
    if (__atomic_load_n(&c->key[i], __ATOMIC_RELAXED) == p) {
      *val = __atomic_load_n(&c->val[i], __ATOMIC_RELAXED);
      __atomic_store_n(&c->key[i], 0, __ATOMIC_RELAXED);
      return true;
    }
  }
  return live_take_far(p, val);
}

/* ---- reports --------------------------------------------------------------- */

static etch_site free_site =
    ETCH__SITE_INIT(etch_cat_etch_memory, "free", ETCH_TYPE_INSTANT);

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
  if (!live_put((uintptr_t)ptr, (uint64_t)size << 16 | ti, &old)) return;
  if (old) /* reported twice without a free: the first is gone */
    live_add((uint32_t)(old & 0xffff), -(int64_t)(old >> 16));
  live_add(ti, (int64_t)size);
  etch__emit_alloc(&tag->site, mask, ptr, (uint64_t)size, stack);
  maybe_write_counters(mask);
}

/* False when `ptr` was not a reported live block; its size in *size. */
ETCH_INLINE bool report_free(uint32_t mask, const void *ptr, uint64_t *size) {
  uint64_t val;
  if (!live_take((uintptr_t)ptr, &val)) return false;
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

uint32_t etch_mem_alloc_stack(const void *ptr, size_t size,
                              etch_mem_tag *tag, const uintptr_t *pcs,
                              uint32_t n) {
  uint32_t mask = report_begin((uintptr_t)ptr);
  if (!mask) return 0;
  uint32_t stack = pcs ? etch__stack_intern(pcs, n) : 0;
  report_alloc(mask, ptr, size, tag ? tag : current_tag(), stack);
  mt.in = false;
  return stack;
}

void etch_mem_alloc_stack_id(const void *ptr, size_t size, etch_mem_tag *tag,
                             uint32_t stack_id) {
  uint32_t mask = report_begin((uintptr_t)ptr);
  if (!mask) return;
  report_alloc(mask, ptr, size, tag ? tag : current_tag(), stack_id);
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

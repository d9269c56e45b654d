/*
 * memory_test.c - memory tracing through the allocator hooks: tags and
 * nested scopes, realloc, frees of blocks never reported, live bytes per
 * tag, decoded from the trace with exact values.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sdk_common.h"

ETCH_MEM_TAG_DEFINE(textures, "Textures");
ETCH_MEM_TAG_DEFINE(audio, "Audio");

/* A pretend allocator: addresses from an array, never dereferenced. */
static char arena[1 << 20];
static size_t arena_used;
static void *pool_alloc(size_t n) {
  void *p = arena + arena_used;
  arena_used += (n + 15) & ~(size_t)15;
  etch_mem_alloc(p, n);
  return p;
}
static void pool_free(void *p) { etch_mem_free(p); }

static void *blocks[400];

static void *workload(void *arg) {
  (void)arg;
  {
    ETCH_MEM_SCOPE(textures);
    for (int i = 0; i < 300; i++) blocks[i] = pool_alloc(1000);
    ASSERT_TRUE(etch_mem_current_tag() == ETCH_MEM_TAG(textures));
  }
  {
    ETCH_MEM_SCOPE(audio);
    for (int i = 0; i < 10; i++) blocks[300 + i] = pool_alloc(500);
    {
      ETCH_MEM_SCOPE(textures);
      blocks[310] = pool_alloc(7);
    }
    /* A realloc that moves: the old block freed, the new one Audio's. */
    void *moved = arena + (1 << 19);
    etch_mem_realloc((uintptr_t)blocks[300], moved, 2000);
    blocks[300] = moved;
  }
  ASSERT_TRUE(etch_mem_current_tag() == &etch_memtag_untagged);
  blocks[311] = pool_alloc(3);
  for (int i = 0; i < 100; i++) pool_free(blocks[i]);
  pool_free(arena + 999999); /* never reported: no event */
  etch_mem_free(NULL);
  etch_mem_alloc(NULL, 5); /* a failed allocation: nothing */
  return NULL;
}

/* The last value of the counter track `name` (time order), -1 if none. */
static double last_value(const td_trace *t, const char *name) {
  double last = -1;
  const td_track *k;
  counter_values(t, name, NULL, 0, &last, &k);
  return last;
}

TEST(allocator_hooks_record_tags_frees_and_live_bytes) {
  void *before = arena + 900000;
  etch_mem_alloc(before, 64); /* no session yet: not reported */
  etch_session *s = start_session("compression=none");
  pthread_t th;
  pthread_create(&th, NULL, workload, NULL); /* its exit writes counters */
  pthread_join(th, NULL);
  etch_mem_free(before); /* never reported: no event */
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "memory_hooks", &t);
  size_t allocs[4] = {0}, frees = 0;
  const char *tags[] = {"Textures", "Audio", "untagged"};
  uint64_t sizes = 0;
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *e = &t.ev[i];
    if (!e->cat || strcmp(e->cat, "memory") || e->type != 3) continue;
    const td_arg *ptr = td_arg_of(e, "ptr"), *size = td_arg_of(e, "size");
    ASSERT_TRUE(ptr != NULL);
    uintptr_t p = (uintptr_t)ptr->u;
    ASSERT_TRUE(p >= (uintptr_t)arena && p < (uintptr_t)arena + sizeof arena);
    ASSERT_TRUE(p != (uintptr_t)before && p != (uintptr_t)(arena + 999999));
    if (!strcmp(e->name, "free")) {
      ASSERT_TRUE(size == NULL);
      frees++;
      continue;
    }
    ASSERT_TRUE(size != NULL);
    sizes += size->u;
    int k = 0;
    while (k < 3 && strcmp(e->name, tags[k])) k++;
    ASSERT_TRUE(k < 3);
    allocs[k]++;
  }
  ASSERT_EQ_U64(allocs[0], 301);     /* 300 + the nested 7 */
  ASSERT_EQ_U64(allocs[1], 11);      /* 10 + the realloc's new block */
  ASSERT_EQ_U64(allocs[2], 1);
  ASSERT_EQ_U64(frees, 101);         /* 100 + the realloc's old block */
  ASSERT_EQ_U64(sizes, 300 * 1000 + 7 + 10 * 500 + 2000 + 3);
  /* Live bytes per tag, as the thread left them at its exit. */
  ASSERT_EQ_DBL(last_value(&t, "Live bytes: Textures"), 200 * 1000 + 7);
  ASSERT_EQ_DBL(last_value(&t, "Live bytes: Audio"), 9 * 500 + 2000);
  ASSERT_EQ_DBL(last_value(&t, "Live bytes: untagged"), 3);
  const td_track *k = NULL;
  for (size_t i = 0; i < t.ntracks; i++)
    if (t.tracks[i].name && !strcmp(t.tracks[i].name, "Live bytes: Audio"))
      k = &t.tracks[i];
  ASSERT_TRUE(k && k->is_counter);
  ASSERT_EQ_INT(k->unit, 3); /* bytes */
  td_free(&t);
  etch_session_free(s);
}

/* A child made by fork() starts from no live blocks: the blocks it
 * inherited are the parent's, so a session it starts has none of their
 * bytes in its live bytes, and freeing one writes nothing. */
TEST(a_fork_child_starts_with_no_live_blocks) {
  etch_session *s = start_session("compression=none");
  void *in1 = pool_alloc(4444), *in2 = pool_alloc(4444);
  (void)in2;
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    etch_session *c = start_session("compression=none");
    pool_alloc(333);
    pool_free(in1);
    etch_session_stop(c);
    td_trace t;
    read_trace(c, "memory_fork_child", &t);
    uint64_t allocs = 0, frees = 0, bytes = 0;
    for (size_t i = 0; i < t.nev; i++) {
      const td_event *e = &t.ev[i];
      if (!e->cat || strcmp(e->cat, "memory") || e->type != 3) continue;
      if (!strcmp(e->name, "free")) {
        frees++;
      } else {
        allocs++;
        bytes += td_arg_of(e, "size")->u;
      }
    }
    ASSERT_EQ_U64(allocs, 1);
    ASSERT_EQ_U64(bytes, 333);
    ASSERT_EQ_U64(frees, 0);
    ASSERT_EQ_DBL(last_value(&t, "Live bytes: untagged"), 333);
    _exit(0);
  }
  int st = 0;
  ASSERT_EQ_INT(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ_INT(WEXITSTATUS(st), 0);
  etch_session_stop(s);
  etch_session_free(s);
}

TEST(a_session_without_memory_records_none) {
  etch_session *s = start_session("compression=none;categories=*,-memory");
  void *p = pool_alloc(10);
  pool_free(p);
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "memory_off", &t);
  for (size_t i = 0; i < t.nev; i++)
    ASSERT_TRUE(!t.ev[i].cat || strcmp(t.ev[i].cat, "memory") != 0);
  td_free(&t);
  etch_session_free(s);
}

/* Four threads allocating and freeing at once, one tag each half: every
 * event recorded, and the live bytes they leave are exact. */
enum { MT_THREADS = 4, MT_N = 20000 };
static char mt_arena[MT_THREADS][MT_N * 16];

static void *mt_worker(void *arg) {
  long id = (long)arg;
  for (int i = 0; i < MT_N; i++) {
    void *p = &mt_arena[id][i * 16];
    if (id % 2) {
      ETCH_MEM_SCOPE(audio);
      etch_mem_alloc(p, 16);
    } else {
      etch_mem_alloc_tagged(p, 16, ETCH_MEM_TAG(textures));
    }
    if (i % 4) etch_mem_free(p); /* a quarter stays */
  }
  return NULL;
}

TEST(threads_allocating_at_once) {
  etch_session *s =
      start_session("compression=none;buffer_kb=65536;fill=discard");
  pthread_t th[MT_THREADS];
  for (long i = 0; i < MT_THREADS; i++)
    pthread_create(&th[i], NULL, mt_worker, (void *)i);
  for (int i = 0; i < MT_THREADS; i++) pthread_join(th[i], NULL);
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "memory_threads", &t);
  ASSERT_EQ_U64(t.prev_dropped, 0);
  size_t allocs = 0, frees = 0;
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *e = &t.ev[i];
    if (!e->cat || strcmp(e->cat, "memory") || e->type != 3) continue;
    if (!strcmp(e->name, "free"))
      frees++;
    else
      allocs++;
  }
  ASSERT_EQ_U64(allocs, MT_THREADS * MT_N);
  ASSERT_EQ_U64(frees, MT_THREADS * MT_N * 3 / 4);
  /* Each tag (every test runs in a process of its own): 2 threads x a
   * quarter of MT_N x 16 bytes, whatever order the threads wrote in. */
  ASSERT_EQ_DBL(last_value(&t, "Live bytes: Textures"), 2 * (MT_N / 4) * 16);
  ASSERT_EQ_DBL(last_value(&t, "Live bytes: Audio"), 2 * (MT_N / 4) * 16);
  td_free(&t);
  etch_session_free(s);
}

/* Blocks freed by a thread other than the one that allocated them: some
 * still in the allocating thread's table of recent blocks (while it runs,
 * and after it exits), most moved from it to the live map. Each free is
 * written once, and the live bytes come back to 0. */
enum { XT_N = 300 };
static char xt_arena[XT_N * 32];
static int xt_go[2], xt_done[2];

static void *xt_alloc_and_wait(void *arg) {
  (void)arg;
  for (int i = 0; i < XT_N; i++)
    etch_mem_alloc_tagged(xt_arena + i * 32, 32, ETCH_MEM_TAG(audio));
  char c = 1;
  ASSERT_EQ_INT((int)write(xt_go[1], &c, 1), 1); /* allocated */
  ASSERT_EQ_INT((int)read(xt_done[0], &c, 1), 1); /* freed elsewhere */
  return NULL;
}

static void *xt_alloc_and_exit(void *arg) {
  (void)arg;
  for (int i = 0; i < 3; i++)
    etch_mem_alloc_tagged(xt_arena + i * 32, 8, ETCH_MEM_TAG(audio));
  return NULL;
}

TEST(blocks_freed_on_another_thread) {
  ASSERT_EQ_INT(pipe(xt_go), 0);
  ASSERT_EQ_INT(pipe(xt_done), 0);
  etch_session *s = start_session("compression=none");
  pthread_t th;
  pthread_create(&th, NULL, xt_alloc_and_wait, NULL);
  char c;
  ASSERT_EQ_INT((int)read(xt_go[0], &c, 1), 1);
  for (int i = XT_N; i-- > 0;) etch_mem_free(xt_arena + i * 32);
  etch_mem_free(xt_arena + 16); /* never reported: nothing */
  ASSERT_EQ_INT((int)write(xt_done[1], &c, 1), 1);
  pthread_join(th, NULL);
  /* A thread that exits with its blocks still in its table. */
  pthread_create(&th, NULL, xt_alloc_and_exit, NULL);
  pthread_join(th, NULL);
  for (int i = 0; i < 3; i++) etch_mem_free(xt_arena + i * 32);
  /* The same address reported twice without a free: one block. */
  etch_mem_alloc_tagged(xt_arena, 10, ETCH_MEM_TAG(audio));
  etch_mem_alloc_tagged(xt_arena, 20, ETCH_MEM_TAG(audio));
  etch_mem_free(xt_arena);
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "memory_cross_thread", &t);
  size_t allocs = 0, frees = 0;
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *e = &t.ev[i];
    if (!e->cat || strcmp(e->cat, "memory") || e->type != 3) continue;
    if (!strcmp(e->name, "free"))
      frees++;
    else
      allocs++;
  }
  ASSERT_EQ_U64(allocs, XT_N + 3 + 2);
  ASSERT_EQ_U64(frees, XT_N + 3 + 1);
  ASSERT_EQ_DBL(last_value(&t, "Live bytes: Audio"), 0);
  td_free(&t);
  etch_session_free(s);
  for (int i = 0; i < 2; i++) {
    close(xt_go[i]);
    close(xt_done[i]);
  }
}

/* Two threads hand blocks back and forth while each allocates: every
 * block is freed by the other thread, while its maker is moving blocks
 * from its table to the map (a slot wanted by a newer block) at the same
 * time. Every free is found once, whichever side wins. The hand-over is a
 * pipe of addresses: it waits for an event, never for a time. */
enum { HO_N = 20000, HO_LAG = 64 }; /* HO_LAG: below a pipe's room */
static char ho_arena[2][HO_N * 16];
static int ho_pipe[2][2];

static void *ho_worker(void *arg) {
  long me = (long)arg;
  int out = ho_pipe[me][1], in = ho_pipe[!me][0];
  /* The other thread's block freed HO_LAG blocks later, about when its
   * maker's table gives up the slot: evictions and frees cross. */
  for (int i = 0; i < HO_N + HO_LAG; i++) {
    if (i < HO_N) {
      char *p = &ho_arena[me][i * 16];
      etch_mem_alloc_tagged(p, 16, ETCH_MEM_TAG(textures));
      ASSERT_EQ_INT((int)write(out, &p, sizeof p), (int)sizeof p);
    }
    if (i >= HO_LAG) {
      char *q;
      ASSERT_EQ_INT((int)read(in, &q, sizeof q), (int)sizeof q);
      etch_mem_free(q);
    }
  }
  return NULL;
}

TEST(blocks_handed_between_threads_are_each_freed_once) {
  ASSERT_EQ_INT(pipe(ho_pipe[0]), 0);
  ASSERT_EQ_INT(pipe(ho_pipe[1]), 0);
  etch_session *s =
      start_session("compression=none;buffer_kb=65536;fill=discard");
  pthread_t th[2];
  for (long i = 0; i < 2; i++) pthread_create(&th[i], NULL, ho_worker, (void *)i);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "memory_hand_over", &t);
  ASSERT_EQ_U64(t.prev_dropped, 0);
  size_t allocs = 0, frees = 0;
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *e = &t.ev[i];
    if (!e->cat || strcmp(e->cat, "memory") || e->type != 3) continue;
    if (!strcmp(e->name, "free"))
      frees++;
    else
      allocs++;
  }
  ASSERT_EQ_U64(allocs, 2 * HO_N);
  ASSERT_EQ_U64(frees, 2 * HO_N);
  ASSERT_EQ_DBL(last_value(&t, "Live bytes: Textures"), 0);
  td_free(&t);
  etch_session_free(s);
  for (int i = 0; i < 2; i++) {
    close(ho_pipe[i][0]);
    close(ho_pipe[i][1]);
  }
}

/* More tags than have counters of their own: the first 255 keep theirs,
 * the rest share "Live bytes: (other tags)". */
TEST(tags_past_the_limit_share_one_counter) {
  static etch_mem_tag many[300];
  static char names[300][16];
  for (int i = 0; i < 300; i++) {
    snprintf(names[i], sizeof names[i], "tag-%d", i);
    many[i] = (etch_mem_tag){names[i],
                             ETCH__SITE_INIT(etch_cat_etch_memory, names[i],
                                             ETCH_TYPE_INSTANT),
                             0};
  }
  etch_session *s = start_session("compression=none");
  for (int i = 0; i < 300; i++) etch_mem_alloc_tagged(arena + i * 16, 10, &many[i]);
  etch_mem_alloc(arena + 8000, 1); /* untagged: the 301st tag, shared too */
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "memory_many_tags", &t);
  size_t allocs = 0;
  for (size_t i = 0; i < t.nev; i++)
    if (t.ev[i].cat && !strcmp(t.ev[i].cat, "memory") && t.ev[i].type == 3)
      allocs++;
  ASSERT_EQ_U64(allocs, 301);
  td_free(&t);
  etch_session_free(s);
  /* The tags' indexes: 1..255 their own, then the shared one. */
  ASSERT_EQ_INT((int)many[0].index, 1);
  ASSERT_EQ_INT((int)many[254].index, 255);
  ASSERT_EQ_INT((int)many[255].index, 256);
  ASSERT_EQ_INT((int)many[299].index, 256);
}

/* Every allocation's and free's pointer and size, exactly and in order,
 * for values of every varint length (the fast path writes them itself),
 * in one session and in two at once (each gets every event). */
enum { EX_N = 600 };

static uintptr_t ex_ptr(int i) {
  static const uintptr_t bases[] = {0x10, 0x4000, 0x55d0c0de0000,
                                    (uintptr_t)1 << 62};
  return bases[i % 4] + (uintptr_t)i * 64;
}
static uint64_t ex_size(int i) {
  static const uint64_t sizes[] = {1, 200, 70000, (uint64_t)1 << 40};
  return sizes[(i / 4) % 4] + (uint64_t)i;
}

static void check_exact(const td_trace *t) {
  int na = 0, nf = 0;
  for (size_t i = 0; i < t->nev; i++) {
    const td_event *e = &t->ev[i];
    if (!e->cat || strcmp(e->cat, "memory") || e->type != 3) continue;
    const td_arg *ptr = td_arg_of(e, "ptr"), *size = td_arg_of(e, "size");
    ASSERT_TRUE(ptr != NULL);
    ASSERT_EQ_INT(ptr->type, TD_POINTER);
    if (na < EX_N) { /* the allocations come first */
      ASSERT_EQ_STR(e->name, "Textures");
      ASSERT_EQ_INT(e->nargs, 2);
      ASSERT_EQ_U64(ptr->u, ex_ptr(na));
      ASSERT_TRUE(size != NULL);
      ASSERT_EQ_INT(size->type, TD_UINT);
      ASSERT_EQ_U64(size->u, ex_size(na));
      na++;
    } else { /* then the frees, last first */
      ASSERT_EQ_STR(e->name, "free");
      ASSERT_EQ_INT(e->nargs, 1);
      ASSERT_EQ_U64(ptr->u, ex_ptr(EX_N - 1 - nf));
      nf++;
    }
  }
  ASSERT_EQ_INT(na, EX_N);
  ASSERT_EQ_INT(nf, EX_N);
  ASSERT_EQ_DBL(last_value(t, "Live bytes: Textures"), 0);
}

static void ex_run(void) {
  ETCH_MEM_SCOPE(textures);
  for (int i = 0; i < EX_N; i++) etch_mem_alloc((const void *)ex_ptr(i), ex_size(i));
  for (int i = EX_N; i-- > 0;) etch_mem_free((const void *)ex_ptr(i));
}

static void *ex_thread(void *arg) {
  (void)arg;
  ex_run();
  return NULL;
}

TEST(events_carry_exact_pointers_and_sizes) {
  etch_session *s = start_session("compression=none");
  pthread_t th;
  pthread_create(&th, NULL, ex_thread, NULL); /* its exit writes counters */
  pthread_join(th, NULL);
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "memory_exact", &t);
  check_exact(&t);
  td_free(&t);
  etch_session_free(s);
}

TEST(two_sessions_each_get_every_allocation) {
  etch_session *a = start_session("compression=none");
  etch_session *b = start_session("compression=none");
  pthread_t th;
  pthread_create(&th, NULL, ex_thread, NULL);
  pthread_join(th, NULL);
  etch_session_stop(a);
  etch_session_stop(b);
  td_trace t;
  read_trace(a, "memory_exact_a", &t);
  check_exact(&t);
  td_free(&t);
  read_trace(b, "memory_exact_b", &t);
  check_exact(&t);
  td_free(&t);
  etch_session_free(a);
  etch_session_free(b);
}

ETCH_MEM_TAG_DEFINE(pixels, "Pixels");
ETCH_MEM_TAG_DEFINE(samples, "Samples");

/* Changes the recording thread has not written yet (fewer than 256) are
 * written when the session stops: the last value of every tag's counter is
 * its live bytes, and a tag with a single change still has its track. */
TEST(stopping_writes_the_stopping_threads_pending_live_bytes) {
  etch_session *s = start_session("compression=none");
  for (int i = 0; i < 3; i++) /* 3 x 4096 bytes of Pixels */
    etch_mem_alloc_tagged(arena + 600000 + i * 4096, 4096, ETCH_MEM_TAG(pixels));
  etch_mem_alloc_tagged(arena + 700000, 1000, ETCH_MEM_TAG(samples));
  etch_mem_alloc_tagged(arena + 701000, 24, ETCH_MEM_TAG(samples));
  etch_mem_free(arena + 701000);
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "memory_pending", &t);
  ASSERT_EQ_DBL(last_value(&t, "Live bytes: Pixels"), 12288);
  ASSERT_EQ_DBL(last_value(&t, "Live bytes: Samples"), 1000);
  td_free(&t);
  etch_session_free(s);
  /* Leaves the totals as it found them for the tests after it. */
  s = start_session("compression=none");
  for (int i = 0; i < 3; i++) etch_mem_free(arena + 600000 + i * 4096);
  etch_mem_free(arena + 700000);
  etch_session_stop(s);
  etch_session_free(s);
}

/* ---- call stacks (etch_mem_alloc_stack) ---- */

/* The trace's packets, walked by hand (compression none): how many
 * TrackEvents carry callstack_iid, how many Callstack entries the interned
 * data holds, and the ModuleSymbols' function names, joined by ','. */
typedef struct stack_counts {
  size_t with_stack, callstacks, frames, mappings;
  char names[4096];
} stack_counts;

static bool pb_field(const uint8_t **p, const uint8_t *end, uint32_t *id,
                     const uint8_t **val, uint64_t *len_or_v) {
  if (*p >= end) return false;
  uint64_t key = 0, v = 0;
  int sh = 0;
  while (*p < end && (**p & 0x80)) key |= (uint64_t)(*(*p)++ & 0x7f) << (sh += 7, sh - 7);
  if (*p >= end) return false;
  key |= (uint64_t)(*(*p)++) << sh;
  *id = (uint32_t)(key >> 3);
  uint32_t wt = (uint32_t)(key & 7);
  sh = 0;
  if (wt == 0 || wt == 2) {
    while (*p < end && (**p & 0x80)) v |= (uint64_t)(*(*p)++ & 0x7f) << (sh += 7, sh - 7);
    if (*p >= end) return false;
    v |= (uint64_t)(*(*p)++) << sh;
  } else if (wt == 1) {
    *p += 8;
  } else if (wt == 5) {
    *p += 4;
  } else {
    return false;
  }
  *val = *p;
  *len_or_v = v;
  if (wt == 2) {
    if (v > (uint64_t)(end - *p)) return false;
    *p += v;
  }
  return *p <= end;
}

static void walk(const uint8_t *p, const uint8_t *end, int depth,
                 uint32_t parent, stack_counts *c) {
  uint32_t id;
  const uint8_t *val;
  uint64_t v;
  while (pb_field(&p, end, &id, &val, &v)) {
    bool len = val + v == p && v > 0; /* a length-delimited field */
    if (depth == 1 && id == 11 && len) walk(val, val + v, 2, 11, c);
    if (depth == 2 && parent == 11 && id == 56) c->with_stack++;
    if (depth == 1 && id == 12 && len) walk(val, val + v, 2, 12, c);
    if (depth == 2 && parent == 12 && id == 7) c->callstacks++;
    if (depth == 2 && parent == 12 && id == 6) c->frames++;
    if (depth == 2 && parent == 12 && id == 19) c->mappings++;
    if (depth == 1 && id == 61 && len) walk(val, val + v, 2, 61, c);
    if (depth == 2 && parent == 61 && id == 3 && len) walk(val, val + v, 3, 3, c);
    if (depth == 3 && parent == 3 && id == 2 && len) walk(val, val + v, 4, 2, c);
    if (depth == 4 && parent == 2 && id == 1 && len) {
      size_t n = strlen(c->names);
      snprintf(c->names + n, sizeof c->names - n, "%.*s,", (int)v,
               (const char *)val);
    }
  }
}

static void count_stacks(const uint8_t *data, size_t len, stack_counts *c) {
  memset(c, 0, sizeof *c);
  const uint8_t *p = data, *end = data + len;
  uint32_t id;
  const uint8_t *val;
  uint64_t v;
  while (pb_field(&p, end, &id, &val, &v))
    if (id == 1) walk(val, val + v, 1, 0, c);
}

/* Two "functions" the stacks go through: addresses in this program. */
static __attribute__((noinline)) void stack_fn_a(void) { __asm__ volatile(""); }
static __attribute__((noinline)) void stack_fn_b(void) { __asm__ volatile(""); }

static bool test_symbolizer(void *ctx, uintptr_t pc, etch_mem_symbol *out) {
  (void)ctx;
  if (pc == (uintptr_t)stack_fn_a + 1) out->function = "fn_a";
  else if (pc == (uintptr_t)stack_fn_b + 1) out->function = "fn_b";
  else return false;
  out->file = "memory_test.c";
  out->line = 7;
  return true;
}

/* Three stacks, 100 allocations each: each stack (and each frame and
 * mapping) interned once on the sequence, every allocation refers to its
 * stack, and the frames are named when the session stops: by the
 * symbolizer given, else (a frame in no known object) as its address. */
TEST(allocations_carry_interned_stacks_named_at_stop) {
  etch_mem_set_symbolizer(test_symbolizer, NULL);
  etch_session *s = start_session(
      "categories=memory;compression=none;reset_interval_ms=0");
  uintptr_t a = (uintptr_t)stack_fn_a + 1, b = (uintptr_t)stack_fn_b + 1;
  const uintptr_t st[3][2] = {{a, b}, {b, a}, {a, 0x10}};
  for (int i = 0; i < 300; i++)
    etch_mem_alloc_stack(arena + 16 * i, 16, NULL, st[i % 3], 2);
  for (int i = 0; i < 300; i++) etch_mem_free(arena + 16 * i);
  ASSERT_OK(etch_session_stop(s));
  uint8_t *data;
  size_t len;
  ASSERT_OK(etch_session_read(s, &data, &len));
  stack_counts c;
  count_stacks(data, len, &c);
  ASSERT_EQ_U64(c.with_stack, 300);
  ASSERT_EQ_U64(c.callstacks, 3);
  ASSERT_EQ_U64(c.frames, 3);   /* a, b, and 0x10 in no object */
  ASSERT_EQ_U64(c.mappings, 1); /* this program */
  ASSERT_TRUE(strstr(c.names, "fn_a,") && strstr(c.names, "fn_b,"));
  free(data);
  etch_session_free(s);
  etch_mem_set_symbolizer(NULL, NULL);
}

/* etch_mem_alloc_stack gives the stack's id (0 when nothing recorded the
 * allocation), the same for the same frames; allocations reported with
 * that id carry that stack, as libetch_malloc.so reports an allocation
 * made again from the same place; an id never given reports no stack. */
TEST(allocations_reported_by_stack_id_carry_that_stack) {
  uintptr_t a = (uintptr_t)stack_fn_a + 1, b = (uintptr_t)stack_fn_b + 1;
  const uintptr_t st[2] = {a, b}, other[2] = {b, a};
  ASSERT_EQ_U64(etch_mem_alloc_stack(arena, 16, NULL, st, 2), 0);
  etch_session *s = start_session(
      "categories=memory;compression=none;reset_interval_ms=0");
  uint32_t id = etch_mem_alloc_stack(arena, 16, NULL, st, 2);
  ASSERT_TRUE(id != 0);
  ASSERT_EQ_U64(etch_mem_alloc_stack(arena + 16, 16, NULL, st, 2), id);
  uint32_t id2 = etch_mem_alloc_stack(arena + 32, 16, NULL, other, 2);
  ASSERT_TRUE(id2 != 0 && id2 != id);
  for (int i = 3; i < 100; i++)
    etch_mem_alloc_stack_id(arena + 16 * i, 16, NULL, i % 2 ? id : id2);
  etch_mem_alloc_stack_id(arena + 16 * 100, 16, NULL, 0xfffff0u);
  for (int i = 0; i <= 100; i++) etch_mem_free(arena + 16 * i);
  ASSERT_OK(etch_session_stop(s));
  uint8_t *data;
  size_t len;
  ASSERT_OK(etch_session_read(s, &data, &len));
  stack_counts c;
  count_stacks(data, len, &c);
  ASSERT_EQ_U64(c.with_stack, 100); /* not the one with an unknown id */
  ASSERT_EQ_U64(c.callstacks, 2);
  ASSERT_EQ_U64(c.frames, 2);
  free(data);
  etch_session_free(s);
}

/*
 * stack.c - the process's call stacks, frames and mappings, and their
 * InternedData and ModuleSymbols packets (stack.h says what and why).
 *
 * Tables, all append-only under `lock`:
 *   mappings  one per loaded object (dl_iterate_phdr): its load base, the
 *             range of its executable segments, its path and GNU build id;
 *             read again when a frame falls in none (dlopen added one);
 *   frames    return address -> frame id (map), and each frame's mapping
 *             and address relative to the mapping's base (its ELF address);
 *   stacks    a hash of the return addresses -> stack id, and each stack's
 *             frame ids. Two different stacks with the same 64-bit hash
 *             would share an id: taken as never.
 * A thread keeps its last stacks' hashes and ids (a small direct-mapped
 * cache), so a stack it saw before costs a hash and no lock.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/map.h"
#include "etch/memory.h"
#include "pb/pb.h"
#include "proto/perfetto.h"
#include "stack/stack.h"

typedef struct mapping {
  uintptr_t base, lo, hi; /* load base; executable range [lo, hi) */
  char *path;
  uint8_t build_id[32];
  uint32_t build_id_len;
} mapping;

typedef struct frame {
  uint32_t map; /* mapping index + 1; 0: in no known object */
  uint64_t rel; /* pc - base */
  uintptr_t pc;
} frame;

static uint32_t lock;
static mapping **maps; /* by index; never moved once made */
static uint32_t nmaps, capmaps;
static unsigned long long maps_adds; /* dlpi_adds when last read */
static etch_u64map frame_ids; /* pc -> frame id */
static frame *frames;         /* by id - 1 */
static uint32_t nframes, capframes;
static etch_u64map stack_ids; /* hash -> stack id */
static uint32_t *stack_frames; /* every stack's frame ids, innermost first */
static uint64_t nstack_frames, capstack_frames;
static uint64_t *stack_at; /* by id - 1: offset << 8 | frame count */
static uint32_t nstacks, capstacks;

static etch_mem_symbolizer symbolizer;
static void *symbolizer_ctx;

void etch_mem_set_symbolizer(etch_mem_symbolizer fn, void *ctx) {
  etch__spin_lock(&lock);
  symbolizer = fn;
  symbolizer_ctx = ctx;
  etch__spin_unlock(&lock);
}

void etch__stack_fork_prepare(void) { etch__spin_lock(&lock); }
void etch__stack_fork_after(void) { etch__spin_unlock(&lock); }

static bool grow(void **p, uint32_t *cap, uint64_t need, size_t each) {
  if (need <= *cap) return true;
  uint64_t n = *cap ? (uint64_t)*cap * 2 : 256;
  while (n < need) n *= 2;
  if (n > UINT32_MAX) return false;
  void *q = etch__realloc(*p, (size_t)n * each);
  if (!q) return false;
  *p = q;
  *cap = (uint32_t)n;
  return true;
}

/* ---- mappings ---------------------------------------------------------- */

typedef struct scan {
  mapping **found;
  uint32_t n, cap;
  unsigned long long adds;
} scan;

static void note_build_id(mapping *m, const struct dl_phdr_info *info,
                          const ElfW(Phdr) *ph) {
  const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
  const uint8_t *end = p + ph->p_memsz;
  while (p + sizeof(ElfW(Nhdr)) <= end) {
    const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
    const uint8_t *name = p + sizeof *nh;
    const uint8_t *desc = name + ((nh->n_namesz + 3) & ~3u);
    const uint8_t *next = desc + ((nh->n_descsz + 3) & ~3u);
    if (next > end || next <= p) return;
    if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
        !memcmp(name, "GNU", 4) && nh->n_descsz <= sizeof m->build_id) {
      memcpy(m->build_id, desc, nh->n_descsz);
      m->build_id_len = nh->n_descsz;
      return;
    }
    p = next;
  }
}

static int scan_one(struct dl_phdr_info *info, size_t size, void *arg) {
  scan *sc = (scan *)arg;
  (void)size;
  sc->adds = info->dlpi_adds;
  mapping m = {.base = info->dlpi_addr, .lo = UINTPTR_MAX};
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
      if (lo < m.lo) m.lo = lo;
      if (lo + ph->p_memsz > m.hi) m.hi = lo + ph->p_memsz;
    } else if (ph->p_type == PT_NOTE && !m.build_id_len) {
      note_build_id(&m, info, ph);
    }
  }
  if (m.lo >= m.hi) return 0;
  char exe[4096];
  const char *path = info->dlpi_name;
  if (!path || !*path) { /* the program itself */
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    path = exe;
  }
  /* Absolute, as /proc/self/maps and trace_processor name objects (a
   * library dlopen'ed by a relative path, resolved against the directory
   * of the moment). */
  char abs[PATH_MAX];
  m.path = etch__strdup(path[0] != '/' && realpath(path, abs) ? abs : path);
  mapping *copy = (mapping *)etch__malloc(sizeof *copy);
  if (!m.path || !copy ||
      !grow((void **)&sc->found, &sc->cap, sc->n + 1ull, sizeof *sc->found)) {
    free(m.path);
    free(copy);
    return 0;
  }
  *copy = m;
  sc->found[sc->n++] = copy;
  return 0;
}

/* Reads the loaded objects again when dlopen added any since the last
 * time (without the lock), and adds the new ones to the table. */
static void refresh_mappings(void) {
  scan sc = {0};
  dl_iterate_phdr(scan_one, &sc);
  etch__spin_lock(&lock);
  for (uint32_t i = 0; i < sc.n; i++) {
    mapping *m = sc.found[i];
    bool known = false;
    for (uint32_t k = 0; k < nmaps && !known; k++)
      known = maps[k]->base == m->base && maps[k]->lo == m->lo &&
              !strcmp(maps[k]->path, m->path);
    if (known ||
        !grow((void **)&maps, &capmaps, nmaps + 1ull, sizeof *maps)) {
      free(m->path);
      free(m);
      continue;
    }
    maps[nmaps++] = m;
  }
  maps_adds = sc.adds;
  etch__spin_unlock(&lock);
  free(sc.found);
}

/* The mapping holding `pc` (index + 1), 0 if none; with the lock. */
static uint32_t mapping_of(uintptr_t pc) {
  for (uint32_t k = nmaps; k-- > 0;)
    if (pc >= maps[k]->lo && pc < maps[k]->hi) return k + 1;
  return 0;
}

/* ---- interning --------------------------------------------------------- */

/* A thread's cache: on the heap, so that a copy of libetch in a library
 * loaded by dlopen needs little static TLS (8 bytes here); freed when the
 * thread exits. */
#define TCACHE 256
typedef struct tcache_t {
  uint64_t hash[TCACHE];
  uint32_t id[TCACHE];
} tcache_t;
static __thread tcache_t *tcache __attribute__((tls_model("initial-exec")));
static pthread_key_t tcache_key;
static pthread_once_t tcache_once = PTHREAD_ONCE_INIT;

/* At the thread's exit; an allocation reported after it (another key's
 * destructor) makes a new one. */
static void tcache_free(void *p) {
  tcache = NULL;
  free(p);
}

static void tcache_key_make(void) {
  pthread_key_create(&tcache_key, tcache_free);
}

static tcache_t *tcache_get(void) {
  if (ETCH_LIKELY(tcache != NULL)) return tcache;
  pthread_once(&tcache_once, tcache_key_make);
  tcache = (tcache_t *)etch__calloc(1, sizeof *tcache);
  if (tcache) pthread_setspecific(tcache_key, tcache);
  return tcache;
}

static uint64_t hash_pcs(const uintptr_t *pcs, uint32_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  for (uint32_t i = 0; i < n; i++) {
    h ^= (uint64_t)pcs[i];
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  return h | 1; /* never 0: an empty cache slot */
}

/* A frame's id for `pc`, made if new; 0 out of memory. With the lock. */
static uint32_t frame_of(uintptr_t pc, bool *unmapped) {
  int64_t v;
  if (etch__u64map_get(&frame_ids, pc, &v)) return (uint32_t)v;
  uint32_t m = mapping_of(pc);
  if (!m) *unmapped = true;
  if (!grow((void **)&frames, &capframes, nframes + 1ull, sizeof *frames))
    return 0;
  frames[nframes] = (frame){m, m ? pc - maps[m - 1]->base : pc, pc};
  if (!etch__u64map_put(&frame_ids, pc, nframes + 1)) return 0;
  return ++nframes;
}

static uint32_t intern_locked(const uintptr_t *pcs, uint32_t n, uint64_t h,
                              bool *unmapped) {
  int64_t v;
  if (etch__u64map_get(&stack_ids, h, &v)) return (uint32_t)v;
  if (!grow((void **)&stack_at, &capstacks, nstacks + 1ull, sizeof *stack_at))
    return 0;
  while (nstack_frames + n > capstack_frames) {
    uint64_t c = capstack_frames ? capstack_frames * 2 : 4096;
    uint32_t *q = (uint32_t *)etch__realloc(stack_frames, c * sizeof *q);
    if (!q) return 0;
    stack_frames = q;
    capstack_frames = c;
  }
  uint64_t at = nstack_frames;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t f = frame_of(pcs[i], unmapped);
    if (!f) return 0;
    stack_frames[at + i] = f;
  }
  nstack_frames += n;
  stack_at[nstacks] = at << 8 | n;
  if (!etch__u64map_put(&stack_ids, h, nstacks + 1)) return 0;
  return ++nstacks;
}

uint32_t etch__stack_intern(const uintptr_t *pcs, uint32_t n) {
  if (n == 0) return 0;
  if (n > ETCH_STACK_MAX) n = ETCH_STACK_MAX;
  uint64_t h = hash_pcs(pcs, n);
  uint32_t slot = (uint32_t)(h >> 56) % TCACHE;
  tcache_t *tc = tcache_get();
  if (tc && tc->hash[slot] == h) return tc->id[slot];
  if (!__atomic_load_n(&maps_adds, __ATOMIC_RELAXED)) refresh_mappings();
  bool unmapped = false;
  etch__spin_lock(&lock);
  uint32_t id = intern_locked(pcs, n, h, &unmapped);
  etch__spin_unlock(&lock);
  /* A frame in no known object: an object dlopen'ed since the last scan.
   * Its frames made so far stay unmapped; later ones find it. */
  if (unmapped) {
    unsigned long long before = maps_adds;
    refresh_mappings();
    if (maps_adds != before) {
      etch__spin_lock(&lock);
      for (uint32_t i = 0; i < nframes; i++)
        if (!frames[i].map && (frames[i].map = mapping_of(frames[i].pc)))
          frames[i].rel = frames[i].pc - maps[frames[i].map - 1]->base;
      etch__spin_unlock(&lock);
    }
  }
  if (id && tc) {
    tc->hash[slot] = h;
    tc->id[slot] = id;
  }
  return id;
}

/* ---- the sequence's InternedData ---------------------------------------- */

static void put_istr(etch__pb_stream *s, uint32_t field, uint64_t iid,
                     const void *str, size_t len) {
  etch__pb_nested n;
  etch__pb_nested_begin(s, field, &n);
  etch__pb_write_varint_field(s, ETCH_ISTR_IID, iid);
  etch__pb_write_bytes_field(s, ETCH_ISTR_STR, str, len);
  etch__pb_nested_end(s, &n);
}

bool etch__stack_put_interned(etch_writer *w, uint32_t id) {
  /* What the packet needs, copied under the lock (the tables may move). */
  uint32_t fids[ETCH_STACK_MAX];
  frame fr[ETCH_STACK_MAX];
  etch__spin_lock(&lock);
  if (!id || id > nstacks) {
    etch__spin_unlock(&lock);
    return false;
  }
  uint64_t at = stack_at[id - 1];
  uint32_t n = (uint32_t)(at & 0xff);
  memcpy(fids, stack_frames + (at >> 8), n * sizeof *fids);
  for (uint32_t i = 0; i < n; i++) fr[i] = frames[fids[i] - 1];
  mapping *mp[ETCH_STACK_MAX];
  for (uint32_t i = 0; i < n; i++) mp[i] = fr[i].map ? maps[fr[i].map - 1] : NULL;
  etch__spin_unlock(&lock);

  if (!etch__packet_begin(w)) return false;
  etch__pb_stream *s = &w->st;
  etch__pb_write_varint_field(s, ETCH_PKT_SEQUENCE_FLAGS,
                              ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  etch__pb_nested id_msg;
  etch__pb_nested_begin(s, ETCH_PKT_INTERNED_DATA, &id_msg);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t m = fr[i].map;
    if (!m || etch__bitset_has(&w->seen_maps, m)) continue;
    if (!etch__bitset_reserve(&w->seen_maps, m)) continue;
    const mapping *mm = mp[i];
    if (mm->build_id_len)
      put_istr(s, ETCH_ID_BUILD_IDS, m, mm->build_id, mm->build_id_len);
    const char *path = mm->path[0] == '/' ? mm->path + 1 : mm->path;
    put_istr(s, ETCH_ID_MAPPING_PATHS, m, path, strlen(path));
    etch__pb_nested mn;
    etch__pb_nested_begin(s, ETCH_ID_MAPPINGS, &mn);
    etch__pb_write_varint_field(s, ETCH_MAPPING_IID, m);
    if (mm->build_id_len)
      etch__pb_write_varint_field(s, ETCH_MAPPING_BUILD_ID, m);
    etch__pb_write_varint_field(s, ETCH_MAPPING_START, mm->lo);
    etch__pb_write_varint_field(s, ETCH_MAPPING_END, mm->hi);
    etch__pb_write_varint_field(s, ETCH_MAPPING_PATH_STRING_IDS, m);
    etch__pb_nested_end(s, &mn);
    etch__bitset_set(&w->seen_maps, m);
  }
  for (uint32_t i = 0; i < n; i++) {
    if (etch__bitset_has(&w->seen_frames, fids[i])) continue;
    if (!etch__bitset_reserve(&w->seen_frames, fids[i])) continue;
    etch__pb_nested fn;
    etch__pb_nested_begin(s, ETCH_ID_FRAMES, &fn);
    etch__pb_write_varint_field(s, ETCH_FRAME_IID, fids[i]);
    if (fr[i].map) {
      etch__pb_write_varint_field(s, ETCH_FRAME_MAPPING_ID, fr[i].map);
      etch__pb_write_varint_field(s, ETCH_FRAME_REL_PC, fr[i].rel);
    }
    etch__pb_nested_end(s, &fn);
    etch__bitset_set(&w->seen_frames, fids[i]);
  }
  etch__pb_nested cn;
  etch__pb_nested_begin(s, ETCH_ID_CALLSTACKS, &cn);
  etch__pb_write_varint_field(s, ETCH_CALLSTACK_IID, id);
  for (uint32_t i = n; i-- > 0;) /* outermost first */
    etch__pb_write_varint_field(s, ETCH_CALLSTACK_FRAME_IDS, fids[i]);
  etch__pb_nested_end(s, &cn);
  etch__pb_nested_end(s, &id_msg);
  etch__packet_end(w);
  /* A lost packet: the writer resets its incremental state (packet_end),
   * which forgets these marks too. */
  if (w->packet_failed) return false;
  return etch__bitset_set(&w->seen_stacks, id);
}

/* ---- symbols ------------------------------------------------------------ */

/* Names are not looked up in the program: etch record (etch symbolize)
 * reads them from the binaries once the trace is written. A program that
 * gave a symbolizer of its own (etch_mem_set_symbolizer) has its names
 * written here, for the frames it names; the others stay for etch
 * symbolize. */

#define SYMS_PER_PACKET 128

void etch__stack_put_symbols(etch_writer *w) {
  etch__spin_lock(&lock);
  uint32_t nm = nmaps, nf = nframes;
  etch_mem_symbolizer fn = symbolizer;
  void *ctx = symbolizer_ctx;
  frame *fr = fn && nf ? (frame *)etch__malloc(nf * sizeof *fr) : NULL;
  if (fr) memcpy(fr, frames, nf * sizeof *fr);
  mapping **mp = fr && nm ? (mapping **)etch__malloc(nm * sizeof *mp) : NULL;
  if (mp) memcpy(mp, maps, nm * sizeof *mp);
  etch__spin_unlock(&lock);
  if (!fr || !mp) {
    free(fr);
    free(mp);
    return;
  }
  for (uint32_t m = 1; m <= nm; m++) {
    const mapping *mm = mp[m - 1];
    uint32_t in_packet = 0;
    etch__pb_nested ms;
    for (uint32_t i = 0; i < nf; i++) {
      etch_mem_symbol sym = {0};
      if (fr[i].map != m || !fn(ctx, fr[i].pc, &sym) || !sym.function)
        continue;
      if (in_packet == 0) {
        if (!etch__packet_begin(w)) break;
        etch__pb_nested_begin(&w->st, ETCH_PKT_MODULE_SYMBOLS, &ms);
        etch__pb_write_string_field(&w->st, ETCH_MODSYM_PATH, mm->path);
        if (mm->build_id_len)
          etch__pb_write_bytes_field(&w->st, ETCH_MODSYM_BUILD_ID,
                                     mm->build_id, mm->build_id_len);
      }
      etch__pb_nested as, ln;
      etch__pb_nested_begin(&w->st, ETCH_MODSYM_ADDRESS_SYMBOLS, &as);
      etch__pb_write_varint_field(&w->st, ETCH_ADDRSYM_ADDRESS, fr[i].rel);
      etch__pb_nested_begin(&w->st, ETCH_ADDRSYM_LINES, &ln);
      etch__pb_write_string_field(&w->st, ETCH_LINE_FUNCTION_NAME,
                                  sym.function);
      if (sym.file)
        etch__pb_write_string_field(&w->st, ETCH_LINE_SOURCE_FILE_NAME,
                                    sym.file);
      if (sym.line)
        etch__pb_write_varint_field(&w->st, ETCH_LINE_LINE_NUMBER, sym.line);
      etch__pb_nested_end(&w->st, &ln);
      etch__pb_nested_end(&w->st, &as);
      if (++in_packet == SYMS_PER_PACKET) {
        etch__pb_nested_end(&w->st, &ms);
        etch__packet_end(w);
        in_packet = 0;
      }
    }
    if (in_packet) {
      etch__pb_nested_end(&w->st, &ms);
      etch__packet_end(w);
    }
  }
  free(fr);
  free(mp);
}

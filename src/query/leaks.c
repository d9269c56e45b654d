/*
 * leaks.c - `etch leaks`: what a trace allocated and never freed, from the
 * memory events of etch/memory.h (category "memory": an instant named after
 * the tag with args ptr and size for an allocation, "free" with ptr for a
 * free).
 *
 * Events are read in timestamp order; blocks are matched by process and
 * address. What is still live at the end is grouped by tag and size, the
 * biggest total first; the peak is the most bytes live at once.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "query/query.h"

typedef struct block {
  uint64_t ptr; /* 0: empty slot */
  int32_t pid;
  uint32_t tag; /* index into tags */
  uint64_t size;
} block;

typedef struct leaks {
  block *b;
  size_t cap, n;
  char **tags;
  size_t ntags;
  uint64_t allocs, frees, unknown_frees, alloc_bytes;
  uint64_t live, peak;
  int64_t peak_ts;
  int err;
} leaks;

static uint64_t bhash(uint64_t ptr, int32_t pid) {
  return ((ptr >> 3) ^ ((uint64_t)(uint32_t)pid << 40)) * 0x9e3779b97f4a7c15ull;
}

static size_t bslot(const leaks *L, uint64_t ptr, int32_t pid) {
  size_t i = (size_t)(bhash(ptr, pid) >> 16) & (L->cap - 1);
  while (L->b[i].ptr && (L->b[i].ptr != ptr || L->b[i].pid != pid))
    i = (i + 1) & (L->cap - 1);
  return i;
}

static bool bgrow(leaks *L) {
  leaks old = *L;
  size_t cap = old.cap ? old.cap * 2 : 4096;
  L->b = etch__calloc(cap, sizeof *L->b);
  if (!L->b) {
    L->b = old.b;
    return false;
  }
  L->cap = cap;
  for (size_t i = 0; i < old.cap; i++)
    if (old.b[i].ptr) L->b[bslot(L, old.b[i].ptr, old.b[i].pid)] = old.b[i];
  free(old.b);
  return true;
}

/* Backward-shift deletion (linear probing, no tombstones). */
static void bdel(leaks *L, size_t hole) {
  size_t mask = L->cap - 1;
  for (size_t k = (hole + 1) & mask; L->b[k].ptr; k = (k + 1) & mask) {
    size_t home = (size_t)(bhash(L->b[k].ptr, L->b[k].pid) >> 16) & mask;
    bool stays = hole <= k ? (home > hole && home <= k)
                           : (home > hole || home <= k);
    if (stays) continue;
    L->b[hole] = L->b[k];
    hole = k;
  }
  L->b[hole].ptr = 0;
  L->n--;
}

static uint32_t tag_of(leaks *L, const char *name) {
  for (size_t i = 0; i < L->ntags; i++)
    if (!strcmp(L->tags[i], name)) return (uint32_t)i;
  char **t = realloc(L->tags, (L->ntags + 1) * sizeof *t);
  char *copy = etch__strdup(name);
  if (!t || !copy) {
    if (t) L->tags = t;
    free(copy);
    L->err = ETCH_ENOMEM;
    return 0;
  }
  L->tags = t;
  L->tags[L->ntags] = copy;
  return (uint32_t)L->ntags++;
}

static const etch_arg *arg(const etch_event *ev, const char *key) {
  for (size_t i = 0; i < ev->args_count; i++) {
    const char *k = ev->args[i].key ? ev->args[i].key : ev->args[i].flat_key;
    if (k && !strncmp(k, "debug.", 6) && !strcmp(k + 6, key))
      return &ev->args[i];
  }
  return NULL;
}

static bool arg_u64(const etch_arg *a, uint64_t *out) {
  if (!a) return false;
  switch (a->type) {
    case ETCH_VALUE_UINT:
    case ETCH_VALUE_POINTER: *out = a->v.u; return true;
    case ETCH_VALUE_INT: *out = (uint64_t)a->v.i; return true;
    default: return false;
  }
}

static void on_memory(const etch_event *ev, void *user) {
  leaks *L = user;
  if (L->err || ev->type != ETCH_EVENT_INSTANT) return;
  uint64_t ptr, size;
  if (!arg_u64(arg(ev, "ptr"), &ptr) || !ptr) return;
  bool is_alloc = arg_u64(arg(ev, "size"), &size);
  if (!is_alloc && strcmp(ev->name, "free") != 0) return;
  if ((L->n + 1) * 2 > L->cap && !bgrow(L)) {
    L->err = ETCH_ENOMEM;
    return;
  }
  size_t i = bslot(L, ptr, ev->pid);
  if (!is_alloc) {
    if (!L->b[i].ptr) {
      L->unknown_frees++;
      return;
    }
    L->frees++;
    L->live -= L->b[i].size;
    bdel(L, i);
    return;
  }
  L->allocs++;
  L->alloc_bytes += size;
  if (L->b[i].ptr) { /* allocated again without a free: the first is gone */
    L->live -= L->b[i].size;
  } else {
    L->n++;
  }
  L->b[i] = (block){ptr, ev->pid, tag_of(L, ev->name), size};
  L->live += size;
  if (L->live > L->peak) {
    L->peak = L->live;
    L->peak_ts = ev->ts;
  }
  return;
}

typedef struct group {
  uint32_t tag;
  uint64_t size, count;
} group;

static int cmp_group(const void *x, const void *y) {
  const group *a = x, *b = y;
  uint64_t ta = a->size * a->count, tb = b->size * b->count;
  if (ta != tb) return ta > tb ? -1 : 1;
  if (a->count != b->count) return a->count > b->count ? -1 : 1;
  if (a->tag != b->tag) return a->tag < b->tag ? -1 : 1;
  return (a->size > b->size) - (a->size < b->size);
}

static int cmp_group_key(const void *x, const void *y) {
  const group *a = x, *b = y;
  if (a->tag != b->tag) return a->tag < b->tag ? -1 : 1;
  return (a->size > b->size) - (a->size < b->size);
}

static int leaks_of(etch_reader *r, FILE *out, int top);

int etch__query_leaks_file(const char *path, FILE *out, int top,
                           bool allow_truncated) {
  etch_reader *r = NULL;
  int rc = etch_reader_open_file(&r, path);
  if (rc) return rc;
  etch_reader_set_allow_truncated(r, allow_truncated);
  return leaks_of(r, out, top);
}

int etch__query_leaks_memory(const void *data, size_t len, FILE *out,
                             int top) {
  etch_reader *r = NULL;
  int rc = etch_reader_open_memory(&r, data, len);
  if (rc) return rc;
  return leaks_of(r, out, top);
}

/* Reads `r` (and closes it) and prints the report. */
static int leaks_of(etch_reader *r, FILE *out, int top) {
  leaks L = {0};
  int rc = etch_reader_on(r, "memory", NULL, on_memory, &L);
  if (!rc) rc = etch_reader_run(r);
  int64_t first = 0, last = 0;
  if (!rc && etch_reader_time_bounds(r, &first, &last) != ETCH_OK) first = 0;
  etch_reader_close(r);
  if (!rc && L.err) rc = etch__error(L.err, "leaks: out of memory");

  /* Live blocks, grouped by tag and size. */
  group *g = NULL;
  size_t ng = 0;
  if (!rc && L.n) {
    g = etch__malloc(L.n * sizeof *g);
    if (!g) rc = ETCH_ENOMEM;
    for (size_t i = 0; g && i < L.cap; i++)
      if (L.b[i].ptr) g[ng++] = (group){L.b[i].tag, L.b[i].size, 1};
    if (g) qsort(g, ng, sizeof *g, cmp_group_key);
    size_t k = 0;
    for (size_t i = 0; g && i < ng; i++) {
      if (k && g[k - 1].tag == g[i].tag && g[k - 1].size == g[i].size)
        g[k - 1].count++;
      else
        g[k++] = g[i];
    }
    ng = k;
    if (g) qsort(g, ng, sizeof *g, cmp_group);
  }
  if (!rc) {
    uint64_t leaked = 0;
    for (size_t i = 0; i < ng; i++) leaked += g[i].size * g[i].count;
    char at[32];
    etch__fmt_dur(at, sizeof at, L.peak_ts - first);
    fprintf(out, "memory (category \"memory\")\n");
    etch__tt *t = etch__tt_new(2);
    etch__tt_cell(t, "allocations");
    etch__tt_cellf(t, "%llu (%llu bytes)", (unsigned long long)L.allocs,
                   (unsigned long long)L.alloc_bytes);
    etch__tt_cell(t, "frees");
    etch__tt_cellf(t, "%llu", (unsigned long long)L.frees);
    if (L.unknown_frees) {
      etch__tt_cell(t, "unmatched frees");
      etch__tt_cellf(t, "%llu (of blocks the trace never saw allocated)",
                     (unsigned long long)L.unknown_frees);
    }
    etch__tt_cell(t, "peak live");
    if (L.peak)
      etch__tt_cellf(t, "%llu bytes at %s", (unsigned long long)L.peak, at);
    else
      etch__tt_cell(t, "0 bytes");
    etch__tt_cell(t, "never freed");
    etch__tt_cellf(t, "%llu allocation%s, %llu bytes",
                   (unsigned long long)L.n, L.n == 1 ? "" : "s",
                   (unsigned long long)leaked);
    etch__tt_print(t, out, "  ", false);
    etch__tt_free(t);
    if (ng) {
      fprintf(out, "\nnever freed, by tag and size\n");
      t = etch__tt_new(4);
      const char *h[] = {"tag", "size", "count", "bytes"};
      for (size_t i = 0; i < 4; i++) etch__tt_header(t, i, h[i], i > 0);
      size_t shown = top > 0 && (size_t)top < ng ? (size_t)top : ng;
      for (size_t i = 0; i < shown; i++) {
        etch__tt_cell(t, L.tags[g[i].tag]);
        etch__tt_cellf(t, "%llu", (unsigned long long)g[i].size);
        etch__tt_cellf(t, "%llu", (unsigned long long)g[i].count);
        etch__tt_cellf(t, "%llu",
                       (unsigned long long)(g[i].size * g[i].count));
      }
      etch__tt_print(t, out, "  ", true);
      etch__tt_free(t);
      if (shown < ng)
        fprintf(out, "  ... and %zu more groups\n", ng - shown);
    }
  }
  free(g);
  free(L.b);
  for (size_t i = 0; i < L.ntags; i++) free(L.tags[i]);
  free(L.tags);
  return rc;
}

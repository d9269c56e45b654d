/*
 * leaks_sites.c - `etch leaks` by call site: what each allocation call
 * stack of a trace still holds, how much it allocated, and how many of its
 * allocations were temporary (see leaks_sites.h).
 *
 * A site is one whole call stack (the reader's callsite of its innermost
 * frame): the same function called from two places is two sites, each
 * shown with its function, file:line and the callers above it. A
 * temporary allocation is counted as heaptrack counts them: a block freed
 * before the thread that allocated it allocated anything else (here per
 * thread, the allocation and the free by the same process and thread).
 */
#include "query/leaks_sites.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "query/query.h"

#define CALLERS_SHOWN 3

static void note(etch__leak_sites *S, uint32_t site, int32_t n,
                 int64_t bytes) {
  if (ETCH_VEC_PUSH(&S->log, etch__leak_change, {site, n, bytes}))
    S->oom = true;
}

void etch__leak_sites_peak(etch__leak_sites *S) {
  const etch__leak_change *c = ETCH_VEC_AT(&S->log, etch__leak_change);
  size_t nlog = ETCH_VEC_COUNT(&S->log, etch__leak_change);
  for (size_t i = 0; i < nlog; i++) {
    ETCH_DCHECK(c[i].site < S->n); /* noted only for sites made */
    etch__leak_site *s = &S->s[c[i].site];
    s->peak_n += (uint64_t)(int64_t)c[i].n;
    s->peak_bytes += (uint64_t)c[i].bytes;
  }
  S->log.len = 0;
}

static uint64_t thread_key(const etch_event *ev) {
  return (uint64_t)(uint32_t)ev->pid << 32 | (uint32_t)ev->tid;
}

int64_t etch__leak_sites_alloc(etch__leak_sites *S, const etch_event *ev,
                               uint64_t ptr, uint64_t size) {
  int64_t i;
  if (!etch__u64map_get(&S->by_callsite, (uint64_t)ev->callsite_id, &i)) {
    if (ETCH_VEC_RESERVE(&S->sites, etch__leak_site, 1)) return -1;
    S->s = ETCH_VEC_AT(&S->sites, etch__leak_site); /* it may have moved */
    i = (int64_t)S->n;
    if (!etch__u64map_put(&S->by_callsite, (uint64_t)ev->callsite_id, i))
      return -1;
    (void)ETCH_VEC_PUSH(&S->sites, etch__leak_site,
                        {.callsite = ev->callsite_id}); /* room made above */
    S->s = ETCH_VEC_AT(&S->sites, etch__leak_site);
    S->n++;
  }
  etch__leak_site *s = &S->s[i];
  s->allocs++;
  s->bytes += size;
  s->live_n++;
  s->live_bytes += size;
  note(S, (uint32_t)i, 1, (int64_t)size);
  if (!etch__u64map_put(&S->last_alloc, thread_key(ev), (int64_t)ptr))
    return -1;
  return i;
}

void etch__leak_sites_free(etch__leak_sites *S, const etch_event *ev,
                           uint32_t site, uint64_t ptr, uint64_t size) {
  etch__leak_sites_gone(S, site, size);
  int64_t last;
  uint64_t k = thread_key(ev);
  if (etch__u64map_get(&S->last_alloc, k, &last) && (uint64_t)last == ptr) {
    S->s[site].temps++;
    etch__u64map_del(&S->last_alloc, k, NULL);
  }
}

void etch__leak_sites_gone(etch__leak_sites *S, uint32_t site, uint64_t size) {
  if (site >= S->n) return;
  S->s[site].live_n--;
  S->s[site].live_bytes -= size;
  note(S, site, -1, -(int64_t)size);
}

void etch__leak_sites_release(etch__leak_sites *S) {
  etch__vec_free(&S->sites);
  etch__vec_free(&S->log);
  etch__u64map_free(&S->by_callsite);
  etch__u64map_free(&S->last_alloc);
  memset(S, 0, sizeof *S);
}

/* ---- naming a site ------------------------------------------------------ */

typedef struct frame_name {
  const char *function; /* never NULL */
  const char *file;     /* "" when unknown */
  uint32_t line;
} frame_name;

/* A frame's name: its symbols', else the name interned with it, else its
 * object's and offset (in buf). */
static frame_name name_of(const etch_stacks *st, uint32_t fid, char *buf,
                          size_t n) {
  frame_name out = {"", "", 0};
  if (fid >= st->nframes) return out;
  const etch_stack_frame *f = &st->frames[fid];
  if (f->nsymbols && f->symbol < st->nsymbols) {
    const etch_stack_symbol *s = &st->symbols[f->symbol];
    out.function = s->name;
    out.file = s->source_file;
    out.line = s->line_number;
  } else if (f->name[0]) {
    out.function = f->name;
  } else {
    const char *obj = f->mapping < st->nmappings
                          ? st->mappings[f->mapping].name : "";
    const char *base = strrchr(obj, '/');
    snprintf(buf, n, "%s+0x%llx", base ? base + 1 : obj,
             (unsigned long long)f->rel_pc);
    out.function = buf;
  }
  return out;
}

static const etch_stack_callsite *callsite(const etch_stacks *st, int64_t id) {
  return id >= 0 && (uint64_t)id < st->ncallsites ? &st->callsites[id] : NULL;
}

static const char *base_name(const char *path) {
  const char *b = strrchr(path, '/');
  return b ? b + 1 : path;
}

/* "function", "file:line" and "caller < caller's caller ..." of a site. */
static void describe(const etch_stacks *st, int64_t cs, char *fn, size_t nfn,
                     char *loc, size_t nloc, char *callers, size_t ncallers) {
  char buf[300];
  const etch_stack_callsite *c = callsite(st, cs);
  frame_name top = c ? name_of(st, c->frame_id, buf, sizeof buf)
                     : (frame_name){"?", "", 0};
  snprintf(fn, nfn, "%s", top.function);
  if (top.file[0] && top.line)
    snprintf(loc, nloc, "%s:%u", base_name(top.file), top.line);
  else
    snprintf(loc, nloc, "%s", top.file[0] ? base_name(top.file) : "-");
  size_t len = 0;
  callers[0] = 0;
  int shown = 0;
  for (c = c ? callsite(st, c->parent_id) : NULL; c && shown < CALLERS_SHOWN;
       c = callsite(st, c->parent_id), shown++) {
    frame_name f = name_of(st, c->frame_id, buf, sizeof buf);
    int w = snprintf(callers + len, ncallers - len, "%s%s",
                     shown ? " < " : "", f.function);
    if (w < 0 || (size_t)w >= ncallers - len) break;
    len += (size_t)w;
  }
  if (!shown) snprintf(callers, ncallers, "-");
}

/* ---- sites as shown: stacks merged by their innermost frame ---------------- */

/*
 * A stack is where its innermost frame is: two stacks whose allocating
 * function and line are the same (a loop the compiler unrolled calls it
 * from two return addresses; two callers) are one row, shown with the
 * callers of its stack that allocated the most bytes and the number of
 * stacks merged.
 */
typedef struct shown {
  char fn[300], file[300], callers[1000];
  uint32_t line;
  int64_t callsite; /* the stack that allocated the most bytes */
  uint64_t best_bytes;
  uint64_t nstacks;
  etch__leak_site sum;
} shown;

/* The row of `f` among v[0..k) (by a hash of its function, file and line
 * in `ix`), or k with *key the key to add it under. */
static size_t row_of(const etch_u64map *ix, const shown *v, size_t k,
                     const frame_name *f, uint64_t *key) {
  uint64_t h = etch__hash_bytes(f->function, strlen(f->function), f->line) ^
               etch__mix64(etch__hash_bytes(f->file, strlen(f->file), 1));
  for (;; h++) {
    int64_t j;
    if (!etch__u64map_get(ix, h, &j)) {
      *key = h;
      return k;
    }
    const shown *g = &v[j];
    if (g->line == f->line && !strcmp(g->fn, f->function) &&
        !strcmp(g->file, f->file))
      return (size_t)j;
  }
}

static shown *merge(const etch__leak_sites *S, const etch_stacks *st,
                    size_t *n) {
  shown *v = S->n ? etch__calloc(S->n, sizeof *v) : NULL;
  etch_u64map ix = {0};
  size_t k = 0;
  for (size_t i = 0; v && i < S->n; i++) {
    const etch__leak_site *s = &S->s[i];
    char buf[300];
    const etch_stack_callsite *c = callsite(st, s->callsite);
    frame_name f = c ? name_of(st, c->frame_id, buf, sizeof buf)
                     : (frame_name){"?", "", 0};
    /* As the row keeps them (cut at its buffers), so long names match. */
    char fn[sizeof v->fn], file[sizeof v->file];
    snprintf(fn, sizeof fn, "%s", f.function);
    snprintf(file, sizeof file, "%s", f.file);
    f.function = fn;
    f.file = file;
    uint64_t key = 0;
    size_t j = row_of(&ix, v, k, &f, &key);
    if (j == k && !etch__u64map_put(&ix, key, (int64_t)k)) {
      free(v);
      v = NULL;
      break;
    }
    shown *g = &v[j];
    if (j == k) {
      k++;
      snprintf(g->fn, sizeof g->fn, "%s", f.function);
      snprintf(g->file, sizeof g->file, "%s", f.file);
      g->line = f.line;
    }
    g->nstacks++;
    if (g->nstacks == 1 || s->bytes > g->best_bytes) {
      g->best_bytes = s->bytes;
      g->callsite = s->callsite;
    }
    g->sum.allocs += s->allocs;
    g->sum.bytes += s->bytes;
    g->sum.temps += s->temps;
    g->sum.live_n += s->live_n;
    g->sum.live_bytes += s->live_bytes;
    g->sum.peak_n += s->peak_n;
    g->sum.peak_bytes += s->peak_bytes;
  }
  etch__u64map_free(&ix);
  for (size_t j = 0; v && j < k; j++) {
    char fn[300], loc[300];
    describe(st, v[j].callsite, fn, sizeof fn, loc, sizeof loc,
             v[j].callers, sizeof v[j].callers);
    v[j].sum.callsite = (int64_t)j; /* ties: first seen first */
  }
  *n = k;
  return v;
}

/* ---- orders ------------------------------------------------------------------ */

static int cmp_u64_desc(uint64_t a, uint64_t b) {
  return a != b ? (a > b ? -1 : 1) : 0;
}

static int tie(const shown *a, const shown *b) {
  int c = strcmp(a->fn, b->fn);
  return c ? c : (a->sum.callsite > b->sum.callsite) -
                     (a->sum.callsite < b->sum.callsite);
}

static int by_leaked(const void *x, const void *y) {
  const shown *a = x, *b = y;
  int c = cmp_u64_desc(a->sum.live_bytes, b->sum.live_bytes);
  if (!c) c = cmp_u64_desc(a->sum.live_n, b->sum.live_n);
  return c ? c : tie(a, b);
}

static int by_allocs(const void *x, const void *y) {
  const shown *a = x, *b = y;
  int c = cmp_u64_desc(a->sum.allocs, b->sum.allocs);
  if (!c) c = cmp_u64_desc(a->sum.bytes, b->sum.bytes);
  return c ? c : tie(a, b);
}

static int by_bytes(const void *x, const void *y) {
  const shown *a = x, *b = y;
  int c = cmp_u64_desc(a->sum.bytes, b->sum.bytes);
  if (!c) c = cmp_u64_desc(a->sum.allocs, b->sum.allocs);
  return c ? c : tie(a, b);
}

static int by_peak(const void *x, const void *y) {
  const shown *a = x, *b = y;
  int c = cmp_u64_desc(a->sum.peak_bytes, b->sum.peak_bytes);
  if (!c) c = cmp_u64_desc(a->sum.peak_n, b->sum.peak_n);
  return c ? c : tie(a, b);
}

static int by_temps(const void *x, const void *y) {
  const shown *a = x, *b = y;
  int c = cmp_u64_desc(a->sum.temps, b->sum.temps);
  return c ? c : by_allocs(x, y);
}

/* ---- text ------------------------------------------------------------------- */

enum { COL_LEAKED, COL_ALLOCS, COL_BYTES, COL_TEMPS, COL_PEAK };

static void table(FILE *out, const char *title, const shown *v, size_t n,
                  int top, int what) {
  size_t rows = 0;
  for (size_t i = 0; i < n; i++)
    if (what == COL_LEAKED  ? v[i].sum.live_n > 0
        : what == COL_TEMPS ? v[i].sum.temps > 0
        : what == COL_PEAK  ? v[i].sum.peak_n > 0
                            : true)
      rows++;
  if (!rows) return;
  fprintf(out, "\n%s\n", title);
  etch__tt *t = etch__tt_new(5);
  const char *counts[][2] = {{"count", "bytes"},
                             {"allocations", "bytes"},
                             {"bytes", "allocations"},
                             {"temporary", "allocations"},
                             {"count", "bytes"}};
  etch__tt_header(t, 0, "function", false);
  etch__tt_header(t, 1, "at", false);
  etch__tt_header(t, 2, counts[what][0], true);
  etch__tt_header(t, 3, counts[what][1], true);
  etch__tt_header(t, 4, "called from", false);
  size_t shown_rows = top > 0 && (size_t)top < rows ? (size_t)top : rows;
  for (size_t i = 0, k = 0; i < n && k < shown_rows; i++) {
    const etch__leak_site *s = &v[i].sum;
    uint64_t a, b;
    switch (what) {
      case COL_LEAKED: a = s->live_n, b = s->live_bytes; break;
      case COL_ALLOCS: a = s->allocs, b = s->bytes; break;
      case COL_BYTES: a = s->bytes, b = s->allocs; break;
      case COL_PEAK: a = s->peak_n, b = s->peak_bytes; break;
      default: a = s->temps, b = s->allocs; break;
    }
    if (!a && what != COL_ALLOCS && what != COL_BYTES) continue;
    etch__tt_cell(t, v[i].fn);
    if (v[i].file[0] && v[i].line)
      etch__tt_cellf(t, "%s:%u", base_name(v[i].file), v[i].line);
    else
      etch__tt_cell(t, v[i].file[0] ? base_name(v[i].file) : "-");
    etch__tt_cellf(t, "%llu", (unsigned long long)a);
    etch__tt_cellf(t, "%llu", (unsigned long long)b);
    if (v[i].nstacks > 1)
      etch__tt_cellf(t, "%s (%llu stacks)", v[i].callers,
                     (unsigned long long)v[i].nstacks);
    else
      etch__tt_cell(t, v[i].callers);
    k++;
  }
  etch__tt_print(t, out, "  ", true);
  etch__tt_free(t);
  if (shown_rows < rows)
    fprintf(out, "  ... and %zu more sites\n", rows - shown_rows);
}

void etch__leak_sites_print(FILE *out, const etch__leak_sites *S,
                            const etch_stacks *st, int top, unsigned flags,
                            const char *peak) {
  size_t n = 0;
  shown *v = merge(S, st, &n);
  if (!v) return;
  qsort(v, n, sizeof *v, by_leaked);
  table(out, "never freed, by call site", v, n, top, COL_LEAKED);
  if (flags & ETCH__LEAKS_HOTSPOTS) {
    qsort(v, n, sizeof *v, by_allocs);
    table(out, "most allocations, by call site", v, n, top, COL_ALLOCS);
    qsort(v, n, sizeof *v, by_bytes);
    table(out, "most bytes allocated, by call site", v, n, top, COL_BYTES);
    qsort(v, n, sizeof *v, by_temps);
    table(out, "temporary allocations (freed before the thread allocated "
               "again), by call site",
          v, n, top, COL_TEMPS);
    qsort(v, n, sizeof *v, by_peak);
    char title[200];
    snprintf(title, sizeof title, "live at the peak (%s), by call site", peak);
    table(out, title, v, n, top, COL_PEAK);
  }
  free(v);
}

/* ---- JSON ------------------------------------------------------------------- */

static void json_str(FILE *out, const char *s) {
  etch__json_string(out, s, strlen(s));
}

void etch__leak_sites_json(FILE *out, const etch__leak_sites *S,
                           const etch_stacks *st, int top) {
  size_t n = 0;
  shown *v = merge(S, st, &n);
  fputc('[', out);
  if (v) {
    qsort(v, n, sizeof *v, by_leaked);
    size_t rows = top > 0 && (size_t)top < n ? (size_t)top : n;
    for (size_t i = 0; i < rows; i++) {
      const etch__leak_site *s = &v[i].sum;
      fprintf(out, "%s\n  {\"function\": ", i ? "," : "");
      json_str(out, v[i].fn);
      fputs(", \"file\": ", out);
      json_str(out, v[i].file);
      fprintf(out, ", \"line\": %u, \"stacks\": %llu, \"frames\": [",
              v[i].line, (unsigned long long)v[i].nstacks);
      char buf[300];
      int k = 0;
      for (const etch_stack_callsite *c = callsite(st, v[i].callsite); c;
           c = callsite(st, c->parent_id), k++) {
        frame_name f = name_of(st, c->frame_id, buf, sizeof buf);
        fputs(k ? ", {\"function\": " : "{\"function\": ", out);
        json_str(out, f.function);
        fputs(", \"file\": ", out);
        json_str(out, f.file);
        fprintf(out, ", \"line\": %u}", f.line);
      }
      fprintf(out,
              "], \"never_freed\": %llu, \"never_freed_bytes\": %llu, "
              "\"allocations\": %llu, \"bytes\": %llu, \"temporary\": %llu, "
              "\"at_peak\": %llu, \"at_peak_bytes\": %llu}",
              (unsigned long long)s->live_n, (unsigned long long)s->live_bytes,
              (unsigned long long)s->allocs, (unsigned long long)s->bytes,
              (unsigned long long)s->temps, (unsigned long long)s->peak_n,
              (unsigned long long)s->peak_bytes);
    }
    free(v);
  }
  fputs(n ? "\n]" : "]", out);
}

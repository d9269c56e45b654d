/*
 * leaks.c - `etch leaks`: what a trace allocated and never freed, from the
 * memory events of etch/memory.h (category "memory": an instant named after
 * the tag with args ptr and size for an allocation, "free" with ptr for a
 * free).
 *
 * Events are read in timestamp order; blocks are matched by process and
 * address. What is still live at the end is grouped by tag and size, the
 * biggest total first; the peak is the most bytes live at once.
 *
 * A trace that lost data (a ring buffer overwrote chunks, a writer dropped
 * packets, the file is cut short) lost allocations and frees with it: the
 * report then says so, on stderr and in the report, with what it cannot
 * know.
 */
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/containers.h"
#include "base/map.h"
#include "query/leaks_sites.h"
#include "query/query.h"

/* The live blocks of one process: address -> size << 16 | tag index, and
 * address -> its site's index (blocks allocated with a call stack). */
typedef struct proc_blocks {
  int32_t pid;
  etch_u64map blocks;
  etch_u64map site_of;
} proc_blocks;

typedef struct leaks {
  etch_vec procv;      /* of proc_blocks */
  proc_blocks *procs;  /* its array (set as it moves) */
  size_t nprocs;
  etch__leak_sites sites; /* by call site (leaks_sites.c) */
  etch_vec tagv; /* of char *, owned */
  char **tags;   /* its array (set as it moves) */
  size_t ntags;
  uint64_t n; /* live blocks, every process */
  uint64_t allocs, frees, unknown_frees, alloc_bytes;
  uint64_t live, peak;
  int64_t peak_ts;
  int err;
} leaks;

#define SIZE_MAX48 ((1ull << 48) - 1)

static proc_blocks *blocks_of(leaks *L, int32_t pid) {
  for (size_t i = 0; i < L->nprocs; i++)
    if (L->procs[i].pid == pid) return &L->procs[i];
  proc_blocks *p = ETCH_VEC_NEW(&L->procv, proc_blocks);
  if (!p) return NULL;
  *p = (proc_blocks){.pid = pid};
  L->procs = ETCH_VEC_AT(&L->procv, proc_blocks);
  L->nprocs++;
  return p;
}

static uint32_t tag_of(leaks *L, const char *name) {
  for (size_t i = 0; i < L->ntags; i++)
    if (!strcmp(L->tags[i], name)) return (uint32_t)i;
  char *copy = etch__strdup(name);
  if (!copy || ETCH_VEC_PUSH(&L->tagv, char *, copy)) {
    free(copy);
    L->err = ETCH_ENOMEM;
    return 0;
  }
  L->tags = ETCH_VEC_AT(&L->tagv, char *);
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
  proc_blocks *pb = blocks_of(L, ev->pid);
  if (!pb) {
    L->err = ETCH_ENOMEM;
    return;
  }
  etch_u64map *m = &pb->blocks;
  int64_t old, site;
  if (!is_alloc) {
    if (!etch__u64map_del(m, ptr, &old)) {
      L->unknown_frees++;
      return;
    }
    L->frees++;
    L->n--;
    L->live -= (uint64_t)old >> 16;
    if (etch__u64map_del(&pb->site_of, ptr, &site))
      etch__leak_sites_free(&L->sites, ev, (uint32_t)site, ptr,
                            (uint64_t)old >> 16);
    return;
  }
  if (size > SIZE_MAX48) size = SIZE_MAX48;
  uint32_t tag = tag_of(L, ev->name);
  bool had;
  if (!etch__u64map_swap(m, ptr, (int64_t)(size << 16 | tag), &old, &had)) {
    L->err = ETCH_ENOMEM;
    return;
  }
  L->allocs++;
  L->alloc_bytes += size;
  if (had) { /* allocated again without a free: the first is gone */
    L->live -= (uint64_t)old >> 16;
    if (etch__u64map_del(&pb->site_of, ptr, &site))
      etch__leak_sites_gone(&L->sites, (uint32_t)site, (uint64_t)old >> 16);
  } else {
    L->n++;
  }
  L->live += size;
  if (ev->callsite_id >= 0) {
    int64_t s = etch__leak_sites_alloc(&L->sites, ev, ptr, size);
    if (s < 0 || !etch__u64map_put(&pb->site_of, ptr, s)) {
      L->err = ETCH_ENOMEM;
      return;
    }
  }
  if (L->live > L->peak) {
    L->peak = L->live;
    L->peak_ts = ev->ts;
    etch__leak_sites_peak(&L->sites);
  }
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

static int leaks_of(etch_reader *r, FILE *out, int top, unsigned flags,
                    const char *path, bool *lost);

int etch__query_leaks_file(const char *path, FILE *out, int top,
                           unsigned flags, bool allow_truncated, bool *lost) {
  etch_reader *r = NULL;
  if (lost) *lost = false;
  int rc = etch_reader_open_file(&r, path);
  if (rc) return rc;
  etch_reader_set_allow_truncated(r, allow_truncated);
  etch_reader_set_strict(r, !allow_truncated); /* --strict: both errors */
  return leaks_of(r, out, top, flags, path, lost);
}

int etch__query_leaks_memory(const void *data, size_t len, FILE *out,
                             int top) {
  etch_reader *r = NULL;
  int rc = etch_reader_open_memory(&r, data, len);
  if (rc) return rc;
  return leaks_of(r, out, top, ETCH__LEAKS_HOTSPOTS, NULL, NULL);
}

/* The reader's data-loss stats, named as in the stats table (etch stats,
 * etch query): any non-zero one means events may be missing. */
typedef struct loss_stat {
  const char *name;
  uint64_t value;
} loss_stat;

static size_t loss_stats(const etch_reader_stats *rs, loss_stat out[11]) {
  const loss_stat all[] = {
      {"traced_buf_chunks_overwritten", rs->trace_stats_chunks_overwritten},
      {"traced_buf_chunks_discarded", rs->trace_stats_chunks_discarded},
      {"traced_buf_trace_writer_packet_loss",
       rs->trace_stats_writer_packet_loss},
      {"traced_buf_patches_failed", rs->trace_stats_patches_failed},
      {"traced_buf_abi_violations", rs->trace_stats_abi_violations},
      {"etch_dropped_events", rs->etch_dropped_events},
      {"previous_packet_dropped", rs->previous_packet_dropped},
      {"packet_skipped_seq_needs_incremental_state_invalid",
       rs->packet_skipped_seq_needs_incremental_state_invalid},
      {"packet_sequence_id_missing", rs->packet_sequence_id_missing},
      {"interned_data_missing", rs->interned_data_missing},
      {"clock_conversion_failed", rs->clock_conversion_failed},
  };
  size_t n = 0;
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(all); i++)
    if (all[i].value) out[n++] = all[i];
  return n;
}

/* Reads `r` (and closes it) and prints the report. */
static int leaks_of(etch_reader *r, FILE *out, int top, unsigned flags,
                    const char *path, bool *lost) {
  leaks L = {0};
  int rc = etch_reader_on(r, "memory", NULL, on_memory, &L);
  if (!rc) rc = etch_reader_run(r);
  int64_t first = 0, last = 0;
  if (!rc && etch_reader_time_bounds(r, &first, &last) != ETCH_OK) first = 0;
  etch_reader_stats rs = {0};
  loss_stat ls[11];
  size_t nls = 0;
  if (!rc) {
    etch_reader_get_stats(r, &rs);
    nls = loss_stats(&rs, ls);
  }
  if (!rc && path) {
    if (rs.truncated_bytes)
      etch__query_warn_cut_short(path, rs.truncated_bytes,
                                 rs.truncated_offset);
    if (nls) {
      fprintf(stderr, "etch: warning: %s lost data (", path);
      for (size_t i = 0; i < nls; i++)
        fprintf(stderr, "%s%s %llu", i ? ", " : "", ls[i].name,
                (unsigned long long)ls[i].value);
      fprintf(stderr,
              "): allocations and frees are missing, the leak report is "
              "not exact\n");
    }
  }
  if (lost) *lost = nls > 0;
  /* The call stacks stay the reader's: it is closed after the report. */
  etch_stacks st = {0};
  if (!rc && etch_reader_stacks(r, &st)) L.err = ETCH_ENOMEM;
  if (!rc && (L.err || L.sites.oom))
    rc = etch__error(ETCH_ENOMEM, "leaks: out of memory");

  /* Live blocks, grouped by tag and size. */
  group *g = NULL;
  size_t ng = 0;
  if (!rc && L.n) {
    g = etch__malloc(L.n * sizeof *g);
    if (!g) rc = ETCH_ENOMEM;
    for (size_t p = 0; g && p < L.nprocs; p++) {
      const etch_u64map *m = &L.procs[p].blocks;
      int64_t v;
      for (size_t i = 0; i < m->cap; i++)
        if (etch__u64map_at(m, i, NULL, &v))
          g[ng++] = (group){(uint32_t)(v & 0xffff), (uint64_t)v >> 16, 1};
    }
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
  uint64_t leaked = 0;
  for (size_t i = 0; i < ng; i++) leaked += g[i].size * g[i].count;
  if (!rc && (flags & ETCH__LEAKS_JSON)) {
    fprintf(out,
            "{\"allocations\": %llu, \"allocated_bytes\": %llu, "
            "\"frees\": %llu, \"unmatched_frees\": %llu,\n"
            " \"peak_bytes\": %llu, \"peak_ts\": %lld, "
            "\"never_freed\": %llu, \"never_freed_bytes\": %llu, "
            "\"exact\": %s,\n \"sites\": ",
            (unsigned long long)L.allocs, (unsigned long long)L.alloc_bytes,
            (unsigned long long)L.frees, (unsigned long long)L.unknown_frees,
            (unsigned long long)L.peak, (long long)L.peak_ts,
            (unsigned long long)L.n, (unsigned long long)leaked,
            nls || rs.truncated_bytes ? "false" : "true");
    etch__leak_sites_json(out, &L.sites, &st, top);
    fputs("}\n", out);
  } else if (!rc) {
    char at[32];
    etch__fmt_dur(at, sizeof at, etch__sat_sub(L.peak_ts, first));
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
    char peak[80];
    snprintf(peak, sizeof peak, "%llu bytes at %s", (unsigned long long)L.peak,
             at);
    etch__leak_sites_print(out, &L.sites, &st, top, flags, peak);
    if (nls || rs.truncated_bytes) {
      fprintf(out, "\nNOT EXACT: the trace lost data\n");
      for (size_t i = 0; i < nls; i++)
        fprintf(out, "  %s %llu\n", ls[i].name,
                (unsigned long long)ls[i].value);
      if (rs.truncated_bytes)
        fprintf(out, "  cut short: %llu bytes at the end\n",
                (unsigned long long)rs.truncated_bytes);
      fprintf(out,
              "Allocations and frees in what was lost are not in the trace,\n"
              "and which they were cannot be known: a block listed as never\n"
              "freed may have been freed (its free was lost), blocks whose\n"
              "allocation was lost are not listed (their frees count as\n"
              "unmatched), and the counts and the peak may be off either way.\n"
              "Record with a buffer that holds the whole run (etch record\n"
              "--malloc picks one; see docs/memory.md).\n");
    }
  }
  free(g);
  etch_reader_close(r);
  etch__leak_sites_release(&L.sites);
  for (size_t p = 0; p < L.nprocs; p++) {
    etch__u64map_free(&L.procs[p].blocks);
    etch__u64map_free(&L.procs[p].site_of);
  }
  etch__vec_free(&L.procv);
  for (size_t i = 0; i < L.ntags; i++) free(L.tags[i]);
  etch__vec_free(&L.tagv);
  return rc;
}

/*
 * import_save.c - the importer of a live import (import_live.c) saved as
 * bytes between two of its steps and restored into a new importer on the
 * same tables, which then steps on as if it had never stopped: `etch
 * query` on a trace being recorded, a process each time (cache.c).
 *
 * What is saved is what a step leaves for the next: the tracks (with
 * their open slices, totals and counter statistics), processes and threads
 * and the maps that find them, the per-name summary, the losses, the flow
 * steps, frames and bookmarks, the ids handed out and the rows' keys
 * (rows.c). What a step makes again is not (the machines, the flows'
 * links, the bounds and stats given to the tables). An importer with call
 * stacks or CPU samples is not saved (ETCH_EUNSUPPORTED: read cold).
 *
 * Restoring trusts nothing: every count is checked against the bytes
 * left, every index against what it indexes; a save that does not add up
 * is ETCH_EFORMAT.
 */
#include <stdlib.h>
#include <string.h>

#include "query/import_int.h"
#include "reader/save.h"

#define IMP_MAGIC 0x5453504d49484345ull /* "ECHIMPST" */
#define IMP_VERSION 1u

/* ---- saving ---------------------------------------------------------------------- */

static void save_map(etch__sv_w *w, const etch_u64map *m) {
  etch__sv_u64(w, m->n);
  for (size_t i = 0; i < m->cap; i++) {
    uint64_t k;
    int64_t v;
    if (!etch__u64map_at(m, i, &k, &v)) continue;
    etch__sv_u64(w, k);
    etch__sv_i64(w, v);
  }
}

static void save_track(etch__sv_w *w, const qtrack *t) {
  etch__sv_u64(w, t->uuid);
  etch__sv_u64(w, t->parent_uuid);
  etch__sv_u32(w, t->machine);
  etch__sv_u32(w, (uint32_t)t->kind);
  etch__sv_str(w, t->name);
  etch__sv_u32(w, (uint32_t)t->pid);
  etch__sv_u32(w, (uint32_t)t->tid);
  etch__sv_i64(w, t->id);
  etch__sv_str(w, t->unit);
  etch__sv_i64(w, t->unit_multiplier);
  etch__sv_u8(w, t->is_incremental);
  etch__sv_u32(w, t->depth);
  for (uint32_t i = 0; i < t->depth; i++) {
    const open_slice *s = &t->stack[i];
    etch__sv_i64(w, s->id);
    etch__sv_i64(w, s->ts);
    etch__sv_i64(w, s->child_dur);
    etch__sv_i64(w, s->arg_set_id);
    etch__sv_str(w, s->name);
    etch__sv_str(w, s->cat);
  }
  etch__sv_u8(w, t->has_busy);
  etch__sv_u8(w, t->has_dropped);
  etch__sv_i64(w, t->busy);
  etch__sv_i64(w, t->dropped);
  etch__sv_u64(w, t->cn);
  etch__sv_u64(w, t->cnum);
  etch__sv_f64(w, t->cmin);
  etch__sv_f64(w, t->cmax);
  etch__sv_f64(w, t->csum);
  etch__sv_f64(w, t->clast);
  etch__sv_i64(w, t->clast_ts);
  etch__sv_i64(w, t->nest_last);
  etch__sv_u8(w, t->nested);
  etch__sv_u8(w, t->idle);
  etch__sv_u64(w, t->idle_rank);
  etch__sv_str(w, t->cmdline);
}

static int save_keys(etch__sv_w *w, const etch__rows *rows, bool args) {
  const char **p;
  size_t n;
  int rc = etch__rows_get_keys(rows, args, &p, &n);
  if (rc) return rc;
  etch__sv_u64(w, n);
  for (size_t i = 0; i < 2 * n; i++) etch__sv_str(w, p[i]);
  free(p);
  return ETCH_OK;
}

int etch__imp_save(const etch__importer *imp, etch__sv_w *w) {
  if (imp->err || imp->went_back || !imp->live || !imp->rows)
    return etch__error(ETCH_ESTATE, "import: only a live import between "
                                    "steps is saved");
  if (imp->ncallstacks || imp->samples)
    return etch__error(ETCH_EUNSUPPORTED, "import: call stacks and samples "
                                          "are not saved");
  etch__sv_u64(w, IMP_MAGIC);
  etch__sv_u32(w, IMP_VERSION);
  etch__sv_i64(w, imp->next_slice_id);
  etch__sv_i64(w, imp->next_arg_set_id);
  const etch__import_counts *c = &imp->counts;
  uint64_t counts[] = {c->events, c->slices,  c->instants, c->open_slices,
                       c->unmatched_ends, c->counters, c->flows,
                       c->flows_cut, c->args, c->tracks};
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(counts); i++)
    etch__sv_u64(w, counts[i]);
  etch__sv_i64(w, imp->nactive);
  etch__sv_u64(w, imp->idle_clock);
  etch__sv_u64(w, imp->ntracks);
  for (size_t i = 0; i < imp->ntracks; i++) save_track(w, &imp->tracks[i]);
  save_map(w, &imp->track_by_uuid);
  etch__sv_u64(w, imp->nprocs);
  for (size_t i = 0; i < imp->nprocs; i++) {
    etch__sv_u32(w, imp->procs[i].machine);
    etch__sv_u32(w, (uint32_t)imp->procs[i].pid);
    etch__sv_str(w, imp->procs[i].name);
    etch__sv_str(w, imp->procs[i].cmdline);
  }
  save_map(w, &imp->proc_by_pid);
  etch__sv_u64(w, imp->nthreads);
  for (size_t i = 0; i < imp->nthreads; i++) {
    etch__sv_u32(w, imp->threads[i].machine);
    etch__sv_u32(w, (uint32_t)imp->threads[i].pid);
    etch__sv_u32(w, (uint32_t)imp->threads[i].tid);
    etch__sv_str(w, imp->threads[i].name);
  }
  save_map(w, &imp->thread_by_key);
  etch__sv_u64(w, imp->nlosses);
  for (size_t i = 0; i < imp->nlosses; i++) etch__sv_i64(w, imp->losses[i]);
  etch__sv_u64(w, imp->nsummary);
  for (size_t i = 0; i < imp->nsummary; i++) {
    const name_summary *s = &imp->summary[i];
    etch__sv_str(w, s->name);
    etch__sv_i64(w, s->count);
    etch__sv_i64(w, s->total);
    etch__sv_i64(w, s->self);
    etch__sv_i64(w, s->max);
  }
  etch__sv_u64(w, imp->nsteps);
  for (size_t i = 0; i < imp->nsteps; i++) {
    const flow_step *s = &imp->steps[i];
    etch__sv_i64(w, s->ts);
    etch__sv_u64(w, s->gidx);
    etch__sv_i64(w, s->slice_id);
    etch__sv_u64(w, s->fid);
    etch__sv_u32(w, s->k);
    etch__sv_u8(w, s->term);
  }
  etch__sv_u64(w, imp->nframes);
  for (size_t i = 0; i < imp->nframes; i++) {
    etch__sv_i64(w, imp->frames[i].ts);
    etch__sv_i64(w, imp->frames[i].dur);
  }
  etch__sv_u64(w, imp->nbookmarks);
  for (size_t i = 0; i < imp->nbookmarks; i++) {
    etch__sv_i64(w, imp->bookmarks[i].ts);
    etch__sv_str(w, imp->bookmarks[i].name);
  }
  int64_t ids[4];
  etch__rows_get_ids(imp->rows, ids);
  for (int i = 0; i < 4; i++) etch__sv_i64(w, ids[i]);
  int rc = save_keys(w, imp->rows, false);
  if (!rc) rc = save_keys(w, imp->rows, true);
  etch__sv_u64(w, IMP_MAGIC);
  if (!rc && w->oom) rc = etch__error(ETCH_ENOMEM, "import: out of memory");
  return rc;
}

/* ---- restoring ------------------------------------------------------------------- */

/* A string read and interned in the importer's pool (NULL stays NULL). */
static const char *get_str(etch__importer *imp, etch__sv_r *in) {
  size_t n;
  bool is_null;
  const char *s = etch__sv_get_str(in, &n, &is_null);
  if (in->bad || is_null) return NULL;
  const char *p = etch__strpool_get(&imp->strings, s, n);
  if (!p) in->bad = true;
  return p;
}

/* An array of `n` items of `size` bytes, at least `min` bytes each in
 * the input; NULL with in->bad when it cannot be. */
static void *get_array(etch__sv_r *in, size_t *n, size_t *cap, size_t size,
                       size_t min) {
  *n = etch__sv_get_count(in, min, SIZE_MAX / 64);
  if (in->bad || !*n) return NULL;
  void *a = etch__calloc(*n, size);
  if (!a) in->bad = true;
  else if (cap) *cap = *n;
  return a;
}

/* A map of (key, value < lim) entries. */
static void get_map(etch__sv_r *in, etch_u64map *m, size_t lim) {
  size_t n = etch__sv_get_count(in, 16, SIZE_MAX / 64);
  for (size_t i = 0; i < n && !in->bad; i++) {
    uint64_t k = etch__sv_get_u64(in);
    int64_t v = etch__sv_get_i64(in);
    if (v < 0 || (uint64_t)v >= lim || etch__u64map_get(m, k, NULL) ||
        !etch__u64map_put(m, k, v))
      in->bad = true;
  }
}

static void get_track(etch__importer *imp, etch__sv_r *in, qtrack *t) {
  t->uuid = etch__sv_get_u64(in);
  t->parent_uuid = etch__sv_get_u64(in);
  t->machine = etch__sv_get_u32(in);
  uint32_t kind = etch__sv_get_u32(in);
  if (kind > ETCH_TRACK_COUNTER) in->bad = true;
  t->kind = (etch_track_kind)kind;
  t->name = get_str(imp, in);
  t->pid = (int32_t)etch__sv_get_u32(in);
  t->tid = (int32_t)etch__sv_get_u32(in);
  t->id = etch__sv_get_i64(in);
  t->unit = get_str(imp, in);
  t->unit_multiplier = etch__sv_get_i64(in);
  t->is_incremental = etch__sv_get_bool(in);
  uint32_t depth = etch__sv_get_u32(in);
  if (in->bad || depth > in->left / 48) {
    in->bad = true;
    return;
  }
  if (depth) {
    t->stack = etch__calloc(depth, sizeof *t->stack);
    if (!t->stack) {
      in->bad = true;
      return;
    }
    t->cap = t->depth = depth;
  }
  for (uint32_t i = 0; i < depth; i++) {
    open_slice *s = &t->stack[i];
    s->id = etch__sv_get_i64(in);
    s->ts = etch__sv_get_i64(in);
    s->child_dur = etch__sv_get_i64(in);
    s->arg_set_id = etch__sv_get_i64(in);
    s->name = get_str(imp, in);
    s->cat = get_str(imp, in);
  }
  t->has_busy = etch__sv_get_bool(in);
  t->has_dropped = etch__sv_get_bool(in);
  t->busy = etch__sv_get_i64(in);
  t->dropped = etch__sv_get_i64(in);
  t->cn = etch__sv_get_u64(in);
  t->cnum = etch__sv_get_u64(in);
  t->cmin = etch__sv_get_f64(in);
  t->cmax = etch__sv_get_f64(in);
  t->csum = etch__sv_get_f64(in);
  t->clast = etch__sv_get_f64(in);
  t->clast_ts = etch__sv_get_i64(in);
  t->nest_last = etch__sv_get_i64(in);
  t->nested = etch__sv_get_bool(in);
  t->idle = etch__sv_get_bool(in);
  t->idle_rank = etch__sv_get_u64(in);
  t->cmdline = get_str(imp, in);
}

static void get_keys(etch__importer *imp, etch__sv_r *in, bool args) {
  size_t n = etch__sv_get_count(in, 8, SIZE_MAX / 64);
  for (size_t i = 0; i < n && !in->bad; i++) {
    const char *a = get_str(imp, in), *b = get_str(imp, in);
    if (in->bad || etch__rows_add_key(imp->rows, args, a, b)) in->bad = true;
  }
}

/* The parts whose sizes are the importer's (tracks, processes, threads). */
static void get_entities(etch__importer *imp, etch__sv_r *in) {
  imp->tracks = get_array(in, &imp->ntracks, &imp->cap_tracks,
                          sizeof *imp->tracks, 100);
  for (size_t i = 0; i < imp->ntracks && !in->bad; i++)
    get_track(imp, in, &imp->tracks[i]);
  get_map(in, &imp->track_by_uuid, imp->ntracks);
  if (!in->bad && imp->track_by_uuid.n != imp->ntracks) in->bad = true;
  for (size_t i = 0; i < imp->ntracks && !in->bad; i++)
    if (imp->tracks[i].id < 0 || imp->tracks[i].id > imp->nactive + (int64_t)imp->ntracks)
      in->bad = true;
  imp->procs = get_array(in, &imp->nprocs, &imp->cap_procs,
                         sizeof *imp->procs, 16);
  for (size_t i = 0; i < imp->nprocs && !in->bad; i++) {
    imp->procs[i].machine = etch__sv_get_u32(in);
    imp->procs[i].pid = (int32_t)etch__sv_get_u32(in);
    imp->procs[i].name = get_str(imp, in);
    imp->procs[i].cmdline = get_str(imp, in);
  }
  get_map(in, &imp->proc_by_pid, imp->nprocs);
  imp->threads = get_array(in, &imp->nthreads, &imp->cap_threads,
                           sizeof *imp->threads, 16);
  for (size_t i = 0; i < imp->nthreads && !in->bad; i++) {
    imp->threads[i].machine = etch__sv_get_u32(in);
    imp->threads[i].pid = (int32_t)etch__sv_get_u32(in);
    imp->threads[i].tid = (int32_t)etch__sv_get_u32(in);
    imp->threads[i].name = get_str(imp, in);
  }
  get_map(in, &imp->thread_by_key, imp->nthreads);
}

int etch__imp_restore(etch__importer *imp, etch__sv_r *in) {
  if (!imp->live || !imp->rows || imp->ntracks || imp->nsummary)
    return etch__error(ETCH_ESTATE, "import: state is restored into a new "
                                    "live importer");
  if (etch__sv_get_u64(in) != IMP_MAGIC || etch__sv_get_u32(in) != IMP_VERSION)
    return etch__error(ETCH_EFORMAT, "saved import: not of this version");
  imp->next_slice_id = etch__sv_get_i64(in);
  imp->next_arg_set_id = etch__sv_get_i64(in);
  if (imp->next_slice_id < 0 || imp->next_arg_set_id < 0) in->bad = true;
  uint64_t counts[10];
  for (size_t i = 0; i < 10; i++) counts[i] = etch__sv_get_u64(in);
  imp->counts = (etch__import_counts){
      counts[0], counts[1], counts[2], counts[3], counts[4],
      counts[5], counts[6], counts[7], counts[8], counts[9]};
  imp->nactive = etch__sv_get_i64(in);
  if (imp->nactive < 0) in->bad = true;
  imp->idle_clock = etch__sv_get_u64(in);
  get_entities(imp, in);
  imp->losses = get_array(in, &imp->nlosses, &imp->cap_losses,
                          sizeof *imp->losses, 8);
  for (size_t i = 0; i < imp->nlosses && !in->bad; i++)
    imp->losses[i] = etch__sv_get_i64(in);
  imp->summary = get_array(in, &imp->nsummary, &imp->cap_summary,
                           sizeof *imp->summary, 36);
  for (size_t i = 0; i < imp->nsummary && !in->bad; i++) {
    name_summary *s = &imp->summary[i];
    s->name = get_str(imp, in);
    s->count = etch__sv_get_i64(in);
    s->total = etch__sv_get_i64(in);
    s->self = etch__sv_get_i64(in);
    s->max = etch__sv_get_i64(in);
    uint64_t key = (uint64_t)(uintptr_t)s->name;
    if (in->bad || etch__u64map_get(&imp->summary_by_name, key, NULL) ||
        !etch__u64map_put(&imp->summary_by_name, key, (int64_t)i))
      in->bad = true;
  }
  imp->steps = get_array(in, &imp->nsteps, &imp->cap_steps,
                         sizeof *imp->steps, 37);
  for (size_t i = 0; i < imp->nsteps && !in->bad; i++) {
    flow_step *s = &imp->steps[i];
    s->ts = etch__sv_get_i64(in);
    s->gidx = etch__sv_get_u64(in);
    s->slice_id = etch__sv_get_i64(in);
    s->fid = etch__sv_get_u64(in);
    s->k = etch__sv_get_u32(in);
    s->term = etch__sv_get_bool(in);
  }
  imp->frames = get_array(in, &imp->nframes, &imp->cap_frames,
                          sizeof *imp->frames, 16);
  for (size_t i = 0; i < imp->nframes && !in->bad; i++) {
    imp->frames[i].ts = etch__sv_get_i64(in);
    imp->frames[i].dur = etch__sv_get_i64(in);
  }
  imp->bookmarks = get_array(in, &imp->nbookmarks, &imp->cap_bookmarks,
                             sizeof *imp->bookmarks, 12);
  for (size_t i = 0; i < imp->nbookmarks && !in->bad; i++) {
    imp->bookmarks[i].ts = etch__sv_get_i64(in);
    imp->bookmarks[i].name = get_str(imp, in);
  }
  int64_t ids[4];
  for (int i = 0; i < 4; i++) ids[i] = etch__sv_get_i64(in);
  if (!in->bad && etch__rows_set_ids(imp->rows, ids)) in->bad = true;
  get_keys(imp, in, false);
  get_keys(imp, in, true);
  if (etch__sv_get_u64(in) != IMP_MAGIC || in->bad)
    return etch__error(ETCH_EFORMAT, "saved import: cut short or "
                                     "inconsistent");
  imp->last_track = NULL;
  return ETCH_OK;
}

/*
 * import_stats.c - etch stats without a database: the summaries the
 * importer kept while it read (per name, thread, counter track, drops,
 * frames, bookmarks), handed out as etch__stats_data.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "query/import_int.h"

/* ---- etch stats without a database ----------------------------------------------- */

static char *dup_or_null(const char *s) { return s ? etch__strdup(s) : NULL; }

typedef struct thr_acc {
  int64_t utid, busy;
} thr_acc;

static int cmp_thr(const void *x, const void *y) {
  const etch__stats_thread *a = x, *b = y;
  if (a->machine != b->machine) return a->machine < b->machine ? -1 : 1;
  if (a->busy != b->busy) return a->busy > b->busy ? -1 : 1;
  return (a->tid > b->tid) - (a->tid < b->tid);
}

typedef struct ctr_ref {
  const qtrack *t;
} ctr_ref;

static int cmp_ctr(const void *x, const void *y) {
  const qtrack *a = ((const ctr_ref *)x)->t, *b = ((const ctr_ref *)y)->t;
  const char *p = a->name, *q = b->name;
  if (p != q) {
    if (!p || !q) return p ? 1 : -1;
    int c = strcmp(p, q);
    if (c) return c;
  }
  return (a->id > b->id) - (a->id < b->id);
}

static int cmp_drop(const void *x, const void *y) {
  const etch__stats_dropped *a = x, *b = y;
  if (a->has_tid != b->has_tid) return a->has_tid ? 1 : -1;
  return (a->tid > b->tid) - (a->tid < b->tid);
}

int etch__importer_stats_data(const etch__importer *imp, int top,
                              etch__stats_data *d) {
  memset(d, 0, sizeof *d);
  if (imp->err) return imp->err;
  bool bounds = imp->first_ts <= imp->last_ts;
  d->start = bounds ? imp->first_ts : 1;
  d->end = bounds ? imp->last_ts : 0;
  d->events = (int64_t)imp->rstats.track_events;
  d->slices = (int64_t)imp->counts.slices;
  d->instants = (int64_t)imp->counts.instants;
  d->open_slices = (int64_t)imp->counts.open_slices;
  d->counter_values = (int64_t)imp->counts.counters;
  d->flows = (int64_t)imp->counts.flows;
  d->tracks = (int64_t)imp->ntracks;
  d->processes = (int64_t)imp->nprocs;
  d->threads = (int64_t)imp->nthreads;
  bool nomem = false;

  /* Top slices: slice_summary's rows, sorted as its queries sort them. */
  for (int pass = 0; pass < 2; pass++) {
    etch__stats_top *rows =
        etch__calloc(imp->nsummary ? imp->nsummary : 1, sizeof *rows);
    if (!rows) {
      nomem = true;
      break;
    }
    for (size_t i = 0; i < imp->nsummary; i++) {
      const name_summary *n = &imp->summary[i];
      rows[i] = (etch__stats_top){.name = dup_or_null(n->name),
                                  .count = n->count,
                                  .total = n->total,
                                  .self = n->self,
                                  .max = n->max};
    }
    if (pass == 0)
      etch__stats_sort_top(rows, imp->nsummary, false, (size_t)top,
                           &d->by_total, &d->n_by_total);
    else
      etch__stats_sort_top(rows, imp->nsummary, true, (size_t)top,
                           &d->by_self, &d->n_by_self);
  }

  /* Threads: busy time of thread tracks, summed per thread. */
  size_t ntr = imp->ntracks ? imp->ntracks : 1;
  d->thr = etch__calloc(ntr, sizeof *d->thr);
  int64_t *slot = etch__malloc((imp->nthreads + 1) * sizeof *slot);
  if (!d->thr || !slot) nomem = true;
  for (size_t i = 0; !nomem && i <= imp->nthreads; i++) slot[i] = -1;
  for (size_t i = 0; !nomem && i < imp->ntracks; i++) {
    const qtrack *t = &imp->tracks[i];
    int64_t v;
    if (t->kind == ETCH_TRACK_COUNTER) d->counter_tracks++;
    if (!t->has_busy || t->kind != ETCH_TRACK_THREAD ||
        !etch__imp_find_thread(imp, t->machine, t->pid, t->tid, &v, NULL))
      continue;
    if (slot[v] < 0) {
      const qthread *th = &imp->threads[v];
      int64_t p;
      etch__stats_thread *x = &d->thr[d->nthr];
      slot[v] = (int64_t)d->nthr++;
      x->thread = dup_or_null(th->name);
      x->tid = th->tid;
      x->machine = th->machine;
      if (th->pid && etch__imp_find_proc(imp, th->machine, th->pid, &p, NULL)) {
        x->has_pid = true;
        x->pid = imp->procs[p].pid;
        x->process = dup_or_null(imp->procs[p].name);
      }
    }
    d->thr[slot[v]].busy += t->busy;
  }
  /* Machines, with their processes and threads counted. */
  if (!nomem && imp->nmachines > 1) {
    d->machines = etch__calloc(imp->nmachines, sizeof *d->machines);
    if (!d->machines) nomem = true;
    for (size_t i = 0; !nomem && i < imp->nmachines; i++) {
      const etch_machine_info *m = &imp->machines[i];
      etch__stats_machine *x = &d->machines[d->nmachines++];
      x->id = (int64_t)i;
      x->raw_id = m->raw_id;
      x->name = dup_or_null(m->name);
      x->sysname = dup_or_null(m->sysname);
      x->release = dup_or_null(m->release);
      x->arch = dup_or_null(m->arch);
    }
    for (size_t i = 0; !nomem && i < imp->nprocs; i++)
      if (imp->procs[i].machine < d->nmachines)
        d->machines[imp->procs[i].machine].processes++;
    for (size_t i = 0; !nomem && i < imp->nthreads; i++)
      if (imp->threads[i].machine < d->nmachines)
        d->machines[imp->threads[i].machine].threads++;
  }
  free(slot);
  if (d->nthr) qsort(d->thr, d->nthr, sizeof *d->thr, cmp_thr);

  /* Counters, by track name then id. */
  ctr_ref *refs = etch__calloc(ntr, sizeof *refs);
  d->ctr = etch__calloc(ntr, sizeof *d->ctr);
  if (!refs || !d->ctr) nomem = true;
  size_t nref = 0;
  for (size_t i = 0; !nomem && i < imp->ntracks; i++)
    if (imp->tracks[i].cn) refs[nref++].t = &imp->tracks[i];
  if (nref) qsort(refs, nref, sizeof *refs, cmp_ctr);
  for (size_t i = 0; i < nref; i++) {
    const qtrack *t = refs[i].t;
    d->ctr[d->nctr++] = (etch__stats_counter){
        .track = dup_or_null(t->name),
        .unit = t->kind == ETCH_TRACK_COUNTER ? dup_or_null(t->unit) : NULL,
        .count = (int64_t)t->cn,
        .min = t->cnum ? t->cmin : NAN,
        .max = t->cnum ? t->cmax : NAN,
        .mean = t->cnum ? t->csum / (double)t->cnum : NAN,
        .last = t->clast};
  }
  free(refs);

  /* Data loss: the stats table's non-zero data_loss and error rows. */
  stat_row rows[kStatRows];
  etch__import_fill_stat_rows(imp, &imp->rstats, rows);
  d->loss = etch__calloc(kStatRows, sizeof *d->loss);
  if (!d->loss) nomem = true;
  for (size_t i = 0; !nomem && i < kStatRows; i++) {
    if (!rows[i].value || !strcmp(rows[i].severity, "info")) continue;
    etch__stats_loss *l = &d->loss[d->nloss++];
    *l = (etch__stats_loss){.name = etch__strdup(rows[i].name),
                            .value = (int64_t)rows[i].value,
                            .description = etch__strdup(rows[i].description)};
    if (!l->name || !l->description) nomem = true; /* never a "?" instead */
  }

  /* etch.dropped_events per track. */
  d->drop = etch__calloc(ntr, sizeof *d->drop);
  if (!d->drop) nomem = true;
  for (size_t i = 0; !nomem && i < imp->ntracks; i++) {
    const qtrack *t = &imp->tracks[i];
    if (!t->has_dropped) continue;
    etch__stats_dropped *x = &d->drop[d->ndrop++];
    x->dropped = t->dropped;
    int64_t v, p;
    if (t->kind == ETCH_TRACK_THREAD &&
        etch__imp_find_thread(imp, t->machine, t->pid, t->tid, &v, NULL)) {
      const qthread *th = &imp->threads[v];
      x->thread = dup_or_null(th->name);
      x->has_tid = true;
      x->tid = th->tid;
      if (th->pid && etch__imp_find_proc(imp, th->machine, th->pid, &p, NULL)) {
        x->has_pid = true;
        x->pid = imp->procs[p].pid;
      }
    }
  }
  if (d->ndrop) qsort(d->drop, d->ndrop, sizeof *d->drop, cmp_drop);

  /* CPU samples and the functions they were in (import_samples.c). */
  if (!nomem && !etch__import_samples_stats(imp, d)) nomem = true;

  /* Frames and bookmarks, in time order. */
  if (imp->nframes) {
    d->frames = etch__malloc(imp->nframes * sizeof *d->frames);
    if (!d->frames) nomem = true;
  }
  for (size_t i = 0; !nomem && i < imp->nframes; i++)
    d->frames[d->nframes++] = imp->frames[i];
  if (d->nframes) qsort(d->frames, d->nframes, sizeof *d->frames,
                        etch__stats_cmp_frame);
  if (imp->nbookmarks) {
    d->bookmarks = etch__calloc(imp->nbookmarks, sizeof *d->bookmarks);
    if (!d->bookmarks) nomem = true;
  }
  for (size_t i = 0; !nomem && i < imp->nbookmarks; i++)
    d->bookmarks[d->nbookmarks++] = (etch__stats_bookmark){
        imp->bookmarks[i].ts, dup_or_null(imp->bookmarks[i].name)};
  if (d->nbookmarks) qsort(d->bookmarks, d->nbookmarks, sizeof *d->bookmarks,
                           etch__stats_cmp_bookmark);
  if (nomem) {
    etch__stats_data_free(d);
    return etch__error(ETCH_ENOMEM, "stats: out of memory");
  }
  return ETCH_OK;
}


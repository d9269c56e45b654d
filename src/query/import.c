/*
 * import.c - resolved events into the DuckDB tables.
 *
 * Slices nest per track with a stack, in the order events arrive (the reader
 * delivers them in timestamp order, or per sequence in file order; either way
 * one track's events come in the order they happened). A slice gets its id at
 * its begin, so ids follow begin order, but its row is written when it ends,
 * once dur and self time are known: no row is ever updated. Slices still open
 * at the end are written with dur -1; their self_dur counts up to the end of
 * the trace. Instants are slices of dur 0 nested under the open slice.
 *
 * Flows: a flow id links the slice carrying it to the next slice carrying
 * the same id; a terminating id ends the chain. A flow on a SLICE_END
 * attaches to the slice that ends.
 *
 * Tracks, processes and threads are few: they are kept in memory and written
 * at the end, when every parent is known.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "query/import_int.h"

/* ---- strings -------------------------------------------------------------- */

/*
 * Interned strings (base's pool): each distinct string is copied once into
 * blocks that never move, so open slices can hold plain pointers. NULL for
 * a NULL or empty string.
 */
static const char *pool_intern(etch_strpool *p, const char *s) {
  if (!s || !*s) return NULL;
  return etch__strpool_get(p, s, strlen(s));
}

/* ---- processes, threads, tracks --------------------------------------------- */

/* The processes and threads a track names, made if new. */
static void track_procs(etch__importer *imp, qtrack *t, const char *name) {
  if (t->kind == ETCH_TRACK_PROCESS && t->pid) {
    int64_t upid = etch__imp_upid(imp, t->machine, t->pid);
    if (upid && name) imp->procs[upid - 1].name = name;
    if (upid && t->cmdline) imp->procs[upid - 1].cmdline = t->cmdline;
  } else if (t->kind == ETCH_TRACK_THREAD && t->tid) {
    if (t->pid) etch__imp_upid(imp, t->machine, t->pid);
    int64_t utid = etch__imp_utid(imp, t->machine, t->pid, t->tid);
    if (utid && name) imp->threads[utid - 1].name = name;
  } else if (t->pid) {
    etch__imp_upid(imp, t->machine, t->pid);
  }
}

/* Copies what the importer keeps of a track description; `procs`: and
 * makes its processes and threads. */
static void track_fields(etch__importer *imp, qtrack *t,
                         const etch_track_info *info, bool procs) {
  const char *name = pool_intern(&imp->strings, info->name);
  if (name) t->name = name;
  if (info->pid) t->pid = info->pid;
  if (info->tid) t->tid = info->tid;
  if (info->parent_uuid) t->parent_uuid = info->parent_uuid;
  t->kind = info->kind;
  if (info->kind == ETCH_TRACK_COUNTER) {
    const char *unit = pool_intern(&imp->strings, info->counter_unit_name);
    if (!unit) {
      switch (info->counter_unit) {
        case 1: unit = "ns"; break;
        case 2: unit = "count"; break;
        case 3: unit = "bytes"; break;
        default: break;
      }
    }
    t->unit = unit;
    t->unit_multiplier = info->unit_multiplier;
    t->is_incremental = info->is_incremental;
  }
  if (t->kind == ETCH_TRACK_PROCESS && info->cmdline && *info->cmdline)
    t->cmdline = pool_intern(&imp->strings, info->cmdline);
  /* Names of processes and threads come from their tracks. */
  if (procs) track_procs(imp, t, name);
}

static void track_update(etch__importer *imp, qtrack *t,
                         const etch_track_info *info) {
  track_fields(imp, t, info, true);
}

/* A track announced with events: its id now, if it had none. */
static void track_activate(etch__importer *imp, qtrack *t) {
  t->idle = false;
  t->id = ++imp->nactive;
  track_procs(imp, t, t->name);
}

/* The track of `info`, made if new (idle or with an id). */
static qtrack *find_make_track(etch__importer *imp,
                               const etch_track_info *info, bool idle,
                               bool *made) {
  int64_t idx;
  uint64_t key;
  *made = false;
  if (etch__imp_find_track(imp, info->machine_id, info->uuid, &idx, &key))
    return &imp->tracks[idx];
  if (!grow_array((void **)&imp->tracks, &imp->cap_tracks, imp->ntracks + 1,
                  sizeof *imp->tracks) ||
      !etch__u64map_put(&imp->track_by_uuid, key, (int64_t)imp->ntracks)) {
    fail_nomem(imp);
    return NULL;
  }
  qtrack *t = &imp->tracks[imp->ntracks++];
  memset(t, 0, sizeof *t);
  t->uuid = info->uuid;
  t->machine = info->machine_id;
  t->idle = idle;
  if (!idle) t->id = ++imp->nactive;
  imp->last_track = NULL; /* the array may have moved */
  *made = true;
  return t;
}

void etch__importer_track_idle(const etch_track_info *info, void *user) {
  etch__importer *imp = (etch__importer *)user;
  if (imp->err) return;
  bool made;
  qtrack *t = find_make_track(imp, info, true, &made);
  if (!t) return;
  track_fields(imp, t, info, !t->idle);
  if (t->idle) t->idle_rank = ++imp->idle_clock;
}

static int cmp_idle(const void *a, const void *b) {
  const qtrack *x = *(const qtrack *const *)a, *y = *(const qtrack *const *)b;
  return (x->idle_rank > y->idle_rank) - (x->idle_rank < y->idle_rank);
}

void etch__imp_idle_ids(etch__importer *imp) {
  size_t n = 0;
  for (size_t i = 0; i < imp->ntracks; i++) n += imp->tracks[i].idle;
  if (!n) return;
  qtrack **v = etch__malloc(n * sizeof *v);
  if (!v) {
    fail_nomem(imp);
    return;
  }
  n = 0;
  for (size_t i = 0; i < imp->ntracks; i++)
    if (imp->tracks[i].idle) v[n++] = &imp->tracks[i];
  qsort(v, n, sizeof *v, cmp_idle);
  for (size_t i = 0; i < n; i++) {
    v[i]->id = imp->nactive + (int64_t)i + 1;
    track_procs(imp, v[i], v[i]->name);
  }
  free(v);
}

static qtrack *get_track(etch__importer *imp, const etch_track_info *info) {
  qtrack *t = imp->last_track;
  if (t && t->uuid == info->uuid && t->machine == info->machine_id &&
      !t->idle)
    return t;
  int64_t idx;
  uint64_t key;
  if (etch__imp_find_track(imp, info->machine_id, info->uuid, &idx, &key)) {
    t = &imp->tracks[idx];
    if (t->idle) track_activate(imp, t);
  } else {
    if (!grow_array((void **)&imp->tracks, &imp->cap_tracks,
                    imp->ntracks + 1, sizeof *imp->tracks) ||
        !etch__u64map_put(&imp->track_by_uuid, key, (int64_t)imp->ntracks)) {
      fail_nomem(imp);
      return NULL;
    }
    t = &imp->tracks[imp->ntracks++];
    memset(t, 0, sizeof *t);
    t->uuid = info->uuid;
    t->machine = info->machine_id;
    t->id = ++imp->nactive;
    track_update(imp, t, info);
  }
  imp->last_track = t;
  return t;
}

void etch__importer_track(etch__importer *imp, const etch_track_info *info) {
  if (imp->err) return;
  int64_t idx;
  if (etch__imp_find_track(imp, info->machine_id, info->uuid, &idx, NULL)) {
    qtrack *t = &imp->tracks[idx];
    track_fields(imp, t, info, false);
    if (t->idle)
      track_activate(imp, t);
    else
      track_procs(imp, t, pool_intern(&imp->strings, info->name));
  } else {
    get_track(imp, info);
  }
}

/* ---- events ------------------------------------------------------------------ */

/* The interned copy of a string the reader handed out. */
static const char *intern_ev(etch__importer *imp, const char *s) {
  if (!s || !*s) return NULL;
  if (!imp->opts.stable_strings) return pool_intern(&imp->strings, s);
  size_t i = ((uintptr_t)s >> 3) & (ETCH_ARRAY_SIZE(imp->icache) - 1);
  if (imp->icache[i].from == s) return imp->icache[i].to;
  const char *to = pool_intern(&imp->strings, s);
  if (to) {
    imp->icache[i].from = s;
    imp->icache[i].to = to;
  }
  return to;
}

static bool keep_args(const etch__importer *imp, const etch_event *ev) {
  if (imp->opts.all_args) return true;
  /* Without all_args only etch's own reports (etch.dropped_events). */
  return ev->name && strncmp(ev->name, "etch.", 5) == 0;
}

static void write_args(etch__importer *imp, const etch_arg *args, size_t n,
                       int64_t arg_set_id) {
  if (imp->rows)
    for (size_t i = 0; i < n; i++)
      etch__rows_arg(imp->rows, arg_set_id, &args[i]);
  imp->counts.args += n;
}

/* `cat` and `name` must be interned (they outlive the call). */
static void insert_slice(etch__importer *imp, const qtrack *t, int64_t id,
                         int64_t ts, int64_t dur, const char *cat,
                         const char *name, uint32_t depth, int64_t parent_id,
                         int64_t arg_set_id, int64_t self_dur) {
  imp->counts.slices++;
  if (!imp->rows) return;
  etch__slice_row row = {.id = id,
                         .ts = ts,
                         .dur = dur,
                         .track_id = t->id,
                         .parent_id = parent_id,
                         .arg_set_id = arg_set_id,
                         .self_dur = self_dur,
                         .depth = depth,
                         .category = cat,
                         .name = name};
  etch__rows_slice(imp->rows, &row);
}

static void insert_flow(etch__importer *imp, int64_t out, int64_t in) {
  if (imp->rows) etch__rows_flow(imp->rows, out, in);
  imp->counts.flows++;
}

/* An event at `ts` is the first of its sequence after lost data. */
static void add_loss(etch__importer *imp, int64_t ts) {
  if (!grow_array((void **)&imp->losses, &imp->cap_losses, imp->nlosses + 1,
                  sizeof *imp->losses)) {
    fail_nomem(imp);
    return;
  }
  size_t i = imp->nlosses++;
  for (; i > 0 && imp->losses[i - 1] > ts; i--)
    imp->losses[i] = imp->losses[i - 1];
  imp->losses[i] = ts;
}

/* Whether data was lost on some sequence in (from, to]: a flow's next hop
 * may have been in it. */
static bool loss_between(const etch__importer *imp, int64_t from, int64_t to) {
  size_t lo = 0, hi = imp->nlosses;
  while (lo < hi) { /* the first loss after `from` */
    size_t mid = lo + (hi - lo) / 2;
    if (imp->losses[mid] <= from)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < imp->nlosses && imp->losses[lo] <= to;
}

/*
 * One flow id on the slice `slice_id` at `ts`: links it to the previous
 * hop. Not when data was lost on any sequence between the two: the true
 * next hop may have been lost with it, and the id reused since (a flow
 * whose other end was lost is not a flow); the chain starts again here.
 */
static void link_one(etch__importer *imp, uint64_t fid, bool term,
                     int64_t slice_id, int64_t ts) {
  int64_t prev, prev_ts;
  bool have = etch__u64map_get(&imp->flows, fid, &prev) && prev > 0;
  if (have && imp->nlosses && etch__u64map_get(&imp->flow_ts, fid, &prev_ts) &&
      loss_between(imp, prev_ts, ts)) {
    have = false;
    imp->counts.flows_cut++;
  }
  if (!term) {
    if (have && prev != slice_id) insert_flow(imp, prev, slice_id);
    if (!etch__u64map_put(&imp->flows, fid, slice_id) ||
        !etch__u64map_put(&imp->flow_ts, fid, ts))
      fail_nomem(imp);
  } else if (have) {
    if (prev != slice_id) insert_flow(imp, prev, slice_id);
    if (!etch__u64map_put(&imp->flows, fid, 0)) fail_nomem(imp);
  }
}

static void add_step(etch__importer *imp, int64_t ts, uint64_t gidx,
                     int64_t slice_id, uint64_t fid, uint32_t k, bool term) {
  if (!grow_array((void **)&imp->steps, &imp->cap_steps, imp->nsteps + 1,
                  sizeof *imp->steps)) {
    fail_nomem(imp);
    return;
  }
  imp->steps[imp->nsteps++] = (flow_step){.ts = ts, .gidx = gidx,
                                          .slice_id = slice_id, .fid = fid,
                                          .k = k, .term = term};
}

/*
 * The flows of an event at (ts, gidx) on slice `slice_id`. In file order
 * they are linked at the end, in timestamp order (as the timestamp-order
 * import links them); otherwise now.
 */
static void flows_of(etch__importer *imp, int64_t ts, uint64_t gidx,
                     const uint64_t *ids, size_t n, const uint64_t *terms,
                     size_t nterms, int64_t slice_id) {
  for (size_t i = 0; i < n; i++) {
    if (imp->opts.file_order)
      add_step(imp, ts, gidx, slice_id, ids[i], (uint32_t)i, false);
    else
      link_one(imp, ids[i], false, slice_id, ts);
  }
  for (size_t i = 0; i < nterms; i++) {
    if (imp->opts.file_order)
      add_step(imp, ts, gidx, slice_id, terms[i], (uint32_t)(n + i), true);
    else
      link_one(imp, terms[i], true, slice_id, ts);
  }
}

static int cmp_step(const void *a, const void *b) {
  const flow_step *x = a, *y = b;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  if (x->gidx != y->gidx) return x->gidx < y->gidx ? -1 : 1;
  return (x->k > y->k) - (x->k < y->k);
}

static void link_steps(etch__importer *imp) {
  if (!imp->nsteps) return;
  qsort(imp->steps, imp->nsteps, sizeof *imp->steps, cmp_step);
  for (size_t i = 0; i < imp->nsteps && !imp->err; i++)
    link_one(imp, imp->steps[i].fid, imp->steps[i].term,
             imp->steps[i].slice_id, imp->steps[i].ts);
}

static open_slice *push_slice(etch__importer *imp, qtrack *t) {
  if (t->depth == t->cap) {
    uint32_t cap = t->cap ? t->cap * 2 : 16;
    open_slice *s = etch__realloc(t->stack, cap * sizeof *s);
    if (!s) {
      fail_nomem(imp);
      return NULL;
    }
    t->stack = s;
    t->cap = cap;
  }
  return &t->stack[t->depth++];
}

/*
 * Per-name totals of slices with a duration (open ones counted up to the
 * end of the trace), kept as the slices close and written to slice_summary:
 * `etch stats` reads them instead of grouping every slice row by name.
 */
static void summary_add(etch__importer *imp, const char *name, int64_t dur,
                        int64_t self) {
  int64_t idx;
  /* Names are interned: the pointer identifies the name. */
  uint64_t key = (uint64_t)(uintptr_t)name;
  if (!etch__u64map_get(&imp->summary_by_name, key, &idx)) {
    if (!grow_array((void **)&imp->summary, &imp->cap_summary,
                    imp->nsummary + 1, sizeof *imp->summary) ||
        !etch__u64map_put(&imp->summary_by_name, key, (int64_t)imp->nsummary)) {
      fail_nomem(imp);
      return;
    }
    idx = (int64_t)imp->nsummary++;
    imp->summary[idx] = (name_summary){.name = name};
  }
  name_summary *n = &imp->summary[idx];
  n->count++;
  n->total += dur;
  n->self += self;
  if (dur > n->max) n->max = dur;
}

/* Writes the top slice of `t`, ended at `end` (dur -1 when `open`). */
static void close_top(etch__importer *imp, qtrack *t, int64_t end, bool open) {
  open_slice *s = &t->stack[--t->depth];
  open_slice *parent = t->depth ? &t->stack[t->depth - 1] : NULL;
  int64_t dur = end - s->ts;
  if (dur < 0) dur = 0; /* an end stamped before its begin */
  if (parent) parent->child_dur += dur;
  int64_t self = dur - s->child_dur;
  insert_slice(imp, t, s->id, s->ts, open ? -1 : dur, s->cat, s->name,
               t->depth, parent ? parent->id : 0, s->arg_set_id,
               self < 0 ? 0 : self);
  if (open) imp->counts.open_slices++;
  if (!open && t->name == imp->frames_name && t->kind != ETCH_TRACK_COUNTER) {
    if (!grow_array((void **)&imp->frames, &imp->cap_frames, imp->nframes + 1,
                    sizeof *imp->frames))
      fail_nomem(imp);
    else
      imp->frames[imp->nframes++] = (etch__stats_frame){s->ts, dur};
  }
  /* Every slice counts, a zero-length one too: an instant is an instant
   * event (nest_instant), not a slice that happened to last 0 ns. */
  summary_add(imp, s->name, dur, self < 0 ? 0 : self);
  if (!parent) {
    t->busy += dur;
    t->has_busy = true;
  }
}

/* The nesting of one begin, end or instant, in the track's time order. */
static void nest_begin(etch__importer *imp, qtrack *t, int64_t id,
                       int64_t ts, uint64_t gidx, const char *cat,
                       const char *name, int64_t arg_set_id,
                       const uint64_t *flows, size_t nf,
                       const uint64_t *terms, size_t nt) {
  open_slice *s = push_slice(imp, t);
  if (!s) return;
  s->id = id;
  s->ts = ts;
  s->child_dur = 0;
  s->arg_set_id = arg_set_id;
  s->name = name;
  s->cat = cat;
  if (nf || nt) flows_of(imp, ts, gidx, flows, nf, terms, nt, s->id);
}

static void nest_end(etch__importer *imp, qtrack *t, int64_t ts,
                     uint64_t gidx, const etch_arg *args, size_t nargs,
                     const uint64_t *flows, size_t nf, const uint64_t *terms,
                     size_t nt) {
  if (!t->depth) {
    imp->counts.unmatched_ends++;
    return;
  }
  open_slice *s = &t->stack[t->depth - 1];
  if (nargs) {
    if (!s->arg_set_id)
      s->arg_set_id = imp->opts.reader_ids ? s->id : ++imp->next_arg_set_id;
    write_args(imp, args, nargs, s->arg_set_id);
  }
  if (nf || nt) flows_of(imp, ts, gidx, flows, nf, terms, nt, s->id);
  close_top(imp, t, ts, false);
}

static void nest_instant(etch__importer *imp, qtrack *t, int64_t id,
                         int64_t ts, uint64_t gidx, const char *cat,
                         const char *name, int64_t arg_set_id,
                         const uint64_t *flows, size_t nf,
                         const uint64_t *terms, size_t nt) {
  if (nf || nt) flows_of(imp, ts, gidx, flows, nf, terms, nt, id);
  const open_slice *parent = t->depth ? &t->stack[t->depth - 1] : NULL;
  insert_slice(imp, t, id, ts, 0, cat, name, t->depth,
               parent ? parent->id : 0, arg_set_id, 0);
  imp->counts.instants++;
  if (t->name == imp->bookmarks_name && t->kind != ETCH_TRACK_COUNTER) {
    if (!grow_array((void **)&imp->bookmarks, &imp->cap_bookmarks,
                    imp->nbookmarks + 1, sizeof *imp->bookmarks)) {
      fail_nomem(imp);
    } else {
      imp->bookmarks[imp->nbookmarks].ts = ts;
      imp->bookmarks[imp->nbookmarks++].name = name;
    }
  }
}

/* Args of a begin or instant (slice `slice_id`), written now under a new
 * set id: the slice's id with reader_ids. */
static int64_t args_now(etch__importer *imp, const etch_event *ev,
                        int64_t slice_id) {
  if (!ev->args_count || !keep_args(imp, ev)) return 0;
  int64_t id = imp->opts.reader_ids ? slice_id : ++imp->next_arg_set_id;
  write_args(imp, ev->args, ev->args_count, id);
  return id;
}

/* etch's own drop reports, per track, for etch stats without a database. */
static void count_dropped(etch__importer *imp, qtrack *t,
                          const etch_event *ev, const char *name) {
  if (name != imp->dropped_name || !name) return;
  for (size_t i = 0; i < ev->args_count; i++) {
    const etch_arg *a = &ev->args[i];
    const char *key = a->key ? a->key : a->flat_key;
    if (!key || strcmp(key, "debug.count") != 0) continue;
    switch (a->type) {
      case ETCH_VALUE_BOOL: t->dropped += a->v.b ? 1 : 0; break;
      case ETCH_VALUE_INT: t->dropped += a->v.i; break;
      case ETCH_VALUE_UINT:
      case ETCH_VALUE_POINTER: t->dropped += (int64_t)a->v.u; break;
      default: break;
    }
    t->has_dropped = true;
  }
}

static void on_counter(etch__importer *imp, qtrack *t, const etch_event *ev) {
  double v = ev->counter_is_double ? ev->counter_double
                                   : (double)ev->counter_int;
  if (imp->rows) etch__rows_counter(imp->rows, ev->ts, t->id, v);
  imp->counts.counters++;
  /* The value at the latest timestamp; the first of equal ones. */
  if (!t->cn++ || ev->ts > t->clast_ts) {
    t->clast = v;
    t->clast_ts = ev->ts;
  }
  /* NaN counts as a value but not for min, max and mean: the counter
   * table stores it as NULL, which SQL's min(), max() and avg() skip. */
  if (isnan(v)) return;
  if (!t->cnum++) {
    t->cmin = t->cmax = t->csum = v;
    return;
  }
  if (v < t->cmin) t->cmin = v;
  if (v > t->cmax) t->cmax = v;
  t->csum += v;
}

void etch__importer_event(etch__importer *imp, const etch_event *ev) {
  if (imp->err) return;
  imp->counts.events++;
  uint64_t gidx = ev->index;
  if (ev->after_loss) add_loss(imp, ev->ts);
  qtrack *t = get_track(imp, ev->track);
  if (!t) return;
  if (ev->type == ETCH_EVENT_COUNTER) {
    on_counter(imp, t, ev);
    return;
  }
  if (ev->type < ETCH_EVENT_SLICE_BEGIN || ev->type > ETCH_EVENT_INSTANT)
    return;
  if (imp->live) { /* each read's per-track order, not the two reads' */
    if (t->nested && ev->ts < t->nest_last) {
      imp->went_back = true;
      return;
    }
    t->nested = true;
    t->nest_last = ev->ts;
  }
  const char *name, *cat;
  int64_t arg_set_id, id = 0;
  /* A begin's or instant's slice id: its slice_index with reader_ids (the
   * same ids whatever the delivery order), else in delivery order. */
  if (ev->type != ETCH_EVENT_SLICE_END)
    id = imp->opts.reader_ids ? (int64_t)ev->slice_index + 1
                              : ++imp->next_slice_id;
  switch (ev->type) {
    case ETCH_EVENT_SLICE_BEGIN:
      name = intern_ev(imp, ev->name);
      cat = intern_ev(imp, ev->category);
      arg_set_id = args_now(imp, ev, id);
      count_dropped(imp, t, ev, name);
      nest_begin(imp, t, id, ev->ts, gidx, cat, name, arg_set_id, ev->flow_ids,
                 ev->flow_ids_count, ev->terminating_flow_ids,
                 ev->terminating_flow_ids_count);
      break;
    case ETCH_EVENT_SLICE_END: {
      bool args = ev->args_count && keep_args(imp, ev);
      nest_end(imp, t, ev->ts, gidx, ev->args, args ? ev->args_count : 0,
               ev->flow_ids, ev->flow_ids_count, ev->terminating_flow_ids,
               ev->terminating_flow_ids_count);
      break;
    }
    default:
      name = intern_ev(imp, ev->name);
      cat = intern_ev(imp, ev->category);
      arg_set_id = args_now(imp, ev, id);
      count_dropped(imp, t, ev, name);
      nest_instant(imp, t, id, ev->ts, gidx, cat, name, arg_set_id, ev->flow_ids,
                   ev->flow_ids_count, ev->terminating_flow_ids,
                   ev->terminating_flow_ids_count);
      break;
  }
  /* Its call stack, when it has one and made a slice (import_stacks.c). */
  if (ev->callsite_id >= 0 && id && !imp->err)
    etch__import_callstack(imp, id, t->id, ev->callsite_id);
}

/* ---- a live import's parts (import_live.c) ---------------------------------------- */

void etch__imp_insert_slice(etch__importer *imp, const qtrack *t, int64_t id,
                            int64_t ts, int64_t dur, const char *cat,
                            const char *name, uint32_t depth,
                            int64_t parent_id, int64_t arg_set_id,
                            int64_t self_dur) {
  insert_slice(imp, t, id, ts, dur, cat, name, depth, parent_id, arg_set_id,
               self_dur);
}

void etch__imp_summary_add(etch__importer *imp, const char *name, int64_t dur,
                           int64_t self) {
  summary_add(imp, name, dur, self);
}

void etch__imp_link_steps(etch__importer *imp) { link_steps(imp); }

/* ---- start and finish ---------------------------------------------------------- */

/*
 * The database part of a long import (the rows still in the slice window
 * and the last chunks, tracks, stats, the commit) has a progress line of
 * its own once the import has taken a second: the reader's line is gone by
 * then.
 */
static bool phase_show(etch__importer *imp, const char *what) {
  if (!imp->opts.progress || !isatty(STDERR_FILENO) ||
      etch__monotonic_ns() - imp->t0_ns < 1000000000ull)
    return false;
  fprintf(stderr, "\retch: %s\033[K", what);
  fflush(stderr);
  return true;
}

static void phase_end(bool shown) {
  if (!shown) return;
  fputs("\r\033[K", stderr);
  fflush(stderr);
}

/*
 * DuckDB's settings while an import runs (importer_new sets them, and
 * settings_reset gives each back what it had, finished or not):
 *
 * - threads: each appender flush is a query, and with a worker thread the
 *   appending thread spins waiting for it (a quarter of the import's CPU
 *   on 10 M events, for nothing: the import's parallelism is its own, the
 *   pipes of table_writer.c).
 * - disabled_compression_methods: RLE left out of the choice of a
 *   compression for the row groups the import writes (its analysis of
 *   every integer column was about a twentieth of the import's CPU on 10 M
 *   events; of slice_data's columns it won only track_id, which bit-packs
 *   in a few bits: the cache grows by 3%). Row groups written later, by
 *   the checkpoint, may be RLE again.
 * - write_buffer_row_group_count: each row group written into the file as
 *   soon as it is full, not five at a time (a 10 M-event first query
 *   peaked at 272 MB, 196 MB with it; the same CPU).
 */
static const struct {
  const char *name, *value;
} kImportSettings[] = {
    {"threads", "1"},
    {"disabled_compression_methods", "rle"},
    {"write_buffer_row_group_count", "1"},
};

enum { kImportSettingsN = ETCH_ARRAY_SIZE(kImportSettings) };
_Static_assert((int)kImportSettingsN <= (int)kImportSettingsMax,
               "import settings");

/* SET `name` = 'value' (quotes doubled). */
static int setting_set(etch__db *db, const char *name, const char *value) {
  char sql[256];
  size_t k = (size_t)snprintf(sql, sizeof sql, "SET %s = '", name);
  const char *c = value;
  for (; *c && k + 4 < sizeof sql; c++) {
    if (*c == '\'') sql[k++] = '\'';
    sql[k++] = *c;
  }
  if (*c || k + 3 > sizeof sql)
    return etch__error(ETCH_ESQL, "import: the setting %s is too long", name);
  memcpy(sql + k, "';", 3);
  return etch__db_exec(db, sql);
}

/* The settings back to what they were before settings_import. */
static int settings_reset(etch__importer *imp) {
  int rc = ETCH_OK;
  for (size_t i = imp->nsettings; i-- > 0;) {
    int r = setting_set(imp->db, kImportSettings[i].name, imp->settings[i]);
    if (!rc) rc = r;
  }
  imp->nsettings = 0;
  return rc;
}

/* kImportSettings set, what each was kept for settings_reset. None for a
 * live import (etch__import_opts.live: its row writers' pipes stay open
 * between steps, and setting threads then can wait forever for a worker
 * blocked in one) nor on a database whose configuration is locked (etch
 * ui's): they make the import cheaper, not different. */
static int settings_import(etch__importer *imp) {
  if (imp->opts.live) return ETCH_OK;
  etch__res lk;
  int lrc = etch__res_query(
      imp->db, "SELECT CAST(current_setting('lock_configuration') AS VARCHAR)",
      "import", &lk);
  if (lrc) return lrc;
  size_t ln = 0;
  const char *lv = etch__res_next(&lk) ? etch__res_str(&lk, 0, &ln) : NULL;
  bool locked = lv && ln == 4 && !memcmp(lv, "true", 4);
  lrc = etch__res_close(&lk);
  if (lrc || locked) return lrc;
  for (size_t i = 0; i < kImportSettingsN; i++) {
    char sql[128];
    snprintf(sql, sizeof sql,
             "SELECT CAST(current_setting('%s') AS VARCHAR)",
             kImportSettings[i].name);
    etch__res res;
    int rc = etch__res_query(imp->db, sql, "import", &res);
    if (rc) return rc;
    size_t n = 0;
    const char *v = etch__res_next(&res) ? etch__res_str(&res, 0, &n) : NULL;
    bool fits = v && n < sizeof imp->settings[i];
    if (fits) {
      memcpy(imp->settings[i], v, n);
      imp->settings[i][n] = '\0';
    }
    rc = etch__res_close(&res);
    if (!rc && !fits)
      rc = etch__error(ETCH_ESQL, "import: DuckDB's setting %s unreadable",
                       kImportSettings[i].name);
    if (!rc) rc = setting_set(imp->db, kImportSettings[i].name,
                              kImportSettings[i].value);
    if (rc) return rc;
    imp->nsettings = i + 1;
  }
  return ETCH_OK;
}

static int importer_new(etch__importer **out, etch__db *db,
                        const char *catalog, const etch__row_sink *sink,
                        const etch__import_opts *opts) {
  *out = NULL;
  etch__importer *imp = etch__calloc(1, sizeof *imp);
  if (!imp) return ETCH_ENOMEM;
  imp->db = db;
  imp->catalog = catalog;
  imp->sink = sink;
  if (opts) imp->opts = *opts;
  imp->t0_ns = etch__monotonic_ns();
  if (etch__strpool_init(&imp->strings, SIZE_MAX)) {
    free(imp);
    return ETCH_ENOMEM;
  }
  imp->dropped_name = pool_intern(&imp->strings, "etch.dropped_events");
  imp->frames_name = pool_intern(&imp->strings, "Frames");
  imp->bookmarks_name = pool_intern(&imp->strings, "Bookmarks");
  if (!imp->dropped_name || !imp->frames_name || !imp->bookmarks_name) {
    etch__strpool_free(&imp->strings);
    free(imp);
    return ETCH_ENOMEM;
  }
  if (db) {
    /*
     * One transaction for the whole import into a file: DuckDB then writes
     * each full row group straight into the file, compressed, instead of
     * logging every appender flush in its write-ahead log and copying it
     * all again at the checkpoint (2.9 s instead of 3.1 s for 10 M
     * events). In memory the appender's own commits are cheaper (1.6 s
     * instead of 2.0 s).
     */
    int rc = settings_import(imp);
    if (!rc && etch__db_is_file(db)) {
      rc = etch__db_exec(db, "BEGIN TRANSACTION;");
      if (!rc) imp->in_txn = true;
    }
    if (!rc) rc = etch__rows_new(&imp->rows, db, catalog, NULL);
    if (rc) {
      etch__importer_free(imp);
      return rc;
    }
  } else if (sink) {
    int rc = etch__rows_new(&imp->rows, NULL, NULL, sink);
    if (rc) {
      etch__importer_free(imp);
      return rc;
    }
  }
  *out = imp;
  return ETCH_OK;
}

/*
 * Between two steps of an import that reads on, no statement of the import
 * runs: the writers are closed before the settings go back, and opened
 * again after they are set. (A piped writer's INSERT left running while
 * `threads` went from 1 back to the default could have its scan taken by
 * a new DuckDB worker, which waits in the pipe for the next chunk; setting
 * `threads` to 1 again joins that worker, from the thread that would hand
 * it the chunk: a deadlock, seen under load.)
 */
int etch__imp_pause(etch__importer *imp) {
  int rc = imp->rows ? etch__rows_close(imp->rows) : ETCH_OK;
  if (imp->in_txn) {
    int r = etch__db_exec(imp->db, "COMMIT;");
    if (!r) imp->in_txn = false;
    if (!rc) rc = r;
  }
  int r2 = settings_reset(imp);
  return rc ? rc : r2;
}

int etch__imp_unpause(etch__importer *imp) {
  int rc = settings_import(imp);
  if (!rc && etch__db_is_file(imp->db)) {
    rc = etch__db_exec(imp->db, "BEGIN TRANSACTION;");
    if (!rc) imp->in_txn = true;
  }
  if (!rc && imp->rows) rc = etch__rows_open(imp->rows);
  return rc;
}

int etch__importer_new(etch__importer **out, etch__db *db,
                       const char *catalog, const etch__import_opts *opts) {
  return importer_new(out, db, catalog, NULL, opts);
}

int etch__importer_new_sink(etch__importer **out, const etch__row_sink *sink,
                            const etch__import_opts *opts) {
  return importer_new(out, NULL, NULL, sink, opts);
}

int etch__importer_finish(etch__importer *imp, const etch_reader_stats *st,
                          int64_t first, int64_t last) {
  if (imp->err) return imp->err;
  imp->first_ts = first;
  imp->last_ts = last;
  if (st) imp->rstats = *st;
  /* Slices still open: dur -1, self time up to the end of the trace. */
  for (size_t i = 0; i < imp->ntracks && !imp->err; i++) {
    qtrack *t = &imp->tracks[i];
    while (t->depth && !imp->err) {
      int64_t end = first <= last ? last : t->stack[t->depth - 1].ts;
      close_top(imp, t, end, true);
    }
  }
  link_steps(imp);
  etch__imp_idle_ids(imp);
  imp->counts.tracks = imp->ntracks;
  if (!imp->rows) return imp->err;
  bool shown = phase_show(imp, "writing the database");
  int rc = etch__rows_finish(imp->rows);
  if (!rc) rc = imp->err;
  if (!rc) rc = etch__import_write_tables(imp, st);
  if (!rc && imp->in_txn) rc = etch__db_exec(imp->db, "COMMIT;");
  if (!rc) imp->in_txn = false;
  if (!rc) rc = settings_reset(imp);
  phase_end(shown);
  imp->counts.tracks = imp->ntracks;
  if (rc) fail(imp, rc);
  return rc;
}

void etch__importer_machines(etch__importer *imp, const etch_reader *r) {
  uint32_t n = etch_reader_machine_count(r);
  free(imp->machines);
  imp->nmachines = 0;
  imp->machines = (etch_machine_info *)etch__calloc(n ? n : 1,
                                                    sizeof *imp->machines);
  if (!imp->machines) {
    fail_nomem(imp);
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    etch_machine_info *m = &imp->machines[i];
    etch_reader_machine(r, i, m);
    /* The reader's strings end with it: the importer's pool keeps them. */
    m->name = pool_intern(&imp->strings, m->name);
    m->sysname = pool_intern(&imp->strings, m->sysname);
    m->release = pool_intern(&imp->strings, m->release);
    m->version = pool_intern(&imp->strings, m->version);
    m->arch = pool_intern(&imp->strings, m->arch);
    m->android_build_fingerprint =
        pool_intern(&imp->strings, m->android_build_fingerprint);
  }
  imp->nmachines = n;
}

void etch__importer_counts(const etch__importer *imp,
                           etch__import_counts *out) {
  *out = imp->counts;
}

void etch__importer_free(etch__importer *imp) {
  if (!imp) return;
  etch__rows_free(imp->rows);
  if (imp->in_txn) etch__db_exec(imp->db, "ROLLBACK;");
  settings_reset(imp);
  for (size_t i = 0; i < imp->ntracks; i++) {
    free(imp->tracks[i].stack);
  }
  free(imp->steps);
  free(imp->callstacks);
  etch__import_samples_free(imp);
  free(imp->tracks);
  free(imp->procs);
  free(imp->threads);
  free(imp->machines);
  etch__u64map_free(&imp->track_by_uuid);
  etch__u64map_free(&imp->proc_by_pid);
  etch__u64map_free(&imp->thread_by_key);
  etch__u64map_free(&imp->flows);
  etch__u64map_free(&imp->flow_ts);
  free(imp->losses);
  free(imp->frames);
  free(imp->bookmarks);
  etch__u64map_free(&imp->summary_by_name);
  free(imp->summary);
  etch__strpool_free(&imp->strings);
  free(imp);
}

/*
 * import.c - resolved events into the SQLite tables.
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

#include "base/arena.h"
#include "base/base.h"
#include "base/clock.h"
#include "base/map.h"
#include "query/query.h"
#include "query/rows.h"

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

/* ---- importer state ------------------------------------------------------ */

typedef struct open_slice {
  int64_t id;
  int64_t ts;
  int64_t child_dur; /* sum of the durations of closed children */
  int64_t arg_set_id; /* 0 = none */
  const char *name;   /* interned; NULL = none */
  const char *cat;
} open_slice;

/* An event of a held track, nested at the end in timestamp order. */
typedef struct held_ev {
  int64_t ts;
  uint64_t gidx;       /* arrival order */
  const char *name;    /* interned (begin, instant) */
  const char *cat;
  int64_t arg_set_id;  /* begin, instant: args already written; 0 = none */
  const etch_arg *end_args; /* end: args kept until it is matched */
  uint32_t nend_args;
  uint32_t flow_at, nflows, nterms; /* in importer.hflows */
  uint8_t type;
} held_ev;

/* A flow id on an event, linked at the end in timestamp order. */
typedef struct flow_step {
  int64_t ts;
  uint64_t gidx;
  int64_t slice_id;
  uint64_t fid;
  uint32_t k; /* position on the event: flow ids first, then terminating */
  bool term;
} flow_step;

typedef struct qtrack {
  uint64_t uuid, parent_uuid;
  etch_track_kind kind;
  const char *name; /* interned */
  int32_t pid, tid;
  int64_t id;           /* row id in track */
  const char *unit;     /* interned */
  int64_t unit_multiplier;
  bool is_incremental;
  open_slice *stack;
  uint32_t depth, cap;
  /* file_order: held (nested at the end) or nested as events come. */
  bool held;
  bool has_last;
  int64_t last_ts;
  held_ev *hev;
  size_t nhev, cap_hev;
  /* Totals for etch stats without a database. */
  bool has_busy, has_dropped;
  int64_t busy;    /* depth-0 slices with a duration */
  int64_t dropped; /* debug.count of etch.dropped_events */
  uint64_t cn;     /* counter values */
  uint64_t cnum;   /* ... that are numbers (NaN is "no value", as in SQL) */
  double cmin, cmax, csum, clast;
  int64_t clast_ts;
} qtrack;

typedef struct name_summary {
  const char *name; /* interned */
  int64_t count, total, self, max;
} name_summary;

typedef struct qproc {
  int32_t pid;
  const char *name;
  const char *cmdline;
} qproc;

typedef struct qthread {
  int32_t pid, tid;
  const char *name;
} qthread;

struct etch__importer {
  uint64_t t0_ns; /* when the import began (progress) */
  sqlite3 *db;
  etch__import_opts opts;
  int err;
  bool in_txn;
  etch__rows *rows; /* slice, counter, args and flow rows */

  etch_strpool strings;
  qtrack *tracks; /* tracks[i] has row id i + 1 */
  size_t ntracks, cap_tracks;
  etch_u64map track_by_uuid; /* uuid -> index in tracks */
  qtrack *last_track;   /* cache: consecutive events share a track */
  qproc *procs;         /* procs[i] has upid i + 1 */
  size_t nprocs, cap_procs;
  etch_u64map proc_by_pid;
  qthread *threads; /* threads[i] has utid i + 1 */
  size_t nthreads, cap_threads;
  etch_u64map thread_by_key; /* (pid << 32 | tid) -> index */
  etch_u64map flows;         /* flow id -> slice id waiting for its next hop */
  etch_u64map flow_ts;       /* flow id -> that hop's time */
  int64_t *losses;      /* times of events right after lost data, sorted */
  size_t nlosses, cap_losses;
  name_summary *summary;
  size_t nsummary, cap_summary;
  etch_u64map summary_by_name;

  int64_t next_slice_id;
  int64_t next_arg_set_id;
  etch__import_counts counts;

  uint64_t gidx;      /* events so far: arrival order */
  bool restart;       /* file_order: a thread track went back in time */
  flow_step *steps;   /* file_order: flows to link at the end */
  size_t nsteps, cap_steps;
  uint64_t *hflows;   /* flow ids of held events */
  size_t nhflows, cap_hflows;
  etch_arena keep;    /* copies of held end args */
  const char *dropped_name; /* interned "etch.dropped_events" */
  /* Frames and bookmarks for etch stats without a database: slices on
   * tracks named "Frames", instants on tracks named "Bookmarks". */
  const char *frames_name, *bookmarks_name; /* interned */
  etch__stats_frame *frames;
  size_t nframes, cap_frames;
  struct {
    int64_t ts;
    const char *name; /* interned */
  } *bookmarks;
  size_t nbookmarks, cap_bookmarks;
  /* stable_strings: reader pointer -> interned copy, direct-mapped. */
  struct {
    const char *from, *to;
  } icache[1024];
  int64_t first_ts, last_ts; /* bounds given to finish */
  etch_reader_stats rstats;  /* stats given to finish */
};

static void fail(etch__importer *imp, int rc) {
  if (!imp->err) imp->err = rc;
}

static void fail_sql(etch__importer *imp) {
  if (!imp->err)
    imp->err = etch__error(ETCH_ESQL, "import: SQL error: %s",
                           sqlite3_errmsg(imp->db));
}

static void fail_nomem(etch__importer *imp) {
  if (!imp->err) imp->err = etch__error(ETCH_ENOMEM, "import: out of memory");
}

static bool grow_array(void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t cap2 = *cap ? *cap * 2 : 16;
  while (cap2 < need) cap2 *= 2;
  void *p = etch__realloc(*arr, cap2 * elem);
  if (!p) return false;
  *arr = p;
  *cap = cap2;
  return true;
}

static void step_reset(etch__importer *imp, sqlite3_stmt *st) {
  if (sqlite3_step(st) != SQLITE_DONE) fail_sql(imp);
  sqlite3_reset(st);
}

static void bind_text(sqlite3_stmt *st, int col, const char *s) {
  if (s)
    sqlite3_bind_text(st, col, s, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, col);
}

static void bind_id(sqlite3_stmt *st, int col, int64_t id) {
  if (id > 0)
    sqlite3_bind_int64(st, col, id);
  else
    sqlite3_bind_null(st, col);
}

/* ---- processes, threads, tracks --------------------------------------------- */

static int64_t get_process(etch__importer *imp, int32_t pid) {
  int64_t idx;
  if (etch__u64map_get(&imp->proc_by_pid, (uint32_t)pid, &idx)) return idx + 1;
  if (!grow_array((void **)&imp->procs, &imp->cap_procs, imp->nprocs + 1,
                  sizeof *imp->procs) ||
      !etch__u64map_put(&imp->proc_by_pid, (uint32_t)pid, (int64_t)imp->nprocs)) {
    fail_nomem(imp);
    return 0;
  }
  imp->procs[imp->nprocs] = (qproc){.pid = pid};
  return (int64_t)++imp->nprocs;
}

static int64_t get_thread(etch__importer *imp, int32_t pid, int32_t tid) {
  uint64_t key = (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid;
  int64_t idx;
  if (etch__u64map_get(&imp->thread_by_key, key, &idx)) return idx + 1;
  if (!grow_array((void **)&imp->threads, &imp->cap_threads,
                  imp->nthreads + 1, sizeof *imp->threads) ||
      !etch__u64map_put(&imp->thread_by_key, key, (int64_t)imp->nthreads)) {
    fail_nomem(imp);
    return 0;
  }
  imp->threads[imp->nthreads] = (qthread){.pid = pid, .tid = tid};
  return (int64_t)++imp->nthreads;
}

/* Copies what the importer keeps of a track description. */
static void track_update(etch__importer *imp, qtrack *t,
                         const etch_track_info *info) {
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
  /* Names of processes and threads come from their tracks. */
  if (t->kind == ETCH_TRACK_PROCESS && t->pid) {
    int64_t upid = get_process(imp, t->pid);
    if (upid && name) imp->procs[upid - 1].name = name;
    const char *cmd = info->cmdline && *info->cmdline
                          ? pool_intern(&imp->strings, info->cmdline)
                          : NULL;
    if (upid && cmd) imp->procs[upid - 1].cmdline = cmd;
  } else if (t->kind == ETCH_TRACK_THREAD && t->tid) {
    if (t->pid) get_process(imp, t->pid);
    int64_t utid = get_thread(imp, t->pid, t->tid);
    if (utid && name) imp->threads[utid - 1].name = name;
  } else if (t->pid) {
    get_process(imp, t->pid);
  }
}

static qtrack *get_track(etch__importer *imp, const etch_track_info *info) {
  qtrack *t = imp->last_track;
  if (t && t->uuid == info->uuid) return t;
  int64_t idx;
  if (etch__u64map_get(&imp->track_by_uuid, info->uuid, &idx)) {
    t = &imp->tracks[idx];
  } else {
    if (!grow_array((void **)&imp->tracks, &imp->cap_tracks,
                    imp->ntracks + 1, sizeof *imp->tracks) ||
        !etch__u64map_put(&imp->track_by_uuid, info->uuid,
                    (int64_t)imp->ntracks)) {
      fail_nomem(imp);
      return NULL;
    }
    t = &imp->tracks[imp->ntracks++];
    memset(t, 0, sizeof *t);
    t->uuid = info->uuid;
    t->id = (int64_t)imp->ntracks;
    track_update(imp, t, info);
    /* In file order, tracks other than thread tracks may get events from
     * several sequences, out of time order: their slices are held. */
    t->held = imp->opts.file_order && t->kind != ETCH_TRACK_COUNTER &&
              (imp->opts.hold_all || t->kind != ETCH_TRACK_THREAD);
  }
  imp->last_track = t;
  return t;
}

void etch__importer_track(etch__importer *imp, const etch_track_info *info) {
  if (imp->err) return;
  int64_t idx;
  if (etch__u64map_get(&imp->track_by_uuid, info->uuid, &idx))
    track_update(imp, &imp->tracks[idx], info);
  else
    get_track(imp, info);
}

/* ---- events ------------------------------------------------------------------ */

static const char *pool_copy_keep(etch__importer *imp, const char *s) {
  size_t n = strlen(s) + 1;
  char *d = (char *)etch__arena_alloc(&imp->keep, n);
  if (d) memcpy(d, s, n);
  return d;
}

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
static void nest_begin(etch__importer *imp, qtrack *t, int64_t ts,
                       uint64_t gidx, const char *cat, const char *name,
                       int64_t arg_set_id, const uint64_t *flows, size_t nf,
                       const uint64_t *terms, size_t nt) {
  open_slice *s = push_slice(imp, t);
  if (!s) return;
  s->id = ++imp->next_slice_id;
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
    if (!s->arg_set_id) s->arg_set_id = ++imp->next_arg_set_id;
    write_args(imp, args, nargs, s->arg_set_id);
  }
  if (nf || nt) flows_of(imp, ts, gidx, flows, nf, terms, nt, s->id);
  close_top(imp, t, ts, false);
}

static void nest_instant(etch__importer *imp, qtrack *t, int64_t ts,
                         uint64_t gidx, const char *cat, const char *name,
                         int64_t arg_set_id, const uint64_t *flows, size_t nf,
                         const uint64_t *terms, size_t nt) {
  int64_t id = ++imp->next_slice_id;
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

/* Args of a begin or instant, written now under a new set id. */
static int64_t args_now(etch__importer *imp, const etch_event *ev) {
  if (!ev->args_count || !keep_args(imp, ev)) return 0;
  int64_t id = ++imp->next_arg_set_id;
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

/* Copies an event of a held track. */
static void hold(etch__importer *imp, qtrack *t, const etch_event *ev,
                 uint64_t gidx) {
  if (!grow_array((void **)&t->hev, &t->cap_hev, t->nhev + 1,
                  sizeof *t->hev)) {
    fail_nomem(imp);
    return;
  }
  held_ev h = {.ts = ev->ts, .gidx = gidx, .type = (uint8_t)ev->type};
  if (ev->type == ETCH_EVENT_SLICE_END) {
    /* Kept until the end is matched: an unmatched end leaves no args. */
    if (ev->args_count && keep_args(imp, ev)) {
      etch_arg *a = etch__arena_alloc(&imp->keep, ev->args_count * sizeof *a);
      if (!a) {
        fail_nomem(imp);
        return;
      }
      for (size_t i = 0; i < ev->args_count; i++) {
        a[i] = ev->args[i];
        const char *fk = ev->args[i].flat_key ? ev->args[i].flat_key : "";
        const char *k = ev->args[i].key ? ev->args[i].key : fk;
        a[i].flat_key = pool_copy_keep(imp, fk);
        a[i].key = pool_copy_keep(imp, k);
        if ((a[i].type == ETCH_VALUE_STRING || a[i].type == ETCH_VALUE_JSON) &&
            a[i].v.s)
          a[i].v.s = pool_copy_keep(imp, a[i].v.s);
        if (!a[i].flat_key || !a[i].key ||
            ((a[i].type == ETCH_VALUE_STRING || a[i].type == ETCH_VALUE_JSON) &&
             ev->args[i].v.s && !a[i].v.s)) {
          fail_nomem(imp);
          return;
        }
      }
      h.end_args = a;
      h.nend_args = (uint32_t)ev->args_count;
    }
  } else {
    const char *name = intern_ev(imp, ev->name);
    h.name = name;
    h.cat = intern_ev(imp, ev->category);
    h.arg_set_id = args_now(imp, ev);
    count_dropped(imp, t, ev, name);
  }
  size_t nf = ev->flow_ids_count, nt = ev->terminating_flow_ids_count;
  if (nf || nt) {
    if (!grow_array((void **)&imp->hflows, &imp->cap_hflows,
                    imp->nhflows + nf + nt, sizeof *imp->hflows)) {
      fail_nomem(imp);
      return;
    }
    h.flow_at = (uint32_t)imp->nhflows;
    h.nflows = (uint32_t)nf;
    h.nterms = (uint32_t)nt;
    if (nf)
      memcpy(imp->hflows + imp->nhflows, ev->flow_ids, nf * sizeof(uint64_t));
    imp->nhflows += nf;
    if (nt)
      memcpy(imp->hflows + imp->nhflows, ev->terminating_flow_ids,
             nt * sizeof(uint64_t));
    imp->nhflows += nt;
  }
  t->hev[t->nhev++] = h;
}

static int cmp_held(const void *a, const void *b) {
  const held_ev *x = a, *y = b;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return (x->gidx > y->gidx) - (x->gidx < y->gidx);
}

/* Nests the held events of `t` in timestamp order (ties: arrival order). */
static void nest_held(etch__importer *imp, qtrack *t) {
  if (!t->nhev) return;
  qsort(t->hev, t->nhev, sizeof *t->hev, cmp_held);
  for (size_t i = 0; i < t->nhev && !imp->err; i++) {
    const held_ev *h = &t->hev[i];
    const uint64_t *f = imp->hflows + h->flow_at;
    switch (h->type) {
      case ETCH_EVENT_SLICE_BEGIN:
        nest_begin(imp, t, h->ts, h->gidx, h->cat, h->name, h->arg_set_id, f,
                   h->nflows, f + h->nflows, h->nterms);
        break;
      case ETCH_EVENT_SLICE_END:
        nest_end(imp, t, h->ts, h->gidx, h->end_args, h->nend_args, f,
                 h->nflows, f + h->nflows, h->nterms);
        break;
      default:
        nest_instant(imp, t, h->ts, h->gidx, h->cat, h->name, h->arg_set_id,
                     f, h->nflows, f + h->nflows, h->nterms);
        break;
    }
  }
  free(t->hev);
  t->hev = NULL;
  t->nhev = t->cap_hev = 0;
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
  if (imp->err || imp->restart) return;
  imp->counts.events++;
  uint64_t gidx = imp->gidx++;
  if (ev->after_loss) add_loss(imp, ev->ts);
  qtrack *t = get_track(imp, ev->track);
  if (!t) return;
  if (ev->type == ETCH_EVENT_COUNTER) {
    on_counter(imp, t, ev);
    return;
  }
  if (ev->type < ETCH_EVENT_SLICE_BEGIN || ev->type > ETCH_EVENT_INSTANT)
    return;
  if (t->held) {
    hold(imp, t, ev, gidx);
    return;
  }
  if (imp->opts.file_order) {
    /* Nested as they come only while the track's time goes forward. */
    if (t->has_last && ev->ts < t->last_ts) {
      imp->restart = true;
      return;
    }
    t->has_last = true;
    t->last_ts = ev->ts;
  }
  const char *name, *cat;
  int64_t arg_set_id;
  switch (ev->type) {
    case ETCH_EVENT_SLICE_BEGIN:
      name = intern_ev(imp, ev->name);
      cat = intern_ev(imp, ev->category);
      arg_set_id = args_now(imp, ev);
      count_dropped(imp, t, ev, name);
      nest_begin(imp, t, ev->ts, gidx, cat, name, arg_set_id, ev->flow_ids,
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
      arg_set_id = args_now(imp, ev);
      count_dropped(imp, t, ev, name);
      nest_instant(imp, t, ev->ts, gidx, cat, name, arg_set_id, ev->flow_ids,
                   ev->flow_ids_count, ev->terminating_flow_ids,
                   ev->terminating_flow_ids_count);
      break;
  }
}

bool etch__importer_needs_restart(const etch__importer *imp) {
  return imp->restart;
}

/* ---- start and finish ---------------------------------------------------------- */

static int prepare(etch__importer *imp, const char *sql, sqlite3_stmt **st) {
  if (sqlite3_prepare_v3(imp->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st,
                         NULL) != SQLITE_OK)
    return etch__error(ETCH_ESQL, "import: %s", sqlite3_errmsg(imp->db));
  return ETCH_OK;
}

/*
 * The database part of a long import (the rows still queued for the
 * inserting thread, tracks, stats, indexes) has a progress line of its own
 * once the import has taken a second: the reader's line is gone by then.
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

int etch__importer_new(etch__importer **out, sqlite3 *db,
                       const etch__import_opts *opts) {
  *out = NULL;
  etch__importer *imp = etch__calloc(1, sizeof *imp);
  if (!imp) return ETCH_ENOMEM;
  imp->db = db;
  if (opts) imp->opts = *opts;
  imp->t0_ns = etch__monotonic_ns();
  etch__arena_init(&imp->keep, 65536);
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
    int rc = etch__query_exec(db, "BEGIN;");
    if (rc) {
      etch__importer_free(imp);
      return rc;
    }
    imp->in_txn = true;
    rc = etch__rows_new(&imp->rows, db, !imp->opts.single_thread);
    if (rc) {
      etch__importer_free(imp);
      return rc;
    }
  }
  *out = imp;
  return ETCH_OK;
}

static const char *track_type(etch_track_kind k) {
  switch (k) {
    case ETCH_TRACK_PROCESS: return "process";
    case ETCH_TRACK_THREAD: return "thread";
    case ETCH_TRACK_NAMED: return "named";
    case ETCH_TRACK_COUNTER: return "counter";
    case ETCH_TRACK_GLOBAL: break;
  }
  return "global";
}

static int write_tracks(etch__importer *imp) {
  sqlite3_stmt *st;
  int rc = prepare(imp,
                   "INSERT INTO track(id, name, type, parent_id, uuid, utid, "
                   "upid, unit, unit_multiplier, is_incremental) "
                   "VALUES(?,?,?,?,?,?,?,?,?,?)",
                   &st);
  if (rc) return rc;
  for (size_t i = 0; i < imp->ntracks && !imp->err; i++) {
    const qtrack *t = &imp->tracks[i];
    int64_t parent = -1, upid = 0, utid = 0, v;
    if (t->parent_uuid && etch__u64map_get(&imp->track_by_uuid, t->parent_uuid, &v))
      parent = v + 1;
    if (t->pid && etch__u64map_get(&imp->proc_by_pid, (uint32_t)t->pid, &v))
      upid = v + 1;
    if (t->kind == ETCH_TRACK_THREAD &&
        etch__u64map_get(&imp->thread_by_key,
                   (uint64_t)(uint32_t)t->pid << 32 | (uint32_t)t->tid, &v))
      utid = v + 1;
    sqlite3_bind_int64(st, 1, t->id);
    bind_text(st, 2, t->name);
    sqlite3_bind_text(st, 3, track_type(t->kind), -1, SQLITE_STATIC);
    bind_id(st, 4, parent);
    sqlite3_bind_int64(st, 5, (int64_t)t->uuid);
    bind_id(st, 6, utid);
    bind_id(st, 7, upid);
    if (t->kind == ETCH_TRACK_COUNTER) {
      bind_text(st, 8, t->unit);
      sqlite3_bind_int64(st, 9, t->unit_multiplier > 1 ? t->unit_multiplier : 1);
      sqlite3_bind_int64(st, 10, t->is_incremental);
    } else {
      sqlite3_bind_null(st, 8);
      sqlite3_bind_null(st, 9);
      sqlite3_bind_null(st, 10);
    }
    step_reset(imp, st);
  }
  sqlite3_finalize(st);
  return imp->err;
}

static int write_procs_threads(etch__importer *imp) {
  sqlite3_stmt *st;
  int rc = prepare(
      imp, "INSERT INTO process(upid, pid, name, cmdline) VALUES(?,?,?,?)",
      &st);
  if (rc) return rc;
  for (size_t i = 0; i < imp->nprocs && !imp->err; i++) {
    sqlite3_bind_int64(st, 1, (int64_t)i + 1);
    sqlite3_bind_int64(st, 2, imp->procs[i].pid);
    bind_text(st, 3, imp->procs[i].name);
    bind_text(st, 4, imp->procs[i].cmdline);
    step_reset(imp, st);
  }
  sqlite3_finalize(st);
  if (imp->err) return imp->err;
  rc = prepare(imp,
               "INSERT INTO thread(utid, tid, name, upid, is_main_thread) "
               "VALUES(?,?,?,?,?)",
               &st);
  if (rc) return rc;
  for (size_t i = 0; i < imp->nthreads && !imp->err; i++) {
    const qthread *th = &imp->threads[i];
    int64_t upid = 0, v;
    if (th->pid && etch__u64map_get(&imp->proc_by_pid, (uint32_t)th->pid, &v))
      upid = v + 1;
    sqlite3_bind_int64(st, 1, (int64_t)i + 1);
    sqlite3_bind_int64(st, 2, th->tid);
    bind_text(st, 3, th->name);
    bind_id(st, 4, upid);
    if (th->pid)
      sqlite3_bind_int(st, 5, th->pid == th->tid);
    else
      sqlite3_bind_null(st, 5);
    step_reset(imp, st);
  }
  sqlite3_finalize(st);
  return imp->err;
}

static int write_summary(etch__importer *imp) {
  sqlite3_stmt *st;
  int rc = prepare(imp,
                   "INSERT INTO slice_summary(name, count, total_dur, "
                   "self_dur, max_dur) VALUES(?,?,?,?,?)",
                   &st);
  if (rc) return rc;
  for (size_t i = 0; i < imp->nsummary && !imp->err; i++) {
    const name_summary *n = &imp->summary[i];
    bind_text(st, 1, n->name);
    sqlite3_bind_int64(st, 2, n->count);
    sqlite3_bind_int64(st, 3, n->total);
    sqlite3_bind_int64(st, 4, n->self);
    sqlite3_bind_int64(st, 5, n->max);
    step_reset(imp, st);
  }
  sqlite3_finalize(st);
  return imp->err;
}

typedef struct stat_row {
  const char *name, *severity, *source, *description;
  uint64_t value;
} stat_row;

enum { kStatRows = 23 };

/* The rows of the stats table. */
static void fill_stat_rows(const etch__importer *imp,
                           const etch_reader_stats *rs, stat_row *out) {
  uint64_t misplaced = rs->misplaced_end_event > imp->counts.unmatched_ends
                           ? rs->misplaced_end_event
                           : imp->counts.unmatched_ends;
  const stat_row rows[] = {
      {"trace_bytes", "info", "trace", "bytes of trace read", rs->bytes},
      {"packets", "info", "trace", "trace packets", rs->packets},
      {"track_events", "info", "trace", "track events", rs->track_events},
      {"sequences", "info", "trace", "packet sequences", rs->sequences},
      {"compressed_packets", "info", "trace",
       "compressed packets (deflate and zstd)", rs->compressed_packets},
      {"previous_packet_dropped", "data_loss", "trace",
       "packets saying earlier packets of their sequence were lost",
       rs->previous_packet_dropped},
      {"packet_skipped_seq_needs_incremental_state_invalid", "data_loss",
       "trace",
       "packets skipped because their sequence lost its incremental state",
       rs->packet_skipped_seq_needs_incremental_state_invalid},
      {"trace_truncated_bytes", "data_loss", "trace",
       "bytes at the end of a trace cut short (an incomplete packet)",
       rs->truncated_bytes},
      {"misplaced_end_event", "data_loss", "analysis",
       "slice ends without a matching begin", misplaced},
      {"flow_cut_by_data_loss", "data_loss", "analysis",
       "flow links not made: data was lost between two uses of the id",
       imp->counts.flows_cut},
      {"traced_buf_chunks_discarded", "data_loss", "trace",
       "chunks the tracing buffer discarded (buffer full)",
       rs->trace_stats_chunks_discarded},
      {"traced_buf_chunks_overwritten", "data_loss", "trace",
       "chunks the ring buffer overwrote before they were read",
       rs->trace_stats_chunks_overwritten},
      {"traced_buf_trace_writer_packet_loss", "data_loss", "trace",
       "writers that lost packets", rs->trace_stats_writer_packet_loss},
      {"clock_conversion_failed", "data_loss", "trace",
       "events dropped because their clock could not be converted",
       rs->clock_conversion_failed},
      {"etch_dropped_events", "data_loss", "trace",
       "events the etch SDK dropped (buffer full), all threads",
       rs->etch_dropped_events},
      {"packet_sequence_id_missing", "error", "trace",
       "packets needing incremental state but without a sequence id",
       rs->packet_sequence_id_missing},
      {"interned_data_missing", "error", "trace",
       "interned ids used without a definition", rs->interned_data_missing},
      {"unknown_track", "error", "trace",
       "events on a track uuid without a descriptor", rs->unknown_track},
      {"slices", "info", "analysis", "slices (instants included)",
       imp->counts.slices},
      {"instants", "info", "analysis", "instant events",
       imp->counts.instants},
      {"open_slices", "info", "analysis",
       "slices still open at the end of the trace (dur -1)",
       imp->counts.open_slices},
      {"counter_values", "info", "analysis", "counter values",
       imp->counts.counters},
      {"flows", "info", "analysis", "flow links", imp->counts.flows},
  };
  _Static_assert(ETCH_ARRAY_SIZE(rows) == kStatRows, "stat rows");
  memcpy(out, rows, sizeof rows);
}

static int write_stats(etch__importer *imp, const etch_reader_stats *rs) {
  etch_reader_stats z = {0};
  if (!rs) rs = &z;
  stat_row rows[kStatRows];
  fill_stat_rows(imp, rs, rows);
  sqlite3_stmt *st;
  int rc = prepare(imp,
                   "INSERT INTO stats(name, idx, severity, source, value, "
                   "description) VALUES(?,NULL,?,?,?,?)",
                   &st);
  if (rc) return rc;
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(rows) && !imp->err; i++) {
    sqlite3_bind_text(st, 1, rows[i].name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, rows[i].severity, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, rows[i].source, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, (int64_t)rows[i].value);
    sqlite3_bind_text(st, 5, rows[i].description, -1, SQLITE_STATIC);
    step_reset(imp, st);
  }
  sqlite3_finalize(st);
  return imp->err;
}

int etch__importer_finish(etch__importer *imp, const etch_reader_stats *st,
                          int64_t first, int64_t last) {
  if (imp->err) return imp->err;
  imp->first_ts = first;
  imp->last_ts = last;
  if (st) imp->rstats = *st;
  /* Held tracks, nested in timestamp order. */
  for (size_t i = 0; i < imp->ntracks && !imp->err; i++)
    nest_held(imp, &imp->tracks[i]);
  /* Slices still open: dur -1, self time up to the end of the trace. */
  for (size_t i = 0; i < imp->ntracks && !imp->err; i++) {
    qtrack *t = &imp->tracks[i];
    while (t->depth && !imp->err) {
      int64_t end = first <= last ? last : t->stack[t->depth - 1].ts;
      close_top(imp, t, end, true);
    }
  }
  link_steps(imp);
  imp->counts.tracks = imp->ntracks;
  if (!imp->rows) return imp->err;
  bool shown = phase_show(imp, imp->opts.indexes ? "writing the database "
                                                   "and its indexes"
                                                 : "writing the database");
  int rc = etch__rows_finish(imp->rows);
  if (!rc) rc = imp->err;
  if (!rc) rc = write_tracks(imp);
  if (!rc) rc = write_procs_threads(imp);
  if (!rc) rc = write_stats(imp, st);
  if (!rc) rc = write_summary(imp);
  if (!rc && first <= last) {
    char sql[128];
    snprintf(sql, sizeof sql,
             "INSERT INTO trace_bounds VALUES(%lld, %lld);", (long long)first,
             (long long)last);
    rc = etch__query_exec(imp->db, sql);
  } else if (!rc) {
    rc = etch__query_exec(imp->db,
                          "INSERT INTO trace_bounds VALUES(NULL, NULL);");
  }
  if (!rc && imp->opts.indexes) rc = etch__query_schema_indexes(imp->db);
  if (!rc) rc = etch__query_exec(imp->db, "COMMIT;");
  if (!rc) imp->in_txn = false;
  phase_end(shown);
  imp->counts.tracks = imp->ntracks;
  if (rc) fail(imp, rc);
  return rc;
}

/* ---- etch stats without a database ----------------------------------------------- */

static char *dup_or_null(const char *s) { return s ? etch__strdup(s) : NULL; }

typedef struct thr_acc {
  int64_t utid, busy;
} thr_acc;

static int cmp_thr(const void *x, const void *y) {
  const etch__stats_thread *a = x, *b = y;
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
        !etch__u64map_get(&imp->thread_by_key,
                    (uint64_t)(uint32_t)t->pid << 32 | (uint32_t)t->tid, &v))
      continue;
    if (slot[v] < 0) {
      const qthread *th = &imp->threads[v];
      int64_t p;
      etch__stats_thread *x = &d->thr[d->nthr];
      slot[v] = (int64_t)d->nthr++;
      x->thread = dup_or_null(th->name);
      x->tid = th->tid;
      if (th->pid && etch__u64map_get(&imp->proc_by_pid, (uint32_t)th->pid, &p)) {
        x->has_pid = true;
        x->pid = imp->procs[p].pid;
        x->process = dup_or_null(imp->procs[p].name);
      }
    }
    d->thr[slot[v]].busy += t->busy;
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
  fill_stat_rows(imp, &imp->rstats, rows);
  d->loss = etch__calloc(kStatRows, sizeof *d->loss);
  if (!d->loss) nomem = true;
  for (size_t i = 0; !nomem && i < kStatRows; i++) {
    if (!rows[i].value || !strcmp(rows[i].severity, "info")) continue;
    d->loss[d->nloss++] = (etch__stats_loss){
        .name = etch__strdup(rows[i].name),
        .value = (int64_t)rows[i].value,
        .description = etch__strdup(rows[i].description)};
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
        etch__u64map_get(&imp->thread_by_key,
                   (uint64_t)(uint32_t)t->pid << 32 | (uint32_t)t->tid, &v)) {
      const qthread *th = &imp->threads[v];
      x->thread = dup_or_null(th->name);
      x->has_tid = true;
      x->tid = th->tid;
      if (th->pid && etch__u64map_get(&imp->proc_by_pid, (uint32_t)th->pid, &p)) {
        x->has_pid = true;
        x->pid = imp->procs[p].pid;
      }
    }
  }
  if (d->ndrop) qsort(d->drop, d->ndrop, sizeof *d->drop, cmp_drop);

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

void etch__importer_counts(const etch__importer *imp,
                           etch__import_counts *out) {
  *out = imp->counts;
}

void etch__importer_discard(etch__importer *imp) {
  if (!imp) return;
  etch__rows_free(imp->rows);
  imp->rows = NULL;
  /* No journal: end the transaction with what it holds. */
  if (imp->in_txn) sqlite3_exec(imp->db, "COMMIT;", NULL, NULL, NULL);
  imp->in_txn = false;
  etch__importer_free(imp);
}

void etch__importer_free(etch__importer *imp) {
  if (!imp) return;
  etch__rows_free(imp->rows);
  if (imp->in_txn) sqlite3_exec(imp->db, "ROLLBACK;", NULL, NULL, NULL);
  for (size_t i = 0; i < imp->ntracks; i++) {
    free(imp->tracks[i].stack);
    free(imp->tracks[i].hev);
  }
  free(imp->steps);
  free(imp->hflows);
  etch__arena_free(&imp->keep);
  free(imp->tracks);
  free(imp->procs);
  free(imp->threads);
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

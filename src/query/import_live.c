/*
 * import_live.c - an import that reads on: a trace being recorded kept in
 * DuckDB tables by a long-running process (etch ui), each step reading
 * only what was appended since the last one.
 *
 * The reader reads on (etch__reader_resume) in per-track order, as a cold
 * import reads (import_reader.c), with its state kept: each read delivers
 * what it held at its end. The importer is the cold import's, kept too:
 *
 * - Slice ids come from the reader's slice_index (etch__import_opts's
 *   reader_ids): the same ids as a cold import of the same bytes, whatever
 *   the order tracks are delivered in.
 * - Slices are written when they end. The slices still open at the end of
 *   a step are written with dur -1 (as a cold import writes them), and
 *   deleted at the end of the next step (every row with dur -1: a closed
 *   slice's dur is never negative) before they are written again, closed
 *   or still open.
 * - Flows are linked in time order at the end of each step from every step
 *   of every flow seen (kept in memory), into an emptied flow table.
 * - The small tables (track, process, thread, machine, stats,
 *   slice_summary, trace_bounds, the stack tables, perf_sample) are
 *   emptied and written again from the importer's state; the per-name
 *   summary and the tracks' busy time count the open slices up to the end
 *   of the trace only in what is written.
 * - A track whose slices go back in time from one read to the next (a
 *   track several sequences write, whose events came in a later read than
 *   later ones), or a thread track that goes back in time (the reader
 *   stops; the cold import then reads again holding every track), cannot
 *   be nested on: the import starts over, a cold read of the file as it is
 *   now (counted in etch__import_live_restarts), and reads on from there.
 *   So does a file replaced or cut shorter.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/import_int.h"
#include "reader/reader_priv.h"
#include "reader/save.h"

struct etch__import_live {
  etch__db *db;
  char *path;
  etch__import_opts opts;
  etch_reader *r;
  etch__importer *imp;
  bool hold_all; /* a thread track went back in time: every track held */
  uint64_t restarts;
};

static void on_event(const etch_event *ev, void *user) {
  etch__importer_event((etch__importer *)user, ev);
}

static void on_track(const etch_track_info *t, void *user) {
  etch__importer_track((etch__importer *)user, t);
}

/* Every row of each of `tables` deleted. */
static int empty_tables(etch__db *db, const char *const *tables, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char sql[160];
    snprintf(sql, sizeof sql, "DELETE FROM %s;", tables[i]);
    int rc = etch__db_exec(db, sql);
    if (rc) return rc;
  }
  return ETCH_OK;
}

/* Every row of every stored table deleted. */
static int empty_all(etch__db *db) {
  size_t len;
  const char *t;
  for (size_t i = 0; (t = etch__query_stored_table_name(i, &len)); i++) {
    char sql[160];
    snprintf(sql, sizeof sql, "DELETE FROM %.*s;", (int)len, t);
    int rc = etch__db_exec(db, sql);
    if (rc) return rc;
  }
  return ETCH_OK;
}

/* The tables written again at every step, whole. */
static const char *const kRewritten[] = {
    "track",         "process",
    "thread",        "machine",
    "stats",         "slice_summary",
    "trace_bounds",  "stack_profile_mapping",
    "stack_profile_frame", "stack_profile_callsite",
    "stack_profile_symbol", "__intrinsic_track_event_callstacks",
    "perf_sample",   "perf_session",
};

/* The processes and threads from index nprocs and nthreads on forgotten
 * (those made for one write). */
static void imp_forget(etch__importer *imp, size_t nprocs, size_t nthreads) {
  for (size_t i = imp->nprocs; i-- > nprocs;) {
    const qproc *p = &imp->procs[i];
    uint64_t key = etch__imp_machine_key((uint32_t)p->pid, p->machine);
    int64_t idx;
    for (; etch__u64map_get(&imp->proc_by_pid, key, &idx); key++)
      if (idx == (int64_t)i) {
        etch__u64map_del(&imp->proc_by_pid, key, NULL);
        break;
      }
  }
  for (size_t i = imp->nthreads; i-- > nthreads;) {
    const qthread *t = &imp->threads[i];
    uint64_t key = etch__imp_machine_key(
        (uint64_t)(uint32_t)t->pid << 32 | (uint32_t)t->tid, t->machine);
    int64_t idx;
    for (; etch__u64map_get(&imp->thread_by_key, key, &idx); key++)
      if (idx == (int64_t)i) {
        etch__u64map_del(&imp->thread_by_key, key, NULL);
        break;
      }
  }
  if (nprocs < imp->nprocs) imp->nprocs = nprocs;
  if (nthreads < imp->nthreads) imp->nthreads = nthreads;
}

/* What step_write changes only for what it writes, put back after. */
typedef struct snapshot {
  name_summary *summary;
  size_t nsummary;
  size_t nprocs, nthreads; /* the idle tracks' are made for the write */
  etch__import_counts counts;
  int64_t *busy; /* per track */
  bool *has_busy;
} snapshot;

static bool snap_take(const etch__importer *imp, snapshot *s) {
  memset(s, 0, sizeof *s);
  s->nsummary = imp->nsummary;
  s->nprocs = imp->nprocs;
  s->nthreads = imp->nthreads;
  s->counts = imp->counts;
  size_t n = imp->ntracks ? imp->ntracks : 1;
  s->summary = etch__malloc((imp->nsummary ? imp->nsummary : 1) *
                            sizeof *s->summary);
  s->busy = etch__malloc(n * sizeof *s->busy);
  s->has_busy = etch__malloc(n * sizeof *s->has_busy);
  if (!s->summary || !s->busy || !s->has_busy) return false;
  if (imp->nsummary)
    memcpy(s->summary, imp->summary, imp->nsummary * sizeof *s->summary);
  for (size_t i = 0; i < imp->ntracks; i++) {
    s->busy[i] = imp->tracks[i].busy;
    s->has_busy[i] = imp->tracks[i].has_busy;
  }
  return true;
}

static void snap_put_back(etch__importer *imp, const snapshot *s) {
  /* Names the open slices brought in leave the summary's map again. */
  for (size_t i = s->nsummary; i < imp->nsummary; i++)
    etch__u64map_del(&imp->summary_by_name,
                     (uint64_t)(uintptr_t)imp->summary[i].name, NULL);
  imp->nsummary = s->nsummary;
  /* The processes and threads only idle tracks name, made for the write,
   * are made again at the next (their ids follow the tracks with events
   * of a cold import of the bytes then). */
  imp_forget(imp, s->nprocs, s->nthreads);
  if (s->nsummary)
    memcpy(imp->summary, s->summary, s->nsummary * sizeof *s->summary);
  imp->counts = s->counts;
  for (size_t i = 0; i < imp->ntracks; i++) {
    imp->tracks[i].busy = s->busy[i];
    imp->tracks[i].has_busy = s->has_busy[i];
  }
}

static void snap_free(snapshot *s) {
  free(s->summary);
  free(s->busy);
  free(s->has_busy);
}

/*
 * The open slices of `t` written with dur -1, as etch__importer_finish
 * closes them (each one's self time up to `last`, its children's time
 * taken out), without closing them.
 */
static void write_open(etch__importer *imp, qtrack *t, int64_t first,
                       int64_t last) {
  int64_t carry = 0; /* the duration of the open child above */
  for (uint32_t i = t->depth; i-- > 0;) {
    const open_slice *s = &t->stack[i];
    int64_t end = first <= last ? last : s->ts;
    int64_t dur = end - s->ts;
    if (dur < 0) dur = 0;
    int64_t self = dur - (s->child_dur + carry);
    if (self < 0) self = 0;
    etch__imp_insert_slice(imp, t, s->id, s->ts, -1, s->cat, s->name, i,
                           i ? t->stack[i - 1].id : 0, s->arg_set_id, self);
    imp->counts.open_slices++;
    etch__imp_summary_add(imp, s->name, dur, self);
    if (!i) {
      t->busy += dur;
      t->has_busy = true;
    }
    carry = dur;
  }
}

/* The end of a read: every table brought up to what was read. */
static int step_write(etch__import_live *l) {
  etch__importer *imp = l->imp;
  etch_reader *r = l->r;
  if (imp->err) return imp->err;
  etch_reader_stats st;
  int64_t first = 1, last = 0;
  etch_reader_get_stats(r, &st);
  if (etch_reader_time_bounds(r, &first, &last) != ETCH_OK) {
    first = 1;
    last = 0;
  }
  imp->first_ts = first;
  imp->last_ts = last;
  imp->rstats = st;
  etch__importer_machines(imp, r);
  /* This read's closed slices, counters and args in; flows again. */
  int rc = etch__rows_flush(imp->rows, true);
  if (!rc) rc = etch__db_exec(l->db, "DELETE FROM slice_rows WHERE x.dur = -1;");
  if (!rc) rc = etch__db_exec(l->db, "DELETE FROM flow;");
  if (!rc)
    rc = empty_tables(l->db, kRewritten, ETCH_ARRAY_SIZE(kRewritten));
  if (rc) return rc;
  etch__u64map_free(&imp->flows);
  etch__u64map_free(&imp->flow_ts);
  memset(&imp->flows, 0, sizeof imp->flows);
  memset(&imp->flow_ts, 0, sizeof imp->flow_ts);
  imp->counts.flows = 0;
  imp->counts.flows_cut = 0;
  etch__imp_link_steps(imp);
  snapshot snap;
  if (!snap_take(imp, &snap)) {
    snap_free(&snap);
    return etch__error(ETCH_ENOMEM, "import: out of memory");
  }
  etch__imp_idle_ids(imp);
  for (size_t i = 0; i < imp->ntracks && !imp->err; i++)
    write_open(imp, &imp->tracks[i], first, last);
  imp->counts.tracks = imp->ntracks;
  rc = imp->err;
  if (!rc) rc = etch__rows_close(imp->rows); /* opened again at unpause */
  if (!rc) rc = etch__import_write_tables(imp, &st);
  if (!rc) rc = etch__import_stacks(imp, r);
  if (!rc) rc = etch__import_samples(imp, r);
  snap_put_back(imp, &snap);
  snap_free(&snap);
  return rc;
}

/* A new reader and importer on the file, set up, not run. */
static int live_new(etch__import_live *l) {
  etch__importer_free(l->imp);
  etch_reader_close(l->r);
  l->imp = NULL;
  l->r = NULL;
  int rc = etch_reader_open_file(&l->r, l->path);
  if (!rc) rc = etch__importer_new(&l->imp, l->db, NULL, &l->opts);
  if (rc) return rc;
  l->imp->live = true;
  etch__reader_set_track_order(l->r, l->hold_all);
  etch__reader_set_match_ends(l->r, false);
  rc = etch_reader_set_allow_truncated(l->r, true);
  if (!rc) rc = etch_reader_set_strict(l->r, l->opts.strict);
  if (!rc) rc = etch_reader_on_track(l->r, on_track, l->imp);
  etch__reader_set_idle_tracks(l->r, etch__importer_track_idle);
  if (!rc) rc = etch_reader_on(l->r, NULL, NULL, on_event, l->imp);
  if (!rc) rc = etch_reader_on_sample(l->r, etch__import_on_sample, l->imp);
  return rc;
}

/* A cold read of the file as it is now, into emptied tables. */
static int live_start(etch__import_live *l) {
  int rc = empty_all(l->db);
  if (!rc) rc = live_new(l);
  if (!rc) rc = etch_reader_run(l->r);
  if (!rc && etch__reader_went_back(l->r) && !l->hold_all) {
    l->hold_all = true;
    return live_start(l);
  }
  if (!rc) rc = step_write(l);
  int prc = etch__imp_pause(l->imp);
  return rc ? rc : prc;
}

/* A live import of `path` into `db`, not yet read. */
static int live_alloc(etch__import_live **out, etch__db *db,
                      const char *path, const etch__import_opts *opts) {
  *out = NULL;
  if (!db || !path)
    return etch__error(ETCH_EINVAL, "import: a live import needs a "
                                    "database and a file");
  etch__import_live *l = etch__calloc(1, sizeof *l);
  if (!l || !(l->path = etch__strdup(path))) {
    free(l);
    return etch__error(ETCH_ENOMEM, "import: out of memory");
  }
  l->db = db;
  if (opts) l->opts = *opts;
  l->opts.file_order = true;
  l->opts.timestamp_order = false;
  l->opts.stable_strings = true; /* the reader, kept, pools them */
  l->opts.reader_ids = true;
  l->opts.allow_truncated = true;
  l->opts.progress = false;
  l->opts.live = true;
  *out = l;
  return ETCH_OK;
}

int etch__import_live_open(etch__import_live **out, etch__db *db,
                           const char *path, const etch__import_opts *opts) {
  etch__import_live *l;
  int rc = live_alloc(&l, db, path, opts);
  if (rc) return rc;
  rc = etch__query_schema_create(db, NULL);
  if (!rc) rc = live_start(l);
  if (rc) {
    etch__import_live_close(l);
    return rc;
  }
  *out = l;
  return ETCH_OK;
}

#define LIVE_MAGIC 0x4556494c48435445ull /* "ETCHLIVE" */
#define LIVE_VERSION 1u

int etch__import_live_save(const etch__import_live *l, etch_vec *out) {
  if (!l || !l->imp || !l->r)
    return etch__error(ETCH_ESTATE, "import: no live import to save");
  etch__sv_w w = {0};
  etch__sv_u64(&w, LIVE_MAGIC);
  etch__sv_u32(&w, LIVE_VERSION);
  etch__sv_u8(&w, l->hold_all);
  etch__sv_u64(&w, l->restarts);
  int rc = etch__reader_save(l->r, &w);
  if (!rc) rc = etch__imp_save(l->imp, &w);
  etch__sv_u64(&w, LIVE_MAGIC);
  if (!rc && w.oom) rc = etch__error(ETCH_ENOMEM, "import: out of memory");
  if (rc) {
    etch__vec_free(&w.v);
    return rc;
  }
  *out = w.v;
  return ETCH_OK;
}

int etch__import_live_restore(etch__import_live **out, etch__db *db,
                              const char *path, const etch__import_opts *opts,
                              const void *state, size_t len) {
  etch__import_live *l;
  int rc = live_alloc(&l, db, path, opts);
  if (rc) return rc;
  etch__sv_r in = {.p = (const uint8_t *)state, .left = len};
  if (etch__sv_get_u64(&in) != LIVE_MAGIC ||
      etch__sv_get_u32(&in) != LIVE_VERSION) {
    etch__import_live_close(l);
    return etch__error(ETCH_EFORMAT, "saved import: not a saved live import "
                                     "of this version");
  }
  l->hold_all = etch__sv_get_bool(&in);
  l->restarts = etch__sv_get_u64(&in);
  rc = in.bad ? etch__error(ETCH_EFORMAT, "saved import: cut short")
              : live_new(l);
  if (!rc) rc = etch__reader_restore(l->r, &in);
  if (!rc) rc = etch__imp_restore(l->imp, &in);
  if (!rc && (etch__sv_get_u64(&in) != LIVE_MAGIC || in.bad || in.left))
    rc = etch__error(ETCH_EFORMAT, "saved import: cut short or followed by "
                                   "more");
  int prc = l->imp ? etch__imp_pause(l->imp) : ETCH_OK;
  if (!rc) rc = prc;
  if (rc) {
    etch__import_live_close(l);
    return rc;
  }
  *out = l;
  return ETCH_OK;
}

int etch__import_live_step(etch__import_live *l, bool *changed) {
  if (changed) *changed = false;
  if (!l || !l->imp)
    return etch__error(ETCH_ESTATE, "import: no live import to step");
  int rc = etch__imp_unpause(l->imp);
  if (rc) return rc;
  bool grew = false;
  rc = etch__reader_resume(l->r, &grew);
  if (rc == ETCH_ESTATE) { /* replaced or cut shorter: read it again */
    etch__imp_pause(l->imp);
    l->restarts++;
    if (changed) *changed = true;
    return live_start(l);
  }
  if (!rc && grew && (etch__reader_went_back(l->r) || l->imp->went_back)) {
    etch__imp_pause(l->imp);
    if (etch__reader_went_back(l->r)) l->hold_all = true;
    l->restarts++;
    if (changed) *changed = true;
    return live_start(l);
  }
  if (!rc && grew) rc = step_write(l);
  int prc = etch__imp_pause(l->imp);
  if (!rc) rc = prc;
  if (!rc && changed) *changed = grew;
  return rc;
}

bool etch__import_live_recording(const etch__import_live *l) {
  etch_reader_stats st;
  if (!l || !l->r) return false;
  etch_reader_get_stats(l->r, &st);
  return st.recording;
}

uint64_t etch__import_live_offset(const etch__import_live *l) {
  etch_reader_stats st;
  if (!l || !l->r) return 0;
  etch_reader_get_stats(l->r, &st);
  return st.truncated_bytes ? st.truncated_offset : st.bytes;
}

uint64_t etch__import_live_restarts(const etch__import_live *l) {
  return l ? l->restarts : 0;
}

int etch__import_live_set_path(etch__import_live *l, const char *path) {
  if (!l || !path)
    return etch__error(ETCH_EINVAL, "import: no live import or path");
  char *p = etch__strdup(path);
  if (!p) return etch__error(ETCH_ENOMEM, "import: out of memory");
  int rc = l->r ? etch__reader_set_path(l->r, path) : ETCH_OK;
  if (rc) {
    free(p);
    return rc;
  }
  free(l->path);
  l->path = p;
  return ETCH_OK;
}

void etch__import_live_close(etch__import_live *l) {
  if (!l) return;
  etch__importer_free(l->imp);
  etch_reader_close(l->r);
  free(l->path);
  free(l);
}

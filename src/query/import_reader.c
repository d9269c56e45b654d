/*
 * import_reader.c - runs an etch_reader over a trace and feeds the importer.
 *
 * Progress: when asked (etch__import_opts.progress), the reader's own line
 * on stderr (etch_reader_set_progress).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "query/query.h"
#include "reader/reader_priv.h"

static void on_event(const etch_event *ev, void *user) {
  etch__importer_event((etch__importer *)user, ev);
}

static void on_track(const etch_track_info *t, void *user) {
  etch__importer_track((etch__importer *)user, t);
}

/* Where the trace comes from: a file or memory. */
typedef struct source {
  const char *path;
  const void *data;
  size_t len;
} source;

static int open_source(const source *src, etch_reader **r) {
  if (src->path) return etch_reader_open_file(r, src->path);
  return etch_reader_open_memory(r, src->data, src->len);
}

/* Deletes every row the tables of `catalog` hold: empty again. */
static int empty_db(etch__db *db, const char *catalog) {
  size_t len;
  const char *t;
  for (size_t i = 0; (t = etch__query_stored_table_name(i, &len)); i++) {
    char sql[256];
    snprintf(sql, sizeof sql, "DELETE FROM %s%s%s%.*s;", catalog ? "\"" : "",
             catalog ? catalog : "", catalog ? "\"." : "", (int)len, t);
    int rc = etch__db_exec(db, sql);
    if (rc) return rc;
  }
  return ETCH_OK;
}

/*
 * One read of the trace into the importer. Unless asked for timestamp
 * order, the reader delivers in per-track order, holding `hold_all` or only
 * the tracks that are not thread tracks; when a thread track goes back in
 * time the read stops and *restart is set.
 */
static int run_once(etch__db *db, const char *catalog,
                    const etch__row_sink *sink, const source *src,
                    const etch__import_opts *o, bool hold_all,
                    etch__importer **out, etch_reader **rout, bool *restart) {
  *out = NULL;
  *rout = NULL;
  *restart = false;
  etch_reader *r;
  int rc = open_source(src, &r);
  if (rc) return rc;
  etch__importer *imp;
  rc = sink ? etch__importer_new_sink(&imp, sink, o)
            : etch__importer_new(&imp, db, catalog, o);
  if (rc) {
    etch_reader_close(r);
    return rc;
  }
  if (o->timestamp_order)
    rc = etch_reader_set_order(r, ETCH_ORDER_TIMESTAMP);
  else
    etch__reader_set_track_order(r, hold_all);
  /* The importer matches ends to begins itself, per track in time order
   * (its nesting stack): the reader hands every end on, matched or not. */
  etch__reader_set_match_ends(r, false);
  if (!rc) rc = etch_reader_set_progress(r, o->progress);
  if (!rc) rc = etch_reader_set_allow_truncated(r, o->allow_truncated);
  if (!rc) rc = etch_reader_set_strict(r, o->strict);
  if (!rc) rc = etch_reader_on_track(r, on_track, imp);
  /* Tracks without events take their ids last, whatever the reads. */
  etch__reader_set_idle_tracks(r, etch__importer_track_idle);
  if (!rc) rc = etch_reader_on(r, NULL, NULL, on_event, imp);
  if (!rc) rc = etch_reader_on_sample(r, etch__import_on_sample, imp);
  if (!rc) rc = etch_reader_run(r);
  if (!rc && etch__reader_went_back(r)) {
    *restart = true;
    etch__importer_free(imp);
    etch_reader_close(r);
    if (sink) return sink->reset(sink->ctx);
    return db ? empty_db(db, catalog) : ETCH_OK;
  }
  if (!rc) {
    etch_reader_stats st;
    int64_t first = 1, last = 0;
    etch_reader_get_stats(r, &st);
    if (etch_reader_time_bounds(r, &first, &last) != ETCH_OK) {
      first = 1;
      last = 0;
    }
    etch__importer_machines(imp, r);
    rc = etch__import_stacks(imp, r); /* import_stacks.c */
    if (!rc) rc = etch__import_samples(imp, r); /* import_samples.c */
    if (!rc) rc = etch__importer_finish(imp, &st, first, last);
  }
  *out = imp;
  *rout = r;
  return rc;
}

/* What a read gives besides the importer (run_x). */
typedef struct run_extra {
  bool quiet;          /* no warning for a trace cut short */
  bool has_realtime;   /* out: etch__reader_realtime_offset's */
  int64_t realtime_offset;
  const etch__row_sink *sink; /* rows to this sink rather than to db */
  etch__import_result *res;   /* out (may be NULL): what was read */
} run_extra;

/* Imports, redoing the read with every track held if a thread track went
 * back in time. The importer is returned for its counts or stats. */
static int run_x(etch__db *db, const char *catalog, const source *src,
                 const etch__import_opts *opts, etch__importer **out,
                 run_extra *x) {
  etch__import_opts o = {0};
  if (opts) o = *opts;
  o.file_order = !o.timestamp_order;
  o.stable_strings = true; /* the reader pools names and categories */
  o.reader_ids = true;
  etch_reader *r = NULL;
  bool restart;
  int rc = db ? etch__query_schema_create(db, catalog) : ETCH_OK;
  const etch__row_sink *sink = x ? x->sink : NULL;
  if (!rc)
    rc = run_once(db, catalog, sink, src, &o, false, out, &r, &restart);
  if (!rc && restart)
    rc = run_once(db, catalog, sink, src, &o, true, out, &r, &restart);
  if (!rc && r) {
    etch_reader_stats st;
    etch_reader_get_stats(r, &st);
    if (x && x->res) {
      x->res->stats = st;
      if (etch_reader_time_bounds(r, &x->res->first, &x->res->last) !=
          ETCH_OK) {
        x->res->first = 1;
        x->res->last = 0;
      }
    }
    if (st.recording && !(x && x->quiet) && !o.quiet)
      etch__query_note_recording(src->path, st.bytes);
    if (st.truncated_bytes && !(x && x->quiet) && !o.quiet)
      etch__query_warn_cut_short(src->path, st.truncated_bytes,
                                 st.truncated_offset);
    if (st.malformed_packets && !(x && x->quiet) && !o.quiet)
      etch__query_warn_malformed(src->path, st.malformed_packets,
                                 etch__reader_malformed_first(r));
    if (x)
      x->has_realtime = etch__reader_realtime_offset(r, &x->realtime_offset);
  }
  /* The reader owns the strings the importer's pointer cache saw; the
   * importer keeps its own copies, so the reader can go now. */
  etch_reader_close(r);
  return rc;
}

void etch__query_note_recording(const char *path, uint64_t bytes) {
  fprintf(stderr,
          "etch: note: %s is still being recorded: read up to its last whole "
          "packet (%llu bytes)\n",
          path ? path : "the trace", (unsigned long long)bytes);
}

static int run(etch__db *db, const char *catalog, const source *src,
               const etch__import_opts *opts, etch__importer **out) {
  return run_x(db, catalog, src, opts, out, NULL);
}

static int import(etch__db *db, const char *catalog, const source *src,
                  const etch__import_opts *opts,
                  etch__import_counts *counts) {
  etch__importer *imp = NULL;
  int rc = run(db, catalog, src, opts, &imp);
  if (counts && imp) etch__importer_counts(imp, counts);
  etch__importer_free(imp);
  return rc;
}

int etch__query_import_file(etch__db *db, const char *catalog,
                            const char *path, const etch__import_opts *opts,
                            etch__import_counts *counts) {
  source src = {.path = path};
  return import(db, catalog, &src, opts, counts);
}

int etch__query_import_memory(etch__db *db, const void *data, size_t len,
                              const char *name, const etch__import_opts *opts,
                              etch__import_counts *counts) {
  (void)name;
  source src = {.data = data, .len = len};
  return import(db, NULL, &src, opts, counts);
}

int etch__query_import_sink(const char *path, const void *data, size_t len,
                            const etch__row_sink *sink,
                            const etch__import_opts *opts,
                            etch__import_result *res) {
  source src = {.path = path, .data = data, .len = len};
  etch__import_result local;
  run_extra x = {.sink = sink, .res = res ? res : &local};
  memset(x.res, 0, sizeof *x.res);
  x.res->first = 1; /* no events until the reader says */
  etch__importer *imp = NULL;
  int rc = run_x(NULL, NULL, &src, opts, &imp, &x);
  if (imp) etch__importer_counts(imp, &x.res->counts);
  etch__importer_free(imp);
  return rc;
}

/* ---- etch stats without a database ------------------------------------------ */

static int stats_run(const source *src, FILE *out,
                     const etch__stats_opts *opts) {
  etch__stats_opts dflt = {.top = 10};
  if (!opts) opts = &dflt;
  etch__import_opts o = {.progress = isatty(STDERR_FILENO) != 0,
                         .allow_truncated = opts->allow_truncated,
                         .strict = opts->strict};
  etch__importer *imp = NULL;
  int rc = run(NULL, NULL, src, &o, &imp);
  etch__stats_data d;
  if (!rc) rc = etch__importer_stats_data(imp, opts->top > 0 ? opts->top : 10,
                                          &d);
  etch__importer_free(imp);
  if (rc) return rc;
  etch__stats_print(&d, out, opts);
  etch__stats_data_free(&d);
  return ETCH_OK;
}

int etch__query_stats_file(const char *path, FILE *out,
                           const etch__stats_opts *opts) {
  source src = {.path = path};
  return stats_run(&src, out, opts);
}

int etch__query_stats_memory(const void *data, size_t len, FILE *out,
                             const etch__stats_opts *opts) {
  source src = {.data = data, .len = len};
  return stats_run(&src, out, opts);
}

/* ---- a trace's summary (etch ls) -------------------------------------------------- */

int etch__query_summary_file(const char *path, etch__stats_data *out,
                             bool *has_realtime, int64_t *realtime_offset) {
  memset(out, 0, sizeof *out);
  *has_realtime = false;
  *realtime_offset = 0;
  source src = {.path = path};
  etch__import_opts o = {.allow_truncated = true};
  run_extra x = {.quiet = true};
  etch__importer *imp = NULL;
  int rc = run_x(NULL, NULL, &src, &o, &imp, &x);
  if (!rc) rc = etch__importer_stats_data(imp, 1, out);
  etch__importer_free(imp);
  if (rc) return rc;
  *has_realtime = x.has_realtime;
  *realtime_offset = x.realtime_offset;
  return ETCH_OK;
}

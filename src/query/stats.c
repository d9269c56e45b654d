/*
 * stats.c - the `etch stats` report: where the time went, from the imported
 * tables (one import, then a handful of aggregate queries).
 *
 * Sections: trace (duration and counts), top slices by total and by self
 * time, per-thread busy time (depth-0 slices), counters, frames (slices on
 * a track named "Frames") and bookmarks (instants on "Bookmarks") when the
 * trace has any, data loss. Slices
 * still open at the end (dur -1) count up to the end of the trace. Instants
 * (dur 0) are left out of the time tables.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/containers.h"
#include "query/query.h"
#include "query/stats_int.h"

void etch__fmt_dur(char *buf, size_t n, int64_t ns) {
  static const struct {
    double div;
    const char *unit;
  } units[] = {{1e3, "us"}, {1e6, "ms"}, {1e9, "s"}};
  const char *sign = ns < 0 ? "-" : "";
  double a = fabs((double)ns);
  if (a < 1000) {
    snprintf(buf, n, "%s%.0f ns", sign, a);
    return;
  }
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(units); i++) {
    double v = a / units[i].div;
    /* Move to the next unit when rounding would print 1000.00. */
    if (i + 1 < ETCH_ARRAY_SIZE(units) && round(v * 100) >= 100000) continue;
    snprintf(buf, n, "%s%.2f %s", sign, v, units[i].unit);
    return;
  }
}

/* NaN (no value: a NaN sample, or no number at all) prints as "-". */
static void fmt_num(char *buf, size_t n, double v) {
  if (isnan(v))
    snprintf(buf, n, "-");
  else if (v == floor(v) && fabs(v) < 1e15)
    snprintf(buf, n, "%.0f", v);
  else
    snprintf(buf, n, "%.6g", v);
}


/* Opens a cursor on `sql`; false (and r->rc set) on an error. */
static bool q(report *r, etch__res *res, const char *sql) {
  if (r->rc) return false;
  r->rc = etch__res_query(r->db, sql, "stats", res);
  return !r->rc;
}

/* Closes a cursor; `nomem`: a row could not be kept. */
static void done(report *r, etch__res *res, bool nomem) {
  int rc = etch__res_close(res);
  if (!r->rc && nomem) r->rc = etch__error(ETCH_ENOMEM, "stats: out of memory");
  if (!r->rc) r->rc = rc;
}

/* A copy of a text column; NULL for a NULL value, and NULL with `*nomem`
 * set when the copy could not be made (never an empty name in its
 * place). */
static char *col_dup(const etch__res *res, idx_t col, bool *nomem) {
  char *s = etch__res_strdup(res, col);
  if (!s && !etch__res_null(res, col)) *nomem = true;
  return s;
}

/* A single integer from `sql` (0 when NULL or no row). */
static int64_t scalar(report *r, const char *sql) {
  etch__res res;
  if (!q(r, &res, sql)) return 0;
  int64_t v = etch__res_next(&res) ? etch__res_i64(&res, 0) : 0;
  done(r, &res, false);
  return v;
}



/* The effective duration of a slice: open ones run to the end. */
#define EFF_DUR \
  "CASE WHEN dur < 0 THEN greatest((SELECT coalesce(end_ts, 0) FROM " \
  "trace_bounds) - ts, 0) ELSE dur END"


/* ---- the report's data, from the tables ------------------------------------------- */

static int cmp_null_str(const char *a, const char *b) {
  if (!a || !b) return (a != NULL) - (b != NULL); /* NULL first, as SQL */
  return strcmp(a, b);
}

static int cmp_top_total(const void *x, const void *y) {
  const etch__stats_top *a = x, *b = y;
  if (a->total != b->total) return a->total > b->total ? -1 : 1;
  return cmp_null_str(a->name, b->name);
}

static int cmp_top_self(const void *x, const void *y) {
  const etch__stats_top *a = x, *b = y;
  if (a->self != b->self) return a->self > b->self ? -1 : 1;
  return cmp_null_str(a->name, b->name);
}

void etch__stats_sort_top(etch__stats_top *rows, size_t n, bool by_self,
                          size_t top, etch__stats_top **out, size_t *nout) {
  if (n) qsort(rows, n, sizeof *rows, by_self ? cmp_top_self : cmp_top_total);
  for (size_t i = top; i < n; i++) free(rows[i].name);
  *out = rows;
  *nout = n < top ? n : top;
}

static void top_from_db(report *r, bool by_self, int top,
                        etch__stats_data *d) {
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT name, count, total_dur, self_dur, max_dur FROM "
           "slice_summary ORDER BY %s DESC, name NULLS FIRST LIMIT %d",
           by_self ? "self_dur" : "total_dur", top);
  etch__res res;
  if (!q(r, &res, sql)) return;
  etch_vec v = {0}; /* of etch__stats_top */
  bool nomem = false;
  while (etch__res_next(&res)) {
    etch__stats_top *x = ETCH_VEC_NEW(&v, etch__stats_top);
    if (!x) {
      nomem = true;
      break;
    }
    *x = (etch__stats_top){.name = col_dup(&res, 0, &nomem),
                           .count = etch__res_i64(&res, 1),
                           .total = etch__res_i64(&res, 2),
                           .self = etch__res_i64(&res, 3),
                           .max = etch__res_i64(&res, 4)};
  }
  etch__stats_top *rows = ETCH_VEC_AT(&v, etch__stats_top);
  size_t n = ETCH_VEC_COUNT(&v, etch__stats_top);
  ETCH_DCHECK(nomem || n <= (size_t)top); /* the LIMIT held */
  done(r, &res, nomem);
  if (by_self) {
    d->by_self = rows;
    d->n_by_self = n;
  } else {
    d->by_total = rows;
    d->n_by_total = n;
  }
}

/* Frames and bookmarks (etch_frame_*, etch_bookmark), in time order. */
static void marks_from_db(report *r, etch__stats_data *d) {
  etch__res res;
  bool nomem = false;
  if (q(r, &res,
        "SELECT s.ts, s.dur FROM slice s JOIN track t ON s.track_id = t.id "
        "WHERE t.name = 'Frames' AND t.type != 'counter' AND s.dur >= 0 "
        "ORDER BY s.ts, s.dur")) {
    etch_vec v = {0}; /* of etch__stats_frame */
    while (etch__res_next(&res)) {
      etch__stats_frame *x = ETCH_VEC_NEW(&v, etch__stats_frame);
      if (!x) {
        nomem = true;
        break;
      }
      *x = (etch__stats_frame){etch__res_i64(&res, 0),
                                                    etch__res_i64(&res, 1)};
    }
    d->frames = ETCH_VEC_AT(&v, etch__stats_frame);
    d->nframes = ETCH_VEC_COUNT(&v, etch__stats_frame);
    done(r, &res, nomem);
  }
  if (q(r, &res,
        "SELECT s.ts, s.name FROM slice s JOIN track t ON s.track_id = t.id "
        "WHERE t.name = 'Bookmarks' AND t.type != 'counter' AND s.dur = 0 "
        "ORDER BY s.ts, s.name NULLS FIRST")) {
    etch_vec v = {0}; /* of etch__stats_bookmark */
    while (etch__res_next(&res)) {
      etch__stats_bookmark *x = ETCH_VEC_NEW(&v, etch__stats_bookmark);
      if (!x) {
        nomem = true;
        break;
      }
      *x = (etch__stats_bookmark){
          etch__res_i64(&res, 0), col_dup(&res, 1, &nomem)};
    }
    d->bookmarks = ETCH_VEC_AT(&v, etch__stats_bookmark);
    d->nbookmarks = ETCH_VEC_COUNT(&v, etch__stats_bookmark);
    done(r, &res, nomem);
  }
}

int etch__stats_data_from_db(etch__db *db, int top, etch__stats_data *d) {
  memset(d, 0, sizeof *d);
  report rr = {.db = db};
  report *r = &rr;
  d->start = 1;
  d->end = 0;
  etch__res res;
  bool nomem = false;
  if (!q(r, &res, "SELECT start_ts, end_ts FROM trace_bounds")) return r->rc;
  if (etch__res_next(&res) && !etch__res_null(&res, 0)) {
    d->start = etch__res_i64(&res, 0);
    d->end = etch__res_i64(&res, 1);
  }
  done(r, &res, false);
  d->events = scalar(r, "SELECT value FROM stats WHERE name='track_events'");
  /* slice_data: slice's rows without the view's join (schema.c). */
  d->slices = scalar(r, "SELECT count(*) FROM slice_data");
  d->instants = scalar(r, "SELECT value FROM stats WHERE name='instants'");
  d->open_slices =
      scalar(r, "SELECT count(*) FROM slice_data WHERE dur < 0");
  d->counter_values = scalar(r, "SELECT count(*) FROM counter");
  d->counter_tracks =
      scalar(r, "SELECT count(*) FROM track WHERE type='counter'");
  d->flows = scalar(r, "SELECT count(*) FROM flow");
  d->tracks = scalar(r, "SELECT count(*) FROM track");
  d->processes = scalar(r, "SELECT count(*) FROM process");
  d->threads = scalar(r, "SELECT count(*) FROM thread");
  top_from_db(r, false, top, d);
  top_from_db(r, true, top, d);
  if (!r->rc) r->rc = etch__sample_fns_of_db(db, &d->samples, &d->fns, &d->nfns);

  /* Threads: grouped by track first (one pass over depth-0 slices). */
  if (q(r, &res,
        "SELECT th.name, th.tid, p.pid, p.name, CAST(sum(b.busy) AS BIGINT) "
        "AS busy, th.machine_id FROM (SELECT track_id, sum(" EFF_DUR ") AS busy "
        "FROM slice_data WHERE depth = 0 AND dur != 0 GROUP BY track_id) b "
        "JOIN track tr ON b.track_id = tr.id "
        "JOIN thread th ON tr.utid = th.utid "
        "LEFT JOIN process p ON th.upid = p.upid "
        "GROUP BY th.utid, th.name, th.tid, p.pid, p.name, th.machine_id "
        "ORDER BY th.machine_id, busy DESC, th.tid")) {
    etch_vec v = {0}; /* of etch__stats_thread */
    while (etch__res_next(&res)) {
      etch__stats_thread *x = ETCH_VEC_NEW(&v, etch__stats_thread);
      if (!x) {
        nomem = true;
        break;
      }
      *x = (etch__stats_thread){
          .thread = col_dup(&res, 0, &nomem),
          .tid = etch__res_i64(&res, 1),
          .pid = etch__res_i64(&res, 2),
          .has_pid = !etch__res_null(&res, 2),
          .process = col_dup(&res, 3, &nomem),
          .busy = etch__res_i64(&res, 4),
          .machine = etch__res_i64(&res, 5)};
    }
    d->thr = ETCH_VEC_AT(&v, etch__stats_thread);
    d->nthr = ETCH_VEC_COUNT(&v, etch__stats_thread);
    done(r, &res, nomem);
  }

  /* Machines, when there are several. */
  if (scalar(r, "SELECT count(*) FROM machine") > 1 &&
      q(r, &res,
        "SELECT m.id, m.raw_id, m.name, m.sysname, m.release, m.arch, "
        "(SELECT count(*) FROM process p WHERE p.machine_id = m.id), "
        "(SELECT count(*) FROM thread t WHERE t.machine_id = m.id) "
        "FROM machine m ORDER BY m.id")) {
    etch_vec v = {0}; /* of etch__stats_machine */
    while (etch__res_next(&res)) {
      etch__stats_machine *x = ETCH_VEC_NEW(&v, etch__stats_machine);
      if (!x) {
        nomem = true;
        break;
      }
      *x = (etch__stats_machine){
          .id = etch__res_i64(&res, 0),
          .raw_id = etch__res_i64(&res, 1),
          .name = col_dup(&res, 2, &nomem),
          .sysname = col_dup(&res, 3, &nomem),
          .release = col_dup(&res, 4, &nomem),
          .arch = col_dup(&res, 5, &nomem),
          .processes = etch__res_i64(&res, 6),
          .threads = etch__res_i64(&res, 7)};
    }
    d->machines = ETCH_VEC_AT(&v, etch__stats_machine);
    d->nmachines = ETCH_VEC_COUNT(&v, etch__stats_machine);
    done(r, &res, nomem);
  }

  /* Counters: "last" is the value at the largest ts, the first row of
   * equal ones. */
  if (q(r, &res,
        "SELECT tr.name, tr.unit, a.n, a.lo, a.hi, a.mean, a.last "
        "FROM (SELECT track_id, count(*) AS n, min(value) AS lo, "
        "max(value) AS hi, avg(value) AS mean, "
        "first(value ORDER BY ts DESC, id) AS last FROM counter "
        "GROUP BY track_id) a "
        "JOIN track tr ON tr.id = a.track_id "
        "ORDER BY tr.name NULLS FIRST, tr.id")) {
    etch_vec v = {0}; /* of etch__stats_counter */
    while (etch__res_next(&res)) {
      etch__stats_counter *x = ETCH_VEC_NEW(&v, etch__stats_counter);
      if (!x) {
        nomem = true;
        break;
      }
      *x = (etch__stats_counter){
          .track = col_dup(&res, 0, &nomem),
          .unit = col_dup(&res, 1, &nomem),
          .count = etch__res_i64(&res, 2),
          .min = etch__res_f64(&res, 3),
          .max = etch__res_f64(&res, 4),
          .mean = etch__res_f64(&res, 5),
          .last = etch__res_f64(&res, 6)};
    }
    d->ctr = ETCH_VEC_AT(&v, etch__stats_counter);
    d->nctr = ETCH_VEC_COUNT(&v, etch__stats_counter);
    done(r, &res, nomem);
  }

  if (q(r, &res,
        "SELECT name, value, description FROM stats "
        "WHERE severity IN ('data_loss', 'error') AND value != 0 "
        "ORDER BY rowid")) {
    etch_vec v = {0}; /* of etch__stats_loss */
    while (etch__res_next(&res)) {
      etch__stats_loss *x = ETCH_VEC_NEW(&v, etch__stats_loss);
      if (!x) {
        nomem = true;
        break;
      }
      char *name = col_dup(&res, 0, &nomem);
      char *desc = col_dup(&res, 2, &nomem);
      *x = (etch__stats_loss){
          .name = name ? name : nomem ? NULL : etch__strdup(""),
          .value = etch__res_i64(&res, 1),
          .description = desc ? desc : nomem ? NULL : etch__strdup("")};
    }
    d->loss = ETCH_VEC_AT(&v, etch__stats_loss);
    d->nloss = ETCH_VEC_COUNT(&v, etch__stats_loss);
    done(r, &res, nomem);
  }

  /* Events the SDK dropped, reported per thread as etch.dropped_events. */
  if (q(r, &res,
        "SELECT th.name, th.tid, p.pid, CAST(sum(a.int_value) AS BIGINT) "
        "FROM slice s "
        "JOIN args a ON a.arg_set_id = s.arg_set_id "
        "AND a.key = 'debug.count' "
        "JOIN track tr ON s.track_id = tr.id "
        "LEFT JOIN thread th ON tr.utid = th.utid "
        "LEFT JOIN process p ON th.upid = p.upid "
        "WHERE s.name = 'etch.dropped_events' "
        "GROUP BY tr.id, th.name, th.tid, p.pid ORDER BY th.tid NULLS FIRST")) {
    etch_vec v = {0}; /* of etch__stats_dropped */
    while (etch__res_next(&res)) {
      etch__stats_dropped *x = ETCH_VEC_NEW(&v, etch__stats_dropped);
      if (!x) {
        nomem = true;
        break;
      }
      *x = (etch__stats_dropped){
          .thread = col_dup(&res, 0, &nomem),
          .tid = etch__res_i64(&res, 1),
          .has_tid = !etch__res_null(&res, 1),
          .pid = etch__res_i64(&res, 2),
          .has_pid = !etch__res_null(&res, 2),
          .dropped = etch__res_i64(&res, 3)};
    }
    d->drop = ETCH_VEC_AT(&v, etch__stats_dropped);
    d->ndrop = ETCH_VEC_COUNT(&v, etch__stats_dropped);
    done(r, &res, nomem);
  }
  marks_from_db(r, d);
  if (r->rc) etch__stats_data_free(d);
  return r->rc;
}

int etch__stats_cmp_frame(const void *a, const void *b) {
  const etch__stats_frame *x = a, *y = b;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return (x->dur > y->dur) - (x->dur < y->dur);
}

int etch__stats_cmp_bookmark(const void *a, const void *b) {
  const etch__stats_bookmark *x = a, *y = b;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return cmp_null_str(x->name, y->name);
}

void etch__stats_data_free(etch__stats_data *d) {
  for (size_t i = 0; i < d->n_by_total; i++) free(d->by_total[i].name);
  for (size_t i = 0; i < d->n_by_self; i++) free(d->by_self[i].name);
  for (size_t i = 0; i < d->nthr; i++) {
    free(d->thr[i].thread);
    free(d->thr[i].process);
  }
  for (size_t i = 0; i < d->nctr; i++) {
    free(d->ctr[i].track);
    free(d->ctr[i].unit);
  }
  for (size_t i = 0; i < d->nloss; i++) {
    free(d->loss[i].name);
    free(d->loss[i].description);
  }
  for (size_t i = 0; i < d->ndrop; i++) free(d->drop[i].thread);
  for (size_t i = 0; i < d->nmachines; i++) {
    free(d->machines[i].name);
    free(d->machines[i].sysname);
    free(d->machines[i].release);
    free(d->machines[i].arch);
  }
  free(d->machines);
  for (size_t i = 0; i < d->nbookmarks; i++) free(d->bookmarks[i].name);
  etch__sample_fns_free(d->fns, d->nfns);
  free(d->frames);
  free(d->bookmarks);
  free(d->by_total);
  free(d->by_self);
  free(d->thr);
  free(d->ctr);
  free(d->loss);
  free(d->drop);
  memset(d, 0, sizeof *d);
}

/* ---- sections ------------------------------------------------------------------ */

static const char *or_dash(const char *s) { return s ? s : "-"; }

static void trace_section(report *r) {
  const etch__stats_data *x = r->d;
  int64_t dur = r->start <= r->end ? etch__sat_sub(r->end, r->start) : 0;
  int64_t events = x->events, slices = x->slices, instants = x->instants,
          open = x->open_slices, counters = x->counter_values,
          ctracks = x->counter_tracks, flows = x->flows, tracks = x->tracks,
          procs = x->processes, threads = x->threads;
  if (r->o->json) {
    jopen(r, "trace", '{');
    if (r->start <= r->end) {
      jint(r, "start_ts", r->start);
      jint(r, "end_ts", r->end);
    }
    jint(r, "duration_ns", dur);
    jint(r, "events", events);
    jint(r, "slices", slices);
    jint(r, "instants", instants);
    jint(r, "open_slices", open);
    jint(r, "counter_values", counters);
    jint(r, "counter_tracks", ctracks);
    jint(r, "flows", flows);
    jint(r, "tracks", tracks);
    jint(r, "processes", procs);
    jint(r, "threads", threads);
    jclose(r, '}');
    return;
  }
  char d[32];
  etch__fmt_dur(d, sizeof d, dur);
  section(r, "trace");
  etch__tt *t = etch__tt_new(2);
  etch__tt_cell(t, "duration");
  if (r->start <= r->end)
    etch__tt_cellf(t, "%s (%lld .. %lld ns)", d, (long long)r->start,
                   (long long)r->end);
  else
    etch__tt_cell(t, "0 (no events)");
  etch__tt_cell(t, "events");
  etch__tt_cellf(t, "%lld", (long long)events);
  etch__tt_cell(t, "slices");
  etch__tt_cellf(t, "%lld (%lld instant%s, %lld open at the end)",
                 (long long)slices, (long long)instants,
                 instants == 1 ? "" : "s", (long long)open);
  etch__tt_cell(t, "counters");
  etch__tt_cellf(t, "%lld values on %lld track%s", (long long)counters,
                 (long long)ctracks, ctracks == 1 ? "" : "s");
  etch__tt_cell(t, "flows");
  etch__tt_cellf(t, "%lld", (long long)flows);
  etch__tt_cell(t, "tracks");
  etch__tt_cellf(t, "%lld", (long long)tracks);
  etch__tt_cell(t, "processes");
  etch__tt_cellf(t, "%lld", (long long)procs);
  etch__tt_cell(t, "threads");
  etch__tt_cellf(t, "%lld", (long long)threads);
  /* No header line: print rows only. */
  etch__tt_print(t, r->out, "  ", false);
  etch__tt_free(t);
}

/* Ends a list section: the JSON array, or the table (or `empty` when it
 * has no row). */

static void top_section(report *r, bool by_self) {
  const etch__stats_top *rows = by_self ? r->d->by_self : r->d->by_total;
  size_t n = by_self ? r->d->n_by_self : r->d->n_by_total;
  etch__tt *t = NULL;
  if (r->o->json) {
    jopen(r, by_self ? "top_by_self" : "top_by_total", '[');
  } else {
    section(r, by_self ? "top slices by self time" : "top slices by total time");
    t = etch__tt_new(6);
    const char *h[] = {"name", "count", "total", "self", "avg", "max"};
    for (size_t i = 0; i < 6; i++) etch__tt_header(t, i, h[i], i > 0);
  }
  size_t limit = r->o->top > 0 ? (size_t)r->o->top : 10;
  for (size_t i = 0; i < n && i < limit; i++) {
    const char *name = rows[i].name;
    int64_t count = rows[i].count, total = rows[i].total,
            self = rows[i].self, max = rows[i].max;
    int64_t avg = count ? total / count : 0;
    if (r->o->json) {
      jopen(r, NULL, '{');
      jstr(r, "name", name);
      jint(r, "count", count);
      jint(r, "total_ns", total);
      jint(r, "self_ns", self);
      jint(r, "avg_ns", avg);
      jint(r, "max_ns", max);
      jclose(r, '}');
      continue;
    }
    char a[32], b[32], c[32], d[32];
    etch__fmt_dur(a, sizeof a, total);
    etch__fmt_dur(b, sizeof b, self);
    etch__fmt_dur(c, sizeof c, avg);
    etch__fmt_dur(d, sizeof d, max);
    etch__tt_cell(t, name ? name : "NULL");
    etch__tt_cellf(t, "%lld", (long long)count);
    etch__tt_cell(t, a);
    etch__tt_cell(t, b);
    etch__tt_cell(t, c);
    etch__tt_cell(t, d);
  }
  list_end(r, t, "no slices");
}

/* What a machine is called: its name, else "host" or "machine N". */
static const char *machine_label(const etch__stats_data *d, int64_t id,
                                 char *buf, size_t n) {
  for (size_t i = 0; i < d->nmachines; i++)
    if (d->machines[i].id == id && d->machines[i].name)
      return d->machines[i].name;
  if (id == 0) return "host";
  snprintf(buf, n, "machine %lld", (long long)id);
  return buf;
}

/* A trace of several machines: each, with its processes and threads. */
static void machines_section(report *r) {
  const etch__stats_data *d = r->d;
  if (d->nmachines < 2) return;
  etch__tt *t = NULL;
  if (r->o->json) {
    jopen(r, "machines", '[');
  } else {
    section(r, "machines");
    t = etch__tt_new(7);
    const char *h[] = {"machine", "id", "raw id", "system", "arch",
                       "processes", "threads"};
    const bool right[] = {false, true, true, false, false, true, true};
    for (size_t i = 0; i < 7; i++) etch__tt_header(t, i, h[i], right[i]);
  }
  for (size_t i = 0; i < d->nmachines; i++) {
    const etch__stats_machine *m = &d->machines[i];
    char b[32];
    const char *label = machine_label(d, m->id, b, sizeof b);
    if (r->o->json) {
      jopen(r, NULL, '{');
      jint(r, "id", m->id);
      jint(r, "raw_id", m->raw_id);
      jstr(r, "name", m->name);
      jstr(r, "sysname", m->sysname);
      jstr(r, "release", m->release);
      jstr(r, "arch", m->arch);
      jint(r, "processes", m->processes);
      jint(r, "threads", m->threads);
      jclose(r, '}');
      continue;
    }
    char sys[160];
    snprintf(sys, sizeof sys, "%s%s%s", m->sysname ? m->sysname : "-",
             m->release ? " " : "", m->release ? m->release : "");
    etch__tt_cell(t, label);
    etch__tt_cellf(t, "%lld", (long long)m->id);
    etch__tt_cellf(t, "%lld", (long long)m->raw_id);
    etch__tt_cell(t, sys);
    etch__tt_cell(t, or_dash(m->arch));
    etch__tt_cellf(t, "%lld", (long long)m->processes);
    etch__tt_cellf(t, "%lld", (long long)m->threads);
  }
  list_end(r, t, "none");
}

static void threads_section(report *r) {
  int64_t dur = r->start <= r->end ? etch__sat_sub(r->end, r->start) : 0;
  etch__tt *t = NULL;
  /* Several machines: each thread under its machine (sorted so). */
  bool multi = r->d->nmachines > 1;
  size_t m0 = multi ? 1 : 0;
  if (r->o->json) {
    jopen(r, "threads", '[');
  } else {
    section(r, "threads (busy = time in depth-0 slices)");
    t = etch__tt_new(6 + m0);
    const char *h[] = {"machine", "thread", "tid", "process", "pid", "busy",
                       "of trace"};
    const bool right[] = {false, false, true, false, true, true, true};
    for (size_t i = 0; i < 6 + m0; i++)
      etch__tt_header(t, i, h[i + 1 - m0], right[i + 1 - m0]);
  }
  for (size_t i = 0; i < r->d->nthr; i++) {
    const etch__stats_thread *th = &r->d->thr[i];
    int64_t busy = th->busy;
    if (r->o->json) {
      jopen(r, NULL, '{');
      if (multi) jint(r, "machine_id", th->machine);
      jstr(r, "thread", th->thread);
      jint(r, "tid", th->tid);
      jstr(r, "process", th->process);
      jint(r, "pid", th->has_pid ? th->pid : 0);
      jint(r, "busy_ns", busy);
      jclose(r, '}');
      continue;
    }
    char b[32];
    if (multi) {
      char mb[32];
      etch__tt_cell(t, machine_label(r->d, th->machine, mb, sizeof mb));
    }
    etch__fmt_dur(b, sizeof b, busy);
    etch__tt_cell(t, or_dash(th->thread));
    etch__tt_cellf(t, "%lld", (long long)th->tid);
    etch__tt_cell(t, or_dash(th->process));
    if (th->has_pid)
      etch__tt_cellf(t, "%lld", (long long)th->pid);
    else
      etch__tt_cell(t, "-");
    etch__tt_cell(t, b);
    if (dur > 0)
      etch__tt_cellf(t, "%.1f%%", 100.0 * (double)busy / (double)dur);
    else
      etch__tt_cell(t, "-");
  }
  list_end(r, t, "no slices on thread tracks");
}

static void counters_section(report *r) {
  etch__tt *t = NULL;
  if (r->o->json) {
    jopen(r, "counters", '[');
  } else {
    section(r, "counters");
    t = etch__tt_new(7);
    const char *h[] = {"track", "unit", "count", "min", "max", "mean", "last"};
    for (size_t i = 0; i < 7; i++) etch__tt_header(t, i, h[i], i > 1);
  }
  for (size_t i = 0; i < r->d->nctr; i++) {
    const etch__stats_counter *c = &r->d->ctr[i];
    if (r->o->json) {
      jopen(r, NULL, '{');
      jstr(r, "track", c->track);
      jstr(r, "unit", c->unit);
      jint(r, "count", c->count);
      jnum(r, "min", c->min);
      jnum(r, "max", c->max);
      jnum(r, "mean", c->mean);
      jnum(r, "last", c->last);
      jclose(r, '}');
      continue;
    }
    etch__tt_cell(t, or_dash(c->track));
    etch__tt_cell(t, or_dash(c->unit));
    etch__tt_cellf(t, "%lld", (long long)c->count);
    const double v4[4] = {c->min, c->max, c->mean, c->last};
    for (int k = 0; k < 4; k++) {
      char v[48];
      fmt_num(v, sizeof v, v4[k]);
      etch__tt_cell(t, v);
    }
  }
  list_end(r, t, "no counters");
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The p-th percentile of sorted `v` by nearest rank: the smallest value
 * with at least p% of the values at or below it. */
static int64_t percentile(const int64_t *v, size_t n, int p) {
  size_t rank = ((size_t)p * n + 99) / 100;
  return v[rank ? rank - 1 : 0];
}

/* Frame times: count, mean, p50/p95/p99, worst, and the worst frames (by
 * duration, the earlier first on ties) with where they are. */
enum { WORST_FRAMES = 5 };

static void frames_section(report *r) {
  const etch__stats_data *d = r->d;
  size_t n = d->nframes;
  if (!n) return;
  int64_t *dur = etch__malloc(n * sizeof *dur);
  size_t *worst = etch__malloc(n * sizeof *worst);
  if (!dur || !worst) {
    free(dur);
    free(worst);
    return;
  }
  double total = 0;
  for (size_t i = 0; i < n; i++) {
    dur[i] = d->frames[i].dur;
    total += (double)dur[i];
    worst[i] = i;
  }
  qsort(dur, n, sizeof *dur, cmp_i64);
  /* The worst few, by a partial selection (n can be large). */
  size_t nw = n < WORST_FRAMES ? n : WORST_FRAMES;
  for (size_t k = 0; k < nw; k++)
    for (size_t i = k + 1; i < n; i++) {
      const etch__stats_frame *a = &d->frames[worst[i]], *b = &d->frames[worst[k]];
      if (a->dur > b->dur || (a->dur == b->dur && worst[i] < worst[k])) {
        size_t x = worst[k];
        worst[k] = worst[i];
        worst[i] = x;
      }
    }
  int64_t mean = (int64_t)llround(total / (double)n);
  int64_t vals[5] = {percentile(dur, n, 50), percentile(dur, n, 95),
                     percentile(dur, n, 99), dur[n - 1], mean};
  if (r->o->json) {
    jopen(r, "frames", '{');
    jint(r, "count", (int64_t)n);
    jint(r, "mean_ns", vals[4]);
    jint(r, "p50_ns", vals[0]);
    jint(r, "p95_ns", vals[1]);
    jint(r, "p99_ns", vals[2]);
    jint(r, "worst_ns", vals[3]);
    jopen(r, "worst", '[');
    for (size_t k = 0; k < nw; k++) {
      jopen(r, NULL, '{');
      jint(r, "frame", (int64_t)worst[k] + 1);
      jint(r, "ts", d->frames[worst[k]].ts);
      jint(r, "dur_ns", d->frames[worst[k]].dur);
      jclose(r, '}');
    }
    jclose(r, ']');
    jclose(r, '}');
  } else {
    section(r, "frames (slices on the Frames track)");
    etch__tt *t = etch__tt_new(6);
    const char *h[] = {"count", "mean", "p50", "p95", "p99", "worst"};
    for (size_t i = 0; i < 6; i++) etch__tt_header(t, i, h[i], true);
    etch__tt_cellf(t, "%zu", n);
    const int64_t order[5] = {vals[4], vals[0], vals[1], vals[2], vals[3]};
    for (int k = 0; k < 5; k++) {
      char b[32];
      etch__fmt_dur(b, sizeof b, order[k]);
      etch__tt_cell(t, b);
    }
    etch__tt_print(t, r->out, "  ", true);
    etch__tt_free(t);
    fputc('\n', r->out);
    t = etch__tt_new(3);
    const char *h2[] = {"worst frames", "at", "duration"};
    for (size_t i = 0; i < 3; i++) etch__tt_header(t, i, h2[i], true);
    for (size_t k = 0; k < nw; k++) {
      const etch__stats_frame *f = &d->frames[worst[k]];
      char at[32], du[32];
      etch__fmt_dur(at, sizeof at, etch__sat_sub(f->ts, r->start));
      etch__fmt_dur(du, sizeof du, f->dur);
      etch__tt_cellf(t, "#%zu", worst[k] + 1);
      etch__tt_cell(t, at);
      etch__tt_cell(t, du);
    }
    etch__tt_print(t, r->out, "  ", true);
    etch__tt_free(t);
  }
  free(dur);
  free(worst);
}

/* Bookmarks in time order, at their time since the trace's start. */
static void bookmarks_section(report *r) {
  const etch__stats_data *d = r->d;
  if (!d->nbookmarks) return;
  etch__tt *t = NULL;
  if (r->o->json) {
    jopen(r, "bookmarks", '[');
  } else {
    section(r, "bookmarks");
    t = etch__tt_new(2);
    etch__tt_header(t, 0, "at", true);
    etch__tt_header(t, 1, "bookmark", false);
  }
  for (size_t i = 0; i < d->nbookmarks; i++) {
    const etch__stats_bookmark *b = &d->bookmarks[i];
    if (r->o->json) {
      jopen(r, NULL, '{');
      jint(r, "ts", b->ts);
      jstr(r, "name", b->name);
      jclose(r, '}');
      continue;
    }
    char at[32];
    etch__fmt_dur(at, sizeof at, etch__sat_sub(b->ts, r->start));
    etch__tt_cell(t, at);
    etch__tt_cell(t, or_dash(b->name));
  }
  list_end(r, t, "no bookmarks");
}

static void loss_section(report *r) {
  etch__tt *t = NULL;
  if (r->o->json) {
    jopen(r, "data_loss", '{');
    jopen(r, "stats", '{');
  } else {
    section(r, "data loss");
    t = etch__tt_new(3);
    etch__tt_header(t, 0, "stat", false);
    etch__tt_header(t, 1, "value", true);
    etch__tt_header(t, 2, "meaning", false);
  }
  for (size_t i = 0; i < r->d->nloss; i++) {
    const etch__stats_loss *l = &r->d->loss[i];
    if (r->o->json) {
      jint(r, l->name, l->value);
      continue;
    }
    etch__tt_cell(t, l->name);
    etch__tt_cellf(t, "%lld", (long long)l->value);
    etch__tt_cell(t, l->description);
  }
  size_t nstats = etch__tt_rows(t);
  if (r->o->json) jclose(r, '}');
  else if (nstats) etch__tt_print(t, r->out, "  ", true);
  etch__tt_free(t);

  if (r->o->json) {
    jopen(r, "dropped_events", '[');
  } else {
    t = etch__tt_new(4);
    const char *h[] = {"thread", "tid", "pid", "dropped events"};
    for (size_t i = 0; i < 4; i++) etch__tt_header(t, i, h[i], i > 0);
  }
  for (size_t i = 0; i < r->d->ndrop; i++) {
    const etch__stats_dropped *x = &r->d->drop[i];
    if (r->o->json) {
      jopen(r, NULL, '{');
      jstr(r, "thread", x->thread);
      jint(r, "tid", x->has_tid ? x->tid : 0);
      jint(r, "pid", x->has_pid ? x->pid : 0);
      jint(r, "dropped", x->dropped);
      jclose(r, '}');
      continue;
    }
    etch__tt_cell(t, or_dash(x->thread));
    if (x->has_tid)
      etch__tt_cellf(t, "%lld", (long long)x->tid);
    else
      etch__tt_cell(t, "-");
    if (x->has_pid)
      etch__tt_cellf(t, "%lld", (long long)x->pid);
    else
      etch__tt_cell(t, "-");
    etch__tt_cellf(t, "%lld", (long long)x->dropped);
  }
  if (r->o->json) {
    jclose(r, ']');
    jclose(r, '}');
    return;
  }
  if (etch__tt_rows(t)) {
    if (nstats) fputc('\n', r->out);
    etch__tt_print(t, r->out, "  ", true);
  } else if (!nstats) {
    fprintf(r->out, "  none\n");
  }
  etch__tt_free(t);
}

void etch__stats_print(const etch__stats_data *d, FILE *out,
                       const etch__stats_opts *opts) {
  etch__stats_opts dflt = {.top = 10};
  report r = {.out = out, .o = opts ? opts : &dflt, .d = d};
  r.first_section = true;
  r.start = d->start;
  r.end = d->end;
  if (r.o->json) {
    r.json_first = true;
    fputc('{', out);
  }
  trace_section(&r);
  top_section(&r, false);
  if (!r.o->compact) {
    top_section(&r, true);
    machines_section(&r);
    threads_section(&r);
    counters_section(&r);
    frames_section(&r);
    bookmarks_section(&r);
  }
  etch__stats_samples_section(&r);
  loss_section(&r);
  if (r.o->json) fputs("}\n", out);
}

int etch__query_stats(etch__db *db, FILE *out, const etch__stats_opts *opts) {
  etch__stats_opts dflt = {.top = 10};
  if (!opts) opts = &dflt;
  etch__stats_data d;
  int rc = etch__stats_data_from_db(db, opts->top > 0 ? opts->top : 10, &d);
  if (rc) return rc;
  etch__stats_print(&d, out, opts);
  etch__stats_data_free(&d);
  return ETCH_OK;
}

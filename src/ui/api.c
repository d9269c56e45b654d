/*
 * api.c - the JSON API the page calls. Every argument is text from the
 * network: numbers are parsed whole and bounded, strings only ever bound to
 * a query's parameters (the SQL box's text excepted, which runs checked on
 * the locked-down connection), a trace only found by the id the app gave.
 *
 *   /api/traces                          the list (the store's traces
 *                                        and those named), as etch ls
 *   /api/trace?id=                       opens it: bounds, rows, data loss
 *   /api/tile?id=&start=&end=&px=&tracks=&counters=
 *                                        the window at px pixels across
 *   /api/slice?id=&slice=                a slice's details
 *   /api/search?id=&q=                   slices whose name contains q
 *   /api/range?id=&start=&end=           slices in the range, by name
 *   /api/flame?id=[&start=&end=][&utid=] the flame graph
 *   /api/flows?id=&start=&end=           flows with an end in the window
 *   /api/stats?id=                       etch stats' tables
 *   /api/sql?id=&q=                      one SELECT/WITH/EXPLAIN statement
 *   /api/diff?a=&b=                      etch diff of two traces
 *   /api/zone?id=[&name=[&lo=&hi=]]      one name's durations (api_zone.c)
 *   /api/live?id=                        a trace being recorded, kept up
 *                                        with its file (live.c)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"
#include "base/map.h"
#include "ui/api_int.h"

enum { MAX_TRACKS = 65536, MAX_MATCHES = 1000 };
/* How long a request for the whole flame graph waits for the one being
 * computed ahead before computing it itself. 60 ms was tried: asked for
 * right after the first tile it came in 223 - 277 ms, against 173 - 234
 * ms without waiting (10 M events, load average 2.0 - 2.3). */
enum { kAheadWaitMs = 0 };

typedef etch__ui_req req;

int etch__ui_req_vfail(req *r, int status, const char *fmt, va_list ap) {
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  fputs("{\"error\":", r->out);
  etch__json_string(r->out, msg, strlen(msg));
  fputc('}', r->out);
  return status;
}

__attribute__((format(printf, 3, 4))) static int fail(req *r, int status,
                                                      const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int st = etch__ui_req_vfail(r, status, fmt, ap);
  va_end(ap);
  return st;
}

static void jstr(FILE *out, const char *s) {
  if (!s)
    fputs("null", out);
  else
    etch__json_string(out, s, strlen(s));
}

/* A text column of the row as JSON, without a copy: its string, or for
 * NULL "" (`empty`) or null. */
static void jcol(FILE *o, const etch__res *q, idx_t c, bool empty) {
  size_t n = 0;
  const char *s = etch__res_str(q, c, &n);
  if (s)
    etch__json_string(o, s, n);
  else
    fputs(empty ? "\"\"" : "null", o);
}

/* An integer argument: true with *v set, or false when it is missing
 * (*v = dflt) ; *bad when it is there but no integer. */
static bool arg_i64(req *r, const char *key, int64_t dflt, int64_t *v,
                    bool *bad) {
  *v = dflt;
  const char *s = r->get(r->ctx, key);
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || *end || end == s) {
    *bad = true;
    return false;
  }
  *v = x;
  return true;
}

/* A comma-separated list of integers (at most MAX_TRACKS). */
static bool arg_list(req *r, const char *key, int64_t *v, size_t *n) {
  *n = 0;
  const char *s = r->get(r->ctx, key);
  if (!s || !*s) return true;
  while (*s) {
    if (*n == MAX_TRACKS) return false;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s) return false;
    v[(*n)++] = x;
    if (*end == ',') end++;
    else if (*end) return false;
    s = end;
  }
  return true;
}

/* The trace the request names (by `id`), opened; NULL after writing the
 * error (status in *st). */
etch__ui_trace *etch__ui_req_trace(req *r, int *st) {
  etch__ui_trace *t = etch__ui_find(r->ui, r->get(r->ctx, "id"));
  if (!t) {
    *st = fail(r, 404, "no such trace (the id is not one this etch ui gave)");
    return NULL;
  }
  int rc = etch__ui_open(r->ui, t);
  if (rc == ETCH_ENOTFOUND) {
    *st = fail(r, 410, "%s", etch_last_error());
    return NULL;
  }
  if (rc) {
    *st = fail(r, 422, "%s: cannot be read: %s", t->path, etch_last_error());
    return NULL;
  }
  return t;
}

static etch__ui_trace *trace_of(req *r, int *st) {
  return etch__ui_req_trace(r, st);
}

static int db_fail(req *r) {
  return fail(r, 500, "%s", etch_last_error());
}

/* ---- the list and a trace's rows ------------------------------------------------ */

/* A row of the list: a trace and what the list shows of it. */
typedef struct list_row {
  etch__ui_trace *t;
  const etch__store_entry *e;
} list_row;

static int cmp_trace_name(const void *x, const void *y) {
  return strcmp((*(etch__ui_trace *const *)x)->name,
                (*(etch__ui_trace *const *)y)->name);
}

/*
 * The list: the traces named on the command line (in their order), then
 * the store's (listed again now, from their cached metadata; newest first,
 * as etch ls lists them), each with what etch ls shows of it (the same
 * members as `etch ls --json`, the same values), its id, whether it is in
 * the store and open; the store's directory, and why it could not be
 * listed (the other traces are listed all the same).
 */
static int api_traces(req *r) {
  etch__ui *ui = r->ui;
  etch__store_list l;
  char store_err[1024] = "";
  int rc = etch__ui_store_sync(ui, &l);
  if (rc == ETCH_ENOMEM) return fail(r, 500, "out of memory");
  if (rc) snprintf(store_err, sizeof store_err, "%s", etch_last_error());
  size_t cap = ui->n + 1;
  list_row *rows = etch__calloc(cap, sizeof *rows);
  etch__ui_trace **byname = etch__calloc(cap, sizeof *byname);
  size_t n = 0, nstore = 0;
  int st = rows && byname ? 200 : fail(r, 500, "out of memory");
  for (size_t i = 0; st == 200 && i < ui->n; i++) {
    etch__ui_trace *t = &ui->t[i];
    if (t->in_store) {
      byname[nstore++] = t;
    } else if (etch__ui_trace_meta(ui, t) != ETCH_OK) {
      st = fail(r, 500, "%s", etch_last_error());
    } else {
      rows[n++] = (list_row){t, &t->meta};
    }
  }
  if (st == 200 && nstore > 1)
    qsort(byname, nstore, sizeof *byname, cmp_trace_name);
  for (size_t k = 0; st == 200 && k < l.n; k++) {
    etch__ui_trace key = {.name = l.e[k].name}, *kp = &key;
    etch__ui_trace **t =
        nstore ? bsearch(&kp, byname, nstore, sizeof *byname, cmp_trace_name)
               : NULL;
    if (t && n < cap) rows[n++] = (list_row){*t, &l.e[k]};
  }
  if (st == 200) {
    FILE *o = r->out;
    fputs("{\"store\":", o);
    jstr(o, ui->store_dir);
    fputs(",\"store_error\":", o);
    jstr(o, store_err[0] ? store_err : ui->store_error);
    fputs(",\"traces\":[", o);
    for (size_t i = 0; i < n; i++) {
      const etch__ui_trace *t = rows[i].t;
      fprintf(o, "%s\n{\"id\":\"%s\",\"name\":", i ? "," : "", t->id);
      jstr(o, t->name);
      fputs(",\"path\":", o);
      jstr(o, t->path);
      fprintf(o, ",\"in_store\":%s,\"open\":%s",
              t->in_store ? "true" : "false", t->db ? "true" : "false");
      etch__store_write_json_fields(rows[i].e, o);
      fputc('}', o);
    }
    fputs("]}", o);
  }
  free(rows);
  free(byname);
  etch__store_list_free(&l);
  return st;
}

/* Rows: every track with slices or counter values, by machine (a trace of
 * several: the host first), then by process (pid), then the process's own
 * tracks, then its threads (tid) each followed by its other tracks. */
static const char kRowsSql[] =
    "WITH s AS (SELECT track_id, max(depth) AS maxd, count(*) AS n"
    "  FROM slice_data GROUP BY track_id),"
    " c AS (SELECT track_id, min(value) AS lo, max(value) AS hi,"
    "  count(*) AS n FROM counter GROUP BY track_id)"
    " SELECT t.id, coalesce(t.name, ''), t.type, coalesce(t.utid, -1),"
    "  coalesce(coalesce(t.upid, th.upid), -1), coalesce(th.tid, -1),"
    "  coalesce(p.pid, -1), coalesce(p.name, ''), coalesce(th.name, ''),"
    "  coalesce(s.maxd, -1), coalesce(s.n, 0) + coalesce(c.n, 0),"
    "  coalesce(c.lo, 0), coalesce(c.hi, 0), coalesce(t.unit, ''),"
    "  coalesce(p.machine_id, th.machine_id, 0),"
    "  coalesce(m.name, CASE WHEN coalesce(p.machine_id, th.machine_id, 0) = 0"
    "   THEN 'host' ELSE 'machine ' || coalesce(p.machine_id, th.machine_id)"
    "   END) || coalesce(' (' || m.arch || ')', '')"
    " FROM track t LEFT JOIN thread th ON t.utid = th.utid"
    " LEFT JOIN process p ON p.upid = coalesce(t.upid, th.upid)"
    " LEFT JOIN machine m ON m.id = coalesce(p.machine_id, th.machine_id, 0)"
    " LEFT JOIN s ON s.track_id = t.id LEFT JOIN c ON c.track_id = t.id"
    " WHERE s.n > 0 OR c.n > 0"
    " ORDER BY coalesce(p.machine_id, th.machine_id, 0), p.pid NULLS LAST,"
    "  coalesce(t.upid, th.upid), th.tid NULLS FIRST,"
    "  t.type != 'thread', t.type = 'counter', t.id";

static int api_trace(req *r) {
  int st;
  etch__ui_trace *t = trace_of(r, &st);
  if (!t) return st;
  etch__res q;
  int64_t start = 0, end = 0, slices = 0, machines = 1;
  if (etch__query_run(t->db,
                     "SELECT CAST(coalesce(min(start_ts), 0) AS BIGINT),"
                     " CAST(coalesce(max(end_ts), 0) AS BIGINT),"
                     " (SELECT count(*) FROM slice_data),"
                     " (SELECT count(*) FROM machine) FROM trace_bounds",
                     NULL, 0, &q))
    return db_fail(r);
  if (etch__res_next(&q)) {
    start = etch__res_i64(&q, 0);
    end = etch__res_i64(&q, 1);
    slices = etch__res_i64(&q, 2);
    machines = etch__res_i64(&q, 3);
  }
  if (etch__res_close(&q)) return db_fail(r);
  etch__ui_membuf mb;
  FILE *o = etch__ui_membuf_open(&mb);
  if (!o) return fail(r, 500, "out of memory");
  fprintf(o, "{\"id\":\"%s\",\"name\":", t->id);
  jstr(o, t->name);
  fputs(",\"path\":", o);
  jstr(o, t->path);
  fprintf(o,
          ",\"start\":%lld,\"end\":%lld,\"slices\":%lld,\"flows\":%lld,"
          "\"machines\":%lld,\"imported\":%s,\"recording\":%s,"
          "\"generation\":%llu,\"rows\":[",
          (long long)start, (long long)end, (long long)slices,
          (long long)t->flows, (long long)machines,
          t->imported ? "true" : "false", t->recording ? "true" : "false",
          (unsigned long long)t->generation);
  int rc = etch__query_run(t->db, kRowsSql, NULL, 0, &q);
  for (size_t i = 0; !rc && etch__res_next(&q); i++) {
    fprintf(o, "%s{\"track\":%lld,\"name\":", i ? "," : "",
            (long long)etch__res_i64(&q, 0));
    jcol(o, &q, 1, true);
    fputs(",\"type\":", o);
    jcol(o, &q, 2, true);
    fprintf(o, ",\"utid\":%lld,\"upid\":%lld,\"tid\":%lld,\"pid\":%lld,",
            (long long)etch__res_i64(&q, 3), (long long)etch__res_i64(&q, 4),
            (long long)etch__res_i64(&q, 5), (long long)etch__res_i64(&q, 6));
    fputs("\"process\":", o);
    jcol(o, &q, 7, true);
    fputs(",\"thread\":", o);
    jcol(o, &q, 8, true);
    fprintf(o, ",\"maxdepth\":%lld,\"count\":%lld,\"lo\":%.17g,\"hi\":%.17g,",
            (long long)etch__res_i64(&q, 9), (long long)etch__res_i64(&q, 10),
            etch__res_f64(&q, 11), etch__res_f64(&q, 12));
    fputs("\"unit\":", o);
    jcol(o, &q, 13, true);
    fprintf(o, ",\"machine\":%lld,\"machine_label\":",
            (long long)etch__res_i64(&q, 14));
    jcol(o, &q, 15, true);
    fputc('}', o);
  }
  if (!rc) rc = etch__res_close(&q);
  /* Data loss where it happened: the SDK's etch.dropped_events marks. */
  fputs("],\"loss\":[", o);
  if (!rc)
    rc = etch__query_run(
        t->db,
        "SELECT s.ts, s.track_id, CAST(coalesce(max(a.int_value), 0) AS BIGINT)"
        " FROM slice s LEFT JOIN args a ON a.arg_set_id = s.arg_set_id"
        " AND a.key = 'debug.count' WHERE s.name = 'etch.dropped_events'"
        " GROUP BY s.id, s.ts, s.track_id ORDER BY s.ts LIMIT 10000",
        NULL, 0, &q);
  for (size_t i = 0; !rc && etch__res_next(&q); i++)
    fprintf(o, "%s[%lld,%lld,%lld]", i ? "," : "",
            (long long)etch__res_i64(&q, 0), (long long)etch__res_i64(&q, 1),
            (long long)etch__res_i64(&q, 2));
  if (!rc) rc = etch__res_close(&q);
  /* And the trace's own data-loss counts (not placed in time). */
  fputs("],\"loss_stats\":[", o);
  if (!rc)
    rc = etch__query_run(t->db,
                        "SELECT name, value, coalesce(description, '') FROM stats"
                        " WHERE severity = 'data_loss' AND value != 0"
                        " ORDER BY name",
                        NULL, 0, &q);
  for (size_t i = 0; !rc && etch__res_next(&q); i++) {
    fprintf(o, "%s[", i ? "," : "");
    jcol(o, &q, 0, true);
    fprintf(o, ",%lld,", (long long)etch__res_i64(&q, 1));
    jcol(o, &q, 2, true);
    fputc(']', o);
  }
  if (!rc) rc = etch__res_close(&q);
  fputs("]}", o);
  int crc = etch__ui_membuf_close(&mb);
  if (rc || crc) {
    etch__ui_membuf_free(&mb);
    return db_fail(r);
  }
  fwrite(mb.v.data, 1, mb.v.len, r->out);
  etch__ui_membuf_free(&mb);
  /* A big trace's flame graph starts now, behind the page's requests (at
   * the lowest priority), so that it is there by the time it is asked for. */
  if (t->slices >= r->ui->lod_min) etch__ui_flame_ahead(r->ui, t);
  return 200;
}

/* ---- tiles ---------------------------------------------------------------------- */

/* Writes `v` in decimal at `p`; the end. */
static char *put_i64(char *p, int64_t v) {
  char tmp[20];
  int n = 0;
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[n++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0) *p++ = '-';
  while (n) *p++ = tmp[--n];
  return p;
}

/* The window's arguments: start < end, 1..100000 pixels across. */
static int window_of(req *r, int64_t *start, int64_t *end, int64_t *px) {
  bool bad = false;
  bool have_start = arg_i64(r, "start", 0, start, &bad);
  bool have = arg_i64(r, "end", 0, end, &bad) && have_start;
  arg_i64(r, "px", 1000, px, &bad);
  if (bad || !have || *end <= *start || *px < 1 || *px > 100000)
    return fail(r, 400, "start, end (start < end) and px (1..100000) are "
                        "integers");
  return 0;
}

/* Each rectangle's name as an index into the tile's distinct names, in
 * the order first met (*idx, the caller's to free). */
static int tile_names(const etch__ui_tile *tile, int64_t **idx_out) {
  *idx_out = NULL;
  if (!tile->n) return ETCH_OK;
  int64_t *idx = etch__malloc(tile->n * sizeof *idx);
  if (!idx) return ETCH_ENOMEM;
  etch_u64map seen = {0};
  int64_t nnames = 0;
  int rc = ETCH_OK;
  for (size_t i = 0; i < tile->n && !rc; i++) {
    const char *nm = tile->rects[i].name ? tile->rects[i].name : "";
    uint64_t h = etch__hash_bytes(nm, strlen(nm), 0);
    int64_t k;
    /* A clash of hashes takes the next key. */
    while (etch__u64map_get(&seen, h, &k)) {
      const char *other = tile->rects[k].name ? tile->rects[k].name : "";
      if (!strcmp(other, nm)) break;
      h++;
    }
    if (etch__u64map_get(&seen, h, &k)) {
      idx[i] = idx[k];
      continue;
    }
    if (!etch__u64map_put(&seen, h, (int64_t)i))
      rc = etch__error(ETCH_ENOMEM, "out of memory");
    idx[i] = nnames++;
  }
  etch__u64map_free(&seen);
  if (rc) {
    free(idx);
    return rc;
  }
  *idx_out = idx;
  return ETCH_OK;
}

static int tile_with(req *r, int64_t *tracks, int64_t *counters) {
  int st;
  etch__ui_trace *t = trace_of(r, &st);
  if (!t) return st;
  int64_t start, end, px;
  if ((st = window_of(r, &start, &end, &px))) return st;
  size_t nt, nc;
  if (!arg_list(r, "tracks", tracks, &nt) ||
      !arg_list(r, "counters", counters, &nc))
    return fail(r, 400, "tracks and counters are lists of track ids");
  /* end - start overflows for a window across most of int64. */
  int64_t span;
  double ns_per_px = __builtin_sub_overflow(end, start, &span)
                         ? ((double)end - (double)start) / (double)px
                         : (double)span / (double)px;
  etch__ui_tile tile;
  if (etch__ui_trace_tile(r->ui, t, tracks, nt, start, end, ns_per_px, &tile))
    return db_fail(r);
  etch__ui_counter_row *cr = NULL;
  size_t ncr = 0;
  if (nc && etch__ui_trace_counters(t, counters, nc, start, end, ns_per_px,
                                    &cr, &ncr)) {
    etch__ui_tile_free(&tile);
    return db_fail(r);
  }
  /* Names once each ("names"), the rectangles naming them by index: a
   * tile of a few thousand rectangles has a few dozen names. */
  FILE *o = r->out;
  int64_t *idx = NULL;
  if (tile_names(&tile, &idx)) {
    etch__ui_tile_free(&tile);
    free(cr);
    return db_fail(r);
  }
  fprintf(o, "{\"ns_per_px\":%.17g,\"names\":[", ns_per_px);
  for (size_t i = 0, next = 0; i < tile.n; i++) {
    if (idx[i] != (int64_t)next) continue; /* named before */
    const char *nm = tile.rects[i].name ? tile.rects[i].name : "";
    if (next++) fputc(',', o);
    jstr(o, nm);
  }
  fputs("],\"slices\":[", o);
  /* A row at a time into a buffer, numbers by hand: fprintf's seven
   * conversions a rectangle cost more than the tile itself. */
  for (size_t i = 0; i < tile.n; i++) {
    const etch__ui_rect *x = &tile.rects[i];
    const int64_t v[7] = {x->track_id, x->depth, x->ts, x->end,
                          x->count,    x->id,    idx[i]};
    char line[7 * 21 + 4], *p = line;
    if (i) *p++ = ',';
    *p++ = '[';
    for (int k = 0; k < 7; k++) {
      if (k) *p++ = ',';
      p = put_i64(p, v[k]);
    }
    *p++ = ']';
    fwrite(line, 1, (size_t)(p - line), o);
  }
  free(idx);
  etch__ui_tile_free(&tile);
  fputs("],\"counters\":[", o);
  for (size_t i = 0; i < ncr; i++)
    fprintf(o, "%s[%lld,%lld,%.17g,%.17g,%.17g]", i ? "," : "",
            (long long)cr[i].track, (long long)cr[i].ts, cr[i].lo, cr[i].hi,
            cr[i].last);
  free(cr);
  fputs("]}", o);
  return 200;
}

/* The track lists' room (MAX_TRACKS each: a report asks for every track
 * of a trace at once). */
static int api_tile(req *r) {
  int64_t *room = etch__malloc(2 * (size_t)MAX_TRACKS * sizeof *room);
  if (!room) return fail(r, 500, "out of memory");
  int st = tile_with(r, room, room + MAX_TRACKS);
  free(room);
  return st;
}

static int api_flows(req *r) {
  int st;
  etch__ui_trace *t = trace_of(r, &st);
  if (!t) return st;
  int64_t start, end, px;
  if ((st = window_of(r, &start, &end, &px))) return st;
  if (!t->flows) { /* most traces: no query for nothing */
    fputs("{\"flows\":[]}", r->out);
    return 200;
  }
  etch__sql_arg b[] = {{.i = start}, {.i = end}};
  etch__res q;
  if (etch__query_run(
          t->db,
          "SELECT a.track_id, a.depth, a.ts + greatest(a.dur, 0), a.id,"
          " b.track_id, b.depth, b.ts, b.id"
          " FROM flow f JOIN slice a ON a.id = f.slice_out"
          " JOIN slice b ON b.id = f.slice_in"
          " WHERE (a.ts + greatest(a.dur, 0) BETWEEN $1 AND $2)"
          " OR (b.ts BETWEEN $1 AND $2) ORDER BY b.ts LIMIT 2000",
          b, 2, &q))
    return db_fail(r);
  fputs("{\"flows\":[", r->out);
  for (size_t i = 0; etch__res_next(&q); i++)
    fprintf(r->out, "%s[%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld]",
            i ? "," : "", (long long)etch__res_i64(&q, 0),
            (long long)etch__res_i64(&q, 1), (long long)etch__res_i64(&q, 2),
            (long long)etch__res_i64(&q, 3), (long long)etch__res_i64(&q, 4),
            (long long)etch__res_i64(&q, 5), (long long)etch__res_i64(&q, 6),
            (long long)etch__res_i64(&q, 7));
  fputs("]}", r->out);
  return etch__res_close(&q) ? 500 : 200;
}

/* ---- a slice -------------------------------------------------------------------- */

static void slice_link(FILE *o, etch__res *q) {
  fprintf(o, "{\"id\":%lld,\"ts\":%lld,\"track\":%lld,\"depth\":%lld,\"name\":",
          (long long)etch__res_i64(q, 0), (long long)etch__res_i64(q, 1),
          (long long)etch__res_i64(q, 2), (long long)etch__res_i64(q, 3));
  jcol(o, q, 4, true);
  fputc('}', o);
}

static int api_slice(req *r) {
  int st;
  etch__ui_trace *t = trace_of(r, &st);
  if (!t) return st;
  int64_t id;
  bool bad = false;
  if (!arg_i64(r, "slice", 0, &id, &bad) || bad)
    return fail(r, 400, "slice is a slice id");
  etch__sql_arg b[] = {{.i = id}};
  etch__res q;
  if (etch__query_run(
          t->db,
          "SELECT s.id, s.ts, s.dur, coalesce(s.self_dur, 0), s.depth,"
          " s.track_id, s.category, s.name, coalesce(s.arg_set_id, -1),"
          " tr.name, th.name, coalesce(th.tid, -1), p.name,"
          " coalesce(p.pid, -1), coalesce(s.parent_id, -1)"
          " FROM slice s JOIN track tr ON tr.id = s.track_id"
          " LEFT JOIN thread th ON th.utid = tr.utid"
          " LEFT JOIN process p ON p.upid = coalesce(tr.upid, th.upid)"
          " WHERE s.id = $1",
          b, 1, &q))
    return db_fail(r);
  if (!etch__res_next(&q)) {
    int rc = etch__res_close(&q);
    return rc ? db_fail(r) : fail(r, 404, "no slice %lld", (long long)id);
  }
  etch__ui_membuf mb;
  FILE *o = etch__ui_membuf_open(&mb);
  if (!o) {
    etch__res_close(&q);
    return fail(r, 500, "out of memory");
  }
  int64_t arg_set = etch__res_i64(&q, 8);
  fprintf(o,
          "{\"id\":%lld,\"ts\":%lld,\"dur\":%lld,\"self\":%lld,\"depth\":%lld,"
          "\"track\":%lld",
          (long long)etch__res_i64(&q, 0), (long long)etch__res_i64(&q, 1),
          (long long)etch__res_i64(&q, 2), (long long)etch__res_i64(&q, 3),
          (long long)etch__res_i64(&q, 4), (long long)etch__res_i64(&q, 5));
  static const char *const kText[] = {"category", "name", NULL, "track_name",
                                      "thread"};
  for (idx_t c = 6; c <= 10; c++) {
    if (!kText[c - 6]) continue;
    fprintf(o, ",\"%s\":", kText[c - 6]);
    jcol(o, &q, c, false);
  }
  fprintf(o, ",\"tid\":%lld,\"process\":", (long long)etch__res_i64(&q, 11));
  jcol(o, &q, 12, false);
  fprintf(o, ",\"pid\":%lld,\"parent\":%lld", (long long)etch__res_i64(&q, 13),
          (long long)etch__res_i64(&q, 14));
  int rc = etch__res_close(&q);
  fputs(",\"args\":[", o);
  etch__sql_arg ab[] = {{.i = arg_set}};
  if (!rc && arg_set >= 0)
    rc = etch__query_run(t->db,
                        "SELECT key, display_value FROM args"
                        " WHERE arg_set_id = $1 ORDER BY id",
                        ab, 1, &q);
  for (size_t i = 0; !rc && arg_set >= 0 && etch__res_next(&q); i++) {
    fprintf(o, "%s[", i ? "," : "");
    jcol(o, &q, 0, false);
    fputc(',', o);
    jcol(o, &q, 1, false);
    fputc(']', o);
  }
  if (!rc && arg_set >= 0) rc = etch__res_close(&q);
  /* Flow neighbours: the slices a flow leads to and comes from. */
  static const char *const kFlow[] = {
      "SELECT s.id, s.ts, s.track_id, s.depth, s.name FROM flow f"
      " JOIN slice s ON s.id = f.slice_out WHERE f.slice_in = $1 ORDER BY s.ts",
      "SELECT s.id, s.ts, s.track_id, s.depth, s.name FROM flow f"
      " JOIN slice s ON s.id = f.slice_in WHERE f.slice_out = $1 ORDER BY s.ts"};
  static const char *const kKey[] = {"flows_in", "flows_out"};
  for (int k = 0; k < 2 && !rc; k++) {
    fprintf(o, "],\"%s\":[", kKey[k]);
    rc = etch__query_run(t->db, kFlow[k], b, 1, &q);
    for (size_t i = 0; !rc && etch__res_next(&q); i++) {
      if (i) fputc(',', o);
      slice_link(o, &q);
    }
    if (!rc) rc = etch__res_close(&q);
  }
  fputs("]}", o);
  int crc = etch__ui_membuf_close(&mb);
  if (rc || crc) {
    etch__ui_membuf_free(&mb);
    return db_fail(r);
  }
  fwrite(mb.v.data, 1, mb.v.len, r->out);
  etch__ui_membuf_free(&mb);
  return 200;
}

/* ---- search, range, flame, stats ------------------------------------------------ */

static int api_search(req *r) {
  int st;
  etch__ui_trace *t = trace_of(r, &st);
  if (!t) return st;
  const char *q0 = r->get(r->ctx, "q");
  if (!q0 || !*q0) return fail(r, 400, "q is the text to find");
  if (strlen(q0) > 1000) return fail(r, 400, "q is too long");
  etch__sql_arg b[] = {{.s = q0}, {.i = MAX_MATCHES}};
  etch__res q;
  if (etch__query_run(t->db,
                     "SELECT id, ts, track_id, depth, name,"
                     " count(*) OVER () FROM slice"
                     " WHERE contains(lower(name), lower($1))"
                     " ORDER BY ts, id LIMIT $2",
                     b, 2, &q))
    return db_fail(r);
  fputs("{\"matches\":[", r->out);
  int64_t total = 0;
  for (size_t i = 0; etch__res_next(&q); i++) {
    if (i) fputc(',', r->out);
    slice_link(r->out, &q);
    total = etch__res_i64(&q, 5);
  }
  fprintf(r->out, "],\"total\":%lld}", (long long)total);
  return etch__res_close(&q) ? 500 : 200;
}

static int api_range(req *r) {
  int st;
  etch__ui_trace *t = trace_of(r, &st);
  if (!t) return st;
  int64_t start, end;
  bool bad = false;
  bool have_start = arg_i64(r, "start", 0, &start, &bad);
  bool have_end = arg_i64(r, "end", 0, &end, &bad);
  if (!have_start || !have_end || bad || end <= start)
    return fail(r, 400, "start and end (start < end) are integers");
  etch__sql_arg b[] = {{.i = start}, {.i = end}};
  etch__res q;
  /* The slices that overlap the range (Perfetto's area selection: a
   * slice that holds the whole range is one of them), durations whole; an
   * instant counts where start <= ts < end. Slices that never ended are
   * left out. */
  if (etch__query_run(t->db,
                     "SELECT coalesce(name, ''), count(*), sum(dur),"
                     " sum(coalesce(self_dur, 0)), min(dur), avg(dur),"
                     " max(dur) FROM slice"
                     " WHERE dur >= 0 AND ts < $2"
                     " AND (ts + dur > $1 OR (dur = 0 AND ts >= $1))"
                     " GROUP BY 1 ORDER BY 3 DESC, 1 LIMIT 1000",
                     b, 2, &q))
    return db_fail(r);
  fputs("{\"rows\":[", r->out);
  for (size_t i = 0; etch__res_next(&q); i++) {
    fprintf(r->out, "%s[", i ? "," : "");
    jcol(r->out, &q, 0, true);
    fprintf(r->out, ",%lld,%lld,%lld,%lld,%.17g,%lld]",
            (long long)etch__res_i64(&q, 1), (long long)etch__res_i64(&q, 2),
            (long long)etch__res_i64(&q, 3), (long long)etch__res_i64(&q, 4),
            etch__res_f64(&q, 5), (long long)etch__res_i64(&q, 6));
  }
  fputs("]}", r->out);
  return etch__res_close(&q) ? 500 : 200;
}

static int api_flame(req *r) {
  int st;
  etch__ui_trace *t = trace_of(r, &st);
  if (!t) return st;
  int64_t start, end, utid;
  bool bad = false;
  bool have_start = arg_i64(r, "start", 0, &start, &bad);
  bool range = arg_i64(r, "end", -1, &end, &bad) && have_start;
  arg_i64(r, "utid", -1, &utid, &bad);
  if (bad || (range && end <= start))
    return fail(r, 400, "start, end (start < end) and utid are integers");
  if (!range) start = 0, end = -1;
  bool whole = !range && utid < 0;
  /* The graph computed ahead, if it is done; else it is computed here, at
   * the page's priority, from the blocks this connection has read already
   * (the thread ahead runs at the lowest priority, and other programs'
   * work can hold it back for long: once 0.7 s). */
  if (whole && !etch__ui_flame_join_within(t, kAheadWaitMs))
    etch__ui_flame_stop(t); /* not to share the cores with it */
  if (whole && t->flame) {
    fwrite(t->flame, 1, t->flame_len, r->out);
    return 200;
  }
  etch__ui_membuf mb;
  FILE *o = etch__ui_membuf_open(&mb);
  if (!o) return fail(r, 500, "out of memory");
  int rc = etch__ui_flame(t->db, start, end, utid < 0 ? -1 : utid, o);
  int crc = etch__ui_membuf_close(&mb);
  if (rc || crc) {
    etch__ui_membuf_free(&mb);
    return db_fail(r);
  }
  fwrite(mb.v.data, 1, mb.v.len, r->out);
  if (whole) t->flame = etch__ui_membuf_take(&mb, &t->flame_len);
  etch__ui_membuf_free(&mb);
  return 200;
}

static void jtop(FILE *o, const char *key, const etch__stats_top *v,
                 size_t n) {
  fprintf(o, ",\"%s\":[", key);
  for (size_t i = 0; i < n; i++) {
    fprintf(o, "%s[", i ? "," : "");
    jstr(o, v[i].name ? v[i].name : "");
    fprintf(o, ",%lld,%lld,%lld,%lld]", (long long)v[i].count,
            (long long)v[i].total, (long long)v[i].self, (long long)v[i].max);
  }
  fputc(']', o);
}

static int api_stats(req *r) {
  int st;
  etch__ui_trace *t = trace_of(r, &st);
  if (!t) return st;
  etch__stats_data d;
  if (etch__stats_data_from_db(t->db, 100, &d)) return db_fail(r);
  FILE *o = r->out;
  fprintf(o,
          "{\"start\":%lld,\"end\":%lld,\"events\":%lld,\"slices\":%lld,"
          "\"instants\":%lld,\"counter_values\":%lld,\"flows\":%lld,"
          "\"tracks\":%lld,\"processes\":%lld,\"threads\":%lld",
          (long long)d.start, (long long)d.end, (long long)d.events,
          (long long)d.slices, (long long)d.instants,
          (long long)d.counter_values, (long long)d.flows,
          (long long)d.tracks, (long long)d.processes, (long long)d.threads);
  jtop(o, "by_total", d.by_total, d.n_by_total);
  jtop(o, "by_self", d.by_self, d.n_by_self);
  fputs(",\"threads_busy\":[", o);
  for (size_t i = 0; i < d.nthr; i++) {
    fprintf(o, "%s[", i ? "," : "");
    jstr(o, d.thr[i].thread);
    fprintf(o, ",%lld,", (long long)d.thr[i].tid);
    jstr(o, d.thr[i].process);
    fprintf(o, ",%lld,%lld]", (long long)d.thr[i].pid,
            (long long)d.thr[i].busy);
  }
  fputs("],\"counters\":[", o);
  for (size_t i = 0; i < d.nctr; i++) {
    fprintf(o, "%s[", i ? "," : "");
    jstr(o, d.ctr[i].track);
    fputc(',', o);
    jstr(o, d.ctr[i].unit);
    fprintf(o, ",%lld,%.17g,%.17g,%.17g,%.17g]", (long long)d.ctr[i].count,
            d.ctr[i].min, d.ctr[i].max, d.ctr[i].mean, d.ctr[i].last);
  }
  fputs("],\"loss\":[", o);
  for (size_t i = 0; i < d.nloss; i++) {
    fprintf(o, "%s[", i ? "," : "");
    jstr(o, d.loss[i].name);
    fprintf(o, ",%lld,", (long long)d.loss[i].value);
    jstr(o, d.loss[i].description);
    fputc(']', o);
  }
  fputc(']', o);
  etch__ui_stats_samples(o, &d); /* api_samples.c */
  fputc('}', o);
  etch__stats_data_free(&d);
  return 200;
}

/* ---- comparing two traces ------------------------------------------------------ */

enum { MAX_DIFF_ROWS = 5000 };

/* etch diff A B --json (the first MAX_DIFF_ROWS rows, by the change of
 * the total), A and B named by their ids: through their caches. */
static int api_diff(req *r) {
  etch__ui_trace *t[2] = {etch__ui_find(r->ui, r->get(r->ctx, "a")),
                          etch__ui_find(r->ui, r->get(r->ctx, "b"))};
  if (!t[0] || !t[1])
    return fail(r, 404, "no such trace (the id is not one this etch ui gave)");
  for (int k = 0; k < 2; k++) {
    struct stat sb;
    if (stat(t[k]->path, &sb) != 0)
      return fail(r, 410,
                  "%s is no longer there (removed or moved since it was "
                  "listed): %s",
                  t[k]->path, strerror(errno));
  }
  etch__import_opts io = {.all_args = true, .allow_truncated = true,
                          .quiet = true};
  etch__diff d = {0};
  const char *failed = NULL;
  int rc = etch__diff_files(t[0]->path, t[1]->path, r->ui->cache_dir, false,
                            &io, ETCH__DIFF_BY_TOTAL, &d, &failed);
  if (rc == ETCH_ENOMEM) return fail(r, 500, "out of memory");
  if (rc) {
    int st = fail(r, 422, "%s: cannot be compared: %s",
                  failed ? failed : "the traces", etch_last_error());
    etch__diff_free(&d);
    return st;
  }
  etch__diff_print(&d, r->out, MAX_DIFF_ROWS, true, t[0]->name, t[1]->name,
                   ETCH__DIFF_BY_TOTAL);
  etch__diff_free(&d);
  return 200;
}

/* ---- dispatch ------------------------------------------------------------------- */

static const struct {
  const char *path;
  int (*fn)(req *r);
} kRoutes[] = {
    {"/api/traces", api_traces}, {"/api/trace", api_trace},
    {"/api/tile", api_tile},     {"/api/flows", api_flows},
    {"/api/slice", api_slice},   {"/api/search", api_search},
    {"/api/range", api_range},   {"/api/flame", api_flame},
    {"/api/stats", api_stats},   {"/api/sql", etch__ui_api_sql},
    {"/api/diff", api_diff},     {"/api/zone", etch__ui_api_zone},
    {"/api/leaks", etch__ui_api_leaks},
    {"/api/sample_flame", etch__ui_api_sample_flame},
    {"/api/samples", etch__ui_api_samples},
    {"/api/alloc_flame", etch__ui_api_alloc_flame},
    {"/api/live", etch__ui_api_live},
};

int etch__ui_api(etch__ui *ui, const char *path, etch__ui_getarg arg,
                 void *ctx, FILE *out) {
  req r = {.ui = ui, .get = arg, .ctx = ctx, .out = out};
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(kRoutes); i++)
    if (!strcmp(path, kRoutes[i].path)) return kRoutes[i].fn(&r);
  return fail(&r, 404, "no such page");
}

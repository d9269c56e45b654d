/*
 * import_reader.c - runs an etch_reader over a trace and feeds the importer.
 *
 * Progress: when asked, a line on stderr ("importing: 12.3M events") is
 * refreshed every half second once the import has taken a second, and
 * erased at the end.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "query/query.h"

typedef struct feed {
  etch__importer *imp;
  bool progress;
  bool shown;
  uint64_t events;
  double start, next_report;
} feed;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void report(feed *f, const etch_event *ev) {
  double t = now_s();
  if (t < f->next_report) return;
  f->next_report = t + 0.5;
  fprintf(stderr, "\rimporting: %.1fM events, offset %.1f MB ",
          (double)f->events / 1e6, (double)ev->packet_offset / 1e6);
  fflush(stderr);
  f->shown = true;
}

static void on_event(const etch_event *ev, void *user) {
  feed *f = user;
  etch__importer_event(f->imp, ev);
  if (ETCH_UNLIKELY((++f->events & 0xffff) == 0) && f->progress) report(f, ev);
}

static void on_track(const etch_track_info *t, void *user) {
  feed *f = user;
  etch__importer_track(f->imp, t);
}

static int run(sqlite3 *db, etch_reader *r, const etch__import_opts *opts,
               etch__import_counts *counts) {
  etch__import_opts o = {0};
  if (opts) o = *opts;
  int rc = etch__query_schema_create(db);
  if (rc) return rc;
  feed f = {0};
  f.progress = o.progress;
  f.start = now_s();
  f.next_report = f.start + 1.0;
  rc = etch__importer_new(&f.imp, db, &o);
  if (rc) return rc;
  rc = etch_reader_set_order(r, o.timestamp_order ? ETCH_ORDER_TIMESTAMP
                                                  : ETCH_ORDER_FILE);
  if (!rc) rc = etch_reader_on_track(r, on_track, &f);
  if (!rc) rc = etch_reader_on(r, NULL, NULL, on_event, &f);
  if (!rc) rc = etch_reader_run(r);
  if (f.shown) {
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
  }
  if (!rc) {
    etch_reader_stats st;
    int64_t first = 1, last = 0;
    etch_reader_get_stats(r, &st);
    if (etch_reader_time_bounds(r, &first, &last) != ETCH_OK) {
      first = 1;
      last = 0;
    }
    rc = etch__importer_finish(f.imp, &st, first, last);
  }
  if (counts) etch__importer_counts(f.imp, counts);
  etch__importer_free(f.imp);
  return rc;
}

int etch__query_import_file(sqlite3 *db, const char *path,
                            const etch__import_opts *opts,
                            etch__import_counts *counts) {
  etch_reader *r;
  int rc = etch_reader_open_file(&r, path);
  if (rc) return rc;
  rc = run(db, r, opts, counts);
  etch_reader_close(r);
  return rc;
}

int etch__query_import_memory(sqlite3 *db, const void *data, size_t len,
                              const char *name, const etch__import_opts *opts,
                              etch__import_counts *counts) {
  etch_reader *r;
  (void)name;
  int rc = etch_reader_open_memory(&r, data, len);
  if (rc) return rc;
  rc = run(db, r, opts, counts);
  etch_reader_close(r);
  return rc;
}

/*
 * query.h - the query part: a trace imported into DuckDB tables shaped like
 * trace_processor's, and what the etch command builds on them (SQL results
 * as aligned tables or CSV, the `etch stats` report, Chrome JSON export).
 *
 * Import has two layers:
 *  - the importer (import.c) turns resolved reader events into rows: it nests
 *    slices per track with a stack, links flows, flattens args, and at the
 *    end writes tracks, processes, threads, stats and trace bounds. It knows
 *    nothing about files, so tests can feed it events directly;
 *  - etch__query_import_* (import_reader.c) runs an etch_reader over a file
 *    or a memory buffer and feeds the importer.
 *
 * Schema (schema.c, documented in docs/analysis.md): process, thread, track
 * (+ thread_track, process_track, counter_track views), slice, counter,
 * args, flow, stats, trace_bounds.
 *
 * Every function returns ETCH_OK or a negative etch status and leaves a
 * message in etch_last_error().
 */
#ifndef ETCH_QUERY_H
#define ETCH_QUERY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "query/duckdb_api.h"

#include "etch/reader.h"

/* ---- database ------------------------------------------------------------ */

/*
 * A DuckDB database and the one connection etch uses on it (db.c). Tables
 * live in its default catalog, or, when several traces are read at once,
 * in a catalog per trace (ATTACHed) under views that add a `trace` column.
 */
typedef struct etch__db etch__db;

/*
 * Opens a database for an import: in memory when `path` is NULL, else the
 * file `path` (an existing file is replaced).
 */
int etch__db_open(etch__db **out, const char *path);
/* Opens an existing database file (written by --db or the cache);
 * `read_only` for a cache that another etch may read at the same time. */
int etch__db_open_existing(etch__db **out, const char *path, bool read_only);
/* Closes the database (a file is complete on disk after this); the first
 * error of the close, if any. NULL is a no-op. */
int etch__db_close(etch__db *db);
duckdb_connection etch__db_con(const etch__db *db);
/* `fd` (a lock's) closed when the database is, after it (cache.c: the
 * cache of a trace being recorded, held while it is open). */
void etch__db_hold_fd(etch__db *db, int fd);
/* Whether the database is a file (not in memory). */
bool etch__db_is_file(const etch__db *db);
/* A second connection to the database (duckdb_disconnect when done). */
int etch__db_connect(etch__db *db, duckdb_connection *out);
/* Runs `sql` (one or more statements; result rows ignored); on failure
 * the message is DuckDB's. */
int etch__db_exec(etch__db *db, const char *sql);
/* True if the file starts with a DuckDB database header. */
bool etch__query_is_db_file(const char *path);

/*
 * A cursor over the rows of one internal query, fetched a chunk at a time
 * (the result is not held whole). The query's columns must be BIGINT,
 * INTEGER, HUGEINT (read as int64), DOUBLE, BOOLEAN or VARCHAR: cast in the
 * SQL otherwise.
 */
typedef struct etch__res {
  duckdb_result r;
  duckdb_data_chunk chunk;
  idx_t row, nrows, ncols;
  int err;
  bool open;
} etch__res;
/* Runs `sql`; on error the message names `what` and DuckDB's complaint. */
int etch__res_query(etch__db *db, const char *sql, const char *what,
                    etch__res *res);
/* The next row; false at the end or on an error (res->err). */
bool etch__res_next(etch__res *res);
bool etch__res_null(const etch__res *res, idx_t col);
int64_t etch__res_i64(const etch__res *res, idx_t col); /* NULL: 0 */
double etch__res_f64(const etch__res *res, idx_t col);  /* NULL: NaN */
/* The text of a VARCHAR column (not NUL-terminated) or NULL. */
const char *etch__res_str(const etch__res *res, idx_t col, size_t *len);
/* A malloc'd copy of the text, NULL for NULL (or out of memory). */
char *etch__res_strdup(const etch__res *res, idx_t col);
/* Ends the cursor; returns res->err. */
int etch__res_close(etch__res *res);

/* Creates the tables and views in an empty database (`catalog` NULL: the
 * default one; another catalog gets the tables only). */
int etch__query_schema_create(etch__db *db, const char *catalog);
/* The i-th table's name as queries see it (`len` bytes at the result),
 * NULL past the last; its text up to ')' is its columns. "slice" is a view
 * over slice_data and slice_name, "args" over args_data and arg_key
 * (schema.c). */
const char *etch__query_table_name(size_t i, size_t *len);
/* The i-th table the database stores (slice_data and slice_name, not
 * slice), as etch__query_table_name. */
const char *etch__query_stored_table_name(size_t i, size_t *len);
/* The version of the tables' layout, part of a cache's key. */
#define ETCH__QUERY_SCHEMA_VERSION "11"
/* The CREATE VIEW statements of the views over track. */
const char *etch__query_views_sql(void);

/* ---- import -------------------------------------------------------------- */

typedef struct etch__import_opts {
  /* Store the args of every event. When false only the args of etch's own
   * events (category "etch") are kept: enough for `etch stats`. */
  bool all_args;
  /* Show progress on stderr after a second (the caller checks isatty). */
  bool progress;
  /* Deliver events in timestamp order (trace_processor's order) rather
   * than file order. */
  bool timestamp_order;
  /* A trace cut short: import what precedes the cut, warn on stderr and
   * count it (stat trace_truncated_bytes) instead of failing. */
  bool allow_truncated;
  /* A malformed packet fails the import with the reader's error instead of
   * being left out, counted (stat malformed_packets) and warned about
   * (etch_reader_set_strict). */
  bool strict;
  /* No warning on stderr for a trace cut short, nor for a cache that
   * cannot be written: for a caller that builds a trace's cache ahead and
   * opens it next (which warns). */
  bool quiet;
  /*
   * Importer only (set by etch__query_import_*): events arrive in the
   * reader's per-track order (etch__reader_set_track_order): each track's
   * slices and instants in timestamp order, tracks interleaved as the file
   * has them. Flows, which cross tracks, are linked in timestamp order at
   * the end.
   */
  bool file_order;
  /* The event's name and category pointers stay valid and keep their
   * content for the whole import (the reader pools them): interning can be
   * cached by pointer. */
  bool stable_strings;
  /* Slice ids (and the arg set ids of slices' args) from the reader's
   * etch_event.slice_index rather than in delivery order: the same ids
   * for the same bytes whatever the order tracks are delivered in, read
   * at once or read on (import_live.c). Set by etch__query_import_*. */
  bool reader_ids;
  /* Importer only: a live import (import_live.c, set by it). DuckDB's
   * settings are left as they are (kImportSettings, import.c): setting
   * `threads` between two steps, while the row writers' pipes are open,
   * waits for a worker thread that may be blocked in a pipe, forever. */
  bool live;
  /* etch__query_open_cached on a trace being recorded: its cache is read
   * on across processes (the tables and the live import's state kept in
   * a cache of the recording, under a lock held while the database is
   * open: cache.c) instead of the trace read into memory each time. */
  bool read_on;
} etch__import_opts;

/* Counts of what an import produced. */
typedef struct etch__import_counts {
  uint64_t events;       /* track events seen */
  uint64_t slices;       /* rows in slice, instants included */
  uint64_t instants;
  uint64_t open_slices;  /* still open at the end: dur -1 */
  uint64_t unmatched_ends;
  uint64_t counters;
  uint64_t flows;
  uint64_t flows_cut;    /* links not made across lost data */
  uint64_t args;
  uint64_t tracks;
} etch__import_counts;

typedef struct etch__importer etch__importer;

/*
 * Where rows go instead of a DuckDB table (etch__tw_open_sink): each full
 * chunk of `table`'s rows (`n` rows, the columns as the writer's kinds) is
 * handed to `chunk`, which returns ETCH_OK or an error (kept as the
 * writer's). `reset` drops every row handed so far (an import that starts
 * over: import_reader.c). The fleet part sends them to ClickHouse.
 */
typedef struct etch__row_sink {
  int (*chunk)(void *ctx, const char *table, duckdb_data_chunk chunk,
               idx_t n);
  int (*reset)(void *ctx);
  void *ctx;
} etch__row_sink;

/* An import whose rows go to `sink` rather than into a database. */
int etch__importer_new_sink(etch__importer **out, const etch__row_sink *sink,
                            const etch__import_opts *opts);

/* Starts an import into `db` (its catalog `catalog`, NULL: the default),
 * which must hold the schema and no rows. With `db` NULL no rows are
 * written: only the totals behind etch__importer_stats_data. */
int etch__importer_new(etch__importer **out, etch__db *db,
                       const char *catalog, const etch__import_opts *opts);
/* A track (may be called again for a known uuid: names are refreshed). */
void etch__importer_track(etch__importer *imp, const etch_track_info *t);
/* A track without events at the end of a read: the callback of
 * etch__reader_set_idle_tracks (user: the importer). Such a track takes its
 * id when the tables are written, after the tracks with events, so that
 * ids do not depend on where reads ended (import_live.c). */
void etch__importer_track_idle(const etch_track_info *t, void *user);
/* One event. Errors are kept and returned by etch__importer_finish. */
void etch__importer_event(etch__importer *imp, const etch_event *ev);
/*
 * Ends the import: closes the slices still open (dur -1), writes tracks,
 * processes, threads, the stats table (from `st`, may be NULL) and the trace
 * bounds (`first` > `last` = none).
 */
int etch__importer_finish(etch__importer *imp, const etch_reader_stats *st,
                          int64_t first, int64_t last);
/* The reader's machines (etch_reader_machine), for the machine table:
 * before etch__importer_finish. */
void etch__importer_machines(etch__importer *imp, const etch_reader *r);
/* The trace's call stacks as the stack_profile_* tables, before
 * etch__importer_finish (import_stacks.c). */
int etch__import_stacks(etch__importer *imp, etch_reader *r);
/* CPU samples (import_samples.c): the reader's sample callback (user: the
 * importer), and the perf_sample table, before etch__importer_finish. */
void etch__import_on_sample(const etch_sample *s, void *user);
int etch__import_samples(etch__importer *imp, etch_reader *r);
void etch__importer_counts(const etch__importer *imp,
                           etch__import_counts *out);
void etch__importer_free(etch__importer *imp);

/*
 * Imports a whole trace file (or `len` bytes at `data`) into `db`, which
 * must be empty: creates the schema, runs the reader, finishes. `name`
 * prefixes error messages. `counts` may be NULL.
 */
int etch__query_import_file(etch__db *db, const char *catalog,
                            const char *path, const etch__import_opts *opts,
                            etch__import_counts *counts);
int etch__query_import_memory(etch__db *db, const void *data, size_t len,
                              const char *name, const etch__import_opts *opts,
                              etch__import_counts *counts);

/*
 * A live import (import_live.c): the tables of a trace file that grows (one
 * being recorded) kept up to date in `db`, by a process that holds it open
 * (etch ui, one per live trace). Each step reads only what was appended
 * since the last one; after every step the tables are those a cold import
 * (etch__query_import_file with allow_truncated) of the file as it is now
 * would make: the same rows, the same slice and flow ids, the slices still
 * open with dur -1 and written again when they end. The args table's ids
 * (args.id, not arg_set_id) are the one exception: they follow the order
 * the events came in. Tables are in the default catalog of `db`, which
 * must be empty or hold only an earlier import of the file (emptied);
 * nothing else may write them meanwhile. opts: all_args and strict are
 * taken; the rest is the live import's own.
 *
 * etch__import_live_step: reads on; *changed (may be NULL) true when the
 * tables changed. A file replaced or cut shorter, or whose tracks cannot be
 * nested on (import_live.c), is read again whole (counted in
 * etch__import_live_restarts). etch__import_live_recording: whether the
 * file's writer still held it at the last step. Not thread-safe: one
 * thread steps a live import, and the database's readers see a step's
 * tables once it returns (a file database commits each step).
 */
typedef struct etch__import_live etch__import_live;
int etch__import_live_open(etch__import_live **out, etch__db *db,
                           const char *path, const etch__import_opts *opts);
int etch__import_live_step(etch__import_live *l, bool *changed);
bool etch__import_live_recording(const etch__import_live *l);
uint64_t etch__import_live_restarts(const etch__import_live *l);
/* The offset the live import has read the file to (the end of its last
 * whole packet). */
uint64_t etch__import_live_offset(const etch__import_live *l);
/* The file is now at `path` (renamed by its recorder when whole: the
 * same file); the next steps read it there. */
int etch__import_live_set_path(etch__import_live *l, const char *path);
void etch__import_live_close(etch__import_live *l);

/*
 * A live import between two steps saved as bytes (*out, etch__vec_free
 * when done), and restored into a new live import of the same file on the
 * same tables (those the saved one wrote, as it left them), which then
 * steps on as the saved one would have (import_save.c, reader/save.c): for
 * `etch query` on a trace being recorded, a process each time (cache.c).
 * Saving: ETCH_EUNSUPPORTED for what is not saved (call stacks, samples,
 * custom events, several machines). Restoring: ETCH_EFORMAT for bytes
 * that are not a whole, consistent save, ETCH_ESTATE for another file or
 * one cut shorter; the tables are then to be built again.
 */
struct etch_vec;
int etch__import_live_save(const etch__import_live *l, struct etch_vec *out);
int etch__import_live_restore(etch__import_live **out, etch__db *db,
                              const char *path, const etch__import_opts *opts,
                              const void *state, size_t len);

/*
 * `db`, the database file `db_file` holding the tables a cold import of
 * the whole trace `trace` makes (a live import that read it to its end,
 * its writer gone), made the trace's ordinary cache in `cache_dir` (NULL:
 * the default directory), the one etch__query_cache_file would have
 * built: its key written into it (table etch_cache), closed, renamed to
 * the cache's name (into `file`). The trace must be as it was read,
 * `size` bytes modified at `mtime_ns` and no longer recorded; else
 * ETCH_ESTATE and nothing is written. `db` is closed in every case;
 * `db_file` is the caller's to remove on an error.
 */
int etch__query_cache_adopt(etch__db *db, const char *db_file,
                            const char *trace, const char *cache_dir,
                            int64_t size, int64_t mtime_ns, char *file,
                            size_t nfile);

/* What an import to a sink read (etch__query_import_sink). */
typedef struct etch__import_result {
  etch__import_counts counts;
  etch_reader_stats stats;
  int64_t first, last; /* the trace's bounds; first > last: no events */
} etch__import_result;

/*
 * Imports the trace file `path` (or with `path` NULL the `len` bytes at
 * `data`) with its rows, every table's, going to `sink`: what
 * etch__query_import_file writes into a database, the same rows in the
 * same order. `res` may be NULL.
 */
int etch__query_import_sink(const char *path, const void *data, size_t len,
                            const etch__row_sink *sink,
                            const etch__import_opts *opts,
                            etch__import_result *res);

/* ---- the cache beside a trace (cache.c) ------------------------------------- */

/* The cache directory: ETCH_CACHE_DIR, else $XDG_CACHE_HOME/etch, else
 * ~/.cache/etch. */
int etch__cache_dir(char *buf, size_t n);
/*
 * Opens the tables of the trace file `trace` (every arg kept) from its
 * cache in `cache_dir` (NULL: etch__cache_dir's), building the cache first
 * when there is none for the trace as it is now; *imported (if not NULL)
 * says whether the trace was read. The database is read-only.
 */
int etch__query_open_cached(const char *trace, const char *cache_dir,
                            const etch__import_opts *opts, etch__db **out,
                            bool *imported);
/* The path of the trace's cache, built first if needed (as above); an
 * empty `file` when there can be no cache (no directory: warned). */
int etch__query_cache_file(const char *trace, const char *cache_dir,
                           const etch__import_opts *opts, char *file,
                           size_t nfile, bool *imported);
/*
 * Several traces in one database, for comparing runs: each trace's tables
 * in a catalog of its own (its cache, ATTACHed read-only, or with
 * `no_cache` a catalog in memory), and in the main catalog a view per table
 * that unions them with a first column `trace` (the path as given), and
 * the views over track. A path may also be a database written by --db.
 * On an error, *failed names the trace it came from (NULL: none).
 */
int etch__query_open_traces(const char *const *paths, size_t n,
                            const char *cache_dir, bool no_cache,
                            const etch__import_opts *opts, etch__db **out,
                            const char **failed);

/* ---- results ------------------------------------------------------------- */

typedef enum etch__out_mode {
  ETCH__OUT_TABLE = 0, /* aligned columns with a header */
  ETCH__OUT_CSV = 1    /* RFC 4180 quoting, header row, "\n" rows */
} etch__out_mode;

/*
 * Prints the rows of a result. Results without columns (or from statements
 * that return none) print nothing.
 */
void etch__query_print_result(duckdb_result *res, FILE *out,
                              etch__out_mode mode);
/*
 * Runs every statement of `sql` in turn, printing each result that has
 * rows to show (results are separated by a blank line in table mode). On
 * an error the message names DuckDB's complaint.
 */
int etch__query_run_sql(etch__db *db, const char *sql, FILE *out,
                        etch__out_mode mode);
/* Whether `sql` ends a statement: a ';' outside quotes and comments is
 * its last non-blank character (the shell runs what it has then). */
bool etch__query_sql_complete(const char *sql);

/* An interactive prompt on `in`/`out`: SQL ending with ';', .tables,
 * .schema [table], .mode table|csv, .help, .quit. */
int etch__query_shell(etch__db *db, FILE *in, FILE *out, etch__out_mode mode);

/* ---- text tables (shared by results and stats) ---------------------------- */

typedef struct etch__tt etch__tt;
etch__tt *etch__tt_new(size_t ncols);
/* Column header and alignment (right = numbers). */
void etch__tt_header(etch__tt *t, size_t col, const char *name, bool right);
/* Appends a cell to the current row; rows fill left to right. */
void etch__tt_cell(etch__tt *t, const char *text);
void etch__tt_cellf(etch__tt *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints the header (if any column has one), dashes (if asked) and the
 * rows, every line prefixed by `indent`. A table that could not hold all
 * its headers and cells (out of memory; also NULL, a table that could not
 * be made) prints nothing and says ETCH_ENOMEM. */
int etch__tt_print(const etch__tt *t, FILE *out, const char *indent,
                   bool dashes);
size_t etch__tt_rows(const etch__tt *t);
void etch__tt_free(etch__tt *t);

/* ---- reports --------------------------------------------------------------- */

/* "999 ns", "1.23 us", "45.60 ms", "2.50 s". */
void etch__fmt_dur(char *buf, size_t n, int64_t ns);
/* a - b, held at INT64_MIN / INT64_MAX instead of overflowing (times from
 * a hostile trace can be anything). */
static inline int64_t etch__sat_sub(int64_t a, int64_t b) {
  int64_t d;
  if (!__builtin_sub_overflow(a, b, &d)) return d;
  return b < 0 ? INT64_MAX : INT64_MIN;
}

typedef struct etch__stats_opts {
  int top;      /* rows per top-slices table (default 10) */
  bool compact; /* trace summary, top by total, data loss only */
  bool json;    /* machine-readable output */
  bool allow_truncated; /* as etch__import_opts.allow_truncated */
  bool strict;          /* as etch__import_opts.strict */
} etch__stats_opts;

/*
 * What the `etch stats` report shows, filled from the imported tables
 * (etch__stats_data_from_db) or while reading a trace without a database
 * (etch__importer_stats_data); printed by etch__stats_print. Strings are
 * owned by the struct; NULL = SQL NULL.
 */
/* A function CPU samples were in (stats_samples.c): samples with it as the
 * innermost frame (self) and anywhere on the stack (total). */
typedef struct etch__sample_fn {
  char *name;
  int64_t self, total;
} etch__sample_fn;
typedef struct etch__stats_top {
  char *name;
  int64_t count, total, self, max;
} etch__stats_top;
typedef struct etch__stats_thread {
  char *thread, *process;
  int64_t tid, pid, busy;
  bool has_pid;
  int64_t machine; /* machine table id: 0 the host */
} etch__stats_thread;
/* A machine of a trace of several: its row, and what it holds. */
typedef struct etch__stats_machine {
  int64_t id, raw_id, processes, threads;
  char *name, *sysname, *release, *arch; /* NULL: the trace did not say */
} etch__stats_machine;
typedef struct etch__stats_counter {
  char *track, *unit;
  int64_t count;
  double min, max, mean, last;
} etch__stats_counter;
typedef struct etch__stats_loss {
  char *name, *description;
  int64_t value;
} etch__stats_loss;
typedef struct etch__stats_dropped {
  char *thread;
  int64_t tid, pid, dropped;
  bool has_tid, has_pid;
} etch__stats_dropped;
/* A frame: a slice on a track named "Frames" (etch_frame_*). */
typedef struct etch__stats_frame {
  int64_t ts, dur;
} etch__stats_frame;
/* A bookmark: an instant on a track named "Bookmarks" (etch_bookmark). */
typedef struct etch__stats_bookmark {
  int64_t ts;
  char *name;
} etch__stats_bookmark;
typedef struct etch__stats_data {
  int64_t start, end; /* trace bounds; start > end: no events */
  int64_t events, slices, instants, open_slices, counter_values,
      counter_tracks, flows, tracks, processes, threads;
  etch__stats_top *by_total, *by_self; /* sorted, at most `top` rows */
  size_t n_by_total, n_by_self;
  etch__stats_thread *thr; /* sorted: machine, busy desc, tid */
  size_t nthr;
  etch__stats_machine *machines; /* by id; printed when more than one */
  size_t nmachines;
  etch__stats_counter *ctr; /* sorted: track name, track id */
  size_t nctr;
  etch__stats_loss *loss; /* non-zero data_loss and error stats */
  size_t nloss;
  etch__stats_dropped *drop; /* etch.dropped_events per track, by tid */
  size_t ndrop;
  etch__stats_frame *frames; /* closed frames, by start time */
  size_t nframes;
  etch__stats_bookmark *bookmarks; /* by time */
  size_t nbookmarks;
  /* CPU samples: how many, and every function they were in, sorted by
   * self samples (then total, then name). */
  int64_t samples;
  etch__sample_fn *fns;
  size_t nfns;
} etch__stats_data;

/* The functions of the samples per callsite: `count[i]` samples with
 * callsite i innermost, parent[i] its caller (-1 none), names[i] its
 * function; into *out (owned, sorted by self). stats_samples.c. */
int etch__sample_fns(size_t ncs, const int64_t *parent,
                     const char *const *names, const int64_t *count,
                     etch__sample_fn **out, size_t *nout);
/* The same from the reader's stack tables, or from a database's
 * perf_sample and stack_profile tables (with the number of samples). */
int etch__sample_fns_of_stacks(const etch_stacks *st, const int64_t *count,
                               etch__sample_fn **out, size_t *nout);
int etch__sample_fns_of_db(etch__db *db, int64_t *samples,
                           etch__sample_fn **out, size_t *nout);
/* A callsite's function in SQL (c the callsite's stack_profile_frame f
 * and stack_profile_mapping m joined): the rule of stats_samples.c. */
#define ETCH__SAMPLE_FN_SQL                                                  \
  "coalesce((SELECT s.name FROM stack_profile_symbol s WHERE s.id = "        \
  "f.symbol_set_id), f.name, printf('%s+0x%x', "                             \
  "coalesce(nullif(regexp_replace(m.name, '^.*/', ''), ''), '?'), "          \
  "f.rel_pc))"
/* Sorted by self (by_total false) or total samples, then the other, name. */
void etch__sample_fns_sort(etch__sample_fn *fns, size_t n, bool by_total);
void etch__sample_fns_free(etch__sample_fn *fns, size_t n);

int etch__stats_data_from_db(etch__db *db, int top, etch__stats_data *out);
/* The order of frames (start, then duration) and bookmarks (time, then
 * name) in etch__stats_data, for qsort. */
int etch__stats_cmp_frame(const void *a, const void *b);
int etch__stats_cmp_bookmark(const void *a, const void *b);
/* From an importer run with `db` NULL, after etch__importer_finish. */
int etch__importer_stats_data(const etch__importer *imp, int top,
                              etch__stats_data *out);
void etch__stats_print(const etch__stats_data *d, FILE *out,
                       const etch__stats_opts *opts);
void etch__stats_data_free(etch__stats_data *d);
/* Sorts the rows of slice_summary-like totals as the report does and keeps
 * the first `top` (takes ownership of `rows`). */
void etch__stats_sort_top(etch__stats_top *rows, size_t n, bool by_self,
                          size_t top, etch__stats_top **out, size_t *nout);

/*
 * The one rule for a trace cut short, in every verb: the file ends inside
 * its last packet (however long that packet says it is), what precedes is
 * read and this warning goes to stderr ("etch: warning: PATH is cut short:
 * the N bytes from offset M are an incomplete packet; what precedes them is
 * read"); with --strict the reader's error instead. `path` NULL: "the
 * trace".
 */
void etch__query_warn_cut_short(const char *path, uint64_t bytes,
                                uint64_t offset);
/* A trace still being recorded (stat trace_recording): "etch: note: PATH
 * is still being recorded: read up to its last whole packet (N bytes)". */
void etch__query_note_recording(const char *path, uint64_t bytes);
/*
 * The same for malformed packets left out (stat malformed_packets): "etch:
 * warning: PATH: N malformed packets left out (the first: offset M: ...);
 * the rest is read" (`first` NULL: without the parenthesis); with --strict
 * the reader's error instead.
 */
void etch__query_warn_malformed(const char *path, uint64_t n,
                                const char *first);

/* The `etch leaks` report of a trace file: allocations never freed, by
 * tag and size (at most `top` groups; 0: all), and the peak. When the
 * trace lost data (any data-loss stat, or cut short) the report ends with
 * what that makes unknowable, a warning goes to stderr and *lost (if not
 * NULL) is set to whether the loss is more than a cut at the end.
 * Allocations with call stacks are also listed by call site; `flags`
 * (ETCH__LEAKS_* of leaks_sites.h) add the hotspots or make it JSON. */
int etch__query_leaks_file(const char *path, FILE *out, int top,
                           unsigned flags, bool allow_truncated, bool *lost);
int etch__query_leaks_memory(const void *data, size_t len, FILE *out,
                             int top);

/*
 * The summary of a trace file that `etch ls` shows: the counts and data
 * loss of `etch stats` (top tables of one row), read without a database
 * and without a word on stderr (a trace cut short is read up to the cut
 * and says so in its loss, trace_truncated_bytes). *has_realtime says
 * whether the trace's clock snapshots give wall-clock time: trace-clock
 * timestamp + *realtime_offset = ns since the epoch.
 */
int etch__query_summary_file(const char *path, etch__stats_data *out,
                             bool *has_realtime, int64_t *realtime_offset);

/* Prints the `etch stats` report from the imported tables. */
int etch__query_stats(etch__db *db, FILE *out, const etch__stats_opts *opts);
/*
 * The `etch stats` report of a trace file, computed while reading it (no
 * database: nesting, totals and counters are kept in memory).
 */
int etch__query_stats_file(const char *path, FILE *out,
                           const etch__stats_opts *opts);
int etch__query_stats_memory(const void *data, size_t len, FILE *out,
                             const etch__stats_opts *opts);

/* Writes the Chrome JSON trace event format from the imported tables. */
int etch__query_export_json(etch__db *db, FILE *out);

/* ---- diff of two traces (diff.c) --------------------------------------------- */

/* What orders the rows: the size of the change of a name's total (the
 * default), count, mean, p50 or p99, largest first; or the names. Ties go
 * by name. */
typedef enum etch__diff_sort {
  ETCH__DIFF_BY_TOTAL = 0,
  ETCH__DIFF_BY_SELF,
  ETCH__DIFF_BY_COUNT,
  ETCH__DIFF_BY_MEAN,
  ETCH__DIFF_BY_P50,
  ETCH__DIFF_BY_P99,
  ETCH__DIFF_BY_NAME
} etch__diff_sort;
/* "total", "self", "count", "mean", "p50", "p99", "name"; ETCH_EINVAL
 * otherwise. */
int etch__diff_sort_parse(const char *s, etch__diff_sort *out);
const char *etch__diff_sort_name(etch__diff_sort s);

/* One side of a row: the slices of the name that ended (dur >= 0,
 * instants as 0) in one trace. count 0: none (the rest is 0). */
typedef struct etch__diff_side {
  int64_t count, total, p50, p99; /* ns; total held to int64 */
  int64_t self; /* the slices' self_dur summed, held to int64 */
  double mean;
} etch__diff_side;
typedef struct etch__diff_row {
  char *name; /* NULL: slices without a name */
  etch__diff_side a, b;
} etch__diff_row;
typedef struct etch__diff {
  etch__diff_row *rows; /* sorted */
  size_t n;
} etch__diff;

/* The diff of the tables in catalogs `cat_a` and `cat_b` of `db` (as
 * etch__query_open_traces names them: "t0", "t1"). */
int etch__diff_from_db(etch__db *db, const char *cat_a, const char *cat_b,
                       etch__diff_sort sort, etch__diff *out);
/* The diff of two trace files (or databases written by --db), through
 * etch__query_open_traces: their caches, built first when needed, unless
 * `no_cache`. On an error, *failed names the trace it came from (NULL:
 * none). */
int etch__diff_files(const char *a, const char *b, const char *cache_dir,
                     bool no_cache, const etch__import_opts *opts,
                     etch__diff_sort sort, etch__diff *out,
                     const char **failed);
/* Sorts the rows again. */
void etch__diff_sort_rows(etch__diff *d, etch__diff_sort sort);
void etch__diff_free(etch__diff *d);
/* `etch diff`'s report: a table of the first `limit` rows (SIZE_MAX: all)
 * or JSON; the traces named `name_a` and `name_b`. */
void etch__diff_print(const etch__diff *d, FILE *out, size_t limit, bool json,
                      const char *name_a, const char *name_b,
                      etch__diff_sort sort);

/* JSON string escaping: quotes, backslashes, control characters; invalid
 * UTF-8 becomes U+FFFD. Writes the surrounding quotes. */
void etch__json_string(FILE *out, const char *s, size_t len);

#endif /* ETCH_QUERY_H */

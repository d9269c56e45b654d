/*
 * app.h - the app's traces, shared by app.c (the list, opening) and the
 * API (api.c, flame.c, report.c).
 */
#ifndef ETCH_UI_APP_H
#define ETCH_UI_APP_H

#include <pthread.h>
#include <stdatomic.h>

#include "ui/store.h"
#include "ui/str.h"
#include "ui/ui.h"

typedef struct etch__ui_ahead etch__ui_ahead;
typedef struct etch__ui_live etch__ui_live;

typedef struct etch__ui_trace {
  char *path;
  const char *name; /* the path's last component */
  char id[17];      /* 16 hex digits */
  int64_t size;
  /* A trace of the store (its name there is `name`): listed while the
   * store's listing has it. */
  bool in_store;
  /* What the list shows of a trace named on the command line that is not
   * in the store (the store's own come from its listing): its metadata as
   * the store keeps it, computed once per version of the file (and cached
   * beside etch query's cache). */
  etch__store_entry meta;
  bool has_meta;
  etch__db *db; /* NULL until opened */
  bool imported; /* the open read the trace (no cache yet) */
  /* The tables hold a trace still being recorded (its writer held the
   * lock when it was read). */
  bool recording;
  /* While it is recorded: what live.c keeps to follow its file (NULL
   * otherwise); `generation` changes at every step that brought data. */
  etch__ui_live *live;
  uint64_t generation;
  /* A trace opened live: its file's size when its tables were last read
   * (0 for one never live). */
  int64_t live_bytes;
  int64_t max_dur;
  char *error;
  int64_t slices;    /* rows in slice */
  int64_t flows;     /* rows in flow */
  etch__ui_lod *lod; /* the overview, once built (slices >= lod_min) */
  etch__ui_names *names; /* slice_name's texts, once a tile needed them */
  /* The counter values in memory, once a tile asked for counters (NULL
   * after that: too many, or values the query has to answer). */
  etch__ui_counters *counters;
  bool counters_tried;
  /* Finer overviews of stretches of the trace (1/kUiStretches of it
   * each), each built the first time a window needs it. */
  etch__ui_lod *fine[64];
  int64_t span_start, span_end; /* the trace's [start, end) */
  /* The whole trace's flame graph (JSON), once computed. A big trace's is
   * computed ahead, on a thread of its own with a connection of its own
   * to the cache, from the moment it is opened (etch__ui_flame_ahead); a
   * request for it takes that thread's answer if it is done, else
   * computes it (api.c). */
  char *flame;
  size_t flame_len;
  pthread_t ahead;
  bool ahead_running;
  /* The thread's job and answer, in memory of its own: the traces' array
   * may grow (and move) while it runs, when the store gets a trace. */
  etch__ui_ahead *ahead_job;
} etch__ui_trace;

struct etch__ui {
  etch__ui_trace *t;
  size_t n, cap;
  char *cache_dir;
  int64_t lod_min; /* a trace of this many slices gets an overview */
  /* The trace store (listed at each /api/traces), or NULL; why there is
   * none when it could not be found. */
  char *store_dir;
  char *store_error;
};

/* Lists the store (if any) into `out` and adds the traces new to it to the
 * app's (each with an id of its own; one no longer in the store keeps its
 * id, and opening it says it is gone). The traces' array may move. */
int etch__ui_store_sync(etch__ui *ui, etch__store_list *out);
/* t->meta for a trace that is not in the store, computed once per version
 * of the file (and cached on disk: CACHE/meta/HASH). */
int etch__ui_trace_meta(etch__ui *ui, etch__ui_trace *t);

/*
 * The tile of the window [start, end) at ns_per_px of the open trace `t`
 * (window.c): from its overview, its stretches' or the exact tile, as the
 * window's resolution allows (the overview built the first time a window
 * needs it).
 */
int etch__ui_trace_tile(etch__ui *ui, etch__ui_trace *t,
                        const int64_t *tracks, size_t nt, int64_t start,
                        int64_t end, double ns_per_px, etch__ui_tile *out);
/* Its counters' rows for that window (etch__ui_counters_tile's), from the
 * values in memory when they are few enough, else by a query; *rows is
 * the caller's (free). */
int etch__ui_trace_counters(etch__ui_trace *t, const int64_t *ids, size_t n,
                            int64_t start, int64_t end, double ns_per_px,
                            etch__ui_counter_row **rows, size_t *nrows);

/* The trace whose id is `id`, or NULL. */
etch__ui_trace *etch__ui_find(etch__ui *ui, const char *id);
/* Starts computing the whole trace's flame graph ahead (see above), if
 * the trace has a cache file to open a second time; else nothing. */
void etch__ui_flame_ahead(etch__ui *ui, etch__ui_trace *t);
/* The thread's answer into t->flame, if one was started (waits for it). */
void etch__ui_flame_join(etch__ui_trace *t);
/* The same, waiting at most `ms` ms: false if the thread is still at it
 * (it goes on; a later join takes or drops its answer). */
bool etch__ui_flame_join_within(etch__ui_trace *t, int ms);
/* Tells the thread its answer is no longer wanted: it ends soon. */
void etch__ui_flame_stop(etch__ui_trace *t);

/* Opens the trace's tables (once); an error if the file is gone. */
int etch__ui_open(etch__ui *ui, etch__ui_trace *t);

/* A trace's tables as one open of its file gives them (through the query
 * part's cache: a trace being recorded is read into memory, up to its
 * last whole packet) and what the app keeps of them; `quiet`: no note
 * or warning on stderr (a trace cut short, still recorded). */
typedef struct etch__ui_tables {
  etch__db *db;
  bool imported, recording;
  int64_t slices, flows, max_dur;
} etch__ui_tables;
int etch__ui_open_tables(etch__ui *ui, const char *path, bool quiet,
                         etch__ui_tables *out);
/* The same for tables already in `db` (locked down for the SQL box, then
 * counted); on an error `db` is the caller's to close. */
int etch__ui_tables_of(etch__db *db, etch__ui_tables *out);
/* Drops what the app computed from a trace's tables (its overviews,
 * names, counters in memory, flame graph; the flame graph ahead stopped
 * and joined); the tables stay. */
void etch__ui_trace_forget(etch__ui_trace *t);
/* The trace's tables replaced by `tb`'s (the old ones closed, what was
 * computed from them forgotten). */
void etch__ui_trace_take(etch__ui_trace *t, const etch__ui_tables *tb);

/*
 * The flame graph of the slices in [start, end) (the whole trace when
 * start > end) of the thread `utid` (< 0: all): JSON {"nodes": [[parent,
 * name, total, self, count], ...]} into `out`, node 0 the root.
 */
int etch__ui_flame(etch__db *db, int64_t start, int64_t end, int64_t utid,
                   FILE *out);
/* The same, given up (an error) once *stop is set. */
int etch__ui_flame_until(etch__db *db, int64_t start, int64_t end,
                         int64_t utid, const atomic_bool *stop, FILE *out);

/* ---- a trace being recorded (live.c) ------------------------------------------ */

/* Makes the open trace `t` live: its file was `size` bytes, modified at
 * `mtime_ns`, before the read that gave its tables. Its live database is
 * a file in ui's cache directory (live.c), removed when the trace is live
 * no more (etch__ui_live_close). */
int etch__ui_live_open(etch__ui *ui, etch__ui_trace *t, int64_t size,
                       int64_t mtime_ns);
/*
 * Brings a live trace's tables up to the bytes on disk: when its file
 * changed (or its writer let go) they are read again and swapped in,
 * everything computed from the old ones forgotten, t->generation bumped
 * and *changed set. A trace whose writer has let go is read to its end
 * one last time, its live database made its cache (live.c), and is live
 * no more. Nothing for a trace that is not live. On an
 * error the tables in hand stay.
 */
int etch__ui_trace_refresh(etch__ui *ui, etch__ui_trace *t, bool *changed);
/* Whether a step is due: the last one's cost has passed since it ended. */
bool etch__ui_live_due(const etch__ui_trace *t);
/* Whether the file's writer holds its lock (buffer/sink.h): a recording. */
bool etch__ui_file_recording(const char *path);
/* The trace live no more: its live import closed, and its live database
 * (closed first if the trace's tables are still its) removed. */
void etch__ui_live_close(etch__ui_trace *t);

#endif /* ETCH_UI_APP_H */

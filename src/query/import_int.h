/*
 * import_int.h - the importer's state, shared by its files: import.c
 * (tracks, nesting, flows, start and finish), import_write.c (the tables
 * written at the end) and import_stats.c (etch stats without a database).
 */
#ifndef ETCH_QUERY_IMPORT_INT_H
#define ETCH_QUERY_IMPORT_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/arena.h"
#include "base/base.h"
#include "base/map.h"
#include "query/query.h"
#include "query/rows.h"

/* ---- importer state ------------------------------------------------------ */

/* A slice whose event had a call stack (__intrinsic_track_event_callstacks). */
typedef struct etch__imp_callstack {
  int64_t slice_id, track_id, callsite_id;
} etch__imp_callstack;

typedef struct open_slice {
  int64_t id;
  int64_t ts;
  int64_t child_dur; /* sum of the durations of closed children */
  int64_t arg_set_id; /* 0 = none */
  const char *name;   /* interned; NULL = none */
  const char *cat;
} open_slice;

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
  uint32_t machine; /* etch_track_info.machine_id */
  etch_track_kind kind;
  const char *name; /* interned */
  int32_t pid, tid;
  int64_t id;           /* row id in track */
  const char *unit;     /* interned */
  int64_t unit_multiplier;
  bool is_incremental;
  open_slice *stack;
  uint32_t depth, cap;
  /* Totals for etch stats without a database. */
  bool has_busy, has_dropped;
  int64_t busy;    /* depth-0 slices with a duration */
  int64_t dropped; /* debug.count of etch.dropped_events */
  uint64_t cn;     /* counter values */
  uint64_t cnum;   /* ... that are numbers (NaN is "no value", as in SQL) */
  double cmin, cmax, csum, clast;
  int64_t clast_ts;
  /* A live import (import_live.c): the time of the last slice event
   * nested, to see a track go back in time from one read to the next. */
  int64_t nest_last;
  bool nested;
  /* Announced without events at the end of a read (the reader's idle
   * tracks): its id is given when the tables are written, after those of
   * the tracks with events, in the order of idle_rank. */
  bool idle;
  uint64_t idle_rank;
  const char *cmdline; /* interned: a process track's */
} qtrack;

typedef struct name_summary {
  const char *name; /* interned */
  int64_t count, total, self, max;
} name_summary;

typedef struct qproc {
  uint32_t machine;
  int32_t pid;
  const char *name;
  const char *cmdline;
} qproc;

typedef struct qthread {
  uint32_t machine;
  int32_t pid, tid;
  const char *name;
} qthread;

/* DuckDB settings an import may change (import.c's table). */
enum { kImportSettingsMax = 4 };

struct etch__importer {
  uint64_t t0_ns; /* when the import began (progress) */
  etch__db *db;
  const char *catalog; /* NULL: the default one */
  const etch__row_sink *sink; /* rows go there instead of db (or NULL) */
  etch__import_opts opts;
  int err;
  bool in_txn; /* the import's transaction is open */
  /* DuckDB's settings before the import (import.c), the first nsettings
   * of its table set for it. */
  char settings[kImportSettingsMax][64];
  size_t nsettings;
  etch__rows *rows; /* slice, counter, args and flow rows */

  etch_strpool strings;
  qtrack *tracks; /* tracks[i] has row id i + 1 */
  size_t ntracks, cap_tracks;
  etch_u64map track_by_uuid; /* uuid -> index in tracks */
  qtrack *last_track;   /* cache: consecutive events share a track */
  /* The trace's machines (etch__importer_machines): machines[i] is row i
   * of the machine table, 0 the host. */
  etch_machine_info *machines;
  size_t nmachines;
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

  flow_step *steps;   /* file_order: flows to link at the end */
  size_t nsteps, cap_steps;
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
  /* Slices with a call stack (import_stacks.c). */
  struct etch__imp_callstack *callstacks;
  size_t ncallstacks, cap_callstacks;
  /* CPU samples (import_samples.c), or NULL. */
  struct etch__imp_samples *samples;
  /* A live import (import_live.c): reads on, and a track whose slices go
   * back in time from one read to the next sets went_back (the import
   * starts over). */
  bool live;
  bool went_back;
  int64_t nactive;      /* tracks with events: ids 1..nactive */
  uint64_t idle_clock;  /* idle_rank of the last idle announcement */
};

static inline void fail(etch__importer *imp, int rc) {
  if (!imp->err) imp->err = rc;
}

static inline void fail_nomem(etch__importer *imp) {
  if (!imp->err) imp->err = etch__error(ETCH_ENOMEM, "import: out of memory");
}

static inline bool grow_array(void **arr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t cap2 = *cap ? *cap * 2 : 16;
  while (cap2 < need) cap2 *= 2;
  void *p = etch__realloc(*arr, cap2 * elem);
  if (!p) return false;
  *arr = p;
  *cap = cap2;
  return true;
}

/* ---- processes, threads and tracks by machine ------------------------------- */

/*
 * The maps key a host's process by its pid, a thread by pid << 32 | tid
 * and a track by its uuid, as they always did; another machine's key is
 * that key mixed with the machine, and the entry found must be of that
 * machine and id, else the next key is tried (so two machines' processes,
 * threads and tracks never share a row, whatever the trace holds). Each
 * finds the index into procs / threads / tracks, or false with in *free
 * the key to put a new one at.
 */
static inline uint64_t etch__imp_machine_key(uint64_t key, uint32_t machine) {
  if (!machine) return key;
  return key ^ ((uint64_t)machine * 0x9e3779b97f4a7c15ull);
}
bool etch__imp_find_proc(const etch__importer *imp, uint32_t machine,
                         int32_t pid, int64_t *idx, uint64_t *free_key);
bool etch__imp_find_thread(const etch__importer *imp, uint32_t machine,
                           int32_t pid, int32_t tid, int64_t *idx,
                           uint64_t *free_key);
bool etch__imp_find_track(const etch__importer *imp, uint32_t machine,
                          uint64_t uuid, int64_t *idx, uint64_t *free_key);

/* ---- shared between the files ---------------------------------------- */

typedef struct stat_row {
  const char *name, *severity, *source, *description;
  uint64_t value;
} stat_row;

enum { kStatRows = 30 };

/* The rows of the stats table (import_write.c). */
void etch__import_fill_stat_rows(const etch__importer *imp,
                                 const etch_reader_stats *rs, stat_row *out);
/* Tracks, processes and threads, stats and the per-name summary: the
 * tables written at the end of an import (import_write.c). */
int etch__import_write_tables(etch__importer *imp,
                              const etch_reader_stats *st);

/* For a live import (import_live.c), from import.c: a slice row, a
 * slice's part of the per-name summary, the flows linked (the steps kept),
 * and the import's transaction and settings ended and begun again between
 * two reads. */
void etch__imp_insert_slice(etch__importer *imp, const qtrack *t, int64_t id,
                            int64_t ts, int64_t dur, const char *cat,
                            const char *name, uint32_t depth,
                            int64_t parent_id, int64_t arg_set_id,
                            int64_t self_dur);
void etch__imp_summary_add(etch__importer *imp, const char *name, int64_t dur,
                           int64_t self);
void etch__imp_link_steps(etch__importer *imp);
int etch__imp_pause(etch__importer *imp);
int etch__imp_unpause(etch__importer *imp);

/* The ids of the tracks still without events given (after those with),
 * their processes and threads made (import.c). */
void etch__imp_idle_ids(etch__importer *imp);

/* Notes that slice `slice_id` on track `track_id` has call stack
 * `callsite_id` (import_stacks.c). */
void etch__import_callstack(etch__importer *imp, int64_t slice_id,
                            int64_t track_id, int64_t callsite_id);

/* The upid of process `pid` of `machine` and the utid of thread (pid,
 * tid), made if new; 0 out of memory (import_find.c). */
int64_t etch__imp_upid(etch__importer *imp, uint32_t machine, int32_t pid);
int64_t etch__imp_utid(etch__importer *imp, uint32_t machine, int32_t pid,
                       int32_t tid);

/* The samples of an import freed; their count and functions copied into
 * etch stats' data, false out of memory (import_samples.c). */
void etch__import_samples_free(etch__importer *imp);
bool etch__import_samples_stats(const etch__importer *imp,
                                etch__stats_data *d);

/* A live importer between two steps as bytes, and back into a new live
 * importer on the same tables (import_save.c; reader/save.h's encoding):
 * ETCH_EUNSUPPORTED for state not saved, ETCH_EFORMAT for bytes that are
 * not a whole, consistent save. */
struct etch__sv_w;
struct etch__sv_r;
int etch__imp_save(const etch__importer *imp, struct etch__sv_w *w);
int etch__imp_restore(etch__importer *imp, struct etch__sv_r *in);

#endif /* ETCH_QUERY_IMPORT_INT_H */

/*
 * store.h - the trace store: a directory of trace files that `etch record`
 * writes into when it is given no -o, that `etch ls` lists, `etch rm`
 * tidies and `etch ui` shows.
 *
 *   DIR/20261127-031500-app.pftrace          a trace, named by time and
 *   DIR/20261127-031500-app.4102.pftrace     program (other processes of
 *   DIR/.meta/20261127-031500-app.pftrace    the run add their pid), and
 *                                            its metadata
 *
 * Listing a store must not read every trace: each trace's metadata (the
 * counts of `etch stats`, its start in wall-clock time, its data loss) is
 * kept in a small text file under DIR/.meta, written when the trace is
 * first listed (or right after `etch record` wrote it) and used while the
 * trace's size and modification time stay those it was computed for. A
 * trace that cannot be read is listed with its error; it never stops the
 * listing.
 *
 * Names are file names in DIR, never paths: etch__store_name_ok refuses
 * '/', "..", a leading '.', control characters, so no name leads out of
 * the store.
 *
 * `etch record --system` writes a session's trace under a hidden name,
 * DIR/.NAME.PID.part (PID: etch record's, which holds an flock on it),
 * and renames it NAME once it is whole. A recorder killed meanwhile
 * leaves the part: it is "abandoned" once its pid is gone and nobody holds
 * the lock (etchd may still write into it while it has the file), and
 * then listed (etch__store_list_abandoned) and removable under its hidden
 * name. A part being written is listed by etch__store_list_recording
 * only (etch ls), as a trace being recorded; a trace with a store name
 * being written (etch record --write-period) is listed with `recording`.
 */
#ifndef ETCH_UI_STORE_H
#define ETCH_UI_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/containers.h"

/* The store's directory: ETCH_STORE, else $XDG_DATA_HOME/etch/traces,
 * else ~/.local/share/etch/traces. Not created. */
int etch__store_dir(char *buf, size_t n);

/* Whether `name` can name a trace in a store (see above). */
bool etch__store_name_ok(const char *name);

/* DIR/NAME, or ETCH_EINVAL when the name is not a store name. */
int etch__store_path(const char *dir, const char *name, char *buf, size_t n);

/*
 * A new trace's path in `dir` (created, with its parents, if needed):
 * YYYYmmdd-HHMMSS-PROGRAM.pftrace for local time `when` (seconds since
 * the epoch), PROGRAM the last component of `program` with every byte
 * other than [A-Za-z0-9_.+-] made '_' (NULL: "trace"); "-2", "-3"... before
 * the extension when the name is taken.
 */
int etch__store_new_path(const char *dir, const char *program, int64_t when,
                         char *buf, size_t n);

typedef struct etch__store_loss {
  char *name; /* a data-loss or error stat, as in `etch stats` */
  int64_t value;
} etch__store_loss;

/* One trace of the store. Strings are owned by the entry. */
typedef struct etch__store_entry {
  char *name;          /* its file name in the store */
  int64_t size;        /* bytes */
  int64_t mtime_ns;    /* the file's modification time, ns since the epoch */
  /* NULL, or why the trace could not be listed (missing, not a trace,
   * corrupt): then only name, size and mtime_ns are known. */
  char *error;
  /* First and last event in the trace clock; start > end: no events. */
  int64_t start, end;
  /* When the trace started, ns since the epoch: the first event's time in
   * wall-clock time when the trace's clock snapshots give it
   * (wall_from_trace), else the file's modification time minus the
   * trace's duration. */
  int64_t wall_start_ns;
  bool wall_from_trace;
  int64_t events, slices, processes, threads; /* as `etch stats` counts */
  etch__store_loss *loss; /* non-zero data-loss and error stats */
  size_t nloss;
  etch_vec losses; /* of etch__store_loss: where loss lives */
  /* An abandoned part (see above): `error` says so; its recorder's pid. */
  bool abandoned;
  long writer_pid;
  /* Still being recorded: its writer holds the lock a trace's writer
   * holds (buffer/sink.h). Its metadata is of what is written so far (up
   * to the last whole packet), read at each listing, never cached. A part
   * (etch__store_list_recording) also has writer_pid. */
  bool recording;
} etch__store_entry;

typedef struct etch__store_list {
  etch__store_entry *e; /* newest first: wall_start_ns, then name, desc */
  size_t n;
  size_t computed; /* entries whose metadata was computed (not cached) */
} etch__store_list;

/*
 * Lists every trace of `dir`: each regular file (or symbolic link) whose
 * name is a store name; metadata files of traces that are gone are
 * removed. A directory that does not exist is an empty store. Metadata
 * that cannot be cached (a read-only store) is computed each time.
 */
int etch__store_list_dir(const char *dir, etch__store_list *out);
void etch__store_list_free(etch__store_list *l);

/* One trace's entry (its metadata cached as etch__store_list_dir does);
 * ETCH_ENOTFOUND when there is no such file. A trace that cannot be read is
 * no failure: its entry has `error`. */
int etch__store_entry_get(const char *dir, const char *name,
                          etch__store_entry *out);
void etch__store_entry_free(etch__store_entry *e);
/* The entry of a trace file anywhere, `path`, named `name`, its metadata
 * cached in the file `meta` (NULL: computed, not cached) as a store's
 * (its directory created if need be): what etch ui lists for the traces
 * named on its command line. ETCH_ENOTFOUND when there is no such file. */
int etch__store_file_entry(const char *path, const char *meta,
                           const char *name, etch__store_entry *out);
/* Fills `e` (zeroed by the caller) from a metadata file's text `buf`
 * (NUL-terminated; cut up in place) if it is whole and names size `size`
 * and mtime `mtime_ns`; false otherwise (e then holds what was parsed:
 * etch__store_entry_free it). Every byte may be anyone's: fuzz_store_meta. */
bool etch__store_meta_parse(char *buf, int64_t size, int64_t mtime_ns,
                            etch__store_entry *e);

/* Whether `name` is a part's, .NAME.PID.part with NAME a store name; *pid
 * (may be NULL) gets PID. */
bool etch__store_part_name(const char *name, long *pid);
/* Whether the part `name` of `dir` is abandoned: its writer's pid is gone
 * and no process holds a lock on it. */
bool etch__store_part_abandoned(const char *dir, const char *name);
/* Appends the abandoned parts of `dir` to `l` (size, mtime_ns, start = the
 * mtime, `error` and `abandoned` set) and sorts it again. */
int etch__store_list_abandoned(const char *dir, etch__store_list *l);
/* Appends the parts of `dir` being recorded (their writer holds its lock:
 * etch record --system, or etchd after it) to `l`, each read as far as it
 * is written and named by its hidden name, `recording` set, and sorts it
 * again. */
int etch__store_list_recording(const char *dir, etch__store_list *l);
/* Removes trace `name` and its metadata, or the abandoned part `name`
 * (ETCH_EBUSY for a part still being written). ETCH_EINVAL for a name that
 * is neither, ETCH_ENOTFOUND when the store has no such trace. */
int etch__store_remove(const char *dir, const char *name);

/* The duration of an entry in ns (0 without events). */
int64_t etch__store_entry_dur(const etch__store_entry *e);

/* The entries as a JSON array of objects: name, path (DIR/NAME), size,
 * mtime_ns, start (wall clock, ns since the epoch), start_from_trace,
 * duration, events, slices, processes, threads, data_loss ([{name,
 * value}]) and error (null or the message); an abandoned part also has
 * abandoned (true) and writer_pid. */
void etch__store_write_json(const char *dir, const etch__store_entry *e,
                            size_t n, FILE *out);
/* One entry's members from "size" on, each after a comma (",\"size\":...
 * \"error\":null"), as etch__store_write_json writes them. */
void etch__store_write_json_fields(const etch__store_entry *e, FILE *out);

#endif /* ETCH_UI_STORE_H */

/*
 * live.c - a trace being recorded, kept up with its file: the seam
 * through which etch ui follows a recording.
 *
 * A trace whose first open finds it still being recorded (its writer holds
 * the lock buffer/sink.h describes) is live: opened once
 * (etch__ui_live_open), stepped on demand (etch__ui_trace_refresh: the
 * page's /api/live, about once a second), closed when the recording ends
 * (after one last step, which reads to the end) or when the app ends.
 *
 * The tables are kept up by the query part's live import
 * (etch__import_live_*, src/query/import_live.c), held here for as long
 * as the trace is recorded: each step reads only what was appended since
 * the last one, into the trace's own database, and leaves the tables a
 * cold import of the same bytes would make. That database is a file of
 * its own in the cache directory (CACHE/live/ID-PID.duckdb; the query
 * part keeps no cache of a file that changes at every write), with
 * DuckDB's memory limit set (kLiveMemory): its tables go to disk as they
 * grow, so the process's memory stays bounded however long the trace is
 * recorded. Each step is one transaction there: a step that fails leaves
 * the tables of the step before. When the writer lets go, one last step
 * reads to the end: the tables are then those a cold import of the
 * finished file makes, and the live database becomes the file's ordinary
 * cache (the one the query part would have built for it, named by its
 * key: cache.c), opened from there; `etch query` of the finished trace
 * then opens it without reading the trace. Without a cache directory the
 * live database is in memory, and stays so. Only when that fails is the
 * file read whole again the ordinary way.
 *
 * The server answers one request at a time (server.c): nothing else uses
 * the trace's tables while a step swaps them; the flame graph ahead, the
 * only other thread, is stopped and joined first (etch__ui_trace_forget).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "reader/reader_priv.h"
#include "ui/api_int.h"

/* DuckDB's memory limit for a live trace's database: its buffer pool,
 * beyond which the tables are on disk only. */
static const char kLiveMemory[] = "256MB";

struct etch__ui_live {
  etch__import_live *imp; /* reads on into the trace's database */
  /* The directory of its databases ("" in memory: no cache directory),
   * the database's file ("" in memory), removed when the trace is live no
   * more or a new one replaces it, and how many were made. */
  char dir[4096];
  char db_path[4200];
  unsigned seq;
  /* The trace file, held open: a session of etchd recorded into the store
   * under a hidden name (.NAME.PID.part) is renamed when it ends, and
   * followed to its new name through this (follow_rename). */
  int fd;
  /* The file as it was just before the last read of it. */
  int64_t size, mtime_ns;
  /* The last step's cost (ns), and when it ended (CLOCK_MONOTONIC). */
  int64_t cost_ns, done_ns;
};

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The file's size and modification time; ETCH_ENOTFOUND when it is gone. */
static int file_state(const char *path, int64_t *size, int64_t *mtime_ns) {
  struct stat sb;
  if (stat(path, &sb) != 0)
    return etch__error(errno == ENOENT ? ETCH_ENOTFOUND : ETCH_EIO,
                       "%s: %s", path, strerror(errno));
  *size = (int64_t)sb.st_size;
  *mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
  return ETCH_OK;
}

bool etch__ui_file_recording(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  bool rec = etch__file_recording(fd);
  close(fd);
  return rec;
}

/* The directory of the live databases: CACHE/live, made; "" (in memory)
 * when there is no cache directory. */
static void live_dir(const etch__ui *ui, char *buf, size_t n) {
  buf[0] = '\0';
  if (ui->cache_dir) {
    if ((size_t)snprintf(buf, n, "%s", ui->cache_dir) >= n) buf[0] = '\0';
  } else if (etch__cache_dir(buf, n) != ETCH_OK) {
    etch__error_clear();
    buf[0] = '\0';
  }
  size_t k = strlen(buf);
  if (!k || k + 6 >= n) {
    buf[0] = '\0';
    return;
  }
  memcpy(buf + k, "/live", 6);
  if (etch__mkdirs(buf, "cache directory") != ETCH_OK) {
    etch__error_clear();
    buf[0] = '\0';
  }
}

/* The live database's file and what DuckDB keeps beside it, removed. */
static void live_db_remove(const char *path) {
  if (!path[0]) return;
  char side[4200 + 8];
  unlink(path);
  snprintf(side, sizeof side, "%s.wal", path);
  unlink(side);
  snprintf(side, sizeof side, "%s.tmp", path);
  rmdir(side);
}

/* A new database for the live import: a file of its own,
 * DIR/ID-PID-SEQ.duckdb, its memory limited (its path into `path`), else
 * in memory ("" into `path`). */
static int live_db_open(etch__ui_live *l, const etch__ui_trace *t,
                        etch__db **db, char *path, size_t n) {
  path[0] = '\0';
  if (!l->dir[0]) return etch__db_open(db, NULL);
  if ((size_t)snprintf(path, n, "%s/%s-%ld-%u.duckdb", l->dir, t->id,
                       (long)getpid(), ++l->seq) >= n)
    return etch__error(ETCH_EINVAL, "%s: path too long", l->dir);
  int rc = etch__db_open(db, path);
  char sql[80];
  snprintf(sql, sizeof sql, "SET memory_limit = '%s';", kLiveMemory);
  if (!rc) rc = etch__db_exec(*db, sql);
  if (rc) {
    etch__db_close(*db);
    *db = NULL;
    live_db_remove(path);
  }
  return rc;
}

/*
 * The live import (re)started: a cold read of the file as it is now into
 * a new database, which replaces the trace's tables (and its file the
 * last one's) once it is whole. On an error the tables in hand stay and
 * l->imp is NULL: the next step starts again.
 */
static int live_start(etch__ui_live *l, etch__ui_trace *t) {
  etch__import_live_close(l->imp);
  l->imp = NULL;
  etch__import_opts o = {.all_args = true, .allow_truncated = true,
                         .quiet = true};
  etch__db *db = NULL;
  etch__import_live *imp = NULL;
  etch__ui_tables tb;
  char path[sizeof l->db_path];
  int rc = live_db_open(l, t, &db, path, sizeof path);
  if (!rc) rc = etch__import_live_open(&imp, db, t->path, &o);
  if (!rc) rc = etch__ui_tables_of(db, &tb);
  if (rc) {
    etch__import_live_close(imp);
    etch__db_close(db);
    live_db_remove(path);
    return rc;
  }
  tb.recording = true;
  etch__ui_trace_take(t, &tb);
  live_db_remove(l->db_path);
  memcpy(l->db_path, path, sizeof path);
  l->imp = imp;
  return ETCH_OK;
}

/*
 * The trace file gone from its path: if the file held open is still
 * there under another name in the same directory (a part of the store
 * given its name when whole, store.h), that name is the trace's from now
 * on, and its state is read again; else ETCH_ENOTFOUND stays.
 */
static int follow_rename(etch__ui_live *l, etch__ui_trace *t, int64_t *size,
                         int64_t *mtime_ns) {
  char link[64], now[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", l->fd);
  ssize_t k = l->fd >= 0 ? readlink(link, now, sizeof now - 1) : -1;
  if (k <= 0) return ETCH_ENOTFOUND;
  now[k] = '\0';
  const char *was = strrchr(t->path, '/'), *is = strrchr(now, '/');
  /* Not removed (" (deleted)"), and moved within its directory only. */
  if (!was || !is || was - t->path != is - now ||
      memcmp(t->path, now, (size_t)(was - t->path)) ||
      strstr(is, " (deleted)") || !etch__store_name_ok(is + 1))
    return ETCH_ENOTFOUND;
  char *p = etch__strdup(now);
  if (!p) return etch__error(ETCH_ENOMEM, "out of memory");
  free(t->path);
  t->path = p;
  t->name = strrchr(p, '/') + 1;
  etch__error_clear();
  return file_state(t->path, size, mtime_ns);
}

/* Whether `path` is a part of the store (.NAME.PID.part) whose recorder
 * (etch record, PID) is still there: its writer (etchd) has let go, and
 * the recorder is about to give it its name (followed at the next step,
 * follow_rename), not to be read whole under the hidden one. */
static bool part_publishing(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash || !etch__store_part_name(slash + 1, NULL)) return false;
  char dir[4096];
  if ((size_t)(slash - path) >= sizeof dir) return false;
  memcpy(dir, path, (size_t)(slash - path));
  dir[slash - path] = '\0';
  return !etch__store_part_abandoned(dir, slash + 1);
}

int etch__ui_live_open(etch__ui *ui, etch__ui_trace *t, int64_t size,
                       int64_t mtime_ns) {
  if (t->live) return ETCH_OK;
  etch__ui_live *l = etch__calloc(1, sizeof *l);
  if (!l) return etch__error(ETCH_ENOMEM, "out of memory");
  l->fd = open(t->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  live_dir(ui, l->dir, sizeof l->dir);
  /* The live import starts from the file as it is (a cold read into a
   * database of its own, which then replaces the one in hand) and reads
   * on from there. */
  int rc = live_start(l, t);
  if (rc) {
    if (l->fd >= 0) close(l->fd);
    free(l);
    return rc;
  }
  l->size = size;
  l->mtime_ns = mtime_ns;
  l->done_ns = now_ns();
  t->live = l;
  t->live_bytes = size;
  t->generation++;
  return ETCH_OK;
}

void etch__ui_live_close(etch__ui_trace *t) {
  if (!t->live) return;
  etch__import_live_close(t->live->imp);
  /* Its database closed first if it is still the trace's. */
  if (t->recording) {
    etch__ui_trace_forget(t);
    etch__db_close(t->db);
    t->db = NULL;
  }
  live_db_remove(t->live->db_path);
  if (t->live->fd >= 0) close(t->live->fd);
  free(t->live);
  t->live = NULL;
}

bool etch__ui_live_due(const etch__ui_trace *t) {
  if (!t->live) return false;
  /* Another step once the last one's cost has passed again since it
   * ended: at most half the server's time goes into steps. */
  return now_ns() - t->live->done_ns >= t->live->cost_ns;
}

/* One step of the live import into the trace's tables, and their counts
 * taken. */
static int live_step(etch__ui_live *l, etch__ui_trace *t) {
  /* A part given its name meanwhile (follow_rename): read there. */
  int rc = etch__import_live_set_path(l->imp, t->path);
  if (!rc) rc = etch__import_live_step(l->imp, NULL);
  int64_t n[2];
  if (!rc)
    rc = etch__query_ints(t->db,
                          "SELECT (SELECT count(*) FROM slice_data),"
                          " (SELECT count(*) FROM flow)",
                          NULL, 0, n, 2);
  if (rc) return rc;
  t->slices = n[0];
  t->flows = n[1];
  t->max_dur = etch__ui_max_dur(t->db);
  return ETCH_OK;
}

/*
 * The recording ended and the live import has read the file to its end
 * (`size` bytes, modified at `mtime_ns`): its tables are those a cold
 * import of the file makes, so they are kept rather than read again. A
 * live database that is a file becomes the trace's ordinary cache
 * (etch__query_cache_adopt: the one the query part would build for the
 * finished file, which etch query then opens as it is) and is opened
 * from there, read-only; one in memory stays as it is. On an error the
 * live import is closed and the trace is still marked recorded: the
 * caller reads the file the ordinary way.
 */
static int live_finish(etch__ui *ui, etch__ui_live *l, etch__ui_trace *t,
                       int64_t size, int64_t mtime_ns) {
  etch__import_live_close(l->imp);
  l->imp = NULL;
  if (!l->db_path[0]) {
    t->recording = false;
    return ETCH_OK;
  }
  etch__db *db = t->db;
  t->db = NULL; /* closed by the adoption, whatever comes of it */
  char file[4200];
  int rc = etch__query_cache_adopt(db, l->db_path, t->path, ui->cache_dir,
                                   size, mtime_ns, file, sizeof file);
  if (rc) return rc; /* the live database removed with l */
  l->db_path[0] = '\0'; /* the cache's now */
  etch__ui_tables tb;
  db = NULL;
  rc = etch__db_open_existing(&db, file, true);
  if (!rc) rc = etch__ui_tables_of(db, &tb);
  if (rc) {
    etch__db_close(db);
    return rc;
  }
  tb.imported = t->imported;
  etch__ui_trace_take(t, &tb);
  return ETCH_OK;
}

int etch__ui_trace_refresh(etch__ui *ui, etch__ui_trace *t, bool *changed) {
  *changed = false;
  etch__ui_live *l = t->live;
  if (!l || !t->db) return ETCH_OK;
  /* The lock first, the size after: what a writer that has just let go
   * wrote before is all there. */
  bool rec = etch__ui_file_recording(t->path);
  int64_t size = 0, mtime = 0;
  int rc = file_state(t->path, &size, &mtime);
  if (rc == ETCH_ENOTFOUND) {
    rc = follow_rename(l, t, &size, &mtime);
    if (!rc) rec = etch__ui_file_recording(t->path);
  }
  if (rc) return rc;
  if (rec && size == l->size && mtime == l->mtime_ns) return ETCH_OK;
  if (!rec && part_publishing(t->path)) return ETCH_OK;
  int64_t t0 = now_ns();
  if (l->imp) {
    /* Reads on into the tables in hand (the last time when the writer
     * has let go): what was computed from them (the flame graph ahead
     * reads them from a thread of its own) goes first. */
    etch__ui_trace_forget(t);
    rc = live_step(l, t);
    if (!rc && !rec) {
      /* Finished: the tables in hand, as a cold import of the whole file
       * makes them, become its cache; if that fails, the file is read
       * the ordinary way below. */
      rc = live_finish(ui, l, t, size, mtime);
      if (rc == ETCH_ENOMEM) return rc;
      if (rc) etch__error_clear();
    } else if (rc) {
      /* The step may have written part of what it read (the rows go in
       * on connections of their own), and the live import has read past
       * it: the tables are read again at once, whole, into a new
       * database; if that fails too, at the next step. */
      if (live_start(l, t) == ETCH_OK) t->generation++;
      else etch__ui_trace_forget(t);
      return rc;
    }
  } else if (rec) {
    /* The last step failed: the file read again, whole. */
    rc = live_start(l, t);
    if (rc) return rc;
  }
  if (!rec && t->recording) {
    /* The writer let go and the live import could not finish: the file
     * read whole the ordinary way, its cache written, and swapped in. */
    etch__ui_tables tb;
    /* Quiet: the first open said it once; not once a second. */
    rc = etch__ui_open_tables(ui, t->path, true, &tb);
    if (rc) {
      /* The tables in hand stay; none (given to a cache that could not
       * be made): the trace is opened again at the next request. */
      if (!t->db) etch__ui_live_close(t);
      return rc;
    }
    etch__ui_trace_take(t, &tb);
  }
  t->generation++;
  *changed = true;
  l->size = size;
  l->mtime_ns = mtime;
  t->live_bytes = size;
  l->done_ns = now_ns();
  l->cost_ns = l->done_ns - t0;
  /* Read whole (its writer gone): finished, never stepped again. */
  if (!t->recording) etch__ui_live_close(t);
  return ETCH_OK;
}

/* ---- /api/live ----------------------------------------------------------------- */

ETCH_PRINTF(3, 4) static int fail(etch__ui_req *r, int status,
                                  const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int st = etch__ui_req_vfail(r, status, fmt, ap);
  va_end(ap);
  return st;
}

/*
 * /api/live?id=: the page's look at a trace it shows, about once a second.
 * A live trace is stepped first when a step is due; the answer says
 * whether it is still being recorded, its generation (changed: the page
 * asks again for what it shows), its bounds, its slice count and the
 * file's size when it was last read (at least: it may have grown during
 * the read): {"recording": bool, "generation": N, "start": ns, "end": ns,
 * "slices": N, "bytes": N}. A step that fails is said (`error`), the tables in hand
 * kept.
 */
int etch__ui_api_live(etch__ui_req *r) {
  int st;
  etch__ui_trace *t = etch__ui_req_trace(r, &st);
  if (!t) return st;
  char err[1024] = "";
  if (etch__ui_live_due(t)) {
    bool changed;
    int rc = etch__ui_trace_refresh(r->ui, t, &changed);
    if (rc == ETCH_ENOMEM) return fail(r, 500, "out of memory");
    if (rc) snprintf(err, sizeof err, "%s", etch_last_error());
  }
  int64_t v[3] = {0, 0, 0};
  if (etch__query_ints(t->db,
                       "SELECT CAST(coalesce(min(start_ts), 0) AS BIGINT),"
                       " CAST(coalesce(max(end_ts), 0) AS BIGINT),"
                       " (SELECT count(*) FROM slice_data) FROM trace_bounds",
                       NULL, 0, v, 3))
    return fail(r, 500, "%s", etch_last_error());
  fprintf(r->out,
          "{\"recording\":%s,\"generation\":%llu,\"start\":%lld,"
          "\"end\":%lld,\"slices\":%lld,\"bytes\":%lld,\"error\":",
          t->recording ? "true" : "false", (unsigned long long)t->generation,
          (long long)v[0], (long long)v[1], (long long)v[2],
          (long long)t->live_bytes);
  if (err[0])
    etch__json_string(r->out, err, strlen(err));
  else
    fputs("null", r->out);
  fputc('}', r->out);
  return 200;
}

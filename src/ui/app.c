/*
 * app.c - the traces `etch ui` may open: those named on its command line
 * (files, and the trace files of named directories) and those of the
 * trace store (listed again at each /api/traces). Each gets an id, 16
 * random hex digits, when it is added; a request names a trace by that id
 * and nothing else, so no path from a request is ever opened.
 *
 * A trace is opened the first time it is asked for, through the query
 * part's cache (the tables imported once, then read from the cache file);
 * it stays open until the app ends. A trace still being recorded is kept
 * up with its file (live.c).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "base/base.h"
#include "ui/app.h"

int etch__ui_new(etch__ui **out) {
  *out = etch__calloc(1, sizeof **out);
  if (!*out) return etch__error(ETCH_ENOMEM, "out of memory");
  /* Below this DuckDB answers every tile within the time aimed at
   * (docs/ui.md): an overview would only cost memory. */
  (*out)->lod_min = 1000000;
  return ETCH_OK;
}

void etch__ui_free(etch__ui *ui) {
  if (!ui) return;
  for (size_t i = 0; i < ui->n; i++) {
    etch__ui_trace_forget(&ui->t[i]);
    etch__ui_live_close(&ui->t[i]);
    etch__db_close(ui->t[i].db);
    free(ui->t[i].path);
    free(ui->t[i].error);
    etch__store_entry_free(&ui->t[i].meta);
  }
  free(ui->t);
  free(ui->cache_dir);
  free(ui->store_dir);
  free(ui->store_error);
  free(ui);
}

int etch__ui_set_store(etch__ui *ui, const char *dir) {
  free(ui->store_dir);
  ui->store_dir = NULL;
  if (dir && !(ui->store_dir = etch__strdup(dir)))
    return etch__error(ETCH_ENOMEM, "out of memory");
  return ETCH_OK;
}

int etch__ui_set_store_error(etch__ui *ui, const char *msg) {
  free(ui->store_error);
  ui->store_error = NULL;
  if (msg && !(ui->store_error = etch__strdup(msg)))
    return etch__error(ETCH_ENOMEM, "out of memory");
  return ETCH_OK;
}

int etch__ui_set_cache_dir(etch__ui *ui, const char *dir) {
  free(ui->cache_dir);
  ui->cache_dir = NULL;
  /* Out of memory is an error, never the default directory instead. */
  if (dir && !(ui->cache_dir = etch__strdup(dir)))
    return etch__error(ETCH_ENOMEM, "out of memory");
  return ETCH_OK;
}

size_t etch__ui_count(const etch__ui *ui) { return ui->n; }

static bool is_trace_name(const char *name) {
  size_t n = strlen(name);
  static const char *const kExt[] = {".pftrace", ".perfetto-trace"};
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(kExt); i++) {
    size_t e = strlen(kExt[i]);
    if (n > e && !strcmp(name + n - e, kExt[i])) return true;
  }
  return false;
}

/* Whether the file `path` is in the store's directory (the same directory,
 * however either is spelled), with a store name. */
static bool path_in_store(const etch__ui *ui, const char *path) {
  if (!ui->store_dir) return false;
  const char *slash = strrchr(path, '/');
  if (!etch__store_name_ok(slash ? slash + 1 : path)) return false;
  char dir[PATH_MAX];
  size_t n = slash ? (size_t)(slash - path) : 0;
  if (n >= sizeof dir) return false;
  memcpy(dir, path, n);
  dir[n] = '\0';
  struct stat a, b;
  return stat(slash ? (n ? dir : "/") : ".", &a) == 0 &&
         stat(ui->store_dir, &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

static int add_file(etch__ui *ui, const char *path, int64_t size) {
  bool in_store = path_in_store(ui, path);
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  for (size_t i = 0; i < ui->n; i++)
    if (!strcmp(ui->t[i].path, path) ||
        (in_store && ui->t[i].in_store && !strcmp(ui->t[i].name, base)))
      return ETCH_OK;
  if (ui->n == ui->cap) {
    size_t nc = ui->cap ? ui->cap * 2 : 8;
    etch__ui_trace *g = etch__realloc(ui->t, nc * sizeof *g);
    if (!g) return etch__error(ETCH_ENOMEM, "out of memory");
    ui->t = g;
    ui->cap = nc;
  }
  etch__ui_trace *t = &ui->t[ui->n];
  memset(t, 0, sizeof *t);
  t->path = etch__strdup(path);
  if (!t->path) return etch__error(ETCH_ENOMEM, "out of memory");
  slash = strrchr(t->path, '/');
  t->name = slash ? slash + 1 : t->path;
  t->size = size;
  t->in_store = in_store;
  uint8_t rnd[8];
  if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
    free(t->path);
    return etch__error(ETCH_EIO, "no random bytes for an id: %s",
                       strerror(errno));
  }
  for (size_t i = 0; i < sizeof rnd; i++)
    snprintf(t->id + 2 * i, 3, "%02x", rnd[i]);
  ui->n++;
  return ETCH_OK;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int etch__ui_add_path(etch__ui *ui, const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0)
    return etch__error(ETCH_EIO, "%s: %s", path, strerror(errno));
  if (S_ISREG(sb.st_mode)) return add_file(ui, path, (int64_t)sb.st_size);
  if (!S_ISDIR(sb.st_mode))
    return etch__error(ETCH_EINVAL, "%s: neither a file nor a directory",
                       path);
  DIR *d = opendir(path);
  if (!d) return etch__error(ETCH_EIO, "%s: %s", path, strerror(errno));
  etch_vec list = {0};
  int rc = ETCH_OK;
  struct dirent *e;
  while (!rc && (e = readdir(d))) {
    if (e->d_name[0] == '.' || !is_trace_name(e->d_name)) continue;
    char *full = etch__aprintf("%s/%s", path, e->d_name);
    if (!full || etch__vec_push(&list, &full, sizeof full)) {
      free(full);
      rc = etch__error(ETCH_ENOMEM, "out of memory");
    }
  }
  closedir(d);
  char **names = (char **)list.data;
  size_t n = ETCH_VEC_COUNT(&list, char *);
  if (n) qsort(names, n, sizeof *names, cmp_str);
  for (size_t i = 0; i < n; i++) {
    struct stat fb;
    if (!rc && stat(names[i], &fb) == 0 && S_ISREG(fb.st_mode))
      rc = add_file(ui, names[i], (int64_t)fb.st_size);
    free(names[i]);
  }
  free(names);
  return rc;
}

/* ---- the list ----------------------------------------------------------------- */

static int cmp_index_name(const void *x, const void *y, void *ctx) {
  const etch__ui_trace *t = ctx;
  return strcmp(t[*(const size_t *)x].name, t[*(const size_t *)y].name);
}

int etch__ui_store_sync(etch__ui *ui, etch__store_list *out) {
  memset(out, 0, sizeof *out);
  if (!ui->store_dir) return ETCH_OK;
  int rc = etch__store_list_dir(ui->store_dir, out);
  /* And the sessions being recorded through etchd, under their hidden
   * names (.NAME.PID.part), as etch ls lists them. */
  if (!rc) rc = etch__store_list_recording(ui->store_dir, out);
  if (rc) {
    etch__store_list_free(out);
    return rc;
  }
  /* The store's traces the app has, by name (indices: the array may move
   * as traces are added below; those are new names, looked up no more). */
  size_t *idx = etch__calloc(ui->n + 1, sizeof *idx), nidx = 0;
  if (!idx) {
    etch__store_list_free(out);
    return etch__error(ETCH_ENOMEM, "out of memory");
  }
  for (size_t i = 0; i < ui->n; i++)
    if (ui->t[i].in_store) idx[nidx++] = i;
  qsort_r(idx, nidx, sizeof *idx, cmp_index_name, ui->t);
  for (size_t k = 0; k < out->n; k++) {
    const etch__store_entry *e = &out->e[k];
    size_t lo = 0, hi = nidx, i = ui->n;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      int c = strcmp(ui->t[idx[mid]].name, e->name);
      if (c == 0) {
        i = idx[mid];
        break;
      }
      if (c < 0) lo = mid + 1;
      else hi = mid;
    }
    if (i == ui->n) {
      char path[PATH_MAX];
      if (etch__store_part_name(e->name, NULL)) {
        if ((size_t)snprintf(path, sizeof path, "%s/%s", ui->store_dir,
                             e->name) >= sizeof path)
          continue;
      } else if (etch__store_path(ui->store_dir, e->name, path,
                                  sizeof path)) {
        continue;
      }
      size_t before = ui->n;
      rc = add_file(ui, path, e->size);
      if (rc) {
        free(idx);
        etch__store_list_free(out);
        return rc;
      }
      if (ui->n == before) continue; /* listed under another path */
      ui->t[i].in_store = true;
    }
    ui->t[i].size = e->size;
  }
  free(idx);
  return ETCH_OK;
}

/* The file that caches the metadata of a trace named on the command line:
 * CACHE/meta/HASH, HASH that of its real path. "" when there is no cache
 * directory. */
static void meta_file(const etch__ui *ui, const char *path, char *buf,
                      size_t n) {
  buf[0] = '\0';
  char dir[4096], real[PATH_MAX];
  if (ui->cache_dir) {
    if ((size_t)snprintf(dir, sizeof dir, "%s", ui->cache_dir) >= sizeof dir)
      return;
  } else if (etch__cache_dir(dir, sizeof dir) != ETCH_OK) {
    return;
  }
  if (!realpath(path, real)) return;
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) return;
  uint64_t h = etch__hash_bytes(real, strlen(real), 0);
  if ((size_t)snprintf(buf, n, "%s/meta/%016" PRIx64, dir, h) >= n)
    buf[0] = '\0';
}

int etch__ui_trace_meta(etch__ui *ui, etch__ui_trace *t) {
  struct stat sb;
  if (t->has_meta && stat(t->path, &sb) == 0 &&
      (int64_t)sb.st_size == t->meta.size &&
      (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec ==
          t->meta.mtime_ns)
    return ETCH_OK;
  etch__store_entry_free(&t->meta);
  t->has_meta = false;
  char meta[4352];
  meta_file(ui, t->path, meta, sizeof meta);
  int rc = etch__store_file_entry(t->path, meta[0] ? meta : NULL, t->name,
                                  &t->meta);
  if (rc && rc != ETCH_ENOMEM) {
    /* Gone since, or not to be looked at: listed with the reason (opening
     * it says so too). */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s",
             rc == ETCH_ENOTFOUND ? "missing: no such file (removed or moved "
                                    "since etch ui started)"
                                  : etch_last_error());
    memset(&t->meta, 0, sizeof t->meta);
    t->meta.name = etch__strdup(t->name);
    t->meta.error = etch__strdup(msg);
    t->meta.size = t->size;
    if (!t->meta.name || !t->meta.error) {
      etch__store_entry_free(&t->meta);
      return etch__error(ETCH_ENOMEM, "out of memory");
    }
    return ETCH_OK; /* not kept: it may come back */
  }
  if (rc) return rc;
  t->has_meta = true;
  t->size = t->meta.size;
  return ETCH_OK;
}

etch__ui_trace *etch__ui_find(etch__ui *ui, const char *id) {
  if (!id || strlen(id) != 16) return NULL;
  for (size_t i = 0; i < ui->n; i++)
    if (!strcmp(ui->t[i].id, id)) return &ui->t[i];
  return NULL;
}

/*
 * The SQL box runs the page's SQL on this connection: nothing outside the
 * tables (no file read or written, no ATTACH, no extension), and the
 * setting cannot be turned back on.
 */
static int lock_down(etch__db *db) {
  return etch__db_exec(db,
                       "SET enable_external_access = false;"
                       "SET lock_configuration = true;");
}

int etch__ui_open_tables(etch__ui *ui, const char *path, bool quiet,
                         etch__ui_tables *out) {
  memset(out, 0, sizeof *out);
  etch__import_opts o = {.all_args = true, .allow_truncated = true,
                         .quiet = quiet};
  etch__db *db = NULL;
  bool imported = false;
  int rc = etch__query_open_cached(path, ui->cache_dir, &o, &db, &imported);
  if (rc) return rc;
  rc = etch__ui_tables_of(db, out);
  if (rc) etch__db_close(db);
  out->imported = imported;
  return rc;
}

int etch__ui_tables_of(etch__db *db, etch__ui_tables *out) {
  memset(out, 0, sizeof *out);
  int rc = lock_down(db);
  /* How many slices and flows: a trace whose count is not known is not
   * opened (no flow would be looked for, no overview made); whether it is
   * still being recorded (read up to its last whole packet). */
  int64_t n[3];
  if (rc == ETCH_OK)
    rc = etch__query_ints(db,
                          "SELECT (SELECT count(*) FROM slice_data),"
                          " (SELECT count(*) FROM flow),"
                          " (SELECT coalesce(max(value), 0) FROM stats"
                          "  WHERE name = 'trace_recording')",
                          NULL, 0, n, 3);
  if (rc) return rc;
  out->db = db;
  out->slices = n[0];
  out->flows = n[1];
  out->recording = n[2] != 0;
  out->max_dur = etch__ui_max_dur(db);
  ETCH_DCHECK(out->slices >= 0 && out->flows >= 0);
  return ETCH_OK;
}

void etch__ui_trace_forget(etch__ui_trace *t) {
  etch__ui_flame_stop(t);
  etch__ui_flame_join(t);
  free(t->flame);
  t->flame = NULL;
  t->flame_len = 0;
  etch__ui_lod_free(t->lod);
  t->lod = NULL;
  etch__ui_names_unref(t->names);
  t->names = NULL;
  etch__ui_counters_free(t->counters);
  t->counters = NULL;
  t->counters_tried = false;
  for (size_t k = 0; k < ETCH_ARRAY_SIZE(t->fine); k++) {
    etch__ui_lod_free(t->fine[k]);
    t->fine[k] = NULL;
  }
  t->span_start = t->span_end = 0;
}

void etch__ui_trace_take(etch__ui_trace *t, const etch__ui_tables *tb) {
  etch__ui_trace_forget(t);
  etch__db_close(t->db);
  t->db = tb->db;
  t->imported = tb->imported;
  t->max_dur = tb->max_dur;
  t->slices = tb->slices;
  t->flows = tb->flows;
  t->recording = tb->recording;
}

int etch__ui_open(etch__ui *ui, etch__ui_trace *t) {
  struct stat sb;
  if (stat(t->path, &sb) != 0)
    return etch__error(ETCH_ENOTFOUND,
                       "%s is no longer there (removed or moved since etch "
                       "ui started): %s",
                       t->path, strerror(errno));
  if (t->db) return ETCH_OK;
  int64_t mtime = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
  /* Being recorded: straight into the live import (live.c), from the file
   * as it was before this read (a later step reads it again if it grew
   * meanwhile), not read into memory first. One the live import cannot
   * read is opened the ordinary way (which says why). */
  int rc;
  if (etch__ui_file_recording(t->path)) {
    rc = etch__ui_live_open(ui, t, (int64_t)sb.st_size, mtime);
    if (rc != ETCH_OK && rc != ETCH_ENOMEM) etch__error_clear();
    else return rc;
  }
  etch__ui_tables tb;
  rc = etch__ui_open_tables(ui, t->path, false, &tb);
  if (rc) return rc;
  etch__ui_trace_take(t, &tb);
  /* Its writer took the lock meanwhile: live too. */
  if (t->recording)
    rc = etch__ui_live_open(ui, t, (int64_t)sb.st_size, mtime);
  return rc;
}

/* ---- the flame graph ahead ----------------------------------------------------- */

/* The flame graph ahead's niceness (it and its database's threads): the
 * lowest. Tried with 0 and 5 (10 M events, load average 3): the flame
 * graph comes 0-94 / 157-206 ms after the first tile instead of 184-209
 * ms, but the first tile takes 193-340 / 185-245 ms instead of 151-158. */
enum { kAheadNice = 19 };

struct etch__ui_ahead {
  char path[4096];
  char *flame; /* the answer, NULL if it failed */
  size_t len;
  atomic_bool stop; /* the answer is no longer wanted */
};
typedef etch__ui_ahead ahead_job;

static void *ahead_main(void *arg) {
  ahead_job *job = arg;
  /* Behind the page's requests: the lowest priority, for this thread and
   * the threads of its database (made from it, so they inherit it). */
  setpriority(PRIO_PROCESS, (id_t)etch__gettid(), kAheadNice);
  etch__db *db = NULL;
  char *body = NULL;
  size_t len = 0;
  if (etch__db_open_existing(&db, job->path, true) == ETCH_OK) {
    etch__ui_membuf mb;
    FILE *f = etch__ui_membuf_open(&mb);
    if (f) {
      int rc = etch__ui_flame_until(db, 0, -1, -1, &job->stop, f);
      if (!etch__ui_membuf_close(&mb) && !rc) body = etch__ui_membuf_take(&mb, &len);
      etch__ui_membuf_free(&mb);
    }
    etch__db_close(db);
  }
  job->flame = body;
  job->len = len;
  return NULL;
}

void etch__ui_flame_ahead(etch__ui *ui, etch__ui_trace *t) {
  /* Not for a live trace: its database is a file, but no cache of it
   * (live.c) to open a second time, and its tables change at each step. */
  if (t->flame || t->ahead_running || !t->db || !etch__db_is_file(t->db) ||
      t->live)
    return;
  ahead_job *job = etch__calloc(1, sizeof *job);
  if (!job) return;
  atomic_init(&job->stop, false);
  etch__import_opts o = {.all_args = true, .allow_truncated = true};
  bool imported = false;
  if (etch__query_cache_file(t->path, ui->cache_dir, &o, job->path,
                             sizeof job->path, &imported) != ETCH_OK ||
      !job->path[0] || imported) {
    free(job);
    return;
  }
  if (pthread_create(&t->ahead, NULL, ahead_main, job) != 0) {
    free(job);
    return;
  }
  t->ahead_job = job;
  t->ahead_running = true;
}

/* The thread's answer taken (it has ended). */
static void ahead_done(etch__ui_trace *t) {
  t->ahead_running = false;
  ahead_job *job = t->ahead_job;
  t->ahead_job = NULL;
  if (job->flame && !t->flame) {
    t->flame = job->flame;
    t->flame_len = job->len;
  } else {
    free(job->flame);
  }
  free(job);
}

void etch__ui_flame_join(etch__ui_trace *t) {
  if (!t->ahead_running) return;
  pthread_join(t->ahead, NULL);
  ahead_done(t);
}

void etch__ui_flame_stop(etch__ui_trace *t) {
  if (t->ahead_running) atomic_store(&t->ahead_job->stop, true);
}

bool etch__ui_flame_join_within(etch__ui_trace *t, int ms) {
  if (!t->ahead_running) return true;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += ms / 1000;
  until.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  if (pthread_timedjoin_np(t->ahead, NULL, &until) != 0) return false;
  ahead_done(t);
  return true;
}

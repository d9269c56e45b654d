/*
 * cache.c - a trace's tables kept beside it: the first query of a trace
 * writes them into a DuckDB file in a cache directory, the next ones open
 * that file and start at once.
 *
 * The directory: ETCH_CACHE_DIR, else $XDG_CACHE_HOME/etch, else
 * ~/.cache/etch. The file's name is a hash of the trace's key: its size,
 * its modification time (ns) and hashes of its first and last kKeyBytes;
 * the file also holds the key and etch's version (table etch_cache), which
 * are checked when it is opened. So a trace that changed gets a cache of
 * its own (the old one is left, keyed to the old content), a cache written
 * by another version of etch is rebuilt, and a file that is not a usable
 * database (cut short, overwritten) is rebuilt with a warning.
 *
 * A trace still being recorded (its writer holds its lock: buffer/sink.h)
 * is not cached: it is read into memory each time, up to its last whole
 * packet. A trace cut short is cached with what precedes the cut, and the
 * warning is given again on each open; --strict does not use the cache (the
 * command line reads the trace, and fails, instead).
 *
 * A recording etch ui followed (src/ui/live.c) or etch query read on
 * (live_open below) ends with tables that are a cold import's of the
 * finished file: that database is made its cache as it is (adopt), not
 * built again.
 *
 * A cache is written under a temporary name and renamed when complete:
 * another etch never opens half of one, and two that build the same one at
 * once each rename a whole file. Caches are opened read-only.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "base/containers.h"
#include "base/envvars.h"
#include "base/sys.h"
#include "query/query.h"
#include "reader/reader_priv.h"

enum { kKeyBytes = 65536 };

/* What identifies a trace's content, as far as the cache goes. */
typedef struct trace_key {
  uint64_t size;
  int64_t mtime_ns;
  uint64_t head, tail; /* hashes of the first and last kKeyBytes */
} trace_key;

static int key_of(const char *path, trace_key *k, bool *recording) {
  memset(k, 0, sizeof *k);
  int fd = etch__sys_open(path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return etch__error(ETCH_EIO, "%s: %s", path, strerror(errno));
  *recording = etch__file_recording(fd);
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int rc = etch__error(ETCH_EIO, "%s: %s", path, strerror(errno));
    close(fd);
    return rc;
  }
  k->size = (uint64_t)sb.st_size;
  k->mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
  unsigned char *buf = etch__malloc(kKeyBytes);
  if (!buf) {
    close(fd);
    return etch__error(ETCH_ENOMEM, "out of memory");
  }
  for (int part = 0; part < 2; part++) {
    off_t at = part == 0 || sb.st_size <= kKeyBytes
                   ? 0
                   : sb.st_size - kKeyBytes;
    ssize_t n = etch__sys_pread(fd, buf, kKeyBytes, at);
    if (n < 0) { /* a key of nothing would name another cache */
      int rc = etch__error(ETCH_EIO, "%s: %s", path, strerror(errno));
      free(buf);
      close(fd);
      return rc;
    }
    ETCH_DCHECK((size_t)n <= kKeyBytes);
    uint64_t h = etch__hash_bytes(buf, (size_t)n, 0x6574636863616368ull);
    if (part == 0)
      k->head = h;
    else
      k->tail = h;
  }
  free(buf);
  close(fd);
  return ETCH_OK;
}

int etch__cache_dir(char *buf, size_t n) {
  const char *d = etch__env(ETCH_ENV_CACHE_DIR);
  if (d && *d) {
    int k = snprintf(buf, n, "%s", d);
    if (k < 0 || (size_t)k >= n)
      return etch__error(ETCH_EINVAL, "cache directory: path too long");
    return ETCH_OK;
  }
  int rc = etch__xdg_dir("XDG_CACHE_HOME", ".cache", "", "cache directory",
                         buf, n);
  const char *home = etch__getenv("HOME");
  if (rc && (!home || !*home))
    return etch__error(ETCH_EINVAL,
                       "no cache directory: set ETCH_CACHE_DIR or HOME "
                       "(or use --no-cache)");
  return rc;
}

/* The key as text (hashed into the file's name), and as it is stored in
 * the cache and compared: with etch's version. */
static void key_text(const trace_key *k, bool version, char *buf, size_t n) {
  snprintf(buf, n,
           "%" PRIu64 " %" PRId64 " %016" PRIx64 " %016" PRIx64 "%s%s%s",
           k->size, k->mtime_ns, k->head, k->tail, version ? " etch " : "",
           version ? ETCH_VERSION_STRING : "",
           version ? " tables " ETCH__QUERY_SCHEMA_VERSION
                   : "");
}

/* Whether `db` is a cache of the trace with key text `want`. */
static bool cache_matches(etch__db *db, const char *want) {
  etch__res r;
  if (etch__res_query(db, "SELECT key FROM etch_cache", "cache", &r))
    return false;
  bool ok = false;
  if (etch__res_next(&r)) {
    size_t n;
    const char *s = etch__res_str(&r, 0, &n);
    ok = s && n == strlen(want) && !memcmp(s, want, n);
  }
  return !etch__res_close(&r) && ok;
}

/* The cache directory (`cache_dir`, else etch__cache_dir's) into dir[n],
 * made if it is not there. */
static int cache_dir_made(const char *cache_dir, char *dir, size_t n) {
  int rc = cache_dir ? (snprintf(dir, n, "%s", cache_dir) < (int)n
                            ? ETCH_OK
                            : etch__error(ETCH_EINVAL, "cache: path too long"))
                     : etch__cache_dir(dir, n);
  return rc ? rc : etch__mkdirs(dir, "cache directory");
}

/* The mark of a whole cache: its key in table etch_cache (written last,
 * checked at each open); with `checkpoint`, written through to the file
 * before it is renamed into place. */
static int write_key(etch__db *db, const char *key, bool checkpoint) {
  char sql[512];
  snprintf(sql, sizeof sql,
           "CREATE TABLE etch_cache(key VARCHAR); "
           "INSERT INTO etch_cache VALUES ('%s');%s",
           key, checkpoint ? " CHECKPOINT;" : "");
  return etch__db_exec(db, sql);
}

/* Imports the trace into the new file `tmp`; *unwritable when the file
 * could not be made (a cache directory that is not writable). */
static int build(const char *trace, const char *tmp, const char *key,
                 const etch__import_opts *o, bool *unwritable) {
  etch__db *db;
  int rc = etch__db_open(&db, tmp);
  *unwritable = rc != ETCH_OK;
  if (rc) return rc;
  rc = etch__query_import_file(db, NULL, trace, o, NULL);
  if (!rc) rc = write_key(db, key, false);
  int crc = etch__db_close(db);
  if (!rc) rc = crc;
  return rc;
}

/* etch__query_cache_file; with `keep`, a cache found whole is handed on
 * open (read-only) in *keep instead of closed, so that a query opens the
 * database once: an open of DuckDB's file is most of a cached query's
 * time (the catalog, the functions it registers). */
static int cache_file(const char *trace, const char *cache_dir,
                      const etch__import_opts *opts, char *file,
                      size_t nfile, bool *imported, etch__db **keep) {
  file[0] = '\0';
  if (imported) *imported = false;
  etch__import_opts o = opts ? *opts : (etch__import_opts){0};
  o.all_args = true;
  char dir[4096];
  int rc = cache_dir_made(cache_dir, dir, sizeof dir);
  if (rc) {
    if (!o.quiet)
      fprintf(stderr, "etch: warning: no cache (%s): the trace is read "
                      "into memory\n", etch_last_error());
    return ETCH_OK;
  }
  trace_key k;
  bool recording = false;
  rc = key_of(trace, &k, &recording);
  if (rc) return rc;
  /* A trace still being recorded changes at every write: a cache of it
   * would be one more stale file per query. It is read into memory, up
   * to its last whole packet (the reader says so). */
  if (recording) return ETCH_OK;
  char key[256], name[256];
  key_text(&k, true, key, sizeof key);
  key_text(&k, false, name, sizeof name);
  uint64_t h = etch__hash_bytes(name, strlen(name), 0);
  char tmp[4300];
  if ((size_t)snprintf(file, nfile, "%s/%016" PRIx64 ".duckdb", dir, h) >=
      nfile) {
    file[0] = '\0';
    return etch__error(ETCH_EINVAL, "cache: path too long");
  }
  /* Two threads of a process may build the same cache (etch diff of two
   * copies of one trace): a name of each thread's own. */
  snprintf(tmp, sizeof tmp, "%s.tmp%ld.%ld", file, (long)getpid(),
           (long)etch__gettid());

  if (access(file, F_OK) == 0) {
    etch__db *db = NULL;
    int st = etch__db_open_existing(&db, file, true);
    if (st == ETCH_ENOMEM) { /* the cache may be fine: it stays */
      file[0] = '\0';
      return st;
    }
    if (st != ETCH_OK) {
      /* Not a database, or not one with the tables: say so. */
      fprintf(stderr,
              "etch: warning: the cache of %s is unusable (%s); it is "
              "rebuilt\n",
              trace, etch_last_error());
    } else if (cache_matches(db, key)) {
      /* A trace cut short says so every time, as its first read did. */
      etch__res r;
      if (!etch__res_query(db,
                           "SELECT value FROM stats "
                           "WHERE name = 'trace_truncated_bytes'",
                           "cache", &r)) {
        int64_t cut = etch__res_next(&r) ? etch__res_i64(&r, 0) : 0;
        if (cut > 0 && (uint64_t)cut <= k.size && !o.quiet)
          etch__query_warn_cut_short(trace, (uint64_t)cut,
                                     k.size - (uint64_t)cut);
        etch__res_close(&r);
      }
      /* So do malformed packets left out. */
      if (!etch__res_query(db,
                           "SELECT value FROM stats "
                           "WHERE name = 'malformed_packets'",
                           "cache", &r)) {
        int64_t bad = etch__res_next(&r) ? etch__res_i64(&r, 0) : 0;
        if (bad > 0 && !o.quiet)
          etch__query_warn_malformed(trace, (uint64_t)bad, NULL);
        etch__res_close(&r);
      }
      if (keep)
        *keep = db;
      else
        etch__db_close(db);
      return ETCH_OK;
    }
    /* Another version of etch wrote it (or another trace hashed to the
     * same name): rebuilt quietly. */
    etch__db_close(db);
    etch__sys_unlink(file);
  }
  bool unwritable;
  rc = build(trace, tmp, key, &o, &unwritable);
  if (rc && unwritable) {
    if (!o.quiet)
      fprintf(stderr, "etch: warning: no cache (%s): the trace is read "
                      "into memory\n", etch_last_error());
    file[0] = '\0';
    return ETCH_OK;
  }
  if (!rc && etch__sys_rename(tmp, file) != 0)
    rc = etch__error(ETCH_EIO, "cache %s: %s", file, strerror(errno));
  if (rc) {
    int code = rc;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", etch_last_error());
    unlink(tmp);
    char wal[4400];
    snprintf(wal, sizeof wal, "%s.wal", tmp);
    unlink(wal);
    file[0] = '\0';
    return etch__error(code, "%s", msg);
  }
  if (imported) *imported = true;
  return ETCH_OK;
}

/* ---- a trace being recorded: read on from one query to the next ---------------- */

enum { kHeadBytes = 4096, kTailBytes = 1024 };

/* A hash of bytes [at, at + n) of `fd`; false when they are not all there. */
static bool hash_range(int fd, uint64_t at, size_t n, uint64_t *h) {
  unsigned char buf[kHeadBytes];
  if (n > sizeof buf) return false;
  ssize_t got = n ? etch__sys_pread(fd, buf, n, (off_t)at) : 0;
  if (got < 0 || (size_t)got != n) return false;
  *h = etch__hash_bytes(buf, n, 0x6574636863616368ull);
  return true;
}

/* What the cache of a recording keeps beside the tables (table
 * etch_live): etch's version, the trace's first bytes' hash, where the
 * last import read from and to and the hash of the bytes before `to`, and
 * the live import's state (hex; NULL once the recording has ended). */
typedef struct live_row {
  char key[160];
  uint64_t head_len, head, from, to, tail;
  char *state; /* malloc'd hex, or NULL */
} live_row;

static void live_key(char *buf, size_t n) {
  snprintf(buf, n, "etch %s tables %s live 1", ETCH_VERSION_STRING,
           ETCH__QUERY_SCHEMA_VERSION);
}

static bool live_row_read(etch__db *db, live_row *row) {
  memset(row, 0, sizeof *row);
  etch__res r;
  if (etch__res_query(db,
                      "SELECT key, head_len, CAST(head AS VARCHAR), read_from, "
                      "read_to, CAST(tail AS VARCHAR), state FROM etch_live",
                      "cache", &r))
    return false;
  bool ok = false;
  if (etch__res_next(&r)) {
    size_t n;
    const char *k = etch__res_str(&r, 0, &n);
    if (k && n < sizeof row->key) {
      memcpy(row->key, k, n);
      row->key[n] = '\0';
      row->head_len = (uint64_t)etch__res_i64(&r, 1);
      char *h = etch__res_strdup(&r, 2), *t = etch__res_strdup(&r, 5);
      row->head = h ? strtoull(h, NULL, 10) : 0;
      row->tail = t ? strtoull(t, NULL, 10) : 0;
      free(h);
      free(t);
      row->from = (uint64_t)etch__res_i64(&r, 3);
      row->to = (uint64_t)etch__res_i64(&r, 4);
      row->state = etch__res_strdup(&r, 6);
      ok = true;
    }
  }
  if (etch__res_close(&r)) ok = false;
  return ok;
}

/* The state's bytes from hex; false for anything but pairs of hex digits. */
static bool unhex(const char *hex, etch_vec *out) {
  size_t n = strlen(hex);
  if (n % 2 || etch__vec_reserve(out, n / 2 + 1)) return false;
  for (size_t i = 0; i < n; i += 2) {
    int v = 0;
    for (int j = 0; j < 2; j++) {
      char c = hex[i + j];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                     : -1;
      if (d < 0) return false;
      v = v * 16 + d;
    }
    out->data[out->len++] = (uint8_t)v;
  }
  return true;
}

/* etch_live written again: the last import's bytes, and `state` (NULL:
 * none, the recording has ended). */
static int live_row_write(etch__db *db, const live_row *row,
                          const etch_vec *state) {
  etch_vec sql = {0};
  FILE *f = etch__vec_file(&sql);
  if (!f) return etch__error(ETCH_ENOMEM, "out of memory");
  fprintf(f,
          "DELETE FROM etch_live; INSERT INTO etch_live VALUES ('%s', %" PRIu64
          ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", ",
          row->key, row->head_len, row->head, row->from, row->to, row->tail);
  if (state) {
    fputc('\'', f);
    for (size_t i = 0; i < state->len; i++)
      fprintf(f, "%02x", state->data[i]);
    fputs("');", f);
  } else {
    fputs("NULL);", f);
  }
  int rc = fclose(f) == 0 ? etch__vec_cstr(&sql)
                          : etch__error(ETCH_ENOMEM, "out of memory");
  if (!rc) rc = etch__db_exec(db, (const char *)sql.data);
  etch__vec_free(&sql);
  return rc;
}

static void unlink_db(const char *file) {
  char wal[4400];
  unlink(file);
  snprintf(wal, sizeof wal, "%s.wal", file);
  unlink(wal);
}

/* Whether the cache `db` of the recording open as `fd` (`size` bytes) is
 * of these bytes, as they were read: its state restored into *l then. */
static bool live_resume(etch__db *db, const char *trace, int fd,
                        uint64_t size, const etch__import_opts *o,
                        live_row *row, etch__import_live **l) {
  *l = NULL;
  char want[160];
  live_key(want, sizeof want);
  uint64_t h;
  if (!live_row_read(db, row) || strcmp(row->key, want) || !row->state)
    return false;
  if (row->head_len > size || row->to > size ||
      !hash_range(fd, 0, (size_t)row->head_len, &h) || h != row->head) {
    if (!o->quiet)
      fprintf(stderr, "etch: note: %s was replaced or cut shorter since "
                      "its cache was written: it is read again\n", trace);
    return false;
  }
  uint64_t tail_at = row->to > kTailBytes ? row->to - kTailBytes : 0;
  if (!hash_range(fd, tail_at, (size_t)(row->to - tail_at), &h) ||
      h != row->tail) {
    if (!o->quiet)
      fprintf(stderr, "etch: note: %s changed in what was already read: "
                      "it is read again\n", trace);
    return false;
  }
  etch_vec bytes = {0};
  int rc = unhex(row->state, &bytes)
               ? etch__import_live_restore(l, db, trace, o, bytes.data,
                                           bytes.len)
               : etch__error(ETCH_EFORMAT, "not hex");
  etch__vec_free(&bytes);
  if (rc && !o->quiet)
    fprintf(stderr, "etch: note: the cache of %s is unusable (%s): it is "
                    "read again\n", trace, etch_last_error());
  return !rc;
}

/*
 * `db` (the file `db_file`, the tables of the whole of `trace`) made the
 * trace's ordinary cache in `dir`: its key written into it, closed and
 * renamed to the cache's name (into `final`). With `expect` (size,
 * mtime_ns): ETCH_ESTATE, nothing written, unless the trace is still
 * that and no longer recorded. `db` is closed in every case.
 */
static int adopt(etch__db *db, const char *db_file, const char *trace,
                 const char *dir, const int64_t *expect, char *final,
                 size_t nfinal) {
  trace_key k = {0};
  bool rec = false;
  char key[256], name[256];
  final[0] = '\0';
  int rc = key_of(trace, &k, &rec);
  if (!rc && expect &&
      (rec || k.size != (uint64_t)expect[0] || k.mtime_ns != expect[1]))
    rc = etch__error(ETCH_ESTATE, "%s: changed since it was read", trace);
  key_text(&k, true, key, sizeof key);
  key_text(&k, false, name, sizeof name);
  if (!rc && (size_t)snprintf(final, nfinal, "%s/%016" PRIx64 ".duckdb", dir,
                              etch__hash_bytes(name, strlen(name), 0)) >=
                 nfinal)
    rc = etch__error(ETCH_EINVAL, "cache: path too long");
  if (!rc) rc = write_key(db, key, true);
  int crc = etch__db_close(db);
  if (!rc) rc = crc;
  /* Over a cache another etch built meanwhile: the same tables. */
  if (!rc && etch__sys_rename(db_file, final) != 0)
    rc = etch__error(ETCH_EIO, "cache %s: %s", final, strerror(errno));
  if (rc) final[0] = '\0';
  return rc;
}

int etch__query_cache_adopt(etch__db *db, const char *db_file,
                            const char *trace, const char *cache_dir,
                            int64_t size, int64_t mtime_ns, char *file,
                            size_t nfile) {
  char dir[4096];
  int rc = cache_dir_made(cache_dir, dir, sizeof dir);
  if (rc) {
    file[0] = '\0';
    etch__db_close(db);
    return rc;
  }
  int64_t expect[2] = {size, mtime_ns};
  return adopt(db, db_file, trace, dir, expect, file, nfile);
}

/*
 * The cache of a recording: `file` (dir/live-HASH.duckdb, HASH of the
 * trace's device and inode), under the lock of file.lock. Its state is
 * restored and what was appended since is read on; or the trace is read
 * whole into a new one. Then: still recording, *out is it, open, the lock
 * held until it is closed; ended, it becomes the trace's ordinary cache
 * (*done, *out NULL: the caller opens that).
 */
static int live_open(const char *trace, const char *dir,
                     const etch__import_opts *opts, etch__db **out) {
  *out = NULL;
  etch__import_opts o = *opts;
  o.all_args = true;
  o.progress = false;
  int fd = etch__sys_open(trace, O_RDONLY | O_CLOEXEC, 0);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) {
    int rc = etch__error(ETCH_EIO, "%s: %s", trace, strerror(errno));
    if (fd >= 0) close(fd);
    return rc;
  }
  char id[64], file[4200], lock[4300];
  snprintf(id, sizeof id, "%" PRIu64 " %" PRIu64, (uint64_t)sb.st_dev,
           (uint64_t)sb.st_ino);
  snprintf(file, sizeof file, "%s/live-%016" PRIx64 ".duckdb", dir,
           etch__hash_bytes(id, strlen(id), 0));
  snprintf(lock, sizeof lock, "%s.lock", file);
  if (!etch__file_recording(fd) && access(file, F_OK) != 0) {
    close(fd); /* not a recording, nor one that just ended */
    return ETCH_OK;
  }
  int lk = etch__sys_open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  /* Two queries at once: the second waits for the first to be done. */
  if (lk < 0 || flock(lk, LOCK_EX) != 0) {
    int rc = etch__error(ETCH_EIO, "%s: %s", lock, strerror(errno));
    if (lk >= 0) close(lk);
    close(fd);
    return rc;
  }
  bool recording = etch__file_recording(fd);
  if (fstat(fd, &sb) != 0) recording = false;
  uint64_t size = (uint64_t)sb.st_size;
  etch__db *db = NULL;
  etch__import_live *l = NULL;
  live_row row = {0};
  int rc = ETCH_OK;
  bool have = access(file, F_OK) == 0;
  if (!recording && !have) { /* ended, and another query made its cache */
    close(lk);
    close(fd);
    return ETCH_OK;
  }
  if (have && etch__db_open_existing(&db, file, false) == ETCH_OK &&
      live_resume(db, trace, fd, size, &o, &row, &l)) {
    row.from = row.to; /* this import reads on from there */
    uint64_t restarts = etch__import_live_restarts(l);
    rc = etch__db_exec(db, "DELETE FROM etch_live;");
    if (!rc) rc = etch__import_live_step(l, NULL);
    if (etch__import_live_restarts(l) != restarts) row.from = 0;
  } else {
    etch__db_close(db);
    db = NULL;
    unlink_db(file);
    row.from = 0;
    rc = etch__db_open(&db, file);
    if (!rc) rc = etch__db_exec(db, "CREATE TABLE etch_live(key VARCHAR, "
                                    "head_len BIGINT, head UBIGINT, "
                                    "read_from BIGINT, read_to BIGINT, "
                                    "tail UBIGINT, state VARCHAR);");
    if (!rc) rc = etch__import_live_open(&l, db, trace, &o);
  }
  free(row.state);
  row.state = NULL;
  bool still = false;
  if (!rc) {
    still = etch__import_live_recording(l);
    uint64_t to = etch__import_live_offset(l);
    uint64_t tail_at = to > kTailBytes ? to - kTailBytes : 0;
    live_key(row.key, sizeof row.key);
    row.from = row.from <= to ? row.from : 0;
    row.head_len = to < kHeadBytes ? to : kHeadBytes;
    if (!hash_range(fd, 0, (size_t)row.head_len, &row.head) ||
        !hash_range(fd, tail_at, (size_t)(to - tail_at), &row.tail))
      rc = etch__error(ETCH_EIO, "%s: cannot read", trace);
    row.to = to;
  }
  if (!rc && still) {
    etch_vec state = {0};
    int src = etch__import_live_save(l, &state);
    if (src == ETCH_EUNSUPPORTED) {
      /* Not saved: the next query reads the trace again. */
      rc = live_row_write(db, &row, NULL);
    } else {
      rc = src;
      if (!rc) rc = live_row_write(db, &row, &state);
    }
    etch__vec_free(&state);
  } else if (!rc) {
    /* Ended: the trace's ordinary cache, which the caller opens. */
    char final[4200];
    rc = live_row_write(db, &row, NULL);
    etch__import_live_close(l);
    l = NULL;
    if (!rc) {
      rc = adopt(db, file, trace, dir, NULL, final, sizeof final);
    } else {
      etch__db_close(db);
    }
    db = NULL;
    if (rc) unlink_db(file);
    /* The lock goes too, taken away while held: a query waiting on it
     * finds, once it has it, no recording and no recording's cache, and
     * so does one that makes the file anew. */
    unlink(lock);
  }
  etch__import_live_close(l);
  close(fd);
  if (rc || !still) {
    etch__db_close(db);
    close(lk);
    return rc;
  }
  etch__db_hold_fd(db, lk);
  *out = db;
  return ETCH_OK;
}

int etch__query_cache_file(const char *trace, const char *cache_dir,
                           const etch__import_opts *opts, char *file,
                           size_t nfile, bool *imported) {
  return cache_file(trace, cache_dir, opts, file, nfile, imported, NULL);
}

int etch__query_open_cached(const char *trace, const char *cache_dir,
                            const etch__import_opts *opts, etch__db **out,
                            bool *imported) {
  *out = NULL;
  char file[4200];
  if (opts && opts->read_on) {
    char dir[4096];
    int drc = cache_dir_made(cache_dir, dir, sizeof dir);
    if (!drc) {
      int rc = live_open(trace, dir, opts, out);
      if (imported) *imported = *out != NULL;
      if (rc || *out) return rc;
    }
  }
  int rc = cache_file(trace, cache_dir, opts, file, sizeof file, imported,
                      out);
  if (rc) return rc;
  if (*out) return ETCH_OK; /* the cache, found whole and kept open */
  if (file[0]) return etch__db_open_existing(out, file, true);
  /* No cache to be had: the trace is read into memory. */
  if (imported) *imported = true;
  etch__import_opts o = opts ? *opts : (etch__import_opts){0};
  o.all_args = true;
  rc = etch__db_open(out, NULL);
  if (!rc) rc = etch__query_import_file(*out, NULL, trace, &o, NULL);
  if (rc) {
    etch__db_close(*out);
    *out = NULL;
  }
  return rc;
}

/*
 * store.c - the trace store (store.h): its directory, names, listing with
 * cached metadata, removal.
 *
 * A trace's metadata file, DIR/.meta/NAME, is text, a key and its value a
 * line:
 *
 *   etch-store-meta 1
 *   size 51234
 *   mtime_ns 1795748100123456789
 *   start 4158694452030            (or: error corrupt trace: offset ...)
 *   end 4158695795229
 *   wall 1795748099000000000 1     (the flag: from the trace's clocks)
 *   events 9
 *   slices 4
 *   processes 1
 *   threads 2
 *   loss misplaced_end_event 1     (one line per loss stat)
 *
 * It is used only while the trace's size and mtime are those it names.
 * Anything else in it (another version, a line that does not parse, a
 * file cut short) makes it unusable, and the trace is read again: the
 * file is hostile as any input is.
 */
#define _GNU_SOURCE
#include "ui/store.h"
#include "ui/str.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "base/envvars.h"
#include "base/sys.h"
#include "query/query.h"
#include "reader/reader_priv.h"

#define META_DIR ".meta"
#define META_MAGIC "etch-store-meta 1"
/* A metadata file is a few hundred bytes; a larger one is not ours. */
#define META_MAX (64 * 1024)
#define NAME_MAX_LEN 255
#define PROGRAM_MAX_LEN 64

/* ---- directory and names ------------------------------------------------------- */

int etch__store_dir(char *buf, size_t n) {
  const char *d = etch__env(ETCH_ENV_STORE);
  if (d && *d) {
    int k = snprintf(buf, n, "%s", d);
    if (k < 0 || (size_t)k >= n)
      return etch__error(ETCH_EINVAL, "trace store: path too long");
    return ETCH_OK;
  }
  int rc = etch__xdg_dir("XDG_DATA_HOME", ".local/share", "/traces",
                         "trace store", buf, n);
  const char *home = etch__getenv("HOME");
  if (rc && (!home || !*home))
    return etch__error(ETCH_EINVAL, "no trace store: set ETCH_STORE or HOME");
  return rc;
}

bool etch__store_name_ok(const char *name) {
  size_t n = strlen(name);
  if (n == 0 || n > NAME_MAX_LEN || name[0] == '.') return false;
  if (strstr(name, "..")) return false;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++)
    if (*p == '/' || *p < 0x20 || *p == 0x7f) return false;
  return true;
}

int etch__store_path(const char *dir, const char *name, char *buf, size_t n) {
  if (!etch__store_name_ok(name))
    return etch__error(ETCH_EINVAL, "'%s' is not the name of a trace in the "
                                    "store", name);
  int k = snprintf(buf, n, "%s/%s", dir, name);
  if (k < 0 || (size_t)k >= n)
    return etch__error(ETCH_EINVAL, "trace store: path too long");
  return ETCH_OK;
}

/* The metadata file of `name`. */
static int meta_path(const char *dir, const char *name, char *buf, size_t n) {
  int k = snprintf(buf, n, "%s/" META_DIR "/%s", dir, name);
  if (k < 0 || (size_t)k >= n)
    return etch__error(ETCH_EINVAL, "trace store: path too long");
  return ETCH_OK;
}

int etch__store_new_path(const char *dir, const char *program, int64_t when,
                         char *buf, size_t n) {
  int rc = etch__mkdirs(dir, "trace store");
  if (rc) return rc;
  char prog[PROGRAM_MAX_LEN + 1];
  const char *base = program ? strrchr(program, '/') : NULL;
  base = base ? base + 1 : program;
  if (!base || !*base) base = "trace";
  size_t k = 0;
  for (; base[k] && k < PROGRAM_MAX_LEN; k++) {
    char c = base[k];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '+' ||
              c == '.';
    prog[k] = ok ? c : '_';
  }
  prog[k] = '\0';
  /* No ".." may come of it (a program called "..x"), nor with the
   * extension (one ending with '.'). */
  for (char *p = prog; (p = strstr(p, ".."));) *p = '_';
  if (k && prog[k - 1] == '.') prog[k - 1] = '_';
  time_t t = (time_t)when;
  struct tm tm;
  if (!localtime_r(&t, &tm)) memset(&tm, 0, sizeof tm);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  for (unsigned i = 1; i < 1000; i++) {
    char suffix[16] = "";
    if (i > 1) snprintf(suffix, sizeof suffix, "-%u", i);
    int w = snprintf(buf, n, "%s/%s-%s%s.pftrace", dir, stamp, prog, suffix);
    if (w < 0 || (size_t)w >= n)
      return etch__error(ETCH_EINVAL, "trace store: path too long");
    if (!etch__store_name_ok(buf + strlen(dir) + 1))
      return etch__error(ETCH_EINVAL, "trace store: bad name %s", buf);
    struct stat sb;
    if (lstat(buf, &sb) != 0 && errno == ENOENT) return ETCH_OK;
  }
  return etch__error(ETCH_EIO, "trace store %s: no free name for %s-%s",
                     dir, stamp, prog);
}

/* ---- entries -------------------------------------------------------------------------- */

void etch__store_entry_free(etch__store_entry *e) {
  if (!e) return;
  free(e->name);
  free(e->error);
  for (size_t i = 0; i < e->nloss; i++) free(e->loss[i].name);
  etch__vec_free(&e->losses);
  memset(e, 0, sizeof *e);
}

/* Adds loss stat `name` (its first len bytes) = value to e's list. */
static int add_loss(etch__store_entry *e, const char *name, size_t len,
                    int64_t value) {
  char *copy = etch__strndup(name, len);
  if (!copy ||
      ETCH_VEC_PUSH(&e->losses, etch__store_loss, {copy, value})) {
    free(copy);
    return ETCH_ENOMEM;
  }
  e->loss = ETCH_VEC_AT(&e->losses, etch__store_loss);
  e->nloss++;
  return ETCH_OK;
}

void etch__store_list_free(etch__store_list *l) {
  for (size_t i = 0; i < l->n; i++) etch__store_entry_free(&l->e[i]);
  free(l->e);
  memset(l, 0, sizeof *l);
}

int64_t etch__store_entry_dur(const etch__store_entry *e) {
  if (e->error || e->start > e->end) return 0;
  return etch__sat_sub(e->end, e->start);
}

static int64_t sat_add(int64_t a, int64_t b) {
  int64_t s;
  if (!__builtin_add_overflow(a, b, &s)) return s;
  return b > 0 ? INT64_MAX : INT64_MIN;
}

/* The wall-clock start when the trace's clocks do not give it. */
static void wall_from_mtime(etch__store_entry *e) {
  e->wall_from_trace = false;
  e->wall_start_ns = etch__sat_sub(e->mtime_ns, etch__store_entry_dur(e));
}

/* Sets e->error to a copy of `msg` with control characters made blanks
 * (it is one line of the metadata file and of `etch ls`). */
static int set_error(etch__store_entry *e, const char *msg) {
  free(e->error);
  e->error = etch__strdup(msg && *msg ? msg : "unreadable");
  if (!e->error) return ETCH_ENOMEM;
  for (char *p = e->error; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = ' ';
  return ETCH_OK;
}

/* The reader's message for trace `path` as `etch ls` shows it: without
 * the path, a corrupt trace called so (as the etch command says it). */
static int set_read_error(etch__store_entry *e, const char *path, int st) {
  const char *msg = etch_last_error();
  size_t n = strlen(path);
  if (!strncmp(msg, path, n) && !strncmp(msg + n, ": ", 2)) msg += n + 2;
  if ((st == ETCH_EFORMAT || st == ETCH_ETRUNC) &&
      !strncmp(msg, "offset ", 7) &&
      !strstr(msg, "not a Perfetto protobuf trace")) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s: %s",
             st == ETCH_EFORMAT ? "corrupt trace" : "corrupt trace, or cut "
                                                    "short",
             msg);
    return set_error(e, buf);
  }
  return set_error(e, msg);
}

/* Reads the trace at `path` into `e` (name, size, mtime set). Only running
 * out of memory fails: an unreadable trace is an entry with an error. */
static int compute(etch__store_entry *e, const char *path) {
  etch__stats_data d;
  bool has_rt;
  int64_t off;
  int st = etch__query_summary_file(path, &d, &has_rt, &off);
  if (st == ETCH_ENOMEM) return st;
  if (st) return set_read_error(e, path, st);
  e->start = d.start;
  e->end = d.end;
  e->events = d.events;
  e->slices = d.slices;
  e->processes = d.processes;
  e->threads = d.threads;
  int rc = ETCH_OK;
  for (size_t i = 0; !rc && i < d.nloss; i++) {
    const char *name = d.loss[i].name ? d.loss[i].name : "?";
    rc = add_loss(e, name, strlen(name), d.loss[i].value);
  }
  etch__stats_data_free(&d);
  if (has_rt && e->start <= e->end) {
    e->wall_from_trace = true;
    e->wall_start_ns = sat_add(e->start, off);
  } else {
    wall_from_mtime(e);
  }
  return rc;
}

/* ---- the metadata file ---------------------------------------------------------------- */

/* A loss stat's name as the metadata file may hold it. */
static bool loss_name_ok(const char *s, size_t n) {
  if (n == 0 || n > 128) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '.'))
      return false;
  }
  return true;
}

static bool parse_i64(const char *s, int64_t *out) {
  if (!*s) return false;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end) return false;
  *out = (int64_t)v;
  return true;
}

/*
 * Fills `e` from metadata text `buf` (NUL-terminated) if it is whole and
 * names size `size` and mtime `mtime_ns`; false otherwise (e then holds
 * what was parsed, to free).
 */
bool etch__store_meta_parse(char *buf, int64_t size, int64_t mtime_ns,
                            etch__store_entry *e) {
  enum { K_SIZE = 1, K_MTIME = 2, K_START = 4, K_END = 8, K_WALL = 16,
         K_EVENTS = 32, K_SLICES = 64, K_PROCS = 128, K_THREADS = 256,
         K_ERROR = 512 };
  unsigned seen = 0;
  char *save = NULL;
  char *line = strtok_r(buf, "\n", &save);
  if (!line || strcmp(line, META_MAGIC) != 0) return false;
  while ((line = strtok_r(NULL, "\n", &save))) {
    char *sp = strchr(line, ' ');
    if (!sp) return false;
    *sp = '\0';
    const char *key = line, *val = sp + 1;
    int64_t v;
    unsigned bit = 0;
    int64_t *dst = NULL;
    if (!strcmp(key, "size")) bit = K_SIZE, dst = &e->size;
    else if (!strcmp(key, "mtime_ns")) bit = K_MTIME, dst = &e->mtime_ns;
    else if (!strcmp(key, "start")) bit = K_START, dst = &e->start;
    else if (!strcmp(key, "end")) bit = K_END, dst = &e->end;
    else if (!strcmp(key, "events")) bit = K_EVENTS, dst = &e->events;
    else if (!strcmp(key, "slices")) bit = K_SLICES, dst = &e->slices;
    else if (!strcmp(key, "processes")) bit = K_PROCS, dst = &e->processes;
    else if (!strcmp(key, "threads")) bit = K_THREADS, dst = &e->threads;
    if (dst) {
      if ((seen & bit) || !parse_i64(val, &v)) return false;
      *dst = v;
      seen |= bit;
      continue;
    }
    if (!strcmp(key, "error")) {
      if ((seen & K_ERROR) || !*val) return false;
      if (set_error(e, val)) return false;
      seen |= K_ERROR;
    } else if (!strcmp(key, "wall")) {
      const char *flag = strrchr(val, ' ');
      if ((seen & K_WALL) || !flag || (strcmp(flag, " 0") && strcmp(flag, " 1")))
        return false;
      char num[32];
      size_t len = (size_t)(flag - val);
      if (len >= sizeof num) return false;
      memcpy(num, val, len);
      num[len] = '\0';
      if (!parse_i64(num, &e->wall_start_ns)) return false;
      e->wall_from_trace = flag[1] == '1';
      seen |= K_WALL;
    } else if (!strcmp(key, "loss")) {
      const char *vs = strchr(val, ' ');
      if (!vs || !loss_name_ok(val, (size_t)(vs - val)) ||
          !parse_i64(vs + 1, &v) || e->nloss >= 4096)
        return false;
      if (add_loss(e, val, (size_t)(vs - val), v)) return false;
    } else {
      return false;
    }
  }
  const unsigned counts = K_START | K_END | K_WALL | K_EVENTS | K_SLICES |
                          K_PROCS | K_THREADS;
  if (!(seen & K_SIZE) || !(seen & K_MTIME)) return false;
  if (e->size != size || e->mtime_ns != mtime_ns) return false;
  if (seen & K_ERROR) return (seen & counts) == 0 && e->nloss == 0;
  return (seen & counts) == counts;
}

/* The cached metadata in file `path`, if usable for the trace as it is
 * now. */
static bool meta_read(const char *path, int64_t size, int64_t mtime_ns,
                      etch__store_entry *e) {
  int fd =
      etch__sys_open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0);
  if (fd < 0) return false;
  struct stat sb;
  char *buf = NULL;
  bool ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
            sb.st_size > 0 && sb.st_size < META_MAX &&
            (buf = etch__malloc((size_t)sb.st_size + 1)) != NULL;
  if (ok) {
    size_t got = 0, want = (size_t)sb.st_size;
    while (got < want) {
      ssize_t r = etch__sys_read(fd, buf + got, want - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += (size_t)r;
    }
    buf[got] = '\0';
    ok = got == want && strlen(buf) == got &&
         etch__store_meta_parse(buf, size, mtime_ns, e);
  }
  free(buf);
  close(fd);
  return ok;
}

/* Caches `e`'s metadata; a store where it cannot be written (read-only)
 * just goes without. Written under a temporary name and renamed, so that
 * a reader never sees half of it. */
static void meta_write(const char *path, const etch__store_entry *e) {
  char mdir[4200], tmp[4400];
  const char *slash = strrchr(path, '/');
  if (!slash || (size_t)(slash - path) >= sizeof mdir) return;
  memcpy(mdir, path, (size_t)(slash - path));
  mdir[slash - path] = '\0';
  if (etch__sys_mkdir(mdir, 0755) != 0 && errno != EEXIST) return;
  int k = snprintf(tmp, sizeof tmp, "%s/.%ld.tmp", mdir, (long)getpid());
  if (k < 0 || (size_t)k >= sizeof tmp) return;
  int fd = etch__sys_open(
      tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return;
  FILE *f = fdopen(fd, "w");
  if (!f) {
    close(fd);
    unlink(tmp);
    return;
  }
  fprintf(f, META_MAGIC "\nsize %" PRId64 "\nmtime_ns %" PRId64 "\n", e->size,
          e->mtime_ns);
  if (e->error) {
    fprintf(f, "error %s\n", e->error);
  } else {
    fprintf(f,
            "start %" PRId64 "\nend %" PRId64 "\nwall %" PRId64 " %d\n"
            "events %" PRId64 "\nslices %" PRId64 "\nprocesses %" PRId64
            "\nthreads %" PRId64 "\n",
            e->start, e->end, e->wall_start_ns, e->wall_from_trace ? 1 : 0,
            e->events, e->slices, e->processes, e->threads);
    for (size_t i = 0; i < e->nloss; i++)
      if (loss_name_ok(e->loss[i].name, strlen(e->loss[i].name)))
        fprintf(f, "loss %s %" PRId64 "\n", e->loss[i].name, e->loss[i].value);
  }
  bool ok = !ferror(f);
  if (fclose(f) != 0) ok = false;
  if (!ok || etch__sys_rename(tmp, path) != 0) unlink(tmp);
}

static int64_t mtime_of(const struct stat *sb) {
  return (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
}

/* Whether the trace at `path` is being recorded (its writer's lock). */
static bool being_recorded(const char *path) {
  int fd = etch__sys_open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
  if (fd < 0) return false;
  bool rec = etch__file_recording(fd);
  close(fd);
  return rec;
}

/*
 * The entry of `name` (a store name) in `dir`: from its metadata file when
 * that fits the trace as it is, else read (and cached). *computed says
 * which. ETCH_ENOTFOUND: no such file.
 */
/* The entry of the trace file `path` named `name`, its metadata cached in
 * the file `meta` ("": not cached); `dir`: the store, for messages. */
static int file_entry_get(const char *path, const char *meta,
                          const char *name, const char *dir,
                          etch__store_entry *e, bool *computed) {
  memset(e, 0, sizeof *e);
  *computed = false;
  int rc;
  struct stat lsb, sb;
  if (lstat(path, &lsb) != 0)
    return errno == ENOENT
               ? (dir ? etch__error(ETCH_ENOTFOUND,
                                    "no trace '%s' in the store %s", name, dir)
                      : etch__error(ETCH_ENOTFOUND, "no trace %s", path))
               : etch__error(ETCH_EIO, "%s: %s", path, strerror(errno));
  if (S_ISDIR(lsb.st_mode))
    return dir ? etch__error(ETCH_ENOTFOUND,
                             "'%s' in the store %s is a directory", name, dir)
               : etch__error(ETCH_ENOTFOUND, "%s is a directory", path);
  e->name = etch__strdup(name);
  if (!e->name) return ETCH_ENOMEM;
  /* A symbolic link is listed as what it points to. */
  if (stat(path, &sb) != 0) {
    e->mtime_ns = mtime_of(&lsb);
    e->wall_start_ns = e->mtime_ns;
    char msg[256];
    snprintf(msg, sizeof msg, "missing: %s", strerror(errno));
    return set_error(e, msg);
  }
  e->size = (int64_t)sb.st_size;
  e->mtime_ns = mtime_of(&sb);
  if (!S_ISREG(sb.st_mode)) {
    e->wall_start_ns = e->mtime_ns;
    return set_error(e, "not a regular file");
  }
  /* Being recorded: read as far as it is written, at every listing. */
  if (being_recorded(path)) {
    e->recording = true;
    *computed = true;
    rc = compute(e, path);
    if (!rc && e->error) e->wall_start_ns = e->mtime_ns;
    return rc;
  }
  if (*meta && meta_read(meta, e->size, e->mtime_ns, e)) {
    if (e->error) e->wall_start_ns = e->mtime_ns;
    return ETCH_OK;
  }
  /* Unusable metadata: start again from the file. */
  etch__store_entry_free(e);
  e->name = etch__strdup(name);
  if (!e->name) return ETCH_ENOMEM;
  e->size = (int64_t)sb.st_size;
  e->mtime_ns = mtime_of(&sb);
  *computed = true;
  rc = compute(e, path);
  if (rc) return rc;
  if (e->error) e->wall_start_ns = e->mtime_ns;
  /* Cached only if the trace did not change while it was read (one being
   * written now is read again next time). */
  struct stat after;
  if (stat(path, &after) == 0 && (int64_t)after.st_size == e->size &&
      mtime_of(&after) == e->mtime_ns && *meta)
    meta_write(meta, e);
  return ETCH_OK;
}

static int entry_get(const char *dir, const char *name,
                     etch__store_entry *e, bool *computed) {
  memset(e, 0, sizeof *e);
  *computed = false;
  char path[4352], meta[4352];
  int rc = etch__store_path(dir, name, path, sizeof path);
  if (!rc) rc = meta_path(dir, name, meta, sizeof meta);
  if (rc) return rc;
  return file_entry_get(path, meta, name, dir, e, computed);
}

int etch__store_file_entry(const char *path, const char *meta,
                           const char *name, etch__store_entry *out) {
  bool computed;
  int rc = file_entry_get(path, meta ? meta : "", name, NULL, out, &computed);
  if (rc) etch__store_entry_free(out);
  return rc;
}

int etch__store_entry_get(const char *dir, const char *name,
                          etch__store_entry *out) {
  bool computed;
  int rc = entry_get(dir, name, out, &computed);
  if (rc) etch__store_entry_free(out);
  return rc;
}

/* Newest first: wall-clock start, then name, descending. */
static int cmp_entry(const void *x, const void *y) {
  const etch__store_entry *a = x, *b = y;
  if (a->wall_start_ns != b->wall_start_ns)
    return a->wall_start_ns < b->wall_start_ns ? 1 : -1;
  return -strcmp(a->name, b->name);
}

static int cmp_str(const void *x, const void *y) {
  return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Removes the metadata files of traces that are not in `l` (deleted by
 * hand, renamed) and temporary files left by a killed writer. */
static void prune_meta(const char *dir, const etch__store_list *l) {
  char mdir[4200];
  snprintf(mdir, sizeof mdir, "%s/" META_DIR, dir);
  DIR *d = opendir(mdir);
  if (!d) return;
  char **names = etch__calloc(l->n ? l->n : 1, sizeof *names);
  if (!names) {
    closedir(d);
    return;
  }
  for (size_t i = 0; i < l->n; i++) names[i] = l->e[i].name;
  qsort(names, l->n, sizeof *names, cmp_str);
  struct dirent *de;
  while ((de = readdir(d))) {
    const char *n = de->d_name;
    if (!strcmp(n, ".") || !strcmp(n, "..")) continue;
    if (!etch__store_name_ok(n)) continue; /* temporary files: a writer's */
    if (bsearch(&n, names, l->n, sizeof *names, cmp_str)) continue;
    unlinkat(dirfd(d), n, 0);
  }
  free(names);
  closedir(d);
}

int etch__store_list_dir(const char *dir, etch__store_list *out) {
  memset(out, 0, sizeof *out);
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) return ETCH_OK; /* no trace recorded yet */
    return etch__error(ETCH_EIO, "trace store %s: %s", dir, strerror(errno));
  }
  etch_vec v = {0};
  int rc = ETCH_OK;
  struct dirent *de;
  while (!rc && (de = readdir(d))) {
    const char *n = de->d_name;
    if (!etch__store_name_ok(n)) continue; /* ".", "..", .meta, dotfiles */
    if (de->d_type == DT_DIR) continue;
    etch__store_entry *e = ETCH_VEC_NEW(&v, etch__store_entry);
    if (!e) {
      rc = ETCH_ENOMEM;
      break;
    }
    out->e = (etch__store_entry *)v.data;
    bool computed;
    int st = entry_get(dir, n, e, &computed);
    if (st) { /* ETCH_ENOTFOUND: removed since readdir, or a directory */
      etch__store_entry_free(e);
      v.len -= sizeof *e;
      if (st == ETCH_ENOTFOUND) continue;
      rc = st;
      break;
    }
    out->n++;
    if (computed) out->computed++;
  }
  closedir(d);
  if (rc) {
    etch__store_list_free(out);
    return rc == ETCH_ENOMEM ? etch__error(rc, "out of memory") : rc;
  }
  if (out->n > 1) qsort(out->e, out->n, sizeof *out->e, cmp_entry);
  prune_meta(dir, out);
  return ETCH_OK;
}

/* ---- parts a killed recorder left ------------------------------------------------ */

bool etch__store_part_name(const char *name, long *pid) {
  size_t n = strlen(name);
  if (n < 9 || n > NAME_MAX_LEN || name[0] != '.' ||
      strcmp(name + n - 5, ".part") != 0)
    return false;
  /* .NAME.PID.part: PID the digits before ".part", NAME what is between. */
  size_t end = n - 5, k = end;
  while (k > 0 && name[k - 1] >= '0' && name[k - 1] <= '9') k--;
  if (k == end || end - k > 9 || k < 3 || name[k - 1] != '.') return false;
  char base[NAME_MAX_LEN + 1];
  memcpy(base, name + 1, k - 2);
  base[k - 2] = '\0';
  if (!etch__store_name_ok(base)) return false;
  if (pid) *pid = strtol(name + k, NULL, 10);
  return true;
}

bool etch__store_part_abandoned(const char *dir, const char *name) {
  long pid;
  if (!etch__store_part_name(name, &pid)) return false;
  /* The pid first: a live recorder's part is not even opened. */
  if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno != ESRCH)) return false;
  char path[4352];
  int k = snprintf(path, sizeof path, "%s/%s", dir, name);
  if (k < 0 || (size_t)k >= sizeof path) return false;
  int fd =
      etch__sys_open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0);
  if (fd < 0) return false;
  struct stat sb;
  bool gone = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
              flock(fd, LOCK_SH | LOCK_NB) == 0;
  close(fd); /* and the lock with it */
  return gone;
}

int etch__store_list_abandoned(const char *dir, etch__store_list *l) {
  DIR *d = opendir(dir);
  if (!d) return ETCH_OK; /* no store, no part */
  int rc = ETCH_OK;
  /* The list's array, grown at its end. */
  etch_vec v = {(uint8_t *)l->e, l->n * sizeof *l->e, l->n * sizeof *l->e};
  struct dirent *de;
  while (!rc && (de = readdir(d))) {
    const char *n = de->d_name;
    long pid;
    if (!etch__store_part_name(n, &pid) || !etch__store_part_abandoned(dir, n))
      continue;
    struct stat sb;
    if (fstatat(dirfd(d), n, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue;
    etch__store_entry *e = ETCH_VEC_NEW(&v, etch__store_entry);
    if (!e) {
      rc = ETCH_ENOMEM;
      break;
    }
    l->e = (etch__store_entry *)v.data;
    memset(e, 0, sizeof *e);
    char msg[600];
    snprintf(msg, sizeof msg,
             "abandoned: its etch record (pid %ld) ended before the trace was "
             "whole; etch rm %s removes it",
             pid, n);
    e->name = etch__strdup(n);
    e->error = etch__strdup(msg);
    if (!e->name || !e->error) {
      etch__store_entry_free(e);
      rc = ETCH_ENOMEM;
      break;
    }
    e->size = (int64_t)sb.st_size;
    e->mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    e->wall_start_ns = e->mtime_ns;
    e->start = 1; /* no events known: start > end */
    e->abandoned = true;
    e->writer_pid = pid;
    l->n++;
  }
  closedir(d);
  if (rc) return etch__error(rc, "out of memory");
  if (l->n > 1) qsort(l->e, l->n, sizeof *l->e, cmp_entry);
  return ETCH_OK;
}

int etch__store_list_recording(const char *dir, etch__store_list *l) {
  DIR *d = opendir(dir);
  if (!d) return ETCH_OK; /* no store, no part */
  int rc = ETCH_OK;
  etch_vec v = {(uint8_t *)l->e, l->n * sizeof *l->e, l->n * sizeof *l->e};
  struct dirent *de;
  while (!rc && (de = readdir(d))) {
    const char *n = de->d_name;
    long pid;
    char path[4352];
    int k = snprintf(path, sizeof path, "%s/%s", dir, n);
    if (!etch__store_part_name(n, &pid) || k < 0 ||
        (size_t)k >= sizeof path || !being_recorded(path))
      continue;
    etch__store_entry *e = ETCH_VEC_NEW(&v, etch__store_entry);
    if (!e) {
      rc = etch__error(ETCH_ENOMEM, "out of memory");
      break;
    }
    l->e = (etch__store_entry *)v.data;
    bool computed;
    int st = file_entry_get(path, "", n, dir, e, &computed);
    if (st) { /* gone since readdir: no entry */
      etch__store_entry_free(e);
      v.len -= sizeof *e;
      if (st == ETCH_ENOTFOUND) continue;
      rc = st;
      break;
    }
    e->recording = true; /* even if it ended meanwhile: it was listed so */
    e->writer_pid = pid;
    l->n++;
  }
  closedir(d);
  if (rc) return rc == ETCH_ENOMEM ? etch__error(rc, "out of memory") : rc;
  if (l->n > 1) qsort(l->e, l->n, sizeof *l->e, cmp_entry);
  return ETCH_OK;
}

/* Removes an abandoned part: never one being written. */
static int remove_part(const char *dir, const char *name) {
  char path[4352];
  int k = snprintf(path, sizeof path, "%s/%s", dir, name);
  if (k < 0 || (size_t)k >= sizeof path)
    return etch__error(ETCH_EINVAL, "trace store: path too long");
  struct stat sb;
  if (lstat(path, &sb) != 0)
    return etch__error(ETCH_ENOTFOUND, "no trace '%s' in the store %s", name,
                       dir);
  long pid = 0;
  etch__store_part_name(name, &pid);
  if (!etch__store_part_abandoned(dir, name))
    return etch__error(ETCH_EBUSY, "'%s' in the store %s is being written "
                                   "(by etch record, pid %ld): not removed",
                       name, dir, pid);
  if (etch__sys_unlink(path) != 0)
    return etch__error(ETCH_EIO, "cannot remove %s: %s", path,
                       strerror(errno));
  return ETCH_OK;
}

int etch__store_remove(const char *dir, const char *name) {
  if (etch__store_part_name(name, NULL)) return remove_part(dir, name);
  char path[4352], meta[4352];
  int rc = etch__store_path(dir, name, path, sizeof path);
  if (rc) return rc;
  rc = meta_path(dir, name, meta, sizeof meta);
  if (rc) return rc;
  struct stat sb;
  if (lstat(path, &sb) != 0) {
    if (errno == ENOENT)
      return etch__error(ETCH_ENOTFOUND, "no trace '%s' in the store %s",
                         name, dir);
    return etch__error(ETCH_EIO, "%s: %s", path, strerror(errno));
  }
  if (S_ISDIR(sb.st_mode))
    return etch__error(ETCH_EINVAL, "'%s' in the store %s is a directory, "
                                    "not a trace", name, dir);
  if (etch__sys_unlink(path) != 0)
    return etch__error(ETCH_EIO, "cannot remove %s: %s", path,
                       strerror(errno));
  etch__sys_unlink(meta); /* none yet is fine */
  return ETCH_OK;
}

/* ---- JSON --------------------------------------------------------------------------- */

void etch__store_write_json(const char *dir, const etch__store_entry *e,
                            size_t n, FILE *out) {
  fputs("[", out);
  for (size_t i = 0; i < n; i++) {
    const etch__store_entry *x = &e[i];
    char path[4352];
    snprintf(path, sizeof path, "%s/%s", dir, x->name);
    fputs(i ? ",\n {\"name\":" : "\n {\"name\":", out);
    etch__json_string(out, x->name, strlen(x->name));
    fputs(",\"path\":", out);
    etch__json_string(out, path, strlen(path));
    etch__store_write_json_fields(x, out);
    fputs("}", out);
  }
  fputs(n ? "\n]\n" : "]\n", out);
}

void etch__store_write_json_fields(const etch__store_entry *x, FILE *out) {
  fprintf(out, ",\"size\":%" PRId64 ",\"mtime_ns\":%" PRId64, x->size,
          x->mtime_ns);
  fprintf(out, ",\"start\":%" PRId64 ",\"start_from_trace\":%s",
          x->wall_start_ns, x->wall_from_trace ? "true" : "false");
  if (x->error) {
    fputs(",\"duration\":null,\"events\":null,\"slices\":null,"
          "\"processes\":null,\"threads\":null,\"data_loss\":null,"
          "\"error\":",
          out);
    etch__json_string(out, x->error, strlen(x->error));
    if (x->abandoned)
      fprintf(out, ",\"abandoned\":true,\"writer_pid\":%ld", x->writer_pid);
    if (x->recording) fputs(",\"recording\":true", out);
    return;
  }
  fprintf(out,
          ",\"duration\":%" PRId64 ",\"events\":%" PRId64
          ",\"slices\":%" PRId64 ",\"processes\":%" PRId64
          ",\"threads\":%" PRId64 ",\"data_loss\":[",
          etch__store_entry_dur(x), x->events, x->slices, x->processes,
          x->threads);
  for (size_t k = 0; k < x->nloss; k++) {
    fputs(k ? ",{\"name\":" : "{\"name\":", out);
    etch__json_string(out, x->loss[k].name, strlen(x->loss[k].name));
    fprintf(out, ",\"value\":%" PRId64 "}", x->loss[k].value);
  }
  fputs("],\"error\":null", out);
  if (x->recording) fputs(",\"recording\":true", out);
}

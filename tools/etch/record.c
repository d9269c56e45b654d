/*
 * record.c - etch record: run a program, or record from a tracing service
 * (record_service.c), and say what became of the trace.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "record_service.h"

extern char **environ;

/*
 * What became of one process's trace, from the status file libetch leaves
 * in the run directory (ETCH_RECORD_DIR): "tracing PID COMM\tPATH" once it
 * started, then "wrote BYTES PATH", "failed MESSAGE", "lost signal N" or
 * "signal N"; "error PID COMM\tMESSAGE" when it could not start;
 * "untraced PID COMM\tPPID" from a child the traced process PPID forked
 * that exited without tracing itself.
 */
typedef struct rec_proc {
  long pid;
  char comm[64];
  char *path;  /* the trace written, or the one it meant to write */
  char *meant; /* the path it first started tracing to (an exec'd program
                  has the same pid, so appends to the same status) */
  char *msg;   /* error or failure */
  long long bytes;
  bool started, wrote, failed, error;
  bool untraced; /* a fork child that exited without tracing */
  bool recovered; /* its trace came from its flight file */
  bool streamed;  /* its trace is what it wrote while it ran */
  bool merged;    /* its trace went into another's file (merge_processes) */
  size_t nmerged; /* the processes whose traces this file holds (> 1) */
  long forked_from;
  int lost_sig;
} rec_proc;

static char *dup_str(const char *s) {
  char *d = strdup(s ? s : "");
  if (!d) abort();
  return d;
}

static void rec_parse(rec_proc *p, char *text) {
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    char *tab = strchr(line, '\t');
    if (!strncmp(line, "tracing ", 8) || !strncmp(line, "error ", 6)) {
      bool err = line[0] == 'e';
      if (tab) *tab = '\0';
      char *rest = line + (err ? 6 : 8);
      p->pid = strtol(rest, &rest, 10);
      if (*rest == ' ') rest++;
      snprintf(p->comm, sizeof p->comm, "%s", rest);
      if (err) {
        p->error = true;
        free(p->msg);
        p->msg = dup_str(tab ? tab + 1 : "");
      } else {
        p->started = true;
        free(p->path);
        p->path = dup_str(tab ? tab + 1 : "");
        if (!p->meant) p->meant = dup_str(p->path);
      }
    } else if (!strncmp(line, "wrote ", 6)) {
      char *rest = line + 6;
      p->bytes = strtoll(rest, &rest, 10);
      if (*rest == ' ') rest++;
      p->wrote = true;
      free(p->path);
      p->path = dup_str(rest);
    } else if (!strncmp(line, "failed ", 7)) {
      p->failed = true;
      free(p->msg);
      p->msg = dup_str(line + 7);
    } else if (!strncmp(line, "lost signal ", 12)) {
      p->lost_sig = atoi(line + 12);
    } else if (!strncmp(line, "untraced ", 9)) {
      if (tab) *tab = '\0';
      char *rest = line + 9;
      p->pid = strtol(rest, &rest, 10);
      if (*rest == ' ') rest++;
      snprintf(p->comm, sizeof p->comm, "%s", rest);
      p->untraced = true;
      p->forked_from = tab ? strtol(tab + 1, NULL, 10) : 0;
    }
  }
}

static int rec_cmp(const void *a, const void *b) {
  const rec_proc *x = (const rec_proc *)a, *y = (const rec_proc *)b;
  return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Reads and removes the run directory, but for the flight files of
 * processes that died (rec_flights takes them); returns the processes by
 * pid. */
static rec_proc *rec_collect(const char *dir, size_t *n) {
  rec_proc *procs = NULL;
  size_t cap = 0;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return NULL;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    size_t len = strlen(e->d_name);
    if (len > 7 && !strcmp(e->d_name + len - 7, ".status")) {
      FILE *f = fopen(path, "r");
      if (f) {
        char *text = NULL;
        size_t tcap = 0;
        ssize_t got = getdelim(&text, &tcap, '\0', f);
        fclose(f);
        if (got > 0) {
          if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            procs = (rec_proc *)realloc(procs, cap * sizeof *procs);
            if (!procs) abort();
          }
          rec_proc *p = &procs[(*n)++];
          memset(p, 0, sizeof *p);
          p->pid = atol(e->d_name);
          rec_parse(p, text);
        }
        free(text);
      }
    }
    if (len > 7 && !strcmp(e->d_name + len - 7, ".flight")) continue;
    unlink(path);
  }
  closedir(d);
  if (*n) qsort(procs, *n, sizeof *procs, rec_cmp);
  return procs;
}

/* --write-period: a process that died without finishing its trace left
 * it in its file up to its last write (a valid trace, without stats). */
static void rec_streamed(rec_proc *procs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    rec_proc *p = &procs[i];
    struct stat sb;
    if (p->wrote || p->failed || !p->started || !p->path ||
        stat(p->path, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0)
      continue;
    p->wrote = p->streamed = true;
    p->bytes = (long long)sb.st_size;
  }
}

/* --malloc's own streaming (no --write-period): a process that ended
 * without finishing its trace (a shell that _exit()s) left the part it
 * streamed; as without streaming, it has no trace, and the part goes. */
static void rec_drop_partial(rec_proc *procs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    rec_proc *p = &procs[i];
    if (!p->wrote && p->started && p->path) unlink(p->path);
  }
}

/* --flight: the trace of each process that died without writing its own,
 * from the flight file it left in the run directory; then the directory
 * goes. */
static void rec_flights(const char *dir, rec_proc *procs, size_t n,
                        bool compress) {
  for (size_t i = 0; i < n; i++) {
    rec_proc *p = &procs[i];
    if (p->wrote || !p->started || !p->path) continue;
    char flight[PATH_MAX + 32];
    snprintf(flight, sizeof flight, "%s/%ld.flight", dir, p->pid);
    if (access(flight, R_OK) != 0) continue;
    size_t bytes = 0;
    fprintf(stderr, "etch: %s (pid %ld) did not write its trace; recovering "
                    "it from its flight file\n",
            p->comm, p->pid);
    if (cli_recover_file(flight, p->path, compress, false, &bytes) == 0) {
      p->wrote = p->recovered = true;
      p->bytes = (long long)bytes;
    }
    unlink(flight);
  }
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
}

/* PATH.PID.ext, as libetch names the trace of a process that did not
 * claim PATH (session.c, etch__output_per_pid). */
static char *rec_per_pid(const char *path, long pid) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  const char *dot = strrchr(base, '.');
  if (!dot || dot == base) dot = base + strlen(base);
  size_t len = strlen(path) + 24;
  char *out = (char *)malloc(len);
  if (!out) abort();
  snprintf(out, len, "%.*s.%ld%s", (int)(dot - path), path, pid, dot);
  return out;
}

/* The process that claimed the output name: one that started tracing to
 * a path that is no other's PATH.PID.ext (the first by pid if several). */
static rec_proc *rec_claimant(rec_proc *procs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!procs[i].meant) continue;
    bool derived = false;
    for (size_t j = 0; j < n && !derived; j++) {
      if (j == i || !procs[j].meant) continue;
      char *own = rec_per_pid(procs[j].meant, procs[i].pid);
      derived = !strcmp(own, procs[i].meant);
      free(own);
    }
    if (!derived) return &procs[i];
  }
  return NULL;
}

/* The claimant did not write the name it claimed: the trace written as
 * PATH.PID.ext by the same pid (a program the claimant exec'd), else by
 * the first other process (by pid), is renamed to PATH. NULL when none
 * could be. */
static rec_proc *rec_take_name(rec_proc *procs, size_t n, rec_proc *claimant) {
  const char *name = claimant->meant;
  struct stat sb;
  if (lstat(name, &sb) == 0 && !S_ISREG(sb.st_mode)) return NULL;
  for (size_t k = 0; k <= n; k++) {
    rec_proc *p = k == 0 ? claimant : &procs[k - 1];
    if ((k && p == claimant) || !p->wrote || !p->path) continue;
    char *own = rec_per_pid(name, p->pid);
    bool mine = !strcmp(own, p->path);
    free(own);
    if (!mine) continue;
    if (rename(p->path, name) != 0) {
      fprintf(stderr, "etch: cannot rename %s to %s: %s\n", p->path, name,
              strerror(errno));
      return NULL;
    }
    free(p->path);
    p->path = dup_str(name);
    return p;
  }
  return NULL;
}

/* `path` relative to the current directory when it lies under it. */
static const char *rec_show(const char *path, const char *cwd) {
  size_t n = cwd ? strlen(cwd) : 0;
  if (n && !strncmp(path, cwd, n) && path[n] == '/') return path + n + 1;
  return path;
}

/*
 * `path` made absolute against etch record's own directory (a copy when it
 * is absolute already): the program's processes resolve what etch record
 * hands them against their own directory, which a shell in between
 * (`sh -c 'cd sub && ./prog'`) or the program itself may have changed by
 * the time they start tracing. Written into out[cap]; false when the
 * directory cannot be named or the result does not fit.
 */
static bool rec_absolute(const char *path, char *out, size_t cap) {
  bool ok;
  if (path[0] == '/') {
    ok = (size_t)snprintf(out, cap, "%s", path) < cap;
  } else {
    char *cwd = getcwd(NULL, 0);
    if (!cwd) return false;
    ok = (size_t)snprintf(out, cap, "%s/%s", cwd, path) < cap;
    free(cwd);
  }
  if (!ok) errno = ENAMETOOLONG;
  return ok;
}

/* "10s", "500ms", "2m", "1h" or plain milliseconds. */
static int parse_duration_ms(const char *v, uint32_t *out) {
  char *e;
  if (!v || !*v) return -1;
  double x = strtod(v, &e);
  double mul = 1;
  if (!strcmp(e, "ms") || !*e) mul = 1;
  else if (!strcmp(e, "s")) mul = 1000;
  else if (!strcmp(e, "m")) mul = 60000;
  else if (!strcmp(e, "h")) mul = 3600000;
  else return -1;
  if (!(x > 0) || x * mul > 4e9) return -1;
  *out = (uint32_t)(x * mul);
  return 0;
}

/* "64MB", "512KB", "1GB" (binary units) or plain KiB. */
static int parse_size_kb(const char *v, uint32_t *out) {
  char *e;
  if (!v || !*v) return -1;
  double x = strtod(v, &e);
  double kb;
  if (!strcasecmp(e, "kb") || !strcasecmp(e, "k") || !*e) kb = x;
  else if (!strcasecmp(e, "mb") || !strcasecmp(e, "m")) kb = x * 1024;
  else if (!strcasecmp(e, "gb") || !strcasecmp(e, "g")) kb = x * 1024 * 1024;
  else return -1;
  if (!(kb >= 4) || kb > 4e9) return -1;
  *out = (uint32_t)kb;
  return 0;
}

/*
 * libetch_malloc.so for --malloc, as LD_PRELOAD's new value in `out` (with
 * what LD_PRELOAD held before after it): $ETCH_MALLOC_LIB, else next to
 * this etch in the build tree (tools/malloc) or the installed one
 * (../LIBDIR).
 */
static bool malloc_lib(char *out, size_t cap) {
  char lib[PATH_MAX] = "";
  const char *env = getenv("ETCH_MALLOC_LIB");
  if (env && *env) {
    /* Absolute: the loader finds a relative LD_PRELOAD from the directory
     * each process is in when it starts. */
    if (!rec_absolute(env, lib, sizeof lib)) return false;
  } else {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return false;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash) return false;
    *slash = '\0';
    const char *rel[] = {"/../malloc/libetch_malloc.so",
                         "/../" ETCH_INSTALL_LIBDIR "/libetch_malloc.so"};
    for (size_t i = 0; i < 2 && !lib[0]; i++) {
      char cand[PATH_MAX * 2];
      snprintf(cand, sizeof cand, "%s%s", self, rel[i]);
      char *real = realpath(cand, NULL);
      if (real && access(real, R_OK) == 0) snprintf(lib, sizeof lib, "%s", real);
      free(real);
    }
  }
  if (!lib[0] || access(lib, R_OK) != 0) return false;
  const char *prev = getenv("LD_PRELOAD");
  snprintf(out, cap, "%s%s%s", lib, prev && *prev ? ":" : "",
           prev && *prev ? prev : "");
  return true;
}

/* Passing on SIGINT, SIGTERM and SIGHUP sent to etch record to the
 * program it runs. sigqueue's value says "passed on" to the program's
 * libetch (src/sdk/core/env.c, SIG_PASSED_ON): when a kill to the whole process
 * group reached the program too, this second copy is not a second Ctrl-C
 * that gives up on the trace. */
static const int kPassed[3] = {SIGINT, SIGTERM, SIGHUP};
static const int kPassedOn = 0x65746368; /* "etch" */
static volatile sig_atomic_t g_child;  /* the program, while it runs */
static volatile sig_atomic_t g_passed; /* the last signal passed on */
static volatile sig_atomic_t g_got;    /* the last one received */

static void pass_on(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  g_got = sig;
  /* A terminal's Ctrl-C or hangup (sent by the kernel) reached the whole
   * foreground process group, the program with it. */
  if (si && si->si_code == SI_KERNEL) return;
  int saved = errno;
  pid_t child = (pid_t)g_child;
  if (child > 0 &&
      sigqueue(child, sig, (union sigval){.sival_int = kPassedOn}) == 0)
    g_passed = sig;
  errno = saved;
}

/*
 * Whether the trace can be written to `path`, said before anything runs
 * (the program, or a session of the service) rather than after: created
 * and removed again, or, for what exists and is not a regular file
 * (/dev/null), writable. `fresh`: a file (or link) left from an earlier
 * run is removed, so that it cannot pass for this run's trace.
 */
static int check_output(const char *path, bool fresh) {
  struct stat sb;
  if (fresh && lstat(path, &sb) == 0 &&
      (S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode)) && unlink(path) != 0)
    return runtime_error("%s: %s", path, strerror(errno));
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    close(fd);
    unlink(path);
    return EXIT_OK;
  }
  if (errno == EEXIST && access(path, W_OK) == 0) return EXIT_OK;
  return runtime_error("cannot write trace to '%s': %s", path,
                       strerror(errno));
}

/* A trace written into the trace store `store` ("": none) gets its
 * metadata now, so that the first etch ls need not read it. */
static void index_in_store(const char *store, const char *path) {
  const char *slash = strrchr(path, '/');
  if (!*store || !slash || (size_t)(slash - path) >= PATH_MAX) return;
  /* The paths libetch reports are absolute; ETCH_STORE may not be. */
  char dir[PATH_MAX], in_dir[PATH_MAX], in_store[PATH_MAX];
  memcpy(dir, path, (size_t)(slash - path));
  dir[slash - path] = '\0';
  if (!realpath(dir[0] ? dir : "/", in_dir) || !realpath(store, in_store) ||
      strcmp(in_dir, in_store) != 0)
    return;
  etch__store_entry e;
  if (etch__store_entry_get(store, slash + 1, &e) == ETCH_OK)
    etch__store_entry_free(&e);
}

/*
 * A session of the service kept in the trace store is written under a
 * hidden name in the store (a leading '.': no store name, so etch ls and
 * etch ui never list it) and given its store name only once it is whole:
 * `tmp` gets DIR/.NAME.part. The store's directory is the consumer's
 * (etch record's), never the service's: etchd may run as another user,
 * or be Perfetto's traced.
 */
static int store_part_path(const char *final, char *tmp, size_t n) {
  const char *slash = strrchr(final, '/');
  if (!slash) return -1;
  int k = snprintf(tmp, n, "%.*s/.%s.%ld.part", (int)(slash - final), final,
                   slash + 1, (long)getpid());
  return k < 0 || (size_t)k >= n ? -1 : 0;
}

/* Gives the whole trace at `tmp` its name in the store: `final`, or (when
 * another recording took that name meanwhile) a new one of the store's
 * names for `prog` at `when`, into `final`. Never replaces a trace. */
static int store_publish(const char *store, const char *prog, int64_t when,
                         const char *tmp, char *final, size_t n) {
  for (int tries = 0; tries < 16; tries++) {
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_NOREPLACE) == 0)
      return 0;
    if (errno == EINVAL || errno == ENOSYS) { /* no RENAME_NOREPLACE here */
      if (link(tmp, final) == 0) {
        unlink(tmp);
        return 0;
      }
    }
    if (errno != EEXIST) break;
    if (etch__store_new_path(store, prog, when, final, n) != ETCH_OK)
      return runtime_error("%s", etch_last_error());
  }
  return runtime_error("cannot name the trace %s in the store (%s): %s", tmp,
                       final, strerror(errno));
}

/* etch record --malloc's defaults: the trace streams to the file as it is
 * recorded, and a thread that finds the buffer full waits for the write
 * (fill=stall), so that no allocation or free is lost (docs/memory.md). */
#define ETCH_RECORD_MALLOC_BUFFER_KB "16384"
#define ETCH_RECORD_MALLOC_WRITE_PERIOD_MS "250"

typedef struct record_args {
  const char *out_path, *cats;
  rec_service_opts so;
  bool service; /* --system, or an option only the service has */
  bool console, malloc_trace, quiet;
  bool flight;       /* --flight */
  bool buffer_opt;   /* --buffer given */
  const char *fill; /* --ring, --discard */
  bool write_period;          /* --write-period given */
  uint32_t write_period_ms;
  bool per_process; /* --per-process: a file for each process */
} record_args;

static int rec_list(const command *cmd, const char *opt, const char *value,
                    void *args) {
  (void)cmd, (void)opt, (void)value;
  record_args *a = (record_args *)args;
  a->service = a->so.list = true;
  return 0;
}

static int rec_ring(const command *cmd, const char *opt, const char *value,
                    void *args) {
  (void)cmd, (void)opt, (void)value;
  record_args *a = (record_args *)args;
  a->fill = "ring";
  a->so.discard = false;
  return 0;
}

static int rec_discard(const command *cmd, const char *opt, const char *value,
                       void *args) {
  (void)cmd, (void)opt, (void)value;
  record_args *a = (record_args *)args;
  a->fill = "discard";
  a->so.discard = true;
  return 0;
}

static int rec_config(const command *cmd, const char *opt, const char *value,
                      void *args) {
  (void)cmd, (void)opt;
  record_args *a = (record_args *)args;
  a->service = true;
  a->so.config_path = value;
  return 0;
}

static int rec_time(const command *cmd, const char *opt, const char *value,
                    void *args) {
  record_args *a = (record_args *)args;
  a->service = true;
  if (parse_duration_ms(value, &a->so.duration_ms) != 0)
    return usage_error(cmd, "%s: '%s' is not a duration (e.g. 10s, 500ms, "
                            "2m)", opt, value);
  return 0;
}

static int rec_write_period(const command *cmd, const char *opt,
                            const char *value, void *args) {
  record_args *a = (record_args *)args;
  a->write_period = true;
  if (parse_duration_ms(value, &a->write_period_ms) != 0 ||
      a->write_period_ms == 0 || a->write_period_ms > 86400000)
    return usage_error(cmd, "%s: '%s' is not a duration from 1ms to 24h "
                            "(e.g. 1s, 200ms)", opt, value);
  return 0;
}

static int rec_buffer(const command *cmd, const char *opt, const char *value,
                      void *args) {
  record_args *a = (record_args *)args;
  a->buffer_opt = true;
  if (parse_size_kb(value, &a->so.buffer_kb) != 0)
    return usage_error(cmd, "%s: '%s' is not a size (e.g. 64MB, 512KB)", opt,
                       value);
  return 0;
}

static int rec_categories(const command *cmd, const char *opt,
                          const char *value, void *args) {
  record_args *a = (record_args *)args;
  a->cats = value;
  if (!*value)
    return usage_error(cmd, "%s: an empty category list records nothing "
                            "('*' records every category)", opt);
  return 0;
}

/* The traces the processes wrote, put together into `out` (the claimed
 * name's first, the others by pid); then one process entry stands for
 * them all (*nwrote 1) and the other files go. Left as they are, saying
 * why, when that fails. */
static void merge_processes(rec_proc *procs, size_t n, const char *out,
                            size_t *nwrote) {
  const char **in = (const char **)calloc(n, sizeof *in);
  if (!in) abort();
  size_t k = 0, first = n;
  for (size_t i = 0; i < n; i++)
    if (procs[i].wrote && !strcmp(procs[i].path, out)) first = i;
  if (first < n) in[k++] = procs[first].path;
  for (size_t i = 0; i < n; i++)
    if (procs[i].wrote && i != first) in[k++] = procs[i].path;
  const char *comp = getenv("ETCH_COMPRESSION");
  size_t bytes = 0;
  if (cli_merge_traces(in, k, out, !comp || strcmp(comp, "none") != 0,
                       &bytes) != ETCH_OK) {
    fprintf(stderr, "etch: warning: the processes' traces could not be put "
                    "together (%s): each is in a file of its own\n",
            etch_last_error());
    free(in);
    return;
  }
  free(in);
  rec_proc *keep = first < n ? &procs[first] : NULL;
  for (size_t i = 0; i < n; i++) {
    rec_proc *p = &procs[i];
    if (!p->wrote) continue;
    if (!keep) keep = p;
    if (p == keep) continue;
    if (strcmp(p->path, out) != 0) unlink(p->path);
    p->wrote = false;
    p->merged = true;
  }
  free(keep->path);
  keep->path = dup_str(out);
  keep->bytes = (long long)bytes;
  keep->nmerged = *nwrote;
  *nwrote = 1;
}

static int cmd_record(int argc, char **argv) {
  const command *cmd = &cli_record;
  record_args ra = {0};
  opts o;
  int rc = 0;
  if (!cli_parse(cmd, argc, argv, &ra, &o, &rc)) return rc;
  const char *out_path = ra.out_path, *cats = ra.cats;
  rec_service_opts so_ = ra.so;
  bool service = ra.service, console = ra.console;
  bool malloc_trace = ra.malloc_trace, quiet = ra.quiet;
  bool buffer_opt = ra.buffer_opt;
  const char *fill = ra.fill;
  /* Without --system, the buffer options are the program's own session's
   * (ETCH_BUFFER_KB, ETCH_FILL), whose buffer is 16 KB to 4 GB. */
  if (!service && buffer_opt &&
      (so_.buffer_kb < 16 || so_.buffer_kb > 4194304))
    rc = usage_error(cmd, "--buffer: the program's buffer is 16KB to 4GB "
                          "(a larger one needs --system)");
  if (!rc && o.noperands == 0 && !service)
    rc = usage_error(cmd, "missing the program to run (or --system to record "
                          "from a tracing service)");
  if (!rc && ra.write_period && (service || o.noperands == 0))
    rc = usage_error(cmd, "--write-period writes the trace of a program etch "
                          "record runs itself while it runs (with --system "
                          "the service writes it: a TraceConfig's "
                          "write_into_file)");
  if (!rc && ra.write_period && ra.flight)
    rc = usage_error(cmd, "--write-period and --flight: a process's trace is "
                          "either written while it runs or kept in a flight "
                          "file for a death; choose one");
  if (!rc && ra.flight && (service || o.noperands == 0))
    rc = usage_error(cmd, "--flight keeps the rings of a program etch record "
                          "runs itself (not with --system)");
  if (!rc && console && service)
    rc = usage_error(cmd, "--console prints the events of a program etch "
                          "record runs itself; with --system, put "
                          "interceptor_config { name: \"console\" } in the "
                          "data source's config instead");
  if (!rc && console && o.noperands == 0)
    rc = usage_error(cmd, "--console: missing the program to run");
  if (!rc && malloc_trace && (service || o.noperands == 0))
    rc = usage_error(cmd, "--malloc traces the allocations of a program etch "
                          "record runs itself (not with --system)");
  char preload[PATH_MAX * 2 + 2] = "";
  if (!rc && malloc_trace && !malloc_lib(preload, sizeof preload))
    rc = runtime_error("--malloc: libetch_malloc.so not found next to etch "
                       "(set ETCH_MALLOC_LIB to its path)");
  if (rc) {
    opts_free(&o);
    return rc;
  }
  /* Without -o the trace goes into the trace store (etch ls), named by
   * the time and the program. */
  char def[4352], store[4096] = "";
  const char *store_prog = o.noperands ? o.operands[0] : "system";
  int64_t started = (int64_t)time(NULL);
  if (!out_path && !so_.list) {
    if (etch__store_dir(store, sizeof store) != ETCH_OK ||
        etch__store_new_path(store, store_prog, started, def, sizeof def) !=
            ETCH_OK) {
      rc = runtime_error("%s", etch_last_error());
      opts_free(&o);
      return rc;
    }
    out_path = def;
  }
  if (!out_path) out_path = "";
  /* A session kept in the store is written under a hidden name first. */
  char part[4400] = "";
  bool in_store = service && out_path == def;
  if (in_store && store_part_path(def, part, sizeof part) != 0) {
    opts_free(&o);
    return runtime_error("trace store: path too long: %s", def);
  }
  if (!so_.list &&
      (rc = check_output(in_store ? part : out_path, !service || in_store)) !=
          0) {
    opts_free(&o);
    return rc;
  }
  if (service) {
    so_.out_path = in_store ? part : out_path;
    so_.categories = cats;
    if (o.noperands) {
      o.operands[o.noperands] = NULL;
      so_.argv = o.operands;
    }
    size_t bytes = 0;
    rc = etch_cli_record_service(&so_, &bytes);
    if (in_store) {
      /* What the session left is kept as a -o file would be (whole
       * packets only, however it ended); nothing at all is no trace. */
      char msg[1024] = "";
      if (rc) snprintf(msg, sizeof msg, "%s", etch_last_error());
      struct stat sb;
      if (lstat(part, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
        int pub = store_publish(store, store_prog, started, part, def,
                                sizeof def);
        if (pub) {
          opts_free(&o);
          return pub;
        }
        index_in_store(store, def);
        if (rc) {
          opts_free(&o);
          return runtime_error("%s (what there is of the trace is %s)", msg,
                               def);
        }
      } else {
        unlink(part);
        if (rc) {
          opts_free(&o);
          return runtime_error("%s", msg);
        }
      }
    }
    opts_free(&o);
    if (rc) return runtime_error("%s", etch_last_error());
    if (so_.list) return 0;
    char size[32];
    cli_fmt_size(size, sizeof size, (long long)bytes);
    fprintf(stderr, "trace: %s (%s)\n", out_path, size);
    if (quiet) return 0;
    fprintf(stderr, "\n");
    etch__stats_opts st = {.top = 5, .compact = true};
    rc = stats_of(out_path, &st, stderr);
    index_in_store(store, out_path);
    return rc;
  }
  /* Every path handed to the program is absolute: relative ones are
   * relative to where etch record was started, not to wherever the
   * program's processes are when they start tracing. */
  char out_abs[PATH_MAX + 64];
  if (!rec_absolute(out_path, out_abs, sizeof out_abs)) {
    rc = runtime_error("cannot write trace to '%s': %s", out_path,
                       strerror(errno));
    opts_free(&o);
    return rc;
  }
  out_path = out_abs;
  /* The run directory where each traced process says what became of its
   * trace (libetch's env.c); --flight's files go into it too. */
  const char *tmpdir = getenv("TMPDIR");
  char tmp_abs[PATH_MAX - 32], run_dir[PATH_MAX];
  if (!rec_absolute(tmpdir && *tmpdir ? tmpdir : "/tmp", tmp_abs,
                    sizeof tmp_abs)) {
    rc = runtime_error("cannot make a run directory in %s: %s", tmpdir,
                       strerror(errno));
    opts_free(&o);
    return rc;
  }
  snprintf(run_dir, sizeof run_dir, "%s/etch-record.XXXXXX", tmp_abs);
  if (!mkdtemp(run_dir)) {
    rc = runtime_error("cannot make a run directory in %s: %s", tmp_abs,
                       strerror(errno));
    opts_free(&o);
    return rc;
  }
  setenv("ETCH_RECORD_DIR", run_dir, 1);
  setenv("ETCH_OUT", out_path, 1);
  if (cats) setenv("ETCH_CATEGORIES", cats, 1);
  if (console) setenv("ETCH_CONSOLE", "stderr", 1);
  if (malloc_trace) {
    setenv("LD_PRELOAD", preload, 1);
    /* Every allocation and free is an event, and a lost free would read
     * as a leak: the trace streams, and a full buffer makes the thread
     * wait (--discard drops instead; a flight file cannot stream). The
     * environment's own ETCH_BUFFER_KB, ETCH_FILL and ETCH_WRITE_PERIOD_MS
     * win. */
    setenv("ETCH_BUFFER_KB", ETCH_RECORD_MALLOC_BUFFER_KB, 0);
    setenv("ETCH_FILL", ra.flight ? "discard" : "stall", 0);
    if (!ra.flight)
      setenv("ETCH_WRITE_PERIOD_MS", ETCH_RECORD_MALLOC_WRITE_PERIOD_MS, 0);
    /* The program waits for the write when it outruns it: deflate there
     * (level 6) made a malloc/free pair several times slower
     * (docs/memory.md, "Cost"). */
    setenv("ETCH_COMPRESSION", "none", 0);
  }
  /* --buffer, --ring and --discard win over the environment and --malloc. */
  if (buffer_opt) {
    char kb[16];
    snprintf(kb, sizeof kb, "%u", (unsigned)so_.buffer_kb);
    setenv("ETCH_BUFFER_KB", kb, 1);
  }
  if (fill) setenv("ETCH_FILL", fill, 1);
  if (ra.write_period) {
    char ms[24];
    snprintf(ms, sizeof ms, "%u", (unsigned)ra.write_period_ms);
    setenv("ETCH_WRITE_PERIOD_MS", ms, 1);
  }
  if (ra.flight) { /* each process its own, in the run directory */
    char fp[PATH_MAX + 16];
    snprintf(fp, sizeof fp, "%s/%%p.flight", run_dir);
    setenv("ETCH_FLIGHT", fp, 1);
  }

  /* Ctrl-C goes to the program (same process group), whose libetch writes
   * the trace before it ends; etch waits for it. SIGINT, SIGTERM and
   * SIGHUP sent to etch alone are passed on to the program, which then
   * ends as for Ctrl-C; etch waits for it and reports as usual. The
   * signals stay blocked until the child's pid is known, and again from
   * its end (seen without reaping it) until the handlers are gone, so
   * none is lost and none goes to a pid that is no longer the child. */
  struct sigaction ign = {.sa_handler = SIG_IGN}, old_quit;
  struct sigaction fwd = {.sa_sigaction = pass_on, .sa_flags = SA_SIGINFO};
  sigemptyset(&fwd.sa_mask);
  sigset_t passed, old_mask;
  sigemptyset(&passed);
  struct sigaction old_act[3];
  bool installed[3] = {false, false, false};
  for (int i = 0; i < 3; i++) sigaddset(&passed, kPassed[i]);
  sigprocmask(SIG_BLOCK, &passed, &old_mask);
  sigaction(SIGQUIT, &ign, &old_quit);
  sigset_t dflt;
  sigemptyset(&dflt);
  sigaddset(&dflt, SIGINT);
  sigaddset(&dflt, SIGQUIT);
  for (int i = 0; i < 3; i++) {
    int sig = kPassed[i];
    if (sigaction(sig, NULL, &old_act[i]) != 0) continue;
    /* A signal ignored when etch started (nohup: SIGHUP) stays ignored,
     * for the program too. */
    if (sig != SIGINT && !(old_act[i].sa_flags & SA_SIGINFO) &&
        old_act[i].sa_handler == SIG_IGN)
      continue;
    installed[i] = sigaction(sig, &fwd, NULL) == 0;
    sigaddset(&dflt, sig);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigdefault(&attr, &dflt);
  posix_spawnattr_setsigmask(&attr, &old_mask);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid;
  int err = posix_spawnp(&pid, o.operands[0], NULL, &attr, o.operands, environ);
  posix_spawnattr_destroy(&attr);
  int status = 0;
  if (!err) {
    g_child = pid;
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    siginfo_t si;
    while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 &&
           errno == EINTR) {
    }
    sigprocmask(SIG_BLOCK, &passed, NULL);
    g_child = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  for (int i = 0; i < 3; i++)
    if (installed[i]) sigaction(kPassed[i], &old_act[i], NULL);
  sigaction(SIGQUIT, &old_quit, NULL);
  /* A signal that came after the program's end, or with no program, is
   * etch's own: it takes its usual effect when unblocked. */
  sigprocmask(SIG_SETMASK, &old_mask, NULL);
  int passed_sig = g_passed, got_sig = g_got;
  size_t nprocs;
  rec_proc *procs = rec_collect(run_dir, &nprocs);
  const char *comp = getenv("ETCH_COMPRESSION");
  if (ra.write_period)
    rec_streamed(procs, nprocs);
  else if (malloc_trace && !ra.flight)
    rec_drop_partial(procs, nprocs);
  rec_flights(run_dir, procs, nprocs, !comp || strcmp(comp, "none") != 0);
  if (err) {
    rc = runtime_error("cannot run %s: %s", o.operands[0], strerror(err));
    free(procs);
    opts_free(&o);
    return rc;
  }
  const char *prog = o.operands[0];
  bool failed = false;
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    fprintf(stderr, "etch: %s exited with status %d\n", prog,
            WEXITSTATUS(status));
    failed = true;
  } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) {
    fprintf(stderr, "etch: %s was interrupted (SIGINT)\n", prog);
  } else if (WIFSIGNALED(status) && WTERMSIG(status) == passed_sig) {
    fprintf(stderr, "etch: %s ended by SIG%s, which etch record received "
                    "and passed on to it\n",
            prog, sigabbrev_np(passed_sig));
  } else if (WIFSIGNALED(status) && WTERMSIG(status) == got_sig) {
    /* A terminal's hangup, which reached etch and the program both. */
    fprintf(stderr, "etch: %s ended by SIG%s, which etch record received "
                    "too\n",
            prog, sigabbrev_np(got_sig));
  } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE) {
    /* The ordinary end of a program in a pipeline whose reader is done
     * (prog | head -1): not a failure. */
    fprintf(stderr, "etch: %s ended by SIGPIPE (the reader of its output "
                    "closed it)\n", prog);
  } else if (WIFSIGNALED(status)) {
    fprintf(stderr, "etch: %s was killed by signal %d (%s)\n", prog,
            WTERMSIG(status), strsignal(WTERMSIG(status)));
    failed = true;
  }

  /* The name the user gave belongs to the trace they asked for: when the
   * process that claimed it wrote nothing (a shell that runs the program
   * and then _exit()s, or execs it), the first process that wrote a trace
   * of its own takes the name. */
  rec_proc *claimant = rec_claimant(procs, nprocs);
  rec_proc *heir = NULL;
  if (claimant && !(claimant->wrote && !strcmp(claimant->path, claimant->meant)))
    heir = rec_take_name(procs, nprocs, claimant);
  /* What each process did with its trace. */
  char *cwd = getcwd(NULL, 0);
  size_t nwrote = 0, excused = 0, nuntraced = 0, ncut = 0, nlost = 0;
  size_t nfail = 0;
  for (size_t i = 0; i < nprocs; i++) {
    rec_proc *p = &procs[i];
    if (p->wrote) {
      nwrote++;
      if (p->streamed)
        fprintf(stderr, "etch: %s (pid %ld) did not finish its trace: it "
                        "holds what the process wrote up to its last write "
                        "(--write-period %u ms)\n",
                p->comm, p->pid, (unsigned)ra.write_period_ms);
      if (p->recovered)
        fprintf(stderr, "etch: %s (pid %ld): its trace is what its flight "
                        "file held (every event it had recorded but the one "
                        "each thread was writing when it died)\n",
                p->comm, p->pid);
      if (p->failed) { /* kept to its last whole packet (a full disk) */
        fprintf(stderr, "etch: %s (pid %ld) could not write all of its "
                        "trace: %s\n",
                p->comm, p->pid, p->msg);
        ncut++;
      }
    } else if (p->untraced && !p->started && !p->error) {
      /* A fork child that never called etch_init(): its events, if it
       * had any, are in no trace. Named up to five times, then counted. */
      if (++nuntraced <= 5)
        fprintf(stderr,
                "etch: %s (pid %ld), forked by pid %ld, exited without "
                "recording: a forked child records nothing unless it calls "
                "etch_init() itself (see docs/sdk.md)\n",
                p->comm, p->pid, p->forked_from);
    } else if (p == claimant && heir && p->started && p->pid == (long)pid &&
               WIFEXITED(status) && !p->lost_sig && !p->failed) {
      /* The program itself ended normally without writing: _exit() or
       * exec, as a shell running a command does. Another process's trace
       * is the one asked for. */
      fprintf(stderr,
              "etch: %s (pid %ld) ended by _exit() or exec without writing "
              "its trace (as a shell running a command does): its own "
              "events are in no trace; %s (pid %ld) wrote the trace\n",
              p->comm, p->pid, heir->comm, heir->pid);
      excused++;
    } else if (p->error) {
      nfail++;
      fprintf(stderr, "etch: %s (pid %ld) did not trace: %s\n", p->comm,
              p->pid, p->msg);
    } else if (p->failed) {
      nfail++;
      fprintf(stderr, "etch: %s (pid %ld) could not write its trace: %s\n",
              p->comm, p->pid, p->msg);
    } else if (p->lost_sig) {
      nlost++;
      fprintf(stderr,
              "etch: warning: %s (pid %ld) died of signal %d (%s) before its "
              "trace could be written: its events are lost\n",
              p->comm, p->pid, p->lost_sig, strsignal(p->lost_sig));
    } else if (p->started && p->pid == (long)pid && WIFSIGNALED(status)) {
      /* The program itself, and etch saw how it ended. */
      int sig = WTERMSIG(status);
      nlost++;
      if (sig == SIGKILL)
        fprintf(stderr,
                "etch: warning: %s (pid %ld) ended without writing its trace "
                "(it was killed by SIGKILL, which nothing can catch): its "
                "events are lost\n",
                p->comm, p->pid);
      else
        fprintf(stderr,
                "etch: warning: %s (pid %ld) ended without writing its trace "
                "(it was killed by signal %d (%s), which libetch does not "
                "catch, or which the program handles itself): its events are "
                "lost\n",
                p->comm, p->pid, sig, strsignal(sig));
    } else if (p->started) {
      /* Not etch's child: how it ended is its parent's to know. A process
       * that _exit()s (as dash does) or execs a program that does not
       * record lost nothing the user asked for but its own events. */
      nlost++;
      fprintf(stderr,
              "etch: warning: %s (pid %ld) ended without writing its trace "
              "(it called _exit(), replaced itself with exec, or was killed "
              "by SIGKILL): its own events are not in the trace\n",
              p->comm, p->pid);
    }
  }
  if (nuntraced > 5)
    fprintf(stderr,
            "etch: %zu more forked children exited without recording\n",
            nuntraced - 5);
  if (nprocs == 0) {
    rc = runtime_error("%s wrote no trace: no process of it started tracing "
                       "(is it linked with libetch, and does it call "
                       "etch_init()?)",
                       prog);
  } else if (nwrote == 0) {
    rc = runtime_error("%s wrote no trace (see above)", prog);
  } else {
    /* One trace of the command: every process's in the name asked for,
     * unless each was asked for a file of its own (--per-process, or a
     * %p in the name). */
    if (nwrote > 1 && !ra.per_process && !strchr(out_path, '%'))
      merge_processes(procs, nprocs, out_path, &nwrote);
    if (nwrote > 1)
      fprintf(stderr, "%zu processes wrote traces:\n", nwrote);
    for (size_t i = 0; i < nprocs; i++) {
      rec_proc *p = &procs[i];
      if (!p->wrote) continue;
      char size[32];
      cli_fmt_size(size, sizeof size, p->bytes);
      if (nwrote == 1 && p->nmerged > 1) {
        fprintf(stderr, "trace: %s (%s), %zu processes:\n",
                rec_show(p->path, cwd), size, p->nmerged);
        for (size_t j = 0; j < nprocs; j++)
          if (&procs[j] == p || procs[j].merged)
            fprintf(stderr, "  %s, pid %ld\n", procs[j].comm, procs[j].pid);
      } else if (nwrote == 1)
        fprintf(stderr, "trace: %s (%s)\n", rec_show(p->path, cwd), size);
      else
        fprintf(stderr, "  %s (%s)  %s, pid %ld\n", rec_show(p->path, cwd),
                size, p->comm, p->pid);
    }
    for (size_t i = 0; i < nprocs && !rc && !quiet; i++) {
      rec_proc *p = &procs[i];
      if (!p->wrote) continue;
      if (nwrote > 1)
        fprintf(stderr, "\n== %s (%s, pid %ld)\n", rec_show(p->path, cwd),
                p->comm, p->pid);
      fprintf(stderr, "\n");
      etch__stats_opts so = {.top = 5, .compact = true};
      rc = stats_of(p->path, &so, stderr);
      index_in_store(store, p->path);
    }
  }
  for (size_t i = 0; i < nprocs; i++) {
    free(procs[i].path);
    free(procs[i].meant);
    free(procs[i].msg);
  }
  free(procs);
  free(cwd);
  opts_free(&o);
  /* A fork child that never traced is said, not a failure: the program
   * ran as it meant to; so is a process that ended without writing its
   * trace (a warning above). A process that could not trace or write is a
   * failure of the recording. */
  (void)excused;
  (void)nlost;
  if (!rc && (failed || ncut || nfail)) rc = EXIT_RUNTIME;
  return rc;
}

static const cli_opt kRecordOpts[] = {
    {'o', "--output", "PATH",
     "trace file (default: a new trace in the trace\n"
     "store, YYYYmmdd-HHMMSS-PROGRAM.pftrace; etch ls)",
     CLI_STR(record_args, out_path)},
    {'c', "--categories", "LIST",
     "categories to record, e.g. 'render,io,-debug'",
     CLI_FN(rec_categories)},
    {0, "--malloc", NULL,
     "trace the program's allocations (preloads\n"
     "libetch_malloc.so; see etch leaks), in a 64MB\n"
     "buffer that keeps the earliest events when full",
     CLI_BOOL(record_args, malloc_trace)},
    {'q', "--quiet", NULL,
     "say where the trace is, without the summary\n"
     "(which reads the whole trace)",
     CLI_BOOL(record_args, quiet)},
    {0, "--flight", NULL,
     "keep each process's ring in a flight file, so\n"
     "that the trace of one that dies (SIGKILL, a\n"
     "crash, _exit) is recovered (ETCH_FLIGHT)",
     CLI_BOOL(record_args, flight)},
    {0, "--per-process", NULL,
     "a trace file for each process of the program\n"
     "(OUT, OUT.PID.pftrace, ...) instead of one trace\n"
     "of them all",
     CLI_BOOL(record_args, per_process)},
    {0, "--console", NULL,
     "also print every event on stderr as it happens\n"
     "(ETCH_CONSOLE=1; colours on a terminal unless\n"
     "NO_COLOR is set)",
     CLI_BOOL(record_args, console)},
    CLI_PARA("\n"),
    {0, "--buffer", "SIZE",
     "the program's trace buffer (ETCH_BUFFER_KB;\n"
     "default 8MB, 64MB with --malloc; 16KB to 4GB)",
     CLI_FN(rec_buffer)},
    {0, "--ring", NULL,
     "when the buffer is full: overwrite the oldest\n"
     "(ETCH_FILL=ring, the default) or keep the\n"
     "first (discard, the default with --malloc)",
     CLI_FN(rec_ring), .shown = "--ring, --discard"},
    {0, "--discard", NULL, NULL, CLI_FN(rec_discard)},
    {0, "--write-period", "DURATION",
     "write each process's trace while it runs, this\n"
     "often (ETCH_WRITE_PERIOD_MS): a small buffer\n"
     "records a long run, and a process that is\n"
     "killed leaves its trace up to the last write",
     CLI_FN(rec_write_period)},
    CLI_PARA("\n"
             "Through a tracing service (etchd, or Perfetto's traced): every\n"
             "producer connected to it lands in one trace. Only --system (or\n"
             "--list, --config, -t, which are the service's) records from it.\n"),
    {0, "--system", NULL,
     "record from the service (with PROGRAM: run it\n"
     "in system mode and record until it ends)",
     CLI_BOOL(record_args, service)},
    {'t', "--time", "DURATION", "stop after DURATION (10s, 500ms, 2m)",
     CLI_FN(rec_time)},
    CLI_ALSO("--buffer SIZE", "with --system: the service's buffer (default\n"
                              "32MB)"),
    CLI_ALSO("--ring, --discard",
             "with --system: the service's buffer, as above"),
    {0, "--config", "FILE", "a TraceConfig in Perfetto's text format",
     CLI_FN(rec_config)},
    {0, "--list", NULL, "the service's producers, data sources, sessions",
     CLI_FN(rec_list)},
    CLI_PARA("The service's sockets: $PERFETTO_CONSUMER_SOCK_NAME, else "
             "etch's own.\n"),
    {0},
};

const command cli_record = {
    .name = "record",
    .fn = cmd_record,
    .summary = "run a program and record a trace of it",
    .synopsis =
        "etch record [-o OUT.pftrace] [-c CATEGORIES] [-q] [--console] "
        "[--malloc] [--buffer SIZE] [--ring|--discard] [--write-period DURATION] "
        "[--] PROGRAM [ARGS...]\n"
        "       etch record --system [-t DURATION] [--config FILE] [-o OUT] "
        "[-q] [-- PROGRAM...]\n",
    .about =
        "Runs PROGRAM with ETCH_OUT (and ETCH_CATEGORIES) in its environment, so\n"
        "the etch SDK in it records the whole run, waits for it, then prints\n"
        "where the trace is and a short summary of what is in it, on stderr:\n"
        "stdout is the program's alone. Every process\n"
        "of the run that links libetch (children, programs they exec) records,\n"
        "and OUT holds them all: one trace of the command, each process on\n"
        "its own tracks (--per-process: a file each, OUT.PID.pftrace for all\n"
        "but the first). Ctrl-C ends the\n"
        "program with its trace written, and so does SIGPIPE (prog | head):\n"
        "neither is a failure. SIGINT, SIGTERM and SIGHUP sent to etch record\n"
        "are passed on to the program, which ends the same way, and etch\n"
        "reports as usual. A process that dies without writing\n"
        "its trace (SIGKILL, _exit(), exec, a crash) is named with the reason,\n"
        "as a warning: the trace holds every other process.\n"
        "A child made by fork() (without exec) records only if it calls\n"
        "etch_init() itself; one that does not and exits is named.\n",
    .opts = kRecordOpts,
    .more =
        "Exit status 1 if the program failed (other than by Ctrl-C, SIGPIPE\n"
        "or a signal etch passed on), a process of it could not trace or\n"
        "could not write its trace (a full disk), or no process wrote one.\n",
    .stop_at_operand = true,
};

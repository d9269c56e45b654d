/*
 * record_procs.c - etch record: what the program's processes left in the
 * run directory (a status file each, libetch's env.c; flight files), the
 * traces they wrote put together into one, and the report of it all on
 * stderr.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/containers.h"
#include "base/envvars.h"
#include "record.h"

static char *dup_str(const char *s) {
  char *d = etch__strdup(s ? s : "");
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

rec_proc *rec_collect(const char *dir, size_t *n) {
  etch_vec procs = {0};
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
          if (ETCH_VEC_PUSH(&procs, rec_proc, {.pid = atol(e->d_name)}))
            abort();
          rec_parse(&ETCH_VEC_AT(&procs, rec_proc)[(*n)++], text);
        }
        free(text);
      }
    }
    if (len > 7 && !strcmp(e->d_name + len - 7, ".flight")) continue;
    unlink(path);
  }
  closedir(d);
  rec_proc *all = ETCH_VEC_AT(&procs, rec_proc);
  if (*n) qsort(all, *n, sizeof *all, rec_cmp);
  return all;
}

/* --write-period: a process that died without finishing its trace left
 * it in its file up to its last write (a valid trace, without stats). */
void rec_streamed(rec_proc *procs, size_t n) {
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
void rec_drop_partial(rec_proc *procs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    rec_proc *p = &procs[i];
    if (!p->wrote && p->started && p->path) unlink(p->path);
  }
}

/* --flight: the trace of each process that died without writing its own,
 * from the flight file it left in the run directory; then the directory
 * goes. */
void rec_flights(const char *dir, rec_proc *procs, size_t n,
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
  char *out = (char *)etch__malloc(len);
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

/* The traces the processes wrote, put together into `out` (the claimed
 * name's first, the others by pid); then one process entry stands for
 * them all (*nwrote 1) and the other files go. Left as they are, saying
 * why, when that fails. */
static void merge_processes(rec_proc *procs, size_t n, const char *out,
                            size_t *nwrote) {
  const char **in = (const char **)etch__calloc(n, sizeof *in);
  if (!in) abort();
  size_t k = 0, first = n;
  for (size_t i = 0; i < n; i++)
    if (procs[i].wrote && !strcmp(procs[i].path, out)) first = i;
  if (first < n) in[k++] = procs[first].path;
  for (size_t i = 0; i < n; i++)
    if (procs[i].wrote && i != first) in[k++] = procs[i].path;
  const char *comp = etch__env(ETCH_ENV_COMPRESSION);
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

void rec_procs_free(rec_proc *procs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(procs[i].path);
    free(procs[i].meant);
    free(procs[i].msg);
  }
  free(procs);
}

rec_tally rec_report(rec_proc *procs, size_t n, const rec_exit *ex,
                     uint32_t write_period_ms) {
  /* The name the user gave belongs to the trace they asked for: when the
   * process that claimed it wrote nothing (a shell that runs the program
   * and then _exit()s, or execs it), the first process that wrote a trace
   * of its own takes the name. */
  rec_proc *claimant = rec_claimant(procs, n);
  rec_proc *heir = NULL;
  if (claimant && !(claimant->wrote && !strcmp(claimant->path, claimant->meant)))
    heir = rec_take_name(procs, n, claimant);
  /* What each process did with its trace. */
  size_t nwrote = 0, excused = 0, nuntraced = 0, ncut = 0, nlost = 0;
  size_t nfail = 0;
  for (size_t i = 0; i < n; i++) {
    rec_proc *p = &procs[i];
    if (p->wrote) {
      nwrote++;
      if (p->streamed)
        fprintf(stderr, "etch: %s (pid %ld) did not finish its trace: it "
                        "holds what the process wrote up to its last write "
                        "(it wrote every %u ms)\n",
                p->comm, p->pid, (unsigned)write_period_ms);
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
    } else if (p == claimant && heir && p->started && p->pid == (long)ex->pid &&
               WIFEXITED(ex->status) && !p->lost_sig && !p->failed) {
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
    } else if (p->started && p->pid == (long)ex->pid && WIFSIGNALED(ex->status)) {
      /* The program itself, and etch saw how it ended. */
      int sig = WTERMSIG(ex->status);
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
  /* A fork child that never traced is said, not a failure: the program
   * ran as it meant to; so is a process that ended without writing its
   * trace (a warning above). A process that could not trace or write is a
   * failure of the recording. */
  (void)excused;
  (void)nlost;
  return (rec_tally){.nwrote = nwrote, .ncut = ncut, .nfail = nfail};
}

/* The frames of the traces' call stacks named from the binaries, now
 * that the program is done (etch symbolize): nothing was named in it. */
static void rec_symbolize(rec_proc *procs, size_t n, bool quiet) {
#ifdef ETCH_HAVE_SYMBOLIZE
  for (size_t i = 0; i < n; i++) {
    rec_proc *p = &procs[i];
    struct stat sb;
    size_t named;
    /* Not a regular file (-o /dev/null): nothing to read back. */
    if (!p->wrote || !p->path || stat(p->path, &sb) != 0 ||
        !S_ISREG(sb.st_mode))
      continue;
    if (cli_symbolize_trace(p->path, NULL, NULL, 0, quiet ? NULL : stderr,
                            &named) == 0 &&
        named && stat(p->path, &sb) == 0)
      p->bytes = (long long)sb.st_size;
  }
#else
  (void)procs, (void)n, (void)quiet;
#endif
}

int rec_report_traces(rec_proc *procs, size_t n, const char *prog,
                      const char *out_path, const record_args *ra,
                      const char *store, size_t nwrote) {
  int rc = 0;
  char *cwd = getcwd(NULL, 0);
  if (n == 0) {
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
    if (nwrote > 1 && !ra->per_process && !strchr(out_path, '%'))
      merge_processes(procs, n, out_path, &nwrote);
    rec_symbolize(procs, n, ra->quiet);
    if (nwrote > 1)
      fprintf(stderr, "%zu processes wrote traces:\n", nwrote);
    for (size_t i = 0; i < n; i++) {
      rec_proc *p = &procs[i];
      if (!p->wrote) continue;
      char size[32];
      cli_fmt_size(size, sizeof size, p->bytes);
      if (nwrote == 1 && p->nmerged > 1) {
        fprintf(stderr, "trace: %s (%s), %zu processes:\n",
                rec_show(p->path, cwd), size, p->nmerged);
        for (size_t j = 0; j < n; j++)
          if (&procs[j] == p || procs[j].merged)
            fprintf(stderr, "  %s, pid %ld\n", procs[j].comm, procs[j].pid);
      } else if (nwrote == 1)
        fprintf(stderr, "trace: %s (%s)\n", rec_show(p->path, cwd), size);
      else
        fprintf(stderr, "  %s (%s)  %s, pid %ld\n", rec_show(p->path, cwd),
                size, p->comm, p->pid);
    }
    for (size_t i = 0; i < n && !rc && !ra->quiet; i++) {
      rec_proc *p = &procs[i];
      if (!p->wrote) continue;
      if (nwrote > 1)
        fprintf(stderr, "\n== %s (%s, pid %ld)\n", rec_show(p->path, cwd),
                p->comm, p->pid);
      fprintf(stderr, "\n");
      etch__stats_opts so = {.top = 5, .compact = true};
      rc = stats_of(p->path, &so, stderr);
      rec_index_in_store(store, p->path);
    }
  }
  free(cwd);
  return rc;
}

void rec_index_in_store(const char *store, const char *path) {
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

/*
 * ls.c - etch ls: the traces of the trace store, newest first.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/containers.h"
#include "cli.h"
#include "ui/store.h"

typedef struct ls_args {
  bool json;
  bool has_age;
  int64_t older_than; /* ns */
} ls_args;

static int ls_older(const command *cmd, const char *opt, const char *value,
                    void *args) {
  ls_args *a = (ls_args *)args;
  if (cli_parse_age(value, &a->older_than) != 0)
    return usage_error(cmd, "%s: '%s' is not an age (e.g. 30m, 12h, 7d, 2w)",
                       opt, value);
  a->has_age = true;
  return 0;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Keeps the entries whose file was last written more than `age` ago
 * (the others are freed). */
void cli_store_keep_older(etch__store_list *l, int64_t age) {
  int64_t cut = etch__sat_sub(now_ns(), age);
  size_t k = 0;
  for (size_t i = 0; i < l->n; i++) {
    /* A trace being recorded is never old: it is written now. */
    if (l->e[i].mtime_ns < cut && !l->e[i].recording)
      l->e[k++] = l->e[i];
    else
      etch__store_entry_free(&l->e[i]);
  }
  l->n = k;
}

/* The store's directory and its list (--older-than applied). */
int cli_store_list(const command *cmd, bool has_age, int64_t age, char *dir,
                   size_t ndir, etch__store_list *l) {
  (void)cmd;
  if (etch__store_dir(dir, ndir) != ETCH_OK)
    return runtime_error("%s", etch_last_error());
  if (etch__store_list_dir(dir, l) != ETCH_OK ||
      etch__store_list_abandoned(dir, l) != ETCH_OK)
    return runtime_error("%s", etch_last_error());
  if (has_age) cli_store_keep_older(l, age);
  return EXIT_OK;
}

static void print_table(const char *dir, const etch__store_list *l,
                        FILE *out) {
  long long total = 0;
  for (size_t i = 0; i < l->n; i++) total += l->e[i].size;
  char size[32];
  cli_fmt_size(size, sizeof size, total);
  fprintf(out, "%s: %zu trace%s, %s\n", dir, l->n, l->n == 1 ? "" : "s",
          size);
  if (!l->n) return;
  static const char *const head[] = {"name",   "start",   "duration",
                                     "processes", "threads", "events",
                                     "size",   "data lost"};
  etch__tt *t = etch__tt_new(8);
  if (!t) return;
  for (size_t c = 0; c < 8; c++)
    etch__tt_header(t, c, head[c], c >= 2 && c <= 6);
  for (size_t i = 0; i < l->n; i++) {
    const etch__store_entry *e = &l->e[i];
    etch__tt_cell(t, e->name);
    time_t sec = (time_t)(e->wall_start_ns / 1000000000);
    struct tm tm;
    char when[32] = "?";
    if (localtime_r(&sec, &tm))
      strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    etch__tt_cell(t, when);
    cli_fmt_size(size, sizeof size, e->size);
    if (e->error) {
      for (int c = 0; c < 4; c++) etch__tt_cell(t, "-");
      etch__tt_cell(t, size);
      etch__tt_cellf(t, "%s%s%s", e->recording ? "recording; " : "",
                     e->abandoned ? "" : "error: ", e->error);
      continue;
    }
    char dur[32];
    etch__fmt_dur(dur, sizeof dur, etch__store_entry_dur(e));
    etch__tt_cell(t, dur);
    etch__tt_cellf(t, "%" PRId64, e->processes);
    etch__tt_cellf(t, "%" PRId64, e->threads);
    etch__tt_cellf(t, "%" PRId64, e->events);
    etch__tt_cell(t, size);
    if (!e->nloss) {
      etch__tt_cell(t, e->recording ? "recording" : "-");
      continue;
    }
    etch_vec lost = {0};
    FILE *m = etch__vec_file(&lost);
    if (!m) {
      etch__tt_cell(t, "?");
      continue;
    }
    if (e->recording) fputs("recording; ", m);
    for (size_t k = 0; k < e->nloss; k++)
      fprintf(m, "%s%s %" PRId64, k ? ", " : "", e->loss[k].name,
              e->loss[k].value);
    bool ok = fclose(m) == 0 && etch__vec_cstr(&lost) == 0;
    etch__tt_cell(t, ok ? (const char *)lost.data : "?");
    etch__vec_free(&lost);
  }
  etch__tt_print(t, out, "", true);
  etch__tt_free(t);
}

static int cmd_ls(int argc, char **argv) {
  const command *cmd = &cli_ls;
  ls_args la = {0};
  opts o;
  int rc = 0;
  if (!cli_parse(cmd, argc, argv, &la, &o, &rc)) return rc;
  if (o.noperands) rc = usage_error(cmd, "too many arguments");
  opts_free(&o);
  if (rc) return rc;
  char dir[4096];
  etch__store_list l = {0};
  rc = cli_store_list(cmd, la.has_age, la.older_than, dir, sizeof dir, &l);
  if (rc) return rc;
  /* Sessions of etch record --system being recorded, under their hidden
   * names (never older than anything: they are written now). */
  if (etch__store_list_recording(dir, &l) != ETCH_OK) {
    etch__store_list_free(&l);
    return runtime_error("%s", etch_last_error());
  }
  if (la.json)
    etch__store_write_json(dir, l.e, l.n, stdout);
  else
    print_table(dir, &l, stdout);
  etch__store_list_free(&l);
  return EXIT_OK;
}

static const cli_opt kLsOpts[] = {
    {0, "--json", NULL, "machine-readable output (a JSON array)",
     CLI_BOOL(ls_args, json)},
    {0, "--older-than", "AGE",
     "only traces last written more than AGE ago\n"
     "(30m, 12h, 7d, 2w)",
     CLI_FN(ls_older)},
    {0},
};

const command cli_ls = {
    .name = "ls",
    .fn = cmd_ls,
    .summary = "the traces of the trace store, newest first",
    .synopsis = "etch ls [--json] [--older-than AGE]\n",
    .about =
        "Lists the trace store, where etch record writes when given no -o:\n"
        "ETCH_STORE, else $XDG_DATA_HOME/etch/traces, else\n"
        "~/.local/share/etch/traces. For each trace: its name, when it started\n"
        "(wall clock), its duration, processes, threads and events (as etch\n"
        "stats counts them), its size and the data it lost. A trace that\n"
        "cannot be read is listed with the reason. What is shown is kept in\n"
        "DIR/.meta, so a trace is read once, not at every listing (again when\n"
        "its size or modification time changes). The hidden file a killed\n"
        "etch record --system left (.NAME.PID.part) is listed as abandoned\n"
        "once its recorder is gone; etch rm removes it by that name.\n"
        "A trace still being recorded is listed as recording (JSON\n"
        "\"recording\": true), read as far as it is written: one that etch\n"
        "record --write-period writes, or a session of etch record --system\n"
        "(under its hidden name .NAME.PID.part until it is whole).\n",
    .opts = kLsOpts,
    .more = "See also: etch rm, etch diff.\n",
};

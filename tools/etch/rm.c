/*
 * rm.c - etch rm: removes traces from the trace store, by name or by age.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "reader/reader_priv.h"

/* Whether the trace at `path` is being recorded: its writer holds the
 * lock the reader looks at (reader.md). */
static bool recording(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool rec = etch__file_recording(fd);
  close(fd);
  return rec;
}

typedef struct rm_args {
  bool has_age, dry_run;
  int64_t older_than; /* ns */
} rm_args;

static int rm_older(const command *cmd, const char *opt, const char *value,
                    void *args) {
  rm_args *a = (rm_args *)args;
  if (cli_parse_age(value, &a->older_than) != 0)
    return usage_error(cmd, "%s: '%s' is not an age (e.g. 30m, 12h, 7d, 2w)",
                       opt, value);
  a->has_age = true;
  return 0;
}

/* Removes one trace, saying so; 0 or an exit status. */
static int remove_one(const char *dir, const char *name, long long size,
                      bool dry_run, long long *freed) {
  if (!dry_run && etch__store_remove(dir, name) != ETCH_OK)
    return runtime_error("%s", etch_last_error());
  char s[32];
  cli_fmt_size(s, sizeof s, size);
  printf("%s %s (%s)\n", dry_run ? "would remove" : "removed", name, s);
  *freed += size;
  return EXIT_OK;
}

static int cmd_rm(int argc, char **argv) {
  const command *cmd = &cli_rm;
  rm_args ra = {0};
  opts o;
  int rc = 0;
  if (!cli_parse(cmd, argc, argv, &ra, &o, &rc)) return rc;
  if (!o.noperands && !ra.has_age)
    rc = usage_error(cmd, "name the traces to remove (see etch ls), or give "
                          "--older-than");
  if (!rc && o.noperands && ra.has_age)
    rc = usage_error(cmd, "give names or --older-than, not both");
  /* Every name is checked before anything is removed: a name with '/' or
   * ".." would lead out of the store. */
  for (int i = 0; !rc && i < o.noperands; i++)
    if (!etch__store_name_ok(o.operands[i]) &&
        !etch__store_part_name(o.operands[i], NULL))
      rc = usage_error(cmd, "'%s' is not the name of a trace in the store "
                            "(a name, as etch ls shows it: no '/', no '..')",
                       o.operands[i]);
  char dir[4096];
  if (!rc && etch__store_dir(dir, sizeof dir) != ETCH_OK)
    rc = runtime_error("%s", etch_last_error());
  long long freed = 0;
  size_t n = 0;
  if (!rc && ra.has_age) {
    etch__store_list l = {0};
    rc = cli_store_list(cmd, true, ra.older_than, dir, sizeof dir, &l);
    for (size_t i = 0; !rc && i < l.n; i++, n++)
      rc = remove_one(dir, l.e[i].name, l.e[i].size, ra.dry_run, &freed);
    etch__store_list_free(&l);
  } else if (!rc) {
    /* All of them must be there before one goes. */
    long long *size = etch__calloc((size_t)o.noperands, sizeof *size);
    if (!size) rc = runtime_error("out of memory");
    for (int i = 0; !rc && i < o.noperands; i++) {
      char path[4352];
      struct stat sb;
      bool part = etch__store_part_name(o.operands[i], NULL);
      if (part) {
        snprintf(path, sizeof path, "%s/%s", dir, o.operands[i]);
        if (lstat(path, &sb) == 0 &&
            !etch__store_part_abandoned(dir, o.operands[i])) {
          rc = runtime_error("'%s' is being written by a running etch "
                             "record: not removed", o.operands[i]);
          break;
        }
      }
      if (!part &&
          etch__store_path(dir, o.operands[i], path, sizeof path) != ETCH_OK)
        rc = runtime_error("%s", etch_last_error());
      else if (lstat(path, &sb) != 0 || S_ISDIR(sb.st_mode))
        rc = runtime_error("no trace '%s' in the store %s", o.operands[i],
                           dir);
      else if (!part && S_ISREG(sb.st_mode) && recording(path))
        rc = runtime_error("'%s' is being recorded (its writer holds it): "
                           "not removed; remove it when the recording ends",
                           o.operands[i]);
      else
        size[i] = (long long)sb.st_size;
    }
    for (int i = 0; !rc && i < o.noperands; i++, n++)
      rc = remove_one(dir, o.operands[i], size[i], ra.dry_run, &freed);
    free(size);
  }
  if (!rc && (n != 1 || ra.has_age)) {
    char s[32];
    cli_fmt_size(s, sizeof s, freed);
    printf("%s %zu trace%s (%s)\n", ra.dry_run ? "would remove" : "removed", n,
           n == 1 ? "" : "s", s);
  }
  opts_free(&o);
  return rc;
}

static const cli_opt kRmOpts[] = {
    {0, "--older-than", "AGE",
     "every trace last written more than AGE ago\n"
     "(30m, 12h, 7d, 2w)",
     CLI_FN(rm_older)},
    {'n', "--dry-run", NULL, "say what would be removed, remove nothing",
     CLI_BOOL(rm_args, dry_run)},
    {0},
};

const command cli_rm = {
    .name = "rm",
    .fn = cmd_rm,
    .summary = "remove traces from the trace store",
    .synopsis = "etch rm [-n] NAME...\n"
                "       etch rm [-n] --older-than AGE\n",
    .about =
        "Removes traces of the trace store (see etch ls) and what the store\n"
        "keeps about them. NAME is a trace's name as etch ls shows it, never a\n"
        "path: a name with '/' or '..' is refused, and so is the whole command\n"
        "when one name is not in the store (nothing is removed then). The\n"
        "abandoned part a killed etch record left (.NAME.PID.part, as etch ls\n"
        "lists it) is removed by that name; one still being written is not.\n",
    .opts = kRmOpts,
};

/*
 * cliopt.c - the option parser of etch's programs (cliopt.h): each
 * command has a table of its options, from which this parses the command
 * line and prints the help; and the programs' error messages.
 */
#define _GNU_SOURCE
#include "cliopt.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

const char *cli_program = "etch";

int runtime_error(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", cli_program);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return EXIT_RUNTIME;
}

int usage_error(const command *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", cli_program);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  if (cmd && cmd->name)
    fprintf(stderr, "usage: %.*s\nRun '%s %s --help' for details.\n",
            (int)strcspn(cmd->synopsis, "\n"), cmd->synopsis, cli_program,
            cmd->name);
  else if (cmd)
    fprintf(stderr, "usage: %.*s\nRun '%s --help' for details.\n",
            (int)strcspn(cmd->synopsis, "\n"), cmd->synopsis, cli_program);
  else
    fprintf(stderr, "Run '%s help' for the list of commands.\n", cli_program);
  return EXIT_USAGE;
}

/* Returns the option at the cursor (e.g. "-o", "--csv"), or NULL when the
 * options are over. Operands met on the way are collected; after "--", or
 * after the first with `stop_at_operand`, every argument is one. */
static const char *next_opt(opts *o, bool stop_at_operand) {
  while (o->i < o->argc) {
    char *a = o->argv[o->i];
    if (o->done || a[0] != '-' || a[1] == '\0') {
      o->operands[o->noperands++] = a;
      o->i++;
      if (stop_at_operand) o->done = true;
      continue;
    }
    o->i++;
    if (!strcmp(a, "--")) {
      o->done = true;
      continue;
    }
    return a;
  }
  return NULL;
}

/* The entry of `opt` ("-o", "--output", "--output=PATH"), with the value
 * given in it, or NULL. */
static const cli_opt *find_opt(const cli_opt *table, const char *opt,
                               const char **inline_value) {
  *inline_value = NULL;
  for (const cli_opt *e = table; e && e->kind != OPT_END; e++) {
    if (e->kind == OPT_TEXT) continue;
    if (e->shrt && opt[1] == e->shrt && opt[2] == '\0') return e;
    if (!e->lng) continue;
    size_t n = strlen(e->lng);
    if (strncmp(opt, e->lng, n) != 0) continue;
    if (opt[n] == '\0') return e;
    if (opt[n] == '=' && e->arg) {
      *inline_value = opt + n + 1;
      return e;
    }
  }
  return NULL;
}

void opts_free(opts *o) {
  free(o->operands);
  o->operands = NULL;
}

bool cli_parse(const command *cmd, int argc, char **argv, void *args, opts *o,
               int *status) {
  *status = 0; /* the caller goes on with it when the options parse */
  memset(o, 0, sizeof *o);
  o->argc = argc;
  o->argv = argv;
  o->i = 1;
  o->operands = etch__calloc((size_t)argc + 1, sizeof *o->operands);
  if (!o->operands) {
    *status = runtime_error("out of memory");
    return false;
  }
  int rc = 0;
  const char *opt;
  while (!rc && (opt = next_opt(o, cmd->stop_at_operand))) {
    if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
      opts_free(o);
      *status = print_help(cmd);
      return false;
    }
    const char *value;
    const cli_opt *e = find_opt(cmd->opts, opt, &value);
    if (!e) {
      if (cmd->is_operand && cmd->is_operand(opt, o->noperands))
        o->operands[o->noperands++] = (char *)opt;
      else
        rc = usage_error(cmd, "unknown option %s", opt);
      continue;
    }
    if (e->arg && !value) {
      if (o->i >= o->argc) {
        rc = usage_error(cmd, "option %s needs a value", opt);
        continue;
      }
      value = o->argv[o->i++];
    }
    switch (e->kind) {
      case OPT_BOOL:
        *(bool *)((char *)args + e->off) = true;
        break;
      case OPT_STR:
        *(const char **)((char *)args + e->off) = value;
        break;
      case OPT_FN:
        rc = e->fn(cmd, opt, value, args);
        break;
      default:
        break;
    }
  }
  if (rc) {
    opts_free(o);
    *status = rc;
    return false;
  }
  return true;
}

int cli_one_trace(const command *cmd, const opts *o) {
  if (o->noperands == 1) return 0;
  return usage_error(cmd, o->noperands ? "too many arguments"
                                       : "missing the trace file");
}

int cli_count(const command *cmd, const char *opt, const char *value,
              long min, int *out) {
  int64_t n;
  if (etch__parse_i64(value, min, 1000000, &n) != 0)
    return usage_error(cmd,
                       min ? "%s: '%s' is not a count from 1"
                           : "%s: '%s' is not a count (0: all)",
                       opt, value);
  *out = (int)n;
  return 0;
}

/* The help's left column of an option: "-o, --output PATH". */
static void opt_names(const cli_opt *e, char *buf, size_t cap) {
  if (e->shown) {
    snprintf(buf, cap, "%s", e->shown);
    return;
  }
  char shrt[3] = {'-', e->shrt, '\0'};
  snprintf(buf, cap, "%s%s%s%s%s", e->shrt ? shrt : "",
           e->shrt && e->lng ? ", " : "", e->lng ? e->lng : "",
           e->arg ? " " : "", e->arg ? e->arg : "");
}

/* The options of `table`, each line of help at the same column: two
 * spaces after the longest names. */
static void print_opts(const cli_opt *table, FILE *out) {
  char names[128];
  size_t width = 0;
  for (const cli_opt *e = table; e->kind != OPT_END; e++) {
    if (!e->help || (e->kind == OPT_TEXT && !e->shown)) continue;
    opt_names(e, names, sizeof names);
    if (strlen(names) > width) width = strlen(names);
  }
  for (const cli_opt *e = table; e->kind != OPT_END; e++) {
    if (!e->help) continue;
    if (e->kind == OPT_TEXT && !e->shown) {
      fputs(e->help, out);
      continue;
    }
    opt_names(e, names, sizeof names);
    fprintf(out, "  %-*s  ", (int)width, names);
    for (const char *p = e->help; *p;) {
      size_t n = strcspn(p, "\n");
      fprintf(out, "%.*s\n", (int)n, p);
      p += n;
      if (*p) p++;
      if (*p) fprintf(out, "%*s", (int)width + 4, "");
    }
  }
}

int print_help(const command *cmd) {
  printf("usage: %s", cmd->synopsis);
  if (cmd->about) printf("\n%s", cmd->about);
  if (cmd->opts && cmd->opts[0].kind != OPT_END) {
    putchar('\n');
    print_opts(cmd->opts, stdout);
  }
  if (cmd->more) printf("\n%s", cmd->more);
  return EXIT_OK;
}

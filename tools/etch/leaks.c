/*
 * leaks.c - etch leaks: memory never freed, by tag and size, and the peak.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct leaks_args {
  int top;
  bool lost; /* out: the trace lost data */
} leaks_args;

static int leaks_report(const char *path, FILE *out, const void *arg) {
  leaks_args *a = (leaks_args *)arg;
  return etch__query_leaks_file(path, out, a->top, !g_strict, &a->lost);
}

static int cmd_leaks(int argc, char **argv) {
  const command *cmd = &cli_leaks;
  opts o;
  int rc = opts_init(&o, argc, argv, false);
  if (rc) return rc;
  leaks_args la = {.top = 20};
  bool allow_loss = false;
  const char *opt;
  while (!rc && (opt = next_opt(&o))) {
    if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
      free(o.operands);
      return print_help(cmd);
    } else if (!strcmp(opt, "--strict")) {
      g_strict = true;
    } else if (!strcmp(opt, "--allow-loss")) {
      allow_loss = true;
    } else if (is_opt(opt, "-n") || is_opt(opt, "--top")) {
      rc = top_value(&o, opt, cmd, 0, &la.top);
    } else {
      rc = usage_error(cmd, "unknown option %s", opt);
    }
  }
  if (!rc && o.noperands != 1)
    rc = usage_error(cmd, o.noperands ? "too many arguments"
                                      : "missing the trace file");
  if (!rc) rc = check_readable(o.operands[0]);
  if (!rc) rc = print_whole(leaks_report, o.operands[0], &la, stdout);
  /* A report that may be wrong is a failure unless accepted. */
  if (!rc && la.lost && !allow_loss) {
    fflush(stdout);
    fprintf(stderr,
            "etch: leaks: exit status 1 because the trace lost data "
            "(--allow-loss: 0)\n");
    rc = EXIT_RUNTIME;
  }
  free(o.operands);
  return rc;
}

const command cli_leaks = {
    "leaks", cmd_leaks,
    "memory never freed, by tag and size, and the peak",
    "etch leaks [--top N] [--strict] [--allow-loss] TRACE\n"
    "\n"
    "Matches the allocations and frees a trace recorded (etch/memory.h, or\n"
    "a program run with etch record --malloc) by process and address, and\n"
    "lists the blocks never freed, grouped by tag and size, the biggest total\n"
    "first, with the most bytes live at once and when.\n"
    "\n"
    "A trace that lost data (a ring buffer overwrote chunks, events were\n"
    "dropped: any data-loss stat of etch stats) lost allocations and frees:\n"
    "the report then ends with NOT EXACT and what it cannot know, a warning\n"
    "goes to stderr, and the exit status is 1. A trace cut short is noted\n"
    "the same way but, as in every verb, exits 0 unless --strict.\n"
    "\n"
    "  -n, --top N   groups shown (default 20, 0: all)\n"
    "  --strict      a trace cut short is an error\n"
    "  --allow-loss  exit 0 on a trace that lost data (still reported)\n"};

/*
 * leaks.c - etch leaks: memory never freed, by tag and size, and the peak.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "cli.h"
#include "query/leaks_sites.h"

typedef struct leaks_args {
  int top;
  bool allow_loss;
  bool hotspots, json;
  bool lost; /* out: the trace lost data */
} leaks_args;

static int leaks_report(const char *path, FILE *out, const void *arg) {
  leaks_args *a = (leaks_args *)arg;
  unsigned flags = (a->hotspots ? ETCH__LEAKS_HOTSPOTS : 0u) |
                   (a->json ? ETCH__LEAKS_JSON : 0u);
  return etch__query_leaks_file(path, out, a->top, flags, !g_strict,
                                &a->lost);
}

static int leaks_top(const command *cmd, const char *opt, const char *value,
                     void *args) {
  return cli_count(cmd, opt, value, 0, &((leaks_args *)args)->top);
}

static int cmd_leaks(int argc, char **argv) {
  leaks_args la = {.top = 20};
  opts o;
  int rc = 0;
  if (!cli_parse(&cli_leaks, argc, argv, &la, &o, &rc)) return rc;
  rc = cli_one_trace(&cli_leaks, &o);
  if (!rc) rc = check_readable(o.operands[0]);
  if (!rc) rc = print_whole(leaks_report, o.operands[0], &la, stdout);
  /* A report that may be wrong is a failure unless accepted. */
  if (!rc && la.lost && !la.allow_loss) {
    fflush(stdout);
    fprintf(stderr,
            "etch: leaks: exit status 1 because the trace lost data "
            "(--allow-loss: 0)\n");
    rc = EXIT_RUNTIME;
  }
  opts_free(&o);
  return rc;
}

static const cli_opt kLeaksOpts[] = {
    {'n', "--top", "N", "groups shown (default 20, 0: all)", CLI_FN(leaks_top)},
    CLI_STRICT("a trace cut short or a malformed packet is an error"),
    {0, "--allow-loss", NULL, "exit 0 on a trace that lost data (still reported)",
     CLI_BOOL(leaks_args, allow_loss)},
    {0, "--hotspots", NULL,
     "also the sites with the most allocations, bytes and temporaries",
     CLI_BOOL(leaks_args, hotspots)},
    {0, "--json", NULL, "the report as one JSON object", CLI_BOOL(leaks_args, json)},
    {0},
};

const command cli_leaks = {
    .name = "leaks",
    .fn = cmd_leaks,
    .summary = "memory never freed, by call site, tag and size, and the peak",
    .synopsis = "etch leaks [--top N] [--hotspots] [--json] [--strict] "
                "[--allow-loss] TRACE\n",
    .about =
        "Matches the allocations and frees a trace recorded (etch/memory.h, or\n"
        "a program run with etch record --malloc) by process and address, and\n"
        "lists the blocks never freed, grouped by tag and size, the biggest total\n"
        "first, with the most bytes live at once and when. Allocations recorded\n"
        "with call stacks (etch record --malloc) are listed by call site too:\n"
        "the function, file:line and callers, with the blocks still held;\n"
        "--hotspots adds the sites with the most allocations, the most bytes\n"
        "and the most temporary allocations (freed before their thread\n"
        "allocated again). --json prints the counts and every site as JSON.\n"
        "\n"
        "A trace that lost data (a ring buffer overwrote chunks, events were\n"
        "dropped: any data-loss stat of etch stats) lost allocations and frees:\n"
        "the report then ends with NOT EXACT and what it cannot know, a warning\n"
        "goes to stderr, and the exit status is 1. A trace cut short is noted\n"
        "the same way but, as in every verb, exits 0 unless --strict.\n",
    .opts = kLeaksOpts,
};

/*
 * main.c - the etch command line: record, stats, query, convert, print,
 * leaks, recover, ls, rm, diff, ui, symbolize, report, load, env, help.
 * Each verb is in its own file (record.c, stats.c, ...); this one finds the
 * verb and runs it.
 *
 * Exit status: 0 success, 1 runtime error (bad trace, SQL error, I/O),
 * 2 usage error. Errors go to stderr as "etch: <message>".
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "etch/common.h"
#include "cli.h"

/* ---- help and dispatch ------------------------------------------------------------ */

static int cmd_help(int argc, char **argv);

static const command cli_help = {
    .name = "help",
    .fn = cmd_help,
    .summary = "this text, or help on a command",
    .synopsis = "etch help [COMMAND]\n",
};

static const command *const kCommands[] = {
    &cli_record, &cli_leaks, &cli_stats, &cli_query, &cli_convert,
    &cli_print,  &cli_recover, &cli_ls, &cli_rm, &cli_diff,
#ifdef ETCH_HAVE_UI
    &cli_ui,
#endif
#ifdef ETCH_HAVE_SYMBOLIZE
    &cli_symbolize,
#endif
    &cli_report, &cli_load, &cli_env, &cli_help};

static const command *find_command(const char *name) {
  for (size_t i = 0; i < sizeof kCommands / sizeof kCommands[0]; i++)
    if (!strcmp(kCommands[i]->name, name)) return kCommands[i];
  return NULL;
}

static void main_usage(FILE *out) {
  fprintf(out,
          "usage: etch COMMAND [OPTIONS] [ARGS]\n"
          "\n"
          "etch %s: record and analyse Perfetto traces.\n"
          "\n"
          "Commands:\n",
          ETCH_VERSION_STRING);
  for (size_t i = 0; i < sizeof kCommands / sizeof kCommands[0]; i++)
    fprintf(out, "  %-8s %s\n", kCommands[i]->name, kCommands[i]->summary);
  fprintf(out,
          "\nA trace cut short (the file ends inside its last packet, whatever\n"
          "length that packet claims) is read up to the cut by every command,\n"
          "with a warning on stderr and exit status 0; --strict makes it an\n"
          "error (exit status 1). Corruption before the end is always an\n"
          "error.\n"
          "\nRun 'etch COMMAND --help' for a command's options.\n");
}

static int cmd_help(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    main_usage(stdout);
    return EXIT_OK;
  }
  const command *cmd = find_command(argv[1]);
  if (!cmd) return usage_error(NULL, "unknown command '%s'", argv[1]);
  return print_help(cmd);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    main_usage(stderr);
    return EXIT_USAGE;
  }
  const char *verb = argv[1];
  if (!strcmp(verb, "-h") || !strcmp(verb, "--help")) {
    main_usage(stdout);
    return EXIT_OK;
  }
  if (!strcmp(verb, "--version") || !strcmp(verb, "version")) {
    printf("etch %s\n", ETCH_VERSION_STRING);
    return EXIT_OK;
  }
  const command *cmd = find_command(verb);
  if (!cmd) return usage_error(NULL, "unknown command '%s'", verb);
  int rc = cmd->fn(argc - 1, argv + 1);
  if (fflush(stdout) != 0 && !rc) rc = runtime_error("write error: %s", strerror(errno));
  return rc;
}

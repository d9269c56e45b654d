/*
 * convert.c - etch convert: a trace in the Chrome JSON trace event format.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static int cmd_convert(int argc, char **argv) {
  const command *cmd = &cli_convert;
  opts o;
  int rc = opts_init(&o, argc, argv, false);
  if (rc) return rc;
  const char *out_path = NULL;
  const char *opt;
  while (!rc && (opt = next_opt(&o))) {
    if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
      free(o.operands);
      return print_help(cmd);
    } else if (is_opt(opt, "-o") || is_opt(opt, "--output")) {
      out_path = opt_value(&o, opt, cmd, &rc);
    } else if (!strcmp(opt, "--strict")) {
      g_strict = true;
    } else {
      rc = usage_error(cmd, "unknown option %s", opt);
    }
  }
  if (!rc && o.noperands != 1)
    rc = usage_error(cmd, o.noperands ? "too many arguments"
                                      : "missing the trace file");
  sqlite3 *db = NULL;
  if (!rc) rc = load(o.operands[0], NULL, true, true, &db);
  if (!rc) {
    bool to_stdout = !out_path || !strcmp(out_path, "-");
    FILE *out = to_stdout ? stdout : fopen(out_path, "w");
    if (!out) {
      rc = runtime_error("%s: %s", out_path, strerror(errno));
    } else {
      if (etch__query_export_json(db, out) != ETCH_OK)
        rc = runtime_error("%s", etch_last_error());
      if (!to_stdout && fclose(out) != 0 && !rc)
        rc = runtime_error("%s: %s", out_path, strerror(errno));
      if (rc && !to_stdout) unlink(out_path);
    }
  }
  sqlite3_close(db);
  free(o.operands);
  return rc;
}

const command cli_convert = {
    "convert", cmd_convert,
    "to the Chrome JSON trace event format",
    "etch convert [--strict] TRACE [-o OUT.json]\n"
    "\n"
    "Writes the trace in the Chrome JSON trace event format, which\n"
    "chrome://tracing, the Perfetto UI and speedscope open.\n"
    "\n"
    "  -o, --output PATH  output file (default: stdout)\n"
    "  --strict           a trace cut short is an error, not a warning\n"};

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

typedef struct convert_args {
  const char *out_path;
} convert_args;

static int cmd_convert(int argc, char **argv) {
  convert_args ca = {0};
  opts o;
  int rc = 0;
  if (!cli_parse(&cli_convert, argc, argv, &ca, &o, &rc)) return rc;
  rc = cli_one_trace(&cli_convert, &o);
  etch__db *db = NULL;
  if (!rc) rc = load(o.operands[0], NULL, true, &db);
  if (!rc) {
    bool to_stdout = !ca.out_path || !strcmp(ca.out_path, "-");
    FILE *out = to_stdout ? stdout : fopen(ca.out_path, "w");
    if (!out) {
      rc = runtime_error("%s: %s", ca.out_path, strerror(errno));
    } else {
      if (etch__query_export_json(db, out) != ETCH_OK)
        rc = runtime_error("%s", etch_last_error());
      if (!to_stdout && fclose(out) != 0 && !rc)
        rc = runtime_error("%s: %s", ca.out_path, strerror(errno));
      if (rc && !to_stdout) unlink(ca.out_path);
    }
  }
  etch__db_close(db);
  opts_free(&o);
  return rc;
}

static const cli_opt kConvertOpts[] = {
    {'o', "--output", "PATH", "output file (default: stdout)",
     CLI_STR(convert_args, out_path)},
    CLI_STRICT("a trace cut short or a malformed packet is an error,\n"
               "not a warning"),
    {0},
};

const command cli_convert = {
    .name = "convert",
    .fn = cmd_convert,
    .summary = "to the Chrome JSON trace event format",
    .synopsis = "etch convert [--strict] TRACE [-o OUT.json]\n",
    .about = "Writes the trace in the Chrome JSON trace event format, which\n"
             "chrome://tracing, the Perfetto UI and speedscope open.\n",
    .opts = kConvertOpts,
};

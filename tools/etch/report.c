/*
 * report.c - etch report: the viewer's page as one file that opens from
 * disk, with the trace's data in it (src/ui/report.c says which).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/containers.h"
#include "cli.h"
#include "ui/ui.h"

typedef struct report_args {
  const char *out, *columns;
} report_args;

static int cmd_report(int argc, char **argv) {
  const command *cmd = &cli_report;
  report_args ra = {0};
  opts o;
  int rc = 0;
  if (!cli_parse(cmd, argc, argv, &ra, &o, &rc)) return rc;
  int columns = 4000;
  if (!rc) rc = cli_one_trace(cmd, &o);
  if (!rc && !ra.out) rc = usage_error(cmd, "missing -o OUT.html");
  if (!rc && ra.columns) {
    rc = cli_count(cmd, "--columns", ra.columns, 1, &columns);
    if (!rc && (columns < 100 || columns > 100000))
      rc = usage_error(cmd, "--columns: from 100 to 100000");
  }
  if (!rc) rc = check_readable(o.operands[0]);
  etch__ui *ui = NULL;
  etch_vec data = {0};
  if (!rc && etch__ui_new(&ui) != ETCH_OK) rc = runtime_error("out of memory");
  if (!rc && etch__ui_add_path(ui, o.operands[0]) != ETCH_OK)
    rc = runtime_error("%s", etch_last_error());
  if (!rc) {
    FILE *mem = etch__vec_file(&data);
    if (!mem) {
      rc = runtime_error("out of memory");
    } else {
      if (etch__ui_report_data(ui, 0, columns, mem) != ETCH_OK)
        rc = runtime_error("%s", etch_last_error());
      fclose(mem);
    }
  }
  if (!rc) {
    FILE *f = fopen(ra.out, "wb");
    if (!f) {
      rc = runtime_error("%s: %s", ra.out, strerror(errno));
    } else {
      etch__ui_page(f, (const char *)data.data, data.len);
      if (fclose(f) != 0) rc = runtime_error("%s: %s", ra.out, strerror(errno));
    }
  }
  etch__vec_free(&data);
  etch__ui_free(ui);
  opts_free(&o);
  return rc;
}

static const cli_opt kReportOpts[] = {
    {'o', "--output", "OUT.html", "the file to write",
     CLI_STR(report_args, out)},
    {0, "--columns", "N",
     "the detail of the timeline: the whole trace at N pixels across\n"
     "(default 4000; 100..100000), what the page can zoom into",
     CLI_STR(report_args, columns)},
    {0},
};

const command cli_report = {
    .name = "report",
    .fn = cmd_report,
    .summary = "the viewer's page as one self-contained HTML file",
    .synopsis = "etch report [--columns N] TRACE -o OUT.html\n",
    .about =
        "Writes the page of etch ui for TRACE as one file that any browser\n"
        "opens from disk with no network and no file beside it: the timeline\n"
        "(at the detail --columns gives), the flame graph of the whole trace\n"
        "and the stats (with the CPU samples' functions and the allocation\n"
        "and leak sites when the trace has them). The SQL box needs etch ui.\n",
    .opts = kReportOpts,
};

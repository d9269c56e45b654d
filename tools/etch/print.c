/*
 * print.c - etch print: every packet and event, for debugging.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

#include "reader/dump.h"

static int cmd_print(int argc, char **argv) {
  const command *cmd = &cli_print;
  opts o;
  int rc = opts_init(&o, argc, argv, false);
  if (rc) return rc;
  const char *opt;
  while (!rc && (opt = next_opt(&o))) {
    if (!strcmp(opt, "-h") || !strcmp(opt, "--help")) {
      free(o.operands);
      return print_help(cmd);
    } else if (!strcmp(opt, "--strict")) {
      g_strict = true;
    } else {
      rc = usage_error(cmd, "unknown option %s", opt);
    }
  }
  if (!rc && o.noperands != 1)
    rc = usage_error(cmd, o.noperands ? "too many arguments"
                                      : "missing the trace file");
  if (!rc) rc = check_readable(o.operands[0]);
  if (!rc) {
    const char *path = o.operands[0];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
      rc = runtime_error("%s: %s", path, strerror(errno));
    } else {
      size_t len = (size_t)sb.st_size;
      void *data = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
      if (len && data == MAP_FAILED) {
        rc = runtime_error("%s: %s", path, strerror(errno));
      } else {
        etch_reader_stats st = {0};
        int drc = etch__reader_dump_ex(len ? data : "", len, stdout,
                                       !g_strict, &st);
        if (drc != ETCH_OK)
          rc = trace_error(path, drc);
        else if (st.truncated_bytes)
          etch__query_warn_cut_short(path, st.truncated_bytes,
                                     st.truncated_offset);
        if (len) munmap(data, len);
      }
    }
    if (fd >= 0) close(fd);
  }
  free(o.operands);
  return rc;
}

const command cli_print = {
    "print", cmd_print,
    "dump every packet and event, for debugging",
    "etch print [--strict] TRACE\n"
    "\n"
    "Prints every packet of the trace and the events in it, as decoded.\n"
    "\n"
    "  --strict   a trace cut short is an error, not a warning\n"};

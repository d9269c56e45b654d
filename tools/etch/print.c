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
  opts o;
  int rc = 0;
  if (!cli_parse(&cli_print, argc, argv, NULL, &o, &rc)) return rc;
  rc = cli_one_trace(&cli_print, &o);
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
        if (drc == ETCH_OK && st.malformed_packets)
          etch__query_warn_malformed(path, st.malformed_packets, NULL);
        if (len) munmap(data, len);
      }
    }
    if (fd >= 0) close(fd);
  }
  opts_free(&o);
  return rc;
}

static const cli_opt kPrintOpts[] = {
    CLI_STRICT("a trace cut short or a malformed packet is an error,\n"
               "not a warning"),
    {0},
};

const command cli_print = {
    .name = "print",
    .fn = cmd_print,
    .summary = "dump every packet and event, for debugging",
    .synopsis = "etch print [--strict] TRACE\n",
    .about = "Prints every packet of the trace and the events in it, as decoded.\n",
    .opts = kPrintOpts,
};

/* record_service.h - `etch record` through a tracing service. */
#ifndef ETCH_TOOLS_RECORD_SERVICE_H
#define ETCH_TOOLS_RECORD_SERVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rec_service_opts {
  const char *out_path;
  const char *categories;  /* etch's list ("render,io"), NULL: all */
  const char *config_path; /* a TraceConfig in text form, instead of flags */
  uint32_t duration_ms;    /* 0: until Ctrl-C or the program ends */
  uint32_t buffer_kb;      /* 0: 32 MiB */
  bool discard;            /* else ring */
  bool list;               /* only show the service's state */
  /* Into the store (no -o, no --config): the service writes the trace
   * into its part as it goes (write_into_file, every second), so that it
   * is listed, and can be followed, while it is recorded. */
  bool write_as_it_goes;
  char **argv;             /* a program to run in system mode, or NULL */
} rec_service_opts;

/* Records (or lists); ETCH_OK with the trace's size in *bytes. */
int etch_cli_record_service(const rec_service_opts *o, size_t *bytes);

#endif

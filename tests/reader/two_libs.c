/*
 * two_libs.c - a program linked with both libetch.so and libetch_reader.so
 * (each carries etch's base: errors, etch_free) sees one error slot: the
 * reader's error message reaches etch_last_error() whichever library comes
 * first on the link line, and so does the SDK's. Exit 0 when both do.
 */
#include <etch/etch.h>
#include <etch/reader.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  etch_reader *r;
  int rc = etch_reader_open_file(&r, "/nonexistent/trace.pftrace");
  const char *msg = etch_last_error();
  if (rc == ETCH_OK || !strstr(msg, "/nonexistent/trace.pftrace")) {
    fprintf(stderr, "two_libs: reader error not seen: rc %d, \"%s\"\n", rc,
            msg);
    return 1;
  }
  etch_config *cfg;
  if (etch_config_new(&cfg) != ETCH_OK) return 1;
  rc = etch_config_set(cfg, "bufer_kb", "1");
  msg = etch_last_error();
  etch_config_free(cfg);
  if (rc == ETCH_OK || !strstr(msg, "bufer_kb")) {
    fprintf(stderr, "two_libs: sdk error not seen: rc %d, \"%s\"\n", rc, msg);
    return 1;
  }
  printf("two_libs: one error slot\n");
  return 0;
}

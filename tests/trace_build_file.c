/*
 * trace_build_file.c - tb_write_file (trace_build.h), apart from the
 * builder because it needs the test harness (the test's directory).
 */
#include <stdio.h>

#include "test.h"
#include "trace_build.h"

const char *tb_write_file(const tb *t, const char *name) {
  static char path[4][512];
  static int next;
  char *p = path[next++ & 3];
  snprintf(p, 512, "%s/%s", etch_test_tmpdir(), name);
  FILE *f = fopen(p, "wb");
  if (!f || fwrite(tb_data(t), 1, tb_len(t), f) != tb_len(t))
    FAIL("cannot write %s", p);
  fclose(f);
  return p;
}

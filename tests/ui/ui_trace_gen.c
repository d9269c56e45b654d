/*
 * ui_trace_gen.c - writes the ui tests' trace (ui_trace.h) to a file, for
 * the browser tests: ui_trace_gen OUT.pftrace [zone|flame] (zone: the
 * second trace, ui_zone_trace's; flame: ui_flame_trace's)
 */
#include <string.h>
#include <stdio.h>

#include "ui_trace.h"

int main(int argc, char **argv) {
  bool zone = argc == 3 && !strcmp(argv[2], "zone");
  bool flame = argc == 3 && !strcmp(argv[2], "flame");
  if (argc != 2 && !zone && !flame) {
    fprintf(stderr, "usage: ui_trace_gen OUT.pftrace [zone|flame]\n");
    return 2;
  }
  tb t;
  tb_init(&t);
  if (zone)
    ui_zone_trace(&t);
  else if (flame)
    ui_flame_trace(&t);
  else
    ui_test_trace(&t);
  FILE *f = fopen(argv[1], "wb");
  if (!f || fwrite(tb_data(&t), 1, tb_len(&t), f) != tb_len(&t) ||
      fclose(f) != 0) {
    perror(argv[1]);
    return 1;
  }
  tb_free(&t);
  return 0;
}

/*
 * recordee.c - a program for `etch record` tests: one "work" slice holding
 * N "step" slices (N from argv[1]), all in category "test".
 */
#include <etch/etch.h>
#include <stdlib.h>

ETCH_CATEGORY_DEFINE(test, "test", "etch record tests", "");

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1;
  etch_init();
  ETCH_SLICE_BEGIN(test, "work");
  for (int i = 0; i < n; i++) {
    ETCH_SCOPE(test, "step", ETCH_ARG_INT("i", i));
  }
  ETCH_SLICE_END(test);
  return 0;
}

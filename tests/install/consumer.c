/*
 * consumer.c - a program outside the etch tree, built against an installed
 * etch (pkg-config etch, or find_package(etch)). Run with ETCH_OUT set, it
 * records a small trace.
 */
#include <etch/etch.h>
#include <stdio.h>

ETCH_CATEGORY_DEFINE(consumer, "consumer", "Installed-etch consumer", "");

static int work(int n) {
  ETCH_SCOPE(consumer, "work", ETCH_ARG_INT("n", n));
  ETCH_COUNTER(consumer, "n", n);
  return n > 0 ? n + work(n - 1) : 0;
}

int main(void) {
  if (etch_init() != ETCH_OK) {
    fprintf(stderr, "etch_init: %s\n", etch_last_error());
    return 1;
  }
  ETCH_INSTANT(consumer, "start");
  int sum = work(5);
  printf("consumer: etch %s, sum %d\n", ETCH_VERSION_STRING, sum);
  return sum == 15 ? 0 : 1;
}

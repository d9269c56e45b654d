/*
 * ip_etch_clock.c - ip_clock's twin in libetch: one instant "tick" at a
 * moment it is told, for the clock-sync tests of relays (interop.py). Two
 * run, one a producer of the host and one of a relayed "machine" whose
 * clocks are SKEW_NS ahead (the relay told so by its
 * ETCH_RELAY_CLOCK_SKEW_NS hook). Each reads a BOOTTIME moment T from FIFO
 * and logs "tick" at T + SKEW_NS, its own clock's reading of T: on the
 * host's timeline both ticks must land at T.
 *
 *   ip_etch_clock FIFO SKEW_NS
 *
 * Prints "started PID" once the session enabled its category, "logged"
 * after the tick; exits when the session ends.
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

ETCH_CATEGORY_DEFINE(interop, WL_CATEGORY, "interop tests", "");

static bool wait_for(bool on) {
  for (long k = 0; k < WL_WAIT_MS; k++) {
    if (etch_category_enabled(&ETCH_CAT(interop)) == on) return true;
    struct timespec d = {0, 1000000L};
    nanosleep(&d, NULL);
  }
  return false;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: ip_etch_clock FIFO SKEW_NS\n");
    return 2;
  }
  long long skew = atoll(argv[2]);
  if (etch_system_start("ip-etch-clock") != ETCH_OK) {
    fprintf(stderr, "ip_etch_clock: %s\n", etch_last_error());
    return 3;
  }
  if (!wait_for(true)) {
    fprintf(stderr, "ip_etch_clock: the service never enabled '%s'\n",
            WL_CATEGORY);
    return 4;
  }
  printf("started %d\n", (int)getpid());
  fflush(stdout);
  FILE *f = fopen(argv[1], "r"); /* waits for the writer */
  unsigned long long t = 0;
  if (!f || fscanf(f, "%llu", &t) != 1) {
    fprintf(stderr, "ip_etch_clock: no moment in %s\n", argv[1]);
    return 3;
  }
  fclose(f);
  ETCH_INSTANT(interop, "tick", ETCH_TS((uint64_t)((long long)t + skew)));
  printf("logged\n");
  fflush(stdout);
  if (!wait_for(false)) {
    fprintf(stderr, "ip_etch_clock: the service never disabled '%s'\n",
            WL_CATEGORY);
    return 5;
  }
  return 0;
}

/*
 * ip_clock.c - one instant "tick" at a moment it is told, recorded with
 * Perfetto's C SDK: the clock-sync test of the relay (interop.py). Two of
 * these run, one a producer of the host and one of a relayed "machine"
 * whose clocks are SKEW_NS ahead (as `etchd --relay` is told with its
 * ETCH_RELAY_CLOCK_SKEW_NS hook). Each reads a BOOTTIME moment T from
 * FIFO and logs "tick" at T + SKEW_NS, its own clock's reading of T: on
 * the host's timeline both ticks must land at T.
 *
 *   ip_clock FIFO SKEW_NS
 *
 * Prints "started PID" once the session enabled its category, "logged"
 * after the tick; exits when the session ends.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "perfetto/public/producer.h"
#include "perfetto/public/te_category_macros.h"
#include "perfetto/public/te_macros.h"
#include "perfetto/public/track_event.h"
#include "workload.h"

#define IP_CATEGORIES(C) C(interop, WL_CATEGORY, "interop tests")
PERFETTO_TE_CATEGORIES_DEFINE(IP_CATEGORIES)

static bool wait_for(bool on) {
  for (long k = 0; k < WL_WAIT_MS; k++) {
    if (PERFETTO_TE_IS_CATEGORY_ENABLED(interop) == on) return true;
    struct timespec d = {0, 1000000L};
    nanosleep(&d, NULL);
  }
  return false;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: ip_clock FIFO SKEW_NS\n");
    return 2;
  }
  long long skew = atoll(argv[2]);
  struct PerfettoProducerInitArgs args = PERFETTO_PRODUCER_INIT_ARGS_INIT();
  args.backends = PERFETTO_BACKEND_SYSTEM;
  PerfettoProducerInit(args);
  PerfettoTeInit();
  PERFETTO_TE_REGISTER_CATEGORIES(IP_CATEGORIES);
  if (!wait_for(true)) {
    fprintf(stderr, "ip_clock: the service never enabled '%s'\n",
            WL_CATEGORY);
    return 4;
  }
  printf("started %d\n", (int)getpid());
  fflush(stdout);
  FILE *f = fopen(argv[1], "r"); /* waits for the writer */
  unsigned long long t = 0;
  if (!f || fscanf(f, "%llu", &t) != 1) {
    fprintf(stderr, "ip_clock: no moment in %s\n", argv[1]);
    return 3;
  }
  fclose(f);
  struct PerfettoTeTimestamp ts = {PERFETTO_TE_TIMESTAMP_TYPE_BOOT,
                                   (uint64_t)((long long)t + skew)};
  PERFETTO_TE(interop, PERFETTO_TE_INSTANT("tick"), PERFETTO_TE_TIMESTAMP(ts));
  printf("logged\n");
  fflush(stdout);
  if (!wait_for(false)) {
    fprintf(stderr, "ip_clock: the service never disabled '%s'\n",
            WL_CATEGORY);
    return 5;
  }
  return 0;
}

/*
 * ip_perfetto.c - the interop workload (workload.h) recorded with
 * Perfetto's own C SDK (libperfetto_c): a producer of Perfetto's traced
 * or of etchd. Built only when ETCH_PERFETTO_DIR names Perfetto's
 * programs and SDK.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perfetto/public/producer.h"
#include "perfetto/public/te_category_macros.h"
#include "perfetto/public/te_macros.h"
#include "perfetto/public/track_event.h"
#include "workload.h"

#define IP_CATEGORIES(C) C(interop, WL_CATEGORY, "interop tests")
PERFETTO_TE_CATEGORIES_DEFINE(IP_CATEGORIES)

static long iters;

static void pause_ms(long ms) {
  struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&d, NULL);
}

static bool enabled(void) { return PERFETTO_TE_IS_CATEGORY_ENABLED(interop); }

static bool wait_for(bool on) {
  for (long k = 0; k < WL_WAIT_MS; k++) {
    if (enabled() == on) return true;
    pause_ms(1);
  }
  return false;
}

static void *work(void *arg) {
  long t = (long)(intptr_t)arg;
  char name[32];
  snprintf(name, sizeof name, "worker-%ld", t);
  pthread_setname_np(pthread_self(), name);
  snprintf(name, sizeof name, "level-%ld", t);
  uint32_t pid = (uint32_t)getpid();
  for (long i = 0; iters == 0 ? enabled() : i < iters; i++) {
    struct PerfettoTeFlow flow = PerfettoTeGlobalFlow(WL_FLOW_ID(pid, t, i / 2));
    if (i % 2 == 0)
      PERFETTO_TE(interop, PERFETTO_TE_SLICE_BEGIN("outer"),
                  PERFETTO_TE_ARG_INT64("i", i), PERFETTO_TE_FLOW(flow));
    else
      PERFETTO_TE(interop, PERFETTO_TE_SLICE_BEGIN("outer"),
                  PERFETTO_TE_ARG_INT64("i", i),
                  PERFETTO_TE_TERMINATING_FLOW(flow));
    PERFETTO_TE(interop, PERFETTO_TE_SLICE_BEGIN("inner"));
    PERFETTO_TE(interop, PERFETTO_TE_SLICE_END());
    PERFETTO_TE(interop, PERFETTO_TE_SLICE_END());
    if (i % 10 == 0)
      PERFETTO_TE(interop, PERFETTO_TE_INSTANT("mark"),
                  PERFETTO_TE_ARG_STRING("s", "x"),
                  PERFETTO_TE_ARG_DOUBLE("d", 0.5),
                  PERFETTO_TE_ARG_BOOL("b", true));
    PERFETTO_TE(interop, PERFETTO_TE_COUNTER(),
                PERFETTO_TE_COUNTER_TRACK(name, PerfettoTeProcessTrackUuid()),
                PERFETTO_TE_INT_COUNTER(i));
    if (iters == 0 && t == 0 && i == 1000) {
      printf("busy\n");
      fflush(stdout);
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: ip_perfetto NAME THREADS ITERS [exit|stay]\n");
    return 2;
  }
  int threads = atoi(argv[2]);
  iters = atol(argv[3]);
  bool stay = argc > 4 && strcmp(argv[4], "stay") == 0;
  if (threads < 1 || threads > WL_MAX_THREADS || iters < 0) return 2;
  struct PerfettoProducerInitArgs args = PERFETTO_PRODUCER_INIT_ARGS_INIT();
  args.backends = PERFETTO_BACKEND_SYSTEM;
  /* 8 MiB of shared memory: with the SDK's default size (and the SDK's
   * default of dropping when it is full) two threads writing flat out
   * lose chunks into traced without a trace of the loss. */
  args.shmem_size_hint_kb = 8192;
  PerfettoProducerInit(args);
  PerfettoTeInit();
  PERFETTO_TE_REGISTER_CATEGORIES(IP_CATEGORIES);
  (void)argv[1]; /* the SDK names the producer after the process */
  if (!wait_for(true)) {
    fprintf(stderr, "ip_perfetto: the service never enabled '%s'\n",
            WL_CATEGORY);
    return 4;
  }
  printf("started %d\n", (int)getpid());
  fflush(stdout);
  pthread_t th[WL_MAX_THREADS];
  for (int t = 0; t < threads; t++)
    pthread_create(&th[t], NULL, work, (void *)(intptr_t)t);
  for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
  printf("emitted\n");
  fflush(stdout);
  if (stay && !wait_for(false)) {
    fprintf(stderr, "ip_perfetto: the service never disabled '%s'\n",
            WL_CATEGORY);
    return 5;
  }
  return 0;
}

/*
 * ip_etch.c - the interop workload (workload.h) recorded with libetch in
 * system mode: a producer of etchd or of Perfetto's traced; with the mode
 * "inproc", in process (etch_init: ETCH_OUT, as under etch record).
 *
 *   ip_etch NAME THREADS ITERS [exit|stay|important|inproc]
 *
 * "important" (otherwise as "exit"): once the session records, the main
 * thread logs the important custom event Ip.Setting {value: 42} (category
 * "interop") once, before the threads start.
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <etch/event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

ETCH_CATEGORY_DEFINE(interop, WL_CATEGORY, "interop tests", "");

#define SETTING_FIELDS(F) F(int64, value)
ETCH_EVENT_DECLARE(Ip, Setting, SETTING_FIELDS);
ETCH_EVENT_DEFINE(Ip, Setting, SETTING_FIELDS, ETCH_EVENT_IMPORTANT);

static long iters;

static void pause_ms(long ms) {
  struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&d, NULL);
}

/* Waits until the category is (enabled == on), at most WL_WAIT_MS. */
static bool wait_for(bool on) {
  for (long k = 0; k < WL_WAIT_MS; k++) {
    if (etch_category_enabled(&ETCH_CAT(interop)) == on) return true;
    pause_ms(1);
  }
  return false;
}

static void *work(void *arg) {
  long t = (long)(intptr_t)arg;
  char name[32];
  snprintf(name, sizeof name, "worker-%ld", t);
  etch_thread_set_name(name);
  snprintf(name, sizeof name, "level-%ld", t);
  const etch_track *level =
      etch_counter_track_new(name, ETCH_UNIT_NONE, NULL, NULL);
  uint32_t pid = (uint32_t)getpid();
  for (long i = 0; iters == 0 ? etch_category_enabled(&ETCH_CAT(interop))
                              : i < iters;
       i++) {
    uint64_t flow = WL_FLOW_ID(pid, t, i / 2);
    if (i % 2 == 0)
      ETCH_SLICE_BEGIN(interop, "outer", ETCH_ARG_INT("i", i), ETCH_FLOW(flow));
    else
      ETCH_SLICE_BEGIN(interop, "outer", ETCH_ARG_INT("i", i),
                       ETCH_FLOW_END(flow));
    ETCH_SLICE_BEGIN(interop, "inner");
    ETCH_SLICE_END(interop);
    ETCH_SLICE_END(interop);
    if (i % 10 == 0)
      ETCH_INSTANT(interop, "mark", ETCH_ARG_STRING("s", "x"),
                   ETCH_ARG_DOUBLE("d", 0.5), ETCH_ARG_BOOL("b", true));
    ETCH_COUNTER(interop, "level", i, ETCH_TRACK(level));
    if (iters == 0 && t == 0 && i == 1000) {
      printf("busy\n");
      fflush(stdout);
    }
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: ip_etch NAME THREADS ITERS "
                    "[exit|stay|important|inproc]\n");
    return 2;
  }
  int threads = atoi(argv[2]);
  iters = atol(argv[3]);
  bool stay = argc > 4 && strcmp(argv[4], "stay") == 0;
  bool inproc = argc > 4 && strcmp(argv[4], "inproc") == 0;
  if (threads < 1 || threads > WL_MAX_THREADS || iters < 0) return 2;
  if (inproc && iters == 0) return 2; /* nothing would end it */
  if (inproc ? etch_init() != ETCH_OK : etch_system_start(argv[1]) != ETCH_OK) {
    fprintf(stderr, "ip_etch: %s\n", etch_last_error());
    return 3;
  }
  if (!wait_for(true)) {
    fprintf(stderr, "ip_etch: the service never enabled '%s'\n", WL_CATEGORY);
    return 4;
  }
  if (argc > 4 && strcmp(argv[4], "important") == 0)
    ETCH_LOG(Ip, Setting, interop, ETCH_SET(value, 42));
  printf("started %d\n", (int)getpid());
  fflush(stdout);
  pthread_t th[WL_MAX_THREADS];
  for (int t = 0; t < threads; t++)
    pthread_create(&th[t], NULL, work, (void *)(intptr_t)t);
  for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
  printf("emitted\n");
  fflush(stdout);
  if (stay && !wait_for(false)) {
    fprintf(stderr, "ip_etch: the service never disabled '%s'\n",
            WL_CATEGORY);
    return 5;
  }
  return 0;
}

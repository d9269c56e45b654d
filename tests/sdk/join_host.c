/*
 * join_host.c - a program linked with libetch.a that loads a plugin linked
 * with another copy of libetch.a (join_plugin.c), recording with ETCH_OUT
 * in process. Both copies record N slices on the main thread and N on a
 * thread of their own.
 *
 *   join_host PLUGIN.so N MODE
 *
 * MODE says how the run ends and when the plugin comes:
 *   exit      the plugin calls etch_init; main returns (exit handlers)
 *   noinit    the plugin never calls etch_init: it joins when its category
 *             registers at dlopen
 *   shutdown  the host calls etch_shutdown while the plugin still runs
 *   dlclose   the plugin is unloaded before the host's exit
 *   late      the plugin is loaded after the host wrote its trace
 *   signal    the host dies of SIGTERM (its trace written by the handler)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <etch/etch.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ETCH_CATEGORY_DEFINE(host, "host", "the host's category", "");

static long n;

static void *host_thread(void *arg) {
  (void)arg;
  etch_thread_set_name("host-worker");
  for (long i = 0; i < n; i++) {
    ETCH_SCOPE(host, "host_thread_slice");
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  n = atol(argv[2]);
  const char *mode = argv[3];
  if (etch_init() != ETCH_OK) return 3;
  if (!strcmp(mode, "late")) etch_shutdown();
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 4;
  }
  int (*run)(long, int) = (int (*)(long, int))dlsym(h, "plugin_run");
  if (!run) return 5;
  pthread_t t;
  pthread_create(&t, NULL, host_thread, NULL);
  for (long i = 0; i < n; i++) {
    ETCH_SCOPE(host, "host_slice");
    if (i == 0 && run(n, strcmp(mode, "noinit") != 0)) return 6;
  }
  pthread_join(t, NULL);
  if (!strcmp(mode, "shutdown")) {
    etch_shutdown();
    /* The plugin's copy was asked for its trace: what it records now is
     * not in it. */
    if (run(1, 0)) return 6;
  }
  if (!strcmp(mode, "dlclose")) dlclose(h);
  if (!strcmp(mode, "signal")) {
    /* The handler wakes etch's watcher thread, which writes the trace
     * and then ends the process by the signal: wait for it. */
    raise(SIGTERM);
    for (;;) pause();
  }
  return 0;
}

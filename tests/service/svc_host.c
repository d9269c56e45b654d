/*
 * svc_host.c - a program linked with libetch.a that loads a plugin linked
 * with another copy of libetch.a (svc_plugin.c): both record N events in
 * system mode.
 *
 *   svc_host PLUGIN.so N
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <etch/etch.h>
#include <stdio.h>
#include <stdlib.h>

ETCH_CATEGORY_DEFINE(host, "host", "the host's category", "");

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  long n = atol(argv[2]);
  if (etch_system_start("host") != ETCH_OK) return 3;
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "%s\n", dlerror());
    return 4;
  }
  int (*run)(long) = (int (*)(long))dlsym(h, "plugin_run");
  if (!run) return 5;
  for (long i = 0; i < n; i++)
    ETCH_INSTANT(host, "host_tick", ETCH_ARG_INT("i", i));
  return run(n) ? 6 : 0;
}

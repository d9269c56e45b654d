/*
 * svc_plugin.c - a plugin linked with its own copy of libetch.a, loaded by
 * svc_host: in system mode each copy is a producer of its own.
 */
#include <etch/etch.h>

ETCH_CATEGORY_DEFINE(plug, "plug", "the plugin's category", "");

__attribute__((visibility("default"))) int plugin_run(long n);

int plugin_run(long n) {
  if (etch_system_start("plugin") != ETCH_OK) return 1;
  etch_thread_set_name("plugin-thread");
  for (long i = 0; i < n; i++)
    ETCH_INSTANT(plug, "plugin_tick", ETCH_ARG_INT("i", i));
  return 0;
}

/*
 * join_plugin.c - a plugin with its own copy of libetch.a, loaded by
 * join_host: N slices on the caller's thread (nested in the host's) and N
 * on a thread of its own.
 */
#include <etch/etch.h>
#include <pthread.h>

ETCH_CATEGORY_DEFINE(plug, "plug", "the plugin's category", "");

__attribute__((visibility("default"))) int plugin_run(long n, int init);

static void *plugin_thread(void *arg) {
  long n = *(long *)arg;
  etch_thread_set_name("plugin-worker");
  for (long i = 0; i < n; i++) {
    ETCH_SCOPE(plug, "plugin_thread_slice");
  }
  return NULL;
}

int plugin_run(long n, int init) {
  if (init) etch_init(); /* a refusal is said on stderr */
  for (long i = 0; i < n; i++) {
    ETCH_SCOPE(plug, "plugin_slice");
  }
  pthread_t t;
  pthread_create(&t, NULL, plugin_thread, &n);
  pthread_join(t, NULL);
  return 0;
}

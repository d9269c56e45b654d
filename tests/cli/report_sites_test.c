/*
 * report_sites_test.c - allocation sites in etch report (and the viewer's
 * stats, src/ui/api_samples.c's /api/leaks): leaky_sites recorded with
 * etch record --malloc, its report's page holds the leak sites with the
 * exact blocks and bytes each left (leak_one 1 x 11, leak_two 2 x 22,
 * leak_three 3 x 33), hot_alloc's 1000 allocations, all freed.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test.h"

static char *run(const char *cmd, int *status) {
  FILE *f = popen(cmd, "r");
  if (!f) FAIL("popen %s", cmd);
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  size_t n;
  while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (cap - len < 1024) buf = realloc(buf, cap *= 2);
  }
  buf[len] = 0;
  int st = pclose(f);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  return buf;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PRELOAD_OK 0 /* a sanitized preload cannot go first (record_test.c) */
#else
#define PRELOAD_OK 1
#endif

/* The site object of function `fn` in the page (its own, not a frame of
 * another's): from its start to the next site's. */
static char *site_of(const char *page, const char *fn) {
  char want[128];
  snprintf(want, sizeof want, "\n  {\"function\": \"%s\", \"file\"", fn);
  const char *p = strstr(page, want);
  if (!p) FAIL("no site %s in the report", fn);
  const char *end = strstr(p + 1, "\n  {\"function\"");
  const char *close = strstr(p + 1, "\n]");
  if (!end || (close && close < end)) end = close;
  if (!end) end = p + strlen(p);
  return strndup(p, (size_t)(end - p));
}

TEST(report_holds_the_leak_sites_with_their_bytes) {
  if (!PRELOAD_OK) return;
  char trace[600], html[600], cmd[3000];
  snprintf(trace, sizeof trace, "%s/sites.pftrace", etch_test_tmpdir());
  snprintf(html, sizeof html, "%s/sites.html", etch_test_tmpdir());
  snprintf(cmd, sizeof cmd,
           "cd %s && %s record -q --malloc -o %s -- %s ./leaky_plugin.so "
           "2>/dev/null && %s report %s -o %s",
           ETCH_LEAKY_PLUGIN_DIR, ETCH_BIN, trace, ETCH_LEAKY_SITES, ETCH_BIN,
           trace, html);
  int st;
  free(run(cmd, &st));
  ASSERT_EQ_INT(st, 0);
  FILE *f = fopen(html, "r");
  ASSERT_TRUE(f != NULL);
  char *page = calloc(1, 64 << 20);
  size_t n = fread(page, 1, (64 << 20) - 1, f);
  fclose(f);
  ASSERT_TRUE(n > 0);
  static const struct {
    const char *fn, *want;
  } kSites[] = {
      {"leak_one", "\"never_freed\": 1, \"never_freed_bytes\": 11, "
                   "\"allocations\": 1, \"bytes\": 11,"},
      {"leak_two", "\"never_freed\": 2, \"never_freed_bytes\": 44, "
                   "\"allocations\": 2, \"bytes\": 44,"},
      {"leak_three", "\"never_freed\": 3, \"never_freed_bytes\": 99, "
                     "\"allocations\": 3, \"bytes\": 99,"},
      {"hot_alloc", "\"never_freed\": 0, \"never_freed_bytes\": 0, "
                    "\"allocations\": 1000,"},
  };
  for (size_t i = 0; i < sizeof kSites / sizeof kSites[0]; i++) {
    char *s = site_of(page, kSites[i].fn);
    if (!strstr(s, kSites[i].want))
      FAIL("site %s: want %s in\n%s", kSites[i].fn, kSites[i].want, s);
    free(s);
  }
  free(page);
}

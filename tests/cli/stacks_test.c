/*
 * stacks_test.c - a call stack on every allocation of an unmodified
 * program (etch record --malloc, libetch_malloc.so): leaky_sites.c, built
 * -O2 without frame pointers, leaks known blocks from known functions (in
 * the program, a shared library, a dlopen'ed one and a thread) and has a
 * known hotspot. Perfetto's trace_processor (when ETCH_TP names it) reads
 * the stacks from the trace and names every leak site's function, file and
 * caller with no step of its own: the counts per innermost function are
 * exact.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test.h"

#define ASSERT_CONTAINS(hay, needle)                    \
  do {                                                  \
    if (!strstr((hay), (needle)))                       \
      FAIL("expected \"%s\" in:\n%s", (needle), (hay)); \
  } while (0)

/* Runs a shell command line; its standard output (stderr to a file). */
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

static const char *trace_path(void) {
  static char p[600];
  snprintf(p, sizeof p, "%s/sites.pftrace", etch_test_tmpdir());
  return p;
}

/* Records leaky_sites, which dlopens the plugin by a relative path (from
 * the plugin's directory): the frames there are named all the same. */
static void record_sites(void) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cd %s && %s record -q --malloc -o %s -- %s ./leaky_plugin.so "
           "2>%s/record.err",
           ETCH_LEAKY_PLUGIN_DIR, ETCH_BIN, trace_path(), ETCH_LEAKY_SITES,
           etch_test_tmpdir());
  int st;
  char *out = run(cmd, &st);
  ASSERT_EQ_INT(st, 0);
  ASSERT_EQ_STR(out, "leaky_sites: done\n");
  free(out);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PRELOAD_OK 0 /* a sanitized preload cannot go first (record_test.c) */
#else
#define PRELOAD_OK 1
#endif

/* etch's own reading of the trace: every allocation and free, exact. */
TEST(stacks_keep_leaks_exact) {
  if (!PRELOAD_OK) return;
  record_sites();
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s leaks %s", ETCH_BIN, trace_path());
  int st;
  char *out = run(cmd, &st);
  ASSERT_EQ_INT(st, 0);
  /* 1 + 2 + 3 + 2 + 1 + 4 blocks: 11 + 44 + 99 + 88 + 55 + 264 bytes, and
   * what the C library and the loader keep (dlopen, the thread, stdio). */
  ASSERT_CONTAINS(out, "never freed");
  ASSERT_TRUE(!strstr(out, "NOT EXACT"));
  free(out);
}

#ifdef ETCH_TP
/* Runs one query on the trace in trace_processor_shell: its CSV rows. */
static char *tp_query(const char *sql) {
  char qf[600], cmd[2048];
  snprintf(qf, sizeof qf, "%s/q.sql", etch_test_tmpdir());
  FILE *f = fopen(qf, "w");
  ASSERT_TRUE(f != NULL);
  fputs(sql, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "%s -q %s %s 2>/dev/null", ETCH_TP, qf,
           trace_path());
  int st;
  char *out = run(cmd, &st);
  ASSERT_EQ_INT(st, 0);
  return out;
}

/* Allocations per innermost frame's function, named by the symbols etch
 * wrote when the session stopped; file and line from DWARF. */
TEST(trace_processor_names_every_leak_site) {
  if (!PRELOAD_OK) return;
  record_sites();
  char *out = tp_query(
      "select sym.name as fn, count(*) as n, max(sym.source_file) as file "
      "from __intrinsic_track_event_callstacks c "
      "join stack_profile_callsite cs on cs.id = c.callsite_id "
      "join stack_profile_frame f on f.id = cs.frame_id "
      "join stack_profile_symbol sym using (symbol_set_id) "
      "where sym.name in ('leak_one', 'leak_two', 'leak_three', "
      "'lib_leak', 'plugin_leak', 'thread_leak', 'hot_alloc') "
      "group by sym.name order by sym.name;\n");
  ASSERT_CONTAINS(out, "\"fn\",\"n\",\"file\"\n"
                       "\"hot_alloc\",1000,\"");
  ASSERT_CONTAINS(out, "leaky_sites.c\"\n\"leak_one\",1,\"");
  ASSERT_CONTAINS(out, "leaky_sites.c\"\n\"leak_three\",3,\"");
  ASSERT_CONTAINS(out, "leaky_sites.c\"\n\"leak_two\",2,\"");
  ASSERT_CONTAINS(out, "leaky_sites.c\"\n\"lib_leak\",2,\"");
  ASSERT_CONTAINS(out, "leaky_lib.c\"\n\"plugin_leak\",1,\"");
  ASSERT_CONTAINS(out, "leaky_plugin.c\"\n\"thread_leak\",4,\"");
  free(out);
  /* The stack goes on past the leak site: leak_three's caller is
   * three_caller, whose caller is main; the mappings carry build ids. */
  out = tp_query(
      "select s1.name, s2.name, s3.name, length(m.build_id) "
      "from __intrinsic_track_event_callstacks c "
      "join stack_profile_callsite cs on cs.id = c.callsite_id "
      "join stack_profile_frame f on f.id = cs.frame_id "
      "join stack_profile_mapping m on m.id = f.mapping "
      "join stack_profile_symbol s1 on s1.symbol_set_id = f.symbol_set_id "
      "join stack_profile_callsite p1 on p1.id = cs.parent_id "
      "join stack_profile_frame f2 on f2.id = p1.frame_id "
      "join stack_profile_symbol s2 on s2.symbol_set_id = f2.symbol_set_id "
      "join stack_profile_callsite p2 on p2.id = p1.parent_id "
      "join stack_profile_frame f3 on f3.id = p2.frame_id "
      "join stack_profile_symbol s3 on s3.symbol_set_id = f3.symbol_set_id "
      "where s1.name = 'leak_three' limit 1;\n");
  ASSERT_CONTAINS(out, "\"leak_three\",\"three_caller\",\"main\",40\n");
  free(out);
}
#endif

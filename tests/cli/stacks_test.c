/*
 * stacks_test.c - a call stack on every allocation of an unmodified
 * program (etch record --malloc, libetch_malloc.so): leaky_sites.c, built
 * -O2 without frame pointers, leaks known blocks from known functions (in
 * the program, a shared library, a dlopen'ed one and a thread) and has a
 * known hotspot. Perfetto's trace_processor (when ETCH_TP names it) reads
 * the stacks from the trace and names every leak site's function, file and
 * caller with no step of its own: the counts per innermost function are
 * exact. etch leaks reads them with etch's reader and lists the same sites
 * with the same counts, and the hotspots, temporaries and peak.
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

/* The row of function `fn` in the report's section `title` ("" when it
 * has none), its runs of spaces made one. */
static void row_of(const char *out, const char *title, const char *fn,
                   char *row, size_t n) {
  row[0] = 0;
  const char *sec = strstr(out, title);
  if (!sec) return;
  const char *end = strstr(sec, "\n\n"); /* the section's end */
  char want[200];
  snprintf(want, sizeof want, "\n  %s ", fn);
  const char *at = strstr(sec, want);
  if (!at || (end && at > end)) return;
  at += 3;
  size_t k = 0;
  for (; *at && *at != '\n' && k + 1 < n; at++)
    if (*at != ' ' || (k && row[k - 1] != ' ')) row[k++] = *at;
  row[k] = 0;
}

/* A row of a section: the function's file and, after its line number,
 * `rest`. */
static void assert_row(const char *out, const char *title, const char *fn,
                       const char *file, const char *rest) {
  char row[2000], want[300];
  row_of(out, title, fn, row, sizeof row);
  snprintf(want, sizeof want, "%s %s:", fn, file);
  if (strncmp(row, want, strlen(want)))
    FAIL("%s: expected a row \"%s...\" in:\n%s", title, want, out);
  const char *p = row + strlen(want);
  while (*p >= '0' && *p <= '9') p++;
  if (strncmp(p, rest, strlen(rest)))
    FAIL("%s: expected \"%s\" after %s's line in \"%s\"", title, rest, fn,
         row);
}

/* The first row of a section (after its header and its rule). */
static const char *first_row(const char *out, const char *title) {
  const char *sec = strstr(out, title);
  const char *rule = sec ? strstr(sec, "\n  --") : NULL;
  const char *row = rule ? strstr(rule + 1, "\n  ") : NULL;
  return row ? row + 3 : "";
}

#define NEVER "never freed, by call site"
#define MOST_ALLOCS "most allocations, by call site"
#define MOST_BYTES "most bytes allocated, by call site"
#define TEMPS "temporary allocations"
#define PEAK "live at the peak"

/* etch leaks by call site: each known site with its exact count and bytes,
 * its file and line, and its callers (the program, a library it links, a
 * dlopen'ed one, a thread); the hotspots, temporaries and the peak. */
TEST(leaks_by_call_site) {
  if (!PRELOAD_OK) return;
  record_sites();
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s leaks --hotspots --top 0 %s", ETCH_BIN,
           trace_path());
  int st;
  char *out = run(cmd, &st);
  ASSERT_EQ_INT(st, 0);
  assert_row(out, NEVER, "leak_one", "leaky_sites.c", " 1 11 main <");
  assert_row(out, NEVER, "leak_two", "leaky_sites.c", " 2 44 main <");
  assert_row(out, NEVER, "leak_three", "leaky_sites.c",
             " 3 99 three_caller < main <");
  assert_row(out, NEVER, "lib_leak", "leaky_lib.c", " 2 88 main <");
  assert_row(out, NEVER, "plugin_leak", "leaky_plugin.c", " 1 55 main <");
  assert_row(out, NEVER, "thread_leak", "leaky_sites.c",
             " 4 264 thread_main <");
  char row[2000];
  row_of(out, NEVER, "hot_alloc", row, sizeof row); /* all freed */
  ASSERT_EQ_STR(row, "");
  row_of(out, NEVER, "bulk_alloc", row, sizeof row);
  ASSERT_EQ_STR(row, "");
  /* The hotspots: the most allocations, the most bytes, each first. */
  ASSERT_TRUE(!strncmp(first_row(out, MOST_ALLOCS), "hot_alloc ", 10));
  assert_row(out, MOST_ALLOCS, "hot_alloc", "leaky_sites.c", " 1000 47020 main <");
  assert_row(out, MOST_ALLOCS, "bulk_alloc", "leaky_sites.c", " 10 100000 main <");
  ASSERT_TRUE(!strncmp(first_row(out, MOST_BYTES), "bulk_alloc ", 11));
  assert_row(out, MOST_BYTES, "hot_alloc", "leaky_sites.c", " 47020 1000 main <");
  /* Every hot_alloc block is freed before main allocates again; no
   * bulk_alloc block is. */
  assert_row(out, TEMPS, "hot_alloc", "leaky_sites.c", " 1000 1000 main <");
  row_of(out, TEMPS, "bulk_alloc", row, sizeof row);
  ASSERT_EQ_STR(row, "");
  /* At the peak every bulk block and every leak so far is live, no
   * hot_alloc block. */
  assert_row(out, PEAK, "bulk_alloc", "leaky_sites.c", " 10 100000 main <");
  assert_row(out, PEAK, "leak_three", "leaky_sites.c", " 3 99 three_caller <");
  assert_row(out, PEAK, "thread_leak", "leaky_sites.c", " 4 264 thread_main <");
  row_of(out, PEAK, "hot_alloc", row, sizeof row);
  ASSERT_EQ_STR(row, "");
  free(out);
}

/* The same as JSON: each site with its frames, innermost first. */
TEST(leaks_by_call_site_json) {
  if (!PRELOAD_OK) return;
  record_sites();
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s leaks --json --top 0 %s", ETCH_BIN,
           trace_path());
  int st;
  char *out = run(cmd, &st);
  ASSERT_EQ_INT(st, 0);
  ASSERT_TRUE(!strncmp(out, "{\"allocations\": ", 16));
  ASSERT_CONTAINS(out, "\"exact\": true,\n \"sites\": [\n  {\"function\": ");
  const struct {
    const char *fn, *counts;
  } want[] = {
      {"leak_three", "\"never_freed\": 3, \"never_freed_bytes\": 99, "
                     "\"allocations\": 3, \"bytes\": 99, \"temporary\": 0, "
                     "\"at_peak\": 3, \"at_peak_bytes\": 99}"},
      {"thread_leak", "\"never_freed\": 4, \"never_freed_bytes\": 264, "
                      "\"allocations\": 4, \"bytes\": 264, \"temporary\": 0"},
      {"hot_alloc", "\"never_freed\": 0, \"never_freed_bytes\": 0, "
                    "\"allocations\": 1000, \"bytes\": 47020, "
                    "\"temporary\": 1000, \"at_peak\": 0, "
                    "\"at_peak_bytes\": 0}"},
      {"bulk_alloc", "\"never_freed\": 0, \"never_freed_bytes\": 0, "
                     "\"allocations\": 10, \"bytes\": 100000, "
                     "\"temporary\": 0, \"at_peak\": 10, "
                     "\"at_peak_bytes\": 100000}"},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char key[100];
    snprintf(key, sizeof key, "\n  {\"function\": \"%s\", \"file\": \"",
             want[i].fn);
    const char *at = strstr(out, key);
    if (!at) FAIL("no site %s in:\n%s", want[i].fn, out);
    const char *eol = strchr(at + 1, '\n');
    const char *c = strstr(at, want[i].counts);
    if (!c || (eol && c > eol))
      FAIL("site %s: expected %s in:\n%.*s", want[i].fn, want[i].counts,
           (int)(eol ? eol - at : 400), at);
  }
  /* leak_three's frames: itself, three_caller, main. */
  ASSERT_TRUE(strstr(out, "\"frames\": [{\"function\": \"leak_three\"") != NULL);
  const char *lt = strstr(out, "\"frames\": [{\"function\": \"leak_three\"");
  const char *tc = strstr(lt, "{\"function\": \"three_caller\"");
  const char *mn = strstr(lt, "{\"function\": \"main\"");
  ASSERT_TRUE(tc && mn && tc < mn && mn < strchr(lt, '\n'));
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

/* One CSV text with every field unquoted and trace_processor's "[NULL]"
 * as an empty field, as etch query --csv writes NULL (no field of these
 * tables holds a comma or a quote). */
static char *csv_plain(const char *in) {
  size_t n = strlen(in);
  char *out = malloc(n + 1), *o = out;
  for (const char *p = in; *p; p++) {
    if (!strncmp(p, "\"[NULL]\"", 8)) {
      p += 7;
      continue;
    }
    if (*p != '"') *o++ = *p;
  }
  *o = 0;
  return out;
}

/* The rows of the stack tables, etch query's and trace_processor's on the
 * same trace: the same mappings, frames (with their symbols), stacks and
 * allocations on each stack. Compared by what they hold, not by id:
 * trace_processor repeats a mapping, and its frames and stacks, for each
 * sequence (thread) that interned it, where etch has one row (see
 * docs/analysis.md). */
#define STACK_PATHS                                                         \
  "with recursive p(id, depth, path) as ("                                  \
  " select c.id, c.depth, m.name || '+' || cast(f.rel_pc as varchar)"       \
  " from stack_profile_callsite c"                                          \
  " join stack_profile_frame f on f.id = c.frame_id"                        \
  " join stack_profile_mapping m on m.id = f.mapping"                       \
  " where c.parent_id is null"                                              \
  " union all"                                                              \
  " select c.id, c.depth,"                                                  \
  " p.path || ' > ' || m.name || '+' || cast(f.rel_pc as varchar)"         \
  " from stack_profile_callsite c join p on c.parent_id = p.id"             \
  " join stack_profile_frame f on f.id = c.frame_id"                        \
  " join stack_profile_mapping m on m.id = f.mapping) "
TEST(etch_query_stack_tables_are_trace_processors) {
  if (!PRELOAD_OK) return;
  record_sites();
  static const char *const kQueries[] = {
      "select distinct build_id, exact_offset, start_offset, start, "
      "\"end\", load_bias, name from stack_profile_mapping "
      "order by name, start",
      "select distinct m.name as object, f.rel_pc, f.name, s.name as fn, "
      "s.source_file, s.line_number from stack_profile_frame f "
      "join stack_profile_mapping m on m.id = f.mapping "
      "left join stack_profile_symbol s on s.symbol_set_id = f.symbol_set_id "
      "order by object, f.rel_pc",
      STACK_PATHS "select distinct depth, path from p order by path",
      STACK_PATHS "select path, count(*) as n "
      "from __intrinsic_track_event_callstacks e "
      "join p on p.id = e.callsite_id group by path order by path",
  };
  for (size_t i = 0; i < sizeof kQueries / sizeof kQueries[0]; i++) {
    char sql[4096], cmd[2048];
    snprintf(sql, sizeof sql, "%s;\n", kQueries[i]);
    char *tp = csv_plain(tp_query(sql));
    snprintf(cmd, sizeof cmd, "%s query --csv --no-cache -f %s/q.sql %s",
             ETCH_BIN, etch_test_tmpdir(), trace_path()); /* tp_query's */
    int st;
    char *etch = run(cmd, &st);
    ASSERT_EQ_INT(st, 0);
    if (strcmp(etch, tp))
      FAIL("%s\netch query:\n%s\ntrace_processor:\n%s", kQueries[i], etch,
           tp);
    ASSERT_TRUE(strchr(strchr(etch, '\n') + 1, '\n') != NULL); /* rows */
    free(etch);
    free(tp);
  }
}
#endif

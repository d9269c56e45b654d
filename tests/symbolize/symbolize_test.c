/*
 * symbolize_test.c - frames named after the recording, from the binaries:
 * etch symbolize on traces sym_prog wrote with ETCH_OUT (nothing named in
 * the program), and etch record naming them when the program ends. Each
 * allocation's innermost frame is sym_take; its caller is the function
 * checked: named with file and line from DWARF, through a library it
 * links and one it dlopens late; in a stripped copy by the dynamic symbol
 * table or MODULE+0xOFFSET; in a copy moved away, found with --symbols by
 * build id; never from another binary at the recorded path. Then the
 * symbolizer alone on files that are no ELF.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "symbolize/symbolize.h"
#include "test.h"

#define ASSERT_CONTAINS(hay, needle)                    \
  do {                                                  \
    if (!strstr((hay), (needle)))                       \
      FAIL("expected \"%s\" in:\n%s", (needle), (hay)); \
  } while (0)
#define ASSERT_LACKS(hay, needle)                          \
  do {                                                     \
    if (strstr((hay), (needle)))                           \
      FAIL("did not expect \"%s\" in:\n%s", (needle), (hay)); \
  } while (0)

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

static char *sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *sh(const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  int st;
  char *out = run(cmd, &st);
  if (st != 0) FAIL("%s: exit %d:\n%s", cmd, st, out);
  return out;
}

static const char *tmp(const char *name) {
  static char p[8][700];
  static int k;
  char *s = p[k++ % 8];
  snprintf(s, sizeof p[0], "%s/%s", etch_test_tmpdir(), name);
  return s;
}

/* The callers of sym_take, each with file and line, a row each. */
#define CALLERS                                                            \
  "select s2.name as fn, s2.source_file like '%%/sym_%%.c' as has_file,"  \
  " s2.line_number > 0 as has_line"                                        \
  " from stack_profile_callsite cs"                                        \
  " join stack_profile_frame f on f.id = cs.frame_id"                      \
  " join stack_profile_symbol s on s.symbol_set_id = f.symbol_set_id"      \
  " join stack_profile_callsite p on p.id = cs.parent_id"                  \
  " join stack_profile_frame f2 on f2.id = p.frame_id"                     \
  " join stack_profile_symbol s2 on s2.symbol_set_id = f2.symbol_set_id"   \
  " where s.name = 'sym_take' order by 1"

static char *callers(const char *trace) {
  FILE *f = fopen(tmp("q.sql"), "w");
  ASSERT_TRUE(f != NULL);
  fprintf(f, CALLERS ";\n");
  fclose(f);
  return sh("%s query --csv --no-cache -f %s %s", ETCH_BIN, tmp("q.sql"),
            trace);
}

/* `prog` run with ETCH_OUT=trace: its stacks, no names. */
static void run_prog(const char *prog, const char *trace) {
  free(sh("ETCH_OUT=%s ETCH_CATEGORIES=memory %s %s >/dev/null", trace, prog,
          SYM_PLUGIN));
}

static const char kAllNamed[] =
    "fn,has_file,has_line\n"
    "sym_exported,1,1\n"
    "sym_lib_alloc,1,1\n"
    "sym_plugin_alloc,1,1\n"
    "sym_static,1,1\n";

/* Every frame's function name, once each. */
static char *names(const char *trace) {
  FILE *f = fopen(tmp("n.sql"), "w");
  ASSERT_TRUE(f != NULL);
  fprintf(f, "select distinct s.name from stack_profile_frame f"
             " join stack_profile_symbol s using (symbol_set_id)"
             " order by 1;\n");
  fclose(f);
  return sh("%s query --csv --no-cache -f %s %s", ETCH_BIN, tmp("n.sql"),
            trace);
}

TEST(symbolize_names_every_frame_with_file_and_line_once) {
  const char *trace = tmp("plain.pftrace");
  run_prog(SYM_PROG, trace);
  /* Nothing named in the program. */
  char *out = callers(trace);
  ASSERT_EQ_STR(out, "fn,has_file,has_line\n");
  free(out);
  out = sh("%s symbolize %s 2>&1", ETCH_BIN, trace);
  ASSERT_CONTAINS(out, "symbols: ");
  ASSERT_CONTAINS(out, " frames named from ");
  free(out);
  out = callers(trace);
  ASSERT_EQ_STR(out, kAllNamed);
  free(out);
  /* Symbol versions cut off (the C library's __libc_start_main@@...). */
  out = names(trace);
  ASSERT_CONTAINS(out, "\nmain\n");
  ASSERT_LACKS(out, "@");
  free(out);
  /* Idempotent: the second run adds nothing. */
  size_t len1 = 0, len2 = 0;
  free(etch_test_read_file(trace, &len1));
  out = sh("%s symbolize %s 2>&1", ETCH_BIN, trace);
  ASSERT_CONTAINS(out, "every frame has its names already; nothing added");
  free(out);
  free(etch_test_read_file(trace, &len2));
  ASSERT_EQ_U64(len1, len2);
}

#ifdef ETCH_TP
TEST(trace_processor_reads_the_names) {
  const char *trace = tmp("tp.pftrace");
  run_prog(SYM_PROG, trace);
  free(sh("%s symbolize -q %s", ETCH_BIN, trace));
  FILE *f = fopen(tmp("tq.sql"), "w");
  ASSERT_TRUE(f != NULL);
  fprintf(f, CALLERS ";\n");
  fclose(f);
  char *out = sh("%s -q %s %s 2>/dev/null", ETCH_TP, tmp("tq.sql"), trace);
  ASSERT_EQ_STR(out, "\"fn\",\"has_file\",\"has_line\"\n"
                     "\"sym_exported\",1,1\n"
                     "\"sym_lib_alloc\",1,1\n"
                     "\"sym_plugin_alloc\",1,1\n"
                     "\"sym_static\",1,1\n");
  free(out);
}
#endif

/* A stripped copy of the program: its exported functions by the dynamic
 * symbol table (no file), the others by module and offset. */
TEST(a_stripped_binary_by_dynsym_or_module_and_offset) {
  free(sh("rm -rf %s && mkdir -p %s && strip --strip-all -o %s/sym_prog %s",
          tmp("stripped"), tmp("stripped"), tmp("stripped"), SYM_PROG));
  char trace[700];
  snprintf(trace, sizeof trace, "%s", tmp("stripped.pftrace"));
  char prog[700];
  snprintf(prog, sizeof prog, "%s/sym_prog", tmp("stripped"));
  run_prog(prog, trace);
  free(sh("%s symbolize -q %s", ETCH_BIN, trace));
  char *out = callers(trace);
  ASSERT_CONTAINS(out, "\nsym_exported,,\n");
  ASSERT_CONTAINS(out, "\nsym_lib_alloc,1,1\n");
  ASSERT_CONTAINS(out, "\nsym_plugin_alloc,1,1\n");
  ASSERT_CONTAINS(out, "\nsym_prog+0x");
  ASSERT_LACKS(out, "sym_static");
  free(out);
}

/* A copy run, then moved: not at its recorded path any more; found by
 * build id in a --symbols directory. Without it, module and offset. */
TEST(a_moved_binary_found_by_build_id_with_symbols_dir) {
  free(sh("rm -rf %s %s && mkdir -p %s %s && cp %s %s/sym_prog", tmp("ran"),
          tmp("moved"), tmp("ran"), tmp("moved"), SYM_PROG, tmp("ran")));
  char trace[700];
  snprintf(trace, sizeof trace, "%s", tmp("moved.pftrace"));
  run_prog(tmp("ran/sym_prog"), trace);
  free(sh("mv %s/sym_prog %s/renamed", tmp("ran"), tmp("moved")));
  char *out = sh("%s symbolize %s -o %s 2>&1", ETCH_BIN, trace,
                 tmp("moved1.pftrace"));
  ASSERT_CONTAINS(out, "/ran/sym_prog: not found (nor a file with build id ");
  free(out);
  out = names(tmp("moved1.pftrace"));
  ASSERT_CONTAINS(out, "\nsym_lib_alloc\n");
  ASSERT_CONTAINS(out, "\nsym_prog+0x");
  ASSERT_LACKS(out, "sym_static");
  free(out);
  /* -o left the trace as it was; now with the directory. */
  out = sh("%s symbolize %s --symbols %s 2>&1", ETCH_BIN, trace,
           tmp("moved"));
  ASSERT_LACKS(out, "not found");
  free(out);
  out = callers(trace);
  ASSERT_EQ_STR(out, kAllNamed);
  free(out);
}

/* Another build of the program at the recorded path: not used. */
TEST(another_build_at_the_path_is_not_used) {
  free(sh("rm -rf %s && mkdir -p %s && cp %s %s/sym_prog", tmp("rebuilt"),
          tmp("rebuilt"), SYM_PROG, tmp("rebuilt")));
  char trace[700];
  snprintf(trace, sizeof trace, "%s", tmp("rebuilt.pftrace"));
  run_prog(tmp("rebuilt/sym_prog"), trace);
  free(sh("cp %s %s/sym_prog", SYM_PROG_V2, tmp("rebuilt")));
  char *out = sh("%s symbolize %s 2>&1", ETCH_BIN, trace);
  ASSERT_CONTAINS(out, "/rebuilt/sym_prog has build id ");
  ASSERT_CONTAINS(out, ": not used");
  free(out);
  out = names(trace);
  ASSERT_CONTAINS(out, "\nsym_lib_alloc\n");
  ASSERT_CONTAINS(out, "\nsym_prog+0x");
  ASSERT_LACKS(out, "sym_static");
  ASSERT_LACKS(out, "sym_exported");
  ASSERT_LACKS(out, "sym_take");
  free(out);
}

/* etch record names the frames when the program ends. */
TEST(etch_record_names_the_frames) {
  const char *trace = tmp("recorded.pftrace");
  free(sh("ETCH_CATEGORIES=memory %s record -q -o %s -- %s %s >/dev/null "
          "2>&1",
          ETCH_BIN, trace, SYM_PROG, SYM_PLUGIN));
  char *out = callers(trace);
  ASSERT_EQ_STR(out, kAllNamed);
  free(out);
  out = sh("%s symbolize %s 2>&1", ETCH_BIN, trace);
  ASSERT_CONTAINS(out, "nothing added");
  free(out);
}

/* A trace with no call stacks: nothing to name, nothing added, no error
 * (etch record runs the step on every trace). */
TEST(a_trace_without_stacks_is_left_as_it_is) {
  char trace[700];
  snprintf(trace, sizeof trace, "%s", tmp("nostacks.pftrace"));
  free(sh("ETCH_OUT=%s ETCH_CATEGORIES=none %s %s >/dev/null", trace,
          SYM_PROG, SYM_PLUGIN));
  size_t len1 = 0, len2 = 0;
  free(etch_test_read_file(trace, &len1));
  char *out = sh("%s symbolize %s 2>&1", ETCH_BIN, trace);
  ASSERT_EQ_STR(out, "symbols: every frame has its names already; nothing "
                     "added\n");
  free(out);
  free(etch_test_read_file(trace, &len2));
  ASSERT_EQ_U64(len1, len2);
}

/* The symbolizer on what a trace may name: no file, a directory, a file
 * that is no ELF, a truncated ELF, a build id that is no hex. */
TEST(hostile_objects_are_messages) {
  etch__symbolizer *s = etch__symbolizer_new(NULL, 0);
  ASSERT_TRUE(s != NULL);
  etch__sym_object *o;
  char msg[1024];
  ASSERT_EQ_INT(etch__symbolizer_open(s, "/nonexistent/x.so", "abcd", &o, msg,
                                      sizeof msg),
                ETCH__SYM_NOT_FOUND);
  ASSERT_TRUE(o == NULL);
  ASSERT_CONTAINS(msg, "not found");
  ASSERT_EQ_INT(etch__symbolizer_open(s, etch_test_tmpdir(), "", &o, msg,
                                      sizeof msg),
                ETCH__SYM_NOT_FOUND);
  FILE *f = fopen(tmp("junk.so"), "w");
  ASSERT_TRUE(f != NULL);
  fputs("not an ELF file at all", f);
  fclose(f);
  ASSERT_EQ_INT(etch__symbolizer_open(s, tmp("junk.so"), "", &o, msg,
                                      sizeof msg),
                ETCH__SYM_NOT_FOUND);
  /* The first 300 bytes of a real ELF: headers promising what is not
   * there. */
  free(sh("head -c 300 %s > %s", SYM_PROG, tmp("cut.so")));
  etch__sym_status st =
      etch__symbolizer_open(s, tmp("cut.so"), "", &o, msg, sizeof msg);
  if (st == ETCH__SYM_FOUND) {
    etch__sym_line sl;
    ASSERT_FALSE(etch__sym_lookup(o, 0x1000, &sl));
  } else {
    ASSERT_TRUE(msg[0] != '\0');
  }
  ASSERT_EQ_INT(etch__symbolizer_open(s, "", "../../etc/passwd", &o, msg,
                                      sizeof msg),
                ETCH__SYM_NOT_FOUND);
  etch__symbolizer_free(s);
}

/* sym_prog cut at many lengths and with bytes changed at many offsets:
 * each copy opened and looked up at many addresses; never a crash (the
 * ASan build runs this too). */
TEST(cut_and_damaged_elf_files_never_crash) {
  size_t len = 0;
  uint8_t *elf = etch_test_read_file(SYM_PROG, &len);
  ASSERT_TRUE(elf != NULL && len > 4096);
  uint8_t *copy = malloc(len);
  ASSERT_TRUE(copy != NULL);
  unsigned files = 0, found = 0, lookups = 0;
  uint32_t seed = 12345;
  for (int round = 0; round < 160; round++) {
    size_t n = len;
    memcpy(copy, elf, len);
    if (round < 60) {
      n = (size_t)round * (len / 60) + 1; /* cut */
    } else {
      for (int k = 0; k < 8; k++) { /* changed bytes, headers most */
        seed = seed * 1103515245u + 12345u;
        size_t at = (seed >> 8) % (round < 110 ? 256 : len);
        copy[at] ^= (uint8_t)(seed >> 24 | 1);
      }
    }
    char path[700];
    snprintf(path, sizeof path, "%s/damaged%d", etch_test_tmpdir(), round);
    FILE *f = fopen(path, "wb");
    ASSERT_TRUE(f != NULL);
    ASSERT_EQ_U64(fwrite(copy, 1, n, f), n);
    fclose(f);
    etch__symbolizer *s = etch__symbolizer_new(NULL, 0);
    ASSERT_TRUE(s != NULL);
    etch__sym_object *o;
    char msg[1024];
    files++;
    if (etch__symbolizer_open(s, path, "", &o, msg, sizeof msg) ==
        ETCH__SYM_FOUND) {
      found++;
      for (uint64_t a = 1; a < 0x3000; a += 0x61, lookups++) {
        etch__sym_line sl;
        if (etch__sym_lookup(o, a, &sl)) ASSERT_TRUE(sl.function != NULL);
      }
    } else {
      ASSERT_TRUE(msg[0] != '\0');
    }
    etch__symbolizer_free(s);
    unlink(path);
  }
  fprintf(stderr, "%u damaged files, %u read, %u lookups\n", files, found,
          lookups);
  free(copy);
  free(elf);
}


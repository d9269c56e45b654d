/*
 * symbolize.c - names the frames of the call stacks libetch_malloc.so
 * recorded, when the session stops (never while the program allocates):
 * elfutils' libdwfl over this process's loaded objects (/proc/self/maps),
 * each object's symbol table (.symtab, else .dynsym) for the function and,
 * when the object or its separate debug file (found by build id under
 * /usr/lib/debug/.build-id, or by debuglink) has DWARF line tables, the
 * file and line. A frame is a return address: the call is the instruction
 * before it, so `pc - 1` is what is looked up.
 *
 * The process's objects are read once, at the first frame; an object
 * dlopen'ed since then is read when a frame falls outside the ones known.
 * The strings returned belong to libdwfl and last until the process ends.
 */
#define _GNU_SOURCE
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <unistd.h>

#include "symbolize.h"

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};
static Dwfl *dwfl;

static Dwfl *report(void) {
  Dwfl *d = dwfl_begin(&callbacks);
  if (!d) return NULL;
  dwfl_report_begin(d);
  if (dwfl_linux_proc_report(d, getpid()) != 0 ||
      dwfl_report_end(d, NULL, NULL) != 0) {
    dwfl_end(d);
    return NULL;
  }
  return d;
}

bool etch_malloc_symbolize(void *ctx, uintptr_t pc, etch_mem_symbol *out) {
  (void)ctx;
  if (!pc) return false;
  Dwarf_Addr a = (Dwarf_Addr)(pc - 1);
  if (!dwfl && !(dwfl = report())) return false;
  Dwfl_Module *m = dwfl_addrmodule(dwfl, a);
  if (!m) { /* an object loaded since: read the process again */
    Dwfl *d = report();
    if (!d) return false;
    dwfl_end(dwfl);
    dwfl = d;
    if (!(m = dwfl_addrmodule(dwfl, a))) return false;
  }
  const char *name = dwfl_module_addrname(m, a);
  if (!name) return false;
  out->function = name;
  out->file = NULL;
  out->line = 0;
  Dwfl_Line *line = dwfl_module_getsrc(m, a);
  int lineno = 0;
  const char *file =
      line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
  if (file) {
    out->file = file;
    out->line = lineno > 0 ? (uint32_t)lineno : 0;
  }
  return true;
}

/*
 * symbolize.h - names for the frames of a recorded trace, found after the
 * recording in the binaries themselves (never in the traced program):
 * etch symbolize and etch record (tools/etch/symbolize.c) use it.
 *
 * An object is the one a trace's mapping names: its recorded path when the
 * file there has the recorded GNU build id (or the trace recorded none);
 * else a file with that build id under the directories given (DIR/NAME,
 * DIR/.build-id/xx/rest[.debug], any ELF file in DIR) or under
 * /usr/lib/debug/.build-id. Its function names come from .symtab (else
 * .dynsym), its files and lines from the DWARF line tables, in the object
 * or in its separate debug file, through elfutils' libdwfl.
 *
 * A frame's address is its `rel_pc` as the trace has it: the address in
 * the object's own ELF address space (the pc less the object's load bias),
 * for a PIE, a shared object whose first segment starts above 0 and a
 * fixed-address executable alike. Frames are return addresses, so the
 * call is the instruction before: `rel_pc - 1` is what is looked up.
 *
 * Everything here is data from outside: a path or a build id from a trace,
 * a file that is no ELF, a truncated one. Failures are messages, never a
 * crash.
 */
#ifndef ETCH_SYMBOLIZE_SYMBOLIZE_H
#define ETCH_SYMBOLIZE_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct etch__symbolizer etch__symbolizer;
typedef struct etch__sym_object etch__sym_object;

/* A symbolizer looking in `dirs` (after the recorded path); NULL when out
 * of memory. */
etch__symbolizer *etch__symbolizer_new(const char *const *dirs, size_t ndirs);
void etch__symbolizer_free(etch__symbolizer *s);

typedef enum etch__sym_status {
  ETCH__SYM_FOUND = 0,
  ETCH__SYM_NOT_FOUND,    /* no file at the path, none with the build id */
  ETCH__SYM_MISMATCH,     /* the file at the path has another build id */
  ETCH__SYM_UNREADABLE    /* found, but no ELF libdwfl could read */
} etch__sym_status;

/* The object recorded at `path` with build id `build_id` (lowercase hex;
 * "" or NULL when the trace has none). *out is NULL unless FOUND; `msg`
 * says what was tried when not. Owned by the symbolizer. */
etch__sym_status etch__symbolizer_open(etch__symbolizer *s, const char *path,
                                       const char *build_id,
                                       etch__sym_object **out, char *msg,
                                       size_t cap);
/* The file the object was read from. */
const char *etch__sym_object_file(const etch__sym_object *o);

typedef struct etch__sym_line {
  const char *function; /* the function (the outermost, inlined code's) */
  const char *file;     /* NULL when no line table covers it */
  uint32_t line;
} etch__sym_line;

/* The names of the frame at `rel_pc` of object `o`; false when no symbol
 * covers it. The strings last as long as the symbolizer. */
bool etch__sym_lookup(etch__sym_object *o, uint64_t rel_pc,
                      etch__sym_line *out);

#endif /* ETCH_SYMBOLIZE_SYMBOLIZE_H */

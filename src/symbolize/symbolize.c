/*
 * symbolize.c - a trace's frames named from the binaries (symbolize.h
 * says where they are looked for and what a frame's address is).
 *
 * Each object is read by a libdwfl session of its own, reported offline
 * (as a file, not as a process's memory): its addresses are then the ELF
 * file's plus the session's bias (dwfl_module_getelf), 0 for most objects.
 * Objects are kept by (path, build id), found or not, so that a trace's
 * thousands of frames in one library open it once.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "symbolize/symbolize.h"

#define SYS_DEBUG_DIR "/usr/lib/debug"

struct etch__sym_object {
  char *path, *build_id; /* as the trace has them */
  char *file;            /* where it was found; NULL when not */
  etch__sym_status status;
  char *msg;
  Dwfl *dwfl;
  Dwfl_Module *mod;
  char **names; /* names made here (a version cut off), freed with it */
  size_t nnames, capnames;
};

struct etch__symbolizer {
  char **dirs;
  size_t ndirs;
  char *debuginfo_path; /* libdwfl's separate debug files: ours too */
  Dwfl_Callbacks cb;
  etch__sym_object **objs;
  size_t nobjs, capobjs;
};

etch__symbolizer *etch__symbolizer_new(const char *const *dirs, size_t ndirs) {
  elf_version(EV_CURRENT);
  etch__symbolizer *s = etch__calloc(1, sizeof *s);
  if (!s) return NULL;
  size_t len = sizeof "-:.debug:" SYS_DEBUG_DIR;
  for (size_t i = 0; i < ndirs; i++) len += strlen(dirs[i]) + 1;
  s->debuginfo_path = etch__malloc(len);
  s->dirs = ndirs ? etch__calloc(ndirs, sizeof *s->dirs) : NULL;
  if (!s->debuginfo_path || (ndirs && !s->dirs)) goto oom;
  strcpy(s->debuginfo_path, "-:.debug:" SYS_DEBUG_DIR);
  for (size_t i = 0; i < ndirs; i++) {
    if (!(s->dirs[i] = etch__strdup(dirs[i]))) goto oom;
    s->ndirs++;
    /* libdwfl splits its path at ':'; a directory with one is still
     * searched for the objects, not for their separate debug files. */
    if (dirs[i][0] == '/' && !strchr(dirs[i], ':')) {
      strcat(s->debuginfo_path, ":");
      strcat(s->debuginfo_path, dirs[i]);
    }
  }
  s->cb = (Dwfl_Callbacks){
      .find_elf = dwfl_build_id_find_elf,
      .find_debuginfo = dwfl_standard_find_debuginfo,
      .section_address = dwfl_offline_section_address,
      .debuginfo_path = &s->debuginfo_path,
  };
  return s;
oom:
  etch__symbolizer_free(s);
  return NULL;
}

static void object_free(etch__sym_object *o) {
  if (!o) return;
  if (o->dwfl) dwfl_end(o->dwfl);
  for (size_t i = 0; i < o->nnames; i++) free(o->names[i]);
  free(o->names);
  free(o->path);
  free(o->build_id);
  free(o->file);
  free(o->msg);
  free(o);
}

void etch__symbolizer_free(etch__symbolizer *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nobjs; i++) object_free(s->objs[i]);
  free(s->objs);
  for (size_t i = 0; i < s->ndirs; i++) free(s->dirs[i]);
  free(s->dirs);
  free(s->debuginfo_path);
  free(s);
}

const char *etch__sym_object_file(const etch__sym_object *o) {
  return o->file ? o->file : "";
}

/* ---- finding the file -------------------------------------------------- */

/* A regular file's GNU build id in hex into out[cap] ("" when it has none);
 * false when `file` is no regular file or no ELF. */
static bool file_build_id(const char *file, char *out, size_t cap) {
  out[0] = '\0';
  int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat sb;
  bool ok = false;
  if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (e && elf_kind(e) == ELF_K_ELF) {
      ok = true;
      const void *id = NULL;
      ssize_t n = dwelf_elf_gnu_build_id(e, &id);
      if (n > 0 && (size_t)n * 2 < cap)
        for (ssize_t i = 0; i < n; i++)
          snprintf(out + 2 * i, 3, "%02x", ((const uint8_t *)id)[i]);
    }
    if (e) elf_end(e);
  }
  close(fd);
  return ok;
}

/* A build id fit to be part of a path: hex, 2..64 digits. */
static bool clean_build_id(const char *b) {
  size_t n = strlen(b);
  if (n < 2 || n > 128 || n % 2) return false;
  for (size_t i = 0; i < n; i++)
    if (!((b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' && b[i] <= 'f')))
      return false;
  return true;
}

/* `file` when it is an ELF file with build id `want` (any, when `want` is
 * ""): its copy into o->file. */
static bool try_file(etch__sym_object *o, const char *file, const char *want) {
  char have[300];
  if (!file_build_id(file, have, sizeof have)) return false;
  if (*want && strcmp(have, want) != 0) return false;
  return (o->file = etch__strdup(file)) != NULL;
}

static bool try_dir(etch__sym_object *o, const char *dir, const char *base,
                    const char *want) {
  char p[8192];
  if (*base) {
    snprintf(p, sizeof p, "%s/%s", dir, base);
    if (try_file(o, p, want)) return true;
  }
  if (!*want) return false;
  static const char *const kSuffix[] = {".debug", ""};
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s/.build-id/%.2s/%s%s", dir, want, want + 2,
             kSuffix[i]);
    if (try_file(o, p, want)) return true;
  }
  DIR *d = opendir(dir);
  if (!d) return false;
  bool found = false;
  struct dirent *de;
  while (!found && (de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
    found = try_file(o, p, want);
  }
  closedir(d);
  return found;
}

__attribute__((format(printf, 2, 3))) static void set_msg(
    etch__sym_object *o, const char *fmt, ...) {
  char m[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  free(o->msg);
  o->msg = etch__strdup(m);
}

static void find_file(etch__symbolizer *s, etch__sym_object *o) {
  const char *want = o->build_id;
  const char *slash = strrchr(o->path, '/');
  const char *base = slash ? slash + 1 : o->path;
  char have[300] = "";
  bool at_path = *o->path && file_build_id(o->path, have, sizeof have);
  if (at_path && (!*want || !strcmp(have, want))) {
    o->file = etch__strdup(o->path);
    return;
  }
  for (size_t i = 0; i < s->ndirs && !o->file; i++)
    try_dir(o, s->dirs[i], base, want);
  if (!o->file && *want) {
    char p[512];
    snprintf(p, sizeof p, SYS_DEBUG_DIR "/.build-id/%.2s/%s.debug", want,
             want + 2);
    try_file(o, p, want);
  }
  if (o->file) return;
  if (at_path) {
    o->status = ETCH__SYM_MISMATCH;
    set_msg(o, "%s has build id %s, the trace's is %s: not used", o->path,
            *have ? have : "(none)", want);
  } else {
    o->status = ETCH__SYM_NOT_FOUND;
    if (*want)
      set_msg(o, "%s: not found (nor a file with build id %s)", o->path,
              want);
    else
      set_msg(o, "%s: not found", o->path);
  }
}

/* ---- reading it -------------------------------------------------------- */

static void report(etch__symbolizer *s, etch__sym_object *o) {
  const char *slash = strrchr(o->file, '/');
  o->dwfl = dwfl_begin(&s->cb);
  if (o->dwfl) {
    dwfl_report_begin(o->dwfl);
    o->mod = dwfl_report_offline(o->dwfl, slash ? slash + 1 : o->file,
                                 o->file, -1);
    if (dwfl_report_end(o->dwfl, NULL, NULL) != 0) o->mod = NULL;
  }
  if (!o->mod) {
    o->status = ETCH__SYM_UNREADABLE;
    set_msg(o, "%s: cannot read it: %s", o->file, dwfl_errmsg(-1));
  }
}

etch__sym_status etch__symbolizer_open(etch__symbolizer *s, const char *path,
                                       const char *build_id,
                                       etch__sym_object **out, char *msg,
                                       size_t cap) {
  *out = NULL;
  if (cap) msg[0] = '\0';
  if (!path) path = "";
  if (!build_id) build_id = "";
  etch__sym_object *o = NULL;
  for (size_t i = 0; i < s->nobjs && !o; i++)
    if (!strcmp(s->objs[i]->path, path) &&
        !strcmp(s->objs[i]->build_id, build_id))
      o = s->objs[i];
  if (!o) {
    if (s->nobjs == s->capobjs) {
      size_t c = s->capobjs ? s->capobjs * 2 : 16;
      etch__sym_object **q = etch__realloc(s->objs, c * sizeof *q);
      if (!q) {
        snprintf(msg, cap, "out of memory");
        return ETCH__SYM_UNREADABLE;
      }
      s->objs = q;
      s->capobjs = c;
    }
    o = etch__calloc(1, sizeof *o);
    if (!o || !(o->path = etch__strdup(path)) ||
        !(o->build_id =
              etch__strdup(clean_build_id(build_id) ? build_id : ""))) {
      object_free(o);
      snprintf(msg, cap, "out of memory");
      return ETCH__SYM_UNREADABLE;
    }
    s->objs[s->nobjs++] = o;
    if (!*path && !*o->build_id) {
      o->status = ETCH__SYM_NOT_FOUND;
      set_msg(o, "a mapping with no path and no build id");
    } else {
      find_file(s, o);
      if (o->file) report(s, o);
    }
  }
  if (o->status == ETCH__SYM_FOUND) *out = o;
  else snprintf(msg, cap, "%s", o->msg ? o->msg : "not found");
  return o->status;
}

/* `name` without the symbol version libdwfl appends ("memcpy@@GLIBC_2.14"
 * is memcpy, as the program calls it); NULL out of memory. */
static const char *unversioned(etch__sym_object *o, const char *name) {
  const char *at = strchr(name, '@');
  if (!at || at == name) return name;
  if (o->nnames == o->capnames) {
    size_t c = o->capnames ? o->capnames * 2 : 16;
    char **q = etch__realloc(o->names, c * sizeof *q);
    if (!q) return NULL;
    o->names = q;
    o->capnames = c;
  }
  char *n = etch__strndup(name, (size_t)(at - name));
  if (n) o->names[o->nnames++] = n;
  return n;
}

bool etch__sym_lookup(etch__sym_object *o, uint64_t rel_pc,
                      etch__sym_line *out) {
  *out = (etch__sym_line){NULL, NULL, 0};
  if (!o || !o->mod || rel_pc == 0) return false;
  GElf_Addr bias = 0;
  if (!dwfl_module_getelf(o->mod, &bias)) return false;
  Dwarf_Addr a = rel_pc - 1 + bias;
  GElf_Off off = 0;
  GElf_Sym sym;
  const char *name =
      dwfl_module_addrinfo(o->mod, a, &off, &sym, NULL, NULL, NULL);
  /* A symbol with no size says nothing of where its code ends. */
  if (!name || !*name || sym.st_size == 0 || off >= sym.st_size) return false;
  if (!(out->function = unversioned(o, name))) return false;
  Dwfl_Line *line = dwfl_module_getsrc(o->mod, a);
  int lineno = 0;
  const char *file =
      line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
  if (file && *file) {
    out->file = file;
    out->line = lineno > 0 ? (uint32_t)lineno : 0;
  }
  return true;
}

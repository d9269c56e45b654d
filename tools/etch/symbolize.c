/*
 * symbolize.c - etch symbolize: names for a trace's frames, from the
 * binaries, appended to the trace (and the same step at the end of etch
 * record).
 *
 * The trace is read with the reader (its call-stack tables); every frame
 * that has no names yet (no ModuleSymbols for its object and address, no
 * function interned with it) is looked up in its object (src/symbolize)
 * and named by function, file and line, or by "MODULE+0xOFFSET" when no
 * symbol covers it or the object is not there. The names go at the end of
 * the trace as ModuleSymbols packets, the form trace_processor applies to
 * every frame of the object with that build id (and path) and address, and
 * the reader too: a second run finds every frame named and adds nothing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/containers.h"
#include "cli.h"
#include "etch/reader.h"
#include "proto/perfetto.h"
#include "symbolize/symbolize.h"

/* ---- the packets ------------------------------------------------------- */

static int put_varint(etch_vec *v, uint64_t x) {
  uint8_t b[10];
  size_t n = 0;
  do {
    b[n++] = (uint8_t)((x & 0x7f) | (x > 0x7f ? 0x80 : 0));
    x >>= 7;
  } while (x);
  return etch__vec_push(v, b, n);
}

static int put_bytes(etch_vec *v, uint32_t field, const void *p, size_t n) {
  int rc = put_varint(v, (uint64_t)field << 3 | 2);
  if (!rc) rc = put_varint(v, n);
  if (!rc && n) rc = etch__vec_push(v, p, n);
  return rc;
}

static int put_uint(etch_vec *v, uint32_t field, uint64_t x) {
  int rc = put_varint(v, (uint64_t)field << 3);
  return rc ? rc : put_varint(v, x);
}

/* A frame to name: its object (a canonical mapping row) and address. */
typedef struct todo {
  uint32_t map;
  uint64_t rel_pc;
} todo;

static int todo_cmp(const void *a, const void *b) {
  const todo *x = a, *y = b;
  if (x->map != y->map) return x->map < y->map ? -1 : 1;
  return x->rel_pc < y->rel_pc ? -1 : x->rel_pc > y->rel_pc;
}

static size_t unhex(const char *h, uint8_t *out, size_t cap) {
  size_t n = 0;
  for (; h[0] && h[1] && n < cap; h += 2) {
    unsigned b;
    if (sscanf(h, "%2x", &b) != 1) break;
    out[n++] = (uint8_t)b;
  }
  return n;
}

typedef struct tally {
  size_t named, by_offset, objects;
} tally;

#define SYMS_PER_PACKET 128

/* One TracePacket { module_symbols } of frames t[0..n) of mapping `m`. */
static int put_packet(etch_vec *out, const etch_stack_mapping *m,
                      etch__sym_object *o,
                      const todo *t, size_t n, tally *ta) {
  etch_vec ms = {0}, as = {0}, ln = {0}, pkt = {0};
  int rc = put_bytes(&ms, ETCH_MODSYM_PATH, m->name, strlen(m->name));
  uint8_t bid[64];
  size_t nbid = unhex(m->build_id, bid, sizeof bid);
  if (!rc && nbid) rc = put_bytes(&ms, ETCH_MODSYM_BUILD_ID, bid, nbid);
  const char *slash = strrchr(m->name, '/');
  const char *base = slash ? slash + 1 : m->name;
  for (size_t i = 0; i < n && !rc; i++) {
    etch__sym_line sl;
    char off[512];
    if (o && etch__sym_lookup(o, t[i].rel_pc, &sl)) {
      ta->named++;
    } else {
      snprintf(off, sizeof off, "%s+0x%llx", *base ? base : "?",
               (unsigned long long)t[i].rel_pc);
      sl = (etch__sym_line){off, NULL, 0};
      ta->by_offset++;
    }
    ln.len = as.len = 0;
    rc = put_bytes(&ln, ETCH_LINE_FUNCTION_NAME, sl.function,
                   strlen(sl.function));
    if (!rc && sl.file)
      rc = put_bytes(&ln, ETCH_LINE_SOURCE_FILE_NAME, sl.file, strlen(sl.file));
    if (!rc && sl.line) rc = put_uint(&ln, ETCH_LINE_LINE_NUMBER, sl.line);
    if (!rc) rc = put_uint(&as, ETCH_ADDRSYM_ADDRESS, t[i].rel_pc);
    if (!rc) rc = put_bytes(&as, ETCH_ADDRSYM_LINES, ln.data, ln.len);
    if (!rc) rc = put_bytes(&ms, ETCH_MODSYM_ADDRESS_SYMBOLS, as.data, as.len);
  }
  if (!rc) rc = put_bytes(&pkt, ETCH_PKT_MODULE_SYMBOLS, ms.data, ms.len);
  if (!rc) rc = put_bytes(out, ETCH_TRACE_PACKET, pkt.data, pkt.len);
  etch__vec_free(&ms);
  etch__vec_free(&as);
  etch__vec_free(&ln);
  etch__vec_free(&pkt);
  return rc;
}

/* ---- the trace --------------------------------------------------------- */

static void on_event(const etch_event *ev, void *user) { (void)ev, (void)user; }

/* The frames of `st` without names, by canonical mapping (the first row
 * with the same path and build id) and address, once each. */
static todo *unnamed_frames(const etch_stacks *st, size_t *n) {
  *n = 0;
  todo *t = etch__malloc((st->nframes ? st->nframes : 1) * sizeof *t);
  uint32_t *canon =
      st->nmappings ? etch__malloc(st->nmappings * sizeof *canon) : NULL;
  if (!t || (st->nmappings && !canon)) {
    free(t);
    free(canon);
    return NULL;
  }
  for (size_t i = 0; i < st->nmappings; i++) {
    canon[i] = (uint32_t)i;
    for (size_t k = 0; k < i; k++)
      if (!strcmp(st->mappings[k].name, st->mappings[i].name) &&
          !strcmp(st->mappings[k].build_id, st->mappings[i].build_id)) {
        canon[i] = (uint32_t)k;
        break;
      }
  }
  for (size_t i = 0; i < st->nframes; i++) {
    const etch_stack_frame *f = &st->frames[i];
    if (f->nsymbols || f->name[0] || f->mapping >= st->nmappings) continue;
    const etch_stack_mapping *m = &st->mappings[f->mapping];
    if (!m->name[0]) continue; /* in no object: nothing can name it */
    t[(*n)++] = (todo){canon[f->mapping], f->rel_pc};
  }
  free(canon);
  qsort(t, *n, sizeof *t, todo_cmp);
  size_t k = 0;
  for (size_t i = 0; i < *n; i++)
    if (!k || todo_cmp(&t[k - 1], &t[i])) t[k++] = t[i];
  *n = k;
  return t;
}

/* The packets naming frames t[0..n) into *out, saying on `log` which
 * objects were not used. */
static int name_frames(const etch_stacks *st, const todo *t, size_t n,
                       etch__symbolizer *sz, etch_vec *out, tally *ta,
                       FILE *log) {
  int rc = 0;
  for (size_t i = 0; i < n && !rc;) {
    const etch_stack_mapping *m = &st->mappings[t[i].map];
    size_t end = i;
    while (end < n && t[end].map == t[i].map) end++;
    etch__sym_object *o = NULL;
    char msg[1200];
    if (etch__symbolizer_open(sz, m->name, m->build_id, &o, msg, sizeof msg) ==
        ETCH__SYM_FOUND)
      ta->objects++;
    else if (log)
      fprintf(log, "  %s: %zu frames named by module and offset\n", msg,
              end - i);
    for (size_t k = i; k < end && !rc; k += SYMS_PER_PACKET)
      rc = put_packet(out, m, o, t + k,
                      end - k < SYMS_PER_PACKET ? end - k : SYMS_PER_PACKET,
                      ta);
    i = end;
  }
  return rc ? runtime_error("out of memory") : 0;
}

/* `in` whole up to `len` bytes into `out` (created or truncated). */
static int copy_prefix(const char *in, const char *out, uint64_t len) {
  int fi = open(in, O_RDONLY | O_CLOEXEC);
  if (fi < 0) return runtime_error("%s: %s", in, strerror(errno));
  int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fo < 0) {
    close(fi);
    return runtime_error("%s: %s", out, strerror(errno));
  }
  char buf[1 << 16];
  int rc = 0;
  while (len && !rc) {
    ssize_t r = read(fi, buf, len < sizeof buf ? len : sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      rc = runtime_error("%s: %s", in, r ? strerror(errno) : "shorter than read");
      break;
    }
    if (write(fo, buf, (size_t)r) != r) rc = runtime_error("%s: %s", out, strerror(errno));
    len -= (uint64_t)r;
  }
  close(fi);
  if (close(fo) != 0 && !rc) rc = runtime_error("%s: %s", out, strerror(errno));
  return rc;
}

/* The packets appended to `path` at `at` (its whole packets' end). */
static int append_at(const char *path, uint64_t at, const etch_vec *pk) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return runtime_error("%s: %s", path, strerror(errno));
  int rc = 0;
  if (ftruncate(fd, (off_t)at) != 0 || lseek(fd, (off_t)at, SEEK_SET) < 0)
    rc = runtime_error("%s: %s", path, strerror(errno));
  for (size_t done = 0; !rc && done < pk->len;) {
    ssize_t w = write(fd, pk->data + done, pk->len - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) rc = runtime_error("%s: %s", path, strerror(errno));
    else done += (size_t)w;
  }
  if (close(fd) != 0 && !rc) rc = runtime_error("%s: %s", path, strerror(errno));
  return rc;
}

static bool is_gzip(const char *path) {
  unsigned char m[2] = {0, 0};
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  size_t n = fread(m, 1, 2, f);
  fclose(f);
  return n == 2 && m[0] == 0x1f && m[1] == 0x8b;
}

int cli_symbolize_trace(const char *in, const char *out,
                        const char *const *dirs, size_t ndirs, FILE *log,
                        size_t *nframes) {
  *nframes = 0;
  if (!out) out = in;
  if (is_gzip(in))
    return runtime_error("%s: a gzip-compressed file; symbolize the trace "
                         "before compressing it",
                         in);
  etch_reader *r = NULL;
  if (etch_reader_open_file(&r, in) != ETCH_OK)
    return runtime_error("%s", etch_last_error());
  etch_reader_set_allow_truncated(r, 1);
  /* In file order: nothing held for sorting (the events are not used). */
  etch_reader_set_order(r, ETCH_ORDER_FILE);
  etch_reader_on(r, NULL, NULL, on_event, NULL);
  int rc = 0;
  etch_stacks st;
  if (etch_reader_run(r) != ETCH_OK || etch_reader_stacks(r, &st) != ETCH_OK) {
    rc = runtime_error("%s", etch_last_error());
    etch_reader_close(r);
    return rc;
  }
  etch_reader_stats rs;
  etch_reader_get_stats(r, &rs);
  struct stat sb;
  uint64_t whole = rs.truncated_bytes ? rs.truncated_offset
                   : stat(in, &sb) == 0 ? (uint64_t)sb.st_size
                                        : rs.bytes;
  size_t n = 0;
  todo *t = unnamed_frames(&st, &n);
  etch__symbolizer *sz = etch__symbolizer_new(dirs, ndirs);
  etch_vec pk = {0};
  tally ta = {0};
  if (!t || !sz)
    rc = runtime_error("out of memory");
  else
    rc = name_frames(&st, t, n, sz, &pk, &ta, log);
  etch_reader_close(r);
  etch__symbolizer_free(sz);
  free(t);
  if (!rc && strcmp(out, in) != 0) rc = copy_prefix(in, out, whole);
  if (!rc && pk.len) rc = append_at(out, whole, &pk);
  etch__vec_free(&pk);
  *nframes = n;
  if (!rc && log && n)
    fprintf(log, "symbols: %zu frames named from %zu objects, %zu by module "
                 "and offset\n",
            ta.named, ta.objects, ta.by_offset);
  return rc;
}

/* ---- the verb ---------------------------------------------------------- */

typedef struct symbolize_args {
  const char *out_path;
  const char *dirs[64];
  size_t ndirs;
  bool quiet;
} symbolize_args;

static int sym_dir(const command *cmd, const char *opt, const char *value,
                   void *args) {
  symbolize_args *a = (symbolize_args *)args;
  if (a->ndirs == sizeof a->dirs / sizeof a->dirs[0])
    return usage_error(cmd, "%s: at most 64 directories", opt);
  a->dirs[a->ndirs++] = value;
  return 0;
}

static int cmd_symbolize(int argc, char **argv) {
  symbolize_args sa = {0};
  opts o;
  int rc = 0;
  if (!cli_parse(&cli_symbolize, argc, argv, &sa, &o, &rc)) return rc;
  if (o.noperands != 1)
    rc = usage_error(&cli_symbolize, "one trace, please");
  else {
    size_t n = 0;
    rc = cli_symbolize_trace(o.operands[0], sa.out_path, sa.dirs, sa.ndirs,
                             sa.quiet ? NULL : stderr, &n);
    if (!rc && !n && !sa.quiet)
      fprintf(stderr, "symbols: every frame has its names already; nothing "
                      "added\n");
  }
  opts_free(&o);
  return rc;
}

static const cli_opt kSymbolizeOpts[] = {
    {0, "--symbols", "DIR",
     "look for the binaries here too (by name, by build id:\n"
     "DIR/.build-id/xx/rest[.debug], or any file in DIR); repeatable",
     CLI_FN(sym_dir)},
    {'o', "--output", "PATH", "write the named trace here (default: in place)",
     CLI_STR(symbolize_args, out_path)},
    {'q', "--quiet", NULL, "say nothing but errors",
     CLI_BOOL(symbolize_args, quiet)},
    {0},
};

const command cli_symbolize = {
    .name = "symbolize",
    .fn = cmd_symbolize,
    .summary = "name a trace's call-stack frames from the binaries",
    .synopsis = "etch symbolize [-q] [--symbols DIR]... TRACE [-o OUT]\n",
    .about =
        "Names every frame of the trace's call stacks (memory tracing's,\n"
        "CPU samples') that has no name yet: function from the object's\n"
        "symbol table (.symtab, else .dynsym), file and line from its DWARF\n"
        "line tables (or its separate debug file under /usr/lib/debug),\n"
        "appended to the trace as ModuleSymbols packets, which\n"
        "trace_processor and etch read. An object is read at its recorded\n"
        "path when its build id is the recorded one, else found by build id\n"
        "in the --symbols directories; a frame nothing names is named\n"
        "MODULE+0xOFFSET. etch record does this when the program ends; run\n"
        "it on traces written without etch record (ETCH_OUT). A second run\n"
        "adds nothing.\n",
    .opts = kSymbolizeOpts,
};

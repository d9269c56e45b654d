/*
 * stacks.c - call stacks: a sequence's interned mappings, frames and
 * callstacks (profile_common.proto's messages in InternedData), the names
 * ModuleSymbols packets give the frames, and the reader-wide tables of
 * etch_reader_stacks (see stacks.h).
 *
 * Every byte here may be hostile: iids that name nothing resolve to no
 * stack (interned_data_missing), a stack deeper than RD_STACK_MAX_FRAMES
 * is a malformed packet, and every table is bounded.
 */
#include "reader/stacks.h"

#include <stdlib.h>
#include <string.h>

#include "base/map.h"
#include "proto/perfetto.h"
#include "reader/errors.h"

/* ---- a sequence's entries, as written ------------------------------------ */

typedef struct stk_map {
  uint64_t build_iid, start, end, exact, start_off, bias;
  int64_t gid; /* the reader-wide row, -1 until resolved */
  uint32_t npath;
  uint64_t path[];
} stk_map;

typedef struct stk_frame {
  uint64_t name_iid, map_iid, rel_pc;
  int64_t gid;
} stk_frame;

typedef struct stk_stack {
  int64_t gid; /* the innermost frame's callsite; -2 until resolved, -1 none */
  uint32_t n;
  uint64_t frames[]; /* outermost first */
} stk_stack;

typedef struct rd_stack_seq {
  etch_idtab fnames, build_ids, paths; /* pooled strings (build ids in hex) */
  etch_idtab maps, frames, stacks;
  etch_arena arena;
} rd_stack_seq;

/* ---- the reader-wide tables ------------------------------------------------ */

typedef struct modsym {
  const char *module; /* pooled build id (hex) or path */
  uint64_t addr;
  uint32_t first, n; /* lines */
} modsym;

typedef struct rd_stacks {
  /* Each table: its rows in an etch_vec, their array (set as it moves;
   * the tables handed out by etch_reader_stacks) and their count. */
  etch_vec mapv, framev, csv, linev, msv;
  etch_stack_mapping *maps;
  size_t nmaps;
  etch_stack_frame *frames;
  size_t nframes;
  etch_stack_callsite *cs;
  size_t ncs;
  etch_stack_symbol *lines;
  size_t nlines;
  modsym *ms;
  size_t nms;
  /* hash -> row (a collision probes hash + 1, ...) */
  etch_u64map maps_ix, frames_ix, cs_ix, ms_ix;
  etch_vec path; /* scratch: a mapping's path being joined */
  int64_t empty_map; /* the mapping of frames that name none; -1 */
} rd_stacks;

static rd_stacks *stacks_of(etch_reader *r) {
  if (!r->stk) {
    r->stk = (rd_stacks *)etch__calloc(1, sizeof *r->stk);
    if (r->stk) r->stk->empty_map = -1;
  }
  return r->stk;
}

static rd_stack_seq *seq_of(rd_seq *seq) {
  if (!seq->stk) {
    seq->stk = (rd_stack_seq *)etch__calloc(1, sizeof *seq->stk);
    if (seq->stk) etch__arena_init(&seq->stk->arena, 4096);
  }
  return seq->stk;
}

/* Room for one more row of `elem` bytes in table v of n rows (written in
 * place at *a, which follows v's bytes). */
static int grow(etch_vec *v, void **a, size_t n, size_t elem) {
  if (n >= RD_STACK_MAX_ROWS)
    return etch__error(ETCH_ELIMIT, "more than %u rows of one call-stack "
                       "table", RD_STACK_MAX_ROWS);
  v->len = n * elem; /* the rows held */
  if (etch__vec_reserve(v, elem)) return ETCH_ENOMEM;
  *a = v->data;
  return 0;
}

static uint64_t hash3(uint64_t a, uint64_t b, uint64_t c) {
  return etch__mix64(a ^ etch__mix64(b ^ etch__mix64(c + 0x9e3779b97f4a7c15ull)));
}

/* The row of the key hashing to `h` that `eq(ctx, row)` accepts, or -1
 * with *free_key the key to add it under. */
static int64_t ix_find(const etch_u64map *ix, uint64_t h,
                       bool (*eq)(const void *ctx, size_t row),
                       const void *ctx, uint64_t *free_key) {
  for (uint64_t k = h;; k++) {
    int64_t row;
    if (!etch__u64map_get(ix, k, &row)) {
      *free_key = k;
      return -1;
    }
    if (eq(ctx, (size_t)row)) return row;
  }
}

static const char *hex_of(etch_reader *r, const uint8_t *b, size_t n) {
  static const char digits[] = "0123456789abcdef";
  char buf[2 * 64];
  if (n > 64) n = 64; /* a build id is 20 bytes; longer ones are cut */
  for (size_t i = 0; i < n; i++) {
    buf[2 * i] = digits[b[i] >> 4];
    buf[2 * i + 1] = digits[b[i] & 15];
  }
  return etch__strpool_get(&r->pool, buf, 2 * n);
}

/* ---- InternedData --------------------------------------------------------- */

static int put(etch_reader *r, const rd_src *src, const uint8_t *at,
               etch_idtab *t, uint64_t iid, void *val) {
  if (t->count >= RD_MAX_INTERNED && !etch__idtab_get(t, iid))
    return etch__rd_fail(r, src, at, ETCH_ELIMIT,
                         "more than %u interned entries of one kind on a "
                         "sequence",
                         RD_MAX_INTERNED);
  return etch__idtab_put(t, iid, val);
}

/* InternedString { iid 1, str 2 }: function names, paths, build ids. */
static int istr(etch_reader *r, const rd_src *src, etch_idtab *t,
                bool hex, const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  uint64_t iid = 0;
  const char *s = r->empty;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next(&d, &f)) {
    if (f.id == ETCH_ISTR_IID) {
      RD_EXPECT(f, ETCH_PB_VARINT, "InternedString.iid");
      iid = f.u;
    } else if (f.id == ETCH_ISTR_STR) {
      RD_EXPECT(f, ETCH_PB_LEN, "InternedString.str");
      s = hex ? hex_of(r, f.data, f.len) : rd_pool_field(r, &f);
      if (!s) return ETCH_ELIMIT;
    }
  }
  if (d.err) RD_DEC_FAIL(d);
  if (!iid) return 0;
  return put(r, src, msg, t, iid, (void *)s);
}

static int mapping(etch_reader *r, const rd_src *src, rd_stack_seq *ss,
                   const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  uint64_t iid = 0, v[6] = {0}, path[RD_STACK_MAX_PATH_PARTS];
  uint32_t npath = 0;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next(&d, &f)) {
    int slot = -1;
    switch (f.id) {
      case 1: RD_EXPECT(f, ETCH_PB_VARINT, "Mapping.iid"); iid = f.u; break;
      case 2: slot = 0; break; /* build_id */
      case 4: slot = 1; break; /* start */
      case 5: slot = 2; break; /* end */
      case 8: slot = 3; break; /* exact_offset */
      case 3: slot = 4; break; /* start_offset */
      case 6: slot = 5; break; /* load_bias */
      case 7: /* path_string_ids, plain or packed */
        if (f.wt == ETCH_PB_VARINT) {
          if (npath < RD_STACK_MAX_PATH_PARTS) path[npath++] = f.u;
        } else {
          RD_EXPECT(f, ETCH_PB_LEN, "Mapping.path_string_ids");
          const uint8_t *p = f.data, *end = f.data + f.len;
          uint64_t x;
          while (p < end) {
            if (!etch__pb_read_varint(&p, end, &x))
              return etch__rd_fail(r, src, f.data, ETCH_EFORMAT,
                                   "Mapping.path_string_ids: a packed "
                                   "varint cut short");
            if (npath < RD_STACK_MAX_PATH_PARTS) path[npath++] = x;
          }
        }
        break;
      default: break;
    }
    if (slot >= 0) {
      RD_EXPECT(f, ETCH_PB_VARINT, "Mapping field");
      v[slot] = f.u;
    }
  }
  if (d.err) RD_DEC_FAIL(d);
  if (!iid) return 0;
  stk_map *m = (stk_map *)etch__arena_alloc(&ss->arena,
                                            sizeof *m + npath * sizeof(uint64_t));
  if (!m) return ETCH_ENOMEM;
  m->build_iid = v[0];
  m->start = v[1];
  m->end = v[2];
  m->exact = v[3];
  m->start_off = v[4];
  m->bias = v[5];
  m->gid = -1;
  m->npath = npath;
  if (npath) memcpy(m->path, path, npath * sizeof *path);
  return put(r, src, msg, &ss->maps, iid, m);
}

static int frame(etch_reader *r, const rd_src *src, rd_stack_seq *ss,
                 const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  uint64_t iid = 0;
  stk_frame fr = {0, 0, 0, -1};
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next(&d, &f)) {
    switch (f.id) {
      case ETCH_FRAME_IID:
        RD_EXPECT(f, ETCH_PB_VARINT, "Frame.iid");
        iid = f.u;
        break;
      case ETCH_FRAME_FUNCTION_NAME_ID:
        RD_EXPECT(f, ETCH_PB_VARINT, "Frame.function_name_id");
        fr.name_iid = f.u;
        break;
      case ETCH_FRAME_MAPPING_ID:
        RD_EXPECT(f, ETCH_PB_VARINT, "Frame.mapping_id");
        fr.map_iid = f.u;
        break;
      case ETCH_FRAME_REL_PC:
        RD_EXPECT(f, ETCH_PB_VARINT, "Frame.rel_pc");
        fr.rel_pc = f.u;
        break;
      default: break;
    }
  }
  if (d.err) RD_DEC_FAIL(d);
  if (!iid) return 0;
  stk_frame *p = (stk_frame *)etch__arena_alloc(&ss->arena, sizeof *p);
  if (!p) return ETCH_ENOMEM;
  *p = fr;
  return put(r, src, msg, &ss->frames, iid, p);
}

static int callstack(etch_reader *r, const rd_src *src, rd_stack_seq *ss,
                     const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  uint64_t iid = 0;
  uint32_t n = 0;
  /* First pass: the iid and the number of frames. */
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next(&d, &f)) {
    if (f.id == ETCH_CALLSTACK_IID) {
      RD_EXPECT(f, ETCH_PB_VARINT, "Callstack.iid");
      iid = f.u;
    } else if (f.id == ETCH_CALLSTACK_FRAME_IDS) {
      if (f.wt == ETCH_PB_VARINT) {
        n++;
      } else {
        RD_EXPECT(f, ETCH_PB_LEN, "Callstack.frame_ids");
        const uint8_t *p = f.data, *end = f.data + f.len;
        uint64_t x;
        while (p < end) {
          if (!etch__pb_read_varint(&p, end, &x))
            return etch__rd_fail(r, src, f.data, ETCH_EFORMAT,
                                 "Callstack.frame_ids: a packed varint cut "
                                 "short");
          n++;
        }
      }
    }
    if (n > RD_STACK_MAX_FRAMES)
      return etch__rd_fail(r, src, msg, ETCH_ELIMIT,
                           "a callstack of more than %u frames",
                           RD_STACK_MAX_FRAMES);
  }
  if (d.err) RD_DEC_FAIL(d);
  if (!iid) return 0;
  stk_stack *s = (stk_stack *)etch__arena_alloc(&ss->arena,
                                                sizeof *s + n * sizeof(uint64_t));
  if (!s) return ETCH_ENOMEM;
  s->gid = -2;
  s->n = 0;
  /* Second pass: the frames (the first read them whole). */
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next(&d, &f)) {
    if (f.id != ETCH_CALLSTACK_FRAME_IDS) continue;
    if (f.wt == ETCH_PB_VARINT) {
      s->frames[s->n++] = f.u;
      continue;
    }
    const uint8_t *p = f.data, *end = f.data + f.len;
    uint64_t x;
    while (p < end && etch__pb_read_varint(&p, end, &x)) s->frames[s->n++] = x;
  }
  return put(r, src, msg, &ss->stacks, iid, s);
}

int etch__rd_stack_interned(etch_reader *r, const rd_src *src, rd_seq *seq,
                            uint32_t id, const uint8_t *msg, size_t len) {
  rd_stack_seq *ss = seq_of(seq);
  if (!ss) return ETCH_ENOMEM;
  switch (id) {
    case ETCH_ID_FUNCTION_NAMES: return istr(r, src, &ss->fnames, false, msg, len);
    case ETCH_ID_MAPPING_PATHS: return istr(r, src, &ss->paths, false, msg, len);
    case ETCH_ID_BUILD_IDS: return istr(r, src, &ss->build_ids, true, msg, len);
    case ETCH_ID_MAPPINGS: return mapping(r, src, ss, msg, len);
    case ETCH_ID_FRAMES: return frame(r, src, ss, msg, len);
    case ETCH_ID_CALLSTACKS: return callstack(r, src, ss, msg, len);
    default: return 0;
  }
}

/* ---- resolving into the reader-wide rows -------------------------------- */

typedef struct map_key {
  const rd_stacks *t;
  etch_stack_mapping m;
} map_key;

static bool map_eq(const void *ctx, size_t row) {
  const map_key *k = (const map_key *)ctx;
  const etch_stack_mapping *a = &k->t->maps[row], *b = &k->m;
  return a->build_id == b->build_id && a->name == b->name &&
         a->start == b->start && a->end == b->end &&
         a->exact_offset == b->exact_offset &&
         a->start_offset == b->start_offset && a->load_bias == b->load_bias;
}

static int64_t map_row(rd_stacks *t, const etch_stack_mapping *m, int *st) {
  map_key k = {t, *m};
  uint64_t h = hash3((uintptr_t)m->build_id ^ (uintptr_t)m->name,
                     m->start ^ (m->end << 1), m->exact_offset ^ m->load_bias),
           key = 0;
  int64_t row = ix_find(&t->maps_ix, h, map_eq, &k, &key);
  if (row >= 0) return row;
  if ((*st = grow(&t->mapv, (void **)&t->maps, t->nmaps, sizeof *t->maps)))
    return -1;
  if (!etch__u64map_put(&t->maps_ix, key, (int64_t)t->nmaps)) {
    *st = ETCH_ENOMEM;
    return -1;
  }
  t->maps[t->nmaps] = *m;
  return (int64_t)t->nmaps++;
}

static int64_t map_gid(etch_reader *r, rd_stack_seq *ss, uint64_t iid,
                       int *st) {
  rd_stacks *t = r->stk;
  if (!iid) { /* a frame in no mapping: one empty mapping for them all */
    if (t->empty_map < 0) {
      etch_stack_mapping m = {r->empty, r->empty, 0, 0, 0, 0, 0};
      t->empty_map = map_row(t, &m, st);
    }
    return t->empty_map;
  }
  stk_map *m = (stk_map *)etch__idtab_get(&ss->maps, iid);
  if (!m) {
    r->stats.interned_data_missing++;
    return -1;
  }
  if (m->gid >= 0) return m->gid;
  etch_stack_mapping row = {r->empty, r->empty, m->start, m->end,
                            m->exact, m->start_off, m->bias};
  if (m->build_iid) {
    const char *b = (const char *)etch__idtab_get(&ss->build_ids, m->build_iid);
    if (b)
      row.build_id = b;
    else
      r->stats.interned_data_missing++;
  }
  t->path.len = 0;
  for (uint32_t i = 0; i < m->npath; i++) {
    const char *p = (const char *)etch__idtab_get(&ss->paths, m->path[i]);
    if (!p) {
      r->stats.interned_data_missing++;
      continue;
    }
    if (etch__vec_push(&t->path, "/", 1) ||
        etch__vec_push(&t->path, p, strlen(p))) {
      *st = ETCH_ENOMEM;
      return -1;
    }
  }
  if (t->path.len &&
      !(row.name = etch__strpool_get(&r->pool, t->path.data, t->path.len))) {
    *st = ETCH_ELIMIT;
    return -1;
  }
  return m->gid = map_row(t, &row, st);
}

typedef struct frame_key {
  const rd_stacks *t;
  const char *name;
  uint32_t map;
  uint64_t rel_pc;
} frame_key;

static bool frame_eq(const void *ctx, size_t row) {
  const frame_key *k = (const frame_key *)ctx;
  const etch_stack_frame *a = &k->t->frames[row];
  return a->name == k->name && a->mapping == k->map && a->rel_pc == k->rel_pc;
}

static int64_t frame_gid(etch_reader *r, rd_stack_seq *ss, uint64_t iid,
                         int *st) {
  rd_stacks *t = r->stk;
  stk_frame *f = (stk_frame *)etch__idtab_get(&ss->frames, iid);
  if (!f) {
    r->stats.interned_data_missing++;
    return -1;
  }
  if (f->gid >= 0) return f->gid;
  int64_t map = map_gid(r, ss, f->map_iid, st);
  if (map < 0) return -1;
  const char *name = r->empty;
  if (f->name_iid) {
    const char *s = (const char *)etch__idtab_get(&ss->fnames, f->name_iid);
    if (s)
      name = s;
    else
      r->stats.interned_data_missing++;
  }
  frame_key k = {t, name, (uint32_t)map, f->rel_pc};
  uint64_t key = 0;
  int64_t row = ix_find(&t->frames_ix, hash3((uintptr_t)name, (uint64_t)map,
                                             f->rel_pc),
                        frame_eq, &k, &key);
  if (row < 0) {
    if ((*st = grow(&t->framev, (void **)&t->frames, t->nframes,
                    sizeof *t->frames)))
      return -1;
    if (!etch__u64map_put(&t->frames_ix, key, (int64_t)t->nframes)) {
      *st = ETCH_ENOMEM;
      return -1;
    }
    t->frames[t->nframes] =
        (etch_stack_frame){name, (uint32_t)map, f->rel_pc, 0, 0};
    row = (int64_t)t->nframes++;
  }
  return f->gid = row;
}

typedef struct cs_key {
  const rd_stacks *t;
  int64_t parent;
  uint32_t frame;
} cs_key;

static bool cs_eq(const void *ctx, size_t row) {
  const cs_key *k = (const cs_key *)ctx;
  const etch_stack_callsite *a = &k->t->cs[row];
  return a->parent_id == k->parent && a->frame_id == k->frame;
}

static int64_t cs_row(rd_stacks *t, int64_t parent, uint32_t depth,
                      uint32_t frame_id, int *st) {
  cs_key k = {t, parent, frame_id};
  uint64_t key = 0;
  int64_t row = ix_find(&t->cs_ix, hash3((uint64_t)parent, frame_id, 7),
                        cs_eq, &k, &key);
  if (row >= 0) return row;
  if ((*st = grow(&t->csv, (void **)&t->cs, t->ncs, sizeof *t->cs)))
    return -1;
  if (!etch__u64map_put(&t->cs_ix, key, (int64_t)t->ncs)) {
    *st = ETCH_ENOMEM;
    return -1;
  }
  t->cs[t->ncs] = (etch_stack_callsite){parent, depth, frame_id};
  return (int64_t)t->ncs++;
}

int64_t etch__rd_stack_callsite(etch_reader *r, rd_seq *seq, uint64_t iid,
                                int *status) {
  *status = 0;
  stk_stack *s = seq->stk ? (stk_stack *)etch__idtab_get(&seq->stk->stacks, iid)
                          : NULL;
  if (!s) {
    r->stats.interned_data_missing++;
    return -1;
  }
  if (s->gid != -2) return s->gid;
  if (!stacks_of(r)) {
    *status = ETCH_ENOMEM;
    return -1;
  }
  int64_t parent = -1;
  for (uint32_t i = 0; i < s->n && parent >= -1; i++) {
    int64_t f = frame_gid(r, seq->stk, s->frames[i], status);
    if (f < 0) {
      parent = -2;
      break;
    }
    parent = cs_row(r->stk, parent, i, (uint32_t)f, status);
    if (parent < 0) parent = -2;
  }
  if (*status) return -1;
  return s->gid = parent < 0 ? -1 : parent; /* -1: a frame is missing */
}

/* ---- ModuleSymbols ---------------------------------------------------------- */

typedef struct ms_key {
  const rd_stacks *t;
  const char *module;
  uint64_t addr;
} ms_key;

static bool ms_eq(const void *ctx, size_t row) {
  const ms_key *k = (const ms_key *)ctx;
  const modsym *a = &k->t->ms[row];
  return a->module == k->module && a->addr == k->addr;
}

static uint64_t ms_hash(const char *module, uint64_t addr) {
  return hash3((uintptr_t)module, addr, 3);
}

/* Lines { function_name 1, source_file_name 2, line_number 3 }. */
static int symbol_line(etch_reader *r, const rd_src *src, const uint8_t *msg,
                       size_t len, etch_stack_symbol *out) {
  etch__pb_dec d;
  etch__pb_field f;
  *out = (etch_stack_symbol){r->empty, r->empty, 0};
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next(&d, &f)) {
    if (f.id == ETCH_LINE_FUNCTION_NAME || f.id == ETCH_LINE_SOURCE_FILE_NAME) {
      RD_EXPECT(f, ETCH_PB_LEN, "Line name");
      const char *s = rd_pool_field(r, &f);
      if (!s) return ETCH_ELIMIT;
      if (f.id == ETCH_LINE_FUNCTION_NAME)
        out->name = s;
      else
        out->source_file = s;
    } else if (f.id == ETCH_LINE_LINE_NUMBER) {
      RD_EXPECT(f, ETCH_PB_VARINT, "Line.line_number");
      out->line_number = (uint32_t)f.u;
    }
  }
  if (d.err) RD_DEC_FAIL(d);
  return 0;
}

/* AddressSymbols { address 1, repeated lines 2 } of a module known as
 * `keys` (its build id and its path; NULL: not known so). */
static int address_symbols(etch_reader *r, const rd_src *src,
                           const char *keys[2], const uint8_t *msg,
                           size_t len) {
  rd_stacks *t = r->stk;
  etch__pb_dec d;
  etch__pb_field f;
  uint64_t addr = 0;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next(&d, &f))
    if (f.id == ETCH_ADDRSYM_ADDRESS) {
      RD_EXPECT(f, ETCH_PB_VARINT, "AddressSymbols.address");
      addr = f.u;
    }
  if (d.err) RD_DEC_FAIL(d);
  ms_key k = {t, keys[0] ? keys[0] : keys[1], addr};
  uint64_t key = 0;
  if (ix_find(&t->ms_ix, ms_hash(k.module, addr), ms_eq, &k, &key) >= 0)
    return 0; /* named already: the first names stay */
  uint32_t first = (uint32_t)t->nlines, n = 0;
  etch__pb_dec_init(&d, msg, len);
  int rc;
  while (etch__pb_next(&d, &f)) {
    if (f.id != ETCH_ADDRSYM_LINES) continue;
    RD_EXPECT(f, ETCH_PB_LEN, "AddressSymbols.lines");
    if (n == RD_STACK_MAX_LINES) continue;
    if ((rc = grow(&t->linev, (void **)&t->lines, t->nlines,
                   sizeof *t->lines)))
      return rc;
    if ((rc = symbol_line(r, src, f.data, f.len, &t->lines[t->nlines])))
      return rc;
    t->nlines++;
    n++;
  }
  if (!n) return 0;
  for (int i = 0; i < 2; i++) {
    if (!keys[i]) continue;
    k.module = keys[i];
    if (ix_find(&t->ms_ix, ms_hash(k.module, addr), ms_eq, &k, &key) >= 0)
      continue;
    if ((rc = grow(&t->msv, (void **)&t->ms, t->nms, sizeof *t->ms)))
      return rc;
    if (!etch__u64map_put(&t->ms_ix, key, (int64_t)t->nms)) return ETCH_ENOMEM;
    t->ms[t->nms++] = (modsym){keys[i], addr, first, n};
  }
  return 0;
}

int etch__rd_module_symbols(etch_reader *r, const rd_src *src,
                            const uint8_t *msg, size_t len) {
  if (!stacks_of(r)) return ETCH_ENOMEM;
  etch__pb_dec d;
  etch__pb_field f;
  const char *keys[2] = {NULL, NULL}; /* build id, path */
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next(&d, &f)) {
    if (f.id == ETCH_MODSYM_PATH || f.id == ETCH_MODSYM_BUILD_ID) {
      RD_EXPECT(f, ETCH_PB_LEN, "ModuleSymbols path or build_id");
      if (!f.len) continue;
      const char *s = f.id == ETCH_MODSYM_PATH ? rd_pool_field(r, &f)
                                               : hex_of(r, f.data, f.len);
      if (!s) return ETCH_ELIMIT;
      keys[f.id == ETCH_MODSYM_PATH] = s;
    }
  }
  if (d.err) RD_DEC_FAIL(d);
  if (!keys[0] && !keys[1]) return 0; /* names of nothing */
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next(&d, &f)) {
    if (f.id != ETCH_MODSYM_ADDRESS_SYMBOLS) continue;
    RD_EXPECT(f, ETCH_PB_LEN, "ModuleSymbols.address_symbols");
    int rc = address_symbols(r, src, keys, f.data, f.len);
    if (rc) return rc;
  }
  return 0;
}

/* ---- the tables --------------------------------------------------------------- */

static const modsym *symbols_of(const rd_stacks *t, const char *module,
                                uint64_t addr) {
  if (!module || !*module) return NULL;
  ms_key k = {t, module, addr};
  uint64_t key = 0;
  int64_t row = ix_find(&t->ms_ix, ms_hash(module, addr), ms_eq, &k, &key);
  return row >= 0 ? &t->ms[row] : NULL;
}

ETCH_API int etch_reader_stacks(etch_reader *r, etch_stacks *out) {
  memset(out, 0, sizeof *out);
  rd_stacks *t = r->stk;
  if (!t) return ETCH_OK;
  for (size_t i = 0; i < t->nframes; i++) { /* names: the latest symbols */
    etch_stack_frame *f = &t->frames[i];
    const etch_stack_mapping *m = &t->maps[f->mapping];
    const modsym *s = symbols_of(t, m->build_id, f->rel_pc);
    if (!s) s = symbols_of(t, m->name, f->rel_pc);
    f->symbol = s ? s->first : 0;
    f->nsymbols = s ? s->n : 0;
  }
  out->mappings = t->maps;
  out->nmappings = t->nmaps;
  out->frames = t->frames;
  out->nframes = t->nframes;
  out->callsites = t->cs;
  out->ncallsites = t->ncs;
  out->symbols = t->lines;
  out->nsymbols = t->nlines;
  return ETCH_OK;
}

/* ---- clearing and freeing ------------------------------------------------------ */

void etch__rd_stack_seq_clear(rd_seq *seq) {
  rd_stack_seq *ss = seq->stk;
  if (!ss) return;
  etch__idtab_clear(&ss->fnames);
  etch__idtab_clear(&ss->build_ids);
  etch__idtab_clear(&ss->paths);
  etch__idtab_clear(&ss->maps);
  etch__idtab_clear(&ss->frames);
  etch__idtab_clear(&ss->stacks);
  etch__arena_reset(&ss->arena);
}

void etch__rd_stack_seq_free(rd_seq *seq) {
  rd_stack_seq *ss = seq->stk;
  if (!ss) return;
  etch__idtab_free(&ss->fnames);
  etch__idtab_free(&ss->build_ids);
  etch__idtab_free(&ss->paths);
  etch__idtab_free(&ss->maps);
  etch__idtab_free(&ss->frames);
  etch__idtab_free(&ss->stacks);
  etch__arena_free(&ss->arena);
  free(ss);
  seq->stk = NULL;
}

void etch__rd_stacks_free(etch_reader *r) {
  rd_stacks *t = r->stk;
  if (!t) return;
  etch__vec_free(&t->mapv);
  etch__vec_free(&t->framev);
  etch__vec_free(&t->csv);
  etch__vec_free(&t->linev);
  etch__vec_free(&t->msv);
  etch__u64map_free(&t->maps_ix);
  etch__u64map_free(&t->frames_ix);
  etch__u64map_free(&t->cs_ix);
  etch__u64map_free(&t->ms_ix);
  free(t->path.data);
  free(t);
  r->stk = NULL;
}

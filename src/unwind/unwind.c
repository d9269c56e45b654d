/*
 * unwind.c - x86-64 stacks unwound with .eh_frame (see unwind.h).
 *
 * The objects: dl_iterate_phdr gives each loaded object's executable
 * segments, its PT_GNU_EH_FRAME (the .eh_frame_hdr: a table of function
 * starts and their FDEs, sorted) and its loaded segments, which bound every
 * read of its tables.
 *
 * A rule: the CFI program of the address's FDE (its CIE's initial
 * instructions, then its own up to the address) run into the frame address
 * (sp or bp plus an offset) and the offsets of the saved return address
 * and bp from it, packed into 64 bits and cached by address in a table of
 * one 64-bit word each (address and a 16-bit form of the rule: written
 * under the mutex, read without a lock); the few rules that do not fit go
 * to a second table read under the mutex.
 */
#define _GNU_SOURCE
#include "unwind/unwind.h"

#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/containers.h"

/* ---- rules -------------------------------------------------------------------- */

/* DWARF's x86-64 register numbers. */
enum { R_BP = 6, R_SP = 7, R_RA = 16, NREGS = 17 };

/* A packed rule: bits 0-1 the kind, 2-31 the frame address's offset
 * (signed), 32-47 the return address's offset from the frame address,
 * 48-63 bp's (0: bp unchanged). */
enum { K_NONE = 0, K_SP = 1, K_BP = 2, K_STOP = 3 };

static uint64_t rule_pack(uint32_t kind, int32_t cfa_off, int32_t ra_off,
                          int32_t bp_off) {
  return (uint64_t)kind | ((uint64_t)(uint32_t)cfa_off << 2 & 0xfffffffcull) |
         (uint64_t)(uint16_t)(int16_t)ra_off << 32 |
         (uint64_t)(uint16_t)(int16_t)bp_off << 48;
}
static uint32_t rule_kind(uint64_t r) { return (uint32_t)(r & 3); }
static int64_t rule_cfa(uint64_t r) { return (int64_t)(int32_t)(uint32_t)r >> 2; }
static int64_t rule_ra(uint64_t r) { return (int16_t)(uint16_t)(r >> 32); }
static int64_t rule_bp(uint64_t r) { return (int16_t)(uint16_t)(r >> 48); }

/* ---- objects ------------------------------------------------------------------ */

typedef struct seg {
  uint64_t lo, hi;
} seg;

typedef struct object {
  uint64_t text_lo, text_hi; /* the span of its executable segments */
  uint64_t hdr;              /* .eh_frame_hdr, 0 if none */
  seg loads[8];              /* its loaded segments (reads stay inside) */
  uint32_t nloads;
} object;

#define CACHE_SIZE 8192u /* entries; a power of two */

typedef struct centry {
  bool used;
  uint64_t pc, rule;
} centry;

struct etch_unwinder {
  pthread_mutex_t lock;
  object *objs;
  uint32_t nobjs;
  /* Address << 16 | the rule in 16 bits (fast_pack): one load a frame.
   * A rule that does not fit is in `wide`. */
  uint64_t fast[CACHE_SIZE];
  centry wide[CACHE_SIZE];
  uint64_t misses, no_rule;
};

typedef struct scan {
  etch_vec v; /* of object */
  bool failed;
} scan;

static int scan_one(struct dl_phdr_info *info, size_t size, void *ctx) {
  (void)size;
  scan *sc = (scan *)ctx;
  object o;
  memset(&o, 0, sizeof o);
  o.text_lo = UINT64_MAX;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uint64_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
    if (ph->p_type == PT_LOAD) {
      if (o.nloads < 8) o.loads[o.nloads++] = (seg){lo, hi};
      if (ph->p_flags & PF_X) {
        if (lo < o.text_lo) o.text_lo = lo;
        if (hi > o.text_hi) o.text_hi = hi;
      }
    } else if (ph->p_type == PT_GNU_EH_FRAME) {
      o.hdr = lo;
    }
  }
  if (o.text_lo >= o.text_hi) return 0; /* nothing to run: no frames */
  if (ETCH_VEC_PUSH(&sc->v, object, o)) {
    sc->failed = true;
    return 1;
  }
  return 0;
}

/* Reads the objects again (under the lock). */
static int load_objects(etch_unwinder *u) {
  scan sc = {0};
  dl_iterate_phdr(scan_one, &sc);
  if (sc.failed) {
    etch__vec_free(&sc.v);
    return ETCH_ENOMEM;
  }
  free(u->objs);
  u->objs = ETCH_VEC_AT(&sc.v, object); /* the vector's bytes, now u's */
  u->nobjs = (uint32_t)ETCH_VEC_COUNT(&sc.v, object);
  return ETCH_OK;
}

static const object *object_of(const etch_unwinder *u, uint64_t pc) {
  for (uint32_t i = 0; i < u->nobjs; i++)
    if (pc >= u->objs[i].text_lo && pc < u->objs[i].text_hi) return &u->objs[i];
  return NULL;
}

/* ---- reading an object's tables, within its segments ---------------------------- */

typedef struct cur {
  const object *o;
  uint64_t p, end; /* the segment p is in ends at end */
  bool bad;
} cur;

static bool cur_at(cur *c, const object *o, uint64_t p) {
  c->o = o;
  c->p = p;
  c->bad = true;
  for (uint32_t i = 0; i < o->nloads; i++)
    if (p >= o->loads[i].lo && p < o->loads[i].hi) {
      c->end = o->loads[i].hi;
      c->bad = false;
      break;
    }
  return !c->bad;
}

static bool take(cur *c, void *out, size_t n) {
  if (c->bad || n > c->end - c->p) {
    c->bad = true;
    memset(out, 0, n);
    return false;
  }
  memcpy(out, (const void *)(uintptr_t)c->p, n);
  c->p += n;
  return true;
}

static uint8_t u8(cur *c) {
  uint8_t v;
  take(c, &v, 1);
  return v;
}

static uint64_t uleb(cur *c) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    uint8_t b = u8(c);
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  c->bad = true;
  return 0;
}

static int64_t sleb(cur *c) {
  uint64_t v = 0;
  unsigned shift = 0;
  uint8_t b;
  do {
    b = u8(c);
    if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
    shift += 7;
  } while ((b & 0x80) && !c->bad && shift < 70);
  if (shift < 64 && (b & 0x40)) v |= ~0ull << shift;
  return (int64_t)v;
}

/* A pointer in DWARF's exception-header encoding (`base` for datarel). */
static uint64_t enc_ptr(cur *c, uint8_t enc, uint64_t base) {
  if (enc == 0xff) return 0; /* omitted */
  uint64_t at = c->p, v = 0;
  switch (enc & 0x0f) {
    case 0x00: take(c, &v, 8); break;                 /* absptr */
    case 0x01: v = uleb(c); break;
    case 0x02: { uint16_t x; take(c, &x, 2); v = x; break; }
    case 0x03: { uint32_t x; take(c, &x, 4); v = x; break; }
    case 0x04: take(c, &v, 8); break;
    case 0x09: v = (uint64_t)sleb(c); break;
    case 0x0a: { int16_t x; take(c, &x, 2); v = (uint64_t)(int64_t)x; break; }
    case 0x0b: { int32_t x; take(c, &x, 4); v = (uint64_t)(int64_t)x; break; }
    case 0x0c: take(c, &v, 8); break;
    default: c->bad = true; return 0;
  }
  switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += at; break;   /* pcrel */
    case 0x30: v += base; break; /* datarel */
    default: c->bad = true; return 0;
  }
  if (enc & 0x80) { /* indirect */
    cur d;
    if (!cur_at(&d, c->o, v) || !take(&d, &v, 8)) c->bad = true;
  }
  return v;
}

/* The FDE of pc from the object's .eh_frame_hdr (binary search), 0 if
 * none. */
static uint64_t find_fde(const object *o, uint64_t pc) {
  cur c;
  if (!o->hdr || !cur_at(&c, o, o->hdr)) return 0;
  uint8_t version = u8(&c), ptr_enc = u8(&c), count_enc = u8(&c),
          table_enc = u8(&c);
  if (version != 1 || table_enc != 0x3b) return 0; /* datarel sdata4 pairs */
  enc_ptr(&c, ptr_enc, o->hdr);
  uint64_t n = enc_ptr(&c, count_enc, o->hdr);
  if (c.bad || !n || n > (c.end - c.p) / 8) return 0;
  uint64_t table = c.p;
  uint64_t lo = 0, hi = n;
  while (hi - lo > 1) { /* the last entry whose start is <= pc */
    uint64_t mid = lo + (hi - lo) / 2;
    int32_t start;
    memcpy(&start, (const void *)(uintptr_t)(table + mid * 8), 4);
    if (o->hdr + (uint64_t)(int64_t)start <= pc) lo = mid; else hi = mid;
  }
  int32_t start, fde;
  memcpy(&start, (const void *)(uintptr_t)(table + lo * 8), 4);
  memcpy(&fde, (const void *)(uintptr_t)(table + lo * 8 + 4), 4);
  if (o->hdr + (uint64_t)(int64_t)start > pc) return 0;
  return o->hdr + (uint64_t)(int64_t)fde;
}

/* ---- running the CFI program ------------------------------------------------------ */

typedef struct regrule {
  uint8_t how; /* 0 unchanged, 1 saved at cfa+off, 2 other (unknown) */
  int64_t off;
} regrule;

typedef struct cfa_state {
  uint32_t reg;
  int64_t off;
  bool expr; /* defined by an expression: not covered */
  regrule ra, bp;
} cfa_state;

typedef struct cie_info {
  uint64_t code_align;
  int64_t data_align;
  uint32_t ra_reg;
  uint8_t fde_enc;
  bool has_aug_data, signal;
  uint64_t insns, insns_end;
} cie_info;

static regrule *reg_of(cfa_state *s, uint64_t reg) {
  if (reg == R_RA) return &s->ra;
  if (reg == R_BP) return &s->bp;
  return NULL;
}

/* Runs instructions [p, end) while loc <= pc; `init` is the state after the
 * CIE's instructions (for DW_CFA_restore). False on what is not covered. */
static bool run_cfi(const object *o, uint64_t p, uint64_t end,
                    const cie_info *ci, uint64_t loc, uint64_t pc,
                    cfa_state *s, const cfa_state *init) {
  cfa_state stack[8];
  uint32_t depth = 0;
  cur c;
  if (p >= end) return true;
  if (!cur_at(&c, o, p)) return false;
  if (end < c.end) c.end = end;
  while (c.p < c.end && !c.bad) {
    uint8_t op = u8(&c);
    uint64_t delta = 0, reg = 0;
    int64_t off = 0;
    switch (op >> 6) {
      case 1: /* advance_loc */
        delta = (uint64_t)(op & 0x3f) * ci->code_align;
        if (loc + delta > pc) return true;
        loc += delta;
        continue;
      case 2: { /* offset */
        off = (int64_t)uleb(&c) * ci->data_align;
        regrule *r = reg_of(s, op & 0x3f);
        if (r) *r = (regrule){1, off};
        continue;
      }
      case 3: { /* restore */
        regrule *r = reg_of(s, op & 0x3f);
        if (r && init) *r = *reg_of((cfa_state *)init, op & 0x3f);
        continue;
      }
    }
    switch (op) {
      case 0x00: break; /* nop */
      case 0x01: /* set_loc */
        delta = enc_ptr(&c, ci->fde_enc, 0);
        if (delta > pc) return true;
        loc = delta;
        break;
      case 0x02: case 0x03: case 0x04: { /* advance_loc1, 2, 4 */
        uint32_t x = 0;
        take(&c, &x, op == 0x02 ? 1 : op == 0x03 ? 2 : 4);
        delta = x * ci->code_align;
        if (loc + delta > pc) return true;
        loc += delta;
        break;
      }
      case 0x05: /* offset_extended */
        reg = uleb(&c);
        off = (int64_t)uleb(&c) * ci->data_align;
        if (reg_of(s, reg)) *reg_of(s, reg) = (regrule){1, off};
        break;
      case 0x06: /* restore_extended */
        reg = uleb(&c);
        if (reg_of(s, reg) && init) *reg_of(s, reg) = *reg_of((cfa_state *)init, reg);
        break;
      case 0x07: /* undefined */
        reg = uleb(&c);
        if (reg == R_RA) s->ra = (regrule){2, 0}; /* the outermost frame */
        else if (reg_of(s, reg)) *reg_of(s, reg) = (regrule){2, 0};
        break;
      case 0x08: /* same_value */
        reg = uleb(&c);
        if (reg_of(s, reg)) *reg_of(s, reg) = (regrule){0, 0};
        break;
      case 0x09: /* register */
        reg = uleb(&c);
        uleb(&c);
        if (reg_of(s, reg)) *reg_of(s, reg) = (regrule){2, 0};
        break;
      case 0x0a: /* remember_state */
        if (depth == 8) return false;
        stack[depth++] = *s;
        break;
      case 0x0b: /* restore_state */
        if (!depth) return false;
        *s = stack[--depth]; /* the whole row, the frame address too */
        break;
      case 0x0c: /* def_cfa */
        s->reg = (uint32_t)uleb(&c);
        s->off = (int64_t)uleb(&c);
        s->expr = false;
        break;
      case 0x0d: /* def_cfa_register */
        s->reg = (uint32_t)uleb(&c);
        s->expr = false;
        break;
      case 0x0e: /* def_cfa_offset */
        s->off = (int64_t)uleb(&c);
        break;
      case 0x0f: /* def_cfa_expression */
        s->expr = true;
        c.p += uleb(&c);
        break;
      case 0x10: /* expression */
        reg = uleb(&c);
        if (reg_of(s, reg)) *reg_of(s, reg) = (regrule){2, 0};
        c.p += uleb(&c);
        break;
      case 0x11: /* offset_extended_sf */
        reg = uleb(&c);
        off = sleb(&c) * ci->data_align;
        if (reg_of(s, reg)) *reg_of(s, reg) = (regrule){1, off};
        break;
      case 0x12: /* def_cfa_sf */
        s->reg = (uint32_t)uleb(&c);
        s->off = sleb(&c) * ci->data_align;
        s->expr = false;
        break;
      case 0x13: /* def_cfa_offset_sf */
        s->off = sleb(&c) * ci->data_align;
        break;
      case 0x14: case 0x15: /* val_offset, val_offset_sf */
        reg = uleb(&c);
        if (op == 0x14) uleb(&c); else sleb(&c);
        if (reg_of(s, reg)) *reg_of(s, reg) = (regrule){2, 0};
        break;
      case 0x16: /* val_expression */
        reg = uleb(&c);
        if (reg_of(s, reg)) *reg_of(s, reg) = (regrule){2, 0};
        c.p += uleb(&c);
        break;
      case 0x2e: /* GNU_args_size */
        uleb(&c);
        break;
      case 0x2f: /* GNU_negative_offset_extended */
        reg = uleb(&c);
        off = -(int64_t)uleb(&c) * ci->data_align;
        if (reg_of(s, reg)) *reg_of(s, reg) = (regrule){1, off};
        break;
      default:
        return false;
    }
  }
  return !c.bad;
}

/* Reads the CIE at `at`. */
static bool read_cie(const object *o, uint64_t at, cie_info *ci) {
  cur c;
  memset(ci, 0, sizeof *ci);
  if (!cur_at(&c, o, at)) return false;
  uint32_t len32;
  take(&c, &len32, 4);
  if (len32 == 0 || len32 == 0xffffffffu) return false;
  uint64_t end = c.p + len32;
  if (end > c.end) return false;
  uint32_t id;
  take(&c, &id, 4);
  if (id != 0) return false;
  uint8_t version = u8(&c);
  if (version != 1 && version != 3 && version != 4) return false;
  char aug[8];
  size_t na = 0;
  for (;;) {
    uint8_t ch = u8(&c);
    if (c.bad) return false;
    if (!ch) break;
    if (na == sizeof aug - 1) return false;
    aug[na++] = (char)ch;
  }
  aug[na] = 0;
  if (version == 4) {
    if (u8(&c) != 8) return false; /* address size */
    u8(&c);
  }
  ci->code_align = uleb(&c);
  ci->data_align = sleb(&c);
  ci->ra_reg = version == 1 ? u8(&c) : (uint32_t)uleb(&c);
  ci->fde_enc = 0; /* absptr */
  if (aug[0] == 'z') {
    ci->has_aug_data = true;
    uint64_t alen = uleb(&c), aend = c.p + alen;
    for (size_t i = 1; i < na && !c.bad; i++) {
      switch (aug[i]) {
        case 'R': ci->fde_enc = u8(&c); break;
        case 'L': u8(&c); break;
        case 'P': enc_ptr(&c, u8(&c), 0); break;
        case 'S': ci->signal = true; break;
        default: c.p = aend; i = na; break; /* the rest is skipped */
      }
    }
    c.p = aend;
  } else if (na) {
    return false; /* an augmentation that cannot be skipped */
  }
  if (c.bad || c.p > end || ci->ra_reg != R_RA) return false;
  ci->insns = c.p;
  ci->insns_end = end;
  return true;
}

/* The rule for pc in object o: K_NONE when it has none, K_STOP when its
 * frame cannot be unwound by a rule (or is the outermost). */
static uint64_t make_rule(const object *o, uint64_t pc) {
  uint64_t fde = find_fde(o, pc);
  cur c;
  if (!fde || !cur_at(&c, o, fde)) return rule_pack(K_NONE, 0, 0, 0);
  uint32_t len32;
  take(&c, &len32, 4);
  if (len32 == 0 || len32 == 0xffffffffu) return rule_pack(K_NONE, 0, 0, 0);
  uint64_t end = c.p + len32;
  uint64_t idpos = c.p;
  uint32_t cie_off;
  take(&c, &cie_off, 4);
  cie_info ci;
  if (c.bad || end > c.end || !cie_off || !read_cie(o, idpos - cie_off, &ci))
    return rule_pack(K_NONE, 0, 0, 0);
  uint64_t start = enc_ptr(&c, ci.fde_enc, 0);
  uint64_t range = enc_ptr(&c, ci.fde_enc & 0x0f, 0);
  if (c.bad || pc < start || pc - start >= range)
    return rule_pack(K_NONE, 0, 0, 0);
  if (ci.signal) return rule_pack(K_STOP, 0, 0, 0);
  if (ci.has_aug_data) c.p += uleb(&c);
  if (c.bad || c.p > end) return rule_pack(K_NONE, 0, 0, 0);
  cfa_state s, init;
  memset(&s, 0, sizeof s);
  if (!run_cfi(o, ci.insns, ci.insns_end, &ci, start, UINT64_MAX, &s, NULL))
    return rule_pack(K_STOP, 0, 0, 0);
  init = s;
  if (!run_cfi(o, c.p, end, &ci, start, pc, &s, &init))
    return rule_pack(K_STOP, 0, 0, 0);
  if (s.expr || (s.reg != R_SP && s.reg != R_BP) || s.ra.how != 1 ||
      s.bp.how == 2 || s.off < 0 || s.off >= (1 << 29) ||
      s.ra.off < INT16_MIN || s.ra.off > INT16_MAX ||
      s.bp.off < INT16_MIN || s.bp.off > INT16_MAX ||
      (s.bp.how == 1 && s.bp.off == 0))
    return rule_pack(K_STOP, 0, 0, 0);
  return rule_pack(s.reg == R_SP ? K_SP : K_BP, (int32_t)s.off,
                   (int32_t)s.ra.off, s.bp.how == 1 ? (int32_t)s.bp.off : 0);
}

/* ---- the cache -------------------------------------------------------------------- */

static uint32_t slot_of(uint64_t pc) {
  return (uint32_t)(pc ^ pc >> 13) & (CACHE_SIZE - 1);
}

/* The wide table, under the lock (rules that do not fit in 16 bits are
 * rare: a frame of 16 KiB or more, a return address saved elsewhere). */
static bool wide_get(etch_unwinder *u, uint64_t pc, uint64_t *rule) {
  centry *e = &u->wide[slot_of(pc)];
  if (!e->used || e->pc != pc) return false;
  *rule = e->rule;
  return true;
}

static void wide_put(etch_unwinder *u, uint64_t pc, uint64_t rule) {
  centry *e = &u->wide[slot_of(pc)];
  e->used = true;
  e->pc = pc;
  e->rule = rule;
}

/* A rule in 16 bits, for the common case: bits 0-1 the kind, 2-12 the
 * frame address's offset / 8 (up to 16 KiB), the return address at -8,
 * bits 13-15 where bp was saved (0: unchanged, k: at -8 * k, 2 to 7).
 * FAST_WIDE (0xffff, bp at -56 with kind 3, which has no offsets) says
 * "in the wide table". */
#define FAST_WIDE 0xffffu

static uint32_t fast_pack(uint64_t r) {
  uint32_t kind = rule_kind(r);
  if (kind == K_NONE || kind == K_STOP) return kind;
  int64_t cfa = rule_cfa(r), ra = rule_ra(r), bp = rule_bp(r);
  if (ra != -8 || cfa & 7 || cfa >= 8 * 2048 || bp > 0 || bp & 7 ||
      bp < -56 || bp == -8)
    return FAST_WIDE;
  return kind | (uint32_t)(cfa / 8) << 2 | (uint32_t)(-bp / 8) << 13;
}

static uint64_t rule_slow(etch_unwinder *u, uint64_t pc) {
  uint64_t r;
  pthread_mutex_lock(&u->lock);
  if (wide_get(u, pc, &r)) {
    pthread_mutex_unlock(&u->lock);
    return r;
  }
  u->misses++;
  const object *o = object_of(u, pc);
  if (!o && load_objects(u) == ETCH_OK) o = object_of(u, pc); /* dlopen */
  r = o ? make_rule(o, pc) : rule_pack(K_NONE, 0, 0, 0);
  if (rule_kind(r) == K_NONE || rule_kind(r) == K_STOP) u->no_rule++;
  uint32_t f = fast_pack(r);
  if (f == FAST_WIDE) wide_put(u, pc, r);
  if (pc < (1ull << 48))
    __atomic_store_n(&u->fast[slot_of(pc)], pc << 16 | f, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&u->lock);
  return r;
}

/* A rule as the walk uses it. */
typedef struct frule {
  uint32_t kind;
  int32_t cfa, ra, bp; /* offsets; bp 0: unchanged */
} frule;

ETCH_INLINE frule rule_for(etch_unwinder *u, uint64_t pc) {
  uint64_t w = __atomic_load_n(&u->fast[slot_of(pc)], __ATOMIC_ACQUIRE);
  uint32_t f = (uint32_t)(w & 0xffff);
  if (ETCH_LIKELY(w >> 16 == pc && f != FAST_WIDE)) {
    return (frule){f & 3, (int32_t)((f >> 2 & 2047) << 3), -8,
                   -(int32_t)((f >> 13) << 3)};
  }
  uint64_t r = rule_slow(u, pc);
  return (frule){rule_kind(r), (int32_t)rule_cfa(r), (int32_t)rule_ra(r),
                 (int32_t)rule_bp(r)};
}

/* A word loaded as is: a live stack holds what AddressSanitizer poisons
 * (the red zones around other functions' locals), and reading it is the
 * point here, so the load is neither checked nor a memcpy (intercepted). */
typedef uint64_t __attribute__((may_alias, aligned(1))) word_u;

#define NO_ASAN __attribute__((no_sanitize_address))

NO_ASAN ETCH_INLINE bool mem_read(const etch_unwind_mem *m, uint64_t addr,
                                  uint64_t *out) {
  if (addr < m->addr || m->len < 8 || addr - m->addr > m->len - 8) return false;
  *out = *(const volatile word_u *)(m->data + (addr - m->addr));
  return true;
}

/* ---- the walk --------------------------------------------------------------------- */

/* A reader of an etch_unwind_mem, taken apart once for the walk. */
typedef struct span {
  uint64_t lo, last; /* words at lo .. lo + last can be read */
  const uint8_t *base; /* the byte at address a is base[a - lo] */
} span;

NO_ASAN ETCH_INLINE bool span_read(const span *sp, uint64_t a, uint64_t *out) {
  if (a - sp->lo > sp->last) return false;
  *out = *(const volatile word_u *)(sp->base + (a - sp->lo));
  return true;
}

/* A span read that the memo keeps (false, and the memo emptied, when it
 * is full). */
NO_ASAN ETCH_INLINE bool span_read_kept(const span *sp, uint64_t a,
                                        uint64_t *out, etch_unwind_memo *memo) {
  if (!span_read(sp, a, out)) return false;
  if (ETCH_UNLIKELY(memo->nreads == ETCH_UNWIND_MEMO_READS)) {
    memo->len = 0; /* too long to keep: the walk goes on, unkept */
    return true;
  }
  memo->read[memo->nreads].off = a - sp->lo;
  memo->read[memo->nreads++].val = *out;
  return true;
}

/* The walk, made three times (`direct` and `memo` constants): reading a
 * span inline, the same keeping what it reads in `memo`, or through the
 * caller's reader. */
NO_ASAN ETCH_INLINE uint32_t walk(etch_unwinder *u, const etch_unwind_regs *regs,
                                  etch_unwind_read_fn read, void *ctx,
                                  const span *m, bool direct,
                                  etch_unwind_memo *memo, uint64_t *pcs,
                                  uint32_t max) {
  uint64_t pc = regs->ip, sp = regs->sp, bp = regs->bp;
  uint32_t n = 0;
#define READ(a, o)                                                     \
  (memo ? span_read_kept(m, (a), (o), memo)                            \
        : direct ? span_read(m, (a), (o)) : read(ctx, (a), (o)))
  /* A return address is the instruction after the call: its rule is the
   * call's (pc - 1), but for the frame the registers came from. */
  uint64_t look = pc;
  /* With a memo: the read bp came from (-1: the registers'), and the
   * reads the walk's frames depend on (every return address; a saved bp
   * only when a later frame's rule uses bp). The others are dropped from
   * the memo at the end: a bp saved and never used changes nothing. */
  int bp_src = -1;
  uint64_t keep = 0;
#define LAST() (memo->nreads - 1)
  while (n < max && pc) {
    pcs[n++] = pc;
    frule r = rule_for(u, look);
    uint64_t cfa, ra, nbp = bp;
    if (memo && (r.kind == K_BP || r.kind == K_NONE)) {
      if (bp_src < 0)
        memo->bp_used = true;
      else
        keep |= 1ull << bp_src;
    }
    if (ETCH_LIKELY(r.kind == K_SP || r.kind == K_BP)) {
      cfa = (r.kind == K_SP ? sp : bp) + (uint64_t)(int64_t)r.cfa;
      if (!READ(cfa + (uint64_t)(int64_t)r.ra, &ra)) break;
      if (memo) keep |= 1ull << LAST();
      if (r.bp) {
        if (!READ(cfa + (uint64_t)(int64_t)r.bp, &nbp)) break;
        if (memo) bp_src = (int)LAST();
      }
    } else if (r.kind == K_NONE) {
      /* No rule: code without unwind tables, walked through bp if it
       * points at a frame above this one. */
      if (bp <= sp || bp & 7 || !READ(bp + 8, &ra)) break;
      if (memo) keep |= 1ull << LAST();
      if (!READ(bp, &nbp)) break;
      if (memo) bp_src = (int)LAST();
      cfa = bp + 16;
    } else {
      break;
    }
    if (cfa <= sp) break; /* a stack grows down: no loop */
    sp = cfa;
    bp = nbp;
    pc = ra;
    look = ra - 1;
  }
  if (memo && memo->len) {
    uint32_t j = 0;
    for (uint32_t i = 0; i < memo->nreads; i++)
      if (keep >> i & 1) memo->read[j++] = memo->read[i];
    memo->nreads = j;
  }
#undef LAST
#undef READ
  return n;
}

NO_ASAN uint32_t etch__unwind(etch_unwinder *u, const etch_unwind_regs *regs,
                              etch_unwind_read_fn read, void *ctx,
                              uint64_t *pcs, uint32_t max) {
  if (read == etch__unwind_read_mem) { /* etch's own reader: inline */
    const etch_unwind_mem *mem = (const etch_unwind_mem *)ctx;
    if (mem->len < 8) { /* nothing to read: the first frame only */
      if (!max || !regs->ip) return 0;
      pcs[0] = regs->ip;
      return 1;
    }
    span m = {mem->addr, mem->len - 8, mem->data};
    return walk(u, regs, NULL, NULL, &m, true, NULL, pcs, max);
  }
  return walk(u, regs, read, ctx, NULL, false, NULL, pcs, max);
}

NO_ASAN uint32_t etch__unwind_memo_walk(etch_unwinder *u,
                                        const etch_unwind_regs *regs,
                                        const etch_unwind_mem *mem,
                                        etch_unwind_memo *memo, uint64_t *pcs,
                                        uint32_t max) {
  memo->len = 0;
  if (mem->len < 8) /* nothing to read: not kept */
    return etch__unwind(u, regs, etch__unwind_read_mem, (void *)mem, pcs, max);
  memo->ip = regs->ip;
  memo->sp = regs->sp;
  memo->bp = regs->bp;
  memo->lo = mem->addr;
  memo->max = max;
  memo->nreads = 0;
  memo->bp_used = false;
  memo->len = mem->len; /* emptied again if the walk reads too much */
  span m = {mem->addr, mem->len - 8, mem->data};
  return walk(u, regs, NULL, NULL, &m, true, memo, pcs, max);
}

NO_ASAN bool etch__unwind_read_mem(void *ctx, uint64_t addr, uint64_t *out) {
  return mem_read((const etch_unwind_mem *)ctx, addr, out);
}

/* ---- making one ------------------------------------------------------------------- */

int etch__unwinder_new(etch_unwinder **out) {
  *out = NULL;
#if !defined(__x86_64__)
  return etch__error(ETCH_EUNSUPPORTED,
                     "unwinding with .eh_frame is for x86-64 only");
#else
  etch_unwinder *u = (etch_unwinder *)etch__calloc(1, sizeof *u);
  if (!u) return etch__error(ETCH_ENOMEM, "out of memory");
  pthread_mutex_init(&u->lock, NULL);
  pthread_mutex_lock(&u->lock);
  int rc = load_objects(u);
  pthread_mutex_unlock(&u->lock);
  if (rc) {
    etch__unwinder_free(u);
    return etch__error(rc, "out of memory");
  }
  *out = u;
  return ETCH_OK;
#endif
}

void etch__unwinder_free(etch_unwinder *u) {
  if (!u) return;
  pthread_mutex_destroy(&u->lock);
  free(u->objs);
  free(u);
}

etch_unwind_stats etch__unwinder_stats(etch_unwinder *u) {
  etch_unwind_stats st;
  pthread_mutex_lock(&u->lock);
  st.misses = u->misses;
  st.no_rule = __atomic_load_n(&u->no_rule, __ATOMIC_RELAXED);
  st.objects = u->nobjs;
  pthread_mutex_unlock(&u->lock);
  return st;
}

void etch__unwinder_fork_prepare(etch_unwinder *u) {
  pthread_mutex_lock(&u->lock);
}

void etch__unwinder_fork_after(etch_unwinder *u) {
  pthread_mutex_unlock(&u->lock);
}

/*
 * console.c - the console interceptor: every event as one line of text, as
 * it happens.
 *
 *       0.000120 demo/main          > Frame [render] frame=1
 *       0.000125 demo/main            > Draw [render]
 *       0.000145 demo/main            < Draw 20.000 us
 *       0.000160 demo/main          < Frame 40.000 us
 *       0.000170 demo/worker-1      * Loaded [io] bytes=512 file="a.txt"
 *       0.000180 demo/main          # queue_depth = 3
 *
 * Seconds since the session started; process and thread name; slices
 * indented by their track's nesting, the duration printed when one ends;
 * `*` instants, `#` counters, `->` flows leaving, `|>` flows ending; args
 * as key=value. Events on another track than the thread's name it (`on
 * "Network"`).
 *
 * Each sequence is decoded with its own state (the interceptor's thread
 * state: interned strings, clock, descriptors); the slices open on each
 * track live in the instance, under its lock, because any thread may end a
 * slice on a named track. A line is built outside the lock and written
 * with one write() under it, so lines never mix.
 *
 * Options (interceptor.KEY=VALUE): fd=N (default 2, stderr), color=auto |
 * always | never (auto: a terminal, and NO_COLOR unset or empty).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etch/interceptor.h"
#include "base/map.h"
#include "pb/pb.h"
#include "proto/perfetto.h"
#include "sdk/core/sdk.h"

/* ---- small containers ------------------------------------------------------- */

/* A line being made: base's byte vector, and whether it ran out of memory
 * (the line is then dropped whole). */
typedef struct sbuf {
  etch_vec v;
  bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (etch__vec_push(&b->v, s, n)) b->oom = true;
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  char tmp[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Decimal digits without printf (the console's hot path). */
static void sb_u64(sbuf *b, uint64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[sizeof tmp - 1 - n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  sb_put(b, tmp + sizeof tmp - n, (size_t)n);
}

static void sb_i64(sbuf *b, int64_t v) {
  if (v < 0) {
    sb_put(b, "-", 1);
    sb_u64(b, (uint64_t)0 - (uint64_t)v);
  } else {
    sb_u64(b, (uint64_t)v);
  }
}

/* v as exactly `width` digits, zeros in front. */
static void sb_u64_zero(sbuf *b, uint64_t v, int width) {
  char tmp[24];
  for (int i = width - 1; i >= 0; i--) {
    tmp[i] = (char)('0' + v % 10);
    v /= 10;
  }
  sb_put(b, tmp, (size_t)width);
}

static void sb_spaces(sbuf *b, size_t n) {
  static const char sp[32] = "                                ";
  while (n) {
    size_t k = n < sizeof sp ? n : sizeof sp;
    sb_put(b, sp, k);
    n -= k;
  }
}

/* A string from the trace: printable ASCII and UTF-8 as they are, quotes
 * and backslashes escaped, control bytes as \xNN, at most `max` bytes. */
static void sb_text(sbuf *b, const uint8_t *s, size_t n, size_t max,
                    bool quote) {
  if (quote) sb_put(b, "\"", 1);
  size_t lim = n < max ? n : max;
  for (size_t i = 0; i < lim; i++) {
    uint8_t c = s[i];
    if (c == '"' && quote)
      sb_put(b, "\\\"", 2);
    else if (c == '\\')
      sb_put(b, "\\\\", 2);
    else if (c < 0x20 || c == 0x7f)
      sb_printf(b, "\\x%02x", c);
    else
      sb_put(b, (const char *)&c, 1);
  }
  if (n > lim) sb_puts(b, "...");
  if (quote) sb_put(b, "\"", 1);
}

/* An index + 1 kept in a map; 0 when absent. */
static uint32_t idx_get(const etch_u64map *m, uint64_t k) {
  int64_t v;
  return etch__u64map_get(m, k, &v) ? (uint32_t)v : 0;
}

/* iid -> string (owned), in base's pointer map. */
typedef struct imap {
  etch_ptrmap m;
} imap;

static void imap_clear(imap *m) {
  for (size_t i = 0; m->m.slots && i <= m->m.mask; i++) free(m->m.slots[i].val);
  etch__ptrmap_free(&m->m);
}

static const char *imap_get(const imap *m, uint64_t k) {
  return k ? (const char *)etch__ptrmap_get(&m->m, k) : NULL;
}

/* The trace may send an iid again (after a reset): the last one wins. A
 * map that cannot grow keeps what it has (the string shows as ?). */
static void imap_set(imap *m, uint64_t k, const uint8_t *s, size_t n) {
  if (!k) return;
  if (n > 1024) n = 1024;
  char *v = (char *)etch__malloc(n + 1);
  if (!v) return;
  memcpy(v, s, n);
  v[n] = '\0';
  char *old = (char *)etch__ptrmap_get(&m->m, k);
  if (etch__ptrmap_put(&m->m, k, v)) {
    free(v);
    return;
  }
  free(old);
}

/* ---- state ------------------------------------------------------------------- */

/* A track as its descriptor on this sequence said. */
typedef struct ctrack {
  uint64_t uuid;
  char name[64];
  char unit[24];
  bool counter, thread, process;
  int32_t pid, tid;
} ctrack;

/* The decoding state of one sequence (the interceptor's thread state). */
typedef struct cseq {
  imap names, cats, da_names, da_strings;
  etch_u64map track_idx; /* uuid -> index + 1 into tracks */
  ctrack *tracks;
  size_t ntracks, tracks_cap;
  uint64_t default_track;
  uint64_t default_clock;
  uint64_t incr_clock;     /* the sequence's incremental clock id, or 0 */
  uint64_t incr_value;     /* its current value */
  int64_t incr_offset;     /* BOOTTIME - incremental, from the snapshot */
  char process_name[64];
  sbuf line, args, flows;
  uint64_t start_ns;
  bool have_start;
} cseq;

/* Slices open on one track (instance state). */
typedef struct open_slice {
  uint64_t ts;
  char name[64];
} open_slice;

typedef struct tstack {
  uint64_t uuid;
  open_slice *s;
  size_t n, cap;
} tstack;

typedef struct console {
  int fd;
  bool color;
  uint64_t start_ns;
  tstack *stacks;
  size_t nstacks, stacks_cap;
  uint64_t write_errors;
} console;

static void cseq_reset(void *global, void *state) {
  (void)global;
  cseq *q = (cseq *)state;
  imap_clear(&q->names);
  imap_clear(&q->cats);
  imap_clear(&q->da_names);
  imap_clear(&q->da_strings);
}

static void cseq_destroy(void *global, void *state) {
  cseq *q = (cseq *)state;
  cseq_reset(global, state);
  etch__u64map_free(&q->track_idx);
  free(q->tracks);
  free(q->line.v.data);
  free(q->args.v.data);
  free(q->flows.v.data);
}

static ctrack *track_find(cseq *q, uint64_t uuid) {
  uint32_t i = uuid ? idx_get(&q->track_idx, uuid) : 0;
  return i && i <= q->ntracks ? &q->tracks[i - 1] : NULL;
}

static ctrack *track_get(cseq *q, uint64_t uuid) {
  ctrack *t = track_find(q, uuid);
  if (t || !uuid) return t;
  if (q->ntracks == q->tracks_cap) {
    size_t cap = q->tracks_cap ? q->tracks_cap * 2 : 8;
    if (cap > 65536) return NULL; /* a sequence that lies about tracks */
    ctrack *n = (ctrack *)etch__realloc(q->tracks, cap * sizeof *n);
    if (!n) return NULL;
    q->tracks = n;
    q->tracks_cap = cap;
  }
  t = &q->tracks[q->ntracks++];
  memset(t, 0, sizeof *t);
  t->uuid = uuid;
  if (!etch__u64map_put(&q->track_idx, uuid, (int64_t)q->ntracks)) {
    q->ntracks--;
    return NULL;
  }
  return t;
}

static void copy_str(char *dst, size_t cap, const uint8_t *s, size_t n) {
  if (n >= cap) n = cap - 1;
  memcpy(dst, s, n);
  dst[n] = '\0';
}

/* ---- decoding --------------------------------------------------------------- */

/* Stops a nested message's walk when it is malformed; `err` says why. */
typedef struct derr {
  const char *msg;
  size_t off;
} derr;

static bool dec_ok(const etch__pb_dec *d, derr *e, size_t base) {
  if (!d->err) return true;
  if (!e->msg) {
    e->msg = d->err_msg ? d->err_msg : "malformed field";
    e->off = base + d->err_off;
  }
  return false;
}

static void interned(imap *m, const etch__pb_field *f, uint32_t str_field,
                     derr *e, size_t base) {
  etch__pb_dec d;
  etch__pb_field g;
  uint64_t iid = 0;
  const uint8_t *s = NULL;
  size_t n = 0;
  etch__pb_dec_init(&d, f->data, f->len);
  while (etch__pb_next(&d, &g)) {
    if (g.id == ETCH_INTERNED_IID && g.wt == ETCH_PB_VARINT) iid = g.u;
    if (g.id == str_field && g.wt == ETCH_PB_LEN) {
      s = g.data;
      n = g.len;
    }
  }
  if (dec_ok(&d, e, base) && s)
    imap_set(m, iid, s, n);
}

static void interned_data(cseq *q, const etch__pb_field *f, derr *e) {
  etch__pb_dec d;
  etch__pb_field g;
  etch__pb_dec_init(&d, f->data, f->len);
  while (etch__pb_next(&d, &g)) {
    if (g.wt != ETCH_PB_LEN) continue;
    if (g.id == ETCH_ID_EVENT_CATEGORIES)
      interned(&q->cats, &g, ETCH_INTERNED_NAME, e, f->off);
    else if (g.id == ETCH_ID_EVENT_NAMES)
      interned(&q->names, &g, ETCH_INTERNED_NAME, e, f->off);
    else if (g.id == ETCH_ID_DEBUG_ANNOTATION_NAMES)
      interned(&q->da_names, &g, ETCH_INTERNED_NAME, e, f->off);
    else if (g.id == ETCH_ID_DEBUG_ANNOTATION_STRING_VALUES)
      interned(&q->da_strings, &g, ETCH_INTERNED_STR, e, f->off);
  }
  dec_ok(&d, e, f->off);
}

static void track_descriptor(cseq *q, const etch__pb_field *f, derr *e) {
  etch__pb_dec d;
  etch__pb_field g, h;
  uint64_t uuid = 0;
  const uint8_t *name = NULL;
  size_t name_len = 0;
  etch__pb_field proc = {0}, thr = {0}, ctr = {0};
  etch__pb_dec_init(&d, f->data, f->len);
  while (etch__pb_next(&d, &g)) {
    if (g.id == ETCH_TD_UUID && g.wt == ETCH_PB_VARINT) uuid = g.u;
    if ((g.id == ETCH_TD_NAME || g.id == ETCH_TD_STATIC_NAME) &&
        g.wt == ETCH_PB_LEN) {
      name = g.data;
      name_len = g.len;
    }
    if (g.wt != ETCH_PB_LEN) continue;
    if (g.id == ETCH_TD_PROCESS) proc = g;
    if (g.id == ETCH_TD_THREAD) thr = g;
    if (g.id == ETCH_TD_COUNTER) ctr = g;
  }
  if (!dec_ok(&d, e, f->off)) return;
  ctrack *t = track_get(q, uuid);
  if (!t) return;
  if (name) copy_str(t->name, sizeof t->name, name, name_len);
  if (proc.data) {
    t->process = true;
    etch__pb_dec_init(&d, proc.data, proc.len);
    while (etch__pb_next(&d, &h)) {
      if (h.id == ETCH_PD_PID && h.wt == ETCH_PB_VARINT) t->pid = (int32_t)h.u;
      if (h.id == ETCH_PD_PROCESS_NAME && h.wt == ETCH_PB_LEN) {
        copy_str(t->name, sizeof t->name, h.data, h.len);
        copy_str(q->process_name, sizeof q->process_name, h.data, h.len);
      }
    }
    dec_ok(&d, e, f->off);
  }
  if (thr.data) {
    t->thread = true;
    etch__pb_dec_init(&d, thr.data, thr.len);
    while (etch__pb_next(&d, &h)) {
      if (h.wt == ETCH_PB_VARINT && h.id == ETCH_THD_PID) t->pid = (int32_t)h.u;
      if (h.wt == ETCH_PB_VARINT && h.id == ETCH_THD_TID) t->tid = (int32_t)h.u;
      if (h.id == ETCH_THD_THREAD_NAME && h.wt == ETCH_PB_LEN)
        copy_str(t->name, sizeof t->name, h.data, h.len);
    }
    dec_ok(&d, e, f->off);
  }
  if (ctr.data) {
    t->counter = true;
    etch__pb_dec_init(&d, ctr.data, ctr.len);
    while (etch__pb_next(&d, &h)) {
      if (h.id == ETCH_CD_UNIT && h.wt == ETCH_PB_VARINT && !t->unit[0]) {
        const char *u = h.u == ETCH_CD_UNIT_TIME_NS     ? "ns"
                        : h.u == ETCH_CD_UNIT_SIZE_BYTES ? "bytes"
                                                         : "";
        snprintf(t->unit, sizeof t->unit, "%s", u);
      }
      if (h.id == ETCH_CD_UNIT_NAME && h.wt == ETCH_PB_LEN)
        copy_str(t->unit, sizeof t->unit, h.data, h.len);
    }
    dec_ok(&d, e, f->off);
  }
}

static void defaults(cseq *q, const etch__pb_field *f, derr *e) {
  etch__pb_dec d, d2;
  etch__pb_field g, h;
  etch__pb_dec_init(&d, f->data, f->len);
  while (etch__pb_next(&d, &g)) {
    if (g.id == ETCH_DEFAULTS_TIMESTAMP_CLOCK_ID && g.wt == ETCH_PB_VARINT)
      q->default_clock = g.u;
    if (g.id == ETCH_DEFAULTS_TRACK_EVENT_DEFAULTS && g.wt == ETCH_PB_LEN) {
      etch__pb_dec_init(&d2, g.data, g.len);
      while (etch__pb_next(&d2, &h))
        if (h.id == ETCH_TEDEFAULTS_TRACK_UUID && h.wt == ETCH_PB_VARINT)
          q->default_track = h.u;
      dec_ok(&d2, e, f->off);
    }
  }
  dec_ok(&d, e, f->off);
}

/* Incremental clocks (ids 64-127) and their BOOTTIME offsets. */
static void clock_snapshot(cseq *q, const etch__pb_field *f, derr *e) {
  etch__pb_dec d, d2;
  etch__pb_field g, h;
  uint64_t boot = 0, incr_id = 0, incr_ts = 0;
  bool have_boot = false;
  etch__pb_dec_init(&d, f->data, f->len);
  while (etch__pb_next(&d, &g)) {
    if (g.id != ETCH_CLOCKSNAP_CLOCKS || g.wt != ETCH_PB_LEN) continue;
    uint64_t id = 0, ts = 0;
    bool incremental = false;
    etch__pb_dec_init(&d2, g.data, g.len);
    while (etch__pb_next(&d2, &h)) {
      if (h.wt != ETCH_PB_VARINT) continue;
      if (h.id == ETCH_SNAPCLOCK_CLOCK_ID) id = h.u;
      if (h.id == ETCH_SNAPCLOCK_TIMESTAMP) ts = h.u;
      if (h.id == ETCH_SNAPCLOCK_IS_INCREMENTAL) incremental = h.u != 0;
    }
    dec_ok(&d2, e, f->off);
    if (id == ETCH_CLOCK_BOOTTIME) {
      boot = ts;
      have_boot = true;
    } else if (incremental && id >= ETCH_CLOCK_SEQ_SCOPED_FIRST &&
               id <= ETCH_CLOCK_SEQ_SCOPED_LAST) {
      incr_id = id;
      incr_ts = ts;
    }
  }
  if (!dec_ok(&d, e, f->off) || !incr_id) return;
  q->incr_clock = incr_id;
  q->incr_value = incr_ts;
  q->incr_offset = have_boot ? (int64_t)(boot - incr_ts) : 0;
}

/* A NestedValue of type ARRAY (2) with no elements (field 4). */
static bool nested_is_empty_array(const uint8_t *data, size_t len) {
  etch__pb_dec d;
  etch__pb_field g;
  bool array = false;
  etch__pb_dec_init(&d, data, len);
  while (etch__pb_next(&d, &g)) {
    if (g.id == 1 && g.wt == ETCH_PB_VARINT) array = g.u == 2;
    if (g.id == 4) return false;
  }
  return array && !d.err;
}

/* One debug annotation's value, or a nested one's, into b. */
static void annotation_value(cseq *q, sbuf *b, const uint8_t *data,
                             size_t len, int depth, derr *e, size_t base);

static void annotation(cseq *q, sbuf *b, const uint8_t *data, size_t len,
                       int depth, derr *e, size_t base, bool with_name) {
  etch__pb_dec d;
  etch__pb_field g;
  const char *name = NULL;
  const uint8_t *lit = NULL;
  size_t lit_len = 0;
  etch__pb_dec_init(&d, data, len);
  while (etch__pb_next(&d, &g)) {
    if (g.id == ETCH_DA_NAME_IID && g.wt == ETCH_PB_VARINT)
      name = imap_get(&q->da_names, g.u);
    if (g.id == ETCH_DA_NAME && g.wt == ETCH_PB_LEN) {
      lit = g.data;
      lit_len = g.len;
    }
  }
  if (!dec_ok(&d, e, base)) return;
  if (with_name) {
    if (lit)
      sb_text(b, lit, lit_len, 64, false);
    else
      sb_puts(b, name ? name : "?");
    sb_put(b, "=", 1);
  }
  annotation_value(q, b, data, len, depth, e, base);
}

static void annotation_value(cseq *q, sbuf *b, const uint8_t *data,
                             size_t len, int depth, derr *e, size_t base) {
  etch__pb_dec d;
  etch__pb_field g;
  bool any = false;
  if (depth > 8) {
    sb_puts(b, "...");
    return;
  }
  etch__pb_dec_init(&d, data, len);
  while (etch__pb_next(&d, &g)) {
    bool v = g.wt == ETCH_PB_VARINT, l = g.wt == ETCH_PB_LEN;
    switch (g.id) {
      case ETCH_DA_BOOL_VALUE:
        if (v) sb_puts(b, g.u ? "true" : "false"), any = true;
        break;
      case ETCH_DA_UINT_VALUE:
        if (v) sb_u64(b, g.u), any = true;
        break;
      case ETCH_DA_INT_VALUE:
        if (v) sb_i64(b, (int64_t)g.u), any = true;
        break;
      case ETCH_DA_DOUBLE_VALUE:
        if (g.wt == ETCH_PB_FIXED64)
          sb_printf(b, "%.17g", etch__pb_field_double(&g)), any = true;
        break;
      case ETCH_DA_POINTER_VALUE:
        if (v) sb_printf(b, "0x%" PRIx64, g.u), any = true;
        break;
      case ETCH_DA_STRING_VALUE:
      case ETCH_DA_LEGACY_JSON_VALUE:
        if (l) sb_text(b, g.data, g.len, 256, true), any = true;
        break;
      case ETCH_DA_STRING_VALUE_IID:
        if (v) {
          const char *s = imap_get(&q->da_strings, g.u);
          if (s)
            sb_text(b, (const uint8_t *)s, strlen(s), 256, true);
          else
            sb_puts(b, "?");
          any = true;
        }
        break;
      case ETCH_DA_DICT_ENTRIES:
        if (!l) break;
        sb_puts(b, any ? ", " : "{");
        any = true;
        annotation(q, b, g.data, g.len, depth + 1, e, base, true);
        break;
      case ETCH_DA_ARRAY_VALUES:
        if (!l) break;
        sb_puts(b, any ? ", " : "[");
        any = true;
        annotation_value(q, b, g.data, g.len, depth + 1, e, base);
        break;
      case ETCH_DA_NESTED_VALUE:
        /* Only the empty array of custom events (docs/format.md) is
         * written in this older form; others print as "?". */
        if (l && !any && nested_is_empty_array(g.data, g.len))
          sb_puts(b, "[]"), any = true;
        break;
      default:
        break;
    }
  }
  dec_ok(&d, e, base);
  /* Close what the entries opened: a dict's or an array's bracket. */
  etch__pb_dec_init(&d, data, len);
  int kind = 0;
  while (etch__pb_next(&d, &g)) {
    if (g.id == ETCH_DA_DICT_ENTRIES && g.wt == ETCH_PB_LEN) kind = 1;
    if (g.id == ETCH_DA_ARRAY_VALUES && g.wt == ETCH_PB_LEN) kind = 2;
  }
  if (kind) sb_puts(b, kind == 1 ? "}" : "]");
  if (!any) sb_puts(b, "?");
}

/* ---- lines ------------------------------------------------------------------- */

static tstack *stack_for(console *c, uint64_t uuid) {
  for (size_t i = 0; i < c->nstacks; i++)
    if (c->stacks[i].uuid == uuid) return &c->stacks[i];
  if (c->nstacks == c->stacks_cap) {
    size_t cap = c->stacks_cap ? c->stacks_cap * 2 : 16;
    if (cap > 65536) return NULL;
    tstack *n = (tstack *)etch__realloc(c->stacks, cap * sizeof *n);
    if (!n) return NULL;
    c->stacks = n;
    c->stacks_cap = cap;
  }
  tstack *s = &c->stacks[c->nstacks++];
  memset(s, 0, sizeof *s);
  s->uuid = uuid;
  return s;
}

/* ns, or us / ms / s with three decimals (truncated). */
static void put_duration(sbuf *b, uint64_t ns) {
  if (ns < 1000) {
    sb_u64(b, ns);
    sb_puts(b, " ns");
    return;
  }
  uint64_t unit = ns < 1000000 ? 1000 : ns < 1000000000 ? 1000000 : 1000000000;
  sb_u64(b, ns / unit);
  sb_put(b, ".", 1);
  sb_u64_zero(b, ns % unit / (unit / 1000), 3);
  sb_puts(b, unit == 1000 ? " us" : unit == 1000000 ? " ms" : " s");
}

/* A stable colour per thread: one of six, from the thread id. */
static int thread_color(int32_t tid) {
  uint32_t h = (uint32_t)tid * 2654435761u;
  return 31 + (int)((h >> 16) % 6);
}

/* The line's head: time, process/thread, into q->line. */
/* The line's time and process/thread: the thread of `thread_track` when
 * it is one (an event of another thread, replayed), else the sequence's. */
static void line_head(cseq *q, bool color, uint64_t ts, bool have_ts,
                      uint64_t thread_track) {
  sbuf *b = &q->line;
  b->v.len = 0;
  if (have_ts) {
    /* [-]SSSS.uuuuuu: seconds at least four wide, microseconds. */
    int64_t rel = (int64_t)(ts - q->start_ns);
    uint64_t mag = rel < 0 ? (uint64_t)-rel : (uint64_t)rel;
    uint64_t sec = mag / 1000000000u;
    int digits = 1;
    for (uint64_t x = sec; x >= 10; x /= 10) digits++;
    sb_spaces(b, digits < 4 ? (size_t)(4 - digits) : 0);
    sb_put(b, rel < 0 ? "-" : " ", 1);
    sb_u64(b, sec);
    sb_put(b, ".", 1);
    sb_u64_zero(b, mag % 1000000000u / 1000u, 6);
  } else {
    sb_puts(b, "           ?");
  }
  ctrack *th = track_find(q, thread_track);
  if (!th || !th->thread) th = track_find(q, q->default_track);
  const char *proc = q->process_name[0] ? q->process_name : "?";
  const char *slash = strrchr(proc, '/');
  if (slash && slash[1]) proc = slash + 1;
  sb_put(b, " ", 1);
  if (color) {
    sb_puts(b, "\x1b[");
    sb_u64(b, (uint64_t)thread_color(th ? th->tid : 0));
    sb_put(b, "m", 1);
  }
  size_t start = b->v.len;
  sb_puts(b, proc);
  sb_put(b, "/", 1);
  if (th && th->name[0])
    sb_puts(b, th->name);
  else if (th && th->tid)
    sb_i64(b, th->tid);
  else
    sb_put(b, "?", 1);
  size_t w = b->v.len - start;
  if (color) sb_puts(b, "\x1b[0m");
  sb_spaces(b, w < 24 ? 24 - w : 0);
  sb_put(b, " ", 1);
}

static void emit_line(console *c, cseq *q) {
  sbuf *b = &q->line;
  if (b->oom) {
    b->oom = false;
    return;
  }
  sb_put(b, "\n", 1);
  const char *p = (const char *)b->v.data;
  size_t n = b->v.len;
  while (n) {
    ssize_t w = write(c->fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      c->write_errors++;
      return;
    }
    p += w;
    n -= (size_t)w;
  }
}

/* ---- the packet ------------------------------------------------------------ */

typedef struct tevent {
  uint64_t type;
  const char *name; /* interned or literal (then in lit) */
  const uint8_t *lit;
  size_t lit_len;
  const char *cat;
  uint64_t track;
  bool has_track;
  bool counter_is_double, has_counter;
  int64_t counter_i;
  double counter_d;
} tevent;

static void track_event(cseq *q, const etch__pb_field *f, tevent *ev,
                        derr *e) {
  etch__pb_dec d;
  etch__pb_field g;
  sbuf *args = &q->args, *flows = &q->flows;
  args->v.len = flows->v.len = 0;
  etch__pb_dec_init(&d, f->data, f->len);
  while (etch__pb_next(&d, &g)) {
    bool v = g.wt == ETCH_PB_VARINT, l = g.wt == ETCH_PB_LEN;
    switch (g.id) {
      case ETCH_TE_TYPE:
        if (v) ev->type = g.u;
        break;
      case ETCH_TE_NAME_IID:
        if (v) ev->name = imap_get(&q->names, g.u), ev->lit = NULL;
        if (v && !ev->name) ev->name = "?";
        break;
      case ETCH_TE_NAME:
        if (l) ev->lit = g.data, ev->lit_len = g.len, ev->name = NULL;
        break;
      case ETCH_TE_CATEGORY_IIDS:
        if (v && !ev->cat) ev->cat = imap_get(&q->cats, g.u);
        break;
      case ETCH_TE_TRACK_UUID:
        if (v) ev->track = g.u, ev->has_track = true;
        break;
      case ETCH_TE_COUNTER_VALUE:
        if (v) ev->counter_i = (int64_t)g.u, ev->has_counter = true;
        break;
      case ETCH_TE_DOUBLE_COUNTER_VALUE:
        if (g.wt == ETCH_PB_FIXED64) {
          ev->counter_d = etch__pb_field_double(&g);
          ev->counter_is_double = ev->has_counter = true;
        }
        break;
      case ETCH_TE_DEBUG_ANNOTATIONS:
        if (!l) break;
        sb_put(args, " ", 1);
        annotation(q, args, g.data, g.len, 0, e, f->off, true);
        break;
      case ETCH_TE_FLOW_IDS:
      case ETCH_TE_TERMINATING_FLOW_IDS:
        if (g.wt == ETCH_PB_FIXED64)
          sb_printf(flows, " %s0x%" PRIx64,
                    g.id == ETCH_TE_FLOW_IDS ? "->" : "|>", g.u);
        break;
      case ETCH_TE_FLOW_IDS_OLD:
      case ETCH_TE_TERMINATING_FLOW_IDS_OLD:
        if (v)
          sb_printf(flows, " %s0x%" PRIx64,
                    g.id == ETCH_TE_FLOW_IDS_OLD ? "->" : "|>", g.u);
        break;
      default:
        break;
    }
  }
  dec_ok(&d, e, f->off);
}

static void put_name(sbuf *b, const tevent *ev) {
  if (ev->lit)
    sb_text(b, ev->lit, ev->lit_len, 128, false);
  else
    sb_puts(b, ev->name ? ev->name : "?");
}

static void console_packet(const etch_intercepted *p) {
  cseq *q = (cseq *)p->thread_state;
  etch__pb_dec d;
  etch__pb_field f, te = {0};
  derr e = {0};
  uint64_t ts = 0, clock = 0;
  bool has_ts = false, has_clock = false, has_te = false;

  /* Everything but the TrackEvent first: its names may be interned in the
   * same packet, after it. */
  etch__pb_dec_init(&d, p->data, p->size);
  while (etch__pb_next(&d, &f)) {
    switch (f.id) {
      case ETCH_PKT_TIMESTAMP:
        if (f.wt == ETCH_PB_VARINT) ts = f.u, has_ts = true;
        break;
      case ETCH_PKT_TIMESTAMP_CLOCK_ID:
        if (f.wt == ETCH_PB_VARINT) clock = f.u, has_clock = true;
        break;
      case ETCH_PKT_TRACE_PACKET_DEFAULTS:
        if (f.wt == ETCH_PB_LEN) defaults(q, &f, &e);
        break;
      case ETCH_PKT_CLOCK_SNAPSHOT:
        if (f.wt == ETCH_PB_LEN) clock_snapshot(q, &f, &e);
        break;
      case ETCH_PKT_INTERNED_DATA:
        if (f.wt == ETCH_PB_LEN) interned_data(q, &f, &e);
        break;
      case ETCH_PKT_TRACK_DESCRIPTOR:
        if (f.wt == ETCH_PB_LEN) track_descriptor(q, &f, &e);
        break;
      case ETCH_PKT_TRACK_EVENT:
        if (f.wt == ETCH_PB_LEN) te = f, has_te = true;
        break;
      default:
        break;
    }
  }
  dec_ok(&d, &e, 0);

  /* The time in BOOTTIME ns. */
  if (!has_clock) clock = q->default_clock ? q->default_clock : ETCH_CLOCK_BOOTTIME;
  if (has_ts && q->incr_clock && clock == q->incr_clock) {
    q->incr_value += ts;
    ts = q->incr_value + (uint64_t)q->incr_offset;
  } else if (has_ts && clock >= ETCH_CLOCK_SEQ_SCOPED_FIRST &&
             clock <= ETCH_CLOCK_SEQ_SCOPED_LAST) {
    has_ts = false; /* a clock this sequence never defined */
  }

  tevent ev = {0};
  if (has_te && !e.msg) track_event(q, &te, &ev, &e);

  ETCH_INTERCEPTOR_LOCKED(p, console, c);
  if (!q->have_start) {
    q->start_ns = c->start_ns;
    q->have_start = true;
  }
  if (e.msg) {
    line_head(q, c->color, ts, has_ts, q->default_track);
    sb_printf(&q->line, "! undecodable packet (%zu bytes): %s at offset %zu",
              p->size, e.msg, e.off);
    emit_line(c, q);
    return;
  }
  if (!has_te) return;

  uint64_t track = ev.has_track ? ev.track : q->default_track;
  ctrack *tk = track_find(q, track);
  bool slice = ev.type == ETCH_TE_TYPE_SLICE_BEGIN ||
               ev.type == ETCH_TE_TYPE_SLICE_END;
  /* Instants and counters sit at the thread's nesting, wherever their
   * track; slices at their own track's. */
  tstack *thr = stack_for(c, q->default_track);
  size_t depth = thr ? thr->n : 0;
  tstack *st = stack_for(c, track); /* may move thr */
  if (slice) depth = st ? st->n : 0;
  if (ev.type == ETCH_TE_TYPE_SLICE_END && depth) depth--;
  line_head(q, c->color, ts, has_ts, track);
  sbuf *b = &q->line;
  for (size_t i = 0; i < depth && i < 32; i++) sb_puts(b, "  ");
  switch (ev.type) {
    case ETCH_TE_TYPE_SLICE_BEGIN:
      sb_puts(b, "> ");
      put_name(b, &ev);
      if (st) {
        if (st->n == st->cap) {
          size_t cap = st->cap ? st->cap * 2 : 8;
          open_slice *n =
              cap <= 4096 ? (open_slice *)etch__realloc(st->s, cap * sizeof *n) : NULL;
          if (n) st->s = n, st->cap = cap;
        }
        if (st->n < st->cap) {
          open_slice *o = &st->s[st->n++];
          o->ts = ts;
          size_t mark = b->v.len;
          put_name(b, &ev);
          copy_str(o->name, sizeof o->name, b->v.data + mark,
                   b->v.len - mark);
          b->v.len = mark;
        }
      }
      break;
    case ETCH_TE_TYPE_SLICE_END:
      sb_puts(b, "< ");
      if (st && st->n) {
        open_slice *o = &st->s[--st->n];
        sb_puts(b, o->name);
        sb_put(b, " ", 1);
        put_duration(b, ts >= o->ts ? ts - o->ts : 0);
      } else {
        sb_puts(b, "? (its begin was not seen)");
      }
      break;
    case ETCH_TE_TYPE_COUNTER:
      sb_puts(b, "# ");
      if (ev.name || ev.lit)
        put_name(b, &ev);
      else
        sb_puts(b, tk && tk->name[0] ? tk->name : "?");
      sb_puts(b, " = ");
      if (ev.counter_is_double)
        sb_printf(b, "%.17g", ev.counter_d);
      else
        sb_i64(b, ev.counter_i);
      if (tk && tk->unit[0]) {
        sb_put(b, " ", 1);
        sb_puts(b, tk->unit);
      }
      break;
    default:
      sb_puts(b, "* ");
      put_name(b, &ev);
      break;
  }
  if (ev.cat && ev.type != ETCH_TE_TYPE_SLICE_END) {
    sb_puts(b, " [");
    sb_puts(b, ev.cat);
    sb_put(b, "]", 1);
  }
  if (ev.has_track && track != q->default_track && tk && tk->name[0] &&
      !tk->thread && ev.type != ETCH_TE_TYPE_COUNTER) {
    sb_puts(b, " on ");
    sb_text(b, (const uint8_t *)tk->name, strlen(tk->name), 64, true);
  }
  sb_put(b, (const char *)q->args.v.data, q->args.v.len);
  sb_put(b, (const char *)q->flows.v.data, q->flows.v.len);
  emit_line(c, q);
}

/* ---- the instance ----------------------------------------------------------- */

static int console_setup(void *global, const etch_interceptor_config *cfg,
                         void **instance) {
  (void)global;
  int fd = 2;
  int color = -1; /* auto */
  for (size_t i = 0; i < etch_interceptor_config_count(cfg); i++) {
    const char *k = etch_interceptor_config_key(cfg, i);
    const char *v = etch_interceptor_config_value(cfg, i);
    if (strcmp(k, "fd") == 0) {
      char *end;
      errno = 0;
      long n = strtol(v, &end, 10);
      if (!*v || *end || errno || n < 0 || n > 1 << 20)
        return etch_interceptor_reject(cfg, "fd: '%s' is not a descriptor", v);
      fd = (int)n;
    } else if (strcmp(k, "color") == 0) {
      if (strcmp(v, "auto") == 0)
        color = -1;
      else if (strcmp(v, "always") == 0)
        color = 1;
      else if (strcmp(v, "never") == 0)
        color = 0;
      else
        return etch_interceptor_reject(
            cfg, "color: '%s' is not one of auto | always | never", v);
    } else {
      return etch_interceptor_reject(
          cfg, "unknown option '%s' (known: fd, color)", k);
    }
  }
  console *c = (console *)etch__calloc(1, sizeof *c);
  if (!c) return etch__error(ETCH_ENOMEM, "console interceptor: no memory");
  c->fd = fd;
  if (color < 0) {
    const char *nc = etch__getenv("NO_COLOR");
    color = isatty(fd) && !(nc && *nc);
  }
  c->color = color != 0;
  *instance = c;
  return ETCH_OK;
}

static void console_start(void *global, void *instance) {
  (void)global;
  ((console *)instance)->start_ns = etch_now();
}

static void console_destroy(void *global, void *instance) {
  (void)global;
  console *c = (console *)instance;
  if (!c) return;
  for (size_t i = 0; i < c->nstacks; i++) free(c->stacks[i].s);
  free(c->stacks);
  free(c);
}

int etch__console_feed(const uint8_t *const *packets, const size_t *lens,
                       size_t n, int fd) {
  console c = {.fd = fd};
  cseq *q = (cseq *)etch__calloc(1, sizeof *q);
  if (!q) return ETCH_ENOMEM;
  c.start_ns = etch_now();
  /* A one-off instance: the lock calls find it through a private seq. */
  etch__intercept_seq *seq = NULL;
  int rc = etch__intercept_seq_for_test(&c, &seq);
  for (size_t i = 0; rc == ETCH_OK && i < n; i++) {
    etch_intercepted p = {.data = packets[i], .size = lens[i],
                          .sequence_id = 1, .thread_state = q, .seq_ = seq};
    p.state_cleared = etch__packet_clears_state(p.data, p.size);
    if (p.state_cleared) cseq_reset(NULL, q);
    console_packet(&p);
  }
  etch__intercept_seq_free_for_test(seq);
  cseq_destroy(NULL, q);
  free(q);
  for (size_t i = 0; i < c.nstacks; i++) free(c.stacks[i].s);
  free(c.stacks);
  return rc;
}

void etch__console_register(void) {
  static const etch_interceptor console_ic = {
      .name = "console",
      .thread_state_size = sizeof(cseq),
      .setup = console_setup,
      .start = console_start,
      .destroy = console_destroy,
      .packet = console_packet,
      .thread_reset = cseq_reset,
      .thread_destroy = cseq_destroy,
  };
  etch__interceptor_register_builtin(&console_ic);
}

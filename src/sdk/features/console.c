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
 * The packets are decoded in console_decode.c; this file makes the lines.
 *
 * Options (interceptor.KEY=VALUE): fd=N (default 2, stderr), color=auto |
 * always | never (auto: a terminal, and NO_COLOR unset or empty).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etch/interceptor.h"
#include "proto/perfetto.h"
#include "sdk/core/sdk.h"
#include "sdk/features/console_int.h"

/* ---- text ------------------------------------------------------------------ */

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

void etch__console_text(sbuf *b, const uint8_t *s, size_t n, size_t max,
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

/* ---- state ------------------------------------------------------------------- */

/* Slices open on one track (instance state). */
typedef struct open_slice {
  uint64_t ts;
  char name[64];
} open_slice;

typedef struct tstack {
  uint64_t uuid;
  etch_vec s; /* open_slice[], the innermost last */
} tstack;

typedef struct console {
  int fd;
  bool color;
  uint64_t start_ns;
  etch_vec stacks; /* tstack[] */
  uint64_t write_errors;
} console;

static void cseq_reset(void *global, void *state) {
  (void)global;
  etch__console_seq_reset((cseq *)state);
}

static void cseq_destroy(void *global, void *state) {
  (void)global;
  etch__console_seq_free((cseq *)state);
}

/* ---- lines ------------------------------------------------------------------- */

/* The open slices of the track uuid (made empty when new); NULL past
 * 65536 tracks or out of memory. */
static tstack *stack_for(console *c, uint64_t uuid) {
  tstack *s = (tstack *)c->stacks.data;
  size_t n = c->stacks.len / sizeof *s;
  for (size_t i = 0; i < n; i++)
    if (s[i].uuid == uuid) return &s[i];
  if (n >= 65536 || etch__vec_reserve(&c->stacks, sizeof *s)) return NULL;
  s = (tstack *)(c->stacks.data + c->stacks.len);
  c->stacks.len += sizeof *s;
  memset(s, 0, sizeof *s);
  s->uuid = uuid;
  return s;
}

/* How many slices are open on s. */
static size_t stack_depth(const tstack *s) {
  return s ? s->s.len / sizeof(open_slice) : 0;
}

static void stacks_free(etch_vec *stacks) {
  tstack *s = (tstack *)stacks->data;
  for (size_t i = 0; i < stacks->len / sizeof *s; i++) free(s[i].s.data);
  free(stacks->data);
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
  ctrack *th = etch__console_track(q, thread_track);
  if (!th || !th->thread) th = etch__console_track(q, q->default_track);
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

static void put_name(sbuf *b, const tevent *ev) {
  if (ev->lit)
    etch__console_text(b, ev->lit, ev->lit_len, 128, false);
  else
    sb_puts(b, ev->name ? ev->name : "?");
}


/* "> name": a slice begins on st, its name and time kept for its end (at
 * most 4096 open on a track). */
static void slice_begin(sbuf *b, tstack *st, const tevent *ev, uint64_t ts) {
  sb_puts(b, "> ");
  put_name(b, ev);
  if (!st || stack_depth(st) >= 4096 ||
      etch__vec_reserve(&st->s, sizeof(open_slice)))
    return;
  open_slice *o = (open_slice *)(st->s.data + st->s.len);
  st->s.len += sizeof *o;
  o->ts = ts;
  size_t mark = b->v.len;
  put_name(b, ev);
  copy_str(o->name, sizeof o->name, b->v.data + mark, b->v.len - mark);
  b->v.len = mark;
}

/* "< name duration": the innermost slice open on st ends. */
static void slice_end(sbuf *b, tstack *st, uint64_t ts) {
  sb_puts(b, "< ");
  if (!stack_depth(st)) {
    sb_puts(b, "? (its begin was not seen)");
    return;
  }
  st->s.len -= sizeof(open_slice);
  const open_slice *o = (const open_slice *)(st->s.data + st->s.len);
  sb_puts(b, o->name);
  sb_put(b, " ", 1);
  put_duration(b, ts >= o->ts ? ts - o->ts : 0);
}

/* "# name = value unit": a counter, named by its track when not itself. */
static void counter(sbuf *b, const tevent *ev, const ctrack *tk) {
  sb_puts(b, "# ");
  if (ev->name || ev->lit)
    put_name(b, ev);
  else
    sb_puts(b, tk && tk->name[0] ? tk->name : "?");
  sb_puts(b, " = ");
  if (ev->counter_is_double)
    sb_printf(b, "%.17g", ev->counter_d);
  else
    sb_i64(b, ev->counter_i);
  if (tk && tk->unit[0]) {
    sb_put(b, " ", 1);
    sb_puts(b, tk->unit);
  }
}

/* The line of a track event, after its head: nesting, what happened, the
 * category, the track when not the thread's, args and flows. */
static void event_line(console *c, cseq *q, const cpacket *pk) {
  const tevent *ev = &pk->ev;
  uint64_t track = ev->has_track ? ev->track : q->default_track;
  ctrack *tk = etch__console_track(q, track);
  bool slice = ev->type == ETCH_TE_TYPE_SLICE_BEGIN ||
               ev->type == ETCH_TE_TYPE_SLICE_END;
  /* Instants and counters sit at the thread's nesting, wherever their
   * track; slices at their own track's. */
  size_t depth = stack_depth(stack_for(c, q->default_track));
  tstack *st = stack_for(c, track); /* may move the thread's */
  if (slice) depth = stack_depth(st);
  if (ev->type == ETCH_TE_TYPE_SLICE_END && depth) depth--;
  line_head(q, c->color, pk->ts, pk->has_ts, track);
  sbuf *b = &q->line;
  for (size_t i = 0; i < depth && i < 32; i++) sb_puts(b, "  ");
  switch (ev->type) {
    case ETCH_TE_TYPE_SLICE_BEGIN:
      slice_begin(b, st, ev, pk->ts);
      break;
    case ETCH_TE_TYPE_SLICE_END:
      slice_end(b, st, pk->ts);
      break;
    case ETCH_TE_TYPE_COUNTER:
      counter(b, ev, tk);
      break;
    default:
      sb_puts(b, "* ");
      put_name(b, ev);
      break;
  }
  if (ev->cat && ev->type != ETCH_TE_TYPE_SLICE_END) {
    sb_puts(b, " [");
    sb_puts(b, ev->cat);
    sb_put(b, "]", 1);
  }
  if (ev->has_track && track != q->default_track && tk && tk->name[0] &&
      !tk->thread && ev->type != ETCH_TE_TYPE_COUNTER) {
    sb_puts(b, " on ");
    etch__console_text(b, (const uint8_t *)tk->name, strlen(tk->name), 64,
                       true);
  }
  sb_put(b, (const char *)q->args.v.data, q->args.v.len);
  sb_put(b, (const char *)q->flows.v.data, q->flows.v.len);
  emit_line(c, q);
}

static void console_packet(const etch_intercepted *p) {
  cseq *q = (cseq *)p->thread_state;
  cpacket pk;
  etch__console_decode(q, p->data, p->size, &pk);

  ETCH_INTERCEPTOR_LOCKED(p, console, c);
  if (!q->have_start) {
    q->start_ns = c->start_ns;
    q->have_start = true;
  }
  if (pk.e.msg) {
    line_head(q, c->color, pk.ts, pk.has_ts, q->default_track);
    sb_printf(&q->line, "! undecodable packet (%zu bytes): %s at offset %zu",
              p->size, pk.e.msg, pk.e.off);
    emit_line(c, q);
    return;
  }
  if (pk.has_te) event_line(c, q, &pk);
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
  stacks_free(&c->stacks);
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
    if (p.state_cleared) etch__console_seq_reset(q);
    console_packet(&p);
  }
  etch__intercept_seq_free_for_test(seq);
  etch__console_seq_free(q);
  free(q);
  stacks_free(&c.stacks);
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


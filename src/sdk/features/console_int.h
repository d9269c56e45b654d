/*
 * console_int.h - the console interceptor's two halves (console.c): the
 * decoding of a sequence's packets into its state (console_decode.c:
 * interned names, track descriptors, defaults, clock snapshots, the track
 * event's fields and its debug annotations, written as text), and the
 * lines made of them (console.c). Internal to the two files.
 */
#ifndef ETCH_SDK_CONSOLE_INT_H
#define ETCH_SDK_CONSOLE_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/containers.h"
#include "base/map.h"

/* ---- the text being made ------------------------------------------------------ */

/* A line being made: base's byte vector, and whether it ran out of memory
 * (the line is then dropped whole). */
typedef struct sbuf {
  etch_vec v;
  bool oom;
} sbuf;

static inline void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (etch__vec_push(&b->v, s, n)) b->oom = true;
}

static inline void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static inline void sb_printf(sbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline void sb_printf(sbuf *b, const char *fmt, ...) {
  char tmp[128];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) sb_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Decimal digits without printf (the console's hot path). */
static inline void sb_u64(sbuf *b, uint64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[sizeof tmp - 1 - n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  sb_put(b, tmp + sizeof tmp - n, (size_t)n);
}

static inline void sb_i64(sbuf *b, int64_t v) {
  if (v < 0) {
    sb_put(b, "-", 1);
    sb_u64(b, (uint64_t)0 - (uint64_t)v);
  } else {
    sb_u64(b, (uint64_t)v);
  }
}

/* A string from the trace: printable ASCII and UTF-8 as they are, quotes
 * and backslashes escaped, control bytes as \xNN, at most `max` bytes. */
void etch__console_text(sbuf *b, const uint8_t *s, size_t n, size_t max,
                        bool quote);

/* s[0..n) into dst as a string, cut to cap - 1 bytes. */
static inline void copy_str(char *dst, size_t cap, const uint8_t *s, size_t n) {
  if (n >= cap) n = cap - 1;
  memcpy(dst, s, n);
  dst[n] = '\0';
}

/* ---- a sequence's state ---------------------------------------------------------- */

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
  etch_ptrmap names, cats, da_names, da_strings; /* iid -> string (owned) */
  etch_u64map track_idx; /* uuid -> index + 1 into tracks */
  etch_vec tracks;       /* ctrack[] */
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

/* Forgets the interned strings (the sequence's state was cleared). */
void etch__console_seq_reset(cseq *q);
/* Frees all the sequence holds (not q). */
void etch__console_seq_free(cseq *q);
/* The track of this uuid that a descriptor on the sequence named, or NULL. */
ctrack *etch__console_track(cseq *q, uint64_t uuid);

/* ---- one packet decoded ------------------------------------------------------------ */

/* Where a malformed packet stopped being read, and why (msg NULL: it did
 * not). */
typedef struct derr {
  const char *msg;
  size_t off;
} derr;

/* A packet's TrackEvent: its fields; its args and flows are in the
 * sequence's `args` and `flows` as text. */
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

typedef struct cpacket {
  uint64_t ts;  /* BOOTTIME ns, when has_ts */
  bool has_ts;
  bool has_te;  /* it holds a TrackEvent (ev) */
  tevent ev;
  derr e;
} cpacket;

/* Decodes one packet of the sequence: what it says of interned data,
 * tracks, defaults and clocks into q, its time and its track event into
 * *out (zeroed first). */
void etch__console_decode(cseq *q, const uint8_t *data, size_t size,
                          cpacket *out);

#endif /* ETCH_SDK_CONSOLE_INT_H */

/*
 * tdecode.c - see tdecode.h. Written against the wire format directly
 * (hand-rolled varint walker, no etch code), so it is an independent oracle.
 */
#include "tdecode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct span {
  const uint8_t *p, *end;
} span;

typedef struct fld {
  uint32_t id;
  int wt;
  uint64_t v;
  const uint8_t *d;
  size_t n;
} fld;

static int rd_varint(span *s, uint64_t *out) {
  uint64_t v = 0;
  for (int sh = 0; sh < 64; sh += 7) {
    if (s->p >= s->end) return -1;
    uint8_t b = *s->p++;
    v |= (uint64_t)(b & 0x7f) << sh;
    if (!(b & 0x80)) {
      *out = v;
      return 0;
    }
  }
  return -1;
}

/* 1 = field read, 0 = end, -1 = malformed */
static int next(span *s, fld *f) {
  if (s->p >= s->end) return 0;
  uint64_t tag;
  if (rd_varint(s, &tag)) return -1;
  f->id = (uint32_t)(tag >> 3);
  f->wt = (int)(tag & 7);
  f->d = NULL;
  f->n = 0;
  f->v = 0;
  switch (f->wt) {
    case 0:
      return rd_varint(s, &f->v) ? -1 : 1;
    case 1:
      if (s->end - s->p < 8) return -1;
      memcpy(&f->v, s->p, 8);
      s->p += 8;
      return 1;
    case 5: {
      if (s->end - s->p < 4) return -1;
      uint32_t x;
      memcpy(&x, s->p, 4);
      f->v = x;
      s->p += 4;
      return 1;
    }
    case 2: {
      uint64_t n;
      if (rd_varint(s, &n) || n > (uint64_t)(s->end - s->p)) return -1;
      f->d = s->p;
      f->n = (size_t)n;
      s->p += n;
      return 1;
    }
  }
  return -1;
}

static span sub(const fld *f) {
  span s = {f->d, f->d + f->n};
  return s;
}

static char *dupn(const uint8_t *d, size_t n) {
  char *s = malloc(n + 1);
  memcpy(s, d, n);
  s[n] = 0;
  return s;
}

/* ---- per-sequence state ---- */

typedef struct entry {
  uint64_t iid;
  char *s;
} entry;

typedef struct table {
  entry *e;
  size_t n;
} table;

static void tab_put(table *t, uint64_t iid, char *s) {
  for (size_t i = 0; i < t->n; i++)
    if (t->e[i].iid == iid) {
      free(t->e[i].s);
      t->e[i].s = s;
      return;
    }
  t->e = realloc(t->e, (t->n + 1) * sizeof *t->e);
  t->e[t->n].iid = iid;
  t->e[t->n].s = s;
  t->n++;
}

static const char *tab_get(const table *t, uint64_t iid) {
  for (size_t i = 0; i < t->n; i++)
    if (t->e[i].iid == iid) return t->e[i].s;
  return NULL;
}

static void tab_clear(table *t) {
  for (size_t i = 0; i < t->n; i++) free(t->e[i].s);
  free(t->e);
  t->e = NULL;
  t->n = 0;
}

typedef struct seqst {
  uint32_t id;
  table cats, names, danames;
  uint64_t default_track;
  uint64_t default_clock;
  uint64_t last_ts;
  bool incr_known; /* a snapshot gave the incremental clock a value */
  bool valid;
} seqst;

typedef struct dec {
  td_trace *t;
  seqst *seqs;
  size_t nseqs;
} dec;

static seqst *seq_get(dec *d, uint32_t id) {
  for (size_t i = 0; i < d->nseqs; i++)
    if (d->seqs[i].id == id) return &d->seqs[i];
  d->seqs = realloc(d->seqs, (d->nseqs + 1) * sizeof *d->seqs);
  seqst *s = &d->seqs[d->nseqs++];
  memset(s, 0, sizeof *s);
  s->id = id;
  s->valid = true;
  return s;
}

static void seq_clear(seqst *s) {
  tab_clear(&s->cats);
  tab_clear(&s->names);
  tab_clear(&s->danames);
  s->default_track = 0;
  s->default_clock = 0;
  s->incr_known = false;
}

static int interned(dec *d, seqst *s, span sp) {
  fld f;
  int r;
  while ((r = next(&sp, &f)) == 1) {
    if (f.wt != 2) continue;
    table *t = f.id == 1 ? &s->cats : f.id == 2 ? &s->names
                                    : f.id == 3 ? &s->danames : NULL;
    if (!t) continue;
    span e = sub(&f);
    fld g;
    uint64_t iid = 0;
    char *name = NULL;
    while (next(&e, &g) == 1) {
      if (g.id == 1) iid = g.v;
      if (g.id == 2 && g.wt == 2) {
        free(name);
        name = dupn(g.d, g.n);
      }
    }
    tab_put(t, iid, name ? name : strdup(""));
  }
  (void)d;
  return r;
}

static void track_desc(dec *d, span sp) {
  td_track tr;
  memset(&tr, 0, sizeof tr);
  fld f;
  while (next(&sp, &f) == 1) {
    if (f.id == 1) tr.uuid = f.v;
    if (f.id == 5) tr.parent = f.v;
    if (f.id == 2 && f.wt == 2) tr.name = dupn(f.d, f.n);
    if (f.id == 3 && f.wt == 2) {
      tr.is_process = true;
      span p = sub(&f);
      fld g;
      while (next(&p, &g) == 1) {
        if (g.id == 1) tr.pid = (int32_t)g.v;
        if (g.id == 6 && g.wt == 2) tr.process_name = dupn(g.d, g.n);
      }
    }
    if (f.id == 4 && f.wt == 2) {
      tr.is_thread = true;
      span p = sub(&f);
      fld g;
      while (next(&p, &g) == 1) {
        if (g.id == 1) tr.pid = (int32_t)g.v;
        if (g.id == 2) tr.tid = (int32_t)g.v;
        if (g.id == 5 && g.wt == 2) {
          free(tr.name);
          tr.name = dupn(g.d, g.n);
        }
      }
    }
    if (f.id == 8 && f.wt == 2) {
      tr.is_counter = true;
      span p = sub(&f);
      fld g;
      while (next(&p, &g) == 1) {
        if (g.id == 3) tr.unit = (int)g.v;
        if (g.id == 6 && g.wt == 2) tr.unit_name = dupn(g.d, g.n);
      }
    }
  }
  td_trace *t = d->t;
  for (size_t i = 0; i < t->ntracks; i++) {
    if (t->tracks[i].uuid == tr.uuid) { /* re-emitted: keep the newest */
      free(t->tracks[i].name);
      free(t->tracks[i].unit_name);
      free(t->tracks[i].process_name);
      t->tracks[i] = tr;
      return;
    }
  }
  t->tracks = realloc(t->tracks, (t->ntracks + 1) * sizeof tr);
  t->tracks[t->ntracks++] = tr;
}

static int annotation(dec *d, seqst *s, span sp, td_arg *a) {
  memset(a, 0, sizeof *a);
  fld f;
  while (next(&sp, &f) == 1) {
    switch (f.id) {
      case 1: {
        const char *n = tab_get(&s->danames, f.v);
        if (!n) d->t->unresolved++;
        a->name = strdup(n ? n : "?");
        break;
      }
      case 10:
        a->name = dupn(f.d, f.n);
        break;
      case 2:
        a->type = TD_BOOL;
        a->u = f.v;
        break;
      case 3:
        a->type = TD_UINT;
        a->u = f.v;
        break;
      case 4:
        a->type = TD_INT;
        a->i = (int64_t)f.v;
        break;
      case 5:
        a->type = TD_DOUBLE;
        memcpy(&a->d, &f.v, 8);
        break;
      case 6:
        a->type = TD_STRING;
        a->s = dupn(f.d, f.n);
        break;
      case 7:
        a->type = TD_POINTER;
        a->u = f.v;
        break;
    }
  }
  return 0;
}

static void track_event(dec *d, seqst *s, span sp, uint32_t seq, uint64_t ts,
                        bool explicit_ts) {
  td_trace *t = d->t;
  if (t->nev == t->cap) {
    t->cap = t->cap ? t->cap * 2 : 256;
    t->ev = realloc(t->ev, t->cap * sizeof *t->ev);
  }
  td_event *e = &t->ev[t->nev++];
  memset(e, 0, sizeof *e);
  e->seq = seq;
  e->ts = ts;
  e->explicit_ts = explicit_ts;
  e->track = s->default_track;
  fld f;
  while (next(&sp, &f) == 1) {
    switch (f.id) {
      case 9:
        e->type = (int)f.v;
        break;
      case 3: {
        /* Repeated: joined by ",", in the order written. */
        const char *c = tab_get(&s->cats, f.v);
        if (!c) t->unresolved++;
        if (!c) c = "?";
        if (e->cat) {
          size_t a = strlen(e->cat), b = strlen(c);
          char *j = (char *)malloc(a + b + 2);
          if (j) {
            memcpy(j, e->cat, a);
            j[a] = ',';
            memcpy(j + a + 1, c, b + 1);
          }
          free(e->cat);
          e->cat = j;
        } else {
          e->cat = strdup(c);
        }
        break;
      }
      case 22:
        free(e->cat);
        e->cat = dupn(f.d, f.n);
        break;
      case 10: {
        const char *n = tab_get(&s->names, f.v);
        if (!n) t->unresolved++;
        e->name = strdup(n ? n : "?");
        break;
      }
      case 23:
        e->name = dupn(f.d, f.n);
        break;
      case 11:
        e->track = f.v;
        break;
      case 30:
        e->counter_i = (int64_t)f.v;
        break;
      case 44:
        e->counter_is_double = true;
        memcpy(&e->counter_d, &f.v, 8);
        break;
      case 47:
        if (e->nflows < TD_MAX_FLOWS) e->flows[e->nflows++] = f.v;
        break;
      case 48:
        if (e->ntflows < TD_MAX_FLOWS) e->tflows[e->ntflows++] = f.v;
        break;
      case 4:
        if (e->nargs < TD_MAX_ARGS)
          annotation(d, s, sub(&f), &e->args[e->nargs++]);
        break;
    }
  }
}

static int packet(dec *d, span sp);

static int inflate_all(dec *d, const uint8_t *z, size_t n) {
  size_t cap = n * 8 + 1024, len = 0;
  uint8_t *out = malloc(cap);
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit(&zs) != Z_OK) return -1;
  zs.next_in = (Bytef *)z;
  zs.avail_in = (uInt)n;
  int rc;
  do {
    if (len == cap) out = realloc(out, cap *= 2);
    zs.next_out = out + len;
    zs.avail_out = (uInt)(cap - len);
    rc = inflate(&zs, Z_NO_FLUSH);
    len = cap - zs.avail_out;
  } while (rc == Z_OK);
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    free(out);
    return -1;
  }
  span s = {out, out + len};
  fld f;
  int r;
  while ((r = next(&s, &f)) == 1)
    if (f.id == 1 && f.wt == 2 && packet(d, sub(&f))) {
      r = -1;
      break;
    }
  free(out);
  return r < 0 ? -1 : 0;
}

static int packet(dec *d, span sp) {
  td_trace *t = d->t;
  /* First pass: the header fields. */
  uint32_t seq = 0;
  uint64_t flags = 0, ts = 0, clock = 0;
  bool has_ts = false, has_clock = false, dropped = false;
  fld f;
  span s0 = sp;
  int r;
  while ((r = next(&s0, &f)) == 1) {
    if (f.id == 10) seq = (uint32_t)f.v;
    if (f.id == 13) flags = f.v;
    if (f.id == 8) {
      ts = f.v;
      has_ts = true;
    }
    if (f.id == 58) {
      clock = f.v;
      has_clock = true;
    }
    if (f.id == 42 && f.v) dropped = true;
    if (f.id == 87 && f.v) t->first_on_seq++;
    if (f.id == 50 && f.wt == 2) {
      t->compressed++;
      return inflate_all(d, f.d, f.n);
    }
  }
  if (r < 0) return -1;
  t->packets++;
  if (!seq) t->no_seq_id++;
  seqst *s = seq_get(d, seq);
  if (dropped) {
    t->prev_dropped++;
    if (!(flags & 1)) s->valid = false;
  }
  if (flags & 1) {
    t->cleared++;
    seq_clear(s);
    s->valid = true;
  }
  if (!s->valid && (flags & 2)) {
    t->skipped++;
    return 0;
  }
  /* Defaults and snapshots first: they apply to this packet too. */
  s0 = sp;
  while (next(&s0, &f) == 1) {
    if (f.id == 59 && f.wt == 2) {
      span ds = sub(&f);
      fld g;
      while (next(&ds, &g) == 1) {
        if (g.id == 58) s->default_clock = g.v;
        if (g.id == 11 && g.wt == 2) {
          span te = sub(&g);
          fld h;
          while (next(&te, &h) == 1)
            if (h.id == 11) s->default_track = h.v;
        }
      }
    }
    if (f.id == 6 && f.wt == 2) {
      t->clock_snapshots++;
      span cs = sub(&f);
      fld g;
      while (next(&cs, &g) == 1) {
        if (g.id != 1 || g.wt != 2) continue;
        span c = sub(&g);
        fld h;
        uint64_t id = 0, v = 0;
        bool incr = false;
        while (next(&c, &h) == 1) {
          if (h.id == 1) id = h.v;
          if (h.id == 2) v = h.v;
          if (h.id == 3) incr = h.v;
        }
        if (id == 64 && incr) {
          s->last_ts = v;
          s->incr_known = true;
        }
      }
    }
    if (f.id == 12 && f.wt == 2) interned(d, s, sub(&f));
  }
  if (!has_clock) clock = s->default_clock;
  bool explicit_ts = has_clock;
  if (has_ts && clock == 64) {
    if (!s->incr_known) t->unresolved++;
    ts = s->last_ts + ts;
    s->last_ts = ts;
  }
  s0 = sp;
  while (next(&s0, &f) == 1) {
    if (f.id == 60 && f.wt == 2) track_desc(d, sub(&f));
    if (f.id == 11 && f.wt == 2)
      track_event(d, s, sub(&f), seq, ts, explicit_ts && clock != 64);
    if (f.id == 35 && f.wt == 2) {
      t->has_stats = true;
      span st = sub(&f);
      fld g;
      while (next(&st, &g) == 1) {
        if (g.id != 1 || g.wt != 2) continue;
        span b = sub(&g);
        fld h;
        while (next(&b, &h) == 1) {
          if (h.id == 2) t->stat_chunks_written = h.v;
          if (h.id == 3) t->stat_overwritten = h.v;
          if (h.id == 18) t->stat_discarded = h.v;
          if (h.id == 19) t->stat_writer_loss = h.v;
        }
      }
    }
  }
  return 0;
}

int td_decode(const uint8_t *data, size_t len, td_trace *out) {
  memset(out, 0, sizeof *out);
  dec d = {out, NULL, 0};
  span s = {data, data + len};
  fld f;
  int r;
  while ((r = next(&s, &f)) == 1) {
    if (f.id != 1 || f.wt != 2) {
      out->error = "top-level field is not Trace.packet";
      r = -1;
      break;
    }
    if (packet(&d, sub(&f))) {
      out->error = "malformed packet";
      r = -1;
      break;
    }
  }
  if (r < 0 && !out->error) out->error = "malformed Trace framing";
  for (size_t i = 0; i < d.nseqs; i++) seq_clear(&d.seqs[i]);
  free(d.seqs);
  return r < 0 ? -1 : 0;
}

void td_free(td_trace *t) {
  for (size_t i = 0; i < t->nev; i++) {
    td_event *e = &t->ev[i];
    free(e->cat);
    free(e->name);
    for (int j = 0; j < e->nargs; j++) {
      free(e->args[j].name);
      free(e->args[j].s);
    }
  }
  for (size_t i = 0; i < t->ntracks; i++) {
    free(t->tracks[i].name);
    free(t->tracks[i].unit_name);
    free(t->tracks[i].process_name);
  }
  free(t->ev);
  free(t->tracks);
  memset(t, 0, sizeof *t);
}

const td_track *td_track_of(const td_trace *t, uint64_t uuid) {
  for (size_t i = 0; i < t->ntracks; i++)
    if (t->tracks[i].uuid == uuid) return &t->tracks[i];
  return NULL;
}

const td_arg *td_arg_of(const td_event *e, const char *name) {
  for (int i = 0; i < e->nargs; i++)
    if (e->args[i].name && strcmp(e->args[i].name, name) == 0)
      return &e->args[i];
  return NULL;
}

size_t td_count(const td_trace *t, int type, const char *name) {
  size_t n = 0;
  for (size_t i = 0; i < t->nev; i++)
    if (t->ev[i].type == type &&
        (!name || (t->ev[i].name && strcmp(t->ev[i].name, name) == 0)))
      n++;
  return n;
}

int td_decode_file(const char *path, td_trace *out) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    memset(out, 0, sizeof *out);
    out->error = "cannot open";
    return -1;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
  size_t got = fread(buf, 1, (size_t)n, f);
  fclose(f);
  int rc = td_decode(buf, got, out);
  free(buf);
  return rc;
}

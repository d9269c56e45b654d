/*
 * tracebuf.c - the service's trace buffer (see tracebuf.h): chunks in
 * arrival order with a hash index by (sequence, chunk id), per-sequence
 * read watermarks, consuming reads.
 */
#include "buffer/tracebuf.h"
#include "buffer/tracefile.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/map.h"
#include "buffer/fragment.h"
#include "buffer/smb.h"
#include "pb/pb.h"

typedef struct tchunk {
  struct tchunk *older, *newer; /* arrival order */
  uint32_t seq, chunk_id, flags, count;
  uint32_t len;
  uint32_t done; /* fragments already read */
  bool partial;  /* a copy taken while the chunk was being written */
  uint8_t data[];
} tchunk;

/* What a sequence has had read: every chunk before done_id, and the first
 * done_frags fragments of chunk done_id. */
typedef struct tseq {
  uint32_t seq;
  bool seen;
  uint32_t done_id, done_frags;
  /* Chunk done_id was read from a partial copy and its whole copy has not
   * come yet: if the next chunk comes first, the tail is lost. */
  bool tail_open;
  /* Track events in chunks this buffer discarded or overwrote unread,
   * and when the first of them went (BOOTTIME ns). */
  uint64_t lost_events, first_loss_ns;
  /* The last chunk lost unread and the fragments of it counted: a later
   * copy of it (a flush's partial copy came first, or a scrape's) counts
   * and delivers only what comes after them. */
  bool gone;
  uint32_t gone_id, gone_frags;
  /* A discard buffer's: slices left open on the sequence's default track
   * by what it kept (known when none of it had been read yet). */
  uint32_t open_depth;
} tseq;

struct etch_tracebuf {
  uint64_t size, used;
  etch_buffer_fill fill;
  tchunk *oldest, *newest;
  tchunk **slots; /* open addressing, linear probing */
  uint32_t nslots, nchunks;
  tseq *seqs;
  uint32_t nseqs, capseqs;
  etch_u64map seq_index; /* sequence id -> index + 1 in seqs */
  etch_tracebuf_stats st;
  /* The chunks in reading order (by sequence, then chunk id), kept from
   * one read_some to the next while no chunk came or went but by reading
   * (a read frees the chunks it consumed and NULLs their entries, the
   * first ones of a sequence): a read in pieces sorts once, not once a
   * piece, and goes on from order_start, the first entry left. */
  tchunk **order;
  uint32_t norder, order_start;
  uint64_t gen, order_gen; /* gen: counts puts */
  uint64_t progress; /* reads that moved a sequence's watermark on */
};

static uint32_t hash_key(uint32_t seq, uint32_t id) {
  uint64_t k = ((uint64_t)seq << 32 | id) * 0x9e3779b97f4a7c15ull;
  return (uint32_t)(k >> 32);
}

int etch__tracebuf_new(uint64_t size, etch_buffer_fill fill,
                       etch_tracebuf **out) {
  *out = NULL;
  etch_tracebuf *tb = (etch_tracebuf *)etch__calloc(1, sizeof *tb);
  if (!tb) return ETCH_ENOMEM;
  tb->size = size;
  tb->fill = fill;
  tb->nslots = 1024;
  tb->slots = (tchunk **)etch__calloc(tb->nslots, sizeof *tb->slots);
  if (!tb->slots) {
    free(tb);
    return ETCH_ENOMEM;
  }
  tb->st.buffer_size = size;
  *out = tb;
  return ETCH_OK;
}

void etch__tracebuf_free(etch_tracebuf *tb) {
  if (!tb) return;
  for (tchunk *c = tb->oldest, *n; c; c = n) {
    n = c->newer;
    free(c);
  }
  free(tb->slots);
  free(tb->seqs);
  free(tb->order);
  etch__u64map_free(&tb->seq_index);
  free(tb);
}

static uint32_t find_slot(const etch_tracebuf *tb, uint32_t seq, uint32_t id) {
  /* At most half full (index_grow): the probe ends at an empty slot. */
  ETCH_DCHECK(tb->nchunks * 2 <= tb->nslots &&
              (tb->nslots & (tb->nslots - 1)) == 0);
  uint32_t m = tb->nslots - 1, i = hash_key(seq, id) & m;
  while (tb->slots[i] &&
         (tb->slots[i]->seq != seq || tb->slots[i]->chunk_id != id))
    i = (i + 1) & m;
  return i;
}

static tchunk *lookup(const etch_tracebuf *tb, uint32_t seq, uint32_t id) {
  return tb->slots[find_slot(tb, seq, id)];
}

static void index_remove(etch_tracebuf *tb, const tchunk *c) {
  uint32_t m = tb->nslots - 1, i = find_slot(tb, c->seq, c->chunk_id);
  /* Every stored chunk is in the index, as itself. */
  if (ETCH_NEVER(tb->slots[i] != c)) return;
  tb->slots[i] = NULL;
  tb->nchunks--;
  /* Backward shift: entries after the hole that probed past it move up. */
  for (uint32_t j = (i + 1) & m; tb->slots[j]; j = (j + 1) & m) {
    tchunk *e = tb->slots[j];
    uint32_t home = hash_key(e->seq, e->chunk_id) & m;
    bool move = i <= j ? (home <= i || home > j) : (home <= i && home > j);
    if (move) {
      tb->slots[i] = e;
      tb->slots[j] = NULL;
      i = j;
    }
  }
}

static int index_grow(etch_tracebuf *tb) {
  uint32_t n = tb->nslots * 2;
  tchunk **s = (tchunk **)etch__calloc(n, sizeof *s);
  if (!s) return ETCH_ENOMEM;
  tchunk **old = tb->slots;
  uint32_t oldn = tb->nslots;
  tb->slots = s;
  tb->nslots = n;
  for (uint32_t i = 0; i < oldn; i++)
    if (old[i]) tb->slots[find_slot(tb, old[i]->seq, old[i]->chunk_id)] = old[i];
  free(old);
  return ETCH_OK;
}

static void unlink_chunk(etch_tracebuf *tb, tchunk *c) {
  if (c->older) c->older->newer = c->newer; else tb->oldest = c->newer;
  if (c->newer) c->newer->older = c->older; else tb->newest = c->older;
  index_remove(tb, c);
  ETCH_DCHECK(tb->used >= c->len);
  tb->used -= c->len;
}

/* A sequence's read state, found through the index (a service with
 * thousands of writer sequences looks one up for every chunk). */
static tseq *seq_state(etch_tracebuf *tb, uint32_t seq, bool create) {
  int64_t i;
  if (etch__u64map_get(&tb->seq_index, seq, &i)) return &tb->seqs[i - 1];
  if (!create) return NULL;
  if (tb->nseqs == tb->capseqs) {
    uint32_t cap = tb->capseqs ? tb->capseqs * 2 : 16;
    tseq *n = (tseq *)etch__realloc(tb->seqs, cap * sizeof *n);
    if (!n) return NULL;
    tb->seqs = n;
    tb->capseqs = cap;
  }
  if (!etch__u64map_put(&tb->seq_index, seq, (int64_t)tb->nseqs + 1))
    return NULL;
  tseq *s = &tb->seqs[tb->nseqs++];
  memset(s, 0, sizeof *s);
  s->seq = seq;
  return s;
}

static uint64_t events_in(const uint8_t *data, uint32_t len, uint32_t flags,
                          uint32_t from, uint32_t count);

/* Chunk `id` of sequence `seq` (count fragments) lost unread from
 * fragment `from` on: its events counted, once however many copies of it
 * go. */
/* Slices the sequence's stored chunks leave open on its default track
 * (from the start of the sequence: none of it was read). */
static uint32_t open_depth(const etch_tracebuf *tb, uint32_t seq) {
  uint32_t n = 0, cap = 0;
  const tchunk **v = NULL;
  for (const tchunk *c = tb->oldest; c; c = c->newer) {
    if (c->seq != seq) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      const tchunk **w = (const tchunk **)etch__realloc((void *)v, cap * sizeof *w);
      if (!w) {
        free((void *)v);
        return 0;
      }
      v = w;
    }
    v[n++] = c;
  }
  /* In chunk id order (a few out of place at most: insertion sort). */
  for (uint32_t i = 1; i < n; i++)
    for (uint32_t j = i; j > 0 && (int32_t)(v[j]->chunk_id - v[j - 1]->chunk_id) < 0;
         j--) {
      const tchunk *t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  int64_t depth = 0;
  for (uint32_t i = 0; i < n; i++) {
    etch_frag_cursor cur;
    etch__frag_init(&cur, v[i]->data, v[i]->len, v[i]->count, v[i]->flags);
    uint32_t fl;
    const uint8_t *d;
    int k;
    while ((k = etch__frag_next(&cur, &d, &fl)) > 0) {
      if (k == ETCH_FRAG_DROP || cur.index <= v[i]->done ||
          etch__frag_cont_prev(&cur))
        continue;
      depth += etch__packet_slice_delta(d, fl);
      if (depth < 0) depth = 0;
    }
  }
  free((void *)v);
  return (uint32_t)depth;
}

static void note_loss(etch_tracebuf *tb, uint32_t seq, uint32_t id,
                      uint32_t count, const uint8_t *data, uint32_t len,
                      uint32_t flags, uint32_t from) {
  tseq *s = seq_state(tb, seq, true);
  if (!s) return;
  /* A discard buffer's first refusal of the sequence: what it kept ends
   * here, with the slices open then. */
  if (tb->fill == ETCH_BUFFER_DISCARD && !s->gone && !s->seen)
    s->open_depth = open_depth(tb, seq);
  if (s->gone && s->gone_id == id) {
    if (from < s->gone_frags) from = s->gone_frags;
    if (count > s->gone_frags) s->gone_frags = count;
  } else {
    s->gone = true;
    s->gone_id = id;
    s->gone_frags = count;
  }
  uint64_t n = events_in(data, len, flags, from, count);
  if (!n && !s->open_depth) return;
  if (!s->lost_events) s->first_loss_ns = etch__clock_ns(CLOCK_BOOTTIME);
  s->lost_events += n;
}

int etch__tracebuf_put(etch_tracebuf *tb, uint32_t seq, uint32_t chunk_id,
                       uint32_t flags, uint32_t count, const uint8_t *payload,
                       uint32_t len) {
  tb->gen++; /* the reading order changes */
  bool partial = flags & ETCH_TRACEBUF_PARTIAL;
  flags &= ~(uint32_t)ETCH_TRACEBUF_PARTIAL;
  if (len > tb->size)
    return etch__error(ETCH_EINVAL, "chunk of %u bytes in a buffer of %llu",
                       len, (unsigned long long)tb->size);
  /* A copy of a chunk that has been read up to or past what it holds. */
  tseq *s = seq_state(tb, seq, false);
  if (s && s->seen &&
      ((int32_t)(chunk_id - s->done_id) < 0 ||
       (chunk_id == s->done_id && count <= s->done_frags))) {
    /* The whole copy of a chunk read from a partial one, with nothing
     * more in it: its tail was read. */
    if (!partial && chunk_id == s->done_id) s->tail_open = false;
    tb->st.chunks_stale++;
    return ETCH_OK;
  }
  tchunk *old = lookup(tb, seq, chunk_id);
  uint32_t done = 0;
  if (old && old->len >= len && old->count >= count) {
    if (!partial) old->partial = false; /* as whole as it gets */
    tb->st.chunks_stale++;
    return ETCH_OK;
  }
  /* The memory first, before anything is let go: out of it, the buffer
   * keeps what it held (an older copy of this chunk too) and counts the
   * chunk discarded, as a full discard buffer does. */
  tchunk *c = NULL;
  if ((tb->nchunks + 1) * 2 <= tb->nslots || index_grow(tb) == ETCH_OK)
    c = (tchunk *)etch__malloc(sizeof *c + (len ? len : 1));
  if (!c) {
    tb->st.chunks_discarded++;
    if (!old) note_loss(tb, seq, chunk_id, count, payload, len, flags, 0);
    return ETCH_ENOMEM;
  }
  if (old) {
    done = old->done;
    unlink_chunk(tb, old);
    free(old);
    tb->st.chunks_rewritten++;
  }
  /* The rest of a chunk read in part: go on after what was read. */
  if (s && s->seen && chunk_id == s->done_id && done < s->done_frags)
    done = s->done_frags;
  while (tb->used + len > tb->size) {
    if (tb->fill == ETCH_BUFFER_DISCARD || !tb->oldest) {
      free(c);
      tb->st.chunks_discarded++;
      note_loss(tb, seq, chunk_id, count, payload, len, flags, done);
      return etch__error(ETCH_ELIMIT, "trace buffer full");
    }
    tchunk *o = tb->oldest;
    tb->st.chunks_overwritten++;
    tb->st.bytes_overwritten += o->len;
    note_loss(tb, o->seq, o->chunk_id, o->count, o->data, o->len, o->flags,
              o->done);
    unlink_chunk(tb, o);
    free(o);
  }
  /* A copy of a chunk counted lost: what was counted is not read again. */
  const tseq *g = seq_state(tb, seq, false);
  if (g && g->gone && g->gone_id == chunk_id && done < g->gone_frags)
    done = g->gone_frags;
  c->seq = seq;
  c->chunk_id = chunk_id;
  c->flags = flags;
  c->count = count;
  c->len = len;
  c->done = done;
  c->partial = partial;
  memcpy(c->data, payload, len);
  c->older = tb->newest;
  c->newer = NULL;
  if (tb->newest) tb->newest->newer = c; else tb->oldest = c;
  tb->newest = c;
  uint32_t slot = find_slot(tb, seq, chunk_id);
  ETCH_DCHECK(tb->slots[slot] == NULL); /* a copy there was unlinked */
  tb->slots[slot] = c;
  tb->nchunks++;
  tb->used += len;
  ETCH_DCHECK(tb->used <= tb->size);
  tb->st.chunks_written++;
  tb->st.bytes_written += len;
  return ETCH_OK;
}

int etch__tracebuf_patch(etch_tracebuf *tb, uint32_t seq, uint32_t chunk_id,
                         uint32_t offset, const uint8_t *data, uint32_t len) {
  tchunk *c = lookup(tb, seq, chunk_id);
  if (!c) {
    tb->st.patches_failed++;
    return etch__error(ETCH_ENOTFOUND, "patch for chunk %u of sequence %u, "
                       "which is not in the buffer", chunk_id, seq);
  }
  if (offset > c->len || len > c->len - offset) {
    tb->st.patches_failed++;
    return etch__error(ETCH_EINVAL, "patch of %u bytes at %u outside chunk "
                       "%u of sequence %u (%u bytes)", len, offset, chunk_id,
                       seq, c->len);
  }
  memcpy(c->data + offset, data, len);
  tb->st.patches_succeeded++;
  return ETCH_OK;
}

/* ---- reading ---- */

static int cmp_chunk(const void *a, const void *b) {
  const tchunk *x = *(tchunk *const *)a, *y = *(tchunk *const *)b;
  if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
  if (x->chunk_id != y->chunk_id) return x->chunk_id < y->chunk_id ? -1 : 1;
  return 0;
}

/* The events whose packets start in fragments `from`..`count` of a chunk's
 * payload (etch__packet_events of its first fragment; a packet begun in an
 * earlier chunk is counted there). */
static uint64_t events_in(const uint8_t *data, uint32_t len, uint32_t flags,
                          uint32_t from, uint32_t count) {
  uint64_t n = 0;
  etch_frag_cursor cur;
  etch__frag_init(&cur, data, len, count, flags);
  uint32_t fl;
  const uint8_t *d;
  int k;
  while ((k = etch__frag_next(&cur, &d, &fl)) > 0) {
    if (k == ETCH_FRAG_DROP || cur.index <= from || etch__frag_cont_prev(&cur))
      continue;
    n += etch__packet_events(d, fl);
  }
  return n;
}

/* Reads one sequence's chunks g[0..n) (in chunk id order) until *budget
 * bytes of packets were handed out; *stopped when it stopped early (at a
 * packet's end: the rest stays for the next read). */
static int read_seq(etch_tracebuf *tb, tchunk **g, uint32_t n,
                    etch_packet_fn emit, etch_packets_fn run, void *ctx,
                    etch_reasm *r, uint64_t *budget, bool *stopped) {
  *stopped = false;
  uint32_t stop_chunk = 0, stop_frag = 0;
  tseq *s = seq_state(tb, g[0]->seq, true);
  if (!s) return ETCH_ENOMEM;
  bool was_seen = s->seen;
  uint32_t was_id = s->done_id, was_frags = s->done_frags;
  /* After what was read: chunk done_id again (read in part) or the next. */
  etch__reasm_start(r, s->seen ? s->done_id + 1 : 0, s->seen);
  uint32_t pend_chunk = 0, pend_frag = 0; /* where the pending packet began */
  int rc = ETCH_OK;
  uint32_t i;
  for (i = 0; i < n && rc == ETCH_OK; i++) {
    tchunk *c = g[i];
    /* One sequence, in chunk id order, each id once (the index's key). */
    ETCH_DCHECK(c->seq == g[0]->seq && (i == 0 || c->chunk_id > g[i - 1]->chunk_id));
    bool cut;
    /* The chunk before was read from a partial copy and the next one is
     * here before its whole copy (which comes too late if it comes: the
     * read goes past it): its tail is lost, as if the chunk were
     * missing. */
    if (i == 0 ? was_seen && s->tail_open && c->chunk_id != was_id
               : g[i - 1]->partial) {
      tb->st.sequence_gaps++;
      etch__reasm_lose(r);
    }
    if (!etch__reasm_chunk(r, c->chunk_id, &cut))
      tb->st.sequence_gaps++; /* a packet cut by it is lost */
    etch_frag_cursor cur;
    etch__frag_init(&cur, c->data, c->len, c->count, c->flags);
    const uint8_t *d;
    uint32_t len;
    /* Skip what an earlier read took: fragments and drop marks alike (a
     * skip that stopped at a drop mark handed the same packets out again,
     * read after read: a budgeted read that never got further). A lie
     * stops it, and the loop below finds the lie. */
    while (cur.index < c->done && etch__frag_next(&cur, &d, &len) > 0)
      ;
    uint32_t entry_done = cur.index;
    /* The whole packets up to the last fragment (or the one before it, if
     * it goes on in the next chunk) in one call, while they keep within
     * the budget; the first fragment goes the long way if it continues a
     * packet, and so does everything after lost data. */
    uint32_t whole = c->count;
    if (whole && (c->flags & ETCH_SMB_LAST_CONTINUES)) whole--;
    if (run && !r->dropped && !r->pending && cur.index < whole &&
        !(cur.index == 0 && (c->flags & ETCH_SMB_FIRST_CONTINUES))) {
      /* `cur` ends before the fragment that did not go in, which is read
       * again below. */
      uint32_t from = cur.off, k0 = cur.index, off = cur.off, k = k0;
      uint32_t next = off;
      uint64_t bytes = 0;
      while (k < whole &&
             etch__frag_read(c->data, c->len, &next, &d, &len) ==
                 ETCH_FRAG_OK &&
             bytes + len < *budget) {
        bytes += len;
        off = next;
        k++;
      }
      cur.off = off;
      cur.index = k;
      if (cur.index > k0) {
        /* Padding alone is no packet: nothing to hand out, as below. */
        if (bytes)
          rc = run(ctx, c->seq, c->data + from, cur.off - from,
                   cur.index - k0);
        *budget -= bytes;
      }
    }
    while (rc == ETCH_OK) {
      uint32_t at = cur.index;
      int k = etch__frag_next(&cur, &d, &len);
      if (k == ETCH_FRAG_END) break;
      if (k == ETCH_FRAG_DROP) { /* the writer dropped the packet it ends */
        etch__reasm_lose(r);
        continue;
      }
      if (k != ETCH_FRAG_OK) { /* lies about its count or sizes: the rest is lost */
        tb->st.abi_violations++;
        etch__reasm_lose(r);
        break;
      }
      bool cont_prev = etch__frag_cont_prev(&cur);
      bool cont_next = etch__frag_cont_next(&cur);
      if (cont_next && !cont_prev) { /* a packet begins that goes on */
        pend_chunk = i;
        pend_frag = at;
      }
      const uint8_t *pkt;
      uint32_t plen;
      bool dropped, lost;
      rc = etch__reasm_fragment(r, d, len, cont_prev, cont_next, &pkt, &plen,
                                &dropped, &lost);
      if (rc || !plen) continue;
      /* Only what was not read before is handed out. */
      ETCH_DCHECK(at >= entry_done);
      (void)entry_done;
      rc = emit(ctx, c->seq, pkt, plen, dropped);
      *budget = *budget > plen ? *budget - plen : 0;
      if (!*budget) {
        *stopped = true;
        stop_chunk = i;
        stop_frag = at + 1;
        break;
      }
    }
    if (*stopped) break;
    c->done = c->count;
  }
  /* Everything up to a packet still waiting for its next fragment is read;
   * that packet's chunks stay, from its first fragment on. */
  uint32_t keep_from = n;
  ETCH_DCHECK(!*stopped || (stop_chunk < n && stop_frag <= g[stop_chunk]->count));
  ETCH_DCHECK(!r->pending || pend_chunk < n);
  if (*stopped) {
    /* The chunks after the stop are untouched; the stopped one keeps what
     * it has not handed out. */
    g[stop_chunk]->done = stop_frag;
    keep_from = stop_frag >= g[stop_chunk]->count ? stop_chunk + 1 : stop_chunk;
  } else if (r->pending) {
    keep_from = pend_chunk;
    g[pend_chunk]->done = pend_frag;
    for (uint32_t k = pend_chunk + 1; k < n; k++) g[k]->done = 0;
  }
  s->seen = true;
  if (keep_from < n) {
    s->done_id = g[keep_from]->chunk_id;
    s->done_frags = g[keep_from]->done;
    s->tail_open = false; /* the chunk stays: it is read again */
  } else {
    s->done_id = g[n - 1]->chunk_id;
    s->done_frags = g[n - 1]->count;
    s->tail_open = g[n - 1]->partial;
  }
  /* The watermark moved on (or chunks went): the read made progress. */
  if (!was_seen || keep_from ||
      (int32_t)(s->done_id - was_id) > 0 ||
      (s->done_id == was_id && s->done_frags > was_frags))
    tb->progress++;
  for (uint32_t k = 0; k < keep_from; k++) {
    tb->st.chunks_read++;
    tb->st.bytes_read += g[k]->len;
    unlink_chunk(tb, g[k]);
    free(g[k]);
    g[k] = NULL;
  }
  return rc;
}

int etch__tracebuf_read(etch_tracebuf *tb, etch_packet_fn emit, void *ctx) {
  bool more;
  return etch__tracebuf_read_some(tb, emit, ctx, UINT64_MAX, &more);
}

int etch__tracebuf_read_some(etch_tracebuf *tb, etch_packet_fn emit,
                             void *ctx, uint64_t budget, bool *more) {
  return etch__tracebuf_read_runs(tb, emit, NULL, ctx, budget, more);
}

int etch__tracebuf_read_runs(etch_tracebuf *tb, etch_packet_fn emit,
                             etch_packets_fn run, void *ctx, uint64_t budget,
                             bool *more) {
  *more = false;
  if (!tb->nchunks) return ETCH_OK;
  tchunk **all = tb->order;
  if (!all || tb->order_gen != tb->gen) {
    free(tb->order);
    tb->order = NULL;
    all = (tchunk **)etch__malloc(tb->nchunks * sizeof *all);
    if (!all) return ETCH_ENOMEM;
    uint32_t k = 0;
    for (tchunk *c = tb->oldest; c; c = c->newer) all[k++] = c;
    qsort(all, k, sizeof *all, cmp_chunk);
    tb->order = all;
    tb->norder = k;
    tb->order_start = 0;
    tb->order_gen = tb->gen;
  }
  uint32_t n = tb->norder;
  while (tb->order_start < n && !all[tb->order_start]) tb->order_start++;
  etch_reasm r;
  etch__reasm_init(&r);
  int rc = ETCH_OK;
  if (!budget) budget = 1;
  uint64_t progress = tb->progress;
  /* A sequence's entries: those a read consumed (NULL), then the rest. */
  for (uint32_t i = tb->order_start; i < n && rc == ETCH_OK && !*more;) {
    if (!all[i]) {
      i++;
      continue;
    }
    uint32_t j = i + 1;
    while (j < n && all[j] && all[j]->seq == all[i]->seq) j++;
    rc = read_seq(tb, all + i, j - i, emit, run, ctx, &r, &budget, more);
    i = j;
  }
  etch__reasm_free(&r);
  /* A read that stopped early moved some sequence on: the next one starts
   * after it. Were it not so, reading in pieces would never end; the
   * buffer then says there is nothing more (what is left stays, for a
   * whole read) rather than spin. */
  if (*more && ETCH_NEVER(tb->progress == progress)) {
    tb->st.read_stalls++;
    *more = false;
  }
  return rc;
}

uint64_t etch__tracebuf_progress(const etch_tracebuf *tb) {
  return tb->progress;
}

void etch__tracebuf_stats(const etch_tracebuf *tb, etch_tracebuf_stats *out) {
  *out = tb->st;
}

uint64_t etch__tracebuf_used(const etch_tracebuf *tb) { return tb->used; }

uint32_t etch__tracebuf_sequences(const etch_tracebuf *tb, uint32_t *out,
                                  uint32_t cap) {
  for (uint32_t i = 0; i < tb->nseqs && i < cap; i++) out[i] = tb->seqs[i].seq;
  return tb->nseqs;
}

uint32_t etch__tracebuf_losses(const etch_tracebuf *tb,
                               etch_tracebuf_loss *out, uint32_t cap) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < tb->nseqs; i++) {
    if (!tb->seqs[i].lost_events) continue;
    if (n < cap)
      out[n] = (etch_tracebuf_loss){tb->seqs[i].seq, tb->seqs[i].lost_events,
                                    tb->seqs[i].first_loss_ns,
                                    tb->seqs[i].open_depth};
    n++;
  }
  return n;
}

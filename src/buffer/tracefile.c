/*
 * tracefile.c - turns committed packets into a trace file.
 *
 * The file is a run of `Trace.packet` records. Packets come in sequence by
 * sequence (etch__buffer_read's order); each gets its
 * trusted_packet_sequence_id appended here (writers never write it, as a
 * service stamps it), in the service also the trusted_uid and trusted_pid
 * of the producer that wrote it, and the first packet after missing data
 * gets previous_packet_dropped.
 *
 * Where data went missing (a ring that overwrote its oldest chunks), the
 * packets that can no longer be decoded are left out rather than handed to
 * readers that would skip them anyway: packets that need incremental state
 * up to the next reset, and slice ends whose begins were lost. What is left
 * decodes completely; the loss itself is still recorded, in the flag and in
 * the TraceStats packet at the end.
 *
 * With compression on, records are batched (at most 256 KiB each) and each
 * batch is written as one `compressed_packets` packet (zlib/deflate), so a
 * file cut short loses only the piece it was cut in; a record too large
 * for a batch is written uncompressed between two of them.
 */
#include "base/clock.h"
#include "buffer/tracefile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "buffer/sink.h"
#include "proto/check.h"
#include "proto/ipc.h"
#include "proto/perfetto.h"

void etch__tracefile_init(etch_tracefile *o, bool compress) {
  memset(o, 0, sizeof *o);
  o->compress = compress;
  etch__pb_buf_init(&o->out, 1 << 16, 0);
  etch__pb_buf_init(&o->batch, compress ? ETCH_TRACEFILE_BATCH + 4096 : 0, 0);
  etch__pb_buf_init(&o->tmp, 512, 0);
}

void etch__tracefile_free(etch_tracefile *o) {
  etch__u64map_free(&o->seq_state);
  etch__u64map_free(&o->own_important);
  etch__vec_free(&o->lost);
  etch__pb_buf_free(&o->out);
  etch__pb_buf_free(&o->batch);
  etch__pb_buf_free(&o->tmp);
}

/* With a sink, the file's bytes so far go into it once they are
 * ETCH_TRACEFILE_FLUSH or more (called between records: `out` holds whole
 * ones). A failed sink takes nothing and counts; the caller reads its
 * state at the end. */
static ETCH_NOINLINE void sink_flush(etch_tracefile *o) {
  if (o->out.s.failed) return; /* out of memory: reported at the end */
  size_t n = etch__pb_buf_len(&o->out);
  if (n) etch__sink_write(o->sink, etch__pb_buf_data(&o->out), n);
  etch__pb_buf_reset(&o->out);
}
ETCH_INLINE void make_room(etch_tracefile *o) {
  if (ETCH_UNLIKELY(o->sink != NULL) &&
      etch__pb_buf_len(&o->out) >= ETCH_TRACEFILE_FLUSH)
    sink_flush(o);
}

static int flush_batch(etch_tracefile *o) {
  size_t n = etch__pb_buf_len(&o->batch);
  if (!n) return ETCH_OK;
  make_room(o);
  uLongf cap = compressBound((uLong)n);
  uint8_t *z = (uint8_t *)etch__malloc(cap);
  if (!z) return ETCH_ENOMEM;
  int zrc = compress2(z, &cap, etch__pb_buf_data(&o->batch), (uLong)n, 6);
  if (zrc != Z_OK) {
    free(z);
    return etch__error(ETCH_EIO, "deflate failed (%d)", zrc);
  }
  etch__pb_stream *s = &o->out.s;
  etch__pb_nested pkt;
  etch__pb_nested_begin(s, ETCH_TRACE_PACKET, &pkt);
  etch__pb_write_bytes_field(s, ETCH_PKT_COMPRESSED_PACKETS, z, cap);
  etch__pb_nested_end(s, &pkt);
  free(z);
  etch__pb_buf_reset(&o->batch);
  return o->out.s.failed ? ETCH_ENOMEM : ETCH_OK;
}

/* The trusted fields of sequence seq_id's packets, into o->tail: the
 * producer's uid and pid (from the service, when it knows the sequence),
 * the sequence id and the producer's machine (when it is not the host). */
static ETCH_NOINLINE void make_tail(etch_tracefile *o, uint32_t seq_id) {
  uint8_t *t = o->tail;
  int32_t pid, uid;
  bool same_ns = false;
  o->tail_pid = 0;
  o->tail_owner = 0;
  if (o->trust && o->trust(o->trust_ctx, seq_id, &pid, &uid, &same_ns)) {
    if (same_ns && pid > 0) o->tail_pid = pid;
    o->tail_owner = pid;
    t = etch__pb_put_tag(t, ETCH_PKT_TRUSTED_UID, ETCH_PB_VARINT);
    t = etch__pb_put_varint(t, (uint64_t)(int64_t)uid);
    t = etch__pb_put_tag(t, ETCH_PKT_TRUSTED_PID, ETCH_PB_VARINT);
    t = etch__pb_put_varint(t, (uint64_t)(int64_t)pid);
  }
  t = etch__pb_put_tag(t, ETCH_PKT_TRUSTED_SEQ_ID, ETCH_PB_VARINT);
  t = etch__pb_put_varint(t, seq_id);
  uint32_t machine = o->machine ? o->machine(o->trust_ctx, seq_id) : 0;
  if (machine) {
    t = etch__pb_put_tag(t, ETCH_PKT_MACHINE_ID, ETCH_PB_VARINT);
    t = etch__pb_put_varint(t, machine);
  }
  o->tail_len = (uint32_t)(t - o->tail);
  o->tail_seq = seq_id;
}

/* A packet of rl bytes (data, tail and drop) as slices of at most
 * ETCH_TRACEFILE_SLICE_MAX bytes each, the last one flagged. */
static ETCH_NOINLINE int put_slices_large(etch_tracefile *o,
                                          const uint8_t *data, uint32_t len,
                                          const uint8_t *tail, uint32_t tl,
                                          const uint8_t *drop, uint32_t dl) {
  uint32_t rl = len + tl + dl;
  uint8_t *all = (uint8_t *)etch__malloc(rl);
  if (!all) return ETCH_ENOMEM;
  memcpy(all, data, len);
  memcpy(all + len, tail, tl);
  memcpy(all + len + tl, drop, dl);
  etch__pb_stream *s = &o->out.s;
  for (uint32_t off = 0; off < rl;) {
    uint32_t n = rl - off < ETCH_TRACEFILE_SLICE_MAX ? rl - off
                                                     : ETCH_TRACEFILE_SLICE_MAX;
    etch__pb_nested sl;
    etch__pb_nested_begin(s, ETCH_RBR_SLICES, &sl);
    etch__pb_write_bytes_field(s, ETCH_RBR_SLICE_DATA, all + off, n);
    if (off + n == rl) etch__pb_write_varint_field(s, ETCH_RBR_SLICE_LAST, 1);
    etch__pb_nested_end(s, &sl);
    off += n;
  }
  free(all);
  return s->failed ? ETCH_ENOMEM : ETCH_OK;
}

/* A record's framing before its `rl` bytes: Trace.packet's tag and length,
 * or in slice mode a ReadBuffersResponse.Slice holding them as its data. */
ETCH_INLINE uint8_t *frame_open(bool slices, uint8_t *q, uint32_t rl) {
  if (slices) { /* slices { data: ... last_slice_of_packet: true } */
    q = etch__pb_put_tag(q, ETCH_RBR_SLICES, ETCH_PB_LEN);
    q = etch__pb_put_varint(q, 1 + etch__pb_varint_size(rl) + rl + 2);
    q = etch__pb_put_tag(q, ETCH_RBR_SLICE_DATA, ETCH_PB_LEN);
  } else {
    *q++ = (uint8_t)etch__pb_tag(ETCH_TRACE_PACKET, ETCH_PB_LEN);
  }
  if (ETCH_LIKELY(rl < 0x80)) {
    *q++ = (uint8_t)rl;
    return q;
  }
  return etch__pb_put_varint(q, rl);
}

/* The trusted fields after a packet (16 bytes copied when they fit in
 * them: the caller leaves room), then in slice mode the slice's end. */
ETCH_INLINE uint8_t *put_tail(const etch_tracefile *o, uint8_t *q,
                              uint32_t tl) {
  if (ETCH_LIKELY(tl <= 16))
    memcpy(q, o->tail, 16);
  else
    memcpy(q, o->tail, tl);
  return q + tl;
}

ETCH_INLINE uint8_t *frame_close(bool slices, uint8_t *q) {
  if (slices) {
    *q++ = (uint8_t)etch__pb_tag(ETCH_RBR_SLICE_LAST, ETCH_PB_VARINT);
    *q++ = 1;
  }
  return q;
}

/* Appends one Trace.packet record: the packet bytes plus trailing fields
 * (sequence 0: none but previous_packet_dropped); in slice mode, one
 * ReadBuffersResponse.Slice with the same bytes. */
ETCH_INLINE int put_record(etch_tracefile *o, const uint8_t *data,
                           uint32_t len, uint32_t seq_id, bool dropped) {
  uint32_t tl = 0;
  if (seq_id) {
    if (seq_id != o->tail_seq) make_tail(o, seq_id);
    tl = o->tail_len;
  }
  /* previous_packet_dropped: 1 (a two-byte tag and the value). */
  uint8_t drop[4];
  uint32_t dl = 0;
  if (dropped) {
    uint8_t *d = etch__pb_put_tag(drop, ETCH_PKT_PREVIOUS_PACKET_DROPPED,
                                  ETCH_PB_VARINT);
    *d++ = 1;
    dl = (uint32_t)(d - drop);
  }
  uint32_t rl = len + tl + dl;
  etch__pb_buf *dst = o->compress ? &o->batch : &o->out;
  if (o->compress && etch__pb_buf_len(&o->batch) + rl + 16 > ETCH_TRACEFILE_BATCH) {
    int rc = flush_batch(o);
    if (rc) return rc;
    /* A record larger than a batch goes into the file as it is, after
     * the batch before it: no compressed piece holds more than a batch. */
    if (rl + 16 > ETCH_TRACEFILE_BATCH) dst = &o->out;
  }
  if (dst == &o->out) make_room(o);
  etch__pb_stream *s = &dst->s;
  if (o->slices && rl > ETCH_TRACEFILE_SLICE_MAX)
    return put_slices_large(o, data, len, o->tail, tl, drop, dl);
  /* 16 more: the tail is copied 16 bytes at once when it fits in them */
  if (!etch__pb_reserve(s, 48 + (size_t)rl)) return ETCH_ENOMEM;
  uint8_t *q = frame_open(o->slices, s->cur, rl);
  memcpy(q, data, len);
  q = put_tail(o, q + len, tl);
  memcpy(q, drop, dl);
  s->cur = frame_close(o->slices, q + dl);
  return ETCH_OK;
}

/* ---- important events: each once ------------------------------------------- */

uint64_t etch__packet_important_id(const uint8_t *pkt, size_t len) {
  etch__pb_dec d, te, da;
  etch__pb_field f, g, h;
  etch__pb_dec_init(&d, pkt, len);
  while (etch__pb_next(&d, &f)) {
    if (f.id != ETCH_PKT_TRACK_EVENT || f.wt != ETCH_PB_LEN) continue;
    etch__pb_dec_init(&te, f.data, f.len);
    while (etch__pb_next(&te, &g)) {
      if (g.id != ETCH_TE_DEBUG_ANNOTATIONS || g.wt != ETCH_PB_LEN) continue;
      bool named = false;
      uint64_t v = 0;
      etch__pb_dec_init(&da, g.data, g.len);
      while (etch__pb_next(&da, &h)) {
        if (h.id == ETCH_DA_NAME && h.wt == ETCH_PB_LEN)
          named = h.len == 14 && !memcmp(h.data, "etch.important", 14);
        else if (h.id == ETCH_DA_UINT_VALUE && h.wt == ETCH_PB_VARINT)
          v = h.u;
      }
      if (named && !da.err) return v;
    }
  }
  return 0;
}

ETCH_INLINE bool important_marked(const uint8_t *data, uint32_t len) {
  return ETCH_UNLIKELY(len >= 2 && data[0] == ETCH_TRACEFILE_IMPORTANT_MARK0) &&
         data[1] == ETCH_TRACEFILE_IMPORTANT_MARK1;
}

/* A packet that opens like an important event's, about to go into the
 * file: *keep false when it is a later copy of one already in the file.
 * Then `*rest` (malloc'd, *rest_len bytes) is the packet without its
 * track event when something else is left that the sequence needs (its
 * interned data), else NULL. */
static ETCH_NOINLINE int important_filter(etch_tracefile *o, uint32_t seq,
                                          const uint8_t *data, uint32_t len,
                                          bool *keep, uint8_t **rest,
                                          uint32_t *rest_len) {
  *keep = true;
  *rest = NULL;
  *rest_len = 0;
  uint64_t id = etch__packet_important_id(data, len);
  if (!id) return ETCH_OK;
  if (seq && seq != o->tail_seq) make_tail(o, seq);
  /* In process the writer's own pid (0: one process); in a service the
   * producer's, as the service knows it. */
  uint64_t key = (uint64_t)(uint32_t)(seq ? o->tail_owner : 0) << 40 ^ id;
  etch_u64map *seen = o->important ? o->important : &o->own_important;
  bool had = false;
  /* Bounded: a producer that makes up ids cannot grow it without end.
   * Past the bound, or with no memory, a copy goes in (one too many). */
  if (seen->n >= ETCH_TRACEFILE_IMPORTANT_MAX) {
    int64_t v;
    had = etch__u64map_get(seen, key, &v);
  } else if (!etch__u64map_swap(seen, key, 1, NULL, &had)) {
    return ETCH_OK;
  }
  if (!had) return ETCH_OK;
  *keep = false;
  /* The rest: every top-level field but the track event, when there is
   * interned data among them. */
  etch__pb_dec d;
  etch__pb_field f;
  bool interned = false;
  etch__pb_dec_init(&d, data, len);
  while (etch__pb_next(&d, &f))
    if (f.id == ETCH_PKT_INTERNED_DATA) interned = true;
  if (!interned || d.err) return ETCH_OK;
  uint8_t *r = (uint8_t *)etch__malloc(len);
  if (!r) return etch__error(ETCH_ENOMEM, "out of memory writing trace");
  uint32_t n = 0;
  etch__pb_dec_init(&d, data, len);
  size_t at = 0;
  while (etch__pb_next(&d, &f)) {
    size_t next = (size_t)(d.p - d.start);
    if (f.id != ETCH_PKT_TRACK_EVENT) {
      memcpy(r + n, data + at, next - at);
      n += (uint32_t)(next - at);
    }
    at = next;
  }
  *rest = r;
  *rest_len = n;
  return ETCH_OK;
}

/* put_record for a packet that may be an important event's copy;
 * *emitted false when nothing of it went into the file. */
static ETCH_NOINLINE int put_maybe_important(etch_tracefile *o,
                                             const uint8_t *data, uint32_t len,
                                             uint32_t seq, bool dropped,
                                             bool *emitted) {
  bool keep;
  uint8_t *rest;
  uint32_t rest_len;
  *emitted = true;
  int rc = important_filter(o, seq, data, len, &keep, &rest, &rest_len);
  if (rc) return rc;
  if (keep) return put_record(o, data, len, seq, dropped);
  if (!rest) {
    *emitted = false;
    o->important_left_out++;
    return ETCH_OK;
  }
  rc = put_record(o, rest, rest_len, seq, dropped);
  free(rest);
  return rc;
}

/* put_record for a producer's packet: important events' copies looked at. */
ETCH_INLINE int put_packet(etch_tracefile *o, const uint8_t *data,
                           uint32_t len, uint32_t seq, bool dropped,
                           bool *emitted) {
  if (important_marked(data, len))
    return put_maybe_important(o, data, len, seq, dropped, emitted);
  *emitted = true;
  return put_record(o, data, len, seq, dropped);
}

/* What the filter needs to know about a packet. */
typedef struct pkt_info {
  uint64_t flags;
  int te_type; /* 0: no track event */
  bool te_has_track;
} pkt_info;

static void inspect(const uint8_t *data, uint32_t len, pkt_info *pi) {
  memset(pi, 0, sizeof *pi);
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, data, len);
  while (etch__pb_next_fast(&d, &f)) {
    if (f.id == ETCH_PKT_SEQUENCE_FLAGS && f.wt == ETCH_PB_VARINT) {
      pi->flags = f.u;
    } else if (f.id == ETCH_PKT_TRACK_EVENT && f.wt == ETCH_PB_LEN) {
      etch__pb_dec te;
      etch__pb_field g;
      etch__pb_dec_init(&te, f.data, f.len);
      pi->te_type = -1;
      while (etch__pb_next_fast(&te, &g)) {
        if (g.id == ETCH_TE_TYPE) pi->te_type = (int)g.u;
        if (g.id == ETCH_TE_TRACK_UUID) pi->te_has_track = true;
      }
    }
  }
}

int etch__packet_slice_delta(const uint8_t *pkt, size_t len) {
  pkt_info pi;
  inspect(pkt, (uint32_t)len, &pi);
  if (pi.te_has_track) return 0;
  return pi.te_type == ETCH_TE_TYPE_SLICE_BEGIN ? 1
         : pi.te_type == ETCH_TE_TYPE_SLICE_END ? -1
                                                : 0;
}

/* Whether a TrackDescriptor's process or thread descriptor claims `pid`
 * (or no pid at all). */
static bool descriptor_pid_ok(const uint8_t *data, size_t len, int32_t pid) {
  etch__pb_dec d, in;
  etch__pb_field f, g;
  etch__pb_dec_init(&d, data, len);
  while (etch__pb_next(&d, &f)) {
    if ((f.id != ETCH_TD_PROCESS && f.id != ETCH_TD_THREAD) ||
        f.wt != ETCH_PB_LEN)
      continue;
    etch__pb_dec_init(&in, f.data, f.len);
    while (etch__pb_next(&in, &g))
      if (g.id == 1 /* ProcessDescriptor.pid, ThreadDescriptor.pid */ &&
          g.wt == ETCH_PB_VARINT && (int32_t)(uint32_t)g.u != pid)
        return false;
    if (in.err) return false;
  }
  return !d.err;
}

/* A producer's packet a service may pass on (see `validate`); `pid`: what
 * its descriptors must claim (0: unchecked). Why not in o->why. */
static ETCH_NOINLINE bool packet_valid(etch_tracefile *o, const uint8_t *data,
                                       uint32_t len, int32_t pid) {
  /* What etch's reader reads, at every depth, and no field only the
   * service writes (proto/check.h). */
  etch__pkt_fault fault;
  bool descriptors;
  if (!etch__packet_check_producer(data, len, &fault, &descriptors)) {
    snprintf(o->why, sizeof o->why, "offset %zu: %s", fault.off, fault.msg);
    return false;
  }
  if (!pid || !descriptors) return true;
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, data, len);
  while (etch__pb_next_fast(&d, &f))
    if (f.id == ETCH_PKT_TRACK_DESCRIPTOR && f.wt == ETCH_PB_LEN &&
        !descriptor_pid_ok(f.data, f.len, pid)) {
      snprintf(o->why, sizeof o->why,
               "offset %zu: a descriptor claims another pid than %d", f.off,
               (int)pid);
      return false;
    }
  return true;
}

/* A producer's packet left out. */
static ETCH_NOINLINE void left_out(etch_tracefile *o, uint32_t writer_id) {
  o->invalid_packets++;
  if (o->on_invalid) o->on_invalid(o->trust_ctx, writer_id, o->why);
}

/* A packet of another sequence than the last: the last one's loss state
 * is kept while there is any (a later read of the same file goes on with
 * it: its undecodable packets stay out until its state is cleared), and
 * the new one's taken up. */
static ETCH_NOINLINE void switch_writer_slow(etch_tracefile *o,
                                             uint32_t writer_id) {
  if (o->invalid || o->mark_dropped || o->depth) {
    int64_t v = (int64_t)((uint64_t)o->depth | (uint64_t)o->invalid << 32 |
                          (uint64_t)o->mark_dropped << 33);
    /* Out of memory: the state goes, as it always did between reads. */
    (void)etch__u64map_put(&o->seq_state, o->cur_writer, v);
  } else if (o->seq_state.n) {
    etch__u64map_del(&o->seq_state, o->cur_writer, NULL);
  }
  o->cur_writer = writer_id;
  int64_t v;
  if (o->seq_state.n && etch__u64map_get(&o->seq_state, writer_id, &v)) {
    o->depth = (uint32_t)v;
    o->invalid = ((uint64_t)v >> 32) & 1;
    o->mark_dropped = ((uint64_t)v >> 33) & 1;
    o->lossy = true;
    return;
  }
  o->invalid = false;
  o->mark_dropped = false;
  o->depth = 0;
  o->lossy = false;
}
ETCH_INLINE void switch_writer(etch_tracefile *o, uint32_t writer_id) {
  if (ETCH_LIKELY(writer_id == o->cur_writer)) return;
  switch_writer_slow(o, writer_id);
}

uint64_t etch__packet_events(const uint8_t *pkt, size_t len) {
  etch__pb_dec d, te, da;
  etch__pb_field f, g, h;
  etch__pb_dec_init(&d, pkt, len);
  while (etch__pb_next(&d, &f)) {
    if (f.id != ETCH_PKT_TRACK_EVENT) continue;
    if (f.wt != ETCH_PB_LEN) return 1;
    /* An etch.dropped_events instant stands for `count` events. */
    bool drops = false;
    uint64_t count = 0;
    etch__pb_dec_init(&te, f.data, f.len);
    while (etch__pb_next(&te, &g)) {
      if (g.id == ETCH_TE_NAME && g.wt == ETCH_PB_LEN)
        drops = g.len == 19 && !memcmp(g.data, "etch.dropped_events", 19);
      if (g.id != ETCH_TE_DEBUG_ANNOTATIONS || g.wt != ETCH_PB_LEN) continue;
      bool is_count = false;
      uint64_t v = 0;
      etch__pb_dec_init(&da, g.data, g.len);
      while (etch__pb_next(&da, &h)) {
        if (h.id == ETCH_DA_NAME && h.wt == ETCH_PB_LEN)
          is_count = h.len == 5 && !memcmp(h.data, "count", 5);
        if (h.id == ETCH_DA_INT_VALUE && h.wt == ETCH_PB_VARINT) v = h.u;
      }
      if (is_count) count = v;
    }
    return drops && count ? count : 1;
  }
  return 0;
}

int etch__loss_add(etch_vec *list, const etch_loss *l) {
  etch_loss *v = ETCH_VEC_AT(list, etch_loss);
  size_t n = ETCH_VEC_COUNT(list, etch_loss), i = n;
  /* Losses come in runs of one sequence: its entry is mostly the last. */
  if (n && v[n - 1].seq == l->seq) {
    i = n - 1;
  } else {
    for (size_t k = 0; k < n; k++)
      if (v[k].seq == l->seq) {
        i = k;
        break;
      }
  }
  if (i == n) return ETCH_VEC_PUSH(list, etch_loss, *l);
  etch_loss *e = &v[i];
  e->events += l->events;
  if (l->first_ns && (!e->first_ns || l->first_ns < e->first_ns))
    e->first_ns = l->first_ns;
  if (l->open_depth > e->open_depth) e->open_depth = l->open_depth;
  return ETCH_OK;
}

/* A track event of sequence `seq` left out: it could not be decoded (its
 * sequence's incremental state was lost with earlier chunks). Out of
 * memory the list misses it (the loss is still in the flag and stats). */
static ETCH_NOINLINE void note_skipped_event(etch_tracefile *o, uint32_t seq,
                                             uint64_t events) {
  (void)etch__loss_add(&o->lost, &(etch_loss){.seq = seq, .events = events});
}

int etch__tracefile_put_on(etch_tracefile *o, uint32_t seq) {
  etch__pb_buf *tmp = &o->tmp;
  if (tmp->s.failed) {
    etch__pb_buf_reset(tmp);
    return etch__error(ETCH_ENOMEM, "out of memory writing trace");
  }
  int rc = put_record(o, etch__pb_buf_data(tmp), (uint32_t)etch__pb_buf_len(tmp),
                      seq, false);
  etch__pb_buf_reset(tmp);
  return rc;
}

int etch__tracefile_on_packet(void *ctx, uint32_t writer_id, const uint8_t *data,
                     uint32_t len, bool dropped_before) {
  etch_tracefile *o = (etch_tracefile *)ctx;
  switch_writer(o, writer_id); /* as a run of its packets does first */
  if (o->validate) {
    if (writer_id != o->tail_seq) make_tail(o, writer_id);
    if (!packet_valid(o, data, len, o->tail_pid)) {
      left_out(o, writer_id);
      if (dropped_before) { /* the loss is marked on the next one */
        o->lossy = true;
        o->mark_dropped = true;
        o->invalid = true;
        o->depth = 0;
      }
      return ETCH_OK;
    }
  }
  /* Until data of the sequence goes missing there is nothing to leave out
   * and nothing to track (the depth starts afresh at the loss). */
  bool emitted;
  if (!dropped_before && !o->lossy)
    return put_packet(o, data, len, writer_id, false, &emitted);
  o->lossy = true;
  pkt_info pi;
  inspect(data, len, &pi);
  bool cleared = pi.flags & ETCH_SEQ_INCREMENTAL_STATE_CLEARED;
  if (dropped_before) {
    o->mark_dropped = true;
    o->invalid = !cleared;
    o->depth = 0;
  }
  if (cleared) o->invalid = false;
  if (o->invalid && (pi.flags & ETCH_SEQ_NEEDS_INCREMENTAL_STATE)) {
    o->skipped++;
    if (pi.te_type > 0) note_skipped_event(o, writer_id, etch__packet_events(data, len));
    return ETCH_OK;
  }
  if (pi.te_type > 0 && !pi.te_has_track) {
    if (pi.te_type == ETCH_TE_TYPE_SLICE_BEGIN) {
      o->depth++;
    } else if (pi.te_type == ETCH_TE_TYPE_SLICE_END) {
      if (o->depth == 0) { /* its begin was overwritten */
        o->skipped++;
        note_skipped_event(o, writer_id, 1); /* an event lost with it */
        return ETCH_OK;
      }
      o->depth--;
    }
  }
  int rc = put_packet(o, data, len, writer_id, o->mark_dropped, &emitted);
  if (emitted) o->mark_dropped = false; /* else the next one carries it */
  return rc;
}

/* The size varint of the fragment at *p (checked by the trace buffer);
 * false if it runs past `end` all the same. */
ETCH_INLINE bool run_size(const uint8_t **p, const uint8_t *end,
                          uint32_t *len) {
  const uint8_t *q = *p;
  uint32_t b = *q++;
  if (ETCH_LIKELY(b < 0x80)) {
    *len = b;
  } else {
    uint32_t v = b & 0x7f, shift = 7;
    do {
      if (q >= end || shift > 28) return false;
      b = *q++;
      v |= (b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80);
    *len = v;
  }
  if (*len > (uint64_t)(end - q)) return false;
  *p = q;
  return true;
}

/* The records of a run of whole packets (etch__tracefile_on_run's fast
 * path), `slices` a constant. */
ETCH_INLINE int run_loop(etch_tracefile *o, uint32_t writer_id,
                         const uint8_t *data, uint32_t len, uint32_t count,
                         bool slices) {
  const uint8_t *p = data, *end = data + len;
  uint32_t tl = o->tail_len;
  /* Each record: its framing (a tag and a length of at most 5 bytes; in
   * slice mode 8 more: the slice's tag and length and its last-slice
   * flag), the packet and the tail; 48 to spare for the 32-byte and
   * 16-byte copies. Room for all of them at once, checked again for each
   * (count is only a hint). */
  enum { kFrame = 14, kSpare = 48 };
  make_room(o);
  etch__pb_stream *s = &o->out.s;
  if (!etch__pb_reserve(s, (size_t)len + (size_t)count * (kFrame + tl) +
                               kSpare))
    return ETCH_ENOMEM;
  uint8_t *q = s->cur;
  uint32_t n;
  while (p < end && run_size(&p, end, &n)) {
    if (!n) continue; /* padding */
    if (ETCH_UNLIKELY(o->validate) && !packet_valid(o, p, n, o->tail_pid)) {
      left_out(o, writer_id);
      p += n;
      continue;
    }
    uint32_t rl = n + tl;
    /* n >= 1 here: the first byte alone sends it the long way (a packet
     * that opens with d0 but not d0 03 costs a detour, no more). */
    if (ETCH_UNLIKELY((slices && rl > ETCH_TRACEFILE_SLICE_MAX) ||
                      *p == ETCH_TRACEFILE_IMPORTANT_MARK0)) {
      /* In several slices, or an important event's: the general path. */
      s->cur = q;
      int rc = etch__tracefile_on_packet(o, writer_id, p, n, false);
      if (rc) return rc;
      p += n;
      q = s->cur;
      continue;
    }
    if (ETCH_UNLIKELY((size_t)(s->end - q) < (size_t)rl + kFrame + kSpare)) {
      s->cur = q;
      if (!etch__pb_reserve(s, (size_t)rl + kFrame + kSpare))
        return ETCH_ENOMEM;
      q = s->cur;
    }
    q = frame_open(slices, q, rl);
    if (ETCH_LIKELY(n <= 32 && end - p >= 32))
      memcpy(q, p, 32);
    else
      memcpy(q, p, n);
    q = frame_close(slices, put_tail(o, q + n, tl));
    p += n;
  }
  s->cur = q;
  return ETCH_OK;
}

int etch__tracefile_on_run(void *ctx, uint32_t writer_id, const uint8_t *data,
                           uint32_t len, uint32_t count) {
  etch_tracefile *o = (etch_tracefile *)ctx;
  const uint8_t *p = data, *end = data + len;
  switch_writer(o, writer_id);
  if (o->lossy || o->compress || !writer_id) {
    /* One by one: the general path (each packet looked at after a loss,
     * compressed batches). */
    uint32_t n;
    while (p < end && run_size(&p, end, &n)) {
      int rc = n ? etch__tracefile_on_packet(ctx, writer_id, p, n, false)
                 : ETCH_OK;
      if (rc) return rc;
      p += n;
    }
    return ETCH_OK;
  }
  if (writer_id != o->tail_seq) make_tail(o, writer_id);
  /* One loop for each framing, so that neither tests it per packet. */
  return o->slices ? run_loop(o, writer_id, data, len, count, true)
                   : run_loop(o, writer_id, data, len, count, false);
}

int etch__tracefile_put_service(etch_tracefile *o) {
  etch__pb_buf *tmp = &o->tmp;
  if (tmp->s.failed) {
    etch__pb_buf_reset(tmp);
    return etch__error(ETCH_ENOMEM, "out of memory writing trace");
  }
  int rc = put_record(o, etch__pb_buf_data(tmp), (uint32_t)etch__pb_buf_len(tmp),
                      ETCH_TRACEFILE_SERVICE_SEQ, false);
  etch__pb_buf_reset(tmp);
  return rc;
}

static void clock_entry(etch__pb_stream *s, uint32_t id, uint64_t ts) {
  etch__pb_nested c;
  etch__pb_nested_begin(s, ETCH_CLOCKSNAP_CLOCKS, &c);
  etch__pb_write_varint_field(s, ETCH_SNAPCLOCK_CLOCK_ID, id);
  etch__pb_write_varint_field(s, ETCH_SNAPCLOCK_TIMESTAMP, ts);
  etch__pb_nested_end(s, &c);
}

/* One sequence's loss: slice ends for what it left open (they end where
 * the loss began, not at the end of the trace), then the instant. */
static int put_loss_note(etch_tracefile *o, const etch_loss *l,
                         const char *where) {
  etch__pb_stream *st = &o->tmp.s;
  etch__pb_nested te, da;
  int rc = ETCH_OK;
  for (uint32_t k = 0; k < l->open_depth && !rc; k++) {
    etch__pb_write_varint_field(st, ETCH_PKT_TIMESTAMP, l->first_ns);
    etch__pb_write_varint_field(st, ETCH_PKT_TIMESTAMP_CLOCK_ID,
                               ETCH_CLOCK_BOOTTIME);
    etch__pb_write_varint_field(st, ETCH_PKT_SEQUENCE_FLAGS,
                               ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
    etch__pb_nested_begin(st, ETCH_PKT_TRACK_EVENT, &te);
    etch__pb_write_varint_field(st, ETCH_TE_TYPE, ETCH_TE_TYPE_SLICE_END);
    /* An end's args join its slice's: the slice says it was cut. */
    etch__pb_nested_begin(st, ETCH_TE_DEBUG_ANNOTATIONS, &da);
    etch__pb_write_string_field(st, ETCH_DA_NAME, "cut_by_loss");
    etch__pb_write_varint_field(st, ETCH_DA_BOOL_VALUE, 1);
    etch__pb_nested_end(st, &da);
    etch__pb_nested_end(st, &te);
    rc = etch__tracefile_put_on(o, l->seq);
  }
  if (rc) return rc;
  etch__pb_write_varint_field(st, ETCH_PKT_TIMESTAMP, l->first_ns);
  etch__pb_write_varint_field(st, ETCH_PKT_TIMESTAMP_CLOCK_ID,
                             ETCH_CLOCK_BOOTTIME);
  /* No NEEDS_INCREMENTAL_STATE: a sequence whose state went with the
   * loss still gets it (on the default track its defaults name, the
   * thread's; with none left, the trace's global one). */
  etch__pb_nested_begin(st, ETCH_PKT_TRACK_EVENT, &te);
  etch__pb_write_varint_field(st, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  etch__pb_write_string_field(st, ETCH_TE_CATEGORIES, "etch");
  etch__pb_write_string_field(st, ETCH_TE_NAME, "etch.dropped_events");
  etch__pb_nested_begin(st, ETCH_TE_DEBUG_ANNOTATIONS, &da);
  etch__pb_write_string_field(st, ETCH_DA_NAME, "count");
  etch__pb_write_varint_field(st, ETCH_DA_INT_VALUE, l->events);
  etch__pb_nested_end(st, &da);
  etch__pb_nested_begin(st, ETCH_TE_DEBUG_ANNOTATIONS, &da);
  etch__pb_write_string_field(st, ETCH_DA_NAME, "where");
  etch__pb_write_string_field(st, ETCH_DA_STRING_VALUE, where);
  etch__pb_nested_end(st, &da);
  /* Who, for a note with no track of its own left (the global one). */
  int32_t pid, uid;
  bool same_pidns;
  if (o->trust && o->trust(o->trust_ctx, l->seq, &pid, &uid, &same_pidns)) {
    etch__pb_nested_begin(st, ETCH_TE_DEBUG_ANNOTATIONS, &da);
    etch__pb_write_string_field(st, ETCH_DA_NAME, "pid");
    etch__pb_write_varint_field(st, ETCH_DA_INT_VALUE,
                               (uint64_t)(int64_t)pid);
    etch__pb_nested_end(st, &da);
  }
  etch__pb_nested_end(st, &te);
  return etch__tracefile_put_on(o, l->seq);
}

int etch__tracefile_put_loss_notes(etch_tracefile *o, const etch_loss *l,
                                   size_t n, const char *where) {
  int rc = ETCH_OK;
  for (size_t i = 0; i < n && !rc; i++) rc = put_loss_note(o, &l[i], where);
  return rc;
}

int etch__tracefile_put_clock_snapshot(etch_tracefile *o) {
  uint64_t boot = etch__clock_ns(CLOCK_BOOTTIME);
  return etch__tracefile_put_clock_snapshot_at(
      o, boot, etch__clock_ns(CLOCK_MONOTONIC), etch__clock_ns(CLOCK_REALTIME));
}

int etch__tracefile_put_clock_snapshot_at(etch_tracefile *o, uint64_t boot,
                                          uint64_t mono, uint64_t real) {
  etch__pb_buf *tmp = &o->tmp;
  etch__pb_stream *s = &tmp->s;
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP, boot);
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch__pb_nested cs;
  etch__pb_nested_begin(s, ETCH_PKT_CLOCK_SNAPSHOT, &cs);
  clock_entry(s, ETCH_CLOCK_BOOTTIME, boot);
  clock_entry(s, ETCH_CLOCK_MONOTONIC, mono);
  clock_entry(s, ETCH_CLOCK_REALTIME, real);
  etch__pb_write_varint_field(s, ETCH_CLOCKSNAP_PRIMARY_TRACE_CLOCK,
                             ETCH_CLOCK_BOOTTIME);
  etch__pb_nested_end(s, &cs);
  return etch__tracefile_put_service(o);
}

void etch__tracefile_stats_pack(uint64_t *out, const etch_buffer_stats *bs,
                                uint32_t chunk_size,
                                uint64_t writers_with_loss) {
  out[ETCH_TFS_BUFFER_SIZE] = bs->buffer_size;
  out[ETCH_TFS_CHUNKS_WRITTEN] = bs->chunks_written;
  out[ETCH_TFS_CHUNKS_OVERWRITTEN] = bs->chunks_overwritten;
  out[ETCH_TFS_BYTES_OVERWRITTEN] = bs->bytes_overwritten;
  out[ETCH_TFS_CHUNKS_DISCARDED] = bs->chunks_discarded;
  out[ETCH_TFS_WRITE_WRAP_COUNT] = bs->write_wrap_count;
  out[ETCH_TFS_CHUNK_SIZE] = chunk_size;
  out[ETCH_TFS_WRITERS_WITH_LOSS] = writers_with_loss;
}

void etch__tracefile_put_writer_stats(etch__pb_stream *s, const uint32_t *seqs,
                                      const uint32_t *bufs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    etch__pb_nested w;
    etch__pb_nested_begin(s, ETCH_TS_WRITER_STATS, &w);
    etch__pb_write_varint_field(s, ETCH_WS_SEQUENCE_ID, seqs[i]);
    etch__pb_write_varint_field(s, ETCH_WS_BUFFER, bufs ? bufs[i] : 0);
    etch__pb_nested_end(s, &w);
  }
}

int etch__tracefile_put_stats_n(etch_tracefile *o, const uint64_t *stats,
                                size_t n, const uint32_t *seqs, size_t nseqs) {
  etch__pb_stream *s = &o->tmp.s;
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP, etch__clock_ns(CLOCK_BOOTTIME));
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch__pb_nested ts, b;
  etch__pb_nested_begin(s, ETCH_PKT_TRACE_STATS, &ts);
  for (size_t i = 0; i < n; i++) {
    const uint64_t *v = stats + i * ETCH_TRACEFILE_NSTATS;
    etch__pb_nested_begin(s, ETCH_TS_BUFFER_STATS, &b);
    etch__pb_write_varint_field(s, ETCH_BS_BUFFER_SIZE, v[ETCH_TFS_BUFFER_SIZE]);
    etch__pb_write_varint_field(s, ETCH_BS_BYTES_WRITTEN,
                               v[ETCH_TFS_CHUNKS_WRITTEN] * v[ETCH_TFS_CHUNK_SIZE]);
    etch__pb_write_varint_field(s, ETCH_BS_CHUNKS_WRITTEN,
                               v[ETCH_TFS_CHUNKS_WRITTEN]);
    etch__pb_write_varint_field(s, ETCH_BS_CHUNKS_OVERWRITTEN,
                               v[ETCH_TFS_CHUNKS_OVERWRITTEN]);
    etch__pb_write_varint_field(s, ETCH_BS_BYTES_OVERWRITTEN,
                               v[ETCH_TFS_BYTES_OVERWRITTEN]);
    etch__pb_write_varint_field(s, ETCH_BS_CHUNKS_DISCARDED,
                               v[ETCH_TFS_CHUNKS_DISCARDED]);
    etch__pb_write_varint_field(s, ETCH_BS_WRITE_WRAP_COUNT,
                               v[ETCH_TFS_WRITE_WRAP_COUNT]);
    etch__pb_write_varint_field(s, ETCH_BS_TRACE_WRITER_PACKET_LOSS,
                               v[ETCH_TFS_WRITERS_WITH_LOSS]);
    etch__pb_nested_end(s, &b);
  }
  etch__pb_write_varint_field(s, ETCH_TS_TRACING_SESSIONS, 1);
  etch__pb_write_varint_field(s, ETCH_TS_TOTAL_BUFFERS, n);
  /* The sequences of buffer 0 (another copy's parts in buffers 1.. carry
   * none: their loss counts in their trace_writer_packet_loss only). */
  etch__tracefile_put_writer_stats(s, seqs, NULL, nseqs);
  etch__pb_nested_end(s, &ts);
  return etch__tracefile_put_service(o);
}

int etch__tracefile_put_stats(etch_tracefile *o, const etch_buffer_stats *bs,
                              uint32_t chunk_size, uint64_t writers_with_loss) {
  uint64_t v[ETCH_TRACEFILE_NSTATS];
  etch__tracefile_stats_pack(v, bs, chunk_size, writers_with_loss);
  return etch__tracefile_put_stats_n(o, v, 1, NULL, 0);
}

int etch__tracefile_put_raw(etch_tracefile *o, const uint8_t *data,
                            size_t len) {
  int rc = o->compress ? flush_batch(o) : ETCH_OK;
  if (rc) return rc;
  make_room(o);
  etch__pb_write_bytes(&o->out.s, data, len);
  return o->out.s.failed ? etch__error(ETCH_ENOMEM, "out of memory writing trace")
                         : ETCH_OK;
}

int etch__tracefile_flush(etch_tracefile *o) {
  int rc = o->compress ? flush_batch(o) : ETCH_OK;
  if (rc) return rc;
  if (o->out.s.failed)
    return etch__error(ETCH_ENOMEM, "out of memory writing trace");
  sink_flush(o);
  return o->sink->err ? ETCH_EIO : ETCH_OK;
}

int etch__tracefile_finish(etch_tracefile *o, uint8_t **data, size_t *len) {
  *data = NULL;
  *len = 0;
  int rc = o->compress ? flush_batch(o) : ETCH_OK;
  if (rc || o->out.s.failed) {
    etch__tracefile_free(o);
    return rc ? rc : etch__error(ETCH_ENOMEM, "out of memory writing trace");
  }
  if (o->sink) {
    sink_flush(o);
    *len = (size_t)o->sink->offered;
    etch__tracefile_free(o);
    return o->sink->err ? ETCH_EIO : ETCH_OK;
  }
  *data = etch__pb_buf_take(&o->out, len);
  etch__tracefile_free(o);
  return ETCH_OK;
}

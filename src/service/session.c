/*
 * session.c - a session's life, top down: enable, start, flush, read,
 * write into the consumer's file, stop, free (see session.h and
 * docs/service.md).
 *
 * Life of a session, as Perfetto's "life of a tracing session" tells it:
 * producers connect and register data sources; a consumer enables tracing
 * with a config; the service makes the session's buffers and, for every
 * producer with a matching data source, sends SetupTracing (with the
 * shared memory buffer, once per producer), SetupDataSource and
 * StartDataSource; producers fill chunks of their buffer and ask the
 * service to move them (CommitData); the consumer flushes, disables and
 * reads the buffers (or the service writes them into the consumer's file
 * as it goes); the buffers are freed when the consumer says so or leaves.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "proto/ipc.h"
#include "proto/perfetto.h"
#include "service/machine.h"
#include "service/methods.h"
#include "service/service_int.h"
#include "service/session.h"
#include "service/shmem.h"

/* ---- enable: data sources on the producers that offer them ---- */

static void put_source_config(etch__pb_stream *st, const session *x,
                              const etch_tc_source *src, uint32_t buf) {
  etch__pb_write_string_field(st, ETCH_DSC_NAME, src->name);
  etch__pb_write_varint_field(st, ETCH_DSC_TARGET_BUFFER, buf);
  if (x->cfg->duration_ms)
    etch__pb_write_varint_field(st, ETCH_DSC_TRACE_DURATION_MS,
                               x->cfg->duration_ms);
  etch__pb_write_varint_field(st, ETCH_DSC_TRACING_SESSION_ID, x->id);
  etch__pb_write_varint_field(st, ETCH_DSC_STOP_TIMEOUT_MS,
                             x->cfg->data_source_stop_timeout_ms
                                 ? x->cfg->data_source_stop_timeout_ms
                                 : DEFAULT_STOP_TIMEOUT_MS);
  /* The rest as configured, a data source's own config included. */
  etch__tc_put_source_body(st, src);
}

/* SetupDataSource or StartDataSource (`field`) for instance `in`. */
static void send_ds_command(producer *p, const session *x, const instance *in,
                            uint32_t field) {
  const etch_tc_source *src = &x->cfg->sources[in->source_index];
  etch__pb_buf b;
  etch__pb_nested m, c;
  etch__pb_buf_init(&b, 512, ETCH_IPC_MAX_FRAME - 64);
  etch__pb_nested_begin(&b.s, field, &m);
  etch__pb_write_varint_field(&b.s, ETCH_GAC_DS_INSTANCE_ID, in->id);
  etch__pb_nested_begin(&b.s, ETCH_GAC_DS_CONFIG, &c);
  put_source_config(&b.s, x, src, x->buf_ids[src->target_buffer]);
  etch__pb_nested_end(&b.s, &c);
  etch__pb_nested_end(&b.s, &m);
  etch__svc_send_command(p, &b, -1);
  etch__pb_buf_free(&b);
}

static void start_instance(etch_service *s, session *x, producer *p,
                           uint32_t src_index) {
  const etch_tc_source *src = &x->cfg->sources[src_index];
  if (!p->smb_mem && !p->emulated && etch__svc_make_smb(s, p) != ETCH_OK) {
    etch__svc_logf(s, "producer %u: %s", p->id, etch_last_error());
    return;
  }
  if (ETCH_VEC_RESERVE(&x->instv, instance, 1)) {
    /* Not left out of the session in silence: the producer goes (and its
     * library connects again). */
    etch__ipc_conn_fail(&p->conn, "out of memory starting '%s'", src->name);
    return;
  }
  x->inst = ETCH_VEC_AT(&x->instv, instance); /* it may have moved */
  if (etch__svc_session_machine(x, p->machine) != ETCH_OK) {
    etch__ipc_conn_fail(&p->conn, "out of memory starting '%s'", src->name);
    return;
  }
  instance *in = ETCH_VEC_NEW(&x->instv, instance); /* room made above */
  x->inst = ETCH_VEC_AT(&x->instv, instance);
  x->ninst++;
  memset(in, 0, sizeof *in);
  in->id = ++s->next_instance;
  in->producer_id = p->id;
  in->source_index = src_index;
  snprintf(in->name, sizeof in->name, "%s", src->name);
  for (uint32_t i = 0; i < p->nds; i++)
    if (!strcmp(p->ds[i].name, src->name)) {
      in->notify_stop = p->ds[i].notify_stop;
      in->handles_clear = p->ds[i].handles_clear;
    }
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_nested m;
  if (!p->smb_sent) {
    etch__pb_nested_begin(&b.s, ETCH_GAC_SETUP_TRACING, &m);
    /* Emulated: the page size its own memory is to have, and no memory.
     * 4 KiB, as traced says: each chunk's bytes travel inside a frame, and
     * a page that small fills, and is committed, while the producer runs
     * (a CommitData of several 32 KiB chunks would near the frame's
     * limit). */
    etch__pb_write_varint_field(&b.s, ETCH_GAC_SETUP_PAGE_SIZE_KB,
                               p->emulated ? EMULATED_PAGE_KB
                                           : p->smb.page_size / 1024);
    etch__pb_nested_end(&b.s, &m);
    etch__svc_send_command(p, &b, p->emulated ? -1 : p->smb_fd);
    if (p->emulated && p->has_async) p->smb_sent = true;
    if (p->smb_fd >= 0 && p->has_async) {
      close(p->smb_fd);
      p->smb_fd = -1;
      p->smb_sent = true;
    }
    etch__pb_buf_reset(&b);
  }
  etch__pb_buf_free(&b);
  send_ds_command(p, x, in, ETCH_GAC_SETUP_DATA_SOURCE);
  if (x->state == S_STARTED) {
    send_ds_command(p, x, in, ETCH_GAC_START_DATA_SOURCE);
    in->started = true;
  }
  etch__svc_logf(
      s, "session %u: data source '%s' on producer %u (%s), instance %llu",
      x->id, src->name, p->id, p->name, (unsigned long long)in->id);
}

static bool name_matches(etch_service *s, const session *x,
                         const etch_tc_source *src, const producer *p) {
  if (!etch__svc_machine_matches(s, x, src, p)) return false;
  if (!src->producer_name_filter.n) return true;
  for (uint32_t i = 0; i < src->producer_name_filter.n; i++)
    if (!strcmp(src->producer_name_filter.item[i], p->name)) return true;
  return false;
}

/* Starts every data source of session x that producer p offers and does
 * not run yet. */
void etch__svc_match_producer(etch_service *s, session *x, producer *p) {
  if (x->state >= S_STOPPING || !p->has_async) return;
  for (uint32_t i = 0; i < x->cfg->nsources; i++) {
    const etch_tc_source *src = &x->cfg->sources[i];
    bool offered = false, running = false;
    for (uint32_t k = 0; k < p->nds; k++)
      if (!strcmp(p->ds[k].name, src->name)) offered = true;
    for (uint32_t k = 0; k < x->ninst; k++)
      if (x->inst[k].producer_id == p->id && x->inst[k].source_index == i)
        running = true;
    if (offered && !running && name_matches(s, x, src, p))
      start_instance(s, x, p, i);
  }
}
/* ---- start ---- */

void etch__svc_start_session_sources(etch_service *s, session *x) {
  for (uint32_t i = 0; i < x->ninst; i++) {
    instance *in = &x->inst[i];
    producer *p = etch__svc_find_producer(s, in->producer_id);
    if (!p || in->started) continue;
    send_ds_command(p, x, in, ETCH_GAC_START_DATA_SOURCE);
    in->started = true;
  }
}

/* ClearIncrementalState to every producer of session x, for its instances
 * whose data source said it handles one (incremental_state_config's
 * clear_period_ms). */
void etch__svc_clear_incremental_state(etch_service *s, session *x) {
  for (producer *p = s->producers; p; p = p->next) {
    etch__pb_buf b;
    etch__pb_nested m;
    etch__pb_buf_init(&b, 64, ETCH_IPC_MAX_FRAME / 2);
    etch__pb_nested_begin(&b.s, ETCH_GAC_CLEAR_INCREMENTAL_STATE, &m);
    uint32_t n = 0;
    for (uint32_t i = 0; i < x->ninst; i++) {
      const instance *in = &x->inst[i];
      if (in->producer_id != p->id || !in->started || in->stop_sent ||
          !in->handles_clear)
        continue;
      etch__pb_write_varint_field(&b.s, ETCH_GAC_CLEAR_DATA_SOURCE_IDS, in->id);
      n++;
    }
    etch__pb_nested_end(&b.s, &m);
    if (n && !b.s.failed) etch__svc_send_command(p, &b, -1);
    etch__pb_buf_free(&b);
  }
}
/* ---- flush ---- */

static void stop_sources(etch_service *s, session *x);

/* The buffer of session x that writer `w` of producer p writes into: the
 * one it registered, else the one of p's only instance in x (0: none). */
uint32_t etch__svc_writer_buffer(etch_service *s, session *x, producer *p,
                                 uint16_t w) {
  for (uint32_t i = 0; i < p->nwriters; i++)
    if (p->writers[i].writer_id == w && p->writers[i].buffer)
      return etch__svc_may_write(s, p, p->writers[i].buffer) &&
                     s->buf_session[p->writers[i].buffer] == x->id
                 ? p->writers[i].buffer
                 : 0;
  uint32_t buf = 0, n = 0;
  for (uint32_t i = 0; i < x->ninst; i++)
    if (x->inst[i].producer_id == p->id) {
      buf = x->buf_ids[x->cfg->sources[x->inst[i].source_index].target_buffer];
      n++;
    }
  return n == 1 ? buf : 0;
}

/*
 * Copies the packets of the chunks a producer is still writing: data
 * sources that do nothing on a flush (Perfetto's track_event among them)
 * leave their last chunk to the service. The last fragment of such a
 * chunk may be half written and is left out; when the whole chunk is
 * committed later it replaces the copy (src/buffer/tracebuf.c). Nothing in
 * the shared memory is changed.
 */
void etch__svc_scrape_producer(etch_service *s, session *x, producer *p) {
  /* A producer that asked not to be scraped (libetch: its chunks being
   * written hold nothing in the shared memory) is not. */
  if (!p->smb_mem || p->no_scrape) return;
  for (uint32_t page = 0; page < p->smb.npages; page++) {
    uint32_t bm = etch__smb_bitmap(&p->smb, page);
    uint32_t layout = etch__smb_bitmap_layout(bm);
    uint32_t n = etch__smb_layout_chunks(layout);
    for (uint32_t i = 0; i < n; i++) {
      if (etch__smb_bitmap_state(bm, i) != ETCH_SMB_WRITING) continue;
      if (etch__smb_chunk_read(&p->smb, page, i, s->chunk) != ETCH_OK ||
          s->chunk->count < 2)
        continue;
      uint32_t buf = etch__svc_writer_buffer(s, x, p, s->chunk->writer_id);
      uint32_t seq = buf ? etch__svc_seq_of(s, p, s->chunk->writer_id) : 0;
      if (!seq) continue;
      /* The first count - 1 fragments. */
      etch__svc_put_partial_chunk(s, buf, seq);
    }
  }
}

void etch__svc_end_flush(etch_service *s, session *x, bool ok) {
  x->flushing = false;
  free(x->flush_wait);
  x->flush_wait = NULL;
  x->nflush_wait = 0;
  for (producer *p = s->producers; p; p = p->next)
    etch__svc_scrape_producer(s, x, p);
  if (x->flush_for_consumer) {
    consumer *c = etch__svc_find_consumer(s, x->consumer_id);
    if (c) etch__svc_send_reply(&c->conn, x->flush_req, ok, NULL, false, -1);
  }
  if (x->flush_for_stop) stop_sources(s, x);
}

void etch__svc_begin_flush(etch_service *s, session *x, uint32_t timeout_ms,
                           bool for_consumer, uint64_t req, bool for_stop) {
  if (x->flushing) { /* one at a time: the older one ends now */
    etch__svc_end_flush(s, x, false);
    if (x->state == S_DISABLED) return;
  }
  x->flushing = true;
  x->flush_id = ++s->next_flush;
  x->flush_for_consumer = for_consumer;
  x->flush_for_stop = for_stop;
  x->flush_req = req;
  x->flush_deadline_ns = etch__monotonic_ns() + (uint64_t)(timeout_ms ? timeout_ms
                                               : DEFAULT_FLUSH_TIMEOUT_MS) *
                                        1000000ull;
  x->flush_wait = (uint32_t *)etch__calloc(x->ninst + 1, sizeof(uint32_t));
  x->nflush_wait = 0;
  if (!x->flush_wait) {
    /* No producer asked: a consumer's Flush fails, and a stop says so
     * when the session ends (what was not committed may be lost). */
    if (for_stop && !x->end_reason[0])
      snprintf(x->end_reason, sizeof x->end_reason,
               "producers not flushed at the stop: %s", etch_last_error());
    etch__svc_end_flush(s, x, false);
    return;
  }
  for (producer *p = s->producers; p; p = p->next) {
    etch__pb_buf b;
    etch__pb_buf_init(&b, 64, ETCH_IPC_MAX_FRAME - 64);
    etch__pb_nested m;
    bool any = false;
    etch__pb_nested_begin(&b.s, ETCH_GAC_FLUSH, &m);
    for (uint32_t i = 0; i < x->ninst; i++)
      if (x->inst[i].producer_id == p->id && x->inst[i].started) {
        etch__pb_write_varint_field(&b.s, ETCH_GAC_FLUSH_DATA_SOURCE_IDS,
                                   x->inst[i].id);
        any = true;
      }
    etch__pb_write_varint_field(&b.s, ETCH_GAC_FLUSH_REQUEST_ID, x->flush_id);
    etch__pb_nested_end(&b.s, &m);
    if (any && p->has_async && x->flush_wait) {
      etch__svc_send_command(p, &b, -1);
      x->flush_wait[x->nflush_wait++] = p->id;
    }
    etch__pb_buf_free(&b);
  }
  if (x->nflush_wait == 0) etch__svc_end_flush(s, x, true);
}

void etch__svc_flush_acked(etch_service *s, producer *p, uint64_t id) {
  for (session *x = s->sessions; x; x = x->next) {
    if (!x->flushing || x->flush_id != id) continue;
    for (uint32_t i = 0; i < x->nflush_wait; i++)
      if (x->flush_wait[i] == p->id) {
        x->flush_wait[i] = x->flush_wait[--x->nflush_wait];
        break;
      }
    if (x->nflush_wait == 0) etch__svc_end_flush(s, x, true);
    return;
  }
}
/* ---- reading a session ---- */

/*
 * Reading a session in pieces: the trace-file writer (its per-sequence
 * state kept from piece to piece) fed at most READ_PIECE bytes of packets
 * at a time, so that a read never holds more than one piece besides the
 * buffers themselves.
 */
#define READ_PIECE (4u << 20)

/* A consumer's ReadBuffers: pieces of ReadBuffersResponse slices that
 * mostly fit in one reply as they are. */
#define READ_PIECE_IPC (SLICE_MAX * 3u / 4u)

/* The machine of sequence seq (0: the host's). */
static uint32_t seq_machine(void *ctx, uint32_t seq) {
  etch_service *s = ((trust_ctx *)ctx)->s;
  if (seq < 2 || seq >= s->next_seq || seq >= s->nseqinfo) return 0;
  return s->seqinfo[seq].machine;
}

static bool trust(void *ctx, uint32_t seq, int32_t *pid, int32_t *uid,
                  bool *same_pidns) {
  etch_service *s = ((trust_ctx *)ctx)->s;
  if (seq < 2 || seq >= s->next_seq || seq >= s->nseqinfo) return false;
  *pid = s->seqinfo[seq].pid;
  *uid = s->seqinfo[seq].uid;
  *same_pidns = s->seqinfo[seq].same_pidns;
  return true;
}

/* A producer's packet left out of a read (it would not read, or speaks for
 * the service): the producer is named on stderr, once a second at most,
 * and counted; the session counts it in TraceStats.invalid_packets. */
static void invalid(void *ctx, uint32_t seq, const char *why) {
  etch_service *s = ((trust_ctx *)ctx)->s;
  int32_t pid = 0;
  uint32_t id = 0;
  if (seq >= 2 && seq < s->next_seq && seq < s->nseqinfo) {
    pid = s->seqinfo[seq].pid;
    id = s->seqinfo[seq].producer;
  }
  const char *name = NULL;
  for (producer *p = s->producers; p; p = p->next)
    if (p->id == id) {
      p->invalid_packets++;
      name = p->name;
    }
  etch__svc_warnf(s, W_INVALID,
                  "producer %u \"%s\" (pid %d), sequence %u: a packet left "
                  "out of the trace (it would not read): %s",
                  id, name ? name : "(gone)", (int)pid, seq, why);
}

/* A read of session x: into a file (trace-file records), or for a
 * consumer's ReadBuffers (`slices`: the replies' slices). */
sreader *etch__svc_sreader_new(etch_service *s, session *x, bool header,
                               bool stats, bool slices) {
  sreader *r = (sreader *)etch__calloc(1, sizeof *r);
  if (!r) return NULL;
  etch__tracefile_init(&r->o, false);
  r->o.slices = slices;
  r->piece = slices ? READ_PIECE_IPC : READ_PIECE;
  r->tc.s = s;
  r->o.trust = trust;
  r->o.trust_ctx = &r->tc;
  r->o.machine = seq_machine;
  r->o.validate = true;
  r->o.important = &x->important;
  r->o.on_invalid = invalid;
  r->session_id = x->id;
  r->stats = stats;
  if ((header && etch__tracefile_put_clock_snapshot(&r->o) != ETCH_OK) ||
      etch__svc_put_machines(s, x, &r->o) != ETCH_OK) {
    etch__tracefile_free(&r->o);
    free(r);
    return NULL;
  }
  return r;
}

void etch__svc_sreader_free(sreader *r) {
  if (!r) return;
  etch__tracefile_free(&r->o);
  free(r);
}

/* TraceStats for session x: one BufferStats per buffer of its config, and
 * the service's counts. */
void etch__svc_trace_stats(etch_service *s, const session *x,
                           etch__pb_stream *st) {
  etch__pb_nested b;
  for (uint32_t i = 0; i < x->cfg->nbuffers; i++) {
    etch_tracebuf *tb = s->bufs[x->buf_ids[i]];
    if (!tb) continue;
    etch_tracebuf_stats t;
    etch__tracebuf_stats(tb, &t);
    etch__pb_nested_begin(st, ETCH_TS_BUFFER_STATS, &b);
    etch__pb_write_varint_field(st, ETCH_BS_BUFFER_SIZE, t.buffer_size);
    etch__pb_write_varint_field(st, ETCH_BS_BYTES_WRITTEN, t.bytes_written);
    etch__pb_write_varint_field(st, ETCH_BS_CHUNKS_WRITTEN, t.chunks_written);
    etch__pb_write_varint_field(st, ETCH_BS_CHUNKS_REWRITTEN,
                               t.chunks_rewritten);
    etch__pb_write_varint_field(st, ETCH_BS_CHUNKS_OVERWRITTEN,
                               t.chunks_overwritten);
    etch__pb_write_varint_field(st, ETCH_BS_BYTES_OVERWRITTEN,
                               t.bytes_overwritten);
    etch__pb_write_varint_field(st, ETCH_BS_CHUNKS_DISCARDED,
                               t.chunks_discarded);
    etch__pb_write_varint_field(st, ETCH_BS_CHUNKS_READ, t.chunks_read);
    etch__pb_write_varint_field(st, ETCH_BS_BYTES_READ, t.bytes_read);
    etch__pb_write_varint_field(st, ETCH_BS_PATCHES_SUCCEEDED,
                               t.patches_succeeded);
    etch__pb_write_varint_field(st, ETCH_BS_PATCHES_FAILED, t.patches_failed);
    etch__pb_write_varint_field(st, ETCH_BS_ABI_VIOLATIONS, t.abi_violations);
    etch__pb_write_varint_field(st, ETCH_BS_TRACE_WRITER_PACKET_LOSS,
                               t.sequence_gaps);
    etch__pb_nested_end(st, &b);
  }
  uint32_t producers = 0, sources = 0, sessions = 0, buffers = 0;
  for (producer *p = s->producers; p; p = p->next) {
    producers++;
    sources += p->nds;
  }
  for (session *y = s->sessions; y; y = y->next) sessions++;
  for (uint32_t i = 1; i < s->nbufs; i++) buffers += s->bufs[i] != NULL;
  etch__pb_write_varint_field(st, ETCH_TS_PRODUCERS_CONNECTED, producers);
  etch__pb_write_varint_field(st, ETCH_TS_PRODUCERS_SEEN, s->next_producer);
  etch__pb_write_varint_field(st, ETCH_TS_DATA_SOURCES_REGISTERED, sources);
  etch__pb_write_varint_field(st, ETCH_TS_TRACING_SESSIONS, sessions);
  etch__pb_write_varint_field(st, ETCH_TS_TOTAL_BUFFERS, buffers);
  etch__pb_write_varint_field(st, ETCH_TS_INVALID_PACKETS, x->invalid_packets);
  /* Which buffer each sequence wrote into: trace_processor attributes a
   * sequence's lost packets (previous_packet_dropped) to its buffer with
   * it (traced_buf_sequence_packet_loss). */
  for (uint32_t i = 0; i < x->cfg->nbuffers; i++) {
    etch_tracebuf *tb = s->bufs[x->buf_ids[i]];
    if (!tb) continue;
    uint32_t n = etch__tracebuf_sequences(tb, NULL, 0);
    uint32_t *seqs = n ? (uint32_t *)etch__malloc(n * sizeof *seqs) : NULL;
    if (!seqs) continue;
    etch__tracebuf_sequences(tb, seqs, n);
    for (uint32_t k = 0; k < n; k++) {
      etch__pb_nested w;
      etch__pb_nested_begin(st, ETCH_TS_WRITER_STATS, &w);
      etch__pb_write_varint_field(st, ETCH_WS_SEQUENCE_ID, seqs[k]);
      etch__pb_write_varint_field(st, ETCH_WS_BUFFER, i);
      etch__pb_nested_end(st, &w);
    }
    free(seqs);
  }
}

/* The trace's last packet: the session's TraceStats, on sequence 1. */
static int put_session_stats(etch_service *s, session *x, etch_tracefile *o) {
  etch__pb_stream *st = &o->tmp.s;
  etch__pb_write_varint_field(st, ETCH_PKT_TIMESTAMP, etch__boottime_ns());
  etch__pb_write_varint_field(st, ETCH_PKT_TIMESTAMP_CLOCK_ID,
                             ETCH_CLOCK_BOOTTIME);
  etch__pb_nested n;
  etch__pb_nested_begin(st, ETCH_PKT_TRACE_STATS, &n);
  etch__svc_trace_stats(s, x, st);
  etch__pb_nested_end(st, &n);
  return etch__tracefile_put_service(o);
}

/*
 * Per sequence that lost track events in the service (its chunks
 * discarded by a full buffer or overwritten by the ring before they were
 * read, or its packets left out as undecodable after such a loss): an
 * instant etch.dropped_events on the sequence itself (its default track,
 * the writer's thread for etch's producers) at the time of the first loss,
 * args count and where = "service", as a producer's own drop reports. So
 * etch and trace_processor show who lost what, not only how many chunks.
 * Slices a discard buffer's kept data left open on the sequence's default
 * track are ended there first (etch__tracefile_put_loss_notes).
 */
static int put_loss_notes(etch_service *s, session *x, etch_tracefile *o) {
  etch_vec all = {0};
  int rc = ETCH_OK;
  for (uint32_t b = 0; b < x->cfg->nbuffers && !rc; b++) {
    etch_tracebuf *tb = s->bufs[x->buf_ids[b]];
    uint32_t m;
    if (!tb || !(m = etch__tracebuf_losses(tb, NULL, 0))) continue;
    etch_tracebuf_loss *v = (etch_tracebuf_loss *)etch__malloc(m * sizeof *v);
    if (!v) break;
    etch__tracebuf_losses(tb, v, m);
    for (uint32_t k = 0; k < m && !rc; k++)
      rc = etch__loss_add(&all, &(etch_loss){.seq = v[k].seq,
                                             .open_depth = v[k].open_depth,
                                             .events = v[k].events,
                                             .first_ns = v[k].first_ns});
    free(v);
  }
  /* What reads left out was lost now, as far as the notes can tell. */
  const etch_loss *sk = ETCH_VEC_AT(&x->skipped, etch_loss);
  uint64_t now = etch__boottime_ns();
  for (size_t k = 0; k < ETCH_VEC_COUNT(&x->skipped, etch_loss) && !rc; k++)
    rc = etch__loss_add(&all, &(etch_loss){.seq = sk[k].seq,
                                           .events = sk[k].events,
                                           .first_ns = now});
  if (rc)
    rc = etch__error(ETCH_ENOMEM, "out of memory writing loss notes");
  else
    rc = etch__tracefile_put_loss_notes(o, ETCH_VEC_AT(&all, etch_loss),
                                        ETCH_VEC_COUNT(&all, etch_loss),
                                        "service");
  etch__vec_free(&all);
  return rc;
}

/* The next piece of trace file bytes (*data NULL, *len 0 when there is
 * nothing more: then r->done). The bytes are the reader's, valid until
 * the next call or sreader_free: one buffer serves every piece. */
int etch__svc_sreader_next(etch_service *s, sreader *r, uint8_t **data,
                           size_t *len) {
  *data = NULL;
  *len = 0;
  if (r->handed) etch__pb_buf_reset(&r->o.out);
  r->handed = true;
  int rc = ETCH_OK;
  session *x = etch__svc_find_session(s, r->session_id);
  size_t have;
  while (!r->done && !rc && (have = etch__pb_buf_len(&r->o.out)) < r->piece) {
    if (x && r->buf < x->cfg->nbuffers) {
      etch_tracebuf *tb = s->bufs[x->buf_ids[r->buf]];
      bool more = false;
      /* The budget counts packet bytes; the output adds trusted fields
       * and framing to each (up to twice the bytes for small packets):
       * half of what is left at a time, so the piece ends near its size. */
      uint64_t budget = (r->piece - have) / 2;
      uint64_t progress = tb ? etch__tracebuf_progress(tb) : 0;
      if (tb)
        rc = etch__tracebuf_read_runs(tb, etch__tracefile_on_packet,
                                      etch__tracefile_on_run, &r->o,
                                      budget ? budget : 1, &more);
      /* No read of a buffer may spin: one that says there is more but
       * moved no sequence on ends this buffer's part of the read (what
       * is left stays in the buffer). The buffer never does this; this is
       * what keeps a producer's chunks from holding etchd here if it
       * ever did. */
      if (more && etch__tracebuf_progress(tb) == progress) {
        etch__svc_logf(s, "session %u: buffer %u: a read made no progress; "
                       "the rest of the buffer stays unread", x->id, r->buf);
        more = false;
      }
      x->invalid_packets += r->o.invalid_packets; /* counted once */
      r->o.invalid_packets = 0;
      /* Out of memory the session's list misses what this read left
       * out (the loss is still in the stats). */
      const etch_loss *lost = ETCH_VEC_AT(&r->o.lost, etch_loss);
      for (size_t k = 0; k < ETCH_VEC_COUNT(&r->o.lost, etch_loss); k++)
        (void)etch__loss_add(&x->skipped, &(etch_loss){.seq = lost[k].seq,
                                                       .events = lost[k].events});
      r->o.lost.len = 0;
      if (!more) r->buf++;
    } else {
      if (x && r->stats) rc = put_loss_notes(s, x, &r->o);
      if (x && r->stats && !rc) rc = put_session_stats(s, x, &r->o);
      r->done = true;
    }
  }
  if (rc) return rc;
  if (r->o.out.s.failed)
    return etch__error(ETCH_ENOMEM, "out of memory reading a session");
  *len = etch__pb_buf_len(&r->o.out);
  if (*len) *data = etch__pb_buf_data(&r->o.out);
  return ETCH_OK;
}
/* ---- the consumer's file (write_into_file) ---- */

uint32_t etch__svc_write_period_ms(const session *x) {
  uint32_t per = x->cfg->file_write_period_ms ? x->cfg->file_write_period_ms
                                              : DEFAULT_WRITE_PERIOD_MS;
  return per < MIN_WRITE_PERIOD_MS ? MIN_WRITE_PERIOD_MS : per;
}

/* How long bytes may wait for a pipe or socket that takes none. */
static uint64_t stall_ms(const session *x) {
  uint64_t t = 2ull * etch__svc_write_period_ms(x);
  return t < FILE_STALL_MIN_MS ? FILE_STALL_MIN_MS : t;
}

/* Nothing more goes into x's file: the session ends with the reason. */
static void file_dead(etch_service *s, session *x, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void file_dead(etch_service *s, session *x, const char *fmt, ...) {
  x->out_dead = true;
  free(x->pend);
  x->pend = NULL;
  x->pend_len = x->pend_off = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x->end_reason, sizeof x->end_reason, fmt, ap);
  va_end(ap);
  etch__svc_logf(s, "session %u: %s", x->id, x->end_reason);
}

/*
 * Gives the consumer's file len bytes of whole records (its sink); returns
 * how many it took (all of them, unless the file is a pipe or socket that
 * is full, or the file failed: then x->out_dead, with the reason).
 */
static size_t out_take(etch_service *s, session *x, const uint8_t *data,
                       size_t len) {
  size_t took = etch__sink_write(&x->out, data, len);
  if (!x->out.err) return took;
  if (!x->out.regular) {
    file_dead(s, x, "cannot write the trace into the consumer's file: %s",
              strerror(x->out.err));
    return took;
  }
  char tail[128] = "";
  if (x->out.cut_err)
    snprintf(tail, sizeof tail, " (and could not be cut back to it: %s)",
             strerror(x->out.cut_err));
  file_dead(s, x,
            "cannot write the trace into the consumer's file: %s; the file "
            "ends at its last whole packet, %llu bytes%s",
            strerror(x->out.err), (unsigned long long)x->out.written, tail);
  return took;
}

/* What waits for a pipe or socket: true when nothing does any more. */
static bool flush_pending(etch_service *s, session *x, uint64_t now) {
  if (!x->pend) return true;
  size_t took = out_take(s, x, x->pend + x->pend_off,
                         x->pend_len - x->pend_off);
  if (x->out_dead) return false;
  x->pend_off += took;
  if (x->pend_off == x->pend_len) {
    free(x->pend);
    x->pend = NULL;
    x->pend_len = x->pend_off = 0;
    x->stall_since_ns = 0;
    return true;
  }
  if (took) x->stall_since_ns = now;
  uint64_t limit = stall_ms(x);
  if (now - x->stall_since_ns >= limit * 1000000ull)
    file_dead(s, x,
              "the consumer's file took no bytes of the trace for %llu ms "
              "(a pipe or socket nobody reads?)",
              (unsigned long long)limit);
  return false;
}

/*
 * Writes what the session's buffers hold into the consumer's file (and,
 * `final`, the TraceStats that end the trace). Never waits for a pipe or
 * socket: what it does not take waits for the next call, and nothing more
 * is read from the buffers until it is taken. Sets x->out_complete once the
 * whole trace is in the file.
 */
void etch__svc_write_out(etch_service *s, session *x, bool final) {
  if (x->out.fd < 0 || x->out_dead || x->out_complete) return;
  uint64_t now = etch__monotonic_ns();
  if (!flush_pending(s, x, now)) return;
  if (x->reached_max) { /* full: the file ends where it is */
    if (final) x->out_complete = true;
    return;
  }
  uint64_t max = x->cfg->max_file_size_bytes;
  sreader *r = etch__svc_sreader_new(s, x, !x->wrote_header, final, false);
  if (!r) {
    file_dead(s, x, "cannot read its buffers (out of memory)");
    return;
  }
  x->wrote_header = true;
  while (!r->done) {
    uint8_t *data;
    size_t len;
    if (etch__svc_sreader_next(s, r, &data, &len) != ETCH_OK) {
      file_dead(s, x, "cannot read its buffers: %s", etch_last_error());
      break;
    }
    if (max && x->out.written + len > max) {
      /* Whole packets only, up to the limit: the file stays readable. */
      len = etch__records_within(data, len, (size_t)(max - x->out.written));
      x->reached_max = true;
    }
    size_t took = out_take(s, x, data, len);
    if (x->out_dead) break;
    if (took < len) { /* a pipe or socket that is full: the rest waits */
      x->pend = (uint8_t *)etch__malloc(len - took);
      if (!x->pend) {
        file_dead(s, x, "out of memory keeping the trace for its file");
        break;
      }
      memcpy(x->pend, data + took, len - took);
      x->pend_len = len - took;
      x->pend_off = 0;
      x->stall_since_ns = now;
      break;
    }
    if (x->reached_max) break;
  }
  bool done = r->done;
  etch__svc_sreader_free(r);
  if (final && !x->out_dead && !x->pend && (done || x->reached_max))
    x->out_complete = true;
}
/* ---- stopping ---- */

/* StopDataSource for instance `id`. */
static void send_stop(producer *p, uint64_t id) {
  etch__pb_buf b;
  etch__pb_nested m;
  etch__pb_buf_init(&b, 32, 0);
  etch__pb_nested_begin(&b.s, ETCH_GAC_STOP_DATA_SOURCE, &m);
  etch__pb_write_varint_field(&b.s, ETCH_GAC_STOP_INSTANCE_ID, id);
  etch__pb_nested_end(&b.s, &m);
  etch__svc_send_command(p, &b, -1);
  etch__pb_buf_free(&b);
}

/* Answers the consumer's EnableTracing: the session is over (with the
 * reason when it ended early). */
void etch__svc_answer_enable(etch_service *s, session *x) {
  consumer *c = etch__svc_find_consumer(s, x->consumer_id);
  if (c && x->enable_pending) {
    etch__pb_buf b;
    etch__pb_buf_init(&b, 64, 0);
    etch__pb_write_varint_field(&b.s, ETCH_ETRESP_DISABLED, 1);
    if (x->end_reason[0])
      etch__pb_write_string_field(&b.s, ETCH_ETRESP_ERROR, x->end_reason);
    etch__svc_send_reply(&c->conn, x->enable_req, true, &b, false, -1);
    etch__pb_buf_free(&b);
    x->enable_pending = false;
  }
  etch__svc_logf(s, "session %u: disabled (%llu bytes written to file)%s%s",
                 x->id, (unsigned long long)x->out.written,
                 x->end_reason[0] ? ": " : "", x->end_reason);
}

void etch__svc_finish_disable(etch_service *s, session *x) {
  if (x->state == S_DISABLED) return;
  x->state = S_DISABLED;
  etch__svc_write_out(s, x, true);
  if (x->out.fd >= 0 && !x->out_dead && !x->out_complete) {
    /* A pipe or socket has not taken it all yet: the answer waits for the
     * rest (timers), or for the file to be given up on. */
    x->draining = true;
    x->next_write_ns = etch__monotonic_ns() + FILE_RETRY_MS * 1000000ull;
    return;
  }
  etch__svc_answer_enable(s, x);
}

static void stop_sources(etch_service *s, session *x) {
  x->state = S_STOPPING;
  uint32_t t = x->cfg->data_source_stop_timeout_ms
                   ? x->cfg->data_source_stop_timeout_ms
                   : DEFAULT_STOP_TIMEOUT_MS;
  x->stop_deadline_ns = etch__monotonic_ns() + (uint64_t)t * 1000000ull;
  bool waiting = false;
  for (uint32_t i = 0; i < x->ninst; i++) {
    instance *in = &x->inst[i];
    producer *p = etch__svc_find_producer(s, in->producer_id);
    if (!p || in->stop_sent) continue;
    send_stop(p, in->id);
    in->stop_sent = true;
    if (in->notify_stop) waiting = true;
    else in->stopped = true;
  }
  if (!waiting) etch__svc_finish_disable(s, x);
}

/* Disabling: flush, then stop the data sources, then answer. */
void etch__svc_disable_session(etch_service *s, session *x) {
  if (x->state >= S_STOPPING) return;
  if (x->state == S_CONFIGURED) {
    etch__svc_finish_disable(s, x);
    return;
  }
  x->state = S_STOPPING;
  etch__svc_begin_flush(s, x, x->cfg->flush_timeout_ms, false, 0, true);
}
/* ---- freeing ---- */

void etch__svc_free_session(etch_service *s, session *x) {
  if (x->state < S_STOPPING) {
    /* Stop its data sources without waiting. */
    for (uint32_t i = 0; i < x->ninst; i++) {
      producer *p = etch__svc_find_producer(s, x->inst[i].producer_id);
      if (!p || x->inst[i].stop_sent) continue;
      send_stop(p, x->inst[i].id);
    }
  }
  for (session **pp = &s->sessions; *pp; pp = &(*pp)->next)
    if (*pp == x) {
      *pp = x->next;
      break;
    }
  for (uint32_t i = 0; i < x->cfg->nbuffers; i++) {
    etch__tracebuf_free(s->bufs[x->buf_ids[i]]);
    s->bufs[x->buf_ids[i]] = NULL;
  }
  if (x->out.fd >= 0) close(x->out.fd);
  free(x->pend);
  etch__vec_free(&x->skipped);
  etch__u64map_free(&x->important);
  etch__svc_logf(s, "session %u: freed", x->id);
  free(x->flush_wait);
  etch__vec_free(&x->mwv);
  etch__vec_free(&x->instv);
  free(x->cfg);
  free(x);
#ifdef __GLIBC__
  /* The buffers' chunks were small blocks of the heap, freed as they were
   * read: give the pages back rather than keep them for a next session. */
  malloc_trim(0);
#endif
}

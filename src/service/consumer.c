/*
 * consumer.c - the consumer port: a consumer's calls (EnableTracing,
 * StartTracing, Flush, DisableTracing, ReadBuffers, FreeBuffers,
 * GetTraceStats, QueryServiceState, QueryCapabilities), ReadBuffers
 * streamed as the consumer's socket keeps up, and what goes with a
 * consumer (see ports.h and docs/service.md).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "proto/ipc.h"
#include "proto/perfetto.h"
#include "service/methods.h"
#include "service/ports.h"
#include "service/service_int.h"
#include "service/session.h"

static int consumer_enable(etch_service *s, consumer *c,
                           const etch_ipc_frame *f) {
  const char *err = NULL;
  char msg[300];
  etch_trace_config *cfg = (etch_trace_config *)etch__malloc(sizeof *cfg);
  if (!cfg) return ETCH_ENOMEM;
  const uint8_t *cb = NULL;
  size_t cl = 0;
  etch__pb_dec d;
  etch__pb_field fl;
  etch__pb_dec_init(&d, f->body.data, f->body.len);
  while (etch__pb_next(&d, &fl))
    if (fl.id == ETCH_ETR_TRACE_CONFIG && fl.wt == 2) {
      cb = fl.data;
      cl = fl.len;
    }
  int fd = etch__ipc_conn_take_fd(&c->conn);
  if (d.err) {
    err = "malformed EnableTracingRequest";
  } else if (s->stop) {
    err = "the service is stopping";
  } else if (c->session_id) {
    err = "this consumer already has a session";
  } else if (etch__trace_config_decode(cb ? cb : (const uint8_t *)"", cl,
                                       cfg) != ETCH_OK ||
             etch__trace_config_check(cfg) != ETCH_OK) {
    snprintf(msg, sizeof msg, "%s", etch_last_error());
    err = msg;
  } else if (cfg->write_into_file && fd < 0) {
    err = "write_into_file without a file descriptor";
  }
  if (!err) {
    /* A buffer's memory is taken as chunks arrive, so a huge size_kb costs
     * nothing at first: without a cap, a consumer that is told yes to
     * terabytes makes etchd grow until the system kills it. */
    uint64_t want = 0, held = 0;
    for (uint32_t i = 0; i < cfg->nbuffers; i++)
      want += (uint64_t)cfg->buffers[i].size_kb * 1024;
    for (session *y = s->sessions; y; y = y->next)
      for (uint32_t i = 0; i < y->cfg->nbuffers; i++)
        held += (uint64_t)y->cfg->buffers[i].size_kb * 1024;
    if (want > s->o.max_buffer_bytes || held > s->o.max_buffer_bytes - want) {
      snprintf(msg, sizeof msg,
               "buffers of %llu KiB in all are more than etchd allows: "
               "%llu KiB for all sessions' buffers, %llu KiB of it in use "
               "(etchd --max-buffer-mb)",
               (unsigned long long)(want / 1024),
               (unsigned long long)(s->o.max_buffer_bytes / 1024),
               (unsigned long long)(held / 1024));
      err = msg;
    }
  }
  if (!err) {
    bool clash = false;
    if (cfg->unique_session_name[0])
      for (session *x = s->sessions; x; x = x->next)
        if (!strcmp(x->cfg->unique_session_name, cfg->unique_session_name))
          clash = true;
    if (clash) err = "a session with this unique_session_name runs already";
  }
  session *x = NULL;
  if (!err) {
    x = (session *)etch__calloc(1, sizeof *x);
    if (!x) err = "out of memory";
  }
  if (!err) {
    x->id = ++s->next_session;
    x->consumer_id = c->id;
    x->cfg = cfg;
    x->out.fd = cfg->write_into_file ? fd : -1;
    if (cfg->write_into_file) fd = -1;
    for (uint32_t i = 0; i < cfg->nbuffers && !err; i++) {
      etch_tracebuf *tb;
      if (etch__tracebuf_new((uint64_t)cfg->buffers[i].size_kb * 1024,
                             cfg->buffers[i].fill_policy == ETCH_TC_FILL_DISCARD
                                 ? ETCH_BUFFER_DISCARD : ETCH_BUFFER_RING,
                             &tb) != ETCH_OK) {
        snprintf(msg, sizeof msg, "cannot make a buffer: %s",
                 etch_last_error());
        err = msg;
        break;
      }
      /* Room in both first: they grow together or not at all (the arrays
       * follow their vectors even when only the first could grow). */
      int nomem = ETCH_VEC_RESERVE(&s->bufv, etch_tracebuf *, 1);
      s->bufs = ETCH_VEC_AT(&s->bufv, etch_tracebuf *);
      if (!nomem) nomem = ETCH_VEC_RESERVE(&s->buf_sessionv, uint32_t, 1);
      s->buf_session = ETCH_VEC_AT(&s->buf_sessionv, uint32_t);
      if (nomem) {
        etch__tracebuf_free(tb);
        err = "out of memory";
        break;
      }
      (void)ETCH_VEC_PUSH(&s->bufv, etch_tracebuf *, tb);
      (void)ETCH_VEC_PUSH(&s->buf_sessionv, uint32_t, x->id);
      s->bufs = ETCH_VEC_AT(&s->bufv, etch_tracebuf *);
      s->buf_session = ETCH_VEC_AT(&s->buf_sessionv, uint32_t);
      x->buf_ids[i] = s->nbufs++;
    }
  }
  if (fd >= 0) close(fd);
  if (err) {
    if (x) {
      for (uint32_t i = 0; i < cfg->nbuffers; i++)
        if (x->buf_ids[i] && s->bufs[x->buf_ids[i]] &&
            s->buf_session[x->buf_ids[i]] == x->id) {
          etch__tracebuf_free(s->bufs[x->buf_ids[i]]);
          s->bufs[x->buf_ids[i]] = NULL;
        }
      if (x->out.fd >= 0) close(x->out.fd);
      free(x);
    }
    free(cfg);
    etch__pb_buf b;
    etch__pb_buf_init(&b, 64, 0);
    etch__pb_write_varint_field(&b.s, ETCH_ETRESP_DISABLED, 1);
    etch__pb_write_string_field(&b.s, ETCH_ETRESP_ERROR, err);
    etch__svc_send_reply(&c->conn, f->request_id, true, &b, false, -1);
    etch__pb_buf_free(&b);
    etch__svc_logf(s, "consumer %u: session refused: %s", c->id, err);
    return ETCH_OK;
  }
  c->session_id = x->id;
  x->enable_pending = true;
  x->enable_req = f->request_id;
  x->state = cfg->deferred_start ? S_CONFIGURED : S_STARTED;
  x->next = s->sessions;
  s->sessions = x;
  uint64_t now = etch__monotonic_ns();
  if (cfg->duration_ms && x->state == S_STARTED)
    x->deadline_ns = now + (uint64_t)cfg->duration_ms * 1000000ull;
  if (x->out.fd >= 0) {
    etch__sink_init(&x->out, x->out.fd, true);
    x->next_write_ns =
        now + (uint64_t)etch__svc_write_period_ms(x) * 1000000ull;
  }
  etch__svc_logf(s, "consumer %u: session %u, %u buffers, %u data sources",
                 c->id, x->id, cfg->nbuffers, cfg->nsources);
  for (producer *p = s->producers; p; p = p->next)
    etch__svc_match_producer(s, x, p);
  return ETCH_OK;
}

/* Sends ReadBuffers replies while the consumer's socket keeps up: at most
 * READ_AHEAD bytes queued, the rest when it has read them, so a large
 * trace never fills the send queue. */
#define READ_AHEAD (1u << 20)

_Static_assert(ETCH_TRACEFILE_SLICE_MAX + 64u <= SLICE_MAX,
               "one ReadBuffersResponse slice fits a reply");

static void pump_read(etch_service *s, consumer *c) {
  while (c->reader && c->conn.tx_len - c->conn.tx_off < READ_AHEAD &&
         !c->conn.failed) {
    if (c->rd_off >= c->rd_len) { /* the next piece (the reader's bytes) */
      c->rd = NULL;
      c->rd_len = c->rd_off = 0;
      if (!c->reader->done &&
          etch__svc_sreader_next(s, c->reader, &c->rd, &c->rd_len) != ETCH_OK) {
        etch__svc_send_reply(&c->conn, c->rd_req, false, NULL, false, -1);
        etch__svc_sreader_free(c->reader);
        c->reader = NULL;
        return;
      }
    }
    /* The piece is ReadBuffersResponse slices, each at most
     * ETCH_TRACEFILE_SLICE_MAX bytes of data: as many whole ones as one
     * reply holds (all of them, nearly always). */
    size_t take = c->rd_len - c->rd_off;
    if (take > SLICE_MAX) {
      etch__pb_dec d;
      etch__pb_field fl;
      etch__pb_dec_init(&d, c->rd + c->rd_off, take);
      take = 0;
      while (etch__pb_next(&d, &fl) && (size_t)(d.p - d.start) <= SLICE_MAX)
        take = (size_t)(d.p - d.start);
      /* A slice's field is its data (ETCH_TRACEFILE_SLICE_MAX at most) and
       * a few bytes: the first always fits (asserted below). */
      if (ETCH_NEVER(!take)) take = c->rd_len - c->rd_off;
    }
    bool last = c->rd_off + take >= c->rd_len && c->reader->done;
    etch__svc_send_reply_bytes(&c->conn, c->rd_req, true,
                               c->rd ? c->rd + c->rd_off : NULL, take, !last,
                               -1);
    c->rd_off += take;
    if (last) {
      c->rd = NULL;
      etch__svc_sreader_free(c->reader);
      c->reader = NULL;
    }
  }
}

static void consumer_read(etch_service *s, consumer *c,
                          const etch_ipc_frame *f) {
  session *x = etch__svc_find_session(s, c->session_id);
  if (!x || x->out.fd >= 0 || c->reader) {
    etch__svc_send_reply(&c->conn, f->request_id, false, NULL, false, -1);
    return;
  }
  c->reader = etch__svc_sreader_new(s, x, !x->wrote_header,
                                    x->state == S_DISABLED, true);
  if (!c->reader) {
    etch__svc_send_reply(&c->conn, f->request_id, false, NULL, false, -1);
    return;
  }
  x->wrote_header = true;
  c->rd = NULL;
  c->rd_len = c->rd_off = 0;
  c->rd_req = f->request_id;
  pump_read(s, c);
}

static void consumer_query(etch_service *s, consumer *c,
                           const etch_ipc_frame *f) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 1024, 0);
  etch__pb_nested st, m;
  etch__pb_nested_begin(&b.s, ETCH_QSS_SERVICE_STATE, &st);
  for (producer *p = s->producers; p; p = p->next) {
    if (!p->initialized) continue;
    etch__pb_nested_begin(&b.s, ETCH_TSS_PRODUCERS, &m);
    etch__pb_write_varint_field(&b.s, ETCH_TSS_PRODUCER_ID, p->id);
    etch__pb_write_string_field(&b.s, ETCH_TSS_PRODUCER_NAME, p->name);
    etch__pb_write_varint_field(&b.s, ETCH_TSS_PRODUCER_UID, p->conn.peer_uid);
    etch__pb_write_varint_field(&b.s, ETCH_TSS_PRODUCER_PID,
                               (uint64_t)p->conn.peer_pid);
    etch__pb_nested_end(&b.s, &m);
  }
  for (producer *p = s->producers; p; p = p->next)
    for (uint32_t i = 0; i < p->nds; i++) {
      etch__pb_nested_begin(&b.s, ETCH_TSS_DATA_SOURCES, &m);
      etch__pb_write_bytes_field(&b.s, ETCH_TSS_DS_DESCRIPTOR, p->ds[i].desc,
                                p->ds[i].desc_len);
      etch__pb_write_varint_field(&b.s, ETCH_TSS_DS_PRODUCER_ID, p->id);
      etch__pb_nested_end(&b.s, &m);
    }
  uint32_t n = 0, started = 0;
  for (session *x = s->sessions; x; x = x->next) {
    n++;
    if (x->state == S_STARTED) started++;
  }
  etch__pb_write_varint_field(&b.s, ETCH_TSS_NUM_SESSIONS, n);
  etch__pb_write_varint_field(&b.s, ETCH_TSS_NUM_SESSIONS_STARTED, started);
  etch__pb_nested_end(&b.s, &st);
  /* Larger than a frame: the reply says so rather than cut it. */
  etch__svc_send_reply(&c->conn, f->request_id,
                       !b.s.failed && etch__pb_buf_len(&b) < SLICE_MAX, &b,
                       false, -1);
  etch__pb_buf_free(&b);
}

static int on_consumer_frame(etch_service *s, consumer *c,
                             const etch_ipc_frame *f) {
  if (f->kind == ETCH_IPC_BIND) {
    bool ok = etch__svc_bind(&c->conn, f, false, false, NULL);
    c->bound = c->bound || ok;
    return ETCH_OK;
  }
  if (f->kind != ETCH_IPC_INVOKE) return ETCH_OK;
  if (!c->bound || f->service_id != CONSUMER_SERVICE_ID) {
    etch__svc_reply_empty(&c->conn, f, false);
    return ETCH_OK;
  }
  session *x = etch__svc_find_session(s, c->session_id);
  etch__pb_dec d;
  etch__pb_field fl;
  switch (f->method_id) {
  case CM_ENABLE: return consumer_enable(s, c, f);
  case CM_START:
    if (x && x->state == S_CONFIGURED) {
      x->state = S_STARTED;
      if (x->cfg->duration_ms)
        x->deadline_ns = etch__monotonic_ns() + (uint64_t)x->cfg->duration_ms * 1000000ull;
      etch__svc_start_session_sources(s, x);
    }
    etch__svc_reply_empty(&c->conn, f, x != NULL);
    return ETCH_OK;
  case CM_DISABLE:
    etch__svc_reply_empty(&c->conn, f, x != NULL);
    if (x) etch__svc_disable_session(s, x);
    return ETCH_OK;
  case CM_FLUSH: {
    uint32_t timeout = 0;
    etch__pb_dec_init(&d, f->body.data, f->body.len);
    while (etch__pb_next(&d, &fl))
      if (fl.id == ETCH_FR_TIMEOUT_MS && fl.wt == 0 && fl.u <= 600000)
        timeout = (uint32_t)fl.u;
    if (!x || x->state != S_STARTED) {
      etch__svc_reply_empty(&c->conn, f, false);
      return ETCH_OK;
    }
    etch__svc_begin_flush(s, x, timeout, true, f->request_id, false);
    return ETCH_OK;
  }
  case CM_READ:
    consumer_read(s, c, f);
    return ETCH_OK;
  case CM_FREE:
    if (x) etch__svc_free_session(s, x);
    c->session_id = 0;
    etch__svc_reply_empty(&c->conn, f, true);
    return ETCH_OK;
  case CM_QUERY:
    consumer_query(s, c, f);
    return ETCH_OK;
  case CM_STATS: { /* GetTraceStatsResponse { trace_stats } */
    if (!x) {
      etch__svc_reply_empty(&c->conn, f, false);
      return ETCH_OK;
    }
    etch__pb_buf b;
    etch__pb_nested m;
    etch__pb_buf_init(&b, 256, 0);
    etch__pb_nested_begin(&b.s, ETCH_GTS_TRACE_STATS, &m);
    etch__svc_trace_stats(s, x, &b.s);
    etch__pb_nested_end(&b.s, &m);
    if (!f->drop_reply)
      etch__svc_send_reply(&c->conn, f->request_id, true, &b, false, -1);
    etch__pb_buf_free(&b);
    return ETCH_OK;
  }
  case CM_CAPS: { /* it answers; it observes no events (ObserveEvents) */
    etch__pb_buf b;
    etch__pb_nested m;
    etch__pb_buf_init(&b, 16, 0);
    etch__pb_nested_begin(&b.s, ETCH_QCR_CAPABILITIES, &m);
    etch__pb_write_varint_field(&b.s, ETCH_TSC_HAS_QUERY_CAPABILITIES, 1);
    etch__pb_nested_end(&b.s, &m);
    if (!f->drop_reply)
      etch__svc_send_reply(&c->conn, f->request_id, true, &b, false, -1);
    etch__pb_buf_free(&b);
    return ETCH_OK;
  }
  default: /* not supported by etch: said, not ignored */
    etch__svc_reply_empty(&c->conn, f, false);
    return ETCH_OK;
  }
}

void etch__svc_service_consumer(etch_service *s, consumer *c, short rev) {
  if (rev & POLLOUT) {
    etch__ipc_conn_flush(&c->conn);
    pump_read(s, c);
  }
  if (rev & (POLLIN | POLLHUP | POLLERR)) etch__ipc_conn_read(&c->conn);
  /* On the stack: a frame that could not be allocated left what was read
   * unprocessed until more came, which may be never. */
  etch_ipc_frame frame;
  etch_ipc_frame *f = &frame;
  int r;
  while ((r = etch__ipc_conn_next(&c->conn, f)) == 1) {
    if (on_consumer_frame(s, c, f) != ETCH_OK) {
      c->conn.eof = false;
      etch__ipc_conn_fail(&c->conn, "%s", etch_last_error());
      break;
    }
    if (c->bound) c->conn.max_frame = ETCH_IPC_MAX_FRAME;
  }
  etch__svc_conn_account(s, &c->conn, &c->partial);
  if (c->conn.failed) etch__svc_drop_consumer(s, c, c->conn.err);
}

void etch__svc_drop_consumer(etch_service *s, consumer *c, const char *why) {
  etch__svc_logf(s, "consumer %u gone: %s", c->id, why);
  session *x = etch__svc_find_session(s, c->session_id);
  if (x) etch__svc_free_session(s, x);
  for (consumer **pp = &s->consumers; *pp; pp = &(*pp)->next)
    if (*pp == c) {
      *pp = c->next;
      break;
    }
  etch__svc_conn_forget(s, &c->conn, c->partial);
  etch__ipc_conn_close(&c->conn);
  etch__svc_sreader_free(c->reader); /* and the piece c->rd points into */
  free(c);
}

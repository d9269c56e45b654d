/*
 * session.h - a session's life (session.c): enable, start, flush, read,
 * write into the consumer's file, stop, free. Used by the ports and the
 * loop; calls core.c, methods.c, machine.c and shmem.c only.
 */
#ifndef ETCH_SERVICE_SESSION_H
#define ETCH_SERVICE_SESSION_H

#include "service/service_int.h"

/*
 * Reading a session in pieces: the trace-file writer (its per-sequence
 * state kept from piece to piece) fed at most a piece of packets at a
 * time (session.c), so that a read never holds more than one piece
 * besides the buffers themselves.
 */
typedef struct trust_ctx {
  etch_service *s;
} trust_ctx;

typedef struct sreader {
  etch_tracefile o;
  trust_ctx tc;
  uint32_t session_id;
  uint32_t buf;  /* the session's buffer being read */
  uint32_t piece; /* READ_PIECE or READ_PIECE_IPC */
  bool stats;    /* TraceStats at the end */
  bool done;
  /* A piece was handed out (its bytes are dropped at the next call; before
   * the first, r->o.out holds the header: the clock snapshot). */
  bool handed;
} sreader;

void etch__svc_match_producer(etch_service *s, session *x, producer *p);
void etch__svc_start_session_sources(etch_service *s, session *x);
void etch__svc_clear_incremental_state(etch_service *s, session *x);
uint32_t etch__svc_writer_buffer(etch_service *s, session *x, producer *p,
                                 uint16_t w);
void etch__svc_scrape_producer(etch_service *s, session *x, producer *p);
void etch__svc_begin_flush(etch_service *s, session *x, uint32_t timeout_ms,
                           bool for_consumer, uint64_t req, bool for_stop);
void etch__svc_end_flush(etch_service *s, session *x, bool ok);
void etch__svc_flush_acked(etch_service *s, producer *p, uint64_t id);
sreader *etch__svc_sreader_new(etch_service *s, session *x, bool header,
                               bool stats, bool slices);
int etch__svc_sreader_next(etch_service *s, sreader *r, uint8_t **data,
                           size_t *len);
void etch__svc_sreader_free(sreader *r);
void etch__svc_trace_stats(etch_service *s, const session *x,
                           etch__pb_stream *st);
uint32_t etch__svc_write_period_ms(const session *x);
void etch__svc_write_out(etch_service *s, session *x, bool final);
void etch__svc_answer_enable(etch_service *s, session *x);
void etch__svc_finish_disable(etch_service *s, session *x);
void etch__svc_disable_session(etch_service *s, session *x);
void etch__svc_free_session(etch_service *s, session *x);

#endif /* ETCH_SERVICE_SESSION_H */

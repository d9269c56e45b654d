/*
 * service.h - etch's tracing service, the heart of etchd: Perfetto's
 * producer and consumer ports over Unix sockets (src/ipc), producers'
 * shared memory buffers in Perfetto's layout (src/buffer/smb.h), trace
 * buffers per session (src/buffer/tracebuf.h), traces written as etch
 * writes them (src/buffer/tracefile.h).
 *
 * One thread runs it: etch__service_run() polls the sockets and the
 * sessions' timers until etch__service_stop() is called (from a signal
 * handler too). Everything a producer or consumer sends is checked; a peer
 * that breaks the protocol is disconnected and nothing else is harmed.
 * See docs/service.md.
 */
#ifndef ETCH_SERVICE_H
#define ETCH_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct etch_service etch_service;

typedef struct etch_service_opts {
  const char *producer_socket;
  const char *consumer_socket;
  bool group_rw;        /* sockets 0660 instead of 0600 */
  uint32_t smb_kb;      /* shared memory per producer, default 2048 */
  uint32_t smb_page_kb; /* its page size when the producer has no hint,
                           default 32 */
  uint64_t max_buffer_bytes; /* all sessions' buffers together; default
                                a quarter of physical memory */
  /* Bounds on what connections may hold (0: the default). */
  uint32_t max_conns_per_uid; /* producers and consumers together, per peer
                                 uid; default 512 */
  uint32_t bind_timeout_ms;   /* to bind a port after connecting; 10000 */
  uint32_t frame_timeout_ms;  /* to finish a frame once begun; 10000 */
  uint64_t max_partial_bytes; /* held for frames not received whole, all
                                 connections together; default 16 MiB */
  bool verbose;         /* log connections and sessions to stderr */
} etch_service_opts;

int etch__service_new(const etch_service_opts *o, etch_service **out);
/* Runs until stopped; ETCH_OK after a stop. */
int etch__service_run(etch_service *s);
/* One round: waits at most timeout_ms for sockets or timers. */
int etch__service_poll(etch_service *s, int timeout_ms);
/* Async-signal-safe. The first call makes etch__service_run() end every
 * session cleanly (flushed, written, its consumer answered) and return once
 * their consumers have read and freed them (bounded by the sessions'
 * timeouts plus a grace); a second call makes it return at once. */
void etch__service_stop(etch_service *s);
void etch__service_free(etch_service *s);

#endif /* ETCH_SERVICE_H */

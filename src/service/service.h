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
#include <stddef.h>
#include <stdint.h>

typedef struct etch_service etch_service;

typedef struct etch_service_opts {
  /* Where producers connect: one name or a comma list of them, each a Unix
   * socket (a path, "@NAME"), "HOST:PORT", "[ADDR]:PORT" or
   * "vsock://CID:PORT", as Perfetto's PERFETTO_PRODUCER_SOCK_NAME. A TCP
   * or vsock name reachable from other machines (not loopback) is refused
   * unless allow_remote. */
  const char *producer_socket;
  const char *consumer_socket;
  bool allow_remote;
  /* The RelayPort (for Perfetto's traced_relay and etch's relay) on every
   * producer socket (relay_endpoint), or on those of a comma list
   * (relay_endpoint_on, each one of producer_socket's names). */
  bool relay_endpoint;
  const char *relay_endpoint_on;
  uint32_t max_conns_per_addr; /* a network address's connections; 64 */
  uint64_t net_bytes_per_s; /* a network connection's rate; 64 MiB/s */
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
/* The name producer socket i (of the comma list, from 0) listens on: a
 * TCP name with port 0 as the port it got. ETCH_EINVAL past the last. */
int etch__service_producer_name(const etch_service *s, uint32_t i, char *out,
                                size_t cap);
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

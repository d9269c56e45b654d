/*
 * relay.h - `etchd --relay`: a machine's producers forwarded to a host
 * service on another machine (Perfetto's traced_relay, in etch). relay.c
 * says how.
 */
#ifndef ETCH_ETCHD_RELAY_H
#define ETCH_ETCHD_RELAY_H

#include <stdbool.h>
#include <stdint.h>

typedef struct etch_relay_opts {
  const char *producer_socket; /* the local producers' socket (Unix) */
  const char *host;            /* the host's "HOST:PORT", "[ADDR]:PORT",
                                  "vsock://CID:PORT" */
  const char *machine_name;    /* NULL or "": none */
  bool group_rw;               /* the local socket 0660, not 0600 */
  bool verbose;
  uint32_t sync_period_ms;     /* between clock syncs; 0: 30 000 */
  int64_t clock_offset_ns;     /* the test hook: added to clock reads */
} etch_relay_opts;

/* Serves the local socket and relays until etch__relay_stop(); 0 on a
 * clean stop, 1 (with a message on stderr) when it cannot start. */
int etch__relay_main(const etch_relay_opts *o);
/* Asks the running relay to stop; async-signal-safe. */
void etch__relay_stop(void);

#endif /* ETCH_ETCHD_RELAY_H */

/*
 * ipc.h - Perfetto's IPC over stream sockets: Unix (with descriptors
 * passed beside the bytes), TCP and vsock.
 *
 * The wire: frames of [4-byte little-endian length][IPCFrame], at most
 * ETCH_IPC_MAX_FRAME bytes each (Perfetto's limit: a larger frame is a
 * protocol error and the connection is dropped). An IPCFrame carries a
 * request id and one of BindService (client: which service by name),
 * BindServiceReply (host: the service's id and its methods' ids and names),
 * InvokeMethod (client: service id, method id, the request's bytes,
 * drop_reply), InvokeMethodReply (host: success, has_more for streaming
 * replies, the reply's bytes) or RequestError. A file descriptor travels
 * with SCM_RIGHTS on the bytes of the frame it belongs to; the receiver
 * queues what it gets and the handler of the frame that expects one takes
 * it (etch__ipc_conn_take_fd).
 *
 * A connection here is non-blocking on both sides: etch__ipc_conn_read()
 * takes what the socket has, etch__ipc_conn_next() hands out whole frames
 * (pointers into the receive buffer, valid until the next call), and
 * etch__ipc_conn_send() queues a frame and writes what the socket takes.
 * Whatever the peer sends is checked: a frame too large, a length that
 * lies, bytes that are not an IPCFrame or more descriptors than expected
 * make the connection fail with a message (etch__ipc_conn_error), never
 * read out of bounds. A peer that stops reading makes the queue grow to
 * its limit, then the connection fails: the sender never blocks on it.
 */
#ifndef ETCH_IPC_H
#define ETCH_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/base.h"
#include "pb/pb.h"

#define ETCH_IPC_MAX_FRAME (128u * 1024u)
#define ETCH_IPC_MAX_METHODS 32u
#define ETCH_IPC_MAX_FDS 4u

typedef enum etch_ipc_kind {
  ETCH_IPC_NONE = 0, /* a frame with no message (ignored) */
  ETCH_IPC_BIND,
  ETCH_IPC_BIND_REPLY,
  ETCH_IPC_INVOKE,
  ETCH_IPC_REPLY,
  ETCH_IPC_ERROR,
  ETCH_IPC_PEER_IDENTITY, /* a relay: who it forwards (pid, uid, machine) */
} etch_ipc_kind;

typedef struct etch_ipc_bytes {
  const uint8_t *data;
  uint32_t len;
} etch_ipc_bytes;

typedef struct etch_ipc_method {
  uint32_t id;
  etch_ipc_bytes name;
} etch_ipc_method;

typedef struct etch_ipc_frame {
  uint64_t request_id;
  etch_ipc_kind kind;
  etch_ipc_bytes name; /* BIND: the service; ERROR: the message;
                          PEER_IDENTITY: the machine's name */
  bool success;        /* BIND_REPLY, REPLY */
  bool has_more;       /* REPLY */
  bool drop_reply;     /* INVOKE */
  uint32_t service_id; /* BIND_REPLY, INVOKE */
  uint32_t method_id;  /* INVOKE */
  etch_ipc_bytes body; /* INVOKE: the request; REPLY: the reply */
  uint32_t nmethods;   /* BIND_REPLY */
  /* PEER_IDENTITY: what each field was, when the frame had it */
  bool has_pid, has_uid;
  int32_t pid, uid;
  etch_ipc_bytes machine_id_hint;
  etch_ipc_method methods[ETCH_IPC_MAX_METHODS];
} etch_ipc_frame;

/* Decodes one IPCFrame (without its length prefix); ETCH_EFORMAT with a
 * message for bytes that are not one. Pointers in *f point into data. */
int etch__ipc_frame_decode(const uint8_t *data, size_t len, etch_ipc_frame *f);
/* Appends f as [length][IPCFrame] to b. */
void etch__ipc_frame_encode(etch__pb_buf *b, const etch_ipc_frame *f);
/* Whether bytes equal a C string. */
bool etch__ipc_bytes_eq(etch_ipc_bytes b, const char *s);
/* The id of method `name` in a BIND_REPLY frame, 0 if it has none. */
uint32_t etch__ipc_method_id(const etch_ipc_frame *bind_reply,
                             const char *name);

/* ---- connections ---- */

typedef struct etch_ipc_fdpos {
  uint64_t at; /* stream offset of the frame it goes with */
  int fd;
} etch_ipc_fdpos;

typedef struct etch_ipc_conn {
  int fd;
  /* received bytes: [rx_off, rx_len) not yet handed out; the buffer holds
   * at most one frame of max_frame bytes and its length (a larger one
   * fails the connection), and is let go of when it is emptied */
  uint8_t *rx;
  size_t rx_len, rx_off, rx_cap;
  uint32_t max_frame; /* ETCH_IPC_MAX_FRAME unless the owner lowers it */
  /* when etch__ipc_conn_next() first found the bytes of a frame that is
   * not whole yet (CLOCK_MONOTONIC ns), 0 when no such frame waits */
  uint64_t partial_since_ns;
  int fds[ETCH_IPC_MAX_FDS];
  uint32_t nfds;
  /* queued bytes: [tx_off, tx_len), stream offset tx_base at tx[0] */
  uint8_t *tx;
  size_t tx_len, tx_off, tx_cap, tx_limit;
  uint64_t tx_base;
  etch_ipc_fdpos txfds[ETCH_IPC_MAX_FDS];
  uint32_t ntxfds;
  /* the peer, from SO_PEERCRED on a Unix socket; -1 over a network */
  pid_t peer_pid;
  uid_t peer_uid;
  bool remote;        /* a TCP or vsock peer: no credentials, no fds */
  char peer_addr[64]; /* a remote peer's address (etch__ipc_connect form) */
  bool failed;
  bool eof; /* failed because the peer closed: frames before it still count */
  char err[200];
} etch_ipc_conn;

/* Socket names, read as Perfetto's programs read them. */
typedef enum etch_sock_family {
  ETCH_SOCK_UNIX = 0, /* a path, or "@NAME" for an abstract socket */
  ETCH_SOCK_INET,     /* "HOST:PORT" */
  ETCH_SOCK_INET6,    /* "[ADDR]:PORT" */
  ETCH_SOCK_VSOCK,    /* "vsock://CID:PORT" (or "vsock:CID:PORT") */
} etch_sock_family;

/* The family a socket name means. */
etch_sock_family etch__ipc_family(const char *name);
/* The i-th name of a comma-separated list (as PERFETTO_PRODUCER_SOCK_NAME
 * may hold) into out: false when there is none or it does not fit. */
bool etch__ipc_name_at(const char *list, unsigned i, char *out, size_t cap);
/* Whether a name is reachable only from this machine: a Unix socket, an
 * address of 127.0.0.0/8 or ::1, vsock's local CID (1). */
bool etch__ipc_is_loopback(const char *name);
/* The name a listening or connected socket is bound to ("127.0.0.1:PORT"
 * for TCP, so that a service listening on port 0 can say its port). */
int etch__ipc_local_name(int fd, char *out, size_t cap);

/* Creates a listening socket for a name of any family. A Unix socket file
 * with no one listening is replaced (a live one is ETCH_EBUSY), mode 0600
 * unless `group_rw` (0660); a TCP or vsock port in use is ETCH_EBUSY.
 * Non-blocking, close-on-exec. */
int etch__ipc_listen(const char *path, bool group_rw, int *fd_out);
/* Connects to a name of any family (non-blocking after the connect; TCP
 * without Nagle's delay). */
int etch__ipc_connect(const char *path, int *fd_out);
/* Starts connecting to a name of any family without waiting: ETCH_OK with
 * a non-blocking socket in *fd_out, and *pending when the connection is
 * not made yet (the socket becomes writable when it is, or when it
 * failed: etch__ipc_connect_finish says which). */
int etch__ipc_connect_start(const char *path, int *fd_out, bool *pending);
/* Whether the connection etch__ipc_connect_start began on fd was made
 * (ETCH_OK) or failed (ETCH_EIO with the reason, `path` named in it). */
int etch__ipc_connect_finish(int fd, const char *path);
/* Accepts one connection: ETCH_OK with *fd_out = -1 when none waits;
 * ETCH_ELIMIT when the process or the system is out of file descriptors
 * (EMFILE, ENFILE: the connection still waits), ETCH_EIO on other
 * errors. */
int etch__ipc_accept(int listen_fd, int *fd_out);

/* Takes ownership of a connected socket; reads the peer's credentials (a
 * Unix peer) or its address (a network peer: c->remote). */
void etch__ipc_conn_init(etch_ipc_conn *c, int fd, size_t tx_limit);
/* Closes the socket and every descriptor still queued. */
void etch__ipc_conn_close(etch_ipc_conn *c);
/* Reads what the socket has; ETCH_EIO on end of stream or error (with the
 * reason in c->err), ETCH_OK otherwise (also when nothing was there). */
int etch__ipc_conn_read(etch_ipc_conn *c);
/* 1 with the next whole frame in *f, 0 when none is complete yet, or
 * ETCH_EFORMAT (c->failed, c->err says why) for a frame that is not one.
 * Frames that arrived before the peer closed are still handed out. */
int etch__ipc_conn_next(etch_ipc_conn *c, etch_ipc_frame *f);
/* Bytes of memory the connection holds for a frame it has received only
 * part of (its receive buffer), 0 when no such frame waits. */
ETCH_INLINE size_t etch__ipc_conn_partial_bytes(const etch_ipc_conn *c) {
  return c->partial_since_ns ? c->rx_cap : 0;
}
/* The oldest descriptor received and not yet taken, or -1. */
int etch__ipc_conn_take_fd(etch_ipc_conn *c);
/* Queues frame f (with descriptor `fd` unless it is -1; the connection
 * dups it) and writes what the socket takes. ETCH_EIO when the connection
 * failed or its queue is over its limit. */
int etch__ipc_conn_send(etch_ipc_conn *c, const etch_ipc_frame *f, int fd);
/* Queues n bytes that are whole frames with their length prefixes, as
 * they came (a relay forwards what it received and checked), and writes
 * what the socket takes; ETCH_EIO as etch__ipc_conn_send. */
int etch__ipc_conn_send_bytes(etch_ipc_conn *c, const uint8_t *frame,
                              size_t n);
/* Writes queued bytes; ETCH_EIO when the socket is gone. */
int etch__ipc_conn_flush(etch_ipc_conn *c);
ETCH_INLINE bool etch__ipc_conn_want_write(const etch_ipc_conn *c) {
  return c->tx_off < c->tx_len;
}
/* Client helper: waits up to `timeout_ms` (-1: forever) for the socket,
 * flushing queued bytes and reading what arrives. */
int etch__ipc_conn_wait(etch_ipc_conn *c, int timeout_ms);
/* Sets c->failed with a message; returns ETCH_EIO. */
int etch__ipc_conn_fail(etch_ipc_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The service's socket paths: $PERFETTO_PRODUCER_SOCK_NAME and
 * $PERFETTO_CONSUMER_SOCK_NAME when set (as Perfetto's tools use them),
 * else etch's own under $XDG_RUNTIME_DIR/etch/ or /tmp/etch-$UID/ (the
 * directory made, mode 0700, when `make_dir`). ETCH_EINVAL when a path does
 * not fit `cap`, or when that directory exists and is not the user's own or
 * is writable by group or others (someone else could serve a socket there).
 */
int etch__ipc_default_paths(char *producer, char *consumer, size_t cap,
                            bool make_dir);

/* A client's connect to the service's socket at `path` (the producer's or
 * the consumer's): when `path` is not the one named by Perfetto's variable,
 * the service must run as the user or as root, else ETCH_EINVAL with the
 * reason and no connection. */
int etch__ipc_connect_service(const char *path, bool producer, int *fd_out);

#endif /* ETCH_IPC_H */

/*
 * relay.c - `etchd --relay HOST:PORT`: this machine's producers recorded
 * by a service on another machine, as Perfetto's traced_relay does it, so
 * that either relay works with either host (traced --enable-relay-endpoint
 * or etchd).
 *
 * The relay serves the local producer socket (Unix). For each producer
 * that connects it opens a connection of its own to the host and sends
 * first an IPCFrame.set_peer_identity (request id 0: the producer's pid and
 * uid from SO_PEERCRED, machine_id_hint = this machine's boot id,
 * machine_name), then forwards the frames both ways unchanged. Each frame
 * is read whole and checked before it goes on (ipc.c's framing and
 * decoder): a producer's frame over the limit, bytes that are not an
 * IPCFrame, or a set_peer_identity of its own (a producer claiming to be
 * someone else) close that producer's pair of connections, never the relay.
 * A descriptor a producer sends cannot cross a network and is closed; the
 * host, seeing a network peer, answers use_shmem_emulation and the
 * producer sends its chunks inside CommitData instead.
 *
 * The host may stop reading: a producer is read only while less than
 * RELAY_BACKLOG bytes wait for the host (and the other way round), so
 * memory stays bounded and the producer feels the host's pace. When
 * either side of a pair ends, what was queued for the other is written
 * (for at most RELAY_LINGER_MS), then both close: the producer reconnects
 * as it does when a service goes away, to a host that is back or not.
 *
 * One more connection, the port, binds the host's RelayPort service: it
 * calls InitRelay with this machine's SystemInfo (utsname, page size,
 * cpus, time zone) and SyncClock in rounds (a PING then an UPDATE, each
 * with a snapshot of the builtin clocks), at the start and every
 * sync_period_ms (30 s, traced_relay's period). The host measures the
 * clocks' offsets from them and puts this machine's timestamps on its own
 * timeline. When the port's connection fails it is made again after
 * RELAY_RETRY_MS, doubling to RELAY_RETRY_MAX_MS while the host stays
 * away.
 *
 * ETCH_RELAY_CLOCK_SKEW_NS, a test hook, adds that many ns to every
 * clock the relay reads for SyncClock: a machine whose clocks are off.
 *
 * Nothing waits for the host: connections to it are made without
 * blocking (a host that does not answer costs a producer RELAY_CONNECT_MS,
 * then its connection closes), and the RelayPort gives up on a host that
 * leaves a request unanswered for RELAY_REPLY_MS.
 */
#define _GNU_SOURCE
#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "base/clock.h"
#include "etch/etch.h"
#include "ipc/ipc.h"
#include "pb/pb.h"
#include "proto/ipc.h"

#define RELAY_BACKLOG (1u << 20)          /* read a side while less waits */
#define RELAY_TX_LIMIT (8u << 20)         /* a connection's queue at most */
#define RELAY_MAX_PAIRS 1024u             /* producers served at once */
#define RELAY_LINGER_MS 5000u             /* a closing pair's last writes */
#define RELAY_RETRY_MS 250u               /* the port's first retry */
#define RELAY_RETRY_MAX_MS 30000u         /* and its longest */
#define RELAY_SYNC_PERIOD_MS 30000u       /* traced_relay's period */
#define RELAY_CONNECT_MS 5000u            /* a connect to the host at most */
#define RELAY_REPLY_MS 10000u             /* the host's answer at most */
#define RELAY_SYSTEM_INFO_MAX 2048u

/* Perfetto's BuiltinClock ids. */
enum {
  CLK_REALTIME = 1,
  CLK_REALTIME_COARSE = 2,
  CLK_MONOTONIC = 3,
  CLK_MONOTONIC_COARSE = 4,
  CLK_MONOTONIC_RAW = 5,
  CLK_BOOTTIME = 6,
};

/* SystemInfo and Utsname (system_info.proto). */
enum {
  SI_UTSNAME = 1,
  SI_TRACING_SERVICE_VERSION = 4,
  SI_PAGE_SIZE = 6,
  SI_TIMEZONE_OFF_MINS = 7,
  SI_NUM_CPUS = 8,
  UTS_SYSNAME = 1,
  UTS_VERSION = 2,
  UTS_RELEASE = 3,
  UTS_MACHINE = 4,
};

typedef struct relay_pair {
  etch_ipc_conn local; /* the producer */
  etch_ipc_conn host;  /* its connection to the host */
  bool connecting;     /* the host's connection is not made yet */
  bool closing;        /* a side ended: writing what is left */
  uint64_t since_ns;   /* when connecting or closing began */
  struct relay_pair *next;
} relay_pair;

typedef enum port_state {
  PORT_DOWN,       /* waiting for port_due_ns to connect */
  PORT_CONNECTING, /* the connection is being made */
  PORT_BINDING, /* BindService sent */
  PORT_PING,    /* SyncClock PING sent */
  PORT_UPDATE,  /* SyncClock UPDATE sent */
  PORT_IDLE,    /* synced; the next round at port_due_ns */
} port_state;

typedef struct relay {
  const etch_relay_opts *o;
  int listen_fd;
  relay_pair *pairs;
  uint32_t npairs;
  char hint[128];
  /* the RelayPort client */
  etch_ipc_conn port;
  port_state state;
  uint64_t port_due_ns; /* DOWN: connect then; IDLE: sync then; else:
                           the host must have answered by then */
  uint32_t retry_ms;
  uint32_t svc_id, m_init, m_sync;
  uint64_t sync_req; /* the request id of the SyncClock in flight */
  uint64_t next_req;
  uint64_t syncs; /* rounds finished since the start */
} relay;

static int g_wake[2] = {-1, -1};

void etch__relay_stop(void) {
  if (g_wake[1] >= 0) {
    char c = 1;
    ssize_t n = write(g_wake[1], &c, 1);
    (void)n;
  }
}

static void rlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void rlog(const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "etchd: relay: %s\n", line);
}

/* ---- what the relay says about itself ---- */

/* This machine's boot id (as traced_relay's machine_id_hint), else its
 * host name: what the host tells machines apart by. */
static void machine_hint(char *out, size_t cap) {
  out[0] = 0;
  int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    if (n < 0) n = 0;
    out[n] = 0;
    out[strcspn(out, "\n")] = 0;
  }
  if (!out[0] && gethostname(out, cap - 1) != 0) out[0] = 0;
  out[cap - 1] = 0;
}

static uint64_t clock_read(clockid_t id, int64_t offset) {
  return etch__clock_ns(id) + (uint64_t)offset;
}

/* SyncClockRequest: the phase and the builtin clocks, read one after the
 * other (as close together as they can be). */
static void encode_sync(etch__pb_buf *b, uint32_t phase, int64_t off) {
  static const struct {
    clockid_t id;
    uint32_t builtin;
  } clocks[] = {
      {CLOCK_BOOTTIME, CLK_BOOTTIME},
      {CLOCK_REALTIME_COARSE, CLK_REALTIME_COARSE},
      {CLOCK_MONOTONIC_COARSE, CLK_MONOTONIC_COARSE},
      {CLOCK_REALTIME, CLK_REALTIME},
      {CLOCK_MONOTONIC, CLK_MONOTONIC},
      {CLOCK_MONOTONIC_RAW, CLK_MONOTONIC_RAW},
  };
  enum { N = sizeof clocks / sizeof clocks[0] };
  uint64_t ts[N];
  for (unsigned i = 0; i < N; i++) ts[i] = clock_read(clocks[i].id, off);
  etch__pb_write_varint_field(&b->s, ETCH_SCR_PHASE, phase);
  for (unsigned i = 0; i < N; i++) {
    etch__pb_nested m;
    etch__pb_nested_begin(&b->s, ETCH_SCR_CLOCKS, &m);
    etch__pb_write_varint_field(&b->s, ETCH_SCR_CLOCK_ID, clocks[i].builtin);
    etch__pb_write_varint_field(&b->s, ETCH_SCR_CLOCK_TIMESTAMP, ts[i]);
    etch__pb_nested_end(&b->s, &m);
  }
}

/* InitRelayRequest: this machine's SystemInfo, the fields traced_relay
 * fills on Linux. */
static void encode_init(etch__pb_buf *b) {
  etch__pb_nested si, u;
  etch__pb_nested_begin(&b->s, ETCH_IRR_SYSTEM_INFO, &si);
  struct utsname un;
  if (uname(&un) == 0) {
    etch__pb_nested_begin(&b->s, SI_UTSNAME, &u);
    etch__pb_write_string_field(&b->s, UTS_SYSNAME, un.sysname);
    etch__pb_write_string_field(&b->s, UTS_VERSION, un.version);
    etch__pb_write_string_field(&b->s, UTS_RELEASE, un.release);
    etch__pb_write_string_field(&b->s, UTS_MACHINE, un.machine);
    etch__pb_nested_end(&b->s, &u);
  }
  etch__pb_write_string_field(&b->s, SI_TRACING_SERVICE_VERSION,
                              "etchd " ETCH_VERSION_STRING);
  time_t now = time(NULL);
  struct tm tm;
  if (localtime_r(&now, &tm))
    etch__pb_write_varint_field(
        &b->s, SI_TIMEZONE_OFF_MINS,
        (uint64_t)(int64_t)(tm.tm_gmtoff / 60)); /* int32: sign-extended */
  long page = sysconf(_SC_PAGESIZE), cpus = sysconf(_SC_NPROCESSORS_CONF);
  if (page > 0) etch__pb_write_varint_field(&b->s, SI_PAGE_SIZE, (uint64_t)page);
  if (cpus > 0) etch__pb_write_varint_field(&b->s, SI_NUM_CPUS, (uint64_t)cpus);
  etch__pb_nested_end(&b->s, &si);
}

/* The frame that comes first on every connection to the host. */
static int send_identity(relay *r, etch_ipc_conn *c, int32_t pid,
                         int32_t uid) {
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.request_id = 0;
  f.kind = ETCH_IPC_PEER_IDENTITY;
  f.has_pid = pid > 0;
  f.pid = pid;
  f.has_uid = true;
  f.uid = uid;
  f.machine_id_hint.data = (const uint8_t *)r->hint;
  f.machine_id_hint.len = (uint32_t)strlen(r->hint);
  const char *name = r->o->machine_name ? r->o->machine_name : "";
  f.name.data = (const uint8_t *)name;
  f.name.len = (uint32_t)strlen(name);
  return etch__ipc_conn_send(c, &f, -1);
}

/* Starts a connection to the host in c; *pending while it is being made
 * (then the socket becomes writable: connected() says how it went). */
static int connect_host(relay *r, etch_ipc_conn *c, bool *pending) {
  int fd;
  if (etch__ipc_connect_start(r->o->host, &fd, pending) != ETCH_OK)
    return ETCH_EIO;
  etch__ipc_conn_init(c, fd, RELAY_TX_LIMIT);
  return ETCH_OK;
}

static uint64_t after_ms(uint32_t ms) {
  return etch__monotonic_ns() + (uint64_t)ms * 1000000u;
}

/* ---- the RelayPort client ---- */

static void port_down(relay *r, const char *why) {
  /* bound once: the host was there, try again soon */
  bool was_up = r->state == PORT_PING || r->state == PORT_UPDATE ||
                r->state == PORT_IDLE;
  if (r->port.fd >= 0) {
    if (why) rlog("the host's RelayPort: %s; again in %u ms", why,
                  was_up ? RELAY_RETRY_MS : r->retry_ms);
    etch__ipc_conn_close(&r->port);
  }
  r->port.fd = -1;
  if (was_up) r->retry_ms = RELAY_RETRY_MS;
  r->state = PORT_DOWN;
  r->port_due_ns = after_ms(r->retry_ms);
  if (!was_up) {
    r->retry_ms *= 2;
    if (r->retry_ms > RELAY_RETRY_MAX_MS) r->retry_ms = RELAY_RETRY_MAX_MS;
  }
}

static int port_invoke(relay *r, uint32_t method, const etch__pb_buf *body,
                       uint64_t *req) {
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.request_id = ++r->next_req;
  f.kind = ETCH_IPC_INVOKE;
  f.service_id = r->svc_id;
  f.method_id = method;
  f.body.data = etch__pb_buf_data(body);
  f.body.len = (uint32_t)etch__pb_buf_len(body);
  if (req) *req = f.request_id;
  return etch__ipc_conn_send(&r->port, &f, -1);
}

static int port_sync(relay *r, uint32_t phase) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 256, RELAY_SYSTEM_INFO_MAX);
  encode_sync(&b, phase, r->o->clock_offset_ns);
  int rc = b.s.failed ? ETCH_ENOMEM : port_invoke(r, r->m_sync, &b,
                                                  &r->sync_req);
  etch__pb_buf_free(&b);
  if (rc == ETCH_OK) {
    r->state = phase == ETCH_SCR_PHASE_PING ? PORT_PING : PORT_UPDATE;
    r->port_due_ns = after_ms(RELAY_REPLY_MS);
  }
  return rc;
}

/* The port's connection is made: who it is, and BindService. */
static void port_connected(relay *r) {
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  r->next_req = 0; /* per connection: BindService is 1 */
  f.request_id = ++r->next_req;
  f.kind = ETCH_IPC_BIND;
  f.name.data = (const uint8_t *)ETCH_IPC_RELAY_PORT;
  f.name.len = (uint32_t)strlen(ETCH_IPC_RELAY_PORT);
  r->state = PORT_BINDING;
  r->port_due_ns = after_ms(RELAY_REPLY_MS);
  if (send_identity(r, &r->port, (int32_t)getpid(), (int32_t)geteuid()) ||
      etch__ipc_conn_send(&r->port, &f, -1))
    port_down(r, r->port.err);
}

static void port_connect(relay *r) {
  bool pending;
  if (connect_host(r, &r->port, &pending) != ETCH_OK) {
    r->port.fd = -1;
    if (r->o->verbose)
      rlog("cannot reach the host %s: %s", r->o->host, etch_last_error());
    port_down(r, NULL);
    return;
  }
  r->state = PORT_CONNECTING;
  r->port_due_ns = after_ms(RELAY_CONNECT_MS);
  if (!pending) port_connected(r);
}

static void port_frame(relay *r, const etch_ipc_frame *f) {
  if (r->state == PORT_BINDING && f->kind == ETCH_IPC_BIND_REPLY) {
    r->svc_id = f->service_id;
    r->m_init = etch__ipc_method_id(f, "InitRelay");
    r->m_sync = etch__ipc_method_id(f, "SyncClock");
    if (!f->success || !r->m_init || !r->m_sync) {
      port_down(r, "the host has no RelayPort service (is it traced "
                   "--enable-relay-endpoint?)");
      return;
    }
    etch__pb_buf b;
    etch__pb_buf_init(&b, 512, RELAY_SYSTEM_INFO_MAX);
    encode_init(&b);
    int rc = b.s.failed ? ETCH_ENOMEM : port_invoke(r, r->m_init, &b, NULL);
    etch__pb_buf_free(&b);
    if (rc != ETCH_OK || port_sync(r, ETCH_SCR_PHASE_PING) != ETCH_OK)
      port_down(r, r->port.err[0] ? r->port.err : "cannot send InitRelay");
    else if (r->o->verbose)
      rlog("bound the host's RelayPort, InitRelay sent");
    return;
  }
  if (f->kind == ETCH_IPC_ERROR || (f->kind == ETCH_IPC_REPLY && !f->success)) {
    port_down(r, "the host refused a request");
    return;
  }
  if (f->kind != ETCH_IPC_REPLY || f->request_id != r->sync_req) return;
  if (r->state == PORT_PING) {
    if (port_sync(r, ETCH_SCR_PHASE_UPDATE) != ETCH_OK)
      port_down(r, r->port.err);
  } else if (r->state == PORT_UPDATE) {
    r->state = PORT_IDLE;
    r->port_due_ns = after_ms(r->o->sync_period_ms ? r->o->sync_period_ms
                                                   : RELAY_SYNC_PERIOD_MS);
    r->retry_ms = RELAY_RETRY_MS;
    /* Said for each connection's first round (with -v for every one):
     * tests and people wait for it. */
    r->syncs++;
    if (r->o->verbose || r->sync_req == 4) /* the connection's first */
      rlog("clocks synced with the host");
  }
}

static void port_io(relay *r, short revents) {
  if (r->state == PORT_CONNECTING) {
    if (etch__ipc_connect_finish(r->port.fd, r->o->host) != ETCH_OK) {
      if (r->o->verbose) rlog("%s", etch_last_error());
      etch__ipc_conn_close(&r->port);
      port_down(r, NULL);
      return;
    }
    port_connected(r);
    return;
  }
  if (revents & POLLOUT) etch__ipc_conn_flush(&r->port);
  if (revents & (POLLIN | POLLHUP | POLLERR)) etch__ipc_conn_read(&r->port);
  etch_ipc_frame f;
  int n;
  while (r->port.fd >= 0 && (n = etch__ipc_conn_next(&r->port, &f)) == 1)
    port_frame(r, &f);
  if (r->port.fd >= 0 && r->port.failed)
    port_down(r, r->port.eof ? "the host went away" : r->port.err);
}

/* ---- producers ---- */

static void pair_free(relay *r, relay_pair **pp) {
  relay_pair *p = *pp;
  *pp = p->next;
  etch__ipc_conn_close(&p->local);
  if (p->host.fd >= 0) etch__ipc_conn_close(&p->host);
  free(p);
  r->npairs--;
}

static void pair_closing(relay *r, relay_pair *p, const char *side,
                         const etch_ipc_conn *c) {
  if (p->closing) return;
  p->closing = true;
  p->since_ns = etch__monotonic_ns();
  if (r->o->verbose || !c->eof)
    rlog("producer pid %ld: %s%s; its connections close",
         (long)p->local.peer_pid, side, c->eof ? "closed" : c->err);
}

/* The pair's host connection is made: the producer's identity first. */
static int pair_connected(relay *r, relay_pair *p) {
  p->connecting = false;
  p->host.remote = true;
  return send_identity(r, &p->host, (int32_t)p->local.peer_pid,
                       (int32_t)p->local.peer_uid);
}

static void accept_producers(relay *r) {
  for (;;) {
    int fd;
    if (etch__ipc_accept(r->listen_fd, &fd) != ETCH_OK || fd < 0) return;
    if (r->npairs >= RELAY_MAX_PAIRS) {
      rlog("%u producers already: one more refused", r->npairs);
      close(fd);
      continue;
    }
    relay_pair *p = etch__calloc(1, sizeof *p);
    if (!p) {
      close(fd);
      continue;
    }
    etch__ipc_conn_init(&p->local, fd, RELAY_TX_LIMIT);
    if (connect_host(r, &p->host, &p->connecting) != ETCH_OK) {
      /* As traced_relay: no host, no producer; it tries again later. */
      rlog("producer pid %ld: cannot reach the host %s: %s",
           (long)p->local.peer_pid, r->o->host, etch_last_error());
      etch__ipc_conn_close(&p->local);
      free(p);
      continue;
    }
    p->since_ns = etch__monotonic_ns();
    if (!p->connecting && pair_connected(r, p) != ETCH_OK) {
      etch__ipc_conn_close(&p->local);
      etch__ipc_conn_close(&p->host);
      free(p);
      continue;
    }
    p->next = r->pairs;
    r->pairs = p;
    r->npairs++;
    if (r->o->verbose)
      rlog("producer pid %ld uid %ld connected", (long)p->local.peer_pid,
           (long)p->local.peer_uid);
  }
}

/* Hands `from`'s whole frames to `to`, unchanged, checking each;
 * `local` when `from` is the producer. */
static void forward(relay *r, relay_pair *p, etch_ipc_conn *from,
                    etch_ipc_conn *to, bool local) {
  for (;;) {
    size_t at = from->rx_off;
    etch_ipc_frame f;
    int n = etch__ipc_conn_next(from, &f);
    if (n <= 0) break;
    if (local) {
      int fd;
      while ((fd = etch__ipc_conn_take_fd(from)) >= 0) {
        if (r->o->verbose)
          rlog("producer pid %ld sent a descriptor: it cannot go over the "
               "network (closed)",
               (long)p->local.peer_pid);
        close(fd);
      }
      if (f.kind == ETCH_IPC_PEER_IDENTITY) {
        etch__ipc_conn_fail(from, "sent a set_peer_identity of its own");
        break;
      }
    }
    if (etch__ipc_conn_send_bytes(to, from->rx + at, from->rx_off - at) !=
        ETCH_OK)
      break;
  }
}

static void pair_io(relay *r, relay_pair *p, short lrev, short hrev) {
  if (p->connecting) {
    bool late = etch__monotonic_ns() - p->since_ns >
                (uint64_t)RELAY_CONNECT_MS * 1000000u;
    if (!hrev && !late) return;
    if (late)
      etch__ipc_conn_fail(&p->host, "no connection to the host %s in %u ms",
                          r->o->host, RELAY_CONNECT_MS);
    else if (etch__ipc_connect_finish(p->host.fd, r->o->host) != ETCH_OK)
      etch__ipc_conn_fail(&p->host, "%s", etch_last_error());
    else if (pair_connected(r, p) != ETCH_OK)
      etch__ipc_conn_fail(&p->host, "cannot send to the host");
    if (p->host.failed) {
      p->connecting = false;
      pair_closing(r, p, "its host connection: ", &p->host);
    }
    return;
  }
  if (lrev & POLLOUT) etch__ipc_conn_flush(&p->local);
  if (hrev & POLLOUT) etch__ipc_conn_flush(&p->host);
  if (p->closing) return;
  if (lrev & (POLLIN | POLLHUP | POLLERR)) {
    etch__ipc_conn_read(&p->local);
    forward(r, p, &p->local, &p->host, true);
  }
  if (hrev & (POLLIN | POLLHUP | POLLERR)) {
    etch__ipc_conn_read(&p->host);
    forward(r, p, &p->host, &p->local, false);
  }
  if (p->local.failed)
    pair_closing(r, p, "", &p->local);
  else if (p->host.failed)
    pair_closing(r, p, "its host connection: ", &p->host);
}

/* ---- the loop ---- */

static int open_listener(relay *r) {
  const etch_relay_opts *o = r->o;
  if (etch__ipc_family(o->producer_socket) != ETCH_SOCK_UNIX) {
    fprintf(stderr,
            "etchd: relay: the producers' socket '%s' must be a Unix socket "
            "(the relay tells the host who its producers are)\n",
            o->producer_socket);
    return 1;
  }
  etch_sock_family hf = etch__ipc_family(o->host);
  if (hf == ETCH_SOCK_UNIX) {
    fprintf(stderr,
            "etchd: relay: the host '%s' is not HOST:PORT, [ADDR]:PORT or "
            "vsock://CID:PORT\n",
            o->host);
    return 1;
  }
  if (etch__ipc_listen(o->producer_socket, o->group_rw, &r->listen_fd) !=
      ETCH_OK) {
    fprintf(stderr, "etchd: relay: %s\n", etch_last_error());
    return 1;
  }
  return 0;
}

int etch__relay_main(const etch_relay_opts *o) {
  relay r;
  memset(&r, 0, sizeof r);
  r.o = o;
  r.listen_fd = -1;
  r.port.fd = -1;
  r.retry_ms = RELAY_RETRY_MS;
  machine_hint(r.hint, sizeof r.hint);
  if (open_listener(&r)) return 1;
  if (pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    fprintf(stderr, "etchd: relay: pipe: %s\n", strerror(errno));
    close(r.listen_fd);
    return 1;
  }
  rlog("producers on %s, forwarded to %s as machine '%s'%s",
       o->producer_socket, o->host,
       o->machine_name && *o->machine_name ? o->machine_name : "",
       etch__ipc_is_loopback(o->host)
           ? ""
           : " (over the network, unencrypted: see docs/service.md)");
  if (o->clock_offset_ns)
    rlog("test hook: clock reads offset by %lld ns",
         (long long)o->clock_offset_ns);
  port_connect(&r);
  struct pollfd *fds = NULL;
  size_t cap = 0;
  bool stop = false;
  while (!stop) {
    size_t want = 3 + 2 * (size_t)r.npairs;
    if (want > cap) {
      struct pollfd *n = etch__realloc(fds, want * sizeof *fds);
      if (!n) {
        rlog("out of memory");
        break;
      }
      fds = n;
      cap = want;
    }
    size_t nf = 0;
    fds[nf++] = (struct pollfd){g_wake[0], POLLIN, 0};
    fds[nf++] = (struct pollfd){r.listen_fd, POLLIN, 0};
    fds[nf++] = (struct pollfd){r.port.fd, (short)(r.port.fd >= 0 ? POLLIN : 0), 0};
    if (r.port.fd >= 0 && (r.state == PORT_CONNECTING ||
                           etch__ipc_conn_want_write(&r.port)))
      fds[2].events = r.state == PORT_CONNECTING ? POLLOUT
                                                 : (short)(POLLIN | POLLOUT);
    uint64_t now = etch__monotonic_ns();
    for (relay_pair *p = r.pairs; p; p = p->next) {
      short le = 0, he = 0;
      if (p->connecting) {
        he = POLLOUT; /* the producer waits until the host is there */
      } else if (!p->closing) {
        if (p->host.tx_len - p->host.tx_off < RELAY_BACKLOG) le |= POLLIN;
        if (p->local.tx_len - p->local.tx_off < RELAY_BACKLOG) he |= POLLIN;
      }
      if (etch__ipc_conn_want_write(&p->local) && !p->local.failed)
        le |= POLLOUT;
      if (!p->connecting && etch__ipc_conn_want_write(&p->host) &&
          !p->host.failed)
        he |= POLLOUT;
      fds[nf++] = (struct pollfd){p->local.fd, le, 0};
      fds[nf++] = (struct pollfd){p->host.fd, he, 0};
    }
    /* the port's next step, and at least every 100 ms while a pair
     * connects or closes (their bounds) */
    int timeout = r.port_due_ns > now
                      ? (int)((r.port_due_ns - now) / 1000000u) + 1
                      : 0;
    for (relay_pair *p = r.pairs; p; p = p->next)
      if ((p->closing || p->connecting) && timeout > 100) timeout = 100;
    int n = poll(fds, nf, timeout);
    if (n < 0 && errno != EINTR) {
      rlog("poll: %s", strerror(errno));
      break;
    }
    if (n > 0 && (fds[0].revents & POLLIN)) stop = true;
    /* The pairs first, in the order they were polled: accepting adds
     * pairs at the head. */
    size_t i = 3;
    for (relay_pair **pp = &r.pairs; *pp;) {
      relay_pair *p = *pp;
      short lrev = n > 0 ? fds[i].revents : 0;
      short hrev = n > 0 ? fds[i + 1].revents : 0;
      i += 2;
      pair_io(&r, p, lrev, hrev);
      if (p->closing) {
        bool drained =
            (!etch__ipc_conn_want_write(&p->local) || p->local.failed) &&
            (!etch__ipc_conn_want_write(&p->host) || p->host.failed);
        if (drained || etch__monotonic_ns() - p->since_ns >
                           (uint64_t)RELAY_LINGER_MS * 1000000u) {
          pair_free(&r, pp);
          continue;
        }
      }
      pp = &p->next;
    }
    if (r.port.fd >= 0 && n > 0 && fds[2].revents) port_io(&r, fds[2].revents);
    now = etch__monotonic_ns();
    if (now < r.port_due_ns) {
    } else if (r.state == PORT_DOWN) {
      port_connect(&r);
    } else if (r.state == PORT_IDLE) {
      if (port_sync(&r, ETCH_SCR_PHASE_PING) != ETCH_OK)
        port_down(&r, r.port.err);
    } else {
      port_down(&r, r.state == PORT_CONNECTING ? "no connection in time"
                                               : "the host did not answer");
    }
    if (n > 0 && (fds[1].revents & POLLIN)) accept_producers(&r);
  }
  free(fds);
  while (r.pairs) pair_free(&r, &r.pairs);
  if (r.port.fd >= 0) etch__ipc_conn_close(&r.port);
  close(r.listen_fd);
  if (o->producer_socket[0] != '@') unlink(o->producer_socket);
  close(g_wake[0]);
  close(g_wake[1]);
  g_wake[0] = g_wake[1] = -1;
  rlog("stopped");
  return 0;
}

/*
 * loop.c - the tracing service's one thread (see service.h and
 * docs/service.md): the poll loop over the listening sockets, the
 * connections and the sessions' timers; accepting connections within
 * their bounds (per uid, out of descriptors, frames received in part,
 * binding and frames in time); making, running, stopping and freeing the
 * service. The top of the service's layers (service_int.h draws them):
 * the ports are in producer.c and consumer.c, a session's life in
 * session.c, the log and the connections' counts in core.c.
 */
#define _GNU_SOURCE
#include "service/service.h"

#include "base/envvars.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/utsname.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "service/machine.h"
#include "service/ports.h"
#include "service/service_int.h"
#include "service/session.h"

/* ---- connections ---- */

/* Whether process `pid` sees pids as this one does (the same pid
 * namespace): then its descriptors must name its own pid. Unknown: no. */
static bool same_pid_namespace(pid_t pid) {
  char path[64];
  struct stat a, b;
  snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)pid);
  return pid > 0 && stat("/proc/self/ns/pid", &a) == 0 &&
         stat(path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

/* Out of file descriptors: the connections waiting are taken with the
 * spare descriptor and closed at once, so that their clients see the
 * service close instead of waiting on a connection nobody takes; and the
 * listening sockets, which stay readable, are left alone for a while
 * instead of being polled (etchd would spin on them). */
static void out_of_fds(etch_service *s, int lfd, const char *kind) {
  char why[160];
  snprintf(why, sizeof why, "%s", etch_last_error());
  uint32_t shed = 0;
  while (s->spare_fd >= 0 && shed < MAX_SHED) {
    close(s->spare_fd);
    int fd = -1;
    etch__ipc_accept(lfd, &fd);
    if (fd >= 0) {
      close(fd);
      shed++;
    }
    s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
  }
  s->accept_resume_ns =
      etch__monotonic_ns() + (uint64_t)ACCEPT_BACKOFF_MS * 1000000ull;
  etch__svc_warnf(
      s, W_FDS,
      "out of file descriptors (%s): refused %u %s connection(s), "
      "accepting none for %u ms%s",
      why, shed, kind, ACCEPT_BACKOFF_MS,
      s->spare_fd < 0 ? " (no spare descriptor to refuse them with)" : "");
}

static void accept_all(etch_service *s, bool is_producer, uint32_t li) {
  int lfd = is_producer ? s->lp[li] : s->lc;
  const char *kind = is_producer ? "producer" : "consumer";
  if (s->spare_fd < 0) s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  for (;;) {
    int fd;
    int rc = etch__ipc_accept(lfd, &fd);
    if (rc == ETCH_ELIMIT) {
      out_of_fds(s, lfd, kind);
      return;
    }
    if (rc != ETCH_OK) {
      s->accept_resume_ns =
          etch__monotonic_ns() + (uint64_t)ACCEPT_BACKOFF_MS * 1000000ull;
      etch__svc_warnf(s, W_ACCEPT, "%s: accepting no connections for %u ms",
                      etch_last_error(), ACCEPT_BACKOFF_MS);
      return;
    }
    if (fd < 0) return;
    etch_ipc_conn conn;
    etch__ipc_conn_init(&conn, fd, TX_LIMIT);
    conn.max_frame = UNBOUND_MAX_FRAME;
    uint32_t *n = etch__svc_peer_conns(s, &conn, true);
    if (n && conn.remote && *n >= s->o.max_conns_per_addr) {
      etch__svc_warnf(s, W_UID,
                      "refused a %s connection from %s: its address has %u "
                      "connections, the limit (--max-conns-per-addr)",
                      kind, conn.peer_addr, *n);
      etch__ipc_conn_close(&conn);
      continue;
    }
    if (!n || (!conn.remote && *n >= s->o.max_conns_per_uid)) {
      if (n)
        etch__svc_warnf(
            s, W_UID,
            "refused a %s connection from uid %u (pid %d): uid %u has %u "
            "connections, the limit (--max-conns-per-uid)",
            kind, (unsigned)conn.peer_uid, (int)conn.peer_pid,
            (unsigned)conn.peer_uid, *n);
      etch__ipc_conn_close(&conn);
      continue;
    }
    (*n)++;
    uint64_t now = etch__monotonic_ns();
    if (is_producer) {
      producer *p = (producer *)etch__calloc(1, sizeof *p);
      if (!p) {
        etch__svc_conn_forget(s, &conn, 0);
        etch__ipc_conn_close(&conn);
        return;
      }
      p->id = ++s->next_producer;
      p->smb_fd = -1;
      snprintf(p->name, sizeof p->name, "producer-%u", p->id);
      p->conn = conn;
      p->same_pidns = !conn.remote && same_pid_namespace(conn.peer_pid);
      p->accepted_ns = now;
      p->relay_port = s->lp_relay[li];
      p->emulated = conn.remote;
      p->next = s->producers;
      s->producers = p;
      if (conn.remote) {
        etch__svc_logf(s, "producer %u: connected from %s (on %s)", p->id,
                       conn.peer_addr, s->lp_name[li]);
        /* Its machine is its address's until a relay says otherwise;
         * without room for one, it goes. */
        if (etch__svc_machine_of_address(s, p) != ETCH_OK)
          etch__ipc_conn_fail(&p->conn, "%s", etch_last_error());
      }
    } else {
      consumer *c = (consumer *)etch__calloc(1, sizeof *c);
      if (!c) {
        etch__svc_conn_forget(s, &conn, 0);
        etch__ipc_conn_close(&conn);
        return;
      }
      c->id = ++s->next_consumer;
      c->conn = conn;
      c->accepted_ns = now;
      c->next = s->consumers;
      s->consumers = c;
    }
  }
}

/* ---- timers ---- */

/* The sessions' deadlines, flushes, stops, ClearIncrementalState and
 * writes into files that are due; the next time one will be. */
static uint64_t timers(etch_service *s) {
  uint64_t now = etch__monotonic_ns(), next = UINT64_MAX;
  for (session *x = s->sessions, *nx; x; x = nx) {
    nx = x->next;
    if (x->state == S_STARTED && x->deadline_ns && now >= x->deadline_ns) {
      x->deadline_ns = 0;
      etch__svc_disable_session(s, x);
    }
    if (x->flushing && now >= x->flush_deadline_ns)
      etch__svc_end_flush(s, x, false);
    if (x->state == S_STOPPING && !x->flushing && now >= x->stop_deadline_ns)
      etch__svc_finish_disable(s, x);
    if (x->state == S_STARTED && x->cfg->clear_period_ms) {
      if (!x->next_clear_ns) {
        x->next_clear_ns = now + (uint64_t)x->cfg->clear_period_ms * 1000000ull;
      } else if (now >= x->next_clear_ns) {
        etch__svc_clear_incremental_state(s, x);
        x->next_clear_ns = now + (uint64_t)x->cfg->clear_period_ms * 1000000ull;
      }
    }
    bool writing = x->out.fd >= 0 && (x->state == S_STARTED || x->draining);
    if (writing && now >= x->next_write_ns) {
      etch__svc_write_out(s, x, x->draining);
      x->next_write_ns =
          now +
          (uint64_t)(x->pend ? FILE_RETRY_MS : etch__svc_write_period_ms(x)) *
              1000000ull;
      if (x->draining && (x->out_complete || x->out_dead)) {
        x->draining = false;
        etch__svc_answer_enable(s, x);
      } else if (x->state == S_STARTED && (x->reached_max || x->out_dead)) {
        etch__svc_disable_session(s, x);
      }
    }
    uint64_t t[5] = {x->state == S_STARTED ? x->deadline_ns : 0,
                     x->flushing ? x->flush_deadline_ns : 0,
                     x->state == S_STOPPING ? x->stop_deadline_ns : 0,
                     x->out.fd >= 0 && (x->state == S_STARTED || x->draining)
                         ? x->next_write_ns
                         : 0,
                     x->state == S_STARTED ? x->next_clear_ns : 0};
    for (int i = 0; i < 5; i++)
      if (t[i] && t[i] < next) next = t[i];
  }
  return next;
}

/* Whether connection c has held its descriptor and memory too long without
 * doing its part: not bound to a port within bind_timeout_ms of its
 * accept, or a frame begun and not finished within frame_timeout_ms (then
 * it is failed with the reason). Else *next gets its deadline, if any. */
static bool conn_overdue(const etch_service *s, etch_ipc_conn *c, bool bound,
                         uint64_t accepted_ns, uint64_t now, uint64_t *next) {
  if (c->failed) return false;
  if (!bound) {
    uint64_t t = accepted_ns + (uint64_t)s->o.bind_timeout_ms * 1000000ull;
    if (now >= t) {
      etch__ipc_conn_fail(c, "bound no port within %u ms of connecting",
                          s->o.bind_timeout_ms);
      return true;
    }
    if (t < *next) *next = t;
  }
  if (c->partial_since_ns) {
    uint64_t t =
        c->partial_since_ns + (uint64_t)s->o.frame_timeout_ms * 1000000ull;
    if (now >= t) {
      etch__ipc_conn_fail(c,
                          "sent %zu bytes of a frame and not the rest within "
                          "%u ms",
                          c->rx_len - c->rx_off, s->o.frame_timeout_ms);
      return true;
    }
    if (t < *next) *next = t;
  }
  return false;
}

/* Closes the connections that are overdue (conn_overdue); the next time
 * one will be. */
static uint64_t conn_timers(etch_service *s) {
  uint64_t now = etch__monotonic_ns(), next = UINT64_MAX;
  for (producer *p = s->producers, *np; p; p = np) {
    np = p->next;
    if (conn_overdue(s, &p->conn, p->bound, p->accepted_ns, now, &next))
      etch__svc_drop_producer(s, p, p->conn.err);
  }
  for (consumer *c = s->consumers, *nc; c; c = nc) {
    nc = c->next;
    if (conn_overdue(s, &c->conn, c->bound, c->accepted_ns, now, &next))
      etch__svc_drop_consumer(s, c, c->conn.err);
  }
  return next;
}

/* The memory held for frames received in part, by all connections
 * together, is bounded: over the bound, the connections whose frames have
 * waited longest are closed. (Each connection holds at most one frame's
 * worth: see etch_ipc_conn.) */
static void partial_budget(etch_service *s) {
  while (s->partial_bytes > s->o.max_partial_bytes) {
    producer *op = NULL;
    consumer *oc = NULL;
    uint64_t oldest = UINT64_MAX;
    for (producer *p = s->producers; p; p = p->next)
      if (p->partial && p->conn.partial_since_ns < oldest) {
        oldest = p->conn.partial_since_ns;
        op = p;
      }
    for (consumer *c = s->consumers; c; c = c->next)
      if (c->partial && c->conn.partial_since_ns < oldest) {
        oldest = c->conn.partial_since_ns;
        oc = c;
        op = NULL;
      }
    if (!op && !oc) return;
    etch_ipc_conn *c = op ? &op->conn : &oc->conn;
    etch__svc_warnf(
        s, W_PARTIAL,
        "frames received in part hold %llu KiB, more than the limit of "
        "%llu KiB (--max-partial-frames-mb): closed %s %u (uid %u, pid "
        "%d), whose frame waited longest",
        (unsigned long long)(s->partial_bytes >> 10),
        (unsigned long long)(s->o.max_partial_bytes >> 10),
        op ? "producer" : "consumer", op ? op->id : oc->id,
        (unsigned)c->peer_uid, (int)c->peer_pid);
    c->eof = false;
    etch__ipc_conn_fail(c,
                        "its frame received in part was the oldest when such "
                        "frames held more than the limit");
    if (op)
      etch__svc_drop_producer(s, op, c->err);
    else
      etch__svc_drop_consumer(s, oc, c->err);
  }
}

/* ---- the loop ---- */

int etch__service_poll(etch_service *s, int timeout_ms) {
  uint64_t next = timers(s);
  uint64_t cnext = conn_timers(s);
  if (cnext < next) next = cnext;
  /* Out of descriptors a moment ago: the listening sockets wait. */
  bool paused = false;
  if (s->accept_resume_ns) {
    if (etch__monotonic_ns() < s->accept_resume_ns) {
      paused = true;
      if (s->accept_resume_ns < next) next = s->accept_resume_ns;
    } else {
      s->accept_resume_ns = 0;
    }
  }
  /* Network producers over their rate wait until their next second. */
  uint64_t tnow = etch__monotonic_ns();
  for (producer *p = s->producers; p; p = p->next)
    if (p->throttled_until_ns) {
      if (p->throttled_until_ns <= tnow)
        p->throttled_until_ns = 0;
      else if (p->throttled_until_ns < next)
        next = p->throttled_until_ns;
    }
  if (next != UINT64_MAX) {
    uint64_t now = etch__monotonic_ns();
    int64_t ms = next > now ? (int64_t)((next - now) / 1000000ull) + 1 : 0;
    if (timeout_ms < 0 || ms < timeout_ms) timeout_ms = (int)ms;
  }
  uint32_t nl = s->nlp + 1; /* the listening sockets, the consumers' last */
  uint32_t n = nl;
  for (producer *p = s->producers; p; p = p->next) n++;
  for (consumer *c = s->consumers; c; c = c->next) n++;
  if (!s->pfds) {
    s->pfds = s->pfds_in;
    s->pids = s->pids_in;
    s->pcap = ETCH_ARRAY_SIZE(s->pfds_in);
  }
  if (n > s->pcap) {
    /* Out of memory the service goes on: this round it polls the
     * connections the set holds (the others wait for the next rounds),
     * and says so once. */
    uint32_t cap = n * 2;
    struct pollfd *f = (struct pollfd *)etch__malloc(cap * sizeof *f);
    uint32_t *d = (uint32_t *)etch__malloc(cap * sizeof *d);
    if (f && d) {
      if (s->pfds != s->pfds_in) {
        free(s->pfds);
        free(s->pids);
      }
      s->pfds = f;
      s->pids = d;
      s->pcap = cap;
      s->poll_oom_said = false;
    } else {
      free(f);
      free(d);
      if (!s->poll_oom_said)
        etch__svc_logf(s, "out of memory for the poll set of %u connections: "
                       "polling %u of them until there is", n, s->pcap);
      s->poll_oom_said = true;
      n = s->pcap;
    }
  }
  struct pollfd *fds = s->pfds;
  uint32_t *ids = s->pids;
  memset(fds, 0, n * sizeof *fds);
  memset(ids, 0, n * sizeof *ids);
  for (uint32_t i = 0; i < s->nlp; i++) {
    fds[i].fd = paused ? -1 : s->lp[i]; /* poll skips a negative one */
    fds[i].events = POLLIN;
  }
  fds[s->nlp].fd = paused ? -1 : s->lc;
  fds[s->nlp].events = POLLIN;
  uint32_t k = nl;
  for (producer *p = s->producers; p && k < n; p = p->next, k++) {
    fds[k].fd = p->conn.fd;
    fds[k].events =
        (short)((p->throttled_until_ns ? 0 : POLLIN) |
                (etch__ipc_conn_want_write(&p->conn) ? POLLOUT : 0));
    ids[k] = p->id;
  }
  uint32_t first_consumer = k;
  for (consumer *c = s->consumers; c && k < n; c = c->next, k++) {
    fds[k].fd = c->conn.fd;
    fds[k].events = POLLIN | (etch__ipc_conn_want_write(&c->conn) || c->reader
                                  ? POLLOUT : 0);
    ids[k] = c->id;
  }
  int r = poll(fds, n, timeout_ms);
  if (r > 0) {
    for (uint32_t i = 0; i < s->nlp; i++)
      if (fds[i].revents & POLLIN) accept_all(s, true, i);
    if (fds[s->nlp].revents & POLLIN) accept_all(s, false, 0);
    for (uint32_t i = nl; i < n; i++) {
      if (!fds[i].revents) continue;
      if (i < first_consumer) {
        producer *p = etch__svc_find_producer(s, ids[i]);
        if (p) etch__svc_service_producer(s, p, fds[i].revents);
      } else {
        consumer *c = etch__svc_find_consumer(s, ids[i]);
        if (c) etch__svc_service_consumer(s, c, fds[i].revents);
      }
    }
  }
  partial_budget(s);
  /* Whoever failed while we wrote to them. */
  for (producer *p = s->producers, *np; p; p = np) {
    np = p->next;
    if (p->conn.failed) etch__svc_drop_producer(s, p, p->conn.err);
  }
  for (consumer *c = s->consumers, *nc; c; c = nc) {
    nc = c->next;
    if (c->conn.failed) etch__svc_drop_consumer(s, c, c->conn.err);
  }
  timers(s);
  return ETCH_OK;
}

/* Whether socket `name` may be listened on: a TCP or vsock name that
 * other machines can reach only with allow_remote, and then etchd says
 * so whether or not -v was given. */
static int check_reach(etch_service *s, const char *name) {
  if (etch__ipc_family(name) == ETCH_SOCK_UNIX || etch__ipc_is_loopback(name))
    return ETCH_OK;
  if (!s->o.allow_remote)
    return etch__error(ETCH_EINVAL,
                       "%s is reachable from other machines: etchd listens "
                       "there only with --allow-remote (no one is "
                       "authenticated there)",
                       name);
  fprintf(stderr,
          "etchd: WARNING: %s is reachable from the network and "
          "unauthenticated, unencrypted: anyone who reaches it may record "
          "into this service's sessions (docs/service.md, \"Across "
          "machines\")\n",
          name);
  return ETCH_OK;
}

/* Whether name `name` is in comma list `list`. */
static bool in_list(const char *list, const char *name) {
  char one[256];
  for (unsigned i = 0; etch__ipc_name_at(list, i, one, sizeof one); i++)
    if (!strcmp(one, name)) return true;
  return false;
}

/* Listens on every name of the producer socket's comma list. */
static int listen_producers(etch_service *s) {
  const char *list = s->o.producer_socket;
  char one[256];
  unsigned i = 0;
  for (; etch__ipc_name_at(list, i, one, sizeof one); i++) {
    if (s->nlp == MAX_PRODUCER_SOCKETS)
      return etch__error(ETCH_ELIMIT, "more than %u producer sockets",
                         MAX_PRODUCER_SOCKETS);
    int rc = check_reach(s, one);
    if (!rc) rc = etch__ipc_listen(one, s->o.group_rw, &s->lp[s->nlp]);
    if (rc) return rc;
    snprintf(s->lp_name[s->nlp], sizeof s->lp_name[s->nlp], "%s", one);
    s->lp_relay[s->nlp] =
        s->o.relay_endpoint_on ? in_list(s->o.relay_endpoint_on, one)
                               : s->o.relay_endpoint;
    s->nlp++;
  }
  if (!s->nlp)
    return etch__error(ETCH_EINVAL, "no producer socket in '%s'", list);
  /* A name for the RelayPort must be one of the producer sockets. */
  for (unsigned k = 0; s->o.relay_endpoint_on &&
                       etch__ipc_name_at(s->o.relay_endpoint_on, k, one,
                                         sizeof one);
       k++)
    if (!in_list(list, one))
      return etch__error(ETCH_EINVAL,
                         "--enable-relay-endpoint-on %s: not one of the "
                         "producer sockets (%s)",
                         one, list);
  return ETCH_OK;
}

/* The name of producer socket i as it listens (a TCP port 0 becomes the
 * port it got). */
int etch__service_producer_name(const etch_service *s, uint32_t i, char *out,
                                size_t cap) {
  if (i >= s->nlp) return ETCH_EINVAL;
  if (etch__ipc_family(s->lp_name[i]) == ETCH_SOCK_UNIX) {
    snprintf(out, cap, "%s", s->lp_name[i]);
    return ETCH_OK;
  }
  return etch__ipc_local_name(s->lp[i], out, cap);
}

int etch__service_new(const etch_service_opts *o, etch_service **out) {
  *out = NULL;
  etch_service *s = (etch_service *)etch__calloc(1, sizeof *s);
  if (!s) return ETCH_ENOMEM;
  s->o = *o;
  if (!s->o.smb_kb) s->o.smb_kb = 2048;
  if (!s->o.smb_page_kb) s->o.smb_page_kb = 32;
  if (!s->o.max_conns_per_uid)
    s->o.max_conns_per_uid = DEFAULT_MAX_CONNS_PER_UID;
  if (!s->o.bind_timeout_ms) s->o.bind_timeout_ms = DEFAULT_BIND_TIMEOUT_MS;
  if (!s->o.frame_timeout_ms) s->o.frame_timeout_ms = DEFAULT_FRAME_TIMEOUT_MS;
  if (!s->o.max_partial_bytes)
    s->o.max_partial_bytes = DEFAULT_MAX_PARTIAL_BYTES;
  if (!s->o.max_buffer_bytes) {
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    s->o.max_buffer_bytes = pages > 0 && psz > 0
                                ? (uint64_t)pages * (uint64_t)psz / 4
                                : (uint64_t)1 << 30;
  }
  s->lc = -1;
  if (!s->o.max_conns_per_addr)
    s->o.max_conns_per_addr = DEFAULT_MAX_CONNS_PER_ADDR;
  if (!s->o.net_bytes_per_s) s->o.net_bytes_per_s = DEFAULT_NET_BYTES_PER_S;
  const char *mn = etch__env(ETCH_ENV_MACHINE_NAME);
  struct utsname u;
  snprintf(s->host_name, sizeof s->host_name, "%.63s",
           mn && *mn ? mn : uname(&u) == 0 ? u.sysname : "");
  /* Kept for the moment there are no descriptors left: see out_of_fds. */
  s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  s->next_seq = 2; /* 1 is the service's own */
  /* Buffer id 0 is never used: a zero is no buffer. */
  if (!ETCH_VEC_PUSH(&s->bufv, etch_tracebuf *, NULL) &&
      !ETCH_VEC_PUSH(&s->buf_sessionv, uint32_t, 0)) {
    s->bufs = ETCH_VEC_AT(&s->bufv, etch_tracebuf *);
    s->buf_session = ETCH_VEC_AT(&s->buf_sessionv, uint32_t);
    s->nbufs = 1;
  }
  s->chunk = (etch_smb_chunk *)etch__malloc(sizeof *s->chunk);
  if (!s->nbufs || !s->chunk) {
    etch__service_free(s);
    return ETCH_ENOMEM;
  }
  int rc = listen_producers(s);
  if (!rc) rc = check_reach(s, o->consumer_socket);
  if (!rc) rc = etch__ipc_listen(o->consumer_socket, o->group_rw, &s->lc);
  if (rc) {
    etch__service_free(s);
    return rc;
  }
  *out = s;
  return ETCH_OK;
}

/* Asked to stop: every session ends as if its consumer had disabled it
 * (flush, stop the data sources, write the file, answer the consumer), and
 * the service goes on serving until the consumers have read and freed
 * their sessions; bounded by the sessions' own timeouts plus a grace for
 * the reading, or cut short by a second signal. */
static int drain(etch_service *s) {
  uint64_t wait_ms = 0;
  uint32_t n = 0;
  for (session *x = s->sessions; x; x = x->next, n++) {
    uint64_t f = x->cfg->flush_timeout_ms ? x->cfg->flush_timeout_ms
                                          : DEFAULT_FLUSH_TIMEOUT_MS;
    uint64_t t = x->cfg->data_source_stop_timeout_ms
                     ? x->cfg->data_source_stop_timeout_ms
                     : DEFAULT_STOP_TIMEOUT_MS;
    if (f + t > wait_ms) wait_ms = f + t;
  }
  if (!n) return ETCH_OK;
  if (wait_ms > DRAIN_MAX_MS) wait_ms = DRAIN_MAX_MS; /* a config's say */
  etch__svc_logf(s, "stopping: ending %u session(s)", n);
  for (session *x = s->sessions, *nx; x; x = nx) {
    nx = x->next;
    etch__svc_disable_session(s, x);
  }
  uint64_t deadline =
      etch__monotonic_ns() + (wait_ms + DRAIN_GRACE_MS) * 1000000ull;
  while (s->sessions && s->stop < 2 && etch__monotonic_ns() < deadline) {
    int rc = etch__service_poll(s, 100);
    if (rc) return rc;
  }
  if (s->sessions)
    etch__svc_logf(
        s, "stopping with sessions left: %s",
        s->stop >= 2 ? "asked again" : "their consumers did not finish");
  return ETCH_OK;
}

int etch__service_run(etch_service *s) {
  while (!s->stop) {
    int rc = etch__service_poll(s, 1000);
    if (rc) return rc;
  }
  return drain(s);
}

/* From a signal handler: the first call stops cleanly, a second at once. */
void etch__service_stop(etch_service *s) { s->stop = s->stop ? 2 : 1; }

void etch__service_free(etch_service *s) {
  if (!s) return;
  while (s->consumers)
    etch__svc_drop_consumer(s, s->consumers, "service stopped");
  while (s->sessions) etch__svc_free_session(s, s->sessions);
  while (s->producers)
    etch__svc_drop_producer(s, s->producers, "service stopped");
  for (uint32_t i = 0; i < s->nlp; i++) {
    close(s->lp[i]);
    if (etch__ipc_family(s->lp_name[i]) == ETCH_SOCK_UNIX &&
        s->lp_name[i][0] != '@')
      unlink(s->lp_name[i]);
  }
  etch__svc_free_machines(s);
  if (s->lc >= 0) {
    close(s->lc);
    unlink(s->o.consumer_socket);
  }
  if (s->spare_fd >= 0) close(s->spare_fd);
  etch__vec_free(&s->uidv);
  for (uint32_t i = 0; s->bufs && i < s->nbufs; i++)
    etch__tracebuf_free(s->bufs[i]);
  etch__vec_free(&s->bufv);
  etch__vec_free(&s->buf_sessionv);
  etch__vec_free(&s->seqinfov);
  free(s->chunk);
  if (s->pfds != s->pfds_in) {
    free(s->pfds);
    free(s->pids);
  }
  free(s);
}

/*
 * core.c - the bottom of the tracing service (see service_int.h): its
 * log, the bounds every connection counts against (connections per peer,
 * memory of frames received in part), and the lookups of producers,
 * consumers and sessions by id. It calls no other file of the service.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "service/service_int.h"

/* ---- the log ---- */

void etch__svc_logf(const etch_service *s, const char *fmt, ...) {
  if (!s->o.verbose) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "etchd: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

void etch__svc_warnf(etch_service *s, int kind, const char *fmt, ...) {
  uint64_t now = etch__monotonic_ns();
  if (s->warn_ns[kind] && now - s->warn_ns[kind] < 1000000000ull) {
    s->warn_skipped[kind]++;
    return;
  }
  s->warn_ns[kind] = now;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "etchd: ");
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (s->warn_skipped[kind])
    fprintf(stderr, " (and %u more like it since the last)",
            s->warn_skipped[kind]);
  fputc('\n', stderr);
  s->warn_skipped[kind] = 0;
}

/* ---- connections' bounds ---- */

/* The host part of a network peer's address ("10.0.0.7" of
 * "10.0.0.7:5012", "::1" of "[::1]:5012", "vsock:3" of "vsock:3:1024"). */
static void addr_host(const char *addr, char *out, size_t cap) {
  const char *end = strrchr(addr, ':');
  size_t n = end ? (size_t)(end - addr) : strlen(addr);
  if (addr[0] == '[' && n >= 2 && addr[n - 1] == ']') {
    addr++;
    n -= 2;
  }
  if (n >= cap) n = cap - 1;
  memcpy(out, addr, n);
  out[n] = 0;
}

/* Connections of connection c's peer (producers and consumers together):
 * by uid for a Unix peer, by address for a network peer; its count, made
 * (at 0) when `add`; NULL when there is none, or no memory. */
uint32_t *etch__svc_peer_conns(etch_service *s, const etch_ipc_conn *c,
                               bool add) {
  char addr[64] = "";
  if (c->remote) addr_host(c->peer_addr, addr, sizeof addr);
  for (uint32_t i = 0; i < s->nuids; i++)
    if (c->remote ? !strcmp(s->uids[i].addr, addr)
                  : !s->uids[i].addr[0] && s->uids[i].uid == c->peer_uid)
      return &s->uids[i].n;
  if (!add) return NULL;
  uid_conns *u = ETCH_VEC_NEW(&s->uidv, uid_conns);
  if (!u) return NULL;
  u->uid = c->peer_uid;
  u->n = 0;
  memcpy(u->addr, addr, sizeof addr);
  s->uids = ETCH_VEC_AT(&s->uidv, uid_conns);
  s->nuids++;
  return &u->n;
}

/* A connection that goes gives back its share of the bounds: one of its
 * peer's connections (if it was counted), the memory of its frame
 * received in part. A network peer is counted by its address whatever a
 * relay said its uid is. */
void etch__svc_conn_forget(etch_service *s, const etch_ipc_conn *c,
                           size_t partial) {
  s->partial_bytes -= partial;
  uint32_t *n = etch__svc_peer_conns(s, c, false);
  if (!n) return;
  if (*n) (*n)--;
  if (!*n) {
    size_t i = (size_t)((const char *)n - (const char *)s->uids) /
               sizeof *s->uids;
    s->uids[i] = s->uids[--s->nuids];
    s->uidv.len -= sizeof *s->uids; /* the vector holds nuids */
  }
}

/* After a connection's frames were taken: its share of the memory held for
 * frames received in part. */
void etch__svc_conn_account(etch_service *s, const etch_ipc_conn *c,
                            size_t *partial) {
  size_t now = etch__ipc_conn_partial_bytes(c);
  s->partial_bytes = s->partial_bytes - *partial + now;
  *partial = now;
}

/* ---- lookups ---- */

producer *etch__svc_find_producer(etch_service *s, uint32_t id) {
  for (producer *p = s->producers; p; p = p->next)
    if (p->id == id) return p;
  return NULL;
}

consumer *etch__svc_find_consumer(etch_service *s, uint32_t id) {
  for (consumer *c = s->consumers; c; c = c->next)
    if (c->id == id) return c;
  return NULL;
}

session *etch__svc_find_session(etch_service *s, uint32_t id) {
  for (session *x = s->sessions; x; x = x->next)
    if (x->id == id) return x;
  return NULL;
}

/*
 * machine.c - machines other than the host (see machine.h and
 * docs/service.md, "Across machines").
 *
 * A producer that comes over the network (TCP or vsock) is on another
 * machine: at first the machine of its address. A relay (Perfetto's
 * traced_relay, etch's own) opens one connection per producer it forwards
 * and says first, in a SetPeerIdentity frame, who the producer is: its pid
 * and uid (as the relay's machine sees them) and a hint for the machine
 * (its boot id) with its name. Each (address, hint) is a machine with a
 * MachineID, the hint's 64-bit FNV-1a hash cut to 32 bits as Perfetto's
 * host derives it (never 0, the host's; one more on a clash), and every
 * packet of that machine's producers carries it (TracePacket.machine_id).
 * A network peer cannot be the host nor a machine of another address, and
 * a Unix peer cannot be anything but the host: SetPeerIdentity is taken
 * on a network connection only, as its first frame, once.
 *
 * The relay also binds the RelayPort on a connection of its own and calls
 * InitRelay (its machine's SystemInfo) and SyncClock (rounds of PING and
 * UPDATE, each with the relay's clock readings): the host reads its own
 * clocks as each SyncClock arrives, and the pairs go into the trace as
 * RemoteClockSync packets of that machine, as traced writes them, so that
 * a reader puts the machine on the host's timeline. Every byte of these
 * is checked: a SystemInfo must decode and fit MAX_SYSINFO, a snapshot
 * keeps at most MAX_SYNC_CLOCKS readings of the clocks the host has.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "proto/ipc.h"
#include "proto/perfetto.h"
#include "service/machine.h"
#include "service/methods.h"
#include "service/service_int.h"

/* Machines of one address at most (its own and those its relays name). */
#define MAX_MACHINES_PER_ADDR 16u

machine *etch__svc_find_machine(etch_service *s, uint32_t id) {
  for (uint32_t i = 0; i < s->nmachines; i++)
    if (s->machines[i]->id == id) return s->machines[i];
  return NULL;
}

/* The host part of a network address (as loop.c counts connections). */
static void host_part(const char *addr, char *out, size_t cap) {
  const char *end = strrchr(addr, ':');
  size_t n = end ? (size_t)(end - addr) : strlen(addr);
  if (n >= cap) n = cap - 1;
  memcpy(out, addr, n);
  out[n] = 0;
}

/* Printable ASCII of bytes, at most cap - 1 of them ('?' for the rest). */
static void printable(char *out, size_t cap, const uint8_t *b, size_t n) {
  if (n >= cap) n = cap - 1;
  for (size_t i = 0; i < n; i++)
    out[i] = b[i] >= 0x20 && b[i] < 0x7f ? (char)b[i] : '?';
  out[n] = 0;
}

/* The machine of key "ADDR|HINT", made when new: its id from the hint (or
 * from the key when there is none). NULL with a message when there is no
 * room for it. */
static machine *machine_get(etch_service *s, const char *addr,
                            const uint8_t *hint, size_t hint_len,
                            const char *name) {
  char key[sizeof ((machine *)0)->key];
  int kl = snprintf(key, sizeof key, "%s|%.*s", addr, (int)hint_len,
                    (const char *)hint);
  if (kl < 0 || (size_t)kl >= sizeof key) {
    etch__error(ETCH_EINVAL, "a machine_id_hint of %zu bytes (at most %zu)",
                hint_len, sizeof key - strlen(addr) - 2);
    return NULL;
  }
  uint32_t of_addr = 0;
  size_t al = strlen(addr);
  for (uint32_t i = 0; i < s->nmachines; i++) {
    if (!strcmp(s->machines[i]->key, key)) return s->machines[i];
    if (!strncmp(s->machines[i]->key, addr, al) &&
        s->machines[i]->key[al] == '|')
      of_addr++;
  }
  if (s->nmachines == MAX_MACHINES || of_addr >= MAX_MACHINES_PER_ADDR) {
    etch__error(ETCH_ELIMIT,
                "no room for another machine (%u in all, %u of %s: at most "
                "%u, %u of one address)",
                s->nmachines, of_addr, addr, MAX_MACHINES,
                MAX_MACHINES_PER_ADDR);
    return NULL;
  }
  if (ETCH_VEC_RESERVE(&s->machinev, machine *, 1)) return NULL;
  s->machines = ETCH_VEC_AT(&s->machinev, machine *); /* it may have moved */
  machine *m = (machine *)etch__calloc(1, sizeof *m);
  if (!m) return NULL;
  memcpy(m->key, key, (size_t)kl + 1);
  snprintf(m->name, sizeof m->name, "%s", name);
  uint32_t id = hint_len ? (uint32_t)etch__hash_bytes(hint, hint_len, 0)
                         : (uint32_t)etch__hash_bytes(key, (size_t)kl, 0);
  for (;;) { /* never 0 (the host), never another machine's */
    if (id && !etch__svc_find_machine(s, id)) break;
    id++;
  }
  m->id = id;
  (void)ETCH_VEC_PUSH(&s->machinev, machine *, m); /* room made above */
  s->machines = ETCH_VEC_AT(&s->machinev, machine *);
  s->nmachines++;
  etch__svc_logf(s, "machine %u: '%s' (%s)", m->id, m->name, m->key);
  return m;
}

int etch__svc_machine_of_address(etch_service *s, producer *p) {
  char addr[64];
  host_part(p->conn.peer_addr, addr, sizeof addr);
  machine *m = machine_get(s, addr, NULL, 0, addr);
  if (!m) return etch__error(ETCH_ELIMIT, "%s", etch_last_error());
  p->machine = m->id;
  return ETCH_OK;
}

bool etch__svc_peer_identity(etch_service *s, producer *p,
                             const etch_ipc_frame *f) {
  if (f->kind != ETCH_IPC_PEER_IDENTITY) return false;
  /* A Unix peer is who the kernel says; a relay speaks first and once. */
  if (!p->conn.remote || p->frames || p->identity) {
    etch__svc_logf(s,
                   "producer %u: SetPeerIdentity ignored (%s)", p->id,
                   !p->conn.remote ? "a Unix socket's peer is who the kernel "
                                     "says"
                   : p->identity   ? "said already"
                                   : "not the first frame");
    return true;
  }
  p->identity = true;
  /* The pid and uid are the relay's word, on its machine (no check of
   * descriptors against them: same_pidns is false for network peers). */
  p->conn.peer_pid = f->has_pid && f->pid > 0 ? (pid_t)f->pid : -1;
  p->conn.peer_uid = f->has_uid && f->uid >= 0 ? (uid_t)f->uid : (uid_t)-1;
  if (f->machine_id_hint.len) {
    char addr[64], name[64];
    host_part(p->conn.peer_addr, addr, sizeof addr);
    printable(name, sizeof name, f->name.data, f->name.len);
    machine *m = machine_get(s, addr, f->machine_id_hint.data,
                             f->machine_id_hint.len, name);
    if (!m) {
      etch__ipc_conn_fail(&p->conn, "%s", etch_last_error());
      return true;
    }
    p->machine = m->id;
  }
  etch__svc_logf(s, "producer %u: relayed: pid %d uid %d, machine %u", p->id,
                 (int)p->conn.peer_pid, (int)p->conn.peer_uid, p->machine);
  return true;
}

/* ---- the RelayPort ---- */

/* Whether bytes are a SystemInfo etchd passes on: they decode, and its
 * utsname (field 1) is a message of strings. */
static bool sysinfo_ok(const uint8_t *b, size_t n) {
  if (!n || n > MAX_SYSINFO) return false;
  etch__pb_dec d, u;
  etch__pb_field f, g;
  etch__pb_dec_init(&d, b, n);
  while (etch__pb_next(&d, &f)) {
    if (f.id != 1) continue;
    if (f.wt != 2) return false;
    etch__pb_dec_init(&u, f.data, f.len);
    while (etch__pb_next(&u, &g))
      if (g.wt != 2) return false;
    if (u.err) return false;
  }
  return !d.err;
}

/* The host's reading of builtin clock `id` (builtin_clocks.proto), false
 * for one it does not read. */
static bool host_clock(uint32_t id, uint64_t *ts) {
  static const clockid_t ids[] = {
      [1] = CLOCK_REALTIME,  [2] = CLOCK_REALTIME_COARSE,
      [3] = CLOCK_MONOTONIC, [4] = CLOCK_MONOTONIC_COARSE,
      [5] = CLOCK_MONOTONIC_RAW, [6] = CLOCK_BOOTTIME};
  if (id < 1 || id > 6) return false;
  *ts = etch__clock_ns(ids[id]);
  return true;
}

static int sync_clock(etch_service *s, producer *p, const etch_ipc_frame *f) {
  clock_sync c;
  memset(&c, 0, sizeof c);
  uint32_t id[MAX_SYNC_CLOCKS];
  uint64_t ts[MAX_SYNC_CLOCKS];
  uint32_t n = 0;
  etch__pb_dec d, k;
  etch__pb_field fl, g;
  etch__pb_dec_init(&d, f->body.data, f->body.len);
  while (etch__pb_next(&d, &fl)) {
    if (fl.id != ETCH_SCR_CLOCKS || fl.wt != 2) continue;
    uint64_t cid = 0, t = 0;
    bool has_t = false;
    etch__pb_dec_init(&k, fl.data, fl.len);
    while (etch__pb_next(&k, &g)) {
      if (g.id == ETCH_SCR_CLOCK_ID && g.wt == 0) cid = g.u;
      if (g.id == ETCH_SCR_CLOCK_TIMESTAMP && g.wt == 0) {
        t = g.u;
        has_t = true;
      }
    }
    if (k.err) return etch__error(ETCH_EFORMAT, "bad SyncClockRequest.Clock");
    if (has_t && cid && cid <= 6 && n < MAX_SYNC_CLOCKS) {
      id[n] = (uint32_t)cid;
      ts[n++] = t;
    }
  }
  if (d.err) return etch__error(ETCH_EFORMAT, "bad SyncClockRequest");
  /* The host's clocks as the request arrived, the clocks the relay read. */
  for (uint32_t i = 0; i < n; i++) {
    uint64_t h;
    if (!host_clock(id[i], &h)) continue;
    c.clock_id[c.n] = id[i];
    c.client[c.n] = ts[i];
    c.host[c.n++] = h;
  }
  etch__svc_reply_empty(&p->conn, f, true);
  machine *m = etch__svc_find_machine(s, p->machine);
  if (!m || !c.n) return ETCH_OK; /* the host's own, or nothing to keep */
  m->syncs[m->nsyncs_total % MAX_CLOCK_SYNCS] = c;
  m->nsyncs_total++;
  return ETCH_OK;
}

static int init_relay(etch_service *s, producer *p, const etch_ipc_frame *f) {
  const uint8_t *si = NULL;
  size_t n = 0;
  etch__pb_dec d;
  etch__pb_field fl;
  etch__pb_dec_init(&d, f->body.data, f->body.len);
  while (etch__pb_next(&d, &fl))
    if (fl.id == ETCH_IRR_SYSTEM_INFO && fl.wt == 2) {
      si = fl.data;
      n = fl.len;
    }
  if (d.err) return etch__error(ETCH_EFORMAT, "bad InitRelayRequest");
  etch__svc_reply_empty(&p->conn, f, true);
  machine *m = etch__svc_find_machine(s, p->machine);
  if (!m || !si) return ETCH_OK;
  if (!sysinfo_ok(si, n)) {
    etch__svc_logf(s, "producer %u: InitRelay's SystemInfo left out (%zu "
                   "bytes that are not one, or over %u)",
                   p->id, n, MAX_SYSINFO);
    return ETCH_OK;
  }
  uint8_t *c = (uint8_t *)etch__malloc(n);
  if (!c) return ETCH_ENOMEM;
  memcpy(c, si, n);
  free(m->sysinfo);
  m->sysinfo = c;
  m->sysinfo_len = (uint32_t)n;
  etch__svc_logf(s, "machine %u: SystemInfo of %zu bytes", m->id, n);
  return ETCH_OK;
}

int etch__svc_relay_call(etch_service *s, producer *p,
                         const etch_ipc_frame *f) {
  switch (f->method_id) {
  case RM_INIT_RELAY: return init_relay(s, p, f);
  case RM_SYNC_CLOCK: return sync_clock(s, p, f);
  default:
    etch__svc_reply_empty(&p->conn, f, false);
    return ETCH_OK;
  }
}

/* ---- sessions and traces ---- */

bool etch__svc_machine_matches(etch_service *s, const session *x,
                               const etch_tc_source *src,
                               const producer *p) {
  const machine *m = p->machine ? etch__svc_find_machine(s, p->machine) : NULL;
  if (src->machine_name_filter.n) {
    const char *name = m ? m->name : s->host_name;
    for (uint32_t i = 0; i < src->machine_name_filter.n; i++)
      if (!strcmp(src->machine_name_filter.item[i], name)) return true;
    return false;
  }
  return !p->machine || x->cfg->trace_all_machines;
}

int etch__svc_session_machine(session *x, uint32_t id) {
  if (!id) return ETCH_OK;
  for (uint32_t i = 0; i < x->nmw; i++)
    if (x->mw[i].machine == id) return ETCH_OK;
  if (ETCH_VEC_PUSH(&x->mwv, mwritten, {.machine = id})) return ETCH_ENOMEM;
  x->mw = ETCH_VEC_AT(&x->mwv, mwritten);
  x->nmw++;
  return ETCH_OK;
}

static void put_clocks(etch__pb_stream *st, uint32_t field,
                       const clock_sync *c, bool host) {
  etch__pb_nested snap, one;
  etch__pb_nested_begin(st, field, &snap);
  for (uint32_t i = 0; i < c->n; i++) {
    etch__pb_nested_begin(st, ETCH_CLOCKSNAP_CLOCKS, &one);
    etch__pb_write_varint_field(st, ETCH_SNAPCLOCK_CLOCK_ID, c->clock_id[i]);
    etch__pb_write_varint_field(st, ETCH_SNAPCLOCK_TIMESTAMP,
                               host ? c->host[i] : c->client[i]);
    etch__pb_nested_end(st, &one);
  }
  etch__pb_nested_end(st, &snap);
}

/* RemoteClockSync { repeated SyncedClocks synced_clocks = 1 }, SyncedClocks
 * { ClockSnapshot client_clocks = 2; ClockSnapshot host_clocks = 3 }. */
enum { RCS_SYNCED_CLOCKS = 1, RCS_CLIENT_CLOCKS = 2, RCS_HOST_CLOCKS = 3 };

int etch__svc_put_machines(etch_service *s, session *x, etch_tracefile *t) {
  for (uint32_t i = 0; i < x->nmw; i++) {
    struct mwritten *w = &x->mw[i];
    machine *m = etch__svc_find_machine(s, w->machine);
    if (!m) continue;
    etch__pb_stream *st = &t->tmp.s;
    if (m->sysinfo && !w->sysinfo) {
      etch__pb_write_bytes_field(st, ETCH_PKT_SYSTEM_INFO, m->sysinfo,
                                 m->sysinfo_len);
      etch__pb_write_varint_field(st, ETCH_PKT_MACHINE_ID, m->id);
      int rc = etch__tracefile_put_service(t);
      if (rc) return rc;
      w->sysinfo = true;
    }
    if (m->nsyncs_total > w->syncs) {
      uint32_t from = w->syncs;
      if (m->nsyncs_total - from > MAX_CLOCK_SYNCS)
        from = m->nsyncs_total - MAX_CLOCK_SYNCS;
      etch__pb_nested rcs, sc;
      etch__pb_nested_begin(st, ETCH_PKT_REMOTE_CLOCK_SYNC, &rcs);
      for (uint32_t k = from; k < m->nsyncs_total; k++) {
        const clock_sync *c = &m->syncs[k % MAX_CLOCK_SYNCS];
        etch__pb_nested_begin(st, RCS_SYNCED_CLOCKS, &sc);
        put_clocks(st, RCS_CLIENT_CLOCKS, c, false);
        put_clocks(st, RCS_HOST_CLOCKS, c, true);
        etch__pb_nested_end(st, &sc);
      }
      etch__pb_nested_end(st, &rcs);
      etch__pb_write_varint_field(st, ETCH_PKT_MACHINE_ID, m->id);
      int rc = etch__tracefile_put_service(t);
      if (rc) return rc;
      w->syncs = m->nsyncs_total;
    }
  }
  return ETCH_OK;
}

void etch__svc_free_machines(etch_service *s) {
  for (uint32_t i = 0; i < s->nmachines; i++) {
    free(s->machines[i]->sysinfo);
    free(s->machines[i]);
  }
  etch__vec_free(&s->machinev);
  s->machines = NULL;
  s->nmachines = 0;
}

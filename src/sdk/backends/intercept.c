/*
 * intercept.c - interceptors: the registry and the intercepting backend.
 *
 * An intercepted session's backend hands its writers chunks from the heap
 * and takes every packet back as soon as the writer finishes it: the writer
 * calls `packet_done` after each packet it publishes (its fast path is off
 * for such a session: its room check always fails, so every event goes
 * through the slow path, which ends by publishing). The backend reads the
 * fragments committed since the last call, joins a packet that crossed
 * chunks, and gives each whole packet to the interceptor, on the writer's
 * thread. Nothing is kept: reading the session gives an empty trace.
 *
 * Per writer sequence there is one `seq` (the interceptor's thread state,
 * a packet being joined, and a busy flag that lets stop wait for callbacks
 * in progress without a lock on the packet path).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer/fragment.h"
#include "etch/interceptor.h"
#include "pb/pb.h"
#include "proto/perfetto.h"
#include "sdk/core/sdk.h"

/* ---- registry ------------------------------------------------------------------ */

#define MAX_INTERCEPTORS 32

typedef struct reg {
  etch_interceptor ic;
  char name[64];
} reg;

static reg regs[MAX_INTERCEPTORS];
static uint32_t nregs;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;

static void register_builtins(void) { etch__console_register(); }

static int register_locked(const etch_interceptor *ic) {
  if (!ic || !ic->name || !*ic->name || !ic->packet || !ic->setup)
    return etch__error(ETCH_EINVAL,
                       "etch_interceptor_register: %s",
                       !ic ? "NULL interceptor"
                       : !ic->name || !*ic->name ? "no name"
                       : !ic->setup ? "no setup callback"
                                    : "no packet callback");
  if (strlen(ic->name) >= sizeof regs[0].name)
    return etch__error(ETCH_EINVAL,
                       "etch_interceptor_register: name '%.40s...' longer "
                       "than %zu bytes",
                       ic->name, sizeof regs[0].name - 1);
  for (uint32_t i = 0; i < nregs; i++)
    if (strcmp(regs[i].name, ic->name) == 0)
      return etch__error(ETCH_EBUSY,
                         "etch_interceptor_register: '%s' is already "
                         "registered",
                         ic->name);
  if (nregs == MAX_INTERCEPTORS)
    return etch__error(ETCH_ELIMIT,
                       "etch_interceptor_register: all %d places are taken",
                       MAX_INTERCEPTORS);
  reg *r = &regs[nregs];
  r->ic = *ic;
  snprintf(r->name, sizeof r->name, "%s", ic->name);
  r->ic.name = r->name;
  nregs++;
  return ETCH_OK;
}

int etch__interceptor_register_builtin(const etch_interceptor *ic) {
  /* Called from register_builtins, under reg_lock already. */
  return register_locked(ic);
}

int etch_interceptor_register(const etch_interceptor *ic) {
  pthread_mutex_lock(&reg_lock);
  pthread_once(&builtins_once, register_builtins);
  int rc = register_locked(ic);
  pthread_mutex_unlock(&reg_lock);
  return rc;
}

/* The registration called `name`, or NULL with the error set. */
static const reg *find(const char *name) {
  pthread_mutex_lock(&reg_lock);
  pthread_once(&builtins_once, register_builtins);
  const reg *r = NULL;
  char known[256] = "";
  for (uint32_t i = 0; i < nregs; i++) {
    if (strcmp(regs[i].name, name) == 0) r = &regs[i];
    if (i) strncat(known, ", ", sizeof known - strlen(known) - 1);
    strncat(known, regs[i].name, sizeof known - strlen(known) - 1);
  }
  pthread_mutex_unlock(&reg_lock);
  if (!r)
    etch__error(ETCH_ECONFIG,
                "config: interceptor: no interceptor '%s' is registered "
                "(registered: %s)",
                name, known);
  return r;
}

/* ---- config --------------------------------------------------------------------- */

struct etch_interceptor_config {
  const char *name;
  const etch_config *cfg;
};

const char *etch_interceptor_config_name(const etch_interceptor_config *c) {
  return c ? c->name : NULL;
}

size_t etch_interceptor_config_count(const etch_interceptor_config *c) {
  return c ? c->cfg->n_iopts : 0;
}

const char *etch_interceptor_config_key(const etch_interceptor_config *c,
                                        size_t i) {
  return c && i < c->cfg->n_iopts ? c->cfg->iopt_keys[i] : NULL;
}

const char *etch_interceptor_config_value(const etch_interceptor_config *c,
                                          size_t i) {
  return c && i < c->cfg->n_iopts ? c->cfg->iopt_values[i] : NULL;
}

const char *etch_interceptor_config_get(const etch_interceptor_config *c,
                                        const char *key) {
  if (!c || !key) return NULL;
  for (size_t i = 0; i < c->cfg->n_iopts; i++)
    if (strcmp(c->cfg->iopt_keys[i], key) == 0) return c->cfg->iopt_values[i];
  return NULL;
}

int etch_interceptor_reject(const etch_interceptor_config *c, const char *fmt,
                            ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt ? fmt : "rejected", ap);
  va_end(ap);
  return etch__error(ETCH_ECONFIG, "config: interceptor '%s': %s",
                     c && c->name ? c->name : "?", msg);
}

/* ---- the backend ------------------------------------------------------------------ */

#define CHUNK_PAYLOAD (64u * 1024u)

typedef struct icpt icpt;

struct etch__intercept_seq {
  /* Set around each callback; stop waits for it to clear. Alone on its
   * line: written by the sequence's thread only. */
  uint32_t busy;
  uint32_t writer_id;
  icpt *owner;
  void *state;       /* the interceptor's thread state */
  etch_reasm reasm;  /* a packet crossing chunks, joined so far */
  etch__intercept_seq *next;
} __attribute__((aligned(64)));

/* A chunk, with where the backend has read it up to. */
typedef struct ichunk {
  etch__intercept_seq *seq;
  uint32_t delivered;
  struct ichunk *next_free;
  uint32_t pad[2];
  etch_chunk c; /* last: the payload follows it */
} ichunk;

struct icpt {
  etch_backend base;
  const reg *r;
  void *instance;
  pthread_mutex_t inst_lock; /* the instance, for packet callbacks */
  pthread_mutex_t lock;      /* seqs, free chunks, counters */
  etch__intercept_seq *seqs;
  ichunk *free_chunks;
  uint64_t handed;
  uint64_t drops;
  uint32_t started; /* atomic: set once start was called */
  uint32_t stopped; /* atomic: no callback starts once set */
};

static ichunk *chunk_of(etch_chunk *c) {
  return (ichunk *)((char *)c - offsetof(ichunk, c));
}

static etch__intercept_seq *seq_get(icpt *b, uint32_t writer_id) {
  for (etch__intercept_seq *s = b->seqs; s; s = s->next)
    if (s->writer_id == writer_id) return s;
  etch__intercept_seq *s = NULL;
  if (posix_memalign((void **)&s, 64, sizeof *s) != 0) return NULL;
  memset(s, 0, sizeof *s);
  s->writer_id = writer_id;
  s->owner = b;
  etch__reasm_init(&s->reasm);
  size_t sz = b->r->ic.thread_state_size;
  if (sz) {
    s->state = etch__calloc(1, sz);
    if (!s->state) {
      free(s);
      return NULL;
    }
  }
  s->next = b->seqs;
  b->seqs = s;
  return s;
}

static void seq_free(icpt *b, etch__intercept_seq *s) {
  if (s->state && b->r->ic.thread_destroy)
    b->r->ic.thread_destroy(b->r->ic.global, s->state);
  free(s->state);
  etch__reasm_free(&s->reasm);
  free(s);
}

static etch_chunk *icpt_acquire(etch_backend *bb, uint32_t writer_id,
                                uint32_t chunk_id, uint32_t flags) {
  icpt *b = (icpt *)bb;
  pthread_mutex_lock(&b->lock);
  etch__intercept_seq *s = seq_get(b, writer_id);
  ichunk *k = NULL;
  if (s) {
    k = b->free_chunks;
    if (k)
      b->free_chunks = k->next_free;
    else
      k = (ichunk *)etch__malloc(sizeof *k + CHUNK_PAYLOAD);
  }
  if (k) b->handed++;
  pthread_mutex_unlock(&b->lock);
  if (!k) return NULL;
  k->seq = s;
  k->delivered = 0;
  memset(&k->c, 0, sizeof k->c);
  k->c.writer_id = writer_id;
  k->c.chunk_id = chunk_id;
  k->c.state = ETCH_CHUNK_WRITING;
  etch__chunk_publish(&k->c, 0, flags);
  return &k->c;
}

bool etch__packet_clears_state(const uint8_t *d, size_t n) {
  etch__pb_dec dec;
  etch__pb_field f;
  etch__pb_dec_init(&dec, d, n);
  while (etch__pb_next(&dec, &f))
    if (f.id == ETCH_PKT_SEQUENCE_FLAGS && f.wt == ETCH_PB_VARINT)
      return (f.u & ETCH_SEQ_INCREMENTAL_STATE_CLEARED) != 0;
  return false;
}

static void deliver(icpt *b, etch__intercept_seq *s, const uint8_t *d,
                    size_t n) {
  /* Dekker with stop: the flag is visible before the check, or stop's
   * flag is visible here. */
  __atomic_store_n(&s->busy, 1, __ATOMIC_SEQ_CST);
  if (!__atomic_load_n(&b->stopped, __ATOMIC_SEQ_CST) &&
      __atomic_load_n(&b->started, __ATOMIC_ACQUIRE)) {
    const etch_interceptor *ic = &b->r->ic;
    etch_intercepted p = {
        .data = d,
        .size = n,
        .sequence_id = s->writer_id,
        .state_cleared = etch__packet_clears_state(d, n),
        .global = ic->global,
        .thread_state = s->state,
        .seq_ = s,
    };
    etch__tls.in_intercept = true;
    if (p.state_cleared && s->state && ic->thread_reset)
      ic->thread_reset(ic->global, s->state);
    ic->packet(&p);
    etch__tls.in_intercept = false;
  }
  __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
}

/* Reads the fragments committed in `c` since the last call (the buffer
 * part's cursor and reassembler, from where the last call stopped). */
static void drain(icpt *b, ichunk *k) {
  etch__intercept_seq *s = k->seq;
  uint32_t word = __atomic_load_n(&k->c.used, __ATOMIC_ACQUIRE);
  uint32_t used = word & ETCH_CHUNK_USED_MASK;
  if (used > CHUNK_PAYLOAD) used = CHUNK_PAYLOAD;
  etch_frag_cursor cur;
  etch__frag_init(&cur, etch__chunk_payload(&k->c), used, ETCH_FRAG_UNCOUNTED,
                  word >> ETCH_CHUNK_FLAGS_SHIFT);
  /* Past the fragments read before: the next is not the chunk's first. */
  cur.off = k->delivered;
  cur.index = k->delivered ? 1 : 0;
  const uint8_t *d;
  uint32_t n;
  int got;
  while ((got = etch__frag_next(&cur, &d, &n)) != ETCH_FRAG_END) {
    /* The writer's own chunk, in this process: never a lie. */
    if (ETCH_NEVER(got != ETCH_FRAG_OK)) {
      etch__reasm_lose(&s->reasm);
      break;
    }
    const uint8_t *pkt;
    uint32_t plen;
    bool dropped, lost = false;
    /* Out of memory joining a packet: it is not delivered (as a packet
     * whose beginning is gone). */
    if (etch__reasm_fragment(&s->reasm, d, n, etch__frag_cont_prev(&cur),
                             etch__frag_cont_next(&cur), &pkt, &plen,
                             &dropped, &lost) != ETCH_OK) {
      etch__reasm_lose(&s->reasm);
      continue;
    }
    if (plen) deliver(b, s, pkt, plen);
  }
  k->delivered = cur.off;
}

static void icpt_packet_done(etch_backend *bb, etch_chunk *c) {
  drain((icpt *)bb, chunk_of(c));
}

static void icpt_complete(etch_backend *bb, etch_chunk *c) {
  icpt *b = (icpt *)bb;
  ichunk *k = chunk_of(c);
  drain(b, k);
  pthread_mutex_lock(&b->lock);
  k->next_free = b->free_chunks;
  b->free_chunks = k;
  pthread_mutex_unlock(&b->lock);
}

static void icpt_note_drop(etch_backend *bb) {
  icpt *b = (icpt *)bb;
  pthread_mutex_lock(&b->lock);
  b->drops++;
  pthread_mutex_unlock(&b->lock);
}

static uint64_t icpt_chunks_handed(etch_backend *bb) {
  icpt *b = (icpt *)bb;
  pthread_mutex_lock(&b->lock);
  uint64_t n = b->handed;
  pthread_mutex_unlock(&b->lock);
  return n;
}

static int icpt_read(etch_backend *bb, etch_packet_fn emit, void *ctx,
                     uint64_t *lost_fragments) {
  (void)bb, (void)emit, (void)ctx, (void)lost_fragments;
  return ETCH_OK; /* everything went to the interceptor */
}

static void icpt_stats(etch_backend *bb, etch_buffer_stats *out) {
  icpt *b = (icpt *)bb;
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&b->lock);
  out->chunks_written = b->handed;
  out->chunks_discarded = b->drops;
  pthread_mutex_unlock(&b->lock);
}

static void icpt_start(etch_backend *bb) {
  icpt *b = (icpt *)bb;
  const etch_interceptor *ic = &b->r->ic;
  pthread_mutex_lock(&b->inst_lock); /* two starts: one runs the callback */
  if (!__atomic_load_n(&b->started, __ATOMIC_RELAXED)) {
    if (ic->start) ic->start(ic->global, b->instance);
    __atomic_store_n(&b->started, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&b->inst_lock);
}

static void icpt_stop(etch_backend *bb) {
  icpt *b = (icpt *)bb;
  if (__atomic_exchange_n(&b->stopped, 1, __ATOMIC_SEQ_CST)) return;
  /* Wait for the callbacks already in progress. */
  pthread_mutex_lock(&b->lock);
  for (etch__intercept_seq *s = b->seqs; s; s = s->next)
    while (__atomic_load_n(&s->busy, __ATOMIC_SEQ_CST)) sched_yield();
  pthread_mutex_unlock(&b->lock);
  const etch_interceptor *ic = &b->r->ic;
  if (__atomic_load_n(&b->started, __ATOMIC_ACQUIRE) && ic->stop)
    ic->stop(ic->global, b->instance);
}

static void icpt_writer_done(etch_backend *bb, uint32_t writer_id) {
  icpt *b = (icpt *)bb;
  pthread_mutex_lock(&b->lock);
  etch__intercept_seq **pp = &b->seqs;
  while (*pp && (*pp)->writer_id != writer_id) pp = &(*pp)->next;
  etch__intercept_seq *s = *pp;
  if (s) *pp = s->next;
  pthread_mutex_unlock(&b->lock);
  /* The writer's own thread, after its last packet: nobody else has s. */
  if (s) seq_free(b, s);
}

static void icpt_destroy(etch_backend *bb) {
  icpt *b = (icpt *)bb;
  if (!b) return;
  icpt_stop(bb);
  for (etch__intercept_seq *s = b->seqs, *n; s; s = n) {
    n = s->next;
    seq_free(b, s);
  }
  for (ichunk *k = b->free_chunks, *n; k; k = n) {
    n = k->next_free;
    free(k);
  }
  const etch_interceptor *ic = &b->r->ic;
  if (ic->destroy) ic->destroy(ic->global, b->instance);
  pthread_mutex_destroy(&b->inst_lock);
  pthread_mutex_destroy(&b->lock);
  free(b);
}

static const etch_backend_ops icpt_ops = {
    .acquire = icpt_acquire,
    .complete = icpt_complete,
    .note_drop = icpt_note_drop,
    .chunks_handed = icpt_chunks_handed,
    .read = icpt_read,
    .stats = icpt_stats,
    .destroy = icpt_destroy,
    .packet_done = icpt_packet_done,
    .start = icpt_start,
    .stop = icpt_stop,
    .writer_done = icpt_writer_done,
};

int etch__backend_intercept_new(const etch_config *cfg, etch_backend **out) {
  *out = NULL;
  const reg *r = find(cfg->interceptor);
  if (!r) return ETCH_ECONFIG;
  icpt *b = (icpt *)etch__calloc(1, sizeof *b);
  if (!b) return ETCH_ENOMEM;
  b->r = r;
  etch_interceptor_config ic = {r->name, cfg};
  etch__error_clear();
  int rc = r->ic.setup(r->ic.global, &ic, &b->instance);
  if (rc) {
    if (!*etch_last_error())
      etch__error(rc, "config: interceptor '%s': setup failed (%s)", r->name,
                  etch_strerror(rc));
    free(b);
    return rc;
  }
  /* Held for a packet's callback (the console's formatting and write):
   * short, so a waiter spins a little before it sleeps. */
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
  pthread_mutex_init(&b->inst_lock, &ma);
  pthread_mutexattr_destroy(&ma);
  pthread_mutex_init(&b->lock, NULL);
  b->base.ops = &icpt_ops;
  b->base.payload_size = CHUNK_PAYLOAD;
  b->base.chunk_size = CHUNK_PAYLOAD + ETCH_CHUNK_HEADER_SIZE;
  *out = &b->base;
  return ETCH_OK;
}

void *etch_interceptor_lock(const etch_intercepted *p) {
  if (!p || !p->seq_) return NULL;
  icpt *b = p->seq_->owner;
  pthread_mutex_lock(&b->inst_lock);
  return b->instance;
}

void etch_interceptor_unlock(const etch_intercepted *p) {
  if (!p || !p->seq_) return;
  pthread_mutex_unlock(&p->seq_->owner->inst_lock);
}

void etch__interceptor_unlock_scope(const etch_intercepted **p) {
  etch_interceptor_unlock(*p);
}

void *etch__intercept_instance(etch_backend *bb) {
  return bb->ops == &icpt_ops ? ((icpt *)bb)->instance : NULL;
}

/* A backend-less sequence whose lock calls reach `instance`, for code that
 * drives an interceptor's packet callback directly (etch__console_feed). */
int etch__intercept_seq_for_test(void *instance, etch__intercept_seq **out) {
  *out = NULL;
  icpt *b = (icpt *)etch__calloc(1, sizeof *b);
  if (!b) return ETCH_ENOMEM;
  etch__intercept_seq *s = NULL;
  if (posix_memalign((void **)&s, 64, sizeof *s) != 0) {
    free(b);
    return etch__error(ETCH_ENOMEM, "out of memory");
  }
  memset(s, 0, sizeof *s);
  pthread_mutex_init(&b->inst_lock, NULL);
  b->instance = instance;
  s->owner = b;
  *out = s;
  return ETCH_OK;
}

void etch__intercept_seq_free_for_test(etch__intercept_seq *s) {
  if (!s) return;
  pthread_mutex_destroy(&s->owner->inst_lock);
  free(s->owner);
  free(s);
}

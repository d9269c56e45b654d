/*
 * track.c - process-wide state: the global lock, process identity, tracks
 * and their uuids, thread and process names, and fork handling.
 *
 * Track uuids are derived from a random per-process value, so tracks of
 * different processes never collide in a merged trace; a forked child picks
 * a new value, and since every uuid is derived on use, its tracks move with
 * it.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "sdk/core/sdk.h"

etch_global etch__g = {.lock = PTHREAD_MUTEX_INITIALIZER};
uint32_t etch__slot_gen[ETCH_MAX_SESSIONS] __attribute__((aligned(64)));
etch_writer etch__null_writer;
#define NW &etch__null_writer
__thread etch_tls etch__tls __attribute__((tls_model("initial-exec"))) = {
    .w = {NW, NW, NW, NW, NW, NW, NW, NW, NW}};
#undef NW
_Static_assert(ETCH_MAX_SESSIONS == 8, "etch__tls initializer");

#define MS1(m) \
  ((m) && !((m) & ((m) - 1)) ? __builtin_ctz((m) | 256u) : ETCH_MAX_SESSIONS)
#define MS4(m) MS1(m), MS1(m + 1), MS1(m + 2), MS1(m + 3)
#define MS16(m) MS4(m), MS4(m + 4), MS4(m + 8), MS4(m + 12)
#define MS64(m) MS16(m), MS16(m + 16), MS16(m + 32), MS16(m + 48)
const uint8_t etch__mask_slot[1u << ETCH_MAX_SESSIONS] = {
    MS64(0u), MS64(64u), MS64(128u), MS64(192u)};
#undef MS64
#undef MS16
#undef MS4
#undef MS1

static pthread_once_t global_once = PTHREAD_ONCE_INIT;



static uint64_t new_process_uuid(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v)
    v = etch__boottime_ns() ^ ((uint64_t)getpid() << 32);
  v = etch__mix64(v) & ETCH_UUID_MASK;
  return v ? v : 1;
}

static void set_uuid(etch_track *t, uint64_t uuid) {
  uint8_t *e = etch__pb_put_varint(t->uuid_enc, uuid);
  t->uuid_len = (uint8_t)(e - t->uuid_enc);
  __atomic_store_n(&t->uuid, uuid, __ATOMIC_RELAXED);
}

/* A derived uuid: 56 bits (an 8-byte varint on the wire), never 0. */
static uint64_t derive_uuid(uint64_t key) {
  uint64_t v = etch__mix64(etch__process_uuid() ^ key) & ETCH_UUID_MASK;
  return v ? v : 1;
}

static void atfork_prepare(void) { pthread_mutex_lock(&etch__g.lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&etch__g.lock); }

/*
 * The child starts with no sessions: it must neither inherit the parent's
 * (their buffers are the parent's, copied) nor write into them. Every
 * session slot gets a new generation, so stale writers are never used.
 */
static void atfork_child(void) {
  pthread_mutex_init(&etch__g.lock, NULL);
  for (uint32_t i = 0; i < ETCH_MAX_SESSIONS; i++) {
    etch__g.slots[i] = NULL;
    uint32_t g = etch__slot_gen[i] + 1;
    __atomic_store_n(&etch__slot_gen[i], g ? g : 1, __ATOMIC_RELAXED);
  }
  for (etch_category *c = etch__g.cats; c; c = c->next)
    __atomic_store_n(&c->enabled, 0, __ATOMIC_RELAXED);
  for (uint32_t i = 0; i < ETCH_MAX_SESSIONS; i++) etch__tls_forget(i);
  __atomic_store_n(&etch__g.process_uuid, new_process_uuid(), __ATOMIC_RELAXED);
  etch__g.pid = (int32_t)getpid();
  for (etch_track *t = etch__g.tracks; t; t = t->next)
    set_uuid(t, derive_uuid(t->key));
  etch__tid_reset();
  etch__session_atfork_child();
}

void etch__adopt_process(uint64_t process_uuid, uint32_t seq_base) {
  etch__global_init();
  pthread_mutex_lock(&etch__g.lock);
  __atomic_store_n(&etch__g.process_uuid, process_uuid, __ATOMIC_RELAXED);
  for (etch_track *t = etch__g.tracks; t; t = t->next)
    set_uuid(t, derive_uuid(t->key));
  if (etch__g.next_seq_id < seq_base) etch__g.next_seq_id = seq_base;
  pthread_mutex_unlock(&etch__g.lock);
}

static void global_setup(void) {
  etch__clock_init();
  __atomic_store_n(&etch__g.process_uuid, new_process_uuid(), __ATOMIC_RELAXED);
  etch__g.pid = (int32_t)getpid();
  etch__g.next_seq_id = ETCH_SERVICE_SEQ_ID;
  etch__g.process_track.kind = ETCH_TRACK_KIND_PROCESS;
  etch__g.process_track.key = 0;
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

void etch__global_init(void) { pthread_once(&global_once, global_setup); }

uint64_t etch__process_uuid(void) {
  /* Set once by global_setup (and in a fork child); events only happen
   * after a session exists, so the once-check is off their path. */
  uint64_t u = __atomic_load_n(&etch__g.process_uuid, __ATOMIC_RELAXED);
  if (ETCH_LIKELY(u)) return u;
  etch__global_init();
  return etch__g.process_uuid;
}

uint64_t etch__thread_uuid(int32_t tid) {
  return derive_uuid(0x7468726561640000ull + (uint64_t)(uint32_t)tid);
}

uint64_t etch__track_uuid(const etch_track *t) {
  if (!t || t->kind == ETCH_TRACK_KIND_PROCESS) return etch__process_uuid();
  return __atomic_load_n(&t->uuid, __ATOMIC_RELAXED);
}

uint64_t etch_track_uuid(const etch_track *t) { return etch__track_uuid(t); }

const etch_track *etch_process_track(void) {
  etch__global_init();
  return &etch__g.process_track;
}

static const etch_track *track_get(uint8_t kind, const char *name, uint64_t id,
                                   const etch_track *parent, uint8_t unit,
                                   const char *unit_name) {
  if (!name) {
    etch__error(ETCH_EINVAL, "track name is NULL");
    return NULL;
  }
  etch__global_init();
  uint64_t key = etch__hash_bytes(name, strlen(name), kind);
  key = etch__mix64(key ^ etch__mix64(id));
  if (parent && parent->kind != ETCH_TRACK_KIND_PROCESS)
    key = etch__mix64(key ^ parent->key);
  if (parent && parent->kind == ETCH_TRACK_KIND_PROCESS) parent = NULL;
  pthread_mutex_lock(&etch__g.lock);
  etch_track *t;
  for (t = etch__g.tracks; t; t = t->next)
    if (t->key == key && t->kind == kind) break;
  if (!t) {
    t = (etch_track *)etch__calloc(1, sizeof *t);
    if (t) {
      t->name = etch__strdup(name);
      t->unit_name = unit_name ? etch__strdup(unit_name) : NULL;
      if (!t->name || (unit_name && !t->unit_name)) {
        free(t->name);
        free(t->unit_name);
        free(t);
        t = NULL;
      }
    }
    if (t) {
      t->key = key;
      set_uuid(t, derive_uuid(key));
      t->kind = kind;
      t->unit = unit;
      t->parent = parent;
      t->id = ++etch__g.next_track_id;
      t->next = etch__g.tracks;
      etch__g.tracks = t;
    }
  }
  pthread_mutex_unlock(&etch__g.lock);
  return t;
}

const etch_track *etch_track_new(const char *name, uint64_t id,
                                 const etch_track *parent) {
  return track_get(ETCH_TRACK_KIND_NAMED, name, id, parent, 0, NULL);
}

const etch_track *etch_counter_track_new(const char *name,
                                         etch_counter_unit unit,
                                         const char *unit_name,
                                         const etch_track *parent) {
  if ((unsigned)unit > ETCH_UNIT_SIZE_BYTES) {
    etch__error(ETCH_EINVAL, "counter track '%s': unknown unit %d",
                name ? name : "(null)", (int)unit);
    return NULL;
  }
  return track_get(ETCH_TRACK_KIND_COUNTER, name, 0, parent, (uint8_t)unit,
                   unit_name);
}

const etch_track *etch__counter_track_for(const char *name) {
  return track_get(ETCH_TRACK_KIND_COUNTER, name, 0, NULL, 0, NULL);
}

void etch_thread_set_name(const char *name) {
  if (!name) return;
  size_t n = strnlen(name, sizeof etch__tls.thread_name - 1);
  memcpy(etch__tls.thread_name, name, n);
  etch__tls.thread_name[n] = '\0';
  etch__tls.thread_name_set = true;
  /* Writers of this thread re-emit their descriptor at the next event. */
  for (uint32_t i = 0; i < ETCH_MAX_SESSIONS; i++)
    if (etch__tls_writer(i)) {
      etch__tls.w[i]->reset_deadline = 0;
      etch__tls.w[i]->lim = 0;
    }
}

void etch_process_set_name(const char *name) {
  if (!name) return;
  etch__global_init();
  pthread_mutex_lock(&etch__g.lock);
  snprintf(etch__g.process_name, sizeof etch__g.process_name, "%s", name);
  etch__g.process_name_set = true;
  __atomic_fetch_add(&etch__g.names_gen, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&etch__g.lock);
}

uint64_t etch_now(void) { return etch__boottime_ns(); }

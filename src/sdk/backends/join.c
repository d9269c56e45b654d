/*
 * join.c - two copies of libetch in one process record one trace.
 *
 * A program linked with libetch.a that dlopen()s a plugin linked with its
 * own libetch.a has two copies of etch, each with its own globals: left
 * alone, the plugin's copy has no session and its events go nowhere. With
 * ETCH_OUT, the copy that starts tracing first (the owner) publishes itself
 * in the environment (ETCH__JOIN=PID:ADDRESS:TOKEN, the address of a table
 * in its memory); a copy that starts later in the same process (a guest)
 * finds it there, takes the owner's process uuid (so thread and named
 * tracks are the same tracks) and a range of sequence ids of its own, and
 * records into a session of its own that writes no file. Its trace goes to
 * the owner: when the guest stops (its etch_shutdown, its exit handler, or
 * the plugin's dlclose) it hands its packets over, and when the owner
 * writes its trace it first asks every guest still running for theirs. The
 * owner's file then holds every copy's packets and a TraceStats with one
 * BufferStats per copy. A guest that stops after the owner wrote is
 * appended to the file, with a TraceStats that counts it.
 *
 * The table is versioned (JOIN_ABI); a copy of another version is not
 * joined and says so on stderr. The environment can lie (a program that
 * exec'd keeps its pid and environment): the address is read through
 * process_vm_readv, which fails instead of faulting, and must hold the
 * magic and the token before it is used.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "buffer/tracefile.h"
#include "base/envvars.h"
#include "sdk/core/sdk.h"

#define JOIN_ENV (etch__envvars[ETCH_ENV__JOIN].name)
#define JOIN_MAGIC 0x6e696f6a68637465ull /* "etchjoin" */
#define JOIN_ABI 1u
/* Sequence ids of guest k start at k << JOIN_SEQ_SHIFT. */
#define JOIN_SEQ_SHIFT 24

typedef struct join_guest join_guest;

/* The owner's table: what a guest calls. Its layout is the ABI. */
typedef struct join_host {
  uint64_t magic;
  uint32_t abi;
  uint32_t pid;
  uint64_t token;
  uint64_t process_uuid;
  /* Adds `g`; gives its first sequence id. Non-zero: not joined. */
  int (*attach)(join_guest *g, uint32_t *seq_base);
  /* `g` leaves, handing over its trace (packets without stats, malloc'd;
   * the owner frees them) or nothing (data NULL). */
  void (*leave)(join_guest *g, uint8_t *data, size_t len,
                const uint64_t *stats);
} join_host;

/* A guest's table, in the guest's memory, linked into the owner's list. */
struct join_guest {
  uint64_t magic;
  uint32_t abi;
  /* The owner asks for the trace: true with it, false when the guest has
   * given it already or is giving it (its leave follows). */
  bool (*take)(uint8_t **data, size_t *len, uint64_t *stats);
  join_guest *next; /* the owner's, under its lock */
};

/* ---- the owner's side --------------------------------------------------------- */

typedef etch__trace_part part;

enum { COLLECTING, WRITING, WRITTEN };

static struct {
  pthread_mutex_t lock;
  join_host host;
  bool published;
  pid_t pid;
  join_guest *guests;
  uint32_t nattached;
  int state;
  part *parts; /* handed over, not yet written */
  size_t nparts, cap;
  part *late; /* handed over while the owner was writing */
  size_t nlate, caplate;
  /* After the write: where it went, and every copy's stats so far. */
  char *path;
  uint64_t (*all)[ETCH_TRACEFILE_NSTATS];
  size_t nall;
  bool compress;
  uint32_t *seqs; /* the owner's sequences, for the appended TraceStats */
  size_t nseqs;
} own = {.lock = PTHREAD_MUTEX_INITIALIZER};

static bool push_to(part **v, size_t *n, size_t *capp, uint8_t *data,
                    size_t len, const uint64_t *stats) {
  if (*n == *capp) {
    size_t cap = *capp ? *capp * 2 : 4;
    part *p = (part *)etch__realloc(*v, cap * sizeof *p);
    if (!p) return false;
    *v = p;
    *capp = cap;
  }
  part *p = &(*v)[(*n)++];
  p->data = data;
  p->len = len;
  memcpy(p->stats, stats, sizeof p->stats);
  return true;
}

static bool push_part(uint8_t *data, size_t len, const uint64_t *stats) {
  return push_to(&own.parts, &own.nparts, &own.cap, data, len, stats);
}

static int host_attach(join_guest *g, uint32_t *seq_base) {
  if (!g || g->magic != JOIN_MAGIC || g->abi != JOIN_ABI) return ETCH_EINVAL;
  pthread_mutex_lock(&own.lock);
  int rc = ETCH_OK;
  if (own.state != COLLECTING || own.nattached + 1 >= (1u << (32 - JOIN_SEQ_SHIFT))) {
    rc = ETCH_ESTATE; /* the trace is written already */
  } else {
    *seq_base = ++own.nattached << JOIN_SEQ_SHIFT;
    g->next = own.guests;
    own.guests = g;
  }
  pthread_mutex_unlock(&own.lock);
  return rc;
}

static void unlink_guest(join_guest *g) {
  for (join_guest **pp = &own.guests; *pp; pp = &(*pp)->next)
    if (*pp == g) {
      *pp = g->next;
      return;
    }
}

/* Appends a late guest's packets and a TraceStats of every copy to the
 * written file. Owner lock held. */
static void append_late(uint8_t *data, size_t len, const uint64_t *stats) {
  uint64_t(*all)[ETCH_TRACEFILE_NSTATS] = (uint64_t(*)[ETCH_TRACEFILE_NSTATS])etch__realloc(
      own.all, (own.nall + 1) * sizeof *own.all);
  if (!all) {
    fprintf(stderr, "etch: out of memory: a second copy of etch's trace "
                    "is lost\n");
    return;
  }
  own.all = all;
  memcpy(own.all[own.nall++], stats, sizeof own.all[0]);
  etch_tracefile o;
  etch__tracefile_init(&o, own.compress);
  int rc = etch__tracefile_put_raw(&o, data, len);
  if (!rc) rc = etch__tracefile_put_stats_n(&o, (const uint64_t *)own.all,
                                            own.nall, own.seqs, own.nseqs);
  uint8_t *out = NULL;
  size_t n = 0;
  if (!rc) rc = etch__tracefile_finish(&o, &out, &n);
  else etch__tracefile_free(&o);
  int fd = rc ? -1 : open(own.path, O_WRONLY | O_APPEND | O_CLOEXEC);
  size_t off = 0;
  while (fd >= 0 && off < n) {
    ssize_t w = write(fd, out + off, n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += (size_t)w;
  }
  if (fd < 0 || off < n)
    fprintf(stderr,
            "etch: the trace of a second copy of etch in this process could "
            "not be added to %s: %s\n",
            own.path, rc ? etch_last_error() : strerror(errno));
  if (fd >= 0) close(fd);
  free(out);
}

static void host_leave(join_guest *g, uint8_t *data, size_t len,
                       const uint64_t *stats) {
  pthread_mutex_lock(&own.lock);
  unlink_guest(g);
  if (data) {
    bool ok = true;
    if (own.state == WRITTEN) {
      append_late(data, len, stats);
      free(data);
    } else if (own.state == WRITING) { /* added once the write is over */
      ok = push_to(&own.late, &own.nlate, &own.caplate, data, len, stats);
    } else {
      ok = push_part(data, len, stats);
    }
    if (!ok) {
      fprintf(stderr, "etch: out of memory: a second copy of etch's trace "
                      "is lost\n");
      free(data);
    }
  }
  pthread_mutex_unlock(&own.lock);
}

static char *fmt_env(void) {
  char v[80];
  snprintf(v, sizeof v, "%ld:%" PRIxPTR ":%" PRIx64, (long)own.pid,
           (uintptr_t)&own.host, own.host.token);
  return etch__strdup(v);
}

/* Reads a join_host at `addr` without trusting that anything is there. */
static bool probe_host(uintptr_t addr, join_host *out) {
  struct iovec local = {.iov_base = out, .iov_len = sizeof *out};
  struct iovec remote = {.iov_base = (void *)addr, .iov_len = sizeof *out};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) ==
         (ssize_t)sizeof *out;
}

/* The owner this process's environment names, or NULL. */
static join_host *find_host(void) {
  const char *v = etch__env(ETCH_ENV__JOIN);
  if (!v) return NULL;
  long pid;
  uintptr_t addr;
  uint64_t token;
  if (sscanf(v, "%ld:%" SCNxPTR ":%" SCNx64, &pid, &addr, &token) != 3 ||
      pid != (long)getpid() || addr == (uintptr_t)&own.host)
    return NULL;
  join_host h;
  if (!probe_host(addr, &h) || h.magic != JOIN_MAGIC || h.token != token ||
      h.pid != (uint32_t)getpid())
    return NULL;
  if (h.abi != JOIN_ABI) {
    fprintf(stderr,
            "etch: another copy of etch in this process records ETCH_OUT but "
            "speaks join version %u, this one %u: this copy's events are not "
            "recorded (link both with the same etch, or with libetch.so)\n",
            h.abi, JOIN_ABI);
    return (join_host *)-1;
  }
  return (join_host *)addr;
}

bool etch__join_host_present(void) {
  if (!etch__env(ETCH_ENV__JOIN)) return false;
  join_host *h = find_host();
  return h && h != (join_host *)-1;
}

void etch__join_publish(bool compress) {
  pthread_mutex_lock(&own.lock);
  own.pid = getpid();
  own.state = COLLECTING;
  own.compress = compress;
  own.host = (join_host){
      .magic = JOIN_MAGIC,
      .abi = JOIN_ABI,
      .pid = (uint32_t)own.pid,
      .token = etch__mix64(etch__process_uuid() ^ (uint64_t)own.pid ^
                           etch__monotonic_ns()),
      .process_uuid = etch__process_uuid(),
      .attach = host_attach,
      .leave = host_leave,
  };
  char *v = fmt_env();
  if (v && setenv(JOIN_ENV, v, 1) == 0) own.published = true;
  free(v);
  pthread_mutex_unlock(&own.lock);
}

bool etch__join_owner(void) {
  return own.published && own.pid == getpid();
}

int etch__join_gather(etch__trace_part **parts, size_t *n) {
  *parts = NULL;
  *n = 0;
  if (!etch__join_owner()) return ETCH_OK;
  pthread_mutex_lock(&own.lock);
  own.state = WRITING;
  /* Guests still running: their traces now (each stops its session). */
  while (own.guests) {
    join_guest *g = own.guests;
    own.guests = g->next;
    uint8_t *data = NULL;
    size_t len = 0;
    uint64_t stats[ETCH_TRACEFILE_NSTATS];
    if (g->take(&data, &len, stats) && !push_part(data, len, stats)) free(data);
  }
  *parts = (etch__trace_part *)own.parts;
  *n = own.nparts;
  pthread_mutex_unlock(&own.lock);
  return ETCH_OK;
}

void etch__join_written(const char *path, const uint64_t *own_stats,
                        const uint32_t *seqs, size_t nseqs) {
  if (!etch__join_owner()) return;
  pthread_mutex_lock(&own.lock);
  free(own.seqs);
  own.seqs = nseqs ? (uint32_t *)etch__malloc(nseqs * sizeof *seqs) : NULL;
  own.nseqs = own.seqs ? nseqs : 0;
  if (own.seqs) memcpy(own.seqs, seqs, nseqs * sizeof *seqs);
  own.state = WRITTEN;
  free(own.path);
  own.path = path ? etch__strdup(path) : NULL;
  free(own.all);
  own.all = (uint64_t(*)[ETCH_TRACEFILE_NSTATS])etch__calloc(own.nparts + 1, sizeof *own.all);
  own.nall = 0;
  if (own.all) {
    memcpy(own.all[own.nall++], own_stats, sizeof own.all[0]);
    for (size_t i = 0; i < own.nparts; i++)
      memcpy(own.all[own.nall++], own.parts[i].stats, sizeof own.all[0]);
  }
  for (size_t i = 0; i < own.nparts; i++) free(own.parts[i].data);
  free(own.parts);
  own.parts = NULL;
  own.nparts = own.cap = 0;
  for (size_t i = 0; i < own.nlate; i++) {
    if (own.path && own.all) append_late(own.late[i].data, own.late[i].len,
                                         own.late[i].stats);
    free(own.late[i].data);
  }
  free(own.late);
  own.late = NULL;
  own.nlate = own.caplate = 0;
  pthread_mutex_unlock(&own.lock);
}

/* ---- the guest's side --------------------------------------------------------- */

static join_host *guest_host;
static join_guest guest = {.magic = JOIN_MAGIC, .abi = JOIN_ABI};
static bool (*guest_give)(uint8_t **data, size_t *len, uint64_t *stats);

int etch__join_as_guest(bool (*give)(uint8_t **, size_t *, uint64_t *)) {
  join_host *h = find_host();
  if (!h) return 0;
  if (h == (join_host *)-1) return -1;
  guest.take = give;
  guest_give = give;
  uint32_t base = 0;
  if (h->attach(&guest, &base) != ETCH_OK) {
    fprintf(stderr,
            "etch: another copy of etch in this process has written its "
            "trace already: this copy's events are not recorded\n");
    return -1;
  }
  etch__adopt_process(h->process_uuid, base);
  guest_host = h;
  return 1;
}

bool etch__join_guest(void) { return guest_host != NULL; }

void etch__join_leave(void) {
  join_host *h = guest_host;
  if (!h) return;
  guest_host = NULL;
  uint8_t *data = NULL;
  size_t len = 0;
  uint64_t stats[ETCH_TRACEFILE_NSTATS];
  bool have = guest_give(&data, &len, stats);
  h->leave(&guest, have ? data : NULL, have ? len : 0, stats);
}

void etch__join_atfork_child(void) {
  /* Neither side's bookkeeping is the child's: the owner's guests are the
   * parent's, and so is a guest's owner. */
  pthread_mutex_init(&own.lock, NULL);
  own.published = false;
  own.guests = NULL;
  own.nattached = 0;
  for (size_t i = 0; i < own.nparts; i++) free(own.parts[i].data);
  free(own.parts);
  own.parts = NULL;
  own.nparts = own.cap = 0;
  free(own.path);
  own.path = NULL;
  free(own.all);
  own.all = NULL;
  own.nall = 0;
  free(own.seqs);
  own.seqs = NULL;
  own.nseqs = 0;
  for (size_t i = 0; i < own.nlate; i++) free(own.late[i].data);
  free(own.late);
  own.late = NULL;
  own.nlate = own.caplate = 0;
  guest_host = NULL;
}

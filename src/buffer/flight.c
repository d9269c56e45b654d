/*
 * flight.c - the flight recorder's file: made and mapped by a recording
 * process, turned into a trace by anyone after it died (see flight.h).
 */
#define _GNU_SOURCE
#include "buffer/flight.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/sys.h"
#include "buffer/sink.h"
#include "buffer/tracefile.h"
#include "pb/pb.h"
#include "proto/perfetto.h"

#include "etch/common.h"

_Static_assert(sizeof(etch_flight_header) <= ETCH_FLIGHT_HEADER_SIZE,
               "the flight header fits its page");

/* ---- recording ------------------------------------------------------------ */

void (*etch__flight_setup_hook)(int step);

/* The test hook, at each point of the setup a process may die at. */
static void setup_step(int step) {
  void (*hook)(int) = __atomic_load_n(&etch__flight_setup_hook,
                                      __ATOMIC_ACQUIRE);
  if (hook) hook(step);
}

static int create_failed(int fd, const char *path, int e, const char *what,
                         size_t len) {
  close(fd);
  unlink(path);
  return etch__error(ETCH_EIO, "cannot %s the flight file '%s' (%zu bytes): %s",
                     what, path, len, strerror(e));
}

/*
 * The setup costs the same for any size: the header page is written, the
 * file is made its length with ftruncate (sparse: no block, no page yet)
 * and mapped without populating it; each chunk's pages are faulted in by
 * the writer that first acquires it (buffer.c, out of line). A process that
 * dies on the way leaves an empty file or a header that says
 * ETCH_FLIGHT_SETTING_UP, which recovery names as such.
 */
int etch__flight_create(etch_flight *f, const char *path, uint64_t size,
                        etch_buffer_fill fill, const etch_flight_id *id,
                        etch_buffer *b) {
  memset(f, 0, sizeof *f);
  f->fd = -1;
  uint32_t cs, n;
  etch__buffer_geometry(size, &cs, &n);
  size_t len = ETCH_FLIGHT_HEADER_SIZE + (size_t)n * cs;
  int fd =
      etch__sys_open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return etch__error(ETCH_EIO, "cannot make the flight file '%s': %s", path,
                       strerror(errno));
  setup_step(ETCH_FLIGHT_STEP_EMPTY);
  /* Blocks are not reserved (that costs in proportion to the size): a
   * file system without room for the ring now says so here; one that
   * fills up later makes a writer's first touch of a page fault (SIGBUS),
   * as any file mapping does. */
  struct statvfs vfs;
  if (fstatvfs(fd, &vfs) == 0 && vfs.f_frsize &&
      (uint64_t)vfs.f_bavail < (len + vfs.f_frsize - 1) / vfs.f_frsize)
    return create_failed(fd, path, ENOSPC, "make", len);

  /* The header first, saying the setup is not finished. */
  uint8_t *page = (uint8_t *)etch__calloc(1, ETCH_FLIGHT_HEADER_SIZE);
  if (!page) {
    close(fd);
    unlink(path);
    return ETCH_ENOMEM;
  }
  etch_flight_header *h = (etch_flight_header *)page;
  memcpy(h->magic, ETCH_FLIGHT_MAGIC, 8);
  h->version = ETCH_FLIGHT_VERSION;
  h->header_size = ETCH_FLIGHT_HEADER_SIZE;
  h->chunk_size = cs;
  h->chunk_header_size = ETCH_CHUNK_HEADER_SIZE;
  h->nchunks = n;
  h->fill = (uint32_t)fill;
  h->state = ETCH_FLIGHT_SETTING_UP;
  h->pid = id->pid;
  h->process_uuid = id->process_uuid;
  snprintf(h->etch_version, sizeof h->etch_version, "%s", ETCH_VERSION_STRING);
  snprintf(h->process_name, sizeof h->process_name, "%s",
           id->process_name ? id->process_name : "");
  ssize_t w;
  do w = etch__sys_pwrite(fd, page, ETCH_FLIGHT_HEADER_SIZE, 0);
  while (w < 0 && errno == EINTR);
  int e = w < 0 ? errno : ENOSPC;
  free(page);
  if (w != (ssize_t)ETCH_FLIGHT_HEADER_SIZE)
    return create_failed(fd, path, e, "write", len);
  setup_step(ETCH_FLIGHT_STEP_HEADER);
  if (etch__sys_ftruncate(fd, (off_t)len) != 0)
    return create_failed(fd, path, errno, "size", len);
  setup_step(ETCH_FLIGHT_STEP_SIZED);
  void *map =
      etch__sys_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return create_failed(fd, path, errno, "map", len);
  f->path = etch__strdup(path);
  if (!f->path) {
    munmap(map, len);
    close(fd);
    unlink(path);
    return ETCH_ENOMEM;
  }
  f->fd = fd;
  f->map = (uint8_t *)map;
  f->map_len = len;
  setup_step(ETCH_FLIGHT_STEP_MAPPED);
  /* The clocks as recording begins, then the state, with release: a
   * reader that sees RECORDING sees them. */
  h = (etch_flight_header *)map;
  h->boottime_ns = etch__clock_ns(CLOCK_BOOTTIME);
  h->monotonic_ns = etch__clock_ns(CLOCK_MONOTONIC);
  h->realtime_ns = etch__clock_ns(CLOCK_REALTIME);
  __atomic_store_n(&h->state, ETCH_FLIGHT_RECORDING, __ATOMIC_RELEASE);
  etch__buffer_init_at(b, f->map + ETCH_FLIGHT_HEADER_SIZE, cs, n, fill);
  b->prefault = true;
  return ETCH_OK;
}

void etch__flight_close(etch_flight *f, bool keep) {
  if (!f->map) return;
  if (keep) {
    etch_flight_header *h = (etch_flight_header *)f->map;
    __atomic_store_n(&h->state, ETCH_FLIGHT_CLOSED, __ATOMIC_RELEASE);
  } else {
    unlink(f->path);
  }
  munmap(f->map, f->map_len);
  close(f->fd);
  free(f->path);
  memset(f, 0, sizeof *f);
  f->fd = -1;
}

void etch__flight_forget(etch_flight *f) {
  if (!f->map) return;
  munmap(f->map, f->map_len);
  close(f->fd);
  free(f->path);
  memset(f, 0, sizeof *f);
  f->fd = -1;
}

/* ---- recovery ------------------------------------------------------------- */

typedef struct recovery {
  etch_tracefile o;
  etch_flight_report *rep;
  etch_flight_thread *last; /* the sequence of the packet before */
} recovery;

static etch_flight_thread *thread_of(etch_flight_report *rep, uint32_t seq) {
  for (size_t i = rep->nthreads; i-- > 0;)
    if (rep->threads[i].seq == seq) return &rep->threads[i];
  etch_flight_thread *v = (etch_flight_thread *)etch__realloc(
      rep->threads, (rep->nthreads + 1) * sizeof *v);
  if (!v) return NULL;
  rep->threads = v;
  etch_flight_thread *t = &v[rep->nthreads++];
  memset(t, 0, sizeof *t);
  t->seq = seq;
  return t;
}

/* A thread descriptor's pid, tid and name, when the packet has one. */
static void note_thread(etch_flight_thread *t, const uint8_t *pkt,
                        uint32_t len) {
  etch__pb_dec d, td, th;
  etch__pb_field f, g, h;
  etch__pb_dec_init(&d, pkt, len);
  while (etch__pb_next(&d, &f)) {
    if (f.id != ETCH_PKT_TRACK_DESCRIPTOR || f.wt != ETCH_PB_LEN) continue;
    etch__pb_dec_init(&td, f.data, f.len);
    while (etch__pb_next(&td, &g)) {
      if (g.id != ETCH_TD_THREAD || g.wt != ETCH_PB_LEN) continue;
      int32_t pid = 0, tid = 0;
      const uint8_t *name = NULL;
      size_t nlen = 0;
      etch__pb_dec_init(&th, g.data, g.len);
      while (etch__pb_next(&th, &h)) {
        if (h.id == ETCH_THD_PID && h.wt == ETCH_PB_VARINT) pid = (int32_t)h.u;
        if (h.id == ETCH_THD_TID && h.wt == ETCH_PB_VARINT) tid = (int32_t)h.u;
        if (h.id == ETCH_THD_THREAD_NAME && h.wt == ETCH_PB_LEN) {
          name = h.data;
          nlen = h.len;
        }
      }
      /* The writer's own thread: the first descriptor of its sequence
       * (a replayed important event's may name another thread later). */
      if (t->tid || th.err) continue;
      t->pid = pid;
      t->tid = tid;
      if (nlen >= sizeof t->name) nlen = sizeof t->name - 1;
      if (name) memcpy(t->name, name, nlen);
      t->name[nlen] = '\0';
    }
  }
}

static int on_packet(void *ctx, uint32_t seq, const uint8_t *data,
                     uint32_t len, bool dropped_before) {
  recovery *r = (recovery *)ctx;
  etch_flight_thread *t = r->last;
  if (!t || t->seq != seq) t = r->last = thread_of(r->rep, seq);
  if (t) {
    /* The top level only: a track event is one event (an
     * etch.dropped_events note too, here); a descriptor may name the
     * thread. */
    etch__pb_dec d;
    etch__pb_field f;
    bool te = false, td = false;
    etch__pb_dec_init(&d, data, len);
    while (etch__pb_next_fast(&d, &f)) {
      te |= f.id == ETCH_PKT_TRACK_EVENT;
      td |= f.id == ETCH_PKT_TRACK_DESCRIPTOR;
    }
    t->packets++;
    t->events += te;
    if (td && !t->tid) note_thread(t, data, len);
  }
  return etch__tracefile_on_packet(&r->o, seq, data, len, dropped_before);
}

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return etch__error(ETCH_EFORMAT, "%s", msg);
}

/* The header, checked against itself and the file's length. */
static int check_header(const uint8_t *file, size_t len, etch_flight_header *h) {
  if (len == 0)
    return bad("an empty file: a flight file's setup never finished (the "
               "process ended before recording began); nothing to recover");
  if (len < sizeof *h || memcmp(file, ETCH_FLIGHT_MAGIC, 8) != 0)
    return bad("not an etch flight file (no flight header)");
  memcpy(h, file, sizeof *h);
  h->etch_version[sizeof h->etch_version - 1] = '\0';
  h->process_name[sizeof h->process_name - 1] = '\0';
  if (h->version == ETCH_FLIGHT_VERSION && h->state == ETCH_FLIGHT_SETTING_UP)
    return bad("the flight file's setup never finished: the process (pid %d, "
               "%s) ended before recording began; nothing to recover",
               h->pid, h->process_name[0] ? h->process_name : "?");
  if (h->version != ETCH_FLIGHT_VERSION)
    return bad("a flight file of format version %u (written by etch %s); "
               "this etch reads version %u",
               h->version, h->etch_version, ETCH_FLIGHT_VERSION);
  if (h->header_size != ETCH_FLIGHT_HEADER_SIZE ||
      h->chunk_header_size != ETCH_CHUNK_HEADER_SIZE)
    return bad("a damaged flight file: its header says a header of %u bytes "
               "and chunk headers of %u (version %u has %u and %u)",
               h->header_size, h->chunk_header_size, ETCH_FLIGHT_VERSION,
               ETCH_FLIGHT_HEADER_SIZE, ETCH_CHUNK_HEADER_SIZE);
  if (h->chunk_size < 4096 || h->chunk_size > 65536 ||
      (h->chunk_size & (h->chunk_size - 1)) || h->nchunks < 2 ||
      h->nchunks > UINT32_MAX / 2 || h->fill > ETCH_BUFFER_DISCARD)
    return bad("a damaged flight file: its header says %u chunks of %u "
               "bytes, fill %u",
               h->nchunks, h->chunk_size, h->fill);
  uint64_t want = ETCH_FLIGHT_HEADER_SIZE + (uint64_t)h->nchunks * h->chunk_size;
  if (len < want)
    return bad("a truncated flight file: its header says %llu bytes, the "
               "file has %zu",
               (unsigned long long)want, len);
  return ETCH_OK;
}

/* Per writer: its chunks in the file, the oldest id, the ids missing
 * between its oldest and newest, and whether the newest was open. */
static int scan_chunks(const etch_buffer *b, etch_flight_report *rep) {
  for (uint32_t i = 0; i < b->nchunks; i++) {
    const etch_chunk *c = etch__buffer_chunk(b, i);
    if (c->state == ETCH_CHUNK_FREE) continue;
    if (c->state != ETCH_CHUNK_WRITING && c->state != ETCH_CHUNK_COMPLETE) {
      rep->bad_chunks++;
      continue;
    }
    rep->chunks++;
    etch_flight_thread *t = thread_of(rep, c->writer_id);
    if (!t) return ETCH_ENOMEM;
    if (!t->chunks || c->chunk_id < t->first_chunk) t->first_chunk = c->chunk_id;
    /* missing_chunks holds the newest id until the end */
    if (!t->chunks || c->chunk_id >= t->missing_chunks) {
      t->missing_chunks = c->chunk_id;
      t->open = c->state == ETCH_CHUNK_WRITING;
    }
    t->chunks++;
  }
  for (size_t k = 0; k < rep->nthreads; k++) {
    etch_flight_thread *t = &rep->threads[k];
    uint64_t span = t->missing_chunks - t->first_chunk + 1;
    t->missing_chunks = span > t->chunks ? span - t->chunks : 0;
  }
  return ETCH_OK;
}

int etch__flight_recover(const uint8_t *file, size_t len, bool compress,
                         int sink_fd, uint8_t **out, size_t *out_len,
                         etch_flight_report *rep) {
  *out = NULL;
  *out_len = 0;
  etch_flight_report local;
  if (!rep) rep = &local;
  memset(rep, 0, sizeof *rep);
  int rc = check_header(file, len, &rep->header);
  if (rc) {
    if (rep == &local) etch__flight_report_free(rep);
    return rc;
  }
  const etch_flight_header *h = &rep->header;
  /* The bytes are the caller's copy (nobody writes them meanwhile): the
   * buffer's read takes what it reads into a snapshot of its own. */
  size_t bytes = (size_t)h->nchunks * h->chunk_size;
  etch_buffer b;
  etch__buffer_init_at(&b, (uint8_t *)(uintptr_t)(file + ETCH_FLIGHT_HEADER_SIZE),
                       h->chunk_size, h->nchunks, (etch_buffer_fill)h->fill);
  rc = scan_chunks(&b, rep);

  recovery r;
  memset(&r, 0, sizeof r);
  r.rep = rep;
  etch_tracefile *o = &r.o;
  etch__tracefile_init(o, compress);
  etch_sink sink;
  if (sink_fd >= 0) {
    etch__sink_init(&sink, sink_fd, false);
    o->sink = &sink;
  }
  if (!rc)
    rc = etch__tracefile_put_clock_snapshot_at(o, h->boottime_ns,
                                               h->monotonic_ns, h->realtime_ns);
  if (!rc) rc = etch__buffer_read(&b, on_packet, &r, &rep->lost_fragments);
  uint64_t lossy = 0;
  if (!rc) {
    const etch_loss *lost = ETCH_VEC_AT(&o->lost, etch_loss);
    for (size_t i = 0; i < ETCH_VEC_COUNT(&o->lost, etch_loss); i++) {
      etch_flight_thread *t = thread_of(rep, lost[i].seq);
      if (t) t->undecodable += lost[i].events;
    }
    for (size_t k = 0; k < rep->nthreads; k++) {
      etch_flight_thread *t = &rep->threads[k];
      t->events -= t->undecodable < t->events ? t->undecodable : t->events;
      if (t->missing_chunks || t->undecodable || t->first_chunk) lossy++;
    }
    etch_buffer_stats bs = {.buffer_size = bytes, .chunks_written = rep->chunks};
    rc = etch__tracefile_put_stats(o, &bs, h->chunk_size, lossy);
  }
  etch__buffer_destroy(&b);
  if (rc) {
    etch__tracefile_free(o);
  } else {
    rc = etch__tracefile_finish(o, out, out_len);
    if (rc == ETCH_EIO && sink_fd >= 0)
      rc = etch__error(ETCH_EIO, "cannot write the recovered trace: %s",
                       strerror(sink.err));
  }
  if (rep == &local || rc) etch__flight_report_free(rep);
  return rc;
}

void etch__flight_report_free(etch_flight_report *rep) {
  free(rep->threads);
  rep->threads = NULL;
  rep->nthreads = 0;
}

/*
 * reader.c - the public reader API: opening traces (a file, memory, or a
 * stream of fed packets), options and subscriptions, running the read over
 * the source (source.c) and delivering what was held at its end
 * (deliver.c), stats and time bounds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "proto/perfetto.h"
#include "base/clock.h"
#include "reader/clock.h"
#include "reader/custom.h"
#include "reader/deliver.h"
#include "reader/errors.h"
#include "reader/machine.h"
#include "reader/packet.h"
#include "reader/progress.h"
#include "reader/source.h"
#include "reader/stacks.h"
#include "reader/track.h"
#include "reader/reader_int.h"
#include "reader/reader_priv.h"

/* ---- options: progress, truncated traces -------------------------------------------- */

int etch_reader_set_progress(etch_reader *r, int on) {
  if (!r) return etch__error(ETCH_EINVAL, "reader: NULL");
  if (r->ran) return etch__error(ETCH_ESTATE, "reader: already run");
  r->progress_want = on != 0;
  return ETCH_OK;
}

int etch_reader_set_allow_truncated(etch_reader *r, int on) {
  if (!r) return etch__error(ETCH_EINVAL, "reader: NULL");
  if (r->ran) return etch__error(ETCH_ESTATE, "reader: already run");
  r->allow_truncated = on != 0;
  return ETCH_OK;
}

int etch_reader_set_strict(etch_reader *r, int on) {
  if (!r) return etch__error(ETCH_EINVAL, "reader: NULL");
  if (r->ran) return etch__error(ETCH_ESTATE, "reader: already run");
  r->strict = on != 0;
  return ETCH_OK;
}

const char *etch__reader_malformed_first(const etch_reader *r) {
  return r && r->stats.malformed_packets ? r->malformed_first : NULL;
}

void etch__reader_set_progress_to(etch_reader *r, int fd, uint64_t delay_ns) {
  r->progress_want = true;
  r->progress_forced = true;
  r->progress_fd = fd;
  r->progress_delay = delay_ns;
  r->progress_every = delay_ns;
}

/* ---- public API --------------------------------------------------------------------- */

static int reader_new(etch_reader **out) {
  etch_reader *r = (etch_reader *)etch__calloc(1, sizeof *r);
  if (!r) return ETCH_ENOMEM;
  if (etch__strpool_init(&r->pool, RD_MAX_POOL_BYTES)) {
    free(r);
    return ETCH_ENOMEM;
  }
  r->empty = etch__strpool_get(&r->pool, "", 0);
  if (!r->empty) {
    etch__strpool_free(&r->pool);
    free(r);
    return ETCH_ENOMEM;
  }
  etch__rd_clocks_init(&r->clocks);
  if (etch__rd_machines_init(r)) {
    etch__strpool_free(&r->pool);
    free(r);
    return ETCH_ENOMEM;
  }
  etch__arena_init(&r->track_arena, 64 * 1024);
  etch__arena_init(&r->scratch, 16 * 1024);
  etch__arena_init(&r->track_recs, 256 * 1024);
  r->global_track.info.uuid = 0;
  r->global_track.info.kind = ETCH_TRACK_GLOBAL;
  r->global_track.info.name = r->empty;
  r->global_track.info.counter_unit_name = r->empty;
  r->order = ETCH_ORDER_TIMESTAMP;
  r->progress_fd = 2;
  r->watch_at = UINT64_MAX;
  r->progress_delay = 1000000000ull;
  r->progress_every = 200000000ull;
  r->track_gen = 1; /* rd_track.res_gen 0 = never resolved */
  r->gen = 1;       /* rd_seq.fgen 0 = never looked at */
  r->latest_ts = 0;
  r->unpack = etch__rd_decompress; /* packet.c reads nested records */
  *out = r;
  return 0;
}

int etch_reader_open_memory(etch_reader **out, const void *data, size_t len) {
  if (!out || (!data && len)) return etch__error(ETCH_EINVAL, "reader: no data");
  int rc = reader_new(out);
  if (rc) return rc;
  (*out)->data = (const uint8_t *)data;
  (*out)->len = len;
  return 0;
}

bool etch__file_recording(int fd) {
  /* The writer's lock (buffer/sink.h): an open file description's write
   * lock on the whole file, looked at without taking anything. */
  struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
  return fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
}

int etch_reader_open_file(etch_reader **out, const char *path) {
  if (!out || !path) return etch__error(ETCH_EINVAL, "reader: no path");
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return etch__error(ETCH_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return etch__error(ETCH_EIO, "%s: cannot stat: %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return etch__error(ETCH_EIO, "%s: not a regular file", path);
  }
  /* The lock first, the size after: what a writer that has just finished
   * wrote before letting go is all there. */
  bool recording = etch__file_recording(fd);
  if (recording && fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return etch__error(ETCH_EIO, "%s: cannot stat: %s", path, strerror(e));
  }
  void *map = NULL;
  size_t len = (size_t)st.st_size;
  if (len) {
    map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      int e = errno;
      close(fd);
      return etch__error(ETCH_EIO, "%s: cannot map: %s", path, strerror(e));
    }
    madvise(map, len, MADV_SEQUENTIAL);
  }
  close(fd);
  etch_reader *r;
  int rc = reader_new(&r);
  if (rc == 0 && !(r->name = etch__strdup(path))) {
    etch_reader_close(r);
    rc = ETCH_ENOMEM;
  }
  if (rc) {
    if (map) munmap(map, len);
    return rc;
  }
  r->map = map;
  r->map_len = len;
  r->recording = recording;
  r->stats.recording = recording;
  r->file_dev = (uint64_t)st.st_dev;
  r->file_ino = (uint64_t)st.st_ino;
  r->data = (const uint8_t *)map;
  r->len = len;
  *out = r;
  return 0;
}

void etch_reader_close(etch_reader *r) {
  if (!r) return;
  for (size_t i = 0; i < r->nseq; i++) {
    rd_seq *s = r->seq_list[i];
    etch__idtab_free(&s->names);
    etch__idtab_free(&s->cats);
    etch__idtab_free(&s->da_names);
    etch__idtab_free(&s->da_strings);
    etch__idtab_free(&s->srclocs);
    etch__arena_free(&s->srcloc_arena);
    etch__rd_stack_seq_free(s);
    etch__arena_free(&s->recs);
    free(s->idx.data);
    free(s->extra_counter_default);
    free(s->extra_dcounter_default);
    free(s);
  }
  free(r->seq_list);
  for (size_t i = 0; i < r->nheld_tracks; i++) free(r->held_tracks[i]->held.data);
  free(r->held_tracks);
  etch__arena_free(&r->track_recs);
  etch__ptrmap_free(&r->seqs);
  etch__ptrmap_free(&r->tracks);
  etch__rd_machines_free(r);
  free(r->track_list);
  etch__arena_free(&r->track_arena);
  etch__rd_clocks_free(&r->clocks);
  etch__rd_stacks_free(r);
  etch__strpool_free(&r->pool);
  free(r->args);
  free(r->flows);
  free(r->terms);
  for (int i = 0; i < RD_NREP; i++) free(r->rep[i].a);
  etch__arena_free(&r->scratch);
  free(r->catbuf.data);
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(r->inflate); i++)
    free(r->inflate[i].data);
  if (r->zs) {
    inflateEnd((z_stream *)r->zs);
    free(r->zs);
  }
  if (r->zstd) ZSTD_freeDCtx((ZSTD_DCtx *)r->zstd);
  free(r->subs);
  etch__rd_custom_free(r);
  free(r->name);
  if (r->map) munmap(r->map, r->map_len);
  free(r);
}

int etch_reader_set_order(etch_reader *r, etch_reader_order order) {
  if (r && r->stream && order != ETCH_ORDER_FILE)
    return etch__error(ETCH_EINVAL,
                       "reader: a stream delivers events as they are fed");
  if (!r) return etch__error(ETCH_EINVAL, "reader: NULL");
  if (r->ran) return etch__error(ETCH_ESTATE, "reader: already run");
  if (order != ETCH_ORDER_TIMESTAMP && order != ETCH_ORDER_FILE)
    return etch__error(ETCH_EINVAL, "reader: unknown order %d", (int)order);
  r->order = order;
  r->per_track = false;
  return 0;
}

void etch__reader_set_track_order(etch_reader *r, bool hold_all) {
  if (!r || r->ran) return;
  r->order = ETCH_ORDER_FILE;
  r->per_track = true;
  r->hold_all = hold_all;
}

bool etch__reader_went_back(const etch_reader *r) {
  return r && r->went_back;
}

void etch__reader_set_match_ends(etch_reader *r, bool match) {
  if (r && !r->ran) r->no_end_matching = !match;
}

void etch__reader_stop(etch_reader *r) {
  if (r) r->stop = true;
}

void etch__reader_set_fast(etch_reader *r, bool on) {
  if (r && !r->ran) r->fast_off = !on;
}

uint64_t etch__reader_fast_packets(const etch_reader *r) {
  return r ? r->fast_packets : 0;
}

int etch_reader_on(etch_reader *r, const char *category, const char *name,
                   etch_event_cb cb, void *user) {
  if (!r || !cb) return etch__error(ETCH_EINVAL, "reader: NULL callback");
  if (r->ran) return etch__error(ETCH_ESTATE, "reader: already run");
  return etch__rd_subscribe(r, category, name, cb, user);
}

int etch_reader_on_track(etch_reader *r, etch_track_cb cb, void *user) {
  if (!r) return etch__error(ETCH_EINVAL, "reader: NULL");
  if (r->ran) return etch__error(ETCH_ESTATE, "reader: already run");
  r->track_cb = cb;
  r->track_user = user;
  return 0;
}

static int read_from(etch_reader *r, uint64_t from);

static int run(etch_reader *r) {
  if (!r) return etch__error(ETCH_EINVAL, "reader: NULL");
  if (r->stream)
    return etch__error(ETCH_ESTATE,
                       "reader: a stream is fed (etch_reader_feed), not run");
  if (r->ran) return etch__error(ETCH_ESTATE, "reader: already run");
  r->ran = true;
  r->fast = !r->fast_off && !r->obs;
  r->sub_all = r->nsubs == 1 && !r->subs[0].name && !r->subs[0].category;
  etch__error_clear();
  r->stats.bytes = r->len;
  r->stats.recording = r->recording;
  if (!r->obs && r->progress_want &&
      (r->progress_forced || isatty(r->progress_fd))) {
    r->progress = true;
    r->progress_t0 = etch__monotonic_ns();
  }
  r->watch_at = r->progress || (r->map && r->map_len >= ETCH_RD_RELEASE_MIN)
                    ? 0
                    : UINT64_MAX;
  int rc = read_from(r, 0);
  r->resumable = rc == 0 && r->name && r->order == ETCH_ORDER_FILE &&
                 !r->went_back && !r->obs;
  return rc;
}

/* Descriptors whose parent none describes, counted over every track. */
static void count_unknown_parents(etch_reader *r) {
  r->stats.unknown_parent_track = 0;
  for (size_t i = 0; i < r->ntracks; i++) {
    const rd_track *t = r->track_list[i];
    uint64_t parent = t->info.parent_uuid;
    if (!t->described || !parent || parent == t->info.uuid) continue;
    const rd_track *p = etch__rd_track_in(r, t->info.machine_id, parent, false);
    if (!p || !p->described) r->stats.unknown_parent_track++;
  }
}

/* A track without events at the end of a read, and its ancestors first,
 * to the idle callback (etch__reader_set_idle_tracks), once a read. */
static void announce_idle(etch_reader *r, rd_track *t, int depth) {
  if (t->delivered || t->idle_read == r->nreads) return;
  t->idle_read = r->nreads;
  etch__rd_track_resolve(r, t);
  if (t->info.parent_uuid && depth < RD_MAX_NESTING) {
    rd_track *p =
        etch__rd_track_in(r, t->info.machine_id, t->info.parent_uuid, false);
    if (p && p != t) announce_idle(r, p, depth + 1);
  }
  r->idle_cb(&t->info, r->track_user);
}

void etch__reader_set_idle_tracks(etch_reader *r, etch_track_cb cb) {
  if (r) r->idle_cb = cb;
}

/* Reads the records of r->data from offset `from` to r->len, then
 * delivers what was held and announces the tracks without events. */
static int read_from(etch_reader *r, uint64_t from) {
  rd_src top;
  top.start = r->data;
  top.wrapper_off = 0;
  top.depth = 0;
  top.parent = NULL;
  int rc = etch__rd_parse_records_at(r, &top, (size_t)from, r->len);
  count_unknown_parents(r);
  if (rc && !r->err_formatted) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", etch_last_error());
    etch__rd_fail_at(r, rc, r->cur_off, msg[0] ? msg : etch_strerror(rc));
  }
  /* Events decoded before an error are still delivered. */
  if ((r->order == ETCH_ORDER_TIMESTAMP || (r->per_track && !r->went_back)) &&
      !r->obs) {
    char saved[512];
    snprintf(saved, sizeof saved, "%s", etch_last_error());
    int drc = r->per_track ? etch__rd_deliver_track_held(r) : etch__rd_deliver_held(r);
    if (rc == 0)
      rc = drc;
    else
      etch__error(rc, "%s", saved);
  }
  if (!r->obs) {
    int crc = etch__rd_custom_finish(r);
    if (rc == 0) rc = crc;
  }
  /* Tracks without events are announced last. */
  r->nreads++;
  if (!r->obs && r->idle_cb) {
    for (size_t i = 0; i < r->ntracks; i++)
      if (r->track_list[i]->described)
        announce_idle(r, r->track_list[i], 0);
  } else if (!r->obs && r->track_cb) {
    for (size_t i = 0; i < r->ntracks; i++)
      if (r->track_list[i]->described)
        etch__rd_announce_track(r, r->track_list[i], 0);
  }
  etch__rd_progress_end(r);
  return rc;
}

int etch_reader_run(etch_reader *r) { return run(r); }

/* ---- a file that grew: read on ------------------------------------------------------------ */

/* The file at r->name as it is now, mapped in place of the old mapping;
 * *same false (nothing changed) when it has not grown and its writer's
 * lock is as it was. */
static int remap(etch_reader *r, bool *same) {
  *same = false;
  int fd = open(r->name, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return etch__error(ETCH_EIO, "%s: cannot open: %s", r->name,
                       strerror(errno));
  bool recording = etch__file_recording(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return etch__error(ETCH_EIO, "%s: cannot stat: %s", r->name, strerror(e));
  }
  size_t len = (size_t)st.st_size;
  if ((uint64_t)st.st_dev != r->file_dev ||
      (uint64_t)st.st_ino != r->file_ino || len < r->len) {
    close(fd);
    r->resumable = false;
    return etch__error(ETCH_ESTATE,
                       "%s: replaced or cut since it was read: read it again",
                       r->name);
  }
  if (len == r->len && recording == r->recording) {
    close(fd);
    *same = true;
    return ETCH_OK;
  }
  void *map = NULL;
  if (len) {
    map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      int e = errno;
      close(fd);
      return etch__error(ETCH_EIO, "%s: cannot map: %s", r->name,
                         strerror(e));
    }
  }
  close(fd);
  if (r->map) munmap(r->map, r->map_len);
  r->map = map;
  r->map_len = len;
  r->map_released = 0;
  r->data = (const uint8_t *)map;
  r->len = len;
  r->recording = recording;
  return ETCH_OK;
}

int etch__reader_resume(etch_reader *r, bool *grew) {
  if (grew) *grew = false;
  if (!r || !r->ran || !r->name || r->order != ETCH_ORDER_FILE || r->obs)
    return etch__error(ETCH_ESTATE, "reader: only a file read in file order "
                                    "reads on");
  if (!r->resumable)
    return etch__error(ETCH_ESTATE, "reader: %s: its last read did not end "
                                    "well: read it again", r->name);
  /* Where the last read stopped: after its last whole packet. */
  uint64_t from = r->stats.truncated_bytes ? r->stats.truncated_offset
                                           : r->stats.bytes;
  bool same;
  int rc = remap(r, &same);
  if (rc || same) return rc;
  etch__error_clear();
  r->stats.bytes = r->len;
  r->stats.recording = r->recording;
  r->stats.truncated_offset = 0;
  r->stats.truncated_bytes = 0;
  r->progress = false;
  r->watch_at = UINT64_MAX;
  rc = read_from(r, from);
  r->resumable = rc == 0;
  if (grew) *grew = true;
  return rc;
}

int etch__reader_set_path(etch_reader *r, const char *path) {
  if (!r || !r->name || !path)
    return etch__error(ETCH_ESTATE, "reader: not a file read");
  char *p = etch__strdup(path);
  if (!p) return etch__error(ETCH_ENOMEM, "out of memory");
  free(r->name);
  r->name = p;
  return ETCH_OK;
}

/* ---- a stream of packets ------------------------------------------------------------------ */

int etch_reader_open_stream(etch_reader **out) {
  if (!out) return etch__error(ETCH_EINVAL, "reader: NULL");
  int rc = reader_new(out);
  if (rc) return rc;
  (*out)->stream = true;
  (*out)->order = ETCH_ORDER_FILE;
  return 0;
}

int etch_reader_feed(etch_reader *r, const void *packet, size_t len,
                     uint32_t sequence_id) {
  if (!r || (!packet && len)) return etch__error(ETCH_EINVAL, "reader: NULL");
  if (!r->stream)
    return etch__error(ETCH_ESTATE,
                       "reader: etch_reader_feed needs etch_reader_open_stream");
  if (!r->ran) {
    r->ran = true;
    r->sub_all = r->nsubs == 1 && !r->subs[0].name && !r->subs[0].category;
  }
  if (r->stop) return 0;
  r->stats.bytes += len;
  r->cur_off = r->stats.bytes - len;
  r->err_formatted = false;
  r->feed_seq = sequence_id;
  rd_src src = {.start = (const uint8_t *)packet};
  uint64_t malformed = r->stats.malformed_packets;
  int rc = etch__rd_packet(r, &src, 0, (const uint8_t *)packet, len);
  r->feed_seq = 0;
  /* Left out (nothing of it applied): still refused, with its reason. */
  if (!rc && r->stats.malformed_packets != malformed) {
    rc = r->malformed_status;
    etch__error(rc, "%s", r->malformed_last);
  }
  if (rc) { /* "offset N" in the message is within the packet */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", etch_last_error());
    etch__error(rc, "packet at stream offset %llu: %s",
                (unsigned long long)r->cur_off,
                msg[0] ? msg : etch_strerror(rc));
  }
  /* A custom event waits for nothing in a stream: deliver it now. */
  int crc = etch__rd_custom_finish(r);
  return rc ? rc : crc;
}

void etch_reader_get_stats(const etch_reader *r, etch_reader_stats *out) {
  if (!r || !out) return;
  *out = r->stats;
}

int etch_reader_time_bounds(const etch_reader *r, int64_t *first,
                            int64_t *last) {
  if (!r) return etch__error(ETCH_EINVAL, "reader: NULL");
  if (!r->have_bounds) {
    if (first) *first = 0;
    if (last) *last = 0;
    return etch__error(ETCH_ENOTFOUND, "no events");
  }
  if (first) *first = r->first_ts;
  if (last) *last = r->last_ts;
  return 0;
}


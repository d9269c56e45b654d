/*
 * reader.c - the public reader API: opening traces, the Trace framing,
 * decompression of compressed packets, holding and sorting events for
 * timestamp order, delivery to subscribers, progress and error messages.
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
#include "reader/deliver.h"
#include "reader/errors.h"
#include "reader/progress.h"
#include "reader/reader_int.h"
#include "reader/reader_priv.h"

/* ---- progress ---------------------------------------------------------------------- */

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

void etch__reader_set_progress_to(etch_reader *r, int fd, uint64_t delay_ns) {
  r->progress_want = true;
  r->progress_forced = true;
  r->progress_fd = fd;
  r->progress_delay = delay_ns;
  r->progress_every = delay_ns;
}

/* ---- decompression ----------------------------------------------------------------- */

static int inflate_zlib(etch_reader *r, const rd_src *src, const uint8_t *at,
                        const uint8_t *data, size_t len, etch_vec *out) {
  z_stream *zs = (z_stream *)r->zs;
  if (!zs) {
    zs = (z_stream *)etch__calloc(1, sizeof *zs);
    if (!zs) return ETCH_ENOMEM;
    /* 15 + 32: zlib or gzip header, detected. */
    if (inflateInit2(zs, 15 + 32) != Z_OK) {
      free(zs);
      return etch__error(ETCH_ENOMEM, "cannot initialise zlib");
    }
    r->zs = zs;
  } else {
    inflateReset(zs);
  }
  zs->next_in = (Bytef *)(uintptr_t)data;
  zs->avail_in = 0;
  size_t in_left = len;
  for (;;) {
    if (zs->avail_in == 0 && in_left) {
      uInt n = in_left > (1u << 30) ? (1u << 30) : (uInt)in_left;
      zs->avail_in = n;
      in_left -= n;
    }
    if (out->len == out->cap) {
      if (out->cap >= RD_MAX_INFLATE)
        return etch__rd_fail(r, src, at, ETCH_ELIMIT,
                             "compressed packets expand to more than %u MiB",
                             RD_MAX_INFLATE >> 20);
      size_t want = out->cap ? out->cap : 64 * 1024;
      if (want > RD_MAX_INFLATE - out->cap) want = RD_MAX_INFLATE - out->cap;
      if (etch__vec_reserve(out, want)) return ETCH_ENOMEM;
      if (out->cap > RD_MAX_INFLATE) out->cap = RD_MAX_INFLATE;
    }
    size_t room = out->cap - out->len;
    uInt chunk = room > (1u << 30) ? (1u << 30) : (uInt)room;
    zs->next_out = out->data + out->len;
    zs->avail_out = chunk;
    int zr = inflate(zs, Z_NO_FLUSH);
    out->len += chunk - zs->avail_out;
    if (zr == Z_STREAM_END) return 0;
    if (zr == Z_BUF_ERROR && zs->avail_in == 0 && in_left == 0)
      return etch__rd_fail(r, src, at, ETCH_ETRUNC,
                           "compressed packets: truncated deflate stream");
    if (zr != Z_OK && zr != Z_BUF_ERROR)
      return etch__rd_fail(r, src, at, ETCH_EFORMAT,
                           "compressed packets: corrupt deflate stream (%s)",
                           zs->msg ? zs->msg : "zlib error");
    if (zr == Z_OK && zs->avail_in == 0 && in_left == 0 && zs->avail_out != 0)
      return etch__rd_fail(r, src, at, ETCH_ETRUNC,
                           "compressed packets: truncated deflate stream");
  }
}

static int inflate_zstd(etch_reader *r, const rd_src *src, const uint8_t *at,
                        const uint8_t *data, size_t len, etch_vec *out) {
  ZSTD_DCtx *z = (ZSTD_DCtx *)r->zstd;
  if (!z) {
    z = ZSTD_createDCtx();
    if (!z) return etch__error(ETCH_ENOMEM, "cannot create a zstd context");
    r->zstd = z;
  } else {
    ZSTD_DCtx_reset(z, ZSTD_reset_session_only);
  }
  ZSTD_inBuffer in = {data, len, 0};
  size_t ret = 1;
  while (in.pos < in.size || ret != 0) {
    if (out->len == out->cap) {
      if (out->cap >= RD_MAX_INFLATE)
        return etch__rd_fail(r, src, at, ETCH_ELIMIT,
                             "compressed packets expand to more than %u MiB",
                             RD_MAX_INFLATE >> 20);
      size_t want = out->cap ? out->cap : 64 * 1024;
      if (want > RD_MAX_INFLATE - out->cap) want = RD_MAX_INFLATE - out->cap;
      if (etch__vec_reserve(out, want)) return ETCH_ENOMEM;
      if (out->cap > RD_MAX_INFLATE) out->cap = RD_MAX_INFLATE;
    }
    ZSTD_outBuffer ob = {out->data, out->cap, out->len};
    size_t in_before = in.pos, out_before = ob.pos;
    ret = ZSTD_decompressStream(z, &ob, &in);
    out->len = ob.pos;
    if (ZSTD_isError(ret))
      return etch__rd_fail(r, src, at, ETCH_EFORMAT,
                           "zstd compressed packets: %s",
                           ZSTD_getErrorName(ret));
    if (ret != 0 && in.pos == in.size && ob.pos < ob.size &&
        in.pos == in_before && ob.pos == out_before)
      return etch__rd_fail(r, src, at, ETCH_ETRUNC,
                           "zstd compressed packets: truncated frame");
    if (ret != 0 && in.pos == in.size && ob.pos < ob.size) {
      /* All input consumed, output room left, frame not done: truncated
       * unless the decoder still flushes; loop once more to find out. */
      continue;
    }
  }
  return 0;
}

int etch__rd_decompress(etch_reader *r, const rd_src *src, const uint8_t *at,
                        const uint8_t *data, size_t len, bool zstd) {
  r->stats.compressed_packets++;
  int depth = src->depth + 1;
  if (depth > RD_MAX_COMPRESSION_DEPTH)
    return etch__rd_fail(r, src, at, ETCH_ELIMIT,
                         "compressed packets nested more than %d deep",
                         RD_MAX_COMPRESSION_DEPTH);
  etch_vec *out = &r->inflate[depth];
  out->len = 0;
  int rc = zstd ? inflate_zstd(r, src, at, data, len, out)
                : inflate_zlib(r, src, at, data, len, out);
  if (rc) return rc;
  rd_src sub;
  sub.start = out->data;
  sub.wrapper_off =
      src->depth == 0 ? (uint64_t)(at - src->start) : src->wrapper_off;
  sub.depth = depth;
  sub.parent = src;
  if (r->obs) r->obs->nest(r, 1, r->obs->user);
  rc = etch__rd_parse_records(r, &sub, out->len);
  if (r->obs) r->obs->nest(r, -1, r->obs->user);
  return rc;
}

/* ---- framing ---------------------------------------------------------------------------- */

/* The file ends inside the packet at `rec`: the trace was cut short there
 * (etch_reader_set_allow_truncated). */
static int cut_short(etch_reader *r, const uint8_t *start, const uint8_t *rec,
                     const uint8_t *end) {
  r->stats.truncated_offset = (uint64_t)(rec - start);
  r->stats.truncated_bytes = (uint64_t)(end - rec);
  return 0;
}

int etch__rd_parse_records(etch_reader *r, const rd_src *src, size_t len) {
  const uint8_t *start = src->start, *p = start, *end = start + len;
  while (p < end && !r->stop) {
    if (ETCH_LIKELY(r->fast)) {
      /* Runs of libetch's packets; this loop takes whatever they are not. */
      int rc = etch__rd_fast_records(r, src, &p, end);
      if (rc) return rc;
      if (p >= end || r->stop) break;
    }
    const uint8_t *rec = p;
    if (src->depth == 0) {
      r->cur_off = (uint64_t)(rec - start);
      if (ETCH_UNLIKELY(r->progress))
        etch__rd_progress(r, r->cur_off, len, "reading");
    }
    uint64_t tag, plen;
    if (ETCH_LIKELY(*p == 0x0A)) {
      p++;
    } else {
      if (!etch__pb_read_varint(&p, end, &tag))
        return etch__rd_fail(r, src, rec, end - rec < 10 ? ETCH_ETRUNC : ETCH_EFORMAT,
                             "truncated or malformed field tag");
      return etch__rd_fail(r, src, rec, ETCH_EFORMAT,
                           "not a Perfetto protobuf trace: field %llu with wire "
                           "type %u where a packet (field 1) was expected",
                           (unsigned long long)(tag >> 3), (unsigned)(tag & 7));
    }
    const uint8_t *q = etch__pb_varint5(p, end, &plen);
    if (ETCH_LIKELY(q != NULL)) {
      p = q;
    } else if (!etch__pb_read_varint(&p, end, &plen)) {
      if (src->depth == 0 && r->allow_truncated && end - p < 10)
        return cut_short(r, start, rec, end);
      return etch__rd_fail(r, src, rec, end - p < 10 ? ETCH_ETRUNC : ETCH_EFORMAT,
                           "truncated or malformed packet length");
    }
    if (plen > (uint64_t)(end - p) && src->depth == 0 && r->allow_truncated)
      return cut_short(r, start, rec, end);
    if (plen > (uint64_t)(end - p))
      return etch__rd_fail(r, src, rec, ETCH_ETRUNC,
                           "packet length %llu larger than the %zu bytes left "
                           "in the %s",
                           (unsigned long long)plen, (size_t)(end - p),
                           src->depth ? "decompressed data" : "file");
    int rc = etch__rd_packet(r, src, (uint64_t)(rec - start), p, (size_t)plen);
    if (rc) return rc;
    p += plen;
  }
  return 0;
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
  etch__rd_clocks_init(&r->clocks);
  etch__arena_init(&r->track_arena, 64 * 1024);
  etch__arena_init(&r->scratch, 16 * 1024);
  etch__arena_init(&r->track_recs, 256 * 1024);
  r->global_track.info.uuid = 0;
  r->global_track.info.kind = ETCH_TRACK_GLOBAL;
  r->global_track.info.name = r->empty;
  r->global_track.info.counter_unit_name = r->empty;
  r->order = ETCH_ORDER_TIMESTAMP;
  r->progress_fd = 2;
  r->progress_delay = 1000000000ull;
  r->progress_every = 200000000ull;
  r->track_gen = 1; /* rd_track.res_gen 0 = never resolved */
  r->gen = 1;       /* rd_seq.fgen 0 = never looked at */
  r->latest_ts = 0;
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
  free(r->track_list);
  etch__arena_free(&r->track_arena);
  etch__rd_clocks_free(&r->clocks);
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
  if (!r->obs && r->progress_want &&
      (r->progress_forced || isatty(r->progress_fd))) {
    r->progress = true;
    r->progress_t0 = etch__monotonic_ns();
  }
  rd_src top;
  top.start = r->data;
  top.wrapper_off = 0;
  top.depth = 0;
  top.parent = NULL;
  int rc = etch__rd_parse_records(r, &top, r->len);
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
  if (!r->obs && r->track_cb) {
    for (size_t i = 0; i < r->ntracks; i++)
      if (r->track_list[i]->described)
        etch__rd_announce_track(r, r->track_list[i], 0);
  }
  etch__rd_progress_end(r);
  return rc;
}

int etch_reader_run(etch_reader *r) { return run(r); }

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
  int rc = etch__rd_packet(r, &src, 0, (const uint8_t *)packet, len);
  r->feed_seq = 0;
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


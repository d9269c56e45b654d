/*
 * source.c - where packets come from: the Trace framing (a run of field-1
 * records) of the file or of decompressed bytes, and the decompression of
 * compressed packets (deflate or zstd). Each record goes to the fast path
 * (fast.c) and, when that does not take it, to the generic decoder
 * (packet.c); a compressed packet's records come back here through
 * etch_reader.unpack.
 */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "reader/errors.h"
#include "reader/fast.h"
#include "reader/packet.h"
#include "reader/progress.h"
#include "reader/source.h"
#include "reader/reader_int.h"

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
 * (etch_reader_set_allow_truncated), or, while it is being recorded, its
 * writer has not written the rest yet: read up to `rec`, no loss. */
static int cut_short(etch_reader *r, const uint8_t *start, const uint8_t *rec,
                     const uint8_t *end) {
  if (r->recording) {
    r->stats.bytes = (uint64_t)(rec - start);
    return 0;
  }
  r->stats.truncated_offset = (uint64_t)(rec - start);
  r->stats.truncated_bytes = (uint64_t)(end - rec);
  return 0;
}

int etch__rd_parse_records(etch_reader *r, const rd_src *src, size_t len) {
  return etch__rd_parse_records_at(r, src, 0, len);
}

int etch__rd_parse_records_at(etch_reader *r, const rd_src *src, size_t from,
                              size_t len) {
  if (!src->start) return 0; /* an empty file: nothing mapped */
  const uint8_t *start = src->start, *p = start + from, *end = start + len;
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
      if (ETCH_UNLIKELY(r->cur_off >= r->watch_at))
        etch__rd_watch(r, r->cur_off, len);
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
      if (src->depth == 0 && (r->allow_truncated || r->recording) &&
          end - p < 10)
        return cut_short(r, start, rec, end);
      return etch__rd_fail(r, src, rec, end - p < 10 ? ETCH_ETRUNC : ETCH_EFORMAT,
                           "truncated or malformed packet length");
    }
    if (plen > (uint64_t)(end - p) && src->depth == 0 &&
        (r->allow_truncated || r->recording))
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

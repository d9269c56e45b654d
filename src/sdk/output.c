/*
 * output.c - turns a session's buffer into a trace file.
 *
 * The file is a run of `Trace.packet` records. Packets come out of the
 * buffer sequence by sequence; each gets its trusted_packet_sequence_id
 * appended here (writers never write it, as a service would stamp it), and
 * the first packet after missing data gets previous_packet_dropped.
 *
 * Where data went missing (a ring that overwrote its oldest chunks), the
 * packets that can no longer be decoded are left out rather than handed to
 * readers that would skip them anyway: packets that need incremental state
 * up to the next reset, and slice ends whose begins were lost. What is left
 * decodes completely; the loss itself is still recorded, in the flag and in
 * the TraceStats packet at the end.
 *
 * With compression on, records are batched (at most 256 KiB each) and each
 * batch is written as one `compressed_packets` packet (zlib/deflate).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "sdk/sdk.h"

#define BATCH_LIMIT (256u * 1024u)

typedef struct out_ctx {
  etch_pb_buf out;   /* the file */
  etch_pb_buf batch; /* records waiting to be compressed */
  bool compress;
  int err;
  /* per-sequence filter state */
  uint32_t cur_writer;
  bool invalid;      /* lost data, no reset seen since */
  bool mark_dropped; /* next emitted packet carries the flag */
  uint32_t depth;    /* open slices on the default track */
  uint64_t skipped;  /* packets left out after a loss */
} out_ctx;

static int flush_batch(out_ctx *o) {
  size_t n = etch_pb_buf_len(&o->batch);
  if (!n) return ETCH_OK;
  uLongf cap = compressBound((uLong)n);
  uint8_t *z = (uint8_t *)etch__malloc(cap);
  if (!z) return ETCH_ENOMEM;
  int zrc = compress2(z, &cap, etch_pb_buf_data(&o->batch), (uLong)n, 6);
  if (zrc != Z_OK) {
    free(z);
    return etch__error(ETCH_EIO, "deflate failed (%d)", zrc);
  }
  etch_pb_stream *s = &o->out.s;
  etch_pb_nested pkt;
  etch_pb_nested_begin(s, ETCH_TRACE_PACKET, &pkt);
  etch_pb_write_bytes_field(s, ETCH_PKT_COMPRESSED_PACKETS, z, cap);
  etch_pb_nested_end(s, &pkt);
  free(z);
  etch_pb_buf_reset(&o->batch);
  return o->out.s.failed ? ETCH_ENOMEM : ETCH_OK;
}

/* Appends one Trace.packet record: the packet bytes plus trailing fields. */
static int put_record(out_ctx *o, const uint8_t *data, uint32_t len,
                      uint32_t seq_id, bool dropped) {
  uint8_t tail[16];
  uint8_t *t = tail;
  if (seq_id) {
    t = etch_pb_put_tag(t, ETCH_PKT_TRUSTED_SEQ_ID, ETCH_PB_VARINT);
    t = etch_pb_put_varint(t, seq_id);
  }
  if (dropped) {
    t = etch_pb_put_tag(t, ETCH_PKT_PREVIOUS_PACKET_DROPPED, ETCH_PB_VARINT);
    *t++ = 1;
  }
  size_t tl = (size_t)(t - tail);
  etch_pb_buf *dst = o->compress ? &o->batch : &o->out;
  if (o->compress && etch_pb_buf_len(&o->batch) + len + tl + 16 > BATCH_LIMIT) {
    int rc = flush_batch(o);
    if (rc) return rc;
  }
  etch_pb_stream *s = &dst->s;
  if (!etch_pb_reserve(s, 16)) return ETCH_ENOMEM;
  s->cur = etch_pb_put_tag(s->cur, ETCH_TRACE_PACKET, ETCH_PB_LEN);
  s->cur = etch_pb_put_varint(s->cur, len + tl);
  etch_pb_write_bytes(s, data, len);
  etch_pb_write_bytes(s, tail, tl);
  return s->failed ? ETCH_ENOMEM : ETCH_OK;
}

/* What the filter needs to know about a packet. */
typedef struct pkt_info {
  uint64_t flags;
  int te_type; /* 0: no track event */
  bool te_has_track;
} pkt_info;

static void inspect(const uint8_t *data, uint32_t len, pkt_info *pi) {
  memset(pi, 0, sizeof *pi);
  etch_pb_dec d;
  etch_pb_field f;
  etch_pb_dec_init(&d, data, len);
  while (etch_pb_next(&d, &f)) {
    if (f.id == ETCH_PKT_SEQUENCE_FLAGS && f.wt == ETCH_PB_VARINT) {
      pi->flags = f.u;
    } else if (f.id == ETCH_PKT_TRACK_EVENT && f.wt == ETCH_PB_LEN) {
      etch_pb_dec te;
      etch_pb_field g;
      etch_pb_dec_init(&te, f.data, f.len);
      pi->te_type = -1;
      while (etch_pb_next(&te, &g)) {
        if (g.id == ETCH_TE_TYPE) pi->te_type = (int)g.u;
        if (g.id == ETCH_TE_TRACK_UUID) pi->te_has_track = true;
      }
    }
  }
}

static int on_packet(void *ctx, uint32_t writer_id, const uint8_t *data,
                     uint32_t len, bool dropped_before) {
  out_ctx *o = (out_ctx *)ctx;
  if (writer_id != o->cur_writer) {
    o->cur_writer = writer_id;
    o->invalid = false;
    o->mark_dropped = false;
    o->depth = 0;
  }
  pkt_info pi;
  inspect(data, len, &pi);
  bool cleared = pi.flags & ETCH_SEQ_INCREMENTAL_STATE_CLEARED;
  if (dropped_before) {
    o->mark_dropped = true;
    o->invalid = !cleared;
    o->depth = 0;
  }
  if (cleared) o->invalid = false;
  if (o->invalid && (pi.flags & ETCH_SEQ_NEEDS_INCREMENTAL_STATE)) {
    o->skipped++;
    return ETCH_OK;
  }
  if (pi.te_type > 0 && !pi.te_has_track) {
    if (pi.te_type == ETCH_TE_TYPE_SLICE_BEGIN) {
      o->depth++;
    } else if (pi.te_type == ETCH_TE_TYPE_SLICE_END) {
      if (o->depth == 0) { /* its begin was overwritten */
        o->skipped++;
        return ETCH_OK;
      }
      o->depth--;
    }
  }
  int rc = put_record(o, data, len, writer_id, o->mark_dropped);
  o->mark_dropped = false;
  return rc;
}

/* Emits a packet built in `tmp` on etch's own sequence. */
static int put_service(out_ctx *o, etch_pb_buf *tmp) {
  if (tmp->s.failed) return ETCH_ENOMEM;
  int rc = put_record(o, etch_pb_buf_data(tmp), (uint32_t)etch_pb_buf_len(tmp),
                      ETCH_SERVICE_SEQ_ID, false);
  etch_pb_buf_reset(tmp);
  return rc;
}

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void clock_entry(etch_pb_stream *s, uint32_t id, uint64_t ts) {
  etch_pb_nested c;
  etch_pb_nested_begin(s, ETCH_CLOCKSNAP_CLOCKS, &c);
  etch_pb_write_varint_field(s, ETCH_CLOCK_CLOCK_ID, id);
  etch_pb_write_varint_field(s, ETCH_CLOCK_TIMESTAMP, ts);
  etch_pb_nested_end(s, &c);
}

static int put_clock_snapshot(out_ctx *o, etch_pb_buf *tmp) {
  etch_pb_stream *s = &tmp->s;
  uint64_t boot = clock_ns(CLOCK_BOOTTIME);
  etch_pb_write_varint_field(s, ETCH_PKT_TIMESTAMP, boot);
  etch_pb_write_varint_field(s, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch_pb_nested cs;
  etch_pb_nested_begin(s, ETCH_PKT_CLOCK_SNAPSHOT, &cs);
  clock_entry(s, ETCH_CLOCK_BOOTTIME, boot);
  clock_entry(s, ETCH_CLOCK_MONOTONIC, clock_ns(CLOCK_MONOTONIC));
  clock_entry(s, ETCH_CLOCK_REALTIME, clock_ns(CLOCK_REALTIME));
  etch_pb_write_varint_field(s, ETCH_CLOCKSNAP_PRIMARY_TRACE_CLOCK,
                             ETCH_CLOCK_BOOTTIME);
  etch_pb_nested_end(s, &cs);
  return put_service(o, tmp);
}

/* When the clock fell back from the TSC to clock_gettime on a CPU that has
 * one: an instant `etch.clock_fallback` on the process track, arg `reason`. */
static int put_clock_note(out_ctx *o, etch_pb_buf *tmp) {
  const char *why = etch__clock_fallback_note();
  if (!why) return ETCH_OK;
  etch_pb_stream *s = &tmp->s;
  uint64_t ts = clock_ns(CLOCK_BOOTTIME);
  etch_pb_nested td, pd, te, da;
  etch_pb_write_varint_field(s, ETCH_PKT_TIMESTAMP, ts);
  etch_pb_write_varint_field(s, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch_pb_nested_begin(s, ETCH_PKT_TRACK_DESCRIPTOR, &td);
  etch_pb_write_varint_field(s, ETCH_TD_UUID, etch__process_uuid());
  etch_pb_nested_begin(s, ETCH_TD_PROCESS, &pd);
  etch_pb_write_varint_field(s, ETCH_PD_PID, (uint64_t)etch__g.pid);
  etch_pb_nested_end(s, &pd);
  etch_pb_nested_end(s, &td);
  int rc = put_service(o, tmp);
  if (rc) return rc;
  etch_pb_write_varint_field(s, ETCH_PKT_TIMESTAMP, ts);
  etch_pb_write_varint_field(s, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch_pb_nested_begin(s, ETCH_PKT_TRACK_EVENT, &te);
  etch_pb_write_varint_field(s, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  etch_pb_write_string_field(s, ETCH_TE_CATEGORIES, "etch");
  etch_pb_write_string_field(s, ETCH_TE_NAME, "etch.clock_fallback");
  etch_pb_write_varint_field(s, ETCH_TE_TRACK_UUID, etch__process_uuid());
  etch_pb_nested_begin(s, ETCH_TE_DEBUG_ANNOTATIONS, &da);
  etch_pb_write_string_field(s, ETCH_DA_NAME, "reason");
  etch_pb_write_string_field(s, ETCH_DA_STRING_VALUE, why);
  etch_pb_nested_end(s, &da);
  etch_pb_nested_end(s, &te);
  return put_service(o, tmp);
}

/* Per thread that lost events: its descriptor and an instant saying so. */
/* Called with the session's lock held (the writer list, thread names); the
 * drop times are atomics the writer thread may still be updating. */
static int put_drop_report(out_ctx *o, etch_pb_buf *tmp, etch_writer *w,
                           uint64_t dropped) {
  etch_pb_stream *s = &tmp->s;
  uint64_t ts = __atomic_load_n(&w->first_drop_ns, __ATOMIC_RELAXED);
  uint64_t last = __atomic_load_n(&w->last_drop_ns, __ATOMIC_RELAXED);
  if (last < ts) last = ts;
  uint64_t uuid = etch__thread_uuid(w->tid);
  etch_pb_nested td, thd, te, da;
  etch_pb_write_varint_field(s, ETCH_PKT_TIMESTAMP, ts);
  etch_pb_write_varint_field(s, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch_pb_nested_begin(s, ETCH_PKT_TRACK_DESCRIPTOR, &td);
  etch_pb_write_varint_field(s, ETCH_TD_UUID, uuid);
  etch_pb_nested_begin(s, ETCH_TD_THREAD, &thd);
  etch_pb_write_varint_field(s, ETCH_THD_PID, (uint64_t)etch__g.pid);
  etch_pb_write_varint_field(s, ETCH_THD_TID, (uint64_t)w->tid);
  if (w->thread_name[0])
    etch_pb_write_string_field(s, ETCH_THD_THREAD_NAME, w->thread_name);
  etch_pb_nested_end(s, &thd);
  etch_pb_nested_end(s, &td);
  int rc = put_service(o, tmp);
  if (rc) return rc;

  etch_pb_write_varint_field(s, ETCH_PKT_TIMESTAMP, ts);
  etch_pb_write_varint_field(s, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch_pb_nested_begin(s, ETCH_PKT_TRACK_EVENT, &te);
  etch_pb_write_varint_field(s, ETCH_TE_TYPE, ETCH_TE_TYPE_INSTANT);
  etch_pb_write_string_field(s, ETCH_TE_CATEGORIES, "etch");
  etch_pb_write_string_field(s, ETCH_TE_NAME, "etch.dropped_events");
  etch_pb_write_varint_field(s, ETCH_TE_TRACK_UUID, uuid);
  etch_pb_nested_begin(s, ETCH_TE_DEBUG_ANNOTATIONS, &da);
  etch_pb_write_string_field(s, ETCH_DA_NAME, "count");
  etch_pb_write_varint_field(s, ETCH_DA_INT_VALUE, dropped);
  etch_pb_nested_end(s, &da);
  etch_pb_nested_begin(s, ETCH_TE_DEBUG_ANNOTATIONS, &da);
  etch_pb_write_string_field(s, ETCH_DA_NAME, "last_drop_ns");
  etch_pb_write_varint_field(s, ETCH_DA_UINT_VALUE, last);
  etch_pb_nested_end(s, &da);
  etch_pb_nested_end(s, &te);
  return put_service(o, tmp);
}

static int put_trace_stats(out_ctx *o, etch_pb_buf *tmp, etch_session *sess,
                           uint64_t writers_with_loss) {
  etch_buffer_stats bs;
  sess->backend->ops->stats(sess->backend, &bs);
  etch_pb_stream *s = &tmp->s;
  etch_pb_write_varint_field(s, ETCH_PKT_TIMESTAMP, clock_ns(CLOCK_BOOTTIME));
  etch_pb_write_varint_field(s, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch_pb_nested ts, b;
  etch_pb_nested_begin(s, ETCH_PKT_TRACE_STATS, &ts);
  etch_pb_nested_begin(s, ETCH_TS_BUFFER_STATS, &b);
  etch_pb_write_varint_field(s, ETCH_BS_BUFFER_SIZE, bs.buffer_size);
  etch_pb_write_varint_field(s, ETCH_BS_BYTES_WRITTEN,
                             bs.chunks_written * sess->backend->chunk_size);
  etch_pb_write_varint_field(s, ETCH_BS_CHUNKS_WRITTEN, bs.chunks_written);
  etch_pb_write_varint_field(s, ETCH_BS_CHUNKS_OVERWRITTEN,
                             bs.chunks_overwritten);
  etch_pb_write_varint_field(s, ETCH_BS_BYTES_OVERWRITTEN, bs.bytes_overwritten);
  etch_pb_write_varint_field(s, ETCH_BS_CHUNKS_DISCARDED, bs.chunks_discarded);
  etch_pb_write_varint_field(s, ETCH_BS_WRITE_WRAP_COUNT, bs.write_wrap_count);
  etch_pb_write_varint_field(s, ETCH_BS_TRACE_WRITER_PACKET_LOSS,
                             writers_with_loss);
  etch_pb_nested_end(s, &b);
  etch_pb_write_varint_field(s, ETCH_TS_TRACING_SESSIONS, 1);
  etch_pb_write_varint_field(s, ETCH_TS_TOTAL_BUFFERS, 1);
  etch_pb_nested_end(s, &ts);
  return put_service(o, tmp);
}

int etch__session_serialize(etch_session *sess, uint8_t **data, size_t *len) {
  *data = NULL;
  *len = 0;
  out_ctx o;
  memset(&o, 0, sizeof o);
  o.compress = sess->cfg.compression == 1;
  etch_pb_buf_init(&o.out, 1 << 16, 0);
  etch_pb_buf_init(&o.batch, o.compress ? BATCH_LIMIT + 4096 : 0, 0);
  etch_pb_buf tmp;
  etch_pb_buf_init(&tmp, 512, 0);

  int rc = put_clock_snapshot(&o, &tmp);
  if (!rc) rc = put_clock_note(&o, &tmp);
  uint64_t lost = 0;
  if (!rc) rc = sess->backend->ops->read(sess->backend, on_packet, &o, &lost);

  /* Drop reports, then the stats. */
  uint64_t writers_with_loss = 0;
  pthread_mutex_lock(&sess->lock);
  for (etch_writer *w = sess->writers; w && !rc; w = w->next) {
    uint64_t d = __atomic_load_n(&w->dropped, __ATOMIC_ACQUIRE);
    if (!d) continue;
    writers_with_loss++;
    rc = put_drop_report(&o, &tmp, w, d);
  }
  pthread_mutex_unlock(&sess->lock);
  if (!rc) rc = put_trace_stats(&o, &tmp, sess, writers_with_loss + lost);
  if (!rc && o.compress) rc = flush_batch(&o);
  etch_pb_buf_free(&tmp);
  etch_pb_buf_free(&o.batch);
  if (rc || o.out.s.failed) {
    etch_pb_buf_free(&o.out);
    return rc ? rc : etch__error(ETCH_ENOMEM, "out of memory writing trace");
  }
  *data = etch_pb_buf_take(&o.out, len);
  return ETCH_OK;
}

static int write_all(const char *path, const char *name, const uint8_t *data,
                     size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f)
    return etch__error(ETCH_EIO, "cannot write trace to '%s': %s", name,
                       strerror(errno));
  size_t n = fwrite(data, 1, len, f);
  int e = errno;
  int closed = fclose(f);
  if (n != len || closed != 0)
    return etch__error(ETCH_EIO, "cannot write trace to '%s': %s", name,
                       strerror(n != len ? e : errno));
  return ETCH_OK;
}

/* True when `path` is a regular file that is not the one that was there
 * when the session was made: another process wrote it meanwhile. */
static bool written_by_another(const etch_session *s, const char *path) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (!s->out_existed) return true;
  uint64_t mtime = (uint64_t)st.st_mtim.tv_sec * 1000000000ull +
                   (uint64_t)st.st_mtim.tv_nsec;
  return (uint64_t)st.st_dev != s->out_dev ||
         (uint64_t)st.st_ino != s->out_ino || mtime != s->out_mtime_ns;
}

/*
 * A regular file (or a new one) is written under a temporary name next to
 * it and renamed into place, so that nobody ever sees half a trace and a
 * failed write leaves the old file alone. Anything else (a pipe, a device)
 * is written directly.
 *
 * The session's own output is never written over another process's trace:
 * when the file changed since the session was made (two processes with one
 * ETCH_OUT at once), this one goes to PATH with ".PID" before its
 * extension, and a line on stderr says so.
 */
int etch__session_write_output(etch_session *s, const char *path,
                               char **written, size_t *bytes) {
  if (written) *written = NULL;
  if (bytes) *bytes = 0;
  uint8_t *data;
  size_t len;
  int rc = etch__session_serialize(s, &data, &len);
  if (rc) return rc;
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    rc = write_all(path, path, data, len);
    free(data);
    if (!rc && bytes) *bytes = len;
    if (!rc && written) *written = etch__strdup(path);
    return rc;
  }
  char *own = NULL;
  if (s->cfg.output && strcmp(path, s->cfg.output) == 0 &&
      written_by_another(s, path)) {
    own = etch__output_per_pid(path, (long)getpid());
    if (!own) {
      free(data);
      return etch__error(ETCH_ENOMEM, "out of memory writing '%s'", path);
    }
    fprintf(stderr,
            "etch: %s was written by another process while this one (pid %ld) "
            "ran; its trace goes to %s\n",
            path, (long)getpid(), own);
    path = own;
  }
  size_t plen = strlen(path);
  char *tmp = (char *)malloc(plen + 32);
  if (!tmp) {
    free(data);
    free(own);
    return etch__error(ETCH_ENOMEM, "out of memory writing '%s'", path);
  }
  static uint32_t seq; /* two writes of one process at once: two names */
  snprintf(tmp, plen + 32, "%s.tmp%ld.%u", path, (long)getpid(),
           __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
  rc = write_all(tmp, path, data, len);
  free(data);
  if (!rc && rename(tmp, path) != 0)
    rc = etch__error(ETCH_EIO, "cannot write trace to '%s': %s", path,
                     strerror(errno));
  if (rc) unlink(tmp);
  free(tmp);
  if (!rc && bytes) *bytes = len;
  if (!rc && written) *written = own ? own : etch__strdup(path);
  else free(own);
  return rc;
}

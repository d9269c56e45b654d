/*
 * merge.c - the traces of several processes put together into one trace
 * (etch record: every process of the program in one file).
 *
 * Each process wrote a whole trace of its own: its packets on sequence ids
 * that only it used, its clock snapshot, its TraceStats. Put one after the
 * other as they are, the sequence ids of two processes would collide (each
 * numbers its writers from the same base), and the last TraceStats would
 * hide the others' losses. So every packet goes through the trace-file
 * writer again: compressed batches opened, trusted_packet_sequence_id
 * given anew (one new id for each (file, sequence)), and the TraceStats of
 * every file gathered into one, with a BufferStats for each buffer of
 * each file. The packets themselves are not decoded: what the processes
 * wrote is what the trace holds.
 *
 * But for the clock snapshots of the machine's clocks: each file has one
 * from when its process started, and trace_processor refuses a snapshot
 * whose clocks went back from the one before it (invalid_clock_snapshots).
 * A first pass gathers them; they open the merged trace, oldest first.
 *
 * The files are etch's own, but they are read as any trace is: a record,
 * a packet or a compressed batch that does not decode is refused with its
 * file and offset, and nothing is written in place of the inputs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/base.h"
#include "base/containers.h"
#include "base/map.h"
#include "buffer/sink.h"
#include "buffer/tracefile.h"
#include "cli.h"
#include "pb/pb.h"
#include "proto/perfetto.h"

/* A compressed batch of etch's is ETCH_TRACEFILE_BATCH bytes at most; a
 * batch that opens to more than this is no trace of etch's. */
#define MERGE_BATCH_MAX (64u << 20)

/* A clock snapshot of the machine's clocks, as a file has it. */
typedef struct snap {
  uint64_t boot;  /* its BOOTTIME (its place in time) */
  uint64_t key;   /* the (file, sequence) it is on */
  size_t at, len; /* its bytes in merger.snaps_data */
} snap;

typedef struct merger {
  etch_tracefile tf;
  const char *path;   /* the file being read */
  uint32_t file;      /* its index */
  bool gather;        /* the first pass: clock snapshots only */
  etch_u64map seqs;   /* (file << 32 | sequence id) -> the new ids */
  /* The important events the writer let in, of the file being read: each
   * process numbers its own from 1, so every file has a set of its own
   * (one set for all would keep the first process's id 1 and leave out
   * the second's). */
  etch_u64map important;
  etch_vec snaps;      /* snap */
  etch__pb_buf snaps_data;
  uint32_t next_seq;  /* the next new sequence id */
  etch_vec stats;     /* uint64_t, ETCH_TRACEFILE_NSTATS a buffer */
  size_t nstats;
  etch__pb_buf pkt;   /* a packet without its sequence id */
  z_stream z;
  bool z_open;
  etch_vec batch;     /* an opened compressed batch (its room: cap) */
} merger;

/* One BufferStats of a file's TraceStats, kept for the merged one. */
static int keep_buffer_stats(merger *m, const uint8_t *d, size_t n) {
  if (ETCH_VEC_RESERVE(&m->stats, uint64_t, ETCH_TRACEFILE_NSTATS))
    return etch__error(ETCH_ENOMEM, "out of memory merging traces");
  uint64_t *v = ETCH_VEC_AT(&m->stats, uint64_t) +
                m->nstats * ETCH_TRACEFILE_NSTATS;
  memset(v, 0, ETCH_TRACEFILE_NSTATS * sizeof *v);
  m->stats.len += ETCH_TRACEFILE_NSTATS * sizeof *v;
  uint64_t bytes_written = 0;
  etch__pb_dec dec;
  etch__pb_field f;
  etch__pb_dec_init(&dec, d, n);
  while (etch__pb_next(&dec, &f)) {
    if (f.wt != ETCH_PB_VARINT) continue;
    switch (f.id) {
    case ETCH_BS_BUFFER_SIZE: v[ETCH_TFS_BUFFER_SIZE] = f.u; break;
    case ETCH_BS_BYTES_WRITTEN: bytes_written = f.u; break;
    case ETCH_BS_CHUNKS_WRITTEN: v[ETCH_TFS_CHUNKS_WRITTEN] = f.u; break;
    case ETCH_BS_CHUNKS_OVERWRITTEN: v[ETCH_TFS_CHUNKS_OVERWRITTEN] = f.u; break;
    case ETCH_BS_BYTES_OVERWRITTEN: v[ETCH_TFS_BYTES_OVERWRITTEN] = f.u; break;
    case ETCH_BS_CHUNKS_DISCARDED: v[ETCH_TFS_CHUNKS_DISCARDED] = f.u; break;
    case ETCH_BS_WRITE_WRAP_COUNT: v[ETCH_TFS_WRITE_WRAP_COUNT] = f.u; break;
    case ETCH_BS_TRACE_WRITER_PACKET_LOSS:
      v[ETCH_TFS_WRITERS_WITH_LOSS] = f.u;
      break;
    default: break;
    }
  }
  if (dec.err) return 1;
  if (v[ETCH_TFS_CHUNKS_WRITTEN])
    v[ETCH_TFS_CHUNK_SIZE] = bytes_written / v[ETCH_TFS_CHUNKS_WRITTEN];
  m->nstats++;
  return 0;
}

static int fail(const merger *m, size_t off, const char *what) {
  return etch__error(ETCH_EFORMAT, "%s: offset %zu: %s", m->path, off, what);
}

/* A ClockSnapshot of the machine's clocks only (no sequence-scoped one),
 * with a BOOTTIME: true, and that time in *boot. */
static bool machine_snapshot(const uint8_t *d, size_t n, uint64_t *boot) {
  etch__pb_dec dec, cd;
  etch__pb_field f, g;
  bool has_boot = false;
  etch__pb_dec_init(&dec, d, n);
  while (etch__pb_next(&dec, &f)) {
    if (f.id != ETCH_CLOCKSNAP_CLOCKS || f.wt != ETCH_PB_LEN) continue;
    uint64_t id = 0, ts = 0;
    etch__pb_dec_init(&cd, f.data, f.len);
    while (etch__pb_next(&cd, &g)) {
      if (g.wt != ETCH_PB_VARINT) continue;
      if (g.id == ETCH_SNAPCLOCK_CLOCK_ID) id = g.u;
      if (g.id == ETCH_SNAPCLOCK_TIMESTAMP) ts = g.u;
    }
    if (cd.err || id >= ETCH_CLOCK_SEQ_SCOPED_FIRST) return false;
    if (id == ETCH_CLOCK_BOOTTIME) {
      *boot = ts;
      has_boot = true;
    }
  }
  return !dec.err && has_boot;
}

/* The new sequence id of the file's sequence `seq`. */
static int new_seq(merger *m, uint64_t seq, size_t off, uint32_t *out) {
  uint64_t key = (uint64_t)m->file << 32 | (seq & 0xffffffffu);
  int64_t to;
  if (!etch__u64map_get(&m->seqs, key, &to)) {
    if (m->next_seq == UINT32_MAX)
      return fail(m, off, "more sequences than a trace can number");
    to = m->next_seq++;
    if (!etch__u64map_put(&m->seqs, key, to))
      return etch__error(ETCH_ENOMEM, "out of memory merging traces");
  }
  *out = (uint32_t)to;
  return ETCH_OK;
}

static int merge_records(merger *m, const uint8_t *d, size_t n, size_t base,
                         bool nested);
static int put_packet(merger *m, uint32_t to, const uint8_t *d, size_t n);

/* One TracePacket (`off`: where it starts in the file, for errors). */
static int merge_packet(merger *m, const uint8_t *d, size_t n, size_t off,
                        bool nested) {
  etch__pb_dec dec;
  etch__pb_field f;
  uint64_t seq = 0, boot = 0;
  bool stats = false, compressed = false, clocks = false;
  etch__pb_dec_init(&dec, d, n);
  while (etch__pb_next(&dec, &f)) {
    if (f.id == ETCH_PKT_TRUSTED_SEQ_ID && f.wt == ETCH_PB_VARINT) seq = f.u;
    if (f.id == ETCH_PKT_CLOCK_SNAPSHOT && f.wt == ETCH_PB_LEN &&
        machine_snapshot(f.data, f.len, &boot))
      clocks = true;
    if (f.id == ETCH_PKT_TRACE_STATS && f.wt == ETCH_PB_LEN) stats = true;
    if (f.id == ETCH_PKT_COMPRESSED_PACKETS && f.wt == ETCH_PB_LEN)
      compressed = true;
  }
  if (dec.err) return fail(m, off, "a packet that does not decode");
  if (compressed) {
    if (nested) return fail(m, off, "compressed packets inside compressed "
                                    "packets");
    etch__pb_dec_init(&dec, d, n);
    while (etch__pb_next(&dec, &f)) {
      if (f.id != ETCH_PKT_COMPRESSED_PACKETS || f.wt != ETCH_PB_LEN) continue;
      if (!m->z_open) {
        memset(&m->z, 0, sizeof m->z);
        if (inflateInit2(&m->z, 15 + 32) != Z_OK)
          return etch__error(ETCH_ENOMEM, "out of memory merging traces");
        m->z_open = true;
      } else if (inflateReset(&m->z) != Z_OK) {
        return fail(m, off, "compressed packets that do not open");
      }
      m->z.next_in = (Bytef *)(uintptr_t)f.data;
      m->z.avail_in = (uInt)f.len;
      size_t got = 0;
      int zr;
      do {
        if (got == m->batch.cap) {
          if (got >= MERGE_BATCH_MAX)
            return fail(m, off, "a compressed batch that opens to over "
                                "64 MiB");
          m->batch.len = got;
          if (etch__vec_reserve(&m->batch, got ? got : 512 * 1024))
            return etch__error(ETCH_ENOMEM, "out of memory merging traces");
          m->batch.len = 0;
        }
        m->z.next_out = m->batch.data + got;
        m->z.avail_out = (uInt)(m->batch.cap - got);
        zr = inflate(&m->z, Z_NO_FLUSH);
        got = m->batch.cap - m->z.avail_out;
      } while (zr == Z_OK);
      if (zr != Z_STREAM_END)
        return fail(m, off, "compressed packets that do not open");
      int rc = merge_records(m, m->batch.data, got, off, true);
      if (rc) return rc;
    }
    return ETCH_OK;
  }
  if (m->gather != clocks) return ETCH_OK; /* the other pass's */
  if (stats) { /* gathered into the merged TraceStats */
    etch__pb_dec_init(&dec, d, n);
    while (etch__pb_next(&dec, &f)) {
      if (f.id != ETCH_PKT_TRACE_STATS || f.wt != ETCH_PB_LEN) continue;
      etch__pb_dec ts;
      etch__pb_field g;
      etch__pb_dec_init(&ts, f.data, f.len);
      while (etch__pb_next(&ts, &g)) {
        if (g.id != ETCH_TS_BUFFER_STATS || g.wt != ETCH_PB_LEN) continue;
        int rc = keep_buffer_stats(m, g.data, g.len);
        if (rc == 1) return fail(m, off, "BufferStats that do not decode");
        if (rc) return rc;
      }
      if (ts.err) return fail(m, off, "TraceStats that do not decode");
    }
    return ETCH_OK;
  }
  if (clocks) { /* kept for the start of the trace */
    if (ETCH_VEC_PUSH(&m->snaps, snap,
                      {.boot = boot,
                       .key = (uint64_t)m->file << 32 | (seq & 0xffffffffu),
                       .at = etch__pb_buf_len(&m->snaps_data),
                       .len = n}))
      return etch__error(ETCH_ENOMEM, "out of memory merging traces");
    etch__pb_write_bytes(&m->snaps_data.s, d, n);
    if (m->snaps_data.s.failed)
      return etch__error(ETCH_ENOMEM, "out of memory merging traces");
    return ETCH_OK;
  }
  /* The packet without its sequence id, which the writer stamps anew. */
  uint32_t to;
  int rc = new_seq(m, seq, off, &to);
  if (rc) return rc;
  return put_packet(m, to, d, n);
}

/* Packet d[0..n) on new sequence `to`, without its own sequence id. */
static int put_packet(merger *m, uint32_t to, const uint8_t *d, size_t n) {
  etch__pb_dec dec;
  etch__pb_field f;
  etch__pb_buf_reset(&m->pkt);
  const uint8_t *run = d;
  etch__pb_dec_init(&dec, d, n);
  const uint8_t *at = d;
  while (etch__pb_next(&dec, &f)) {
    const uint8_t *end = dec.p; /* past the field */
    if (f.id == ETCH_PKT_TRUSTED_SEQ_ID) {
      etch__pb_write_bytes(&m->pkt.s, run, (size_t)(at - run));
      run = end;
    }
    at = end;
  }
  etch__pb_write_bytes(&m->pkt.s, run, (size_t)(d + n - run));
  if (m->pkt.s.failed)
    return etch__error(ETCH_ENOMEM, "out of memory merging traces");
  return etch__tracefile_on_packet(&m->tf, to, etch__pb_buf_data(&m->pkt),
                                   (uint32_t)etch__pb_buf_len(&m->pkt), false);
}

/* Trace.packet records d[0..n) (at `base` of the file, for errors). */
static int merge_records(merger *m, const uint8_t *d, size_t n, size_t base,
                         bool nested) {
  etch__pb_dec dec;
  etch__pb_field f;
  etch__pb_dec_init(&dec, d, n);
  while (etch__pb_next(&dec, &f)) {
    size_t off = nested ? base : base + (size_t)(f.data - d);
    if (f.id != ETCH_TRACE_PACKET || f.wt != ETCH_PB_LEN)
      return fail(m, off, "a record that is not a TracePacket");
    int rc = merge_packet(m, f.data, f.len, off, nested);
    if (rc) return rc;
  }
  if (dec.err)
    return fail(m, nested ? base : base + dec.err_off,
                "a record that does not decode (a cut trace?)");
  return ETCH_OK;
}

static int merge_file(merger *m, const char *path) {
  m->path = path;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return etch__error(ETCH_EIO, "%s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return etch__error(ETCH_EIO, "%s: not a regular file", path);
  }
  int rc = ETCH_OK;
  if (sb.st_size > 0) {
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      rc = etch__error(ETCH_EIO, "%s: %s", path, strerror(errno));
    } else {
      rc = merge_records(m, (const uint8_t *)map, (size_t)sb.st_size, 0, false);
      munmap(map, (size_t)sb.st_size);
    }
  }
  close(fd);
  return rc;
}

static int cmp_snap(const void *a, const void *b) {
  const snap *x = (const snap *)a, *y = (const snap *)b;
  if (x->boot != y->boot) return x->boot < y->boot ? -1 : 1;
  return (x->at > y->at) - (x->at < y->at);
}

/* The clock snapshots gathered, oldest first, each on its own sequence. */
static int put_snapshots(merger *m) {
  snap *snaps = ETCH_VEC_AT(&m->snaps, snap);
  size_t nsnaps = ETCH_VEC_COUNT(&m->snaps, snap);
  if (nsnaps) qsort(snaps, nsnaps, sizeof *snaps, cmp_snap);
  for (size_t i = 0; i < nsnaps; i++) {
    snap *sn = &snaps[i];
    m->file = (uint32_t)(sn->key >> 32);
    uint32_t to;
    int rc = new_seq(m, sn->key & 0xffffffffu, 0, &to);
    if (!rc)
      rc = put_packet(m, to, etch__pb_buf_data(&m->snaps_data) + sn->at,
                      sn->len);
    if (rc) return rc;
  }
  return ETCH_OK;
}

int cli_merge_traces(const char *const *in, size_t n, const char *out,
                     bool compress, size_t *bytes) {
  *bytes = 0;
  /* Next to the output, renamed over it when whole: an input may be the
   * output itself. */
  size_t tl = strlen(out) + 32;
  char *tmp = (char *)etch__malloc(tl);
  if (!tmp) return etch__error(ETCH_ENOMEM, "out of memory merging traces");
  snprintf(tmp, tl, "%s.merge-%ld", out, (long)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int rc = etch__error(ETCH_EIO, "%s: %s", tmp, strerror(errno));
    free(tmp);
    return rc;
  }
  merger m;
  memset(&m, 0, sizeof m);
  etch_sink sink;
  etch__sink_init(&sink, fd, false);
  etch__tracefile_init(&m.tf, compress);
  m.tf.sink = &sink;
  etch__pb_buf_init(&m.pkt, 256, 0);
  etch__pb_buf_init(&m.snaps_data, 256, 0);
  /* 1 is the writer's own (the merged TraceStats). */
  m.next_seq = ETCH_TRACEFILE_SERVICE_SEQ + 1;
  int rc = ETCH_OK;
  m.gather = true;
  for (size_t i = 0; i < n && !rc; i++) {
    m.file = (uint32_t)i;
    rc = merge_file(&m, in[i]);
  }
  if (!rc) rc = put_snapshots(&m);
  m.gather = false;
  for (size_t i = 0; i < n && !rc; i++) {
    m.file = (uint32_t)i;
    etch__u64map_free(&m.important);
    memset(&m.important, 0, sizeof m.important);
    m.tf.important = &m.important;
    rc = merge_file(&m, in[i]);
  }
  if (!rc && m.nstats)
    rc = etch__tracefile_put_stats_n(&m.tf, ETCH_VEC_AT(&m.stats, uint64_t),
                                     m.nstats, NULL, 0);
  uint8_t *data = NULL;
  size_t len = 0;
  if (!rc) {
    rc = etch__tracefile_finish(&m.tf, &data, &len);
    if (rc == ETCH_EIO)
      rc = etch__error(ETCH_EIO, "%s: %s", tmp, strerror(sink.err));
  } else {
    etch__tracefile_free(&m.tf);
  }
  free(data);
  if (!rc && close(fd) != 0)
    rc = etch__error(ETCH_EIO, "%s: %s", tmp, strerror(errno));
  else if (rc)
    close(fd);
  if (!rc && rename(tmp, out) != 0)
    rc = etch__error(ETCH_EIO, "cannot rename %s to %s: %s", tmp, out,
                     strerror(errno));
  if (rc) unlink(tmp);
  else *bytes = len;
  if (m.z_open) inflateEnd(&m.z);
  etch__vec_free(&m.batch);
  etch__vec_free(&m.stats);
  etch__vec_free(&m.snaps);
  etch__pb_buf_free(&m.snaps_data);
  etch__pb_buf_free(&m.pkt);
  etch__u64map_free(&m.seqs);
  etch__u64map_free(&m.important);
  free(tmp);
  return rc;
}

/*
 * output.c - a session's trace: its committed packets through the trace-file
 * writer (src/buffer/tracefile.c), with the SDK's own packets (the clock
 * note, drop reports), and the output file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/sys.h"
#include "buffer/sink.h"
#include "buffer/tracefile.h"
#include "proto/encode.h"
#include "sdk/core/sdk.h"


/* When the clock fell back from the TSC to clock_gettime on a CPU that has
 * one: an instant `etch.clock_fallback` on the process track at the time
 * it did, arg `reason`. */
static int put_clock_note(etch_tracefile *o) {
  uint64_t ts = 0;
  const char *why = etch__clock_fallback_note(&ts);
  if (!why) return ETCH_OK;
  etch__pb_stream *s = &o->tmp.s;
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP, ts);
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch__proto_process_track(s, etch__process_uuid(), etch__g.pid, NULL, 0,
                            NULL);
  int rc = etch__tracefile_put_service(o);
  if (rc) return rc;
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP, ts);
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch_note_arg arg = {.name = "reason", .str = why};
  etch__put_etch_instant(s, "etch.clock_fallback", etch__process_uuid(), &arg,
                         1);
  return etch__tracefile_put_service(o);
}

/* Per thread that lost events: its descriptor and an instant saying so. */
/* Called with the session's lock held (the writer list, thread names); the
 * drop times are atomics the writer thread may still be updating. */
static int put_drop_report(etch_tracefile *o, etch_writer *w,
                           uint64_t dropped) {
  etch__pb_stream *s = &o->tmp.s;
  uint64_t ts = __atomic_load_n(&w->first_drop_ns, __ATOMIC_RELAXED);
  uint64_t last = __atomic_load_n(&w->last_drop_ns, __ATOMIC_RELAXED);
  if (last < ts) last = ts;
  uint64_t uuid = etch__thread_uuid(w->tid);
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP, ts);
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch__proto_thread_track(s, uuid, etch__g.pid, w->tid, w->thread_name,
                           strlen(w->thread_name));
  int rc = etch__tracefile_put_service(o);
  if (rc) return rc;

  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP, ts);
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP_CLOCK_ID, ETCH_CLOCK_BOOTTIME);
  etch_note_arg args[2] = {{.name = "count", .value = dropped},
                           {.name = "last_drop_ns", .value = last, .is_uint = true}};
  etch__put_etch_instant(s, "etch.dropped_events", uuid, args, 2);
  return etch__tracefile_put_service(o);
}

/* The session's trace: a clock snapshot, its packets, then `parts` (other
 * copies' traces), then TraceStats with a buffer for each; without
 * `put_stats`, a part for another copy's trace: its packets alone, the
 * stats in *stats_out. */
/* The sequence ids of the session's writers (malloc'd, *n of them). */
static uint32_t *writer_seqs(etch_session *sess, size_t *n) {
  *n = 0;
  size_t cap = 0;
  for (etch_writer *w = sess->writers; w; w = w->next) cap++;
  uint32_t *v = cap ? (uint32_t *)etch__malloc(cap * sizeof *v) : NULL;
  if (!v) return NULL;
  for (etch_writer *w = sess->writers; w && *n < cap; w = w->next)
    v[(*n)++] = w->seq_id;
  return v;
}

static int write_output(etch_session *s, const char *path,
                        const etch__trace_part *parts, size_t nparts,
                        uint64_t *stats, uint32_t **seqs, size_t *nseqs,
                        char **written, size_t *len, size_t *kept);

/* With `sink`, the trace goes into it as it is made (no *data; *len its
 * length; ETCH_EIO without a message when the sink failed), else into
 * memory (*data, *len). */
static int serialize(etch_session *sess, const etch__trace_part *parts,
                     size_t nparts, etch_sink *sink, uint8_t **data,
                     size_t *len, uint64_t *stats_out, bool put_stats,
                     uint32_t **seqs, size_t *nseqs) {
  *data = NULL;
  *len = 0;
  /* A session that wrote while it recorded goes on in the file it has
   * been writing since its start, clock snapshot first. */
  etch_tracefile own, *op = &own;
  int rc = ETCH_OK;
  if (sess->stream) {
    op = etch__stream_tracefile(sess->stream);
  } else {
    etch__tracefile_init(op, sess->cfg.compression == 1);
    op->sink = sink;
    /* A part goes into a trace that has its clock snapshot: a second one,
     * older, would go back in time. */
    if (put_stats) rc = etch__tracefile_put_clock_snapshot(op);
  }
  if (!rc && put_stats) rc = put_clock_note(op);
  uint64_t lost = 0;
  etch_backend *b = sess->backend;
  /* The lock from the buffer's read to the last drop report: a writer
   * reports its drops on its own sequence under it (report_drops in
   * writer.c), so each drop is counted once, in the buffer or here. */
  pthread_mutex_lock(&sess->lock);
  if (!rc && sess->stream) rc = etch__stream_last(sess->stream, &lost);
  else if (!rc) rc = b->ops->read(b, etch__tracefile_on_packet, op, &lost);

  /* Slice ends a writer lost and still keeps, when no thread will write
   * them any more (its own left; this thread's is ours). */
  int32_t me = etch__gettid();
  for (etch_writer *w = sess->writers; w && !rc; w = w->next) {
    if (!w->npend || (!__atomic_load_n(&w->detached, __ATOMIC_ACQUIRE) &&
                      w->tid != me))
      continue;
    for (uint32_t i = 0; i < w->npend && !rc; i++) {
      etch__pending_end_fields(&op->tmp.s, w->pend_ns[i],
                               etch__thread_uuid(w->tid));
      rc = etch__tracefile_put_service(op);
    }
    w->npend = 0;
  }
  /* Drops no writer has reported yet, then the stats. */
  uint64_t writers_with_loss = 0;
  for (etch_writer *w = sess->writers; w && !rc; w = w->next) {
    uint64_t d = __atomic_load_n(&w->dropped, __ATOMIC_ACQUIRE);
    if (!d) continue;
    writers_with_loss++;
    uint64_t r = __atomic_load_n(&w->reported, __ATOMIC_RELAXED);
    if (d > r) rc = put_drop_report(op, w, d - r);
  }
  size_t nws = 0;
  uint32_t *ws = writer_seqs(sess, &nws);
  pthread_mutex_unlock(&sess->lock);
  for (size_t i = 0; i < nparts && !rc; i++)
    rc = etch__tracefile_put_raw(op, parts[i].data, parts[i].len);
  uint64_t *all = NULL;
  if (!rc) {
    etch_buffer_stats bs;
    b->ops->stats(b, &bs);
    all = (uint64_t *)etch__calloc(nparts + 1, sizeof(uint64_t) * ETCH_TRACEFILE_NSTATS);
    if (!all) rc = etch__error(ETCH_ENOMEM, "out of memory writing trace");
    else etch__tracefile_stats_pack(all, &bs, b->chunk_size,
                                    writers_with_loss + lost);
  }
  if (!rc) {
    if (stats_out) memcpy(stats_out, all, sizeof(uint64_t) * ETCH_TRACEFILE_NSTATS);
    for (size_t i = 0; i < nparts; i++)
      memcpy(all + (i + 1) * ETCH_TRACEFILE_NSTATS, parts[i].stats,
             sizeof parts[i].stats);
    if (put_stats)
      rc = etch__tracefile_put_stats_n(op, all, nparts + 1, ws, nws);
  }
  free(all);
  if (seqs) {
    *seqs = ws;
    *nseqs = nws;
  } else {
    free(ws);
  }
  if (rc) {
    etch__tracefile_free(op);
    return rc;
  }
  return etch__tracefile_finish(op, data, len);
}

int etch__session_serialize(etch_session *sess, uint8_t **data, size_t *len) {
  return serialize(sess, NULL, 0, NULL, data, len, NULL, true, NULL, NULL);
}

int etch__session_serialize_part(etch_session *sess, uint8_t **data,
                                 size_t *len, uint64_t *stats) {
  return serialize(sess, NULL, 0, NULL, data, len, stats, false, NULL, NULL);
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
 * Makes the trace into `fd` (a regular file, or a pipe or device) as it
 * is read out of the session's buffer. A write that fails part way (a
 * full disk, a quota, a file size limit: all the same) never leaves a
 * partial packet in a regular file: it is cut back to its last whole
 * packet, and *kept says how many bytes of the trace it holds (0: none
 * worth keeping, or not a regular file). `name` is what errors call it.
 */
static int write_into(etch_session *s, const etch__trace_part *parts,
                      size_t nparts, int fd, const char *name,
                      uint64_t *stats, uint32_t **seqs, size_t *nseqs,
                      size_t *len, size_t *kept) {
  etch_sink k;
  etch__sink_init(&k, fd, false);
  uint8_t *none;
  int rc = serialize(s, parts, nparts, &k, &none, len, stats, true, seqs,
                     nseqs);
  int e = k.err;
  if (close(fd) != 0 && !e && !rc) e = errno;
  *kept = k.regular && k.err ? (size_t)k.written : 0;
  if (rc && rc != ETCH_EIO) return rc; /* made it up to an error: said */
  if (!e) return rc;
  if (*kept)
    return etch__error(ETCH_EIO,
                       "cannot write all of the trace to '%s': %s; it ends at "
                       "its last whole packet (%zu of %zu bytes)",
                       name, strerror(e), *kept, *len);
  return etch__error(ETCH_EIO, "cannot write trace to '%s': %s", name,
                     strerror(e));
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
  /* The environment session of the first copy of etch in the process
   * writes the other copies' traces too (join.c). */
  bool owner = s->join_owner && etch__join_owner();
  etch__trace_part *parts = NULL;
  size_t nparts = 0;
  if (owner) etch__join_gather(&parts, &nparts);
  uint64_t own_stats[ETCH_TRACEFILE_NSTATS] = {0};
  uint32_t *seqs = NULL;
  size_t nseqs = 0;
  char *w = NULL;
  size_t kept = 0, len = 0;
  int rc = write_output(s, path, parts, nparts, own_stats, &seqs, &nseqs, &w,
                        &len, &kept);
  if (owner) etch__join_written(rc ? NULL : w, own_stats, seqs, nseqs);
  free(seqs);
  if (bytes) *bytes = rc ? kept : len;
  if (written) *written = w;
  else free(w);
  return rc;
}

/* A session that wrote while it recorded: the rest of its trace into the
 * file it has been writing (opened at its start: its own name, or .PID's
 * when another process had it), which is then closed. As write_into, a
 * write that failed left the file at its last whole packet. */
static int finish_stream(etch_session *s, const etch__trace_part *parts,
                         size_t nparts, uint64_t *stats, uint32_t **seqs,
                         size_t *nseqs, char **written, size_t *len,
                         size_t *kept) {
  etch__stream_halt(s->stream);
  uint8_t *none;
  int rc = serialize(s, parts, nparts, NULL, &none, len, stats, true, seqs,
                     nseqs);
  const char *name;
  int e = etch__stream_close(s->stream, &name, kept);
  if (!e) *kept = 0;
  if (rc && rc != ETCH_EIO) return rc; /* made it up to an error: said */
  if (e && *kept)
    return etch__error(ETCH_EIO,
                       "cannot write all of the trace to '%s': %s; it ends at "
                       "its last whole packet (%zu of %zu bytes)",
                       name, strerror(e), *kept, *len);
  if (e)
    return etch__error(ETCH_EIO, "cannot write trace to '%s': %s", name,
                       strerror(e));
  if (!rc && written) *written = etch__strdup(name);
  return rc;
}

/* Writes the trace to `path`, as the comment above says; the path written
 * in *written; its length in *len; on a failure that kept the trace to its
 * last whole packet, its size in *kept. */
static int write_output(etch_session *s, const char *path,
                        const etch__trace_part *parts, size_t nparts,
                        uint64_t *stats, uint32_t **seqs, size_t *nseqs,
                        char **written, size_t *len, size_t *kept) {
  if (s->stream)
    return finish_stream(s, parts, nparts, stats, seqs, nseqs, written, len,
                         kept);
  int rc;
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    int fd =
        etch__sys_open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
      return etch__error(ETCH_EIO, "cannot write trace to '%s': %s", path,
                         strerror(errno));
    rc = write_into(s, parts, nparts, fd, path, stats, seqs, nseqs, len,
                    kept);
    if (!rc && written) *written = etch__strdup(path);
    return rc;
  }
  char *own = NULL;
  if (s->cfg.output && strcmp(path, s->cfg.output) == 0 &&
      written_by_another(s, path)) {
    own = etch__output_per_pid(path, (long)getpid());
    if (!own) return etch__error(ETCH_ENOMEM, "out of memory writing '%s'", path);
    fprintf(stderr,
            "etch: %s was written by another process while this one (pid %ld) "
            "ran; its trace goes to %s\n",
            path, (long)getpid(), own);
    path = own;
  }
  size_t plen = strlen(path);
  char *tmp = (char *)etch__malloc(plen + 32);
  if (!tmp) {
    free(own);
    return etch__error(ETCH_ENOMEM, "out of memory writing '%s'", path);
  }
  static uint32_t seq; /* two writes of one process at once: two names */
  snprintf(tmp, plen + 32, "%s.tmp%ld.%u", path, (long)getpid(),
           __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
  int fd = etch__sys_open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    rc = etch__error(ETCH_EIO, "cannot write trace to '%s': %s", path,
                     strerror(errno));
    free(tmp);
    free(own);
    return rc;
  }
  rc = write_into(s, parts, nparts, fd, path, stats, seqs, nseqs, len, kept);
  /* A trace cut at its last whole packet (a full disk) is kept, and the
   * error says so: it is what there is of this run's trace. */
  bool keep = !rc || *kept;
  if (keep && etch__sys_rename(tmp, path) != 0) {
    rc = etch__error(ETCH_EIO, "cannot write trace to '%s': %s", path,
                     strerror(errno));
    keep = false;
  }
  if (!keep) {
    unlink(tmp);
    *kept = 0;
  }
  free(tmp);
  if (keep && written) *written = own ? own : etch__strdup(path);
  else free(own);
  return rc;
}

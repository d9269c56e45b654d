/*
 * stream.c - a session that writes its trace while it records
 * (write_period_ms): its output file is opened when it starts and a
 * thread of its own moves what the writers committed out of the buffer
 * into the file, every write_period_ms and whenever a quarter of the
 * buffer has gone out since the last time:
 *
 *   writers --chunks--> buffer --collect--> trace buffer --read--> trace file
 *   (lock-free)         (in process)        (buffer/tracebuf.c:    (sink, whole
 *                                            a sequence's place     packets at a
 *                                            kept from one read     time)
 *                                            to the next)
 *
 * A chunk copied out is free for a writer again, so a small buffer records
 * a long run, and the file on disk is a valid trace of what was written so
 * far at every moment (the sink writes whole packets): a process killed by
 * SIGKILL leaves the trace up to the last write. When the session stops,
 * the rest goes in as for any session (output.c): the last collect, slice
 * ends kept, drop reports, the stats.
 *
 * Two locks: `lock` guards the file and the trace buffer (the thread, a
 * flush, the end), `sig` only the requests, so a writer that wakes the
 * thread never waits for a write to disk.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/sys.h"
#include "buffer/sink.h"
#include "buffer/tracebuf.h"
#include "buffer/tracefile.h"
#include "sdk/core/sdk.h"

struct etch_stream {
  etch_backend *b;
  char *path; /* the file written: the output, or its .PID name */
  int fd;
  etch_sink sink;
  etch_tracefile tf;
  etch_tracebuf *tb;
  uint64_t period_ns;
  pthread_mutex_t lock; /* tf, tb, the file */
  pthread_t thread;
  bool started;
  pthread_mutex_t sig; /* what follows */
  pthread_cond_t cond;
  bool stop, wake;
  uint64_t asked, done; /* flushes asked for, drains done for them */
  int rc;               /* the first failure, and its message */
  char err[256];
};

/* The writers' wake-up (inproc.c calls it from a chunk hand-out). */
static void stream_wake(void *ctx) {
  etch_stream *st = (etch_stream *)ctx;
  pthread_mutex_lock(&st->sig);
  st->wake = true;
  pthread_cond_signal(&st->cond);
  pthread_mutex_unlock(&st->sig);
}

static void note_failure(etch_stream *st, int rc, const char *what) {
  if (st->rc) return;
  st->rc = rc;
  snprintf(st->err, sizeof st->err, "%s", what);
}

/* What was committed since the last drain, into the file (with `lock`).
 * Failures are kept for the end (the session goes on recording). */
static void drain(etch_stream *st, bool flush) {
  int rc = st->b->ops->collect(st->b, st->tb);
  if (rc) note_failure(st, rc, "out of memory copying the buffer");
  bool more;
  rc = etch__tracebuf_read_runs(st->tb, etch__tracefile_on_packet,
                                etch__tracefile_on_run, &st->tf, UINT64_MAX,
                                &more);
  if (rc) note_failure(st, rc, etch_last_error());
  if (flush && (rc = etch__tracefile_flush(&st->tf)) && rc != ETCH_EIO)
    note_failure(st, rc, etch_last_error());
}

static uint64_t mono_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void *stream_main(void *arg) {
  etch_stream *st = (etch_stream *)arg;
  etch__tls.internal = true; /* its allocations are etch's */
  pthread_mutex_lock(&st->sig);
  uint64_t next = mono_ns() + st->period_ns;
  while (!st->stop) {
    if (!st->wake && st->asked == st->done) {
      struct timespec at = {.tv_sec = (time_t)(next / 1000000000ull),
                            .tv_nsec = (long)(next % 1000000000ull)};
      int w = pthread_cond_timedwait(&st->cond, &st->sig, &at);
      if (w != ETIMEDOUT && !st->wake && st->asked == st->done) continue;
    }
    if (st->stop) break;
    uint64_t asked = st->asked;
    st->wake = false;
    pthread_mutex_unlock(&st->sig);
    pthread_mutex_lock(&st->lock);
    drain(st, true);
    pthread_mutex_unlock(&st->lock);
    pthread_mutex_lock(&st->sig);
    st->done = asked;
    pthread_cond_broadcast(&st->cond);
    next = mono_ns() + st->period_ns;
  }
  pthread_mutex_unlock(&st->sig);
  return NULL;
}

/* Opens the output for writing as it is made: a regular file is locked,
 * so that a second process with the same output writes PATH.PID instead
 * of into the first one's trace. */
static int open_output(etch_stream *st, const char *path) {
  char *own = NULL;
  for (int attempt = 0; attempt < 2; attempt++) {
    const char *p = own ? own : path;
    int fd = etch__sys_open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
      int e = errno;
      free(own);
      return etch__error(ETCH_EIO, "cannot write trace to '%s': %s", p,
                         strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode)) { /* a pipe, a device */
      st->fd = fd;
      st->path = own ? own : etch__strdup(path);
      return st->path ? ETCH_OK : ETCH_ENOMEM;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      if (etch__sys_ftruncate(fd, 0) != 0) {
        int e = errno;
        close(fd);
        free(own);
        return etch__error(ETCH_EIO, "cannot write trace to '%s': %s", p,
                           strerror(e));
      }
      st->fd = fd;
      st->path = own ? own : etch__strdup(path);
      return st->path ? ETCH_OK : ETCH_ENOMEM;
    }
    close(fd);
    if (own) break;
    own = etch__output_per_pid(path, (long)getpid());
    if (!own) return etch__error(ETCH_ENOMEM, "out of memory writing '%s'", path);
    fprintf(stderr,
            "etch: %s is being written by another process; this one's (pid "
            "%ld) trace goes to %s\n",
            path, (long)getpid(), own);
  }
  int rc = etch__error(ETCH_EIO, "cannot write trace to '%s': another process "
                       "is writing it", own);
  free(own);
  return rc;
}

static void stream_free(etch_stream *st) {
  if (st->fd >= 0) close(st->fd);
  etch__tracefile_free(&st->tf);
  etch__tracebuf_free(st->tb);
  pthread_mutex_destroy(&st->lock);
  pthread_mutex_destroy(&st->sig);
  pthread_cond_destroy(&st->cond);
  free(st->path);
  free(st);
}

int etch__stream_start(etch_session *s) {
  etch_backend *b = s->backend;
  etch_stream *st = (etch_stream *)etch__calloc(1, sizeof *st);
  if (!st) return etch__error(ETCH_ENOMEM, "out of memory starting a session");
  st->fd = -1;
  st->b = b;
  st->period_ns = s->cfg.write_period_ms * 1000000ull;
  pthread_mutex_init(&st->lock, NULL);
  pthread_mutex_init(&st->sig, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&st->cond, &ca);
  pthread_condattr_destroy(&ca);
  etch__tracefile_init(&st->tf, s->cfg.compression == 1);
  /* Holds what one drain takes (at most the buffer, and a packet pending
   * across drains); a ring, so that it never refuses a chunk. */
  int rc = etch__tracebuf_new((uint64_t)b->chunk_size * 1024 +
                                  s->cfg.buffer_kb * 2048,
                              ETCH_BUFFER_RING, &st->tb);
  if (!rc) rc = open_output(st, s->cfg.output);
  if (!rc) {
    etch__sink_init(&st->sink, st->fd, false);
    st->tf.sink = &st->sink;
    rc = etch__tracefile_put_clock_snapshot(&st->tf);
  }
  if (!rc && (rc = etch__tracefile_flush(&st->tf)) == ETCH_EIO)
    rc = etch__error(ETCH_EIO, "cannot write trace to '%s': %s", st->path,
                     strerror(st->sink.err));
  if (rc) {
    stream_free(st);
    return rc;
  }
  b->ops->stream(b, stream_wake, st);
  if (pthread_create(&st->thread, NULL, stream_main, st) != 0) {
    stream_free(st);
    return etch__error(ETCH_ENOMEM, "cannot start the thread that writes the "
                       "trace");
  }
  st->started = true;
  s->stream = st;
  return ETCH_OK;
}

int etch__stream_flush(etch_stream *st) {
  pthread_mutex_lock(&st->sig);
  uint64_t mine = ++st->asked;
  pthread_cond_broadcast(&st->cond);
  while (!st->stop && st->done < mine) pthread_cond_wait(&st->cond, &st->sig);
  bool stopped = st->done < mine;
  pthread_mutex_unlock(&st->sig);
  if (stopped) return ETCH_OK; /* the end writes it all */
  pthread_mutex_lock(&st->lock);
  int rc = st->sink.err ? ETCH_EIO : st->rc;
  char msg[sizeof st->err];
  if (st->sink.err)
    snprintf(msg, sizeof msg, "cannot write trace to '%s': %s", st->path,
             strerror(st->sink.err));
  else
    memcpy(msg, st->err, sizeof msg);
  pthread_mutex_unlock(&st->lock);
  return rc ? etch__error(rc, "%s", msg) : ETCH_OK;
}

void etch__stream_halt(etch_stream *st) {
  pthread_mutex_lock(&st->sig);
  bool was = st->stop;
  st->stop = true;
  pthread_cond_broadcast(&st->cond);
  pthread_mutex_unlock(&st->sig);
  if (!was && st->started) pthread_join(st->thread, NULL);
}

etch_tracefile *etch__stream_tracefile(etch_stream *st) { return &st->tf; }

int etch__stream_last(etch_stream *st, uint64_t *lost) {
  pthread_mutex_lock(&st->lock);
  drain(st, false);
  etch_tracebuf_stats ts;
  etch__tracebuf_stats(st->tb, &ts);
  *lost = ts.sequence_gaps + ts.abi_violations;
  int rc = st->rc == ETCH_ENOMEM ? st->rc : ETCH_OK;
  pthread_mutex_unlock(&st->lock);
  return rc ? etch__error(rc, "%s", st->err) : ETCH_OK;
}

int etch__stream_close(etch_stream *st, const char **path, size_t *kept) {
  *path = st->path;
  int e = st->sink.err;
  if (close(st->fd) != 0 && !e) e = errno;
  st->fd = -1;
  *kept = (size_t)st->sink.written;
  return e;
}

void etch__stream_free(etch_stream *st) {
  if (!st) return;
  etch__stream_halt(st);
  stream_free(st);
}

void etch__stream_forget(etch_stream *st) {
  /* A fork child: the thread and the locks are the parent's; the file is
   * the parent's to write (its descriptor here is a copy). */
  if (!st) return;
  if (st->fd >= 0) close(st->fd);
  etch__tracefile_free(&st->tf);
  etch__tracebuf_free(st->tb);
  free(st->path);
  free(st);
}

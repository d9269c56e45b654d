/*
 * sink_test.c - the trace-file writer into a sink (src/buffer/sink.c):
 * the same bytes as in memory, a file that fills up cut back to its last
 * whole record, a pipe read as it is written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buffer/sink.h"
#include "buffer/tracefile.h"
#include "pb/pb.h"
#include "test.h"

/* Packet i of sequence 2 + i % 3: a TracePacket with a timestamp and a
 * payload of 0 to 700 bytes, one in 500 of 70 000 (over a deflate batch's
 * slice and the flush size's share), so that records of every framing
 * size go through. */
static size_t make_packet(uint8_t *buf, uint32_t i) {
  uint8_t *q = etch__pb_put_varint_field(buf, 8 /* timestamp */, 1000 + i);
  uint32_t n = i % 500 == 7 ? 70000 : (i * 37) % 701;
  q = etch__pb_put_tag(q, 2000 /* an unknown field */, ETCH_PB_LEN);
  q = etch__pb_put_varint(q, n);
  for (uint32_t k = 0; k < n; k++) q[k] = (uint8_t)(i + k);
  return (size_t)(q + n - buf);
}

enum { NPACKETS = 20000 };

/* The packets (and a service packet every 1000) into `o`. */
static void feed(etch_tracefile *o) {
  static uint8_t buf[80000];
  for (uint32_t i = 0; i < NPACKETS; i++) {
    size_t n = make_packet(buf, i);
    ASSERT_OK(etch__tracefile_on_packet(o, 2 + i % 3, buf, (uint32_t)n,
                                        i % 4000 == 3));
    if (i % 1000 == 999) {
      etch__pb_write_varint_field(&o->tmp.s, 8, i);
      ASSERT_OK(etch__tracefile_put_service(o));
    }
  }
}

static uint8_t *in_memory(bool compress, size_t *len) {
  etch_tracefile o;
  etch__tracefile_init(&o, compress);
  feed(&o);
  uint8_t *data;
  ASSERT_OK(etch__tracefile_finish(&o, &data, len));
  return data;
}

/* Into a file through a sink: the same bytes as in memory, with and
 * without deflate, and larger than the flush size many times over. */
TEST(tracefile_into_a_sink_makes_the_same_bytes) {
  for (int compress = 0; compress < 2; compress++) {
    size_t mlen;
    uint8_t *mem = in_memory(compress, &mlen);
    if (!compress) ASSERT_TRUE(mlen > 8u * ETCH_TRACEFILE_FLUSH);
    char path[512];
    snprintf(path, sizeof path, "%s/t%d.pftrace", etch_test_tmpdir(), compress);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_TRUE(fd >= 0);
    etch_sink k;
    etch__sink_init(&k, fd, false);
    ASSERT_TRUE(k.regular);
    etch_tracefile o;
    etch__tracefile_init(&o, compress);
    o.sink = &k;
    feed(&o);
    uint8_t *none = (uint8_t *)"x";
    size_t len = 0;
    ASSERT_OK(etch__tracefile_finish(&o, &none, &len));
    ASSERT_TRUE(none == NULL);
    close(fd);
    ASSERT_EQ_U64(len, mlen);
    ASSERT_EQ_U64(k.written, mlen);
    ASSERT_EQ_U64(k.offered, mlen);
    ASSERT_EQ_INT(k.err, 0);
    size_t flen;
    uint8_t *file = etch_test_read_file(path, &flen);
    ASSERT_TRUE(file != NULL);
    ASSERT_EQ_U64(flen, mlen);
    ASSERT_TRUE(memcmp(file, mem, mlen) == 0);
    free(file);
    free(mem);
  }
}

/* A file that cannot grow past 3 MiB and a bit (a file size limit, as a
 * full disk or a quota): the sink stops, the file is cut back to the last
 * whole record before the limit, and the trace's whole length is still
 * counted, for the message that says how much of it the file holds. */
TEST(tracefile_into_a_full_file_keeps_whole_records) {
  size_t mlen;
  uint8_t *mem = in_memory(false, &mlen);
  char path[512];
  snprintf(path, sizeof path, "%s/full.pftrace", etch_test_tmpdir());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(fd >= 0);
  /* The file starts after 100 bytes of something else: they stay. */
  char head[100];
  memset(head, 'h', sizeof head);
  ASSERT_EQ_INT((int)write(fd, head, sizeof head), 100);
  size_t limit = 3u * ETCH_TRACEFILE_FLUSH + 12345;
  struct rlimit old, rl;
  ASSERT_EQ_INT(getrlimit(RLIMIT_FSIZE, &old), 0);
  rl = old;
  rl.rlim_cur = 100 + limit;
  void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ_INT(setrlimit(RLIMIT_FSIZE, &rl), 0);
  etch_sink k;
  etch__sink_init(&k, fd, false);
  ASSERT_EQ_U64((uint64_t)k.base, 100);
  etch_tracefile o;
  etch__tracefile_init(&o, false);
  o.sink = &k;
  feed(&o);
  uint8_t *none;
  size_t len = 0;
  int rc = etch__tracefile_finish(&o, &none, &len);
  ASSERT_EQ_INT(setrlimit(RLIMIT_FSIZE, &old), 0);
  signal(SIGXFSZ, was);
  close(fd);
  ASSERT_EQ_INT(rc, ETCH_EIO);
  ASSERT_EQ_INT(k.err, EFBIG);
  ASSERT_EQ_INT(k.cut_err, 0);
  ASSERT_EQ_U64(len, mlen);
  ASSERT_EQ_U64(k.offered, mlen);
  size_t want = etch__records_within(mem, mlen, limit);
  ASSERT_TRUE(want > 2u * ETCH_TRACEFILE_FLUSH && want <= limit);
  ASSERT_EQ_U64(k.written, want);
  size_t flen;
  uint8_t *file = etch_test_read_file(path, &flen);
  ASSERT_EQ_U64(flen, 100 + want);
  ASSERT_TRUE(memcmp(file, head, 100) == 0);
  ASSERT_TRUE(memcmp(file + 100, mem, want) == 0);
  free(file);
  free(mem);
}

typedef struct drain {
  int fd;
  uint8_t *data;
  size_t len;
} drain;

static void *drain_main(void *arg) {
  drain *d = (drain *)arg;
  size_t cap = 1 << 20;
  d->data = (uint8_t *)malloc(cap);
  for (;;) {
    if (d->len == cap) d->data = (uint8_t *)realloc(d->data, cap *= 2);
    ssize_t n = read(d->fd, d->data + d->len, cap - d->len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    d->len += (size_t)n;
  }
  return NULL;
}

/* A pipe: every byte, in order, read by another thread as it comes (a
 * blocking sink waits for it); then a pipe whose reader has gone fails
 * with EPIPE and the sink counts what it could not write. */
TEST(tracefile_into_a_pipe) {
  size_t mlen;
  uint8_t *mem = in_memory(true, &mlen);
  int p[2];
  ASSERT_EQ_INT(pipe(p), 0);
  drain d = {.fd = p[0]};
  pthread_t t;
  ASSERT_EQ_INT(pthread_create(&t, NULL, drain_main, &d), 0);
  etch_sink k;
  etch__sink_init(&k, p[1], false);
  ASSERT_FALSE(k.regular);
  etch_tracefile o;
  etch__tracefile_init(&o, true);
  o.sink = &k;
  feed(&o);
  uint8_t *none;
  size_t len;
  ASSERT_OK(etch__tracefile_finish(&o, &none, &len));
  close(p[1]);
  pthread_join(t, NULL);
  close(p[0]);
  ASSERT_EQ_U64(d.len, mlen);
  ASSERT_TRUE(memcmp(d.data, mem, mlen) == 0);
  free(d.data);

  ASSERT_EQ_INT(pipe(p), 0);
  close(p[0]);
  void (*was)(int) = signal(SIGPIPE, SIG_IGN);
  etch__sink_init(&k, p[1], false);
  ASSERT_EQ_U64(etch__sink_write(&k, mem, mlen), 0);
  ASSERT_EQ_INT(k.err, EPIPE);
  ASSERT_EQ_U64(k.offered, mlen);
  ASSERT_EQ_U64(k.written, 0);
  ASSERT_EQ_U64(etch__sink_write(&k, mem, 10), 0); /* dead: counts only */
  ASSERT_EQ_U64(k.offered, mlen + 10);
  signal(SIGPIPE, was);
  close(p[1]);
  free(mem);
}

/* Whether another open of `path` sees a writer's lock on it. */
static bool locked_for(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ASSERT_TRUE(fd >= 0);
  struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
  ASSERT_EQ_INT(fcntl(fd, F_OFD_GETLK, &fl), 0);
  close(fd);
  return fl.l_type == F_WRLCK;
}

/* A sink over a regular file holds the writer's lock (sink.h) for as long
 * as the file is open, here or in a copy of the descriptor (etchd's); the
 * last close lets it go. A pipe has none. */
TEST(sink_holds_the_writers_lock_while_the_file_is_open) {
  char path[512];
  snprintf(path, sizeof path, "%s/locked.pftrace", etch_test_tmpdir());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(fd >= 0);
  ASSERT_FALSE(locked_for(path));
  etch_sink k;
  etch__sink_init(&k, fd, false);
  ASSERT_TRUE(k.held);
  ASSERT_TRUE(locked_for(path));
  int copy = dup(fd);
  close(fd);
  ASSERT_TRUE(locked_for(path)); /* the copy still has it */
  /* A second writer of the same open file (etchd's sink on the
   * descriptor etch record passed) holds the same lock. */
  etch_sink k2;
  etch__sink_init(&k2, copy, true);
  ASSERT_TRUE(k2.held);
  close(copy);
  ASSERT_FALSE(locked_for(path));
  int p[2];
  ASSERT_EQ_INT(pipe(p), 0);
  etch__sink_init(&k, p[1], true);
  ASSERT_FALSE(k.held);
  close(p[0]);
  close(p[1]);
  unlink(path);
}

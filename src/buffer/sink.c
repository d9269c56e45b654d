/*
 * sink.c - a trace file's bytes into a file descriptor, whole records at a
 * time (see sink.h).
 */
#define _GNU_SOURCE
#include "buffer/sink.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/sys.h"
#include "pb/pb.h"

size_t etch__records_within(const uint8_t *data, size_t len, size_t room) {
  etch__pb_dec d;
  etch__pb_field f;
  size_t keep = 0;
  etch__pb_dec_init(&d, data, len);
  while (etch__pb_next(&d, &f) && (size_t)(d.p - d.start) <= room)
    keep = (size_t)(d.p - d.start);
  return keep;
}

size_t etch__record_end(const uint8_t *data, size_t len, size_t k) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, data, len);
  while (etch__pb_next(&d, &f))
    if ((size_t)(d.p - d.start) >= k && (size_t)(d.p - d.start) > 0)
      return (size_t)(d.p - d.start);
  return len;
}

bool etch__sink_hold(int fd) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  int r;
  while ((r = fcntl(fd, F_OFD_SETLK, &fl)) != 0 && errno == EINTR) {
  }
  return r == 0;
}

void etch__sink_init(etch_sink *k, int fd, bool nowait) {
  *k = (etch_sink){.fd = fd, .nowait = nowait};
  struct stat st;
  if (fstat(fd, &st) == 0) {
    k->regular = S_ISREG(st.st_mode) || S_ISBLK(st.st_mode);
    k->socket = S_ISSOCK(st.st_mode);
  }
  /* A trace file being written says so to its readers (see sink.h). */
  if (S_ISREG(st.st_mode)) k->held = etch__sink_hold(fd);
  if (k->regular) { /* where the trace starts, to cut back to */
    int fl = fcntl(fd, F_GETFL);
    off_t at = fl >= 0 && (fl & O_APPEND) ? lseek(fd, 0, SEEK_END)
                                          : lseek(fd, 0, SEEK_CUR);
    k->base = at > 0 ? at : 0;
  }
}

/* One write into a pipe, socket or terminal that never waits: a socket
 * takes MSG_DONTWAIT; anything else is written only when poll() says it
 * has room, at most PIPE_BUF bytes at a time, which a pipe with room takes
 * without waiting. */
static ssize_t write_nowait(const etch_sink *k, const uint8_t *p, size_t n) {
  if (k->socket) return send(k->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
  struct pollfd pf = {.fd = k->fd, .events = POLLOUT};
  int r = poll(&pf, 1, 0);
  if (r < 0) return -1;
  if (r == 0) {
    errno = EAGAIN;
    return -1;
  }
  /* POLLERR or POLLHUP: the write fails at once and says why. */
  return etch__sys_write(k->fd, p, n < PIPE_BUF ? n : PIPE_BUF);
}

size_t etch__sink_write(etch_sink *k, const uint8_t *data, size_t len) {
  k->offered += len;
  if (k->err) return 0;
  bool direct = k->regular || !k->nowait;
  size_t off = 0;
  while (off < len) {
    /* A pipe or socket gets whole records, as many as fit in PIPE_BUF
     * (one a pipe with room takes at once, so that what it holds ends at
     * a packet's end when its reader stops), a record larger than that in
     * pieces. */
    size_t w = len - off;
    if (!direct) {
      size_t whole;
      if (k->rec_left)
        w = w < k->rec_left ? w : k->rec_left;
      else if ((whole = etch__records_within(data + off, len - off, PIPE_BUF)))
        w = whole;
    }
    ssize_t n = direct ? etch__sys_write(k->fd, data + off, w)
                       : write_nowait(k, data + off, w);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && !direct && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      k->err = n < 0 ? errno : ENOSPC; /* nothing taken: no room */
      if (!k->regular) {
        if (!k->nowait) k->written += off;
        return off;
      }
      /* The record being written is cut: back to the last whole one. */
      size_t keep = etch__records_within(data, len, off);
      if (etch__sys_ftruncate(k->fd, k->base + (off_t)(k->written + keep)) != 0)
        k->cut_err = errno;
      k->written += keep;
      return keep;
    }
    if (!direct)
      k->rec_left = k->rec_left ? k->rec_left - (size_t)n
                                : etch__record_end(data + off, len - off,
                                                   (size_t)n) - (size_t)n;
    if (!direct) k->written += (uint64_t)n;
    off += (size_t)n;
  }
  if (direct) k->written += off;
  return off;
}

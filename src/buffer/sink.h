/*
 * sink.h - where a trace file's bytes go: a file descriptor, written whole
 * Trace.packet records at a time, so that what the file holds always ends
 * at a packet's end.
 *
 * One path for libetch's output (a session's file, written as it is read
 * out of the buffer: the trace is never all in memory at once) and etchd's
 * write_into_file. Two modes:
 *  - blocking (libetch): every byte is written; a regular file that fails
 *    (a full disk, a quota, a file size limit) is cut back to its last
 *    whole record and the sink is dead;
 *  - nowait (etchd): a pipe, socket or terminal is written only when it
 *    has room (poll, MSG_DONTWAIT; the open file is the consumer's, its
 *    O_NONBLOCK not ours to set), whole records as many as fit in
 *    PIPE_BUF, a larger record in pieces; a write that would wait takes
 *    fewer bytes, which the caller keeps for later.
 *
 * A regular file is locked while it is written: etch__sink_init takes an
 * open-file-description write lock on the whole file (fcntl F_OFD_SETLK),
 * which lives as long as the file is open anywhere (in etch record, or in
 * etchd that was handed the same open file) and goes with the last close,
 * also of a process that is killed. A reader that finds the lock held
 * (F_OFD_GETLK) knows the trace is still being recorded: it reads up to
 * its last whole packet and says "recording", where a file without the
 * lock that ends inside a packet was cut short. Advisory: a writer that
 * cannot take it (another holds it, a file system without such locks)
 * writes all the same.
 *
 *   etch_sink k;
 *   etch__sink_init(&k, fd, false);
 *   size_t took = etch__sink_write(&k, records, len);  (k.err on failure)
 */
#ifndef ETCH_BUFFER_SINK_H
#define ETCH_BUFFER_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct etch_sink {
  int fd;
  bool nowait;
  bool regular; /* a regular file or block device: cut back on failure */
  bool socket;
  off_t base;        /* the file's offset where the trace starts */
  uint64_t written;  /* bytes of the trace the file holds */
  uint64_t offered;  /* bytes given to etch__sink_write, taken or not */
  size_t rec_left;   /* nowait: bytes left of a record taken in part */
  int err;           /* errno of the failure that ended the sink; 0: good */
  int cut_err;       /* errno of a cut back that failed; 0: none */
  bool held;         /* the writer's lock on the file taken */
} etch_sink;

/* Takes the writer's lock on the regular file open as `fd` (see above);
 * false when it could not (then nothing is held). */
bool etch__sink_hold(int fd);

/* A sink over `fd` (not taken: the caller closes it). */
void etch__sink_init(etch_sink *k, int fd, bool nowait);
/*
 * Gives the file len bytes of whole records; returns how many it took:
 * all of them, unless a nowait pipe or socket is full or the file failed
 * (then k->err; later calls take nothing and only count).
 */
size_t etch__sink_write(etch_sink *k, const uint8_t *data, size_t len);

/* The length of the whole Trace.packet records at the start of
 * data[0..len) that end by `room`. */
size_t etch__records_within(const uint8_t *data, size_t len, size_t room);
/* The first record boundary at or after k (k > 0) in data[0..len). */
size_t etch__record_end(const uint8_t *data, size_t len, size_t k);

#endif /* ETCH_BUFFER_SINK_H */

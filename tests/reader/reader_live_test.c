/*
 * reader_live_test.c - a trace file read while it is being recorded: its
 * writer holds the lock buffer/sink.h describes (an open file
 * description's write lock on the whole file), the file grows byte by
 * byte, and every read of it gives what its whole packets hold, says
 * "recording" and no loss; the same bytes without the lock are a trace
 * cut short.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <etch/reader.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pb/pb.h"
#include "reader/tbuild.h"
#include "test.h"

/* A file of the test's own, removed at the end. */
static void temp_path(char *buf, size_t n, const char *what) {
  const char *dir = getenv("TMPDIR");
  snprintf(buf, n, "%s/etch_live_%s_%ld.pftrace", dir && *dir ? dir : "/tmp",
           what, (long)getpid());
}

/* The writer's lock, as etch's writers take it. */
static void hold(int fd) {
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  ASSERT_EQ_INT(fcntl(fd, F_OFD_SETLK, &fl), 0);
}

/* Every event of a read, one line each (the reader test's format). */
static void add_line(const etch_event *ev, void *user) {
  char line[1024];
  tb_format_event(ev, line, sizeof line);
  FILE *f = (FILE *)user;
  fputs(line, f);
  fputc('\n', f);
}

typedef struct read_out {
  int rc;
  etch_reader_stats st;
  char *events;
} read_out;

static void read_file(const char *path, int allow, read_out *o) {
  size_t n = 0;
  o->events = NULL;
  FILE *f = open_memstream(&o->events, &n);
  ASSERT_TRUE(f != NULL);
  etch_reader *r;
  ASSERT_OK(etch_reader_open_file(&r, path));
  ASSERT_OK(etch_reader_set_allow_truncated(r, allow));
  ASSERT_OK(etch_reader_set_order(r, ETCH_ORDER_FILE));
  etch_reader_on(r, NULL, NULL, add_line, f);
  o->rc = etch_reader_run(r);
  etch_reader_get_stats(r, &o->st);
  etch_reader_close(r);
  fclose(f);
}

/* The events of data[0..len), read from memory. */
static char *events_of(const uint8_t *data, size_t len) {
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  ASSERT_TRUE(f != NULL);
  etch_reader *r;
  ASSERT_OK(etch_reader_open_memory(&r, data, len));
  ASSERT_OK(etch_reader_set_order(r, ETCH_ORDER_FILE));
  etch_reader_on(r, NULL, NULL, add_line, f);
  ASSERT_OK(etch_reader_run(r));
  etch_reader_close(r);
  fclose(f);
  return s;
}

/* The ends of the top-level records of data[0..len). */
static size_t record_ends(const uint8_t *data, size_t len, size_t *ends,
                          size_t cap) {
  size_t nb = 0, off = 0;
  while (off < len && nb < cap) {
    const uint8_t *p = data + off + 1, *end = data + len;
    uint64_t plen;
    ASSERT_TRUE(etch__pb_read_varint(&p, end, &plen));
    off = (size_t)(p - data) + (size_t)plen;
    ends[nb++] = off;
  }
  return nb;
}

/* Sample `which` appended to a locked file one byte at a time: at each
 * length, a read gives the events of the whole packets so far, `bytes`
 * where the last of them ends, "recording", no loss, even when a cut
 * short trace would be refused (allow_truncated off). Then the lock goes
 * (the writer closes the file): the same file is cut short. */
static void grow_and_read(int which) {
  tb t;
  tb_init(&t);
  tb_sample(&t, which);
  size_t ends[4096];
  size_t nb = record_ends(t.data, t.len, ends, 4096);
  ASSERT_TRUE(nb < 4096);
  char path[512];
  temp_path(path, sizeof path, tb_sample_name(which));
  int w = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(w >= 0);
  hold(w);
  char *prev = NULL;
  size_t prev_last = (size_t)-1;
  for (size_t len = 0; len <= t.len; len++) {
    if (len) ASSERT_EQ_INT((int)write(w, t.data + len - 1, 1), 1);
    size_t last = 0;
    for (size_t i = 0; i < nb && ends[i] <= len; i++) last = ends[i];
    if (last != prev_last) {
      free(prev);
      prev = events_of(t.data, last);
      prev_last = last;
    }
    read_out o;
    read_file(path, len % 2, &o);
    ASSERT_OK(o.rc);
    ASSERT_EQ_U64(o.st.recording, 1);
    ASSERT_EQ_U64(o.st.truncated_bytes, 0);
    ASSERT_EQ_U64(o.st.truncated_offset, 0);
    ASSERT_EQ_U64(o.st.bytes, last);
    ASSERT_EQ_STR(o.events, prev);
    free(o.events);
  }
  free(prev);
  /* Cut inside its last packet, then the writer gone: cut short. */
  ASSERT_EQ_INT(ftruncate(w, (off_t)t.len - 1), 0);
  close(w);
  read_out o;
  read_file(path, 1, &o);
  ASSERT_OK(o.rc);
  ASSERT_EQ_U64(o.st.recording, 0);
  ASSERT_EQ_U64(o.st.truncated_offset, ends[nb - 2]);
  ASSERT_EQ_U64(o.st.truncated_bytes, t.len - 1 - ends[nb - 2]);
  free(o.events);
  read_file(path, 0, &o);
  ASSERT_EQ_INT(o.rc, ETCH_ETRUNC);
  free(o.events);
  unlink(path);
  tb_free(&t);
}

TEST(reader_live_grows_packet_by_packet) {
  for (int s = 0; s < tb_sample_count(); s++) grow_and_read(s);
}

/* A read lock, or a lock on another file, is no writer's: a whole file
 * read with one is complete, not recording. */
TEST(reader_live_only_the_writers_lock_counts) {
  tb t;
  tb_init(&t);
  tb_sample(&t, 0);
  char path[512];
  temp_path(path, sizeof path, "rdlock");
  int w = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(w >= 0);
  ASSERT_EQ_INT((int)write(w, t.data, t.len), (int)t.len);
  struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
  ASSERT_EQ_INT(fcntl(w, F_OFD_SETLK, &fl), 0);
  read_out o;
  read_file(path, 0, &o);
  ASSERT_OK(o.rc);
  ASSERT_EQ_U64(o.st.recording, 0);
  ASSERT_EQ_U64(o.st.bytes, t.len);
  free(o.events);
  close(w);
  unlink(path);
  tb_free(&t);
}

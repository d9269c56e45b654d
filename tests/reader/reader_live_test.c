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
#include "reader/reader_priv.h"
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

/* ---- reading on as the file grows ---------------------------------------------- */

/* A reader kept open on the file and resumed (etch__reader_resume) after
 * every byte appended: what it delivered over all its reads, its stats
 * and its time bounds are those of one read of the file as it is, at
 * every length; then the writer lets go of a file cut inside its last
 * packet, and one more resume says it is cut short, as a cold read does. */
static void stats_equal(const etch_reader_stats *a, const etch_reader_stats *b) {
  ASSERT_EQ_U64(a->bytes, b->bytes);
  ASSERT_EQ_U64(a->packets, b->packets);
  ASSERT_EQ_U64(a->track_events, b->track_events);
  ASSERT_EQ_U64(a->sequences, b->sequences);
  ASSERT_EQ_U64(a->recording, b->recording);
  ASSERT_EQ_U64(a->truncated_offset, b->truncated_offset);
  ASSERT_EQ_U64(a->truncated_bytes, b->truncated_bytes);
  /* ...and every other count. */
  ASSERT_TRUE(memcmp(a, b, sizeof *a) == 0);
}

static void cold(const char *path, char **events, etch_reader_stats *st,
                 int64_t *first, int64_t *last) {
  size_t n = 0;
  *events = NULL;
  FILE *f = open_memstream(events, &n);
  ASSERT_TRUE(f != NULL);
  etch_reader *r;
  ASSERT_OK(etch_reader_open_file(&r, path));
  ASSERT_OK(etch_reader_set_allow_truncated(r, 1));
  ASSERT_OK(etch_reader_set_order(r, ETCH_ORDER_FILE));
  etch_reader_on(r, NULL, NULL, add_line, f);
  ASSERT_OK(etch_reader_run(r));
  etch_reader_get_stats(r, st);
  if (etch_reader_time_bounds(r, first, last) != ETCH_OK) *first = *last = 0;
  etch_reader_close(r);
  fclose(f);
}

static void resume_as_it_grows(int which, size_t step) {
  tb t;
  tb_init(&t);
  tb_sample(&t, which);
  char path[512];
  temp_path(path, sizeof path, "resume");
  int w = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(w >= 0);
  hold(w);
  /* The kept reader writes every event it delivers into `acc`. */
  char *acc = NULL;
  size_t accn = 0;
  FILE *af = open_memstream(&acc, &accn);
  etch_reader *r;
  ASSERT_OK(etch_reader_open_file(&r, path));
  ASSERT_OK(etch_reader_set_allow_truncated(r, 1));
  ASSERT_OK(etch_reader_set_order(r, ETCH_ORDER_FILE));
  etch_reader_on(r, NULL, NULL, add_line, af);
  ASSERT_OK(etch_reader_run(r));
  for (size_t len = step; len <= t.len + step - 1; len += step) {
    size_t upto = len < t.len ? len : t.len;
    off_t at = lseek(w, 0, SEEK_END);
    ASSERT_EQ_INT((int)write(w, t.data + at, upto - (size_t)at),
                  (int)(upto - (size_t)at));
    bool grew;
    ASSERT_OK(etch__reader_resume(r, &grew));
    ASSERT_TRUE(grew);
    fflush(af);
    char *want;
    etch_reader_stats ws, got;
    int64_t wf, wl, gf = 0, gl = 0;
    cold(path, &want, &ws, &wf, &wl);
    ASSERT_EQ_STR(acc ? acc : "", want ? want : "");
    etch_reader_get_stats(r, &got);
    stats_equal(&got, &ws);
    if (etch_reader_time_bounds(r, &gf, &gl) != ETCH_OK) gf = gl = 0;
    ASSERT_EQ_U64((uint64_t)gf, (uint64_t)wf);
    ASSERT_EQ_U64((uint64_t)gl, (uint64_t)wl);
    free(want);
    /* Nothing new: nothing read. */
    ASSERT_OK(etch__reader_resume(r, &grew));
    ASSERT_FALSE(grew);
  }
  /* The writer cuts its last packet and lets go: cut short. */
  ASSERT_EQ_INT(ftruncate(w, (off_t)t.len - 1), 0);
  etch_reader_stats got;
  ASSERT_EQ_INT(etch__reader_resume(r, NULL), ETCH_ESTATE); /* it shrank */
  etch_reader_close(r);
  fclose(af);
  free(acc);
  /* Opened again with its last packet cut, the writer gone. */
  acc = NULL;
  af = open_memstream(&acc, &accn);
  ASSERT_OK(etch_reader_open_file(&r, path));
  ASSERT_OK(etch_reader_set_allow_truncated(r, 1));
  ASSERT_OK(etch_reader_set_order(r, ETCH_ORDER_FILE));
  etch_reader_on(r, NULL, NULL, add_line, af);
  ASSERT_OK(etch_reader_run(r));
  etch_reader_get_stats(r, &got);
  ASSERT_EQ_U64(got.recording, 1);
  close(w);
  bool grew;
  ASSERT_OK(etch__reader_resume(r, &grew));
  ASSERT_TRUE(grew); /* the lock went */
  etch_reader_get_stats(r, &got);
  ASSERT_EQ_U64(got.recording, 0);
  ASSERT_TRUE(got.truncated_bytes > 0);
  fflush(af);
  char *want;
  etch_reader_stats ws;
  int64_t wf, wl;
  cold(path, &want, &ws, &wf, &wl);
  ASSERT_EQ_STR(acc ? acc : "", want ? want : "");
  stats_equal(&got, &ws);
  free(want);
  etch_reader_close(r);
  fclose(af);
  free(acc);
  unlink(path);
  tb_free(&t);
}

TEST(reader_live_resumes_byte_by_byte) {
  for (int s = 0; s < tb_sample_count(); s++) resume_as_it_grows(s, 1);
}

TEST(reader_live_resumes_in_uneven_steps) {
  for (int s = 0; s < tb_sample_count(); s++) {
    resume_as_it_grows(s, 7);
    resume_as_it_grows(s, 61);
  }
}

/*
 * writer_fault_test.c - libetch's writer off its fast path under
 * allocation failure: a session made, started, written to from a thread
 * (the writer's first chunk, interned names and dynamic names, args, a
 * counter, a named track, custom events with an important one replayed)
 * and stopped, writing its output file. Each run either writes the trace
 * it should (read back through the reader and compared) or fails with
 * ETCH_ENOMEM; nothing leaks. The trace's custom events are then the
 * reader's to read under the same sweep.
 *
 * The same from a fresh process for each N, so that what libetch does
 * once per process (the track, the channel rule, the important-event
 * cache, each custom event's site, the writer's tables) fails too.
 *
 * And the fast path allocates nothing: events written once their names
 * are interned and their chunk taken make no allocation at all.
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <pthread.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "fault_read.h"
#include "test.h"

ETCH_CATEGORY_DEFINE(fault_cat, "fault", "allocation failure tests", "");

#define ITEM_FIELDS(F) \
  F(uint32, id)        \
  F(str, text)         \
  F(int32_array, ints)
ETCH_EVENT_DECLARE(Fault, Item, ITEM_FIELDS);
ETCH_EVENT_DEFINE(Fault, Item, ITEM_FIELDS, ETCH_EVENT_SERIAL);
#define SETTING_FIELDS(F) \
  F(str, key)             \
  F(int64, value)
ETCH_EVENT_DECLARE(Fault, Setting, SETTING_FIELDS);
ETCH_EVENT_DEFINE(Fault, Setting, SETTING_FIELDS, ETCH_EVENT_IMPORTANT);
ETCH_CHANNEL_DEFINE(FaultChannel, "Fault");

static const etch_track *lane;

static void *worker(void *arg) {
  (void)arg;
  static const int32_t ints[] = {-1, 0, 1 << 30};
  for (int i = 0; i < 3; i++) {
    ETCH_SLICE_BEGIN(fault_cat, "work", ETCH_ARG_INT("i", i),
                     ETCH_ARG_STRING("what", "a string arg"));
    char name[32];
    snprintf(name, sizeof name, "dynamic-%d", i);
    ETCH_INSTANT(fault_cat, "mark", ETCH_NAME(name),
                 ETCH_ARG_DOUBLE("x", 0.5 * i));
    ETCH_INSTANT(fault_cat, "on a lane", ETCH_TRACK(lane), ETCH_FLOW(7));
    ETCH_COUNTER(fault_cat, "depth", i);
    ETCH_LOG(Fault, Item, FaultChannel, ETCH_SET(id, (uint32_t)i),
             ETCH_SET(text, "item"), ETCH_SET_ARRAY(ints, ints, 3));
    ETCH_SLICE_END(fault_cat);
  }
  return NULL;
}

typedef struct wr_case {
  char path[600];
  char config[800];
  char *want; /* the trace's reading */
} wr_case;

/* The next line of `kind` ("ev ", "custom ") from *p, without a trailing
 * " after_loss", into buf; false at the end. */
static bool next_line(const char **p, const char *kind, char *buf,
                      size_t cap) {
  while (**p) {
    const char *e = strchr(*p, '\n');
    size_t n = e ? (size_t)(e - *p) : strlen(*p);
    const char *l = *p;
    *p += n + (e ? 1 : 0);
    if (strncmp(l, kind, strlen(kind))) continue;
    if (n >= cap) n = cap - 1;
    memcpy(buf, l, n);
    buf[n] = 0;
    char *al = strstr(buf, " after_loss");
    if (al && !al[11]) *al = 0;
    return true;
  }
  return false;
}

/* Whether `got` is `want` with events lost and counted: the events it
 * has (but etch's drop reports) are `want`'s in order, and at most as
 * many are missing as its etch.dropped_events instants count, plus
 * `dropped` (important events the process could not keep, which the
 * session's stats count). An event a writer could not write for want of
 * memory is dropped this way. */
static bool lost_and_counted(const char *want, const char *got,
                             long dropped) {
  for (const char *p = strstr(got, "name=etch.dropped_events"); p;
       p = strstr(p + 1, "name=etch.dropped_events")) {
    const char *k = strstr(p, "debug.count=i:");
    if (k) dropped += strtol(k + 14, NULL, 10);
  }
  if (!dropped) return false;
  static const char *const kinds[] = {"ev ", "custom "};
  for (int k = 0; k < 2; k++) {
    const char *w = want, *g = got;
    char wl[1024], gl[1024];
    long missing = 0;
    while (next_line(&g, kinds[k], gl, sizeof gl)) {
      if (strstr(gl, "name=etch.dropped_events")) continue;
      for (;;) {
        if (!next_line(&w, kinds[k], wl, sizeof wl)) return false;
        if (!strcmp(wl, gl)) break;
        missing++;
      }
    }
    while (next_line(&w, kinds[k], wl, sizeof wl)) missing++;
    if (missing > dropped) return false;
  }
  return true;
}

static int record_op(void *ctx) {
  wr_case *c = (wr_case *)ctx;
  unlink(c->path);
  etch_config *cfg;
  int rc = etch_config_new(&cfg);
  if (rc) return rc;
  rc = etch_config_parse(cfg, c->config);
  etch_session *s = NULL;
  if (!rc) rc = etch_session_new(cfg, &s);
  etch_config_free(cfg);
  if (rc) return rc;
  rc = etch_session_start(s);
  if (!rc) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL)) FAIL("pthread_create");
    pthread_join(t, NULL);
    rc = etch_session_stop(s);
  }
  etch_session_stats st;
  memset(&st, 0, sizeof st);
  etch__fault_hold(true);
  if (!rc) rc = etch_session_get_stats(s, &st);
  etch__fault_hold(false);
  uint64_t imp_dropped = st.important_dropped;
  etch_session_free(s);
  if (rc) return rc;
  /* The trace, read with no fault. */
  etch__fault_hold(true);
  fault_read_ctx rd;
  memset(&rd, 0, sizeof rd);
  rd.path = c->path;
  rd.stable = true;
  int rrc = fault_read(&rd);
  etch__fault_hold(false);
  if (rrc) FAIL("reading the trace: %s", etch_last_error());
  if (c->want && strcmp(rd.out.s, c->want) != 0 &&
      !lost_and_counted(c->want, rd.out.s, (long)imp_dropped))
    FAIL("%s: the trace differs:\n--- want\n%s--- got\n%s", fault_now,
         c->want, rd.out.s);
  fault_str_free(&rd.out);
  return ETCH_OK;
}

static void setup(wr_case *c, const char *extra) {
  memset(c, 0, sizeof *c);
  snprintf(c->path, sizeof c->path, "%s/w.pftrace", etch_test_tmpdir());
  snprintf(c->config, sizeof c->config,
           "categories=fault,Fault;buffer_kb=256;output=%s%s", c->path,
           extra);
  lane = etch_track_new("lane", 1, NULL);
  ASSERT_TRUE(lane != NULL);
  /* Kept by the process and replayed into every session. */
  etch_channel_set("Fault", true);
  ETCH_LOG(Fault, Setting, FaultChannel, ETCH_SET(key, "quality"),
           ETCH_SET(value, 3));
  ASSERT_OK(record_op(c));
  fault_read_ctx rd;
  memset(&rd, 0, sizeof rd);
  rd.path = c->path;
  rd.stable = true;
  ASSERT_OK(fault_read(&rd));
  c->want = rd.out.s;
}

TEST(fault_writer_session_to_a_file) {
  static const char *const extras[] = {";compression=deflate",
                                       ";compression=none;fill=discard"};
  for (size_t i = 0; i < 2; i++) {
    wr_case c;
    setup(&c, extras[i]);
    if (!strstr(c.want, "custom Fault.Item") ||
        !strstr(c.want, "custom Fault.Setting") ||
        !strstr(c.want, "name=dynamic-2"))
      FAIL("the trace lacks events:\n%s", c.want);
    fault_result r = fault_sweep(c.config, record_op, &c);
    printf("  %s: %llu allocations, %llu runs failed of %llu\n", extras[i],
           (unsigned long long)r.allocs, (unsigned long long)r.failed,
           (unsigned long long)r.runs);
    free(c.want);
  }
}

/* The trace's custom events, read with the reader failing. */
typedef struct rd_case {
  fault_read_ctx rd;
  char *want;
} rd_case;

static int read_op(void *ctx) {
  rd_case *c = (rd_case *)ctx;
  int rc = fault_read(&c->rd);
  if (rc == ETCH_OK && strcmp(c->rd.out.s, c->want) != 0)
    FAIL("%s: the reading differs:\n--- want\n%s--- got\n%s", fault_now,
         c->want, c->rd.out.s);
  fault_str_free(&c->rd.out);
  return rc;
}

TEST(fault_reader_custom_events) {
  wr_case w;
  setup(&w, ";compression=deflate");
  free(w.want);
  rd_case c;
  memset(&c, 0, sizeof c);
  c.rd.path = w.path;
  c.rd.order = ETCH_ORDER_TIMESTAMP;
  ASSERT_OK(fault_read(&c.rd));
  c.want = strdup(c.rd.out.s);
  fault_result r = fault_sweep("reading custom events", read_op, &c);
  printf("  %llu allocations, %llu runs failed of %llu\n",
         (unsigned long long)r.allocs, (unsigned long long)r.failed,
         (unsigned long long)r.runs);
  free(c.want);
  fault_str_free(&c.rd.out);
}

/* Events on names already interned, into a chunk already taken: no
 * allocation at all. */
TEST(fault_the_fast_path_allocates_nothing) {
  etch_config *cfg;
  ASSERT_OK(etch_config_new(&cfg));
  ASSERT_OK(etch_config_parse(cfg, "categories=fault,Fault;buffer_kb=4096"));
  etch_session *s;
  ASSERT_OK(etch_session_new(cfg, &s));
  etch_config_free(cfg);
  ASSERT_OK(etch_session_start(s));
  lane = etch_track_new("lane", 1, NULL);
  etch_channel_set("Fault", true);
  worker(NULL); /* interns, takes a chunk */
  etch__fault_arm(0, false);
  for (int i = 0; i < 20; i++) worker(NULL);
  uint64_t n = etch__fault_count();
  etch__fault_disarm();
  ASSERT_EQ_U64(n, 0);
  ASSERT_OK(etch_session_stop(s));
  etch_session_free(s);
}

/* ---- first uses, each in a fresh process --------------------------------- */

/* What a program does first: a track, a channel switched on, an
 * important event logged, then a session recorded. */
static int first_use(wr_case *c) {
  lane = etch_track_new("lane", 1, NULL);
  if (!lane) return ETCH_ENOMEM; /* its message checked by the caller */
  int rc = etch_channel_set("Fault", true); /* channels matched, or < 0 */
  if (rc < 0) return rc;
  ETCH_LOG(Fault, Setting, FaultChannel, ETCH_SET(key, "quality"),
           ETCH_SET(value, 3));
  return record_op(c);
}

/* In a child: first_use with allocation n failing (0: none, counted);
 * its count, or 'F' for ETCH_ENOMEM, 'S' for success, on fd. */
static void fresh_child(wr_case *c, uint64_t n, bool persistent, int fd) {
  snprintf(fault_now, sizeof fault_now,
           "first use, allocation %llu%s failing", (unsigned long long)n,
           persistent ? " and on" : "");
  etch__fault_arm(n, persistent);
  int rc = first_use(c);
  uint64_t count = etch__fault_count();
  etch__fault_disarm();
  char msg[64];
  if (!n) {
    if (rc) FAIL("first use without a fault: %s", etch_last_error());
    snprintf(msg, sizeof msg, "%llu", (unsigned long long)count);
  } else {
    if (rc) fault_check_enomem(fault_now, rc);
    snprintf(msg, sizeof msg, "%c", rc ? 'F' : 'S');
  }
  fault_leak_check();
  if (write(fd, msg, strlen(msg)) < 0) FAIL("write: pipe");
  _exit(0);
}

static char fresh_run(wr_case *c, uint64_t n, bool persistent,
                      char *out, size_t cap) {
  int p[2];
  ASSERT_TRUE(pipe(p) == 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    close(p[0]);
    fresh_child(c, n, persistent, p[1]);
  }
  close(p[1]);
  ssize_t k = read(p[0], out, cap - 1);
  close(p[0]);
  int status;
  ASSERT_TRUE(waitpid(pid, &status, 0) == pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status))
    FAIL("first use, allocation %llu%s failing: the child %s %d",
         (unsigned long long)n, persistent ? " and on" : "",
         WIFEXITED(status) ? "exited" : "was killed by signal",
         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  out[k > 0 ? k : 0] = 0;
  return out[0];
}

TEST(fault_writer_first_use_in_fresh_processes) {
  wr_case c;
  memset(&c, 0, sizeof c);
  snprintf(c.path, sizeof c.path, "%s/w.pftrace", etch_test_tmpdir());
  snprintf(c.config, sizeof c.config,
           "categories=fault,Fault;buffer_kb=256;output=%s", c.path);
  /* The trace a fresh process writes, read here. */
  char out[64];
  fresh_run(&c, 0, false, out, sizeof out);
  uint64_t count = strtoull(out, NULL, 10);
  fault_read_ctx rd;
  memset(&rd, 0, sizeof rd);
  rd.path = c.path;
  rd.stable = true;
  ASSERT_OK(fault_read(&rd));
  c.want = rd.out.s;
  if (!strstr(c.want, "custom Fault.Setting"))
    FAIL("the trace lacks events:\n%s", c.want);
  uint64_t failed = 0, runs = 0;
  for (int persistent = 0; persistent < 2; persistent++)
    for (uint64_t n = 1; n <= count; n++, runs++)
      failed += fresh_run(&c, n, persistent, out, sizeof out) == 'F';
  printf("  %llu allocations, %llu runs failed of %llu\n",
         (unsigned long long)count, (unsigned long long)failed,
         (unsigned long long)runs);
  free(c.want);
}

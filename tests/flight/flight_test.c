/*
 * flight_test.c - the flight recorder: a program killed at random moments
 * (SIGKILL, a SIGSEGV in a thread, abort(), SIGSTOP then SIGKILL), its
 * flight file recovered, and the events in the trace checked against what
 * the program said it had recorded. Also: a normal end removes the file,
 * flight_keep keeps it, and files that are not flight files, truncated
 * ones and ones of another version get a clear error.
 *
 * The bound: each thread's ticks in the trace are k = a, a + 1, ..., K - 1
 * with no gap (a = 0 when the ring did not wrap), and K is at least the
 * count the thread had published minus one (the event being written when
 * it died) and at most one more than it (an event whose macro returned
 * before its count was stored).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buffer/flight.h"
#include "etch/common.h"
#include "sdk/tdecode.h"
#include "test.h"

enum { MAX_THREADS = 8 };

typedef struct victim {
  pid_t pid;
  volatile uint64_t *counts;
  char counts_path[600], flight[600], out[600];
} victim;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(uint64_t n) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng % n;
}

static void sleep_us(long us) {
  struct timespec d = {0, us * 1000};
  nanosleep(&d, NULL);
}

/* The ring: 2 MiB that wraps many times, or 16 MiB with every thread
 * capped at CAP events (at most 4 x 40 000 ticks of about 25 bytes). */
enum { CAP = 40000 };

static void start(victim *v, int run, int threads, bool wrap,
                  const char *mode, uint64_t limit) {
  const char *dir = etch_test_tmpdir();
  snprintf(v->counts_path, sizeof v->counts_path, "%s/counts%d", dir, run);
  snprintf(v->flight, sizeof v->flight, "%s/v%d.flight", dir, run);
  snprintf(v->out, sizeof v->out, "%s/v%d.pftrace", dir, run);
  int fd = open(v->counts_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_TRUE(fd >= 0);
  ASSERT_EQ_INT(ftruncate(fd, 4096), 0);
  v->counts = (volatile uint64_t *)mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                                        MAP_SHARED, fd, 0);
  ASSERT_TRUE(v->counts != MAP_FAILED);
  close(fd);
  char nthreads[16], lim[32], cap[32];
  snprintf(nthreads, sizeof nthreads, "%d", threads);
  snprintf(lim, sizeof lim, "%llu", (unsigned long long)limit);
  snprintf(cap, sizeof cap, "%d", wrap ? 0 : CAP);
  v->pid = fork();
  ASSERT_TRUE(v->pid >= 0);
  if (v->pid == 0) {
    setenv("ETCH_OUT", v->out, 1);
    setenv("ETCH_FLIGHT", v->flight, 1);
    setenv("ETCH_BUFFER_KB", wrap ? "2048" : "16384", 1);
    /* Under a sanitizer the crash is etch's to see, not the sanitizer's
     * (which would report it and exit instead). */
    const char *san[] = {"ASAN_OPTIONS", "TSAN_OPTIONS"};
    for (int i = 0; i < 2; i++) {
      char opts[1024];
      const char *was = getenv(san[i]);
      snprintf(opts, sizeof opts, "%s%shandle_segv=0:handle_abort=0",
               was ? was : "", was && *was ? ":" : "");
      setenv(san[i], opts, 1);
    }
    setenv("ETCH_COMPRESSION", "none", 1);
    setenv("ETCH_CRASH_WAIT_MS", "0", 1);
    unsetenv("ETCH_CONFIG");
    execl(ETCH_FLIGHT_VICTIM, ETCH_FLIGHT_VICTIM, v->counts_path, nthreads,
          mode, lim, cap, (char *)NULL);
    _exit(127);
  }
}

/* Waits until every one of `threads` threads recorded something and they
 * recorded `total` events in all, or the victim died. */
static bool wait_counts(victim *v, int threads, uint64_t total) {
  for (long i = 0; i < 60L * 1000 * 5; i++) { /* 60 s at most */
    uint64_t sum = 0, least = UINT64_MAX;
    for (int t = 0; t < threads; t++) {
      uint64_t c = __atomic_load_n(&v->counts[t], __ATOMIC_ACQUIRE);
      sum += c;
      if (c < least) least = c;
    }
    if (least > 0 && sum >= total) return true;
    if (waitpid(v->pid, NULL, WNOHANG) == v->pid) {
      v->pid = 0;
      return false;
    }
    sleep_us(200);
  }
  FAIL("the victim did not record %llu events in 60 s",
       (unsigned long long)total);
  return false;
}

static int reap(victim *v) {
  int st = 0;
  if (v->pid > 0) ASSERT_EQ_INT((int)waitpid(v->pid, &st, 0), (int)v->pid);
  v->pid = 0;
  return st;
}

/* The trace the victim left: its flight file recovered when it is there
 * (`needs_flight`: it must be), else the trace its crash handler wrote. */
static void recovered(victim *v, bool needs_flight, td_trace *tr,
                      etch_flight_report *rep) {
  struct stat st;
  memset(rep, 0, sizeof *rep);
  if (stat(v->flight, &st) != 0) {
    ASSERT_FALSE(needs_flight);
    ASSERT_EQ_INT(td_decode_file(v->out, tr), 0);
    return;
  }
  size_t len;
  uint8_t *file = etch_test_read_file(v->flight, &len);
  ASSERT_TRUE(file != NULL);
  uint8_t *data;
  size_t dlen;
  ASSERT_OK(etch__flight_recover(file, len, false, -1, &data, &dlen, rep));
  free(file);
  if (td_decode(data, dlen, tr) != 0) FAIL("recovered trace: %s", tr->error);
  free(data);
  unlink(v->flight);
}

/* Each thread's ticks against what it published (see the top). */
static void check(const td_trace *tr, const victim *v, int threads, bool wrap,
                  const uint64_t *published, const etch_flight_report *rep) {
  int64_t first[MAX_THREADS], next[MAX_THREADS];
  for (int t = 0; t < threads; t++) first[t] = next[t] = -1;
  for (size_t i = 0; i < tr->nev; i++) {
    const td_event *e = &tr->ev[i];
    if (e->type != 3 || !e->name || strcmp(e->name, "tick")) continue;
    const td_arg *k = td_arg_of(e, "k"), *t = td_arg_of(e, "t");
    ASSERT_TRUE(k && t && t->i >= 0 && t->i < threads);
    int j = (int)t->i;
    if (next[j] < 0) {
      first[j] = k->i;
    } else if (k->i != next[j]) {
      FAIL("thread %d: tick %lld after tick %lld", j, (long long)k->i,
           (long long)next[j] - 1);
    }
    next[j] = k->i + 1;
  }
  for (int t = 0; t < threads; t++) {
    uint64_t p = published[t];
    if (next[t] < 0 && p <= 1) continue; /* it had barely begun */
    if (!wrap) {
      if (next[t] < 0) FAIL("thread %d: no ticks (it published %llu)", t,
                            (unsigned long long)p);
      ASSERT_EQ_INT((int)first[t], 0);
    }
    if (next[t] >= 0 && (uint64_t)next[t] > p + 1)
      FAIL("thread %d: ticks up to %lld in the trace, %llu published", t,
           (long long)next[t] - 1, (unsigned long long)p);
    if (next[t] >= 0 && (uint64_t)next[t] + 1 >= p) continue;
    /* Short of the bound: only a ring that wrapped may be, and only with no
     * tick of the thread left at all: the ring overwrote all but what the
     * thread was writing, which held none of its ticks yet, or whose names
     * and descriptors went with the overwritten chunks (then none of its
     * older chunks decodes either). Ticks that stop early are never
     * right. The report must say so. */
    if (!wrap || !rep->nthreads || next[t] >= 0)
      FAIL("thread %d: ticks %lld..%lld in the trace, %llu published", t,
           (long long)first[t], (long long)next[t] - 1, (unsigned long long)p);
    char name[16];
    snprintf(name, sizeof name, "victim-%d", t);
    const etch_flight_thread *ft = NULL;
    for (size_t i = 0; i < rep->nthreads; i++)
      if (!strcmp(rep->threads[i].name, name)) ft = &rep->threads[i];
    if (!ft || (ft->first_chunk && (ft->events <= 1 || ft->undecodable)))
      continue;
    FAIL("thread %d: no ticks in the trace, %llu published, and the report "
         "does not say why (%llu chunks, first %u, %llu events, %llu "
         "undecodable, %s)",
         t, (unsigned long long)p, (unsigned long long)ft->chunks,
         ft->first_chunk, (unsigned long long)ft->events,
         (unsigned long long)ft->undecodable, ft->open ? "open" : "complete");
  }
  (void)v;
  if (rep->nthreads) {
    /* The report speaks of the threads that wrote: none lost a chunk in
     * the middle, and a ring that did not wrap lost none at the start. */
    for (size_t i = 0; i < rep->nthreads; i++) {
      ASSERT_EQ_U64(rep->threads[i].missing_chunks, 0);
      if (!wrap) ASSERT_EQ_INT((int)rep->threads[i].first_chunk, 0);
    }
    ASSERT_EQ_U64(rep->bad_chunks, 0);
    ASSERT_EQ_INT(rep->header.pid > 0, 1);
  }
}

static void release(victim *v) {
  munmap((void *)v->counts, 4096);
  unlink(v->counts_path);
  unlink(v->out);
}

/* 50 runs killed with SIGKILL once the threads recorded a random number
 * of events: 1 to 4 threads, a 16 MiB ring that does not wrap and a
 * 256 KiB one that wraps many times. */
TEST(flight_sigkill_at_random_moments) {
  for (int run = 0; run < 50; run++) {
    int threads = 1 + run % 4;
    bool wrap = (run / 4) % 2;
    uint64_t total = wrap ? 100000 + rnd(200000)
                          : 500 + rnd((uint64_t)threads * CAP - 500);
    victim v;
    start(&v, run, threads, wrap, "run", 0);
    ASSERT_TRUE(wait_counts(&v, threads, total));
    kill(v.pid, SIGKILL);
    int st = reap(&v);
    ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    uint64_t published[MAX_THREADS];
    for (int t = 0; t < threads; t++) published[t] = v.counts[t];
    td_trace tr;
    etch_flight_report rep;
    recovered(&v, true, &tr, &rep);
    check(&tr, &v, threads, wrap, published, &rep);
    if (!wrap) ASSERT_EQ_U64(rep.nthreads, (uint64_t)threads);
    ASSERT_EQ_INT(rep.header.state, ETCH_FLIGHT_RECORDING);
    etch__flight_report_free(&rep);
    td_free(&tr);
    release(&v);
  }
}

/* Stopped (SIGSTOP: the counts hold still), then killed: the bound with
 * the exact counts of the moment. */
TEST(flight_sigstop_then_sigkill) {
  for (int run = 0; run < 6; run++) {
    int threads = 1 + run % 3;
    bool wrap = run % 2;
    victim v;
    start(&v, 100 + run, threads, wrap, "run", 0);
    /* Below what the capped threads can reach: they must get there. */
    ASSERT_TRUE(wait_counts(&v, threads, 1000 + rnd((uint64_t)threads * CAP - 1000)));
    kill(v.pid, SIGSTOP);
    int st;
    ASSERT_EQ_INT((int)waitpid(v.pid, &st, WUNTRACED), (int)v.pid);
    ASSERT_TRUE(WIFSTOPPED(st));
    uint64_t published[MAX_THREADS];
    for (int t = 0; t < threads; t++) published[t] = v.counts[t];
    kill(v.pid, SIGKILL);
    st = reap(&v);
    ASSERT_TRUE(WIFSIGNALED(st));
    td_trace tr;
    etch_flight_report rep;
    recovered(&v, true, &tr, &rep);
    check(&tr, &v, threads, wrap, published, &rep);
    etch__flight_report_free(&rep);
    td_free(&tr);
    release(&v);
  }
}

/* A thread that writes through a bad pointer, and a main thread that
 * abort()s: the process dies of the signal at once (with a flight file
 * libetch writes no trace from a crashing process) and what it published
 * is in the flight file. */
TEST(flight_sigsegv_and_abort) {
  for (int run = 0; run < 8; run++) {
    bool segv = run % 2 == 0;
    int threads = 2 + run % 3;
    bool wrap = (run / 2) % 2;
    victim v;
    uint64_t limit = 2000 + rnd(CAP - 2000);
    start(&v, 200 + run, threads, wrap, segv ? "segv" : "abort", limit);
    int st = reap(&v);
    ASSERT_TRUE(WIFSIGNALED(st));
    ASSERT_EQ_INT(WTERMSIG(st), segv ? SIGSEGV : SIGABRT);
    uint64_t published[MAX_THREADS];
    for (int t = 0; t < threads; t++) published[t] = v.counts[t];
    ASSERT_TRUE(published[segv ? threads - 1 : 0] >= limit);
    td_trace tr;
    etch_flight_report rep;
    recovered(&v, true, &tr, &rep);
    check(&tr, &v, threads, wrap, published, &rep);
    etch__flight_report_free(&rep);
    td_free(&tr);
    release(&v);
  }
}

/* A run that ends normally writes its trace and removes its flight file;
 * with ETCH_FLIGHT_KEEP=1 the file stays, says CLOSED, and recovers the
 * same ticks as the trace. */
TEST(flight_file_goes_after_a_normal_end_unless_kept) {
  const char *dir = etch_test_tmpdir();
  for (int keep = 0; keep < 2; keep++) {
    char flight[600], out[600], counts[600];
    snprintf(flight, sizeof flight, "%s/n%d.flight", dir, keep);
    snprintf(out, sizeof out, "%s/n%d.pftrace", dir, keep);
    snprintf(counts, sizeof counts, "%s/ncounts", dir);
    int cfd = open(counts, O_RDWR | O_CREAT | O_TRUNC, 0600);
    ASSERT_TRUE(cfd >= 0 && ftruncate(cfd, 4096) == 0);
    close(cfd);
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
      setenv("ETCH_OUT", out, 1);
      setenv("ETCH_FLIGHT", flight, 1);
      if (keep) setenv("ETCH_FLIGHT_KEEP", "1", 1);
      execl(ETCH_FLIGHT_VICTIM, ETCH_FLIGHT_VICTIM, counts, "1", "count",
            "300", (char *)NULL);
      _exit(127);
    }
    int st;
    ASSERT_EQ_INT((int)waitpid(pid, &st, 0), (int)pid);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    td_trace tr;
    ASSERT_EQ_INT(td_decode_file(out, &tr), 0);
    ASSERT_EQ_U64(td_count(&tr, 3, "tick"), 300);
    struct stat sb;
    if (!keep) {
      ASSERT_TRUE(stat(flight, &sb) != 0 && errno == ENOENT);
    } else {
      size_t len;
      uint8_t *file = etch_test_read_file(flight, &len);
      ASSERT_TRUE(file != NULL);
      etch_flight_report rep;
      uint8_t *data;
      size_t dlen;
      ASSERT_OK(etch__flight_recover(file, len, true, -1, &data, &dlen, &rep));
      ASSERT_EQ_INT(rep.header.state, ETCH_FLIGHT_CLOSED);
      ASSERT_EQ_U64(rep.nthreads, 1);
      ASSERT_TRUE(rep.threads[0].tid > 0);
      ASSERT_EQ_STR(rep.threads[0].name, "victim-0");
      td_trace rt;
      ASSERT_EQ_INT(td_decode(data, dlen, &rt), 0);
      ASSERT_EQ_U64(td_count(&rt, 3, "tick"), 300);
      ASSERT_EQ_U64(td_count(&rt, 2, NULL), td_count(&tr, 2, NULL));
      td_free(&rt);
      free(data);
      free(file);
      etch__flight_report_free(&rep);
    }
    td_free(&tr);
  }
}

/* What is not a flight file gets a clear error and no trace. */
TEST(flight_files_that_are_not) {
  uint8_t junk[8192];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 31 + 7);
  uint8_t *data = (uint8_t *)"x";
  size_t dlen = 1;
  ASSERT_EQ_INT(etch__flight_recover(junk, sizeof junk, false, -1, &data,
                                     &dlen, NULL),
                ETCH_EFORMAT);
  ASSERT_TRUE(data == NULL && dlen == 0);
  ASSERT_EQ_STR(etch_last_error(), "not an etch flight file (no flight header)");

  /* A real one, to damage: kept after a normal end. */
  const char *dir = etch_test_tmpdir();
  char flight[600], out[600], counts[600];
  snprintf(flight, sizeof flight, "%s/d.flight", dir);
  snprintf(out, sizeof out, "%s/d.pftrace", dir);
  snprintf(counts, sizeof counts, "%s/dcounts", dir);
  int cfd = open(counts, O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_TRUE(cfd >= 0 && ftruncate(cfd, 4096) == 0);
  close(cfd);
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    setenv("ETCH_OUT", out, 1);
    setenv("ETCH_FLIGHT", flight, 1);
    setenv("ETCH_FLIGHT_KEEP", "1", 1);
    setenv("ETCH_BUFFER_KB", "64", 1);
    execl(ETCH_FLIGHT_VICTIM, ETCH_FLIGHT_VICTIM, counts, "1", "count", "100",
          (char *)NULL);
    _exit(127);
  }
  int st;
  ASSERT_EQ_INT((int)waitpid(pid, &st, 0), (int)pid);
  size_t len;
  uint8_t *file = etch_test_read_file(flight, &len);
  ASSERT_TRUE(file != NULL);
  ASSERT_EQ_U64(len, ETCH_FLIGHT_HEADER_SIZE + 16 * 4096);

  ASSERT_EQ_INT(etch__flight_recover(file, len - 1, false, -1, &data, &dlen,
                                     NULL),
                ETCH_EFORMAT);
  char want[256];
  snprintf(want, sizeof want,
           "a truncated flight file: its header says %zu bytes, the file "
           "has %zu",
           len, len - 1);
  ASSERT_EQ_STR(etch_last_error(), want);

  etch_flight_header *h = (etch_flight_header *)file;
  h->version = 7;
  ASSERT_EQ_INT(etch__flight_recover(file, len, false, -1, &data, &dlen, NULL),
                ETCH_EFORMAT);
  snprintf(want, sizeof want,
           "a flight file of format version 7 (written by etch %s); this etch "
           "reads version 1",
           ETCH_VERSION_STRING);
  ASSERT_EQ_STR(etch_last_error(), want);
  h->version = ETCH_FLIGHT_VERSION;

  h->chunk_size = 5000;
  ASSERT_EQ_INT(etch__flight_recover(file, len, false, -1, &data, &dlen, NULL),
                ETCH_EFORMAT);
  ASSERT_EQ_STR(etch_last_error(), "a damaged flight file: its header says 16 "
                                   "chunks of 5000 bytes, fill 0");
  h->chunk_size = 4096;

  /* Chunk headers that lie (states, lengths, ids): a trace all the same,
   * the lies counted, never a crash (fuzz_flight does this at random). */
  etch_chunk *c0 = (etch_chunk *)(file + ETCH_FLIGHT_HEADER_SIZE);
  c0->state = 9;
  etch_chunk *c1 = (etch_chunk *)(file + ETCH_FLIGHT_HEADER_SIZE + 4096);
  c1->used = 0x0fffffff;
  etch_flight_report rep;
  ASSERT_OK(etch__flight_recover(file, len, false, -1, &data, &dlen, &rep));
  ASSERT_EQ_U64(rep.bad_chunks, 1);
  td_trace tr;
  ASSERT_EQ_INT(td_decode(data, dlen, &tr), 0);
  td_free(&tr);
  free(data);
  etch__flight_report_free(&rep);
  free(file);
}

/* ---- the setup ------------------------------------------------------------ */

static int setup_stop_at;
static void stop_here(int step) {
  if (step == setup_stop_at) _exit(0);
}

/* A process that dies at each point of the setup leaves a file that
 * recovery names as a setup that never finished, not as a stranger. */
TEST(flight_setup_cut_at_each_point) {
  const char *dir = etch_test_tmpdir();
  for (int step = ETCH_FLIGHT_STEP_EMPTY; step <= ETCH_FLIGHT_STEP_MAPPED;
       step++) {
    char flight[600];
    snprintf(flight, sizeof flight, "%s/cut%d.flight", dir, step);
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
      setup_stop_at = step;
      etch__flight_setup_hook = stop_here;
      etch_flight f;
      etch_buffer b;
      etch_flight_id id = {.pid = 4242, .process_uuid = 7,
                           .process_name = "cutme"};
      etch__flight_create(&f, flight, 1 << 20, ETCH_BUFFER_RING, &id, &b);
      _exit(3); /* the hook did not stop it */
    }
    int st;
    ASSERT_EQ_INT((int)waitpid(pid, &st, 0), (int)pid);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    size_t len;
    uint8_t *file = etch_test_read_file(flight, &len);
    ASSERT_TRUE(file != NULL);
    ASSERT_EQ_U64(len, step == ETCH_FLIGHT_STEP_EMPTY    ? 0
                       : step == ETCH_FLIGHT_STEP_HEADER ? ETCH_FLIGHT_HEADER_SIZE
                                                         : ETCH_FLIGHT_HEADER_SIZE + (1 << 20));
    uint8_t *data = NULL;
    size_t dlen = 0;
    ASSERT_EQ_INT(etch__flight_recover(file, len, false, -1, &data, &dlen,
                                       NULL),
                  ETCH_EFORMAT);
    ASSERT_TRUE(data == NULL && dlen == 0);
    ASSERT_EQ_STR(etch_last_error(),
                  step == ETCH_FLIGHT_STEP_EMPTY
                      ? "an empty file: a flight file's setup never finished "
                        "(the process ended before recording began); nothing "
                        "to recover"
                      : "the flight file's setup never finished: the process "
                        "(pid 4242, cutme) ended before recording began; "
                        "nothing to recover");
    free(file);
  }
}

/* Pages of the mapping in memory (mincore). */
static size_t resident_pages(const etch_flight *f) {
  size_t pages = (f->map_len + 4095) / 4096;
  unsigned char *vec = (unsigned char *)malloc(pages);
  ASSERT_TRUE(vec != NULL);
  ASSERT_EQ_INT(mincore(f->map, f->map_len, vec), 0);
  size_t n = 0;
  for (size_t i = 0; i < pages; i++) n += vec[i] & 1;
  free(vec);
  return n;
}

/* The setup's cost does not grow with the ring: after it a 1 MiB and a
 * 128 MiB flight file have the same blocks on disk and the same pages in
 * memory (the header's); a chunk's pages come in when a writer takes it. */
TEST(flight_setup_cost_does_not_grow_with_the_size) {
  const char *dir = etch_test_tmpdir();
  etch_flight_id id = {.pid = getpid(), .process_uuid = 1,
                       .process_name = "sizes"};
  const uint64_t sizes[2] = {1u << 20, 128u << 20};
  long long blocks[2];
  for (int i = 0; i < 2; i++) {
    char flight[600];
    snprintf(flight, sizeof flight, "%s/size%d.flight", dir, i);
    etch_flight f;
    etch_buffer b;
    ASSERT_OK(etch__flight_create(&f, flight, sizes[i], ETCH_BUFFER_RING, &id,
                                  &b));
    struct stat st;
    ASSERT_EQ_INT(stat(flight, &st), 0);
    ASSERT_EQ_U64((uint64_t)st.st_size, ETCH_FLIGHT_HEADER_SIZE + sizes[i]);
    blocks[i] = (long long)st.st_blocks;
    ASSERT_EQ_U64(resident_pages(&f), 1);
    /* A chunk taken: its pages, written once each, are in. */
    etch_chunk *c = etch__buffer_acquire(&b, 1, 0, 0);
    ASSERT_TRUE(c != NULL);
    ASSERT_TRUE(resident_pages(&f) >= 1 + b.chunk_size / 4096);
    etch__buffer_destroy(&b);
    etch__flight_close(&f, false);
  }
  ASSERT_EQ_U64((uint64_t)blocks[0], (uint64_t)blocks[1]);
  ASSERT_TRUE(blocks[0] <= 16); /* the header page, 512-byte blocks */
}

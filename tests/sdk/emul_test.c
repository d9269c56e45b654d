/*
 * emul_test.c - libetch's system backend into a service that emulates
 * shared memory, over TCP on the loopback: the service of these tests is a
 * small host written here (not etchd) that listens on 127.0.0.1:0, answers
 * InitializeConnection with use_shmem_emulation (or, for a network
 * connection, with nothing: no descriptor can come either way), starts one
 * track_event instance and collects CommitData. The chunks it collects are
 * put together as Perfetto's service does (a chunk sent again replaces the
 * copy before it when it has at least as many fragments; a chunk sent with
 * chunk_incomplete has its last counted fragment left out) and the packets
 * decoded with the tests' own decoder: every event of every thread must be
 * there exactly once.
 *
 * The producer is a forked child of the test: THREADS threads each record
 * EVENTS instants "tick" (args t: the thread, i: 0, 1, ...), then say so on
 * a pipe and wait for a byte on another before they exit, so that the host
 * can ask for a flush while their chunks are still being written.
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buffer/smb.h"
#include "ipc/ipc.h"
#include "pb/pb.h"
#include "proto/ipc.h"
#include "tdecode.h"
#include "test.h"

ETCH_CATEGORY_DEFINE(emul, "emul", "emulated shared memory tests", "");

/* ---- the producer (a child process) ---- */

typedef struct prod_args {
  int threads;
  long events;
  int done_w, go_r; /* pipes: "recorded" to the host, "exit" from it */
  size_t big;       /* > 0: thread 0 also records a packet this large */
  bool again;       /* after "exit", wait for a new session, record again */
} prod_args;

static prod_args PA;

static void *prod_thread(void *arg) {
  long t = (long)(intptr_t)arg;
  for (long i = 0; i < PA.events; i++)
    ETCH_INSTANT(emul, "tick", ETCH_ARG_INT("t", t), ETCH_ARG_INT("i", i));
  if (t == 0 && PA.big) { /* three strings (each string arg is capped) */
    char *s = (char *)malloc(PA.big + 1);
    for (size_t k = 0; k < PA.big; k++) s[k] = (char)('a' + k % 26);
    s[PA.big] = 0;
    ETCH_INSTANT(emul, "big", ETCH_ARG_STRING("s0", s),
                 ETCH_ARG_STRING("s1", s), ETCH_ARG_STRING("s2", s));
    free(s);
  }
  char c = 1;
  if (write(PA.done_w, &c, 1) != 1) _exit(20);
  if (read(PA.go_r, &c, 1) != 1) _exit(21);
  if (PA.again) { /* the service came back: a new session, the same ticks */
    for (int k = 0; !etch_category_enabled(&etch_cat_emul); k++) {
      if (k == 60000) _exit(22);
      struct timespec d = {0, 1000000};
      nanosleep(&d, NULL);
    }
    for (long i = 0; i < PA.events; i++)
      ETCH_INSTANT(emul, "tick", ETCH_ARG_INT("t", t), ETCH_ARG_INT("i", i));
  }
  return NULL;
}

static void run_producer(void) {
  /* etch_system_start waits (ETCH_SYSTEM_WAIT_MS) for the session. */
  if (etch_system_start("emul") != ETCH_OK) _exit(10);
  if (!etch_category_enabled(&etch_cat_emul)) _exit(11);
  pthread_t th[16];
  for (int i = 0; i < PA.threads; i++)
    pthread_create(&th[i], NULL, prod_thread, (void *)(intptr_t)i);
  for (int i = 0; i < PA.threads; i++) pthread_join(th[i], NULL);
  exit(0); /* the last flush: at exit */
}

/* ---- the host ---- */

enum { M_INIT = 1, M_REGISTER, M_COMMIT, M_ASYNC, M_STOPPED, M_STARTED };

typedef struct chunk_copy {
  uint16_t writer;
  uint32_t id;
  bool complete;
  uint16_t count, flags;
  uint8_t *payload;
  uint32_t len;
} chunk_copy;

typedef struct host {
  int lfd;
  char name[64];
  etch_ipc_conn c;
  bool connected, eof;
  bool emulate_flag; /* answer use_shmem_emulation */
  uint32_t page_kb;
  uint64_t async_req;
  bool started;
  chunk_copy *chunks;
  size_t nchunks, cap;
  uint64_t last_flush_id;
  size_t incomplete_seen, patches_seen, commits, data_bytes, bad;
  size_t acks_asked; /* CommitData that want a reply (the last, at exit) */
  uint32_t chunk_size; /* every chunk's data: one size */
} host;

static void host_listen(host *h) {
  memset(h, 0, sizeof *h);
  h->page_kb = 32;
  h->emulate_flag = true;
  ASSERT_OK(etch__ipc_listen("127.0.0.1:0", false, &h->lfd));
  ASSERT_OK(etch__ipc_local_name(h->lfd, h->name, sizeof h->name));
}

static void send_frame(host *h, etch_ipc_frame *f) {
  ASSERT_OK(etch__ipc_conn_send(&h->c, f, -1));
}

static void reply(host *h, uint64_t req, const etch__pb_buf *body,
                  bool more) {
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_REPLY;
  f.request_id = req;
  f.success = true;
  f.has_more = more;
  if (body) {
    f.body.data = etch__pb_buf_data(body);
    f.body.len = (uint32_t)etch__pb_buf_len(body);
  }
  send_frame(h, &f);
}

/* One GetAsyncCommand command: SetupTracing, StartDataSource, Flush. */
static void command(host *h, int what, uint64_t arg) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_nested m, cfg;
  if (what == ETCH_GAC_SETUP_TRACING) {
    etch__pb_nested_begin(&b.s, ETCH_GAC_SETUP_TRACING, &m);
    etch__pb_write_varint_field(&b.s, ETCH_GAC_SETUP_PAGE_SIZE_KB, h->page_kb);
    etch__pb_nested_end(&b.s, &m);
  } else if (what == ETCH_GAC_START_DATA_SOURCE) {
    etch__pb_nested_begin(&b.s, ETCH_GAC_START_DATA_SOURCE, &m);
    etch__pb_write_varint_field(&b.s, ETCH_GAC_DS_INSTANCE_ID, 1);
    etch__pb_nested_begin(&b.s, ETCH_GAC_DS_CONFIG, &cfg);
    etch__pb_write_string_field(&b.s, ETCH_DSC_NAME, "track_event");
    etch__pb_write_varint_field(&b.s, ETCH_DSC_TARGET_BUFFER, 1);
    etch__pb_nested_end(&b.s, &cfg);
    etch__pb_nested_end(&b.s, &m);
  } else {
    etch__pb_nested_begin(&b.s, ETCH_GAC_FLUSH, &m);
    etch__pb_write_varint_field(&b.s, ETCH_GAC_FLUSH_DATA_SOURCE_IDS, 1);
    etch__pb_write_varint_field(&b.s, ETCH_GAC_FLUSH_REQUEST_ID, arg);
    etch__pb_nested_end(&b.s, &m);
  }
  reply(h, h->async_req, &b, true);
  etch__pb_buf_free(&b);
}

/* Keeps a chunk as Perfetto's service keeps it. */
static void keep_chunk(host *h, const uint8_t *data, uint32_t len,
                       bool complete) {
  if (len < ETCH_SMB_CHUNK_HEADER) {
    h->bad++;
    return;
  }
  if (!h->chunk_size) h->chunk_size = len;
  if (len != h->chunk_size) h->bad++;
  uint32_t id;
  uint16_t writer, packets;
  memcpy(&id, data, 4);
  memcpy(&writer, data + 4, 2);
  memcpy(&packets, data + 6, 2);
  chunk_copy nc = {writer, id, complete, (uint16_t)(packets & 0x3ff),
                   (uint16_t)(packets >> 10), NULL, len - 8};
  for (size_t i = 0; i < h->nchunks; i++) {
    chunk_copy *o = &h->chunks[i];
    if (o->writer != writer || o->id != id) continue;
    /* Sent again: a complete chunk never is, and a later copy never has
     * fewer fragments (after the one an incomplete copy leaves out). */
    uint16_t oc = o->complete ? o->count : (uint16_t)(o->count ? o->count - 1 : 0);
    uint16_t ncnt = complete ? nc.count : (uint16_t)(nc.count ? nc.count - 1 : 0);
    if (o->complete || ncnt < oc) {
      h->bad++;
      return;
    }
    free(o->payload);
    nc.payload = (uint8_t *)malloc(nc.len);
    memcpy(nc.payload, data + 8, nc.len);
    *o = nc;
    return;
  }
  if (h->nchunks == h->cap) {
    h->cap = h->cap ? h->cap * 2 : 256;
    h->chunks = (chunk_copy *)realloc(h->chunks, h->cap * sizeof *h->chunks);
  }
  nc.payload = (uint8_t *)malloc(nc.len);
  memcpy(nc.payload, data + 8, nc.len);
  h->chunks[h->nchunks++] = nc;
}

static void on_commit(host *h, const uint8_t *p, size_t n) {
  etch__pb_dec d, e;
  etch__pb_field f, g;
  h->commits++;
  etch__pb_dec_init(&d, p, n);
  while (etch__pb_next(&d, &f)) {
    if (f.id == ETCH_CDR_CHUNKS_TO_MOVE && f.wt == 2) {
      const uint8_t *data = NULL;
      uint32_t len = 0;
      bool incomplete = false;
      etch__pb_dec_init(&e, f.data, f.len);
      while (etch__pb_next(&e, &g)) {
        if (g.id == ETCH_CDR_MOVE_DATA && g.wt == 2) {
          data = g.data;
          len = (uint32_t)g.len;
        } else if (g.id == ETCH_CDR_MOVE_CHUNK_INCOMPLETE && g.wt == 0) {
          incomplete = g.u != 0;
        }
      }
      if (!data) {
        h->bad++; /* a chunk that stays in memory the service cannot see */
        continue;
      }
      h->data_bytes += len;
      h->incomplete_seen += incomplete;
      keep_chunk(h, data, len, !incomplete);
    } else if (f.id == ETCH_CDR_CHUNKS_TO_PATCH) {
      h->patches_seen++;
    } else if (f.id == ETCH_CDR_FLUSH_REQUEST_ID && f.wt == 0) {
      h->last_flush_id = f.u;
    }
  }
}

static void on_frame(host *h, const etch_ipc_frame *f) {
  if (f->kind == ETCH_IPC_BIND) {
    ASSERT_TRUE(etch__ipc_bytes_eq(f->name, ETCH_IPC_PRODUCER_PORT));
    static const char *names[] = {
        "InitializeConnection", "RegisterDataSource", "CommitData",
        "GetAsyncCommand", "NotifyDataSourceStopped",
        "NotifyDataSourceStarted"};
    etch_ipc_frame r;
    memset(&r, 0, sizeof r);
    r.kind = ETCH_IPC_BIND_REPLY;
    r.request_id = f->request_id;
    r.success = true;
    r.service_id = 1;
    r.nmethods = 6;
    for (uint32_t i = 0; i < 6; i++) {
      r.methods[i].id = i + 1;
      r.methods[i].name.data = (const uint8_t *)names[i];
      r.methods[i].name.len = (uint32_t)strlen(names[i]);
    }
    send_frame(h, &r);
    return;
  }
  ASSERT_EQ_INT(f->kind, ETCH_IPC_INVOKE);
  switch (f->method_id) {
  case M_INIT: {
    etch__pb_buf b;
    etch__pb_buf_init(&b, 16, 0);
    if (h->emulate_flag)
      etch__pb_write_varint_field(&b.s, ETCH_ICRESP_USE_SHMEM_EMULATION, 1);
    reply(h, f->request_id, &b, false);
    etch__pb_buf_free(&b);
    break;
  }
  case M_ASYNC:
    h->async_req = f->request_id;
    break;
  case M_REGISTER:
    reply(h, f->request_id, NULL, false);
    ASSERT_TRUE(h->async_req != 0);
    if (!h->started) {
      h->started = true;
      command(h, ETCH_GAC_SETUP_TRACING, 0);
      command(h, ETCH_GAC_START_DATA_SOURCE, 0);
    }
    break;
  case M_COMMIT:
    if (f->body.len > ETCH_IPC_MAX_FRAME) h->bad++;
    on_commit(h, f->body.data, f->body.len);
    if (!f->drop_reply) {
      h->acks_asked++;
      reply(h, f->request_id, NULL, false);
    }
    break;
  default:
    if (!f->drop_reply) reply(h, f->request_id, NULL, false);
    break;
  }
}

/* Runs the connection for a while: accepts it, reads, answers. */
static void host_step(host *h, int timeout_ms) {
  if (!h->connected) {
    struct pollfd pf = {h->lfd, POLLIN, 0};
    ASSERT_TRUE(poll(&pf, 1, timeout_ms) >= 0);
    int fd = -1;
    ASSERT_OK(etch__ipc_accept(h->lfd, &fd));
    if (fd < 0) return;
    etch__ipc_conn_init(&h->c, fd, 64u << 20);
    ASSERT_TRUE(h->c.remote);
    h->connected = true;
  }
  if (h->eof) return;
  etch__ipc_conn_wait(&h->c, timeout_ms);
  etch_ipc_frame f;
  int r;
  while ((r = etch__ipc_conn_next(&h->c, &f)) == 1) on_frame(h, &f);
  if (h->c.failed) {
    if (!h->c.eof) FAIL("host: %s", h->c.err);
    h->eof = true;
  }
}

/* The packets the collected chunks hold, as a trace (each packet with its
 * writer as trusted_packet_sequence_id, as a service stamps it). */
static int by_writer_id(const void *a, const void *b) {
  const chunk_copy *x = (const chunk_copy *)a, *y = (const chunk_copy *)b;
  if (x->writer != y->writer) return x->writer < y->writer ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

static void put_packet(etch__pb_buf *out, const uint8_t *p, size_t n,
                       uint16_t writer) {
  uint8_t tail[8];
  uint8_t *q = etch__pb_put_varint(tail, 10u << 3);
  q = etch__pb_put_varint(q, writer);
  uint8_t head[16];
  uint8_t *r = etch__pb_put_varint(head, (1u << 3) | 2u);
  r = etch__pb_put_varint(r, n + (size_t)(q - tail));
  etch__pb_write_bytes(&out->s, head, (size_t)(r - head));
  etch__pb_write_bytes(&out->s, p, n);
  etch__pb_write_bytes(&out->s, tail, (size_t)(q - tail));
}

static uint8_t *assemble(host *h, size_t *len, size_t *lost) {
  qsort(h->chunks, h->nchunks, sizeof *h->chunks, by_writer_id);
  etch__pb_buf out, pend;
  etch__pb_buf_init(&out, 1 << 16, 0);
  etch__pb_buf_init(&pend, 1 << 12, 0);
  bool have_pend = false;
  *lost = 0;
  for (size_t i = 0; i < h->nchunks; i++) {
    chunk_copy *c = &h->chunks[i];
    bool seq_start = i == 0 || h->chunks[i - 1].writer != c->writer;
    bool contiguous = !seq_start && h->chunks[i - 1].id + 1 == c->id;
    if (seq_start || !contiguous) {
      if (have_pend) (*lost)++;
      have_pend = false;
    }
    uint32_t count = c->count, flags = c->flags;
    if (!c->complete && count) { /* the last counted one may be unfinished */
      count--;
      flags &= ~2u;
    }
    uint32_t off = 0;
    for (uint32_t k = 0; k < count; k++) {
      uint32_t size = 0, b = 0;
      for (; b < 4 && off + b < c->len; b++) {
        size |= (uint32_t)(c->payload[off + b] & 0x7f) << (7 * b);
        if (!(c->payload[off + b] & 0x80)) break;
      }
      if (b == 4 || off + b >= c->len || off + b + 1 + size > c->len) {
        h->bad++;
        break;
      }
      const uint8_t *p = c->payload + off + b + 1;
      off += b + 1 + size;
      bool first = k == 0 && (flags & 1);
      bool last = k == count - 1 && (flags & 2);
      if (first) {
        if (!have_pend) {
          (*lost)++;
          continue;
        }
        etch__pb_write_bytes(&pend.s, p, size);
        if (!last) {
          put_packet(&out, etch__pb_buf_data(&pend), etch__pb_buf_len(&pend),
                     c->writer);
          have_pend = false;
        }
        continue;
      }
      if (have_pend) (*lost)++;
      have_pend = false;
      if (last) {
        etch__pb_buf_reset(&pend);
        etch__pb_write_bytes(&pend.s, p, size);
        have_pend = true;
        continue;
      }
      if (size) put_packet(&out, p, size, c->writer);
    }
  }
  if (have_pend) (*lost)++;
  etch__pb_buf_free(&pend);
  return etch__pb_buf_take(&out, len);
}

/* Decodes what the host holds; checks every tick (t, i) once. Returns the
 * ticks seen; *big_len gets the "big" instant's string length (0 if
 * none). */
static size_t check_ticks(host *h, int threads, long events, bool all,
                          size_t *big_len) {
  size_t len, lost;
  uint8_t *trace = assemble(h, &len, &lost);
  ASSERT_EQ_U64(h->bad, 0);
  ASSERT_EQ_U64(lost, 0);
  td_trace t;
  if (td_decode(trace, len, &t) != 0) FAIL("decode: %s", t.error);
  uint8_t *seen = (uint8_t *)calloc((size_t)threads * (size_t)events, 1);
  size_t ticks = 0;
  if (big_len) *big_len = 0;
  for (size_t k = 0; k < t.nev; k++) {
    td_event *e = &t.ev[k];
    if (e->type != 3 || !e->name) continue;
    if (!strcmp(e->name, "big") && big_len && e->nargs == 3) {
      for (int a = 0; a < 3; a++) {
        ASSERT_TRUE(e->args[a].s != NULL);
        *big_len += strlen(e->args[a].s);
      }
    }
    if (strcmp(e->name, "tick") != 0) continue;
    ASSERT_EQ_INT(e->nargs, 2);
    int64_t th = e->args[0].i, i = e->args[1].i;
    ASSERT_TRUE(th >= 0 && th < threads && i >= 0 && i < events);
    ASSERT_EQ_INT(seen[th * events + i], 0);
    seen[th * events + i] = 1;
    ticks++;
  }
  ASSERT_EQ_U64(t.unresolved, 0);
  ASSERT_EQ_U64(t.skipped, 0);
  if (all) ASSERT_EQ_U64(ticks, (size_t)threads * (size_t)events);
  free(seen);
  td_free(&t);
  free(trace);
  return ticks;
}

/*
 * One run: a producer of `threads` x `events` ticks into the host. With
 * `flush`, once every thread recorded (their last chunks still being
 * written) the host asks for a flush and checks that everything is there
 * already (in chunks sent with chunk_incomplete); then the threads exit
 * and the process too, and everything must be there once, in complete
 * chunks.
 */
static void run(host *h, int threads, long events, bool flush, size_t big) {
  int done[2], go[2];
  ASSERT_OK(pipe(done));
  ASSERT_OK(pipe(go));
  setenv("PERFETTO_PRODUCER_SOCK_NAME", h->name, 1);
  setenv("ETCH_SYSTEM_WAIT_MS", "60000", 1);
  /* Writers wait for room rather than drop: every tick must arrive. */
  setenv("ETCH_SYSTEM_STALL_MS", "10000", 1);
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    close(h->lfd);
    close(done[0]);
    close(go[1]);
    PA = (prod_args){threads, events, done[1], go[0], big};
    run_producer();
  }
  close(done[1]);
  close(go[0]);
  /* Until every thread has recorded its ticks. */
  int recorded = 0;
  while (recorded < threads) {
    struct pollfd pf = {done[0], POLLIN, 0};
    host_step(h, 10);
    if (poll(&pf, 1, 0) == 1) {
      char c;
      ASSERT_EQ_INT(read(done[0], &c, 1), 1);
      recorded++;
    }
  }
  if (flush) {
    command(h, ETCH_GAC_FLUSH, 77);
    while (h->last_flush_id != 77 && !h->eof) host_step(h, 100);
    ASSERT_EQ_U64(h->last_flush_id, 77);
    ASSERT_TRUE(h->incomplete_seen > 0);
    size_t big_len = 0;
    check_ticks(h, threads, events, true, big ? &big_len : NULL);
    ASSERT_EQ_U64(big_len, 3 * big);
  }
  char go_bytes[16] = {0};
  ASSERT_EQ_INT(write(go[1], go_bytes, (size_t)threads), threads);
  while (!h->eof) host_step(h, 100);
  int st;
  ASSERT_EQ_INT(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ_INT(WEXITSTATUS(st), 0);
  for (size_t i = 0; i < h->nchunks; i++) ASSERT_TRUE(h->chunks[i].complete);
  size_t big_len = 0;
  check_ticks(h, threads, events, true, big ? &big_len : NULL);
  ASSERT_EQ_U64(big_len, 3 * big);
  ASSERT_EQ_U64(h->patches_seen, 0);
  /* At exit the producer asked once that the service say it has it all. */
  ASSERT_EQ_U64(h->acks_asked, 1);
  close(done[0]);
  close(go[1]);
}

/* N threads x M events over TCP with emulation: a flush while the threads'
 * last chunks are being written brings them as chunk_incomplete copies;
 * the exit brings them complete; every tick once. */
TEST(emul_threads_flush_exact) {
  host h;
  host_listen(&h);
  run(&h, 4, 20000, true, 0);
  ASSERT_TRUE(h.commits > 1);
}

/* No use_shmem_emulation in the reply: a network connection, on which no
 * descriptor can come, emulates all the same. */
TEST(emul_remote_without_flag) {
  host h;
  host_listen(&h);
  h.emulate_flag = false;
  run(&h, 2, 5000, true, 0);
}

/* A packet larger than many chunks (one instant with three strings of
 * 60 000 bytes):
 * its fragments go in chunks that are held until it ends (no patch is
 * ever needed), across several CommitData frames; it arrives whole. */
TEST(emul_packet_across_chunks) {
  host h;
  host_listen(&h);
  run(&h, 2, 3000, true, 60000);
}

/* Writers faster than the socket: a small buffer (256 KiB), writers that
 * wait for room (ETCH_SYSTEM_STALL_MS, as in every run) and many events; the chunks wait in
 * the process's buffer, never more than a frame's worth in a CommitData,
 * and nothing is lost. Pages of 4 KiB: the other layout. */
TEST(emul_backpressure_nothing_lost) {
  host h;
  host_listen(&h);
  h.page_kb = 4;
  setenv("ETCH_SYSTEM_SMB_KB", "256", 1);
  run(&h, 4, 150000, false, 0);
  ASSERT_TRUE(h.data_bytes > (8u << 20));
}

/* The service goes away (the host closes the connection) while the
 * producer's threads wait: the producer ends its session, connects again
 * by itself (as over a Unix socket), gets a new session over the new
 * connection, still emulated, and every tick its threads record then
 * arrives. */
TEST(emul_reconnects) {
  host h;
  host_listen(&h);
  int done[2], go[2];
  ASSERT_OK(pipe(done));
  ASSERT_OK(pipe(go));
  setenv("PERFETTO_PRODUCER_SOCK_NAME", h.name, 1);
  setenv("ETCH_SYSTEM_WAIT_MS", "60000", 1);
  setenv("ETCH_SYSTEM_STALL_MS", "10000", 1);
  const int threads = 2;
  const long events = 4000;
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    close(h.lfd);
    close(done[0]);
    close(go[1]);
    PA = (prod_args){threads, events, done[1], go[0], 0, true};
    run_producer();
  }
  close(done[1]);
  close(go[0]);
  int recorded = 0;
  while (recorded < threads) {
    struct pollfd pf = {done[0], POLLIN, 0};
    host_step(&h, 10);
    if (poll(&pf, 1, 0) == 1) {
      char c;
      ASSERT_EQ_INT(read(done[0], &c, 1), 1);
      recorded++;
    }
  }
  /* The first connection goes, and what it brought. */
  etch__ipc_conn_close(&h.c);
  for (size_t i = 0; i < h.nchunks; i++) free(h.chunks[i].payload);
  h.nchunks = 0;
  h.connected = h.eof = h.started = false;
  h.async_req = 0;
  h.incomplete_seen = h.acks_asked = 0;
  while (!h.started) host_step(&h, 100);
  char go_bytes[16] = {0};
  ASSERT_EQ_INT(write(go[1], go_bytes, (size_t)threads), threads);
  while (!h.eof) host_step(&h, 100);
  int st;
  ASSERT_EQ_INT(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  ASSERT_EQ_INT(WEXITSTATUS(st), 0);
  for (size_t i = 0; i < h.nchunks; i++) ASSERT_TRUE(h.chunks[i].complete);
  check_ticks(&h, threads, events, true, NULL);
  ASSERT_EQ_U64(h.acks_asked, 1);
}

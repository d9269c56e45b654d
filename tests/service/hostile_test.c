/*
 * hostile_test.c - one producer writes what no honest producer would into
 * a shared session: random packets, packets whose top level is sound but
 * whose nested fields are not (a wrong wire type inside track_event,
 * interned_data, track_descriptor, clock_snapshot, packet defaults; debug
 * annotations nested too deep), random bytes over its whole shared memory,
 * chunks rewritten while they are committed, patches at random offsets.
 * Beside it, honest producers (svc_producer) record ticks. Every time:
 * `etch record` exits 0, `etch stats` and `etch query` read the trace,
 * every honest thread's ticks are all there, the trace holds no packet
 * etch's reader leaves out (etchd left them out first), and the packets
 * etchd left out are counted (TraceStats.invalid_packets) with the
 * producer named in etchd's log.
 *
 * The hostile producer is this process, speaking the producer protocol by
 * hand (as the raw producers of tests/service/svc_common.c do); its bytes come
 * from a fixed seed per case, so a failure replays.
 *
 * Each case runs twice: the hostile producer on etchd's Unix socket
 * (shared memory), then on its loopback TCP socket, where etchd emulates
 * the shared memory and every chunk's bytes come inside CommitData (its
 * memory here is its own; "random shared memory" is then random chunk
 * bytes of random lengths). Bytes on the wire cannot change once sent, so
 * the case of chunks rewritten while committed has no TCP run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buffer/smb.h"
#include "ipc/ipc.h"
#include "pb/pb.h"
#include "proto/ipc.h"
#include "proto/perfetto.h"
#include "test.h"

extern char **environ;

/* ---- processes: etchd, etch, honest producers ------------------------------------ */

typedef struct svc {
  pid_t pid;
  char dir[512], prod[600], cons[600], log[600];
  char tcp[64]; /* the hostile producer's TCP socket ("": none) */
} svc;

static void sleep_ms(long ms) {
  struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&d, NULL);
}

/* Runs a program that dies with the test; its output into `out`. */
static pid_t spawn(char *const argv[], const char *out) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) FAIL("fork: %s", strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    if (out) {
      int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
    }
    execve(argv[0], argv, environ);
    _exit(127);
  }
  return pid;
}

static int wait_exit(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int file_lines(const char *path, const char *needle) {
  FILE *f = fopen(path, "r");
  char line[1024];
  int n = 0;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, needle)) n++;
  if (f) fclose(f);
  return n;
}

/* Checks `cond` every 10 ms until it holds; 30 s only end a hang. */
#define WAIT_UNTIL(cond, ...)                                   \
  do {                                                          \
    for (int wait_i_ = 0; wait_i_ < 3000 && !(cond); wait_i_++) \
      sleep_ms(10);                                             \
    if (!(cond)) FAIL(__VA_ARGS__);                             \
  } while (0)

static void svc_start(svc *s, bool tcp) {
  snprintf(s->dir, sizeof s->dir, "%s", etch_test_tmpdir());
  snprintf(s->prod, sizeof s->prod, "%s/p.sock", s->dir);
  snprintf(s->cons, sizeof s->cons, "%s/c.sock", s->dir);
  snprintf(s->log, sizeof s->log, "%s/etchd.log", s->dir);
  char prod[700];
  /* Honest producers take the first name: the Unix socket. */
  snprintf(prod, sizeof prod, "%s%s", s->prod, tcp ? ",127.0.0.1:0" : "");
  setenv("PERFETTO_PRODUCER_SOCK_NAME", prod, 1);
  setenv("PERFETTO_CONSUMER_SOCK_NAME", s->cons, 1);
  char *argv[] = {(char *)ETCHD_BIN, "-v", NULL};
  s->pid = spawn(argv, s->log);
  int fd = -1;
  WAIT_UNTIL(etch__ipc_connect(s->cons, &fd) == ETCH_OK,
             "etchd did not start (see %s)", s->log);
  close(fd);
  s->tcp[0] = 0;
  if (!tcp) return;
  FILE *f = fopen(s->log, "r");
  char line[2048];
  while (f && fgets(line, sizeof line, f)) {
    char *t = strstr(line, ",127.0.0.1:");
    if (t && strstr(line, "producers on ")) {
      sscanf(t + 1, "%63[^,]", s->tcp);
      break;
    }
  }
  if (f) fclose(f);
  ASSERT_TRUE(s->tcp[0] != 0);
}

static void svc_stop(svc *s) {
  kill(s->pid, SIGTERM);
  int rc = wait_exit(s->pid);
  if (rc != 0) FAIL("etchd ended with %d (see %s)", rc, s->log);
  if (file_lines(s->log, "runtime error") || file_lines(s->log, "Sanitizer"))
    FAIL("etchd's log (%s) has a sanitizer's report", s->log);
}

/* Whether process `pid` catches SIGINT: etch record sets its handler once
 * its session is set up. */
static bool catches_sigint(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  unsigned long long mask = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "SigCgt: %llx", &mask) == 1) break;
  if (f) fclose(f);
  return (mask >> (SIGINT - 1)) & 1;
}

/* `etch record --config` of track_event (every category) and raw.source
 * into one buffer, in the background, once its session is set up. */
static pid_t record(const svc *s, const char *name, char *out, size_t cap,
                    char *log, size_t logcap) {
  char cfg[700];
  snprintf(cfg, sizeof cfg, "%s/%s.pbtx", s->dir, name);
  snprintf(log, logcap, "%s/%s.record.log", s->dir, name);
  snprintf(out, cap, "%s/%s.pftrace", s->dir, name);
  FILE *f = fopen(cfg, "w");
  ASSERT_TRUE(f != NULL);
  fputs("buffers { size_kb: 16384 }\n"
        "data_sources { config { name: \"track_event\" } }\n"
        "data_sources { config { name: \"raw.source\" } }\n"
        "flush_timeout_ms: 2000\ndata_source_stop_timeout_ms: 2000\n",
        f);
  if (s->tcp[0]) fputs("trace_all_machines: true\n", f);
  fclose(f);
  char *argv[] = {(char *)ETCH_BIN, "record", "--config", cfg, "-o", out, NULL};
  int before = file_lines(s->log, " buffers, ");
  pid_t pid = spawn(argv, log);
  WAIT_UNTIL(file_lines(s->log, " buffers, ") > before && catches_sigint(pid),
             "no session of etch record (see %s, %s)", s->log, log);
  return pid;
}

#define HONEST 2  /* processes */
#define THREADS 2 /* each */
#define TICKS 800 /* each thread's */

static pid_t honest(const char *name) {
  char t[16], e[24];
  snprintf(t, sizeof t, "%d", THREADS);
  snprintf(e, sizeof e, "%d", TICKS);
  setenv("ETCH_SYSTEM_WAIT_MS", "3000", 1);
  char *argv[] = {(char *)SVC_PRODUCER, (char *)name, t, e, NULL};
  return spawn(argv, NULL);
}

/* `etch ARGS...`: its exit status, stdout into out. */
static int etch_run(char *out, size_t cap, const char *const *args) {
  char path[700];
  snprintf(path, sizeof path, "%s/etch.out", etch_test_tmpdir());
  char *argv[12] = {(char *)ETCH_BIN};
  for (int i = 0; args[i] && i < 10; i++) argv[i + 1] = (char *)args[i];
  int rc = wait_exit(spawn(argv, path));
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(out, 1, cap - 1, f) : 0;
  out[n] = 0;
  if (f) fclose(f);
  return rc;
}

/* ---- the hostile producer -------------------------------------------------------- */

typedef struct hostile {
  etch_ipc_conn c;
  etch_ipc_frame bind;
  uint8_t names[4096];
  uint32_t svc;
  uint64_t req;
  uint8_t *smb;
  size_t smb_size;
  uint32_t page_size;
  etch_smb m;
  uint32_t chunk_id;
  uint64_t rng;
  bool gone; /* etchd closed the connection (it may, for bad commits) */
  bool emulated; /* on TCP: smb is its own memory, sent inside CommitData */
} hostile;

static uint64_t rnd(hostile *h) {
  h->rng ^= h->rng << 13;
  h->rng ^= h->rng >> 7;
  h->rng ^= h->rng << 17;
  return h->rng;
}

static bool h_next(hostile *h, etch_ipc_frame *f) {
  for (int i = 0; i < 600; i++) { /* 30 s only end a hang */
    int n = etch__ipc_conn_next(&h->c, f);
    if (n == 1) return true;
    if (n < 0 || h->c.failed) {
      h->gone = true;
      return false;
    }
    etch__ipc_conn_wait(&h->c, 50);
  }
  FAIL("hostile: nothing from the service");
}

static void h_invoke(hostile *h, const char *method, const etch__pb_buf *b) {
  if (h->gone) return;
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_INVOKE;
  f.request_id = ++h->req;
  f.service_id = h->svc;
  f.method_id = etch__ipc_method_id(&h->bind, method);
  ASSERT_TRUE(f.method_id != 0);
  if (b) {
    f.body.data = etch__pb_buf_data(b);
    f.body.len = (uint32_t)etch__pb_buf_len(b);
  }
  if (etch__ipc_conn_send(&h->c, &f, -1) != ETCH_OK) h->gone = true;
}

/* Sync answered: etchd handled every request before it. */
static void h_sync(hostile *h) {
  h_invoke(h, "Sync", NULL);
  uint64_t want = h->req;
  etch_ipc_frame g;
  while (!h->gone && h_next(h, &g))
    if (g.kind == ETCH_IPC_REPLY && g.request_id == want) return;
}

/* Connects, InitializeConnection ("hostile"), RegisterDataSource
 * raw.source, maps the shared memory and waits for StartDataSource; then
 * RegisterTraceWriter 1 into the session's buffer 1. */
static void h_start(const svc *s, hostile *h, uint64_t seed) {
  memset(h, 0, sizeof *h);
  h->rng = seed;
  int fd;
  ASSERT_OK(etch__ipc_connect(s->tcp[0] ? s->tcp : s->prod, &fd));
  h->emulated = s->tcp[0] != 0;
  etch__ipc_conn_init(&h->c, fd, 1 << 20);
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_BIND;
  f.request_id = ++h->req;
  f.name.data = (const uint8_t *)"ProducerPort";
  f.name.len = 12;
  ASSERT_OK(etch__ipc_conn_send(&h->c, &f, -1));
  ASSERT_TRUE(h_next(h, &h->bind));
  ASSERT_TRUE(h->bind.kind == ETCH_IPC_BIND_REPLY && h->bind.success);
  h->svc = h->bind.service_id;
  size_t off = 0;
  for (uint32_t i = 0; i < h->bind.nmethods; i++) {
    ASSERT_TRUE(off + h->bind.methods[i].name.len <= sizeof h->names);
    memcpy(h->names + off, h->bind.methods[i].name.data,
           h->bind.methods[i].name.len);
    h->bind.methods[i].name.data = h->names + off;
    off += h->bind.methods[i].name.len;
  }
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_write_string_field(&b.s, ETCH_ICR_PRODUCER_NAME, "hostile");
  h_invoke(h, "InitializeConnection", &b);
  h_invoke(h, "GetAsyncCommand", NULL);
  etch__pb_buf_reset(&b);
  etch__pb_nested d;
  etch__pb_nested_begin(&b.s, ETCH_RDS_DESCRIPTOR, &d);
  etch__pb_write_string_field(&b.s, ETCH_DSD_NAME, "raw.source");
  etch__pb_nested_end(&b.s, &d);
  h_invoke(h, "RegisterDataSource", &b);
  bool started = false;
  for (int i = 0; i < 50 && !started; i++) {
    etch_ipc_frame g;
    ASSERT_TRUE(h_next(h, &g));
    if (g.kind != ETCH_IPC_REPLY || !g.has_more) continue;
    etch__pb_dec dec;
    etch__pb_field fl;
    etch__pb_dec_init(&dec, g.body.data, g.body.len);
    while (etch__pb_next(&dec, &fl)) {
      if (fl.id == ETCH_GAC_SETUP_TRACING) {
        etch__pb_dec sd;
        etch__pb_field sf;
        etch__pb_dec_init(&sd, fl.data, fl.len);
        while (etch__pb_next(&sd, &sf))
          if (sf.id == ETCH_GAC_SETUP_PAGE_SIZE_KB)
            h->page_size = (uint32_t)sf.u * 1024;
        int sfd = etch__ipc_conn_take_fd(&h->c);
        if (h->emulated) { /* memory of its own, four pages */
          ASSERT_EQ_INT(sfd, -1);
          h->smb_size = 4u * h->page_size;
          h->smb = mmap(NULL, h->smb_size, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
          ASSERT_TRUE(h->smb != MAP_FAILED);
          continue;
        }
        ASSERT_TRUE(sfd >= 0);
        struct stat st;
        ASSERT_TRUE(fstat(sfd, &st) == 0);
        h->smb_size = (size_t)st.st_size;
        h->smb = mmap(NULL, h->smb_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                      sfd, 0);
        ASSERT_TRUE(h->smb != MAP_FAILED);
        close(sfd);
      } else if (fl.id == ETCH_GAC_START_DATA_SOURCE) {
        started = true;
      }
    }
  }
  ASSERT_TRUE(started && h->smb && h->page_size);
  ASSERT_OK(etch__smb_init(&h->m, h->smb, h->smb_size, h->page_size));
  etch__pb_buf_reset(&b);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_WRITER_ID, 1);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_TARGET_BUFFER, 1);
  h_invoke(h, "RegisterTraceWriter", &b);
  etch__pb_buf_free(&b);
  h_sync(h);
}

static void h_close(hostile *h) {
  if (h->smb) munmap(h->smb, h->smb_size);
  etch__ipc_conn_close(&h->c);
}

/* CommitData: chunk (page, 0) moved into buffer 1, and `npatch` patches of
 * 4 bytes at random offsets of chunk `patch_id` when npatch > 0. */
static void h_commit(hostile *h, uint32_t page, uint32_t patch_id, int npatch) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 128, 0);
  etch__pb_nested m;
  etch__pb_nested_begin(&b.s, ETCH_CDR_CHUNKS_TO_MOVE, &m);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_PAGE, page);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_CHUNK, 0);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_TARGET_BUFFER, 1);
  if (h->emulated) {
    /* The chunk's bytes (its own memory's, whatever is there); a page
     * past the memory: random bytes of a random length, up to past what
     * any chunk may be. */
    uint32_t npages = (uint32_t)(h->smb_size / h->page_size);
    if (page < npages) {
      etch__pb_write_bytes_field(
          &b.s, ETCH_CDR_MOVE_DATA,
          h->smb + (size_t)page * h->page_size + ETCH_SMB_PAGE_HEADER,
          etch__smb_chunk_size(h->page_size, ETCH_SMB_DIV1));
      /* Taken: the chunk is free again, as etchd would have made it. */
      if (etch__smb_bitmap_layout(etch__smb_bitmap(&h->m, page)) ==
              ETCH_SMB_DIV1 &&
          etch__smb_bitmap_state(etch__smb_bitmap(&h->m, page), 0) ==
              ETCH_SMB_COMPLETE) {
        etch__smb_try_acquire_read(&h->m, page, 0);
        etch__smb_release_free(&h->m, page, 0);
      }
    } else {
      size_t len = rnd(h) % 70000;
      uint8_t *r = (uint8_t *)malloc(len + 1);
      ASSERT_TRUE(r != NULL);
      for (size_t k = 0; k < len; k++) r[k] = (uint8_t)rnd(h);
      etch__pb_write_bytes_field(&b.s, ETCH_CDR_MOVE_DATA, r, len);
      free(r);
    }
  }
  etch__pb_nested_end(&b.s, &m);
  if (npatch > 0) {
    etch__pb_nested_begin(&b.s, ETCH_CDR_CHUNKS_TO_PATCH, &m);
    etch__pb_write_varint_field(&b.s, ETCH_CDR_PATCH_TARGET_BUFFER, 1);
    etch__pb_write_varint_field(&b.s, ETCH_CDR_PATCH_WRITER_ID, 1);
    etch__pb_write_varint_field(&b.s, ETCH_CDR_PATCH_CHUNK_ID, patch_id);
    for (int i = 0; i < npatch; i++) {
      etch__pb_nested p;
      etch__pb_nested_begin(&b.s, ETCH_CDR_PATCH_PATCHES, &p);
      etch__pb_write_varint_field(&b.s, ETCH_CDR_PATCH_OFFSET,
                                  rnd(h) % (h->page_size + 64));
      uint8_t data[4];
      uint64_t v = rnd(h);
      memcpy(data, &v, 4);
      etch__pb_write_bytes_field(&b.s, ETCH_CDR_PATCH_DATA, data, 4);
      etch__pb_nested_end(&b.s, &p);
    }
    etch__pb_nested_end(&b.s, &m);
  }
  h_invoke(h, "CommitData", &b);
  etch__pb_buf_free(&b);
}

/* One chunk of writer 1 in page 0 holding `n` packets, completed and
 * committed (with patches if asked), then Sync: etchd took it and the page
 * is free again. */
static void h_chunk(hostile *h, etch__pb_buf *const *pkts, int n,
                    int npatch) {
  if (h->gone) return;
  uint32_t page = 0;
  if (etch__smb_bitmap_layout(etch__smb_bitmap(&h->m, page)) == 0)
    etch__smb_try_partition(&h->m, page, ETCH_SMB_DIV1);
  uint32_t id = h->chunk_id++;
  uint8_t *c = etch__smb_try_acquire_write(&h->m, page, 0, 1, id, 0);
  if (!c) return; /* the page is not free (scribbled over): nothing to do */
  uint32_t room = etch__smb_chunk_size(h->page_size, ETCH_SMB_DIV1) -
                  ETCH_SMB_CHUNK_HEADER;
  uint8_t *p = c + ETCH_SMB_CHUNK_HEADER, *end = p + room;
  uint16_t count = 0;
  for (int i = 0; i < n; i++) {
    size_t len = etch__pb_buf_len(pkts[i]);
    if ((size_t)(end - p) < len + 4) break;
    etch__pb_put_redundant4(p, (uint32_t)len);
    memcpy(p + 4, etch__pb_buf_data(pkts[i]), len);
    p += 4 + len;
    count++;
  }
  etch_smb_chunk_header *hd = (etch_smb_chunk_header *)c;
  __atomic_store_n(&hd->packets, count, __ATOMIC_RELEASE);
  etch__smb_release_complete(&h->m, page, 0);
  h_commit(h, page, id, npatch);
  h_sync(h);
}

/* ---- what the hostile producer writes ----------------------------------------- */

/* Packets with a sound top level and a bad nested field; each is one that
 * etch's reader would not read. */
static int bad_nested(etch__pb_buf *out, int max) {
  int n = 0;
  for (int k = 0; k < max; k++) {
    etch__pb_buf *b = &out[n];
    etch__pb_buf_reset(b);
    etch__pb_nested te, x;
    etch__pb_write_varint_field(&b->s, ETCH_PKT_TIMESTAMP, 1000 + (uint64_t)k);
    switch (k % 8) {
      case 0: /* track_event.name as a varint */
        etch__pb_nested_begin(&b->s, ETCH_PKT_TRACK_EVENT, &te);
        etch__pb_write_varint_field(&b->s, ETCH_TE_TYPE, 3);
        etch__pb_write_varint_field(&b->s, ETCH_TE_NAME, 5);
        etch__pb_nested_end(&b->s, &te);
        break;
      case 1: /* an interned entry as a varint */
        etch__pb_nested_begin(&b->s, ETCH_PKT_INTERNED_DATA, &x);
        etch__pb_write_varint_field(&b->s, ETCH_ID_EVENT_NAMES, 1);
        etch__pb_nested_end(&b->s, &x);
        break;
      case 2: /* a descriptor's uuid as a string */
        etch__pb_nested_begin(&b->s, ETCH_PKT_TRACK_DESCRIPTOR, &x);
        etch__pb_write_string_field(&b->s, ETCH_TD_UUID, "uuid");
        etch__pb_nested_end(&b->s, &x);
        break;
      case 3: /* a clock snapshot's clock cut short */
        etch__pb_nested_begin(&b->s, ETCH_PKT_CLOCK_SNAPSHOT, &x);
        etch__pb_write_bytes_field(&b->s, ETCH_CLOCKSNAP_CLOCKS, "\x08\x06\x10\xff",
                                   4);
        etch__pb_nested_end(&b->s, &x);
        break;
      case 4: /* track_event_defaults as a varint */
        etch__pb_nested_begin(&b->s, ETCH_PKT_TRACE_PACKET_DEFAULTS, &x);
        etch__pb_write_varint_field(&b->s, ETCH_DEFAULTS_TRACK_EVENT_DEFAULTS, 1);
        etch__pb_nested_end(&b->s, &x);
        break;
      case 5: /* a debug annotation's int_value as bytes */
        etch__pb_nested_begin(&b->s, ETCH_PKT_TRACK_EVENT, &te);
        etch__pb_write_varint_field(&b->s, ETCH_TE_TYPE, 3);
        etch__pb_nested_begin(&b->s, ETCH_TE_DEBUG_ANNOTATIONS, &x);
        etch__pb_write_string_field(&b->s, ETCH_DA_NAME, "n");
        etch__pb_write_string_field(&b->s, ETCH_DA_INT_VALUE, "x");
        etch__pb_nested_end(&b->s, &x);
        etch__pb_nested_end(&b->s, &te);
        break;
      case 6: { /* annotations nested 80 deep */
        etch__pb_nested lv[82];
        etch__pb_nested_begin(&b->s, ETCH_PKT_TRACK_EVENT, &te);
        etch__pb_write_varint_field(&b->s, ETCH_TE_TYPE, 3);
        etch__pb_nested_begin(&b->s, ETCH_TE_DEBUG_ANNOTATIONS, &lv[0]);
        for (int i = 1; i < 81; i++)
          etch__pb_nested_begin(&b->s, ETCH_DA_ARRAY_VALUES, &lv[i]);
        etch__pb_write_varint_field(&b->s, ETCH_DA_INT_VALUE, 1);
        for (int i = 80; i >= 0; i--) etch__pb_nested_end(&b->s, &lv[i]);
        etch__pb_nested_end(&b->s, &te);
        break;
      }
      default: /* a process descriptor whose pid varint is cut short */
        etch__pb_nested_begin(&b->s, ETCH_PKT_TRACK_DESCRIPTOR, &x);
        etch__pb_write_varint_field(&b->s, ETCH_TD_UUID, 99);
        etch__pb_write_bytes_field(&b->s, ETCH_TD_PROCESS, "\x08\xff", 2);
        etch__pb_nested_end(&b->s, &x);
        break;
    }
    n++;
  }
  return n;
}

/* The race case's scribbler: a child process (the shared memory is
 * shared with it too) writing random bytes over the chunk's payload until
 * it is killed. */
static pid_t scribbler(uint8_t *at, size_t len, uint64_t rng) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) FAIL("fork: %s", strerror(errno));
  if (pid) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(0);
  for (;;) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    at[rng % len] = (uint8_t)(rng >> 32);
  }
}

enum { RANDOM_PACKETS, BAD_NESTED, RANDOM_SMB, RACES, PATCHES };

/* Writes the case's hostile chunks; the packets etchd must leave out at
 * least (and, for BAD_NESTED, exactly) into *must_refuse. */
static void hostile_write(hostile *h, int mode, long *must_refuse) {
  enum { NPKT = 8 };
  etch__pb_buf bufs[NPKT];
  etch__pb_buf *ptrs[NPKT];
  for (int i = 0; i < NPKT; i++) {
    etch__pb_buf_init(&bufs[i], 256, 0);
    ptrs[i] = &bufs[i];
  }
  *must_refuse = 0;
  if (mode == RANDOM_PACKETS || mode == PATCHES) {
    for (int round = 0; round < 60 && !h->gone; round++) {
      for (int i = 0; i < NPKT; i++) {
        etch__pb_buf_reset(&bufs[i]);
        uint8_t bytes[120];
        size_t len = 1 + rnd(h) % sizeof bytes;
        for (size_t k = 0; k < len; k++) bytes[k] = (uint8_t)rnd(h);
        etch__pb_write_bytes(&bufs[i].s, bytes, len);
      }
      h_chunk(h, ptrs, NPKT, mode == PATCHES ? 1 + (int)(rnd(h) % 4) : 0);
    }
  } else if (mode == BAD_NESTED) {
    for (int round = 0; round < 10 && !h->gone; round++) {
      int n = bad_nested(bufs, NPKT);
      h_chunk(h, ptrs, n, 0);
      *must_refuse += n;
    }
  } else if (mode == RANDOM_SMB) {
    /* A sound chunk committed first, then every byte of the shared memory
     * random (page headers too), then commits of whatever is there. */
    int n = bad_nested(bufs, NPKT);
    h_chunk(h, ptrs, n, 0);
    *must_refuse += n;
    for (size_t k = 0; k < h->smb_size; k += 8) {
      uint64_t v = rnd(h);
      memcpy(h->smb + k, &v, 8);
    }
    uint32_t npages = (uint32_t)(h->smb_size / h->page_size);
    for (int i = 0; i < 40 && !h->gone; i++) {
      h_commit(h, (uint32_t)(rnd(h) % (npages + 2)), (uint32_t)rnd(h),
               (int)(rnd(h) % 3));
      h_sync(h);
    }
  } else { /* RACES: chunks rewritten while they are committed */
    pid_t sc = scribbler(h->smb + ETCH_SMB_PAGE_HEADER + ETCH_SMB_CHUNK_HEADER,
                         h->page_size - ETCH_SMB_PAGE_HEADER -
                             ETCH_SMB_CHUNK_HEADER,
                         h->rng | 1);
    for (int round = 0; round < 60 && !h->gone; round++) {
      int n = bad_nested(bufs, NPKT);
      h_chunk(h, ptrs, n, 0);
    }
    kill(sc, SIGKILL);
    wait_exit(sc);
  }
  for (int i = 0; i < NPKT; i++) etch__pb_buf_free(&bufs[i]);
}

/* ---- the cases ---------------------------------------------------------------- */

static void run_case_on(int mode, const char *name, bool tcp) {
  svc s;
  svc_start(&s, tcp);
  char out[700], rlog[700];
  pid_t rec = record(&s, name, out, sizeof out, rlog, sizeof rlog);
  hostile h;
  h_start(&s, &h, 0x9e3779b97f4a7c15ull * (uint64_t)(mode + 1));
  pid_t prods[HONEST];
  for (int i = 0; i < HONEST; i++) {
    char pn[32];
    snprintf(pn, sizeof pn, "honest%d", i);
    prods[i] = honest(pn);
  }
  long must_refuse;
  hostile_write(&h, mode, &must_refuse);
  for (int i = 0; i < HONEST; i++) ASSERT_EQ_INT(wait_exit(prods[i]), 0);
  h_sync(&h);
  kill(rec, SIGINT);
  int rc = wait_exit(rec);
  if (rc != 0) FAIL("%s: etch record exited %d (see %s)", name, rc, rlog);
  h_close(&h);

  /* The trace reads, strict: etchd left out every packet etch would not
   * read. */
  char res[8192];
  const char *stats[] = {"stats", "--strict", out, NULL};
  if (etch_run(res, sizeof res, stats) != 0)
    FAIL("%s: etch stats --strict: %s", name, res);
  /* Every honest thread's ticks, all of them. */
  const char *q[] = {"query", "--strict", out,
                     "SELECT min(c) AS lo, max(c) AS hi, count(*) AS n FROM "
                     "(SELECT count(*) AS c FROM slice WHERE name = 'tick' "
                     "GROUP BY track_id)",
                     NULL};
  if (etch_run(res, sizeof res, q) != 0) FAIL("%s: etch query: %s", name, res);
  char want[256];
  snprintf(want, sizeof want, "%d", TICKS);
  if (!strstr(res, want)) FAIL("%s: ticks per thread: %s", name, res);
  int lo = -1, hi = -1, n = -1;
  const char *row = strrchr(res, '-');
  if (!row || sscanf(row + 1, "%d %d %d", &lo, &hi, &n) != 3)
    FAIL("%s: %s", name, res);
  ASSERT_EQ_INT(lo, TICKS);
  ASSERT_EQ_INT(hi, TICKS);
  ASSERT_EQ_INT(n, HONEST * THREADS);
  /* Nothing left for the reader to leave out; what etchd left out is
   * counted, and the producer named in its log. */
  const char *q2[] = {"query", "--strict", out,
                      "SELECT (SELECT value FROM stats WHERE name = "
                      "'malformed_packets') AS m, (SELECT value FROM stats "
                      "WHERE name = 'traced_invalid_packets') AS i",
                      NULL};
  if (etch_run(res, sizeof res, q2) != 0) FAIL("%s: etch query: %s", name, res);
  long m = -1, inv = -1;
  row = strrchr(res, '-');
  if (!row || sscanf(row + 1, "%ld %ld", &m, &inv) != 2) FAIL("%s: %s", name, res);
  ASSERT_EQ_INT(m, 0);
  if (mode == BAD_NESTED) ASSERT_EQ_INT(inv, must_refuse);
  if (inv < must_refuse)
    FAIL("%s: %ld packets left out, %ld at least expected", name, inv,
         must_refuse);
  printf("  %s%s: %d threads x %d ticks exact, %ld hostile packets left "
         "out by etchd\n",
         name, tcp ? " (over TCP)" : "", n, TICKS, inv);
  if (inv > 0 &&
      file_lines(s.log, "\"hostile\" (pid ") < 1)
    FAIL("%s: etchd's log (%s) does not name the producer", name, s.log);
  /* etch record's summary says how many. */
  if (inv > 0 && file_lines(rlog, "traced_invalid_packets") < 1)
    FAIL("%s: etch record's summary (%s) does not count them", name, rlog);
  svc_stop(&s);
}

static void run_case(int mode, const char *name) {
  run_case_on(mode, name, false);
  if (mode != RACES) run_case_on(mode, name, true);
}

TEST(hostile_random_packets) { run_case(RANDOM_PACKETS, "random_packets"); }
TEST(hostile_bad_nested_fields) { run_case(BAD_NESTED, "bad_nested"); }
TEST(hostile_random_shared_memory) { run_case(RANDOM_SMB, "random_smb"); }
TEST(hostile_chunks_rewritten_while_committed) { run_case(RACES, "races"); }
TEST(hostile_patches_at_random_offsets) { run_case(PATCHES, "patches"); }

/*
 * network_test.c - etchd as the host of several machines: producers over
 * TCP with their shared memory emulated (chunk bytes inside CommitData), a
 * relay's SetPeerIdentity and RelayPort (InitRelay, SyncClock), machine ids
 * on packets, and what a network peer cannot do (claim the host, take a
 * second identity, send a chunk that lies, hold more connections than its
 * address may). Peers speak the protocol by hand, as a relay forwards it;
 * `etch record` is the consumer; the trace file is read packet by packet
 * and its content checked exactly.
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

#include "base/clock.h"
#include "buffer/smb.h"
#include "ipc/ipc.h"
#include "pb/pb.h"
#include "proto/ipc.h"
#include "proto/perfetto.h"
#include "test.h"

extern char **environ;

static void sleep_ms(long ms) {
  struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&d, NULL);
}

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

typedef struct svc {
  pid_t pid;
  char dir[512], unix_sock[600], cons[600], log[600], tcp[64];
} svc;

/* etchd on a Unix and a TCP producer socket (port 0: the port it got is
 * read from its log), with `extra` flags. */
static void svc_start(svc *s, const char *extra1, const char *extra2) {
  snprintf(s->dir, sizeof s->dir, "%s", etch_test_tmpdir());
  snprintf(s->unix_sock, sizeof s->unix_sock, "%s/p.sock", s->dir);
  snprintf(s->cons, sizeof s->cons, "%s/c.sock", s->dir);
  snprintf(s->log, sizeof s->log, "%s/etchd.log", s->dir);
  char prod[700];
  snprintf(prod, sizeof prod, "%s,127.0.0.1:0", s->unix_sock);
  setenv("PERFETTO_PRODUCER_SOCK_NAME", prod, 1);
  setenv("PERFETTO_CONSUMER_SOCK_NAME", s->cons, 1);
  char *argv[] = {(char *)ETCHD_BIN, "-v", (char *)extra1, (char *)extra2,
                  NULL};
  s->pid = spawn(argv, s->log);
  int fd = -1;
  WAIT_UNTIL(etch__ipc_connect(s->cons, &fd) == ETCH_OK,
             "etchd did not start (see %s)", s->log);
  close(fd);
  FILE *f = fopen(s->log, "r");
  char line[2048];
  s->tcp[0] = 0;
  while (f && fgets(line, sizeof line, f)) {
    char *t = strstr(line, ",127.0.0.1:");
    if (t && strstr(line, "producers on ")) {
      sscanf(t + 1, "%63[^,]", s->tcp);
      break;
    }
  }
  if (f) fclose(f);
  ASSERT_TRUE(s->tcp[0] && strcmp(s->tcp, "127.0.0.1:0"));
}

static void svc_stop(svc *s) {
  kill(s->pid, SIGTERM);
  int rc = wait_exit(s->pid);
  if (rc != 0) FAIL("etchd ended with %d (see %s)", rc, s->log);
  if (file_lines(s->log, "runtime error") || file_lines(s->log, "Sanitizer"))
    FAIL("etchd's log (%s) has a sanitizer's report", s->log);
}

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

#define ALL_MACHINES "trace_all_machines: true\n"
#define RAW_SOURCE "data_sources { config { name: \"raw.source\" } }\n"

/* `etch record` of `cfg_text` (with a buffer and timeouts). */
static pid_t record(const svc *s, const char *cfg_text, char *out,
                    size_t cap) {
  char cfg[700], log[700];
  snprintf(cfg, sizeof cfg, "%s/net.pbtx", s->dir);
  snprintf(log, sizeof log, "%s/record.log", s->dir);
  snprintf(out, cap, "%s/net.pftrace", s->dir);
  FILE *f = fopen(cfg, "w");
  ASSERT_TRUE(f != NULL);
  fprintf(f,
          "buffers { size_kb: 8192 }\n"
          "flush_timeout_ms: 2000\ndata_source_stop_timeout_ms: 2000\n%s",
          cfg_text);
  fclose(f);
  char *argv[] = {(char *)ETCH_BIN, "record", "--config", cfg, "-o", out, NULL};
  int before = file_lines(s->log, " buffers, ");
  pid_t pid = spawn(argv, log);
  WAIT_UNTIL(file_lines(s->log, " buffers, ") > before && catches_sigint(pid),
             "no session of etch record (see %s, %s)", s->log, log);
  return pid;
}

/* ---- a peer speaking the producer protocol (or the RelayPort) by hand ---- */

typedef struct peer {
  etch_ipc_conn c;
  etch_ipc_frame bind;
  uint8_t names[4096];
  uint64_t req;
  bool emulated, started, gone;
  uint8_t *smb;
  size_t smb_size;
  uint32_t page_size;
  etch_smb m;
  uint32_t chunk_id;
} peer;

static bool p_next(peer *p, etch_ipc_frame *f) {
  for (int i = 0; i < 600; i++) {
    int n = etch__ipc_conn_next(&p->c, f);
    if (n == 1) return true;
    if (n < 0 || p->c.failed) {
      p->gone = true;
      return false;
    }
    etch__ipc_conn_wait(&p->c, 50);
  }
  FAIL("peer: nothing from the service");
}

static void p_identity(peer *p, int32_t pid, const char *hint,
                       const char *name) {
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_PEER_IDENTITY;
  f.has_pid = f.has_uid = true;
  f.pid = pid;
  f.uid = 1000;
  f.machine_id_hint.data = (const uint8_t *)hint;
  f.machine_id_hint.len = (uint32_t)strlen(hint);
  f.name.data = (const uint8_t *)name;
  f.name.len = (uint32_t)strlen(name);
  ASSERT_OK(etch__ipc_conn_send(&p->c, &f, -1));
}

static void p_connect(peer *p, const char *where) {
  memset(p, 0, sizeof *p);
  int fd;
  ASSERT_OK(etch__ipc_connect(where, &fd));
  etch__ipc_conn_init(&p->c, fd, 1 << 20);
}

static void p_bind(peer *p, const char *port) {
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_BIND;
  f.request_id = ++p->req;
  f.name.data = (const uint8_t *)port;
  f.name.len = (uint32_t)strlen(port);
  ASSERT_OK(etch__ipc_conn_send(&p->c, &f, -1));
  ASSERT_TRUE(p_next(p, &p->bind));
  ASSERT_TRUE(p->bind.kind == ETCH_IPC_BIND_REPLY && p->bind.success);
  size_t off = 0;
  for (uint32_t i = 0; i < p->bind.nmethods; i++) {
    memcpy(p->names + off, p->bind.methods[i].name.data,
           p->bind.methods[i].name.len);
    p->bind.methods[i].name.data = p->names + off;
    off += p->bind.methods[i].name.len;
  }
}

static uint64_t p_invoke(peer *p, const char *method, const etch__pb_buf *b) {
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_INVOKE;
  f.request_id = ++p->req;
  f.service_id = p->bind.service_id;
  f.method_id = etch__ipc_method_id(&p->bind, method);
  ASSERT_TRUE(f.method_id != 0);
  if (b) {
    f.body.data = etch__pb_buf_data(b);
    f.body.len = (uint32_t)etch__pb_buf_len(b);
  }
  if (etch__ipc_conn_send(&p->c, &f, -1) != ETCH_OK) p->gone = true;
  return f.request_id;
}

/* Reads frames until the reply to `req` (false: the service closed the
 * connection first), taking the commands that come meanwhile. */
static bool p_wait_reply(peer *p, uint64_t req, etch_ipc_frame *reply) {
  etch_ipc_frame g;
  while (p_next(p, &g)) {
    if (g.kind != ETCH_IPC_REPLY) continue;
    if (g.request_id == req) {
      if (reply) *reply = g;
      return true;
    }
    etch__pb_dec d, sd;
    etch__pb_field fl, sf;
    etch__pb_dec_init(&d, g.body.data, g.body.len);
    while (etch__pb_next(&d, &fl)) {
      if (fl.id == ETCH_GAC_START_DATA_SOURCE) p->started = true;
      if (fl.id != ETCH_GAC_SETUP_TRACING) continue;
      etch__pb_dec_init(&sd, fl.data, fl.len);
      while (etch__pb_next(&sd, &sf))
        if (sf.id == ETCH_GAC_SETUP_PAGE_SIZE_KB)
          p->page_size = (uint32_t)sf.u * 1024;
      int sfd = etch__ipc_conn_take_fd(&p->c);
      if (p->emulated) {
        ASSERT_EQ_INT(sfd, -1); /* nothing can pass over TCP anyway */
        continue;
      }
      ASSERT_TRUE(sfd >= 0);
      struct stat st;
      ASSERT_TRUE(fstat(sfd, &st) == 0);
      p->smb_size = (size_t)st.st_size;
      p->smb = mmap(NULL, p->smb_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                    sfd, 0);
      ASSERT_TRUE(p->smb != MAP_FAILED);
      close(sfd);
      ASSERT_OK(etch__smb_init(&p->m, p->smb, p->smb_size, p->page_size));
    }
  }
  return false;
}

static void p_sync(peer *p) {
  uint64_t r = p_invoke(p, "Sync", NULL);
  ASSERT_TRUE(p_wait_reply(p, r, NULL));
}

/* ProducerPort, InitializeConnection (whose reply must say whether the
 * memory is emulated), raw.source registered; then Sync: the commands for
 * a running session came before its reply. */
static void p_producer(peer *p, bool want_emulated) {
  p_bind(p, ETCH_IPC_PRODUCER_PORT);
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__pb_write_string_field(&b.s, ETCH_ICR_PRODUCER_NAME, "net");
  uint64_t r = p_invoke(p, "InitializeConnection", &b);
  etch_ipc_frame g;
  ASSERT_TRUE(p_wait_reply(p, r, &g));
  bool emulated = false;
  etch__pb_dec d;
  etch__pb_field fl;
  etch__pb_dec_init(&d, g.body.data, g.body.len);
  while (etch__pb_next(&d, &fl))
    if (fl.id == ETCH_ICRESP_USE_SHMEM_EMULATION) emulated = fl.u != 0;
  ASSERT_EQ_INT(emulated, want_emulated);
  p->emulated = emulated;
  p_invoke(p, "GetAsyncCommand", NULL);
  etch__pb_buf_reset(&b);
  etch__pb_nested n;
  etch__pb_nested_begin(&b.s, ETCH_RDS_DESCRIPTOR, &n);
  etch__pb_write_string_field(&b.s, ETCH_DSD_NAME, "raw.source");
  etch__pb_nested_end(&b.s, &n);
  p_invoke(p, "RegisterDataSource", &b);
  etch__pb_buf_free(&b);
  p_sync(p);
  if (p->started) {
    etch__pb_buf_init(&b, 16, 0);
    etch__pb_write_varint_field(&b.s, ETCH_RTW_WRITER_ID, 1);
    etch__pb_write_varint_field(&b.s, ETCH_RTW_TARGET_BUFFER, 1);
    p_invoke(p, "RegisterTraceWriter", &b);
    etch__pb_buf_free(&b);
  }
}

/* A packet: for_testing with `seq` inside (and machine_id when `claim`). */
static void packet(etch__pb_buf *b, uint32_t seq, bool claim) {
  etch__pb_buf_reset(b);
  etch__pb_write_varint_field(&b->s, ETCH_PKT_TIMESTAMP, 1000 + seq);
  etch__pb_nested t;
  etch__pb_nested_begin(&b->s, ETCH_PKT_FOR_TESTING, &t);
  etch__pb_write_varint_field(&b->s, 1, seq); /* TestEvent.seq_value */
  etch__pb_nested_end(&b->s, &t);
  if (claim) etch__pb_write_varint_field(&b->s, ETCH_PKT_MACHINE_ID, 1);
}

/* A chunk of writer 1 with `n` packets from `first`: its bytes (header
 * and fragments) in out, `size` of them. */
static void make_chunk(uint8_t *out, size_t size, uint32_t id, uint32_t first,
                       int n, bool claim) {
  memset(out, 0, size);
  uint8_t *q = out + ETCH_SMB_CHUNK_HEADER;
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  for (int i = 0; i < n; i++) {
    packet(&b, first + (uint32_t)i, claim);
    size_t len = etch__pb_buf_len(&b);
    ASSERT_TRUE((size_t)(q - out) + 4 + len <= size);
    etch__pb_put_redundant4(q, (uint32_t)len);
    memcpy(q + 4, etch__pb_buf_data(&b), len);
    q += 4 + len;
  }
  etch__pb_buf_free(&b);
  etch_smb_chunk_header h = {id, 1, (uint16_t)n};
  memcpy(out, &h, sizeof h);
}

/* CommitData of one chunk: its bytes inside (emulated), else through the
 * shared memory (page 0, chunk 0); then Sync. */
static void p_chunk(peer *p, uint32_t first, int n, bool claim,
                    size_t bytes) {
  etch__pb_buf b;
  etch__pb_buf_init(&b, 256, 0);
  etch__pb_nested m;
  uint32_t id = p->chunk_id++;
  etch__pb_nested_begin(&b.s, ETCH_CDR_CHUNKS_TO_MOVE, &m);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_PAGE, 0);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_CHUNK, 0);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_TARGET_BUFFER, 1);
  if (p->emulated) {
    uint8_t *c = (uint8_t *)calloc(1, bytes);
    ASSERT_TRUE(c != NULL);
    make_chunk(c, bytes < 4096 ? bytes : 4096, id, first, n, claim);
    etch__pb_write_bytes_field(&b.s, ETCH_CDR_MOVE_DATA, c, bytes);
    free(c);
  } else {
    if (etch__smb_bitmap_layout(etch__smb_bitmap(&p->m, 0)) == 0)
      etch__smb_try_partition(&p->m, 0, ETCH_SMB_DIV1);
    uint8_t *c = etch__smb_try_acquire_write(&p->m, 0, 0, 1, id, 0);
    ASSERT_TRUE(c != NULL);
    make_chunk(c, etch__smb_chunk_size(p->page_size, ETCH_SMB_DIV1), id,
               first, n, claim);
    etch__smb_release_complete(&p->m, 0, 0);
  }
  etch__pb_nested_end(&b.s, &m);
  p_invoke(p, "CommitData", &b);
  etch__pb_buf_free(&b);
}

static void p_close(peer *p) {
  if (p->smb) munmap(p->smb, p->smb_size);
  etch__ipc_conn_close(&p->c);
}

/* ---- reading the trace ---- */

typedef struct seen {
  int packets[3];       /* of the relayed producer, the Unix one, other */
  int claimed;          /* packets that kept a producer's machine_id */
  uint64_t pid_of[3];
  uint64_t machine_of[3];
  int sysinfo;          /* SystemInfo packets of the machine */
  uint64_t sysinfo_machine;
  int syncs;            /* SyncedClocks entries */
  uint64_t client_boot[4], host_boot[4];
  uint64_t invalid;
} seen;

static void read_trace(const char *path, pid_t unix_pid, seen *w) {
  memset(w, 0, sizeof *w);
  FILE *f = fopen(path, "rb");
  ASSERT_TRUE(f != NULL);
  static uint8_t buf[8 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  etch__pb_dec d, pk, x, y, z, c;
  etch__pb_field fl, g, h, k, l, m;
  etch__pb_dec_init(&d, buf, n);
  while (etch__pb_next(&d, &fl)) {
    if (fl.id != 1 || fl.wt != 2) continue;
    uint64_t pid = 0, machine = 0, seqv = 0;
    bool testing = false, sys = false, rcs = false;
    etch__pb_dec_init(&pk, fl.data, fl.len);
    while (etch__pb_next(&pk, &g)) {
      if (g.id == ETCH_PKT_TRUSTED_PID) pid = g.u;
      if (g.id == ETCH_PKT_MACHINE_ID) {
        if (machine) w->claimed++;
        machine = g.u;
      }
      if (g.id == ETCH_PKT_FOR_TESTING) {
        testing = true;
        etch__pb_dec_init(&x, g.data, g.len);
        while (etch__pb_next(&x, &h))
          if (h.id == 1) seqv = h.u;
      }
      if (g.id == ETCH_PKT_SYSTEM_INFO) sys = true;
      if (g.id == ETCH_PKT_TRACE_STATS) {
        etch__pb_dec_init(&x, g.data, g.len);
        while (etch__pb_next(&x, &h))
          if (h.id == ETCH_TS_INVALID_PACKETS) w->invalid = h.u;
      }
      if (g.id == ETCH_PKT_REMOTE_CLOCK_SYNC) {
        rcs = true;
        etch__pb_dec_init(&x, g.data, g.len);
        while (etch__pb_next(&x, &h)) { /* synced_clocks */
          etch__pb_dec_init(&y, h.data, h.len);
          while (etch__pb_next(&y, &k)) { /* client 2, host 3 */
            etch__pb_dec_init(&z, k.data, k.len);
            while (etch__pb_next(&z, &l)) { /* clocks */
              uint64_t id = 0, ts = 0;
              etch__pb_dec_init(&c, l.data, l.len);
              while (etch__pb_next(&c, &m)) {
                if (m.id == 1) id = m.u;
                if (m.id == 2) ts = m.u;
              }
              if (id == 6 && w->syncs < 4) {
                if (k.id == 2) w->client_boot[w->syncs] = ts;
                if (k.id == 3) w->host_boot[w->syncs] = ts;
              }
            }
          }
          w->syncs++;
        }
      }
    }
    (void)seqv;
    if (sys) {
      w->sysinfo++;
      w->sysinfo_machine = machine;
    }
    if (rcs || !testing) continue;
    int who = pid == 4242 ? 0 : pid == (uint64_t)unix_pid ? 1 : 2;
    w->packets[who]++;
    w->pid_of[who] = pid;
    w->machine_of[who] = machine;
  }
}

/* The MachineID of a hint: FNV-1a 64 cut to 32 bits, as Perfetto's. */
static uint32_t machine_id(const char *hint) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char *c = hint; *c; c++) {
    h ^= (uint8_t)*c;
    h *= 0x100000001b3ull;
  }
  return (uint32_t)h;
}

/* ---- cases ---- */

/*
 * A relay's two connections over TCP (the RelayPort's with the machine's
 * SystemInfo and two SyncClock rounds whose BOOTTIME is 5 s ahead of the
 * host's; a producer's with a chunk of 20 packets sent inside CommitData),
 * and a Unix producer that says SetPeerIdentity too (ignored): the trace
 * has the relayed packets with the relay's pid on the machine of the hint,
 * the Unix ones with its own pid on none, the SystemInfo and the clock
 * syncs (client readings exactly as sent, host readings the host's), and
 * the one packet that claimed a machine left out and counted.
 */
TEST(network_relay_machine_and_emulated_chunks) {
  svc s;
  svc_start(&s, "--enable-relay-endpoint", NULL);
  char out[700];
  pid_t rec = record(&s, RAW_SOURCE ALL_MACHINES, out, sizeof out);

  peer relay;
  p_connect(&relay, s.tcp);
  p_identity(&relay, 99, "boot-A", "remote1");
  p_bind(&relay, ETCH_IPC_RELAY_PORT);
  etch__pb_buf b;
  etch__pb_buf_init(&b, 256, 0);
  etch__pb_nested si, un, ck;
  etch__pb_nested_begin(&b.s, ETCH_IRR_SYSTEM_INFO, &si);
  etch__pb_nested_begin(&b.s, 1, &un);
  etch__pb_write_string_field(&b.s, 1, "Linux");
  etch__pb_write_string_field(&b.s, 4, "aarch64");
  etch__pb_nested_end(&b.s, &un);
  etch__pb_nested_end(&b.s, &si);
  uint64_t r = p_invoke(&relay, "InitRelay", &b);
  ASSERT_TRUE(p_wait_reply(&relay, r, NULL));
  uint64_t before = etch__clock_ns(CLOCK_BOOTTIME);
  uint64_t sent[2];
  for (int round = 0; round < 2; round++) {
    etch__pb_buf_reset(&b);
    etch__pb_write_varint_field(&b.s, ETCH_SCR_PHASE,
                                round ? ETCH_SCR_PHASE_UPDATE
                                      : ETCH_SCR_PHASE_PING);
    sent[round] = etch__clock_ns(CLOCK_BOOTTIME) + 5000000000ull;
    etch__pb_nested_begin(&b.s, ETCH_SCR_CLOCKS, &ck);
    etch__pb_write_varint_field(&b.s, ETCH_SCR_CLOCK_ID, 6);
    etch__pb_write_varint_field(&b.s, ETCH_SCR_CLOCK_TIMESTAMP, sent[round]);
    etch__pb_nested_end(&b.s, &ck);
    etch__pb_nested_begin(&b.s, ETCH_SCR_CLOCKS, &ck); /* not a clock */
    etch__pb_write_varint_field(&b.s, ETCH_SCR_CLOCK_ID, 77);
    etch__pb_write_varint_field(&b.s, ETCH_SCR_CLOCK_TIMESTAMP, 1);
    etch__pb_nested_end(&b.s, &ck);
    r = p_invoke(&relay, "SyncClock", &b);
    ASSERT_TRUE(p_wait_reply(&relay, r, NULL));
  }
  uint64_t after = etch__clock_ns(CLOCK_BOOTTIME);
  etch__pb_buf_free(&b);

  peer rp; /* the relayed producer: a second identity is ignored */
  p_connect(&rp, s.tcp);
  p_identity(&rp, 4242, "boot-A", "remote1");
  p_identity(&rp, 1, "boot-B", "other");
  p_producer(&rp, true);
  ASSERT_TRUE(rp.started);
  p_chunk(&rp, 0, 20, false, 4096);
  p_chunk(&rp, 100, 1, true, 4096); /* claims a machine: left out */
  p_sync(&rp);

  peer up; /* over the Unix socket: its identity is the kernel's */
  p_connect(&up, s.unix_sock);
  p_identity(&up, 4242, "boot-A", "remote1");
  p_producer(&up, false);
  ASSERT_TRUE(up.started && up.smb);
  p_chunk(&up, 0, 7, false, 0);
  p_sync(&up);

  peer liar; /* a chunk larger than any page: it goes, nothing else */
  p_connect(&liar, s.tcp);
  p_producer(&liar, true);
  p_chunk(&liar, 0, 1, false, 70000);
  ASSERT_FALSE(p_wait_reply(&liar, liar.req, NULL));
  WAIT_UNTIL(file_lines(s.log, "a chunk of 70000 bytes inside CommitData"),
             "the lying chunk was not refused (see %s)", s.log);

  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  p_close(&rp);
  p_close(&up);
  p_close(&relay);
  p_close(&liar);
  seen w;
  read_trace(out, getpid(), &w);
  ASSERT_EQ_INT(w.packets[0], 20);
  ASSERT_EQ_U64(w.pid_of[0], 4242);
  ASSERT_EQ_U64(w.machine_of[0], machine_id("boot-A"));
  ASSERT_EQ_INT(w.packets[1], 7);
  ASSERT_EQ_U64(w.machine_of[1], 0);
  ASSERT_EQ_INT(w.packets[2], 0);
  ASSERT_EQ_INT(w.claimed, 0);
  ASSERT_EQ_U64(w.invalid, 1);
  ASSERT_EQ_INT(w.sysinfo, 1);
  ASSERT_EQ_U64(w.sysinfo_machine, machine_id("boot-A"));
  ASSERT_EQ_INT(w.syncs, 2);
  for (int i = 0; i < 2; i++) {
    ASSERT_EQ_U64(w.client_boot[i], sent[i]);
    ASSERT_TRUE(w.host_boot[i] >= before && w.host_boot[i] <= after);
  }
  svc_stop(&s);
}

/* Without trace_all_machines only the host's producers record: a network
 * producer's data source is not started (its commands would have come
 * before the reply to its Sync). */
TEST(network_other_machines_only_when_asked) {
  svc s;
  svc_start(&s, NULL, NULL);
  char out[700];
  pid_t rec = record(&s, RAW_SOURCE, out, sizeof out);
  peer np, up;
  p_connect(&np, s.tcp);
  p_producer(&np, true);
  ASSERT_FALSE(np.started);
  p_connect(&up, s.unix_sock);
  p_producer(&up, false);
  ASSERT_TRUE(up.started);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  p_close(&np);
  p_close(&up);
  svc_stop(&s);
}

/* A data source's machine_name_filter picks the machines by name: the
 * relayed producer of "remote1" records, the Unix one (the host, named by
 * PERFETTO_MACHINE_NAME) and one of "remote2" do not. */
TEST(network_machine_name_filter) {
  setenv("PERFETTO_MACHINE_NAME", "the-host", 1);
  svc s;
  svc_start(&s, NULL, NULL);
  unsetenv("PERFETTO_MACHINE_NAME");
  char out[700];
  pid_t rec = record(&s,
                     "data_sources { config { name: \"raw.source\" } "
                     "machine_name_filter: \"remote1\" }\n",
                     out, sizeof out);
  peer a, b, up;
  p_connect(&a, s.tcp);
  p_identity(&a, 10, "boot-1", "remote1");
  p_producer(&a, true);
  ASSERT_TRUE(a.started);
  p_connect(&b, s.tcp);
  p_identity(&b, 11, "boot-2", "remote2");
  p_producer(&b, true);
  ASSERT_FALSE(b.started);
  p_connect(&up, s.unix_sock);
  p_producer(&up, false);
  ASSERT_FALSE(up.started);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  p_close(&a);
  p_close(&b);
  p_close(&up);
  svc_stop(&s);
}

/* Over --net-mb-per-s, a network producer is read later, not cut: 2.4 MiB
 * of chunks at 1 MiB a second all arrive, and etchd says it waited. */
TEST(network_rate_limit) {
  svc s;
  svc_start(&s, "--net-mb-per-s", "1");
  char out[700];
  pid_t rec = record(&s, RAW_SOURCE ALL_MACHINES, out, sizeof out);
  peer np;
  p_connect(&np, s.tcp);
  p_producer(&np, true);
  ASSERT_TRUE(np.started);
  for (int i = 0; i < 600; i++) {
    p_chunk(&np, (uint32_t)i, 1, false, 4096);
    if (i % 50 == 49) p_sync(&np);
  }
  p_sync(&np);
  ASSERT_FALSE(np.gone);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  p_close(&np);
  seen w;
  read_trace(out, getpid(), &w);
  ASSERT_EQ_INT(w.packets[2], 600);
  ASSERT_TRUE(file_lines(s.log, "sends more than 1048576 bytes a second") >=
              1);
  svc_stop(&s);
}

/* A network address holds at most --max-conns-per-addr connections: the
 * next one is closed at once, and etchd says so. */
TEST(network_connections_per_address) {
  svc s;
  svc_start(&s, "--max-conns-per-addr", "2");
  peer a, b, c;
  p_connect(&a, s.tcp);
  p_bind(&a, ETCH_IPC_PRODUCER_PORT);
  p_connect(&b, s.tcp);
  p_bind(&b, ETCH_IPC_PRODUCER_PORT);
  p_connect(&c, s.tcp);
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_BIND;
  f.request_id = 1;
  f.name.data = (const uint8_t *)"ProducerPort";
  f.name.len = 12;
  etch__ipc_conn_send(&c.c, &f, -1);
  ASSERT_FALSE(p_next(&c, &f));
  ASSERT_EQ_INT(file_lines(s.log, "its address has 2 connections"), 1);
  p_close(&a);
  p_close(&b);
  p_close(&c);
  svc_stop(&s);
}

/* A TCP name other machines can reach is listened on only with
 * --allow-remote, and then etchd says it is unauthenticated. */
TEST(network_remote_address_needs_allow_remote) {
  char log[700];
  snprintf(log, sizeof log, "%s/refused.log", etch_test_tmpdir());
  char cons[700];
  snprintf(cons, sizeof cons, "%s/c2.sock", etch_test_tmpdir());
  char *argv[] = {(char *)ETCHD_BIN, "--producer-socket", "0.0.0.0:0",
                  "--consumer-socket", cons, NULL};
  ASSERT_EQ_INT(wait_exit(spawn(argv, log)), 1);
  ASSERT_EQ_INT(file_lines(log, "only with --allow-remote"), 1);
  char *argv2[] = {(char *)ETCHD_BIN, "--producer-socket", "0.0.0.0:0",
                   "--consumer-socket", cons, "--allow-remote", NULL};
  pid_t pid = spawn(argv2, log);
  WAIT_UNTIL(file_lines(log, "producers on 0.0.0.0:") ||
                 file_lines(log, "producers on "),
             "etchd did not start (see %s)", log);
  ASSERT_EQ_INT(file_lines(log, "reachable from the network and "
                                "unauthenticated"),
                1);
  kill(pid, SIGTERM);
  ASSERT_EQ_INT(wait_exit(pid), 0);
}

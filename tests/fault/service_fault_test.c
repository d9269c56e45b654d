/*
 * service_fault_test.c - etchd's service under allocation failure, in
 * process: etch__service_new, then a producer that registers two data
 * sources and a consumer that enables a session of three buffers and
 * three data sources (one no producer has), the producer set up and
 * started, a chunk committed into its buffer, the session disabled, read
 * and freed, both peers gone; each allocation of the service failing in
 * turn. The peers are written by hand on etch's IPC and run in this
 * thread between the service's rounds with the faults held, so only the
 * service's allocations count.
 *
 * A run either sees everything it should (the same text as without a
 * fault, or packets missing that the trace's TraceStats count discarded)
 * or fails visibly: the service answers with an error that says "out of
 * memory", refuses a call, or closes a peer's connection, or a round of
 * its loop returns ETCH_ENOMEM (etchd's loop ends there), with "out of
 * memory" in the error slot. A peer left waiting, never answered, fails
 * the test (that is a hang). After a failed run the same service, with
 * no fault, runs the whole scenario again exactly (unless its loop
 * ended); then it is freed and the heap holds what it held before.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "buffer/smb.h"
#include "fault.h"
#include "ipc/ipc.h"
#include "pb/pb.h"
#include "proto/ipc.h"
#include "proto/perfetto.h"
#include "proto/trace_config.h"
#include "service/service_int.h"
#include "test.h"

static const char config_text[] =
    "buffers { size_kb: 64 }\n"
    "buffers { size_kb: 128 fill_policy: DISCARD }\n"
    "buffers { size_kb: 32 }\n"
    "data_sources { config { name: \"fault.a\" target_buffer: 0 } }\n"
    "data_sources { config { name: \"fault.b\" target_buffer: 1 } }\n"
    "data_sources { config { name: \"fault.none\" target_buffer: 2 } }\n";

/* ---- the service's rounds, and the peers' side -------------------- */

typedef struct run {
  etch_service *s;
  bool failed;     /* a visible failure was seen */
  bool dead;       /* a round failed: etchd's loop would end there */
  bool lifted;     /* no fault in the service's rounds either */
  bool into_file;  /* write_into_file: the trace in a file, not read */
  char why[640];   /* what it was */
  fault_str text;  /* what the peers saw */
} run;

/* A visible failure: the service's word for it must say out of memory. */
static void failed(run *r, const char *what, const char *msg) {
  if (r->failed) return;
  r->failed = true;
  snprintf(r->why, sizeof r->why, "%s: %s", what, msg);
}

/* One round of the service (its allocations count), with none waiting. */
static void round_(run *r) {
  if (!r->lifted) etch__fault_hold(false);
  int rc = etch__service_poll(r->s, 0);
  etch__fault_hold(true);
  if (rc) {
    r->dead = true;
    failed(r, "a round of the service", etch_last_error());
  }
}

typedef struct peer {
  etch_ipc_conn c;
  etch_ipc_frame bind;
  uint8_t names[4096];
  uint64_t req;
  bool gone;
} peer;

/* The next frame from the service: 1, or 0 when the service closed the
 * connection (a visible failure) or gave nothing after its rounds (it
 * never will: the test fails). */
static int next_frame(run *r, peer *p, etch_ipc_frame *f) {
  if (p->gone) return 0;
  for (int i = 0; i < 64; i++) {
    int n = etch__ipc_conn_next(&p->c, f);
    if (n == 1) return 1;
    if (n < 0 || p->c.failed) {
      p->gone = true;
      failed(r, "the service closed a connection", etch_last_error());
      return 0;
    }
    round_(r);
    if (r->dead) return 0;
    etch__ipc_conn_wait(&p->c, 0);
  }
  FAIL("%s: the service does not answer", fault_now);
}

static void invoke(run *r, peer *p, const char *method, const etch__pb_buf *b,
                   int fd) {
  if (p->gone) return;
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_INVOKE;
  f.request_id = ++p->req;
  f.service_id = p->bind.service_id;
  f.method_id = etch__ipc_method_id(&p->bind, method);
  if (!f.method_id) FAIL("no method %s", method);
  if (b) {
    f.body.data = etch__pb_buf_data(b);
    f.body.len = (uint32_t)etch__pb_buf_len(b);
  }
  if (etch__ipc_conn_send(&p->c, &f, fd) || etch__ipc_conn_flush(&p->c)) {
    p->gone = true;
    failed(r, "the service closed a connection", p->c.err);
  }
}

/* The reply to the last call, past others. */
static bool reply(run *r, peer *p, etch_ipc_frame *f) {
  do {
    if (!next_frame(r, p, f)) return false;
  } while (!(f->kind == ETCH_IPC_REPLY && f->request_id == p->req));
  return true;
}

/* Whether reply g carries an error in field `field`: a visible failure. */
static bool refused(run *r, const etch_ipc_frame *g, uint32_t field,
                    const char *what) {
  etch__pb_dec d;
  etch__pb_field fl;
  etch__pb_dec_init(&d, g->body.data, g->body.len);
  while (etch__pb_next(&d, &fl))
    if (fl.id == field && fl.wt == 2) {
      char e[300];
      snprintf(e, sizeof e, "%.*s", (int)fl.len, (const char *)fl.data);
      failed(r, what, e);
      return true;
    }
  return false;
}

static bool open_peer(run *r, peer *p, const char *path, const char *port) {
  memset(p, 0, sizeof *p);
  int fd;
  if (etch__ipc_connect(path, &fd)) FAIL("connect: %s", etch_last_error());
  etch__ipc_conn_init(&p->c, fd, 1 << 20);
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_BIND;
  f.request_id = ++p->req;
  f.name.data = (const uint8_t *)port;
  f.name.len = (uint32_t)strlen(port);
  if (etch__ipc_conn_send(&p->c, &f, -1)) FAIL("send: %s", p->c.err);
  if (!next_frame(r, p, &p->bind)) return false;
  if (p->bind.kind != ETCH_IPC_BIND_REPLY || !p->bind.success)
    FAIL("%s: bind refused", fault_now);
  size_t off = 0;
  for (uint32_t i = 0; i < p->bind.nmethods; i++) {
    etch_ipc_bytes *nm = &p->bind.methods[i].name;
    memcpy(p->names + off, nm->data, nm->len);
    nm->data = p->names + off;
    off += nm->len;
  }
  return true;
}

/* ---- the scenario ------------------------------------------------------ */

/* Writes chunk 0 of page 0 with n testing packets "pkt-I" from writer 1. */
static void write_chunk(uint8_t *smb, uint64_t size, uint32_t page_size,
                        int n) {
  etch_smb m;
  ASSERT_OK(etch__smb_init(&m, smb, size, page_size));
  ASSERT_TRUE(etch__smb_try_partition(&m, 0, ETCH_SMB_DIV1));
  uint8_t *c = etch__smb_try_acquire_write(&m, 0, 0, 1, 0, 0);
  ASSERT_TRUE(c != NULL);
  uint8_t *q = c + ETCH_SMB_CHUNK_HEADER;
  for (int i = 0; i < n; i++) {
    char t[16];
    int tl = snprintf(t, sizeof t, "pkt-%d", i);
    etch__pb_put_redundant4(q, (uint32_t)(3 + tl));
    q += 4;
    *q++ = 0xa2; /* field 900 (for_testing), LEN */
    *q++ = 0x38;
    *q++ = (uint8_t)tl;
    memcpy(q, t, (size_t)tl);
    q += tl;
  }
  etch_smb_chunk_header *h = (etch_smb_chunk_header *)c;
  __atomic_store_n(&h->packets, (uint16_t)n, __ATOMIC_RELEASE);
  ASSERT_TRUE(etch__smb_release_complete(&m, 0, 0));
}

/* One packet of the trace read: its testing payload, and the chunks its
 * TraceStats say were discarded. */
static void read_packet(run *r, const uint8_t *d, size_t n,
                        uint64_t *discarded) {
  etch__pb_dec dec;
  etch__pb_field fl;
  etch__pb_dec_init(&dec, d, n);
  while (etch__pb_next(&dec, &fl)) {
    if (fl.id == ETCH_PKT_FOR_TESTING && fl.wt == 2)
      fault_printf(&r->text, "read %.*s\n", (int)fl.len,
                   (const char *)fl.data);
    if (fl.id != ETCH_PKT_TRACE_STATS || fl.wt != 2) continue;
    etch__pb_dec ts;
    etch__pb_field tf;
    etch__pb_dec_init(&ts, fl.data, fl.len);
    while (etch__pb_next(&ts, &tf)) {
      if (tf.id != ETCH_TS_BUFFER_STATS || tf.wt != 2) continue;
      etch__pb_dec bs;
      etch__pb_field bf;
      etch__pb_dec_init(&bs, tf.data, tf.len);
      while (etch__pb_next(&bs, &bf))
        if (bf.id == ETCH_BS_CHUNKS_DISCARDED) *discarded += bf.u;
    }
  }
}

/* The producer's commands until both its sources started: into the text,
 * with the target buffer of "fault.a" and the shared memory mapped. */
static void producer_commands(run *r, peer *p, uint32_t *buf_a,
                              uint8_t **smb, uint64_t *smb_size,
                              uint32_t *page_kb) {
  int started = 0;
  while (started < 2) {
    etch_ipc_frame g;
    if (!next_frame(r, p, &g)) return;
    if (g.kind != ETCH_IPC_REPLY || !g.has_more) continue;
    etch__pb_dec d;
    etch__pb_field fl;
    etch__pb_dec_init(&d, g.body.data, g.body.len);
    while (etch__pb_next(&d, &fl)) {
      etch__pb_dec sd;
      etch__pb_field sf;
      etch__pb_dec_init(&sd, fl.data, fl.len);
      if (fl.id == ETCH_GAC_SETUP_TRACING) {
        while (etch__pb_next(&sd, &sf))
          if (sf.id == ETCH_GAC_SETUP_PAGE_SIZE_KB) *page_kb = (uint32_t)sf.u;
        int fd = etch__ipc_conn_take_fd(&p->c);
        ASSERT_TRUE(fd >= 0);
        struct stat st;
        ASSERT_TRUE(fstat(fd, &st) == 0);
        *smb_size = (uint64_t)st.st_size;
        *smb = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                    MAP_SHARED, fd, 0);
        ASSERT_TRUE(*smb != MAP_FAILED);
        close(fd);
        fault_printf(&r->text, "producer: SetupTracing\n");
      } else if (fl.id == ETCH_GAC_START_DATA_SOURCE ||
                 fl.id == ETCH_GAC_SETUP_DATA_SOURCE) {
        char name[64] = "";
        uint64_t target = 0;
        while (etch__pb_next(&sd, &sf)) {
          if (sf.id != ETCH_GAC_DS_CONFIG) continue;
          etch__pb_dec cd;
          etch__pb_field cf;
          etch__pb_dec_init(&cd, sf.data, sf.len);
          while (etch__pb_next(&cd, &cf)) {
            if (cf.id == ETCH_DSC_NAME)
              snprintf(name, sizeof name, "%.*s", (int)cf.len,
                       (const char *)cf.data);
            if (cf.id == ETCH_DSC_TARGET_BUFFER) target = cf.u;
          }
        }
        bool start = fl.id == ETCH_GAC_START_DATA_SOURCE;
        fault_printf(&r->text, "producer: %s %s\n",
                     start ? "StartDataSource" : "SetupDataSource", name);
        if (!strcmp(name, "fault.a")) *buf_a = (uint32_t)target;
        started += start;
      } else {
        fault_printf(&r->text, "producer: command %u\n", fl.id);
      }
    }
  }
}

/* Answers what the service asked the producer since: a flush (with a
 * CommitData naming it), a stop (noted). False when it closed. */
static bool producer_answers(run *r, peer *p) {
  etch_ipc_frame g;
  int n;
  while ((n = etch__ipc_conn_next(&p->c, &g)) == 1) {
    if (g.kind != ETCH_IPC_REPLY || !g.has_more) continue;
    etch__pb_dec d;
    etch__pb_field fl;
    etch__pb_dec_init(&d, g.body.data, g.body.len);
    while (etch__pb_next(&d, &fl)) {
      etch__pb_dec sd;
      etch__pb_field sf;
      etch__pb_dec_init(&sd, fl.data, fl.len);
      if (fl.id == ETCH_GAC_FLUSH) {
        uint64_t id = 0;
        while (etch__pb_next(&sd, &sf))
          if (sf.id == ETCH_GAC_FLUSH_REQUEST_ID) id = sf.u;
        etch__pb_buf b;
        etch__pb_buf_init(&b, 32, 0);
        etch__pb_write_varint_field(&b.s, ETCH_CDR_FLUSH_REQUEST_ID, id);
        invoke(r, p, "CommitData", &b, -1);
        etch__pb_buf_free(&b);
        fault_printf(&r->text, "producer: Flush\n");
      } else if (fl.id == ETCH_GAC_STOP_DATA_SOURCE) {
        fault_printf(&r->text, "producer: StopDataSource\n");
      } else {
        fault_printf(&r->text, "producer: command %u\n", fl.id);
      }
    }
  }
  if (n < 0 || p->c.failed) {
    p->gone = true;
    failed(r, "the service closed a connection", etch_last_error());
    return false;
  }
  return true;
}

static void scenario(run *r, const char *dir) {
  char ppath[600], cpath[600];
  snprintf(ppath, sizeof ppath, "%s/p.sock", dir);
  snprintf(cpath, sizeof cpath, "%s/c.sock", dir);
  etch__fault_hold(true);
  etch__pb_buf b;
  etch__pb_buf_init(&b, 256, 0);
  peer prod, cons;
  etch_ipc_frame g;
  uint8_t *smb = NULL;
  uint64_t smb_size = 0;
  uint32_t page_kb = 0, buf_a = 0;
  bool have_cons = false;
  char file[700];
  int out_fd = -1;
  if (!open_peer(r, &prod, ppath, "ProducerPort")) goto out;
  etch__pb_write_string_field(&b.s, ETCH_ICR_PRODUCER_NAME, "faulty");
  invoke(r, &prod, "InitializeConnection", &b, -1);
  if (!reply(r, &prod, &g)) goto out;
  fault_printf(&r->text, "InitializeConnection %d\n", g.success);
  static const char *const sources[] = {"fault.a", "fault.b"};
  for (int i = 0; i < 2; i++) {
    etch__pb_buf_reset(&b);
    etch__pb_nested nd;
    etch__pb_nested_begin(&b.s, ETCH_RDS_DESCRIPTOR, &nd);
    etch__pb_write_string_field(&b.s, ETCH_DSD_NAME, sources[i]);
    etch__pb_nested_end(&b.s, &nd);
    invoke(r, &prod, "RegisterDataSource", &b, -1);
    if (!reply(r, &prod, &g)) goto out;
    if (refused(r, &g, ETCH_RDS_RESP_ERROR, "RegisterDataSource refused"))
      goto out;
    fault_printf(&r->text, "RegisterDataSource %s %d\n", sources[i],
                 g.success);
  }
  invoke(r, &prod, "GetAsyncCommand", NULL, -1);
  uint64_t async_req = prod.req;
  (void)async_req;

  have_cons = true;
  if (!open_peer(r, &cons, cpath, "ConsumerPort")) goto out;
  etch__pb_buf cfg;
  etch__pb_buf_init(&cfg, 256, 0);
  ASSERT_OK(etch__trace_config_text_to_binary(config_text,
                                              strlen(config_text), &cfg));
  if (r->into_file) {
    static const char more[] = "write_into_file: true\n";
    ASSERT_OK(etch__trace_config_text_to_binary(more, strlen(more), &cfg));
    snprintf(file, sizeof file, "%s/into.pftrace", dir);
    out_fd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_TRUE(out_fd >= 0);
  }
  etch__pb_buf_reset(&b);
  etch__pb_write_bytes_field(&b.s, ETCH_ETR_TRACE_CONFIG,
                             etch__pb_buf_data(&cfg), etch__pb_buf_len(&cfg));
  etch__pb_buf_free(&cfg);
  invoke(r, &cons, "EnableTracing", &b, out_fd);
  if (out_fd >= 0) close(out_fd);
  uint64_t enable_req = cons.req;
  /* Answered now only when refused. */
  round_(r);
  if (r->dead) goto out;
  etch__ipc_conn_wait(&cons.c, 0);
  int got = etch__ipc_conn_next(&cons.c, &g);
  if (got < 0 || (got == 0 && cons.c.failed)) {
    cons.gone = true;
    failed(r, "the service closed a connection", etch_last_error());
    goto out;
  }
  if (got == 1) {
    etch__pb_dec d;
    etch__pb_field fl;
    etch__pb_dec_init(&d, g.body.data, g.body.len);
    while (etch__pb_next(&d, &fl))
      if (fl.id == ETCH_ETRESP_ERROR) {
        char e[300];
        snprintf(e, sizeof e, "%.*s", (int)fl.len, (const char *)fl.data);
        failed(r, "EnableTracing refused", e);
      }
    if (!r->failed) FAIL("%s: EnableTracing answered at once", fault_now);
    goto out;
  }
  producer_commands(r, &prod, &buf_a, &smb, &smb_size, &page_kb);
  if (r->failed) goto out;
  fault_printf(&r->text, "page %u KiB, fault.a's buffer %s\n", page_kb,
               buf_a ? "given" : "none");

  /* A writer, a chunk of three packets into fault.a's buffer. */
  etch__pb_buf_reset(&b);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_WRITER_ID, 1);
  etch__pb_write_varint_field(&b.s, ETCH_RTW_TARGET_BUFFER, buf_a);
  invoke(r, &prod, "RegisterTraceWriter", &b, -1);
  if (!reply(r, &prod, &g)) goto out;
  write_chunk(smb, smb_size, page_kb * 1024, 3);
  etch__pb_buf_reset(&b);
  etch__pb_nested m;
  etch__pb_nested_begin(&b.s, ETCH_CDR_CHUNKS_TO_MOVE, &m);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_PAGE, 0);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_CHUNK, 0);
  etch__pb_write_varint_field(&b.s, ETCH_CDR_MOVE_TARGET_BUFFER, buf_a);
  etch__pb_nested_end(&b.s, &m);
  invoke(r, &prod, "CommitData", &b, -1);
  if (!reply(r, &prod, &g)) goto out;
  fault_printf(&r->text, "CommitData %d\n", g.success);

  /* Disabled: the producer flushed and its sources stopped, the
   * session's end answered. */
  invoke(r, &cons, "DisableTracing", NULL, -1);
  for (int i = 0;; i++) {
    if (i == 64) FAIL("%s: the session does not end", fault_now);
    if (!producer_answers(r, &prod)) goto out;
    int n = etch__ipc_conn_next(&cons.c, &g);
    if (n == 1 && g.kind == ETCH_IPC_REPLY && g.request_id == enable_req)
      break;
    if (n == 1) continue;
    if (n < 0 || cons.c.failed) {
      cons.gone = true;
      failed(r, "the service closed a connection", etch_last_error());
      goto out;
    }
    round_(r);
    if (r->dead) goto out;
    etch__ipc_conn_wait(&cons.c, 0);
    etch__ipc_conn_wait(&prod.c, 0);
  }
  {
    etch__pb_dec d;
    etch__pb_field fl;
    etch__pb_dec_init(&d, g.body.data, g.body.len);
    while (etch__pb_next(&d, &fl)) {
      if (fl.id == ETCH_ETRESP_DISABLED)
        fault_printf(&r->text, "session ended: disabled %d\n", (int)fl.u);
      if (fl.id == ETCH_ETRESP_ERROR) {
        char e[300];
        snprintf(e, sizeof e, "%.*s", (int)fl.len, (const char *)fl.data);
        failed(r, "the session ended with an error", e);
        goto out;
      }
    }
  }
  /* Its trace: the testing packets, and what was lost. */
  fault_str trace = {0};
  uint64_t discarded = 0;
  if (r->into_file) { /* TracePacket records (field 1) in the file */
    size_t n;
    uint8_t *d = etch_test_read_file(file, &n);
    ASSERT_TRUE(d != NULL);
    etch__pb_dec fd_;
    etch__pb_field pf;
    etch__pb_dec_init(&fd_, d, n);
    while (etch__pb_next(&fd_, &pf))
      if (pf.id == 1 && pf.wt == 2)
        read_packet(r, pf.data, pf.len, &discarded);
    if (fd_.err) FAIL("%s: the file is not a trace", fault_now);
    free(d);
  } else {
    invoke(r, &cons, "ReadBuffers", NULL, -1);
  }
  while (!r->into_file) {
    if (!next_frame(r, &cons, &g)) {
      fault_str_free(&trace);
      goto out;
    }
    if (g.kind != ETCH_IPC_REPLY || g.request_id != cons.req) continue;
    if (!g.success) { /* the protocol's refusal has no message */
      failed(r, "ReadBuffers refused", etch_last_error());
      break;
    }
    etch__pb_dec d;
    etch__pb_field fl;
    etch__pb_dec_init(&d, g.body.data, g.body.len);
    while (etch__pb_next(&d, &fl)) {
      if (fl.id != ETCH_RBR_SLICES) continue;
      etch__pb_dec sd;
      etch__pb_field sf;
      etch__pb_dec_init(&sd, fl.data, fl.len);
      bool last = false;
      while (etch__pb_next(&sd, &sf)) {
        if (sf.id == ETCH_RBR_SLICE_DATA) {
          if (trace.len + sf.len + 1 > trace.cap) {
            trace.cap = (trace.len + sf.len + 1) * 2;
            trace.s = realloc(trace.s, trace.cap);
          }
          memcpy(trace.s + trace.len, sf.data, sf.len);
          trace.len += sf.len;
        }
        if (sf.id == ETCH_RBR_SLICE_LAST) last = sf.u != 0;
      }
      if (last) {
        read_packet(r, (const uint8_t *)trace.s, trace.len, &discarded);
        trace.len = 0;
      }
    }
    if (!g.has_more) break;
  }
  fault_str_free(&trace);
  if (discarded) fault_printf(&r->text, "discarded %llu\n",
                              (unsigned long long)discarded);
  invoke(r, &cons, "FreeBuffers", NULL, -1);
  if (!reply(r, &cons, &g)) goto out;
  fault_printf(&r->text, "FreeBuffers %d\n", g.success);

out:
  etch__pb_buf_free(&b);
  if (smb) munmap(smb, smb_size);
  etch__ipc_conn_close(&prod.c);
  if (have_cons) etch__ipc_conn_close(&cons.c);
  /* The service lets both go (a dead one's loop is over: freed as
   * etchd frees it). */
  for (int i = 0; i < 64 && !r->dead && (r->s->producers || r->s->consumers);
       i++)
    round_(r);
  if (r->dead) {
    etch__fault_hold(r->lifted);
    return;
  }
  if (r->s->producers || r->s->consumers || r->s->sessions)
    FAIL("%s: the service keeps a peer or a session of peers gone",
         fault_now);
  etch__fault_hold(r->lifted);
}

/* ---- the operation ---------------------------------------------------- */

/* `text` without its "read" and "discarded" lines. */
static void without_reads(const char *text, fault_str *out) {
  fault_printf(out, "%s", "");
  for (const char *l = text; *l;) {
    const char *e = strchr(l, '\n');
    size_t n = e ? (size_t)(e - l) + 1 : strlen(l);
    if (strncmp(l, "read ", 5) && strncmp(l, "discarded ", 10))
      fault_printf(out, "%.*s", (int)n, l);
    l += n;
  }
}

/* Whether the peers saw what they should but packets that the trace
 * counts as discarded (a chunk the service had no memory to keep). */
static bool lost_and_counted(const char *want, const char *got) {
  if (!strstr(got, "\ndiscarded ")) return false;
  fault_str a = {0}, b = {0};
  without_reads(want, &a);
  without_reads(got, &b);
  bool same = !strcmp(a.s, b.s);
  fault_str_free(&a);
  fault_str_free(&b);
  return same;
}

typedef struct svc_case {
  char dir[512];
  bool into_file;
  char *want;
} svc_case;

static int service_op(void *ctx) {
  svc_case *c = (svc_case *)ctx;
  char ppath[600], cpath[600];
  snprintf(ppath, sizeof ppath, "%s/p.sock", c->dir);
  snprintf(cpath, sizeof cpath, "%s/c.sock", c->dir);
  etch_service_opts o;
  memset(&o, 0, sizeof o);
  o.producer_socket = ppath;
  o.consumer_socket = cpath;
  o.smb_kb = 256;
  o.max_buffer_bytes = 64ull << 20;
  run r;
  memset(&r, 0, sizeof r);
  r.into_file = c->into_file;
  int rc = etch__service_new(&o, &r.s);
  if (rc) return rc;
  scenario(&r, c->dir);
  int status = ETCH_OK;
  if (r.failed) {
    if (!strstr(r.why, "out of memory"))
      FAIL("%s: %s (not out of memory)", fault_now, r.why);
    if (r.dead) { /* etchd exits: the operation failed */
      fault_str_free(&r.text);
      etch__service_free(r.s);
      return etch__error(ETCH_ENOMEM, "%s", r.why);
    }
    /* The same service, with no fault: everything again. */
    fault_str_free(&r.text);
    r.failed = false;
    r.lifted = true;
    etch__fault_hold(true);
    scenario(&r, c->dir);
    etch__fault_hold(false);
    if (r.failed) FAIL("%s, then again: %s", fault_now, r.why);
    status = etch__error(ETCH_ENOMEM, "%s", r.why);
  }
  if (c->want && strcmp(r.text.s, c->want) && !lost_and_counted(c->want,
                                                                 r.text.s))
    FAIL("%s: the peers saw:\n%s\nnot:\n%s", fault_now, r.text.s, c->want);
  if (!c->want) c->want = strdup(r.text.s);
  fault_str_free(&r.text);
  etch__service_free(r.s);
  return status;
}

static void sweep_service(bool into_file) {
  svc_case c;
  memset(&c, 0, sizeof c);
  snprintf(c.dir, sizeof c.dir, "%s", etch_test_tmpdir());
  c.into_file = into_file;
  ASSERT_OK(service_op(&c)); /* the reference */
  printf("%s", c.want);
  fault_result r = fault_sweep(into_file ? "etchd's session into a file"
                                         : "etchd's session",
                               service_op, &c);
  printf("  %llu allocations, %llu runs failed of %llu\n",
         (unsigned long long)r.allocs, (unsigned long long)r.failed,
         (unsigned long long)r.runs);
  free(c.want);
}

TEST(fault_service_session_setup) { sweep_service(false); }

/* The same session with write_into_file: the consumer's file is written
 * at the stop, not read through ReadBuffers. */
TEST(fault_service_session_into_a_file) { sweep_service(true); }

/* More connections than the poll set holds and no memory to grow it: the
 * service goes on, polling those it holds (it used to stop with
 * ETCH_ENOMEM, ending etchd), and once memory is there again it polls
 * them all: every consumer's connection is accepted and answered. */
TEST(fault_service_poll_set_cannot_grow) {
  char dir[512], ppath[600], cpath[600];
  snprintf(dir, sizeof dir, "%s", etch_test_tmpdir());
  snprintf(ppath, sizeof ppath, "%s/pp.sock", dir);
  snprintf(cpath, sizeof cpath, "%s/pc.sock", dir);
  etch_service_opts o;
  memset(&o, 0, sizeof o);
  o.producer_socket = ppath;
  o.consumer_socket = cpath;
  etch_service *s;
  ASSERT_OK(etch__service_new(&o, &s));
  enum { N = 70 };
  int fds[N];
  /* Ten at a time (the listening socket's backlog), each ten accepted by
   * a round whose set still fits in the first 64. */
  for (int i = 0; i < N; i++) {
    ASSERT_OK(etch__ipc_connect(cpath, &fds[i]));
    if (i % 10 == 9) ASSERT_EQ_INT(etch__service_poll(s, 0), ETCH_OK);
  }
  /* Every connection accepted: more than the set's first 64. */
  uint32_t n = 0;
  for (consumer *c = s->consumers; c; c = c->next) n++;
  ASSERT_EQ_INT((int)n, N);
  /* Growing the set fails from now on: rounds still succeed. */
  for (int round = 0; round < 5; round++) {
    etch__fault_arm(1, true);
    int rc = etch__service_poll(s, 0);
    etch__fault_disarm();
    ASSERT_EQ_INT(rc, ETCH_OK);
  }
  ASSERT_TRUE(s->poll_oom_said);
  ASSERT_EQ_INT((int)s->pcap, 64);
  /* Memory again: the set grows and holds them all. */
  ASSERT_EQ_INT(etch__service_poll(s, 0), ETCH_OK);
  ASSERT_TRUE(!s->poll_oom_said && s->pcap >= N + 2);
  for (int i = 0; i < N; i++) close(fds[i]);
  etch__service_free(s);
}

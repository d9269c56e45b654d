/*
 * fuzz_service.c - libFuzzer target for what a hostile producer can send
 * the service: a real etchd service runs in this process with a session
 * for `track_event` (set up once by a consumer); every input is the byte
 * stream of a new producer connection (frames, calls, commits, patches,
 * with the shared memory the service gave it written from the input too).
 * The service must answer or drop that producer, never crash, hang or
 * touch memory outside what it owns. After each input the consumer reads
 * the session's buffers (ReadBuffers): the replies must end, and each must
 * be whole ReadBuffersResponse slices, every packet ending in one flagged
 * last.
 *
 * The service listens on a Unix and a loopback TCP producer socket, both
 * with the RelayPort, and the session records every machine: an input
 * that starts with 0xfe is sent over TCP, as a network producer's (shared
 * memory emulated: chunk bytes inside CommitData; SetPeerIdentity taken;
 * InitRelay and SyncClock on the RelayPort).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "etch/etch.h"
#include "ipc/ipc.h"
#include "pb/pb.h"
#include "proto/ipc.h"
#include "proto/trace_config.h"
#include "service/service.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static etch_service *svc;
static etch_ipc_conn consumer;
static char prod_path[256];
static char tcp_name[64];

static void pump(int rounds) {
  for (int i = 0; i < rounds; i++) etch__service_poll(svc, 0);
}

static void setup(void) {
  signal(SIGPIPE, SIG_IGN);
  char dir[] = "/tmp/etch-fuzz-svc-XXXXXX";
  if (!mkdtemp(dir)) abort();
  char cons[256];
  snprintf(prod_path, sizeof prod_path, "%s/p", dir);
  snprintf(cons, sizeof cons, "%s/c", dir);
  etch_service_opts o = {0};
  char prods[300];
  snprintf(prods, sizeof prods, "%s,127.0.0.1:0", prod_path);
  o.producer_socket = prods;
  o.relay_endpoint = true;
  o.consumer_socket = cons;
  o.smb_kb = 64;
  if (etch__service_new(&o, &svc) != ETCH_OK) abort();
  if (etch__service_producer_name(svc, 1, tcp_name, sizeof tcp_name))
    abort();
  int fd;
  if (etch__ipc_connect(cons, &fd) != ETCH_OK) abort();
  etch__ipc_conn_init(&consumer, fd, 1 << 20);
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_BIND;
  f.request_id = 1;
  f.name.data = (const uint8_t *)ETCH_IPC_CONSUMER_PORT;
  f.name.len = sizeof ETCH_IPC_CONSUMER_PORT - 1;
  etch__ipc_conn_send(&consumer, &f, -1);
  pump(3);
  const char *text = "buffers { size_kb: 256 } data_sources { config { name: "
                     "\"track_event\" } } trace_all_machines: true";
  etch__pb_buf cfg, args;
  etch__pb_buf_init(&cfg, 256, 0);
  etch__pb_buf_init(&args, 256, 0);
  if (etch__trace_config_text_to_binary(text, strlen(text), &cfg)) abort();
  etch__pb_write_bytes_field(&args.s, ETCH_ETR_TRACE_CONFIG,
                            etch__pb_buf_data(&cfg), etch__pb_buf_len(&cfg));
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_INVOKE;
  f.request_id = 2;
  f.service_id = 2; /* consumer_port */
  f.method_id = 1;  /* EnableTracing */
  f.body.data = etch__pb_buf_data(&args);
  f.body.len = (uint32_t)etch__pb_buf_len(&args);
  etch__ipc_conn_send(&consumer, &f, -1);
  pump(3);
  etch__pb_buf_free(&cfg);
  etch__pb_buf_free(&args);
}

/* ReadBuffers from the consumer: what the producer got into the buffer,
 * read back (and consumed, so the next input finds room). */
static void read_back(void) {
  static uint64_t req = 100;
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_INVOKE;
  f.request_id = ++req;
  f.service_id = 2; /* consumer_port */
  f.method_id = 3;  /* ReadBuffers */
  if (etch__ipc_conn_send(&consumer, &f, -1) != ETCH_OK) abort();
  bool done = false;
  bool in_packet = false; /* a packet's slices not ended yet */
  for (int round = 0; round < 10000 && !done; round++) {
    pump(1);
    etch__ipc_conn_read(&consumer);
    etch_ipc_frame r;
    int got;
    while (!done && (got = etch__ipc_conn_next(&consumer, &r)) == 1) {
      if (r.kind != ETCH_IPC_REPLY || r.request_id != req) continue;
      if (!r.success) abort(); /* the session is there: it must answer */
      etch__pb_dec d, sd;
      etch__pb_field fl, g;
      etch__pb_dec_init(&d, r.body.data, r.body.len);
      while (etch__pb_next(&d, &fl)) {
        if (fl.id != ETCH_RBR_SLICES || fl.wt != ETCH_PB_LEN) abort();
        bool has_data = false, last = false;
        etch__pb_dec_init(&sd, fl.data, fl.len);
        while (etch__pb_next(&sd, &g)) {
          if (g.id == ETCH_RBR_SLICE_DATA && g.wt == ETCH_PB_LEN)
            has_data = true;
          else if (g.id == ETCH_RBR_SLICE_LAST && g.wt == ETCH_PB_VARINT)
            last = g.u != 0;
          else
            abort();
        }
        if (sd.err || !has_data) abort();
        in_packet = !last;
      }
      if (d.err) abort();
      done = !r.has_more;
    }
    if (got < 0) abort();
  }
  if (!done || in_packet) abort(); /* a read that never ends, or a cut packet */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!svc) setup();
  int fd;
  bool tcp = size && data[0] == 0xfe;
  if (tcp) {
    data++;
    size--;
  }
  if (etch__ipc_connect(tcp ? tcp_name : prod_path, &fd) != ETCH_OK) abort();
  etch_ipc_conn c;
  etch__ipc_conn_init(&c, fd, 1 << 20);
  /* The input: [n][n bytes to the socket] ... ; a 0xff byte instead of n
   * writes the next 64 bytes into the shared memory, if the service sent
   * one, at an offset from the byte after. */
  uint8_t *smb = NULL;
  size_t smb_size = 0;
  size_t p = 0;
  while (p < size) {
    uint8_t n = data[p++];
    pump(2);
    etch__ipc_conn_read(&c);
    int sfd = etch__ipc_conn_take_fd(&c);
    if (sfd >= 0) {
      struct stat st;
      if (!smb && fstat(sfd, &st) == 0 && st.st_size > 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                       MAP_SHARED, sfd, 0);
        if (m != MAP_FAILED) {
          smb = (uint8_t *)m;
          smb_size = (size_t)st.st_size;
        }
      }
      close(sfd);
    }
    if (n == 0xff) {
      if (p >= size) break;
      size_t off = (size_t)data[p++] * 256;
      size_t k = size - p < 64 ? size - p : 64;
      if (smb && off + k <= smb_size) memcpy(smb + off, data + p, k);
      p += k;
      continue;
    }
    size_t k = size - p < n ? size - p : n;
    if (k && send(fd, data + p, k, MSG_NOSIGNAL) < 0) break;
    p += k;
  }
  pump(4);
  etch__ipc_conn_close(&c);
  pump(2);
  if (smb) munmap(smb, smb_size);
  read_back();
  return 0;
}

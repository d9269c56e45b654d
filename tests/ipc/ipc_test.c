/*
 * ipc_test.c - Perfetto's IPC framing (src/ipc): frames byte for byte,
 * connections over socket pairs and paths, descriptors, hostile peers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "test.h"

static etch_ipc_bytes B(const char *s) {
  etch_ipc_bytes b = {(const uint8_t *)s, (uint32_t)strlen(s)};
  return b;
}

static void pair(etch_ipc_conn *a, etch_ipc_conn *b, size_t limit) {
  int sv[2];
  ASSERT_TRUE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
  etch__ipc_conn_init(a, sv[0], limit);
  etch__ipc_conn_init(b, sv[1], limit);
}

/* Reads until a frame is there (or fails the test). */
static void next(etch_ipc_conn *c, etch_ipc_frame *f) {
  for (int i = 0; i < 1000; i++) {
    int r = etch__ipc_conn_next(c, f);
    if (r == 1) return;
    ASSERT_EQ_INT(r, 0);
    if (etch__ipc_conn_wait(c, 1000) != ETCH_OK) FAIL("connection failed: %s", c->err);
  }
  FAIL("no frame arrived");
}

/* The example of Perfetto's docs, byte for byte: a BindService for
 * "ProducerPort" with request id 1. */
TEST(bind_frame_bytes) {
  etch_ipc_frame f = {.request_id = 1, .kind = ETCH_IPC_BIND};
  f.name = B("ProducerPort");
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__ipc_frame_encode(&b, &f);
  static const uint8_t want[] = {
      21, 0, 0, 0,   /* length */
      0x10, 0x01,    /* request_id = 1 */
      0x1a, 0x8e, 0x80, 0x80, 0x00, /* msg_bind_service, 14 bytes: etch
                                       writes nested lengths in 4 bytes */
      0x0a, 12, 'P', 'r', 'o', 'd', 'u', 'c', 'e', 'r', 'P', 'o', 'r', 't'};
  ASSERT_EQ_INT((int)etch__pb_buf_len(&b), (int)sizeof want);
  ASSERT_TRUE(memcmp(etch__pb_buf_data(&b), want, sizeof want) == 0);
  etch_ipc_frame g;
  ASSERT_OK(etch__ipc_frame_decode(want + 4, sizeof want - 4, &g));
  ASSERT_EQ_INT(g.kind, ETCH_IPC_BIND);
  ASSERT_EQ_U64(g.request_id, 1);
  ASSERT_TRUE(etch__ipc_bytes_eq(g.name, "ProducerPort"));
  etch__pb_buf_free(&b);
}

TEST(every_kind_round_trips) {
  etch_ipc_frame in[5];
  memset(in, 0, sizeof in);
  in[0].kind = ETCH_IPC_BIND_REPLY;
  in[0].request_id = 7;
  in[0].success = true;
  in[0].service_id = 42;
  in[0].nmethods = 2;
  in[0].methods[0].id = 2;
  in[0].methods[0].name = B("InitializeConnection");
  in[0].methods[1].id = 5;
  in[0].methods[1].name = B("RegisterDataSource");
  in[1].kind = ETCH_IPC_INVOKE;
  in[1].request_id = 8;
  in[1].service_id = 42;
  in[1].method_id = 5;
  in[1].body = B("\x0a\x03" "abc");
  in[1].drop_reply = true;
  in[2].kind = ETCH_IPC_REPLY;
  in[2].request_id = 8;
  in[2].success = true;
  in[2].has_more = true;
  in[2].body = B("xyz");
  in[3].kind = ETCH_IPC_ERROR;
  in[3].request_id = 9;
  in[3].name = B("unknown method");
  in[4].kind = ETCH_IPC_REPLY;
  in[4].request_id = 1ull << 40;
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  for (int i = 0; i < 5; i++) etch__ipc_frame_encode(&b, &in[i]);
  const uint8_t *p = etch__pb_buf_data(&b);
  size_t left = etch__pb_buf_len(&b);
  for (int i = 0; i < 5; i++) {
    ASSERT_TRUE(left >= 4);
    uint32_t n = p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
    ASSERT_TRUE(n <= left - 4);
    etch_ipc_frame g;
    ASSERT_OK(etch__ipc_frame_decode(p + 4, n, &g));
    ASSERT_EQ_INT(g.kind, in[i].kind);
    ASSERT_EQ_U64(g.request_id, in[i].request_id);
    ASSERT_EQ_INT(g.success, in[i].success);
    ASSERT_EQ_INT(g.has_more, in[i].has_more);
    ASSERT_EQ_INT(g.drop_reply, in[i].drop_reply);
    ASSERT_EQ_INT((int)g.service_id, (int)in[i].service_id);
    ASSERT_EQ_INT((int)g.method_id, (int)in[i].method_id);
    ASSERT_EQ_INT((int)g.body.len, (int)in[i].body.len);
    if (g.body.len) ASSERT_TRUE(memcmp(g.body.data, in[i].body.data, g.body.len) == 0);
    ASSERT_EQ_INT((int)g.name.len, (int)in[i].name.len);
    ASSERT_EQ_INT((int)g.nmethods, (int)in[i].nmethods);
    p += 4 + n;
    left -= 4 + n;
  }
  ASSERT_EQ_INT((int)left, 0);
  ASSERT_EQ_INT((int)etch__ipc_method_id(&in[0], "RegisterDataSource"), 5);
  ASSERT_EQ_INT((int)etch__ipc_method_id(&in[0], "Flush"), 0);
  etch__pb_buf_free(&b);
}

TEST(garbage_is_refused_with_a_message) {
  /* bind_service as a varint; a truncated length; a bad wire type 7 */
  static const uint8_t bad1[] = {0x18, 0x01};
  static const uint8_t bad2[] = {0x1a, 0x10, 0x0a};
  static const uint8_t bad3[] = {0x0f};
  etch_ipc_frame f;
  ASSERT_EQ_INT(etch__ipc_frame_decode(bad1, sizeof bad1, &f), ETCH_EFORMAT);
  ASSERT_TRUE(strstr(etch_last_error(), "bind_service") != NULL);
  ASSERT_EQ_INT(etch__ipc_frame_decode(bad2, sizeof bad2, &f), ETCH_EFORMAT);
  ASSERT_EQ_INT(etch__ipc_frame_decode(bad3, sizeof bad3, &f), ETCH_EFORMAT);
  ASSERT_TRUE(strstr(etch_last_error(), "malformed IPC frame") != NULL);
  /* Unknown fields are skipped, as protobuf says. */
  static const uint8_t later[] = {0x10, 0x05, 0xf8, 0x01, 0x01};
  ASSERT_OK(etch__ipc_frame_decode(later, sizeof later, &f));
  ASSERT_EQ_INT(f.kind, ETCH_IPC_NONE);
  ASSERT_EQ_U64(f.request_id, 5);
}

TEST(frames_cross_the_socket_whole_and_in_pieces) {
  etch_ipc_conn a, b;
  pair(&a, &b, 1 << 20);
  ASSERT_EQ_INT((int)a.peer_pid, (int)getpid());
  ASSERT_EQ_INT((int)a.peer_uid, (int)getuid());
  /* 100 frames of growing size, the last near the limit. */
  static uint8_t big[ETCH_IPC_MAX_FRAME];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 7);
  for (int i = 0; i < 100; i++) {
    etch_ipc_frame f = {.kind = ETCH_IPC_REPLY, .request_id = (uint64_t)i,
                        .success = true};
    f.body.data = big;
    f.body.len = i == 99 ? ETCH_IPC_MAX_FRAME - 64 : (uint32_t)i * 97;
    ASSERT_OK(etch__ipc_conn_send(&a, &f, -1));
    etch_ipc_frame g;
    while (etch__ipc_conn_want_write(&a)) {
      ASSERT_OK(etch__ipc_conn_flush(&a));
      ASSERT_OK(etch__ipc_conn_read(&b));
    }
    next(&b, &g);
    ASSERT_EQ_U64(g.request_id, (uint64_t)i);
    ASSERT_EQ_INT((int)g.body.len, (int)f.body.len);
    ASSERT_TRUE(memcmp(g.body.data, big, g.body.len) == 0);
  }
  /* A frame written one byte at a time is handed out only when whole. */
  etch_ipc_frame f = {.kind = ETCH_IPC_BIND, .request_id = 3};
  f.name = B("ConsumerPort");
  etch__pb_buf buf;
  etch__pb_buf_init(&buf, 64, 0);
  etch__ipc_frame_encode(&buf, &f);
  etch_ipc_frame g;
  for (size_t i = 0; i < etch__pb_buf_len(&buf); i++) {
    ASSERT_EQ_INT(etch__ipc_conn_next(&b, &g), 0);
    ASSERT_TRUE(write(a.fd, etch__pb_buf_data(&buf) + i, 1) == 1);
    ASSERT_OK(etch__ipc_conn_read(&b));
  }
  ASSERT_EQ_INT(etch__ipc_conn_next(&b, &g), 1);
  ASSERT_TRUE(etch__ipc_bytes_eq(g.name, "ConsumerPort"));
  etch__pb_buf_free(&buf);
  etch__ipc_conn_close(&a);
  etch__ipc_conn_close(&b);
}

TEST(descriptors_travel_with_their_frame) {
  etch_ipc_conn a, b;
  pair(&a, &b, 1 << 20);
  int mfd = memfd_create("etch-test", MFD_CLOEXEC);
  ASSERT_TRUE(mfd >= 0);
  ASSERT_TRUE(ftruncate(mfd, 4096) == 0);
  uint8_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
  ASSERT_TRUE(m != MAP_FAILED);
  strcpy((char *)m, "shared");
  /* A frame before it without one, then the one with it. */
  etch_ipc_frame f = {.kind = ETCH_IPC_REPLY, .request_id = 1, .success = true};
  ASSERT_OK(etch__ipc_conn_send(&a, &f, -1));
  f.request_id = 2;
  ASSERT_OK(etch__ipc_conn_send(&a, &f, mfd));
  close(mfd); /* the connection has its own copy until sent */
  etch_ipc_frame g;
  next(&b, &g);
  ASSERT_EQ_U64(g.request_id, 1);
  next(&b, &g);
  ASSERT_EQ_U64(g.request_id, 2);
  int got = etch__ipc_conn_take_fd(&b);
  ASSERT_TRUE(got >= 0);
  ASSERT_EQ_INT(etch__ipc_conn_take_fd(&b), -1);
  uint8_t *m2 = mmap(NULL, 4096, PROT_READ, MAP_SHARED, got, 0);
  ASSERT_TRUE(m2 != MAP_FAILED);
  ASSERT_EQ_STR((const char *)m2, "shared");
  ASSERT_TRUE((fcntl(got, F_GETFD) & FD_CLOEXEC) != 0);
  munmap(m, 4096);
  munmap(m2, 4096);
  close(got);
  etch__ipc_conn_close(&a);
  etch__ipc_conn_close(&b);
}

TEST(an_oversized_frame_fails_the_connection) {
  etch_ipc_conn a, b;
  pair(&a, &b, 1 << 20);
  uint8_t hdr[8] = {0x01, 0x00, 0x02, 0x00, 0x10, 0x01, 0, 0}; /* 128K + 1 */
  ASSERT_TRUE(write(a.fd, hdr, sizeof hdr) == (ssize_t)sizeof hdr);
  ASSERT_OK(etch__ipc_conn_wait(&b, 1000));
  etch_ipc_frame g;
  ASSERT_EQ_INT(etch__ipc_conn_next(&b, &g), ETCH_EFORMAT);
  ASSERT_TRUE(b.failed);
  ASSERT_TRUE(strstr(b.err, "larger than the limit") != NULL);
  /* Sending one is refused before anything is written. */
  static uint8_t big[ETCH_IPC_MAX_FRAME + 1];
  etch_ipc_frame f = {.kind = ETCH_IPC_REPLY, .success = true};
  f.body.data = big;
  f.body.len = sizeof big;
  ASSERT_EQ_INT(etch__ipc_conn_send(&a, &f, -1), ETCH_ELIMIT);
  ASSERT_FALSE(etch__ipc_conn_want_write(&a));
  /* A malformed frame too. */
  etch_ipc_conn c, d;
  pair(&c, &d, 1 << 20);
  uint8_t junk[] = {3, 0, 0, 0, 0x1a, 0x05, 0x0a};
  ASSERT_TRUE(write(c.fd, junk, sizeof junk) == (ssize_t)sizeof junk);
  ASSERT_OK(etch__ipc_conn_wait(&d, 1000));
  ASSERT_EQ_INT(etch__ipc_conn_next(&d, &g), ETCH_EFORMAT);
  ASSERT_TRUE(strstr(d.err, "malformed IPC frame") != NULL);
  etch__ipc_conn_close(&a);
  etch__ipc_conn_close(&b);
  etch__ipc_conn_close(&c);
  etch__ipc_conn_close(&d);
}

/* A peer that never reads: the sender's queue fills to its limit and the
 * connection fails; the sender never blocks. */
TEST(a_peer_that_does_not_read_cannot_block_the_sender) {
  etch_ipc_conn a, b;
  pair(&a, &b, 256 * 1024);
  static uint8_t body[60000];
  etch_ipc_frame f = {.kind = ETCH_IPC_REPLY, .success = true};
  f.body.data = body;
  f.body.len = sizeof body;
  int rc = ETCH_OK, sent = 0;
  while (rc == ETCH_OK && sent < 10000) {
    rc = etch__ipc_conn_send(&a, &f, -1);
    sent++;
  }
  ASSERT_EQ_INT(rc, ETCH_EIO);
  ASSERT_TRUE(strstr(a.err, "does not read") != NULL);
  ASSERT_TRUE(sent < 100);
  etch__ipc_conn_close(&a);
  etch__ipc_conn_close(&b);
}

TEST(listen_and_connect_on_a_path) {
  char path[512];
  snprintf(path, sizeof path, "%s/p.sock", etch_test_tmpdir());
  int l;
  ASSERT_OK(etch__ipc_listen(path, false, &l));
  struct stat st;
  ASSERT_TRUE(stat(path, &st) == 0);
  ASSERT_EQ_INT((int)(st.st_mode & 0777), 0600);
  int cfd, sfd = -1;
  ASSERT_OK(etch__ipc_connect(path, &cfd));
  /* Up to 10 s (at once in practice: the connection is queued): a bound
   * so that a broken accept fails rather than hangs. */
  for (int i = 0; i < 10000 && sfd < 0; i++) {
    ASSERT_OK(etch__ipc_accept(l, &sfd));
    if (sfd < 0) usleep(1000);
  }
  ASSERT_TRUE(sfd >= 0);
  etch_ipc_conn c, s;
  etch__ipc_conn_init(&c, cfd, 1 << 20);
  etch__ipc_conn_init(&s, sfd, 1 << 20);
  ASSERT_EQ_INT((int)s.peer_pid, (int)getpid());
  etch_ipc_frame f = {.kind = ETCH_IPC_BIND, .request_id = 1};
  f.name = B("ProducerPort");
  ASSERT_OK(etch__ipc_conn_send(&c, &f, -1));
  etch_ipc_frame g;
  next(&s, &g);
  ASSERT_TRUE(etch__ipc_bytes_eq(g.name, "ProducerPort"));
  /* The peer going away is an end of stream with a reason. */
  etch__ipc_conn_close(&c);
  ASSERT_EQ_INT(etch__ipc_conn_wait(&s, 1000), ETCH_EIO);
  ASSERT_TRUE(strstr(s.err, "closed") != NULL);
  etch__ipc_conn_close(&s);
  /* A second service on the same path is refused (its probe
   * is one more connection the live service sees open and close). */
  int l2;
  ASSERT_EQ_INT(etch__ipc_listen(path, false, &l2), ETCH_EBUSY);
  ASSERT_TRUE(strstr(etch_last_error(), "already listens") != NULL);
  close(l);
  /* A stale socket file (its service died) is replaced. */
  ASSERT_OK(etch__ipc_listen(path, true, &l));
  ASSERT_TRUE(stat(path, &st) == 0);
  ASSERT_EQ_INT((int)(st.st_mode & 0777), 0660);
  close(l);
  /* A file that is not a socket is left alone. */
  unlink(path);
  FILE *fp = fopen(path, "w");
  fclose(fp);
  ASSERT_EQ_INT(etch__ipc_listen(path, false, &l), ETCH_EBUSY);
  ASSERT_EQ_INT(etch__ipc_connect(path, &cfd), ETCH_EIO);
  ASSERT_TRUE(strstr(etch_last_error(), "cannot connect") != NULL);
}

/* The first frame a relay (Perfetto's traced_relay) sends for a producer
 * it forwards, as seen on the wire: SetPeerIdentity with the producer's pid
 * and uid, the machine's boot id as its hint and the machine's name. */
TEST(a_relays_peer_identity_decodes_and_round_trips) {
  static const uint8_t seen[] = {
      0x10, 0x00, 0x42, 0x35, 0x08, 0xf9, 0xb8, 0x01, 0x10, 0x00, 0x1a,
      0x24, 0x36, 0x66, 0x31, 0x63, 0x32, 0x64, 0x33, 0x65, 0x2d, 0x30,
      0x61, 0x34, 0x62, 0x2d, 0x34, 0x63, 0x35, 0x64, 0x2d, 0x39, 0x65,
      0x38, 0x66, 0x2d, 0x31, 0x30, 0x32, 0x31, 0x33, 0x32, 0x34, 0x33,
      0x35, 0x34, 0x36, 0x35, 0x22, 0x07, 0x72, 0x65, 0x6d, 0x6f, 0x74,
      0x65, 0x31};
  etch_ipc_frame f;
  ASSERT_OK(etch__ipc_frame_decode(seen, sizeof seen, &f));
  ASSERT_EQ_INT(f.kind, ETCH_IPC_PEER_IDENTITY);
  ASSERT_TRUE(f.has_pid && f.has_uid);
  ASSERT_EQ_INT(f.pid, 23673);
  ASSERT_EQ_INT(f.uid, 0);
  ASSERT_TRUE(etch__ipc_bytes_eq(f.machine_id_hint,
                                 "6f1c2d3e-0a4b-4c5d-9e8f-102132435465"));
  ASSERT_TRUE(etch__ipc_bytes_eq(f.name, "remote1"));
  etch__pb_buf b;
  etch__pb_buf_init(&b, 64, 0);
  etch__ipc_frame_encode(&b, &f);
  etch_ipc_frame g;
  ASSERT_OK(etch__ipc_frame_decode(etch__pb_buf_data(&b) + 4,
                                   etch__pb_buf_len(&b) - 4, &g));
  ASSERT_EQ_INT(g.kind, ETCH_IPC_PEER_IDENTITY);
  ASSERT_EQ_INT(g.pid, f.pid);
  ASSERT_TRUE(g.has_uid && g.uid == 0);
  ASSERT_TRUE(etch__ipc_bytes_eq(g.machine_id_hint,
                                 "6f1c2d3e-0a4b-4c5d-9e8f-102132435465"));
  ASSERT_TRUE(etch__ipc_bytes_eq(g.name, "remote1"));
  etch__pb_buf_free(&b);
  /* A field of the wrong type is not a pid. */
  static const uint8_t odd[] = {0x42, 0x03, 0x0a, 0x01, 'x'};
  ASSERT_OK(etch__ipc_frame_decode(odd, sizeof odd, &g));
  ASSERT_TRUE(g.kind == ETCH_IPC_PEER_IDENTITY && !g.has_pid);
}

/* ---- socket names of every family ---- */

TEST(socket_names_are_read_as_perfettos_programs_read_them) {
  ASSERT_EQ_INT(etch__ipc_family("/run/p.sock"), ETCH_SOCK_UNIX);
  ASSERT_EQ_INT(etch__ipc_family("@etch-p"), ETCH_SOCK_UNIX);
  ASSERT_EQ_INT(etch__ipc_family("dir:with:colons/p.sock"), ETCH_SOCK_UNIX);
  ASSERT_EQ_INT(etch__ipc_family("a:12x"), ETCH_SOCK_UNIX);
  ASSERT_EQ_INT(etch__ipc_family("p.sock:"), ETCH_SOCK_UNIX);
  ASSERT_EQ_INT(etch__ipc_family("127.0.0.1:20001"), ETCH_SOCK_INET);
  ASSERT_EQ_INT(etch__ipc_family("host.example:80"), ETCH_SOCK_INET);
  ASSERT_EQ_INT(etch__ipc_family("[::1]:20001"), ETCH_SOCK_INET6);
  ASSERT_EQ_INT(etch__ipc_family("vsock://2:20001"), ETCH_SOCK_VSOCK);
  ASSERT_EQ_INT(etch__ipc_family("vsock:2:20001"), ETCH_SOCK_VSOCK);
  ASSERT_TRUE(etch__ipc_is_loopback("/run/p.sock"));
  ASSERT_TRUE(etch__ipc_is_loopback("127.0.0.1:1"));
  ASSERT_TRUE(etch__ipc_is_loopback("127.9.9.9:1"));
  ASSERT_TRUE(etch__ipc_is_loopback("[::1]:1"));
  ASSERT_TRUE(etch__ipc_is_loopback("vsock://1:5"));
  ASSERT_TRUE(!etch__ipc_is_loopback("0.0.0.0:1"));
  ASSERT_TRUE(!etch__ipc_is_loopback("10.1.2.3:1"));
  ASSERT_TRUE(!etch__ipc_is_loopback("[::]:1"));
  ASSERT_TRUE(!etch__ipc_is_loopback("vsock://2:5"));
  char one[64];
  const char *list = "/a/p.sock,127.0.0.1:20001,vsock://3:9";
  ASSERT_TRUE(etch__ipc_name_at(list, 0, one, sizeof one));
  ASSERT_EQ_STR(one, "/a/p.sock");
  ASSERT_TRUE(etch__ipc_name_at(list, 1, one, sizeof one));
  ASSERT_EQ_STR(one, "127.0.0.1:20001");
  ASSERT_TRUE(etch__ipc_name_at(list, 2, one, sizeof one));
  ASSERT_EQ_STR(one, "vsock://3:9");
  ASSERT_TRUE(!etch__ipc_name_at(list, 3, one, sizeof one));
  ASSERT_TRUE(!etch__ipc_name_at("a,,b", 1, one, sizeof one));
  ASSERT_TRUE(!etch__ipc_name_at(list, 0, one, 4)); /* does not fit */
  /* Wrong numbers are refused with the name in the message. */
  int fd;
  ASSERT_EQ_INT(etch__ipc_connect("127.0.0.1:65536", &fd), ETCH_EINVAL);
  ASSERT_TRUE(strstr(etch_last_error(), "127.0.0.1:65536") != NULL);
  ASSERT_EQ_INT(etch__ipc_connect("vsock://x:1", &fd), ETCH_EINVAL);
  ASSERT_EQ_INT(etch__ipc_connect("vsock://2", &fd), ETCH_EINVAL);
  }

/* Accepts the connection a test just made (bounded, not timed). */
static int accept_one(int l) {
  int sfd = -1;
  for (int i = 0; i < 10000 && sfd < 0; i++) {
    ASSERT_OK(etch__ipc_accept(l, &sfd));
    if (sfd < 0) usleep(1000);
  }
  ASSERT_TRUE(sfd >= 0);
  return sfd;
}

TEST(listen_and_connect_over_tcp_loopback) {
  int l;
  ASSERT_OK(etch__ipc_listen("127.0.0.1:0", false, &l));
  char name[64];
  ASSERT_OK(etch__ipc_local_name(l, name, sizeof name));
  ASSERT_TRUE(!strncmp(name, "127.0.0.1:", 10) && strcmp(name, "127.0.0.1:0"));
  /* The port is taken: a second listener is refused. */
  int l2;
  ASSERT_EQ_INT(etch__ipc_listen(name, false, &l2), ETCH_EBUSY);
  int cfd;
  ASSERT_OK(etch__ipc_connect(name, &cfd));
  int sfd = accept_one(l);
  etch_ipc_conn c, s;
  etch__ipc_conn_init(&c, cfd, 1 << 20);
  etch__ipc_conn_init(&s, sfd, 1 << 20);
  /* A network peer has an address and no credentials. */
  ASSERT_TRUE(s.remote && c.remote);
  ASSERT_EQ_INT((int)s.peer_pid, -1);
  ASSERT_EQ_INT((int)s.peer_uid, -1);
  ASSERT_TRUE(!strncmp(s.peer_addr, "127.0.0.1:", 10));
  ASSERT_EQ_STR(c.peer_addr, name);
  /* Frames cross whole, in both directions. */
  etch_ipc_frame f = {.kind = ETCH_IPC_BIND, .request_id = 7};
  f.name = B("ProducerPort");
  ASSERT_OK(etch__ipc_conn_send(&c, &f, -1));
  etch_ipc_frame g;
  next(&s, &g);
  ASSERT_EQ_INT((int)g.request_id, 7);
  ASSERT_TRUE(etch__ipc_bytes_eq(g.name, "ProducerPort"));
  etch_ipc_frame r = {.kind = ETCH_IPC_REPLY, .request_id = 7, .success = true};
  ASSERT_OK(etch__ipc_conn_send(&s, &r, -1));
  next(&c, &g);
  ASSERT_TRUE(g.kind == ETCH_IPC_REPLY && g.success);
  /* A descriptor has no way over a network: refused, the connection
   * still up. */
  ASSERT_EQ_INT(etch__ipc_conn_send(&s, &r, 0), ETCH_EINVAL);
  ASSERT_TRUE(!s.failed);
  etch__ipc_conn_close(&c);
  ASSERT_EQ_INT(etch__ipc_conn_wait(&s, 1000), ETCH_EIO);
  etch__ipc_conn_close(&s);
  close(l);
  /* Nobody listens any more: a clear error. */
  ASSERT_EQ_INT(etch__ipc_connect(name, &cfd), ETCH_EIO);
  ASSERT_TRUE(strstr(etch_last_error(), name) != NULL);
}

/* Waits (bounded) for a connect begun by etch__ipc_connect_start. */
static int finish_connect(int fd, bool pending, const char *name) {
  if (pending) {
    struct pollfd pf = {fd, POLLOUT, 0};
    ASSERT_EQ_INT(poll(&pf, 1, 30000), 1);
  }
  return etch__ipc_connect_finish(fd, name);
}

TEST(a_connect_begun_without_waiting) {
  int l;
  ASSERT_OK(etch__ipc_listen("127.0.0.1:0", false, &l));
  char name[64];
  ASSERT_OK(etch__ipc_local_name(l, name, sizeof name));
  int fd;
  bool pending;
  ASSERT_OK(etch__ipc_connect_start(name, &fd, &pending));
  ASSERT_TRUE(fcntl(fd, F_GETFL) & O_NONBLOCK);
  ASSERT_OK(finish_connect(fd, pending, name));
  int sfd = accept_one(l);
  etch_ipc_conn c, s;
  etch__ipc_conn_init(&c, fd, 1 << 20);
  etch__ipc_conn_init(&s, sfd, 1 << 20);
  etch_ipc_frame f = {.kind = ETCH_IPC_BIND, .request_id = 9};
  f.name = B("RelayPort");
  ASSERT_OK(etch__ipc_conn_send(&c, &f, -1));
  etch_ipc_frame g;
  next(&s, &g);
  ASSERT_TRUE(etch__ipc_bytes_eq(g.name, "RelayPort"));
  etch__ipc_conn_close(&c);
  etch__ipc_conn_close(&s);
  close(l);
  /* Nobody listens: refused at once or when it is finished, with the
   * name in the message. */
  int rc = etch__ipc_connect_start(name, &fd, &pending);
  if (rc == ETCH_OK) {
    rc = finish_connect(fd, pending, name);
    close(fd);
  }
  ASSERT_EQ_INT(rc, ETCH_EIO);
  ASSERT_TRUE(strstr(etch_last_error(), name) != NULL);
  /* A name that is none. */
  ASSERT_TRUE(etch__ipc_connect_start("[::1", &fd, &pending) != ETCH_OK);
}

TEST(listen_and_connect_on_an_abstract_name) {
  char name[64];
  snprintf(name, sizeof name, "@etch-ipc-test-%d", (int)getpid());
  int l;
  ASSERT_OK(etch__ipc_listen(name, false, &l));
  int cfd;
  ASSERT_OK(etch__ipc_connect(name, &cfd));
  int sfd = accept_one(l);
  etch_ipc_conn s;
  etch__ipc_conn_init(&s, sfd, 1 << 20);
  ASSERT_TRUE(!s.remote);
  ASSERT_EQ_INT((int)s.peer_pid, (int)getpid());
  etch__ipc_conn_close(&s);
  close(cfd);
  close(l);
}

/* ---- whose sockets ---- */

#define ASSERT_ERR(expr, code, msg)                                        \
  do {                                                                     \
    ASSERT_EQ_INT((expr), (code));                                         \
    if (strcmp(etch_last_error(), (msg)) != 0)                             \
      FAIL("error '%s', not '%s'", etch_last_error(), (msg));              \
  } while (0)

/* $XDG_RUNTIME_DIR pointed at a private directory; the default paths in
 * it, Perfetto's variables unset. */
static void private_runtime_dir(char *xdg, size_t cap, char *dir,
                                size_t dcap) {
  unsetenv("PERFETTO_PRODUCER_SOCK_NAME");
  unsetenv("PERFETTO_CONSUMER_SOCK_NAME");
  snprintf(xdg, cap, "%s/xdg", etch_test_tmpdir());
  ASSERT_EQ_INT(mkdir(xdg, 0700), 0);
  setenv("XDG_RUNTIME_DIR", xdg, 1);
  snprintf(dir, dcap, "%s/etch", xdg);
}

/* The default directory is used only when it is the user's own and nobody
 * else may write in it: else anyone could serve a socket there and receive
 * the user's events (or drive the user's producers). */
TEST(the_default_socket_directory_must_be_the_users) {
  char xdg[600], dir[700], prod[800], cons[800], want[1200];
  private_runtime_dir(xdg, sizeof xdg, dir, sizeof dir);
  /* Missing: clients just find nobody; the service makes it, 0700. */
  ASSERT_OK(etch__ipc_default_paths(prod, cons, sizeof prod, false));
  snprintf(want, sizeof want, "%s/producer.sock", dir);
  ASSERT_TRUE(strcmp(prod, want) == 0);
  ASSERT_OK(etch__ipc_default_paths(prod, cons, sizeof prod, true));
  struct stat st;
  ASSERT_EQ_INT(lstat(dir, &st), 0);
  ASSERT_EQ_INT((int)(st.st_mode & 07777), 0700);
  ASSERT_OK(etch__ipc_default_paths(prod, cons, sizeof prod, false));
  /* Writable by the group, by others. */
  ASSERT_EQ_INT(chmod(dir, 0770), 0);
  snprintf(want, sizeof want,
           "'%s' is writable by its group (mode 0770): refusing to use it "
           "for etch's sockets",
           dir);
  ASSERT_ERR(etch__ipc_default_paths(prod, cons, sizeof prod, false),
             ETCH_EINVAL, want);
  ASSERT_ERR(etch__ipc_default_paths(prod, cons, sizeof prod, true),
             ETCH_EINVAL, want);
  ASSERT_EQ_INT(chmod(dir, 01777), 0);
  snprintf(want, sizeof want,
           "'%s' is writable by others (mode 1777): refusing to use it for "
           "etch's sockets",
           dir);
  ASSERT_ERR(etch__ipc_default_paths(prod, cons, sizeof prod, false),
             ETCH_EINVAL, want);
  ASSERT_EQ_INT(chmod(dir, 0700), 0);
  /* Someone else's (as root: a uid nobody has). */
  if (geteuid() == 0) {
    ASSERT_EQ_INT(chown(dir, 12345, 12345), 0);
    snprintf(want, sizeof want,
             "'%s' is owned by uid 12345, not by you (uid 0): refusing to "
             "use it for etch's sockets",
             dir);
    ASSERT_ERR(etch__ipc_default_paths(prod, cons, sizeof prod, false),
               ETCH_EINVAL, want);
    ASSERT_ERR(etch__ipc_default_paths(prod, cons, sizeof prod, true),
               ETCH_EINVAL, want);
  }
  /* A link to a directory, even one's own. */
  ASSERT_EQ_INT(rmdir(dir), 0);
  ASSERT_EQ_INT(symlink(xdg, dir), 0);
  snprintf(want, sizeof want,
           "'%s' is not a directory (a link, or a file): refusing to use it "
           "for etch's sockets",
           dir);
  ASSERT_ERR(etch__ipc_default_paths(prod, cons, sizeof prod, true),
             ETCH_EINVAL, want);
  /* Paths named by Perfetto's variables are taken as given. */
  setenv("PERFETTO_PRODUCER_SOCK_NAME", "/a/p.sock", 1);
  setenv("PERFETTO_CONSUMER_SOCK_NAME", "/a/c.sock", 1);
  ASSERT_OK(etch__ipc_default_paths(prod, cons, sizeof prod, false));
  ASSERT_TRUE(strcmp(prod, "/a/p.sock") == 0);
  ASSERT_TRUE(strcmp(cons, "/a/c.sock") == 0);
}

/* A client on the default path talks only to a service of its own user or
 * root; a path named by Perfetto's variable is trusted as given. */
TEST(a_service_of_another_user_is_refused_on_the_default_path) {
  if (geteuid() != 0) return; /* needs to listen as another uid */
  char xdg[600], dir[700], prod[800], cons[800], want[1200];
  private_runtime_dir(xdg, sizeof xdg, dir, sizeof dir);
  ASSERT_OK(etch__ipc_default_paths(prod, cons, sizeof prod, true));
  /* A service of uid 12345: bound as root, listening as 12345 (the peer
   * credentials a client sees are the listener's at listen()). */
  int ready[2], report[2];
  ASSERT_EQ_INT(pipe(ready), 0);
  ASSERT_EQ_INT(pipe(report), 0);
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(cons) >= sizeof a.sun_path) _exit(3);
    memcpy(a.sun_path, cons, strlen(cons) + 1);
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) != 0 ||
        chmod(cons, 0666) != 0 || setresgid(12345, 12345, 12345) != 0 ||
        setresuid(12345, 12345, 12345) != 0 || listen(l, 4) != 0)
      _exit(1);
    (void)!write(ready[1], "r", 1);
    /* Each connection: how many bytes came before it closed. */
    for (int i = 0; i < 2; i++) {
      int c = accept(l, NULL, NULL);
      if (c < 0) _exit(2);
      char buf[256];
      ssize_t n, total = 0;
      while ((n = read(c, buf, sizeof buf)) > 0) total += n;
      char r = (char)('0' + (total > 9 ? 9 : total));
      (void)!write(report[1], &r, 1);
      close(c);
    }
    _exit(0);
  }
  char c;
  ASSERT_EQ_INT(read(ready[0], &c, 1), 1);
  int fd;
  snprintf(want, sizeof want,
           "the service on '%s' runs as uid 12345, not as you (uid 0) or "
           "root: refused (set PERFETTO_CONSUMER_SOCK_NAME to trust it)",
           cons);
  ASSERT_ERR(etch__ipc_connect_service(cons, false, &fd), ETCH_EINVAL, want);
  ASSERT_EQ_INT(fd, -1);
  ASSERT_EQ_INT(read(report[0], &c, 1), 1);
  ASSERT_EQ_INT(c, '0'); /* closed without a byte */
  /* Named by the variable: trusted. */
  setenv("PERFETTO_CONSUMER_SOCK_NAME", cons, 1);
  ASSERT_OK(etch__ipc_connect_service(cons, false, &fd));
  ASSERT_EQ_INT(write(fd, "abc", 3), 3);
  close(fd);
  ASSERT_EQ_INT(read(report[0], &c, 1), 1);
  ASSERT_EQ_INT(c, '3');
  int st;
  ASSERT_EQ_INT(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* A service of one's own, on the default path: accepted. */
  unsetenv("PERFETTO_CONSUMER_SOCK_NAME");
  unlink(prod);
  int l;
  ASSERT_OK(etch__ipc_listen(prod, false, &l));
  ASSERT_OK(etch__ipc_connect_service(prod, true, &fd));
  close(fd);
  close(l);
}

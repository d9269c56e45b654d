/*
 * ipc.c - IPCFrame encoding and decoding, and non-blocking connections
 * over stream sockets (Unix with descriptor passing, TCP, vsock).
 */
#define _GNU_SOURCE
#include "ipc/ipc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <linux/vm_sockets.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "base/clock.h"
#include "base/envvars.h"
#include "proto/ipc.h"

/* ---- frames ---- */

static bool take_bytes(const etch__pb_field *fl, etch_ipc_bytes *out) {
  if (fl->wt != 2) return false;
  out->data = fl->data;
  out->len = (uint32_t)fl->len;
  return true;
}

static int bad(const char *what) {
  return etch__error(ETCH_EFORMAT, "malformed IPC frame: %s", what);
}

static int decode_bind_reply(const uint8_t *p, size_t n, etch_ipc_frame *f) {
  etch__pb_dec d;
  etch__pb_field fl;
  etch__pb_dec_init(&d, p, n);
  while (etch__pb_next(&d, &fl)) {
    if (fl.id == ETCH_IPC_BIND_REPLY_SUCCESS && fl.wt == 0) {
      f->success = fl.u != 0;
    } else if (fl.id == ETCH_IPC_BIND_REPLY_SERVICE_ID && fl.wt == 0) {
      f->service_id = (uint32_t)fl.u;
    } else if (fl.id == ETCH_IPC_BIND_REPLY_METHODS && fl.wt == 2) {
      if (f->nmethods == ETCH_IPC_MAX_METHODS) return bad("too many methods");
      etch_ipc_method *m = &f->methods[f->nmethods++];
      memset(m, 0, sizeof *m);
      etch__pb_dec md;
      etch__pb_field mf;
      etch__pb_dec_init(&md, fl.data, fl.len);
      while (etch__pb_next(&md, &mf)) {
        if (mf.id == ETCH_IPC_METHOD_INFO_ID && mf.wt == 0)
          m->id = (uint32_t)mf.u;
        else if (mf.id == ETCH_IPC_METHOD_INFO_NAME)
          take_bytes(&mf, &m->name);
      }
      if (md.err) return bad("method info");
    }
  }
  return d.err ? bad("bind reply") : ETCH_OK;
}

int etch__ipc_frame_decode(const uint8_t *data, size_t len, etch_ipc_frame *f) {
  memset(f, 0, offsetof(etch_ipc_frame, methods));
  etch__pb_dec d;
  etch__pb_field fl;
  etch__pb_dec_init(&d, data, len);
  while (etch__pb_next(&d, &fl)) {
    etch__pb_dec s;
    etch__pb_field sf;
    switch (fl.id) {
    case ETCH_IPCF_REQUEST_ID:
      if (fl.wt != 0) return bad("request_id is not a varint");
      f->request_id = fl.u;
      break;
    case ETCH_IPCF_BIND_SERVICE:
      if (fl.wt != 2) return bad("bind_service is not a message");
      f->kind = ETCH_IPC_BIND;
      f->name.data = NULL;
      f->name.len = 0;
      etch__pb_dec_init(&s, fl.data, fl.len);
      while (etch__pb_next(&s, &sf))
        if (sf.id == ETCH_IPC_BIND_SERVICE_NAME) take_bytes(&sf, &f->name);
      if (s.err) return bad("bind_service");
      break;
    case ETCH_IPCF_BIND_SERVICE_REPLY: {
      if (fl.wt != 2) return bad("bind_service_reply is not a message");
      f->kind = ETCH_IPC_BIND_REPLY;
      f->nmethods = 0;
      int rc = decode_bind_reply(fl.data, fl.len, f);
      if (rc) return rc;
      break;
    }
    case ETCH_IPCF_INVOKE_METHOD:
      if (fl.wt != 2) return bad("invoke_method is not a message");
      f->kind = ETCH_IPC_INVOKE;
      etch__pb_dec_init(&s, fl.data, fl.len);
      while (etch__pb_next(&s, &sf)) {
        if (sf.id == ETCH_IPC_INVOKE_SERVICE_ID && sf.wt == 0)
          f->service_id = (uint32_t)sf.u;
        else if (sf.id == ETCH_IPC_INVOKE_METHOD_ID && sf.wt == 0)
          f->method_id = (uint32_t)sf.u;
        else if (sf.id == ETCH_IPC_INVOKE_ARGS)
          take_bytes(&sf, &f->body);
        else if (sf.id == ETCH_IPC_INVOKE_DROP_REPLY && sf.wt == 0)
          f->drop_reply = sf.u != 0;
      }
      if (s.err) return bad("invoke_method");
      break;
    case ETCH_IPCF_INVOKE_METHOD_REPLY:
      if (fl.wt != 2) return bad("invoke_method_reply is not a message");
      f->kind = ETCH_IPC_REPLY;
      etch__pb_dec_init(&s, fl.data, fl.len);
      while (etch__pb_next(&s, &sf)) {
        if (sf.id == ETCH_IPC_REPLY_SUCCESS && sf.wt == 0)
          f->success = sf.u != 0;
        else if (sf.id == ETCH_IPC_REPLY_HAS_MORE && sf.wt == 0)
          f->has_more = sf.u != 0;
        else if (sf.id == ETCH_IPC_REPLY_PROTO)
          take_bytes(&sf, &f->body);
      }
      if (s.err) return bad("invoke_method_reply");
      break;
    case ETCH_IPCF_REQUEST_ERROR:
      if (fl.wt != 2) return bad("request_error is not a message");
      f->kind = ETCH_IPC_ERROR;
      etch__pb_dec_init(&s, fl.data, fl.len);
      while (etch__pb_next(&s, &sf))
        if (sf.id == ETCH_IPC_ERROR_ERROR) take_bytes(&sf, &f->name);
      if (s.err) return bad("request_error");
      break;
    case ETCH_IPCF_SET_PEER_IDENTITY:
      if (fl.wt != 2) return bad("set_peer_identity is not a message");
      f->kind = ETCH_IPC_PEER_IDENTITY;
      etch__pb_dec_init(&s, fl.data, fl.len);
      while (etch__pb_next(&s, &sf)) {
        if (sf.id == ETCH_IPC_PEER_PID && sf.wt == 0) {
          f->has_pid = true;
          f->pid = (int32_t)sf.u;
        } else if (sf.id == ETCH_IPC_PEER_UID && sf.wt == 0) {
          f->has_uid = true;
          f->uid = (int32_t)sf.u;
        } else if (sf.id == ETCH_IPC_PEER_MACHINE_ID_HINT) {
          take_bytes(&sf, &f->machine_id_hint);
        } else if (sf.id == ETCH_IPC_PEER_MACHINE_NAME) {
          take_bytes(&sf, &f->name);
        }
      }
      if (s.err) return bad("set_peer_identity");
      break;
    default: /* data_for_testing and fields of later versions */
      break;
    }
  }
  if (d.err) return bad(d.err_msg ? d.err_msg : "not a protobuf message");
  return ETCH_OK;
}

static void put_bytes(etch__pb_stream *s, uint32_t field, etch_ipc_bytes b) {
  etch__pb_write_bytes_field(s, field, b.data ? b.data : (const uint8_t *)"",
                            b.len);
}

void etch__ipc_frame_encode(etch__pb_buf *b, const etch_ipc_frame *f) {
  etch__pb_stream *s = &b->s;
  size_t at = etch__pb_buf_len(b);
  static const uint8_t zero[4];
  etch__pb_write_bytes(s, zero, 4);
  etch__pb_write_varint_field(s, ETCH_IPCF_REQUEST_ID, f->request_id);
  etch__pb_nested m, mi;
  switch (f->kind) {
  case ETCH_IPC_BIND:
    etch__pb_nested_begin(s, ETCH_IPCF_BIND_SERVICE, &m);
    put_bytes(s, ETCH_IPC_BIND_SERVICE_NAME, f->name);
    etch__pb_nested_end(s, &m);
    break;
  case ETCH_IPC_BIND_REPLY:
    etch__pb_nested_begin(s, ETCH_IPCF_BIND_SERVICE_REPLY, &m);
    etch__pb_write_varint_field(s, ETCH_IPC_BIND_REPLY_SUCCESS, f->success);
    if (f->success) {
      etch__pb_write_varint_field(s, ETCH_IPC_BIND_REPLY_SERVICE_ID,
                                 f->service_id);
      for (uint32_t i = 0; i < f->nmethods; i++) {
        etch__pb_nested_begin(s, ETCH_IPC_BIND_REPLY_METHODS, &mi);
        etch__pb_write_varint_field(s, ETCH_IPC_METHOD_INFO_ID,
                                   f->methods[i].id);
        put_bytes(s, ETCH_IPC_METHOD_INFO_NAME, f->methods[i].name);
        etch__pb_nested_end(s, &mi);
      }
    }
    etch__pb_nested_end(s, &m);
    break;
  case ETCH_IPC_INVOKE:
    etch__pb_nested_begin(s, ETCH_IPCF_INVOKE_METHOD, &m);
    etch__pb_write_varint_field(s, ETCH_IPC_INVOKE_SERVICE_ID, f->service_id);
    etch__pb_write_varint_field(s, ETCH_IPC_INVOKE_METHOD_ID, f->method_id);
    put_bytes(s, ETCH_IPC_INVOKE_ARGS, f->body);
    if (f->drop_reply)
      etch__pb_write_varint_field(s, ETCH_IPC_INVOKE_DROP_REPLY, 1);
    etch__pb_nested_end(s, &m);
    break;
  case ETCH_IPC_REPLY:
    etch__pb_nested_begin(s, ETCH_IPCF_INVOKE_METHOD_REPLY, &m);
    etch__pb_write_varint_field(s, ETCH_IPC_REPLY_SUCCESS, f->success);
    if (f->has_more) etch__pb_write_varint_field(s, ETCH_IPC_REPLY_HAS_MORE, 1);
    if (f->success) put_bytes(s, ETCH_IPC_REPLY_PROTO, f->body);
    etch__pb_nested_end(s, &m);
    break;
  case ETCH_IPC_ERROR:
    etch__pb_nested_begin(s, ETCH_IPCF_REQUEST_ERROR, &m);
    put_bytes(s, ETCH_IPC_ERROR_ERROR, f->name);
    etch__pb_nested_end(s, &m);
    break;
  case ETCH_IPC_PEER_IDENTITY:
    etch__pb_nested_begin(s, ETCH_IPCF_SET_PEER_IDENTITY, &m);
    if (f->has_pid)
      etch__pb_write_varint_field(s, ETCH_IPC_PEER_PID,
                                 (uint64_t)(int64_t)f->pid);
    if (f->has_uid)
      etch__pb_write_varint_field(s, ETCH_IPC_PEER_UID,
                                 (uint64_t)(int64_t)f->uid);
    if (f->machine_id_hint.len)
      put_bytes(s, ETCH_IPC_PEER_MACHINE_ID_HINT, f->machine_id_hint);
    if (f->name.len) put_bytes(s, ETCH_IPC_PEER_MACHINE_NAME, f->name);
    etch__pb_nested_end(s, &m);
    break;
  case ETCH_IPC_NONE:
    break;
  }
  if (s->failed) return;
  uint32_t n = (uint32_t)(etch__pb_buf_len(b) - at - 4);
  uint8_t *p = etch__pb_buf_data(b) + at;
  p[0] = (uint8_t)n;
  p[1] = (uint8_t)(n >> 8);
  p[2] = (uint8_t)(n >> 16);
  p[3] = (uint8_t)(n >> 24);
}

bool etch__ipc_bytes_eq(etch_ipc_bytes b, const char *s) {
  size_t n = strlen(s);
  return b.len == n && (n == 0 || memcmp(b.data, s, n) == 0);
}

uint32_t etch__ipc_method_id(const etch_ipc_frame *r, const char *name) {
  for (uint32_t i = 0; i < r->nmethods; i++)
    if (etch__ipc_bytes_eq(r->methods[i].name, name)) return r->methods[i].id;
  return 0;
}

/* ---- sockets ---- */

/* Socket names, as Perfetto's programs read them: "vsock://CID:PORT" (or
 * "vsock:CID:PORT"), "[ADDR]:PORT", "HOST:PORT" (a name that ends in a colon
 * and a number), "@NAME" (an abstract Unix socket), else a Unix path. */
etch_sock_family etch__ipc_family(const char *name) {
  if (!strncmp(name, "vsock:", 6)) return ETCH_SOCK_VSOCK;
  if (name[0] == '@') return ETCH_SOCK_UNIX;
  const char *col = strrchr(name, ':');
  if (col && col[1]) {
    const char *q = col + 1;
    while (*q >= '0' && *q <= '9') q++;
    if (!*q) return name[0] == '[' ? ETCH_SOCK_INET6 : ETCH_SOCK_INET;
  }
  return ETCH_SOCK_UNIX;
}

bool etch__ipc_name_at(const char *list, unsigned i, char *out, size_t cap) {
  const char *p = list;
  for (unsigned k = 0; k < i; k++) {
    p = strchr(p, ',');
    if (!p) return false;
    p++;
  }
  size_t n = strcspn(p, ",");
  if (n == 0 || n >= cap) return false;
  memcpy(out, p, n);
  out[n] = '\0';
  return true;
}

typedef struct sock_addr {
  int family;
  socklen_t len;
  union {
    struct sockaddr sa;
    struct sockaddr_un un;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
    struct sockaddr_vm vm;
    struct sockaddr_storage ss;
  } u;
} sock_addr;

static int port_of(const char *s, const char *name, uint32_t max,
                   uint32_t *out) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (!*s || *end || errno || v > max)
    return etch__error(ETCH_EINVAL, "'%s': '%s' is not a number up to %u",
                       name, s, (unsigned)max);
  *out = (uint32_t)v;
  return ETCH_OK;
}

/* Resolves a socket name into an address (a host name through the
 * resolver, for an IPv4 name). */
static int resolve(const char *name, bool passive, sock_addr *a) {
  memset(a, 0, sizeof *a);
  etch_sock_family fam = etch__ipc_family(name);
  if (fam == ETCH_SOCK_UNIX) {
    size_t n = strlen(name);
    if (n == 0) return etch__error(ETCH_EINVAL, "an empty socket name");
    if (n >= sizeof a->u.un.sun_path)
      return etch__error(ETCH_EINVAL,
                         "socket path '%s' is longer than %zu bytes", name,
                         sizeof a->u.un.sun_path - 1);
    a->family = AF_UNIX;
    a->u.un.sun_family = AF_UNIX;
    memcpy(a->u.un.sun_path, name, n);
    a->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
    if (name[0] == '@') { /* abstract: no terminator, a NUL first */
      a->u.un.sun_path[0] = '\0';
      a->len--;
    }
    return ETCH_OK;
  }
  if (fam == ETCH_SOCK_VSOCK) {
    const char *p = name + (strncmp(name, "vsock://", 8) ? 6 : 8);
    const char *col = strchr(p, ':');
    char cid[16];
    if (!col || (size_t)(col - p) >= sizeof cid)
      return etch__error(ETCH_EINVAL,
                         "'%s' is not a vsock address (vsock://CID:PORT)",
                         name);
    memcpy(cid, p, (size_t)(col - p));
    cid[col - p] = '\0';
    uint32_t c = 0, port = 0;
    int rc = port_of(cid, name, UINT32_MAX, &c);
    if (!rc) rc = port_of(col + 1, name, UINT32_MAX, &port);
    if (rc) return rc;
    a->family = AF_VSOCK;
    a->u.vm.svm_family = AF_VSOCK;
    a->u.vm.svm_cid = c;
    a->u.vm.svm_port = port;
    a->len = sizeof a->u.vm;
    return ETCH_OK;
  }
  /* HOST:PORT or [ADDR]:PORT */
  char host[256];
  const char *col = strrchr(name, ':');
  const char *h = name, *he = col;
  if (fam == ETCH_SOCK_INET6) {
    h = name + 1;
    he = col > name && col[-1] == ']' ? col - 1 : NULL;
    if (!he)
      return etch__error(ETCH_EINVAL,
                         "'%s' is not an IPv6 address ([ADDR]:PORT)", name);
  }
  if ((size_t)(he - h) >= sizeof host)
    return etch__error(ETCH_EINVAL, "'%s': the host name is too long", name);
  memcpy(host, h, (size_t)(he - h));
  host[he - h] = '\0';
  uint32_t port = 0;
  int rc = port_of(col + 1, name, 65535, &port);
  if (rc) return rc;
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = fam == ETCH_SOCK_INET6 ? AF_INET6 : AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  int g = getaddrinfo(host[0] ? host : NULL, col + 1, &hints, &res);
  if (g != 0 || !res)
    return etch__error(ETCH_EINVAL, "cannot resolve '%s': %s", name,
                       g ? gai_strerror(g) : "no address");
  if (res->ai_addrlen > sizeof a->u.ss) {
    freeaddrinfo(res);
    return etch__error(ETCH_EINVAL, "cannot resolve '%s'", name);
  }
  a->family = res->ai_family;
  a->len = res->ai_addrlen;
  memcpy(&a->u.ss, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  return ETCH_OK;
}

static void tune(int fd, int family) {
  if (family == AF_INET || family == AF_INET6) {
    int one = 1; /* a frame goes out when it is written, not later */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
}

int etch__ipc_connect(const char *path, int *fd_out) {
  *fd_out = -1;
  sock_addr a;
  int rc = resolve(path, false, &a);
  if (rc) return rc;
  int fd = socket(a.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return etch__error(ETCH_EIO, "cannot create a socket for '%s': %s", path,
                       strerror(errno));
  int c;
  do c = connect(fd, &a.u.sa, a.len);
  while (c != 0 && errno == EINTR);
  if (c != 0) {
    int e = errno;
    close(fd);
    return etch__error(ETCH_EIO, "cannot connect to '%s': %s", path,
                       strerror(e));
  }
  tune(fd, a.family);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  *fd_out = fd;
  return ETCH_OK;
}

int etch__ipc_connect_start(const char *path, int *fd_out, bool *pending) {
  *fd_out = -1;
  *pending = false;
  sock_addr a;
  int rc = resolve(path, false, &a);
  if (rc) return rc;
  int fd = socket(a.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return etch__error(ETCH_EIO, "cannot create a socket for '%s': %s", path,
                       strerror(errno));
  int c;
  do c = connect(fd, &a.u.sa, a.len);
  while (c != 0 && errno == EINTR);
  if (c != 0 && errno != EINPROGRESS) {
    int e = errno;
    close(fd);
    return etch__error(ETCH_EIO, "cannot connect to '%s': %s", path,
                       strerror(e));
  }
  tune(fd, a.family);
  *pending = c != 0;
  *fd_out = fd;
  return ETCH_OK;
}

int etch__ipc_connect_finish(int fd, const char *path) {
  int e = 0;
  socklen_t n = sizeof e;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &n) != 0) e = errno;
  if (e)
    return etch__error(ETCH_EIO, "cannot connect to '%s': %s", path,
                       strerror(e));
  return ETCH_OK;
}

int etch__ipc_listen(const char *path, bool group_rw, int *fd_out) {
  *fd_out = -1;
  sock_addr a;
  int rc = resolve(path, true, &a);
  if (rc) return rc;
  bool file = a.family == AF_UNIX && path[0] != '@';
  if (file) {
    /* A socket file nobody listens on is left by a service that died. */
    int probe;
    if (etch__ipc_connect(path, &probe) == ETCH_OK) {
      close(probe);
      return etch__error(ETCH_EBUSY, "a service already listens on '%s'",
                         path);
    }
    struct stat st;
    if (lstat(path, &st) == 0) {
      if (!S_ISSOCK(st.st_mode))
        return etch__error(ETCH_EBUSY, "'%s' exists and is not a socket",
                           path);
      unlink(path);
    }
  }
  int fd = socket(a.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return etch__error(ETCH_EIO, "cannot create a socket for '%s': %s", path,
                       strerror(errno));
  if (a.family != AF_UNIX) {
    int one = 1; /* a restarted service takes its port back at once */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  }
  /* Created with the right mode: no moment when others could connect. */
  mode_t old = umask(group_rw ? 0117 : 0177);
  int b = bind(fd, &a.u.sa, a.len);
  int e = errno;
  umask(old);
  if (b != 0 || listen(fd, 64) != 0) {
    if (b == 0) e = errno;
    close(fd);
    return etch__error(e == EADDRINUSE ? ETCH_EBUSY : ETCH_EIO,
                       "cannot listen on '%s': %s", path, strerror(e));
  }
  *fd_out = fd;
  return ETCH_OK;
}

/* An address as a socket name, the form etch__ipc_connect takes. */
static void name_of(const struct sockaddr_storage *ss, socklen_t len,
                    char *out, size_t cap) {
  char host[INET6_ADDRSTRLEN];
  out[0] = '\0';
  if (ss->ss_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    snprintf(out, cap, "%s:%u", host, (unsigned)ntohs(in->sin_port));
  } else if (ss->ss_family == AF_INET6 &&
             len >= sizeof(struct sockaddr_in6)) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    snprintf(out, cap, "[%s]:%u", host, (unsigned)ntohs(in6->sin6_port));
  } else if (ss->ss_family == AF_VSOCK && len >= sizeof(struct sockaddr_vm)) {
    const struct sockaddr_vm *vm = (const struct sockaddr_vm *)ss;
    snprintf(out, cap, "vsock://%u:%u", (unsigned)vm->svm_cid,
             (unsigned)vm->svm_port);
  } else if (ss->ss_family == AF_UNIX) {
    snprintf(out, cap, "unix");
  }
}

int etch__ipc_local_name(int fd, char *out, size_t cap) {
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
    return etch__error(ETCH_EIO, "getsockname: %s", strerror(errno));
  name_of(&ss, len, out, cap);
  return ETCH_OK;
}

bool etch__ipc_is_loopback(const char *name) {
  sock_addr a;
  if (resolve(name, true, &a)) return false;
  switch (a.family) {
  case AF_UNIX:
    return true;
  case AF_INET:
    return (ntohl(a.u.in.sin_addr.s_addr) >> 24) == 127;
  case AF_INET6:
    return IN6_IS_ADDR_LOOPBACK(&a.u.in6.sin6_addr);
  case AF_VSOCK:
    return a.u.vm.svm_cid == 1; /* VMADDR_CID_LOCAL */
  }
  return false;
}

int etch__ipc_accept(int listen_fd, int *fd_out) {
  int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  *fd_out = fd;
  if (fd >= 0) return ETCH_OK;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
      errno == ECONNABORTED)
    return ETCH_OK;
  if (errno == EMFILE || errno == ENFILE)
    return etch__error(ETCH_ELIMIT, "accept: %s", strerror(errno));
  return etch__error(ETCH_EIO, "accept: %s", strerror(errno));
}

/* ---- connections ---- */

void etch__ipc_conn_init(etch_ipc_conn *c, int fd, size_t tx_limit) {
  memset(c, 0, sizeof *c);
  c->fd = fd;
  c->tx_limit = tx_limit;
  c->max_frame = ETCH_IPC_MAX_FRAME;
  c->peer_pid = -1;
  c->peer_uid = (uid_t)-1;
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (fd >= 0 && getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 &&
      ss.ss_family != AF_UNIX) {
    /* A network peer: no credentials, only an address. An accepted
     * socket too sends a frame when it is written (without this, a small
     * reply waits for the peer's delayed ACK: 40 ms a round trip). */
    c->remote = true;
    tune(fd, ss.ss_family);
    name_of(&ss, sl, c->peer_addr, sizeof c->peer_addr);
    return;
  }
  struct ucred cr;
  socklen_t n = sizeof cr;
  if (fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &n) == 0) {
    c->peer_pid = cr.pid;
    c->peer_uid = cr.uid;
  }
}

void etch__ipc_conn_close(etch_ipc_conn *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  for (uint32_t i = 0; i < c->nfds; i++) close(c->fds[i]);
  for (uint32_t i = 0; i < c->ntxfds; i++) close(c->txfds[i].fd);
  c->nfds = c->ntxfds = 0;
  free(c->rx);
  free(c->tx);
  c->rx = c->tx = NULL;
  c->rx_len = c->rx_off = c->rx_cap = 0;
  c->tx_len = c->tx_off = c->tx_cap = 0;
  c->partial_since_ns = 0;
}

int etch__ipc_conn_fail(etch_ipc_conn *c, const char *fmt, ...) {
  if (!c->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    c->failed = true;
  }
  return ETCH_EIO;
}

static void keep_fds(etch_ipc_conn *c, struct msghdr *m) {
  for (struct cmsghdr *h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR(m, h)) {
    if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS) continue;
    size_t n = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    int *fds = (int *)CMSG_DATA(h);
    for (size_t i = 0; i < n; i++) {
      int fd;
      memcpy(&fd, fds + i, sizeof fd);
      if (c->nfds < ETCH_IPC_MAX_FDS)
        c->fds[c->nfds++] = fd;
      else {
        close(fd); /* more than any frame needs: the peer misbehaves */
        etch__ipc_conn_fail(c, "peer sent more file descriptors than frames "
                               "that take them");
      }
    }
  }
}

#define RX_MIN 16384u /* the receive buffer's first size */

int etch__ipc_conn_read(etch_ipc_conn *c) {
  if (c->failed) return ETCH_EIO;
  /* The most a frame can need: a peer cannot make a connection hold more
   * than one frame's worth of bytes it has not finished. */
  size_t lim = (size_t)(c->max_frame < ETCH_IPC_MAX_FRAME ? c->max_frame
                                                          : ETCH_IPC_MAX_FRAME) +
               4;
  if (lim < RX_MIN) lim = RX_MIN;
  for (;;) {
    if (c->rx_off && c->rx_off == c->rx_len) c->rx_off = c->rx_len = 0;
    if (c->rx_cap - c->rx_len < 4096) {
      if (c->rx_off) {
        memmove(c->rx, c->rx + c->rx_off, c->rx_len - c->rx_off);
        c->rx_len -= c->rx_off;
        c->rx_off = 0;
      }
      if (c->rx_cap - c->rx_len < 4096) {
        size_t cap = c->rx_cap ? c->rx_cap * 2 : RX_MIN;
        if (cap > lim) cap = lim > c->rx_cap ? lim : c->rx_cap;
        /* Full of frames not yet taken (a whole frame fits): let the
         * caller take them. */
        if (cap == c->rx_len) return ETCH_OK;
        if (cap != c->rx_cap) {
          uint8_t *n = (uint8_t *)etch__realloc(c->rx, cap);
          if (!n) return etch__ipc_conn_fail(c, "out of memory");
          c->rx = n;
          c->rx_cap = cap;
        }
      }
    }
    struct iovec iov = {c->rx + c->rx_len, c->rx_cap - c->rx_len};
    union {
      struct cmsghdr h;
      char buf[CMSG_SPACE(sizeof(int) * ETCH_IPC_MAX_FDS)];
    } ctl;
    struct msghdr m = {0};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl.buf;
    m.msg_controllen = sizeof ctl.buf;
    ssize_t n = recvmsg(c->fd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return ETCH_OK;
      return etch__ipc_conn_fail(c, "read: %s", strerror(errno));
    }
    keep_fds(c, &m);
    if (m.msg_flags & MSG_CTRUNC)
      etch__ipc_conn_fail(c, "peer sent more file descriptors than allowed");
    if (n == 0) {
      etch__ipc_conn_fail(c, "peer closed the connection");
      c->eof = true;
      return ETCH_EIO;
    }
    c->rx_len += (size_t)n;
    if (c->failed) return ETCH_EIO;
    if ((size_t)n < iov.iov_len) return ETCH_OK;
  }
}

int etch__ipc_conn_next(etch_ipc_conn *c, etch_ipc_frame *f) {
  if (c->failed && !c->eof) return ETCH_EFORMAT;
  if (c->rx_off == c->rx_len) {
    /* Everything handed out (the last frame's pointers expire now): a
     * buffer grown for a large frame is let go of. */
    c->rx_off = c->rx_len = 0;
    c->partial_since_ns = 0;
    if (c->rx_cap > RX_MIN) {
      free(c->rx);
      c->rx = NULL;
      c->rx_cap = 0;
    }
    return 0;
  }
  size_t have = c->rx_len - c->rx_off;
  const uint8_t *p = c->rx + c->rx_off;
  uint32_t n = 0;
  if (have >= 4)
    n = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
        (uint32_t)p[3] << 24;
  if (have >= 4 && n > c->max_frame) {
    c->eof = false;
    etch__ipc_conn_fail(c, "frame of %u bytes, larger than the limit of %u",
                        n, c->max_frame);
    return ETCH_EFORMAT;
  }
  if (have < 4 || have - 4 < n) {
    if (!c->partial_since_ns) c->partial_since_ns = etch__monotonic_ns();
    return 0;
  }
  c->partial_since_ns = 0;
  c->rx_off += 4 + (size_t)n;
  if (etch__ipc_frame_decode(p + 4, n, f) != ETCH_OK) {
    c->eof = false;
    c->failed = false;
    etch__ipc_conn_fail(c, "%s", etch_last_error());
    return ETCH_EFORMAT;
  }
  return 1;
}

int etch__ipc_conn_take_fd(etch_ipc_conn *c) {
  if (!c->nfds) return -1;
  int fd = c->fds[0];
  memmove(c->fds, c->fds + 1, (c->nfds - 1) * sizeof(int));
  c->nfds--;
  return fd;
}

/* Queues n bytes (whole frames with their length prefixes; descriptor fd
 * with the first of them unless it is -1) and writes what the socket
 * takes. */
static int queue_bytes(etch_ipc_conn *c, const uint8_t *data, size_t n,
                       int fd) {
  if (c->tx_off == c->tx_len) { /* nothing queued: start afresh */
    c->tx_base += c->tx_len;
    c->tx_off = c->tx_len = 0;
  }
  if (c->tx_len - c->tx_off + n > c->tx_limit)
    return etch__ipc_conn_fail(c, "peer does not read its socket (%zu bytes "
                                  "queued)",
                               c->tx_len - c->tx_off);
  if (c->tx_cap - c->tx_len < n && c->tx_off) {
    memmove(c->tx, c->tx + c->tx_off, c->tx_len - c->tx_off);
    c->tx_len -= c->tx_off;
    c->tx_base += c->tx_off;
    c->tx_off = 0;
  }
  if (c->tx_cap - c->tx_len < n) {
    size_t cap = c->tx_cap ? c->tx_cap : 4096;
    while (cap - c->tx_len < n) cap *= 2;
    uint8_t *t = (uint8_t *)etch__realloc(c->tx, cap);
    if (!t) return etch__ipc_conn_fail(c, "out of memory");
    c->tx = t;
    c->tx_cap = cap;
  }
  if (fd >= 0) {
    if (c->ntxfds == ETCH_IPC_MAX_FDS)
      return etch__ipc_conn_fail(c, "too many descriptors queued");
    int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (d < 0) return etch__ipc_conn_fail(c, "dup: %s", strerror(errno));
    c->txfds[c->ntxfds].at = c->tx_base + c->tx_len;
    c->txfds[c->ntxfds++].fd = d;
  }
  memcpy(c->tx + c->tx_len, data, n);
  c->tx_len += n;
  return etch__ipc_conn_flush(c);
}

int etch__ipc_conn_send(etch_ipc_conn *c, const etch_ipc_frame *f, int fd) {
  if (c->failed) return ETCH_EIO;
  if (fd >= 0 && c->remote)
    return etch__error(ETCH_EINVAL,
                       "a descriptor cannot travel over a network connection");
  etch__pb_buf b;
  etch__pb_buf_init(&b, 256, ETCH_IPC_MAX_FRAME + 4);
  etch__ipc_frame_encode(&b, f);
  if (b.s.failed && b.nomem) {
    /* Not sent, and the peer may wait for it: the connection ends. */
    etch__pb_buf_free(&b);
    etch__ipc_conn_fail(c, "out of memory encoding a frame");
    return etch__error(ETCH_ENOMEM, "out of memory encoding an IPC frame");
  }
  if (b.s.failed) {
    etch__pb_buf_free(&b);
    return etch__error(ETCH_ELIMIT, "IPC frame larger than %u bytes",
                       ETCH_IPC_MAX_FRAME);
  }
  int rc = queue_bytes(c, etch__pb_buf_data(&b), etch__pb_buf_len(&b), fd);
  etch__pb_buf_free(&b);
  return rc;
}

int etch__ipc_conn_send_bytes(etch_ipc_conn *c, const uint8_t *frame,
                              size_t n) {
  if (c->failed) return ETCH_EIO;
  return queue_bytes(c, frame, n, -1);
}

int etch__ipc_conn_flush(etch_ipc_conn *c) {
  if (c->failed) return ETCH_EIO;
  while (c->tx_off < c->tx_len) {
    uint64_t pos = c->tx_base + c->tx_off;
    size_t len = c->tx_len - c->tx_off;
    int fd = -1;
    if (c->ntxfds) {
      if (c->txfds[0].at == pos)
        fd = c->txfds[0].fd;
      else if (c->txfds[0].at < pos + len)
        len = (size_t)(c->txfds[0].at - pos); /* the fd starts its frame */
    }
    struct iovec iov = {c->tx + c->tx_off, len};
    union {
      struct cmsghdr h;
      char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct msghdr m = {0};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    if (fd >= 0) {
      memset(&ctl, 0, sizeof ctl);
      m.msg_control = ctl.buf;
      m.msg_controllen = sizeof ctl.buf;
      struct cmsghdr *h = CMSG_FIRSTHDR(&m);
      h->cmsg_level = SOL_SOCKET;
      h->cmsg_type = SCM_RIGHTS;
      h->cmsg_len = CMSG_LEN(sizeof(int));
      memcpy(CMSG_DATA(h), &fd, sizeof fd);
    }
    ssize_t n = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return ETCH_OK;
      return etch__ipc_conn_fail(c, "write: %s", strerror(errno));
    }
    if (fd >= 0) { /* sent with the frame's first bytes */
      close(fd);
      memmove(c->txfds, c->txfds + 1, (c->ntxfds - 1) * sizeof c->txfds[0]);
      c->ntxfds--;
    }
    c->tx_off += (size_t)n;
  }
  return ETCH_OK;
}

int etch__ipc_conn_wait(etch_ipc_conn *c, int timeout_ms) {
  if (c->failed) return ETCH_EIO;
  struct pollfd p = {c->fd, POLLIN, 0};
  if (etch__ipc_conn_want_write(c)) p.events |= POLLOUT;
  int r = poll(&p, 1, timeout_ms);
  if (r < 0 && errno != EINTR)
    return etch__ipc_conn_fail(c, "poll: %s", strerror(errno));
  if (r <= 0) return ETCH_OK;
  if (p.revents & POLLOUT) {
    int rc = etch__ipc_conn_flush(c);
    if (rc) return rc;
  }
  if (p.revents & (POLLIN | POLLHUP | POLLERR)) return etch__ipc_conn_read(c);
  return ETCH_OK;
}

/* The default directory holds the sockets through which we trust a service
 * with our events (or a producer with our sessions): anyone else who owns
 * it, or may write in it, may serve a socket of their own there. */
static int check_socket_dir(const char *dir) {
  struct stat st;
  if (lstat(dir, &st) != 0) {
    if (errno == ENOENT) return ETCH_OK; /* nothing to connect to */
    return etch__error(ETCH_EIO, "cannot check '%s': %s", dir,
                       strerror(errno));
  }
  if (!S_ISDIR(st.st_mode))
    return etch__error(ETCH_EINVAL,
                       "'%s' is not a directory (a link, or a file): refusing "
                       "to use it for etch's sockets",
                       dir);
  if (st.st_uid != geteuid())
    return etch__error(ETCH_EINVAL,
                       "'%s' is owned by uid %u, not by you (uid %u): "
                       "refusing to use it for etch's sockets",
                       dir, (unsigned)st.st_uid, (unsigned)geteuid());
  if (st.st_mode & 022)
    return etch__error(ETCH_EINVAL,
                       "'%s' is writable by %s (mode %04o): refusing to use "
                       "it for etch's sockets",
                       dir, (st.st_mode & 002) ? "others" : "its group",
                       (unsigned)(st.st_mode & 07777));
  return ETCH_OK;
}

int etch__ipc_default_paths(char *producer, char *consumer, size_t cap,
                            bool make_dir) {
  const char *p = etch__env(ETCH_ENV_PRODUCER_SOCK_NAME);
  const char *c = etch__env(ETCH_ENV_CONSUMER_SOCK_NAME);
  char dir[256];
  const char *xdg = etch__getenv("XDG_RUNTIME_DIR");
  if (xdg && *xdg)
    snprintf(dir, sizeof dir, "%s/etch", xdg);
  else
    snprintf(dir, sizeof dir, "/tmp/etch-%u", (unsigned)getuid());
  if (!p || !*p || !c || !*c) {
    if (make_dir && mkdir(dir, 0700) != 0 && errno != EEXIST)
      return etch__error(ETCH_EIO, "cannot create '%s': %s", dir,
                         strerror(errno));
    int rc = check_socket_dir(dir);
    if (rc) return rc;
  }
  int n1 = p && *p ? snprintf(producer, cap, "%s", p)
                   : snprintf(producer, cap, "%s/producer.sock", dir);
  int n2 = c && *c ? snprintf(consumer, cap, "%s", c)
                   : snprintf(consumer, cap, "%s/consumer.sock", dir);
  if (n1 < 0 || (size_t)n1 >= cap || n2 < 0 || (size_t)n2 >= cap)
    return etch__error(ETCH_EINVAL, "socket path too long");
  return ETCH_OK;
}

int etch__ipc_connect_service(const char *path, bool producer, int *fd_out) {
  int rc = etch__ipc_connect(path, fd_out);
  if (rc) return rc;
  const char *env = etch__env(producer ? ETCH_ENV_PRODUCER_SOCK_NAME
                                      : ETCH_ENV_CONSUMER_SOCK_NAME);
  if (env) { /* named: trusted as is */
    char one[256];
    for (unsigned i = 0; etch__ipc_name_at(env, i, one, sizeof one); i++)
      if (!strcmp(one, path)) return ETCH_OK;
  }
  struct ucred cr;
  socklen_t n = sizeof cr;
  if (getsockopt(*fd_out, SOL_SOCKET, SO_PEERCRED, &cr, &n) != 0 ||
      (cr.uid != geteuid() && cr.uid != 0)) {
    bool known = n == sizeof cr;
    close(*fd_out);
    *fd_out = -1;
    if (!known)
      return etch__error(ETCH_EINVAL, "cannot tell who serves '%s': refused",
                         path);
    return etch__error(ETCH_EINVAL,
                       "the service on '%s' runs as uid %u, not as you (uid "
                       "%u) or root: refused (set %s to trust it)",
                       path, (unsigned)cr.uid, (unsigned)geteuid(),
                       producer ? "PERFETTO_PRODUCER_SOCK_NAME"
                                : "PERFETTO_CONSUMER_SOCK_NAME");
  }
  return ETCH_OK;
}

/*
 * fuzz_ipc.c - libFuzzer target for what arrives on an IPC socket: the
 * input is the byte stream a (hostile) peer writes, fed to a connection in
 * pieces whose sizes come from the input too. Every frame handed out must
 * decode to fields inside the frame, re-encode and decode again to the
 * same fields; anything else fails the connection with a message.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "etch/etch.h"
#include "ipc/ipc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool inside(etch_ipc_bytes b, const uint8_t *lo, const uint8_t *hi) {
  return b.len == 0 || (b.data >= lo && b.data + b.len <= hi);
}

static void check(const etch_ipc_frame *f, const uint8_t *lo,
                  const uint8_t *hi) {
  if (!inside(f->name, lo, hi) || !inside(f->body, lo, hi)) abort();
  for (uint32_t i = 0; i < f->nmethods; i++)
    if (!inside(f->methods[i].name, lo, hi)) abort();
  etch__pb_buf b;
  etch__pb_buf_init(&b, 256, 0);
  etch__ipc_frame_encode(&b, f);
  etch_ipc_frame g;
  if (etch__ipc_frame_decode(etch__pb_buf_data(&b) + 4, etch__pb_buf_len(&b) - 4,
                             &g) != ETCH_OK)
    abort();
  if (g.kind != f->kind || g.request_id != f->request_id) abort();
  if (f->kind == ETCH_IPC_INVOKE &&
      (g.body.len != f->body.len || g.method_id != f->method_id ||
       g.service_id != f->service_id))
    abort();
  if (f->kind == ETCH_IPC_BIND_REPLY && f->success &&
      g.nmethods != f->nmethods)
    abort();
  etch__pb_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) abort();
  etch_ipc_conn c;
  etch__ipc_conn_init(&c, sv[1], 1 << 20);
  size_t step = (size_t)data[0] * 31 + 1;
  data++;
  size--;
  for (size_t off = 0; off < size && !c.failed; off += step) {
    size_t n = size - off < step ? size - off : step;
    if (write(sv[0], data + off, n) != (ssize_t)n) abort();
    if (etch__ipc_conn_read(&c) != ETCH_OK) break;
    etch_ipc_frame f;
    int r;
    while ((r = etch__ipc_conn_next(&c, &f)) == 1)
      check(&f, c.rx, c.rx + c.rx_len);
    if (r < 0 && c.err[0] == '\0') abort();
  }
  close(sv[0]);
  etch__ipc_conn_close(&c);
  return 0;
}

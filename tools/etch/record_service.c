/*
 * record_service.c - `etch record` through a tracing service (etchd, or
 * Perfetto's traced): a consumer on the service's consumer port, speaking
 * Perfetto's protocol. Enables a session (from flags or a TraceConfig text
 * file), optionally runs a program in system mode, waits for the duration,
 * Ctrl-C or the program's end, disables the session, reads the buffers and
 * writes the trace; `--list` shows what the service knows.
 */
#define _GNU_SOURCE
#include "record_service.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/containers.h"
#include "buffer/sink.h"
#include "etch/etch.h"
#include "ipc/ipc.h"
#include "proto/ipc.h"
#include "proto/trace_config.h"

extern char **environ;

typedef struct client {
  etch_ipc_conn conn;
  uint32_t svc;
  etch_ipc_frame bind;
  uint8_t *bind_bytes; /* the bind reply's frame, for method names */
  uint64_t next_req;
  uint64_t enable_req;
  bool disabled;       /* the EnableTracing reply came */
  char disable_err[256];
} client;

static volatile sig_atomic_t interrupted;
static void on_int(int sig) {
  (void)sig;
  interrupted = 1;
}

static uint64_t now_ms(void) { return etch__monotonic_ns() / 1000000ull; }

/* Handles a frame that is not the one being waited for. */
static void other_frame(client *c, const etch_ipc_frame *f) {
  if (f->kind == ETCH_IPC_REPLY && f->request_id == c->enable_req &&
      c->enable_req) {
    c->disabled = true;
    etch__pb_dec d;
    etch__pb_field fl;
    etch__pb_dec_init(&d, f->body.data, f->body.len);
    while (etch__pb_next(&d, &fl))
      if (fl.id == ETCH_ETRESP_ERROR && fl.wt == 2)
        snprintf(c->disable_err, sizeof c->disable_err, "%.*s", (int)fl.len,
                 (const char *)fl.data);
  }
}

/* Waits for the next frame answering `req` (NULL handler: just pump). */
static int wait_reply(client *c, uint64_t req, etch_ipc_frame *f,
                      int timeout_ms) {
  uint64_t end = timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
  for (;;) {
    int r;
    while ((r = etch__ipc_conn_next(&c->conn, f)) == 1) {
      if (req && f->request_id == req &&
          (f->kind == ETCH_IPC_REPLY || f->kind == ETCH_IPC_BIND_REPLY ||
           f->kind == ETCH_IPC_ERROR))
        return ETCH_OK;
      other_frame(c, f);
      if (!req) return ETCH_OK;
    }
    if (r < 0 || (c->conn.failed && !c->conn.eof))
      return etch__error(ETCH_EIO, "service: %s", c->conn.err);
    if (c->conn.failed)
      return etch__error(ETCH_EIO, "the service closed the connection");
    uint64_t now = now_ms();
    if (now >= end)
      return req ? etch__error(ETCH_EIO, "the service did not answer")
                 : ETCH_OK; /* just pumping: nothing came */
    uint64_t left = end - now;
    etch__ipc_conn_wait(&c->conn, left > 200 ? 200 : (int)left);
    if (interrupted && !req) return ETCH_OK;
  }
}

static int call(client *c, const char *method, const etch__pb_buf *args,
                int fd, uint64_t *req_out) {
  *req_out = 0; /* written on every path: no request went out yet */
  uint32_t id = etch__ipc_method_id(&c->bind, method);
  if (!id)
    return etch__error(ETCH_EUNSUPPORTED, "the service has no %s", method);
  etch_ipc_frame f;
  memset(&f, 0, offsetof(etch_ipc_frame, methods));
  f.kind = ETCH_IPC_INVOKE;
  f.request_id = ++c->next_req;
  f.service_id = c->svc;
  f.method_id = id;
  if (args) {
    f.body.data = etch__pb_buf_data(args);
    f.body.len = (uint32_t)etch__pb_buf_len(args);
  }
  *req_out = f.request_id;
  if (etch__ipc_conn_send(&c->conn, &f, fd) != ETCH_OK)
    return etch__error(ETCH_EIO, "service: %s", c->conn.err);
  return ETCH_OK;
}

static int connect_client(client *c) {
  memset(c, 0, sizeof *c);
  char prod[512], cons[512];
  int fd;
  int rc = etch__ipc_default_paths(prod, cons, sizeof prod, false);
  if (!rc) {
    rc = etch__ipc_connect_service(cons, false, &fd);
    if (rc == ETCH_EIO) /* not refused: nobody there */
      rc = etch__error(ETCH_EIO, "no tracing service at %s (start etchd, or "
                       "point PERFETTO_CONSUMER_SOCK_NAME at one)", cons);
  }
  if (rc) return rc;
  etch__ipc_conn_init(&c->conn, fd, 64u << 20);
  etch_ipc_frame f;
  memset(&f, 0, offsetof(etch_ipc_frame, methods));
  f.kind = ETCH_IPC_BIND;
  f.request_id = ++c->next_req;
  f.name.data = (const uint8_t *)ETCH_IPC_CONSUMER_PORT;
  f.name.len = sizeof ETCH_IPC_CONSUMER_PORT - 1;
  etch__ipc_conn_send(&c->conn, &f, -1);
  rc = wait_reply(c, f.request_id, &c->bind, 5000);
  if (rc) return rc;
  if (c->bind.kind != ETCH_IPC_BIND_REPLY || !c->bind.success)
    return etch__error(ETCH_EIO, "the service refused the consumer port");
  /* Method names point into the receive buffer: keep a copy of them. */
  size_t total = 0;
  for (uint32_t i = 0; i < c->bind.nmethods; i++)
    total += c->bind.methods[i].name.len;
  c->bind_bytes = (uint8_t *)etch__malloc(total ? total : 1);
  if (!c->bind_bytes) return ETCH_ENOMEM;
  size_t off = 0;
  for (uint32_t i = 0; i < c->bind.nmethods; i++) {
    etch_ipc_bytes *n = &c->bind.methods[i].name;
    memcpy(c->bind_bytes + off, n->data, n->len);
    n->data = c->bind_bytes + off;
    off += n->len;
  }
  c->svc = c->bind.service_id;
  return ETCH_OK;
}

static void close_client(client *c) {
  etch__ipc_conn_close(&c->conn);
  free(c->bind_bytes);
}

/* ---- the config ---- */

static int build_config(const rec_service_opts *o, etch__pb_buf *out,
                        bool *into_file) {
  *into_file = false;
  if (o->config_path) {
    FILE *f = fopen(o->config_path, "r");
    if (!f)
      return etch__error(ETCH_EIO, "%s: %s", o->config_path, strerror(errno));
    etch_vec text = {0};
    for (;;) {
      if (etch__vec_reserve(&text, 4096)) {
        etch__vec_free(&text);
        fclose(f);
        return ETCH_ENOMEM;
      }
      size_t got = fread(text.data + text.len, 1, text.cap - text.len, f);
      text.len += got;
      if (got == 0) break;
    }
    fclose(f);
    int rc = etch__trace_config_text_to_binary((const char *)text.data,
                                               text.len, out);
    etch__vec_free(&text);
    if (rc) {
      char msg[400];
      snprintf(msg, sizeof msg, "%s", etch_last_error());
      return etch__error(rc, "%s: %s", o->config_path, msg);
    }
    etch_trace_config *tc = (etch_trace_config *)etch__malloc(sizeof *tc);
    if (!tc) return ETCH_ENOMEM;
    rc = etch__trace_config_decode(etch__pb_buf_data(out), etch__pb_buf_len(out),
                                   tc);
    if (!rc) rc = etch__trace_config_check(tc);
    if (!rc) *into_file = tc->write_into_file;
    free(tc);
    if (rc) {
      char msg[400];
      snprintf(msg, sizeof msg, "%s", etch_last_error());
      return etch__error(rc, "%s: %s", o->config_path, msg);
    }
    return ETCH_OK;
  }
  etch_trace_config *tc = (etch_trace_config *)etch__calloc(1, sizeof *tc);
  if (!tc) return ETCH_ENOMEM;
  tc->nbuffers = 1;
  tc->buffers[0].size_kb = o->buffer_kb ? o->buffer_kb : 32768;
  tc->buffers[0].fill_policy = o->discard ? ETCH_TC_FILL_DISCARD
                                          : ETCH_TC_FILL_RING;
  tc->nsources = 1;
  etch_tc_source *s = &tc->sources[0];
  snprintf(s->name, sizeof s->name, "track_event");
  if (o->categories) {
    s->has_track_event_config = true;
    snprintf(s->disabled_categories.item[0], ETCH_TC_MAX_NAME, "*");
    s->disabled_categories.n = 1;
    const char *p = o->categories;
    while (*p) {
      const char *e = strchr(p, ',');
      size_t n = e ? (size_t)(e - p) : strlen(p);
      if (n && p[0] == '-') { /* an exclusion: not listed as enabled */
      } else if (n && s->enabled_categories.n < ETCH_TC_MAX_FILTERS &&
                 n < ETCH_TC_MAX_NAME) {
        memcpy(s->enabled_categories.item[s->enabled_categories.n++], p, n);
      }
      if (n == 1 && p[0] == '*') s->disabled_categories.n = 0;
      p += n + (e ? 1 : 0);
    }
  }
  tc->duration_ms = o->duration_ms;
  if (o->write_as_it_goes) {
    tc->write_into_file = true;
    tc->file_write_period_ms = 1000;
    *into_file = true;
  }
  etch__trace_config_encode(tc, out);
  free(tc);
  return ETCH_OK;
}

/* ---- list ---- */

static int list_state(client *c) {
  uint64_t req;
  int rc = call(c, "QueryServiceState", NULL, -1, &req);
  etch_ipc_frame *f = (etch_ipc_frame *)etch__malloc(sizeof *f);
  if (!f) return ETCH_ENOMEM;
  if (!rc) rc = wait_reply(c, req, f, 5000);
  if (!rc && (f->kind != ETCH_IPC_REPLY || !f->success))
    rc = etch__error(ETCH_EIO, "the service did not describe itself");
  if (rc) {
    free(f);
    return rc;
  }
  etch__pb_dec d, st, m, e;
  etch__pb_field fl, g, h, k;
  etch__pb_dec_init(&d, f->body.data, f->body.len);
  while (etch__pb_next(&d, &fl)) {
    if (fl.id != ETCH_QSS_SERVICE_STATE || fl.wt != 2) continue;
    printf("producers:\n");
    etch__pb_dec_init(&st, fl.data, fl.len);
    while (etch__pb_next(&st, &g)) {
      if (g.id == ETCH_TSS_PRODUCERS && g.wt == 2) {
        long long id = 0, pid = 0, uid = 0;
        char name[128] = "";
        etch__pb_dec_init(&m, g.data, g.len);
        while (etch__pb_next(&m, &h)) {
          if (h.id == ETCH_TSS_PRODUCER_ID) id = (long long)h.u;
          else if (h.id == ETCH_TSS_PRODUCER_PID) pid = (long long)h.u;
          else if (h.id == ETCH_TSS_PRODUCER_UID) uid = (long long)h.u;
          else if (h.id == ETCH_TSS_PRODUCER_NAME && h.wt == 2)
            snprintf(name, sizeof name, "%.*s", (int)h.len, (const char *)h.data);
        }
        printf("  %lld  %s  pid %lld  uid %lld\n", id, name, pid, uid);
      }
    }
    printf("data sources:\n");
    etch__pb_dec_init(&st, fl.data, fl.len);
    while (etch__pb_next(&st, &g)) {
      if (g.id == ETCH_TSS_DATA_SOURCES && g.wt == 2) {
        long long pid = 0;
        char name[128] = "", cats[2048] = "";
        size_t cl = 0;
        etch__pb_dec_init(&m, g.data, g.len);
        while (etch__pb_next(&m, &h)) {
          if (h.id == ETCH_TSS_DS_PRODUCER_ID) pid = (long long)h.u;
          if (h.id != ETCH_TSS_DS_DESCRIPTOR || h.wt != 2) continue;
          etch__pb_dec_init(&e, h.data, h.len);
          while (etch__pb_next(&e, &k)) {
            if (k.id == ETCH_DSD_NAME && k.wt == 2)
              snprintf(name, sizeof name, "%.*s", (int)k.len,
                       (const char *)k.data);
            if (k.id != ETCH_DSD_TRACK_EVENT_DESCRIPTOR || k.wt != 2) continue;
            etch__pb_dec t, u;
            etch__pb_field tf, uf;
            etch__pb_dec_init(&t, k.data, k.len);
            while (etch__pb_next(&t, &tf)) {
              if (tf.id != ETCH_TED_AVAILABLE_CATEGORIES || tf.wt != 2) continue;
              etch__pb_dec_init(&u, tf.data, tf.len);
              while (etch__pb_next(&u, &uf))
                if (uf.id == ETCH_TEC_NAME && uf.wt == 2 &&
                    cl + uf.len + 3 < sizeof cats) {
                  cl += (size_t)snprintf(cats + cl, sizeof cats - cl, "%s%.*s",
                                         cl ? ", " : "", (int)uf.len,
                                         (const char *)uf.data);
                }
            }
          }
        }
        printf("  %s (producer %lld)%s%s\n", name, pid, cl ? ": " : "", cats);
      } else if (g.id == ETCH_TSS_NUM_SESSIONS && g.wt == 0) {
        printf("sessions: %llu\n", (unsigned long long)g.u);
      }
    }
  }
  free(f);
  return ETCH_OK;
}

/* ---- record ---- */

/* Appends one Trace.packet record to `ob`, written out by the megabyte. */
static int put_packet(etch__pb_buf *ob, const uint8_t *p, size_t n,
                      size_t *bytes) {
  etch__pb_stream *s = &ob->s;
  if (!etch__pb_reserve(s, 16 + n)) return ETCH_ENOMEM;
  uint8_t *start = s->cur;
  uint8_t *q = etch__pb_put_tag(start, 1, ETCH_PB_LEN); /* Trace.packet */
  q = etch__pb_put_varint(q, n);
  if (n) memcpy(q, p, n);
  s->cur = q + n;
  *bytes += (size_t)(s->cur - start);
  return ETCH_OK;
}

/* The trace file being written, through buffer/sink.c: whole
 * Trace.packet records only. */
typedef struct outfile {
  etch_sink k;
  const char *path;
} outfile;

/* Writes the records in `ob` and empties it. On an error (a full disk, a
 * quota, a file size limit: all the same) the sink cuts the file back to
 * its last whole packet and writes nothing more. */
static int flush_out(etch__pb_buf *ob, outfile *o) {
  size_t n = etch__pb_buf_len(ob);
  etch__sink_write(&o->k, etch__pb_buf_data(ob), n);
  etch__pb_buf_reset(ob);
  if (!o->k.err) return ETCH_OK;
  return etch__error(ETCH_EIO,
                     "cannot write the trace to %s: %s; it ends at its "
                     "last whole packet (%llu bytes)%s",
                     o->path, strerror(o->k.err),
                     (unsigned long long)o->k.written,
                     o->k.cut_err ? ", after a partial one it could not cut"
                                  : "");
}

/* The trace file is locked while it is written (by us, or by etchd
 * through the descriptor we pass): etch ls calls a store's hidden part
 * abandoned only once nobody holds it (ui/store.h). Advisory; a file
 * system without flock just goes without. */
static void lock_out(int fd) {
  while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
}

static int read_trace(client *c, const char *out_path, size_t *bytes) {
  uint64_t req;
  int rc = call(c, "ReadBuffers", NULL, -1, &req);
  if (rc) return rc;
  outfile out = {.path = out_path};
  int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return etch__error(ETCH_EIO, "%s: %s", out_path, strerror(errno));
  lock_out(fd);
  etch__sink_init(&out.k, fd, false);
  etch_ipc_frame *f = (etch_ipc_frame *)etch__malloc(sizeof *f);
  etch__pb_buf ob, pkt; /* the file's next bytes; a packet in slices */
  etch__pb_buf_init(&ob, 1u << 20, 0);
  etch__pb_buf_init(&pkt, 0, 0);
  *bytes = 0;
  for (;;) {
    rc = f ? wait_reply(c, req, f, 30000) : ETCH_ENOMEM;
    if (rc) break;
    if (f->kind != ETCH_IPC_REPLY || !f->success) {
      rc = etch__error(ETCH_EIO, "the service would not hand out the buffers");
      break;
    }
    etch__pb_dec d, s;
    etch__pb_field fl, g;
    etch__pb_dec_init(&d, f->body.data, f->body.len);
    while (!rc && etch__pb_next(&d, &fl)) {
      if (fl.id != ETCH_RBR_SLICES || fl.wt != 2) continue;
      const uint8_t *data = NULL;
      size_t dl = 0;
      bool last = false;
      etch__pb_dec_init(&s, fl.data, fl.len);
      while (etch__pb_next(&s, &g)) {
        if (g.id == ETCH_RBR_SLICE_DATA && g.wt == 2) {
          data = g.data;
          dl = g.len;
        } else if (g.id == ETCH_RBR_SLICE_LAST && g.wt == 0) {
          last = g.u != 0;
        }
      }
      if (last && !etch__pb_buf_len(&pkt)) { /* a packet in one slice */
        rc = put_packet(&ob, data, dl, bytes);
      } else {
        if (dl) etch__pb_write_bytes(&pkt.s, data, dl);
        if (pkt.s.failed) rc = ETCH_ENOMEM;
        if (!rc && last) {
          rc = put_packet(&ob, etch__pb_buf_data(&pkt),
                          etch__pb_buf_len(&pkt), bytes);
          etch__pb_buf_reset(&pkt);
        }
      }
      if (!rc && etch__pb_buf_len(&ob) >= (1u << 20))
        rc = flush_out(&ob, &out);
    }
    if (rc || !f->has_more) break;
  }
  if (!rc) rc = flush_out(&ob, &out);
  etch__pb_buf_free(&ob);
  etch__pb_buf_free(&pkt);
  free(f);
  if (close(fd) != 0 && !rc)
    rc = etch__error(ETCH_EIO, "%s: %s", out_path, strerror(errno));
  *bytes = (size_t)out.k.written;
  return rc;
}

int etch_cli_record_service(const rec_service_opts *o, size_t *bytes_out) {
  client c;
  int rc = connect_client(&c);
  if (rc) {
    close_client(&c);
    return rc;
  }
  if (o->list) {
    rc = list_state(&c);
    close_client(&c);
    return rc;
  }
  etch__pb_buf cfg, args;
  etch__pb_buf_init(&cfg, 1024, 0);
  etch__pb_buf_init(&args, 1024, 0);
  bool into_file = false;
  int out_fd = -1;
  rc = build_config(o, &cfg, &into_file);
  if (!rc && into_file) {
    /* The service writes the trace into our file as it goes. */
    out_fd = open(o->out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd < 0)
      rc = etch__error(ETCH_EIO, "%s: %s", o->out_path, strerror(errno));
    else
      lock_out(out_fd);
  }
  /* Ctrl-C from the moment the session can exist: it ends the session
   * cleanly (a signal between EnableTracing and the handlers killed etch
   * and left the session to the service). */
  struct sigaction sa = {.sa_handler = on_int}, old_int, old_term, old_hup;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  sigaction(SIGHUP, &sa, &old_hup);
  if (!rc) {
    etch__pb_write_bytes_field(&args.s, ETCH_ETR_TRACE_CONFIG,
                              etch__pb_buf_data(&cfg), etch__pb_buf_len(&cfg));
    rc = call(&c, "EnableTracing", &args, out_fd, &c.enable_req);
  }
  if (out_fd >= 0) close(out_fd); /* the connection sent its own copy */
  etch__pb_buf_free(&cfg);
  etch__pb_buf_free(&args);
  /* The session is set up once the service has answered a later call. */
  etch_ipc_frame *f = (etch_ipc_frame *)etch__malloc(sizeof *f);
  if (!rc && !f) rc = ETCH_ENOMEM;
  uint64_t req;
  if (!rc) rc = call(&c, "QueryCapabilities", NULL, -1, &req);
  if (!rc) rc = wait_reply(&c, req, f, 5000);
  if (!rc && c.disabled)
    rc = etch__error(ETCH_ECONFIG, "the service refused the session: %s",
                     c.disable_err[0] ? c.disable_err : "no reason given");
  pid_t child = -1;
  int status = 0;
  if (!rc && o->argv) {
    setenv("ETCH_BACKEND", "system", 1);
    setenv("ETCH_SYSTEM_WAIT_MS", "3000", 1);
    int err = posix_spawnp(&child, o->argv[0], NULL, NULL, o->argv, environ);
    if (err) {
      rc = etch__error(ETCH_EIO, "cannot run %s: %s", o->argv[0], strerror(err));
      child = -1;
    }
  }
  /* Until the duration, Ctrl-C, the program's end or the service's. */
  uint64_t end = o->duration_ms ? now_ms() + o->duration_ms + 2000 : UINT64_MAX;
  while (!rc && !interrupted && !c.disabled && now_ms() < end) {
    if (child > 0) {
      pid_t w = waitpid(child, &status, WNOHANG);
      if (w == child) {
        child = -1;
        break;
      }
    } else if (o->argv) {
      break;
    }
    rc = wait_reply(&c, 0, f, 100);
  }
  if (child > 0 && interrupted) {
    kill(child, SIGINT);
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (!rc && !c.disabled) {
    rc = call(&c, "DisableTracing", NULL, -1, &req);
    if (!rc) rc = wait_reply(&c, req, f, 5000);
  }
  /* Wait for the session to end (the EnableTracing answer). */
  uint64_t until = now_ms() + 15000;
  while (!rc && !c.disabled && now_ms() < until)
    rc = wait_reply(&c, 0, f, 200);
  size_t bytes = 0;
  if (!rc && into_file) {
    struct stat st;
    bytes = stat(o->out_path, &st) == 0 ? (size_t)st.st_size : 0;
  } else if (!rc) {
    rc = read_trace(&c, o->out_path, &bytes);
  }
  if (!rc) {
    uint64_t r2;
    if (call(&c, "FreeBuffers", NULL, -1, &r2) == ETCH_OK)
      wait_reply(&c, r2, f, 2000);
  }
  /* The service ended the session early (its file failed, ...): what
   * there is of the trace was kept, but it is not the whole of it. */
  if (!rc && c.disable_err[0])
    rc = etch__error(ETCH_EIO, "%s: the service ended the session early: %s",
                     o->out_path, c.disable_err);
  free(f);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  sigaction(SIGHUP, &old_hup, NULL);
  close_client(&c);
  if (bytes_out) *bytes_out = bytes;
  if (!rc && o->argv && WIFEXITED(status) && WEXITSTATUS(status))
    fprintf(stderr, "etch: %s exited with status %d\n", o->argv[0],
            WEXITSTATUS(status));
  return rc;
}

/*
 * server.c - `etch ui`'s HTTP server, libmicrohttpd's: one thread of its
 * own answers the requests one at a time (the app and its DuckDB
 * connections are used by that thread only).
 *
 * Every request must
 *  - be a GET (or HEAD);
 *  - carry a Host that is the address the server listens on ("127.0.0.1:
 *    PORT"; "localhost:PORT" too when it listens on 127.0.0.1): a page of
 *    another site that a rebinding DNS points at 127.0.0.1 sends its own
 *    name, and is refused;
 *  - carry the token printed at start, as ?token= or an X-Etch-Token
 *    header (the page sends the header), compared in constant time; but
 *    the page itself (/, the same bytes for everyone, no data in it) is
 *    served without one, so that an address without the token (the page
 *    keeps it and takes it out of the address: a view's address can be
 *    shared or reloaded) opens it. A token given and wrong is refused.
 * Answers say not to cache them and to send no Referer (the page's address
 * holds the token); the page may load nothing from elsewhere (CSP).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/base.h"
#include "ui/str.h"
#include "ui/ui.h"

struct etch__ui_server {
  etch__ui *ui;
  struct MHD_Daemon *d;
  char token[65];
  char host[96], host_alt[96]; /* the Host values accepted */
  char url[256];
};

static const char kCsp[] =
    "default-src 'none'; script-src 'unsafe-inline'; style-src "
    "'unsafe-inline'; connect-src 'self'; img-src data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status,
                             const char *type, char *body, size_t len) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, "Content-Type", type);
  MHD_add_response_header(r, "Cache-Control", "no-store");
  MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(r, "Content-Security-Policy", kCsp);
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status,
                                  const char *msg) {
  char *body = etch__aprintf("{\"error\":\"%s\"}\n", msg);
  if (!body) return MHD_NO;
  return reply(c, status, "application/json", body, strlen(body));
}

/* Equal strings, in a time that depends on their lengths only. */
static bool same_secret(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  unsigned char d = na != nb;
  for (size_t i = 0; i < na && i < nb; i++)
    d |= (unsigned char)(a[i] ^ b[i]);
  return d == 0;
}

static const char *get_arg(void *ctx, const char *key) {
  return MHD_lookup_connection_value((struct MHD_Connection *)ctx,
                                     MHD_GET_ARGUMENT_KIND, key);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c,
                              const char *url, const char *method,
                              const char *version, const char *upload_data,
                              size_t *upload_size, void **con_cls) {
  (void)version, (void)upload_data, (void)con_cls;
  etch__ui_server *s = cls;
  if (*upload_size) return reply_text(c, 405, "GET only");
  if (strcmp(method, "GET") && strcmp(method, "HEAD"))
    return reply_text(c, 405, "GET only");
  const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
  if (!host || (strcmp(host, s->host) && strcmp(host, s->host_alt)))
    return reply_text(c, 403,
                      "this server answers requests to its own address only");
  const char *tok = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                "X-Etch-Token");
  if (!tok) tok = get_arg(c, "token");
  bool page = !strcmp(url, "/"), api = !strncmp(url, "/api/", 5);
  if ((tok || !page) && (!tok || !same_secret(tok, s->token)))
    return reply_text(c, 401, "the token etch ui printed is needed");
  etch__ui_membuf mb;
  FILE *out = etch__ui_membuf_open(&mb);
  if (!out) return reply_text(c, 500, "out of memory");
  int status = 404;
  if (page) {
    etch__ui_page(out, NULL, 0);
    status = 200;
  } else if (api) {
    status = etch__ui_api(s->ui, url, get_arg, c, out);
  }
  if (etch__ui_membuf_close(&mb)) {
    etch__ui_membuf_free(&mb);
    return reply_text(c, 500, "out of memory");
  }
  size_t len;
  char *body = etch__ui_membuf_take(&mb, &len);
  if (page || api)
    return reply(c, (unsigned)status,
                 page ? "text/html; charset=utf-8" : "application/json", body,
                 len);
  free(body);
  return reply_text(c, 404, "no such page");
}

int etch__ui_server_start(etch__ui *ui, const etch__ui_server_opts *opts,
                          etch__ui_server **out) {
  *out = NULL;
  const char *addr = opts->address ? opts->address : "127.0.0.1";
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons(opts->port)};
  if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
    return etch__error(ETCH_EINVAL, "%s: not an IPv4 address", addr);
  /* Requests must name the address in their Host: one that names no
   * address of its own (any) could never be reached. */
  if (sa.sin_addr.s_addr == htonl(INADDR_ANY))
    return etch__error(ETCH_EINVAL,
                       "%s: give the address the browser will use (its "
                       "requests must name it as their Host)",
                       addr);
  etch__ui_server *s = etch__calloc(1, sizeof *s);
  if (!s) return etch__error(ETCH_ENOMEM, "out of memory");
  s->ui = ui;
  if (opts->token) {
    if (strlen(opts->token) < 16 || strlen(opts->token) >= sizeof s->token) {
      free(s);
      return etch__error(ETCH_EINVAL, "a token has 16 to 64 characters");
    }
    snprintf(s->token, sizeof s->token, "%s", opts->token);
  } else {
    uint8_t rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
      free(s);
      return etch__error(ETCH_EIO, "no random bytes for a token: %s",
                         strerror(errno));
    }
    for (size_t i = 0; i < sizeof rnd; i++)
      snprintf(s->token + 2 * i, 3, "%02x", rnd[i]);
  }
  s->d = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL, handle, s,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024),
      MHD_OPTION_END);
  if (!s->d) {
    int e = errno;
    free(s);
    return etch__error(ETCH_EIO, "cannot listen on %s:%u: %s", addr,
                       (unsigned)opts->port, e ? strerror(e) : "failed");
  }
  const union MHD_DaemonInfo *info =
      MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  unsigned port = info ? info->port : opts->port;
  snprintf(s->host, sizeof s->host, "%s:%u", addr, port);
  snprintf(s->host_alt, sizeof s->host_alt, "%s:%u",
           strcmp(addr, "127.0.0.1") ? addr : "localhost", port);
  snprintf(s->url, sizeof s->url, "http://%s/?token=%s", s->host, s->token);
  *out = s;
  return ETCH_OK;
}

const char *etch__ui_server_url(const etch__ui_server *s) { return s->url; }

void etch__ui_server_stop(etch__ui_server *s) {
  if (!s) return;
  MHD_stop_daemon(s->d);
  free(s);
}

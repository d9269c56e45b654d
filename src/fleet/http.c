/*
 * http.c - a ClickHouse server through its HTTP interface, with libcurl.
 *
 * A request is a POST to the server's URL with the statement either as the
 * body (a query) or, for an INSERT that carries data, as the `query`
 * parameter and the data as the body. `database` and the settings go as
 * URL parameters, which every ClickHouse version since 2016 reads.
 * Queries add wait_end_of_query=1: the server then buffers the whole
 * result and an error after the first rows still comes as an HTTP error,
 * not as text appended to a 200 answer.
 *
 * The server is not trusted: its answer is kept up to a bound, a transfer
 * cut short (curl checks Content-Length and chunked framing) is an error,
 * and an error body is shown with its control characters replaced.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "fleet/fleet.h"

struct etch__ch {
  CURL *curl;
  char *base;   /* the URL up to its parameters, and '?' or '&' */
  etch_vec params; /* "database=...&setting=value..." (escaped), a C string */
  char errbuf[CURL_ERROR_SIZE];
};

int etch__ch_global_init(void) {
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
    return etch__error(ETCH_EIO, "libcurl: cannot initialise");
  return ETCH_OK;
}

static int add_param(etch__ch *ch, const char *name, const char *value) {
  char *v = curl_easy_escape(ch->curl, value, 0);
  if (!v) return etch__error(ETCH_ENOMEM, "out of memory");
  etch_vec *p = &ch->params;
  size_t was = p->len;
  int rc = (was ? etch__vec_push(p, "&", 1) : 0) ||
           etch__vec_push(p, name, strlen(name)) || etch__vec_push(p, "=", 1) ||
           etch__vec_push(p, v, strlen(v)) || etch__vec_cstr(p);
  curl_free(v);
  if (rc) {
    p->len = was; /* as it was: the parameter is not half there */
    if (p->data) p->data[was] = '\0';
    return etch__error(ETCH_ENOMEM, "out of memory");
  }
  return ETCH_OK;
}

int etch__ch_open(etch__ch **out, const char *url, const char *database) {
  *out = NULL;
  if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
    return etch__error(ETCH_EINVAL,
                       "%s: not an http:// or https:// URL of a ClickHouse "
                       "server (its HTTP port, 8123 by default)", url);
  etch__ch *ch = etch__calloc(1, sizeof *ch);
  if (!ch) return etch__error(ETCH_ENOMEM, "out of memory");
  ch->curl = curl_easy_init();
  size_t n = strlen(url);
  ch->base = etch__malloc(n + 3);
  if (!ch->curl || !ch->base) {
    etch__ch_close(ch);
    return etch__error(ETCH_ENOMEM, "out of memory");
  }
  memcpy(ch->base, url, n + 1);
  /* http://host:port -> http://host:port/?; a URL with parameters gets
   * '&' after them. */
  const char *q = strchr(url, '?');
  if (q) {
    if (url[n - 1] != '?' && url[n - 1] != '&') strcat(ch->base, "&");
  } else {
    const char *path = strchr(url + (url[4] == 's' ? 8 : 7), '/');
    strcat(ch->base, path ? "?" : "/?");
  }
  int rc = database ? add_param(ch, "database", database) : ETCH_OK;
  if (rc) {
    etch__ch_close(ch);
    return rc;
  }
  *out = ch;
  return ETCH_OK;
}

void etch__ch_close(etch__ch *ch) {
  if (!ch) return;
  if (ch->curl) curl_easy_cleanup(ch->curl);
  free(ch->base);
  etch__vec_free(&ch->params);
  free(ch);
}

int etch__ch_setting(etch__ch *ch, const char *name, const char *value) {
  return add_param(ch, name, value);
}

typedef struct sink_state {
  etch__ch_buf *buf;
  size_t max;
  bool too_long;
} sink_state;

static size_t on_data(char *p, size_t size, size_t nmemb, void *user) {
  sink_state *s = user;
  size_t n = size * nmemb;
  etch__ch_buf *b = s->buf;
  if (n > s->max - b->len) {
    s->too_long = true;
    return 0; /* curl stops: CURLE_WRITE_ERROR */
  }
  if (etch__vec_push(b, p, n) || etch__vec_cstr(b)) {
    s->too_long = true;
    return 0;
  }
  return n;
}

/* The server's error text, one line, control characters as spaces, at
 * most 2000 bytes. */
static void clean_message(char *s, size_t len) {
  if (len > 2000) {
    len = 2000;
    s[len] = '\0';
  }
  while (len && (s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == ' '))
    s[--len] = '\0';
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) s[i] = ' ';
}

/* `url` as errors show it: no user:password@, no parameters. */
static void shown_url(const char *url, char *out, size_t n) {
  const char *rest = strstr(url, "://");
  rest = rest ? rest + 3 : url;
  size_t scheme = (size_t)(rest - url);
  size_t auth = strcspn(rest, "/?");
  const char *at = memchr(rest, '@', auth);
  const char *host = at ? at + 1 : rest;
  snprintf(out, n, "%.*s%.*s", (int)scheme, url, (int)strcspn(host, "?"),
           host);
}

typedef struct reader_state {
  etch__ch_reader fn;
  void *ctx;
  size_t left; /* of the declared length */
} reader_state;

static size_t on_read(char *p, size_t size, size_t nmemb, void *user) {
  reader_state *r = user;
  size_t n = size * nmemb;
  if (n > r->left) n = r->left;
  size_t got = n ? r->fn(r->ctx, p, n) : 0;
  if (got > n) return CURL_READFUNC_ABORT;
  r->left -= got;
  return got;
}

/* A body is `body`/`len`, or `len` bytes from `rd` when rd is not NULL. */
static int exec(etch__ch *ch, const char *sql, const void *body, size_t len,
                etch__ch_reader rd, void *rd_ctx, etch__ch_buf *resp,
                size_t max_resp) {
  if (rd) body = ""; /* an INSERT's data, from rd */
  etch__ch_buf local = {0};
  etch__ch_buf *b = resp ? resp : &local;
  b->len = 0;
  if (b->data) b->data[0] = '\0';
  sink_state st = {.buf = b, .max = resp ? max_resp : 1 << 20};
  char *esc = NULL;
  size_t need = strlen(ch->base) + ch->params.len + 128;
  if (body) {
    esc = curl_easy_escape(ch->curl, sql, 0);
    if (!esc) return etch__error(ETCH_ENOMEM, "out of memory");
    need += strlen(esc);
  }
  char *url = etch__malloc(need);
  if (!url) {
    curl_free(esc);
    return etch__error(ETCH_ENOMEM, "out of memory");
  }
  snprintf(url, need, "%s%s%s%s%s", ch->base,
           ch->params.len ? (const char *)ch->params.data : "",
           ch->params.len ? "&" : "", body ? "query="
                : "wait_end_of_query=1&default_format="
                  "TabSeparatedWithNamesAndTypes",
           body ? esc : "");
  curl_free(esc);
  CURL *c = ch->curl;
  curl_easy_reset(c);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  reader_state rs = {.fn = rd, .ctx = rd_ctx, .left = len};
  if (rd) {
    curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(c, CURLOPT_READDATA, &rs);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 1L << 20);
  } else if (body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
  } else {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, sql);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(sql));
  }
  /* No "Expect: 100-continue" round trip before a large body. */
  struct curl_slist *hdr = curl_slist_append(NULL, "Expect:");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &st);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ch->errbuf);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  ch->errbuf[0] = '\0';
  CURLcode cc = curl_easy_perform(c);
  curl_slist_free_all(hdr);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  /* The URL without its parameters and user info: they may hold a
   * password. */
  char host[256];
  shown_url(ch->base, host, sizeof host);
  int rc = ETCH_OK;
  if (st.too_long) {
    rc = etch__error(ETCH_ELIMIT, "%s: the answer is longer than %zu bytes",
                     host, st.max);
  } else if (cc == CURLE_COULDNT_CONNECT) {
    /* Most often: no server yet. Say how to have one to try etch with. */
    rc = etch__error(ETCH_EIO,
                     "%s: %s (no ClickHouse server there: to try etch, "
                     "start one on loopback with scripts/clickhouse.py start "
                     "DIR, from etch's sources; see docs/fleet.md)",
                     host, ch->errbuf[0] ? ch->errbuf : curl_easy_strerror(cc));
  } else if (cc != CURLE_OK) {
    rc = etch__error(ETCH_EIO, "%s: %s", host,
                     ch->errbuf[0] ? ch->errbuf : curl_easy_strerror(cc));
  } else if (status != 200) {
    char *msg = etch__ch_text(b);
    if (msg) clean_message(msg, b->len);
    rc = etch__error(ETCH_ESQL, "ClickHouse (HTTP %ld): %s", status,
                     msg && msg[0] ? msg : "(no message)");
  }
  free(url);
  if (!resp) etch__ch_buf_free(&local);
  return rc;
}

int etch__ch_count(etch__ch *ch, const char *sql, uint64_t *out) {
  etch__ch_buf b = {0};
  size_t n = strlen(sql) + 32;
  char *q = etch__malloc(n);
  if (!q) return etch__error(ETCH_ENOMEM, "out of memory");
  snprintf(q, n, "%s FORMAT TabSeparated", sql);
  int rc = etch__ch_exec(ch, q, NULL, 0, &b, 4096);
  free(q);
  if (!rc) {
    char *text = etch__ch_text(&b);
    size_t digits = text ? strspn(text, "0123456789") : 0;
    const char *end = text ? text + digits : NULL;
    uint64_t v;
    if (!digits || etch__parse_u64(text, digits, &v) != 0 ||
        (*end != '\n' && *end != '\0') || (*end == '\n' && end[1] != '\0')) {
      if (text) clean_message(text, b.len);
      rc = etch__error(ETCH_EFORMAT, "ClickHouse: not a count: %.60s",
                       text ? text : "");
    } else
      *out = v;
  }
  etch__ch_buf_free(&b);
  return rc;
}

int etch__ch_exec(etch__ch *ch, const char *sql, const void *body, size_t len,
                  etch__ch_buf *resp, size_t max_resp) {
  return exec(ch, sql, body, len, NULL, NULL, resp, max_resp);
}

int etch__ch_exec_read(etch__ch *ch, const char *sql, etch__ch_reader rd,
                       void *ctx, size_t len, etch__ch_buf *resp,
                       size_t max_resp) {
  return exec(ch, sql, NULL, len, rd, ctx, resp, max_resp);
}

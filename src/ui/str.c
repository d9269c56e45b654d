/*
 * str.c - the ui's text on etch's heap (str.h). The stream is the C
 * library's fopencookie over an etch_vec, with a buffer of its own inside
 * the etch__ui_membuf: the bytes themselves are never on the C library's
 * heap.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "ui/str.h"

static ssize_t membuf_write(void *cookie, const char *p, size_t n) {
  etch__ui_membuf *b = cookie;
  if (b->failed || etch__vec_push(&b->v, p, n)) {
    b->failed = true;
    return 0; /* the stream's error: nothing kept */
  }
  return (ssize_t)n;
}

FILE *etch__ui_membuf_open(etch__ui_membuf *b) {
  memset(&b->v, 0, sizeof b->v);
  b->f = NULL;
  b->failed = false;
  /* Room now: an open that cannot get any fails here, where the failing
   * allocator sees it. */
  if (etch__vec_reserve(&b->v, 256)) return NULL;
  cookie_io_functions_t io = {.write = membuf_write};
  b->f = fopencookie(b, "w", io);
  if (!b->f || setvbuf(b->f, b->io, _IOFBF, sizeof b->io) != 0) {
    if (b->f) fclose(b->f);
    b->f = NULL;
    free(b->v.data);
    memset(&b->v, 0, sizeof b->v);
    etch__error(ETCH_ENOMEM, "out of memory");
    return NULL;
  }
  return b->f;
}

int etch__ui_membuf_close(etch__ui_membuf *b) {
  ETCH_DCHECK(b->f != NULL);
  bool bad = ferror(b->f) != 0;
  if (fclose(b->f) != 0) bad = true;
  b->f = NULL;
  /* A NUL after the bytes (not counted). */
  if (!bad && !b->failed && etch__vec_reserve(&b->v, 1) == 0) {
    b->v.data[b->v.len] = '\0';
    return ETCH_OK;
  }
  b->failed = true;
  return etch__error(ETCH_ENOMEM, "out of memory");
}

char *etch__ui_membuf_take(etch__ui_membuf *b, size_t *len) {
  ETCH_DCHECK(b->f == NULL && !b->failed);
  char *s = (char *)b->v.data;
  *len = b->v.len;
  memset(&b->v, 0, sizeof b->v);
  return s;
}

void etch__ui_membuf_free(etch__ui_membuf *b) {
  if (b->f) fclose(b->f);
  b->f = NULL;
  free(b->v.data);
  memset(&b->v, 0, sizeof b->v);
}

char *etch__ui_ids_text(const int64_t *v, size_t n) {
  /* '[', each number (at most 20 characters) and a comma, ']', NUL. */
  if (n > (SIZE_MAX - 3) / 21) {
    etch__error(ETCH_ENOMEM, "out of memory: %zu ids", n);
    return NULL;
  }
  char *s = etch__malloc(n * 21 + 3), *p = s;
  if (!s) return NULL;
  *p++ = '[';
  for (size_t i = 0; i < n; i++)
    p += sprintf(p, "%s%lld", i ? "," : "", (long long)v[i]);
  *p++ = ']';
  *p = '\0';
  return s;
}

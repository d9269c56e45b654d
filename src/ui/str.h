/*
 * str.h - the ui's text on etch's heap (str.c): a stdio stream whose bytes
 * go to an etch_vec (where the ui builds a body before it knows the
 * status), a printf into a new string, a copy of n bytes. Every byte goes
 * through etch's allocator, so the failing allocator reaches them; a write
 * that could not be kept makes the close say ETCH_ENOMEM, never a body
 * cut short that looks whole.
 */
#ifndef ETCH_UI_STR_H
#define ETCH_UI_STR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/containers.h"

typedef struct etch__ui_membuf {
  etch_vec v;   /* the bytes written (closed: a NUL after them) */
  FILE *f;      /* open: where to write */
  bool failed;  /* a write could not be kept */
  char io[4096]; /* the stream's buffer (not the C library's heap) */
} etch__ui_membuf;

/* Opens b->f (b stays where it is until closed); NULL, the error set, out
 * of memory. */
FILE *etch__ui_membuf_open(etch__ui_membuf *b);
/* Closes b->f: ETCH_OK with the bytes in b->v, or ETCH_ENOMEM (error set)
 * when any of them could not be kept. */
int etch__ui_membuf_close(etch__ui_membuf *b);
/* The bytes, now the caller's (free), and their length; b is empty. */
char *etch__ui_membuf_take(etch__ui_membuf *b, size_t *len);
/* Closes it if open and frees the bytes. */
void etch__ui_membuf_free(etch__ui_membuf *b);

/* "[1,2,3]": ids as the text of a BIGINT[], for a query to take as one
 * bound value (`IN (SELECT unnest(CAST($N AS BIGINT[])))`), never as
 * SQL. NULL, the error set, out of memory. */
char *etch__ui_ids_text(const int64_t *v, size_t n);

#endif /* ETCH_UI_STR_H */

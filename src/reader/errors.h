/*
 * errors.h - the reader's error messages (errors.c): every failure names the
 * byte offset it was found at, in the file or inside compressed packets.
 */
#ifndef ETCH_READER_ERRORS_H
#define ETCH_READER_ERRORS_H

#include "reader/reader_int.h"

/* Sets the error "[name: ]offset N: msg" for a position inside `src`. */
int etch__rd_fail(etch_reader *r, const rd_src *src, const uint8_t *at,
                  int status, const char *fmt, ...) ETCH_PRINTF(5, 6);
/* The same for a decoder error of `d` (decoding bytes of `src`). */
int etch__rd_fail_dec(etch_reader *r, const rd_src *src, const etch__pb_dec *d);
/* Sets the error "[name: ]offset `off`: msg" for a file-level offset (an
 * error whose message names no offset yet). */
void etch__rd_fail_at(etch_reader *r, int status, uint64_t off,
                      const char *msg);

/* A known field of `msg` with the wrong wire type: EFORMAT naming it. */
int etch__rd_bad_wt(etch_reader *r, const rd_src *src, const uint8_t *msg,
                    const etch__pb_field *f, const char *what);
#define RD_EXPECT(f, w, what)                                  \
  do {                                                         \
    if (ETCH_UNLIKELY((f).wt != (w))) {                        \
      etch__pb_field bad_ = (f); /* keeps f from escaping */    \
      return etch__rd_bad_wt(r, src, d.start, &bad_, what);    \
    }                                                          \
  } while (0)
/* etch__rd_fail_dec through a copy of the decoder, for the same reason. */
#define RD_DEC_FAIL(d)                                         \
  do {                                                         \
    etch__pb_dec failed_ = (d);                                 \
    return etch__rd_fail_dec(r, src, &failed_);                \
  } while (0)

#endif /* ETCH_READER_ERRORS_H */

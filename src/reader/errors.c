/*
 * errors.c - the reader's error messages: "[name: ]offset N: msg", and for
 * bytes inside compressed packets the offset of the compressed packet in
 * the file and the offset in its decompressed data.
 */
#include <stdarg.h>
#include <stdio.h>

#include "reader/errors.h"

static void error_prefixed(etch_reader *r, int status, uint64_t off,
                           const rd_src *src, uint64_t inner_off,
                           const char *msg) {
  const char *name = r->name ? r->name : "";
  const char *sep = r->name ? ": " : "";
  if (!src || src->depth == 0)
    etch__error(status, "%s%soffset %llu: %s", name, sep,
                (unsigned long long)off, msg);
  else
    etch__error(status,
                "%s%soffset %llu: in compressed packets: decompressed offset "
                "%llu: %s",
                name, sep, (unsigned long long)src->wrapper_off,
                (unsigned long long)inner_off, msg);
  r->err_formatted = true;
}

int etch__rd_fail(etch_reader *r, const rd_src *src, const uint8_t *at,
                  int status, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  uint64_t off = (uint64_t)(at - src->start);
  error_prefixed(r, status, off, src, off, msg);
  return status;
}

int etch__rd_fail_dec(etch_reader *r, const rd_src *src, const etch__pb_dec *d) {
  return etch__rd_fail(r, src, d->start + d->err_off, d->err ? d->err : ETCH_EFORMAT,
                       "%s", d->err_msg ? d->err_msg : "malformed protobuf");
}

void etch__rd_fail_at(etch_reader *r, int status, uint64_t off,
                      const char *msg) {
  error_prefixed(r, status, off, NULL, 0, msg);
}

static const char *wt_name(unsigned wt) {
  switch (wt) {
    case ETCH_PB_VARINT: return "varint";
    case ETCH_PB_FIXED64: return "fixed64";
    case ETCH_PB_LEN: return "length-delimited";
    case ETCH_PB_FIXED32: return "fixed32";
    default: return "group";
  }
}

/* A known field with the wrong wire type is malformed input. */
int etch__rd_bad_wt(etch_reader *r, const rd_src *src, const uint8_t *msg,
                  const etch__pb_field *f, const char *what) {
  return etch__rd_fail(r, src, msg + f->off, ETCH_EFORMAT,
                       "%s (field %u) has wire type %s", what, f->id,
                       wt_name(f->wt));
}

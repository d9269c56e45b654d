/*
 * api_int.h - what the API's files share (api.c routes the requests;
 * api_sql.c answers the SQL box, api_zone.c the Find zone): a request,
 * its error answer and the trace it names.
 */
#ifndef ETCH_UI_API_INT_H
#define ETCH_UI_API_INT_H

#include <stdarg.h>
#include <stdio.h>

#include "ui/app.h"

typedef struct etch__ui_req {
  etch__ui *ui;
  etch__ui_getarg get;
  void *ctx;
  FILE *out;
} etch__ui_req;

/* Writes {"error": the message} as the answer; returns `status`. */
int etch__ui_req_vfail(etch__ui_req *r, int status, const char *fmt,
                       va_list ap) ETCH_PRINTF(3, 0);
/* The trace the request names (by `id`), opened; NULL after writing the
 * error (status in *st). */
etch__ui_trace *etch__ui_req_trace(etch__ui_req *r, int *st);

int etch__ui_api_sql(etch__ui_req *r);
int etch__ui_api_zone(etch__ui_req *r);
/* CPU samples and allocation sites (api_samples.c): /api/stats's
 * members, and /api/leaks. */
void etch__ui_stats_samples(FILE *o, const etch__stats_data *d);
int etch__ui_api_leaks(etch__ui_req *r);
int etch__ui_api_sample_flame(etch__ui_req *r);
int etch__ui_api_samples(etch__ui_req *r);
int etch__ui_api_alloc_flame(etch__ui_req *r);
/* A trace's state as the page follows it (live.c). */
int etch__ui_api_live(etch__ui_req *r);

#endif /* ETCH_UI_API_INT_H */

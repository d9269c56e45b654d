/*
 * api_samples.c - CPU samples and allocation sites in the viewer's stats
 * (and so in etch report's page):
 *
 *   /api/stats's "cpu_samples" and "functions": the samples' count and
 *   the functions they were in ([name, self, total], by self samples, the
 *   first 100), as etch stats lists them (query/stats_samples.c);
 *
 *   /api/leaks?id=   etch leaks --hotspots --json of the trace: the
 *   allocations by call site with the bytes still live (query/leaks.c),
 *   {"sites": []} when no allocation has a call stack.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/leaks_sites.h"
#include "ui/api_int.h"

void etch__ui_stats_samples(FILE *o, const etch__stats_data *d) {
  fprintf(o, ",\"cpu_samples\":%lld,\"functions\":[", (long long)d->samples);
  for (size_t i = 0; i < d->nfns && i < 100; i++) {
    fputs(i ? ",[" : "[", o);
    etch__json_string(o, d->fns[i].name, strlen(d->fns[i].name));
    fprintf(o, ",%lld,%lld]", (long long)d->fns[i].self,
            (long long)d->fns[i].total);
  }
  fputc(']', o);
}

int etch__ui_api_leaks(etch__ui_req *r) {
  int st;
  etch__ui_trace *t = etch__ui_req_trace(r, &st);
  if (!t) return st;
  if (!t->path) {
    fputs("{\"sites\":[]}", r->out);
    return 200;
  }
  etch__ui_membuf mb;
  FILE *f = etch__ui_membuf_open(&mb);
  if (!f) {
    fputs("{\"error\":\"out of memory\"}", r->out);
    return 500;
  }
  bool lost = false;
  int rc = etch__query_leaks_file(t->path, f, 50,
                                  ETCH__LEAKS_HOTSPOTS | ETCH__LEAKS_JSON,
                                  true, &lost);
  int crc = etch__ui_membuf_close(&mb);
  if (!rc && !crc && mb.v.len)
    fwrite(mb.v.data, 1, mb.v.len, r->out);
  else
    fputs("{\"sites\":[]}", r->out); /* a trace without memory events */
  etch__ui_membuf_free(&mb);
  return 200;
}

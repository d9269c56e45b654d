/*
 * leaks_sites.h - `etch leaks` by call site (leaks_sites.c): for each
 * allocation call stack of a trace (etch_event.callsite_id, the reader's
 * etch_reader_stacks), the blocks it allocated and still holds, its
 * allocations and bytes (the hotspots) and its temporary allocations, and
 * the reports of them, as text or JSON.
 */
#ifndef ETCH_QUERY_LEAKS_SITES_H
#define ETCH_QUERY_LEAKS_SITES_H

#include <stdio.h>

#include "base/containers.h"
#include "base/map.h"
#include "etch/reader.h"

/* What `etch leaks` shows beyond the blocks never freed. */
enum {
  ETCH__LEAKS_HOTSPOTS = 1, /* most allocations, most bytes, temporaries */
  ETCH__LEAKS_JSON = 2,     /* the report as one JSON object */
};

typedef struct etch__leak_site {
  int64_t callsite; /* etch_event.callsite_id */
  uint64_t allocs, bytes; /* every allocation made here */
  uint64_t temps;         /* ... freed before its thread allocated again */
  uint64_t live_n, live_bytes; /* still allocated */
  uint64_t peak_n, peak_bytes; /* allocated at the peak */
} etch__leak_site;

/* A change of a site's live blocks since the last peak. */
typedef struct etch__leak_change {
  uint32_t site;
  int32_t n;
  int64_t bytes;
} etch__leak_change;

typedef struct etch__leak_sites {
  etch_vec sites;        /* of etch__leak_site */
  etch__leak_site *s;    /* its array (set as it moves) */
  size_t n;              /* its count */
  etch_u64map by_callsite; /* callsite id -> index in s */
  etch_u64map last_alloc;  /* pid << 32 | tid -> its latest allocation */
  /* The changes since the last peak, applied to peak_* at the next. */
  etch_vec log; /* of etch__leak_change */
  bool oom;
} etch__leak_sites;

/* An allocation of `size` bytes at `ptr` by an event with a call stack:
 * its site's index, or -1 when out of memory. */
int64_t etch__leak_sites_alloc(etch__leak_sites *S, const etch_event *ev,
                               uint64_t ptr, uint64_t size);
/* Block `ptr` of site `site` freed by `ev`. */
void etch__leak_sites_free(etch__leak_sites *S, const etch_event *ev,
                           uint32_t site, uint64_t ptr, uint64_t size);
/* Block of site `site` gone without a free (its address allocated again). */
void etch__leak_sites_gone(etch__leak_sites *S, uint32_t site, uint64_t size);
/* The live bytes reached a new peak: each site's live blocks now are its
 * blocks at the peak. */
void etch__leak_sites_peak(etch__leak_sites *S);
void etch__leak_sites_release(etch__leak_sites *S);

/* The never-freed blocks by call site (at most `top` sites, 0: all) and,
 * with ETCH__LEAKS_HOTSPOTS, the hotspots, the temporary allocations and
 * the blocks live at the peak (`peak`: its bytes and time, for a title),
 * as text. Nothing when no allocation had a call stack. */
void etch__leak_sites_print(FILE *out, const etch__leak_sites *S,
                            const etch_stacks *st, int top, unsigned flags,
                            const char *peak);
/* The sites as a JSON array (every site with an allocation). */
void etch__leak_sites_json(FILE *out, const etch__leak_sites *S,
                           const etch_stacks *st, int top);

#endif /* ETCH_QUERY_LEAKS_SITES_H */

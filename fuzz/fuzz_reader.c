/*
 * fuzz_reader.c - libFuzzer target: runs the reader on the input, in the
 * timestamp, file and per-track orders (the last with and without every
 * track held) with every event and track subscribed, the packet dump into
 * /dev/null, and its packets fed one by one to a stream reader. Any crash,
 * sanitizer report, hang or runaway allocation is a bug: the reader must
 * answer bad input with an error. In per-track order each track's slices
 * and instants must come in timestamp order, and each event's index must be
 * one the read gave out, once. The call-stack tables must hold together
 * (every id in range, a callsite's parent before it, one depth deeper).
 *
 *   CC=clang cmake -B build-fuzz -DETCH_BUILD_FUZZ=ON && make -C build-fuzz fuzz_reader
 *   build-fuzz/fuzz/fuzz_reader -max_len=65536 corpus-copy/ fuzz/corpus/reader/
 */
#include <etch/reader.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader/dump.h"
#include "reader/reader_priv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t sink;
static int64_t max_callsite; /* the largest etch_event.callsite_id */

/* Reads everything handed out so the sanitizers check the pointers. */
static void on_event(const etch_event *ev, void *user) {
  (void)user;
  sink += strlen(ev->name) + strlen(ev->category) + strlen(ev->track->name);
  sink += (size_t)(ev->ts ^ ev->pid ^ ev->tid);
  for (size_t i = 0; i < ev->args_count; i++) {
    const etch_arg *a = &ev->args[i];
    sink += strlen(a->key) + strlen(a->flat_key);
    if (a->type == ETCH_VALUE_STRING || a->type == ETCH_VALUE_JSON)
      sink += strlen(a->v.s);
  }
  for (size_t i = 0; i < ev->flow_ids_count; i++) sink += ev->flow_ids[i];
  for (size_t i = 0; i < ev->terminating_flow_ids_count; i++)
    sink += ev->terminating_flow_ids[i];
  if (ev->callsite_id < -1) abort();
  if (ev->callsite_id > max_callsite) max_callsite = ev->callsite_id;
}

/* A CPU sample: its stack a row (checked with the events'), its fields
 * read. */
static void on_sample(const etch_sample *smp, void *user) {
  (void)user;
  sink += (size_t)(smp->ts ^ smp->pid ^ smp->tid ^ (int64_t)smp->cpu ^
                   (int64_t)smp->cpu_mode);
  if (smp->callsite_id < -1 || smp->pid < 0 || smp->tid < 0) abort();
  if (smp->callsite_id > max_callsite) max_callsite = smp->callsite_id;
}

/* The call-stack tables: every id in range, every parent before its
 * child, every event's stack a row, every string readable. */
static void check_stacks(etch_reader *r) {
  etch_stacks st;
  if (etch_reader_stacks(r, &st)) return;
  if (max_callsite >= (int64_t)st.ncallsites) abort();
  for (size_t i = 0; i < st.nmappings; i++)
    sink += strlen(st.mappings[i].build_id) + strlen(st.mappings[i].name);
  for (size_t i = 0; i < st.nframes; i++) {
    const etch_stack_frame *f = &st.frames[i];
    if (f->mapping >= st.nmappings) abort();
    if (f->nsymbols && (f->symbol >= st.nsymbols ||
                        st.nsymbols - f->symbol < f->nsymbols))
      abort();
    sink += strlen(f->name);
  }
  for (size_t i = 0; i < st.ncallsites; i++) {
    const etch_stack_callsite *c = &st.callsites[i];
    if (c->frame_id >= st.nframes || c->parent_id >= (int64_t)i ||
        c->parent_id < -1 ||
        (c->parent_id >= 0 && st.callsites[c->parent_id].depth + 1 != c->depth))
      abort();
  }
  for (size_t i = 0; i < st.nsymbols; i++)
    sink += strlen(st.symbols[i].name) + strlen(st.symbols[i].source_file);
}

/* Per-track order's promises, checked for the first tracks of a read. */
enum { kTracks = 64, kIndexes = 1 << 16 };
static struct {
  uint64_t uuid;
  uint32_t machine; /* two machines' tracks of one uuid are two tracks */
  int64_t last;
} tracks[kTracks];
static size_t ntracks;
static uint8_t seen[kIndexes / 8];

static void on_event_per_track(const etch_event *ev, void *user) {
  on_event(ev, user);
  if (ev->index < kIndexes) {
    if (seen[ev->index / 8] & (1u << (ev->index % 8))) abort();
    seen[ev->index / 8] |= (uint8_t)(1u << (ev->index % 8));
  }
  if (ev->type == ETCH_EVENT_COUNTER) return;
  size_t i = 0;
  while (i < ntracks && (tracks[i].uuid != ev->track->uuid ||
                         tracks[i].machine != ev->track->machine_id))
    i++;
  if (i == ntracks) {
    if (ntracks == kTracks) return;
    tracks[ntracks].uuid = ev->track->uuid;
    tracks[ntracks].machine = ev->track->machine_id;
    tracks[ntracks++].last = ev->ts;
    return;
  }
  if (ev->ts < tracks[i].last) abort(); /* out of order on its track */
  tracks[i].last = ev->ts;
}

static void on_track(const etch_track_info *t, void *user) {
  (void)user;
  sink += strlen(t->name) + strlen(t->counter_unit_name) + (size_t)t->pid;
}

/* The same packets fed one at a time to a stream reader, each on the
 * sequence its record's first byte after the tag picks when it has none;
 * a packet refused must leave the reader able to take the next. */
static void feed_stream(const uint8_t *data, size_t size) {
  etch_reader *r;
  if (etch_reader_open_stream(&r)) return;
  etch_reader_on(r, NULL, NULL, on_event, NULL);
  etch_reader_on_track(r, on_track, NULL);
  const uint8_t *p = data, *end = data + size;
  while (p < end && *p == 0x0A) {
    p++;
    uint64_t len = 0;
    int shift = 0;
    while (p < end && shift < 63) {
      len |= (uint64_t)(*p & 0x7f) << shift;
      shift += 7;
      if (!(*p++ & 0x80)) break;
    }
    if (len > (uint64_t)(end - p)) break;
    etch_reader_feed(r, p, (size_t)len, len ? (uint32_t)(p[0] % 4) : 0);
    p += len;
  }
  etch_reader_stats st;
  etch_reader_get_stats(r, &st);
  etch_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *devnull;
  if (!devnull) devnull = fopen("/dev/null", "w");
  for (int order = 0; order < 4; order++) {
    etch_reader *r;
    if (etch_reader_open_memory(&r, data, size)) return 0;
    max_callsite = -1;
    if (order < 2) {
      etch_reader_set_order(r, (etch_reader_order)order);
      etch_reader_on(r, NULL, NULL, on_event, NULL);
    } else {
      etch__reader_set_track_order(r, order == 3);
      etch__reader_set_match_ends(r, false);
      ntracks = 0;
      memset(seen, 0, sizeof seen);
      etch_reader_on(r, NULL, NULL, on_event_per_track, NULL);
    }
    etch_reader_on(r, "cat", NULL, on_event, NULL);
    etch_reader_on_track(r, on_track, NULL);
    etch_reader_on_sample(r, on_sample, NULL);
    etch_reader_run(r);
    etch_reader_stats st;
    etch_reader_get_stats(r, &st);
    int64_t a, b;
    etch_reader_time_bounds(r, &a, &b);
    check_stacks(r);
    etch_reader_close(r);
  }
  if (devnull) etch__reader_dump(data, size, devnull);
  feed_stream(data, size);
  return 0;
}

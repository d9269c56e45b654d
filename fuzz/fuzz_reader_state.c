/*
 * fuzz_reader_state.c - a reader's saved state (reader/save.c), as the
 * cache of a trace being recorded keeps it between two `etch query`
 * processes, restored into a reader opened on a trace (the reader corpus's
 * etch.pb, or ETCH_FUZZ_LIVE_TRACE), which then reads on to the file's end
 * in the live import's order. Without DuckDB: many more inputs a second
 * than fuzz_live_state, which restores the importer's part too. The input
 * is a reader's part of a saved live import (fuzz_live_state's seeds
 * without their first 21 bytes). Nothing may crash, leak or read outside
 * the input.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader/reader_priv.h"
#include "reader/save.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_path[256];
static uint64_t g_dev, g_ino;

static void init(void) {
  const char *src = getenv("ETCH_FUZZ_LIVE_TRACE");
  FILE *f = fopen(src ? src : ETCH_FUZZ_LIVE_DEFAULT_TRACE, "rb");
  if (!f) abort();
  static uint8_t buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  snprintf(g_path, sizeof g_path, "/tmp/etch_fuzz_rstate_%ld.pftrace",
           (long)getpid());
  f = fopen(g_path, "wb");
  if (!f) abort();
  fwrite(buf, 1, n, f);
  fclose(f);
  struct stat st;
  if (stat(g_path, &st)) abort();
  g_dev = (uint64_t)st.st_dev;
  g_ino = (uint64_t)st.st_ino;
}

static void on_event(const etch_event *ev, void *user) {
  (void)ev;
  ++*(uint64_t *)user;
}

static void on_track(const etch_track_info *t, void *user) {
  (void)t;
  ++*(uint64_t *)user;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int inited;
  if (!inited) {
    init();
    inited = 1;
  }
  uint8_t *in = malloc(size ? size : 1);
  if (!in) return 0;
  memcpy(in, data, size);
  /* The file's identity where a save keeps it (offsets 12 and 20), and
   * the track order it was read in (offset 37). */
  bool hold_all = size > 37 && in[37] == 1;
  if (size >= 28) {
    for (int i = 0; i < 8; i++) {
      in[12 + i] = (uint8_t)(g_dev >> (8 * i));
      in[20 + i] = (uint8_t)(g_ino >> (8 * i));
    }
  }
  etch_reader *r;
  uint64_t n = 0;
  if (etch_reader_open_file(&r, g_path)) abort();
  etch__reader_set_track_order(r, hold_all);
  etch__reader_set_match_ends(r, false);
  etch_reader_set_allow_truncated(r, true);
  etch_reader_on_track(r, on_track, &n);
  etch__reader_set_idle_tracks(r, on_track);
  etch_reader_on(r, NULL, NULL, on_event, &n);
  etch__sv_r sr = {.p = in, .left = size};
  if (!etch__reader_restore(r, &sr)) {
    bool grew;
    (void)etch__reader_resume(r, &grew);
    etch_reader_stats st;
    etch_reader_get_stats(r, &st);
  }
  etch_reader_close(r);
  free(in);
  return 0;
}

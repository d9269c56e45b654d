/*
 * fuzz_live_state.c - the state `etch query` saves in the cache of a trace
 * being recorded and reads back at the next query (query/import_save.c,
 * reader/save.c): anyone who can write the cache directory can write it.
 * The input is a saved live import; it is restored into a new live import
 * of a trace (the reader corpus's etch.pb, or ETCH_FUZZ_LIVE_TRACE) in a
 * new database, which then reads on to the file's end. A restore either
 * fails with an error or gives an import that steps; nothing may crash,
 * leak or read outside the input.
 *
 * With ETCH_FUZZ_LIVE_SEED=DIR the first run writes there the states saved
 * after reading each prefix of the trace (seeds for the corpus).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/containers.h"
#include "query/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_path[256];
static uint64_t g_dev, g_ino;

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  uint8_t *buf = malloc(1 << 20);
  *len = buf ? fread(buf, 1, 1 << 20, f) : 0;
  fclose(f);
  return buf;
}

/* Seeds: the state after each prefix (the file is the prefix then). */
static void write_seeds(const uint8_t *t, size_t n, const char *dir) {
  etch__import_opts o = {.all_args = true, .quiet = true};
  for (size_t cut = 0; cut <= n; cut += 1 + n / 16) {
    FILE *f = fopen(g_path, "wb");
    if (!f) return;
    fwrite(t, 1, cut, f);
    fclose(f);
    etch__db *db;
    etch__import_live *l;
    if (etch__db_open(&db, NULL)) continue;
    if (!etch__import_live_open(&l, db, g_path, &o)) {
      etch_vec v = {0};
      if (!etch__import_live_save(l, &v)) {
        char name[512];
        snprintf(name, sizeof name, "%s/state-%zu", dir, cut);
        FILE *s = fopen(name, "wb");
        if (s) {
          fwrite(v.data, 1, v.len, s);
          fclose(s);
        }
      }
      etch__vec_free(&v);
      etch__import_live_close(l);
    }
    etch__db_close(db);
  }
}

static void init(void) {
  const char *src = getenv("ETCH_FUZZ_LIVE_TRACE");
  size_t n = 0;
  uint8_t *t = slurp(src ? src : ETCH_FUZZ_LIVE_DEFAULT_TRACE, &n);
  if (!t) abort();
  snprintf(g_path, sizeof g_path, "/tmp/etch_fuzz_live_%ld.pftrace",
           (long)getpid());
  const char *seeds = getenv("ETCH_FUZZ_LIVE_SEED");
  if (seeds) write_seeds(t, n, seeds);
  FILE *f = fopen(g_path, "wb");
  if (!f) abort();
  fwrite(t, 1, n, f);
  fclose(f);
  free(t);
  struct stat st;
  if (stat(g_path, &st)) abort();
  g_dev = (uint64_t)st.st_dev;
  g_ino = (uint64_t)st.st_ino;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int inited;
  if (!inited) {
    init();
    inited = 1;
  }
  /* The file's identity put where a save keeps it (offsets 33 and 41):
   * the fuzzer's states were saved from files of other inodes. */
  uint8_t *in = malloc(size ? size : 1);
  if (!in) return 0;
  memcpy(in, data, size);
  if (size >= 49) {
    for (int i = 0; i < 8; i++) {
      in[33 + i] = (uint8_t)(g_dev >> (8 * i));
      in[41 + i] = (uint8_t)(g_ino >> (8 * i));
    }
  }
  /* One database for the run (a new one each time would be most of the
   * time), emptied now and then. */
  static etch__db *db;
  static unsigned runs;
  if (!db && (etch__db_open(&db, NULL) || etch__query_schema_create(db, NULL)))
    abort();
  if (++runs % 256 == 0) {
    size_t n;
    const char *t;
    for (size_t i = 0; (t = etch__query_stored_table_name(i, &n)); i++) {
      char sql[160];
      snprintf(sql, sizeof sql, "DELETE FROM %.*s;", (int)n, t);
      if (etch__db_exec(db, sql)) abort();
    }
  }
  etch__import_opts o = {.all_args = true, .quiet = true};
  etch__import_live *l = NULL;
  if (!etch__import_live_restore(&l, db, g_path, &o, in, size)) {
    bool changed;
    (void)etch__import_live_step(l, &changed);
    etch__import_live_close(l);
  } else if (l) {
    abort(); /* refused: nothing given back */
  }
  free(in);
  return 0;
}

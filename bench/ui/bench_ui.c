/*
 * bench_ui.c - how fast etch ui answers the page, on a trace's cached
 * tables (what the server does, without HTTP: a request over loopback adds
 * well under a millisecond).
 *
 *   bench_ui TRACE [WIDTH (default 1600)] [STEPS (default 40)]
 *
 * With ETCH_CACHE_DIR pointing at a directory (default: etch's), it runs:
 *   open          opening the trace's cache (once imported: `etch query`
 *                 builds the cache; run it first) and /api/trace (its rows)
 *   first tile    the whole trace at WIDTH pixels, then its flows: what
 *                 the first timeline needs
 *   zoom/pan      STEPS tiles of windows zooming in by 1.5x towards a
 *                 point, then STEPS pans by a third of the window, at
 *                 several depths of zoom: each answer's time, median,
 *                 95th percentile and max
 *   flame         the whole trace's flame graph (first and cached), one
 *                 thread's, and a tenth of the trace's
 * BENCH_UI_EACH=1 prints every zoom's and pan's time, and whether it
 * built a stretch's overview.
 * Times are wall clock, one process; CPU is the process's user and system
 * time over the same call, every thread (DuckDB's included): on a machine
 * that other work shares, the wall clock grows and the CPU much less.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "ui/app.h"

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

typedef struct kv {
  const char *k[8];
  char v[8][4096];
  int n;
} kv;

static const char *get(void *ctx, const char *key) {
  kv *a = ctx;
  for (int i = 0; i < a->n; i++)
    if (!strcmp(a->k[i], key)) return a->v[i];
  return NULL;
}

static size_t g_bytes;
static double g_cpu; /* CPU ms of the last call, every thread of the process */

static double cpu_ms(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* One API call; its time in ms (exits on an error). */
static double call(etch__ui *ui, const char *path, kv *a) {
  char *body = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&body, &len);
  double t0 = now_ms(), c0 = cpu_ms();
  int st = etch__ui_api(ui, path, get, a, f);
  fclose(f);
  double t = now_ms() - t0;
  g_cpu = cpu_ms() - c0;
  if (st != 200) {
    fprintf(stderr, "bench_ui: %s: %d %s\n", path, st, body);
    exit(1);
  }
  g_bytes = len;
  free(body);
  return t;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void summary(const char *what, double *t, double *c, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_d);
  qsort(c, (size_t)n, sizeof *c, cmp_d);
  printf("%-34s n=%-3d median %7.1f ms  p95 %7.1f ms  max %7.1f ms"
         "  (CPU median %.1f ms)\n",
         what, n, t[n / 2], t[(n * 95) / 100 < n ? (n * 95) / 100 : n - 1],
         t[n - 1], c[n / 2]);
}

/* The stretches' overviews built so far. */
static int stretches(const etch__ui_trace *t) {
  int n = 0;
  for (size_t k = 0; k < sizeof t->fine / sizeof *t->fine; k++) n += !!t->fine[k];
  return n;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_ui TRACE [WIDTH] [STEPS]\n");
    return 2;
  }
  int width = argc > 2 ? atoi(argv[2]) : 1600;
  int steps = argc > 3 ? atoi(argv[3]) : 40;
  /* BENCH_UI_EACH=1: every zoom's and pan's time too. */
  bool each = getenv("BENCH_UI_EACH") && *getenv("BENCH_UI_EACH") == '1';
  if (width < 100) width = 100;
  if (steps < 2) steps = 2;
  etch__ui *ui;
  if (etch__ui_new(&ui) || etch__ui_add_path(ui, argv[1])) {
    fprintf(stderr, "bench_ui: %s\n", etch_last_error());
    return 1;
  }
  etch__ui_trace *t = &ui->t[0];
  kv a = {.k = {"id", "start", "end", "px", "tracks", "counters", "utid"}};
  a.n = 1;
  snprintf(a.v[0], sizeof a.v[0], "%s", t->id);
  double t_open = call(ui, "/api/trace", &a);
  if (t->imported)
    printf("(the trace had no cache: the open above imported it; run again)\n");
  /* The tracks, as the page asks for them. */
  etch__res r;
  char *tracks = a.v[4], *counters = a.v[5];
  tracks[0] = counters[0] = '\0';
  if (etch__ui_query(t->db,
                     "SELECT id, type = 'counter' FROM track ORDER BY id", NULL,
                     0, &r) == ETCH_OK) {
    while (etch__res_next(&r)) {
      char *dst = etch__res_i64(&r, 1) ? counters : tracks;
      size_t l = strlen(dst);
      snprintf(dst + l, 4096 - l, "%s%lld", l ? "," : "",
               (long long)etch__res_i64(&r, 0));
    }
    etch__res_close(&r);
  }
  int64_t start = 0, end = 0;
  etch__ui_query(t->db, "SELECT min(start_ts), max(end_ts) FROM trace_bounds",
                 NULL, 0, &r);
  if (etch__res_next(&r)) {
    start = etch__res_i64(&r, 0);
    end = etch__res_i64(&r, 1) + 1;
  }
  etch__res_close(&r);
  a.n = 6;
  snprintf(a.v[3], sizeof a.v[3], "%d", width);
#define WINDOW(s, e) \
  (snprintf(a.v[1], 4096, "%lld", (long long)(s)), \
   snprintf(a.v[2], 4096, "%lld", (long long)(e)))
  WINDOW(start, end);
  double t_tile = call(ui, "/api/tile", &a);
  double c_tile = g_cpu;
  size_t tile_bytes = g_bytes;
  double t_flows = call(ui, "/api/flows", &a);
  printf("trace: %s, %lld ns long, %zu bytes of tile at %d px\n", argv[1],
         (long long)(end - start), tile_bytes, width);
  printf("%-34s %7.1f ms\n", "open (cache) + rows", t_open);
  printf("%-34s %7.1f ms (CPU %.1f ms)\n", "first tile (whole trace)", t_tile,
         c_tile);
  printf("%-34s %7.1f ms\n", "first flows", t_flows);
  printf("%-34s %7.1f ms\n", "first timeline, all told", t_open + t_tile + t_flows);
  /* The flame graph asked for at once: a big trace's is being computed
   * ahead since the first tile; this waits for it. */
  kv f = {.k = {"id", "start", "end", "utid"}, .n = 1};
  snprintf(f.v[0], sizeof f.v[0], "%s", t->id);
  double t0f = now_ms();
  double t_f1 = call(ui, "/api/flame", &f);
  size_t flame_bytes = g_bytes;
  printf("%-34s %7.1f ms after the first tile (%zu bytes)\n",
         "flame graph, whole trace", now_ms() - t0f + t_flows, flame_bytes);

  /* Zoom in by 1.5x towards a point at 37% of the trace, then pan. */
  double *zt = calloc((size_t)steps * 4, sizeof *zt);
  double *zc = calloc((size_t)steps * 4, sizeof *zc);
  int nz = 0;
  double c = (double)start + 0.37 * (double)(end - start);
  double s = (double)start, e = (double)end;
  for (int i = 0; i < steps && e - s > 2000; i++) {
    s = c - (c - s) / 1.5;
    e = c + (e - c) / 1.5;
    WINDOW(s, e);
    int built = stretches(t);
    zt[nz] = call(ui, "/api/tile", &a);
    zc[nz] = g_cpu;
    built = stretches(t) - built;
    zt[nz] += call(ui, "/api/flows", &a);
    zc[nz] += g_cpu;
    if (each)
      printf("  zoom #%d, window %.3g of the trace: %.1f ms (CPU %.1f ms)%s\n",
             nz, (e - s) / (double)(end - start), zt[nz], zc[nz],
             built ? ", built a stretch" : "");
    nz++;
  }
  summary("zoom tiles (+flows)", zt, zc, nz);
  static const double kSpans[] = {0.1, 0.01, 0.001};
  for (int k = 0; k < 3; k++) {
    double span = (double)(end - start) * kSpans[k];
    int np = 0;
    s = (double)start + 0.2 * (double)(end - start);
    for (int i = 0; i < steps; i++) {
      s += span / 3;
      WINDOW(s, s + span);
      int built = stretches(t);
      zt[np] = call(ui, "/api/tile", &a);
      zc[np] = g_cpu;
      built = stretches(t) - built;
      zt[np] += call(ui, "/api/flows", &a);
      zc[np] += g_cpu;
      if (each)
        printf("  pan %g #%d: %.1f ms (CPU %.1f ms)%s\n", kSpans[k], i,
               zt[np], zc[np], built ? ", built a stretch" : "");
      np++;
    }
    char what[64];
    snprintf(what, sizeof what, "pan tiles, window %g of the trace", kSpans[k]);
    summary(what, zt, zc, np);
  }
  free(zt);
  free(zc);

  double t_f2 = call(ui, "/api/flame", &f);
  f.n = 4;
  snprintf(f.v[1], 4096, "%lld", (long long)(start + (end - start) / 2));
  snprintf(f.v[2], 4096, "%lld", (long long)(start + (end - start) / 2 + (end - start) / 10));
  snprintf(f.v[3], 4096, "-1");
  double t_f3 = call(ui, "/api/flame", &f);
  f.n = 4;
  f.k[1] = "x1", f.k[2] = "x2";
  snprintf(f.v[3], 4096, "1");
  double t_f4 = call(ui, "/api/flame", &f);
  (void)t_f1;
  /* Computed here, on this thread: what computing ahead hides. */
  char *body = NULL;
  size_t blen = 0;
  FILE *bf = open_memstream(&body, &blen);
  double t0c = now_ms(), c0c = cpu_ms();
  etch__ui_flame(t->db, 0, -1, -1, bf);
  fclose(bf);
  free(body);
  printf("%-34s %7.1f ms (CPU %.1f ms)\n", "flame graph, whole, computed here",
         now_ms() - t0c, cpu_ms() - c0c);
  printf("%-34s %7.1f ms\n", "flame graph, whole trace again", t_f2);
  printf("%-34s %7.1f ms\n", "flame graph, a tenth of the trace", t_f3);
  printf("%-34s %7.1f ms\n", "flame graph, one thread", t_f4);
  /* The overview of a big trace at several sizes: build time, size. */
  static const int64_t kCols[] = {8192, 16384, 32768, 65536};
  for (int k = 0; k < 4; k++) {
    etch__ui_lod *lod;
    double t0 = now_ms();
    if (etch__ui_lod_build(t->db, kCols[k], t->max_dur, &lod)) break;
    double tb = now_ms() - t0;
    etch__ui_tile tile;
    int64_t all[4096];
    size_t na = 0;
    for (char *p = tracks; *p && na < 4096;) {
      all[na++] = strtoll(p, &p, 10);
      if (*p == ',') p++;
    }
    t0 = now_ms();
    etch__ui_lod_tile(lod, all, na, start, end,
                      (double)(end - start) / width, &tile);
    double tt = now_ms() - t0;
    printf("overview at %6lld columns: built in %6.1f ms, whole-trace tile "
           "from it %5.1f ms (%zu rectangles)\n",
           (long long)kCols[k], tb, tt, tile.n);
    etch__ui_tile_free(&tile);
    etch__ui_lod_free(lod);
  }
  etch__ui_free(ui);
  return 0;
}

/*
 * report.c - `etch report`'s data: what the page asks the server for,
 * answered once for the whole trace and embedded in the page. The slices
 * are the whole trace's tile at `columns` pixels across (so the file's size
 * follows `columns` and the number of tracks and depths, not the number of
 * events: a trace of any length is at most about two rectangles per column
 * per depth per track); the page merges them again for the window it
 * shows and cannot zoom in past that detail. The flame graph and the stats
 * are whole; SQL needs the server.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "ui/app.h"

typedef struct kv {
  const char *k[8];
  const char *v[8];
  size_t n;
} kv;

static const char *kv_get(void *ctx, const char *key) {
  const kv *a = ctx;
  for (size_t i = 0; i < a->n; i++)
    if (!strcmp(a->k[i], key)) return a->v[i];
  return NULL;
}

/* A comma-separated list of the ids the query returns. */
static int id_list(etch__db *db, const char *sql, char **out) {
  *out = NULL;
  etch__ui_membuf mb;
  FILE *f = etch__ui_membuf_open(&mb);
  if (!f) return etch__error(ETCH_ENOMEM, "out of memory");
  etch__res r;
  int rc = etch__query_run(db, sql, NULL, 0, &r);
  for (size_t i = 0; !rc && etch__res_next(&r); i++)
    fprintf(f, "%s%lld", i ? "," : "", (long long)etch__res_i64(&r, 0));
  if (!rc) rc = etch__res_close(&r);
  int crc = etch__ui_membuf_close(&mb);
  if (!rc) rc = crc;
  size_t len;
  if (!rc) *out = etch__ui_membuf_take(&mb, &len);
  etch__ui_membuf_free(&mb);
  return rc;
}

int etch__ui_report_data(etch__ui *ui, size_t index, int columns, FILE *out) {
  if (index >= ui->n) return etch__error(ETCH_EINVAL, "no trace %zu", index);
  etch__ui_trace *t = &ui->t[index];
  int rc = etch__ui_open(ui, t);
  if (rc) return rc;
  int64_t start = 0, end = 0;
  etch__res r;
  rc = etch__query_run(t->db,
                      "SELECT CAST(coalesce(min(start_ts), 0) AS BIGINT),"
                      " CAST(coalesce(max(end_ts), 0) AS BIGINT) FROM trace_bounds",
                      NULL, 0, &r);
  if (rc) return rc;
  if (etch__res_next(&r)) {
    start = etch__res_i64(&r, 0);
    end = etch__res_i64(&r, 1);
  }
  if ((rc = etch__res_close(&r))) return rc;
  if (end <= start) end = start + 1;
  end++; /* the window is [start, end): the last event's end inside */
  char *tracks = NULL, *counters = NULL;
  rc = id_list(t->db, "SELECT DISTINCT track_id FROM slice ORDER BY 1", &tracks);
  if (!rc)
    rc = id_list(t->db, "SELECT DISTINCT track_id FROM counter ORDER BY 1",
                 &counters);
  char s0[32], s1[32], px[32];
  snprintf(s0, sizeof s0, "%lld", (long long)start);
  snprintf(s1, sizeof s1, "%lld", (long long)end);
  snprintf(px, sizeof px, "%d", columns);
  kv a = {.k = {"id", "start", "end", "px", "tracks", "counters"},
          .v = {t->id, s0, s1, px, tracks, counters},
          .n = 6};
  kv whole = {.k = {"id"}, .v = {t->id}, .n = 1};
  static const struct {
    const char *key, *path;
    bool window;
  } kParts[] = {{"trace", "/api/trace", false}, {"tile", "/api/tile", true},
                {"flows", "/api/flows", true},  {"flame", "/api/flame", false},
                {"stats", "/api/stats", false}, {"leaks", "/api/leaks", false}};
  fputs("{", out);
  for (size_t i = 0; !rc && i < ETCH_ARRAY_SIZE(kParts); i++) {
    etch__ui_membuf mb;
    FILE *f = etch__ui_membuf_open(&mb);
    if (!f) {
      rc = etch__error(ETCH_ENOMEM, "out of memory");
      break;
    }
    int st = etch__ui_api(ui, kParts[i].path, kv_get,
                          kParts[i].window ? &a : &whole, f);
    if ((rc = etch__ui_membuf_close(&mb))) {
      /* the error said */
    } else if (st != 200) {
      rc = etch__error(st == 500 && strstr((const char *)mb.v.data,
                                           "out of memory")
                           ? ETCH_ENOMEM
                           : ETCH_EIO,
                       "%s: %.*s", kParts[i].key, (int)mb.v.len,
                       (const char *)mb.v.data);
    } else {
      fprintf(out, "%s\"%s\":", i ? "," : "", kParts[i].key);
      fwrite(mb.v.data, 1, mb.v.len, out);
    }
    etch__ui_membuf_free(&mb);
  }
  fprintf(out, ",\"columns\":%d}", columns);
  free(tracks);
  free(counters);
  return rc;
}

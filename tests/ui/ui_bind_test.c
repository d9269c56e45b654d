/*
 * ui_bind_test.c - values from a request are bound to the ui's queries,
 * never printed into their SQL: names with quotes, a semicolon and a
 * comment are found as what they are, track lists of several ids answer
 * the tracks asked for.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "ui/app.h"
#include "ui_trace.h"

static const char *hostile_trace(void) {
  const int B = ETCH_TE_TYPE_SLICE_BEGIN, E = ETCH_TE_TYPE_SLICE_END;
  tb t;
  tb_init(&t);
  tb_process(&t, 1, UI_PROC, 10, "app");
  tb_thread(&t, 1, UI_MAIN, 10, 10, "main");
  tb_thread(&t, 2, UI_WORKER, 10, 11, "worker");
  tb_event(&t, 1, 1000, UI_MAIN, B, "c", "it's");
  tb_event(&t, 1, 2000, UI_MAIN, E, NULL, NULL);
  tb_event(&t, 1, 3000, UI_MAIN, B, "c", "x'); DROP TABLE slice_data; --");
  tb_event(&t, 1, 4000, UI_MAIN, E, NULL, NULL);
  tb_event(&t, 2, 5000, UI_WORKER, B, "c", "plain");
  tb_event(&t, 2, 6000, UI_WORKER, E, NULL, NULL);
  const char *p = tb_write_file(&t, "ui_bind.pftrace");
  tb_free(&t);
  return p;
}

typedef struct args {
  const char *k[8], *v[8];
} args;

static const char *get(void *ctx, const char *key) {
  args *a = ctx;
  for (int i = 0; i < 8 && a->k[i]; i++)
    if (!strcmp(a->k[i], key)) return a->v[i];
  return NULL;
}

static int call(etch__ui *ui, const char *path, args *a, char **body) {
  size_t len = 0;
  FILE *f = open_memstream(body, &len);
  int st = etch__ui_api(ui, path, get, a, f);
  fclose(f);
  return st;
}

static int search(etch__ui *ui, const char *q, char **body) {
  args a = {{"id", "q"}, {ui->t[0].id, q}};
  return call(ui, "/api/search", &a, body);
}

TEST(ui_search_binds_a_name_with_quotes) {
  etch__ui *ui;
  ASSERT_OK(etch__ui_new(&ui));
  etch__ui_set_cache_dir(ui, etch_test_tmpdir());
  ASSERT_OK(etch__ui_add_path(ui, hostile_trace()));
  char *b;
  ASSERT_EQ_INT(search(ui, "it's", &b), 200);
  ASSERT_EQ_STR(b, "{\"matches\":[{\"id\":1,\"ts\":1000,\"track\":1,"
                   "\"depth\":0,\"name\":\"it's\"}],\"total\":1}");
  free(b);
  ASSERT_EQ_INT(search(ui, "'); DROP TABLE slice_data; --", &b), 200);
  ASSERT_TRUE(strstr(b, "\"name\":\"x'); DROP TABLE slice_data; --\"}],"
                        "\"total\":1}") != NULL);
  free(b);
  /* Both quoted names, and the table is still there. */
  ASSERT_EQ_INT(search(ui, "'", &b), 200);
  ASSERT_TRUE(strstr(b, "\"total\":2}") != NULL);
  free(b);
  ASSERT_EQ_INT(search(ui, "plain", &b), 200);
  ASSERT_TRUE(strstr(b, "\"total\":1}") != NULL);
  free(b);
  etch__ui_free(ui);
}

TEST(ui_tile_binds_its_track_list) {
  etch__ui *ui;
  ASSERT_OK(etch__ui_new(&ui));
  etch__ui_set_cache_dir(ui, etch_test_tmpdir());
  ASSERT_OK(etch__ui_add_path(ui, hostile_trace()));
  etch__ui_trace *t = &ui->t[0];
  ASSERT_OK(etch__ui_open(ui, t));
  /* The DuckDB tile (whose SQL takes the list as one bound value): two
   * tracks, one of them twice, and an id no track has. */
  int64_t tracks[] = {2, 1, 1, 99};
  etch__ui_tile tile;
  ASSERT_OK(etch__ui_tile_slices_sql(t->db, tracks, 4, 0, 10000, 1, &tile));
  ASSERT_EQ_INT(tile.n, 3);
  ASSERT_EQ_STR(tile.rects[0].name, "it's");
  ASSERT_EQ_STR(tile.rects[1].name, "x'); DROP TABLE slice_data; --");
  ASSERT_EQ_STR(tile.rects[2].name, "plain");
  etch__ui_tile_free(&tile);
  /* No track at all: an empty tile. */
  ASSERT_OK(etch__ui_tile_slices_sql(t->db, tracks + 3, 1, 0, 10000, 1, &tile));
  ASSERT_EQ_INT(tile.n, 0);
  etch__ui_tile_free(&tile);
  etch__ui_free(ui);
}

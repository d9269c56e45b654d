/*
 * ui_zone_test.c - one slice name's durations (query/zone.h) and the Find
 * zone's request (/api/zone): the count, the nearest-rank percentiles and
 * the histogram of ui_zone_trace's 100 steps (1 to 100 us, shuffled),
 * computed here from the trace's own definition; the API's refusals.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/zone.h"
#include "test.h"
#include "ui/app.h"
#include "ui_trace.h"

static const char *zone_file(void) {
  tb t;
  tb_init(&t);
  ui_zone_trace(&t);
  const char *p = tb_write_file(&t, "zone.pftrace");
  tb_free(&t);
  return p;
}

TEST(zone_nearest_rank_percentiles) {
  int64_t d[] = {10, 20, 30, 40, 50, 60, 70, 80, 90, 100};
  ASSERT_EQ_INT(etch__zone_pct(d, 10, 50), 50);  /* rank 5 */
  ASSERT_EQ_INT(etch__zone_pct(d, 10, 90), 90);  /* rank 9 */
  ASSERT_EQ_INT(etch__zone_pct(d, 10, 99), 100); /* rank ceil(9.9) = 10 */
  ASSERT_EQ_INT(etch__zone_pct(d, 10, 1), 10);
  ASSERT_EQ_INT(etch__zone_pct(d, 1, 50), 10);
  ASSERT_EQ_INT(etch__zone_pct(d, 3, 50), 20); /* rank ceil(1.5) = 2 */
}

TEST(zone_of_the_steps) {
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  etch__import_opts o = {.all_args = true};
  ASSERT_OK(etch__query_import_file(db, NULL, zone_file(), &o, NULL));
  etch__zone z;
  /* The steps: a permutation of 1..100 us, so the K-th percentile is
   * K us (nearest rank of 100), buckets of 10 us hold 10 each. */
  ASSERT_OK(etch__zone_of(db, "step", 10, &z));
  ASSERT_EQ_INT(z.count, 100);
  ASSERT_EQ_INT(z.min, 1000);
  ASSERT_EQ_INT(z.p50, 50000);
  ASSERT_EQ_INT(z.p90, 90000);
  ASSERT_EQ_INT(z.p99, 99000);
  ASSERT_EQ_INT(z.max, 100000);
  ASSERT_EQ_INT((int64_t)z.nb, 10);
  for (size_t k = 0; k < z.nb; k++) {
    /* (100000 - 1000 + 1) / 10 rounded up: 9901 ns a bucket. */
    ASSERT_EQ_INT(z.b[k].lo, 1000 + (int64_t)k * 9901);
    ASSERT_EQ_INT(z.b[k].hi, k == 9 ? 100001 : 1000 + (int64_t)(k + 1) * 9901);
    int64_t want = 0;
    for (int j = 0; j < 100; j++)
      want += UI_ZONE_DUR(j) >= z.b[k].lo && UI_ZONE_DUR(j) < z.b[k].hi;
    ASSERT_EQ_INT(z.b[k].count, want);
  }
  char *json = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&json, &len);
  etch__zone_json(&z, "step", f);
  fclose(f);
  ASSERT_TRUE(!strncmp(json,
                       "{\"name\":\"step\",\"count\":100,\"min\":1000,"
                       "\"p50\":50000,\"p90\":90000,\"p99\":99000,"
                       "\"max\":100000,\"histogram\":[{\"lo\":1000,"
                       "\"hi\":10901,\"count\":",
                       strlen("{\"name\":\"step\",\"count\":100,\"min\":1000,"
                              "\"p50\":50000,\"p90\":90000,\"p99\":99000,"
                              "\"max\":100000,\"histogram\":[{\"lo\":1000,"
                              "\"hi\":10901,\"count\":")));
  free(json);
  etch__zone_free(&z);
  /* One slice: every statistic is its duration, one bucket. */
  ASSERT_OK(etch__zone_of(db, "run", 40, &z));
  ASSERT_EQ_INT(z.count, 1);
  ASSERT_EQ_INT(z.p50, z.max);
  ASSERT_EQ_INT(z.min, 5050000);
  ASSERT_EQ_INT((int64_t)z.nb, 1);
  ASSERT_EQ_INT(z.b[0].count, 1);
  etch__zone_free(&z);
  /* No such name: a count of 0, no bucket; buckets out of range refused. */
  ASSERT_OK(etch__zone_of(db, "nothing", 40, &z));
  ASSERT_EQ_INT(z.count, 0);
  ASSERT_EQ_INT((int64_t)z.nb, 0);
  etch__zone_free(&z);
  ASSERT_EQ_INT(etch__zone_of(db, "step", 0, &z), ETCH_EINVAL);
  ASSERT_EQ_INT(etch__zone_of(db, "step", ETCH__ZONE_MAX_BUCKETS + 1, &z),
                ETCH_EINVAL);
  etch__db_close(db);
}

typedef struct zargs {
  const char *k[8], *v[8];
} zargs;

static const char *zget(void *ctx, const char *key) {
  zargs *a = ctx;
  for (int i = 0; i < 8 && a->k[i]; i++)
    if (!strcmp(a->k[i], key)) return a->v[i];
  return NULL;
}

static int zcall(etch__ui *ui, zargs *a, char **body) {
  size_t len = 0;
  FILE *f = open_memstream(body, &len);
  int st = etch__ui_api(ui, "/api/zone", zget, a, f);
  fclose(f);
  return st;
}

TEST(ui_api_zone_names_histogram_and_instances) {
  etch__ui *ui;
  ASSERT_OK(etch__ui_new(&ui));
  etch__ui_set_cache_dir(ui, etch_test_tmpdir());
  ASSERT_OK(etch__ui_add_path(ui, zone_file()));
  const char *id = ui->t[0].id;
  char *b;
  zargs names = {{"id"}, {id}};
  ASSERT_EQ_INT(zcall(ui, &names, &b), 200);
  ASSERT_EQ_STR(b, "{\"names\":[[\"step\",100],[\"run\",1]]}");
  free(b);
  /* Bucket 0 of 10: [1000, 10901): the steps of 1 to 10 us, by time. */
  zargs inst = {{"id", "name", "buckets", "lo", "hi"},
                {id, "step", "10", "1000", "10901"}};
  ASSERT_EQ_INT(zcall(ui, &inst, &b), 200);
  ASSERT_TRUE(strstr(b, "{\"zone\":{\"name\":\"step\",\"count\":100,"));
  const char *in = strstr(b, "\"instances\":[");
  ASSERT_TRUE(in != NULL);
  ASSERT_TRUE(strstr(b, "],\"instances_total\":10}"));
  int64_t ts = 1000, last = -1;
  int seen = 0;
  for (int k = 0; k < 100; k++) {
    if (UI_ZONE_DUR(k) < 10901) {
      char want[64];
      snprintf(want, sizeof want, ",%lld,%lld,", (long long)ts,
               (long long)UI_ZONE_DUR(k));
      const char *at = strstr(in, want);
      if (!at) FAIL("step %d (%s) not listed: %s", k, want, b);
      ASSERT_TRUE(at > in + (last < 0 ? 0 : last)); /* by time */
      last = at - in;
      seen++;
    }
    ts += UI_ZONE_DUR(k);
  }
  ASSERT_EQ_INT(seen, 10);
  free(b);
  const char *bad[][2] = {{"buckets", "0"}, {"buckets", "1001"},
                          {"buckets", "x"},  {"lo", "5"},
                          {"hi", "5"},       {"lo", "1e3"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    zargs a = {{"id", "name", bad[i][0]}, {id, "step", bad[i][1]}};
    ASSERT_EQ_INT(zcall(ui, &a, &b), 400);
    ASSERT_TRUE(!strncmp(b, "{\"error\":", 9));
    free(b);
  }
  zargs flip = {{"id", "name", "lo", "hi"}, {id, "step", "9", "9"}};
  ASSERT_EQ_INT(zcall(ui, &flip, &b), 400);
  free(b);
  zargs none = {{"id", "name"}, {"0123456789abcdef", "step"}};
  ASSERT_EQ_INT(zcall(ui, &none, &b), 404);
  free(b);
  etch__ui_free(ui);
}

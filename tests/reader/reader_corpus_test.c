/*
 * reader_corpus_test.c - replays every file of the fuzz seed corpus
 * (fuzz/corpus/reader) through the reader and the dump, so CI runs them with
 * the regular compiler too. The files that come from tbuild.c's samples
 * must read without error; others (fuzzer finds) must just not crash.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <etch/reader.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader/dump.h"
#include "reader/tbuild.h"
#include "test.h"

static void count_event(const etch_event *ev, void *user) {
  (void)ev;
  (*(size_t *)user)++;
}

static bool is_sample(const char *file) {
  for (int i = 0; i < tb_sample_count(); i++) {
    char name[64];
    snprintf(name, sizeof name, "%s.pb", tb_sample_name(i));
    if (strcmp(file, name) == 0) return true;
  }
  return false;
}

TEST(reader_corpus_replay) {
  const char *src = getenv("ETCH_TEST_SRC");
  if (!src) src = ".";
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/fuzz/corpus/reader", src);
  DIR *d = opendir(dir);
  if (!d) FAIL("no corpus at %s", dir);
  struct dirent *e;
  int files = 0, samples = 0;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    size_t len;
    uint8_t *data = etch_test_read_file(path, &len);
    if (!data) continue;
    files++;
    for (int order = 0; order < 2; order++) {
      etch_reader *r;
      size_t n = 0;
      ASSERT_OK(etch_reader_open_memory(&r, data, len));
      etch_reader_set_order(r, (etch_reader_order)order);
      etch_reader_on(r, NULL, NULL, count_event, &n);
      int rc = etch_reader_run(r);
      if (is_sample(e->d_name)) {
        if (rc) FAIL("%s: %s", e->d_name, etch_last_error());
        if (!n) FAIL("%s: no events", e->d_name);
        samples += order == 0;
      }
      etch_reader_close(r);
    }
    FILE *f = fopen("/dev/null", "w");
    etch__reader_dump(data, len, f);
    fclose(f);
    free(data);
  }
  closedir(d);
  ASSERT_EQ_INT(samples, tb_sample_count());
  printf("  %d corpus files\n", files);
}

/* The checked-in seed corpus is what reader_gen_corpus writes today. */
TEST(reader_corpus_up_to_date) {
  const char *src = getenv("ETCH_TEST_SRC");
  if (!src) src = ".";
  for (int i = 0; i < tb_sample_count(); i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/fuzz/corpus/reader/%s.pb", src,
             tb_sample_name(i));
    size_t len;
    uint8_t *data = etch_test_read_file(path, &len);
    if (!data) FAIL("missing %s (run reader_gen_corpus)", path);
    tb t;
    tb_init(&t);
    tb_sample(&t, i);
    if (len != t.len || memcmp(data, t.data, len) != 0)
      FAIL("%s differs from the sample (run reader_gen_corpus)", path);
    tb_free(&t);
    free(data);
  }
}

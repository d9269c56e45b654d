/*
 * gen_corpus.c - writes the reader tests' sample traces into a directory,
 * the seed corpus of fuzz/fuzz_reader.c:  reader_gen_corpus fuzz/corpus/reader
 */
#include <stdio.h>

#include "tbuild.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  for (int i = 0; i < tb_sample_count(); i++) {
    tb t;
    tb_init(&t);
    tb_sample(&t, i);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.pb", argv[1], tb_sample_name(i));
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(t.data, 1, t.len, f) != t.len || fclose(f) != 0) {
      perror(path);
      return 1;
    }
    printf("%s: %zu bytes\n", path, t.len);
    tb_free(&t);
  }
  return 0;
}

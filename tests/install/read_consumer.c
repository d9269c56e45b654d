/*
 * read_consumer.c - reads a trace with an installed libetch_reader and
 * checks that the events of consumer.c are in it.
 */
#include <etch/reader.h>
#include <stdio.h>
#include <string.h>

static void on_event(const etch_event *ev, void *user) {
  int *n = (int *)user;
  if (strcmp(ev->name, "work") == 0) n[0]++;
  if (ev->type == ETCH_EVENT_COUNTER) n[1]++;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: read_consumer TRACE\n");
    return 2;
  }
  etch_reader *r;
  int counts[2] = {0, 0};
  if (etch_reader_open_file(&r, argv[1]) != ETCH_OK ||
      etch_reader_on(r, "consumer", NULL, on_event, counts) != ETCH_OK ||
      etch_reader_run(r) != ETCH_OK) {
    fprintf(stderr, "read_consumer: %s\n", etch_last_error());
    return 1;
  }
  etch_reader_close(r);
  printf("read_consumer: %d work slices, %d counter values\n", counts[0],
         counts[1]);
  return counts[0] == 6 && counts[1] == 6 ? 0 : 1;
}

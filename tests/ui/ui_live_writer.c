/*
 * ui_live_writer.c - a trace being recorded, as the browser test of etch
 * ui live (live.test.mjs) needs one: ui_live_writer SRC OUT PIECES writes
 * the trace file SRC into OUT in PIECES pieces of about equal size (cut
 * wherever they fall, inside packets too), holding the lock etch's writers
 * hold on a file they write (buffer/sink.h) from the start to the end. It
 * writes the first piece at once, then one piece a line read on stdin,
 * saying "piece K SIZE" after each; the line after the last piece (or the
 * end of stdin) closes the file, which lets the lock go: "closed".
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 4 || atoi(argv[3]) < 1) {
    fprintf(stderr, "usage: ui_live_writer SRC OUT PIECES\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  static char data[1 << 24];
  size_t len = fread(data, 1, sizeof data, f);
  fclose(f);
  int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  if (fd < 0 || fcntl(fd, F_OFD_SETLK, &fl) != 0) {
    perror(argv[2]);
    return 1;
  }
  size_t pieces = (size_t)atoi(argv[3]), at = 0;
  char line[64];
  for (size_t k = 1; k <= pieces; k++) {
    if (k > 1 && !fgets(line, sizeof line, stdin)) break;
    size_t to = len * k / pieces;
    if (write_all(fd, data + at, to - at) != 0) {
      perror(argv[2]);
      return 1;
    }
    at = to;
    printf("piece %zu %zu\n", k, at);
    fflush(stdout);
  }
  if (at == len && !fgets(line, sizeof line, stdin))
    line[0] = '\0'; /* stdin ended: closed all the same */
  close(fd);
  printf("closed\n");
  fflush(stdout);
  return 0;
}

/*
 * bench_live_writer.c - a recording played back at a given rate, for
 * bench_live.mjs: bench_ui_live_writer SRC OUT RATE [PERIOD_MS] writes
 * the trace file SRC into OUT at RATE events a second (SRC's bytes an
 * event on average, cut anywhere), an append every PERIOD_MS (100: as
 * `etch record --write-period 100` writes), holding the lock etch's
 * writers hold (buffer/sink.h) until it closes the file once SRC is all
 * written. Says "append MS BYTES" after each append (MS:
 * the wall clock, ms since the epoch; BYTES: the file's size), then
 * "closed MS BYTES".
 */
#define _GNU_SOURCE
#include <etch/reader.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void count_event(const etch_event *ev, void *user) {
  (void)ev;
  ++*(uint64_t *)user;
}

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long long wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv) {
  if (argc < 4 || atof(argv[3]) <= 0) {
    fprintf(stderr, "usage: bench_ui_live_writer SRC OUT RATE [PERIOD_MS]\n");
    return 2;
  }
  double rate = atof(argv[3]);
  int period_ms = argc > 4 ? atoi(argv[4]) : 100;
  if (period_ms < 1) period_ms = 100;
  int in = open(argv[1], O_RDONLY | O_CLOEXEC);
  struct stat sb;
  if (in < 0 || fstat(in, &sb) != 0 || sb.st_size == 0) {
    perror(argv[1]);
    return 1;
  }
  size_t len = (size_t)sb.st_size;
  const char *data = mmap(NULL, len, PROT_READ, MAP_PRIVATE, in, 0);
  if (data == MAP_FAILED) {
    perror(argv[1]);
    return 1;
  }
  close(in);
  uint64_t events = 0;
  etch_reader *r;
  if (etch_reader_open_file(&r, argv[1]) != 0) return 1;
  etch_reader_set_allow_truncated(r, 1);
  etch_reader_set_order(r, ETCH_ORDER_FILE);
  etch_reader_on(r, NULL, NULL, count_event, &events);
  etch_reader_run(r);
  etch_reader_close(r);
  if (!events) {
    fprintf(stderr, "%s: no events\n", argv[1]);
    return 1;
  }
  double per_event = (double)len / (double)events;
  fprintf(stderr, "%s: %llu events, %.1f bytes each: %.1f s at %.0f/s\n",
          argv[1], (unsigned long long)events, per_event,
          (double)events / rate, rate);
  int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  if (fd < 0 || fcntl(fd, F_OFD_SETLK, &fl) != 0) {
    perror(argv[2]);
    return 1;
  }
  double t0 = mono();
  size_t at = 0;
  for (int k = 1; at < len; k++) {
    double el = mono() - t0;
    size_t to = (size_t)(rate * el * per_event);
    if (to > len) to = len;
    while (at < to) {
      ssize_t n = write(fd, data + at, to - at);
      if (n <= 0) {
        perror(argv[2]);
        return 1;
      }
      at += (size_t)n;
    }
    printf("append %lld %zu\n", wall_ms(), at);
    fflush(stdout);
    if (at >= len) break;
    /* The next append PERIOD_MS after the start of this one. */
    double next = t0 + (double)k * period_ms / 1000.0, now = mono();
    if (next > now) {
      struct timespec d = {(time_t)(next - now),
                           (long)((next - now - (double)(time_t)(next - now)) *
                                  1e9)};
      nanosleep(&d, NULL);
    }
  }
  close(fd);
  printf("closed %lld %zu\n", wall_ms(), at);
  fflush(stdout);
  return 0;
}

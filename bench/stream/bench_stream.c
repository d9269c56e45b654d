/*
 * bench_stream.c - writing the trace while recording (write_period_ms)
 * against writing it at the stop, in the same run:
 *
 *   bench_stream [N] [DIR]     (default 20000000 instants, the current
 *                               directory)
 *
 * Each mode runs in a child of its own (its peak RSS is its own), one
 * thread recording N instants with an int arg as fast as it can, then the
 * stop:
 *   at stop     a ring large enough for the whole run, written at the stop
 *   stream      a 4 MiB discard buffer written every 100 ms and whenever a
 *               quarter of it is full
 *   stream ring the same with a ring
 * Columns: events kept and dropped or overwritten, ns per event while
 * recording, seconds of the stop (the write, for "at stop"), the file's
 * size and the peak RSS. The floor: the same number of bytes written to a
 * file in DIR with write() in 1 MiB blocks and fsync'd neither.
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

ETCH_CATEGORY_DEFINE(bench, "bench", "benchmark", "");

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct result {
  double rec_ns, stop_s;
  unsigned long long dropped, overwritten_chunks, file_bytes;
  long peak_kb;
  int ok;
} result;

static void run(const char *config, long n, const char *path, result *out) {
  etch_config *c;
  etch_session *s;
  if (etch_config_new(&c) || etch_config_parse(c, config) ||
      etch_session_new(c, &s) || etch_session_start(s)) {
    fprintf(stderr, "bench_stream: %s: %s\n", config, etch_last_error());
    return;
  }
  etch_config_free(c);
  double t0 = now_s();
  for (long i = 0; i < n; i++) ETCH_INSTANT(bench, "tick", ETCH_ARG_INT("i", i));
  double t1 = now_s();
  if (etch_session_stop(s) != ETCH_OK) {
    fprintf(stderr, "bench_stream: stop: %s\n", etch_last_error());
    return;
  }
  double t2 = now_s();
  etch_session_stats st;
  etch_session_get_stats(s, &st);
  etch_session_free(s);
  struct stat sb;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  out->rec_ns = (t1 - t0) * 1e9 / (double)n;
  out->stop_s = t2 - t1;
  out->dropped = st.events_dropped;
  out->overwritten_chunks = st.chunks_overwritten;
  out->file_bytes = stat(path, &sb) == 0 ? (unsigned long long)sb.st_size : 0;
  out->peak_kb = ru.ru_maxrss;
  out->ok = 1;
}

/* Runs one mode in a child; its result through a pipe. */
static result in_child(const char *config, long n, const char *path) {
  int p[2];
  result r = {0};
  if (pipe(p) != 0) return r;
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    run(config, n, path, &r);
    if (write(p[1], &r, sizeof r) != (ssize_t)sizeof r) _exit(1);
    _exit(0);
  }
  close(p[1]);
  if (read(p[0], &r, sizeof r) != (ssize_t)sizeof r) r.ok = 0;
  close(p[0]);
  waitpid(pid, NULL, 0);
  return r;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 20000000;
  const char *dir = argc > 2 ? argv[2] : ".";
  char path[4096];
  snprintf(path, sizeof path, "%s/bench_stream.pftrace", dir);
  /* ~15 bytes an event: the whole run's ring, with room. */
  unsigned long long whole_kb = (unsigned long long)n * 24 / 1024 + 1024;
  if (whole_kb > 4194304) whole_kb = 4194304;
  struct {
    const char *name;
    char config[4400];
  } modes[3];
  modes[0].name = "at stop";
  snprintf(modes[0].config, sizeof modes[0].config,
           "output=%s;buffer_kb=%llu;fill=ring;compression=none", path,
           whole_kb);
  modes[1].name = "stream";
  snprintf(modes[1].config, sizeof modes[1].config,
           "output=%s;buffer_kb=4096;fill=discard;compression=none;"
           "write_period_ms=100", path);
  modes[2].name = "stream ring";
  snprintf(modes[2].config, sizeof modes[2].config,
           "output=%s;buffer_kb=4096;fill=ring;compression=none;"
           "write_period_ms=100", path);

  printf("%ld instants with an int arg, one thread; trace in %s\n\n", n, dir);
  printf("%-12s %10s %12s %11s %9s %9s %9s %9s\n", "mode", "buffer",
         "lost", "ns/event", "stop s", "file MB", "peak MB", "MB/s");
  unsigned long long bytes = 0;
  for (int m = 0; m < 3; m++) {
    result r = in_child(modes[m].config, n, path);
    if (!r.ok) {
      printf("%-12s failed\n", modes[m].name);
      continue;
    }
    if (r.file_bytes > bytes) bytes = r.file_bytes;
    char buf[32], lost[32];
    if (m == 0)
      snprintf(buf, sizeof buf, "%llu MiB", whole_kb / 1024);
    else
      snprintf(buf, sizeof buf, "4 MiB");
    snprintf(lost, sizeof lost, "%llu%s",
             m == 2 ? r.overwritten_chunks : r.dropped,
             m == 2 ? " chunks" : "");
    double secs = r.rec_ns * (double)n * 1e-9 + r.stop_s;
    printf("%-12s %10s %12s %11.1f %9.3f %9.1f %9.1f %9.0f\n", modes[m].name,
           buf, lost, r.rec_ns, r.stop_s, (double)r.file_bytes / 1048576.0,
           (double)r.peak_kb / 1024.0,
           (double)r.file_bytes / 1048576.0 / secs);
  }
  /* The floor: the file's bytes written once. */
  char *block = (char *)calloc(1, 1 << 20);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (block && fd >= 0) {
    double t0 = now_s();
    for (unsigned long long done = 0; done < bytes; done += 1 << 20)
      if (write(fd, block, 1 << 20) != 1 << 20) break;
    double t = now_s() - t0;
    printf("%-12s %10s %12s %11s %9s %9.1f %9s %9.0f\n", "write() floor", "-",
           "-", "-", "-", (double)bytes / 1048576.0, "-",
           (double)bytes / 1048576.0 / t);
  }
  if (fd >= 0) close(fd);
  free(block);
  unlink(path);
  return 0;
}

/*
 * bench_service.c - what system mode costs, against in-process, in one
 * run; and what etchd does with the data.
 *
 *   bench_service ETCHD ETCH [EVENTS_PER_THREAD]
 *
 * Starts a private etchd and `etch record --system --discard` (1 GiB
 * buffer), then times instants on 1 and 2 threads into an in-process
 * session and into the service (libetch in system mode: the same writer,
 * chunks copied into the shared memory and committed), in BENCH_ROUNDS
 * (default 5) rounds that alternate between the two, so that the ratio is
 * taken round by round on a machine whose speed drifts; how many of the
 * system rounds' events the trace kept (the others were dropped while the
 * shared memory, 32 MiB unless BENCH_SMB_KB says, was full: a dropped
 * event costs the writer a different amount than a recorded one); and the
 * bytes etchd moved, its CPU time, and the trace it wrote back.
 *
 * Then a write into a file: `etch record --config` with write_into_file
 * (a 256 MiB buffer drained every 100 ms), one thread writing about
 * BENCH_FILE_MB (default 1024) MB of instants, and the time until the
 * file is complete, against a floor: the same number of bytes written to
 * a file in the same directory with write() in 4 MiB pieces.
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* One category per side: the in-process session records bench_inproc
 * only and the service's session bench_system only, so that both run the
 * whole time and every event reaches exactly one session (the fast path),
 * and the rounds can alternate between them. */
ETCH_CATEGORY_DEFINE(binp, "bench_inproc", "service benchmark, in process",
                     "");
ETCH_CATEGORY_DEFINE(bsys, "bench_system", "service benchmark, system mode",
                     "");

static long n_events = 2000000;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

typedef struct run {
  pthread_barrier_t *start;
  bool sys, two;
  uint64_t ns;
} run;

static void *worker(void *arg) {
  run *r = (run *)arg;
  if (r->sys)
    ETCH_INSTANT(bsys, "warm");
  else
    ETCH_INSTANT(binp, "warm");
  pthread_barrier_wait(r->start);
  uint64_t t0 = now_ns();
  if (r->sys && r->two)
    for (long i = 0; i < n_events; i++) ETCH_INSTANT(bsys, "tick2");
  else if (r->sys)
    for (long i = 0; i < n_events; i++) ETCH_INSTANT(bsys, "tick1");
  else
    for (long i = 0; i < n_events; i++) ETCH_INSTANT(binp, "tick");
  r->ns = now_ns() - t0;
  return NULL;
}

static uint64_t sys_wall; /* the system rounds' time, all threads */

/* ns per event, the slowest thread's. */
static double timed(int threads, bool sys) {
  pthread_barrier_t b;
  pthread_barrier_init(&b, NULL, (unsigned)threads);
  pthread_t th[2];
  run r[2] = {{&b, sys, threads == 2, 0}, {&b, sys, threads == 2, 0}};
  for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, worker, &r[i]);
  uint64_t worst = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(th[i], NULL);
    if (r[i].ns > worst) worst = r[i].ns;
  }
  pthread_barrier_destroy(&b);
  if (sys) sys_wall += worst;
  return (double)worst / (double)n_events;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* "median (min-max)" of v[0..n), which it sorts. */
static const char *spread(double *v, int n, const char *unit, char *buf,
                          size_t cap) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  snprintf(buf, cap, "%.2f%s (%.2f-%.2f)", med, unit, v[0], v[n - 1]);
  return buf;
}

static double cpu_s(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  unsigned long ut = 0, st = 0;
  if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                  &ut, &st) == 2)
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
  return 0;
}

/* A line of /proc/PID/status in kB ("VmRSS:", "VmHWM:"). */
static long status_kb(pid_t pid, const char *key) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, key, strlen(key))) v = atol(line + strlen(key));
  if (f) fclose(f);
  return v;
}

static pid_t spawn(char *const argv[]) {
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 1); /* the recorder's summary */
    execv(argv[0], argv);
    _exit(127);
  }
  return pid;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_service ETCHD ETCH [EVENTS_PER_THREAD]\n");
    return 2;
  }
  if (argc > 3) n_events = atol(argv[3]);
  char dir[] = "/tmp/etch-bench-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char prod[256], cons[256], out[256];
  snprintf(prod, sizeof prod, "%s/p.sock", dir);
  snprintf(cons, sizeof cons, "%s/c.sock", dir);
  snprintf(out, sizeof out, "%s/trace.pftrace", dir);
  setenv("PERFETTO_PRODUCER_SOCK_NAME", prod, 1);
  setenv("PERFETTO_CONSUMER_SOCK_NAME", cons, 1);
  char *dargv[] = {argv[1], NULL};
  pid_t d = spawn(dargv);
  for (int i = 0; i < 500; i++) {
    struct stat st;
    if (stat(cons, &st) == 0) break;
    usleep(10000);
  }

  /* An in-process session and the service's, both recording all along;
   * the rounds alternate between them. */
  int rounds = getenv("BENCH_ROUNDS") ? atoi(getenv("BENCH_ROUNDS")) : 5;
  if (rounds < 1 || rounds > 50) rounds = 5;
  etch_config *cfg;
  etch_config_new(&cfg);
  etch_config_set(cfg, "buffer_kb", "1048576");
  etch_config_set(cfg, "fill", "discard");
  etch_config_set(cfg, "categories", "bench_inproc");
  etch_session *s;
  if (etch_session_new(cfg, &s) || etch_session_start(s)) {
    fprintf(stderr, "in-process session: %s\n", etch_last_error());
    return 1;
  }
  char *rargv[] = {argv[2], "record", "-q", "--system", "--discard",
                   "--buffer", "1GB", "-c", "bench_system", "-o", out, NULL};
  pid_t rec = spawn(rargv);
  usleep(300000);
  setenv("ETCH_SYSTEM_WAIT_MS", "3000", 1);
  /* Shared memory for this process: 32 MiB (Perfetto's largest) unless
   * BENCH_SMB_KB says, so that a round's burst can wait there while etchd
   * catches up. */
  setenv("ETCH_SYSTEM_SMB_KB",
         getenv("BENCH_SMB_KB") ? getenv("BENCH_SMB_KB") : "32768", 1);
  etch_system_start("bench");
  double in1[50], in2[50], sy1[50], sy2[50], q1[50], q2[50];
  double c0 = cpu_s(d);
  for (int r = 0; r < rounds; r++) {
    in1[r] = timed(1, false);
    sy1[r] = timed(1, true);
    in2[r] = timed(2, false);
    sy2[r] = timed(2, true);
    q1[r] = sy1[r] / in1[r];
    q2[r] = sy2[r] / in2[r];
  }
  uint64_t wall = sys_wall;
  etch_session_free(s);
  etch_config_free(cfg);
  usleep(200000); /* the last commits */
  double c1 = cpu_s(d);
  long rss_rec = status_kb(d, "VmRSS:");
  kill(rec, SIGINT);
  int st;
  waitpid(rec, &st, 0);
  double c2 = cpu_s(d);
  long hwm = status_kb(d, "VmHWM:"), rss_end = status_kb(d, "VmRSS:");
  struct stat fs;
  long long bytes = stat(out, &fs) == 0 ? (long long)fs.st_size : 0;
  /* How many of the system rounds' events the trace holds (the rest were
   * dropped while the shared memory was full): ticks of 1 and 2 threads. */
  long long kept1 = -1, kept2 = -1;
  {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "'%s' query --csv '%s' \"select name, count(*) from slice "
             "where name in ('tick1', 'tick2') group by name\"",
             argv[2], out);
    FILE *q = popen(cmd, "r");
    char line[128];
    while (q && fgets(line, sizeof line, q)) {
      long long v;
      if (sscanf(line, "tick1,%lld", &v) == 1) kept1 = v;
      if (sscanf(line, "tick2,%lld", &v) == 1) kept2 = v;
    }
    if (q) pclose(q);
  }

  /* A write into a file of about BENCH_FILE_MB. */
  long file_mb = getenv("BENCH_FILE_MB") ? atol(getenv("BENCH_FILE_MB")) : 1024;
  char cfgpath[256], fout[256], floor_path[256];
  snprintf(cfgpath, sizeof cfgpath, "%s/file.pbtx", dir);
  snprintf(fout, sizeof fout, "%s/file.pftrace", dir);
  snprintf(floor_path, sizeof floor_path, "%s/floor.bin", dir);
  FILE *cf = fopen(cfgpath, "w");
  if (!cf) return 1;
  fprintf(cf, "buffers { size_kb: 262144 fill_policy: DISCARD }\n"
              "data_sources { config { name: \"track_event\" } }\n"
              "write_into_file: true\nfile_write_period_ms: 100\n");
  fclose(cf);
  char *fargv[] = {argv[2], "record", "-q", "--config", cfgpath, "-o", fout,
                   NULL};
  pid_t frec = spawn(fargv);
  usleep(300000);
  long saved = n_events;
  /* One writer thread: the other core is etchd's (with two, both cores
   * write and etchd, starved, lets the shared memory fill). */
  n_events = file_mb * 1000000L / 22; /* ~22 B an event */
  double f0 = cpu_s(d);
  uint64_t fw0 = now_ns();
  timed(1, true);
  uint64_t fprod = now_ns() - fw0;
  kill(frec, SIGINT);
  waitpid(frec, &st, 0);
  uint64_t fwall = now_ns() - fw0;
  double f1 = cpu_s(d);
  long long fbytes = stat(fout, &fs) == 0 ? (long long)fs.st_size : 0;
  long long fevents = n_events;
  n_events = saved;
  /* The floor: the same bytes with write(), 4 MiB at a time. */
  uint64_t floor_ns = 0;
  {
    size_t piece = 4u << 20;
    char *buf = malloc(piece);
    int fd = open(floor_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (buf && fd >= 0) {
      memset(buf, 0x5a, piece);
      uint64_t t0 = now_ns();
      for (long long left = fbytes; left > 0;) {
        size_t n = left < (long long)piece ? (size_t)left : piece;
        if (write(fd, buf, n) != (ssize_t)n) break;
        left -= (long long)n;
      }
      floor_ns = now_ns() - t0;
    }
    if (fd >= 0) close(fd);
    free(buf);
    unlink(floor_path);
  }

  kill(d, SIGTERM);
  waitpid(d, &st, 0);

  char b1[64], b2[64];
  printf("%d rounds, each: in process then system mode, %ld events a "
         "thread; median (min-max)\n", rounds, n_events);
  printf("%-30s %-26s %-26s\n", "case", "1 thread", "2 threads");
  printf("%-30s %-26s %-26s\n", "instant, in-process session",
         spread(in1, rounds, " ns", b1, sizeof b1),
         spread(in2, rounds, " ns", b2, sizeof b2));
  printf("%-30s %-26s %-26s\n", "instant, system mode (etchd)",
         spread(sy1, rounds, " ns", b1, sizeof b1),
         spread(sy2, rounds, " ns", b2, sizeof b2));
  printf("%-30s %-26s %-26s\n", "system / in-process, a round",
         spread(q1, rounds, "x", b1, sizeof b1),
         spread(q2, rounds, "x", b2, sizeof b2));
  long long w1 = (long long)n_events * rounds, w2 = 2 * w1;
  printf("%-30s %-26.1f %-26.1f\n", "system: events kept, %",
         kept1 >= 0 ? 100.0 * (double)kept1 / (double)w1 : -1.0,
         kept2 >= 0 ? 100.0 * (double)kept2 / (double)w2 : -1.0);
  double gb = (double)bytes / 1e9;
  printf("\nevents into etchd            %ld\n", n_events * 3 * rounds);
  printf("trace read back              %.1f MB\n", (double)bytes / 1e6);
  printf("producer wall time           %.3f s (%.2f GB/s committed)\n",
         (double)wall / 1e9, gb / ((double)wall / 1e9));
  printf("etchd CPU while recording    %.3f s (%.2f GB per CPU-second)\n",
         c1 - c0, c1 > c0 ? gb / (c1 - c0) : 0.0);
  printf("etchd CPU to stop and read   %.3f s\n", c2 - c1);
  printf("etchd resident memory        %ld kB recording, %ld kB peak, %ld kB "
         "after the session was freed\n", rss_rec, hwm, rss_end);
  double fgb = (double)fbytes / 1e9;
  printf("\nwrite into a file             %lld events on 1 thread, %.1f MB "
         "written (%.1f B an event)\n", fevents, (double)fbytes / 1e6,
         fevents ? (double)fbytes / (double)fevents : 0.0);
  printf("producers' wall time          %.3f s\n", (double)fprod / 1e9);
  printf("until the file was complete   %.3f s (%.2f GB/s)\n",
         (double)fwall / 1e9, fgb / ((double)fwall / 1e9));
  printf("etchd CPU                     %.3f s (%.2f GB per CPU-second)\n",
         f1 - f0, f1 > f0 ? fgb / (f1 - f0) : 0.0);
  printf("floor: write() of as many     %.3f s (%.2f GB/s)\n",
         (double)floor_ns / 1e9,
         floor_ns ? fgb / ((double)floor_ns / 1e9) : 0.0);
  if (getenv("BENCH_KEEP")) printf("traces kept: %s %s\n", out, fout);
  else {
    unlink(out);
    unlink(fout);
  }
  unlink(cfgpath);
  unlink(prod);
  unlink(cons);
  rmdir(dir);
  return 0;
}

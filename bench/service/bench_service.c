/*
 * bench_service.c - what system mode costs, against in-process, in one
 * run; and what etchd does with the data.
 *
 *   bench_service ETCHD ETCH [EVENTS_PER_THREAD]
 *
 * Starts a private etchd and `etch record --system --discard` (2 GiB
 * buffer), then times instants, slice begin + end pairs, instants with an
 * int arg and counters on 1 and 2 threads into an in-process
 * session and into the service (libetch in system mode: the same writer,
 * chunks copied into the shared memory and committed), in BENCH_ROUNDS
 * (default 3) rounds that alternate between the two, so that the ratio is
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
#include <etch/reader.h>
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

static long n_events = 1000000;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The event types of docs/performance.md's table, each timed in both
 * backends. Names end in the thread count, so that the trace tells how
 * many of each were kept. */
enum { C_INSTANT, C_PAIR, C_ARG, C_COUNTER, NCASES };
static const struct {
  const char *label;
  int events; /* per iteration */
} kCases[NCASES] = {
    {"instant", 1},
    {"slice begin + end", 2},
    {"instant + 1 int arg", 1},
    {"counter", 1},
};

typedef struct run {
  pthread_barrier_t *start;
  int kase;
  bool sys, two;
  uint64_t ns;
} run;

#define LOOP(body) \
  for (long i = 0; i < n_events; i++) { body; }
/* Every case's loop for category `cat`, names ending in `t`. */
#define CASES(cat, t)                                                   \
  switch (r->kase) {                                                    \
    case C_INSTANT: LOOP(ETCH_INSTANT(cat, "instant" t)) break;          \
    case C_PAIR:                                                        \
      LOOP(ETCH_SLICE_BEGIN(cat, "pair" t); ETCH_SLICE_END(cat)) break;  \
    case C_ARG:                                                         \
      LOOP(ETCH_INSTANT(cat, "arg" t, ETCH_ARG_INT("v", i))) break;      \
    default: LOOP(ETCH_COUNTER(cat, "counter" t, i)) break;             \
  }

static void *worker(void *arg) {
  run *r = (run *)arg;
  if (r->sys)
    ETCH_INSTANT(bsys, "warm");
  else
    ETCH_INSTANT(binp, "warm");
  pthread_barrier_wait(r->start);
  uint64_t t0 = now_ns();
  if (r->sys && r->two) {
    CASES(bsys, "2");
  } else if (r->sys) {
    CASES(bsys, "1");
  } else {
    CASES(binp, "");
  }
  r->ns = now_ns() - t0;
  return NULL;
}

/* Events of each case the trace kept, by thread count (1, 2). */
static long long kept[NCASES][2];
static const char *const kStem[NCASES] = {"instant", "pair", "arg", "counter"};

static void count_kept(const etch_event *ev, void *user) {
  (void)user;
  if (ev->type == ETCH_EVENT_SLICE_END) return; /* a pair counts once */
  const char *nm = ev->type == ETCH_EVENT_COUNTER ? ev->track->name : ev->name;
  size_t n = strlen(nm);
  if (n < 2 || (nm[n - 1] != '1' && nm[n - 1] != '2')) return;
  for (int k = 0; k < NCASES; k++)
    if (strlen(kStem[k]) == n - 1 && !strncmp(nm, kStem[k], n - 1))
      kept[k][nm[n - 1] - '1']++;
}

static uint64_t sys_wall; /* the system rounds' time, all threads */

/* ns per event of case `kase`, the slowest thread's. */
static double timed(int kase, int threads, bool sys) {
  pthread_barrier_t b;
  pthread_barrier_init(&b, NULL, (unsigned)threads);
  pthread_t th[2];
  run r[2] = {{&b, kase, sys, threads == 2, 0},
              {&b, kase, sys, threads == 2, 0}};
  for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, worker, &r[i]);
  uint64_t worst = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(th[i], NULL);
    if (r[i].ns > worst) worst = r[i].ns;
  }
  pthread_barrier_destroy(&b);
  if (sys) sys_wall += worst;
  return (double)worst / (double)n_events / kCases[kase].events;
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

typedef struct file_run {
  long long events, bytes;
  uint64_t prod_ns, wall_ns, floor_before, floor_ns;
  double cpu_s;
} file_run;

/* ns to write `bytes` bytes to `path` with write(), 4 MiB at a time. */
static uint64_t write_floor(const char *path, long long bytes) {
  size_t piece = 4u << 20;
  char *buf = malloc(piece);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  uint64_t ns = 0;
  if (buf && fd >= 0) {
    memset(buf, 0x5a, piece);
    uint64_t t0 = now_ns();
    for (long long left = bytes; left > 0;) {
      size_t n = left < (long long)piece ? (size_t)left : piece;
      if (write(fd, buf, n) != (ssize_t)n) break;
      left -= (long long)n;
    }
    ns = now_ns() - t0;
  }
  if (fd >= 0) close(fd);
  free(buf);
  unlink(path);
  return ns;
}

/*
 * One write into a file: `etch record --config` with write_into_file (a
 * 256 MiB buffer drained every 100 ms) while a child process of this
 * program (`--file-writer N`), one thread, writes about `mb` MB of
 * instants, waiting for room when `stall`; then the floor, as many bytes
 * written with write() in 4 MiB pieces in the same directory.
 */
static int file_part(const char *dir, const char *etch, pid_t d, long mb,
                     bool stall, file_run *f) {
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
  char *fargv[] = {(char *)etch, "record", "-q", "--config", cfgpath, "-o",
                   fout, NULL};
  memset(f, 0, sizeof *f);
  f->events = mb * 1000000L / 22; /* ~22 B an event */
  /* The floor before and after (the page cache's writeback of what was
   * just written slows the next writes down). */
  f->floor_before = write_floor(floor_path, f->events * 22);
  pid_t frec = spawn(fargv);
  usleep(300000);
  char nbuf[32];
  snprintf(nbuf, sizeof nbuf, "%lld", f->events);
  int fds[2];
  if (pipe(fds) != 0) return 1;
  double f0 = cpu_s(d);
  uint64_t fw0 = now_ns();
  pid_t w = fork();
  if (w == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    if (stall) setenv("ETCH_SYSTEM_STALL_MS", "10000", 1);
    execl("/proc/self/exe", "bench_service", "--file-writer", nbuf,
          (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char line[64] = "";
  FILE *rp = fdopen(fds[0], "r");
  if (rp && fgets(line, sizeof line, rp)) f->prod_ns = strtoull(line, NULL, 10);
  if (rp) fclose(rp);
  int st;
  waitpid(w, &st, 0);
  kill(frec, SIGINT);
  waitpid(frec, &st, 0);
  f->wall_ns = now_ns() - fw0;
  f->cpu_s = cpu_s(d) - f0;
  struct stat fs;
  f->bytes = stat(fout, &fs) == 0 ? (long long)fs.st_size : 0;
  f->floor_ns = write_floor(floor_path, f->bytes);
  if (!getenv("BENCH_KEEP")) unlink(fout);
  unlink(cfgpath);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--file-writer")) {
    /* The writer of file_part, in a process of its own. */
    n_events = atol(argv[2]);
    if (etch_system_start("bench-file") != ETCH_OK) return 3;
    uint64_t t0 = now_ns();
    timed(C_INSTANT, 1, true);
    printf("%llu\n", (unsigned long long)(now_ns() - t0));
    fflush(stdout);
    return 0;
  }
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
  int rounds = getenv("BENCH_ROUNDS") ? atoi(getenv("BENCH_ROUNDS")) : 3;
  if (rounds < 1 || rounds > 50) rounds = 3;
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
                   "--buffer", "2GB", "-c", "bench_system", "-o", out, NULL};
  pid_t rec = spawn(rargv);
  usleep(300000);
  setenv("ETCH_SYSTEM_WAIT_MS", "3000", 1);
  /* Shared memory for this process: 32 MiB (Perfetto's largest) unless
   * BENCH_SMB_KB says, so that a round's burst can wait there while etchd
   * catches up. */
  setenv("ETCH_SYSTEM_SMB_KB",
         getenv("BENCH_SMB_KB") ? getenv("BENCH_SMB_KB") : "32768", 1);
  etch_system_start("bench");
  static double in1[NCASES][50], in2[NCASES][50], sy1[NCASES][50],
      sy2[NCASES][50], q1[NCASES][50], q2[NCASES][50];
  double c0 = cpu_s(d);
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < NCASES; k++) {
      in1[k][r] = timed(k, 1, false);
      sy1[k][r] = timed(k, 1, true);
      in2[k][r] = timed(k, 2, false);
      sy2[k][r] = timed(k, 2, true);
      q1[k][r] = sy1[k][r] / in1[k][r];
      q2[k][r] = sy2[k][r] / in2[k][r];
    }
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
  usleep(300000); /* etchd frees the session once the recorder is gone */
  long hwm = status_kb(d, "VmHWM:"), rss_end = status_kb(d, "VmRSS:");
  struct stat fs;
  long long bytes = stat(out, &fs) == 0 ? (long long)fs.st_size : 0;
  /* How many of the system rounds' events the trace holds (the rest were
   * dropped while the shared memory was full), by case and thread count:
   * slices and instants by name, counter values by track name. */
  memset(kept, 0, sizeof kept);
  etch_reader *rd;
  if (etch_reader_open_file(&rd, out) == ETCH_OK) {
    etch_reader_set_order(rd, ETCH_ORDER_FILE);
    etch_reader_on(rd, NULL, NULL, count_kept, NULL);
    if (etch_reader_run(rd) != ETCH_OK)
      fprintf(stderr, "bench_service: %s\n", etch_last_error());
    etch_reader_close(rd);
  }

  /* Writes into a file of about BENCH_FILE_MB: a flood that drops what
   * the shared memory cannot hold, then a writer that waits for room. */
  long file_mb = getenv("BENCH_FILE_MB") ? atol(getenv("BENCH_FILE_MB")) : 1024;
  file_run fr[2];
  for (int k = 0; k < 2; k++)
    if (file_part(dir, argv[2], d, file_mb, k == 1, &fr[k])) return 1;

  kill(d, SIGTERM);
  waitpid(d, &st, 0);

  char b1[64], b2[64];
  printf("%d rounds, each: every case in process then in system mode, %ld "
         "iterations a thread; ns an event, median (min-max)\n", rounds,
         n_events);
  printf("%-28s %-24s %-24s\n", "case", "1 thread", "2 threads");
  for (int k = 0; k < NCASES; k++) {
    char label[64];
    snprintf(label, sizeof label, "%s, in process", kCases[k].label);
    printf("%-28s %-24s %-24s\n", label, spread(in1[k], rounds, "", b1, sizeof b1),
           spread(in2[k], rounds, "", b2, sizeof b2));
    snprintf(label, sizeof label, "%s, system", kCases[k].label);
    printf("%-28s %-24s %-24s\n", label, spread(sy1[k], rounds, "", b1, sizeof b1),
           spread(sy2[k], rounds, "", b2, sizeof b2));
    printf("%-28s %-24s %-24s\n", "  system / in process",
           spread(q1[k], rounds, "x", b1, sizeof b1),
           spread(q2[k], rounds, "x", b2, sizeof b2));
    long long w1 = (long long)n_events * rounds, w2 = 2 * w1;
    char k1[32], k2[32];
    snprintf(k1, sizeof k1, "%.1f%%", 100.0 * (double)kept[k][0] / (double)w1);
    snprintf(k2, sizeof k2, "%.1f%%", 100.0 * (double)kept[k][1] / (double)w2);
    printf("%-28s %-24s %-24s\n", "  kept in system mode", k1, k2);
  }
  double gb = (double)bytes / 1e9;
  long events_in = 0;
  for (int k = 0; k < NCASES; k++) events_in += n_events * 3 * rounds * kCases[k].events;
  printf("\nevents into etchd            %ld\n", events_in);
  printf("trace read back              %.1f MB\n", (double)bytes / 1e6);
  printf("producer wall time           %.3f s (%.2f GB/s committed)\n",
         (double)wall / 1e9, gb / ((double)wall / 1e9));
  printf("etchd CPU while recording    %.3f s (%.2f GB per CPU-second)\n",
         c1 - c0, c1 > c0 ? gb / (c1 - c0) : 0.0);
  printf("etchd CPU to stop and read   %.3f s\n", c2 - c1);
  printf("etchd resident memory        %ld kB recording, %ld kB peak, %ld kB "
         "after the session was freed\n", rss_rec, hwm, rss_end);
  for (int k = 0; k < 2; k++) {
    const file_run *f = &fr[k];
    double fgb = (double)f->bytes / 1e9;
    printf("\nwrite into a file, %s\n", k ? "the writer waiting for room "
           "(ETCH_SYSTEM_STALL_MS)" : "the writer dropping what finds no room");
    printf("events                        %lld on 1 thread, %.1f MB written "
           "(%.1f B an event)\n", f->events, (double)f->bytes / 1e6,
           f->events ? (double)f->bytes / (double)f->events : 0.0);
    printf("producer's wall time          %.3f s\n", (double)f->prod_ns / 1e9);
    printf("until the file was complete   %.3f s (%.2f GB/s)\n",
           (double)f->wall_ns / 1e9, fgb / ((double)f->wall_ns / 1e9));
    printf("etchd CPU                     %.3f s (%.2f GB per CPU-second)\n",
           f->cpu_s, f->cpu_s > 0 ? fgb / f->cpu_s : 0.0);
    double gb_before = (double)(f->events * 22) / 1e9;
    printf("floor: write(), before        %.3f s for %.1f MB (%.2f GB/s)\n",
           (double)f->floor_before / 1e9, gb_before * 1e3,
           f->floor_before ? gb_before / ((double)f->floor_before / 1e9) : 0.0);
    printf("floor: write() of as many, after %.3f s (%.2f GB/s)\n",
           (double)f->floor_ns / 1e9,
           f->floor_ns ? fgb / ((double)f->floor_ns / 1e9) : 0.0);
  }
  if (getenv("BENCH_KEEP")) printf("trace kept: %s\n", out);
  else unlink(out);
  unlink(prod);
  unlink(cons);
  rmdir(dir);
  return 0;
}

/*
 * bench_transport.c - one producer's throughput into etchd by each way a
 * producer can reach it, in one run: shared memory over a Unix socket,
 * loopback TCP (no shared memory: the chunks' bytes travel inside
 * CommitData), and through `etchd --relay` (a relay's Unix socket, TCP to
 * the host).
 *
 *   bench_transport ETCHD ETCH [EVENTS]
 *
 * Starts a private etchd listening on a Unix socket and a loopback TCP
 * port, with its relay endpoint on, and a relay forwarding to that port.
 * Each round records, for every way in turn, a session written into a file
 * (`etch record --config`: a 256 MiB buffer drained every 100 ms) while a
 * child process of this program writes EVENTS (default 4 000 000)
 * instants on one thread with its writer waiting for room
 * (ETCH_SYSTEM_STALL_MS), so that nothing is dropped and the time is what
 * moving them costs. BENCH_ROUNDS (default 3) rounds, the ways alternating
 * within each, so that a machine whose speed drifts touches all alike.
 * Prints the producer's rate and ns an event (median and range), the
 * ratio to shared memory, how many events the trace kept, and the CPU
 * etchd and the relay spent.
 */
#define _GNU_SOURCE
#include <etch/etch.h>
#include <etch/reader.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

ETCH_CATEGORY_DEFINE(bt, "bench_transport", "transport benchmark", "");

enum { W_SHM, W_TCP, W_RELAY, NWAYS };
static const char *const kWay[NWAYS] = {
    "shared memory (Unix socket)", "loopback TCP (emulated)",
    "relay (Unix, then TCP)"};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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

static pid_t spawn(char *const argv[], bool quiet) {
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      if (quiet) dup2(null, 2);
    }
    execv(argv[0], argv);
    _exit(127);
  }
  return pid;
}

/* Waits (bounded) until a socket file exists. */
static bool wait_file(const char *path) {
  for (int i = 0; i < 3000; i++) {
    struct stat st;
    if (stat(path, &st) == 0) return true;
    usleep(10000);
  }
  return false;
}

/* A loopback port nobody listens on now. */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof a;
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &n) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

static long long counted;
static void count(const etch_event *ev, void *user) {
  (void)user;
  if (ev->type == ETCH_EVENT_INSTANT && !strcmp(ev->name, "t")) counted++;
}

typedef struct result {
  double ns_event, etchd_cpu, relay_cpu;
  long long kept;
} result;

/* One recording of `events` instants from a child producer on `sock`. */
static int one(const char *dir, const char *etch, const char *sock, pid_t d,
               pid_t relay, long events, result *r) {
  char cfgpath[256], out[256];
  snprintf(cfgpath, sizeof cfgpath, "%s/t.pbtx", dir);
  snprintf(out, sizeof out, "%s/t.pftrace", dir);
  FILE *cf = fopen(cfgpath, "w");
  if (!cf) return 1;
  fprintf(cf, "buffers { size_kb: 262144 fill_policy: DISCARD }\n"
              "data_sources { config { name: \"track_event\" } }\n"
              "write_into_file: true\nfile_write_period_ms: 100\n"
              "trace_all_machines: true\n");
  fclose(cf);
  char *rargv[] = {(char *)etch, "record", "-q", "--config", cfgpath, "-o",
                   out, NULL};
  pid_t rec = spawn(rargv, false);
  char nbuf[32];
  snprintf(nbuf, sizeof nbuf, "%ld", events);
  int fds[2];
  if (pipe(fds) != 0) return 1;
  double d0 = cpu_s(d), r0 = relay > 0 ? cpu_s(relay) : 0;
  pid_t w = fork();
  if (w == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    setenv("PERFETTO_PRODUCER_SOCK_NAME", sock, 1);
    setenv("ETCH_SYSTEM_STALL_MS", "10000", 1);
    setenv("ETCH_SYSTEM_WAIT_MS", "10000", 1);
    execl("/proc/self/exe", "bench_transport", "--writer", nbuf, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  char line[64] = "";
  FILE *rp = fdopen(fds[0], "r");
  uint64_t ns = 0;
  if (rp && fgets(line, sizeof line, rp)) ns = strtoull(line, NULL, 10);
  if (rp) fclose(rp);
  int st;
  waitpid(w, &st, 0);
  kill(rec, SIGINT);
  waitpid(rec, &st, 0);
  r->ns_event = ns ? (double)ns / (double)events : 0;
  r->etchd_cpu = cpu_s(d) - d0;
  r->relay_cpu = relay > 0 ? cpu_s(relay) - r0 : 0;
  counted = 0;
  etch_reader *rd;
  if (etch_reader_open_file(&rd, out) == ETCH_OK) {
    etch_reader_set_order(rd, ETCH_ORDER_FILE);
    etch_reader_on(rd, NULL, NULL, count, NULL);
    if (etch_reader_run(rd) != ETCH_OK)
      fprintf(stderr, "bench_transport: %s\n", etch_last_error());
    etch_reader_close(rd);
  }
  r->kept = counted;
  if (!getenv("BENCH_KEEP")) unlink(out);
  unlink(cfgpath);
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static const char *spread(double *v, int n, int prec, const char *unit,
                          char *buf, size_t cap) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  snprintf(buf, cap, "%.*f%s (%.*f-%.*f)", prec, med, unit, prec, v[0], prec,
           v[n - 1]);
  return buf;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--writer")) {
    long n = atol(argv[2]);
    if (etch_system_start("bench-transport") != ETCH_OK) return 3;
    ETCH_INSTANT(bt, "warm");
    uint64_t t0 = now_ns();
    for (long i = 0; i < n; i++) ETCH_INSTANT(bt, "t");
    printf("%llu\n", (unsigned long long)(now_ns() - t0));
    fflush(stdout);
    return 0;
  }
  if (argc < 3) {
    fprintf(stderr, "usage: bench_transport ETCHD ETCH [EVENTS]\n");
    return 2;
  }
  long events = argc > 3 ? atol(argv[3]) : 4000000;
  int rounds = getenv("BENCH_ROUNDS") ? atoi(getenv("BENCH_ROUNDS")) : 3;
  if (rounds < 1 || rounds > 50) rounds = 3;
  char dir[] = "/tmp/etch-bench-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  int port = free_port();
  if (port < 0) return 1;
  char prod[256], cons[256], tcp[64], names[512], rsock[256];
  snprintf(prod, sizeof prod, "%s/p.sock", dir);
  snprintf(cons, sizeof cons, "%s/c.sock", dir);
  snprintf(rsock, sizeof rsock, "%s/relay.sock", dir);
  snprintf(tcp, sizeof tcp, "127.0.0.1:%d", port);
  snprintf(names, sizeof names, "%s,%s", prod, tcp);
  setenv("PERFETTO_CONSUMER_SOCK_NAME", cons, 1);
  /* No limit on what one network connection sends a second: the
   * benchmark measures the transport, not etchd's guard. */
  char *dargv[] = {argv[1], "--producer-socket", names,
                   "--enable-relay-endpoint", "--net-mb-per-s", "1000000",
                   NULL};
  pid_t d = spawn(dargv, true);
  if (!wait_file(cons)) {
    fprintf(stderr, "bench_transport: etchd did not start\n");
    return 1;
  }
  setenv("PERFETTO_PRODUCER_SOCK_NAME", rsock, 1);
  setenv("PERFETTO_MACHINE_NAME", "bench-relay", 1);
  char *relargv[] = {argv[1], "--relay", tcp, NULL};
  pid_t relay = spawn(relargv, true);
  if (!wait_file(rsock)) {
    fprintf(stderr, "bench_transport: the relay did not start\n");
    return 1;
  }
  const char *sock[NWAYS] = {prod, tcp, rsock};
  static double ns[NWAYS][50], ratio[NWAYS][50], dcpu[NWAYS][50],
      rcpu[NWAYS][50];
  long long kept[NWAYS] = {0};
  for (int r = 0; r < rounds; r++) {
    for (int w = 0; w < NWAYS; w++) {
      result res;
      if (one(dir, argv[2], sock[w], d, w == W_RELAY ? relay : -1, events,
              &res))
        return 1;
      ns[w][r] = res.ns_event;
      dcpu[w][r] = res.etchd_cpu;
      rcpu[w][r] = res.relay_cpu;
      kept[w] += res.kept;
    }
    for (int w = 0; w < NWAYS; w++) ratio[w][r] = ns[w][r] / ns[W_SHM][r];
  }
  kill(relay, SIGTERM);
  kill(d, SIGTERM);
  int st;
  waitpid(relay, &st, 0);
  waitpid(d, &st, 0);
  printf("%d rounds of %ld instants on one thread, the writer waiting for "
         "room (nothing dropped); median (min-max)\n",
         rounds, events);
  printf("%-30s %-22s %-22s %-18s %-9s %-16s %s\n", "way", "ns an event",
         "M events/s", "time / shm", "kept", "etchd CPU s", "relay CPU s");
  for (int w = 0; w < NWAYS; w++) {
    double rate[50];
    for (int r = 0; r < rounds; r++)
      rate[r] = ns[w][r] > 0 ? 1e3 / ns[w][r] : 0;
    char b1[48], b2[48], b3[48], b4[48], b5[48], k[32];
    snprintf(k, sizeof k, "%.1f%%",
             100.0 * (double)kept[w] / ((double)events * rounds));
    printf("%-30s %-22s %-22s %-18s %-9s %-16s %s\n", kWay[w],
           spread(ns[w], rounds, 1, "", b1, sizeof b1),
           spread(rate, rounds, 1, "", b2, sizeof b2),
           spread(ratio[w], rounds, 2, "x", b3, sizeof b3), k,
           spread(dcpu[w], rounds, 2, "", b4, sizeof b4),
           w == W_RELAY ? spread(rcpu[w], rounds, 2, "", b5, sizeof b5)
                        : "-");
  }
  unlink(prod);
  unlink(cons);
  unlink(rsock);
  rmdir(dir);
  return 0;
}

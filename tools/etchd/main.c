/*
 * etchd - etch's tracing service. Listens on a producer socket and a
 * consumer socket and speaks Perfetto's protocol on both, so that programs
 * linked with libetch (or Perfetto's client library) record into it and
 * `etch record` (or Perfetto's `perfetto` command line) drives it.
 *
 *   etchd [--producer-socket NAME[,NAME...]] [--consumer-socket PATH]
 *         [--allow-remote] [--enable-relay-endpoint]
 *         [--enable-relay-endpoint-on NAME]... [--max-conns-per-addr N]
 *         [--net-mb-per-s N] [--group-rw]
 *         [--smb-kb N] [--max-buffer-mb N] [--max-conns-per-uid N]
 *         [--bind-timeout-ms N] [--frame-timeout-ms N]
 *         [--max-partial-frames-mb N] [--daemon --pid-file PATH]
 *         [--log FILE] [-v]
 *   etchd --relay [HOST:PORT] [--machine-name NAME] [--producer-socket PATH]
 *         (relay.c)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cliopt.h"
#include "etch/etch.h"
#include "ipc/ipc.h"
#include "relay.h"
#include "base/envvars.h"
#include "service/service.h"

static etch_service *g_service;

static bool g_relay;

static void on_signal(int sig) {
  (void)sig;
  if (g_relay) etch__relay_stop();
  if (g_service) etch__service_stop(g_service);
}

/* systemd's readiness notification (the sd_notify protocol, by hand): one
 * datagram "READY=1" to $NOTIFY_SOCKET, a path or, with '@', an abstract
 * name. Best effort: a bad variable is ignored. */
static void notify_ready(bool daemonized) {
  const char *e = getenv("NOTIFY_SOCKET");
  if (!e || (e[0] != '/' && e[0] != '@')) return;
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  size_t n = strlen(e);
  if (n < 2 || n >= sizeof a.sun_path) return;
  memcpy(a.sun_path, e, n);
  if (a.sun_path[0] == '@') a.sun_path[0] = 0;
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  char msg[64];
  int len = daemonized
                ? snprintf(msg, sizeof msg, "READY=1\nMAINPID=%ld",
                           (long)getpid())
                : snprintf(msg, sizeof msg, "READY=1");
  if (sendto(fd, msg, (size_t)len, MSG_NOSIGNAL, (struct sockaddr *)&a,
             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) < 0)
    fprintf(stderr, "etchd: cannot notify $NOTIFY_SOCKET: %s\n",
            strerror(errno));
  close(fd);
}

/* etchd --relay: the host from the flag or $PERFETTO_RELAY_SOCK_NAME, the
 * machine's name from the flag or $PERFETTO_MACHINE_NAME (as
 * traced_relay), the local socket as etchd's producer socket. */
static int run_relay(etch_relay_opts *ro, const etch_service_opts *o) {
  static char first[512];
  if (!ro->host) ro->host = etch__env(ETCH_ENV_RELAY_SOCK_NAME);
  if (!ro->host || !*ro->host) {
    fprintf(stderr, "etchd: --relay needs the host's HOST:PORT (or "
                    "$PERFETTO_RELAY_SOCK_NAME)\n");
    return 2;
  }
  if (!ro->machine_name) ro->machine_name = etch__env(ETCH_ENV_MACHINE_NAME);
  /* $PERFETTO_PRODUCER_SOCK_NAME may be a list: the relay serves its
   * first name. */
  ro->producer_socket = o->producer_socket;
  if (etch__ipc_name_at(o->producer_socket, 0, first, sizeof first))
    ro->producer_socket = first;
  ro->group_rw = o->group_rw;
  ro->verbose = o->verbose;
  const char *off = etch__env(ETCH_ENV_RELAY_CLOCK_SKEW_NS);
  if (off && *off) {
    int64_t n;
    if (etch__parse_i64(off, INT64_MIN, INT64_MAX, &n) != 0) {
      fprintf(stderr, "etchd: ETCH_RELAY_CLOCK_SKEW_NS is not a number of "
                      "ns: '%s'\n", off);
      return 2;
    }
    ro->clock_offset_ns = n;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  return etch__relay_main(ro);
}

/* etchd's arguments, as its option table (kOpts) fills them. */
typedef struct etchd_args {
  etch_service_opts o;
  etch_relay_opts ro;
  bool relay, daemon_mode;
  const char *pid_file, *log_file;
  char relay_on[1024];
} etchd_args;

/* A whole number from 1 to `max` for the flags below; 0 or a usage error
 * in etchd's words. */
static int flag_number(const command *cmd, const char *opt, const char *v,
                       uint64_t min, uint64_t max, uint64_t *out) {
  if (etch__parse_uint(v, min, max, out) == 0) return 0;
  return usage_error(cmd, "%s takes %llu to %llu, not '%s'", opt,
                     (unsigned long long)min, (unsigned long long)max, v);
}

static int set_relay(const command *cmd, const char *opt, const char *v,
                     void *args) {
  (void)cmd, (void)opt, (void)v;
  ((etchd_args *)args)->relay = true;
  return 0;
}

static int set_smb_kb(const command *cmd, const char *opt, const char *v,
                      void *args) {
  uint64_t n;
  int rc = flag_number(cmd, opt, v, 16, 65536, &n);
  if (!rc) ((etchd_args *)args)->o.smb_kb = (uint32_t)n;
  return rc;
}

static int set_max_buffer_mb(const command *cmd, const char *opt,
                             const char *v, void *args) {
  uint64_t n;
  int rc = flag_number(cmd, opt, v, 1, 1ull << 40, &n);
  if (!rc) ((etchd_args *)args)->o.max_buffer_bytes = n << 20;
  return rc;
}

/* --max-conns-per-uid, --bind-timeout-ms, --frame-timeout-ms,
 * --max-partial-frames-mb, --max-conns-per-addr, --net-mb-per-s: 1 .. a
 * bound each (a million connections, a day of ms, 4 GiB of frames, a
 * million MiB/s). */
static int set_limit(const command *cmd, const char *opt, const char *v,
                     void *args) {
  etch_service_opts *o = &((etchd_args *)args)->o;
  static const struct {
    const char *flag;
    uint64_t max;
  } kLimits[] = {{"--max-conns-per-uid", 1000000},
                 {"--bind-timeout-ms", 86400000},
                 {"--frame-timeout-ms", 86400000},
                 {"--max-partial-frames-mb", 4096},
                 {"--max-conns-per-addr", 1000000},
                 {"--net-mb-per-s", 1000000}};
  size_t which = 0;
  while (which + 1 < ETCH_ARRAY_SIZE(kLimits) &&
         strncmp(opt, kLimits[which].flag, strlen(kLimits[which].flag)) != 0)
    which++;
  uint64_t n;
  int rc = flag_number(cmd, kLimits[which].flag, v, 1, kLimits[which].max, &n);
  if (rc) return rc;
  switch (which) {
    case 0: o->max_conns_per_uid = (uint32_t)n; break;
    case 1: o->bind_timeout_ms = (uint32_t)n; break;
    case 2: o->frame_timeout_ms = (uint32_t)n; break;
    case 3: o->max_partial_bytes = n << 20; break;
    case 4: o->max_conns_per_addr = (uint32_t)n; break;
    default: o->net_bytes_per_s = n << 20; break;
  }
  return 0;
}

/* Repeatable: the names gathered, comma-separated. */
static int add_relay_on(const command *cmd, const char *opt, const char *v,
                        void *args) {
  etchd_args *a = (etchd_args *)args;
  size_t l = strlen(a->relay_on);
  if (!*v || strchr(v, ',') ||
      (size_t)snprintf(a->relay_on + l, sizeof a->relay_on - l, "%s%s",
                       l ? "," : "", v) >= sizeof a->relay_on - l) {
    a->relay_on[l] = '\0';
    return usage_error(cmd, "%s: bad '%s'", opt, v);
  }
  a->o.relay_endpoint_on = a->relay_on;
  return 0;
}

static const cli_opt kOpts[] = {
    {0, "--producer-socket", "NAME[,NAME...]",
     "where producers connect (default:\n"
     "$PERFETTO_PRODUCER_SOCK_NAME, else\n"
     "$XDG_RUNTIME_DIR/etch/producer.sock or\n"
     "/tmp/etch-$UID/producer.sock); each a\n"
     "path, @NAME, HOST:PORT, [ADDR]:PORT or\n"
     "vsock://CID:PORT (port 0: any)",
     CLI_STR(etchd_args, o.producer_socket)},
    {0, "--allow-remote", NULL,
     "listen on a TCP or vsock name other\n"
     "machines can reach (not loopback): nobody\n"
     "is authenticated there",
     CLI_BOOL(etchd_args, o.allow_remote)},
    {0, "--enable-relay-endpoint", NULL,
     "serve the RelayPort (relays of other\n"
     "machines) on every producer socket",
     CLI_BOOL(etchd_args, o.relay_endpoint)},
    {0, "--enable-relay-endpoint-on", "NAME",
     "only on that producer socket (repeatable)", CLI_FN(add_relay_on)},
    {0, "--max-conns-per-addr", "N",
     "connections one network address may\n"
     "hold (default 512)",
     CLI_FN(set_limit)},
    {0, "--net-mb-per-s", "N",
     "what one network connection may send a\n"
     "second before etchd reads it later\n"
     "(default 64)",
     CLI_FN(set_limit)},
    {0, "--consumer-socket", "PATH",
     "where consumers connect (likewise,\n"
     "consumer.sock)",
     CLI_STR(etchd_args, o.consumer_socket)},
    {0, "--group-rw", NULL,
     "sockets readable and writable by the\n"
     "group (0660), not only the user",
     CLI_BOOL(etchd_args, o.group_rw)},
    {0, "--smb-kb", "N", "shared memory per producer (default 2048)",
     CLI_FN(set_smb_kb)},
    {0, "--max-buffer-mb", "N",
     "the sessions' buffers together may take\n"
     "N MiB (default: a quarter of physical\n"
     "memory); a session asking for more is\n"
     "refused",
     CLI_FN(set_max_buffer_mb)},
    {0, "--max-conns-per-uid", "N",
     "connections one uid may hold, producers\n"
     "and consumers together (default 512);\n"
     "more are closed at once",
     CLI_FN(set_limit)},
    {0, "--bind-timeout-ms", "N",
     "a connection that has not bound a port\n"
     "by then is closed (default 10000)",
     CLI_FN(set_limit)},
    {0, "--frame-timeout-ms", "N",
     "a frame begun and not finished by then\n"
     "closes its connection (default 10000)",
     CLI_FN(set_limit)},
    {0, "--max-partial-frames-mb", "N",
     "memory all connections together may hold\n"
     "for frames not received whole (default\n"
     "16); over it, the oldest such frame's\n"
     "connection is closed",
     CLI_FN(set_limit)},
    {0, "--daemon", NULL,
     "detach; with --pid-file PATH, write the\n"
     "pid there",
     CLI_BOOL(etchd_args, daemon_mode)},
    {0, "--pid-file", "PATH", NULL, CLI_STR(etchd_args, pid_file)},
    {0, "--log", "FILE",
     "write the log (stderr) to FILE,\n"
     "appended; with --daemon the only way to\n"
     "keep it",
     CLI_STR(etchd_args, log_file)},
    {'v', "--verbose", NULL, "log producers, consumers and sessions",
     CLI_BOOL(etchd_args, o.verbose)},
    {0, "--relay", NULL,
     "be a relay instead: serve the producer\n"
     "socket and forward its producers to the\n"
     "host service at HOST:PORT, [ADDR]:PORT or\n"
     "vsock://CID:PORT (default:\n"
     "$PERFETTO_RELAY_SOCK_NAME)",
     CLI_FN(set_relay), .shown = "--relay [HOST:PORT]"},
    {0, "--machine-name", "NAME",
     "the relay's machine name (default:\n"
     "$PERFETTO_MACHINE_NAME)",
     CLI_STR(etchd_args, ro.machine_name)},
    {0},
};

static const command kEtchd = {
    .name = NULL,
    .synopsis = "etchd [options]\n"
                "       etchd --relay [HOST:PORT] [--machine-name NAME] "
                "[--producer-socket PATH]\n",
    .opts = kOpts,
    .more =
        "SIGTERM or SIGINT ends every session cleanly (its trace written, its\n"
        "consumer answered) before etchd exits; a second one exits at once.\n"
        "With NOTIFY_SOCKET set (systemd's Type=notify), etchd says READY=1\n"
        "once it listens. Out of file descriptors, etchd closes the\n"
        "connections waiting (their clients see a refusal) and accepts none\n"
        "for 250 ms; that, and the refusals above, are logged with or\n"
        "without -v.\n",
};

/* The command line into `a`: true to go on, else the exit status in
 * *status (the help printed, or a usage error). */
static bool parse_args(int argc, char **argv, etchd_args *a, int *status) {
  opts o;
  if (!cli_parse(&kEtchd, argc, argv, a, &o, status)) return false;
  /* The one operand: --relay's host. */
  if (o.noperands > 1 || (o.noperands && (!a->relay || a->ro.host))) {
    *status = usage_error(&kEtchd, "unexpected argument '%s'",
                          o.operands[o.noperands - 1]);
  } else if (o.noperands) {
    a->ro.host = o.operands[0];
  }
  opts_free(&o);
  return *status == 0;
}

/* The default sockets where none is named (a relay serves producers
 * only): the default directory is checked, made 0700 if missing, refused
 * if someone else owns it or may write in it. */
static int default_sockets(etchd_args *a, char *prod, char *cons,
                           size_t cap) {
  etch_service_opts *o = &a->o;
  if (o->producer_socket && (o->consumer_socket || a->relay)) return 0;
  if (etch__ipc_default_paths(prod, cons, cap, true) != ETCH_OK) {
    fprintf(stderr, "etchd: %s\n", etch_last_error());
    return 1;
  }
  if (!o->producer_socket) o->producer_socket = prod;
  if (!o->consumer_socket) o->consumer_socket = cons;
  return 0;
}

/* --log FILE: stderr appended to it. */
static int open_log(const char *log_file) {
  int fd = open(log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) {
    fprintf(stderr, "etchd: cannot open the log '%s': %s\n", log_file,
            strerror(errno));
    return 1;
  }
  if (dup2(fd, 2) < 0) {
    fprintf(stderr, "etchd: cannot log to '%s': %s\n", log_file,
            strerror(errno));
    return 1;
  }
  close(fd);
  return 0;
}

/* --daemon: detached, staying in its directory (socket and pid paths may
 * be relative); the log kept when there is one. */
static int detach(bool keep_log) {
  int keep = keep_log ? dup(2) : -1; /* daemon() sends 2 to /dev/null */
  if (daemon(1, 0) != 0) {
    fprintf(stderr, "etchd: cannot detach: %s\n", strerror(errno));
    return 1;
  }
  if (keep >= 0) {
    dup2(keep, 2);
    close(keep);
  }
  return 0;
}

/* The names as they listen: a TCP port 0 as the port it got. */
static void say_names(const etch_service_opts *o) {
  char names[2048] = "", one[256];
  size_t l = 0;
  for (uint32_t k = 0;
       etch__service_producer_name(g_service, k, one, sizeof one) == ETCH_OK;
       k++) {
    int w = snprintf(names + l, sizeof names - l, "%s%s", k ? "," : "", one);
    if (w < 0 || (size_t)w >= sizeof names - l) break;
    l += (size_t)w;
  }
  fprintf(stderr, "etchd: producers on %s, consumers on %s\n", names,
          o->consumer_socket);
}

/* The service, until a signal ends it. */
static int run_service(etchd_args *a) {
  if (etch__service_new(&a->o, &g_service) != ETCH_OK) {
    fprintf(stderr, "etchd: %s\n", etch_last_error());
    return 1;
  }
  if (a->daemon_mode && detach(a->log_file != NULL)) return 1;
  if (a->pid_file) {
    FILE *f = fopen(a->pid_file, "w");
    if (f) {
      fprintf(f, "%ld\n", (long)getpid());
      fclose(f);
    }
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  if (!a->daemon_mode || a->log_file) say_names(&a->o);
  notify_ready(a->daemon_mode);
  int rc = etch__service_run(g_service);
  if (rc) fprintf(stderr, "etchd: %s\n", etch_last_error());
  etch__service_free(g_service);
  if (a->pid_file) unlink(a->pid_file);
  return rc == ETCH_OK ? 0 : 1;
}

int main(int argc, char **argv) {
  static etchd_args a;
  char prod[512], cons[512];
  int rc = 0;
  cli_program = "etchd";
  if (!parse_args(argc, argv, &a, &rc)) return rc;
  g_relay = a.relay;
  if (a.relay && (a.daemon_mode || a.pid_file)) {
    fprintf(stderr, "etchd: --relay runs in the foreground (no --daemon)\n");
    return 2;
  }
  if ((rc = default_sockets(&a, prod, cons, sizeof prod)) != 0) return rc;
  if (a.log_file && (rc = open_log(a.log_file)) != 0) return rc;
  signal(SIGPIPE, SIG_IGN);
  if (a.relay) return run_relay(&a.ro, &a.o);
  return run_service(&a);
}

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

static void usage(FILE *f) {
  fprintf(f,
          "usage: etchd [options]\n"
          "  --producer-socket NAME[,NAME...]  where producers connect "
          "(default:\n"
          "                          $PERFETTO_PRODUCER_SOCK_NAME, else "
          "$XDG_RUNTIME_DIR/etch/producer.sock\n"
          "                          or /tmp/etch-$UID/producer.sock); each "
          "a path, @NAME,\n"
          "                          HOST:PORT, [ADDR]:PORT or "
          "vsock://CID:PORT (port 0: any)\n"
          "  --allow-remote          listen on a TCP or vsock name other "
          "machines can reach\n"
          "                          (not loopback): nobody is authenticated "
          "there\n"
          "  --enable-relay-endpoint serve the RelayPort (relays of other "
          "machines) on every\n"
          "                          producer socket\n"
          "  --enable-relay-endpoint-on NAME  only on that producer socket "
          "(repeatable)\n"
          "  --max-conns-per-addr N  connections one network address may "
          "hold (default 512)\n"
          "  --net-mb-per-s N        what one network connection may send "
          "a second before\n"
          "                          etchd reads it later (default 64)\n"
          "  --consumer-socket PATH  where consumers connect (likewise, "
          "consumer.sock)\n"
          "  --group-rw              sockets readable and writable by the "
          "group (0660), not only the user\n"
          "  --smb-kb N              shared memory per producer (default "
          "2048)\n"
          "  --max-buffer-mb N       the sessions' buffers together may "
          "take N MiB\n"
          "                          (default: a quarter of physical "
          "memory); a session\n"
          "                          asking for more is refused\n"
          "  --max-conns-per-uid N   connections one uid may hold, "
          "producers and consumers\n"
          "                          together (default 512); more are "
          "closed at once\n"
          "  --bind-timeout-ms N     a connection that has not bound a port "
          "by then is closed\n"
          "                          (default 10000)\n"
          "  --frame-timeout-ms N    a frame begun and not finished by then "
          "closes its\n"
          "                          connection (default 10000)\n"
          "  --max-partial-frames-mb N  memory all connections together may "
          "hold for frames\n"
          "                          not received whole (default 16); over "
          "it, the oldest\n"
          "                          such frame's connection is closed\n"
          "  --daemon                detach; with --pid-file PATH, write the "
          "pid there\n"
          "  --log FILE              write the log (stderr) to FILE, "
          "appended; with --daemon\n"
          "                          the only way to keep it\n"
          "  -v, --verbose           log producers, consumers and sessions\n"
          "  --relay [HOST:PORT]     be a relay instead: serve the producer "
          "socket and forward\n"
          "                          its producers to the host service at "
          "HOST:PORT, [ADDR]:PORT\n"
          "                          or vsock://CID:PORT (default: "
          "$PERFETTO_RELAY_SOCK_NAME)\n"
          "  --machine-name NAME     the relay's machine name (default: "
          "$PERFETTO_MACHINE_NAME)\n"
          "SIGTERM or SIGINT ends every session cleanly (its trace written, "
          "its consumer\n"
          "answered) before etchd exits; a second one exits at once. With "
          "NOTIFY_SOCKET set\n"
          "(systemd's Type=notify), etchd says READY=1 once it listens.\n"
          "Out of file descriptors, etchd closes the connections waiting "
          "(their clients see\n"
          "a refusal) and accepts none for 250 ms; that, and the refusals "
          "above, are logged\n"
          "with or without -v.\n");
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

int main(int argc, char **argv) {
  char prod[512], cons[512];
  etch_service_opts o = {0};
  bool daemon_mode = false;
  const char *pid_file = NULL;
  const char *log_file = NULL;
  char relay_on[1024] = "";
  etch_relay_opts ro = {0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--relay")) {
      g_relay = true;
      if (v && v[0] != '-') {
        ro.host = v;
        i++;
      }
    } else if (!strcmp(a, "--machine-name") && v) {
      ro.machine_name = v;
      i++;
    } else if (!strcmp(a, "--producer-socket") && v) {
      o.producer_socket = v;
      i++;
    } else if (!strcmp(a, "--consumer-socket") && v) {
      o.consumer_socket = v;
      i++;
    } else if (!strcmp(a, "--smb-kb") && v) {
      char *e;
      unsigned long n = strtoul(v, &e, 10);
      if (*e || n < 16 || n > 65536) {
        fprintf(stderr, "etchd: --smb-kb takes 16 to 65536, not '%s'\n", v);
        return 2;
      }
      o.smb_kb = (uint32_t)n;
      i++;
    } else if (!strcmp(a, "--max-buffer-mb") && v) {
      char *e;
      errno = 0;
      unsigned long long n = strtoull(v, &e, 10);
      if (*e || !*v || *v == '-' || errno || n < 1 || n > (1ull << 40)) {
        fprintf(stderr,
                "etchd: --max-buffer-mb takes 1 to %llu, not '%s'\n",
                1ull << 40, v);
        return 2;
      }
      o.max_buffer_bytes = n << 20;
      i++;
    } else if ((!strcmp(a, "--max-conns-per-uid") ||
                !strcmp(a, "--bind-timeout-ms") ||
                !strcmp(a, "--frame-timeout-ms") ||
                !strcmp(a, "--max-partial-frames-mb")) &&
               v) {
      /* 1 .. a bound each: a day of ms, 4 GiB of frames */
      unsigned long max = !strcmp(a, "--max-conns-per-uid") ? 1000000ul
                          : !strcmp(a, "--max-partial-frames-mb") ? 4096ul
                                                                  : 86400000ul;
      char *e;
      errno = 0;
      unsigned long n = strtoul(v, &e, 10);
      if (*e || !*v || *v == '-' || errno || n < 1 || n > max) {
        fprintf(stderr, "etchd: %s takes 1 to %lu, not '%s'\n", a, max, v);
        return 2;
      }
      if (!strcmp(a, "--max-conns-per-uid"))
        o.max_conns_per_uid = (uint32_t)n;
      else if (!strcmp(a, "--bind-timeout-ms"))
        o.bind_timeout_ms = (uint32_t)n;
      else if (!strcmp(a, "--frame-timeout-ms"))
        o.frame_timeout_ms = (uint32_t)n;
      else
        o.max_partial_bytes = (uint64_t)n << 20;
      i++;
    } else if (!strcmp(a, "--allow-remote")) {
      o.allow_remote = true;
    } else if (!strcmp(a, "--enable-relay-endpoint")) {
      o.relay_endpoint = true;
    } else if (!strcmp(a, "--enable-relay-endpoint-on") && v) {
      size_t l = strlen(relay_on);
      if (!*v || strchr(v, ',') ||
          (size_t)snprintf(relay_on + l, sizeof relay_on - l, "%s%s",
                           l ? "," : "", v) >= sizeof relay_on - l) {
        fprintf(stderr, "etchd: --enable-relay-endpoint-on: bad '%s'\n", v);
        return 2;
      }
      o.relay_endpoint_on = relay_on;
      i++;
    } else if ((!strcmp(a, "--max-conns-per-addr") ||
                !strcmp(a, "--net-mb-per-s")) &&
               v) {
      char *e;
      errno = 0;
      unsigned long n = strtoul(v, &e, 10);
      if (*e || !*v || *v == '-' || errno || n < 1 || n > 1000000ul) {
        fprintf(stderr, "etchd: %s takes 1 to 1000000, not '%s'\n", a, v);
        return 2;
      }
      if (!strcmp(a, "--max-conns-per-addr"))
        o.max_conns_per_addr = (uint32_t)n;
      else
        o.net_bytes_per_s = (uint64_t)n << 20;
      i++;
    } else if (!strcmp(a, "--group-rw")) {
      o.group_rw = true;
    } else if (!strcmp(a, "--daemon")) {
      daemon_mode = true;
    } else if (!strcmp(a, "--log") && v) {
      log_file = v;
      i++;
    } else if (!strcmp(a, "--pid-file") && v) {
      pid_file = v;
      i++;
    } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
      o.verbose = true;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "etchd: unknown option '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  /* A relay serves producers only. */
  if (!o.producer_socket || (!o.consumer_socket && !g_relay)) {
    /* The default directory is checked: made 0700 if missing, refused if
     * someone else owns it or may write in it. */
    if (etch__ipc_default_paths(prod, cons, sizeof prod, true) != ETCH_OK) {
      fprintf(stderr, "etchd: %s\n", etch_last_error());
      return 1;
    }
    if (!o.producer_socket) o.producer_socket = prod;
    if (!o.consumer_socket) o.consumer_socket = cons;
  }
  if (log_file) {
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
  }
  signal(SIGPIPE, SIG_IGN);
  if (g_relay && (daemon_mode || pid_file)) {
    fprintf(stderr, "etchd: --relay runs in the foreground (no --daemon)\n");
    return 2;
  }
  if (g_relay) return run_relay(&ro, &o);
  if (etch__service_new(&o, &g_service) != ETCH_OK) {
    fprintf(stderr, "etchd: %s\n", etch_last_error());
    return 1;
  }
  if (daemon_mode) {
    /* Stays in its directory: socket and pid paths may be relative. */
    int keep = log_file ? dup(2) : -1; /* daemon() sends 2 to /dev/null */
    if (daemon(1, 0) != 0) {
      fprintf(stderr, "etchd: cannot detach: %s\n", strerror(errno));
      return 1;
    }
    if (keep >= 0) {
      dup2(keep, 2);
      close(keep);
    }
  }
  if (pid_file) {
    FILE *f = fopen(pid_file, "w");
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
  if (!daemon_mode || log_file) {
    /* The names as they listen: a TCP port 0 as the port it got. */
    char names[2048] = "", one[256];
    size_t l = 0;
    for (uint32_t k = 0; etch__service_producer_name(g_service, k, one,
                                                     sizeof one) == ETCH_OK;
         k++) {
      int w = snprintf(names + l, sizeof names - l, "%s%s", k ? "," : "",
                       one);
      if (w < 0 || (size_t)w >= sizeof names - l) break;
      l += (size_t)w;
    }
    fprintf(stderr, "etchd: producers on %s, consumers on %s\n", names,
            o.consumer_socket);
  }
  notify_ready(daemon_mode);
  int rc = etch__service_run(g_service);
  if (rc) fprintf(stderr, "etchd: %s\n", etch_last_error());
  etch__service_free(g_service);
  if (pid_file) unlink(pid_file);
  return rc == ETCH_OK ? 0 : 1;
}

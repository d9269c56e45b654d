/*
 * etchd - etch's tracing service. Listens on a producer socket and a
 * consumer socket and speaks Perfetto's protocol on both, so that programs
 * linked with libetch (or Perfetto's client library) record into it and
 * `etch record` (or Perfetto's `perfetto` command line) drives it.
 *
 *   etchd [--producer-socket PATH] [--consumer-socket PATH] [--group-rw]
 *         [--smb-kb N] [--max-buffer-mb N] [--daemon --pid-file PATH]
 *         [-v]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etch/etch.h"
#include "ipc/ipc.h"
#include "service/service.h"

static etch_service *g_service;

static void on_signal(int sig) {
  (void)sig;
  if (g_service) etch__service_stop(g_service);
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: etchd [options]\n"
          "  --producer-socket PATH  where producers connect (default: "
          "$PERFETTO_PRODUCER_SOCK_NAME,\n"
          "                          else $XDG_RUNTIME_DIR/etch/producer.sock "
          "or /tmp/etch-$UID/producer.sock)\n"
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
          "  --daemon                detach; with --pid-file PATH, write the "
          "pid there\n"
          "  -v, --verbose           log producers, consumers and sessions\n");
}

int main(int argc, char **argv) {
  char prod[512], cons[512];
  etch_service_opts o = {0};
  bool daemon_mode = false;
  const char *pid_file = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--producer-socket") && v) {
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
    } else if (!strcmp(a, "--group-rw")) {
      o.group_rw = true;
    } else if (!strcmp(a, "--daemon")) {
      daemon_mode = true;
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
  if (!o.producer_socket || !o.consumer_socket) {
    /* The default directory is checked: made 0700 if missing, refused if
     * someone else owns it or may write in it. */
    if (etch__ipc_default_paths(prod, cons, sizeof prod, true) != ETCH_OK) {
      fprintf(stderr, "etchd: %s\n", etch_last_error());
      return 1;
    }
    if (!o.producer_socket) o.producer_socket = prod;
    if (!o.consumer_socket) o.consumer_socket = cons;
  }
  signal(SIGPIPE, SIG_IGN);
  if (etch__service_new(&o, &g_service) != ETCH_OK) {
    fprintf(stderr, "etchd: %s\n", etch_last_error());
    return 1;
  }
  if (daemon_mode) {
    /* Stays in its directory: socket and pid paths may be relative. */
    if (daemon(1, 0) != 0) {
      fprintf(stderr, "etchd: cannot detach: %s\n", strerror(errno));
      return 1;
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
  if (!daemon_mode)
    fprintf(stderr, "etchd: producers on %s, consumers on %s\n",
            o.producer_socket, o.consumer_socket);
  int rc = etch__service_run(g_service);
  etch__service_free(g_service);
  if (pid_file) unlink(pid_file);
  return rc == ETCH_OK ? 0 : 1;
}

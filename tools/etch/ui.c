/*
 * ui.c - etch ui: the local viewer. Serves the page and its API (src/ui)
 * on 127.0.0.1 until Ctrl-C, for the traces named on the command line.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "ui/ui.h"

/* The trace store (etch ls's, src/ui/store.h): etch ui lists its traces
 * too (a tree without the store module builds without that). */
#if defined(__has_include)
#if __has_include("ui/store.h")
#include "ui/store.h"
#define ETCH_UI_STORE 1
#endif
#endif

extern char **environ;

typedef struct ui_args {
  const char *port, *address, *token;
  bool open;
} ui_args;

/* Hands the address to the desktop's browser (xdg-open), not waiting,
 * with no signal blocked (etch ui blocks those it waits for). */
static void open_browser(const char *url) {
  char *argv[] = {"xdg-open", (char *)url, NULL};
  pid_t pid;
  posix_spawnattr_t attr;
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  if (posix_spawnp(&pid, "xdg-open", NULL, &attr, argv, environ) != 0)
    fprintf(stderr, "etch: cannot run xdg-open: open %s yourself\n", url);
  posix_spawnattr_destroy(&attr);
}

static int cmd_ui(int argc, char **argv) {
  const command *cmd = &cli_ui;
  ui_args ua = {0};
  opts o;
  int rc = 0;
  if (!cli_parse(cmd, argc, argv, &ua, &o, &rc)) return rc;
  etch__ui_server_opts so = {.address = ua.address, .token = ua.token};
  if (ua.port) {
    uint64_t p;
    if (etch__parse_uint(ua.port, 0, 65535, &p) != 0) {
      opts_free(&o);
      return usage_error(cmd, "--port: '%s' is not a port (0..65535)", ua.port);
    }
    so.port = (uint16_t)p;
  }
  etch__ui *ui = NULL;
  bool have_store = false;
  if (etch__ui_new(&ui) != ETCH_OK) rc = runtime_error("out of memory");
#ifdef ETCH_UI_STORE
  /* The store is listed by the page (again at each look: a trace recorded
   * meanwhile is there); one that does not exist yet is an empty store. */
  char store[4096];
  if (!rc) {
    if (etch__store_dir(store, sizeof store) == ETCH_OK) {
      if (etch__ui_set_store(ui, store) != ETCH_OK)
        rc = runtime_error("%s", etch_last_error());
      have_store = true;
    } else {
      etch__ui_set_store_error(ui, etch_last_error());
    }
  }
#endif
  for (int i = 0; !rc && i < o.noperands; i++)
    if (etch__ui_add_path(ui, o.operands[i]) != ETCH_OK)
      rc = runtime_error("%s", etch_last_error());
  opts_free(&o);
  /* Ctrl-C and a stop end the wait below, not the process. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  if (!rc) pthread_sigmask(SIG_BLOCK, &set, NULL); /* the server's thread too */
  etch__ui_server *srv = NULL;
  if (!rc && etch__ui_server_start(ui, &so, &srv) != ETCH_OK)
    rc = runtime_error("%s", etch_last_error());
  if (!rc) {
    printf("etch ui: %s\n", etch__ui_server_url(srv));
    if (!etch__ui_count(ui) && !have_store)
      printf("etch ui: no trace named (etch ui TRACE|DIR...)\n");
    fflush(stdout);
    if (ua.open) open_browser(etch__ui_server_url(srv));
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "etch ui: stopped (%s)\n", strsignal(sig));
  }
  etch__ui_server_stop(srv);
  etch__ui_free(ui);
  return rc;
}

static const cli_opt kUiOpts[] = {
    {0, "--port", "PORT", "listen on PORT (default: any free port)",
     CLI_STR(ui_args, port)},
    {0, "--address", "ADDR",
     "listen on the IPv4 address ADDR (default 127.0.0.1; anything else\n"
     "lets other machines reach the traces: the token still guards them)",
     CLI_STR(ui_args, address)},
    {0, "--open", NULL, "open the address in the desktop's browser",
     CLI_BOOL(ui_args, open)},
    {0, "--token", "TOKEN", "the token to require (default: a random one)",
     CLI_STR(ui_args, token)},
    {0},
};

const command cli_ui = {
    .name = "ui",
    .fn = cmd_ui,
    .summary = "the traces in a local web viewer",
    .synopsis = "etch ui [--port PORT] [--open] [--address ADDR] [--token TOKEN]\n"
                "        [TRACE|DIR]...\n",
    .about =
        "Serves a web page that lists the traces named (files, and the\n"
        "*.pftrace and *.perfetto-trace files of directories) and those of the\n"
        "trace store (etch ls's), and shows each\n"
        "as a timeline, a flame graph, etch stats' tables and an SQL box,\n"
        "and prints its address (with the token every request needs) until\n"
        "Ctrl-C. A trace's tables come from its cache (etch query's).\n",
    .opts = kUiOpts,
    .more = "Example:\n  etch ui --open app.pftrace traces/\n",
};

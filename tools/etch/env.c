/*
 * env.c - etch env: the ETCH_* environment variables libetch reads (the
 * table in src/base/envvars.c), and with --set the ones this environment
 * sets.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#include "base/envvars.h"

extern char **environ;

typedef struct env_args {
  bool set;
} env_args;

static void print_table(void) {
  printf("%-25s %-8s %-7s %s\n", "NAME", "TYPE", "DEFAULT", "RANGE");
  for (size_t i = 0; i < ETCH_ENV_COUNT_; i++) {
    const etch_envvar *v = &etch__envvars[i];
    char buf[64];
    printf("%-25s %-8s %-7s %s\n    %s\n", v->name,
           etch__env_type_name(v->type), v->dflt_text,
           etch__env_range(v, buf, sizeof buf), v->doc);
  }
}

/* NAME=VALUE of the table's variables that are set, in the table's order;
 * then any other ETCH_* variable, which libetch does not read (a typo?). */
static void print_set(void) {
  for (size_t i = 0; i < ETCH_ENV_COUNT_; i++) {
    const char *v = etch__env((etch_env)i);
    if (v) printf("%s=%s\n", etch__envvars[i].name, v);
  }
  for (char **e = environ; *e; e++) {
    if (strncmp(*e, "ETCH_", 5) != 0) continue;
    size_t n = strcspn(*e, "=");
    bool known = false;
    for (size_t i = 0; i < ETCH_ENV_COUNT_ && !known; i++)
      known = strlen(etch__envvars[i].name) == n &&
              strncmp(etch__envvars[i].name, *e, n) == 0;
    if (!known) printf("%s  (libetch does not read it)\n", *e);
  }
}

static int cmd_env(int argc, char **argv) {
  env_args ea = {0};
  opts o;
  int rc = 0;
  if (!cli_parse(&cli_env, argc, argv, &ea, &o, &rc)) return rc;
  if (o.noperands) {
    rc = usage_error(&cli_env, "too many arguments");
  } else {
    if (ea.set)
      print_set();
    else
      print_table();
    rc = EXIT_OK;
  }
  opts_free(&o);
  return rc;
}

static const cli_opt kEnvOpts[] = {
    {0, "--set", NULL,
     "only the variables set in this environment, as NAME=VALUE; an\n"
     "ETCH_* variable libetch does not read is marked",
     CLI_BOOL(env_args, set)},
    {0},
};

const command cli_env = {
    .name = "env",
    .fn = cmd_env,
    .summary = "the ETCH_* environment variables libetch reads",
    .synopsis = "etch env [--set]\n",
    .about = "Prints every ETCH_* environment variable libetch reads: its name,\n"
             "type, default and range, and a line on what it does\n"
             "(docs/sdk.md, \"Environment variables\").\n",
    .opts = kEnvOpts,
};

/*
 * cli.h - what the verbs of the etch command line share.
 *
 * Exit status: 0 success, 1 runtime error (bad trace, SQL error, I/O),
 * 2 usage error. Errors go to stderr as "etch: <message>".
 */
#ifndef ETCH_TOOLS_CLI_H
#define ETCH_TOOLS_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "etch/common.h"
#include "query/query.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

typedef struct command {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *summary;
  const char *usage;
} command;

/* The verbs, each in its own file. */
extern const command cli_record, cli_leaks, cli_stats, cli_query, cli_convert,
    cli_print;

/* "etch: MESSAGE" on stderr; EXIT_RUNTIME. */
int runtime_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "etch: MESSAGE" and the usage line of `cmd` (NULL: of etch) on stderr;
 * EXIT_USAGE. */
int usage_error(const command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* An error reading the trace at `path` (status from the reader). */
int trace_error(const char *path, int status);

/* ---- option parsing ---- */

/*
 * A small getopt: options may come before or after operands; "--" ends
 * them. `stop_at_operand` makes the first operand end the options (record).
 */
typedef struct opts {
  int argc;
  char **argv;
  int i;
  bool stop_at_operand;
  bool done;
  char **operands;
  int noperands;
} opts;

int opts_init(opts *o, int argc, char **argv, bool stop_at_operand);
/* Returns the option at the cursor (e.g. "-o", "--csv"), or NULL when the
 * options are over. Operands met on the way are collected. */
const char *next_opt(opts *o);
/* The value of an option: "--name=value" or the next argument. */
const char *opt_value(opts *o, const char *opt, const command *cmd, int *err);
/* True if `opt` is `name` or "name=..." */
bool is_opt(const char *opt, const char *name);
/* The count of -n / --top: from `min` (0 meaning all) to a million. */
int top_value(opts *o, const char *opt, const command *cmd, long min,
              int *out);
int print_help(const command *cmd);

/* ---- reading a trace ---- */

/* --strict: a trace cut short is an error instead of a warning. */
extern bool g_strict;

int check_readable(const char *path);
/* Opens `path` as a database: an existing SQLite file (one written by
 * `etch query --db`) as is, else a trace imported into memory or into
 * `db_path`. */
int load(const char *path, const char *db_path, bool all_args, bool indexes,
         sqlite3 **out);
/* Runs a report into memory and prints it to `to` only when it succeeded:
 * an error must not leave half a report on stdout. */
int print_whole(int (*report)(const char *path, FILE *out, const void *arg),
                const char *path, const void *arg, FILE *to);
/* The stats report of a trace or of a database written by `etch query
 * --db`; `to`: stdout for etch stats, stderr for etch record's summary. */
int stats_of(const char *path, const etch__stats_opts *so, FILE *to);

#endif

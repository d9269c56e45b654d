/*
 * cli.h - what the verbs of the etch command line share.
 *
 * Exit status: 0 success, 1 runtime error (bad trace, SQL error, I/O),
 * 2 usage error. Errors go to stderr as "etch: <message>".
 */
#ifndef ETCH_TOOLS_CLI_H
#define ETCH_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h"
#include "etch/common.h"
#include "query/query.h"
#include "ui/store.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

typedef struct command command;

/* ---- options: a table per verb (opts.c) ---- */

typedef enum cli_kind {
  OPT_END = 0, /* the table's last entry: {0} */
  OPT_TEXT,    /* help only: a paragraph, or a line of `shown` and `help` */
  OPT_BOOL,    /* sets the bool at `off` in the verb's arguments */
  OPT_STR,     /* stores the value, a const char *, at `off` */
  OPT_FN,      /* calls `fn` */
} cli_kind;

typedef struct cli_opt {
  char shrt;        /* 'o' for -o, or 0 */
  const char *lng;  /* "--output", or NULL */
  const char *arg;  /* the value's name in the help ("PATH"); NULL: the
                       option takes no value */
  const char *help; /* what it does; the lines after the first are indented
                       to the help's column. NULL: not listed (`shown` by
                       another entry) */
  cli_kind kind;
  size_t off;
  /* Called with the option as given ("--top", "--top=3") and its value
   * (NULL for one that takes none); returns 0 or an exit status. */
  int (*fn)(const command *cmd, const char *opt, const char *value,
            void *args);
  const char *shown; /* the help's left column, when not "-o, --output PATH" */
} cli_opt;

/* Where an option's value goes: after {shrt, lng, arg, help, ...}. */
#define CLI_BOOL(type, field) .kind = OPT_BOOL, .off = offsetof(type, field)
#define CLI_STR(type, field) .kind = OPT_STR, .off = offsetof(type, field)
#define CLI_FN(f) .kind = OPT_FN, .fn = (f)
/* Help only: a paragraph as is, or one more line about options listed
 * already (`shown`: "--buffer SIZE"). */
#define CLI_PARA(text) {.kind = OPT_TEXT, .help = (text)}
#define CLI_ALSO(shown_, text) {.kind = OPT_TEXT, .help = (text), .shown = (shown_)}
/* --strict, which every verb that reads a trace has. */
#define CLI_STRICT(text) {0, "--strict", NULL, (text), CLI_FN(cli_set_strict)}

struct command {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *summary;
  /* "etch stats [--top N] ... TRACE\n"; a usage error shows its first line.
   * etch VERB --help prints it, then `about`, the options from `opts`, and
   * `more`, a blank line between them. */
  const char *synopsis;
  const char *about;
  const cli_opt *opts; /* NULL, or up to {0} */
  const char *more;
  /* The first operand ends the options (record: PROGRAM ARGS...). */
  bool stop_at_operand;
  /* Whether an argument that looks like an option but is none is an
   * operand, with `noperands` before it (query: SQL that starts with a
   * comment); NULL: it is an unknown option. */
  bool (*is_operand)(const char *arg, int noperands);
};

/* The verbs, each in its own file. */
extern const command cli_record, cli_leaks, cli_stats, cli_query, cli_convert,
    cli_print, cli_env, cli_recover, cli_ls, cli_rm, cli_diff, cli_report,
    cli_load;
#ifdef ETCH_HAVE_UI
extern const command cli_ui;
#endif

/* The trace in flight file `flight` into `out` ("-": stdout), saying what
 * was recovered on stderr unless `quiet` (recover.c); its size in *bytes. */
int cli_recover_file(const char *flight, const char *out, bool compress,
                     bool quiet, size_t *bytes);

/* The traces in[0..n) of several processes as one trace in `out` (which
 * may be one of them; written beside it and renamed over it when whole),
 * each (file, sequence) on a sequence id of its own and their TraceStats
 * gathered into one (merge.c); its size in *bytes. The inputs stay. */
int cli_merge_traces(const char *const *in, size_t n, const char *out,
                     bool compress, size_t *bytes);

/* "etch: MESSAGE" on stderr; EXIT_RUNTIME. */
int runtime_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "etch: MESSAGE" and the usage line of `cmd` (NULL: of etch) on stderr;
 * EXIT_USAGE. */
int usage_error(const command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* An error reading the trace at `path` (status from the reader). */
int trace_error(const char *path, int status);

/* ---- option parsing ---- */

/* The operands of a command line, once its options are parsed. */
typedef struct opts {
  int argc;
  char **argv;
  int i;
  bool done;
  char **operands;
  int noperands;
} opts;

/*
 * Parses argv[1..] by cmd->opts into `args`, the verb's arguments (a
 * struct whose fields the table's offsets name): options may come before
 * or after operands, "--" ends them, "--name=value" or "--name value" or
 * "-n value" give a value; -h and --help print the help. True when the
 * verb goes on, with the operands in `o` (free with opts_free); false
 * when it is done (the help printed, or a usage error), with its exit
 * status in *status.
 */
bool cli_parse(const command *cmd, int argc, char **argv, void *args, opts *o,
               int *status);
void opts_free(opts *o);
/* The one operand of a verb that reads one trace: 0, or a usage error. */
int cli_one_trace(const command *cmd, const opts *o);
/* A count (of -n / --top): from `min` (0 meaning all) to a million; 0 or
 * a usage error. */
int cli_count(const command *cmd, const char *opt, const char *value,
              long min, int *out);
/* --strict (CLI_STRICT). */
int cli_set_strict(const command *cmd, const char *opt, const char *value,
                   void *args);
/* etch VERB --help. */
int print_help(const command *cmd);

/* "1314 bytes", "41.2 KiB", "1.2 MiB", "3.0 GiB". */
void cli_fmt_size(char *buf, size_t n, long long bytes);
/* An age: a number and a unit, ns to w ("30m", "7d", "1.5h"; base's
 * etch__parse_duration_ns), in ns; -1 if it is none. */
int cli_parse_age(const char *v, int64_t *ns);

/* ---- the trace store (ls.c) ---- */

/* The store's directory into `dir` and its traces into `l`, only those
 * last written more than `age` ns ago when `has_age`; 0 or an exit
 * status (the error said). */
int cli_store_list(const command *cmd, bool has_age, int64_t age, char *dir,
                   size_t ndir, etch__store_list *l);
/* Keeps the entries of `l` last written more than `age` ns ago. */
void cli_store_keep_older(etch__store_list *l, int64_t age);

/* ---- reading a trace ---- */

/* --strict: a trace cut short or a malformed packet is an error instead
 * of a warning. */
extern bool g_strict;
/* --no-cache: the trace's tables are built in memory, not cached. */
extern bool g_no_cache;

int check_readable(const char *path);
/* Opens `path` as a database: an existing DuckDB file (one written by
 * `etch query --db`) as is, else a trace's tables: from its cache (every
 * arg kept, no `db_path`, no --no-cache), or imported into memory or into
 * `db_path`. */
int load(const char *path, const char *db_path, bool all_args,
         etch__db **out);
/* Runs a report into memory and prints it to `to` only when it succeeded:
 * an error must not leave half a report on stdout. */
int print_whole(int (*report)(const char *path, FILE *out, const void *arg),
                const char *path, const void *arg, FILE *to);
/* The stats report of a trace or of a database written by `etch query
 * --db`; `to`: stdout for etch stats, stderr for etch record's summary. */
int stats_of(const char *path, const etch__stats_opts *so, FILE *to);

#endif

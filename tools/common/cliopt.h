/*
 * cliopt.h - the option tables and parser of etch's programs: each
 * command (an etch verb, or etchd itself) has a table of its options
 * (cli_opt), from which cli_parse parses its command line and print_help
 * prints its help. A small library both tools link (tools/common).
 *
 * Exit status: 0 success, 1 runtime error, 2 usage error. Errors go to
 * stderr as "PROGRAM: <message>" (cli_program: "etch" or "etchd").
 */
#ifndef ETCH_TOOLS_CLIOPT_H
#define ETCH_TOOLS_CLIOPT_H

#include <stdbool.h>
#include <stddef.h>

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* The program's name in its messages and help: "etch" unless set. */
extern const char *cli_program;

typedef struct command command;

/* ---- options: a table per command ---- */

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

/* "PROGRAM: MESSAGE" on stderr; EXIT_RUNTIME. */
int runtime_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "PROGRAM: MESSAGE" and the usage line of `cmd` (NULL: of etch) on
 * stderr; EXIT_USAGE. */
int usage_error(const command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
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
/* PROGRAM [VERB] --help. */
int print_help(const command *cmd);

#endif /* ETCH_TOOLS_CLIOPT_H */

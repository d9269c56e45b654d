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
#include "cliopt.h"
#include "etch/common.h"
#include "query/query.h"
#include "ui/store.h"

/* --strict, which every verb that reads a trace has. */
#define CLI_STRICT(text) {0, "--strict", NULL, (text), CLI_FN(cli_set_strict)}

/* The verbs, each in its own file. */
extern const command cli_record, cli_leaks, cli_stats, cli_query, cli_convert,
    cli_print, cli_env, cli_recover, cli_ls, cli_rm, cli_diff, cli_report,
    cli_load;
#ifdef ETCH_HAVE_UI
extern const command cli_ui;
#endif
#ifdef ETCH_HAVE_SYMBOLIZE
extern const command cli_symbolize;
/* Names the frames of trace `in` that have none, from the binaries (their
 * recorded paths, then by build id in dirs[0..ndirs) and the system's
 * debug directory), appended as ModuleSymbols packets to `out` (NULL:
 * `in` itself; else a copy of it); the frames it named in *nframes (0:
 * nothing added). What it did said on `log` unless NULL (symbolize.c).
 * 0 or an exit status, said. */
int cli_symbolize_trace(const char *in, const char *out,
                        const char *const *dirs, size_t ndirs, FILE *log,
                        size_t *nframes);
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

/* An error reading the trace at `path` (status from the reader). */
int trace_error(const char *path, int status);

/* --strict (CLI_STRICT). */
int cli_set_strict(const command *cmd, const char *opt, const char *value,
                   void *args);

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

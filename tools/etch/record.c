/*
 * record.c - etch record: run a program, or record from a tracing service
 * (record_service.c), and say what became of the trace. This file holds
 * the verb: its options, the plan of where the trace goes (the trace
 * store's names) and the service's run; record_run.c runs the program,
 * record_procs.c reads and reports what its processes left.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/envvars.h"
#include "record.h"

/* "10s", "500ms", "2m", "1h" or plain milliseconds: 1 ms to 4e9 ms. */
static int parse_duration_ms(const char *v, uint32_t *out) {
  uint64_t ns;
  if (etch__parse_duration_ns(v, 1000000, 1000000, 4000000000ull * 1000000,
                              &ns) != 0)
    return -1;
  *out = (uint32_t)(ns / 1000000);
  return 0;
}

/* "64MB", "512KB", "1GB" (binary units) or plain KiB: 4 KiB to 4e9 KiB. */
static int parse_size_kb(const char *v, uint32_t *out) {
  uint64_t bytes;
  if (etch__parse_size(v, 1024, 4096, 4000000000ull * 1024, &bytes) != 0)
    return -1;
  *out = (uint32_t)(bytes / 1024);
  return 0;
}

/*
 * Whether the trace can be written to `path`, said before anything runs
 * (the program, or a session of the service) rather than after: created
 * and removed again, or, for what exists and is not a regular file
 * (/dev/null), writable. `fresh`: a file (or link) left from an earlier
 * run is removed, so that it cannot pass for this run's trace.
 */
static int check_output(const char *path, bool fresh) {
  struct stat sb;
  if (fresh && lstat(path, &sb) == 0 &&
      (S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode)) && unlink(path) != 0)
    return runtime_error("%s: %s", path, strerror(errno));
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    close(fd);
    unlink(path);
    return EXIT_OK;
  }
  if (errno == EEXIST && access(path, W_OK) == 0) return EXIT_OK;
  return runtime_error("cannot write trace to '%s': %s", path,
                       strerror(errno));
}

/*
 * A session of the service kept in the trace store is written under a
 * hidden name in the store (a leading '.': no store name, so etch ls and
 * etch ui never list it) and given its store name only once it is whole:
 * `tmp` gets DIR/.NAME.part. The store's directory is the consumer's
 * (etch record's), never the service's: etchd may run as another user,
 * or be Perfetto's traced.
 */
static int store_part_path(const char *final, char *tmp, size_t n) {
  const char *slash = strrchr(final, '/');
  if (!slash) return -1;
  int k = snprintf(tmp, n, "%.*s/.%s.%ld.part", (int)(slash - final), final,
                   slash + 1, (long)getpid());
  return k < 0 || (size_t)k >= n ? -1 : 0;
}

/* Gives the whole trace at `tmp` its name in the store: `final`, or (when
 * another recording took that name meanwhile) a new one of the store's
 * names for `prog` at `when`, into `final`. Never replaces a trace. */
static int store_publish(const char *store, const char *prog, int64_t when,
                         const char *tmp, char *final, size_t n) {
  for (int tries = 0; tries < 16; tries++) {
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_NOREPLACE) == 0)
      return 0;
    if (errno == EINVAL || errno == ENOSYS) { /* no RENAME_NOREPLACE here */
      if (link(tmp, final) == 0) {
        unlink(tmp);
        return 0;
      }
    }
    if (errno != EEXIST) break;
    if (etch__store_new_path(store, prog, when, final, n) != ETCH_OK)
      return runtime_error("%s", etch_last_error());
  }
  return runtime_error("cannot name the trace %s in the store (%s): %s", tmp,
                       final, strerror(errno));
}

static int rec_list(const command *cmd, const char *opt, const char *value,
                    void *args) {
  (void)cmd, (void)opt, (void)value;
  record_args *a = (record_args *)args;
  a->service = a->so.list = true;
  return 0;
}

static int rec_ring(const command *cmd, const char *opt, const char *value,
                    void *args) {
  (void)cmd, (void)opt, (void)value;
  record_args *a = (record_args *)args;
  a->fill = "ring";
  a->so.discard = false;
  return 0;
}

static int rec_discard(const command *cmd, const char *opt, const char *value,
                       void *args) {
  (void)cmd, (void)opt, (void)value;
  record_args *a = (record_args *)args;
  a->fill = "discard";
  a->so.discard = true;
  return 0;
}

static int rec_config(const command *cmd, const char *opt, const char *value,
                      void *args) {
  (void)cmd, (void)opt;
  record_args *a = (record_args *)args;
  a->service = true;
  a->so.config_path = value;
  return 0;
}

static int rec_time(const command *cmd, const char *opt, const char *value,
                    void *args) {
  record_args *a = (record_args *)args;
  a->service = true;
  if (parse_duration_ms(value, &a->so.duration_ms) != 0)
    return usage_error(cmd, "%s: '%s' is not a duration (e.g. 10s, 500ms, "
                            "2m)", opt, value);
  return 0;
}

static int rec_write_period(const command *cmd, const char *opt,
                            const char *value, void *args) {
  record_args *a = (record_args *)args;
  a->write_period = true;
  if (parse_duration_ms(value, &a->write_period_ms) != 0 ||
      a->write_period_ms == 0 || a->write_period_ms > 86400000)
    return usage_error(cmd, "%s: '%s' is not a duration from 1ms to 24h "
                            "(e.g. 1s, 200ms)", opt, value);
  return 0;
}

/* --sample (1000 Hz) or --sample=HZ. */
static int rec_sample(const command *cmd, const char *opt, const char *value,
                      void *args) {
  record_args *a = (record_args *)args;
  if (!value) {
    a->sample_hz = 1000;
    return 0;
  }
  char *end;
  errno = 0;
  unsigned long hz = strtoul(value, &end, 10);
  if (end == value || *end || errno || value[0] == '-' || hz < 1 ||
      hz > 100000)
    return usage_error(cmd, "%s: '%s' is not a rate from 1 to 100000 "
                            "(samples a second)", opt, value);
  a->sample_hz = (uint32_t)hz;
  return 0;
}

static int rec_buffer(const command *cmd, const char *opt, const char *value,
                      void *args) {
  record_args *a = (record_args *)args;
  a->buffer_opt = true;
  if (parse_size_kb(value, &a->so.buffer_kb) != 0)
    return usage_error(cmd, "%s: '%s' is not a size (e.g. 64MB, 512KB)", opt,
                       value);
  return 0;
}

static int rec_categories(const command *cmd, const char *opt,
                          const char *value, void *args) {
  record_args *a = (record_args *)args;
  a->cats = value;
  if (!*value)
    return usage_error(cmd, "%s: an empty category list records nothing "
                            "('*' records every category)", opt);
  return 0;
}

/* The options that do not go together, said before anything runs; and
 * --malloc's library found (LD_PRELOAD's value in preload[cap]). */
static int rec_check(const command *cmd, const record_args *ra,
                     const opts *o, char *preload, size_t cap) {
  int rc = 0;
  /* Without --system, the buffer options are the program's own session's
   * (ETCH_BUFFER_KB, ETCH_FILL), whose buffer is 16 KB to 4 GB. */
  if (!ra->service && ra->buffer_opt &&
      (ra->so.buffer_kb < 16 || ra->so.buffer_kb > 4194304))
    rc = usage_error(cmd, "--buffer: the program's buffer is 16KB to 4GB "
                          "(a larger one needs --system)");
  if (!rc && o->noperands == 0 && !ra->service)
    rc = usage_error(cmd, "missing the program to run (or --system to record "
                          "from a tracing service)");
  if (!rc && ra->write_period && (ra->service || o->noperands == 0))
    rc = usage_error(cmd, "--write-period writes the trace of a program etch "
                          "record runs itself while it runs (with --system "
                          "the service writes it: a TraceConfig's "
                          "write_into_file)");
  if (!rc && ra->write_period && ra->flight)
    rc = usage_error(cmd, "--write-period and --flight: a process's trace is "
                          "either written while it runs or kept in a flight "
                          "file for a death; choose one");
  if (!rc && ra->flight && (ra->service || o->noperands == 0))
    rc = usage_error(cmd, "--flight keeps the rings of a program etch record "
                          "runs itself (not with --system)");
  if (!rc && ra->console && ra->service)
    rc = usage_error(cmd, "--console prints the events of a program etch "
                          "record runs itself; with --system, put "
                          "interceptor_config { name: \"console\" } in the "
                          "data source's config instead");
  if (!rc && ra->console && o->noperands == 0)
    rc = usage_error(cmd, "--console: missing the program to run");
  if (!rc && ra->malloc_trace && (ra->service || o->noperands == 0))
    rc = usage_error(cmd, "--malloc traces the allocations of a program etch "
                          "record runs itself (not with --system)");
  if (!rc && ra->sample_hz && (ra->service || o->noperands == 0))
    rc = usage_error(cmd, "--sample samples a program etch record runs "
                          "itself (not with --system)");
  if (!rc && ra->malloc_trace && !rec_malloc_lib(preload, cap))
    rc = runtime_error("--malloc: libetch_malloc.so not found next to etch "
                       "(set ETCH_MALLOC_LIB to its path)");
  return rc;
}

/* Where the trace goes: -o, or a new name in the trace store (etch ls),
 * by the time and the program; a session of the service kept in the
 * store is written under a hidden name first (`part`). */
typedef struct rec_plan {
  const char *out_path;
  char def[4352], store[4096], part[4400];
  const char *store_prog;
  int64_t started;
  bool in_store;
} rec_plan;

static int rec_plan_output(const record_args *ra, const opts *o,
                           rec_plan *pl) {
  pl->out_path = ra->out_path;
  pl->store_prog = o->noperands ? o->operands[0] : "system";
  pl->started = (int64_t)time(NULL);
  if (!pl->out_path && !ra->so.list) {
    if (etch__store_dir(pl->store, sizeof pl->store) != ETCH_OK ||
        etch__store_new_path(pl->store, pl->store_prog, pl->started, pl->def,
                             sizeof pl->def) != ETCH_OK)
      return runtime_error("%s", etch_last_error());
    pl->out_path = pl->def;
  }
  if (!pl->out_path) pl->out_path = "";
  pl->in_store = ra->service && pl->out_path == pl->def;
  if (pl->in_store && store_part_path(pl->def, pl->part, sizeof pl->part) != 0)
    return runtime_error("trace store: path too long: %s", pl->def);
  if (ra->so.list) return 0;
  return check_output(pl->in_store ? pl->part : pl->out_path,
                      !ra->service || pl->in_store);
}

/* What a session kept in the store left is kept as a -o file would be
 * (whole packets only, however it ended); nothing at all is no trace.
 * `rc`: how the session went. */
static int rec_keep_part(rec_plan *pl, int rc) {
  char msg[1024] = "";
  if (rc) snprintf(msg, sizeof msg, "%s", etch_last_error());
  struct stat sb;
  if (lstat(pl->part, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
    int pub = store_publish(pl->store, pl->store_prog, pl->started, pl->part,
                            pl->def, sizeof pl->def);
    if (pub) return pub;
    rec_index_in_store(pl->store, pl->def);
    if (rc)
      return runtime_error("%s (what there is of the trace is %s)", msg,
                           pl->def);
  } else {
    unlink(pl->part);
    if (rc) return runtime_error("%s", msg);
  }
  return 0;
}

/* --system: a session of the service (record_service.c), with PROGRAM run
 * in system mode when there is one. */
static int rec_run_service(record_args *ra, opts *o, rec_plan *pl) {
  rec_service_opts so = ra->so;
  so.out_path = pl->in_store ? pl->part : pl->out_path;
  so.categories = ra->cats;
  if (o->noperands) {
    o->operands[o->noperands] = NULL;
    so.argv = o->operands;
  }
  size_t bytes = 0;
  int rc = etch_cli_record_service(&so, &bytes);
#ifdef ETCH_HAVE_SYMBOLIZE
  /* The frames named from the binaries (etch symbolize). */
  size_t named;
  struct stat sb;
  if (!rc && !so.list && stat(so.out_path, &sb) == 0 &&
      S_ISREG(sb.st_mode) &&
      cli_symbolize_trace(so.out_path, NULL, NULL, 0,
                          ra->quiet ? NULL : stderr, &named) == 0 &&
      named && stat(so.out_path, &sb) == 0)
    bytes = (size_t)sb.st_size;
#endif
  if (pl->in_store) {
    int kept = rec_keep_part(pl, rc);
    if (kept) return kept;
  }
  if (rc) return runtime_error("%s", etch_last_error());
  if (so.list) return 0;
  char size[32];
  cli_fmt_size(size, sizeof size, (long long)bytes);
  fprintf(stderr, "trace: %s (%s)\n", pl->out_path, size);
  if (ra->quiet) return 0;
  fprintf(stderr, "\n");
  etch__stats_opts st = {.top = 5, .compact = true};
  rc = stats_of(pl->out_path, &st, stderr);
  rec_index_in_store(pl->store, pl->out_path);
  return rc;
}

/* PROGRAM run with libetch told what to record (record_run.c), then what
 * its processes left said and put together (record_procs.c). */
static int rec_run_program(const record_args *ra, opts *o, rec_plan *pl,
                           const char *preload) {
  /* Every path handed to the program is absolute: relative ones are
   * relative to where etch record was started, not to wherever the
   * program's processes are when they start tracing. */
  char out_abs[PATH_MAX + 64];
  if (!rec_absolute(pl->out_path, out_abs, sizeof out_abs))
    return runtime_error("cannot write trace to '%s': %s", pl->out_path,
                         strerror(errno));
  /* The run directory where each traced process says what became of its
   * trace (libetch's env.c); --flight's files go into it too. */
  char run_dir[PATH_MAX];
  int rc = rec_run_dir(run_dir, sizeof run_dir);
  if (rc) return rc;
  rec_environment(ra, out_abs, run_dir, preload);
  rec_exit ex;
  o->operands[o->noperands] = NULL;
  rec_spawn(o->operands, &ex);
  size_t nprocs;
  rec_proc *procs = rec_collect(run_dir, &nprocs);
  const char *comp = etch__env(ETCH_ENV_COMPRESSION);
  if (ra->write_period)
    rec_streamed(procs, nprocs);
  else if (ra->malloc_trace && !ra->flight)
    rec_drop_partial(procs, nprocs);
  rec_flights(run_dir, procs, nprocs, !comp || strcmp(comp, "none") != 0);
  if (ex.err) {
    rec_procs_free(procs, nprocs);
    return runtime_error("cannot run %s: %s", o->operands[0],
                         strerror(ex.err));
  }
  const char *prog = o->operands[0];
  bool failed = rec_report_exit(prog, &ex);
  rec_tally t = rec_report(procs, nprocs, &ex, ra->write_period_ms);
  rc = rec_report_traces(procs, nprocs, prog, out_abs, ra, pl->store,
                         t.nwrote);
  rec_procs_free(procs, nprocs);
  if (!rc && (failed || t.ncut || t.nfail)) rc = EXIT_RUNTIME;
  return rc;
}

/*
 * A trace recorded into the store (no -o) is written as it is recorded,
 * so that etch ls lists it and etch ui follows it while it grows: a
 * program's processes every second (as --write-period 1s; not with
 * --flight, which keeps the rings for a death instead, nor --malloc,
 * which streams on its own), a session of the service (no --config) with
 * write_into_file every second. --no-live turns it off.
 */
enum { kLiveWritePeriodMs = 1000 };

static void rec_live_default(record_args *ra, const rec_plan *pl) {
  if (ra->no_live || ra->so.list || pl->out_path != pl->def) return;
  if (ra->service) {
    ra->so.write_as_it_goes = !ra->so.config_path;
  } else if (!ra->write_period && !ra->flight && !ra->malloc_trace) {
    ra->write_period = ra->write_period_default = true;
    ra->write_period_ms = kLiveWritePeriodMs;
  }
}

/* etch record: its options parsed and checked, where the trace goes
 * planned, then the service's session or the program run. */
static int cmd_record(int argc, char **argv) {
  const command *cmd = &cli_record;
  record_args ra = {0};
  opts o;
  int rc = 0;
  if (!cli_parse(cmd, argc, argv, &ra, &o, &rc)) return rc;
  char preload[PATH_MAX * 2 + 2] = "";
  rec_plan pl = {0};
  rc = rec_check(cmd, &ra, &o, preload, sizeof preload);
  if (!rc) rc = rec_plan_output(&ra, &o, &pl);
  if (!rc) rec_live_default(&ra, &pl);
  if (!rc)
    rc = ra.service ? rec_run_service(&ra, &o, &pl)
                    : rec_run_program(&ra, &o, &pl, preload);
  opts_free(&o);
  return rc;
}

static const cli_opt kRecordOpts[] = {
    {'o', "--output", "PATH",
     "trace file (default: a new trace in the trace\n"
     "store, YYYYmmdd-HHMMSS-PROGRAM.pftrace; etch ls)",
     CLI_STR(record_args, out_path)},
    {'c', "--categories", "LIST",
     "categories to record, e.g. 'render,io,-debug'",
     CLI_FN(rec_categories)},
    {0, "--malloc", NULL,
     "trace the program's allocations (preloads\n"
     "libetch_malloc.so; see etch leaks), streamed to\n"
     "the trace as they come: a full buffer makes the\n"
     "program wait, so that none is lost",
     CLI_BOOL(record_args, malloc_trace)},
    {0, "--sample", NULL,
     "sample the call stacks of every thread of the\n"
     "program, HZ times a second (default 1000), with\n"
     "perf events (ETCH_SAMPLE; docs/sdk.md, Sampling)",
     CLI_FN(rec_sample), .shown = "--sample[=HZ]"},
    {0, "--sample", "HZ", NULL, CLI_FN(rec_sample)},
    {'q', "--quiet", NULL,
     "say where the trace is, without the summary\n"
     "(which reads the whole trace)",
     CLI_BOOL(record_args, quiet)},
    {0, "--flight", NULL,
     "keep each process's ring in a flight file, so\n"
     "that the trace of one that dies (SIGKILL, a\n"
     "crash, _exit) is recovered (ETCH_FLIGHT)",
     CLI_BOOL(record_args, flight)},
    {0, "--per-process", NULL,
     "a trace file for each process of the program\n"
     "(OUT, OUT.PID.pftrace, ...) instead of one trace\n"
     "of them all",
     CLI_BOOL(record_args, per_process)},
    {0, "--console", NULL,
     "also print every event on stderr as it happens\n"
     "(ETCH_CONSOLE=1; colours on a terminal unless\n"
     "NO_COLOR is set)",
     CLI_BOOL(record_args, console)},
    CLI_PARA("\n"),
    {0, "--buffer", "SIZE",
     "the program's trace buffer (ETCH_BUFFER_KB;\n"
     "default 8MB, 16MB with --malloc; 16KB to 4GB)",
     CLI_FN(rec_buffer)},
    {0, "--ring", NULL,
     "when the buffer is full: overwrite the oldest\n"
     "(ETCH_FILL=ring, the default) or keep the\n"
     "first (discard; with --malloc the program\n"
     "waits instead unless --discard is given)",
     CLI_FN(rec_ring), .shown = "--ring, --discard"},
    {0, "--discard", NULL, NULL, CLI_FN(rec_discard)},
    {0, "--write-period", "DURATION",
     "write each process's trace while it runs, this\n"
     "often (ETCH_WRITE_PERIOD_MS): a small buffer\n"
     "records a long run, and a process that is\n"
     "killed leaves its trace up to the last write",
     CLI_FN(rec_write_period)},
    {0, "--no-live", NULL,
     "a trace into the store (no -o) is written as it\n"
     "is recorded, every second, so that etch ls and\n"
     "etch ui see it grow (with --system: the\n"
     "service's write_into_file); this turns that off",
     CLI_BOOL(record_args, no_live)},
    CLI_PARA("\n"
             "Through a tracing service (etchd, or Perfetto's traced): every\n"
             "producer connected to it lands in one trace. Only --system (or\n"
             "--list, --config, -t, which are the service's) records from it.\n"),
    {0, "--system", NULL,
     "record from the service (with PROGRAM: run it\n"
     "in system mode and record until it ends)",
     CLI_BOOL(record_args, service)},
    {'t', "--time", "DURATION", "stop after DURATION (10s, 500ms, 2m)",
     CLI_FN(rec_time)},
    CLI_ALSO("--buffer SIZE", "with --system: the service's buffer (default\n"
                              "32MB)"),
    CLI_ALSO("--ring, --discard",
             "with --system: the service's buffer, as above"),
    {0, "--config", "FILE", "a TraceConfig in Perfetto's text format",
     CLI_FN(rec_config)},
    {0, "--list", NULL, "the service's producers, data sources, sessions",
     CLI_FN(rec_list)},
    CLI_PARA("The service's sockets: $PERFETTO_CONSUMER_SOCK_NAME, else "
             "etch's own.\n"),
    {0},
};

const command cli_record = {
    .name = "record",
    .fn = cmd_record,
    .summary = "run a program and record a trace of it",
    .synopsis =
        "etch record [-o OUT.pftrace] [-c CATEGORIES] [-q] [--console] "
        "[--malloc] [--sample[=HZ]] [--buffer SIZE] [--ring|--discard] [--write-period DURATION] "
        "[--] PROGRAM [ARGS...]\n"
        "       etch record --system [-t DURATION] [--config FILE] [-o OUT] "
        "[-q] [-- PROGRAM...]\n",
    .about =
        "Runs PROGRAM with ETCH_OUT (and ETCH_CATEGORIES) in its environment, so\n"
        "the etch SDK in it records the whole run, waits for it, then prints\n"
        "where the trace is and a short summary of what is in it, on stderr:\n"
        "stdout is the program's alone. Every process\n"
        "of the run that links libetch (children, programs they exec) records,\n"
        "and OUT holds them all: one trace of the command, each process on\n"
        "its own tracks (--per-process: a file each, OUT.PID.pftrace for all\n"
        "but the first). Ctrl-C ends the\n"
        "program with its trace written, and so does SIGPIPE (prog | head):\n"
        "neither is a failure. SIGINT, SIGTERM and SIGHUP sent to etch record\n"
        "are passed on to the program, which ends the same way, and etch\n"
        "reports as usual. A process that dies without writing\n"
        "its trace (SIGKILL, _exit(), exec, a crash) is named with the reason,\n"
        "as a warning: the trace holds every other process.\n"
        "A child made by fork() (without exec) records only if it calls\n"
        "etch_init() itself; one that does not and exits is named.\n",
    .opts = kRecordOpts,
    .more =
        "Exit status 1 if the program failed (other than by Ctrl-C, SIGPIPE\n"
        "or a signal etch passed on), a process of it could not trace or\n"
        "could not write its trace (a full disk), or no process wrote one.\n",
    .stop_at_operand = true,
};


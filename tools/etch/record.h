/*
 * record.h - etch record's steps, shared by its files: record.c (the
 * verb: its options, the output's plan, the service's run), record_run.c
 * (running the program: its environment, its signals, how it ended) and
 * record_procs.c (what its processes left: their status files, flight
 * files, the traces put together, the report).
 */
#ifndef ETCH_TOOLS_RECORD_H
#define ETCH_TOOLS_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli.h"
#include "record_service.h"

/* etch record --malloc's defaults: the trace streams to the file as it is
 * recorded, and a thread that finds the buffer full waits for the write
 * (fill=stall), so that no allocation or free is lost (docs/memory.md). */
#define ETCH_RECORD_MALLOC_BUFFER_KB "16384"
#define ETCH_RECORD_MALLOC_WRITE_PERIOD_MS "250"
typedef struct record_args {
  const char *out_path, *cats;
  rec_service_opts so;
  bool service; /* --system, or an option only the service has */
  bool console, malloc_trace, quiet;
  bool flight;       /* --flight */
  bool buffer_opt;   /* --buffer given */
  const char *fill; /* --ring, --discard */
  bool write_period;          /* --write-period given, or the default */
  uint32_t write_period_ms;
  /* The default write period (a trace into the store, kLiveWritePeriodMs)
   * rather than --write-period's; --no-live: none. */
  bool write_period_default, no_live;
  bool per_process; /* --per-process: a file for each process */
  uint32_t sample_hz; /* --sample[=HZ]: ETCH_SAMPLE; 0: not given */
} record_args;

/*
 * What became of one process's trace, from the status file libetch leaves
 * in the run directory (ETCH_RECORD_DIR): "tracing PID COMM\tPATH" once it
 * started, then "wrote BYTES PATH", "failed MESSAGE", "lost signal N" or
 * "signal N"; "error PID COMM\tMESSAGE" when it could not start;
 * "untraced PID COMM\tPPID" from a child the traced process PPID forked
 * that exited without tracing itself.
 */
typedef struct rec_proc {
  long pid;
  char comm[64];
  char *path;  /* the trace written, or the one it meant to write */
  char *meant; /* the path it first started tracing to (an exec'd program
                  has the same pid, so appends to the same status) */
  char *msg;   /* error or failure */
  long long bytes;
  bool started, wrote, failed, error;
  bool untraced; /* a fork child that exited without tracing */
  bool recovered; /* its trace came from its flight file */
  bool streamed;  /* its trace is what it wrote while it ran */
  bool merged;    /* its trace went into another's file (merge_processes) */
  size_t nmerged; /* the processes whose traces this file holds (> 1) */
  long forked_from;
  int lost_sig;
} rec_proc;

/* How the program ended (record_run.c). */
typedef struct rec_exit {
  pid_t pid;
  int status;     /* waitpid's */
  int err;        /* posix_spawnp's: not run */
  int passed_sig; /* the last signal etch record passed on to it */
  int got_sig;    /* the last one etch record received */
} rec_exit;

/* ---- record_run.c: running the program ---- */

/* `path` made absolute against etch record's own directory into out[cap];
 * false (errno set) when it cannot be. */
bool rec_absolute(const char *path, char *out, size_t cap);
/* --malloc's LD_PRELOAD value into out[cap]; false when the library is
 * not found. */
bool rec_malloc_lib(char *out, size_t cap);
/* A new run directory (absolute, under $TMPDIR) into dir[cap]; 0 or an
 * exit status, said. */
int rec_run_dir(char *dir, size_t cap);
/* The environment that makes the program's libetch record as asked:
 * ETCH_OUT, ETCH_RECORD_DIR and each option's variable. */
void rec_environment(const record_args *ra, const char *out_path,
                     const char *run_dir, const char *preload);
/* Runs argv (argv[0] found in PATH) and waits for it, passing on the
 * signals etch record receives. */
void rec_spawn(char **argv, rec_exit *ex);
/* Says how `prog` ended, when that is news; true when it failed. */
bool rec_report_exit(const char *prog, const rec_exit *ex);

/* ---- record_procs.c: what the processes left ---- */

/* A trace written into the trace store `store` ("": none) gets its
 * metadata now, so that the first etch ls need not read it. */
void rec_index_in_store(const char *store, const char *path);

/* Reads and removes the run directory, but for the flight files of
 * processes that died (rec_flights takes them); the processes by pid. */
rec_proc *rec_collect(const char *dir, size_t *n);
/* --write-period: the traces of processes that died while streaming. */
void rec_streamed(rec_proc *procs, size_t n);
/* --malloc's own streaming (no --write-period): the partial traces of
 * processes that ended without finishing them go. */
void rec_drop_partial(rec_proc *procs, size_t n);
/* --flight: the traces recovered from the flight files in `dir`, which
 * then goes. */
void rec_flights(const char *dir, rec_proc *procs, size_t n, bool compress);
void rec_procs_free(rec_proc *procs, size_t n);

/* What the processes did, said on stderr process by process (rec_report)
 * and then the traces they wrote, put together into `out_path` unless
 * each was asked for a file of its own, with a summary of each unless
 * quiet (rec_report_traces). */
typedef struct rec_tally {
  size_t nwrote, ncut, nfail;
} rec_tally;
rec_tally rec_report(rec_proc *procs, size_t n, const rec_exit *ex,
                     uint32_t write_period_ms);
int rec_report_traces(rec_proc *procs, size_t n, const char *prog,
                      const char *out_path, const record_args *ra,
                      const char *store, size_t nwrote);

/* ---- record.c ---- */


#endif /* ETCH_TOOLS_RECORD_H */

/*
 * recover.c - etch recover: the trace a process that died left in its
 * flight file (ETCH_FLIGHT, buffer/flight.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/containers.h"
#include "buffer/flight.h"
#include "cli.h"

typedef struct recover_args {
  const char *out_path;
  bool compress;
  bool quiet;
} recover_args;

/* The whole file, read (not mapped: a file cut short under us must not
 * fault). */
static int read_all(const char *path, uint8_t **data, size_t *len) {
  *data = NULL;
  *len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return runtime_error("%s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return runtime_error("%s: not a regular file", path);
  }
  /* Its size and a byte more, to see the end; more if it grew. */
  etch_vec v = {0};
  if (etch__vec_reserve(&v, (size_t)st.st_size + 1)) {
    close(fd);
    return runtime_error("%s: out of memory reading %zu bytes", path,
                         (size_t)st.st_size + 1);
  }
  for (;;) {
    if (v.len == v.cap && etch__vec_reserve(&v, v.cap)) {
      etch__vec_free(&v);
      close(fd);
      return runtime_error("%s: out of memory", path);
    }
    ssize_t r = read(fd, v.data + v.len, v.cap - v.len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      etch__vec_free(&v);
      close(fd);
      return runtime_error("%s: %s", path, strerror(e));
    }
    if (r == 0) break;
    v.len += (size_t)r;
  }
  close(fd);
  *data = v.data;
  *len = v.len;
  return 0;
}

/* NAME.flight -> NAME.pftrace, in the current directory. */
static char *default_out(const char *flight) {
  const char *base = strrchr(flight, '/');
  base = base ? base + 1 : flight;
  const char *dot = strrchr(base, '.');
  size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
  char *out = (char *)etch__malloc(n + 9);
  if (out) snprintf(out, n + 9, "%.*s.pftrace", (int)n, base);
  return out;
}

static void report(const char *path, const etch_flight_report *rep) {
  const etch_flight_header *h = &rep->header;
  uint64_t ring = (uint64_t)h->nchunks * h->chunk_size;
  fprintf(stderr,
          "etch recover: %s: pid %d (%s), etch %s, a %s of %llu KiB (%u "
          "chunks of %u KiB); %s\n",
          path, h->pid, h->process_name[0] ? h->process_name : "?",
          h->etch_version, h->fill ? "discard buffer" : "ring",
          (unsigned long long)(ring >> 10), h->nchunks, h->chunk_size >> 10,
          h->state == ETCH_FLIGHT_CLOSED ? "the process stopped recording"
                                         : "the process was recording");
  for (size_t i = 0; i < rep->nthreads; i++) {
    const etch_flight_thread *t = &rep->threads[i];
    if (t->tid)
      fprintf(stderr, "  thread %d%s%s: ", t->tid, t->name[0] ? " " : "",
              t->name);
    else
      fprintf(stderr, "  sequence %u: ", t->seq);
    fprintf(stderr, "%llu events in %llu chunks",
            (unsigned long long)t->events, (unsigned long long)t->chunks);
    if (t->open)
      fprintf(stderr, "; its newest chunk was being written: kept to its "
                      "last whole packet");
    if (t->first_chunk)
      fprintf(stderr, "; the %s overwrote its first %u chunks",
              h->fill ? "buffer" : "ring", t->first_chunk);
    if (t->missing_chunks)
      fprintf(stderr, "; %llu chunks between are gone",
              (unsigned long long)t->missing_chunks);
    if (t->undecodable)
      fprintf(stderr, "; %llu events left out (the names and descriptors "
                      "they refer to were overwritten)",
              (unsigned long long)t->undecodable);
    fputc('\n', stderr);
  }
  if (rep->bad_chunks)
    fprintf(stderr, "  %llu chunks in no valid state were left out\n",
            (unsigned long long)rep->bad_chunks);
  if (rep->lost_fragments)
    fprintf(stderr, "  %llu packets cut by missing or damaged chunks were "
                    "left out\n",
            (unsigned long long)rep->lost_fragments);
}

int cli_recover_file(const char *flight, const char *out, bool compress,
                     bool quiet, size_t *bytes) {
  uint8_t *data = NULL;
  size_t len = 0;
  *bytes = 0;
  int rc = read_all(flight, &data, &len);
  bool to_stdout = strcmp(out, "-") == 0;
  int fd = -1;
  if (!rc) {
    fd = to_stdout ? STDOUT_FILENO
                   : open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) rc = runtime_error("%s: %s", out, strerror(errno));
  }
  if (!rc) {
    etch_flight_report rep;
    uint8_t *none;
    int r = etch__flight_recover(data, len, compress, fd, &none, bytes, &rep);
    if (r) {
      rc = runtime_error("%s: %s", flight, etch_last_error());
    } else {
      if (!quiet) {
        report(flight, &rep);
        fprintf(stderr, "etch recover: wrote %s (%zu bytes)\n",
                to_stdout ? "the trace to stdout" : out, *bytes);
      }
      etch__flight_report_free(&rep);
    }
    if (!to_stdout && close(fd) != 0 && !rc)
      rc = runtime_error("%s: %s", out, strerror(errno));
    if (rc && !to_stdout) unlink(out);
  }
  free(data);
  return rc;
}

static int cmd_recover(int argc, char **argv) {
  recover_args ra = {0};
  opts o;
  int rc = 0;
  if (!cli_parse(&cli_recover, argc, argv, &ra, &o, &rc)) return rc;
  if (o.noperands != 1) {
    rc = usage_error(&cli_recover, "one flight file, please");
    opts_free(&o);
    return rc;
  }
  char *own_out = ra.out_path ? NULL : default_out(o.operands[0]);
  const char *out = ra.out_path ? ra.out_path : own_out;
  size_t bytes;
  if (!out) rc = runtime_error("out of memory");
  else rc = cli_recover_file(o.operands[0], out, ra.compress, ra.quiet, &bytes);
  free(own_out);
  opts_free(&o);
  return rc;
}

static const cli_opt kRecoverOpts[] = {
    {'o', "--output", "PATH",
     "the trace (default: the flight file's name with .pftrace, here;\n"
     "- for stdout)",
     CLI_STR(recover_args, out_path)},
    {0, "--compress", NULL, "deflate the trace", CLI_BOOL(recover_args, compress)},
    {'q', "--quiet", NULL, "say nothing but errors", CLI_BOOL(recover_args, quiet)},
    {0},
};

const command cli_recover = {
    .name = "recover",
    .fn = cmd_recover,
    .summary = "the trace a dead process left in its flight file",
    .synopsis = "etch recover [-q] [--compress] FLIGHT [-o OUT.pftrace]\n",
    .about =
        "A process recording with a flight file (ETCH_FLIGHT=PATH, the config\n"
        "option flight, etch record --flight) keeps its ring in that file. When\n"
        "it dies without writing its trace (SIGKILL, a crash, an OOM kill,\n"
        "_exit), the file holds every event it had recorded but the one each\n"
        "thread was writing: recover turns it into a trace and says, thread by\n"
        "thread, what it found and what was cut.\n",
    .opts = kRecoverOpts,
};

/*
 * common.c - what the verbs of the etch command line share: errors,
 * loading a trace.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/containers.h"
#include "cli.h"

/*
 * An error reading the trace at `path`, from the reader's message
 * ("PATH: offset N: what the bytes were", or without "PATH: "): bad data
 * is said to be a corrupt trace, in words, before the decoder's detail;
 * a file that is no trace at all already says so.
 */
int trace_error(const char *path, int status) {
  const char *msg = etch_last_error();
  size_t n = strlen(path);
  const char *detail = msg;
  if (!strncmp(msg, path, n) && !strncmp(msg + n, ": ", 2)) detail = msg + n + 2;
  if ((status != ETCH_EFORMAT && status != ETCH_ETRUNC) ||
      strncmp(detail, "offset ", 7) != 0 ||
      strstr(detail, "not a Perfetto protobuf trace"))
    return detail == msg ? runtime_error("%s: %s", path, msg)
                         : runtime_error("%s", msg);
  return runtime_error("%s: %s: %s", path,
                       status == ETCH_EFORMAT
                           ? "corrupt trace"
                           : "corrupt trace, or cut short",
                       detail);
}

/* ---- loading a trace ---- */

int check_readable(const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0)
    return runtime_error("%s: %s", path, strerror(errno));
  if (S_ISDIR(sb.st_mode)) return runtime_error("%s: is a directory", path);
  if (access(path, R_OK) != 0)
    return runtime_error("%s: %s", path, strerror(errno));
  /* An empty file reads as an empty trace; say that it is empty, as a
   * truncated copy or a trace never written often is. */
  if (S_ISREG(sb.st_mode) && sb.st_size == 0)
    fprintf(stderr, "etch: warning: %s is empty (0 bytes): no trace in it\n",
            path);
  return EXIT_OK;
}

bool g_strict;

int cli_set_strict(const command *cmd, const char *opt, const char *value,
                   void *args) {
  (void)cmd, (void)opt, (void)value, (void)args;
  g_strict = true;
  return 0;
}
bool g_no_cache;

int load(const char *path, const char *db_path, bool all_args,
         etch__db **out) {
  *out = NULL;
  int rc = check_readable(path);
  if (rc) return rc;
  if (etch__query_is_db_file(path)) {
    if (etch__db_open_existing(out, path, true) != ETCH_OK)
      return runtime_error("%s", etch_last_error());
    return EXIT_OK;
  }
  etch__db *db = NULL;
  etch__import_opts o = {.all_args = all_args,
                         .progress = isatty(STDERR_FILENO) != 0,
                         .allow_truncated = !g_strict,
                         .strict = g_strict,
                         .read_on = true};
  int st;
  if (!db_path && all_args && !g_no_cache && !g_strict) {
    /* The tables from the trace's cache (built by the first query). */
    st = etch__query_open_cached(path, NULL, &o, &db, NULL);
  } else {
    if (etch__db_open(&db, db_path) != ETCH_OK)
      return runtime_error("%s", etch_last_error());
    st = etch__query_import_file(db, NULL, path, &o, NULL);
  }
  if (st != ETCH_OK) {
    int err = trace_error(path, st);
    etch__db_close(db);
    if (db_path) unlink(db_path);
    return err;
  }
  *out = db;
  return EXIT_OK;
}

int print_whole(int (*report)(const char *path, FILE *out, const void *arg),
                const char *path, const void *arg, FILE *to) {
  etch_vec buf = {0};
  FILE *mem = etch__vec_file(&buf);
  if (!mem) return runtime_error("out of memory");
  int rc = 0;
  int st = report(path, mem, arg);
  if (st != ETCH_OK) rc = trace_error(path, st);
  if (fclose(mem) != 0 && !rc) rc = runtime_error("out of memory");
  if (!rc) fwrite(buf.data, 1, buf.len, to);
  etch__vec_free(&buf);
  return rc;
}

void cli_fmt_size(char *buf, size_t n, long long bytes) {
  if (bytes < 10 * 1024)
    snprintf(buf, n, "%lld bytes", bytes);
  else if (bytes < 10 * 1024 * 1024)
    snprintf(buf, n, "%.1f KiB", (double)bytes / 1024);
  else if (bytes < 10LL * 1024 * 1024 * 1024)
    snprintf(buf, n, "%.1f MiB", (double)bytes / (1024 * 1024));
  else
    snprintf(buf, n, "%.1f GiB", (double)bytes / (1024 * 1024 * 1024));
}

int cli_parse_age(const char *v, int64_t *ns) {
  uint64_t x;
  if (etch__parse_duration_ns(v, 0, 0, INT64_MAX, &x) != 0) return -1;
  *ns = (int64_t)x;
  return 0;
}

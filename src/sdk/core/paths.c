/*
 * paths.c - where a session's trace goes: an output spec's %p expanded,
 * the per-process name beside another process's trace, the flight file's
 * path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sdk/core/sdk.h"

char *etch__output_resolve(const char *spec, int *status) {
  *status = ETCH_OK;
  char pid[24];
  snprintf(pid, sizeof pid, "%ld", (long)getpid());
  size_t cap = strlen(spec) * 22 + 2;
  char *exp = (char *)etch__malloc(cap);
  if (!exp) {
    *status = ETCH_ENOMEM;
    return NULL;
  }
  size_t n = 0;
  for (const char *p = spec; *p; p++) {
    if (p[0] == '%' && p[1] == 'p') {
      memcpy(exp + n, pid, strlen(pid));
      n += strlen(pid);
      p++;
    } else if (p[0] == '%' && p[1] == '%') {
      exp[n++] = '%';
      p++;
    } else {
      exp[n++] = *p;
    }
  }
  exp[n] = '\0';
  char *abs = exp;
  if (exp[0] != '/') {
    char *cwd = getcwd(NULL, 0);
    if (!cwd) {
      *status = etch__error(ETCH_EIO,
                            "cannot write trace to '%s': current directory: %s",
                            exp, strerror(errno));
      free(exp);
      return NULL;
    }
    size_t len = strlen(cwd) + 1 + n + 1;
    abs = (char *)etch__malloc(len);
    if (abs) snprintf(abs, len, "%s/%s", cwd, exp);
    free(cwd);
    free(exp);
    if (!abs) {
      *status = ETCH_ENOMEM;
      return NULL;
    }
  }
  /* Checked now rather than after the whole run: a file that is there
   * must be writable unless it is replaced (regular files are written
   * under a temporary name and renamed, which needs the directory). */
  struct stat st;
  int bad = 0;
  if (stat(abs, &st) == 0 && !S_ISREG(st.st_mode)) {
    if (access(abs, W_OK) != 0) bad = errno;
  } else {
    char *d = etch__strdup(abs);
    if (!d) {
      free(abs);
      *status = ETCH_ENOMEM;
      return NULL;
    }
    const char *dir = dirname(d);
    if (stat(dir, &st) != 0)
      bad = errno;
    else if (!S_ISDIR(st.st_mode))
      bad = ENOTDIR;
    else if (access(dir, W_OK | X_OK) != 0)
      bad = errno;
    free(d);
  }
  if (bad) {
    *status = etch__error(ETCH_EIO, "cannot write trace to '%s': %s", abs,
                          strerror(bad));
    free(abs);
    return NULL;
  }
  return abs;
}

char *etch__output_per_pid(const char *path, long pid) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  const char *dot = strrchr(base, '.');
  if (!dot || dot == base) dot = base + strlen(base);
  size_t head = (size_t)(dot - path);
  size_t len = strlen(path) + 24;
  char *out = (char *)etch__malloc(len);
  if (out) snprintf(out, len, "%.*s.%ld%s", (int)head, path, pid, dot);
  return out;
}

int etch__flight_path(const char *spec, char **out) {
  *out = NULL;
  char *named = NULL;
  if (strcmp(spec, "1") == 0) {
    spec = "/dev/shm/etch-%p.flight";
  } else if (!strchr(spec, '/')) { /* a name: in /dev/shm */
    size_t len = strlen(spec) + 10;
    named = (char *)etch__malloc(len);
    if (!named) return ETCH_ENOMEM;
    snprintf(named, len, "/dev/shm/%s", spec);
    spec = named;
  }
  int rc;
  char *abs = etch__output_resolve(spec, &rc);
  free(named);
  if (!abs) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", etch_last_error());
    return etch__error(rc, "flight file: %s", msg);
  }
  *out = abs;
  return ETCH_OK;
}

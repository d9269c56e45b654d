/*
 * test_main.c - runs the TESTs registered in a test program, each in its own
 * forked child with a timeout, and prints "N passed, N failed".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

#define MAX_TESTS 1024

static struct {
  const char *name;
  etch_test_fn fn;
  const char *file;
} tests[MAX_TESTS];
static int ntests;
static char tmpdir[256];

void etch_test_register(const char *name, etch_test_fn fn, const char *file) {
  if (ntests == MAX_TESTS) {
    fprintf(stderr, "too many tests\n");
    abort();
  }
  tests[ntests].name = name;
  tests[ntests].fn = fn;
  tests[ntests].file = file;
  ntests++;
}

void etch_test_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "  FAIL %s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stderr);
  _exit(1);
}

__attribute__((weak)) const char *etch_last_error(void);
const char *etch_test_last_error(void) {
  return etch_last_error ? etch_last_error() : "";
}

const char *etch_test_tmpdir(void) {
  if (!tmpdir[0]) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/etch-test-XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
      perror("mkdtemp");
      _exit(1);
    }
  }
  return tmpdir;
}

uint8_t *etch_test_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  size_t r;
  while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
    n += r;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  *len = n;
  return buf;
}

static int rm_entry(const char *p, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p);
}

static int run_one(int i, int timeout_s) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    alarm((unsigned)timeout_s);
    /* etch query's cache of a trace's tables goes to the test's own
     * directory, never the user's. */
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache", etch_test_tmpdir());
    setenv("ETCH_CACHE_DIR", cache, 1);
    /* So does the trace store of an etch record without -o. */
    char store[300];
    snprintf(store, sizeof store, "%s/store", etch_test_tmpdir());
    setenv("ETCH_STORE", store, 1);
    tests[i].fn();
    /* ETCH_TEST_KEEP=1 keeps a passing test's files (a failing one's are
     * always kept), e.g. to open its traces in other tools. */
    const char *keep = getenv("ETCH_TEST_KEEP");
    if (tmpdir[0] && !(keep && *keep && strcmp(keep, "0")))
      nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  if (WIFSIGNALED(status))
    fprintf(stderr, "  %s: killed by signal %d%s\n", tests[i].name,
            WTERMSIG(status),
            WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
  return 1;
}

int main(int argc, char **argv) {
  int timeout_s = 60;
  const char *t = getenv("ETCH_TEST_TIMEOUT");
  if (t) timeout_s = atoi(t);
  int passed = 0, failed = 0;
  for (int i = 0; i < ntests; i++) {
    if (argc > 1) {
      bool want = false;
      for (int a = 1; a < argc; a++)
        if (strcmp(argv[a], tests[i].name) == 0) want = true;
      if (!want) continue;
    }
    int rc = run_one(i, timeout_s);
    printf("%s %s\n", rc ? "FAIL" : "ok  ", tests[i].name);
    if (rc)
      failed++;
    else
      passed++;
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

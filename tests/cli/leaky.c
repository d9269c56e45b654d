/*
 * leaky.c - an unmodified C program (no etch in it) for the memory-tracing
 * tests: it leaks a known set of blocks through each allocation call and
 * frees everything else, then forks a child that allocates and exits.
 *
 *   never freed: 3 x 100 (malloc), 2 x 3000 (calloc), 1 x 7 (realloc),
 *                1 x 64 (posix_memalign), 1 x 48 (aligned_alloc),
 *                1 x 40 (memalign)
 *
 * With an argument N, it also makes N more allocations of 16-79 bytes, each
 * freed, a quarter of them only after all N are made (a run larger than
 * etch's default buffer holds).
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Kept where the compiler must assume they are used. */
void *volatile keep[16];

int main(int argc, char **argv) {
  long extra = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
  for (int i = 0; i < 3; i++) keep[i] = malloc(100);
  for (int i = 0; i < 2; i++) keep[3 + i] = calloc(1, 3000);
  char *r = malloc(1);
  r = realloc(r, 7);
  keep[5] = r;
  void *p = NULL;
  if (posix_memalign(&p, 64, 64) != 0) return 1;
  keep[6] = p;
  keep[7] = aligned_alloc(16, 48);
  keep[8] = memalign(32, 40);
  /* Freed: every other size, through every call. */
  for (int i = 1; i <= 2000; i++) {
    void *a = malloc((size_t)i);
    char *b = calloc((size_t)i, 2);
    b[i] = 1; /* used: the pair stays */
    a = realloc(a, (size_t)i * 3);
    memset(a, 1, (size_t)i);
    free(a);
    free(b);
  }
  void **later = extra > 0 ? malloc((size_t)extra / 4 * sizeof *later + 1) : NULL;
  for (long i = 0, k = 0; i < extra; i++) {
    char *x = malloc(16 + (size_t)(i % 64));
    x[0] = 1;
    if (i % 4 == 0 && k < extra / 4)
      later[k++] = x;
    else
      free(x);
  }
  for (long k = 0; k < extra / 4; k++) free(later[k]);
  free(later);
  char *s = strdup("a string");
  free(s);
  pid_t c = fork();
  if (c == 0) {
    void *x = malloc(12345);
    free(x);
    _exit(0);
  }
  int st;
  if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st)) return 2;
  static const char done[] = "leaky: done\n";
  return write(1, done, sizeof done - 1) == sizeof done - 1 ? 0 : 3;
}

/*
 * test.h - etch's small test harness.
 *
 *   TEST(pb_varint_roundtrip) {
 *     ASSERT_EQ_U64(decode(encode(300)), 300);
 *   }
 *
 * Every TEST in a test program registers itself; main() (from test_main.c)
 * runs them all, or only those named on the command line, each in a forked
 * child with a timeout so a crash or hang fails one test, not the program.
 * The run ends with the line "N passed, N failed".
 */
#ifndef ETCH_TEST_H
#define ETCH_TEST_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*etch_test_fn)(void);
void etch_test_register(const char *name, etch_test_fn fn, const char *file);
void etch_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

#define TEST(name)                                                   \
  static void test_##name(void);                                     \
  __attribute__((constructor)) static void test_reg_##name(void) {   \
    etch_test_register(#name, test_##name, __FILE__);                \
  }                                                                  \
  static void test_##name(void)

#define ASSERT_TRUE(c)                                                     \
  do {                                                                     \
    if (!(c)) etch_test_fail(__FILE__, __LINE__, "expected true: %s", #c); \
  } while (0)
#define ASSERT_FALSE(c) ASSERT_TRUE(!(c))

#define ASSERT_EQ_INT(a, b)                                                   \
  do {                                                                        \
    long long a_ = (long long)(a), b_ = (long long)(b);                       \
    if (a_ != b_)                                                             \
      etch_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, a_, \
                     b_);                                                     \
  } while (0)
#define ASSERT_EQ_U64(a, b)                                                   \
  do {                                                                        \
    unsigned long long a_ = (unsigned long long)(a),                          \
                       b_ = (unsigned long long)(b);                          \
    if (a_ != b_)                                                             \
      etch_test_fail(__FILE__, __LINE__, "%s == %s: %llu != %llu", #a, #b,    \
                     a_, b_);                                                 \
  } while (0)
#define ASSERT_EQ_DBL(a, b)                                                 \
  do {                                                                      \
    double a_ = (double)(a), b_ = (double)(b);                              \
    if (a_ != b_)                                                           \
      etch_test_fail(__FILE__, __LINE__, "%s == %s: %.17g != %.17g", #a, #b, \
                     a_, b_);                                               \
  } while (0)
#define ASSERT_EQ_STR(a, b)                                                  \
  do {                                                                       \
    const char *a_ = (a), *b_ = (b);                                         \
    if (!a_ || !b_ || strcmp(a_, b_) != 0)                                   \
      etch_test_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b, \
                     a_ ? a_ : "(null)", b_ ? b_ : "(null)");                \
  } while (0)
#define ASSERT_OK(expr)                                                      \
  do {                                                                       \
    int rc_ = (expr);                                                        \
    if (rc_ != 0)                                                            \
      etch_test_fail(__FILE__, __LINE__, "%s failed: %d (%s)", #expr, rc_,   \
                     etch_test_last_error());                                \
  } while (0)
#define FAIL(...) etch_test_fail(__FILE__, __LINE__, __VA_ARGS__)

/* The detailed error message of the last etch call, if linked with etch. */
const char *etch_test_last_error(void);
/* A fresh empty directory for this test's files (removed on success). */
const char *etch_test_tmpdir(void);
/* Reads a whole file; returns NULL if missing. Caller frees. */
uint8_t *etch_test_read_file(const char *path, size_t *len);


/*
 * The console interceptor's lines (docs/interceptors.md) of the threads
 * whose process/thread column is `who` (or starts with it, when `who`
 * ends with '/'), each without its time and that column (padded to 24, then
 * one space), newline-terminated; with `no_durations` an end keeps only
 * "< name" (its duration varies). The caller frees the result.
 */
static inline char *etch_test_console_lines(const char *out, const char *who,
                                            bool no_durations) {
  size_t cap = strlen(out) + 1, n = 0, wl = strlen(who);
  bool prefix = wl && who[wl - 1] == '/';
  char *lines = (char *)calloc(1, cap);
  for (const char *l = out; *l;) {
    const char *e = strchr(l, '\n');
    const char *next = e ? e + 1 : l + strlen(l);
    if (!e) e = l + strlen(l);
    const char *p = l;
    while (p < e && *p == ' ') p++;
    while (p < e && *p != ' ') p++; /* the time */
    if (p < e) p++;
    const char *col = p;
    while (p < e && *p != ' ') p++; /* process/thread */
    size_t cl = (size_t)(p - col);
    bool match = prefix ? cl > wl && !strncmp(col, who, wl)
                        : cl == wl && !strncmp(col, who, wl);
    if (match) {
      if (cl < 24) p = col + 24;
      if (p < e) p++;
      const char *q = p;
      while (q < e && *q == ' ') q++;
      if (no_durations && q + 2 < e && q[0] == '<' && q[1] == ' ') {
        const char *sp = (const char *)memchr(q + 2, ' ', (size_t)(e - q - 2));
        if (sp) e = sp;
      }
      n += (size_t)snprintf(lines + n, cap - n, "%.*s\n", (int)(e - p), p);
    }
    l = next;
  }
  return lines;
}

#endif /* ETCH_TEST_H */

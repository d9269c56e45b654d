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

#endif /* ETCH_TEST_H */

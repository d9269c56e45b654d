/*
 * base_test.c - the helpers every part shares (src/base): UTF-8 sequences,
 * CSV fields, printf into the heap, the number, duration and size parsers,
 * the XDG directories with mkdir, and the byte vector's typed push and
 * stream; exact values, and each kind of bad input refused.
 */
#include "base/base.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/containers.h"
#include "test.h"

#define U8(s) ((const unsigned char *)(s))

TEST(base_utf8_seq) {
  ASSERT_EQ_U64(etch__utf8_seq(U8("a"), 1), 1);
  ASSERT_EQ_U64(etch__utf8_seq(U8("\xc3\xa9"), 2), 2);        /* é */
  ASSERT_EQ_U64(etch__utf8_seq(U8("\xe2\x82\xac"), 3), 3);    /* € */
  ASSERT_EQ_U64(etch__utf8_seq(U8("\xf0\x9f\x98\x80"), 4), 4); /* U+1F600 */
  ASSERT_EQ_U64(etch__utf8_seq(U8("\xf4\x8f\xbf\xbf"), 4), 4); /* U+10FFFF */
  /* Cut short, stray continuation, overlong, surrogate, past U+10FFFF. */
  ASSERT_EQ_U64(etch__utf8_seq(U8("\xe2\x82\xac"), 2), 0);
  ASSERT_EQ_U64(etch__utf8_seq(U8("\x80"), 1), 0);
  ASSERT_EQ_U64(etch__utf8_seq(U8("\xc0\xaf"), 2), 0);
  ASSERT_EQ_U64(etch__utf8_seq(U8("\xe0\x80\xaf"), 3), 0);
  ASSERT_EQ_U64(etch__utf8_seq(U8("\xf0\x80\x80\xaf"), 4), 0);
  ASSERT_EQ_U64(etch__utf8_seq(U8("\xed\xa0\x80"), 3), 0);
  ASSERT_EQ_U64(etch__utf8_seq(U8("\xf4\x90\x80\x80"), 4), 0);
  ASSERT_EQ_U64(etch__utf8_seq(U8("\xc3\x28"), 2), 0);
  ASSERT_EQ_U64(etch__utf8_seq(U8("\xff"), 1), 0);
}

static char *csv(const char *s) {
  etch_vec v = {0};
  FILE *f = etch__vec_file(&v);
  if (!f) return NULL;
  etch__csv_field(f, s, strlen(s));
  fclose(f);
  if (etch__vec_cstr(&v)) return NULL;
  return (char *)v.data;
}

TEST(base_csv_field) {
  static const char *cases[][2] = {
      {"plain", "plain"},           {"", ""},
      {"a,b", "\"a,b\""},           {"say \"hi\"", "\"say \"\"hi\"\"\""},
      {"two\nlines", "\"two\nlines\""}, {"cr\r", "\"cr\r\""},
      {"tab\tand space", "tab\tand space"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *got = csv(cases[i][0]);
    ASSERT_TRUE(got != NULL);
    ASSERT_EQ_STR(got, cases[i][1]);
    free(got);
  }
}

TEST(base_aprintf_and_vec_file) {
  char *s = etch__aprintf("%s-%d-%05.1f", "x", 42, 2.5);
  ASSERT_EQ_STR(s, "x-42-002.5");
  free(s);
  s = etch__aprintf("%s", "");
  ASSERT_EQ_STR(s, "");
  free(s);
  s = etch__strndup("abcdef", 3);
  ASSERT_EQ_STR(s, "abc");
  free(s);
  s = etch__strndup("ab", 10);
  ASSERT_EQ_STR(s, "ab");
  free(s);
  /* A stream into a vector: past the first growth, and past stdio's
   * own buffer. */
  etch_vec v = {0};
  FILE *f = etch__vec_file(&v);
  ASSERT_TRUE(f != NULL);
  for (int i = 0; i < 3000; i++) fprintf(f, "%04d,", i);
  ASSERT_EQ_INT(fclose(f), 0);
  ASSERT_EQ_U64(v.len, 15000);
  ASSERT_TRUE(!memcmp(v.data, "0000,0001,", 10));
  ASSERT_TRUE(!memcmp(v.data + 14995, "2999,", 5));
  etch__vec_free(&v);
  ASSERT_TRUE(v.data == NULL && v.len == 0 && v.cap == 0);
  /* Out of memory: NULL with the error set; the stream's write fails. */
  etch__fault_arm(1, true);
  s = etch__aprintf("%d", 1);
  etch__fault_disarm();
  ASSERT_TRUE(s == NULL);
  ASSERT_TRUE(strstr(etch_last_error(), "out of memory") != NULL);
  f = etch__vec_file(&v);
  ASSERT_TRUE(f != NULL);
  etch__fault_arm(1, true);
  fprintf(f, "%s", "some bytes");
  int rc = fclose(f);
  etch__fault_disarm();
  ASSERT_EQ_INT(rc, EOF);
  etch__vec_free(&v);
}

TEST(base_vec_typed) {
  typedef struct pair {
    int a;
    double b;
  } pair;
  etch_vec v = {0};
  for (int i = 0; i < 1000; i++)
    ASSERT_OK(ETCH_VEC_PUSH(&v, pair, {.a = i, .b = i * 0.5}));
  ASSERT_EQ_U64(ETCH_VEC_COUNT(&v, pair), 1000);
  ASSERT_EQ_INT(ETCH_VEC_AT(&v, pair)[999].a, 999);
  ASSERT_EQ_DBL(ETCH_VEC_AT(&v, pair)[10].b, 5.0);
  ASSERT_OK(ETCH_VEC_PUSH(&v, pair, ETCH_VEC_AT(&v, pair)[3]));
  ASSERT_EQ_INT(ETCH_VEC_AT(&v, pair)[1000].a, 3);
  ASSERT_OK(ETCH_VEC_RESERVE(&v, pair, 5000));
  ASSERT_TRUE(v.cap - v.len >= 5000 * sizeof(pair));
  ASSERT_EQ_INT(ETCH_VEC_RESERVE(&v, pair, SIZE_MAX / 2), ETCH_ENOMEM);
  etch__vec_free(&v);
}

TEST(base_parse_numbers) {
  int64_t i;
  uint64_t u;
  ASSERT_OK(etch__parse_i64("-42", -100, 100, &i));
  ASSERT_EQ_INT(i, -42);
  ASSERT_OK(etch__parse_i64("-9223372036854775808", INT64_MIN, 0, &i));
  ASSERT_TRUE(i == INT64_MIN);
  ASSERT_OK(etch__parse_i64("9223372036854775807", 0, INT64_MAX, &i));
  ASSERT_TRUE(i == INT64_MAX);
  i = 7;
  ASSERT_EQ_INT(etch__parse_i64("9223372036854775808", 0, INT64_MAX, &i), -1);
  ASSERT_EQ_INT(etch__parse_i64("-1", 0, 10, &i), -1); /* no sign asked */
  ASSERT_EQ_INT(etch__parse_i64("+1", -10, 10, &i), -1);
  ASSERT_EQ_INT(etch__parse_i64("11", -10, 10, &i), -1);
  ASSERT_EQ_INT(etch__parse_i64("", -10, 10, &i), -1);
  ASSERT_EQ_INT(etch__parse_i64(" 1", -10, 10, &i), -1);
  ASSERT_EQ_INT(etch__parse_i64("1x", -10, 10, &i), -1);
  ASSERT_EQ_INT(etch__parse_i64("-", -10, 10, &i), -1);
  ASSERT_EQ_INT(i, 7); /* untouched */
  ASSERT_OK(etch__parse_uint("65535", 0, 65535, &u));
  ASSERT_EQ_U64(u, 65535);
  ASSERT_EQ_INT(etch__parse_uint("65536", 0, 65535, &u), -1);
  ASSERT_EQ_INT(etch__parse_uint("0", 1, 9, &u), -1);
  ASSERT_EQ_INT(etch__parse_uint("-1", 0, UINT64_MAX, &u), -1);
  ASSERT_EQ_INT(etch__parse_uint("18446744073709551616", 0, UINT64_MAX, &u),
                -1);
  ASSERT_EQ_INT(etch__parse_uint(NULL, 0, 1, &u), -1);
}

TEST(base_parse_duration) {
  static const struct {
    const char *text;
    uint64_t unit, want;
  } ok[] = {{"10s", 0, 10000000000ull},
            {"500ms", 0, 500000000ull},
            {"2m", 0, 120000000000ull},
            {"1h", 0, 3600000000000ull},
            {"1d", 0, 86400000000000ull},
            {"2w", 0, 1209600000000000ull},
            {"7us", 0, 7000},
            {"9ns", 0, 9},
            {"1.5s", 0, 1500000000ull},
            {"0.001ms", 0, 1000},
            {"0.5ns", 0, 0},
            {"250", 1000000, 250000000ull},
            {"1.25", 1000000, 1250000}};
  for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
    uint64_t ns = 1;
    if (etch__parse_duration_ns(ok[k].text, ok[k].unit, 0, UINT64_MAX, &ns))
      FAIL("'%s' refused", ok[k].text);
    ASSERT_EQ_U64(ns, ok[k].want);
  }
  static const char *bad[] = {"",    "s",   "10",  "1.s", ".5s", "-1s",
                              "+1s", "1 s", "1S",  "1sec", "1e3s",
                              "99999999999999999999s", "30000000w"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    uint64_t ns = 77;
    if (!etch__parse_duration_ns(bad[k], 0, 0, UINT64_MAX, &ns))
      FAIL("'%s' taken", bad[k]);
    ASSERT_EQ_U64(ns, 77);
  }
  uint64_t ns;
  ASSERT_EQ_INT(etch__parse_duration_ns("0s", 0, 1, UINT64_MAX, &ns), -1);
  ASSERT_EQ_INT(etch__parse_duration_ns("2h", 0, 0, 3600000000000ull, &ns),
                -1);
}

TEST(base_parse_size) {
  static const struct {
    const char *text;
    uint64_t unit, want;
  } ok[] = {{"64MB", 0, 64ull << 20}, {"512KB", 0, 512ull << 10},
            {"1GB", 0, 1ull << 30},   {"2g", 0, 2ull << 30},
            {"3MiB", 0, 3ull << 20},  {"1tb", 0, 1ull << 40},
            {"100b", 0, 100},         {"1.5k", 0, 1536},
            {"8192", 1024, 8192ull << 10}, {"4096", 1, 4096}};
  for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++) {
    uint64_t b = 1;
    if (etch__parse_size(ok[k].text, ok[k].unit, 0, UINT64_MAX, &b))
      FAIL("'%s' refused", ok[k].text);
    ASSERT_EQ_U64(b, ok[k].want);
  }
  static const char *bad[] = {"", "MB", "64", "64 MB", "-1k", "1kx", "1.k",
                              "16777216tb"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    uint64_t b = 77;
    if (!etch__parse_size(bad[k], 0, 0, UINT64_MAX, &b))
      FAIL("'%s' taken", bad[k]);
    ASSERT_EQ_U64(b, 77);
  }
  uint64_t b;
  ASSERT_EQ_INT(etch__parse_size("3k", 0, 4096, UINT64_MAX, &b), -1);
}

/* A fresh directory of the test's own. */
static void scratch(char *buf, size_t n) {
  snprintf(buf, n, "%s/mkdirs-XXXXXX", etch_test_tmpdir());
  ASSERT_TRUE(mkdtemp(buf) != NULL);
}

TEST(base_xdg_dir) {
  char *home = getenv("HOME") ? etch__strdup(getenv("HOME")) : NULL;
  char *xdg = getenv("XDG_CACHE_HOME") ? etch__strdup(getenv("XDG_CACHE_HOME"))
                                       : NULL;
  char buf[256];
  setenv("HOME", "/h", 1);
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  ASSERT_OK(etch__xdg_dir("XDG_CACHE_HOME", ".cache", "", "cache", buf,
                          sizeof buf));
  ASSERT_EQ_STR(buf, "/x/cache/etch");
  /* A relative XDG path is ignored, as the spec says; so is an empty one. */
  setenv("XDG_CACHE_HOME", "rel/cache", 1);
  ASSERT_OK(etch__xdg_dir("XDG_CACHE_HOME", ".cache", "/sub", "cache", buf,
                          sizeof buf));
  ASSERT_EQ_STR(buf, "/h/.cache/etch/sub");
  setenv("XDG_CACHE_HOME", "", 1);
  ASSERT_OK(etch__xdg_dir("XDG_CACHE_HOME", ".cache", "", "cache", buf,
                          sizeof buf));
  ASSERT_EQ_STR(buf, "/h/.cache/etch");
  ASSERT_EQ_INT(etch__xdg_dir("XDG_CACHE_HOME", ".cache", "", "cache", buf, 8),
                ETCH_EINVAL);
  unsetenv("HOME");
  ASSERT_EQ_INT(etch__xdg_dir("XDG_CACHE_HOME", ".cache", "", "the cache",
                              buf, sizeof buf),
                ETCH_EINVAL);
  ASSERT_EQ_STR(etch_last_error(), "no the cache: HOME is not set");
  if (home) setenv("HOME", home, 1);
  if (xdg) setenv("XDG_CACHE_HOME", xdg, 1);
  else unsetenv("XDG_CACHE_HOME");
  free(home);
  free(xdg);
}

TEST(base_mkdirs) {
  char root[512], path[600];
  scratch(root, sizeof root);
  snprintf(path, sizeof path, "%s/a/b/c", root);
  mode_t old = umask(0);
  int rc = etch__mkdirs(path, "dir");
  ASSERT_OK(rc);
  ASSERT_OK(etch__mkdirs(path, "dir")); /* an existing one is fine */
  umask(old);
  struct stat st;
  ASSERT_OK(stat(path, &st));
  ASSERT_EQ_INT(st.st_mode & 0777, 0700);
  snprintf(path, sizeof path, "%s/a", root);
  ASSERT_OK(stat(path, &st));
  ASSERT_EQ_INT(st.st_mode & 0777, 0700);
  /* Under a file: an error naming what and where. */
  char file[600], under[700];
  snprintf(file, sizeof file, "%s/f", root);
  FILE *f = fopen(file, "w");
  ASSERT_TRUE(f != NULL);
  fclose(f);
  snprintf(under, sizeof under, "%s/x", file);
  ASSERT_EQ_INT(etch__mkdirs(under, "cache directory"), ETCH_EIO);
  ASSERT_TRUE(strstr(etch_last_error(), "cache directory ") != NULL);
  ASSERT_TRUE(strstr(etch_last_error(), "/f/x: Not a directory") != NULL);
  ASSERT_EQ_INT(etch__mkdirs("", "dir"), ETCH_EINVAL);
  unlink(file);
  static const char *dirs[] = {"/a/b/c", "/a/b", "/a", ""};
  for (size_t k = 0; k < 4; k++) {
    snprintf(path, sizeof path, "%s%s", root, dirs[k]);
    rmdir(path);
  }
}

/*
 * store_cli_test.c - etch ls, etch rm and etch diff run as programs, in a
 * private trace store (ETCH_STORE): traces recorded into the store are
 * listed with the counts `etch stats` gives for the same files, in the
 * table and in --json (which must parse); --older-than and rm remove what
 * they should and nothing else, names leading out of the store are
 * refused; a corrupt file is listed with its error; diff of two traces
 * with known slices gives the exact counts and totals, sorted by change.
 *
 * ETCH_BIN is the built etch, ETCH_RECORDEE a program instrumented with
 * libetch (tests/cli/recordee.c: one "work" slice holding N "step" slices).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "json_parse.h"
#include "test.h"
#include "trace_build.h"

extern char **environ;

typedef struct run_result {
  int status; /* exit status, or 128 + signal */
  char *out, *err;
} run_result;

static char *slurp(const char *path) {
  size_t len;
  char *s = (char *)etch_test_read_file(path, &len);
  if (!s) return strdup("");
  s = realloc(s, len + 1);
  s[len] = '\0';
  return s;
}

static run_result run(const char *const *args) {
  const char *dir = etch_test_tmpdir();
  char out_path[512], err_path[512];
  snprintf(out_path, sizeof out_path, "%s/stdout", dir);
  snprintf(err_path, sizeof err_path, "%s/stderr", dir);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path,
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path,
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  char *argv[32];
  int n = 0;
  argv[n++] = (char *)ETCH_BIN;
  for (; args[n - 1] && n < 31; n++) argv[n] = (char *)args[n - 1];
  argv[n] = NULL;
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) != 0)
    FAIL("cannot run %s", argv[0]);
  posix_spawn_file_actions_destroy(&fa);
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  run_result r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  return r;
}

#define RUN(...) run((const char *const[]){__VA_ARGS__, NULL})

static void done(run_result *r) {
  free(r->out);
  free(r->err);
}

#define ASSERT_CONTAINS(hay, needle)                    \
  do {                                                  \
    if (!strstr((hay), (needle)))                       \
      FAIL("expected \"%s\" in:\n%s", (needle), (hay)); \
  } while (0)

/* A private store in the test's directory, in ETCH_STORE. */
static const char *use_store(void) {
  static char dir[400];
  snprintf(dir, sizeof dir, "%s/store", etch_test_tmpdir());
  setenv("ETCH_STORE", dir, 1);
  return dir;
}

static const char *in(const char *dir, const char *name) {
  static char buf[8][1200];
  static int k;
  char *p = buf[k++ % 8];
  snprintf(p, 1200, "%s/%s", dir, name);
  return p;
}

static const char *meta_of(const char *dir, const char *name) {
  static char buf[1200];
  snprintf(buf, sizeof buf, "%s/.meta/%s", dir, name);
  return buf;
}

static bool exists(const char *path) {
  struct stat sb;
  return lstat(path, &sb) == 0;
}

/* The names of the store's traces (not its dotfiles), sorted, joined by
 * spaces. */
static char *store_names(const char *dir) {
  struct dirent **de;
  int n = scandir(dir, &de, NULL, alphasort);
  char *s = calloc(1, 4096);
  for (int i = 0; i < n; i++) {
    if (de[i]->d_name[0] != '.') {
      if (*s) strcat(s, " ");
      strcat(s, de[i]->d_name);
    }
    free(de[i]);
  }
  if (n >= 0) free(de);
  return s;
}

static void write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) FAIL("cannot write %s: %s", path, strerror(errno));
  if (n && fwrite(p, 1, n, f) != n) FAIL("short write to %s", path);
  fclose(f);
}

/* Splits a table row into its cells: runs of two spaces or more part
 * them (the start column holds one space). Returns the count. */
static int cells(const char *line, char out[][256], int max) {
  int n = 0;
  const char *p = line;
  while (*p == ' ') p++;
  while (*p && n < max) {
    const char *e = strstr(p, "  ");
    size_t len = e ? (size_t)(e - p) : strlen(p);
    snprintf(out[n++], 256, "%.*s", (int)len, p);
    if (!e) break;
    p = e;
    while (*p == ' ') p++;
  }
  return n;
}

/* Line `k` (from 0) of `text`, in a static buffer; "" past the end. */
static const char *line_at(const char *text, int k) {
  static char buf[4096];
  const char *p = text;
  for (int i = 0; i < k && p; i++) {
    p = strchr(p, '\n');
    if (p) p++;
  }
  if (!p) return "";
  size_t len = strcspn(p, "\n");
  snprintf(buf, sizeof buf, "%.*s", (int)len, p);
  return buf;
}

static int count_lines(const char *text) {
  int n = 0;
  for (const char *p = text; *p; p++) n += *p == '\n';
  return n;
}

/* `etch stats --json` of a trace, parsed: its "trace" object. */
static jp *stats_of(const char *path) {
  run_result r = RUN("stats", "--json", path);
  if (r.status != 0) FAIL("etch stats %s: %s", path, r.err);
  jp *v = jp_parse(r.out);
  if (!v) FAIL("etch stats --json does not parse:\n%s", r.out);
  done(&r);
  return v;
}

/* YYYYmmdd-HHMMSS-etch_cli_recordee[-N].pftrace */
static bool recordee_name(const char *s) {
  for (int i = 0; i < 15; i++)
    if (i == 8 ? s[i] != '-' : (s[i] < '0' || s[i] > '9')) return false;
  const char *rest = s + 15;
  if (!strncmp(rest, "-etch_cli_recordee.pftrace", 27)) return true;
  if (strncmp(rest, "-etch_cli_recordee-", 19) != 0) return false;
  rest += 19;
  if (*rest < '2' || *rest > '9') return false;
  while (*rest >= '0' && *rest <= '9') rest++;
  return !strcmp(rest, ".pftrace");
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

TEST(ls_lists_recorded_traces_with_the_counts_of_stats) {
  const char *dir = use_store();
  run_result r = RUN("ls");
  ASSERT_EQ_INT(r.status, 0);
  char want[600];
  snprintf(want, sizeof want, "%s: 0 traces, 0 bytes\n", dir);
  ASSERT_EQ_STR(r.out, want); /* no store yet: empty */
  done(&r);

  int64_t t0 = now_ns();
  /* -q: the first ls computes the metadata; without: etch record does. */
  r = RUN("record", "-q", "--", ETCH_RECORDEE, "3");
  if (r.status != 0) FAIL("etch record: %s", r.err);
  done(&r);
  char *first = store_names(dir);
  ASSERT_FALSE(exists(in(dir, ".meta")));
  r = RUN("record", "--", ETCH_RECORDEE, "5");
  if (r.status != 0) FAIL("etch record: %s", r.err);
  done(&r);
  int64_t t1 = now_ns();
  char *both = store_names(dir);
  /* Two traces, named by time and program. */
  char *second = NULL;
  {
    char *sp = strchr(both, ' ');
    if (!sp) FAIL("expected two traces in the store: %s", both);
    *sp = '\0';
    second = !strcmp(both, first) ? sp + 1 : both;
    if (!strcmp(both, first)) {
    } else if (strcmp(sp + 1, first) != 0) {
      FAIL("the first trace %s is gone: %s %s", first, both, sp + 1);
    }
  }
  const char *names[2] = {second, first}; /* newest first */
  for (int i = 0; i < 2; i++)
    if (!recordee_name(names[i])) FAIL("unexpected name %s", names[i]);
  ASSERT_TRUE(exists(in(dir, ".meta")));
  ASSERT_TRUE(exists(meta_of(dir, second))); /* cached by record */
  ASSERT_FALSE(exists(meta_of(dir, first)));

  jp *st[2] = {stats_of(in(dir, names[0])), stats_of(in(dir, names[1]))};
  /* The table: a summary line, the header, dashes, a row per trace. */
  r = RUN("ls");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_INT(count_lines(r.out), 5);
  struct stat sb0, sb1;
  ASSERT_TRUE(stat(in(dir, names[0]), &sb0) == 0);
  ASSERT_TRUE(stat(in(dir, names[1]), &sb1) == 0);
  snprintf(want, sizeof want, "%s: 2 traces, %lld bytes", dir,
           (long long)(sb0.st_size + sb1.st_size));
  ASSERT_EQ_STR(line_at(r.out, 0), want);
  char c[10][256];
  ASSERT_EQ_INT(cells(line_at(r.out, 1), c, 10), 8);
  ASSERT_EQ_STR(c[0], "name");
  ASSERT_EQ_STR(c[1], "start");
  ASSERT_EQ_STR(c[3], "processes");
  ASSERT_EQ_STR(c[4], "threads");
  ASSERT_EQ_STR(c[5], "events");
  ASSERT_EQ_STR(c[7], "data lost");
  for (int i = 0; i < 2; i++) {
    const jp *tr = jp_get(st[i], "trace");
    ASSERT_EQ_INT(cells(line_at(r.out, 3 + i), c, 10), 8);
    ASSERT_EQ_STR(c[0], names[i]);
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)jp_int(tr, "processes"));
    ASSERT_EQ_STR(c[3], num);
    snprintf(num, sizeof num, "%lld", (long long)jp_int(tr, "threads"));
    ASSERT_EQ_STR(c[4], num);
    snprintf(num, sizeof num, "%lld", (long long)jp_int(tr, "events"));
    ASSERT_EQ_STR(c[5], num);
    snprintf(num, sizeof num, "%lld bytes",
             (long long)(i ? sb1.st_size : sb0.st_size));
    ASSERT_EQ_STR(c[6], num);
    ASSERT_EQ_STR(c[7], "-");
  }
  /* What the recordee wrote: 1 + N slices, a begin and an end each. */
  ASSERT_EQ_INT(jp_int(jp_get(st[0], "trace"), "events"), 12);
  ASSERT_EQ_INT(jp_int(jp_get(st[1], "trace"), "events"), 8);
  ASSERT_EQ_INT(jp_int(jp_get(st[0], "trace"), "threads"), 1);
  ASSERT_EQ_INT(jp_int(jp_get(st[0], "trace"), "processes"), 1);
  done(&r);
  ASSERT_TRUE(exists(meta_of(dir, first))); /* cached by ls */

  /* --json: the same numbers, and it parses. */
  r = RUN("ls", "--json");
  ASSERT_EQ_INT(r.status, 0);
  jp *v = jp_parse(r.out);
  if (!v) FAIL("etch ls --json does not parse:\n%s", r.out);
  ASSERT_EQ_INT(v->kind, JP_ARR);
  ASSERT_EQ_U64(v->n, 2);
  for (int i = 0; i < 2; i++) {
    const jp *e = v->items[i], *tr = jp_get(st[i], "trace");
    ASSERT_EQ_STR(jp_get(e, "name")->str, names[i]);
    ASSERT_EQ_STR(jp_get(e, "path")->str, in(dir, names[i]));
    ASSERT_EQ_INT(jp_int(e, "size"), i ? sb1.st_size : sb0.st_size);
    ASSERT_EQ_INT(jp_int(e, "events"), jp_int(tr, "events"));
    ASSERT_EQ_INT(jp_int(e, "slices"), jp_int(tr, "slices"));
    ASSERT_EQ_INT(jp_int(e, "threads"), jp_int(tr, "threads"));
    ASSERT_EQ_INT(jp_int(e, "processes"), jp_int(tr, "processes"));
    ASSERT_EQ_INT(jp_int(e, "duration"), jp_int(tr, "duration_ns"));
    ASSERT_EQ_INT(jp_get(e, "start_from_trace")->kind, JP_BOOL);
    ASSERT_TRUE(jp_get(e, "start_from_trace")->b);
    int64_t start = jp_int(e, "start");
    if (start < t0 || start > t1)
      FAIL("start %lld not within the recording [%lld, %lld]",
           (long long)start, (long long)t0, (long long)t1);
    ASSERT_EQ_INT(jp_get(e, "data_loss")->kind, JP_ARR);
    ASSERT_EQ_U64(jp_get(e, "data_loss")->n, 0);
    ASSERT_EQ_INT(jp_get(e, "error")->kind, JP_NULL);
  }
  ASSERT_TRUE(jp_int(v->items[0], "start") > jp_int(v->items[1], "start"));
  jp_free(v);
  jp_free(st[0]);
  jp_free(st[1]);
  done(&r);
  free(first);
  free(both);
}

/* A small trace: `n` slices "s" of 100 ns on one thread. */
static void small_trace(const char *path, int n) {
  tb t;
  tb_init(&t);
  tb_process(&t, 1, 1, 10, "app");
  tb_thread(&t, 1, 2, 10, 10, "main");
  for (int i = 0; i < n; i++) {
    tb_event(&t, 1, 1000 + 200 * i, 2, ETCH_TE_TYPE_SLICE_BEGIN, "c", "s");
    tb_event(&t, 1, 1100 + 200 * i, 2, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  }
  write_file(path, tb_data(&t), tb_len(&t));
  tb_free(&t);
}

static void set_age(const char *path, int64_t seconds_ago) {
  time_t t = time(NULL) - (time_t)seconds_ago;
  struct timespec ts[2] = {{t, 0}, {t, 0}};
  if (utimensat(AT_FDCWD, path, ts, 0) != 0)
    FAIL("utimensat %s: %s", path, strerror(errno));
}

TEST(ls_older_than_and_rm_remove_exactly_what_they_should) {
  const char *dir = use_store();
  mkdir(dir, 0755);
  small_trace(in(dir, "old.pftrace"), 1);
  small_trace(in(dir, "mid.pftrace"), 2);
  small_trace(in(dir, "new.pftrace"), 3);
  set_age(in(dir, "old.pftrace"), 10 * 86400);
  set_age(in(dir, "mid.pftrace"), 2 * 86400);
  /* Outside the store, beside it: must survive every rm below. */
  const char *outside = in(etch_test_tmpdir(), "outside.pftrace");
  small_trace(outside, 1);

  run_result r = RUN("ls", "--older-than", "7d", "--json");
  ASSERT_EQ_INT(r.status, 0);
  jp *v = jp_parse(r.out);
  if (!v) FAIL("does not parse:\n%s", r.out);
  ASSERT_EQ_U64(v->n, 1);
  ASSERT_EQ_STR(jp_get(v->items[0], "name")->str, "old.pftrace");
  ASSERT_EQ_INT(jp_int(v->items[0], "events"), 2);
  jp_free(v);
  done(&r);
  r = RUN("ls", "--older-than", "1d");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_INT(count_lines(r.out), 5);
  done(&r);
  r = RUN("ls", "--older-than", "7");
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "'7' is not an age");
  done(&r);

  /* A dry run removes nothing. */
  r = RUN("rm", "-n", "--older-than", "1d");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "would remove mid.pftrace (107 bytes)\n"
                       "would remove old.pftrace (73 bytes)\n"
                       "would remove 2 traces (180 bytes)\n");
  done(&r);
  char *names = store_names(dir);
  ASSERT_EQ_STR(names, "mid.pftrace new.pftrace old.pftrace");
  free(names);

  r = RUN("rm", "--older-than", "7d");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "removed old.pftrace (73 bytes)\n"
                       "removed 1 trace (73 bytes)\n");
  done(&r);
  names = store_names(dir);
  ASSERT_EQ_STR(names, "mid.pftrace new.pftrace");
  free(names);

  /* Names that lead out of the store are refused; nothing is removed. */
  static const char *const bad[] = {"../outside.pftrace", "/etc/passwd",
                                    ".meta", "..", "a/b"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    r = RUN("rm", "mid.pftrace", bad[i]);
    ASSERT_EQ_INT(r.status, 2);
    ASSERT_CONTAINS(r.err, "is not the name of a trace in the store");
    done(&r);
  }
  ASSERT_TRUE(exists(outside));
  /* One name not in the store: nothing is removed. */
  r = RUN("rm", "mid.pftrace", "nothere.pftrace");
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.err, "no trace 'nothere.pftrace' in the store");
  done(&r);
  names = store_names(dir);
  ASSERT_EQ_STR(names, "mid.pftrace new.pftrace");
  free(names);
  r = RUN("rm");
  ASSERT_EQ_INT(r.status, 2);
  done(&r);
  r = RUN("rm", "--older-than", "1d", "new.pftrace");
  ASSERT_EQ_INT(r.status, 2);
  done(&r);

  r = RUN("rm", "mid.pftrace");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "removed mid.pftrace (107 bytes)\n");
  done(&r);
  ASSERT_FALSE(exists(meta_of(dir, "mid.pftrace")));
  r = RUN("ls", "--json");
  v = jp_parse(r.out);
  if (!v) FAIL("does not parse:\n%s", r.out);
  ASSERT_EQ_U64(v->n, 1);
  ASSERT_EQ_STR(jp_get(v->items[0], "name")->str, "new.pftrace");
  jp_free(v);
  done(&r);
  ASSERT_TRUE(exists(outside));
}

TEST(ls_lists_a_corrupt_trace_with_its_error_or_loss) {
  const char *dir = use_store();
  mkdir(dir, 0755);
  small_trace(in(dir, "good.pftrace"), 2);
  /* A packet, then one whose first field's tag never ends (inside the
   * packet, not at the end of the file), then another packet. */
  static const uint8_t bad[] = {0x0a, 0x02, 0x08, 0x01, 0x0a, 0x03,
                                0xff, 0xff, 0xff, 0x0a, 0x00};
  write_file(in(dir, "bad.pftrace"), bad, sizeof bad);
  set_age(in(dir, "bad.pftrace"), 3600);
  write_file(in(dir, "text.pftrace"), "hello\n", 6);
  set_age(in(dir, "text.pftrace"), 7200);
  run_result r = RUN("ls");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_INT(count_lines(r.out), 6);
  char c[10][256];
  /* Newest first: good (now), bad (an hour ago), text (two). */
  ASSERT_EQ_INT(cells(line_at(r.out, 3), c, 10), 8);
  ASSERT_EQ_STR(c[0], "good.pftrace");
  ASSERT_EQ_STR(c[5], "4");
  ASSERT_EQ_INT(cells(line_at(r.out, 4), c, 10), 8);
  ASSERT_EQ_STR(c[0], "bad.pftrace");
  /* Its malformed packet is left out and counted as data lost, as etch
   * stats counts it; the rest is read. */
  ASSERT_EQ_STR(c[2], "0 ns");
  ASSERT_EQ_STR(c[5], "0");
  ASSERT_EQ_STR(c[6], "11 bytes");
  ASSERT_EQ_STR(c[7], "malformed_packets 1");
  ASSERT_EQ_INT(cells(line_at(r.out, 5), c, 10), 8);
  ASSERT_EQ_STR(c[0], "text.pftrace");
  ASSERT_CONTAINS(c[7], "error: offset 0: not a Perfetto protobuf trace");
  done(&r);
  r = RUN("ls", "--json");
  jp *v = jp_parse(r.out);
  if (!v) FAIL("does not parse:\n%s", r.out);
  ASSERT_EQ_U64(v->n, 3);
  ASSERT_EQ_INT(jp_get(v->items[0], "error")->kind, JP_NULL);
  ASSERT_EQ_INT(jp_get(v->items[1], "error")->kind, JP_NULL);
  ASSERT_EQ_INT(jp_int(v->items[1], "events"), 0);
  ASSERT_EQ_INT(jp_int(v->items[1], "size"), 11);
  ASSERT_EQ_INT(jp_get(v->items[2], "error")->kind, JP_STR);
  ASSERT_EQ_INT(jp_get(v->items[2], "events")->kind, JP_NULL);
  jp_free(v);
  done(&r);
}

/* A trace whose thread holds, back to back, slices named by `spec`:
 * "a:3x100" is 3 slices "a" of 100 ns each. */
static void diff_trace(const char *path, const char *const *spec, size_t n) {
  tb t;
  tb_init(&t);
  tb_process(&t, 1, 1, 10, "app");
  tb_thread(&t, 1, 2, 10, 10, "main");
  int64_t ts = 1000;
  for (size_t i = 0; i < n; i++) {
    char name[32];
    int count, dur;
    if (sscanf(spec[i], "%31[^:]:%dx%d", name, &count, &dur) != 3)
      FAIL("bad spec %s", spec[i]);
    for (int k = 0; k < count; k++) {
      tb_event(&t, 1, ts, 2, ETCH_TE_TYPE_SLICE_BEGIN, "c", name);
      tb_event(&t, 1, ts + dur, 2, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
      ts += dur + 10;
    }
  }
  write_file(path, tb_data(&t), tb_len(&t));
  tb_free(&t);
}

/* Every cache file: its name and modification time. */
static char *cache_state(void) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/cache", etch_test_tmpdir());
  struct dirent **de;
  int n = scandir(dir, &de, NULL, alphasort);
  char *s = calloc(1, 8192);
  for (int i = 0; i < n; i++) {
    struct stat sb;
    if (de[i]->d_name[0] != '.' &&
        stat(in(dir, de[i]->d_name), &sb) == 0)
      snprintf(s + strlen(s), 8192 - strlen(s), "%s %lld.%09ld\n",
               de[i]->d_name, (long long)sb.st_mtim.tv_sec,
               sb.st_mtim.tv_nsec);
    free(de[i]);
  }
  if (n >= 0) free(de);
  return s;
}

TEST(diff_gives_exact_counts_and_totals_sorted_by_change) {
  const char *dir = etch_test_tmpdir();
  /* a: 3 x 100 -> 3 x 200 (+300); b: unchanged; c: gone (-500); d: new
   * (+100); e: 4 x 10 -> 1 x 1000, 1 x 10 (+1030 - 40 = ... see below). */
  static const char *const A[] = {"a:3x100", "b:2x1000", "c:1x500",
                                  "e:4x10"};
  static const char *const B[] = {"a:3x200", "b:2x1000", "d:2x50",
                                  "e:1x10", "e:1x1000"};
  diff_trace(in(dir, "A.pftrace"), A, 4);
  diff_trace(in(dir, "B.pftrace"), B, 5);
  run_result r = RUN("diff", in(dir, "A.pftrace"), in(dir, "B.pftrace"));
  if (r.status != 0) FAIL("etch diff: %s", r.err);
  char want[4096];
  snprintf(want, sizeof want,
           "A: %s\nB: %s\n\n"
           "slices by name, largest change of total first\n"
           "  name  count A  count B  total A  total B   change   change%%"
           "   self A   self B   mean A   mean B    p50 A    p50 B    p99 A"
           "    p99 B\n"
           "  ----  -------  -------  -------  -------  -------  --------"
           "  -------  -------  -------  -------  -------  -------  -------"
           "  -------\n"
           "  e           4        2    40 ns  1.01 us  +970 ns  +2425.0%%"
           "    40 ns  1.01 us    10 ns   505 ns    10 ns    10 ns    10 ns"
           "  1.00 us\n"
           "  c           1        0   500 ns        -  -500 ns      gone"
           "   500 ns        -   500 ns        -   500 ns        -   500 ns"
           "        -\n"
           "  a           3        3   300 ns   600 ns  +300 ns   +100.0%%"
           "   300 ns   600 ns   100 ns   200 ns   100 ns   200 ns   100 ns"
           "   200 ns\n"
           "  d           0        2        -   100 ns  +100 ns       new"
           "        -   100 ns        -    50 ns        -    50 ns        -"
           "    50 ns\n"
           "  b           2        2  2.00 us  2.00 us     0 ns        0%%"
           "  2.00 us  2.00 us  1.00 us  1.00 us  1.00 us  1.00 us  1.00 us"
           "  1.00 us\n",
           in(dir, "A.pftrace"), in(dir, "B.pftrace"));
  ASSERT_EQ_STR(r.out, want);
  done(&r);

  /* The second diff imports neither trace: the caches stay as they are. */
  char *before = cache_state();
  ASSERT_TRUE(count_lines(before) == 2);
  r = RUN("diff", "--json", "--sort", "count", in(dir, "A.pftrace"),
          in(dir, "B.pftrace"));
  ASSERT_EQ_INT(r.status, 0);
  char *after = cache_state();
  ASSERT_EQ_STR(after, before);
  free(before);
  free(after);
  jp *v = jp_parse(r.out);
  if (!v) FAIL("etch diff --json does not parse:\n%s", r.out);
  ASSERT_EQ_STR(jp_get(v, "sort")->str, "count");
  ASSERT_EQ_INT(jp_int(v, "names"), 5);
  const jp *rows = jp_get(v, "rows");
  ASSERT_EQ_U64(rows->n, 5);
  /* By the change of the count: a 2 (d, e), then 1 (c), then 0 (a, b). */
  static const char *const order[] = {"d", "e", "c", "a", "b"};
  static const int64_t ca[] = {0, 4, 1, 3, 2}, cb[] = {2, 2, 0, 3, 2};
  static const int64_t ta[] = {0, 40, 500, 300, 2000},
                       tbs[] = {100, 1010, 0, 600, 2000};
  for (size_t i = 0; i < 5; i++) {
    const jp *row = rows->items[i];
    ASSERT_EQ_STR(jp_get(row, "name")->str, order[i]);
    ASSERT_EQ_INT(jp_int(jp_get(row, "a"), "count"), ca[i]);
    ASSERT_EQ_INT(jp_int(jp_get(row, "b"), "count"), cb[i]);
    ASSERT_EQ_INT(jp_int(jp_get(row, "a"), "total"), ta[i]);
    ASSERT_EQ_INT(jp_int(jp_get(row, "b"), "total"), tbs[i]);
    ASSERT_EQ_INT(jp_int(jp_get(row, "change"), "total"), tbs[i] - ta[i]);
    ASSERT_EQ_INT(jp_int(jp_get(row, "change"), "count"), cb[i] - ca[i]);
  }
  /* e in B: 10 and 1000: p50 10, p99 1000, mean 505. */
  const jp *e = jp_get(rows->items[1], "b");
  ASSERT_EQ_INT(jp_int(e, "p50"), 10);
  ASSERT_EQ_INT(jp_int(e, "p99"), 1000);
  ASSERT_EQ_DBL(jp_get(e, "mean")->num, 505.0);
  ASSERT_EQ_INT(jp_get(jp_get(rows->items[0], "a"), "p50")->kind, JP_NULL);
  jp_free(v);
  done(&r);

  /* --limit, --sort name. */
  r = RUN("diff", "--limit", "2", "--sort", "name", in(dir, "A.pftrace"),
          in(dir, "B.pftrace"));
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_INT(count_lines(r.out), 9);
  ASSERT_CONTAINS(line_at(r.out, 6), "  a  ");
  ASSERT_CONTAINS(line_at(r.out, 7), "  b  ");
  ASSERT_EQ_STR(line_at(r.out, 8), "  ... 3 more names (--limit 0 shows all)");
  done(&r);

  r = RUN("diff", "--sort", "speed", in(dir, "A.pftrace"),
          in(dir, "B.pftrace"));
  ASSERT_EQ_INT(r.status, 2);
  ASSERT_CONTAINS(r.err, "'speed' is not a sort key");
  done(&r);
  r = RUN("diff", in(dir, "A.pftrace"));
  ASSERT_EQ_INT(r.status, 2);
  done(&r);
  r = RUN("diff", in(dir, "A.pftrace"), in(dir, "none.pftrace"));
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.err, "none.pftrace: No such file or directory");
  done(&r);
}

/* A thread with "outer" [0, outer) holding "inner" [100, 100 + inner),
 * then "z" of `z` ns. */
static void nested_trace(const char *path, int outer, int inner, int z) {
  tb t;
  tb_init(&t);
  tb_process(&t, 1, 1, 10, "app");
  tb_thread(&t, 1, 2, 10, 10, "main");
  tb_event(&t, 1, 1000, 2, ETCH_TE_TYPE_SLICE_BEGIN, "c", "outer");
  tb_event(&t, 1, 1100, 2, ETCH_TE_TYPE_SLICE_BEGIN, "c", "inner");
  tb_event(&t, 1, 1100 + inner, 2, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  tb_event(&t, 1, 1000 + outer, 2, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  tb_event(&t, 1, 5000, 2, ETCH_TE_TYPE_SLICE_BEGIN, "c", "z");
  tb_event(&t, 1, 5000 + z, 2, ETCH_TE_TYPE_SLICE_END, NULL, NULL);
  write_file(path, tb_data(&t), tb_len(&t));
  tb_free(&t);
}

/* The function that got slower ranks above its caller by self time: inner
 * +400 ns (self +400), outer +450 ns (self +50), z +200 ns. */
TEST(diff_sorts_by_self_time_and_quantiles) {
  const char *dir = etch_test_tmpdir();
  nested_trace(in(dir, "A.pftrace"), 1000, 400, 100);
  nested_trace(in(dir, "B.pftrace"), 1450, 800, 300);
  static const char *const head =
      "  name   count A  count B  total A  total B   change  change%"
      "  self A  self B   mean A   mean B    p50 A    p50 B    p99 A"
      "    p99 B\n"
      "  -----  -------  -------  -------  -------  -------  -------"
      "  ------  ------  -------  -------  -------  -------  -------"
      "  -------\n";
  static const char *const outer =
      "  outer        1        1  1.00 us  1.45 us  +450 ns   +45.0%"
      "  600 ns  650 ns  1.00 us  1.45 us  1.00 us  1.45 us  1.00 us"
      "  1.45 us\n";
  static const char *const inner =
      "  inner        1        1   400 ns   800 ns  +400 ns  +100.0%"
      "  400 ns  800 ns   400 ns   800 ns   400 ns   800 ns   400 ns"
      "   800 ns\n";
  static const char *const z =
      "  z            1        1   100 ns   300 ns  +200 ns  +200.0%"
      "  100 ns  300 ns   100 ns   300 ns   100 ns   300 ns   100 ns"
      "   300 ns\n";
  static const struct {
    const char *key, *first, *second, *third;
  } cases[] = {
      {"total", outer, inner, z}, {"self", inner, z, outer},
      {"p50", outer, inner, z},   {"p99", outer, inner, z},
      {"count", inner, outer, z},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run_result r = RUN("diff", "--sort", cases[i].key, in(dir, "A.pftrace"),
                       in(dir, "B.pftrace"));
    if (r.status != 0) FAIL("etch diff --sort %s: %s", cases[i].key, r.err);
    char want[4096], a[600];
    snprintf(a, sizeof a, "%s", in(dir, "A.pftrace"));
    snprintf(want, sizeof want,
             "A: %s\nB: %s\n\nslices by name, largest change of %s "
             "first\n%s%s%s%s",
             a, in(dir, "B.pftrace"), cases[i].key, head, cases[i].first,
             cases[i].second, cases[i].third);
    ASSERT_EQ_STR(r.out, want);
    done(&r);
  }
  run_result r = RUN("diff", "--json", "--sort", "self", in(dir, "A.pftrace"),
                     in(dir, "B.pftrace"));
  ASSERT_EQ_INT(r.status, 0);
  jp *v = jp_parse(r.out);
  if (!v) FAIL("etch diff --json does not parse:\n%s", r.out);
  ASSERT_EQ_STR(jp_get(v, "sort")->str, "self");
  const jp *rows = jp_get(v, "rows");
  ASSERT_EQ_U64(rows->n, 3);
  static const char *const order[] = {"inner", "z", "outer"};
  static const int64_t sa[] = {400, 100, 600}, sb[] = {800, 300, 650};
  for (size_t i = 0; i < 3; i++) {
    const jp *row = rows->items[i];
    ASSERT_EQ_STR(jp_get(row, "name")->str, order[i]);
    ASSERT_EQ_INT(jp_int(jp_get(row, "a"), "self"), sa[i]);
    ASSERT_EQ_INT(jp_int(jp_get(row, "b"), "self"), sb[i]);
    ASSERT_EQ_INT(jp_int(jp_get(row, "change"), "self"), sb[i] - sa[i]);
  }
  jp_free(v);
  done(&r);
}

TEST(diff_takes_names_of_the_store) {
  const char *dir = use_store();
  mkdir(dir, 0755);
  static const char *const A[] = {"x:1x100"};
  static const char *const B[] = {"x:2x100"};
  diff_trace(in(dir, "one.pftrace"), A, 1);
  diff_trace(in(dir, "two.pftrace"), B, 1);
  run_result r = RUN("diff", "--json", "one.pftrace", "two.pftrace");
  if (r.status != 0) FAIL("etch diff: %s", r.err);
  jp *v = jp_parse(r.out);
  if (!v) FAIL("does not parse:\n%s", r.out);
  ASSERT_EQ_STR(jp_get(v, "a")->str, "one.pftrace");
  const jp *row = jp_get(v, "rows")->items[0];
  ASSERT_EQ_INT(jp_int(jp_get(row, "a"), "total"), 100);
  ASSERT_EQ_INT(jp_int(jp_get(row, "b"), "total"), 200);
  jp_free(v);
  done(&r);
  /* As etch ls shows them, without ".pftrace" too. */
  r = RUN("diff", "--json", "one", "two");
  if (r.status != 0) FAIL("etch diff one two: %s", r.err);
  v = jp_parse(r.out);
  if (!v) FAIL("does not parse:\n%s", r.out);
  ASSERT_EQ_STR(jp_get(v, "a")->str, "one");
  ASSERT_EQ_STR(jp_get(v, "b")->str, "two");
  row = jp_get(v, "rows")->items[0];
  ASSERT_EQ_INT(jp_int(jp_get(row, "a"), "total"), 100);
  ASSERT_EQ_INT(jp_int(jp_get(row, "b"), "total"), 200);
  jp_free(v);
  done(&r);
}

TEST(record_into_a_relative_store_caches_the_metadata) {
  if (chdir(etch_test_tmpdir()) != 0) FAIL("chdir: %s", strerror(errno));
  setenv("ETCH_STORE", "rel/store", 1);
  run_result r = RUN("record", "--", ETCH_RECORDEE, "2");
  if (r.status != 0) FAIL("etch record: %s", r.err);
  ASSERT_CONTAINS(r.err, "trace: rel/store/");
  done(&r);
  char *names = store_names("rel/store");
  if (!recordee_name(names)) FAIL("unexpected store contents: %s", names);
  ASSERT_TRUE(exists(meta_of("rel/store", names)));
  free(names);
}

static int occurrences(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

TEST(diff_says_a_trace_is_cut_short_once) {
  const char *dir = etch_test_tmpdir();
  static const char *const A[] = {"a:3x100", "b:2x1000"};
  diff_trace(in(dir, "A.pftrace"), A, 2);
  diff_trace(in(dir, "B.pftrace"), A, 2);
  /* B loses the last 3 bytes: its last packet is cut. */
  struct stat sb;
  ASSERT_TRUE(stat(in(dir, "B.pftrace"), &sb) == 0);
  ASSERT_TRUE(truncate(in(dir, "B.pftrace"), sb.st_size - 3) == 0);
  for (int first = 1; first >= 0; first--) {
    for (int swap = 0; swap < 2; swap++) {
      run_result r = RUN("diff", in(dir, swap ? "B.pftrace" : "A.pftrace"),
                         in(dir, swap ? "A.pftrace" : "B.pftrace"));
      ASSERT_EQ_INT(r.status, 0);
      if (occurrences(r.err, "is cut short") != 1)
        FAIL("diff (%s, %s) warned %d times:\n%s",
             first ? "caches built" : "cached", swap ? "B A" : "A B",
             occurrences(r.err, "is cut short"), r.err);
      /* b's last slice end was in the cut: one b fewer, still open. */
      ASSERT_CONTAINS(r.out, swap ? "  b           1        2"
                                  : "  b           2        1");
      done(&r);
      if (first && !swap) {
        char cache[600];
        snprintf(cache, sizeof cache, "rm -rf '%s/cache'", dir);
        if (system(cache) != 0) FAIL("%s", cache);
      }
    }
  }
}

/* ---- parts a killed etch record left -------------------------------------- */

/* A pid that was a process and is no more (a child, reaped). */
static pid_t dead_pid(void) {
  pid_t p = fork();
  ASSERT_TRUE(p >= 0);
  if (p == 0) _exit(0);
  int st;
  ASSERT_EQ_INT((int)waitpid(p, &st, 0), (int)p);
  return p;
}

/* A child that holds an flock on `path` until `*release` is closed. */
static pid_t lock_holder(const char *path, int *release) {
  int ready[2], hold[2];
  ASSERT_EQ_INT(pipe(ready), 0);
  ASSERT_EQ_INT(pipe(hold), 0);
  pid_t p = fork();
  ASSERT_TRUE(p >= 0);
  if (p == 0) {
    close(ready[0]);
    close(hold[1]);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) _exit(1);
    if (write(ready[1], "r", 1) != 1) _exit(1);
    char c;
    while (read(hold[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  close(ready[1]);
  close(hold[0]);
  char c;
  ASSERT_EQ_INT((int)read(ready[0], &c, 1), 1); /* it holds the lock */
  close(ready[0]);
  *release = hold[1];
  return p;
}

/* The names etch ls --json lists, and whether each is abandoned. */
static char *ls_json_names(void) {
  run_result r = RUN("ls", "--json");
  if (r.status != 0) FAIL("etch ls --json: %s", r.err);
  jp *v = jp_parse(r.out);
  if (!v) FAIL("does not parse:\n%s", r.out);
  char *s = calloc(1, 4096);
  for (size_t i = 0; i < v->n; i++) {
    const jp *ab = jp_get(v->items[i], "abandoned");
    const jp *rec = jp_get(v->items[i], "recording");
    snprintf(s + strlen(s), 4096 - strlen(s), "%s%s%s%s", i ? " " : "",
             jp_get(v->items[i], "name")->str,
             ab && ab->kind == JP_BOOL && ab->b ? "(abandoned)" : "",
             rec && rec->kind == JP_BOOL && rec->b ? "(recording)" : "");
  }
  jp_free(v);
  done(&r);
  return s;
}

/*
 * A part whose recorder is gone and that nobody holds is listed as
 * abandoned and removed by etch rm; one whose recorder runs (its pid alive,
 * its lock held), or whose writer still holds it (etchd, after the
 * recorder died), is neither listed nor removed.
 */
TEST(ls_names_abandoned_parts_and_rm_removes_them) {
  const char *dir = use_store();
  mkdir(dir, 0755);
  small_trace(in(dir, "whole.pftrace"), 1);
  char dead[300], live[300], held[300];
  pid_t gone = dead_pid();
  snprintf(dead, sizeof dead, ".20261129-010203-app.pftrace.%d.part",
           (int)gone);
  small_trace(in(dir, dead), 2);
  /* Running: this process's child, holding its lock. */
  int release;
  snprintf(live, sizeof live, ".20261129-020304-app.pftrace.%d.part",
           (int)getpid());
  pid_t holder = lock_holder(in(dir, live), &release);
  /* Its recorder gone, its file still held (as etchd holds a
   * write_into_file session's until it has let the session go). */
  snprintf(held, sizeof held, ".20261129-030405-app.pftrace.%d.part",
           (int)dead_pid());
  int held_release;
  pid_t held_holder = lock_holder(in(dir, held), &held_release);

  char *names = ls_json_names();
  char want[1024];
  snprintf(want, sizeof want, "%s(abandoned) whole.pftrace", dead);
  /* The part's start is its mtime: now, after whole.pftrace's events. */
  ASSERT_EQ_STR(names, want);
  free(names);
  run_result r = RUN("ls", "--json");
  jp *v = jp_parse(r.out);
  ASSERT_TRUE(v != NULL);
  const jp *e = v->items[0];
  ASSERT_EQ_INT(jp_int(e, "writer_pid"), gone);
  ASSERT_EQ_INT(jp_int(e, "size"), 107);
  ASSERT_EQ_INT(jp_get(e, "events")->kind, JP_NULL);
  char msg[600];
  snprintf(msg, sizeof msg,
           "abandoned: its etch record (pid %d) ended before the trace was "
           "whole; etch rm %s removes it",
           (int)gone, dead);
  ASSERT_EQ_STR(jp_get(e, "error")->str, msg);
  jp_free(v);
  done(&r);
  r = RUN("ls");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_INT(count_lines(r.out), 5);
  ASSERT_TRUE(strncmp(line_at(r.out, 3), dead, strlen(dead)) == 0);
  ASSERT_TRUE(strstr(line_at(r.out, 3), msg) != NULL);
  ASSERT_TRUE(strstr(line_at(r.out, 3), "error:") == NULL);
  done(&r);

  /* Being written: refused, nothing removed. */
  r = RUN("rm", live);
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.err, "is being written by a running etch record");
  done(&r);
  r = RUN("rm", held);
  ASSERT_EQ_INT(r.status, 1);
  done(&r);
  ASSERT_TRUE(exists(in(dir, live)) && exists(in(dir, held)));
  r = RUN("rm", dead);
  ASSERT_EQ_INT(r.status, 0);
  snprintf(want, sizeof want, "removed %s (107 bytes)\n", dead);
  ASSERT_EQ_STR(r.out, want);
  done(&r);
  ASSERT_TRUE(!exists(in(dir, dead)));

  /* Let go by its last writer: abandoned now; --older-than takes it. */
  close(held_release);
  int st;
  ASSERT_EQ_INT((int)waitpid(held_holder, &st, 0), (int)held_holder);
  names = ls_json_names();
  snprintf(want, sizeof want, "%s(abandoned) whole.pftrace", held);
  ASSERT_EQ_STR(names, want);
  free(names);
  set_age(in(dir, held), 3 * 86400);
  set_age(in(dir, "whole.pftrace"), 86400);
  r = RUN("rm", "--older-than", "2d");
  ASSERT_EQ_INT(r.status, 0);
  snprintf(want, sizeof want, "removed %s (0 bytes)\nremoved 1 trace (0 bytes)\n",
           held);
  ASSERT_EQ_STR(r.out, want);
  done(&r);

  close(release);
  ASSERT_EQ_INT((int)waitpid(holder, &st, 0), (int)holder);
  ASSERT_TRUE(exists(in(dir, live)));
  ASSERT_TRUE(exists(in(dir, "whole.pftrace")));
}

#ifdef ETCHD_BIN
#include <sys/socket.h>
#include <sys/un.h>

static void sleep_ms(long ms) {
  struct timespec d = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&d, NULL);
}

static bool can_connect(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

static pid_t spawn_logged(char *const argv[], const char *log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) != 0)
    FAIL("cannot run %s", argv[0]);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

/* The hidden part in `dir` whose lock someone holds: its name, or "". */
static const char *held_part(const char *dir) {
  static char name[300];
  name[0] = '\0';
  DIR *d = opendir(dir);
  struct dirent *de;
  while (d && (de = readdir(d))) {
    size_t n = strlen(de->d_name);
    if (de->d_name[0] != '.' || n < 6 || strcmp(de->d_name + n - 5, ".part"))
      continue;
    int fd = open(in(dir, de->d_name), O_RDONLY);
    if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK)
      snprintf(name, sizeof name, "%s", de->d_name);
    if (fd >= 0) close(fd);
  }
  if (d) closedir(d);
  return name;
}

/*
 * The real thing: etch record --system writing into the store (etchd
 * writes into its part as the session goes), killed with SIGKILL. While it
 * runs its part is listed as recording and not removed; once it is gone and etchd
 * has let the file go, etch ls lists it as abandoned and etch rm removes
 * it.
 */
TEST(a_killed_recorders_part_is_abandoned) {
  const char *tmp = etch_test_tmpdir();
  const char *dir = use_store();
  char prod[600], cons[600], log[600], cfg[600];
  snprintf(prod, sizeof prod, "%s/p.sock", tmp);
  snprintf(cons, sizeof cons, "%s/c.sock", tmp);
  snprintf(log, sizeof log, "%s/etchd.log", tmp);
  snprintf(cfg, sizeof cfg, "%s/file.pbtx", tmp);
  setenv("PERFETTO_PRODUCER_SOCK_NAME", prod, 1);
  setenv("PERFETTO_CONSUMER_SOCK_NAME", cons, 1);
  char *dargv[] = {(char *)ETCHD_BIN, "-v", NULL};
  pid_t etchd = spawn_logged(dargv, log);
  for (int i = 0; i < 3000 && !can_connect(cons); i++) sleep_ms(10);
  if (!can_connect(cons)) FAIL("etchd did not start (see %s)", log);
  FILE *f = fopen(cfg, "w");
  ASSERT_TRUE(f != NULL);
  fputs("buffers { size_kb: 1024 }\n"
        "data_sources { config { name: \"track_event\" } }\n"
        "write_into_file: true\nfile_write_period_ms: 100\n",
        f);
  fclose(f);
  char *rargv[] = {(char *)ETCH_BIN, "record", "--config", cfg, "-q", NULL};
  pid_t rec = spawn_logged(rargv, log);
  const char *part = held_part(dir);
  for (int i = 0; i < 3000 && !*(part = held_part(dir)); i++) sleep_ms(10);
  if (!*part) FAIL("no part being written in %s (see %s)", dir, log);
  char name[300];
  snprintf(name, sizeof name, "%s", part);

  /* Being written: listed as recording, under its hidden name. */
  char want[400];
  snprintf(want, sizeof want, "%s(recording)", name);
  char *names = ls_json_names();
  ASSERT_EQ_STR(names, want);
  free(names);
  run_result r = RUN("rm", name);
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.err, "is being written by a running etch record");
  done(&r);

  kill(rec, SIGKILL);
  int st;
  ASSERT_EQ_INT((int)waitpid(rec, &st, 0), (int)rec);
  /* Until etchd, seeing its consumer gone, lets the file go. */
  snprintf(want, sizeof want, "%s(abandoned)", name);
  names = ls_json_names();
  for (int i = 0; i < 3000 && strcmp(names, want) != 0; i++) {
    free(names);
    sleep_ms(10);
    names = ls_json_names();
  }
  ASSERT_EQ_STR(names, want);
  free(names);
  r = RUN("ls", "--json");
  jp *v = jp_parse(r.out);
  ASSERT_TRUE(v != NULL && v->n == 1);
  ASSERT_EQ_INT(jp_int(v->items[0], "writer_pid"), rec);
  jp_free(v);
  done(&r);
  r = RUN("rm", name);
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_TRUE(!exists(in(dir, name)));
  done(&r);

  kill(etchd, SIGTERM);
  ASSERT_EQ_INT((int)waitpid(etchd, &st, 0), (int)etchd);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  unsetenv("PERFETTO_PRODUCER_SOCK_NAME");
  unsetenv("PERFETTO_CONSUMER_SOCK_NAME");
}

/*
 * etch record --system into the store without --config: etchd writes the
 * session into its part as it goes (write_into_file) by default, so that
 * etch ls lists it as recording while the program it runs waits; it ends
 * a trace of the store under its name.
 */
TEST(record_system_into_the_store_writes_as_it_goes_by_default) {
  const char *tmp = etch_test_tmpdir();
  const char *dir = use_store();
  char prod[600], cons[600], log[600], ready[600];
  snprintf(prod, sizeof prod, "%s/p.sock", tmp);
  snprintf(cons, sizeof cons, "%s/c.sock", tmp);
  snprintf(log, sizeof log, "%s/etchd.log", tmp);
  snprintf(ready, sizeof ready, "%s/ready.pid", tmp);
  setenv("PERFETTO_PRODUCER_SOCK_NAME", prod, 1);
  setenv("PERFETTO_CONSUMER_SOCK_NAME", cons, 1);
  char *dargv[] = {(char *)ETCHD_BIN, "-v", NULL};
  pid_t etchd = spawn_logged(dargv, log);
  for (int i = 0; i < 3000 && !can_connect(cons); i++) sleep_ms(10);
  if (!can_connect(cons)) FAIL("etchd did not start (see %s)", log);
  char *rargv[] = {(char *)ETCH_BIN, "record", "--system", "-q", "--",
                   (char *)ETCH_RECORDEE, "4", "wait", ready, NULL};
  pid_t rec = spawn_logged(rargv, log);
  for (int i = 0; i < 6000 && !exists(ready); i++) sleep_ms(10);
  if (!exists(ready)) FAIL("the recordee never got ready (see %s)", log);
  char *pidtext = slurp(ready);
  pid_t prog = (pid_t)atol(pidtext);
  free(pidtext);
  const char *part = held_part(dir);
  for (int i = 0; i < 3000 && !*(part = held_part(dir)); i++) sleep_ms(10);
  if (!*part) FAIL("no part being written in %s (see %s)", dir, log);
  char want[400];
  snprintf(want, sizeof want, "%s(recording)", part);
  char *names = ls_json_names();
  ASSERT_EQ_STR(names, want);
  free(names);
  ASSERT_EQ_INT(kill(prog, SIGTERM), 0);
  int st;
  ASSERT_EQ_INT((int)waitpid(rec, &st, 0), (int)rec);
  names = ls_json_names();
  ASSERT_TRUE(names[0] && !strchr(names, '(') && names[0] != '.');
  free(names);
  kill(etchd, SIGTERM);
  ASSERT_EQ_INT((int)waitpid(etchd, &st, 0), (int)etchd);
  unsetenv("PERFETTO_PRODUCER_SOCK_NAME");
  unsetenv("PERFETTO_CONSUMER_SOCK_NAME");
}
#endif

/*
 * A trace being recorded in process (etch record --write-period, no -o:
 * into the store) while its program waits: etch ls lists it as recording,
 * read as far as it is written; etch stats and etch query read it up to
 * its last whole packet, say so, and leave no cache behind. Once the
 * program ends it is a trace like any other.
 */
TEST(ls_lists_an_in_process_recording_as_recording) {
  const char *dir = use_store();
  char ready[600], log[600], cache[600];
  snprintf(ready, sizeof ready, "%s/ready.pid", etch_test_tmpdir());
  snprintf(log, sizeof log, "%s/record.log", etch_test_tmpdir());
  snprintf(cache, sizeof cache, "%s/cache", etch_test_tmpdir());
  char *argv[] = {(char *)ETCH_BIN, "record", "-q", "--write-period", "50ms",
                  "--", (char *)ETCH_RECORDEE, "4", "wait", ready, NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t rec;
  if (posix_spawn(&rec, argv[0], &fa, NULL, argv, environ) != 0)
    FAIL("cannot run %s", argv[0]);
  posix_spawn_file_actions_destroy(&fa);
  /* The program wrote its pid once its slices are in the file. */
  struct timespec tick = {0, 10000000};
  for (int i = 0; i < 6000 && !exists(ready); i++) nanosleep(&tick, NULL);
  if (!exists(ready)) FAIL("the recordee never got ready (see %s)", log);
  char *pidtext = slurp(ready);
  pid_t prog = (pid_t)atol(pidtext);
  free(pidtext);
  ASSERT_TRUE(prog > 0);

  char *name = store_names(dir);
  ASSERT_TRUE(recordee_name(name));
  char want[600];
  snprintf(want, sizeof want, "%s(recording)", name);
  char *names = ls_json_names();
  ASSERT_EQ_STR(names, want);
  free(names);
  run_result r = RUN("ls", "--json");
  jp *v = jp_parse(r.out);
  ASSERT_TRUE(v != NULL && v->n == 1);
  ASSERT_EQ_STR(jp_get(v->items[0], "path")->str, in(dir, name));
  ASSERT_TRUE(jp_get(v->items[0], "error")->kind == JP_NULL);
  /* The "work" slice and its 4 steps are written (etch_flush). */
  ASSERT_EQ_INT(jp_int(v->items[0], "slices"), 5);
  jp_free(v);
  done(&r);
  r = RUN("ls");
  ASSERT_CONTAINS(r.out, "recording");
  done(&r);
  /* Never cached while it grows: nothing of it in .meta. */
  ASSERT_FALSE(exists(meta_of(dir, name)));

  char *caches = cache_state();
  r = RUN("stats", in(dir, name));
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_CONTAINS(r.err, "is still being recorded: read up to its last "
                         "whole packet");
  ASSERT_FALSE(strstr(r.err, "cut short") != NULL);
  done(&r);
  r = RUN("query", "--csv", in(dir, name),
          "SELECT count(*) AS n FROM slice WHERE name = 'step'");
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_EQ_STR(r.out, "n\n4\n");
  done(&r);
  r = RUN("query", "--csv", in(dir, name),
          "SELECT value FROM stats WHERE name = 'trace_recording'");
  ASSERT_EQ_STR(r.out, "value\n1\n");
  done(&r);
  char *caches2 = cache_state();
  /* etch query reads on: a cache of the recording (analysis.md). */
  ASSERT_TRUE(strstr(caches2, "live-") != NULL);
  free(caches);
  free(caches2);

  /* The program ends (as for Ctrl-C): a whole trace, no longer recording. */
  ASSERT_EQ_INT(kill(prog, SIGTERM), 0);
  int st;
  ASSERT_EQ_INT((int)waitpid(rec, &st, 0), (int)rec);
  names = ls_json_names();
  ASSERT_EQ_STR(names, name);
  free(names);
  r = RUN("stats", in(dir, name));
  ASSERT_EQ_INT(r.status, 0);
  ASSERT_FALSE(strstr(r.err, "recorded") != NULL);
  done(&r);
  free(name);
}

/* etch record -- PROGRAM (no -o) run with `wait READY` and `extra`
 * options; returns its pid once the program has written READY (its
 * slices flushed), the program's pid into *prog. */
static pid_t record_waiting(const char *extra, pid_t *prog) {
  char ready[600], log[600];
  snprintf(ready, sizeof ready, "%s/ready.pid", etch_test_tmpdir());
  snprintf(log, sizeof log, "%s/record.log", etch_test_tmpdir());
  unlink(ready);
  char *argv[] = {(char *)ETCH_BIN, "record", "-q", (char *)extra,
                  "--", (char *)ETCH_RECORDEE, "4", "wait", ready, NULL};
  if (!extra) memmove(&argv[3], &argv[4], 6 * sizeof *argv);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t rec;
  if (posix_spawn(&rec, argv[0], &fa, NULL, argv, environ) != 0)
    FAIL("cannot run %s", argv[0]);
  posix_spawn_file_actions_destroy(&fa);
  struct timespec tick = {0, 10000000};
  for (int i = 0; i < 6000 && !exists(ready); i++) nanosleep(&tick, NULL);
  if (!exists(ready)) FAIL("the recordee never got ready (see %s)", log);
  char *pidtext = slurp(ready);
  *prog = (pid_t)atol(pidtext);
  free(pidtext);
  ASSERT_TRUE(*prog > 0);
  return rec;
}

/*
 * Into the store, etch record writes a program's trace as it is recorded
 * by default (every second, no --write-period): etch ls lists it as
 * recording while the program waits, its slices in it (etch_flush wrote
 * them); with --no-live it is not there until the program ends.
 */
TEST(record_into_the_store_writes_as_it_goes_by_default) {
  const char *dir = use_store();
  pid_t prog, rec = record_waiting(NULL, &prog);
  char *name = store_names(dir);
  ASSERT_TRUE(recordee_name(name));
  char want[600];
  snprintf(want, sizeof want, "%s(recording)", name);
  char *names = ls_json_names();
  ASSERT_EQ_STR(names, want);
  free(names);
  run_result r = RUN("ls", "--json");
  jp *v = jp_parse(r.out);
  ASSERT_TRUE(v != NULL && v->n == 1);
  ASSERT_EQ_INT(jp_int(v->items[0], "slices"), 5);
  jp_free(v);
  done(&r);
  ASSERT_EQ_INT(kill(prog, SIGTERM), 0);
  int st;
  ASSERT_EQ_INT((int)waitpid(rec, &st, 0), (int)rec);
  names = ls_json_names();
  ASSERT_EQ_STR(names, name);
  free(names);
  free(name);

  /* --no-live: nothing in the store while it runs. */
  static char dir2[400];
  snprintf(dir2, sizeof dir2, "%s/store2", etch_test_tmpdir());
  setenv("ETCH_STORE", dir2, 1);
  dir = dir2;
  rec = record_waiting("--no-live", &prog);
  char *none = store_names(dir);
  ASSERT_EQ_STR(none, "");
  free(none);
  ASSERT_EQ_INT(kill(prog, SIGTERM), 0);
  ASSERT_EQ_INT((int)waitpid(rec, &st, 0), (int)rec);
  name = store_names(dir);
  ASSERT_TRUE(recordee_name(name));
  free(name);
}

/* A trace of the store whose writer holds it (the lock etch's writers
 * take, reader.md) is not removed while it is recorded; once the writer
 * lets go, it is. */
TEST(rm_refuses_a_trace_being_recorded) {
  const char *dir = use_store();
  mkdir(dir, 0755);
  const char *path = in(dir, "rec.pftrace");
  small_trace(path, 2);
  int w = open(path, O_WRONLY | O_CLOEXEC);
  ASSERT_TRUE(w >= 0);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  ASSERT_EQ_INT(fcntl(w, F_OFD_SETLK, &fl), 0);
  run_result r = RUN("rm", "rec.pftrace");
  ASSERT_EQ_INT(r.status, 1);
  ASSERT_CONTAINS(r.err, "'rec.pftrace' is being recorded (its writer holds "
                         "it): not removed");
  ASSERT_EQ_STR(r.out, "");
  done(&r);
  ASSERT_TRUE(exists(path));
  close(w);
  r = RUN("rm", "rec.pftrace");
  ASSERT_EQ_INT(r.status, 0);
  done(&r);
  ASSERT_TRUE(!exists(path));
}

/*
 * ui_live_test.c - a trace that grows while etch ui holds it open: its
 * writer holds the lock etch's writers hold (buffer/sink.h) and appends
 * the trace a piece at a time, cut anywhere (inside packets too); after
 * each piece a refresh of the ui's trace gives the tables a cold open of
 * the same bytes gives, /api/live says so (recording, a new generation,
 * the slice count); the writer ends, one last refresh reads to the end,
 * the live database becomes the finished file's cache (every table what
 * a cold import makes; etch query opens it without reading the trace) and
 * the trace is live no more.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../query/query_test_util.h"
#include "test.h"
#include "ui/app.h"
#include "ui_trace.h"

/* What is compared: every table's row count, and the slices whole. */
static const char kCounts[] =
    "SELECT (SELECT count(*) FROM slice), (SELECT count(*) FROM counter),"
    " (SELECT count(*) FROM track), (SELECT count(*) FROM thread),"
    " (SELECT count(*) FROM process), (SELECT count(*) FROM args),"
    " (SELECT count(*) FROM flow),"
    " (SELECT coalesce(sum(hash(id, ts, dur, track_id, name, depth)), 0)"
    "  FROM slice)";
enum { NCOUNTS = 8 };

static void counts_of(etch__db *db, int64_t *v) {
  ASSERT_OK(etch__query_ints(db, kCounts, NULL, 0, v, NCOUNTS));
}

/* The counts of a cold read of data[0..len) (from memory: up to its last
 * whole packet, as a recording is read). */
static void cold_counts(const uint8_t *data, size_t len, int64_t *v) {
  etch__db *db;
  ASSERT_OK(etch__db_open(&db, NULL));
  etch__import_opts o = {.all_args = true, .allow_truncated = true,
                         .quiet = true};
  ASSERT_OK(etch__query_import_memory(db, data, len, NULL, &o, NULL));
  counts_of(db, v);
  etch__db_close(db);
}

typedef struct args {
  const char *k[2], *v[2];
} args;

static const char *get(void *ctx, const char *key) {
  args *a = ctx;
  for (int i = 0; i < 2 && a->k[i]; i++)
    if (!strcmp(a->k[i], key)) return a->v[i];
  return NULL;
}

static int call(etch__ui *ui, const char *path, const char *id, char **body) {
  args a = {{"id", NULL}, {id, NULL}};
  size_t len = 0;
  FILE *f = open_memstream(body, &len);
  int st = etch__ui_api(ui, path, get, &a, f);
  fclose(f);
  return st;
}

static void same_as_cold(etch__db *db, const char *path);
static void served_from_cache(const char *path, const char *cache,
                              uint64_t live_ino);
static uint64_t db_inode(const char *dir);

static void write_all(int fd, const uint8_t *p, size_t n) {
  while (n) {
    ssize_t k = write(fd, p, n);
    ASSERT_TRUE(k > 0);
    p += k;
    n -= (size_t)k;
  }
}

TEST(ui_live_trace_refreshed_as_it_grows_equals_a_cold_open) {
  tb tr;
  tb_init(&tr);
  ui_zone_trace(&tr);
  const uint8_t *data = tb_data(&tr);
  size_t len = tb_len(&tr);
  char path[4096];
  snprintf(path, sizeof path, "%s/live.pftrace", etch_test_tmpdir());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(fd >= 0);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  ASSERT_EQ_INT(fcntl(fd, F_OFD_SETLK, &fl), 0);

  /* 13 pieces of unequal sizes, cut wherever they fall. */
  enum { kPieces = 13 };
  size_t at = len / (2 * kPieces);
  write_all(fd, data, at);

  etch__ui *ui;
  ASSERT_OK(etch__ui_new(&ui));
  ASSERT_OK(etch__ui_set_cache_dir(ui, etch_test_tmpdir()));
  ASSERT_OK(etch__ui_add_path(ui, path));
  etch__ui_trace *t = &ui->t[0];
  char *body = NULL;
  ASSERT_EQ_INT(call(ui, "/api/trace", t->id, &body), 200);
  ASSERT_TRUE(strstr(body, "\"recording\":true,\"generation\":1,") != NULL);
  free(body);
  ASSERT_TRUE(t->live != NULL);

  int64_t got[NCOUNTS], want[NCOUNTS], last_slices = -1;
  for (int k = 1; k <= kPieces; k++) {
    /* Unchanged: nothing read, the generation stays. */
    bool changed = true;
    uint64_t gen = t->generation;
    ASSERT_OK(etch__ui_trace_refresh(ui, t, &changed));
    ASSERT_FALSE(changed);
    ASSERT_EQ_INT(t->generation, gen);

    size_t to = k == kPieces ? len : at + (len - at) * (size_t)k / kPieces -
                                         (size_t)(k % 3) * 7;
    write_all(fd, data + at, to - at);
    at = to;
    ASSERT_OK(etch__ui_trace_refresh(ui, t, &changed));
    ASSERT_TRUE(changed);
    ASSERT_EQ_INT(t->generation, gen + 1);
    ASSERT_TRUE(t->recording);
    counts_of(t->db, got);
    cold_counts(data, at, want);
    for (int c = 0; c < NCOUNTS; c++)
      if (got[c] != want[c])
        FAIL("piece %d (%zu bytes): count %d is %lld, a cold open's %lld", k,
             at, c, (long long)got[c], (long long)want[c]);
    ASSERT_TRUE(got[0] >= last_slices);
    last_slices = got[0];
    ASSERT_EQ_INT(t->slices, got[0]);
    /* /api/live says what the page follows. */
    ASSERT_EQ_INT(call(ui, "/api/live", t->id, &body), 200);
    char want_json[128];
    snprintf(want_json, sizeof want_json, "\"slices\":%lld,",
             (long long)got[0]);
    ASSERT_TRUE(strstr(body, "{\"recording\":true,") == body);
    ASSERT_TRUE(strstr(body, want_json) != NULL);
    snprintf(want_json, sizeof want_json, "\"bytes\":%zu,", at);
    ASSERT_TRUE(strstr(body, want_json) != NULL);
    free(body);
  }
  /* Whole, but its writer still holds the lock: still recording. */
  int64_t whole[NCOUNTS];
  cold_counts(data, len, whole);
  ASSERT_EQ_INT(last_slices, whole[0]);
  ASSERT_EQ_INT(whole[0], 101);

  /* The writer ends: one last read, then the trace is finished. */
  close(fd);
  bool changed = false;
  uint64_t gen = t->generation;
  ASSERT_OK(etch__ui_trace_refresh(ui, t, &changed));
  ASSERT_TRUE(changed);
  ASSERT_EQ_INT(t->generation, gen + 1);
  ASSERT_FALSE(t->recording);
  ASSERT_TRUE(t->live == NULL);
  counts_of(t->db, got);
  for (int c = 0; c < NCOUNTS; c++) ASSERT_EQ_INT(got[c], whole[c]);
  ASSERT_OK(etch__ui_trace_refresh(ui, t, &changed));
  ASSERT_FALSE(changed);
  ASSERT_EQ_INT(call(ui, "/api/live", t->id, &body), 200);
  ASSERT_TRUE(strstr(body, "{\"recording\":false,") == body);
  ASSERT_TRUE(strstr(body, "\"slices\":101,") != NULL);
  free(body);
  /* What the page asks next comes from the new tables. */
  ASSERT_EQ_INT(call(ui, "/api/trace", t->id, &body), 200);
  ASSERT_TRUE(strstr(body, "\"slices\":101,") != NULL);
  ASSERT_TRUE(strstr(body, "\"recording\":false,") != NULL);
  free(body);
  etch__ui_free(ui);
  tb_free(&tr);
  unlink(path);
}

/* A finished trace is never live: a refresh does nothing. */
TEST(ui_finished_trace_is_not_live) {
  tb tr;
  tb_init(&tr);
  ui_zone_trace(&tr);
  const char *path = tb_write_file(&tr, "done.pftrace");
  etch__ui *ui;
  ASSERT_OK(etch__ui_new(&ui));
  ASSERT_OK(etch__ui_set_cache_dir(ui, etch_test_tmpdir()));
  ASSERT_OK(etch__ui_add_path(ui, path));
  char *body = NULL;
  ASSERT_EQ_INT(call(ui, "/api/trace", ui->t[0].id, &body), 200);
  ASSERT_TRUE(strstr(body, "\"recording\":false,\"generation\":0,") != NULL);
  free(body);
  ASSERT_TRUE(ui->t[0].live == NULL);
  bool changed = true;
  ASSERT_OK(etch__ui_trace_refresh(ui, &ui->t[0], &changed));
  ASSERT_FALSE(changed);
  ASSERT_EQ_INT(call(ui, "/api/live", ui->t[0].id, &body), 200);
  ASSERT_TRUE(strstr(body, "{\"recording\":false,\"generation\":0,") == body);
  free(body);
  etch__ui_free(ui);
  tb_free(&tr);
}

/* A live trace whose file goes (or turns to garbage) while it is followed:
 * /api/live says why, the tables in hand stay, nothing crashes. */
TEST(ui_live_trace_gone_or_garbled_keeps_its_tables) {
  tb tr;
  tb_init(&tr);
  ui_zone_trace(&tr);
  char path[4096];
  snprintf(path, sizeof path, "%s/gone.pftrace", etch_test_tmpdir());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(fd >= 0);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  ASSERT_EQ_INT(fcntl(fd, F_OFD_SETLK, &fl), 0);
  write_all(fd, tb_data(&tr), tb_len(&tr));
  etch__ui *ui;
  ASSERT_OK(etch__ui_new(&ui));
  ASSERT_OK(etch__ui_set_cache_dir(ui, etch_test_tmpdir()));
  ASSERT_OK(etch__ui_add_path(ui, path));
  etch__ui_trace *t = &ui->t[0];
  char *body = NULL;
  ASSERT_EQ_INT(call(ui, "/api/trace", t->id, &body), 200);
  free(body);
  ASSERT_EQ_INT(t->slices, 101);
  /* Garbage appended: what a reader makes of it is read, never a crash
   * (a malformed packet is left out and counted). */
  static const uint8_t junk[] = {0x0a, 0x05, 0xff, 0xff, 0xff, 0xff, 0xff,
                                 0x0a, 0x80, 0x80, 0x80, 0x80, 0x10};
  write_all(fd, junk, sizeof junk);
  bool changed;
  int rc = etch__ui_trace_refresh(ui, t, &changed);
  ASSERT_TRUE(rc == ETCH_OK || !changed);
  ASSERT_TRUE(t->db != NULL);
  /* The file goes: said, the tables stay. */
  ASSERT_EQ_INT(unlink(path), 0);
  uint64_t gen = t->generation;
  ASSERT_EQ_INT(etch__ui_trace_refresh(ui, t, &changed), ETCH_ENOTFOUND);
  ASSERT_FALSE(changed);
  ASSERT_EQ_INT(t->generation, gen);
  ASSERT_EQ_INT(call(ui, "/api/live", t->id, &body), 410);
  free(body);
  int64_t v[NCOUNTS];
  counts_of(t->db, v);
  ASSERT_TRUE(v[0] >= 101);
  close(fd);
  etch__ui_free(ui);
  tb_free(&tr);
}

/* The databases in `dir` (none if it is not there); with `all`, every
 * file (DuckDB's write-ahead logs too). */
static int files_in(const char *dir, bool all) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t k = strlen(e->d_name);
    if (e->d_name[0] != '.' &&
        (all || (k > 7 && !strcmp(e->d_name + k - 7, ".duckdb"))))
      n++;
  }
  closedir(d);
  return n;
}

/* A live trace's tables are a database file of its own in the cache
 * directory (CACHE/live), DuckDB's memory limited, removed when the
 * recording ends, and when the app ends while it is still recorded. */
TEST(ui_live_trace_database_is_a_file_removed_at_the_end) {
  tb tr;
  tb_init(&tr);
  ui_zone_trace(&tr);
  const uint8_t *data = tb_data(&tr);
  size_t len = tb_len(&tr);
  char path[4096], cache[4096], live[4200];
  snprintf(path, sizeof path, "%s/live_file.pftrace", etch_test_tmpdir());
  snprintf(cache, sizeof cache, "%s/live_file_cache", etch_test_tmpdir());
  snprintf(live, sizeof live, "%s/live", cache);
  for (int round = 0; round < 2; round++) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_TRUE(fd >= 0);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    ASSERT_EQ_INT(fcntl(fd, F_OFD_SETLK, &fl), 0);
    write_all(fd, data, len / 2);
    etch__ui *ui;
    ASSERT_OK(etch__ui_new(&ui));
    ASSERT_OK(etch__ui_set_cache_dir(ui, cache));
    ASSERT_OK(etch__ui_add_path(ui, path));
    etch__ui_trace *t = &ui->t[0];
    char *body = NULL;
    ASSERT_EQ_INT(call(ui, "/api/trace", t->id, &body), 200);
    free(body);
    ASSERT_TRUE(t->live != NULL);
    ASSERT_TRUE(etch__db_is_file(t->db));
    ASSERT_EQ_INT(files_in(live, false), 1);
    int64_t limited = 0;
    ASSERT_OK(etch__query_ints(
        t->db,
        "SELECT CAST(current_setting('memory_limit') = '244.1 MiB' AS BIGINT)",
        NULL, 0, &limited, 1));
    ASSERT_EQ_INT(limited, 1);
    write_all(fd, data + len / 2, len - len / 2);
    bool changed = false;
    ASSERT_OK(etch__ui_trace_refresh(ui, t, &changed));
    ASSERT_TRUE(changed);
    ASSERT_EQ_INT(t->slices, 101);
    ASSERT_EQ_INT(files_in(live, false), 1);
    if (round == 0) {
      /* The recording ends: the trace's cache swapped in, the live
       * database gone. */
      close(fd);
      ASSERT_OK(etch__ui_trace_refresh(ui, t, &changed));
      ASSERT_TRUE(t->live == NULL);
      ASSERT_EQ_INT(t->slices, 101);
      ASSERT_EQ_INT(files_in(live, true), 0);
      etch__ui_free(ui);
    } else {
      /* The app ends while the trace is recorded: gone too. */
      etch__ui_free(ui);
      ASSERT_EQ_INT(files_in(live, true), 0);
      close(fd);
    }
  }
  tb_free(&tr);
  unlink(path);
}

/* A session of etchd recorded into the store (etch record --system): its
 * part (.NAME.PID.part, PID the recorder's: here this process) is in the
 * list while it is written, marked recording, and opens live; when it is
 * whole its recorder gives it its name (a rename) and lets go: the trace
 * is followed to that name, read whole, and listed once, by its name. */
TEST(ui_store_part_being_recorded_is_listed_opened_live_and_followed) {
  tb tr;
  tb_init(&tr);
  ui_zone_trace(&tr);
  const uint8_t *data = tb_data(&tr);
  size_t len = tb_len(&tr);
  char store[4096], part[4200], final[4200], name[64];
  snprintf(store, sizeof store, "%s/part_store", etch_test_tmpdir());
  ASSERT_EQ_INT(mkdir(store, 0755), 0);
  snprintf(part, sizeof part, "%s/.prog-20261129-120000.%ld.part", store,
           (long)getpid());
  snprintf(final, sizeof final, "%s/prog-20261129-120000", store);
  int fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(fd >= 0);
  struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  ASSERT_EQ_INT(fcntl(fd, F_OFD_SETLK, &fl), 0);
  write_all(fd, data, len / 2);

  etch__ui *ui;
  ASSERT_OK(etch__ui_new(&ui));
  char cache[4200];
  snprintf(cache, sizeof cache, "%s/part_cache", etch_test_tmpdir());
  ASSERT_OK(etch__ui_set_cache_dir(ui, cache));
  ASSERT_OK(etch__ui_set_store(ui, store));
  char *body = NULL;
  ASSERT_EQ_INT(call(ui, "/api/traces", NULL, &body), 200);
  snprintf(name, sizeof name, "\"name\":\".prog-20261129-120000.%ld.part\"",
           (long)getpid());
  ASSERT_TRUE(strstr(body, name) != NULL);
  ASSERT_TRUE(strstr(body, "\"recording\":true") != NULL);
  free(body);
  ASSERT_EQ_INT(ui->n, 1);
  etch__ui_trace *t = &ui->t[0];
  ASSERT_EQ_INT(call(ui, "/api/trace", t->id, &body), 200);
  ASSERT_TRUE(strstr(body, "\"recording\":true,\"generation\":1,") != NULL);
  free(body);
  ASSERT_TRUE(t->live != NULL);
  int64_t half[NCOUNTS], got[NCOUNTS], whole[NCOUNTS];
  cold_counts(data, len / 2, half);
  counts_of(t->db, got);
  for (int c = 0; c < NCOUNTS; c++) ASSERT_EQ_INT(got[c], half[c]);

  /* The rest written; the recorder (this process, alive) names it and
   * lets go. */
  write_all(fd, data + len / 2, len - len / 2);
  char live[4300];
  snprintf(live, sizeof live, "%s/live", cache);
  uint64_t live_ino = db_inode(live);
  ASSERT_TRUE(live_ino != 0);
  ASSERT_EQ_INT(rename(part, final), 0);
  close(fd);
  bool changed = false;
  ASSERT_OK(etch__ui_trace_refresh(ui, t, &changed));
  ASSERT_TRUE(changed);
  ASSERT_TRUE(t->live == NULL);
  ASSERT_FALSE(t->recording);
  ASSERT_TRUE(!strcmp(t->path, final));
  ASSERT_TRUE(!strcmp(t->name, "prog-20261129-120000"));
  cold_counts(data, len, whole);
  counts_of(t->db, got);
  for (int c = 0; c < NCOUNTS; c++) ASSERT_EQ_INT(got[c], whole[c]);
  ASSERT_EQ_INT(call(ui, "/api/traces", NULL, &body), 200);
  ASSERT_TRUE(strstr(body, "\"name\":\"prog-20261129-120000\"") != NULL);
  ASSERT_TRUE(strstr(body, ".part") == NULL);
  ASSERT_TRUE(strstr(body, "\"recording\":true") == NULL);
  free(body);
  ASSERT_EQ_INT(ui->n, 1);
  /* The live database became the cache of the file under its name. */
  same_as_cold(t->db, final);
  etch__ui_free(ui);
  served_from_cache(final, cache, live_ino);
  tb_free(&tr);
  unlink(final);
}

/* Every table as queries see it, each sorted on all its columns. args.id
 * follows the order events came in (query.h): left out. */
static char *dump(etch__db *db) {
  char *all = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&all, &n);
  ASSERT_TRUE(f != NULL);
  size_t len;
  const char *t;
  for (size_t i = 0; (t = etch__query_table_name(i, &len)); i++) {
    char sql[256];
    bool is_args = len == 4 && memcmp(t, "args", 4) == 0;
    snprintf(sql, sizeof sql, "SELECT *%s FROM %.*s ORDER BY ALL",
             is_args ? " EXCLUDE (id)" : "", (int)len, t);
    char *got = qt_query(db, sql);
    fprintf(f, "== %.*s\n%s", (int)len, t, got);
    free(got);
  }
  fclose(f);
  return all;
}

/* Every table of `db` is what a cold import of the file `path` makes. */
static void same_as_cold(etch__db *db, const char *path) {
  etch__db *cold;
  ASSERT_OK(etch__db_open(&cold, NULL));
  etch__import_opts o = {.all_args = true, .allow_truncated = true,
                         .quiet = true};
  ASSERT_OK(etch__query_import_file(cold, NULL, path, &o, NULL));
  char *want = dump(cold), *got = dump(db);
  etch__db_close(cold);
  if (strcmp(want, got) != 0)
    FAIL("--- cold ---\n%s--- after the recording ---\n%s", want, got);
  ASSERT_TRUE(strstr(want, "== slice\n") != NULL);
  free(want);
  free(got);
}

/* The inode of the one database in `dir` (0: none, or more than one). */
static uint64_t db_inode(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  uint64_t ino = 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t k = strlen(e->d_name);
    if (e->d_name[0] == '.' || k <= 7 || strcmp(e->d_name + k - 7, ".duckdb"))
      continue;
    char p[8192];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (stat(p, &sb) == 0) ino = (uint64_t)sb.st_ino;
    n++;
  }
  closedir(d);
  return n == 1 ? ino : 0;
}

/* The finished file's cache in `cache`, as etch query finds it: it is
 * there (not imported), the only database there, and what a cold import
 * makes; so is what etch query on the trace opens (read on: how it opens
 * a trace that may be recorded). `live_ino`: the inode of the live
 * database it was (0: not checked). */
static void served_from_cache(const char *path, const char *cache,
                              uint64_t live_ino) {
  etch__import_opts o = {.all_args = true, .allow_truncated = true,
                         .quiet = true};
  char file[4200];
  bool imported = true;
  ASSERT_OK(etch__query_cache_file(path, cache, &o, file, sizeof file,
                                   &imported));
  ASSERT_FALSE(imported);
  ASSERT_TRUE(file[0] != '\0');
  ASSERT_EQ_INT(files_in(cache, false), 1);
  /* That database is the live one, moved: not another import. */
  struct stat sb;
  ASSERT_EQ_INT(stat(file, &sb), 0);
  if (live_ino) ASSERT_EQ_INT((uint64_t)sb.st_ino, live_ino);
  o.read_on = true;
  etch__db *db = NULL;
  imported = true;
  ASSERT_OK(etch__query_open_cached(path, cache, &o, &db, &imported));
  ASSERT_FALSE(imported);
  same_as_cold(db, path);
  etch__db_close(db);
  ASSERT_EQ_INT(files_in(cache, false), 1);
}

/* The recording ends: one last step reads to the end, and the live
 * database, a file, becomes the finished file's ordinary cache (moved out
 * of CACHE/live, opened from there), which a query then opens as it is;
 * without a cache directory (one that cannot be made) it is in memory
 * and stays there. Either way every table is what a cold import of the
 * finished file makes. */
TEST(ui_live_trace_ended_becomes_the_cache_of_the_file) {
  tb tr;
  tb_init(&tr);
  ui_zone_trace(&tr);
  const uint8_t *data = tb_data(&tr);
  size_t len = tb_len(&tr);
  char path[4096], cache[4200], live[4300], blocker[4096];
  snprintf(path, sizeof path, "%s/ended.pftrace", etch_test_tmpdir());
  snprintf(blocker, sizeof blocker, "%s/ended_not_a_dir", etch_test_tmpdir());
  int bfd = open(blocker, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(bfd >= 0);
  close(bfd);
  for (int round = 0; round < 2; round++) {
    if (round == 0)
      snprintf(cache, sizeof cache, "%s/ended_cache", etch_test_tmpdir());
    else /* under a file: never made */
      snprintf(cache, sizeof cache, "%s/cache", blocker);
    snprintf(live, sizeof live, "%s/live", cache);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_TRUE(fd >= 0);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    ASSERT_EQ_INT(fcntl(fd, F_OFD_SETLK, &fl), 0);
    write_all(fd, data, len / 3);
    etch__ui *ui;
    ASSERT_OK(etch__ui_new(&ui));
    ASSERT_OK(etch__ui_set_cache_dir(ui, cache));
    ASSERT_OK(etch__ui_add_path(ui, path));
    etch__ui_trace *t = &ui->t[0];
    char *body = NULL;
    ASSERT_EQ_INT(call(ui, "/api/trace", t->id, &body), 200);
    free(body);
    ASSERT_TRUE(t->live != NULL);
    ASSERT_EQ_INT(etch__db_is_file(t->db), round == 0);
    bool changed = false;
    write_all(fd, data + len / 3, len / 3);
    ASSERT_OK(etch__ui_trace_refresh(ui, t, &changed));
    ASSERT_TRUE(changed);
    /* The rest, and the writer lets go: one last step. */
    write_all(fd, data + 2 * (len / 3), len - 2 * (len / 3));
    uint64_t live_ino = db_inode(live);
    ASSERT_EQ_INT(live_ino != 0, round == 0);
    close(fd);
    uint64_t gen = t->generation;
    ASSERT_OK(etch__ui_trace_refresh(ui, t, &changed));
    ASSERT_TRUE(changed);
    ASSERT_EQ_INT(t->generation, gen + 1);
    ASSERT_TRUE(t->live == NULL);
    ASSERT_FALSE(t->recording);
    ASSERT_EQ_INT(t->slices, 101);
    same_as_cold(t->db, path);
    ASSERT_EQ_INT(files_in(live, true), 0);
    if (round == 0) {
      ASSERT_TRUE(etch__db_is_file(t->db));
      ASSERT_EQ_INT(call(ui, "/api/trace", t->id, &body), 200);
      ASSERT_TRUE(strstr(body, "\"recording\":false,") != NULL);
      free(body);
      etch__ui_free(ui);
      served_from_cache(path, cache, live_ino);
    } else {
      ASSERT_FALSE(etch__db_is_file(t->db));
      ASSERT_EQ_INT(call(ui, "/api/live", t->id, &body), 200);
      ASSERT_TRUE(strstr(body, "{\"recording\":false,") == body);
      ASSERT_TRUE(strstr(body, "\"slices\":101,") != NULL);
      free(body);
      etch__ui_free(ui);
    }
  }
  unlink(blocker);
  tb_free(&tr);
  unlink(path);
}

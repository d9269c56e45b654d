/*
 * multi.c - several traces in one database, to compare runs in one query:
 *
 *   etch query before.pftrace after.pftrace \
 *     "select trace, name, count(*), sum(dur) from slice group by all"
 *
 * Each trace's tables stay in a catalog of their own (t0, t1, ...): its
 * cache file ATTACHed read-only, or a catalog in memory with --no-cache.
 * The main catalog, in memory, has one view per table, the union of the
 * catalogs' tables with a first column `trace` (the path as given), and the
 * views over track on top of those. Ids (slice.id, track.id, ...) are each
 * trace's own: join on them within one trace (`using (trace, ...)`).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/containers.h"
#include "query/query.h"

/* A growing SQL text (NUL-terminated); nomem once a put failed. */
typedef struct sqlbuf {
  etch_vec v;
  bool nomem;
} sqlbuf;

static void put(sqlbuf *b, const char *s, size_t n) {
  if (!b->nomem && (etch__vec_push(&b->v, s, n) || etch__vec_cstr(&b->v)))
    b->nomem = true;
}

static void puts_(sqlbuf *b, const char *s) { put(b, s, strlen(s)); }

/* `s` as an SQL string literal: quoted, its quotes doubled. */
static void put_literal(sqlbuf *b, const char *s) {
  put(b, "'", 1);
  for (const char *p = s; *p; p++) {
    put(b, p, 1);
    if (*p == '\'') put(b, "'", 1);
  }
  put(b, "'", 1);
}

static int exec_buf(etch__db *db, sqlbuf *b) {
  if (b->nomem) return etch__error(ETCH_ENOMEM, "out of memory");
  int rc = etch__db_exec(db, (const char *)b->v.data);
  b->v.len = 0;
  if (b->v.data) b->v.data[0] = '\0';
  return rc;
}

/* Puts trace `i`'s tables in catalog t<i>. */
static int attach_one(etch__db *db, size_t i, const char *path,
                      const char *cache_dir, bool no_cache,
                      const etch__import_opts *opts, sqlbuf *b) {
  char cat[32];
  snprintf(cat, sizeof cat, "t%zu", i);
  char file[4200] = "";
  int rc = ETCH_OK;
  if (etch__query_is_db_file(path)) {
    snprintf(file, sizeof file, "%s", path);
  } else if (!no_cache) {
    rc = etch__query_cache_file(path, cache_dir, opts, file, sizeof file,
                                NULL);
    if (rc) return rc;
  }
  if (file[0]) {
    puts_(b, "ATTACH ");
    put_literal(b, file);
    puts_(b, " AS ");
    puts_(b, cat);
    puts_(b, " (READ_ONLY);");
    return exec_buf(db, b);
  }
  puts_(b, "ATTACH ':memory:' AS ");
  puts_(b, cat);
  puts_(b, ";");
  rc = exec_buf(db, b);
  if (rc) return rc;
  etch__import_opts o = opts ? *opts : (etch__import_opts){0};
  o.all_args = true;
  return etch__query_import_file(db, cat, path, &o, NULL);
}

int etch__query_open_traces(const char *const *paths, size_t n,
                            const char *cache_dir, bool no_cache,
                            const etch__import_opts *opts, etch__db **out,
                            const char **failed) {
  *out = NULL;
  *failed = NULL;
  etch__db *db;
  int rc = etch__db_open(&db, NULL);
  if (rc) return rc;
  sqlbuf b = {0};
  for (size_t i = 0; i < n && !rc; i++) {
    rc = attach_one(db, i, paths[i], cache_dir, no_cache, opts, &b);
    if (rc) *failed = paths[i];
  }
  size_t len;
  const char *t;
  for (size_t k = 0; !rc && (t = etch__query_table_name(k, &len)); k++) {
    puts_(&b, "CREATE VIEW ");
    put(&b, t, len);
    puts_(&b, " AS ");
    for (size_t i = 0; i < n; i++) {
      char from[64];
      snprintf(from, sizeof from, " AS trace, * FROM t%zu.", i);
      if (i) puts_(&b, " UNION ALL ");
      puts_(&b, "SELECT ");
      put_literal(&b, paths[i]);
      puts_(&b, from);
      put(&b, t, len);
    }
    puts_(&b, ";");
    rc = exec_buf(db, &b);
  }
  if (!rc) rc = etch__db_exec(db, etch__query_views_sql());
  etch__vec_free(&b.v);
  if (rc) {
    etch__db_close(db);
    return rc;
  }
  *out = db;
  return ETCH_OK;
}

/*
 * schema.c - the ClickHouse tables of etch load.
 *
 * They are derived from the query part's DuckDB tables (schema.c there),
 * parsed once from its CREATE text: the same names, the same columns in
 * the same order, BIGINT as Int64, DOUBLE as Float64, VARCHAR as String,
 * each Nullable unless the column is NOT NULL. A trace_id UInt64 comes
 * first. So a query written for one trace's tables reads a fleet's, with a
 * `group by trace_id`; and the rows the importer hands over map to
 * RowBinary column for column.
 *
 * Only what ClickHouse 18.16 (Debian 12's) already had: MergeTree with
 * ORDER BY, Nullable, Distributed; no LowCardinality, no codecs, no
 * EXCEPT in SELECT *. The sorting keys serve the common queries (one
 * trace; in slice, one name of a trace: a fleet's questions are about a
 * slice name, and the key lets a query read that name's rows only) and
 * hold no Nullable column (18.16 refuses those): slice.name is a String,
 * '' for a slice without a name, the one departure from the query part's
 * columns.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "fleet/fleet.h"

enum { kMaxTables = 16 };

static etch__ch_table g_tables[kMaxTables];
static size_t g_ntables;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static const struct {
  const char *table, *order_by;
} kOrder[] = {
    {"slice", "trace_id, name, ts"},  {"counter", "trace_id, track_id, ts"},
    {"args", "trace_id, arg_set_id"}, {"flow", "trace_id, slice_out"},
};

/* The columns of order_by after trace_id, for the loader to send each
 * insert's rows already in that order (the server then skips its sort). */
static void find_key(etch__ch_table *t) {
  t->key_ok = true;
  t->nkey = 0;
  bool first = true;
  for (const char *p = t->order_by; *p; first = false) {
    while (*p == ' ' || *p == ',') p++;
    size_t n = strcspn(p, " ,");
    if (!n) break;
    bool found = first && n == 8 && !strncmp(p, "trace_id", 8);
    if (first && !found) t->key_ok = false; /* sorted by trace_id first */
    for (size_t c = 0; !first && !found && c < t->ncols; c++) {
      if (strlen(t->col[c].name) != n || strncmp(t->col[c].name, p, n))
        continue;
      found = true;
      if (t->nkey == ETCH_ARRAY_SIZE(t->key) || t->col[c].nullable ||
          t->col[c].kind == ETCH__COL_F64)
        t->key_ok = false;
      else
        t->key[t->nkey++] = (int)c;
    }
    if (!found) t->key_ok = false;
    p += n;
  }
}

/* "slice( id BIGINT NOT NULL, ts BIGINT NOT NULL, ...)" */
static void parse_table(const char *text, size_t name_len) {
  etch__ch_table *t = &g_tables[g_ntables];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%.*s", (int)name_len, text);
  t->order_by = "trace_id";
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(kOrder); i++)
    if (!strcmp(kOrder[i].table, t->name)) t->order_by = kOrder[i].order_by;
  const char *p = text + name_len + 1;
  while (*p && *p != ')' && t->ncols < kChMaxCols) {
    while (*p == ' ' || *p == ',') p++;
    size_t n = strcspn(p, " ,)");
    etch__ch_col *c = &t->col[t->ncols];
    snprintf(c->name, sizeof c->name, "%.*s", (int)n, p);
    p += n;
    while (*p == ' ') p++;
    size_t tn = strcspn(p, " ,)");
    const char *base = "String";
    c->kind = ETCH__COL_STR;
    if (!strncmp(p, "BIGINT", tn)) {
      base = "Int64";
      c->kind = ETCH__COL_I64;
    } else if (!strncmp(p, "DOUBLE", tn)) {
      base = "Float64";
      c->kind = ETCH__COL_F64;
    }
    p += tn;
    size_t rest = strcspn(p, ",)");
    c->nullable = !memmem(p, rest, "NOT NULL", 8);
    p += rest;
    /* slice.name is in slice's sorting key, which cannot hold a Nullable
     * column in 18.16: a String, '' for a slice without a name. */
    if (!strcmp(t->name, "slice") && !strcmp(c->name, "name")) {
      c->nullable = false;
      c->null_empty = true;
    }
    snprintf(c->type, sizeof c->type, c->nullable ? "Nullable(%s)" : "%s",
             base);
    t->ncols++;
  }
  find_key(t);
  g_ntables++;
}

static void init_tables(void) {
  size_t len;
  const char *text;
  for (size_t i = 0; (text = etch__query_table_name(i, &len)) &&
                     g_ntables < kMaxTables;
       i++)
    parse_table(text, len);
}

const etch__ch_table *etch__ch_table_at(size_t i) {
  pthread_once(&g_once, init_tables);
  return i < g_ntables ? &g_tables[i] : NULL;
}

const etch__ch_table *etch__ch_table_find(const char *name) {
  const etch__ch_table *t;
  for (size_t i = 0; (t = etch__ch_table_at(i)); i++)
    if (!strcmp(t->name, name)) return t;
  return NULL;
}

bool etch__ch_ident_ok(const char *name) {
  size_t n = strlen(name);
  if (!n || n >= 64 || isdigit((unsigned char)name[0])) return false;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)name[i]) && name[i] != '_') return false;
  return true;
}

/* The metadata of each trace, written after its rows: a trace that has a
 * row here is loaded whole. */
static const char kTraceCols[] =
    "trace_id UInt64, file_name String, host Nullable(String),"
    " machine Nullable(String), start_ts Nullable(Int64),"
    " dur Nullable(Int64), etch_version String, size_bytes UInt64,"
    " events UInt64, loaded_at DateTime";

static void columns(FILE *out, const etch__ch_table *t) {
  fprintf(out, "trace_id UInt64");
  for (size_t c = 0; c < t->ncols; c++)
    fprintf(out, ", %s %s", t->col[c].name, t->col[c].type);
}

/* The views over track (the query part's), columns listed: 18.16 has no
 * SELECT * EXCEPT. */
static void views(FILE *out, const char *db) {
  const etch__ch_table *t = etch__ch_table_find("track");
  if (!t) return;
  static const struct {
    const char *name, *where;
    bool no_upid;
  } kViews[] = {
      {"thread_track", "type = 'thread'", true},
      {"process_track",
       "upid IS NOT NULL AND utid IS NULL AND type != 'counter'", false},
      {"counter_track", "type = 'counter'", false},
      {"process_counter_track",
       "type = 'counter' AND upid IS NOT NULL AND utid IS NULL", false},
  };
  for (size_t v = 0; v < ETCH_ARRAY_SIZE(kViews); v++) {
    fprintf(out, "CREATE VIEW IF NOT EXISTS %s.%s AS SELECT trace_id", db,
            kViews[v].name);
    for (size_t c = 0; c < t->ncols; c++)
      if (!kViews[v].no_upid || strcmp(t->col[c].name, "upid"))
        fprintf(out, ", %s", t->col[c].name);
    fprintf(out, " FROM %s.track WHERE %s;\n", db, kViews[v].where);
  }
}

void etch__ch_schema_sql(FILE *out, const char *db, etch__ch_layout layout,
                         const char *cluster) {
  const etch__ch_table *t;
  bool sharded = layout == ETCH__CH_SHARDED;
  fprintf(out, "CREATE DATABASE IF NOT EXISTS %s;\n", db);
  for (size_t i = 0; (t = etch__ch_table_at(i)); i++) {
    fprintf(out, "CREATE TABLE IF NOT EXISTS %s.%s%s (", db, t->name,
            sharded ? "_local" : "");
    columns(out, t);
    fprintf(out, ") ENGINE = MergeTree ORDER BY (%s);\n", t->order_by);
  }
  fprintf(out,
          "CREATE TABLE IF NOT EXISTS %s.trace%s (%s) ENGINE = MergeTree"
          " ORDER BY trace_id;\n",
          db, sharded ? "_local" : "", kTraceCols);
  if (sharded) {
    /* Every row of a trace on one shard (sharding key trace_id): joins
     * within a trace stay on the shard. */
    for (size_t i = 0; (t = etch__ch_table_at(i)); i++)
      fprintf(out,
              "CREATE TABLE IF NOT EXISTS %s.%s AS %s.%s_local ENGINE ="
              " Distributed(%s, %s, %s_local, trace_id);\n",
              db, t->name, db, t->name, cluster, db, t->name);
    fprintf(out,
            "CREATE TABLE IF NOT EXISTS %s.trace AS %s.trace_local ENGINE ="
            " Distributed(%s, %s, trace_local, trace_id);\n",
            db, db, cluster, db);
  }
  views(out, db);
}

/* Tables an older etch created lack the columns added since (machine_id
 * on process and thread): each table with fewer columns than this etch's
 * gets the missing ones, appended (18.16 has no ADD COLUMN IF NOT EXISTS;
 * the loader names its columns, so their order does not matter). */
static int add_missing_columns(etch__ch *ch, const char *db) {
  const etch__ch_table *t;
  char sql[512];
  for (size_t i = 0; (t = etch__ch_table_at(i)); i++) {
    uint64_t n = 0;
    snprintf(sql, sizeof sql,
             "SELECT count() FROM system.columns WHERE database = '%s' AND "
             "table = '%s'",
             db, t->name);
    int rc = etch__ch_count(ch, sql, &n);
    if (rc) return rc;
    if (n >= t->ncols + 1) continue;
    for (size_t c = 0; c < t->ncols; c++) {
      snprintf(sql, sizeof sql,
               "SELECT count() FROM system.columns WHERE database = '%s' AND "
               "table = '%s' AND name = '%s'",
               db, t->name, t->col[c].name);
      if ((rc = etch__ch_count(ch, sql, &n))) return rc;
      if (n) continue;
      snprintf(sql, sizeof sql, "ALTER TABLE %s.%s ADD COLUMN %s %s", db,
               t->name, t->col[c].name, t->col[c].type);
      if ((rc = etch__ch_exec(ch, sql, NULL, 0, NULL, 0))) return rc;
    }
  }
  return ETCH_OK;
}

int etch__ch_schema_create(etch__ch *ch, const char *db) {
  etch_vec text = {0};
  FILE *f = etch__vec_file(&text);
  if (!f) return ETCH_ENOMEM;
  etch__ch_schema_sql(f, db, ETCH__CH_LOCAL, NULL);
  if (fclose(f) != 0 || etch__vec_cstr(&text) != 0) {
    etch__vec_free(&text);
    return etch__error(ETCH_ENOMEM, "out of memory");
  }
  char *sql = (char *)text.data;
  int rc = ETCH_OK;
  for (char *s = sql, *e; !rc && *s; s = e + 1) {
    e = strchr(s, '\n'); /* one statement a line */
    if (!e) break;
    *e = '\0';
    rc = etch__ch_exec(ch, s, NULL, 0, NULL, 0);
  }
  free(sql);
  if (!rc) rc = add_missing_columns(ch, db);
  return rc;
}

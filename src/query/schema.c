/*
 * schema.c - the SQLite tables a trace is imported into, and the database
 * setup for a bulk load.
 *
 * Column names follow trace_processor's tables so that queries written for
 * Perfetto mostly work unchanged; docs/analysis.md documents every column.
 * Indexes are created after the bulk insert (building them once is much
 * cheaper than keeping them up to date row by row).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "query/query.h"

static const char kSchema[] =
    "CREATE TABLE process("
    " upid INTEGER PRIMARY KEY,"
    " pid INTEGER,"
    " name TEXT,"
    " cmdline TEXT,"
    " start_ts INTEGER,"
    " end_ts INTEGER,"
    " parent_upid INTEGER);"
    "CREATE TABLE thread("
    " utid INTEGER PRIMARY KEY,"
    " tid INTEGER,"
    " name TEXT,"
    " upid INTEGER,"
    " start_ts INTEGER,"
    " end_ts INTEGER,"
    " is_main_thread INTEGER);"
    "CREATE TABLE track("
    " id INTEGER PRIMARY KEY,"
    " name TEXT,"
    " type TEXT NOT NULL,"
    " parent_id INTEGER,"
    " uuid INTEGER,"
    " utid INTEGER,"
    " upid INTEGER,"
    " unit TEXT,"
    " unit_multiplier INTEGER,"
    " is_incremental INTEGER);"
    "CREATE VIEW thread_track AS SELECT * FROM track WHERE type = 'thread';"
    "CREATE VIEW process_track AS SELECT * FROM track"
    " WHERE upid IS NOT NULL AND utid IS NULL AND type != 'counter';"
    "CREATE VIEW counter_track AS SELECT * FROM track WHERE type = 'counter';"
    "CREATE VIEW process_counter_track AS SELECT * FROM track"
    " WHERE type = 'counter' AND upid IS NOT NULL AND utid IS NULL;"
    "CREATE TABLE slice("
    " id INTEGER PRIMARY KEY,"
    " ts INTEGER NOT NULL,"
    " dur INTEGER NOT NULL,"
    " track_id INTEGER NOT NULL,"
    " category TEXT,"
    " name TEXT,"
    " depth INTEGER NOT NULL,"
    " parent_id INTEGER,"
    " arg_set_id INTEGER,"
    " thread_ts INTEGER,"
    " thread_dur INTEGER,"
    " self_dur INTEGER);"
    "CREATE TABLE counter("
    " id INTEGER PRIMARY KEY,"
    " ts INTEGER NOT NULL,"
    " track_id INTEGER NOT NULL,"
    " value REAL,"
    " arg_set_id INTEGER);"
    "CREATE TABLE args("
    " id INTEGER PRIMARY KEY,"
    " arg_set_id INTEGER NOT NULL,"
    " flat_key TEXT,"
    " key TEXT,"
    " int_value INTEGER,"
    " string_value TEXT,"
    " real_value REAL,"
    " value_type TEXT,"
    /* The value as text whatever its type, as trace_processor's column:
     * computed when read (no cost to the import); uints as unsigned
     * (int_value holds their 64 bits, so those above INT64_MAX read
     * negative there). */
    " display_value TEXT GENERATED ALWAYS AS (CASE value_type"
    "  WHEN 'uint' THEN printf('%llu', int_value)"
    "  WHEN 'int' THEN CAST(int_value AS TEXT)"
    "  WHEN 'pointer' THEN printf('0x%llx', int_value)"
    "  WHEN 'bool' THEN CASE int_value WHEN 0 THEN 'false' ELSE 'true' END"
    "  WHEN 'real' THEN CAST(real_value AS TEXT)"
    "  ELSE string_value END) VIRTUAL);"
    "CREATE TABLE flow("
    " id INTEGER PRIMARY KEY,"
    " slice_out INTEGER NOT NULL,"
    " slice_in INTEGER NOT NULL,"
    " arg_set_id INTEGER);"
    "CREATE TABLE stats("
    " name TEXT NOT NULL,"
    " idx INTEGER,"
    " severity TEXT NOT NULL,"
    " source TEXT NOT NULL,"
    " value INTEGER NOT NULL,"
    " description TEXT);"
    "CREATE TABLE trace_bounds(start_ts INTEGER, end_ts INTEGER);"
    "CREATE TABLE slice_summary("
    " name TEXT,"
    " count INTEGER NOT NULL,"
    " total_dur INTEGER NOT NULL,"
    " self_dur INTEGER NOT NULL,"
    " max_dur INTEGER NOT NULL);";

/*
 * The indexes built at import: those lookups by id need, where SQLite would
 * otherwise scan a table once per outer row (args of a slice, flows of a
 * slice: the JSON export looks up the args of every slice), and
 * counter(track_id, ts) (counters are read per track; their rows are few
 * next to slices). Not slice(track_id, ts): sorting every slice for it was
 * most of the import's serial tail, and the documented queries do not use
 * it (joins on track_id go through track's rowid). Without it, filtering
 * slices by track scans the table, like filtering by name or parent (a
 * fraction of a second per ten million slices); so does the JSON export's
 * "does this track have slices" test, once per track. docs/analysis.md says
 * how to add it: `create index slice_track_ts on slice(track_id, ts)`.
 */
static const char kIndexes[] =
    "CREATE INDEX counter_track_ts ON counter(track_id, ts);"
    "CREATE INDEX args_set ON args(arg_set_id);"
    "CREATE INDEX flow_out ON flow(slice_out);"
    "CREATE INDEX flow_in ON flow(slice_in);";

int etch__query_exec(sqlite3 *db, const char *sql) {
  char *msg = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    int rc = etch__error(ETCH_ESQL, "SQL error: %s",
                         msg ? msg : sqlite3_errmsg(db));
    sqlite3_free(msg);
    return rc;
  }
  return ETCH_OK;
}

static int apply_pragmas(sqlite3 *db) {
  return etch__query_exec(db,
                          "PRAGMA journal_mode=OFF;"
                          "PRAGMA synchronous=OFF;"
                          "PRAGMA locking_mode=EXCLUSIVE;"
                          "PRAGMA temp_store=MEMORY;"
                          "PRAGMA cache_size=-262144;");
}

static int open_db(sqlite3 **out, const char *path, int flags) {
  /* Before SQLite initialises (later calls fail harmlessly): no memory
   * statistics, whose upkeep takes a global mutex on every allocation. */
  sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  sqlite3 *db = NULL;
  /* A connection is used by one thread at a time: no per-call mutex. */
  flags |= SQLITE_OPEN_NOMUTEX;
  int rc = sqlite3_open_v2(path ? path : ":memory:", &db, flags, NULL);
  if (rc != SQLITE_OK) {
    int err = etch__error(ETCH_EIO, "%s: cannot open database: %s",
                          path ? path : ":memory:",
                          db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return err;
  }
  *out = db;
  return ETCH_OK;
}

int etch__query_db_open(sqlite3 **out, const char *path) {
  *out = NULL;
  if (path && unlink(path) != 0 && errno != ENOENT)
    return etch__error(ETCH_EIO, "%s: cannot replace: %s", path,
                       strerror(errno));
  sqlite3 *db = NULL;
  int rc = open_db(&db, path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (rc) return rc;
  /* Larger pages make the bulk insert cheaper; set before the first table. */
  rc = etch__query_exec(db, "PRAGMA page_size=16384;");
  if (!rc) rc = apply_pragmas(db);
  if (rc) {
    sqlite3_close(db);
    return rc;
  }
  *out = db;
  return ETCH_OK;
}

int etch__query_db_open_existing(sqlite3 **out, const char *path) {
  *out = NULL;
  sqlite3 *db = NULL;
  int rc = open_db(&db, path, SQLITE_OPEN_READWRITE);
  if (rc) return rc;
  /* Fail now, not at the first query, if this is not a database. */
  rc = etch__query_exec(db, "SELECT count(*) FROM sqlite_schema;");
  if (rc) {
    sqlite3_close(db);
    return etch__error(ETCH_EFORMAT, "%s: not a usable database: %s", path,
                       etch_last_error());
  }
  *out = db;
  return ETCH_OK;
}

int etch__query_schema_create(sqlite3 *db) {
  return etch__query_exec(db, kSchema);
}

/*
 * With temp_store=MEMORY SQLite's sorter allocates every index record on
 * its own; with FILE it packs them in large blocks (and would spill sorted
 * runs to temporary files beyond cache_size), which builds the slice index
 * about a quarter faster. The setting is MEMORY again afterwards, for the
 * queries. Changing it can fail (a temporary table in use): not an error.
 */
int etch__query_schema_indexes(sqlite3 *db) {
  sqlite3_exec(db, "PRAGMA temp_store=FILE;", NULL, NULL, NULL);
  int rc = etch__query_exec(db, kIndexes);
  sqlite3_exec(db, "PRAGMA temp_store=MEMORY;", NULL, NULL, NULL);
  return rc;
}

bool etch__query_is_sqlite_file(const char *path) {
  static const char kMagic[16] = "SQLite format 3";
  char head[16];
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  size_t n = fread(head, 1, sizeof head, f);
  fclose(f);
  return n == sizeof head && memcmp(head, kMagic, sizeof head) == 0;
}

/*
 * fleet.h - the fleet part: many traces in ClickHouse, a distributed
 * column store, and SQL across them (`etch load`, `etch query
 * --clickhouse`). It sits above query in DESIGN.md's order: its rows are
 * the query part's own (the importer's, through an etch__row_sink), so a
 * trace's tables in ClickHouse hold what `etch query` would put in DuckDB,
 * with a trace_id column in front.
 *
 *  - http.c    a ClickHouse server through its HTTP interface (libcurl):
 *              one statement per request, settings as URL parameters,
 *              error bodies shown to the user, responses bounded;
 *  - schema.c  the ClickHouse tables, derived from the query part's DuckDB
 *              schema (same names, same columns, same order), plus the
 *              `trace` table of metadata;
 *  - load.c    etch load: each trace's rows as RowBinary in large batches,
 *              several files at once, a trace id from the content;
 *  - result.c  a query's result (TabSeparatedWithNamesAndTypes) printed as
 *              `etch query` prints DuckDB's.
 *
 * Everything from the server is untrusted: lengths are bounded, a
 * response cut short or not in the expected shape is an error.
 */
#ifndef ETCH_FLEET_H
#define ETCH_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/containers.h"
#include "query/query.h"
#include "query/rows.h"

/* ---- a server (http.c) ------------------------------------------------------ */

typedef struct etch__ch etch__ch;

/*
 * A connection to the server at `url` (http:// or https://, optionally
 * with user:password@ and query parameters such as ?user=...), statements
 * running in `database` (NULL: the server's default). Not shared between
 * threads: open one per thread. etch__ch_global_init once first.
 */
int etch__ch_global_init(void);
int etch__ch_open(etch__ch **out, const char *url, const char *database);
void etch__ch_close(etch__ch *ch);
/* Adds a setting (URL parameter name=value) to every later request. */
int etch__ch_setting(etch__ch *ch, const char *name, const char *value);

/* A response body: `len` bytes at `data`, NUL-terminated (base's byte
 * vector; etch__ch_text gives its bytes as text, NULL before any). */
typedef etch_vec etch__ch_buf;
static inline char *etch__ch_text(const etch__ch_buf *b) {
  return (char *)b->data;
}
static inline void etch__ch_buf_free(etch__ch_buf *b) { etch__vec_free(b); }

/*
 * Runs the statement `sql`; `body`/`len` (may be NULL/0) is the data of an
 * INSERT ... FORMAT ... (the statement then goes in the URL). The response
 * goes to `resp` (may be NULL: dropped), at most `max_resp` bytes. A
 * failure (no connection, HTTP status not 200, response cut short or too
 * long) is an error whose message holds the server's text.
 */
int etch__ch_exec(etch__ch *ch, const char *sql, const void *body, size_t len,
                  etch__ch_buf *resp, size_t max_resp);
/* The same, the body's `len` bytes written by `rd` as they are sent: up
 * to `n` bytes into `buf` a call, how many it wrote returned. */
typedef size_t (*etch__ch_reader)(void *ctx, char *buf, size_t n);
int etch__ch_exec_read(etch__ch *ch, const char *sql, etch__ch_reader rd,
                       void *ctx, size_t len, etch__ch_buf *resp,
                       size_t max_resp);
/* A statement whose answer is one unsigned number (count()). */
int etch__ch_count(etch__ch *ch, const char *sql, uint64_t *out);

/* ---- tables (schema.c) -------------------------------------------------------- */

/* A ClickHouse column of a table: name and type ("Nullable(Int64)"). */
typedef struct etch__ch_col {
  char name[32];
  char type[32];
  bool nullable;
  bool null_empty; /* not Nullable, as it is in the sorting key: NULL is '' */
  etch__col kind;  /* what the importer's writer gives for it */
} etch__ch_col;

enum { kChMaxCols = 16 };

typedef struct etch__ch_table {
  char name[32];
  etch__ch_col col[kChMaxCols]; /* after trace_id */
  size_t ncols;
  const char *order_by;
  /* The sorting key after trace_id: indexes into col, nkey of them; each
   * an Int64 or a String that is not Nullable. key_ok is false when the
   * key has another kind of column: etch does not sort that table's rows
   * then, the server does. */
  int key[2];
  size_t nkey;
  bool key_ok;
} etch__ch_table;

/* The tables the importer writes (the query part's, in its order); the
 * i-th, or NULL past the last. */
const etch__ch_table *etch__ch_table_at(size_t i);
const etch__ch_table *etch__ch_table_find(const char *name);

typedef enum etch__ch_layout {
  ETCH__CH_LOCAL = 0,   /* MergeTree tables */
  ETCH__CH_SHARDED = 1, /* <t>_local MergeTree + <t> Distributed over them */
} etch__ch_layout;

/* Writes the CREATE statements of the database `db` to `out`, each ending
 * with ";\n": the tables, `trace` and the views over track. `cluster` names
 * the remote_servers cluster of a sharded layout. */
void etch__ch_schema_sql(FILE *out, const char *db, etch__ch_layout layout,
                         const char *cluster);
/* Creates what is missing of etch__ch_schema_sql's LOCAL layout (IF NOT
 * EXISTS: tables someone made beforehand, e.g. Distributed ones, stay). */
int etch__ch_schema_create(etch__ch *ch, const char *db);
/* Whether `name` is a plain identifier ([A-Za-z_][A-Za-z0-9_]*, < 64). */
bool etch__ch_ident_ok(const char *name);

/* ---- etch load (load.c) -------------------------------------------------------- */

typedef struct etch__load_opts {
  const char *url, *database; /* database: default "etch" */
  const char *host;           /* the traces' host, NULL: none */
  int jobs;                   /* files loaded at once (>= 1) */
  bool progress;              /* a progress line on stderr */
  bool allow_truncated;
  size_t batch_bytes;         /* RowBinary bytes per INSERT (0: default) */
} etch__load_opts;

typedef struct etch__load_totals {
  size_t loaded, present, failed; /* files */
  uint64_t events, rows, bytes;   /* of the files loaded */
  double seconds;
} etch__load_totals;

/*
 * Loads the traces `paths` into the server; each failure is reported on
 * stderr with the file's name ("etch: load: PATH: ..."), the others still
 * load. Returns ETCH_OK when every file loaded or was there already.
 */
int etch__fleet_load(const char *const *paths, size_t n,
                     const etch__load_opts *opts, etch__load_totals *tot);

/* The 64-bit id of a trace: a hash of its bytes. */
uint64_t etch__fleet_trace_id(const void *data, size_t len);

/* ---- etch query --clickhouse (result.c) ------------------------------------------ */

/* Runs each statement of `sql` and prints the results that have columns
 * as etch__query_run_sql does. */
int etch__fleet_query(etch__ch *ch, const char *sql, FILE *out,
                      etch__out_mode mode);
/* Prints one answer of the server (TabSeparatedWithNamesAndTypes, `len`
 * bytes at `data`, unescaped in place) as etch__fleet_query does;
 * *printed when it had columns. ETCH_EFORMAT when it is not well-formed,
 * ETCH_ENOMEM with nothing of a table printed. */
int etch__fleet_print_answer(char *data, size_t len, FILE *out,
                             etch__out_mode mode, bool *printed);

#endif /* ETCH_FLEET_H */

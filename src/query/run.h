/*
 * run.h - the one way etch runs a query with values in it: the SQL is a
 * constant text with $1, $2, ... where the values go, the values are bound
 * with their types (never printed into the SQL), and the rows come out
 * through the cursor of query.h (etch__res_next, etch__res_i64, ...) or a
 * callback. Errors are etch errors (ETCH_ESQL) whose message is DuckDB's.
 */
#ifndef ETCH_QUERY_RUN_H
#define ETCH_QUERY_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/query.h"

/* A value bound to a query's $N. */
typedef enum etch__sql_kind {
  ETCH__SQL_AUTO = 0, /* the text `s` when it is set, else the integer `i` */
  ETCH__SQL_INT,      /* i, as BIGINT */
  ETCH__SQL_REAL,     /* f, as DOUBLE */
  ETCH__SQL_TEXT,     /* s (NULL: SQL NULL), len bytes (0: up to its NUL) */
  ETCH__SQL_BOOL,     /* i != 0, as BOOLEAN */
  ETCH__SQL_NULL,     /* NULL */
} etch__sql_kind;

typedef struct etch__sql_arg {
  etch__sql_kind kind;
  int64_t i;
  double f;
  const char *s;
  size_t len;
} etch__sql_arg;

#define ETCH__SQL_I64(v) ((etch__sql_arg){.kind = ETCH__SQL_INT, .i = (v)})
#define ETCH__SQL_F64(v) ((etch__sql_arg){.kind = ETCH__SQL_REAL, .f = (v)})
#define ETCH__SQL_STR(v) ((etch__sql_arg){.kind = ETCH__SQL_TEXT, .s = (v)})
#define ETCH__SQL_BYTES(v, n) \
  ((etch__sql_arg){.kind = ETCH__SQL_TEXT, .s = (v), .len = (n)})

/*
 * Runs `sql` (one statement) with $1..$n bound to args[0..n) as a cursor
 * read a chunk at a time (etch__res_next ... etch__res_close). Columns of
 * any type may come out; the cursor's readers know BIGINT, INTEGER,
 * HUGEINT, DOUBLE, BOOLEAN and VARCHAR (cast in the SQL otherwise).
 */
int etch__query_run(etch__db *db, const char *sql, const etch__sql_arg *args,
                    size_t n, etch__res *res);

/*
 * The first row's first `nout` columns as integers (NULL: 0) into out[];
 * no row: every one 0. The rest of the rows are not read.
 */
int etch__query_ints(etch__db *db, const char *sql, const etch__sql_arg *args,
                     size_t n, int64_t *out, size_t nout);

/* Each row to `fn` (the cursor at that row); a status other than ETCH_OK
 * from `fn` stops the rows and is the answer. */
typedef int (*etch__query_row_fn)(void *ctx, const etch__res *row);
int etch__query_each(etch__db *db, const char *sql, const etch__sql_arg *args,
                     size_t n, etch__query_row_fn fn, void *ctx);

#endif /* ETCH_QUERY_RUN_H */

/*
 * table_writer.h - writing rows into DuckDB tables through its appender.
 *
 * etch__tw (a table writer) fills the column vectors of a data chunk in
 * place, cell by cell, and hands each full chunk (2048 rows) to DuckDB's
 * appender: no SQL per row and no value object per cell (table_writer.c).
 * A piped writer inserts on a thread of its own, its chunks handed to
 * DuckDB by reference through a table function (one INSERT for the whole
 * import); a sink writer hands its rows to a row sink instead of a
 * database.
 *
 * Strings are copied into the chunk when set: they need not outlive the
 * call. Errors are kept: the first one is returned by etch__tw_finish,
 * with DuckDB's message.
 */
#ifndef ETCH_QUERY_TABLE_WRITER_H
#define ETCH_QUERY_TABLE_WRITER_H

#include <stdbool.h>
#include <stdint.h>

#include "query/query.h"

/* Column kinds of a table writer. */
typedef enum etch__col { ETCH__COL_I64, ETCH__COL_F64, ETCH__COL_STR } etch__col;

enum { kTwMaxCols = 16 };

typedef struct etch__tw_pipe etch__tw_pipe;

typedef struct etch__tw {
  duckdb_appender app;
  etch__tw_pipe *pipe;        /* or chunks appended on a thread */
  const etch__row_sink *sink; /* or rows to a sink: app is NULL */
  const char *table;          /* the sink's table (a static string) */
  duckdb_data_chunk chunk;
  idx_t ncols, n, cap;
  etch__col kind[kTwMaxCols];
  duckdb_vector vec[kTwMaxCols];
  void *data[kTwMaxCols];
  uint64_t *valid[kTwMaxCols]; /* writable validity masks, once made */
  int err;
} etch__tw;

/* Starts appending to `table` of `catalog` (NULL: the default one); `kinds`
 * are its columns, in order. */
int etch__tw_open(etch__tw *w, etch__db *db, const char *catalog,
                  const char *table, const etch__col *kinds, size_t ncols);
/* etch__tw_open, the chunks inserted by a thread of the writer's own on a
 * connection of its own (in a transaction of its own into a file, committed
 * by etch__tw_finish): the caller fills a chunk while the last one is
 * inserted. The insert is prepared here: a missing table fails the open. */
int etch__tw_open_piped(etch__tw *w, etch__db *db, const char *catalog,
                        const char *table, const etch__col *kinds,
                        size_t ncols);
/* etch__tw_open_piped, the row inserted as the SELECT list `select` (a
 * constant text over the pipe's columns c0, c1, ...) makes it: a table
 * whose columns are not the writer's (a STRUCT of several). */
int etch__tw_open_piped_as(etch__tw *w, etch__db *db, const char *catalog,
                           const char *table, const char *select,
                           const etch__col *kinds, size_t ncols);
/* Starts writing `table`'s rows (a static string) to `sink`. */
int etch__tw_open_sink(etch__tw *w, const etch__row_sink *sink,
                       const char *table, const etch__col *kinds,
                       size_t ncols);
/* Cells of the current row, by column; a cell not set is NULL. */
static inline void etch__tw_i64(etch__tw *w, idx_t col, int64_t v) {
  ((int64_t *)w->data[col])[w->n] = v;
}
static inline void etch__tw_f64(etch__tw *w, idx_t col, double v) {
  ((double *)w->data[col])[w->n] = v;
}
void etch__tw_null(etch__tw *w, idx_t col);
void etch__tw_str(etch__tw *w, idx_t col, const char *s, size_t len);
/* etch__tw_str, or NULL for a NULL `s`. */
void etch__tw_cstr(etch__tw *w, idx_t col, const char *s);
/* An id: NULL when <= 0. */
void etch__tw_id(etch__tw *w, idx_t col, int64_t id);
/* Ends the row (appends the chunk when it is full). */
void etch__tw_end_row(etch__tw *w);
/* For a piped writer: hands over what is left and lets its thread close
 * and commit while the caller goes on (etch__tw_finish waits for it). */
void etch__tw_finish_start(etch__tw *w);
/* Appends what is left, closes the appender; the first error. */
int etch__tw_finish(etch__tw *w);
/* Frees without appending what is left (after an error); after finish, a
 * no-op. */
void etch__tw_free(etch__tw *w);
/* How many piped writers' statements run now, in this process (tests). */
size_t etch__tw_pipes_running(void);

#endif /* ETCH_QUERY_TABLE_WRITER_H */

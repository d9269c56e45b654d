/*
 * rows.h - the row writer behind the importer: slice, counter, args and flow
 * rows go into batches that a second thread inserts into SQLite, so that
 * decoding (reader + importer, one core) and inserting (SQLite, the other
 * core) overlap. Rows are inserted in the order they were added. With
 * `threaded` false the batches are inserted by the caller's thread.
 *
 * Strings of slices (name, category) must stay valid until etch__rows_finish
 * (the importer interns them); arg strings are copied.
 */
#ifndef ETCH_QUERY_ROWS_H
#define ETCH_QUERY_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include <sqlite3.h>

#include "etch/reader.h"

typedef struct etch__rows etch__rows;

typedef struct etch__slice_row {
  int64_t id, ts, dur, track_id;
  int64_t parent_id;  /* 0 = NULL */
  int64_t arg_set_id; /* 0 = NULL */
  int64_t self_dur;
  uint32_t depth;
  const char *category; /* NULL = NULL */
  const char *name;
} etch__slice_row;

/* Prepares the insert statements on `db` (inside the caller's transaction)
 * and starts the inserting thread if `threaded`. */
int etch__rows_new(etch__rows **out, sqlite3 *db, bool threaded);
void etch__rows_slice(etch__rows *r, const etch__slice_row *s);
void etch__rows_counter(etch__rows *r, int64_t ts, int64_t track_id,
                        double value);
void etch__rows_arg(etch__rows *r, int64_t arg_set_id, const etch_arg *a);
void etch__rows_flow(etch__rows *r, int64_t slice_out, int64_t slice_in);
/* The first error of the inserting side so far (ETCH_OK if none). */
int etch__rows_error(const etch__rows *r);
/* Inserts what is left and stops the thread; returns the first error. */
int etch__rows_finish(etch__rows *r);
/* Stops without inserting what is left (after an error). */
void etch__rows_free(etch__rows *r);

#endif /* ETCH_QUERY_ROWS_H */

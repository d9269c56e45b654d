/*
 * rows.h - the importer's rows into DuckDB tables (or a row sink).
 *
 * etch__rows puts the importer's slice, counter, args and flow rows through
 * table writers (table_writer.h), slices in id order (see rows.c). Errors
 * are kept: the first one is returned by etch__rows_finish, with DuckDB's
 * message.
 */
#ifndef ETCH_QUERY_ROWS_H
#define ETCH_QUERY_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "etch/reader.h"
#include "query/query.h"
#include "query/table_writer.h"

typedef struct etch__rows etch__rows;

typedef struct etch__slice_row {
  int64_t id, ts, dur, track_id;
  int64_t parent_id;  /* 0 = NULL */
  int64_t arg_set_id; /* 0 = NULL */
  int64_t self_dur;
  uint32_t depth;
  const char *category; /* NULL = NULL; valid until etch__rows_finish */
  const char *name;
} etch__slice_row;

/* Rows into `db` (its catalog `catalog`), or with `sink` to the sink. */
int etch__rows_new(etch__rows **out, etch__db *db, const char *catalog,
                   const etch__row_sink *sink);
void etch__rows_slice(etch__rows *r, const etch__slice_row *s);
void etch__rows_counter(etch__rows *r, int64_t ts, int64_t track_id,
                        double value);
void etch__rows_arg(etch__rows *r, int64_t arg_set_id, const etch_arg *a);
void etch__rows_flow(etch__rows *r, int64_t slice_out, int64_t slice_in);
/* The first error so far (ETCH_OK if none). */
int etch__rows_error(const etch__rows *r);
/* Appends what is left; returns the first error. */
int etch__rows_finish(etch__rows *r);
/* Appends what is left, as etch__rows_finish, and opens the writers
 * again: rows go on with the next ids and the same keys (an import that
 * reads on, import_live.c). `flows_again`: the flow table was emptied,
 * its ids start at 1 again. Returns the first error. */
int etch__rows_flush(etch__rows *r, bool flows_again);
/* etch__rows_flush in two halves: what is left appended and every writer
 * closed (no statement of the import runs on the database after it; a
 * no-op when closed), then opened again. An import that reads on closes
 * them between steps (import.c, etch__imp_pause): a piped writer's
 * statement left running across a change of DuckDB's `threads` could hold
 * a worker thread the change waits for. */
int etch__rows_close(etch__rows *r);
int etch__rows_open(etch__rows *r);
void etch__rows_free(etch__rows *r);

/*
 * A live import saved between processes (import_save.c), after a flush:
 * the ids handed out (counter, arg, flow, next slice), and the keys of
 * slice_name (`args` false) or arg_key: *n of them, pairs[2 * (id - 1)]
 * and pairs[2 * id - 1] the key with that id (malloc'd, freed by the
 * caller; NULL with *n 0 when none, or out of memory: ETCH_ENOMEM).
 * Restoring into rows just made: the ids set, then each key in id order
 * (an arg key's strings pooled here, a slice key's kept as given: the
 * importer's); ETCH_EFORMAT for a key twice or ids out of range.
 */
void etch__rows_get_ids(const etch__rows *r, int64_t ids[4]);
int etch__rows_set_ids(etch__rows *r, const int64_t ids[4]);
int etch__rows_get_keys(const etch__rows *r, bool args, const char ***pairs,
                        size_t *n);
int etch__rows_add_key(etch__rows *r, bool args, const char *a,
                       const char *b);

#endif /* ETCH_QUERY_ROWS_H */

/*
 * order.h - etch load's rows in their table's key order (order.c): the
 * key of each row appended to a RowBinary buffer, the dictionary of the
 * key's strings, and the sort that gives the order the rows go out in.
 * Private to the fleet part (load.c).
 */
#ifndef ETCH_FLEET_ORDER_H
#define ETCH_FLEET_ORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/containers.h"
#include "fleet/fleet.h"


/*
 * The server sorts every block it is sent by the table's sorting key
 * unless the block is sorted already (it checks first): for slice, whose
 * key has the name, that sort was most of the server's work. So the rows
 * go out in key order. Each row appended to a buffer gets a record of its
 * key (trace_id, then the key's Int64 columns as unsigned numbers in the
 * same order, its String columns as ids in a dictionary of the batch's
 * strings, ranked by their bytes when the batch goes out) and of its
 * place; sorting the records (etch__fl_sort_rows) gives the order in which the
 * rows are gathered as curl sends them (gather_read).
 */
typedef struct keyrec {
  uint64_t tid, k[2], idx; /* idx: the row's place in the buffer */
} keyrec;

typedef struct keys {
  keyrec *rec; /* one per row of the buffer, in the order appended */
  uint64_t *off; /* where each row starts in the buffer */
  /* Where rec and off live: their lengths are the rows there is room for
   * (the buffer counts the rows it holds). */
  etch_vec recs, offs;
} keys;

/* The distinct strings of the key columns in a batch: id -> bytes. */
typedef struct etch__fl_sent {
  size_t off;
  uint32_t len, hash;
} etch__fl_sent;
typedef struct sdict {
  uint32_t *slot; /* id + 1, 0: empty */
  size_t nslot;
  etch_vec ent;   /* etch__fl_sent, by id */
  etch_vec arena; /* their bytes */
  size_t n;
  uint32_t *rank; /* by id, once ranked (in ranks) */
  etch_vec ranks;
} sdict;

/* Room for n rows' records in k; false: out of memory. */
bool etch__fl_keys_reserve(keys *k, size_t n);
void etch__fl_keys_free(keys *k);

/* The id of the string p[0..n) in d, added when new; false: out of
 * memory. */
bool etch__fl_sdict_id(sdict *d, const char *p, size_t n, uint64_t *id);
/* rank[id]: the place of each string among the batch's, in ClickHouse's
 * order of Strings; false: out of memory. */
bool etch__fl_sdict_rank(sdict *d);
/* Empty again (the next batch), its memory kept. */
void etch__fl_sdict_clear(sdict *d);
void etch__fl_sdict_free(sdict *d);

/* The room etch__fl_sort_rows sorts in, kept from batch to batch. */
typedef struct etch__fl_sorter {
  etch_vec tmp; /* keyrec */
  etch_vec cnt; /* size_t */
} etch__fl_sorter;

/*
 * The order in which the rows of buf[ti] go out, their table's key order:
 * `*out` is NULL when they are in that order already. A trace's rows were
 * appended together: each trace's run of records is sorted on its own,
 * the runs put in trace_id order. When the key starts with a String, a
 * run is first spread by that String's rank (one counting pass), then each
 * rank's records sorted by the rest of the key: for slice, a name's
 * slices, already close to ts order.
 */
int etch__fl_sort_rows(etch__fl_sorter *room, const etch__ch_table *t, keys *k,
                       size_t n, const sdict *dict, const keyrec **out);
void etch__fl_sorter_free(etch__fl_sorter *s);

#endif /* ETCH_FLEET_ORDER_H */

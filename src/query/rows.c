/*
 * rows.c - the importer's rows: slices, counters, args and flows mapped onto
 * the tables' columns, through table writers (table_writer.c).
 *
 * Slices: a slice's id is given at its begin and its row is written at its
 * end, so parents come after their children. A reorder window of kWindow
 * rows, indexed by id, holds rows until every smaller id has been written,
 * so that the table holds slices in id order (as a scan without ORDER BY
 * reads them). A slice still open after kWindow later slices have ended
 * (one spanning most of the trace) leaves a hole that the window skips: its
 * row comes later, out of order. Queries that need an order say ORDER BY.
 *
 * Into a database, a slice's category and name are a key_id of
 * slice_name, a row there for each pair of the importer's (interned)
 * string pointers met first; to a sink, they are strings (schema.c).
 */
#include "query/rows.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/base.h"

enum { kWindow = 1 << 16 };

/* ---- the importer's rows ------------------------------------------------------ */

enum {
  T_SLICE, T_COUNTER, T_ARGS, T_FLOW, T_SLICE_NAME, T_ARG_KEY, kTables
};

/* A pair of interned strings (a slice's category and name, an arg's flat
 * key and key) and its key_id (0: an empty slot). */
typedef struct str_pair {
  const char *a, *b;
  int64_t id;
} str_pair;

/* Pairs by their pointers: open addressing, at most half full. */
typedef struct pair_map {
  str_pair *slot;
  size_t cap, n;
  str_pair last; /* the pair looked up last */
} pair_map;

struct etch__rows {
  etch__tw t[kTables];
  /* slice_data and slice_name, args_data and arg_key, not strings. */
  bool keyed;
  pair_map slice_keys, arg_keys;
  etch_strpool arg_strings; /* args' keys are not interned by the importer */
  bool arg_strings_ok;
  int64_t counter_id, arg_id, flow_id;
  etch__db *db; /* where the writers go (etch__rows_flush opens them again) */
  const char *catalog;
  const etch__row_sink *sink;
  /* Slices waiting for a smaller id: window[id % kWindow]. */
  etch__slice_row *window;
  uint8_t *have;
  int64_t next_id; /* the smallest id not yet written or skipped */
  int64_t max_id;  /* the largest id in the window */
  bool closed;     /* etch__rows_close: no writer open */
  int local_err;
};

static const etch__col kSliceCols[] = {
    ETCH__COL_I64, ETCH__COL_I64, ETCH__COL_I64, ETCH__COL_I64,
    ETCH__COL_STR, ETCH__COL_STR, ETCH__COL_I64, ETCH__COL_I64,
    ETCH__COL_I64, ETCH__COL_I64, ETCH__COL_I64, ETCH__COL_I64};
static const etch__col kSliceDataCols[] = {
    ETCH__COL_I64, ETCH__COL_I64, ETCH__COL_I64, ETCH__COL_I64, ETCH__COL_I64,
    ETCH__COL_I64, ETCH__COL_I64, ETCH__COL_I64, ETCH__COL_I64};
/* slice_data's columns (id, ts, dur, track_id, key_id, depth, parent_id,
 * arg_set_id, self_dur) as slice_rows stores them: ts, and the rest in
 * one STRUCT (schema.c says why). */
static const char kSliceRowsSelect[] =
    "c1, {'id': c0, 'dur': c2, 'track_id': c3, 'key_id': c4, 'depth': c5,"
    " 'parent_id': c6, 'arg_set_id': c7, 'self_dur': c8}";
static const etch__col kSliceNameCols[] = {ETCH__COL_I64, ETCH__COL_STR,
                                           ETCH__COL_STR};
static const etch__col kCounterCols[] = {ETCH__COL_I64, ETCH__COL_I64,
                                         ETCH__COL_I64, ETCH__COL_F64,
                                         ETCH__COL_I64};
static const etch__col kArgDataCols[] = {
    ETCH__COL_I64, ETCH__COL_I64, ETCH__COL_I64, ETCH__COL_I64,
    ETCH__COL_STR, ETCH__COL_F64, ETCH__COL_I64, ETCH__COL_STR};
static const etch__col kArgCols[] = {
    ETCH__COL_I64, ETCH__COL_I64, ETCH__COL_STR, ETCH__COL_STR, ETCH__COL_I64,
    ETCH__COL_STR, ETCH__COL_F64, ETCH__COL_STR, ETCH__COL_STR};
static const etch__col kFlowCols[] = {ETCH__COL_I64, ETCH__COL_I64,
                                      ETCH__COL_I64, ETCH__COL_I64};

/* A writer of the importer's rows, into `db` or to `sink`. */
static int rows_open(etch__tw *w, etch__db *db, const char *catalog,
                     const etch__row_sink *sink, const char *table,
                     const etch__col *kinds, size_t n) {
  return sink ? etch__tw_open_sink(w, sink, table, kinds, n)
              : etch__tw_open(w, db, catalog, table, kinds, n);
}

/* The table writers of `r` opened. */
static int rows_open_all(etch__rows *r, etch__db *db, const char *catalog,
                         const etch__row_sink *sink) {
  int rc = ETCH_OK;
  if (!rc && sink)
    rc = rows_open(&r->t[T_SLICE], db, catalog, sink, "slice", kSliceCols,
                   ETCH_ARRAY_SIZE(kSliceCols));
  /* Most of an import's DuckDB time is slice_data's: its chunks are
   * appended on a thread of their own while the reader goes on. */
  if (!rc && !sink)
    rc = etch__tw_open_piped_as(&r->t[T_SLICE], db, catalog, "slice_rows",
                                kSliceRowsSelect, kSliceDataCols,
                                ETCH_ARRAY_SIZE(kSliceDataCols));
  if (!rc && !sink)
    rc = rows_open(&r->t[T_SLICE_NAME], db, catalog, sink, "slice_name",
                   kSliceNameCols, ETCH_ARRAY_SIZE(kSliceNameCols));
  if (!rc)
    rc = rows_open(&r->t[T_COUNTER], db, catalog, sink, "counter", kCounterCols,
                       ETCH_ARRAY_SIZE(kCounterCols));
  if (!rc && sink)
    rc = rows_open(&r->t[T_ARGS], db, catalog, sink, "args", kArgCols,
                   ETCH_ARRAY_SIZE(kArgCols));
  if (!rc && !sink)
    rc = etch__tw_open_piped(&r->t[T_ARGS], db, catalog, "args_data",
                             kArgDataCols, ETCH_ARRAY_SIZE(kArgDataCols));
  if (!rc && !sink)
    rc = rows_open(&r->t[T_ARG_KEY], db, catalog, sink, "arg_key",
                   kSliceNameCols, ETCH_ARRAY_SIZE(kSliceNameCols));
  if (!rc)
    rc = rows_open(&r->t[T_FLOW], db, catalog, sink, "flow", kFlowCols,
                       ETCH_ARRAY_SIZE(kFlowCols));
  return rc;
}

int etch__rows_new(etch__rows **out, etch__db *db, const char *catalog,
                   const etch__row_sink *sink) {
  *out = NULL;
  etch__rows *r = etch__calloc(1, sizeof *r);
  if (!r) return etch__error(ETCH_ENOMEM, "import: out of memory");
  r->window = etch__malloc(kWindow * sizeof *r->window);
  r->have = etch__calloc(kWindow, 1);
  r->next_id = 1;
  r->db = db;
  r->catalog = catalog;
  r->sink = sink;
  int rc = r->window && r->have
               ? ETCH_OK
               : etch__error(ETCH_ENOMEM, "import: out of memory");
  r->keyed = !sink;
  if (!rc) rc = rows_open_all(r, db, catalog, sink);
  if (!rc && !sink) {
    r->arg_strings_ok = etch__strpool_init(&r->arg_strings, SIZE_MAX) == 0;
    if (!r->arg_strings_ok)
      rc = etch__error(ETCH_ENOMEM, "import: out of memory");
  }
  if (rc) {
    etch__rows_free(r);
    return rc;
  }
  *out = r;
  return ETCH_OK;
}

static size_t pair_slot(const str_pair *slot, size_t cap, const char *a,
                        const char *b) {
  uint64_t h = ((uint64_t)(uintptr_t)a * 0x9e3779b97f4a7c15u) ^
               (uint64_t)(uintptr_t)b;
  h *= 0xff51afd7ed558ccdu;
  size_t i = (size_t)(h >> 32) & (cap - 1);
  while (slot[i].id && (slot[i].a != a || slot[i].b != b))
    i = (i + 1) & (cap - 1);
  return i;
}

static bool pairs_grow(pair_map *m) {
  size_t cap = m->cap ? m->cap * 2 : 256;
  str_pair *k = etch__calloc(cap, sizeof *k);
  if (!k) return false;
  for (size_t i = 0; i < m->cap; i++)
    if (m->slot[i].id) k[pair_slot(k, cap, m->slot[i].a, m->slot[i].b)] = m->slot[i];
  free(m->slot);
  m->slot = k;
  m->cap = cap;
  return true;
}

/* The key_id of the pair (a, b), its row written into `w` (id, a, b) when
 * new; 0 when out of memory. */
static int64_t pair_id(etch__rows *r, pair_map *m, etch__tw *w, const char *a,
                       const char *b) {
  if (m->last.id && m->last.a == a && m->last.b == b) return m->last.id;
  if ((m->n + 1) * 2 > m->cap && !pairs_grow(m)) {
    if (!r->local_err)
      r->local_err = etch__error(ETCH_ENOMEM, "import: out of memory");
    return 0;
  }
  size_t i = pair_slot(m->slot, m->cap, a, b);
  if (!m->slot[i].id) {
    m->slot[i] = (str_pair){a, b, (int64_t)++m->n};
    etch__tw_i64(w, 0, m->slot[i].id);
    etch__tw_cstr(w, 1, a);
    etch__tw_cstr(w, 2, b);
    etch__tw_end_row(w);
  }
  m->last = m->slot[i];
  return m->last.id;
}

static void write_slice(etch__rows *r, const etch__slice_row *s) {
  etch__tw *w = &r->t[T_SLICE];
  if (r->keyed) {
    etch__tw_i64(w, 0, s->id);
    etch__tw_i64(w, 1, s->ts);
    etch__tw_i64(w, 2, s->dur);
    etch__tw_i64(w, 3, s->track_id);
    etch__tw_i64(w, 4, pair_id(r, &r->slice_keys, &r->t[T_SLICE_NAME],
                               s->category, s->name));
    etch__tw_i64(w, 5, s->depth);
    etch__tw_id(w, 6, s->parent_id);
    etch__tw_id(w, 7, s->arg_set_id);
    etch__tw_i64(w, 8, s->self_dur);
    etch__tw_end_row(w);
    return;
  }
  etch__tw_i64(w, 0, s->id);
  etch__tw_i64(w, 1, s->ts);
  etch__tw_i64(w, 2, s->dur);
  etch__tw_i64(w, 3, s->track_id);
  etch__tw_cstr(w, 4, s->category);
  etch__tw_cstr(w, 5, s->name);
  etch__tw_i64(w, 6, s->depth);
  etch__tw_id(w, 7, s->parent_id);
  etch__tw_id(w, 8, s->arg_set_id);
  etch__tw_null(w, 9);
  etch__tw_null(w, 10);
  etch__tw_i64(w, 11, s->self_dur);
  etch__tw_end_row(w);
}

/* Writes the window's rows from next_id on, up to the first hole; with
 * `upto` > next_id, skips the holes below `upto` too. */
static void drain(etch__rows *r, int64_t upto) {
  while (r->next_id <= r->max_id) {
    size_t i = (size_t)r->next_id % kWindow;
    if (r->have[i]) {
      write_slice(r, &r->window[i]);
      r->have[i] = 0;
    } else if (r->next_id >= upto) {
      break;
    }
    r->next_id++;
  }
  if (r->next_id < upto) r->next_id = upto;
}

void etch__rows_slice(etch__rows *r, const etch__slice_row *s) {
  if (s->id < r->next_id) { /* a hole skipped: out of order */
    write_slice(r, s);
    return;
  }
  if (s->id - r->next_id >= kWindow) drain(r, s->id - kWindow + 1);
  size_t i = (size_t)s->id % kWindow;
  r->window[i] = *s;
  r->have[i] = 1;
  if (s->id > r->max_id) r->max_id = s->id;
  if (s->id == r->next_id) drain(r, 0);
}

void etch__rows_counter(etch__rows *r, int64_t ts, int64_t track_id,
                        double value) {
  etch__tw *w = &r->t[T_COUNTER];
  etch__tw_i64(w, 0, ++r->counter_id);
  etch__tw_i64(w, 1, ts);
  etch__tw_i64(w, 2, track_id);
  /* NaN is no value: NULL, which min(), max() and avg() skip. */
  if (value != value)
    etch__tw_null(w, 3);
  else
    etch__tw_f64(w, 3, value);
  etch__tw_null(w, 4);
  etch__tw_end_row(w);
}

void etch__rows_flow(etch__rows *r, int64_t slice_out, int64_t slice_in) {
  etch__tw *w = &r->t[T_FLOW];
  etch__tw_i64(w, 0, ++r->flow_id);
  etch__tw_i64(w, 1, slice_out);
  etch__tw_i64(w, 2, slice_in);
  etch__tw_null(w, 3);
  etch__tw_end_row(w);
}

static const char *value_type_name(etch_value_type t) {
  switch (t) {
    case ETCH_VALUE_BOOL: return "bool";
    case ETCH_VALUE_INT: return "int";
    case ETCH_VALUE_UINT: return "uint";
    case ETCH_VALUE_DOUBLE: return "real";
    case ETCH_VALUE_STRING: return "string";
    case ETCH_VALUE_POINTER: return "pointer";
    case ETCH_VALUE_JSON: return "json";
    default: return "null";
  }
}

/* A double as SQLite's CAST(real AS TEXT) wrote it: 15 significant digits,
 * and a ".0" on whole numbers. */
static size_t real_text(char *buf, size_t n, double v) {
  if (v != v) return (size_t)snprintf(buf, n, "NaN");
  if (v == __builtin_inf()) return (size_t)snprintf(buf, n, "Inf");
  if (v == -__builtin_inf()) return (size_t)snprintf(buf, n, "-Inf");
  int k = snprintf(buf, n, "%.15g", v);
  if (k > 0 && (size_t)k + 2 < n && !strpbrk(buf, ".eEn")) {
    memcpy(buf + k, ".0", 3);
    k += 2;
  }
  return k > 0 ? (size_t)k : 0;
}

/* The args column an arg's value goes in: int_value (4), string_value (5),
 * real_value (6); -1 for none. */
static int value_col(etch_value_type t) {
  switch (t) {
    case ETCH_VALUE_BOOL:
    case ETCH_VALUE_INT:
    case ETCH_VALUE_UINT:
    case ETCH_VALUE_POINTER: return 4;
    case ETCH_VALUE_STRING:
    case ETCH_VALUE_JSON: return 5;
    case ETCH_VALUE_DOUBLE: return 6;
    default: return -1;
  }
}

/* Sets an arg's value into its column of three (int_value at `base`,
 * string_value and real_value after it; the other two NULL). Returns the
 * length of the display text it writes into `text` for uint, pointer and
 * real values, 0 for the others. */
static size_t put_value(etch__tw *w, idx_t base, const etch_arg *a,
                        char *text, size_t cap) {
  int col = value_col(a->type);
  for (int c = 4; c <= 6; c++)
    if (c != col) etch__tw_null(w, base + (idx_t)(c - 4));
  switch (a->type) {
    case ETCH_VALUE_BOOL:
      etch__tw_i64(w, base, a->v.b ? 1 : 0);
      return 0;
    case ETCH_VALUE_INT:
      etch__tw_i64(w, base, a->v.i);
      return 0;
    case ETCH_VALUE_UINT:
      etch__tw_i64(w, base, (int64_t)a->v.u);
      return (size_t)snprintf(text, cap, "%llu", (unsigned long long)a->v.u);
    case ETCH_VALUE_POINTER:
      etch__tw_i64(w, base, (int64_t)a->v.u);
      return (size_t)snprintf(text, cap, "0x%llx", (unsigned long long)a->v.u);
    case ETCH_VALUE_DOUBLE:
      etch__tw_f64(w, base + 2, a->v.d);
      return real_text(text, cap, a->v.d);
    case ETCH_VALUE_STRING:
    case ETCH_VALUE_JSON: {
      const char *v = a->v.s ? a->v.s : "";
      etch__tw_str(w, base + 1, v, strlen(v));
      return 0;
    }
    default:
      return 0;
  }
}

/* An arg into args_data: its keys a key_id of arg_key, its value in its
 * column; display_text only for the values args' view does not display
 * from their column (schema.c). */
static void write_arg_keyed(etch__rows *r, int64_t arg_set_id,
                            const etch_arg *a) {
  etch__tw *w = &r->t[T_ARGS];
  const char *flat = a->flat_key ? a->flat_key : "";
  const char *key = a->key ? a->key : flat;
  const char *iflat = etch__strpool_get(&r->arg_strings, flat, strlen(flat));
  const char *ikey =
      key == flat ? iflat : etch__strpool_get(&r->arg_strings, key, strlen(key));
  if (!iflat || !ikey) {
    if (!r->local_err)
      r->local_err = etch__error(ETCH_ENOMEM, "import: out of memory");
    return;
  }
  int64_t key_id = pair_id(r, &r->arg_keys, &r->t[T_ARG_KEY], iflat, ikey);
  if (!key_id) return;
  etch__tw_i64(w, 0, ++r->arg_id);
  etch__tw_i64(w, 1, arg_set_id);
  etch__tw_i64(w, 2, key_id);
  char text[64];
  size_t tn = put_value(w, 3, a, text, sizeof text);
  etch__tw_i64(w, 6, (int64_t)a->type);
  if (tn)
    etch__tw_str(w, 7, text, tn);
  else
    etch__tw_null(w, 7);
  etch__tw_end_row(w);
}

void etch__rows_arg(etch__rows *r, int64_t arg_set_id, const etch_arg *a) {
  if (r->keyed) {
    write_arg_keyed(r, arg_set_id, a);
    return;
  }
  etch__tw *w = &r->t[T_ARGS];
  etch__tw_i64(w, 0, ++r->arg_id);
  etch__tw_i64(w, 1, arg_set_id);
  const char *flat = a->flat_key ? a->flat_key : "";
  etch__tw_cstr(w, 2, flat);
  etch__tw_cstr(w, 3, a->key ? a->key : flat);
  char text[64];
  size_t tn = put_value(w, 4, a, text, sizeof text);
  const char *disp = text;
  switch (a->type) {
    case ETCH_VALUE_BOOL:
      disp = a->v.b ? "true" : "false";
      tn = strlen(disp);
      break;
    case ETCH_VALUE_INT:
      tn = (size_t)snprintf(text, sizeof text, "%lld", (long long)a->v.i);
      break;
    case ETCH_VALUE_STRING:
    case ETCH_VALUE_JSON:
      disp = a->v.s ? a->v.s : "";
      tn = strlen(disp);
      break;
    case ETCH_VALUE_UINT:
    case ETCH_VALUE_POINTER:
    case ETCH_VALUE_DOUBLE:
      break;
    default:
      disp = NULL;
      break;
  }
  etch__tw_cstr(w, 7, value_type_name(a->type));
  if (disp)
    etch__tw_str(w, 8, disp, tn);
  else
    etch__tw_null(w, 8);
  etch__tw_end_row(w);
}

int etch__rows_error(const etch__rows *r) {
  if (r->local_err) return r->local_err;
  for (int i = 0; i < kTables; i++)
    if (r->t[i].err) return r->t[i].err;
  return ETCH_OK;
}

int etch__rows_finish(etch__rows *r) {
  drain(r, r->max_id + 1);
  /* The piped tables commit on their threads, at the same time. */
  for (int i = 0; i < kTables; i++) etch__tw_finish_start(&r->t[i]);
  int rc = ETCH_OK;
  for (int i = 0; i < kTables; i++) {
    int e = etch__tw_finish(&r->t[i]);
    if (!rc) rc = e;
  }
  return rc ? rc : r->local_err;
}

int etch__rows_close(etch__rows *r) {
  if (r->closed) return ETCH_OK;
  int rc = etch__rows_finish(r);
  for (int i = 0; i < kTables; i++) {
    etch__tw_free(&r->t[i]);
    memset(&r->t[i], 0, sizeof r->t[i]);
  }
  r->closed = true;
  if (rc && !r->local_err) r->local_err = rc;
  return rc;
}

int etch__rows_open(etch__rows *r) {
  if (!r->closed) return ETCH_OK;
  int rc = r->local_err ? r->local_err
                        : rows_open_all(r, r->db, r->catalog, r->sink);
  if (!rc) r->closed = false;
  if (rc && !r->local_err) r->local_err = rc;
  return rc;
}

int etch__rows_flush(etch__rows *r, bool flows_again) {
  int rc = etch__rows_close(r);
  if (flows_again) r->flow_id = 0;
  if (!rc) rc = etch__rows_open(r);
  return rc;
}

void etch__rows_get_ids(const etch__rows *r, int64_t ids[4]) {
  ids[0] = r->counter_id;
  ids[1] = r->arg_id;
  ids[2] = r->flow_id;
  ids[3] = r->next_id;
}

int etch__rows_set_ids(etch__rows *r, const int64_t ids[4]) {
  for (int i = 0; i < 4; i++)
    if (ids[i] < 0 || ids[i] > INT64_MAX / 2)
      return etch__error(ETCH_EFORMAT, "import: saved row ids out of range");
  if (ids[3] < 1 || r->max_id)
    return etch__error(ETCH_EFORMAT, "import: saved row ids out of range");
  r->counter_id = ids[0];
  r->arg_id = ids[1];
  r->flow_id = ids[2];
  r->next_id = ids[3];
  r->max_id = ids[3] - 1;
  return ETCH_OK;
}

int etch__rows_get_keys(const etch__rows *r, bool args, const char ***pairs,
                        size_t *n) {
  const pair_map *m = args ? &r->arg_keys : &r->slice_keys;
  *pairs = NULL;
  *n = 0;
  if (!m->n) return ETCH_OK;
  const char **p = etch__calloc(2 * m->n, sizeof *p);
  if (!p) return etch__error(ETCH_ENOMEM, "import: out of memory");
  for (size_t i = 0; i < m->cap; i++) {
    const str_pair *s = &m->slot[i];
    if (!s->id || (size_t)s->id > m->n) continue;
    p[2 * (s->id - 1)] = s->a;
    p[2 * s->id - 1] = s->b;
  }
  *pairs = p;
  *n = m->n;
  return ETCH_OK;
}

int etch__rows_add_key(etch__rows *r, bool args, const char *a,
                       const char *b) {
  pair_map *m = args ? &r->arg_keys : &r->slice_keys;
  if (args) {
    if (!a || !b || !r->arg_strings_ok)
      return etch__error(ETCH_EFORMAT, "import: a saved arg key without text");
    a = etch__strpool_get(&r->arg_strings, a, strlen(a));
    b = etch__strpool_get(&r->arg_strings, b, strlen(b));
    if (!a || !b) return etch__error(ETCH_ENOMEM, "import: out of memory");
  }
  if ((m->n + 1) * 2 > m->cap && !pairs_grow(m))
    return etch__error(ETCH_ENOMEM, "import: out of memory");
  size_t i = pair_slot(m->slot, m->cap, a, b);
  if (m->slot[i].id)
    return etch__error(ETCH_EFORMAT, "import: a saved key twice");
  m->slot[i] = (str_pair){a, b, (int64_t)++m->n};
  return ETCH_OK;
}

void etch__rows_free(etch__rows *r) {
  if (!r) return;
  for (int i = 0; i < kTables; i++) etch__tw_free(&r->t[i]);
  free(r->slice_keys.slot);
  free(r->arg_keys.slot);
  if (r->arg_strings_ok) etch__strpool_free(&r->arg_strings);
  free(r->window);
  free(r->have);
  free(r);
}

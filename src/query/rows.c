/*
 * rows.c - batches of rows inserted into SQLite by a second thread.
 *
 * The producer (the importer, on the reader's thread) fills one batch at a
 * time out of a ring of kBatches; a full batch is handed over under a mutex
 * and the producer moves to the next free one, waiting only when the
 * inserting thread is kBatches - 1 batches behind. Before handing a batch
 * over, the producer works out the order of its rows (order_batch: slices
 * by id, then each other table's rows as added), so that the inserting
 * thread, which bounds the import, only binds and steps. The inserting
 * thread takes batches in ring order. After an SQLite error the inserting thread keeps releasing
 * batches without inserting them, so the producer never blocks for good;
 * the error is reported at the next hand-over and by etch__rows_finish.
 */
#include "query/rows.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* Inserts take 1, 2, 4, ... kMultiRows rows (kSizes statements). */
enum { kOpsPerBatch = 8192, kBatches = 4, kSizes = 6, kMultiRows = 32 };

/*
 * OP_SLICE_AUTO is not a kind of op but a statement: a slice inserted
 * without its id, which SQLite then takes as the largest rowid + 1.
 */
typedef enum op_kind {
  OP_SLICE,
  OP_COUNTER,
  OP_ARG,
  OP_FLOW,
  OP_SLICE_AUTO,
  kStmtKinds
} op_kind;

/* Per statement kind: the insert's table, columns and their number. */
static const char *const kInsert[kStmtKinds] = {
    "INSERT INTO slice(id, ts, dur, track_id, category, name, depth, "
    "parent_id, arg_set_id, self_dur) VALUES",
    "INSERT INTO counter(ts, track_id, value) VALUES",
    "INSERT INTO args(arg_set_id, flat_key, key, int_value, string_value, "
    "real_value, value_type) VALUES",
    "INSERT INTO flow(slice_out, slice_in) VALUES",
    "INSERT INTO slice(ts, dur, track_id, category, name, depth, "
    "parent_id, arg_set_id, self_dur) VALUES"};
static const int kCols[kStmtKinds] = {10, 3, 7, 2, 9};

/* One row. Arg strings live in the batch's arena (offset, length). */
typedef struct op {
  uint8_t kind;
  uint8_t vtype;   /* etch_value_type of an arg */
  uint8_t auto_id; /* slice: inserted without its id (see order_batch) */
  uint32_t depth;
  int64_t v[7];
  double d;
  const char *s1, *s2; /* slice category, name (interned) */
  uint32_t off[3], len[3]; /* arg strings in the arena; slice: len[0..1] */
} op;

typedef struct batch {
  op *ops;
  size_t n;
  op **order; /* the ops in insertion order (order_batch) */
  char *arena;
  size_t used, cap;
  bool ready; /* handed over, not yet inserted */
} batch;

/*
 * What a statement parameter holds. Bindings survive sqlite3_reset, and a
 * bind call costs more in SQLite than the comparison: a value already bound
 * at that parameter is not bound again. Only values that stay valid are
 * remembered (integers, reals, NULL, interned and static strings); arena
 * strings are bound every time, their bytes change between batches.
 */
typedef struct bound {
  uint8_t type; /* 0 unknown, 1 NULL, 2 int, 3 real, 4 stable text */
  int64_t i;    /* int value, or text length */
  const void *p; /* stable text */
  double d;
} bound;

typedef struct stmt {
  sqlite3_stmt *st;
  bound *b; /* per parameter, 1-based index - 1 */
} stmt;

struct etch__rows {
  sqlite3 *db;
  /* Per statement kind: inserts of 1 << k rows, k < kSizes. */
  stmt ins[kStmtKinds][kSizes];
  /* Producer side (order_batch): the largest slice id handed over so far,
   * and room for the slices of a batch that came after a larger id. */
  int64_t max_slice_id;
  op **late;
  const op *pending[kMultiRows]; /* rows of one statement to insert */
  bool threaded, started, mutex_ready;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  batch b[kBatches];
  size_t fill;  /* producer's batch */
  size_t drain; /* inserting thread's next batch */
  bool stop;
  int err;          /* first error of the inserting side (under mu) */
  char errmsg[256]; /* its message: the error slot is per thread */
  int local_err;    /* producer-side errors (memory) */
};

/* ---- inserting side ------------------------------------------------------------ */

/* `code` ETCH_ESQL (SQLite's message) or ETCH_ENOMEM. */
static void set_err(etch__rows *r, int code, const char *what) {
  pthread_mutex_lock(&r->mu);
  if (!r->err) {
    if (code == ETCH_ENOMEM)
      snprintf(r->errmsg, sizeof r->errmsg, "import: out of memory");
    else
      snprintf(r->errmsg, sizeof r->errmsg, "import: %s: %s", what,
               sqlite3_errmsg(r->db));
    r->err = code;
  }
  pthread_mutex_unlock(&r->mu);
}

static int prepare(etch__rows *r, int kind, int k);

static void bind_null(const stmt *x, int col) {
  bound *b = &x->b[col - 1];
  if (b->type == 1) return;
  b->type = 1;
  sqlite3_bind_null(x->st, col);
}

static void bind_i64(const stmt *x, int col, int64_t v) {
  bound *b = &x->b[col - 1];
  if (b->type == 2 && b->i == v) return;
  b->type = 2;
  b->i = v;
  sqlite3_bind_int64(x->st, col, v);
}

static void bind_real(const stmt *x, int col, double v) {
  bound *b = &x->b[col - 1];
  if (b->type == 3 && memcmp(&b->d, &v, sizeof v) == 0) return;
  b->type = 3;
  b->d = v;
  sqlite3_bind_double(x->st, col, v);
}

/* `s` (length `n`) stays valid until the rows are finished; NULL = NULL. */
static void bind_stable_text(const stmt *x, int col, const char *s,
                             uint32_t n) {
  if (!s) {
    bind_null(x, col);
    return;
  }
  bound *b = &x->b[col - 1];
  if (b->type == 4 && b->p == s && b->i == (int64_t)n) return;
  b->type = 4;
  b->p = s;
  b->i = (int64_t)n;
  sqlite3_bind_text(x->st, col, s, (int)n, SQLITE_STATIC);
}

/* Arena text: valid for this batch only, bound every time. */
static void bind_arena_text(const stmt *x, int col, const char *s,
                            uint32_t n) {
  x->b[col - 1].type = 0;
  sqlite3_bind_text(x->st, col, s, (int)n, SQLITE_STATIC);
}

static void bind_id(const stmt *x, int col, int64_t id) {
  if (id > 0)
    bind_i64(x, col, id);
  else
    bind_null(x, col);
}

static const char *value_type_name(uint8_t t) {
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

/*
 * Binds row `o` at parameter `p` (1-based) onward. A slice's id is bound
 * only when `auto_id` is false; otherwise the statement has no id column
 * and SQLite gives the next rowid, which the caller made sure is the
 * slice's id.
 */
static void bind_op(const stmt *x, int p, const batch *b, const op *o,
                    bool auto_id) {
  switch (o->kind) {
    case OP_SLICE:
      if (auto_id)
        p--;
      else
        bind_i64(x, p, o->v[0]);
      bind_i64(x, p + 1, o->v[1]);
      bind_i64(x, p + 2, o->v[2]);
      bind_i64(x, p + 3, o->v[3]);
      bind_stable_text(x, p + 4, o->s1, o->len[0]);
      bind_stable_text(x, p + 5, o->s2, o->len[1]);
      bind_i64(x, p + 6, o->depth);
      bind_id(x, p + 7, o->v[4]);
      bind_id(x, p + 8, o->v[5]);
      bind_i64(x, p + 9, o->v[6]);
      break;
    case OP_COUNTER:
      bind_i64(x, p, o->v[1]);
      bind_i64(x, p + 1, o->v[3]);
      bind_real(x, p + 2, o->d);
      break;
    case OP_FLOW:
      bind_i64(x, p, o->v[0]);
      bind_i64(x, p + 1, o->v[1]);
      break;
    default: /* OP_ARG */
      bind_i64(x, p, o->v[0]);
      bind_arena_text(x, p + 1, b->arena + o->off[0], o->len[0]);
      bind_arena_text(x, p + 2, b->arena + o->off[1], o->len[1]);
      switch (o->vtype) {
        case ETCH_VALUE_BOOL:
        case ETCH_VALUE_INT:
        case ETCH_VALUE_UINT:
        case ETCH_VALUE_POINTER:
          bind_i64(x, p + 3, o->v[1]);
          bind_null(x, p + 4);
          bind_null(x, p + 5);
          break;
        case ETCH_VALUE_DOUBLE:
          bind_null(x, p + 3);
          bind_null(x, p + 4);
          bind_real(x, p + 5, o->d);
          break;
        case ETCH_VALUE_STRING:
        case ETCH_VALUE_JSON:
          bind_null(x, p + 3);
          bind_arena_text(x, p + 4, b->arena + o->off[2], o->len[2]);
          bind_null(x, p + 5);
          break;
        default:
          bind_null(x, p + 3);
          bind_null(x, p + 4);
          bind_null(x, p + 5);
          break;
      }
      {
        const char *vt = value_type_name(o->vtype);
        bind_stable_text(x, p + 6, vt, (uint32_t)strlen(vt));
      }
      break;
  }
}

static bool step(etch__rows *r, const stmt *x) {
  int rc = sqlite3_step(x->st);
  sqlite3_reset(x->st);
  if (rc == SQLITE_DONE) return true;
  set_err(r, ETCH_ESQL, "insert");
  return false;
}

/*
 * Inserts the `n` rows of r->pending (n <= kMultiRows), all of statement
 * kind `kind`, in their order: kMultiRows rows per statement where
 * possible (one statement per row costs more in SQLite than binding), a
 * shorter tail in statements of 16, 8, ... 1 rows. Returns false after an
 * SQLite error.
 */
static bool flush(etch__rows *r, int kind, const batch *b, size_t n) {
  size_t i = 0;
  for (int k = kSizes - 1; k >= 0 && i < n; k--) {
    size_t rows = (size_t)1 << k;
    if (n - i < rows) continue;
    const stmt *x = &r->ins[kind][k];
    if (!x->st) {
      /* Prepared at first use: small imports need few of them. */
      int rc = prepare(r, kind, k);
      if (rc) {
        set_err(r, rc == SQLITE_NOMEM ? ETCH_ENOMEM : ETCH_ESQL, "prepare");
        return false;
      }
    }
    for (size_t j = 0; j < rows; j++)
      bind_op(x, 1 + (int)j * kCols[kind], b, r->pending[i + j],
              kind == OP_SLICE_AUTO);
    if (!step(r, x)) return false;
    i += rows;
  }
  return true;
}

/*
 * Inserts the rows of one batch in the order order_batch gave them: table
 * by table (each table's rows keep their order; the order between tables
 * does not matter), slices by id. Consecutive rows of one statement kind go
 * in together. Returns false after an SQLite error.
 */
static bool apply(etch__rows *r, const batch *b) {
  int kind = -1;
  size_t np = 0;
  for (size_t i = 0; i < b->n; i++) {
    const op *o = b->order[i];
    int k = o->kind;
    if (k == OP_SLICE && o->auto_id) k = OP_SLICE_AUTO;
    if (k != kind || np == kMultiRows) {
      if (np && !flush(r, kind, b, np)) return false;
      np = 0;
      kind = k;
    }
    r->pending[np++] = o;
  }
  return !np || flush(r, kind, b, np);
}

static void *insert_thread(void *arg) {
  etch__rows *r = arg;
  for (;;) {
    batch *b = &r->b[r->drain];
    pthread_mutex_lock(&r->mu);
    while (!b->ready && !r->stop) pthread_cond_wait(&r->cv, &r->mu);
    if (!b->ready) { /* stopped and drained */
      pthread_mutex_unlock(&r->mu);
      break;
    }
    bool ok = !r->err;
    pthread_mutex_unlock(&r->mu);
    if (ok) apply(r, b);
    pthread_mutex_lock(&r->mu);
    b->ready = false;
    b->n = 0;
    b->used = 0;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    r->drain = (r->drain + 1) % kBatches;
  }
  return NULL;
}

/* ---- producing side ------------------------------------------------------------ */

/* The inserting side's error without touching the error slot. */
static int rows_err_peek(etch__rows *r) {
  pthread_mutex_lock(&r->mu);
  int err = r->err;
  pthread_mutex_unlock(&r->mu);
  return err;
}

static int cmp_slice_id(const void *a, const void *b) {
  int64_t x = (*(const op *const *)a)->v[0], y = (*(const op *const *)b)->v[0];
  return (x > y) - (x < y);
}

/*
 * The order in which the inserting side takes a batch's rows, worked out
 * here so that the thread that bounds the import does less.
 *
 * Slices first, by id: the rows then mostly append at the end of the
 * table's b-tree, which SQLite does much faster (and with full pages) than
 * inserting in the middle. A slice's row is added when it ends but its id
 * is given at its begin, so most rows come in id order and a few (the
 * parents, ending after their children) come late: the rows in order are
 * kept as they are, the late ones sorted apart and merged in. A row whose
 * id is one above the largest id so far is marked auto_id: it goes in
 * without an id and SQLite takes the next rowid (that id) from the end of
 * the table, with no search for it and no check that it is free. Other
 * rows (late parents, the first row after a gap left by a slice still
 * open) go in with their id. Batches are inserted in the order they are
 * handed over, so the largest id so far is known here.
 *
 * Then counters, args and flows, each in the order they were added.
 */
static void order_batch(etch__rows *r, batch *b) {
  op **run = b->order, **late = r->late;
  size_t nrun = 0, nlate = 0;
  for (size_t i = 0; i < b->n; i++) {
    op *o = &b->ops[i];
    if (o->kind != OP_SLICE) continue;
    if (!nrun || o->v[0] > run[nrun - 1]->v[0])
      run[nrun++] = o;
    else
      late[nlate++] = o;
  }
  size_t n = nrun + nlate;
  if (nlate) {
    qsort(late, nlate, sizeof *late, cmp_slice_id);
    /* Merge from the back, in place: b->order has room for both. */
    size_t i = nrun, j = nlate, k = n;
    while (j) {
      if (i && run[i - 1]->v[0] > late[j - 1]->v[0])
        run[--k] = run[--i];
      else
        run[--k] = late[--j];
    }
  }
  for (size_t i = 0; i < n; i++) {
    op *o = run[i];
    o->auto_id = o->v[0] == r->max_slice_id + 1;
    if (o->v[0] > r->max_slice_id) r->max_slice_id = o->v[0];
  }
  for (int kind = OP_COUNTER; kind <= OP_FLOW; kind++)
    for (size_t i = 0; i < b->n; i++)
      if (b->ops[i].kind == kind) run[n++] = &b->ops[i];
}

/* Hands the current batch over and moves to the next one. */
static void submit(etch__rows *r) {
  batch *b = &r->b[r->fill];
  if (!b->n) return;
  order_batch(r, b);
  if (!r->threaded) {
    if (!rows_err_peek(r)) apply(r, b);
    b->n = 0;
    b->used = 0;
    return;
  }
  pthread_mutex_lock(&r->mu);
  b->ready = true;
  pthread_cond_broadcast(&r->cv);
  r->fill = (r->fill + 1) % kBatches;
  while (r->b[r->fill].ready) pthread_cond_wait(&r->cv, &r->mu);
  pthread_mutex_unlock(&r->mu);
}

static op *next_op(etch__rows *r) {
  batch *b = &r->b[r->fill];
  if (b->n == kOpsPerBatch) {
    submit(r);
    b = &r->b[r->fill];
  }
  return &b->ops[b->n++];
}

/* Copies `s` into the batch arena; false when out of memory. */
static bool arena_put(etch__rows *r, const char *s, uint32_t *off,
                      uint32_t *len) {
  batch *b = &r->b[r->fill];
  size_t n = s ? strlen(s) : 0;
  if (n > UINT32_MAX / 2) n = UINT32_MAX / 2;
  if (b->used + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 65536;
    while (cap < b->used + n + 1) cap *= 2;
    char *a = etch__realloc(b->arena, cap);
    if (!a) return false;
    b->arena = a;
    b->cap = cap;
  }
  memcpy(b->arena + b->used, s ? s : "", n);
  b->arena[b->used + n] = '\0';
  *off = (uint32_t)b->used;
  *len = (uint32_t)n;
  b->used += n + 1;
  return true;
}

void etch__rows_slice(etch__rows *r, const etch__slice_row *s) {
  op *o = next_op(r);
  o->kind = OP_SLICE;
  o->depth = s->depth;
  o->v[0] = s->id;
  o->v[1] = s->ts;
  o->v[2] = s->dur;
  o->v[3] = s->track_id;
  o->v[4] = s->parent_id;
  o->v[5] = s->arg_set_id;
  o->v[6] = s->self_dur;
  o->s1 = s->category;
  o->s2 = s->name;
  o->len[0] = s->category ? (uint32_t)strlen(s->category) : 0;
  o->len[1] = s->name ? (uint32_t)strlen(s->name) : 0;
}

void etch__rows_counter(etch__rows *r, int64_t ts, int64_t track_id,
                        double value) {
  op *o = next_op(r);
  o->kind = OP_COUNTER;
  o->v[1] = ts;
  o->v[3] = track_id;
  o->d = value;
}

void etch__rows_flow(etch__rows *r, int64_t slice_out, int64_t slice_in) {
  op *o = next_op(r);
  o->kind = OP_FLOW;
  o->v[0] = slice_out;
  o->v[1] = slice_in;
}

void etch__rows_arg(etch__rows *r, int64_t arg_set_id, const etch_arg *a) {
  op *o = next_op(r);
  o->kind = OP_ARG;
  o->vtype = (uint8_t)a->type;
  o->v[0] = arg_set_id;
  bool ok = arena_put(r, a->flat_key, &o->off[0], &o->len[0]) &&
            arena_put(r, a->key ? a->key : a->flat_key, &o->off[1],
                      &o->len[1]);
  switch (a->type) {
    case ETCH_VALUE_BOOL: o->v[1] = a->v.b ? 1 : 0; break;
    case ETCH_VALUE_INT: o->v[1] = a->v.i; break;
    case ETCH_VALUE_UINT:
    case ETCH_VALUE_POINTER: o->v[1] = (int64_t)a->v.u; break;
    case ETCH_VALUE_DOUBLE: o->d = a->v.d; break;
    case ETCH_VALUE_STRING:
    case ETCH_VALUE_JSON:
      ok = ok && arena_put(r, a->v.s, &o->off[2], &o->len[2]);
      break;
    default: break;
  }
  if (!ok) {
    r->b[r->fill].n--; /* drop the half-made row */
    if (!r->local_err)
      r->local_err = etch__error(ETCH_ENOMEM, "import: out of memory");
  }
}

int etch__rows_error(const etch__rows *r) {
  if (r->local_err) return r->local_err;
  etch__rows *m = (etch__rows *)r;
  pthread_mutex_lock(&m->mu);
  int err = r->err ? etch__error(r->err, "%s", r->errmsg) : ETCH_OK;
  pthread_mutex_unlock(&m->mu);
  return err;
}

/* ---- life cycle ------------------------------------------------------------------ */

/* Prepares the insert of `rows` rows of `kind`. */
/*
 * Prepares r->ins[kind][k], the insert of 1 << k rows of `kind`. Returns
 * SQLITE_OK, SQLITE_NOMEM or SQLite's error (message in the db handle).
 */
static int prepare(etch__rows *r, int kind, int k) {
  stmt *x = &r->ins[kind][k];
  int rows = 1 << k;
  size_t cap =
      strlen(kInsert[kind]) + (size_t)rows * (size_t)(kCols[kind] * 2 + 3);
  char *sql = etch__malloc(cap);
  if (!sql) return SQLITE_NOMEM;
  size_t n = (size_t)snprintf(sql, cap, "%s", kInsert[kind]);
  for (int i = 0; i < rows; i++) {
    sql[n++] = i ? ',' : ' ';
    sql[n++] = '(';
    for (int c = 0; c < kCols[kind]; c++) {
      if (c) sql[n++] = ',';
      sql[n++] = '?';
    }
    sql[n++] = ')';
  }
  sql[n] = '\0';
  int rc = sqlite3_prepare_v3(r->db, sql, -1, SQLITE_PREPARE_PERSISTENT,
                              &x->st, NULL);
  free(sql);
  if (rc != SQLITE_OK) return rc;
  x->b = etch__calloc((size_t)rows * (size_t)kCols[kind], sizeof *x->b);
  if (x->b) return SQLITE_OK;
  sqlite3_finalize(x->st);
  x->st = NULL;
  return SQLITE_NOMEM;
}

int etch__rows_new(etch__rows **out, sqlite3 *db, bool threaded) {
  *out = NULL;
  etch__rows *r = etch__calloc(1, sizeof *r);
  if (!r) return ETCH_ENOMEM;
  r->db = db;
  int rc = ETCH_OK;
  /* The one-row inserts now, which checks the schema; the others (more
   * rows) when first used. */
  for (int kind = 0; !rc && kind < kStmtKinds; kind++) {
    int src = prepare(r, kind, 0);
    if (src == SQLITE_NOMEM)
      rc = ETCH_ENOMEM;
    else if (src)
      rc = etch__error(ETCH_ESQL, "import: %s", sqlite3_errmsg(db));
  }
  r->late = etch__malloc(kOpsPerBatch * sizeof *r->late);
  if (!r->late) rc = ETCH_ENOMEM;
  for (size_t i = 0; !rc && i < kBatches; i++) {
    r->b[i].ops = etch__malloc(kOpsPerBatch * sizeof(op));
    r->b[i].order = etch__malloc(kOpsPerBatch * sizeof(op *));
    if (!r->b[i].ops || !r->b[i].order) rc = ETCH_ENOMEM;
  }
  if (rc) {
    etch__rows_free(r);
    return rc;
  }
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  r->mutex_ready = true;
  r->threaded = threaded;
  if (threaded) {
    if (pthread_create(&r->thread, NULL, insert_thread, r) != 0)
      r->threaded = false; /* insert inline instead */
    else
      r->started = true;
  }
  *out = r;
  return ETCH_OK;
}

static void stop_thread(etch__rows *r) {
  if (!r->started) return;
  pthread_mutex_lock(&r->mu);
  r->stop = true;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  pthread_join(r->thread, NULL);
  r->started = false;
}

int etch__rows_finish(etch__rows *r) {
  if (!r->local_err) submit(r);
  stop_thread(r);
  r->threaded = false;
  return etch__rows_error(r);
}

void etch__rows_free(etch__rows *r) {
  if (!r) return;
  stop_thread(r);
  for (int kind = 0; kind < kStmtKinds; kind++) {
    for (int k = 0; k < kSizes; k++) {
      sqlite3_finalize(r->ins[kind][k].st);
      free(r->ins[kind][k].b);
    }
  }
  free(r->late);
  for (size_t i = 0; i < kBatches; i++) {
    free(r->b[i].ops);
    free(r->b[i].order);
    free(r->b[i].arena);
  }
  if (r->mutex_ready) {
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
  }
  free(r);
}

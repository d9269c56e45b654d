/*
 * table_writer.c - rows into DuckDB: data chunks filled in place and handed
 * to the appender.
 *
 * A table writer owns one data chunk. A cell is a store into the column's
 * vector (int64 and double columns), or a copy into the vector's string
 * heap (DuckDB's own, short strings inline); NULL clears the row's bit in
 * the column's validity mask. A full chunk goes to duckdb_append_data_chunk
 * and is reset. The chunk's vectors are looked up again after each reset.
 * A piped writer hands its full chunks to a thread of its own that inserts
 * them on a connection of its own (by reference, through a table function:
 * below); a sink writer hands them to a row sink.
 */
#include "query/table_writer.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base/base.h"

/* ---- table writer ----------------------------------------------------------- */

static void tw_fail(etch__tw *w, const char *what) {
  if (w->err) return;
  const char *msg = w->app ? duckdb_appender_error(w->app) : NULL;
  w->err = etch__error(ETCH_ESQL, "import: %s: %s", what,
                       msg ? msg : "DuckDB error");
}

static void tw_lookup(etch__tw *w) {
  for (idx_t c = 0; c < w->ncols; c++) {
    w->vec[c] = duckdb_data_chunk_get_vector(w->chunk, c);
    w->data[c] = duckdb_vector_get_data(w->vec[c]);
    w->valid[c] = NULL;
  }
}

/* The chunk, its columns of `kinds`. */
static int tw_chunk(etch__tw *w, const etch__col *kinds, size_t ncols) {
  duckdb_logical_type types[kTwMaxCols];
  static const duckdb_type kType[] = {DUCKDB_TYPE_BIGINT, DUCKDB_TYPE_DOUBLE,
                                      DUCKDB_TYPE_VARCHAR};
  for (size_t c = 0; c < ncols; c++) {
    w->kind[c] = kinds[c];
    types[c] = duckdb_create_logical_type(kType[kinds[c]]);
  }
  w->ncols = ncols;
  w->chunk = duckdb_create_data_chunk(types, ncols);
  for (size_t c = 0; c < ncols; c++) duckdb_destroy_logical_type(&types[c]);
  if (!w->chunk) {
    etch__tw_free(w);
    return etch__error(ETCH_ENOMEM, "import: out of memory");
  }
  w->cap = duckdb_vector_size();
  tw_lookup(w);
  return ETCH_OK;
}

int etch__tw_open_sink(etch__tw *w, const etch__row_sink *sink,
                       const char *table, const etch__col *kinds,
                       size_t ncols) {
  memset(w, 0, sizeof *w);
  if (ncols > kTwMaxCols) return etch__error(ETCH_EINVAL, "too many columns");
  w->sink = sink;
  w->table = table;
  return tw_chunk(w, kinds, ncols);
}

int etch__tw_open(etch__tw *w, etch__db *db, const char *catalog,
                  const char *table, const etch__col *kinds, size_t ncols) {
  memset(w, 0, sizeof *w);
  if (ncols > kTwMaxCols) return etch__error(ETCH_EINVAL, "too many columns");
  if (duckdb_appender_create_ext(etch__db_con(db), catalog, NULL, table,
                                 &w->app) != DuckDBSuccess) {
    tw_fail(w, table);
    int rc = w->err;
    duckdb_appender_destroy(&w->app);
    w->app = NULL;
    return rc;
  }
  return tw_chunk(w, kinds, ncols);
}

/* A column's validity mask is made writable at its first NULL in a chunk
 * (a column without NULLs keeps none, which DuckDB reads faster) and kept
 * until the chunk is reset; a NULL clears the row's bit. */
void etch__tw_null(etch__tw *w, idx_t col) {
  uint64_t *v = w->valid[col];
  if (!v) {
    duckdb_vector_ensure_validity_writable(w->vec[col]);
    v = w->valid[col] = duckdb_vector_get_validity(w->vec[col]);
  }
  v[w->n / 64] &= ~((uint64_t)1 << (w->n % 64));
}

/* The length of the valid UTF-8 sequence at `s` (base's check, ASCII
 * inline). */
static inline size_t utf8_seq(const unsigned char *s, size_t avail) {
  return s[0] < 0x80 ? 1 : etch__utf8_seq(s, avail);
}

/*
 * DuckDB's VARCHAR holds UTF-8 only (it stores NULL for text that is not):
 * a byte of a trace's string that is not part of a valid sequence becomes
 * U+FFFD, as the JSON export writes it.
 */
void etch__tw_str(etch__tw *w, idx_t col, const char *s, size_t len) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0;
  while (i < len && u[i] < 0x80) i++;
  for (size_t n; i < len && (n = utf8_seq(u + i, len - i)); i += n) {
  }
  if (i == len) {
    duckdb_vector_assign_string_element_len(w->vec[col], w->n, s, len);
    return;
  }
  char *fixed = len <= SIZE_MAX / 3 ? etch__malloc(len * 3) : NULL;
  if (!fixed) {
    etch__tw_null(w, col);
    if (!w->err) w->err = etch__error(ETCH_ENOMEM, "import: out of memory");
    return;
  }
  size_t k = 0;
  for (i = 0; i < len;) {
    size_t n = utf8_seq(u + i, len - i);
    if (n) {
      memcpy(fixed + k, s + i, n);
      k += n;
      i += n;
    } else {
      memcpy(fixed + k, "\xef\xbf\xbd", 3);
      k += 3;
      i++;
    }
  }
  duckdb_vector_assign_string_element_len(w->vec[col], w->n, fixed, k);
  free(fixed);
}

void etch__tw_cstr(etch__tw *w, idx_t col, const char *s) {
  if (s)
    etch__tw_str(w, col, s, strlen(s));
  else
    etch__tw_null(w, col);
}

void etch__tw_id(etch__tw *w, idx_t col, int64_t id) {
  if (id > 0)
    etch__tw_i64(w, col, id);
  else
    etch__tw_null(w, col);
}

/* ---- a table writer's appending thread ---------------------------------------- *
 *
 * The filling thread hands each full chunk over and takes an empty one;
 * the pipe's thread inserts them on its own connection and gives them
 * back. Up to kPipeChunks chunks go round (made as needed): the filler
 * waits when all are queued. The queue is deep because DuckDB's work comes
 * in bursts: each full row group (60 chunks) is compressed and written in
 * one append, and the filler goes on meanwhile.
 *
 * The pipe's thread runs one statement for the whole import,
 *   INSERT INTO table SELECT * FROM etch__pipe(token)
 * where etch__pipe is a table function (registered on the database once
 * per pipe; registering it again fails harmlessly) whose every call hands
 * DuckDB the next queued chunk by reference: DuckDB's output vectors share
 * the chunk's data, which is copied once, into the table's row groups. (An
 * appender copied each chunk into a collection of its own first, and ran a
 * query per flush.) A chunk goes back to the filler at the next call, when
 * DuckDB is done with it. The token names a live pipe in a registry: the
 * function refuses any other, so SQL that calls it cannot reach freed
 * memory; the token is random, so that SQL run on the database while an
 * import runs cannot guess a live one either. The pipe's thread allocates
 * nothing of etch's and reports a failure by the text in `msg`, turned
 * into an error by the filler.
 */

enum { kPipeChunks = 64 };

struct etch__tw_pipe {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* queue or free list changed, or closing */
  duckdb_connection con;
  bool in_txn, started, closing, commit;
  duckdb_data_chunk queue[kPipeChunks]; /* full, in order: head..+nq */
  size_t head, nq;
  duckdb_data_chunk free_[kPipeChunks];
  size_t nfree, nmade; /* nmade: besides the one being filled */
  duckdb_data_chunk held; /* the chunk DuckDB reads now */
  etch__col kind[kTwMaxCols];
  size_t ncols;
  bool failed;
  char msg[256];
  char *insert; /* the statement's text */
  duckdb_prepared_statement stmt; /* prepared at open: the table checked */
  int64_t token;
  etch__tw_pipe *next; /* in the registry */
};

/* The live pipes, by token. A token is 62 random bits, so that SQL run on
 * the same database while an import runs cannot name a live pipe by
 * guessing (a count from 1, as before, was guessed at the first try). */
static pthread_mutex_t g_pipes_mu = PTHREAD_MUTEX_INITIALIZER;
static etch__tw_pipe *g_pipes;

static etch__tw_pipe *pipes_find_locked(int64_t token) {
  etch__tw_pipe *p = g_pipes;
  while (p && p->token != token) p = p->next;
  return p;
}

/* A new token: from getrandom, or (where it fails) the clock and an
 * address mixed, which is still no count; positive, not a live one's. */
static int64_t pipe_token(void) {
  for (;;) {
    uint64_t t = 0;
    if (getrandom(&t, sizeof t, 0) != (ssize_t)sizeof t) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      t = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
          (uint64_t)(uintptr_t)&t;
      t *= 0x9e3779b97f4a7c15u;
      t ^= t >> 29;
    }
    int64_t token = (int64_t)(t >> 2);
    if (token > 0 && !pipes_find_locked(token)) return token;
  }
}

static void pipes_add(etch__tw_pipe *p) {
  pthread_mutex_lock(&g_pipes_mu);
  p->token = pipe_token();
  p->next = g_pipes;
  g_pipes = p;
  pthread_mutex_unlock(&g_pipes_mu);
}

static void pipes_remove(etch__tw_pipe *p) {
  pthread_mutex_lock(&g_pipes_mu);
  for (etch__tw_pipe **q = &g_pipes; *q; q = &(*q)->next)
    if (*q == p) {
      *q = p->next;
      break;
    }
  pthread_mutex_unlock(&g_pipes_mu);
}

static etch__tw_pipe *pipes_find(int64_t token) {
  pthread_mutex_lock(&g_pipes_mu);
  etch__tw_pipe *p = pipes_find_locked(token);
  pthread_mutex_unlock(&g_pipes_mu);
  return p;
}

size_t etch__tw_pipes_running(void) {
  pthread_mutex_lock(&g_pipes_mu);
  size_t n = 0;
  for (etch__tw_pipe *p = g_pipes; p; p = p->next) n++;
  pthread_mutex_unlock(&g_pipes_mu);
  return n;
}

static void pipe_fail(etch__tw_pipe *p, const char *what, const char *why) {
  if (p->failed) return;
  p->failed = true;
  snprintf(p->msg, sizeof p->msg, "%s: %s", what, why ? why : "DuckDB error");
}

/* Runs `sql` on the pipe's connection; false (and the message kept) on
 * failure. */
static bool pipe_exec(etch__tw_pipe *p, const char *sql) {
  duckdb_result r;
  bool ok = duckdb_query(p->con, sql, &r) == DuckDBSuccess;
  if (!ok) pipe_fail(p, "import", duckdb_result_error(&r));
  duckdb_destroy_result(&r);
  return ok;
}

static const duckdb_type kColType[] = {DUCKDB_TYPE_BIGINT, DUCKDB_TYPE_DOUBLE,
                                       DUCKDB_TYPE_VARCHAR};

/* etch__pipe(token): the pipe's columns, c0, c1, ... */
static void pipe_fn_bind(duckdb_bind_info info) {
  duckdb_value v = duckdb_bind_get_parameter(info, 0);
  etch__tw_pipe *p = v ? pipes_find(duckdb_get_int64(v)) : NULL;
  if (v) duckdb_destroy_value(&v);
  if (!p) {
    duckdb_bind_set_error(info, "etch__pipe: not an import's pipe");
    return;
  }
  for (size_t c = 0; c < p->ncols; c++) {
    char name[32];
    snprintf(name, sizeof name, "c%zu", c);
    duckdb_logical_type t = duckdb_create_logical_type(kColType[p->kind[c]]);
    duckdb_bind_add_result_column(info, name, t);
    duckdb_destroy_logical_type(&t);
  }
  duckdb_bind_set_bind_data(info, p, NULL);
}

static void pipe_fn_init(duckdb_init_info info) {
  duckdb_init_set_max_threads(info, 1);
}

/* The next queued chunk, by reference; none at the end. The chunk
 * handed at the previous call goes back to the filler. */
static void pipe_fn(duckdb_function_info info, duckdb_data_chunk out) {
  etch__tw_pipe *p = duckdb_function_get_bind_data(info);
  pthread_mutex_lock(&p->mu);
  if (p->held) {
    duckdb_data_chunk_reset(p->held);
    p->free_[p->nfree++] = p->held;
    p->held = NULL;
    pthread_cond_broadcast(&p->cv);
  }
  while (!p->nq && !p->closing) pthread_cond_wait(&p->cv, &p->mu);
  duckdb_data_chunk c = NULL;
  if (p->nq && !p->failed) {
    c = p->queue[p->head];
    p->head = (p->head + 1) % kPipeChunks;
    p->nq--;
    p->held = c;
  }
  bool stop = !c && (!p->commit || p->failed);
  pthread_mutex_unlock(&p->mu);
  if (stop) {
    duckdb_function_set_error(info, "import stopped");
    return;
  }
  if (!c) {
    duckdb_data_chunk_set_size(out, 0);
    return;
  }
  for (idx_t i = 0; i < p->ncols; i++)
    duckdb_vector_reference_vector(duckdb_data_chunk_get_vector(out, i),
                                   duckdb_data_chunk_get_vector(c, i));
  duckdb_data_chunk_set_size(out, duckdb_data_chunk_get_size(c));
}

/* Registers etch__pipe on the pipe's database (again: harmless). */
static void pipe_fn_register(etch__tw_pipe *p) {
  duckdb_table_function f = duckdb_create_table_function();
  if (!f) return;
  duckdb_table_function_set_name(f, "etch__pipe");
  duckdb_logical_type t = duckdb_create_logical_type(DUCKDB_TYPE_BIGINT);
  duckdb_table_function_add_parameter(f, t);
  duckdb_destroy_logical_type(&t);
  duckdb_table_function_set_bind(f, pipe_fn_bind);
  duckdb_table_function_set_init(f, pipe_fn_init);
  duckdb_table_function_set_function(f, pipe_fn);
  (void)duckdb_register_table_function(p->con, f);
  duckdb_destroy_table_function(&f);
}

/* Commits (or drops what was inserted). Only the pipe's thread (or its
 * opener, before the thread started) calls it; the failure is read after
 * the join. */
static void pipe_end_here(etch__tw_pipe *p, bool commit) {
  if (p->in_txn) {
    if (!pipe_exec(p, commit ? "COMMIT;" : "ROLLBACK;") && commit)
      pipe_exec(p, "ROLLBACK;");
    p->in_txn = false;
  }
}

static void *pipe_main(void *arg) {
  etch__tw_pipe *p = arg;
  duckdb_result r;
  bool ok = duckdb_execute_prepared(p->stmt, &r) == DuckDBSuccess;
  pthread_mutex_lock(&p->mu);
  if (!ok) pipe_fail(p, "append", duckdb_result_error(&r));
  pthread_mutex_unlock(&p->mu);
  duckdb_destroy_result(&r);
  /* After a failure, what the filler still hands over goes back to it. */
  pthread_mutex_lock(&p->mu);
  if (p->held) {
    duckdb_data_chunk_reset(p->held);
    p->free_[p->nfree++] = p->held;
    p->held = NULL;
  }
  for (;;) {
    while (p->nq) {
      duckdb_data_chunk_reset(p->queue[p->head]);
      p->free_[p->nfree++] = p->queue[p->head];
      p->head = (p->head + 1) % kPipeChunks;
      p->nq--;
    }
    pthread_cond_broadcast(&p->cv);
    if (p->closing) break;
    pthread_cond_wait(&p->cv, &p->mu);
  }
  bool commit = p->commit && !p->failed;
  pthread_mutex_unlock(&p->mu);
  pipe_end_here(p, commit);
  return NULL;
}

/* Tells the thread to end once it inserted what is queued: with
 * `commit`, by committing, else by dropping what was inserted. */
static void pipe_close(etch__tw_pipe *p, bool commit) {
  if (!p->started || p->closing) return;
  pthread_mutex_lock(&p->mu);
  p->closing = true;
  p->commit = commit;
  if (!commit) pipe_fail(p, "import", "stopped");
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* Ends the pipe (pipe_close, then waits for its thread) and frees it.
 * Returns the first error when committing. */
static int pipe_end(etch__tw *w, bool commit) {
  etch__tw_pipe *p = w->pipe;
  if (!p) return ETCH_OK;
  if (p->started) {
    pipe_close(p, commit);
    pthread_join(p->thread, NULL);
  } else {
    pipe_end_here(p, false);
  }
  pipes_remove(p);
  if (p->stmt) duckdb_destroy_prepare(&p->stmt);
  int rc = commit && p->failed
               ? etch__error(ETCH_ESQL, "import: %s", p->msg)
               : ETCH_OK;
  for (size_t i = 0; i < p->nfree; i++) duckdb_destroy_data_chunk(&p->free_[i]);
  for (size_t i = 0; i < p->nq; i++)
    duckdb_destroy_data_chunk(&p->queue[(p->head + i) % kPipeChunks]);
  if (p->con) duckdb_disconnect(&p->con);
  pthread_cond_destroy(&p->cv);
  pthread_mutex_destroy(&p->mu);
  free(p->insert);
  free(p);
  w->pipe = NULL;
  return rc;
}

/* A chunk with columns of `kinds`; NULL when out of memory. */
static duckdb_data_chunk new_chunk(const etch__col *kinds, size_t ncols) {
  duckdb_logical_type types[kTwMaxCols];
  for (size_t c = 0; c < ncols; c++)
    types[c] = duckdb_create_logical_type(kColType[kinds[c]]);
  duckdb_data_chunk chunk = duckdb_create_data_chunk(types, ncols);
  for (size_t c = 0; c < ncols; c++) duckdb_destroy_logical_type(&types[c]);
  return chunk;
}

/* Queues the writer's full chunk and takes an empty one: a new one while
 * fewer than kPipeChunks were made, else one given back. */
static void pipe_hand(etch__tw *w) {
  etch__tw_pipe *p = w->pipe;
  pthread_mutex_lock(&p->mu);
  p->queue[(p->head + p->nq++) % kPipeChunks] = w->chunk;
  pthread_cond_broadcast(&p->cv);
  bool make = !p->nfree && p->nmade + 1 < kPipeChunks;
  pthread_mutex_unlock(&p->mu);
  duckdb_data_chunk c = make ? new_chunk(p->kind, p->ncols) : NULL;
  pthread_mutex_lock(&p->mu);
  if (c) {
    p->nmade++;
  } else {
    while (!p->nfree) pthread_cond_wait(&p->cv, &p->mu);
    c = p->free_[--p->nfree];
  }
  w->chunk = c;
  pthread_mutex_unlock(&p->mu);
}

/* `name` as a quoted identifier at `out` (quotes doubled); its length. */
static size_t quote_ident(char *out, const char *name) {
  size_t k = 0;
  out[k++] = '"';
  for (const char *c = name; *c; c++) {
    if (*c == '"') out[k++] = '"';
    out[k++] = *c;
  }
  out[k++] = '"';
  return k;
}

/* "INSERT INTO catalog.table SELECT * FROM etch__pipe(token)", or the
 * SELECT list `select` in place of `*`. */
static char *insert_sql(const char *catalog, const char *table,
                        const char *select, int64_t token) {
  if (!select) select = "*";
  size_t cap = 2 * (strlen(table) + (catalog ? strlen(catalog) : 0)) +
               strlen(select) + 96;
  char *s = etch__malloc(cap);
  if (!s) return NULL;
  size_t k = (size_t)snprintf(s, cap, "INSERT INTO ");
  if (catalog) {
    k += quote_ident(s + k, catalog);
    s[k++] = '.';
  }
  k += quote_ident(s + k, table);
  snprintf(s + k, cap - k, " SELECT %s FROM etch__pipe(%lld)", select,
           (long long)token);
  return s;
}

int etch__tw_open_piped(etch__tw *w, etch__db *db, const char *catalog,
                        const char *table, const etch__col *kinds,
                        size_t ncols) {
  return etch__tw_open_piped_as(w, db, catalog, table, NULL, kinds, ncols);
}

int etch__tw_open_piped_as(etch__tw *w, etch__db *db, const char *catalog,
                           const char *table, const char *select,
                           const etch__col *kinds, size_t ncols) {
  memset(w, 0, sizeof *w);
  if (ncols > kTwMaxCols) return etch__error(ETCH_EINVAL, "too many columns");
  etch__tw_pipe *p = etch__calloc(1, sizeof *p);
  if (!p) return etch__error(ETCH_ENOMEM, "import: out of memory");
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  memcpy(p->kind, kinds, ncols * sizeof *kinds);
  p->ncols = ncols;
  pipes_add(p);
  w->pipe = p;
  p->insert = insert_sql(catalog, table, select, p->token);
  int rc = p->insert ? etch__db_connect(db, &p->con)
                     : etch__error(ETCH_ENOMEM, "import: out of memory");
  if (!rc) pipe_fn_register(p);
  if (!rc && etch__db_is_file(db)) {
    /* As the importer's connection: one transaction, so that DuckDB writes
     * each full row group into the file as it fills. */
    p->in_txn = pipe_exec(p, "BEGIN TRANSACTION;");
    if (!p->in_txn) rc = etch__error(ETCH_ESQL, "import: %s", p->msg);
  }
  if (!rc && duckdb_prepare(p->con, p->insert, &p->stmt) != DuckDBSuccess) {
    const char *why = duckdb_prepare_error(p->stmt);
    rc = etch__error(ETCH_ESQL, "import: %s: %s", table,
                     why ? why : "DuckDB error");
  }
  if (!rc) rc = tw_chunk(w, kinds, ncols);
  if (!rc && pthread_create(&p->thread, NULL, pipe_main, p) != 0)
    rc = etch__error(ETCH_ENOMEM, "import: cannot start a thread");
  if (!rc) p->started = true;
  if (rc) etch__tw_free(w);
  return rc;
}

static void tw_flush(etch__tw *w) {
  if (!w->n) return;
  duckdb_data_chunk_set_size(w->chunk, w->n);
  if (w->pipe) {
    pipe_hand(w);
    w->n = 0;
    tw_lookup(w);
    return;
  }
  if (w->sink) {
    int rc = w->err ? ETCH_OK : w->sink->chunk(w->sink->ctx, w->table,
                                               w->chunk, w->n);
    if (rc) w->err = rc;
  } else if (!w->err &&
             duckdb_append_data_chunk(w->app, w->chunk) != DuckDBSuccess) {
    tw_fail(w, "append");
  }
  duckdb_data_chunk_reset(w->chunk);
  w->n = 0;
  tw_lookup(w);
}

void etch__tw_end_row(etch__tw *w) {
  if (++w->n == w->cap) tw_flush(w);
}

void etch__tw_finish_start(etch__tw *w) {
  if (!w->pipe) return;
  if (!w->err) tw_flush(w);
  pipe_close(w->pipe, !w->err);
}

int etch__tw_finish(etch__tw *w) {
  if (w->pipe) {
    if (!w->err) tw_flush(w);
    int rc = pipe_end(w, !w->err);
    if (!w->err) w->err = rc;
    rc = w->err;
    etch__tw_free(w);
    w->err = rc;
    return rc;
  }
  if (!w->app && !w->sink) return w->err;
  if (w->sink) {
    if (w->chunk) tw_flush(w);
    int rc = w->err;
    etch__tw_free(w);
    w->sink = NULL;
    w->err = rc;
    return rc;
  }
  tw_flush(w);
  if (!w->err && duckdb_appender_close(w->app) != DuckDBSuccess)
    tw_fail(w, "append");
  int rc = w->err;
  etch__tw_free(w);
  w->err = rc;
  return rc;
}

void etch__tw_free(etch__tw *w) {
  pipe_end(w, false);
  if (w->chunk) duckdb_destroy_data_chunk(&w->chunk);
  if (w->app) duckdb_appender_destroy(&w->app);
  w->chunk = NULL;
  w->app = NULL;
}

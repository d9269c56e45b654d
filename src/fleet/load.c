/*
 * load.c - etch load: traces into ClickHouse.
 *
 * Each trace goes through the query part's importer, the same rows in the
 * same order as `etch query` writes into DuckDB; a row sink (rows.h) takes
 * them a data chunk at a time and appends them, trace_id first, to one
 * RowBinary buffer per table. The buffers of a worker outlive a trace:
 * when one reaches batch_bytes it goes out alone, and every kFlushAll
 * batches every buffer goes out, one INSERT per table, then the `trace`
 * rows of the traces read whole (flush_all); ClickHouse then writes few,
 * large parts (a file per column each), whether the traces are large or
 * many and small. Each insert's rows go in the table's key order (see
 * order.c). Workers load several files at once, each with its own
 * connection, and take the next file when done.
 *
 * A trace's id is a 64-bit hash of its bytes: the same file loaded twice,
 * from anywhere, has the same id. Its row in `trace` is written last, after
 * every other row went in: a trace with a row there is loaded whole and is
 * skipped the next time. Rows of a load that failed half-way (no row in
 * `trace`) are deleted (ALTER TABLE ... DELETE, a mutation: it does not
 * touch rows inserted after it) before the trace loads again, and right
 * away when the failure leaves a connection to do it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "base/clock.h"
#include "fleet/fleet.h"
#include "fleet/order.h"
#include "pb/pb.h"

enum { kTables = 16, kDefaultBatch = 128 << 20, kFlushAll = 8 };

/* ---- the trace id --------------------------------------------------------------- */

static inline uint64_t rotl(uint64_t x, int r) {
  return x << r | x >> (64 - r);
}

static inline uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

/* Four lanes of multiply-rotate over 8-byte words (several GB/s), mixed
 * with the length at the end. Not cryptographic: an id, not a signature. */
uint64_t etch__fleet_trace_id(const void *data, size_t len) {
  static const uint64_t kMul = 0x9e3779b97f4a7c15ULL;
  uint64_t h[4] = {0x243f6a8885a308d3ULL, 0x13198a2e03707344ULL,
                   0xa4093822299f31d0ULL, 0x082efa98ec4e6c89ULL};
  const unsigned char *p = data;
  size_t i = 0;
  for (; i + 32 <= len; i += 32)
    for (int k = 0; k < 4; k++) {
      uint64_t w;
      memcpy(&w, p + i + 8 * k, 8);
      h[k] = rotl((h[k] ^ w) * kMul, 29);
    }
  uint64_t tail[4] = {0};
  memcpy(tail, p + i, len - i);
  for (int k = 0; k < 4; k++) h[k] = rotl((h[k] ^ tail[k]) * kMul, 29);
  uint64_t r = (uint64_t)len * kMul;
  for (int k = 0; k < 4; k++) r = mix(r ^ h[k]) + (uint64_t)k;
  return r;
}

/* ---- shared by the workers ---------------------------------------------------- */

typedef struct shared {
  const char *const *paths;
  size_t n;
  const etch__load_opts *o;
  atomic_size_t next;
  pthread_mutex_t mu;
  uint64_t *ids; /* ids of the files taken so far (a file twice) */
  size_t nids;
  etch__load_totals tot;
  uint64_t rows_sent; /* all files, as batches go out */
  uint64_t t0, last_progress;
  bool progress_shown;
} shared;

static void progress_locked(shared *sh, bool force) {
  if (!sh->o->progress) return;
  uint64_t now = etch__monotonic_ns();
  if (!force && now - sh->last_progress < 200000000) return;
  sh->last_progress = now;
  double s = (double)(now - sh->t0) / 1e9;
  size_t done = sh->tot.loaded + sh->tot.present + sh->tot.failed;
  fprintf(stderr, "\retch: load: %zu/%zu files, %.1f M rows sent, %.1f s\033[K",
          done, sh->n, (double)sh->rows_sent / 1e6, s);
  fflush(stderr);
  sh->progress_shown = true;
}

static void clear_progress_locked(shared *sh) {
  if (!sh->progress_shown) return;
  fputs("\r\033[K", stderr);
  sh->progress_shown = false;
}

/* "etch: load: PATH: message" on stderr. */
static void report(shared *sh, const char *path, const char *fmt, ...)
    ETCH_PRINTF(3, 4);
static void report(shared *sh, const char *path, const char *fmt, ...) {
  pthread_mutex_lock(&sh->mu);
  clear_progress_locked(sh);
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* The reader's messages name the file already. */
  size_t n = strlen(path);
  if (strncmp(msg, path, n) != 0 || msg[n] != ':')
    fprintf(stderr, "etch: load: %s: ", path);
  else
    fprintf(stderr, "etch: load: ");
  fputs(msg, stderr);
  fputc('\n', stderr);
  pthread_mutex_unlock(&sh->mu);
}

/* ---- RowBinary buffers ------------------------------------------------------------ */

/* A table's rows in RowBinary, and how many. */
typedef struct rbuf {
  etch_vec v;
  uint64_t rows;
} rbuf;

static bool rb_reserve(rbuf *b, size_t n) {
  return etch__vec_reserve(&b->v, n) == 0;
}

/* Only after rb_reserve. */
static inline void rb_u64(rbuf *b, uint64_t v) {
  memcpy(b->v.data + b->v.len, &v, 8); /* little-endian, as RowBinary */
  b->v.len += 8;
}
static inline void rb_u8(rbuf *b, unsigned v) { b->v.data[b->v.len++] = (unsigned char)v; }
static inline void rb_varint(rbuf *b, uint64_t v) {
  while (v >= 0x80) {
    b->v.data[b->v.len++] = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  b->v.data[b->v.len++] = (unsigned char)v;
}
static bool rb_str(rbuf *b, const char *s, size_t n) {
  if (!rb_reserve(b, n + 10)) return false;
  rb_varint(b, n);
  memcpy(b->v.data + b->v.len, s, n);
  b->v.len += n;
  return true;
}

/* ---- one trace ------------------------------------------------------------------- */

/* A trace read whose rows wait in the buffers (or went out already) and
 * whose `trace` row waits in trows. */
typedef struct pending {
  const char *path;
  uint64_t id, events, rows, size;
  size_t toff; /* where its row starts in trows */
} pending;

typedef struct worker {
  shared *sh;
  etch__ch *ch;
  const char *db;
  size_t batch;
  /* The buffers of every table, for the rows of several traces. */
  rbuf buf[kTables];
  keys kb[kTables]; /* the key of each row in buf */
  sdict dict;       /* the strings of those keys */
  rbuf sorted;      /* the `trace` rows in trace_id order */
  etch__fl_sorter sorter; /* the room to sort keys in */
  bool checked[kTables];
  rbuf trows; /* the `trace` rows of the pending traces */
  etch_vec pend; /* of pending: the traces read, their rows not yet out */
  /* The trace being read: where its rows start in each buffer, and whether
   * some of them went out already (a flush while it was read). */
  const char *path;
  uint64_t trace_id;
  size_t mark[kTables];
  uint64_t mark_rows[kTables];
  bool reading, cur_sent;
  size_t sent; /* bytes sent since the last flush of all */
  uint64_t rows, size;
  char machine[128]; /* "" when the trace does not say */
} worker;

static int table_index(const char *name) {
  const etch__ch_table *t;
  for (size_t i = 0; (t = etch__ch_table_at(i)) && i < kTables; i++)
    if (!strcmp(t->name, name)) return (int)i;
  return -1;
}


/* The rows of a buffer in the order of `order`, as curl sends them: no
 * copy of the whole buffer. */
typedef struct gather {
  const rbuf *b;
  const uint64_t *off;
  const keyrec *order;
  size_t n, i, at; /* the row order[i], its bytes from `at` on */
} gather;

static size_t gather_read(void *ctx, char *buf, size_t cap) {
  gather *g = ctx;
  size_t done = 0;
  while (done < cap && g->i < g->n) {
    /* Rows in key order are scattered over the buffer: fetched ahead. */
    if (g->i + 16 < g->n) {
      const unsigned char *ahead = g->b->v.data + g->off[g->order[g->i + 16].idx];
      __builtin_prefetch(ahead);
      __builtin_prefetch(ahead + 64);
    }
    size_t r = (size_t)g->order[g->i].idx;
    size_t from = (size_t)g->off[r] + g->at;
    size_t to = r + 1 < g->n ? (size_t)g->off[r + 1] : g->b->v.len;
    size_t m = to - from;
    if (m > cap - done) m = cap - done;
    memcpy(buf + done, g->b->v.data + from, m);
    done += m;
    g->at += m;
    if (from + m == to) {
      g->i++;
      g->at = 0;
    }
  }
  return done;
}

static int send_table(worker *w, size_t ti) {
  rbuf *b = &w->buf[ti];
  if (!b->v.len) return ETCH_OK;
  const etch__ch_table *t = etch__ch_table_at(ti);
  const keyrec *order;
  int rc = etch__fl_sort_rows(&w->sorter, etch__ch_table_at(ti), &w->kb[ti],
                              (size_t)w->buf[ti].rows, &w->dict, &order);
  if (rc) return rc;
  char sql[1024];
  size_t k = (size_t)snprintf(sql, sizeof sql, "INSERT INTO %s.%s (trace_id",
                              w->db, t->name);
  for (size_t c = 0; c < t->ncols && k < sizeof sql; c++)
    k += (size_t)snprintf(sql + k, sizeof sql - k, ", %s", t->col[c].name);
  if (k < sizeof sql) snprintf(sql + k, sizeof sql - k, ") FORMAT RowBinary");
  gather g = {.b = b, .off = w->kb[ti].off, .order = order,
              .n = (size_t)b->rows};
  rc = order ? etch__ch_exec_read(w->ch, sql, gather_read, &g, b->v.len, NULL, 0)
             : etch__ch_exec(w->ch, sql, b->v.data, b->v.len, NULL, 0);
  if (!rc) {
    pthread_mutex_lock(&w->sh->mu);
    w->sh->rows_sent += b->rows;
    progress_locked(w->sh, false);
    pthread_mutex_unlock(&w->sh->mu);
  }
  b->v.len = 0;
  b->rows = 0;
  return rc;
}

static int delete_id(worker *w, uint64_t id);

static int pend_cmp(const void *a, const void *b) {
  const pending *x = *(const pending *const *)a, *y = *(const pending *const *)b;
  return (x->id > y->id) - (x->id < y->id);
}

/* The `trace` rows in trace_id order (its key): `*out` is trows itself
 * when they are in that order already, else w->sorted. */
static int sort_trace_rows(worker *w, const rbuf **out) {
  *out = &w->trows;
  const pending *pend = ETCH_VEC_AT(&w->pend, pending);
  size_t n = ETCH_VEC_COUNT(&w->pend, pending);
  bool in_order = true;
  for (size_t k = 1; k < n && in_order; k++)
    in_order = pend[k - 1].id <= pend[k].id;
  if (in_order) return ETCH_OK;
  for (size_t k = 0; k < n; k++)
    if (pend[k].toff > (k + 1 < n ? pend[k + 1].toff : w->trows.v.len))
      return etch__error(ETCH_ESTATE, "load: the trace rows are out of step");
  const pending **order = etch__calloc(n, sizeof *order);
  rbuf *o = &w->sorted;
  o->v.len = 0;
  if (!order || !rb_reserve(o, w->trows.v.len)) {
    free(order);
    return etch__error(ETCH_ENOMEM, "load: out of memory");
  }
  for (size_t k = 0; k < n; k++) order[k] = &pend[k];
  qsort(order, n, sizeof *order, pend_cmp);
  for (size_t k = 0; k < n; k++) {
    size_t i = (size_t)(order[k] - pend);
    size_t from = order[k]->toff;
    size_t to = i + 1 < n ? pend[i + 1].toff : w->trows.v.len;
    memcpy(o->v.data + o->v.len, w->trows.v.data + from, to - from);
    o->v.len += to - from;
  }
  free(order);
  *out = o;
  return ETCH_OK;
}

/*
 * Sends every buffer, then the `trace` rows of the traces read whole: a
 * trace is marked loaded only once all its rows are in. The pending traces
 * are counted, as loaded or, when a send failed, as failed (reported, and
 * their rows deleted as far as the server lets).
 */
static int flush(worker *w, int only);

static int flush_all(worker *w) { return flush(w, -1); }

/*
 * With `only` a table's index: sends that table's buffer alone, as it is
 * full (slice's, mostly); the other tables' rows and the `trace` rows
 * wait for a flush of all, so that each insert of those (a part on the
 * server, a file per column) carries the rows of many traces. A failure there fails every pending trace, as in a
 * flush of all.
 */
static int flush(worker *w, int only) {
  int rc = etch__fl_sdict_rank(&w->dict) ? ETCH_OK
                                : etch__error(ETCH_ENOMEM, "load: out of memory");
  if (only >= 0) {
    size_t len = w->buf[only].v.len;
    if (!rc) rc = send_table(w, (size_t)only);
    if (w->reading) w->cur_sent = true;
    if (!rc) {
      w->sent += len;
      w->buf[only].v.len = w->buf[only].rows = 0;
      w->mark[only] = 0;
      w->mark_rows[only] = 0;
      return ETCH_OK;
    }
  }
  for (size_t i = 0; i < kTables && !rc; i++) rc = send_table(w, i);
  const rbuf *tr = &w->trows;
  if (!rc && w->trows.v.len) rc = sort_trace_rows(w, &tr);
  if (!rc && w->trows.v.len) {
    char sql[512];
    snprintf(sql, sizeof sql,
             "INSERT INTO %s.trace (trace_id, file_name, host, machine,"
             " start_ts, dur, etch_version, size_bytes, events, loaded_at)"
             " FORMAT RowBinary",
             w->db);
    rc = etch__ch_exec(w->ch, sql, tr->v.data, tr->v.len, NULL, 0);
  }
  char msg[1024] = "";
  if (rc) snprintf(msg, sizeof msg, "%s", etch_last_error());
  if (w->reading) w->cur_sent = true; /* some of its rows, perhaps */
  for (size_t i = 0; i < kTables; i++) {
    w->buf[i].v.len = w->buf[i].rows = 0;
    w->mark[i] = 0;
    w->mark_rows[i] = 0;
  }
  w->trows.v.len = 0;
  w->sent = 0;
  etch__fl_sdict_clear(&w->dict);
  shared *sh = w->sh;
  const pending *pend = ETCH_VEC_AT(&w->pend, pending);
  size_t npend = ETCH_VEC_COUNT(&w->pend, pending);
  pthread_mutex_lock(&sh->mu);
  for (size_t k = 0; k < npend; k++) {
    if (rc) {
      sh->tot.failed++;
      continue;
    }
    sh->tot.loaded++;
    sh->tot.events += pend[k].events;
    sh->tot.rows += pend[k].rows;
    sh->tot.bytes += pend[k].size;
  }
  progress_locked(sh, true);
  pthread_mutex_unlock(&sh->mu);
  for (size_t k = 0; rc && k < npend; k++) {
    report(sh, pend[k].path, "%s", msg);
    if (delete_id(w, pend[k].id) != ETCH_OK)
      report(sh, pend[k].path, "its rows stay until the next load of it: %s",
             etch_last_error());
  }
  w->pend.len = 0;
  if (rc) etch__error(rc, "%s", msg);
  return rc;
}

/* The sink: a chunk of the importer's rows, appended as RowBinary. */
static int on_chunk(void *ctx, const char *table, duckdb_data_chunk chunk,
                    idx_t n) {
  worker *w = ctx;
  int ti = table_index(table);
  if (ti < 0) return etch__error(ETCH_ESTATE, "load: no table %s", table);
  const etch__ch_table *t = etch__ch_table_at((size_t)ti);
  rbuf *b = &w->buf[ti];
  idx_t ncols = t->ncols;
  const void *data[kChMaxCols];
  const uint64_t *valid[kChMaxCols];
  /* The importer's columns are the schema's (both come from the query
   * part): checked once per table, as reading a cell of one type as
   * another would be no error but garbage. */
  if (!w->checked[ti] && duckdb_data_chunk_get_column_count(chunk) != ncols)
    return etch__error(ETCH_ESTATE, "load: %s: columns differ", table);
  for (idx_t c = 0; c < ncols; c++) {
    duckdb_vector v = duckdb_data_chunk_get_vector(chunk, c);
    if (!v) return etch__error(ETCH_ESTATE, "load: %s: columns differ", table);
    if (!w->checked[ti]) {
      static const duckdb_type kType[] = {DUCKDB_TYPE_BIGINT, DUCKDB_TYPE_DOUBLE,
                                          DUCKDB_TYPE_VARCHAR};
      duckdb_logical_type lt = duckdb_vector_get_column_type(v);
      duckdb_type id = duckdb_get_type_id(lt);
      duckdb_destroy_logical_type(&lt);
      if (id != kType[t->col[c].kind])
        return etch__error(ETCH_ESTATE, "load: %s.%s: types differ", table,
                           t->col[c].name);
    }
    data[c] = duckdb_vector_get_data(v);
    valid[c] = duckdb_vector_get_validity(v);
  }
  w->checked[ti] = true;
  keys *kb = &w->kb[ti];
  if (t->key_ok && !etch__fl_keys_reserve(kb, (size_t)b->rows + n))
    return etch__error(ETCH_ENOMEM, "load: out of memory");
  for (idx_t r = 0; r < n; r++) {
    if (!rb_reserve(b, 8 + ncols * 9 + 16))
      return etch__error(ETCH_ENOMEM, "load: out of memory");
    if (t->key_ok) {
      size_t row = (size_t)b->rows + r;
      keyrec *kr = &kb->rec[row];
      kb->off[row] = b->v.len;
      kr->tid = w->trace_id;
      kr->k[0] = kr->k[1] = 0;
      kr->idx = row;
      for (size_t j = 0; j < t->nkey; j++) {
        int c = t->key[j];
        bool ok = !valid[c] || (valid[c][r / 64] >> (r % 64) & 1);
        if (t->col[c].kind == ETCH__COL_I64) {
          /* Int64 as unsigned, in the same order. */
          kr->k[j] = ok ? ((const uint64_t *)data[c])[r] ^ (1ULL << 63) : 0;
          continue;
        }
        const char *p = "";
        uint32_t len = 0;
        if (ok) {
          const duckdb_string_t *sv = &((const duckdb_string_t *)data[c])[r];
          len = sv->value.inlined.length;
          p = len <= 12 ? sv->value.inlined.inlined : sv->value.pointer.ptr;
        }
        if (!etch__fl_sdict_id(&w->dict, p, len, &kr->k[j]))
          return etch__error(ETCH_ENOMEM, "load: out of memory");
      }
    }
    rb_u64(b, w->trace_id);
    for (idx_t c = 0; c < ncols; c++) {
      const etch__ch_col *col = &t->col[c];
      bool ok = !valid[c] || (valid[c][r / 64] >> (r % 64) & 1);
      if (col->nullable) {
        rb_u8(b, ok ? 0 : 1);
        if (!ok) continue;
      } else if (!ok && col->null_empty) {
        rb_u8(b, 0); /* '' */
        continue;
      } else if (!ok) {
        return etch__error(ETCH_ESTATE, "load: %s.%s: NULL in a NOT NULL column",
                           table, col->name);
      }
      switch (col->kind) {
        case ETCH__COL_I64:
        case ETCH__COL_F64:
          rb_u64(b, ((const uint64_t *)data[c])[r]);
          break;
        case ETCH__COL_STR: {
          const duckdb_string_t *s = &((const duckdb_string_t *)data[c])[r];
          uint32_t len = s->value.inlined.length;
          const char *p =
              len <= 12 ? s->value.inlined.inlined : s->value.pointer.ptr;
          if (!rb_str(b, p, len))
            return etch__error(ETCH_ENOMEM, "load: out of memory");
          if (!rb_reserve(b, (ncols - c) * 9 + 16))
            return etch__error(ETCH_ENOMEM, "load: out of memory");
          break;
        }
      }
    }
  }
  b->rows += n;
  w->rows += n;
  if (b->v.len < w->batch) return ETCH_OK;
  /* Every kFlushAll batches, all of them and the trace rows: a load that
   * stops loses at most that much. */
  return w->sent + b->v.len >= kFlushAll * w->batch ? flush_all(w)
                                                  : flush(w, ti);
}

/* Deletes every row of the trace `id` (a load that failed half-way). */
static int delete_id(worker *w, uint64_t id) {
  const etch__ch_table *t;
  int rc = ETCH_OK;
  char sql[256];
  for (size_t i = 0; (t = etch__ch_table_at(i)) && !rc; i++) {
    snprintf(sql, sizeof sql,
             "ALTER TABLE %s.%s DELETE WHERE trace_id = %" PRIu64, w->db,
             t->name, id);
    rc = etch__ch_exec(w->ch, sql, NULL, 0, NULL, 0);
  }
  return rc;
}

static int delete_trace(worker *w) { return delete_id(w, w->trace_id); }

/* Drops the rows of the trace being read that are still in the buffers. */
static void drop_current(worker *w) {
  for (size_t i = 0; i < kTables; i++) {
    w->buf[i].v.len = w->mark[i];
    w->buf[i].rows = w->mark_rows[i];
  }
  w->rows = 0;
}

static int on_reset(void *ctx) {
  worker *w = ctx;
  drop_current(w);
  if (!w->cur_sent) return ETCH_OK;
  w->cur_sent = false;
  return delete_trace(w);
}

/* Rows of the trace already in some table (a load that failed). */
static int leftovers(worker *w, uint64_t *out) {
  char sql[4096];
  size_t k = (size_t)snprintf(sql, sizeof sql, "SELECT sum(c) FROM (");
  const etch__ch_table *t;
  for (size_t i = 0; (t = etch__ch_table_at(i)); i++)
    k += (size_t)snprintf(sql + k, sizeof sql - k,
                          "%sSELECT count() AS c FROM %s.%s WHERE trace_id = %" PRIu64,
                          i ? " UNION ALL " : "", w->db, t->name, w->trace_id);
  snprintf(sql + k, sizeof sql - k, ")");
  return etch__ch_count(w->ch, sql, out);
}

/* The trace's row of `trace`, appended to trows. */
static int add_trace_row(worker *w, const etch__import_result *res,
                         uint64_t size) {
  rbuf *bp = &w->trows;
#define b (*bp)
  const char *base = strrchr(w->path, '/');
  base = base ? base + 1 : w->path;
  const char *host = w->sh->o->host;
  bool ok = rb_reserve(&b, 64) && (rb_u64(&b, w->trace_id), true) &&
            rb_str(&b, base, strlen(base)) && rb_reserve(&b, 8);
  if (ok && host) {
    rb_u8(&b, 0);
    ok = rb_str(&b, host, strlen(host));
  } else if (ok) {
    rb_u8(&b, 1);
  }
  if (ok && w->machine[0]) {
    rb_u8(&b, 0);
    ok = rb_str(&b, w->machine, strlen(w->machine));
  } else if (ok) {
    rb_u8(&b, 1);
  }
  ok = ok && rb_reserve(&b, 64);
  if (ok) {
    bool bounds = res->first <= res->last;
    rb_u8(&b, bounds ? 0 : 1);
    if (bounds) rb_u64(&b, (uint64_t)res->first);
    rb_u8(&b, bounds ? 0 : 1);
    if (bounds) rb_u64(&b, (uint64_t)etch__sat_sub(res->last, res->first));
    ok = rb_str(&b, ETCH_VERSION_STRING, strlen(ETCH_VERSION_STRING)) &&
         rb_reserve(&b, 32);
  }
  if (!ok) return etch__error(ETCH_ENOMEM, "load: out of memory");
  rb_u64(&b, size);
  rb_u64(&b, res->counts.events);
  uint32_t now = (uint32_t)time(NULL);
  memcpy(b.v.data + b.v.len, &now, 4);
  b.v.len += 4;
#undef b
  return ETCH_OK;
}

/*
 * The machine a trace says it was recorded on: Perfetto's SystemInfo
 * packet (TracePacket field 45), its utsname (1), the machine (4: "x86_64",
 * "aarch64"), as traced writes it near the start. Only the first packets
 * are looked at; a malformed one ends the search (the import says what is
 * wrong with it). NUL-terminated into `out`, empty when none.
 */
static void find_machine(const void *data, size_t len, char *out, size_t n) {
  out[0] = '\0';
  etch__pb_dec trace;
  etch__pb_field pkt;
  etch__pb_dec_init(&trace, data, len);
  for (int k = 0; k < 1024 && etch__pb_next(&trace, &pkt); k++) {
    if (pkt.id != 1 || pkt.wt != 2) return;
    etch__pb_dec pd, sd, ud;
    etch__pb_field f, g, h;
    etch__pb_dec_init(&pd, pkt.data, pkt.len);
    while (etch__pb_next(&pd, &f)) {
      if (f.id != 45 || f.wt != 2) continue;
      etch__pb_dec_init(&sd, f.data, f.len);
      while (etch__pb_next(&sd, &g)) {
        if (g.id != 1 || g.wt != 2) continue;
        etch__pb_dec_init(&ud, g.data, g.len);
        while (etch__pb_next(&ud, &h)) {
          if (h.id != 4 || h.wt != 2 || !h.len || h.len >= n) continue;
          /* Text for a column: printable ASCII only. */
          for (size_t i = 0; i < h.len; i++)
            out[i] = h.data[i] >= 0x20 && h.data[i] < 0x7f ? (char)h.data[i]
                                                           : '?';
          out[h.len] = '\0';
          return;
        }
      }
    }
  }
}

/* The id of the file at `path` (read whole: mapped), and its machine. */
static int file_id(const char *path, uint64_t *id, uint64_t *size,
                   char *machine, size_t nmachine) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return etch__error(ETCH_EIO, "%s", strerror(errno));
  struct stat sb;
  int rc = ETCH_OK;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    rc = etch__error(ETCH_EIO, "not a regular file");
  } else if (sb.st_size == 0) {
    rc = etch__error(ETCH_EFORMAT, "empty file");
  } else {
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      rc = etch__error(ETCH_EIO, "%s", strerror(errno));
    } else {
      madvise(m, (size_t)sb.st_size, MADV_SEQUENTIAL);
      *id = etch__fleet_trace_id(m, (size_t)sb.st_size);
      find_machine(m, (size_t)sb.st_size, machine, nmachine);
      *size = (uint64_t)sb.st_size;
      munmap(m, (size_t)sb.st_size);
    }
  }
  close(fd);
  return rc;
}

/* PENDING: read whole, counted when its rows go out (flush_all). */
typedef enum outcome { PENDING, PRESENT, FAILED } outcome;

enum { kMaxPending = 4096 };

static outcome load_one(worker *w, const char *path) {
  shared *sh = w->sh;
  w->path = path;
  w->cur_sent = false;
  w->rows = 0;
  uint64_t size = 0;
  int rc = file_id(path, &w->trace_id, &size, w->machine, sizeof w->machine);
  w->size = size;
  if (rc) {
    report(sh, path, "%s", etch_last_error());
    return FAILED;
  }
  /* The same content twice among the files: loaded once. */
  pthread_mutex_lock(&sh->mu);
  bool twice = false;
  for (size_t i = 0; i < sh->nids && !twice; i++)
    twice = sh->ids[i] == w->trace_id;
  if (!twice) sh->ids[sh->nids++] = w->trace_id;
  pthread_mutex_unlock(&sh->mu);
  if (twice) return PRESENT;
  char sql[256];
  snprintf(sql, sizeof sql,
           "SELECT count() FROM %s.trace WHERE trace_id = %" PRIu64, w->db,
           w->trace_id);
  uint64_t n = 0, left = 0;
  rc = etch__ch_count(w->ch, sql, &n);
  if (!rc && n) return PRESENT;
  if (!rc) rc = leftovers(w, &left);
  if (rc) {
    report(sh, path, "%s", etch_last_error());
    return FAILED;
  }
  if (left && delete_trace(w) != ETCH_OK) {
    report(sh, path,
           "%" PRIu64 " rows of a load of it that stopped half-way cannot be "
           "deleted: %s (through a Distributed table: on each shard, ALTER "
           "TABLE %s.<table>_local DELETE WHERE trace_id = %" PRIu64 ")",
           left, etch_last_error(), w->db, w->trace_id);
    return FAILED;
  }
  /* Room for its entry first: once read, a trace is not lost for want of
   * one. */
  if (ETCH_VEC_RESERVE(&w->pend, pending, 1)) {
    report(sh, path, "out of memory");
    return FAILED;
  }
  for (size_t i = 0; i < kTables; i++) {
    w->mark[i] = w->buf[i].v.len;
    w->mark_rows[i] = w->buf[i].rows;
  }
  etch__row_sink sink = {.chunk = on_chunk, .reset = on_reset, .ctx = w};
  etch__import_opts io = {.all_args = true,
                          .allow_truncated = sh->o->allow_truncated,
                          .strict = !sh->o->allow_truncated};
  etch__import_result res;
  w->reading = true;
  rc = etch__query_import_sink(path, NULL, 0, &sink, &io, &res);
  w->reading = false;
  /* Taken after the import: a flush during it empties trows. */
  size_t trows_mark = w->trows.v.len;
  if (!rc) rc = add_trace_row(w, &res, size);
  if (rc) {
    report(sh, path, "%s", etch_last_error());
    drop_current(w);
    if (w->trows.v.len > trows_mark) w->trows.v.len = trows_mark;
    if (w->cur_sent && delete_trace(w) != ETCH_OK)
      report(sh, path, "its rows stay until the next load of it: %s",
             etch_last_error());
    return FAILED;
  }
  (void)ETCH_VEC_PUSH(&w->pend, pending, /* room made above */
                      {.path = path,
                       .id = w->trace_id,
                       .events = res.counts.events,
                       .rows = w->rows,
                       .size = size,
                       .toff = trows_mark});
  /* Many small traces go out together, in few large inserts. */
  if (ETCH_VEC_COUNT(&w->pend, pending) == kMaxPending) flush_all(w);
  return PENDING;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  shared *sh = w->sh;
  for (;;) {
    size_t i = atomic_fetch_add(&sh->next, 1);
    if (i >= sh->n) break;
    outcome oc = load_one(w, sh->paths[i]);
    if (oc == PENDING) continue;
    pthread_mutex_lock(&sh->mu);
    if (oc == PRESENT)
      sh->tot.present++;
    else
      sh->tot.failed++;
    progress_locked(sh, true);
    pthread_mutex_unlock(&sh->mu);
  }
  flush_all(w);
  return NULL;
}

int etch__fleet_load(const char *const *paths, size_t n,
                     const etch__load_opts *o, etch__load_totals *tot) {
  memset(tot, 0, sizeof *tot);
  const char *db = o->database ? o->database : "etch";
  if (!etch__ch_ident_ok(db))
    return etch__error(ETCH_EINVAL, "%s: not a database name", db);
  int rc = etch__ch_global_init();
  if (rc) return rc;
  /* The tables first, on one connection. */
  etch__ch *ch;
  rc = etch__ch_open(&ch, o->url, NULL);
  if (!rc) rc = etch__ch_schema_create(ch, db);
  etch__ch_close(ch);
  if (rc) return rc;
  shared sh = {.paths = paths, .n = n, .o = o};
  pthread_mutex_init(&sh.mu, NULL);
  sh.ids = etch__calloc(n ? n : 1, sizeof *sh.ids);
  int jobs = o->jobs < 1 ? 1 : o->jobs;
  if ((size_t)jobs > n) jobs = n ? (int)n : 1;
  worker *ws = etch__calloc((size_t)jobs, sizeof *ws);
  pthread_t *th = etch__calloc((size_t)jobs, sizeof *th);
  if (!sh.ids || !ws || !th) {
    free(sh.ids);
    free(ws);
    free(th);
    return etch__error(ETCH_ENOMEM, "out of memory");
  }
  sh.t0 = sh.last_progress = etch__monotonic_ns();
  int started = 0;
  for (int j = 0; j < jobs && !rc; j++) {
    ws[j].sh = &sh;
    ws[j].db = db;
    ws[j].batch = o->batch_bytes ? o->batch_bytes : kDefaultBatch;
    rc = etch__ch_open(&ws[j].ch, o->url, NULL);
    /* Through a Distributed table: the insert returns when every shard
     * has its rows, so an error is this load's, not a later one. */
    if (!rc) rc = etch__ch_setting(ws[j].ch, "insert_distributed_sync", "1");
    if (!rc && pthread_create(&th[j], NULL, worker_main, &ws[j]) != 0)
      rc = etch__error(ETCH_EIO, "cannot start a thread");
    if (!rc) started++;
  }
  if (rc) atomic_store(&sh.next, n); /* the started ones stop */
  for (int j = 0; j < started; j++) pthread_join(th[j], NULL);
  for (int j = 0; j < jobs; j++) {
    etch__ch_close(ws[j].ch);
    for (size_t i = 0; i < kTables; i++) {
      etch__vec_free(&ws[j].buf[i].v);
      etch__fl_keys_free(&ws[j].kb[i]);
    }
    etch__fl_sdict_free(&ws[j].dict);
    etch__vec_free(&ws[j].sorted.v);
    etch__fl_sorter_free(&ws[j].sorter);
    etch__vec_free(&ws[j].trows.v);
    etch__vec_free(&ws[j].pend);
  }
  pthread_mutex_lock(&sh.mu);
  clear_progress_locked(&sh);
  pthread_mutex_unlock(&sh.mu);
  *tot = sh.tot;
  tot->seconds = (double)(etch__monotonic_ns() - sh.t0) / 1e9;
  free(ws);
  free(th);
  free(sh.ids);
  pthread_mutex_destroy(&sh.mu);
  if (rc) return rc;
  if (tot->failed)
    return etch__error(ETCH_EIO, "%zu of %zu traces did not load", tot->failed,
                       n);
  return ETCH_OK;
}


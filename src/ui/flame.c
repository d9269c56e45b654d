/*
 * flame.c - the flame graph: the slices merged by their stack (the names
 * from the track's root down to them), each node's total (the durations of
 * its slices), self (total less its children's totals) and count.
 *
 * Slice ids are given in begin order (the importer numbers a slice when it
 * begins), so a parent's id is below its children's. The slices are read
 * once, in any order, into an array indexed by id; one pass in id order
 * then finds each slice's node from its parent's node and its name. A name
 * is carried as a 64-bit hash of it, computed here from DuckDB's string;
 * each name's text is kept the first time it is met. Nothing is sorted. The children of every node are
 * found in one open-addressed table of (hash of parent and name, node): a
 * probe reads a slot, and the node only when the hash matches.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/map.h"
#include "ui/app.h"

/* The smallest node kept: 1/kMinPart of the whole graph (a flame graph
 * 2000 pixels wide zoomed 10 times shows nodes of 1/20000). */
enum { kMinPart = 20000 };

typedef struct row {
  int64_t parent; /* slice id, 0: none; -1: the row is empty */
  int64_t dur;
  uint64_t h;     /* the name's hash, then the slice's node (kPruned: none) */
  int64_t level;  /* depth in the graph: 0 under the root */
} row;

enum { kPrunedNode = -1 };

typedef struct node {
  int64_t parent; /* node index, -1 for the root */
  uint64_t h;
  int64_t total, self, count;
  bool small; /* under 1/kMinPart of the whole: no child is made */
} node;

/*
 * The children of every node in one open-addressed table keyed by (parent,
 * name): a slot holds the key's hash and the node, so a probe reads one
 * cache line; the node itself is read only to confirm a match.
 */
typedef struct slot {
  uint64_t key; /* 0: empty */
  int64_t node;
} slot;

typedef struct tree {
  node *n;
  size_t len, cap;
  slot *kids;
  size_t kcap; /* a power of two, at most half full */
} tree;

static uint64_t kid_key(int64_t parent, uint64_t h) {
  uint64_t k = etch__mix64(h ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ull));
  return k ? k : 1;
}

static bool grow_kids(tree *t) {
  size_t nc = t->kcap ? t->kcap * 2 : 1024;
  slot *g = etch__calloc(nc, sizeof *g);
  if (!g) return false;
  for (size_t i = 0; i < t->kcap; i++) {
    if (!t->kids[i].key) continue;
    size_t j = t->kids[i].key & (nc - 1);
    while (g[j].key) j = (j + 1) & (nc - 1);
    g[j] = t->kids[i];
  }
  free(t->kids);
  t->kids = g;
  t->kcap = nc;
  return true;
}

/* The child of `parent` named `h`, made if needed; -1 out of memory. */
static int64_t child(tree *t, int64_t parent, uint64_t h) {
  if ((t->len + 1) * 2 > t->kcap && !grow_kids(t)) return -1;
  uint64_t k = kid_key(parent, h);
  size_t j = k & (t->kcap - 1);
  for (; t->kids[j].key; j = (j + 1) & (t->kcap - 1)) {
    if (t->kids[j].key != k) continue;
    const node *x = &t->n[t->kids[j].node];
    if (x->parent == parent && x->h == h) return t->kids[j].node;
  }
  if (t->len == t->cap) {
    size_t nc = t->cap * 2;
    node *g = etch__realloc(t->n, nc * sizeof *g);
    if (!g) return -1;
    t->n = g;
    t->cap = nc;
  }
  int64_t i = (int64_t)t->len++;
  t->n[i] = (node){.parent = parent, .h = h};
  t->kids[j] = (slot){.key = k, .node = i};
  return i;
}

/*
 * A name's hash, from DuckDB's 16-byte string: its length, then up to 12
 * bytes inline or a 4-byte prefix and a pointer. Only the name's own bytes
 * are hashed, whatever fills the rest.
 */
static uint64_t name_hash(const char *v) {
  uint32_t len;
  memcpy(&len, v, 4);
  if (len <= 12) {
    uint64_t w[2] = {0, 0};
    memcpy(w, v + 4, len);
    return etch__mix64(w[0] ^ etch__mix64(w[1] ^ len));
  }
  const char *p;
  memcpy(&p, v + 8, sizeof p);
  return etch__hash_bytes(p, len, 0x5bd1e995u);
}

static char *name_dup(const char *v) {
  uint32_t len;
  memcpy(&len, v, 4);
  const char *p = v + 4;
  if (len > 12) memcpy(&p, v + 8, sizeof p);
  char *s = etch__malloc((size_t)len + 1);
  if (!s) return NULL;
  memcpy(s, p, len);
  s[len] = '\0';
  return s;
}

int etch__ui_flame(etch__db *db, int64_t start, int64_t end, int64_t utid,
                   FILE *out) {
  bool range = start <= end;
  char where[256];
  snprintf(where, sizeof where, "WHERE dur > 0%s%s",
           range ? " AND ts < $1 AND ts + dur > $2" : "",
           utid >= 0 ? " AND track_id IN (SELECT id FROM track WHERE utid = $3)"
                     : "");
  etch__ui_bind b[3] = {{.i = end}, {.i = start}, {.i = utid}};
  size_t nb = utid >= 0 ? 3 : range ? 2 : 0;
  /* Parameters must be numbered from 1 and all used: without a range
   * $1 and $2 still appear when utid is given. */
  if (utid >= 0 && !range)
    snprintf(where, sizeof where,
             "WHERE dur > 0 AND $1 = $1 AND $2 = $2 AND track_id IN "
             "(SELECT id FROM track WHERE utid = $3)");
  etch__res r;
  int64_t maxid = 0;
  int rc = etch__ui_query(db, "SELECT CAST(coalesce(max(id), 0) AS BIGINT) FROM slice",
                          NULL, 0, &r);
  if (rc) return rc;
  if (etch__res_next(&r)) maxid = etch__res_i64(&r, 0);
  if ((rc = etch__res_close(&r))) return rc;
  if (maxid < 0 || maxid > (int64_t)(SIZE_MAX / sizeof(row)) - 1)
    return etch__error(ETCH_ELIMIT, "slice ids up to %lld", (long long)maxid);

  row *rows = etch__malloc(((size_t)maxid + 1) * sizeof *rows);
  if (!rows) return etch__error(ETCH_ENOMEM, "out of memory");
  for (int64_t i = 0; i <= maxid; i++) rows[i].parent = -1;
  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT CAST(id AS BIGINT), CAST(coalesce(parent_id, 0) AS BIGINT),"
           " CAST(%s AS BIGINT), coalesce(name, '') FROM slice %s",
           range ? "least(ts + dur, $1) - greatest(ts, $2)" : "dur", where);
  rc = etch__ui_query(db, sql, b, nb, &r);
  if (rc) {
    free(rows);
    return rc;
  }
  /* No column can be NULL: a chunk's vectors are read as arrays (a call
   * per cell would cost more than the rest), names hashed here (cheaper
   * than DuckDB's hash of each), and each name kept the first time it
   * is met. */
  etch_u64map names = {0};
  char **name = NULL;
  size_t nname = 0, ncap = 0;
  duckdb_data_chunk chunk;
  while ((chunk = duckdb_fetch_chunk(r.r)) != NULL) {
    idx_t n = duckdb_data_chunk_get_size(chunk);
    const int64_t *col[3];
    for (idx_t c = 0; c < 3; c++)
      col[c] = duckdb_vector_get_data(duckdb_data_chunk_get_vector(chunk, c));
    const char *nm = duckdb_vector_get_data(duckdb_data_chunk_get_vector(chunk, 3));
    uint64_t last = 0;
    bool have_last = false;
    for (idx_t i = 0; i < n; i++) {
      int64_t id = col[0][i];
      if (id <= 0 || id > maxid) continue;
      int64_t p = col[1][i];
      uint64_t h = name_hash(nm + i * 16);
      if (!have_last || h != last) {
        int64_t k;
        if (!etch__u64map_get(&names, h, &k)) {
          if (nname == ncap) {
            size_t nc = ncap ? ncap * 2 : 64;
            char **g = etch__realloc(name, nc * sizeof *g);
            if (!g) {
              r.err = etch__error(ETCH_ENOMEM, "out of memory");
              break;
            }
            name = g;
            ncap = nc;
          }
          name[nname] = name_dup(nm + i * 16);
          if (!name[nname] ||
              !etch__u64map_put(&names, h, (int64_t)nname)) {
            free(name[nname]);
            r.err = etch__error(ETCH_ENOMEM, "out of memory");
            break;
          }
          nname++;
        }
        last = h;
        have_last = true;
      }
      rows[id] = (row){.parent = p >= 0 && p < id ? p : 0,
                       .dur = col[2][i],
                       .h = h};
    }
    duckdb_destroy_data_chunk(&chunk);
    if (r.err) break;
  }
  if (!r.err) {
    const char *msg = duckdb_result_error(&r.r);
    if (msg) r.err = etch__error(ETCH_ESQL, "%s", msg);
  }
  if ((rc = etch__res_close(&r))) {
    for (size_t i = 0; i < nname; i++) free(name[i]);
    free(name);
    etch__u64map_free(&names);
    free(rows);
    return rc;
  }

  tree t = {.cap = 1024};
  t.n = etch__malloc(t.cap * sizeof *t.n);
  if (!t.n) {
    for (size_t i = 0; i < nname; i++) free(name[i]);
    free(name);
    etch__u64map_free(&names);
    free(rows);
    return etch__error(ETCH_ENOMEM, "out of memory");
  }
  t.n[0] = (node){.parent = -1};
  t.len = 1;
  /*
   * Level by level (a slice's level: its parent's + 1; 0 without one in the
   * selection), each level in id order. A node's slices all have its level,
   * so once a level is done its nodes' totals are whole; the root's total
   * is whole after level 0. A node under 1/kMinPart of the root is left
   * out of the answer with all below it, so no child of it is made: its
   * slices' children are not looked up (for a trace whose stacks are all
   * different, nearly every slice of the deep levels).
   */
  int64_t nlevels = 0;
  for (int64_t id = 1; id <= maxid; id++) {
    row *x = &rows[id];
    if (x->parent < 0) continue;
    /* A parent not in the selection (open, or outside the thread) makes
     * the slice a root's child. */
    if (x->parent > 0 && rows[x->parent].parent < 0) x->parent = 0;
    x->level = x->parent > 0 ? rows[x->parent].level + 1 : 0;
    if (x->level + 1 > nlevels) nlevels = x->level + 1;
  }
  int64_t *first = etch__calloc((size_t)nlevels + 1, sizeof *first);
  int64_t *order = first ? etch__malloc(((size_t)maxid + 1) * sizeof *order)
                         : NULL;
  if (!order) rc = etch__error(ETCH_ENOMEM, "out of memory");
  if (!rc) {
    for (int64_t id = 1; id <= maxid; id++)
      if (rows[id].parent >= 0) first[rows[id].level + 1]++;
    for (int64_t l = 0; l < nlevels; l++) first[l + 1] += first[l];
    int64_t *at = etch__malloc(((size_t)nlevels + 1) * sizeof *at);
    if (!at) {
      rc = etch__error(ETCH_ENOMEM, "out of memory");
    } else {
      memcpy(at, first, ((size_t)nlevels + 1) * sizeof *at);
      for (int64_t id = 1; id <= maxid; id++)
        if (rows[id].parent >= 0) order[at[rows[id].level]++] = id;
      free(at);
    }
  }
  for (int64_t l = 0; l < nlevels && !rc; l++) {
    size_t made = t.len;
    for (int64_t k = first[l]; k < first[l + 1]; k++) {
      row *x = &rows[order[k]];
      int64_t pn = 0;
      if (x->parent > 0) {
        pn = (int64_t)rows[x->parent].h; /* its node, stored below */
        if (pn == kPrunedNode || t.n[pn].small) {
          x->h = (uint64_t)kPrunedNode;
          continue;
        }
      }
      int64_t nd = child(&t, pn, x->h);
      if (nd < 0) {
        rc = etch__error(ETCH_ENOMEM, "out of memory");
        break;
      }
      t.n[nd].total += x->dur;
      t.n[nd].count++;
      /* The name's hash is no longer needed: the slice's node replaces
       * it, for its children (on the next level). */
      x->h = (uint64_t)nd;
    }
    int64_t whole = 0;
    if (l == 0)
      for (size_t i = 1; i < t.len; i++) whole += t.n[i].total;
    if (l == 0) t.n[0].total = whole; /* set again below, the same */
    size_t big = 0;
    for (size_t i = made; i < t.len; i++) {
      t.n[i].small = t.n[i].total * kMinPart < t.n[0].total;
      big += !t.n[i].small;
    }
    /* Every node of this level is left out: so is everything below. */
    if (!big) break;
  }
  t.n[0].total = 0;
  free(first);
  free(order);
  free(rows);
  if (!rc) {
    for (size_t i = 1; i < t.len; i++) {
      t.n[i].self += t.n[i].total;
      if (t.n[i].parent > 0) t.n[t.n[i].parent].self -= t.n[i].total;
      else t.n[0].total += t.n[i].total;
    }
    t.n[0].self = 0;
  }
  if (!rc) {
    fputs("{\"names\":[", out);
    for (size_t i = 0; i < nname; i++) {
      if (i) fputc(',', out);
      etch__json_string(out, name[i], strlen(name[i]));
    }
    /* Nodes too small to be seen (under 1/kMinPart of the whole, and so
     * their subtrees) are left out; a node's index is written anew (a
     * parent comes before its children). `count` reuses the pruned
     * node's parent field: its new index, or -1. */
    fputs("],\"nodes\":[", out);
    int64_t kept = 0, dropped = 0;
    for (size_t i = 0; i < t.len; i++) {
      int64_t p = t.n[i].parent;
      int64_t np = p >= 0 ? t.n[p].parent : -1; /* p's new index */
      bool keep = i == 0 || (np >= 0 && t.n[i].total * kMinPart >= t.n[0].total);
      if (!keep) {
        dropped++;
        t.n[i].parent = -1;
        continue;
      }
      int64_t ni = -1;
      if (i && !etch__u64map_get(&names, t.n[i].h, &ni)) ni = -1;
      fprintf(out, "%s[%lld,%lld,%lld,%lld,%lld]", i ? "," : "",
              (long long)(i ? np : -1), (long long)ni,
              (long long)t.n[i].total, (long long)t.n[i].self,
              (long long)t.n[i].count);
      t.n[i].parent = kept++;
    }
    fprintf(out, "],\"pruned\":%lld,\"min_part\":%d}", (long long)dropped,
            kMinPart);
  }
  for (size_t i = 0; i < nname; i++) free(name[i]);
  free(name);
  etch__u64map_free(&names);
  free(t.kids);
  free(t.n);
  return rc;
}

/*
 * flame.c - the flame graph: the slices merged by their stack (the names
 * from the track's root down to them), each node's total (the durations of
 * its slices), self (total less its children's totals) and count.
 *
 * Slice ids are given in begin order (the importer numbers a slice when it
 * begins), so a parent's id is below its children's. The slices are read
 * once from slice_data (integers only: a name is its key_id, each key's
 * text read once from slice_name, keys with the same text one name), in
 * any order, into arrays indexed by id. Then level by level (a slice's
 * level: its parent's + 1, 0 without one in the selection), each level in
 * id order, each slice's node is found from its parent's node and its
 * name. A node's slices all have its level, so once a level is done its
 * nodes' totals are whole; a node under 1/kMinPart of the whole is left
 * out of the answer with all below it, so no child of it is made.
 *
 * The children of a level's parents are found in a table indexed by (the
 * parent's rank among the level's parents, name) when that table is small
 * (a trace has few names, and a level at most kMinPart parents that are
 * kept); else in one open-addressed table of (hash of parent and name,
 * node). Nothing is sorted.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/containers.h"
#include "base/map.h"
#include "ui/app.h"

/* The smallest node kept: 1/kMinPart of the whole graph (a flame graph
 * 2000 pixels wide zoomed 10 times shows nodes of 1/20000). */
enum { kMinPart = 20000 };

/* Direct tables of children up to this many slots (4 bytes each). */
enum { kDirectMax = 1 << 22 };

/* A slice's nm[] once its level is done: its node + 1, or this for a
 * slice left out (under a node that is). Before: its name + 1 (0: no
 * slice of that id in the selection). */
#define PRUNED UINT32_MAX

typedef struct node {
  int64_t total, self, count;
  int32_t parent; /* node index, -1 for the root */
  uint32_t name;
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

/* A node's sums while its level is made, apart from the node (the hot
 * part: one cache line holds four). */
typedef struct sums {
  int64_t total, count;
} sums;

typedef struct tree {
  etch_vec nodes, sums; /* of node and sums, the same length */
  node *n;              /* their arrays (new_node sets them as they move) */
  sums *sum;
  size_t len;
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

/* A new node; -1 out of memory. */
static int64_t new_node(tree *t, int64_t parent, uint32_t name) {
  /* Room in both first: they grow together or not at all. */
  if (ETCH_VEC_RESERVE(&t->nodes, node, 1) ||
      ETCH_VEC_RESERVE(&t->sums, sums, 1))
    return -1;
  (void)ETCH_VEC_PUSH(&t->nodes, node,
                      {.parent = (int32_t)parent, .name = name});
  (void)ETCH_VEC_PUSH(&t->sums, sums, {0, 0});
  t->n = ETCH_VEC_AT(&t->nodes, node);
  t->sum = ETCH_VEC_AT(&t->sums, sums);
  return (int64_t)t->len++;
}

/* The child of `parent` named `name`, made if needed (the hashed way); -1
 * out of memory. */
static int64_t child(tree *t, int64_t parent, uint32_t name) {
  if ((t->len + 1) * 2 > t->kcap && !grow_kids(t)) return -1;
  uint64_t k = kid_key(parent, name);
  size_t j = k & (t->kcap - 1);
  for (; t->kids[j].key; j = (j + 1) & (t->kcap - 1)) {
    if (t->kids[j].key != k) continue;
    const node *x = &t->n[t->kids[j].node];
    if (x->parent == parent && x->name == name) return t->kids[j].node;
  }
  int64_t i = new_node(t, parent, name);
  if (i >= 0) t->kids[j] = (slot){.key = k, .node = i};
  return i;
}

/* DuckDB's validity mask: a bit a row, set when the row is not NULL; no
 * mask, no NULL. */
static inline bool is_valid(const uint64_t *v, idx_t row) {
  return !v || ((v[row / 64] >> (row % 64)) & 1);
}

/* The selection's slices, by id. */
typedef struct sel {
  uint32_t *par; /* parent id, 0: none (or not in the selection) */
  uint32_t *nm;  /* see PRUNED */
  uint32_t *lvl;
  int64_t *dur;
  int64_t lo, hi; /* the ids met: [lo, hi] */
} sel;

static void sel_free(sel *x) {
  free(x->par);
  free(x->nm);
  free(x->lvl);
  free(x->dur);
}

/* Reads the selection's slices (the query's columns: id, parent_id, the
 * duration counted, key_id) into `x`; names by `names` (a key slice_name
 * lacks: name `unknown`). */
static int read_slices(etch__res *r, int64_t maxid, const etch__ui_names *names,
                       uint32_t unknown, sel *x, const atomic_bool *stop) {
  duckdb_data_chunk chunk;
  x->lo = maxid + 1;
  x->hi = 0;
  while ((chunk = duckdb_fetch_chunk(r->r)) != NULL) {
    if (stop && atomic_load_explicit(stop, memory_order_relaxed)) {
      duckdb_destroy_data_chunk(&chunk);
      r->err = etch__error(ETCH_EINVAL, "the flame graph was no longer wanted");
      return etch__res_close(r);
    }
    idx_t n = duckdb_data_chunk_get_size(chunk);
    const int64_t *col[4];
    uint64_t *valid[4];
    for (idx_t c = 0; c < 4; c++) {
      duckdb_vector v = duckdb_data_chunk_get_vector(chunk, c);
      col[c] = duckdb_vector_get_data(v);
      valid[c] = duckdb_vector_get_validity(v);
    }
    for (idx_t i = 0; i < n; i++) {
      if (!is_valid(valid[0], i) || !is_valid(valid[2], i)) continue;
      int64_t id = col[0][i];
      if (id <= 0 || id > maxid || col[2][i] <= 0) continue;
      int64_t p = is_valid(valid[1], i) ? col[1][i] : 0;
      int64_t k = is_valid(valid[3], i) ? etch__ui_names_index(names, col[3][i])
                                        : -1;
      x->par[id] = p > 0 && p < id ? (uint32_t)p : 0;
      x->nm[id] = (k < 0 ? unknown : (uint32_t)k) + 1;
      x->dur[id] = col[2][i];
      if (id < x->lo) x->lo = id;
      if (id > x->hi) x->hi = id;
    }
    duckdb_destroy_data_chunk(&chunk);
  }
  const char *msg = duckdb_result_error(&r->r);
  if (msg) r->err = etch__error(ETCH_ESQL, "%s", msg);
  return etch__res_close(r);
}

int etch__ui_flame(etch__db *db, int64_t start, int64_t end, int64_t utid,
                   FILE *out) {
  return etch__ui_flame_until(db, start, end, utid, NULL, out);
}

/* The selection's query: the slices (id, parent_id, the duration counted,
 * key_id) of the range (start <= end) and of the thread `utid` (>= 0).
 * Slices of no time (dur <= 0: instants, and slices still open at the
 * end) count for nothing: read_slices leaves them out (the duration
 * counted in a range is > 0 exactly when dur is), which costs DuckDB no
 * filter and no copy. Parameters are numbered from 1 and all used: without
 * a range $1 and $2 still appear when utid is given. */
static const char *selection_sql(bool range, bool thread) {
  if (range && thread)
    return "SELECT id, parent_id, least(ts + dur, $1) - greatest(ts, $2),"
           " key_id FROM slice_data WHERE ts < $1 AND ts + dur > $2"
           " AND track_id IN (SELECT id FROM track WHERE utid = $3)";
  if (range)
    return "SELECT id, parent_id, least(ts + dur, $1) - greatest(ts, $2),"
           " key_id FROM slice_data WHERE ts < $1 AND ts + dur > $2";
  if (thread)
    return "SELECT id, parent_id, dur, key_id FROM slice_data"
           " WHERE $1 = $1 AND $2 = $2 AND track_id IN"
           " (SELECT id FROM track WHERE utid = $3)";
  return "SELECT id, parent_id, dur, key_id FROM slice_data";
}

/* Step 1: the selection's slices into `x` (arrays by id up to *maxid),
 * their names in *names (a reference). */
static int read_selection(etch__db *db, int64_t start, int64_t end,
                          int64_t utid, const atomic_bool *stop, sel *x,
                          etch__ui_names **names) {
  memset(x, 0, sizeof *x);
  *names = NULL;
  bool range = start <= end;
  int64_t maxid = 0;
  int rc = etch__query_ints(
      db, "SELECT CAST(coalesce(max(id), 0) AS BIGINT) FROM slice_data", NULL,
      0, &maxid, 1);
  if (rc) return rc;
  if (maxid < 0 || maxid >= INT32_MAX ||
      (uint64_t)maxid >= SIZE_MAX / 2 / sizeof(int64_t))
    return etch__error(ETCH_ELIMIT, "slice ids up to %lld", (long long)maxid);
  if ((rc = etch__ui_names_load(db, true, names))) return rc;
  /* Name indexes: the texts', then one for a key slice_name lacks. */
  uint32_t unknown = (uint32_t)(*names)->n;
  /* Zeroed arrays: the pages of ids outside the selection are never
   * touched. */
  size_t nid = (size_t)maxid + 1;
  x->par = etch__calloc(nid, sizeof *x->par);
  x->nm = etch__calloc(nid, sizeof *x->nm);
  x->lvl = etch__calloc(nid, sizeof *x->lvl);
  x->dur = etch__calloc(nid, sizeof *x->dur);
  if (!x->par || !x->nm || !x->lvl || !x->dur)
    rc = etch__error(ETCH_ENOMEM, "out of memory");
  etch__sql_arg b[3] = {ETCH__SQL_I64(end), ETCH__SQL_I64(start),
                        ETCH__SQL_I64(utid)};
  size_t nb = utid >= 0 ? 3 : range ? 2 : 0;
  etch__res r;
  if (!rc) rc = etch__query_run(db, selection_sql(range, utid >= 0), b, nb, &r);
  if (!rc) rc = read_slices(&r, maxid, *names, unknown, x, stop);
  if (rc) {
    sel_free(x);
    etch__ui_names_unref(*names);
    *names = NULL;
  }
  return rc;
}

/* Step 2: each slice's level (a parent not in the selection, open or
 * outside the thread or the range, makes the slice a root's child), then
 * the slices by level, each level in id order: level l's are
 * (*order)[first[l] .. first[l + 1]). */
static int order_by_level(sel *x, int64_t **first_out, uint32_t **order_out,
                          size_t *nlevels_out) {
  etch_vec counts = {0}; /* first[l + 1]: level l's slices, counted */
  int64_t *first = NULL;
  size_t nlevels = 0;
  int rc = ETCH_OK;
  for (int64_t id = x->lo; id <= x->hi && !rc; id++) {
    if (!x->nm[id]) continue;
    uint32_t p = x->par[id];
    if (p && !x->nm[p]) x->par[id] = p = 0;
    uint32_t l = p ? x->lvl[p] + 1 : 0;
    ETCH_DCHECK(!p || (int64_t)p < id); /* a parent before its children */
    x->lvl[id] = l;
    while (!rc && ETCH_VEC_COUNT(&counts, int64_t) < (size_t)l + 2)
      rc = ETCH_VEC_PUSH(&counts, int64_t, 0);
    if (rc) break;
    first = ETCH_VEC_AT(&counts, int64_t);
    first[l + 1]++;
    if (l + 1 > nlevels) nlevels = l + 1;
  }
  uint32_t *order = NULL;
  if (!rc && nlevels) {
    for (size_t l = 0; l < nlevels; l++) first[l + 1] += first[l];
    order = etch__malloc((size_t)first[nlevels] * sizeof *order);
    int64_t *at = etch__malloc((nlevels + 1) * sizeof *at);
    if (!order || !at) {
      rc = etch__error(ETCH_ENOMEM, "out of memory");
    } else {
      memcpy(at, first, (nlevels + 1) * sizeof *at);
      for (int64_t id = x->lo; id <= x->hi; id++)
        if (x->nm[id]) order[at[x->lvl[id]]++] = (uint32_t)id;
    }
    free(at);
  }
  free(x->lvl);
  x->lvl = NULL;
  if (rc) {
    etch__vec_free(&counts);
    free(order);
    return rc;
  }
  *first_out = first; /* the vector's bytes, the caller's to free */
  *order_out = order;
  *nlevels_out = nlevels;
  return ETCH_OK;
}

/* Step 3: the nodes, level by level (this file's head says how). */
typedef struct level_maker {
  tree *t;
  sel *x;
  uint32_t nnames;
  /* rank[node]: its index among the parents of the level being made (-1:
   * left out), in `ranks`; direct[rank * nnames + name]: the child + 1. */
  etch_vec ranks;
  int32_t *rank, *direct;
  size_t direct_cap;
} level_maker;

/* One level's slices order[from, to) into nodes, their parents the nodes
 * [parents_from, parents_to); *big: how many of the new nodes are kept. */
static int make_level(level_maker *m, const uint32_t *order, int64_t from,
                      int64_t to, size_t parents_from, size_t parents_to,
                      size_t *big) {
  tree *t = m->t;
  sel *x = m->x;
  /* The ranks of the parents, the previous level's kept nodes. */
  if (t->len > ETCH_VEC_COUNT(&m->ranks, int32_t)) {
    size_t more = t->len - ETCH_VEC_COUNT(&m->ranks, int32_t);
    if (ETCH_VEC_RESERVE(&m->ranks, int32_t, more))
      return etch__error(ETCH_ENOMEM, "out of memory");
    m->ranks.len += more * sizeof(int32_t);
    m->rank = ETCH_VEC_AT(&m->ranks, int32_t);
  }
  size_t nparents = 0;
  for (size_t i = parents_from; i < parents_to; i++)
    m->rank[i] = t->n[i].small ? -1 : (int32_t)nparents++;
  size_t made = t->len;
  uint64_t cells = (uint64_t)nparents * m->nnames;
  bool use_direct =
      cells <= kDirectMax && cells <= (uint64_t)(to - from) * 4 + 65536;
  if (use_direct) {
    if (cells > m->direct_cap) {
      free(m->direct);
      m->direct = etch__malloc(cells * sizeof *m->direct);
      m->direct_cap = m->direct ? cells : 0;
      if (!m->direct) return etch__error(ETCH_ENOMEM, "out of memory");
    }
    memset(m->direct, 0, cells * sizeof *m->direct);
  }
  for (int64_t k = from; k < to; k++) {
    uint32_t id = order[k];
    uint32_t p = x->par[id], pn = 0;
    if (p) {
      pn = x->nm[p];
      if (pn == PRUNED || m->rank[pn - 1] < 0) {
        x->nm[id] = PRUNED;
        continue;
      }
      pn--;
    }
    uint32_t name = x->nm[id] - 1;
    ETCH_DCHECK(name < m->nnames && pn < t->len);
    int64_t nd;
    if (use_direct) {
      int32_t *d = &m->direct[(size_t)m->rank[pn] * m->nnames + name];
      nd = *d - 1;
      if (nd < 0) {
        nd = new_node(t, pn, name);
        *d = (int32_t)(nd + 1);
      }
    } else {
      nd = child(t, pn, name);
    }
    if (nd < 0) return etch__error(ETCH_ENOMEM, "out of memory");
    t->sum[nd].total += x->dur[id];
    t->sum[nd].count++;
    x->nm[id] = (uint32_t)nd + 1;
  }
  for (size_t i = made; i < t->len; i++) {
    t->n[i].total = t->sum[i].total;
    t->n[i].count = t->sum[i].count;
  }
  if (parents_from == 0) { /* the first level: the whole, for `small` */
    int64_t whole = 0;
    for (size_t i = 1; i < t->len; i++) whole += t->n[i].total;
    t->n[0].total = whole; /* set again by sum_self, the same */
  }
  *big = 0;
  for (size_t i = made; i < t->len; i++) {
    t->n[i].small = t->n[i].total * kMinPart < t->n[0].total;
    *big += !t->n[i].small;
  }
  return ETCH_OK;
}

static int build_tree(tree *t, sel *x, const int64_t *first,
                      const uint32_t *order, size_t nlevels, uint32_t nnames,
                      const atomic_bool *stop) {
  if (new_node(t, -1, 0) < 0) return etch__error(ETCH_ENOMEM, "out of memory");
  level_maker m = {.t = t, .x = x, .nnames = nnames};
  size_t parents_from = 0, parents_to = 1; /* the previous level's nodes */
  int rc = ETCH_OK;
  for (size_t l = 0; l < nlevels && !rc; l++) {
    if (stop && atomic_load_explicit(stop, memory_order_relaxed)) {
      rc = etch__error(ETCH_EINVAL, "the flame graph was no longer wanted");
      break;
    }
    size_t made = t->len, big = 0;
    rc = make_level(&m, order, first[l], first[l + 1], parents_from,
                    parents_to, &big);
    /* Every node of this level is left out: so is everything below. */
    if (rc || !big) break;
    parents_from = made;
    parents_to = t->len;
  }
  etch__vec_free(&m.ranks);
  free(m.direct);
  return rc;
}

/* Step 4: each node's self time, the root's total. */
static void sum_self(tree *t) {
  t->n[0].total = 0;
  for (size_t i = 1; i < t->len; i++) {
    t->n[i].self += t->n[i].total;
    if (t->n[i].parent > 0) t->n[t->n[i].parent].self -= t->n[i].total;
    else t->n[0].total += t->n[i].total;
  }
  t->n[0].self = 0;
}

/*
 * Step 5: the JSON. Nodes too small to be seen (under 1/kMinPart of the
 * whole, and so their subtrees) are left out; a node's index is written
 * anew (a parent comes before its children), and so is its name's (the
 * names of the nodes kept, in the order first met). `parent` of a node
 * becomes its new index, or -1 when it is left out.
 */
static int write_graph(tree *t, const etch__ui_names *names, uint32_t nnames,
                       FILE *out) {
  int64_t *name_out = etch__malloc(nnames * sizeof *name_out);
  uint32_t *names_kept = etch__malloc(nnames * sizeof *names_kept);
  etch__ui_membuf nodes;
  FILE *nf = name_out && names_kept ? etch__ui_membuf_open(&nodes) : NULL;
  if (!nf) {
    free(name_out);
    free(names_kept);
    return etch__error(ETCH_ENOMEM, "out of memory");
  }
  for (uint32_t i = 0; i < nnames; i++) name_out[i] = -1;
  uint32_t nkept_names = 0;
  int64_t kept = 0, dropped = 0;
  for (size_t i = 0; i < t->len; i++) {
    int64_t p = t->n[i].parent;
    int64_t np = p >= 0 ? t->n[p].parent : -1; /* p's new index */
    bool keep =
        i == 0 || (np >= 0 && t->n[i].total * kMinPart >= t->n[0].total);
    if (!keep) {
      dropped++;
      t->n[i].parent = -1;
      continue;
    }
    int64_t ni = -1;
    if (i) {
      uint32_t nm = t->n[i].name;
      ETCH_DCHECK(nm < nnames);
      if (name_out[nm] < 0) {
        name_out[nm] = nkept_names;
        names_kept[nkept_names++] = nm;
      }
      ni = name_out[nm];
    }
    fprintf(nf, "%s[%lld,%lld,%lld,%lld,%lld]", i ? "," : "",
            (long long)(i ? np : -1), (long long)ni, (long long)t->n[i].total,
            (long long)t->n[i].self, (long long)t->n[i].count);
    t->n[i].parent = (int32_t)kept++;
  }
  int rc = etch__ui_membuf_close(&nodes);
  if (!rc) {
    fputs("{\"names\":[", out);
    for (uint32_t i = 0; i < nkept_names; i++) {
      const char *s =
          names_kept[i] < names->n ? names->text[names_kept[i]] : NULL;
      if (i) fputc(',', out);
      etch__json_string(out, s ? s : "", s ? strlen(s) : 0);
    }
    fputs("],\"nodes\":[", out);
    fwrite(nodes.v.data, 1, nodes.v.len, out);
    fprintf(out, "],\"pruned\":%lld,\"min_part\":%d}", (long long)dropped,
            kMinPart);
  }
  etch__ui_membuf_free(&nodes);
  free(name_out);
  free(names_kept);
  return rc;
}

int etch__ui_flame_until(etch__db *db, int64_t start, int64_t end,
                         int64_t utid, const atomic_bool *stop, FILE *out) {
  sel x;
  etch__ui_names *names;
  int rc = read_selection(db, start, end, utid, stop, &x, &names);
  if (rc) return rc;
  uint32_t nnames = (uint32_t)names->n + 1; /* and one for a key lacking */
  int64_t *first = NULL;
  uint32_t *order = NULL;
  size_t nlevels = 0;
  rc = order_by_level(&x, &first, &order, &nlevels);
  tree t = {0};
  if (!rc) rc = build_tree(&t, &x, first, order, nlevels, nnames, stop);
  free(first);
  free(order);
  sel_free(&x);
  if (!rc) sum_self(&t);
  if (!rc) rc = write_graph(&t, names, nnames, out);
  etch__ui_names_unref(names);
  free(t.kids);
  etch__vec_free(&t.nodes);
  etch__vec_free(&t.sums);
  return rc;
}

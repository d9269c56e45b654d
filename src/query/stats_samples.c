/*
 * stats_samples.c - CPU samples in etch stats: the functions the samples
 * were in, by self samples (the function was the stack's innermost frame)
 * and by total samples (it was anywhere on the stack, counted once per
 * sample however often it recurses), as a sampling profiler's flat and
 * cumulative columns.
 *
 * A frame's function is its symbol (the first line of the ModuleSymbols
 * that name its address), else the name interned with the frame, else
 * its module's file name and offset ("libc.so.6+0x1098ec"), the same rule
 * from the reader's tables (etch stats on a trace) and from the imported
 * ones (on a database). Every table may be hostile: a parent chain that
 * loops or runs longer than the callsites stops there.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/containers.h"
#include "base/map.h"
#include "query/stats_int.h"

static int cmp_self(const void *a, const void *b) {
  const etch__sample_fn *x = a, *y = b;
  if (x->self != y->self) return x->self > y->self ? -1 : 1;
  if (x->total != y->total) return x->total > y->total ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int cmp_total(const void *a, const void *b) {
  const etch__sample_fn *x = a, *y = b;
  if (x->total != y->total) return x->total > y->total ? -1 : 1;
  if (x->self != y->self) return x->self > y->self ? -1 : 1;
  return strcmp(x->name, y->name);
}

void etch__sample_fns_sort(etch__sample_fn *fns, size_t n, bool by_total) {
  if (n) qsort(fns, n, sizeof *fns, by_total ? cmp_total : cmp_self);
}

/* The index of function `name` in fns (of etch__sample_fn), added (a
 * copy of the name) if new; -1 out of memory. */
static int64_t fn_index(etch_u64map *ix, etch_vec *fns, const char *name) {
  uint64_t h = etch__hash_bytes(name, strlen(name), 0x5a3e);
  for (;; h++) {
    int64_t v;
    if (!etch__u64map_get(ix, h, &v)) break;
    if (!strcmp(ETCH_VEC_AT(fns, etch__sample_fn)[v].name, name)) return v;
  }
  size_t n = ETCH_VEC_COUNT(fns, etch__sample_fn);
  if (ETCH_VEC_RESERVE(fns, etch__sample_fn, 1)) return -1;
  char *copy = etch__strdup(name);
  if (!copy || !etch__u64map_put(ix, h, (int64_t)n)) {
    free(copy);
    return -1;
  }
  (void)ETCH_VEC_PUSH(fns, etch__sample_fn, {copy, 0, 0}); /* room made */
  return (int64_t)n;
}

int etch__sample_fns(size_t ncs, const int64_t *parent,
                     const char *const *names, const int64_t *count,
                     etch__sample_fn **out, size_t *nout) {
  *out = NULL;
  *nout = 0;
  etch_vec fnv = {0}; /* of etch__sample_fn; *out is its data */
  etch_u64map ix = {0};
  int64_t *fn_of = etch__malloc((ncs ? ncs : 1) * sizeof *fn_of);
  uint64_t *stamp = NULL;
  int rc = fn_of ? ETCH_OK : ETCH_ENOMEM;
  for (size_t i = 0; !rc && i < ncs; i++) {
    fn_of[i] = -1;
    if (count[i] || names[i]) /* every named callsite: its callers too */
      if ((fn_of[i] = fn_index(&ix, &fnv, names[i] ? names[i] : "?")) < 0)
        rc = ETCH_ENOMEM;
  }
  etch__sample_fn *fns = ETCH_VEC_AT(&fnv, etch__sample_fn);
  size_t n = ETCH_VEC_COUNT(&fnv, etch__sample_fn);
  if (!rc && !(stamp = etch__calloc(n ? n : 1, sizeof *stamp)))
    rc = ETCH_ENOMEM;
  for (size_t i = 0; !rc && i < ncs; i++) {
    if (!count[i] || fn_of[i] < 0) continue;
    ETCH_DCHECK(fn_of[i] < (int64_t)n); /* an index fn_index gave */
    fns[fn_of[i]].self += count[i];
    int64_t c = (int64_t)i;
    for (size_t steps = 0; c >= 0 && (size_t)c < ncs && steps <= ncs;
         steps++, c = parent[c]) {
      int64_t f = fn_of[c];
      if (f < 0 || stamp[f] == i + 1) continue;
      stamp[f] = i + 1; /* once per stack */
      fns[f].total += count[i];
    }
  }
  free(fn_of);
  free(stamp);
  etch__u64map_free(&ix);
  size_t k = 0; /* functions no sample was in are left out */
  for (size_t i = 0; i < n; i++) {
    if (fns[i].total)
      fns[k++] = fns[i];
    else
      free(fns[i].name);
  }
  if (rc) {
    etch__sample_fns_free(fns, k);
    return etch__error(rc, "stats: out of memory");
  }
  etch__sample_fns_sort(fns, k, false);
  *out = fns;
  *nout = k;
  return ETCH_OK;
}

void etch__sample_fns_free(etch__sample_fn *fns, size_t n) {
  for (size_t i = 0; i < n; i++) free(fns[i].name);
  free(fns);
}

int etch__sample_fns_of_stacks(const etch_stacks *st, const int64_t *count,
                               etch__sample_fn **out, size_t *nout) {
  size_t ncs = st->ncallsites;
  int64_t *parent = etch__malloc((ncs ? ncs : 1) * sizeof *parent);
  const char **names = etch__calloc(ncs ? ncs : 1, sizeof *names);
  char *own = etch__malloc((ncs ? ncs : 1) * 96); /* module+offset names */
  int rc = parent && names && own ? ETCH_OK : ETCH_ENOMEM;
  for (size_t i = 0; !rc && i < ncs; i++) {
    const etch_stack_callsite *c = &st->callsites[i];
    parent[i] = c->parent_id;
    const etch_stack_frame *f = &st->frames[c->frame_id];
    const char *name = f->nsymbols ? st->symbols[f->symbol].name : NULL;
    if (!name || !*name) name = *f->name ? f->name : NULL;
    if (!name) {
      const char *m = st->mappings[f->mapping].name, *slash = strrchr(m, '/');
      if (slash) m = slash + 1;
      snprintf(own + i * 96, 96, "%.70s+0x%" PRIx64, *m ? m : "?", f->rel_pc);
      name = own + i * 96;
    }
    names[i] = name;
  }
  if (!rc) rc = etch__sample_fns(ncs, parent, names, count, out, nout);
  else rc = etch__error(rc, "stats: out of memory");
  free(parent);
  free(names);
  free(own);
  return rc;
}

/* The imported tables' callsites, named by the same rule. */
#define CALLSITES_SQL                                                        \
  "SELECT c.id, c.parent_id, " ETCH__SAMPLE_FN_SQL ", (SELECT count(*) "     \
  "FROM perf_sample p WHERE "                                                \
  "p.callsite_id = c.id) FROM stack_profile_callsite c "                     \
  "JOIN stack_profile_frame f ON f.id = c.frame_id "                         \
  "LEFT JOIN stack_profile_mapping m ON m.id = f.mapping ORDER BY c.id"

int etch__sample_fns_of_db(etch__db *db, int64_t *samples,
                           etch__sample_fn **out, size_t *nout) {
  *samples = 0;
  *out = NULL;
  *nout = 0;
  etch__res res;
  /* A database an older etch wrote has no perf_sample: no samples. */
  int rc = etch__res_query(db,
                           "SELECT count(*) FROM information_schema.tables "
                           "WHERE table_name = 'perf_sample'",
                           "stats", &res);
  if (rc) return rc;
  bool has = etch__res_next(&res) && etch__res_i64(&res, 0) > 0;
  etch__res_close(&res);
  if (!has) return ETCH_OK;
  rc = etch__res_query(db, "SELECT count(*) FROM perf_sample", "stats", &res);
  if (rc) return rc;
  if (etch__res_next(&res)) *samples = etch__res_i64(&res, 0);
  etch__res_close(&res);
  if (!*samples) return ETCH_OK;
  rc = etch__res_query(db, CALLSITES_SQL, "stats", &res);
  if (rc) return rc;
  size_t n = 0;
  etch_vec parents = {0}, counts = {0}, namev = {0}; /* int64_t, char * */
  while (!rc && etch__res_next(&res)) {
    /* ids are the row numbers (import_stacks.c); anything else: no stack */
    if (etch__res_i64(&res, 0) != (int64_t)n) break;
    /* Room in all three first: they grow together or not at all. */
    if (ETCH_VEC_RESERVE(&parents, int64_t, 1) ||
        ETCH_VEC_RESERVE(&counts, int64_t, 1) ||
        ETCH_VEC_RESERVE(&namev, char *, 1)) {
      rc = etch__error(ETCH_ENOMEM, "stats: out of memory");
      break;
    }
    (void)ETCH_VEC_PUSH(&parents, int64_t,
                        etch__res_null(&res, 1) ? -1 : etch__res_i64(&res, 1));
    (void)ETCH_VEC_PUSH(&namev, char *, etch__res_strdup(&res, 2));
    (void)ETCH_VEC_PUSH(&counts, int64_t, etch__res_i64(&res, 3));
    n++;
  }
  int rc2 = etch__res_close(&res);
  if (!rc) rc = rc2;
  char **names = ETCH_VEC_AT(&namev, char *);
  if (!rc)
    rc = etch__sample_fns(n, ETCH_VEC_AT(&parents, int64_t),
                          (const char *const *)names,
                          ETCH_VEC_AT(&counts, int64_t), out, nout);
  for (size_t i = 0; i < n; i++) free(names[i]);
  etch__vec_free(&namev);
  etch__vec_free(&parents);
  etch__vec_free(&counts);
  return rc;
}

/* One of the two tables: by self or by total samples, `top` rows. */
static void fns_table(report *r, bool by_total) {
  const etch__stats_data *d = r->d;
  etch__sample_fn *rows = NULL;
  size_t n = d->nfns;
  if (n && (rows = etch__malloc(n * sizeof *rows))) {
    memcpy(rows, d->fns, n * sizeof *rows);
    etch__sample_fns_sort(rows, n, by_total);
  } else {
    n = 0;
  }
  etch__tt *t = NULL;
  if (r->o->json) {
    jopen(r, by_total ? "top_functions_by_total" : "top_functions_by_self",
          '[');
  } else {
    section(r, by_total ? "top functions by total samples"
                        : "top functions by self samples");
    t = etch__tt_new(5);
    const char *h[] = {"function", "self", "self %", "total", "total %"};
    for (size_t i = 0; i < 5; i++) etch__tt_header(t, i, h[i], i > 0);
  }
  size_t limit = r->o->top > 0 ? (size_t)r->o->top : 10;
  double all = d->samples > 0 ? (double)d->samples : 1.0;
  for (size_t i = 0; i < n && i < limit; i++) {
    if (r->o->json) {
      jopen(r, NULL, '{');
      jstr(r, "function", rows[i].name);
      jint(r, "self", rows[i].self);
      jint(r, "total", rows[i].total);
      jclose(r, '}');
      continue;
    }
    etch__tt_cell(t, rows[i].name);
    etch__tt_cellf(t, "%lld", (long long)rows[i].self);
    etch__tt_cellf(t, "%.1f", 100.0 * (double)rows[i].self / all);
    etch__tt_cellf(t, "%lld", (long long)rows[i].total);
    etch__tt_cellf(t, "%.1f", 100.0 * (double)rows[i].total / all);
  }
  free(rows);
  list_end(r, t, "no samples with a stack");
}

void etch__stats_samples_section(report *r) {
  if (r->d->samples <= 0) return; /* a trace without samples: nothing */
  if (r->o->json) {
    jint(r, "cpu_samples", r->d->samples);
  } else {
    section(r, "CPU samples");
    fprintf(r->out, "  %lld samples\n", (long long)r->d->samples);
  }
  fns_table(r, false);
  if (!r->o->compact) fns_table(r, true);
}

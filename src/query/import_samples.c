/*
 * import_samples.c - the CPU samples of an import: trace_processor's
 * perf_sample table (v58.2: id, ts, utid, cpu, cpu_mode, callsite_id,
 * unwind_error, perf_session_id), one row per TracePacket.perf_sample,
 * and perf_session (one row, id 0, as trace_processor makes for them).
 *
 * The reader hands each sample over as it decodes it (file order); its
 * thread becomes a thread row as a track event's does, so a sample's utid
 * joins thread and process as trace_processor's. The rows are written at
 * the end in timestamp order (equal times in file order), ids from 0 as
 * trace_processor numbers them; callsite_id is the reader's stack row (the
 * stack_profile_callsite of import_stacks.c), NULL for a sample without a
 * stack.
 */
#include <string.h>

#include "query/import_int.h"
#include "query/table_writer.h"

typedef struct imp_sample {
  int64_t ts, utid, callsite_id;
  uint64_t index; /* file order, for a stable sort */
  uint32_t cpu, cpu_mode;
  bool has_cpu;
} imp_sample;

struct etch__imp_samples {
  imp_sample *v;
  size_t n, cap;
  /* Without a database (etch stats on a trace): the functions the samples
   * were in, computed at the end from the reader's stacks. */
  etch__sample_fn *fns;
  size_t nfns;
};

void etch__import_on_sample(const etch_sample *s, void *user) {
  etch__importer *imp = user;
  if (imp->err || imp->sink) return; /* etch load: no samples (yet) */
  struct etch__imp_samples *t = imp->samples;
  if (!t && !(t = imp->samples = etch__calloc(1, sizeof *t))) {
    fail_nomem(imp);
    return;
  }
  int64_t utid = etch__imp_utid(imp, 0, s->pid, s->tid);
  if (!utid || !grow_array((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v)) {
    fail_nomem(imp);
    return;
  }
  t->v[t->n] = (imp_sample){s->ts,       utid,        s->callsite_id,
                            t->n,        s->cpu,      s->cpu_mode,
                            s->has_cpu};
  t->n++;
}

static int by_time(const void *a, const void *b) {
  const imp_sample *x = a, *y = b;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Profiling.CpuMode as trace_processor names it. */
static const char *cpu_mode_name(uint32_t m) {
  static const char *const kNames[] = {"unknown",      "kernel",
                                       "user",         "hypervisor",
                                       "guest_kernel", "guest_user"};
  return m < ETCH_ARRAY_SIZE(kNames) ? kNames[m] : "unknown";
}

/* Without a database: the samples per callsite, then their functions. */
static int sample_fns(struct etch__imp_samples *t, etch_reader *r) {
  etch_stacks st;
  int rc = etch_reader_stacks(r, &st);
  if (rc) return rc;
  int64_t *count = etch__calloc(st.ncallsites ? st.ncallsites : 1,
                                sizeof *count);
  if (!count) return etch__error(ETCH_ENOMEM, "import: out of memory");
  for (size_t i = 0; i < t->n; i++)
    if (t->v[i].callsite_id >= 0 && (size_t)t->v[i].callsite_id < st.ncallsites)
      count[t->v[i].callsite_id]++;
  rc = etch__sample_fns_of_stacks(&st, count, &t->fns, &t->nfns);
  free(count);
  return rc;
}

int etch__import_samples(etch__importer *imp, etch_reader *r) {
  if (imp->err) return imp->err;
  struct etch__imp_samples *t = imp->samples;
  if (!t || !t->n || imp->sink) return ETCH_OK;
  if (!imp->db) return sample_fns(t, r);
  qsort(t->v, t->n, sizeof *t->v, by_time);
  static const etch__col kCols[] = {ETCH__COL_I64, ETCH__COL_I64,
                                    ETCH__COL_I64, ETCH__COL_I64,
                                    ETCH__COL_STR, ETCH__COL_I64,
                                    ETCH__COL_STR, ETCH__COL_I64};
  etch__tw w;
  int rc = etch__tw_open(&w, imp->db, imp->catalog, "perf_sample", kCols,
                         ETCH_ARRAY_SIZE(kCols));
  if (rc) return rc;
  for (size_t i = 0; i < t->n; i++) {
    const imp_sample *s = &t->v[i];
    etch__tw_i64(&w, 0, (int64_t)i);
    etch__tw_i64(&w, 1, s->ts);
    etch__tw_i64(&w, 2, s->utid);
    if (s->has_cpu)
      etch__tw_i64(&w, 3, s->cpu);
    else
      etch__tw_null(&w, 3);
    etch__tw_cstr(&w, 4, cpu_mode_name(s->cpu_mode));
    if (s->callsite_id >= 0)
      etch__tw_i64(&w, 5, s->callsite_id);
    else
      etch__tw_null(&w, 5);
    etch__tw_null(&w, 6);
    etch__tw_i64(&w, 7, 0); /* the one session */
    etch__tw_end_row(&w);
  }
  rc = etch__tw_finish(&w);
  if (rc) return rc;
  /* perf_session: trace_processor's one session of a trace's samples. */
  static const etch__col kSession[] = {ETCH__COL_I64, ETCH__COL_I64,
                                       ETCH__COL_STR};
  rc = etch__tw_open(&w, imp->db, imp->catalog, "perf_session", kSession,
                     ETCH_ARRAY_SIZE(kSession));
  if (rc) return rc;
  etch__tw_i64(&w, 0, 0);
  etch__tw_i64(&w, 1, 0);
  etch__tw_null(&w, 2);
  etch__tw_end_row(&w);
  return etch__tw_finish(&w);
}

bool etch__import_samples_stats(const etch__importer *imp,
                                etch__stats_data *d) {
  const struct etch__imp_samples *t = imp->samples;
  if (!t) return true;
  d->samples = (int64_t)t->n;
  if (!t->nfns) return true;
  d->fns = etch__calloc(t->nfns, sizeof *d->fns);
  if (!d->fns) return false;
  for (size_t i = 0; i < t->nfns; i++) {
    d->fns[i] = t->fns[i];
    if (!(d->fns[i].name = etch__strdup(t->fns[i].name))) return false;
    d->nfns = i + 1;
  }
  return true;
}

void etch__import_samples_free(etch__importer *imp) {
  if (!imp->samples) return;
  etch__sample_fns_free(imp->samples->fns, imp->samples->nfns);
  free(imp->samples->v);
  free(imp->samples);
  imp->samples = NULL;
}

/*
 * save.c - a reader's state saved as bytes and restored into a reader
 * opened on the same file, which then reads on (etch__reader_resume) as if
 * it had never stopped: for `etch query` on a trace being recorded, each
 * query a process of its own (query/import_save.c).
 *
 * What is saved: the machine (the host; a trace of several is not saved),
 * the tracks in creation order with their order state and incremental
 * counters, the clocks with their pairs and snapshots, the sequences with
 * their incremental state, defaults and interned data, the read's bounds,
 * counters and stats, and where the read ended. What is not: what a read
 * holds only while it runs (held records, scratch), the caches the reader
 * rebuilds (the fast path's view of a sequence, the tracks' resolution),
 * and the state of call stacks and custom events (ETCH_EUNSUPPORTED: the
 * caller reads cold).
 *
 * Restoring trusts nothing: every count is checked against the bytes left,
 * every index against what it indexes, every id against the reader's own
 * limits; a save that does not add up is ETCH_EFORMAT.
 */
#include <stdlib.h>
#include <string.h>

#include "reader/clock.h"
#include "reader/packet.h"
#include "reader/reader_int.h"
#include "reader/save.h"
#include "reader/track.h"

#define SAVE_MAGIC 0x5453524843544531ull /* "1ETCHRST" */
#define SAVE_VERSION 1u

/* ---- saving ---------------------------------------------------------------------- */

static void save_track(etch__sv_w *w, const rd_track *t) {
  const etch_track_info *i = &t->info;
  etch__sv_u64(w, i->uuid);
  etch__sv_u64(w, i->parent_uuid);
  etch__sv_u32(w, (uint32_t)i->kind);
  etch__sv_str(w, i->name);
  etch__sv_u32(w, (uint32_t)i->pid);
  etch__sv_u32(w, (uint32_t)i->tid);
  etch__sv_u32(w, (uint32_t)i->counter_unit);
  etch__sv_str(w, i->counter_unit_name);
  etch__sv_i64(w, i->unit_multiplier);
  etch__sv_u8(w, i->is_incremental);
  etch__sv_str(w, i->cmdline);
  etch__sv_u8(w, t->delivered);
  etch__sv_u8(w, t->described);
  etch__sv_u32(w, t->open);
  etch__sv_u32(w, t->announce_no);
  etch__sv_u64(w, t->idle_read);
  etch__sv_u8(w, t->order_state);
  etch__sv_u8(w, t->held_unsorted);
  etch__sv_i64(w, t->order_last);
  etch__sv_u32(w, t->acc_seq);
  etch__sv_u64(w, t->acc_gen);
  etch__sv_i64(w, t->acc_i);
  etch__sv_f64(w, t->acc_d);
}

/* An interning table's entries (iid, string) in increasing iid order for
 * the directory, then the large ids. */
static void save_idtab(etch__sv_w *w, const etch_idtab *t, bool srcloc) {
  etch__sv_u64(w, t->count);
  for (uint32_t i = 0; i < t->hi && i < t->cap; i++) {
    if (!t->dir[i]) continue;
    etch__sv_u64(w, i);
    if (srcloc) {
      const rd_srcloc *s = (const rd_srcloc *)t->dir[i];
      etch__sv_str(w, s->file);
      etch__sv_str(w, s->function);
      etch__sv_u32(w, s->line);
    } else {
      etch__sv_str(w, (const char *)t->dir[i]);
    }
  }
  for (size_t i = 0; t->big.slots && i <= t->big.mask; i++) {
    const etch_ptrmap_slot *s = &t->big.slots[i];
    if (!s->val) continue;
    etch__sv_u64(w, s->key);
    if (srcloc) {
      const rd_srcloc *l = (const rd_srcloc *)s->val;
      etch__sv_str(w, l->file);
      etch__sv_str(w, l->function);
      etch__sv_u32(w, l->line);
    } else {
      etch__sv_str(w, (const char *)s->val);
    }
  }
}

static size_t clock_index(const rd_clocks *c, const rd_clock *k) {
  for (size_t i = 0; i < c->nall; i++)
    if (c->all[i] == k) return i;
  return SIZE_MAX;
}

static void save_seq(etch__sv_w *w, const etch_reader *r, const rd_seq *s) {
  etch__sv_u32(w, s->id);
  etch__sv_u8(w, s->valid);
  etch__sv_u8(w, s->loss_pending);
  etch__sv_u64(w, s->gen);
  etch__sv_u8(w, s->has_clock_default);
  etch__sv_u32(w, s->clock_default);
  etch__sv_u8(w, s->has_track_default);
  etch__sv_u64(w, s->track_default);
  etch__sv_u64(w, s->n_extra_counter_default);
  for (size_t i = 0; i < s->n_extra_counter_default; i++)
    etch__sv_u64(w, s->extra_counter_default[i]);
  etch__sv_u64(w, s->n_extra_dcounter_default);
  for (size_t i = 0; i < s->n_extra_dcounter_default; i++)
    etch__sv_u64(w, s->extra_dcounter_default[i]);
  save_idtab(w, &s->names, false);
  save_idtab(w, &s->cats, false);
  save_idtab(w, &s->da_names, false);
  save_idtab(w, &s->da_strings, false);
  save_idtab(w, &s->srclocs, true);
  for (int i = 0; i < 64; i++)
    etch__sv_u64(w, s->clocks[i] ? clock_index(&r->clocks, s->clocks[i]) + 1
                                 : 0);
  etch__sv_i64(w, s->last_ts);
  etch__sv_u8(w, s->unsorted);
}

static void save_clocks(etch__sv_w *w, const rd_clocks *c) {
  etch__sv_u32(w, c->trace_clock);
  etch__sv_u8(w, c->converted);
  etch__sv_u64(w, c->nall);
  for (size_t i = 0; i < c->nall; i++) {
    const rd_clock *k = c->all[i];
    etch__sv_u64(w, k->key);
    etch__sv_u64(w, k->unit_ns);
    etch__sv_u8(w, k->incremental);
    etch__sv_u8(w, k->has_last);
    etch__sv_u64(w, k->last);
    etch__sv_u64(w, k->hint);
    etch__sv_u64(w, k->npairs);
    for (size_t j = 0; j < k->npairs; j++) {
      etch__sv_u64(w, k->pairs[j].src);
      etch__sv_u64(w, k->pairs[j].dst);
    }
    etch__sv_u64(w, k->nrefs);
    for (size_t j = 0; j < k->nrefs; j++) {
      etch__sv_u32(w, k->refs[j].snap);
      etch__sv_u64(w, k->refs[j].value);
    }
  }
  etch__sv_u64(w, c->nsnaps);
  for (size_t i = 0; i < c->nsnaps; i++) {
    etch__sv_u32(w, c->snaps[i].n);
    for (uint32_t j = 0; j < c->snaps[i].n; j++) {
      etch__sv_u64(w, clock_index(c, c->snaps[i].e[j].clock));
      etch__sv_u64(w, c->snaps[i].e[j].value);
    }
  }
}

static void save_machine(etch__sv_w *w, const etch_machine_info *m) {
  etch__sv_i64(w, m->raw_id);
  etch__sv_str(w, m->name);
  etch__sv_str(w, m->sysname);
  etch__sv_str(w, m->release);
  etch__sv_str(w, m->version);
  etch__sv_str(w, m->arch);
  etch__sv_i64(w, m->num_cpus);
  etch__sv_i64(w, m->system_ram_bytes);
  etch__sv_str(w, m->android_build_fingerprint);
  etch__sv_i64(w, m->android_sdk_version);
  etch__sv_u8(w, m->has_clock_offset);
  etch__sv_i64(w, m->clock_offset);
}

int etch__reader_save(const etch_reader *r, etch__sv_w *w) {
  if (!r || !r->ran || !r->resumable || !r->per_track || r->went_back)
    return etch__error(ETCH_ESTATE, "reader: only a read that ended well, "
                                    "in per-track order, is saved");
  if (r->stk || r->custom || r->nmachines != 1 || r->nheld_tracks)
    return etch__error(ETCH_EUNSUPPORTED,
                       "reader: call stacks, custom events and traces of "
                       "several machines are not saved");
  for (size_t i = 0; i < r->ntracks; i++)
    if (r->track_list[i]->held.len)
      return etch__error(ETCH_EUNSUPPORTED, "reader: records held");
  for (size_t i = 0; i < r->nseq; i++)
    if (r->seq_list[i]->nrecs || r->seq_list[i]->stk)
      return etch__error(ETCH_EUNSUPPORTED, "reader: records held");
  etch__sv_u64(w, SAVE_MAGIC);
  etch__sv_u32(w, SAVE_VERSION);
  etch__sv_u64(w, r->file_dev);
  etch__sv_u64(w, r->file_ino);
  etch__sv_u64(w, r->len);
  etch__sv_u8(w, r->recording);
  etch__sv_u8(w, r->hold_all);
  etch__sv_u64(w, r->gen);
  etch__sv_u32(w, r->nannounced);
  etch__sv_u64(w, r->nreads);
  etch__sv_u64(w, r->track_gen);
  etch__sv_i64(w, r->latest_ts);
  etch__sv_u8(w, r->have_bounds);
  etch__sv_i64(w, r->first_ts);
  etch__sv_i64(w, r->last_ts);
  etch__sv_u64(w, r->gidx);
  etch__sv_u64(w, r->nslices);
  etch__sv_u8(w, r->trace_stats_seen);
  etch__sv_u32(w, (uint32_t)r->malformed_status);
  etch__sv_str(w, r->malformed_first);
  etch__sv_str(w, r->malformed_last);
  save_machine(w, &r->machines[0].info);
  save_track(w, &r->global_track);
  etch__sv_u64(w, r->ntracks);
  for (size_t i = 0; i < r->ntracks; i++) save_track(w, r->track_list[i]);
  save_clocks(w, &r->clocks);
  etch__sv_u64(w, r->nseq);
  for (size_t i = 0; i < r->nseq; i++) save_seq(w, r, r->seq_list[i]);
  enum { kStats = sizeof(etch_reader_stats) / sizeof(uint64_t) };
  uint64_t st[kStats];
  memcpy(st, &r->stats, sizeof st);
  etch__sv_u32(w, kStats);
  for (size_t i = 0; i < kStats; i++) etch__sv_u64(w, st[i]);
  etch__sv_u64(w, SAVE_MAGIC);
  return w->oom ? etch__error(ETCH_ENOMEM, "reader: out of memory")
                : ETCH_OK;
}

/* ---- restoring ------------------------------------------------------------------- */

static int bad(const char *what) {
  return etch__error(ETCH_EFORMAT, "saved reader state: %s", what);
}

/* A string read and pooled; NULL (with in->bad) for NULL when `null_ok`
 * is not set, or out of memory. */
static const char *get_pooled(etch_reader *r, etch__sv_r *in, bool null_ok) {
  size_t n;
  bool is_null;
  const char *s = etch__sv_get_str(in, &n, &is_null);
  if (in->bad) return NULL;
  if (is_null) {
    if (!null_ok) in->bad = true;
    return NULL;
  }
  const char *p = etch__strpool_get(&r->pool, s, n);
  if (!p) in->bad = true;
  return p;
}

/* A track's state into `t`, made under its uuid (the global track's
 * strings may be NULL, as the reader leaves them). */
static void get_track(etch_reader *r, etch__sv_r *in, rd_track *t) {
  etch_track_info *i = &t->info;
  bool global = t == &r->global_track;
  if (etch__sv_get_u64(in) != i->uuid) in->bad = true;
  i->parent_uuid = etch__sv_get_u64(in);
  uint32_t kind = etch__sv_get_u32(in);
  if (kind > ETCH_TRACK_COUNTER) in->bad = true;
  i->kind = (etch_track_kind)kind;
  i->name = get_pooled(r, in, global);
  i->pid = (int32_t)etch__sv_get_u32(in);
  i->tid = (int32_t)etch__sv_get_u32(in);
  i->counter_unit = (int32_t)etch__sv_get_u32(in);
  i->counter_unit_name = get_pooled(r, in, global);
  i->unit_multiplier = etch__sv_get_i64(in);
  i->is_incremental = etch__sv_get_bool(in);
  i->cmdline = get_pooled(r, in, global);
  t->delivered = etch__sv_get_bool(in);
  t->described = etch__sv_get_bool(in);
  t->open = etch__sv_get_u32(in);
  t->announce_no = etch__sv_get_u32(in);
  t->idle_read = etch__sv_get_u64(in);
  t->order_state = etch__sv_get_u8(in);
  if (t->order_state > RD_ORDER_HOLD) in->bad = true;
  t->held_unsorted = etch__sv_get_bool(in);
  t->order_last = etch__sv_get_i64(in);
  t->acc_seq = etch__sv_get_u32(in);
  t->acc_gen = etch__sv_get_u64(in);
  t->acc_i = etch__sv_get_i64(in);
  t->acc_d = etch__sv_get_f64(in);
  t->res_gen = 0; /* resolved again */
}

static void get_idtab(etch_reader *r, etch__sv_r *in, rd_seq *s,
                      etch_idtab *t, bool srcloc) {
  /* An entry is at least 8 + 4 bytes (12 + 4 + 4 for a source location). */
  size_t n = etch__sv_get_count(in, srcloc ? 20 : 12, RD_MAX_INTERNED);
  for (size_t i = 0; i < n && !in->bad; i++) {
    uint64_t iid = etch__sv_get_u64(in);
    if (!iid || etch__idtab_get(t, iid)) { /* 0 is "not set"; no twice */
      in->bad = true;
      return;
    }
    void *val;
    if (srcloc) {
      rd_srcloc *l = (rd_srcloc *)etch__arena_alloc(&s->srcloc_arena,
                                                    sizeof *l);
      if (!l) {
        in->bad = true;
        return;
      }
      l->file = get_pooled(r, in, false);
      l->function = get_pooled(r, in, false);
      l->line = etch__sv_get_u32(in);
      val = l;
    } else {
      val = (void *)get_pooled(r, in, false);
    }
    if (in->bad || etch__idtab_put(t, iid, val)) {
      in->bad = true;
      return;
    }
  }
}

static uint64_t *get_u64s(etch__sv_r *in, size_t *n, size_t *cap) {
  *n = *cap = 0;
  size_t k = etch__sv_get_count(in, 8, 1u << 16);
  if (!k || in->bad) return NULL;
  uint64_t *a = (uint64_t *)etch__malloc(k * sizeof *a);
  if (!a) {
    in->bad = true;
    return NULL;
  }
  for (size_t i = 0; i < k; i++) a[i] = etch__sv_get_u64(in);
  *n = *cap = k;
  return a;
}

static void get_seq(etch_reader *r, etch__sv_r *in) {
  uint32_t id = etch__sv_get_u32(in);
  if (in->bad) return;
  size_t before = r->nseq;
  rd_seq *s = etch__rd_seq_get(r, id);
  if (!s || r->nseq != before + 1) { /* out of memory, or twice */
    in->bad = true;
    return;
  }
  s->valid = etch__sv_get_bool(in);
  s->loss_pending = etch__sv_get_bool(in);
  s->gen = etch__sv_get_u64(in);
  s->has_clock_default = etch__sv_get_bool(in);
  s->clock_default = etch__sv_get_u32(in);
  s->has_track_default = etch__sv_get_bool(in);
  s->track_default = etch__sv_get_u64(in);
  s->extra_counter_default = get_u64s(in, &s->n_extra_counter_default,
                                      &s->cap_extra_counter_default);
  s->extra_dcounter_default = get_u64s(in, &s->n_extra_dcounter_default,
                                       &s->cap_extra_dcounter_default);
  get_idtab(r, in, s, &s->names, false);
  get_idtab(r, in, s, &s->cats, false);
  get_idtab(r, in, s, &s->da_names, false);
  get_idtab(r, in, s, &s->da_strings, false);
  get_idtab(r, in, s, &s->srclocs, true);
  for (int i = 0; i < 64 && !in->bad; i++) {
    uint64_t k = etch__sv_get_u64(in);
    if (k > r->clocks.nall) in->bad = true;
    s->clocks[i] = k && !in->bad ? r->clocks.all[k - 1] : NULL;
  }
  s->last_ts = etch__sv_get_i64(in);
  s->unsorted = etch__sv_get_bool(in);
  s->fgen = 0; /* the fast path's view is made again */
  s->last_track = NULL;
}

/* clock.c's clock_cache: pairs[hint] as a range. */
static void clock_range(rd_clock *k) {
  size_t i = k->hint, n = k->npairs;
  if (i >= n) {
    k->c_lo = k->c_span = k->c_dst = 0;
    return;
  }
  k->c_lo = k->pairs[i].src;
  k->c_dst = k->pairs[i].dst;
  k->c_span = (i + 1 < n ? k->pairs[i + 1].src : 0) - k->c_lo;
}

static void get_clock(etch_reader *r, etch__sv_r *in) {
  uint64_t key = etch__sv_get_u64(in);
  if (in->bad) return;
  size_t before = r->clocks.nall;
  rd_clock *k = etch__rd_clock_get(r, key, true);
  if (!k || r->clocks.nall != before + 1) {
    in->bad = true;
    return;
  }
  k->unit_ns = etch__sv_get_u64(in);
  if (!k->unit_ns) in->bad = true;
  k->incremental = etch__sv_get_bool(in);
  k->has_last = etch__sv_get_bool(in);
  k->last = etch__sv_get_u64(in);
  k->hint = (size_t)etch__sv_get_u64(in);
  size_t np = etch__sv_get_count(in, 16, SIZE_MAX / 64);
  if (in->bad) return;
  if (np) {
    if (etch__vec_reserve(&k->pairv, np * sizeof *k->pairs)) {
      in->bad = true;
      return;
    }
    k->pairs = (rd_clock_pair *)(void *)k->pairv.data;
    for (size_t j = 0; j < np; j++) {
      k->pairs[j].src = etch__sv_get_u64(in);
      k->pairs[j].dst = etch__sv_get_u64(in);
      if (j && k->pairs[j - 1].src > k->pairs[j].src) in->bad = true;
    }
    k->pairv.len = np * sizeof *k->pairs;
    k->npairs = np;
  }
  if (k->hint > k->npairs) in->bad = true;
  clock_range(k);
  size_t nr = etch__sv_get_count(in, 12, SIZE_MAX / 64);
  if (in->bad || !nr) return;
  if (etch__vec_reserve(&k->refv, nr * sizeof *k->refs)) {
    in->bad = true;
    return;
  }
  k->refs = (rd_clock_ref *)(void *)k->refv.data;
  for (size_t j = 0; j < nr; j++) {
    k->refs[j].snap = etch__sv_get_u32(in);
    k->refs[j].value = etch__sv_get_u64(in);
  }
  k->refv.len = nr * sizeof *k->refs;
  k->nrefs = nr;
}

static void get_clocks(etch_reader *r, etch__sv_r *in) {
  rd_clocks *c = &r->clocks;
  c->trace_clock = etch__sv_get_u32(in);
  c->converted = etch__sv_get_bool(in);
  size_t n = etch__sv_get_count(in, 49, RD_MAX_CLOCKS);
  for (size_t i = 0; i < n && !in->bad; i++) get_clock(r, in);
  size_t ns = etch__sv_get_count(in, 4, UINT32_MAX);
  if (in->bad) return;
  if (ns) {
    if (etch__vec_reserve(&c->snapv, ns * sizeof *c->snaps)) {
      in->bad = true;
      return;
    }
    c->snaps = (rd_snap *)(void *)c->snapv.data;
  }
  for (size_t i = 0; i < ns && !in->bad; i++) {
    uint32_t ne = etch__sv_get_u32(in);
    if (ne > in->left / 16) {
      in->bad = true;
      return;
    }
    rd_snap_entry *e = ne ? (rd_snap_entry *)etch__arena_alloc(
                                &c->arena, ne * sizeof *e)
                          : NULL;
    if (ne && !e) {
      in->bad = true;
      return;
    }
    for (uint32_t j = 0; j < ne; j++) {
      uint64_t k = etch__sv_get_u64(in);
      if (k >= c->nall) {
        in->bad = true;
        return;
      }
      e[j].clock = c->all[k];
      e[j].value = etch__sv_get_u64(in);
    }
    c->snaps[i].e = e;
    c->snaps[i].n = ne;
    c->nsnaps = i + 1;
    c->snapv.len = c->nsnaps * sizeof *c->snaps;
  }
  /* Every reference names a snapshot. */
  for (size_t i = 0; i < c->nall; i++)
    for (size_t j = 0; j < c->all[i]->nrefs; j++)
      if (c->all[i]->refs[j].snap >= c->nsnaps) in->bad = true;
}

static void get_machine(etch_reader *r, etch__sv_r *in) {
  etch_machine_info *m = &r->machines[0].info;
  m->id = 0;
  m->raw_id = etch__sv_get_i64(in);
  m->name = get_pooled(r, in, true);
  m->sysname = get_pooled(r, in, true);
  m->release = get_pooled(r, in, true);
  m->version = get_pooled(r, in, true);
  m->arch = get_pooled(r, in, true);
  m->num_cpus = etch__sv_get_i64(in);
  m->system_ram_bytes = etch__sv_get_i64(in);
  m->android_build_fingerprint = get_pooled(r, in, true);
  m->android_sdk_version = etch__sv_get_i64(in);
  m->has_clock_offset = etch__sv_get_bool(in);
  m->clock_offset = etch__sv_get_i64(in);
}

static void get_text(etch__sv_r *in, char *buf, size_t cap) {
  size_t n;
  bool is_null;
  const char *s = etch__sv_get_str(in, &n, &is_null);
  if (in->bad || is_null || n >= cap) {
    in->bad = true;
    buf[0] = '\0';
    return;
  }
  memcpy(buf, s, n);
  buf[n] = '\0';
}

int etch__reader_restore(etch_reader *r, etch__sv_r *in) {
  if (!r || r->ran || !r->name || !r->per_track || r->stream || r->obs)
    return etch__error(ETCH_ESTATE, "reader: state is restored into a "
                                    "file opened and not run, in per-track "
                                    "order");
  if (etch__sv_get_u64(in) != SAVE_MAGIC ||
      etch__sv_get_u32(in) != SAVE_VERSION)
    return bad("not a saved reader of this version");
  uint64_t dev = etch__sv_get_u64(in), ino = etch__sv_get_u64(in);
  uint64_t len = etch__sv_get_u64(in);
  if (in->bad) return bad("cut short");
  if (dev != r->file_dev || ino != r->file_ino ||
      len > r->len)
    return etch__error(ETCH_ESTATE, "%s: not the file the state was saved "
                                    "from (replaced or cut shorter)",
                       r->name);
  bool recording = etch__sv_get_bool(in);
  bool hold_all = etch__sv_get_bool(in);
  if (hold_all != r->hold_all) return bad("another track order");
  r->gen = etch__sv_get_u64(in) + 1;
  r->nannounced = etch__sv_get_u32(in);
  r->nreads = etch__sv_get_u64(in);
  r->track_gen = etch__sv_get_u64(in);
  if (!r->track_gen) in->bad = true;
  r->latest_ts = etch__sv_get_i64(in);
  r->have_bounds = etch__sv_get_bool(in);
  r->first_ts = etch__sv_get_i64(in);
  r->last_ts = etch__sv_get_i64(in);
  r->gidx = etch__sv_get_u64(in);
  r->nslices = etch__sv_get_u64(in);
  r->trace_stats_seen = etch__sv_get_bool(in);
  r->malformed_status = (int)etch__sv_get_u32(in);
  get_text(in, r->malformed_first, sizeof r->malformed_first);
  get_text(in, r->malformed_last, sizeof r->malformed_last);
  get_machine(r, in);
  get_track(r, in, &r->global_track);
  size_t nt = etch__sv_get_count(in, 100, RD_MAX_TRACKS);
  for (size_t i = 0; i < nt && !in->bad; i++) {
    /* The uuid first: the track is made under it, then filled. */
    etch__sv_r peek = *in;
    uint64_t uuid = etch__sv_get_u64(&peek);
    if (!uuid) in->bad = true; /* 0 is the global track */
    rd_track *t = in->bad ? NULL : etch__rd_track_in(r, 0, uuid, true);
    if (!t || r->ntracks != i + 1) {
      in->bad = true;
      break;
    }
    get_track(r, in, t);
    if (t->info.machine_id) in->bad = true;
  }
  if (!in->bad) get_clocks(r, in);
  size_t nseq = etch__sv_get_count(in, 64 * 8, RD_MAX_SEQUENCES);
  for (size_t i = 0; i < nseq && !in->bad; i++) get_seq(r, in);
  enum { kStats = sizeof(etch_reader_stats) / sizeof(uint64_t) };
  if (etch__sv_get_u32(in) != kStats) in->bad = true;
  uint64_t st[kStats];
  for (size_t i = 0; i < kStats; i++) st[i] = etch__sv_get_u64(in);
  if (etch__sv_get_u64(in) != SAVE_MAGIC || in->bad)
    return bad("cut short or inconsistent");
  memcpy(&r->stats, st, sizeof st);
  uint64_t from = r->stats.truncated_bytes ? r->stats.truncated_offset
                                           : r->stats.bytes;
  if (r->stats.bytes > len || from > len)
    return bad("its offsets do not add up");
  r->ran = true;
  r->fast = !r->fast_off;
  r->sub_all = r->nsubs == 1 && !r->subs[0].name && !r->subs[0].category;
  r->recording = recording;
  r->len = (size_t)len; /* what was read: the resume maps the rest */
  r->resumable = true;
  r->watch_at = UINT64_MAX;
  return ETCH_OK;
}

/*
 * import_stacks.c - the call-stack tables of an import, shaped like
 * trace_processor's (v58.2): stack_profile_mapping, stack_profile_frame,
 * stack_profile_callsite, stack_profile_symbol, and
 * __intrinsic_track_event_callstacks, which links a slice (an allocation's
 * instant) to its stack.
 *
 * The importer notes each slice whose event has a call stack as it goes
 * (etch__import_callstack); the tables themselves are the reader's
 * (etch_reader_stacks), written once the whole trace is read, since the
 * symbols come at its end. Ids are the reader's, from 0 as
 * trace_processor's; a frame's symbol_set_id is the id of its first
 * symbol row.
 */
#include <string.h>

#include "query/import_int.h"
#include "query/table_writer.h"

#define I ETCH__COL_I64
#define S ETCH__COL_STR

void etch__import_callstack(etch__importer *imp, int64_t slice_id,
                            int64_t track_id, int64_t callsite_id) {
  if (!grow_array((void **)&imp->callstacks, &imp->cap_callstacks,
                  imp->ncallstacks + 1, sizeof *imp->callstacks)) {
    fail_nomem(imp);
    return;
  }
  imp->callstacks[imp->ncallstacks++] =
      (etch__imp_callstack){slice_id, track_id, callsite_id};
}

static int open_tw(etch__importer *imp, etch__tw *w, const char *table,
                   const etch__col *kinds, size_t n) {
  return etch__tw_open(w, imp->db, imp->catalog, table, kinds, n);
}

/* "" (none) as NULL, as trace_processor has it. */
static void str_or_null(etch__tw *w, idx_t col, const char *s) {
  etch__tw_cstr(w, col, s && *s ? s : NULL);
}

static int write_mappings(etch__importer *imp, const etch_stacks *st) {
  static const etch__col kCols[] = {I, S, I, I, I, I, I, S};
  etch__tw w;
  int rc = open_tw(imp, &w, "stack_profile_mapping", kCols,
                   ETCH_ARRAY_SIZE(kCols));
  if (rc) return rc;
  for (size_t i = 0; i < st->nmappings; i++) {
    const etch_stack_mapping *m = &st->mappings[i];
    etch__tw_i64(&w, 0, (int64_t)i);
    str_or_null(&w, 1, m->build_id);
    etch__tw_i64(&w, 2, (int64_t)m->exact_offset);
    etch__tw_i64(&w, 3, (int64_t)m->start_offset);
    etch__tw_i64(&w, 4, (int64_t)m->start);
    etch__tw_i64(&w, 5, (int64_t)m->end);
    etch__tw_i64(&w, 6, (int64_t)m->load_bias);
    str_or_null(&w, 7, m->name);
    etch__tw_end_row(&w);
  }
  return etch__tw_finish(&w);
}

static int write_frames(etch__importer *imp, const etch_stacks *st) {
  static const etch__col kCols[] = {I, S, I, I, I, S};
  etch__tw w;
  int rc = open_tw(imp, &w, "stack_profile_frame", kCols,
                   ETCH_ARRAY_SIZE(kCols));
  if (rc) return rc;
  for (size_t i = 0; i < st->nframes; i++) {
    const etch_stack_frame *f = &st->frames[i];
    etch__tw_i64(&w, 0, (int64_t)i);
    str_or_null(&w, 1, f->name);
    etch__tw_i64(&w, 2, f->mapping);
    etch__tw_i64(&w, 3, (int64_t)f->rel_pc);
    if (f->nsymbols)
      etch__tw_i64(&w, 4, f->symbol);
    else
      etch__tw_null(&w, 4);
    etch__tw_null(&w, 5);
    etch__tw_end_row(&w);
  }
  return etch__tw_finish(&w);
}

static int write_callsites(etch__importer *imp, const etch_stacks *st) {
  static const etch__col kCols[] = {I, I, I, I};
  etch__tw w;
  int rc = open_tw(imp, &w, "stack_profile_callsite", kCols,
                   ETCH_ARRAY_SIZE(kCols));
  if (rc) return rc;
  for (size_t i = 0; i < st->ncallsites; i++) {
    const etch_stack_callsite *c = &st->callsites[i];
    etch__tw_i64(&w, 0, (int64_t)i);
    etch__tw_i64(&w, 1, c->depth);
    if (c->parent_id >= 0)
      etch__tw_i64(&w, 2, c->parent_id);
    else
      etch__tw_null(&w, 2);
    etch__tw_i64(&w, 3, c->frame_id);
    etch__tw_end_row(&w);
  }
  return etch__tw_finish(&w);
}

/* The symbols of the frames: each frame's lines once (frames at one
 * address share them), the first line's id the set's. */
static int write_symbols(etch__importer *imp, const etch_stacks *st) {
  static const etch__col kCols[] = {I, I, S, S, I, I};
  uint8_t *done = st->nsymbols ? etch__calloc(st->nsymbols, 1) : NULL;
  if (st->nsymbols && !done) return ETCH_ENOMEM;
  etch__tw w;
  int rc = open_tw(imp, &w, "stack_profile_symbol", kCols,
                   ETCH_ARRAY_SIZE(kCols));
  if (rc) {
    free(done);
    return rc;
  }
  for (size_t i = 0; i < st->nframes; i++) {
    const etch_stack_frame *f = &st->frames[i];
    if (!f->nsymbols || done[f->symbol]) continue;
    done[f->symbol] = 1;
    for (uint32_t k = 0; k < f->nsymbols; k++) {
      const etch_stack_symbol *s = &st->symbols[f->symbol + k];
      etch__tw_i64(&w, 0, (int64_t)f->symbol + k);
      etch__tw_i64(&w, 1, f->symbol);
      str_or_null(&w, 2, s->name);
      str_or_null(&w, 3, s->source_file);
      if (s->line_number)
        etch__tw_i64(&w, 4, s->line_number);
      else
        etch__tw_null(&w, 4);
      etch__tw_null(&w, 5);
      etch__tw_end_row(&w);
    }
  }
  free(done);
  return etch__tw_finish(&w);
}

static int write_links(etch__importer *imp) {
  static const etch__col kCols[] = {I, I, I, I, I, I};
  etch__tw w;
  int rc = open_tw(imp, &w, "__intrinsic_track_event_callstacks", kCols,
                   ETCH_ARRAY_SIZE(kCols));
  if (rc) return rc;
  for (size_t i = 0; i < imp->ncallstacks; i++) {
    const etch__imp_callstack *c = &imp->callstacks[i];
    etch__tw_i64(&w, 0, (int64_t)i);
    etch__tw_i64(&w, 1, c->slice_id);
    etch__tw_i64(&w, 2, c->track_id);
    etch__tw_i64(&w, 3, c->callsite_id);
    etch__tw_null(&w, 4);
    etch__tw_null(&w, 5);
    etch__tw_end_row(&w);
  }
  return etch__tw_finish(&w);
}

int etch__import_stacks(etch__importer *imp, etch_reader *r) {
  if (imp->err) return imp->err;
  /* A row sink (etch load) has no such tables: the stacks stay local. */
  if (imp->sink || !imp->db) return ETCH_OK;
  etch_stacks st;
  int rc = etch_reader_stacks(r, &st);
  if (!rc && !st.ncallsites && !imp->ncallstacks) return ETCH_OK;
  if (!rc) rc = write_mappings(imp, &st);
  if (!rc) rc = write_frames(imp, &st);
  if (!rc) rc = write_callsites(imp, &st);
  if (!rc) rc = write_symbols(imp, &st);
  if (!rc) rc = write_links(imp);
  return rc;
}

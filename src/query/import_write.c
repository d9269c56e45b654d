/*
 * import_write.c - the tables the importer writes at the end of an import:
 * tracks, processes and threads (kept in memory until every parent is
 * known), stats, the per-name summary and the trace's bounds.
 */
#include <stdio.h>
#include <string.h>

#include "query/import_int.h"

#define I ETCH__COL_I64
#define S ETCH__COL_STR

/* Opens a writer on `table` of the import's catalog. */
static int open_tw(etch__importer *imp, etch__tw *w, const char *table,
                   const etch__col *kinds, size_t n) {
  if (imp->sink) return etch__tw_open_sink(w, imp->sink, table, kinds, n);
  return etch__tw_open(w, imp->db, imp->catalog, table, kinds, n);
}

static const char *track_type(etch_track_kind k) {
  switch (k) {
    case ETCH_TRACK_PROCESS: return "process";
    case ETCH_TRACK_THREAD: return "thread";
    case ETCH_TRACK_NAMED: return "named";
    case ETCH_TRACK_COUNTER: return "counter";
    case ETCH_TRACK_GLOBAL: break;
  }
  return "global";
}

static int write_tracks(etch__importer *imp) {
  static const etch__col kCols[] = {I, S, S, I, I, I, I, S, I, I};
  etch__tw w;
  /* In id order: a track's id is not its place in imp->tracks (idle
   * tracks take theirs last, import.c). */
  size_t n = imp->ntracks;
  const qtrack **byid = etch__calloc(n ? n : 1, sizeof *byid);
  if (!byid) return etch__error(ETCH_ENOMEM, "import: out of memory");
  for (size_t i = 0; i < n; i++) {
    int64_t id = imp->tracks[i].id;
    if (id >= 1 && (size_t)id <= n) byid[id - 1] = &imp->tracks[i];
  }
  int rc = open_tw(imp, &w, "track", kCols, ETCH_ARRAY_SIZE(kCols));
  if (rc) {
    free(byid);
    return rc;
  }
  for (size_t i = 0; i < n; i++) {
    const qtrack *t = byid[i];
    if (!t) continue;
    int64_t parent = -1, upid = 0, utid = 0, v;
    if (t->parent_uuid &&
        etch__imp_find_track(imp, t->machine, t->parent_uuid, &v, NULL))
      parent = imp->tracks[v].id;
    if (t->pid && etch__imp_find_proc(imp, t->machine, t->pid, &v, NULL))
      upid = v + 1;
    if (t->kind == ETCH_TRACK_THREAD &&
        etch__imp_find_thread(imp, t->machine, t->pid, t->tid, &v, NULL))
      utid = v + 1;
    etch__tw_i64(&w, 0, t->id);
    etch__tw_cstr(&w, 1, t->name);
    etch__tw_cstr(&w, 2, track_type(t->kind));
    etch__tw_id(&w, 3, parent);
    etch__tw_i64(&w, 4, (int64_t)t->uuid);
    etch__tw_id(&w, 5, utid);
    etch__tw_id(&w, 6, upid);
    if (t->kind == ETCH_TRACK_COUNTER) {
      etch__tw_cstr(&w, 7, t->unit);
      etch__tw_i64(&w, 8, t->unit_multiplier > 1 ? t->unit_multiplier : 1);
      etch__tw_i64(&w, 9, t->is_incremental);
    } else {
      etch__tw_null(&w, 7);
      etch__tw_null(&w, 8);
      etch__tw_null(&w, 9);
    }
    etch__tw_end_row(&w);
  }
  free(byid);
  return etch__tw_finish(&w);
}

static int write_procs_threads(etch__importer *imp) {
  static const etch__col kProc[] = {I, I, S, S, I, I, I, I};
  etch__tw w;
  int rc = open_tw(imp, &w, "process", kProc, ETCH_ARRAY_SIZE(kProc));
  if (rc) return rc;
  for (size_t i = 0; i < imp->nprocs; i++) {
    etch__tw_i64(&w, 0, (int64_t)i + 1);
    etch__tw_i64(&w, 1, imp->procs[i].pid);
    etch__tw_cstr(&w, 2, imp->procs[i].name);
    etch__tw_cstr(&w, 3, imp->procs[i].cmdline);
    for (idx_t c = 4; c < 7; c++) etch__tw_null(&w, c);
    etch__tw_i64(&w, 7, imp->procs[i].machine);
    etch__tw_end_row(&w);
  }
  rc = etch__tw_finish(&w);
  if (rc) return rc;
  static const etch__col kThread[] = {I, I, S, I, I, I, I, I};
  rc = open_tw(imp, &w, "thread", kThread, ETCH_ARRAY_SIZE(kThread));
  if (rc) return rc;
  for (size_t i = 0; i < imp->nthreads; i++) {
    const qthread *th = &imp->threads[i];
    int64_t upid = 0, v;
    if (th->pid && etch__imp_find_proc(imp, th->machine, th->pid, &v, NULL))
      upid = v + 1;
    etch__tw_i64(&w, 0, (int64_t)i + 1);
    etch__tw_i64(&w, 1, th->tid);
    etch__tw_cstr(&w, 2, th->name);
    etch__tw_id(&w, 3, upid);
    etch__tw_null(&w, 4);
    etch__tw_null(&w, 5);
    if (th->pid)
      etch__tw_i64(&w, 6, th->pid == th->tid);
    else
      etch__tw_null(&w, 6);
    etch__tw_i64(&w, 7, th->machine);
    etch__tw_end_row(&w);
  }
  return etch__tw_finish(&w);
}

/* The machine table: the host always (row 0), then the relayed machines. */
static int write_machines(etch__importer *imp) {
  static const etch__col kCols[] = {I, I, S, S, S, S, S, I, S, I, I, I};
  etch__tw w;
  int rc = open_tw(imp, &w, "machine", kCols, ETCH_ARRAY_SIZE(kCols));
  if (rc) return rc;
  size_t n = imp->nmachines ? imp->nmachines : 1;
  for (size_t i = 0; i < n; i++) {
    etch_machine_info host = {0};
    const etch_machine_info *m = imp->nmachines ? &imp->machines[i] : &host;
    etch__tw_i64(&w, 0, (int64_t)i);
    etch__tw_i64(&w, 1, m->raw_id);
    const char *strs[] = {m->name, m->sysname, m->release, m->version, m->arch};
    for (idx_t c = 0; c < 5; c++) etch__tw_cstr(&w, 2 + c, strs[c]);
    if (m->num_cpus) etch__tw_i64(&w, 7, m->num_cpus); else etch__tw_null(&w, 7);
    etch__tw_cstr(&w, 8, m->android_build_fingerprint);
    if (m->android_sdk_version)
      etch__tw_i64(&w, 9, m->android_sdk_version);
    else
      etch__tw_null(&w, 9);
    if (m->system_ram_bytes) {
      etch__tw_i64(&w, 10, m->system_ram_bytes);
      /* GB rounded to the nearest, as trace_processor's. */
      etch__tw_i64(&w, 11, (int64_t)(((double)m->system_ram_bytes / 1e9) + 0.5));
    } else {
      etch__tw_null(&w, 10);
      etch__tw_null(&w, 11);
    }
    etch__tw_end_row(&w);
  }
  return etch__tw_finish(&w);
}

static int write_summary(etch__importer *imp) {
  static const etch__col kCols[] = {S, I, I, I, I};
  etch__tw w;
  int rc = open_tw(imp, &w, "slice_summary", kCols, ETCH_ARRAY_SIZE(kCols));
  if (rc) return rc;
  for (size_t i = 0; i < imp->nsummary; i++) {
    const name_summary *n = &imp->summary[i];
    etch__tw_cstr(&w, 0, n->name);
    etch__tw_i64(&w, 1, n->count);
    etch__tw_i64(&w, 2, n->total);
    etch__tw_i64(&w, 3, n->self);
    etch__tw_i64(&w, 4, n->max);
    etch__tw_end_row(&w);
  }
  return etch__tw_finish(&w);
}

static int write_bounds(etch__importer *imp) {
  static const etch__col kCols[] = {I, I};
  etch__tw w;
  int rc = open_tw(imp, &w, "trace_bounds", kCols, 2);
  if (rc) return rc;
  if (imp->first_ts <= imp->last_ts) {
    etch__tw_i64(&w, 0, imp->first_ts);
    etch__tw_i64(&w, 1, imp->last_ts);
  } else {
    etch__tw_null(&w, 0);
    etch__tw_null(&w, 1);
  }
  etch__tw_end_row(&w);
  return etch__tw_finish(&w);
}

/* The rows of the stats table. */
void etch__import_fill_stat_rows(const etch__importer *imp,
                                 const etch_reader_stats *rs, stat_row *out) {
  /* Counted by the importer alone: the reader does not match for it. */
  uint64_t misplaced = imp->counts.unmatched_ends;
  const stat_row rows[] = {
      {"trace_bytes", "info", "trace", "bytes of trace read", rs->bytes},
      {"packets", "info", "trace", "trace packets", rs->packets},
      {"track_events", "info", "trace", "track events", rs->track_events},
      {"sequences", "info", "trace", "packet sequences", rs->sequences},
      {"compressed_packets", "info", "trace",
       "compressed packets (deflate and zstd)", rs->compressed_packets},
      {"previous_packet_dropped", "data_loss", "trace",
       "packets saying earlier packets of their sequence were lost",
       rs->previous_packet_dropped},
      {"packet_skipped_seq_needs_incremental_state_invalid", "data_loss",
       "trace",
       "packets skipped because their sequence lost its incremental state",
       rs->packet_skipped_seq_needs_incremental_state_invalid},
      {"trace_recording", "info", "trace",
       "1: the trace was still being recorded when read (its writer held "
       "its lock): read up to its last whole packet",
       rs->recording},
      {"trace_truncated_bytes", "data_loss", "trace",
       "bytes at the end of a trace cut short (an incomplete packet)",
       rs->truncated_bytes},
      {"misplaced_end_event", "data_loss", "analysis",
       "slice ends without a matching begin", misplaced},
      {"flow_cut_by_data_loss", "data_loss", "analysis",
       "flow links not made: data was lost between two uses of the id",
       imp->counts.flows_cut},
      {"traced_buf_chunks_discarded", "data_loss", "trace",
       "chunks the tracing buffer discarded (buffer full)",
       rs->trace_stats_chunks_discarded},
      {"traced_buf_chunks_overwritten", "data_loss", "trace",
       "chunks the ring buffer overwrote before they were read",
       rs->trace_stats_chunks_overwritten},
      {"traced_buf_trace_writer_packet_loss", "data_loss", "trace",
       "writers that lost packets", rs->trace_stats_writer_packet_loss},
      {"traced_buf_patches_failed", "data_loss", "trace",
       "patches the tracing service could not apply (a packet's size or a "
       "length left unwritten: that packet is lost)",
       rs->trace_stats_patches_failed},
      {"traced_buf_abi_violations", "data_loss", "trace",
       "chunks the tracing service refused for breaking the shared memory "
       "ABI", rs->trace_stats_abi_violations},
      {"traced_invalid_packets", "data_loss", "trace",
       "producers' packets the tracing service left out (they would not "
       "read, or set fields only the service writes; etchd names the "
       "producer on its stderr)",
       rs->trace_stats_invalid_packets},
      {"clock_conversion_failed", "data_loss", "trace",
       "events dropped because their clock could not be converted",
       rs->clock_conversion_failed},
      {"etch_dropped_events", "data_loss", "trace",
       "events lost as etch.dropped_events report them (the SDK's writers "
       "and etchd), all threads",
       rs->etch_dropped_events},
      {"packet_sequence_id_missing", "error", "trace",
       "packets needing incremental state but without a sequence id",
       rs->packet_sequence_id_missing},
      {"interned_data_missing", "error", "trace",
       "interned ids used without a definition", rs->interned_data_missing},
      {"unknown_track", "error", "trace",
       "events on a track uuid without a descriptor", rs->unknown_track},
      {"descriptor_pid_untrusted", "error", "trace",
       "process or thread descriptors claiming another pid than the tracing "
       "service stamped (trusted_pid); the service's pid is used",
       rs->descriptor_pid_untrusted},
      {"malformed_packets", "error", "trace",
       "packets left out whole because they do not decode (a field with the "
       "wrong wire type, bytes cut short...); the rest of the trace is read",
       rs->malformed_packets},
      {"unknown_parent_track", "error", "trace",
       "track descriptors whose parent_uuid no descriptor describes (read "
       "as root tracks)",
       rs->unknown_parent_track},
      {"slices", "info", "analysis", "slices (instants included)",
       imp->counts.slices},
      {"instants", "info", "analysis", "instant events",
       imp->counts.instants},
      {"open_slices", "info", "analysis",
       "slices still open at the end of the trace (dur -1)",
       imp->counts.open_slices},
      {"counter_values", "info", "analysis", "counter values",
       imp->counts.counters},
      {"flows", "info", "analysis", "flow links", imp->counts.flows},
  };
  _Static_assert(ETCH_ARRAY_SIZE(rows) == kStatRows, "stat rows");
  memcpy(out, rows, sizeof rows);
}

static int write_stats(etch__importer *imp, const etch_reader_stats *rs) {
  etch_reader_stats z = {0};
  if (!rs) rs = &z;
  stat_row rows[kStatRows];
  etch__import_fill_stat_rows(imp, rs, rows);
  static const etch__col kCols[] = {S, I, S, S, I, S};
  etch__tw w;
  int rc = open_tw(imp, &w, "stats", kCols, ETCH_ARRAY_SIZE(kCols));
  if (rc) return rc;
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(rows); i++) {
    etch__tw_cstr(&w, 0, rows[i].name);
    etch__tw_null(&w, 1);
    etch__tw_cstr(&w, 2, rows[i].severity);
    etch__tw_cstr(&w, 3, rows[i].source);
    etch__tw_i64(&w, 4, (int64_t)rows[i].value);
    etch__tw_cstr(&w, 5, rows[i].description);
    etch__tw_end_row(&w);
  }
  return etch__tw_finish(&w);
}

int etch__import_write_tables(etch__importer *imp,
                              const etch_reader_stats *st) {
  int rc = write_tracks(imp);
  if (!rc) rc = write_procs_threads(imp);
  if (!rc) rc = write_machines(imp);
  if (!rc) rc = write_stats(imp, st);
  if (!rc) rc = write_summary(imp);
  if (!rc) rc = write_bounds(imp);
  return rc;
}

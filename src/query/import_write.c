/*
 * import_write.c - the tables the importer writes at the end of an import:
 * tracks, processes and threads (kept in memory until every parent is
 * known), stats and the per-name summary.
 */
#include <stdio.h>
#include <string.h>

#include "query/import_int.h"

static int prepare(etch__importer *imp, const char *sql, sqlite3_stmt **st) {
  if (sqlite3_prepare_v3(imp->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st,
                         NULL) != SQLITE_OK)
    return etch__error(ETCH_ESQL, "import: %s", sqlite3_errmsg(imp->db));
  return ETCH_OK;
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
  sqlite3_stmt *st;
  int rc = prepare(imp,
                   "INSERT INTO track(id, name, type, parent_id, uuid, utid, "
                   "upid, unit, unit_multiplier, is_incremental) "
                   "VALUES(?,?,?,?,?,?,?,?,?,?)",
                   &st);
  if (rc) return rc;
  for (size_t i = 0; i < imp->ntracks && !imp->err; i++) {
    const qtrack *t = &imp->tracks[i];
    int64_t parent = -1, upid = 0, utid = 0, v;
    if (t->parent_uuid && etch__u64map_get(&imp->track_by_uuid, t->parent_uuid, &v))
      parent = v + 1;
    if (t->pid && etch__u64map_get(&imp->proc_by_pid, (uint32_t)t->pid, &v))
      upid = v + 1;
    if (t->kind == ETCH_TRACK_THREAD &&
        etch__u64map_get(&imp->thread_by_key,
                   (uint64_t)(uint32_t)t->pid << 32 | (uint32_t)t->tid, &v))
      utid = v + 1;
    sqlite3_bind_int64(st, 1, t->id);
    bind_text(st, 2, t->name);
    sqlite3_bind_text(st, 3, track_type(t->kind), -1, SQLITE_STATIC);
    bind_id(st, 4, parent);
    sqlite3_bind_int64(st, 5, (int64_t)t->uuid);
    bind_id(st, 6, utid);
    bind_id(st, 7, upid);
    if (t->kind == ETCH_TRACK_COUNTER) {
      bind_text(st, 8, t->unit);
      sqlite3_bind_int64(st, 9, t->unit_multiplier > 1 ? t->unit_multiplier : 1);
      sqlite3_bind_int64(st, 10, t->is_incremental);
    } else {
      sqlite3_bind_null(st, 8);
      sqlite3_bind_null(st, 9);
      sqlite3_bind_null(st, 10);
    }
    step_reset(imp, st);
  }
  sqlite3_finalize(st);
  return imp->err;
}

static int write_procs_threads(etch__importer *imp) {
  sqlite3_stmt *st;
  int rc = prepare(
      imp, "INSERT INTO process(upid, pid, name, cmdline) VALUES(?,?,?,?)",
      &st);
  if (rc) return rc;
  for (size_t i = 0; i < imp->nprocs && !imp->err; i++) {
    sqlite3_bind_int64(st, 1, (int64_t)i + 1);
    sqlite3_bind_int64(st, 2, imp->procs[i].pid);
    bind_text(st, 3, imp->procs[i].name);
    bind_text(st, 4, imp->procs[i].cmdline);
    step_reset(imp, st);
  }
  sqlite3_finalize(st);
  if (imp->err) return imp->err;
  rc = prepare(imp,
               "INSERT INTO thread(utid, tid, name, upid, is_main_thread) "
               "VALUES(?,?,?,?,?)",
               &st);
  if (rc) return rc;
  for (size_t i = 0; i < imp->nthreads && !imp->err; i++) {
    const qthread *th = &imp->threads[i];
    int64_t upid = 0, v;
    if (th->pid && etch__u64map_get(&imp->proc_by_pid, (uint32_t)th->pid, &v))
      upid = v + 1;
    sqlite3_bind_int64(st, 1, (int64_t)i + 1);
    sqlite3_bind_int64(st, 2, th->tid);
    bind_text(st, 3, th->name);
    bind_id(st, 4, upid);
    if (th->pid)
      sqlite3_bind_int(st, 5, th->pid == th->tid);
    else
      sqlite3_bind_null(st, 5);
    step_reset(imp, st);
  }
  sqlite3_finalize(st);
  return imp->err;
}

static int write_summary(etch__importer *imp) {
  sqlite3_stmt *st;
  int rc = prepare(imp,
                   "INSERT INTO slice_summary(name, count, total_dur, "
                   "self_dur, max_dur) VALUES(?,?,?,?,?)",
                   &st);
  if (rc) return rc;
  for (size_t i = 0; i < imp->nsummary && !imp->err; i++) {
    const name_summary *n = &imp->summary[i];
    bind_text(st, 1, n->name);
    sqlite3_bind_int64(st, 2, n->count);
    sqlite3_bind_int64(st, 3, n->total);
    sqlite3_bind_int64(st, 4, n->self);
    sqlite3_bind_int64(st, 5, n->max);
    step_reset(imp, st);
  }
  sqlite3_finalize(st);
  return imp->err;
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
  sqlite3_stmt *st;
  int rc = prepare(imp,
                   "INSERT INTO stats(name, idx, severity, source, value, "
                   "description) VALUES(?,NULL,?,?,?,?)",
                   &st);
  if (rc) return rc;
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(rows) && !imp->err; i++) {
    sqlite3_bind_text(st, 1, rows[i].name, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, rows[i].severity, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, rows[i].source, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, (int64_t)rows[i].value);
    sqlite3_bind_text(st, 5, rows[i].description, -1, SQLITE_STATIC);
    step_reset(imp, st);
  }
  sqlite3_finalize(st);
  return imp->err;
}

int etch__import_write_tables(etch__importer *imp,
                              const etch_reader_stats *st) {
  int rc = write_tracks(imp);
  if (!rc) rc = write_procs_threads(imp);
  if (!rc) rc = write_stats(imp, st);
  if (!rc) rc = write_summary(imp);
  return rc;
}

/*
 * schema.c - the DuckDB tables a trace is imported into.
 *
 * Column names follow trace_processor's tables so that queries written for
 * Perfetto mostly work unchanged; docs/analysis.md documents every column.
 * Every integer is a BIGINT (as SQLite's INTEGER was), every real a DOUBLE.
 * No index and no key: DuckDB scans and joins a column at a time, and the
 * importer gives each id once.
 *
 * slice is a view: its rows are stored in slice_data with a key_id where
 * the category and the name would be, and each (category, name) pair once
 * in slice_name. A trace has few distinct names and millions of slices;
 * DuckDB's per-row work on a string column (distinct-value statistics,
 * dictionary analysis and compression as each row group is written) was
 * a third of a first query's time (10 M events: 3.1 s, 2.1 s without
 * them). thread_ts and thread_dur are always NULL: the view says so
 * without storing them. Every slice_data row has its slice_name row, so the view is an
 * inner join: DuckDB then groups 5 M slices by name in 13 ms against 10 ms
 * from a VARCHAR column (a left join took 60 ms).
 *
 * slice_data is a view too, over slice_rows: ts, and the other eight
 * columns as one STRUCT. DuckDB keeps a distinct-value sketch
 * (HyperLogLog, 30% of the values hashed as they are appended) of every
 * plain column of a table and none of a STRUCT's fields: that sketch was
 * about a tenth of a first query's CPU (docs/performance.md). Queries,
 * the viewer's included, read slice_data's columns through the view.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "query/query.h"

/* The tables; the importer appends their rows in this column order. */
static const char *const kTables[] = {
    "process("
    " upid BIGINT,"
    " pid BIGINT,"
    " name VARCHAR,"
    " cmdline VARCHAR,"
    " start_ts BIGINT,"
    " end_ts BIGINT,"
    " parent_upid BIGINT,"
    " machine_id BIGINT)",
    "thread("
    " utid BIGINT,"
    " tid BIGINT,"
    " name VARCHAR,"
    " upid BIGINT,"
    " start_ts BIGINT,"
    " end_ts BIGINT,"
    " is_main_thread BIGINT,"
    " machine_id BIGINT)",
    "track("
    " id BIGINT,"
    " name VARCHAR,"
    " type VARCHAR NOT NULL,"
    " parent_id BIGINT,"
    " uuid BIGINT,"
    " utid BIGINT,"
    " upid BIGINT,"
    " unit VARCHAR,"
    " unit_multiplier BIGINT,"
    " is_incremental BIGINT)",
    "slice("
    " id BIGINT NOT NULL,"
    " ts BIGINT NOT NULL,"
    " dur BIGINT NOT NULL,"
    " track_id BIGINT NOT NULL,"
    " category VARCHAR,"
    " name VARCHAR,"
    " depth BIGINT NOT NULL,"
    " parent_id BIGINT,"
    " arg_set_id BIGINT,"
    " thread_ts BIGINT,"
    " thread_dur BIGINT,"
    " self_dur BIGINT)",
    "counter("
    " id BIGINT NOT NULL,"
    " ts BIGINT NOT NULL,"
    " track_id BIGINT NOT NULL,"
    " value DOUBLE,"
    " arg_set_id BIGINT)",
    /* display_value: the value as text whatever its type, as
     * trace_processor's column; uints as unsigned (int_value holds their 64
     * bits, so those above INT64_MAX read negative there). Written by the
     * importer (a generated column cannot be appended to). */
    "args("
    " id BIGINT NOT NULL,"
    " arg_set_id BIGINT NOT NULL,"
    " flat_key VARCHAR,"
    " key VARCHAR,"
    " int_value BIGINT,"
    " string_value VARCHAR,"
    " real_value DOUBLE,"
    " value_type VARCHAR,"
    " display_value VARCHAR)",
    "flow("
    " id BIGINT NOT NULL,"
    " slice_out BIGINT NOT NULL,"
    " slice_in BIGINT NOT NULL,"
    " arg_set_id BIGINT)",
    "stats("
    " name VARCHAR NOT NULL,"
    " idx BIGINT,"
    " severity VARCHAR NOT NULL,"
    " source VARCHAR NOT NULL,"
    " value BIGINT NOT NULL,"
    " description VARCHAR)",
    "trace_bounds(start_ts BIGINT, end_ts BIGINT)",
    /* The machines (trace_processor's machine table): 0 the host. */
    "machine("
    " id BIGINT NOT NULL,"
    " raw_id BIGINT NOT NULL,"
    " name VARCHAR,"
    " sysname VARCHAR,"
    " release VARCHAR,"
    " version VARCHAR,"
    " arch VARCHAR,"
    " num_cpus BIGINT,"
    " android_build_fingerprint VARCHAR,"
    " android_sdk_version BIGINT,"
    " system_ram_bytes BIGINT,"
    " system_ram_gb BIGINT)",
    "slice_summary("
    " name VARCHAR,"
    " count BIGINT NOT NULL,"
    " total_dur BIGINT NOT NULL,"
    " self_dur BIGINT NOT NULL,"
    " max_dur BIGINT NOT NULL)",
};

/* The call-stack tables (import_stacks.c), as trace_processor's. Created
 * with the others but kept out of the lists above: etch load's ClickHouse
 * tables and the views over several traces have no stacks (yet). */
static const char *const kStackTables[] = {
    "stack_profile_mapping("
    " id BIGINT NOT NULL,"
    " build_id VARCHAR,"
    " exact_offset BIGINT,"
    " start_offset BIGINT,"
    " start BIGINT,"
    " \"end\" BIGINT,"
    " load_bias BIGINT,"
    " name VARCHAR)",
    "stack_profile_frame("
    " id BIGINT NOT NULL,"
    " name VARCHAR,"
    " mapping BIGINT NOT NULL,"
    " rel_pc BIGINT,"
    " symbol_set_id BIGINT,"
    " deobfuscated_name VARCHAR)",
    "stack_profile_callsite("
    " id BIGINT NOT NULL,"
    " depth BIGINT NOT NULL,"
    " parent_id BIGINT,"
    " frame_id BIGINT NOT NULL)",
    "stack_profile_symbol("
    " id BIGINT NOT NULL,"
    " symbol_set_id BIGINT NOT NULL,"
    " name VARCHAR,"
    " source_file VARCHAR,"
    " line_number BIGINT,"
    " inlined BIGINT)",
    /* CPU samples (import_samples.c), as trace_processor's perf_sample. */
    "perf_sample("
    " id BIGINT NOT NULL,"
    " ts BIGINT NOT NULL,"
    " utid BIGINT NOT NULL,"
    " cpu BIGINT,"
    " cpu_mode VARCHAR,"
    " callsite_id BIGINT,"
    " unwind_error VARCHAR,"
    " perf_session_id BIGINT)",
    "perf_session(id BIGINT NOT NULL, perf_session_id BIGINT, cmdline VARCHAR)",
    "__intrinsic_track_event_callstacks("
    " id BIGINT NOT NULL,"
    " slice_id BIGINT NOT NULL,"
    " track_id BIGINT NOT NULL,"
    " callsite_id BIGINT NOT NULL,"
    " end_callsite_id BIGINT,"
    " weight BIGINT)",
};

/* Views over track, as trace_processor has them (in the main catalog).
 * thread_track has utid and no upid, as trace_processor's: a join of it,
 * thread and process USING (utid) then USING (upid) names one upid. */
static const char kViews[] =
    "CREATE VIEW thread_track AS SELECT * EXCLUDE (upid) FROM track"
    " WHERE type = 'thread';"
    "CREATE VIEW process_track AS SELECT * FROM track"
    " WHERE upid IS NOT NULL AND utid IS NULL AND type != 'counter';"
    "CREATE VIEW counter_track AS SELECT * FROM track WHERE type = 'counter';"
    "CREATE VIEW process_counter_track AS SELECT * FROM track"
    " WHERE type = 'counter' AND upid IS NOT NULL AND utid IS NULL;";

/* What stores the rows of slice and args (kTables' "slice" and "args"
 * are the views' columns). args_data's type_id is etch_value_type's
 * order; display_text holds the display of the values the view does not
 * make from their columns (uint, pointer, real). */
static const char *const kStored[] = {
    "slice_rows("
    " ts BIGINT NOT NULL,"
    " x STRUCT("
    "id BIGINT, dur BIGINT, track_id BIGINT, key_id BIGINT, depth BIGINT,"
    " parent_id BIGINT, arg_set_id BIGINT, self_dur BIGINT))",
    "slice_name(id BIGINT NOT NULL, category VARCHAR, name VARCHAR)",
    "args_data("
    " id BIGINT NOT NULL,"
    " arg_set_id BIGINT NOT NULL,"
    " key_id BIGINT NOT NULL,"
    " int_value BIGINT,"
    " string_value VARCHAR,"
    " real_value DOUBLE,"
    " type_id BIGINT NOT NULL,"
    " display_text VARCHAR)",
    "arg_key(id BIGINT NOT NULL, flat_key VARCHAR, key VARCHAR)",
};

/* The views over them: name, then the SELECT ('@': the catalog's
 * prefix). */
static const struct {
  const char *name, *select;
} kStoredViews[] = {
    {"slice_data",
     "SELECT r.x.id AS id, r.ts, r.x.dur AS dur, r.x.track_id AS track_id,"
     " r.x.key_id AS key_id, r.x.depth AS depth, r.x.parent_id AS parent_id,"
     " r.x.arg_set_id AS arg_set_id, r.x.self_dur AS self_dur"
     " FROM @slice_rows r"},
    {"slice",
     "SELECT d.id, d.ts, d.dur, d.track_id, k.category, k.name, d.depth,"
     " d.parent_id, d.arg_set_id, NULL::BIGINT AS thread_ts,"
     " NULL::BIGINT AS thread_dur, d.self_dur"
     " FROM @slice_data d JOIN @slice_name k ON k.id = d.key_id"},
    {"args",
     "SELECT a.id, a.arg_set_id, k.flat_key, k.key, a.int_value,"
     " a.string_value, a.real_value,"
     " CASE a.type_id WHEN 1 THEN 'bool' WHEN 2 THEN 'int'"
     " WHEN 3 THEN 'uint' WHEN 4 THEN 'real' WHEN 5 THEN 'string'"
     " WHEN 6 THEN 'pointer' WHEN 7 THEN 'json' ELSE 'null' END"
     " AS value_type,"
     " CASE a.type_id"
     " WHEN 1 THEN CASE WHEN a.int_value != 0 THEN 'true' ELSE 'false' END"
     " WHEN 2 THEN CAST(a.int_value AS VARCHAR)"
     " WHEN 5 THEN a.string_value WHEN 7 THEN a.string_value"
     " ELSE a.display_text END AS display_value"
     " FROM @args_data a JOIN @arg_key k ON k.id = a.key_id"},
    /* trace_processor's (v58.2) common stack-sample format over perf_sample
     * (import_samples.c): a task context per sampled thread and an
     * execution context per cpu, numbered in the order of their first
     * sample, as trace_processor numbers them; one session. */
    {"stack_sample_task_context",
     "SELECT (row_number() OVER (ORDER BY f.first) - 1)::BIGINT AS id,"
     " t.upid, f.utid, NULL::BIGINT AS async_context_id"
     " FROM (SELECT utid, min(id) AS first FROM @perf_sample GROUP BY utid) f"
     " LEFT JOIN @thread t ON t.utid = f.utid"},
    {"stack_sample_execution_context",
     "SELECT (row_number() OVER (ORDER BY f.first) - 1)::BIGINT AS id,"
     " f.cpu AS ucpu, NULL::VARCHAR AS cpu_mode"
     " FROM (SELECT cpu, min(id) AS first FROM @perf_sample GROUP BY cpu) f"},
    {"stack_sample_session",
     "SELECT 0::BIGINT AS id, 'linux.perf' AS source, 'ns' AS timebase_unit,"
     " NULL::VARCHAR AS cmdline WHERE EXISTS (SELECT 1 FROM @perf_sample)"},
    {"stack_sample",
     "SELECT s.id, s.ts, 'linux.perf' AS source, tc.id AS task_context_id,"
     " ec.id AS execution_context_id, s.callsite_id, 0::BIGINT AS session_id"
     " FROM @perf_sample s"
     " JOIN @stack_sample_task_context tc ON tc.utid = s.utid"
     " JOIN @stack_sample_execution_context ec"
     " ON ec.ucpu IS NOT DISTINCT FROM s.cpu"},
};

static bool is_view(const char *def) {
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(kStoredViews); i++) {
    size_t n = strlen(kStoredViews[i].name);
    if (!strncmp(def, kStoredViews[i].name, n) && def[n] == '(') return true;
  }
  return false;
}

/* The prefix naming `catalog` ("\"t0\"."), or "" for the default one. */
static void qual(char *buf, size_t n, const char *catalog) {
  if (catalog)
    snprintf(buf, n, "\"%s\".", catalog);
  else
    buf[0] = 0;
}

/* `tmpl` with each '@' replaced by `q`, into buf; false if too long. */
static bool expand(char *buf, size_t n, const char *tmpl, const char *q) {
  size_t k = 0, ql = strlen(q);
  for (const char *t = tmpl; *t; t++) {
    const char *add = *t == '@' ? q : t;
    size_t len = *t == '@' ? ql : 1;
    if (k + len >= n) return false;
    memcpy(buf + k, add, len);
    k += len;
  }
  buf[k] = 0;
  return true;
}

int etch__query_schema_create(etch__db *db, const char *catalog) {
  char q[96], sql[2048];
  qual(q, sizeof q, catalog);
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(kTables); i++) {
    if (is_view(kTables[i])) continue;
    snprintf(sql, sizeof sql, "CREATE TABLE %s%s;", q, kTables[i]);
    int rc = etch__db_exec(db, sql);
    if (rc) return rc;
  }
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(kStored); i++) {
    snprintf(sql, sizeof sql, "CREATE TABLE %s%s;", q, kStored[i]);
    int rc = etch__db_exec(db, sql);
    if (rc) return rc;
  }
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(kStackTables); i++) {
    snprintf(sql, sizeof sql, "CREATE TABLE %s%s;", q, kStackTables[i]);
    int rc = etch__db_exec(db, sql);
    if (rc) return rc;
  }
  for (size_t i = 0; i < ETCH_ARRAY_SIZE(kStoredViews); i++) {
    char sel[1536];
    if (!expand(sel, sizeof sel, kStoredViews[i].select, q))
      return etch__error(ETCH_EINVAL, "catalog name too long");
    snprintf(sql, sizeof sql, "CREATE VIEW %s%s AS %s;", q,
             kStoredViews[i].name, sel);
    int rc = etch__db_exec(db, sql);
    if (rc) return rc;
  }
  return catalog ? ETCH_OK : etch__db_exec(db, kViews);
}

const char *etch__query_stored_table_name(size_t i, size_t *len) {
  for (size_t k = 0; k < ETCH_ARRAY_SIZE(kTables); k++) {
    if (is_view(kTables[k])) continue;
    if (!i--) {
      *len = strcspn(kTables[k], "(");
      return kTables[k];
    }
  }
  if (i >= ETCH_ARRAY_SIZE(kStored)) return NULL;
  *len = strcspn(kStored[i], "(");
  return kStored[i];
}

/* The names of the tables as queries see them (slice's view included), in
 * kTables' order (for views over several traces, and the fleet's tables). */
const char *etch__query_table_name(size_t i, size_t *len) {
  if (i >= ETCH_ARRAY_SIZE(kTables)) return NULL;
  *len = strcspn(kTables[i], "(");
  return kTables[i];
}

const char *etch__query_views_sql(void) { return kViews; }

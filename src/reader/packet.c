/*
 * packet.c - decoding one TracePacket: its sequence and incremental state,
 * interned data, packet defaults, track descriptors, clock snapshots, trace
 * stats, and track events with their flattened debug annotations.
 *
 * A packet is scanned twice at most. The first pass reads the scalar fields
 * (timestamp, clock, flags, sequence id - which etch writes last) and notes
 * which sub-messages are present; the state-changing sub-messages are then
 * applied in dependency order (defaults, interned data, clock snapshot before
 * the timestamp; descriptors before the event), whatever their order in the
 * packet.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/check.h"
#include "proto/perfetto.h"
#include "reader/clock.h"
#include "reader/custom.h"
#include "reader/errors.h"
#include "reader/event.h"
#include "reader/machine.h"
#include "reader/packet.h"
#include "reader/samples.h"
#include "reader/stacks.h"
#include "reader/track.h"
#include "reader/reader_int.h"

/* TracePacket.incremental_state_cleared (deprecated bool form of flag 1). */
#define PKT_INCREMENTAL_STATE_CLEARED 41
/* TracePacket.thread_descriptor etc. are not read (legacy). */

/* ---- sequences -------------------------------------------------------------------- */

rd_seq *etch__rd_seq_get(etch_reader *r, uint32_t id) {
  rd_seq *s = r->last_seq;
  if (s && s->id == id) return s;
  s = (rd_seq *)etch__ptrmap_get(&r->seqs, id);
  if (!s) {
    if (r->nseq >= RD_MAX_SEQUENCES) {
      etch__error(ETCH_ELIMIT, "more than %u packet sequences",
                  RD_MAX_SEQUENCES);
      return NULL;
    }
    s = (rd_seq *)etch__calloc(1, sizeof *s);
    if (!s) return NULL;
    s->id = id;
    s->valid = true;
    etch__arena_init(&s->srcloc_arena, 4096);
    etch__arena_init(&s->recs, 256 * 1024);
    s->last_ts = INT64_MIN;
    if (ETCH_VEC_RESERVE(&r->seqv, rd_seq *, 1)) {
      free(s);
      return NULL;
    }
    r->seq_list = ETCH_VEC_AT(&r->seqv, rd_seq *); /* it may have moved */
    if (etch__ptrmap_put(&r->seqs, id, s)) {
      free(s);
      return NULL;
    }
    (void)ETCH_VEC_PUSH(&r->seqv, rd_seq *, s); /* room made above */
    r->seq_list = ETCH_VEC_AT(&r->seqv, rd_seq *);
    r->nseq++;
    ETCH_DCHECK(r->nseq == ETCH_VEC_COUNT(&r->seqv, rd_seq *) &&
                r->nseq <= RD_MAX_SEQUENCES);
    if (id != 0) r->stats.sequences++;
  }
  r->last_seq = s;
  return s;
}

static void seq_clear(rd_seq *s) {
  etch__idtab_clear(&s->names);
  etch__idtab_clear(&s->cats);
  etch__idtab_clear(&s->da_names);
  etch__idtab_clear(&s->da_strings);
  etch__idtab_clear(&s->srclocs);
  etch__arena_reset(&s->srcloc_arena);
  etch__rd_stack_seq_clear(s);
  s->has_clock_default = false;
  s->has_track_default = false;
  s->n_extra_counter_default = 0;
  s->n_extra_dcounter_default = 0;
  s->valid = true;
  s->gen++;
}

/* A track descriptor. `tpid` is the packet's trusted_pid (-1: none): the
 * pid the tracing service knows wrote it, which a process or thread
 * descriptor claiming another pid does not override (a producer could
 * otherwise put its events under any process). */
static int track_descriptor(etch_reader *r, const rd_src *src,
                            const uint8_t *msg, size_t len, int64_t tpid) {
  etch__pb_dec d;
  etch__pb_field f;
  uint64_t uuid = 0, parent = 0;
  const char *name = NULL, *pname = NULL, *cmdline = NULL;
  /* ProcessDescriptor.cmdline: repeated; joined by spaces, up to 4 KiB. */
  char cmd[4096];
  size_t cmd_len = 0;
  bool has_parent = false, is_proc = false, is_thread = false,
       is_counter = false;
  int32_t pid = 0, tid = 0;
  int32_t unit = 0;
  int64_t mult = 0;
  bool incr = false;
  const char *unit_name = NULL;

  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    switch (f.id) {
      case ETCH_TD_UUID:
        RD_EXPECT(f, ETCH_PB_VARINT, "TrackDescriptor.uuid");
        uuid = f.u;
        break;
      case ETCH_TD_PARENT_UUID:
        RD_EXPECT(f, ETCH_PB_VARINT, "TrackDescriptor.parent_uuid");
        parent = f.u;
        has_parent = true;
        break;
      case ETCH_TD_NAME:
      case ETCH_TD_STATIC_NAME:
        RD_EXPECT(f, ETCH_PB_LEN, "TrackDescriptor.name");
        if (!(name = rd_pool_field(r, &f))) return ETCH_ELIMIT;
        break;
      case ETCH_TD_PROCESS:
      case ETCH_TD_THREAD: {
        RD_EXPECT(f, ETCH_PB_LEN, "TrackDescriptor.process/thread");
        bool thread = f.id == ETCH_TD_THREAD;
        if (thread)
          is_thread = true;
        else
          is_proc = true;
        etch__pb_dec sd;
        etch__pb_field sf;
        etch__pb_dec_init(&sd, f.data, f.len);
        while (etch__pb_next(&sd, &sf)) {
          if (sf.id == ETCH_PD_PID && sf.wt == ETCH_PB_VARINT) {
            if (thread == is_thread && (thread || !is_thread)) pid = (int32_t)sf.u;
          } else if (thread && sf.id == ETCH_THD_TID && sf.wt == ETCH_PB_VARINT) {
            tid = (int32_t)sf.u;
          } else if (sf.wt == ETCH_PB_LEN &&
                     ((thread && sf.id == ETCH_THD_THREAD_NAME) ||
                      (!thread && sf.id == ETCH_PD_PROCESS_NAME))) {
            if (!(pname = rd_pool_field(r, &sf))) return ETCH_ELIMIT;
          } else if (!thread && sf.id == ETCH_PD_CMDLINE &&
                     sf.wt == ETCH_PB_LEN) {
            if (cmd_len && cmd_len < sizeof cmd) cmd[cmd_len++] = ' ';
            size_t room = sizeof cmd - cmd_len;
            size_t n = sf.len < room ? sf.len : room;
            memcpy(cmd + cmd_len, sf.data, n);
            cmd_len += n;
          }
        }
        if (sd.err) return etch__rd_fail_dec(r, src, &sd);
        break;
      }
      case ETCH_TD_COUNTER: {
        RD_EXPECT(f, ETCH_PB_LEN, "TrackDescriptor.counter");
        is_counter = true;
        etch__pb_dec sd;
        etch__pb_field sf;
        etch__pb_dec_init(&sd, f.data, f.len);
        while (etch__pb_next(&sd, &sf)) {
          if (sf.wt == ETCH_PB_VARINT) {
            if (sf.id == ETCH_CD_UNIT) unit = (int32_t)sf.u;
            if (sf.id == ETCH_CD_UNIT_MULTIPLIER) mult = (int64_t)sf.u;
            if (sf.id == ETCH_CD_IS_INCREMENTAL) incr = sf.u != 0;
          } else if (sf.wt == ETCH_PB_LEN && sf.id == ETCH_CD_UNIT_NAME) {
            if (!(unit_name = rd_pool_field(r, &sf))) return ETCH_ELIMIT;
          }
        }
        if (sd.err) return etch__rd_fail_dec(r, src, &sd);
        break;
      }
      default:
        break;
    }
  }
  if (d.err) return etch__rd_fail_dec(r, src, &d);
  if (uuid == 0) return 0; /* the global track is not described */
  if ((is_thread || is_proc) && tpid >= 0 && pid != (int32_t)tpid) {
    r->stats.descriptor_pid_untrusted++;
    pid = (int32_t)tpid;
  }
  if (cmd_len && !(cmdline = etch__strpool_get(&r->pool, cmd, cmd_len)))
    return ETCH_ELIMIT;
  rd_track *t = etch__rd_track_get(r, uuid, true);
  if (!t) return ETCH_ENOMEM;
  etch_track_info *ti = &t->info;
  ti->kind = is_thread    ? ETCH_TRACK_THREAD
             : is_proc    ? ETCH_TRACK_PROCESS
             : is_counter ? ETCH_TRACK_COUNTER
                          : ETCH_TRACK_NAMED;
  ti->parent_uuid = has_parent ? parent : 0;
  ti->name = name && *name ? name : pname ? pname : r->empty;
  ti->pid = (is_thread || is_proc) ? pid : 0;
  ti->tid = is_thread ? tid : 0;
  ti->cmdline = is_proc && cmdline ? cmdline : r->empty;
  if (is_counter) {
    ti->counter_unit = unit;
    ti->counter_unit_name = unit_name ? unit_name : r->empty;
    ti->unit_multiplier = mult;
    ti->is_incremental = incr;
  }
  t->described = true;
  r->track_gen++;
  return 0;
}

/* ---- interned data, defaults, stats ------------------------------------------------------- */

static int intern_put(etch_reader *r, const rd_src *src, const uint8_t *at,
                      etch_idtab *m, uint64_t iid, void *val) {
  ETCH_DCHECK(iid != 0 && val != NULL); /* iid 0 is "not set": skipped */
  if (m->count >= RD_MAX_INTERNED && !etch__idtab_get(m, iid))
    return etch__rd_fail(r, src, at, ETCH_ELIMIT,
                         "more than %u interned entries of one kind on a "
                         "sequence",
                         RD_MAX_INTERNED);
  return etch__idtab_put(m, iid, val);
}

static int interned_data(etch_reader *r, const rd_src *src, rd_seq *seq,
                         const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    etch_idtab *m;
    switch (f.id) {
      case ETCH_ID_EVENT_CATEGORIES: m = &seq->cats; break;
      case ETCH_ID_EVENT_NAMES: m = &seq->names; break;
      case ETCH_ID_DEBUG_ANNOTATION_NAMES: m = &seq->da_names; break;
      case ETCH_ID_DEBUG_ANNOTATION_STRING_VALUES: m = &seq->da_strings; break;
      case ETCH_ID_SOURCE_LOCATIONS: m = &seq->srclocs; break;
      case ETCH_ID_FUNCTION_NAMES:
      case ETCH_ID_FRAMES:
      case ETCH_ID_CALLSTACKS:
      case ETCH_ID_BUILD_IDS:
      case ETCH_ID_MAPPING_PATHS:
      case ETCH_ID_MAPPINGS: { /* call stacks: stacks.c */
        RD_EXPECT(f, ETCH_PB_LEN, "InternedData call-stack entry");
        int rc = etch__rd_stack_interned(r, src, seq, f.id, f.data, f.len);
        if (rc) return rc;
        continue;
      }
      case ETCH_ID_EVENT_SCHEMAS: {
        RD_EXPECT(f, ETCH_PB_LEN, "InternedData.etch_event_schemas");
        int rc = etch__rd_schema(r, src, f.data, f.len);
        if (rc) return rc;
        continue;
      }
      default: continue;
    }
    RD_EXPECT(f, ETCH_PB_LEN, "InternedData entry");
    etch__pb_dec ed;
    etch__pb_field ef;
    uint64_t iid = 0;
    const char *str = NULL;
    const char *file = NULL, *func = NULL;
    uint32_t line = 0;
    bool srcloc = m == &seq->srclocs;
    etch__pb_dec_init(&ed, f.data, f.len);
    while (etch__pb_next(&ed, &ef)) {
      if (ef.id == ETCH_INTERNED_IID && ef.wt == ETCH_PB_VARINT) {
        iid = ef.u;
      } else if (ef.wt == ETCH_PB_LEN && ef.id == ETCH_INTERNED_NAME) {
        /* name (EventName...), str (InternedString), file_name (SourceLocation) */
        if (!(str = rd_pool_field(r, &ef))) return ETCH_ELIMIT;
      } else if (srcloc && ef.wt == ETCH_PB_LEN &&
                 ef.id == ETCH_SRCLOC_FUNCTION_NAME) {
        if (!(func = rd_pool_field(r, &ef))) return ETCH_ELIMIT;
      } else if (srcloc && ef.wt == ETCH_PB_VARINT &&
                 ef.id == ETCH_SRCLOC_LINE_NUMBER) {
        line = (uint32_t)ef.u;
      }
    }
    if (ed.err) return etch__rd_fail_dec(r, src, &ed);
    if (iid == 0) continue; /* iid 0 is "not set" */
    void *val;
    if (srcloc) {
      file = str;
      rd_srcloc *sl = (rd_srcloc *)etch__arena_alloc(&seq->srcloc_arena, sizeof *sl);
      if (!sl) return ETCH_ENOMEM;
      sl->file = file ? file : "";
      sl->function = func ? func : "";
      sl->line = line;
      val = sl;
    } else {
      val = (void *)(str ? str : r->empty);
    }
    int rc = intern_put(r, src, d.start + f.off, m, iid, val);
    if (rc) return rc;
  }
  if (d.err) return etch__rd_fail_dec(r, src, &d);
  return 0;
}

/* Appends varints of a repeated field (plain or packed) to an array. */
static int packet_defaults(etch_reader *r, const rd_src *src, rd_seq *seq,
                           const uint8_t *msg, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    if (f.id == ETCH_DEFAULTS_TIMESTAMP_CLOCK_ID) {
      RD_EXPECT(f, ETCH_PB_VARINT, "TracePacketDefaults.timestamp_clock_id");
      seq->has_clock_default = true;
      seq->clock_default = (uint32_t)f.u;
    } else if (f.id == ETCH_DEFAULTS_TRACK_EVENT_DEFAULTS) {
      RD_EXPECT(f, ETCH_PB_LEN, "TracePacketDefaults.track_event_defaults");
      etch__pb_dec td;
      etch__pb_field tf;
      seq->n_extra_counter_default = 0;
      seq->n_extra_dcounter_default = 0;
      etch__pb_dec_init(&td, f.data, f.len);
      while (etch__pb_next(&td, &tf)) {
        int rc = 0;
        if (tf.id == ETCH_TEDEFAULTS_TRACK_UUID && tf.wt == ETCH_PB_VARINT) {
          seq->has_track_default = true;
          seq->track_default = tf.u;
        } else if (tf.id == ETCH_TEDEFAULTS_EXTRA_COUNTER_TRACK_UUIDS) {
          rc = etch__rd_repeated(r, src, td.start, &tf, false,
                        &seq->extra_counter_default,
                        &seq->n_extra_counter_default,
                        &seq->cap_extra_counter_default);
        } else if (tf.id == ETCH_TEDEFAULTS_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS) {
          rc = etch__rd_repeated(r, src, td.start, &tf, false,
                        &seq->extra_dcounter_default,
                        &seq->n_extra_dcounter_default,
                        &seq->cap_extra_dcounter_default);
        }
        if (rc) return rc;
      }
      if (td.err) return etch__rd_fail_dec(r, src, &td);
    }
  }
  if (d.err) return etch__rd_fail_dec(r, src, &d);
  return 0;
}

static int trace_stats(etch_reader *r, const rd_src *src, const uint8_t *msg,
                       size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  uint64_t disc = 0, over = 0, loss = 0, invalid = 0, patches = 0, abi = 0;
  etch__pb_dec_init(&d, msg, len);
  while (etch__pb_next_fast(&d, &f)) {
    if (f.id == ETCH_TS_INVALID_PACKETS && f.wt == ETCH_PB_VARINT)
      invalid = f.u;
    if (f.id != ETCH_TS_BUFFER_STATS || f.wt != ETCH_PB_LEN) continue;
    etch__pb_dec bd;
    etch__pb_field bf;
    etch__pb_dec_init(&bd, f.data, f.len);
    while (etch__pb_next(&bd, &bf)) {
      if (bf.wt != ETCH_PB_VARINT) continue;
      if (bf.id == ETCH_BS_CHUNKS_DISCARDED) disc += bf.u;
      if (bf.id == ETCH_BS_CHUNKS_OVERWRITTEN) over += bf.u;
      if (bf.id == ETCH_BS_TRACE_WRITER_PACKET_LOSS) loss += bf.u;
      if (bf.id == ETCH_BS_PATCHES_FAILED) patches += bf.u;
      if (bf.id == ETCH_BS_ABI_VIOLATIONS) abi += bf.u;
    }
    if (bd.err) return etch__rd_fail_dec(r, src, &bd);
  }
  if (d.err) return etch__rd_fail_dec(r, src, &d);
  /* Stats packets are cumulative snapshots: the last one wins. */
  r->stats.trace_stats_chunks_discarded = disc;
  r->stats.trace_stats_chunks_overwritten = over;
  r->stats.trace_stats_writer_packet_loss = loss;
  r->stats.trace_stats_invalid_packets = invalid;
  r->stats.trace_stats_patches_failed = patches;
  r->stats.trace_stats_abi_violations = abi;
  r->trace_stats_seen = true;
  return 0;
}

/* ---- the packet ------------------------------------------------------------------------ */

enum {
  HAS_DEFAULTS = 1,
  HAS_INTERNED = 2,
  HAS_SNAPSHOT = 4,
  HAS_DESCRIPTOR = 8,
  HAS_STATS = 16,
  HAS_COMPRESSED = 32,
  HAS_SYSINFO = 64,
  HAS_CLOCK_SYNC = 128,
  HAS_MODULE_SYMBOLS = 256,
};

/* Resolves the packet timestamp to the trace clock. Returns false when it
 * cannot be converted. Incremental clocks advance even then. */
bool etch__rd_packet_time(etch_reader *r, rd_seq *seq, bool has_ts,
                          uint64_t raw, uint32_t clock_id, int64_t *out) {
  if (!has_ts) {
    *out = r->latest_ts;
    return true;
  }
  rd_clock *k;
  if (clock_id == 0 || clock_id == r->clocks.trace_clock) {
    r->clocks.converted = true;
    /* A relayed machine's timestamp moves onto the host's timeline when it
     * names the trace clock, as trace_processor v58 moves it (machine.c). */
    *out = clock_id ? rd_machine_to_host(r, r->cur_machine, (int64_t)raw)
                    : (int64_t)raw;
    if (*out > r->latest_ts) r->latest_ts = *out;
    return true;
  }
  if (clock_id >= ETCH_CLOCK_SEQ_SCOPED_FIRST &&
      clock_id <= ETCH_CLOCK_SEQ_SCOPED_LAST) {
    k = seq->clocks[clock_id - ETCH_CLOCK_SEQ_SCOPED_FIRST];
  } else {
    k = etch__rd_clock_get(r, RD_MACHINE_CLOCK_KEY(r->cur_machine, clock_id),
                           false);
  }
  if (!k) return false;
  uint64_t v = raw;
  if (k->incremental) {
    if (!k->has_last) return false;
    v = k->last + raw;
    k->last = v;
  }
  if (!rd_clock_convert(r, k, v * k->unit_ns, out)) return false;
  if (*out > r->latest_ts) r->latest_ts = *out;
  return true;
}

/* ---- malformed packets ------------------------------------------------------------------ */

/* An error of one packet's bytes, which leaving the packet out gets past:
 * bytes that do not decode, and the limits on one packet (their messages
 * name an offset); not the trace-wide limits (tracks, sequences, clocks,
 * the string pool) nor running out of memory. */
static bool packet_local(const etch_reader *r, int rc) {
  return rc == ETCH_EFORMAT || rc == ETCH_ETRUNC ||
         (rc == ETCH_ELIMIT && r->err_formatted);
}

/* The packet whose error is in etch_last_error() is left out: counted, its
 * message kept (the first and the last), the read goes on. */
static ETCH_NOINLINE int left_out(etch_reader *r, int rc) {
  const char *msg = etch_last_error();
  if (!msg || !*msg) msg = etch_strerror(rc);
  if (r->stats.malformed_packets++ == 0)
    snprintf(r->malformed_first, sizeof r->malformed_first, "%s", msg);
  snprintf(r->malformed_last, sizeof r->malformed_last, "%s", msg);
  r->malformed_status = rc;
  r->err_formatted = false;
  etch__error_clear();
  return 0;
}

/* A packet that changes its sequence's state, checked whole before any of
 * it is applied (proto/check.h): EFORMAT (or the fault's status) naming
 * the offending byte when the reader could not read all of it. */
static ETCH_NOINLINE int check_first(etch_reader *r, const rd_src *src,
                                     const uint8_t *pkt, size_t len) {
  etch__pkt_fault why;
  if (etch__packet_check(pkt, len, &why)) return 0;
  return etch__rd_fail(r, src, pkt + why.off, why.status, "%s", why.msg);
}

static int packet_read(etch_reader *r, const rd_src *src, uint64_t rec_off,
                       const uint8_t *pkt, size_t len);

int etch__rd_packet(etch_reader *r, const rd_src *src, uint64_t rec_off,
                    const uint8_t *pkt, size_t len) {
  r->err_formatted = false;
  int rc = packet_read(r, src, rec_off, pkt, len);
  if (ETCH_UNLIKELY(rc) && !r->strict && packet_local(r, rc))
    return left_out(r, rc);
  return rc;
}

/* An incremental clock advanced by a packet left out goes back. */
static ETCH_NOINLINE void clock_unwind(etch_reader *r, rd_seq *seq,
                                       uint32_t clock_id, uint64_t raw) {
  if (clock_id == r->clocks.trace_clock) return;
  rd_clock *k = clock_id >= ETCH_CLOCK_SEQ_SCOPED_FIRST &&
                        clock_id <= ETCH_CLOCK_SEQ_SCOPED_LAST
                    ? seq->clocks[clock_id - ETCH_CLOCK_SEQ_SCOPED_FIRST]
                    : etch__rd_clock_get(
                          r, RD_MACHINE_CLOCK_KEY(r->cur_machine, clock_id),
                          false);
  if (k && k->incremental && k->has_last) k->last -= raw;
}

/* What a TracePacket's own fields say (pkt_fields), before any of it is
 * applied. */
typedef struct pkt_fields {
  uint64_t raw_ts;
  bool has_ts, has_clock, prev_dropped, cleared_legacy, first_on_seq;
  uint32_t clock, flags, seq_id;
  int64_t trusted_pid;
  uint64_t machine_raw;
  const uint8_t *machine_at;
  const uint8_t *te;
  size_t te_len;
  unsigned present; /* HAS_* of the nested messages met */
  bool has_sample;  /* a perf_sample, read into `sample` (samples.c) */
  rd_perf_sample sample;
} pkt_fields;

/* Step 1: the packet's fields, read once; the nested messages only noted
 * (their kind in `present`), read by the later steps. */
ETCH_INLINE int pkt_fields_read(etch_reader *r, const rd_src *src,
                                const uint8_t *pkt, size_t len,
                                pkt_fields *pf) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, pkt, len);
  while (etch__pb_next_fast(&d, &f)) {
    switch (f.id) {
      case ETCH_PKT_TIMESTAMP:
        RD_EXPECT(f, ETCH_PB_VARINT, "TracePacket.timestamp");
        pf->raw_ts = f.u;
        pf->has_ts = true;
        break;
      case ETCH_PKT_SEQUENCE_FLAGS:
        RD_EXPECT(f, ETCH_PB_VARINT, "TracePacket.sequence_flags");
        pf->flags = (uint32_t)f.u;
        break;
      case ETCH_PKT_TRACK_EVENT:
        RD_EXPECT(f, ETCH_PB_LEN, "TracePacket.track_event");
        pf->te = f.data;
        pf->te_len = f.len;
        break;
      case ETCH_PKT_TRUSTED_SEQ_ID:
        RD_EXPECT(f, ETCH_PB_VARINT, "TracePacket.trusted_packet_sequence_id");
        pf->seq_id = (uint32_t)f.u;
        break;
      case ETCH_PKT_TRUSTED_PID:
        RD_EXPECT(f, ETCH_PB_VARINT, "TracePacket.trusted_pid");
        /* int32 on the wire: a negative one is 10 bytes of sign. */
        pf->trusted_pid = (int64_t)(int32_t)(uint32_t)f.u;
        if (pf->trusted_pid <= 0) pf->trusted_pid = -1;
        break;
      case ETCH_PKT_TIMESTAMP_CLOCK_ID:
        RD_EXPECT(f, ETCH_PB_VARINT, "TracePacket.timestamp_clock_id");
        pf->clock = (uint32_t)f.u;
        pf->has_clock = true;
        break;
      case ETCH_PKT_INTERNED_DATA:
        RD_EXPECT(f, ETCH_PB_LEN, "TracePacket.interned_data");
        pf->present |= HAS_INTERNED;
        break;
      case ETCH_PKT_TRACE_PACKET_DEFAULTS:
        RD_EXPECT(f, ETCH_PB_LEN, "TracePacket.trace_packet_defaults");
        pf->present |= HAS_DEFAULTS;
        break;
      case ETCH_PKT_CLOCK_SNAPSHOT:
        RD_EXPECT(f, ETCH_PB_LEN, "TracePacket.clock_snapshot");
        pf->present |= HAS_SNAPSHOT;
        break;
      case ETCH_PKT_TRACK_DESCRIPTOR:
        RD_EXPECT(f, ETCH_PB_LEN, "TracePacket.track_descriptor");
        pf->present |= HAS_DESCRIPTOR;
        break;
      case ETCH_PKT_TRACE_STATS:
        RD_EXPECT(f, ETCH_PB_LEN, "TracePacket.trace_stats");
        pf->present |= HAS_STATS;
        break;
      case ETCH_PKT_COMPRESSED_PACKETS:
      case ETCH_PKT_ZSTD_COMPRESSED_PACKETS:
        RD_EXPECT(f, ETCH_PB_LEN, "TracePacket.compressed_packets");
        pf->present |= HAS_COMPRESSED;
        break;
      case ETCH_PKT_PREVIOUS_PACKET_DROPPED:
        RD_EXPECT(f, ETCH_PB_VARINT, "TracePacket.previous_packet_dropped");
        if (f.u) pf->prev_dropped = true;
        break;
      case ETCH_PKT_FIRST_PACKET_ON_SEQUENCE:
        RD_EXPECT(f, ETCH_PB_VARINT, "TracePacket.first_packet_on_sequence");
        if (f.u) pf->first_on_seq = true;
        break;
      case PKT_INCREMENTAL_STATE_CLEARED:
        RD_EXPECT(f, ETCH_PB_VARINT, "TracePacket.incremental_state_cleared");
        if (f.u) pf->cleared_legacy = true;
        break;
      case ETCH_PKT_MACHINE_ID:
        RD_EXPECT(f, ETCH_PB_VARINT, "TracePacket.machine_id");
        pf->machine_raw = f.u;
        pf->machine_at = pkt + f.off;
        break;
      case ETCH_PKT_SYSTEM_INFO:
        RD_EXPECT(f, ETCH_PB_LEN, "TracePacket.system_info");
        pf->present |= HAS_SYSINFO;
        break;
      case ETCH_PKT_REMOTE_CLOCK_SYNC:
        RD_EXPECT(f, ETCH_PB_LEN, "TracePacket.remote_clock_sync");
        pf->present |= HAS_CLOCK_SYNC;
        break;
      case ETCH_PKT_MODULE_SYMBOLS:
        RD_EXPECT(f, ETCH_PB_LEN, "TracePacket.module_symbols");
        pf->present |= HAS_MODULE_SYMBOLS;
        break;
      case ETCH_PKT_PERF_SAMPLE: {
        RD_EXPECT(f, ETCH_PB_LEN, "TracePacket.perf_sample");
        int rc = etch__rd_perf_sample_read(r, src, f.data, f.len, &pf->sample);
        if (rc) return rc;
        pf->has_sample = true;
        break;
      }
      default:
        break;
    }
  }
  if (d.err) RD_DEC_FAIL(d);
  return 0;
}

/*
 * Step 2: the packet's machine and sequence, and what its flags do to the
 * sequence's incremental state (as trace_processor does it). *skipped when
 * the packet needs an incremental state its sequence has not: it is
 * counted and goes no further.
 */
ETCH_INLINE int pkt_sequence(etch_reader *r, const rd_src *src,
                             uint64_t rec_off, const uint8_t *pkt, size_t len,
                             pkt_fields *pf, rd_seq **out, bool *skipped) {
  /* The machine whose clocks and tracks the packet's state is of. */
  if (ETCH_UNLIKELY(pf->machine_raw)) {
    int rc = etch__rd_machine_of(r, pf->machine_raw, &r->cur_machine);
    if (rc == ETCH_ELIMIT)
      return etch__rd_fail(r, src, pf->machine_at, rc, "%s",
                           etch_last_error());
    if (rc) return rc;
  } else {
    r->cur_machine = 0;
  }

  uint32_t seq_id = pf->seq_id;
  if (!seq_id) seq_id = r->feed_seq; /* 0 unless fed (etch_reader_feed) */
  rd_seq *seq = rd_seq_get(r, seq_id);
  if (!seq) return r->nseq >= RD_MAX_SEQUENCES ? ETCH_ELIMIT : ETCH_ENOMEM;
  *out = seq;

  /* Writers that cannot know mark their first packet "dropped" too, with
   * first_packet_on_sequence: that is no loss. */
  bool prev_dropped = pf->prev_dropped && !pf->first_on_seq;
  bool cleared =
      (pf->flags & ETCH_SEQ_INCREMENTAL_STATE_CLEARED) || pf->cleared_legacy;
  /* Skipped: it needs the incremental state and its sequence has none
   * (after what this packet's own flags do to it). */
  bool skip = (pf->flags & ETCH_SEQ_NEEDS_INCREMENTAL_STATE) &&
              (seq_id == 0 || (!cleared && (prev_dropped || !seq->valid)));
  *skipped = skip;

  /* What changes the sequence's state is applied only if the whole packet
   * reads (a packet skipped is not read, whatever its bytes): left out
   * otherwise, it must leave no trace. A packet with a track event only is
   * read as it comes (its errors are found before anything is delivered,
   * and undone in pkt_track_event). */
  if (ETCH_UNLIKELY((pf->present & (HAS_DEFAULTS | HAS_INTERNED |
                                    HAS_SNAPSHOT | HAS_DESCRIPTOR |
                                    HAS_STATS | HAS_SYSINFO |
                                    HAS_CLOCK_SYNC)) ||
                    prev_dropped || cleared) &&
      !skip && !r->strict) {
    int rc = check_first(r, src, pkt, len);
    if (rc) return rc;
  }

  if (prev_dropped) {
    r->stats.previous_packet_dropped++;
    seq->loss_pending = true;
  }
  if (cleared)
    seq_clear(seq);
  else if (prev_dropped && seq_id != 0)
    seq->valid = false;
  if (skip) {
    if (seq_id == 0)
      r->stats.packet_sequence_id_missing++;
    else
      r->stats.packet_skipped_seq_needs_incremental_state_invalid++;
    seq->loss_pending = true;
    if (r->obs) {
      rd_packet_view v = {src,        rec_off,   pkt,
                          len,        seq,       pf->flags,
                          pf->has_ts, pf->raw_ts, pf->has_clock ? pf->clock : 0,
                          false,      0,         true};
      r->obs->packet(r, &v, r->obs->user);
    }
  }
  return 0;
}

/* Step 3: the state the rest of the packet depends on: defaults, interned
 * data, clock snapshots and syncs. */
ETCH_INLINE int pkt_state(etch_reader *r, const rd_src *src, rd_seq *seq,
                          const uint8_t *pkt, size_t len) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, pkt, len);
  while (etch__pb_next_fast(&d, &f)) {
    int rc = 0;
    if (f.id == ETCH_PKT_TRACE_PACKET_DEFAULTS)
      rc = packet_defaults(r, src, seq, f.data, f.len);
    else if (f.id == ETCH_PKT_INTERNED_DATA)
      rc = interned_data(r, src, seq, f.data, f.len);
    else if (f.id == ETCH_PKT_CLOCK_SNAPSHOT)
      rc = etch__rd_clock_snapshot(r, src, seq, f.data, f.len);
    else if (f.id == ETCH_PKT_REMOTE_CLOCK_SYNC)
      rc = etch__rd_remote_clock_sync(r, src, seq, f.data, f.len);
    if (rc) return rc;
  }
  return 0;
}

/* Step 4: what the packet describes: tracks, the system, the trace's
 * stats, and compressed packets (read here, each in turn). */
ETCH_INLINE int pkt_contents(etch_reader *r, const rd_src *src,
                             const uint8_t *pkt, size_t len,
                             int64_t trusted_pid) {
  etch__pb_dec d;
  etch__pb_field f;
  etch__pb_dec_init(&d, pkt, len);
  while (etch__pb_next_fast(&d, &f)) {
    int rc = 0;
    if (f.id == ETCH_PKT_TRACK_DESCRIPTOR) {
      rc = track_descriptor(r, src, f.data, f.len, trusted_pid);
    } else if (f.id == ETCH_PKT_SYSTEM_INFO) {
      rc = etch__rd_system_info(r, src, f.data, f.len);
    } else if (f.id == ETCH_PKT_TRACE_STATS) {
      rc = trace_stats(r, src, f.data, f.len);
    } else if (f.id == ETCH_PKT_MODULE_SYMBOLS) {
      rc = etch__rd_module_symbols(r, src, f.data, f.len);
    } else if (f.id == ETCH_PKT_COMPRESSED_PACKETS ||
               f.id == ETCH_PKT_ZSTD_COMPRESSED_PACKETS) {
      uint32_t m = r->cur_machine; /* the packets inside have theirs */
      rc = r->unpack(r, src, pkt + f.off, f.data, f.len,
                     f.id == ETCH_PKT_ZSTD_COMPRESSED_PACKETS);
      r->cur_machine = m;
    }
    if (rc) return rc;
  }
  return 0;
}

/* Step 5: the track event, at `ts`; when it fails nothing of it was
 * delivered, and what reading it changed is undone. */
ETCH_INLINE int pkt_track_event(etch_reader *r, const rd_src *src,
                                rd_seq *seq, uint64_t rec_off,
                                const pkt_fields *pf, bool ts_ok, int64_t ts,
                                uint32_t clock_id, int64_t latest_before) {
  if (!ts_ok) {
    r->stats.clock_conversion_failed++;
    return 0;
  }
  uint64_t events = r->stats.track_events,
           missing = r->stats.interned_data_missing;
  int rc = etch__rd_track_event(r, src, seq, pf->te, pf->te_len, ts, rec_off);
  if (ETCH_UNLIKELY(rc)) {
    r->stats.track_events = events;
    r->stats.interned_data_missing = missing;
    r->latest_ts = latest_before;
    if (pf->has_ts) clock_unwind(r, seq, clock_id, pf->raw_ts);
  }
  return rc;
}

static int packet_read(etch_reader *r, const rd_src *src, uint64_t rec_off,
                       const uint8_t *pkt, size_t len) {
  pkt_fields pf = {.trusted_pid = -1};
  r->stats.packets++;
  r->gen++; /* sequence state may change: the fast path looks again */
  int rc = pkt_fields_read(r, src, pkt, len, &pf);
  if (rc) return rc;
  rd_seq *seq = NULL;
  bool skipped = false;
  rc = pkt_sequence(r, src, rec_off, pkt, len, &pf, &seq, &skipped);
  if (rc || skipped) return rc;
  /* Read on: what it needs of the sequence's state is there. */
  ETCH_DCHECK(!(pf.flags & ETCH_SEQ_NEEDS_INCREMENTAL_STATE) ||
              (seq->id != 0 && seq->valid));

  if (pf.present &
      (HAS_DEFAULTS | HAS_INTERNED | HAS_SNAPSHOT | HAS_CLOCK_SYNC)) {
    rc = pkt_state(r, src, seq, pkt, len);
    if (rc) return rc;
  }

  /* No clock id (or 0): the timestamp is in the trace clock already, as
   * trace_processor takes it (BOOTTIME unless a snapshot said otherwise). */
  uint32_t clock_id = pf.has_clock                ? pf.clock
                      : seq->has_clock_default ? seq->clock_default
                                               : 0;
  uint32_t named_clock = clock_id;
  if (clock_id == 0) clock_id = r->clocks.trace_clock;
  int64_t ts = 0;
  int64_t latest_before = r->latest_ts;
  bool ts_ok =
      etch__rd_packet_time(r, seq, pf.has_ts, pf.raw_ts, named_clock, &ts);
  if (r->obs) {
    rd_packet_view v = {src,       rec_off,  pkt,   len, seq,  pf.flags,
                        pf.has_ts, pf.raw_ts, clock_id, ts_ok, ts,  false};
    r->obs->packet(r, &v, r->obs->user);
  }

  if (pf.present & (HAS_DESCRIPTOR | HAS_STATS | HAS_COMPRESSED | HAS_SYSINFO |
                    HAS_MODULE_SYMBOLS)) {
    rc = pkt_contents(r, src, pkt, len, pf.trusted_pid);
    if (rc) return rc;
  }

  if (ETCH_UNLIKELY(pf.has_sample)) {
    rc = etch__rd_perf_sample_deliver(r, seq, &pf.sample, ts_ok, ts, rec_off);
    if (rc) return rc;
  }

  if (pf.te)
    return pkt_track_event(r, src, seq, rec_off, &pf, ts_ok, ts, clock_id,
                           latest_before);
  return 0;
}

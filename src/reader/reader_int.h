/*
 * reader_int.h - the reader's internal state (its types, and rd_pool_field),
 * shared by its files; each file's functions are declared in its own header.
 *
 * The files of the reader, from the top down; each includes only the
 * headers of files below it (its containers are base's: arenas and the
 * string pool in base/arena.h, the pointer map, the iid tables and the
 * byte vector in base/containers.h):
 *   reader.c    the public API: opening, options, run, feed, stats;
 *   source.c    the Trace framing and decompression of compressed packets
 *               (a compressed packet's records come back to it from
 *               packet.c through etch_reader.unpack);
 *   fast.c      the fast path for the packets libetch's fast paths write;
 *   packet.c    one TracePacket: sequences, incremental state, interned
 *               data, defaults, descriptors;
 *   custom.c    custom events routed to analyzers by name;
 *   event.c     track events and their debug annotations;
 *   stacks.c    call stacks: interned mappings, frames, callstacks, and
 *               the ModuleSymbols that name them (etch_reader_stacks);
 *   clock.c     clock snapshots and conversion to the trace clock;
 *   machine.c   the machines of a multi-machine trace: their SystemInfo,
 *               their tracks, the clock offsets that put their timestamps
 *               on the host's timeline;
 *   deliver.c   ordering (holding, sorting, per-track order) and delivery
 *               of events to the track callback and the subscribers;
 *   track.c     the track table;
 *   progress.c  the progress line;
 *   errors.c    error messages naming the offset.
 * dump.c, the readable dump of every packet (etch print), runs the reader
 * through the API with an observer.
 *
 * Memory: every string the reader hands out is either in the string pool
 * (deduplicated, lives until etch_reader_close) or in a per-event scratch
 * arena (file order) / per-sequence record arena (timestamp order). Nothing is
 * allocated per event in the steady state: arenas keep their blocks, hash
 * maps keep their capacity across incremental-state resets.
 */
#ifndef ETCH_READER_INT_H
#define ETCH_READER_INT_H

#include <stdio.h>

#include "base/arena.h"
#include "base/containers.h"
#include "base/base.h"
#include "etch/reader.h"
#include "pb/pb.h"
#include "proto/check.h"

/* ---- limits ------------------------------------------------------------------ */

/* Bytes one compressed packet may expand to (Perfetto writes < 1 MiB). */
#define RD_MAX_INFLATE (64u << 20)
/* Compressed packets inside compressed packets. */
#define RD_MAX_COMPRESSION_DEPTH 2
/* Nesting of debug annotations (dicts / arrays) and of dumped messages. */
#define RD_MAX_NESTING ETCH_PKT_MAX_NESTING
/* Entries of one interning table of one sequence. */
#define RD_MAX_INTERNED (1u << 20)
/* Bytes held by the string pool. */
#define RD_MAX_POOL_BYTES ((size_t)1 << 30)
/* Tracks, sequences and clocks. */
#define RD_MAX_TRACKS (1u << 22)
#define RD_MAX_SEQUENCES (1u << 20)
#define RD_MAX_CLOCKS (1u << 16)
/* Machines (TracePacket.machine_id values), the host included. */
#define RD_MAX_MACHINES 1024u
/* Flattened args of one event. */
#define RD_MAX_ARGS ETCH_PKT_MAX_ARGS
/* Length of one flattened arg key. */
#define RD_MAX_KEY ETCH_PKT_MAX_KEY

/* Repeated integer fields of a TrackEvent kept in reader scratch. */
#define RD_NREP 5


/* ---- clocks ----------------------------------------------------------------------- */

typedef struct rd_clock_pair {
  uint64_t src; /* value of this clock, ns */
  uint64_t dst; /* value of the trace clock, ns */
} rd_clock_pair;

typedef struct rd_clock_ref {
  uint32_t snap;  /* index of a snapshot containing this clock */
  uint64_t value; /* this clock's value in it, ns */
} rd_clock_ref;

typedef struct rd_clock {
  uint64_t key;       /* id, or RD_SEQ_CLOCK_KEY(seq, id) */
  uint64_t unit_ns;   /* unit_multiplier_ns, default 1 */
  bool incremental;
  bool has_last;
  uint64_t last;      /* incremental clocks: last value, in units */
  rd_clock_pair *pairs; /* snapshots with the trace clock, sorted by src */
  size_t npairs;
  size_t hint;        /* last pair used */
  /* pairs[hint] as a range: a value v with v - c_lo < c_span converts to
   * c_dst + (v - c_lo) (c_span 0: no range; kept by clock_cache()). */
  uint64_t c_lo, c_span, c_dst;
  rd_clock_ref *refs; /* every snapshot containing this clock */
  size_t nrefs;
  etch_vec pairv, refv; /* pairs's and refs's bytes (clock.c), kept last:
                           the fields above are the conversion's */
} rd_clock;

#define RD_SEQ_CLOCK_KEY(seq, id) \
  ((1ull << 63) | ((uint64_t)(seq) << 8) | (uint64_t)(id))
/* Clock `id` (< 2^32) of machine `m`: each machine's clocks are its own
 * (the host's keys are the ids themselves). */
#define RD_MACHINE_CLOCK_KEY(m, id) (((uint64_t)(m) << 32) | (uint64_t)(id))
/* Whether `key` is the trace clock `tc` of some machine (a sequence-scoped
 * clock, 64..127, never is: the trace clock is < 64). */
#define RD_CLOCK_IS_TRACE(key, tc) \
  (!((key) >> 63) && (uint32_t)(key) == (tc))

typedef struct rd_snap_entry {
  rd_clock *clock;
  uint64_t value; /* ns */
} rd_snap_entry;

typedef struct rd_snap {
  rd_snap_entry *e;
  uint32_t n;
} rd_snap;

typedef struct rd_clocks {
  etch_ptrmap by_key;
  etch_vec allv, snapv; /* all's and snaps's bytes (clock.c) */
  rd_clock **all;
  size_t nall;
  rd_snap *snaps;
  size_t nsnaps;
  uint32_t trace_clock; /* BOOTTIME unless primary_trace_clock said else */
  bool converted;       /* a timestamp was converted: trace clock is fixed */
  etch_arena arena;
} rd_clocks;

/* ---- machines ------------------------------------------------------------------ */

typedef struct rd_machine {
  etch_machine_info info; /* strings pooled */
  etch_ptrmap tracks;     /* its tracks by uuid (machine 0: etch_reader.tracks) */
} rd_machine;

/* ---- tracks --------------------------------------------------------------------- */

enum rd_order_state { RD_ORDER_UNDECIDED, RD_ORDER_STREAM, RD_ORDER_HOLD };

typedef struct rd_track {
  etch_track_info info;
  bool delivered;    /* track callback called */
  bool described;    /* a descriptor was seen */
  uint32_t open;     /* open slices (for misplaced_end_event) */
  uint64_t res_gen;  /* descriptor generation of the cached resolution */
  int32_t ev_pid, ev_tid;
  uint32_t announce_no; /* the track callback's order, from 1 */
  uint64_t idle_read;   /* the read that announced it idle (idle_cb) */
  /* Per-track order (etch__reader_set_track_order): whether this track's
   * slices and instants are delivered as decoded or held to the end, the
   * last timestamp delivered, and the held records in file order. */
  uint8_t order_state; /* rd_order_state */
  bool held_unsorted;
  int64_t order_last;
  etch_vec held;       /* rd_rec pointers */
  /* Incremental counter tracks. */
  uint32_t acc_seq;
  uint64_t acc_gen;
  int64_t acc_i;
  double acc_d;
} rd_track;

/* ---- sequences -------------------------------------------------------------------- */

typedef struct rd_srcloc {
  const char *file;
  const char *function;
  uint32_t line;
} rd_srcloc;

typedef struct rd_seq {
  uint32_t id;
  bool valid;       /* incremental state usable */
  bool loss_pending; /* packets lost since the last event delivered */
  uint64_t gen;     /* bumped at every CLEARED */
  bool has_clock_default;
  uint32_t clock_default;
  bool has_track_default;
  uint64_t track_default;
  uint64_t *extra_counter_default; /* TrackEventDefaults.extra_counter... */
  size_t n_extra_counter_default, cap_extra_counter_default;
  uint64_t *extra_dcounter_default;
  size_t n_extra_dcounter_default, cap_extra_dcounter_default;
  etch_idtab names, cats, da_names, da_strings, srclocs;
  rd_track *last_track; /* cache of the last event track of the sequence */
  /* The fast path's view of this sequence's state, valid while fgen equals
   * etch_reader.gen (which every packet of the generic decoder, the only
   * one changing sequence state, bumps). */
  uint64_t fgen;
  bool fok;      /* NEEDS_INCREMENTAL_STATE packets are read (id != 0, valid) */
  rd_clock *fclk; /* the default clock, when sequence-scoped, incremental and
                     set: timestamps convert inline; else NULL */
  uint64_t fuuid; /* track of events without a track_uuid */
  etch_arena srcloc_arena;
  struct rd_stack_seq *stk; /* its call-stack entries (stacks.c), or NULL */
  rd_clock *clocks[64]; /* sequence-scoped clocks 64..127 */
  /* Held events (timestamp order): records in file order. */
  etch_arena recs;
  etch_vec idx; /* rd_rec pointers in file order */
  uint64_t nrecs;
  int64_t last_ts;
  bool unsorted;
} rd_seq;

/* ---- events ---------------------------------------------------------------------- */

/* A held event (timestamp order); args etc. follow when `extra` is set. */
typedef struct rd_rec {
  int64_t ts;
  uint64_t gidx;
  rd_track *track;
  const char *name;
  const char *category;
  uint64_t packet_offset;
  union {
    int64_t i;
    double d;
  } counter;
  uint32_t seq;
  uint8_t type;
  uint8_t counter_is_double;
  uint8_t extra;
  uint8_t after_loss;
} rd_rec; /* 64 bytes */

typedef struct rd_rec_extra {
  uint32_t nflows, nterm, nargs;
  uint32_t callsite; /* the event's callsite_id + 1 (0: none) */
} rd_rec_extra;

typedef struct rd_sub {
  const char *category; /* pooled, or NULL */
  const char *name;     /* pooled, or NULL */
  etch_event_cb cb;
  void *user;
} rd_sub;

/* Where bytes being decoded live, for error offsets. */
typedef struct rd_src {
  const uint8_t *start;   /* start of the buffer */
  uint64_t wrapper_off;   /* offset of the compressed packet (depth > 0) */
  int depth;              /* 0 = the file */
  const struct rd_src *parent;
} rd_src;

struct etch_reader {
  const uint8_t *data;
  size_t len;
  void *map; /* mmap of the file, or NULL */
  size_t map_len;
  /* Where the top level's reading next calls etch__rd_watch (the progress
   * line, giving back the file's pages behind it); UINT64_MAX: never. */
  uint64_t watch_at;
  size_t map_released; /* bytes of the mapping given back */
  char *name; /* file name for messages, or NULL */
  etch_reader_order order;
  /* Per-track order (file order underneath): see etch__reader_set_track_order. */
  bool per_track;
  bool hold_all;       /* every slice track held, thread tracks too */
  bool went_back;      /* a streamed track went back in time: stopped */
  etch_arena track_recs;    /* records of held tracks */
  etch_vec held_trackv;     /* of rd_track *: held_tracks's bytes */
  rd_track **held_tracks;   /* tracks with held records, first hold first */
  size_t nheld_tracks;
  uint32_t nannounced;
  bool ran;
  bool stream;          /* etch_reader_open_stream: packets come from feed */
  uint32_t feed_seq;    /* the sequence id of a fed packet that has none */
  bool failed;
  /* etch_reader_set_strict: a malformed packet stops the read instead of
   * being left out and counted (malformed_packets). */
  bool strict;
  /* The first and the last packet left out: their messages (with their
   * offsets), and the last one's status. */
  int malformed_status;
  char malformed_first[320];
  char malformed_last[320];
  bool no_end_matching; /* deliver every SLICE_END (etch__reader_set_match_ends) */
  bool stop;            /* etch_reader_stop was called */
  struct rd_custom *custom; /* custom events (custom.c), or NULL */
  bool custom_oom;
  bool fast_off;        /* etch__reader_set_fast(r, false) was called */
  bool fast;            /* the fast path is on for this run */
  bool sub_all;         /* one subscription, category and name NULL */
  uint64_t gen;         /* packets through the generic decoder, from 1 */
  uint64_t fast_packets; /* packets it decoded */

  etch_vec subv; /* of rd_sub: subs's bytes */
  rd_sub *subs;
  size_t nsubs;
  etch_track_cb track_cb;
  void *track_user;
  /* etch__reader_set_idle_tracks: tracks without events at the end of a
   * read go there, every read, and stay undelivered. */
  etch_track_cb idle_cb;
  uint64_t nreads; /* reads (run, then each resume) */
  etch_sample_cb sample_cb; /* etch_reader_on_sample (samples.c) */
  void *sample_user;

  etch_strpool pool;
  etch_ptrmap seqs;
  rd_seq *last_seq;
  etch_vec seqv; /* of rd_seq *: seq_list's bytes */
  rd_seq **seq_list;
  size_t nseq;
  etch_ptrmap tracks;     /* the host's tracks by uuid (machine.c: the others') */
  rd_track global_track;
  /* Machines (machine.c): machines[0] the host; the machine of the packet
   * being decoded (its index), and the last raw id looked up. */
  etch_vec machinev; /* of rd_machine: machines's bytes */
  rd_machine *machines;
  uint32_t nmachines;
  uint32_t cur_machine;
  uint32_t last_machine;
  etch_vec track_listv;  /* of rd_track *: track_list's bytes */
  rd_track **track_list; /* in creation order */
  etch_arena track_arena;
  uint64_t track_gen; /* bumped when any descriptor changes */
  size_t ntracks;
  rd_clocks clocks;
  struct rd_stacks *stk; /* the call-stack tables (stacks.c), or NULL */

  /* Per-event scratch. */
  etch_arg *args;
  size_t nargs, cap_args;
  uint64_t *flows, *terms;
  size_t nflows, cap_flows, nterms, cap_terms;
  struct {
    uint64_t *a;
    size_t n, cap;
  } rep[RD_NREP]; /* repeated integer fields of one event */
  etch_arena scratch;
  char key[RD_MAX_KEY + 32];
  char flat[RD_MAX_KEY + 32];
  etch_vec catbuf;

  /* Decompression buffers, one per depth. */
  etch_vec inflate[RD_MAX_COMPRESSION_DEPTH + 1];
  void *zstd; /* ZSTD_DCtx */
  /* Held events (timestamp order): one index of rd_rec pointers per seq. */

  const char *empty; /* pooled "" */
  void *zs;          /* z_stream */
  bool err_formatted; /* the error message already names an offset */
  uint64_t cur_off;   /* offset of the file-level packet being decoded */

  int64_t latest_ts;
  bool have_bounds;
  int64_t first_ts, last_ts;
  uint64_t gidx;
  uint64_t nslices; /* slice begins and instants numbered (slice_index) */
  etch_reader_stats stats;
  bool trace_stats_seen;

  /* Progress on a terminal (etch_reader_set_progress). */
  bool progress_want;   /* asked for */
  bool allow_truncated; /* etch_reader_set_allow_truncated */
  bool recording;       /* the file's writer holds its lock: it grows */
  /* etch__reader_resume: the last read of the file went well, and the
   * file it read (to tell it from another one put in its place). */
  bool resumable;
  uint64_t file_dev, file_ino;
  bool progress_forced; /* shown even when not a terminal (tests) */
  int progress_fd;      /* 2 unless a test says otherwise */
  uint64_t progress_delay; /* ns before the first line */
  uint64_t progress_every; /* ns between lines */
  bool progress;        /* showing: asked for and the fd is a terminal */
  bool progress_shown;
  uint64_t progress_t0, progress_last;
  uint64_t progress_tick;

  /* Reads the records of a compressed packet (source.c's
   * etch__rd_decompress, set by reader_new). packet.c calls it through
   * this pointer: the packets inside a packet come from the source above
   * the decoders, read as the file's are. */
  int (*unpack)(etch_reader *r, const rd_src *src, const uint8_t *at,
                const uint8_t *data, size_t len, bool zstd);

  /* Sees the read instead of the subscribers (etch print), or NULL. */
  const struct rd_observer *obs;
};

/* ---- a string field, pooled -------------------------------------------------------- */

ETCH_INLINE const char *rd_pool_field(etch_reader *r, const etch__pb_field *f) {
  return etch__strpool_get(&r->pool, f->data, f->len);
}

/* ---- observing the read (etch print) ------------------------------------------------ */

/* A packet as the generic decoder read it. */
typedef struct rd_packet_view {
  const rd_src *src;
  uint64_t rec_off;   /* offset of its record (in the decompressed input) */
  const uint8_t *pkt; /* the TracePacket's bytes */
  size_t len;
  rd_seq *seq;        /* NULL without a sequence */
  uint32_t flags;     /* sequence_flags */
  bool has_ts;
  uint64_t raw_ts;    /* its timestamp as written, in clock_id */
  uint32_t clock_id;
  bool ts_ok;         /* ts: converted to the trace clock */
  int64_t ts;
  bool skipped;       /* not read: its sequence's state is lost */
} rd_packet_view;

/*
 * An observer sees the read instead of the subscribers: every packet (after
 * the state it depends on was applied, or when it is skipped), every event
 * resolved, and each step into (+1) and out of (-1) compressed packets, all
 * in file order with the fast path off; nothing is delivered. Set before
 * etch_reader_run (etch print's dump.c is one).
 */
typedef struct rd_observer {
  void (*packet)(etch_reader *r, const rd_packet_view *p, void *user);
  void (*event)(etch_reader *r, const etch_event *ev, void *user);
  void (*nest)(etch_reader *r, int step, void *user);
  void *user;
} rd_observer;

#endif /* ETCH_READER_INT_H */

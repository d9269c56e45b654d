/*
 * sdk.h - internals of the part instrumented code links: categories, tracks,
 * per-thread writers, sessions and the in-process backend.
 *
 * Data flow: a macro checks cat->enabled (a bitmask of session slots), then
 * calls an emitter with the mask. For each session in the mask the emitter
 * uses this thread's writer for that session (tls.w[slot]); the writer
 * encodes a TracePacket into its chunk of the session's trace buffer.
 * tls.w[slot] is never NULL: etch__null_writer, whose room check always
 * fails, stands for "none", so the fast path needs no other test. Freeing a
 * session bumps the slot's generation and zeroes the room of each of its
 * writers; the thread then takes the slow path, sees the new generation and
 * detaches its stale writer (or does so when it exits). A session's memory is freed when
 * its owner and every attached writer have let go (refcount), so a thread in
 * the middle of an event never writes into freed memory.
 */
#ifndef ETCH_SDK_H
#define ETCH_SDK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "base/containers.h"
#include "base/clock.h"
#include "buffer/buffer.h"
#include "buffer/tracefile.h"
#include "sdk/core/backend.h"
#include "etch/etch.h"
#include "pb/pb.h"
#include "proto/perfetto.h"

/* Sequence id of etch's own packets (clock snapshot, stats, drop reports). */
#define ETCH_SERVICE_SEQ_ID ETCH_TRACEFILE_SERVICE_SEQ
/* The sequence-scoped incremental clock writers stamp events with. */
#define ETCH_CLOCK_INCREMENTAL 64
/* Bytes the fast encoder may use for one packet (with its size prefix). */
#define ETCH_FAST_MAX 64
/* Site ids below this are tracked in a writer's inline bitset (fast path). */
#define ETCH_FAST_SITES 16384
/* Chunks one packet may span before it is abandoned. */
#define ETCH_MAX_HELD 64
/* Longest string arg or name written; longer ones are cut. */
#define ETCH_MAX_STRING (64u * 1024u)
/* Named tracks whose open slices a session counts: ETCH_TRACK_PAGES pages
 * of ETCH_TRACK_PAGE counters (a million tracks); ends on tracks beyond
 * are written unchecked. */
#define ETCH_TRACK_PAGE 1024u
#define ETCH_TRACK_PAGES 1024u

/* ---- names and etch's own instants (containers: base/containers.h) ---------- */

/* Event-name iids of dynamic names start here, above every call site's
 * (sites take 1, 2, ...): 4-byte varints. */
#define ETCH_DYN_IID_BASE (1u << 24)

/* An instant of etch's own (category "etch") written as the TrackEvent
 * field of the packet being built in `s`; on `track_uuid`'s track, or on
 * the sequence's default track when it is 0. Each arg is a debug
 * annotation: a string when `str` is set, else `value` as int or uint. */
typedef struct etch_note_arg {
  const char *name;
  const char *str;
  uint64_t value;
  bool is_uint;
} etch_note_arg;
void etch__put_etch_instant(etch__pb_stream *s, const char *name,
                            uint64_t track_uuid, const etch_note_arg *args,
                            uint32_t nargs);


/* ---- tracks -------------------------------------------------------------------- */

enum { ETCH_TRACK_KIND_NAMED = 1, ETCH_TRACK_KIND_COUNTER = 2,
       ETCH_TRACK_KIND_PROCESS = 3 };

/* Track uuids are 56-bit: 8 bytes as a varint instead of 10. */
#define ETCH_UUID_MASK 0x00ffffffffffffffull

struct etch_track {
  uint64_t key;  /* uuid = mix(process uuid ^ key): moves with a fork */
  uint64_t uuid; /* cached; recomputed in a fork child */
  uint8_t uuid_enc[16]; /* uuid as a varint, for the counter fast path */
  uint8_t uuid_len;
  const etch_track *parent; /* NULL = the process */
  char *name;
  char *unit_name;
  uint32_t id;  /* global, for per-writer "descriptor written" bits */
  uint8_t kind;
  uint8_t unit;
  etch_track *next; /* registry */
};

uint64_t etch__track_uuid(const etch_track *t);
uint64_t etch__process_uuid(void);
uint64_t etch__thread_uuid(int32_t tid);
/* The implicit counter track of a counter name (created on first use). */
const etch_track *etch__counter_track_for(const char *name);

/* ---- config and sessions ----------------------------------------------------- */

struct etch_config {
  char *categories;
  uint64_t buffer_kb;
  uint32_t fill;
  uint64_t duration_ms;
  uint64_t reset_interval_ms;
  char *output;
  uint32_t compression; /* 0 none, 1 deflate */
  char *interceptor;    /* NULL: packets go to the buffer */
  char *flight;         /* the ring in this file (buffer/flight.h) */
  uint64_t flight_keep; /* 1: the flight file stays after a normal end */
  uint64_t write_period_ms; /* >0: the output is written while recording */
  uint64_t sample_hz; /* >0: call stacks sampled (features/sample.c) */
  /* interceptor.KEY=VALUE options, in the order set */
  char **iopt_keys, **iopt_values;
  size_t n_iopts;
};

typedef struct etch_cat_filter {
  char **incl;
  uint32_t nincl;
  char **excl;
  uint32_t nexcl;
} etch_cat_filter;

int etch__filter_parse(etch_cat_filter *f, const char *spec);
void etch__filter_free(etch_cat_filter *f);
bool etch__filter_match(const etch_cat_filter *f, const etch_category *cat);
/* The names of the registered channels (categories tagged "channel"),
 * comma-separated, into buf (truncated to cap); "" when there are none. */
void etch__channel_names(char *buf, size_t cap);
/* How many registered categories and channels `pattern` (a name, a prefix
 * with '*', or a list) matches now; a negative status for a bad one. */
int etch__category_count(const char *pattern);

enum { ETCH_SESS_NEW = 0, ETCH_SESS_RUNNING = 1, ETCH_SESS_STOPPED = 2 };

typedef struct etch_writer etch_writer;

struct etch_session {
  uint32_t slot;
  uint32_t gen;
  uint32_t state;       /* atomic */
  etch_config cfg;
  etch_cat_filter filter;
  etch_backend *backend; /* where its chunks come from and go */
  pthread_mutex_t lock; /* writers list, refs, timer */
  pthread_cond_t cond;
  etch_writer *writers;
  uint32_t refs;
  bool owner_released;
  bool timer_started;
  bool output_written;  /* the output write has begun (once per session) */
  bool output_busy;     /* ... and has not finished: stop waits for it */
  int output_rc;        /* its result, and its message */
  char output_err[256];
  /* The output file as it was when the session was made, to notice
   * another process writing it meanwhile (etch__session_write_output). */
  bool out_existed;
  uint64_t out_dev, out_ino, out_mtime_ns;
  /* The environment session of the first copy of etch in the process: its
   * output takes in the traces of later copies (join.c). */
  bool join_owner;
  /* Called once the output write is over (rc, the path written, bytes);
   * set by the environment session. */
  void (*on_output)(etch_session *s, int rc, const char *path, size_t bytes);
  pthread_t timer;
  /* Slices open on each named track (by track id), in pages allocated on
   * first use: an end whose begin this session never recorded is not
   * written, as on thread tracks (etch__session_track_open/close). */
  uint32_t *track_open[ETCH_TRACK_PAGES];
  uint64_t reset_interval_ns;
  /* Important events (event.c): written once, then again after a ring's
   * worth of chunks (under `lock`). */
  bool imp_replayed;
  uint64_t imp_replay_at; /* chunks handed out then */
  uint64_t imp_replay_ns;
  uint64_t start_ns;
  uint64_t stop_ns;
  /* Writing its output while it records (write_period_ms; stream.c),
   * from its start on. */
  struct etch_stream *stream;
};

/* Global state shared by the sdk files. */
typedef struct etch_global {
  pthread_mutex_t lock; /* slots, categories, tracks */
  etch_session *slots[ETCH_MAX_SESSIONS];
  etch_category *cats;
  uint32_t next_cat_id;
  uint32_t next_site_id;
  uint32_t next_track_id;
  uint32_t next_seq_id;
  etch_track *tracks;
  etch_track process_track;
  uint64_t process_uuid;
  int32_t pid;
  char process_name[256];
  bool process_name_set;
  uint32_t names_gen; /* bumped when a process/thread name changes */
} etch_global;

extern ETCH_HIDDEN etch_global etch__g;
/* Generation of each session slot; never 0 while a session holds the slot,
 * so a thread's tls.gen of 0 means "no writer". */
extern ETCH_HIDDEN uint32_t etch__slot_gen[ETCH_MAX_SESSIONS];

/* A short lock (a value and its event; a shard of the live map): taken
 * inline when free, else spins a little, then yields (util.c). */
void etch__spin_wait(uint32_t *l);
ETCH_INLINE void etch__spin_lock(uint32_t *l) {
  if (ETCH_UNLIKELY(__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE)))
    etch__spin_wait(l);
}
ETCH_INLINE void etch__spin_unlock(uint32_t *l) {
  __atomic_store_n(l, 0, __ATOMIC_RELEASE);
}
/* `t`, or 1 ns after `*last` when it is not later; it becomes `*last`:
 * the times of one counter or track, each after the one before. */
ETCH_INLINE uint64_t etch__ordered_ts(uint64_t *last, uint64_t t) {
  if (t <= *last) t = *last + 1;
  *last = t;
  return t;
}

/* Custom events (event.c): after a writer's reset, writes the important
 * events when its session needs them. */
void etch__important_after_reset(etch_writer *w);
/* Whether a category is switched off process-wide (etch_channel_set), or,
 * for a channel, not switched on (category.c). */
enum { ETCH_CAT_SWITCH_DEFAULT = 0, ETCH_CAT_SWITCH_ON = 1,
       ETCH_CAT_SWITCH_OFF = 2 };

/* CPU sampling (sample.c): a session with sample_hz starts its sampler
 * once it runs, and stops it (the last samples and their symbols written)
 * while it still takes events. */
void etch__sample_start(etch_session *s);
void etch__sample_stop(etch_session *s);
/* Writes the thread's pending live-bytes counters (memory.c). */
void etch__mem_flush_thread(void);
/* Memory tracing's events (memory.c, track_event.c): an allocation's
 * pointer and size, a free's pointer, as args "ptr" and "size". */
/* `stack`: the allocation's call stack id (stack/stack.h), 0 for none. */
void etch__emit_alloc(etch_site *site, uintptr_t mask, const void *ptr,
                      uint64_t size, uint32_t stack);
void etch__emit_free(etch_site *site, uintptr_t mask, const void *ptr);

/* Interceptors (intercept.c, console.c). */
struct etch_interceptor;
int etch__interceptor_register_builtin(const struct etch_interceptor *ic);
void etch__console_register(void);
/* Whether a packet's sequence_flags clear the incremental state. */
bool etch__packet_clears_state(const uint8_t *d, size_t n);
typedef struct etch__intercept_seq etch__intercept_seq;
int etch__intercept_seq_for_test(void *instance, etch__intercept_seq **out);
void etch__intercept_seq_free_for_test(etch__intercept_seq *s);
/* The interceptor instance of an intercepting backend (tests). */
void *etch__intercept_instance(etch_backend *b);
/* Prints `n` packets of one sequence as the console interceptor would
 * (no colour) to `fd`: for tests and the fuzz target. */
int etch__console_feed(const uint8_t *const *packets, const size_t *lens,
                       size_t n, int fd);

/* Lazily sets up globals (clock, process uuid, fork handler). */
void etch__global_init(void);
/* Recomputes every category's bit for session slot `slot`. Global lock held. */
void etch__categories_apply(etch_session *s, bool enable);

/* Forgets the environment session in a fork child (session.c). */
void etch__session_atfork_child(void);

/* ---- join.c: another copy of libetch in this process ---- */

/* One copy's trace handed to the owner: packets without TraceStats, and
 * its buffer's stats (etch_tracefile_stat order). */
typedef struct etch__trace_part {
  uint8_t *data;
  size_t len;
  uint64_t stats[8];
} etch__trace_part;
/* The owner (the environment session of the first copy): publishes itself
 * for later copies. */
void etch__join_publish(bool compress);
bool etch__join_owner(void);
/* At the owner's write: every guest's trace so far (owned by join.c). */
int etch__join_gather(etch__trace_part **parts, size_t *n);
/* After it: the file written (NULL if none) and the owner's own stats. */
void etch__join_written(const char *path, const uint64_t *own_stats,
                        const uint32_t *seqs, size_t nseqs);
/* A later copy: joins the owner the environment names. 1 joined, 0 no
 * owner, -1 an owner it cannot join (said on stderr). `give` stops this
 * copy's session and hands its trace out (false: nothing, or given). */
int etch__join_as_guest(bool (*give)(uint8_t **data, size_t *len,
                                     uint64_t *stats));
bool etch__join_guest(void);
/* The guest stops: its trace to the owner. */
void etch__join_leave(void);
void etch__join_atfork_child(void);
/* True when an owner in this process is there to join. */
bool etch__join_host_present(void);
/* A copy that registers a category while another copy records ETCH_OUT
 * starts tracing into it (env.c). */
void etch__join_maybe_init(void);
/* Takes another copy's process uuid (tracks re-derived) and sequence ids
 * from `seq_base` on. */
void etch__adopt_process(uint64_t process_uuid, uint32_t seq_base);
/* A session's trace without TraceStats, and its stats. */
int etch__session_serialize_part(etch_session *s, uint8_t **data, size_t *len,
                                 uint64_t *stats);
/* In a fork child: frees a session of the parent's (its writers, config,
 * buffer) without stopping it, writing it or touching its locks and
 * threads (session.c). */
void etch__session_forget_inherited(etch_session *s);

/* Drops a reference; frees the session when none is left. */
void etch__session_release(etch_session *s);
/* A begin on named track `t` is about to be written: its counter, or NULL
 * when it cannot be had (no memory: the begin is dropped instead). */
uint32_t *etch__session_track_open(etch_session *s, const etch_track *t);
/* An end on named track `t`: whether a begin is open there (and if so,
 * closes it). Any thread. */
bool etch__session_track_close(etch_session *s, const etch_track *t);

/* ---- a session that writes its trace while it records (stream.c) ---- */

typedef struct etch_stream etch_stream;
struct etch_tracefile;
/* Opens the session's output, writes its clock snapshot and starts the
 * thread that writes what is committed (before the first event). */
int etch__stream_start(etch_session *s);
/* Everything committed before the call is in the file when it returns
 * (etch_session_flush); the error of a write that failed. */
int etch__stream_flush(etch_stream *st);
/* The thread stops (after the drain it is in); nothing more is written
 * until the end below. */
void etch__stream_halt(etch_stream *st);
/* The end (output.c), after etch__stream_halt: the trace file being
 * written, the last collect into it (*lost: places where data went
 * missing), then the file closed: its path, the bytes it holds, and the
 * errno of a write that failed (0: none). */
struct etch_tracefile *etch__stream_tracefile(etch_stream *st);
int etch__stream_last(etch_stream *st, uint64_t *lost);
int etch__stream_close(etch_stream *st, const char **path, size_t *kept);
void etch__stream_free(etch_stream *st);
/* In a fork child: frees the parent's stream without its thread or locks. */
void etch__stream_forget(etch_stream *st);

/* Serialises a session's buffer into a whole trace (file bytes). */
int etch__session_serialize(etch_session *s, uint8_t **data, size_t *len);
/* Writes the trace to `path`; *written (if not NULL) gets the path really
 * written (malloc'd: another name when another process wrote `path`
 * during the session) and *bytes its size. */
int etch__session_write_output(etch_session *s, const char *path,
                               char **written, size_t *bytes);
/*
 * The output path of a config as the session will use it: %p becomes the
 * pid, %% a percent sign, and a relative path is made absolute against the
 * current directory (so a later chdir() does not move the trace). The
 * directory must be writable. Returns a malloc'd path, or NULL with the
 * error set and its status in *status (ETCH_EIO, or ETCH_ENOMEM).
 */
char *etch__output_resolve(const char *spec, int *status);
/* `path` with ".PID" before its extension ("t.pftrace" -> "t.123.pftrace"). */
char *etch__output_per_pid(const char *path, long pid);
/* The flight file a `flight` option names, resolved (1: /dev/shm/etch-%p
 * .flight; a name without '/': in /dev/shm; %p: the pid; absolute). */
int etch__flight_path(const char *spec, char **out);
/* A config's copy into `dst` (its strings duplicated), and what a config
 * owns freed, not the config itself (config.c; a session keeps a copy). */
int etch__config_copy(etch_config *dst, const etch_config *src);
void etch__config_release(etch_config *c);

/* ---- writers -------------------------------------------------------------------- */

/* Dropped slice ends a writer keeps to write later (deeper ones stay
 * open: at most this many ends are lost in one stretch of drops). */
#define ETCH_MAX_PENDING_ENDS 32

/* What the slow path is recording, for drop_at: a slice's begin or end on
 * the thread track (etch__tls.drop_kind). */
enum { ETCH_DROP_OTHER = 0, ETCH_DROP_BEGIN = 1, ETCH_DROP_END = 2 };

typedef struct etch_held {
  etch_chunk *c;
  uint8_t *payload;
  uint8_t *seg;     /* first packet byte in this chunk */
  uint64_t seg_off; /* its logical offset in the packet */
  uint32_t used;    /* final committed length */
  uint32_t flags;
} etch_held;

struct etch_writer {
  /* Hot: the stream's cur/end is the chunk cursor used by the fast path. */
  etch__pb_stream st;
  etch_clock_anchor anchor;
  /*
   * The incremental clock: the last event's time as ns since the anchor.
   * An event at `ticks` is at rel = ticks - anchor.ticks, i.e. at
   * (rel * mult) >> 32 ns past the anchor, and its delta is that less
   * rel_ns: consecutive deltas add up to the exact conversion, with no
   * rounding carried from event to event. The clock's value in ns is
   * etch__writer_last_ns().
   */
  uint64_t rel_ns;
  /* The fast path takes events with rel < lim: before the next reset, and
   * small enough that rel * mult fits 64 bits. 0 sends every event to the
   * slow path. */
  uint64_t lim;
  uint64_t reset_deadline;   /* ns; always finite */
  uint64_t anchor_expiry;    /* ns; a fresh anchor is taken after it */
  uint64_t rel_cap;          /* the largest rel whose product fits */
  uint32_t depth;            /* open slices on the thread track */
  uint32_t chunk_flags;      /* flags of the current chunk */
  etch_chunk *chunk;
  /* chunk->used = cur - pub_base: the payload start less the flag bits. */
  uintptr_t pub_base;
  /* The fast path may write when cur < fast_end (room for ETCH_FAST_MAX). */
  uintptr_t fast_end;
  uint8_t *payload;
  /* Site iids interned on this sequence: ids < ETCH_FAST_SITES here, the
   * rest in seen_names_more. */
  uint64_t seen_fast[ETCH_FAST_SITES / 64 + 1]; /* last word: always 0 */
  etch_bitset seen_names_more;

  /* Cold. */
  etch_session *sess;
  uint32_t slot;
  uint32_t seq_id;
  uint32_t next_chunk_id;
  int32_t tid;
  etch_bitset seen_cats;
  etch_bitset seen_tracks;
  etch_strtab da_names;
  /* Dynamic event names (ETCH_NAME, ETCH_SCOPE_STR) interned on this
   * sequence, as event-name iids ETCH_DYN_IID_BASE + n. */
  etch_strtab dyn_names;
  /* Call stacks, their frames and mappings interned on this sequence (by
   * their process-wide ids, src/stack/stack.h). */
  etch_bitset seen_stacks, seen_frames, seen_maps;
  uint64_t dropped;          /* events lost (atomic, relaxed) */
  /* Of those, reported on the writer's own sequence (etch.dropped_events
   * when it has chunks again); changed under the session's lock. */
  uint64_t reported;
  uint64_t first_drop_ns;    /* the first unreported drop's time */
  uint64_t last_drop_ns;
  /* With no chunk: events before this time (writer clock, ns) are dropped
   * without asking the backend for a chunk again. */
  uint64_t retry_ns;
  uint64_t acq_at_reset;
  uint32_t names_gen;
  bool need_reset;
  bool started;              /* the sequence's first packet is written */
  bool drops_unreported;     /* next reset packet says previous_packet_dropped */
  bool in_packet;
  bool packet_failed;
  bool detached;             /* no thread writes with it (atomic) */
  etch_writer *next;         /* session list */
  /* The packet being written. */
  uint8_t *frag_hdr;         /* reserved 4-byte size of the current fragment */
  uint32_t pkt_start_used;   /* chunk used before the packet began */
  uint32_t nheld;
  etch_held held[ETCH_MAX_HELD];
  /* Arg-name iids by name pointer (names must not change, like event
   * names); an entry is valid while its gen equals reset_gen. */
  struct {
    const char *ptr;
    uint32_t iid;
    uint32_t gen;
  } da_cache[64];
  uint32_t reset_gen;
  /* A memory event's two arg keys ("ptr", "size"), both interned since the
   * last reset: valid while mem_gen is reset_gen + 1 (track_event.c,
   * mem_fast: one check a memory event instead of a cache lookup a key). */
  uint32_t mem_gen, mem_ptr_iid, mem_size_iid;
  etch_vec scratch;           /* the general path encodes packets here */
  /*
   * Slices on the thread track across lost events (track_event.c and
   * drop_at): a begin that was dropped leaves a phantom level whose end
   * is not written (it would close the enclosing slice); an end that was
   * dropped while its begin is in the trace is kept and written, with its
   * own time, at the next reset (or by the session's read), so the slice
   * does not run on to the end of the trace. While a phantom is open every
   * event takes the slow path, which keeps the levels in order.
   */
  uint64_t open_bits;        /* while phantoms: bit k = level k recorded */
  uint32_t open_n;           /* levels open (both kinds) while phantoms */
  uint32_t phantoms;         /* dropped begins whose end has not come */
  uint32_t npend;            /* dropped ends waiting to be written */
  uint64_t pend_ns[ETCH_MAX_PENDING_ENDS]; /* their times, innermost first */
  char thread_name[64];
};

ETCH_INLINE bool etch__writer_seen_name(const etch_writer *w, uint32_t id) {
  if (ETCH_LIKELY(id < ETCH_FAST_SITES))
    return (w->seen_fast[id >> 6] >> (id & 63)) & 1;
  return etch__bitset_has(&w->seen_names_more, id);
}

ETCH_INLINE void etch__writer_mark_name(etch_writer *w, uint32_t id) {
  if (id < ETCH_FAST_SITES)
    w->seen_fast[id >> 6] |= 1ull << (id & 63);
  else
    etch__bitset_set(&w->seen_names_more, id);
}

typedef struct etch_tls {
  /* By slot; w[ETCH_MAX_SESSIONS] is always the null writer, the fast
   * paths' entry for events that go to several sessions. */
  etch_writer *w[ETCH_MAX_SESSIONS + 1];
  uint32_t gen[ETCH_MAX_SESSIONS];
  bool dtor_registered;
  uint8_t busy; /* re-entrancy guard */
  bool in_intercept; /* inside an interceptor's packet callback */
  bool internal; /* etch's own thread (stream.c): what it allocates is not
                    the program's (memory tracing leaves it out) */
  uint8_t drop_kind; /* ETCH_DROP_*: what a drop now would lose */
  uint32_t callstack; /* the event being written has this stack (1..) */
  char thread_name[64];
  bool thread_name_set;
} etch_tls;

extern ETCH_HIDDEN __thread etch_tls etch__tls
    __attribute__((tls_model("initial-exec")));
/* "No writer": all zeros, so its room check (cur < fast_end) fails. */
extern ETCH_HIDDEN etch_writer etch__null_writer;

/* This thread's writer for `slot`, or NULL. */
ETCH_INLINE etch_writer *etch__tls_writer(uint32_t slot) {
  etch_writer *w = etch__tls.w[slot];
  return w == &etch__null_writer ? NULL : w;
}
ETCH_INLINE void etch__tls_forget(uint32_t slot) {
  etch__tls.w[slot] = &etch__null_writer;
  etch__tls.gen[slot] = 0;
}
/* An upper bound on writers' rel_cap, UINT64_MAX but in tests that make
 * the fast path's anchor move often (set before a session starts). */
extern ETCH_HIDDEN uint64_t etch__rel_cap_max;
/* Slot of a one-session mask, ETCH_MAX_SESSIONS for any other mask. */
extern ETCH_HIDDEN const uint8_t etch__mask_slot[1u << ETCH_MAX_SESSIONS];

/* The incremental clock's value: the last event's time in ns. */
ETCH_INLINE uint64_t etch__writer_last_ns(const etch_writer *w) {
  return w->anchor.ns + w->rel_ns;
}

/* ns since the anchor of a tick reading (0 for one behind the anchor). */
ETCH_INLINE uint64_t etch__writer_rel_ns(const etch_writer *w,
                                         uint64_t ticks) {
  return etch__ticks_to_ns(&w->anchor, ticks) - w->anchor.ns;
}

/* Moves the clock to an event at `ticks` (never backwards). */
ETCH_INLINE void etch__writer_advance(etch_writer *w, uint64_t ticks) {
  uint64_t rel = etch__writer_rel_ns(w, ticks);
  if (rel > w->rel_ns) w->rel_ns = rel;
}

/* The fast path's room check; fast_end is zeroed from other threads when
 * the writer's session is freed. */
ETCH_INLINE bool etch__writer_has_room(const etch_writer *w) {
  return (uintptr_t)w->st.cur < __atomic_load_n(&w->fast_end, __ATOMIC_RELAXED);
}

/*
 * Returns this thread's writer for `slot`, creating/replacing it as needed
 * and making sure it has a chunk with room for a fast packet and a fresh
 * incremental state. NULL when the event must be dropped (session gone,
 * buffer full: then the drop is counted).
 */
etch_writer *etch__writer_prepare(uint32_t slot, uint64_t ticks);
/* The same for an event with an explicit timestamp: its ticks are not
 * converted, so an expired clock anchor is left for the next event that
 * needs it (a writer of explicit times only would otherwise re-anchor on
 * every event: its clock never moves on). */
etch_writer *etch__writer_prepare_explicit(uint32_t slot, uint64_t ticks);
/* Records an event that could not be written. */
void etch__writer_drop(etch_writer *w, uint64_t ticks);
/* Resets incremental state: anchor, clock snapshot, descriptors. */
void etch__writer_reset(etch_writer *w, uint64_t ticks);
/* Called, when set, at the end of every writer reset (a sequence's setup):
 * tests make that setup take a known time with it. Slow path only. */
extern void (*etch__writer_reset_hook)(void);
/*
 * What features above the core (custom events' important-event replay,
 * memory tracing) do at the writer's and the session's moments, so that
 * the core calls nothing above it: registered once, when a feature is
 * first used; never removed. after_reset: a sequence started over (its incremental state written
 * again), on the writer's thread. thread_exit: a thread that wrote is
 * leaving, before its writers are let go. before_stop: a running session
 * is being stopped, on the stopping thread, while it still takes events.
 * Any may be NULL.
 */
typedef struct etch_feature_hooks {
  void (*after_reset)(etch_writer *w);
  void (*thread_exit)(void);
  void (*before_stop)(void);
  /* adds the feature's figures to a session's stats */
  void (*stats)(etch_session_stats *out);
} etch_feature_hooks;
/* At most ETCH_MAX_FEATURE_HOOKS; `h` must stay valid. */
#define ETCH_MAX_FEATURE_HOOKS 8
void etch__feature_hooks_add(const etch_feature_hooks *h);
/* Call every registered hook of that kind (session.c). */
void etch__feature_hooks_before_stop(void);
void etch__feature_hooks_stats(etch_session_stats *out);
/* Writes the descriptor of `t` (and parents) if not yet on this sequence. */
void etch__writer_ensure_track(etch_writer *w, const etch_track *t);

/* Writes `len` bytes as one whole packet (crossing chunks if needed).
 * False when it could not be written (then the loss is recorded). */
bool etch__writer_put_packet(etch_writer *w, const uint8_t *data, size_t len);

/* Packet framing for the general encoder. */
bool etch__packet_begin(etch_writer *w);
void etch__packet_end(etch_writer *w);

/* Writes the drop reports of detached writers that could not write them
 * when their thread left (no chunk to be had then). Not on a writer's
 * thread; not under the session's lock. */
bool etch__session_report_orphans(etch_session *s);
/* A slice end on the thread track that is about to be written: true when
 * it is the end of a begin that was dropped (then it must not be). */
bool etch__writer_end_is_phantom(etch_writer *w);
/* An event not written on purpose (the end of a dropped begin): counted
 * with the dropped ones, so that what was emitted adds up. */
void etch__writer_drop_unwritten(etch_writer *w, uint64_t ticks);
/* A slice begin (+1) or end (-1) on the thread track was written. */
void etch__writer_level_written(etch_writer *w, int delta);
/* A kept end's packet fields: SLICE_END at `ns` (BOOTTIME) on the track
 * (0: the sequence's default track). */
void etch__pending_end_fields(etch__pb_stream *s, uint64_t ns,
                              uint64_t track_uuid);
/* Reports the drops of this thread's writers (at exit, where its TLS
 * destructor does not run): true when none is left unreported. */
bool etch__tls_report_drops(void);

/* Detaches a writer from its thread: completes its chunk, drops its ref. */
/* A session whose chunks go to backend `b` (the session's from now on:
 * destroyed with it, or at once when this fails). */
int etch__session_new_with_backend(const etch_config *cfg, etch_backend *b,
                                   etch_session **out);
void etch__writer_detach(etch_writer *w);
void etch__writer_free(etch_writer *w);

#endif /* ETCH_SDK_H */

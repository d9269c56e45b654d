/*
 * etch/reader.h - read any Perfetto track-event trace from C.
 *
 * The reader resolves everything a track-event trace uses (packet sequences,
 * incremental state, interned data, track descriptors, packet defaults,
 * clock snapshots, compressed packets) and hands out resolved events:
 * timestamp in the trace clock, process, thread, track, category, name and
 * args by name and type.
 *
 *   etch_reader *r;
 *   etch_reader_open_file(&r, "app.pftrace");
 *   etch_reader_on(r, "render", NULL, on_render_event, &my_state);
 *   if (etch_reader_run(r) != ETCH_OK) fprintf(stderr, "%s\n", etch_last_error());
 *   etch_reader_close(r);
 *
 * Analyzers subscribe by category and/or event name (NULL matches any), as
 * Unreal Insights' analyzers subscribe by logger and event name. Every string
 * and pointer inside a callback argument is valid only during the callback.
 *
 * Link with libetch_reader (pkg-config etch-reader).
 */
#ifndef ETCH_READER_H
#define ETCH_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etch/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct etch_reader etch_reader;

typedef enum etch_track_kind {
  ETCH_TRACK_GLOBAL = 0,  /* uuid 0 / default track */
  ETCH_TRACK_PROCESS = 1, /* TrackDescriptor with a ProcessDescriptor */
  ETCH_TRACK_THREAD = 2,  /* TrackDescriptor with a ThreadDescriptor */
  ETCH_TRACK_NAMED = 3,   /* any other TrackDescriptor */
  ETCH_TRACK_COUNTER = 4  /* TrackDescriptor with a CounterDescriptor */
} etch_track_kind;

typedef struct etch_track_info {
  uint64_t uuid;
  uint64_t parent_uuid; /* 0 = none */
  etch_track_kind kind;
  const char *name;     /* track name, or process/thread name; may be "" */
  int32_t pid;          /* 0 when unknown (resolved through parents) */
  int32_t tid;          /* 0 unless a thread track */
  /* Counter tracks only. */
  int32_t counter_unit;        /* CounterDescriptor.Unit */
  const char *counter_unit_name;
  int64_t unit_multiplier;     /* 0 or 1 = none */
  bool is_incremental;
  /* Process tracks only: ProcessDescriptor.cmdline, the arguments joined by
   * single spaces; "" when the descriptor has none. */
  const char *cmdline;
  /* The machine whose packets described the track (etch_reader_machine):
   * 0 for the host, the machine that recorded the trace. Tracks, processes
   * and threads of two machines never merge, whatever their uuids and
   * pids. */
  uint32_t machine_id;
} etch_track_info;

typedef enum etch_value_type {
  ETCH_VALUE_NULL = 0,
  ETCH_VALUE_BOOL = 1,
  ETCH_VALUE_INT = 2,
  ETCH_VALUE_UINT = 3,
  ETCH_VALUE_DOUBLE = 4,
  ETCH_VALUE_STRING = 5,
  ETCH_VALUE_POINTER = 6,
  ETCH_VALUE_JSON = 7 /* legacy_json_value, as a string */
} etch_value_type;

/*
 * One flattened debug-annotation arg, keyed as trace_processor keys them:
 * flat_key "debug.request.ids", key "debug.request.ids[2]".
 */
typedef struct etch_arg {
  const char *flat_key;
  const char *key;
  etch_value_type type;
  union {
    bool b;
    int64_t i;
    uint64_t u; /* also POINTER */
    double d;
    const char *s; /* STRING and JSON */
  } v;
} etch_arg;

/* TrackEvent.Type (common.h). */
typedef enum etch_event_type {
  ETCH_EVENT_SLICE_BEGIN = ETCH_TRACK_EVENT_SLICE_BEGIN,
  ETCH_EVENT_SLICE_END = ETCH_TRACK_EVENT_SLICE_END,
  ETCH_EVENT_INSTANT = ETCH_TRACK_EVENT_INSTANT,
  ETCH_EVENT_COUNTER = ETCH_TRACK_EVENT_COUNTER
} etch_event_type;

/*
 * One resolved event. SLICE_END events are matched to SLICE_BEGINs per track
 * in delivery order (timestamp order by default): an end with no open slice
 * on its track is not delivered and counts in misplaced_end_event. Slices
 * still open at the end of the trace are not reported specially.
 */
typedef struct etch_event {
  etch_event_type type;
  int64_t ts;                   /* ns in the trace clock (BOOTTIME default) */
  uint32_t sequence_id;         /* trusted_packet_sequence_id */
  const etch_track_info *track; /* never NULL */
  int32_t pid;                  /* resolved via the track; 0 if unknown */
  int32_t tid;                  /* of the nearest thread track among the
                                   track and its parents; 0 if none */
  const char *category;         /* categories joined by ","; "" if none */
  const char *name;             /* "" for SLICE_END without a name */
  /* COUNTER: the value after the counter track's unit_multiplier and, for
   * incremental counter tracks, accumulation. */
  bool counter_is_double;
  int64_t counter_int;
  double counter_double;
  /* flows */
  const uint64_t *flow_ids;
  size_t flow_ids_count;
  const uint64_t *terminating_flow_ids;
  size_t terminating_flow_ids_count;
  /* args, flattened */
  const etch_arg *args;
  size_t args_count;
  /* offset of the TracePacket in the (decompressed) input, for messages */
  uint64_t packet_offset;
  /* The first event of its sequence after packets of that sequence were
   * lost (previous_packet_dropped, or packets skipped because the
   * sequence's incremental state was lost): what came between this event
   * and the sequence's previous one is incomplete. */
  bool after_loss;
  /* The event's place in the trace: events are numbered from 0 as they are
   * decoded (file order). Delivered in timestamp order, events of equal
   * timestamps come in this order. */
  uint64_t index;
  /* The event's call stack (TrackEvent.callstack_iid: an allocation's, in
   * a trace of etch record --malloc): the id of its innermost frame's
   * callsite in etch_reader_stacks; -1 when it has none. */
  int64_t callsite_id;
  /* SLICE_BEGIN and INSTANT: the event's place among the trace's slice
   * begins and instants, numbered from 0 as they are decoded (file order),
   * whatever the delivery order; 0 for other events. A consumer that makes
   * one row per slice can number its rows with it: the same numbers for
   * the same bytes, read at once or resumed. */
  uint64_t slice_index;
} etch_event;

/*
 * Data-loss and import statistics, named after trace_processor's stats.
 * packets counts every TracePacket, including compressed_packets wrappers
 * and the packets inside them; track_events counts the TrackEvents decoded
 * (not those of skipped packets). The trace_stats_* fields come from the
 * last TraceStats packet (summed over its buffers).
 */
typedef struct etch_reader_stats {
  uint64_t bytes;
  uint64_t packets;
  uint64_t track_events;
  uint64_t sequences;
  uint64_t compressed_packets;        /* compressed_packets + zstd packets */
  uint64_t previous_packet_dropped;   /* packets carrying the flag */
  uint64_t packet_skipped_seq_needs_incremental_state_invalid;
  uint64_t interned_data_missing;     /* iid with no definition */
  uint64_t misplaced_end_event;       /* SLICE_END with no open slice */
  uint64_t unknown_track;             /* track_uuid with no descriptor */
  uint64_t clock_conversion_failed;
  uint64_t trace_stats_chunks_discarded;     /* from TraceStats packets */
  uint64_t trace_stats_chunks_overwritten;
  uint64_t trace_stats_writer_packet_loss;
  /* Fields below were added with the reader implementation. */
  uint64_t packet_sequence_id_missing; /* NEEDS_INCREMENTAL_STATE on a packet
                                          without a sequence id (skipped) */
  uint64_t etch_dropped_events;        /* sum of the "count" args of etch's
                                          etch.dropped_events instants */
  /* With etch_reader_set_allow_truncated: where the trace was cut short
   * (the offset of its incomplete last packet) and the bytes lost there;
   * both 0 for a complete trace. */
  uint64_t truncated_offset;
  uint64_t truncated_bytes;
  /* Process and thread descriptors that claimed another pid than the one
   * the tracing service stamped on their packet (trusted_pid): the
   * service's word is taken. */
  uint64_t descriptor_pid_untrusted;
  /* Packets left out because they do not decode as the reader reads them
   * (a field with the wrong wire type, bytes cut short, annotations nested
   * too deep...): each is skipped whole, nothing of it applied, and the
   * rest of the trace is read (unless etch_reader_set_strict). */
  uint64_t malformed_packets;
  /* Track descriptors naming a parent_uuid that no descriptor describes:
   * the track is read as a root (its pid and tid from itself alone). */
  uint64_t unknown_parent_track;
  /* From the last TraceStats packet: producers' packets the tracing
   * service left out (invalid_packets: they would not read, or set fields
   * only the service writes). */
  uint64_t trace_stats_invalid_packets;
  /* 1 when the file was still being recorded as it was opened (its writer
   * held the lock a trace's writer holds: docs/reader.md): it was read up
   * to its last whole packet, `bytes` is where that packet ends (where
   * a later read of the grown file goes on), and what follows it is no
   * loss (truncated_* stay 0). */
  uint64_t recording;
  /* From the last TraceStats packet (summed over its buffers): patches
   * the service could not apply (the chunk was gone, or the patch lay
   * outside it: a packet's size or a message's length left unwritten),
   * and chunks it refused for breaking the shared memory ABI. */
  uint64_t trace_stats_patches_failed;
  uint64_t trace_stats_abi_violations;
} etch_reader_stats;

typedef void (*etch_event_cb)(const etch_event *ev, void *user);
typedef void (*etch_track_cb)(const etch_track_info *track, void *user);

typedef enum etch_reader_order {
  /* Events delivered in timestamp order (stable; memory grows with the
   * number of events held for sorting). The default. */
  ETCH_ORDER_TIMESTAMP = 0,
  /* Events delivered as decoded (per sequence in order; streaming). */
  ETCH_ORDER_FILE = 1
} etch_reader_order;

/* Opens a trace file. On error returns a negative status; the message from
 * etch_last_error() names the file and the problem. A file still being
 * recorded (its writer holds its lock) is read as far as it is written,
 * up to its last whole packet (stats: recording). */
ETCH_API int etch_reader_open_file(etch_reader **out, const char *path);
/* Reads a trace held in memory; the bytes must outlive the reader. */
ETCH_API int etch_reader_open_memory(etch_reader **out, const void *data,
                                     size_t len);
ETCH_API void etch_reader_close(etch_reader *r);

ETCH_API int etch_reader_set_order(etch_reader *r, etch_reader_order order);

/*
 * With `on` non-zero, etch_reader_run shows its progress on stderr when
 * stderr is a terminal and the read has taken more than a second:
 * "etch: reading  42.0%", then "etch: delivering  80.0%" in timestamp order,
 * refreshed five times a second on one line that is erased at the end. Off
 * by default: the reader prints nothing unless asked.
 */
ETCH_API int etch_reader_set_progress(etch_reader *r, int on);
/* A trace cut short (a last packet longer than what is left of the file, or
 * its length itself cut): with `on`, read everything before the cut and
 * report it in truncated_offset / truncated_bytes instead of failing with
 * ETCH_ETRUNC (the default). Corruption before the end is an error either
 * way. */
ETCH_API int etch_reader_set_allow_truncated(etch_reader *r, int on);
/* A packet that does not decode (a known field with the wrong wire type,
 * a nested message cut short, debug annotations nested deeper than 64...):
 * by default it is left out whole - nothing of it applied, not its
 * interned data, descriptors or event - counted in malformed_packets, and
 * the rest of its sequence and every other sequence are read, as
 * trace_processor goes on past such a packet. With `on`, the read stops
 * there with an error naming the packet's offset (ETCH_EFORMAT). Broken
 * framing (a packet record longer than the file) stops the read either
 * way. */
ETCH_API int etch_reader_set_strict(etch_reader *r, int on);

/*
 * Subscribes `cb` to events whose category (any of an event's categories)
 * equals `category` and whose name equals `name`; NULL matches anything.
 * Several subscriptions may match one event: each is called, in the order
 * they were registered.
 */
ETCH_API int etch_reader_on(etch_reader *r, const char *category,
                            const char *name, etch_event_cb cb, void *user);
/*
 * Called once per track, before the first event on it is delivered; a
 * track's parents are announced before it. Described tracks that carry no
 * event are announced after the last event.
 */
ETCH_API int etch_reader_on_track(etch_reader *r, etch_track_cb cb, void *user);

/*
 * Reads the whole trace and delivers events. Returns ETCH_OK, or a negative
 * status with etch_last_error() naming the byte offset of the bad input,
 * e.g. "app.pftrace: offset 1234: length field larger than the file".
 * Events decoded before the error have been delivered.
 */
ETCH_API int etch_reader_run(etch_reader *r);

ETCH_API void etch_reader_get_stats(const etch_reader *r,
                                    etch_reader_stats *out);

/*
 * A reader fed one packet at a time instead of a file: for an interceptor
 * that wants decoded events (etch/interceptor.h), or packets arriving over
 * a connection. Each packet's events reach the subscribers during
 * etch_reader_feed, in the order fed (ETCH_ORDER_FILE); slice ends are
 * matched per track as in a file, and custom events are delivered at once
 * (serial order is not restored). Not thread-safe: feed it from one thread
 * at a time, e.g. under the interceptor's instance lock:
 *
 *   static void on_packet(const etch_intercepted *p) {
 *     ETCH_INTERCEPTOR_LOCKED(p, my_instance, in);   // in->reader: a stream
 *     etch_reader_feed(in->reader, p->data, p->size, p->sequence_id);
 *   }
 *
 * etch_reader_run on a stream is ETCH_ESTATE; subscriptions are made before
 * the first feed.
 */
ETCH_API int etch_reader_open_stream(etch_reader **out);
/*
 * Decodes one serialized TracePacket (no framing). `sequence_id` stands for
 * trusted_packet_sequence_id when the packet has none (an intercepted
 * packet's etch_intercepted.sequence_id). A packet that does not decode is
 * refused with a message naming its offset in the stream; the reader stays
 * usable and the next packet is read.
 */
ETCH_API int etch_reader_feed(etch_reader *r, const void *packet, size_t len,
                              uint32_t sequence_id);

/*
 * The machines of a trace recorded across several (Perfetto's multi-machine
 * tracing: a relay forwards a machine's producers to the host's service,
 * which stamps TracePacket.machine_id on their packets). Machine 0 is the
 * host, the packets without a machine_id; the others are numbered from 1 in
 * the order their first packet comes, as trace_processor's `machine` table
 * numbers them. A relayed machine's timestamps are put on the host's
 * timeline with the clock offsets the service measured (RemoteClockSync).
 * What the trace says of each comes from its SystemInfo packet; strings
 * are NULL and numbers 0 when it says nothing. Valid until
 * etch_reader_close; complete once etch_reader_run returned.
 */
typedef struct etch_machine_info {
  uint32_t id;        /* 0: the host */
  int64_t raw_id;     /* TracePacket.machine_id (0 for the host) */
  const char *name;   /* NULL: traces of Perfetto v58 name no machine */
  const char *sysname, *release, *version, *arch; /* SystemInfo.utsname */
  int64_t num_cpus;
  int64_t system_ram_bytes;
  const char *android_build_fingerprint;
  int64_t android_sdk_version;
  /* The offset subtracted from the machine's own timestamps (ns, its trace
   * clock minus the host's), when has_clock_offset. */
  bool has_clock_offset;
  int64_t clock_offset;
} etch_machine_info;

/* How many machines the trace has (1 or more; the host always). */
ETCH_API uint32_t etch_reader_machine_count(const etch_reader *r);
/* Machine `id` (0 .. count - 1); ETCH_ENOTFOUND past the last. */
ETCH_API int etch_reader_machine(const etch_reader *r, uint32_t id,
                                 etch_machine_info *out);

/* Trace duration as seen so far: first and last delivered event
 * timestamps. ETCH_ENOTFOUND (and zeros) when no event was delivered. */
ETCH_API int etch_reader_time_bounds(const etch_reader *r, int64_t *first,
                                     int64_t *last);

/* ==== call stacks ======================================================== */

/*
 * The call stacks a trace interned (InternedData mappings, frames and
 * callstacks, as etch's memory tracing writes them) and the names its
 * ModuleSymbols packets give their frames, in tables shaped like
 * trace_processor's stack_profile_mapping, stack_profile_frame,
 * stack_profile_callsite and stack_profile_symbol: the same mapping, frame
 * or stack interned by several sequences is one row. Ids are indexes from 0.
 */
typedef struct etch_stack_mapping {
  const char *build_id; /* lowercase hex; "" when none */
  const char *name;     /* the object's path; "" when none */
  uint64_t start, end, exact_offset, start_offset, load_bias;
} etch_stack_mapping;

typedef struct etch_stack_frame {
  const char *name; /* the function name interned with the frame; "" none */
  uint32_t mapping; /* id in mappings */
  uint64_t rel_pc;  /* the address in the object, as symbols are keyed */
  /* Its names from ModuleSymbols (matched by the mapping's build id, else
   * its path, and rel_pc): symbols[symbol .. symbol + nsymbols), the
   * function first and the functions inlined in it after; 0 when none. */
  uint32_t symbol, nsymbols;
} etch_stack_frame;

typedef struct etch_stack_symbol {
  const char *name;        /* function */
  const char *source_file; /* "" when unknown */
  uint32_t line_number;    /* 0 when unknown */
} etch_stack_symbol;

typedef struct etch_stack_callsite {
  int64_t parent_id; /* the caller's callsite; -1 for an outermost frame */
  uint32_t depth;    /* 0 for an outermost frame */
  uint32_t frame_id;
} etch_stack_callsite;

typedef struct etch_stacks {
  const etch_stack_mapping *mappings;
  size_t nmappings;
  const etch_stack_frame *frames;
  size_t nframes;
  const etch_stack_callsite *callsites;
  size_t ncallsites;
  const etch_stack_symbol *symbols;
  size_t nsymbols;
} etch_stacks;

/* The call-stack tables read so far (whole after etch_reader_run: the
 * symbols come at the end of a trace). Owned by the reader, valid until
 * it reads on or is closed. ETCH_OK, or ETCH_ENOMEM. */
ETCH_API int etch_reader_stacks(etch_reader *r, etch_stacks *out);

/* ==== CPU samples ========================================================= */

/*
 * A CPU sample (TracePacket.perf_sample, as etch record --sample writes
 * it and Perfetto's traced_perf does): the thread the CPU was running, at
 * the packet's timestamp, and its call stack. Samples are not track
 * events: they are delivered to the etch_reader_on_sample callback as
 * their packets are decoded (file order, in order within a sequence),
 * not through etch_reader_on, and whatever the reader's order.
 */
typedef enum etch_cpu_mode {
  ETCH_CPU_MODE_UNKNOWN = 0, /* Profiling.CpuMode's values */
  ETCH_CPU_MODE_KERNEL = 1,
  ETCH_CPU_MODE_USER = 2,
  ETCH_CPU_MODE_HYPERVISOR = 3,
  ETCH_CPU_MODE_GUEST_KERNEL = 4,
  ETCH_CPU_MODE_GUEST_USER = 5
} etch_cpu_mode;

typedef struct etch_sample {
  int64_t ts;            /* ns in the trace clock, as events' */
  uint32_t sequence_id;  /* trusted_packet_sequence_id */
  int32_t pid, tid;      /* the sampled process and thread; 0 if unknown */
  uint32_t cpu;          /* the CPU it ran on */
  bool has_cpu;          /* the packet named it */
  uint32_t cpu_mode;     /* etch_cpu_mode (an unknown value as written) */
  /* The stack's innermost frame's callsite in etch_reader_stacks; -1 when
   * the sample has none or its sequence does not define it (then counted
   * in interned_data_missing). */
  int64_t callsite_id;
  uint64_t packet_offset; /* of the TracePacket in the (decompressed) input */
} etch_sample;

typedef void (*etch_sample_cb)(const etch_sample *s, void *user);

/* Calls `cb` for each CPU sample of the trace (NULL: none). Before
 * etch_reader_run; ETCH_ESTATE after. */
ETCH_API int etch_reader_on_sample(etch_reader *r, etch_sample_cb cb,
                                   void *user);

/* ==== custom events (etch/event.h) ======================================= */

/*
 * Custom events carry their schema in the trace, so a reader that knows
 * nothing about them decodes every field by name and type. An analyzer
 * subscribes by logger and event name (NULL matches any) with a route id of
 * its choice, and reads fields with the getters below:
 *
 *   static void on_packet(const etch_custom_event *ev, void *user) {
 *     uint32_t size = etch_event_get_u32(ev, "size");
 *     const char *peer = etch_event_get_str(ev, "peer", NULL);
 *     ...
 *     if (found) etch_reader_stop(ev->reader);   // enough read
 *   }
 *   etch_reader_route(r, ROUTE_PACKET, "Net", "Packet", on_packet, &state);
 *
 * Events of a type declared with ETCH_EVENT_SERIAL are delivered in the
 * order of their serials (process by process), even across threads whose
 * timestamps disagree; an important event is delivered once per process
 * and id, also from a trace that holds several copies (one a stock traced
 * recorded: etch's writers keep one, etch/event.h).
 */
typedef struct etch_custom_field {
  const char *name;
  uint32_t type; /* etch_field_type (etch/event.h): the declared type */
  bool set;      /* false: the event left it unset (the values are 0) */
  union {
    int64_t i; /* INT8 .. INT64 */
    uint64_t u; /* UINT8 .. UINT64 */
    double d;  /* FLOAT, DOUBLE */
    bool b;    /* BOOL */
  } v;
  const char *str; /* STR, WSTR, U16STR: UTF-8, NUL-terminated */
  size_t len;      /* its bytes */
  const void *array; /* arrays: `count` elements of the element type */
  size_t count;
} etch_custom_field;

typedef struct etch_custom_event {
  uint32_t route;        /* the id given to etch_reader_route */
  etch_reader *reader;   /* for etch_reader_stop */
  const char *logger, *event;
  const char *name;      /* "Logger.Event" */
  const char *category;  /* its channels, joined by "," */
  etch_event_type type;  /* INSTANT, or SLICE_BEGIN for a scoped event */
  int64_t ts;
  int32_t pid;
  int32_t tid;           /* the OS thread id */
  uint64_t thread_id;    /* etch's id of the thread, unique in the trace
                            (its track's uuid) */
  uint64_t track_uuid;
  bool has_serial;
  uint64_t serial;
  uint64_t important_id; /* 0 unless its type is important */
  size_t nfields;        /* every field of the schema, in declared order */
  const etch_custom_field *fields;
} etch_custom_event;

typedef void (*etch_custom_cb)(const etch_custom_event *ev, void *user);

/* Subscribes `cb` to custom events of `logger` and `event` (NULL: any). */
ETCH_API int etch_reader_route(etch_reader *r, uint32_t route_id,
                               const char *logger, const char *event,
                               etch_custom_cb cb, void *user);
/* From any callback: stop reading; etch_reader_run then returns ETCH_OK
 * with what was delivered so far. */
ETCH_API void etch_reader_stop(etch_reader *r);

/* A field by name, NULL when the schema has none. */
ETCH_API const etch_custom_field *etch_event_get_field(const etch_custom_event *ev,
                                                   const char *name);
/* Whether the event set that field. */
ETCH_API bool etch_event_has(const etch_custom_event *ev, const char *name);
/* A field's value converted to the type asked for (0 when unset, absent or
 * not a number); a float or double field read as an integer is truncated. */
ETCH_API int64_t etch_event_get_i64(const etch_custom_event *ev,
                                    const char *name);
ETCH_API uint64_t etch_event_get_u64(const etch_custom_event *ev,
                                     const char *name);
ETCH_API int32_t etch_event_get_i32(const etch_custom_event *ev,
                                    const char *name);
ETCH_API uint32_t etch_event_get_u32(const etch_custom_event *ev,
                                     const char *name);
ETCH_API int16_t etch_event_get_i16(const etch_custom_event *ev,
                                    const char *name);
ETCH_API uint16_t etch_event_get_u16(const etch_custom_event *ev,
                                     const char *name);
ETCH_API int8_t etch_event_get_i8(const etch_custom_event *ev,
                                  const char *name);
ETCH_API uint8_t etch_event_get_u8(const etch_custom_event *ev,
                                   const char *name);
ETCH_API double etch_event_get_f64(const etch_custom_event *ev,
                                   const char *name);
ETCH_API float etch_event_get_f32(const etch_custom_event *ev,
                                  const char *name);
ETCH_API bool etch_event_get_bool(const etch_custom_event *ev,
                                  const char *name);
/* A string field as UTF-8 (NULL when unset); its length in *len if asked. */
ETCH_API const char *etch_event_get_str(const etch_custom_event *ev,
                                        const char *name, size_t *len);
/* An array field: its elements (of its declared element type) and count;
 * NULL and 0 when unset or not an array. */
ETCH_API const void *etch_event_get_array(const etch_custom_event *ev,
                                          const char *name, size_t *count);

#ifdef __cplusplus
}
#endif

#endif /* ETCH_READER_H */

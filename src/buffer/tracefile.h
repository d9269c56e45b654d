/*
 * tracefile.h - the trace-file writer both backends use: committed packets
 * (from etch__buffer_read or a service's trace buffer) in, a Perfetto trace
 * file out, with sequence ids stamped, undecodable leftovers of lost data
 * left out, optional deflate, and the service's own packets (clock
 * snapshot, TraceStats) on a sequence of their own.
 *
 *   etch_tracefile t;
 *   etch__tracefile_init(&t, compress);
 *   etch__tracefile_put_clock_snapshot(&t);
 *   etch__buffer_read(buf, etch__tracefile_on_packet, &t, &lost);
 *   ...build a packet in t.tmp.s, then etch__tracefile_put_service(&t)...
 *   etch__tracefile_put_stats(&t, &stats, chunk_size, writers_with_loss);
 *   etch__tracefile_finish(&t, &data, &len);   (frees t, also on error)
 *
 * With t.sink set (etch__tracefile_init, then t.sink = &sink), the file's
 * bytes go into the sink as they are made, ETCH_TRACEFILE_FLUSH at a time:
 * the trace is never whole in memory. finish then gives no data, the
 * trace's length in *len, and ETCH_EIO (no message: the caller says which
 * file) when the sink failed; the sink says how much the file holds.
 */
#ifndef ETCH_BUFFER_TRACEFILE_H
#define ETCH_BUFFER_TRACEFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/containers.h"
#include "base/map.h"
#include "buffer/buffer.h"
#include "pb/pb.h"

/* The trusted_packet_sequence_id of the writer's own packets. */
#define ETCH_TRACEFILE_SERVICE_SEQ 1
/* Uncompressed bytes per compressed_packets batch at most. */
#define ETCH_TRACEFILE_BATCH (256u * 1024u)
#define ETCH_TRACEFILE_SLICE_MAX (64u * 1024u)
/* Bytes made before they go into a sink. */
#define ETCH_TRACEFILE_FLUSH (1u << 20)

typedef struct etch_sink etch_sink;

/* Who wrote sequence `seq`, for the service's trusted_uid and trusted_pid
 * (false: nothing to add); *same_pidns says the writer sees pids as the
 * service does (its process and thread descriptors can be checked). */
typedef bool (*etch_tracefile_trust_fn)(void *ctx, uint32_t seq, int32_t *pid,
                                        int32_t *uid, bool *same_pidns);
/* A packet of sequence `seq` left out (`validate`), and why: "offset N:
 * ..." within the packet, or the field only the service writes. */
typedef void (*etch_tracefile_invalid_fn)(void *ctx, uint32_t seq,
                                          const char *why);

/*
 * What a sequence lost: track events left out of a read (undecodable: its
 * incremental state went with lost chunks) or lost in a buffer (chunks
 * discarded or overwritten unread). A loss list is an etch_vec of them,
 * one per sequence in the order they first lost any, kept by
 * etch__loss_add: a read's list of what it left out, the service's of
 * what a session lost over all its reads and buffers.
 */
typedef struct etch_loss {
  uint32_t seq;
  /* Slices on the sequence's default track left open where its data ends
   * (a discard buffer's; 0: none or unknown). */
  uint32_t open_depth;
  uint64_t events;
  uint64_t first_ns; /* BOOTTIME of the first loss; 0: unknown */
} etch_loss;

/* Adds *l to the list: to the sequence's entry (its events added, the
 * earlier time, the deeper open depth), or as a new one at the end.
 * ETCH_ENOMEM (error set) when it cannot grow. */
int etch__loss_add(etch_vec *list, const etch_loss *l);

typedef struct etch_tracefile {
  etch_tracefile_trust_fn trust; /* NULL in process */
  void *trust_ctx;
  /* The machine that wrote sequence `seq` (with trust_ctx), stamped as
   * TracePacket.machine_id on its packets; 0 (the host) stamps nothing.
   * NULL: every sequence is the host's. */
  uint32_t (*machine)(void *ctx, uint32_t seq);
  /* A service's read: a producer's packet that etch's reader could not
   * read (proto/check.h: every field the reader decodes, at every depth),
   * or that sets a field only the service writes (trusted uid, pid and
   * sequence id, compressed packets, trace config and stats, sync
   * markers), or whose process or thread descriptor claims another pid
   * than the producer's (when it sees pids as the service does), is left
   * out, counted in `invalid_packets` and handed to `on_invalid` (with
   * trust_ctx) when set: a producer's bytes cannot make the trace
   * unreadable, speak for the service or pass for another process. */
  bool validate;
  uint64_t invalid_packets;
  etch_tracefile_invalid_fn on_invalid;
  char why[200]; /* the last packet left out: why */
  etch_sink *sink;    /* where the file goes; NULL: `out` keeps it all */
  etch__pb_buf out;   /* the file (with a sink: its bytes not yet in it) */
  etch__pb_buf batch; /* records waiting to be compressed */
  etch__pb_buf tmp;   /* a service packet being built */
  bool compress;
  /* Each packet as ReadBuffersResponse.slices instead of a Trace.packet
   * record (etchd's replies to a consumer): a Slice with its bytes and
   * last_slice_of_packet, several for a packet over
   * ETCH_TRACEFILE_SLICE_MAX bytes. Not with compress. */
  bool slices;
  int err;
  /* per-sequence filter state */
  uint32_t cur_writer;
  bool invalid;      /* lost data, no reset seen since */
  bool mark_dropped; /* next emitted packet carries the flag */
  uint32_t depth;    /* open slices on the default track */
  bool lossy;        /* data of this sequence went missing in this read */
  uint64_t skipped;  /* packets left out after a loss */
  /* The loss state of sequences other than cur_writer's that have any
   * (sequence -> depth | invalid << 32 | mark_dropped << 33). */
  etch_u64map seq_state;
  etch_vec lost; /* of them, the track events left out: a loss list */
  /* Important events (etch/event.h) already in the file, by (pid, id):
   * a later copy of one (a replay the ring did not need) goes in without
   * its track event (see etch__tracefile_on_packet). `important` is the
   * set to use, NULL: `own_important` (a service keeps one per session,
   * so that its reads share it). */
  etch_u64map *important;
  etch_u64map own_important;
  uint64_t important_left_out; /* copies of which nothing went in */
  /* The trusted fields appended to every packet of sequence tail_seq
   * (packets come sequence by sequence: made once a run). */
  uint32_t tail_seq;
  int32_t tail_pid;  /* the pid its descriptors must claim; 0: unchecked */
  int32_t tail_owner; /* the pid the service says wrote it; 0: unknown */
  uint32_t tail_len;
  uint8_t tail[40];
} etch_tracefile;

void etch__tracefile_init(etch_tracefile *t, bool compress);
void etch__tracefile_free(etch_tracefile *t);
/* An etch_packet_fn: one committed packet of sequence `writer_id`.
 *
 * An important event is written more than once by its process (at each
 * session's start, again after a ring's worth of data: docs/format.md),
 * and every copy that is still in the buffer reaches the writer. The file
 * keeps the first copy it gets of each (pid, etch.important id) and the
 * rest of every later one, its interned data, without the track event:
 * each important event is in the trace once, for every reader, and the
 * sequence's interning is whole. Those packets open with
 * timestamp_clock_id (ETCH_TRACEFILE_IMPORTANT_MARK), so that the others
 * cost one compare. */
#define ETCH_TRACEFILE_IMPORTANT_MARK0 0xd0 /* tag of field 58, varint */
#define ETCH_TRACEFILE_IMPORTANT_MARK1 0x03
/* Important events a writer remembers at most (a process keeps at most
 * ETCH_IMPORTANT_KB of them, some 25 000 in the default 1 MiB). */
#define ETCH_TRACEFILE_IMPORTANT_MAX (1u << 20)
/* The etch.important id of the track event in a TracePacket, 0: none. */
uint64_t etch__packet_important_id(const uint8_t *pkt, size_t len);
int etch__tracefile_on_packet(void *ctx, uint32_t writer_id,
                              const uint8_t *data, uint32_t len,
                              bool dropped_before);
/* An etch_packets_fn: whole packets of sequence `writer_id`, as stored in
 * a chunk, none after lost data (etch__tracebuf_read_runs). */
int etch__tracefile_on_run(void *ctx, uint32_t writer_id, const uint8_t *data,
                           uint32_t len, uint32_t count);
/* Appends the packet built in t->tmp on the service's sequence and empties
 * t->tmp. */
int etch__tracefile_put_service(etch_tracefile *t);
/* The events a serialized TracePacket stands for: 0 without a track
 * event, an etch.dropped_events instant's `count`, else 1. */
uint64_t etch__packet_events(const uint8_t *pkt, size_t len);
/* +1 for a TracePacket that begins a slice on its sequence's default
 * track, -1 for one that ends one there, else 0. */
int etch__packet_slice_delta(const uint8_t *pkt, size_t len);
/* Appends the packet built in t->tmp on sequence `seq` (its trusted
 * fields added as for the producer's packets) and empties t->tmp. */
int etch__tracefile_put_on(etch_tracefile *t, uint32_t seq);
/* For each sequence of a loss list (n etch_loss), the loss as the trace
 * says it: at the time of the first loss, on the sequence itself (its
 * default track: the writer's thread for etch's producers), an instant
 * etch.dropped_events with args count, where = `where` and, when the
 * trust callback knows it, the writer's pid; first a slice end (arg
 * cut_by_loss) for each slice it left open. */
int etch__tracefile_put_loss_notes(etch_tracefile *t, const etch_loss *l,
                                   size_t n, const char *where);
/* A ClockSnapshot of BOOTTIME, MONOTONIC and REALTIME (BOOTTIME primary). */
int etch__tracefile_put_clock_snapshot(etch_tracefile *t);
/* The same, of clock readings taken together earlier (a flight file's). */
int etch__tracefile_put_clock_snapshot_at(etch_tracefile *t, uint64_t boot,
                                          uint64_t mono, uint64_t real);
/* A TraceStats packet with one buffer's stats. */
int etch__tracefile_put_stats(etch_tracefile *t, const etch_buffer_stats *bs,
                              uint32_t chunk_size, uint64_t writers_with_loss);
/* TraceStats with `n` buffers' stats, each ETCH_TRACEFILE_NSTATS values in
 * the order of etch_tracefile_stat (the trace of several writers' buffers
 * put together), and WriterStats for the `nseqs` sequences of buffer 0. */
enum etch_tracefile_stat {
  ETCH_TFS_BUFFER_SIZE, ETCH_TFS_CHUNKS_WRITTEN, ETCH_TFS_CHUNKS_OVERWRITTEN,
  ETCH_TFS_BYTES_OVERWRITTEN, ETCH_TFS_CHUNKS_DISCARDED,
  ETCH_TFS_WRITE_WRAP_COUNT, ETCH_TFS_CHUNK_SIZE, ETCH_TFS_WRITERS_WITH_LOSS,
  ETCH_TRACEFILE_NSTATS
};
void etch__tracefile_stats_pack(uint64_t *out, const etch_buffer_stats *bs,
                                uint32_t chunk_size,
                                uint64_t writers_with_loss);
int etch__tracefile_put_stats_n(etch_tracefile *t, const uint64_t *stats,
                                size_t n, const uint32_t *seqs, size_t nseqs);
/* TraceStats.WriterStats: sequence seqs[i] wrote into buffer bufs[i]
 * (NULL: buffer 0), for a TraceStats being built in t->tmp. */
void etch__tracefile_put_writer_stats(etch__pb_stream *s, const uint32_t *seqs,
                                      const uint32_t *bufs, size_t n);
/* Appends whole, framed trace records as they are (another trace's). */
int etch__tracefile_put_raw(etch_tracefile *t, const uint8_t *data,
                            size_t len);
/* With a sink: everything made so far into it, the packets waiting to be
 * compressed in a batch of their own, so that the file holds them now (a
 * trace written while it is recorded). ETCH_EIO without a message when
 * the sink failed. */
int etch__tracefile_flush(etch_tracefile *t);
/* The file's bytes (free() them; with a sink none: see above); frees t's
 * buffers either way. */
int etch__tracefile_finish(etch_tracefile *t, uint8_t **data, size_t *len);

#endif /* ETCH_BUFFER_TRACEFILE_H */

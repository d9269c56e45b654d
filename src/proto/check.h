/*
 * check.h - whether a TracePacket is well-formed as far as etch's reader
 * reads it (check.c).
 *
 * One answer for the two places that must agree on it: etchd, which leaves
 * a producer's packet out before it keeps it (counted in TraceStats
 * invalid_packets, buffer/tracefile.c), and the reader, which leaves such a
 * packet out of a trace it reads (counted in malformed_packets) instead of
 * refusing the whole trace. The reader is the authority: this walk goes
 * through every field its decoders read - the packet's own, track_event and
 * its debug annotations, interned_data (with etch's event schemas),
 * trace_packet_defaults, clock_snapshot, track_descriptor, trace_stats,
 * machine_id, system_info, remote_clock_sync - and
 * refuses what they refuse: bytes that do not decode as protobuf, a known
 * field with another wire type, a packed repeated field cut inside a value,
 * debug annotations nested deeper than the reader follows or with keys
 * longer than it flattens, more args or repeated values in one event than
 * it holds, a schema with more fields than it keeps. fuzz/fuzz_check.c holds the two to that: a packet this
 * accepts never fails the reader's decoders on its own bytes.
 *
 * What only earlier packets tell (an interned id never defined, a track
 * never described, a flattened key made too long by interned names, a
 * sequence with too many interned entries) is the reader's to judge: it
 * degrades or leaves out such a packet itself. compressed_packets are not
 * opened here: the reader checks the packets inside one by one, and etchd
 * refuses them from producers (only the service compresses).
 */
#ifndef ETCH_PROTO_CHECK_H
#define ETCH_PROTO_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Nesting of debug annotations (dicts, arrays, nested values). */
#define ETCH_PKT_MAX_NESTING 64
/* Flattened args of one event, and bytes of one flattened key. */
#define ETCH_PKT_MAX_ARGS 65536
#define ETCH_PKT_MAX_KEY 1024
/* Values of one repeated integer field of one event. */
#define ETCH_PKT_MAX_REPEATED (1u << 20)
/* Fields of one custom event schema. */
#define ETCH_PKT_MAX_SCHEMA_FIELDS 256
/* Frames of one interned callstack. */
#define ETCH_PKT_MAX_STACK_FRAMES 4096u

/* Why a packet was refused. */
typedef struct etch__pkt_fault {
  size_t off;   /* of the offending byte, from the packet's first byte */
  int status;   /* ETCH_EFORMAT, ETCH_ETRUNC or ETCH_ELIMIT */
  char msg[160]; /* e.g. "TrackEvent.name (field 23) has wire type varint" */
} etch__pkt_fault;

/* True when the reader can read the TracePacket `pkt[0..len)` on its own;
 * else false, with the first fault in *why (may be NULL). */
bool etch__packet_check(const uint8_t *pkt, size_t len, etch__pkt_fault *why);
/* The same answer, always the long way: etch__packet_check takes packets
 * of a track event with scalar fields in one lean pass first (fuzz_check
 * holds the two to the same answer). */
bool etch__packet_check_full(const uint8_t *pkt, size_t len,
                             etch__pkt_fault *why);
/* A producer's packet, for a tracing service: as etch__packet_check, and
 * refused also when it sets a field only the service writes (trusted_uid,
 * trusted_pid, trusted_packet_sequence_id, compressed packets, trace
 * config, trace stats, sync markers, machine_id). *descriptors says whether it holds
 * a track descriptor (whose pid the service may check). */
bool etch__packet_check_producer(const uint8_t *pkt, size_t len,
                                 etch__pkt_fault *why, bool *descriptors);

#endif /* ETCH_PROTO_CHECK_H */

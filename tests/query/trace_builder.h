/*
 * trace_builder.h - golden traces written byte by byte for the query and CLI
 * tests, with the protobuf encoder (src/pb) and Perfetto's field numbers
 * (src/proto/perfetto.h), so that every field is under the test's control.
 *
 *   tb t; tb_init(&t);
 *   tb_thread_track(&t, 1, 11, 10, 10, "main");
 *   tb_event(&t, 1, 1000, 11, ETCH_TE_TYPE_SLICE_BEGIN, "cat", "name");
 *   ... etch__query_import_memory(db, tb_data(&t), tb_len(&t), ...)
 */
#ifndef ETCH_TRACE_BUILDER_H
#define ETCH_TRACE_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "pb/pb.h"
#include "proto/perfetto.h"

typedef struct tb {
  etch__pb_buf b;
  etch__pb_nested stack[16];
  int depth;
} tb;

void tb_init(tb *t);
void tb_free(tb *t);
static inline const uint8_t *tb_data(const tb *t) { return etch__pb_buf_data(&t->b); }
static inline size_t tb_len(const tb *t) { return etch__pb_buf_len(&t->b); }

/* Raw fields inside whatever message is open. */
void tb_open(tb *t, uint32_t field);
void tb_close(tb *t);
void tb_varint(tb *t, uint32_t field, uint64_t v);
void tb_fixed64(tb *t, uint32_t field, uint64_t v);
void tb_double(tb *t, uint32_t field, double v);
void tb_string(tb *t, uint32_t field, const char *s);
void tb_bytes(tb *t, uint32_t field, const void *data, size_t len);

/* Opens a TracePacket on sequence `seq` (0 = no sequence id) with a
 * timestamp when ts >= 0. Close it with tb_close. */
void tb_packet(tb *t, uint32_t seq, int64_t ts);

/* Track descriptors, each in a packet of its own. */
void tb_process_track(tb *t, uint32_t seq, uint64_t uuid, int32_t pid,
                      const char *name);
void tb_thread_track(tb *t, uint32_t seq, uint64_t uuid, int32_t pid,
                     int32_t tid, const char *name);
void tb_named_track(tb *t, uint32_t seq, uint64_t uuid, uint64_t parent,
                    const char *name);
void tb_counter_track(tb *t, uint32_t seq, uint64_t uuid, uint64_t parent,
                      const char *name, int unit);

/* A track event with inline category and name (NULL = absent). */
void tb_event(tb *t, uint32_t seq, int64_t ts, uint64_t track, int type,
              const char *cat, const char *name);
/* The same, left open so the caller can add fields; close with tb_end. */
void tb_event_open(tb *t, uint32_t seq, int64_t ts, uint64_t track, int type,
                   const char *cat, const char *name);
void tb_end(tb *t); /* closes the track event and its packet */
void tb_counter(tb *t, uint32_t seq, int64_t ts, uint64_t track, int64_t v);
void tb_counter_double(tb *t, uint32_t seq, int64_t ts, uint64_t track,
                       double v);

/* Appends `inner`'s packets to `t` as one compressed_packets packet. */
void tb_compressed(tb *t, const tb *inner);

/* Writes the trace to a file; returns the path (static buffer per call). */
const char *tb_write_file(const tb *t, const char *name);

#endif

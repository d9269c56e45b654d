/*
 * encode.h - encoders of the Perfetto messages etch writes in more than
 * one place: one function per message, so that a field added to one is
 * added everywhere.
 *
 * Two forms. The stream encoders (etch__proto_*) write a whole
 * TracePacket field into an etch__pb_stream (a writer's chunks, a heap
 * buffer, a fixed buffer); the raw ones (etch__proto_put_*) write into
 * memory the caller has sized, for the writer's general path.
 */
#ifndef ETCH_PROTO_ENCODE_H
#define ETCH_PROTO_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "pb/pb.h"
#include "proto/perfetto.h"

/* TracePacket.track_descriptor of a thread: its uuid, pid, tid and name
 * (`name_len` bytes; none when 0). */
void etch__proto_thread_track(etch__pb_stream *s, uint64_t uuid, int32_t pid,
                              int32_t tid, const char *name, size_t name_len);

/* TracePacket.track_descriptor of a process: uuid and pid, then, when
 * given, its command line (`cmdline_len` bytes of NUL-separated
 * arguments, one field each) and its name. */
void etch__proto_process_track(etch__pb_stream *s, uint64_t uuid, int32_t pid,
                               const char *cmdline, size_t cmdline_len,
                               const char *name);

/* An interned string entry (EventName, EventCategory, DebugAnnotationName
 * and the like: iid and name) as field `field` of InternedData, raw. The
 * caller has room for the name plus 2 * ETCH_PB_MAX_VARINT + 4 bytes. */
ETCH_INLINE uint8_t *etch__proto_put_interned(uint8_t *q, uint32_t field,
                                              uint64_t iid, const char *name,
                                              uint32_t len) {
  uint8_t *l = etch__pb_put_open(&q, field);
  q = etch__pb_put_varint_field(q, ETCH_INTERNED_IID, iid);
  q = etch__pb_put_bytes_field(q, ETCH_INTERNED_NAME, name, len);
  return etch__pb_put_close(l, q);
}

#endif /* ETCH_PROTO_ENCODE_H */

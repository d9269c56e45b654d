/*
 * flight.h - the flight recorder: an in-process ring in a file-backed
 * shared mapping, which a process that dies (SIGKILL, a crash, an OOM
 * kill, _exit) leaves behind, and its recovery into a trace.
 *
 * The file is the ring itself, self-describing:
 *
 *   +-------------------------+--------+--------+-- ... --+--------+
 *   | header (4096 bytes)     | chunk0 | chunk1 |         | chunkN |
 *   +-------------------------+--------+--------+-- ... --+--------+
 *
 * The header says the geometry, the format's version, the process (pid,
 * uuid, name, etch's version) and three clock readings taken together at
 * its start; the chunks are buffer.h's, whose state and committed length
 * the writers publish with release stores (and a chunk changes hands FREE
 * first), so that whatever a process that died had published reads back
 * whole. Writers in a ring reset their incremental state (descriptors,
 * interned names) every quarter of the ring, so what a wrap leaves of a
 * sequence decodes on its own.
 *
 * Nothing here is trusted on recovery: the file may be truncated, of
 * another version, or garbage, and every chunk header may lie.
 */
#ifndef ETCH_BUFFER_FLIGHT_H
#define ETCH_BUFFER_FLIGHT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer/buffer.h"

#define ETCH_FLIGHT_MAGIC "ETCHFLT\n"
#define ETCH_FLIGHT_VERSION 1u
#define ETCH_FLIGHT_HEADER_SIZE 4096u

enum {
  ETCH_FLIGHT_RECORDING = 1, /* the process had it open */
  ETCH_FLIGHT_CLOSED = 2,    /* the process stopped recording into it */
  ETCH_FLIGHT_SETTING_UP = 3, /* the file was being made: nothing in it */
};

/* The header, at offset 0; fixed-width little-endian fields only. */
typedef struct etch_flight_header {
  char magic[8];
  uint32_t version;
  uint32_t header_size;
  uint32_t chunk_size;        /* including the chunk header */
  uint32_t chunk_header_size; /* ETCH_CHUNK_HEADER_SIZE */
  uint32_t nchunks;
  uint32_t fill;              /* etch_buffer_fill */
  uint32_t state;             /* ETCH_FLIGHT_*, atomic */
  int32_t pid;
  uint64_t process_uuid;
  uint64_t boottime_ns, monotonic_ns, realtime_ns; /* taken together */
  char etch_version[32];
  char process_name[64];
} etch_flight_header;

/* A flight file being recorded into. */
typedef struct etch_flight {
  int fd;
  uint8_t *map;       /* header and chunks */
  size_t map_len;
  char *path;
} etch_flight;

/* Who records: what the header says of the process. */
typedef struct etch_flight_id {
  int32_t pid;
  uint64_t process_uuid;
  const char *process_name;
} etch_flight_id;

/*
 * Makes the flight file `path` (created, or emptied: mode 0600) for a ring
 * of `size` bytes, maps it shared and sets up `b` over its chunks, in a
 * time and with pages that do not grow with `size`: the header first
 * (state SETTING_UP), then the file's length (sparse), the mapping (not
 * populated) and state RECORDING last. A process that dies in between
 * leaves an empty file or one in state SETTING_UP, which
 * etch__flight_recover names as a setup that never finished.
 */
int etch__flight_create(etch_flight *f, const char *path, uint64_t size,
                        etch_buffer_fill fill, const etch_flight_id *id,
                        etch_buffer *b);
/* The points of the setup a process may die at, in order: the file
 * created (empty), the header written, the file sized, the file mapped
 * (state RECORDING follows). */
enum {
  ETCH_FLIGHT_STEP_EMPTY = 1,
  ETCH_FLIGHT_STEP_HEADER,
  ETCH_FLIGHT_STEP_SIZED,
  ETCH_FLIGHT_STEP_MAPPED,
};
/* Test hook: when set, etch__flight_create calls it at each of those
 * points (a test ends the process there). */
extern ETCH_HIDDEN void (*etch__flight_setup_hook)(int step);

/* Stops recording into it: unmaps it and, unless `keep`, removes it; with
 * `keep` its header says CLOSED. */
void etch__flight_close(etch_flight *f, bool keep);
/* A forked child's copy: unmapped, the file left to the parent. */
void etch__flight_forget(etch_flight *f);

/* What a recovery found of one writer's sequence. */
typedef struct etch_flight_thread {
  uint32_t seq;           /* the writer's sequence id */
  int32_t pid, tid;       /* from its thread descriptor (0: none seen) */
  char name[64];          /* the thread's name, if it had one */
  uint64_t packets;       /* written into the trace */
  uint64_t events;        /* of them, track events */
  uint64_t chunks;        /* its chunks in the file */
  uint32_t first_chunk;   /* the oldest one's id (above 0: the ring
                             overwrote the ones before) */
  uint64_t missing_chunks;  /* ids missing between its oldest and newest */
  uint64_t undecodable;   /* events left out: their incremental state was
                             overwritten */
  bool open;              /* its newest chunk was being written: cut at its
                             last whole packet */
} etch_flight_thread;

typedef struct etch_flight_report {
  etch_flight_header header; /* as read (strings NUL-terminated) */
  uint64_t chunks;           /* chunks holding data */
  uint64_t bad_chunks;       /* chunk headers in no valid state */
  uint64_t lost_fragments;   /* packets cut by missing or corrupt chunks */
  etch_flight_thread *threads;
  size_t nthreads;
} etch_flight_report;

/*
 * Turns the bytes of a flight file (a copy in memory nobody else writes
 * meanwhile: read, not mapped) into a trace: into `sink_fd` (>= 0),
 * or into memory (*out, *out_len; free() it). ETCH_EFORMAT with a message
 * for a file that is not a flight file, is truncated, or is of another
 * version. `rep` (may be NULL) gets what was recovered per writer; free it
 * with etch__flight_report_free.
 */
int etch__flight_recover(const uint8_t *file, size_t len, bool compress,
                         int sink_fd, uint8_t **out, size_t *out_len,
                         etch_flight_report *rep);
void etch__flight_report_free(etch_flight_report *rep);

#endif /* ETCH_BUFFER_FLIGHT_H */

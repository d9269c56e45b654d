/*
 * tdecode.h - a small, independent decoder of the traces libetch writes,
 * for asserting their exact content in tests. It resolves interning,
 * packet defaults and incremental timestamps per sequence, inflates
 * compressed_packets, and counts everything a reader would count as loss.
 * It is deliberately separate from the reader library: the SDK tests must
 * not pass just because writer and reader share a bug.
 */
#ifndef ETCH_TESTS_TDECODE_H
#define ETCH_TESTS_TDECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { TD_BOOL = 1, TD_INT, TD_UINT, TD_DOUBLE, TD_STRING, TD_POINTER };

typedef struct td_arg {
  char *name;
  int type;
  int64_t i;
  uint64_t u;
  double d;
  char *s;
} td_arg;

#define TD_MAX_ARGS 8
#define TD_MAX_FLOWS 4

typedef struct td_event {
  uint32_t seq;
  uint64_t ts;
  int type; /* 1 begin, 2 end, 3 instant, 4 counter */
  uint64_t track; /* resolved: explicit or the sequence default */
  char *cat;
  char *name;
  bool counter_is_double;
  int64_t counter_i;
  double counter_d;
  uint64_t flows[TD_MAX_FLOWS];
  int nflows;
  uint64_t tflows[TD_MAX_FLOWS];
  int ntflows;
  td_arg args[TD_MAX_ARGS];
  int nargs;
  bool explicit_ts;
} td_event;

typedef struct td_track {
  uint64_t uuid;
  uint64_t parent;
  char *name;
  int32_t pid, tid;
  bool is_process, is_thread, is_counter;
  int unit;
  char *unit_name;
  char *process_name;
} td_track;

typedef struct td_trace {
  td_event *ev;
  size_t nev, cap;
  td_track *tracks;
  size_t ntracks;
  size_t packets;
  size_t cleared;      /* packets with SEQ_INCREMENTAL_STATE_CLEARED */
  size_t prev_dropped; /* packets with previous_packet_dropped */
  size_t first_on_seq; /* packets with first_packet_on_sequence */
  size_t skipped;      /* NEEDS packets skipped after a loss */
  size_t unresolved;   /* iids without definition */
  size_t compressed;   /* compressed_packets packets */
  size_t clock_snapshots;
  size_t no_seq_id;    /* packets without trusted_packet_sequence_id */
  bool has_stats;
  uint64_t stat_chunks_written, stat_overwritten, stat_discarded,
      stat_writer_loss;
  const char *error; /* NULL when the trace decoded */
} td_trace;

/* Decodes a whole trace; returns 0, or -1 with out->error set. */
int td_decode(const uint8_t *data, size_t len, td_trace *out);
void td_free(td_trace *t);
const td_track *td_track_of(const td_trace *t, uint64_t uuid);
/* Finds an arg by name, NULL if absent. */
const td_arg *td_arg_of(const td_event *e, const char *name);
/* Number of events of `type` named `name` (NULL = any). */
size_t td_count(const td_trace *t, int type, const char *name);

/* Reads a file and decodes it. */
int td_decode_file(const char *path, td_trace *out);

#endif /* ETCH_TESTS_TDECODE_H */

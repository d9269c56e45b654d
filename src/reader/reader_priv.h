/*
 * reader_priv.h - knobs of the reader for the query part (not public API).
 */
#ifndef ETCH_READER_PRIV_H
#define ETCH_READER_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "etch/reader.h"

/*
 * With `match` false, SLICE_END events are delivered even when no slice is
 * open on their track (and misplaced_end_event is not counted): for a
 * consumer that reads in file order and matches ends itself, after putting
 * a track's events in timestamp order. Call before etch_reader_run.
 */
void etch__reader_set_match_ends(etch_reader *r, bool match);

/*
 * Per-track order, for a consumer that nests slices per track without
 * holding the whole trace: file order, except that the slices and instants
 * of each track come in timestamp order (ties in file order; counters as
 * decoded). Thread tracks are delivered as decoded; every other track's
 * slices and instants are held and delivered at the end of the read, track
 * after track in the order the tracks were announced. With `hold_all`
 * thread tracks are held too. If a thread track goes back in time (explicit
 * timestamps), the read stops there and etch__reader_went_back says so:
 * what was delivered is not in per-track order, and the consumer reads the
 * trace again with `hold_all`. Call before etch_reader_run; replaces the
 * order etch_reader_set_order set (and the reverse).
 */
void etch__reader_set_track_order(etch_reader *r, bool hold_all);
/* After etch_reader_run in per-track order: a thread track went back in
 * time and the read stopped there. */
bool etch__reader_went_back(const etch_reader *r);

/*
 * From inside a callback: stop reading after the current packet.
 * etch_reader_run then returns ETCH_OK with what was read so far.
 */
void etch__reader_stop(etch_reader *r);

/*
 * With `on` false, every packet goes through the generic decoder (the fast
 * path for libetch's packet shapes is off): for tests that compare the two.
 * Call before etch_reader_run.
 */
void etch__reader_set_fast(etch_reader *r, bool on);
/* Packets the fast path decoded (tests). */
uint64_t etch__reader_fast_packets(const etch_reader *r);

/*
 * Progress on `fd` instead of stderr, shown whether or not it is a terminal,
 * once the read has taken `delay_ns` and then at most every `delay_ns`
 * (tests). Call before etch_reader_run.
 */
void etch__reader_set_progress_to(etch_reader *r, int fd, uint64_t delay_ns);

/*
 * After etch_reader_run: the wall-clock time (REALTIME, ns since the epoch)
 * minus the trace clock, from the first clock snapshot that holds both
 * clocks; false when no snapshot does (a trace without REALTIME in its
 * snapshots). A trace-clock timestamp plus the offset is wall-clock time.
 */
bool etch__reader_realtime_offset(const etch_reader *r, int64_t *offset);

/*
 * After etch_reader_run: the first packet left out as malformed (stat
 * malformed_packets), as "offset N: what" (with the file's name when
 * opened from a file); NULL when none was.
 */
const char *etch__reader_malformed_first(const etch_reader *r);

/*
 * The tracks that had no event by the end of a read (announced last, after
 * the read's events) go to `cb` (with etch_reader_on_track's user) instead
 * of the track callback, at the end of every read (etch__reader_resume's
 * too) while they have none, ancestors first, and the track callback still
 * announces each before its first event: for a consumer whose numbering of
 * tracks must not depend on where reads ended (import_live.c).
 */
void etch__reader_set_idle_tracks(etch_reader *r, etch_track_cb cb);

/* Whether the trace file open as `fd` is still being recorded: its
 * writer holds the lock buffer/sink.h describes (looked at, not taken). */
bool etch__file_recording(int fd);

/*
 * A trace file that grew since it was read (one being recorded): reads
 * what it gained, from the end of the last whole packet read before, with
 * everything the reader knew kept (sequences, their interned data and
 * incremental state, clocks, tracks, time bounds, stats): the events
 * delivered by the first read and every resume are those of one read of
 * the file as it is now, in the same order, with the same indexes. Tracks
 * are announced before their first event, except that a track that had
 * none when a read ended was announced then. Only after a successful
 * etch_reader_run of a file (etch_reader_open_file) in ETCH_ORDER_FILE
 * (ETCH_ESTATE otherwise, and for a file cut shorter or replaced since:
 * read it again). In per-track order (etch__reader_set_track_order) each
 * read delivers the tracks it held at its end: a held track's events of
 * one read are in time order, not those of two reads (the consumer checks);
 * a read that stopped because a thread track went back in time does not
 * read on; *grew (may be NULL) false when there was nothing new.
 * The file's lock is looked at again: stats.recording says whether it is
 * still being recorded, and a file left cut short by its writer is
 * reported as truncated as etch_reader_run does.
 */
int etch__reader_resume(etch_reader *r, bool *grew);
/* The file a reader reads on from is now at `path` (renamed: the same
 * file, which etch__reader_resume still checks by device and inode). */
int etch__reader_set_path(etch_reader *r, const char *path);

#endif /* ETCH_READER_PRIV_H */

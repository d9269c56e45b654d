/*
 * track.h - the track table (track.c): tracks by uuid, created by their
 * descriptors or by the first event naming them, and the pid and tid their
 * events carry.
 */
#ifndef ETCH_READER_TRACK_H
#define ETCH_READER_TRACK_H

#include "reader/reader_int.h"

/* The track of `uuid` on `machine` (0: the global track, the same for
 * all), made when it is not known and `create` is set; NULL when it is not
 * (or out of memory, or too many tracks). */
rd_track *etch__rd_track_in(etch_reader *r, uint32_t machine, uint64_t uuid,
                            bool create);
/* The same on the machine of the packet being decoded. */
ETCH_INLINE rd_track *etch__rd_track_get(etch_reader *r, uint64_t uuid,
                                         bool create) {
  return etch__rd_track_in(r, r->cur_machine, uuid, create);
}
/* Resolves the pid and tid of a track's events from it and its parents
 * (again whenever a descriptor changed). */
void etch__rd_track_resolve(etch_reader *r, rd_track *t);

#endif /* ETCH_READER_TRACK_H */

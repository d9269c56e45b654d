/*
 * dump.h - a readable dump of every packet of a trace, for `etch print`.
 *
 * Internal to etch (hidden symbol, reachable from libetch_reader's static
 * archive): the CLI links etch_reader_static and includes this header.
 */
#ifndef ETCH_READER_DUMP_H
#define ETCH_READER_DUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "etch/reader.h"

/*
 * Writes every packet of the trace in data[0..len) to `out`: its offset,
 * sequence id, flags, raw and resolved timestamp, then its fields decoded by
 * name (track events with resolved names, categories and args, descriptors,
 * interned data, clock snapshots, defaults, trace stats; compressed packets
 * expanded inline; unknown fields as "field N: <wire type> value"). Ends
 * with a summary line. Returns ETCH_OK or the reader's error status (the
 * error, naming its offset, is also printed).
 */
int etch__reader_dump(const void *data, size_t len, FILE *out);
/*
 * The same; with `allow_truncated` a file that ends inside its last packet
 * is listed up to it (etch_reader_set_allow_truncated), with a last line
 * "-- cut short: ...", and malformed packets are left out (the listing may
 * show the start of one) with a last line "-- N malformed packets left
 * out; the first: ..."; without, both are errors (etch_reader_set_strict).
 * The reader's counts into *st when not NULL.
 */
int etch__reader_dump_ex(const void *data, size_t len, FILE *out,
                         bool allow_truncated, etch_reader_stats *st);

#endif /* ETCH_READER_DUMP_H */

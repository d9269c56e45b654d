/*
 * source.h - where packets come from (source.c): the Trace framing of the
 * file or of decompressed bytes, and the decompression of compressed
 * packets. It hands each packet to the decoders below it, the fast path
 * first.
 */
#ifndef ETCH_READER_SOURCE_H
#define ETCH_READER_SOURCE_H

#include "reader/reader_int.h"

/* Decodes a run of Trace records (field 1) from src->start[0..len). */
int etch__rd_parse_records(etch_reader *r, const rd_src *src, size_t len);
/* The same from offset `from` (a record's start) of src->start[0..len):
 * offsets stay those from src->start. */
int etch__rd_parse_records_at(etch_reader *r, const rd_src *src, size_t from,
                              size_t len);
/* Decompresses and parses a compressed_packets / zstd payload. */
int etch__rd_decompress(etch_reader *r, const rd_src *src, const uint8_t *at,
                        const uint8_t *data, size_t len, bool zstd);

#endif /* ETCH_READER_SOURCE_H */

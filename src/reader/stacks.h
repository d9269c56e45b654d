/*
 * stacks.h - call stacks in a trace (stacks.c): what a sequence interned of
 * them (InternedData function_names, build_ids, mapping_paths, mappings,
 * frames, callstacks), the ModuleSymbols packets that name their frames,
 * and the reader-wide tables (etch_reader_stacks) a TrackEvent's
 * callstack_iid resolves into.
 *
 * A sequence's entries are kept as written and resolved only when an event
 * names its stack (the InternedData fields may come in any order and in
 * earlier packets); the resolution is cached with the entry, so a stack's
 * frames are looked up once per sequence and incremental state. The
 * reader-wide rows are deduplicated by content, as trace_processor's
 * stack_profile_* tables are: the same stack on two sequences is one
 * callsite.
 */
#ifndef ETCH_READER_STACKS_H
#define ETCH_READER_STACKS_H

#include "reader/reader_int.h"

/* Frames of one interned callstack at most (more: a malformed packet). */
#define RD_STACK_MAX_FRAMES ETCH_PKT_MAX_STACK_FRAMES
/* Path components of one mapping at most (the rest are left out). */
#define RD_STACK_MAX_PATH_PARTS 64u
/* Rows of each reader-wide table, and lines of one address's symbols. */
#define RD_STACK_MAX_ROWS (1u << 26)
#define RD_STACK_MAX_LINES 64u

/* InternedData field `id` (one of the six above) of sequence `seq`. */
int etch__rd_stack_interned(etch_reader *r, const rd_src *src, rd_seq *seq,
                            uint32_t id, const uint8_t *msg, size_t len);
/* The callsite id of callstack `iid` of `seq` (its innermost frame's), or
 * -1 when the sequence does not define it or one of its frames
 * (interned_data_missing counted). ETCH_ENOMEM / ETCH_ELIMIT as a
 * negative status in *status. */
int64_t etch__rd_stack_callsite(etch_reader *r, rd_seq *seq, uint64_t iid,
                                int *status);
/* A ModuleSymbols packet. */
int etch__rd_module_symbols(etch_reader *r, const rd_src *src,
                            const uint8_t *msg, size_t len);

/* A sequence's stack entries: forgotten (incremental state cleared), freed. */
void etch__rd_stack_seq_clear(rd_seq *seq);
void etch__rd_stack_seq_free(rd_seq *seq);
/* The reader-wide tables. */
void etch__rd_stacks_free(etch_reader *r);

#endif /* ETCH_READER_STACKS_H */

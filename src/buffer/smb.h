/*
 * smb.h - the shared memory buffer (SMB) between one producer and the
 * service, in the layout of Perfetto's shared-memory ABI, so that etch's
 * producers and Perfetto's service (and the other way round) understand
 * each other's buffers.
 *
 * The SMB is cut into pages of equal size (a multiple of 4 KiB, at most
 * 64 KiB). Each page starts with an 8-byte header and is cut, when a
 * producer first needs a chunk of it, into 1, 2, 4, 7 or 14 chunks of
 * equal size (the page's layout):
 *
 *   page:  [header 8][chunk 0][chunk 1] ... [chunk n-1][slack < 4n]
 *   chunk size = ((page size - 8) / n) rounded down to a multiple of 4
 *
 * Page header (little endian, fixed-width fields only):
 *   bytes 0-3  bitmap: bits 2i..2i+1 = state of chunk i (i < 14),
 *              bits 28-30 = layout (0: not partitioned, 1..5: 1, 2, 4, 7,
 *              14 chunks, 6-7 reserved), bit 31 reserved
 *   bytes 4-7  reserved
 * Every change of a chunk's state is a compare-and-swap of the bitmap, so
 * the producer and the service never need a lock between them.
 *
 * Chunk header (8 bytes):
 *   bytes 0-3  chunk_id: counts up per writer (gaps = lost chunks)
 *   bytes 4-5  writer_id: the writer's id within the producer (1..65535)
 *   bytes 6-7  packets: bits 0-9 = fragment count, bits 10-15 = flags
 *              (1: the first fragment continues a packet of chunk_id - 1,
 *               2: the last fragment continues in chunk_id + 1,
 *               4: the chunk needs patching before it can be read)
 * Then the fragments, each a size (a varint of at most 4 bytes, which
 * writers pad to exactly 4 with redundant continuation bytes so that it can
 * be patched) and that many bytes of a TracePacket. A size of ETCH_SMB_DROP_PACKET tells the service to drop the
 * packet it ends.
 *
 * Chunk states: FREE -> WRITING (producer) -> COMPLETE (producer) ->
 * READING (service) -> FREE (service). The producer never touches a chunk
 * being read, the service never one being written.
 *
 * The service must treat every byte of an SMB as hostile: the producer can
 * rewrite any of it at any time. etch__smb_chunk_read() copies a chunk out
 * and checks it before anything is parsed.
 */
#ifndef ETCH_BUFFER_SMB_H
#define ETCH_BUFFER_SMB_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"

#define ETCH_SMB_PAGE_MIN 4096u
#define ETCH_SMB_PAGE_MAX 65536u
#define ETCH_SMB_PAGE_HEADER 8u
#define ETCH_SMB_CHUNK_HEADER 8u
#define ETCH_SMB_FRAGMENT_HEADER 4u
#define ETCH_SMB_MAX_CHUNKS 14u
#define ETCH_SMB_MAX_COUNT 1023u
/* A fragment size that means "drop the packet this fragment ends". */
#define ETCH_SMB_DROP_PACKET 0x0fffffffu

enum {
  ETCH_SMB_FREE = 0,
  ETCH_SMB_WRITING = 1,
  ETCH_SMB_READING = 2,
  ETCH_SMB_COMPLETE = 3,
};

enum {
  ETCH_SMB_NOT_PARTITIONED = 0,
  ETCH_SMB_DIV1 = 1,
  ETCH_SMB_DIV2 = 2,
  ETCH_SMB_DIV4 = 3,
  ETCH_SMB_DIV7 = 4,
  ETCH_SMB_DIV14 = 5,
};

enum {
  ETCH_SMB_FIRST_CONTINUES = 1,
  ETCH_SMB_LAST_CONTINUES = 2,
  ETCH_SMB_NEEDS_PATCHING = 4,
};

#define ETCH_SMB_LAYOUT_SHIFT 28
#define ETCH_SMB_LAYOUT_MASK 0x70000000u
#define ETCH_SMB_STATES_MASK 0x0fffffffu

typedef struct etch_smb_page_header {
  uint32_t bitmap; /* atomic */
  uint32_t reserved;
} etch_smb_page_header;

typedef struct etch_smb_chunk_header {
  uint32_t chunk_id;
  uint16_t writer_id;
  uint16_t packets; /* count | flags << 10; atomic */
} etch_smb_chunk_header;

_Static_assert(sizeof(etch_smb_page_header) == ETCH_SMB_PAGE_HEADER,
               "page header is 8 bytes");
_Static_assert(sizeof(etch_smb_chunk_header) == ETCH_SMB_CHUNK_HEADER,
               "chunk header is 8 bytes");

/* A view of an SMB: its memory and its geometry. */
typedef struct etch_smb {
  uint8_t *base;
  uint64_t size;
  uint32_t page_size;
  uint32_t npages;
} etch_smb;

/* Checks the geometry (page size a multiple of 4 KiB within [4, 64] KiB,
 * size a non-zero multiple of it) and sets up the view; ETCH_EINVAL with a
 * message otherwise. The memory is not touched. */
int etch__smb_init(etch_smb *m, void *base, uint64_t size, uint32_t page_size);

/* Chunks in a page of `layout` (0 for an unknown or reserved layout). */
uint32_t etch__smb_layout_chunks(uint32_t layout);
/* Size of each chunk (with its header) of a page of `layout`. */
uint32_t etch__smb_chunk_size(uint32_t page_size, uint32_t layout);

ETCH_INLINE uint32_t etch__smb_bitmap(const etch_smb *m, uint32_t page) {
  const etch_smb_page_header *h =
      (const etch_smb_page_header *)(m->base + (uint64_t)page * m->page_size);
  return __atomic_load_n(&h->bitmap, __ATOMIC_ACQUIRE);
}
ETCH_INLINE uint32_t etch__smb_bitmap_layout(uint32_t bitmap) {
  return (bitmap & ETCH_SMB_LAYOUT_MASK) >> ETCH_SMB_LAYOUT_SHIFT;
}
ETCH_INLINE uint32_t etch__smb_bitmap_state(uint32_t bitmap, uint32_t chunk) {
  return (bitmap >> (2 * chunk)) & 3u;
}

/* The start of chunk `chunk` of `page` (its header), for a page of
 * `layout`; the caller has checked both indices. */
uint8_t *etch__smb_chunk_at(const etch_smb *m, uint32_t page, uint32_t layout,
                            uint32_t chunk);

/* Producer side. Partitions a free page (all its chunks FREE); false when
 * the page was partitioned already or the layout is not 1..5. */
bool etch__smb_try_partition(etch_smb *m, uint32_t page, uint32_t layout);
/* FREE -> WRITING with a fresh header (count 0, `flags`); the chunk's
 * start, or NULL when the chunk was not free. */
uint8_t *etch__smb_try_acquire_write(etch_smb *m, uint32_t page, uint32_t chunk,
                                     uint16_t writer_id, uint32_t chunk_id,
                                     uint16_t flags);
/* WRITING -> COMPLETE. */
bool etch__smb_release_complete(etch_smb *m, uint32_t page, uint32_t chunk);

/* Service side. COMPLETE -> READING; false when the chunk was in another
 * state or the indices do not fit the page's current layout. */
bool etch__smb_try_acquire_read(etch_smb *m, uint32_t page, uint32_t chunk);
/* READING -> FREE; a page whose chunks are all free again goes back to
 * not partitioned. */
bool etch__smb_release_free(etch_smb *m, uint32_t page, uint32_t chunk);

/* A chunk copied out of the SMB and checked: its header fields, and its
 * payload as fragments. */
typedef struct etch_smb_chunk {
  uint32_t chunk_id;
  uint16_t writer_id;
  uint16_t count; /* fragments */
  uint16_t flags;
  uint32_t payload_len;
  uint8_t payload[ETCH_SMB_PAGE_MAX];
} etch_smb_chunk;

/* Copies chunk `chunk` of `page` (which the caller holds in READING) into
 * `out`; ETCH_EFORMAT with a message when the page's layout is not valid
 * or the chunk index is beyond it. The fragments are checked one by one by
 * etch__smb_next_fragment. */
int etch__smb_chunk_read(const etch_smb *m, uint32_t page, uint32_t chunk,
                         etch_smb_chunk *out);

/* Iterates a copied chunk's fragments: *off starts at 0; returns 1 with the
 * fragment in (*data, *len) and *off moved past it, 0 after the last of the
 * header's `count` fragments, or ETCH_EFORMAT with a message for a size
 * that does not fit the chunk (ETCH_SMB_DROP_PACKET comes back as is, with
 * *len = ETCH_SMB_DROP_PACKET and no data). A fragment's size is a varint
 * of at most 4 bytes (4 when written by etch, padded so it can be patched).
 * The walk is the fragment cursor's (fragment.h); this gives its lies a
 * message. */
int etch__smb_next_fragment(const etch_smb_chunk *c, uint32_t *index,
                            uint32_t *off, const uint8_t **data,
                            uint32_t *len);

/*
 * Chunks written in place (libetch's producers, sdk/backends/system.c).
 * The fragments start at the payload's start, as Perfetto's layout has
 * them, and the payload's last 32 bytes are etch's own chunk header
 * (buffer.h's etch_chunk: state, writer and chunk ids, and the committed
 * length with the CONTINUES flags, published after every packet) with
 * reserved[3] == ETCH_SMB_INPLACE_MAGIC. While the chunk is WRITING the SMB
 * header's count stays 0, so a service that scrapes by Perfetto's rules
 * takes nothing of it; completing it only sets the count (the fragments
 * are where they belong; the header's bytes after them are never read).
 * A service salvaging a producer that died reads the committed part of
 * such a chunk with etch__smb_inplace_committed: what the process had
 * published when it died, at any moment of a chunk's life.
 */
#define ETCH_SMB_INPLACE_MAGIC 0x68637445u /* "Etch" */
#define ETCH_SMB_INPLACE_HEADER 32u
/* Of a chunk copied out of the SMB (WRITING): the committed fragments of
 * an in-place chunk at payload + *off (0), *len bytes, *flags its CONTINUES
 * bits. False when it is not one, or its header does not match the SMB
 * header's ids or lies about its length. */
bool etch__smb_inplace_committed(const etch_smb_chunk *c, uint32_t *off,
                                 uint32_t *len, uint32_t *flags);

#endif /* ETCH_BUFFER_SMB_H */

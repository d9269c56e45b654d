/*
 * shmem.h - what the service keeps of a producer's writing (shmem.c):
 * its writers' sequences, the buffers it may write, its shared memory
 * buffer, a network producer's chunks, the async commands it is sent.
 * Used by the sessions and the producer port; calls core.c and methods.c
 * only.
 */
#ifndef ETCH_SERVICE_SHMEM_H
#define ETCH_SERVICE_SHMEM_H

#include "service/service_int.h"

/* The service's sequence id for a producer's writer (0: none, no room). */
uint32_t etch__svc_seq_of(etch_service *s, producer *p, uint16_t writer_id);
bool etch__svc_may_write(etch_service *s, const producer *p, uint32_t buf);
void etch__svc_send_command(producer *p, const etch__pb_buf *cmd, int fd);
int etch__svc_make_smb(etch_service *s, producer *p);

/* Chunk bytes a network producer sent inside CommitData (shared memory
 * emulated): into s->chunk, checked as etch__smb_chunk_read checks a
 * chunk of shared memory; ETCH_EFORMAT for bytes that are not one. */
int etch__svc_emulated_chunk(etch_service *s, const uint8_t *data,
                             size_t len);
/* The first count - 1 fragments of s->chunk (a chunk still being written:
 * its last one may be half done) into buffer `buf` as sequence `seq`. */
void etch__svc_put_partial_chunk(etch_service *s, uint32_t buf, uint32_t seq);

#endif /* ETCH_SERVICE_SHMEM_H */

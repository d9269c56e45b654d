/*
 * system.h - what the system backend's two files share (private to them):
 * system.c has the backend's ops and the shared memory (taking,
 * filling and committing chunks in place, flushes' copies);
 * system_ipc.c has the producer thread, the one that talks to the service
 * (connecting, registering, commands, commits, flushes, exit and fork).
 * See system.c.
 */
#ifndef ETCH_SDK_SYSTEM_H
#define ETCH_SDK_SYSTEM_H

#ifndef ETCH_NO_SYSTEM_BACKEND
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "buffer/smb.h"
#include "ipc/ipc.h"
#include "sdk/core/sdk.h"

/* The page layout used: set with the shared memory (etch__sys_layout). */
#define SYS_LAYOUT P.layout
#define MAX_INSTANCES ETCH_MAX_SESSIONS

typedef struct etch__sys_backend sysb;

typedef struct etch__sys_commit {
  uint32_t page, chunk, buffer;
} commit;

/* A chunk waiting to go in CommitData when the service emulates shared
 * memory: a completed chunk of the process's own buffer (copy NULL: its
 * bytes are read when it goes, then it is free), or a flush's copy of a
 * chunk still being written (chunk_incomplete). */
typedef struct etch__sys_outgoing {
  commit cm;
  uint8_t *copy; /* a whole chunk's bytes, its header first, or NULL */
} outgoing;

typedef struct etch__sys_instance {
  uint64_t id;
  etch_session *s;
  sysb *b;
} sys_instance;

/* The process's producer. The connection is the thread's alone; the shared
 * memory's mapping is held by `smb_rw` (read: a chunk being copied in;
 * write: mapping or unmapping it); the rest is under `lock`, taken before
 * `smb_rw` when both are. */
struct etch__sys_producer {
  pthread_mutex_t lock;
  pthread_rwlock_t smb_rw;
  pthread_cond_t exit_cond;
  bool started, exit_req, exit_done;
  pthread_t thread;
  int wake; /* eventfd */
  char name[128];
  etch_ipc_conn conn;
  bool connected;
  uint32_t svc;
  uint32_t m_init, m_register, m_commit, m_async, m_stopped, m_started;
  uint64_t next_req, async_req;
  uint8_t *smb_mem;
  uint64_t smb_size;
  uint32_t layout; /* how pages are cut, for this mapping */
  etch_smb smb;
  bool have_smb;
  uint32_t smb_gen;   /* counts mappings: a commit is for one of them */
  uint32_t cursor;    /* atomic: the page to look at first */
  commit *commits;    /* one per chunk of the shared memory at most */
  uint32_t ncommits, capcommits;
  uint32_t commit_batch; /* wake the thread at this many commits */
  uint64_t flush_id; /* to acknowledge with the next commit */
  sys_instance inst[MAX_INSTANCES];
  uint32_t ninst;
  uint64_t chunks_lost; /* no free chunk in the shared buffer */
  /* Shared memory emulated (the service said use_shmem_emulation, or the
   * connection is a network one and no descriptor came): the buffer is the
   * process's own memory and chunks travel in CommitData. */
  uint64_t init_req;  /* InitializeConnection's request */
  bool emul_asked;    /* its reply said use_shmem_emulation */
  bool emulate;       /* the buffer of this mapping is emulated */
  /* The thread's queue of chunks to send (emulation): in order, from
   * `outq_head`; a completed chunk stays COMPLETE until it goes, so a
   * socket slower than the writers fills the buffer as a slow service
   * does with shared memory. */
  outgoing *outq;
  uint32_t outq_head, outq_len, outq_cap;
  /* Chunks of writers' memory given back, for the next acquire. */
};
extern ETCH_HIDDEN struct etch__sys_producer etch__sys;
/* Both files call it P. */
#define P etch__sys

struct etch__sys_backend {
  etch_backend base;
  uint32_t target_buffer;
  bool dead;                /* its instance ended: chunks go nowhere */
  etch_chunk **out;         /* chunks being written, for flushes */
  uint32_t nout, capout;
  uint64_t handed, drops;
};

/* Atomic: no free chunk of the shared memory was found before this. */
extern ETCH_HIDDEN uint64_t etch__sys_full_until;
/* ETCH_SYSTEM_STALL_MS in ns (see system.c). */
extern ETCH_HIDDEN uint64_t etch__sys_stall_ns;
/* The backend of a session the service started. */
extern ETCH_HIDDEN const etch_backend_ops etch__sys_ops;

/* The chunks per page for the shared memory's pages of page_size bytes. */
uint32_t etch__sys_layout(uint32_t page_size);
/* Copies what every chunk of b being written has published (P.lock; the
 * producer thread). */
void etch__sys_scrape(sysb *b);
/* Emulation: moves the commits the writers queued into the thread's queue
 * (P.lock; the producer thread). */
void etch__sys_queue_commits(void);
/* Emulation: forgets the thread's queue (its copies freed). */
void etch__sys_outq_clear(void);
/* Wakes the producer thread (its commits go). */
void etch__sys_wake_thread(void);
#endif /* ETCH_NO_SYSTEM_BACKEND */

#endif /* ETCH_SDK_SYSTEM_H */

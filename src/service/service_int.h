/*
 * service_int.h - what every file of the tracing service shares (see
 * service.h and docs/service.md): its bounds, the producer, consumer,
 * session and machine records, and the bottom layer's functions (core.c:
 * the log, connections' bounds, lookups by id). Private to src/service/.
 *
 * The service's files are layers; each calls only those below it, through
 * the header of each (no file calls one above it):
 *
 *   loop.c      the poll loop: accepting, timers, making and freeing the
 *               service                                      (service.h)
 *   producer.c  the producer port: a producer's calls, what it leaves
 *   consumer.c  the consumer port: a consumer's calls, ReadBuffers
 *                                                              (ports.h)
 *   session.c   a session's life: enable, start, flush, read, write into
 *               the consumer's file, stop, free              (session.h)
 *   shmem.c     a producer's writing: sequences, the buffers it may write,
 *               its shared memory, emulated chunks, commands  (shmem.h)
 *   machine.c   other machines: a relay's SetPeerIdentity, the RelayPort
 *               (InitRelay, SyncClock), machine ids, what the trace says
 *               of each machine                              (machine.h)
 *   methods.c   the ports' method tables, binding, replies   (methods.h)
 *   core.c      the log, connections' bounds, lookups  (service_int.h)
 */
#ifndef ETCH_SERVICE_INT_H
#define ETCH_SERVICE_INT_H

#include <signal.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "buffer/sink.h"
#include "buffer/smb.h"
#include "buffer/tracebuf.h"
#include "buffer/tracefile.h"
#include "ipc/ipc.h"
#include "pb/pb.h"
#include "proto/trace_config.h"
#include "service/service.h"

#define TX_LIMIT (8u << 20)        /* queued bytes per peer before it is cut */
#define MAX_DS_PER_PRODUCER 64u
#define MAX_WRITERS 4096u          /* sequences per producer */
#define DEFAULT_FLUSH_TIMEOUT_MS 5000u
#define DEFAULT_STOP_TIMEOUT_MS 5000u
#define DRAIN_GRACE_MS 5000u /* for consumers to read after a stop */
#define DRAIN_MAX_MS 60000u  /* of the sessions' timeouts, at a stop */
#define MIN_WRITE_PERIOD_MS 100u
#define DEFAULT_WRITE_PERIOD_MS 5000u
/* A consumer's pipe or socket that takes no byte of the trace for two
 * write periods, and at least this long, ends its session. */
#define FILE_STALL_MIN_MS 5000u
#define FILE_RETRY_MS 10u /* while bytes wait for a pipe or socket */
#define SLICE_MAX (ETCH_IPC_MAX_FRAME - 1024u)
/* Shared memory per producer at most, its own or ours: what one producer
 * can make etchd map. */
#define SMB_MAX (32u << 20)
/* What connections may hold (docs/service.md, "Limits"). */
#define DEFAULT_MAX_CONNS_PER_UID 512u
#define DEFAULT_BIND_TIMEOUT_MS 10000u
#define DEFAULT_FRAME_TIMEOUT_MS 10000u
#define DEFAULT_MAX_PARTIAL_BYTES (16ull << 20)
/* The largest frame before a port is bound: the only frame that has a use
 * then, BindService, takes a few dozen bytes. */
#define UNBOUND_MAX_FRAME 4096u
/* Out of descriptors: how long the listening sockets are left alone, and
 * how many waiting connections one round closes. */
#define ACCEPT_BACKOFF_MS 250u
#define MAX_SHED 128u
/* Producer sockets at most (PERFETTO_PRODUCER_SOCK_NAME's comma list). */
#define MAX_PRODUCER_SOCKETS 8u
/* Connections from one network address (TCP or vsock peers have no uid). */
#define DEFAULT_MAX_CONNS_PER_ADDR 512u
/* What a network peer may send, in bytes a second per connection, before
 * etchd stops reading it for a while (the kernel's buffers push back). */
#define DEFAULT_NET_BYTES_PER_S (64ull << 20)
/* Other machines etchd keeps at most, clock syncs kept per machine (the
 * newest), clocks per snapshot, a machine's SystemInfo's bytes. */
#define MAX_MACHINES 256u
#define MAX_CLOCK_SYNCS 64u
#define MAX_SYNC_CLOCKS 8u
#define MAX_SYSINFO 4096u
/* The page size an emulating producer is told to use (traced's). */
#define EMULATED_PAGE_KB 4u

/* The kinds of etch__svc_warnf's lines, each rate-limited apart. */
enum { W_FDS, W_ACCEPT, W_UID, W_PARTIAL, W_INVALID, W_RATE, W_KINDS };
typedef struct ds_reg {
  char name[ETCH_TC_MAX_NAME];
  uint8_t *desc; /* the descriptor as registered, for QueryServiceState */
  uint32_t desc_len;
  bool notify_stop, notify_start;
  bool handles_clear; /* handles_incremental_state_clear */
} ds_reg;

typedef struct wmap {
  uint16_t writer_id;
  uint32_t seq;
  uint32_t buffer; /* from RegisterTraceWriter, 0 when not said */
} wmap;

typedef struct producer {
  uint32_t id;
  etch_ipc_conn conn;
  bool bound, initialized;
  bool relay_port;    /* its socket serves the RelayPort */
  bool relay_bound;   /* it bound the RelayPort */
  bool emulated;      /* a network peer: chunks come inside CommitData */
  bool identity;      /* a relay's SetPeerIdentity was taken */
  uint32_t frames;    /* frames received */
  uint32_t machine;   /* its MachineID (machine.c), 0: the host */
  uint64_t rate_ns;   /* network peers: the start of this second */
  uint64_t rate_bytes; /* bytes received in it */
  uint64_t throttled_until_ns; /* not read before then (0: read) */
  char name[128];
  uint32_t page_hint, size_hint;
  uint8_t *smb_mem;
  uint64_t smb_size;
  etch_smb smb;
  int smb_fd;         /* the service's memfd until sent */
  bool smb_sent;
  bool has_async;
  bool no_scrape; /* smb_scraping_mode DISABLED */
  bool same_pidns; /* sees pids as etchd does: its descriptors are checked */
  uint64_t invalid_packets; /* its packets left out of reads (tracefile.h) */
  uint64_t async_req;
  ds_reg ds[MAX_DS_PER_PRODUCER];
  uint32_t nds;
  etch_vec writerv; /* of wmap */
  wmap *writers;    /* its array (set as it moves) */
  uint32_t nwriters;
  uint64_t accepted_ns; /* monotonic */
  size_t partial;       /* its share of etch_service.partial_bytes */
  struct producer *next;
} producer;

typedef struct instance {
  uint64_t id;
  uint32_t producer_id;
  char name[ETCH_TC_MAX_NAME];
  uint32_t source_index; /* in the session's config */
  bool started, stop_sent, stopped, notify_stop;
  bool handles_clear;
} instance;

enum { S_CONFIGURED, S_STARTED, S_STOPPING, S_DISABLED };

/* What a session's trace says of another machine already (machine.c). */
typedef struct mwritten {
  uint32_t machine;
  uint32_t syncs; /* clock syncs written (of machine->nsyncs_total) */
  bool sysinfo;
} mwritten;

typedef struct session {
  uint32_t id;
  uint32_t consumer_id;
  int state;
  etch_trace_config *cfg;
  uint32_t buf_ids[ETCH_TC_MAX_BUFFERS]; /* global buffer ids */
  etch_vec instv;  /* of instance */
  instance *inst;  /* its array (set as it moves) */
  uint32_t ninst;
  bool enable_pending;
  uint64_t enable_req;
  /* The consumer's file (out.fd -1: none), a nowait sink: a regular file
   * (or a block device) is written as it comes and cut back to its last
   * whole packet on an error; a pipe, socket or terminal is never waited
   * for, and what it did not take yet waits in `pend` (no more is read
   * from the buffers meanwhile). */
  etch_sink out;
  uint8_t *pend;
  size_t pend_len, pend_off;
  uint64_t stall_since_ns; /* the last byte taken while bytes wait */
  bool out_dead;     /* the file failed: nothing more goes into it */
  bool out_complete; /* the whole trace is in it */
  bool reached_max;  /* max_file_size_bytes */
  bool draining;     /* disabled; answered once the rest is in the file */
  char end_reason[256]; /* why the session ended early ("": it did not) */
  uint64_t next_write_ns, deadline_ns, stop_deadline_ns;
  uint64_t next_clear_ns; /* the next ClearIncrementalState (0: not set) */
  uint64_t invalid_packets; /* producers' packets left out (tracefile.h) */
  /* What the trace says of other machines already (machine.c): each
   * machine's SystemInfo once, its clock syncs as they come. */
  etch_vec mwv; /* of mwritten */
  mwritten *mw; /* its array (set as it moves) */
  uint32_t nmw;
  /* Important events already read out of the session, by (pid, id): each
   * read's trace-file writer leaves later copies out (tracefile.h). */
  etch_u64map important;
  /* Track events left out of reads, by sequence (undecodable after lost
   * chunks), for the loss notes at the end: a loss list (etch_loss). */
  etch_vec skipped;
  bool wrote_header;
  /* a flush in progress */
  bool flushing;
  uint64_t flush_id, flush_deadline_ns, flush_req;
  bool flush_for_consumer, flush_for_stop;
  uint32_t *flush_wait; /* producer ids that have not acked */
  uint32_t nflush_wait;
  struct session *next;
} session;

typedef struct consumer {
  uint32_t id;
  etch_ipc_conn conn;
  bool bound;
  uint32_t session_id;
  /* A ReadBuffers being streamed: the reader, and the piece of trace
   * file bytes whose records are not all sent yet. */
  struct sreader *reader;
  uint8_t *rd;
  size_t rd_len, rd_off;
  uint64_t rd_req;
  uint64_t accepted_ns; /* monotonic */
  size_t partial;       /* its share of etch_service.partial_bytes */
  struct consumer *next;
} consumer;

/* A machine other than the host (machine.c): known by the network address
 * its peers come from and the machine_id_hint their relay gives. */
typedef struct clock_sync {
  uint32_t n;
  uint32_t clock_id[MAX_SYNC_CLOCKS];
  uint64_t client[MAX_SYNC_CLOCKS], host[MAX_SYNC_CLOCKS];
} clock_sync;

typedef struct machine {
  uint32_t id; /* never 0 */
  char key[200]; /* "ADDRESS|HINT" */
  char name[64];
  uint8_t *sysinfo; /* InitRelay's SystemInfo, checked */
  uint32_t sysinfo_len;
  clock_sync syncs[MAX_CLOCK_SYNCS]; /* a ring of the newest */
  uint32_t nsyncs_total;             /* ever received */
} machine;

/* Who wrote a sequence (etch_service.seqinfo). */
typedef struct seq_info {
  int32_t pid, uid;
  bool same_pidns;
  uint32_t producer; /* its id, to name it */
  uint32_t machine;  /* its MachineID, 0: the host */
} seq_info;

/* Connections of one peer: a uid, or a network address (no port). */
typedef struct uid_conns {
  uid_t uid;
  uint32_t n;
  char addr[64]; /* a network peer's address (no port): counted by it */
} uid_conns;

struct etch_service {
  etch_service_opts o;
  /* listening sockets: the producers' (each with its name and whether it
   * serves the RelayPort) and the consumers' */
  int lp[MAX_PRODUCER_SOCKETS];
  char lp_name[MAX_PRODUCER_SOCKETS][256];
  bool lp_relay[MAX_PRODUCER_SOCKETS];
  uint32_t nlp;
  int lc;
  char host_name[64]; /* PERFETTO_MACHINE_NAME, else uname's sysname */
  etch_vec machinev;  /* of machine *, owned */
  machine **machines; /* its array (set as it moves) */
  uint32_t nmachines;
  producer *producers;
  consumer *consumers;
  session *sessions;
  /* By global buffer id: the buffers (NULL: freed) and their sessions,
   * two vectors of the same length, and their arrays (set as they move). */
  etch_vec bufv, buf_sessionv; /* of etch_tracebuf *, uint32_t */
  etch_tracebuf **bufs;
  uint32_t *buf_session;
  uint32_t nbufs;
  uint32_t next_producer, next_consumer, next_session, next_seq;
  /* Who wrote each sequence (by sequence id), kept after the producer
   * leaves so that a later read still stamps its packets. */
  etch_vec seqinfov;  /* of seq_info */
  seq_info *seqinfo;  /* its array (set as it moves) */
  uint32_t nseqinfo;
  uint64_t next_instance, next_flush;
  volatile sig_atomic_t stop;
  etch_smb_chunk *chunk; /* scratch for CommitData */
  /* Connections' bounds: a descriptor kept free to refuse connections with
   * when there are no others, when the listening sockets are polled again
   * after running out (0: they are), the memory all connections hold for
   * frames received in part, connections per peer uid. */
  int spare_fd;
  uint64_t accept_resume_ns;
  /* The poll set: the first 64 descriptors here, more in memory of their
   * own kept from one poll to the next (pfds and pids point at one or the
   * other). */
  struct pollfd pfds_in[64];
  uint32_t pids_in[64];
  struct pollfd *pfds;
  uint32_t *pids;
  uint32_t pcap;
  bool poll_oom_said; /* the poll set could not grow: said once */
  uint64_t partial_bytes;
  etch_vec uidv;   /* of uid_conns */
  uid_conns *uids; /* its array (set as it moves) */
  uint32_t nuids;
  /* warnf_'s rate limit, per kind */
  uint64_t warn_ns[W_KINDS];
  uint32_t warn_skipped[W_KINDS];
};

/* ---- core.c ---- */

void etch__svc_logf(const etch_service *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* What an operator needs to know whether or not -v was given (etchd is
 * short of a resource, or refuses a peer for hoarding one): logged at most
 * once a second for each kind, so that a peer that keeps provoking it
 * cannot flood the log. */
void etch__svc_warnf(etch_service *s, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Connections of connection c's peer (producers and consumers together):
 * by uid for a Unix peer, by address for a network peer; its count, made
 * (at 0) when `add`; NULL when there is none, or no memory. */
uint32_t *etch__svc_peer_conns(etch_service *s, const etch_ipc_conn *c,
                               bool add);
/* A connection that goes gives back its share of the bounds; after a
 * connection's frames were taken, its share of the memory held for frames
 * received in part is counted again. */
void etch__svc_conn_forget(etch_service *s, const etch_ipc_conn *c,
                           size_t partial);
void etch__svc_conn_account(etch_service *s, const etch_ipc_conn *c,
                            size_t *partial);

/* Producers, consumers and sessions by id (NULL: none). */
producer *etch__svc_find_producer(etch_service *s, uint32_t id);
consumer *etch__svc_find_consumer(etch_service *s, uint32_t id);
session *etch__svc_find_session(etch_service *s, uint32_t id);

#endif /* ETCH_SERVICE_INT_H */

/*
 * service_int.h - what the files of the tracing service share (see
 * service.h and docs/service.md): its bounds, the ports' method numbers,
 * the producer, consumer and session records, and the functions one file
 * calls in another (etch__svc_...). Private to src/service/.
 *
 *   methods.c   the ports' method tables, binding, replies
 *   producer.c  the producer port: a producer's calls, its shared memory
 *   consumer.c  the consumer port: a consumer's calls, ReadBuffers
 *   session.c   a session's life: enable, start, flush, read, write into
 *               the consumer's file, stop, free
 *   loop.c      the poll loop: accepting, timers, connections' bounds
 *   machine.c   other machines: a relay's SetPeerIdentity, the RelayPort
 *               (InitRelay, SyncClock), machine ids, what the trace says
 *               of each machine
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

/* The ports' methods, numbered as their tables in methods.c. */
enum {
  PM_INIT = 1, PM_REGISTER, PM_UNREGISTER, PM_COMMIT, PM_ASYNC,
  PM_REG_WRITER, PM_UNREG_WRITER, PM_STARTED, PM_STOPPED, PM_TRIGGERS,
  PM_SYNC, PM_UPDATE, PM_COUNT = PM_UPDATE
};
enum {
  CM_ENABLE = 1, CM_DISABLE, CM_READ, CM_FREE, CM_FLUSH, CM_START,
  CM_CHANGE, CM_DETACH, CM_ATTACH, CM_STATS, CM_OBSERVE, CM_QUERY,
  CM_CAPS, CM_BUGREPORT, CM_COUNT = CM_BUGREPORT
};
enum { RM_INIT_RELAY = 1, RM_SYNC_CLOCK, RM_COUNT = RM_SYNC_CLOCK };
/* The kinds of etch__svc_warnf's lines, each rate-limited apart. */
enum { W_FDS, W_ACCEPT, W_UID, W_PARTIAL, W_INVALID, W_RATE, W_KINDS };
#define PRODUCER_SERVICE_ID 1u
#define CONSUMER_SERVICE_ID 2u
#define RELAY_SERVICE_ID 3u

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

/*
 * Reading a session in pieces: the trace-file writer (its per-sequence
 * state kept from piece to piece) fed at most a piece of packets at a
 * time (session.c), so that a read never holds more than one piece
 * besides the buffers themselves.
 */
typedef struct trust_ctx {
  etch_service *s;
} trust_ctx;

typedef struct sreader {
  etch_tracefile o;
  trust_ctx tc;
  uint32_t session_id;
  uint32_t buf;  /* the session's buffer being read */
  uint32_t piece; /* READ_PIECE or READ_PIECE_IPC */
  bool stats;    /* TraceStats at the end */
  bool done;
  /* A piece was handed out (its bytes are dropped at the next call; before
   * the first, r->o.out holds the header: the clock snapshot). */
  bool handed;
} sreader;

/* ---- loop.c ---- */

void etch__svc_logf(const etch_service *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* What an operator needs to know whether or not -v was given (etchd is
 * short of a resource, or refuses a peer for hoarding one): logged at most
 * once a second for each kind, so that a peer that keeps provoking it
 * cannot flood the log. */
void etch__svc_warnf(etch_service *s, int kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void etch__svc_conn_forget(etch_service *s, const etch_ipc_conn *c,
                           size_t partial);
void etch__svc_conn_account(etch_service *s, const etch_ipc_conn *c,
                            size_t *partial);

/* ---- methods.c ---- */

/* Answers a BindService on a producer's (is_producer) or a consumer's
 * connection; whether it named that port. A producer's socket that serves
 * the RelayPort (`relay`) binds that too: *service_id says which. */
bool etch__svc_bind(etch_ipc_conn *c, const etch_ipc_frame *f,
                    bool is_producer, bool relay, uint32_t *service_id);
void etch__svc_send_reply_bytes(etch_ipc_conn *c, uint64_t req, bool ok,
                                const uint8_t *data, size_t len, bool more,
                                int fd);
void etch__svc_send_reply(etch_ipc_conn *c, uint64_t req, bool ok,
                          const etch__pb_buf *body, bool more, int fd);
void etch__svc_reply_empty(etch_ipc_conn *c, const etch_ipc_frame *f, bool ok);

/* ---- producer.c ---- */

producer *etch__svc_find_producer(etch_service *s, uint32_t id);
uint32_t etch__svc_seq_of(etch_service *s, producer *p, uint16_t writer_id);
bool etch__svc_may_write(etch_service *s, const producer *p, uint32_t buf);
void etch__svc_send_command(producer *p, const etch__pb_buf *cmd, int fd);
int etch__svc_make_smb(etch_service *s, producer *p);
void etch__svc_service_producer(etch_service *s, producer *p, short rev);
void etch__svc_drop_producer(etch_service *s, producer *p, const char *why);

/* Chunk bytes a network producer sent inside CommitData (shared memory
 * emulated): into s->chunk, checked as etch__smb_chunk_read checks a
 * chunk of shared memory; ETCH_EFORMAT for bytes that are not one. */
int etch__svc_emulated_chunk(etch_service *s, const uint8_t *data,
                             size_t len);
/* The first count - 1 fragments of s->chunk (a chunk still being written:
 * its last one may be half done) into buffer `buf` as sequence `seq`. */
void etch__svc_put_partial_chunk(etch_service *s, uint32_t buf, uint32_t seq);

/* ---- machine.c ---- */

/* The machine of a network producer without a relay's word: its address. */
int etch__svc_machine_of_address(etch_service *s, producer *p);
/* A frame before anything else on a producer's connection: a relay's
 * SetPeerIdentity is taken on a network connection only, first and once;
 * whether the frame was one (and so is handled). */
bool etch__svc_peer_identity(etch_service *s, producer *p,
                             const etch_ipc_frame *f);
/* A call on the RelayPort (InitRelay, SyncClock). */
int etch__svc_relay_call(etch_service *s, producer *p,
                         const etch_ipc_frame *f);
machine *etch__svc_find_machine(etch_service *s, uint32_t id);
/* Machine `id` (0: the host, nothing to do) records in session x: what
 * the trace says of it is written with its reads. */
int etch__svc_session_machine(session *x, uint32_t id);
/* Whether producer p's machine records for data source `src` of session
 * x (trace_all_machines, machine_name_filter). */
bool etch__svc_machine_matches(etch_service *s, const session *x,
                               const etch_tc_source *src, const producer *p);
/* The packets that say what the machines recording in session x are
 * (SystemInfo, RemoteClockSync), those not written into its trace yet. */
int etch__svc_put_machines(etch_service *s, session *x, etch_tracefile *t);
void etch__svc_free_machines(etch_service *s);

/* ---- consumer.c ---- */

consumer *etch__svc_find_consumer(etch_service *s, uint32_t id);
void etch__svc_service_consumer(etch_service *s, consumer *c, short rev);
void etch__svc_drop_consumer(etch_service *s, consumer *c, const char *why);

/* ---- session.c ---- */

session *etch__svc_find_session(etch_service *s, uint32_t id);
void etch__svc_match_producer(etch_service *s, session *x, producer *p);
void etch__svc_start_session_sources(etch_service *s, session *x);
void etch__svc_clear_incremental_state(etch_service *s, session *x);
uint32_t etch__svc_writer_buffer(etch_service *s, session *x, producer *p,
                                 uint16_t w);
void etch__svc_scrape_producer(etch_service *s, session *x, producer *p);
void etch__svc_begin_flush(etch_service *s, session *x, uint32_t timeout_ms,
                           bool for_consumer, uint64_t req, bool for_stop);
void etch__svc_end_flush(etch_service *s, session *x, bool ok);
void etch__svc_flush_acked(etch_service *s, producer *p, uint64_t id);
sreader *etch__svc_sreader_new(etch_service *s, session *x, bool header,
                               bool stats, bool slices);
int etch__svc_sreader_next(etch_service *s, sreader *r, uint8_t **data,
                           size_t *len);
void etch__svc_sreader_free(sreader *r);
void etch__svc_trace_stats(etch_service *s, const session *x,
                           etch__pb_stream *st);
uint32_t etch__svc_write_period_ms(const session *x);
void etch__svc_write_out(etch_service *s, session *x, bool final);
void etch__svc_answer_enable(etch_service *s, session *x);
void etch__svc_finish_disable(etch_service *s, session *x);
void etch__svc_disable_session(etch_service *s, session *x);
void etch__svc_free_session(etch_service *s, session *x);

#endif /* ETCH_SERVICE_INT_H */

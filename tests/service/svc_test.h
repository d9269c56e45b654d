/*
 * svc_test.h - what the service's end-to-end tests (svc_*_test.c) share:
 * a private etchd on sockets in the test's directory (svc_start),
 * producers and recorders spawned as children that die with the test, the
 * trace decoded, and peers written by hand on the IPC (raw_*). The
 * helpers are in svc_common.c; each test file holds one topic.
 */
#ifndef ETCH_TESTS_SVC_TEST_H
#define ETCH_TESTS_SVC_TEST_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buffer/smb.h"
#include "ipc/ipc.h"
#include "pb/pb.h"
#include "proto/ipc.h"
#include "proto/perfetto.h"
#include "proto/trace_config.h"
#include "json_parse.h"
#include "tdecode.h"
#include "test.h"

extern char **environ;

typedef struct svc {
  pid_t pid;
  char dir[512], prod[600], cons[600], log[600];
} svc;
void sleep_ms(long ms);
extern rlim_t spawn_fsize;
pid_t spawn(char *const argv[], const char *out);
int wait_exit(pid_t pid);
/* A private etchd; the clients find it through Perfetto's variables.
 * `extra`: up to two more arguments, or NULL. */
void svc_start(svc *s);
void svc_start_with(svc *s, const char *extra, const char *extra2);
int log_lines(const svc *s, const char *needle);

/* Waits for an event: checks `cond` every 10 ms until it holds, and fails
 * the test with the message if it still does not after 30 s (a bound that
 * only ends a hang; no test waits for a time window). */
#define WAIT_UNTIL(cond, ...)                                \
  do {                                                       \
    for (int wait_i_ = 0; wait_i_ < 3000 && !(cond); wait_i_++) \
      sleep_ms(10);                                          \
    if (!(cond)) FAIL(__VA_ARGS__);                          \
  } while (0)

void wait_log(const svc *s, const char *needle, int n);
bool child_ended(pid_t pid);
int log_sessions(const svc *s);
bool catches_sigint(pid_t pid);
void wait_session(const svc *s, int before, pid_t rec);
void svc_stop(svc *s);
pid_t record_start(const svc *s, const char *out, const char *extra);

pid_t record_config(const svc *s, const char *name, const char *text,
                           const char *extra, char *out, size_t cap);
pid_t producer(const char *name, int threads, long events);
void seq_pids(const uint8_t *d, size_t n, int32_t *pids, size_t cap);
const td_track *worker_track(const td_trace *t, int32_t pid, int k);

long check_ticks(const td_trace *t, const int32_t *pids, size_t cap,
                        int32_t pid, int k, long n);
void decode(const char *path, td_trace *t, int32_t *pids, size_t cap);

#define NPROD 4
#define NTHREADS 2
#define NEVENTS 2000

/* Under the sanitizers every producer runs several times slower: the
 * large runs shrink so that the suite's other tests keep their timing. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#define MANY 4
#define MANY_EVENTS 5000
#else
#define SANITIZED 0
#define MANY 16
#define MANY_EVENTS 20000
#endif

int raw_connect(const char *path);

/* ---- peers written by hand, as Perfetto's own behave ---- */

typedef struct raw {
  etch_ipc_conn c;
  etch_ipc_frame bind;
  uint8_t *names;
  uint32_t svc;
  uint64_t req;
} raw;
void raw_close(raw *r);
void raw_next(raw *r, etch_ipc_frame *f);
void raw_sync(raw *r);
void raw_invoke(raw *r, const char *method, const etch__pb_buf *b);
void raw_open(raw *r, const char *path, const char *port);

void raw_write_chunk(uint8_t *smb, uint32_t page_size, uint32_t page,
                            uint16_t writer, uint32_t chunk_id, int n);
int count_testing(const char *path, int *max_n);

pid_t producer_mode(const char *name, int threads, long events,
                           const char *mode);

/* ---- the buffers' memory is capped ---- */

#define ASSERT_STR_EQ(a, b)                                      \
  do {                                                           \
    if (strcmp((a), (b)) != 0) FAIL("'%s' != '%s'", (a), (b));   \
  } while (0)

void raw_last_reply(raw *r, etch_ipc_frame *g);
void raw_enable(raw *r, const char *text, char *err, size_t cap);
extern const char sixteen_huge[];
void records_exactly(svc *s, const char *name);

#define FD_LIMIT 32
#define FD_CONNS 40

#define BIG_FRAME 120000u /* bytes after the length */
#define BIG_SENT 100000u  /* of the 4 + BIG_FRAME, before the pause */

#define WIF_CONFIG                                    \
  "buffers { size_kb: 4096 }\n"                       \
  "data_sources { config { name: \"track_event\" } }\n" \
  "write_into_file: true\nfile_write_period_ms: 100\n"

#endif /* ETCH_TESTS_SVC_TEST_H */

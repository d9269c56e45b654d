/*
 * sample.c - CPU sampling: where every thread of the program spends its
 * time, as call stacks on the trace's timeline (a session's sample_hz,
 * ETCH_SAMPLE).
 *
 * A session that samples gets a sampler when it starts: perf events on
 * this process (src/sample/perf.h: one per CPU on the thread that starts
 * it, inherited by the threads started later; the threads already running
 * added one by one), each sample carrying the user registers and a copy of
 * the top of the user stack, on CLOCK_BOOTTIME, the clock the trace's
 * timestamps are in. A thread of its own waits on the kernel's rings and,
 * for each sample, unwinds the stack copy with the loaded objects'
 * .eh_frame (src/unwind), interns the stack (src/stack, the same tables as
 * allocation stacks) and writes a TracePacket.perf_sample (pid, tid, cpu,
 * callstack_iid) stamped with the sample's time, on its own writer's
 * sequence after the InternedData that sequence lacks. trace_processor
 * reads those into its perf_sample and stack_sample views.
 *
 * When the session stops (on the stopping thread, while the session still
 * takes events) the sampler is told to end: it disables the events, writes
 * what is left in the rings, then the names of every frame seen so far
 * (ModuleSymbols, as for allocations), and its thread is joined.
 *
 * Nothing here touches the instrumentation's hot path: the sampler is a
 * thread and the kernel does the sampling. Its own thread's samples, and
 * those of other processes (a fork child inherits the events), are
 * dropped. When perf events are refused (perf_event_paranoid, a seccomp
 * filter, a container) the session records without samples and says why
 * once on stderr.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sample/perf.h"
#include "sdk/core/sdk.h"
#include "stack/stack.h"
#include "unwind/unwind.h"

/* TracePacket.perf_sample and PerfSample's fields (profile_packet.proto). */
#define PKT_PERF_SAMPLE 66
#define PERF_SAMPLE_CPU 1
#define PERF_SAMPLE_PID 2
#define PERF_SAMPLE_TID 3
#define PERF_SAMPLE_CALLSTACK_IID 4

/* The top of the stack each sample copies: deep enough for the frames of
 * ordinary code; more costs the kernel a copy per sample. */
#define SAMPLE_STACK_BYTES 16384u
/* Data pages of each CPU's ring: 512 KiB, what perf_event_mlock_kb lets
 * an unprivileged process lock per CPU (less is tried when refused). */
#define SAMPLE_RING_PAGES 128u

typedef struct sampler {
  etch_session *s;
  uint32_t slot;
  etch_perf *perf;
  etch_unwinder *uw;
  pthread_t th;
  int wake[2];       /* a byte in wake[1] ends the thread */
  int32_t pid;
  int32_t self_tid;  /* the sampler's thread: its samples are dropped */
  uint64_t written, foreign, lost_packets, fp_stacks;
} sampler;

static sampler *samplers[ETCH_MAX_SESSIONS];
static bool said_why; /* the refusal is said once per process */

/* Test hook: the samples written so far by the samplers running. */
ETCH_HIDDEN uint64_t etch__sample_written(void);
uint64_t etch__sample_written(void) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < ETCH_MAX_SESSIONS; i++) {
    sampler *sp = __atomic_load_n(&samplers[i], __ATOMIC_ACQUIRE);
    if (sp) n += __atomic_load_n(&sp->written, __ATOMIC_RELAXED);
  }
  return n;
}

/* ---- one sample --------------------------------------------------------- */

/* The sample's stack, innermost first, into pcs. The copy of the stack is
 * unwound with .eh_frame; when that stops at the leaf (no rule for it, a
 * stack the copy does not reach) and the kernel's frame-pointer walk found
 * more, that walk is taken. */
static uint32_t sample_stack(sampler *sp, const etch_perf_sample *ps,
                             uintptr_t *pcs) {
  uint64_t raw[ETCH_STACK_MAX];
  uint32_t n = 0;
  if (ps->ip && sp->uw) {
    etch_unwind_regs r = {ps->ip, ps->sp, ps->bp};
    etch_unwind_mem m = {ps->sp, ps->stack, ps->stack_len};
    n = etch__unwind(sp->uw, &r, etch__unwind_read_mem, &m, raw,
                     ETCH_STACK_MAX);
  }
  if (n <= 1 && ps->ncallchain > 1) {
    n = ps->ncallchain < ETCH_STACK_MAX ? ps->ncallchain : ETCH_STACK_MAX;
    memcpy(raw, ps->callchain, n * sizeof raw[0]);
    sp->fp_stacks++;
  }
  if (!n && ps->ip) raw[n++] = ps->ip;
  for (uint32_t i = 0; i < n; i++) pcs[i] = (uintptr_t)raw[i];
  return n;
}

static void on_sample(void *ctx, const etch_perf_sample *ps) {
  sampler *sp = ctx;
  if ((int32_t)ps->pid != sp->pid) {
    sp->foreign++;
    return;
  }
  if ((int32_t)ps->tid == sp->self_tid) return;
  uintptr_t pcs[ETCH_STACK_MAX];
  uint32_t n = sample_stack(sp, ps, pcs);
  uint32_t id = n ? etch__stack_intern(pcs, n) : 0;
  etch_writer *w = etch__writer_prepare_explicit(sp->slot, etch__ticks());
  if (!w) {
    sp->lost_packets++;
    return;
  }
  if (id && !etch__stack_seen(w, id) && !etch__stack_put_interned(w, id))
    id = 0; /* its interned data was lost: the sample goes without */
  if (!etch__packet_begin(w)) {
    sp->lost_packets++;
    return;
  }
  etch__pb_stream *s = &w->st;
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP, ps->time);
  etch__pb_write_varint_field(s, ETCH_PKT_TIMESTAMP_CLOCK_ID,
                              ETCH_CLOCK_BOOTTIME);
  etch__pb_write_varint_field(s, ETCH_PKT_SEQUENCE_FLAGS,
                              ETCH_SEQ_NEEDS_INCREMENTAL_STATE);
  etch__pb_nested ns;
  etch__pb_nested_begin(s, PKT_PERF_SAMPLE, &ns);
  etch__pb_write_varint_field(s, PERF_SAMPLE_CPU, ps->cpu);
  etch__pb_write_varint_field(s, PERF_SAMPLE_PID, ps->pid);
  etch__pb_write_varint_field(s, PERF_SAMPLE_TID, ps->tid);
  if (id) etch__pb_write_varint_field(s, PERF_SAMPLE_CALLSTACK_IID, id);
  etch__pb_nested_end(s, &ns);
  etch__packet_end(w);
  if (w->packet_failed) sp->lost_packets++;
  else __atomic_store_n(&sp->written, sp->written + 1, __ATOMIC_RELAXED);
}

/* ---- the sampler's thread ------------------------------------------------ */

static void drain(sampler *sp) { etch__perf_drain(sp->perf, on_sample, sp); }

static void *sampler_main(void *arg) {
  sampler *sp = arg;
  sp->self_tid = (int32_t)syscall(SYS_gettid);
  pthread_setname_np(pthread_self(), "etch-sampler");
  etch__tls.internal = true; /* its allocations and waits are etch's */
  size_t nr = etch__perf_nfds(sp->perf);
  struct pollfd *fds = etch__calloc(nr + 1, sizeof *fds);
  size_t k = 0;
  if (fds) {
    fds[k++] = (struct pollfd){.fd = sp->wake[0], .events = POLLIN};
    for (size_t i = 0; i < nr; i++)
      if (etch__perf_fd(sp->perf, i) >= 0)
        fds[k++] = (struct pollfd){.fd = etch__perf_fd(sp->perf, i),
                                   .events = POLLIN};
  }
  for (;;) {
    /* A ring wakes the thread a quarter full; the timeout brings quieter
     * rings' samples out while the trace is being written. */
    if (fds) {
      int rc = poll(fds, (nfds_t)k, 250);
      if (rc < 0 && errno != EINTR) break;
      if (fds[0].revents) break;
    } else {
      char c;
      if (read(sp->wake[0], &c, 1) != 0) break;
    }
    drain(sp);
  }
  etch__perf_enable(sp->perf, false);
  drain(sp);
  /* The frames are named after the recording, from the binaries (etch
   * record, etch symbolize), not here. */
  free(fds);
  return NULL;
}

/* ---- starting and stopping ---------------------------------------------- */

/* The threads of this process, but `skip`, into *out (malloc'd). */
static size_t list_threads(pid_t skip, pid_t **out) {
  *out = NULL;
  DIR *d = opendir("/proc/self/task");
  if (!d) return 0;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    char *end;
    long tid = strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end || tid <= 0 || tid == skip) continue;
    if (n == cap) {
      size_t c = cap ? cap * 2 : 32;
      pid_t *q = etch__realloc(*out, c * sizeof *q);
      if (!q) break;
      *out = q;
      cap = c;
    }
    (*out)[n++] = (pid_t)tid;
  }
  closedir(d);
  return n;
}

static void say_why(const char *why) {
  if (__atomic_exchange_n(&said_why, true, __ATOMIC_RELAXED)) return;
  fprintf(stderr, "etch: recording without CPU samples: %s\n", why);
}

/* Opens the events on this process; the threads running now (listed
 * before, so that a thread the events already cover by inheritance is
 * never added twice: one started in between is missed) are added. */
static int open_events(sampler *sp, uint32_t hz) {
  pid_t *tids;
  size_t nt = list_threads(getpid(), &tids);
  int rc = ETCH_EUNSUPPORTED;
  for (uint32_t pages = SAMPLE_RING_PAGES; pages >= 16; pages /= 4) {
    etch_perf_opts o = {.pid = 0, .hz = hz, .clock = CLOCK_BOOTTIME,
                        .stack_bytes = SAMPLE_STACK_BYTES, .callchain = true,
                        .ring_pages = pages};
    rc = etch__perf_open(&o, &sp->perf, NULL);
    /* Refused outright: no smaller ring helps. */
    if (rc == ETCH_OK || !strstr(etch_last_error(), "mapping a ring")) break;
  }
  for (size_t i = 0; rc == ETCH_OK && i < nt; i++)
    rc = etch__perf_add_thread(sp->perf, tids[i]);
  free(tids);
  return rc;
}

/* A child made by fork() has the parent's samplers but not their
 * threads: it forgets them (their memory and descriptors are left as they
 * are: the events are the parent's), so that a session of its own samples
 * afresh and a stop never joins a thread that is not there. */
static void forget_in_child(void) {
  for (uint32_t i = 0; i < ETCH_MAX_SESSIONS; i++)
    __atomic_store_n(&samplers[i], NULL, __ATOMIC_RELAXED);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void atfork_register(void) {
  pthread_atfork(NULL, NULL, forget_in_child);
}

void etch__sample_start(etch_session *s) {
  uint32_t slot = s->slot;
  pthread_once(&atfork_once, atfork_register);
  if (__atomic_load_n(&samplers[slot], __ATOMIC_ACQUIRE)) return;
  sampler *sp = etch__calloc(1, sizeof *sp);
  if (!sp) {
    say_why("out of memory");
    return;
  }
  sp->s = s;
  sp->slot = slot;
  sp->pid = (int32_t)getpid();
  sp->wake[0] = sp->wake[1] = -1;
  char why[600];
  int rc = open_events(sp, (uint32_t)s->cfg.sample_hz);
  if (rc) snprintf(why, sizeof why, "%s", etch_last_error());
  if (!rc && etch__unwinder_new(&sp->uw)) sp->uw = NULL; /* callchain only */
  if (!rc && pipe2(sp->wake, O_CLOEXEC)) {
    rc = ETCH_ENOMEM;
    snprintf(why, sizeof why, "a pipe: %s", strerror(errno));
  }
  if (!rc && etch__perf_enable(sp->perf, true)) {
    rc = ETCH_EIO;
    snprintf(why, sizeof why, "%s", etch_last_error());
  }
  if (!rc) {
    rc = pthread_create(&sp->th, NULL, sampler_main, sp);
    if (rc) snprintf(why, sizeof why, "its thread: %s", strerror(rc));
  }
  if (rc) {
    say_why(why);
    etch__perf_close(sp->perf);
    etch__unwinder_free(sp->uw);
    if (sp->wake[0] >= 0) close(sp->wake[0]);
    if (sp->wake[1] >= 0) close(sp->wake[1]);
    free(sp);
    return;
  }
  /* The thread drops its own samples by its id, which it takes before it
   * drains anything. */
  __atomic_store_n(&samplers[slot], sp, __ATOMIC_RELEASE);
}

void etch__sample_stop(etch_session *s) {
  sampler *sp = __atomic_exchange_n(&samplers[s->slot], NULL, __ATOMIC_ACQ_REL);
  if (!sp) return;
  char c = 1;
  while (write(sp->wake[1], &c, 1) < 0 && errno == EINTR) {
  }
  pthread_join(sp->th, NULL);
  etch__perf_close(sp->perf);
  etch__unwinder_free(sp->uw);
  close(sp->wake[0]);
  close(sp->wake[1]);
  free(sp);
}

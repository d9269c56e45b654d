/*
 * perf.h - sampling a process's threads with perf_event_open.
 *
 * One sampling event per CPU on the target process, inherited by the
 * threads it starts after the event is opened (the threads already there
 * get events of their own), user space only: what perf_event_paranoid 2,
 * the usual default, allows a process on itself and its children. The
 * event is the hardware cycles counter where the machine has a PMU, else
 * the cpu-clock software timer (a VM or a container often has no PMU), at
 * a frequency in Hz.
 *
 * Each sample carries the thread, the time on the clock asked for (so it
 * sits on the same timeline as the trace's slices), the user registers an
 * unwinder starts from (ip, sp, bp) and, when asked, a copy of the top of
 * the user stack and the kernel's frame-pointer walk of the user stack.
 * Unwinding and symbols are the caller's: this part only gets samples out
 * of the kernel's rings.
 *
 * What the kernel writes into the rings is checked as it is read (sizes,
 * lengths within the record): a record that does not fit ends the ring's
 * reading for that round and is counted, never read past.
 */
#ifndef ETCH_SAMPLE_PERF_H
#define ETCH_SAMPLE_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

typedef struct etch_perf etch_perf;

typedef struct etch_perf_opts {
  pid_t pid;            /* the process to sample; 0: this one */
  uint32_t hz;          /* samples a second per thread; 0: 1000 */
  clockid_t clock;      /* the samples' clock (CLOCK_BOOTTIME, ...) */
  uint32_t stack_bytes; /* copy this much of the user stack; 0: none */
  bool callchain;       /* the kernel's frame-pointer walk of user frames */
  bool cpu_clock;       /* cpu-clock even where cycles would work */
  uint32_t ring_pages;  /* data pages of each CPU's ring (power of 2); 0: 64 */
} etch_perf_opts;

typedef struct etch_perf_sample {
  uint32_t pid, tid, cpu;
  uint64_t time;              /* ns on opts.clock */
  uint64_t ip, sp, bp;        /* user registers; 0 when the kernel had none */
  const uint8_t *stack;       /* the copy of the user stack from sp */
  size_t stack_len;           /* bytes of it that are valid */
  const uint64_t *callchain;  /* user return addresses, innermost first */
  uint32_t ncallchain;
} etch_perf_sample;

typedef void (*etch_perf_fn)(void *ctx, const etch_perf_sample *s);

typedef struct etch_perf_stats {
  uint64_t samples;    /* delivered */
  uint64_t lost;       /* the kernel's PERF_RECORD_LOST counts */
  uint64_t bad;        /* records that did not parse */
  uint64_t throttled;  /* PERF_RECORD_THROTTLE seen */
} etch_perf_stats;

/* Opens the events, disabled. On failure ETCH_EUNSUPPORTED, with a
 * message that says why and what to change: the kernel has no perf events
 * (ENOSYS, ENOENT), or perf_event_paranoid, a seccomp filter or the
 * container forbids them (EACCES, EPERM). `*event` (may be NULL) gets
 * "cycles" or "cpu-clock". */
int etch__perf_open(const etch_perf_opts *opts, etch_perf **out,
                    const char **event);

/* Opens events for a thread started before etch__perf_open that the
 * inherited events do not cover (see /proc/PID/task). */
int etch__perf_add_thread(etch_perf *p, pid_t tid);

/* Starts and stops counting (the events are opened disabled). */
int etch__perf_enable(etch_perf *p, bool on);

/* Descriptors to poll for POLLIN (a ring is a quarter full). */
size_t etch__perf_nfds(const etch_perf *p);
int etch__perf_fd(const etch_perf *p, size_t i);

/* Calls fn for every sample in the rings, oldest first per ring, and frees
 * their space. The sample's pointers are valid during the call only. */
void etch__perf_drain(etch_perf *p, etch_perf_fn fn, void *ctx);

etch_perf_stats etch__perf_stats(const etch_perf *p);
void etch__perf_close(etch_perf *p);

/* The reason perf events cannot be used here, for a message, or NULL when
 * the system allows them (reads /proc/sys/kernel/perf_event_paranoid). */
const char *etch__perf_paranoid_hint(void);

#endif

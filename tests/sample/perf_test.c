/*
 * perf_test.c - src/sample/perf: samples of this process's threads.
 *
 * A thread burns the CPU in one function until the sampler has seen
 * enough of its samples (waiting for the samples, never for a time): they
 * are on its thread id, at instructions of that function, with its stack
 * pointer inside its stack, at times on the clock asked for between the
 * start and the end. A thread already running when the events are opened
 * is sampled once added; a process whose seccomp filter forbids
 * perf_event_open gets ETCH_EUNSUPPORTED and a message saying why.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "sample/perf.h"
#include "test.h"

static atomic_int stop_burn;

/* The instructions samples should land on: a loop and nothing else. */
__attribute__((noinline, aligned(64))) static uint64_t burn_here(uint64_t x) {
  while (!atomic_load_explicit(&stop_burn, memory_order_relaxed))
    for (int i = 0; i < 1000; i++) x = x * 6364136223846793005ull + 1;
  return x;
}
/* Where burn_here's code ends: the next function the compiler lays out
 * after it, or far enough (the loop is a few dozen bytes). */
#define BURN_SPAN 512

typedef struct burner {
  pthread_t th;
  atomic_int tid;
  atomic_int go;
  uintptr_t stack_lo, stack_hi;
} burner;

static void *burner_main(void *arg) {
  burner *b = arg;
  pthread_attr_t a;
  void *addr;
  size_t size;
  pthread_getattr_np(pthread_self(), &a);
  pthread_attr_getstack(&a, &addr, &size);
  pthread_attr_destroy(&a);
  b->stack_lo = (uintptr_t)addr;
  b->stack_hi = (uintptr_t)addr + size;
  atomic_store(&b->tid, (int)syscall(SYS_gettid));
  while (!atomic_load(&b->go)) sched_yield();
  volatile uint64_t sink = burn_here(1);
  (void)sink;
  return NULL;
}

typedef struct seen {
  burner *b;
  uint64_t t0, t1;
  int pid;
  uint64_t tmin, tmax;
  unsigned n, in_fn, in_stack, with_stack, others;
} seen;

static void on_sample(void *ctx, const etch_perf_sample *s) {
  seen *v = ctx;
  if ((int)s->tid != atomic_load(&v->b->tid)) {
    v->others++;
    return;
  }
  v->n++;
  if ((int)s->pid == v->pid) {
    uintptr_t fn = (uintptr_t)&burn_here;
    if (s->ip >= fn && s->ip < fn + BURN_SPAN) v->in_fn++;
    if (s->sp >= v->b->stack_lo && s->sp < v->b->stack_hi) v->in_stack++;
    if (!v->tmin || s->time < v->tmin) v->tmin = s->time;
    if (s->time > v->tmax) v->tmax = s->time;
    if (s->stack && s->stack_len >= 64) v->with_stack++;
  }
}

static uint64_t now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Drains until `want` samples of the burner are in, then stops it. */
static void sample_until(etch_perf *p, seen *v, unsigned want) {
  atomic_store(&v->b->go, 1);
  while (v->n < want) {
    struct pollfd fds[64];
    size_t n = etch__perf_nfds(p), k = 0;
    for (size_t i = 0; i < n && k < 64; i++)
      if (etch__perf_fd(p, i) >= 0)
        fds[k++] = (struct pollfd){.fd = etch__perf_fd(p, i), .events = POLLIN};
    /* The bound only keeps the drain going when a ring wakes nobody (its
     * watermark not reached): the loop ends on the samples, not on it. */
    poll(fds, k, 50);
    etch__perf_drain(p, on_sample, v);
  }
  atomic_store(&stop_burn, 1);
}

static bool perf_usable(void) {
  const char *hint = etch__perf_paranoid_hint();
  if (hint) fprintf(stderr, "perf_test: skipped: %s\n", hint);
  return !hint;
}

TEST(perf_samples_a_thread_started_after_open) {
  if (!perf_usable()) return;
  atomic_store(&stop_burn, 0);
  etch_perf_opts o = {.hz = 1000, .clock = CLOCK_BOOTTIME,
                      .stack_bytes = 8192, .callchain = true, .cpu_clock = true};
  etch_perf *p;
  const char *event = NULL;
  ASSERT_OK(etch__perf_open(&o, &p, &event));
  ASSERT_EQ_STR(event, "cpu-clock");
  ASSERT_OK(etch__perf_enable(p, true));
  burner b = {0};
  seen v = {.b = &b, .pid = getpid(), .t0 = now_ns(CLOCK_BOOTTIME)};
  ASSERT_OK(pthread_create(&b.th, NULL, burner_main, &b));
  while (!atomic_load(&b.tid)) sched_yield();
  sample_until(p, &v, 40);
  pthread_join(b.th, NULL);
  v.t1 = now_ns(CLOCK_BOOTTIME);
  etch__perf_drain(p, on_sample, &v);
  etch_perf_stats st = etch__perf_stats(p);
  etch__perf_close(p);
  fprintf(stderr, "samples %u: in burn_here %u, sp in stack %u, "
          "with stack %u; other threads %u; lost %llu bad %llu\n",
          v.n, v.in_fn, v.in_stack, v.with_stack, v.others,
          (unsigned long long)st.lost, (unsigned long long)st.bad);
  ASSERT_TRUE(v.n >= 40);
  ASSERT_EQ_U64(st.bad, 0);
  /* The thread's first samples may fall before burn_here (its start). */
  ASSERT_TRUE(v.in_fn >= v.n * 9 / 10);
  ASSERT_EQ_INT(v.in_stack, v.n);
  ASSERT_TRUE(v.t0 <= v.tmin && v.tmin <= v.tmax && v.tmax <= v.t1);
  ASSERT_EQ_INT(v.with_stack, v.n);
}

TEST(perf_samples_an_added_thread) {
  if (!perf_usable()) return;
  atomic_store(&stop_burn, 0);
  burner b = {0};
  ASSERT_OK(pthread_create(&b.th, NULL, burner_main, &b));
  while (!atomic_load(&b.tid)) sched_yield();
  etch_perf_opts o = {.hz = 1000, .clock = CLOCK_MONOTONIC, .cpu_clock = true};
  etch_perf *p;
  ASSERT_OK(etch__perf_open(&o, &p, NULL));
  ASSERT_OK(etch__perf_enable(p, true));
  /* Added after enabling: its events start enabled. */
  ASSERT_OK(etch__perf_add_thread(p, atomic_load(&b.tid)));
  seen v = {.b = &b, .pid = getpid(), .t0 = now_ns(CLOCK_MONOTONIC)};
  sample_until(p, &v, 20);
  pthread_join(b.th, NULL);
  v.t1 = now_ns(CLOCK_MONOTONIC);
  etch__perf_close(p);
  ASSERT_TRUE(v.n >= 20);
  ASSERT_TRUE(v.in_fn >= v.n * 9 / 10);
  ASSERT_TRUE(v.t0 <= v.tmin && v.tmin <= v.tmax && v.tmax <= v.t1);
  ASSERT_EQ_INT(v.with_stack, 0); /* no stack copy asked for */
}

TEST(perf_refused_by_seccomp_says_why) {
  int fds[2];
  ASSERT_OK(pipe(fds));
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
      _exit(3);
    etch_perf_opts o = {.hz = 1000, .clock = CLOCK_MONOTONIC};
    etch_perf *p;
    int rc = etch__perf_open(&o, &p, NULL);
    char msg[600];
    snprintf(msg, sizeof msg, "%d %s", rc, etch_test_last_error());
    if (write(fds[1], msg, strlen(msg)) < 0) _exit(4);
    _exit(0);
  }
  close(fds[1]);
  char buf[600] = {0};
  size_t got = 0;
  ssize_t n;
  while ((n = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)n;
  close(fds[0]);
  int st;
  waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  fprintf(stderr, "refused: %s\n", buf);
  ASSERT_EQ_INT(atoi(buf), ETCH_EUNSUPPORTED);
  ASSERT_TRUE(strstr(buf, "cannot sample process") != NULL);
  /* The paranoid level here allows sampling, so the message names what
   * else forbids it. */
  if (!etch__perf_paranoid_hint())
    ASSERT_TRUE(strstr(buf, "forbidden here") != NULL);
  ASSERT_TRUE(strstr(buf, "Permission denied") != NULL);
}

TEST(perf_rejects_a_ring_size_not_a_power_of_two) {
  etch_perf_opts o = {.hz = 1000, .clock = CLOCK_MONOTONIC, .ring_pages = 3};
  etch_perf *p = (etch_perf *)1;
  ASSERT_EQ_INT(etch__perf_open(&o, &p, NULL), ETCH_EINVAL);
  ASSERT_TRUE(p == NULL);
}

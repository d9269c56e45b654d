/*
 * perf.c - sampling a process's threads with perf_event_open (perf.h).
 *
 * One ring per CPU: the process's event on that CPU owns it, and the events
 * of threads added later write into it too (PERF_EVENT_IOC_SET_OUTPUT), so
 * adding a thread costs descriptors, not memory.
 */
#define _GNU_SOURCE
#include "sample/perf.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "base/containers.h"

#if defined(__x86_64__)
/* arch/x86/include/uapi/asm/perf_regs.h: BP 6, SP 7, IP 8. */
enum { kRegBp = 6, kRegSp = 7, kRegIp = 8 };
#define ETCH_PERF_HAVE_REGS 1
#elif defined(__aarch64__)
/* arch/arm64/include/uapi/asm/perf_regs.h: X29 (frame pointer) 29, SP 31,
 * PC 32. */
enum { kRegBp = 29, kRegSp = 31, kRegIp = 32 };
#define ETCH_PERF_HAVE_REGS 1
#endif

#define MAX_STACK_COPY 65528u /* the kernel's limit, a multiple of 8 */
#define MAX_CALLCHAIN 512u

typedef struct ring {
  int fd;
  uint8_t *base; /* the metadata page, then the data pages */
  size_t size;   /* data bytes */
} ring;

struct etch_perf {
  struct perf_event_attr attr;
  ring *rings; /* one per CPU; fd -1 for a CPU that is not there */
  size_t nrings;
  etch_vec extra; /* of int: added threads' descriptors, each into its
                     CPU's ring */
  size_t page;
  uint8_t *scratch; /* a record that wraps around its ring's end */
  size_t scratch_cap;
  uint64_t callchain[MAX_CALLCHAIN];
  etch_perf_stats stats;
  bool enabled;
};

static int perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu,
                           int group, unsigned long flags) {
  return (int)syscall(SYS_perf_event_open, attr, pid, cpu, group, flags);
}

static int read_int_file(const char *path, long *out) {
  char buf[32];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  char *end;
  *out = strtol(buf, &end, 10);
  return end == buf ? -1 : 0;
}

const char *etch__perf_paranoid_hint(void) {
  long v;
  if (read_int_file("/proc/sys/kernel/perf_event_paranoid", &v))
    return "this kernel has no perf events "
           "(/proc/sys/kernel/perf_event_paranoid is missing)";
  if (v > 2)
    return "kernel.perf_event_paranoid is above 2: unprivileged programs "
           "may not use perf events; as root, `sysctl "
           "kernel.perf_event_paranoid=2` allows sampling one's own "
           "programs (or give the program CAP_PERFMON)";
  return NULL;
}

/* The reason an open failed with `err`, for a message. */
static const char *open_hint(int err, const struct perf_event_attr *attr) {
  static __thread char buf[200];
  const char *hint = etch__perf_paranoid_hint();
  switch (err) {
  case ENOSYS:
    return "this kernel has no perf_event_open";
  case EACCES:
  case EPERM:
    return hint ? hint
                : "perf events are forbidden here (a container's seccomp "
                  "filter or a security module); run with perf events "
                  "allowed (e.g. docker --security-opt seccomp=... or "
                  "--cap-add PERFMON)";
  case ENOENT:
  case EOPNOTSUPP:
    return hint ? hint : "this machine has no such perf event";
  case EINVAL: {
    long max;
    if (!read_int_file("/proc/sys/kernel/perf_event_max_sample_rate", &max) &&
        attr->sample_freq > (uint64_t)max) {
      snprintf(buf, sizeof buf,
               "%llu Hz is above kernel.perf_event_max_sample_rate (%ld)",
               (unsigned long long)attr->sample_freq, max);
      return buf;
    }
    return "the kernel refused the event's settings";
  }
  default:
    return hint ? hint : strerror(err);
  }
}

static int map_ring(etch_perf *p, ring *r, uint32_t pages) {
  size_t len = (size_t)(pages + 1) * p->page;
  void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
  if (m == MAP_FAILED)
    return etch__error(ETCH_EUNSUPPORTED,
                       "perf: mapping a ring of %zu bytes: %s (see "
                       "kernel.perf_event_mlock_kb)",
                       len, strerror(errno));
  r->base = m;
  r->size = (size_t)pages * p->page;
  return 0;
}

static void fill_attr(struct perf_event_attr *a, const etch_perf_opts *o,
                      bool cycles, uint32_t stack_bytes, size_t ring_bytes) {
  memset(a, 0, sizeof *a);
  a->size = sizeof *a;
  a->type = cycles ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE;
  a->config = cycles ? PERF_COUNT_HW_CPU_CYCLES : PERF_COUNT_SW_CPU_CLOCK;
  a->freq = 1;
  a->sample_freq = o->hz ? o->hz : 1000;
  a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                   PERF_SAMPLE_CPU;
  if (o->callchain) {
    a->sample_type |= PERF_SAMPLE_CALLCHAIN;
    a->exclude_callchain_kernel = 1;
  }
#ifdef ETCH_PERF_HAVE_REGS
  a->sample_type |= PERF_SAMPLE_REGS_USER;
  a->sample_regs_user = (1ull << kRegBp) | (1ull << kRegSp) | (1ull << kRegIp);
  if (stack_bytes) {
    a->sample_type |= PERF_SAMPLE_STACK_USER;
    a->sample_stack_user = stack_bytes;
  }
#else
  (void)stack_bytes;
#endif
  a->disabled = 1;
  a->inherit = 1;
  a->exclude_kernel = 1;
  a->exclude_hv = 1;
  a->use_clockid = 1;
  a->clockid = o->clock;
  a->watermark = 1;
  a->wakeup_watermark = (uint32_t)(ring_bytes / 4);
}

int etch__perf_open(const etch_perf_opts *o, etch_perf **out,
                    const char **event) {
  *out = NULL;
  uint32_t pages = o->ring_pages ? o->ring_pages : 64;
  if (pages & (pages - 1))
    return etch__error(ETCH_EINVAL, "perf: ring_pages %u is not a power of 2",
                       pages);
  uint32_t stack = o->stack_bytes;
  if (stack > MAX_STACK_COPY) stack = MAX_STACK_COPY;
  stack &= ~7u;
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  if (ncpu < 1) ncpu = 1;

  etch_perf *p = etch__calloc(1, sizeof *p);
  if (!p) return ETCH_ENOMEM;
  p->page = (size_t)sysconf(_SC_PAGESIZE);
  p->nrings = (size_t)ncpu;
  p->rings = etch__calloc(p->nrings, sizeof *p->rings);
  if (!p->rings) {
    free(p);
    return ETCH_ENOMEM;
  }
  for (size_t i = 0; i < p->nrings; i++) p->rings[i].fd = -1;

  pid_t pid = o->pid ? o->pid : getpid();
  int err = 0;
  bool opened = false;
  for (int cycles = o->cpu_clock ? 0 : 1; cycles >= 0 && !opened; cycles--) {
    fill_attr(&p->attr, o, cycles, stack, (size_t)pages * p->page);
    err = 0;
    for (size_t c = 0; c < p->nrings; c++) {
      int fd = perf_event_open(&p->attr, pid, (int)c, -1,
                               PERF_FLAG_FD_CLOEXEC);
      if (fd < 0) {
        if (errno == ENODEV) continue; /* a CPU that is offline */
        err = errno;
        break;
      }
      p->rings[c].fd = fd;
      opened = true;
    }
    if (err) {
      for (size_t c = 0; c < p->nrings; c++)
        if (p->rings[c].fd >= 0) {
          close(p->rings[c].fd);
          p->rings[c].fd = -1;
        }
      opened = false;
    }
  }
  if (!opened) {
    etch__perf_close(p);
    if (!err) err = ENODEV;
    return etch__error(ETCH_EUNSUPPORTED,
                       "perf: cannot sample process %d: %s (%s)", (int)pid,
                       open_hint(err, &p->attr), strerror(err));
  }
  for (size_t c = 0; c < p->nrings; c++) {
    if (p->rings[c].fd < 0) continue;
    int rc = map_ring(p, &p->rings[c], pages);
    if (rc) {
      etch__perf_close(p);
      return rc;
    }
  }
  if (event)
    *event = p->attr.type == PERF_TYPE_HARDWARE ? "cycles" : "cpu-clock";
  *out = p;
  return 0;
}

int etch__perf_add_thread(etch_perf *p, pid_t tid) {
  for (size_t c = 0; c < p->nrings; c++) {
    if (p->rings[c].fd < 0) continue;
    if (ETCH_VEC_RESERVE(&p->extra, int, 1)) return ETCH_ENOMEM;
    struct perf_event_attr a = p->attr;
    int fd = perf_event_open(&a, tid, (int)c, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
      if (errno == ESRCH) return 0; /* the thread is gone: nothing to add */
      return etch__error(ETCH_EUNSUPPORTED, "perf: cannot sample thread %d: %s",
                         (int)tid, strerror(errno));
    }
    (void)ETCH_VEC_PUSH(&p->extra, int, fd); /* room made above */
    if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, p->rings[c].fd))
      return etch__error(ETCH_EUNSUPPORTED,
                         "perf: thread %d's samples into CPU %zu's ring: %s",
                         (int)tid, c, strerror(errno));
    if (p->enabled && ioctl(fd, PERF_EVENT_IOC_ENABLE, 0))
      return etch__error(ETCH_EIO, "perf: enabling thread %d's event: %s",
                         (int)tid, strerror(errno));
  }
  return 0;
}

int etch__perf_enable(etch_perf *p, bool on) {
  unsigned long req = on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE;
  for (size_t c = 0; c < p->nrings; c++)
    if (p->rings[c].fd >= 0 && ioctl(p->rings[c].fd, req, 0))
      return etch__error(ETCH_EIO, "perf: %s: %s", on ? "enable" : "disable",
                         strerror(errno));
  const int *extra = ETCH_VEC_AT(&p->extra, int);
  for (size_t i = 0; i < ETCH_VEC_COUNT(&p->extra, int); i++)
    if (ioctl(extra[i], req, 0))
      return etch__error(ETCH_EIO, "perf: %s: %s", on ? "enable" : "disable",
                         strerror(errno));
  p->enabled = on;
  return 0;
}

size_t etch__perf_nfds(const etch_perf *p) { return p->nrings; }

int etch__perf_fd(const etch_perf *p, size_t i) {
  return i < p->nrings ? p->rings[i].fd : -1;
}

/* A cursor over one record. */
typedef struct rec {
  const uint8_t *p, *end;
} rec;

static bool take(rec *r, void *out, size_t n) {
  if ((size_t)(r->end - r->p) < n) return false;
  memcpy(out, r->p, n);
  r->p += n;
  return true;
}

static bool parse_sample(etch_perf *p, rec *r, etch_perf_sample *s) {
  uint64_t st = p->attr.sample_type;
  uint32_t pidtid[2], cpu[2];
  memset(s, 0, sizeof *s);
  if (!take(r, &s->ip, 8) || !take(r, pidtid, 8) || !take(r, &s->time, 8) ||
      !take(r, cpu, 8))
    return false;
  s->pid = pidtid[0];
  s->tid = pidtid[1];
  s->cpu = cpu[0];
  if (st & PERF_SAMPLE_CALLCHAIN) {
    uint64_t nr;
    if (!take(r, &nr, 8) || nr > (uint64_t)(r->end - r->p) / 8) return false;
    uint32_t n = 0;
    for (uint64_t i = 0; i < nr; i++) {
      uint64_t ip;
      memcpy(&ip, r->p + i * 8, 8);
      if (ip >= (uint64_t)PERF_CONTEXT_MAX) continue; /* a context marker */
      if (n < MAX_CALLCHAIN) p->callchain[n++] = ip;
    }
    r->p += nr * 8;
    s->callchain = p->callchain;
    s->ncallchain = n;
  }
  if (st & PERF_SAMPLE_REGS_USER) {
    uint64_t abi;
    if (!take(r, &abi, 8)) return false;
    if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
      uint64_t regs[3]; /* in the order of their bits: bp, sp, ip */
      if (!take(r, regs, sizeof regs)) return false;
      s->bp = regs[0];
      s->sp = regs[1];
    }
  }
  if (st & PERF_SAMPLE_STACK_USER) {
    uint64_t size;
    if (!take(r, &size, 8)) return false;
    if (size) {
      if (size > (uint64_t)(r->end - r->p) || (uint64_t)(r->end - r->p) - size < 8)
        return false;
      const uint8_t *data = r->p;
      uint64_t dyn;
      r->p += size;
      if (!take(r, &dyn, 8)) return false;
      s->stack = data;
      s->stack_len = (size_t)(dyn < size ? dyn : size);
    }
  }
  return true;
}

static void drain_ring(etch_perf *p, ring *rg, etch_perf_fn fn, void *ctx) {
  struct perf_event_mmap_page *meta = (void *)rg->base;
  const uint8_t *data = rg->base + p->page;
  uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = meta->data_tail;
  while (tail < head) {
    struct perf_event_header h;
    size_t off = (size_t)(tail % rg->size);
    size_t first = rg->size - off;
    if (first >= sizeof h) {
      memcpy(&h, data + off, sizeof h);
    } else {
      memcpy(&h, data + off, first);
      memcpy((uint8_t *)&h + first, data, sizeof h - first);
    }
    if (h.size < sizeof h || h.size > head - tail) {
      p->stats.bad++;
      tail = head; /* cannot find the next record: skip what is there */
      break;
    }
    const uint8_t *body;
    if (first >= h.size) {
      body = data + off;
    } else {
      if (p->scratch_cap < h.size) {
        uint8_t *n = etch__realloc(p->scratch, h.size);
        if (!n) {
          p->stats.bad++;
          tail += h.size;
          continue;
        }
        p->scratch = n;
        p->scratch_cap = h.size;
      }
      memcpy(p->scratch, data + off, first);
      memcpy(p->scratch + first, data, h.size - first);
      body = p->scratch;
    }
    rec r = {body + sizeof h, body + h.size};
    if (h.type == PERF_RECORD_SAMPLE) {
      etch_perf_sample s;
      if (parse_sample(p, &r, &s)) {
        p->stats.samples++;
        fn(ctx, &s);
      } else {
        p->stats.bad++;
      }
    } else if (h.type == PERF_RECORD_LOST) {
      uint64_t idlost[2];
      if (take(&r, idlost, sizeof idlost)) p->stats.lost += idlost[1];
    } else if (h.type == PERF_RECORD_THROTTLE) {
      p->stats.throttled++;
    }
    tail += h.size;
  }
  __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

void etch__perf_drain(etch_perf *p, etch_perf_fn fn, void *ctx) {
  for (size_t c = 0; c < p->nrings; c++)
    if (p->rings[c].base) drain_ring(p, &p->rings[c], fn, ctx);
}

etch_perf_stats etch__perf_stats(const etch_perf *p) { return p->stats; }

void etch__perf_close(etch_perf *p) {
  if (!p) return;
  for (size_t i = 0; i < ETCH_VEC_COUNT(&p->extra, int); i++)
    close(ETCH_VEC_AT(&p->extra, int)[i]);
  for (size_t c = 0; c < p->nrings; c++) {
    if (p->rings[c].base)
      munmap(p->rings[c].base, p->rings[c].size + p->page);
    if (p->rings[c].fd >= 0) close(p->rings[c].fd);
  }
  etch__vec_free(&p->extra);
  free(p->rings);
  free(p->scratch);
  free(p);
}

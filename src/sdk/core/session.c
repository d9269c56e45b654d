/*
 * session.c - sessions: made from a config (config.c) with their backend,
 * started, flushed, stopped, written (paths.c says where), freed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sdk/core/sdk.h"

static int session_new(const etch_config *cfg, etch_backend *given,
                       etch_session **out);

int etch_session_new(const etch_config *cfg, etch_session **out) {
  if (!out) return etch__error(ETCH_EINVAL, "etch_session_new: out is NULL");
  return session_new(cfg, NULL, out);
}

int etch__session_new_with_backend(const etch_config *cfg, etch_backend *b,
                                   etch_session **out) {
  return session_new(cfg, b, out);
}

/* A session whose chunks go to `given`, or to an in-process buffer made
 * from the config when it is NULL; `given` is the session's (destroyed
 * with it, or here on failure). */
static int session_new(const etch_config *cfg, etch_backend *given,
                       etch_session **out) {
  *out = NULL;
  etch__global_init();
  etch_config *owned = NULL;
  if (!cfg) {
    int rc = etch_config_new(&owned);
    if (rc) return rc;
    cfg = owned;
  }
  etch_session *s = (etch_session *)etch__calloc(1, sizeof *s);
  int rc = s ? etch__config_copy(&s->cfg, cfg) : ETCH_ENOMEM;
  etch_config_free(owned);
  if (rc) {
    free(s);
    if (given) given->ops->destroy(given);
    return rc;
  }
  if (s->cfg.output) {
    char *abs = etch__output_resolve(s->cfg.output, &rc);
    if (!abs) {
      etch__config_release(&s->cfg);
      free(s);
      if (given) given->ops->destroy(given);
      return rc;
    }
    free(s->cfg.output);
    s->cfg.output = abs;
    struct stat st;
    if (stat(abs, &st) == 0 && S_ISREG(st.st_mode)) {
      s->out_existed = true;
      s->out_dev = (uint64_t)st.st_dev;
      s->out_ino = (uint64_t)st.st_ino;
      s->out_mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull +
                        (uint64_t)st.st_mtim.tv_nsec;
    }
  }
  rc = etch__filter_parse(&s->filter, s->cfg.categories);
  if (rc == ETCH_OK && s->cfg.flight && (given || s->cfg.interceptor))
    rc = etch__error(ETCH_ECONFIG,
                     "config: flight=%s: the flight recorder keeps the "
                     "in-process ring in a file; %s",
                     s->cfg.flight,
                     given ? "this session's chunks go to a service"
                           : "an intercepted session has no ring");
  char *flight = NULL;
  if (rc == ETCH_OK && s->cfg.flight)
    rc = etch__flight_path(s->cfg.flight, &flight);
  if (rc == ETCH_OK && s->cfg.write_period_ms && !s->cfg.output)
    rc = etch__error(ETCH_ECONFIG,
                     "config: write_period_ms=%llu: the trace is written "
                     "while recording into the output file, and there is "
                     "none (option output, ETCH_OUT)",
                     (unsigned long long)s->cfg.write_period_ms);
  if (rc == ETCH_OK && s->cfg.write_period_ms && s->cfg.flight)
    rc = etch__error(ETCH_ECONFIG,
                     "config: write_period_ms and flight=%s: the trace is "
                     "either written while recording or kept in a flight "
                     "file for a death; choose one",
                     s->cfg.flight);
  if (rc == ETCH_OK && s->cfg.write_period_ms && given)
    rc = etch__error(ETCH_ECONFIG,
                     "config: write_period_ms: this session's chunks go to a "
                     "service, which writes its trace (TraceConfig's "
                     "write_into_file)");
  if (rc == ETCH_OK && s->cfg.interceptor && (given || s->cfg.output))
    rc = etch__error(ETCH_ECONFIG,
                     "config: interceptor=%s: an intercepted session's "
                     "packets go to the interceptor, %s",
                     s->cfg.interceptor,
                     given ? "not to this session's service"
                           : "so it writes no output file");
  if (rc == ETCH_OK && given) {
    s->backend = given;
    given = NULL;
  } else if (rc == ETCH_OK && s->cfg.interceptor) {
    rc = etch__backend_intercept_new(&s->cfg, &s->backend);
  } else if (rc == ETCH_OK) {
    rc = etch__backend_inproc_new(s->cfg.buffer_kb * 1024,
                                  s->cfg.fill != ETCH_FILL_RING
                                      ? ETCH_BUFFER_DISCARD
                                      : ETCH_BUFFER_RING,
                                  flight, s->cfg.flight_keep != 0,
                                  &s->backend);
    /* stall: a discard buffer whose writers wait while it streams. */
    if (rc == ETCH_OK && s->cfg.fill == ETCH_FILL_STALL)
      etch__backend_inproc_stall(s->backend);
  }
  free(flight);
  if (given) given->ops->destroy(given);
  if (rc) {
    etch__filter_free(&s->filter);
    etch__config_release(&s->cfg);
    free(s);
    return rc;
  }
  s->reset_interval_ns = s->cfg.reset_interval_ms * 1000000ull;
  s->refs = 1;
  pthread_mutex_init(&s->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->cond, &ca);
  pthread_condattr_destroy(&ca);

  pthread_mutex_lock(&etch__g.lock);
  uint32_t slot = ETCH_MAX_SESSIONS;
  for (uint32_t i = 0; i < ETCH_MAX_SESSIONS; i++)
    if (!etch__g.slots[i]) {
      slot = i;
      break;
    }
  if (slot == ETCH_MAX_SESSIONS) {
    pthread_mutex_unlock(&etch__g.lock);
    s->owner_released = true;
    s->refs = 0;
    s->backend->ops->destroy(s->backend);
    etch__filter_free(&s->filter);
    etch__config_release(&s->cfg);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s);
    return etch__error(ETCH_EBUSY, "all %d session slots are in use",
                       ETCH_MAX_SESSIONS);
  }
  s->slot = slot;
  if (!etch__slot_gen[slot])
    __atomic_store_n(&etch__slot_gen[slot], 1, __ATOMIC_RELAXED);
  s->gen = __atomic_load_n(&etch__slot_gen[slot], __ATOMIC_RELAXED);
  etch__g.slots[slot] = s;
  pthread_mutex_unlock(&etch__g.lock);
  *out = s;
  return ETCH_OK;
}

static void *timer_main(void *arg) {
  etch_session *s = (etch_session *)arg;
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  uint64_t ms = s->cfg.duration_ms;
  deadline.tv_sec += (time_t)(ms / 1000);
  deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&s->lock);
  int rc = 0;
  while (__atomic_load_n(&s->state, __ATOMIC_RELAXED) == ETCH_SESS_RUNNING &&
         rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&s->cond, &s->lock, &deadline);
  pthread_mutex_unlock(&s->lock);
  if (__atomic_load_n(&s->state, __ATOMIC_RELAXED) == ETCH_SESS_RUNNING)
    etch_session_stop(s);
  etch__session_release(s);
  return NULL;
}

int etch_session_start(etch_session *s) {
  if (!s) return etch__error(ETCH_EINVAL, "etch_session_start: NULL session");
  bool fresh = __atomic_load_n(&s->state, __ATOMIC_RELAXED) == ETCH_SESS_NEW;
  /* The output is opened and its thread runs before the first event. */
  if (fresh && s->cfg.write_period_ms && !s->stream) {
    if (!s->backend->ops->collect)
      return etch__error(ETCH_ECONFIG, "config: write_period_ms: this "
                         "session's trace cannot be written while it records");
    int rc = etch__stream_start(s);
    if (rc) return rc;
  }
  /* The backend starts before the first event can reach it, outside the
   * global lock (an interceptor's start may emit events). */
  if (fresh && s->backend->ops->start) s->backend->ops->start(s->backend);
  pthread_mutex_lock(&etch__g.lock);
  if (s->state != ETCH_SESS_NEW) {
    pthread_mutex_unlock(&etch__g.lock);
    return etch__error(
        ETCH_ESTATE, "%s",
        s->state == ETCH_SESS_RUNNING
            ? "etch_session_start: the session is already started"
            : "etch_session_start: the session was stopped, and a stopped "
              "session cannot be started again: make a new one with "
              "etch_session_new");
  }
  s->start_ns = etch__boottime_ns();
  __atomic_store_n(&s->state, ETCH_SESS_RUNNING, __ATOMIC_RELAXED);
  etch__categories_apply(s, true);
  pthread_mutex_unlock(&etch__g.lock);
  if (s->cfg.sample_hz) etch__sample_start(s);
  if (s->cfg.duration_ms) {
    pthread_mutex_lock(&s->lock);
    s->refs++;
    pthread_mutex_unlock(&s->lock);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&s->timer, &a, timer_main, s) != 0) {
      etch__session_release(s);
      pthread_attr_destroy(&a);
      etch_session_stop(s);
      return etch__error(ETCH_ENOMEM, "cannot start the duration timer");
    }
    pthread_attr_destroy(&a);
    s->timer_started = true;
  }
  return ETCH_OK;
}

int etch_session_flush(etch_session *s) {
  if (!s) return etch__error(ETCH_EINVAL, "etch_session_flush: NULL session");
  /* Writers publish every packet with a release store as they finish it,
   * and reads take the buffer lock and acquire-load each chunk's length:
   * whatever completed before this call is already visible to a read. */
  uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
  if (st == ETCH_SESS_NEW)
    return etch__error(ETCH_ESTATE, "session not started");
  /* A session that writes while it records: into the file now. */
  if (s->stream && st == ETCH_SESS_RUNNING) return etch__stream_flush(s->stream);
  return ETCH_OK;
}

/*
 * Stopping writes the output once. Whoever stops a session that is being
 * written by another thread (the duration timer, a signal) waits for that
 * write and returns its result, so an exit right after the timer fired
 * still leaves the whole trace behind.
 */
int etch_session_stop(etch_session *s) {
  if (!s) return etch__error(ETCH_EINVAL, "etch_session_stop: NULL session");
  /* What features still hold for the stopping thread (memory tracing's
   * live-bytes changes not yet written), while the session takes them: at
   * exit this is the main thread's. */
  if (__atomic_load_n(&s->state, __ATOMIC_RELAXED) == ETCH_SESS_RUNNING) {
    if (s->cfg.sample_hz) etch__sample_stop(s);
    etch__feature_hooks_before_stop();
  }
  pthread_mutex_lock(&etch__g.lock);
  bool was_running = s->state == ETCH_SESS_RUNNING;
  if (s->state != ETCH_SESS_STOPPED) {
    etch__categories_apply(s, false);
    s->stop_ns = etch__boottime_ns();
    __atomic_store_n(&s->state, ETCH_SESS_STOPPED, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&etch__g.lock);
  /* Events already past the state check may still arrive; the backend
   * waits for them. */
  if (was_running && s->backend->ops->stop) s->backend->ops->stop(s->backend);
  pthread_mutex_lock(&s->lock);
  pthread_cond_broadcast(&s->cond);
  bool write = was_running && s->cfg.output && !s->output_written;
  if (write) {
    s->output_written = true;
    s->output_busy = true;
  }
  while (!write && s->output_busy) pthread_cond_wait(&s->cond, &s->lock);
  int rc = write ? ETCH_OK : s->output_rc;
  char msg[sizeof s->output_err];
  memcpy(msg, s->output_err, sizeof msg);
  pthread_mutex_unlock(&s->lock);
  if (!write) return rc ? etch__error(rc, "%s", msg) : ETCH_OK;

  char *path = NULL;
  size_t bytes = 0;
  rc = etch__session_write_output(s, s->cfg.output, &path, &bytes);
  if (rc) snprintf(msg, sizeof msg, "%s", etch_last_error());
  /* Written: a flight file need not outlive the process (kept when the
   * write failed: it is then what there is of the trace). */
  if (!rc && s->backend->ops->trace_written)
    s->backend->ops->trace_written(s->backend);
  if (s->on_output) s->on_output(s, rc, path ? path : s->cfg.output, bytes);
  free(path);
  pthread_mutex_lock(&s->lock);
  s->output_busy = false;
  s->output_rc = rc;
  if (rc) memcpy(s->output_err, msg, sizeof msg);
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->lock);
  return rc ? etch__error(rc, "%s", msg) : ETCH_OK;
}

int etch_session_write_file(etch_session *s, const char *path) {
  if (!s || !path || !*path)
    return etch__error(ETCH_EINVAL, "etch_session_write_file: %s",
                       !s ? "NULL session" : "empty path");
  if (s->stream)
    return etch__error(ETCH_EINVAL, "etch_session_write_file: the session "
                       "writes its trace into %s while it records",
                       s->cfg.output);
  return etch__session_write_output(s, path, NULL, NULL);
}

int etch_session_read(etch_session *s, uint8_t **data, size_t *len) {
  if (!s || !data || !len)
    return etch__error(ETCH_EINVAL, "etch_session_read: NULL argument");
  if (s->stream)
    return etch__error(ETCH_EINVAL, "etch_session_read: the session writes "
                       "its trace into %s while it records", s->cfg.output);
  return etch__session_serialize(s, data, len);
}

uint32_t *etch__session_track_open(etch_session *s, const etch_track *t) {
  static uint32_t untracked; /* beyond the table: never read */
  uint32_t page = t->id / ETCH_TRACK_PAGE;
  if (page >= ETCH_TRACK_PAGES) return &untracked;
  uint32_t *p = __atomic_load_n(&s->track_open[page], __ATOMIC_ACQUIRE);
  if (!p) {
    uint32_t *fresh = (uint32_t *)etch__calloc(ETCH_TRACK_PAGE, sizeof *fresh);
    if (!fresh) return NULL;
    if (__atomic_compare_exchange_n(&s->track_open[page], &p, fresh, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
      p = fresh;
    else
      free(fresh); /* another thread's page won; p is it */
  }
  return &p[t->id % ETCH_TRACK_PAGE];
}

bool etch__session_track_close(etch_session *s, const etch_track *t) {
  uint32_t page = t->id / ETCH_TRACK_PAGE;
  if (page >= ETCH_TRACK_PAGES) return true;
  uint32_t *p = __atomic_load_n(&s->track_open[page], __ATOMIC_ACQUIRE);
  if (!p) return false;
  uint32_t *c = &p[t->id % ETCH_TRACK_PAGE];
  uint32_t n = __atomic_load_n(c, __ATOMIC_RELAXED);
  do {
    if (!n) return false;
  } while (!__atomic_compare_exchange_n(c, &n, n - 1, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
  return true;
}

void etch__session_release(etch_session *s) {
  pthread_mutex_lock(&s->lock);
  bool last = --s->refs == 0;
  pthread_mutex_unlock(&s->lock);
  if (!last) return;
  etch__stream_free(s->stream); /* its thread reads the backend */
  s->backend->ops->destroy(s->backend);
  for (etch_writer *w = s->writers, *next; w; w = next) {
    next = w->next;
    etch__writer_free(w);
  }
  for (uint32_t i = 0; i < ETCH_TRACK_PAGES; i++) free(s->track_open[i]);
  etch__filter_free(&s->filter);
  etch__config_release(&s->cfg);
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->cond);
  free(s);
}

/* Backends of the parent's sessions that cannot be freed in a fork child
 * (no `forget`): kept here, reachable, so that LeakSanitizer does not
 * count them. A few per fork generation at most; beyond the array's room
 * they are simply dropped. */
static etch_backend *kept_backends[4 * ETCH_MAX_SESSIONS];

void etch__session_forget_inherited(etch_session *s) {
  if (!s) return;
  /* The writers of the parent's threads (none of which run here; this
   * thread's writer was forgotten with the slots), its config, filter and
   * track pages. The lock and the condition may be held by a thread that
   * is not here: neither is touched; nor is the timer thread (the
   * parent's) or the output (the parent writes it). */
  etch__stream_forget(s->stream);
  if (s->backend->ops->forget) {
    s->backend->ops->forget(s->backend);
  } else {
    for (size_t i = 0; i < ETCH_ARRAY_SIZE(kept_backends); i++) {
      if (!kept_backends[i]) {
        kept_backends[i] = s->backend;
        break;
      }
    }
  }
  for (etch_writer *w = s->writers, *next; w; w = next) {
    next = w->next;
    etch__writer_free(w);
  }
  for (uint32_t i = 0; i < ETCH_TRACK_PAGES; i++) free(s->track_open[i]);
  etch__filter_free(&s->filter);
  etch__config_release(&s->cfg);
  free(s);
}

void etch_session_free(etch_session *s) {
  if (!s) return;
  etch_session_stop(s);
  pthread_mutex_lock(&etch__g.lock);
  if (etch__g.slots[s->slot] == s) {
    etch__g.slots[s->slot] = NULL;
    uint32_t g = etch__slot_gen[s->slot] + 1;
    __atomic_store_n(&etch__slot_gen[s->slot], g ? g : 1, __ATOMIC_SEQ_CST);
  }
  pthread_mutex_unlock(&etch__g.lock);
  /* Send every writer still attached to its slow path (after the new
   * generation, which take_chunk in writer.c checks after it sets the
   * room: one of the two stores is seen). */
  pthread_mutex_lock(&s->lock);
  for (etch_writer *w = s->writers; w; w = w->next)
    __atomic_store_n(&w->fast_end, 0, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&s->lock);
  /* This thread's own writer can go now; others go when their thread
   * notices or exits. */
  etch_writer *mine = etch__tls_writer(s->slot);
  if (mine && mine->sess == s) {
    etch__tls_forget(s->slot);
    etch__writer_detach(mine);
  }
  etch__session_release(s);
}

int etch_session_get_stats(etch_session *s, etch_session_stats *out) {
  if (!s || !out)
    return etch__error(ETCH_EINVAL, "etch_session_get_stats: NULL argument");
  memset(out, 0, sizeof *out);
  etch_buffer_stats bs;
  s->backend->ops->stats(s->backend, &bs);
  out->buffer_size = bs.buffer_size;
  out->chunks_written = bs.chunks_written;
  out->chunks_overwritten = bs.chunks_overwritten;
  out->bytes_written = bs.chunks_written * s->backend->chunk_size;
  etch__feature_hooks_stats(out); /* important events' figures */
  pthread_mutex_lock(&s->lock);
  for (etch_writer *w = s->writers; w; w = w->next) {
    uint64_t d = __atomic_load_n(&w->dropped, __ATOMIC_RELAXED);
    out->writers++;
    out->events_dropped += d;
    if (d) out->writers_with_drops++;
  }
  pthread_mutex_unlock(&s->lock);
  return ETCH_OK;
}

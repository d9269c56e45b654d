/*
 * svc_losses_test.c - etchd end to end: data loss in the service and in the
 * shared memory, counted per writer: full discard buffers, drops while a
 * consumer is stopped, stalling writers, slices that nest across lost
 * events.
 */
#define _GNU_SOURCE
#include "svc_test.h"

/* The same into a buffer far too small: what is kept is each thread's
 * first events in order, the loss is counted, nothing is corrupted. */
TEST(a_full_discard_buffer_keeps_clean_prefixes) {
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "small",
                            "buffers { size_kb: 256 fill_policy: DISCARD }\n"
                            "data_sources { config { name: \"track_event\" } }\n",
                            NULL, out, sizeof out);
  pid_t p[4];
  for (int i = 0; i < 4; i++)
    p[i] = producer("small", 2, SANITIZED ? 20000 : 50000);
  for (int i = 0; i < 4; i++) ASSERT_EQ_INT(wait_exit(p[i]), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  long kept = 0;
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 2; k++)
      if (worker_track(&t, p[i], k))
        kept += check_ticks(&t, pids, 4096, p[i], k, -1);
  ASSERT_TRUE(kept > 1000 && kept < 4 * 2 * (SANITIZED ? 20000 : 50000));
  ASSERT_TRUE(t.has_stats);
  ASSERT_TRUE(t.stat_discarded > 0);
  td_free(&t);
  svc_stop(&s);
}

/* Ticks on the track of pid's worker-k and etch.dropped_events counts on
 * it (the writer's own reports and the service's). */
static void ticks_and_drops(const td_trace *t, int32_t pid, int k,
                            long *arrived, long *dropped) {
  *arrived = *dropped = 0;
  const td_track *tr = worker_track(t, pid, k);
  if (!tr) return;
  for (size_t i = 0; i < t->nev; i++) {
    const td_event *e = &t->ev[i];
    if (e->track != tr->uuid || !e->name) continue;
    if (!strcmp(e->name, "tick")) (*arrived)++;
    if (!strcmp(e->name, "etch.dropped_events"))
      *dropped += (long)td_arg_of(e, "count")->i;
  }
}

/*
 * Events lost in the service are counted per writer: four producers of two
 * threads flood a 256 KiB discard buffer, then a 512 KiB ring. With a
 * discard buffer every thread's ticks that did not arrive are in an
 * etch.dropped_events on its own track (the service's, where = "service"),
 * and every process's on its sequences (a thread none of whose chunks got
 * in has no track: its count is on the global track, with its pid); with
 * the ring, all of them together are.
 */
TEST(losses_in_the_service_are_counted_per_writer) {
  const long n = SANITIZED ? 20000 : 50000;
  for (int ring = 0; ring < 2; ring++) {
    svc s;
    svc_start(&s);
    char out[700];
    pid_t rec = record_config(
        &s, ring ? "ring" : "discard",
        ring ? "buffers { size_kb: 512 fill_policy: RING_BUFFER }\n"
               "data_sources { config { name: \"track_event\" } }\n"
             : "buffers { size_kb: 256 fill_policy: DISCARD }\n"
               "data_sources { config { name: \"track_event\" } }\n",
        NULL, out, sizeof out);
    pid_t p[4];
    for (int i = 0; i < 4; i++) p[i] = producer("lossy", 2, n);
    for (int i = 0; i < 4; i++) ASSERT_EQ_INT(wait_exit(p[i]), 0);
    kill(rec, SIGINT);
    ASSERT_EQ_INT(wait_exit(rec), 0);
    td_trace t;
    static int32_t pids[4096];
    decode(out, &t, pids, 4096);
    long all_arrived = 0, all_dropped = 0, service_notes = 0;
    for (size_t i = 0; i < t.nev; i++) {
      const td_event *e = &t.ev[i];
      if (!e->name || strcmp(e->name, "etch.dropped_events")) continue;
      all_dropped += (long)td_arg_of(e, "count")->i;
      const td_arg *w = td_arg_of(e, "where");
      if (w && w->s && !strcmp(w->s, "service")) service_notes++;
    }
    for (int i = 0; i < 4; i++) {
      /* Per process: its ticks and the counts on its sequences (trusted
       * pid), wherever they landed. */
      long proc = 0;
      for (size_t j = 0; j < t.nev; j++) {
        const td_event *e = &t.ev[j];
        if (!e->name || e->seq >= 4096 || pids[e->seq] != p[i]) continue;
        if (!strcmp(e->name, "etch.dropped_events"))
          proc += (long)td_arg_of(e, "count")->i;
      }
      long trackless = 0;
      for (int k = 0; k < 2; k++) {
        long arrived, dropped;
        ticks_and_drops(&t, p[i], k, &arrived, &dropped);
        all_arrived += arrived;
        proc += arrived;
        /* A thread with a track has its count on it; one without may
         * have lost the important Svc.Start replayed into its sequence
         * too. */
        trackless += !worker_track(&t, p[i], k);
        if (!ring && worker_track(&t, p[i], k) && arrived + dropped != n)
          FAIL("discard: pid %d worker-%d: %ld arrived, %ld counted lost, of "
               "%ld", (int)p[i], k, arrived, dropped, n);
      }
      if (!ring && (proc < 2 * n || proc > 2 * n + trackless))
        FAIL("discard: pid %d: %ld events arrived or counted lost, of %ld",
             (int)p[i], proc, 2 * n);
    }
    /* The ring: each sequence's Svc.Start (replayed at its start) may be
     * among what was overwritten. */
    if (all_arrived + all_dropped < 8 * n || all_arrived + all_dropped > 8 * n + 8)
      FAIL("%s: %ld arrived, %ld counted lost, of %ld", ring ? "ring" : "discard",
           all_arrived, all_dropped, 8 * n);
    ASSERT_TRUE(service_notes > 0);
    td_free(&t);
    svc_stop(&s);
  }
}

static int cmp_ts(const void *a, const void *b) {
  const td_event *x = *(const td_event *const *)a, *y = *(const td_event *const *)b;
  if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* On pid's worker-k track, in time order: every slice end closes an open
 * slice, "outer" opens at the top, "inner" under "outer" or alone; the
 * slices open at the end in *open; the outer slices in the return. */
static long check_nesting(const td_trace *t, int32_t pid, int k, int *open) {
  const td_track *tr = worker_track(t, pid, k);
  *open = 0;
  if (!tr) return 0;
  const td_event **ev = (const td_event **)malloc((t->nev + 1) * sizeof *ev);
  ASSERT_TRUE(ev != NULL);
  size_t m = 0;
  for (size_t i = 0; i < t->nev; i++)
    if (t->ev[i].track == tr->uuid && (t->ev[i].type == 1 || t->ev[i].type == 2))
      ev[m++] = &t->ev[i];
  qsort(ev, m, sizeof *ev, cmp_ts);
  const char *stack[8];
  int depth = 0;
  long outers = 0;
  for (size_t i = 0; i < m; i++) {
    const td_event *e = ev[i];
    if (e->type == 2) {
      if (depth == 0)
        FAIL("pid %d worker-%d: an end at %llu closes nothing", (int)pid, k,
             (unsigned long long)e->ts);
      depth--;
      continue;
    }
    bool outer = !strcmp(e->name, "outer");
    if (!outer && strcmp(e->name, "inner")) FAIL("slice %s", e->name);
    if (outer ? depth != 0 : depth > 1 || (depth && strcmp(stack[0], "outer")))
      FAIL("pid %d worker-%d: %s at depth %d (at %llu)", (int)pid, k, e->name,
           depth, (unsigned long long)e->ts);
    stack[depth++] = e->name;
    outers += outer;
  }
  free(ev);
  *open = depth;
  return outers;
}

/*
 * A discard buffer that fills cuts every writer's slices where it stopped
 * keeping them: etchd ends the slices its kept data left open there, so
 * none runs on to the end of the trace (four producers of two threads
 * recording outer { inner { tick } } into 256 KiB).
 */
TEST(a_full_discard_buffer_leaves_no_slice_open) {
  const long n = SANITIZED ? 20000 : 50000;
  svc s;
  svc_start(&s);
  char out[700];
  pid_t rec = record_config(&s, "cut",
                            "buffers { size_kb: 256 fill_policy: DISCARD }\n"
                            "data_sources { config { name: \"track_event\" } }\n",
                            NULL, out, sizeof out);
  pid_t p[4];
  for (int i = 0; i < 4; i++) p[i] = producer_mode("cut", 2, n, "outer");
  for (int i = 0; i < 4; i++) ASSERT_EQ_INT(wait_exit(p[i]), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  long outers = 0;
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 2; k++) {
      int open;
      outers += check_nesting(&t, p[i], k, &open);
      if (open) FAIL("pid %d worker-%d: %d slices open", (int)p[i], k, open);
    }
  ASSERT_TRUE(outers > 0 && outers < 8 * n);
  td_free(&t);
  svc_stop(&s);
}

/* What the task of `pid` named `comm` is doing: 0 when there is none, 1
 * when it is in nanosleep or clock_nanosleep, 2 otherwise (/proc's
 * task/TID/comm and syscall). */
static int task_doing(pid_t pid, const char *comm) {
  char path[400], line[256];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  int found = 0;
  struct dirent *de;
  while (d && !found && (de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "/proc/%d/task/%s/comm", (int)pid, de->d_name);
    FILE *f = fopen(path, "r");
    bool named = f && fgets(line, sizeof line, f) &&
                 strncmp(line, comm, strlen(comm)) == 0 &&
                 line[strlen(comm)] == '\n';
    if (f) fclose(f);
    if (!named) continue;
    found = 2;
    snprintf(path, sizeof path, "/proc/%d/task/%s/syscall", (int)pid,
             de->d_name);
    f = fopen(path, "r");
    long nr = -1;
    if (f && fscanf(f, "%ld", &nr) == 1 &&
        (nr == SYS_clock_nanosleep
#ifdef SYS_nanosleep
         || nr == SYS_nanosleep
#endif
         ))
      found = 1;
    if (f) fclose(f);
  }
  if (d) closedir(d);
  return found;
}

/* Until the flood that etchd, stopped, cannot take has done what it is
 * for: with `stall`, both workers seen waiting for a chunk (their only
 * sleep then); without, worker-1 has ended (dropping what did not fit)
 * and worker-0 sleeps in its pause after the flood (svc_producer's
 * "pause"). The event itself, not a time window. */
static void wait_flooded(pid_t p, bool stall) {
  bool seen[2] = {false, false};
  for (int i = 0; i < 300000; i++) { /* 30 s at most */
    if (stall) {
      for (int k = 0; k < 2; k++)
        seen[k] |= task_doing(p, k ? "worker-1" : "worker-0") == 1;
      if (seen[0] && seen[1]) return;
    } else if (task_doing(p, "worker-1") == 0 &&
               task_doing(p, "worker-0") == 1) {
      return;
    }
    struct timespec d = {0, 100000};
    nanosleep(&d, NULL);
  }
  FAIL("the producer (pid %d) did not %s", (int)p,
       stall ? "stall on its full shared memory"
             : "get to the end of its flood");
}

/*
 * Records a producer (svc_producer NAME 2 N pause) with a 256 KiB shared
 * memory, stalling for room when `stall`, while etchd is stopped (SIGSTOP)
 * from before its threads start until they have flooded it (wait_flooded;
 * the producer stops itself once its session is there, and the test lets
 * it go on); decodes the trace into *t. The producer's pid.
 */
static pid_t flood_while_stopped(svc *s, const char *name, long n, bool stall,
                                 td_trace *t, int32_t *pids) {
  char out[700];
  snprintf(out, sizeof out, "%s/%s.pftrace", s->dir, name);
  pid_t rec = record_start(s, out, NULL);
  setenv("ETCH_SYSTEM_SMB_KB", "256", 1);
  if (stall) setenv("ETCH_SYSTEM_STALL_MS", "5000", 1);
  pid_t p = producer_mode(name, 2, n, "pause");
  unsetenv("ETCH_SYSTEM_SMB_KB");
  unsetenv("ETCH_SYSTEM_STALL_MS");
  int st;
  ASSERT_EQ_INT(waitpid(p, &st, WUNTRACED), p); /* its session is there */
  ASSERT_TRUE(WIFSTOPPED(st));
  kill(s->pid, SIGSTOP);
  kill(p, SIGCONT);
  /* etchd stays stopped until the producer has flooded its shared memory
   * (every tick arrives or is counted dropped however long it is). */
  wait_flooded(p, stall);
  kill(s->pid, SIGCONT);
  ASSERT_EQ_INT(wait_exit(p), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  decode(out, t, pids, 4096);
  return p;
}

/*
 * Writers that found the shared memory full drop, counted, and record
 * again once there is room: etchd is stopped (SIGSTOP) while a producer
 * with a 256 KiB shared memory floods it from two threads, then let go
 * once thread 1 has ended and thread 0 pauses.
 * Thread 0 records again 0.8 s later (its drops reported as it starts
 * over); thread 1 ends while dropping (its drops reported for it later, on
 * its own sequence). For each, every tick either arrives, in order, or is
 * counted in its etch.dropped_events; thread 0's "after" arrives.
 */
TEST(full_shared_memory_drops_are_counted_and_writers_record_again) {
  const long n = SANITIZED ? 50000 : 200000;
  svc s;
  svc_start(&s);
  td_trace t;
  static int32_t pids[4096];
  pid_t p = flood_while_stopped(&s, "full", n, false, &t, pids);
  for (int k = 0; k < 2; k++) {
    const td_track *tr = worker_track(&t, p, k);
    ASSERT_TRUE(tr != NULL);
    long arrived = 0, last = -1, dropped = 0, after = 0;
    for (size_t i = 0; i < t.nev; i++) {
      const td_event *e = &t.ev[i];
      if (e->track != tr->uuid || !e->name) continue;
      if (e->seq >= 4096 || pids[e->seq] != p) FAIL("sequence %u", e->seq);
      if (!strcmp(e->name, "tick")) {
        const td_arg *a = td_arg_of(e, "i");
        ASSERT_TRUE(a != NULL);
        if (a->i <= last)
          FAIL("worker-%d: tick %lld after %ld", k, (long long)a->i, last);
        last = (long)a->i;
        arrived++;
      } else if (!strcmp(e->name, "etch.dropped_events")) {
        const td_arg *a = td_arg_of(e, "count");
        ASSERT_TRUE(a != NULL);
        dropped += (long)a->i;
      } else if (!strcmp(e->name, "after")) {
        after++;
      }
    }
    if (arrived + dropped != n)
      FAIL("worker-%d: %ld ticks arrived and %ld were counted dropped, of %ld",
           k, arrived, dropped, n);
    ASSERT_EQ_INT(after, k == 0 ? 1 : 0);
    fprintf(stderr, "  (worker-%d: %ld of %ld ticks dropped)\n", k, dropped, n);
  }
  td_free(&t);
  svc_stop(&s);
}

/*
 * A producer that exits with its shared memory full still counts every
 * drop: etchd is stopped while two threads and then the main thread flood
 * a 256 KiB shared memory; the producer exits as etchd goes on. The main
 * thread's drops (its writer never leaves) and the threads' (they left
 * while it was full) are reported at exit: every tick of each arrives, in
 * order, or is counted in an etch.dropped_events.
 */
TEST(a_producer_exiting_with_its_shared_memory_full_counts_every_drop) {
  const long n = SANITIZED ? 50000 : 200000;
  svc s;
  svc_start(&s);
  char out[700];
  snprintf(out, sizeof out, "%s/exitfull.pftrace", s.dir);
  pid_t rec = record_start(&s, out, NULL);
  setenv("ETCH_SYSTEM_SMB_KB", "256", 1);
  pid_t p = producer_mode("exitfull", 2, n, "xfull");
  unsetenv("ETCH_SYSTEM_SMB_KB");
  int st;
  ASSERT_EQ_INT(waitpid(p, &st, WUNTRACED), p); /* its session is there */
  ASSERT_TRUE(WIFSTOPPED(st));
  kill(s.pid, SIGSTOP);
  kill(p, SIGCONT);
  ASSERT_EQ_INT(waitpid(p, &st, WUNTRACED), p); /* flooded, about to exit */
  ASSERT_TRUE(WIFSTOPPED(st));
  kill(p, SIGCONT);
  kill(s.pid, SIGCONT);
  ASSERT_EQ_INT(wait_exit(p), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  long all_dropped = 0;
  for (int k = 0; k < 3; k++) {
    const td_track *tr = worker_track(&t, p, k);
    if (!tr) FAIL("no track worker-%d", k);
    long arrived = 0, last = -1, dropped = 0;
    for (size_t i = 0; i < t.nev; i++) {
      const td_event *e = &t.ev[i];
      if (e->track != tr->uuid || !e->name) continue;
      if (!strcmp(e->name, "tick")) {
        const td_arg *a = td_arg_of(e, "i");
        ASSERT_TRUE(a != NULL);
        if (a->i <= last)
          FAIL("worker-%d: tick %lld after %ld", k, (long long)a->i, last);
        last = (long)a->i;
        arrived++;
      } else if (!strcmp(e->name, "etch.dropped_events")) {
        dropped += (long)td_arg_of(e, "count")->i;
      }
    }
    if (arrived + dropped != n)
      FAIL("worker-%d: %ld ticks arrived and %ld were counted dropped, of %ld",
           k, arrived, dropped, n);
    all_dropped += dropped;
  }
  ASSERT_TRUE(all_dropped > 0);
  td_free(&t);
  svc_stop(&s);
}

/*
 * Nesting survives lost events (#5142): two threads record outer { inner {
 * tick } } while etchd is stopped, so that their 256 KiB shared memory fills
 * and they drop; then etchd goes on and so do they. A begin lost inside
 * the stretch of drops must not let its end close the enclosing slice, and
 * an end lost must not leave its slice open to the end of the trace. On
 * each thread's track, in time order: every end closes an open slice,
 * "outer" opens only at the top level and "inner" only inside "outer" (or
 * alone, its outer lost), nothing is left open; and some events were
 * lost.
 */
TEST(slices_nest_rightly_across_lost_events) {
  const long n = SANITIZED ? 40000 : 150000;
  svc s;
  svc_start(&s);
  char out[700];
  snprintf(out, sizeof out, "%s/nest.pftrace", s.dir);
  pid_t rec = record_start(&s, out, NULL);
  setenv("ETCH_SYSTEM_SMB_KB", "256", 1);
  pid_t p = producer_mode("nest", 2, n, "nest");
  unsetenv("ETCH_SYSTEM_SMB_KB");
  int st;
  ASSERT_EQ_INT(waitpid(p, &st, WUNTRACED), p); /* its session is there */
  ASSERT_TRUE(WIFSTOPPED(st));
  kill(s.pid, SIGSTOP);
  kill(p, SIGCONT);
  ASSERT_EQ_INT(waitpid(p, &st, WUNTRACED), p); /* half way, dropping */
  ASSERT_TRUE(WIFSTOPPED(st));
  kill(s.pid, SIGCONT);
  kill(p, SIGCONT);
  ASSERT_EQ_INT(wait_exit(p), 0);
  kill(rec, SIGINT);
  ASSERT_EQ_INT(wait_exit(rec), 0);
  td_trace t;
  static int32_t pids[4096];
  decode(out, &t, pids, 4096);
  long dropped = 0;
  for (size_t i = 0; i < t.nev; i++)
    if (t.ev[i].name && !strcmp(t.ev[i].name, "etch.dropped_events"))
      dropped += (long)td_arg_of(&t.ev[i], "count")->i;
  ASSERT_TRUE(dropped > 0);
  const td_event **ev = (const td_event **)malloc(t.nev * sizeof *ev);
  ASSERT_TRUE(ev != NULL);
  for (int k = 0; k < 2; k++) {
    const td_track *tr = worker_track(&t, p, k);
    if (!tr) FAIL("no track worker-%d", k);
    size_t m = 0;
    for (size_t i = 0; i < t.nev; i++)
      if (t.ev[i].track == tr->uuid && (t.ev[i].type == 1 || t.ev[i].type == 2))
        ev[m++] = &t.ev[i];
    qsort(ev, m, sizeof *ev, cmp_ts);
    const char *stack[8];
    int depth = 0;
    long outers = 0;
    for (size_t i = 0; i < m; i++) {
      const td_event *e = ev[i];
      if (e->type == 2) {
        if (depth == 0) FAIL("worker-%d: an end at %llu closes nothing", k,
                             (unsigned long long)e->ts);
        depth--;
        continue;
      }
      bool outer = !strcmp(e->name, "outer");
      if (!outer && strcmp(e->name, "inner")) FAIL("slice %s", e->name);
      /* An inner whose outer was lost stands alone; under anything
       * else it is under a wrong parent. */
      if (outer ? depth != 0 : depth > 1 || (depth && strcmp(stack[0], "outer")))
        FAIL("worker-%d: %s at depth %d (at %llu)", k, e->name, depth,
             (unsigned long long)e->ts);
      stack[depth++] = e->name;
      outers += outer;
    }
    if (depth) FAIL("worker-%d: %d slices open at the end", k, depth);
    ASSERT_TRUE(outers > 0);
    fprintf(stderr, "  (worker-%d: %ld of %ld outer slices recorded)\n", k,
            outers, n);
  }
  free(ev);
  td_free(&t);
  svc_stop(&s);
}

/*
 * With ETCH_SYSTEM_STALL_MS a writer that finds the shared memory full
 * waits for a chunk (up to that long) instead of dropping: etchd stopped
 * while two threads flood a 256 KiB shared memory, until both wait, and
 * every tick arrives, in order, none reported lost.
 */
TEST(stalling_writers_lose_nothing) {
  const long n = SANITIZED ? 50000 : 200000;
  svc s;
  svc_start(&s);
  td_trace t;
  static int32_t pids[4096];
  pid_t p = flood_while_stopped(&s, "stall", n, true, &t, pids);
  for (int k = 0; k < 2; k++) check_ticks(&t, pids, 4096, p, k, n);
  ASSERT_EQ_INT((int)td_count(&t, 3, "etch.dropped_events"), 0);
  ASSERT_EQ_INT((int)t.prev_dropped, 0);
  ASSERT_EQ_INT((int)td_count(&t, 3, "after"), 1);
  td_free(&t);
  svc_stop(&s);
}

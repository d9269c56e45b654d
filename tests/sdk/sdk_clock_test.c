/*
 * sdk_clock_test.c - event times against CLOCK_BOOTTIME.
 *
 * Each thread reads BOOTTIME, records an instant on the fast path and reads
 * BOOTTIME again; the instant's time in the trace must lie between the two
 * readings, give or take 100 ns. Every run is a new process (the clock is
 * calibrated once per process and the first 100 ms are the hardest), some
 * with other processes spinning on every CPU.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sdk_common.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

ETCH_CATEGORY_DEFINE(clk, "clk", "", "");

#define THREADS 3
#define EARLY 300     /* events in the first ~100 ms, 300 us apart */
#define LATE 100      /* events later on */
#define SLACK_NS 100  /* the allowed distance outside the brackets */

typedef struct bracket {
  uint64_t before, after;
} bracket;

typedef struct thread_run {
  bracket b[EARLY + LATE];
  long tid;
} thread_run;

static uint64_t boottime(void) {
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void pause_us(long us) {
  struct timespec d = {0, us * 1000};
  nanosleep(&d, NULL);
}

static void *bracketed(void *arg) {
  thread_run *r = (thread_run *)arg;
  r->tid = gettid();
  for (int i = 0; i < EARLY + LATE; i++) {
    if (i == EARLY) pause_us(300000); /* the later stretch */
    r->b[i].before = boottime();
    ETCH_INSTANT(clk, "tick");
    r->b[i].after = boottime();
    pause_us(300);
  }
  return NULL;
}

/* One process's run; returns a description of the first violation in
 * `why`, or leaves it empty. */
static void run_once(char *why, size_t cap) {
  static thread_run runs[THREADS];
  etch_session *s = start_session("buffer_kb=4096;compression=none");
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, bracketed, &runs[i]);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "clock_brackets", &t);
  why[0] = 0;
  int64_t worst_all = 0;
  for (int k = 0; k < THREADS && !why[0]; k++) {
    const td_track *tr = NULL;
    for (size_t i = 0; i < t.ntracks; i++)
      if (t.tracks[i].is_thread && t.tracks[i].tid == runs[k].tid)
        tr = &t.tracks[i];
    if (!tr) {
      snprintf(why, cap, "no track for thread %ld", runs[k].tid);
      break;
    }
    int n = 0;
    int64_t worst = 0;
    int worst_i = -1;
    for (size_t i = 0; i < t.nev; i++) {
      const td_event *e = &t.ev[i];
      if (e->track != tr->uuid || e->type != 3) continue;
      if (n >= EARLY + LATE) {
        snprintf(why, cap, "thread %d: more events than recorded", k);
        break;
      }
      const bracket *b = &runs[k].b[n];
      int64_t out = 0;
      if (e->ts < b->before) out = (int64_t)(b->before - e->ts);
      if (e->ts > b->after) out = (int64_t)(e->ts - b->after);
      if (out > worst) {
        worst = out;
        worst_i = n;
      }
      n++;
    }
    if (!why[0] && n != EARLY + LATE)
      snprintf(why, cap, "thread %d: %d events, expected %d", k, n,
               EARLY + LATE);
    if (worst > worst_all) worst_all = worst;
    if (!why[0] && worst > SLACK_NS)
      snprintf(why, cap,
               "thread %d: event %d is %lld ns outside its BOOTTIME brackets",
               k, worst_i, (long long)worst);
  }
  /* The measured worst case, for docs/format.md (ctest -V shows it). */
  fprintf(stderr, "  clock run: worst %lld ns outside the brackets\n",
          (long long)worst_all);
  td_free(&t);
  etch_session_free(s);
}

/* Runs `runs` fresh processes, each with `spinners` processes spinning on
 * the CPUs meanwhile. */
static void check_runs(int runs, int spinners) {
  for (int r = 0; r < runs; r++) {
    pid_t spin[4];
    for (int i = 0; i < spinners; i++) {
      spin[i] = fork();
      ASSERT_TRUE(spin[i] >= 0);
      if (spin[i] == 0) {
        for (volatile unsigned long x = 0;; x++) {
        }
      }
    }
    int fd[2];
    ASSERT_TRUE(pipe(fd) == 0);
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
      close(fd[0]);
      char why[256];
      run_once(why, sizeof why);
      if (write(fd[1], why, strlen(why)) < 0) _exit(3);
      _exit(why[0] ? 1 : 0);
    }
    close(fd[1]);
    char why[256] = "";
    ssize_t got = read(fd[0], why, sizeof why - 1);
    why[got > 0 ? got : 0] = 0;
    close(fd[0]);
    int st;
    waitpid(pid, &st, 0);
    for (int i = 0; i < spinners; i++) {
      kill(spin[i], SIGKILL);
      waitpid(spin[i], NULL, 0);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      FAIL("run %d (%d spinning): %s", r, spinners,
           why[0] ? why : "the run failed");
  }
}

TEST(events_within_boottime_brackets) { check_runs(4, 0); }

TEST(events_within_boottime_brackets_under_load) { check_runs(3, 2); }

/* Conversions far beyond the fast path's product range after each pause
 * (the range cut to 20000 ticks): the slow path's exact conversion and the
 * re-anchoring after it keep every event inside its brackets. */
extern uint64_t etch__rel_cap_max;

TEST(events_within_boottime_brackets_across_long_pauses) {
  etch__rel_cap_max = 20000;
  check_runs(2, 0);
}

/* A kernel that took the TSC off its clock sources: etch falls back to
 * clock_gettime and says why in the trace. */
extern const char *etch__clock_root;

static void write_file(const char *dir, const char *rel, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s%s", dir, rel);
  for (char *p = path + strlen(dir) + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      mkdir(path, 0755);
      *p = '/';
    }
  FILE *f = fopen(path, "w");
  ASSERT_TRUE(f != NULL);
  fputs(text, f);
  fclose(f);
}

/* The trace's one etch.clock_fallback instant, whose reason must say
 * `reason_part`. */
static const td_event *fallback_note(const td_trace *t,
                                     const char *reason_part) {
  ASSERT_EQ_INT(td_count(t, 3, "etch.clock_fallback"), 1);
  const td_event *e = NULL;
  for (size_t i = 0; i < t->nev; i++)
    if (t->ev[i].name && strcmp(t->ev[i].name, "etch.clock_fallback") == 0)
      e = &t->ev[i];
  const td_arg *why = td_arg_of(e, "reason");
  ASSERT_TRUE(why && why->s);
  if (!strstr(why->s, reason_part))
    FAIL("reason \"%s\" does not say \"%s\"", why->s, reason_part);
  return e;
}

static void check_fallback(const char *avail, const char *flags,
                           const char *reason_part) {
#if !defined(__x86_64__) && !defined(__i386__)
  (void)avail, (void)flags, (void)reason_part;
  return; /* no TSC: nothing to fall back from */
#endif
  const char *dir = etch_test_tmpdir();
  char cpuinfo[256];
  snprintf(cpuinfo, sizeof cpuinfo,
           "processor\t: 0\nflags\t\t: fpu %s sse2\n\n", flags);
  write_file(dir, "/proc/cpuinfo", cpuinfo);
  write_file(dir, "/sys/devices/system/clocksource/clocksource0/"
                  "available_clocksource", avail);
  etch__clock_root = dir;
  etch_session *s = start_session("compression=none");
  ETCH_INSTANT(clk, "after");
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "clock_fallback", &t);
  ASSERT_EQ_INT(td_count(&t, 3, "after"), 1);
  const td_event *e = fallback_note(&t, reason_part);
  const td_track *pt = td_track_of(&t, e->track);
  ASSERT_TRUE(pt && pt->is_process);
  /* The event between the session's start and its read, in BOOTTIME. */
  uint64_t now = boottime();
  const td_event *a = NULL;
  for (size_t i = 0; i < t.nev; i++)
    if (t.ev[i].name && strcmp(t.ev[i].name, "after") == 0) a = &t.ev[i];
  ASSERT_TRUE(a->ts <= now && a->ts + 1000000000ull > now);
  td_free(&t);
  etch_session_free(s);
}

TEST(fallback_when_the_kernel_distrusts_the_tsc) {
  if (getenv("ETCH_CLOCK")) return; /* forced either way */
  check_fallback("hpet acpi_pm \n", "constant_tsc nonstop_tsc", "unstable");
}

TEST(fallback_without_an_invariant_tsc) {
  if (getenv("ETCH_CLOCK")) return;
  check_fallback("tsc hpet acpi_pm \n", "tsc constant_tsc", "invariant");
}

TEST(no_note_when_the_tsc_is_trusted) {
  if (getenv("ETCH_CLOCK")) return;
  const char *dir = etch_test_tmpdir();
  write_file(dir, "/proc/cpuinfo",
             "processor\t: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc\n");
  write_file(dir, "/sys/devices/system/clocksource/clocksource0/"
                  "available_clocksource", "tsc hpet\n");
  etch__clock_root = dir;
  etch_session *s = start_session("compression=none");
  ETCH_INSTANT(clk, "after");
  etch_session_stop(s);
  td_trace t;
  read_trace(s, "clock_trusted", &t);
  ASSERT_EQ_INT(td_count(&t, 3, "etch.clock_fallback"), 0);
  ASSERT_EQ_INT(td_count(&t, 3, "after"), 1);
  td_free(&t);
  etch_session_free(s);
}

/* An ETCH_CLOCK value etch does not know is said, not ignored. */
TEST(unknown_clock_is_reported) {
  char path[512];
  snprintf(path, sizeof path, "%s/stderr", etch_test_tmpdir());
  FILE *err = freopen(path, "w", stderr);
  ASSERT_TRUE(err != NULL);
  setenv("ETCH_CLOCK", "tsc-please", 1);
  etch_session *s = start_session("compression=none");
  ETCH_INSTANT(clk, "after");
  etch_session_stop(s);
  fflush(stderr);
  FILE *f = fopen(path, "r");
  char text[512] = "";
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = 0;
  fclose(f);
  ASSERT_EQ_STR(text, "etch: ETCH_CLOCK=tsc-please is not a clock etch knows "
                      "(auto or boottime); using auto\n");
  td_trace t;
  read_trace(s, "clock_unknown", &t);
  ASSERT_EQ_INT(td_count(&t, 3, "after"), 1);
  td_free(&t);
  etch_session_free(s);
}

/* ---- a TSC that changes while the process runs ---------------------------- */

/* The run-time check reads its pairs through this hook: the tests make it
 * see a TSC running at 1.5 times its rate (a VM moved to another host), or
 * one that jumped by a second's worth of ticks (a suspend). Anchors and
 * events still read the real clocks, so every event must stay inside its
 * brackets whatever the check concludes. */
extern void (*etch__clock_check_hook)(uint64_t *ticks, uint64_t *ns);
extern int etch__clock_tsc;
const char *etch__clock_fallback_note(uint64_t *since_ns);
static uint64_t hook_base;
static int hook_mode; /* 1: rate x1.5, 2: jump */

static void fake_pair(uint64_t *ticks, uint64_t *ns) {
#if defined(__x86_64__) || defined(__i386__)
  /* The tightest of five (rdtsc, BOOTTIME, rdtsc) windows, as etch's own
   * readings are taken. */
  uint64_t best = UINT64_MAX, t = 0;
  for (int i = 0; i < 5; i++) {
    uint64_t a = __rdtsc(), n = boottime(), b = __rdtsc();
    if (b - a < best) {
      best = b - a;
      t = a + (b - a) / 2;
      *ns = n;
    }
  }
  *ticks = hook_mode == 1 ? t + (t - hook_base) / 2 : t + 3000000000ull;
#else
  *ticks = *ns = boottime();
#endif
}

#define CHANGE_EVENTS 150

static void *bracketed_short(void *arg) {
  thread_run *r = (thread_run *)arg;
  r->tid = gettid();
  for (int i = 0; i < CHANGE_EVENTS; i++) {
    r->b[i].before = boottime();
    ETCH_INSTANT(clk, "tick");
    r->b[i].after = boottime();
    pause_us(300);
  }
  return NULL;
}

/* Runs two bracketing threads, installs the hook after 10 ms, and returns
 * the trace, the BOOTTIME when the hook went in, and when the main thread
 * first saw the TSC given up (0 if never). */
static void run_with_hook(int mode, td_trace *t, uint64_t *hook_ns,
                          uint64_t *flip_ns, thread_run *runs) {
  etch_session *s = start_session("buffer_kb=4096;compression=none");
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&th[i], NULL, bracketed_short, &runs[i]);
  pause_us(10000);
#if defined(__x86_64__) || defined(__i386__)
  hook_base = __rdtsc();
#endif
  hook_mode = mode;
  *hook_ns = boottime();
  __atomic_store_n(&etch__clock_check_hook, fake_pair, __ATOMIC_RELEASE);
  *flip_ns = 0;
  for (int i = 0; i < 400 && !*flip_ns; i++) {
    if (!__atomic_load_n(&etch__clock_tsc, __ATOMIC_ACQUIRE))
      *flip_ns = boottime();
    pause_us(100);
  }
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  __atomic_store_n(&etch__clock_check_hook, NULL, __ATOMIC_RELEASE);
  etch_session_stop(s);
  read_trace(s, "clock_change", t);
  etch_session_free(s);
}

static void assert_bracketed(const td_trace *t, const thread_run *runs) {
  for (int k = 0; k < 2; k++) {
    const td_track *tr = NULL;
    for (size_t i = 0; i < t->ntracks; i++)
      if (t->tracks[i].is_thread && t->tracks[i].tid == runs[k].tid)
        tr = &t->tracks[i];
    ASSERT_TRUE(tr != NULL);
    int n = 0;
    for (size_t i = 0; i < t->nev; i++) {
      const td_event *e = &t->ev[i];
      if (e->track != tr->uuid || e->type != 3 || strcmp(e->name, "tick"))
        continue;
      ASSERT_TRUE(n < CHANGE_EVENTS);
      const bracket *b = &runs[k].b[n];
      if (e->ts + SLACK_NS < b->before || e->ts > b->after + SLACK_NS)
        FAIL("thread %d event %d at %llu outside [%llu, %llu]", k, n,
             (unsigned long long)e->ts, (unsigned long long)b->before,
             (unsigned long long)b->after);
      n++;
    }
    ASSERT_EQ_INT(n, CHANGE_EVENTS);
  }
}

static bool tsc_in_use(void) {
  if (getenv("ETCH_CLOCK")) return false;
  return etch__clock_fallback_note(NULL) == NULL &&
         __atomic_load_n(&etch__clock_tsc, __ATOMIC_ACQUIRE);
}

TEST(tsc_given_up_when_its_rate_changes_at_run_time) {
  if (!tsc_in_use()) return; /* no TSC here: nothing to give up */
  static thread_run runs[2];
  td_trace t;
  uint64_t hook_ns, flip_ns;
  run_with_hook(1, &t, &hook_ns, &flip_ns, runs);
  /* Noticed within the anchors' 10 ms span (and its two 2 ms re-measures). */
  ASSERT_TRUE(flip_ns != 0);
  ASSERT_TRUE(flip_ns - hook_ns < 40000000ull);
  ASSERT_EQ_INT(__atomic_load_n(&etch__clock_tsc, __ATOMIC_ACQUIRE), 0);
  /* Events before, during and after the change, on both threads, inside
   * their brackets: writers anchored on the TSC move to clock_gettime. */
  assert_bracketed(&t, runs);
  const td_event *e =
      fallback_note(&t, "rate changed while the process ran");
  /* Stamped when it happened. */
  ASSERT_TRUE(e->ts >= hook_ns && e->ts <= flip_ns);
  td_free(&t);
}

TEST(tsc_kept_when_it_only_jumps) {
  if (!tsc_in_use()) return;
  static thread_run runs[2];
  td_trace t;
  uint64_t hook_ns, flip_ns;
  run_with_hook(2, &t, &hook_ns, &flip_ns, runs);
  ASSERT_EQ_INT((int)(flip_ns != 0), 0);
  ASSERT_EQ_INT(__atomic_load_n(&etch__clock_tsc, __ATOMIC_ACQUIRE), 1);
  assert_bracketed(&t, runs);
  ASSERT_EQ_INT(td_count(&t, 3, "etch.clock_fallback"), 0);
  td_free(&t);
}

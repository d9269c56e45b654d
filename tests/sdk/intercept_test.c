/*
 * intercept_test.c - interceptors: the console interceptor's exact output,
 * a custom interceptor's three kinds of state, an intercepted session next
 * to a normal one, config errors, events from inside a callback.
 */
#define _GNU_SOURCE
#include <etch/interceptor.h>
#include <etch/reader.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sdk/core/sdk.h" /* etch__console_feed, etch__intercept_instance */
#include "sdk_common.h"

ETCH_CATEGORY_DEFINE(alpha, "alpha", "", "");
ETCH_CATEGORY_DEFINE(beta, "beta", "", "");

/* ---- helpers ------------------------------------------------------------------ */

static char *slurp_fd(int fd) {
  size_t cap = 1 << 16, n = 0;
  char *s = (char *)malloc(cap);
  lseek(fd, 0, SEEK_SET);
  for (;;) {
    if (n + 4096 > cap) s = (char *)realloc(s, cap *= 2);
    ssize_t r = read(fd, s + n, cap - n - 1);
    if (r <= 0) break;
    n += (size_t)r;
  }
  s[n] = '\0';
  return s;
}

static int tmp_fd(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", etch_test_tmpdir(), name);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_TRUE(fd >= 0);
  return fd;
}

/* ---- the console interceptor ------------------------------------------------- */

typedef struct wl_arg {
  int id;
  uint64_t base; /* explicit timestamps from here on */
  const etch_track *net, *mem;
} wl_arg;

/* A known workload: nested slices with exact durations (explicit times),
 * an instant with args of each kind, counters, flows, a named track. */
static void *workload(void *p) {
  wl_arg *a = (wl_arg *)p;
  char name[16];
  snprintf(name, sizeof name, "w%d", a->id);
  etch_thread_set_name(name);
  uint64_t t = a->base;
  ETCH_SLICE_BEGIN(alpha, "frame", ETCH_TS(t), ETCH_ARG_INT("n", a->id),
                   ETCH_FLOW(100 + a->id));
  ETCH_SLICE_BEGIN(alpha, "draw", ETCH_TS(t + 1000));
  ETCH_INSTANT(beta, "hit", ETCH_TS(t + 1500), ETCH_ARG_BOOL("ok", true),
               ETCH_ARG_UINT("u", 7), ETCH_ARG_DOUBLE("d", 0.5),
               ETCH_ARG_STRING("s", "q\"x"), ETCH_ARG_INT("i", -3));
  ETCH_SLICE_END(alpha, ETCH_TS(t + 21000));
  ETCH_COUNTER(alpha, "depth", 40 + a->id, ETCH_TS(t + 22000));
  ETCH_COUNTER_DOUBLE(alpha, "ratio", 0.25, ETCH_TS(t + 22500));
  ETCH_COUNTER(alpha, "heap", 4096, ETCH_TRACK(a->mem), ETCH_TS(t + 22600));
  ETCH_INSTANT(alpha, "net", ETCH_TRACK(a->net), ETCH_TS(t + 23000),
               ETCH_FLOW_END(100 + a->id));
  ETCH_SLICE_END(alpha, ETCH_TS(t + 2500000));
  return NULL;
}

static char *run_console(const char *extra, int threads, const char *file) {
  int fd = tmp_fd(file);
  char cfg[256];
  snprintf(cfg, sizeof cfg,
           "interceptor=console;interceptor.fd=%d;interceptor.color=never;%s",
           fd, extra);
  etch_process_set_name("itest");
  etch_session *s = start_session(cfg);
  const etch_track *net = etch_track_new("Network", 1, NULL);
  const etch_track *mem =
      etch_counter_track_new("heap", ETCH_UNIT_SIZE_BYTES, NULL, NULL);
  uint64_t base = etch_now() + 1000000;
  pthread_t th[8];
  wl_arg args[8];
  for (int i = 0; i < threads; i++) {
    args[i] = (wl_arg){i, base, net, mem};
    pthread_create(&th[i], NULL, workload, &args[i]);
  }
  for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
  etch_session_stop(s);
  etch_session_free(s);
  char *out = slurp_fd(fd);
  close(fd);
  return out;
}

TEST(console_prints_each_thread_exactly) {
  char *out = run_console("", 3, "console.txt");
  for (int i = 0; i < 3; i++) {
    char who[32];
    snprintf(who, sizeof who, "itest/w%d", i);
    char *got = etch_test_console_lines(out, who, false);
    char want[1024];
    snprintf(want, sizeof want,
             "> frame [alpha] n=%d ->0x%x\n"
             "  > draw [alpha]\n"
             "    * hit [beta] ok=true u=7 d=0.5 s=\"q\\\"x\" i=-3\n"
             "  < draw 20.000 us\n"
             "  # depth = %d [alpha]\n"
             "  # ratio = 0.25 [alpha]\n"
             "  # heap = 4096 bytes [alpha]\n"
             "  * net [alpha] on \"Network\" |>0x%x\n"
             "< frame 2.500 ms\n",
             i, 100 + i, 40 + i, 100 + i);
    ASSERT_EQ_STR(got, want);
    free(got);
  }
  /* Nothing else: 9 lines a thread, each with a time that starts with the
   * session (relative, non-negative, microseconds). */
  size_t lines = 0;
  for (const char *p = out; *p; p++) lines += *p == '\n';
  ASSERT_EQ_U64(lines, 27);
  for (const char *l = out; *l; l = strchr(l, '\n') + 1) {
    double t;
    ASSERT_TRUE(sscanf(l, "%lf", &t) == 1);
    ASSERT_TRUE(t >= 0.001 && t < 60);
    const char *dot = strchr(l, '.');
    ASSERT_TRUE(dot && dot[7] == ' ');
  }
  free(out);
}

TEST(console_colours_a_thread_the_same_way_every_time) {
  char *out = run_console("interceptor.color=always", 2, "colour.txt");
  /* Every line colours its thread column, and a thread keeps its colour. */
  char first[2][16] = {"", ""};
  for (const char *l = out; *l; l = strchr(l, '\n') + 1) {
    const char *esc = strstr(l, "\x1b[3");
    ASSERT_TRUE(esc && esc < strchr(l, '\n'));
    char code[16];
    snprintf(code, sizeof code, "%.5s", esc);
    ASSERT_TRUE(strstr(esc, "\x1b[0m") < strchr(l, '\n'));
    int w = strstr(l, "itest/w1") && strstr(l, "itest/w1") < strchr(l, '\n');
    if (!first[w][0]) memcpy(first[w], code, sizeof code);
    ASSERT_EQ_STR(code, first[w]);
  }
  free(out);
  /* color=never and a non-terminal with auto: no escape at all. */
  out = run_console("", 2, "plain.txt");
  ASSERT_TRUE(strchr(out, '\x1b') == NULL);
  free(out);
}

/* Packets etch did not write: a garbled one, a half one, a name never
 * interned, an end with no begin. Printed as such, never a crash. */
TEST(console_prints_what_it_cannot_decode) {
  int fd = tmp_fd("garbage.txt");
  /* A TrackEvent field claiming 9 bytes and holding 2; an instant whose
   * name iid 5 nothing interned; an end; a lone 0xff. */
  static const uint8_t pk1[] = {0x5a, 0x09, 0x48, 0x03};
  static const uint8_t pk2[] = {0x5a, 0x04, 0x48, 0x03, 0x50, 0x05};
  static const uint8_t pk3[] = {0x5a, 0x02, 0x48, 0x02};
  static const uint8_t pk4[] = {0xff};
  const uint8_t *pk[] = {pk1, pk2, pk3, pk4};
  size_t len[] = {sizeof pk1, sizeof pk2, sizeof pk3, sizeof pk4};
  ASSERT_OK(etch__console_feed(pk, len, 4, fd));
  char *out = slurp_fd(fd);
  close(fd);
  char *got = etch_test_console_lines(out, "?/?", false);
  ASSERT_EQ_STR(got,
                "! undecodable packet (4 bytes): length field larger than "
                "the remaining data at offset 0\n"
                "* ?\n"
                "< ? (its begin was not seen)\n"
                "! undecodable packet (1 bytes): truncated field tag at "
                "offset 0\n");
  free(got);
  free(out);
}

/* ---- a custom interceptor ---------------------------------------------------- */

typedef struct inst {
  char label[32];
  uint64_t packets;
  bool started, stopped;
  uint64_t after_stop;
  etch__pb_buf trace; /* packets as a Trace, their sequence ids added */
} inst;

typedef struct tstate {
  uint64_t packets;
  uint64_t resets;     /* thread_reset calls */
  uint64_t cleared;    /* packets that said they clear the state */
  uint32_t seq;
  bool seq_changed;
} tstate;

static struct {
  pthread_mutex_t lock;
  int setups, starts, stops, destroys;
  uint64_t thread_destroys, thread_packets_at_destroy;
  uint64_t thread_resets_at_destroy;
  bool thread_state_mixed;
} g = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0, 0, 0, false};

static int c_setup(void *global, const etch_interceptor_config *cfg,
                   void **instance) {
  ASSERT_TRUE(global == &g);
  ASSERT_EQ_STR(etch_interceptor_config_name(cfg), "collect");
  for (size_t i = 0; i < etch_interceptor_config_count(cfg); i++)
    if (strcmp(etch_interceptor_config_key(cfg, i), "label") != 0)
      return etch_interceptor_reject(cfg, "unknown option '%s'",
                                     etch_interceptor_config_key(cfg, i));
  const char *label = etch_interceptor_config_get(cfg, "label");
  inst *in = (inst *)calloc(1, sizeof *in);
  snprintf(in->label, sizeof in->label, "%s", label ? label : "");
  etch__pb_buf_init(&in->trace, 4096, 0);
  *instance = in;
  pthread_mutex_lock(&g.lock);
  g.setups++;
  pthread_mutex_unlock(&g.lock);
  return ETCH_OK;
}

static void c_start(void *global, void *instance) {
  (void)global;
  ((inst *)instance)->started = true;
  __atomic_fetch_add(&g.starts, 1, __ATOMIC_RELAXED);
}

static void c_stop(void *global, void *instance) {
  (void)global;
  ((inst *)instance)->stopped = true;
  __atomic_fetch_add(&g.stops, 1, __ATOMIC_RELAXED);
}

static void c_destroy(void *global, void *instance) {
  (void)global;
  inst *in = (inst *)instance;
  etch__pb_buf_free(&in->trace);
  free(in);
  __atomic_fetch_add(&g.destroys, 1, __ATOMIC_RELAXED);
}

static void c_packet(const etch_intercepted *p) {
  tstate *t = (tstate *)p->thread_state;
  if (!t->seq) t->seq = p->sequence_id;
  if (t->seq != p->sequence_id) t->seq_changed = true;
  t->packets++;
  if (p->state_cleared) t->cleared++;
  ETCH_INTERCEPTOR_LOCKED(p, inst, in);
  if (in->stopped) in->after_stop++;
  in->packets++;
  /* TracePacket { <the packet> trusted_packet_sequence_id = seq } */
  etch__pb_nested n;
  etch__pb_nested_begin(&in->trace.s, 1, &n);
  etch__pb_write_bytes(&in->trace.s, p->data, p->size);
  etch__pb_write_varint_field(&in->trace.s, ETCH_PKT_TRUSTED_SEQ_ID,
                             p->sequence_id);
  etch__pb_nested_end(&in->trace.s, &n);
}

static void c_thread_reset(void *global, void *state) {
  (void)global;
  ((tstate *)state)->resets++;
}

static void c_thread_destroy(void *global, void *state) {
  (void)global;
  tstate *t = (tstate *)state;
  pthread_mutex_lock(&g.lock);
  g.thread_destroys++;
  g.thread_packets_at_destroy += t->packets;
  g.thread_resets_at_destroy += t->resets;
  if (t->seq_changed || t->resets != t->cleared) g.thread_state_mixed = true;
  pthread_mutex_unlock(&g.lock);
}

static void register_collect(void) {
  static bool done;
  if (done) return;
  etch_interceptor ic = {
      .name = "collect",
      .global = &g,
      .thread_state_size = sizeof(tstate),
      .setup = c_setup,
      .start = c_start,
      .stop = c_stop,
      .destroy = c_destroy,
      .packet = c_packet,
      .thread_reset = c_thread_reset,
      .thread_destroy = c_thread_destroy,
  };
  ASSERT_OK(etch_interceptor_register(&ic));
  done = true;
}

typedef struct emit_arg {
  int n;
  uint64_t sleep_every;
} emit_arg;

static void *emit_both(void *p) {
  emit_arg *a = (emit_arg *)p;
  for (int i = 0; i < a->n; i++) {
    ETCH_INSTANT(alpha, "a-event", ETCH_ARG_INT("i", i));
    ETCH_SCOPE(beta, "b-scope", ETCH_ARG_INT("i", i));
    if (a->sleep_every && i % a->sleep_every == 0) usleep(2000);
  }
  return NULL;
}

/* The instance of the session `s` (its backend's). */
static inst *instance_of(etch_session *s) {
  return (inst *)etch__intercept_instance(s->backend);
}

TEST(custom_interceptor_gets_config_instance_and_thread_state) {
  register_collect();
  g.setups = g.starts = g.stops = g.destroys = 0;
  g.thread_destroys = g.thread_packets_at_destroy = 0;
  g.thread_resets_at_destroy = 0;
  /* Resets every 5 ms: each sequence clears its state several times. */
  etch_session *s = start_session(
      "interceptor=collect;interceptor.label=first;categories=beta;"
      "reset_interval_ms=5");
  inst *in = instance_of(s);
  ASSERT_EQ_STR(in->label, "first");
  ASSERT_TRUE(in->started);
  pthread_t th[3];
  emit_arg a = {200, 20};
  for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, emit_both, &a);
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  /* The threads are gone: their sequences' states were destroyed, each
   * having seen its own packets only and a reset per clearing packet. */
  pthread_mutex_lock(&g.lock);
  ASSERT_EQ_U64(g.thread_destroys, 3);
  ASSERT_FALSE(g.thread_state_mixed);
  ASSERT_TRUE(g.thread_resets_at_destroy >= 3 * 3);
  uint64_t thread_packets = g.thread_packets_at_destroy;
  pthread_mutex_unlock(&g.lock);
  etch_session_stop(s);
  ASSERT_TRUE(in->stopped);
  ETCH_INSTANT(beta, "after-stop");
  ASSERT_EQ_U64(in->after_stop, 0);
  ASSERT_EQ_U64(in->packets, thread_packets);

  /* What the interceptor got, decoded: every b-scope of every thread in
   * order, nothing from alpha. */
  td_trace t;
  ASSERT_EQ_INT(td_decode(etch__pb_buf_data(&in->trace), etch__pb_buf_len(&in->trace), &t), 0);
  ASSERT_EQ_U64(t.unresolved, 0);
  ASSERT_EQ_U64(td_count(&t, 1, "b-scope"), 600);
  ASSERT_EQ_U64(td_count(&t, 2, NULL), 600);
  ASSERT_EQ_U64(td_count(&t, 3, "a-event"), 0);
  uint32_t seqs[3] = {0};
  int64_t next[3] = {0};
  for (size_t i = 0; i < t.nev; i++) {
    const td_event *e = &t.ev[i];
    if (e->type != 1) continue;
    int k = 0;
    while (k < 3 && seqs[k] && seqs[k] != e->seq) k++;
    ASSERT_TRUE(k < 3);
    seqs[k] = e->seq;
    ASSERT_EQ_INT(td_arg_of(e, "i")->i, next[k]);
    next[k]++;
  }
  td_free(&t);
  ASSERT_EQ_INT(g.stops, 1);
  ASSERT_EQ_INT(g.destroys, 0);
  etch_session_free(s);
  ASSERT_EQ_INT(g.setups, 1);
  ASSERT_EQ_INT(g.starts, 1);
  ASSERT_EQ_INT(g.destroys, 1);
  /* This thread's sequence (the after-stop instant never made one). */
  ASSERT_EQ_U64(g.thread_destroys, 3);
}

TEST(intercepted_and_normal_sessions_each_get_their_own) {
  register_collect();
  etch_session *normal = start_session("categories=alpha;compression=none");
  etch_session *icpt =
      start_session("interceptor=collect;categories=beta");
  pthread_t th[2];
  emit_arg a = {500, 0};
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, emit_both, &a);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  etch_session_stop(normal);
  etch_session_stop(icpt);
  td_trace t;
  read_trace(normal, "intercept_normal", &t);
  ASSERT_EQ_U64(td_count(&t, 3, "a-event"), 1000);
  ASSERT_EQ_U64(td_count(&t, 1, "b-scope"), 0);
  td_free(&t);
  inst *in = instance_of(icpt);
  ASSERT_EQ_INT(
      td_decode(etch__pb_buf_data(&in->trace), etch__pb_buf_len(&in->trace), &t), 0);
  ASSERT_EQ_U64(td_count(&t, 1, "b-scope"), 1000);
  ASSERT_EQ_U64(td_count(&t, 2, NULL), 1000);
  ASSERT_EQ_U64(td_count(&t, 3, "a-event"), 0);
  td_free(&t);
  /* Reading an intercepted session: its packets went elsewhere. */
  uint8_t *d;
  size_t n;
  ASSERT_OK(etch_session_read(icpt, &d, &n));
  ASSERT_EQ_INT(td_decode(d, n, &t), 0);
  ASSERT_EQ_U64(t.nev, 0);
  td_free(&t);
  etch_free(d);
  etch_session_free(normal);
  etch_session_free(icpt);
}

/* A packet callback that emits events itself: they are not intercepted
 * (no loop, no packet read while it is being written). */
static uint64_t reentered;
static int r_setup(void *global, const etch_interceptor_config *cfg,
                   void **instance) {
  (void)global, (void)cfg, (void)instance;
  return ETCH_OK;
}
static void r_packet(const etch_intercepted *p) {
  (void)p;
  __atomic_fetch_add(&reentered, 1, __ATOMIC_RELAXED);
  ETCH_INSTANT(beta, "from-callback");
  ETCH_SCOPE(beta, "scope-from-callback");
}

TEST(events_from_inside_a_callback_are_not_intercepted) {
  etch_interceptor ic = {.name = "reenter", .setup = r_setup,
                         .packet = r_packet};
  ASSERT_OK(etch_interceptor_register(&ic));
  etch_session *normal = start_session("categories=beta;compression=none");
  etch_session *s = start_session("interceptor=reenter;categories=beta");
  for (int i = 0; i < 10; i++) ETCH_INSTANT(beta, "outer");
  etch_session_stop(s);
  etch_session_stop(normal);
  /* Setup packets (reset, descriptors, interning) plus 10 events. */
  ASSERT_TRUE(reentered >= 10 && reentered < 20);
  td_trace t;
  read_trace(normal, "intercept_reenter", &t);
  /* The normal session records the callback's events too. */
  ASSERT_EQ_U64(td_count(&t, 3, "outer"), 10);
  ASSERT_EQ_U64(td_count(&t, 3, "from-callback"), reentered);
  td_free(&t);
  etch_session_free(s);
  etch_session_free(normal);
}

/* ---- errors ---------------------------------------------------------------- */

static void expect_session_error(const char *cfg_text, int code,
                                 const char *msg) {
  etch_config *cfg;
  ASSERT_OK(etch_config_new(&cfg));
  ASSERT_OK(etch_config_parse(cfg, cfg_text));
  etch_session *s = NULL;
  ASSERT_EQ_INT(etch_session_new(cfg, &s), code);
  ASSERT_TRUE(s == NULL);
  if (!strstr(etch_last_error(), msg))
    FAIL("'%s': message '%s' lacks '%s'", cfg_text, etch_last_error(), msg);
  etch_config_free(cfg);
}

TEST(config_errors_name_the_problem) {
  register_collect();
  expect_session_error("interceptor=nope", ETCH_ECONFIG,
                       "no interceptor 'nope' is registered (registered: "
                       "console, collect");
  expect_session_error("interceptor=console;output=x.pftrace", ETCH_ECONFIG,
                       "so it writes no output file");
  expect_session_error("interceptor=console;interceptor.colour=1",
                       ETCH_ECONFIG,
                       "interceptor 'console': unknown option 'colour' "
                       "(known: fd, color)");
  expect_session_error("interceptor=console;interceptor.fd=-1", ETCH_ECONFIG,
                       "fd: '-1' is not a descriptor");
  expect_session_error("interceptor=console;interceptor.color=blue",
                       ETCH_ECONFIG,
                       "color: 'blue' is not one of auto | always | never");
  expect_session_error("interceptor=collect;interceptor.x=1", ETCH_ECONFIG,
                       "interceptor 'collect': unknown option 'x'");
  etch_config *cfg;
  ASSERT_OK(etch_config_new(&cfg));
  ASSERT_EQ_INT(etch_config_set(cfg, "interceptor", ""), ETCH_ECONFIG);
  ASSERT_EQ_INT(etch_config_set(cfg, "interceptor.", "1"), ETCH_EOPTION);
  etch_config_free(cfg);

  etch_interceptor dup = {.name = "console", .setup = r_setup,
                          .packet = r_packet};
  ASSERT_EQ_INT(etch_interceptor_register(&dup), ETCH_EBUSY);
  ASSERT_TRUE(strstr(etch_last_error(), "'console' is already registered"));
  etch_interceptor nopkt = {.name = "x", .setup = r_setup};
  ASSERT_EQ_INT(etch_interceptor_register(&nopkt), ETCH_EINVAL);
  ASSERT_EQ_INT(etch_interceptor_register(NULL), ETCH_EINVAL);
}

/* ---- decoded events: an interceptor fed through the reader ----------------- */

/* What an interceptor that wants etch_event (etch/reader.h) does: one
 * stream reader per session instance, fed each packet under the lock. */
#define DEC_THREADS 3
#define DEC_N 200

typedef struct dec_inst {
  etch_reader *rd;
  uint64_t instants, begins, ends, other;
  int64_t next_i[DEC_THREADS];
  int32_t tids[DEC_THREADS];
  uint64_t wrong_tid, wrong_pid, wrong_track, wrong_arg, feed_errors;
} dec_inst;

static void dec_event(const etch_event *ev, void *user) {
  dec_inst *d = (dec_inst *)user;
  if (ev->pid != getpid()) d->wrong_pid++;
  int k = 0;
  while (k < DEC_THREADS && d->tids[k] != ev->tid) k++;
  if (k == DEC_THREADS) {
    d->wrong_tid++;
    return;
  }
  if (ev->track->kind != ETCH_TRACK_THREAD || ev->track->tid != ev->tid)
    d->wrong_track++;
  if (ev->type == ETCH_EVENT_INSTANT && !strcmp(ev->name, "a-event") &&
      !strcmp(ev->category, "alpha")) {
    d->instants++;
    if (ev->args_count != 1 || strcmp(ev->args[0].key, "debug.i") ||
        ev->args[0].v.i != d->next_i[k])
      d->wrong_arg++;
    d->next_i[k]++;
  } else if (ev->type == ETCH_EVENT_SLICE_BEGIN &&
             !strcmp(ev->name, "b-scope") && !strcmp(ev->category, "beta")) {
    d->begins++;
  } else if (ev->type == ETCH_EVENT_SLICE_END) {
    d->ends++;
  } else {
    d->other++;
  }
}

static int d_setup(void *global, const etch_interceptor_config *cfg,
                   void **instance) {
  (void)global, (void)cfg;
  dec_inst *d = (dec_inst *)calloc(1, sizeof *d);
  if (etch_reader_open_stream(&d->rd) != ETCH_OK ||
      etch_reader_on(d->rd, NULL, NULL, dec_event, d) != ETCH_OK) {
    etch_reader_close(d->rd);
    free(d);
    return ETCH_ENOMEM;
  }
  *instance = d;
  return ETCH_OK;
}

static void d_packet(const etch_intercepted *p) {
  ETCH_INTERCEPTOR_LOCKED(p, dec_inst, d);
  if (etch_reader_feed(d->rd, p->data, p->size, p->sequence_id) != ETCH_OK)
    d->feed_errors++;
}

static void *emit_numbered(void *p) {
  int32_t *tid = (int32_t *)p;
  *tid = (int32_t)syscall(SYS_gettid);
  emit_arg a = {DEC_N, 0};
  return emit_both(&a);
}

TEST(an_interceptor_gets_decoded_events_through_a_stream_reader) {
  etch_interceptor ic = {.name = "decoded", .setup = d_setup,
                         .packet = d_packet};
  ASSERT_OK(etch_interceptor_register(&ic));
  /* Resets every 5 ms: interned names and descriptors are sent again and
   * the reader must follow each sequence's cleared state. */
  etch_session *s = start_session(
      "interceptor=decoded;categories=alpha,beta;reset_interval_ms=5");
  dec_inst *d = (dec_inst *)etch__intercept_instance(s->backend);
  pthread_t th[DEC_THREADS];
  for (int i = 0; i < DEC_THREADS; i++) {
    d->tids[i] = 0;
    pthread_create(&th[i], NULL, emit_numbered, &d->tids[i]);
  }
  for (int i = 0; i < DEC_THREADS; i++) pthread_join(th[i], NULL);
  etch_session_stop(s);
  ASSERT_EQ_U64(d->feed_errors, 0);
  ASSERT_EQ_U64(d->wrong_tid, 0);
  ASSERT_EQ_U64(d->wrong_pid, 0);
  ASSERT_EQ_U64(d->wrong_track, 0);
  ASSERT_EQ_U64(d->wrong_arg, 0);
  ASSERT_EQ_U64(d->instants, DEC_THREADS * DEC_N);
  ASSERT_EQ_U64(d->begins, DEC_THREADS * DEC_N);
  ASSERT_EQ_U64(d->ends, DEC_THREADS * DEC_N);
  ASSERT_EQ_U64(d->other, 0);
  for (int i = 0; i < DEC_THREADS; i++) ASSERT_EQ_INT(d->next_i[i], DEC_N);
  etch_reader_stats st;
  etch_reader_get_stats(d->rd, &st);
  ASSERT_EQ_U64(st.interned_data_missing, 0);
  ASSERT_EQ_U64(st.misplaced_end_event, 0);
  ASSERT_EQ_U64(st.packet_skipped_seq_needs_incremental_state_invalid, 0);
  etch_session_free(s);
}

static int dec_count;
static void count_event(const etch_event *ev, void *user) {
  (void)ev, (void)user;
  dec_count++;
}

TEST(a_stream_reader_survives_a_bad_packet) {
  etch_reader *r;
  ASSERT_OK(etch_reader_open_stream(&r));
  ASSERT_OK(etch_reader_on(r, NULL, NULL, count_event, NULL));
  /* TracePacket { track_event { type: INSTANT, name: "x" } } on seq 7,
   * a packet whose TrackEvent claims 9 bytes and holds 2, then the first
   * one again: the bad one is refused with its reason, the others read. */
  static const uint8_t good[] = {0x5a, 0x06, 0x48, 0x03, 0xba, 0x01, 0x01,
                                 'x'};
  static const uint8_t bad[] = {0x5a, 0x09, 0x48, 0x03};
  dec_count = 0;
  ASSERT_OK(etch_reader_feed(r, good, sizeof good, 7));
  ASSERT_TRUE(etch_reader_feed(r, bad, sizeof bad, 7) != ETCH_OK);
  if (!strstr(etch_last_error(), "packet at stream offset 8"))
    FAIL("message: %s", etch_last_error());
  ASSERT_OK(etch_reader_feed(r, good, sizeof good, 7));
  ASSERT_EQ_INT(dec_count, 2);
  /* A stream is fed, not run; nor sorted. */
  ASSERT_EQ_INT(etch_reader_run(r), ETCH_ESTATE);
  ASSERT_EQ_INT(etch_reader_set_order(r, ETCH_ORDER_TIMESTAMP), ETCH_EINVAL);
  etch_reader_close(r);
  /* A file reader cannot be fed. */
  ASSERT_OK(etch_reader_open_memory(&r, good, 0));
  ASSERT_EQ_INT(etch_reader_feed(r, good, sizeof good, 7), ETCH_ESTATE);
  etch_reader_close(r);
}

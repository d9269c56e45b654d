/*
 * etch/etch.h - instrument a C or C++ program and record a Perfetto trace.
 *
 *   #include <etch/etch.h>
 *
 *   ETCH_CATEGORY_DEFINE(render, "render", "Frame rendering", "");
 *
 *   void draw(int n) {
 *     ETCH_SCOPE(render, "draw", ETCH_ARG_INT("items", n));
 *     ...
 *     ETCH_COUNTER(render, "queued", n);
 *   }
 *
 *   int main(void) {
 *     etch_init();   // ETCH_OUT=app.pftrace ETCH_CATEGORIES=render ./app
 *     ...
 *   }
 *
 * Events: slices (ETCH_SLICE_BEGIN / ETCH_SLICE_END, or ETCH_SCOPE which ends
 * at the closing brace), instants, counters (int64 and double) and flows,
 * each with optional extras: typed args, an explicit timestamp, a track,
 * flow ids. A disabled category costs one relaxed load and a not-taken branch.
 *
 * Build with -DETCH_COMPILE_OUT to turn every macro into nothing.
 *
 * Everything here compiles as C11 (gnu11) and as C++.
 */
#ifndef ETCH_ETCH_H
#define ETCH_ETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etch/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== categories ========================================================== */

/*
 * A category. `enabled` is a bitmask of the sessions (up to 8) that record
 * it; instrumentation tests it with one relaxed load. Define static
 * categories with ETCH_CATEGORY_DEFINE; they register themselves before main.
 * Fields after `enabled` are etch's; do not write them.
 */
typedef struct etch_category {
  uint32_t enabled;
  uint32_t id;               /* iid in the trace, assigned at registration */
  const char *name;
  const char *description;
  const char *tags;          /* comma-separated, e.g. "debug,slow" */
  struct etch_category *next;
  uint32_t flags;
} etch_category;

#define ETCH_CAT(var) etch_cat_##var
#define ETCH_CATEGORY_DECLARE(var) extern etch_category etch_cat_##var
#define ETCH_CATEGORY_DEFINE(var, name, description, tags)                  \
  etch_category etch_cat_##var = {0, 0, name, description, tags, 0, 0};     \
  __attribute__((constructor)) static void etch__cat_register_##var(void) { \
    etch_category_register(&etch_cat_##var);                                \
  }                                                                         \
  typedef int etch__cat_semicolon_##var

/* Registers a category (done by ETCH_CATEGORY_DEFINE). Idempotent. */
ETCH_API void etch_category_register(etch_category *cat);
/*
 * A dynamic category by name: returns the registered category of that name,
 * creating it if needed (never freed). NULL only if out of memory.
 */
ETCH_API etch_category *etch_category_get(const char *name);
/* Calls `fn` for every registered category (for listing). */
ETCH_API void etch_category_foreach(void (*fn)(const etch_category *cat,
                                               void *user),
                                    void *user);

static inline bool etch_category_enabled(const etch_category *cat) {
  return __atomic_load_n(&cat->enabled, __ATOMIC_RELAXED) != 0;
}

/* ==== tracks ============================================================== */

typedef struct etch_track etch_track;

/* Counter units (CounterDescriptor.Unit). */
typedef enum etch_counter_unit {
  ETCH_UNIT_NONE = 0,
  ETCH_UNIT_TIME_NS = 1,
  ETCH_UNIT_COUNT = 2,
  ETCH_UNIT_SIZE_BYTES = 3
} etch_counter_unit;

/*
 * A named track, e.g. for async work that is not tied to one thread. `id`
 * distinguishes tracks of the same name; `parent` NULL puts the track under
 * the process. Tracks live until the process exits.
 */
ETCH_API const etch_track *etch_track_new(const char *name, uint64_t id,
                                          const etch_track *parent);
/* A counter track with a unit (unit_name may be NULL). */
ETCH_API const etch_track *etch_counter_track_new(const char *name,
                                                  etch_counter_unit unit,
                                                  const char *unit_name,
                                                  const etch_track *parent);
/* The process track (events on it belong to no thread). */
ETCH_API const etch_track *etch_process_track(void);
/* The track uuid written in the trace. */
ETCH_API uint64_t etch_track_uuid(const etch_track *track);

/* Names the calling thread / the process in the trace. */
ETCH_API void etch_thread_set_name(const char *name);
ETCH_API void etch_process_set_name(const char *name);

/* ==== events ============================================================== */

/* The current time in the trace clock (CLOCK_BOOTTIME ns), for ETCH_TS. */
ETCH_API uint64_t etch_now(void);

typedef enum etch_extra_kind {
  ETCH_X_NONE = 0,
  ETCH_X_ARG_BOOL,
  ETCH_X_ARG_INT,
  ETCH_X_ARG_UINT,
  ETCH_X_ARG_DOUBLE,
  ETCH_X_ARG_STRING,
  ETCH_X_ARG_POINTER,
  ETCH_X_TIMESTAMP,
  ETCH_X_TRACK,
  ETCH_X_FLOW,
  ETCH_X_TERMINATING_FLOW,
  ETCH_X_COUNTER_INT,
  ETCH_X_COUNTER_DOUBLE,
  ETCH_X_DYNAMIC_NAME
} etch_extra_kind;

/* One optional part of an event: built by the ETCH_ARG_* etc. helpers. */
typedef struct etch_extra {
  uint32_t kind;
  const char *name;
  union {
    bool b;
    int64_t i;
    uint64_t u;
    double d;
    const char *s;
    const void *p;
    const etch_track *t;
  } v;
} etch_extra;

static inline etch_extra etch__x(uint32_t kind, const char *name) {
  etch_extra e;
  e.kind = kind;
  e.name = name;
  e.v.u = 0;
  return e;
}
static inline etch_extra etch_arg_bool(const char *name, bool v) {
  etch_extra e = etch__x(ETCH_X_ARG_BOOL, name);
  e.v.b = v;
  return e;
}
static inline etch_extra etch_arg_int(const char *name, int64_t v) {
  etch_extra e = etch__x(ETCH_X_ARG_INT, name);
  e.v.i = v;
  return e;
}
static inline etch_extra etch_arg_uint(const char *name, uint64_t v) {
  etch_extra e = etch__x(ETCH_X_ARG_UINT, name);
  e.v.u = v;
  return e;
}
static inline etch_extra etch_arg_double(const char *name, double v) {
  etch_extra e = etch__x(ETCH_X_ARG_DOUBLE, name);
  e.v.d = v;
  return e;
}
static inline etch_extra etch_arg_string(const char *name, const char *v) {
  etch_extra e = etch__x(ETCH_X_ARG_STRING, name);
  e.v.s = v;
  return e;
}
static inline etch_extra etch_arg_pointer(const char *name, const void *v) {
  etch_extra e = etch__x(ETCH_X_ARG_POINTER, name);
  e.v.p = v;
  return e;
}
static inline etch_extra etch_x_timestamp(uint64_t ts_ns) {
  etch_extra e = etch__x(ETCH_X_TIMESTAMP, 0);
  e.v.u = ts_ns;
  return e;
}
static inline etch_extra etch_x_track(const etch_track *t) {
  etch_extra e = etch__x(ETCH_X_TRACK, 0);
  e.v.t = t;
  return e;
}
static inline etch_extra etch_x_flow(uint64_t id) {
  etch_extra e = etch__x(ETCH_X_FLOW, 0);
  e.v.u = id;
  return e;
}
static inline etch_extra etch_x_flow_end(uint64_t id) {
  etch_extra e = etch__x(ETCH_X_TERMINATING_FLOW, 0);
  e.v.u = id;
  return e;
}
static inline etch_extra etch_x_dynamic_name(const char *name) {
  etch_extra e = etch__x(ETCH_X_DYNAMIC_NAME, 0);
  e.v.s = name;
  return e;
}
static inline etch_extra etch__x_counter_int(int64_t v) {
  etch_extra e = etch__x(ETCH_X_COUNTER_INT, 0);
  e.v.i = v;
  return e;
}
static inline etch_extra etch__x_counter_double(double v) {
  etch_extra e = etch__x(ETCH_X_COUNTER_DOUBLE, 0);
  e.v.d = v;
  return e;
}

/* Extras for the event macros. */
#define ETCH_ARG_BOOL(name, v) etch_arg_bool(name, v)
#define ETCH_ARG_INT(name, v) etch_arg_int(name, (int64_t)(v))
#define ETCH_ARG_UINT(name, v) etch_arg_uint(name, (uint64_t)(v))
#define ETCH_ARG_DOUBLE(name, v) etch_arg_double(name, (double)(v))
#define ETCH_ARG_STRING(name, v) etch_arg_string(name, v)
#define ETCH_ARG_POINTER(name, v) etch_arg_pointer(name, (const void *)(v))
/* An explicit timestamp in the trace clock (see etch_now()). */
#define ETCH_TS(ts_ns) etch_x_timestamp(ts_ns)
/* Puts the event on a track made by etch_track_new / etch_counter_track_new. */
#define ETCH_TRACK(track) etch_x_track(track)
/* Starts or continues a flow (an arrow to the next event with the same id). */
#define ETCH_FLOW(id) etch_x_flow((uint64_t)(id))
/* Ends a flow at this event. */
#define ETCH_FLOW_END(id) etch_x_flow_end((uint64_t)(id))
/* Replaces the static name of the event with a runtime string (interned
 * on the thread's sequence, up to 4096 names of up to 256 bytes between
 * two incremental-state resets; others are written inline). */
#define ETCH_NAME(str) etch_x_dynamic_name(str)

/*
 * A call site: one per macro expansion, static storage, so no strings travel
 * on the hot path. Fields are etch's.
 */
typedef struct etch_site {
  etch_category *cat;
  const char *name;
  uint8_t type;      /* TrackEvent.Type */
  uint8_t tmpl_len;
  uint16_t seen_word; /* where a writer keeps this site's "interned" bit */
  uint32_t id;       /* event-name iid once prepared; 0 before */
  const etch_track *counter_track; /* implicit counter track (counters) */
  uint64_t seen_mask; /* that bit; 0 until prepared (published last) */
  uint8_t tmpl[16];  /* pre-encoded TrackEvent bytes */
} etch_site;

/* A call site's event type: TrackEvent.Type (common.h). */
enum {
  ETCH_TYPE_SLICE_BEGIN = ETCH_TRACK_EVENT_SLICE_BEGIN,
  ETCH_TYPE_SLICE_END = ETCH_TRACK_EVENT_SLICE_END,
  ETCH_TYPE_INSTANT = ETCH_TRACK_EVENT_INSTANT,
  ETCH_TYPE_COUNTER = ETCH_TRACK_EVENT_COUNTER
};

/* Out-of-line emitters used by the macros; `mask` is cat->enabled (a
 * uintptr_t everywhere: the fast paths index tables with it, and a 32-bit
 * parameter would need zero-extending first). */
ETCH_API void etch__emit_site(etch_site *site, uintptr_t mask);
ETCH_API void etch__emit_begin(etch_site *site, uintptr_t mask);
ETCH_API void etch__emit_end(etch_category *cat, uintptr_t mask);
ETCH_API void etch__emit(etch_site *site, uintptr_t mask,
                         const etch_extra *extras, uint32_t n_extras);
ETCH_API void etch__emit_end_x(etch_category *cat, uintptr_t mask,
                               const etch_extra *extras, uint32_t n_extras);
ETCH_API void etch__emit_counter(etch_site *site, uintptr_t mask, int64_t v);
ETCH_API void etch__emit_counter_double(etch_site *site, uintptr_t mask,
                                        double v);
/* Events of runtime categories and names (no static site). */
ETCH_API void etch__emit_dyn(etch_category *cat, uintptr_t mask, uint32_t type,
                             const char *name, const etch_extra *extras,
                             uint32_t n_extras);

/* Scoped slices: ended by the cleanup attribute at the closing brace. */
typedef struct etch__scope {
  etch_category *cat;
  uint32_t mask; /* sessions the begin went to */
} etch__scope;
static inline void etch__scope_end(etch__scope *s) {
  if (ETCH_UNLIKELY(s->mask)) {
    uint32_t m = __atomic_load_n(&s->cat->enabled, __ATOMIC_RELAXED) & s->mask;
    if (m) etch__emit_end(s->cat, m);
  }
}

#define ETCH__CONCAT2(a, b) a##b
#define ETCH__CONCAT(a, b) ETCH__CONCAT2(a, b)
#define ETCH__UNIQ(p) ETCH__CONCAT(p, __LINE__)

#define ETCH__SITE_INIT(cat, name, type) \
  {&(cat), name, type, 0, 0, 0, 0, 0, {0}}

/*
 * The event macro body: a site, and either the fast emitter (no extras) or
 * the general one. The extras array always has a leading ETCH_X_NONE so it
 * is never empty; with no other extras the compiler drops it.
 */
#define ETCH__EVENT(catvar, type, name, ...)                                  \
  do {                                                                       \
    uint32_t etch__m = __atomic_load_n(&(catvar).enabled, __ATOMIC_RELAXED); \
    if (ETCH_UNLIKELY(etch__m)) {                                            \
      static etch_site etch__s = ETCH__SITE_INIT(catvar, name, type);        \
      const etch_extra etch__xs[] = {etch__x(ETCH_X_NONE, 0), ##__VA_ARGS__}; \
      if (sizeof(etch__xs) != sizeof(etch_extra))                            \
        etch__emit(&etch__s, etch__m, etch__xs + 1,                          \
                   (uint32_t)(sizeof(etch__xs) / sizeof(etch_extra)) - 1);   \
      else if ((type) == ETCH_TYPE_SLICE_BEGIN)                              \
        etch__emit_begin(&etch__s, etch__m);                                 \
      else                                                                   \
        etch__emit_site(&etch__s, etch__m);                                  \
    }                                                                        \
  } while (0)

#define ETCH__END(catvar, ...)                                                \
  do {                                                                       \
    uint32_t etch__m = __atomic_load_n(&(catvar).enabled, __ATOMIC_RELAXED); \
    if (ETCH_UNLIKELY(etch__m)) {                                            \
      const etch_extra etch__xs[] = {etch__x(ETCH_X_NONE, 0), ##__VA_ARGS__}; \
      if (sizeof(etch__xs) == sizeof(etch_extra))                            \
        etch__emit_end(&(catvar), etch__m);                                  \
      else                                                                   \
        etch__emit_end_x(&(catvar), etch__m, etch__xs + 1,                   \
                         (uint32_t)(sizeof(etch__xs) / sizeof(etch_extra)) - 1); \
    }                                                                        \
  } while (0)

#define ETCH__EVENT_C(catp, type, name, ...)                                  \
  do {                                                                       \
    etch_category *etch__c = (catp);                                         \
    uint32_t etch__m =                                                       \
        etch__c ? __atomic_load_n(&etch__c->enabled, __ATOMIC_RELAXED) : 0;  \
    if (ETCH_UNLIKELY(etch__m)) {                                            \
      const etch_extra etch__xs[] = {etch__x(ETCH_X_NONE, 0), ##__VA_ARGS__}; \
      etch__emit_dyn(etch__c, etch__m, type, name, etch__xs + 1,             \
                     (uint32_t)(sizeof(etch__xs) / sizeof(etch_extra)) - 1); \
    }                                                                        \
  } while (0)

/* Counters: a fast emitter when the value is the only extra. */
#define ETCH__COUNTER(catvar, name, xfn, fastfn, vtype, value, ...)           \
  do {                                                                       \
    uint32_t etch__m = __atomic_load_n(&(catvar).enabled, __ATOMIC_RELAXED); \
    if (ETCH_UNLIKELY(etch__m)) {                                            \
      static etch_site etch__s =                                             \
          ETCH__SITE_INIT(catvar, name, ETCH_TYPE_COUNTER);                  \
      const etch_extra etch__xs[] = {xfn((vtype)(value)), ##__VA_ARGS__};    \
      if (sizeof(etch__xs) == sizeof(etch_extra))                            \
        fastfn(&etch__s, etch__m, (vtype)(value));                           \
      else                                                                   \
        etch__emit(&etch__s, etch__m, etch__xs,                              \
                   (uint32_t)(sizeof(etch__xs) / sizeof(etch_extra)));       \
    }                                                                        \
  } while (0)

#define ETCH__SCOPE(var, catvar, name, ...)                                   \
  etch__scope var __attribute__((cleanup(etch__scope_end))) = {              \
      &(catvar), __atomic_load_n(&(catvar).enabled, __ATOMIC_RELAXED)};      \
  do {                                                                       \
    if (ETCH_UNLIKELY(var.mask)) {                                           \
      static etch_site etch__s =                                             \
          ETCH__SITE_INIT(catvar, name, ETCH_TYPE_SLICE_BEGIN);              \
      const etch_extra etch__xs[] = {etch__x(ETCH_X_NONE, 0), ##__VA_ARGS__}; \
      if (sizeof(etch__xs) == sizeof(etch_extra))                            \
        etch__emit_begin(&etch__s, var.mask);                                \
      else                                                                   \
        etch__emit(&etch__s, var.mask, etch__xs + 1,                         \
                   (uint32_t)(sizeof(etch__xs) / sizeof(etch_extra)) - 1);   \
    }                                                                        \
  } while (0)

#ifndef ETCH_COMPILE_OUT

/* Begins a slice on the calling thread's track (or ETCH_TRACK(t)). */
#define ETCH_SLICE_BEGIN(cat, name, ...) \
  ETCH__EVENT(ETCH_CAT(cat), ETCH_TYPE_SLICE_BEGIN, name, ##__VA_ARGS__)
/* Ends the innermost open slice of `cat` on the thread (or ETCH_TRACK(t)). */
#define ETCH_SLICE_END(cat, ...) ETCH__END(ETCH_CAT(cat), ##__VA_ARGS__)
/* A slice from here to the end of the enclosing block. */
#define ETCH_SCOPE(cat, name, ...) \
  ETCH__SCOPE(ETCH__UNIQ(etch__scope_), ETCH_CAT(cat), name, ##__VA_ARGS__)
/* A slice to the end of the block, named by a string built at run time
 * (copied and interned on each thread's sequence: its bytes are written
 * once, then referred to by an id). */
#define ETCH_SCOPE_STR(cat, str, ...) \
  ETCH_SCOPE(cat, "", ETCH_NAME(str), ##__VA_ARGS__)
/* A zero-duration event. */
#define ETCH_INSTANT(cat, name, ...) \
  ETCH__EVENT(ETCH_CAT(cat), ETCH_TYPE_INSTANT, name, ##__VA_ARGS__)
/* Sets counter `name` (a counter track of the process) to an int64 value. */
#define ETCH_COUNTER(cat, name, value, ...)                                  \
  ETCH__COUNTER(ETCH_CAT(cat), name, etch__x_counter_int, etch__emit_counter, \
                int64_t, value, ##__VA_ARGS__)
/* Sets counter `name` to a double value. */
#define ETCH_COUNTER_DOUBLE(cat, name, value, ...)                        \
  ETCH__COUNTER(ETCH_CAT(cat), name, etch__x_counter_double,               \
                etch__emit_counter_double, double, value, ##__VA_ARGS__)

/*
 * The same with a category pointer (e.g. from etch_category_get) and a name
 * known only at run time; the name is written inline, not interned.
 */
#define ETCH_SLICE_BEGIN_C(catp, name, ...) \
  ETCH__EVENT_C(catp, ETCH_TYPE_SLICE_BEGIN, name, ##__VA_ARGS__)
#define ETCH_SLICE_END_C(catp, ...) \
  ETCH__EVENT_C(catp, ETCH_TYPE_SLICE_END, NULL, ##__VA_ARGS__)
#define ETCH_INSTANT_C(catp, name, ...) \
  ETCH__EVENT_C(catp, ETCH_TYPE_INSTANT, name, ##__VA_ARGS__)
#define ETCH_COUNTER_C(catp, name, value, ...)                  \
  ETCH__EVENT_C(catp, ETCH_TYPE_COUNTER, name,                  \
                etch__x_counter_int((int64_t)(value)), ##__VA_ARGS__)

#else /* ETCH_COMPILE_OUT */

/*
 * Compiled out: nothing is evaluated and nothing is referenced, but every
 * argument still appears inside sizeof, so variables used only for tracing
 * raise no "unused" warnings. etch__unused is declared, never defined.
 */
int etch__unused(int, ...);
#define ETCH__NOTHING(...) ((void)sizeof(etch__unused(0, __VA_ARGS__)))
#define ETCH_SLICE_BEGIN(cat, name, ...) \
  ETCH__NOTHING(ETCH_CAT(cat).enabled, name, ##__VA_ARGS__)
#define ETCH_SLICE_END(cat, ...) \
  ETCH__NOTHING(ETCH_CAT(cat).enabled, ##__VA_ARGS__)
#define ETCH_SCOPE(cat, name, ...) \
  ETCH__NOTHING(ETCH_CAT(cat).enabled, name, ##__VA_ARGS__)
#define ETCH_SCOPE_STR(cat, str, ...) \
  ETCH__NOTHING(ETCH_CAT(cat).enabled, str, ##__VA_ARGS__)
#define ETCH_INSTANT(cat, name, ...) \
  ETCH__NOTHING(ETCH_CAT(cat).enabled, name, ##__VA_ARGS__)
#define ETCH_COUNTER(cat, name, value, ...) \
  ETCH__NOTHING(ETCH_CAT(cat).enabled, name, value, ##__VA_ARGS__)
#define ETCH_COUNTER_DOUBLE(cat, name, value, ...) \
  ETCH__NOTHING(ETCH_CAT(cat).enabled, name, value, ##__VA_ARGS__)
#define ETCH_SLICE_BEGIN_C(catp, name, ...) \
  ETCH__NOTHING(catp, name, ##__VA_ARGS__)
#define ETCH_SLICE_END_C(catp, ...) ETCH__NOTHING(catp, ##__VA_ARGS__)
#define ETCH_INSTANT_C(catp, name, ...) ETCH__NOTHING(catp, name, ##__VA_ARGS__)
#define ETCH_COUNTER_C(catp, name, value, ...) \
  ETCH__NOTHING(catp, name, value, ##__VA_ARGS__)

#endif /* ETCH_COMPILE_OUT */

/* ==== sessions ============================================================ */

/*
 * Tracing is organised in sessions: up to ETCH_MAX_SESSIONS at once, each
 * with its own config and buffer, seeing only the categories it enabled.
 */
#define ETCH_MAX_SESSIONS 8

typedef struct etch_config etch_config;
typedef struct etch_session etch_session;

/*
 * Configs are built from named options (one table, also used for the
 * ETCH_CONFIG environment variable and the ETCH_* variables):
 *
 *   categories         "render,io,-debug", "*", "render*"   default "*"
 *   buffer_kb          trace buffer size, 16..4194304         default 8192
 *   fill               "ring" (overwrite oldest) | "discard"  default ring
 *                      | "stall" (wait for the write: see below)
 *   duration_ms        stop by itself after this long, 0=off  default 0
 *   reset_interval_ms  incremental-state reset period, 0=off  default 1000
 *   output             file written when the session stops   default none
 *   compression        "none" | "deflate"                      default deflate
 *   interceptor        packets to this interceptor, not the buffer
 *                      (etch/interceptor.h); interceptor.KEY=VALUE: its options
 *
 * A category pattern is a name, or a prefix ending in '*'; '-' excludes.
 * Categories tagged "debug" or "slow" are only enabled by name or by a
 * pattern that is not the bare "*".
 */
ETCH_API int etch_config_new(etch_config **out);
ETCH_API void etch_config_free(etch_config *cfg);
/* Sets one option from its text form; ETCH_EOPTION for an unknown key,
 * ETCH_ECONFIG for a bad value (etch_last_error() says which and why). */
ETCH_API int etch_config_set(etch_config *cfg, const char *key,
                             const char *value);
/* Parses "key=value;key=value" (';' or newline separated, '#' comments). */
ETCH_API int etch_config_parse(etch_config *cfg, const char *text);

typedef enum etch_fill_policy {
  ETCH_FILL_RING = 0,
  ETCH_FILL_DISCARD = 1,
  /* discard's buffer, but while the session writes its trace as it records
   * (write_period_ms) a writer that finds it full waits for the write
   * instead of dropping: nothing is lost (etch record --malloc's). */
  ETCH_FILL_STALL = 2
} etch_fill_policy;

/* Makes a session from `cfg` (copied: free or reuse it afterwards); a NULL
 * `cfg` means every option at its default, as etch_config_new() makes it
 * (categories "*", an 8 MiB ring buffer, deflate, no output file). The session
 * records nothing until etch_session_start(). ETCH_EBUSY when 8 sessions
 * exist; ETCH_EIO when the output file cannot be written. */
ETCH_API int etch_session_new(const etch_config *cfg, etch_session **out);
/* Starts recording. A session starts once: ETCH_ESTATE when it is already
 * running, or was stopped (a stopped session cannot be started again; make
 * a new one with etch_session_new, and free the old one when its data is
 * read). */
ETCH_API int etch_session_start(etch_session *s);
/* Makes every event completed before the call visible to a read. */
ETCH_API int etch_session_flush(etch_session *s);
/* Stops recording, for good (it cannot be started again); the data stays
 * readable. Writes `output` if set. */
ETCH_API int etch_session_stop(etch_session *s);
/* Writes the trace to a file (after or during recording). */
ETCH_API int etch_session_write_file(etch_session *s, const char *path);
/* Returns the trace bytes; free them with etch_free(). */
ETCH_API int etch_session_read(etch_session *s, uint8_t **data, size_t *len);
/* Stops if needed and frees the session. */
ETCH_API void etch_session_free(etch_session *s);

typedef struct etch_session_stats {
  uint64_t buffer_size;
  uint64_t chunks_written;
  uint64_t chunks_overwritten;  /* ring: oldest data replaced */
  uint64_t bytes_written;
  uint64_t events_dropped;      /* discard: events that found no space */
  uint64_t writers;             /* threads that wrote to this session */
  uint64_t writers_with_drops;
  /* The process's important-event cache (etch/event.h): events kept,
   * the memory they hold, and events not kept because it was full. */
  uint64_t important_events;
  uint64_t important_bytes;
  uint64_t important_dropped;
} etch_session_stats;

ETCH_API int etch_session_get_stats(etch_session *s, etch_session_stats *out);

/*
 * Sets up etch from the environment and registers an exit handler:
 *   ETCH_OUT=path        record the whole run into `path` (written at exit)
 *   ETCH_CATEGORIES=...  categories for that session (default "*")
 *   ETCH_BUFFER_KB, ETCH_FILL, ETCH_DURATION_MS, ETCH_COMPRESSION
 *   ETCH_CONFIG="key=value;..."  any config option
 *   ETCH_BACKEND=system  also record for a tracing service (etch_system_start)
 * Returns ETCH_OK also when ETCH_OUT is not set. Safe to call more than once.
 */
ETCH_API int etch_init(void);

/*
 * System mode: the process becomes a producer of the tracing service
 * (etchd, or Perfetto's traced) at the socket named by
 * $PERFETTO_PRODUCER_SOCK_NAME, else etch's default
 * ($XDG_RUNTIME_DIR/etch/producer.sock or /tmp/etch-$UID/producer.sock). A
 * background thread connects (and reconnects, when there is no service yet
 * or it restarts), registers the `track_event` data source with the
 * process's categories and records whatever the service's sessions ask
 * for; in-process sessions keep working beside it. `producer_name` is how
 * the service lists the process (NULL: the process name). Returns at once;
 * safe to call more than once.
 */
ETCH_API int etch_system_start(const char *producer_name);
/* Stops and writes the ETCH_OUT session now (also done at exit). */
ETCH_API int etch_shutdown(void);
/* The ETCH_OUT session's events so far into its file now, when it writes
 * while recording (ETCH_WRITE_PERIOD_MS): as etch_session_flush on it.
 * ETCH_OK when there is no such session. */
ETCH_API int etch_flush(void);

#ifdef __cplusplus
}
#endif

/* Counters, bookmarks and frames; memory tracing. */
#include <etch/insights.h>
#include <etch/memory.h>
#include <etch/event.h>

#endif /* ETCH_ETCH_H */

/*
 * etch/insights.h - the built-in events of Unreal Insights, as etch writes
 * them: declared counters, bookmarks and frames (included by etch/etch.h).
 *
 * Each kind has a category of its own, registered by etch: "counters",
 * "bookmarks" and "frames". A session records them when its category list
 * takes them (the default "*" does); "-bookmarks" leaves bookmarks out.
 */
#ifndef ETCH_INSIGHTS_H
#define ETCH_INSIGHTS_H

#include <etch/etch.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The categories of the three kinds (names "counters", "bookmarks",
 * "frames"). */
ETCH_API extern etch_category etch_cat_etch_counters;
ETCH_API extern etch_category etch_cat_etch_bookmarks;
ETCH_API extern etch_category etch_cat_etch_frames;

/* ==== counters ============================================================ */

typedef enum etch_counter_kind {
  ETCH_COUNTER_KIND_INT = 0,    /* an int64 count */
  ETCH_COUNTER_KIND_FLOAT = 1,  /* a double */
  ETCH_COUNTER_KIND_MEMORY = 2  /* an int64 number of bytes */
} etch_counter_kind;

/*
 * A declared counter: one counter track named `name` with its unit, and a
 * value the process keeps whether or not a session records it (adds made
 * while no session runs still count). Define it once with
 * ETCH_COUNTER_DEFINE_*, declare it elsewhere with ETCH_COUNTER_DECLARE.
 * Fields after `unit_name` are etch's.
 */
typedef struct etch_counter {
  const char *name;
  uint32_t kind;         /* etch_counter_kind */
  const char *unit_name; /* NULL: the kind's (bytes for memory) */
  etch_site site;
  int64_t value;        /* atomic; the double's bits for float counters */
  uint32_t lock;        /* orders recorded values with their times */
  uint64_t last_ts;
} etch_counter;

#define ETCH__COUNTER_INIT(name, kind, unit)                                \
  {name, kind, unit,                                                        \
   ETCH__SITE_INIT(etch_cat_etch_counters, name, ETCH_TYPE_COUNTER), 0, 0, \
   0}

/*
 * The operations. Each changes the value atomically and, when a session
 * records "counters", writes the new value: from any thread at once, the
 * recorded values are the running totals in the order the changes
 * happened, each stamped later than the one before. Int operations on a
 * float counter and float ones on an int counter convert the operand.
 */
ETCH_API void etch_counter_set(etch_counter *c, int64_t v);
ETCH_API void etch_counter_add(etch_counter *c, int64_t n);
ETCH_API void etch_counter_set_float(etch_counter *c, double v);
ETCH_API void etch_counter_add_float(etch_counter *c, double n);
/* The current value (int and memory counters; a float counter's value
 * rounded toward zero), and a float counter's. */
ETCH_API int64_t etch_counter_get(const etch_counter *c);
ETCH_API double etch_counter_get_float(const etch_counter *c);

/* ==== bookmarks =========================================================== */

/* An instant named `name` on the process's "Bookmarks" track; `etch stats`
 * lists bookmarks in time order. */
ETCH_API void etch_bookmark(const char *name);
/* The same with a printf-formatted name (at most 255 bytes kept). */
ETCH_API void etch_bookmarkf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* ==== frames ============================================================== */

/*
 * Frames: one slice "Frame" (arg index = 1, 2, ...) per frame on the
 * process's "Frames" track; `etch stats` prints frame-time statistics.
 * Either mark each boundary (the previous frame ends where the next
 * begins) or begin and end frames explicitly; from any thread.
 */
ETCH_API void etch_frame_mark(void);
/* Begins a frame (ending the open one, as a mark does). */
ETCH_API void etch_frame_begin(void);
ETCH_API void etch_frame_end(void);
/* The same at a given time (etch_now()'s clock), for frames replayed or
 * timed by the program: a time not after the previous frame event's is
 * moved to 1 ns after it. */
ETCH_API void etch_frame_mark_at(uint64_t ts);
ETCH_API void etch_frame_begin_at(uint64_t ts);
ETCH_API void etch_frame_end_at(uint64_t ts);
/* Frames begun so far in this process (the last frame's index). */
ETCH_API uint64_t etch_frame_index(void);

#ifndef ETCH_COMPILE_OUT

#define ETCH_COUNTER_DEFINE_INT(var, name) \
  etch_counter etch_ctr_##var = ETCH__COUNTER_INIT(name, ETCH_COUNTER_KIND_INT, NULL)
#define ETCH_COUNTER_DEFINE_FLOAT(var, name) \
  etch_counter etch_ctr_##var =              \
      ETCH__COUNTER_INIT(name, ETCH_COUNTER_KIND_FLOAT, NULL)
#define ETCH_COUNTER_DEFINE_MEMORY(var, name) \
  etch_counter etch_ctr_##var =               \
      ETCH__COUNTER_INIT(name, ETCH_COUNTER_KIND_MEMORY, NULL)
/* An int counter with a unit of your own ("frames", "requests"). */
#define ETCH_COUNTER_DEFINE_UNIT(var, name, unit) \
  etch_counter etch_ctr_##var =                   \
      ETCH__COUNTER_INIT(name, ETCH_COUNTER_KIND_INT, unit)
#define ETCH_COUNTER_DECLARE(var) extern etch_counter etch_ctr_##var
#define ETCH_COUNTER_REF(var) (&etch_ctr_##var)

#define ETCH_COUNTER_SET(var, v) etch_counter_set(&etch_ctr_##var, (int64_t)(v))
#define ETCH_COUNTER_ADD(var, n) etch_counter_add(&etch_ctr_##var, (int64_t)(n))
#define ETCH_COUNTER_SUB(var, n) \
  etch_counter_add(&etch_ctr_##var, -(int64_t)(n))
#define ETCH_COUNTER_INC(var) etch_counter_add(&etch_ctr_##var, 1)
#define ETCH_COUNTER_DEC(var) etch_counter_add(&etch_ctr_##var, -1)
#define ETCH_COUNTER_SET_FLOAT(var, v) \
  etch_counter_set_float(&etch_ctr_##var, (double)(v))
#define ETCH_COUNTER_ADD_FLOAT(var, n) \
  etch_counter_add_float(&etch_ctr_##var, (double)(n))

#define ETCH_BOOKMARK(name)                                             \
  do {                                                                  \
    if (ETCH_UNLIKELY(__atomic_load_n(&etch_cat_etch_bookmarks.enabled, \
                                      __ATOMIC_RELAXED)))               \
      etch_bookmark(name);                                              \
  } while (0)
#define ETCH_BOOKMARKF(...)                                             \
  do {                                                                  \
    if (ETCH_UNLIKELY(__atomic_load_n(&etch_cat_etch_bookmarks.enabled, \
                                      __ATOMIC_RELAXED)))               \
      etch_bookmarkf(__VA_ARGS__);                                      \
  } while (0)

#define ETCH_FRAME_MARK() etch_frame_mark()
#define ETCH_FRAME_BEGIN() etch_frame_begin()
#define ETCH_FRAME_END() etch_frame_end()

#else /* ETCH_COMPILE_OUT */

/* Nothing defined, nothing referenced. */
#define ETCH_COUNTER_DEFINE_INT(var, name) typedef int etch__counter_out_##var
#define ETCH_COUNTER_DEFINE_FLOAT(var, name) typedef int etch__counter_out_##var
#define ETCH_COUNTER_DEFINE_MEMORY(var, name) \
  typedef int etch__counter_out_##var
#define ETCH_COUNTER_DEFINE_UNIT(var, name, unit) \
  typedef int etch__counter_out_##var
#define ETCH_COUNTER_DECLARE(var) typedef int etch__counter_out_decl_##var
#define ETCH_COUNTER_SET(var, v) ETCH__NOTHING(v)
#define ETCH_COUNTER_ADD(var, n) ETCH__NOTHING(n)
#define ETCH_COUNTER_SUB(var, n) ETCH__NOTHING(n)
#define ETCH_COUNTER_INC(var) ((void)0)
#define ETCH_COUNTER_DEC(var) ((void)0)
#define ETCH_COUNTER_SET_FLOAT(var, v) ETCH__NOTHING(v)
#define ETCH_COUNTER_ADD_FLOAT(var, n) ETCH__NOTHING(n)
#define ETCH_BOOKMARK(name) ETCH__NOTHING(name)
#define ETCH_BOOKMARKF(...) ETCH__NOTHING(__VA_ARGS__)
#define ETCH_FRAME_MARK() ((void)0)
#define ETCH_FRAME_BEGIN() ((void)0)
#define ETCH_FRAME_END() ((void)0)

#endif /* ETCH_COMPILE_OUT */

#ifdef __cplusplus
}
#endif

#endif /* ETCH_INSIGHTS_H */

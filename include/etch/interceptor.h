/*
 * etch/interceptor.h - interceptors: a session's packets to your code
 * instead of a trace buffer.
 *
 * An interceptor is registered once, by name, before the sessions that use
 * it are created. A session whose config says `interceptor=NAME` hands every
 * packet its writers finish to that interceptor, on the thread that wrote
 * it, as soon as the packet is complete; nothing goes to the session's
 * buffer, and the event fast path of other sessions is unchanged.
 *
 * State comes in three kinds, each with its own rule:
 *
 *   global     `global` of the registration, shared by every session that
 *              uses the interceptor. Yours to synchronise.
 *   instance   made by `setup` from the session's config, one per session;
 *              reached from the packet callback only through
 *              etch_interceptor_lock() / etch_interceptor_unlock() (or the
 *              ETCH_INTERCEPTOR_LOCKED scope), so two threads never touch it
 *              at once. `start`, `stop` and `destroy` get it directly: no
 *              packet callback runs during them.
 *   thread     `thread_state_size` zeroed bytes per writer sequence (one
 *              thread in one session), handed to every packet of that
 *              sequence. Packets of a sequence arrive on its thread, one at
 *              a time, so it needs no lock. `thread_reset` is called on it
 *              before a packet that clears the sequence's incremental state
 *              (interned strings, descriptors: drop your copies);
 *              `thread_destroy` when the sequence ends (its thread exited or
 *              the session was freed).
 *
 * Lifetime: setup at etch_session_new (an error there fails the session
 * with your message), start at etch_session_start, stop at
 * etch_session_stop (after it returns no packet callback starts), destroy
 * when the session is freed.
 */
#ifndef ETCH_INTERCEPTOR_H
#define ETCH_INTERCEPTOR_H

#include <stdbool.h>

#include <etch/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A session's interceptor options: `interceptor.KEY=VALUE` in its config. */
typedef struct etch_interceptor_config etch_interceptor_config;

/* The interceptor's name, as the config gave it. */
ETCH_API const char *etch_interceptor_config_name(
    const etch_interceptor_config *c);
/* The value of option KEY (without the "interceptor." prefix), or NULL. */
ETCH_API const char *etch_interceptor_config_get(
    const etch_interceptor_config *c, const char *key);
/* The number of options, and the i-th one's key and value. */
ETCH_API size_t etch_interceptor_config_count(const etch_interceptor_config *c);
ETCH_API const char *etch_interceptor_config_key(
    const etch_interceptor_config *c, size_t i);
ETCH_API const char *etch_interceptor_config_value(
    const etch_interceptor_config *c, size_t i);
/* For setup: rejects the config with a message (printf format) that
 * etch_last_error() then shows, prefixed with the interceptor's name.
 * Returns ETCH_ECONFIG, for `return etch_interceptor_reject(...)`. */
ETCH_API int etch_interceptor_reject(const etch_interceptor_config *c,
                                     const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

typedef struct etch__intercept_seq etch__intercept_seq;

/* One packet, as the packet callback sees it. */
typedef struct etch_intercepted {
  const uint8_t *data; /* one serialized TracePacket */
  size_t size;
  uint32_t sequence_id;  /* the writer sequence it came from */
  bool state_cleared;    /* it clears the sequence's incremental state */
  void *global;          /* the registration's global state */
  void *thread_state;    /* the sequence's state, NULL if size 0 */
  etch__intercept_seq *seq_; /* etch's, for the lock calls */
} etch_intercepted;

/* The session instance's state, with its lock held until the unlock. */
ETCH_API void *etch_interceptor_lock(const etch_intercepted *p);
ETCH_API void etch_interceptor_unlock(const etch_intercepted *p);

typedef struct etch_interceptor {
  const char *name; /* what `interceptor=` names; copied */
  void *global;
  size_t thread_state_size;
  /* Makes the instance from the config (*instance may stay NULL). A
   * non-zero return fails the session; see etch_interceptor_reject. */
  int (*setup)(void *global, const etch_interceptor_config *cfg,
               void **instance);
  void (*start)(void *global, void *instance);            /* optional */
  void (*stop)(void *global, void *instance);             /* optional */
  void (*destroy)(void *global, void *instance);          /* optional */
  void (*packet)(const etch_intercepted *p);              /* required */
  void (*thread_reset)(void *global, void *thread_state);   /* optional */
  void (*thread_destroy)(void *global, void *thread_state); /* optional */
} etch_interceptor;

/* Registers an interceptor (the struct is copied). ETCH_EBUSY when the
 * name is taken (the console interceptor is "console"), ETCH_ELIMIT past
 * 32 registrations. */
ETCH_API int etch_interceptor_register(const etch_interceptor *ic);

#if defined(__GNUC__)
ETCH_API void etch__interceptor_unlock_scope(const etch_intercepted **p);
/* Declares `type *var`: the instance, locked until the end of the block
 * the declaration sits in. */
#define ETCH_INTERCEPTOR_LOCKED(p, type, var)                           \
  __attribute__((cleanup(etch__interceptor_unlock_scope)))              \
  const etch_intercepted *etch__locked_##var = (p);                     \
  type *var = (type *)etch_interceptor_lock(etch__locked_##var)
#endif

#ifdef __cplusplus
}
#endif

#endif /* ETCH_INTERCEPTOR_H */

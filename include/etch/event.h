/*
 * etch/event.h - self-describing custom events on channels (included by
 * etch/etch.h).
 *
 * An event is declared once, in a logger namespace, with named and typed
 * fields; the trace carries its schema, so any reader decodes every field
 * by name and type without knowing the event (docs/format.md).
 *
 *   // net.h: the fields as a list, and the declaration
 *   #define NET_PACKET_FIELDS(F) \
 *     F(uint32, size)            \
 *     F(str, peer)               \
 *     F(uint8_array, bytes)
 *   ETCH_EVENT_DECLARE(Net, Packet, NET_PACKET_FIELDS);
 *   ETCH_CHANNEL_DECLARE(NetChannel);
 *
 *   // net.c: the definition, once in the program
 *   ETCH_EVENT_DEFINE(Net, Packet, NET_PACKET_FIELDS, 0);
 *   ETCH_CHANNEL_DEFINE(NetChannel, "Net");
 *
 *   // anywhere: some or all fields; unset fields are absent from the trace
 *   ETCH_LOG(Net, Packet, NetChannel, ETCH_SET(size, n), ETCH_SET(peer, host),
 *            ETCH_SET_ARRAY(bytes, buf, n));
 *   ETCH_LOG(Net, Packet, (NetChannel, GameChannel), ETCH_SET(size, n));
 *   {
 *     ETCH_LOG_SCOPE(Net, Packet, NetChannel, ETCH_SET(size, n));
 *     ...          // a slice "Net.Packet" from here to the closing brace
 *   }
 *
 * Field types: int8 int16 int32 int64 uint8 uint16 uint32 uint64 float double
 * bool; str (const char *, UTF-8 or ANSI), wstr (const wchar_t *), u16str
 * (const uint16_t *, UTF-16; char16_t data cast to it); arrays of numbers:
 * int8_array ... uint64_array, float_array, double_array. Values:
 *
 *   ETCH_SET(field, value)            a number, a bool, a NUL-terminated string
 *   ETCH_SET_STR(field, str, len)     a string of `len` code units (no NUL needed)
 *   ETCH_SET_ARRAY(field, ptr, count) `count` elements (0: an empty array)
 *
 * A field is given at most once per ETCH_LOG. The log macros need C (C99
 * designated initializers) or C++20 with the fields in declaration order.
 *
 * Channels are categories (ETCH_CATEGORY_DEFINE) that are off until asked
 * for: a session records a channel when its categories name it (by name or
 * by a pattern other than the bare "*"), or, process-wide, after
 * etch_channel_set("Net*", true) or ETCH_CHANNELS=Net*. etch_channel_set
 * works on every category: set to false, a category or channel is recorded
 * by no session until set to true again. An event on several channels
 * ("(A, B)") is recorded by the sessions that record all of them.
 *
 * Flags of ETCH_EVENT_DEFINE:
 *   ETCH_EVENT_IMPORTANT  kept in a process-wide cache (ETCH_IMPORTANT_KB,
 *                         default 1024 KiB) and written again at the start
 *                         of every later session and after incremental-state
 *                         resets that follow a ring's worth of data, so a
 *                         late session or a wrapped ring still has it. Cached
 *                         whether or not its channels are on; written to a
 *                         session that records its channels. A trace etch
 *                         writes holds it once all the same (the copies a
 *                         buffer keeps beside it are left out then).
 *   ETCH_EVENT_SERIAL     a process-wide serial (one atomic counter) in every
 *                         event of this type: readers deliver such events in
 *                         serial order across threads.
 *
 * With -DETCH_COMPILE_OUT every macro here becomes nothing (the declarations
 * a plain struct type), and no etch symbol is referenced.
 */
#ifndef ETCH_EVENT_H
#define ETCH_EVENT_H

#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#include <wchar.h>
#endif

#include "etch/etch.h"

#ifdef __cplusplus
extern "C" {
#endif


/* Flags of an event type. */
enum { ETCH_EVENT_IMPORTANT = 1, ETCH_EVENT_SERIAL = 2 };

/* One field of an event type; made by ETCH_EVENT_DEFINE. */
typedef struct etch_event_field {
  const char *name;
  uint32_t type;   /* etch_field_type */
  uint32_t offset; /* of its slot in the event's value struct */
} etch_event_field;

/* An event type (ETCH_EVENT_DEFINE). The fields after `flags` are etch's. */
typedef struct etch_event_def {
  const char *logger;
  const char *event;
  uint32_t flags;
  uint32_t nfields;
  const etch_event_field *fields;
  char *full_name; /* "Logger.Event" */
  void *etch_site; /* etch's call-site state */
  struct etch_event_def *next;
} etch_event_def;

/* Value slots of the generated structs: `set` is 0 (absent), 1 (set; a
 * string's length from strlen) or 2 (a string with its length). */
#define ETCH__SCALAR_SLOT(tn, ct) \
  typedef struct etch_fv_##tn {   \
    uint8_t set;                  \
    ct v;                         \
  } etch_fv_##tn;                 \
  typedef struct etch_fv_##tn##_array { \
    uint8_t set;                  \
    const ct *v;                  \
    size_t len;                   \
  } etch_fv_##tn##_array;
ETCH__SCALAR_SLOT(int8, int8_t)
ETCH__SCALAR_SLOT(int16, int16_t)
ETCH__SCALAR_SLOT(int32, int32_t)
ETCH__SCALAR_SLOT(int64, int64_t)
ETCH__SCALAR_SLOT(uint8, uint8_t)
ETCH__SCALAR_SLOT(uint16, uint16_t)
ETCH__SCALAR_SLOT(uint32, uint32_t)
ETCH__SCALAR_SLOT(uint64, uint64_t)
ETCH__SCALAR_SLOT(float, float)
ETCH__SCALAR_SLOT(double, double)
typedef struct etch_fv_bool {
  uint8_t set;
  bool v;
} etch_fv_bool;
typedef struct etch_fv_str {
  uint8_t set;
  const char *v;
  size_t len;
} etch_fv_str;
typedef struct etch_fv_wstr {
  uint8_t set;
  const wchar_t *v;
  size_t len;
} etch_fv_wstr;
typedef struct etch_fv_u16str {
  uint8_t set;
  const uint16_t *v;
  size_t len;
} etch_fv_u16str;

/* The type code of each field type name. */
enum {
  ETCH__FT_int8 = ETCH_FIELD_INT8, ETCH__FT_int16 = ETCH_FIELD_INT16,
  ETCH__FT_int32 = ETCH_FIELD_INT32, ETCH__FT_int64 = ETCH_FIELD_INT64,
  ETCH__FT_uint8 = ETCH_FIELD_UINT8, ETCH__FT_uint16 = ETCH_FIELD_UINT16,
  ETCH__FT_uint32 = ETCH_FIELD_UINT32, ETCH__FT_uint64 = ETCH_FIELD_UINT64,
  ETCH__FT_float = ETCH_FIELD_FLOAT, ETCH__FT_double = ETCH_FIELD_DOUBLE,
  ETCH__FT_bool = ETCH_FIELD_BOOL, ETCH__FT_str = ETCH_FIELD_STR,
  ETCH__FT_wstr = ETCH_FIELD_WSTR, ETCH__FT_u16str = ETCH_FIELD_U16STR,
  ETCH__FT_int8_array = ETCH_FIELD_ARRAY | ETCH_FIELD_INT8,
  ETCH__FT_int16_array = ETCH_FIELD_ARRAY | ETCH_FIELD_INT16,
  ETCH__FT_int32_array = ETCH_FIELD_ARRAY | ETCH_FIELD_INT32,
  ETCH__FT_int64_array = ETCH_FIELD_ARRAY | ETCH_FIELD_INT64,
  ETCH__FT_uint8_array = ETCH_FIELD_ARRAY | ETCH_FIELD_UINT8,
  ETCH__FT_uint16_array = ETCH_FIELD_ARRAY | ETCH_FIELD_UINT16,
  ETCH__FT_uint32_array = ETCH_FIELD_ARRAY | ETCH_FIELD_UINT32,
  ETCH__FT_uint64_array = ETCH_FIELD_ARRAY | ETCH_FIELD_UINT64,
  ETCH__FT_float_array = ETCH_FIELD_ARRAY | ETCH_FIELD_FLOAT,
  ETCH__FT_double_array = ETCH_FIELD_ARRAY | ETCH_FIELD_DOUBLE
};

/* Registers an event type (done by ETCH_EVENT_DEFINE). */
ETCH_API void etch_event_register(etch_event_def *def,
                                  const etch_event_field *fields,
                                  uint32_t nfields);
/* Logs an event: `values` is its generated struct, `chans` its channels
 * (`nchans` categories), `mask` the sessions recording all of them. */
ETCH_API void etch__log(etch_event_def *def, struct etch_category *const *chans,
                        uint32_t nchans, uintptr_t mask, const void *values,
                        uint32_t type);
/*
 * Switches categories and channels matching `pattern` (a name, a prefix
 * ending in '*', or a comma-separated list of them) on or off for the whole
 * process; also applies to categories registered later. Returns how many
 * registered categories matched, or a negative status for a bad pattern.
 */
ETCH_API int etch_channel_set(const char *pattern, bool on);

/* The preprocessor's side: lists of channels, "A" or "(A, B)". */
#define ETCH__PP_CAT_(a, b) a##b
#define ETCH__PP_CAT(a, b) ETCH__PP_CAT_(a, b)
#define ETCH__PP_SECOND(a, b, ...) b
#define ETCH__PP_PROBE_PAREN(...) ~, 1
#define ETCH__PP_IS_PAREN_(...) ETCH__PP_SECOND(__VA_ARGS__, 0, ~)
#define ETCH__PP_IS_PAREN(x) ETCH__PP_IS_PAREN_(ETCH__PP_PROBE_PAREN x)
#define ETCH__PP_IIF_0(t, f) f
#define ETCH__PP_IIF_1(t, f) t
#define ETCH__PP_IIF(c) ETCH__PP_CAT(ETCH__PP_IIF_, c)
#define ETCH__PP_UNPAREN(...) __VA_ARGS__
#define ETCH__PP_LIST(x) \
  ETCH__PP_IIF(ETCH__PP_IS_PAREN(x))(ETCH__PP_UNPAREN x, x)
#define ETCH__PP_NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, n, ...) n
#define ETCH__PP_NARGS(...) ETCH__PP_NARGS_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, ~)
#define ETCH__PP_FE_1(M, a) M(a)
#define ETCH__PP_FE_2(M, a, ...) M(a) ETCH__PP_FE_1(M, __VA_ARGS__)
#define ETCH__PP_FE_3(M, a, ...) M(a) ETCH__PP_FE_2(M, __VA_ARGS__)
#define ETCH__PP_FE_4(M, a, ...) M(a) ETCH__PP_FE_3(M, __VA_ARGS__)
#define ETCH__PP_FE_5(M, a, ...) M(a) ETCH__PP_FE_4(M, __VA_ARGS__)
#define ETCH__PP_FE_6(M, a, ...) M(a) ETCH__PP_FE_5(M, __VA_ARGS__)
#define ETCH__PP_FE_7(M, a, ...) M(a) ETCH__PP_FE_6(M, __VA_ARGS__)
#define ETCH__PP_FE_8(M, a, ...) M(a) ETCH__PP_FE_7(M, __VA_ARGS__)
#define ETCH__PP_FE_(M, ...) \
  ETCH__PP_CAT(ETCH__PP_FE_, ETCH__PP_NARGS(__VA_ARGS__))(M, __VA_ARGS__)
#define ETCH__PP_FOREACH(M, list) ETCH__PP_FE_(M, ETCH__PP_LIST(list))
#define ETCH__PP_COUNT_(...) ETCH__PP_NARGS(__VA_ARGS__)
#define ETCH__PP_COUNT(list) ETCH__PP_COUNT_(ETCH__PP_LIST(list))
#define ETCH__PP_FIRST_(a, ...) a
#define ETCH__PP_FIRST__(...) ETCH__PP_FIRST_(__VA_ARGS__, ~)
#define ETCH__PP_FIRST(list) ETCH__PP_FIRST__(ETCH__PP_LIST(list))

/* The generated value struct and its field table. */
#define ETCH__EV_T(L, E) etch_ev_##L##_##E
#define ETCH__EV_DEF(L, E) etch_evdef_##L##_##E
#define ETCH__EV_MEMBER(type, name) etch_fv_##type name;
#define ETCH__EV_FIELD(type, name) \
  {#name, (uint32_t)ETCH__FT_##type, (uint32_t)offsetof(etch__ev_cur, name)},

/* A channel: a category that is off until asked for (see above). */
#define ETCH_CHANNEL_DECLARE(var) ETCH_CATEGORY_DECLARE(var)
#define ETCH_CHANNEL_DEFINE(var, name)                                    \
  etch_category etch_cat_##var = {0, 0, name, "", "channel", 0, 0};      \
  __attribute__((constructor)) static void etch__cat_register_##var(void) { \
    etch_category_register(&etch_cat_##var);                              \
  }                                                                       \
  typedef int etch__cat_semicolon_##var

#ifndef ETCH_COMPILE_OUT

#define ETCH_EVENT_DECLARE(L, E, FIELDS)                   \
  typedef struct ETCH__EV_T(L, E) {                        \
    uint8_t etch__none;                                    \
    FIELDS(ETCH__EV_MEMBER)                                \
  } ETCH__EV_T(L, E);                                      \
  extern etch_event_def ETCH__EV_DEF(L, E)

#define ETCH_EVENT_DEFINE(L, E, FIELDS, flags)                               \
  etch_event_def ETCH__EV_DEF(L, E) = {#L, #E, (flags), 0, 0, 0, 0, 0};      \
  __attribute__((constructor)) static void etch__ev_register_##L##_##E(void) { \
    typedef ETCH__EV_T(L, E) etch__ev_cur;                                   \
    static const etch_event_field etch__f[] = {                              \
        FIELDS(ETCH__EV_FIELD){0, 0, (uint32_t)sizeof(etch__ev_cur)}};       \
    etch_event_register(&ETCH__EV_DEF(L, E), etch__f,                        \
                        (uint32_t)(sizeof etch__f / sizeof etch__f[0]) - 1); \
  }                                                                          \
  typedef int etch__ev_semicolon_##L##_##E

#define ETCH_SET(field, value) .field = {1, (value)}
#define ETCH_SET_STR(field, str, len) .field = {2, (str), (len)}
#define ETCH_SET_ARRAY(field, ptr, count) .field = {1, (ptr), (count)}

/* Fields left out of the initializer are meant to be zero: g++ -Wextra
 * would warn about each, and clang -Wextra (C too) about a string's length
 * that ETCH_SET leaves out. */
#if defined(__GNUC__)
#define ETCH__MFI_OFF                \
  _Pragma("GCC diagnostic push")     \
  _Pragma("GCC diagnostic ignored \"-Wmissing-field-initializers\"")
#define ETCH__MFI_ON _Pragma("GCC diagnostic pop")
#else
#define ETCH__MFI_OFF
#define ETCH__MFI_ON
#endif

#define ETCH__CH_AND(ch) __atomic_load_n(&etch_cat_##ch.enabled, __ATOMIC_RELAXED) &
#define ETCH__CH_PTR(ch) &etch_cat_##ch,
#define ETCH__CH_MASK(chs) (ETCH__PP_FOREACH(ETCH__CH_AND, chs) 0xffffffffu)

#define ETCH__LOG(L, E, chs, type, ...)                                      \
  do {                                                                       \
    uint32_t etch__m = ETCH__CH_MASK(chs);                                   \
    if (ETCH_UNLIKELY(etch__m ||                                             \
                      (ETCH__EV_DEF(L, E).flags & ETCH_EVENT_IMPORTANT))) {  \
      static etch_category *const etch__chs[] = {                            \
          ETCH__PP_FOREACH(ETCH__CH_PTR, chs)};                              \
      ETCH__MFI_OFF                                                          \
      const ETCH__EV_T(L, E) etch__v = {.etch__none = 0, __VA_ARGS__};       \
      ETCH__MFI_ON                                                           \
      etch__log(&ETCH__EV_DEF(L, E), etch__chs,                              \
                (uint32_t)ETCH__PP_COUNT(chs), etch__m, &etch__v, type);     \
    }                                                                        \
  } while (0)

/* Logs an instant "Logger.Event" with the fields given. */
#define ETCH_LOG(L, E, chs, ...) \
  ETCH__LOG(L, E, chs, ETCH_TYPE_INSTANT, ##__VA_ARGS__)
/* The same as a slice from here to the end of the enclosing block. */
#define ETCH_LOG_SCOPE(L, E, chs, ...)                                       \
  etch__scope ETCH__UNIQ(etch__ls_) __attribute__((cleanup(etch__scope_end))) = { \
      &ETCH__PP_CAT(etch_cat_, ETCH__PP_FIRST(chs)), 0};                      \
  ETCH__LOG_SCOPE_BEGIN(ETCH__UNIQ(etch__ls_), L, E, chs, ##__VA_ARGS__)
#define ETCH__LOG_SCOPE_BEGIN(var, L, E, chs, ...)                           \
  do {                                                                       \
    var.mask = ETCH__CH_MASK(chs);                                           \
    if (ETCH_UNLIKELY(var.mask)) {                                           \
      static etch_category *const etch__chs[] = {                            \
          ETCH__PP_FOREACH(ETCH__CH_PTR, chs)};                              \
      ETCH__MFI_OFF                                                          \
      const ETCH__EV_T(L, E) etch__v = {.etch__none = 0, ##__VA_ARGS__};     \
      ETCH__MFI_ON                                                           \
      etch__log(&ETCH__EV_DEF(L, E), etch__chs,                              \
                (uint32_t)ETCH__PP_COUNT(chs), var.mask, &etch__v,           \
                ETCH_TYPE_SLICE_BEGIN);                                      \
    }                                                                        \
  } while (0)

#else /* ETCH_COMPILE_OUT */

#define ETCH_EVENT_DECLARE(L, E, FIELDS) \
  typedef struct ETCH__EV_T(L, E) {      \
    uint8_t etch__none;                  \
    FIELDS(ETCH__EV_MEMBER)              \
  } ETCH__EV_T(L, E)
#define ETCH_EVENT_DEFINE(L, E, FIELDS, flags) \
  typedef int etch__ev_semicolon_##L##_##E
#undef ETCH_CHANNEL_DEFINE
#define ETCH_CHANNEL_DEFINE(var, name) typedef int etch__cat_semicolon_##var
#define ETCH_SET(field, value) .field = {1, (value)}
#define ETCH_SET_STR(field, str, len) .field = {2, (str), (len)}
#define ETCH_SET_ARRAY(field, ptr, count) .field = {1, (ptr), (count)}
/* Nothing is evaluated; the values are still type-checked (in sizeof). */
#ifdef __cplusplus
#define ETCH_LOG(L, E, chs, ...) \
  ((void)sizeof(ETCH__EV_T(L, E){.etch__none = 0, ##__VA_ARGS__}))
#else
#define ETCH_LOG(L, E, chs, ...) \
  ((void)sizeof((ETCH__EV_T(L, E)){.etch__none = 0, ##__VA_ARGS__}))
#endif
#define ETCH_LOG_SCOPE(L, E, chs, ...) \
  ETCH_LOG(L, E, chs, ##__VA_ARGS__)

#endif /* ETCH_COMPILE_OUT */

#ifdef __cplusplus
}
#endif

#endif /* ETCH_EVENT_H */

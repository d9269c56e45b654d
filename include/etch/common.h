/*
 * etch/common.h - definitions shared by every public etch header: the export
 * macro, the single error table of the whole API, and the version.
 *
 * Every etch call that can fail returns 0 (ETCH_OK) or a negative etch status
 * code from the table below. The failing call also leaves a message naming the
 * problem in a thread-local slot, read with etch_last_error().
 */
#ifndef ETCH_COMMON_H
#define ETCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ETCH_VERSION_MAJOR 0
#define ETCH_VERSION_MINOR 1
#define ETCH_VERSION_PATCH 0
#define ETCH_VERSION_STRING "0.1.0"

#if defined(_WIN32)
#define ETCH_API
#else
#define ETCH_API __attribute__((visibility("default")))
#endif

#if defined(__GNUC__)
#define ETCH_LIKELY(x) __builtin_expect(!!(x), 1)
#define ETCH_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define ETCH_LIKELY(x) (x)
#define ETCH_UNLIKELY(x) (x)
#endif

/*
 * The error table: X(NAME, value, message). Values are stable ABI.
 */
#define ETCH_ERRNO_MAP(X)                                                    \
  X(OK, 0, "success")                                                        \
  X(EINVAL, -1, "invalid argument")                                          \
  X(ECONFIG, -2, "invalid configuration value")                              \
  X(EOPTION, -3, "unknown configuration option")                             \
  X(ENOMEM, -4, "out of memory")                                             \
  X(EIO, -5, "input/output error")                                           \
  X(EBUSY, -6, "resource busy or limit of concurrent sessions reached")      \
  X(ESTATE, -7, "operation not valid in the current state")                  \
  X(EFORMAT, -8, "malformed trace data")                                     \
  X(ETRUNC, -9, "truncated trace data")                                      \
  X(EUNSUPPORTED, -10, "unsupported feature")                                \
  X(ENOTFOUND, -11, "not found")                                             \
  X(ELIMIT, -12, "size or nesting limit exceeded")                           \
  X(ESQL, -13, "SQL error")                                                  \
  X(EDISABLED, -14, "tracing is compiled out or disabled")

typedef enum etch_status {
#define ETCH__ERR_ENUM(name, value, msg) ETCH_##name = value,
  ETCH_ERRNO_MAP(ETCH__ERR_ENUM)
#undef ETCH__ERR_ENUM
} etch_status;

/* The fixed message of a status code ("invalid argument"). */
ETCH_API const char *etch_strerror(int status);
/* The symbolic name of a status code ("ETCH_EINVAL"). */
ETCH_API const char *etch_err_name(int status);
/*
 * The detailed message left by the last failing etch call on this thread,
 * e.g. "config: unknown option 'bufer_kb'". Empty string when none.
 */
ETCH_API const char *etch_last_error(void);

/* Frees memory etch handed to the caller (etch_session_read, ...). */
ETCH_API void etch_free(void *p);

/* TrackEvent.Type as Perfetto numbers it: the one definition behind the
 * SDK's ETCH_TYPE_* (etch.h) and the reader's ETCH_EVENT_* (reader.h). */
#define ETCH_TRACK_EVENT_SLICE_BEGIN 1
#define ETCH_TRACK_EVENT_SLICE_END 2
#define ETCH_TRACK_EVENT_INSTANT 3
#define ETCH_TRACK_EVENT_COUNTER 4

/* Field types of custom events (etch/event.h), as the trace's schema
 * writes them (docs/format.md); readers see them too (etch/reader.h). */
typedef enum etch_field_type {
  ETCH_FIELD_INT8 = 1,
  ETCH_FIELD_INT16 = 2,
  ETCH_FIELD_INT32 = 3,
  ETCH_FIELD_INT64 = 4,
  ETCH_FIELD_UINT8 = 5,
  ETCH_FIELD_UINT16 = 6,
  ETCH_FIELD_UINT32 = 7,
  ETCH_FIELD_UINT64 = 8,
  ETCH_FIELD_FLOAT = 9,
  ETCH_FIELD_DOUBLE = 10,
  ETCH_FIELD_BOOL = 11,
  ETCH_FIELD_STR = 12,   /* UTF-8 (or ANSI) */
  ETCH_FIELD_WSTR = 13,  /* wchar_t, written as UTF-8 */
  ETCH_FIELD_U16STR = 14, /* UTF-16, written as UTF-8 */
  /* An array of the element type in the low bits (INT8 .. DOUBLE). */
  ETCH_FIELD_ARRAY = 0x40
} etch_field_type;

#ifdef __cplusplus
}
#endif

#endif /* ETCH_COMMON_H */

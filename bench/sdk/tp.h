/*
 * tp.h - the LTTng-UST tracepoint provider of the SDK benchmark: the same
 * events bench_sdk.c records with etch, so the two are compared on equal
 * payloads. A slice begin or end carries no field (the event type names it,
 * as etch's interned name iid does); the instant carries one int64 arg; the
 * counter one int64 value. `off` is never enabled: its cost is LTTng's
 * disabled tracepoint.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER etchbench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./tp.h"

#if !defined(ETCH_BENCH_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define ETCH_BENCH_TP_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(etchbench, off, LTTNG_UST_TP_ARGS(),
                           LTTNG_UST_TP_FIELDS())

LTTNG_UST_TRACEPOINT_EVENT(etchbench, slice_begin, LTTNG_UST_TP_ARGS(),
                           LTTNG_UST_TP_FIELDS())

LTTNG_UST_TRACEPOINT_EVENT(etchbench, slice_end, LTTNG_UST_TP_ARGS(),
                           LTTNG_UST_TP_FIELDS())

LTTNG_UST_TRACEPOINT_EVENT(
    etchbench, instant, LTTNG_UST_TP_ARGS(int64_t, v),
    LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(int64_t, v, v)))

LTTNG_UST_TRACEPOINT_EVENT(
    etchbench, counter, LTTNG_UST_TP_ARGS(int64_t, value),
    LTTNG_UST_TP_FIELDS(lttng_ust_field_integer(int64_t, value, value)))

#endif /* ETCH_BENCH_TP_H */

#include <lttng/tracepoint-event.h>

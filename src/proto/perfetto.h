/*
 * perfetto.h - field numbers and enum values of the Perfetto messages etch
 * reads and writes. Written from Perfetto's public .proto schemas
 * (protos/perfetto/trace/...); only numbers, no generated code.
 *
 * Naming: ETCH_<MESSAGE>_<FIELD>.
 */
#ifndef ETCH_PROTO_PERFETTO_H
#define ETCH_PROTO_PERFETTO_H

#include "etch/common.h" /* TrackEvent.Type values */

/* Trace */
#define ETCH_TRACE_PACKET 1

/* TracePacket */
#define ETCH_PKT_CLOCK_SNAPSHOT 6
#define ETCH_PKT_TIMESTAMP 8
#define ETCH_PKT_TRUSTED_UID 3
#define ETCH_PKT_TRUSTED_SEQ_ID 10
#define ETCH_PKT_TRACK_EVENT 11
#define ETCH_PKT_INTERNED_DATA 12
#define ETCH_PKT_SEQUENCE_FLAGS 13
#define ETCH_PKT_TRACE_CONFIG 33
#define ETCH_PKT_TRACE_STATS 35
#define ETCH_PKT_SYNCHRONIZATION_MARKER 36
#define ETCH_PKT_SYNC_MARKER 36
#define ETCH_PKT_PREVIOUS_PACKET_DROPPED 42
#define ETCH_PKT_COMPRESSED_PACKETS 50
#define ETCH_PKT_TIMESTAMP_CLOCK_ID 58
#define ETCH_PKT_TRACE_PACKET_DEFAULTS 59
#define ETCH_PKT_TRACK_DESCRIPTOR 60
#define ETCH_PKT_SERVICE_EVENT 69
#define ETCH_PKT_EXTENSION_DESCRIPTOR 72
#define ETCH_PKT_TRUSTED_PID 79
#define ETCH_PKT_FIRST_PACKET_ON_SEQUENCE 87
#define ETCH_PKT_SYSTEM_INFO 45
#define ETCH_PKT_MACHINE_ID 98 /* the service's: which machine wrote it */
#define ETCH_PKT_REMOTE_CLOCK_SYNC 107
#define ETCH_PKT_ZSTD_COMPRESSED_PACKETS 133
#define ETCH_PKT_FOR_TESTING 900
/* Multi-machine traces: what the host's service writes of each machine. */
#define ETCH_PKT_SYSTEM_INFO 45
#define ETCH_PKT_MACHINE_ID 98
#define ETCH_PKT_REMOTE_CLOCK_SYNC 107

/* SystemInfo, Utsname */
#define ETCH_SYSINFO_UTSNAME 1
#define ETCH_SYSINFO_ANDROID_BUILD_FINGERPRINT 2
#define ETCH_SYSINFO_ANDROID_SDK_VERSION 5
#define ETCH_SYSINFO_NUM_CPUS 8
#define ETCH_SYSINFO_SYSTEM_RAM_BYTES 16
#define ETCH_UTSNAME_SYSNAME 1
#define ETCH_UTSNAME_VERSION 2
#define ETCH_UTSNAME_RELEASE 3
#define ETCH_UTSNAME_MACHINE 4

/* RemoteClockSync, RemoteClockSync.SyncedClocks (each a ClockSnapshot) */
#define ETCH_RCS_SYNCED_CLOCKS 1
#define ETCH_RCS_CLIENT_CLOCKS 2
#define ETCH_RCS_HOST_CLOCKS 3

/* TracePacket.SequenceFlags */
#define ETCH_SEQ_INCREMENTAL_STATE_CLEARED 1
#define ETCH_SEQ_NEEDS_INCREMENTAL_STATE 2

/* BuiltinClock */
#define ETCH_CLOCK_REALTIME 1
#define ETCH_CLOCK_REALTIME_COARSE 2
#define ETCH_CLOCK_MONOTONIC 3
#define ETCH_CLOCK_MONOTONIC_COARSE 4
#define ETCH_CLOCK_MONOTONIC_RAW 5
#define ETCH_CLOCK_BOOTTIME 6
/* First sequence-scoped clock id (64..127). */
#define ETCH_CLOCK_SEQ_SCOPED_FIRST 64
#define ETCH_CLOCK_SEQ_SCOPED_LAST 127

/* ClockSnapshot */
#define ETCH_CLOCKSNAP_CLOCKS 1
#define ETCH_CLOCKSNAP_PRIMARY_TRACE_CLOCK 2
/* ClockSnapshot.Clock (field numbers; ETCH_CLOCK_* above are clock ids) */
#define ETCH_SNAPCLOCK_CLOCK_ID 1
#define ETCH_SNAPCLOCK_TIMESTAMP 2
#define ETCH_SNAPCLOCK_IS_INCREMENTAL 3
#define ETCH_SNAPCLOCK_UNIT_MULTIPLIER_NS 4

/* TracePacketDefaults */
#define ETCH_DEFAULTS_TIMESTAMP_CLOCK_ID 58
#define ETCH_DEFAULTS_TRACK_EVENT_DEFAULTS 11
/* TrackEventDefaults */
#define ETCH_TEDEFAULTS_TRACK_UUID 11
#define ETCH_TEDEFAULTS_EXTRA_COUNTER_TRACK_UUIDS 31
#define ETCH_TEDEFAULTS_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS 45

/* TrackEvent */
#define ETCH_TE_CATEGORY_IIDS 3
#define ETCH_TE_DEBUG_ANNOTATIONS 4
#define ETCH_TE_SOURCE_LOCATION_IID 34
#define ETCH_TE_SOURCE_LOCATION 33
#define ETCH_TE_TYPE 9
#define ETCH_TE_NAME_IID 10
#define ETCH_TE_TRACK_UUID 11
#define ETCH_TE_EXTRA_COUNTER_VALUES 12
#define ETCH_TE_TIMESTAMP_DELTA_US 1
#define ETCH_TE_TIMESTAMP_ABSOLUTE_US 16
#define ETCH_TE_THREAD_TIME_DELTA_US 2
#define ETCH_TE_LEGACY_EVENT 6
#define ETCH_TE_CATEGORIES 22
#define ETCH_TE_NAME 23
#define ETCH_TE_COUNTER_VALUE 30
#define ETCH_TE_EXTRA_COUNTER_TRACK_UUIDS 31
#define ETCH_TE_FLOW_IDS_OLD 36
#define ETCH_TE_TERMINATING_FLOW_IDS_OLD 42
#define ETCH_TE_DOUBLE_COUNTER_VALUE 44
#define ETCH_TE_EXTRA_DOUBLE_COUNTER_TRACK_UUIDS 45
#define ETCH_TE_EXTRA_DOUBLE_COUNTER_VALUES 46
#define ETCH_TE_FLOW_IDS 47
#define ETCH_TE_TERMINATING_FLOW_IDS 48
#define ETCH_TE_CALLSTACK_IID 56 /* InternedData.callstacks */

/* TrackEvent.Type (the values are etch/common.h's) */
#define ETCH_TE_TYPE_UNSPECIFIED 0
#define ETCH_TE_TYPE_SLICE_BEGIN ETCH_TRACK_EVENT_SLICE_BEGIN
#define ETCH_TE_TYPE_SLICE_END ETCH_TRACK_EVENT_SLICE_END
#define ETCH_TE_TYPE_INSTANT ETCH_TRACK_EVENT_INSTANT
#define ETCH_TE_TYPE_COUNTER ETCH_TRACK_EVENT_COUNTER

/* DebugAnnotation */
#define ETCH_DA_NAME_IID 1
#define ETCH_DA_BOOL_VALUE 2
#define ETCH_DA_UINT_VALUE 3
#define ETCH_DA_INT_VALUE 4
#define ETCH_DA_DOUBLE_VALUE 5
#define ETCH_DA_STRING_VALUE 6
#define ETCH_DA_POINTER_VALUE 7
#define ETCH_DA_NESTED_VALUE 8
#define ETCH_DA_LEGACY_JSON_VALUE 9
#define ETCH_DA_NAME 10
#define ETCH_DA_DICT_ENTRIES 11
#define ETCH_DA_ARRAY_VALUES 12
#define ETCH_DA_PROTO_VALUE 14
#define ETCH_DA_PROTO_TYPE_NAME 16
#define ETCH_DA_STRING_VALUE_IID 17

/* InternedData */
#define ETCH_ID_EVENT_CATEGORIES 1
#define ETCH_ID_EVENT_NAMES 2
#define ETCH_ID_DEBUG_ANNOTATION_NAMES 3
#define ETCH_ID_SOURCE_LOCATIONS 4
#define ETCH_ID_DEBUG_ANNOTATION_STRING_VALUES 29
/* Call stacks (profile_common.proto's messages): InternedString { iid 1,
 * str 2 }; Mapping { iid 1, build_id 2, start 4, end 5, path_string_ids 7 };
 * Frame { iid 1, function_name_id 2, mapping_id 3, rel_pc 4 }; Callstack
 * { iid 1, repeated frame_ids 2, outermost first }. */
#define ETCH_ID_FUNCTION_NAMES 5
#define ETCH_ID_FRAMES 6
#define ETCH_ID_CALLSTACKS 7
#define ETCH_ID_BUILD_IDS 16
#define ETCH_ID_MAPPING_PATHS 17
#define ETCH_ID_MAPPINGS 19
#define ETCH_ISTR_IID 1
#define ETCH_ISTR_STR 2
#define ETCH_MAPPING_IID 1
#define ETCH_MAPPING_BUILD_ID 2
#define ETCH_MAPPING_START 4
#define ETCH_MAPPING_END 5
#define ETCH_MAPPING_PATH_STRING_IDS 7
#define ETCH_FRAME_IID 1
#define ETCH_FRAME_FUNCTION_NAME_ID 2
#define ETCH_FRAME_MAPPING_ID 3
#define ETCH_FRAME_REL_PC 4
#define ETCH_CALLSTACK_IID 1
#define ETCH_CALLSTACK_FRAME_IDS 2
/* TracePacket.module_symbols: ModuleSymbols { path 1, build_id 2 (raw),
 * repeated address_symbols 3 { address 1, repeated lines 2 {
 * function_name 1, source_file_name 2, line_number 3 } } } */
#define ETCH_PKT_MODULE_SYMBOLS 61
#define ETCH_MODSYM_PATH 1
#define ETCH_MODSYM_BUILD_ID 2
#define ETCH_MODSYM_ADDRESS_SYMBOLS 3
#define ETCH_ADDRSYM_ADDRESS 1
#define ETCH_ADDRSYM_LINES 2
#define ETCH_LINE_FUNCTION_NAME 1
#define ETCH_LINE_SOURCE_FILE_NAME 2
#define ETCH_LINE_LINE_NUMBER 3
/* TracePacket.perf_sample: PerfSample { cpu 1, pid 2, tid 3,
 * callstack_iid 4, cpu_mode 5 (Profiling.CpuMode), ... } (the fields the
 * reader reads; the packet's timestamp is the sample's). */
#define ETCH_PKT_PERF_SAMPLE 66
#define ETCH_PERF_SAMPLE_CPU 1
#define ETCH_PERF_SAMPLE_PID 2
#define ETCH_PERF_SAMPLE_TID 3
#define ETCH_PERF_SAMPLE_CALLSTACK_IID 4
#define ETCH_PERF_SAMPLE_CPU_MODE 5
/* etch's own InternedData field: custom event schemas (not in Perfetto's
 * protos; readers that do not know it skip it, docs/format.md). EventSchema
 * { iid 1 (the event name's iid), name 2, logger 3, event 4, flags 5,
 * repeated field 6 { name 1, type 2 } } */
#define ETCH_ID_EVENT_SCHEMAS 900
#define ETCH_SCHEMA_IID 1
#define ETCH_SCHEMA_NAME 2
#define ETCH_SCHEMA_LOGGER 3
#define ETCH_SCHEMA_EVENT 4
#define ETCH_SCHEMA_FLAGS 5
#define ETCH_SCHEMA_FIELD 6
#define ETCH_SFIELD_NAME 1
#define ETCH_SFIELD_TYPE 2
/* The bytes of one value of a numeric field type (an array's element). */
static inline unsigned etch__field_elem_size(unsigned type) {
  switch (type) {
    case ETCH_FIELD_INT8: case ETCH_FIELD_UINT8: return 1;
    case ETCH_FIELD_INT16: case ETCH_FIELD_UINT16: return 2;
    case ETCH_FIELD_INT32: case ETCH_FIELD_UINT32: case ETCH_FIELD_FLOAT:
      return 4;
    default: return 8;
  }
}
/* EventCategory / EventName / DebugAnnotationName: { iid = 1, name = 2 } */
#define ETCH_INTERNED_IID 1
#define ETCH_INTERNED_NAME 2
/* InternedString (debug_annotation_string_values): { iid = 1, str = 2 } */
#define ETCH_INTERNED_STR 2
/* SourceLocation */
#define ETCH_SRCLOC_IID 1
#define ETCH_SRCLOC_FILE_NAME 2
#define ETCH_SRCLOC_FUNCTION_NAME 3
#define ETCH_SRCLOC_LINE_NUMBER 4

/* TrackDescriptor */
#define ETCH_TD_UUID 1
#define ETCH_TD_NAME 2
#define ETCH_TD_PROCESS 3
#define ETCH_TD_THREAD 4
#define ETCH_TD_PARENT_UUID 5
#define ETCH_TD_COUNTER 8
#define ETCH_TD_STATIC_NAME 10
#define ETCH_TD_CHILD_ORDERING 11
#define ETCH_TD_SIBLING_ORDER_RANK 12
#define ETCH_TD_DESCRIPTION 14
/* ProcessDescriptor */
#define ETCH_PD_PID 1
#define ETCH_PD_CMDLINE 2
#define ETCH_PD_PROCESS_NAME 6
/* ThreadDescriptor */
#define ETCH_THD_PID 1
#define ETCH_THD_TID 2
#define ETCH_THD_THREAD_NAME 5
/* CounterDescriptor */
#define ETCH_CD_TYPE 1
#define ETCH_CD_CATEGORIES 2
#define ETCH_CD_UNIT 3
#define ETCH_CD_UNIT_MULTIPLIER 4
#define ETCH_CD_IS_INCREMENTAL 5
#define ETCH_CD_UNIT_NAME 6
/* CounterDescriptor.Unit */
#define ETCH_CD_UNIT_UNSPECIFIED 0
#define ETCH_CD_UNIT_TIME_NS 1
#define ETCH_CD_UNIT_COUNT 2
#define ETCH_CD_UNIT_SIZE_BYTES 3

/* TraceStats */
#define ETCH_TS_BUFFER_STATS 1
#define ETCH_TS_PRODUCERS_CONNECTED 2
#define ETCH_TS_PRODUCERS_SEEN 3
#define ETCH_TS_DATA_SOURCES_REGISTERED 4
#define ETCH_TS_TRACING_SESSIONS 6
#define ETCH_TS_TOTAL_BUFFERS 7
#define ETCH_TS_CHUNKS_DISCARDED 8
#define ETCH_TS_INVALID_PACKETS 10
#define ETCH_TS_WRITER_STATS 18
/* TraceStats.WriterStats: which buffer a sequence wrote into (readers
 * attribute a sequence's packet loss to its buffer with it). */
#define ETCH_WS_SEQUENCE_ID 1
#define ETCH_WS_BUFFER 4
#define ETCH_TS_FLUSHES_REQUESTED 12
#define ETCH_TS_FLUSHES_SUCCEEDED 13
#define ETCH_TS_FLUSHES_FAILED 14
/* TraceStats.BufferStats */
#define ETCH_BS_BYTES_WRITTEN 1
#define ETCH_BS_CHUNKS_WRITTEN 2
#define ETCH_BS_CHUNKS_OVERWRITTEN 3
#define ETCH_BS_WRITE_WRAP_COUNT 4
#define ETCH_BS_PATCHES_SUCCEEDED 5
#define ETCH_BS_PATCHES_FAILED 6
#define ETCH_BS_CHUNKS_REWRITTEN 10
#define ETCH_BS_ABI_VIOLATIONS 9
#define ETCH_BS_BUFFER_SIZE 12
#define ETCH_BS_BYTES_OVERWRITTEN 13
#define ETCH_BS_BYTES_READ 14
#define ETCH_BS_CHUNKS_READ 17
#define ETCH_BS_CHUNKS_DISCARDED 18
#define ETCH_BS_TRACE_WRITER_PACKET_LOSS 19

#endif /* ETCH_PROTO_PERFETTO_H */

/*
 * proto/ipc.h - field numbers of the messages of Perfetto's IPC: the frame
 * (protos/perfetto/ipc/wire_protocol.proto), the producer port
 * (producer_port.proto), the consumer port (consumer_port.proto) and the
 * CommitDataRequest (protos/perfetto/common/commit_data_request.proto).
 * Facts from the public schemas; the names follow them.
 */
#ifndef ETCH_PROTO_IPC_H
#define ETCH_PROTO_IPC_H

/* IPCFrame */
enum {
  ETCH_IPCF_DATA_FOR_TESTING = 1,
  ETCH_IPCF_REQUEST_ID = 2,
  ETCH_IPCF_BIND_SERVICE = 3,
  ETCH_IPCF_BIND_SERVICE_REPLY = 4,
  ETCH_IPCF_INVOKE_METHOD = 5,
  ETCH_IPCF_INVOKE_METHOD_REPLY = 6,
  ETCH_IPCF_REQUEST_ERROR = 7,
  ETCH_IPCF_SET_PEER_IDENTITY = 8, /* a relay's, before what it forwards */
};
/* IPCFrame.BindService */
enum { ETCH_IPC_BIND_SERVICE_NAME = 1 };
/*
 * The services' names as BindService carries them: Perfetto binds a service
 * by the name of its proto service (`service ProducerPort` in
 * producer_port.proto), not by the file's name.
 */
#define ETCH_IPC_PRODUCER_PORT "ProducerPort"
#define ETCH_IPC_CONSUMER_PORT "ConsumerPort"
/* IPCFrame.BindServiceReply (and its MethodInfo) */
enum {
  ETCH_IPC_BIND_REPLY_SUCCESS = 1,
  ETCH_IPC_BIND_REPLY_SERVICE_ID = 2,
  ETCH_IPC_BIND_REPLY_METHODS = 3,
  ETCH_IPC_METHOD_INFO_ID = 1,
  ETCH_IPC_METHOD_INFO_NAME = 2,
};
/* IPCFrame.InvokeMethod */
enum {
  ETCH_IPC_INVOKE_SERVICE_ID = 1,
  ETCH_IPC_INVOKE_METHOD_ID = 2,
  ETCH_IPC_INVOKE_ARGS = 3,
  ETCH_IPC_INVOKE_DROP_REPLY = 4,
};
/* IPCFrame.InvokeMethodReply */
enum {
  ETCH_IPC_REPLY_SUCCESS = 1,
  ETCH_IPC_REPLY_HAS_MORE = 2,
  ETCH_IPC_REPLY_PROTO = 3,
};
/* IPCFrame.RequestError */
enum { ETCH_IPC_ERROR_ERROR = 1 };
/* IPCFrame.SetPeerIdentity: who a relay forwards (seen on the wire from
 * Perfetto's traced_relay: pid, uid, the machine's boot id, its name) */
enum {
  ETCH_IPC_PEER_PID = 1,
  ETCH_IPC_PEER_UID = 2,
  ETCH_IPC_PEER_MACHINE_ID_HINT = 3,
  ETCH_IPC_PEER_MACHINE_NAME = 4,
};
#define ETCH_IPC_RELAY_PORT "RelayPort"

/* ---- producer port ---- */

/* InitializeConnectionRequest / Response */
enum {
  ETCH_ICR_PAGE_SIZE_HINT = 1,
  ETCH_ICR_SIZE_HINT = 2,
  ETCH_ICR_PRODUCER_NAME = 3,
  ETCH_ICR_SMB_SCRAPING_MODE = 4,
  ETCH_ICR_SMB_SCRAPING_UNSPECIFIED = 0, /* its values */
  ETCH_ICR_SMB_SCRAPING_ENABLED = 1,
  ETCH_ICR_SMB_SCRAPING_DISABLED = 2,
  ETCH_ICR_PRODUCER_PROVIDED_SHMEM = 6,
  ETCH_ICR_SDK_VERSION = 8,
  ETCH_ICRESP_USING_PRODUCER_SHMEM = 1,
  ETCH_ICRESP_DIRECT_SMB_PATCHING = 2,
  ETCH_ICRESP_USE_SHMEM_EMULATION = 3,
};
/* RegisterDataSourceRequest / Response, UnregisterDataSourceRequest */
enum {
  ETCH_RDS_DESCRIPTOR = 1,
  ETCH_RDS_RESP_ERROR = 1,
  ETCH_UDS_NAME = 1,
};
/* RegisterTraceWriterRequest, UnregisterTraceWriterRequest */
enum {
  ETCH_RTW_WRITER_ID = 1,
  ETCH_RTW_TARGET_BUFFER = 2,
};
/* NotifyDataSourceStarted/StoppedRequest */
enum { ETCH_NDS_DATA_SOURCE_ID = 1 };
/* ActivateTriggersRequest */
enum { ETCH_ATR_TRIGGER_NAMES = 1 };
/* GetAsyncCommandResponse */
enum {
  ETCH_GAC_START_DATA_SOURCE = 1,
  ETCH_GAC_STOP_DATA_SOURCE = 2,
  ETCH_GAC_SETUP_TRACING = 3,
  ETCH_GAC_FLUSH = 5,
  ETCH_GAC_SETUP_DATA_SOURCE = 6,
  ETCH_GAC_CLEAR_INCREMENTAL_STATE = 7,
  /* SetupDataSource / StartDataSource */
  ETCH_GAC_DS_INSTANCE_ID = 1,
  ETCH_GAC_DS_CONFIG = 2,
  /* StopDataSource */
  ETCH_GAC_STOP_INSTANCE_ID = 1,
  /* SetupTracing */
  ETCH_GAC_SETUP_PAGE_SIZE_KB = 1,
  /* Flush */
  ETCH_GAC_FLUSH_DATA_SOURCE_IDS = 1,
  ETCH_GAC_FLUSH_REQUEST_ID = 2,
  ETCH_GAC_FLUSH_FLAGS = 3,
  /* ClearIncrementalState */
  ETCH_GAC_CLEAR_DATA_SOURCE_IDS = 1,
};
/* CommitDataRequest */
enum {
  ETCH_CDR_CHUNKS_TO_MOVE = 1,
  ETCH_CDR_CHUNKS_TO_PATCH = 2,
  ETCH_CDR_FLUSH_REQUEST_ID = 3,
  /* ChunksToMove */
  ETCH_CDR_MOVE_PAGE = 1,
  ETCH_CDR_MOVE_CHUNK = 2,
  ETCH_CDR_MOVE_TARGET_BUFFER = 3,
  ETCH_CDR_MOVE_DATA = 4,             /* the chunk's bytes, when the service
                                         emulates shared memory */
  ETCH_CDR_MOVE_CHUNK_INCOMPLETE = 5, /* those bytes scraped mid-write */
  /* ChunkToPatch */
  ETCH_CDR_PATCH_TARGET_BUFFER = 1,
  ETCH_CDR_PATCH_WRITER_ID = 2,
  ETCH_CDR_PATCH_CHUNK_ID = 3,
  ETCH_CDR_PATCH_PATCHES = 4,
  ETCH_CDR_PATCH_HAS_MORE = 5,
  /* ChunkToPatch.Patch */
  ETCH_CDR_PATCH_OFFSET = 1,
  ETCH_CDR_PATCH_DATA = 2,
};

/* ---- relay port (relay_port.proto) ---- */

enum {
  /* InitRelayRequest { SystemInfo system_info = 1 } */
  ETCH_IRR_SYSTEM_INFO = 1,
  /* SyncClockRequest { Phase phase = 1; repeated Clock clocks = 2 } */
  ETCH_SCR_PHASE = 1,
  ETCH_SCR_CLOCKS = 2,
  ETCH_SCR_PHASE_PING = 1,
  ETCH_SCR_PHASE_UPDATE = 2,
  /* SyncClockRequest.Clock */
  ETCH_SCR_CLOCK_ID = 1,
  ETCH_SCR_CLOCK_TIMESTAMP = 2,
};

/* ---- consumer port ---- */

enum {
  /* EnableTracingRequest / Response */
  ETCH_ETR_TRACE_CONFIG = 1,
  ETCH_ETR_ATTACH_NOTIFICATION_ONLY = 2,
  ETCH_ETRESP_DISABLED = 1,
  ETCH_ETRESP_ERROR = 3,
  /* ReadBuffersResponse and its Slice */
  ETCH_RBR_SLICES = 2,
  ETCH_RBR_SLICE_DATA = 1,
  ETCH_RBR_SLICE_LAST = 2,
  /* FreeBuffersRequest */
  ETCH_FBR_BUFFER_IDS = 1,
  /* FlushRequest */
  ETCH_FR_TIMEOUT_MS = 1,
  /* QueryServiceStateResponse */
  ETCH_QSS_SERVICE_STATE = 1,
  /* GetTraceStatsResponse */
  ETCH_GTS_TRACE_STATS = 1,
  /* QueryCapabilitiesResponse { TracingServiceCapabilities capabilities = 1
   * { has_query_capabilities = 1, observable_events = 2 } } */
  ETCH_QCR_CAPABILITIES = 1,
  ETCH_TSC_HAS_QUERY_CAPABILITIES = 1,
};

/* ---- messages the ports carry ---- */

/* DataSourceDescriptor (protos/perfetto/common/data_source_descriptor.proto)
 * and TrackEventDescriptor { repeated TrackEventCategory
 * available_categories = 1 { name = 1, description = 2, tags = 3 } } */
enum {
  ETCH_DSD_NAME = 1,
  ETCH_DSD_WILL_NOTIFY_ON_STOP = 2,
  ETCH_DSD_WILL_NOTIFY_ON_START = 3,
  ETCH_DSD_HANDLES_INCREMENTAL_STATE_CLEAR = 4,
  ETCH_DSD_TRACK_EVENT_DESCRIPTOR = 6,
  ETCH_DSD_ID = 7,
  ETCH_DSD_NO_FLUSH = 9,
  ETCH_TED_AVAILABLE_CATEGORIES = 1,
  ETCH_TEC_NAME = 1,
  ETCH_TEC_DESCRIPTION = 2,
  ETCH_TEC_TAGS = 3,
};
/* DataSourceConfig fields the service fills in when passing it on */
enum {
  ETCH_DSC_NAME = 1,
  ETCH_DSC_TARGET_BUFFER = 2,
  ETCH_DSC_TRACE_DURATION_MS = 3,
  ETCH_DSC_TRACING_SESSION_ID = 4,
  ETCH_DSC_STOP_TIMEOUT_MS = 7,
  ETCH_DSC_TRACK_EVENT_CONFIG = 113,
  ETCH_DSC_INTERCEPTOR_CONFIG = 115,
  /* InterceptorConfig, and its ConsoleConfig */
  ETCH_ICC_NAME = 1,
  ETCH_ICC_CONSOLE_CONFIG = 100,
  ETCH_CONSOLE_OUTPUT = 1,
  ETCH_CONSOLE_ENABLE_COLORS = 2,
  ETCH_TEC_DISABLED_CATEGORIES = 1,
  ETCH_TEC_ENABLED_CATEGORIES = 2,
  ETCH_TEC_DISABLED_TAGS = 3,
  ETCH_TEC_ENABLED_TAGS = 4,
};
/* TracingServiceState (protos/perfetto/common/tracing_service_state.proto) */
enum {
  ETCH_TSS_PRODUCERS = 1,
  ETCH_TSS_DATA_SOURCES = 2,
  ETCH_TSS_NUM_SESSIONS = 3,
  ETCH_TSS_NUM_SESSIONS_STARTED = 4,
  ETCH_TSS_PRODUCER_ID = 1,
  ETCH_TSS_PRODUCER_NAME = 2,
  ETCH_TSS_PRODUCER_UID = 3,
  ETCH_TSS_PRODUCER_PID = 5,
  ETCH_TSS_DS_DESCRIPTOR = 1,
  ETCH_TSS_DS_PRODUCER_ID = 2,
};

#endif /* ETCH_PROTO_IPC_H */

/*
 * methods.c - the service's two ports as Perfetto's IPC names them: the
 * method tables a BindService is answered with, and the replies every
 * method sends (see methods.h).
 */
#include <stddef.h>
#include <string.h>

#include "proto/ipc.h"
#include "service/methods.h"

/* In the order of PM_... and CM_... (methods.h): a method's id is its
 * place here plus one. */
static const char *const producer_methods[] = {
    "InitializeConnection", "RegisterDataSource", "UnregisterDataSource",
    "CommitData", "GetAsyncCommand", "RegisterTraceWriter",
    "UnregisterTraceWriter", "NotifyDataSourceStarted",
    "NotifyDataSourceStopped", "ActivateTriggers", "Sync",
    "UpdateDataSource"};
static const char *const consumer_methods[] = {
    "EnableTracing", "DisableTracing", "ReadBuffers", "FreeBuffers",
    "Flush", "StartTracing", "ChangeTraceConfig", "Detach", "Attach",
    "GetTraceStats", "ObserveEvents", "QueryServiceState",
    "QueryCapabilities", "SaveTraceForBugreport"};
_Static_assert(sizeof producer_methods / sizeof *producer_methods ==
                   PM_COUNT,
               "producer_methods and PM_... disagree");
_Static_assert(sizeof consumer_methods / sizeof *consumer_methods ==
                   CM_COUNT,
               "consumer_methods and CM_... disagree");

/* A reply whose body is len bytes at data (NULL, 0: none). */
void etch__svc_send_reply_bytes(etch_ipc_conn *c, uint64_t req, bool ok,
                                const uint8_t *data, size_t len, bool more,
                                int fd) {
  etch_ipc_frame f;
  memset(&f, 0, offsetof(etch_ipc_frame, methods));
  f.kind = ETCH_IPC_REPLY;
  f.request_id = req;
  f.success = ok;
  f.has_more = more;
  f.body.data = data;
  f.body.len = (uint32_t)len;
  etch__ipc_conn_send(c, &f, fd);
}

void etch__svc_send_reply(etch_ipc_conn *c, uint64_t req, bool ok,
                          const etch__pb_buf *body, bool more, int fd) {
  etch__svc_send_reply_bytes(c, req, ok, body ? etch__pb_buf_data(body) : NULL,
                             body ? etch__pb_buf_len(body) : 0, more, fd);
}

void etch__svc_reply_empty(etch_ipc_conn *c, const etch_ipc_frame *f, bool ok) {
  if (!f->drop_reply)
    etch__svc_send_reply(c, f->request_id, ok, NULL, false, -1);
}

static void send_bind_reply(etch_ipc_conn *c, uint64_t req, bool ok,
                            uint32_t service_id, const char *const *names,
                            uint32_t n) {
  etch_ipc_frame f;
  memset(&f, 0, sizeof f);
  f.kind = ETCH_IPC_BIND_REPLY;
  f.request_id = req;
  f.success = ok;
  f.service_id = service_id;
  if (ok) {
    f.nmethods = n;
    for (uint32_t i = 0; i < n; i++) {
      f.methods[i].id = i + 1;
      f.methods[i].name.data = (const uint8_t *)names[i];
      f.methods[i].name.len = (uint32_t)strlen(names[i]);
    }
  }
  etch__ipc_conn_send(c, &f, -1);
}

static const char *const relay_methods[] = {"InitRelay", "SyncClock"};
_Static_assert(sizeof relay_methods / sizeof *relay_methods == RM_COUNT,
               "relay_methods and RM_... disagree");

bool etch__svc_bind(etch_ipc_conn *c, const etch_ipc_frame *f,
                    bool is_producer, bool relay, uint32_t *service_id) {
  if (is_producer && relay &&
      etch__ipc_bytes_eq(f->name, ETCH_IPC_RELAY_PORT)) {
    send_bind_reply(c, f->request_id, true, RELAY_SERVICE_ID, relay_methods,
                    RM_COUNT);
    *service_id = RELAY_SERVICE_ID;
    return true;
  }
  bool ok = etch__ipc_bytes_eq(f->name, is_producer ? ETCH_IPC_PRODUCER_PORT
                                                    : ETCH_IPC_CONSUMER_PORT);
  if (is_producer)
    send_bind_reply(c, f->request_id, ok, PRODUCER_SERVICE_ID,
                    producer_methods, PM_COUNT);
  else
    send_bind_reply(c, f->request_id, ok, CONSUMER_SERVICE_ID,
                    consumer_methods, CM_COUNT);
  if (service_id) *service_id = ok ? (is_producer ? PRODUCER_SERVICE_ID
                                                  : CONSUMER_SERVICE_ID)
                                   : 0;
  return ok;
}

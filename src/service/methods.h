/*
 * methods.h - the service's ports as Perfetto's IPC names them (methods.c):
 * the methods' numbers, BindService, the replies. Calls nothing of the
 * service's; every layer above may use it.
 */
#ifndef ETCH_SERVICE_METHODS_H
#define ETCH_SERVICE_METHODS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc/ipc.h"
#include "pb/pb.h"

/* The ports' methods, numbered as their tables in methods.c. */
enum {
  PM_INIT = 1, PM_REGISTER, PM_UNREGISTER, PM_COMMIT, PM_ASYNC,
  PM_REG_WRITER, PM_UNREG_WRITER, PM_STARTED, PM_STOPPED, PM_TRIGGERS,
  PM_SYNC, PM_UPDATE, PM_COUNT = PM_UPDATE
};
enum {
  CM_ENABLE = 1, CM_DISABLE, CM_READ, CM_FREE, CM_FLUSH, CM_START,
  CM_CHANGE, CM_DETACH, CM_ATTACH, CM_STATS, CM_OBSERVE, CM_QUERY,
  CM_CAPS, CM_BUGREPORT, CM_COUNT = CM_BUGREPORT
};
enum { RM_INIT_RELAY = 1, RM_SYNC_CLOCK, RM_COUNT = RM_SYNC_CLOCK };

#define PRODUCER_SERVICE_ID 1u
#define CONSUMER_SERVICE_ID 2u
#define RELAY_SERVICE_ID 3u

/* Answers a BindService on a producer's (is_producer) or a consumer's
 * connection; whether it named that port. A producer's socket that serves
 * the RelayPort (`relay`) binds that too: *service_id says which. */
bool etch__svc_bind(etch_ipc_conn *c, const etch_ipc_frame *f,
                    bool is_producer, bool relay, uint32_t *service_id);
void etch__svc_send_reply_bytes(etch_ipc_conn *c, uint64_t req, bool ok,
                                const uint8_t *data, size_t len, bool more,
                                int fd);
void etch__svc_send_reply(etch_ipc_conn *c, uint64_t req, bool ok,
                          const etch__pb_buf *body, bool more, int fd);
void etch__svc_reply_empty(etch_ipc_conn *c, const etch_ipc_frame *f, bool ok);

#endif /* ETCH_SERVICE_METHODS_H */

/*
 * machine.h - machines other than the host (machine.c): what the producer
 * port asks of a network peer's first frames and the RelayPort, what a
 * session writes of the machines recording in it. Calls core.c and
 * methods.c only.
 */
#ifndef ETCH_SERVICE_MACHINE_H
#define ETCH_SERVICE_MACHINE_H

#include "service/service_int.h"

/* The machine of a network producer without a relay's word: its address. */
int etch__svc_machine_of_address(etch_service *s, producer *p);
/* A frame before anything else on a producer's connection: a relay's
 * SetPeerIdentity is taken on a network connection only, first and once;
 * whether the frame was one (and so is handled). */
bool etch__svc_peer_identity(etch_service *s, producer *p,
                             const etch_ipc_frame *f);
/* A call on the RelayPort (InitRelay, SyncClock). */
int etch__svc_relay_call(etch_service *s, producer *p,
                         const etch_ipc_frame *f);
machine *etch__svc_find_machine(etch_service *s, uint32_t id);
/* Machine `id` (0: the host, nothing to do) records in session x: what
 * the trace says of it is written with its reads. */
int etch__svc_session_machine(session *x, uint32_t id);
/* Whether producer p's machine records for data source `src` of session
 * x (trace_all_machines, machine_name_filter). */
bool etch__svc_machine_matches(etch_service *s, const session *x,
                               const etch_tc_source *src, const producer *p);
/* The packets that say what the machines recording in session x are
 * (SystemInfo, RemoteClockSync), those not written into its trace yet. */
int etch__svc_put_machines(etch_service *s, session *x, etch_tracefile *t);
void etch__svc_free_machines(etch_service *s);

#endif /* ETCH_SERVICE_MACHINE_H */

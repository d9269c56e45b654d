/*
 * ports.h - the producer port (producer.c) and the consumer port
 * (consumer.c) as the loop drives them: a connection's events, and a
 * connection that goes. Each port calls the sessions and the layers
 * below them, never the other port nor the loop.
 */
#ifndef ETCH_SERVICE_PORTS_H
#define ETCH_SERVICE_PORTS_H

#include "service/service_int.h"

/* producer.c */
void etch__svc_service_producer(etch_service *s, producer *p, short rev);
void etch__svc_drop_producer(etch_service *s, producer *p, const char *why);

/* consumer.c */
void etch__svc_service_consumer(etch_service *s, consumer *c, short rev);
void etch__svc_drop_consumer(etch_service *s, consumer *c, const char *why);

#endif /* ETCH_SERVICE_PORTS_H */

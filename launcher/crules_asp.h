/*
 * crules_asp.h - the ASP.NET triggers of the collection rules
 * (AspNetRequestCount, AspNetRequestDuration, AspNetResponseStatus): one
 * trigger's state, fed the request events of its runtime's counters session.
 */
#ifndef DP_CRULES_ASP_H
#define DP_CRULES_ASP_H

#include <stdbool.h>
#include <stdint.h>

#include "crules.h"
#include "eventpipe/evpayload.h"
#include "eventpipe/nettrace.h"
#include "trace.h"

struct crules_asp;

/* The session's share: the request events' provider added to c. */
int crules_asp_provider(struct trace_config *c, struct err_msg *em);
/* A trigger's state for t (borrowed: outlives it). */
struct crules_asp *crules_asp_new(const struct crule_trigger *t);
void crules_asp_free(struct crules_asp *a); /* accepts NULL */
/* Forget what was counted (the action list ran). */
void crules_asp_reset(struct crules_asp *a);
/* An event of the session (any kind): true when it is a request event and the trigger is now satisfied. */
bool crules_asp_feed(struct crules_asp *a, const struct nettrace_event *e, const struct evpayload *p, int64_t ts_ms);
/* Time passes (requests that are still running may now be slow): true when the trigger is now satisfied. */
bool crules_asp_heartbeat(struct crules_asp *a, int64_t now_ms);

#endif

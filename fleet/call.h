/*
 * call.h - one HTTP request to one agent: straight to its URL, or over a
 * stream its set's dialer opens (a port-forward). The body of a 2xx answer
 * goes to the caller's sink as it arrives (never held whole); any other
 * answer's body is kept, capped, for the error message.
 */
#ifndef DP_FLEET_CALL_H
#define DP_FLEET_CALL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "fleet.h"

/*
 * The low-speed floor: once armed, a call whose body brings fewer than
 * FLEET_FLOOR_BPS bytes a second over the last FLEET_FLOOR_WINDOW_S seconds
 * fails (DP_ETIMEDOUT, naming the agent and the rate): a stalled or dripping
 * agent gives its slot back instead of holding it for the whole timeout. It
 * is armed by the first body byte, not before floor_after_ms: what an agent
 * does before it sends (createdump walking the process, a heap walk, a
 * trace's duration) is bounded by the timeout alone. docs/fleet.md says why
 * these values.
 */
#define FLEET_FLOOR_BPS 1024
#define FLEET_FLOOR_WINDOW_S 30

/* What one request is, and what came back. Everything in the first part is borrowed. */
struct fleet_call {
	const struct fleet_agent *agent;
	const char *caller;        /* sent as X-Diagport-Caller, or NULL */
	const char *method;        /* "GET", "POST", "DELETE" */
	const char *path;          /* "/dump?type=Full&pid=7": the path and query after the agent's URL */
	const char *accept;        /* an Accept header, or NULL */
	const char *body;          /* a POST body (application/json), or NULL */
	size_t body_len;
	long timeout_ms;           /* the whole request; 0: none */
	long floor_after_ms;       /* the low-speed floor is not armed before this long from the start */
	/* the 2xx body, as it arrives: 0 to go on, else the transfer stops and the call fails with em */
	int (*sink)(void *ctx, const char *p, size_t n, struct err_msg *em);
	void *ctx;
	const atomic_bool *cancel; /* set: the transfer stops (the agent sees the connection close) */
	/* filled by fleet_call_run */
	long status;               /* the HTTP status, 0 when none came */
	char location[512];        /* a Location header (202 with an egress provider), or "" */
	uint64_t bytes;            /* body bytes given to the sink */
};

/*
 * Run c. 0 when a 2xx answer came whole (its body all given to the sink);
 * else a DP_E* code with em saying why, in a person's words: the
 * problem+json's detail or title for an error status ("429: a dump is
 * already running"), DP_EAUTH for 401/403, DP_ECANCELED when c->cancel
 * stopped it, DP_EIO when the connection failed or the body was cut off
 * (with the tunnel's own reason when a dialer has one).
 */
int fleet_call_run(struct fleet_call *c, struct err_msg *em);

/* The CA bundle (PEM) https agents' certificates are verified against, for every call from now on (borrowed,
 * kept for the process); NULL: libcurl's default, the system's store. Verification is never turned off. */
void fleet_call_set_cafile(const char *path);

/* A small 2xx answer into *out (a new buffer of at most cap bytes, NUL-terminated). As fleet_call_run. */
int fleet_call_get(const struct fleet_agent *a, const char *caller, const char *path, size_t cap, long timeout_ms,
		   char **out, struct err_msg *em);

#endif

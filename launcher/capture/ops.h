/*
 * ops.h - the agent's operations: captures that run in the background and
 * are watched and cancelled through /operations (dotnet-monitor's API: list,
 * status, DELETE to cancel or ?stop=true to stop). An operation is a capture
 * sent to an egress provider or a file, or one that can be stopped (a
 * trace, a CPU profile, live metrics, logs), streamed or not.
 *
 * The registry keeps the newest `keep` finished operations and every running
 * one. A running operation's record stays valid until op_finish; its worker
 * polls the cancel flag.
 */
#ifndef DP_OPS_H
#define DP_OPS_H

#include <stdatomic.h>
#include <stdint.h>

#include "http/httpd.h"

struct ops;
struct op;

struct ops *ops_new(unsigned keep);
/* Cancel every running operation, wait for their workers to finish, free. Accepts NULL. */
void ops_free(struct ops *o);

/*
 * Register a running operation (strings copied; egress NULL for an artifact
 * streamed to its client; tags is a comma-separated list from the request,
 * or NULL; stoppable: DELETE ?stop=true may end it gracefully; needs: the permission bits a caller of
 * ops_route must hold to see it, 0 for none). Returns the
 * borrowed record and its id.
 */
struct op *ops_add(struct ops *o, const char *egress, uint64_t pid, const char *uid, const char *name,
		   const char *tags, bool stoppable, unsigned needs, char id[37]);
/*
 * Bytes of the artifact delivered so far (to the file, or acknowledged by the
 * store): the status's X-Diagport-Bytes-Sent header.
 */
void op_progress(struct op *op, uint64_t bytes);
/* The flag a worker polls; set by DELETE and by ops_free. */
const atomic_bool *op_cancel_flag(struct op *op);
/* Set by DELETE ?stop=true on a stoppable operation: finish now, with what there is, as a success. */
const atomic_bool *op_stop_flag(struct op *op);
/*
 * The worker is done: rc 0 = Succeeded at `location`; DP_ECANCELED =
 * Cancelled; anything else Failed with `error`. The record must not be used
 * after this.
 */
void op_finish(struct ops *o, struct op *op, int rc, const char *location, const char *error);

/*
 * Wait up to timeout_ms for operation id to end (a capture nobody waits for
 * over HTTP). 0 when it Succeeded, DP_ECANCELED, DP_EIO when it Failed,
 * DP_ETIMEDOUT when it still runs, DP_ENOTFOUND when there is no such operation; *location and
 * *error new strings (or NULL) unless DP_ENOTFOUND.
 */
int ops_wait(struct ops *o, const char *id, int timeout_ms, char **location, char **error);

/*
 * GET /operations, GET /operations/{id} (201 once Succeeded, else 200), DELETE /operations/{id}, for a
 * caller holding the permission bits may_see: an operation that needs others (ops_add's needs: a crash's
 * shipment needs the exceptions kind) is neither listed nor found.
 */
void ops_route(struct ops *o, struct httpd_req *r, unsigned may_see);

#endif

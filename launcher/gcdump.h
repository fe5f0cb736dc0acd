/*
 * gcdump.h - a GC heap snapshot from the runtime's heap-dump events, as
 * dotnet-gcdump collects it (reference §8): a short session that empties the
 * runtime's table of types already described, then a session with the
 * GCHeapSnapshot keywords, which makes the runtime run a full blocking
 * (induced) gen-2 GC and describe every live object (GCBulkNode), its
 * references (GCBulkEdge) and every type (BulkType) while it runs. The
 * session is stopped at that GC's end.
 *
 * What is kept is the per-type table (count and bytes of the live objects)
 * and the totals; the session's raw nettrace can also be kept whole (for
 * `dotnet-gcdump convert` or PerfView elsewhere).
 */
#ifndef DP_GCDUMP_H
#define DP_GCDUMP_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>

#include "buf.h"
#include "errors.h"
#include "port.h"

#define GCDUMP_MAX_TYPES 200000  /* distinct types kept; more are counted under one "(other types)" row */
#define GCDUMP_TIMEOUT_MS 60000  /* the whole snapshot, heap events included */

struct gcdump_type {
	char *name;
	uint64_t count, bytes;
};

struct gcdump {
	uint64_t pid;
	uint32_t gc_count;   /* the induced GC's number */
	uint64_t objects, bytes, edges, roots;
	struct gcdump_type *types; /* sorted by bytes, largest first */
	size_t n_types;
	uint64_t unnamed_types; /* types seen in nodes without a BulkType name (shown by id) */
	long long took_ms;
};

/*
 * Take a snapshot of runtime `cookie`. raw (may be NULL) receives the heap
 * session's nettrace bytes whole. DP_EREMOTE when the runtime refuses the
 * session, DP_EIO when no induced GC came within the timeout or
 * when the stream broke, DP_ESYNTAX when the heap events do not add up;
 * em says which.
 */
int gcdump_capture(struct port *port, const uint8_t cookie[16], uint64_t pid, struct buf *raw, struct gcdump **out,
		   struct err_msg *em);
/* The table: text (a header line, then count, bytes and type per line, then totals) or JSON. */
void gcdump_text(const struct gcdump *g, size_t top, struct buf *out);
json_t *gcdump_json(const struct gcdump *g, size_t top);
void gcdump_free(struct gcdump *g); /* accepts NULL */

#endif

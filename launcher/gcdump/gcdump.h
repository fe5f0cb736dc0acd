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
 * and the totals, type names spelled as dotnet-gcdump spells them; on
 * request the whole graph too, for the .gcdump file (gcdump_file.h); the
 * session's raw nettrace can also be kept whole. The heap session asks for
 * the rundown's module events, so that types carry their module's name.
 */
#ifndef DP_GCDUMP_H
#define DP_GCDUMP_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>

#include "buf.h"
#include "eventpipe/nettrace.h"
#include "errors.h"
#include "gcdump_file.h"
#include "launcher/runtime/port.h"

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
	int64_t unix_ms;             /* when it was taken */
	bool is64;                   /* the process's pointers are 8 bytes */
	struct gcdump_graph *graph;  /* the whole graph (gcdump_capture's graph), else NULL */
};

/*
 * Take a snapshot of runtime `cookie`. raw (may be NULL) receives the heap
 * session's nettrace bytes whole; graph: keep the whole graph too (for
 * gcdump_file), not only the table. DP_EREMOTE when the runtime refuses the
 * session, DP_EIO when no induced GC came within the timeout or
 * when the stream broke, DP_ESYNTAX when the heap events do not add up;
 * em says which.
 */
int gcdump_capture(struct port *port, const uint8_t cookie[16], uint64_t pid, struct buf *raw, bool graph,
		   struct gcdump **out, struct err_msg *em);
/*
 * The reader under gcdump_capture, for a heap session's events from any
 * source: feed them through gcdump_callbacks (ctx = the reader); stop
 * reading once *gcdump_reader_stop() is set (then gcdump_reader_done() is
 * true); gcdump_reader_finish makes the table (*out, the caller's) or says
 * why not: DP_EIO when the induced GC's start and end did not both come,
 * DP_ESYNTAX when the heap events do not add up or lie outside that GC.
 */
struct gcdump_reader;
extern const struct nettrace_callbacks gcdump_callbacks;
struct gcdump_reader *gcdump_reader_new(uint64_t pid, bool graph);
const atomic_bool *gcdump_reader_stop(const struct gcdump_reader *r);
bool gcdump_reader_done(const struct gcdump_reader *r);
int gcdump_reader_finish(struct gcdump_reader *r, struct gcdump **out, struct err_msg *em);
void gcdump_reader_free(struct gcdump_reader *r); /* accepts NULL */

/* The table: text (a header line, then count, bytes and type per line, then totals) or JSON. */
void gcdump_text(const struct gcdump *g, size_t top, struct buf *out);
json_t *gcdump_json(const struct gcdump *g, size_t top);
/*
 * The table as a gzip'd pprof profile (launcher/pprof.h), appended to out:
 * a sample per type (the top, 0 = all), valued in inuse_objects and
 * inuse_space, whose one frame is the type. 0, DP_ETOOBIG (out's cap) or DP_EINTERNAL (zlib).
 */
int gcdump_pprof(const struct gcdump *g, size_t top, struct buf *out, struct err_msg *em);
/* The .gcdump file of a snapshot taken with its graph (gcdump_file.h), appended to out. */
int gcdump_file(struct gcdump *g, struct buf *out, struct err_msg *em);
void gcdump_free(struct gcdump *g); /* accepts NULL */

#endif

/*
 * gcdump_file.h - the .gcdump file (the format dotnet-gcdump, PerfView and
 * Visual Studio read) made from a heap snapshot's events, and the type-name
 * spelling dotnet-gcdump uses.
 *
 * A gcdump_graph records (gcdump_graph.c) what the heap session's events say, compactly: the
 * types (BulkType), the modules' names (the rundown's module events), every
 * object (GCBulkNode: address, size, type, reference count), every reference
 * (GCBulkEdge, in order: object i owns the next EdgeCount ones), the roots
 * (GCBulkRootEdge, GCBulkRootStaticVar, dependent handles). gcdump_graph_write (gcdump_file.c)
 * then builds the graph dotnet-gcdump builds from the same events (its
 * DotNetHeapDumpGraphReader: the "[.NET Roots]" node and its groups, types by
 * module and name, arrays of over 1000 bytes grouped by size, references by
 * node index) and serializes it as GCHeapDump/MemoryGraph in
 * FastSerialization (4-byte stream labels), as GCHeapDump.WriteMemoryGraph
 * does.
 *
 * Memory budget: while recording, 24 bytes per object, 8 per reference, a
 * few per root and type; while writing, 4 bytes per object for the objects
 * in address order (references are found by binary search) and 4 for the
 * node offsets, then the file itself (about 2 bytes per object, 2-5 per
 * reference and 12 per object for node offsets and addresses), reserved at
 * once; references are freed as the file grows. About 64 bytes an object
 * at the peak for a heap of small objects (docs/BENCHMARKS.md). Records live
 * in fixed-size chunks, so growing never copies them. Over
 * GCDUMP_MAX_NODES objects or GCDUMP_MAX_EDGES references the graph is
 * refused (DP_ETOOBIG) instead of kept (dotnet-gcdump stops at 10 million
 * nodes too).
 */
#ifndef DP_GCDUMP_FILE_H
#define DP_GCDUMP_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "errors.h"

#define GCDUMP_MAX_NODES 10000000u  /* objects, as dotnet-gcdump's MaxNodeCount */
#define GCDUMP_MAX_EDGES 80000000u  /* references (640 MB of them) */
#define GCDUMP_MAX_ROOTS 4000000u   /* roots of every kind */
#define GCDUMP_MAX_GRAPH_TYPES 1000000u

/*
 * An open-addressing table from a 64-bit key to a 32-bit value (0 = absent): an object's address to its
 * node, for up to GCDUMP_MAX_NODES objects. Not common/htab.h: 12 bytes a slot here against htab's 24
 * (the stored hash and the padding of a 12-byte slot), on the table that is most of a snapshot's memory.
 */
struct gcdump_idmap {
	uint64_t *key;
	uint32_t *val;
	size_t cap, n;
};
/* The slot of k (its value, 0 when new); add = false: NULL when absent. */
uint32_t *gcdump_idmap_at(struct gcdump_idmap *m, uint64_t k, bool add);
void gcdump_idmap_free(struct gcdump_idmap *m);

/*
 * A runtime type name (BulkType's) spelled as dotnet-gcdump spells it: arity
 * marks (`1) dropped, '[' and ']' as '<' and '>', then "<>" back to "[]"
 * ("System.Func`1[System.Int64]" -> "System.Func<System.Int64>",
 * "System.Int32[,]" -> "System.Int32<,>", as the tool shows it). An empty
 * name is "Type(0xNAMEID)" or, with flag 0x8 (array), "ArrayType(0xNAMEID)";
 * flag 0x4 (an RCW) wraps it as "[RCW name]". New string.
 */
char *gcdump_type_name(const char *name, uint32_t flags, uint32_t name_id);

struct gcdump_graph;
struct gcdump_graph *gcdump_graph_new(void);
void gcdump_graph_free(struct gcdump_graph *g); /* accepts NULL */
/* The most memory the graph may take (0: no cap), counted as GCDUMP_NODE_BYTES an object and
 * GCDUMP_EDGE_BYTES a reference (the peak measured with the file written); past it, node and edge
 * give DP_ETOOBIG. gcdump_graph_budget: the cap when the graph passed it, else 0. */
#define GCDUMP_NODE_BYTES 64u
#define GCDUMP_EDGE_BYTES 13u
void gcdump_graph_set_budget(struct gcdump_graph *g, uint64_t bytes);
uint64_t gcdump_graph_budget(const struct gcdump_graph *g);

/* BulkType's value (name as the runtime spells it), a module event's IL path. */
void gcdump_graph_type(struct gcdump_graph *g, uint64_t type_id, uint64_t module_id, uint32_t name_id,
		       uint32_t flags, const char *name);
void gcdump_graph_module(struct gcdump_graph *g, uint64_t module_id, uint32_t module_flags, const char *il_path);
/* One object, one reference (in their events' order), one root; 0 or DP_ETOOBIG past a cap. */
int gcdump_graph_node(struct gcdump_graph *g, uint64_t address, uint64_t size, uint64_t type_id, uint64_t edges);
int gcdump_graph_edge(struct gcdump_graph *g, uint64_t target);
int gcdump_graph_root(struct gcdump_graph *g, uint64_t address, uint8_t kind, uint32_t flags);
int gcdump_graph_static(struct gcdump_graph *g, uint64_t object, uint64_t type_id, uint32_t flags, const char *field);
int gcdump_graph_dependent(struct gcdump_graph *g, uint64_t key, uint64_t value);

struct gcdump_file_info {
	uint64_t pid;
	int64_t unix_ms;   /* when taken */
	bool is64;         /* the process's pointer size is 8 */
};
/*
 * Append the .gcdump file to out. DP_ESYNTAX when the objects name more
 * references than were described, DP_ETOOBIG over a cap (out's, or the
 * format's 2 GB of node data); em says which.
 */
int gcdump_graph_write(struct gcdump_graph *g, const struct gcdump_file_info *info, struct buf *out,
		       struct err_msg *em);
/* Objects, references and distinct nodes (objects, referenced addresses and root groups) the write made. */
void gcdump_graph_counts(const struct gcdump_graph *g, uint64_t *objects, uint64_t *edges, uint64_t *nodes);

#endif

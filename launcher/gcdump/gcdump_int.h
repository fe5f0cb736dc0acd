/*
 * gcdump_int.h - what the GC heap snapshot's files share.
 *
 *  - the heap session's reader: gcdump.c (the session, its budget, the
 *    table and text outputs) owns it; gcdump_events.c fills it from the
 *    runtime's events, calling nothing of gcdump.c;
 *  - the .gcdump file's two halves: the graph as the events describe it
 *    (gcdump_graph.c: recording, its chunked arrays and maps) and its
 *    writing (gcdump_file.c), which reads the graph and calls the
 *    recording's group helpers; the recording calls nothing of the writing.
 */
#ifndef DP_GCDUMP_INT_H
#define DP_GCDUMP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stdatomic.h>

#include "gcdump.h"
#include "gcdump_file.h"

#define CHUNK_SHIFT 16
#define CHUNK ((size_t)1 << CHUNK_SHIFT)
#define NO_SIZE INT64_MIN

/* ---- fixed-size chunks: growing never copies the records */
struct vec {
	uint8_t **chunk;
	size_t n, n_chunks, esize;
};

/* A new record at the end of v (uninitialised; esize bytes): growing never copies the records. */
void *gcdump_vec_push(struct vec *v);
/* Record i of v. */
void *gcdump_vec_at(const struct vec *v, size_t i);
void gcdump_vec_free(struct vec *v);
/* A hash of "a!b" (either may be NULL). */
uint64_t gcdump_hash_str(const char *a, const char *b);

/* ---- the graph as the events say it */
struct gnode {
	uint64_t addr;
	uint32_t size;  /* low 32 bits, as the tool's (int) cast */
	uint32_t type;  /* a type slot while recording; the graph type after the first pass */
	uint32_t edges;
};

struct btype {
	uint64_t type_id, module_id;
	uint32_t flags, name_id;
	char *name; /* spelled */
};

struct kid {
	uint64_t addr;
	uint32_t builder; /* a group's index + 1, or 0 for an address */
};

/* A root group ("[strong Handles]" ...): a node of size 0 whose children are objects and groups. */
struct group {
	char *name;
	uint32_t parent;            /* index + 1; 0 for the root */
	uint32_t first, next, last; /* child groups, as index + 1 */
	struct kid *kids;
	size_t n_kids, cap_kids;
	uint32_t type;
};

struct gstatic {
	uint64_t object, type_id;
	uint32_t flags;
	char *field;
};

struct gtype {
	char *name, *module;
	int64_t size; /* NO_SIZE until an object has it */
};

struct gcdump_graph {
	struct vec nodes, edges, undef; /* gnode, u64, u64 */
	struct gcdump_idmap slots;      /* TypeID -> slot + 1 */
	uint64_t *slot_id;
	size_t n_slots;
	struct btype *bt;
	size_t n_bt;
	struct gcdump_idmap modules; /* ModuleID -> index into module + 1 */
	char **module;
	size_t n_modules;
	struct group *grp;
	size_t n_grp;
	struct gcdump_idmap grp_by_name; /* hash(parent, name) -> group + 1 */
	size_t n_roots;
	struct gstatic *st;
	size_t n_st;
	/* while writing */
	struct gtype *types;
	size_t n_types, cap_types;
	struct gcdump_idmap type_by_name, type_by_id, sized; /* hash -> type + 1; TypeID -> type + 1 */
	uint32_t *order;        /* the objects by address (their indexes into nodes), to find a reference's node */
	struct gcdump_idmap addr; /* an address no object has -> its (undefined) node's index + 1 */
	uint64_t n_nodes;
	uint64_t budget; /* bytes, 0 for none */
	bool over;       /* passed the budget */
};


/* MemoryNodeBuilder.FindOrCreateChild: group `parent` (index + 1; 0 = none, for the root itself); index + 1. */
uint32_t gcdump_group(struct gcdump_graph *g, uint32_t parent, const char *name);
/* Address as a child of group grp (index + 1); DP_ETOOBIG past GCDUMP_MAX_ROOTS. */
int gcdump_group_add(struct gcdump_graph *g, uint32_t grp, uint64_t address);
/* The "[.NET Roots]" group (made when first asked for). */
uint32_t gcdump_root(struct gcdump_graph *g);

/* ---- the heap session's reader (gcdump.c, gcdump_events.c) ---- */

#define RUNTIME_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define RUNDOWN_PROVIDER "Microsoft-Windows-DotNETRuntimeRundown"
#define LOADER_RUNDOWN 0x8ull /* the rundown's Loader keyword: the modules, not every method */
#define MAX_ENDS 16 /* GC ends held while their start may still come */

struct gcdump_reader {
	struct gcdump *g;
	struct gcdump_graph *graph; /* the whole graph, for the .gcdump file; NULL for the table alone */
	int graph_rc;               /* DP_ETOOBIG once the graph passed a cap */
	uint32_t pointer_size;
	struct gcdump_idmap names; /* TypeID -> index into name[] + 1 */
	char **name;
	size_t n_names;
	struct gcdump_idmap agg; /* TypeID -> index into stat[] + 1 */
	struct {
		uint64_t type_id;
		uint64_t count, bytes;
	} *stat;
	size_t n_stat, cap_stat;
	uint64_t other_count, other_bytes;
	bool started, done, walked;
	uint32_t gc;              /* the induced GC's Count, once started */
	int64_t gc_t0, gc_t1;     /* its start's and end's timestamps */
	int64_t walk_t0, walk_t1; /* the first and last heap event's */
	struct {
		uint32_t count;
		int64_t t;
	} ends[MAX_ENDS]; /* GC ends seen before the induced GC's start, the latest MAX_ENDS */
	size_t n_ends;
	uint64_t edges_due;
	atomic_bool stop;
	const char *bad;
};

#endif

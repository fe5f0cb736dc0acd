/*
 * gcdump.c - GC heap snapshots (gcdump.h).
 *
 * The heap events are the runtime's own (no field list); their layouts are
 * the runtime's manifest (reference §8.2), read with nettrace_reader:
 *   GCStart (1)      u32 Count, u32 Depth, u32 Reason, u32 Type, ...
 *   GCEnd (2)        u32 Count, u32 Depth, ...
 *   BulkType (15)    u32 Count, u16 ClrInstanceID, Count x {u64 TypeID, u64 ModuleID, u32 TypeNameID,
 *                    u32 Flags, u8 CorElementType, string Name, u32 TypeParameterCount, u64 params[]}
 *   GCBulkNode (18)  u32 Index, u32 Count, u16 ClrInstanceID, Count x {ptr Address, u64 Size, u64 TypeID,
 *                    u64 EdgeCount}
 *   GCBulkEdge (19)  u32 Index, u32 Count, u16 ClrInstanceID, Count x {ptr Value, u32 ReferencingFieldID}
 *   GCBulkRootEdge (16) u32 Index, u32 Count, ...
 * The snapshot is whole when both the induced gen-2 GC's start (Depth 2,
 * Reason 1 Induced, Type 0 blocking) and its end (the same Count) are in.
 * They come in either order: each thread's events come in order, but not
 * the threads' among themselves (the runtime writes each thread's buffer in
 * turn), and the GC may start on one thread and walk the heap and end on
 * another. Only a GC forced by a session with GCHeapDump walks the heap, so
 * every heap event is counted as it comes, and afterwards checked by
 * timestamp to lie within that GC (another session's heap walk at the same
 * time would not). The edges must add up to the nodes' EdgeCount, or the
 * snapshot is refused.
 */
#include "gcdump.h"

#include <time.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "mem.h"
#include "eventpipe/nettrace.h"
#include "launcher/trace/trace.h"

#define RUNTIME_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define RUNDOWN_PROVIDER "Microsoft-Windows-DotNETRuntimeRundown"
/* GC | Type | GCHeapDump | GCHeapCollect | GCHeapAndTypeNames: dotnet-gcdump's GCHeapSnapshot keywords */
#define HEAP_KEYWORDS 0x1980001ull
#define FLUSH_MS 100 /* the throw-away session that empties the runtime's table of types already described */
#define MAX_RAW (256u << 20)

#define EV_GC_START 1
#define EV_GC_END 2
#define EV_BULK_TYPE 15
#define EV_BULK_ROOT_EDGE 16
#define EV_BULK_NODE 18
#define EV_BULK_EDGE 19
#define EV_BULK_DEPENDENT 17 /* GCBulkRootConditionalWeakTableElementEdge */
#define EV_BULK_STATIC 38    /* GCBulkRootStaticVar */
/* the module events (ModuleDCStart/DCStop V2, ModuleLoad/Unload; the rundown's DCStart/DCStop): the IL paths */
#define EV_MODULE_DC_START 149
#define EV_MODULE_DC_STOP 150
#define EV_MODULE_LOAD 152
#define EV_MODULE_UNLOAD 153
#define EV_RUNDOWN_MODULE_START 153
#define EV_RUNDOWN_MODULE_STOP 154
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

static void type_names(struct gcdump_reader *c, struct nettrace_reader *r)
{
	uint32_t n = nettrace_u32(r);

	nettrace_u16(r);
	for (uint32_t i = 0; i < n && !r->bad; i++) {
		uint64_t id = nettrace_u64(r), module = nettrace_u64(r);
		uint32_t name_id = nettrace_u32(r), flags = nettrace_u32(r), params, *slot;
		char *raw, *name;

		if (r->p >= r->end) {
			r->bad = true;
			break;
		}
		r->p++; /* CorElementType */
		raw = nettrace_utf16z(r);
		params = nettrace_u32(r);
		if (r->bad || (size_t)(r->end - r->p) / 8 < params) {
			free(raw);
			r->bad = true;
			break;
		}
		r->p += (size_t)params * 8;
		if (c->graph)
			gcdump_graph_type(c->graph, id, module, name_id, flags, raw);
		slot = gcdump_idmap_at(&c->names, id, true);
		if (*slot) {
			free(raw); /* described before */
			continue;
		}
		name = gcdump_type_name(raw, flags, name_id); /* as dotnet-gcdump spells it */
		free(raw);
		c->name = mem_realloc(c->name, (c->n_names + 1) * sizeof(*c->name));
		c->name[c->n_names++] = name;
		*slot = (uint32_t)c->n_names;
	}
}

static void graph_rc(struct gcdump_reader *c, int rc)
{
	if (rc != 0 && c->graph_rc == 0)
		c->graph_rc = rc;
}

/* A module event: ModuleID, AssemblyID, ModuleFlags, Reserved1, ModuleILPath, ... */
static void module(struct gcdump_reader *c, struct nettrace_reader *r)
{
	uint64_t id = nettrace_u64(r);
	uint32_t flags;
	char *path;

	nettrace_u64(r);
	flags = nettrace_u32(r);
	nettrace_u32(r);
	path = nettrace_utf16z(r);
	if (!r->bad && c->graph)
		gcdump_graph_module(c->graph, id, flags, path);
	free(path);
}

static uint64_t pointer(struct gcdump_reader *c, struct nettrace_reader *r)
{
	return c->pointer_size == 4 ? nettrace_u32(r) : nettrace_u64(r);
}

static void nodes(struct gcdump_reader *c, struct nettrace_reader *r)
{
	uint32_t n;

	nettrace_u32(r); /* Index */
	n = nettrace_u32(r);
	nettrace_u16(r);
	for (uint32_t i = 0; i < n && !r->bad; i++) {
		uint64_t size, type, edges, *cnt, *bytes;
		uint32_t *slot;

		uint64_t address = pointer(c, r);

		size = nettrace_u64(r);
		type = nettrace_u64(r);
		edges = nettrace_u64(r);
		if (r->bad)
			break;
		if (c->graph && c->graph_rc == 0)
			graph_rc(c, gcdump_graph_node(c->graph, address, size, type, edges));
		c->g->objects++;
		c->g->bytes += size;
		c->edges_due += edges;
		slot = gcdump_idmap_at(&c->agg, type, c->n_stat < GCDUMP_MAX_TYPES);
		if (slot == NULL) {
			cnt = &c->other_count;
			bytes = &c->other_bytes;
		} else {
			if (*slot == 0) {
				if (c->n_stat == c->cap_stat) {
					c->cap_stat = c->cap_stat ? c->cap_stat * 2 : 256;
					c->stat = mem_realloc(c->stat, c->cap_stat * sizeof(*c->stat));
				}
				c->stat[c->n_stat].type_id = type;
				c->stat[c->n_stat].count = c->stat[c->n_stat].bytes = 0;
				*slot = (uint32_t)++c->n_stat;
			}
			cnt = &c->stat[*slot - 1].count;
			bytes = &c->stat[*slot - 1].bytes;
		}
		(*cnt)++;
		*bytes += size;
	}
}

/* GCBulkEdge, GCBulkRootEdge, the dependent handles' and the static variables' events, into the graph */
static void edges(struct gcdump_reader *c, struct nettrace_reader *r)
{
	uint32_t n;

	nettrace_u32(r); /* Index */
	n = nettrace_u32(r);
	nettrace_u16(r);
	if (!r->bad)
		c->g->edges += n;
	for (uint32_t i = 0; c->graph && i < n && !r->bad && c->graph_rc == 0; i++) {
		uint64_t target = pointer(c, r);

		nettrace_u32(r); /* ReferencingFieldID */
		if (!r->bad)
			graph_rc(c, gcdump_graph_edge(c->graph, target));
	}
}

static void roots(struct gcdump_reader *c, struct nettrace_reader *r)
{
	uint32_t n;

	nettrace_u32(r);
	n = nettrace_u32(r);
	nettrace_u16(r);
	if (!r->bad)
		c->g->roots += n;
	for (uint32_t i = 0; c->graph && i < n && !r->bad && c->graph_rc == 0; i++) {
		uint64_t address = pointer(c, r);
		uint8_t kind = 0;
		uint32_t flags;

		if (r->p < r->end)
			kind = *r->p++;
		else
			r->bad = true;
		flags = nettrace_u32(r);
		pointer(c, r); /* GCRootID */
		if (!r->bad)
			graph_rc(c, gcdump_graph_root(c->graph, address, kind, flags));
	}
}

static void dependents(struct gcdump_reader *c, struct nettrace_reader *r)
{
	uint32_t n;

	nettrace_u32(r);
	n = nettrace_u32(r);
	nettrace_u16(r);
	for (uint32_t i = 0; c->graph && i < n && !r->bad && c->graph_rc == 0; i++) {
		uint64_t key = pointer(c, r), value = pointer(c, r);

		pointer(c, r);
		if (!r->bad)
			graph_rc(c, gcdump_graph_dependent(c->graph, key, value));
	}
}

static void statics(struct gcdump_reader *c, struct nettrace_reader *r)
{
	uint32_t n = nettrace_u32(r);

	nettrace_u64(r); /* AppDomainID */
	nettrace_u16(r);
	for (uint32_t i = 0; c->graph && i < n && !r->bad && c->graph_rc == 0; i++) {
		uint64_t object, type;
		uint32_t flags;
		char *field;

		nettrace_u64(r); /* GCRootID */
		object = nettrace_u64(r);
		type = nettrace_u64(r);
		flags = nettrace_u32(r);
		field = nettrace_utf16z(r);
		if (!r->bad)
			graph_rc(c, gcdump_graph_static(c->graph, object, type, flags, field));
		free(field);
	}
}

static int on_trace(void *ctx, const struct nettrace_trace *t)
{
	struct gcdump_reader *c = ctx;

	c->pointer_size = t->pointer_size;
	c->g->pid = t->pid ? t->pid : c->g->pid;
	return 0;
}

static void finish(struct gcdump_reader *c, int64_t t1)
{
	c->gc_t1 = t1;
	c->done = true;
	atomic_store(&c->stop, true); /* what we came for is in: stop the session */
}

/* A heap event: counted, and its timestamp kept for the check that it lies within the induced GC. */
static void walked(struct gcdump_reader *c, int64_t t)
{
	if (!c->walked || t < c->walk_t0)
		c->walk_t0 = t;
	if (!c->walked || t > c->walk_t1)
		c->walk_t1 = t;
	c->walked = true;
}

static int on_event(void *ctx, const struct nettrace_event *e)
{
	struct gcdump_reader *c = ctx;
	struct nettrace_reader r = { e->payload, e->payload + e->payload_len, false };
	uint32_t count, depth, reason, type;

	if (strcmp(e->meta->provider, RUNDOWN_PROVIDER) == 0) { /* the rundown: after the GC, as the session ends */
		if (e->meta->event_id == EV_RUNDOWN_MODULE_START || e->meta->event_id == EV_RUNDOWN_MODULE_STOP)
			module(c, &r);
		return 0;
	}
	if (strcmp(e->meta->provider, RUNTIME_PROVIDER) != 0)
		return 0;
	if (c->done) { /* only names now: of types and modules */
		if (e->meta->event_id == EV_BULK_TYPE)
			type_names(c, &r);
		else if (e->meta->event_id >= EV_MODULE_DC_START && e->meta->event_id <= EV_MODULE_UNLOAD)
			module(c, &r);
		return 0;
	}
	switch (e->meta->event_id) {
	case EV_GC_START:
		count = nettrace_u32(&r);
		depth = nettrace_u32(&r);
		reason = nettrace_u32(&r);
		type = nettrace_u32(&r);
		if (r.bad || c->started || depth != 2 || reason != 1 || type != 0)
			break;
		c->started = true;
		c->gc = count;
		c->gc_t0 = e->timestamp;
		for (size_t i = 0; i < c->n_ends && i < MAX_ENDS; i++)
			if (c->ends[i].count == count)
				finish(c, c->ends[i].t);
		break;
	case EV_GC_END:
		count = nettrace_u32(&r);
		if (r.bad)
			break;
		if (c->started && count == c->gc) {
			finish(c, e->timestamp);
		} else if (!c->started) {
			c->ends[c->n_ends % MAX_ENDS].count = count;
			c->ends[c->n_ends % MAX_ENDS].t = e->timestamp;
			c->n_ends++;
		}
		break;
	case EV_BULK_TYPE:
		type_names(c, &r);
		break;
	case EV_BULK_NODE:
		walked(c, e->timestamp);
		nodes(c, &r);
		break;
	case EV_BULK_EDGE:
		walked(c, e->timestamp);
		edges(c, &r);
		break;
	case EV_BULK_ROOT_EDGE:
		walked(c, e->timestamp);
		roots(c, &r);
		break;
	case EV_BULK_DEPENDENT:
		walked(c, e->timestamp);
		dependents(c, &r);
		break;
	case EV_BULK_STATIC:
		walked(c, e->timestamp);
		statics(c, &r);
		break;
	case EV_MODULE_DC_START:
	case EV_MODULE_DC_STOP:
	case EV_MODULE_LOAD:
	case EV_MODULE_UNLOAD:
		module(c, &r);
		break;
	default:
		break;
	}
	if (r.bad && !c->bad)
		c->bad = "a heap event shorter than its layout";
	return 0;
}

const struct nettrace_callbacks gcdump_callbacks = { .trace = on_trace, .event = on_event };

static int by_bytes(const void *a, const void *b)
{
	const struct gcdump_type *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* A cgroup file's one number; 0 when it is missing, "max" or not a number. */
static uint64_t cgroup_number(const char *path)
{
	FILE *f = fopen(path, "re");
	char line[32], *end;
	unsigned long long v;

	if (f == NULL)
		return 0;
	if (fgets(line, sizeof(line), f) == NULL)
		line[0] = '\0';
	fclose(f);
	errno = 0;
	v = strtoull(line, &end, 10);
	return errno == 0 && end != line && (*end == '\n' || *end == '\0') ? v : 0;
}

/* A cgroup memory.stat's value of key ("file", "total_cache"); 0 when it is missing. */
static uint64_t cgroup_stat(const char *path, const char *key)
{
	FILE *f = fopen(path, "re");
	char line[128];
	size_t kl = strlen(key);
	uint64_t v = 0;

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
			v = strtoull(line + kl + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* What the graph may take: 3/4 of what the agent's memory limit (cgroup v2, else v1) leaves now, the page
 * cache counted as free (a staged dump leaves its pages charged to the agent, and the kernel reclaims them), so
 * a heap too large for it is refused, naming the limit, before the kernel kills the agent (the injected limit
 * is 64Mi; 2.2 million objects took 98 MB); 0 without a limit. */
static uint64_t graph_budget(void)
{
	uint64_t lim = cgroup_number("/sys/fs/cgroup/memory.max"), used = cgroup_number("/sys/fs/cgroup/memory.current");
	uint64_t cache = cgroup_stat("/sys/fs/cgroup/memory.stat", "file");

	if (lim == 0) {
		lim = cgroup_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
		used = cgroup_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
		cache = cgroup_stat("/sys/fs/cgroup/memory/memory.stat", "total_cache");
	}
	if (lim == 0 || lim >= (1ull << 60))
		return 0;
	used = used > cache ? used - cache : 0;
	return lim > used ? (lim - used) / 4 * 3 : 1;
}

struct gcdump_reader *gcdump_reader_new(uint64_t pid, bool graph)
{
	struct gcdump_reader *c = mem_zalloc(sizeof(*c));

	c->graph = graph ? gcdump_graph_new() : NULL;
	if (c->graph)
		gcdump_graph_set_budget(c->graph, graph_budget());
	c->g = mem_zalloc(sizeof(*c->g));
	c->g->pid = pid;
	c->pointer_size = 8;
	atomic_store(&c->stop, false);
	return c;
}

const atomic_bool *gcdump_reader_stop(const struct gcdump_reader *c)
{
	return &c->stop;
}

bool gcdump_reader_done(const struct gcdump_reader *c)
{
	return c->done;
}

int gcdump_reader_finish(struct gcdump_reader *c, struct gcdump **out, struct err_msg *em)
{
	struct gcdump *g = c->g;

	*out = NULL;
	if (!c->done)
		return err_set(em, DP_EIO, "the induced gen-2 GC's start and end did not both come");
	if (c->bad)
		return err_set(em, DP_ESYNTAX, "%s", c->bad);
	if (c->walked && (c->walk_t0 < c->gc_t0 || c->walk_t1 > c->gc_t1))
		return err_set(em, DP_ESYNTAX, "heap events outside induced GC #%u (another session's heap "
				"snapshot at the same time?)", c->gc);
	if (c->edges_due != g->edges)
		return err_set(em, DP_ESYNTAX, "the heap's objects name %llu references but %llu were described",
			       (unsigned long long)c->edges_due, (unsigned long long)g->edges);
	if (c->graph_rc != 0 && gcdump_graph_budget(c->graph))
		return err_set(em, c->graph_rc, "the heap is too large for the agent's memory limit: the limit left %llu MB "
			       "for the graph, %u bytes an object and %u a reference; raise the agent's memory limit "
			       "(format=stats still counts the heap)",
			       (unsigned long long)(gcdump_graph_budget(c->graph) >> 20), GCDUMP_NODE_BYTES,
			       GCDUMP_EDGE_BYTES);
	if (c->graph_rc != 0)
		return err_set(em, c->graph_rc, "the heap has more than %u objects, %u references or %u roots: too many "
			       "for a .gcdump here (format=stats still counts them)", GCDUMP_MAX_NODES, GCDUMP_MAX_EDGES,
			       GCDUMP_MAX_ROOTS);
	g->graph = c->graph;
	c->graph = NULL;
	g->is64 = c->pointer_size == 8;
	g->types = mem_array(c->n_stat + 1, sizeof(*g->types));
	for (size_t i = 0; i < c->n_stat; i++) {
		uint32_t *slot = gcdump_idmap_at(&c->names, c->stat[i].type_id, false);
		struct gcdump_type *t = &g->types[g->n_types++];

		if (slot) {
			t->name = mem_strdup(c->name[*slot - 1]);
		} else {
			t->name = mem_printf("(type 0x%llx)", (unsigned long long)c->stat[i].type_id);
			g->unnamed_types++;
		}
		t->count = c->stat[i].count;
		t->bytes = c->stat[i].bytes;
	}
	if (c->other_count) {
		struct gcdump_type *t = &g->types[g->n_types++];

		t->name = mem_strdup("(other types)");
		t->count = c->other_count;
		t->bytes = c->other_bytes;
	}
	mem_sort(g->types, g->n_types, sizeof(*g->types), by_bytes);
	g->gc_count = c->gc;
	*out = g;
	c->g = NULL;
	return 0;
}

void gcdump_reader_free(struct gcdump_reader *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->n_names; i++)
		free(c->name[i]);
	free(c->name);
	free(c->stat);
	gcdump_idmap_free(&c->names);
	gcdump_idmap_free(&c->agg);
	gcdump_graph_free(c->graph);
	gcdump_free(c->g);
	free(c);
}

int gcdump_capture(struct port *port, const uint8_t cookie[16], uint64_t pid, struct buf *raw, bool graph,
		   struct gcdump **out, struct err_msg *em)
{
	/* the heap session's rundown: the modules' names (Loader only, not every method's, where the runtime
	 * takes rundown keywords: .NET 9+; older runtimes get their default rundown) */
	struct trace_config flush = { .buffer_mb = 16 }, heap = { .buffer_mb = 256, .rundown = LOADER_RUNDOWN };
	struct gcdump_reader *c = gcdump_reader_new(pid, graph);
	long long t0 = clock_ms();
	struct timespec now;
	int rc;

	clock_gettime(CLOCK_REALTIME, &now);
	c->g->unix_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	*out = NULL;
	if (raw) {
		buf_free(raw);
		buf_init(raw, MAX_RAW);
	}
	/* 1: a session that ends at once empties the runtime's table of types already described, so that the
	 * heap session describes every type again (a second snapshot would otherwise lack their names) */
	rc = trace_config_add(&flush, "Microsoft-DotNETCore-SampleProfiler", 0, 4, NULL, em);
	if (rc == 0)
		rc = trace_run_cb(port, cookie, &flush, FLUSH_MS, NULL, NULL, NULL, NULL, em);
	/* 2: the heap session: enabling GCHeapCollect makes the runtime run the induced GC */
	if (rc == 0)
		rc = trace_config_add(&heap, RUNTIME_PROVIDER, HEAP_KEYWORDS, 5, NULL, em);
	if (rc == 0)
		rc = trace_run_cb(port, cookie, &heap, GCDUMP_TIMEOUT_MS, &c->stop, &gcdump_callbacks, c, raw, em);
	trace_config_free(&flush);
	trace_config_free(&heap);
	if (rc == 0 && !c->done)
		rc = err_set(em, DP_EIO, "no induced gen-2 GC ended within %d s", GCDUMP_TIMEOUT_MS / 1000);
	c->g->took_ms = clock_ms() - t0;
	if (rc == 0)
		rc = gcdump_reader_finish(c, out, em);
	gcdump_reader_free(c);
	return rc;
}

void gcdump_text(const struct gcdump *g, size_t top, struct buf *out)
{
	size_t n = top && top < g->n_types ? top : g->n_types;

	buf_printf(out, "GC heap of pid %llu after induced gen-2 GC #%u: %llu objects, %llu bytes, %zu types\n",
		   (unsigned long long)g->pid, g->gc_count, (unsigned long long)g->objects, (unsigned long long)g->bytes,
		   g->n_types);
	buf_printf(out, "%12s %16s  %s\n", "count", "bytes", "type");
	for (size_t i = 0; i < n; i++)
		buf_printf(out, "%12llu %16llu  %s\n", (unsigned long long)g->types[i].count,
			   (unsigned long long)g->types[i].bytes, g->types[i].name);
	if (n < g->n_types)
		buf_printf(out, "(%zu more types)\n", g->n_types - n);
}

json_t *gcdump_json(const struct gcdump *g, size_t top)
{
	size_t n = top && top < g->n_types ? top : g->n_types;
	json_t *types = json_array();

	for (size_t i = 0; i < n; i++) {
		json_t *t = json_pack("{s:s?, s:I, s:I}", "type", g->types[i].name, "count", (json_int_t)g->types[i].count,
				      "bytes", (json_int_t)g->types[i].bytes);

		if (t == NULL) /* a name that is not UTF-8 */
			t = json_pack("{s:s, s:I, s:I}", "type", "(unreadable name)", "count",
				      (json_int_t)g->types[i].count, "bytes", (json_int_t)g->types[i].bytes);
		json_array_append_new(types, t);
	}
	return json_pack("{s:I, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "pid", (json_int_t)g->pid, "gcCount",
			 (int)g->gc_count, "objects", (json_int_t)g->objects, "bytes", (json_int_t)g->bytes, "references",
			 (json_int_t)g->edges, "roots", (json_int_t)g->roots, "typeCount", (json_int_t)g->n_types,
			 "tookMs", (json_int_t)g->took_ms, "types", types);
}

int gcdump_file(struct gcdump *g, struct buf *out, struct err_msg *em)
{
	struct gcdump_file_info info = { g->pid, g->unix_ms, g->is64 };

	if (g->graph == NULL)
		return err_set(em, DP_EINVAL, "the snapshot was taken without its graph");
	return gcdump_graph_write(g->graph, &info, out, em);
}

void gcdump_free(struct gcdump *g)
{
	if (g == NULL)
		return;
	gcdump_graph_free(g->graph);
	for (size_t i = 0; i < g->n_types; i++)
		free(g->types[i].name);
	free(g->types);
	free(g);
}

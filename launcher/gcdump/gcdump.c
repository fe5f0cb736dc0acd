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
 * snapshot is refused. The events are read by gcdump_events.c; here are the
 * session, its memory budget and the outputs.
 */
#include "gcdump_int.h"

#include <time.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "mem.h"
#include "eventpipe/nettrace.h"
#include "launcher/pprof.h"
#include "launcher/trace/trace.h"

/* GC | Type | GCHeapDump | GCHeapCollect | GCHeapAndTypeNames: dotnet-gcdump's GCHeapSnapshot keywords */
#define HEAP_KEYWORDS 0x1980001ull
#define FLUSH_MS 100 /* the throw-away session that empties the runtime's table of types already described */
#define MAX_RAW (256u << 20)

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
	int rc;

	c->g->unix_ms = clock_unix_ms();
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

int gcdump_pprof(const struct gcdump *g, size_t top, struct buf *out, struct err_msg *em)
{
	size_t n = top && top < g->n_types ? top : g->n_types;
	struct pprof *pp = pprof_new();
	char note[160];
	int rc;

	pprof_sample_type(pp, "inuse_objects", "count");
	pprof_sample_type(pp, "inuse_space", "bytes");
	pprof_time(pp, (int64_t)g->unix_ms * 1000000, 0);
	snprintf(note, sizeof(note), "GC heap of pid %llu after induced gen-2 GC #%u: %llu objects, %llu bytes, %zu types",
		 (unsigned long long)g->pid, g->gc_count, (unsigned long long)g->objects, (unsigned long long)g->bytes,
		 g->n_types);
	pprof_comment(pp, note);
	for (size_t i = 0; i < n; i++) { /* a type is a one-frame stack: the viewers' "function" is the type */
		const char *name = g->types[i].name ? g->types[i].name : "(unnamed type)";
		uint64_t loc = pprof_location(pp, pprof_function(pp, name, name, NULL));
		int64_t v[2] = { (int64_t)g->types[i].count, (int64_t)g->types[i].bytes };

		pprof_sample(pp, &loc, 1, v, NULL, 0);
	}
	rc = pprof_write(pp, out, em);
	pprof_free(pp);
	return rc;
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


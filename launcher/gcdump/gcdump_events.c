/*
 * gcdump_events.c - the heap session's events read into a gcdump_reader
 * (gcdump_callbacks, gcdump.h): the induced GC's start and end, the types'
 * names, the modules' IL paths, and every object, reference and root, into
 * the type table and, when asked for, the graph (gcdump_graph.c). The
 * layouts and the rules for a whole snapshot are in gcdump.c's file-top
 * comment.
 */
#include "gcdump_int.h"

#include <string.h>

#include "mem.h"
#include "eventpipe/nettrace.h"

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
				MEM_GROW(c->stat, c->cap_stat, c->n_stat + 1, 256);
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

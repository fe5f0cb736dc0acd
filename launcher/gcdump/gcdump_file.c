/*
 * gcdump_file.c - the .gcdump file (gcdump_file.h): the graph that
 * gcdump_graph.c recorded, written in dotnet-gcdump's format.
 *
 * The graph is dotnet-gcdump's (DotNetHeapDumpGraphReader and MemoryGraph in
 * dotnet/diagnostics src/Tools/dotnet-gcdump/DotNetHeapDump), rebuilt here
 * from its rules, not its code:
 *   - node 0 is "[.NET Roots]"; its groups ("[static vars]", "[other roots]"
 *     with "[strong Handles]", "[pinning Handles]", ..., "[local vars]",
 *     "[static var TYPE.FIELD]") are nodes of size 0 whose children are the
 *     rooted objects; weak roots are not roots;
 *   - every other node is an address: an object the walk described, or an
 *     address only referenced (UNDEFINED, type 0, as the tool leaves it);
 *   - types are interned by "module!name" (module = the IL path the module
 *     events give, else "Module(0xID)"); an object over 1000 bytes gets the
 *     type "NAME (Bytes > 1K|10K|...)";
 *   - a type's Size is its first object's; a node's size is written only
 *     when it differs.
 * The objects around it are FastSerialization's (fastser.h): GCHeapDump v10
 * holding Graphs.MemoryGraph v1, a tagged InteropInfo region (a forward
 * reference), the forward-reference table and the trailer last. Node data
 * is Graph's blob: per node the compressed (type << 1 | explicit size), the
 * size, the child count and each child's index less the node's.
 *
 * Writing is two passes over the nodes: the first makes the types, the
 * undefined nodes and each node's blob offset (all of which precede the
 * blob in the file), the second encodes the blob straight into the output.
 */
#include "gcdump_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "fastser.h"
#include "mem.h"

#define MAX_SIZE_SMALL 1000 /* objects over this many bytes get a size-range type */

/* ---- the graph's types */
static uint32_t new_type(struct gcdump_graph *g, const char *name, const char *module)
{
	struct gtype *t;

	MEM_GROW(g->types, g->cap_types, g->n_types + 1, 64);
	t = &g->types[g->n_types++];
	t->name = mem_strdup(name);
	t->module = module ? mem_strdup(module) : NULL;
	t->size = NO_SIZE;
	return (uint32_t)g->n_types - 1;
}

/* The tool's CreateType: one type per "module!name". */
static uint32_t intern_type(struct gcdump_graph *g, const char *name, const char *module)
{
	uint32_t *slot = gcdump_idmap_at(&g->type_by_name, gcdump_hash_str(module, name), true);

	if (*slot) {
		const struct gtype *t = &g->types[*slot - 1];

		if (strcmp(t->name, name) == 0 && (t->module == NULL) == (module == NULL) &&
		    (module == NULL || strcmp(t->module, module) == 0))
			return *slot - 1;
		return new_type(g, name, module); /* a hash collision: a type of its own */
	}
	*slot = new_type(g, name, module) + 1;
	return *slot - 1;
}


/* The types: UNDEFINED, then BulkType's in their order, interned by module and name. */
static void bulk_types(struct gcdump_graph *g)
{
	new_type(g, "UNDEFINED", NULL);
	g->types[0].size = 0;
	for (size_t i = 0; i < g->n_bt; i++) {
		const struct btype *b = &g->bt[i];
		uint32_t *m = gcdump_idmap_at(&g->modules, b->module_id, false);
		char *unknown = m ? NULL : mem_printf("Module(0x%llx)", (unsigned long long)b->module_id);
		uint32_t t = intern_type(g, b->name, m ? g->module[*m - 1] : unknown);

		*gcdump_idmap_at(&g->type_by_id, b->type_id, true) = t + 1; /* the last description wins */
		free(unknown);
	}
}

/* The static variables' groups, which need the type names. */
static int static_groups(struct gcdump_graph *g)
{
	uint32_t r = gcdump_root(g), sv;
	int rc = 0;

	gcdump_group(g, r, "[COM/WinRT Objects]");
	sv = gcdump_group(g, r, "[static vars]");
	for (size_t i = 0; i < g->n_st && rc == 0; i++) {
		const struct gstatic *s = &g->st[i];
		uint32_t *t = gcdump_idmap_at(&g->type_by_id, s->type_id, false);
		char *type = t ? mem_strdup(g->types[*t - 1].name) : mem_printf("Type(0x%llx)", (unsigned long long)s->type_id);
		char *name = mem_printf("[static var %s.%s]", type, s->field);
		uint32_t parent = (s->flags & 0x1) ? gcdump_group(g, r, "[thread static vars]") : sv;

		rc = gcdump_group_add(g, gcdump_group(g, parent, name), s->object);
		free(type);
		free(name);
	}
	return rc;
}

/* The groups' types, in pre-order, one per name (MemoryNodeBuilder.AllocateTypeIndexes). */
static void group_types(struct gcdump_graph *g, uint32_t grp, struct gcdump_idmap *seen)
{
	struct group *p = &g->grp[grp - 1];
	uint32_t *slot = gcdump_idmap_at(seen, gcdump_hash_str(NULL, p->name), true);

	if (*slot && strcmp(g->types[*slot - 1].name, p->name) == 0)
		p->type = *slot - 1;
	else if (*slot)
		p->type = new_type(g, p->name, NULL);
	else
		*slot = (p->type = new_type(g, p->name, NULL)) + 1;
	for (uint32_t c = p->first; c; c = g->grp[c - 1].next)
		group_types(g, c, seen);
}

static uint64_t addr_of(const struct gcdump_graph *g, uint32_t j)
{
	return ((const struct gnode *)gcdump_vec_at(&g->nodes, j))->addr;
}

static int by_address(const void *a, const void *b, void *ctx)
{
	uint64_t x = addr_of(ctx, *(const uint32_t *)a), y = addr_of(ctx, *(const uint32_t *)b);

	return x < y ? -1 : x > y;
}

/* The objects in address order: 4 bytes an object (a table from address to node would take 24-48). The heap
 * walk goes region by region in address order, so this is often sorted already. */
static void order_by_address(struct gcdump_graph *g)
{
	bool sorted = true;

	g->order = mem_array(g->nodes.n + 1, sizeof(*g->order));
	for (size_t j = 0; j < g->nodes.n; j++) {
		g->order[j] = (uint32_t)j;
		if (j && addr_of(g, (uint32_t)j) < addr_of(g, (uint32_t)j - 1))
			sorted = false;
	}
	if (!sorted)
		qsort_r(g->order, g->nodes.n, sizeof(*g->order), by_address, g);
}

/* MemoryGraph.GetNodeIndex: the node of an address, a new (undefined) one when it was not described. */
static uint32_t node_index(struct gcdump_graph *g, uint64_t address)
{
	size_t lo = 0, hi = g->nodes.n;
	uint32_t *slot;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t a = addr_of(g, g->order[mid]);

		if (a == address)
			return (uint32_t)(g->n_grp + g->order[mid]);
		if (a < address)
			lo = mid + 1;
		else
			hi = mid;
	}
	slot = gcdump_idmap_at(&g->addr, address, true);

	if (*slot == 0) {
		*(uint64_t *)gcdump_vec_push(&g->undef) = address;
		*slot = (uint32_t)(g->n_grp + g->nodes.n + g->undef.n);
	}
	return *slot - 1;
}

static const char *size_suffix(int32_t size)
{
	return size < 10000 ? " (Bytes > 1K)" : size < 100000 ? " (Bytes > 10K)" : size < 1000000 ? " (Bytes > 100K)" :
	       size < 10000000 ? " (Bytes > 1M)" : size < 100000000 ? " (Bytes > 10M)" : " (Bytes > 100M)";
}

/* GetTypeIndex: the object's type, "UNKNOWN 0xID" when BulkType never named it, by size range over 1000 bytes. */
static uint32_t object_type(struct gcdump_graph *g, uint64_t type_id, int32_t size)
{
	uint32_t *slot = gcdump_idmap_at(&g->type_by_id, type_id, true), t, *sized;
	char *name;

	if (*slot == 0) {
		name = mem_printf("UNKNOWN 0x%llx", (unsigned long long)type_id);
		*slot = intern_type(g, name, NULL) + 1;
		free(name);
	}
	t = *slot - 1;
	if (size <= MAX_SIZE_SMALL)
		return t;
	name = mem_printf("%s%s", g->types[t].name, size_suffix(size));
	sized = gcdump_idmap_at(&g->sized, gcdump_hash_str(NULL, name), true);
	if (*sized && strcmp(g->types[*sized - 1].name, name) == 0) {
		t = *sized - 1;
	} else {
		char *module = g->types[t].module ? mem_strdup(g->types[t].module) : NULL;

		t = intern_type(g, name, module);
		if (*sized == 0)
			*sized = t + 1;
		free(module);
	}
	free(name);
	return t;
}

/* ---- Graph's compressed ints (Node.WriteCompressedInt): 7 bits a byte, the high groups first */
static int ci_len(int32_t v)
{
	int n = 1;

	for (int keep = 25; keep > 4 && (int32_t)((uint32_t)v << keep) >> keep != v; keep -= 7)
		n++;
	return n;
}

static size_t ci_put(uint8_t *p, int32_t v)
{
	int n = ci_len(v);

	for (int i = n - 1; i > 0; i--)
		*p++ = (uint8_t)((v >> (7 * i)) | 0x80);
	*p = (uint8_t)(v & 0x7F);
	return (size_t)n;
}

/* Type index and explicit size, as SetNodeTypeAndSize writes them; the bytes (or their count when p is NULL). */
static size_t type_and_size(struct gcdump_graph *g, uint32_t t, int32_t size, uint8_t *p)
{
	uint8_t tmp[10];
	int32_t ts = (int32_t)(t << 1);
	size_t n;

	if (g->types[t].size == NO_SIZE)
		g->types[t].size = size;
	if (g->types[t].size != size)
		ts |= 1;
	n = ci_put(p ? p : tmp, ts);
	if (ts & 1)
		n += ci_put((p ? p : tmp) + n, size);
	return n;
}

/* A root group's blob bytes (p) or their count (p NULL); it is node i. */
static size_t group_bytes(struct gcdump_graph *g, uint64_t i, const struct group *grp, uint8_t *p)
{
	uint8_t tmp[5];
	size_t len = type_and_size(g, grp->type, 0, p);

	len += ci_put(p ? p + len : tmp, (int32_t)grp->n_kids);
	for (size_t k = 0; k < grp->n_kids; k++) {
		uint64_t c = grp->kids[k].builder ? grp->kids[k].builder - 1 : node_index(g, grp->kids[k].addr);

		len += ci_put(p ? p + len : tmp, (int32_t)((int64_t)c - (int64_t)i));
	}
	return len;
}

/* An object's blob bytes (p) or their count (p NULL); it is node i, its references from *edge on. */
static size_t object_bytes(struct gcdump_graph *g, uint64_t i, const struct gnode *n, size_t *edge, uint8_t *p)
{
	uint8_t tmp[5];
	size_t len = type_and_size(g, n->type, (int32_t)n->size < 0 ? INT32_MAX : (int32_t)n->size, p);

	len += ci_put(p ? p + len : tmp, (int32_t)n->edges);
	for (uint32_t k = 0; k < n->edges; k++) {
		uint64_t c = node_index(g, *(uint64_t *)gcdump_vec_at(&g->edges, (*edge)++));

		len += ci_put(p ? p + len : tmp, (int32_t)((int64_t)c - (int64_t)i));
	}
	return len;
}

/* Pass 1: the types (the sized ones too), the undefined nodes, and each node's offset in the blob. */
static int pass1(struct gcdump_graph *g, struct vec *labels, uint64_t *blob, int64_t *total, struct err_msg *em)
{
	size_t edge = 0;

	*blob = 2; /* the UNDEFINED definition every undefined node points at: type 0, no children */
	for (size_t i = 0; i < g->n_grp; i++) {
		*(uint32_t *)gcdump_vec_push(labels) = (uint32_t)*blob;
		*blob += group_bytes(g, i, &g->grp[i], NULL);
	}
	for (size_t j = 0; j < g->nodes.n; j++) {
		struct gnode *n = gcdump_vec_at(&g->nodes, j);

		if (n->edges > g->edges.n - edge)
			return err_set(em, DP_ESYNTAX, "object %zu names more references than the heap events described", j);
		n->type = object_type(g, g->slot_id[n->type], (int32_t)n->size);
		*(uint32_t *)gcdump_vec_push(labels) = (uint32_t)*blob;
		*blob += object_bytes(g, g->n_grp + j, n, &edge, NULL);
		*total += (int32_t)n->size < 0 ? INT32_MAX : (int32_t)n->size;
		if (*blob > INT32_MAX)
			return err_set(em, DP_ETOOBIG, "the heap graph's node data passes the .gcdump format's 2 GB");
	}
	if (edge != g->edges.n)
		return err_set(em, DP_ESYNTAX, "%zu references described that no object names", g->edges.n - edge);
	return 0;
}

int gcdump_graph_write(struct gcdump_graph *g, const struct gcdump_file_info *info, struct buf *out,
		       struct err_msg *em)
{
	struct fastser o = { out, out->len, 0 };
	struct vec labels = { .esize = sizeof(uint32_t) };
	struct gcdump_idmap seen = { 0 };
	uint64_t blob = 0, n_nodes, ticks;
	int64_t total = 0;
	size_t edge = 0, freed = 0, names = 0;
	uint32_t fwd, tail;
	int rc;

	gcdump_root(g);
	bulk_types(g);
	rc = static_groups(g);
	if (rc != 0)
		return err_set(em, rc, "more than %u roots", GCDUMP_MAX_ROOTS);
	group_types(g, 1, &seen);
	gcdump_idmap_free(&seen);
	order_by_address(g);
	rc = pass1(g, &labels, &blob, &total, em);
	if (rc != 0) {
		gcdump_vec_free(&labels);
		return rc;
	}
	n_nodes = g->n_grp + g->nodes.n + g->undef.n;
	g->n_nodes = n_nodes;
	for (size_t t = 0; t < g->n_types; t++)
		names += 12 + 3 * (strlen(g->types[t].name) + (g->types[t].module ? strlen(g->types[t].module) : 0));
	buf_reserve(out, 4096 + names + n_nodes * 12 + blob); /* the whole file at once (UTF-16 to UTF-8 at most 3:1) */

	fastser_string(&o, "!FastSerialization.1");
	fastser_object(&o, "GCHeapDump", 10, 8);
	fastser_object(&o, "Graphs.MemoryGraph", 1, 0);
	fastser_le(&o, (uint64_t)total, 8);
	fastser_le(&o, 0, 4); /* RootIndex: "[.NET Roots]" */
	fastser_le(&o, g->n_types, 4);
	for (size_t t = 0; t < g->n_types; t++) {
		fastser_string(&o, g->types[t].name);
		fastser_le(&o, g->types[t].size == NO_SIZE ? 0xFFFFFFFFu : (uint32_t)g->types[t].size, 4);
		fastser_string(&o, g->types[t].module);
	}
	fastser_le(&o, n_nodes, 4);
	for (size_t i = 0; i < n_nodes; i++)
		fastser_le(&o, i < labels.n ? *(uint32_t *)gcdump_vec_at(&labels, i) : 0, 4);
	fastser_le(&o, blob, 4);
	fastser_le(&o, 0, 2);
	/* pass 2: each node's bytes (as long as pass 1 found) encoded straight into the output */
	for (size_t i = 0; i < labels.n && o.rc == 0; i++) {
		struct gnode *n = i < g->n_grp ? NULL : gcdump_vec_at(&g->nodes, i - g->n_grp);
		size_t len = (i + 1 < labels.n ? *(uint32_t *)gcdump_vec_at(&labels, i + 1) : blob) - *(uint32_t *)gcdump_vec_at(&labels, i);

		o.rc = buf_reserve(out, len);
		if (o.rc == 0) {
			uint8_t *p = (uint8_t *)out->data + out->len;

			if (n)
				object_bytes(g, i, n, &edge, p);
			else
				group_bytes(g, i, &g->grp[i], p);
			out->len += len;
			out->data[out->len] = '\0';
		}
		for (; (freed + 1) * CHUNK <= edge; freed++) { /* references read for the last time: the file grows */
			free(g->edges.chunk[freed]);
			g->edges.chunk[freed] = NULL;
		}
	}
	gcdump_vec_free(&labels);
	fastser_le(&o, n_nodes, 4);
	for (size_t i = 0; i < n_nodes; i++)
		fastser_le(&o, i < g->n_grp ? 0 : i < g->n_grp + g->nodes.n ? ((struct gnode *)gcdump_vec_at(&g->nodes, i - g->n_grp))->addr :
			   *(uint64_t *)gcdump_vec_at(&g->undef, i - g->n_grp - g->nodes.n), 8);
	fastser_u8(&o, FASTSER_BYTE);
	fastser_u8(&o, info->is64);
	fastser_u8(&o, FASTSER_END); /* MemoryGraph */

	fastser_u8(&o, info->is64);
	fastser_le(&o, 0x3F800000u, 4); /* AverageCountMultiplier 1.0f */
	fastser_le(&o, 0x3F800000u, 4); /* AverageSizeMultiplier */
	fastser_u8(&o, FASTSER_NULL);       /* JSHeapInfo */
	fastser_u8(&o, FASTSER_NULL);       /* DotNetHeapInfo (dotnet-gcdump writes none either) */
	fastser_string(&o, NULL);          /* CollectionLog */
	ticks = (uint64_t)info->unix_ms * 10000u + 621355968000000000ull; /* DateTime ticks, UTC */
	fastser_le(&o, ticks, 8);
	fastser_string(&o, NULL); /* MachineName */
	fastser_string(&o, NULL); /* ProcessName */
	fastser_le(&o, (uint32_t)info->pid, 4);
	fastser_le(&o, 0, 8); /* TotalProcessCommit */
	fastser_le(&o, 0, 8); /* TotalProcessWorkingSet */
	fastser_le(&o, 0, 4); /* CountMultipliersByType: none */
	fastser_u8(&o, FASTSER_SKIP); /* InteropInfo, tagged: a region the reader may skip to forward reference 0 */
	fastser_le(&o, 0, 4);
	fastser_u8(&o, FASTSER_NULL);
	fwd = fastser_label(&o);
	fastser_u8(&o, FASTSER_STRING);
	fastser_string(&o, "diagport"); /* CreationTool */
	fastser_u8(&o, FASTSER_END);     /* GCHeapDump */
	fastser_u8(&o, FASTSER_END);     /* the end of the objects */
	tail = fastser_label(&o);
	fastser_le(&o, 1, 4); /* the forward references: one */
	fastser_le(&o, fwd, 4);
	fastser_le(&o, tail, 4); /* the trailer: the forward-reference table's label */
	fastser_le(&o, tail + 8, 4); /* and last, the trailer's own label */
	if (o.rc != 0)
		return err_set(em, o.rc, "the .gcdump file passes its buffer's cap of %zu bytes", out->cap);
	return 0;
}

void gcdump_graph_counts(const struct gcdump_graph *g, uint64_t *objects, uint64_t *edges, uint64_t *nodes)
{
	*objects = g->nodes.n;
	*edges = g->edges.n;
	*nodes = g->n_nodes;
}


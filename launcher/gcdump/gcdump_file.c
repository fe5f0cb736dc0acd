/*
 * gcdump_file.c - the .gcdump file (gcdump_file.h).
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
#include "gcdump_file.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "fastser.h"
#include "mem.h"

#define CHUNK_SHIFT 16
#define CHUNK ((size_t)1 << CHUNK_SHIFT)
#define MAX_SIZE_SMALL 1000 /* objects over this many bytes get a size-range type */
#define NO_SIZE INT64_MIN

/* ---- fixed-size chunks: growing never copies the records */
struct vec {
	uint8_t **chunk;
	size_t n, n_chunks, esize;
};

static void *vec_push(struct vec *v)
{
	void *p;

	if ((v->n >> CHUNK_SHIFT) == v->n_chunks) {
		v->chunk = mem_realloc(v->chunk, (v->n_chunks + 1) * sizeof(*v->chunk));
		v->chunk[v->n_chunks++] = mem_alloc(CHUNK * v->esize);
	}
	p = v->chunk[v->n >> CHUNK_SHIFT] + (v->n & (CHUNK - 1)) * v->esize;
	v->n++;
	return p;
}

static void *vec_at(const struct vec *v, size_t i)
{
	return v->chunk[i >> CHUNK_SHIFT] + (i & (CHUNK - 1)) * v->esize;
}

static void vec_free(struct vec *v)
{
	for (size_t i = 0; i < v->n_chunks; i++)
		free(v->chunk[i]);
	free(v->chunk);
	v->chunk = NULL;
	v->n = v->n_chunks = 0;
}

/* ---- id map */
uint32_t *gcdump_idmap_at(struct gcdump_idmap *m, uint64_t k, bool add)
{
	size_t i;

	if (add && (m->n + 1) * 2 > m->cap) {
		struct gcdump_idmap bigger = { .cap = m->cap ? m->cap * 2 : 1024 };

		bigger.key = mem_array(bigger.cap, sizeof(*bigger.key));
		bigger.val = mem_array(bigger.cap, sizeof(*bigger.val));
		for (size_t j = 0; j < m->cap; j++)
			if (m->val[j])
				*gcdump_idmap_at(&bigger, m->key[j], true) = m->val[j];
		free(m->key);
		free(m->val);
		*m = bigger;
	}
	if (m->cap == 0)
		return NULL;
	i = (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20) & (m->cap - 1);
	while (m->val[i] && m->key[i] != k)
		i = (i + 1) & (m->cap - 1);
	if (!m->val[i]) {
		if (!add)
			return NULL;
		m->key[i] = k;
		m->n++;
	}
	return &m->val[i];
}

void gcdump_idmap_free(struct gcdump_idmap *m)
{
	free(m->key);
	free(m->val);
	memset(m, 0, sizeof(*m));
}

static uint64_t hash_str(const char *a, const char *b)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const char *s = a; s && *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	h = (h ^ '!') * 0x100000001b3ull;
	for (const char *s = b; s && *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

/* ---- the spelling */
static bool digit(char c)
{
	return c >= '0' && c <= '9';
}

char *gcdump_type_name(const char *name, uint32_t flags, uint32_t name_id)
{
	struct buf b;

	buf_init(&b, 0);
	if (name == NULL || *name == '\0') {
		buf_printf(&b, (flags & 0x8) ? "ArrayType(0x%x)" : "Type(0x%x)", name_id);
	} else {
		for (const char *p = name; *p;) {
			if (*p == '`' && digit(p[1])) {
				for (p++; digit(*p); p++)
					;
				continue;
			}
			buf_putc(&b, *p == '[' ? '<' : *p == ']' ? '>' : *p);
			p++;
		}
		for (size_t i = 0; i + 1 < b.len; i++)
			if (b.data[i] == '<' && b.data[i + 1] == '>') {
				b.data[i] = '[';
				b.data[++i] = ']';
			}
	}
	if (flags & 0x4) {
		char *s = mem_printf("[RCW %s]", b.data);

		buf_free(&b);
		return s;
	}
	return buf_steal(&b, NULL);
}

/* ---- what the events say */
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
	size_t n_types;
	struct gcdump_idmap type_by_name, type_by_id, sized; /* hash -> type + 1; TypeID -> type + 1 */
	uint32_t *order;        /* the objects by address (their indexes into nodes), to find a reference's node */
	struct gcdump_idmap addr; /* an address no object has -> its (undefined) node's index + 1 */
	uint64_t n_nodes;
	uint64_t budget; /* bytes, 0 for none */
	bool over;       /* passed the budget */
};

struct gcdump_graph *gcdump_graph_new(void)
{
	struct gcdump_graph *g = mem_zalloc(sizeof(*g));

	g->nodes.esize = sizeof(struct gnode);
	g->edges.esize = g->undef.esize = sizeof(uint64_t);
	return g;
}

void gcdump_graph_set_budget(struct gcdump_graph *g, uint64_t bytes) { g->budget = bytes; }
uint64_t gcdump_graph_budget(const struct gcdump_graph *g) { return g->over ? g->budget : 0; }

/* Whether one more object (node) or reference fits the budget; notes when it does not. */
static bool within_budget(struct gcdump_graph *g, size_t node, size_t edge)
{
	g->over = g->over || (g->budget && (g->nodes.n + node) * (uint64_t)GCDUMP_NODE_BYTES +
							   (g->edges.n + edge) * (uint64_t)GCDUMP_EDGE_BYTES > g->budget);
	return !g->over;
}

void gcdump_graph_free(struct gcdump_graph *g)
{
	if (g == NULL)
		return;
	vec_free(&g->nodes);
	vec_free(&g->edges);
	vec_free(&g->undef);
	for (size_t i = 0; i < g->n_bt; i++)
		free(g->bt[i].name);
	for (size_t i = 0; i < g->n_modules; i++)
		free(g->module[i]);
	for (size_t i = 0; i < g->n_grp; i++) {
		free(g->grp[i].name);
		free(g->grp[i].kids);
	}
	for (size_t i = 0; i < g->n_st; i++)
		free(g->st[i].field);
	for (size_t i = 0; i < g->n_types; i++) {
		free(g->types[i].name);
		free(g->types[i].module);
	}
	free(g->slot_id);
	free(g->bt);
	free(g->module);
	free(g->grp);
	free(g->st);
	free(g->types);
	gcdump_idmap_free(&g->slots);
	gcdump_idmap_free(&g->modules);
	gcdump_idmap_free(&g->grp_by_name);
	gcdump_idmap_free(&g->type_by_name);
	gcdump_idmap_free(&g->type_by_id);
	gcdump_idmap_free(&g->sized);
	gcdump_idmap_free(&g->addr);
	free(g->order);
	free(g);
}

void gcdump_graph_type(struct gcdump_graph *g, uint64_t type_id, uint64_t module_id, uint32_t name_id,
		       uint32_t flags, const char *name)
{
	struct btype *t;

	if (g->n_bt >= GCDUMP_MAX_GRAPH_TYPES)
		return;
	g->bt = mem_realloc(g->bt, (g->n_bt + 1) * sizeof(*g->bt));
	t = &g->bt[g->n_bt++];
	t->type_id = type_id;
	t->module_id = module_id;
	t->flags = flags;
	t->name_id = name_id;
	t->name = gcdump_type_name(name, flags, name_id);
}

void gcdump_graph_module(struct gcdump_graph *g, uint64_t module_id, uint32_t module_flags, const char *il_path)
{
	uint32_t *slot;

	if ((module_flags & 0x2) || il_path == NULL || g->n_modules >= GCDUMP_MAX_GRAPH_TYPES)
		return; /* a native image: the tool keeps those apart, for ProjectN's types */
	slot = gcdump_idmap_at(&g->modules, module_id, true);
	if (*slot)
		return; /* the first name wins, as the tool's */
	g->module = mem_realloc(g->module, (g->n_modules + 1) * sizeof(*g->module));
	g->module[g->n_modules++] = mem_strdup(il_path);
	*slot = (uint32_t)g->n_modules;
}

int gcdump_graph_node(struct gcdump_graph *g, uint64_t address, uint64_t size, uint64_t type_id, uint64_t edges)
{
	struct gnode *n;
	uint32_t *slot;

	if (g->nodes.n >= GCDUMP_MAX_NODES || edges > GCDUMP_MAX_EDGES || !within_budget(g, 1, 0))
		return DP_ETOOBIG;
	slot = gcdump_idmap_at(&g->slots, type_id, true);
	if (*slot == 0) {
		g->slot_id = mem_realloc(g->slot_id, (g->n_slots + 1) * sizeof(*g->slot_id));
		g->slot_id[g->n_slots++] = type_id;
		*slot = (uint32_t)g->n_slots;
	}
	n = vec_push(&g->nodes);
	n->addr = address;
	n->size = (uint32_t)size;
	n->type = *slot - 1;
	n->edges = (uint32_t)edges;
	return 0;
}

int gcdump_graph_edge(struct gcdump_graph *g, uint64_t target)
{
	if (g->edges.n >= GCDUMP_MAX_EDGES || !within_budget(g, 0, 1))
		return DP_ETOOBIG;
	*(uint64_t *)vec_push(&g->edges) = target;
	return 0;
}

/* MemoryNodeBuilder.FindOrCreateChild: group `parent` (index + 1; 0 = none, for the root itself). */
static uint32_t group(struct gcdump_graph *g, uint32_t parent, const char *name)
{
	uint64_t h = hash_str(name, NULL) ^ ((uint64_t)parent * 0x9E3779B97F4A7C15ull);
	uint32_t *slot = gcdump_idmap_at(&g->grp_by_name, h, true);
	struct group *n;

	if (*slot && g->grp[*slot - 1].parent == parent && strcmp(g->grp[*slot - 1].name, name) == 0)
		return *slot;
	if (parent)
		for (uint32_t c = g->grp[parent - 1].first; c; c = g->grp[c - 1].next)
			if (strcmp(g->grp[c - 1].name, name) == 0)
				return c;
	g->grp = mem_realloc(g->grp, (g->n_grp + 1) * sizeof(*g->grp));
	n = &g->grp[g->n_grp++];
	memset(n, 0, sizeof(*n));
	n->name = mem_strdup(name);
	n->parent = parent;
	if (*slot == 0)
		*slot = (uint32_t)g->n_grp;
	if (parent) {
		struct group *p = &g->grp[parent - 1];
		struct kid *k;

		if (p->last)
			g->grp[p->last - 1].next = (uint32_t)g->n_grp;
		else
			p->first = (uint32_t)g->n_grp;
		p->last = (uint32_t)g->n_grp;
		if (p->n_kids == p->cap_kids) {
			p->cap_kids = p->cap_kids ? p->cap_kids * 2 : 8;
			p->kids = mem_realloc(p->kids, p->cap_kids * sizeof(*p->kids));
		}
		k = &p->kids[p->n_kids++];
		k->addr = 0;
		k->builder = (uint32_t)g->n_grp;
	}
	return (uint32_t)g->n_grp;
}

static int group_add(struct gcdump_graph *g, uint32_t grp, uint64_t address)
{
	struct group *p = &g->grp[grp - 1];

	if (g->n_roots >= GCDUMP_MAX_ROOTS)
		return DP_ETOOBIG;
	g->n_roots++;
	if (p->n_kids == p->cap_kids) {
		p->cap_kids = p->cap_kids ? p->cap_kids * 2 : 8;
		p->kids = mem_realloc(p->kids, p->cap_kids * sizeof(*p->kids));
	}
	p->kids[p->n_kids].addr = address;
	p->kids[p->n_kids++].builder = 0;
	return 0;
}

static uint32_t root(struct gcdump_graph *g)
{
	return g->n_grp ? 1 : group(g, 0, "[.NET Roots]");
}

int gcdump_graph_root(struct gcdump_graph *g, uint64_t address, uint8_t kind, uint32_t flags)
{
	uint32_t r = root(g), parent = r;
	const char *name = "[local vars]";

	group(g, r, "[static vars]");
	if (flags & 0x2)
		return 0; /* a weak reference is not a root */
	if (kind != 0) {
		parent = group(g, r, "[other roots]");
		name = (flags & 0x8) ? "[COM/WinRT Objects]" : kind == 1 ? "[finalizer Handles]" :
		       kind == 2 ? (flags == 0x1 ? "[pinning Handles]" : "[strong Handles]") : "[other Handles]";
	}
	return group_add(g, group(g, parent, name), address);
}

int gcdump_graph_dependent(struct gcdump_graph *g, uint64_t key, uint64_t value)
{
	uint32_t r = root(g);

	if (key == 0)
		return 0;
	return group_add(g, group(g, group(g, r, "[other roots]"), "[Dependent Handles]"), value);
}

int gcdump_graph_static(struct gcdump_graph *g, uint64_t object, uint64_t type_id, uint32_t flags, const char *field)
{
	struct gstatic *s;

	if (g->n_st >= GCDUMP_MAX_ROOTS)
		return DP_ETOOBIG;
	g->st = mem_realloc(g->st, (g->n_st + 1) * sizeof(*g->st));
	s = &g->st[g->n_st++];
	s->object = object;
	s->type_id = type_id;
	s->flags = flags;
	s->field = mem_strdup(field ? field : "");
	return 0;
}

/* ---- the graph's types */
static uint32_t new_type(struct gcdump_graph *g, const char *name, const char *module)
{
	struct gtype *t;

	if ((g->n_types & (g->n_types - 1)) == 0)
		g->types = mem_realloc(g->types, (g->n_types ? g->n_types * 2 : 1) * sizeof(*g->types));
	t = &g->types[g->n_types++];
	t->name = mem_strdup(name);
	t->module = module ? mem_strdup(module) : NULL;
	t->size = NO_SIZE;
	return (uint32_t)g->n_types - 1;
}

/* The tool's CreateType: one type per "module!name". */
static uint32_t intern_type(struct gcdump_graph *g, const char *name, const char *module)
{
	uint32_t *slot = gcdump_idmap_at(&g->type_by_name, hash_str(module, name), true);

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
	uint32_t r = root(g), sv;
	int rc = 0;

	group(g, r, "[COM/WinRT Objects]");
	sv = group(g, r, "[static vars]");
	for (size_t i = 0; i < g->n_st && rc == 0; i++) {
		const struct gstatic *s = &g->st[i];
		uint32_t *t = gcdump_idmap_at(&g->type_by_id, s->type_id, false);
		char *type = t ? mem_strdup(g->types[*t - 1].name) : mem_printf("Type(0x%llx)", (unsigned long long)s->type_id);
		char *name = mem_printf("[static var %s.%s]", type, s->field);
		uint32_t parent = (s->flags & 0x1) ? group(g, r, "[thread static vars]") : sv;

		rc = group_add(g, group(g, parent, name), s->object);
		free(type);
		free(name);
	}
	return rc;
}

/* The groups' types, in pre-order, one per name (MemoryNodeBuilder.AllocateTypeIndexes). */
static void group_types(struct gcdump_graph *g, uint32_t grp, struct gcdump_idmap *seen)
{
	struct group *p = &g->grp[grp - 1];
	uint32_t *slot = gcdump_idmap_at(seen, hash_str(NULL, p->name), true);

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
	return ((const struct gnode *)vec_at(&g->nodes, j))->addr;
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
		*(uint64_t *)vec_push(&g->undef) = address;
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
	sized = gcdump_idmap_at(&g->sized, hash_str(NULL, name), true);
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
		uint64_t c = node_index(g, *(uint64_t *)vec_at(&g->edges, (*edge)++));

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
		*(uint32_t *)vec_push(labels) = (uint32_t)*blob;
		*blob += group_bytes(g, i, &g->grp[i], NULL);
	}
	for (size_t j = 0; j < g->nodes.n; j++) {
		struct gnode *n = vec_at(&g->nodes, j);

		if (n->edges > g->edges.n - edge)
			return err_set(em, DP_ESYNTAX, "object %zu names more references than the heap events described", j);
		n->type = object_type(g, g->slot_id[n->type], (int32_t)n->size);
		*(uint32_t *)vec_push(labels) = (uint32_t)*blob;
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

	root(g);
	bulk_types(g);
	rc = static_groups(g);
	if (rc != 0)
		return err_set(em, rc, "more than %u roots", GCDUMP_MAX_ROOTS);
	group_types(g, 1, &seen);
	gcdump_idmap_free(&seen);
	order_by_address(g);
	rc = pass1(g, &labels, &blob, &total, em);
	if (rc != 0) {
		vec_free(&labels);
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
		fastser_le(&o, i < labels.n ? *(uint32_t *)vec_at(&labels, i) : 0, 4);
	fastser_le(&o, blob, 4);
	fastser_le(&o, 0, 2);
	/* pass 2: each node's bytes (as long as pass 1 found) encoded straight into the output */
	for (size_t i = 0; i < labels.n && o.rc == 0; i++) {
		struct gnode *n = i < g->n_grp ? NULL : vec_at(&g->nodes, i - g->n_grp);
		size_t len = (i + 1 < labels.n ? *(uint32_t *)vec_at(&labels, i + 1) : blob) - *(uint32_t *)vec_at(&labels, i);

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
	vec_free(&labels);
	fastser_le(&o, n_nodes, 4);
	for (size_t i = 0; i < n_nodes; i++)
		fastser_le(&o, i < g->n_grp ? 0 : i < g->n_grp + g->nodes.n ? ((struct gnode *)vec_at(&g->nodes, i - g->n_grp))->addr :
			   *(uint64_t *)vec_at(&g->undef, i - g->n_grp - g->nodes.n), 8);
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

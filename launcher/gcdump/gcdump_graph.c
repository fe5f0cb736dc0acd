/*
 * gcdump_graph.c - the heap graph as the GC's heap-walk events describe it
 * (gcdump_file.h's gcdump_graph_* recording, the id map, the type names'
 * spelling), kept compactly until gcdump_file.c writes it: objects and
 * references in fixed-size chunks, roots in groups as dotnet-gcdump's
 * MemoryNodeBuilder makes them, all within the graph's memory budget.
 */
#include "gcdump_int.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "mem.h"

/* ---- fixed-size chunks: growing never copies the records */
void *gcdump_vec_push(struct vec *v)
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

void *gcdump_vec_at(const struct vec *v, size_t i)
{
	return v->chunk[i >> CHUNK_SHIFT] + (i & (CHUNK - 1)) * v->esize;
}

void gcdump_vec_free(struct vec *v)
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

uint64_t gcdump_hash_str(const char *a, const char *b)
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
	gcdump_vec_free(&g->nodes);
	gcdump_vec_free(&g->edges);
	gcdump_vec_free(&g->undef);
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
	n = gcdump_vec_push(&g->nodes);
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
	*(uint64_t *)gcdump_vec_push(&g->edges) = target;
	return 0;
}

uint32_t gcdump_group(struct gcdump_graph *g, uint32_t parent, const char *name)
{
	uint64_t h = gcdump_hash_str(name, NULL) ^ ((uint64_t)parent * 0x9E3779B97F4A7C15ull);
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
		MEM_GROW(p->kids, p->cap_kids, p->n_kids + 1, 8);
		k = &p->kids[p->n_kids++];
		k->addr = 0;
		k->builder = (uint32_t)g->n_grp;
	}
	return (uint32_t)g->n_grp;
}

int gcdump_group_add(struct gcdump_graph *g, uint32_t grp, uint64_t address)
{
	struct group *p = &g->grp[grp - 1];

	if (g->n_roots >= GCDUMP_MAX_ROOTS)
		return DP_ETOOBIG;
	g->n_roots++;
	MEM_GROW(p->kids, p->cap_kids, p->n_kids + 1, 8);
	p->kids[p->n_kids].addr = address;
	p->kids[p->n_kids++].builder = 0;
	return 0;
}

uint32_t gcdump_root(struct gcdump_graph *g)
{
	return g->n_grp ? 1 : gcdump_group(g, 0, "[.NET Roots]");
}

int gcdump_graph_root(struct gcdump_graph *g, uint64_t address, uint8_t kind, uint32_t flags)
{
	uint32_t r = gcdump_root(g), parent = r;
	const char *name = "[local vars]";

	gcdump_group(g, r, "[static vars]");
	if (flags & 0x2)
		return 0; /* a weak reference is not a root */
	if (kind != 0) {
		parent = gcdump_group(g, r, "[other roots]");
		name = (flags & 0x8) ? "[COM/WinRT Objects]" : kind == 1 ? "[finalizer Handles]" :
		       kind == 2 ? (flags == 0x1 ? "[pinning Handles]" : "[strong Handles]") : "[other Handles]";
	}
	return gcdump_group_add(g, gcdump_group(g, parent, name), address);
}

int gcdump_graph_dependent(struct gcdump_graph *g, uint64_t key, uint64_t value)
{
	uint32_t r = gcdump_root(g);

	if (key == 0)
		return 0;
	return gcdump_group_add(g, gcdump_group(g, gcdump_group(g, r, "[other roots]"), "[Dependent Handles]"), value);
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


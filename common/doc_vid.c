/*
 * doc_vid.c - value ids (doc_vid.h): hash-consing over a document tree.
 *
 * A node's value is its type, tag, and text (scalars) or the ids of its
 * children in order (collections: key, value, key, value... for maps). The
 * table `vals` holds each distinct value once, found through an
 * open-addressing index `slots` by a hash of exactly those parts; a
 * collection's children ids live in `pool`. Working out a node is one walk
 * bottom-up: children first, their ids pushed on `stack`, then the node is
 * looked up by (type, tag, children ids), which costs its own size, not its
 * subtree's. Ids of nodes with an anchor or an alias are remembered in
 * `memo`, so a big anchor and its thousand copies are each walked once, and
 * an alias copy that contains other alias copies does not walk them again.
 */
#include "doc_vid.h"

#include "mem.h"

#include <stdint.h>
#include <string.h>

struct val {
	uint64_t hash;
	const struct doc_node *rep; /* the first node seen with this value: its type, tag, text */
	size_t kids;                /* collections: where its children's ids start in pool */
};

struct doc_vid {
	uint64_t seed;
	struct val *vals; /* id = index */
	size_t n_vals, cap_vals;
	size_t *slots; /* index into vals + 1; 0 = empty */
	size_t slot_cap;
	size_t *pool, n_pool, cap_pool;
	size_t *stack, sp, cap_stack;
	const struct doc_node **memo_node; /* open addressing by pointer; NULL = empty */
	size_t *memo_id, memo_cap, memo_n;
};

static uint64_t mix(uint64_t h, uint64_t x)
{
	h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

static uint64_t hash_bytes(uint64_t h, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static size_t spread(uint64_t x, size_t cap)
{
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 29;
	return (size_t)x & (cap - 1);
}

/* Room for `more` items in a growing array of size_t. */
static size_t *room(size_t *a, size_t n, size_t *cap, size_t more)
{
	if (n + more <= *cap)
		return a;
	while (*cap < n + more)
		*cap = *cap ? *cap * 2 : 256;
	return mem_realloc(a, *cap * sizeof(*a));
}

struct doc_vid *doc_vid_new(void)
{
	struct doc_vid *t = mem_zalloc(sizeof(*t));

	/* the table's address (ASLR) as seed: a document cannot be made to collide everywhere */
	t->seed = mix(1469598103934665603ull, (uint64_t)(uintptr_t)t);
	return t;
}

void doc_vid_free(struct doc_vid *t)
{
	if (t == NULL)
		return;
	mem_free(t->vals);
	mem_free(t->slots);
	mem_free(t->pool);
	mem_free(t->stack);
	mem_free(t->memo_node);
	mem_free(t->memo_id);
	mem_free(t);
}

/* ---- the memo: node pointer -> id, for nodes with an anchor or an alias ---- */

static size_t memo_slot(const struct doc_vid *t, const struct doc_node *n)
{
	size_t i = spread((uint64_t)(uintptr_t)n, t->memo_cap);

	while (t->memo_node[i] && t->memo_node[i] != n)
		i = (i + 1) & (t->memo_cap - 1);
	return i;
}

static bool memo_get(const struct doc_vid *t, const struct doc_node *n, size_t *id)
{
	size_t i;

	if (t->memo_cap == 0)
		return false;
	i = memo_slot(t, n);
	if (t->memo_node[i] == NULL)
		return false;
	*id = t->memo_id[i];
	return true;
}

static void memo_put(struct doc_vid *t, const struct doc_node *n, size_t id)
{
	size_t i;

	if ((t->memo_n + 1) * 2 > t->memo_cap) {
		const struct doc_node **nodes = t->memo_node;
		size_t *ids = t->memo_id, cap = t->memo_cap;

		t->memo_cap = cap ? cap * 2 : 64;
		t->memo_node = mem_array(t->memo_cap, sizeof(*t->memo_node));
		t->memo_id = mem_array(t->memo_cap, sizeof(*t->memo_id));
		for (size_t k = 0; k < cap; k++)
			if (nodes[k]) {
				i = memo_slot(t, nodes[k]);
				t->memo_node[i] = nodes[k];
				t->memo_id[i] = ids[k];
			}
		mem_free(nodes);
		mem_free(ids);
	}
	i = memo_slot(t, n);
	if (t->memo_node[i] == NULL)
		t->memo_n++;
	t->memo_node[i] = n;
	t->memo_id[i] = id;
}

/* ---- the values ---- */

static bool same_tag(const char *a, const char *b)
{
	return a == NULL || b == NULL ? a == b : strcmp(a, b) == 0;
}

static bool is_coll(const struct doc_node *n)
{
	return n->type == DOC_MAP || n->type == DOC_SEQ;
}

/* Does value v hold n, whose children's ids are stack[base..base+k)? */
static bool same_val(const struct doc_vid *t, const struct val *v, const struct doc_node *n, size_t base,
		     size_t k)
{
	const struct doc_node *r = v->rep;

	if (r->type != n->type || !same_tag(r->tag, n->tag))
		return false;
	if (!is_coll(n))
		return r->len == n->len && memcmp(r->text, n->text, n->len) == 0;
	return r->n == n->n && (k == 0 || memcmp(t->pool + v->kids, t->stack + base, k * sizeof(*t->stack)) == 0);
}

static void reindex(struct doc_vid *t)
{
	mem_free(t->slots);
	t->slot_cap = t->slot_cap ? t->slot_cap * 2 : 256;
	t->slots = mem_array(t->slot_cap, sizeof(*t->slots));
	for (size_t id = 0; id < t->n_vals; id++) {
		size_t i = spread(t->vals[id].hash, t->slot_cap);

		while (t->slots[i])
			i = (i + 1) & (t->slot_cap - 1);
		t->slots[i] = id + 1;
	}
}

/* The id of n's value, given its children's ids at stack[base..base+k). */
static size_t intern(struct doc_vid *t, const struct doc_node *n, size_t base, size_t k)
{
	uint64_t h = mix(t->seed, (uint64_t)n->type);
	size_t i;

	h = n->tag ? hash_bytes(mix(h, 1), n->tag, strlen(n->tag)) : h;
	if (!is_coll(n))
		h = hash_bytes(mix(h, n->len), n->text, n->len);
	for (size_t j = 0; j < k; j++)
		h = mix(h, t->stack[base + j]);
	if ((t->n_vals + 1) * 2 > t->slot_cap)
		reindex(t);
	for (i = spread(h, t->slot_cap); t->slots[i]; i = (i + 1) & (t->slot_cap - 1)) {
		const struct val *v = &t->vals[t->slots[i] - 1];

		if (v->hash == h && same_val(t, v, n, base, k))
			return t->slots[i] - 1;
	}
	if (t->n_vals == t->cap_vals) {
		t->cap_vals = t->cap_vals ? t->cap_vals * 2 : 256;
		t->vals = mem_realloc(t->vals, t->cap_vals * sizeof(*t->vals));
	}
	t->pool = room(t->pool, t->n_pool, &t->cap_pool, k);
	if (k)
		memcpy(t->pool + t->n_pool, t->stack + base, k * sizeof(*t->pool));
	t->vals[t->n_vals] = (struct val){ .hash = h, .rep = n, .kids = t->n_pool };
	t->n_pool += k;
	t->slots[i] = t->n_vals + 1;
	return t->n_vals++;
}

size_t doc_vid_of(struct doc_vid *t, const struct doc_node *n)
{
	bool marked = n->anchor || n->alias;
	size_t id, base = t->sp, k = 0;

	if (marked && memo_get(t, n, &id))
		return id;
	if (is_coll(n)) {
		k = n->type == DOC_MAP ? 2 * n->n : n->n;
		t->stack = room(t->stack, t->sp, &t->cap_stack, k);
		t->sp += k;
		for (size_t i = 0; i < n->n; i++) { /* each call leaves sp where it found it */
			if (n->type == DOC_MAP) {
				id = doc_vid_of(t, n->keys[i]);
				t->stack[base + 2 * i] = id;
				id = doc_vid_of(t, n->vals[i]);
				t->stack[base + 2 * i + 1] = id;
			} else {
				id = doc_vid_of(t, n->vals[i]);
				t->stack[base + i] = id;
			}
		}
	}
	id = intern(t, n, base, k);
	t->sp = base;
	if (marked)
		memo_put(t, n, id);
	return id;
}

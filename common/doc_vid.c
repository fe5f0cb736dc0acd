/*
 * doc_vid.c - value ids (doc_vid.h): hash-consing over a document tree.
 *
 * A node's value is its type, tag, and text (scalars) or the ids of its
 * children in order (collections: key, value, key, value... for maps). The
 * table `vals` holds each distinct value once, found through the hash
 * table `index` (common/htab.h) by a hash of exactly those parts; a
 * collection's children ids live in `pool`. Working out a node is one walk
 * bottom-up: children first, their ids pushed on `stack`, then the node is
 * looked up by (type, tag, children ids), which costs its own size, not its
 * subtree's. Ids of nodes with an anchor or an alias are remembered in
 * `memo`, so a big anchor and its thousand copies are each walked once, and
 * an alias copy that contains other alias copies does not walk them again.
 */
#include "doc_vid.h"

#include "htab.h"
#include "mem.h"

#include <stdint.h>
#include <string.h>

struct val {
	const struct doc_node *rep; /* the first node seen with this value: its type, tag, text */
	size_t kids;                /* collections: where its children's ids start in pool */
};

struct doc_vid {
	uint64_t seed;
	struct val *vals; /* id = index */
	size_t n_vals, cap_vals;
	struct htab index; /* of size_t: an id, by its value's hash */
	size_t *pool, n_pool, cap_pool;
	size_t *stack, sp, cap_stack;
	struct htab memo; /* of struct memo, by node pointer */
};

struct memo {
	const struct doc_node *node;
	size_t id;
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

struct doc_vid *doc_vid_new(void)
{
	struct doc_vid *t = mem_zalloc(sizeof(*t));

	/* the table's address (ASLR) as seed: a document cannot be made to collide everywhere */
	t->seed = mix(1469598103934665603ull, (uint64_t)(uintptr_t)t);
	htab_init(&t->index, sizeof(size_t));
	htab_init(&t->memo, sizeof(struct memo));
	return t;
}

void doc_vid_free(struct doc_vid *t)
{
	if (t == NULL)
		return;
	mem_free(t->vals);
	htab_free(&t->index);
	mem_free(t->pool);
	mem_free(t->stack);
	htab_free(&t->memo);
	mem_free(t);
}

/* ---- the memo: node pointer -> id, for nodes with an anchor or an alias ---- */

static bool same_node(const void *slot, const void *node)
{
	return ((const struct memo *)slot)->node == node;
}

static bool memo_get(const struct doc_vid *t, const struct doc_node *n, size_t *id)
{
	const struct memo *m = htab_find(&t->memo, htab_u64((uint64_t)(uintptr_t)n), same_node, n);

	if (m == NULL)
		return false;
	*id = m->id;
	return true;
}

/* Remember n's id (n is not remembered yet: doc_vid_of asked memo_get first). */
static void memo_put(struct doc_vid *t, const struct doc_node *n, size_t id)
{
	struct memo *m = htab_put(&t->memo, htab_u64((uint64_t)(uintptr_t)n));

	*m = (struct memo){ n, id };
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

/* What intern looks for: a value with the node's type, tag and text, or its children's ids. */
struct vkey {
	const struct doc_vid *t;
	const struct doc_node *n;
	size_t base, k;
};

static bool same_id_val(const void *slot, const void *key)
{
	const struct vkey *q = key;

	return same_val(q->t, &q->t->vals[*(const size_t *)slot], q->n, q->base, q->k);
}

/* The id of n's value, given its children's ids at stack[base..base+k). */
static size_t intern(struct doc_vid *t, const struct doc_node *n, size_t base, size_t k)
{
	uint64_t h = mix(t->seed, (uint64_t)n->type);
	struct vkey key = { t, n, base, k };
	const size_t *found;

	h = n->tag ? hash_bytes(mix(h, 1), n->tag, strlen(n->tag)) : h;
	if (!is_coll(n))
		h = hash_bytes(mix(h, n->len), n->text, n->len);
	for (size_t j = 0; j < k; j++)
		h = mix(h, t->stack[base + j]);
	h = htab_u64(h);
	if ((found = htab_find(&t->index, h, same_id_val, &key)) != NULL)
		return *found;
	MEM_GROW(t->vals, t->cap_vals, t->n_vals + 1, 256);
	MEM_GROW(t->pool, t->cap_pool, t->n_pool + k, 256);
	if (k)
		memcpy(t->pool + t->n_pool, t->stack + base, k * sizeof(*t->pool));
	t->vals[t->n_vals] = (struct val){ .rep = n, .kids = t->n_pool };
	t->n_pool += k;
	*(size_t *)htab_put(&t->index, h) = t->n_vals;
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
		MEM_GROW(t->stack, t->cap_stack, t->sp + k, 256);
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

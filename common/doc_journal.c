/*
 * doc_journal.c - the journal of doc.h (doc_journal_begin): what a tree was
 * before doc.c's changes. The first change to a node inside a journal's scope
 * takes a shallow snapshot of it (doc_journal_touch); doc_journal_before()
 * puts the tree as it was back together from the snapshots, sharing every
 * subtree nothing touched. A change outside a journal costs one test.
 */
#include "doc.h"

#include "htab.h"
#include "mem.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/*
 * A hash table (common/htab.h) from a node to its snapshot: a shallow copy
 * (its own keys and vals arrays, children shared) taken the first time the
 * node is changed. All of it is arena memory, as is everything the changes
 * drop, so the snapshots' children stay readable until the scope ends.
 */
struct snapshot {
	const struct doc_node *node;
	struct doc_node *snap;
};

static __thread struct {
	bool on;
	struct htab t; /* of struct snapshot, by node address */
} jr;

static bool same_node(const void *slot, const void *node)
{
	return ((const struct snapshot *)slot)->node == node;
}

static struct doc_node *jr_find(const struct doc_node *n)
{
	const struct snapshot *s = htab_find(&jr.t, htab_u64((uint64_t)(uintptr_t)n), same_node, n);

	return s ? s->snap : NULL;
}

static void jr_add(const struct doc_node *n, struct doc_node *snap)
{
	struct snapshot *s = htab_put(&jr.t, htab_u64((uint64_t)(uintptr_t)n));

	*s = (struct snapshot){ n, snap };
}

/* n is about to change: keep what it is now, once. */
void doc_journal_touch(const struct doc_node *n)
{
	struct doc_node *snap;

	if (!jr.on || jr_find(n) != NULL)
		return;
	snap = mem_alloc(sizeof(*snap));
	*snap = *n;
	snap->alloc = n->n;
	if (n->n) {
		snap->vals = mem_alloc(n->n * sizeof(*snap->vals));
		memcpy(snap->vals, n->vals, n->n * sizeof(*snap->vals));
		if (n->keys) {
			snap->keys = mem_alloc(n->n * sizeof(*snap->keys));
			memcpy(snap->keys, n->keys, n->n * sizeof(*snap->keys));
		}
	}
	jr_add(n, snap);
}

void doc_journal_begin(void)
{
	if (!mem_arena_active() || jr.on)
		DP_FATAL("doc_journal_begin: needs an arena scope (mem.h) and no journal already on");
	jr.on = true;
	htab_init(&jr.t, sizeof(struct snapshot));
}

/* x as it was: x itself when nothing in it changed, else its snapshot with its children as they were. */
static struct doc_node *before(struct doc_node *x)
{
	struct doc_node *snap = jr_find(x), *src = snap ? snap : x, **vals = NULL, **keys = NULL;

	for (size_t i = 0; (src->type == DOC_MAP || src->type == DOC_SEQ) && i < src->n; i++) {
		struct doc_node *v = before(src->vals[i]), *k = src->keys ? before(src->keys[i]) : NULL;

		if (v != src->vals[i] && vals == NULL) {
			vals = snap ? snap->vals : mem_alloc(src->n * sizeof(*vals));
			if (!snap)
				memcpy(vals, src->vals, src->n * sizeof(*vals));
		}
		if (vals)
			vals[i] = v;
		if (k && k != src->keys[i] && keys == NULL) {
			keys = snap ? snap->keys : mem_alloc(src->n * sizeof(*keys));
			if (!snap)
				memcpy(keys, src->keys, src->n * sizeof(*keys));
		}
		if (keys)
			keys[i] = k;
	}
	if (snap)
		return snap; /* its arrays are its own: changed children were written into them */
	if (vals == NULL && keys == NULL)
		return x;
	src = mem_alloc(sizeof(*src));
	*src = *x;
	src->alloc = x->n;
	if (vals)
		src->vals = vals;
	if (keys)
		src->keys = keys;
	return src;
}

struct doc_node *doc_journal_before(struct doc_node *root)
{
	return jr.on ? before(root) : root;
}

void doc_journal_end(void)
{
	memset(&jr, 0, sizeof(jr)); /* the tables were arena memory */
}

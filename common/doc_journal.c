/*
 * doc_journal.c - the journal of doc.h (doc_journal_begin): what a tree was
 * before doc.c's changes. The first change to a node inside a journal's scope
 * takes a shallow snapshot of it (doc_journal_touch); doc_journal_before()
 * puts the tree as it was back together from the snapshots, sharing every
 * subtree nothing touched. A change outside a journal costs one test.
 */
#include "doc.h"

#include "mem.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/*
 * A table of its own (not common/htab.h) from a node to its snapshot: doc_journal_before asks it once
 * for every node of the tree, on the webhook's full review. Through htab (a hash call, a probe loop
 * called out of line, a comparison callback) the review of the 1,500-env pod took 5-6 % longer
 * (bench_review, median 507 against 479 us). The snapshot of each node is a shallow copy
 * (its own keys and vals arrays, children shared) taken the first time the
 * node is changed. All of it is arena memory, as is everything the changes
 * drop, so the snapshots' children stay readable until the scope ends.
 */
static __thread struct {
	bool on;
	size_t cap, n;
	const struct doc_node **nodes;
	struct doc_node **snaps;
} jr;

static size_t jr_slot(const struct doc_node *n, size_t cap)
{
	uint64_t x = (uint64_t)(uintptr_t)n;

	x ^= x >> 29;
	x *= 0x9E3779B97F4A7C15ull;
	return (size_t)(x >> 40) & (cap - 1);
}

static struct doc_node *jr_find(const struct doc_node *n)
{
	for (size_t i = jr_slot(n, jr.cap);; i = (i + 1) & (jr.cap - 1)) {
		if (jr.nodes[i] == n)
			return jr.snaps[i];
		if (jr.nodes[i] == NULL)
			return NULL;
	}
}

static void jr_add(const struct doc_node *n, struct doc_node *snap)
{
	size_t i;

	if ((jr.n + 1) * 2 > jr.cap) { /* keep it at most half full */
		const struct doc_node **nodes = jr.nodes;
		struct doc_node **snaps = jr.snaps;
		size_t cap = jr.cap;

		jr.cap *= 2;
		jr.nodes = mem_array(jr.cap, sizeof(*jr.nodes));
		jr.snaps = mem_array(jr.cap, sizeof(*jr.snaps));
		jr.n = 0;
		for (size_t k = 0; k < cap; k++)
			if (nodes[k])
				jr_add(nodes[k], snaps[k]);
	}
	for (i = jr_slot(n, jr.cap); jr.nodes[i]; i = (i + 1) & (jr.cap - 1))
		;
	jr.nodes[i] = n;
	jr.snaps[i] = snap;
	jr.n++;
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
	jr.cap = 64;
	jr.n = 0;
	jr.nodes = mem_array(jr.cap, sizeof(*jr.nodes));
	jr.snaps = mem_array(jr.cap, sizeof(*jr.snaps));
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

/*
 * patch.c - JSON Patch from one document to another (patch.h).
 *
 * A recursive walk over both trees with the JSON Pointer of the current place
 * in a buffer. Operations are written as they are found, in an order that is
 * valid when applied one after another: in a map, removals, then changes to
 * kept keys, then additions; in an array, removals from the highest index
 * down, then each position of the new array in order (an insertion shifts
 * what follows, which is why positions are taken from the new array).
 */
#include "patch.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

struct walk {
	struct buf *out;
	struct buf path;
	size_t n;
	struct err_msg *em;
};

void patch_pointer_append(struct buf *p, const char *key)
{
	buf_putc(p, '/');
	for (const char *c = key; *c;) {
		size_t run = strcspn(c, "~/");

		buf_append(p, c, run);
		c += run;
		if (*c)
			buf_puts(p, *c++ == '~' ? "~0" : "~1");
	}
}

static void path_index(struct buf *p, size_t i)
{
	char d[24];
	size_t k = sizeof(d);

	do
		d[--k] = (char)('0' + i % 10);
	while ((i /= 10) != 0);
	d[--k] = '/';
	buf_append(p, d + k, sizeof(d) - k);
}

static void path_cut(struct buf *p, size_t len)
{
	p->len = len;
	if (p->data)
		p->data[len] = '\0';
}

/* One operation: {"op":OP,"path":PATH[,"value":V]}. */
static int emit(struct walk *w, const char *op, const struct doc_node *value)
{
	struct doc_node *path = doc_str(w->path.data ? w->path.data : "");
	int rc;

	buf_puts(w->out, w->n ? ",{\"op\":\"" : "{\"op\":\"");
	buf_puts(w->out, op);
	buf_puts(w->out, "\",\"path\":");
	rc = doc_write_json(w->out, path, 0, w->em);
	doc_free(path);
	if (rc == 0 && value) {
		buf_puts(w->out, ",\"value\":");
		rc = doc_write_json(w->out, value, 0, w->em);
	}
	buf_putc(w->out, '}');
	w->n++;
	return rc;
}

static int diff(struct walk *w, const struct doc_node *a, const struct doc_node *b);

/* The same kind of thing, for the walk: both maps, both arrays, or scalars of equal meaning. */
static bool same_kind(const struct doc_node *a, const struct doc_node *b)
{
	if (a->type == DOC_MAP || b->type == DOC_MAP || a->type == DOC_SEQ || b->type == DOC_SEQ)
		return a->type == b->type;
	return doc_equal(a, b);
}

static int diff_map(struct walk *w, const struct doc_node *a, const struct doc_node *b)
{
	size_t base = w->path.len;
	int rc = 0;

	for (size_t i = 0; i < a->n && rc == 0; i++)
		if (doc_find(b, a->keys[i]->text) < 0) {
			patch_pointer_append(&w->path, a->keys[i]->text);
			rc = emit(w, "remove", NULL);
			path_cut(&w->path, base);
		}
	for (size_t i = 0; i < b->n && rc == 0; i++) {
		long j = doc_find(a, b->keys[i]->text);

		if (j < 0 || doc_equal(a->vals[j], b->vals[i]))
			continue;
		patch_pointer_append(&w->path, b->keys[i]->text);
		rc = diff(w, a->vals[j], b->vals[i]);
		path_cut(&w->path, base);
	}
	for (size_t i = 0; i < b->n && rc == 0; i++)
		if (doc_find(a, b->keys[i]->text) < 0) {
			patch_pointer_append(&w->path, b->keys[i]->text);
			rc = emit(w, "add", b->vals[i]);
			path_cut(&w->path, base);
		}
	return rc;
}

/* An array of named objects, indexed: its names sorted (with their positions) for binary search. */
struct name_index {
	const char **names; /* by position */
	size_t *order;      /* positions, sorted by name */
	size_t n;
};

static int by_name(const void *x, const void *y, void *names)
{
	const char **n = names;

	return strcmp(n[*(const size_t *)x], n[*(const size_t *)y]);
}

/* Index s: every item a map with a string "name", no name twice. False (nothing to free) otherwise. */
static bool index_named(const struct doc_node *s, struct name_index *ix)
{
	ix->n = s->n;
	ix->names = mem_array(s->n ? s->n : 1, sizeof(char *));
	ix->order = mem_array(s->n ? s->n : 1, sizeof(size_t));
	for (size_t i = 0; i < s->n; i++) {
		if ((ix->names[i] = doc_get_str(s->vals[i], "name")) == NULL)
			goto no;
		ix->order[i] = i;
	}
	qsort_r(ix->order, s->n, sizeof(size_t), by_name, (void *)ix->names); /* the server diffs on several threads */
	for (size_t i = 1; i < s->n; i++)
		if (strcmp(ix->names[ix->order[i - 1]], ix->names[ix->order[i]]) == 0)
			goto no;
	return true;
no:
	mem_free(ix->names);
	mem_free(ix->order);
	return false;
}

static void index_free(struct name_index *ix)
{
	mem_free(ix->names);
	mem_free(ix->order);
}

static long find_named(const struct name_index *ix, const char *name)
{
	size_t lo = 0, hi = ix->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(ix->names[ix->order[mid]], name);

		if (c == 0)
			return (long)ix->order[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/*
 * Arrays of named objects: the kept items keep their order in both (else 1,
 * and the caller replaces the array). Removals high to low, then the new
 * array's positions in order: a kept item is diffed where it now is, a new
 * one inserted there.
 */
static int diff_named(struct walk *w, const struct doc_node *a, const struct doc_node *b, const struct name_index *ia,
		      const struct name_index *ib)
{
	size_t base = w->path.len;
	long last = -1;
	int rc = 0;

	for (size_t i = 0; i < b->n; i++) {
		long j = find_named(ia, ib->names[i]);

		if (j >= 0) {
			if (j < last)
				return 1;
			last = j;
		}
	}
	for (size_t k = a->n; k-- > 0 && rc == 0;)
		if (find_named(ib, ia->names[k]) < 0) {
			path_index(&w->path, k);
			rc = emit(w, "remove", NULL);
			path_cut(&w->path, base);
		}
	for (size_t i = 0; i < b->n && rc == 0; i++) {
		long j = find_named(ia, ib->names[i]);

		path_index(&w->path, i);
		rc = j >= 0 ? diff(w, a->vals[j], b->vals[i]) : emit(w, "add", b->vals[i]);
		path_cut(&w->path, base);
	}
	return rc;
}

/*
 * b keeps a's named items where they were and only appends (how the injector
 * changes env and container lists): the positional walk below gives the same
 * result as matching by name, without sorting a 1,500-item env list twice.
 */
static bool aligned(const struct doc_node *a, const struct doc_node *b)
{
	if (a->n > b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const char *x = doc_get_str(a->vals[i], "name"), *y = doc_get_str(b->vals[i], "name");

		if (x == NULL || y == NULL || strcmp(x, y) != 0)
			return false;
	}
	return true;
}

static int diff_seq(struct walk *w, const struct doc_node *a, const struct doc_node *b)
{
	size_t base = w->path.len, common = a->n < b->n ? a->n : b->n;
	bool prefix = true;
	int rc = 0;

	if (a->n && b->n && !aligned(a, b)) {
		struct name_index ia, ib;

		if (index_named(a, &ia)) {
			if (index_named(b, &ib)) {
				rc = diff_named(w, a, b, &ia, &ib);
				index_free(&ib);
				index_free(&ia);
				return rc <= 0 ? rc : emit(w, "replace", b); /* 1: the kept items changed order */
			}
			index_free(&ia);
		}
	}
	for (size_t i = 0; i < common && prefix; i++)
		prefix = same_kind(a->vals[i], b->vals[i]);
	if (a->n == b->n || (prefix && a->n < b->n)) {
		/* the same length, or b extends a: element by element, then appended items */
		for (size_t i = 0; i < common && rc == 0; i++) {
			if (doc_equal(a->vals[i], b->vals[i]))
				continue; /* most of a 1,500-item env list: no path to build */
			path_index(&w->path, i);
			rc = diff(w, a->vals[i], b->vals[i]);
			path_cut(&w->path, base);
		}
		for (size_t i = common; i < b->n && rc == 0; i++) {
			buf_puts(&w->path, "/-");
			rc = emit(w, "add", b->vals[i]);
			path_cut(&w->path, base);
		}
		return rc;
	}
	return emit(w, "replace", b);
}

static int diff(struct walk *w, const struct doc_node *a, const struct doc_node *b)
{
	if (a == b)
		return 0; /* a subtree the journal shares between before and after (doc.h) */
	if (a->type == DOC_MAP && b->type == DOC_MAP)
		return diff_map(w, a, b);
	if (a->type == DOC_SEQ && b->type == DOC_SEQ)
		return doc_equal(a, b) ? 0 : diff_seq(w, a, b);
	if (a->type == b->type && doc_equal(a, b))
		return 0;
	return emit(w, "replace", b);
}

int patch_diff(const struct doc_node *from, const struct doc_node *to, struct buf *out, size_t *n_ops,
	       struct err_msg *em)
{
	struct walk w = { .out = out, .em = em };
	int rc;

	buf_init(&w.path, 1 << 16);
	buf_putc(out, '[');
	rc = diff(&w, from, to);
	buf_putc(out, ']');
	buf_free(&w.path);
	if (rc == 0)
		*n_ops = w.n;
	return rc;
}

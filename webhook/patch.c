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
	for (const char *c = key; *c; c++) {
		if (*c == '~')
			buf_puts(p, "~0");
		else if (*c == '/')
			buf_puts(p, "~1");
		else
			buf_putc(p, *c);
	}
}

static void path_index(struct buf *p, size_t i)
{
	buf_printf(p, "/%zu", i);
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

		if (j < 0)
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

/* Every item a map with a string "name", no name twice. */
static bool named(const struct doc_node *s)
{
	for (size_t i = 0; i < s->n; i++) {
		const char *n = doc_get_str(s->vals[i], "name");

		if (n == NULL)
			return false;
		for (size_t j = 0; j < i; j++)
			if (strcmp(n, doc_get_str(s->vals[j], "name")) == 0)
				return false;
	}
	return true;
}

static long find_named(const struct doc_node *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(doc_get_str(s->vals[i], "name"), name) == 0)
			return (long)i;
	return -1;
}

/*
 * Arrays of named objects: the kept items keep their order in both (else 1,
 * and the caller replaces the array). Removals high to low, then the new
 * array's positions in order: a kept item is diffed where it now is, a new
 * one inserted there.
 */
static int diff_named(struct walk *w, const struct doc_node *a, const struct doc_node *b)
{
	size_t base = w->path.len;
	long last = -1;
	int rc = 0;

	for (size_t i = 0; i < b->n; i++) {
		long j = find_named(a, doc_get_str(b->vals[i], "name"));

		if (j >= 0) {
			if (j < last)
				return 1;
			last = j;
		}
	}
	for (size_t k = a->n; k-- > 0 && rc == 0;)
		if (find_named(b, doc_get_str(a->vals[k], "name")) < 0) {
			path_index(&w->path, k);
			rc = emit(w, "remove", NULL);
			path_cut(&w->path, base);
		}
	for (size_t i = 0; i < b->n && rc == 0; i++) {
		long j = find_named(a, doc_get_str(b->vals[i], "name"));

		path_index(&w->path, i);
		rc = j >= 0 ? diff(w, a->vals[j], b->vals[i]) : emit(w, "add", b->vals[i]);
		path_cut(&w->path, base);
	}
	return rc;
}

static int diff_seq(struct walk *w, const struct doc_node *a, const struct doc_node *b)
{
	size_t base = w->path.len, common = a->n < b->n ? a->n : b->n;
	bool prefix = true;
	int rc = 0;

	if (a->n && b->n && named(a) && named(b)) {
		rc = diff_named(w, a, b);
		return rc <= 0 ? rc : emit(w, "replace", b); /* 1: the kept items changed order */
	}
	for (size_t i = 0; i < common && prefix; i++)
		prefix = same_kind(a->vals[i], b->vals[i]);
	if (a->n == b->n || (prefix && a->n < b->n)) {
		/* the same length, or b extends a: element by element, then appended items */
		for (size_t i = 0; i < common && rc == 0; i++) {
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

/*
 * doc_io.c - a document stream read or written in either syntax: doc_read
 * tells JSON from YAML by the first byte that is not white space, doc_write
 * writes the stream as JSON values one after another or as one YAML stream.
 * It sits above the tree (doc.c) and both syntaxes (doc_json*.c, doc_yaml.c),
 * which never call up into it.
 */
#include "doc.h"

#include <string.h>

/* True when the first byte that is not white space opens JSON ('{' or '['). */
static bool looks_json(const char *bytes, size_t len)
{
	if (bytes == NULL)
		return false;
	size_t i = 0;

	if (len >= 3 && memcmp(bytes, "\xEF\xBB\xBF", 3) == 0)
		i = 3;
	while (i < len && (bytes[i] == ' ' || bytes[i] == '\t' || bytes[i] == '\r' || bytes[i] == '\n'))
		i++;
	return i < len && (bytes[i] == '{' || bytes[i] == '[');
}

enum doc_format doc_sniff(const char *bytes, size_t len)
{
	return looks_json(bytes, len) ? DOC_JSON : DOC_YAML;
}

int doc_read(const char *bytes, size_t len, const char *name, const struct doc_limits *lim,
	     struct doc_stream *s, struct err_msg *em)
{
	if (bytes == NULL)
		bytes = "";
	if (looks_json(bytes, len))
		return doc_read_json(bytes, len, name, lim, s, em);
	return doc_read_yaml(bytes, len, name, lim, s, em);
}

int doc_read_each(const char *bytes, size_t len, const char *name, const struct doc_limits *lim,
		  struct doc_stream *s, doc_each_fn fn, void *ctx, struct err_msg *em)
{
	struct doc_stream all = { 0 };
	int rc = 0;

	if (bytes == NULL)
		bytes = "";
	if (!looks_json(bytes, len))
		return doc_read_yaml_each(bytes, len, name, lim, s, fn, ctx, em);
	if ((rc = doc_read_json(bytes, len, name, lim, &all, em)) != 0)
		return rc;
	*s = all;
	s->docs = NULL;
	s->n = 0;
	for (size_t i = 0; i < all.n; i++) {
		struct doc_node *d = all.docs[i];

		all.docs[i] = NULL;
		s->n++;
		if (rc == 0)
			rc = fn(ctx, s, d, i);
		else
			doc_free(d);
	}
	doc_stream_free(&all);
	return rc;
}

int doc_write_part(struct buf *out, const struct doc_stream *s, const struct doc_node *doc, size_t index,
		   enum doc_format fmt, struct err_msg *em)
{
	int rc, indent = s->format == DOC_JSON ? s->json_indent : 2;

	if (fmt == DOC_YAML) {
		/* a stream of one document: after the first, it begins with "---", as in one stream */
		rc = doc_write_yaml(out, (struct doc_node *const *)&doc, 1, index > 0 || s->yaml_explicit_start, em);
	} else {
		rc = doc_write_json(out, doc, indent, em);
		if (rc == 0 && indent == 0 && buf_putc(out, '\n') != 0)
			rc = err_set(em, DP_ETOOBIG, "output is over the %zu-byte cap", out->cap);
	}
	if (rc != 0)
		doc_name_message(em, s->name);
	return rc;
}

/*
 * doc_write_json_open, _item and _close: write_collection's layout
 * (doc_json_write.c) around one array of a top-level map. A member or an
 * element begins with "," after the first, then a new line indented to its
 * level (nothing when compact); a document ends with a newline. An append
 * over the buffer's cap is remembered in *full (buf's 0 or DP_ETOOBIG, or-ed).
 */
static void json_sep(struct buf *out, bool comma, int indent, int level, int *full)
{
	if (comma)
		*full |= buf_putc(out, ',');
	if (indent > 0) {
		*full |= buf_putc(out, '\n');
		for (int i = 0; i < indent * level; i++)
			*full |= buf_putc(out, ' ');
	}
}

/* Members [from, to) of map m, and the key of member `to` when `open`, as written at level 1. */
static int json_members(struct buf *out, const struct doc_stream *s, const struct doc_node *m, size_t from,
			size_t to, bool open, int *full, struct err_msg *em)
{
	int rc = 0;

	for (size_t i = from; rc == 0 && i < to + open; i++) {
		json_sep(out, i > 0, s->json_indent, 1, full);
		*full |= doc_json_string(out, m->keys[i]->text, m->keys[i]->len);
		*full |= buf_puts(out, s->json_indent ? ": " : ":");
		if (i < to)
			rc = doc_write_json_at(out, m->vals[i], s->json_indent, 1, em);
	}
	return rc;
}

/* A piece written, or taken back: the writer's message named as doc_write_part names it, or the cap's. */
static int json_piece(struct buf *out, const struct doc_stream *s, size_t mark, int rc, int full, struct err_msg *em)
{
	if (rc == 0 && full != 0)
		rc = err_set(em, DP_ETOOBIG, "output is over the %zu-byte cap", out->cap);
	if (rc != 0) {
		out->len = mark;
		if (out->data)
			out->data[mark] = '\0';
		doc_name_message(em, s->name);
	}
	return rc;
}

int doc_write_json_open(struct buf *out, const struct doc_stream *s, const struct doc_node *m, size_t k,
			struct err_msg *em)
{
	size_t mark = out->len;
	int full = buf_putc(out, '{'), rc = json_members(out, s, m, 0, k, true, &full, em);

	full |= buf_putc(out, '[');
	return json_piece(out, s, mark, rc, full, em);
}

int doc_write_json_item(struct buf *out, const struct doc_stream *s, const struct doc_node *item, size_t index,
			struct err_msg *em)
{
	size_t mark = out->len;
	int full = 0;

	json_sep(out, index > 0, s->json_indent, 2, &full);
	return json_piece(out, s, mark, doc_write_json_at(out, item, s->json_indent, 2, em), full, em);
}

int doc_write_json_close(struct buf *out, const struct doc_stream *s, const struct doc_node *m, size_t k,
			 size_t n, struct err_msg *em)
{
	size_t mark = out->len;
	int full = 0, rc;

	if (n > 0)
		json_sep(out, false, s->json_indent, 1, &full);
	full |= buf_putc(out, ']');
	rc = json_members(out, s, m, k + 1, m->n, false, &full, em);
	json_sep(out, false, s->json_indent, 0, &full);
	full |= buf_puts(out, "}\n");
	return json_piece(out, s, mark, rc, full, em);
}

int doc_write(struct buf *out, const struct doc_stream *s, enum doc_format fmt, struct err_msg *em)
{
	int rc;

	for (size_t i = 0; i < s->n; i++)
		if ((rc = doc_write_part(out, s, s->docs[i], i, fmt, em)) != 0)
			return rc;
	return 0;
}

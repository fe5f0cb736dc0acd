/*
 * doc_yaml.c - the YAML reader of doc.h, on libyaml. How a plain scalar
 * reads, which the writer shares, is doc_yaml_scalar.c's.
 *
 * The reader walks libyaml's event stream (not its document API, which would
 * build a second tree and lose nothing we need but cost memory) and builds
 * doc_nodes that keep each scalar's style and tag as libyaml reports them.
 * Plain scalars are resolved with the YAML 1.2 core schema plus the YAML 1.1
 * booleans that Kubernetes accepts. Aliases are expanded into deep copies,
 * each copy counted against max_nodes and against go-yaml's alias ratio
 * (excessive_aliasing), so a "billion laughs" document fails in a few
 * thousand nodes instead of eating the machine. An anchored node keeps its
 * name (doc_node.anchor) and a copy says which anchor it came from
 * (doc_node.alias, set by doc_copy), so the writer can give both back; every
 * other reader of the tree sees plain data. Merge keys ("<<: *x") are a
 * plain key like any other. Empty documents (a trailing "---") are dropped.
 *
 * Over ~600 lines as one idea: the state machine that turns libyaml's events
 * into nodes (anchors, aliases, collections, the one-item-at-a-time reading
 * of a sequence), every part of it driven by the same event loop.
 */
#include "doc.h"
#include "doc_yaml_int.h"
#include "htab.h"
#include "mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* ---- reader state ---- */

struct anchor {
	char *name;
	struct doc_node *node; /* borrowed from the tree being built */
	bool done;             /* false while the anchored collection is still open */
};

struct yr {
	yaml_parser_t parser;
	yaml_event_t ev;
	bool have_ev;
	const char *name, *bytes;
	size_t len;
	const struct doc_limits *lim;
	size_t nodes, depth;
	size_t alias_nodes; /* of nodes, those that alias expansion made */
	struct htab anchors;    /* of struct anchor, by name */
	struct err_msg *em;
	doc_each_fn fn;         /* doc_read_yaml_each: each document goes here, not into the stream */
	void *ctx;
	/* doc_yaml_items_open: events read, the top-level key whose sequence is skipped, where it began */
	size_t events;
	const char *split_key;
	struct doc_node *split_seq;
	size_t split_event;
};

/* Not an error: doc_yaml_items_open gives up and the input is read whole. */
#define SPLIT_WHOLE 1

static int parse_node(struct yr *r, struct doc_node **out, bool is_key);

static int __attribute__((format(printf, 4, 5)))
yr_err(struct yr *r, yaml_mark_t m, int code, const char *fmt, ...)
{
	char what[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	err_set(r->em, code, "%s:%zu:%zu: %s", r->name, m.line + 1, m.column + 1, what);
	return code;
}

/* libyaml's own error, as "NAME:LINE:COL: problem (context)". */
static int libyaml_err(struct yr *r)
{
	yaml_parser_t *p = &r->parser;
	yaml_mark_t m = p->problem_mark;
	const char *problem = p->problem ? p->problem : "YAML error";

	if (p->error == YAML_MEMORY_ERROR)
		DP_FATAL("libyaml ran out of memory");
	if (p->error == YAML_READER_ERROR) {
		size_t off = p->problem_offset < r->len ? p->problem_offset : r->len;
		const char *nl;

		m.line = m.column = 0;
		for (const char *c = r->bytes; (nl = memchr(c, '\n', (size_t)(r->bytes + off - c)));
		     c = nl + 1) {
			m.line++;
			m.column = off - (size_t)(nl + 1 - r->bytes);
		}
		if (m.line == 0)
			m.column = off;
		if (p->problem_value != -1)
			return yr_err(r, m, DP_ESYNTAX, "%s (byte 0x%02X)", problem,
				      (unsigned)p->problem_value & 0xFF);
		return yr_err(r, m, DP_ESYNTAX, "%s", problem);
	}
	if (p->context)
		return yr_err(r, m, DP_ESYNTAX, "%s (%s)", problem, p->context);
	return yr_err(r, m, DP_ESYNTAX, "%s", problem);
}

static int next(struct yr *r)
{
	r->events++;
	if (r->have_ev)
		yaml_event_delete(&r->ev);
	r->have_ev = yaml_parser_parse(&r->parser, &r->ev) != 0;
	return r->have_ev ? 0 : libyaml_err(r);
}

static int count(struct yr *r, size_t more)
{
	if (more > r->lim->max_nodes - r->nodes)
		return yr_err(r, r->ev.start_mark, DP_ETOOBIG, "more than %zu values (%s)",
			      r->lim->max_nodes, DOC_NODES_NAME(r->lim));
	r->nodes += more;
	return 0;
}

/* ---- anchors: name -> node (common/htab.h) ---- */

static bool anchor_named(const void *slot, const void *name)
{
	return strcmp(((const struct anchor *)slot)->name, name) == 0;
}

static uint64_t name_hash(const char *name)
{
	return htab_bytes(name, strlen(name));
}

static struct anchor *anchor_find(const struct yr *r, const char *name)
{
	return htab_find(&r->anchors, name_hash(name), anchor_named, name);
}

static void anchors_clear(struct yr *r)
{
	struct anchor *a;
	size_t pos = 0;

	while ((a = htab_next(&r->anchors, &pos)) != NULL)
		mem_free(a->name);
	htab_free(&r->anchors);
}

static void anchor_put(struct yr *r, const char *name, struct doc_node *n, bool done)
{
	struct anchor *a = anchor_find(r, name);

	if (a == NULL) {
		a = htab_put(&r->anchors, name_hash(name));
		a->name = mem_strdup(name);
	}
	a->node = n;
	a->done = done;
}

static const struct anchor *anchor_get(const struct yr *r, const char *name)
{
	return anchor_find(r, name);
}

/* Nodes under n (n included), stopping once past `budget`. */
static size_t subtree_size(const struct doc_node *n, size_t budget)
{
	size_t total = 1;

	for (size_t i = 0; i < n->n && total <= budget; i++) {
		if (n->type == DOC_MAP)
			total += subtree_size(n->keys[i], budget - total);
		if (total <= budget)
			total += subtree_size(n->vals[i], budget - total);
	}
	return total;
}

/* ---- building nodes from events ---- */

static int check_tag(struct yr *r, const yaml_char_t *tag)
{
	if (tag && !doc_yaml_tag_writable((const char *)tag))
		return yr_err(r, r->ev.start_mark, DP_EUNSUPPORTED,
			      "YAML tag %s cannot be written back (',', '[' or ']' in a short tag)",
			      (const char *)tag);
	return 0;
}

static void stamp(struct doc_node *n, const yaml_event_t *ev, const yaml_char_t *tag)
{
	n->line = (uint32_t)ev->start_mark.line + 1;
	n->col = (uint32_t)ev->start_mark.column + 1;
	n->tag = tag ? mem_strdup((const char *)tag) : NULL;
}

/*
 * go-yaml v3's rule (decode.go, allowedAliasRatio): once past 1,000 nodes of
 * which over 100 are alias copies, copies may be 99 % of the nodes up to
 * 400,000 nodes, falling linearly to 10 % at 4,000,000. An honest document
 * stays far below; a few hundred bytes of nested anchors exceed it within
 * a few thousand nodes, before any large copy is made.
 */
static bool excessive_aliasing(size_t nodes, size_t aliased)
{
	const double low = 400000, high = 4000000;
	double ratio = nodes <= low ? 0.99 : nodes >= high ? 0.10 : 0.99 - 0.89 * ((double)nodes - low) / (high - low);

	return aliased > 100 && nodes > 1000 && (double)aliased / (double)nodes > ratio;
}

static int parse_alias(struct yr *r, struct doc_node **out)
{
	const char *name = (const char *)r->ev.data.alias.anchor;
	const struct anchor *a = anchor_get(r, name);
	size_t budget = r->lim->max_nodes - r->nodes, size;

	if (a == NULL)
		return yr_err(r, r->ev.start_mark, DP_ESYNTAX, "alias *%s has no anchor", name);
	if (!a->done)
		return yr_err(r, r->ev.start_mark, DP_EUNSUPPORTED,
			      "alias *%s refers to a node that contains it", name);
	size = subtree_size(a->node, budget);
	if (size > budget)
		return yr_err(r, r->ev.start_mark, DP_ETOOBIG,
			      "alias *%s expands past %zu values (%s)", name, r->lim->max_nodes,
			      DOC_NODES_NAME(r->lim));
	if (excessive_aliasing(r->nodes + size, r->alias_nodes + size))
		return yr_err(r, r->ev.start_mark, DP_ETOOBIG,
			      "the document contains excessive aliasing: alias *%s would make %zu of its %zu nodes "
			      "copies", name, r->alias_nodes + size, r->nodes + size);
	r->nodes += size;
	r->alias_nodes += size;
	*out = doc_copy(a->node); /* marked alias `name`, its anchors inside turned into aliases */
	return 0;
}

static enum doc_style scalar_style(yaml_scalar_style_t s)
{
	switch (s) {
	case YAML_PLAIN_SCALAR_STYLE: return DOC_STYLE_PLAIN;
	case YAML_SINGLE_QUOTED_SCALAR_STYLE: return DOC_STYLE_SINGLE;
	case YAML_DOUBLE_QUOTED_SCALAR_STYLE: return DOC_STYLE_DOUBLE;
	case YAML_LITERAL_SCALAR_STYLE: return DOC_STYLE_LITERAL;
	case YAML_FOLDED_SCALAR_STYLE: return DOC_STYLE_FOLDED;
	default: return DOC_STYLE_ANY;
	}
}

static int parse_scalar(struct yr *r, struct doc_node **out)
{
	const yaml_event_t *ev = &r->ev;
	const char *text = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	const char *tag = (const char *)ev->data.scalar.tag;
	enum doc_type t = DOC_STRING;
	struct doc_node *n;
	int rc;

	if ((rc = count(r, 1)) != 0 || (rc = check_tag(r, ev->data.scalar.tag)) != 0)
		return rc;
	if (tag) {
		if (!doc_yaml_std_tag_type(tag, &t))
			t = DOC_STRING;
	} else if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		t = doc_yaml_plain_type(text, len);
	}
	n = doc_scalar(t, text, len);
	n->style = scalar_style(ev->data.scalar.style);
	stamp(n, ev, ev->data.scalar.tag);
	if (ev->data.scalar.anchor) {
		n->anchor = mem_strdup((const char *)ev->data.scalar.anchor);
		anchor_put(r, n->anchor, n, true);
	}
	*out = n;
	return 0;
}

static int dup_check(struct yr *r, const struct doc_node *m)
{
	return doc_dup_error(m, r->name, r->em);
}

/*
 * The sequence that starts at the current event, skipped for
 * doc_yaml_items_open: an empty DOC_SEQ in its place (counted and stamped as
 * the reader does), the event ordinal where it began kept, the parser after
 * its end. libyaml still checks every event. SPLIT_WHOLE when it is a flow
 * sequence or holds an anchor or an alias (an item could refer to another:
 * read whole).
 */
static int split_seq(struct yr *r, struct doc_node **out)
{
	const yaml_event_t *ev = &r->ev;
	size_t depth = 1;
	int rc;

	if (ev->data.sequence_start.anchor || ev->data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE)
		return SPLIT_WHOLE;
	if ((rc = count(r, 1)) != 0 || (rc = check_tag(r, ev->data.sequence_start.tag)) != 0)
		return rc;
	*out = doc_seq();
	stamp(*out, ev, ev->data.sequence_start.tag);
	r->split_seq = *out;
	r->split_event = r->events;
	while (depth > 0 && (rc = next(r)) == 0) {
		if ((ev->type == YAML_SCALAR_EVENT && ev->data.scalar.anchor) || ev->type == YAML_ALIAS_EVENT ||
		    (ev->type == YAML_MAPPING_START_EVENT && ev->data.mapping_start.anchor) ||
		    (ev->type == YAML_SEQUENCE_START_EVENT && ev->data.sequence_start.anchor))
			rc = SPLIT_WHOLE;
		else if (ev->type == YAML_MAPPING_START_EVENT || ev->type == YAML_SEQUENCE_START_EVENT)
			depth++;
		else if (ev->type == YAML_MAPPING_END_EVENT || ev->type == YAML_SEQUENCE_END_EVENT)
			depth--;
		if (rc != 0)
			break;
	}
	if (rc != 0) {
		doc_free(*out);
		r->split_seq = NULL;
	}
	return rc;
}

/* One key: value pair into map m; the current event starts the key. */
static int parse_pair(struct yr *r, struct doc_node *m)
{
	struct doc_node *k = NULL, *v = NULL;
	yaml_mark_t at = r->ev.start_mark;
	int rc;

	if (r->ev.type == YAML_MAPPING_START_EVENT || r->ev.type == YAML_SEQUENCE_START_EVENT)
		return yr_err(r, at, DP_EUNSUPPORTED, "a map key that is a collection is not supported");
	if ((rc = parse_node(r, &k, true)) != 0)
		return rc;
	if (k == NULL)
		return DP_EINTERNAL;
	if (k->type == DOC_MAP || k->type == DOC_SEQ)
		rc = yr_err(r, at, DP_EUNSUPPORTED, "a map key that is a collection is not supported");
	else if (k->type == DOC_NULL && k->len == 0 && k->tag == NULL)
		rc = yr_err(r, at, DP_EUNSUPPORTED, "a map key with no text is not supported");
	if (rc == 0 && (rc = next(r)) == 0) {
		if (r->split_key && r->depth == 1 && r->split_seq == NULL && r->ev.type == YAML_SEQUENCE_START_EVENT &&
		    k->type == DOC_STRING && k->tag == NULL && strcmp(k->text, r->split_key) == 0)
			rc = split_seq(r, &v);
		else
			rc = parse_node(r, &v, false);
	}
	if (rc != 0) {
		doc_free(k);
		return rc;
	}
	doc_append_pair(m, k, v);
	return 0;
}

static int parse_collection(struct yr *r, struct doc_node **out)
{
	bool map = r->ev.type == YAML_MAPPING_START_EVENT;
	yaml_event_type_t end = map ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
	const yaml_char_t *anchor_ev = map ? r->ev.data.mapping_start.anchor
					   : r->ev.data.sequence_start.anchor;
	char *anchor = anchor_ev ? mem_strdup((const char *)anchor_ev) : NULL;
	bool flow = map ? r->ev.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE
			: r->ev.data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE;
	struct doc_node *c, *v = NULL;
	int rc;

	if ((rc = count(r, 1)) == 0 && ++r->depth > r->lim->max_depth)
		rc = yr_err(r, r->ev.start_mark, DP_ETOOBIG,
			    "nesting deeper than %zu levels (max_depth)", r->lim->max_depth);
	if (rc == 0)
		rc = check_tag(r, map ? r->ev.data.mapping_start.tag : r->ev.data.sequence_start.tag);
	if (rc != 0) {
		mem_free(anchor);
		return rc;
	}
	c = map ? doc_map() : doc_seq();
	c->style = flow ? DOC_STYLE_FLOW : DOC_STYLE_ANY;
	stamp(c, &r->ev, map ? r->ev.data.mapping_start.tag : r->ev.data.sequence_start.tag);
	if (anchor) {
		c->anchor = mem_strdup(anchor);
		anchor_put(r, anchor, c, false);
	}
	while ((rc = next(r)) == 0 && r->ev.type != end) {
		if (map) {
			rc = parse_pair(r, c);
		} else if ((rc = parse_node(r, &v, false)) == 0) {
			doc_push(c, v);
		}
		if (rc != 0)
			break;
	}
	if (rc == 0 && map)
		rc = dup_check(r, c);
	if (rc != 0) {
		doc_free(c);
		mem_free(anchor);
		return rc;
	}
	r->depth--;
	if (anchor) { /* unless an anchor of the same name inside took it over */
		struct anchor *a = anchor_find(r, anchor);

		if (a != NULL && a->node == c)
			a->done = true;
		mem_free(anchor);
	}
	*out = c;
	return 0;
}

static int parse_node(struct yr *r, struct doc_node **out, bool is_key)
{
	switch (r->ev.type) {
	case YAML_ALIAS_EVENT:
		return parse_alias(r, out);
	case YAML_SCALAR_EVENT:
		return parse_scalar(r, out);
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT:
		return parse_collection(r, out);
	default:
		return yr_err(r, r->ev.start_mark, DP_EINTERNAL, "unexpected YAML event %d%s",
			      (int)r->ev.type, is_key ? " for a key" : "");
	}
}

/* ---- reading a stream ---- */

/* A document that held nothing: what a trailing "---" leaves behind. */
static bool empty_document(const struct doc_node *n)
{
	return n == NULL || (n->type == DOC_NULL && n->len == 0 && n->tag == NULL && n->style == DOC_STYLE_PLAIN);
}

/* The documents of the stream; the parser is positioned before STREAM-START. */
static int read_documents(struct yr *r, struct doc_stream *s)
{
	struct doc_node *root = NULL;
	bool explicit_start;
	int rc;

	if ((rc = next(r)) != 0)
		return rc;
	while ((rc = next(r)) == 0 && r->ev.type == YAML_DOCUMENT_START_EVENT) {
		explicit_start = !r->ev.data.document_start.implicit;
		anchors_clear(r);
		if ((rc = next(r)) != 0 || (rc = parse_node(r, &root, false)) != 0)
			return rc;
		if (empty_document(root)) {
			doc_free(root);
		} else if (r->fn) {
			if (s->n == 0)
				s->yaml_explicit_start = explicit_start;
			s->n++;
			if ((rc = r->fn(r->ctx, s, root, s->n - 1)) != 0)
				return rc;
		} else {
			if (s->n == 0)
				s->yaml_explicit_start = explicit_start;
			if ((s->n & (s->n - 1)) == 0) /* 0, 1, 2, 4, ...: grow */
				s->docs = mem_realloc(s->docs, (s->n ? s->n * 2 : 1) * sizeof(*s->docs));
			s->docs[s->n++] = root;
		}
		if ((rc = next(r)) != 0)
			return rc;
	}
	return rc;
}

int doc_read_yaml(const char *bytes, size_t len, const char *name,
		  const struct doc_limits *lim, struct doc_stream *s, struct err_msg *em)
{
	return doc_read_yaml_each(bytes, len, name, lim, s, NULL, NULL, em);
}

int doc_read_yaml_each(const char *bytes, size_t len, const char *name, const struct doc_limits *lim,
		       struct doc_stream *s, doc_each_fn fn, void *ctx, struct err_msg *em)
{
	struct yr r = { .name = name ? name : "<input>", .bytes = bytes ? bytes : "", .len = len,
			.em = em, .fn = fn, .ctx = ctx, .anchors = { .size = sizeof(struct anchor) } };
	struct doc_stream got = { .format = DOC_YAML, .name = name };
	int rc;

	r.lim = lim ? lim : &doc_default_limits;
	if (len > r.lim->max_bytes)
		return err_set(em, DP_ETOOBIG, "%s: input is %zu bytes, over the %zu-byte cap (%s)",
			       r.name, len, r.lim->max_bytes, DOC_BYTES_NAME(r.lim));
	if (!yaml_parser_initialize(&r.parser))
		DP_FATAL("libyaml: cannot initialise a parser");
	yaml_parser_set_input_string(&r.parser, (const unsigned char *)r.bytes, len);
	rc = read_documents(&r, &got);
	if (r.have_ev)
		yaml_event_delete(&r.ev);
	yaml_parser_delete(&r.parser);
	anchors_clear(&r);
	if (fn)
		got.docs = NULL; /* each went to fn; got.n counts them */
	if (rc != 0) {
		if (fn)
			got.n = 0;
		doc_stream_free(&got);
		return rc;
	}
	*s = got;
	return 0;
}

/* ---- one sequence of a mapping, an item at a time ---- */

struct doc_yaml_items {
	struct yr r;  /* at the sequence's last event handed over */
	bool done;
	struct err_msg open_em; /* what went wrong while splitting: not shown, the whole reading says it */
};

/* The stream's one document, a block mapping, read around the sequence at its key r->split_key. */
static int split_document(struct yr *r, struct doc_stream *s)
{
	struct doc_node *root = NULL;
	int rc;

	for (int i = 0; i < 2; i++) /* STREAM-START, then the first DOCUMENT-START */
		if ((rc = next(r)) != 0)
			return rc;
	if (r->ev.type != YAML_DOCUMENT_START_EVENT)
		return SPLIT_WHOLE;
	s->yaml_explicit_start = !r->ev.data.document_start.implicit;
	if ((rc = next(r)) != 0)
		return rc;
	if (r->ev.type != YAML_MAPPING_START_EVENT || r->ev.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE)
		return SPLIT_WHOLE;
	if ((rc = parse_node(r, &root, false)) == 0 && (rc = next(r)) == 0 && (rc = next(r)) == 0 &&
	    (r->ev.type != YAML_STREAM_END_EVENT || r->split_seq == NULL || r->anchors.n > 0 || r->alias_nodes > 0))
		rc = SPLIT_WHOLE; /* another document, no such sequence, or anchors the items might use */
	if (rc != 0) {
		doc_free(root);
		return rc;
	}
	s->docs = mem_alloc(sizeof(*s->docs));
	s->docs[0] = root;
	s->n = 1;
	return 0;
}

int doc_yaml_items_open(const char *bytes, size_t len, const char *name, const struct doc_limits *lim,
			const char *key, struct doc_yaml_items **it, struct doc_stream *s, size_t *k)
{
	struct doc_yaml_items *x = mem_zalloc(sizeof(*x));
	struct yr *r = &x->r;
	size_t skip;
	int rc;

	*r = (struct yr){ .name = name ? name : "<input>", .bytes = bytes ? bytes : "", .len = len,
			  .em = &x->open_em, .split_key = key, .anchors = { .size = sizeof(struct anchor) } };
	r->lim = lim ? lim : &doc_default_limits;
	memset(s, 0, sizeof(*s));
	s->format = DOC_YAML;
	s->name = name;
	if (len > r->lim->max_bytes)
		goto whole; /* doc_read_yaml's message */
	if (!yaml_parser_initialize(&r->parser))
		DP_FATAL("libyaml: cannot initialise a parser");
	yaml_parser_set_input_string(&r->parser, (const unsigned char *)r->bytes, len);
	rc = split_document(r, s);
	if (r->have_ev)
		yaml_event_delete(&r->ev);
	r->have_ev = false;
	yaml_parser_delete(&r->parser);
	if (rc != 0)
		goto whole;
	/* again from the start, to the sequence's first event, one level inside the mapping and the sequence */
	if (!yaml_parser_initialize(&r->parser))
		DP_FATAL("libyaml: cannot initialise a parser");
	yaml_parser_set_input_string(&r->parser, (const unsigned char *)r->bytes, len);
	for (skip = r->split_event, r->events = 0; r->events < skip;)
		if (next(r) != 0)
			DP_FATAL("libyaml read the same bytes otherwise the second time");
	r->depth = 2;
	*k = (size_t)doc_find(s->docs[0], key);
	*it = x;
	return 1;
whole:
	doc_stream_free(s);
	anchors_clear(r);
	mem_free(x);
	return 0;
}

int doc_yaml_items_next(struct doc_yaml_items *x, struct doc_node **item, struct err_msg *em)
{
	struct yr *r = &x->r;
	int rc;

	if (x->done)
		return 0;
	r->em = em;
	if ((rc = next(r)) != 0)
		return rc;
	if (r->ev.type == YAML_SEQUENCE_END_EVENT) {
		x->done = true;
		return 0;
	}
	if ((rc = parse_node(r, item, false)) != 0)
		return rc;
	return 1;
}

void doc_yaml_items_free(struct doc_yaml_items *x)
{
	if (x == NULL)
		return;
	if (x->r.have_ev)
		yaml_event_delete(&x->r.ev);
	yaml_parser_delete(&x->r.parser);
	anchors_clear(&x->r);
	mem_free(x);
}

/*
 * doc_yaml_write.c - the YAML writer of doc.h, on libyaml's emitter.
 *
 * Block style, 2-space indent, no line folding, raw UTF-8. Scalars keep their
 * style; a string the writer may style freely is plain only when reading it
 * back would give the same string, so "true", "123" and "" come out quoted
 * (a "<<" read plain stays plain: it is a merge key). Tags are written as
 * given, which is what keeps CloudFormation's `!Ref X` and `!If [c, a, b]`
 * intact.
 *
 * Anchors come back as they were read: a node with an anchor is written
 * `&name`, and a copy made from `*name` is written `*name` again when the
 * last `&name` written before it in this document is equal to it now (the
 * same data and tags: doc_vid.h). Otherwise (one copy was edited, the
 * anchored node was edited or removed, a later anchor took the name) the
 * copy is written in full, without an anchor. So the output reads back as
 * exactly the tree's data, and an edit to one copy expands only that copy.
 * The equality test costs one walk of the anchored nodes and the copies in
 * all (value ids, remembered per node), however many aliases there are.
 */
#include "doc.h"
#include "doc_vid.h"
#include "doc_yaml_int.h"
#include "htab.h"

#include "mem.h"

#include <stdio.h>
#include <string.h>
#include <yaml.h>

struct yw {
	yaml_emitter_t e;
	struct buf *out;
	int buf_rc;
	struct err_msg *em;
	/* the anchors written so far in this document, by name: the latest node written `&name` */
	struct htab anchors; /* of const struct doc_node *, by name */
	struct doc_vid *vid; /* made at the first alias */
};

static int write_out(void *data, unsigned char *bytes, size_t size)
{
	struct yw *w = data;

	if (w->buf_rc == 0)
		w->buf_rc = buf_append(w->out, bytes, size);
	return w->buf_rc == 0;
}

/* "LINE:COL: " of n, for a message, or "" (formatted only on failure: emit runs once per node). */
static const char *where_of(const struct doc_node *n, char *where, size_t size)
{
	where[0] = '\0';
	if (n && n->line)
		snprintf(where, size, "%u:%u: ", n->line, n->col);
	return where;
}

/* Emit ev (made by an *_initialize call that returned `made`) for node n. */
static int emit(struct yw *w, yaml_event_t *ev, int made, const struct doc_node *n)
{
	char where[32];

	if (!made && n && n->tag && !doc_yaml_tag_writable(n->tag))
		return err_set(w->em, DP_EUNSUPPORTED,
			       "%scannot write YAML tag %s (',', '[' or ']' in a short tag)",
			       where_of(n, where, sizeof(where)), n->tag);
	if (!made)
		return err_set(w->em, DP_EUNSUPPORTED, "%scannot write as YAML: the text or tag is not valid UTF-8",
			       where_of(n, where, sizeof(where)));
	if (yaml_emitter_emit(&w->e, ev))
		return 0;
	if (w->buf_rc != 0)
		return err_set(w->em, DP_ETOOBIG, "YAML output is over the %zu-byte cap", w->out->cap);
	if (w->e.error == YAML_MEMORY_ERROR)
		DP_FATAL("libyaml ran out of memory");
	return err_set(w->em, DP_EUNSUPPORTED, "%scannot write as YAML: %s", where_of(n, where, sizeof(where)),
		       w->e.problem ? w->e.problem : "emitter error");
}

/* ---- anchors written, by name ---- */

static bool node_named(const void *slot, const void *name)
{
	return strcmp((*(const struct doc_node *const *)slot)->anchor, name) == 0;
}

static const struct doc_node **anchor_find(const struct yw *w, const char *name)
{
	return htab_find(&w->anchors, htab_bytes(name, strlen(name)), node_named, name);
}

/* n (which has an anchor) is being written: from here on, *name means n. */
static void anchor_written(struct yw *w, const struct doc_node *n)
{
	const struct doc_node **at = anchor_find(w, n->anchor);

	if (at == NULL)
		at = htab_put(&w->anchors, htab_bytes(n->anchor, strlen(n->anchor)));
	*at = n;
}

/* May n, a copy of *name, be written as that alias: is the node `*name` means now equal to n? */
static bool alias_fits(struct yw *w, const struct doc_node *n)
{
	const struct doc_node *a;

	const struct doc_node **at = anchor_find(w, n->alias);

	if (at == NULL)
		return false;
	a = *at;
	if (a->type != n->type || a->n != n->n || a->len != n->len)
		return false; /* the cheap differences, before any walk */
	if (w->vid == NULL)
		w->vid = doc_vid_new();
	return doc_vid_of(w->vid, a) == doc_vid_of(w->vid, n);
}

/* A new document: no anchor written yet. */
static void anchors_reset(struct yw *w)
{
	htab_free(&w->anchors);
}

/* An empty untagged null: libyaml can write it plain only in a block value. */
static bool has_empty_null(const struct doc_node *n)
{
	if (n->type != DOC_MAP && n->type != DOC_SEQ)
		return n->type == DOC_NULL && n->len == 0 && n->tag == NULL;
	for (size_t i = 0; i < n->n; i++)
		if ((n->type == DOC_MAP && has_empty_null(n->keys[i])) || has_empty_null(n->vals[i]))
			return true;
	return false;
}

static yaml_scalar_style_t choose_style(const struct doc_node *n)
{
	static const yaml_scalar_style_t map[] = {
		[DOC_STYLE_ANY] = YAML_ANY_SCALAR_STYLE,
		[DOC_STYLE_PLAIN] = YAML_PLAIN_SCALAR_STYLE,
		[DOC_STYLE_SINGLE] = YAML_SINGLE_QUOTED_SCALAR_STYLE,
		[DOC_STYLE_DOUBLE] = YAML_DOUBLE_QUOTED_SCALAR_STYLE,
		[DOC_STYLE_LITERAL] = YAML_LITERAL_SCALAR_STYLE,
		[DOC_STYLE_FOLDED] = YAML_FOLDED_SCALAR_STYLE,
		[DOC_STYLE_FLOW] = YAML_ANY_SCALAR_STYLE,
	};
	yaml_scalar_style_t s = (unsigned)n->style < sizeof(map) / sizeof(map[0])
					? map[n->style] : YAML_ANY_SCALAR_STYLE;

	if (n->tag)
		return s == YAML_ANY_SCALAR_STYLE ? YAML_PLAIN_SCALAR_STYLE : s;
	if (n->type != DOC_STRING) /* untagged null/bool/number: only plain keeps the type */
		return YAML_PLAIN_SCALAR_STYLE;
	if (s != YAML_ANY_SCALAR_STYLE && s != YAML_PLAIN_SCALAR_STYLE)
		return s;
	if (s == YAML_PLAIN_SCALAR_STYLE && n->len == 2 && memcmp(n->text, "<<", 2) == 0)
		return s; /* read plain: a merge key, and written so it stays one */
	if (doc_yaml_plain_type(n->text, n->len) != DOC_STRING || doc_yaml_11_special(n->text, n->len))
		return YAML_DOUBLE_QUOTED_SCALAR_STYLE;
	return YAML_PLAIN_SCALAR_STYLE;
}

/*
 * How the collections under a node may be written: as their style says, all
 * in flow (inside a flow collection), or all in block (under a flow
 * collection that had to become block; deciding once keeps this linear).
 */
enum layout { AS_STYLED, ALL_FLOW, ALL_BLOCK };

static int emit_node(struct yw *w, const struct doc_node *n, enum layout how);

static int emit_scalar(struct yw *w, const struct doc_node *n)
{
	yaml_event_t ev;
	int implicit = n->tag == NULL, made;

	if (n->len > (size_t)INT32_MAX)
		return err_set(w->em, DP_ETOOBIG, "a scalar of %zu bytes is too long for YAML", n->len);
	made = yaml_scalar_event_initialize(&ev, (yaml_char_t *)n->anchor, (yaml_char_t *)n->tag, (yaml_char_t *)n->text,
					    (int)n->len, implicit, implicit, choose_style(n));
	return emit(w, &ev, made, n);
}

static int emit_collection(struct yw *w, const struct doc_node *n, enum layout how)
{
	bool map = n->type == DOC_MAP;
	bool flow = how == ALL_FLOW;
	yaml_char_t *tag = (yaml_char_t *)n->tag, *anchor = (yaml_char_t *)n->anchor;
	yaml_event_t ev;
	int made, rc;

	if (how == AS_STYLED && n->style == DOC_STYLE_FLOW) {
		flow = !has_empty_null(n);
		how = flow ? ALL_FLOW : ALL_BLOCK;
	}
	if (map)
		made = yaml_mapping_start_event_initialize(&ev, anchor, tag, tag == NULL,
			flow ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE);
	else
		made = yaml_sequence_start_event_initialize(&ev, anchor, tag, tag == NULL,
			flow ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE);
	if ((rc = emit(w, &ev, made, n)) != 0)
		return rc;
	for (size_t i = 0; i < n->n; i++) {
		if (map && (rc = emit_node(w, n->keys[i], how)) != 0)
			return rc;
		if ((rc = emit_node(w, n->vals[i], how)) != 0)
			return rc;
	}
	made = map ? yaml_mapping_end_event_initialize(&ev) : yaml_sequence_end_event_initialize(&ev);
	return emit(w, &ev, made, n);
}

static int emit_node(struct yw *w, const struct doc_node *n, enum layout how)
{
	yaml_event_t ev;

	if (n->tag && !doc_yaml_tag_writable(n->tag))
		return emit(w, NULL, 0, n);
	if (n->alias && alias_fits(w, n))
		return emit(w, &ev, yaml_alias_event_initialize(&ev, (yaml_char_t *)n->alias), n);
	if (n->anchor) /* before its children: an alias inside it would mean it (so none fits) */
		anchor_written(w, n);
	if (n->type == DOC_MAP || n->type == DOC_SEQ)
		return emit_collection(w, n, how);
	return emit_scalar(w, n);
}

static int emit_stream(struct yw *w, struct doc_node *const *docs, size_t n, bool explicit_start)
{
	yaml_event_t ev;
	int rc;

	if ((rc = emit(w, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING), NULL)))
		return rc;
	for (size_t i = 0; i < n; i++) {
		int implicit = i == 0 && !explicit_start; /* libyaml adds "---" after the first */

		anchors_reset(w);
		if ((rc = emit(w, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL,
									   implicit), NULL)) ||
		    (rc = emit_node(w, docs[i], AS_STYLED)) ||
		    (rc = emit(w, &ev, yaml_document_end_event_initialize(&ev, 1), NULL)))
			return rc;
	}
	return emit(w, &ev, yaml_stream_end_event_initialize(&ev), NULL);
}

int doc_write_yaml(struct buf *out, struct doc_node *const *docs, size_t n, bool explicit_start,
		   struct err_msg *em)
{
	struct yw w = { .out = out, .em = em, .anchors = { .size = sizeof(const struct doc_node *) } };
	size_t mark = out->len;
	int rc;

	if (!yaml_emitter_initialize(&w.e))
		DP_FATAL("libyaml: cannot initialise an emitter");
	yaml_emitter_set_output(&w.e, write_out, &w);
	yaml_emitter_set_indent(&w.e, 2);
	yaml_emitter_set_width(&w.e, -1);
	yaml_emitter_set_unicode(&w.e, 1);
	yaml_emitter_set_encoding(&w.e, YAML_UTF8_ENCODING);
	rc = emit_stream(&w, docs, n, explicit_start);
	yaml_emitter_delete(&w.e);
	htab_free(&w.anchors);
	doc_vid_free(w.vid);
	if (rc != 0) {
		out->len = mark;
		if (out->data)
			out->data[mark] = '\0';
	}
	return rc;
}

/* ---- one sequence of a document's mapping, an item at a time ---- */

struct doc_yaml_list {
	struct yw w;
	const char *name;
};

/* The start of collection n in block style, as emit_collection starts it (no anchors here). */
static int emit_block_start(struct yw *w, const struct doc_node *n)
{
	yaml_char_t *tag = (yaml_char_t *)n->tag;
	yaml_event_t ev;
	int made = n->type == DOC_MAP
			   ? yaml_mapping_start_event_initialize(&ev, NULL, tag, tag == NULL, YAML_BLOCK_MAPPING_STYLE)
			   : yaml_sequence_start_event_initialize(&ev, NULL, tag, tag == NULL, YAML_BLOCK_SEQUENCE_STYLE);

	return emit(w, &ev, made, n);
}

/* Pairs [from, to) of map m, then the key of pair `to` when `open`. */
static int emit_pairs(struct yw *w, const struct doc_node *m, size_t from, size_t to, bool open)
{
	int rc = 0;

	for (size_t i = from; rc == 0 && i < to; i++)
		if ((rc = emit_node(w, m->keys[i], AS_STYLED)) == 0)
			rc = emit_node(w, m->vals[i], AS_STYLED);
	if (rc == 0 && open)
		rc = emit_node(w, m->keys[to], AS_STYLED);
	return rc;
}

static int named(struct doc_yaml_list *l, int rc, struct err_msg *em)
{
	if (rc != 0)
		doc_name_message(em, l->name);
	return rc;
}

int doc_write_yaml_open(struct buf *out, const struct doc_stream *s, const struct doc_node *m, size_t k,
			struct doc_yaml_list **wl, struct err_msg *em)
{
	struct doc_yaml_list *l = mem_zalloc(sizeof(*l));
	struct yw *w = &l->w;
	yaml_event_t ev;
	int rc;

	htab_init(&w->anchors, sizeof(const struct doc_node *));
	w->out = out;
	w->em = em;
	l->name = s->name;
	if (!yaml_emitter_initialize(&w->e))
		DP_FATAL("libyaml: cannot initialise an emitter");
	yaml_emitter_set_output(&w->e, write_out, w);
	yaml_emitter_set_indent(&w->e, 2);
	yaml_emitter_set_width(&w->e, -1);
	yaml_emitter_set_unicode(&w->e, 1);
	yaml_emitter_set_encoding(&w->e, YAML_UTF8_ENCODING);
	if ((rc = emit(w, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING), NULL)) == 0 &&
	    (rc = emit(w, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, !s->yaml_explicit_start),
		       NULL)) == 0 &&
	    (rc = emit_block_start(w, m)) == 0 && (rc = emit_pairs(w, m, 0, k, true)) == 0)
		rc = emit_block_start(w, m->vals[k]);
	*wl = l;
	return named(l, rc, em);
}

int doc_write_yaml_item(struct doc_yaml_list *l, const struct doc_node *item, struct err_msg *em)
{
	l->w.em = em;
	return named(l, emit_node(&l->w, item, AS_STYLED), em);
}

int doc_write_yaml_close(struct doc_yaml_list *l, const struct doc_node *m, size_t k, struct err_msg *em)
{
	struct yw *w = &l->w;
	yaml_event_t ev;
	int rc;

	w->em = em;
	if ((rc = emit(w, &ev, yaml_sequence_end_event_initialize(&ev), NULL)) == 0 &&
	    (rc = emit_pairs(w, m, k + 1, m->n, false)) == 0 &&
	    (rc = emit(w, &ev, yaml_mapping_end_event_initialize(&ev), NULL)) == 0 &&
	    (rc = emit(w, &ev, yaml_document_end_event_initialize(&ev, 1), NULL)) == 0)
		rc = emit(w, &ev, yaml_stream_end_event_initialize(&ev), NULL);
	rc = named(l, rc, em);
	doc_write_yaml_free(l);
	return rc;
}

void doc_write_yaml_free(struct doc_yaml_list *l)
{
	if (l == NULL)
		return;
	yaml_emitter_delete(&l->w.e);
	htab_free(&l->w.anchors);
	doc_vid_free(l->w.vid);
	mem_free(l);
}

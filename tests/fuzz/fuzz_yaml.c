/*
 * fuzz_yaml.c - libFuzzer target for the YAML reader and writer. Properties:
 * whatever parses must write, read back, and be doc_equal to the first tree
 * (styles may change where libyaml cannot keep them; types, text, tags may
 * not); writing what was read back gives the same text again (anchors and
 * aliases come back as they went out); and after an edit to every third
 * node that came from an anchor or an alias (the copies and the anchored
 * nodes diverge, as inject makes them), the output still reads back as
 * exactly the edited tree.
 */
#include "doc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what, const struct buf *out)
{
	fprintf(stderr, "%s\n---- written:\n%s\n", what, out->data ? out->data : "");
	abort();
}

/* Write a, read it back into *b (freed first) and check the data is the same; the text in out. */
static void round_trip(const struct doc_stream *a, struct doc_stream *b, struct buf *out)
{
	const struct doc_limits lim = doc_default_limits;
	struct err_msg em;

	doc_stream_free(b);
	buf_reset(out);
	if (doc_write(out, a, DOC_YAML, &em) != 0) {
		fprintf(stderr, "write YAML failed: %s\n", em.text);
		abort();
	}
	if (doc_read_yaml(out->data, out->len, "out", &lim, b, &em) != 0)
		die(em.text, out);
	if (a->n != b->n)
		die("the number of documents changed", out);
	for (size_t i = 0; i < a->n; i++)
		if (!doc_equal(a->docs[i], b->docs[i]))
			die("a document changed", out);
}

/* Change every third node with an anchor or an alias (keys are left alone: a change could repeat one). */
static void edit(struct doc_node *n, unsigned *seen)
{
	bool mark = n->anchor || n->alias;

	if (mark && (*seen)++ % 3 == 0) {
		if (n->type == DOC_SEQ)
			doc_push(n, doc_str("fuzz-edit"));
		else if (n->type == DOC_MAP && doc_find(n, "fuzz-edit") < 0)
			doc_set(n, "fuzz-edit", doc_int(1));
		else if (n->type == DOC_STRING) /* other scalars' text must stay what their type reads */
			doc_set_text(n, strcmp(n->text, "fuzz-edit") ? "fuzz-edit" : "fuzz-edit-2");
	}
	for (size_t i = 0; (n->type == DOC_MAP || n->type == DOC_SEQ) && i < n->n; i++)
		edit(n->vals[i], seen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct doc_limits lim = doc_default_limits;
	struct doc_stream a = { 0 }, b = { 0 }, c = { 0 };
	struct err_msg em;
	struct buf out, again;
	unsigned seen = 0;

	/* the default limits, as inject reads: a blow-up the alias ratio misses becomes memory, which
	   `make fuzz` caps (-rss_limit_mb), so the fuzzer reports it; tests/fuzz/seeds-yaml keeps the bombs */
	if (doc_read_yaml((const char *)data, size, "fuzz", &lim, &a, &em) != 0)
		return 0;
	buf_init(&out, 0);
	buf_init(&again, 0);
	round_trip(&a, &b, &out);
	round_trip(&b, &c, &again);
	if (out.len != again.len || (out.len && memcmp(out.data, again.data, out.len) != 0)) {
		fprintf(stderr, "---- first written:\n%s\n", out.data);
		die("writing what was read back gave other text", &again);
	}
	for (size_t i = 0; i < a.n; i++)
		edit(a.docs[i], &seen);
	round_trip(&a, &b, &out);
	doc_stream_free(&c);
	doc_stream_free(&b);
	buf_free(&again);
	buf_free(&out);
	doc_stream_free(&a);
	return 0;
}

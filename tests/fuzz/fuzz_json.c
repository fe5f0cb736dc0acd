/*
 * fuzz_json.c - libFuzzer target for the JSON reader and writer: whatever
 * parses must write, read back, and be doc_equal to the first tree, both
 * pretty and compact, and also through YAML (JSON -> YAML -> tree).
 */
#include "doc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same(const struct doc_stream *a, const struct doc_stream *b, const char *how,
		 const struct buf *text)
{
	if (a->n != b->n) {
		fprintf(stderr, "%s: %zu documents became %zu:\n%s\n", how, a->n, b->n, text->data);
		abort();
	}
	for (size_t i = 0; i < a->n; i++)
		if (!doc_equal(a->docs[i], b->docs[i])) {
			fprintf(stderr, "%s: document %zu changed:\n%s\n", how, i, text->data);
			abort();
		}
}

static void must(int rc, const char *what, const struct err_msg *em)
{
	if (rc != 0) {
		fprintf(stderr, "%s failed (%d): %s\n", what, rc, em->text);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct doc_limits lim = doc_default_limits;
	struct doc_stream a = { 0 }, b = { 0 };
	struct err_msg em;
	struct buf out;

	lim.max_nodes = 1 << 16;
	if (doc_read_json((const char *)data, size, "fuzz", &lim, &a, &em) != 0)
		return 0;
	buf_init(&out, 0);
	for (int indent = 0; indent <= 4; indent += 4) {
		a.json_indent = indent;
		buf_reset(&out);
		must(doc_write(&out, &a, DOC_JSON, &em), "write JSON", &em);
		must(doc_read_json(out.data, out.len, "out", &lim, &b, &em), "re-read JSON", &em);
		same(&a, &b, "JSON", &out);
		doc_stream_free(&b);
	}
	buf_reset(&out);
	must(doc_write(&out, &a, DOC_YAML, &em), "write YAML", &em);
	must(doc_read_yaml(out.data, out.len, "out", &lim, &b, &em), "re-read YAML", &em);
	same(&a, &b, "JSON->YAML", &out);
	doc_stream_free(&b);
	buf_free(&out);
	doc_stream_free(&a);
	return 0;
}

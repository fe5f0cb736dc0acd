/*
 * fuzz_yaml.c - libFuzzer target for the YAML reader and writer: whatever
 * parses must write, read back, and be doc_equal to the first tree (styles
 * may change where libyaml cannot keep them; types, text, tags may not).
 */
#include "doc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct doc_limits lim = doc_default_limits;
	struct doc_stream a = { 0 }, b = { 0 };
	struct err_msg em;
	struct buf out;

	/* the default limits, as inject reads: a blow-up the alias ratio misses becomes memory, which
	   `make fuzz` caps (-rss_limit_mb), so the fuzzer reports it; tests/fuzz/seeds-yaml keeps the bombs */
	if (doc_read_yaml((const char *)data, size, "fuzz", &lim, &a, &em) != 0)
		return 0;
	buf_init(&out, 0);
	if (doc_write(&out, &a, DOC_YAML, &em) != 0) {
		fprintf(stderr, "write YAML failed: %s\n", em.text);
		abort();
	}
	if (doc_read_yaml(out.data, out.len, "out", &lim, &b, &em) != 0) {
		fprintf(stderr, "re-read failed: %s\n---- written:\n%s\n", em.text, out.data);
		abort();
	}
	if (a.n != b.n) {
		fprintf(stderr, "%zu documents became %zu:\n%s\n", a.n, b.n, out.data);
		abort();
	}
	for (size_t i = 0; i < a.n; i++)
		if (!doc_equal(a.docs[i], b.docs[i])) {
			fprintf(stderr, "document %zu changed:\n%s\n", i, out.data);
			abort();
		}
	doc_stream_free(&b);
	buf_free(&out);
	doc_stream_free(&a);
	return 0;
}

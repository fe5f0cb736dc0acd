/*
 * fuzz_review.c - libFuzzer target for the webhook's request handling
 * (webhook/review.c): whatever reaches POST /mutate is parsed, checked,
 * injected and diffed; it must answer or refuse, never crash, and a 0 answer
 * must be one JSON object.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/mem.h"
#include "webhook/review.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct inj_opts base;
	struct review_config cfg = { .base = &base, .max_body = 1 << 20 };
	enum review_outcome o;
	struct err_msg em;
	struct buf out;

	if (!ready) {
		mem_install();
		ready = 1;
	}
	cfg.namespace_enabled = size > 0 && (data[0] & 1);
	inj_opts_init(&base);
	buf_init(&out, (size_t)64 << 20);
	if (review_admit(&cfg, (const char *)data, size, &out, &o, &em) == 0 && (out.len == 0 || out.data[0] != '{'))
		abort();
	buf_free(&out);
	inj_opts_free(&base);
	return 0;
}

/*
 * fuzz_review.c - libFuzzer target for the webhook's request handling
 * (webhook/review.c): whatever reaches POST /mutate is parsed, checked,
 * injected and diffed; it must answer or refuse, never crash, and a 0 answer
 * must be one JSON object. Differential twice over: each input is reviewed
 * in full under the document journal, then the long way (a copy injected and
 * diffed), then twice through the answer cache (webhook/rcache.c; the second
 * time it may come from it), and all four answers must be the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/mem.h"
#include "webhook/rcache.h"
#include "webhook/review.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	static struct rcache *cache;
	struct inj_opts base;
	struct review_config cfg = { .base = &base, .max_body = 1 << 20 };
	enum review_outcome o, o2;
	struct err_msg em;
	struct buf out, again;
	int rc;

	if (!ready) {
		mem_install();
		cache = rcache_new();
		ready = 1;
	}
	cfg.namespace_enabled = size > 0 && (data[0] & 1);
	inj_opts_init(&base);
	buf_init(&out, (size_t)64 << 20);
	buf_init(&again, (size_t)64 << 20);
	rc = review_admit(&cfg, (const char *)data, size, &out, &o, &em);
	if (rc == 0 && (out.len == 0 || out.data[0] != '{'))
		abort();
	/* the long way (inject a copy, diff) gives the same bytes as the journal */
	cfg.copy_diff = true;
	if (review_admit(&cfg, (const char *)data, size, &again, &o2, &em) != rc)
		abort();
	if (rc == 0 && (o2 != o || again.len != out.len || memcmp(again.data, out.data, out.len) != 0))
		abort();
	cfg.copy_diff = false;
	cfg.cache = cache;
	rcache_clear(cache);
	for (int i = 0; i < 2; i++) {
		buf_reset(&again);
		if (review_admit(&cfg, (const char *)data, size, &again, &o2, &em) != rc)
			abort();
		if (rc == 0 && (o2 != o || again.len != out.len || memcmp(again.data, out.data, out.len) != 0))
			abort();
	}
	buf_free(&again);
	buf_free(&out);
	inj_opts_free(&base);
	return 0;
}

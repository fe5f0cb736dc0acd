/*
 * fuzz_webc.c - libFuzzer target for webc's answer reader (cloud/webc_resp.c),
 * which reads whatever an object store, or anything that took its address,
 * sends the egress process. The input's first byte chooses a piece size, a
 * HEAD request and a small body cap; the rest is the answer. Properties, not
 * only no crash: the answer read whole and in pieces gives the same code,
 * and on success the same status, body, kept headers, keep-alive and bytes
 * used; the body never passes the cap; a kept header is "name: value" with
 * the name lowercased and wanted.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cloud/webc_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const want[] = { "etag", "x-amz-request-id", "location", NULL };

struct run {
	int rc;
	size_t used;
	bool keep;
	struct webc_resp r;
};

static void run(const char *d, size_t n, size_t step, bool head, size_t max, struct run *o)
{
	struct webc_parse p;
	struct err_msg em;
	size_t off = 0;

	webc_parse_init(&p, head, max, want, &o->r);
	o->rc = 0;
	while (o->rc == 0 && off < n) {
		size_t k = step && n - off > step ? step : n - off, used = 0;

		o->rc = webc_parse_feed(&p, d + off, k, &used, &em);
		if (used > k)
			abort();
		off += used;
	}
	if (o->rc == 0)
		o->rc = webc_parse_eof(&p, &em);
	o->used = off;
	o->keep = p.keep_alive;
	webc_parse_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run a, b;
	size_t step, max;
	bool head;

	if (size < 1 || size > 65536)
		return 0;
	step = (size_t)(data[0] & 0x1f) + 1;
	head = data[0] & 0x20;
	max = data[0] & 0x40 ? 64 : 0;
	run((const char *)data + 1, size - 1, 0, head, max, &a);
	run((const char *)data + 1, size - 1, step, head, max, &b);
	if (a.rc != b.rc || (a.rc != 1 && a.rc != DP_EREMOTE && a.rc != DP_ETOOBIG && a.rc != DP_EIO))
		abort();
	if (a.rc == 1) {
		if (a.r.status != b.r.status || a.r.status < 200 || a.r.status > 999 || a.r.body.len != b.r.body.len ||
		    (a.r.body.len && memcmp(a.r.body.data, b.r.body.data, a.r.body.len) != 0) || a.keep != b.keep ||
		    a.used != b.used || a.r.n_headers != b.r.n_headers || (max && a.r.body.len > max) ||
		    (head && a.r.body.len))
			abort();
		for (size_t i = 0; i < a.r.n_headers; i++) {
			const char *h = a.r.headers[i], *c = strchr(h, ':');
			bool wanted = false;

			if (c == NULL || strcmp(h, b.r.headers[i]) != 0)
				abort();
			for (const char *x = h; x < c; x++)
				if (isupper((unsigned char)*x))
					abort();
			for (size_t w = 0; want[w]; w++)
				wanted |= strlen(want[w]) == (size_t)(c - h) && strncasecmp(h, want[w], (size_t)(c - h)) == 0;
			if (!wanted)
				abort();
		}
	}
	webc_resp_free(&a.r);
	webc_resp_free(&b.r);
	return 0;
}

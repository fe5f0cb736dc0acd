/*
 * fuzz_nettrace.c - libFuzzer target for the nettrace reader: the bytes a
 * runtime (or anything at the diagnostic port) streams to /trace, and any
 * file given to `diagport nettrace stats`. The input is read twice, whole
 * and in pieces whose sizes the first byte picks; both readings must agree
 * on the result, the error and every count (the piece size comes from the
 * input's length, so a real trace as a seed is read as it is). The callbacks touch every
 * stack address and field so that ASan sees any bad pointer handed out.
 * Seeds: small real .NET 10 traces (tests/fuzz/seeds-nettrace/).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/nettrace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t sink;

static int on_meta(void *ctx, const struct nettrace_meta *m)
{
	(void)ctx;
	sink += strlen(m->provider) + strlen(m->name) + m->n_fields;
	for (size_t i = 0; i < m->n_fields; i++)
		sink += strlen(m->fields[i].name) + m->fields[i].type;
	return 0;
}

static int on_event(void *ctx, const struct nettrace_event *e)
{
	(void)ctx;
	for (size_t i = 0; i < e->stack_n; i++)
		sink += e->stack[i];
	for (size_t i = 0; i < e->payload_len; i++)
		sink += e->payload[i];
	sink += e->meta->id;
	return 0;
}

static const struct nettrace_callbacks cbs = { NULL, on_meta, on_event, NULL };

static int read_in(const uint8_t *p, size_t n, size_t piece, struct nettrace_stats *st, struct err_msg *em)
{
	struct nettrace_limits lim = nettrace_default_limits;
	struct nettrace *t;
	int rc = 0;

	lim.max_block = 1 << 16; /* small caps, so that the fuzzer reaches them */
	lim.max_metadata_bytes = 1 << 18;
	lim.max_stack_bytes = 1 << 18;
	lim.max_threads = 1024;
	t = nettrace_new(&lim, &cbs, NULL);
	for (size_t at = 0; rc == 0 && at < n; at += piece)
		rc = nettrace_feed(t, p + at, n - at < piece ? n - at : piece, em);
	if (rc == 0)
		rc = nettrace_finish(t, em);
	nettrace_stats(t, st);
	nettrace_free(t);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nettrace_stats a, b;
	struct err_msg ea = { "" }, eb = { "" };
	size_t piece;
	int ra, rb;

	if (size < 1)
		return 0;
	piece = size % 17 + 1;
	ra = read_in(data, size, size, &a, &ea);
	rb = read_in(data, size, piece, &b, &eb);
	if (ra != rb || strcmp(ea.text, eb.text) != 0 || a.events != b.events || a.metadata != b.metadata ||
	    a.stacks != b.stacks || a.dropped != b.dropped || a.blocks != b.blocks)
		abort();
	return 0;
}

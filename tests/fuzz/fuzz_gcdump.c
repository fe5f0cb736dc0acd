/*
 * fuzz_gcdump.c - libFuzzer target for the heap-snapshot reader
 * (launcher/gcdump/gcdump_events.c) and the .gcdump writer (launcher/gcdump/gcdump_file.c): the
 * heap events are the app's runtime's bytes. The input is a list of events,
 * each one byte choosing the event (GCStart, GCEnd, BulkType, GCBulkNode,
 * GCBulkEdge, GCBulkRootEdge, the dependent handles', the static
 * variables', a module event, the rundown's), two bytes of length and the
 * payload. Whatever the bytes: reading ends; a snapshot that reads is a
 * table whose counts add up, and its .gcdump file starts with
 * FastSerialization's signature and ends with its trailer's label, which
 * names a place inside the file.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "launcher/gcdump/gcdump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RT "Microsoft-Windows-DotNETRuntime"
#define RD "Microsoft-Windows-DotNETRuntimeRundown"

static const struct nettrace_meta metas[] = {
	{ .id = 1, .provider = RT, .event_id = 1, .name = "" },   { .id = 2, .provider = RT, .event_id = 2, .name = "" },
	{ .id = 3, .provider = RT, .event_id = 15, .name = "" },  { .id = 4, .provider = RT, .event_id = 18, .name = "" },
	{ .id = 5, .provider = RT, .event_id = 19, .name = "" },  { .id = 6, .provider = RT, .event_id = 16, .name = "" },
	{ .id = 7, .provider = RT, .event_id = 17, .name = "" },  { .id = 8, .provider = RT, .event_id = 38, .name = "" },
	{ .id = 9, .provider = RT, .event_id = 152, .name = "" }, { .id = 10, .provider = RD, .event_id = 154, .name = "" },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gcdump_reader *r = gcdump_reader_new(42, size == 0 || (data[0] & 1));
	struct nettrace_trace t = { .pointer_size = size > 1 && (data[1] & 1) ? 4 : 8 };
	struct gcdump *g = NULL;
	struct err_msg em;
	size_t i = size > 1 ? 2 : size;
	int64_t ts = 0;

	gcdump_callbacks.trace(r, &t);
	while (i + 3 <= size) {
		const struct nettrace_meta *m = &metas[data[i] % (sizeof(metas) / sizeof(metas[0]))];
		size_t n = (size_t)data[i + 1] | (size_t)data[i + 2] << 8;
		struct nettrace_event e = { .meta = m, .timestamp = ts++ };

		i += 3;
		if (n > size - i)
			n = size - i;
		e.payload = data + i;
		e.payload_len = n;
		gcdump_callbacks.event(r, &e);
		i += n;
	}
	if (gcdump_reader_finish(r, &g, &em) == 0) {
		uint64_t objects = 0, bytes = 0;
		struct buf out;

		for (size_t k = 0; k < g->n_types; k++)
			objects += g->types[k].count, bytes += g->types[k].bytes;
		if (objects != g->objects || bytes != g->bytes)
			abort();
		buf_init(&out, 64u << 20);
		if (g->graph && gcdump_file(g, &out, &em) == 0) {
			const uint8_t *p = (const uint8_t *)out.data;
			uint32_t trailer;

			if (out.len < 40 || memcmp(p + 4, "!FastSerialization.1", 20) != 0)
				abort();
			memcpy(&trailer, p + out.len - 4, 4);
			if (trailer >= out.len - 4)
				abort();
		}
		buf_free(&out);
		gcdump_free(g);
	}
	gcdump_reader_free(r);
	return 0;
}

/*
 * fuzz_exceptions.c - libFuzzer target for launcher/exceptions/exc_history.c,
 * which reads the exception events an app's runtime sends (the app's bytes):
 * the input is cut into events (a byte choosing ExceptionThrown or another
 * event of the keyword, a byte of thread, two bytes of length, the payload; a stack
 * from the payload's bytes). Whatever they are, the history stays within its
 * caps, every entry's strings end (UTF-8 of at most 1.5 bytes per UTF-16 byte), its inner
 * exception is an earlier entry.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/exceptions/exc_history.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint16_t ids[4] = { 80, 250, 251, 80 };
	struct nettrace_meta m = { .provider = (char *)EXC_PROVIDER };
	struct exc_history h;
	struct exc_entry *e;
	size_t n, at = 0;

	exc_history_init(&h, 16, 4096);
	while (at + 4 <= size) {
		size_t len = (size_t)data[at + 2] | (size_t)data[at + 3] << 8;
		struct nettrace_event ev = { .meta = &m, .thread_id = data[at + 1] };

		m.event_id = ids[data[at] & 3];
		at += 4;
		if (len > size - at)
			len = size - at;
		ev.payload = data + at;
		ev.payload_len = len;
		ev.stack = (const uint64_t *)(const void *)data; /* read as bytes: any values */
		ev.stack_n = size / 8 < 300 ? size / 8 : 300;
		exc_history_event(&h, &ev, 0);
		at += len;
		if (h.n > 16 || h.bytes > 4096)
			abort();
	}
	n = exc_history_copy(&h, &e);
	for (size_t i = 0; i < n; i++)
		if (strlen(e[i].type) > 2 * size || strlen(e[i].message) > EXC_MAX_MESSAGE || e[i].n_ips > EXC_MAX_IPS ||
		    e[i].inner >= e[i].id)
			abort();
	exc_entries_free(e, n);
	exc_history_free(&h);
	return 0;
}

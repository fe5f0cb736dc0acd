/*
 * fuzz_natsym.c - libFuzzer target for launcher/profile/natsym_elf.c, the ELF reader,
 * which reads the libraries of the app being profiled (their bytes are the
 * app image's, not ours): whatever the bytes, reading ends, and every name
 * it gives is a NUL-terminated string within the caller's buffer, taken from
 * inside the file's string table.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/profile/natsym.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct mem {
	const uint8_t *p;
	size_t n;
};

static int read_at(void *ctx, uint64_t off, size_t len, void *buf)
{
	const struct mem *m = ctx;

	if (off > m->n || len > m->n - off)
		return -1;
	memcpy(buf, m->p + off, len);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mem m = { data, size };
	struct natsym_elf *e = natsym_elf_read(read_at, &m, size);
	char name[64];
	uint64_t from;

	for (uint64_t off = 0; e && off <= size; off += 7) {
		memset(name, 'x', sizeof(name));
		if (natsym_elf_find(e, off, name, sizeof(name), &from) && memchr(name, 0, sizeof(name)) == NULL)
			abort();
	}
	natsym_elf_free(e);
	return 0;
}

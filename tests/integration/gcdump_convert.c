/*
 * gcdump_convert.c - for gcdump.sh: the agent's .gcdump writer run on a heap
 * snapshot's nettrace (format=nettrace), as `dotnet-gcdump convert` runs
 * Microsoft's on the same file, so the two files can be compared on the very
 * same events. Usage: gcdump_convert IN.nettrace OUT.gcdump; exit 0, or 1
 * with the reason on stderr.
 */
#include <stdio.h>

#include "buf.h"
#include "eventpipe/nettrace.h"
#include "launcher/gcdump/gcdump.h"

int main(int argc, char **argv)
{
	struct gcdump_reader *r = gcdump_reader_new(0, true);
	struct nettrace *t = nettrace_new(NULL, &gcdump_callbacks, r);
	struct gcdump *g = NULL;
	struct buf in, out;
	struct err_msg em = { .text = "" };
	FILE *f;
	int rc;

	buf_init(&in, 0);
	buf_init(&out, 0);
	if (argc != 3) {
		fprintf(stderr, "usage: gcdump_convert IN.nettrace OUT.gcdump\n");
		return 1;
	}
	rc = buf_read_path(&in, argv[1], NULL, &em);
	if (rc == 0)
		rc = nettrace_feed(t, in.data, in.len, &em);
	if (rc == 0)
		rc = nettrace_finish(t, &em);
	if (rc == 0)
		rc = gcdump_reader_finish(r, &g, &em);
	if (rc == 0)
		rc = gcdump_file(g, &out, &em);
	if (rc == 0) {
		f = fopen(argv[2], "wb");
		if (f == NULL || fwrite(out.data, 1, out.len, f) != out.len || fclose(f) != 0) {
			snprintf(em.text, sizeof(em.text), "cannot write %s", argv[2]);
			rc = -1;
		}
	}
	if (rc != 0)
		fprintf(stderr, "gcdump_convert: %s\n", em.text);
	gcdump_free(g);
	gcdump_reader_free(r);
	nettrace_free(t);
	buf_free(&in);
	buf_free(&out);
	return rc == 0 ? 0 : 1;
}

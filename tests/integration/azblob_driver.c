/*
 * azblob_driver.c - the Azure Blob store client (egress/azblob.c) driven
 * the way the agent drives it: the settings read from a file by the agent's
 * own reader (launcher/config_src.c), the egress process forked with its
 * seccomp profile (eproc_start_with), the artifact written into its pipe.
 *
 *   azblob_driver CONFIG PROVIDER upload NAME FILE [KEY VALUE]...
 *       the file as NAME, committed; prints "OK LOCATION BYTES"
 *   azblob_driver CONFIG PROVIDER abort NAME FILE BYTES
 *       the first BYTES of the file, then aborted; prints "ABORTED" (or the error)
 *   azblob_driver CONFIG PROVIDER check
 *       the settings checked as at the agent's start; prints "OK"
 *
 * On failure it prints "ERR CODE MESSAGE" and exits 1. Metadata pairs after
 * FILE are passed as the egress process's meta (artifacttype, pid, ...).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egress/azblob.h"
#include "launcher/config.h"
#include "launcher/capture/eproc.h"
#include "log.h"
#include "mem.h"

static const struct egress_store *const stores[] = { &azblob_store, NULL };

static int die(int rc, const struct err_msg *em)
{
	printf("ERR %d %s\n", rc, em->text);
	return 1;
}

int main(int argc, char **argv)
{
	struct launch_config c = { 0 };
	struct err_msg em = { "" };
	struct eproc *ep = NULL;
	struct eproc_upload *u;
	const struct egress_provider *p = NULL;
	const char *mode;
	char *loc = NULL, buf[65536];
	uint64_t total = 0, limit = UINT64_MAX;
	int rc, fd, in;
	ssize_t n;

	if (argc < 4) {
		fprintf(stderr, "usage: azblob_driver CONFIG PROVIDER upload|abort|check ...\n");
		return 2;
	}
	mem_install();
	signal(SIGPIPE, SIG_IGN);
	mode = argv[3];
	if ((rc = config_load_file(&c, argv[1], &em)) != 0)
		return die(rc, &em);
	for (size_t i = 0; i < c.n_egress; i++)
		if (strcmp(c.egress[i].name, argv[2]) == 0)
			p = &c.egress[i];
	if ((rc = eproc_start_with(&c, true, stores, &ep, &em)) != 0)
		return die(rc, &em);
	if (strcmp(mode, "check") == 0 || p == NULL) {
		printf(p ? "OK\n" : "ERR 0 no provider %s\n", argv[2]);
		eproc_free(ep);
		config_free(&c);
		return p ? 0 : 1;
	}
	if (argc < 6 || (strcmp(mode, "abort") == 0 && argc < 7))
		return 2;
	if (strcmp(mode, "abort") == 0)
		limit = strtoull(argv[6], NULL, 10);
	if ((in = open(argv[5], O_RDONLY)) < 0) {
		perror(argv[5]);
		return 2;
	}
	{
		const char *const *meta = strcmp(mode, "upload") == 0 ? (const char *const *)argv + 6 : NULL;

		if ((rc = eproc_open(ep, p, argv[4], meta, NULL, NULL, &fd, &u, &em)) != 0)
			return die(rc, &em);
	}
	while (total < limit && (n = read(in, buf, sizeof(buf))) > 0) {
		size_t want = (uint64_t)n > limit - total ? (size_t)(limit - total) : (size_t)n;

		if (write(fd, buf, want) != (ssize_t)want)
			break; /* the store failed: its verdict says why */
		total += want;
	}
	close(in);
	rc = eproc_close(u, limit == UINT64_MAX, total, NULL, &loc, &em);
	if (rc == 0)
		printf("OK %s %llu\n", loc, (unsigned long long)total);
	else if (rc == DP_ECANCELED && limit != UINT64_MAX)
		printf("ABORTED %s\n", em.text);
	else
		printf("ERR %d %s\n", rc, em.text);
	free(loc);
	eproc_free(ep);
	config_free(&c);
	return rc == 0 || (rc == DP_ECANCELED && limit != UINT64_MAX) ? 0 : 1;
}

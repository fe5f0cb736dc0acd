/*
 * cli.c - `diagport webhook review [--namespace-enabled] [FILE | -]`.
 *
 * Reads one AdmissionReview, writes the response AdmissionReview on stdout:
 * what the webhook's server will answer for the same request (review.c),
 * for scripts and tests. Exit status as `diagport inject`'s: 0 answered
 * (the pod is always allowed), 2 usage, 3 not an AdmissionReview, 4 over the
 * size cap, 5 I/O error. Nothing is written on stdout unless the status is 0.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "review.h"

#define MAX_BODY ((size_t)16 << 20)

static void usage(FILE *f)
{
	fprintf(f, "usage: diagport webhook review [--namespace-enabled] [FILE | -]\n\n"
		   "Answers one admission.k8s.io/v1 AdmissionReview (from FILE or standard input) as the\n"
		   "webhook does: allowed, with a JSON Patch that injects the pod when it opts in (annotation\n"
		   "diagport.dev/inject: \"true\"; with --namespace-enabled, unless it says \"false\").\n"
		   "The HTTPS server (diagport webhook --listen ...) is not built yet.\n");
}

static int review(int argc, char **argv)
{
	struct inj_opts base;
	struct review_config cfg = { .base = &base, .max_body = MAX_BODY };
	const char *file = NULL;
	enum review_outcome o;
	struct err_msg em;
	struct buf in, out;
	int fd = 0, rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--namespace-enabled") == 0) {
			cfg.namespace_enabled = true;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (file == NULL && (argv[i][0] != '-' || strcmp(argv[i], "-") == 0)) {
			file = argv[i];
		} else {
			fprintf(stderr, "diagport: webhook review: unexpected argument '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (file && strcmp(file, "-") != 0 && (fd = open(file, O_RDONLY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "diagport: webhook review: %s: %s\n", file, strerror(errno));
		return 5;
	}
	buf_init(&in, MAX_BODY);
	rc = buf_read_fd(&in, fd);
	if (fd > 0)
		close(fd);
	if (rc != 0) {
		fprintf(stderr, "diagport: webhook review: %s: %s\n", file ? file : "<stdin>",
			rc == DP_ETOOBIG ? "larger than 16 MiB" : "cannot be read");
		buf_free(&in);
		return rc == DP_ETOOBIG ? 4 : 5;
	}
	inj_opts_init(&base);
	buf_init(&out, (size_t)128 << 20);
	rc = review_admit(&cfg, in.data ? in.data : "", in.len, &out, &o, &em);
	if (rc == 0) {
		if (fwrite(out.data, 1, out.len, stdout) != out.len || putchar('\n') == EOF || fflush(stdout) != 0)
			rc = DP_EIO;
	} else {
		fprintf(stderr, "diagport: webhook review: %s: %s\n", file ? file : "<stdin>", em.text);
	}
	inj_opts_free(&base);
	buf_free(&in);
	buf_free(&out);
	return rc == 0 ? 0 : rc == DP_ETOOBIG ? 4 : rc == DP_EIO ? 5 : 3;
}

int webhook_cli(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "review") == 0)
		return review(argc - 1, argv + 1);
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "diagport: webhook: only `diagport webhook review` is built so far; the HTTPS server is not\n");
	usage(stderr);
	return 2;
}

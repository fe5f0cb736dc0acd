/*
 * macro_cli.c - `diagport macro`: the CloudFormation macro (macro.c) on one
 * event from a file or standard input, the response on standard output. The
 * same contract as a Lambda custom runtime is lambda.c's loop, which runs
 * when AWS_LAMBDA_RUNTIME_API is set and no --event is given. Both read the
 * platform's settings from DIAGPORT_POLICY first, as the function does at
 * cold start, and log the warnings to stderr (the function's log).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "cli.h"
#include "inj_int.h"

#define MAX_EVENT ((size_t)6 << 20) /* Lambda's synchronous invocation payload */

static void usage(FILE *f)
{
	fprintf(f, "usage: diagport macro [--event FILE|-]\n\n"
		   "Answers one CloudFormation macro event (JSON: requestId, fragment, params, ...) as the\n"
		   "diagport macro does: the fragment with diagnostics added to its ECS task definitions\n"
		   "(a whole template as a Transform: those that opt in, or all with params.all; or one task\n"
		   "definition's Properties as Fn::Transform in them), params being the inject options by name.\n"
		   "Prints the response (requestId, status, fragment or errorMessage). With\n"
		   "AWS_LAMBDA_RUNTIME_API set and no --event, serves events as a Lambda custom runtime\n"
		   "(the Runtime API loop); the Lambda artefact runs this as its bootstrap (make lambda).\n"
		   "The platform's settings (the webhook's configuration format: defaults, and an enforce: map\n"
		   "that wins over params and every task definition's own settings) come from the environment:\n"
		   "DIAGPORT_POLICY holding the document (YAML or JSON), or DIAGPORT_POLICY_FILE naming a file;\n"
		   "a bad one fails every event. Warnings (what the policy overrode) are logged to stderr as\n"
		   "JSON lines: CloudFormation's macro response has no place for them.\n"
		   "Exit status: 0 status success, 1 status failure, 2 usage, 3 the event cannot be read,\n"
		   "5 the response cannot be written.\n");
}

int inj_cli_macro(int argc, char **argv)
{
	const char *file = getenv("AWS_LAMBDA_RUNTIME_API") ? NULL : "-";
	struct inj_macro_platform platform;
	struct buf in, out;
	int fd, rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(argv[i], "--event") == 0 && i + 1 < argc) {
			file = argv[++i];
		} else {
			fprintf(stderr, "diagport: macro: unexpected argument '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (file == NULL) /* in Lambda: serve events until the sandbox ends */
		return inj_lambda_serve();
	fd = strcmp(file, "-") == 0 ? STDIN_FILENO : open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "diagport: macro: %s: %s\n", file, strerror(errno));
		return 3;
	}
	buf_init(&in, MAX_EVENT);
	rc = buf_read_fd(&in, fd);
	if (fd != STDIN_FILENO)
		close(fd);
	if (rc != 0) {
		fprintf(stderr, "diagport: macro: %s: %s\n", file,
			rc == DP_ETOOBIG ? "over 6 MiB, Lambda's payload limit" : strerror(errno));
		buf_free(&in);
		return 3;
	}
	buf_init(&out, 0);
	inj_macro_platform_load(&platform); /* a bad one: the event's failure, with its reason */
	rc = inj_macro_answer(in.data ? in.data : "", in.len, &platform, &out);
	inj_macro_platform_free(&platform);
	if (rc == 0 && (buf_putc(&out, '\n') != 0 || buf_write_fd(&out, STDOUT_FILENO) != 0))
		rc = DP_EIO;
	rc = rc != 0 ? 5 : strstr(out.data, "\"status\":\"success\"") ? 0 : 1;
	buf_free(&in);
	buf_free(&out);
	return rc;
}

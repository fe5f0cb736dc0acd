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
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "review.h"
#include "wconfig.h"
#include "sandbox.h"
#include "server.h"

#define MAX_BODY ((size_t)16 << 20)

static void usage(FILE *f)
{
	fprintf(f, "usage: diagport webhook review [--namespace-enabled] [--no-ptrace] [--config FILE] [FILE | -]\n\n"
		   "Answers one admission.k8s.io/v1 AdmissionReview (from FILE or standard input) as the\n"
		   "webhook does: allowed, with a JSON Patch that injects the pod when it opts in (annotation\n"
		   "diagport.dev/inject: \"true\"; with --namespace-enabled, unless it says \"false\").\n"
		   "--no-ptrace: the namespace enforces Pod Security baseline or restricted (no SYS_PTRACE).\n"
		   "\n"
		   "       diagport webhook --listen ADDR:PORT --tls-cert FILE --tls-key FILE [--config FILE]\n"
		   "                        [--no-sandbox] [--no-review-cache]\n\n"
		   "Serves POST /mutate and /mutate/namespace over HTTPS (libmicrohttpd and GnuTLS, loaded at\n"
		   "start), /healthz, /readyz and /metrics; reloads the key pair and the configuration\n"
		   "(defaults under the diagport.dev/ annotation names, excludedNamespaces) when they change.\n"
		   "Answers to repeated reviews (a ReplicaSet's replicas differ only in request.uid) are kept\n"
		   "and reused; --no-review-cache reviews every request in full.\n");
}

static int review(int argc, char **argv)
{
	struct wconfig wc;
	struct review_config cfg = { .base = &wc.opts, .max_body = MAX_BODY };
	const char *file = NULL, *config = NULL;
	enum review_outcome o;
	struct err_msg em;
	struct buf in, out;
	int fd = 0, rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--namespace-enabled") == 0) {
			cfg.namespace_enabled = true;
		} else if (strcmp(argv[i], "--no-ptrace") == 0) {
			cfg.no_ptrace = true;
		} else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
			config = argv[++i];
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
	if (config) {
		if (wconfig_load(config, &wc, &em) != 0) {
			fprintf(stderr, "diagport: webhook review: %s\n", em.text);
			buf_free(&in);
			return 2;
		}
	} else {
		wconfig_defaults(&wc);
	}
	cfg.excluded = wc.excluded;
	cfg.n_excluded = wc.n_excluded;
	buf_init(&out, (size_t)128 << 20);
	rc = review_admit(&cfg, in.data ? in.data : "", in.len, &out, &o, &em);
	if (rc == 0) {
		if (fwrite(out.data, 1, out.len, stdout) != out.len || putchar('\n') == EOF || fflush(stdout) != 0)
			rc = DP_EIO;
	} else {
		fprintf(stderr, "diagport: webhook review: %s: %s\n", file ? file : "<stdin>", em.text);
	}
	wconfig_free(&wc);
	buf_free(&in);
	buf_free(&out);
	return rc == 0 ? 0 : rc == DP_ETOOBIG ? 4 : rc == DP_EIO ? 5 : 3;
}

/* One write per line, no stdio lock: the worker threads log every admission, and must not queue on each other. */
static void log_stderr(const char *line)
{
	char b[1100];
	size_t n = strnlen(line, sizeof(b) - 1);

	memcpy(b, line, n);
	b[n++] = '\n';
	while (write(2, b, n) < 0 && errno == EINTR)
		;
}

/* `diagport webhook --listen ADDR:PORT --tls-cert FILE --tls-key FILE`: serve until SIGTERM/SIGINT. */
static int serve(int argc, char **argv)
{
	struct webhook_config cfg = { .log = log_stderr };
	bool sandbox = true;
	struct webhook *w = NULL;
	struct err_msg em;
	sigset_t set;
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc)
			cfg.listen = argv[++i];
		else if (strcmp(argv[i], "--tls-cert") == 0 && i + 1 < argc)
			cfg.cert_file = argv[++i];
		else if (strcmp(argv[i], "--tls-key") == 0 && i + 1 < argc)
			cfg.key_file = argv[++i];
		else if (strcmp(argv[i], "--no-sandbox") == 0)
			sandbox = false;
		else if (strcmp(argv[i], "--no-review-cache") == 0)
			cfg.no_review_cache = true;
		else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			cfg.config_file = argv[++i];
		else {
			fprintf(stderr, "diagport: webhook: unexpected argument '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (!cfg.listen || !cfg.cert_file || !cfg.key_file) {
		fprintf(stderr, "diagport: webhook: --listen, --tls-cert and --tls-key are required\n");
		return 2;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread: the daemons' threads inherit it */
	sigdelset(&set, SIGPIPE);
	if (webhook_start(&cfg, &w, &em) != 0) {
		fprintf(stderr, "diagport: webhook: %s\n", em.text);
		return 1;
	}
	if (sandbox)
		sandbox_enter(SANDBOX_WEBHOOK); /* libraries loaded, socket bound, key pair read */
	fprintf(stderr, "{\"event\":\"listening\",\"address\":\"%s\"}\n", cfg.listen);
	for (;;) {
		struct timespec tick = { .tv_sec = 2 };

		if (sigtimedwait(&set, NULL, &tick) > 0)
			break;
		webhook_poll(w);
	}
	webhook_free(w);
	return rc;
}

int webhook_cli(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "review") == 0)
		return review(argc - 1, argv + 1);
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	return serve(argc, argv);
}

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

/*
 * The log: one JSON line per admission, tens of thousands a second under
 * load. Admission lines are gathered in a buffer and written together, when
 * it fills and every LOG_FLUSH_MS by the main loop (what nginx's access_log
 * buffer= does), so the workers do not make a system call each; every other
 * event (reloads, errors, listening) is written at once, with what was
 * waiting before it. No stdio: one write(2) per flush.
 */
#define LOG_FLUSH_MS 200
static struct {
	pthread_mutex_t mu;
	char buf[16384];
	size_t len;
} logq = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void log_flush_locked(void)
{
	size_t off = 0;

	while (off < logq.len) {
		ssize_t n = write(2, logq.buf + off, logq.len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* stderr is gone: drop the lines rather than stall admissions */
		off += (size_t)n;
	}
	logq.len = 0;
}

static void log_flush(void)
{
	pthread_mutex_lock(&logq.mu);
	log_flush_locked();
	pthread_mutex_unlock(&logq.mu);
}

static void log_stderr(const char *line)
{
	size_t n = strnlen(line, 4096);

	pthread_mutex_lock(&logq.mu);
	if (logq.len + n + 1 > sizeof(logq.buf))
		log_flush_locked();
	memcpy(logq.buf + logq.len, line, n);
	logq.len += n;
	logq.buf[logq.len++] = '\n';
	if (strncmp(line, "{\"event\":\"admission\"", 21) != 0)
		log_flush_locked();
	pthread_mutex_unlock(&logq.mu);
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
	for (unsigned ticks = 1;; ticks++) {
		struct timespec tick = { .tv_nsec = LOG_FLUSH_MS * 1000000L };

		if (sigtimedwait(&set, NULL, &tick) > 0)
			break;
		log_flush();
		if (ticks % (2000 / LOG_FLUSH_MS) == 0)
			webhook_poll(w); /* the key pair and the configuration, every 2 s */
	}
	webhook_free(w);
	log_flush();
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

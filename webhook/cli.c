/*
 * cli.c - `diagport webhook`: argument parsing for its three forms.
 *
 * `diagport webhook review [--namespace-enabled] [FILE | -]` reads one
 * AdmissionReview and writes the response AdmissionReview on stdout: what the
 * webhook's server will answer for the same request (review.c), for scripts
 * and tests. Exit status as `diagport inject`'s: 0 answered (the pod is
 * always allowed), 2 usage, 3 not an AdmissionReview, 4 over the size cap,
 * 5 I/O error. Nothing is written on stdout unless the status is 0.
 *
 * `diagport webhook --listen ...` serves (server.c); `diagport webhook
 * certs ...` keeps the certificates and the caBundle right (certs.c), with
 * the exit codes listed in its usage text.
 */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "certs.h"
#include "log.h"
#include "review.h"
#include "injector/inj.h"
#include "sandbox.h"
#include "server.h"
#include "size.h"

#define MAX_BODY ((size_t)16 << 20)
#define POLL_S 2 /* how often the key pair and the configuration file are looked at */

static void usage(FILE *f)
{
	fprintf(f, "usage: diagport webhook review [--namespace-enabled] [--no-ptrace] [--config FILE] [FILE | -]\n\n"
		   "Answers one admission.k8s.io/v1 AdmissionReview (from FILE or standard input) as the\n"
		   "webhook does: allowed, with a JSON Patch that injects the pod when it opts in (annotation\n"
		   "diagport.dev/inject: \"true\" or label diagport.dev/inject: enabled; with --namespace-enabled,\n"
		   "unless it opts out: annotation \"false\" or label disabled, which win over an opt-in).\n"
		   "--no-ptrace: the namespace enforces Pod Security baseline or restricted (no SYS_PTRACE;\n"
		   "a pod that asks for ptrace or perf, whose PERFMON they refuse, is admitted unchanged).\n"
		   "\n"
		   "       diagport webhook --listen ADDR:PORT --tls-cert FILE --tls-key FILE [--config FILE]\n"
		   "                        [--no-sandbox] [--no-review-cache] [--log-level LEVEL]\n"
		   "                        [--body-budget SIZE]\n\n"
		   "Serves POST /mutate, /mutate/namespace and both with /no-ptrace after them over HTTPS\n"
		   "(libmicrohttpd and GnuTLS, loaded at start), GET /healthz, /readyz and /metrics; reloads\n"
		   "the key pair and the configuration (defaults under the diagport.dev/ annotation names,\n"
		   "excludedNamespaces) when they change.\n"
		   "Answers to repeated reviews (a ReplicaSet's replicas differ only in request.uid) are kept\n"
		   "and reused; --no-review-cache reviews every request in full. The log is JSON lines on\n"
		   "stderr (time, level, msg, ...); --log-level debug|info|warn|error (default info).\n"
		   "Request bodies in flight share --body-budget (16Mi; at least 12Mi): one that does not fit is\n"
		   "refused at once with 503, and its last 4Mi is kept for bodies up to 256Ki (every ordinary\n"
		   "review); a body must come at 64 KiB/s after 2 s or its connection is closed.\n"
		   "\n"
		   "       diagport webhook certs --namespace NS --secret NAME --service NAME\n"
		   "                        --webhook-configuration NAME [options]\n\n"
		   "Keeps the webhook's certificates in the kubernetes.io/tls Secret NAME (tls.crt, tls.key, ca.crt,\n"
		   "ca.key) and the caBundle of every webhook of the MutatingWebhookConfiguration that calls the\n"
		   "Service: creates a CA and a serving certificate when there is no Secret, keeps them while they\n"
		   "are good and far from expiry, otherwise renews the serving certificate (and the CA when it\n"
		   "cannot sign one it outlives; ca.crt then holds the new and the old CA). Idempotent: a run\n"
		   "with nothing to do writes nothing. Prints one line saying what it did.\n"
		   "  --api-server URL        https://HOST:PORT (default: in the pod, from KUBERNETES_SERVICE_HOST/PORT)\n"
		   "  --token-file F          bearer token, read for each request (default " KUBEAPI_SA_DIR "/token)\n"
		   "  --api-ca-file F         the API server's CA (default " KUBEAPI_SA_DIR "/ca.crt)\n"
		   "  --validity-days N       of a serving certificate (365)\n"
		   "  --ca-validity-days N    of a CA (3650)\n"
		   "  --renew-before-days N   renew what expires within N days (60; the CronJob runs monthly)\n"
		   "  --cluster-domain D      the last DNS name is SVC.NS.svc.D (cluster.local)\n"
		   "  --timeout-seconds N     per API request (10)\n"
		   "  --dry-run               read and decide, write nothing; say what would be done\n"
		   "  --log-level LEVEL       debug, info, warn or error: the JSON log lines on stderr (info)\n"
		   "Exit status: 0 done (or nothing to do), 2 usage, 3 the API answered with an error (the webhook\n"
		   "configuration missing, a 5xx after retries, conflicts that did not stop, a Secret of another\n"
		   "type), 4 the API refused the credentials (401, 403), 5 no answer from the API server (down,\n"
		   "its certificate not verified, timeout) or the token or CA file unreadable, 6 GnuTLS missing\n"
		   "or failing, 1 an internal error.\n");
}

static int review(int argc, char **argv)
{
	struct inj_settings wc;
	struct review_config cfg = { .base = &wc.opts, .policy = &wc.enforce, .max_body = MAX_BODY };
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
		if (inj_settings_load(config, &wc, &em) != 0) {
			fprintf(stderr, "diagport: webhook review: %s\n", em.text);
			buf_free(&in);
			return 2;
		}
	} else {
		inj_settings_defaults(&wc);
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
	inj_settings_free(&wc);
	buf_free(&in);
	buf_free(&out);
	return rc == 0 ? 0 : rc == DP_ETOOBIG ? 4 : rc == DP_EIO ? 5 : 3;
}

/* The log level from --log-level LEVEL (argv[i] is the flag); false after a message when it is not one. */
static bool log_level_flag(const char *cmd, const char *v)
{
	enum log_level lvl;

	if (v == NULL || log_level_parse(v, &lvl) != 0) {
		fprintf(stderr, "diagport: %s: --log-level takes debug, info, warn or error, not '%s'\n", cmd, v ? v : "");
		return false;
	}
	log_set_level(lvl);
	return true;
}

/* `diagport webhook --listen ADDR:PORT --tls-cert FILE --tls-key FILE`: serve until SIGTERM/SIGINT. */
static int serve(int argc, char **argv)
{
	struct webhook_config cfg = { 0 };
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
		else if (strcmp(argv[i], "--body-budget") == 0) {
			uint64_t v;

			if (i + 1 == argc || size_parse(argv[++i], &v) != 0 || v == 0 || v > ((uint64_t)1 << 40)) {
				fprintf(stderr, "diagport: webhook: --body-budget takes a size such as 16Mi or 32M, not "
					"'%s'\n", i < argc ? argv[i] : "");
				return 2;
			}
			cfg.body_budget = (size_t)v;
		} else if (strcmp(argv[i], "--log-level") == 0) {
			if (!log_level_flag("webhook", i + 1 < argc ? argv[++i] : NULL))
				return 2;
		} else {
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
	log_async_start(); /* a line per admission from each worker thread: one writer (log.c says why) */
	if (webhook_start(&cfg, &w, &em) != 0) {
		log_error("cannot start", LOG_STR("event", "exit"), LOG_STR("error", em.text));
		return 1;
	}
	if (sandbox)
		sandbox_enter(SANDBOX_WEBHOOK); /* libraries loaded, socket bound, key pair read */
	log_info("listening", LOG_STR("event", "listening"), LOG_STR("address", cfg.listen),
		 LOG_UINT("port", webhook_port(w))); /* the port bound: the system's choice for a port 0 */
	for (;;) {
		struct timespec tick = { .tv_sec = POLL_S };

		if (sigtimedwait(&set, NULL, &tick) > 0)
			break;
		webhook_poll(w); /* the key pair and the configuration */
	}
	webhook_free(w);
	log_info("stopped", LOG_STR("event", "stopped"), LOG_STR("address", cfg.listen));
	return rc;
}

/* A whole decimal number in [lo, hi], or -1. */
static long number(const char *s, long lo, long hi)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end != '\0' || v < lo || v > hi)
		return -1;
	return v;
}

static int certs_exit(int rc)
{
	switch (rc) {
	case DP_EINVAL: return 2;
	case DP_EREMOTE: return 3;
	case DP_EAUTH: return 4;
	case DP_EIO: case DP_ETOOBIG: return 5;
	case DP_ECRYPTO: case DP_ENOLIB: return 6;
	}
	return 1;
}

/* What a dry run says it would do, in words that read after "Secret NS/NAME". */
static const char *dry_action_name(enum certs_action a)
{
	switch (a) {
	case CERTS_CREATED: return "would be created";
	case CERTS_KEPT: return "would be kept";
	case CERTS_PRUNED: return "would be kept, its expired CA removed from ca.crt";
	case CERTS_RENEWED_SERVING: return "would get a renewed serving certificate";
	case CERTS_RENEWED_CA: return "would get a renewed CA";
	}
	return "?";
}

static void print_certs(const struct certs_config *c, const struct certs_result *r)
{
	char ca[16], srv[16];
	struct tm tm;

	strftime(ca, sizeof(ca), "%Y-%m-%d", gmtime_r(&r->ca_not_after, &tm));
	strftime(srv, sizeof(srv), "%Y-%m-%d", gmtime_r(&r->serving_not_after, &tm));
	printf("diagport webhook certs: %sSecret %s/%s %s%s%s; ", c->dry_run ? "dry run, nothing written: " : "", c->ns,
	       c->secret, c->dry_run ? dry_action_name(r->action) : certs_action_name(r->action), r->why[0] ? ": " : "",
	       r->why);
	printf("serving certificate until %s, CA until %s; caBundle (%d CA%s) ", srv, ca, r->bundle_cas,
	       r->bundle_cas == 1 ? "" : "s");
	if (r->patched)
		printf("%spatched on %d webhook%s", c->dry_run ? "would be " : "", r->patched, r->patched == 1 ? "" : "s");
	if (r->patched && r->current)
		printf(", ");
	if (r->current)
		printf("already current on %d webhook%s", r->current, r->current == 1 ? "" : "s");
	printf(" of MutatingWebhookConfiguration %s", c->webhook_config);
	if (r->skipped)
		printf(" (%d calling other services left alone)", r->skipped);
	if (r->conflicts)
		printf("; %d conflict%s resolved by reading again", r->conflicts, r->conflicts == 1 ? "" : "s");
	printf("\n");
}

/* `diagport webhook certs ...` */
static int certs(int argc, char **argv)
{
	char server[300];
	struct kubeapi_config api = { .token_file = KUBEAPI_SA_DIR "/token", .ca_file = KUBEAPI_SA_DIR "/ca.crt",
				      .timeout_ms = 10000, .tries = 4 };
	struct certs_config c = { .api = &api, .cluster_domain = "cluster.local", .validity_days = 365,
				  .ca_validity_days = 3650, .renew_before_days = 60 };
	struct certs_result res;
	struct err_msg em;
	int rc;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		long n = 0;

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "--dry-run") == 0) {
			c.dry_run = true;
			continue;
		} else if (v == NULL) {
			fprintf(stderr, "diagport: webhook certs: %s: missing value or unknown option\n", a);
			return 2;
		}
		i++;
		if (strcmp(a, "--namespace") == 0)
			c.ns = v;
		else if (strcmp(a, "--secret") == 0)
			c.secret = v;
		else if (strcmp(a, "--service") == 0)
			c.service = v;
		else if (strcmp(a, "--webhook-configuration") == 0)
			c.webhook_config = v;
		else if (strcmp(a, "--cluster-domain") == 0)
			c.cluster_domain = v;
		else if (strcmp(a, "--api-server") == 0)
			api.server = v;
		else if (strcmp(a, "--token-file") == 0)
			api.token_file = v;
		else if (strcmp(a, "--api-ca-file") == 0)
			api.ca_file = v;
		else if (strcmp(a, "--validity-days") == 0 && (n = number(v, 1, 36500)) > 0)
			c.validity_days = (int)n;
		else if (strcmp(a, "--ca-validity-days") == 0 && (n = number(v, 1, 36500)) > 0)
			c.ca_validity_days = (int)n;
		else if (strcmp(a, "--renew-before-days") == 0 && (n = number(v, 1, 36500)) > 0)
			c.renew_before_days = (int)n;
		else if (strcmp(a, "--timeout-seconds") == 0 && (n = number(v, 1, 600)) > 0)
			api.timeout_ms = n * 1000;
		else if (strcmp(a, "--log-level") == 0) {
			if (!log_level_flag("webhook certs", v))
				return 2;
		} else {
			fprintf(stderr, "diagport: webhook certs: %s %s: %s\n", a, v,
				n < 0 ? "not a whole number in range" : "unknown option");
			usage(stderr);
			return 2;
		}
	}
	if (!c.ns || !c.secret || !c.service || !c.webhook_config) {
		fprintf(stderr, "diagport: webhook certs: --namespace, --secret, --service and --webhook-configuration "
				"are required\n");
		return 2;
	}
	if (api.server == NULL) {
		if (incluster_server(server, sizeof(server), &em) != 0) {
			fprintf(stderr, "diagport: webhook certs: %s: give the API server with --api-server https://HOST:PORT\n",
				em.text);
			return 2;
		}
		api.server = server;
	}
	if (strncmp(api.server, "https://", 8) != 0 || strlen(api.server) <= 8 || strchr(api.server + 8, '/')) {
		fprintf(stderr, "diagport: webhook certs: --api-server '%s' is not https://HOST[:PORT]\n", api.server);
		return 2;
	}
	if (access(api.ca_file, R_OK) != 0) {
		err_set(&em, DP_EIO, "cannot read the API server's CA file %s: %s", api.ca_file, strerror(errno));
		log_error("certificates not settled", LOG_STR("event", "exit"), LOG_STR("error", em.text));
		return 5;
	}
	if ((rc = certs_run(&c, &res, &em)) != 0) {
		log_error("certificates not settled", LOG_STR("event", "exit"), LOG_STR("error", em.text),
			  LOG_INT("status", certs_exit(rc)));
		return certs_exit(rc);
	}
	print_certs(&c, &res);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "diagport: webhook certs: cannot write the summary: %s\n", strerror(errno));
		return 5;
	}
	return 0;
}

int webhook_cli(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "review") == 0)
		return review(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "certs") == 0)
		return certs(argc - 1, argv + 1);
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	return serve(argc, argv);
}

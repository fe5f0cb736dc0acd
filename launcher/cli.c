/*
 * cli.c - `diagport launch [options] [-- CMD ARGS...]` and `diagport health`.
 *
 * Sidecar mode (no command): own the diagnostic port until SIGTERM/SIGINT.
 * Init mode (a command after --): also start the app with
 * DOTNET_DiagnosticPorts pointing at our socket (appended to any value it
 * already has), forward SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 to it,
 * reap orphans when we are PID 1, and exit with the app's status.
 *
 * The HTTP API (api.c) listens on --urls. Secure by default: without a token
 * the default URL is loopback only, and a non-loopback URL is refused unless
 * --no-auth says so explicitly. Settings come from a YAML/JSON file
 * (--config), then the environment (DIAGPORT_*, and dotnet-monitor's names
 * of the same settings, so the agent drops into an existing dotnet-monitor
 * sidecar manifest), then the flags (config.h). All are settled before the
 * first socket is bound; the sandbox is entered after the sockets exist.
 * The app's side of init mode is child.c; `diagport health` is health.c.
 */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

extern char **environ;
#include <fcntl.h>

#include "api.h"
#include "buf.h"
#include "child.h"
#include "config.h"
#include "launcher/rules/crules.h"
#include "launcher/capture/eproc.h"
#include "launcher/capture/dump.h"
#include "launcher/crashes/crashes.h"
#include "launcher/exceptions/exceptions.h"
#include "http/httpd.h"
#include "log.h"
#include "mem.h"
#include "launcher/metrics/metrics.h"
#include "launcher/runtime/port.h"
#include "sandbox.h"
#include "served.h"

#define DEFAULT_SOCKET "/diag/port"
#define MAX_TOKEN 4096
#define MIN_TOKEN 16 /* bytes: shorter ones are refused at start (issue 33) */
#define MAX_CONFIGS 8 /* --config files, and --config-dir directories */
#define TLS_CERT_SETTING "Kestrel:Certificates:Default:Path"   /* dotnet-monitor's name; also tlsCert */
#define TLS_KEY_SETTING "Kestrel:Certificates:Default:KeyPath" /* also tlsKey */

/* A setting from the environment that is not ours (dotnet-monitor's, for a feature this agent lacks). */
/* The first IGNORED_SAID ignored settings are said one a line; the rest are counted, said in one line once
 * every source is read (a manifest with thousands of them must not flood the log). */
#define IGNORED_SAID 32
#define CRASH_SHIP_WAIT_MS 60000 /* init mode: the most a crash's evidence may hold the exit back */
static unsigned ignored_said, ignored_more;

static void setting_ignored(const char *variable) /* or "KEY (FILE:LINE:COL)" from a file */
{
	if (ignored_said == IGNORED_SAID) {
		ignored_more++;
		return;
	}
	ignored_said++;
	log_warn("setting ignored", LOG_STR("event", "setting-ignored"), LOG_STR("variable", variable),
		 LOG_STR("reason", "not a setting of this agent"));
}

/* Why the agent cannot start (a setting, a socket): one error line, and the exit status. */
static int cannot_start(int status, const char *why)
{
	log_error("cannot start", LOG_STR("event", "exit"), LOG_STR("error", why));
	return status;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: diagport launch [--config FILE] [--config-dir DIR] [--socket PATH] [--urls URL[;URL...]]\n"
		   "                       [--workload-config FILE|DIR] [--dumps DIR]\n"
		   "                       [--auth-token-file FILE | --no-auth] [--dump-transport file|staged|fifo]\n"
		   "                       [--dumps-limit SIZE] [--connect-dir DIR] [--no-sandbox]\n"
		   "                       [--metrics-urls URL[;URL...]] [--metrics-interval SECONDS]\n"
		   "                       [--metrics-start-delay SECONDS] [--no-metrics] [--no-exceptions]\n"
		   "                       [--log-level LEVEL]\n"
		   "                       [--request-headers-timeout SECONDS] [--max-connections-per-peer N]\n"
		   "                       [--captures KIND[,KIND...]|all]\n"
		   "                       [-- COMMAND [ARGS...]]\n\n"
		   "Owns the .NET diagnostic port at PATH (default %s): every runtime that connects is\n"
		   "resumed at once and kept attached, and captures are served over HTTP on URLS\n"
		   "(default http://+:%d with a token or --no-auth, else http://127.0.0.1:%d). With a command,\n"
		   "also starts it with DOTNET_DiagnosticPorts pointing here, forwards signals, and exits\n"
		   "with its status.\n\n"
		   "Settings come from FILE (YAML or JSON; also DIAGPORT_CONFIG), then DIR (key-per-file, as\n"
		   "dotnet-monitor reads a mounted Secret: Egress__S3Storage__s3__BucketName; also\n"
		   "DIAGPORT_CONFIG_DIR; --config and --config-dir may each be given up to 8 times), then a\n"
		   "workload's own sources (its egress Secret, its rules ConfigMap), --workload-config, a file or\n"
		   "a key-per-file directory each, which may hold Egress, CollectionRules, CollectionRuleDefaults\n"
		   "and Templates only; then settings documents in DIAGPORT_SETTINGS, DIAGPORT_EGRESS_SETTINGS and\n"
		   "DIAGPORT_RULES (those two held as a workload's), then the environment\n"
		   "(DIAGPORT_SOCKET, DIAGPORT_URLS, DIAGPORT_DUMPS, DIAGPORT_AUTH_TOKEN(_FILE), ...; and\n"
		   "dotnet-monitor's DOTNETMONITOR_Urls, DOTNETMONITOR_DiagnosticPort__EndpointName,\n"
		   "DOTNETMONITOR_Storage__DumpTempFolder, DOTNETMONITOR_Egress__FileSystem__NAME__DirectoryPath),\n"
		   "then these flags; a later source wins. --connect-dir DIR also attaches runtimes by\n"
		   "their default sockets in DIR. CollectionRules (dotnet-monitor's collection rules) take\n"
		   "captures by themselves when a process misbehaves (docs/agent/collection-rules.md). Counters of every runtime are kept for /metrics (Prometheus,\n"
		   "no token, like dotnet-monitor's; also on --metrics-urls alone); --no-metrics turns that off.\n"
		   "Each runtime's first-chance exceptions are kept from the moment it attaches, the newest 1000\n"
		   "(exceptionsMaxCount) and 4Mi (exceptionsMaxBytes) at most, for /exceptions; --no-exceptions\n"
		   "turns that off.\n"
		   "The log is JSON lines on stderr (time, level, msg, ...); --log-level debug|info|warn|error.\n"
		   "A request's head must arrive within --request-headers-timeout (10 s); one address holds at\n"
		   "most --max-connections-per-peer connections (64); /healthz and /readyz have slots of their own.\n"
		   "--captures names the capture kinds served (dump, gcdump, trace, cpuprofile, stacks, metrics,\n"
		   "logs, env, exceptions; default all): another kind's routes answer 403.\n"
		   "An https:// URL is served with the certificate and key in the settings\n"
		   "Kestrel:Certificates:Default:Path and :KeyPath (PEM; :Password for an encrypted key), reloaded\n"
		   "when the files change, or with the chain and key as PEM text in DIAGPORT_TLS_PEM (tlsPem: an\n"
		   "ECS secret), read once; its port answers plain http for /healthz and /readyz only.\n"
		   "See docs/agent/README.md.\n",
		   DEFAULT_SOCKET, LAUNCH_DEFAULT_PORT, LAUNCH_DEFAULT_PORT);
}

/* The token from a file (a mounted Secret), trailing whitespace removed. NULL and a message on failure. */
static char *read_token(const char *file)
{
	struct err_msg em;
	struct buf b;
	int rc;

	buf_init(&b, MAX_TOKEN);
	rc = buf_read_path(&b, file, NULL, &em);
	while (rc == 0 && b.len && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == '\r' || b.data[b.len - 1] == ' '))
		b.data[--b.len] = '\0';
	if (rc != 0 || b.len == 0) {
		char why[1100];

		snprintf(why, sizeof(why), rc != 0 ? "the token file: %s" : "the token file %s is empty",
			 rc != 0 ? em.text : file);
		cannot_start(2, why);
		if (b.data)
			mem_wipe(b.data, b.len);
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b, NULL);
}

/* Flags that take a value, and the setting each one sets. */
static const struct {
	const char *flag, *key;
} value_flags[] = {
	{ "--socket", "socket" },
	{ "--urls", "urls" },
	{ "--dumps", "dumps" },
	{ "--auth-token-file", "authTokenFile" },
	{ "--dump-transport", "dumpTransport" },
	{ "--dumps-limit", "dumpsLimit" },
	{ "--connect-dir", "connectDir" },
	{ "--metrics-urls", "metricsUrls" },
	{ "--metrics-interval", "metricsInterval" },
	{ "--metrics-start-delay", "metricsStartDelay" },
	{ "--log-level", "logLevel" },
	{ "--request-headers-timeout", "requestHeadersTimeout" },
	{ "--max-connections-per-peer", "maxConnectionsPerPeer" },
	{ "--captures", "captures" },
};

static bool scoped_flag(const char *a)
{
	return strcmp(a, "--workload-config") == 0;
}

/*
 * Settings in order: the files (DIAGPORT_CONFIG, then each --config), the key-per-file
 * directories (DIAGPORT_CONFIG_DIR, then each --config-dir), the workload's scoped sources (each
 * --workload-config), the documents in DIAGPORT_SETTINGS, DIAGPORT_EGRESS_SETTINGS and DIAGPORT_RULES
 * (the last two held as a workload's), the environment, the flags; a later source wins. Sets *cmd to what follows "--". 0, or the
 * exit status (2) after a message.
 */
static int load_settings(int argc, char **argv, struct launch_config *c, char ***cmd)
{
	const char *files[MAX_CONFIGS], *dirs[MAX_CONFIGS];
	const char *scoped[MAX_CONFIGS];
	const char *doc = getenv("DIAGPORT_SETTINGS"), *rules = getenv("DIAGPORT_RULES");
	const char *egress_doc = getenv("DIAGPORT_EGRESS_SETTINGS");
	size_t nf = 0, nd = 0, ns = 0;
	struct err_msg em;
	int end = argc;

	const char *env_file = getenv("DIAGPORT_CONFIG"), *env_dir = getenv("DIAGPORT_CONFIG_DIR");

	if (env_file && *env_file)
		files[nf++] = env_file;
	if (env_dir && *env_dir)
		dirs[nd++] = env_dir;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			if (i + 1 == argc)
				return cannot_start(2, "nothing after --");
			*cmd = argv + i + 1;
			end = i;
			break;
		}
		if ((strcmp(argv[i], "--config") == 0 || strcmp(argv[i], "--config-dir") == 0) && i + 1 < argc) {
			bool dir = argv[i][8] == '-';

			if ((dir ? nd : nf) == MAX_CONFIGS)
				return cannot_start(2, dir ? "more than 8 --config-dir" : "more than 8 --config");
			if (dir)
				dirs[nd++] = argv[++i];
			else
				files[nf++] = argv[++i];
		} else if (scoped_flag(argv[i]) && i + 1 < argc) {
			if (ns == MAX_CONFIGS)
				return cannot_start(2, "more than 8 --workload-config");
			scoped[ns++] = argv[++i];
		}
	}
	/* the files, the key-per-file directories (a Secret, a ConfigMap of rules), a document in
	 * DIAGPORT_SETTINGS (an ECS secret) and one in DIAGPORT_RULES (an SSM parameter), the variables, the
	 * command line: each overrides the one before. dotnet-monitor's settings this agent lacks are said and
	 * skipped from every source (a copied settings.json has its Logging section) */
	c->warn = setting_ignored;
	for (size_t i = 0; i < nf; i++)
		if (config_load_file(c, files[i], &em) != 0)
			return cannot_start(2, em.text);
	for (size_t i = 0; i < nd; i++)
		if (config_load_dir(c, dirs[i], setting_ignored, &em) != 0)
			return cannot_start(2, em.text);
	/* the workload's own sources (its egress Secret, its rules ConfigMap), held to the workload's sections */
	for (size_t i = 0; i < ns; i++)
		if (config_load_scoped(c, CONFIG_WORKLOAD, scoped[i], NULL, NULL, setting_ignored, &em) != 0)
			return cannot_start(2, em.text);
	if (doc && *doc && config_load_text(c, doc, strlen(doc), "environment variable DIAGPORT_SETTINGS", &em) != 0)
		return cannot_start(2, em.text);
	if (egress_doc && *egress_doc &&
	    config_load_scoped(c, CONFIG_WORKLOAD, NULL, egress_doc, "environment variable DIAGPORT_EGRESS_SETTINGS",
			       NULL, &em) != 0)
		return cannot_start(2, em.text);
	if (rules && *rules &&
	    config_load_scoped(c, CONFIG_WORKLOAD, NULL, rules, "environment variable DIAGPORT_RULES", NULL, &em) != 0)
		return cannot_start(2, em.text);
	/* they may hold a store's keys: gone from the environment (and /proc/PID/environ) once read */
	if (doc)
		mem_wipe((char *)doc, strlen(doc));
	if (egress_doc)
		mem_wipe((char *)egress_doc, strlen(egress_doc));
	if (config_load_env(c, environ, setting_ignored, &em) != 0)
		return cannot_start(2, em.text);
	for (int i = 1; i < end && argv[i]; i++) {
		size_t k;

		for (k = 0; k < sizeof(value_flags) / sizeof(value_flags[0]); k++)
			if (strcmp(argv[i], value_flags[k].flag) == 0)
				break;
		if (k < sizeof(value_flags) / sizeof(value_flags[0]) && i + 1 < end) {
			if (config_set(c, value_flags[k].key, argv[i + 1], argv[i], &em) != 0)
				return cannot_start(2, em.text);
			i++;
		} else if ((strcmp(argv[i], "--config") == 0 || strcmp(argv[i], "--config-dir") == 0 ||
			    scoped_flag(argv[i])) && i + 1 < end) {
			i++; /* read above */
		} else if (strcmp(argv[i], "--no-sandbox") == 0) {
			c->no_sandbox = true;
		} else if (strcmp(argv[i], "--no-auth") == 0) {
			c->no_auth = true;
		} else if (strcmp(argv[i], "--no-metrics") == 0) {
			c->metrics_off = true;
		} else if (strcmp(argv[i], "--no-exceptions") == 0) {
			c->exceptions_off = true;
		} else {
			fprintf(stderr, "diagport: launch: %s '%s'\n",
				k < sizeof(value_flags) / sizeof(value_flags[0]) ? "no value after" : "unknown argument",
				argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (c->socket == NULL)
		c->socket = mem_strdup(DEFAULT_SOCKET);
	if (c->dumps == NULL)
		c->dumps = mem_strdup("/dumps");
	if (config_check(c, &em) != 0)
		return cannot_start(2, em.text);
	if (ignored_more)
		log_warn("settings ignored", LOG_STR("event", "setting-ignored"), LOG_UINT("more", ignored_more),
			 LOG_STR("reason", "more of dotnet-monitor's settings this agent does not have than are said "
					   "one a line"));
	log_set_level(c->log_level);
	return 0;
}

/* The token (from the file, else DIAGPORT_AUTH_TOKEN unless --no-auth) and the URLs. 0, or the exit status. */
static int settle_auth(struct launch_config *c, char **token)
{
	const char *env_token = getenv("DIAGPORT_AUTH_TOKEN");

	if (c->auth_token_file && c->no_auth)
		return cannot_start(2, "--auth-token-file and --no-auth contradict each other");
	if (c->auth_token_file) {
		if ((*token = read_token(c->auth_token_file)) == NULL)
			return 2;
	} else if (!c->no_auth && env_token && *env_token) {
		*token = mem_strdup(env_token); /* ECS injects a Secrets Manager secret this way */
	}
	if (env_token) /* not left readable in /proc/PID/environ */
		mem_wipe((char *)env_token, strlen(env_token));
	if (*token && strlen(*token) < MIN_TOKEN) { /* its length is not told either */
		char why[1200];

		snprintf(why, sizeof(why), "the token in %.1000s is shorter than %d bytes, the least this agent takes; "
			 "make one with: head -c 32 /dev/urandom | base64", c->auth_token_file ? c->auth_token_file :
			 "environment variable DIAGPORT_AUTH_TOKEN", MIN_TOKEN);
		mem_wipe(*token, strlen(*token));
		free(*token);
		*token = NULL;
		return cannot_start(2, why);
	}
	if (c->urls == NULL)
		c->urls = mem_printf("http://%s:%d", *token || c->no_auth ? "+" : "127.0.0.1", LAUNCH_DEFAULT_PORT);
	if (!*token && !c->no_auth && !httpd_urls_loopback_only(c->urls)) {
		char why[1024];

		snprintf(why, sizeof(why), "%s is reachable from the network, and no token is configured; give "
			 "--auth-token-file FILE, listen on loopback only, or turn authentication off explicitly with "
			 "--no-auth", c->urls);
		return cannot_start(2, why);
	}
	return 0;
}

/* The permission (--captures) a collection rule action needs; SERVED_KINDS for Execute, which captures nothing. */
static enum served_kind action_needs(enum crule_action_type t)
{
	switch (t) {
	case CRA_DUMP: return SERVED_DUMP;
	case CRA_GCDUMP: return SERVED_GCDUMP;
	case CRA_STACKS: return SERVED_STACKS;
	case CRA_EXCEPTIONS: return SERVED_EXCEPTIONS;
	case CRA_TRACE: return SERVED_TRACE;
	case CRA_LOGS: return SERVED_LOGS;
	case CRA_LIVEMETRICS: return SERVED_METRICS;
	case CRA_EXECUTE: return SERVED_KINDS;
	}
	return SERVED_KINDS;
}

/*
 * crule_set_keep's test: a rule with an action of a kind this agent does not
 * serve is not started at all (none of its actions runs), with a warning. Not
 * an error that stops the agent: the list may be the platform's ceiling and
 * the rules the app team's, and an agent that does not start would hold the
 * pod back (a native sidecar's startup probe).
 */
static bool rule_served(const struct crule *r, void *ctx)
{
	const unsigned *served = ctx;

	for (size_t i = 0; i < r->n_actions; i++) {
		enum served_kind k = action_needs(r->actions[i].type);
		char list[96], why[256];

		if (k == SERVED_KINDS || (*served & (1u << k)))
			continue;
		served_text(*served, list, sizeof(list));
		snprintf(why, sizeof(why), "this agent does not serve %s captures (captures: %s)", served_name(k), list);
		log_warn("collection rule not started", LOG_STR("event", "rule-refused"), LOG_STR("rule", r->name),
			 LOG_STR("action", r->actions[i].type_name), LOG_STR("reason", why));
		return false;
	}
	return true;
}

/* What /metrics collects: Metrics:IncludeDefaultProviders, Metrics:Providers and Metrics:Meters, checked. */
static int metrics_settings(const struct launch_config *c, struct metrics_selection *out)
{
	struct err_msg em;
	int rc = metrics_selection_settings(settings_get(c->tree, "Metrics"), !c->metrics_no_defaults, out, &em);

	if (rc != 0)
		return cannot_start(2, em.text);
	metrics_set_limits(c->metrics_max_histograms, c->metrics_max_time_series);
	return 0;
}

int launch_cli(int argc, char **argv)
{
	struct launch_config c = { 0 };
	char *token = NULL;
	struct httpd *h = NULL;
	struct api *api = NULL;
	struct metrics *metrics = NULL;
	struct exceptions *exc = NULL;
	struct httpd *mh = NULL;
	char **cmd = NULL;
	struct port_config cfg = { 0 };
	struct port *p = NULL;
	struct eproc *ep = NULL;
	struct crule_set rules = { 0 };
	struct metrics_selection shown = { 0 }; /* what /metrics collects */
	struct err_msg em;
	sigset_t old_mask, set;
	int rc;

	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		}
	/*
	 * Not dumpable, before any secret is read: no other process of this uid (the app's, which sees this one
	 * when the pod shares its process namespace for perf, or under `launch -- APP`) may read its memory,
	 * environment or files through /proc/PID (the token, the egress keys) or attach to it. The egress process
	 * inherits it; the app, exec'd, gets the kernel's default back. A process with CAP_SYS_PTRACE still can
	 * (docs/security.md).
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		log_warn("cannot make the agent non-dumpable", LOG_STR("error", strerror(errno)));
	if ((rc = load_settings(argc, argv, &c, &cmd)) != 0 || (rc = settle_auth(&c, &token)) != 0 ||
	    (rc = metrics_settings(&c, &shown)) != 0)
		goto out;
	{
		struct crule_env renv = { .egress = c.egress, .n_egress = c.n_egress, .sandbox = !c.no_sandbox,
					  .interval_s = c.metrics_interval_s ? c.metrics_interval_s : METRICS_DEFAULT_INTERVAL_S };

		unsigned served = c.captures_set ? c.captures : SERVED_ALL;

		if (crules_parse(&c, &renv, &rules, &em) != 0) {
			rc = cannot_start(2, em.text);
			goto out;
		}
		crule_set_keep(&rules, rule_served, &served);
		if (!(served & (1u << SERVED_METRICS)))
			c.metrics_off = true; /* /metrics is 403: no counters session for it (the rules may still want one) */
		if (!(served & (1u << SERVED_EXCEPTIONS)))
			c.exceptions_off = true; /* /exceptions is 403 (and a rule collecting them was dropped above) */
		if (c.exceptions_max_bytes > EXC_MAX_BYTES) {
			rc = cannot_start(2, "exceptionsMaxBytes: at most 256Mi per runtime");
			goto out;
		}
	}
	if (geteuid() == 0)
		log_warn("running as root", LOG_STR("event", "warning"),
			 LOG_STR("reason", "running as root: the agent needs no privilege; run it as a non-root user "
					   "(diagport inject uses the app's uid, else 1654)"));
	/* the egress process, forked while the agent has no thread yet: the stores' settings go with it */
	if ((rc = eproc_start(&c, !c.no_sandbox, &ep, &em)) != 0) {
		rc = cannot_start(rc == DP_EINVAL ? 2 : 1, em.text);
		goto out;
	}
	/* every binder has read its settings (the agent's, the stores' checks, metrics, the rules): what none
	 * read is a misspelling or a setting this agent does not have, refused rather than ignored */
	if (config_refuse_unread(&c, &em) != 0) {
		rc = cannot_start(2, em.text);
		goto out;
	}
	cfg.path = c.socket;
	cfg.connect_dir = c.connect_dir;
	child_signals(&set);
	/* SIGPIPE too, in every thread: a client or runtime that hangs up mid-write (sendfile has no
	 * MSG_NOSIGNAL) must give EPIPE, not kill the agent. Not waited for; the app gets the old mask. */
	sigaddset(&set, SIGPIPE);
	sigprocmask(SIG_BLOCK, &set, &old_mask);
	if (port_open(&cfg, &p, &em) != 0 || port_start(p, &em) != 0) {
		rc = cannot_start(1, em.text);
		goto out;
	}
	{
		struct api_config ac = { .port = p, .socket_path = c.socket, .dumps_dir = c.dumps, .token = token,
					 .dump_transport = c.dump_transport, .dumps_limit = c.dumps_limit,
					 .egress = c.egress, .n_egress = c.n_egress, .eproc = ep,
					 .metrics_interval_s = c.metrics_interval_s, .served = c.captures,
					 .served_set = c.captures_set };
		struct httpd_config hc = { .urls = c.urls, .max_body = API_MAX_BODY, .takes_body = api_takes_body,
					   .is_probe = api_is_probe, .admit = api_admit,
					   .head_timeout_s = c.head_timeout_s,
					   .max_per_peer = c.per_peer, .tls_cert = c.tls_cert, .tls_key = c.tls_key,
					   .tls_password = c.tls_password, .tls_cert_name = TLS_CERT_SETTING,
					   .tls_key_name = TLS_KEY_SETTING, .tls_pem = c.tls_pem };
		struct httpd_config mc = { .urls = c.metrics_urls, .head_timeout_s = c.head_timeout_s,
					   .max_per_peer = c.per_peer, .admit = api_metrics_admit, .tls_cert = c.tls_cert,
					   .tls_key = c.tls_key, .tls_password = c.tls_password,
					   .tls_cert_name = TLS_CERT_SETTING, .tls_key_name = TLS_KEY_SETTING,
					   .tls_pem = c.tls_pem };
		bool authenticated = token != NULL; /* without one, loopback only (settle_auth) or --no-auth */
		char *pem_name; /* for messages: where the PEM text came from (never the text), or where it would */

		if (!c.metrics_off || rules.n) { /* one counters session per runtime: /metrics, the rules, or both */
			struct metrics_selection needs = { 0 };
			struct trace_config extra = { 0 };
			bool aspnet = false;
			struct metrics_config mcf = { .port = p, .interval_s = c.metrics_interval_s,
						      .delay_s = c.metrics_delay_set ? c.metrics_delay_s : METRICS_DEFAULT_DELAY_S,
						      .store = !c.metrics_off, .selection = &shown, .extra = &needs };

			crules_metrics_needs(&rules, &needs, &aspnet);
			if (aspnet && aspnet_req_provider(&extra, &em) != 0) {
				metrics_selection_free(&needs);
				rc = cannot_start(2, em.text);
				goto out;
			}
			mcf.extra_providers = extra.p;
			mcf.n_extra_providers = extra.n;
			metrics = metrics_start(&mcf);
			metrics_selection_free(&needs);
			trace_config_free(&extra);
		}
		if (!c.exceptions_off) {
			struct exceptions_config xc = { .port = p, .max_count = c.exceptions_max_count,
							.max_bytes = c.exceptions_max_bytes };

			exc = exceptions_start(&xc);
			port_on_first(p, exceptions_on_first, exc); /* a runtime's history from its first instruction */
		}
		ac.exceptions = exc;
		ac.crashes_max_count = c.crashes_max_count;
		ac.crashes_max_bytes = c.crashes_max_bytes;
		for (size_t i = 0; c.crashes_egress && i < c.n_egress && !ac.crashes_egress; i++)
			if (strcasecmp(c.egress[i].name, c.crashes_egress) == 0)
				ac.crashes_egress = &c.egress[i];
		if (c.crashes_egress && !ac.crashes_egress) {
			char *why = mem_printf("Crashes:Egress: '%.64s' is not an egress provider of this agent's settings "
					       "(Egress:FileSystem:NAME, Egress:S3Storage:NAME, Egress:AzureBlobStorage:NAME)",
					       c.crashes_egress);

			rc = cannot_start(2, why);
			free(why);
			goto out;
		}
		ac.metrics = c.metrics_off ? NULL : metrics;
		ac.counters = metrics;
		ac.rules = &rules;
		api = api_new(&ac);
		mem_wipe(token, token ? strlen(token) : 0); /* the api has its copy */
		free(token);
		token = NULL;
		pem_name = mem_printf("tlsPem (%s)", c.tls_pem_where ? c.tls_pem_where : "DIAGPORT_TLS_PEM");
		hc.tls_pem_name = mc.tls_pem_name = pem_name;
		rc = httpd_start(&hc, api_handle, api, &h, &em);
		if (rc == 0 && c.metrics_urls)
			rc = httpd_start(&mc, api_metrics_handle, api, &mh, &em);
		free(pem_name);
		if (c.tls_pem) { /* the listeners' contexts hold the key now; the text is not needed again */
			mem_wipe(c.tls_pem, strlen(c.tls_pem));
			free(c.tls_pem);
			c.tls_pem = NULL;
		}
		if (rc != 0) {
			/* settings that do not hold (a URL, the certificate or key) are a usage error */
			rc = cannot_start(rc == DP_EINVAL ? 2 : 1, em.text);
			goto out;
		}
		{ /* the addresses bound, so a port 0 in --urls says which port it got */
			struct buf bound, mbound;
			char served[96];

			buf_init(&bound, 0);
			buf_init(&mbound, 0);
			httpd_bound_urls(h, &bound);
			httpd_bound_urls(mh, &mbound);
			served_text(c.captures_set ? c.captures : SERVED_ALL, served, sizeof(served));
			log_info("listening", LOG_STR("event", "listening"), LOG_STR("socket", c.socket),
				 LOG_STR("urls", bound.data), LOG_STR("metricsUrls", mbound.data),
				 LOG_BOOL("authentication", authenticated), LOG_STR("captures", served));
			buf_free(&bound);
			buf_free(&mbound);
		}
	}
	if (cmd) {
		struct child_opts co = { .socket = c.socket, .dumps_dir = c.dumps, .old = &old_mask,
					 .sandbox = !c.no_sandbox,
					 .crash_dump_type = c.crash_dump_type && strcasecmp(c.crash_dump_type, "Off") == 0 ? 0 :
							    dump_type(c.crash_dump_type ? c.crash_dump_type : "Mini") };
		pid_t app;
		int status;

		rc = child_run(cmd, &co, &app, &status);
		/* a crash's evidence shipped before the pod's restart policy takes the container */
		crashes_app_ended(api_crashes(api), (uint64_t)app, status, CRASH_SHIP_WAIT_MS);
	} else {
		sigset_t stop;

		if (!c.no_sandbox)
			sandbox_enter(SANDBOX_AGENT);
		sigemptyset(&stop);
		sigaddset(&stop, SIGTERM);
		sigaddset(&stop, SIGINT);
		while (sigwaitinfo(&stop, NULL) < 0)
			;
		rc = 0;
	}
out:
	httpd_free(mh);
	httpd_free(h);
	api_free(api);
	eproc_free(ep); /* after the captures that upload through it have ended */
	metrics_free(metrics); /* before the port: its sessions take connections from it */
	if (exc)
		port_on_first(p, NULL, NULL); /* no hook into a freed history */
	exceptions_free(exc);
	metrics_selection_free(&shown);
	port_free(p);
	crule_set_free(&rules);
	if (token) {
		mem_wipe(token, strlen(token));
		free(token);
	}
	config_free(&c);
	return rc;
}


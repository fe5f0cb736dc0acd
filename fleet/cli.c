/*
 * cli.c - `diagport ps` and `diagport capture KIND` (also `kubectl diagport
 * ...` when the binary is installed as kubectl-diagport): the arguments, the
 * targets (Kubernetes by default; ECS with --ecs-cluster; a static list
 * with --target or --targets-file), and the call into ps.c or run.c.
 *
 * A capture kind is one row of `kinds[]`: the agent's route, its formats
 * and their file extensions, whether it freezes the process, and its
 * default deadline. Options mirror the agent's query parameters (`--type`,
 * `--duration`, `--format`, ...) and `--param K=V` passes any other.
 */
#include "cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "call.h"
#include "fleet.h"
#include "mem.h"
#include "run.h"
#include "size.h"
#include "targets.h"

#define MAX_REFS 256
#define MAX_BODY ((size_t)64 * 1024)
#define CONFIRM_OVER 10
#define GIB ((uint64_t)1 << 30)

/* A format a kind can be captured in: the agent's spelling, an Accept header, the file extension. */
struct format {
	const char *name, *query, *accept, *ext;
};

struct kind {
	const char *name, *method, *path;
	bool freezes, per_process, takes_duration;
	long default_timeout_s;      /* beyond --duration */
	uint64_t default_max;        /* bytes per artifact unless --max-size says otherwise (0: only what the
					output disk can take, run.h keep_free) */
	const struct format *formats; /* the first is the default; NULL-named end */
	const char *help;
};

static const struct format dump_f[] = { { "dump", NULL, NULL, ".dmp" }, { 0 } };
static const struct format trace_f[] = { { "nettrace", NULL, NULL, ".nettrace" }, { 0 } };
static const struct format cpu_f[] = { { "speedscope", "format=speedscope", NULL, ".speedscope.json" },
				       { "folded", "format=folded", NULL, ".folded.txt" },
				       { "flamegraph", "format=flamegraph", NULL, ".svg" },
				       { "nettrace", NULL, NULL, ".nettrace" },
				       { "perfscript", "format=perfscript", NULL, ".perfscript.txt" }, /* with --param engine=perf */
				       { 0 } };
static const struct format stacks_f[] = { { "text", "format=text", NULL, ".txt" },
					  { "json", "format=json", NULL, ".json" },
					  { "speedscope", "format=speedscope", NULL, ".speedscope.json" },
					  { 0 } };
static const struct format gc_f[] = { { "gcdump", "format=gcdump", NULL, ".gcdump" }, /* dotnet-gcdump's file */
				      { "stats", "format=stats", "text/plain", ".gcdump.txt" },
				      { "json", "format=stats", "application/json", ".gcdump.json" },
				      { "nettrace", "format=nettrace", NULL, ".gcdump.nettrace" },
				      { 0 } };
static const struct format metrics_f[] = { { "prometheus", NULL, "text/plain", ".prom" }, { 0 } };
static const struct format logs_f[] = { { "ndjson", NULL, "application/x-ndjson", ".ndjson" },
					{ "json-seq", NULL, "application/json-seq", ".json-seq" },
					{ "text", NULL, "text/plain", ".log" },
					{ 0 } };

static const struct kind kinds[] = {
	{ "dump", "GET", "/dump", true, true, false, 1800, 0, dump_f, "a core dump (--type Mini|Full|WithHeap|Triage)" },
	{ "trace", "GET", "/trace", false, true, true, 300, 16 * GIB, trace_f,
	  "an EventPipe trace (--profile P[,P] or --providers FILE; --duration)" },
	{ "cpuprofile", "GET", "/trace?profile=Cpu", false, true, true, 300, 4 * GIB, cpu_f,
	  "a CPU profile (--format speedscope|folded|flamegraph|nettrace|perfscript; --duration; --param engine=perf "
	  "for native, runtime and kernel frames too)" },
	{ "stacks", "GET", "/stacks", false, true, false, 120, GIB / 16, stacks_f,
	  "every managed thread's stack, now (--format text|json|speedscope)" },
	{ "gcdump", "GET", "/gcdump", true, true, false, 600, 4 * GIB, gc_f,
	  "a GC heap snapshot (--format gcdump|stats|json|nettrace, --top N)" },
	{ "metrics", "GET", "/metrics", false, false, false, 60, GIB / 16, metrics_f, "a snapshot of the counters (Prometheus text)" },
	{ "logs", "GET", "/logs", false, true, true, 300, 16 * GIB, logs_f,
	  "what the app logs (--level, --duration; --format ndjson|json-seq|text)" },
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

struct args {
	/* targets */
	const char *kubeconfig, *context, *namespace_, *selector, *container;
	bool all_namespaces;
	const char *ecs_cluster, *ecs_service, *region, *profile;
	bool public_ip;
	const char *targets[MAX_REFS];
	size_t n_targets;
	const char *targets_file, *token_file;
	const char *cacert;  /* --cacert: https agents verified against it (else the system's store) */
	bool insecure_http;  /* --insecure-http: a token may go over plain http beyond loopback */
	const char *tls_name; /* --tls-server-name: the name https agents reached directly must bear */
	const char *refs[MAX_REFS + 1];
	size_t n_refs;
	unsigned parallel;
	long request_timeout_s;
	/* ps */
	const char *output;
	/* capture */
	const struct kind *kind;
	const char *type, *profile_names, *providers, *format, *level, *egress, *tags;
	long duration_s, timeout_s, top;
	uint64_t max_size;
	unsigned max_unavailable;
	bool yes;
	struct buf params;   /* "&k=v" for each --param */
};

enum {
	O_KUBECONFIG = 256, O_CONTEXT, O_ECS_CLUSTER, O_ECS_SERVICE, O_REGION, O_PROFILE_AWS, O_PUBLIC_IP, O_TARGET,
	O_TARGETS_FILE, O_TOKEN_FILE, O_PARALLEL, O_REQ_TIMEOUT, O_TYPE, O_TRACE_PROFILE, O_PROVIDERS, O_FORMAT,
	O_LEVEL, O_EGRESS, O_TAGS, O_DURATION, O_TIMEOUT, O_TOP, O_MAX_UNAVAILABLE, O_YES, O_PARAM, O_MAX_SIZE,
	O_CACERT, O_INSECURE_HTTP, O_TLS_NAME
};

static const struct option options[] = {
	{ "kubeconfig", required_argument, NULL, O_KUBECONFIG },
	{ "context", required_argument, NULL, O_CONTEXT },
	{ "namespace", required_argument, NULL, 'n' },
	{ "all-namespaces", no_argument, NULL, 'A' },
	{ "selector", required_argument, NULL, 'l' },
	{ "container", required_argument, NULL, 'c' },
	{ "ecs-cluster", required_argument, NULL, O_ECS_CLUSTER },
	{ "ecs-service", required_argument, NULL, O_ECS_SERVICE },
	{ "region", required_argument, NULL, O_REGION },
	{ "aws-profile", required_argument, NULL, O_PROFILE_AWS },
	{ "public-ip", no_argument, NULL, O_PUBLIC_IP },
	{ "target", required_argument, NULL, O_TARGET },
	{ "targets-file", required_argument, NULL, O_TARGETS_FILE },
	{ "token-file", required_argument, NULL, O_TOKEN_FILE },
	{ "parallel", required_argument, NULL, O_PARALLEL },
	{ "request-timeout", required_argument, NULL, O_REQ_TIMEOUT },
	{ "output", required_argument, NULL, 'o' },
	{ "type", required_argument, NULL, O_TYPE },
	{ "profile", required_argument, NULL, O_TRACE_PROFILE },
	{ "providers", required_argument, NULL, O_PROVIDERS },
	{ "format", required_argument, NULL, O_FORMAT },
	{ "level", required_argument, NULL, O_LEVEL },
	{ "egress", required_argument, NULL, O_EGRESS },
	{ "tags", required_argument, NULL, O_TAGS },
	{ "duration", required_argument, NULL, O_DURATION },
	{ "timeout", required_argument, NULL, O_TIMEOUT },
	{ "top", required_argument, NULL, O_TOP },
	{ "max-unavailable", required_argument, NULL, O_MAX_UNAVAILABLE },
	{ "yes", no_argument, NULL, O_YES },
	{ "param", required_argument, NULL, O_PARAM },
	{ "max-size", required_argument, NULL, O_MAX_SIZE },
	{ "cacert", required_argument, NULL, O_CACERT },
	{ "insecure-http", no_argument, NULL, O_INSECURE_HTTP },
	{ "tls-server-name", required_argument, NULL, O_TLS_NAME },
	{ "help", no_argument, NULL, 'h' },
	{ 0 }
};

static bool as_plugin;

void fleet_cli_as_kubectl_plugin(void)
{
	as_plugin = true;
}

static const char *prog(void)
{
	return as_plugin ? "kubectl diagport" : "diagport";
}

static void usage_targets(FILE *f)
{
	fprintf(f, "\ntargets (Kubernetes, the default: your kubeconfig, or the in-cluster service account):\n"
		   "  [REF...]                 pod/NAME (or NAME), deploy/NAME, sts/NAME, ds/NAME, rs/NAME, job/NAME\n"
		   "  -n, --namespace NS       -A, --all-namespaces     -l, --selector SELECTOR\n"
		   "  -c, --container NAME     only pods where this container is injected\n"
		   "  --kubeconfig FILE        --context NAME\n"
		   "targets (ECS, through the ECS API and the standard AWS credential chain):\n"
		   "  --ecs-cluster C [--ecs-service S] [--region R] [--aws-profile P] [--public-ip]\n"
		   "targets (static):\n"
		   "  --target URL             an agent's address, repeatable (http://10.0.3.17:52323)\n"
		   "  --targets-file FILE      one a line: URL [name=N] [workload=W] [token-file=F] [servername=S]\n"
		   "common:\n"
		   "  --token-file FILE        the token of agents named by --target, --targets-file or --ecs-cluster\n"
		   "                           (else $DIAGPORT_TOKEN); never sent to pods found through Kubernetes,\n"
		   "                           which get their own pod's token Secret only\n"
		   "  --cacert FILE            https agents' certificates verified against this CA bundle (else the\n"
		   "                           system's store)\n"
		   "  --tls-server-name NAME   the name https agents reached by address (--target, ECS) must bear in\n"
		   "                           their certificate (else the URL's host), as kubectl's tls-server-name\n"
		   "  --insecure-http          send a token over plain http:// beyond loopback (refused without it)\n"
		   "  --request-timeout S      each API call while finding targets (30)\n");
}

static void usage_ps(FILE *f)
{
	fprintf(f, "usage: %s ps [TARGETS] [-o table|wide|json|yaml]\n\n"
		   "The .NET processes behind the targets: workload, target, container, pid, runtime version,\n"
		   "uptime (since the runtime attached to the agent), the injected mode; for a target without a\n"
		   "callable agent, why not.\n\noptions:\n"
		   "  -o, --output FORMAT      table (default), wide, json or yaml\n"
		   "  --parallel N             agents asked at once (4)\n", prog());
	usage_targets(f);
	fprintf(f, "\nexit codes: 0 listed, 2 usage, 3 targets not found (API error, bad kubeconfig), 4 access "
		   "denied, 130 interrupted. docs/fleet.md.\n");
}

static void usage_capture(FILE *f)
{
	fprintf(f, "usage: %s capture KIND [TARGETS] [OPTIONS]\n\nKIND:\n", prog());
	for (size_t i = 0; i < N_KINDS; i++)
		fprintf(f, "  %-11s %s\n", kinds[i].name, kinds[i].help);
	fprintf(f, "\noptions:\n"
		   "  -o, --output DIR         where the files and manifest.json go (default ./diagport-KIND-TIME/)\n"
		   "  --egress NAME            each agent writes to its egress provider NAME; the manifest lists\n"
		   "                           where (printed, unless -o names a directory for it)\n"
		   "  --parallel N             captures at once (4)\n"
		   "  --max-unavailable N      dumps and GC snapshots freeze the process: at most N pods of one\n"
		   "                           workload at a time (1)\n"
		   "  --yes                    needed for more than %d targets when not asked on a terminal\n"
		   "  --type T  --duration S  --profile P  --providers FILE  --format F  --level L  --top N\n"
		   "  --tags T  --param KEY=VALUE (any other query parameter of the agent's route)\n"
		   "  --timeout S              each capture (default: the duration plus the kind's allowance)\n"
		   "  --max-size SIZE          each artifact at most. Default: 16Gi trace and logs, 4Gi cpuprofile\n"
		   "                           and gcdump, 64Mi stacks and metrics, no fixed size for a dump; and\n"
		   "                           without --max-size no capture may leave the output disk with less\n"
		   "                           than 5%% of its size free (at most 1Gi), checked as bytes arrive\n",
		CONFIRM_OVER);
	usage_targets(f);
	fprintf(f, "\nexit codes: 0 all succeeded, 1 some failed (see the summary and manifest.json), 2 usage,\n"
		   "3 targets not found, 4 access denied, 5 nothing to capture, 130 cancelled (Ctrl-C).\n"
		   "docs/fleet.md.\n");
}

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s %s: ", prog(), cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(`%s %s --help` lists the options)\n", prog(), cmd);
	return FLEET_EXIT_USAGE;
}

static bool number(const char *s, long lo, long hi, long *out)
{
	char *e;
	long v;

	errno = 0;
	v = strtol(s, &e, 10);
	if (errno || e == s || *e || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static void add_param(struct buf *b, const char *k, const char *v)
{
	buf_printf(b, "&%s=", k);
	buf_pct_encode(b, v, strlen(v), false);
}

static int parse(int argc, char **argv, const char *cmd, struct args *a)
{
	int c;
	long v;

	a->parallel = 4;
	a->max_unavailable = 1;
	a->request_timeout_s = 30;
	a->duration_s = -2; /* not given */
	a->top = -1;
	buf_init(&a->params, (size_t)64 * 1024);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "n:Al:c:o:h", options, NULL)) != -1) {
		switch (c) {
		case O_KUBECONFIG: a->kubeconfig = optarg; break;
		case O_CONTEXT: a->context = optarg; break;
		case 'n': a->namespace_ = optarg; break;
		case 'A': a->all_namespaces = true; break;
		case 'l': a->selector = optarg; break;
		case 'c': a->container = optarg; break;
		case O_ECS_CLUSTER: a->ecs_cluster = optarg; break;
		case O_ECS_SERVICE: a->ecs_service = optarg; break;
		case O_REGION: a->region = optarg; break;
		case O_PROFILE_AWS: a->profile = optarg; break;
		case O_PUBLIC_IP: a->public_ip = true; break;
		case O_TARGET:
			if (a->n_targets == MAX_REFS)
				return usage_error(cmd, "more than %s --target options; use --targets-file", "256");
			a->targets[a->n_targets++] = optarg;
			break;
		case O_TARGETS_FILE: a->targets_file = optarg; break;
		case O_TOKEN_FILE: a->token_file = optarg; break;
		case O_CACERT: a->cacert = optarg; break;
		case O_INSECURE_HTTP: a->insecure_http = true; break;
		case O_TLS_NAME: a->tls_name = optarg; break;
		case O_PARALLEL:
			if (!number(optarg, 1, 256, &v))
				return usage_error(cmd, "--parallel '%s' is not a number from 1 to 256", optarg);
			a->parallel = (unsigned)v;
			break;
		case O_REQ_TIMEOUT:
			if (!number(optarg, 1, 3600, &v))
				return usage_error(cmd, "--request-timeout '%s' is not a number of seconds from 1 to 3600", optarg);
			a->request_timeout_s = v;
			break;
		case 'o': a->output = optarg; break;
		case O_TYPE: a->type = optarg; break;
		case O_TRACE_PROFILE: a->profile_names = optarg; break;
		case O_PROVIDERS: a->providers = optarg; break;
		case O_FORMAT: a->format = optarg; break;
		case O_LEVEL: a->level = optarg; break;
		case O_EGRESS: a->egress = optarg; break;
		case O_TAGS: a->tags = optarg; break;
		case O_DURATION:
			if (!number(optarg, 1, 86400, &v))
				return usage_error(cmd, "--duration '%s' is not a number of seconds from 1 to 86400", optarg);
			a->duration_s = v;
			break;
		case O_TIMEOUT:
			if (!number(optarg, 1, 604800, &v))
				return usage_error(cmd, "--timeout '%s' is not a number of seconds", optarg);
			a->timeout_s = v;
			break;
		case O_TOP:
			if (!number(optarg, 1, 1000000, &v))
				return usage_error(cmd, "--top '%s' is not a positive number", optarg);
			a->top = v;
			break;
		case O_MAX_UNAVAILABLE:
			if (!number(optarg, 1, 100000, &v))
				return usage_error(cmd, "--max-unavailable '%s' is not a positive number", optarg);
			a->max_unavailable = (unsigned)v;
			break;
		case O_YES: a->yes = true; break;
		case O_MAX_SIZE:
			if (size_parse(optarg, &a->max_size) != 0 || a->max_size == 0)
				return usage_error(cmd, "--max-size '%s' is not a size (4096, 100M, 512Mi, 2Gi)", optarg);
			break;
		case O_PARAM: {
			const char *eq = strchr(optarg, '=');
			char *k;

			if (eq == NULL || eq == optarg || strcspn(optarg, "&?#= ") != (size_t)(eq - optarg))
				return usage_error(cmd, "--param '%s' is not KEY=VALUE", optarg);
			k = mem_strndup(optarg, (size_t)(eq - optarg));
			add_param(&a->params, k, eq + 1);
			free(k);
			break;
		}
		case 'h': return -1;
		default:
			return usage_error(cmd, "unknown option or missing value: '%s'", argv[optind - 1]);
		}
	}
	for (int i = optind; i < argc; i++) {
		if (a->n_refs == MAX_REFS)
			return usage_error(cmd, "more than %s names", "256");
		a->refs[a->n_refs++] = argv[i];
	}
	if ((a->n_targets || a->targets_file) && (a->ecs_cluster || a->n_refs))
		return usage_error(cmd, "%s", "static targets (--target, --targets-file) go alone, without ECS or Kubernetes names");
	if (a->ecs_cluster && (a->n_refs || a->namespace_ || a->selector || a->all_namespaces))
		return usage_error(cmd, "%s", "--ecs-cluster goes without Kubernetes names and flags");
	if (a->ecs_service && !a->ecs_cluster)
		return usage_error(cmd, "%s", "--ecs-service needs --ecs-cluster");
	if (a->all_namespaces && a->namespace_)
		return usage_error(cmd, "%s", "-A and -n contradict each other");
	return 0;
}

/* Whether url's host is a loopback address (127.0.0.0/8, ::1, localhost): a token sent there stays on this machine. */
static bool loopback_url(const char *url)
{
	const char *h = strstr(url, "://");
	char host[256];
	unsigned char addr[16];
	size_t n;

	if (h == NULL)
		return false;
	h += 3;
	n = strcspn(h, "/?#");
	if (memchr(h, '@', n) != NULL)
		return false; /* user information: "http://[::1]@host/" goes to host */
	if (*h == '[') {
		n = strcspn(++h, "]");
		if (n >= sizeof(host))
			return false;
		memcpy(host, h, n);
		host[n] = '\0';
		return inet_pton(AF_INET6, host, addr) == 1 && IN6_IS_ADDR_LOOPBACK((struct in6_addr *)addr);
	}
	n = strcspn(h, ":/");
	if (n >= sizeof(host))
		return false;
	memcpy(host, h, n);
	host[n] = '\0';
	if (strcasecmp(host, "localhost") == 0)
		return true;
	return inet_pton(AF_INET, host, addr) == 1 && addr[0] == 127;
}

/*
 * A token in clear text across a network is a token given away: refused for an agent reached by a plain
 * http:// URL outside loopback unless --insecure-http says so (a port-forward's stream is the API server's
 * TLS connection, so Kubernetes agents are not concerned). Then --cacert for every https call. 0, or exit 2.
 */
static int transport_check(const char *cmd, const struct args *a, struct fleet_set *s)
{
	if (a->tls_name && !fleet_dns_name_ok(a->tls_name)) {
		fprintf(stderr, "%s %s: --tls-server-name %.100s: not a DNS name (letters, digits, '-' and '.')\n", prog(),
			cmd, a->tls_name);
		return FLEET_EXIT_USAGE;
	}
	for (size_t i = 0; a->tls_name && i < s->n; i++) /* a targets file's servername= wins */
		if (!s->v[i].dialer && !s->v[i].tls_name && s->v[i].url && strncmp(s->v[i].url, "https://", 8) == 0)
			s->v[i].tls_name = mem_strdup(a->tls_name);
	for (size_t i = 0; !a->insecure_http && i < s->n; i++) {
		const struct fleet_agent *ag = &s->v[i];

		if (ag->token && !ag->why_not && !ag->dialer && ag->url && strncmp(ag->url, "http://", 7) == 0 &&
		    !loopback_url(ag->url)) {
			fprintf(stderr, "%s %s: %s is plain http beyond this machine: its token would cross the network "
				"in clear text; serve the agent on https:// (then --cacert FILE) or give --insecure-http\n",
				prog(), cmd, ag->url);
			return FLEET_EXIT_USAGE;
		}
	}
	if (a->cacert && access(a->cacert, R_OK) != 0) {
		fprintf(stderr, "%s %s: --cacert %s: %s\n", prog(), cmd, a->cacert, strerror(errno));
		return FLEET_EXIT_USAGE;
	}
	fleet_call_set_cafile(a->cacert);
	return 0;
}

/*
 * Find the targets. 0, or an exit code (2, 3 or 4) after saying why.
 *
 * A token given here (--token-file, $DIAGPORT_TOKEN) goes only to agents the
 * user named: --target, a targets file, the tasks of --ecs-cluster. An agent
 * found through Kubernetes gets its own pod's token Secret or nothing: anyone
 * who may create a pod can make one look injected, and it would receive the
 * token and could use it on every agent that shares it.
 */
static int discover(const char *cmd, struct args *a, bool for_capture, struct fleet_set *s)
{
	struct err_msg em;
	char *token = NULL;
	const char *env = getenv("DIAGPORT_TOKEN");
	bool kube = !a->n_targets && !a->targets_file && !a->ecs_cluster;
	int rc = 0;

	if (kube && a->token_file)
		return usage_error(cmd, "--token-file goes with --target, --targets-file or --ecs-cluster: an agent found "
				   "through Kubernetes gets only its own pod's token Secret (any pod can be made to look "
				   "injected, and would receive the token)");
	if (kube && env && *env)
		fprintf(stderr, "%s %s: warning: $DIAGPORT_TOKEN is not sent to pods found through Kubernetes; each "
			"agent gets only its own pod's token Secret\n", prog(), cmd);
	if (a->token_file && (token = fleet_read_token(a->token_file, &em)) == NULL) {
		fprintf(stderr, "%s %s: --token-file %s\n", prog(), cmd, em.text);
		return FLEET_EXIT_USAGE;
	}
	if (!kube && !token && env && *env)
		token = mem_strdup(env);
	if (a->n_targets || a->targets_file) {
		for (size_t i = 0; rc == 0 && i < a->n_targets; i++)
			rc = fleet_targets_add_url(s, a->targets[i], token, &em);
		if (rc == 0 && a->targets_file)
			rc = fleet_targets_add_file(s, a->targets_file, token, &em);
	} else if (a->ecs_cluster) {
		struct fleet_ecs_opts o = { .cluster = a->ecs_cluster, .service = a->ecs_service, .region = a->region,
					    .profile = a->profile, .public_ip = a->public_ip,
					    .timeout_ms = a->request_timeout_s * 1000 };

		rc = fleet_ecs_discover(&o, s, &em);
	} else {
		struct fleet_kube_opts o = { .kubeconfig = a->kubeconfig, .context = a->context,
					     .namespace_ = a->namespace_, .all_namespaces = a->all_namespaces,
					     .selector = a->selector, .refs = a->n_refs ? a->refs : NULL,
					     .container = a->container, .for_capture = for_capture,
					     .timeout_ms = a->request_timeout_s * 1000 };

		rc = fleet_kube_discover(&o, s, &em);
	}
	for (size_t i = 0; rc == 0 && token && a->ecs_cluster && i < s->n; i++) { /* ECS agents without their own */
		struct fleet_agent *ag = &s->v[i];

		if (ag->token)
			continue;
		ag->token = mem_strdup(token);
		if (ag->why_not && strncmp(ag->why_not, "the agent needs a token", 23) == 0 && ag->url) {
			free(ag->why_not); /* its own could not be read; the one given may serve */
			ag->why_not = NULL;
		}
	}
	if (token) {
		mem_wipe(token, strlen(token));
		free(token);
	}
	if (rc != 0) {
		fleet_safe_text(em.text);
		fprintf(stderr, "%s %s: %s\n", prog(), cmd, em.text);
		return rc == DP_EAUTH ? FLEET_EXIT_DENIED : rc == DP_EINVAL && (a->n_targets || a->targets_file)
									  ? FLEET_EXIT_USAGE : FLEET_EXIT_DISCOVERY;
	}
	if (s->caller == NULL) { /* who we say we are, where the platform did not tell us */
		char host[256] = "";
		const char *user = getenv("USER");

		gethostname(host, sizeof(host) - 1);
		s->caller = mem_printf("%s@%s", user && *user ? user : "unknown", host[0] ? host : "unknown");
	}
	fleet_set_safe(s);
	fleet_set_sort(s);
	return 0;
}

int fleet_ps_cli(int argc, char **argv)
{
	struct args a = { 0 };
	struct fleet_set s = { 0 };
	int rc = parse(argc, argv, "ps", &a);

	if (rc < 0) {
		usage_ps(stdout);
		rc = 0;
		goto out;
	}
	if (rc != 0)
		goto out;
	if (a.output == NULL)
		a.output = "table";
	if (strcmp(a.output, "table") != 0 && strcmp(a.output, "wide") != 0 && strcmp(a.output, "json") != 0 &&
	    strcmp(a.output, "yaml") != 0) {
		rc = usage_error("ps", "-o '%s' is not table, wide, json or yaml", a.output);
		goto out;
	}
	if ((rc = discover("ps", &a, false, &s)) == 0 && (rc = transport_check("ps", &a, &s)) == 0) {
		fleet_signals_install();
		rc = fleet_ps(&s, a.output, a.parallel);
	}
out:
	fleet_set_free(&s);
	buf_free(&a.params);
	return rc;
}

static const struct format *find_format(const struct kind *k, const char *name)
{
	if (name == NULL)
		return &k->formats[0];
	for (const struct format *f = k->formats; f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

static const char *const dump_types[] = { "Mini", "Full", "WithHeap", "Triage", NULL };

static bool one_of(const char *v, const char *const *list)
{
	for (size_t i = 0; list[i]; i++)
		if (strcasecmp(v, list[i]) == 0)
			return true;
	return false;
}

/* The route with its query for a, and what else the capture needs. 0, or an exit code. */
static int build_capture(struct args *a, struct fleet_capture *c, struct buf *route, struct buf *body)
{
	const struct kind *k = a->kind;
	const struct format *f = find_format(k, a->format);
	static const char *const levels[] = { "Trace", "Debug", "Information", "Warning", "Error", "Critical", NULL };
	long duration = a->duration_s > 0 ? a->duration_s : 30;

	if (f == NULL) {
		struct buf names;

		buf_init(&names, 1024);
		for (size_t i = 0; k->formats && k->formats[i].name; i++)
			buf_printf(&names, "%s%s", i ? ", " : "", k->formats[i].name);
		fprintf(stderr, "%s capture %s: --format '%s' is not one of %s\n", prog(), k->name, a->format, names.data);
		buf_free(&names);
		return FLEET_EXIT_USAGE;
	}
	if (a->type && strcmp(k->name, "dump") != 0)
		return usage_error("capture", "--type is for dump, not %s", k->name);
	if (a->type && !one_of(a->type, dump_types))
		return usage_error("capture", "--type '%s' is not Mini, Full, WithHeap or Triage", a->type);
	if ((a->profile_names || a->providers) && strcmp(k->name, "trace") != 0)
		return usage_error("capture", "--profile and --providers are for trace, not %s", k->name);
	if (a->profile_names && a->providers)
		return usage_error("capture", "%s", "--profile and --providers contradict each other; give one");
	if (a->level && strcmp(k->name, "logs") != 0)
		return usage_error("capture", "--level is for logs, not %s", k->name);
	if (a->level && !one_of(a->level, levels))
		return usage_error("capture", "--level '%s' is not Trace, Debug, Information, Warning, Error or Critical",
				   a->level);
	if (a->duration_s != -2 && !k->takes_duration)
		return usage_error("capture", "--duration is for trace, cpuprofile and logs, not %s", k->name);
	if (a->top >= 0 && strcmp(k->name, "gcdump") != 0)
		return usage_error("capture", "--top is for gcdump, not %s", k->name);
	buf_init(route, (size_t)64 * 1024);
	buf_puts(route, k->path);
	if (f->query)
		buf_printf(route, "%s%s", strchr(route->data, '?') ? "&" : "?", f->query);
	if (a->type)
		add_param(route, "type", a->type);
	if (a->profile_names)
		add_param(route, "profile", a->profile_names);
	if (k->takes_duration)
		buf_printf(route, "&durationSeconds=%ld", duration);
	if (a->level)
		add_param(route, "level", a->level);
	if (a->top >= 0)
		buf_printf(route, "&top=%ld", a->top);
	if (a->tags)
		add_param(route, "tags", a->tags);
	if (a->params.len)
		buf_append(route, a->params.data, a->params.len);
	if (!strchr(route->data, '?')) { /* the first parameter opens the query */
		char *amp = strchr(route->data, '&');

		if (amp)
			*amp = '?';
	}
	buf_init(body, MAX_BODY);
	if (a->providers) {
		struct err_msg em;

		if (buf_read_path(body, a->providers, NULL, &em) != 0) {
			fprintf(stderr, "%s capture: --providers %s\n", prog(), em.text);
			return FLEET_EXIT_USAGE;
		}
	}
	c->kind = k->name;
	c->method = a->providers ? "POST" : k->method;
	c->route = route->data;
	c->accept = f->accept;
	c->body = a->providers ? body->data : NULL;
	c->body_len = body->len;
	c->ext = f->ext;
	c->freezes = k->freezes;
	c->per_process = k->per_process;
	c->egress = a->egress;
	c->max_bytes = a->max_size ? a->max_size : k->default_max;
	c->keep_free = a->max_size == 0;
	c->duration_ms = k->takes_duration ? duration * 1000 : 0;
	c->timeout_ms = (a->timeout_s ? a->timeout_s : k->default_timeout_s + (k->takes_duration ? duration : 0)) * 1000;
	return 0;
}

/* More than CONFIRM_OVER agents: --yes, or a "y" on a terminal. */
static bool confirmed(const struct args *a, const struct fleet_set *s)
{
	size_t ready = 0;
	char line[16];

	for (size_t i = 0; i < s->n; i++)
		ready += s->v[i].why_not == NULL;
	if (ready <= CONFIRM_OVER || a->yes)
		return true;
	if (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO)) {
		fprintf(stderr, "%s capture: %zu targets; more than %d need --yes\n", prog(), ready, CONFIRM_OVER);
		return false;
	}
	fprintf(stderr, "Capture %s from %zu targets? [y/N] ", a->kind->name, ready);
	return fgets(line, sizeof(line), stdin) && (line[0] == 'y' || line[0] == 'Y');
}

/*
 * The output directory: made (0700) when missing, else it must be a
 * directory of ours that we can write in: a shared one (another user's, or
 * /tmp itself) could hold planted names. *created says we made it.
 */
static int output_dir(struct args *a, char **dir, bool *created)
{
	char t[20];
	time_t now = time(NULL);
	struct tm tm;
	struct stat st;

	if (a->output == NULL && a->egress) {
		*dir = NULL;
		return 0;
	}
	if (a->output) {
		*dir = mem_strdup(a->output);
	} else {
		gmtime_r(&now, &tm);
		strftime(t, sizeof(t), "%Y%m%dT%H%M%SZ", &tm);
		*dir = mem_printf("diagport-%s-%s", a->kind->name, t);
	}
	*created = mkdir(*dir, 0700) == 0;
	if (!*created && errno != EEXIST) {
		fprintf(stderr, "%s capture: cannot create %s: %s\n", prog(), *dir, strerror(errno));
		return FLEET_EXIT_USAGE;
	}
	if (lstat(*dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "%s capture: %s is not a directory\n", prog(), *dir);
		return FLEET_EXIT_USAGE;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 0022) != 0) {
		fprintf(stderr, "%s capture: %s is %s; give a directory of your own (it is made when missing)\n",
			prog(), *dir, st.st_uid != geteuid() ? "another user's" : "writable by others");
		return FLEET_EXIT_USAGE;
	}
	if (access(*dir, W_OK | X_OK) != 0) {
		fprintf(stderr, "%s capture: %s is not a directory we can write in: %s\n", prog(), *dir, strerror(errno));
		return FLEET_EXIT_USAGE;
	}
	return 0;
}

int fleet_capture_cli(int argc, char **argv)
{
	struct args a = { 0 };
	struct fleet_set s = { 0 };
	struct fleet_capture c = { 0 };
	struct buf route = { 0 }, body = { 0 };
	char *dir = NULL;
	bool created = false;
	int rc;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage_capture(argc < 2 ? stderr : stdout);
		return argc < 2 ? FLEET_EXIT_USAGE : 0;
	}
	for (size_t i = 0; i < N_KINDS; i++)
		if (strcmp(argv[1], kinds[i].name) == 0)
			a.kind = &kinds[i];
	if (a.kind == NULL)
		return usage_error("capture", "'%s' is not a kind: dump, trace, cpuprofile, stacks, gcdump, metrics or logs",
				   argv[1]);
	if ((rc = parse(argc - 1, argv + 1, "capture", &a)) != 0) {
		if (rc < 0) {
			usage_capture(stdout);
			rc = 0;
		}
		goto out;
	}
	if ((rc = build_capture(&a, &c, &route, &body)) != 0)
		goto out;
	/* until the captures start, Ctrl-C ends the process at once: nothing has been written */
	if ((rc = discover("capture", &a, true, &s)) != 0 || (rc = transport_check("capture", &a, &s)) != 0)
		goto out;
	if (s.n == 0) {
		fprintf(stderr, "%s capture: no targets found\n", prog());
		rc = FLEET_EXIT_NOTHING;
		goto out;
	}
	if (!confirmed(&a, &s)) {
		rc = FLEET_EXIT_USAGE;
		goto out;
	}
	if ((rc = output_dir(&a, &dir, &created)) != 0)
		goto out;
	fleet_signals_install();
	{
		struct fleet_run_opts o = { .parallel = a.parallel, .max_unavailable = a.max_unavailable, .out_dir = dir,
					    .tty = isatty(STDERR_FILENO) == 1 };

		rc = fleet_run_capture(&s, &c, &o);
	}
out:
	if (dir && created && rc != FLEET_EXIT_OK && rc != FLEET_EXIT_SOME && rc != FLEET_EXIT_CANCELLED)
		rmdir(dir); /* the directory we made, empty: nothing ran */
	free(dir);
	fleet_set_free(&s);
	buf_free(&route);
	buf_free(&body);
	buf_free(&a.params);
	return rc;
}

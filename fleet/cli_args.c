/*
 * cli_args.c - the command line of `diagport ps` and `diagport capture KIND`
 * (cli_args.h): the capture kinds, one row each (the agent's route, its
 * formats and their file extensions, whether it freezes the process, its
 * default deadline and size), the flags, the usage texts, and the parse that
 * checks each value as it reads it. What the commands then do is cli.c's.
 */
#include "cli_args.h"
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"
#include "mem.h"
#include "run.h"
#include "size.h"

#define GIB ((uint64_t)1 << 30)


static const struct format dump_f[] = { { "dump", NULL, NULL, ".dmp" }, { 0 } };
static const struct format trace_f[] = { { "nettrace", NULL, NULL, ".nettrace" }, { 0 } };
static const struct format cpu_f[] = { { "speedscope", "format=speedscope", NULL, ".speedscope.json" },
				       { "folded", "format=folded", NULL, ".folded.txt" },
				       { "flamegraph", "format=flamegraph", NULL, ".svg" },
				       { "pprof", "format=pprof", NULL, ".pb.gz" }, /* go tool pprof's */
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
				      { "pprof", "format=pprof", NULL, ".gcdump.pb.gz" },
				      { "nettrace", "format=nettrace", NULL, ".gcdump.nettrace" },
				      { 0 } };
static const struct format metrics_f[] = { { "prometheus", NULL, "text/plain", ".prom" }, { 0 } };
static const struct format logs_f[] = { { "ndjson", NULL, "application/x-ndjson", ".ndjson" },
					{ "json-seq", NULL, "application/json-seq", ".json-seq" },
					{ "text", NULL, "text/plain", ".log" },
					{ 0 } };
static const struct format exc_f[] = { { "ndjson", NULL, "application/x-ndjson", ".ndjson" },
				       { "json-seq", NULL, "application/json-seq", ".json-seq" },
				       { "text", NULL, "text/plain", ".txt" },
				       { 0 } };

static const struct kind kinds[] = {
	{ "dump", "GET", "/dump", true, true, false, 1800, 0, dump_f, "a core dump (--type Mini|Full|WithHeap|Triage)" },
	{ "trace", "GET", "/trace", false, true, true, 300, 16 * GIB, trace_f,
	  "an EventPipe trace (--profile P[,P] or --providers FILE; --duration)" },
	{ "cpuprofile", "GET", "/trace?profile=Cpu", false, true, true, 300, 4 * GIB, cpu_f,
	  "a CPU profile (--format speedscope|folded|flamegraph|pprof|nettrace|perfscript; --duration; --param engine=perf "
	  "for native, runtime and kernel frames too)" },
	{ "stacks", "GET", "/stacks", false, true, false, 120, GIB / 16, stacks_f,
	  "every managed thread's stack, now (--format text|json|speedscope)" },
	{ "gcdump", "GET", "/gcdump", true, true, false, 600, 4 * GIB, gc_f,
	  "a GC heap snapshot (--format gcdump|stats|json|pprof|nettrace, --top N)" },
	{ "metrics", "GET", "/metrics", false, false, false, 60, GIB / 16, metrics_f, "a snapshot of the counters (Prometheus text)" },
	{ "logs", "GET", "/logs", false, true, true, 300, 16 * GIB, logs_f,
	  "what the app logs (--level, --duration; --format ndjson|json-seq|text)" },
	{ "exceptions", "GET", "/exceptions", false, true, false, 120, GIB / 16, exc_f,
	  "the exceptions the app threw, from the agent's history (--format ndjson|json-seq|text; --filter)" },
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

void fleet_cli_kind_names(struct buf *b)
{
	for (size_t i = 0; i < N_KINDS; i++)
		buf_printf(b, "%s%s", i == 0 ? "" : i + 1 == N_KINDS ? " or " : ", ", kinds[i].name);
}

const struct kind *fleet_cli_kind(const char *name)
{
	for (size_t i = 0; i < N_KINDS; i++)
		if (strcmp(name, kinds[i].name) == 0)
			return &kinds[i];
	return NULL;
}

enum {
	O_KUBECONFIG = 256, O_CONTEXT, O_ECS_CLUSTER, O_ECS_SERVICE, O_REGION, O_PROFILE_AWS, O_PUBLIC_IP, O_TARGET,
	O_TARGETS_FILE, O_TOKEN_FILE, O_PARALLEL, O_REQ_TIMEOUT, O_TYPE, O_TRACE_PROFILE, O_PROVIDERS, O_FORMAT,
	O_LEVEL, O_EGRESS, O_TAGS, O_DURATION, O_TIMEOUT, O_TOP, O_MAX_UNAVAILABLE, O_YES, O_PARAM, O_MAX_SIZE,
	O_CACERT, O_INSECURE_HTTP, O_TLS_NAME, O_FILTER, O_PORT
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
	{ "filter", required_argument, NULL, O_FILTER },
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
	{ "port", required_argument, NULL, O_PORT },
	{ "help", no_argument, NULL, 'h' },
	{ 0 }
};

static bool as_plugin;

void fleet_cli_as_kubectl_plugin(void)
{
	as_plugin = true;
}

const char *fleet_cli_prog(void)
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

void fleet_cli_usage_ps(FILE *f)
{
	fprintf(f, "usage: %s ps [TARGETS] [-o table|wide|json|yaml]\n\n"
		   "The .NET processes behind the targets: workload, target, container, pid, runtime version,\n"
		   "uptime (since the runtime attached to the agent), the injected mode; for a target without a\n"
		   "callable agent, why not. CRASHES and LAST CRASH are the target's (its pod's, its task's): the\n"
		   "crashes its agent recorded and how long ago the last was, that one's exception type (or signal);\n"
		   "'-' where the agent does not give them (it does not serve exceptions, or is older). -o json and\n"
		   "-o yaml carry the crash records whole.\n\noptions:\n"
		   "  -o, --output FORMAT      table (default), wide, json or yaml\n"
		   "  --parallel N             agents asked at once (4)\n", fleet_cli_prog());
	usage_targets(f);
	fprintf(f, "\nexit codes: 0 listed, 2 usage, 3 targets not found (API error, bad kubeconfig), 4 access "
		   "denied, 130 interrupted. docs/fleet.md.\n");
}

void fleet_cli_usage_ui(FILE *f)
{
	fprintf(f, "usage: %s ui [TARGETS] [--port N] [-o DIR]\n\n"
		   "A web page on 127.0.0.1 for the processes behind the targets: their live counters, recent\n"
		   "exceptions and crashes; CPU profiles, stacks, GC heap snapshots, dumps, traces and exceptions\n"
		   "taken with a button; CPU profiles and stacks as flame graphs, two of them as one diff, two GC\n"
		   "heap snapshots as a table of what grew. It prints the URL to open, with a secret only this\n"
		   "URL carries; the page talks to the agents through this process, with your credentials.\n\n"
		   "options:\n"
		   "  --port N                 the port on 127.0.0.1 (default: any free one)\n"
		   "  -o, --output DIR         the artifacts go here and stay (default: a private directory,\n"
		   "                           removed when the UI stops)\n"
		   "  --parallel N             agents asked at once when the list is refreshed (4)\n",
		fleet_cli_prog());
	usage_targets(f);
	fprintf(f, "\nexit codes: 0 stopped (Ctrl-C), 2 usage (or the port is taken), 3 targets not found, 4 access "
		   "denied. docs/ui.md.\n");
}

void fleet_cli_usage_capture(FILE *f)
{
	fprintf(f, "usage: %s capture KIND [TARGETS] [OPTIONS]\n\nKIND:\n", fleet_cli_prog());
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
		   "  --filter JSON|FILE       exceptions: dotnet-monitor's filters, {\"include\": [...], \"exclude\":\n"
		   "                           [...]} of exceptionType, typeName, methodName, moduleName (sent as\n"
		   "                           POST /exceptions); a value that does not start with '{' is a file\n"
		   "  --timeout S              each capture (default: the duration plus the kind's allowance)\n"
		   "  --max-size SIZE          each artifact at most. Default: 16Gi trace and logs, 4Gi cpuprofile\n"
		   "                           and gcdump, 64Mi stacks, metrics and exceptions, no fixed size for a\n"
		   "                           dump; and\n"
		   "                           without --max-size no capture may leave the output disk with less\n"
		   "                           than 5%% of its size free (at most 1Gi), checked as bytes arrive\n",
		CONFIRM_OVER);
	usage_targets(f);
	fprintf(f, "\nexit codes: 0 all succeeded, 1 some failed (see the summary and manifest.json), 2 usage,\n"
		   "3 targets not found, 4 access denied, 5 nothing to capture, 130 cancelled (Ctrl-C).\n"
		   "docs/fleet.md.\n");
}

int fleet_cli_usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s %s: ", fleet_cli_prog(), cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n(`%s %s --help` lists the options)\n", fleet_cli_prog(), cmd);
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

void fleet_cli_add_param(struct buf *b, const char *k, const char *v)
{
	buf_printf(b, "&%s=", k);
	buf_pct_encode(b, v, strlen(v), false);
}

int fleet_cli_parse(int argc, char **argv, const char *cmd, struct args *a)
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
				return fleet_cli_usage_error(cmd, "more than %s --target options; use --targets-file", "256");
			a->targets[a->n_targets++] = optarg;
			break;
		case O_TARGETS_FILE: a->targets_file = optarg; break;
		case O_TOKEN_FILE: a->token_file = optarg; break;
		case O_CACERT: a->cacert = optarg; break;
		case O_INSECURE_HTTP: a->insecure_http = true; break;
		case O_TLS_NAME: a->tls_name = optarg; break;
		case O_PARALLEL:
			if (!number(optarg, 1, 256, &v))
				return fleet_cli_usage_error(cmd, "--parallel '%s' is not a number from 1 to 256", optarg);
			a->parallel = (unsigned)v;
			break;
		case O_REQ_TIMEOUT:
			if (!number(optarg, 1, 3600, &v))
				return fleet_cli_usage_error(cmd, "--request-timeout '%s' is not a number of seconds from 1 to 3600", optarg);
			a->request_timeout_s = v;
			break;
		case 'o': a->output = optarg; break;
		case O_TYPE: a->type = optarg; break;
		case O_TRACE_PROFILE: a->profile_names = optarg; break;
		case O_PROVIDERS: a->providers = optarg; break;
		case O_FILTER: a->filter = optarg; break;
		case O_FORMAT: a->format = optarg; break;
		case O_LEVEL: a->level = optarg; break;
		case O_EGRESS: a->egress = optarg; break;
		case O_TAGS: a->tags = optarg; break;
		case O_DURATION:
			if (!number(optarg, 1, 86400, &v))
				return fleet_cli_usage_error(cmd, "--duration '%s' is not a number of seconds from 1 to 86400", optarg);
			a->duration_s = v;
			break;
		case O_TIMEOUT:
			if (!number(optarg, 1, 604800, &v))
				return fleet_cli_usage_error(cmd, "--timeout '%s' is not a number of seconds", optarg);
			a->timeout_s = v;
			break;
		case O_TOP:
			if (!number(optarg, 1, 1000000, &v))
				return fleet_cli_usage_error(cmd, "--top '%s' is not a positive number", optarg);
			a->top = v;
			break;
		case O_MAX_UNAVAILABLE:
			if (!number(optarg, 1, 100000, &v))
				return fleet_cli_usage_error(cmd, "--max-unavailable '%s' is not a positive number", optarg);
			a->max_unavailable = (unsigned)v;
			break;
		case O_YES: a->yes = true; break;
		case O_PORT:
			if (!number(optarg, 0, 65535, &v))
				return fleet_cli_usage_error(cmd, "--port '%s' is not a port number (0: any free one)", optarg);
			a->port = (int)v;
			break;
		case O_MAX_SIZE:
			if (size_parse(optarg, &a->max_size) != 0 || a->max_size == 0)
				return fleet_cli_usage_error(cmd, "--max-size '%s' is not a size (4096, 100M, 512Mi, 2Gi)", optarg);
			break;
		case O_PARAM: {
			const char *eq = strchr(optarg, '=');
			char *k;

			if (eq == NULL || eq == optarg || strcspn(optarg, "&?#= ") != (size_t)(eq - optarg))
				return fleet_cli_usage_error(cmd, "--param '%s' is not KEY=VALUE", optarg);
			k = mem_strndup(optarg, (size_t)(eq - optarg));
			fleet_cli_add_param(&a->params, k, eq + 1);
			free(k);
			break;
		}
		case 'h': return -1;
		default:
			return fleet_cli_usage_error(cmd, "unknown option or missing value: '%s'", argv[optind - 1]);
		}
	}
	for (int i = optind; i < argc; i++) {
		if (a->n_refs == MAX_REFS)
			return fleet_cli_usage_error(cmd, "more than %s names", "256");
		a->refs[a->n_refs++] = argv[i];
	}
	if ((a->n_targets || a->targets_file) && (a->ecs_cluster || a->n_refs))
		return fleet_cli_usage_error(cmd, "%s",
					     "static targets (--target, --targets-file) go alone, without ECS or Kubernetes names");
	if (a->ecs_cluster && (a->n_refs || a->namespace_ || a->selector || a->all_namespaces))
		return fleet_cli_usage_error(cmd, "%s", "--ecs-cluster goes without Kubernetes names and flags");
	if (a->ecs_service && !a->ecs_cluster)
		return fleet_cli_usage_error(cmd, "%s", "--ecs-service needs --ecs-cluster");
	if (a->all_namespaces && a->namespace_)
		return fleet_cli_usage_error(cmd, "%s", "-A and -n contradict each other");
	return 0;
}

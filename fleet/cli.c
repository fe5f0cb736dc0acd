/*
 * cli.c - `diagport ps` and `diagport capture KIND` (also `kubectl diagport
 * ...` when the binary is installed as kubectl-diagport): the checks on the
 * arguments, the targets (Kubernetes by default; ECS with --ecs-cluster; a
 * static list with --target or --targets-file), and the call into ps.c or
 * run.c.
 *
 * The arguments are cli_args.c's: a capture kind is one row of its
 * `kinds[]` (the agent's route, its formats and their file extensions,
 * whether it freezes the process, and its default deadline); options mirror
 * the agent's query parameters (`--type`, `--duration`, `--format`, ...) and
 * `--param K=V` passes any other.
 */
#include "cli.h"
#include "cli_args.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
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
#include "fleet/ui/ui.h"

#define MAX_BODY ((size_t)64 * 1024)

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
		fprintf(stderr, "%s %s: --tls-server-name %.100s: not a DNS name (letters, digits, '-' and '.')\n", fleet_cli_prog(),
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
				fleet_cli_prog(), cmd, ag->url);
			return FLEET_EXIT_USAGE;
		}
	}
	if (a->cacert && access(a->cacert, R_OK) != 0) {
		fprintf(stderr, "%s %s: --cacert %s: %s\n", fleet_cli_prog(), cmd, a->cacert, strerror(errno));
		return FLEET_EXIT_USAGE;
	}
	fleet_call_set_cafile(a->cacert);
	return 0;
}

/*
 * Find the targets, then check how each is reached (transport_check). 0, or an exit code (2, 3 or 4) after
 * saying why.
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
		return fleet_cli_usage_error(cmd, "--token-file goes with --target, --targets-file or --ecs-cluster: an agent found "
				   "through Kubernetes gets only its own pod's token Secret (any pod can be made to look "
				   "injected, and would receive the token)");
	if (kube && env && *env)
		fprintf(stderr, "%s %s: warning: $DIAGPORT_TOKEN is not sent to pods found through Kubernetes; each "
			"agent gets only its own pod's token Secret\n", fleet_cli_prog(), cmd);
	if (a->token_file && (token = fleet_read_token(a->token_file, &em)) == NULL) {
		fprintf(stderr, "%s %s: --token-file %s\n", fleet_cli_prog(), cmd, em.text);
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
		fprintf(stderr, "%s %s: %s\n", fleet_cli_prog(), cmd, em.text);
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
	return transport_check(cmd, a, s);
}

/* The UI finds its targets again as it found them first: the same arguments, the same checks. */
static int ui_discover(void *ctx, struct fleet_set *out, struct err_msg *em)
{
	struct args *a = ctx;
	int rc = discover("ui", a, true, out);

	return rc == 0 ? 0 : err_set(em, DP_EREMOTE, "finding the targets failed (exit code %d, said above)", rc);
}

int fleet_ui_cli(int argc, char **argv)
{
	struct args a = { 0 };
	struct fleet_set s = { 0 };
	int rc = fleet_cli_parse(argc, argv, "ui", &a);

	if (rc < 0) {
		fleet_cli_usage_ui(stdout);
		rc = 0;
		goto out;
	}
	if (rc != 0)
		goto out;
	if ((rc = discover("ui", &a, true, &s)) == 0) {
		struct ui_opts o = { .port = a.port, .parallel = a.parallel, .out_dir = a.output,
				     .discover = ui_discover, .discover_ctx = &a };

		fleet_signals_install();
		rc = ui_run(&o, &s);
	}
out:
	fleet_set_free(&s);
	buf_free(&a.params);
	return rc;
}

int fleet_ps_cli(int argc, char **argv)
{
	struct args a = { 0 };
	struct fleet_set s = { 0 };
	int rc = fleet_cli_parse(argc, argv, "ps", &a);

	if (rc < 0) {
		fleet_cli_usage_ps(stdout);
		rc = 0;
		goto out;
	}
	if (rc != 0)
		goto out;
	if (a.output == NULL)
		a.output = "table";
	if (strcmp(a.output, "table") != 0 && strcmp(a.output, "wide") != 0 && strcmp(a.output, "json") != 0 &&
	    strcmp(a.output, "yaml") != 0) {
		rc = fleet_cli_usage_error("ps", "-o '%s' is not table, wide, json or yaml", a.output);
		goto out;
	}
	if ((rc = discover("ps", &a, false, &s)) == 0) {
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

/*
 * --filter's value into body: the JSON itself when it starts with '{', else
 * the file it names. It must be a JSON object; what its members mean is the
 * agent's to check (one answer per agent then says what is wrong). 0, or -1
 * after a message.
 */
static int filter_body(const char *v, struct buf *body)
{
	struct err_msg em;
	json_error_t je;
	json_t *o;

	if (v[0] == '{') {
		if (buf_puts(body, v) != 0) {
			fprintf(stderr, "%s capture: --filter is longer than %zu bytes\n", fleet_cli_prog(), MAX_BODY);
			return -1;
		}
	} else if (buf_read_path(body, v, NULL, &em) != 0) {
		fprintf(stderr, "%s capture: --filter %s\n", fleet_cli_prog(), em.text);
		return -1;
	}
	o = json_loadb(body->data ? body->data : "", body->len, 0, &je);
	if (!json_is_object(o)) {
		fprintf(stderr, "%s capture: --filter is not a JSON object (%s), such as {\"include\": "
				"[{\"exceptionType\": \"System.TimeoutException\"}]}\n",
			fleet_cli_prog(), o ? "another JSON value" : je.text);
		json_decref(o);
		return -1;
	}
	json_decref(o);
	return 0;
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
		fprintf(stderr, "%s capture %s: --format '%s' is not one of %s\n", fleet_cli_prog(), k->name, a->format, names.data);
		buf_free(&names);
		return FLEET_EXIT_USAGE;
	}
	if (a->type && strcmp(k->name, "dump") != 0)
		return fleet_cli_usage_error("capture", "--type is for dump, not %s", k->name);
	if (a->type && !one_of(a->type, dump_types))
		return fleet_cli_usage_error("capture", "--type '%s' is not Mini, Full, WithHeap or Triage", a->type);
	if ((a->profile_names || a->providers) && strcmp(k->name, "trace") != 0)
		return fleet_cli_usage_error("capture", "--profile and --providers are for trace, not %s", k->name);
	if (a->profile_names && a->providers)
		return fleet_cli_usage_error("capture", "%s", "--profile and --providers contradict each other; give one");
	if (a->level && strcmp(k->name, "logs") != 0)
		return fleet_cli_usage_error("capture", "--level is for logs, not %s", k->name);
	if (a->level && !one_of(a->level, levels))
		return fleet_cli_usage_error("capture", "--level '%s' is not Trace, Debug, Information, Warning, Error or Critical",
				   a->level);
	if (a->duration_s != -2 && !k->takes_duration)
		return fleet_cli_usage_error("capture", "--duration is for trace, cpuprofile and logs, not %s", k->name);
	if (a->top >= 0 && strcmp(k->name, "gcdump") != 0)
		return fleet_cli_usage_error("capture", "--top is for gcdump, not %s", k->name);
	if (a->filter && strcmp(k->name, "exceptions") != 0)
		return fleet_cli_usage_error("capture", "--filter is for exceptions, not %s", k->name);
	buf_init(route, (size_t)64 * 1024);
	buf_puts(route, k->path);
	if (f->query)
		buf_printf(route, "%s%s", strchr(route->data, '?') ? "&" : "?", f->query);
	if (a->type)
		fleet_cli_add_param(route, "type", a->type);
	if (a->profile_names)
		fleet_cli_add_param(route, "profile", a->profile_names);
	if (k->takes_duration)
		buf_printf(route, "&durationSeconds=%ld", duration);
	if (a->level)
		fleet_cli_add_param(route, "level", a->level);
	if (a->top >= 0)
		buf_printf(route, "&top=%ld", a->top);
	if (a->tags)
		fleet_cli_add_param(route, "tags", a->tags);
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
			fprintf(stderr, "%s capture: --providers %s\n", fleet_cli_prog(), em.text);
			return FLEET_EXIT_USAGE;
		}
	}
	if (a->filter && filter_body(a->filter, body) != 0)
		return FLEET_EXIT_USAGE;
	c->kind = k->name;
	c->method = a->providers || a->filter ? "POST" : k->method;
	c->route = route->data;
	c->accept = f->accept;
	c->body = a->providers || a->filter ? body->data : NULL;
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
		fprintf(stderr, "%s capture: %zu targets; more than %d need --yes\n", fleet_cli_prog(), ready, CONFIRM_OVER);
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
		fprintf(stderr, "%s capture: cannot create %s: %s\n", fleet_cli_prog(), *dir, strerror(errno));
		return FLEET_EXIT_USAGE;
	}
	if (lstat(*dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "%s capture: %s is not a directory\n", fleet_cli_prog(), *dir);
		return FLEET_EXIT_USAGE;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 0022) != 0) {
		fprintf(stderr, "%s capture: %s is %s; give a directory of your own (it is made when missing)\n",
			fleet_cli_prog(), *dir, st.st_uid != geteuid() ? "another user's" : "writable by others");
		return FLEET_EXIT_USAGE;
	}
	if (access(*dir, W_OK | X_OK) != 0) {
		fprintf(stderr, "%s capture: %s is not a directory we can write in: %s\n", fleet_cli_prog(), *dir, strerror(errno));
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
		fleet_cli_usage_capture(argc < 2 ? stderr : stdout);
		return argc < 2 ? FLEET_EXIT_USAGE : 0;
	}
	a.kind = fleet_cli_kind(argv[1]);
	if (a.kind == NULL) {
		struct buf names;

		buf_init(&names, 1024);
		fleet_cli_kind_names(&names);
		rc = fleet_cli_usage_error("capture", "'%s' is not a kind: %s", argv[1], names.data);
		buf_free(&names);
		return rc;
	}
	if ((rc = fleet_cli_parse(argc - 1, argv + 1, "capture", &a)) != 0) {
		if (rc < 0) {
			fleet_cli_usage_capture(stdout);
			rc = 0;
		}
		goto out;
	}
	if ((rc = build_capture(&a, &c, &route, &body)) != 0)
		goto out;
	/* until the captures start, Ctrl-C ends the process at once: nothing has been written */
	if ((rc = discover("capture", &a, true, &s)) != 0)
		goto out;
	if (s.n == 0) {
		fprintf(stderr, "%s capture: no targets found\n", fleet_cli_prog());
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

/*
 * api.c - the agent's HTTP API (api.h): one table of routes, each a row of
 * method, path, handler, authentication and the kind of capture whose limit
 * it runs under, looked up for every request as OpenSSH's monitor looks up
 * its requests. /healthz, /readyz and /metrics are open (dotnet-monitor's
 * /metrics is too); everything else needs the token when there is one.
 *
 * The capture routes (/dump, /trace, /livemetrics, /logs, /stacks,
 * /gcdump, /exceptions) are one handler: the request becomes a capture
 * (capture.h) and capture_run takes it to its end. The others answer from the runtime table
 * (/processes, /process, /runtimes, /info), from one command to the runtime
 * (/env, /perfmap: proc.h), or from the operations list (/operations: ops.h).
 * Every JSON answer validates against dotnet-monitor's OpenAPI document
 * (tests/integration/openapi.sh); diagport's own fields live on its own
 * routes (/runtimes) or headers, never in a body the document describes.
 */
#include "api.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "authfail.h"
#include "launcher/capture/capture.h"
#include "launcher/capture/egress.h"
#include "launcher/capture/eproc.h"
#include "clock.h"
#include "launcher/crashes/crashes.h"
#include "launcher/rules/crules.h"
#include "launcher/capture/dump.h"
#include "mem.h"
#include "launcher/capture/ops.h"
#include "launcher/runtime/proc.h"
#include "served.h"
#include "launcher/runtime/target.h"
#include "utf8.h"

#define KEEP_OPERATIONS 100
#define MAX_CALLER 256 /* X-Diagport-Caller, logged with every capture */

struct api {
	struct port *port;
	char *socket_path, *token;
	struct metrics *metrics; /* borrowed; NULL = /metrics turned off */
	struct ops *ops;
	struct captures *captures;
	struct capture_env env;
	struct eproc *eproc; /* borrowed; NULL = no store configured */
	struct crules *rules; /* NULL = no collection rules */
	struct crashes *crashes; /* the crashes watched */
	struct metrics *counters; /* borrowed: the sessions rules listens to */
	unsigned served;       /* the capture kinds served (served.h) */
	char served_text[96];  /* the same as "stacks,metrics", for refusals */
	pthread_mutex_t fails_mu;
	struct authfail *fails; /* refused tokens per address */
};

struct api *api_new(const struct api_config *cfg)
{
	struct api *a = mem_zalloc(sizeof(*a));
	struct captures_config cc = { .port = cfg->port, .dumps_dir = cfg->dumps_dir, .dumps_limit = cfg->dumps_limit,
				      .eproc = cfg->eproc, .exceptions = cfg->exceptions };

	a->port = cfg->port;
	a->socket_path = mem_strdup(cfg->socket_path);
	a->token = cfg->token ? mem_strdup(cfg->token) : NULL;
	a->metrics = cfg->metrics;
	a->served = cfg->served_set ? cfg->served : SERVED_ALL;
	served_text(a->served, a->served_text, sizeof(a->served_text));
	pthread_mutex_init(&a->fails_mu, NULL);
	a->fails = authfail_new();
	a->ops = ops_new(KEEP_OPERATIONS);
	cc.ops = a->ops;
	a->captures = captures_new(&cc);
	a->env = (struct capture_env){
		.port = cfg->port,
		.egress = cfg->egress,
		.n_egress = cfg->n_egress,
		.dump_transport = cfg->dump_transport ? dump_transport(cfg->dump_transport) : DUMP_VIA_FILE,
		.metrics_interval_s = cfg->metrics_interval_s ? cfg->metrics_interval_s : METRICS_DEFAULT_INTERVAL_S,
		.exceptions = cfg->exceptions != NULL,
	};
	for (size_t i = 0; i < cfg->n_egress; i++)
		if (cfg->egress[i].type == NULL)
			egress_fs_clean(&cfg->egress[i]);
	a->eproc = cfg->eproc;
	{
		struct crules_config rc = { .port = cfg->port, .captures = a->captures, .ops = a->ops, .set = cfg->rules,
					    .interval_s = a->env.metrics_interval_s, .state_dir = cfg->dumps_dir };

		if (cfg->rules && (a->rules = crules_start(&rc)) != NULL) {
			a->counters = cfg->counters;
			metrics_listen(a->counters, crules_reading, crules_event, a->rules);
		}
	}
	{
		struct crashes_config xc = { .port = cfg->port, .dir = cfg->dumps_dir, .captures = a->captures,
					     .ops = a->ops, .exceptions = cfg->exceptions, .egress = cfg->crashes_egress,
					     .max_count = cfg->crashes_max_count, .max_bytes = cfg->crashes_max_bytes,
					     .op_needs = 1u << SERVED_EXCEPTIONS, .dumps_limit = cfg->dumps_limit };

		a->crashes = crashes_start(&xc);
	}
	return a;
}

struct crashes *api_crashes(struct api *a)
{
	return a ? a->crashes : NULL;
}

void api_free(struct api *a)
{
	if (a == NULL)
		return;
	metrics_listen(a->counters, NULL, NULL, NULL);
	crules_free(a->rules); /* its action lists stop waiting; their operations are cancelled below */
	crashes_free(a->crashes); /* a shipment under way is cancelled: its files stay for the next start */
	ops_free(a->ops); /* cancels running captures and waits for them */
	captures_free(a->captures);
	if (a->token) {
		mem_wipe(a->token, strlen(a->token));
		free(a->token);
	}
	free(a->socket_path);
	authfail_free(a->fails);
	pthread_mutex_destroy(&a->fails_mu);
	free(a);
}

/* Constant-time comparison of the presented token with ours. */
static bool token_ok(const struct api *a, const char *auth)
{
	const char *t;
	size_t n, m;
	unsigned char diff;

	if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0)
		return false;
	t = auth + 7;
	n = strlen(t);
	m = strlen(a->token);
	diff = (unsigned char)(n != m);
	for (size_t i = 0; i < m; i++)
		diff |= (unsigned char)(a->token[i] ^ (i < n ? t[i] : 0));
	return diff == 0;
}

/* ---- routes ---- */

struct route;
typedef void (*route_fn)(struct api *a, struct httpd_req *r, const struct route *rt);

struct route {
	const char *method;
	const char *path;         /* exact, or a prefix when it ends in '/' ("/operations/": one operation) */
	route_fn handler;
	enum capture_kind kind;   /* a capture route: the kind (its limit); else CAPTURE_KINDS */
	enum served_kind served;  /* the permission it needs (--captures); SERVED_KINDS: none beyond the token */
	bool open;                /* no token needed */
	bool body;                /* takes a POST body (httpd.h's takes_body) */
};

/* The runtime the request's selectors name, or false with the 400 sent. */
static bool choose(struct api *a, struct httpd_req *r, struct port_runtime *out)
{
	struct target_sel sel = { httpd_query(r, "pid"), httpd_query(r, "uid"), httpd_query(r, "name") };
	struct capture_problem p = { .status = 400, .title = "Bad Request" };
	int rc = target_choose(a->port, &sel, out, &p.em);

	if (rc == 0)
		return true;
	p.field = rc == DP_EINVAL ? "pid" : NULL;
	capture_send_problem(r, &p);
	return false;
}

static void route_health(struct api *a, struct httpd_req *r, const struct route *rt)
{
	static const char gone[] = "Unhealthy: the egress process has exited";

	if (a->eproc && !eproc_alive(a->eproc)) {
		httpd_send(r, 503, "text/plain", gone, sizeof(gone) - 1);
		return;
	}
	httpd_send(r, 200, "text/plain", "Healthy", 7);
}

static void route_metrics(struct api *a, struct httpd_req *r, const struct route *rt)
{
	api_metrics(a->metrics, r);
}

/*
 * /info's capabilities, dotnet-monitor 9.1's (name, enabled): its five first,
 * each as diagport serves it (exceptions: not yet, issue 35 item 1;
 * parameters: never, it needs code loaded into the app; call_stacks: /stacks;
 * metrics: /metrics answers, the kind served and metrics on; http_egress:
 * artifacts are streamed over HTTP), then one per capture kind of --captures
 * that dotnet-monitor has no name for, enabled when served.
 */
static json_t *capabilities(const struct api *a)
{
	json_t *l = json_array();
	bool stacks = a->served & (1u << SERVED_STACKS);
	bool metrics = (a->served & (1u << SERVED_METRICS)) && a->metrics;
	bool exceptions = (a->served & (1u << SERVED_EXCEPTIONS)) && a->env.exceptions;

	json_array_append_new(l, json_pack("{s:s, s:b}", "name", "exceptions", "enabled", exceptions));
	json_array_append_new(l, json_pack("{s:s, s:b}", "name", "parameters", "enabled", false));
	json_array_append_new(l, json_pack("{s:s, s:b}", "name", "call_stacks", "enabled", stacks));
	json_array_append_new(l, json_pack("{s:s, s:b}", "name", "metrics", "enabled", metrics));
	json_array_append_new(l, json_pack("{s:s, s:b}", "name", "http_egress", "enabled", true));
	for (int k = 0; k < SERVED_KINDS; k++)
		if (k != SERVED_METRICS && k != SERVED_EXCEPTIONS) /* dotnet-monitor's own names above */
			json_array_append_new(l, json_pack("{s:s, s:b}", "name", served_name(k), "enabled",
							   (a->served & (1u << k)) != 0));
	return l;
}

static void route_info(struct api *a, struct httpd_req *r, const struct route *rt)
{
	httpd_send_json(r, 200, json_pack("{s:s, s:n, s:s, s:s, s:o}", "version", DP_VERSION, "runtimeVersion",
					  "diagnosticPortMode", "Listen", "diagnosticPortName", a->socket_path,
					  "capabilities", capabilities(a)));
}

/* The crashes the agent has seen (crashes.h): diagport's own route. */
static void route_crashes(struct api *a, struct httpd_req *r, const struct route *rt)
{
	httpd_send_json(r, 200, crashes_json(a->crashes));
}

static void route_processes(struct api *a, struct httpd_req *r, const struct route *rt)
{
	struct port_runtime *l;
	size_t n = port_list(a->port, &l);
	json_t *arr = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, target_identifier(&l[i], n == 1));
	port_list_free(l, n);
	httpd_send_json(r, 200, arr);
}

static json_t *text_or_empty(const char *s)
{
	return utf8_json_str(s ? s : "");
}

/* dotnet-monitor's ProcessInfo, no more (its schema allows no other field; diagport's are /runtimes'). */
static void route_process(struct api *a, struct httpd_req *r, const struct route *rt)
{
	struct port_runtime p;
	json_t *o;

	if (!choose(a, r, &p))
		return;
	o = target_identifier(&p, false);
	json_object_del(o, "isDefault");
	if (a->served & (1u << SERVED_ENV)) /* the command line holds what the environment would: env's */
		json_object_set_new(o, "commandLine", text_or_empty(p.info.command_line));
	json_object_set_new(o, "operatingSystem", text_or_empty(p.info.os));
	json_object_set_new(o, "processArchitecture", text_or_empty(p.info.arch));
	ipc_process_info_free(&p.info);
	httpd_send_json(r, 200, o);
}

/*
 * GET /runtimes, diagport's: every attached runtime, as /processes lists them
 * (no selectors), with what dotnet-monitor's /process has no field for: the
 * runtime's version (null before .NET 6) and when it first reached the agent
 * (its start, in suspend mode), for `diagport ps`.
 */
static void route_runtimes(struct api *a, struct httpd_req *r, const struct route *rt)
{
	struct port_runtime *l;
	size_t n = port_list(a->port, &l);
	json_t *arr = json_array();

	for (size_t i = 0; i < n; i++) {
		json_t *o = target_identifier(&l[i], false);
		char t[CLOCK_RFC3339_LEN];

		json_object_del(o, "isDefault");
		json_object_set_new(o, "runtimeVersion", l[i].info.clr_version ? utf8_json_str(l[i].info.clr_version)
										: json_null());
		if (l[i].attached_unix_ms)
			clock_rfc3339_at(t, l[i].attached_unix_ms);
		json_object_set_new(o, "attachedDateTime", l[i].attached_unix_ms ? json_string(t) : json_null());
		json_array_append_new(arr, o);
	}
	port_list_free(l, n);
	httpd_send_json(r, 200, arr);
}

/*
 * POST /parameters: capturing method parameters needs dotnet-monitor's
 * in-process library loaded into the app, which diagport does not do; the
 * answer is dotnet-monitor's when that feature is off (a 400 problem).
 */
static void route_parameters(struct api *a, struct httpd_req *r, const struct route *rt)
{
	httpd_problem(r, 400, "Bad Request", "The 'Parameter Capturing' feature is not enabled.");
}

static void route_env(struct api *a, struct httpd_req *r, const struct route *rt)
{
	struct port_runtime p;

	if (!choose(a, r, &p))
		return;
	proc_env(a->port, &p, r);
	ipc_process_info_free(&p.info);
}

static void route_perfmap(struct api *a, struct httpd_req *r, const struct route *rt)
{
	bool enable = strcmp(rt->method, "POST") == 0;
	const char *t = httpd_query(r, "type");
	unsigned type = proc_perfmap_type(t);
	struct port_runtime p;

	if (enable && type == 0) {
		struct capture_problem pr = { .status = 400, .title = "Bad Request", .field = "type" };

		snprintf(pr.em.text, sizeof(pr.em.text), "type '%.32s' is not PerfMap, JitDump or All", t);
		capture_send_problem(r, &pr);
		return;
	}
	if (!choose(a, r, &p))
		return;
	proc_perfmap(a->port, &p, r, enable, type);
	ipc_process_info_free(&p.info);
}

static void route_capture(struct api *a, struct httpd_req *r, const struct route *rt)
{
	struct capture c;
	struct capture_problem p;
	const char *caller;

	if (capture_from_request(&a->env, r, rt->kind, &c, &p) != 0) {
		capture_send_problem(r, &p);
		return;
	}
	httpd_peer_text(r, c.peer, sizeof(c.peer));
	c.token = a->token != NULL; /* the route is behind the token: it was presented */
	if ((caller = httpd_header(r, "X-Diagport-Caller")) != NULL)
		c.caller = mem_strndup(caller, strnlen(caller, MAX_CALLER));
	capture_run(a->captures, &c, r, NULL);
}

static void route_operations(struct api *a, struct httpd_req *r, const struct route *rt)
{
	ops_route(a->ops, r, a->served);
}

static void route_rules(struct api *a, struct httpd_req *r, const struct route *rt)
{
	crules_route(a->rules, r);
}

#define OPEN(m, p, fn, sv) { m, p, fn, CAPTURE_KINDS, sv, true, false }
#define AUTH(m, p, fn, sv) { m, p, fn, CAPTURE_KINDS, sv, false, false }
#define AUTH_BODY(m, p, fn, sv) { m, p, fn, CAPTURE_KINDS, sv, false, true }
#define CAPTURE(m, p, kind, sv, body) { m, p, route_capture, kind, sv, false, body }

/*
 * Each row's permission (--captures) is the last but one column: SERVED_KINDS
 * for the routes that give no capture (the probes; /info; /processes and
 * /runtimes, whose identifiers hold no command line; /parameters, refused;
 * /process, which drops its commandLine without env; the operations and
 * collection rules lists, which hold only what served kinds made). A GET /trace that asks for a CPU profile (format=, or
 * engine=perf) needs cpuprofile instead of trace (api_admit); /perfmap is the
 * perf engine's, cpuprofile's.
 */
static const struct route routes[] = {
	OPEN("GET", "/healthz", route_health, SERVED_KINDS),
	OPEN("GET", "/readyz", route_health, SERVED_KINDS),
	OPEN("GET", "/metrics", route_metrics, SERVED_METRICS),
	AUTH("GET", "/info", route_info, SERVED_KINDS),
	AUTH("GET", "/processes", route_processes, SERVED_KINDS),
	AUTH("GET", "/process", route_process, SERVED_KINDS),
	AUTH("GET", "/runtimes", route_runtimes, SERVED_KINDS),
	AUTH("GET", "/env", route_env, SERVED_ENV),
	CAPTURE("GET", "/dump", CAPTURE_DUMP, SERVED_DUMP, false),
	CAPTURE("GET", "/trace", CAPTURE_TRACE, SERVED_TRACE, false),
	CAPTURE("POST", "/trace", CAPTURE_TRACE, SERVED_TRACE, true),
	CAPTURE("GET", "/livemetrics", CAPTURE_LIVEMETRICS, SERVED_METRICS, false),
	CAPTURE("POST", "/livemetrics", CAPTURE_LIVEMETRICS, SERVED_METRICS, true),
	CAPTURE("GET", "/logs", CAPTURE_LOGS, SERVED_LOGS, false),
	CAPTURE("POST", "/logs", CAPTURE_LOGS, SERVED_LOGS, true),
	CAPTURE("GET", "/stacks", CAPTURE_STACKS, SERVED_STACKS, false),
	CAPTURE("GET", "/gcdump", CAPTURE_GCDUMP, SERVED_GCDUMP, false),
	CAPTURE("GET", "/exceptions", CAPTURE_EXCEPTIONS, SERVED_EXCEPTIONS, false),
	CAPTURE("POST", "/exceptions", CAPTURE_EXCEPTIONS, SERVED_EXCEPTIONS, true),
	AUTH_BODY("POST", "/parameters", route_parameters, SERVED_KINDS),
	AUTH("POST", "/perfmap", route_perfmap, SERVED_CPUPROFILE),
	AUTH("DELETE", "/perfmap", route_perfmap, SERVED_CPUPROFILE),
	AUTH("GET", "/crashes", route_crashes, SERVED_EXCEPTIONS),
	AUTH("GET", "/collectionrules", route_rules, SERVED_KINDS),
	AUTH("GET", "/collectionrules/", route_rules, SERVED_KINDS),
	AUTH("GET", "/operations", route_operations, SERVED_KINDS),
	AUTH("GET", "/operations/", route_operations, SERVED_KINDS),
	AUTH("DELETE", "/operations/", route_operations, SERVED_KINDS),
};
#define N_ROUTES (sizeof(routes) / sizeof(routes[0]))

/* HEAD is a GET without the body, for the routes that only read (a HEAD does not take a dump). */
static bool method_matches(const struct route *rt, const char *m)
{
	return strcmp(rt->method, m) == 0 ||
	       (strcmp(m, "HEAD") == 0 && strcmp(rt->method, "GET") == 0 && rt->kind == CAPTURE_KINDS);
}

static bool path_matches(const struct route *rt, const char *path)
{
	size_t n = strlen(rt->path);

	if (rt->path[n - 1] == '/')
		return strncmp(path, rt->path, n) == 0 && path[n] != '\0';
	return strcmp(path, rt->path) == 0;
}

bool api_takes_body(const char *path)
{
	for (size_t i = 0; i < N_ROUTES; i++)
		if (routes[i].body && path_matches(&routes[i], path))
			return true;
	return false;
}

/* 403 for kind k; the kinds served are named only to a caller who has shown the token (or where none is needed). */
static void refuse_kind(const struct api *a, struct httpd_req *r, enum served_kind k, bool tell)
{
	if (tell)
		httpd_problem(r, 403, "Forbidden", "this agent does not serve %s captures (captures: %s)",
			      served_name(k), a->served_text);
	else
		httpd_problem(r, 403, "Forbidden", "this agent does not serve %s captures (captures)", served_name(k));
}

/* The permission a request to rt needs: its row's, but cpuprofile for a GET /trace that asks for a CPU profile. */
static enum served_kind needs(const struct route *rt, struct httpd_req *r)
{
	const char *engine = httpd_query(r, "engine");

	if (rt->served == SERVED_TRACE && strcmp(httpd_method(r), "POST") != 0 &&
	    (httpd_query(r, "format") || (engine && strcasecmp(engine, "perf") == 0)))
		return SERVED_CPUPROFILE;
	return rt->served;
}

enum httpd_admission api_admit(void *ctx, struct httpd_req *r, long long now, long long *until)
{
	struct api *a = ctx;
	const char *path = httpd_path(r), *auth = httpd_header(r, "Authorization");
	const struct route *rt = NULL;
	bool open = false;
	enum served_kind k;

	for (size_t i = 0; i < N_ROUTES; i++)
		if (path_matches(&routes[i], path)) {
			open = open || routes[i].open;
			if (rt == NULL || method_matches(&routes[i], httpd_method(r)))
				rt = &routes[i]; /* a path's rows share their permission; the method's row for /trace */
		}
	if (a->token && !open) {
		char peer[48];
		long long turn;
		bool ok;

		httpd_peer_text(r, peer, sizeof(peer));
		pthread_mutex_lock(&a->fails_mu);
		turn = authfail_turn(a->fails, peer, now);
		ok = turn <= now && token_ok(a, auth);
		if (turn <= now && !ok)
			authfail_record(a->fails, peer, path, auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0 ?
					"no bearer token" : "wrong token", now);
		pthread_mutex_unlock(&a->fails_mu);
		if (turn > now) {
			*until = turn;
			return HTTPD_WAIT;
		}
		if (!ok) {
			httpd_problem(r, 401, "Unauthorized", "this agent requires 'Authorization: Bearer <token>'");
			return HTTPD_REFUSE;
		}
	}
	if (rt && (k = needs(rt, r)) != SERVED_KINDS && !(a->served & (1u << k))) {
		refuse_kind(a, r, k, !a->token || !open || token_ok(a, auth));
		return HTTPD_REFUSE;
	}
	return HTTPD_ADMIT;
}

enum httpd_admission api_metrics_admit(void *ctx, struct httpd_req *r, long long now, long long *until)
{
	const struct api *a = ctx;

	if (!(a->served & (1u << SERVED_METRICS))) {
		refuse_kind(a, r, SERVED_METRICS, !a->token); /* this listener takes no token */
		return HTTPD_REFUSE;
	}
	return HTTPD_ADMIT;
}

bool api_is_probe(const char *path)
{
	return strcmp(path, "/healthz") == 0 || strcmp(path, "/readyz") == 0;
}

void api_metrics(struct metrics *m, struct httpd_req *r)
{
	struct buf out;

	if (strcmp(httpd_method(r), "GET") != 0 && strcmp(httpd_method(r), "HEAD") != 0) {
		httpd_set_header(r, "Allow", "GET, HEAD");
		httpd_problem(r, 405, "Method Not Allowed", "%s is not allowed on /metrics", httpd_method(r));
		return;
	}
	if (m == NULL) {
		httpd_problem(r, 404, "Not Found", "metrics are turned off (Metrics:Enabled is false)");
		return;
	}
	buf_init(&out, 0);
	buf_reserve(&out, 16384);
	metrics_render(m, &out);
	httpd_send(r, 200, "text/plain; version=0.0.4; charset=utf-8", out.data ? out.data : "", out.len);
	buf_free(&out);
}

void api_metrics_handle(void *ctx, struct httpd_req *r)
{
	const struct api *a = ctx;

	if (strcmp(httpd_path(r), "/metrics") == 0)
		api_metrics(a->metrics, r);
	else
		httpd_problem(r, 404, "Not Found", "this listener serves /metrics only");
}

/*
 * The route for the request: its row, or NULL with the answer sent (401
 * before anything that would tell a stranger which paths exist, then 404 for
 * no such path, 405 with Allow for a path that takes other methods).
 */
static const struct route *lookup(const struct api *a, struct httpd_req *r)
{
	const char *path = httpd_path(r), *m = httpd_method(r);
	char allow[64] = "";
	bool known = false, open = false;

	for (size_t i = 0; i < N_ROUTES; i++) {
		if (!path_matches(&routes[i], path))
			continue;
		if (method_matches(&routes[i], m)) {
			if (routes[i].open || !a->token || token_ok(a, httpd_header(r, "Authorization")))
				return &routes[i];
			break;
		}
		known = true;
		open = open || routes[i].open;
		snprintf(allow + strlen(allow), sizeof(allow) - strlen(allow), "%s%s%s", allow[0] ? ", " : "",
			 routes[i].method, method_matches(&routes[i], "HEAD") ? ", HEAD" : "");
	}
	if (a->token && !open && !token_ok(a, httpd_header(r, "Authorization")))
		httpd_problem(r, 401, "Unauthorized", "this agent requires 'Authorization: Bearer <token>'");
	else if (!known)
		httpd_problem(r, 404, "Not Found", "no route %s", path);
	else {
		httpd_set_header(r, "Allow", allow);
		httpd_problem(r, 405, "Method Not Allowed", "%s is not allowed on %s", m, path);
	}
	return NULL;
}

void api_handle(void *ctx, struct httpd_req *r)
{
	struct api *a = ctx;
	const struct route *rt = lookup(a, r);

	if (rt)
		rt->handler(a, r, rt);
}

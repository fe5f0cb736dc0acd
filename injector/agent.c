/*
 * agent.c - the capture agent container, as Kubernetes and ECS spell it.
 *
 * Two flavours: diagport's own agent (`diagport launch`) and dotnet-monitor,
 * configured the way its documentation shows for a sidecar in Listen mode.
 * Secure by default: without a token the diagport agent listens on loopback
 * only (reachable through kubectl port-forward or ECS Exec); with a token it
 * serves the pod network and requires it. Probes run `/diagport health`, so
 * they need no shell and work while the agent listens on loopback.
 */
#include "inj_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

#define MONITOR_IMAGE "mcr.microsoft.com/dotnet/monitor:8"
#define MONITOR_METRICS_PORT 52325
#define TOKEN_FILE INJ_AUTH_DIR "/token"

const char *inj_default_image(enum inj_flavour f)
{
	return f == INJ_FLAVOUR_DOTNET_MONITOR ? MONITOR_IMAGE : "ghcr.io/diagport/diagport:" DP_VERSION;
}

struct inj_resources inj_agent_resources(const struct inj_opts *o)
{
	struct inj_resources r;
	bool mon = o->flavour == INJ_FLAVOUR_DOTNET_MONITOR;

	/* dotnet-monitor's figures are the ones its documentation recommends. */
	r.cpu = o->cpu_request ? o->cpu_request : mon ? "50m" : "10m";
	r.mem = o->mem_request ? o->mem_request : mon ? "32Mi" : "16Mi";
	r.limit = o->mem_limit ? o->mem_limit : mon ? "256Mi" : "64Mi";
	r.cpu_limit = mon ? "250m" : NULL;
	return r;
}

/* A request over its limit is refused by Kubernetes and by ECS (memoryReservation over memory). */
int inj_agent_check(const struct inj_ctx *c, const struct inj_opts *o, const char *what, struct err_msg *em)
{
	struct inj_resources r = inj_agent_resources(o);
	long long req, lim;

	if (inj_quantity(r.mem, false, &req) == 0 && inj_quantity(r.limit, false, &lim) == 0 && req > lim)
		return inj_fail(c, em, NULL, DP_EREFUSED, what,
				"resources: memory=%s is over memory-limit=%s; Kubernetes and ECS refuse a request "
				"above its limit", r.mem, r.limit);
	if (r.cpu_limit && inj_quantity(r.cpu, true, &req) == 0 && inj_quantity(r.cpu_limit, true, &lim) == 0 &&
	    req > lim)
		return inj_fail(c, em, NULL, DP_EREFUSED, what, "resources: cpu=%s is over the agent's cpu limit %s",
				r.cpu, r.cpu_limit);
	return 0;
}

static struct doc_node *strs(const char *const *v)
{
	struct doc_node *s = doc_seq();

	for (; *v; v++)
		doc_push(s, doc_str(*v));
	return s;
}

static struct doc_node *pair(const char *k1, struct doc_node *v1, const char *k2, struct doc_node *v2)
{
	struct doc_node *m = doc_map();

	doc_set(m, k1, v1);
	if (k2)
		doc_set(m, k2, v2);
	return m;
}

/* How the diagport agent is handed its settings sources (egress-settings, rules). */
enum settings_via {
	VIA_ENV,  /* ECS: in variables, from the task's secrets (no argument) */
	VIA_DIR,  /* Kubernetes: a mounted key-per-file directory each */
	VIA_FILE, /* Compose: a project secret's or config's file each */
};

/* Where a Compose agent reads source s (value v): a config's target, or the secret's file. New string. */
static char *compose_file(const struct inj_source *s, const char *v)
{
	return s->compose_file ? mem_strdup(s->compose_file) : mem_printf("/run/secrets/%s", v);
}

/*
 * `launch` arguments of the diagport agent. The token: on Kubernetes the file
 * the Secret is mounted as, on Compose the file of the project's secret
 * (token_file); on ECS the environment (the task's secret
 * DIAGPORT_AUTH_TOKEN), which the agent reads when it is given no file
 * (token_file NULL). The settings sources, in the order of inj_sources (a
 * later one wins), as `via` says.
 */
static struct doc_node *launch_args(const struct inj_opts *o, const char *token_file, enum settings_via via)
{
	struct doc_node *a = doc_seq();
	char url[64];
	bool open = o->auth_secret || o->no_auth;

	snprintf(url, sizeof(url), "%s://%s:%d", o->tls_secret ? "https" : "http", open ? "+" : "127.0.0.1", o->port);
	doc_push(a, doc_str("launch"));
	doc_push(a, doc_str("--socket"));
	doc_push(a, doc_str(INJ_SOCKET));
	doc_push(a, doc_str("--dumps"));
	doc_push(a, doc_str(INJ_DUMPS_DIR));
	doc_push(a, doc_str("--urls"));
	doc_push(a, doc_str(url));
	if (o->auth_secret && token_file) {
		doc_push(a, doc_str("--auth-token-file"));
		doc_push(a, doc_str(token_file));
	}
	if (o->no_auth)
		doc_push(a, doc_str("--no-auth"));
	if (o->captures != INJ_CAPTURE_ALL) { /* all is the agent's default: nothing to say */
		char list[128];

		inj_captures_text(o->captures, ',', list, sizeof(list));
		doc_push(a, doc_str("--captures"));
		doc_push(a, doc_str(list));
	}
	for (size_t i = 0; via != VIA_ENV && i < INJ_NSOURCES; i++) {
		const char *v = inj_source_value(&inj_sources[i], o);
		char *f;

		if (v == NULL)
			continue;
		f = via == VIA_DIR ? mem_strdup(inj_sources[i].dir) : compose_file(&inj_sources[i], v);
		doc_push(a, doc_str("--workload-config")); /* held to a workload's sections: Egress, the rules */
		doc_push(a, doc_str(f));
		mem_free(f);
	}
	if (o->dumps_limit) {
		long long q = 0;
		char n[32];

		inj_quantity(o->dumps_limit, false, &q); /* checked when the option was read */
		snprintf(n, sizeof(n), "%lld", q);
		doc_push(a, doc_str("--dumps-limit")); /* the staging cap: one dump never outgrows the volume */
		doc_push(a, doc_str(n));
	}
	return a;
}

static struct doc_node *health_cmd(const struct inj_opts *o, bool ecs)
{
	struct doc_node *a = doc_seq();

	if (ecs)
		doc_push(a, doc_str("CMD"));
	doc_push(a, doc_str("/diagport"));
	doc_push(a, doc_str("health"));
	if (o->port != INJ_DEFAULT_PORT) {
		char p[16];

		snprintf(p, sizeof(p), "%d", o->port);
		doc_push(a, doc_str("--port"));
		doc_push(a, doc_str(p));
	}
	return a;
}

/* The variables naming a mounted kubernetes.io/tls Secret's certificate and key files. */
static void tls_files_env(struct doc_node *env, const char *cert_var, const char *key_var)
{
	doc_push(env, pair("name", doc_str(cert_var), "value", doc_str(INJ_TLS_DIR "/tls.crt")));
	doc_push(env, pair("name", doc_str(key_var), "value", doc_str(INJ_TLS_DIR "/tls.key")));
}

/* dotnet-monitor's settings, as its Kubernetes documentation gives them, on our fixed paths. */
static void monitor_env(struct doc_node *env, const struct inj_opts *o, const char *nk, const char *vk)
{
	char urls[64], metrics[64];
	const char *const kv[][2] = {
		{ "DOTNETMONITOR_DiagnosticPort__ConnectionMode", "Listen" },
		{ "DOTNETMONITOR_DiagnosticPort__EndpointName", INJ_SOCKET },
		{ "DOTNETMONITOR_Storage__DumpTempFolder", INJ_DUMPS_DIR },
		{ "DOTNETMONITOR_Urls", urls },
		{ "DOTNETMONITOR_Metrics__Endpoints", metrics },
	};

	snprintf(urls, sizeof(urls), "%s://+:%d", o->tls_secret ? "https" : "http", o->port);
	snprintf(metrics, sizeof(metrics), "http://+:%d", MONITOR_METRICS_PORT);
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++)
		doc_push(env, pair(nk, doc_str(kv[i][0]), vk, doc_str(kv[i][1])));
	if (o->tls_secret) /* Kestrel's names; the Secret's keys as kubernetes.io/tls fixes them */
		tls_files_env(env, "DOTNETMONITOR_Kestrel__Certificates__Default__Path",
			      "DOTNETMONITOR_Kestrel__Certificates__Default__KeyPath");
}

static struct doc_node *k8s_probe(const struct inj_opts *o, int period, int failures)
{
	struct doc_node *p = doc_map();

	if (o->flavour == INJ_FLAVOUR_DOTNET_MONITOR)
		doc_set(p, "tcpSocket", pair("port", doc_int(o->port), NULL, NULL));
	else
		doc_set(p, "exec", pair("command", health_cmd(o, false), NULL, NULL));
	doc_set(p, "periodSeconds", doc_int(period));
	doc_set(p, "failureThreshold", doc_int(failures));
	return p;
}

static struct doc_node *port_k8s(const char *name, int port)
{
	struct doc_node *p = doc_map();

	doc_set(p, "name", doc_str(name));
	doc_set(p, "containerPort", doc_int(port));
	doc_set(p, "protocol", doc_str("TCP"));
	return p;
}

struct doc_node *inj_agent_k8s(const struct inj_opts *o, const struct inj_agent_user *u)
{
	struct doc_node *a = doc_map(), *ports = doc_seq(), *res = doc_map(), *sc = doc_map(), *mounts = doc_seq();
	struct doc_node *req = doc_map(), *lim = doc_map();
	bool mon = o->flavour == INJ_FLAVOUR_DOTNET_MONITOR;
	struct inj_resources r = inj_agent_resources(o);

	doc_set(a, "name", doc_str(INJ_AGENT_NAME));
	doc_set(a, "image", doc_str(o->image ? o->image : inj_default_image(o->flavour)));
	if (mon) {
		const char *const args[] = { "collect", o->no_auth ? "--no-auth" : NULL, NULL };
		struct doc_node *env = doc_seq();

		doc_set(a, "args", strs(args));
		monitor_env(env, o, "name", "value");
		if (o->auth_secret) {
			const char *const keys[] = { "Subject", "PublicKey" };

			for (int i = 0; i < 2; i++) {
				char *n = mem_printf("DOTNETMONITOR_Authentication__MonitorApiKey__%s", keys[i]);
				struct doc_node *ref = pair("name", doc_str(o->auth_secret), "key", doc_str(keys[i]));

				doc_push(env, pair("name", doc_str(n), "valueFrom", pair("secretKeyRef", ref, NULL, NULL)));
				mem_free(n);
			}
		}
		doc_set(a, "env", env);
	} else {
		const char *const cmd[] = { "/diagport", NULL };

		doc_set(a, "command", strs(cmd));
		struct doc_node *env = doc_seq();

		doc_set(a, "args", launch_args(o, TOKEN_FILE, VIA_DIR));
		if (o->egress_settings) {
			/* the pod's namespace, for the metadata of what it sends to a store (the pod's name is its hostname) */
			struct doc_node *ref = pair("fieldPath", doc_str("metadata.namespace"), NULL, NULL);

			doc_push(env, pair("name", doc_str("DIAGPORT_POD_NAMESPACE"), "valueFrom",
					   pair("fieldRef", ref, NULL, NULL)));
		}
		if (o->tls_secret)
			tls_files_env(env, "DIAGPORT_TLS_CERT", "DIAGPORT_TLS_KEY");
		if (env->n > 0)
			doc_set(a, "env", env);
		else
			doc_free(env);
	}
	if (o->sidecar == INJ_SIDECAR_NATIVE)
		doc_set(a, "restartPolicy", doc_str("Always"));
	doc_push(ports, port_k8s("diag-http", o->port));
	if (mon)
		doc_push(ports, port_k8s("diag-metrics", MONITOR_METRICS_PORT));
	doc_set(a, "ports", ports);
	doc_set(a, "startupProbe", k8s_probe(o, 1, 30));
	doc_set(a, "livenessProbe", k8s_probe(o, 10, 3));
	doc_set(req, "cpu", doc_str(r.cpu));
	doc_set(req, "memory", doc_str(r.mem));
	if (r.cpu_limit)
		doc_set(lim, "cpu", doc_str(r.cpu_limit));
	doc_set(lim, "memory", doc_str(r.limit));
	doc_set(res, "requests", req);
	doc_set(res, "limits", lim);
	doc_set(a, "resources", res);
	doc_set(sc, "runAsNonRoot", doc_bool(true));
	doc_set(sc, "runAsUser", doc_int(u->uid));
	doc_set(sc, "runAsGroup", doc_int(u->gid));
	doc_set(sc, "readOnlyRootFilesystem", doc_bool(true));
	doc_set(sc, "allowPrivilegeEscalation", doc_bool(false));
	{
		/*
		 * perf: PERFMON is for the runtime's seccomp profile, which lets
		 * perf_event_open through only to a container granted it (containerd
		 * 1.6.9+, Docker 23+); a non-root process has it in its bounding set
		 * only, never in effect, so the kernel's own rule (same user,
		 * kernel.perf_event_paranoid) still decides what it may sample.
		 */
		const char *const all[] = { "ALL", NULL }, *const perfmon[] = { "PERFMON", NULL };
		struct doc_node *caps = pair("drop", strs(all), NULL, NULL);

		if (o->perf)
			doc_set(caps, "add", strs(perfmon));
		doc_set(sc, "capabilities", caps);
	}
	doc_set(sc, "seccompProfile", pair("type", doc_str("RuntimeDefault"), NULL, NULL));
	doc_set(a, "securityContext", sc);
	doc_push(mounts, pair("name", doc_str(INJ_VOL_DIAG), "mountPath", doc_str(INJ_DIAG_DIR)));
	doc_push(mounts, pair("name", doc_str(INJ_VOL_DUMPS), "mountPath", doc_str(INJ_DUMPS_DIR)));
	if (o->auth_secret && !mon) {
		struct doc_node *m = pair("name", doc_str(INJ_VOL_AUTH), "mountPath", doc_str(INJ_AUTH_DIR));

		doc_set(m, "readOnly", doc_bool(true));
		doc_push(mounts, m);
	}
	if (o->tls_secret) {
		struct doc_node *m = pair("name", doc_str(INJ_VOL_TLS), "mountPath", doc_str(INJ_TLS_DIR));

		doc_set(m, "readOnly", doc_bool(true));
		doc_push(mounts, m);
	}
	for (size_t i = 0; i < INJ_NSOURCES; i++) {
		/* dotnet-monitor reads key-per-file settings from its one directory; diagport is told each one */
		const struct inj_source *src = &inj_sources[i];
		struct doc_node *m;

		if (inj_source_value(src, o) == NULL)
			continue;
		m = pair("name", doc_str(src->volume), "mountPath", doc_str(mon ? INJ_MONITOR_DIR : src->dir));
		doc_set(m, "readOnly", doc_bool(true));
		doc_push(mounts, m);
	}
	doc_set(a, "volumeMounts", mounts);
	return a;
}

int inj_agent_mem_mib(const struct inj_opts *o, long long *reservation, long long *limit, struct err_msg *em)
{
	struct inj_resources r = inj_agent_resources(o);
	long long req, lim;

	if (inj_quantity(r.mem, false, &req) != 0 || inj_quantity(r.limit, false, &lim) != 0)
		return err_set(em, DP_EINVAL, "agent memory %s / %s is not a quantity", r.mem, r.limit);
	*reservation = (req + (1 << 20) - 1) >> 20;
	*limit = (lim + (1 << 20) - 1) >> 20;
	return 0;
}

/* ECS fields are built in camelCase; CloudFormation's PascalCase is the same with a capital. */
struct doc_node *inj_agent_ecs(const struct inj_opts *o, const struct inj_agent_user *u, bool pascal)
{
	struct doc_node *a = doc_map(), *ports = doc_seq(), *mounts = doc_seq(), *pm;
	bool mon = o->flavour == INJ_FLAVOUR_DOTNET_MONITOR;
	struct inj_resources r = inj_agent_resources(o);
	long long res_mib = 0, lim_mib = 0, cpu = 0;

	inj_agent_mem_mib(o, &res_mib, &lim_mib, NULL);
	inj_quantity(r.cpu, true, &cpu);
	doc_set(a, "name", doc_str(INJ_AGENT_NAME));
	doc_set(a, "image", doc_str(o->image ? o->image : inj_default_image(o->flavour)));
	doc_set(a, "essential", doc_bool(false));
	if (mon) {
		const char *const args[] = { "collect", o->no_auth ? "--no-auth" : NULL, NULL };
		struct doc_node *env = doc_seq();

		doc_set(a, "command", strs(args));
		monitor_env(env, o, "name", "value");
		doc_set(a, "environment", env);
		if (o->auth_secret) {
			struct doc_node *sec = doc_seq();
			const char *const keys[] = { "Subject", "PublicKey" };

			/* Secrets Manager JSON keys: ARN:json-key:version-stage:version-id */
			for (int i = 0; i < 2; i++) {
				char *n = mem_printf("DOTNETMONITOR_Authentication__MonitorApiKey__%s", keys[i]);
				char *v = mem_printf("%s:%s::", o->auth_secret, keys[i]);

				doc_push(sec, pair("name", doc_str(n), "valueFrom", doc_str(v)));
				mem_free(n);
				mem_free(v);
			}
			doc_set(a, "secrets", sec);
		}
	} else {
		const char *const ep[] = { "/diagport", NULL };
		struct doc_node *sec = doc_seq();

		doc_set(a, "entryPoint", strs(ep));
		doc_set(a, "command", launch_args(o, NULL, VIA_ENV));
		if (o->auth_secret)
			doc_push(sec, pair("name", doc_str("DIAGPORT_AUTH_TOKEN"), "valueFrom", doc_str(o->auth_secret)));
		if (o->tls_secret) /* the PEM text itself: ECS mounts no files from a secret */
			doc_push(sec, pair("name", doc_str("DIAGPORT_TLS_PEM"), "valueFrom", doc_str(o->tls_secret)));
		for (size_t i = 0; i < INJ_NSOURCES; i++) /* a settings document each, as the agent reads them */
			if (inj_source_value(&inj_sources[i], o))
				doc_push(sec, pair("name", doc_str(inj_sources[i].ecs_var), "valueFrom",
						   doc_str(inj_source_value(&inj_sources[i], o))));
		if (sec->n > 0)
			doc_set(a, "secrets", sec);
		else
			doc_free(sec);
	}
	pm = doc_map();
	doc_set(pm, "containerPort", doc_int(o->port));
	doc_set(pm, "protocol", doc_str("tcp"));
	doc_set(pm, "name", doc_str("diag-http"));
	doc_push(ports, pm);
	doc_set(a, "portMappings", ports);
	if (!mon) {
		struct doc_node *hc = doc_map();

		doc_set(hc, "command", health_cmd(o, true));
		doc_set(hc, "interval", doc_int(5));
		doc_set(hc, "timeout", doc_int(2));
		doc_set(hc, "retries", doc_int(3));
		doc_set(hc, "startPeriod", doc_int(5));
		doc_set(a, "healthCheck", hc);
	}
	doc_set(a, "cpu", doc_int((cpu * 1024 + 999) / 1000));
	doc_set(a, "memoryReservation", doc_int(res_mib));
	doc_set(a, "memory", doc_int(lim_mib));
	doc_set(a, "user", doc_str(u->ecs_user));
	doc_set(a, "readonlyRootFilesystem", doc_bool(true));
	{
		const char *const all[] = { "ALL", NULL };

		doc_set(a, "linuxParameters", pair("capabilities", pair("drop", strs(all), NULL, NULL), NULL, NULL));
	}
	doc_push(mounts, pair("sourceVolume", doc_str(INJ_VOL_DIAG), "containerPath", doc_str(INJ_DIAG_DIR)));
	doc_push(mounts, pair("sourceVolume", doc_str(INJ_VOL_DUMPS), "containerPath", doc_str(INJ_DUMPS_DIR)));
	doc_set(a, "mountPoints", mounts);
	if (pascal)
		inj_pascalize(a);
	return a;
}

/* "uid:gid" for the agent from an app's user ("1000", "1000:1000", 1000): numeric and not root, else 1654:1654. */
char *inj_agent_user_text(const char *u)
{
	unsigned long uid, gid;
	char *end;

	if (u && isdigit((unsigned char)*u)) {
		uid = strtoul(u, &end, 10);
		gid = uid;
		if (*end == ':' && isdigit((unsigned char)end[1]))
			gid = strtoul(end + 1, &end, 10);
		if (*end == '\0' && uid != 0)
			return mem_printf("%lu:%lu", uid, gid ? gid : uid);
	}
	return mem_printf("%d:%d", INJ_DEFAULT_UID, INJ_DEFAULT_UID);
}

/*
 * The agent service's `secrets` and `configs`: the token's secret, then each
 * settings source in the project's map it names, in the short syntax (a
 * secret at /run/secrets/NAME) or with the target the agent reads.
 */
static void compose_sources(struct doc_node *a, const struct inj_opts *o)
{
	const char *const lists[] = { "secrets", "configs" };

	for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++) {
		struct doc_node *list = doc_seq();

		if (o->auth_secret && l == 0)
			doc_push(list, doc_str(o->auth_secret));
		if (o->tls_secret && l == 0)
			doc_push(list, doc_str(o->tls_secret));
		for (size_t i = 0; i < INJ_NSOURCES; i++) {
			const struct inj_source *src = &inj_sources[i];
			const char *v = inj_source_value(src, o);

			if (v == NULL || strcmp(src->compose_list, lists[l]) != 0)
				continue;
			doc_push(list, src->compose_file ? pair("source", doc_str(v), "target", doc_str(src->compose_file))
							 : doc_str(v));
		}
		if (list->n > 0)
			doc_set(a, lists[l], list);
		else
			doc_free(list);
	}
}

/*
 * The Compose service of the diagport agent. The image's ENTRYPOINT is
 * /diagport, so `command` holds launch's arguments. The token is a file of
 * the project's secrets (/run/secrets/NAME), and so is each settings source
 * (a secret there, a config at its target). With a token or auth none the
 * agent listens on all its interfaces and is published on the host's
 * loopback only; without, it listens on its own loopback and publishes
 * nothing. Compose has no cpu request: the request becomes cpu_shares (as
 * ECS's cpu units), never a cpus limit, which would throttle a capture.
 */
struct doc_node *inj_agent_compose(const struct inj_opts *o, const char *user, const char *status)
{
	const char *const all[] = { "ALL", NULL }, *const nnp[] = { "no-new-privileges:true", NULL };
	const char *const vols[] = { INJ_VOL_DIAG ":" INJ_DIAG_DIR, INJ_VOL_DUMPS ":" INJ_DUMPS_DIR, NULL };
	struct doc_node *a = doc_map(), *hc = doc_map(), *cmd;
	struct inj_resources r = inj_agent_resources(o);
	long long res_mib = 0, lim_mib = 0, cpu = 0;
	char *token = o->auth_secret ? mem_printf("/run/secrets/%s", o->auth_secret) : NULL;
	char text[64];

	inj_agent_mem_mib(o, &res_mib, &lim_mib, NULL);
	inj_quantity(r.cpu, true, &cpu);
	doc_set(a, "image", doc_str(o->image ? o->image : inj_default_image(o->flavour)));
	doc_set(a, "command", launch_args(o, token, VIA_FILE));
	doc_set(a, "user", doc_str(user));
	doc_set(a, "read_only", doc_bool(true));
	doc_set(a, "cap_drop", strs(all));
	doc_set(a, "security_opt", strs(nnp));
	doc_set(a, "volumes", strs(vols));
	compose_sources(a, o);
	if (o->tls_secret) { /* one PEM file holding the chain and the key, as the agent reads one */
		char *f = mem_printf("/run/secrets/%s", o->tls_secret);

		doc_set(a, "environment", pair("DIAGPORT_TLS_CERT", doc_str(f), NULL, NULL));
		mem_free(f);
	}
	if (o->auth_secret || o->no_auth) {
		struct doc_node *ports = doc_seq();

		snprintf(text, sizeof(text), "127.0.0.1:%d:%d", o->port, o->port);
		doc_push(ports, doc_str(text));
		doc_set(a, "ports", ports);
	}
	cmd = health_cmd(o, true);
	doc_set(hc, "test", cmd);
	doc_set(hc, "interval", doc_str("5s"));
	doc_set(hc, "timeout", doc_str("2s"));
	doc_set(hc, "retries", doc_int(3));
	doc_set(hc, "start_period", doc_str("5s"));
	doc_set(a, "healthcheck", hc);
	snprintf(text, sizeof(text), "%lldm", lim_mib);
	doc_set(a, "mem_limit", doc_str(text));
	snprintf(text, sizeof(text), "%lldm", res_mib);
	doc_set(a, "mem_reservation", doc_str(text));
	cpu = (cpu * 1024 + 999) / 1000;
	doc_set(a, "cpu_shares", doc_int(cpu < 2 ? 2 : cpu)); /* the kernel's least weight */
	doc_set(a, "restart", doc_str("unless-stopped"));
	doc_set(a, "labels", pair(INJ_STATUS_KEY, doc_str(status), NULL, NULL));
	mem_free(token);
	return a;
}

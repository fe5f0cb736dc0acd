/*
 * kube_pod.c - one pod as one agent, for the Kubernetes discovery (kube.c):
 * read from what the injector wrote on it (the diagport.dev/status record,
 * the diagport-agent container, its port and token Secret) and from the
 * pod's status (phase, the agent's readiness). A pod that cannot be reached
 * is listed with why_not; a name from the API server that is not a valid
 * one is listed with why and goes into no URL.
 */
#include "kube_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "injector/inj.h"
#include "mem.h"

#define MAX_TOKEN_B64 ((size_t)64 << 10)

/*
 * Names from the API server go into URLs (the port-forward's path, the token
 * Secret's): they must be what Kubernetes itself allows (IsDNS1123Label for a
 * namespace, IsDNS1123Subdomain for a pod or a Secret), else a hostile server
 * could steer a request ("a@evil.example:80/"). NULL when s is one, else why.
 */
static const char *dns1123_why(const char *s, bool subdomain)
{
	size_t n = strlen(s);

	if (n == 0)
		return "it is empty";
	if (n > (subdomain ? 253u : 63u))
		return subdomain ? "it is longer than 253 characters" : "it is longer than 63 characters";
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool edge = i == 0 || i == n - 1 || (subdomain && (s[i - 1] == '.' || s[i + 1] == '.'));

		if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
			continue;
		if (c == '.' && !subdomain)
			return "it holds a '.' (a DNS-1123 label has none)";
		if (c != '-' && c != '.')
			return subdomain ? "not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')"
					 : "not a DNS-1123 label (lower-case letters, digits and '-')";
		if (edge)
			return "each part must start and end with a lower-case letter or digit";
	}
	return NULL;
}

/* s for a message: at most 80 bytes, anything but printable ASCII as '?' (new). */
static char *shown(const char *s)
{
	size_t n = strlen(s);
	char *o = mem_printf("%.80s%s", s, n > 80 ? "..." : "");

	for (char *p = o; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	return o;
}

/* The why_not of a pod whose token Secret's name is not one (new). */
static char *bad_secret(const char *secret)
{
	char *s = shown(secret), *why = mem_printf("the pod's token Secret name is not valid: \"%s\": %s", s,
						   dns1123_why(secret, true));

	free(s);
	return why;
}

/* A pod whose namespace or name is not valid: listed, with why, and nothing else (no URL, no dialling). */
static void add_bad_pod(struct disc *d, const char *ns, const char *name, const char *why_ns, const char *why_name)
{
	char *sns = shown(ns), *sname = shown(name), *key = mem_printf("%s/%s", sns, sname);
	struct fleet_agent *a;

	if (json_object_get(d->seen, key) == NULL) {
		json_object_set_new(d->seen, key, json_true());
		a = fleet_set_add(d->set);
		a->name = key;
		key = NULL;
		a->why_not = why_ns ? mem_printf("the API server gave a namespace that is not valid: \"%s\": %s", sns, why_ns)
				    : mem_printf("the API server gave a pod name that is not valid: \"%s\": %s", sname,
						 why_name);
	}
	free(key);
	free(sns);
	free(sname);
}

const char *kube_str_at(const json_t *o, const char *a, const char *b)
{
	const json_t *x = json_object_get(o, a);

	return json_string_value(b ? json_object_get(x, b) : x);
}

/* The diagport-agent container (native sidecar or regular) and its list key ("initContainers"). */
static const json_t *agent_container(const json_t *spec, bool *init)
{
	const char *lists[] = { "initContainers", "containers" };

	for (int l = 0; l < 2; l++) {
		size_t i;
		json_t *c;

		json_array_foreach(json_object_get(spec, lists[l]), i, c) {
			const char *n = json_string_value(json_object_get(c, "name"));

			if (n && strcmp(n, INJ_AGENT_NAME) == 0) {
				*init = l == 0;
				return c;
			}
		}
	}
	return NULL;
}

static bool agent_ready(const json_t *status, bool init)
{
	size_t i;
	json_t *c;

	json_array_foreach(json_object_get(status, init ? "initContainerStatuses" : "containerStatuses"), i, c) {
		const char *n = json_string_value(json_object_get(c, "name"));

		if (n && strcmp(n, INJ_AGENT_NAME) == 0)
			return json_is_true(json_object_get(c, "ready"));
	}
	return false;
}

/* The Secret whose token the agent reads (its mount of INJ_AUTH_DIR), or NULL. */
static const char *token_secret(const json_t *spec, const json_t *agent)
{
	const char *vol = NULL;
	size_t i;
	json_t *m;

	json_array_foreach(json_object_get(agent, "volumeMounts"), i, m) {
		const char *p = json_string_value(json_object_get(m, "mountPath"));

		if (p && strcmp(p, INJ_AUTH_DIR) == 0)
			vol = json_string_value(json_object_get(m, "name"));
	}
	json_array_foreach(json_object_get(spec, "volumes"), i, m) {
		const char *n = json_string_value(json_object_get(m, "name"));

		if (vol && n && strcmp(n, vol) == 0)
			return kube_str_at(json_object_get(m, "secret"), "secretName", NULL);
	}
	return NULL;
}

/* {"why": why}, freeing why. */
static json_t *why_json(char *why)
{
	json_t *j = json_pack("{s:s}", "why", why);

	free(why);
	return j;
}

/* The token of Secret ns/name into a (or a->why_not). */
static int fetch_token(struct disc *d, struct fleet_agent *a, const char *ns, const char *name, struct err_msg *em)
{
	char *key = mem_printf("%s/%s", ns, name), *path;
	json_t *c = json_object_get(d->tokens, key);
	struct kapi_resp r = { 0 };
	int rc = 0;

	if (c == NULL) {
		path = mem_printf("/api/v1/namespaces/%s/secrets/%s", ns, name);
		rc = kapi_call(&d->api, "GET", path, NULL, &r, em);
		free(path);
		if (rc != 0)
			goto out;
		if (r.status == 200) {
			const char *b64 = kube_str_at(json_object_get(r.body, "data"), "token", NULL);
			char *tok = NULL;
			size_t n = 0;

			if (b64 && b64_decode(b64, strlen(b64), MAX_TOKEN_B64, &tok, &n) == 0 && n) {
				while (n && (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' '))
					tok[--n] = '\0';
				c = json_pack("{s:s%}", "token", tok, n);
				mem_wipe(tok, n);
				free(tok);
			} else {
				c = why_json(mem_printf("the agent's token Secret %s has no key token", key));
			}
			if (b64)
				mem_wipe((char *)b64, strlen(b64));
		} else if (r.status == 403) {
			c = why_json(mem_printf("the agent needs its token from Secret %s in %s, which you may not get (a "
						"--token-file is not sent to pods found through Kubernetes)", name, ns));
		} else if (r.status == 404) {
			c = why_json(mem_printf("the agent's token Secret %s does not exist", key));
		} else {
			rc = kapi_error(&r, key, em);
			goto out;
		}
		json_object_set_new(d->tokens, key, c);
	}
	if (kube_str_at(c, "token", NULL))
		a->token = mem_strdup(kube_str_at(c, "token", NULL));
	else
		a->why_not = mem_strdup(kube_str_at(c, "why", NULL));
out:
	kapi_resp_free(&r);
	free(key);
	return rc;
}

/* "NS/Deployment/orders" from the pod's controller; NULL-free. */
static char *workload_of(const json_t *meta, const char *ns, const char *pod)
{
	size_t i;
	json_t *o;

	json_array_foreach(json_object_get(meta, "ownerReferences"), i, o) {
		const char *kind = kube_str_at(o, "kind", NULL), *name = kube_str_at(o, "name", NULL);
		const char *hash = kube_str_at(json_object_get(meta, "labels"), "pod-template-hash", NULL);
		size_t nl, hl;

		if (!json_is_true(json_object_get(o, "controller")) || kind == NULL || name == NULL)
			continue;
		nl = strlen(name);
		hl = hash ? strlen(hash) : 0;
		if (strcmp(kind, "ReplicaSet") == 0 && hash && nl > hl + 1 && name[nl - hl - 1] == '-' &&
		    strcmp(name + nl - hl, hash) == 0)
			return mem_printf("%s/Deployment/%.*s", ns, (int)(nl - hl - 1), name);
		return mem_printf("%s/%s/%s", ns, kind, name);
	}
	return mem_printf("%s/Pod/%s", ns, pod);
}

/* The record's mode and its app containers ("orders,worker"), both new; false when it is not a record. */
static bool read_record(const char *rec, char **mode, char **containers)
{
	char *copy = mem_strdup(rec), *save = NULL;
	struct buf b;
	bool ok = strncmp(rec, "v1 ", 3) == 0;

	*mode = NULL;
	buf_init(&b, 0);
	buf_puts(&b, "");
	for (char *t = strtok_r(copy, " ", &save); ok && t; t = strtok_r(NULL, " ", &save)) {
		char *colon = strchr(t, ':');

		if (strncmp(t, "mode=", 5) == 0 && *mode == NULL)
			*mode = mem_strdup(t + 5);
		else if (t[0] != '+' && !strchr(t, '=') && colon && colon != t)
			buf_printf(&b, "%s%.*s", b.len ? "," : "", (int)(colon - t), t);
	}
	free(copy);
	*containers = buf_steal(&b, NULL);
	if (!ok) {
		free(*mode);
		free(*containers);
		*mode = *containers = NULL;
	}
	return ok;
}

static bool in_list(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; *p;) {
		size_t k = strcspn(p, ",");

		if (k == n && strncmp(p, name, n) == 0)
			return true;
		p += k + (p[k] == ',');
	}
	return false;
}

int kube_add_pod(struct disc *d, const json_t *pod, struct err_msg *em)
{
	const json_t *meta = json_object_get(pod, "metadata"), *spec = json_object_get(pod, "spec");
	const json_t *status = json_object_get(pod, "status"), *agent;
	const char *ns = kube_str_at(meta, "namespace", NULL), *name = kube_str_at(meta, "name", NULL);
	const char *phase = kube_str_at(status, "phase", NULL), *rec, *secret, *refusal;
	char *mode = NULL, *ctrs = NULL, *key;
	struct fleet_agent *a;
	bool init = false;
	size_t i;
	json_t *p;
	int rc = 0;

	if (ns == NULL || name == NULL)
		return err_set(em, DP_EREMOTE, "the API server sent a pod without a name or namespace");
	if (dns1123_why(ns, false) || dns1123_why(name, true)) {
		add_bad_pod(d, ns, name, dns1123_why(ns, false), dns1123_why(name, true));
		return 0;
	}
	if (phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0))
		return 0;
	key = mem_printf("%s/%s", ns, name);
	if (json_object_get(d->seen, key)) {
		free(key);
		return 0;
	}
	rec = kube_str_at(json_object_get(meta, "annotations"), INJ_STATUS_KEY, NULL);
	if (rec && !read_record(rec, &mode, &ctrs))
		rec = NULL;
	if (d->o->container && (rec == NULL || !in_list(ctrs, d->o->container))) {
		free(mode);
		free(ctrs);
		free(key);
		return 0;
	}
	json_object_set_new(d->seen, key, json_true());
	a = fleet_set_add(d->set);
	a->name = key;
	a->namespace_ = mem_strdup(ns);
	a->pod = mem_strdup(name);
	a->workload = workload_of(meta, ns, name);
	a->dialer = d->set->dialer;
	if (rec == NULL) {
		a->why_not = mem_strdup("not injected");
		return 0;
	}
	a->mode = mode;
	a->container = ctrs;
	agent = agent_container(spec, &init);
	json_array_foreach(json_object_get(agent, "ports"), i, p) {
		const char *pn = kube_str_at(p, "name", NULL);

		if (pn && strcmp(pn, "diag-http") == 0 && json_integer_value(json_object_get(p, "containerPort")) > 0 &&
		    json_integer_value(json_object_get(p, "containerPort")) < 65536)
			a->port = (int)json_integer_value(json_object_get(p, "containerPort"));
	}
	/* an agent served with TLS (tls-secret) is spoken to with TLS through the tunnel too (call.c) */
	a->url = mem_printf("%s://%s.%s:%d",
			    fleet_urls_https(fleet_agent_urls(json_object_get(agent, "args"), json_object_get(agent, "env")))
				    ? "https" : "http", name, ns, a->port);
	/* a capture asks first (no token fetched where it may not go); ps, last, of a pod it would call */
	if (d->o->for_capture && ((refusal = kube_pf_refusal(d, ns, em, &rc)) != NULL || rc != 0)) {
		if (refusal)
			a->why_not = mem_printf("access denied: %s", refusal);
		return rc;
	}
	if (agent == NULL)
		a->why_not = mem_strdup("the status record is there but the " INJ_AGENT_NAME " container is not");
	else if (json_object_get(meta, "deletionTimestamp") && !json_is_null(json_object_get(meta, "deletionTimestamp")))
		a->why_not = mem_strdup("pod terminating");
	else if (phase == NULL || strcmp(phase, "Running") != 0)
		a->why_not = mem_printf("pod not running (%s)", phase ? phase : "no phase yet");
	else if (!agent_ready(status, init))
		a->why_not = mem_strdup("agent not ready");
	else if ((secret = token_secret(spec, agent)) != NULL && dns1123_why(secret, true))
		a->why_not = bad_secret(secret);
	else if (secret)
		rc = fetch_token(d, a, ns, secret, em);
	if (rc == 0 && a->why_not == NULL && !d->o->for_capture && (refusal = kube_pf_refusal(d, ns, em, &rc)) != NULL)
		a->why_not = mem_printf("access denied: %s", refusal);
	return rc;
}

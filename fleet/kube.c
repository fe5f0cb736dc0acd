/*
 * kube.c - Kubernetes targets for the fleet client (fleet_kube_discover in
 * fleet.h): the pods a ref, a label selector or a whole namespace names,
 * each one an agent to reach through the API server's port-forward.
 *
 * In order: the kubeconfig (kubeconfig.c); who we are (SelfSubjectReview,
 * for messages and X-Diagport-Caller); what we may do, asked before doing
 * it (SelfSubjectAccessReview: list pods, get each ref's kind, and for a
 * capture get and create pods/portforward), so that a refusal names the
 * verb, resource and namespace instead of failing half-way; the refs'
 * objects and their selectors; the pods, a page of 500 at a time; then one
 * agent per pod, read from what the injector wrote on it (the
 * diagport.dev/status record, the diagport-agent container, its port and
 * token Secret) and from the pod's status (phase, the agent's readiness).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "fleet.h"
#include "injector/inj.h"
#include "kapi.h"
#include "kconn.h"
#include "kubeconfig.h"
#include "mem.h"

#define MAX_PODS 50000   /* pods read in one discovery (a cluster's documented limit is 150,000) */
#define MAX_PAGES 1000   /* a filtered page may hold fewer than PAGE pods, but not this many pages */
#define MAX_TOKEN_B64 ((size_t)64 << 10)
#define PAGE "500"

struct kind {
	const char *names[4]; /* what a ref may say */
	const char *group, *prefix, *resource, *kind;
};

static const struct kind kinds[] = {
	{ { "pod", "pods", "po", NULL }, "", "/api/v1", "pods", "Pod" },
	{ { "deploy", "deployment", "deployments", NULL }, "apps", "/apis/apps/v1", "deployments", "Deployment" },
	{ { "sts", "statefulset", "statefulsets", NULL }, "apps", "/apis/apps/v1", "statefulsets", "StatefulSet" },
	{ { "ds", "daemonset", "daemonsets", NULL }, "apps", "/apis/apps/v1", "daemonsets", "DaemonSet" },
	{ { "rs", "replicaset", "replicasets", NULL }, "apps", "/apis/apps/v1", "replicasets", "ReplicaSet" },
	{ { "job", "jobs", NULL, NULL }, "batch", "/apis/batch/v1", "jobs", "Job" },
};

struct disc {
	const struct fleet_kube_opts *o;
	struct kapi api;
	struct kcfg cfg;
	const char *ns;   /* the namespace, unless all_namespaces */
	const char *who;  /* for messages: the caller, else the kubeconfig's user */
	bool ssar;        /* the server answers SelfSubjectAccessReviews */
	bool pf_anywhere; /* with all_namespaces: may port-forward in every namespace */
	json_t *pf_ns;    /* namespace -> "" (may port-forward) or the refusal */
	json_t *tokens;   /* "NS/SECRET" -> {"token": ...} or {"why": ...} */
	json_t *seen;     /* "NS/POD" already added */
	struct fleet_set *set;
};

/* "deployments.apps" as kubectl names a resource of a group; "pods/portforward". */
static char *qualified(const char *resource, const char *sub, const char *group)
{
	return mem_printf("%s%s%s%s%s", resource, sub ? "/" : "", sub ? sub : "", group[0] ? "." : "", group);
}

/* 0 when the user may; DP_EAUTH with em (or *why, new, when why is not NULL) when not. */
static int require(struct disc *d, const char *verb, const char *group, const char *resource, const char *sub,
		   const char *ns, char **why, struct err_msg *em)
{
	bool ok = false;
	int rc;
	char *q;

	if (!d->ssar)
		return 0;
	rc = kapi_can(&d->api, verb, group, resource, sub, ns, &ok, em);
	if (rc == DP_ENOTFOUND) { /* no SelfSubjectAccessReview: the requests themselves will say */
		d->ssar = false;
		return 0;
	}
	if (rc != 0 || ok)
		return rc;
	q = qualified(resource, sub, group);
	if (why)
		*why = ns[0] ? mem_printf("cannot %s %s in namespace %s", verb, q, ns)
			     : mem_printf("cannot %s %s at the cluster scope", verb, q);
	if (ns[0])
		err_set(em, DP_EAUTH, "cannot %s %s in namespace %s (as %s)", verb, q, ns, d->who);
	else
		err_set(em, DP_EAUTH, "cannot %s %s at the cluster scope (as %s)", verb, q, d->who);
	free(q);
	return DP_EAUTH;
}

/* May the user port-forward in ns? NULL, or the refusal (borrowed from the cache). */
static const char *pf_refusal(struct disc *d, const char *ns, struct err_msg *em, int *rc)
{
	json_t *c = json_object_get(d->pf_ns, ns);
	char *why = NULL;

	*rc = 0;
	if (d->pf_anywhere)
		return NULL;
	if (c == NULL) {
		*rc = require(d, "create", "", "pods", "portforward", ns, &why, em);
		if (*rc == 0)
			*rc = require(d, "get", "", "pods", "portforward", ns, &why, em);
		if (*rc != 0 && *rc != DP_EAUTH)
			return NULL;
		*rc = 0;
		json_object_set_new(d->pf_ns, ns, json_string(why ? why : ""));
		free(why);
		c = json_object_get(d->pf_ns, ns);
	}
	return json_string_value(c)[0] ? json_string_value(c) : NULL;
}

static const struct kind *kind_of(const char *ref, const char **name, struct err_msg *em)
{
	const char *slash = strchr(ref, '/');
	size_t klen = slash ? (size_t)(slash - ref) : 0;

	*name = slash ? slash + 1 : ref;
	if (!**name || strlen(*name) > 253 || strspn(*name, "abcdefghijklmnopqrstuvwxyz0123456789.-") != strlen(*name)) {
		err_set(em, DP_EINVAL, "%s: not a Kubernetes object name", ref);
		return NULL;
	}
	if (!slash)
		return &kinds[0];
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		for (size_t j = 0; j < 4 && kinds[i].names[j]; j++)
			if (strlen(kinds[i].names[j]) == klen && strncmp(ref, kinds[i].names[j], klen) == 0)
				return &kinds[i];
	err_set(em, DP_EINVAL, "%s: %.*s is not a kind diagport follows (pod, deploy, sts, ds, rs, job)", ref, (int)klen,
		ref);
	return NULL;
}

/* ---- selectors ------------------------------------------------------------- */

/* spec.selector (matchLabels, matchExpressions) as a labelSelector string (new). */
static int selector_string(const json_t *sel, const char *what, char **out, struct err_msg *em)
{
	const json_t *ml = json_object_get(sel, "matchLabels"), *me = json_object_get(sel, "matchExpressions");
	const char *k;
	json_t *v;
	size_t i;
	struct buf b;

	buf_init(&b, 64 << 10);
	json_object_foreach((json_t *)ml, k, v) {
		if (json_is_string(v))
			buf_printf(&b, "%s%s=%s", b.len ? "," : "", k, json_string_value(v));
	}
	json_array_foreach(me, i, v) {
		const char *key = json_string_value(json_object_get(v, "key"));
		const char *op = json_string_value(json_object_get(v, "operator"));
		const json_t *vals = json_object_get(v, "values"), *x;
		size_t j;

		if (key == NULL || op == NULL)
			continue;
		if (strcmp(op, "In") == 0 || strcmp(op, "NotIn") == 0) {
			buf_printf(&b, "%s%s %s (", b.len ? "," : "", key, op[0] == 'I' ? "in" : "notin");
			json_array_foreach(vals, j, x) {
				buf_printf(&b, "%s%s", j ? "," : "", json_string_value(x));
			}
			buf_puts(&b, ")");
		} else if (strcmp(op, "Exists") == 0) {
			buf_printf(&b, "%s%s", b.len ? "," : "", key);
		} else if (strcmp(op, "DoesNotExist") == 0) {
			buf_printf(&b, "%s!%s", b.len ? "," : "", key);
		} else {
			buf_free(&b);
			return err_set(em, DP_EREMOTE, "%s: spec.selector: operator %s is not a label selector's", what, op);
		}
	}
	if (b.len == 0) {
		buf_free(&b);
		return err_set(em, DP_EREMOTE, "%s has no spec.selector: it would select every pod", what);
	}
	*out = buf_steal(&b, NULL);
	return 0;
}

/* ---- one pod ----------------------------------------------------------------- */

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

static const char *str_at(const json_t *o, const char *a, const char *b)
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
			return str_at(json_object_get(m, "secret"), "secretName", NULL);
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
			const char *b64 = str_at(json_object_get(r.body, "data"), "token", NULL);
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
	if (str_at(c, "token", NULL))
		a->token = mem_strdup(str_at(c, "token", NULL));
	else
		a->why_not = mem_strdup(str_at(c, "why", NULL));
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
		const char *kind = str_at(o, "kind", NULL), *name = str_at(o, "name", NULL);
		const char *hash = str_at(json_object_get(meta, "labels"), "pod-template-hash", NULL);
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

static int add_pod(struct disc *d, const json_t *pod, struct err_msg *em)
{
	const json_t *meta = json_object_get(pod, "metadata"), *spec = json_object_get(pod, "spec");
	const json_t *status = json_object_get(pod, "status"), *agent;
	const char *ns = str_at(meta, "namespace", NULL), *name = str_at(meta, "name", NULL);
	const char *phase = str_at(status, "phase", NULL), *rec, *secret, *refusal;
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
	rec = str_at(json_object_get(meta, "annotations"), INJ_STATUS_KEY, NULL);
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
		const char *pn = str_at(p, "name", NULL);

		if (pn && strcmp(pn, "diag-http") == 0 && json_integer_value(json_object_get(p, "containerPort")) > 0 &&
		    json_integer_value(json_object_get(p, "containerPort")) < 65536)
			a->port = (int)json_integer_value(json_object_get(p, "containerPort"));
	}
	/* an agent served with TLS (tls-secret) is spoken to with TLS through the tunnel too (call.c) */
	a->url = mem_printf("%s://%s.%s:%d",
			    fleet_urls_https(fleet_agent_urls(json_object_get(agent, "args"), json_object_get(agent, "env")))
				    ? "https" : "http", name, ns, a->port);
	/* a capture asks first (no token fetched where it may not go); ps, last, of a pod it would call */
	if (d->o->for_capture && ((refusal = pf_refusal(d, ns, em, &rc)) != NULL || rc != 0)) {
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
	if (rc == 0 && a->why_not == NULL && !d->o->for_capture && (refusal = pf_refusal(d, ns, em, &rc)) != NULL)
		a->why_not = mem_printf("access denied: %s", refusal);
	return rc;
}

/* ---- listing --------------------------------------------------------------- */

static int list_pods(struct disc *d, const char *selector, struct err_msg *em)
{
	char *cont = NULL, *sel = selector ? fleet_pct_escape(selector) : NULL;
	const char *what = d->o->all_namespaces ? "listing pods in all namespaces" : "listing pods";
	json_t *tokens = json_object(); /* the continue tokens given so far: one again would loop */
	size_t total = 0, pages = 0;
	int rc = 0;

	do {
		char *c = cont ? fleet_pct_escape(cont) : NULL;
		char *path = d->o->all_namespaces
				     ? mem_printf("/api/v1/pods?limit=" PAGE "%s%s%s%s", sel ? "&labelSelector=" : "",
						  sel ? sel : "", c ? "&continue=" : "", c ? c : "")
				     : mem_printf("/api/v1/namespaces/%s/pods?limit=" PAGE "%s%s%s%s", d->ns,
						  sel ? "&labelSelector=" : "", sel ? sel : "", c ? "&continue=" : "",
						  c ? c : "");
		struct kapi_resp r = { 0 };
		const json_t *items;
		const char *next;
		size_t i;
		json_t *pod;

		free(c);
		free(cont);
		cont = NULL;
		rc = kapi_call(&d->api, "GET", path, NULL, &r, em);
		if (rc == 0 && r.status != 200)
			rc = kapi_error(&r, what, em);
		free(path);
		items = json_object_get(r.body, "items");
		if (rc == 0 && !json_is_array(items))
			rc = err_set(em, DP_EREMOTE, "%s: the answer has no items", what);
		total += rc == 0 ? json_array_size(items) : 0;
		if (rc == 0 && total > MAX_PODS)
			rc = err_set(em, DP_ETOOBIG,
				     "%s: more than %d pods (diagport's cap on one discovery): narrow it down with a "
				     "selector or a namespace", what, MAX_PODS);
		json_array_foreach(items, i, pod) {
			if (rc == 0)
				rc = add_pod(d, pod, em);
		}
		next = str_at(json_object_get(r.body, "metadata"), "continue", NULL);
		if (rc == 0 && next && next[0]) {
			if (json_object_get(tokens, next))
				rc = err_set(em, DP_EREMOTE, "%s: the API server gave the same continue token again after "
					     "%zu pages (%zu pods): its pages would never end", what, pages + 1, total);
			else if (++pages >= MAX_PAGES)
				rc = err_set(em, DP_EREMOTE, "%s: the API server's pages did not end after %d pages "
					     "(%zu pods)", what, MAX_PAGES, total);
			else
				json_object_set_new(tokens, next, json_true());
			cont = rc == 0 ? mem_strdup(next) : NULL;
		}
		kapi_resp_free(&r);
	} while (rc == 0 && cont);
	free(cont);
	free(sel);
	json_decref(tokens);
	return rc;
}

static int follow_ref(struct disc *d, const char *ref, struct err_msg *em)
{
	const char *name;
	const struct kind *k = kind_of(ref, &name, em);
	struct kapi_resp r = { 0 };
	char *path, *what, *sel = NULL, *both = NULL;
	int rc;

	if (k == NULL)
		return DP_EINVAL;
	path = mem_printf("%s/namespaces/%s/%s/%s", k->prefix, d->ns, k->resource, name);
	what = mem_printf("%s %s in namespace %s", k->kind, name, d->ns);
	rc = kapi_call(&d->api, "GET", path, NULL, &r, em);
	if (rc == 0 && r.status == 404)
		rc = err_set(em, DP_ENOTFOUND, "%s: not found", what);
	else if (rc == 0 && r.status != 200)
		rc = kapi_error(&r, what, em);
	if (rc == 0 && k == &kinds[0])
		rc = add_pod(d, r.body, em);
	else if (rc == 0 && (rc = selector_string(json_object_get(json_object_get(r.body, "spec"), "selector"), what,
						  &sel, em)) == 0) {
		if (d->o->selector)
			both = mem_printf("%s,%s", sel, d->o->selector);
		rc = list_pods(d, both ? both : sel, em);
	}
	kapi_resp_free(&r);
	free(sel);
	free(both);
	free(what);
	free(path);
	return rc;
}

/* Everything asked of the API server before the first real request. */
static int check_access(struct disc *d, struct err_msg *em)
{
	const char *scope = d->o->all_namespaces ? "" : d->ns;
	int rc;

	if ((rc = require(d, "list", "", "pods", NULL, scope, NULL, em)) != 0)
		return rc;
	for (size_t i = 0; d->o->refs && d->o->refs[i]; i++) {
		const char *name;
		const struct kind *k = kind_of(d->o->refs[i], &name, em);

		if (k == NULL)
			return DP_EINVAL;
		if ((rc = require(d, "get", k->group, k->resource, NULL, d->ns, NULL, em)) != 0)
			return rc;
	}
	if (!d->o->for_capture)
		return 0;
	if (!d->o->all_namespaces) {
		if ((rc = require(d, "create", "", "pods", "portforward", d->ns, NULL, em)) != 0 ||
		    (rc = require(d, "get", "", "pods", "portforward", d->ns, NULL, em)) != 0)
			return rc;
		d->pf_anywhere = true;
		return 0;
	}
	/* every namespace: allowed everywhere, or asked namespace by namespace as pods turn up */
	rc = require(d, "create", "", "pods", "portforward", "", NULL, NULL);
	if (rc == 0)
		rc = require(d, "get", "", "pods", "portforward", "", NULL, NULL);
	d->pf_anywhere = rc == 0;
	return rc == DP_EAUTH ? 0 : rc;
}

int fleet_kube_discover(const struct fleet_kube_opts *o, struct fleet_set *out, struct err_msg *em)
{
	struct disc d = { .o = o, .ssar = true };
	struct fleet_set set = { 0 };
	int rc;

	if (o->all_namespaces && o->refs && o->refs[0])
		return err_set(em, DP_EINVAL, "%s: a ref names an object in one namespace, not in all of them",
			       o->refs[0]);
	if ((rc = kcfg_load(o->kubeconfig, o->context, o->timeout_ms, &d.cfg, em)) != 0)
		return rc;
	d.api.k = &d.cfg.conn;
	d.api.timeout_ms = o->timeout_ms;
	d.ns = o->namespace_ ? o->namespace_ : d.cfg.namespace_ ? d.cfg.namespace_ : "default";
	d.pf_ns = json_object();
	d.tokens = json_object();
	d.seen = json_object();
	d.set = &set;
	set.caller = kapi_whoami(&d.api);
	d.who = set.caller ? set.caller : d.cfg.user;
	if ((rc = check_access(&d, em)) != 0)
		goto out;
	set.dialer = kube_portfwd_new(&d.cfg.conn, o->timeout_ms);
	if (o->refs && o->refs[0]) {
		for (size_t i = 0; o->refs[i] && rc == 0; i++)
			rc = follow_ref(&d, o->refs[i], em);
	} else {
		rc = list_pods(&d, o->selector, em);
	}
	for (size_t i = 0; i < set.n; i++)
		set.v[i].dialer = set.dialer; /* the set may have moved while it grew */
	fleet_set_sort(&set);
out:
	{
		const char *k;
		json_t *v;

		json_object_foreach(d.tokens, k, v) {
			const char *t = str_at(v, "token", NULL);

			if (t)
				mem_wipe((char *)t, strlen(t));
		}
	}
	json_decref(d.tokens);
	json_decref(d.pf_ns);
	json_decref(d.seen);
	kcfg_free(&d.cfg);
	if (rc != 0) {
		fleet_set_free(&set);
		return rc;
	}
	*out = set;
	return 0;
}

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
 * The access checks are kube_access.c's, one pod's agent kube_pod.c's.
 */
#include "kube_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "kconn.h"
#include "mem.h"

#define MAX_PODS 50000   /* pods read in one discovery (a cluster's documented limit is 150,000) */
#define MAX_PAGES 1000   /* a filtered page may hold fewer than PAGE pods, but not this many pages */
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
				rc = kube_add_pod(d, pod, em);
		}
		next = kube_str_at(json_object_get(r.body, "metadata"), "continue", NULL);
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
		rc = kube_add_pod(d, r.body, em);
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

	if ((rc = kube_require(d, "list", "", "pods", NULL, scope, NULL, em)) != 0)
		return rc;
	for (size_t i = 0; d->o->refs && d->o->refs[i]; i++) {
		const char *name;
		const struct kind *k = kind_of(d->o->refs[i], &name, em);

		if (k == NULL)
			return DP_EINVAL;
		if ((rc = kube_require(d, "get", k->group, k->resource, NULL, d->ns, NULL, em)) != 0)
			return rc;
	}
	if (!d->o->for_capture)
		return 0;
	if (!d->o->all_namespaces) {
		if ((rc = kube_require(d, "create", "", "pods", "portforward", d->ns, NULL, em)) != 0 ||
		    (rc = kube_require(d, "get", "", "pods", "portforward", d->ns, NULL, em)) != 0)
			return rc;
		d->pf_anywhere = true;
		return 0;
	}
	/* every namespace: allowed everywhere, or asked namespace by namespace as pods turn up */
	rc = kube_require(d, "create", "", "pods", "portforward", "", NULL, NULL);
	if (rc == 0)
		rc = kube_require(d, "get", "", "pods", "portforward", "", NULL, NULL);
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
			const char *t = kube_str_at(v, "token", NULL);

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

/*
 * k8s.c - the Kubernetes front-end: finds the pod spec in every workload
 * kind, layers the pod template's diagport.dev/ annotations over the
 * command line's options, and applies the rules (rules.c) plus what is
 * Kubernetes-only: emptyDir volumes, the agent as a native sidecar (an init
 * container with restartPolicy Always, first in line) or a regular
 * container, the agent's uid/gid, and the status annotation.
 */
#include "inj_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "mem.h"

/* Where each workload kind keeps its pod template; NULL = the object is the pod. */
static const struct { const char *kind, *template; } kinds[] = {
	{ "Pod", NULL },
	{ "Deployment", "spec/template" },
	{ "StatefulSet", "spec/template" },
	{ "DaemonSet", "spec/template" },
	{ "ReplicaSet", "spec/template" },
	{ "ReplicationController", "spec/template" },
	{ "Job", "spec/template" },
	{ "CronJob", "spec/jobTemplate/spec/template" },
	{ "PodTemplate", "template" },
};

/*
 * A name as a message shows it ("%.*s%s" with SHOWN(s)): at most 253 bytes, Kubernetes' longest name,
 * then "...". The API server validates names only after mutating admission, so the webhook sees
 * whatever was sent, and every container's location string repeats the object's: a 1 MiB name on 64
 * containers took a review past the webhook's 64 MiB.
 */
#define NAME_SHOWN 253
#define SHOWN(s) (int)strnlen((s), NAME_SHOWN), (s), strnlen((s), NAME_SHOWN + 1) > NAME_SHOWN ? "..." : ""

static char *describe_as(const struct doc_node *obj, const char *kind)
{
	const struct doc_node *md = doc_get(obj, "metadata");
	const char *ns = doc_get_str(md, "namespace");
	const char *name = doc_get_str(md, "name");

	if (name == NULL)
		name = doc_get_str(md, "generateName");
	return mem_printf("%.*s%s %.*s%s%s%.*s%s", SHOWN(kind ? kind : "object"), SHOWN(ns ? ns : ""), ns ? "/" : "",
			  SHOWN(name ? name : "(unnamed)"));
}

static char *describe(const struct doc_node *obj)
{
	return describe_as(obj, doc_get_str(obj, "kind"));
}

/* Effective uid/gid of a container (container level over pod level), or -1. */
static long long sc_id(const struct doc_node *pod_sc, const struct doc_node *ctr, const char *k)
{
	const struct doc_node *v = doc_get(doc_get(ctr, "securityContext"), k);

	if (!doc_is(v, DOC_NUMBER))
		v = doc_get(pod_sc, k);
	if (!doc_is(v, DOC_NUMBER))
		return -1;
	return strtoll(v->text, NULL, 10);
}

static void agent_user(const struct doc_node *spec, const struct doc_node *ctr, struct inj_agent_user *u)
{
	const struct doc_node *pod_sc = doc_get(spec, "securityContext");
	long long uid = sc_id(pod_sc, ctr, "runAsUser"), gid = sc_id(pod_sc, ctr, "runAsGroup");

	/* The agent never runs as root: an app running as root gets the .NET images' app user. */
	if (uid <= 0)
		uid = INJ_DEFAULT_UID;
	if (gid <= 0)
		gid = uid;
	u->uid = uid;
	u->gid = gid;
	u->ecs_user = NULL;
}

static struct doc_node *volume(const char *name, const struct inj_opts *o)
{
	struct doc_node *v = doc_map(), *ed = doc_map();

	doc_set(v, "name", doc_str(name));
	if (strcmp(name, INJ_VOL_AUTH) == 0 || strcmp(name, INJ_VOL_TLS) == 0) {
		doc_set(ed, "secretName", doc_str(strcmp(name, INJ_VOL_AUTH) == 0 ? o->auth_secret : o->tls_secret));
		doc_set(v, "secret", ed);
		return v;
	}
	if (strcmp(name, INJ_VOL_DUMPS) == 0 && o->dumps_limit)
		doc_set(ed, "sizeLimit", doc_str(o->dumps_limit));
	doc_set(v, "emptyDir", ed);
	return v;
}

/* The volume of a settings source (egress-settings, rules): the Secret or ConfigMap its value names. */
static struct doc_node *source_volume(const struct inj_source *src, const char *value)
{
	struct doc_node *v = doc_map(), *ref = doc_map();

	doc_set(v, "name", doc_str(src->volume));
	doc_set(ref, src->k8s_name_key, doc_str(value));
	doc_set(v, src->k8s_source, ref);
	return v;
}

static int pod_uninject(const struct inj_ctx *c, struct doc_node *holder, struct doc_node *spec,
			const char *what, struct err_msg *em);

/* A boolean true as JSON and YAML 1.1 spell it (true, True, yes, on, ...). */
static bool is_true(const struct doc_node *n)
{
	static const char *const t[] = { "true", "yes", "on", "y" };

	for (size_t i = 0; doc_is(n, DOC_BOOL) && i < sizeof(t) / sizeof(t[0]); i++)
		if (strcasecmp(n->text, t[i]) == 0)
			return true;
	return false;
}

/*
 * perf: the agent's perf engine samples the app's processes, which it sees
 * (their /proc, a pid to give perf_event_open) only in a process namespace
 * it shares with them. A pod with hostPID shares the node's already (and
 * the API server refuses both); one that says shareProcessNamespace: false
 * is refused rather than overridden: its author turned sharing off, and it
 * changes what the app sees (its process is no longer pid 1).
 */
static int share_pids(const struct inj_ctx *c, struct doc_node *spec, const char *what, struct inj_status *st,
		      struct err_msg *em)
{
	struct doc_node *v = doc_get(spec, "shareProcessNamespace");

	if (is_true(doc_get(spec, "hostPID")) || is_true(v))
		return 0;
	if (v != NULL && !(v->type == DOC_NULL && v->tag == NULL))
		return inj_fail(c, em, v, DP_EREFUSED, what, "perf: shareProcessNamespace is %s, and the agent's perf "
				"engine sees the app's processes only in a process namespace it shares with them; remove "
				"the field or set it true, or leave perf out", v->text ? v->text : "not a boolean");
	inj_put(spec, "shareProcessNamespace", doc_bool(true), st->wflags, sizeof(st->wflags), 'N');
	return 0;
}

/* What perf cannot promise, said where the pod is injected (stderr; the webhook's warnings). */
static void perf_warnings(const struct inj_ctx *c, const char *what)
{
	inj_report_warn(c->report, "%s: perf: the agent adds the capability PERFMON, which Pod Security baseline and "
			"restricted refuse: in a namespace that enforces either, the API server rejects the pod", what);
	inj_report_warn(c->report, "%s: perf: kernel frames need the node's kernel.perf_event_paranoid at 1 or less, "
			"or an agent running as root (inject runs it as the app's user); user-space ones need 2 or less",
			what);
}

int inj_k8s_wants(const struct doc_node *metadata, const struct doc_node **bad)
{
	const struct doc_node *an = doc_get(doc_get(metadata, "annotations"), INJ_PREFIX "inject"),
			      *ln = doc_get(doc_get(metadata, "labels"), INJ_PREFIX "inject");
	const char *ann = doc_strval(an), *label = doc_strval(ln);
	bool ann_out = ann && (strcasecmp(ann, "false") == 0 || strcmp(ann, "disabled") == 0);

	if (ln && (label == NULL || (strcmp(label, "enabled") != 0 && strcmp(label, "disabled") != 0))) {
		*bad = ln;
		return -2;
	}
	if (ann_out || (label && strcmp(label, "disabled") == 0))
		return 0; /* an opt-out, either way, wins */
	if (ann || label)
		return 1;
	return -1;
}

/* A label diagport.dev/NAME other than diagport.dev/inject (its key node), or NULL: a typo or a misplaced option. */
static const struct doc_node *stray_label(const struct doc_node *metadata)
{
	const struct doc_node *l = doc_get(metadata, "labels");

	for (size_t i = 0; doc_is(l, DOC_MAP) && i < l->n; i++)
		if (strncmp(l->keys[i]->text, INJ_PREFIX, strlen(INJ_PREFIX)) == 0 &&
		    strcmp(l->keys[i]->text, INJ_PREFIX "inject") != 0)
			return l->keys[i];
	return NULL;
}

/* A Secret's or ConfigMap's name: an RFC 1123 DNS subdomain, as the API server checks it. */
static bool object_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 253 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-' || s[i] == '.'))
			return false;
	return true;
}

/*
 * An option naming a Secret or a ConfigMap (kind) in the pod's namespace:
 * 0, or DP_EREFUSED when v is not such a name, placed at the pod's
 * annotation when the value is its own (ann: the pod template's
 * annotations); one from the command line or the webhook's configuration
 * has no place in the file.
 */
static int object_ref(const struct inj_ctx *c, const struct doc_node *ann, const char *option, const char *kind,
		      const char *v, const char *what, struct err_msg *em)
{
	char key[64];

	if (v == NULL || object_name_ok(v))
		return 0;
	snprintf(key, sizeof(key), INJ_PREFIX "%s", option);
	return inj_fail(c, em, doc_get(ann, key), DP_EREFUSED, what,
			"%s: '%s' is not a Kubernetes %s name (lowercase letters, digits, '-' and '.', starting and "
			"ending with a letter or digit, at most 253; an ARN or SSM parameter is for ECS)", option, v,
			kind);
}

/*
 * The option values that name objects of the pod's namespace, each checked;
 * and dotnet-monitor, which reads key-per-file settings from one directory
 * only, can be given one settings source, not two.
 */
static int check_refs(const struct inj_ctx *c, const struct doc_node *ann, const struct inj_opts *o,
		      const char *what, struct err_msg *em)
{
	const struct inj_source *first = NULL;
	int rc;

	if ((rc = object_ref(c, ann, "auth-secret", "Secret", o->auth_secret, what, em)) != 0 ||
	    (rc = object_ref(c, ann, "tls-secret", "Secret", o->tls_secret, what, em)) != 0)
		return rc;
	for (size_t i = 0; i < INJ_NSOURCES; i++) {
		const struct inj_source *src = &inj_sources[i];
		char key[64];

		if (inj_source_value(src, o) == NULL)
			continue;
		if ((rc = object_ref(c, ann, src->option, src->k8s_kind, inj_source_value(src, o), what, em)) != 0)
			return rc;
		snprintf(key, sizeof(key), INJ_PREFIX "%s", src->option);
		if (first && o->flavour == INJ_FLAVOUR_DOTNET_MONITOR)
			return inj_fail(c, em, doc_get(ann, key), DP_EREFUSED, what,
					"%s and %s with flavour dotnet-monitor: it reads key-per-file settings from one "
					"directory, " INJ_MONITOR_DIR ", and one volume only can be mounted there; put the "
					"%s__ keys in the %s that %s names, or give them as DOTNETMONITOR_%s__... "
					"variables", first->option, src->option, src->section, first->k8s_kind,
					first->option, src->section);
		first = src;
	}
	return 0;
}

static int pod_inject(const struct inj_ctx *c, struct doc_node *holder, struct doc_node *spec,
		      const char *what, struct err_msg *em)
{
	struct doc_node *md, *ann, *ctrs, *inits, *vols, *lists[2];
	struct inj_opts o;
	struct inj_status st;
	struct inj_agent_user u = { 0 };
	bool *sel = NULL, first = true;
	const struct doc_node *bad = NULL;
	char *status;
	int rc, want;

	/* Already injected? Take ours out first, then apply the options as they are now. */
	if ((rc = pod_uninject(c, holder, spec, what, em)) != 0 ||
	    (rc = inj_map_field(c, holder, "metadata", what, &md, em)) != 0 ||
	    (rc = inj_map_field(c, md, "annotations", what, &ann, em)) != 0)
		return rc;
	if ((rc = inj_opts_from_map(c, c->base, ann, true, "annotation ", what, &o, em)) != 0)
		return rc;
	if ((bad = stray_label(md)) != NULL) {
		inj_opts_free(&o);
		return inj_fail(c, em, bad, DP_EREFUSED, what, "label %s: of diagport's labels only " INJ_PREFIX
				"inject is read; options are annotations", bad->text);
	}
	if ((want = inj_k8s_wants(md, &bad)) == -2) {
		inj_opts_free(&o);
		return inj_fail(c, em, bad, DP_EREFUSED, what, "label " INJ_PREFIX "inject: '%s' is not enabled or disabled",
				doc_strval(bad) ? doc_strval(bad) : "(not a string)");
	}
	if (o.inject == 0 || want == 0) {
		if (c->report)
			c->report->skipped++;
		inj_opts_free(&o);
		return 0;
	}
	if (doc_is(doc_get(spec, "hostNetwork"), DOC_BOOL) && strcmp(doc_get(spec, "hostNetwork")->text, "true") == 0)
		inj_report_warn(c->report, "%s: hostNetwork is true: the agent listens in the node's network namespace, so "
				"every process on the node reaches its port %u, and a second such pod on the node cannot "
				"bind it; give it a token (auth-secret) and a port of its own (port), or leave it out",
				what, o.port);
	memset(&st, 0, sizeof(st));
	if ((rc = inj_opts_enforce(c, &o, what, em)) != 0 || (rc = check_refs(c, ann, &o, what, em)) != 0 ||
	    (rc = inj_opts_check(c, &o, what, em)) != 0 ||
	    (rc = inj_agent_check(c, &o, what, em)) != 0 ||
	    (rc = inj_seq_field(c, spec, "containers", what, &ctrs, em)) != 0 ||
	    (rc = inj_seq_field(c, spec, "initContainers", what, &inits, em)) != 0 ||
	    (rc = inj_seq_field(c, spec, "volumes", what, &vols, em)) != 0)
		goto out;
	if (ctrs == NULL || ctrs->n == 0) {
		rc = inj_fail(c, em, spec, DP_EREFUSED, what, "the pod spec has no containers");
		goto out;
	}
	if (o.sidecar == INJ_SIDECAR_CONTAINER && doc_get_str(spec, "restartPolicy") &&
	    strcmp(doc_get_str(spec, "restartPolicy"), "Always") != 0) {
		/* a Job's pod (restartPolicy Never or OnFailure) completes when all its containers have */
		rc = inj_fail(c, em, doc_get(spec, "restartPolicy"), DP_EREFUSED, what,
			      "sidecar container: this pod runs to completion (restartPolicy %s), and an agent "
			      "container never exits, so it would never complete; use the native sidecar "
			      "(sidecar: native, Kubernetes 1.29+), which stops with the app",
			      doc_get_str(spec, "restartPolicy"));
		goto out;
	}
	lists[0] = ctrs;
	lists[1] = inits;
	sel = mem_array(ctrs->n, sizeof(bool));
	if ((rc = inj_check_collisions(c, &inj_k8s_dialect, vols, lists, 2, what, em)) != 0 ||
	    (rc = inj_select(c, &inj_k8s_dialect, ctrs, &o, what, sel, em)) != 0 ||
	    (o.perf && (rc = share_pids(c, spec, what, &st, em)) != 0))
		goto out;
	for (size_t i = 0; i < ctrs->n; i++) {
		struct doc_node *ctr = ctrs->vals[i];
		const char *name = doc_get_str(ctr, "name");
		char *cwhat;

		if (!sel[i])
			continue;
		if ((rc = inj_ctr_named(c, &inj_k8s_dialect, ctr, "containers", i, st.n, what, em)) != 0)
			goto out;
		snprintf(st.c[st.n].name, sizeof(st.c[0].name), "%s", name);
		cwhat = mem_printf("%s: container %.*s%s", what, SHOWN(name));
		rc = inj_container(c, &inj_k8s_dialect, ctr, &o, cwhat, &st.c[st.n], em);
		mem_free(cwhat);
		if (rc != 0)
			goto out;
		st.n++;
		if (first)
			agent_user(spec, ctr, &u);
		first = false;
	}
	if (vols == NULL)
		vols = inj_create(spec, "volumes", DOC_SEQ, st.wflags, sizeof(st.wflags), 'V');
	doc_push(vols, volume(INJ_VOL_DIAG, &o));
	doc_push(vols, volume(INJ_VOL_DUMPS, &o));
	if (o.auth_secret && o.flavour == INJ_FLAVOUR_DIAGPORT)
		doc_push(vols, volume(INJ_VOL_AUTH, &o));
	if (o.tls_secret)
		doc_push(vols, volume(INJ_VOL_TLS, &o));
	for (size_t i = 0; i < INJ_NSOURCES; i++)
		if (inj_source_value(&inj_sources[i], &o))
			doc_push(vols, source_volume(&inj_sources[i], inj_source_value(&inj_sources[i], &o)));
	if (o.sidecar == INJ_SIDECAR_NATIVE) {
		if (inits == NULL)
			inits = inj_create(spec, "initContainers", DOC_SEQ, st.wflags, sizeof(st.wflags), 'I');
		doc_insert(inits, 0, inj_agent_k8s(&o, &u));
	} else {
		doc_push(ctrs, inj_agent_k8s(&o, &u));
		inj_flag_add(st.wflags, sizeof(st.wflags), 'S');
	}
	if (md == NULL)
		md = inj_create(holder, "metadata", DOC_MAP, st.wflags, sizeof(st.wflags), 'T');
	if (ann == NULL)
		ann = inj_create(md, "annotations", DOC_MAP, st.wflags, sizeof(st.wflags), 'A');
	status = inj_status_format(&st, &o);
	doc_set(ann, INJ_STATUS_KEY, doc_str(status));
	mem_free(status);
	if (o.perf)
		perf_warnings(c, what);
	if (c->report)
		c->report->injected++;
out:
	mem_free(sel);
	inj_opts_free(&o);
	return rc;
}

static void remove_named(struct doc_node *list, const char *key, const char *name)
{
	for (size_t i = list ? list->n : 0; doc_is(list, DOC_SEQ) && i-- > 0;) {
		const char *n = doc_get_str(list->vals[i], key);

		if (n && strcmp(n, name) == 0)
			doc_remove(list, i);
	}
}

static int pod_uninject(const struct inj_ctx *c, struct doc_node *holder, struct doc_node *spec,
			const char *what, struct err_msg *em)
{
	struct doc_node *md = doc_get(holder, "metadata"), *ann = doc_get(md, "annotations");
	struct doc_node *ctrs = doc_get(spec, "containers"), *vols = doc_get(spec, "volumes");
	struct inj_status st;
	int rc;

	if (doc_get(ann, INJ_STATUS_KEY) == NULL)
		return 0;
	if ((rc = inj_status_load(c, doc_get(ann, INJ_STATUS_KEY), INJ_STATUS_KEY, what, &st, em)) != 0)
		return rc;
	remove_named(doc_get(spec, "initContainers"), "name", INJ_AGENT_NAME);
	remove_named(ctrs, "name", INJ_AGENT_NAME);
	inj_prune(spec, "initContainers", st.wflags, 'I');
	remove_named(vols, "name", INJ_VOL_DIAG);
	remove_named(vols, "name", INJ_VOL_DUMPS);
	remove_named(vols, "name", INJ_VOL_AUTH);
	remove_named(vols, "name", INJ_VOL_TLS);
	for (size_t i = 0; i < INJ_NSOURCES; i++)
		remove_named(vols, "name", inj_sources[i].volume);
	inj_prune(spec, "volumes", st.wflags, 'V');
	if (is_true(doc_get(spec, "shareProcessNamespace"))) /* as perf set it; someone's false since then stays */
		inj_unput(spec, "shareProcessNamespace", st.wflags, 'N');
	for (size_t i = 0; i < st.n; i++) {
		long k = inj_seq_find(ctrs, "name", st.c[i].name);
		char *cwhat;

		if (k < 0)
			return inj_fail(c, em, ctrs, DP_EREFUSED, what,
					"the status record names container %s, which is gone; remove the rest by hand",
					st.c[i].name);
		cwhat = mem_printf("%s: container %.*s%s", what, SHOWN(st.c[i].name));
		rc = uninj_container(c, &inj_k8s_dialect, ctrs->vals[k], &st.c[i], cwhat, em);
		mem_free(cwhat);
		if (rc != 0)
			return rc;
	}
	doc_del(ann, INJ_STATUS_KEY);
	inj_prune(md, "annotations", st.wflags, 'A');
	inj_prune(holder, "metadata", st.wflags, 'T');
	return 0;
}

typedef int (*pod_fn)(const struct inj_ctx *, struct doc_node *, struct doc_node *, const char *, struct err_msg *);

/*
 * diagport reads its annotations (and the inject label) from the pod
 * template, which is what the pods get; on a workload's own metadata they
 * do nothing, silently, unless said so.
 */
static void misplaced_options(const struct inj_ctx *c, const struct doc_node *obj, const char *tmpl, const char *what)
{
	/* the workload's own metadata, and a CronJob's Job template's */
	const struct doc_node *mds[] = { doc_get(obj, "metadata"), doc_path(obj, "spec/jobTemplate/metadata") };
	const char *whose[] = { "the workload's own metadata", "spec/jobTemplate/metadata" };
	const char *lists[] = { "annotations", "labels" };

	for (size_t k = 0; k < 2; k++)
		for (size_t l = 0; l < 2; l++) {
			const struct doc_node *m = doc_get(mds[k], lists[l]);

			for (size_t i = 0; doc_is(m, DOC_MAP) && i < m->n; i++)
				if (strncmp(m->keys[i]->text, INJ_PREFIX, strlen(INJ_PREFIX)) == 0) {
					inj_report_warn(c->report, "%s: %s %s is on %s, which diagport does not read; put "
							"it under %s/metadata/%s", what, l ? "label" : "annotation",
							m->keys[i]->text, whose[k], tmpl, lists[l]);
					break;
				}
		}
}

bool inj_k8s_is_list(const struct doc_node *obj)
{
	const char *kind = doc_get_str(obj, "kind");
	size_t n = kind ? strlen(kind) : 0;

	/* List, and a list of one kind as the API server gives it (DeploymentList: GET .../deployments) */
	return n >= 4 && strcmp(kind + n - 4, "List") == 0 && doc_get_str(obj, "apiVersion") &&
	       doc_is(doc_get(obj, "items"), DOC_SEQ);
}

static int each_object(struct doc_node *obj, const struct doc_node *list, const struct inj_ctx *c, pod_fn fn,
		       struct err_msg *em);

/*
 * An item of a List. The items of a list of one kind (DeploymentList) come
 * from the API server without apiVersion and kind: the list's say what
 * they are. A List's items name their own.
 */
static int each_item(struct doc_node *item, const struct doc_node *list, const struct inj_ctx *c, pod_fn fn,
		     struct err_msg *em)
{
	return each_object(item, strcmp(doc_get_str(list, "kind"), "List") != 0 ? list : NULL, c, fn, em);
}

static int each_object(struct doc_node *obj, const struct doc_node *list, const struct inj_ctx *c, pod_fn fn,
		       struct err_msg *em)
{
	const char *kind = doc_get_str(obj, "kind");
	struct doc_node *items;
	char *kind_of_list = NULL, *what;
	int rc = 0;

	if (kind == NULL && list && doc_get(obj, "apiVersion") == NULL) {
		const char *lk = doc_get_str(list, "kind");

		kind = kind_of_list = mem_strndup(lk, strlen(lk) - 4);
	} else if (kind == NULL || doc_get_str(obj, "apiVersion") == NULL) {
		bool ecs = doc_get(obj, "containerDefinitions") || doc_get(obj, "taskDefinition"),
		     cfn = doc_get(obj, "Resources") != NULL;

		return inj_fail(c, em, obj, DP_ESYNTAX, "document", "not a Kubernetes object (no apiVersion and kind)%s",
				ecs ? "; it looks like an ECS task definition: diagport inject ecs" :
				cfn ? "; it looks like a CloudFormation template: diagport inject cfn" : "");
	}
	if (inj_k8s_is_list(obj)) {
		items = doc_get(obj, "items");
		for (size_t i = 0; i < items->n && rc == 0; i++)
			rc = each_item(items->vals[i], obj, c, fn, em);
		goto out;
	}
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		struct doc_node *holder, *spec;

		if (strcmp(kind, kinds[k].kind) != 0)
			continue;
		what = describe_as(obj, kind);
		holder = kinds[k].template ? doc_path(obj, kinds[k].template) : obj;
		if (fn == pod_inject && kinds[k].template)
			misplaced_options(c, obj, kinds[k].template, what);
		spec = doc_get(holder, "spec");
		if (!doc_is(holder, DOC_MAP) || !doc_is(spec, DOC_MAP))
			rc = inj_fail(c, em, obj, DP_EREFUSED, what, "has no %s%sspec to inject into",
				      kinds[k].template ? kinds[k].template : "", kinds[k].template ? "/" : "");
		else
			rc = fn(c, holder, spec, what, em);
		mem_free(what);
		goto out;
	}
	if (c->report)
		c->report->passed++;
out:
	mem_free(kind_of_list);
	return rc;
}

int inj_k8s_object(struct doc_node *obj, const struct inj_ctx *c, struct err_msg *em)
{
	return each_object(obj, NULL, c, pod_inject, em);
}

int uninj_k8s_object(struct doc_node *obj, const struct inj_ctx *c, struct err_msg *em)
{
	return each_object(obj, NULL, c, pod_uninject, em);
}

int inj_k8s_list_item(struct doc_node *item, const struct doc_node *list, bool inject, const struct inj_ctx *c,
		      struct err_msg *em)
{
	return each_item(item, list, c, inject ? pod_inject : pod_uninject, em);
}

int inj_k8s_pod(struct doc_node *pod, const struct inj_ctx *c, struct err_msg *em)
{
	struct doc_node *spec = doc_get(pod, "spec");
	char *what = describe(pod);
	int rc;

	if (!doc_is(spec, DOC_MAP))
		rc = inj_fail(c, em, pod, DP_EREFUSED, what, "has no spec");
	else
		rc = pod_inject(c, pod, spec, what, em);
	mem_free(what);
	return rc;
}

/*
 * compose.c - the Compose front-end (the Compose Specification, as docker
 * compose and podman-compose read it): one agent service, diagport-agent,
 * for the whole project, like a pod's sidecar serving every app container of
 * the pod; every other service (or those the containers option names) gets
 * DOTNET_DiagnosticPorts, the two volumes, SYS_PTRACE (ptrace: true), a dependency on the
 * agent and its status label.
 *
 * This file is the project: its options (command line, then the top-level
 * x-diagport map), which services, the collisions, the agent service and the
 * top-level volumes, the record on the agent's labels, and the refusal to
 * write merge keys as JSON. One service's rules are in compose_svc.c.
 */
#include "inj_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "mem.h"

#define MERGE_KEY "<<"
#define MERGE_TAG "tag:yaml.org,2002:merge"

/* A merge key under n: a plain "<<" key, or one tagged !!merge. JSON has none to write it as. */
static int refuse_merges(const struct doc_node *n, const char *file, struct err_msg *em)
{
	if (n == NULL || (n->type != DOC_MAP && n->type != DOC_SEQ))
		return 0;
	for (size_t i = 0; i < n->n; i++) {
		const struct doc_node *k = n->type == DOC_MAP ? n->keys[i] : NULL;
		int rc;

		if (k && strcmp(k->text, MERGE_KEY) == 0 &&
		    ((k->tag == NULL && k->style == DOC_STYLE_PLAIN) || (k->tag && strcmp(k->tag, MERGE_TAG) == 0)))
			return err_set(em, DP_EUNSUPPORTED, "%s:%u:%u: a YAML merge key (<<) cannot be written as "
				       "JSON, which has none; write YAML (-o yaml)", file, k->line, k->col);
		if ((rc = refuse_merges(n->vals[i], file, em)) != 0)
			return rc;
	}
	return 0;
}

int inj_compose_merge_keys(struct doc_node *doc, bool yaml, const char *file, struct err_msg *em)
{
	return yaml ? 0 : refuse_merges(doc, file, em); /* YAML writes them back as they were written */
}

/* ---- the project ---- */

int uninj_compose_project(struct doc_node *doc, const struct inj_ctx *c, struct err_msg *em)
{
	struct doc_node *services = doc_get(doc, "services"), *vols;
	const struct doc_node *rec;
	struct inj_status st;
	size_t skip;
	int rc;

	if (!doc_is(services, DOC_MAP))
		return 0;
	rec = inj_compose_status_label(doc_get(services, INJ_AGENT_NAME), &skip);
	if (rec == NULL) {
		for (size_t i = 0; i < services->n; i++)
			if (inj_compose_status_label(services->vals[i], &skip))
				return inj_fail(c, em, services->keys[i], DP_EREFUSED, "service", "%s has a label "
						INJ_STATUS_KEY " but there is no " INJ_AGENT_NAME " service with the "
						"project's record; remove the rest by hand", services->keys[i]->text);
		return 0;
	}
	if (!doc_strval(rec) || strlen(rec->text) < skip ||
	    inj_status_parse(rec->text + skip, &st, em) != 0) {
		struct err_msg inner = *em;

		return inj_fail(c, em, rec, DP_EREFUSED, "service " INJ_AGENT_NAME, "label " INJ_STATUS_KEY ": %s",
				doc_strval(rec) ? inner.text : "not a string");
	}
	for (size_t i = 0; i < st.n; i++) {
		struct doc_node *svc = doc_get(services, st.c[i].name);
		char *what = mem_printf("service %s", st.c[i].name);

		if (!doc_is(svc, DOC_MAP))
			rc = inj_fail(c, em, services, DP_EREFUSED, "services", "the status record on " INJ_AGENT_NAME
				      " names service %s, which is gone; remove the rest by hand", st.c[i].name);
		else if ((rc = uninj_compose_service(c, svc, &st.c[i], what, em)) == 0)
			rc = inj_compose_leftover(c, svc, what, em);
		mem_free(what);
		if (rc != 0)
			return rc;
	}
	for (size_t i = 0; i < services->n; i++)
		if (strcmp(services->keys[i]->text, INJ_AGENT_NAME) != 0 && inj_compose_status_label(services->vals[i], &skip))
			return inj_fail(c, em, services->keys[i], DP_EREFUSED, "services", "service %s still has a label "
					INJ_STATUS_KEY " after uninject: the project's record on " INJ_AGENT_NAME
					" does not name it (edited by hand?); remove the rest by hand",
					services->keys[i]->text);
	doc_del(services, INJ_AGENT_NAME);
	vols = doc_get(doc, "volumes");
	if (doc_is(vols, DOC_MAP)) {
		doc_del(vols, INJ_VOL_DIAG);
		doc_del(vols, INJ_VOL_DUMPS);
	}
	inj_prune(doc, "volumes", st.wflags, 'V');
	return 0;
}

/*
 * A refusal of the options as a whole (inj_opts_check, inj_agent_check name
 * no node) placed at x-diagport's line when the project has that map, where
 * one of the two options is.
 */
static int at_xdiagport(const struct inj_ctx *c, const struct doc_node *xd, int rc, struct err_msg *em)
{
	char *prefix = mem_printf("%s: project: ", c->file ? c->file : "<input>");
	struct err_msg inner = *em;

	if (xd && doc_is(xd, DOC_MAP) && xd->n > 0 && strncmp(inner.text, prefix, strlen(prefix)) == 0)
		rc = inj_fail(c, em, xd->keys[0], rc, "x-diagport", "%s", inner.text + strlen(prefix));
	mem_free(prefix);
	return rc;
}

/*
 * An option (its value v) that names an entry of the project's top-level
 * secrets or configs (list): 0, or DP_EREFUSED when the project does not
 * define it, placed at the option in x-diagport when it is there, else at
 * that map. settings: the entry holds a settings file (for the example).
 */
static int project_defines(const struct inj_ctx *c, struct doc_node *doc, const struct doc_node *xd,
			   const char *option, const char *list, const char *v, bool settings, struct err_msg *em)
{
	const struct doc_node *at;
	struct doc_node *defs;
	int rc;

	if (v == NULL)
		return 0;
	if ((rc = inj_map_field(c, doc, list, "project", &defs, em)) != 0)
		return rc;
	if (doc_find(defs, v) >= 0)
		return 0;
	at = doc_get(xd, option) ? doc_get(xd, option) : defs ? defs : doc;
	return inj_fail(c, em, at, DP_EREFUSED, "project", "%s names the %.*s %s, which the project does not "
			"define; add it under the top-level %s (e.g. `%s: {file: ./%s%s}`%s)", option,
			(int)strlen(list) - 1, list, v, list, v, v, settings ? ".yaml" : "",
			settings ? ", a settings file" : "");
}

/* project_opts with x-diagport's pairs (xd, its merge keys resolved; NULL when there is none). */
static int project_opts_from(const struct inj_ctx *c, struct doc_node *doc, struct doc_node *xd, struct inj_opts *o,
			     struct err_msg *em)
{
	int rc;

	if ((rc = inj_opts_from_map(c, c->base, xd, false, "", "x-diagport", o, em)) != 0 ||
	    (rc = inj_opts_enforce(c, o, "project", em)) != 0)
		return rc;
	if (doc_get(xd, "sidecar"))
		return inj_fail(c, em, doc_get(xd, "sidecar"), DP_EREFUSED, "x-diagport", "sidecar is a Kubernetes "
				"option; on Compose the agent is always a service of its own");
	if (o->flavour == INJ_FLAVOUR_DOTNET_MONITOR)
		return inj_fail(c, em, doc_get(xd, "flavour") ? doc_get(xd, "flavour") : doc_get(xd, "flavor"),
				DP_EREFUSED, "project", "flavour dotnet-monitor is not supported for Compose (its API key "
				"would have to come from environment variables); use the diagport agent");
	if (o->perf) /* x-diagport's own perf: true is the project's refusal; the command line's, a usage error */
		return inj_compose_perf(c, doc_get(xd, "perf"), doc_get(xd, "perf") ? DP_EREFUSED : DP_EINVAL,
					doc_get(xd, "perf") ? "x-diagport" : "project", em);
	if ((rc = inj_opts_check(c, o, "project", em)) != 0 || (rc = inj_agent_check(c, o, "project", em)) != 0)
		return at_xdiagport(c, xd, rc, em);
	if ((rc = project_defines(c, doc, xd, "auth-secret", "secrets", o->auth_secret, false, em)) != 0 ||
	    (rc = project_defines(c, doc, xd, "tls-secret", "secrets", o->tls_secret, false, em)) != 0)
		return rc;
	for (size_t i = 0; i < INJ_NSOURCES; i++)
		if ((rc = project_defines(c, doc, xd, inj_sources[i].option, inj_sources[i].compose_list,
					  inj_source_value(&inj_sources[i], o), true, em)) != 0)
			return rc;
	return 0;
}

/* The project's options: the command line's, then x-diagport's; checked for what Compose can do. */
static int project_opts(const struct inj_ctx *c, struct doc_node *doc, struct inj_opts *o, struct err_msg *em)
{
	struct doc_node *xd;
	int rc;

	if ((rc = inj_map_field(c, doc, "x-diagport", "project", &xd, em)) != 0)
		return rc;
	xd = xd ? inj_merged_map(xd) : NULL; /* x-diagport: {<<: *defaults, ...} */
	rc = project_opts_from(c, doc, xd, o, em);
	doc_free(xd);
	return rc;
}

/* Which services: the containers option's (each must exist), else all; at most INJ_MAX_CONTAINERS. */
static int select_services(const struct inj_ctx *c, const struct doc_node *services, const struct inj_opts *o,
			   bool *sel, struct err_msg *em)
{
	const char *p = o->containers;
	size_t n = 0;

	for (size_t i = 0; i < services->n; i++)
		sel[i] = p == NULL;
	for (const char *q = p; q && *q; q++)
		n += *q == ',';
	if (p && n >= INJ_MAX_CONTAINERS)
		return inj_fail(c, em, NULL, DP_EREFUSED, "project", "the containers option names more than %d "
				"services, the most one status record holds", INJ_MAX_CONTAINERS);
	while (p && *p) {
		size_t len = strcspn(p, ",");
		bool hit = false;

		for (size_t i = 0; i < services->n; i++)
			if (strlen(services->keys[i]->text) == len && strncmp(services->keys[i]->text, p, len) == 0)
				sel[i] = hit = true;
		if (!hit)
			return inj_fail(c, em, services, DP_EREFUSED, "services", "the containers option names '%.*s', "
					"but the project has no such service", (int)len, p);
		p += len + (p[len] == ',');
	}
	return 0;
}

static int check_project(const struct inj_ctx *c, struct doc_node *doc, struct doc_node **services,
			 struct doc_node **vols, struct err_msg *em)
{
	int rc;

	if ((rc = inj_map_field(c, doc, "services", "project", services, em)) != 0 ||
	    (rc = inj_map_field(c, doc, "volumes", "project", vols, em)) != 0)
		return rc;
	if (*services == NULL || (*services)->n == 0)
		return inj_fail(c, em, doc, DP_EREFUSED, "project", "has no services");
	if (doc_find(*services, MERGE_KEY) >= 0)
		return inj_fail(c, em, (*services)->keys[doc_find(*services, MERGE_KEY)], DP_EUNSUPPORTED, "services",
				"a merge key (<<) among the services: diagport injects services it can name");
	if (doc_find(*services, INJ_AGENT_NAME) >= 0)
		return inj_fail(c, em, doc_get(*services, INJ_AGENT_NAME), DP_EREFUSED, "services",
				"a service named %s already exists and has no diagport status record; diagport "
				"adds a service of that name, so rename yours", INJ_AGENT_NAME);
	for (size_t i = 0; *vols && i < (*vols)->n; i++) {
		const char *v = (*vols)->keys[i]->text;

		if (strcmp(v, INJ_VOL_DIAG) == 0 || strcmp(v, INJ_VOL_DUMPS) == 0)
			return inj_fail(c, em, (*vols)->keys[i], DP_EREFUSED, "volumes", "a volume named %s already "
					"exists and there is no diagport status record; diagport adds a volume of "
					"that name, so rename yours", v);
	}
	return 0;
}

static struct doc_node *volume(const struct inj_opts *o, bool dumps)
{
	struct doc_node *v = doc_map(), *d;
	long long bytes = 0;
	char size[48];

	if (!dumps || o->dumps_limit == NULL || inj_quantity(o->dumps_limit, false, &bytes) != 0)
		return v;
	/* the size cap of a named volume: a tmpfs of that size (the agent also gets --dumps-limit) */
	d = doc_map();
	snprintf(size, sizeof(size), "size=%lld", bytes);
	doc_set(d, "type", doc_str("tmpfs"));
	doc_set(d, "device", doc_str("tmpfs"));
	doc_set(d, "o", doc_str(size));
	doc_set(v, "driver_opts", d);
	return v;
}

/*
 * The first service that extends service name from this same file
 * (`extends: NAME`, or `extends: {service: NAME}` without `file`), or NULL.
 * Borrowed.
 */
static const char *extended_by(const struct doc_node *services, const char *name)
{
	for (size_t i = 0; i < services->n; i++) {
		const struct doc_node *e = inj_merged_get(services->vals[i], "extends");
		const char *base = doc_strval(e) ? e->text : doc_get_str(e, "service");

		if (base && strcmp(base, name) == 0 && !(doc_is(e, DOC_MAP) && doc_get(e, "file")))
			return services->keys[i]->text;
	}
	return NULL;
}

/*
 * What extends means for an injected service: a base gets no depends_on
 * (by: the service extending it); a service that extends another one gets
 * our DOTNET_DiagnosticPorts as its own, which replaces the base's, not
 * appended to it (said when the base has one, or is in a file diagport does
 * not read).
 */
static void warn_extends(const struct inj_ctx *c, const struct doc_node *services, const struct doc_node *svc,
			 const struct inj_opts *so, const char *by, const char *what)
{
	const struct doc_node *e = inj_merged_get(svc, "extends");
	const char *base = doc_strval(e) ? e->text : doc_get_str(e, "service");
	const char *file = doc_get_str(e, "file"), *v;

	if (by)
		inj_report_warn(c->report, "%s is extended by service %s, and Compose refuses to extend a service "
				"that has depends_on: it gets none on %s, so it may start before the agent%s", what,
				by, INJ_AGENT_NAME, so->mode == INJ_SUSPEND ? " (its runtime waits, suspended, until "
				"the agent listens)" : "");
	if (base && file)
		inj_report_warn(c->report, "%s extends service %s of %s, which diagport does not read: a %s set there "
				"is replaced by the one diagport adds, not appended to", what, base, file, INJ_ENV);
	else if (base && (v = inj_compose_env_value(doc_get(services, base), INJ_ENV)) != NULL &&
		 strcmp(v, inj_port_value(so->mode)) != 0)
		inj_report_warn(c->report, "%s extends service %s, whose %s ('%s') is replaced by the one diagport "
				"adds, not appended to", what, base, INJ_ENV, v);
}

/* Inject each selected service that does not opt out; the first one's user becomes the agent's. */
static int inject_services(const struct inj_ctx *c, struct doc_node *services, const struct inj_opts *o,
			   const bool *sel, struct inj_status *st, char **user, struct err_msg *em)
{
	int rc = 0;

	for (size_t i = 0; i < services->n && rc == 0; i++) {
		const char *name = services->keys[i]->text;
		struct doc_node *svc = services->vals[i];
		char *what = mem_printf("service %s", name);
		struct inj_opts so;

		if (!sel[i])
			goto next;
		if (!doc_is(svc, DOC_MAP) || !inj_name_ok(name, strlen(name))) {
			rc = inj_fail(c, em, services->keys[i], DP_EREFUSED, what, "%s", doc_is(svc, DOC_MAP) ?
				      "not a service name diagport can record (letters, digits, '-', '_', '.')" :
				      "is not a map");
			goto next;
		}
		if ((rc = inj_compose_service_opts(c, o, svc, what, &so, em)) != 0)
			goto next;
		if (so.inject == 0) {
			if (c->report)
				c->report->skipped++;
		} else if (st->n == INJ_MAX_CONTAINERS) {
			rc = inj_fail(c, em, services->keys[i], DP_EREFUSED, what, "more than %d services to inject "
				      "(the most one status record holds); choose them with the containers option",
				      INJ_MAX_CONTAINERS);
		} else {
			snprintf(st->c[st->n].name, sizeof(st->c[0].name), "%s", name);
			const char *by = extended_by(services, name);

			so.sidecar = INJ_SIDECAR_CONTAINER;
			rc = inj_compose_service(c, svc, &so, by == NULL, what, &st->c[st->n], em);
			if (rc == 0)
				warn_extends(c, services, svc, &so, by, what);
			if (rc == 0 && *user == NULL)
				*user = inj_agent_user_text(inj_scalar_text(inj_merged_get(svc, "user")));
			if (rc == 0 && inj_merged_get(svc, "env_file"))
				inj_report_warn(c->report, "%s has env_file: a %s set there overrides the one diagport "
						"adds to environment", what, INJ_ENV);
			st->n += rc == 0;
		}
		inj_opts_free(&so);
next:
		mem_free(what);
	}
	return rc;
}

int inj_compose_project(struct doc_node *doc, const struct inj_ctx *c, struct err_msg *em)
{
	struct doc_node *services, *vols;
	struct inj_status st;
	struct inj_opts o;
	bool *sel = NULL;
	char *user = NULL, *status;
	int rc;

	inj_opts_init(&o);
	memset(&st, 0, sizeof(st));
	if ((rc = uninj_compose_project(doc, c, em)) != 0 || (rc = check_project(c, doc, &services, &vols, em)) != 0 ||
	    (rc = project_opts(c, doc, &o, em)) != 0 || o.inject == 0)
		goto out;
	sel = mem_array(services->n, sizeof(bool));
	if ((rc = select_services(c, services, &o, sel, em)) != 0 ||
	    (rc = inject_services(c, services, &o, sel, &st, &user, em)) != 0 || st.n == 0)
		goto out;
	if (vols == NULL)
		vols = inj_create(doc, "volumes", DOC_MAP, st.wflags, sizeof(st.wflags), 'V');
	doc_set(vols, INJ_VOL_DIAG, volume(&o, false));
	doc_set(vols, INJ_VOL_DUMPS, volume(&o, true));
	o.sidecar = INJ_SIDECAR_CONTAINER;
	status = inj_status_format(&st, &o);
	doc_set(services, INJ_AGENT_NAME, inj_agent_compose(&o, user, status));
	mem_free(status);
	if (!o.auth_secret && !o.no_auth)
		inj_report_warn(c->report, "%s listens on its own loopback only (no auth-secret, no auth: none): "
				"reach it from its network namespace, e.g. `docker run --rm --network "
				"container:$(docker compose ps -q %s) curlimages/curl http://127.0.0.1:%d/processes`; "
				"with a token (x-diagport auth-secret: a secret of the project) it is published on "
				"127.0.0.1:%d", INJ_AGENT_NAME, INJ_AGENT_NAME, o.port, o.port);
	/* every service, by default: one that is not .NET gets the variable (and SYS_PTRACE if asked) for nothing */
	if (!o.containers && st.n > 1) {
		struct buf names;

		buf_init(&names, 4096);
		for (size_t i = 0; i < st.n; i++)
			buf_printf(&names, "%s%s", i ? ", " : "", st.c[i].name);
		inj_report_warn(c->report, "injected every service (%s): one that is not .NET (a database, a cache) gets "
				"%s%s and %s for nothing; name the .NET ones (--containers, x-diagport containers) or "
				"opt the others out (label %sinject: \"false\")", names.data, INJ_ENV,
				o.crash_dumps ? ", the crash-dump settings" : "", o.ptrace ? "SYS_PTRACE" : "nothing else",
				INJ_PREFIX);
		buf_free(&names);
	}
	if (c->report)
		c->report->injected++;
out:
	if (c->report && rc == 0 && st.n == 0) {
		c->report->skipped++;
		if (o.inject != 0)
			inj_report_warn(c->report, "no service was injected: every selected service opts out (label "
					"%sinject) or none is selected", INJ_PREFIX);
	}
	mem_free(user);
	mem_free(sel);
	inj_opts_free(&o);
	return rc;
}

/*
 * ecs.c - ECS task definitions: the rules for a task (shared with the
 * CloudFormation front-end through the dialect: camelCase here, PascalCase
 * there) and the ECS JSON front-end itself.
 *
 * ECS-only parts: the agent is not essential and has a health check that
 * needs no shell; app containers depend on it (HEALTHY in suspend mode, so
 * the app starts only once the agent listens; START otherwise); volumes are
 * task-scoped bind mounts; the task's memory must still hold every container
 * plus the agent. What ECS forbids is refused with a message, not sent to
 * the API to fail there: Windows tasks (no Unix sockets or Linux
 * capabilities) and COMPLETE/SUCCESS dependencies on essential containers.
 */
#include "inj_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

#define K(d, camel_, pascal_) ((d)->pascal ? (pascal_) : (camel_))

/* Read-only fields of describe-task-definition output that register-task-definition rejects. */
static const char *const read_only[] = {
	"taskDefinitionArn", "revision", "status", "requiresAttributes", "compatibilities",
	"registeredAt", "registeredBy", "deregisteredAt",
};

/* MiB from an ECS memory value: 512, "512", "1GB", "0.5 GB". -1 when unknown (absent or intrinsic). */
static long long mib(const struct doc_node *n)
{
	const char *t;
	char *end;
	double v;

	if (n == NULL || (n->type != DOC_NUMBER && n->type != DOC_STRING) || inj_intrinsic(n))
		return -1;
	t = n->text;
	v = strtod(t, &end);
	if (end == t)
		return -1;
	while (*end == ' ')
		end++;
	if (strcasecmp(end, "GB") == 0)
		v *= 1024;
	else if (*end != '\0' && strcasecmp(end, "MB") != 0 && strcasecmp(end, "MiB") != 0)
		return -1;
	return (long long)v;
}

static bool essential(const struct inj_dialect *d, const struct doc_node *ctr)
{
	const struct doc_node *e = doc_get(ctr, K(d, "essential", "Essential"));

	return !(doc_is(e, DOC_BOOL) && (e->text[0] == 'f' || e->text[0] == 'F'));
}

static int check_task(const struct inj_ctx *c, const struct inj_dialect *d, const struct doc_node *td,
		      const struct doc_node *defs, const char *what, struct err_msg *em)
{
	const struct doc_node *os = doc_get(doc_get(td, K(d, "runtimePlatform", "RuntimePlatform")),
					    K(d, "operatingSystemFamily", "OperatingSystemFamily"));

	if (doc_strval(os) && strncmp(doc_strval(os), "WINDOWS", 7) == 0)
		return inj_fail(c, em, os, DP_EREFUSED, what,
				"this is a Windows task (%s); the .NET diagnostic port diagport uses is a Unix socket "
				"and SYS_PTRACE a Linux capability, so Windows tasks cannot be injected", os->text);
	for (size_t i = 0; i < defs->n; i++) {
		const struct doc_node *deps = doc_get(defs->vals[i], K(d, "dependsOn", "DependsOn"));

		if (!doc_is(defs->vals[i], DOC_MAP))
			return inj_fail(c, em, defs->vals[i], DP_EUNSUPPORTED, what,
					"%s[%zu] is %s, not a container definition; diagport cannot rewrite it",
					K(d, "containerDefinitions", "ContainerDefinitions"), i,
					inj_intrinsic(defs->vals[i]) ? inj_intrinsic(defs->vals[i]) : "not a map");
		for (size_t k = 0; doc_is(deps, DOC_SEQ) && k < deps->n; k++) {
			const char *cond = doc_get_str(deps->vals[k], K(d, "condition", "Condition"));
			const char *target = doc_get_str(deps->vals[k], K(d, "containerName", "ContainerName"));
			long t = target ? inj_seq_find(defs, d->c_name, target) : -1;

			if (cond && t >= 0 && (strcmp(cond, "COMPLETE") == 0 || strcmp(cond, "SUCCESS") == 0) &&
			    essential(d, defs->vals[t]))
				return inj_fail(c, em, deps->vals[k], DP_EREFUSED, what,
						"container %s depends on %s with condition %s, but %s is essential; ECS "
						"rejects such a task definition (mark %s essential: false, or use START/HEALTHY)",
						doc_get_str(defs->vals[i], d->c_name), target, cond, target, target);
		}
	}
	return 0;
}

static int check_memory(const struct inj_ctx *c, const struct inj_dialect *d, const struct doc_node *td,
			const struct doc_node *defs, const struct inj_opts *o, const char *what, struct err_msg *em)
{
	const struct doc_node *tm = doc_get(td, K(d, "memory", "Memory"));
	long long task = mib(tm), sum = 0, res, lim;

	if (tm == NULL)
		return 0;
	if (task < 0) {
		if (c->report)
			inj_report_warn(c->report, "%s: the task's memory is not a literal value; cannot check that "
					"the agent still fits", what);
		return 0;
	}
	if (inj_agent_mem_mib(o, &res, &lim, em) != 0)
		return DP_EINVAL;
	for (size_t i = 0; i < defs->n; i++) {
		long long m = mib(doc_get(defs->vals[i], K(d, "memory", "Memory")));

		if (m < 0)
			m = mib(doc_get(defs->vals[i], K(d, "memoryReservation", "MemoryReservation")));
		if (m > 0)
			sum += m;
	}
	if (sum + lim > task)
		return inj_fail(c, em, tm, DP_EREFUSED, what,
				"the task has %lld MiB of memory; its containers take %lld MiB and the agent needs "
				"%lld MiB more (its hard limit), which would not fit. Raise the task's memory or lower "
				"the agent's limit (resources option, memory-limit=...)", task, sum, lim);
	return 0;
}

static int add_depends(const struct inj_ctx *c, const struct inj_dialect *d, struct doc_node *ctr,
		       const struct inj_opts *o, const char *what, struct inj_cstat *cs, struct err_msg *em)
{
	struct doc_node *deps, *dep;
	bool healthy = o->mode == INJ_SUSPEND && o->flavour == INJ_FLAVOUR_DIAGPORT;
	int rc = inj_seq_field(c, ctr, K(d, "dependsOn", "DependsOn"), what, &deps, em);

	if (rc != 0)
		return rc;
	if (deps == NULL)
		deps = inj_create(ctr, K(d, "dependsOn", "DependsOn"), DOC_SEQ, cs->flags, sizeof(cs->flags), 'd');
	dep = doc_map();
	doc_set(dep, K(d, "containerName", "ContainerName"), doc_str(INJ_AGENT_NAME));
	doc_set(dep, K(d, "condition", "Condition"), doc_str(healthy ? "HEALTHY" : "START"));
	doc_push(deps, dep);
	inj_flag_add(cs->flags, sizeof(cs->flags), 'D');
	return 0;
}

/*
 * ECS fetches a container's secrets with the task execution role, and
 * refuses secrets in a task definition without one; CloudFormation users may
 * add the role later (the CDK does, when it grants a secret), so this is a
 * warning, for every option that gives the agent a secret alike.
 */
static void warn_execution_role(const struct inj_ctx *c, const struct inj_dialect *d, const struct doc_node *td,
				const struct inj_opts *o, const char *what)
{
	const char *key = K(d, "executionRoleArn", "ExecutionRoleArn");
	char names[128] = "";
	size_t k = 0;

	if (o->auth_secret)
		k += (size_t)snprintf(names + k, sizeof(names) - k, "auth-secret");
	if (o->tls_secret)
		k += (size_t)snprintf(names + k, sizeof(names) - k, "%stls-secret", k ? ", " : "");
	for (size_t i = 0; i < INJ_NSOURCES && k < sizeof(names); i++)
		if (inj_source_value(&inj_sources[i], o))
			k += (size_t)snprintf(names + k, sizeof(names) - k, "%s%s", k ? ", " : "", inj_sources[i].option);
	if (k == 0 || doc_get(td, key) != NULL)
		return;
	inj_report_warn(c->report, "%s: the agent gets secrets (%s) and the task definition has no %s: ECS fetches "
			"secrets with the task execution role and refuses a task definition with secrets and no role; "
			"give it one that may read them (secretsmanager:GetSecretValue on a secret, ssm:GetParameters "
			"on a parameter, and kms:Decrypt when a customer key encrypts them)", what, names, key);
}

int inj_taskdef(const struct inj_ctx *c, const struct inj_dialect *d, struct doc_node *td,
		const struct inj_opts *o, const char *what, struct inj_status *st, struct err_msg *em)
{
	const char *defs_key = K(d, "containerDefinitions", "ContainerDefinitions");
	const char *vols_key = K(d, "volumes", "Volumes");
	struct doc_node *defs, *vols, *v;
	struct inj_agent_user u = { 0 };
	const struct doc_node *logs = NULL;
	struct doc_node *agent;
	bool *sel = NULL;
	int rc;

	if ((rc = inj_seq_field(c, td, defs_key, what, &defs, em)) != 0 ||
	    (rc = inj_seq_field(c, td, vols_key, what, &vols, em)) != 0)
		return rc;
	if (defs == NULL || defs->n == 0)
		return inj_fail(c, em, td, DP_EREFUSED, what, "the task definition has no %s", defs_key);
	if (o->tls_secret && o->flavour == INJ_FLAVOUR_DOTNET_MONITOR)
		return inj_fail(c, em, td, DP_EREFUSED, what,
				"tls-secret with flavour dotnet-monitor: dotnet-monitor reads its certificate from "
				"files only, and ECS mounts no files from a secret; use the diagport agent, which reads "
				"the PEM from the secret's value");
	for (size_t i = 0; i < INJ_NSOURCES && o->flavour == INJ_FLAVOUR_DOTNET_MONITOR; i++)
		if (inj_source_value(&inj_sources[i], o))
			return inj_fail(c, em, td, DP_EREFUSED, what,
					"%s with flavour dotnet-monitor: dotnet-monitor reads no settings document from "
					"one secret; give it DOTNETMONITOR_%s__... variables in the task definition",
					inj_sources[i].option, inj_sources[i].section);
	if ((rc = check_task(c, d, td, defs, what, em)) != 0 ||
	    (rc = inj_check_collisions(c, d, vols, &defs, 1, what, em)) != 0 ||
	    (rc = check_memory(c, d, td, defs, o, what, em)) != 0)
		return rc;
	sel = mem_array(defs->n, sizeof(bool));
	if ((rc = inj_select(c, d, defs, o, what, sel, em)) != 0)
		goto out;
	for (size_t i = 0; i < defs->n; i++) {
		struct doc_node *ctr = defs->vals[i];
		const char *name = doc_get_str(ctr, d->c_name);
		char *cwhat;

		if (!sel[i])
			continue;
		if ((rc = inj_ctr_named(c, d, ctr, defs_key, i, st->n, what, em)) != 0)
			goto out;
		snprintf(st->c[st->n].name, sizeof(st->c[0].name), "%s", name);
		cwhat = mem_printf("%s: container %s", what, name);
		rc = inj_container(c, d, ctr, o, cwhat, &st->c[st->n], em);
		if (rc == 0)
			rc = add_depends(c, d, ctr, o, cwhat, &st->c[st->n], em);
		mem_free(cwhat);
		if (rc != 0)
			goto out;
		if (st->n == 0) {
			u.ecs_user = inj_agent_user_text(doc_get_str(ctr, K(d, "user", "User")));
			logs = doc_get(ctr, K(d, "logConfiguration", "LogConfiguration"));
		}
		st->n++;
	}
	if (vols == NULL)
		vols = inj_create(td, vols_key, DOC_SEQ, st->wflags, sizeof(st->wflags), 'V');
	v = doc_map();
	doc_set(v, d->v_name, doc_str(INJ_VOL_DIAG));
	doc_push(vols, v);
	v = doc_map();
	doc_set(v, d->v_name, doc_str(INJ_VOL_DUMPS));
	doc_push(vols, v);
	/* the agent logs where the first app container does: on Fargate there is nowhere else to look */
	agent = inj_agent_ecs(o, &u, d->pascal);
	if (logs)
		doc_set(agent, K(d, "logConfiguration", "LogConfiguration"), doc_copy(logs));
	doc_push(defs, agent);
	warn_execution_role(c, d, td, o, what);
out:
	mem_free(u.ecs_user);
	mem_free(sel);
	return rc;
}

/*
 * perf cannot be had on ECS. The agent's perf_event_open passes the
 * container runtime's default seccomp profile only with CAP_PERFMON (Docker
 * 23+) or CAP_SYS_ADMIN. Fargate lets a container add SYS_PTRACE and
 * nothing else; on EC2 (and EXTERNAL) ECS's list of capabilities has no
 * PERFMON, and SYS_ADMIN would also let the agent through mount, unshare,
 * setns and bpf: diagport does not trade that for a profiler. Refused, so
 * that nothing half-working is registered; a task already sharing its
 * process namespace (pidMode task) on instances whose Docker allows
 * perf_event_open needs no option (docs/INJECTION.md, "perf").
 */
int inj_taskdef_perf(const struct inj_ctx *c, const struct inj_dialect *d, const struct doc_node *td,
		     const struct doc_node *own, const char *what, struct err_msg *em)
{
	const char *rk = K(d, "requiresCompatibilities", "RequiresCompatibilities");
	const char *add = K(d, "linuxParameters.capabilities.add", "LinuxParameters.Capabilities.Add");
	const struct doc_node *req = doc_get(td, rk);
	int code = own ? DP_EREFUSED : DP_EINVAL; /* the workload's own setting, or the command line's (usage) */
	const char *who = "perf";

	if (own) /* a tag (a map, ECS's or CloudFormation's) or Metadata.diagport.perf (a scalar) */
		who = doc_is(own, DOC_MAP) ? "tag " INJ_PREFIX "perf" : "Metadata.diagport.perf";
	for (size_t i = 0; doc_is(req, DOC_SEQ) && i < req->n; i++)
		if (doc_strval(req->vals[i]) && strcmp(doc_strval(req->vals[i]), "FARGATE") == 0)
			return inj_fail(c, em, own ? own : req->vals[i], code, what,
					"%s: %s holds FARGATE, and Fargate lets a container add no capability but "
					"SYS_PTRACE to %s, so its seccomp profile refuses perf_event_open (it needs "
					"CAP_PERFMON or CAP_SYS_ADMIN): the agent's perf engine cannot run on Fargate. Leave "
					"perf out; CPU profiles with the default engine (EventPipe) need nothing", who, rk, add);
	return inj_fail(c, em, own ? own : req, code, what,
			"%s: ECS cannot grant what perf_event_open needs: Docker's default seccomp profile lets it "
			"through only with CAP_PERFMON or CAP_SYS_ADMIN, %s takes no PERFMON, and diagport does not add "
			"SYS_ADMIN, which would also open mount, unshare, setns and bpf to the agent. Leave perf out "
			"(docs/INJECTION.md, \"perf\", says what to set on instances you run)", who, add);
}

static void remove_named(struct doc_node *list, const char *key, const char *name)
{
	for (size_t i = doc_is(list, DOC_SEQ) ? list->n : 0; i-- > 0;) {
		const char *n = doc_get_str(list->vals[i], key);

		if (n && strcmp(n, name) == 0)
			doc_remove(list, i);
	}
}

int uninj_taskdef(const struct inj_ctx *c, const struct inj_dialect *d, struct doc_node *td,
		  const struct inj_status *st, const char *what, struct err_msg *em)
{
	const char *vols_key = K(d, "volumes", "Volumes"), *deps_key = K(d, "dependsOn", "DependsOn");
	struct doc_node *defs = doc_get(td, K(d, "containerDefinitions", "ContainerDefinitions"));
	struct doc_node *vols = doc_get(td, vols_key);
	int rc;

	remove_named(defs, d->c_name, INJ_AGENT_NAME);
	remove_named(vols, d->v_name, INJ_VOL_DIAG);
	remove_named(vols, d->v_name, INJ_VOL_DUMPS);
	inj_prune(td, vols_key, st->wflags, 'V');
	for (size_t i = 0; i < st->n; i++) {
		long k = inj_seq_find(defs, d->c_name, st->c[i].name);
		struct doc_node *ctr, *deps;
		char *cwhat;

		if (k < 0)
			return inj_fail(c, em, defs, DP_EREFUSED, what,
					"the status record names container %s, which is gone; remove the rest by hand",
					st->c[i].name);
		ctr = defs->vals[k];
		cwhat = mem_printf("%s: container %s", what, st->c[i].name);
		rc = uninj_container(c, d, ctr, &st->c[i], cwhat, em);
		mem_free(cwhat);
		if (rc != 0)
			return rc;
		deps = doc_get(ctr, deps_key);
		if (inj_flag(st->c[i].flags, 'D'))
			remove_named(deps, K(d, "containerName", "ContainerName"), INJ_AGENT_NAME);
		inj_prune(ctr, deps_key, st->c[i].flags, 'd');
	}
	return 0;
}

/* ---- the ECS JSON front-end ---- */

/* describe-task-definition output → register-task-definition input. */
static void unwrap_describe(struct doc_node **doc)
{
	struct doc_node *outer = *doc, *tags = doc_get(outer, "tags");
	long i = doc_find(outer, "taskDefinition");
	struct doc_node *td;

	if (i < 0 || !doc_is(outer->vals[i], DOC_MAP))
		return;
	td = outer->vals[i];
	outer->vals[i] = doc_null(); /* td now belongs to us */
	for (size_t k = 0; k < sizeof(read_only) / sizeof(read_only[0]); k++)
		doc_del(td, read_only[k]);
	if (doc_is(tags, DOC_SEQ) && tags->n > 0 && doc_get(td, "tags") == NULL)
		doc_set(td, "tags", doc_copy(tags));
	doc_free(outer);
	*doc = td;
}

static char *ecs_what(const struct doc_node *td)
{
	const char *fam = doc_get_str(td, "family");

	return mem_printf("task definition %s", fam ? fam : "(no family)");
}

static long status_tag(const struct doc_node *tags)
{
	return inj_seq_find(tags, "key", INJ_STATUS_KEY);
}

int uninj_ecs_taskdef(struct doc_node **doc, const struct inj_ctx *c, struct err_msg *em)
{
	struct doc_node *td, *tags;
	struct inj_status st;
	char *what;
	long t;
	int rc;

	unwrap_describe(doc);
	td = *doc;
	tags = doc_get(td, "tags");
	t = status_tag(tags);
	if (t < 0)
		return 0;
	what = ecs_what(td);
	if ((rc = inj_status_load(c, doc_get(tags->vals[t], "value"), "tag " INJ_STATUS_KEY, what, &st, em)) != 0 ||
	    (rc = uninj_taskdef(c, &inj_ecs_dialect, td, &st, what, em)) != 0)
		goto out;
	doc_remove(tags, (size_t)t);
	inj_prune(td, "tags", st.wflags, 'G');
out:
	mem_free(what);
	return rc;
}

int inj_ecs_taskdef(struct doc_node **doc, const struct inj_ctx *c, struct err_msg *em)
{
	struct doc_node *td, *tags;
	struct inj_opts o;
	struct inj_status st;
	char *what, *status = NULL;
	int rc;

	if ((rc = uninj_ecs_taskdef(doc, c, em)) != 0)
		return rc;
	td = *doc;
	what = ecs_what(td);
	inj_opts_copy(&o, c->base);
	memset(&st, 0, sizeof(st));
	if ((rc = inj_seq_field(c, td, "tags", what, &tags, em)) != 0 ||
	    (rc = inj_opts_from_tags(c, &o, tags, "key", "value", what, em)) != 0 ||
	    (rc = inj_opts_enforce(c, &o, what, em)) != 0 || (rc = inj_opts_check(c, &o, what, em)) != 0 || (rc = inj_agent_check(c, &o, what, em)) != 0)
		goto out;
	if (o.inject == 0) {
		if (c->report)
			c->report->skipped++;
		goto out;
	}
	if (o.perf) {
		long t = inj_seq_find(tags, "key", INJ_PREFIX "perf");

		rc = inj_taskdef_perf(c, &inj_ecs_dialect, td, t >= 0 ? tags->vals[t] : NULL, what, em);
		goto out;
	}
	if ((rc = inj_taskdef(c, &inj_ecs_dialect, td, &o, what, &st, em)) != 0)
		goto out;
	if (tags == NULL)
		tags = inj_create(td, "tags", DOC_SEQ, st.wflags, sizeof(st.wflags), 'G');
	o.sidecar = INJ_SIDECAR_CONTAINER; /* ECS has no native sidecars: the agent is one of the task's containers */
	status = inj_status_format(&st, &o);
	if (strlen(status) > 256) {
		rc = inj_fail(c, em, td, DP_EREFUSED, what,
			      "the status record (%zu characters) does not fit an ECS tag value (256); "
			      "select fewer containers or use shorter names", strlen(status));
		goto out;
	}
	{
		struct doc_node *tag = doc_map();

		doc_set(tag, "key", doc_str(INJ_STATUS_KEY));
		doc_set(tag, "value", doc_str(status));
		doc_push(tags, tag);
	}
	if (c->report)
		c->report->injected++;
out:
	mem_free(status);
	mem_free(what);
	inj_opts_free(&o);
	return rc;
}

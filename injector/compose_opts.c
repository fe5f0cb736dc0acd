/*
 * compose_opts.c - a Compose service's injection options (compose.c asks,
 * compose_svc.c's rules apply them): the project's options, then the
 * service's diagport.dev/ labels (map or list form, through merge keys too).
 * A service's label may set only what is the service's own (inject, mode,
 * ptrace, crash-dumps); the agent's options are the project's one x-diagport map, and a
 * label that names one is refused with where it belongs. perf is refused
 * wherever it is asked for, with why.
 */
#include "inj_int.h"

#include <string.h>

#include "mem.h"

/* Options a service label may set; the rest configure the one agent (x-diagport). */
static const char *const service_options[] = { "inject", "mode", "ptrace", "crash-dumps", NULL };
static const char *const agent_options[] = { "image", "port", "resources", "dumps-size-limit", "flavour", "flavor",
					     "auth-secret", "tls-secret", "auth", "egress-settings", "rules", "captures", NULL };

static bool in_list(const char *const *l, const char *s)
{
	for (; *l; l++)
		if (strcmp(*l, s) == 0)
			return true;
	return false;
}

/*
 * perf on Compose: refused wherever it is asked for (the command line,
 * x-diagport, a service's label). The agent would have to share the app's
 * process namespace, and pid: service:NAME makes one service depend on the
 * other (compose-go adds the dependency), a cycle with the app's dependency
 * on the agent; the other way round the app would die with the agent, the
 * first process of the namespace.
 */
int inj_compose_perf(const struct inj_ctx *c, const struct doc_node *at, int code, const char *what,
		     struct err_msg *em)
{
	return inj_fail(c, em, at, code, what, "perf is not available for Compose: the agent would have to share the "
			"app's process namespace, and Compose's pid: service:NAME either makes the agent depend on the "
			"app, which depends on the agent (a cycle), or puts the app in the agent's namespace, where it "
			"is killed whenever the agent stops; podman's default seccomp profile (containers-common 0.50) "
			"besides lets perf_event_open through only with CAP_SYS_ADMIN. Leave perf out; CPU profiles with "
			"the default engine (EventPipe) need nothing");
}

static int label_option(const struct inj_ctx *c, struct inj_opts *o, const struct doc_node *at, const char *name,
			const char *v, size_t vlen, const char *what, struct err_msg *em)
{
	if (strcmp(name, "status") == 0)
		return 0;
	if (strcmp(name, "perf") == 0)
		return inj_compose_perf(c, at, DP_EREFUSED, what, em);
	if (in_list(agent_options, name))
		return inj_fail(c, em, at, DP_EREFUSED, what,
				"label " INJ_PREFIX "%s configures the project's one agent, not a service; put "
				"`%s: ...` under the top-level x-diagport map", name, name);
	if (!in_list(service_options, name))
		return inj_fail(c, em, at, DP_EREFUSED, what,
				"label " INJ_PREFIX "%s: not an option of a service (a service's labels take "
				INJ_PREFIX "inject, mode, ptrace and crash-dumps; the agent's options go under "
				"x-diagport)", name);
	if (v == NULL || strlen(v) != vlen)
		return inj_fail(c, em, at, DP_EREFUSED, what, "label " INJ_PREFIX "%s must be a string%s", name,
				v ? " without a NUL character" : "");
	if (inj_opts_set_own(c, o, name, v, "label " INJ_PREFIX, name, at, what, em) != 0) {
		struct err_msg inner = *em;

		return inj_fail(c, em, at, DP_EREFUSED, what, "label " INJ_PREFIX "%s: %s", name, inner.text);
	}
	return 0;
}

/* A service's options: base, then its diagport.dev/ labels (map or list form, through merges too). */
int inj_compose_service_opts(const struct inj_ctx *c, const struct inj_opts *base, const struct doc_node *svc,
			const char *what, struct inj_opts *o, struct err_msg *em)
{
	const struct doc_node *own = inj_merged_get(svc, "labels");
	/* a labels map with merge keys of its own (labels: {<<: *team}): the labels they give count too */
	struct doc_node *flat = doc_is(own, DOC_MAP) ? inj_merged_map(own) : NULL;
	const struct doc_node *labels = flat ? flat : own;
	size_t plen = strlen(INJ_PREFIX);
	int rc = 0;

	inj_opts_copy(o, base);
	o->inject = -1;
	for (size_t i = 0; (doc_is(labels, DOC_MAP) || doc_is(labels, DOC_SEQ)) && i < labels->n && rc == 0; i++) {
		const struct doc_node *item = labels->vals[i];

		if (labels->type == DOC_MAP) {
			const char *k = labels->keys[i]->text, *v = inj_scalar_text(item);

			if (strncmp(k, INJ_PREFIX, plen) == 0)
				/* the length of the text as written (a YAML 1.1 boolean, `off`, is read as "false") */
				rc = label_option(c, o, item, k + plen, v, v ? item->len - strlen(item->text) + strlen(v) : 0,
						  what, em);
		} else if (doc_strval(item) && strncmp(item->text, INJ_PREFIX, plen) == 0) {
			char *name = mem_strndup(item->text + plen, strcspn(item->text + plen, "="));
			const char *eq = strchr(item->text, '=');

			rc = label_option(c, o, item, name, eq ? eq + 1 : "",
					  eq ? item->len - (size_t)(eq + 1 - item->text) : 0, what, em);
			mem_free(name);
		}
	}
	doc_free(flat);
	if (rc == 0)
		rc = inj_opts_enforce(c, o, what, em);
	if (rc != 0)
		inj_opts_free(o);
	return rc;
}

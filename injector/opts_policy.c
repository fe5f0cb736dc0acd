/*
 * opts_policy.c - the platform's policy over the injection options (the
 * webhook's configuration `enforce`): what it sets wins over what a workload
 * or the command line asked, with a warning that names both; captures are
 * the kinds both allow, refused when none is left. Options that are each
 * workload's own (inject, containers, resources) cannot be enforced.
 */
#include "opts_int.h"

#include <stdio.h>
#include <string.h>

#include "mem.h"

void inj_policy_init(struct inj_policy *p)
{
	inj_opts_init(&p->v);
	p->set = 0;
}

void inj_policy_free(struct inj_policy *p)
{
	if (p == NULL)
		return;
	inj_opts_free(&p->v);
	p->set = 0;
}

int inj_policy_set(struct inj_policy *p, const char *name, const char *value, struct err_msg *em)
{
	const struct inj_option *opt = inj_option_find(name);
	int rc;

	if (opt == NULL)
		return err_set(em, DP_ENOTFOUND, "unknown option '%s' (options: %s)", name, inj_opts_names());
	if (opt->kind == OK_OPTIN || opt->kind == OK_NAMES || opt->kind == OK_RESOURCES)
		return err_set(em, DP_EINVAL, "option %s cannot be enforced (which workloads are injected, which of "
			       "their containers and the agent's resources are each workload's own)", opt->name);
	if ((rc = inj_option_set(&p->v, opt, value, em)) == 0)
		p->set |= 1u << (unsigned)(opt - inj_options);
	return rc;
}

/* Copy option opt's field from src to dst (strings duplicated). */
static void copy_field(struct inj_opts *dst, const struct inj_opts *src, const struct inj_option *opt)
{
	void *d = (char *)dst + opt->off;
	const void *s = (const char *)src + opt->off;

	if (opt->kind == OK_REF || opt->kind == OK_QUANTITY) {
		char **slot = d;

		mem_free(*slot);
		*slot = *(char *const *)s ? mem_strdup(*(char *const *)s) : NULL;
	} else {
		memcpy(d, s, opt->size);
	}
}

int inj_opts_enforce(const struct inj_ctx *c, struct inj_opts *o, const char *what, struct err_msg *em)
{
	const struct inj_policy *p = c ? c->policy : NULL;
	struct buf was, now;
	int rc = 0;

	if (p == NULL || p->set == 0)
		return 0;
	buf_init(&was, 0);
	buf_init(&now, 0);
	for (size_t i = 0; i < inj_n_options && rc == 0; i++) {
		const struct inj_option *opt = &inj_options[i];
		unsigned bit = 1u << (unsigned)i;
		bool asked = ((o->own | o->flagged) & bit) != 0;
		const char *by = o->own & bit ? "workload" : "command line";

		if (!(p->set & bit))
			continue;
		buf_reset(&was);
		buf_reset(&now);
		inj_option_text(opt, o, &was);
		inj_option_text(opt, &p->v, &now);
		if (opt->kind == OK_CAPTURES) {
			unsigned both = o->captures & p->v.captures;
			char served[128];

			inj_captures_text(both, ',', served, sizeof(served));
			if (both == 0)
				rc = inj_fail(c, em, NULL, DP_EREFUSED, what, "captures: the workload's captures=%s and the "
					      "platform's policy, captures=%s, have no kind in common: the agent would "
					      "serve nothing", was.data, now.data);
			else if (asked && both != o->captures)
				inj_report_warn(c->report, "%s: %s: the platform's policy allows captures=%s, the %s "
						"asked for captures=%s: the agent serves %s", c->file ? c->file : "<input>",
						what ? what : "", now.data, by, was.data, served);
			if (rc == 0)
				o->captures = both;
			continue;
		}
		if (strcmp(was.data ? was.data : "", now.data ? now.data : "") == 0)
			continue;
		if (asked)
			inj_report_warn(c->report, "%s: %s: the platform's policy enforces %s=%s, the %s asked for %s=%s",
					c->file ? c->file : "<input>", what ? what : "", opt->name, now.data ? now.data : "",
					by, opt->name, was.data ? was.data : "");
		copy_field(o, &p->v, opt);
	}
	buf_free(&was);
	buf_free(&now);
	return rc;
}

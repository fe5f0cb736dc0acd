/*
 * macro.c - the CloudFormation macro contract (inj.h inj_macro), on the
 * CloudFormation front-end (cfn.c).
 *
 * CloudFormation sends {"requestId", "fragment", "params",
 * "templateParameterValues", ...} and takes {"requestId", "status",
 * "fragment", "errorMessage"}. As a template-level Transform the fragment is
 * the whole template: every task definition that opts in (or every one,
 * with the param all: true) is injected, as `diagport inject cfn` does. As
 * Fn::Transform inside a task definition's Properties the fragment is those
 * Properties: that task definition is injected, with no Metadata to hold the
 * status record (CloudFormation runs the macro on the template as written
 * each time, so none is needed). params are the inject options by name
 * (mode, port, sidecar, ...), plus all. Any refusal is status "failure" with
 * the injector's message, which names the resource and the field.
 *
 * The platform's settings (inj_int.h struct inj_macro_platform, the
 * webhook's configuration format, given to the Lambda function in
 * DIAGPORT_POLICY) lie under the params as defaults, and their enforce: map
 * over everything, as `diagport inject --policy` applies it: a template
 * cannot ask its way past the platform. A policy that could not be read
 * fails every event with its reason.
 */
#include "inj_int.h"

#include <string.h>

#include "buf.h"
#include "mem.h"

#define MACRO_MAX_EVENT ((size_t)6 << 20)   /* Lambda's synchronous payload limit */
#define MACRO_MAX_NODES ((size_t)4 << 20)
#define MACRO_MAX_TEMPLATE ((size_t)1 << 20) /* a processed template, as CloudFormation takes it from S3 */

/* The params map as options over the defaults: all apart, the rest by inject's names. */
static int macro_params(const struct doc_node *params, struct inj_opts *o, bool *all, struct err_msg *em)
{
	for (size_t i = 0; doc_is(params, DOC_MAP) && i < params->n; i++) {
		const char *k = params->keys[i]->text, *v = inj_scalar_text(params->vals[i]);
		struct err_msg inner;
		int rc;

		if (v == NULL)
			return err_set(em, DP_EINVAL, "params.%s: takes a string, number or boolean", k);
		if (strcmp(k, "all") == 0) {
			if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
				return err_set(em, DP_EINVAL, "params.all: takes true or false, not '%s'", v);
			*all = strcmp(v, "true") == 0;
			continue;
		}
		/* set as a flag is, then counted as the template's own (a workload's setting, as Metadata is): the
		   platform's policy names what it overrides; Metadata.diagport still wins over params unwarned */
		if ((rc = inj_opts_set_flag(o, k, v, &inner)) == DP_ENOTFOUND)
			return err_set(em, DP_EINVAL, "params.%s: not an option (all, %s)", k, inj_opts_names());
		o->own |= o->flagged;
		o->flagged = 0;
		if (rc != 0) { /* inner: "option NAME: why" */
			const char *why = strchr(inner.text, ':');

			return err_set(em, DP_EINVAL, "params.%s: %s", k, why ? why + 2 : inner.text);
		}
	}
	if (params && !doc_is(params, DOC_MAP) && !doc_is(params, DOC_NULL))
		return err_set(em, DP_EINVAL, "params: a map of option names to values");
	return 0;
}

static void swap_nodes(struct doc_node *a, struct doc_node *b)
{
	struct doc_node t = *a;

	*a = *b;
	*b = t;
}

/* Inject the fragment in place: a template, or one task definition's Properties. */
static int macro_fragment(struct doc_node *frag, const struct inj_opts *o, const struct inj_policy *policy, bool all,
			  struct inj_report *rep, struct err_msg *em)
{
	struct inj_ctx c = { .file = "fragment", .base = o, .policy = policy, .all = all, .report = rep };
	struct doc_node *tpl, *res, *props;
	int rc;

	if (!doc_is(frag, DOC_MAP))
		return err_set(em, DP_ESYNTAX, "fragment: not a map (a template, or a task definition's Properties)");
	if (doc_get(frag, "Resources"))
		return inj_cfn_template(frag, &c, em);
	if (!doc_is(doc_get(frag, "ContainerDefinitions"), DOC_SEQ))
		return err_set(em, DP_EINVAL, "fragment: neither a template (no Resources) nor a task definition's "
			       "Properties (no ContainerDefinitions): use the macro as a template's Transform, or as "
			       "Fn::Transform inside an AWS::ECS::TaskDefinition's Properties");
	/* a snippet: one task definition, wrapped as a template of one resource that opts in; the
	   Properties node trades places with the fragment's (no copy) and trades back after */
	props = doc_map();
	swap_nodes(props, frag);
	res = doc_map();
	doc_set(res, "Type", doc_str("AWS::ECS::TaskDefinition"));
	doc_set(res, "Properties", props);
	tpl = doc_map();
	doc_set(tpl, "Resources", doc_map());
	doc_set(doc_get(tpl, "Resources"), "TaskDefinition", res);
	c.all = true;
	rc = inj_cfn_template(tpl, &c, em);
	swap_nodes(props, frag); /* back (a refusal's fragment is not sent) */
	doc_free(tpl);
	return rc;
}

int inj_macro(const char *event, size_t len, struct buf *out)
{
	return inj_macro_run(event, len, NULL, NULL, out);
}

int inj_macro_run(const char *event, size_t len, const struct inj_macro_platform *p, struct inj_report *report,
		  struct buf *out)
{
	struct doc_limits lim = { .max_bytes = MACRO_MAX_EVENT, .max_depth = 256, .max_nodes = MACRO_MAX_NODES };
	struct doc_stream s = { 0 };
	struct inj_report rep = { 0 };
	struct err_msg em = { "" };
	struct doc_node *ev = NULL, *frag = NULL, *resp = doc_map();
	struct inj_opts o;
	const char *id = NULL;
	bool all = false;
	int rc;

	if (p && p->given && p->error.text[0] == '\0')
		inj_opts_copy(&o, &p->settings.opts);
	else
		inj_opts_init(&o);
	if ((rc = doc_read_json(event, len, "event", &lim, &s, &em)) != 0)
		goto out;
	if (s.n != 1 || !doc_is(s.docs[0], DOC_MAP)) {
		rc = err_set(&em, DP_ESYNTAX, "event: not one JSON object");
		goto out;
	}
	ev = s.docs[0];
	id = doc_get_str(ev, "requestId");
	frag = doc_get(ev, "fragment");
	if (id == NULL) {
		rc = err_set(&em, DP_EINVAL, "event: no requestId (not a CloudFormation macro invocation?)");
		goto out;
	}
	if (frag == NULL) {
		rc = err_set(&em, DP_EINVAL, "event: no fragment");
		goto out;
	}
	if (p && p->error.text[0]) { /* never unenforced: a bad policy stops every template */
		rc = err_set(&em, DP_EINVAL, "the macro's platform policy (%s) cannot be used, so no template is "
			     "processed: %s", INJ_MACRO_POLICY_VAR, p->error.text);
		goto out;
	}
	if ((rc = macro_params(doc_get(ev, "params"), &o, &all, &em)) != 0)
		goto out;
	rc = macro_fragment(frag, &o, p && p->given ? &p->settings.enforce : NULL, all, report ? report : &rep, &em);
	if (rc == 0 && doc_get(frag, "Resources")) {
		/* CloudFormation takes a processed template of at most 1 MB (from S3; 51,200 bytes inline) */
		struct buf t;

		buf_init(&t, 0);
		if (doc_write_json(&t, frag, 0, &em) == 0 && t.len > MACRO_MAX_TEMPLATE)
			rc = err_set(&em, DP_ETOOBIG, "fragment: the processed template would be %zu bytes, over the %zu "
				     "CloudFormation takes (1 MB, from S3); split the stack (nested stacks) or inject "
				     "fewer task definitions", t.len, MACRO_MAX_TEMPLATE);
		buf_free(&t);
	}
out:
	doc_set(resp, "requestId", doc_str(id ? id : ""));
	doc_set(resp, "status", doc_str(rc == 0 ? "success" : "failure"));
	if (rc == 0 && frag) {
		struct doc_node *f = doc_map();

		swap_nodes(f, frag); /* the injected fragment moves to the response, uncopied */
		doc_set(resp, "fragment", f);
	} else {
		doc_set(resp, "errorMessage", doc_str(em.text[0] ? em.text : err_str(rc)));
	}
	rc = doc_write_json(out, resp, 0, &em);
	doc_free(resp);
	doc_stream_free(&s);
	inj_report_free(&rep);
	inj_opts_free(&o);
	return rc;
}

/*
 * cfn.c - the CloudFormation front-end: every AWS::ECS::TaskDefinition that
 * opts in (Metadata.diagport.inject, the tag diagport.dev/inject, or --all)
 * goes through the task-definition rules of ecs.c in their PascalCase
 * dialect. Options come from the tags, then Metadata.diagport (bare option
 * names); the status record goes to Metadata.diagport.status.
 *
 * Intrinsic functions (Fn::If, Ref, !Sub, ...) are left as they are; where
 * the rules would have to add to a list or map that is only known at deploy
 * time, the resource is refused with a message, never mangled. YAML
 * short-form tags are converted to their JSON form only when JSON is written.
 */
#include "inj_int.h"

#include <stdlib.h>
#include <string.h>

#include "mem.h"

#define TASKDEF "AWS::ECS::TaskDefinition"

typedef int (*res_fn)(const struct inj_ctx *c, struct doc_node *res, const char *what, struct err_msg *em);

static int each_taskdef(struct doc_node *tpl, const struct inj_ctx *c, res_fn fn, struct err_msg *em)
{
	struct doc_node *resources;
	int rc;

	if (!doc_is(tpl, DOC_MAP))
		return inj_fail(c, em, tpl, DP_ESYNTAX, "template", "a CloudFormation template is a map");
	if ((rc = inj_map_field(c, tpl, "Resources", "template", &resources, em)) != 0)
		return rc;
	if (resources == NULL)
		return inj_fail(c, em, tpl, DP_ESYNTAX, "template", "has no Resources");
	for (size_t i = 0; i < resources->n; i++) {
		struct doc_node *res = resources->vals[i];
		const char *type = doc_get_str(res, "Type");
		char *what;

		if (type == NULL || strcmp(type, TASKDEF) != 0) {
			if (c->report)
				c->report->passed++;
			continue;
		}
		what = mem_printf("resource %s (%s)", resources->keys[i]->text, TASKDEF);
		rc = fn(c, res, what, em);
		mem_free(what);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int uninj_resource(const struct inj_ctx *c, struct doc_node *res, const char *what, struct err_msg *em)
{
	struct doc_node *md = doc_get(res, "Metadata"), *dmd = doc_get(md, "diagport");
	struct doc_node *props = doc_get(res, "Properties");
	struct inj_status st;
	int rc;

	if (doc_get(dmd, "status") == NULL)
		return 0;
	if ((rc = inj_status_load(c, doc_get(dmd, "status"), "Metadata.diagport.status", what, &st, em)) != 0)
		return rc;
	if (!doc_is(props, DOC_MAP))
		return inj_fail(c, em, res, DP_EREFUSED, what, "has a status record but no Properties");
	if ((rc = uninj_taskdef(c, &inj_cfn_dialect, props, &st, what, em)) != 0)
		return rc;
	doc_del(dmd, "status");
	inj_prune(md, "diagport", st.wflags, 'Y');
	inj_prune(res, "Metadata", st.wflags, 'X');
	return 0;
}

/* The resource's own perf setting (Metadata.diagport.perf over the tag diagport.dev/perf), or NULL. */
static const struct doc_node *perf_setting(const struct doc_node *dmd, const struct doc_node *tags)
{
	long t = inj_seq_find(tags, "Key", INJ_PREFIX "perf");

	if (doc_get(dmd, "perf"))
		return doc_get(dmd, "perf");
	return t >= 0 ? tags->vals[t] : NULL;
}

static int inj_resource(const struct inj_ctx *c, struct doc_node *res, const char *what, struct err_msg *em)
{
	struct doc_node *md, *dmd, *props, *tags;
	struct inj_opts o, with_tags;
	struct inj_status st;
	bool opted;
	char *status;
	int rc;

	if ((rc = uninj_resource(c, res, what, em)) != 0)
		return rc;
	if ((rc = inj_map_field(c, res, "Metadata", what, &md, em)) != 0 ||
	    (rc = inj_map_field(c, md, "diagport", what, &dmd, em)) != 0 ||
	    (rc = inj_map_field(c, res, "Properties", what, &props, em)) != 0)
		return rc;
	tags = doc_get(props, "Tags");
	inj_opts_copy(&with_tags, c->base);
	with_tags.inject = -1;
	if (doc_is(tags, DOC_SEQ) && (rc = inj_opts_from_tags(c, &with_tags, tags, "Key", "Value", what, em)) != 0) {
		inj_opts_free(&with_tags);
		return rc;
	}
	rc = inj_opts_from_map(c, &with_tags, dmd, false, "Metadata.diagport.", what, &o, em);
	inj_opts_free(&with_tags);
	if (rc != 0)
		return rc;
	opted = o.inject == 1 || (c->all && o.inject != 0);
	if (!opted) {
		if (c->report)
			c->report->skipped++;
		goto out;
	}
	if (props == NULL) {
		rc = inj_fail(c, em, res, DP_EREFUSED, what, "has no Properties");
		goto out;
	}
	memset(&st, 0, sizeof(st));
	if ((rc = inj_opts_enforce(c, &o, what, em)) != 0 || (rc = inj_opts_check(c, &o, what, em)) != 0 ||
	    (rc = inj_agent_check(c, &o, what, em)) != 0)
		goto out;
	if (o.perf) {
		rc = inj_taskdef_perf(c, &inj_cfn_dialect, props, perf_setting(dmd, tags), what, em);
		goto out;
	}
	if ((rc = inj_taskdef(c, &inj_cfn_dialect, props, &o, what, &st, em)) != 0)
		goto out;
	if (md == NULL)
		md = inj_create(res, "Metadata", DOC_MAP, st.wflags, sizeof(st.wflags), 'X');
	if (dmd == NULL)
		dmd = inj_create(md, "diagport", DOC_MAP, st.wflags, sizeof(st.wflags), 'Y');
	o.sidecar = INJ_SIDECAR_CONTAINER; /* ECS has no native sidecars: the agent is one of the task's containers */
	status = inj_status_format(&st, &o);
	doc_set(dmd, "status", doc_str(status));
	mem_free(status);
	if (c->report)
		c->report->injected++;
out:
	inj_opts_free(&o);
	return rc;
}

int inj_cfn_template(struct doc_node *tpl, const struct inj_ctx *c, struct err_msg *em)
{
	return each_taskdef(tpl, c, inj_resource, em);
}

int uninj_cfn_template(struct doc_node *tpl, const struct inj_ctx *c, struct err_msg *em)
{
	return each_taskdef(tpl, c, uninj_resource, em);
}

static void swap(struct doc_node *a, struct doc_node *b)
{
	struct doc_node t = *a;

	*a = *b;
	*b = t;
}

/* !Ref x → {Ref: x}; !GetAtt a.b → {Fn::GetAtt: [a, b]}; !Condition c → {Condition: c}; !X v → {Fn::X: v}. */
int inj_cfn_expand_tags(struct doc_node *n, const char *file, struct err_msg *em)
{
	struct doc_node *inner, *wrap;
	const char *name;
	char *key;
	bool getatt;
	int rc;

	if (n == NULL)
		return 0;
	if (n->type == DOC_MAP || n->type == DOC_SEQ)
		for (size_t i = 0; i < n->n; i++)
			if ((rc = inj_cfn_expand_tags(n->vals[i], file, em)) != 0)
				return rc;
	if (n->tag == NULL || n->tag[0] != '!' || n->tag[1] == '!')
		return 0;
	name = n->tag + 1;
	if (*name == '\0')
		return err_set(em, DP_EUNSUPPORTED, "%s:%u:%u: the non-specific tag '!' has no CloudFormation meaning",
			       file, n->line, n->col);
	if (strcmp(name, "Ref") == 0 || strcmp(name, "Condition") == 0)
		key = mem_strdup(name);
	else
		key = mem_printf("Fn::%s", name);
	getatt = strcmp(name, "GetAtt") == 0; /* name points into the tag, freed below */
	if (getatt && n->type == DOC_STRING && strchr(n->text, '.') == NULL) {
		mem_free(key);
		return err_set(em, DP_ESYNTAX, "%s:%u:%u: !GetAtt %s: expected LogicalId.Attribute", file,
			       n->line, n->col, n->text);
	}
	inner = doc_null();
	swap(inner, n);
	mem_free(inner->tag);
	inner->tag = NULL;
	if (getatt && inner->type == DOC_STRING) {
		const char *dot = strchr(inner->text, '.');
		struct doc_node *pair = doc_seq();

		doc_push(pair, doc_strn(inner->text, (size_t)(dot - inner->text)));
		doc_push(pair, doc_str(dot + 1));
		pair->line = inner->line;
		pair->col = inner->col;
		doc_free(inner);
		inner = pair;
	}
	wrap = doc_map();
	doc_set(wrap, key, inner);
	wrap->line = inner->line;
	wrap->col = inner->col;
	mem_free(key);
	swap(wrap, n);
	doc_free(wrap);
	return 0;
}

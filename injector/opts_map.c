/*
 * opts_map.c - the injection options a workload writes on itself, layered
 * onto the options given (opts.c sets each one): a map of names (Kubernetes
 * annotations diagport.dev/NAME, CloudFormation's Metadata.diagport) or a
 * list of tags (ECS: [{key: "diagport.dev/mode", value: "suspend"}, ...]).
 * A value that is a CloudFormation intrinsic function is refused, naming it.
 */
#include "inj_int.h"

#include <stdio.h>
#include <string.h>

/*
 * An option's value that is a CloudFormation intrinsic function (!Ref x,
 * {"Fn::Sub": ...}): options are read as the template is written, before
 * CloudFormation resolves anything, and the value is copied where the
 * option goes as text; taking `!Ref x` for "x" would send the name of a
 * resource where its ARN must go. Refused, naming the function.
 */
static int intrinsic_value(const struct inj_ctx *c, struct err_msg *em, const struct doc_node *v, const char *what,
			   const char *prefix, const char *k)
{
	return inj_fail(c, em, v, DP_EREFUSED, what, "%s%s is the intrinsic function %s; diagport reads options as "
			"written, before CloudFormation resolves them: write the value out (an ARN; an SSM parameter "
			"in the task's own Region also by its name, /app/rules)", prefix, k,
			inj_intrinsic(v));
}

/*
 * Layer the options found in `map` over base. With `prefixed`, keys are
 * annotations ("diagport.dev/mode") and other keys are ignored; else they
 * are bare option names (CloudFormation Metadata.diagport), where "status"
 * is ours and skipped.
 */
int inj_opts_from_map(const struct inj_ctx *c, const struct inj_opts *base, const struct doc_node *map,
		      bool prefixed, const char *setting, const char *what, struct inj_opts *o, struct err_msg *em)
{
	size_t plen = strlen(INJ_PREFIX);

	inj_opts_copy(o, base);
	if (!doc_is(map, DOC_MAP))
		return 0;
	for (size_t i = 0; i < map->n; i++) {
		const char *k = map->keys[i]->text;
		const char *v = inj_scalar_text(map->vals[i]);
		int rc;

		if (prefixed) {
			if (strncmp(k, INJ_PREFIX, plen) != 0)
				continue;
			k += plen;
		}
		if (strcmp(k, "status") == 0)
			continue;
		if (inj_intrinsic(map->vals[i])) {
			inj_opts_free(o);
			return intrinsic_value(c, em, map->vals[i], what, prefixed ? INJ_PREFIX : "", k);
		}
		if (v == NULL) {
			inj_opts_free(o);
			return inj_fail(c, em, map->vals[i], DP_EREFUSED, what, "%s%s must be a string", prefixed ? INJ_PREFIX : "", k);
		}
		/* a JSON string's \u0000: C would read only what comes before it (the text as written: a YAML 1.1
		 * boolean, `off`, is read as "false") */
		if (strlen(map->vals[i]->text) != map->vals[i]->len) {
			inj_opts_free(o);
			return inj_fail(c, em, map->vals[i], DP_EREFUSED, what, "%s%s holds a NUL character",
					prefixed ? INJ_PREFIX : "", k);
		}
		rc = inj_opts_set_own(c, o, k, v, setting, map->keys[i]->text, map->vals[i], what, em);
		if (rc != 0) {
			struct err_msg inner = *em;

			inj_opts_free(o);
			return inj_fail(c, em, map->vals[i], DP_EREFUSED, what, "%s%s: %s", prefixed ? INJ_PREFIX : "", k, inner.text);
		}
	}
	return 0;
}

/* Layer options from a tag list [{KKEY: "diagport.dev/mode", VKEY: "suspend"}, ...] onto o. */
int inj_opts_from_tags(const struct inj_ctx *c, struct inj_opts *o, const struct doc_node *tags,
		       const char *kkey, const char *vkey, const char *what, struct err_msg *em)
{
	size_t plen = strlen(INJ_PREFIX);

	if (!doc_is(tags, DOC_SEQ))
		return 0;
	for (size_t i = 0; i < tags->n; i++) {
		const char *k = doc_get_str(tags->vals[i], kkey);
		const char *v = inj_scalar_text(doc_get(tags->vals[i], vkey));

		if (k == NULL || strncmp(k, INJ_PREFIX, plen) != 0 || strcmp(k + plen, "status") == 0)
			continue;
		if (inj_intrinsic(doc_get(tags->vals[i], vkey)))
			return intrinsic_value(c, em, doc_get(tags->vals[i], vkey), what, "tag ", k);
		if (v == NULL)
			return inj_fail(c, em, tags->vals[i], DP_EREFUSED, what, "tag %s: the tag has no string value", k);
		if (inj_opts_set_own(c, o, k + plen, v, "tag ", k, tags->vals[i], what, em) != 0) {
			struct err_msg inner = *em;

			return inj_fail(c, em, tags->vals[i], DP_EREFUSED, what, "tag %s: %s", k, inner.text);
		}
	}
	return 0;
}

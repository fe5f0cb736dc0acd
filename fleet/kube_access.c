/*
 * kube_access.c - what the user may do, asked of the API server before doing
 * it (SelfSubjectAccessReview), for the Kubernetes discovery (kube.c): a
 * refusal names the verb, resource and namespace and who asked, instead of a
 * request failing half-way. Whether the user may port-forward is asked once
 * per namespace and kept. A server without SelfSubjectAccessReview lets the
 * requests themselves say.
 */
#include "kube_int.h"

#include <stdlib.h>

#include "mem.h"

/* "deployments.apps" as kubectl names a resource of a group; "pods/portforward". */
static char *qualified(const char *resource, const char *sub, const char *group)
{
	return mem_printf("%s%s%s%s%s", resource, sub ? "/" : "", sub ? sub : "", group[0] ? "." : "", group);
}

/* 0 when the user may; DP_EAUTH with em (or *why, new, when why is not NULL) when not. */
int kube_require(struct disc *d, const char *verb, const char *group, const char *resource, const char *sub,
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
const char *kube_pf_refusal(struct disc *d, const char *ns, struct err_msg *em, int *rc)
{
	json_t *c = json_object_get(d->pf_ns, ns);
	char *why = NULL;

	*rc = 0;
	if (d->pf_anywhere)
		return NULL;
	if (c == NULL) {
		*rc = kube_require(d, "create", "", "pods", "portforward", ns, &why, em);
		if (*rc == 0)
			*rc = kube_require(d, "get", "", "pods", "portforward", ns, &why, em);
		if (*rc != 0 && *rc != DP_EAUTH)
			return NULL;
		*rc = 0;
		json_object_set_new(d->pf_ns, ns, json_string(why ? why : ""));
		free(why);
		c = json_object_get(d->pf_ns, ns);
	}
	return json_string_value(c)[0] ? json_string_value(c) : NULL;
}

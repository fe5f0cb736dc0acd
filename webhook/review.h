/*
 * review.h - one admission.k8s.io/v1 AdmissionReview in, its response out:
 * the decision the webhook makes for a pod, without any I/O, so the server,
 * the `diagport webhook review` command and the tests share it.
 *
 * The webhook never blocks a pod: every well-formed review is answered
 * `allowed: true`, with a JSON Patch when the pod is injected and warnings
 * (admitted unchanged) when injection is refused or fails. Only a request
 * that is not a well-formed AdmissionReview gets an error.
 */
#ifndef DP_REVIEW_H
#define DP_REVIEW_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "errors.h"
#include "injector/inj.h"
#include "rcache.h"

/* Why a pod went the way it went: the outcome label of metrics and logs. */
enum review_outcome {
	REVIEW_INJECTED,         /* patched */
	REVIEW_SKIPPED_NOT_OPTED, /* no opt-in: annotation absent (namespace not enabled) */
	REVIEW_SKIPPED_OPTED_OUT, /* diagport.dev/inject: "false" */
	REVIEW_SKIPPED_INJECTED,  /* already carries diagport.dev/status */
	REVIEW_SKIPPED_NOT_POD_CREATE, /* another kind or operation */
	REVIEW_REFUSED,          /* the rules refused the pod: admitted unchanged, with the reason as a warning */
	REVIEW_ERROR,            /* an internal failure: admitted unchanged, with a warning */
	REVIEW_SKIPPED_EXCLUDED, /* the pod's namespace is in excludedNamespaces */
};
#define REVIEW_N_OUTCOMES 8
const char *review_outcome_name(enum review_outcome o);

#define REVIEW_MAX_NODES 100000 /* JSON values in one request; more is refused as too big (DP_ETOOBIG) */

struct review_config {
	const struct inj_opts *base; /* defaults for every pod (the webhook's configuration); borrowed */
	const struct inj_policy *policy; /* the configuration's enforce: map, or NULL; borrowed */
	bool namespace_enabled;      /* the pod's namespace opted in (diagport.dev/inject=enabled) */
	bool no_ptrace;              /* the namespace enforces Pod Security baseline or restricted: no SYS_PTRACE */
	size_t max_body;             /* cap on the request, bytes */
	char *const *excluded;       /* namespaces whose pods are never injected (borrowed) */
	size_t n_excluded;
	struct rcache *cache;        /* answers to reuse (rcache.h), or NULL; borrowed. Its owner
					clears it when anything above changes but the two flags. */
	bool copy_diff;              /* tests: inject a copy and diff (the long way), not under the journal */
};

/*
 * Review the AdmissionReview in body[0..len) and append the response
 * AdmissionReview (JSON) to out (from cfg->cache when it has the answer). 0 with *outcome set; DP_ESYNTAX or
 * DP_ETOOBIG with em (and nothing in out) when the request is not a
 * well-formed AdmissionReview for this webhook.
 */
int review_admit(const struct review_config *cfg, const char *body, size_t len, struct buf *out,
		 enum review_outcome *outcome, struct err_msg *em);

#endif

/*
 * kapi.h - requests to the Kubernetes API server as the user (kconn.h):
 * their CA, client certificate, bearer token or basic credentials, through
 * hclient_request; and the two questions asked before any other, who am I
 * (SelfSubjectReview) and may I (SelfSubjectAccessReview).
 *
 * Ownership: the kube_conn is borrowed for the calls; a kapi_resp owns its body.
 */
#ifndef DP_FLEET_KAPI_H
#define DP_FLEET_KAPI_H

#include <jansson.h>
#include <stdbool.h>

#include "errors.h"
#include "kconn.h"

#define KAPI_MAX_RESPONSE ((size_t)32 << 20) /* a page of 500 pods */

struct kapi {
	const struct kube_conn *k;
	long timeout_ms; /* each request */
};

struct kapi_resp {
	long status;       /* the HTTP status */
	json_t *body;      /* new reference: the answer when it is JSON, else NULL */
	char message[512]; /* a metav1.Status body's message, else the start of a body that is not JSON */
};
void kapi_resp_free(struct kapi_resp *r);

/*
 * METHOD path (with its query) and a JSON body (borrowed, or NULL). 0 with
 * *r for any HTTP answer; DP_EIO (no answer), DP_ETOOBIG (over
 * KAPI_MAX_RESPONSE) with em. The raw answer is wiped (a Secret may be in it).
 */
int kapi_call(const struct kapi *a, const char *method, const char *path, json_t *body, struct kapi_resp *r,
	      struct err_msg *em);

/* For an answer that is not what the caller wanted: DP_EAUTH (401, 403), DP_ENOTFOUND (404), else
 * DP_EREMOTE, with em "WHAT: HTTP 403: <the Status message>". */
int kapi_error(const struct kapi_resp *r, const char *what, struct err_msg *em);


/*
 * May the user VERB (group, resource[/sub]) in ns ("": cluster-wide), name
 * (NULL: any)? A SelfSubjectAccessReview. 0 with *allowed; DP_ENOTFOUND
 * when the server has no SelfSubjectAccessReview (then nothing is known).
 */
int kapi_can(const struct kapi *a, const char *verb, const char *group, const char *resource, const char *sub,
	     const char *ns, bool *allowed, struct err_msg *em);

/* The user's name from a SelfSubjectReview (new), or NULL when the server will not say (404, 403). */
char *kapi_whoami(const struct kapi *a);

#endif

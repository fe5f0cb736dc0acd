/*
 * kubeapi.h - requests to the Kubernetes API server, as a workload in the
 * cluster makes them: HTTPS to the server, its certificate verified against
 * the cluster's CA file, the service account's bearer token.
 *
 * The token is read from its file for every request (a projected token is
 * rotated by the kubelet while the pod runs) and never written anywhere:
 * not in an error message, not in a log line. Requests that get no answer,
 * or a 5xx or 429 answer, are tried again a bounded number of times; every
 * write diagport makes is conditional on a resourceVersion, so a repeated
 * write cannot apply twice.
 *
 * Ownership: the config's strings are borrowed; a kubeapi_resp owns its
 * body (kubeapi_resp_free).
 */
#ifndef DP_KUBEAPI_H
#define DP_KUBEAPI_H

#include <jansson.h>
#include <stddef.h>

#include "errors.h"
#include "incluster.h"

#define KUBEAPI_SA_DIR INCLUSTER_SA_DIR
#define KUBEAPI_MAX_RESPONSE ((size_t)2 << 20) /* a Secret may hold 1 MiB, which base64 makes 1.4 MiB */

struct kubeapi_config {
	const char *server;     /* "https://HOST[:PORT]" */
	const char *token_file; /* the bearer token, read for every request */
	const char *ca_file;    /* the CA that signed the API server's certificate */
	long timeout_ms;        /* per request */
	int tries;              /* attempts per request when there is no answer or a 5xx/429 (>= 1) */
};

/* An answer. */
struct kubeapi_resp {
	long status;       /* the HTTP status */
	json_t *body;      /* new reference: the body when it is JSON, else NULL */
	char reason[64];   /* from a metav1.Status body ("NotFound", "AlreadyExists", "Conflict"), else "" */
	char message[512]; /* a Status body's message, else the start of a body that is not JSON */
};

/* Drop the body (wiping its strings' storage is the caller's business: see certs.c). Accepts a zeroed resp. */
void kubeapi_resp_free(struct kubeapi_resp *r);

/*
 * METHOD path (which starts with "/") with body[0..body_len) (NULL: none)
 * of Content-Type ctype. 0 with *resp for any HTTP answer, whatever its
 * status; DP_EIO with em when none came after cfg->tries attempts (or the
 * token file cannot be read), DP_ETOOBIG for an answer over
 * KUBEAPI_MAX_RESPONSE. The answer's raw bytes are wiped before they are
 * freed (a Secret's data is in them).
 */
int kubeapi_call(const struct kubeapi_config *cfg, const char *method, const char *path, const char *ctype,
		 const char *body, size_t body_len, struct kubeapi_resp *resp, struct err_msg *em);

/*
 * For an answer that is not what the caller wanted: DP_EAUTH (401, 403) or
 * DP_EREMOTE (any other), with em "WHAT: METHOD answered HTTP 404 (NotFound):
 * <the Status message>".
 */
int kubeapi_error(const struct kubeapi_resp *r, const char *method, const char *what, struct err_msg *em);

#endif

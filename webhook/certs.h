/*
 * certs.h - `diagport webhook certs`: the webhook's certificates, kept in a
 * Secret and trusted through the MutatingWebhookConfiguration's caBundle.
 *
 * One run makes the cluster's state right and says what it did:
 *
 *   - the Secret (type kubernetes.io/tls; tls.crt, tls.key, ca.crt, ca.key)
 *     is created when missing, kept while its CA and serving certificate are
 *     good and far from expiry, and otherwise renewed: a new serving
 *     certificate from the same CA when the CA can sign one that it
 *     outlives, else a new CA too;
 *   - ca.crt is the CA bundle: the signing CA first, then earlier CAs that
 *     are still valid (after a CA renewal, pods that still serve a
 *     certificate from the old CA stay trusted);
 *   - every webhook of the configuration that calls our Service gets that
 *     bundle as its caBundle, by a JSON Patch that applies only to the
 *     version read (a `test` of resourceVersion).
 *
 * Everything is made and checked before the first write; writes are
 * conditional on the resourceVersion read, and a conflict (409, or 422 for
 * a failed `test`) means read again and decide again, a bounded number of
 * times. The caBundle is written before the Secret, so that the API server
 * trusts a new CA before any pod serves a certificate from it.
 */
#ifndef DP_CERTS_H
#define DP_CERTS_H

#include <stdbool.h>
#include <time.h>

#include "errors.h"
#include "kubeapi.h"

struct certs_config {
	const struct kubeapi_config *api;
	const char *ns;             /* the webhook's namespace */
	const char *secret;         /* the Secret's name */
	const char *service;        /* the webhook's Service */
	const char *webhook_config; /* the MutatingWebhookConfiguration's name */
	const char *cluster_domain; /* "cluster.local" */
	int validity_days;          /* of a new serving certificate */
	int ca_validity_days;       /* of a new CA */
	int renew_before_days;      /* renew what expires within this many days */
	bool dry_run;               /* read and decide, write nothing */
	time_t now;                 /* 0: the current time */
};

enum certs_action {
	CERTS_CREATED,         /* no Secret: a CA and a serving certificate made, the Secret created */
	CERTS_KEPT,            /* all good: nothing written to the Secret */
	CERTS_PRUNED,          /* all good, but an expired earlier CA taken out of ca.crt */
	CERTS_RENEWED_SERVING, /* a new serving certificate from the same CA */
	CERTS_RENEWED_CA,      /* a new CA and a new serving certificate */
};

struct certs_result {
	enum certs_action action;
	char why[600];          /* for a renewal: what was wrong with what the Secret held */
	time_t ca_not_after;    /* the signing CA's end, as stored now */
	time_t serving_not_after;
	int bundle_cas;         /* CA certificates in the bundle */
	int patched;            /* webhooks whose caBundle was (or, dry run, would be) changed */
	int current;            /* webhooks whose caBundle was already right */
	int skipped;            /* webhooks that call another service, left alone */
	int conflicts;          /* 409/422 answers that made us read again */
};

/* The word for an action: "created", "kept", ... */
const char *certs_action_name(enum certs_action a);

/*
 * Run once. 0 with *res; otherwise, with em naming the object, the HTTP
 * status and the API's message: DP_EIO (no answer from the API server, the
 * token or CA file unreadable), DP_EAUTH (401, 403), DP_EREMOTE (any other
 * error answer, the configuration missing, conflicts that did not stop, a
 * Secret of another type), DP_ECRYPTO (GnuTLS missing or failing),
 * DP_EINVAL (a bad config).
 */
int certs_run(const struct certs_config *cfg, struct certs_result *res, struct err_msg *em);

#endif

/*
 * kubeconfig.h - where the fleet client's Kubernetes API server is and who
 * it is to it, as kubectl decides: --kubeconfig, else $KUBECONFIG's files
 * merged, else ~/.kube/config, else the pod's service account.
 *
 * Ownership: a kcfg owns everything in it (kcfg_free); its conn's secrets
 * are wiped when freed, and data the kubeconfig carries inline (a CA, a
 * client certificate and key) lives in memfds, never in a file.
 */
#ifndef DP_FLEET_KUBECONFIG_H
#define DP_FLEET_KUBECONFIG_H

#include "errors.h"
#include "kconn.h"

struct kcfg {
	struct kube_conn conn;
	char *namespace_; /* the context's namespace, or NULL */
	char *user;       /* the kubeconfig's user entry ("alice"), or the service account, for messages */
	char *source;     /* the file the context came from ("~/.kube/config"), or "in-cluster" */
};

/*
 * Load the connection and credentials of context (NULL: the current
 * context) from kubeconfig (NULL: $KUBECONFIG, ~/.kube/config, in-cluster),
 * running the user's exec credential plugin or reading its OIDC id-token
 * as kubectl would (timeout_ms bounds each outside call; a plugin gets at
 * least 10 s). 0, or DP_EINVAL with em naming the file and field
 * ("~/.kube/config: users[alice].user.exec.command: ..."), DP_ENOTFOUND
 * when there is no configuration at all, DP_EAUTH when a credential cannot
 * be had (a plugin failed, a token expired). *out is set only on success.
 */
int kcfg_load(const char *kubeconfig, const char *context, long timeout_ms, struct kcfg *out,
	      struct err_msg *em);

/* Release what c owns (secrets wiped, memfds closed); NULL-safe; c is then zeroed. */
void kcfg_free(struct kcfg *c);

#endif

/*
 * koidc.h - kubeconfig's auth-provider "oidc", as client-go's oidc plugin
 * reads it: the id-token is the bearer token; an expired one is refreshed
 * with the refresh-token at the issuer's token endpoint (found through its
 * discovery document).
 */
#ifndef DP_FLEET_KOIDC_H
#define DP_FLEET_KOIDC_H

#include "doc.h"
#include "errors.h"

/*
 * The bearer token for the auth-provider config map cfg (borrowed; where
 * names it in messages, dir resolves idp-certificate-authority): *token new,
 * wiped by the caller. DP_EINVAL for a bad config, DP_EAUTH when the token
 * expired and could not be refreshed (em says how to refresh it). The
 * refreshed tokens are not written back to the kubeconfig (kubectl does).
 */
int koidc_token(const struct doc_node *cfg, const char *where, const char *dir, long timeout_ms, char **token,
		struct err_msg *em);

#endif

/*
 * koidc.c - the oidc auth provider's token (koidc.h).
 *
 * The id-token is a JWT: its payload's exp says when the API server stops
 * taking it. While it is good it is sent as it is; when it has expired (or
 * is missing) and the config has a refresh-token, the issuer's discovery
 * document (ISSUER/.well-known/openid-configuration) names the token
 * endpoint, which is asked for a new one (grant_type=refresh_token, the
 * client id and secret in the form, RFC 6749 section 6), as client-go's
 * oidc plugin does through golang.org/x/oauth2.
 */
#include "koidc.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base64.h"
#include "buf.h"
#include "fleet.h"
#include "hclient.h"
#include "mem.h"

#define MAX_JWT ((size_t)64 << 10)
#define MAX_ANSWER ((size_t)256 << 10)

/* The exp claim of a JWT, or 0 when it has none or is not a JWT. */
static long long jwt_exp(const char *jwt)
{
	const char *p = strchr(jwt, '.'), *e;
	char *b64, *raw = NULL;
	size_t n, len = 0;
	long long exp = 0;
	json_t *j;

	if (p == NULL || (e = strchr(p + 1, '.')) == NULL || (size_t)(e - p) > MAX_JWT)
		return 0;
	n = (size_t)(e - p - 1);
	b64 = mem_alloc(n + 4);
	for (size_t i = 0; i < n; i++)
		b64[i] = p[1 + i] == '-' ? '+' : p[1 + i] == '_' ? '/' : p[1 + i];
	while (n % 4)
		b64[n++] = '=';
	if (b64_decode(b64, n, MAX_JWT, &raw, &len) == 0) {
		j = json_loadb(raw, len, 0, NULL);
		if (json_is_integer(json_object_get(j, "exp")))
			exp = json_integer_value(json_object_get(j, "exp"));
		else if (json_is_real(json_object_get(j, "exp")))
			exp = (long long)json_real_value(json_object_get(j, "exp"));
		json_decref(j);
		free(raw);
	}
	free(b64);
	return exp;
}

static int refresh(const struct doc_node *cfg, const char *where, const char *dir, long timeout_ms, char **token,
		   struct err_msg *em)
{
	const char *issuer = doc_get_str(cfg, "idp-issuer-url"), *rt = doc_get_str(cfg, "refresh-token");
	const char *id = doc_get_str(cfg, "client-id"), *secret = doc_get_str(cfg, "client-secret");
	const char *ca = doc_get_str(cfg, "idp-certificate-authority");
	const char *hdr[] = { "Accept: application/json", NULL, NULL };
	char *ca_file = ca ? (ca[0] == '/' ? mem_strdup(ca) : mem_printf("%s/%s", dir, ca)) : NULL;
	char *url = NULL, *body = NULL, *e1 = NULL, *e2 = NULL, *e3 = NULL;
	struct hclient_req req = { .method = "GET", .headers = hdr, .ca_file = ca_file, .timeout_ms = timeout_ms };
	struct buf ans;
	long status = 0;
	json_t *j = NULL;
	const char *endpoint, *idt;
	int rc;

	buf_init(&ans, MAX_ANSWER);
	if (issuer == NULL || rt == NULL || id == NULL) {
		rc = err_set(em, DP_EAUTH, "%s: the id-token has expired and there is no refresh-token, idp-issuer-url "
					   "and client-id to renew it: log in again (kubelogin, or your identity "
					   "provider's tool) and retry",
			     where);
		goto out;
	}
	url = mem_printf("%s%s.well-known/openid-configuration", issuer,
			 issuer[strlen(issuer) - 1] == '/' ? "" : "/");
	req.url = url;
	if ((rc = hclient_request(&req, &status, &ans, em)) != 0 || status != 200 ||
	    (j = json_loadb(ans.data, ans.len, 0, NULL)) == NULL ||
	    (endpoint = json_string_value(json_object_get(j, "token_endpoint"))) == NULL) {
		if (rc == 0)
			err_set(em, DP_EAUTH, "GET %s: HTTP %ld, no token_endpoint", url, status);
		err_prefix(em, "%s: the id-token has expired; renewing it failed", where);
		rc = DP_EAUTH;
		goto out;
	}
	free(url);
	url = mem_strdup(endpoint);
	e1 = fleet_pct_escape(rt);
	e2 = fleet_pct_escape(id);
	e3 = fleet_pct_escape(secret ? secret : "");
	body = mem_printf("grant_type=refresh_token&refresh_token=%s&client_id=%s%s%s", e1, e2,
			  secret ? "&client_secret=" : "", secret ? e3 : "");
	hdr[1] = "Content-Type: application/x-www-form-urlencoded";
	req.method = "POST";
	req.url = url;
	req.body = body;
	req.body_len = strlen(body);
	json_decref(j);
	j = NULL;
	buf_reset(&ans);
	if ((rc = hclient_request(&req, &status, &ans, em)) != 0 || status != 200 ||
	    (j = json_loadb(ans.data, ans.len, 0, NULL)) == NULL ||
	    (idt = json_string_value(json_object_get(j, "id_token"))) == NULL || !idt[0]) {
		if (rc == 0)
			err_set(em, DP_EAUTH, "POST %s: HTTP %ld, no id_token", url, status);
		err_prefix(em, "%s: the id-token has expired; renewing it failed", where);
		rc = DP_EAUTH;
		goto out;
	}
	*token = mem_strdup(idt);
	mem_wipe((char *)idt, strlen(idt));
out:
	json_decref(j);
	if (ans.data)
		mem_wipe(ans.data, ans.len);
	buf_free(&ans);
	if (body)
		mem_wipe(body, strlen(body));
	if (e1)
		mem_wipe(e1, strlen(e1));
	if (e3)
		mem_wipe(e3, strlen(e3));
	free(body);
	free(e1);
	free(e2);
	free(e3);
	free(url);
	free(ca_file);
	return rc;
}

int koidc_token(const struct doc_node *cfg, const char *where, const char *dir, long timeout_ms, char **token,
		struct err_msg *em)
{
	const char *idt;
	long long exp;

	if (cfg == NULL || cfg->type != DOC_MAP)
		return err_set(em, DP_EINVAL, "%s.config: missing (id-token, idp-issuer-url, client-id, ...)", where);
	idt = doc_get_str(cfg, "id-token");
	if (idt && idt[0]) {
		exp = jwt_exp(idt);
		if (exp == 0 || exp > (long long)time(NULL) + 10) {
			*token = mem_strdup(idt);
			return 0;
		}
	}
	return refresh(cfg, where, dir, timeout_ms, token, em);
}

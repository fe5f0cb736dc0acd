/*
 * kapi.c - the fleet client's Kubernetes API requests (kapi.h).
 *
 * One request path for all of them: the kube_conn turned into hclient's
 * request (CA or insecure, TLS server name, proxy, client certificate, and
 * an Authorization header: Bearer, else Basic), the answer read under
 * KAPI_MAX_RESPONSE, parsed with jansson, the raw bytes wiped. http://
 * servers are allowed, because a kubeconfig may name one (kubectl proxy).
 */
#include "kapi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "buf.h"
#include "hclient.h"
#include "mem.h"

void kapi_resp_free(struct kapi_resp *r)
{
	json_decref(r->body);
	r->body = NULL;
}

static void copy_text(char *dst, size_t n, const char *src, size_t len)
{
	size_t k = len < n - 1 ? len : n - 1;

	for (size_t i = 0; i < k; i++)
		dst[i] = (src[i] == '\n' || src[i] == '\r' || src[i] == '\t') ? ' ' : src[i];
	dst[k] = '\0';
}

static char *auth_header(const struct kube_conn *k)
{
	char *b64, *h;

	if (k->token)
		return mem_printf("Authorization: Bearer %s", k->token);
	if (k->basic == NULL)
		return NULL;
	b64 = b64_encode(k->basic, strlen(k->basic), NULL);
	h = mem_printf("Authorization: Basic %s", b64);
	mem_wipe(b64, strlen(b64));
	free(b64);
	return h;
}

int kapi_call(const struct kapi *a, const char *method, const char *path, json_t *body, struct kapi_resp *r,
	      struct err_msg *em)
{
	static const char ua[] = "User-Agent: diagport/" DP_VERSION " (fleet)";
	char *url = mem_printf("%s%s", a->k->server, path), *auth = auth_header(a->k), *txt = NULL;
	const char *hdr[] = { "Accept: application/json", ua, body ? "Content-Type: application/json" : NULL, NULL,
			      NULL };
	struct hclient_req req = { .method = method, .url = url, .headers = hdr, .ca_file = a->k->ca_file,
				   .cert_file = a->k->cert_file, .key_file = a->k->key_file, .insecure = a->k->insecure,
				   .timeout_ms = a->timeout_ms, .proxy = a->k->proxy_url,
				   .server_name = a->k->tls_server_name };
	struct buf raw;
	long status = 0;
	int rc;

	if (auth)
		hdr[body ? 3 : 2] = auth;
	if (body) {
		txt = json_dumps(body, JSON_COMPACT);
		req.body = txt;
		req.body_len = strlen(txt);
	}
	buf_init(&raw, KAPI_MAX_RESPONSE);
	rc = hclient_request(&req, &status, &raw, em);
	if (rc == 0) {
		json_t *j = raw.len ? json_loadb(raw.data, raw.len, 0, NULL) : NULL;

		memset(r, 0, sizeof(*r));
		r->status = status;
		r->body = j;
		if (json_is_object(j) && json_is_string(json_object_get(j, "message")) &&
		    json_is_string(json_object_get(j, "kind")) &&
		    strcmp(json_string_value(json_object_get(j, "kind")), "Status") == 0) {
			const char *m = json_string_value(json_object_get(j, "message"));

			copy_text(r->message, sizeof(r->message), m, strlen(m));
		} else if (j == NULL && raw.len) {
			copy_text(r->message, sizeof(r->message), raw.data, raw.len < 200 ? raw.len : 200);
		}
	}
	if (raw.data)
		mem_wipe(raw.data, raw.len);
	buf_free(&raw);
	if (auth) {
		mem_wipe(auth, strlen(auth));
		free(auth);
	}
	free(txt);
	free(url);
	return rc;
}

int kapi_error(const struct kapi_resp *r, const char *what, struct err_msg *em)
{
	int code = r->status == 401 || r->status == 403 ? DP_EAUTH : r->status == 404 ? DP_ENOTFOUND : DP_EREMOTE;
	const char *hint = r->status == 401 ? " (the API server did not accept the kubeconfig's credentials)" : "";

	return err_set(em, code, "%s: HTTP %ld: %s%s", what, r->status, r->message[0] ? r->message : "no message",
		       hint);
}


int kapi_can(const struct kapi *a, const char *verb, const char *group, const char *resource, const char *sub,
	     const char *ns, bool *allowed, struct err_msg *em)
{
	json_t *ra = json_pack("{s:s, s:s, s:s, s:s}", "verb", verb, "group", group, "resource", resource, "namespace",
			       ns),
	       *body;
	struct kapi_resp r = { 0 };
	int rc;

	if (sub)
		json_object_set_new(ra, "subresource", json_string(sub));
	body = json_pack("{s:s, s:s, s:{s:o}}", "kind", "SelfSubjectAccessReview", "apiVersion",
			 "authorization.k8s.io/v1", "spec", "resourceAttributes", ra);
	rc = kapi_call(a, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body, &r, em);
	json_decref(body);
	if (rc != 0)
		return rc;
	if (r.status == 404) {
		kapi_resp_free(&r);
		return DP_ENOTFOUND;
	}
	if (r.status != 201 && r.status != 200) {
		rc = kapi_error(&r, "POST selfsubjectaccessreviews", em);
		kapi_resp_free(&r);
		return rc;
	}
	*allowed = json_is_true(json_object_get(json_object_get(r.body, "status"), "allowed"));
	kapi_resp_free(&r);
	return 0;
}

char *kapi_whoami(const struct kapi *a)
{
	json_t *body = json_pack("{s:s, s:s}", "kind", "SelfSubjectReview", "apiVersion", "authentication.k8s.io/v1");
	struct kapi_resp r = { 0 };
	const char *u;
	char *out = NULL;

	if (kapi_call(a, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body, &r, NULL) == 0) {
		u = json_string_value(json_object_get(json_object_get(json_object_get(r.body, "status"), "userInfo"),
						      "username"));
		if ((r.status == 201 || r.status == 200) && u && u[0])
			out = mem_strdup(u);
		kapi_resp_free(&r);
	}
	json_decref(body);
	return out;
}

/*
 * azblob_cred.c - bearer tokens for the Blob service (azblob_int.h), from
 * the identity the platform hands the workload, found the way the Azure
 * SDK's ManagedIdentityCredential finds it:
 *
 *   App Service, Functions, Container Apps: IDENTITY_ENDPOINT and
 *     IDENTITY_HEADER set: GET IDENTITY_ENDPOINT?api-version=2019-08-01
 *     &resource=...&client_id=... with X-IDENTITY-HEADER.
 *   Workload identity (AKS, any OIDC federation): AZURE_FEDERATED_TOKEN_FILE
 *     set: POST {AZURE_AUTHORITY_HOST}{AZURE_TENANT_ID}/oauth2/v2.0/token, a
 *     client-credentials grant whose client_assertion is the file's token
 *     (read again at every fetch: the kubelet rotates it).
 *   Else the instance metadata service: GET
 *     http://169.254.169.254/metadata/identity/oauth2/token?api-version=
 *     2018-02-01&resource=...&client_id=... with Metadata: true (the
 *     address from AZURE_POD_IDENTITY_AUTHORITY_HOST when set, as the SDK).
 *
 * The token is kept with its expiry (expires_on, or now + expires_in) and
 * fetched again when it lapses within 5 minutes. The token, the identity
 * header and the assertion are wiped when dropped and never put in a
 * message.
 */
#include "azblob_int.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "mem.h"

#define REFRESH_BEFORE_S 300
#define MAX_TOKEN_ANSWER (64 << 10)
#define MAX_ASSERTION (64 << 10)
#define FETCH_TRIES 3
#define IMDS_DEFAULT "http://169.254.169.254"
#define AUTHORITY_DEFAULT "https://login.microsoftonline.com/"

enum tok_src { SRC_APPSERVICE, SRC_WORKLOAD, SRC_IMDS };

struct az_tok {
	enum tok_src src;
	char *client_id;
	const struct webc_opts *web;
	pthread_mutex_t mu;
	char *token;     /* wiped */
	time_t expires;
};

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

struct az_tok *az_tok_new(const char *client_id, const struct webc_opts *web)
{
	struct az_tok *t = mem_zalloc(sizeof(*t));

	if (env("IDENTITY_ENDPOINT") && env("IDENTITY_HEADER"))
		t->src = SRC_APPSERVICE;
	else if (env("AZURE_FEDERATED_TOKEN_FILE"))
		t->src = SRC_WORKLOAD;
	else
		t->src = SRC_IMDS;
	if (client_id == NULL && t->src == SRC_WORKLOAD)
		client_id = env("AZURE_CLIENT_ID");
	t->client_id = client_id ? mem_strdup(client_id) : NULL;
	t->web = web;
	pthread_mutex_init(&t->mu, NULL);
	return t;
}

static void drop_token(struct az_tok *t)
{
	if (t->token) {
		mem_wipe(t->token, strlen(t->token));
		free(t->token);
		t->token = NULL;
	}
}

void az_tok_free(struct az_tok *t)
{
	if (t == NULL)
		return;
	drop_token(t);
	free(t->client_id);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

static const char *src_name(enum tok_src s)
{
	return s == SRC_APPSERVICE ? "the App Service identity endpoint (IDENTITY_ENDPOINT)"
	       : s == SRC_WORKLOAD ? "workload identity (AZURE_FEDERATED_TOKEN_FILE)"
				   : "the managed identity endpoint (IMDS)";
}

/* url's scheme://host[:port] and the rest ("/" when none), new strings. DP_EINVAL when it is not http(s). */
static int split_url(const char *url, char **base, char **rest)
{
	const char *p = strstr(url, "://"), *slash;

	if (p == NULL || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0))
		return DP_EINVAL;
	slash = p + 3 + strcspn(p + 3, "/?#");
	*base = mem_strndup(url, (size_t)(slash - url));
	*rest = *slash == '/' ? mem_strdup(slash) : mem_printf("/%s", slash);
	return 0;
}

/* A JSON number or a string of digits (IMDS gives expires_on and expires_in as strings). -1 when neither. */
static long long json_num(json_t *v)
{
	if (json_is_integer(v))
		return (long long)json_integer_value(v);
	if (json_is_string(v) && json_string_value(v)[0] >= '0' && json_string_value(v)[0] <= '9')
		return strtoll(json_string_value(v), NULL, 10);
	return -1;
}

/* The federated token from AZURE_FEDERATED_TOKEN_FILE, percent-encoded into b. */
static int put_assertion(struct buf *b, struct err_msg *em)
{
	const char *path = env("AZURE_FEDERATED_TOKEN_FILE");
	struct buf f;
	size_t n;
	int rc;

	buf_init(&f, MAX_ASSERTION);
	if ((rc = buf_read_path(&f, path, NULL, em)) != 0) {
		buf_free(&f);
		return err_set(em, DP_EAUTH, "workload identity: cannot read AZURE_FEDERATED_TOKEN_FILE %s", path);
	}
	n = f.len;
	while (n > 0 && (f.data[n - 1] == '\n' || f.data[n - 1] == '\r' || f.data[n - 1] == ' '))
		n--;
	if (n == 0)
		rc = err_set(em, DP_EAUTH, "workload identity: AZURE_FEDERATED_TOKEN_FILE %s is empty", path);
	else
		buf_pct_encode(b, f.data, n, false);
	if (f.data)
		mem_wipe(f.data, f.len);
	buf_free(&f);
	return rc;
}

/* The request for t's source: URL, headers, body (wiped by the caller). */
static int token_request(const struct az_tok *t, char **url, char **hdr, struct buf *body, struct err_msg *em)
{
	struct buf q;
	int rc = 0;

	buf_init(&q, 0);
	buf_pct_encode(&q, t->client_id ? t->client_id : "", t->client_id ? strlen(t->client_id) : 0, false);
	if (t->src == SRC_APPSERVICE) {
		*url = mem_printf("%s?api-version=2019-08-01&resource=%s%s%s", env("IDENTITY_ENDPOINT"),
				  "https%3A%2F%2Fstorage.azure.com%2F", t->client_id ? "&client_id=" : "",
				  t->client_id ? q.data : "");
		*hdr = mem_printf("X-IDENTITY-HEADER: %s", env("IDENTITY_HEADER"));
	} else if (t->src == SRC_IMDS) {
		const char *host = env("AZURE_POD_IDENTITY_AUTHORITY_HOST");
		size_t hl = host ? strlen(host) : 0;

		*url = mem_printf("%.*s/metadata/identity/oauth2/token?api-version=2018-02-01&resource=%s%s%s",
				  host ? (int)(hl > 0 && host[hl - 1] == '/' ? hl - 1 : hl) : (int)strlen(IMDS_DEFAULT),
				  host ? host : IMDS_DEFAULT, "https%3A%2F%2Fstorage.azure.com%2F",
				  t->client_id ? "&client_id=" : "", t->client_id ? q.data : "");
		*hdr = mem_strdup("Metadata: true");
	} else {
		const char *auth = env("AZURE_AUTHORITY_HOST") ? env("AZURE_AUTHORITY_HOST") : AUTHORITY_DEFAULT;
		const char *tenant = env("AZURE_TENANT_ID");
		size_t al = strlen(auth);

		if (tenant == NULL || t->client_id == NULL) {
			buf_free(&q);
			return err_set(em, DP_EAUTH, "workload identity: AZURE_FEDERATED_TOKEN_FILE is set but %s is not",
				       tenant == NULL ? "AZURE_TENANT_ID" : "AZURE_CLIENT_ID (nor ManagedIdentityClientId)");
		}
		*url = mem_printf("%s%s%s/oauth2/v2.0/token", auth, al > 0 && auth[al - 1] == '/' ? "" : "/", tenant);
		*hdr = mem_strdup("Content-Type: application/x-www-form-urlencoded");
		buf_printf(body, "client_id=%s&scope=https%%3A%%2F%%2Fstorage.azure.com%%2F.default"
			   "&grant_type=client_credentials&client_assertion_type="
			   "urn%%3Aietf%%3Aparams%%3Aoauth%%3Aclient-assertion-type%%3Ajwt-bearer&client_assertion=",
			   q.data ? q.data : "");
		rc = put_assertion(body, em);
	}
	buf_free(&q);
	return rc;
}

/* The answer's token and expiry into t, or DP_EAUTH with the endpoint's error (its error and description). */
static int token_answer(struct az_tok *t, const struct webc_resp *r, struct err_msg *em)
{
	json_error_t je;
	json_t *o = r->body.data ? json_loadb(r->body.data, r->body.len, 0, &je) : NULL;
	json_t *tok = json_object_get(o, "access_token");
	long long on = json_num(json_object_get(o, "expires_on")), in = json_num(json_object_get(o, "expires_in"));
	int rc = 0;

	if (r->status != 200 || !json_is_string(tok) || (on < 0 && in < 0)) {
		const char *e = json_string_value(json_object_get(o, "error"));
		const char *d = json_string_value(json_object_get(o, "error_description"));

		if (e == NULL) /* App Service: {"error": {"code", "message"}}, some IMDS errors: {"message"} */
			e = json_string_value(json_object_get(json_object_get(o, "error"), "code"));
		if (d == NULL)
			d = json_string_value(json_object_get(json_object_get(o, "error"), "message"));
		if (d == NULL)
			d = json_string_value(json_object_get(o, "message"));
		rc = err_set(em, DP_EAUTH, "%s gave no token: %s%s%.300s (HTTP %d)", src_name(t->src),
			     e ? e : r->status == 200 ? "an answer without access_token and expiry" : "an error",
			     d ? ": " : "", d ? d : "", r->status);
	} else {
		drop_token(t);
		t->token = mem_strdup(json_string_value(tok));
		t->expires = on >= 0 ? (time_t)on : time(NULL) + (time_t)in;
	}
	if (o) {
		const char *k;
		json_t *v;

		json_object_foreach(o, k, v) /* the copy jansson made of the token */
			if (json_is_string(v))
				mem_wipe((void *)json_string_value(v), json_string_length(v));
		json_decref(o);
	}
	return rc;
}

static bool retry_token(int rc, int status)
{
	/* IMDS: 404 while its identity is being set up, 410 while it starts, 429, 5xx (its published retry guidance) */
	return rc == DP_EIO || status == 404 || status == 410 || status == 429 || status >= 500;
}

static int fetch(struct az_tok *t, struct err_msg *em)
{
	char *url = NULL, *hdr = NULL, *base = NULL, *rest = NULL;
	struct buf body;
	int rc;

	buf_init(&body, 0);
	if ((rc = token_request(t, &url, &hdr, &body, em)) != 0 || url == NULL) {
		rc = rc ? rc : DP_EINTERNAL;
		goto out;
	}
	if (split_url(url, &base, &rest) != 0) {
		rc = err_set(em, DP_EAUTH, "%s: its address is not an http or https URL", src_name(t->src));
		goto out;
	}
	for (int i = 0; i < FETCH_TRIES; i++) {
		const char *hs[] = { hdr, "Accept: application/json", NULL };
		struct webc_req req = { .method = t->src == SRC_WORKLOAD ? "POST" : "GET", .target = rest,
					.headers = hs, .body = body.data, .body_len = body.len,
					.max_resp = MAX_TOKEN_ANSWER };
		struct webc_resp r = { 0 };
		struct webc_conn *c = NULL;
		int status = 0;

		if (i > 0 && webc_pause(t->web, 200L << (i - 1)) != 0) {
			rc = err_set(em, DP_ECANCELED, "%s: cancelled", src_name(t->src));
			break;
		}
		rc = webc_open(base, t->web, &c, em);
		if (rc == 0)
			rc = webc_request(c, &req, &r, em);
		webc_close(c);
		if (rc == 0) {
			status = r.status;
			rc = token_answer(t, &r, em);
		} else {
			err_prefix(em, "%s", src_name(t->src));
			rc = rc == DP_EIO || rc == DP_ECANCELED ? rc : DP_EAUTH;
		}
		webc_resp_free(&r);
		if (rc == 0 || !retry_token(rc, status))
			break;
	}
	if (rc == DP_EIO)
		rc = DP_EAUTH;
out:
	free(base);
	free(rest);
	free(url); /* the client id only: no secret */
	if (hdr) {
		mem_wipe(hdr, strlen(hdr));
		free(hdr);
	}
	if (body.data)
		mem_wipe(body.data, body.len);
	buf_free(&body);
	return rc;
}

int az_tok_header(struct az_tok *t, char **out, struct err_msg *em)
{
	int rc = 0;

	pthread_mutex_lock(&t->mu);
	if (t->token == NULL || t->expires - REFRESH_BEFORE_S <= time(NULL)) {
		rc = fetch(t, em);
		/* a token that has not lapsed yet still serves when its renewal fails (the SDK's advisory refresh) */
		if (rc != 0 && t->token && t->expires > time(NULL) + 10)
			rc = 0;
	}
	if (rc == 0)
		*out = mem_printf("Authorization: Bearer %s", t->token);
	pthread_mutex_unlock(&t->mu);
	return rc;
}

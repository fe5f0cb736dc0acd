/*
 * aws_creds_remote.c - the credential sources reached over HTTP
 * (aws_creds_int.h), through webc, the one client of every AWS call: web
 * identity (STS AssumeRoleWithWebIdentity, unsigned: EKS IRSA, or a
 * profile's web_identity_token_file), the container credentials endpoint
 * (ECS tasks, EKS Pod Identity) and IMDSv2; and the JSON answer with keys
 * in it that the last two and credential_process give. Each call is under
 * the SDKs' own time limit (1 s IMDS, 2 s container, 10 s STS) or the
 * caller's, with the caller's webc options (CA file, connect allowlist).
 * Secrets are wiped wherever they were held and never reach a message.
 */
#include "aws_creds_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <jansson.h>

#include "aws_xml.h"
#include "buf.h"
#include "mem.h"
#include "webc.h"

#define IMDS_TIMEOUT_MS 1000L       /* the SDKs' default: a laptop is not held */
#define CONTAINER_TIMEOUT_MS 2000L  /* botocore's for the container endpoint */
#define STS_TIMEOUT_MS 10000L
#define MAX_SESSION_NAME 64         /* STS's RoleSessionName limit */
#define ECS_CREDS_HOST "http://169.254.170.2"

/* ---- answers with keys in them (the container endpoint, IMDS, credential_process) ---- */

int aws_creds_from_json(const char *text, size_t len, const char *token_key, const char *what,
			   struct aws_creds *out, struct err_msg *em)
{
	json_t *j = json_loadb(text, len, 0, NULL);
	const char *ak = json_string_value(json_object_get(j, "AccessKeyId"));
	const char *sk = json_string_value(json_object_get(j, "SecretAccessKey"));
	const char *tk = json_string_value(json_object_get(j, token_key));
	const char *code = json_string_value(json_object_get(j, "Code"));
	const char *exp = json_string_value(json_object_get(j, "Expiration"));
	int rc = 0;

	if (j == NULL)
		rc = err_set(em, DP_EAUTH, "%s: the answer is not JSON", what);
	else if (code && strcmp(code, "Success") != 0)
		rc = err_set(em, DP_EAUTH, "%s: the answer's Code is %.64s", what, code);
	else if (ak == NULL || sk == NULL || *ak == '\0' || *sk == '\0')
		rc = err_set(em, DP_EAUTH, "%s: the answer has no AccessKeyId and SecretAccessKey", what);
	if (rc == 0) {
		out->access_key = mem_strdup(ak);
		out->secret_key = mem_strdup(sk);
		out->token = tk && *tk ? mem_strdup(tk) : NULL;
		out->expires = aws_creds_parse_time(exp);
		snprintf(out->source, sizeof(out->source), "%s", what);
	}
	if (j && sk)
		mem_wipe((char *)sk, strlen(sk)); /* jansson's copy */
	if (j && tk)
		mem_wipe((char *)tk, strlen(tk));
	json_decref(j);
	return rc;
}

/* ---- HTTP (webc) ---- */

static void resp_free(struct webc_resp *r)
{
	if (r->body.data)
		mem_wipe(r->body.data, r->body.len); /* credentials */
	webc_resp_free(r);
}

/* One request to url, the whole answer in resp whatever its status; DP_EIO (em) when none came. */
static int http_call(const struct aws_creds_opts *o, long timeout_ms, const char *method, const char *url,
		     const char *const *headers, const char *body, size_t body_len, struct webc_resp *resp,
		     struct err_msg *em)
{
	struct webc_opts wo = { 0 };
	struct webc_conn *c = NULL;
	const char *s = strstr(url, "://"), *path;
	char *base, *target;
	int rc;

	if (o->web)
		wo = *o->web;
	wo.connect_timeout_ms = timeout_ms;
	wo.io_timeout_ms = timeout_ms;
	wo.answer_timeout_ms = 2 * timeout_ms; /* a few KiB: a server dripping them gets no more */
	if (s == NULL)
		return err_set(em, DP_EINVAL, "%.200s is not a URL", url);
	path = s + 3 + strcspn(s + 3, "/?#");
	base = mem_strndup(url, (size_t)(path - url));
	target = *path == '/' ? mem_strdup(path) : mem_printf("/%s", path);
	target[strcspn(target, "#")] = '\0';
	rc = webc_open(base, &wo, &c, em);
	if (rc == 0) {
		struct webc_req req = { .method = method, .target = target, .headers = headers, .body = body,
					.body_len = body_len, .max_resp = AWS_CREDS_MAX_ANSWER };

		rc = webc_request(c, &req, resp, em);
	}
	webc_close(c);
	free(target);
	free(base);
	return rc;
}

/* ---- web identity: STS AssumeRoleWithWebIdentity (EKS IRSA) ---- */

static bool session_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n < 2 || n > MAX_SESSION_NAME)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("+=,.@-_", *s))
			return false;
	return true;
}

/* The STS answer's Credentials into out. */
static int creds_from_sts(const struct webc_resp *r, const char *what, struct aws_creds *out, struct err_msg *em)
{
	const char *x = r->body.data ? r->body.data : "";
	char *ak = aws_xml_text(x, r->body.len, "AccessKeyId"), *sk = aws_xml_text(x, r->body.len, "SecretAccessKey");
	char *tk = aws_xml_text(x, r->body.len, "SessionToken"), *exp = aws_xml_text(x, r->body.len, "Expiration");
	int rc = 0;

	if (ak == NULL || sk == NULL || tk == NULL || *ak == '\0' || *sk == '\0') {
		rc = err_set(em, DP_EAUTH, "%s: the answer has no Credentials", what);
		free(ak);
		if (sk)
			mem_wipe(sk, strlen(sk));
		free(sk);
		if (tk)
			mem_wipe(tk, strlen(tk));
		free(tk);
	} else {
		out->access_key = ak;
		out->secret_key = sk;
		out->token = tk;
		out->expires = aws_creds_parse_time(exp);
		snprintf(out->source, sizeof(out->source), "%.190s", what);
	}
	free(exp);
	return rc;
}

/*
 * AssumeRoleWithWebIdentity with the token in token_file (read anew each
 * time: the kubelet rotates it), unsigned, query API (a form POST), XML
 * answer. Throttling, 5xx and no answer are tried again, 3 attempts.
 */
int aws_creds_web_identity(const struct aws_creds_opts *o, const char *token_file, const char *role_arn,
			const char *session, struct aws_creds *out, struct err_msg *em)
{
	const char *headers[] = { "Content-Type: application/x-www-form-urlencoded; charset=utf-8",
				  "Accept: text/xml", NULL };
	char what[300], *region = NULL, *endpoint, *url, *sess;
	struct buf tok, body;
	struct webc_resp r = { 0 };
	size_t n;
	int rc;

	snprintf(what, sizeof(what), "STS AssumeRoleWithWebIdentity (role %.120s)", role_arn);
	sess = session ? mem_strdup(session) : mem_printf("diagport-%lld", (long long)time(NULL));
	if (!session_name_ok(sess)) {
		free(sess);
		return err_set(em, DP_EAUTH, "%s: the role session name is not 2 to %d of A-Z a-z 0-9 +=,.@-_", what,
			       MAX_SESSION_NAME);
	}
	buf_init(&tok, AWS_CREDS_MAX_ANSWER);
	if ((rc = buf_read_path(&tok, token_file, NULL, em)) != 0) {
		err_prefix(em, "%s: the web identity token file", what);
		buf_free(&tok);
		free(sess);
		return DP_EAUTH;
	}
	for (n = tok.len; n && isspace((unsigned char)tok.data[n - 1]);)
		n--;
	buf_init(&body, 0);
	buf_puts(&body, "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=");
	buf_pct_encode(&body, role_arn, strlen(role_arn), false);
	buf_puts(&body, "&RoleSessionName=");
	buf_pct_encode(&body, sess, strlen(sess), false);
	buf_puts(&body, "&WebIdentityToken=");
	buf_pct_encode(&body, tok.data ? tok.data : "", n, false);
	mem_wipe(tok.data, tok.len);
	buf_free(&tok);
	if (n == 0) {
		rc = err_set(em, DP_EAUTH, "%s: the web identity token file %s is empty", what, token_file);
		goto out;
	}
	if (aws_creds_region(NULL, o->profile, &region, NULL) != 0)
		region = NULL;
	endpoint = region ? aws_creds_endpoint("STS", "sts", region) : NULL;
	if (endpoint == NULL) {
		const char *e = aws_creds_env("AWS_ENDPOINT_URL_STS") ? aws_creds_env("AWS_ENDPOINT_URL_STS") : aws_creds_env("AWS_ENDPOINT_URL");

		endpoint = e ? mem_strndup(e, strlen(e) - (e[strlen(e) - 1] == '/')) : mem_strdup("https://sts.amazonaws.com");
	}
	url = mem_printf("%s/", endpoint);
	for (int attempt = 1; attempt <= 3; attempt++) {
		struct aws_error ae;

		resp_free(&r);
		rc = http_call(o, o->timeout_ms ? o->timeout_ms : STS_TIMEOUT_MS, "POST", url, headers, body.data, body.len,
			       &r, em);
		if (rc == DP_EIO) {
			err_prefix(em, "%s", what);
		} else if (rc != 0) {
			err_prefix(em, "%s", what);
			break;
		} else if (r.status == 200) {
			rc = creds_from_sts(&r, what, out, em);
			break;
		} else {
			aws_xml_error(r.body.data, r.body.len, r.status, &ae);
			rc = err_set(em, DP_EAUTH, "%s at %.200s: %s%s%s", what, endpoint, ae.type, ae.message[0] ? ": " : "",
				     ae.message);
			if (r.status < 500 && r.status != 429 && strcmp(ae.type, "IDPCommunicationError") != 0 &&
			    strcmp(ae.type, "Throttling") != 0)
				break;
		}
		if (attempt < 3)
			nanosleep(&(struct timespec){ 0, 200000000L * attempt }, NULL);
	}
	free(url);
	free(endpoint);
	free(region);
out:
	resp_free(&r);
	mem_wipe(body.data, body.len);
	buf_free(&body);
	free(sess);
	return rc;
}

/* 1 when AWS_WEB_IDENTITY_TOKEN_FILE is not set (why says so), else web_identity's. */
int aws_creds_from_web_identity_env(const struct aws_creds_opts *o, struct aws_creds *out, char *why, size_t wn,
				 struct err_msg *em)
{
	const char *file = aws_creds_env("AWS_WEB_IDENTITY_TOKEN_FILE"), *role = aws_creds_env("AWS_ROLE_ARN");

	if (file == NULL) {
		snprintf(why, wn, "web identity: AWS_WEB_IDENTITY_TOKEN_FILE is not set");
		return 1;
	}
	if (role == NULL)
		return err_set(em, DP_EAUTH, "AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not");
	return aws_creds_web_identity(o, file, role, aws_creds_env("AWS_ROLE_SESSION_NAME"), out, em);
}

/* ---- the container credentials endpoint ---- */

/* FULL_URI over plain HTTP only to loopback or the ECS / EKS Pod Identity agents, as the SDKs allow. */
static bool allowed_full_uri(const char *u)
{
	static const char *const ok[] = { "http://127.", "http://localhost:", "http://localhost/", "http://[::1]",
					  "http://169.254.170.2:", "http://169.254.170.2/", "http://169.254.170.23:",
					  "http://169.254.170.23/", "http://[fd00:ec2::23]" };

	if (strncasecmp(u, "https://", 8) == 0)
		return true;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (strncasecmp(u, ok[i], strlen(ok[i])) == 0)
			return true;
	return strcasecmp(u, "http://localhost") == 0 || strcasecmp(u, "http://169.254.170.2") == 0;
}

static int auth_token(char **hdr, struct err_msg *em)
{
	const char *file = aws_creds_env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"), *tok = aws_creds_env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
	struct buf b;
	size_t n;
	int rc = 0;

	*hdr = NULL;
	if (file == NULL) {
		if (tok && strpbrk(tok, "\r\n"))
			return err_set(em, DP_EAUTH, "AWS_CONTAINER_AUTHORIZATION_TOKEN holds a line break");
		if (tok)
			*hdr = mem_printf("Authorization: %s", tok);
		return 0;
	}
	buf_init(&b, AWS_CREDS_MAX_ANSWER);
	if ((rc = buf_read_path(&b, file, NULL, em)) != 0) {
		err_prefix(em, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
		rc = DP_EAUTH;
	} else {
		for (n = b.len; n && isspace((unsigned char)b.data[n - 1]);)
			n--;
		if (n == 0 || memchr(b.data, '\n', n) || memchr(b.data, '\r', n))
			rc = err_set(em, DP_EAUTH, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE %s is empty or has a line break",
				     file);
		else
			*hdr = mem_printf("Authorization: %.*s", (int)n, b.data);
	}
	if (b.data)
		mem_wipe(b.data, b.len);
	buf_free(&b);
	return rc;
}

int aws_creds_from_container(const struct aws_creds_opts *o, struct aws_creds *out, char *why, size_t wn,
			  struct err_msg *em)
{
	const char *rel = aws_creds_env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"), *full = aws_creds_env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	char *url, *auth = NULL, what[300];
	const char *headers[] = { "Accept: application/json", NULL, NULL };
	struct err_msg e = { "" };
	struct webc_resp r = { 0 };
	long timeout = o->timeout_ms && o->timeout_ms < CONTAINER_TIMEOUT_MS ? o->timeout_ms : CONTAINER_TIMEOUT_MS;
	int rc;

	if (rel == NULL && full == NULL) {
		snprintf(why, wn, "container endpoint: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and _FULL_URI are not set");
		return 1;
	}
	url = rel ? mem_printf("%s%s%s", ECS_CREDS_HOST, *rel == '/' ? "" : "/", rel) : mem_strdup(full);
	snprintf(what, sizeof(what), "the container credentials endpoint %.200s", url);
	if (rel == NULL && !allowed_full_uri(url)) {
		rc = err_set(em, DP_EAUTH, "%s: plain http is allowed only to loopback or the ECS and EKS agents' "
					   "addresses", what);
		free(url);
		return rc;
	}
	if ((rc = auth_token(&auth, em)) != 0) {
		free(url);
		return rc;
	}
	headers[1] = auth;
	rc = http_call(o, timeout, "GET", url, headers, NULL, 0, &r, &e);
	if (rc != 0)
		rc = err_set(em, DP_EAUTH, "%s: %s", what, e.text);
	else if (r.status != 200)
		rc = err_set(em, DP_EAUTH, "%s: HTTP %d%s", what, r.status,
			     r.status >= 300 && r.status < 400 ? " (a redirect, which is not followed)" : "");
	else
		rc = aws_creds_from_json(r.body.data ? r.body.data : "", r.body.len, "Token", what, out, em);
	resp_free(&r);
	if (auth) {
		mem_wipe(auth, strlen(auth));
		free(auth);
	}
	free(url);
	return rc;
}

/* ---- IMDSv2 ---- */

static int imds_get(const struct aws_creds_opts *o, const char *method, const char *url, const char *hdr,
		    struct webc_resp *r, struct err_msg *em)
{
	const char *headers[] = { hdr, NULL };

	resp_free(r);
	return http_call(o, IMDS_TIMEOUT_MS, method, url, headers, strcmp(method, "PUT") == 0 ? "" : NULL, 0, r, em);
}

int aws_creds_from_imds(const struct aws_creds_opts *o, struct aws_creds *out, char *why, size_t wn, struct err_msg *em)
{
	const char *dis = aws_creds_env("AWS_EC2_METADATA_DISABLED"), *ep = aws_creds_env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	char *base, *url = NULL, *tok = NULL, *role = NULL, what[300];
	struct err_msg e = { "" };
	struct webc_resp r = { 0 };
	int rc;

	if (dis && strcasecmp(dis, "true") == 0) {
		snprintf(why, wn, "IMDS: AWS_EC2_METADATA_DISABLED is true");
		return 1;
	}
	base = ep ? mem_strndup(ep, strlen(ep) - (ep[strlen(ep) - 1] == '/')) : mem_strdup("http://169.254.169.254");
	url = mem_printf("%s/latest/api/token", base);
	rc = imds_get(o, "PUT", url, "X-aws-ec2-metadata-token-ttl-seconds: 21600", &r, &e);
	if (rc != 0 || r.status != 200 || r.body.len == 0 || strpbrk(r.body.data, "\r\n")) {
		/* no answer: not on EC2 (or IMDS is off); go on as the SDKs do */
		snprintf(why, wn, "IMDS: %.100s/latest/api/token: %.200s", base,
			 rc != 0 ? e.text : r.status != 200 ? "no token (HTTP status not 200)" : "no token");
		rc = 1;
		goto out;
	}
	tok = mem_printf("X-aws-ec2-metadata-token: %s", r.body.data);
	free(url);
	url = mem_printf("%s/latest/meta-data/iam/security-credentials/", base);
	snprintf(what, sizeof(what), "IMDS %.200s", url);
	rc = imds_get(o, "GET", url, tok, &r, &e);
	if (rc == 0 && r.status == 404) {
		snprintf(why, wn, "IMDS: the instance has no IAM role");
		rc = 1;
		goto out;
	}
	if (rc != 0 || r.status != 200 || r.body.len == 0) {
		rc = err_set(em, DP_EAUTH, "%s: %s", what, rc != 0 ? e.text : "no role name");
		goto out;
	}
	role = mem_strndup(r.body.data, strcspn(r.body.data, "\r\n"));
	free(url);
	url = mem_printf("%s/latest/meta-data/iam/security-credentials/%s", base, role);
	snprintf(what, sizeof(what), "IMDS (role %.100s)", role);
	rc = imds_get(o, "GET", url, tok, &r, &e);
	if (rc != 0 || r.status != 200)
		rc = err_set(em, DP_EAUTH, "%s: %s", what, rc != 0 ? e.text : "HTTP status not 200");
	else
		rc = aws_creds_from_json(r.body.data ? r.body.data : "", r.body.len, "Token", what, out, em);
out:
	resp_free(&r);
	if (tok) {
		mem_wipe(tok, strlen(tok));
		free(tok);
	}
	free(role);
	free(url);
	free(base);
	return rc;
}


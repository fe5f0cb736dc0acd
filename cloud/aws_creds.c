/*
 * aws_creds.c - the standard AWS credential chain, region and endpoints
 * (aws_creds.h), in the SDKs' order: the environment, the shared
 * credentials and config files (static keys, credential_process, a role
 * with a web identity token file), web identity from the environment (STS
 * AssumeRoleWithWebIdentity), the container credentials endpoint, IMDSv2.
 * A source that is not configured is passed over and its reason kept for
 * the final message; a source that is configured but fails stops the chain,
 * named, as the SDKs do. Credentials with an Expiration are renewed before
 * they lapse (aws_creds_fresh). HTTP goes through webc. Secrets are wiped
 * wherever they were held and never reach a message.
 */
#include "aws_creds.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <jansson.h>

#include "aws_profile.h"
#include "aws_xml.h"
#include "buf.h"
#include "mem.h"
#include "webc.h"

#define MAX_ANSWER ((size_t)64 << 10) /* a credentials endpoint's answer, credential_process's output */
#define IMDS_TIMEOUT_MS 1000L       /* the SDKs' default: a laptop is not held */
#define CONTAINER_TIMEOUT_MS 2000L  /* botocore's for the container endpoint */
#define STS_TIMEOUT_MS 10000L
#define REFRESH_BEFORE_S 300L       /* renew five minutes before Expiration */
#define MAX_SESSION_NAME 64         /* STS's RoleSessionName limit */
#define ECS_CREDS_HOST "http://169.254.170.2"

void aws_creds_free(struct aws_creds *c)
{
	if (c == NULL)
		return;
	free(c->access_key);
	if (c->secret_key) {
		mem_wipe(c->secret_key, strlen(c->secret_key));
		free(c->secret_key);
	}
	if (c->token) {
		mem_wipe(c->token, strlen(c->token));
		free(c->token);
	}
	memset(c, 0, sizeof(*c));
}

void aws_creds_copy(struct aws_creds *out, const struct aws_creds *c)
{
	*out = *c;
	out->access_key = c->access_key ? mem_strdup(c->access_key) : NULL;
	out->secret_key = c->secret_key ? mem_strdup(c->secret_key) : NULL;
	out->token = c->token ? mem_strdup(c->token) : NULL;
}

/* n decimal digits at *p into *v, advancing *p; false when they are not there. */
static bool digits(const char **p, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++, (*p)++) {
		if (**p < '0' || **p > '9')
			return false;
		*v = *v * 10 + (**p - '0');
	}
	return true;
}

static bool lit(const char **p, char c)
{
	if (**p != c)
		return false;
	(*p)++;
	return true;
}

time_t aws_creds_parse_time(const char *s)
{
	int y, mo, d, h, mi, sec, oh = 0, om = 0;
	struct tm tm;
	const char *p = s;
	time_t t;

	if (s == NULL || !digits(&p, 4, &y) || !lit(&p, '-') || !digits(&p, 2, &mo) || !lit(&p, '-') ||
	    !digits(&p, 2, &d) || !(lit(&p, 'T') || lit(&p, 't')) || !digits(&p, 2, &h) || !lit(&p, ':') ||
	    !digits(&p, 2, &mi) || !lit(&p, ':') || !digits(&p, 2, &sec))
		return 0;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			;
	if (*p == '+' || *p == '-') {
		int sign = *p++ == '+' ? -1 : 1;

		if (!digits(&p, 2, &oh) || !lit(&p, ':') || !digits(&p, 2, &om))
			return 0;
		oh *= sign;
		om *= sign;
	} else if (!lit(&p, 'Z') && !lit(&p, 'z')) {
		return 0;
	}
	if (*p != '\0' || y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return 0;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	return t == (time_t)-1 ? 0 : t + (time_t)oh * 3600 + (time_t)om * 60;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* ---- answers with keys in them (the container endpoint, IMDS, credential_process) ---- */

static int creds_from_json(const char *text, size_t len, const char *token_key, const char *what,
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

static int from_process(const struct aws_profile *p, const char *cmd, struct aws_creds *out, struct err_msg *em)
{
	char what[160];
	struct buf b;
	FILE *f;
	int rc, st;

	snprintf(what, sizeof(what), "credential_process of profile %s", p->name);
	fflush(stdout);
	if ((f = popen(cmd, "r")) == NULL) /* NOLINT(cert-env33-c): the user's own configured command */
		return err_set(em, DP_EAUTH, "%s: cannot run it: %s", what, strerror(errno));
	buf_init(&b, MAX_ANSWER);
	rc = buf_read_fd(&b, fileno(f));
	st = pclose(f);
	if (rc != 0)
		rc = err_set(em, DP_EAUTH, "%s: its output is over %zu bytes or did not read", what, MAX_ANSWER);
	else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		rc = err_set(em, DP_EAUTH, "%s: it exited with status %d", what, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	else
		rc = creds_from_json(b.data ? b.data : "", b.len, "SessionToken", what, out, em);
	if (b.data)
		mem_wipe(b.data, b.len);
	buf_free(&b);
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
					.body_len = body_len, .max_resp = MAX_ANSWER };

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
static int web_identity(const struct aws_creds_opts *o, const char *token_file, const char *role_arn,
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
	buf_init(&tok, MAX_ANSWER);
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
		const char *e = env("AWS_ENDPOINT_URL_STS") ? env("AWS_ENDPOINT_URL_STS") : env("AWS_ENDPOINT_URL");

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
static int from_web_identity_env(const struct aws_creds_opts *o, struct aws_creds *out, char *why, size_t wn,
				 struct err_msg *em)
{
	const char *file = env("AWS_WEB_IDENTITY_TOKEN_FILE"), *role = env("AWS_ROLE_ARN");

	if (file == NULL) {
		snprintf(why, wn, "web identity: AWS_WEB_IDENTITY_TOKEN_FILE is not set");
		return 1;
	}
	if (role == NULL)
		return err_set(em, DP_EAUTH, "AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not");
	return web_identity(o, file, role, env("AWS_ROLE_SESSION_NAME"), out, em);
}

/* 1 when the profile has no credentials of a kind we take (why says what it has), 0 when out is set. */
static int from_profile(const struct aws_creds_opts *o, const struct aws_profile *p, struct aws_creds *out, char *why,
			size_t wn, struct err_msg *em)
{
	const char *ak = aws_profile_get(p, "aws_access_key_id"), *sk = aws_profile_get(p, "aws_secret_access_key");
	const char *proc = aws_profile_get(p, "credential_process"), *wif = aws_profile_get(p, "web_identity_token_file");
	const char *role = aws_profile_get(p, "role_arn");
	const char *other[] = { "role_arn", "sso_session", "sso_start_url" };

	if (ak && sk && *ak && *sk) {
		const char *tk = aws_profile_get(p, "aws_session_token");

		out->access_key = mem_strdup(ak);
		out->secret_key = mem_strdup(sk);
		out->token = tk && *tk ? mem_strdup(tk) : NULL;
		snprintf(out->source, sizeof(out->source), "profile %s in %s", p->name,
			 aws_profile_ini_get(&p->cred, "aws_access_key_id") ? p->cred.path : p->conf.path);
		return 0;
	}
	if (ak || sk)
		return err_set(em, DP_EAUTH, "profile %s has %s but not %s", p->name,
			       ak ? "aws_access_key_id" : "aws_secret_access_key",
			       ak ? "aws_secret_access_key" : "aws_access_key_id");
	if (proc && *proc)
		return from_process(p, proc, out, em);
	if (wif && *wif && role && *role)
		return web_identity(o, wif, role, aws_profile_get(p, "role_session_name"), out, em);
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		if (aws_profile_get(p, other[i]))
			return err_set(em, DP_EAUTH, "profile %s uses %s, which diagport does not support; export "
						     "credentials first (aws configure export-credentials --profile %s "
						     "--format env)", p->name, other[i], p->name);
	if (!p->cred.found && !p->conf.found)
		snprintf(why, wn, "profile %s: not in %s or %s", p->name, p->cred.path, p->conf.path);
	else
		snprintf(why, wn, "profile %s: no keys in it", p->name);
	return 1;
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
	const char *file = env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"), *tok = env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
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
	buf_init(&b, MAX_ANSWER);
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

static int from_container(const struct aws_creds_opts *o, struct aws_creds *out, char *why, size_t wn,
			  struct err_msg *em)
{
	const char *rel = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"), *full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
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
		rc = creds_from_json(r.body.data ? r.body.data : "", r.body.len, "Token", what, out, em);
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

static int from_imds(const struct aws_creds_opts *o, struct aws_creds *out, char *why, size_t wn, struct err_msg *em)
{
	const char *dis = env("AWS_EC2_METADATA_DISABLED"), *ep = env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
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
		rc = creds_from_json(r.body.data ? r.body.data : "", r.body.len, "Token", what, out, em);
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

int aws_creds_load(const struct aws_creds_opts *o, struct aws_creds *out, struct err_msg *em)
{
	const char *ak = env("AWS_ACCESS_KEY_ID"), *sk = env("AWS_SECRET_ACCESS_KEY");
	char why[5][400] = { "", "", "", "", "" };
	struct aws_creds c = { 0 };
	struct aws_profile p;
	int rc;

	if (o->profile) {
		snprintf(why[0], sizeof(why[0]), "environment: skipped, a profile was named");
	} else if (ak && sk) {
		c.access_key = mem_strdup(ak);
		c.secret_key = mem_strdup(sk);
		c.token = env("AWS_SESSION_TOKEN") ? mem_strdup(env("AWS_SESSION_TOKEN")) : NULL;
		snprintf(c.source, sizeof(c.source), "the environment variables AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
		*out = c;
		return 0;
	} else if (ak || sk) {
		return err_set(em, DP_EAUTH, "the environment has %s but not %s", ak ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
			       ak ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
	} else {
		snprintf(why[0], sizeof(why[0]), "environment: AWS_ACCESS_KEY_ID is not set");
	}
	if (aws_profile_read(o->profile, o->profile_path, &p, em) != 0) {
		aws_profile_free(&p);
		return DP_EINVAL;
	}
	if (p.named && !p.cred.found && !p.conf.found) {
		rc = err_set(em, DP_EINVAL, "AWS profile %s is not in %s or %s", p.name, p.cred.path, p.conf.path);
		aws_profile_free(&p);
		return rc;
	}
	rc = from_profile(o, &p, &c, why[1], sizeof(why[1]), em);
	aws_profile_free(&p);
	if (rc == 1)
		rc = from_web_identity_env(o, &c, why[2], sizeof(why[2]), em);
	if (rc == 1)
		rc = from_container(o, &c, why[3], sizeof(why[3]), em);
	if (rc == 1)
		rc = from_imds(o, &c, why[4], sizeof(why[4]), em);
	if (rc == 1)
		return err_set(em, DP_EAUTH, "no AWS credentials found: %s; %s; %s; %s; %s", why[0], why[1], why[2], why[3],
			       why[4]);
	if (rc != 0) {
		aws_creds_free(&c);
		return rc;
	}
	*out = c;
	return 0;
}

int aws_creds_fresh(const struct aws_creds_opts *o, struct aws_creds *c, bool *renewed, struct err_msg *em)
{
	long before = o->refresh_before_s > 0 ? o->refresh_before_s : REFRESH_BEFORE_S;
	time_t now = time(NULL);
	struct aws_creds n = { 0 };
	struct err_msg e = { "" };
	int rc;

	if (renewed)
		*renewed = false;
	if (c->expires == 0 || now + before < c->expires)
		return 0;
	if ((rc = aws_creds_load(o, &n, &e)) != 0) {
		if (now < c->expires)
			return 0; /* still good for a while: try again on the next call */
		return err_set(em, rc, "the AWS credentials from %s lapsed and could not be renewed: %s", c->source, e.text);
	}
	aws_creds_free(c);
	*c = n;
	if (renewed)
		*renewed = true;
	return 0;
}

int aws_creds_region(const char *region, const char *profile, char **out, struct err_msg *em)
{
	struct aws_profile p;
	const char *r;
	bool found;

	if ((r = region) != NULL || (r = env("AWS_REGION")) != NULL || (r = env("AWS_DEFAULT_REGION")) != NULL) {
		*out = mem_strdup(r);
		return 0;
	}
	if (aws_profile_read(profile, NULL, &p, em) != 0) {
		aws_profile_free(&p);
		return DP_EINVAL;
	}
	r = aws_profile_ini_get(&p.conf, "region");
	found = r && *r;
	if (found)
		*out = mem_strdup(r);
	aws_profile_free(&p);
	if (found)
		return 0;
	return err_set(em, DP_EINVAL, "no AWS region: give --region, or set AWS_REGION, or region in the profile's "
				      "section of the config file");
}

char *aws_creds_endpoint(const char *env_id, const char *host_prefix, const char *region)
{
	char name[96];
	const char *e;
	size_t n;

	snprintf(name, sizeof(name), "AWS_ENDPOINT_URL_%s", env_id);
	e = getenv(name);
	if (e == NULL || *e == '\0')
		e = getenv("AWS_ENDPOINT_URL");
	if (e == NULL || *e == '\0')
		return mem_printf("https://%s.%s.amazonaws.com", host_prefix, region);
	n = strlen(e);
	while (n > 0 && e[n - 1] == '/')
		n--;
	return mem_strndup(e, n);
}


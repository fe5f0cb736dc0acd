/*
 * aws_creds.c - the standard AWS credential chain and region (aws.h), in the
 * SDKs' order: the environment, the shared credentials and config files
 * (static keys, credential_process), the container credentials endpoint,
 * IMDSv2. A source that is not configured is passed over and its reason
 * kept for the final message; a source that is configured but fails stops
 * the chain, named, as the SDKs do. Secrets are wiped wherever they were
 * held and never reach a message.
 */
#include "aws.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>

#include "buf.h"
#include "hclient.h"
#include "mem.h"

#define MAX_FILE ((size_t)1 << 20)  /* a shared credentials or config file */
#define MAX_ANSWER ((size_t)64 << 10) /* a credentials endpoint's answer, credential_process's output */
#define IMDS_TIMEOUT_MS 1000L       /* the SDKs' default: a laptop is not held */
#define CONTAINER_TIMEOUT_MS 2000L  /* botocore's for the container endpoint */
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

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* ---- the shared files ---- */

/* A section of an INI file: its top-level "key = value" pairs (nested ones skipped). */
struct ini {
	char *path;
	bool found;    /* the section is there */
	size_t n;
	char *k[64], *v[64];
};

static void ini_free(struct ini *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->k[i]);
		if (s->v[i])
			mem_wipe(s->v[i], strlen(s->v[i]));
		free(s->v[i]);
	}
	free(s->path);
	memset(s, 0, sizeof(*s));
}

static const char *ini_get(const struct ini *s, const char *key)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->k[i], key) == 0)
			return s->v[i];
	return NULL;
}

static char *trim(char *a, char *e)
{
	while (a < e && isspace((unsigned char)*a))
		a++;
	while (e > a && isspace((unsigned char)e[-1]))
		e--;
	*e = '\0';
	return a;
}

/* Is the header line [h] the section we want? Config files write "[profile NAME]" (and "[default]"). */
static bool section_is(const char *h, const char *profile, bool config)
{
	if (!config || strcmp(h, "default") == 0)
		return strcmp(h, profile) == 0;
	if (strncmp(h, "profile", 7) != 0 || !isspace((unsigned char)h[7]))
		return false;
	h += 7;
	while (isspace((unsigned char)*h))
		h++;
	return strcmp(h, profile) == 0;
}

/* Read section profile of the file path (a missing file is an empty one). DP_EIO/DP_ETOOBIG with em. */
static int ini_read(const char *path, const char *profile, bool config, struct ini *out, struct err_msg *em)
{
	struct buf b;
	bool in = false, nested = false;
	char *line;
	int rc;

	memset(out, 0, sizeof(*out));
	out->path = mem_strdup(path);
	buf_init(&b, MAX_FILE);
	if ((rc = buf_read_path(&b, path, NULL, em)) != 0) {
		if (rc == DP_EIO && errno == ENOENT)
			rc = 0;
		goto out;
	}
	for (line = b.data; line && *line;) {
		char *nl = strchr(line, '\n'), *end = nl ? nl : line + strlen(line), *eq, *l;
		bool indented = isspace((unsigned char)*line);

		l = trim(line, end);
		line = nl ? nl + 1 : NULL;
		if (*l == '\0' || *l == '#' || *l == ';')
			continue;
		if (*l == '[' && l[strlen(l) - 1] == ']') {
			l[strlen(l) - 1] = '\0';
			in = section_is(trim(l + 1, l + strlen(l)), profile, config);
			out->found |= in;
			nested = false;
			continue;
		}
		if (!in || (eq = strchr(l, '=')) == NULL)
			continue;
		if (indented && nested)
			continue; /* "s3 =\n  max_concurrent_requests = 10": a nested setting */
		*eq = '\0';
		{
			char *k = trim(l, eq), *v = trim(eq + 1, eq + 1 + strlen(eq + 1));

			nested = *v == '\0';
			if (out->n < sizeof(out->k) / sizeof(out->k[0]) && !ini_get(out, k)) {
				out->k[out->n] = mem_strdup(k);
				out->v[out->n++] = mem_strdup(v);
			}
		}
	}
out:
	if (b.data)
		mem_wipe(b.data, b.len);
	buf_free(&b);
	return rc;
}

static char *home_path(const char *envname, const char *rel)
{
	const char *e = env(envname), *home = env("HOME");

	if (e)
		return mem_strdup(e);
	return mem_printf("%s/%s", home ? home : "", rel);
}

/* Both files' sections for the profile. */
struct profile {
	const char *name;
	bool named;  /* the caller or AWS_PROFILE named it */
	struct ini cred, conf;
};

static int profile_read(const char *explicit_name, struct profile *p, struct err_msg *em)
{
	char *cpath = home_path("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
	char *fpath = home_path("AWS_CONFIG_FILE", ".aws/config");
	int rc;

	memset(p, 0, sizeof(*p));
	p->name = explicit_name ? explicit_name : env("AWS_PROFILE") ? env("AWS_PROFILE") : "default";
	p->named = explicit_name || env("AWS_PROFILE");
	rc = ini_read(cpath, p->name, false, &p->cred, em);
	if (rc == 0)
		rc = ini_read(fpath, p->name, true, &p->conf, em);
	free(cpath);
	free(fpath);
	return rc;
}

static void profile_free(struct profile *p)
{
	ini_free(&p->cred);
	ini_free(&p->conf);
}

static const char *profile_get(const struct profile *p, const char *key)
{
	const char *v = ini_get(&p->cred, key);

	return v ? v : ini_get(&p->conf, key);
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
		snprintf(out->source, sizeof(out->source), "%s", what);
	}
	if (j && sk)
		mem_wipe((char *)sk, strlen(sk)); /* jansson's copy */
	if (j && tk)
		mem_wipe((char *)tk, strlen(tk));
	json_decref(j);
	return rc;
}

static int from_process(const struct profile *p, const char *cmd, struct aws_creds *out, struct err_msg *em)
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

/* 1 when the profile has no credentials of a kind we take (why says what it has), 0 when out is set. */
static int from_profile(const struct profile *p, struct aws_creds *out, char *why, size_t wn, struct err_msg *em)
{
	const char *ak = profile_get(p, "aws_access_key_id"), *sk = profile_get(p, "aws_secret_access_key");
	const char *proc = profile_get(p, "credential_process");
	const char *other[] = { "role_arn", "sso_session", "sso_start_url", "web_identity_token_file" };

	if (ak && sk && *ak && *sk) {
		const char *tk = profile_get(p, "aws_session_token");

		out->access_key = mem_strdup(ak);
		out->secret_key = mem_strdup(sk);
		out->token = tk && *tk ? mem_strdup(tk) : NULL;
		snprintf(out->source, sizeof(out->source), "profile %s in %s", p->name,
			 ini_get(&p->cred, "aws_access_key_id") ? p->cred.path : p->conf.path);
		return 0;
	}
	if (ak || sk)
		return err_set(em, DP_EAUTH, "profile %s has %s but not %s", p->name,
			       ak ? "aws_access_key_id" : "aws_secret_access_key",
			       ak ? "aws_secret_access_key" : "aws_access_key_id");
	if (proc && *proc)
		return from_process(p, proc, out, em);
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		if (profile_get(p, other[i]))
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

static int from_container(long timeout_ms, struct aws_creds *out, char *why, size_t wn, struct err_msg *em)
{
	const char *rel = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"), *full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	char *url, *auth = NULL, what[300];
	const char *headers[] = { "Accept: application/json", NULL, NULL };
	struct err_msg e = { "" };
	struct buf b;
	long status = 0;
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
	{
		struct hclient_req req = { .method = "GET", .url = url, .headers = headers, .timeout_ms = timeout_ms };

		buf_init(&b, MAX_ANSWER);
		rc = hclient_request(&req, &status, &b, &e);
	}
	if (rc != 0)
		rc = err_set(em, DP_EAUTH, "%s: %s", what, e.text);
	else if (status != 200)
		rc = err_set(em, DP_EAUTH, "%s: HTTP %ld", what, status);
	else
		rc = creds_from_json(b.data ? b.data : "", b.len, "Token", what, out, em);
	if (b.data)
		mem_wipe(b.data, b.len);
	buf_free(&b);
	if (auth) {
		mem_wipe(auth, strlen(auth));
		free(auth);
	}
	free(url);
	return rc;
}

/* ---- IMDSv2 ---- */

static int imds_get(const char *method, const char *url, const char *hdr, struct buf *b, long *status,
		    struct err_msg *em)
{
	const char *headers[] = { hdr, NULL };
	struct hclient_req req = { .method = method, .url = url, .headers = headers, .timeout_ms = IMDS_TIMEOUT_MS };

	if (strcmp(method, "PUT") == 0) {
		req.body = "";
		req.body_len = 0;
	}
	if (b->data)
		mem_wipe(b->data, b->len);
	buf_reset(b);
	return hclient_request(&req, status, b, em);
}

static int from_imds(struct aws_creds *out, char *why, size_t wn, struct err_msg *em)
{
	const char *dis = env("AWS_EC2_METADATA_DISABLED"), *ep = env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	char *base, *url = NULL, *tok = NULL, *role = NULL, what[300];
	struct err_msg e = { "" };
	struct buf b;
	long status = 0;
	int rc;

	if (dis && strcasecmp(dis, "true") == 0) {
		snprintf(why, wn, "IMDS: AWS_EC2_METADATA_DISABLED is true");
		return 1;
	}
	base = ep ? mem_strndup(ep, strlen(ep) - (ep[strlen(ep) - 1] == '/')) : mem_strdup("http://169.254.169.254");
	buf_init(&b, MAX_ANSWER);
	url = mem_printf("%s/latest/api/token", base);
	rc = imds_get("PUT", url, "X-aws-ec2-metadata-token-ttl-seconds: 21600", &b, &status, &e);
	if (rc != 0 || status != 200 || b.len == 0 || strpbrk(b.data, "\r\n")) {
		/* no answer: not on EC2 (or IMDS is off); go on as the SDKs do */
		snprintf(why, wn, "IMDS: %.100s/latest/api/token: %.200s", base,
			 rc != 0 ? e.text : status != 200 ? "no token (HTTP status not 200)" : "no token");
		rc = 1;
		goto out;
	}
	tok = mem_printf("X-aws-ec2-metadata-token: %s", b.data);
	free(url);
	url = mem_printf("%s/latest/meta-data/iam/security-credentials/", base);
	snprintf(what, sizeof(what), "IMDS %.200s", url);
	rc = imds_get("GET", url, tok, &b, &status, &e);
	if (rc == 0 && status == 404) {
		snprintf(why, wn, "IMDS: the instance has no IAM role");
		rc = 1;
		goto out;
	}
	if (rc != 0 || status != 200 || b.len == 0) {
		rc = err_set(em, DP_EAUTH, "%s: %s", what, rc != 0 ? e.text : "no role name");
		goto out;
	}
	role = mem_strndup(b.data, strcspn(b.data, "\r\n"));
	free(url);
	url = mem_printf("%s/latest/meta-data/iam/security-credentials/%s", base, role);
	snprintf(what, sizeof(what), "IMDS (role %.100s)", role);
	rc = imds_get("GET", url, tok, &b, &status, &e);
	if (rc != 0 || status != 200)
		rc = err_set(em, DP_EAUTH, "%s: %s", what, rc != 0 ? e.text : "HTTP status not 200");
	else
		rc = creds_from_json(b.data ? b.data : "", b.len, "Token", what, out, em);
out:
	if (b.data)
		mem_wipe(b.data, b.len);
	buf_free(&b);
	if (tok) {
		mem_wipe(tok, strlen(tok));
		free(tok);
	}
	free(role);
	free(url);
	free(base);
	return rc;
}

int aws_creds_load(const char *profile, long timeout_ms, struct aws_creds *out, struct err_msg *em)
{
	const char *ak = env("AWS_ACCESS_KEY_ID"), *sk = env("AWS_SECRET_ACCESS_KEY");
	char why[4][400] = { "", "", "", "" };
	struct aws_creds c = { 0 };
	struct profile p;
	int rc;

	if (profile) {
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
	if (profile_read(profile, &p, em) != 0) {
		profile_free(&p);
		return DP_EINVAL;
	}
	if (p.named && !p.cred.found && !p.conf.found) {
		rc = err_set(em, DP_EINVAL, "AWS profile %s is not in %s or %s", p.name, p.cred.path, p.conf.path);
		profile_free(&p);
		return rc;
	}
	rc = from_profile(&p, &c, why[1], sizeof(why[1]), em);
	profile_free(&p);
	if (rc == 1)
		rc = from_container(timeout_ms < CONTAINER_TIMEOUT_MS ? timeout_ms : CONTAINER_TIMEOUT_MS, &c, why[2],
				    sizeof(why[2]), em);
	if (rc == 1)
		rc = from_imds(&c, why[3], sizeof(why[3]), em);
	if (rc == 1)
		return err_set(em, DP_EAUTH, "no AWS credentials found: %s; %s; %s; %s", why[0], why[1], why[2], why[3]);
	if (rc != 0) {
		aws_creds_free(&c);
		return rc;
	}
	*out = c;
	return 0;
}

int aws_region(const char *region, const char *profile, char **out, struct err_msg *em)
{
	struct profile p;
	const char *r;
	bool found;

	if ((r = region) != NULL || (r = env("AWS_REGION")) != NULL || (r = env("AWS_DEFAULT_REGION")) != NULL) {
		*out = mem_strdup(r);
		return 0;
	}
	if (profile_read(profile, &p, em) != 0) {
		profile_free(&p);
		return DP_EINVAL;
	}
	r = ini_get(&p.conf, "region");
	found = r && *r;
	if (found)
		*out = mem_strdup(r);
	profile_free(&p);
	if (found)
		return 0;
	return err_set(em, DP_EINVAL, "no AWS region: give --region, or set AWS_REGION, or region in the profile's "
				      "section of the config file");
}

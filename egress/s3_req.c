/*
 * s3_req.c - one S3 request for the uploader (s3_int.h): the settings
 * resolved once (endpoint, path or virtual-hosted style, the object's
 * encoded path, the region, credentials: the settings' keys or the chain),
 * then each request signed with SigV4 (common/aws_sigv4.c), sent through
 * webc, and tried again with backoff and jitter on what is worth another
 * try. The store's own error (its XML Code and Message) is what em says.
 */
#include "s3_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cloud/aws_sigv4.h"
#include "cloud/aws_xml.h"
#include "buf.h"
#include "clock.h"
#include "mem.h"
#include "sha256.h"

#define MAX_KEY 1024          /* S3's limit on a key, in bytes */
#define MAX_SECRET_FILE 4096
#define MAX_ANSWER ((size_t)1 << 20)
#define MAX_BACKOFF_MS 20000L
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* ---- where the object is ---- */

static bool host_is_ip_or_local(const char *h, size_t n)
{
	bool digits_dots = n > 0;

	if (n > 0 && h[0] == '[')
		return true; /* an IPv6 literal */
	if (n == 9 && strncasecmp(h, "localhost", 9) == 0)
		return true;
	for (size_t i = 0; i < n; i++)
		digits_dots &= (h[i] >= '0' && h[i] <= '9') || h[i] == '.';
	return digits_dots;
}

/* A bucket name that can be a host name label under TLS (S3's DNS-compatible names, and no dots). */
static bool bucket_is_label(const char *b, bool https)
{
	size_t n = strlen(b);

	if (n < 3 || n > 63 || !isalnum((unsigned char)b[0]) || !isalnum((unsigned char)b[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = b[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || (c == '.' && !https)))
			return false;
	}
	return true;
}

static int bucket_ok(const char *b, struct err_msg *em)
{
	size_t n = b ? strlen(b) : 0;

	if (n < 3 || n > 255)
		return err_set(em, DP_EINVAL, "S3 egress: BucketName %s", n ? "must be 3 to 255 characters" : "is not set");
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)b[i]) && !strchr("-._", b[i]))
			return err_set(em, DP_EINVAL, "S3 egress: BucketName %.64s has a character S3 does not allow", b);
	return 0;
}

/* base (scheme://host[:port]) and the encoded path of the object for cfg, in region. */
static int locate(const struct s3_cfg *cfg, const char *region, const char *name, char **base, char **path,
		  char **desc, struct err_msg *em)
{
	char *ep = cfg->endpoint && *cfg->endpoint ? mem_strdup(cfg->endpoint) : aws_creds_endpoint("S3", "s3", region);
	const char *s = strstr(ep, "://"), *host, *hend, *colon;
	struct buf key, p;
	bool https, path_style;
	int rc = 0;

	if ((rc = bucket_ok(cfg->bucket, em)) != 0)
		goto out;
	if (name == NULL || *name == '\0') {
		rc = err_set(em, DP_EINVAL, "S3 egress: the artifact has no name");
		goto out;
	}
	if (strchr(ep, '@')) { /* a user and password in the URL: refused, and not repeated in the message */
		rc = err_set(em, DP_EINVAL, "S3 egress: Endpoint holds a user or password ('@'); it must be "
			     "scheme://host[:port] alone (keys go in AccessKeyId and SecretAccessKey)");
		goto out;
	}
	https = s && (size_t)(s - ep) == 5 && strncasecmp(ep, "https", 5) == 0;
	if (s == NULL || !(https || ((size_t)(s - ep) == 4 && strncasecmp(ep, "http", 4) == 0))) {
		rc = err_set(em, DP_EINVAL, "S3 egress: Endpoint %.200s is not an http:// or https:// URL", ep);
		goto out;
	}
	host = s + 3;
	hend = host + strcspn(host, "/?#");
	if (hend == host || (*hend && strcmp(hend, "/") != 0) || strpbrk(ep, " \t\r\n")) {
		rc = err_set(em, DP_EINVAL, "S3 egress: Endpoint %.200s must be scheme://host[:port] alone (no path "
			     "or query)", ep);
		goto out;
	}
	colon = host[0] == '[' ? strchr(host, ']') : memchr(host, ':', (size_t)(hend - host));
	if (host[0] == '[')
		colon = colon ? colon + 1 : hend;
	if (colon == NULL || *colon != ':')
		colon = hend;
	if (colon < hend) { /* a port: 1 to 65535 */
		unsigned long port = 0;
		const char *d = colon + 1;

		while (d < hend && *d >= '0' && *d <= '9' && port <= 65535)
			port = port * 10 + (unsigned long)(*d++ - '0');
		if (d != hend || d == colon + 1 || port == 0 || port > 65535) {
			rc = err_set(em, DP_EINVAL, "S3 egress: Endpoint %.200s has a port that is not a number from 1 "
				     "to 65535", ep);
			goto out;
		}
	}
	path_style = cfg->force_path_style || host_is_ip_or_local(host, (size_t)(colon - host)) ||
		     !bucket_is_label(cfg->bucket, https);

	buf_init(&key, 0);
	buf_puts(&key, "");
	if (cfg->key_prefix && *cfg->key_prefix) {
		size_t n = strlen(cfg->key_prefix);

		while (n > 0 && cfg->key_prefix[n - 1] == '/')
			n--;
		buf_append(&key, cfg->key_prefix, n);
		if (n)
			buf_putc(&key, '/');
	}
	buf_puts(&key, name);
	if (key.len > MAX_KEY) {
		rc = err_set(em, DP_EINVAL, "S3 egress: the key %.64s... is over %d bytes", key.data, MAX_KEY);
		buf_free(&key);
		goto out;
	}
	buf_init(&p, 0);
	if (path_style) {
		buf_putc(&p, '/');
		buf_pct_encode(&p, cfg->bucket, strlen(cfg->bucket), false);
		*base = mem_strndup(ep, (size_t)(hend - ep));
	} else {
		*base = mem_printf("%.*s%s.%.*s", (int)(host - ep), ep, cfg->bucket, (int)(hend - host), host);
	}
	buf_putc(&p, '/');
	buf_pct_encode(&p, key.data, key.len, true);
	*path = buf_steal(&p, NULL);
	if (desc) {
		char shown[300];

		aws_error_copy(shown, sizeof(shown), key.data, key.len);
		*desc = mem_printf("s3://%s/%s at %s", cfg->bucket, shown, *base);
	}
	buf_free(&key);
out:
	free(ep);
	return rc;
}

int s3_object_url(const struct s3_cfg *cfg, const char *region, const char *name, char **url, struct err_msg *em)
{
	char *base = NULL, *path = NULL;
	int rc = locate(cfg, region ? region : "us-east-1", name, &base, &path, NULL, em);

	if (rc == 0)
		*url = mem_printf("%s%s", base, path);
	free(base);
	free(path);
	return rc;
}

/* ---- credentials ---- */

static int static_keys(const struct s3_cfg *cfg, struct aws_creds *out, struct err_msg *em)
{
	bool has_secret = (cfg->secret_access_key && *cfg->secret_access_key) ||
			  (cfg->secret_access_key_file && *cfg->secret_access_key_file);
	struct buf b;
	size_t n;
	int rc;

	if (!(cfg->access_key_id && *cfg->access_key_id) || !has_secret)
		return err_set(em, DP_EINVAL, "S3 egress: %s is set but not %s",
			       has_secret ? "SecretAccessKey" : "AccessKeyId", has_secret ? "AccessKeyId" : "SecretAccessKey");
	memset(out, 0, sizeof(*out));
	out->access_key = mem_strdup(cfg->access_key_id);
	out->token = cfg->session_token && *cfg->session_token ? mem_strdup(cfg->session_token) : NULL;
	if (cfg->secret_access_key && *cfg->secret_access_key) {
		out->secret_key = mem_strdup(cfg->secret_access_key);
		snprintf(out->source, sizeof(out->source), "the settings' AccessKeyId and SecretAccessKey");
		return 0;
	}
	buf_init(&b, MAX_SECRET_FILE);
	if ((rc = buf_read_path(&b, cfg->secret_access_key_file, NULL, em)) != 0) {
		err_prefix(em, "S3 egress: SecretAccessKeyFile");
		buf_free(&b);
		aws_creds_free(out);
		return DP_EINVAL;
	}
	for (n = b.len; n && isspace((unsigned char)b.data[n - 1]);)
		n--;
	if (n == 0 || memchr(b.data, '\n', n)) {
		rc = err_set(em, DP_EINVAL, "S3 egress: SecretAccessKeyFile %.200s is empty or has more than one line",
			     cfg->secret_access_key_file);
		aws_creds_free(out);
	} else {
		out->secret_key = mem_strndup(b.data, n);
		snprintf(out->source, sizeof(out->source), "the settings' AccessKeyId and SecretAccessKeyFile %.100s",
			 cfg->secret_access_key_file);
	}
	mem_wipe(b.data, b.len);
	buf_free(&b);
	return rc;
}

int s3_conn_cfg_init(struct s3_conn_cfg *c, const struct s3_cfg *cfg, const char *name, struct err_msg *em)
{
	int rc;

	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->creds_mu, NULL);
	if (cfg->region && *cfg->region)
		c->region = mem_strdup(cfg->region);
	else if (aws_creds_region(NULL, cfg->profile, &c->region, NULL) != 0)
		c->region = mem_strdup("us-east-1");
	if ((rc = locate(cfg, c->region, name, &c->base, &c->path, &c->desc, em)) != 0)
		return rc;
	c->https = strncasecmp(c->base, "https:", 6) == 0;
	c->attempts = cfg->attempts > 0 ? cfg->attempts : S3_ATTEMPTS;
	c->retry_base_ms = cfg->retry_base_ms > 0 ? cfg->retry_base_ms : 200;
	if (cfg->web)
		c->web = *cfg->web;
	c->co.profile = cfg->profile && *cfg->profile ? cfg->profile : NULL;
	c->co.profile_path = cfg->profile_path && *cfg->profile_path ? cfg->profile_path : NULL;
	c->co.web = cfg->web;
	c->co.refresh_before_s = cfg->refresh_before_s;
	if ((cfg->access_key_id && *cfg->access_key_id) || (cfg->secret_access_key && *cfg->secret_access_key) ||
	    (cfg->secret_access_key_file && *cfg->secret_access_key_file)) {
		c->static_keys = true;
		return static_keys(cfg, &c->creds, em);
	}
	if ((rc = aws_creds_load(&c->co, &c->creds, em)) != 0)
		err_prefix(em, "S3 egress");
	return rc;
}

void s3_conn_cfg_free(struct s3_conn_cfg *c)
{
	aws_creds_free(&c->creds);
	pthread_mutex_destroy(&c->creds_mu);
	free(c->base);
	free(c->path);
	free(c->region);
	free(c->desc);
	memset(c, 0, sizeof(*c));
}

/* A copy of the credentials to sign with, renewed first when they are about to lapse (or force). */
static int creds_now(struct s3_conn_cfg *c, bool force, struct aws_creds *out, struct err_msg *em)
{
	int rc = 0;

	pthread_mutex_lock(&c->creds_mu);
	if (!c->static_keys) {
		if (force)
			c->creds.expires = 1; /* the store said they lapsed: renew now */
		rc = aws_creds_fresh(&c->co, &c->creds, NULL, em);
	}
	if (rc == 0)
		aws_creds_copy(out, &c->creds);
	pthread_mutex_unlock(&c->creds_mu);
	return rc;
}

/* ---- one request ---- */

static bool code_is(const char *code, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(code, *list) == 0)
			return true;
	return false;
}

static bool worth_retrying(const struct aws_error *ae)
{
	static const char *const codes[] = { "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable",
					     "Throttling", "ThrottlingException", "RequestTimeTooSkewed", NULL };

	return ae->status >= 500 || ae->status == 429 || code_is(ae->type, codes);
}

static bool creds_lapsed(const struct aws_error *ae)
{
	static const char *const codes[] = { "ExpiredToken", "TokenRefreshRequired", "ExpiredTokenException", NULL };

	return code_is(ae->type, codes);
}

static int error_code(const struct aws_error *ae)
{
	static const char *const auth[] = { "AccessDenied", "SignatureDoesNotMatch", "InvalidAccessKeyId",
					    "ExpiredToken", "InvalidToken", "TokenRefreshRequired", NULL };
	static const char *const missing[] = { "NoSuchBucket", "NoSuchUpload", "NoSuchKey", NULL };

	if (code_is(ae->type, auth) || ae->status == 401 || ae->status == 403)
		return DP_EAUTH;
	if (code_is(ae->type, missing) || ae->status == 404)
		return DP_ENOTFOUND;
	return DP_EREMOTE;
}

/* Full jitter within [ceiling/2, ceiling], the ceiling doubling from retry_base_ms. 0, or DP_ECANCELED. */
static int backoff(const struct s3_conn_cfg *c, int attempt)
{
	static _Thread_local uint64_t seed;
	long ceiling = c->retry_base_ms;
	long ms;

	for (int i = 1; i < attempt && ceiling < MAX_BACKOFF_MS; i++)
		ceiling *= 2;
	if (ceiling > MAX_BACKOFF_MS)
		ceiling = MAX_BACKOFF_MS;
	if (seed == 0)
		seed = (uint64_t)clock_unix_ms() ^ (uint64_t)(uintptr_t)&seed;
	seed ^= seed << 13;
	seed ^= seed >> 7;
	seed ^= seed << 17;
	ms = ceiling / 2 + (long)(seed % (uint64_t)(ceiling / 2 + 1));
	return webc_pause(&c->web, ms);
}

/* The request's headers: call's, x-amz-content-sha256, then the signature's (but Host, which webc writes). */
static int sign(struct s3_conn_cfg *c, const struct s3_call *call, const char *hash, bool force_creds,
		char *sig[AWS_SIGV4_MAX], const char ***hdrs, struct err_msg *em)
{
	struct aws_creds cr = { 0 };
	char *url = mem_printf("%s%s%s%s", c->base, c->path, call->query ? "?" : "", call->query ? call->query : "");
	char *sha = mem_printf("x-amz-content-sha256: %s", hash);
	size_t n = 0, k = 0;
	const char **h;
	int rc;

	for (; call->headers && call->headers[n]; n++)
		;
	h = mem_array(n + 2 + AWS_SIGV4_MAX, sizeof(*h));
	for (size_t i = 0; i < n; i++)
		h[k++] = call->headers[i];
	h[k++] = sha;
	h[k] = NULL;
	if ((rc = creds_now(c, force_creds, &cr, em)) == 0) {
		struct aws_sigv4_req r = { .method = call->method, .url = url, .headers = h, .payload_hash = hash,
					   .s3 = true, .service = "s3", .region = c->region };

		rc = aws_sigv4_sign(&r, &cr, sig, em);
	}
	aws_creds_free(&cr);
	free(url);
	if (rc != 0) {
		free(sha);
		free(h);
		return rc;
	}
	for (size_t i = 0; sig[i]; i++)
		if (strncmp(sig[i], "Host:", 5) != 0)
			h[k++] = sig[i];
	h[k] = NULL;
	*hdrs = h;
	return 0;
}

static void hdrs_free(const char **h, const struct s3_call *call)
{
	size_t n = 0;

	if (h == NULL)
		return;
	for (; call->headers && call->headers[n]; n++)
		;
	free((char *)h[n]); /* the x-amz-content-sha256 line */
	free(h);
}

int s3_send(struct s3_conn_cfg *c, struct webc_conn **conn, const struct s3_call *call, struct webc_resp *resp,
	    struct err_msg *em)
{
	char hash[SHA256_HEX_LEN], *target;
	bool force_creds = false;
	int rc = DP_EIO;

	if (c->https) {
		snprintf(hash, sizeof(hash), "UNSIGNED-PAYLOAD");
	} else if (call->payload_hash) {
		snprintf(hash, sizeof(hash), "%s", call->payload_hash);
	} else if (call->len == 0) {
		snprintf(hash, sizeof(hash), "%s", EMPTY_SHA256);
	} else {
		uint8_t d[SHA256_LEN];

		sha256(call->body, call->len, d);
		sha256_hex(d, hash);
	}
	target = mem_printf("%s%s%s", c->path, call->query ? "?" : "", call->query ? call->query : "");
	for (int attempt = 1; attempt <= c->attempts; attempt++) {
		char *sig[AWS_SIGV4_MAX] = { 0 };
		const char **hdrs = NULL;
		struct aws_error ae;
		struct webc_req req = { .method = call->method, .target = target, .body = call->body ? call->body : "",
					.body_len = call->len, .max_resp = MAX_ANSWER,
					.want_headers = call->want_headers };

		webc_resp_free(resp);
		if (*conn == NULL && (rc = webc_open(c->base, &c->web, conn, em)) != 0)
			break;
		if ((rc = sign(c, call, hash, force_creds, sig, &hdrs, em)) != 0)
			break;
		req.headers = hdrs;
		rc = webc_request(*conn, &req, resp, em);
		hdrs_free(hdrs, call);
		aws_sigv4_free(sig);
		force_creds = false;
		if (rc == DP_EIO) {
			webc_close(*conn); /* whatever state it was left in */
			*conn = NULL;
			err_prefix(em, "S3 %s %s (attempt %d of %d)", call->action, c->desc, attempt, c->attempts);
		} else if (rc != 0) {
			err_prefix(em, "S3 %s %s", call->action, c->desc);
			break;
		} else if (resp->status >= 200 && resp->status < 300 &&
			   !(call->error_in_200 && resp->body.data && strstr(resp->body.data, "<Error>"))) {
			break;
		} else {
			aws_xml_error(resp->body.data, resp->body.len, resp->status, &ae);
			rc = error_code(&ae);
			err_set(em, rc, "S3 %s %s: %s%s%s (HTTP %d)", call->action, c->desc, ae.type,
				ae.message[0] ? ": " : "", ae.message, resp->status);
			if (creds_lapsed(&ae) && !c->static_keys && attempt < c->attempts) {
				force_creds = true;
				continue; /* at once, with renewed credentials */
			}
			if (!worth_retrying(&ae))
				break;
		}
		if (attempt < c->attempts && backoff(c, attempt) != 0) {
			rc = err_set(em, DP_ECANCELED, "S3 %s %s: cancelled", call->action, c->desc);
			break;
		}
	}
	free(target);
	return rc;
}

/*
 * aws.c - signed AWS calls (aws.h): SigV4 as AWS publishes it (a canonical
 * request, a string to sign, a key derived from the secret through the date,
 * region and service), endpoints as the SDKs resolve them, the JSON 1.1
 * protocol ECS and Secrets Manager speak (POST /, X-Amz-Target, errors as
 * {"__type": "...#Name", "message": ...}) with retries on throttling and
 * 5xx, and STS's query protocol for GetCallerIdentity. The credential chain
 * is aws_creds.c. tests/unit/test_sigv4.c checks the signature against
 * AWS's published example; fleet_ecs.sh checks it against botocore's and
 * against a stand-in that verifies every request it gets.
 */
#include "aws.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "buf.h"
#include "fleet.h"
#include "hclient.h"
#include "mem.h"
#include "sha256.h"

#define MAX_RESPONSE ((size_t)16 << 20) /* DescribeTasks of 100 tasks is well under 1 MiB */
#define MAX_URL 2048
#define ATTEMPTS 4

void aws_client_free(struct aws_client *c)
{
	if (c == NULL)
		return;
	aws_creds_free(&c->creds);
	free(c->region);
	c->region = NULL;
}

char *aws_endpoint(const char *env_id, const char *host_prefix, const char *region)
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

/* ---- SigV4 ---- */

struct qpair {
	char *k, *v;
};

static int cmp_qpair(const void *a, const void *b)
{
	const struct qpair *x = a, *y = b;
	int c = strcmp(x->k, y->k);

	return c ? c : strcmp(x->v, y->v);
}

/*
 * The canonical query string: the pairs as the URL encodes them, sorted by
 * name, then value. The URL must already be encoded canonically (every byte
 * but the unreserved ones as %XX), as botocore assumes of the URLs it signs;
 * our calls put their parameters in the body.
 */
static void canonical_query(struct buf *b, const char *q)
{
	struct qpair *pairs = NULL;
	size_t n = 0;

	if (q && *q == '\0')
		q = NULL; /* "https://host/?" has no pairs */
	while (q) {
		size_t len = strcspn(q, "&");
		const char *eq = memchr(q, '=', len);

		pairs = mem_realloc(pairs, (n + 1) * sizeof(*pairs));
		pairs[n].k = mem_strndup(q, eq ? (size_t)(eq - q) : len);
		pairs[n++].v = eq ? mem_strndup(eq + 1, len - (size_t)(eq + 1 - q)) : mem_strdup("");
		q = q[len] == '&' ? q + len + 1 : NULL;
	}
	mem_sort(pairs, n, sizeof(*pairs), cmp_qpair);
	for (size_t i = 0; i < n; i++) {
		buf_printf(b, "%s%s=%s", i ? "&" : "", pairs[i].k, pairs[i].v);
		free(pairs[i].k);
		free(pairs[i].v);
	}
	free(pairs);
}

struct hdr {
	char *name;  /* lowercase */
	char *value; /* trimmed, inner runs of spaces made one */
};

static int cmp_hdr(const void *a, const void *b)
{
	return strcmp(((const struct hdr *)a)->name, ((const struct hdr *)b)->name);
}

static struct hdr hdr_make(const char *name, size_t nlen, const char *value)
{
	struct hdr h = { mem_strndup(name, nlen), mem_alloc(strlen(value) + 1) };
	char *o = h.value;

	for (char *p = h.name; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	while (*value == ' ' || *value == '\t')
		value++;
	for (const char *p = value; *p; p++) {
		if (*p == ' ' || *p == '\t') {
			while (p[1] == ' ' || p[1] == '\t')
				p++;
			if (p[1] == '\0')
				break;
			*o++ = ' ';
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
	return h;
}

/* Split url into the Host header's value (default ports dropped, as botocore does), path and query. */
static int split_url(const char *url, char **host, char **path, const char **query, struct err_msg *em)
{
	const char *s = strstr(url, "://"), *a, *end, *colon;
	bool https;

	if (s == NULL || strlen(url) > MAX_URL) {
		err_set(em, DP_EINVAL, "%.200s is not an http:// or https:// URL", url);
		return DP_EINVAL;
	}
	https = (size_t)(s - url) == 5 && strncasecmp(url, "https", 5) == 0;
	if (!https && !((size_t)(s - url) == 4 && strncasecmp(url, "http", 4) == 0)) {
		err_set(em, DP_EINVAL, "%.200s is not an http:// or https:// URL", url);
		return DP_EINVAL;
	}
	a = s + 3;
	end = a + strcspn(a, "/?#");
	if (end == a) {
		err_set(em, DP_EINVAL, "%.200s has no host", url);
		return DP_EINVAL;
	}
	colon = memchr(a, ':', (size_t)(end - a));
	if (colon && a[0] != '[' && ((https && end - colon == 4 && strncmp(colon, ":443", 4) == 0) ||
				     (!https && end - colon == 3 && strncmp(colon, ":80", 3) == 0)))
		*host = mem_strndup(a, (size_t)(colon - a));
	else
		*host = mem_strndup(a, (size_t)(end - a));
	for (char *p = *host; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if (*end == '/') {
		size_t n = strcspn(end, "?#");

		*path = mem_strndup(end, n);
		end += n;
	} else {
		*path = mem_strdup("/");
	}
	*query = *end == '?' ? end + 1 : NULL;
	return 0;
}

static void now_amz(char out[17])
{
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

int aws_sigv4_sign(const struct aws_sigv4_req *req, const struct aws_creds *c, char *out[AWS_SIGV4_MAX],
		   struct err_msg *em)
{
	char date[17], *host = NULL, *path = NULL, *query_dup = NULL, hex[SHA256_HEX_LEN], *signed_names;
	const char *query = NULL;
	uint8_t d[SHA256_LEN], kd[SHA256_LEN];
	struct hdr *h = NULL;
	size_t nh = 0, i;
	struct buf cr, sts, names;
	int rc;

	if ((rc = split_url(req->url, &host, &path, &query, em)) != 0)
		return rc;
	if (query) {
		query_dup = mem_strndup(query, strcspn(query, "#"));
		query = query_dup;
	}
	if (req->amz_date && strlen(req->amz_date) == 16)
		memcpy(date, req->amz_date, 17);
	else
		now_amz(date);
	for (i = 0; req->headers && req->headers[i]; i++)
		;
	h = mem_array(i + 3, sizeof(*h));
	h[nh++] = hdr_make("host", 4, host);
	h[nh++] = hdr_make("x-amz-date", 10, date);
	if (c->token)
		h[nh++] = hdr_make("x-amz-security-token", 20, c->token);
	for (i = 0; req->headers && req->headers[i]; i++) {
		const char *l = req->headers[i], *colon = strchr(l, ':');

		if (colon)
			h[nh++] = hdr_make(l, (size_t)(colon - l), colon + 1);
	}
	mem_sort(h, nh, sizeof(*h), cmp_hdr);

	buf_init(&cr, 0);
	buf_init(&names, 0);
	buf_printf(&cr, "%s\n", req->method);
	fleet_pct_encode(&cr, path, strlen(path), true);
	buf_putc(&cr, '\n');
	canonical_query(&cr, query);
	buf_putc(&cr, '\n');
	for (i = 0; i < nh; i++) {
		/* the same header twice: one line, values joined with commas */
		if (i && strcmp(h[i].name, h[i - 1].name) == 0) {
			cr.len--; /* the newline */
			buf_printf(&cr, ",%s\n", h[i].value);
			continue;
		}
		buf_printf(&cr, "%s:%s\n", h[i].name, h[i].value);
		buf_printf(&names, "%s%s", names.len ? ";" : "", h[i].name);
	}
	signed_names = names.data;
	buf_printf(&cr, "\n%s\n", signed_names);
	sha256(req->body ? req->body : "", req->body ? req->body_len : 0, d);
	sha256_hex(d, hex);
	buf_puts(&cr, hex);

	sha256(cr.data, cr.len, d);
	sha256_hex(d, hex);
	buf_init(&sts, 0);
	buf_printf(&sts, "AWS4-HMAC-SHA256\n%s\n%.8s/%s/%s/aws4_request\n%s", date, date, req->region, req->service, hex);
	{
		char *k0 = mem_printf("AWS4%s", c->secret_key);

		sha256_hmac(k0, strlen(k0), date, 8, kd);
		mem_wipe(k0, strlen(k0));
		free(k0);
	}
	sha256_hmac(kd, sizeof(kd), req->region, strlen(req->region), kd);
	sha256_hmac(kd, sizeof(kd), req->service, strlen(req->service), kd);
	sha256_hmac(kd, sizeof(kd), "aws4_request", 12, kd);
	sha256_hmac(kd, sizeof(kd), sts.data, sts.len, d);
	mem_wipe(kd, sizeof(kd));
	sha256_hex(d, hex);

	i = 0;
	out[i++] = mem_printf("Host: %s", host);
	out[i++] = mem_printf("X-Amz-Date: %s", date);
	if (c->token)
		out[i++] = mem_printf("X-Amz-Security-Token: %s", c->token);
	out[i++] = mem_printf("Authorization: AWS4-HMAC-SHA256 Credential=%s/%.8s/%s/%s/aws4_request, "
			      "SignedHeaders=%s, Signature=%s", c->access_key, date, req->region, req->service,
			      signed_names, hex);
	out[i] = NULL;

	for (i = 0; i < nh; i++) {
		mem_wipe(h[i].value, strlen(h[i].value));
		free(h[i].name);
		free(h[i].value);
	}
	free(h);
	mem_wipe(cr.data, cr.len); /* it holds the session token */
	buf_free(&cr);
	buf_free(&sts);
	buf_free(&names);
	free(host);
	free(path);
	free(query_dup);
	return 0;
}

void aws_sigv4_free(char *out[AWS_SIGV4_MAX])
{
	for (int i = 0; i < AWS_SIGV4_MAX && out[i]; i++) {
		mem_wipe(out[i], strlen(out[i]));
		free(out[i]);
		out[i] = NULL;
	}
}

/* ---- calls ---- */

/* Throttling and server faults: worth another attempt. */
static bool retryable(long status, const char *type)
{
	static const char *const throttled[] = { "ThrottlingException", "ThrottledException", "Throttling",
						 "TooManyRequestsException", "RequestLimitExceeded",
						 "RequestThrottled", "RequestThrottledException",
						 "ProvisionedThroughputExceededException", "SlowDown" };

	if (status >= 500 || status == 429)
		return true;
	for (size_t i = 0; i < sizeof(throttled) / sizeof(throttled[0]); i++)
		if (strcmp(type, throttled[i]) == 0)
			return true;
	return false;
}

static void clean_copy(char *dst, size_t n, const char *src, size_t len)
{
	size_t k = len < n - 1 ? len : n - 1;

	for (size_t i = 0; i < k; i++)
		dst[i] = (unsigned char)src[i] < 0x20 ? ' ' : src[i];
	dst[k] = '\0';
}

/* The error of a JSON 1.1 answer: __type after its '#' (and before any ':'), message or Message. */
static void json_error(const struct buf *raw, long status, struct aws_error *ae)
{
	json_t *j = raw->len ? json_loadb(raw->data, raw->len, 0, NULL) : NULL;
	const char *t = json_string_value(json_object_get(j, "__type"));
	const char *m = json_string_value(json_object_get(j, "message"));

	memset(ae, 0, sizeof(*ae));
	ae->status = status;
	if (m == NULL)
		m = json_string_value(json_object_get(j, "Message"));
	if (t) {
		const char *hash = strrchr(t, '#');

		t = hash ? hash + 1 : t;
		clean_copy(ae->type, sizeof(ae->type), t, strcspn(t, ":"));
	} else {
		snprintf(ae->type, sizeof(ae->type), "HTTP %ld", status);
	}
	if (m)
		clean_copy(ae->message, sizeof(ae->message), m, strlen(m));
	else if (j == NULL && raw->len)
		clean_copy(ae->message, sizeof(ae->message), raw->data, raw->len < 200 ? raw->len : 200);
	json_decref(j);
}

/* The text between <tag> and </tag> in an XML answer, or NULL (new string). */
static char *xml_text(const char *x, const char *tag)
{
	char open[64], close[64];
	const char *a, *b;

	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	if ((a = strstr(x, open)) == NULL || (b = strstr(a, close)) == NULL)
		return NULL;
	a += strlen(open);
	return mem_strndup(a, (size_t)(b - a));
}

static void xml_error(const struct buf *raw, long status, struct aws_error *ae)
{
	char *t = raw->len ? xml_text(raw->data, "Code") : NULL, *m = raw->len ? xml_text(raw->data, "Message") : NULL;

	memset(ae, 0, sizeof(*ae));
	ae->status = status;
	if (t)
		clean_copy(ae->type, sizeof(ae->type), t, strlen(t));
	else
		snprintf(ae->type, sizeof(ae->type), "HTTP %ld", status);
	if (m)
		clean_copy(ae->message, sizeof(ae->message), m, strlen(m));
	free(t);
	free(m);
}

static int error_code(const struct aws_error *ae)
{
	static const char *const auth[] = { "AccessDeniedException", "AccessDenied", "UnrecognizedClientException",
					    "InvalidSignatureException", "SignatureDoesNotMatch", "ExpiredTokenException",
					    "ExpiredToken", "InvalidClientTokenId", "IncompleteSignature",
					    "MissingAuthenticationTokenException", "NotAuthorized" };
	size_t n = strlen(ae->type);

	for (size_t i = 0; i < sizeof(auth) / sizeof(auth[0]); i++)
		if (strcmp(ae->type, auth[i]) == 0)
			return DP_EAUTH;
	if (n > 17 && strcmp(ae->type + n - 17, "NotFoundException") == 0)
		return DP_ENOTFOUND;
	return ae->status == 401 || ae->status == 403 ? DP_EAUTH : DP_EREMOTE;
}

struct send {
	const char *endpoint, *service, *region, *action;
	const char *const *headers; /* besides the signed ones */
	const char *body;
	size_t body_len;
	bool xml;                   /* errors are the query protocol's XML */
};

/* Sign and send, trying again on throttling, 5xx and no answer. 0 with the 2xx answer in raw, else an error. */
static int send_signed(const struct aws_client *c, const struct send *s, struct buf *raw, struct aws_error *ae,
		       struct err_msg *em)
{
	char *url = mem_printf("%s/", s->endpoint);
	struct aws_error local;
	int rc = 0;

	if (ae == NULL)
		ae = &local;
	memset(ae, 0, sizeof(*ae));
	for (int attempt = 1; attempt <= ATTEMPTS; attempt++) {
		char *sig[AWS_SIGV4_MAX] = { 0 };
		const char *hdrs[16];
		size_t n = 0;
		long status = 0;
		struct aws_sigv4_req sr = { .method = "POST", .url = url, .headers = s->headers, .body = s->body,
					    .body_len = s->body_len, .service = s->service, .region = s->region };
		struct hclient_req req = { .method = "POST", .url = url, .headers = hdrs, .body = s->body,
					   .body_len = s->body_len, .timeout_ms = c->timeout_ms };

		if ((rc = aws_sigv4_sign(&sr, &c->creds, sig, em)) != 0)
			break;
		for (size_t i = 0; s->headers && s->headers[i] && n < 8; i++)
			hdrs[n++] = s->headers[i];
		for (size_t i = 0; sig[i]; i++)
			hdrs[n++] = sig[i];
		hdrs[n++] = "User-Agent: diagport/" DP_VERSION " (fleet)";
		hdrs[n] = NULL;
		if (raw->data)
			mem_wipe(raw->data, raw->len);
		buf_reset(raw);
		rc = hclient_request(&req, &status, raw, em);
		aws_sigv4_free(sig);
		if (rc == 0 && status >= 200 && status < 300)
			break;
		if (rc == 0) {
			if (s->xml)
				xml_error(raw, status, ae);
			else
				json_error(raw, status, ae);
			rc = error_code(ae);
			err_set(em, rc, "%s: %s%s%s", s->action, ae->type, ae->message[0] ? ": " : "", ae->message);
			if (!retryable(status, ae->type))
				break;
		} else if (rc != DP_EIO) {
			break;
		} else {
			err_prefix(em, "%s", s->action);
		}
		if (attempt < ATTEMPTS) {
			/* 100, 200, 400 ms, each with up to as much again of jitter */
			long ms = 100L << (attempt - 1);
			struct timespec pause;

			ms += rand() % (ms + 1); /* NOLINT(cert-msc30-c,cert-msc50-cpp): jitter, not security */
			pause.tv_sec = ms / 1000;
			pause.tv_nsec = (ms % 1000) * 1000000L;
			nanosleep(&pause, NULL);
		}
	}
	free(url);
	return rc;
}

int aws_json(const struct aws_client *c, const struct aws_json_call *call, json_t *in, json_t **out,
	     struct aws_error *ae, struct err_msg *em)
{
	char *body = json_dumps(in, JSON_COMPACT), *target = mem_printf("X-Amz-Target: %s", call->target);
	const char *headers[] = { "Content-Type: application/x-amz-json-1.1", target, NULL };
	struct send s = { .endpoint = call->endpoint, .service = call->service,
			  .region = call->region ? call->region : c->region, .action = call->action,
			  .headers = headers, .body = body, .body_len = strlen(body) };
	struct buf raw;
	json_error_t jerr;
	int rc;

	buf_init(&raw, MAX_RESPONSE);
	rc = send_signed(c, &s, &raw, ae, em);
	if (rc == 0) {
		json_t *j = json_loadb(raw.data ? raw.data : "{}", raw.len ? raw.len : 2, 0, &jerr);

		if (!json_is_object(j)) {
			json_decref(j);
			rc = err_set(em, DP_EREMOTE, "%s: the answer from %s is not a JSON object (%s)", call->action,
				     call->endpoint, jerr.text);
		} else {
			*out = j;
		}
	}
	if (raw.data)
		mem_wipe(raw.data, raw.len); /* GetSecretValue's answer holds a secret */
	buf_free(&raw);
	free(target);
	free(body);
	return rc;
}

int aws_caller_arn(const struct aws_client *c, char **arn, struct err_msg *em)
{
	static const char body[] = "Action=GetCallerIdentity&Version=2011-06-15";
	const char *headers[] = { "Content-Type: application/x-www-form-urlencoded; charset=utf-8", NULL };
	char *endpoint = aws_endpoint("STS", "sts", c->region);
	struct send s = { .endpoint = endpoint, .service = "sts", .region = c->region,
			  .action = "sts:GetCallerIdentity", .headers = headers, .body = body,
			  .body_len = sizeof(body) - 1, .xml = true };
	struct buf raw;
	char *a;
	int rc;

	buf_init(&raw, (size_t)64 << 10);
	rc = send_signed(c, &s, &raw, NULL, em);
	if (rc == 0) {
		if ((a = xml_text(raw.data ? raw.data : "", "Arn")) != NULL)
			*arn = a;
		else
			rc = err_set(em, DP_EREMOTE, "sts:GetCallerIdentity: the answer from %s has no Arn", endpoint);
	}
	buf_free(&raw);
	free(endpoint);
	return rc;
}

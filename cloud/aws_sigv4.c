/*
 * aws_sigv4.c - SigV4 (aws_sigv4.h) as AWS publishes it: the canonical
 * request (method, URI, sorted query, sorted lowercase headers with their
 * values trimmed, the signed header names, the payload's hash), the string
 * to sign, and the signing key derived from the secret through the date,
 * region, service and "aws4_request". tests/unit/test_sigv4.c checks it
 * against AWS's published examples; fleet_ecs.sh against botocore's
 * signatures; s3.sh against s3rver, which verifies every request.
 */
#include "aws_sigv4.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "buf.h"
#include "mem.h"
#include "sha256.h"

#define MAX_URL 8192 /* an S3 key is up to 1,024 bytes, 3,072 encoded */


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
	if (req->s3)
		buf_puts(&cr, path);
	else
		buf_pct_encode(&cr, path, strlen(path), true);
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
	if (req->payload_hash) {
		buf_puts(&cr, req->payload_hash);
	} else {
		sha256(req->body ? req->body : "", req->body ? req->body_len : 0, d);
		sha256_hex(d, hex);
		buf_puts(&cr, hex);
	}

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

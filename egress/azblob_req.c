/*
 * azblob_req.c - one request to the Azure Blob service (azblob_int.h): the
 * URL (the blob's encoded path, the operation's query, a shared access
 * signature appended), x-ms-date and x-ms-version, the authorization
 * (SharedKey: HMAC-SHA256 over the published string-to-sign, or a bearer
 * token), and the retry policy: no answer, 408, 429 and 5xx are tried
 * again after an exponential backoff with jitter (Retry-After honoured up
 * to the cap), a bounded number of times. An error answer is reported in
 * the service's own words, its XML Code and Message (or the x-ms-error-code
 * header of a HEAD), with the URL but never its query, which may hold a
 * signature.
 */
#include "azblob_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "cloud/aws_xml.h"
#include "base64.h"
#include "buf.h"
#include "mem.h"
#include "sha256.h"

#define MAX_HEADERS 64
#define MAX_ANSWER (256 << 10)  /* an answer's body: an error document, a block list */
#define BACKOFF_CAP_MS 10000

void az_target_free(struct az_target *t)
{
	free(t->base);
	free(t->path);
	free(t->account);
	free(t->desc);
	if (t->sas) {
		mem_wipe(t->sas, strlen(t->sas));
		free(t->sas);
	}
	if (t->key) {
		mem_wipe(t->key, t->key_len);
		free(t->key);
	}
	az_tok_free(t->tok);
	memset(t, 0, sizeof(*t));
}

/* The value of header name in "Name: value" lines (trimmed), or "" when absent: SharedKey's standard lines. */
static void header_value(const char *const *headers, const char *name, const char **v, size_t *n)
{
	size_t nl = strlen(name);

	*v = "";
	*n = 0;
	for (size_t i = 0; headers && headers[i]; i++) {
		const char *h = headers[i], *e;

		if (strncasecmp(h, name, nl) != 0 || h[nl] != ':')
			continue;
		h += nl + 1;
		h += strspn(h, " \t");
		e = h + strlen(h);
		while (e > h && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		*v = h;
		*n = (size_t)(e - h);
		return;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char *az_string_to_sign(const char *method, const char *account, const char *path, const char *const *query,
			const char *const *headers, size_t len)
{
	static const char *const std_headers[] = { "Content-Encoding", "Content-Language", "Content-Length",
						   "Content-MD5", "Content-Type", "Date", "If-Modified-Since",
						   "If-Match", "If-None-Match", "If-Unmodified-Since", "Range" };
	char *lines[MAX_HEADERS];
	size_t n = 0;
	struct buf b;

	buf_init(&b, 0);
	buf_printf(&b, "%s\n", method);
	for (size_t i = 0; i < sizeof(std_headers) / sizeof(std_headers[0]); i++) {
		const char *v;
		size_t vn;

		if (strcmp(std_headers[i], "Content-Length") == 0) {
			if (len > 0) /* empty when 0 (version 2015-02-21 and later) */
				buf_printf(&b, "%zu", len);
		} else {
			header_value(headers, std_headers[i], &v, &vn);
			buf_append(&b, v, vn);
		}
		buf_putc(&b, '\n');
	}
	/* CanonicalizedHeaders: x-ms-* lowercased, sorted, "name:value\n" */
	for (size_t i = 0; headers && headers[i] && n < MAX_HEADERS; i++) {
		const char *h = headers[i], *c = strchr(h, ':'), *v;
		size_t vn;
		char *name;

		if (c == NULL || strncasecmp(h, "x-ms-", 5) != 0)
			continue;
		name = mem_strndup(h, (size_t)(c - h));
		for (char *p = name; *p; p++)
			*p = (char)((*p >= 'A' && *p <= 'Z') ? *p + 32 : *p);
		header_value(headers, name, &v, &vn);
		lines[n++] = mem_printf("%s:%.*s", name, (int)vn, v);
		free(name);
	}
	mem_sort(lines, n, sizeof(lines[0]), cmp_str);
	for (size_t i = 0; i < n; i++) {
		buf_printf(&b, "%s\n", lines[i]);
		free(lines[i]);
	}
	/* CanonicalizedResource: /account/path, then "\nname:value" per query parameter, sorted */
	buf_printf(&b, "/%s%s", account, path);
	n = 0;
	for (size_t i = 0; query && query[i] && query[i + 1] && n < MAX_HEADERS; i += 2)
		lines[n++] = mem_printf("%s:%s", query[i], query[i + 1]);
	mem_sort(lines, n, sizeof(lines[0]), cmp_str);
	for (size_t i = 0; i < n; i++) {
		buf_printf(&b, "\n%s", lines[i]);
		free(lines[i]);
	}
	return buf_steal(&b, NULL);
}

/* The request target: the path, the encoded query, the signature. New string (wipe it: it may hold the SAS). */
static char *target_of(const struct az_target *t, const char *const *query)
{
	struct buf b;
	char sep = '?';

	buf_init(&b, 0);
	buf_puts(&b, t->path);
	for (size_t i = 0; query && query[i] && query[i + 1]; i += 2, sep = '&') {
		buf_putc(&b, sep);
		buf_pct_encode(&b, query[i], strlen(query[i]), false);
		buf_putc(&b, '=');
		buf_pct_encode(&b, query[i + 1], strlen(query[i + 1]), false);
	}
	if (t->auth == AZ_SAS)
		buf_printf(&b, "%c%s", sep, t->sas);
	return buf_steal(&b, NULL);
}

static void free_secret(char *s)
{
	if (s) {
		mem_wipe(s, strlen(s));
		free(s);
	}
}

/* Headers for one attempt: the caller's, the date, the version, the authorization. hdrs[] gets new strings. */
static int sign(struct az_target *t, const struct az_call *call, char **hdrs, size_t max, struct err_msg *em)
{
	char date[64];
	struct tm tm;
	time_t now = time(NULL);
	size_t n = 0;
	int rc = 0;

	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	for (size_t i = 0; call->headers && call->headers[i] && n < max - 4; i++)
		hdrs[n++] = mem_strdup(call->headers[i]);
	hdrs[n++] = mem_printf("x-ms-date: %s", date);
	hdrs[n++] = mem_strdup("x-ms-version: " AZ_VERSION);
	hdrs[n] = NULL;
	if (t->auth == AZ_KEY) {
		char *sts = az_string_to_sign(call->method, t->account, t->path, call->query, (const char *const *)hdrs,
					      call->len);
		uint8_t mac[SHA256_LEN];
		char sig[B64_LEN(SHA256_LEN) + 1];

		sha256_hmac(t->key, t->key_len, sts, strlen(sts), mac);
		sig[b64_encode_to(mac, sizeof(mac), sig)] = '\0';
		hdrs[n++] = mem_printf("Authorization: SharedKey %s:%s", t->account, sig);
		free(sts);
	} else if (t->auth == AZ_BEARER) {
		rc = az_tok_header(t->tok, &hdrs[n], em);
		if (rc == 0)
			n++;
	}
	hdrs[n] = NULL;
	return rc;
}

/* The service's error in em: its Code and Message (XML body, or x-ms-error-code for a HEAD). */
static int answer_error(const struct az_target *t, const struct az_call *call, const struct webc_resp *r,
			struct err_msg *em)
{
	struct aws_error ae;
	const char *code = webc_resp_header(r, "x-ms-error-code");
	int rc = r->status == 401 || r->status == 403 ? DP_EAUTH : r->status == 404 ? DP_ENOTFOUND : DP_EREMOTE;

	aws_xml_error(r->body.data ? r->body.data : "", r->body.len, r->status, &ae);
	if (strncmp(ae.type, "HTTP ", 5) == 0 && code) /* no <Code> in the body */
		aws_error_copy(ae.type, sizeof(ae.type), code, strlen(code));
	if (ae.message[0])
		return err_set(em, rc, "Azure Blob %s %s: %s: %s (HTTP %d)", call->what, t->desc, ae.type, ae.message,
			       r->status);
	return err_set(em, rc, "Azure Blob %s %s: %s (HTTP %d)", call->what, t->desc, ae.type, r->status);
}

static bool retryable(int status)
{
	return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

/*
 * Wait before try number attempt (1 = the first retry): base * 2^(attempt-1), capped, half of it random.
 * 0, or DP_ECANCELED.
 */
static int backoff(const struct az_target *t, int attempt, const struct webc_resp *r)
{
	const char *ra = r ? webc_resp_header(r, "retry-after") : NULL;
	long ms = t->retry_base_ms;
	unsigned int rnd = 0;

	for (int i = 1; i < attempt && ms < BACKOFF_CAP_MS; i++)
		ms *= 2;
	if (ms > BACKOFF_CAP_MS)
		ms = BACKOFF_CAP_MS;
	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		rnd = (unsigned int)time(NULL);
	ms = ms / 2 + (long)(rnd % (unsigned long)(ms / 2 + 1));
	if (ra && ra[0] >= '0' && ra[0] <= '9') { /* seconds (the service's own hint), within the cap */
		long s = strtol(ra, NULL, 10);

		if (s * 1000 > ms)
			ms = s * 1000 > BACKOFF_CAP_MS ? BACKOFF_CAP_MS : s * 1000;
	}
	return webc_pause(&t->web, ms);
}

int az_send(struct az_target *t, struct webc_conn **conn, const struct az_call *call, struct webc_resp *resp,
	    struct err_msg *em)
{
	static const char *const keep[] = { "x-ms-error-code", "retry-after", NULL };
	const char *const *want = call->want_headers ? call->want_headers : keep;
	char *target = target_of(t, call->query), *hdrs[MAX_HEADERS + 1];
	struct webc_resp r = { 0 };
	int rc = DP_EIO;

	for (int attempt = 0; attempt < t->attempts; attempt++) {
		struct webc_req req = { .method = call->method, .target = target, .body = call->body,
					.body_len = call->len, .max_resp = MAX_ANSWER, .want_headers = want };

		if (attempt > 0 && backoff(t, attempt, r.status ? &r : NULL) != 0) {
			rc = err_set(em, DP_ECANCELED, "Azure Blob %s %s: cancelled", call->what, t->desc);
			break;
		}
		webc_resp_free(&r);
		memset(&r, 0, sizeof(r));
		if (*conn == NULL && (rc = webc_open(t->base, &t->web, conn, em)) != 0)
			break;
		if ((rc = sign(t, call, hdrs, MAX_HEADERS, em)) != 0)
			break;
		req.headers = (const char *const *)hdrs;
		rc = webc_request(*conn, &req, &r, em);
		for (size_t i = 0; hdrs[i]; i++)
			free_secret(hdrs[i]);
		if (rc == DP_EIO) { /* no whole answer: a new connection next time */
			webc_close(*conn);
			*conn = NULL;
			err_prefix(em, "Azure Blob %s %s", call->what, t->desc);
			continue;
		}
		if (rc != 0) {
			err_prefix(em, "Azure Blob %s %s", call->what, t->desc);
			break;
		}
		if (r.status >= 200 && r.status < 300) {
			free_secret(target);
			*resp = r;
			return 0;
		}
		rc = answer_error(t, call, &r, em);
		if (!retryable(r.status))
			break;
	}
	if (rc == DP_EIO || (r.status && retryable(r.status)))
		err_prefix(em, "after %d tries", t->attempts);
	webc_resp_free(&r);
	free_secret(target);
	return rc;
}

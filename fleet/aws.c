/*
 * aws.c - signed AWS calls (aws.h): endpoints as the SDKs resolve them, the JSON 1.1
 * protocol ECS and Secrets Manager speak (POST /, X-Amz-Target, errors as
 * {"__type": "...#Name", "message": ...}) with retries on throttling and
 * 5xx, and STS's query protocol for GetCallerIdentity. The signature
 * (cloud/aws_sigv4.c), the credential chain (cloud/aws_creds.c) and the
 * HTTP client (cloud/webc.c) are S3 egress's too: every AWS call diagport
 * makes, and every credential it loads, goes through webc, the one client
 * the static egress process can use. What libcurl gave these calls before
 * is kept: the proxy the environment names (webc_proxy_env), the system's
 * CA bundle (or SSL_CERT_FILE), one time limit per attempt. fleet_ecs.sh
 * checks the calls against a stand-in that verifies every request it gets.
 */
#include "aws.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cloud/aws_sigv4.h"
#include "cloud/aws_xml.h"
#include "cloud/webc.h"
#include "buf.h"
#include "mem.h"

#define MAX_RESPONSE ((size_t)16 << 20) /* DescribeTasks of 100 tasks is well under 1 MiB */
#define ATTEMPTS 4

void aws_client_free(struct aws_client *c)
{
	if (c == NULL)
		return;
	aws_creds_free(&c->creds);
	free(c->region);
	c->region = NULL;
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
		aws_error_copy(ae->type, sizeof(ae->type), t, strcspn(t, ":"));
	} else {
		snprintf(ae->type, sizeof(ae->type), "HTTP %ld", status);
	}
	if (m)
		aws_error_copy(ae->message, sizeof(ae->message), m, strlen(m));
	else if (j == NULL && raw->len)
		aws_error_copy(ae->message, sizeof(ae->message), raw->data, raw->len < 200 ? raw->len : 200);
	json_decref(j);
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

/* The answer's body into raw (replacing what it held, which is wiped), under raw's cap: 0 or DP_ETOOBIG. */
static int take_body(struct buf *raw, struct webc_resp *r)
{
	if (raw->data)
		mem_wipe(raw->data, raw->len);
	buf_reset(raw);
	return buf_append(raw, r->body.data ? r->body.data : "", r->body.len);
}

static void resp_wipe(struct webc_resp *r)
{
	if (r->body.data)
		mem_wipe(r->body.data, r->body.len); /* GetSecretValue's answer holds a secret */
	webc_resp_free(r);
}

/*
 * A connection to endpoint as libcurl made them: the environment's proxy, the system's CAs, c's time limit.
 * The host lowercased, as the signature has it: webc's Host header is the URL's.
 */
static int open_conn(const struct aws_client *c, const char *endpoint, struct webc_conn **conn, struct err_msg *em)
{
	char *base = mem_strdup(endpoint), *proxy = webc_proxy_env(endpoint), *a = strstr(base, "://");
	struct webc_opts o = { .connect_timeout_ms = c->timeout_ms, .io_timeout_ms = c->timeout_ms,
			       .answer_timeout_ms = c->timeout_ms, .proxy = proxy };
	int rc;

	for (a = a ? a + 3 : base; *a && *a != '/'; a++)
		*a = (char)tolower((unsigned char)*a);
	rc = webc_open(base, &o, conn, em);
	free(proxy);
	free(base);
	return rc;
}

/* Sign and send, trying again on throttling, 5xx and no answer. 0 with the 2xx answer in raw, else an error. */
static int send_signed(const struct aws_client *c, const struct send *s, struct buf *raw, struct aws_error *ae,
		       struct err_msg *em)
{
	char *url = mem_printf("%s/", s->endpoint);
	const char *path = strstr(url, "://");
	struct webc_conn *conn = NULL;
	struct aws_error local;
	int rc = 0;

	if (ae == NULL)
		ae = &local;
	memset(ae, 0, sizeof(*ae));
	path = path ? path + 3 + strcspn(path + 3, "/") : url; /* the endpoint's path, and the / after it */
	if ((rc = open_conn(c, s->endpoint, &conn, em)) != 0) {
		err_prefix(em, "%s", s->action);
		goto out;
	}
	for (int attempt = 1; attempt <= ATTEMPTS; attempt++) {
		char *sig[AWS_SIGV4_MAX] = { 0 };
		const char *hdrs[16];
		size_t n = 0;
		long status = 0;
		struct aws_sigv4_req sr = { .method = "POST", .url = url, .headers = s->headers, .body = s->body,
					    .body_len = s->body_len, .service = s->service, .region = s->region };
		struct webc_req req = { .method = "POST", .target = path, .headers = hdrs, .body = s->body,
					.body_len = s->body_len, .max_resp = raw->cap };
		struct webc_resp resp;

		if ((rc = aws_sigv4_sign(&sr, &c->creds, sig, em)) != 0)
			break;
		for (size_t i = 0; s->headers && s->headers[i] && n < 8; i++)
			hdrs[n++] = s->headers[i];
		for (size_t i = 0; sig[i]; i++)
			if (strncasecmp(sig[i], "host:", 5) != 0) /* signed, and sent by webc as it was signed */
				hdrs[n++] = sig[i];
		hdrs[n++] = "User-Agent: diagport/" DP_VERSION " (fleet)";
		hdrs[n] = NULL;
		rc = webc_request(conn, &req, &resp, em);
		aws_sigv4_free(sig);
		if (rc == 0) {
			status = resp.status;
			rc = take_body(raw, &resp);
		}
		resp_wipe(&resp);
		if (rc == 0 && status >= 200 && status < 300)
			break;
		if (rc == 0) {
			if (s->xml)
				aws_xml_error(raw->data, raw->len, status, ae);
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
out:
	webc_close(conn);
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
	char *endpoint = aws_creds_endpoint("STS", "sts", c->region);
	struct send s = { .endpoint = endpoint, .service = "sts", .region = c->region,
			  .action = "sts:GetCallerIdentity", .headers = headers, .body = body,
			  .body_len = sizeof(body) - 1, .xml = true };
	struct buf raw;
	char *a;
	int rc;

	buf_init(&raw, (size_t)64 << 10);
	rc = send_signed(c, &s, &raw, NULL, em);
	if (rc == 0) {
		if ((a = aws_xml_text(raw.data, raw.len, "Arn")) != NULL)
			*arn = a;
		else
			rc = err_set(em, DP_EREMOTE, "sts:GetCallerIdentity: the answer from %s has no Arn", endpoint);
	}
	buf_free(&raw);
	free(endpoint);
	return rc;
}

/*
 * kubeapi.c - Kubernetes API requests on hclient (kubeapi.h).
 *
 * One function does the HTTP: it reads the token, sends the request through
 * hclient (libcurl, HTTPS only, the server verified against the cluster CA
 * only), tries again after a short pause when nothing or a 5xx/429 came back,
 * and reads the answer's JSON and, for an error, the metav1.Status fields a
 * person needs (reason, message). What to do about a status is the caller's
 * decision: a 404 or a 409 is an ordinary answer to `diagport webhook certs`.
 */
#include "kubeapi.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "hclient.h"
#include "log.h"
#include "mem.h"

#define MAX_TOKEN ((size_t)64 << 10)
#define PRESIZE ((size_t)16 << 10) /* a response buffer starts this big, so a Secret is never moved by realloc */

void kubeapi_resp_free(struct kubeapi_resp *r)
{
	json_decref(r->body);
	r->body = NULL;
}

/* The "Authorization: Bearer ..." header, from the token file now. The caller wipes and frees it. */
static int auth_header(const char *file, char **out, struct err_msg *em)
{
	struct buf b;
	size_t n;
	int rc;

	buf_init(&b, MAX_TOKEN);
	if ((rc = buf_read_path(&b, file, NULL, em)) != 0) {
		err_prefix(em, "the service account token");
		goto out;
	}
	n = b.len;
	while (n && (b.data[n - 1] == '\n' || b.data[n - 1] == '\r' || b.data[n - 1] == ' ' || b.data[n - 1] == '\t'))
		n--;
	if (n == 0) {
		rc = DP_EIO;
		err_set(em, rc, "the service account token file %s is empty", file);
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		if (b.data[i] < 0x21 || b.data[i] > 0x7e) { /* a header must not be split or forged */
			rc = DP_EIO;
			err_set(em, rc, "the service account token file %s holds a byte a token cannot have", file);
			goto out;
		}
	*out = mem_printf("Authorization: Bearer %.*s", (int)n, b.data);
out:
	if (b.data)
		mem_wipe(b.data, b.len);
	buf_free(&b);
	return rc;
}

static void copy_text(char *dst, size_t n, const char *src, size_t len)
{
	size_t k = len < n - 1 ? len : n - 1;

	for (size_t i = 0; i < k; i++)
		dst[i] = (src[i] == '\n' || src[i] == '\r' || src[i] == '\t') ? ' ' : src[i];
	dst[k] = '\0';
}

/* Fill resp from the raw answer. */
static void parse(const struct buf *raw, struct kubeapi_resp *resp)
{
	json_error_t jerr;
	json_t *j = raw->len ? json_loadb(raw->data, raw->len, JSON_REJECT_DUPLICATES, &jerr) : NULL;

	resp->body = j;
	resp->reason[0] = resp->message[0] = '\0';
	if (json_is_object(j) && json_is_string(json_object_get(j, "kind")) &&
	    strcmp(json_string_value(json_object_get(j, "kind")), "Status") == 0) {
		const char *s = json_string_value(json_object_get(j, "reason"));

		if (s)
			copy_text(resp->reason, sizeof(resp->reason), s, strlen(s));
		if ((s = json_string_value(json_object_get(j, "message"))) != NULL)
			copy_text(resp->message, sizeof(resp->message), s, strlen(s));
	} else if (j == NULL && raw->len) {
		copy_text(resp->message, sizeof(resp->message), raw->data, raw->len < 200 ? raw->len : 200);
	}
}

int kubeapi_call(const struct kubeapi_config *cfg, const char *method, const char *path, const char *ctype,
		 const char *body, size_t body_len, struct kubeapi_resp *resp, struct err_msg *em)
{
	static const char zeros[PRESIZE];
	static const char user_agent[] = "User-Agent: diagport/" DP_VERSION " (webhook certs)";
	char *url = mem_printf("%s%s", cfg->server, path), *auth = NULL, *content = NULL;
	struct buf raw;
	long status = 0;
	int rc = 0, tries = cfg->tries > 0 ? cfg->tries : 1;

	buf_init(&raw, KUBEAPI_MAX_RESPONSE);
	buf_append(&raw, zeros, sizeof(zeros)); /* allocate once... */
	buf_reset(&raw);                        /* ...and start empty */
	if (ctype)
		content = mem_printf("Content-Type: %s", ctype);
	for (int attempt = 1; attempt <= tries; attempt++) {
		const char *headers[] = { "Accept: application/json", user_agent, NULL, content, NULL };
		struct hclient_req req = { .method = method, .url = url, .headers = headers, .body = body,
					   .body_len = body_len, .ca_file = cfg->ca_file, .https_only = true,
					   .timeout_ms = cfg->timeout_ms };

		if ((rc = auth_header(cfg->token_file, &auth, em)) != 0)
			break;
		headers[2] = auth;
		mem_wipe(raw.data, raw.len);
		buf_reset(&raw);
		rc = hclient_request(&req, &status, &raw, em);
		mem_wipe(auth, strlen(auth));
		free(auth);
		auth = NULL;
		if (rc == DP_EINVAL || rc == DP_ETOOBIG || rc == DP_ENOLIB)
			break; /* the same again would fail the same way */
		if (rc == 0 && status < 500 && status != 429)
			break;
		if (attempt < tries) {
			struct timespec pause = { .tv_sec = attempt / 2, .tv_nsec = (attempt % 2) * 500000000L };

			if (rc == 0)
				log_warn("API request retried", LOG_STR("event", "api-retry"), LOG_STR("method", method),
					 LOG_STR("path", path), LOG_INT("status", status), LOG_INT("attempt", attempt + 1),
					 LOG_INT("of", tries), LOG_STR("reason", "HTTP error, trying again"));
			else
				log_warn("API request retried", LOG_STR("event", "api-retry"), LOG_STR("method", method),
					 LOG_STR("path", path), LOG_INT("attempt", attempt + 1), LOG_INT("of", tries),
					 LOG_STR("reason", em ? em->text : "no answer"));
			nanosleep(&pause, NULL);
		}
	}
	if (rc == 0) {
		resp->status = status;
		parse(&raw, resp);
	}
	if (raw.data)
		mem_wipe(raw.data, raw.alloc);
	buf_free(&raw);
	free(content);
	free(url);
	return rc;
}

static const char *status_text(long s)
{
	switch (s) {
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 415: return "Unsupported Media Type";
	case 422: return "Unprocessable Entity";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	}
	return "";
}

int kubeapi_error(const struct kubeapi_resp *r, const char *method, const char *what, struct err_msg *em)
{
	int code = r->status == 401 || r->status == 403 ? DP_EAUTH : DP_EREMOTE;
	const char *hint = r->status == 401 ? " (the service account token was not accepted)"
			   : r->status == 403 ? " (does the service account have the RBAC rules of "
						"manifests/overlays/self-contained/rbac.yaml?)"
					      : "";

	return err_set(em, code, "%s: %s answered HTTP %ld%s%s%s%s%s: %s%s", what, method, r->status,
		       status_text(r->status)[0] ? " " : "", status_text(r->status), r->reason[0] ? " (" : "", r->reason,
		       r->reason[0] ? ")" : "", r->message[0] ? r->message : "no Status message", hint);
}

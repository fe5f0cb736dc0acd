/*
 * lambda.c - the macro as an AWS Lambda custom runtime (provided.al2023):
 * the Runtime API loop (docs: "AWS Lambda runtime API", 2018-06-01) around
 * inj_macro. GET .../invocation/next waits for an event and names it in
 * Lambda-Runtime-Aws-Request-Id; the answer goes to POST
 * .../invocation/ID/response, an internal failure to .../invocation/ID/error,
 * a failure before the first event to .../init/error.
 *
 * The client is a few lines of HTTP/1.1 on a socket rather than libcurl:
 * the Runtime API is plain HTTP on the sandbox's loopback, and the Lambda
 * artefact is a static binary, because provided.al2023's glibc (2.34) is
 * older than the one we build with, and Debian's libcurl cannot be linked
 * statically (its GSSAPI and LDAP libraries come only as shared objects).
 * The address is numeric (AWS sets 127.0.0.1:9001); a static binary does no
 * name lookups.
 *
 * The platform's settings (DIAGPORT_POLICY, inj_int.h) are read once, at
 * cold start, before the first event; each event's warnings (a value the
 * policy overrode) go to the function's log as JSON lines (log.h), which
 * Lambda sends to CloudWatch Logs: a macro's response has no place for them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <jansson.h>

#include "buf.h"
#include "http/httpd.h"
#include "inj_int.h"
#include "log.h"
#include "utf8.h"

#define API "/2018-06-01/runtime"
#define MAX_EVENT ((size_t)6 << 20)
#define MAX_HEAD ((size_t)64 << 10)

struct rt {
	struct sockaddr_in sa;
	char hostport[64];
};

static int rt_parse(const char *v, struct rt *r)
{
	const char *colon = v ? strrchr(v, ':') : NULL;
	char host[48];
	long port;

	if (colon == NULL || (size_t)(colon - v) >= sizeof(host))
		return -1;
	memcpy(host, v, (size_t)(colon - v));
	host[colon - v] = '\0';
	port = strtol(colon + 1, NULL, 10);
	memset(r, 0, sizeof(*r));
	r->sa.sin_family = AF_INET;
	r->sa.sin_port = htons((uint16_t)port);
	if (port < 1 || port > 65535 ||
	    (strcmp(host, "localhost") == 0 ? inet_pton(AF_INET, "127.0.0.1", &r->sa.sin_addr) :
					      inet_pton(AF_INET, host, &r->sa.sin_addr)) != 1)
		return -1;
	snprintf(r->hostport, sizeof(r->hostport), "%s", v);
	return 0;
}

/* The value of header name in head (NUL-terminated lines), copied to out; false when absent. */
static bool header(const char *head, const char *name, char *out, size_t cap)
{
	size_t n = strlen(name);

	for (const char *l = strstr(head, "\r\n"); l && l[2]; l = strstr(l + 2, "\r\n")) {
		const char *h = l + 2;

		if (strncasecmp(h, name, n) == 0 && h[n] == ':') {
			h += n + 1;
			while (*h == ' ' || *h == '\t')
				h++;
			snprintf(out, cap, "%.*s", (int)strcspn(h, "\r\n"), h);
			return true;
		}
	}
	return false;
}

/*
 * One exchange on a new connection: method path, an optional JSON body; the
 * answer's status, the request id header (when asked) and the body. 0 or -1.
 */
static int exchange(const struct rt *r, const char *method, const char *path, const struct buf *body, int *status,
		    char *id, size_t id_cap, struct buf *out)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char head[512], len_s[32] = "";
	struct buf in;
	char *end;
	size_t want = 0;
	int rc = -1;

	if (fd < 0 || connect(fd, (const struct sockaddr *)&r->sa, sizeof(r->sa)) != 0)
		goto out_fd;
	snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
		 "Content-Length: %zu\r\n\r\n", method, path, r->hostport, body ? body->len : 0);
	if (!httpd_send_all(fd, head, strlen(head)) || (body && body->len && !httpd_send_all(fd, body->data, body->len)))
		goto out_fd;
	buf_init(&in, MAX_HEAD + MAX_EVENT);
	for (;;) { /* the whole answer: the server closes (Connection: close) or Content-Length is reached */
		char chunk[65536];
		ssize_t k = recv(fd, chunk, sizeof(chunk), 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0 || buf_append(&in, chunk, (size_t)k) != 0)
			break;
		if ((end = in.data ? strstr(in.data, "\r\n\r\n") : NULL) != NULL) {
			*end = '\0';
			if (header(in.data, "Content-Length", len_s, sizeof(len_s)))
				want = strtoull(len_s, NULL, 10);
			*end = '\r';
			if (len_s[0] && in.len - (size_t)(end + 4 - in.data) >= want)
				break;
		}
	}
	if (in.data && (end = strstr(in.data, "\r\n\r\n")) != NULL && strncmp(in.data, "HTTP/1.", 7) == 0 &&
	    (*status = (int)strtol(in.data + 9, NULL, 10)) >= 100) {
		*end = '\0';
		if (id)
			id[0] = '\0';
		if (id && !header(in.data, "Lambda-Runtime-Aws-Request-Id", id, id_cap))
			id[0] = '\0';
		rc = 0;
		if (out && buf_append(out, end + 4, in.len - (size_t)(end + 4 - in.data)) != 0)
			rc = DP_ETOOBIG; /* over the event cap: answered as an error, not read as half an event */
	}
	buf_free(&in);
out_fd:
	if (fd >= 0)
		close(fd);
	return rc;
}

static void report_error(const struct rt *r, const char *path, const char *msg)
{
	/* jansson writes the JSON, as it does everywhere else: the message is escaped by the one escaper */
	json_t *j = json_pack("{s:o,s:s}", "errorMessage", utf8_json_str(msg), "errorType", "Runtime.DiagportError");
	char *text = json_dumps(j, JSON_COMPACT);
	struct buf b;
	int st;

	buf_init(&b, 0);
	buf_puts(&b, text);
	exchange(r, "POST", path, &b, &st, NULL, 0, NULL);
	buf_free(&b);
	free(text);
	json_decref(j);
}

int inj_macro_platform_load(struct inj_macro_platform *p)
{
	int rc;

	memset(p, 0, sizeof(*p));
	rc = inj_settings_env(INJ_MACRO_POLICY_VAR, &p->settings, &p->error);
	p->given = rc != 1;
	if (rc == 1)
		return 0;
	if (rc != 0) {
		log_error("macro policy refused: every template fails until it is fixed",
			  LOG_STR("variable", INJ_MACRO_POLICY_VAR), LOG_STR("error", p->error.text));
		return rc;
	}
	p->error.text[0] = '\0';
	log_info("macro policy loaded", LOG_STR("variable", INJ_MACRO_POLICY_VAR),
		 LOG_UINT("enforced", (unsigned)__builtin_popcount(p->settings.enforce.set)));
	return 0;
}

void inj_macro_platform_free(struct inj_macro_platform *p)
{
	if (p != NULL)
		inj_settings_free(&p->settings);
}

int inj_macro_answer(const char *event, size_t len, const struct inj_macro_platform *p, struct buf *out)
{
	struct inj_report rep = { 0 };
	int rc = inj_macro_run(event, len, p, &rep, out);

	for (size_t i = 0; i < rep.nwarn; i++)
		log_warn("macro warning", LOG_STR("warning", rep.warnings[i]));
	inj_report_free(&rep);
	return rc;
}

int inj_lambda_serve(void)
{
	const char *api = getenv("AWS_LAMBDA_RUNTIME_API");
	struct inj_macro_platform platform;
	struct rt r;

	if (rt_parse(api, &r) != 0) {
		fprintf(stderr, "diagport: macro: AWS_LAMBDA_RUNTIME_API is '%s', not a numeric HOST:PORT (this runs as "
			"a Lambda custom runtime; use --event FILE to answer one event by hand)\n", api ? api : "");
		return 2;
	}
	inj_macro_platform_load(&platform); /* cold start; a bad policy is every event's failure, with its reason */
	for (;;) {
		struct buf ev, resp;
		char id[128], path[256];
		int st = 0, rc;

		buf_init(&ev, MAX_EVENT);
		rc = exchange(&r, "GET", API "/invocation/next", NULL, &st, id, sizeof(id), &ev);
		/* the id goes into the response's path: letters, digits, - and _ only (Lambda's are UUIDs), and
		   whole (one that filled the buffer may have been cut) */
		if ((rc != 0 && rc != DP_ETOOBIG) || st != 200 || id[0] == '\0' || strlen(id) >= sizeof(id) - 1 ||
		    strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != strlen(id)) {
			fprintf(stderr, "diagport: macro: the Runtime API at %s did not give an event (status %d)\n",
				r.hostport, st);
			buf_free(&ev);
			if (st == 0) {
				inj_macro_platform_free(&platform);
				return 1; /* no API at all: Lambda restarts the runtime */
			}
			sleep(1);
			continue;
		}
		buf_init(&resp, 0);
		if (rc == DP_ETOOBIG) {
			snprintf(path, sizeof(path), API "/invocation/%s/error", id);
			report_error(&r, path, "the event is over 6 MiB, Lambda's payload limit");
		} else if (inj_macro_answer(ev.data ? ev.data : "", ev.len, &platform, &resp) != 0) {
			snprintf(path, sizeof(path), API "/invocation/%s/error", id);
			report_error(&r, path, "the response would not fit");
		} else {
			snprintf(path, sizeof(path), API "/invocation/%s/response", id);
			if (exchange(&r, "POST", path, &resp, &st, NULL, 0, NULL) != 0 || st / 100 != 2)
				fprintf(stderr, "diagport: macro: the Runtime API refused the response to %s (status %d)\n",
					id, st);
		}
		buf_free(&ev);
		buf_free(&resp);
	}
}

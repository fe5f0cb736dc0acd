/*
 * httpd.c - the HTTP server wrapper (httpd.h) on libmicrohttpd.
 */
#include "httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "mem.h"

#define MAX_DAEMONS 8

struct httpd {
	struct MHD_Daemon *d[MAX_DAEMONS];
	size_t n;
	httpd_handler h;
	void *ctx;
};

#define MAX_EXTRA_HEADERS 4

/* Per-request state that outlives the handler call: what to run when the response is done. */
struct req_state {
	void (*done)(void *);
	void *done_ctx;
};

struct httpd_req {
	struct MHD_Connection *c;
	const char *method, *path;
	struct req_state *st;
	bool answered;
	enum MHD_Result result;
	char *extra[MAX_EXTRA_HEADERS][2];
	size_t n_extra;
};

struct addr {
	struct sockaddr_storage sa;
	socklen_t len;
};

/* "http://HOST:PORT" → address. HOST: +, *, a dotted quad, [v6], localhost. */
static int parse_url(const char *u, size_t n, struct addr *a, struct err_msg *em)
{
	char host[128];
	const char *p, *colon;
	long port;
	char *end;

	if (n < 8 || strncmp(u, "http://", 7) != 0)
		return err_set(em, DP_EINVAL, "URL '%.*s': only http://HOST:PORT is supported", (int)n, u);
	p = u + 7;
	colon = memrchr(p, ':', (size_t)(u + n - p));
	if (colon == NULL || (size_t)(colon - p) >= sizeof(host))
		return err_set(em, DP_EINVAL, "URL '%.*s' has no port", (int)n, u);
	memcpy(host, p, (size_t)(colon - p));
	host[colon - p] = '\0';
	port = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || (end != u + n && *end != '/') || port < 1 || port > 65535)
		return err_set(em, DP_EINVAL, "URL '%.*s' has no valid port", (int)n, u);
	memset(a, 0, sizeof(*a));
	if (host[0] == '[') {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a->sa;
		size_t hl = strlen(host);

		if (hl < 3 || host[hl - 1] != ']')
			return err_set(em, DP_EINVAL, "URL '%.*s': bad IPv6 address", (int)n, u);
		host[hl - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
			return err_set(em, DP_EINVAL, "URL '%.*s': bad IPv6 address", (int)n, u);
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		a->len = sizeof(*s6);
		return 0;
	}
	{
		struct sockaddr_in *s4 = (struct sockaddr_in *)&a->sa;

		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		if (strcmp(host, "+") == 0 || strcmp(host, "*") == 0 || strcmp(host, "0.0.0.0") == 0)
			s4->sin_addr.s_addr = htonl(INADDR_ANY);
		else if (strcmp(host, "localhost") == 0)
			s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		else if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			return err_set(em, DP_EINVAL, "URL '%.*s': '%s' is not an IP address, +, * or localhost", (int)n,
				       u, host);
		a->len = sizeof(*s4);
	}
	return 0;
}

static bool is_loopback(const struct addr *a)
{
	if (a->sa.ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)&a->sa)->sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)&a->sa)->sin6_addr);
}

/* Call fn for each ';'-separated URL. */
static int each_url(const char *urls, int (*fn)(const struct addr *, void *), void *arg, struct err_msg *em)
{
	const char *p = urls;
	int rc;

	if (urls == NULL || *urls == '\0')
		return err_set(em, DP_EINVAL, "no URLs to listen on");
	while (*p) {
		size_t n = strcspn(p, ";");
		struct addr a;

		memset(&a, 0, sizeof(a));
		if (n > 0) {
			if ((rc = parse_url(p, n, &a, em)) != 0)
				return rc;
			if ((rc = fn(&a, arg)) != 0)
				return rc;
		}
		p += n;
		if (*p == ';')
			p++;
	}
	return 0;
}

static int loopback_fn(const struct addr *a, void *arg)
{
	if (!is_loopback(a))
		*(bool *)arg = false;
	return 0;
}

bool httpd_urls_loopback_only(const char *urls)
{
	bool only = true;

	if (each_url(urls, loopback_fn, &only, NULL) != 0)
		return false;
	return only;
}

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				 const char *version, const char *upload_data, size_t *upload_size, void **state)
{
	struct httpd *d = cls;
	struct httpd_req r = { .c = c, .method = method, .path = url, .st = *state };

	if (*state == NULL) {
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);

		*state = r.st = mem_zalloc(sizeof(struct req_state));
		/* No route takes a body: refuse it before reading a byte of it. */
		if ((cl && strcmp(cl, "0") != 0) || te) {
			httpd_problem(&r, 413, "Payload Too Large", "this route takes no request body");
			return r.result;
		}
		return MHD_YES; /* headers seen; the (empty) body comes next */
	}
	if (*upload_size != 0) {
		*upload_size = 0; /* a body without Content-Length: drop it; the answer follows */
		return MHD_YES;
	}
	d->h(d->ctx, &r);
	if (!r.answered)
		httpd_problem(&r, 500, "Internal Server Error", "the handler gave no answer");
	return r.result;
}

struct start_arg {
	struct httpd *d;
	const struct httpd_config *cfg;
	struct err_msg *em;
};

/* The response is finished (sent, or the client went away): run the handler's on_done. */
static void completed_cb(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode why)
{
	struct req_state *st = *state;

	(void)cls;
	(void)c;
	(void)why;
	if (st == NULL)
		return;
	if (st->done)
		st->done(st->done_ctx);
	free(st);
	*state = NULL;
}

void httpd_on_done(struct httpd_req *r, void (*fn)(void *), void *ctx)
{
	r->st->done = fn;
	r->st->done_ctx = ctx;
}

void httpd_set_header(struct httpd_req *r, const char *name, const char *value)
{
	if (r->n_extra == MAX_EXTRA_HEADERS)
		DP_FATAL("more than %d extra headers", MAX_EXTRA_HEADERS);
	r->extra[r->n_extra][0] = mem_strdup(name);
	r->extra[r->n_extra][1] = mem_strdup(value);
	r->n_extra++;
}

static int start_fn(const struct addr *a, void *arg)
{
	struct start_arg *s = arg;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
	char shown[INET6_ADDRSTRLEN + 8] = "?";

	if (a->sa.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (s->d->n == MAX_DAEMONS)
		return err_set(s->em, DP_EINVAL, "more than %d URLs", MAX_DAEMONS);
	s->d->d[s->d->n] = MHD_start_daemon(
		flags, 0, NULL, NULL, access_cb, s->d, MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)&a->sa,
		MHD_OPTION_CONNECTION_LIMIT, s->cfg->max_connections ? s->cfg->max_connections : 32,
		MHD_OPTION_CONNECTION_TIMEOUT, s->cfg->idle_timeout_s ? s->cfg->idle_timeout_s : 30,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, s->cfg->header_memory ? s->cfg->header_memory : (size_t)32768,
		MHD_OPTION_NOTIFY_COMPLETED, completed_cb, NULL, MHD_OPTION_END);
	if (s->d->d[s->d->n] == NULL) {
		if (a->sa.ss_family == AF_INET)
			inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->sa)->sin_addr, shown, sizeof(shown));
		return err_set(s->em, DP_EIO, "cannot listen on %s port %d (in use, or not allowed)", shown,
			       ntohs(((const struct sockaddr_in *)&a->sa)->sin_port));
	}
	s->d->n++;
	return 0;
}

int httpd_start(const struct httpd_config *cfg, httpd_handler h, void *ctx, struct httpd **out, struct err_msg *em)
{
	struct httpd *d = mem_zalloc(sizeof(*d));
	struct start_arg s = { d, cfg, em };
	int rc;

	d->h = h;
	d->ctx = ctx;
	if ((rc = each_url(cfg->urls, start_fn, &s, em)) != 0) {
		httpd_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

void httpd_free(struct httpd *d)
{
	if (d == NULL)
		return;
	for (size_t i = 0; i < d->n; i++)
		MHD_stop_daemon(d->d[i]);
	free(d);
}

const char *httpd_method(const struct httpd_req *r)
{
	return r->method;
}

const char *httpd_path(const struct httpd_req *r)
{
	return r->path;
}

const char *httpd_query(const struct httpd_req *r, const char *key)
{
	return MHD_lookup_connection_value(r->c, MHD_GET_ARGUMENT_KIND, key);
}

const char *httpd_header(const struct httpd_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->c, MHD_HEADER_KIND, name);
}

static int queue(struct httpd_req *r, unsigned status, struct MHD_Response *resp, const char *ctype)
{
	if (resp == NULL)
		DP_FATAL("MHD could not create a response");
	if (ctype)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	if (status == 401)
		MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
	for (size_t i = 0; i < r->n_extra; i++) {
		MHD_add_response_header(resp, r->extra[i][0], r->extra[i][1]);
		free(r->extra[i][0]);
		free(r->extra[i][1]);
	}
	r->n_extra = 0;
	r->result = MHD_queue_response(r->c, status, resp);
	MHD_destroy_response(resp);
	r->answered = true;
	return r->result == MHD_YES ? 0 : DP_EIO;
}

int httpd_send(struct httpd_req *r, unsigned status, const char *ctype, const char *body, size_t len)
{
	return queue(r, status, MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY), ctype);
}

int httpd_send_json(struct httpd_req *r, unsigned status, json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT);
	int rc;

	json_decref(v);
	rc = httpd_send(r, status, "application/json; charset=utf-8", s, strlen(s));
	free(s);
	return rc;
}

int httpd_problem(struct httpd_req *r, unsigned status, const char *title, const char *fmt, ...)
{
	char detail[1024];
	va_list ap;
	json_t *p;
	char *s;
	int rc;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	p = json_pack("{s:s, s:s, s:i, s:s}", "type", "about:blank", "title", title, "status", (int)status,
		      "detail", detail);
	s = json_dumps(p, JSON_COMPACT);
	json_decref(p);
	rc = httpd_send(r, status, "application/problem+json; charset=utf-8", s, strlen(s));
	free(s);
	return rc;
}

int httpd_send_fd(struct httpd_req *r, unsigned status, const char *ctype, int fd, uint64_t size,
		  const char *attachment_name)
{
	struct MHD_Response *resp = MHD_create_response_from_fd64(size, fd);

	if (resp && attachment_name) {
		char cd[300];

		snprintf(cd, sizeof(cd), "attachment; filename=\"%s\"", attachment_name);
		MHD_add_response_header(resp, "Content-Disposition", cd);
	}
	return queue(r, status, resp, ctype);
}

struct stream {
	httpd_read_fn read_fn;
	void (*free_fn)(void *);
	void *ctx;
};

static ssize_t stream_cb(void *cls, uint64_t pos, char *out, size_t max)
{
	struct stream *st = cls;
	long n = st->read_fn(st->ctx, out, max);

	(void)pos;
	if (n > 0)
		return n;
	return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void stream_free(void *cls)
{
	struct stream *st = cls;

	st->free_fn(st->ctx);
	free(st);
}

int httpd_send_stream(struct httpd_req *r, unsigned status, const char *ctype, httpd_read_fn read_fn,
		      void (*free_fn)(void *), void *ctx, const char *attachment_name)
{
	struct stream *st = mem_zalloc(sizeof(*st));
	struct MHD_Response *resp;

	st->read_fn = read_fn;
	st->free_fn = free_fn;
	st->ctx = ctx;
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, (size_t)256 * 1024, stream_cb, st, stream_free);
	if (resp && attachment_name) {
		char cd[300];

		snprintf(cd, sizeof(cd), "attachment; filename=\"%s\"", attachment_name);
		MHD_add_response_header(resp, "Content-Disposition", cd);
	}
	return queue(r, status, resp, ctype);
}

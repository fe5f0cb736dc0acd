/*
 * httpd.c - the HTTP server (httpd.h): plain HTTP/1.1 on sockets, diagport's
 * own.
 *
 * One acceptor thread polls every listening socket; each accepted connection
 * gets a thread of its own (a dump download may take minutes), up to the
 * connection cap. A connection carries one request: the head is read into a
 * buffer of header_memory bytes under the idle timeout and parsed by
 * http_parse.c; a request with a body is refused with 413 before a byte of
 * the body is read. The handler answers by describing a response
 * (httpd_send*); it is written after the handler returns, then on_done runs,
 * then the connection is closed ("Connection: close").
 *
 * Why not libmicrohttpd: Debian's build links GnuTLS, and mapping GnuTLS and
 * its seven libraries costs ~2.3 MiB of resident memory in every pod's
 * agent, which needs no TLS. See docs/ARCHITECTURE.md.
 */
#include "httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "http_parse.h"
#include "mem.h"
#include "problem.h"

#define MAX_LISTENERS 8
#define MAX_EXTRA_HEADERS 4
#define STREAM_CHUNK ((size_t)256 * 1024)
#define THREAD_STACK ((size_t)256 * 1024)
#define LINGER_MS 100

struct httpd {
	int lfd[MAX_LISTENERS];
	size_t n;
	int wake[2];
	pthread_t acceptor;
	bool acceptor_started;
	httpd_handler h;
	void *ctx;
	unsigned max_conns, idle_s;
	size_t head_cap, max_body;
	bool (*takes_body)(const char *path);
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned active;
	int *conn_fd; /* max_conns slots, -1 = free */
};

enum body_kind { BODY_MEM, BODY_FD, BODY_STREAM };

struct httpd_req {
	struct http_request rq;
	bool head_only;
	bool answered;
	unsigned status;
	char *ctype, *disposition;
	enum body_kind kind;
	char *mem;
	size_t mem_len;
	int fd;
	uint64_t fd_size;
	httpd_read_fn read_fn;
	void (*free_fn)(void *);
	void *stream_ctx;
	char *extra[MAX_EXTRA_HEADERS][2];
	size_t n_extra;
	void (*done)(void *);
	void *done_ctx;
	char *body; /* a POST's body (httpd_config.max_body), NUL-terminated */
	size_t body_len;
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


/* ---- describing the response (the handler's side) ---- */

static void answer(struct httpd_req *r, unsigned status, const char *ctype, enum body_kind kind)
{
	if (r->answered)
		DP_FATAL("a second answer to one request");
	r->answered = true;
	r->status = status;
	r->ctype = ctype ? mem_strdup(ctype) : NULL;
	r->kind = kind;
}

void httpd_on_done(struct httpd_req *r, void (*fn)(void *), void *ctx)
{
	r->done = fn;
	r->done_ctx = ctx;
}

void httpd_set_header(struct httpd_req *r, const char *name, const char *value)
{
	if (r->n_extra == MAX_EXTRA_HEADERS)
		DP_FATAL("more than %d extra headers", MAX_EXTRA_HEADERS);
	r->extra[r->n_extra][0] = mem_strdup(name);
	r->extra[r->n_extra][1] = mem_strdup(value);
	r->n_extra++;
}

const char *httpd_method(const struct httpd_req *r)
{
	return r->rq.method;
}

const char *httpd_path(const struct httpd_req *r)
{
	return r->rq.path;
}

const char *httpd_query(const struct httpd_req *r, const char *key)
{
	return http_param(&r->rq, key);
}

const char *httpd_header(const struct httpd_req *r, const char *name)
{
	return http_header(&r->rq, name);
}

int httpd_send(struct httpd_req *r, unsigned status, const char *ctype, const char *body, size_t len)
{
	answer(r, status, ctype, BODY_MEM);
	r->mem = mem_alloc(len ? len : 1);
	memcpy(r->mem, body, len);
	r->mem_len = len;
	return 0;
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
	char *s;
	int rc;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	s = problem_body(status, title, detail);
	rc = httpd_send(r, status, PROBLEM_CTYPE, s, strlen(s));
	free(s);
	return rc;
}

static void set_disposition(struct httpd_req *r, const char *attachment_name)
{
	if (attachment_name)
		r->disposition = mem_printf("attachment; filename=\"%s\"", attachment_name);
}

int httpd_send_fd(struct httpd_req *r, unsigned status, const char *ctype, int fd, uint64_t size,
		  const char *attachment_name)
{
	answer(r, status, ctype, BODY_FD);
	r->fd = fd;
	r->fd_size = size;
	set_disposition(r, attachment_name);
	return 0;
}

int httpd_send_stream(struct httpd_req *r, unsigned status, const char *ctype, httpd_read_fn read_fn,
		      void (*free_fn)(void *), void *ctx, const char *attachment_name)
{
	answer(r, status, ctype, BODY_STREAM);
	r->read_fn = read_fn;
	r->free_fn = free_fn;
	r->stream_ctx = ctx;
	set_disposition(r, attachment_name);
	return 0;
}

/* What was wrong with a request head http_parse_head refused with status. */
static const char *parse_detail(int status)
{
	switch (status) {
	case 414: return "the request target is longer than 8 KiB";
	case 431: return "the request has more than 64 header fields or more than 32 query parameters";
	case 505: return "only HTTP/1.0 and HTTP/1.1 are served";
	default: return "the request line or a header field is malformed (RFC 9112), or the target has a "
			"percent-escape that is not %XX or is %00";
	}
}

/* ---- writing it (the connection's side) ---- */

static const char *reason(unsigned status)
{
	static const struct {
		unsigned code;
		const char *text;
	} t[] = { { 200, "OK" }, { 202, "Accepted" }, { 400, "Bad Request" }, { 401, "Unauthorized" },
		  { 404, "Not Found" }, { 405, "Method Not Allowed" }, { 411, "Length Required" },
		  { 413, "Content Too Large" }, { 414, "URI Too Long" }, { 429, "Too Many Requests" },
		  { 431, "Request Header Fields Too Large" }, { 500, "Internal Server Error" }, { 503, "Service Unavailable" },
		  { 505, "HTTP Version Not Supported" }, { 507, "Insufficient Storage" } };

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].code == status)
			return t[i].text;
	return "Unknown";
}

/* Write all of p; false on error or when the client stops reading for the idle timeout. */
static bool write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		c += w;
		n -= (size_t)w;
	}
	return true;
}

static bool write_head(int fd, struct httpd_req *r, const char *length_header)
{
	struct buf b;
	char date[64];
	time_t now = time(NULL);
	struct tm tm;
	bool ok;

	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	buf_init(&b, 16384);
	buf_printf(&b, "HTTP/1.1 %u %s\r\nDate: %s\r\nConnection: close\r\n", r->status, reason(r->status), date);
	if (r->ctype)
		buf_printf(&b, "Content-Type: %s\r\n", r->ctype);
	buf_printf(&b, "X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\n");
	if (r->status == 401)
		buf_printf(&b, "WWW-Authenticate: Bearer\r\n");
	for (size_t i = 0; i < r->n_extra; i++)
		buf_printf(&b, "%s: %s\r\n", r->extra[i][0], r->extra[i][1]);
	if (r->disposition)
		buf_printf(&b, "Content-Disposition: %s\r\n", r->disposition);
	if (length_header)
		buf_printf(&b, "%s\r\n", length_header);
	buf_printf(&b, "\r\n");
	ok = b.data && write_all(fd, b.data, b.len);
	buf_free(&b);
	return ok;
}

static void send_fd_body(int sock, struct httpd_req *r)
{
	off_t off = 0;

	while ((uint64_t)off < r->fd_size) {
		size_t want = r->fd_size - (uint64_t)off > (1u << 30) ? (1u << 30) : (size_t)(r->fd_size - (uint64_t)off);
		ssize_t n = sendfile(sock, r->fd, &off, want);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* the client went away or stalled: the connection is closed */
	}
}

static void send_stream_body(int sock, struct httpd_req *r)
{
	char *chunk = mem_alloc(STREAM_CHUNK + 32);
	bool chunked = r->rq.minor >= 1;

	for (;;) {
		long n = r->read_fn(r->stream_ctx, chunk + 16, STREAM_CHUNK);
		char hdr[20];
		int hl;

		if (n < 0)
			break; /* cut off: no last chunk, so the client sees an incomplete body */
		if (n == 0) {
			if (chunked)
				write_all(sock, "0\r\n\r\n", 5);
			break;
		}
		if (!chunked) {
			if (!write_all(sock, chunk + 16, (size_t)n))
				break;
			continue;
		}
		hl = snprintf(hdr, sizeof(hdr), "%lx\r\n", (unsigned long)n);
		memcpy(chunk + 16 - hl, hdr, (size_t)hl);
		chunk[16 + n] = '\r';
		chunk[16 + n + 1] = '\n';
		if (!write_all(sock, chunk + 16 - hl, (size_t)(hl + n + 2)))
			break;
	}
	free(chunk);
}

static void transmit(int sock, struct httpd_req *r)
{
	char len[64];

	switch (r->kind) {
	case BODY_MEM:
		snprintf(len, sizeof(len), "Content-Length: %zu", r->mem_len);
		if (write_head(sock, r, len) && !r->head_only)
			write_all(sock, r->mem, r->mem_len);
		break;
	case BODY_FD:
		snprintf(len, sizeof(len), "Content-Length: %llu", (unsigned long long)r->fd_size);
		if (write_head(sock, r, len) && !r->head_only)
			send_fd_body(sock, r);
		break;
	case BODY_STREAM:
		if (write_head(sock, r, r->rq.minor >= 1 ? "Transfer-Encoding: chunked" : NULL) &&
		    !r->head_only)
			send_stream_body(sock, r);
		break;
	}
}

static void req_clean(struct httpd_req *r)
{
	if (r->kind == BODY_FD && r->answered)
		close(r->fd);
	if (r->kind == BODY_STREAM && r->answered && r->free_fn)
		r->free_fn(r->stream_ctx);
	if (r->done)
		r->done(r->done_ctx);
	for (size_t i = 0; i < r->n_extra; i++) {
		free(r->extra[i][0]);
		free(r->extra[i][1]);
	}
	free(r->ctype);
	free(r->disposition);
	free(r->mem);
	free(r->body);
}

/* Read the request head under the idle timeout. Its length, 0 when the client went away, -431 when too big. */
static long read_head(int sock, char *buf, size_t cap, size_t *got)
{
	size_t len = 0;

	for (;;) {
		ssize_t n;
		size_t h;

		if (len == cap)
			return -431;
		n = recv(sock, buf + len, cap - len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		len += (size_t)n;
		if ((h = http_head_length(buf, len)) != 0) {
			*got = len;
			return (long)h;
		}
	}
}

/*
 * The body: only a POST has one, with a Content-Length up to max_body (the
 * cap checked before a byte of it is read; no chunked bodies). pre[0..n) is
 * what came with the head. False when the answer (an error) is already set.
 */
static bool read_body(struct httpd *d, int sock, struct httpd_req *r, const char *pre, size_t n)
{
	const char *cl = http_header(&r->rq, "Content-Length"), *te = http_header(&r->rq, "Transfer-Encoding");
	bool post = strcmp(r->rq.method, "POST") == 0 && d->max_body > 0 && d->takes_body && d->takes_body(r->rq.path);
	unsigned long long want = 0;
	char *end = NULL;

	size_t n_cl = 0;

	for (size_t i = 0; i < r->rq.n_headers; i++)
		n_cl += strcasecmp(r->rq.headers[i].name, "Content-Length") == 0;
	if (n_cl > 1 || (cl && te)) { /* RFC 9112 6.3: the framing is in doubt (request smuggling) */
		httpd_problem(r, 400, "Bad Request", "%s", n_cl > 1 ? "more than one Content-Length" :
				      "both Content-Length and Transfer-Encoding");
		return false;
	}
	if (te && post) {
		httpd_problem(r, 411, "Length Required", "send the body with a Content-Length, not chunked");
		return false;
	}
	if (cl) {
		errno = 0;
		want = strtoull(cl, &end, 10);
		if (*cl < '0' || *cl > '9' || *end != '\0' || errno != 0) {
			httpd_problem(r, 400, "Bad Request", "Content-Length '%s' is not a number", cl);
			return false;
		}
	}
	if ((want > 0 || te) && !post) {
		httpd_problem(r, 413, "Content Too Large", "this route takes no request body");
		return false;
	}
	if (want > d->max_body) {
		httpd_problem(r, 413, "Content Too Large", "the body is %llu bytes; the cap is %zu", want, d->max_body);
		return false;
	}
	if (want == 0)
		return true;
	r->body = mem_alloc((size_t)want + 1);
	r->body_len = n < want ? n : (size_t)want;
	memcpy(r->body, pre, r->body_len);
	while (r->body_len < want) {
		ssize_t k = recv(sock, r->body + r->body_len, (size_t)want - r->body_len, 0);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			httpd_problem(r, 400, "Bad Request", "the body ended after %zu of %llu bytes", r->body_len, want);
			return false;
		}
		r->body_len += (size_t)k;
	}
	r->body[r->body_len] = '\0';
	return true;
}

const char *httpd_body(const struct httpd_req *r, size_t *len)
{
	*len = r->body_len;
	return r->body;
}

/* Close gracefully: stop sending, read what the client still sends for a moment, so it sees our answer. */
static void linger_close(int sock)
{
	char sink[4096];
	struct pollfd pf = { .fd = sock, .events = POLLIN };

	shutdown(sock, SHUT_WR);
	for (int i = 0; i < 16 && poll(&pf, 1, LINGER_MS) > 0; i++)
		if (recv(sock, sink, sizeof(sink), 0) <= 0)
			break;
	close(sock);
}

static void serve(struct httpd *d, int sock)
{
	struct httpd_req r = { .fd = -1 };
	char *buf = mem_alloc(d->head_cap);
	size_t got = 0;
	long head = read_head(sock, buf, d->head_cap, &got);
	int rc;

	if (head == 0)
		goto out;
	if (head < 0) {
		httpd_problem(&r, 431, "Request Header Fields Too Large", "the request head is larger than %zu bytes",
			      d->head_cap);
		goto send;
	}
	if ((rc = http_parse_head(buf, (size_t)head, &r.rq)) != 0) {
		httpd_problem(&r, (unsigned)rc, reason((unsigned)rc), "%s", parse_detail(rc));
		goto send;
	}
	r.head_only = strcmp(r.rq.method, "HEAD") == 0;
	if (!read_body(d, sock, &r, buf + head, got - (size_t)head))
		goto send;
	d->h(d->ctx, &r);
	if (!r.answered)
		httpd_problem(&r, 500, "Internal Server Error", "the handler gave no answer");
send:
	transmit(sock, &r);
	req_clean(&r);
out:
	free(buf);
	linger_close(sock);
}

struct conn_arg {
	struct httpd *d;
	int sock;
	unsigned slot;
};

static void *conn_main(void *arg)
{
	struct conn_arg *c = arg;
	struct httpd *d = c->d;

	serve(d, c->sock);
	pthread_mutex_lock(&d->mu);
	d->conn_fd[c->slot] = -1;
	d->active--;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	free(c);
	return NULL;
}

static void start_conn(struct httpd *d, int sock)
{
	struct timeval tv = { .tv_sec = d->idle_s };
	struct conn_arg *c;
	pthread_attr_t attr;
	pthread_t t;
	unsigned slot;
	int one = 1;

	pthread_mutex_lock(&d->mu);
	if (d->active == d->max_conns) {
		pthread_mutex_unlock(&d->mu);
		close(sock); /* over the cap: refused at once, as a full listen queue would be */
		return;
	}
	for (slot = 0; d->conn_fd[slot] >= 0; slot++)
		;
	d->conn_fd[slot] = sock;
	d->active++;
	pthread_mutex_unlock(&d->mu);
	setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c = mem_zalloc(sizeof(*c));
	c->d = d;
	c->sock = sock;
	c->slot = slot;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, conn_main, c) != 0) {
		free(c);
		close(sock);
		pthread_mutex_lock(&d->mu);
		d->conn_fd[slot] = -1;
		d->active--;
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
	}
	pthread_attr_destroy(&attr);
}

static void *acceptor_main(void *arg)
{
	struct httpd *d = arg;
	struct pollfd pf[MAX_LISTENERS + 1];

	for (;;) {
		for (size_t i = 0; i < d->n; i++)
			pf[i] = (struct pollfd){ .fd = d->lfd[i], .events = POLLIN };
		pf[d->n] = (struct pollfd){ .fd = d->wake[0], .events = POLLIN };
		if (poll(pf, d->n + 1, -1) < 0)
			continue;
		if (pf[d->n].revents)
			return NULL;
		for (size_t i = 0; i < d->n; i++) {
			int s;

			if (!(pf[i].revents & POLLIN))
				continue;
			s = accept4(d->lfd[i], NULL, NULL, SOCK_CLOEXEC);
			if (s >= 0)
				start_conn(d, s);
		}
	}
}

struct start_arg {
	struct httpd *d;
	struct err_msg *em;
};

static int listen_fn(const struct addr *a, void *arg)
{
	struct start_arg *s = arg;
	char shown[INET6_ADDRSTRLEN + 8] = "?";
	int fd, one = 1;

	if (s->d->n == MAX_LISTENERS)
		return err_set(s->em, DP_EINVAL, "more than %d URLs", MAX_LISTENERS);
	fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (a->sa.ss_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	}
	if (fd < 0 || bind(fd, (const struct sockaddr *)&a->sa, a->len) != 0 || listen(fd, 64) != 0) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		if (a->sa.ss_family == AF_INET)
			inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->sa)->sin_addr, shown, sizeof(shown));
		else
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->sa)->sin6_addr, shown, sizeof(shown));
		return err_set(s->em, DP_EIO, "cannot listen on %s port %d: %s", shown,
			       ntohs(((const struct sockaddr_in *)&a->sa)->sin_port), strerror(e));
	}
	s->d->lfd[s->d->n++] = fd;
	return 0;
}

int httpd_start(const struct httpd_config *cfg, httpd_handler h, void *ctx, struct httpd **out, struct err_msg *em)
{
	struct httpd *d = mem_zalloc(sizeof(*d));
	struct start_arg s = { d, em };
	int rc;

	d->h = h;
	d->ctx = ctx;
	d->max_conns = cfg->max_connections ? cfg->max_connections : 32;
	d->idle_s = cfg->idle_timeout_s ? cfg->idle_timeout_s : 30;
	d->head_cap = cfg->header_memory ? cfg->header_memory : (size_t)32768;
	d->max_body = cfg->max_body;
	d->takes_body = cfg->takes_body;
	d->conn_fd = mem_array(d->max_conns, sizeof(int));
	for (unsigned i = 0; i < d->max_conns; i++)
		d->conn_fd[i] = -1;
	d->wake[0] = d->wake[1] = -1;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	if ((rc = each_url(cfg->urls, listen_fn, &s, em)) != 0)
		goto fail;
	if (pipe2(d->wake, O_CLOEXEC) != 0) {
		rc = err_set(em, DP_EIO, "pipe: %s", strerror(errno));
		goto fail;
	}
	{
		/* The acceptor and every connection thread (they inherit its mask) block SIGPIPE: a client that
		 * goes away mid-sendfile gives EPIPE instead of killing the process. */
		sigset_t pipe_set, old;

		sigemptyset(&pipe_set);
		sigaddset(&pipe_set, SIGPIPE);
		pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
		rc = pthread_create(&d->acceptor, NULL, acceptor_main, d);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (rc != 0) {
			rc = err_set(em, DP_EIO, "cannot start the HTTP acceptor thread");
			goto fail;
		}
	}
	d->acceptor_started = true;
	*out = d;
	return 0;
fail:
	httpd_free(d);
	return rc;
}

void httpd_free(struct httpd *d)
{
	if (d == NULL)
		return;
	if (d->acceptor_started) {
		if (write(d->wake[1], "x", 1) != 1)
			DP_FATAL("cannot wake the HTTP acceptor");
		pthread_join(d->acceptor, NULL);
	}
	for (size_t i = 0; i < d->n; i++)
		close(d->lfd[i]);
	/* Cut every open connection off and wait for its thread to clean up (streams, on_done). */
	pthread_mutex_lock(&d->mu);
	for (unsigned i = 0; i < d->max_conns; i++)
		if (d->conn_fd[i] >= 0)
			shutdown(d->conn_fd[i], SHUT_RDWR);
	while (d->active)
		pthread_cond_wait(&d->cv, &d->mu);
	pthread_mutex_unlock(&d->mu);
	if (d->wake[0] >= 0) {
		close(d->wake[0]);
		close(d->wake[1]);
	}
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv);
	free(d->conn_fd);
	free(d);
}

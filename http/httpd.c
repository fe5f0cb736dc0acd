/*
 * httpd.c - the HTTP server's response side (httpd.h): what a handler calls
 * to describe its answer, and the writing of that answer once the handler has
 * returned: the head, then a body from memory, a file (sendfile), a stream
 * (chunked) or a file that grows (chunked, sendfile). httpd_conn.c reads the requests and calls in here;
 * httpd_listen.c starts and stops the server.
 *
 * On an https connection every byte goes through its TLS session
 * (httpd_tls.h): sendfile and splice cannot encrypt (kernel TLS is not
 * loaded on most nodes), so a file's bytes are read into a buffer of one
 * record's size and written, and a followed dump's pipe is always filed first
 * (httpd_zero_copy).
 *
 * Why a server of our own and not libmicrohttpd: Debian's build links
 * GnuTLS, and mapping GnuTLS and its seven libraries costs ~2.3 MiB of
 * resident memory in every pod's agent, which needs no TLS. See
 * docs/ARCHITECTURE.md.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "httpd_int.h"
#include "mem.h"
#include "problem.h"

#define STREAM_CHUNK ((size_t)256 * 1024)
#define FOLLOW_CHUNK (8LL << 20) /* the most one chunk of a followed file carries */

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
	if (r->n_extra == HTTPD_MAX_EXTRA_HEADERS)
		DP_FATAL("more than %d extra headers", HTTPD_MAX_EXTRA_HEADERS);
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

int httpd_send_follow(struct httpd_req *r, unsigned status, const char *ctype, int fd, httpd_avail_fn avail_fn,
		      void (*free_fn)(void *), void *ctx, const char *attachment_name)
{
	answer(r, status, ctype, BODY_FOLLOW);
	r->fd = fd;
	r->avail_fn = avail_fn;
	r->free_fn = free_fn;
	r->stream_ctx = ctx;
	set_disposition(r, attachment_name);
	return 0;
}

/* ---- writing it (the connection's side) ---- */

const char *httpd_reason(unsigned status)
{
	static const struct {
		unsigned code;
		const char *text;
	} t[] = { { 200, "OK" }, { 201, "Created" }, { 202, "Accepted" }, { 204, "No Content" }, { 303, "See Other" },
		  { 400, "Bad Request" }, { 401, "Unauthorized" }, { 403, "Forbidden" }, { 404, "Not Found" },
		  { 409, "Conflict" }, { 502, "Bad Gateway" }, { 405, "Method Not Allowed" }, { 408, "Request Timeout" }, { 411, "Length Required" },
		  { 413, "Content Too Large" }, { 414, "URI Too Long" }, { 429, "Too Many Requests" },
		  { 431, "Request Header Fields Too Large" }, { 500, "Internal Server Error" }, { 503, "Service Unavailable" },
		  { 505, "HTTP Version Not Supported" }, { 507, "Insufficient Storage" } };

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (t[i].code == status)
			return t[i].text;
	return "Unknown";
}

/* What the client has taken of an answer: the bytes its TCP acknowledged, and since when (monotonic s). */
struct progress {
	long long acked;
	long long since;
};

/* The bytes sock's peer has acknowledged, or -1 where the socket cannot say (not TCP). */
static long long acked_bytes(int sock)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(sock, IPPROTO_TCP, TCP_INFO, &ti, &l) != 0 ||
	    l < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))
		return -1;
	return (long long)ti.tcpi_bytes_acked;
}

/* A send found the socket's buffer full: true once it may be writable again (at most a second later), false
 * once the client has taken nothing for the socket's send timeout (the idle timeout). What the client took is
 * what its TCP acknowledged (else, off TCP, what was written: sent). The socket's own timeout cannot tell: the
 * kernel keeps taking a trickle into a send buffer that grows from a client that reads nothing, and sendfile
 * waits the whole timeout afresh for each 64 KiB, so a stalled download held its dump, and the one dump slot,
 * for minutes. */
static bool wait_writable(int sock, struct progress *p, long long sent)
{
	struct timeval tv;
	socklen_t l = sizeof(tv);
	struct timespec ts;
	struct pollfd pf = { .fd = sock, .events = POLLOUT };
	long long a = acked_bytes(sock), now;

	if (a < 0)
		a = sent;
	if (getsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, &l) != 0 || tv.tv_sec <= 0)
		tv.tv_sec = 30;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (long long)ts.tv_sec;
	if (p->since == 0 || a != p->acked) {
		p->acked = a;
		p->since = now;
	} else if (now - p->since >= (long long)tv.tv_sec) {
		return false;
	}
	return poll(&pf, 1, 1000) >= 0 || errno == EINTR;
}

/* Write all of p on fd, through tls when not NULL; false on error or when the client stops reading for the
 * idle timeout. */
static bool send_all(int fd, struct httpd_tls_conn *tls, const void *p, size_t n)
{
	const char *c = p;
	struct progress pr = { 0, 0 };
	long long sent = 0;

	while (n) {
		ssize_t w = tls ? httpd_tls_write(tls, c, n) : send(fd, c, n, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (!wait_writable(fd, &pr, sent))
				return false;
			continue;
		}
		if (w <= 0)
			return false;
		c += w;
		n -= (size_t)w;
		sent += w;
	}
	return true;
}

bool httpd_send_all(int fd, const void *p, size_t n)
{
	return send_all(fd, NULL, p, n);
}

/* The connection a request came on: every request lives inside its conn. */
static const struct conn *conn_of(const struct httpd_req *r)
{
	return (const struct conn *)(const void *)((const char *)r - offsetof(struct conn, r));
}

static bool conn_send_all(const struct conn *c, const void *p, size_t n)
{
	return send_all(c->sock, c->tls, p, n);
}

static bool write_head(const struct conn *c, struct httpd_req *r, const char *length_header)
{
	struct buf b;
	char date[64];
	time_t now = time(NULL);
	struct tm tm;
	bool ok;

	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
	buf_init(&b, 16384);
	buf_printf(&b, "HTTP/1.1 %u %s\r\nDate: %s\r\nConnection: close\r\n", r->status, httpd_reason(r->status), date);
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
	ok = b.data && conn_send_all(c, b.data, b.len);
	buf_free(&b);
	return ok;
}

/* fd's bytes from *off up to end through c's TLS session, a record's worth at a time. */
static bool copy_to_tls(const struct conn *c, int fd, off_t *off, uint64_t end)
{
	char b[16384];

	while ((uint64_t)*off < end) {
		size_t want = end - (uint64_t)*off > sizeof(b) ? sizeof(b) : (size_t)(end - (uint64_t)*off);
		ssize_t n = pread(fd, b, want, *off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || !conn_send_all(c, b, (size_t)n))
			return false; /* the file is shorter than promised, or the client went away or stalled */
		*off += n;
	}
	return true;
}

/* fd's bytes from *off up to end onto c; false when the client went away or stalled. */
static bool sendfile_to(const struct conn *c, int fd, off_t *off, uint64_t end, struct progress *pr)
{
	int sock = c->sock;
	int fl;
	bool ok = true;

	if (c->tls)
		return copy_to_tls(c, fd, off, end);
	fl = fcntl(sock, F_GETFL);

	if (fl >= 0)
		fcntl(sock, F_SETFL, fl | O_NONBLOCK); /* sendfile takes no MSG_DONTWAIT */
	while (ok && (uint64_t)*off < end) {
		size_t want = end - (uint64_t)*off > (1u << 30) ? (1u << 30) : (size_t)(end - (uint64_t)*off);
		ssize_t n = sendfile(sock, fd, off, want);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			ok = wait_writable(sock, pr, (long long)*off);
		else if (n <= 0)
			ok = false; /* the connection is closed */
	}
	if (fl >= 0)
		fcntl(sock, F_SETFL, fl);
	return ok;
}

static void send_fd_body(const struct conn *c, struct httpd_req *r)
{
	off_t off = 0;
	struct progress pr = { 0, 0 };

	r->sent_whole = sendfile_to(c, r->fd, &off, r->fd_size, &pr);
}

/*
 * A chunk's size line, which also ends the chunk before it ("\r\n" first), so that a chunk's bytes may come
 * from two places (the file, the pipe) and two threads without a trailer to owe: r->open counts the bytes
 * the line has promised. No framing for HTTP/1.0.
 */
static bool chunk_head(const struct conn *c, struct httpd_req *r, uint64_t n)
{
	int sock = c->sock;
	char hdr[32];
	int hl = snprintf(hdr, sizeof(hdr), "%s%llx\r\n", r->chunks ? "\r\n" : "", (unsigned long long)n);
	ssize_t w;

	r->open = n;
	if (r->rq.minor < 1)
		return true;
	r->chunks++;
	if (c->tls)
		return conn_send_all(c, hdr, (size_t)hl);
	w = send(sock, hdr, (size_t)hl, MSG_NOSIGNAL | MSG_DONTWAIT | MSG_MORE); /* the bytes follow at once */
	if (w < 0 && errno != EAGAIN && errno != EINTR)
		return false;
	w = w < 0 ? 0 : w;
	return w == hl || conn_send_all(c, hdr + w, (size_t)(hl - w));
}

/* A growing file: each chunk's size line, then its bytes by sendfile (some may have gone straight:
 * httpd_follow_splice). */
static void send_follow_body(const struct conn *c, struct httpd_req *r)
{
	int sock = c->sock;
	off_t off = 0;
	struct progress pr = { 0, 0 };
	int fl = fcntl(sock, F_GETFL);

	if (fl >= 0)
		fcntl(sock, F_SETFL, fl | O_NONBLOCK); /* for httpd_follow_splice, which must never wait */
	for (;;) {
		long long n = r->avail_fn(r->stream_ctx, (uint64_t)off);

		if (n < 0)
			break; /* cut off: no last chunk */
		if (n == 0) {
			if (r->rq.minor >= 1)
				conn_send_all(c, r->chunks ? "\r\n0\r\n\r\n" : "0\r\n\r\n", r->chunks ? 7 : 5);
			break;
		}
		if (r->open == 0 && !chunk_head(c, r, (uint64_t)(n > FOLLOW_CHUNK ? FOLLOW_CHUNK : n)))
			break;
		if ((uint64_t)n > r->open)
			n = (long long)r->open;
		if (!sendfile_to(c, r->fd, &off, (uint64_t)off + (uint64_t)n, &pr))
			break;
		r->open -= (uint64_t)n;
	}
	if (fl >= 0)
		fcntl(sock, F_SETFL, fl);
}

bool httpd_zero_copy(const struct httpd_req *r)
{
	return conn_of(r)->tls == NULL;
}

long long httpd_follow_splice(struct httpd_req *r, int from, uint64_t n, int wait_ms)
{
	const struct conn *c = conn_of(r);
	int sock = c->sock;
	struct pollfd pf = { .fd = sock, .events = POLLOUT };
	uint64_t moved = 0;

	if (c->tls)
		return 0; /* splice cannot encrypt: the caller files the bytes (httpd_zero_copy) */

	if ((poll(&pf, 1, wait_ms) < 0 && errno != EINTR) || (pf.revents & (POLLERR | POLLHUP)))
		return -1;
	if (!(pf.revents & POLLOUT))
		return 0; /* no room now: the caller files the bytes */
	if (r->open == 0 && !chunk_head(c, r, n > FOLLOW_CHUNK ? FOLLOW_CHUNK : n))
		return -1; /* a line of a few bytes into a socket that said it has room: only a dead one refuses */
	if (n > r->open)
		n = r->open;
	while (moved < n) {
		ssize_t k = splice(from, NULL, sock, NULL, n - moved, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

		if (k > 0)
			moved += (uint64_t)k;
		else if (k < 0 && errno == EINTR)
			continue;
		else if (k == 0 || errno == EAGAIN)
			break; /* the socket is full: the rest of the chunk follows from the file */
		else
			return -1;
	}
	r->open -= moved;
	return (long long)moved;
}

static void send_stream_body(const struct conn *c, struct httpd_req *r)
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
				conn_send_all(c, "0\r\n\r\n", 5);
			break;
		}
		if (!chunked) {
			if (!conn_send_all(c, chunk + 16, (size_t)n))
				break;
			continue;
		}
		hl = snprintf(hdr, sizeof(hdr), "%lx\r\n", (unsigned long)n);
		memcpy(chunk + 16 - hl, hdr, (size_t)hl);
		chunk[16 + n] = '\r';
		chunk[16 + n + 1] = '\n';
		if (!conn_send_all(c, chunk + 16 - hl, (size_t)(hl + n + 2)))
			break;
	}
	free(chunk);
}

void httpd_peer_text(const struct httpd_req *r, char *out, size_t n)
{
	const struct conn *c = conn_of(r);

	if (n == 0)
		return;
	out[0] = '\0';
	if (c->peer.family == AF_INET || c->peer.family == AF_INET6)
		inet_ntop(c->peer.family, c->peer.a, out, (socklen_t)n);
}

int httpd_socket(const struct httpd_req *r)
{
	return conn_of(r)->sock;
}

bool httpd_chunked(const struct httpd_req *r)
{
	return r->rq.minor >= 1;
}

bool httpd_sent_whole(const struct httpd_req *r)
{
	return r->sent_whole;
}

/*
 * POLLRDHUP: the client closed its sending side. A client that half-closes
 * after its request (RFC 9112 allows it; curl, browsers and the fleet client
 * do not) is taken as gone too: the one way to know without writing.
 */
bool httpd_client_gone(const struct httpd_req *r, int timeout_ms)
{
	struct pollfd p = { .fd = conn_of(r)->sock, .events = POLLRDHUP };

	return poll(&p, 1, timeout_ms) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void httpd_transmit(struct httpd_req *r)
{
	const struct conn *c = conn_of(r);
	char len[64];

	switch (r->kind) {
	case BODY_MEM:
		snprintf(len, sizeof(len), "Content-Length: %zu", r->mem_len);
		if (write_head(c, r, len) && !r->head_only)
			r->sent_whole = conn_send_all(c, r->mem, r->mem_len);
		break;
	case BODY_FD:
		snprintf(len, sizeof(len), "Content-Length: %llu", (unsigned long long)r->fd_size);
		if (write_head(c, r, len) && !r->head_only)
			send_fd_body(c, r);
		break;
	case BODY_STREAM:
		if (write_head(c, r, r->rq.minor >= 1 ? "Transfer-Encoding: chunked" : NULL) &&
		    !r->head_only)
			send_stream_body(c, r);
		break;
	case BODY_FOLLOW:
		if (write_head(c, r, r->rq.minor >= 1 ? "Transfer-Encoding: chunked" : NULL) && !r->head_only)
			send_follow_body(c, r);
		break;
	}
}

void httpd_req_clean(struct httpd_req *r)
{
	if (r->kind == BODY_FD && r->answered)
		close(r->fd);
	if ((r->kind == BODY_STREAM || r->kind == BODY_FOLLOW) && r->answered && r->free_fn)
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

const char *httpd_body(const struct httpd_req *r, size_t *len)
{
	*len = r->body_len;
	return r->body;
}

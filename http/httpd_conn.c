/*
 * httpd_conn.c - the HTTP server's connections (httpd.h): one acceptor
 * thread reads every request; a worker thread per complete request runs the
 * handler and writes the answer (httpd.c).
 *
 * Reading is where slow and hostile clients are met, so it holds no thread:
 * the acceptor polls every listening socket and every connection still
 * sending its request and reads what has come without blocking. Its limits
 * follow the servers that set the pattern:
 *  - the whole head within head_timeout_s (10 s; Go's ReadHeaderTimeout,
 *    Kestrel's RequestHeadersTimeout, nginx's client_header_timeout), else
 *    408: not a timeout per read, which a byte every few seconds defeats;
 *  - a body at 240 bytes/s or better, on average, after a 5 s grace
 *    (Kestrel's MinRequestBodyDataRate defaults), else 408; and only once
 *    admit_body agreed (the agent: the token), so an unauthenticated client
 *    cannot make the server hold body memory;
 *  - at most max_per_peer connections from one address (nginx's limit_conn):
 *    a new one closes that address's oldest connection still reading, so a
 *    client crowds out only itself and a new request is always read;
 *  - at most pend_cap connections reading at once (the oldest is closed for
 *    a new one), and one budget for what they buffer beyond their first
 *    1 KiB, body bytes charged as they arrive (a request that needs more
 *    once it is spent gets 503).
 * A complete request goes to a worker: max_connections of them, and
 * HTTPD_PROBE_SLOTS more that only probe routes (the agent's /healthz and
 * /readyz) may take, so a liveness probe is answered whatever other clients
 * do; with no slot free the answer is 503 at once. An answer the acceptor
 * can give itself (a malformed head, a refused body, 408, 503) takes no
 * worker. After an answer the connection lingers with the acceptor for a
 * moment, its unread input read and dropped, so the client sees the answer
 * rather than a reset, and no worker waits on it.
 *
 * An https listener's connection starts in CONN_HELLO: a first byte that
 * opens a TLS record starts the handshake, which, like the head, must be done
 * by the head deadline (a client that opens TLS and stalls is closed then); a
 * plain request is read and answered only for a probe route (the probes keep
 * working unchanged), else 400. The session costs HTTPD_TLS_CONN_COST of the
 * one budget while the acceptor holds the connection, and is ended as soon as
 * the answer is out.
 *
 * This file is a connection's state machine (hello, head, body, a worker,
 * linger) and its limits; accepting and the acceptor's poll loop are
 * httpd_accept.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "httpd_int.h"
#include "mem.h"

#define HTTPD_BODY_GRACE_MS 5000
#define HTTPD_BODY_MIN_RATE 240 /* bytes per second: Kestrel's MinRequestBodyDataRate, for every client */
#define LINGER_MS 1000
#define THREAD_STACK ((size_t)256 * 1024)

/* ---- the acceptor's list of connections still reading (or lingering) ---- */

void httpd_conn_pend_add(struct httpd *d, struct conn *c)
{
	c->idx = d->n_pend;
	d->pend[d->n_pend++] = c;
}

static void pend_remove(struct httpd *d, struct conn *c)
{
	struct conn *last = d->pend[--d->n_pend];

	d->pend[c->idx] = last;
	last->idx = c->idx;
}

/* Give back the big head buffer and the budget it was charged. */
static void release_buffer(struct httpd *d, struct conn *c)
{
	if (c->buf != c->first)
		free(c->buf);
	c->buf = c->first;
	c->len = 0;
	d->budget_used -= c->charged;
	c->charged = 0;
}

void httpd_conn_tls_end(struct conn *c)
{
	httpd_tls_conn_free(c->tls);
	c->tls = NULL;
}

void httpd_conn_free(struct conn *c)
{
	httpd_conn_tls_end(c);
	httpd_req_clean(&c->r);
	if (c->buf != c->first)
		free(c->buf);
	close(c->sock);
	free(c);
}

/* Close a connection the acceptor holds. */
void httpd_conn_drop(struct httpd *d, struct conn *c)
{
	pend_remove(d, c);
	d->budget_used -= c->charged;
	httpd_conn_free(c);
}

void httpd_conn_linger(struct conn *c, long long now)
{
	httpd_conn_tls_end(c); /* close_notify; what the client still sends is read and dropped unopened */
	c->events = POLLIN;
	shutdown(c->sock, SHUT_WR);
	c->state = CONN_LINGER;
	c->deadline_ms = now + LINGER_MS;
}

/* Write the answer already set on c's request (an error: small, into an empty send buffer) and linger. */
static void answer_now(struct httpd *d, struct conn *c, long long now)
{
	httpd_transmit(&c->r);
	httpd_req_clean(&c->r);
	memset(&c->r, 0, sizeof(c->r));
	c->r.fd = -1;
	release_buffer(d, c);
	httpd_conn_linger(c, now);
}

/* ---- a complete request: to a worker ---- */

/* Give c's worker slot back (d->mu held). */
static void release_slot(struct httpd *d, struct conn *c)
{
	d->work[c->slot] = NULL;
	if (c->probe_slot)
		d->n_probe--;
	else
		d->n_general--;
}

static void *worker_main(void *arg)
{
	struct conn *c = arg;
	struct httpd *d = c->d;

	d->h(d->ctx, &c->r);
	if (!c->r.answered)
		httpd_problem(&c->r, 500, "Internal Server Error", "the handler gave no answer");
	httpd_transmit(&c->r);
	httpd_conn_tls_end(c);
	httpd_req_clean(&c->r); /* on_done: the handler's resources are free before the slot is */
	memset(&c->r, 0, sizeof(c->r));
	c->r.fd = -1;
	if (c->buf != c->first)
		free(c->buf); /* charged to no budget since it left the acceptor */
	c->buf = c->first;
	pthread_mutex_lock(&d->mu);
	release_slot(d, c);
	if (d->stopping) {
		close(c->sock);
		free(c);
	} else {
		c->next = d->done;
		d->done = c;
		if (write(d->wake[1], "d", 1) < 0) {
			/* full: the acceptor has wake-ups pending and takes the list then */
		}
	}
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* 503: the memory the requests being read share is spent. */
static void budget_spent(struct httpd *d, struct conn *c, long long now)
{
	httpd_set_header(&c->r, "Retry-After", "1");
	httpd_problem(&c->r, 503, "Service Unavailable", "the %zu bytes that requests being read may hold together "
		      "are in use; retry", d->budget);
	answer_now(d, c, now);
}

static void busy(struct httpd *d, struct conn *c, long long now)
{
	httpd_set_header(&c->r, "Retry-After", "1");
	httpd_problem(&c->r, 503, "Service Unavailable", "%u requests are in progress, the most this server takes; "
		      "retry", d->max_conns);
	answer_now(d, c, now);
}

/* Hand c (complete, not answered) to a worker thread, or answer 503 when every slot it may use is taken. */
static void dispatch(struct httpd *d, struct conn *c, long long now)
{
	struct timeval tv = { .tv_sec = d->idle_s };
	pthread_attr_t attr;
	pthread_t t;
	int flags, rc;

	pthread_mutex_lock(&d->mu);
	if (d->n_general < d->max_conns) {
		c->probe_slot = false;
		d->n_general++;
	} else if (c->probe && d->n_probe < HTTPD_PROBE_SLOTS) {
		c->probe_slot = true;
		d->n_probe++;
	} else {
		pthread_mutex_unlock(&d->mu);
		busy(d, c, now);
		return;
	}
	for (c->slot = 0; d->work[c->slot]; c->slot++)
		;
	d->work[c->slot] = c;
	c->state = CONN_WORK;
	pthread_mutex_unlock(&d->mu);
	pend_remove(d, c);
	d->budget_used -= c->charged; /* the worker caps (max_connections) bound what it holds from here */
	c->charged = 0;
	flags = fcntl(c->sock, F_GETFL);
	if (c->tls == NULL) /* a TLS session is written without blocking: httpd.c polls */
		fcntl(c->sock, F_SETFL, flags & ~O_NONBLOCK);
	setsockopt(c->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, worker_main, c);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		pthread_mutex_lock(&d->mu);
		release_slot(d, c);
		pthread_mutex_unlock(&d->mu);
		fcntl(c->sock, F_SETFL, flags);
		httpd_conn_pend_add(d, c);
		busy(d, c, now);
	}
}

/* ---- reading the request ---- */

/* recv(2) without waiting, through c's TLS session when it has one. */
static ssize_t conn_recv(struct conn *c, void *p, size_t n)
{
	return c->tls ? httpd_tls_read(c->tls, p, n) : recv(c->sock, p, n, MSG_DONTWAIT);
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

/*
 * The body's framing: only a POST to a route that takes one has a body, with
 * a Content-Length up to max_body (checked before a byte of it is read; no
 * chunked bodies). Sets c->want; false when the answer (an error) is set.
 */
static bool body_plan(struct httpd *d, struct conn *c)
{
	struct httpd_req *r = &c->r;
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
		httpd_problem(r, 411, "Length Required", "send the body with a Content-Length, not a Transfer-Encoding");
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
	c->want = (size_t)want;
	return true;
}

/* Charge n more bytes to the budget for c; false when the budget is spent. */
bool httpd_conn_charge(struct httpd *d, struct conn *c, size_t n)
{
	if (d->budget_used + n > d->budget)
		return false;
	d->budget_used += n;
	c->charged += n;
	return true;
}

static void body_done(struct httpd *d, struct conn *c, long long now)
{
	c->r.body[c->r.body_len] = '\0';
	dispatch(d, c, now);
}

/* A parsed head with its framing checked, from here on: admitted (or held, or refused), its body read, then to a
 * worker. */
static void proceed(struct httpd *d, struct conn *c, long long now)
{
	struct httpd_req *r = &c->r;
	size_t pre = c->len - c->head_len;
	const char *expect;

	if (d->admit) {
		long long until = now;

		switch (d->admit(d->ctx, r, now, &until)) {
		case HTTPD_ADMIT:
			break;
		case HTTPD_REFUSE:
			answer_now(d, c, now);
			return;
		case HTTPD_WAIT:
			c->state = CONN_WAIT;
			c->deadline_ms = until > now ? until : now + 1;
			return;
		}
		c->state = CONN_HEAD;
	}
	if (c->want == 0) {
		dispatch(d, c, now);
		return;
	}
	if (d->admit_body && !d->admit_body(d->ctx, r)) {
		answer_now(d, c, now); /* refused before a byte of the body is read */
		return;
	}
	pre = pre < c->want ? pre : c->want;
	if (!httpd_conn_charge(d, c, pre)) {
		budget_spent(d, c, now);
		return;
	}
	expect = http_header(&r->rq, "Expect");
	if (pre < c->want && expect && strcasecmp(expect, "100-continue") == 0 &&
	    (c->tls ? httpd_tls_write(c->tls, "HTTP/1.1 100 Continue\r\n\r\n", 25) :
		      send(c->sock, "HTTP/1.1 100 Continue\r\n\r\n", 25, MSG_DONTWAIT | MSG_NOSIGNAL)) != 25) {
		httpd_conn_drop(d, c);
		return;
	}
	r->body = mem_alloc(c->want + 1); /* address space; the budget counts the bytes as they come */
	r->body_len = pre;
	memcpy(r->body, c->buf + c->head_len, r->body_len);
	c->state = CONN_BODY;
	c->body_ms = now;
	c->deadline_ms = now + HTTPD_BODY_GRACE_MS;
	if (r->body_len == c->want)
		body_done(d, c, now);
}

static void head_done(struct httpd *d, struct conn *c, size_t head, long long now)
{
	struct httpd_req *r = &c->r;
	int rc = http_parse_head(c->buf, head, &r->rq);

	if (rc != 0) {
		httpd_problem(r, (unsigned)rc, httpd_reason((unsigned)rc), "%s", parse_detail(rc));
		answer_now(d, c, now);
		return;
	}
	r->head_only = strcmp(r->rq.method, "HEAD") == 0;
	c->probe = d->is_probe && d->is_probe(r->rq.path);
	c->head_len = head;
	if (c->plain_on_tls && !c->probe) {
		httpd_problem(r, 400, "Bad Request", "this port speaks https: a plain http request is answered only "
			      "for the health probes; use https://");
		answer_now(d, c, now);
		return;
	}
	if (!body_plan(d, c)) { /* the message's framing (400, 411, 413) before what it asks for */
		answer_now(d, c, now);
		return;
	}
	proceed(d, c, now);
}

/* Make room for more of the head: 0, or the status to refuse it with (431 too big, 503 budget spent). */
static unsigned grow(struct httpd *d, struct conn *c)
{
	size_t to = c->cap * 2 < d->head_cap ? c->cap * 2 : d->head_cap;
	char *nb;

	if (c->cap >= d->head_cap)
		return 431;
	if (!httpd_conn_charge(d, c, to - (c->buf == c->first ? 0 : c->cap)))
		return 503;
	nb = mem_alloc(to);
	memcpy(nb, c->buf, c->len);
	if (c->buf != c->first)
		free(c->buf);
	c->buf = nb;
	c->cap = to;
	return 0;
}

static void read_head(struct httpd *d, struct conn *c, long long now)
{
	unsigned st;
	ssize_t n;
	size_t head;

	if (c->len == c->cap && (st = grow(d, c)) != 0) {
		if (st == 431)
			httpd_problem(&c->r, 431, "Request Header Fields Too Large",
				      "the request head is larger than %zu bytes", d->head_cap);
		else
			httpd_problem(&c->r, 503, "Service Unavailable", "the server holds too many large request "
				      "heads; retry");
		answer_now(d, c, now);
		return;
	}
	n = conn_recv(c, c->buf + c->len, c->cap - c->len);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		httpd_conn_drop(d, c);
		return;
	}
	c->len += (size_t)n;
	if ((head = http_head_length(c->buf, c->len)) != 0)
		head_done(d, c, head, now);
}

static void read_body(struct httpd *d, struct conn *c, long long now)
{
	struct httpd_req *r = &c->r;
	ssize_t n = conn_recv(c, r->body + r->body_len, c->want - r->body_len);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) {
		httpd_conn_drop(d, c);
		return;
	}
	if (n == 0) {
		httpd_problem(r, 400, "Bad Request", "the body ended after %zu of %zu bytes", r->body_len, c->want);
		answer_now(d, c, now);
		return;
	}
	r->body_len += (size_t)n;
	if (!httpd_conn_charge(d, c, (size_t)n)) {
		budget_spent(d, c, now);
		return;
	}
	if (r->body_len == c->want)
		body_done(d, c, now);
}

/*
 * An https listener's connection: the first byte says whether it is TLS (a
 * handshake record, 0x16) or a plain request; then the handshake, as far as
 * the socket allows. The budget was charged for the session when accepted.
 */
static void hello(struct httpd *d, struct conn *c, long long now)
{
	unsigned char first;
	ssize_t n;
	int rc;

	if (c->tls == NULL) {
		n = recv(c->sock, &first, 1, MSG_PEEK | MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			httpd_conn_drop(d, c);
			return;
		}
		if (first != 0x16) {
			c->plain_on_tls = true;
			d->budget_used -= HTTPD_TLS_CONN_COST;
			c->charged -= HTTPD_TLS_CONN_COST;
			c->state = CONN_HEAD;
			read_head(d, c, now);
			return;
		}
		httpd_tls_refresh(d->tls, now);
		if ((c->tls = httpd_tls_conn_new(d->tls, c->sock)) == NULL) {
			httpd_conn_drop(d, c);
			return;
		}
	}
	rc = httpd_tls_handshake(c->tls);
	if (rc < 0) {
		httpd_conn_drop(d, c); /* not TLS, or a client that does not trust the certificate: nothing to answer in */
		return;
	}
	c->events = rc == 2 ? POLLOUT : POLLIN;
	if (rc == 1) {
		c->state = CONN_HEAD;
		read_head(d, c, now); /* the request may have come with the handshake's end */
	}
}

void httpd_conn_readable(struct httpd *d, struct conn *c, long long now)
{
	char sink[4096];
	ssize_t n;

	switch (c->state) {
	case CONN_HELLO:
		hello(d, c, now);
		return;
	case CONN_HEAD:
		read_head(d, c, now);
		return;
	case CONN_BODY:
		read_body(d, c, now);
		return;
	case CONN_LINGER:
		n = recv(c->sock, sink, sizeof(sink), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			httpd_conn_drop(d, c);
		return;
	case CONN_WAIT: /* polled for nothing: hung up or failed */
		httpd_conn_drop(d, c);
		return;
	case CONN_WORK:
		return;
	}
}

/* Connections past their deadline: 408 for a request that started and stalled, else closed. */
void httpd_conn_expire(struct httpd *d, long long now)
{
	for (size_t i = d->n_pend; i-- > 0;) {
		struct conn *c = d->pend[i];

		if (c->deadline_ms > now)
			continue;
		if (c->state == CONN_WAIT) {
			proceed(d, c, now);
			continue;
		}
		if (c->state == CONN_BODY && (long long)c->r.body_len >= (now - c->body_ms - HTTPD_BODY_GRACE_MS) * HTTPD_BODY_MIN_RATE / 1000) {
			/* on pace: due again when it would fall behind with nothing more */
			c->deadline_ms = c->body_ms + HTTPD_BODY_GRACE_MS + (long long)(c->r.body_len + 1) * 1000 / HTTPD_BODY_MIN_RATE;
			if (c->deadline_ms <= now)
				c->deadline_ms = now + 1;
			continue;
		}
		if (c->state == CONN_LINGER || c->state == CONN_HELLO || (c->state == CONN_HEAD && c->len == 0)) {
			httpd_conn_drop(d, c);
			continue;
		}
		if (c->state == CONN_HEAD)
			httpd_problem(&c->r, 408, "Request Timeout", "the request head did not arrive within %lld s",
				      d->head_ms / 1000);
		else
			httpd_problem(&c->r, 408, "Request Timeout", "the body came slower than %d bytes a second "
				      "(%zu of %zu bytes)", HTTPD_BODY_MIN_RATE, c->r.body_len, c->want);
		answer_now(d, c, now);
	}
}

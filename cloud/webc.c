/*
 * webc.c - webc's requests (webc.h): one at a time on a connection
 * (webc_conn.c: the URL, connect, proxy, TLS, every wait a poll under
 * io_timeout_ms): the head, the body from memory or streamed from body_fn,
 * and the answer read by webc_resp.c.
 *
 * Keep-alive: a connection whose last answer allowed it is reused. Before
 * a request goes on one, a poll with no wait asks whether the server has
 * closed it meanwhile (or sent something unasked); then it is reopened
 * first, which is how most closes are met, streamed bodies included. When
 * the close races the request (the answer's first byte never comes, or the
 * write finds the connection reset), the request is sent once more on a new
 * connection if its body can be sent again: a body in memory can, and so
 * can a streamed one whose body_fn has not been called yet; a streamed body
 * already partly taken cannot (body_fn has no rewind), and that request
 * fails with DP_EIO saying so, for the caller to retry from its own copy.
 */
#include "webc.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "clock.h"
#include "mem.h"
#include "webc_int.h"

#define TARGET_MAX 16384
#define BODY_CHUNK 65536   /* one body_fn call, one write */
#define INLINE_BODY 16384  /* a body in memory up to this goes in the head's write */

/* ---- one exchange ---------------------------------------------------------------------------- */

struct attempt {
	bool gone;      /* the server closed or reset the connection */
	bool any;       /* a byte of the answer came */
	bool consumed;  /* body_fn was called */
};

static int send_body(struct webc_conn *c, const struct webc_req *req, struct attempt *at, struct err_msg *em)
{
	size_t left = req->body_len;
	char *chunk;
	int rc = 0;

	if (req->body_fn == NULL)
		return req->body && req->body_len > INLINE_BODY ? webc_conn_send(c, req->body, req->body_len, &at->gone, em) : 0;
	chunk = mem_alloc(left < BODY_CHUNK ? left + 1 : BODY_CHUNK);
	while (left > 0 && rc == 0) {
		size_t want = left < BODY_CHUNK ? left : BODY_CHUNK;
		long n;

		at->consumed = true;
		n = req->body_fn(req->body_ctx, chunk, want);
		if (n < 0)
			rc = err_set(em, (int)n, "the request body's source failed (%s) with %zu bytes still to send",
				     err_str((int)n), left);
		else if (n == 0)
			rc = err_set(em, DP_EINVAL, "the request body's source ended %zu bytes before body_len", left);
		else if ((size_t)n > want)
			rc = err_set(em, DP_EINTERNAL, "the request body's source gave more bytes than asked");
		else if ((rc = webc_conn_send(c, chunk, (size_t)n, &at->gone, em)) == 0)
			left -= (size_t)n;
	}
	mem_free(chunk);
	return rc;
}

static int read_answer(struct webc_conn *c, const struct webc_req *req, struct webc_resp *resp, struct attempt *at,
		       struct err_msg *em)
{
	struct webc_parse p;
	char *in = mem_alloc(WEBC_READ_CHUNK);
	long long until = clock_ms() + c->o.answer_timeout_ms;
	int rc = 0;

	webc_parse_init(&p, strcmp(req->method, "HEAD") == 0, req->max_resp, req->want_headers, resp);
	while (rc == 0) {
		long n = webc_conn_recv(c, in, WEBC_READ_CHUNK, &at->gone, em);
		size_t used = 0;

		if (n > 0 && clock_ms() > until) { /* each read made progress, but too slowly overall */
			rc = err_set(em, DP_EIO, "the answer did not come whole within %.1f s",
				     (double)c->o.answer_timeout_ms / 1000);
		} else if (n < 0) {
			rc = (int)n;
		} else if (n == 0) {
			at->gone = true;
			rc = webc_parse_eof(&p, em);
			p.keep_alive = false;
		} else {
			rc = webc_parse_feed(&p, in, (size_t)n, &used, em);
			p.keep_alive &= used == (size_t)n; /* bytes after the answer: the connection is not in step */
		}
	}
	at->any = p.any;
	mem_free(in);
	webc_parse_free(&p);
	if (rc < 0)
		return rc;
	if (p.keep_alive)
		c->served++;
	else
		webc_conn_drop(c);
	return 0;
}

static int exchange(struct webc_conn *c, const struct webc_req *req, const struct buf *head, struct webc_resp *resp,
		    struct attempt *at, struct err_msg *em)
{
	struct err_msg read_em;
	int rc = webc_conn_send(c, head->data, head->len, &at->gone, em), rrc;

	if (rc == 0)
		rc = send_body(c, req, at, em);
	if (rc == 0)
		return read_answer(c, req, resp, at, em);
	if (!at->gone)
		return rc;
	/* the server closed while we sent: it may have answered first (an early 403, a 413) */
	if ((rrc = read_answer(c, req, resp, at, &read_em)) == 0)
		webc_conn_drop(c); /* the rest of the body was never sent: this connection is out of step */
	return rrc == 0 ? 0 : rc;
}

/* ---- the request ----------------------------------------------------------------------------- */

static bool token(const char *s, size_t n)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		      strchr("!#$%&'*+-.^_`|~", s[i])))
			return false;
	return true;
}

static bool header_is(const char *h, size_t n, const char *name)
{
	return n == strlen(name) && strncasecmp(h, name, n) == 0;
}

/* The request's head into out (our own headers last). DP_EINVAL with em for what cannot be sent. */
static int build_head(const struct webc_conn *c, const struct webc_req *r, struct buf *out, struct err_msg *em)
{
	size_t tlen = r->target ? strlen(r->target) : 0;

	if (r->method == NULL || !token(r->method, strlen(r->method)) || strlen(r->method) > 16)
		return err_set(em, DP_EINVAL, "the method is not an HTTP token");
	if (tlen == 0 || tlen > TARGET_MAX || r->target[0] != '/')
		return err_set(em, DP_EINVAL, "the target is empty, over %d bytes, or does not begin with /", TARGET_MAX);
	for (size_t i = 0; i < tlen; i++)
		if ((unsigned char)r->target[i] <= 0x20 || (unsigned char)r->target[i] >= 0x7f)
			return err_set(em, DP_EINVAL, "the target has a space, a control byte or a byte past ASCII");
	if (r->body && r->body_fn)
		return err_set(em, DP_EINVAL, "the request has both a body in memory and a streamed body");
	if (c->px.host && !c->tls) /* absolute-form, to a proxy (RFC 9112 3.2.2) */
		buf_printf(out, "%s http://%s%s HTTP/1.1\r\nHost: %s\r\n%s%s", r->method, c->host_hdr, r->target,
			   c->host_hdr, c->px.auth ? c->px.auth : "", c->px.auth ? "\r\n" : "");
	else
		buf_printf(out, "%s %s HTTP/1.1\r\nHost: %s\r\n", r->method, r->target, c->host_hdr);
	for (size_t i = 0; r->headers && r->headers[i]; i++) {
		const char *h = r->headers[i], *colon = strchr(h, ':');
		size_t nlen = colon ? (size_t)(colon - h) : 0;

		if (colon == NULL || !token(h, nlen) || strpbrk(h, "\r\n"))
			return err_set(em, DP_EINVAL, "request header %zu is not one \"Name: value\" line", i + 1);
		if (header_is(h, nlen, "host") || header_is(h, nlen, "content-length") ||
		    header_is(h, nlen, "connection") || header_is(h, nlen, "transfer-encoding"))
			return err_set(em, DP_EINVAL, "request header %.*s is webc's own", (int)nlen, h);
		if (buf_printf(out, "%s\r\n", h) != 0)
			return err_set(em, DP_EINVAL, "the request's head passes %d bytes", WEBC_HEAD_OUT_MAX);
	}
	if (r->body || r->body_fn || strcmp(r->method, "PUT") == 0 || strcmp(r->method, "POST") == 0)
		buf_printf(out, "Content-Length: %zu\r\n", r->body || r->body_fn ? r->body_len : 0);
	if (buf_puts(out, "Connection: keep-alive\r\n\r\n") != 0)
		return err_set(em, DP_EINVAL, "the request's head passes %d bytes", WEBC_HEAD_OUT_MAX);
	if (r->body && r->body_len <= INLINE_BODY && buf_append(out, r->body, r->body_len) != 0)
		return err_set(em, DP_EINVAL, "the request's head passes %d bytes", WEBC_HEAD_OUT_MAX);
	return 0;
}

int webc_request(struct webc_conn *c, const struct webc_req *req, struct webc_resp *resp, struct err_msg *em)
{
	struct buf head;
	int rc;

	buf_init(&head, WEBC_HEAD_OUT_MAX + INLINE_BODY);
	memset(resp, 0, sizeof(*resp));
	buf_init(&resp->body, 0);
	if ((rc = build_head(c, req, &head, em)) != 0)
		goto out;
	if (webc_cancelled(&c->o)) {
		rc = err_set(em, DP_ECANCELED, "cancelled before it was sent");
		goto out;
	}
	for (int tries = 0;; tries++) {
		struct attempt at = { 0 };
		bool reused = c->fd >= 0;

		if (reused && webc_conn_stale(c)) {
			webc_conn_drop(c);
			reused = false;
		}
		if (c->fd < 0 && (rc = webc_conn_connect(c, em)) != 0)
			break;
		webc_resp_free(resp);
		if ((rc = exchange(c, req, &head, resp, &at, em)) == 0)
			break;
		webc_conn_drop(c);
		if (!(reused && tries == 0 && at.gone && !at.any))
			break;
		if (at.consumed) {
			rc = err_set(em, DP_EIO, "the server closed the kept-alive connection as the request went out, "
						 "and its streamed body cannot be sent again");
			break;
		}
	}
out:
	if (rc != 0) {
		const char *t = req->target ? req->target : "";

		err_prefix(em, "%s %s://%s%.*s", req->method ? req->method : "?", c->tls ? "https" : "http", c->host_hdr,
			   (int)(strcspn(t, "?") < 256 ? strcspn(t, "?") : 256), t);
		webc_resp_free(resp);
		buf_init(&resp->body, 0);
	}
	mem_wipe(head.data, head.alloc);
	buf_free(&head);
	return rc;
}

/*
 * webc_conn.c - webc's connection (webc_int.h): the base URL, the
 * connection (getaddrinfo, every address put to the caller's allowlist
 * before connect, a non-blocking connect under connect_timeout_ms, through
 * an http:// proxy's CONNECT tunnel when there is one, TLS by
 * webc_tls.c), and the bytes both ways on it, every wait a poll under
 * io_timeout_ms that also watches the caller's cancel fd. webc.c sends the
 * requests on it.
 */
#include "webc_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clock.h"
#include "mem.h"

/* ---- the URL --------------------------------------------------------------------------------- */

static int parse_port(const char *s, size_t n, char out[8])
{
	unsigned long v = 0;

	if (n == 0 || n > 5)
		return DP_EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return DP_EINVAL;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return DP_EINVAL;
	snprintf(out, 8, "%lu", v);
	return 0;
}

static bool host_chars(const char *h, size_t n)
{
	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') || (h[i] >= '0' && h[i] <= '9') ||
		      h[i] == '.' || h[i] == '-' || h[i] == '_'))
			return false;
	return true;
}

static int parse_url(const char *url, struct webc_conn *c, struct err_msg *em)
{
	const char *a, *end, *port = NULL;
	unsigned char v6[16];
	size_t hlen;

	if (strncasecmp(url, "https://", 8) == 0)
		c->tls = true, a = url + 8;
	else if (strncasecmp(url, "http://", 7) == 0)
		a = url + 7;
	else
		return err_set(em, DP_EINVAL, "the base URL is neither http:// nor https://");
	end = a + strcspn(a, "/?#");
	if (memchr(a, '@', (size_t)(end - a)))
		return err_set(em, DP_EINVAL, "the base URL has user information, which webc does not send");
	if (*a == '[') {
		const char *rb = memchr(a, ']', (size_t)(end - a));

		hlen = rb ? (size_t)(rb - a - 1) : 0;
		c->host = mem_strndup(a + 1, hlen);
		if (rb == NULL || inet_pton(AF_INET6, c->host, v6) != 1 || (rb + 1 != end && rb[1] != ':'))
			return err_set(em, DP_EINVAL, "the base URL's host is not a valid [IPv6] address");
		port = rb + 1 != end ? rb + 2 : NULL;
	} else {
		const char *colon = memchr(a, ':', (size_t)(end - a));

		hlen = (size_t)((colon ? colon : end) - a);
		if (!host_chars(a, hlen))
			return err_set(em, DP_EINVAL, "the base URL's host is empty or not a host name");
		c->host = mem_strndup(a, hlen);
		port = colon ? colon + 1 : NULL;
	}
	if (port && parse_port(port, (size_t)(end - port), c->port) != 0)
		return err_set(em, DP_EINVAL, "the base URL's port is not a number from 1 to 65535");
	if (port == NULL || strcmp(c->port, c->tls ? "443" : "80") == 0) {
		snprintf(c->port, sizeof(c->port), "%s", c->tls ? "443" : "80");
		c->host_hdr = strchr(c->host, ':') ? mem_printf("[%s]", c->host) : mem_strdup(c->host);
	} else {
		c->host_hdr = mem_printf(strchr(c->host, ':') ? "[%s]:%s" : "%s:%s", c->host, c->port);
	}
	return 0;
}

int webc_open(const char *base_url, const struct webc_opts *o, struct webc_conn **out, struct err_msg *em)
{
	struct webc_conn *c = mem_zalloc(sizeof(*c));
	int rc;

	c->fd = -1;
	if (o)
		c->o = *o;
	if ((rc = parse_url(base_url, c, em)) != 0) {
		webc_close(c);
		return rc;
	}
	if (c->o.ca_file)
		c->o.ca_file = c->ca_file = mem_strdup(c->o.ca_file);
	if (c->o.proxy && (rc = webc_proxy_parse(c->o.proxy, &c->px, em)) != 0) {
		webc_close(c);
		return rc;
	}
	c->o.proxy = NULL; /* the caller's string: c->px holds what is needed of it */
	/* libssl and the CA bundle now: a bad bundle fails here, and a sandbox entered after this needs neither */
	if (c->tls && (rc = webc_tls_ctx_new(&c->o, &c->tctx, em)) != 0) {
		webc_close(c);
		return rc;
	}
	if (c->o.connect_timeout_ms <= 0)
		c->o.connect_timeout_ms = 10000;
	if (c->o.io_timeout_ms <= 0)
		c->o.io_timeout_ms = 30000;
	if (c->o.answer_timeout_ms <= 0)
		c->o.answer_timeout_ms = 600000;
	*out = c;
	return 0;
}

void webc_conn_drop(struct webc_conn *c)
{
	webc_tls_free(c->t);
	c->t = NULL;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->served = 0;
}

void webc_close(struct webc_conn *c)
{
	if (c == NULL)
		return;
	webc_conn_drop(c);
	webc_tls_ctx_free(c->tctx);
	webc_proxy_free(&c->px);
	mem_free(c->host);
	mem_free(c->host_hdr);
	mem_free(c->ca_file);
	mem_free(c);
}

/* ---- waiting, connecting --------------------------------------------------------------------- */

/* Whether c's cancel fd is readable (the upload was given up on). */
bool webc_cancelled(const struct webc_opts *o)
{
	struct pollfd p = { .fd = o->cancel_fd ? *o->cancel_fd : -1, .events = POLLIN };

	return o->cancel_fd && poll(&p, 1, 0) > 0;
}

/*
 * Until fd is ready for events, at most ms, or o's cancel fd is readable. 0, DP_EIO with em
 * ("... within N ms") or DP_ECANCELED.
 */
static int wait_fd(const struct webc_opts *o, int fd, short events, long ms, const char *doing, struct err_msg *em)
{
	long long until = clock_ms() + ms;
	struct pollfd p[2] = { { .fd = fd, .events = events }, { .fd = o->cancel_fd ? *o->cancel_fd : -1,
								   .events = POLLIN } };

	for (;;) {
		long long left = until - clock_ms();
		int r = poll(p, 2, left > 0 ? (int)left : 0); /* an fd of -1 is left out */

		if (r > 0 && p[1].revents)
			return err_set(em, DP_ECANCELED, "cancelled %s", doing);
		if (r > 0)
			return 0;
		if (r == 0)
			return err_set(em, DP_EIO, "no progress %s within %ld ms", doing, ms);
		if (errno != EINTR)
			return err_set(em, DP_EIO, "poll failed %s: %s", doing, strerror(errno));
	}
}

static void cap_ms(long *v, long max)
{
	if (*v <= 0 || *v > max)
		*v = max;
}

void webc_opts_cleanup(struct webc_opts *o)
{
	o->cancel_fd = NULL;
	cap_ms(&o->connect_timeout_ms, 5000);
	cap_ms(&o->io_timeout_ms, 5000);
	cap_ms(&o->answer_timeout_ms, 10000);
}

int webc_pause(const struct webc_opts *o, long ms)
{
	struct pollfd p = { .fd = o && o->cancel_fd ? *o->cancel_fd : -1, .events = POLLIN };
	long long until = clock_ms() + ms;

	for (;;) {
		long long left = until - clock_ms();

		if (left <= 0)
			return 0;
		if (poll(&p, 1, (int)left) > 0) /* with no fd, poll is a sleep */
			return DP_ECANCELED;
	}
}

static long left_ms(long long deadline)
{
	long long l = deadline - clock_ms();

	return l > 0 ? (long)l : 0;
}

/* One address: a socket connected to it before the deadline, or -1 with why (*stop when cancelled). */
static int connect_one(const struct webc_opts *o, const struct addrinfo *ai, long long deadline, bool *stop, char *why,
		       size_t whylen)
{
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), err = 0, one = 1;
	socklen_t len = sizeof(err);
	struct err_msg tmp;

	if (fd < 0) {
		snprintf(why, whylen, "socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		err = errno;
		int w = err == EINPROGRESS ? wait_fd(o, fd, POLLOUT, left_ms(deadline), "connecting", &tmp) : 0;

		*stop = w == DP_ECANCELED;
		if (w != 0)
			err = *stop ? ECANCELED : ETIMEDOUT;
		else if (err == EINPROGRESS)
			err = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ? errno : err;
	}
	if (err) {
		snprintf(why, whylen, "%s", strerror(err));
		close(fd);
		return -1;
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* a head and its body, not Nagle's wait */
	return fd;
}

static void addr_text(const struct sockaddr *sa, char *out, size_t n)
{
	const void *a = sa->sa_family == AF_INET6 ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
						  : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;

	if (inet_ntop(sa->sa_family, a, out, (socklen_t)n) == NULL)
		snprintf(out, n, "?");
}

static int tls_handshake(struct webc_conn *c, long long deadline, struct err_msg *em)
{
	int rc;

	if ((rc = webc_tls_new(c->tctx, c->fd, c->host, &c->t, em)) != 0)
		return rc;
	while ((rc = webc_tls_handshake(c->t, em)) == WEBC_WANT_READ || rc == WEBC_WANT_WRITE)
		if ((rc = wait_fd(&c->o, c->fd, rc == WEBC_WANT_READ ? POLLIN : POLLOUT, left_ms(deadline),
				  "in the TLS handshake", em)) != 0)
			return rc;
	return rc;
}

static long io_once(struct webc_conn *c, bool out, char *p, size_t n, bool *gone, struct err_msg *em);

/*
 * Through the proxy to host:port (CONNECT, RFC 9110 9.3.6), before the deadline: 0 once the proxy answered
 * 2xx, else DP_EIO (no answer, or another status) or DP_EREMOTE with em.
 */
static int tunnel(struct webc_conn *c, long long deadline, struct err_msg *em)
{
	struct buf out, in;
	size_t head = 0, sent = 0;
	int rc = 0, status = 0;
	bool gone = false;
	const char *v6 = strchr(c->host, ':') ? "[" : "";

	buf_init(&out, WEBC_HEAD_OUT_MAX);
	buf_init(&in, WEBC_HEAD_MAX + WEBC_READ_CHUNK);
	buf_printf(&out, "CONNECT %s%s%s:%s HTTP/1.1\r\nHost: %s%s%s:%s\r\n%s%s\r\n", v6, c->host, *v6 ? "]" : "",
		   c->port, v6, c->host, *v6 ? "]" : "", c->port, c->px.auth ? c->px.auth : "", c->px.auth ? "\r\n" : "");
	while (rc == 0 && (sent < out.len || head == 0)) {
		bool w = sent < out.len;
		long r;

		if (!w && buf_reserve(&in, WEBC_READ_CHUNK) != 0) {
			rc = err_set(em, DP_EREMOTE, "the proxy's answer to CONNECT passes %d bytes", WEBC_HEAD_MAX);
			break;
		}
		r = w ? io_once(c, true, out.data + sent, out.len - sent, &gone, em)
		      : io_once(c, false, in.data + in.len, WEBC_READ_CHUNK, &gone, em);
		if (r == WEBC_WANT_READ || r == WEBC_WANT_WRITE)
			rc = wait_fd(&c->o, c->fd, r == WEBC_WANT_READ ? POLLIN : POLLOUT, left_ms(deadline),
				     "through the proxy", em);
		else if (r == 0)
			rc = err_set(em, DP_EIO, "the proxy closed the connection before it answered CONNECT");
		else if (r < 0)
			rc = (int)r;
		else if (w)
			sent += (size_t)r;
		else if ((in.len += (size_t)r, rc = webc_proxy_answer(in.data, in.len, &head, &status, em)) == 1)
			rc = 0;
	}
	/* a proxy sends nothing after its 2xx head until the server speaks, which it does not before our hello */
	if (rc == 0 && (status < 200 || status > 299 || in.len != head))
		rc = err_set(em, DP_EIO, "the proxy %s port %s answered CONNECT with HTTP %d", c->px.host, c->px.port,
			     status);
	mem_wipe(out.data, out.len); /* Proxy-Authorization */
	buf_free(&out);
	buf_free(&in);
	return rc;
}

/*
 * Resolve, check, connect (to the proxy when there is one, and through it), and for https the handshake, all
 * before connect_timeout_ms.
 */
int webc_conn_connect(struct webc_conn *c, struct err_msg *em)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	long long deadline = clock_ms() + c->o.connect_timeout_ms;
	char why[160] = "", addr[INET6_ADDRSTRLEN] = "";
	const char *host = c->px.host ? c->px.host : c->host, *port = c->px.host ? c->px.port : c->port;
	int rc, n = 0, refused = 0;
	bool stop = false;

	if ((rc = getaddrinfo(host, port, &hints, &res)) != 0)
		return err_set(em, DP_EIO, "cannot resolve %s%s: %s", c->px.host ? "the proxy " : "", host,
			       rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
	for (const struct addrinfo *ai = res; ai && c->fd < 0 && !stop; ai = ai->ai_next) {
		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		n++;
		addr_text(ai->ai_addr, addr, sizeof(addr));
		if (c->o.allow && !c->o.allow(c->o.allow_ctx, host, ai->ai_addr, ai->ai_addrlen)) {
			refused++;
			continue;
		}
		c->fd = connect_one(&c->o, ai, deadline, &stop, why, sizeof(why));
	}
	freeaddrinfo(res);
	if (stop)
		return err_set(em, DP_ECANCELED, "cancelled while connecting to %s port %s", host, port);
	if (c->fd < 0) {
		if (n > 0 && refused == n)
			return err_set(em, DP_EIO, "no address of %s is allowed (%d refused, the last %s)", host, refused,
				       addr);
		return err_set(em, DP_EIO, "cannot connect to %s%s port %s (%s): %s", c->px.host ? "the proxy " : "",
			       host, port, addr, n ? why : "no address");
	}
	if (c->px.host && c->tls && (rc = tunnel(c, deadline, em)) != 0) {
		webc_conn_drop(c);
		return rc;
	}
	if (c->tls && (rc = tls_handshake(c, deadline, em)) != 0) {
		webc_conn_drop(c);
		return rc;
	}
	return 0;
}

/* Has the server closed a kept-alive connection (or sent something unasked) while it was idle? */
bool webc_conn_stale(const struct webc_conn *c)
{
	struct pollfd p = { .fd = c->fd, .events = POLLIN };

	return poll(&p, 1, 0) != 0;
}

/* ---- bytes both ways ------------------------------------------------------------------------- */

/*
 * One send or receive, TLS or not: bytes (> 0), 0 at the server's close,
 * WEBC_WANT_READ / WEBC_WANT_WRITE, WEBC_EOF_UNCLEAN, or DP_EIO with em
 * (*gone when the server closed or reset the connection).
 */
static long io_once(struct webc_conn *c, bool out, char *p, size_t n, bool *gone, struct err_msg *em)
{
	long r;

	if (c->t) {
		r = out ? webc_tls_write(c->t, p, n, em) : webc_tls_read(c->t, p, n, em);
		*gone |= r == DP_EIO;
		return r;
	}
	do
		r = out ? send(c->fd, p, n, MSG_NOSIGNAL) : recv(c->fd, p, n, 0);
	while (r < 0 && errno == EINTR);
	if (r >= 0)
		return r;
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return out ? WEBC_WANT_WRITE : WEBC_WANT_READ;
	*gone = errno == EPIPE || errno == ECONNRESET;
	return err_set(em, DP_EIO, "%s failed: %s", out ? "sending" : "receiving", strerror(errno));
}

/* io_once until it moves bytes or fails, waiting (poll, io_timeout_ms) for what it asks for. */
static long io(struct webc_conn *c, bool out, char *p, size_t n, bool *gone, struct err_msg *em)
{
	for (;;) {
		long r = io_once(c, out, p, n, gone, em);

		if (r != WEBC_WANT_READ && r != WEBC_WANT_WRITE)
			return r;
		int w = wait_fd(&c->o, c->fd, r == WEBC_WANT_READ ? POLLIN : POLLOUT, c->o.io_timeout_ms,
				out ? "sending" : "waiting for the answer", em);

		if (w != 0)
			return w;
	}
}

/* All n bytes out. 0, or DP_EIO with em; *gone when the server had closed or reset the connection. */
int webc_conn_send(struct webc_conn *c, const char *p, size_t n, bool *gone, struct err_msg *em)
{
	while (n > 0) {
		long r = io(c, true, (char *)p, n, gone, em); /* send does not write to p */

		if (r <= 0)
			return r == 0 ? err_set(em, DP_EIO, "sending failed: nothing was written") : (int)r;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Some bytes in: > 0, 0 at the server's close, or DP_EIO with em (*gone for a reset or an unclean TLS close). */
long webc_conn_recv(struct webc_conn *c, char *p, size_t n, bool *gone, struct err_msg *em)
{
	long r = io(c, false, p, n, gone, em);

	if (r != WEBC_EOF_UNCLEAN)
		return r;
	*gone = true;
	return err_set(em, DP_EIO, "the server closed the TLS connection without close_notify");
}
